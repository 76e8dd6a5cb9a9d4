#!/bin/sh
# reduce_shared.sh: the cpu LANES form's code that LLVM compiles once a
# combine, not once a level (run by `make test-cli`; compiler/reduce.c,
# issue 25 item 1, docs/performance.md 2026-11-29 redshare):
#   - the lane tree is one function of each @reduce signature,
#     <combine>__lanetree, defined once and called by both levels that
#     `kjit build` compiles (rv01c and rv11s), kept out of line at -O3;
#     KJIT_REDUCE_TREE_INLINE=1 writes it in each level (main's form);
#   - a strided level's lane loops that load elements stay scalar: no vector
#     copy of them for a unit stride (at -O3 no masked load in rv11s);
#     KJIT_REDUCE_STRIDED_VECTOR=1 leaves them to LLVM's vectoriser;
#   - each switch gives the same bits and compiles cache entries of its own.
#
#   tests/cli/reduce_shared.sh build/kjit
. "$(dirname "$0")/lib.sh"
export KJIT_CACHE=off

src=examples/reduce.kern
signatures=12 # vsum, vmax: 4 each; dot, sumsq: 2 each

# one line a function: its name and the lines of its body
bodies() { awk '/^define/ { name = $0; sub(/\(.*/, "", name); sub(/.*@/, "", name) }
               name != "" { print name "\t" $0 } /^}/ { name = "" }' "$1"; }

if "$kjit" build $src --emit=llvm -O0 -o "$tmp/o0.ll" 2>"$tmp/err"; then
    n=$(grep -c '^define internal .*__lanetree__impl(' "$tmp/o0.ll")
    [ "$n" = $signatures ] && ok || bad "-O0: $n lane tree functions, not $signatures"
    calls=$(grep -c 'call .*@vsum__f32_f32__lanetree__impl(' "$tmp/o0.ll")
    [ "$calls" = 2 ] && ok || bad "-O0: vsum f32's tree called $calls times, not 2 (one a level)"
else bad "kjit build $src --emit=llvm -O0"; fi

if "$kjit" build $src --emit=llvm -o "$tmp/o3.ll" 2>"$tmp/err"; then
    n=$(grep -c '^define internal .*__lanetree__impl(' "$tmp/o3.ll")
    [ "$n" = $signatures ] && ok || bad "-O3: $n lane tree functions kept out of line, not $signatures"
    calls=$(bodies "$tmp/o3.ll" | grep -c '^dot__f64_f64__r.*call .*@dot__f64_f64__lanetree__impl(')
    [ "$calls" = 2 ] && ok || bad "-O3: dot f64's tree called from $calls levels, not 2"
    masked=$(bodies "$tmp/o3.ll" | grep '^vsum__f32_f32__rv11s__range' | grep -c 'masked.load')
    [ "$masked" = 0 ] && ok || bad "-O3: vsum f32's strided level has $masked masked loads (a unit-stride copy)"
    masked=$(bodies "$tmp/o3.ll" | grep '^vsum__f32_f32__rv01c__range' | grep -c 'masked.load')
    [ "$masked" -ge 1 ] && ok || bad "-O3: vsum f32's contiguous level lost its masked vector loads"
else bad "kjit build $src --emit=llvm"; fi

if KJIT_REDUCE_TREE_INLINE=1 KJIT_REDUCE_STRIDED_VECTOR=1 "$kjit" build $src --emit=llvm \
        -o "$tmp/main.ll" 2>"$tmp/err"; then
    n=$(grep -c '__lanetree__impl' "$tmp/main.ll")
    [ "$n" = 0 ] && ok || bad "KJIT_REDUCE_TREE_INLINE=1: $n lines name a lane tree function"
    masked=$(bodies "$tmp/main.ll" | grep '^vsum__f32_f32__rv11s__range' | grep -c 'masked.load')
    [ "$masked" -ge 1 ] && ok || bad "KJIT_REDUCE_STRIDED_VECTOR=1: no unit-stride copy in the strided level"
else bad "kjit build $src --emit=llvm with both switches"; fi

# The same bits: contiguous and strided levels, short rows (one block shorter
# than the 32 lanes), a partial second level, two reduced axes, a map, an init.
n=0
while read -r args; do
    n=$((n + 1))
    for sw in X_=1 KJIT_REDUCE_TREE_INLINE=1 KJIT_REDUCE_STRIDED_VECTOR=1; do
        for target in cpu parallel; do
            env $sw "$kjit" run $src $args --target $target -o "$tmp/r.npy" >"$tmp/out" 2>"$tmp/err" ||
                { bad "kjit run $src $args ($sw, $target)"; continue; }
            if [ $sw = X_=1 ] && [ $target = cpu ]; then cp "$tmp/r.npy" "$tmp/first.npy"
            elif cmp -s "$tmp/r.npy" "$tmp/first.npy"; then ok
            else bad "kjit run $src $args: $sw on $target gives other bits"; fi
        done
    done
done <<'EOF'
vsum rand:f32:100003
vsum rand:f64:1000x333 --axis 0
vsum rand:f64:5000x3 --axis 1
vmax randn:f32:77x5x301 --axis 0,2
vmax rand:i64:3000x40 --axis 0
dot rand:f64:300x777 rand:f64:300x777 --axis 0
sumsq rand:f32:1000x33 --axis 1 --init 2.5
EOF

# Each switch compiles cache entries of its own, which a second run finds.
own_cache_entries vsum X_=1 "KJIT_REDUCE_TREE_INLINE=1 KJIT_REDUCE_STRIDED_VECTOR=1" \
    $src vsum rand:f64:300x200 --axis 0 --target cpu

finish
