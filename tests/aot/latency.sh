#!/usr/bin/env bash
# The first call of a new process, from a library against the JIT (part of
# make bench-latency; docs/aot.md): for add, sin, exp and the Mandelbrot
# kernel on cpu, the median of 5 processes of
#   - a library through libkjit-rt (load + first call),
#   - a cold JIT compile (an empty disk cache) through libkjit,
#   - a warm disk cache through libkjit (the second process),
# each both from main (in the process) and as the whole process (exec and
# dynamic linking included: libkjit carries LLVM); then the host cost of a
# call from a library against the JIT's (call_cost.c, the best of 5 processes
# alternating); then libkjit-rt's size stripped and each example's library
# size (all three x86-64 levels).
# Usage: tests/aot/latency.sh [build folder]
set -u
BUILD=${1:-build}
KJIT=$BUILD/kjit
OUT=$BUILD/aot-latency
rm -rf "$OUT" && mkdir -p "$OUT/libs" && chmod 700 "$OUT" "$OUT/libs"
CC=${CC:-cc}
$CC -std=c11 -D_GNU_SOURCE -O2 -Iruntime tests/aot/first_call.c -o "$OUT/first-rt" \
    -L"$BUILD" -lkjit-rt -lm -Wl,-rpath,"$PWD/$BUILD" || exit 1
$CC -std=c11 -D_GNU_SOURCE -O2 -Iruntime tests/aot/first_call.c -o "$OUT/first-jit" \
    -L"$BUILD" -lkjit -lm -Wl,-rpath,"$PWD/$BUILD" || exit 1
$CC -std=c11 -D_GNU_SOURCE -O2 -Iruntime tests/aot/call_cost.c -o "$OUT/cost-rt" \
    -L"$BUILD" -lkjit-rt -lm -Wl,-rpath,"$PWD/$BUILD" || exit 1
$CC -std=c11 -D_GNU_SOURCE -O2 -Iruntime tests/aot/call_cost.c -o "$OUT/cost-jit" \
    -L"$BUILD" -lkjit -lm -Wl,-rpath,"$PWD/$BUILD" || exit 1
export KJIT_CACHE_DIR="$PWD/$OUT/cache"
unset KJIT_VERIFY KJIT_CPU_FEATURES

# median of the 5 values on stdin
median() { sort -g | sed -n 3p; }
# run CMD...: "in-process whole-process" milliseconds
run() {
    local start end inner
    start=$(date +%s%N)
    inner=$("$@") || return 1
    end=$(date +%s%N)
    echo "$inner $(( (end - start) / 1000 ))"
}

printf '| first call, cpu (ms, median of 5; in the process / whole process) | library (libkjit-rt) | cold JIT | warm disk cache |\n'
printf '| --- | --- | --- | --- |\n'
for pair in add:add sin:vsin exp:vexp mandelbrot:mandel_kernel; do
    ex=${pair%%:*} fn=${pair#*:}
    "$KJIT" build "examples/$ex.kern" --emit=lib -o "$OUT/libs/lib$ex.so" || exit 1
    for mode in lib cold warm; do
        : >"$OUT/$mode.txt"
        for i in 1 2 3 4 5; do
            case $mode in
            lib) run "$OUT/first-rt" --lib "$OUT/libs/lib$ex.so" "$fn" ;;
            cold) rm -rf "$KJIT_CACHE_DIR"; run "$OUT/first-jit" --kern "examples/$ex.kern" "$fn" ;;
            warm) run "$OUT/first-jit" --kern "examples/$ex.kern" "$fn" ;;
            esac >>"$OUT/$mode.txt" || exit 1
        done
        inner=$(cut -d' ' -f1 "$OUT/$mode.txt" | median)
        whole=$(cut -d' ' -f2 "$OUT/$mode.txt" | median)
        printf -v "cell_$mode" '%.2f / %.1f' "$inner" "$(echo "$whole / 1000" | bc -l)"
    done
    printf '| %s (%s) | %s | %s | %s |\n' "$ex" "$fn" "$cell_lib" "$cell_cold" "$cell_warm"
done

# The host cost of a call: the same root from the library and from the JIT,
# 5 processes each, alternating (the machine's load moves both alike).
printf '\n| host cost of a call, cpu (ns, best of 5) | library (libkjit-rt) | JIT (libkjit) | library / JIT |\n'
printf '| --- | --- | --- | --- |\n'
for pair in add:add mandelbrot:mandel_kernel; do
    ex=${pair%%:*} fn=${pair#*:}
    : >"$OUT/cost-lib.txt"; : >"$OUT/cost-jit.txt"
    for i in 1 2 3 4 5; do
        "$OUT/cost-rt" --lib "$OUT/libs/lib$ex.so" "$fn" >>"$OUT/cost-lib.txt" || exit 1
        "$OUT/cost-jit" --kern "examples/$ex.kern" "$fn" >>"$OUT/cost-jit.txt" || exit 1
    done
    lib=$(sort -g "$OUT/cost-lib.txt" | head -1) jit=$(sort -g "$OUT/cost-jit.txt" | head -1)
    case $fn in add) what="add, 16 f32 (kjit_call)" ;; *) what="mandel_kernel, 1 thread (kjit_launch)" ;; esac
    printf '| %s | %s | %s | %.3f |\n' "$what" "$lib" "$jit" "$(echo "$lib / $jit" | bc -l)"
done

strip -o "$OUT/rt.so" "$BUILD/libkjit-rt.so" && strip -o "$OUT/jit.so" "$BUILD/libkjit.so"
printf '\nlibkjit-rt stripped: %d bytes (libkjit, with LLVM: %d bytes)\n\n' \
    "$(stat -c %s "$OUT/rt.so")" "$(stat -c %s "$OUT/jit.so")"
printf '| example | library (sse2, v3, v4) | build time |\n| --- | --- | --- |\n'
for kern in examples/*.kern; do
    ex=$(basename "$kern" .kern)
    start=$(date +%s%N)
    "$KJIT" build "$kern" --emit=lib -o "$OUT/libs/all_$ex.so" || exit 1
    end=$(date +%s%N)
    printf '| %s | %d bytes | %.1f s |\n' "$ex" "$(stat -c %s "$OUT/libs/all_$ex.so")" \
        "$(echo "($end - $start) / 1000000000" | bc -l)"
done
