#!/usr/bin/env bash
# tests/genprog/gpu_campaign.sh [BUNDLE] [N] [SEED] [JOBS]: generated programs on cuda,
# on the GPU machine, from the bundle `make gpu-bundle` made (Python 3 is all
# it needs beside the bundle): N programs (default 2000) from seed SEED
# (default 1), in JOBS campaigns at once (default 8), each program run in
# every mode genprog-run knows (the cpu modes, the SSE and AVX2 children, cuda)
# and compared with ref_eval (genprog_run.c states the tolerances);
# RUNNER_ARGS="--modes cpu,cuda --no-children" runs cpu and cuda alone.
# Mismatching programs are copied to $WORK/w*/failures (WORK=/tmp/genprog-cuda
# unless set); the last line sums the campaigns.
set -u
bundle=${1:-build/gpu-bundle}
n=${2:-2000}
seed=${3:-1}
jobs=${4:-8}
work=${WORK:-/tmp/genprog-cuda}
cd "$bundle" || { echo "no bundle at $bundle (make gpu-bundle)"; exit 1; }
. tests/gpu/bundle.sh
unpack_libkjit || { echo "cannot unpack bin/libkjit.so.xz"; exit 1; }
export KJIT_STDLIB=$PWD/stdlib KJIT_CACHE=off
mkdir -p "$work"
per=$(( (n + jobs - 1) / jobs ))
for j in $(seq 0 $((jobs - 1))); do
    s=$((seed + j * per)); c=$per
    [ $((j * per + c)) -gt "$n" ] && c=$((n - j * per))
    [ "$c" -le 0 ] && continue
    python3 tests/genprog/campaign.py --runner bin/genprog-run --seed "$s" --n "$c" \
        --work "$work/w$j" --runner-args "${RUNNER_ARGS:-}" > "$work/out$j.txt" 2>&1 &
done
wait
grep -h "^campaign: seeds" "$work"/out*.txt
grep -h "^  mismatch\|^  invalid" "$work"/out*.txt
python3 - "$work" <<'PY'
import glob, re, sys
tot = [0, 0, 0, 0, 0]
for f in glob.glob(sys.argv[1] + "/out*.txt"):
    for l in open(f):
        m = re.match(r"campaign: seeds \S+: (\d+) programs, (\d+) entries, (\d+) runs.*?; (\d+) mismatching programs, (\d+) invalid", l)
        if m:
            tot = [a + int(b) for a, b in zip(tot, m.groups())]
print("gpu_campaign: %d programs, %d entries, %d runs, %d mismatching programs, %d invalid" % tuple(tot))
PY
if grep -q "cuda: skipped" "$work"/out*.txt; then
    echo "gpu_campaign: cuda did not run ($(grep -ho -m1 'cuda: skipped: no CUDA driver' "$work"/out*.txt | head -1))"
    exit 1
fi
! grep -q "^  mismatch" "$work"/out*.txt
