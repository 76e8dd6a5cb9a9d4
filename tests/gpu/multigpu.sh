#!/usr/bin/env bash
# tests/gpu/multigpu.sh [BUNDLE]: several GPUs of one host, on a machine with
# (at least) 2 GPUs, from the bundle `make gpu-bundle` made (default
# build/gpu-bundle, carried to the machine).  In order:
#   1. bin/multigpu (examples/multigpu/multigpu.c) checked: kjit_copy from
#      GPU to GPU, both ways, with and without a stream, 4 B to 80 MB, every
#      byte, with peer access and staged through the host; a heat equation
#      split over 2 GPUs, its halo rows copied GPU to GPU by kjit_copy, against
#      the same steps on one GPU (bitwise) and on the cpu (to 1e-5), with
#      peer access and again with the copies staged through the host
#      (KJIT_CUDA_PEER=0); a split without its halo copies must fail the
#      check; a sum split over 2 GPUs against the exact sum;
#   2. the timings, 1 GPU against 2 (goal: 1.8x): a stencil over 2 x 16384^2
#      f32 (heat, 200 steps; staged copies too) and a sum of 2e9 f32;
#   3. examples/mpi/heat2d.c, one rank per GPU on cuda, checked against the
#      one-process run and timed on 1 and 2 ranks: only where this machine
#      has MPI (mpicc and mpirun; the bundle carries none), else a
#      "skipped: ..." line says so.
# Ends with one line: "N passed, N failed".
set -u
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
m=$root/bin/multigpu
kern=$root/examples/mpi/heat2d.kern
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }

# run NAME COMMAND...: runs it with its output shown, PASS when it exits 0.
run() {
    local name=$1
    shift
    if "$@" > "$work/out.txt" 2>&1; then
        cat "$work/out.txt"
        pass "$name"
    else
        cat "$work/out.txt"
        fail "$name"
    fi
}

# speedup NAME GOAL: the "speed-up X on 2" of the last run's output against GOAL.
speedup() {
    local x
    x=$(sed -n 's/.*speed-up \([0-9.]*\) on 2.*/\1/p' "$work/out.txt" | tail -1)
    if [ -z "$x" ]; then
        fail "$1: no timing in the output"
    elif python3 -c "import sys; sys.exit(0 if $x >= $2 else 1)"; then
        pass "$1: ${x}x on 2 GPUs (goal ${2}x)"
    else
        echo "NOTE $1: ${x}x on 2 GPUs, under the goal of ${2}x"
    fi
}

echo "=== machine"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
nvidia-smi topo -m 2>/dev/null | head -4
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
if [ "$gpus" -lt 2 ]; then
    fail "this machine has $gpus GPU(s); multigpu.sh needs 2"
    echo "$passed passed, $failed failed"
    exit 1
fi

echo "=== 1. checks"
run "kjit_copy GPU to GPU (peer), every byte" "$m" copy --parts 2 --kern "$kern"
run "kjit_copy GPU to GPU (staged), every byte" env KJIT_CUDA_PEER=0 "$m" copy --parts 2 --kern "$kern"
run "heat on 2 GPUs (peer copies) = 1 GPU bitwise, = cpu to 1e-5" \
    "$m" heat --parts 2 --rows 2048 --cols 1536 --steps 60 --check --kern "$kern"
run "heat on 2 GPUs (copies staged through the host) = 1 GPU bitwise, = cpu to 1e-5" \
    env KJIT_CUDA_PEER=0 "$m" heat --parts 2 --rows 2048 --cols 1536 --steps 60 --check --kern "$kern"
grep -q "no peer access (copies staged" "$work/out.txt" && pass "KJIT_CUDA_PEER=0 stages the copies" ||
    fail "KJIT_CUDA_PEER=0 did not stage the copies"
run "heat on 2 GPUs, uneven rows" \
    "$m" heat --parts 2 --rows 1001 --cols 333 --steps 25 --check --kern "$kern"
if "$m" heat --parts 2 --rows 512 --cols 512 --steps 20 --check --no-exchange --kern "$kern" \
    > "$work/out.txt" 2>&1; then
    cat "$work/out.txt"
    fail "a split without halo copies passed its check"
else
    grep -q "^check: FAILED: the field of 2 parts" "$work/out.txt" &&
        pass "a split without halo copies fails its check" ||
        { cat "$work/out.txt"; fail "a split without halo copies: no FAILED line"; }
fi
run "sum of 1e8 f32 on 2 GPUs = exact sum" "$m" sum --parts 2 --n 1e8 --repeat 3 --kern "$kern"

echo "=== 2. 1 GPU against 2"
run "stencil 2 x 16384^2 f32, 200 steps (peer copies)" \
    "$m" heat --parts 2 --rows 16384 --cols 16384 --steps 200 --kern "$kern"
speedup "stencil, peer copies" 1.8
run "stencil 2 x 16384^2 f32, 200 steps (staged copies)" \
    env KJIT_CUDA_PEER=0 "$m" heat --parts 2 --rows 16384 --cols 16384 --steps 200 --kern "$kern"
speedup "stencil, staged copies" 1.8
run "sum of 2e9 f32, best of 20" "$m" sum --parts 2 --n 2e9 --repeat 20 --kern "$kern"
speedup "sum of 2e9 f32" 1.8

echo "=== 3. examples/mpi/heat2d.c, one rank per GPU"
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
    echo "MPI: $(command -v mpirun) ($(mpirun --version 2>&1 | head -1))"
    mpi_env="OMPI_MCA_btl_vader_single_copy_mechanism=none"
    [ "$(id -u)" = 0 ] && mpi_env="$mpi_env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
    if mpicc -std=c11 -O2 -I"$root/runtime" -o "$work/heat2d" "$root/examples/mpi/heat2d.c" \
        -L"$root/bin" -lkjit -lm -Wl,-rpath,"$root/bin"; then
        pass "heat2d builds with mpicc"
        mpi() { env $mpi_env mpirun --oversubscribe --bind-to none -np "$@"; }
        run "heat2d, 2 ranks on 2 GPUs = one-process run" \
            mpi 2 "$work/heat2d" --target cuda --rows 4096 --cols 4096 --steps 100 --check --kern "$kern"
        run "heat2d, 1 rank, 16384^2, 200 steps" \
            mpi 1 "$work/heat2d" --target cuda --rows 16384 --cols 16384 --steps 200 --every 200 --kern "$kern"
        t1=$(sed -n 's/^heat2d: .*: \([0-9.]*\) s .*/\1/p' "$work/out.txt")
        run "heat2d, 2 ranks, 16384^2, 200 steps" \
            mpi 2 "$work/heat2d" --target cuda --rows 16384 --cols 16384 --steps 200 --every 200 --kern "$kern"
        t2=$(sed -n 's/^heat2d: .*: \([0-9.]*\) s .*/\1/p' "$work/out.txt")
        [ -n "$t1" ] && [ -n "$t2" ] &&
            python3 -c "print(f'heat2d on cuda, strong scaling: 1 rank {$t1:.3f} s, 2 ranks {$t2:.3f} s: speed-up {$t1/$t2:.2f}, efficiency {$t1/(2*$t2):.0%}')"
    else
        fail "heat2d builds with mpicc"
    fi
else
    echo "heat2d on 2 GPUs: skipped: no MPI on this machine (mpicc or mpirun not found; the bundle carries none)"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
