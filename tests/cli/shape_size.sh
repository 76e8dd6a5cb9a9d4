#!/bin/sh
# shape_size.sh: the IR that one kernel hands to LLVM stays as small as the
# code it becomes (issue 25, item 1; docs/performance.md, "one kernel's
# compile"; run by `make test-cli`):
# - the SIMD lowering builds no stride test and no gather or scatter side for
#   block-private arrays (shared(), local(), the split form's per-thread
#   arrays): in tests/bench/matmul.kern's 16x16 shape only the accesses to its
#   three parameters a, b and c have one (56; 256 when every access had one);
# - at most SIMD_FULL_COPIES (4) if sides a chunk are copied for full masks:
#   the tile's write-back of 16 guarded stores gives 8 (two chunks), not 32;
# - a guarded load (`c ? a[..] : 0.0`) is one masked load, and a block of
#   16x16 threads has no chunk of unknown lanes (its rows fill the chunks);
# - the split form's per-thread arrays are a cache line longer than
#   KJ_MAX_BLOCK_THREADS elements and aligned to a line (matmul's 16
#   accumulators in 16 different L1 sets; KJIT_SIMD_THREAD_ARRAYS=0: before);
# - on cuda the WARPS form's loops keep cuda's four copies by default (the
#   last block's not unrolled ran the sum along axis 1 5% slower);
#   KJIT_REDUCE_TAIL_UNROLL=1 leaves the last block's loop as it is and
#   KJIT_REDUCE_WARPS_UNROLL=2 makes the full blocks' two copies;
# - the WARPS form's loads are addressed from an opaque base (KjIrExpr.opaque,
#   on cuda an empty inline asm: two a kernel, one a loop's block, which
#   survive -O3 as one), which keeps LLVM's loop strength reduction
#   from taking the work item's geometry apart, and one output's form
#   divides nothing (no div.s64 for ptxas); KJIT_REDUCE_WARPS_MAIN=1 builds
#   main's form (169fe56), the "before" of tests/gpu/reduce_forms.sh, and
#   the COLUMNS forms' PTX is the same bytes either way.
#
#   tests/cli/shape_size.sh build/kjit
. "$(dirname "$0")/lib.sh"
mm=tests/bench/matmul.kern
export KJIT_CACHE=off

for features in "" -avx512f; do
    if KJIT_CPU_FEATURES=$features "$kjit" build "$mm" --block 16,16 --emit=llvm -O0 -o "$tmp/mm.ll" \
            >"$tmp/out" 2>"$tmp/err"; then
        general=$(grep -c '^access\.general' "$tmp/mm.ll")
        full=$(grep -c '^vif\.full' "$tmp/mm.ll")
        if [ "$general" -le 64 ]; then ok
        else bad "matmul's shape ($features): $general accesses with a stride test, expected at most 64"; fi
        if [ "$full" -le 8 ]; then ok
        else bad "matmul's shape ($features): $full if sides copied for full masks, expected at most 8"; fi
        # the tiles' `r < n && .. ? a[r, k0 + tx] : 0.0`: one masked load each,
        # not select_one_side's every-lane, no-lane and mixed paths (8 of them)
        mixed=$(grep -c '^select\.mixed' "$tmp/mm.ll")
        if [ "$mixed" = 0 ]; then ok
        else bad "matmul's shape ($features): $mixed guarded loads copied per path, expected none"; fi
        # 16 threads along x fill 2 or 4 chunks: no rest under a mask of unknown
        # lanes for each row (5 regions had one), and the last block's copy
        # keeps its chunk loop (never unrolled)
        rest=$(grep -c '^threads\.rest' "$tmp/mm.ll")
        if [ "$rest" = 0 ]; then ok
        else bad "matmul's shape ($features): $rest regions with a rest chunk under unknown lanes, expected none"; fi
        if grep -q 'llvm.loop.unroll.disable' "$tmp/mm.ll"; then ok
        else bad "matmul's shape ($features): the last block's chunk loop is not marked never unrolled"; fi
        # the 16 accumulators' per-thread arrays: a cache line longer than
        # 1024 elements and aligned to one (barrier_split.c), so that they
        # fall in different L1 sets and a chunk's vector is one line;
        # KJIT_SIMD_THREAD_ARRAYS=0 gives the layout before
        lines=$(grep -c 'alloca \[1032 x double\], align 64' "$tmp/mm.ll")
        if [ "$lines" = 16 ]; then ok
        else bad "matmul's shape ($features): $lines per-thread arrays of 1032 f64 aligned to 64, expected 16"; fi
        if KJIT_SIMD_THREAD_ARRAYS=0 KJIT_CPU_FEATURES=$features "$kjit" build "$mm" --block 16,16 \
                --emit=llvm -O0 -o "$tmp/mm0.ll" >"$tmp/out" 2>"$tmp/err" &&
            [ "$(grep -c 'alloca \[1024 x double\], align 16' "$tmp/mm0.ll")" = 16 ]; then ok
        else bad "KJIT_SIMD_THREAD_ARRAYS=0 ($features): not the 16 arrays of 1024 f64 before"; fi
    else
        bad "kjit build $mm --block 16,16 --emit=llvm -O0 ($features)"
    fi
done

# dot's WARPS forms (count 2: a full block's loop; count 4: the last block's)
if "$kjit" build examples/reduce.kern --target cuda --function dot --emit=llvm -O0 -o "$tmp/dot.ll" \
        >"$tmp/out" 2>"$tmp/err"; then
    if ! grep -q 'llvm.loop.unroll.count", i32 1}' "$tmp/dot.ll" &&
        grep -q 'llvm.loop.unroll.count", i32 2}' "$tmp/dot.ll" &&
        grep -q 'llvm.loop.unroll.count", i32 4}' "$tmp/dot.ll"; then ok
    else bad "the WARPS form's loops: two copies of a full block's, cuda's four of the last block's"; fi
    KJIT_REDUCE_WARPS_SHORT=1 "$kjit" build examples/reduce.kern --target cuda --function dot --emit=llvm -O0 \
        -o "$tmp/dots.ll" >"$tmp/out" 2>"$tmp/err"
    if ! grep -q 'llvm.loop.unroll.count", i32 4}' "$tmp/dots.ll" &&
        grep -q 'llvm.loop.unroll.count", i32 2}' "$tmp/dots.ll"; then ok
    else bad "KJIT_REDUCE_WARPS_SHORT=1: the last block without its loop of B / L steps"; fi
    KJIT_REDUCE_TAIL_UNROLL=1 "$kjit" build examples/reduce.kern --target cuda --function dot --emit=llvm -O0 \
        -o "$tmp/dot1.ll" >"$tmp/out" 2>"$tmp/err"
    if grep -q 'llvm.loop.unroll.count", i32 1}' "$tmp/dot1.ll"; then ok
    else bad "KJIT_REDUCE_TAIL_UNROLL=1: the last block's loop not unrolled"; fi
    KJIT_REDUCE_WARPS_UNROLL=2 KJIT_REDUCE_TAIL_UNROLL=2 "$kjit" build examples/reduce.kern --target cuda \
        --function dot --emit=llvm -O0 -o "$tmp/dot2.ll" >"$tmp/out" 2>"$tmp/err"
    if ! grep -q 'llvm.loop.unroll.count", i32 4}' "$tmp/dot2.ll"; then ok
    else bad "KJIT_REDUCE_WARPS_UNROLL=2: the full blocks' loop in two copies"; fi
    # two WARPS kernels (f32, f64), each with an opaque base in both loops' blocks
    opaque=$(grep -c 'call i64 asm "", "=l,0"' "$tmp/dot.ll")
    if [ "$opaque" -eq 4 ]; then ok
    else bad "the WARPS forms' opaque bases: $opaque in dot's IR, expected 4"; fi
    if "$kjit" build examples/reduce.kern --target cuda --function dot --emit=llvm -O3 -o "$tmp/dot3.ll" \
            >"$tmp/out" 2>"$tmp/err" && [ "$(grep -c 'call i64 asm "", "=l,0"' "$tmp/dot3.ll")" -eq 2 ]; then ok
    else bad "the WARPS forms' opaque bases after -O3: one a kernel expected"; fi
    KJIT_REDUCE_WARPS_MAIN=1 "$kjit" build examples/reduce.kern --target cuda --function dot --emit=llvm -O0 \
        -o "$tmp/dotm.ll" >"$tmp/out" 2>"$tmp/err"
    if ! grep -q ' asm ""' "$tmp/dotm.ll"; then ok
    else bad "KJIT_REDUCE_WARPS_MAIN=1: main's form, without opaque bases"; fi
    # each kernel's PTX, one file a kernel, for new and main's form
    for v in new main; do
        if KJIT_REDUCE_WARPS_MAIN=$([ $v = main ] && echo 1 || echo 0) "$kjit" build examples/reduce.kern \
                --target cuda --function dot --emit=ptx -o "$tmp/dot.$v.ptx" >"$tmp/out" 2>"$tmp/err"; then
            awk -v dir="$tmp" -v v=$v '/^\.visible \.entry/ {name = $3; sub(/\(.*/, "", name)}
                 name {print > (dir "/" name "." v)} /^}/ {name = ""}' "$tmp/dot.$v.ptx"
        else bad "kjit build --emit=ptx ($v)"; fi
    done
    warps=0 columns=0
    for f in "$tmp"/dot__*.new; do
        k=$(basename "$f" .new)
        case $k in
            *__rwt*)
                warps=$((warps + 1))
                if ! grep -q 'div\.s64' "$f" && grep -q 'div\.s64' "$tmp/$k.main"; then ok
                else bad "$k: a division by chunks in new's form, or none in main's"; fi ;;
            *__rkt*)
                columns=$((columns + 1))
                if cmp -s "$f" "$tmp/$k.main"; then ok
                else bad "$k: the COLUMNS form's PTX differs between new and main's WARPS form"; fi ;;
        esac
    done
    if [ "$warps" -eq 2 ] && [ "$columns" -eq 2 ]; then ok
    else bad "dot's PTX: $warps WARPS and $columns COLUMNS kernels, expected 2 and 2"; fi
else
    grep -q 'libdevice\|CUDA' "$tmp/err" && ok || bad "kjit build examples/reduce.kern --target cuda --emit=llvm"
fi
finish
