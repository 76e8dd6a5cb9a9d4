#!/bin/sh
# run.sh: the golden tests.  Each tests/golden/<group>/<name>.kern sits beside
# what kjit must say about it:
#   <name>.ast  stdout of `kjit check --dump=ast FILE` (exit 0)
#   <name>.ir   stdout of `kjit check --dump=ir FILE`  (exit 0)
#   <name>.err  stderr of `kjit check FILE`, exactly   (exit 1)
#   <name>.warn stderr of `kjit check FILE`, exactly   (exit 0): its warnings
#   <name>.run  stderr of `kjit run --check FILE ARGS` on cpu and parallel (and
#               cuda where a GPU is usable), the same on each (exit 1): a
#               failed run-time check; ARGS is the file's first line after
#               `// run: `
#   <name>.race stderr of `kjit run --check=race FILE ARGS` on cpu and parallel
#               (never cuda: race checking runs on the host), the same on
#               each (exit 1): a data race or a synchronisation error; ARGS
#               as for .run
#   <name>.out  what `kjit run FILE ARGS` prints before its own report (the
#               program's print lines), on cpu and parallel (and cuda), exit 0;
#               lines compared sorted, as threads print in any order; ARGS as
#               for .run
# A .kern with none of these is a helper (an imported module) and is skipped.
# Run from the repository root, so that paths in messages read
# tests/golden/<group>/<name>.kern:
#
#   tests/golden/run.sh build/kjit              compare, print a diff on mismatch
#   tests/golden/run.sh --update build/kjit     rewrite the expectations
#   tests/golden/run.sh build/kjit FILE.kern... only these
set -u
update=0
kjit=
files=
for arg in "$@"; do
    case $arg in
    --update) update=1 ;;
    *.kern) files="$files $arg" ;;
    *) kjit=$arg ;;
    esac
done
kjit=${kjit:-build/kjit}
if [ ! -x "$kjit" ]; then
    echo "run.sh: $kjit is not built" >&2
    exit 2
fi
[ -n "$files" ] || files=$(find tests/golden -name '*.kern' | LC_ALL=C sort)
: "${KJIT_STDLIB:=$PWD/stdlib}"
export KJIT_STDLIB

targets="cpu parallel"
if "$kjit" info 2>/dev/null | grep -q '^  cuda *yes'; then targets="$targets cuda"; fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
passed=0
failed=0

# check KERN EXPECTED KIND: KIND is ast, ir, err, run-TARGET or out-TARGET.
check() {
    kern=$1 expected=$2 kind=$3
    : >"$tmp/stderr"
    case $kind in
    ast) "$kjit" check --dump=ast "$kern" >"$tmp/got" 2>"$tmp/stderr"; rc=$? want_rc=0 ;;
    ir) "$kjit" check --dump=ir "$kern" >"$tmp/got" 2>"$tmp/stderr"; rc=$? want_rc=0 ;;
    err) "$kjit" check "$kern" >/dev/null 2>"$tmp/got"; rc=$? want_rc=1 ;;
    warn) "$kjit" check "$kern" >/dev/null 2>"$tmp/got"; rc=$? want_rc=0 ;;
    run*) run_args=$(sed -n '1s|^// run: ||p' "$kern")
        # shellcheck disable=SC2086
        "$kjit" run --check "$kern" $run_args --target "${kind#run-}" >/dev/null 2>"$tmp/got"
        rc=$? want_rc=1 ;;
    race*) run_args=$(sed -n '1s|^// run: ||p' "$kern")
        # shellcheck disable=SC2086
        "$kjit" run --check=race "$kern" $run_args --target "${kind#race-}" >/dev/null 2>"$tmp/got"
        rc=$? want_rc=1 ;;
    out*) run_args=$(sed -n '1s|^// run: ||p' "$kern")
        function=${run_args%% *}
        # shellcheck disable=SC2086
        "$kjit" run "$kern" $run_args --target "${kind#out-}" >"$tmp/stdout" 2>"$tmp/stderr"
        rc=$? want_rc=0
        sed "/^$function .* on ${kind#out-}\$/,\$d" "$tmp/stdout" | LC_ALL=C sort >"$tmp/got" ;;
    esac
    if [ $update = 1 ]; then
        cp "$tmp/got" "$expected"
        if [ $rc != $want_rc ]; then
            echo "UPDATED $expected, but kjit exited $rc (expected $want_rc)"
            [ $kind = err ] || [ $kind = warn ] || cat "$tmp/stderr"
        fi
        passed=$((passed + 1))
        return
    fi
    if [ $rc = $want_rc ] && cmp -s "$expected" "$tmp/got"; then
        passed=$((passed + 1))
        return
    fi
    failed=$((failed + 1))
    echo "FAIL $kern ($kind): exit $rc, expected $want_rc"
    diff -u "$expected" "$tmp/got" | sed 's/^/    /'
    [ $kind = err ] || [ $kind = warn ] || sed 's/^/    stderr: /' "$tmp/stderr"
}

for kern in $files; do
    base=${kern%.kern}
    for kind in ast ir err warn; do
        [ -f "$base.$kind" ] && check "$kern" "$base.$kind" $kind
    done
    for runs in run race out; do # check() sets kind
        [ -f "$base.$runs" ] || continue
        for target in $targets; do
            [ $runs = race ] && [ $target = cuda ] && continue
            check "$kern" "$base.$runs" "$runs-$target"
            [ $update = 1 ] && break # the first target writes it; the others must agree
        done
    done
done

echo "golden: $passed passed, $failed failed"
[ $failed = 0 ]
