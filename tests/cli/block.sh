#!/bin/sh
# block.sh: the code for one block shape from the command line (run by
# `make test-cli`): `kjit check --dump=vec --block=X,Y,Z` prints a kernel's
# split form as the code for that shape has it (its tree unrolled, blockDim
# a constant), `kjit build --block` makes only that shape's __block (and
# nothing for functions whose code has no shape), `kjit build` without it no
# general __block unless KJIT_CPU_SPECIALISE=0, and a
# shape that is no block is a usage error.
#
#   tests/cli/block.sh build/kjit
. "$(dirname "$0")/lib.sh"

cat >"$tmp/tree.kern" <<'KERN'
@kernel
fn tree(a: f32[], out: f32[]) {
    let sh = shared(f32, 1024);
    let t = threadIdx.x;
    let i = blockIdx.x * blockDim.x + t;
    sh[t] = i < len(a) ? a[i] : 0.0;
    syncthreads();
    let s = blockDim.x / 2;
    while s > 0 {
        if t < s { sh[t] += sh[t + s]; }
        syncthreads();
        s = s / 2;
    }
    if t == 0 { out[blockIdx.x] = sh[0]; }
}
KERN

# the general split form loops; the one for 64 threads has six levels
"$kjit" check --dump=vec "$tmp/tree.kern" >"$tmp/out" 2>"$tmp/err"
if grep -q '^  while' "$tmp/out"; then ok; else bad "the general split form keeps its while"; fi
"$kjit" check --dump=vec --block=64 "$tmp/tree.kern" >"$tmp/out" 2>"$tmp/err"
levels=$(grep -c '^  threads with threadIdx.x in' "$tmp/out")
if grep -q 'tree__split for blocks of 64 x 1 x 1' "$tmp/out" && ! grep -q 'while' "$tmp/out" &&
    ! grep -q 'blockDim' "$tmp/out" && [ "$levels" = 7 ]; then ok
else bad "--block=64: the tree unrolled into 6 levels and thread 0's store ($levels regions)"; fi
"$kjit" check --dump=vec --block=4,2,3 "$tmp/tree.kern" >"$tmp/out" 2>"$tmp/err"
if grep -q 'for blocks of 4 x 2 x 3' "$tmp/out" && grep -q 's = 2:i32' "$tmp/out"; then ok
else bad "--block=4,2,3: s starts at 2"; fi

# build: only the shape's __block
"$kjit" build --block 64 "$tmp/tree.kern" >"$tmp/out" 2>"$tmp/err"
if grep -q '^tree__block:' "$tmp/out" && ! grep -q '^tree__thread:' "$tmp/out"; then ok
else bad "build --block 64: tree__block alone"; fi
# without --block, as the runtime compiles a kernel's general code: the
# fibers' tree__thread, and the split form's general tree__block only where
# launches do not get code for their shape (KJIT_CPU_SPECIALISE=0)
"$kjit" build "$tmp/tree.kern" >"$tmp/out" 2>"$tmp/err"
if ! grep -q '^tree__block:' "$tmp/out" && grep -q '^tree__thread:' "$tmp/out"; then ok
else bad "build: tree__thread alone"; fi
KJIT_CPU_SPECIALISE=0 "$kjit" build "$tmp/tree.kern" >"$tmp/out" 2>"$tmp/err"
if grep -q '^tree__block:' "$tmp/out" && grep -q '^tree__thread:' "$tmp/out"; then ok
else bad "KJIT_CPU_SPECIALISE=0 build: tree__block and tree__thread"; fi

# build --block: no code for a function whose code has no shape
{ cat "$tmp/tree.kern"; echo 'fn twice(x: f64) -> f64 { return x * 2.0; }'; } >"$tmp/mixed.kern"
"$kjit" build --block 64 "$tmp/mixed.kern" >"$tmp/out" 2>"$tmp/err"
if grep -q '^tree__blocks:' "$tmp/out" && ! grep -q '^twice__entry:' "$tmp/out"; then ok
else bad "build --block 64: tree__blocks and no twice__entry"; fi
"$kjit" build "$tmp/mixed.kern" >"$tmp/out" 2>"$tmp/err"
if grep -q '^twice__entry:' "$tmp/out"; then ok; else bad "build: twice__entry"; fi

# a kernel without barriers and without loops (issue 25, item 5): the code
# for 32 x 8 tests its block's bounds once, both sides of the && (x along a
# row, y down), and runs the block without them when they hold; one with a
# loop has no split form
cat >"$tmp/inc.kern" <<'KERN'
@kernel
fn inc2(a: i32[,], b: i32[,]) {
    let j, i = grid(2);
    if i < a.shape[0] && j < a.shape[1] { b[i, j] = a[i, j] + 1; }
}

@kernel
fn looped(a: i32[], b: i32[]) {
    let i = grid(1);
    for k in range(3) { if i < len(a) { b[i] += a[i]; } }
}
KERN
"$kjit" check --dump=vec --block=32,8 "$tmp/inc.kern" >"$tmp/out" 2>"$tmp/err"
if grep -q 'inc2__split for blocks of 32 x 8 x 1' "$tmp/out" &&
    grep -q 'lt:bool (add:i64 (mul:i64 (cast:i64 blockIdx.y:i32) 8:i64) 7:i64) (dim.0:i64' "$tmp/out" &&
    grep -q 'lt:bool (add:i64 (mul:i64 (cast:i64 blockIdx.x:i32) 32:i64) 31:i64) (dim.1:i64' "$tmp/out" &&
    ! grep -q 'looped__split' "$tmp/out"; then ok
else bad "--block=32,8: inc2's bounds tested once for the block, looped not split"; fi
# a block that fails the test runs the threads of x that pass j < shape[1],
# from 0 to an end made before the region
if grep -q 'threads with threadIdx.x in \[0:i64, (select:i64 (le:bool (dim.1:i64 a:i32\[,\]) (add:i64 (mul:i64 (cast:i64 blockIdx.x:i32) 32:i64) 0:i64)) 0:i64' "$tmp/out"; then ok
else bad "--block=32,8: inc2's edge blocks run the threads of x that pass"; fi

# shapes that are no block
for shape in 0 1025 32,33 2,2,2,2 x 64,; do
    "$kjit" build --block "$shape" "$tmp/tree.kern" >"$tmp/out" 2>"$tmp/err"
    code=$?
    if [ $code = 2 ] && grep -q -- '--block takes' "$tmp/err"; then ok; else bad "build --block $shape: exit $code, not 2"; fi
    "$kjit" check --dump=vec --block="$shape" "$tmp/tree.kern" >"$tmp/out" 2>"$tmp/err"
    code=$?
    if [ $code = 2 ]; then ok; else bad "check --block=$shape: exit $code, not 2"; fi
done

finish
