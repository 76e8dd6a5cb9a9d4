#!/usr/bin/env bash
# tests/gpu/reduce_columns.sh BEFORE AFTER: two bundles' cuda reductions side
# by side on the GPU machine (branch redptx: the COLUMNS form takes a full
# block through the short block's path, one copy of its loads where there
# were two; docs/performance.md).
#   1. examples/reduce.kern compiled whole to PTX (bin/latency --program
#      ... 2): wall ms and, KJIT_BENCH_CLOCK=thread, the process's CPU ms,
#      5 new processes a bundle, alternately, medians;
#   2. the run time: tests/gpu/reduce_rows.cu built with nvcc against each
#      bundle's library: sums of 1e8 f32 and f64, dot of 1e8 f32, the sums
#      along axis 1 (WARPS) and axis 0 (COLUMNS) of 10000x10000 f32, 3 rounds
#      a bundle, alternately, each a new process and cache; every result
#      checked against float64 sums (reduce_rows does) and both bundles'
#      results the same bits.
# Prints tables and "N passed, M failed".
set -u
before=$(cd "$1" && pwd) after=$(cd "$2" && pwd) || { echo "0 passed, 1 failed"; exit 1; }
here=$after/tests/gpu
. "$here/bundle.sh"
start_counts
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for b in "$before" "$after"; do
    (cd "$b" && unpack_libkjit) || { echo "cannot unpack $b/bin/libkjit.so.xz"; fail "unpack"; }
done
libdevice_env() { # the toolkit's libdevice, or else the bundle's copy
    if "$1/bin/kjit" info | grep -q '^libdevice:  /'; then echo REDUCE_COLUMNS_LIBDEVICE=toolkit; else
        echo "KJIT_LIBDEVICE=$1/libdevice/libdevice.10.bc"; fi
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1
echo "before: $before; after: $after"

echo "=== 1. examples/reduce.kern to PTX (latency --program ... 2), median of 5"
declare -A wall=() cpu=()
for r in 1 2 3 4 5; do
    for v in before after; do
        b=${!v}
        cd "$b" || exit 1
        w=$(env "$(libdevice_env "$b")" KJIT_STDLIB="$b/stdlib" KJIT_CACHE_DIR="$work/c-$v-$r" \
            bin/latency --program examples/reduce.kern 2 | awk '{print $1}')
        c=$(env "$(libdevice_env "$b")" KJIT_STDLIB="$b/stdlib" KJIT_CACHE_DIR="$work/d-$v-$r" \
            KJIT_BENCH_CLOCK=thread bin/latency --program examples/reduce.kern 2 | awk '{print $1}')
        wall[$v]="${wall[$v]:-} $w" cpu[$v]="${cpu[$v]:-} $c"
    done
done
med() { echo "$@" | tr ' ' '\n' | grep . | sort -g | sed -n 3p; }
printf '| bundle | wall ms (5) | median | CPU ms (5) | median |\n| --- | --- | ---: | --- | ---: |\n'
ok=1
for v in before after; do
    echo "| $v |${wall[$v]} | $(med ${wall[$v]}) |${cpu[$v]} | $(med ${cpu[$v]}) |"
    [ -n "$(med ${wall[$v]})" ] || ok=0
done
[ "$ok" = 1 ] && pass "PTX compile times" || fail "PTX compile times"

echo "=== 2. run time on device arrays (median ms of 20 calls), 3 rounds a bundle, alternately"
ok=1
for v in before after; do
    b=${!v}
    nvcc -O3 -arch=sm_90 -std=c++17 -I"$b/runtime" -o "$work/rows-$v" "$b/tests/gpu/reduce_rows.cu" \
        -L"$b/bin" -lkjit -Xlinker -rpath="$b/bin" > "$work/nvcc-$v.log" 2>&1 ||
        { cat "$work/nvcc-$v.log"; ok=0; }
done
if [ "$ok" = 1 ]; then
    for round in 1 2 3; do
        for v in before after; do
            b=${!v}
            cd "$b" || exit 1
            env "$(libdevice_env "$b")" KJIT_STDLIB="$b/stdlib" KJIT_CACHE_DIR="$work/r-$v-$round" \
                "$work/rows-$v" examples/reduce.kern > "$work/$v.$round.txt" 2>&1 ||
                { ok=0; tail -5 "$work/$v.$round.txt"; }
        done
    done
    python3 "$here/reduce_rows_table.py" "$work" before after || ok=0
fi
[ "$ok" = 1 ] && pass "reduce rows, both bundles, the same bits" || fail "reduce rows, both bundles, the same bits"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
