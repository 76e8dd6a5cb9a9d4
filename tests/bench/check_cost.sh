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
# meaningless and left out).  With KJIT_CHECK (the default option) a third
# column times the race checker (KJIT_CHECK=race): RACE_ROUNDS rounds
# (default 1) of one run each, as it is tens to hundreds of times slower;
# RACE_ROUNDS=0 leaves it out.  CHECK_BEFORE=DIR names the build folder of
# another version (its bench_cpu, bench_simd and libkjit.so, copied before a
# change): its checked times go in a column of their own, before the
# change's, taking turns with them (docs/performance.md's before/after table
# of checked mode on SIMD lanes).
#
#   tests/bench/check_cost.sh [BENCH_CPU] [ROUNDS] [REPEAT]
set -u
bench=${1:-build/bench_cpu}
simd=$(dirname "$bench")/bench_simd
rounds=${2:-5}
repeat=${3:-5}
option=${KJIT_COST_OPTION:-KJIT_CHECK}
race_rounds=${RACE_ROUNDS:-1}
[ "$option" = KJIT_CHECK ] || race_rounds=0
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
    if [ -n "${CHECK_BEFORE:-}" ]; then
        env "$option=1" "$CHECK_BEFORE/bench_cpu" examples "$repeat" >"$tmp/before.$i" || exit 1
        env "$option=1" "$CHECK_BEFORE/bench_simd" --no-refs --repeat="$repeat" examples tests/bench \
            >"$tmp/simd-before.$i" || exit 1
    fi
    i=$((i + 1))
done
i=0
while [ $i -lt "$race_rounds" ]; do
    KJIT_CHECK=race "$bench" examples 1 >"$tmp/race.$i" || exit 1
    KJIT_CHECK=race "$simd" --no-refs --repeat=1 examples tests/bench >"$tmp/simd-race.$i" || exit 1
    i=$((i + 1))
done
python3 - "$tmp" "$rounds" "$option" "$race_rounds" <<'PY'
import json, os, sys
d, rounds, option, race_rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
def load(kind, i):
    run = json.load(open(f"{d}/{kind}.{i}"))
    kernels = json.load(open(f"{d}/simd-{kind}.{i}"))
    for target in run:
        run[target].update(kernels[target])
    return run
def best(kind, n):
    runs = [load(kind, i) for i in range(n)]
    return {t: {w: min(r[t][w] for r in runs) for w in runs[0][t]} for t in runs[0]}
off, on = best("off", rounds), best("on", rounds)
race = best("race", race_rounds) if race_rounds else None
before = best("before", rounds) if os.environ.get("CHECK_BEFORE") else None
if os.environ.get("KJIT_BENCH_CLOCK") == "thread":
    off.pop("parallel", None)
head = f"{'workload':38} {'target':9} {'without ms':>13}"
if before:
    head += f" {'before ms':>11} {'ratio':>6}"
head += f" {'with ms':>11} {'ratio':>6}"
if race:
    head += f" {'race ms':>11} {'ratio':>7}"
print(head + f"   (with: {option}=1" + (", race: KJIT_CHECK=race)" if race else ")"))
for t in off:
    for w in off[t]:
        line = f"{w:38} {t:9} {off[t][w]:13.2f}"
        if before:
            b = before.get(t, {}).get(w)
            line += f" {b:11.2f} {b / off[t][w]:6.2f}" if b is not None else f" {'-':>11} {'-':>6}"
        line += f" {on[t][w]:11.2f} {on[t][w] / off[t][w]:6.2f}"
        if race:
            line += f" {race[t][w]:11.2f} {race[t][w] / off[t][w]:7.1f}"
        print(line)
PY
