#!/bin/sh
# loop_fission.sh: a loop whose accumulators need more vector registers than
# the cpu has runs as several loops, each over a group of them
# (compiler/backend/codegen_simd_fission.c; run by `make test-cli`).  The
# register-blocked matrix multiply of tests/bench/matmul.kern keeps 16
# accumulators, 4 values of b and a broadcast of a live in its k loop: 21
# vectors, over AVX2's 16 registers (KJIT_CPU_FEATURES=-avx512f takes AVX-512
# away on a host that has it), within AVX-512's 32.  The split form is
# lowered with one loop more for each copy of the k loop it lowers, none
# more with 32 registers or KJIT_SIMD_FISSION=0, and every form writes the
# same bits.
#
#   tests/cli/loop_fission.sh build/kjit
. "$(dirname "$0")/lib.sh"
mm=tests/bench/matmul.kern
export KJIT_CACHE=off KJIT_CPU_FEATURES=-avx512f

# loops NAME [ENV...]: the loop heads of matmul's cpu code for blocks of 16x16
loops() {
    env "$@" "$kjit" build "$mm" --block 16,16 --emit=llvm -O0 -o "$tmp/mm.ll" >"$tmp/out" 2>"$tmp/err" ||
        cat "$tmp/err"
    grep -c '^loop\.head[0-9]*\(\.i\)*:' "$tmp/mm.ll"
}
whole=$(loops KJIT_SIMD_FISSION=0)
split=$(loops)
wide=$(loops KJIT_SIMD_FISSION_REGISTERS=32)
if [ "$whole" -ge 2 ] && [ "$split" -gt "$whole" ] && [ "$wide" = "$whole" ]; then ok
else bad "the k loop split on 16 registers only (loop heads: $whole whole, $split split, $wide with 32)"; fi

# the same bits: 70x90 by 90x50 (edge tiles, a depth not a multiple of 16),
# one loop, two, and as many as 4 registers make
for form in "KJIT_SIMD_FISSION=0" "KJIT_SIMD_FISSION=1" "KJIT_SIMD_FISSION_REGISTERS=4"; do
    env $form "$kjit" run "$mm" matmul rand:f64:70x90 randn:f64:90x50 zeros:f64:70x50 --grid 1,2 \
        --block 16,16 --target cpu --save 2="$tmp/c.${form#*=}.npy" >"$tmp/out" 2>"$tmp/err" || cat "$tmp/err"
done
if [ -s "$tmp/c.0.npy" ] && cmp -s "$tmp/c.0.npy" "$tmp/c.1.npy" && cmp -s "$tmp/c.0.npy" "$tmp/c.4.npy"; then ok
else bad "matmul's result differs between the loop whole and split"; fi
if python3 - "$tmp" <<'PY'
import sys, numpy as np
t = sys.argv[1]
rng_c = np.load(t + "/c.1.npy")
sys.exit(0 if rng_c.shape == (70, 50) and np.count_nonzero(rng_c) > 3000 else 1)
PY
then ok; else bad "matmul's result is not a full 70x50 product"; fi

# both switches are in the cache key: tests/cli/local_registers.sh
finish
