#!/bin/sh
# check_cost.sh: what checked mode costs on the seed workloads (cpu and
# parallel), `make bench-checks`.  Runs build/bench_cpu (tests/bench/bench_cpu.c)
# and the bench_simd beside it (tests/bench/bench_simd.c, kjit's side only)
# ROUNDS times each way, taking turns so that a busy machine slows both alike,
# and prints per workload and target the best time without checks, the best
# with KJIT_CHECK=1, and their ratio.  Not a timed test; docs/language.md
# quotes its figures.  KJIT_COST_OPTION names another variable to turn on
# instead of KJIT_CHECK: `make bench-cancel` measures KJIT_CANCELLABLE=1
# (docs/embedding.md quotes it).  KJIT_BENCH_CLOCK=thread times the cpu target by the
# calling thread's CPU time, for a busy machine (its parallel rows are then
# meaningless and left out).
#
#   tests/bench/check_cost.sh [BENCH_CPU] [ROUNDS] [REPEAT]
set -u
bench=${1:-build/bench_cpu}
simd=$(dirname "$bench")/bench_simd
rounds=${2:-5}
repeat=${3:-5}
option=${KJIT_COST_OPTION:-KJIT_CHECK}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
i=0
while [ $i -lt "$rounds" ]; do
    for mode in off on; do
        check=0; [ $mode = on ] && check=1
        env "$option=$check" "$bench" examples "$repeat" >"$tmp/$mode.$i" || exit 1
        env "$option=$check" "$simd" --no-refs --repeat="$repeat" examples tests/bench \
            >"$tmp/simd-$mode.$i" || exit 1
    done
    i=$((i + 1))
done
python3 - "$tmp" "$rounds" "$option" <<'PY'
import json, os, sys
d, rounds, option = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(kind, i):
    run = json.load(open(f"{d}/{kind}.{i}"))
    kernels = json.load(open(f"{d}/simd-{kind}.{i}"))
    for target in run:
        run[target].update(kernels[target])
    return run
def best(kind):
    runs = [load(kind, i) for i in range(rounds)]
    return {t: {w: min(r[t][w] for r in runs) for w in runs[0][t]} for t in runs[0]}
off, on = best("off"), best("on")
if os.environ.get("KJIT_BENCH_CLOCK") == "thread":
    off.pop("parallel", None)
print(f"{'workload':38} {'target':9} {'without ms':>13} {'with ms':>11} {'ratio':>6}   (with: {option}=1)")
for t in off:
    for w in off[t]:
        print(f"{w:38} {t:9} {off[t][w]:13.2f} {on[t][w]:11.2f} {on[t][w] / off[t][w]:6.2f}")
PY
