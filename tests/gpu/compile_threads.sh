#!/usr/bin/env bash
# tests/gpu/compile_threads.sh [BUNDLE]: a whole file's cold compile
# (kjit_stage_file, what `kjit build` runs) with its roots in groups on one
# thread and on the machine's (KJIT_COMPILE_THREADS, codegen_groups.c; issue
# 25 item 1, docs/performance.md "Every program, cold"), on the GPU machine's
# host: examples/reduce.kern's every function on cpu (an object) and to PTX,
# then the PTX through ptxas, by the wall clock and by CPU time
# (KJIT_BENCH_CLOCK=thread: the compiling process's, every thread), median of
# 5 new processes, the thread counts interleaved; the same for a few small
# files (one group: no slower); and that the object and the PTX are the same
# bytes for 1 and N threads; then `kjit build --emit=lib` (its cuda roots
# with their ptxas runs, and its cpu objects, on the threads) on 1 and N, with
# cuda (one cpu level) and without (three).  Prints "N passed, M failed".
set -u
bundle=${1:-build/gpu-bundle}
. "$(dirname "$0")/bundle.sh"
enter_bundle "$bundle"
start_counts

cpus=$(nproc)
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $cpus CPUs online"
echo "LLVM host cpu: $("$root/bin/kjit" info 2>/dev/null | awk '/^host cpu:/ {print $3}')"

# median FILE: the median of the numbers in FILE, one a line
median() { sort -n "$1" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# times FILE KIND LABEL: medians of 5 runs of bin/latency --program FILE KIND
# (0 every function on cpu, 2 its PTX) for 1 thread and the default, by both
# clocks, interleaved
times() {
    local file=$1 kind=$2 label=$3 r t clock
    rm -f "$work"/t-*
    for r in 1 2 3 4 5; do
        for t in 1 default; do
            for clock in wall thread; do
                if [ "$t" = default ]; then
                    env -u KJIT_COMPILE_THREADS KJIT_BENCH_CLOCK=$clock \
                        "$root/bin/latency" --program "$file" "$kind"
                else
                    KJIT_COMPILE_THREADS=$t KJIT_BENCH_CLOCK=$clock \
                        "$root/bin/latency" --program "$file" "$kind"
                fi | awk '{print $1}' >> "$work/t-$t-$clock"
            done
        done
    done
    printf '| %s | %s | %.1f ms | %.1f ms | %.1f ms | %.1f ms |\n' "$file" "$label" \
        "$(median "$work/t-1-wall")" "$(median "$work/t-default-wall")" \
        "$(median "$work/t-1-thread")" "$(median "$work/t-default-thread")"
}

echo
echo "| file | what | 1 thread, wall | default ($cpus CPUs, at most 16), wall | 1 thread, CPU | default, CPU |"
echo "| --- | --- | ---: | ---: | ---: | ---: |"
ok=1
for file in examples/reduce.kern examples/gufunc.kern examples/add.kern tests/bench/matmul.kern; do
    times "$file" 0 "every function, cpu" || ok=0
    times "$file" 2 "every function, PTX" || ok=0
done
[ $ok = 1 ] && pass "compile times by thread count" || fail "compile times by thread count"

# PTX then ptxas (sm_90, one process on the joined module) by the wall clock
ptxas=$("$root/bin/kjit" info 2>/dev/null | awk '/^ptxas:/ {print $2}')
[ -x "${ptxas:-}" ] || ptxas=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
echo
for t in 1 default; do
    rm -f "$work/w"
    for r in 1 2 3; do
        start=$(date +%s.%N)
        if [ "$t" = default ]; then
            env -u KJIT_COMPILE_THREADS "$root/bin/kjit" build examples/reduce.kern --target cuda \
                --emit=ptx -o "$work/r-$t.ptx"
        else
            KJIT_COMPILE_THREADS=$t "$root/bin/kjit" build examples/reduce.kern --target cuda \
                --emit=ptx -o "$work/r-$t.ptx"
        fi
        mid=$(date +%s.%N)
        "$ptxas" -arch=sm_90 -O3 "$work/r-$t.ptx" -o "$work/r-$t.cubin" || fail "ptxas on the joined PTX"
        end=$(date +%s.%N)
        echo "$mid $start $end" | awk '{printf "%.1f %.1f\n", ($1 - $2) * 1e3, ($3 - $1) * 1e3}' >> "$work/w"
    done
    echo "examples/reduce.kern, threads $t: kjit build --emit=ptx then ptxas (wall ms, 3 runs): $(tr '\n' ';' < "$work/w")"
done

# a library ahead of time: `kjit build --emit=lib` compiles its cuda roots
# after the first on the threads, each with its ptxas run, and its cpu
# objects (every root for each x86-64 level; examples/reduce.kern makes 96
# @reduce levels a level, each its own LLVM module, its names written by LLVM) on
# the threads too (aot_build.c's compile_cpu_objects; 1 thread is the one
# after another of before, the same bytes); wall and CPU time (the process
# and its children), one run each
TIMEFORMAT='%R %U %S'
lib_build() { # LABEL THREADS ARGS...: times one build into $work/lib-LABEL-THREADS.so
    local label=$1 t=$2 tm; shift 2
    if [ "$t" = default ]; then
        tm=$( { time env -u KJIT_COMPILE_THREADS "$root/bin/kjit" build examples/reduce.kern \
                  --emit=lib "$@" -o "$work/lib-$label-$t.so" 2>/dev/null; } 2>&1 )
    else
        tm=$( { time env KJIT_COMPILE_THREADS=$t "$root/bin/kjit" build examples/reduce.kern \
                  --emit=lib "$@" -o "$work/lib-$label-$t.so" 2>/dev/null; } 2>&1 )
    fi
    [ -s "$work/lib-$label-$t.so" ] || fail "kjit build --emit=lib $* with threads $t"
    echo "$tm" | awk -v t="$t" -v a="$*" '{printf "examples/reduce.kern, threads %s: kjit build --emit=lib %s: %.1f s wall, %.1f s CPU\n", t, a, $1, $2 + $3}'
}
for t in 1 default; do lib_build cuda "$t" --cpu-levels=v3 --arch=sm_90; done
cmp -s "$work/lib-cuda-1.so" "$work/lib-cuda-default.so" && pass "the library is the same bytes for 1 and $cpus threads" ||
    fail "the library differs between 1 and $cpus threads"
for t in 1 default; do lib_build cpu "$t" --cuda=off; done
cmp -s "$work/lib-cpu-1.so" "$work/lib-cpu-default.so" &&
    pass "the library of three cpu levels is the same bytes for 1 and $cpus threads" ||
    fail "the library of three cpu levels differs between 1 and $cpus threads"

# the same bytes for any thread count
env -u KJIT_COMPILE_THREADS "$root/bin/kjit" build examples/reduce.kern --emit=obj -o "$work/n.o" &&
    KJIT_COMPILE_THREADS=1 "$root/bin/kjit" build examples/reduce.kern --emit=obj -o "$work/1.o" &&
    cmp -s "$work/n.o" "$work/1.o" && cmp -s "$work/r-1.ptx" "$work/r-default.ptx" &&
    pass "the object and the PTX are the same bytes for 1 and $cpus threads" ||
    fail "the object or the PTX differs between 1 and $cpus threads"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
