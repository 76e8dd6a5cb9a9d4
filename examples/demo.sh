#!/bin/sh
# demo.sh: every seed example run through `kjit run` on the cpu and parallel
# targets, printing what each computed and how long it took.  The Mandelbrot
# and delay-and-sum images are written as PNG files into the output folder.
#
#   examples/demo.sh [path/to/kjit] [output folder]     (make demo)
set -e
KJIT=${1:-build/kjit}
OUT=${2:-build/demo}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."

run() {
    title=$1
    shift
    for target in cpu parallel; do
        printf '\n== %s [%s]\n' "$title" "$target"
        # $@ may name files with @T@, replaced by the target
        args=$(printf '%s\n' "$@" | sed "s/@T@/$target/g" | tr '\n' ' ')
        # shellcheck disable=SC2086
        "$KJIT" run $args --target "$target" --seed 7 --repeat 3
    done
}

run "add f32, 1e7 elements" examples/add.kern add rand:f32:1e7 rand:f32:1e7
run "sin f64, 1e7 elements" examples/sin.kern vsin randn:f64:1e7
run "exp f32, 1e7 elements" examples/exp.kern vexp randn:f32:1e7
run "LLA distance, vectorized, 1e6 points against one (scalars broadcast)" \
    examples/lla.kern lla_a rand:f64:1e6 rand:f64:1e6 40.7 -74.0 6371.0
run "LLA distance kernel, 1000x1000 mesh built by the kernel" \
    examples/lla.kern lla 40.7 -74.0 -30 60 -120 10 6371.0 1000 1000 zeros:f64:1000x1000 \
    --grid 63,63 --block 16,16
run "Mandelbrot 1536x1024, 20 iterations" \
    examples/mandelbrot.kern mandel_kernel -2.0 1.0 -1.0 1.0 zeros:u8:1024x1536 20 \
    --grid 32,16 --block 32,8 --save "4=$OUT/mandelbrot-@T@.png"
run "delay-and-sum 120x76 (128x128 delays per pixel)" \
    examples/das.kern das zeros:f64:76x120 rand:i64:256000 \
    --grid 120 --block 76 --save "0=$OUT/das-@T@.png"
printf '\nimages in %s\n' "$OUT"
