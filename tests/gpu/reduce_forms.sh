#!/usr/bin/env bash
# tests/gpu/reduce_forms.sh [BUNDLE]: the cuda @reduce forms before and after
# on the GPU machine (issue 25, item 1; docs/performance.md, "The WARPS form
# on cuda"): main (KJIT_REDUCE_WARPS_MAIN=1, the WARPS form as main at
# 169fe56 built it: its PTX byte for byte) against new (the default: the
# block's first element frozen for LLVM's loop strength reduction, the last
# block's indices from it, no division by chunks for one output), each
# variant in processes of its own, alternately:
#   1. the compile cost of a first call: bin/latency --first-call for
#      examples/reduce.kern's dot and vsum (f32, f64) and for vsum along
#      axis 1 of 10000x10000 (the form of one output a row), PTX, ptxas and
#      the module load, KJIT_BENCH_CLOCK=thread, median of 5 new processes;
#   2. where it goes: the CPU time of `kjit build --function dot --emit=ptx`
#      (LLVM alone, dot's four kernels of which the two WARPS ones differ)
#      and of ptxas -O3 on each of dot's two WARPS kernels (10 runs each),
#      and ptxas's -O levels on new's f32 one (compile time only);
#   3. the run time: tests/gpu/reduce_rows.cu (built here with nvcc) on
#      device arrays: sums of 1e8 f32 and f64, dot of 1e8 f32, the sums along
#      axis 1 and 0 of 10000x10000 f32, 3 rounds a variant, each a new
#      process and cache; every result checked against float64 sums, and
#      both variants' results the same bits (the same operations).
# The switch is part of a lifted root's cache key.  Prints "N passed, M failed".
# REDUCE_BEFORE=NAME=VALUE picks another switch for "main", the before (the
# default KJIT_REDUCE_WARPS_MAIN=1; KJIT_REDUCE_O3=1: LLVM's -O3 pipeline
# for the lifted kernels instead of the lean one, docs/architecture.md).
set -u
bundle=${1:-build/gpu-bundle}
before=${REDUCE_BEFORE:-KJIT_REDUCE_WARPS_MAIN=1}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bundle.sh"
enter_bundle "$bundle"
start_counts
variants="main new"
echo "main: $before; new: the default"
# with_variant V COMMAND...: COMMAND under variant V's switch
with_variant() {
    local v=$1
    shift
    case $v in
        main) env "$before" "$@" ;;
        *) "$@" ;;
    esac
}
ptxas=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1
echo "ptxas: $ptxas, $("$ptxas" --version 2>/dev/null | tail -1)"

echo "=== 1. first call on cuda (PTX, ptxas, load), ms of thread CPU time, median of 5 (compiles)"
printf '| call | main | new | new / main |\n| --- | ---: | ---: | ---: |\n'
ok=1
for spec in cuda:dot:0 cuda:dot:1 cuda:vsum:0 cuda:vsum:1 cuda:vsum:0:10000x10000:1 \
            cuda:vsum:1:10000x10000:1; do
    declare -A runs=([main]="" [new]="") compiles=([main]="" [new]="")
    for r in 1 2 3 4 5; do
        for v in $variants; do
            out=$(with_variant $v env KJIT_BENCH_CLOCK=thread \
                  "$root/bin/latency" --first-call examples/reduce.kern "$spec" 2>&1) || { ok=0; echo "$out"; }
            runs[$v]="${runs[$v]} $(echo "$out" | awk 'NR == 1 {print $1}')"
            compiles[$v]=$(echo "$out" | awk 'NR == 1 {print $2}')
        done
    done
    m=$(echo ${runs[main]} | tr ' ' '\n' | sort -g | sed -n 3p)
    n=$(echo ${runs[new]} | tr ' ' '\n' | sort -g | sed -n 3p)
    echo "| $spec | $m ms (${compiles[main]}) | $n ms (${compiles[new]}) |" \
         "$(awk -v m="$m" -v n="$n" 'BEGIN {if (m > 0) printf "%.3f", n / m; else print "-"}') |"
done
[ "$ok" = 1 ] && pass "first calls, both variants" || fail "first calls, both variants"

echo "=== 2. where dot's first call goes: LLVM (kjit build --emit=ptx, 4 kernels) and ptxas, CPU ms"
if python3 - "$root" "$ptxas" "$work" "$before" <<'PY'; then pass "LLVM and ptxas times"; else fail "LLVM and ptxas times"; fi
import os, resource, subprocess, sys
root, ptxas, work, before = sys.argv[1:5]

def cpu_ms(argv, env, runs):
    """CPU time (user + system) of `runs` runs of argv, ms a run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(runs):
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1e3 / runs

kernels = {}
print("| variant | kjit build --emit=ptx (LLVM) | ptxas -O3: dot f32 WARPS | ptxas -O3: dot f64 WARPS |")
print("| --- | ---: | ---: | ---: |")
for variant in ("main", "new"):
    env = dict(os.environ, KJIT_CACHE="off")
    if variant == "main":
        name, value = before.split("=", 1)
        env[name] = value
    ptx = f"{work}/dot.{variant}.ptx"
    argv = [f"{root}/bin/kjit", "build", "examples/reduce.kern", "--target", "cuda",
            "--function", "dot", "--emit=ptx", "--arch", "sm_90", "-o", ptx]
    llvm = sorted(cpu_ms(argv, env, 1) for _ in range(5))[2]
    text = open(ptx).read()
    head = text[:text.index(".visible .entry")]
    row = [f"{llvm:.1f} ms"]
    for t in ("f32", "f64"):
        entry = next(e for e in text.split(".visible .entry")[1:]
                     if e.split("(")[0].strip().startswith(f"dot__{t}_{t}__rwt"))
        path = f"{work}/dot_{t}.{variant}.ptx"
        with open(path, "w") as f:
            f.write(head + ".visible .entry" + entry[:entry.index("\n}\n") + 3])
        kernels[(variant, t)] = path
        row.append(f"{cpu_ms([ptxas, '-arch=sm_90', '-O3', path, '-o', path + '.cubin'], None, 10):.1f} ms")
    print(f"| {variant} | " + " | ".join(row) + " |")
path = kernels[("new", "f32")]
print("ptxas on new's f32 WARPS kernel by level (compile time only; the code's speed is not measured): " +
      ", ".join(f"{o} {cpu_ms([ptxas, '-arch=sm_90', o, path, '-o', path + '.cubin'], None, 10):.1f} ms"
                for o in ("-O0", "-O1", "-O2", "-O3")))
PY

echo "=== 3. run time on device arrays (median ms of 20 calls), 3 rounds a variant, alternately"
if nvcc -O3 -arch=sm_90 -std=c++17 -Iruntime -o "$work/reduce_rows" tests/gpu/reduce_rows.cu \
        -L"$root/bin" -lkjit -Xlinker -rpath="$root/bin" > "$work/nvcc.log" 2>&1; then
    ok=1
    for round in 1 2 3; do
        for v in $variants; do
            with_variant $v env KJIT_CACHE_DIR="$work/cache-$v-$round" \
                "$work/reduce_rows" examples/reduce.kern > "$work/$v.$round.txt" 2>&1 ||
                { ok=0; tail -5 "$work/$v.$round.txt"; }
        done
    done
    python3 "$here/reduce_rows_table.py" "$work" main new || ok=0
    [ "$ok" = 1 ] && pass "reduce rows, both variants, the same bits" || fail "reduce rows, both variants, the same bits"
else
    cat "$work/nvcc.log"
    fail "nvcc tests/gpu/reduce_rows.cu"
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
