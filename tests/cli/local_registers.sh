#!/bin/sh
# local_registers.sh: local() arrays indexed by constants after unrolling
# become registers (compiler/local_promote.c; run by `make test-cli`): the
# register-blocked matrix multiply of tests/bench/matmul.kern keeps its 4x4
# block and its row of b in scalars (in the split form, whose regions then go
# on the cpu's SIMD lanes, and in the PTX with no local memory), and
# KJIT_PROMOTE_LOCALS=0 keeps them in memory, so the test can fail.
#
#   tests/cli/local_registers.sh build/kjit
. "$(dirname "$0")/lib.sh"
mm=tests/bench/matmul.kern
export KJIT_CACHE=off

"$kjit" check --dump=vec "$mm" >"$tmp/out" 2>"$tmp/err"
if grep -q 'acc\.15 = (add:f64 acc\.15:f64' "$tmp/out" && grep -q 'bv\.3 = ' "$tmp/out" &&
    ! grep -q '= (local:f64\[,\] 4x4)' "$tmp/out" && ! grep -q '(local:f64\[\] 4)' "$tmp/out"; then ok
else bad "the 4x4 block and the row of b are scalars in the split form"; fi

KJIT_PROMOTE_LOCALS=0 "$kjit" check --dump=vec "$mm" >"$tmp/out" 2>"$tmp/err"
if grep -q '= (local:f64\[,\] 4x4)' "$tmp/out" && ! grep -q 'acc\.15' "$tmp/out"; then ok
else bad "KJIT_PROMOTE_LOCALS=0 keeps local(f64, 4, 4)"; fi

# cpu: the threads' multiplies go on SIMD lanes (which take no local()
# array): LLVM made registers of the arrays in the scalar code already, but
# that code ran a thread at a time, 11 times slower
for promote in 1 0; do
    KJIT_PROMOTE_LOCALS=$promote "$kjit" build "$mm" --block 16,16 --emit=llvm -o "$tmp/mm.ll" \
        >"$tmp/out" 2>"$tmp/err"
    lanes=$(grep -c 'fmul <[0-9]* x double>' "$tmp/mm.ll")
    if { [ $promote = 1 ] && [ "$lanes" -ge 16 ]; } || { [ $promote = 0 ] && [ "$lanes" = 0 ]; }; then ok
    else bad "KJIT_PROMOTE_LOCALS=$promote: $lanes vector multiplies in the cpu code"; fi
done

# cuda: the PTX has no local memory (no GPU needed to make it)
if "$kjit" build "$mm" --target cuda -o "$tmp/mm.ptx" >"$tmp/out" 2>"$tmp/err"; then
    if ! grep -q '\.local\|ld\.local\|st\.local' "$tmp/mm.ptx" && grep -q 'mul.rn.f64\|fma.rn.f64\|mul.f64' "$tmp/mm.ptx"
    then ok; else bad "the PTX of the matrix multiply uses local memory"; fi
else
    grep -q 'libdevice\|CUDA' "$tmp/err" && ok || bad "kjit build --target cuda"
fi
# KJIT_PROMOTE_LOCALS is part of the cache key: code compiled with the
# arrays in registers is not reused when they are asked to stay in memory
# (a @vectorize whose helper holds the array: promoted or not, the call's
# code has one form, so only the key can tell them apart)
cat >"$tmp/l.kern" <<'EOF'
fn g(x: f64) -> f64 {
    let a = local(f64, 4);
    for j in range(4) { a[j] = x * f64(j); }
    return a[0] + a[1] + a[2] + a[3];
}

@vectorize
fn f(x: f64) -> f64 { return g(x); }
EOF
own_cache_entries f__ KJIT_PROMOTE_LOCALS=1 KJIT_PROMOTE_LOCALS=0 "$tmp/l.kern" f rand:f64:64

# The SIMD lowering's measuring switches (KJIT_SIMD_GUARDED_LOADS=0,
# KJIT_SIMD_ROW_CHUNKS=0, KJIT_SIMD_THREAD_ARRAYS=0: the block shapes' forms
# before; KJIT_SIMD_FISSION=0 and KJIT_SIMD_FISSION_REGISTERS, the loop
# fission's, tests/cli/loop_fission.sh) are in the cache key too: a launch of
# matmul's 16x16 shape with one set compiles entries of its own, and a second
# run finds them
own_cache_entries matmul "" \
    "KJIT_SIMD_ROW_CHUNKS=0 KJIT_SIMD_THREAD_ARRAYS=0 KJIT_SIMD_FISSION=0 KJIT_SIMD_FISSION_REGISTERS=4" \
    "$mm" matmul rand:f64:32x32 rand:f64:32x32 zeros:f64:32x32 --grid 1,1 --block 16,16 --target cpu

finish
