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
# $show_err of $tmp/err; `finish` prints the counts and fails after a failure.
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

finish() {
    echo "$script: $passed passed, $failed failed"
    [ "$failed" = 0 ]
}
