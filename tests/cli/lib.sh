# lib.sh: the preamble of the tests/cli scripts, which source it first:
#
#   . "$(dirname "$0")/lib.sh"
#
# It takes the kjit command under test from the script's $1 (build/kjit by
# default; exit 2 when it is not built), points KJIT_STDLIB at the
# repository's stdlib unless it is set, makes $tmp (removed on exit) and the
# counters that ok and bad keep, and lists in $targets the targets to run on:
# cpu and parallel, and cuda where a GPU is usable.  `bad DESCRIPTION` counts
# a failure and shows the first $show_out lines of $tmp/out (0: none) and
# $show_err of $tmp/err; `finish` prints the counts and fails after a failure;
# `own_cache_entries` tests that measuring switches are in the cache key.
# It is no test itself: tests/cli/cli.mk runs the other scripts.
set -u
script=$(basename "$0")
kjit=${1:-build/kjit}
if [ ! -x "$kjit" ]; then
    echo "$script: $kjit is not built" >&2
    exit 2
fi
: "${KJIT_STDLIB:=$PWD/stdlib}"
export KJIT_STDLIB
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
passed=0
failed=0
show_out=20
show_err=10

ok() { passed=$((passed + 1)); }
bad() {
    failed=$((failed + 1))
    echo "FAIL: $1"
    [ "$show_out" -gt 0 ] && [ -f "$tmp/out" ] && sed 's/^/    | /' "$tmp/out" | head -"$show_out"
    [ -s "$tmp/err" ] && sed 's/^/    ! /' "$tmp/err" | head -"$show_err"
}

targets="cpu parallel"
if "$kjit" info 2>/dev/null | grep -q '^  cuda *yes'; then targets="$targets cuda"; fi

# own_cache_entries WORD BASE "SWITCH..." KJIT-RUN-ARGS...: `kjit run
# KJIT-RUN-ARGS` in a cache folder of its own, first with the environment
# assignment BASE (may be empty), then twice with each SWITCH; after each run
# the `kjit cache list` lines holding WORD are counted.  Each switch must be
# in the cache key: its first run compiles entries of its own (the count
# grows) and its second finds them (it stays).  One ok or bad a switch.
cache_entries_after() { # CACHE WORD SWITCH KJIT-RUN-ARGS...
    cea_cache=$1 cea_word=$2 cea_switch=$3
    shift 3
    env $cea_switch KJIT_CACHE=on KJIT_CACHE_DIR="$cea_cache" "$kjit" run "$@" >"$tmp/out" \
        2>"$tmp/err" || cat "$tmp/err" >&2
    KJIT_CACHE_DIR="$cea_cache" "$kjit" cache list | grep -c "$cea_word"
}
own_cache_entries() {
    oce_word=$1 oce_base=$2 oce_switches=$3
    shift 3
    oce_cache=$(mktemp -d "$tmp/cache.XXXXXX")
    oce_before=$(cache_entries_after "$oce_cache" "$oce_word" "$oce_base" "$@")
    for oce_switch in $oce_switches; do
        oce_first=$(cache_entries_after "$oce_cache" "$oce_word" "$oce_switch" "$@")
        oce_second=$(cache_entries_after "$oce_cache" "$oce_word" "$oce_switch" "$@")
        if [ "$oce_before" -ge 1 ] && [ "$oce_first" -gt "$oce_before" ] &&
            [ "$oce_second" = "$oce_first" ]; then ok
        else bad "$oce_switch compiles its own cache entries (entries after each run:
            $oce_before $oce_first $oce_second)"; fi
        oce_before=$oce_second
    done
}

finish() {
    echo "$script: $passed passed, $failed failed"
    [ "$failed" = 0 ]
}
