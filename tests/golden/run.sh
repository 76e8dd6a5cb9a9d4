#!/bin/sh
# run.sh: the golden tests.  Each tests/golden/<group>/<name>.kern sits beside
# what kjit must say about it:
#   <name>.ast  stdout of `kjit check --dump=ast FILE` (exit 0)
#   <name>.ir   stdout of `kjit check --dump=ir FILE`  (exit 0)
#   <name>.err  stderr of `kjit check FILE`, exactly   (exit 1)
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

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
passed=0
failed=0

# check KERN EXPECTED KIND: KIND is ast, ir or err.
check() {
    kern=$1 expected=$2 kind=$3
    case $kind in
    ast) "$kjit" check --dump=ast "$kern" >"$tmp/got" 2>"$tmp/stderr"; rc=$? want_rc=0 ;;
    ir) "$kjit" check --dump=ir "$kern" >"$tmp/got" 2>"$tmp/stderr"; rc=$? want_rc=0 ;;
    err) "$kjit" check "$kern" >/dev/null 2>"$tmp/got"; rc=$? want_rc=1 ;;
    esac
    if [ $update = 1 ]; then
        cp "$tmp/got" "$expected"
        if [ $rc != $want_rc ]; then
            echo "UPDATED $expected, but kjit exited $rc (expected $want_rc)"
            [ $kind = err ] || cat "$tmp/stderr"
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
    [ $kind = err ] || sed 's/^/    stderr: /' "$tmp/stderr"
}

for kern in $files; do
    base=${kern%.kern}
    for kind in ast ir err; do
        [ -f "$base.$kind" ] && check "$kern" "$base.$kind" $kind
    done
done

echo "golden: $passed passed, $failed failed"
[ $failed = 0 ]
