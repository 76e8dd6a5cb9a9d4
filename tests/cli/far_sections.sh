#!/bin/sh
# far_sections.sh: compiled code runs when mmap puts every mapping far from
# the others (run by `make test-cli`).
#
# The code of the small code model reaches its constants, its GOT and the
# stubs of its calls to libm through 32-bit offsets; spread_mmap.c, preloaded,
# puts each anonymous mapping 4 GiB from the one before, as a process with
# large holes in its address space (the CUDA driver loaded) may get now and
# then.  Each program runs on cpu and parallel, with --lineinfo (code linked
# by LLVM's RuntimeDyld) and without (JITLink), with and without the preloaded
# library, on the same random inputs: the printed results and the saved
# arrays must be the same bytes.  (Before cpu_jit.c linked code with line
# tables into one reservation per object, every --lineinfo run here died of
# SIGSEGV.)
#
#   tests/cli/far_sections.sh build/kjit
. "$(dirname "$0")/lib.sh"
show_out=0
unset KJIT_LINEINFO

cc=${CC:-cc}
if ! "$cc" -shared -fPIC -o "$tmp/spread_mmap.so" "$(dirname "$0")/spread_mmap.c" -ldl \
    2>"$tmp/err"; then
    echo "$script: skipped: $cc cannot build the preloaded library"
    sed 's/^/    ! /' "$tmp/err" | head -5
    exit 0
fi

cat >"$tmp/far.kern" <<'KERN'
import geo;

fn distance(lat: f64, lon: f64) -> f64 {
    return haversine_km(lat, lon, 30.0, 101.0);
}

@vectorize
fn wave(x: f64, y: f32) -> f64 {
    return sin(x) * f64(y) + exp(-x * x) + haversine_m(x, 2.0 * x, 3.0, 4.0);
}

@kernel
fn scale(a: f32[], b: f32[]) {
    let i = grid(1);
    if i < len(a) {
        b[i] = cos(a[i]) * 3.0 + asin(a[i] * 0.5);
        if i == 7 { print("b[7] =", b[i]); }
    }
}
KERN

# name, then the arguments of kjit run after FILE
set -- \
    "distance|distance 41.9 12.5" \
    "wave|wave rand:f64:1000 rand:f32:1000 --seed 7 -o @/wave.npy" \
    "scale|scale rand:f32:4000 zeros:f32:4000 --seed 9 --grid 16 --block 256 --save 1=@/scale.npy"

# near: where mmap puts the mappings; far: each 4 GiB from the one before
for target in cpu parallel; do
    for lines in --lineinfo ""; do
        for case in "$@"; do
            name=${case%%|*}
            what="$name on $target ${lines:-without line info}"
            for how in near far; do
                mkdir -p "$tmp/$how"
                args=$(echo "${case#*|}" | sed "s|@|$tmp/$how|g")
                preload=
                [ "$how" = far ] && preload=$tmp/spread_mmap.so
                # shellcheck disable=SC2086
                LD_PRELOAD=$preload KJIT_CACHE_DIR=$tmp/cache-$how "$kjit" run "$tmp/far.kern" $args \
                    --target "$target" $lines >"$tmp/$how/out" 2>"$tmp/err"
                echo "rc $?" >>"$tmp/$how/out"
            done
            for how in near far; do
                grep -v '^compile:\|^run:' "$tmp/$how/out" | sed "s|$tmp/$how|DIR|g" >"$tmp/$how.txt"
            done
            if ! grep -q '^rc 0$' "$tmp/near.txt"; then
                bad "$what: kjit run failed without the preloaded library"
            elif ! diff "$tmp/near.txt" "$tmp/far.txt" >"$tmp/out"; then
                show_out=20
                bad "$what, mappings 4 GiB apart: the output differs (< wanted, > got)"
                show_out=0
            elif [ -f "$tmp/near/$name.npy" ] && ! cmp -s "$tmp/near/$name.npy" "$tmp/far/$name.npy"; then
                bad "$what, mappings 4 GiB apart: $name.npy differs"
            else
                ok
            fi
            rm -f "$tmp/near/$name.npy" "$tmp/far/$name.npy"
        done
    done
done
finish
