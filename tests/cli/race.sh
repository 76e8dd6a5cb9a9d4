#!/bin/sh
# race.sh: the race checker from the command line (run by `make test-cli`):
# the benchmarks' barrier kernels run clean under --check=race on cpu and
# parallel with the results of an unchecked run, a racy kernel fails the same
# way on both (and on every run) with KJIT_CHECK=race too, plain --check
# does not look for races, --check=all does, a bad --check= is a usage error,
# and cuda refuses the race checker naming compute-sanitizer.  (Every kernel
# of tests/golden, examples and the unit tests runs clean under the checker
# in `make test-modes`; the racy goldens are tests/golden/races.)
#
#   tests/cli/race.sh build/kjit
. "$(dirname "$0")/lib.sh"

# the benchmarks' kernels: clean, and the same sums as unchecked
for target in cpu parallel; do
    for case in "tests/bench/block_sum_barriers.kern block_sum" "tests/bench/simd.kern block_sum"; do
        set -- $case
        "$kjit" run "$1" "$2" rand:f32:65536 zeros:f32:256 --grid 256 --block 256 --seed 3 \
            --save 1="$tmp/plain.npy" --target $target >/dev/null 2>"$tmp/err" || { bad "$1 unchecked on $target"; continue; }
        if "$kjit" run "$1" "$2" rand:f32:65536 zeros:f32:256 --grid 256 --block 256 --seed 3 \
            --save 1="$tmp/race.npy" --target $target --check=race >/dev/null 2>"$tmp/err" &&
            cmp -s "$tmp/plain.npy" "$tmp/race.npy"; then ok; else bad "$1 $2 under --check=race on $target"; fi
    done
done

racy=tests/golden/races/tree_sum.kern
args="tree_sum rand:f32:1024 zeros:f32:4 --grid 4 --block 256"
# shellcheck disable=SC2086
"$kjit" run --check=race $racy $args --target cpu >/dev/null 2>"$tmp/first"
for target in cpu parallel; do
    # shellcheck disable=SC2086
    KJIT_CHECK=race "$kjit" run $racy $args --target $target >/dev/null 2>"$tmp/err"
    if [ $? = 1 ] && cmp -s "$tmp/first" "$tmp/err" && grep -q "races with the read" "$tmp/err"; then ok
    else bad "KJIT_CHECK=race on $target: the same report as --check=race"; fi
    # shellcheck disable=SC2086
    if "$kjit" run --check $racy $args --target $target >/dev/null 2>"$tmp/err"; then ok
    else bad "plain --check looks for no race on $target"; fi
    # shellcheck disable=SC2086
    "$kjit" run --check=all $racy $args --target $target >/dev/null 2>"$tmp/err"
    if [ $? = 1 ] && cmp -s "$tmp/first" "$tmp/err"; then ok; else bad "--check=all finds the race on $target"; fi
done

# shellcheck disable=SC2086
"$kjit" run --check=races $racy $args >/dev/null 2>"$tmp/err"
if [ $? = 2 ] && grep -q "takes values, race or all" "$tmp/err"; then ok; else bad "--check=races is a usage error"; fi

# shellcheck disable=SC2086
"$kjit" run --check=race $racy $args --target cuda >/dev/null 2>"$tmp/err"
if [ $? != 0 ] && grep -q "compute-sanitizer" "$tmp/err"; then ok; else bad "cuda refuses --check=race"; fi

finish
