#!/bin/sh
# demo.sh: every seed example compared on every target with `kjit bench`
# (cpu, parallel, and cuda where a GPU is usable; where it is not, the table
# says why), then one table of all of them, ending in the speed-up of cuda over
# cpu when there is a GPU.  A sweep of `add` shows from which size each target
# pays off.  The Mandelbrot and delay-and-sum images are written as PNG files
# into the output folder by `kjit run` on the best target.
#
#   examples/demo.sh [path/to/kjit] [output folder]     (make demo)
#
# The images are smaller than the seeds' full sizes (delay-and-sum is 120 x 76
# here, not 1200 x 762) so that the cpu runs take seconds, not minutes.
set -e
KJIT=${1:-build/kjit}
OUT=${2:-build/demo}
REPEAT=${REPEAT:-5}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
rm -f "$OUT"/*.csv
status=0
count=0

# bench TITLE ARGS...: one example on every target; its figures go to a CSV
# file that the summary reads (numbered, so it keeps the order).
bench() {
    title=$1
    shift
    count=$((count + 1))
    printf '\n== %s\n' "$title"
    # A mismatch or a failed target is reported in the table; the demo goes on.
    "$KJIT" bench "$@" --seed 7 --repeat "$REPEAT" --csv="$OUT/$count.csv" || status=1
    printf '%s\n' "$title" >"$OUT/$count.title"
}

bench "add f32, 1e7 elements" examples/add.kern add rand:f32:1e7 rand:f32:1e7
bench "sin f64, 1e7 elements" examples/sin.kern vsin randn:f64:1e7
bench "exp f32, 1e7 elements" examples/exp.kern vexp randn:f32:1e7
bench "LLA distance, vectorized, 1e6 points (scalars broadcast)" \
    examples/lla.kern lla_a rand:f64:1e6 rand:f64:1e6 40.7 -74.0 6371.0
bench "LLA distance kernel, 1000x1000 mesh built by the kernel" \
    examples/lla.kern lla 40.7 -74.0 -30 60 -120 10 6371.0 1000 1000 zeros:f64:1000x1000 \
    --grid 63,63 --block 16,16
bench "Mandelbrot 1536x1024, 20 iterations" \
    examples/mandelbrot.kern mandel_kernel -2.0 1.0 -1.0 1.0 zeros:u8:1024x1536 20 \
    --grid 32,16 --block 32,8
bench "delay-and-sum 120x76 (128x128 delays per pixel)" \
    examples/das.kern das zeros:f64:76x120 rand:i64:256000 --grid 120 --block 76

printf '\n== add f32 from 1e3 to 1e7 elements: where does each target pay off?\n'
"$KJIT" bench examples/add.kern add rand:f32:1e3 rand:f32:1e3 --sizes 1e3,1e5,1e6,1e7 \
    --seed 7 --repeat "$REPEAT" || status=1

# One table of every example: run time per target (median ms), cuda with its
# transfers, and cuda's speed-up over cpu.  CSV columns: 3 target, 4 status,
# 9 run median ms, 12 total ms (transfers included), 19 agreement.
printf '\n== all examples (median ms per call; cuda also counting its transfers)\n'
i=1
while [ $i -le $count ]; do
    awk -F, -v title="$(cat "$OUT/$i.title")" '
        NR > 1 { state[$3] = $4; run[$3] = $9; total[$3] = $12
                 if ($19 == "mismatch") agree = "MISMATCH" }
        function ms(t) { return state[t] == "ok" ? sprintf("%.4g", run[t]) : state[t] }
        END {
            if (agree == "") agree = "agree"
            cuda = state["cuda"] == "ok" ? sprintf("%.4g (%.4g)", run["cuda"], total["cuda"]) : state["cuda"]
            speedup = "-"
            if (state["cuda"] == "ok" && state["cpu"] == "ok")
                speedup = sprintf("%.1fx (%.1fx)", run["cpu"] / run["cuda"], total["cpu"] / total["cuda"])
            printf "%-58s %10s %10s %22s %16s  %s\n", title, ms("cpu"), ms("parallel"), cuda, speedup, agree
        }' "$OUT/$i.csv"
    i=$((i + 1))
done | {
    printf '%-58s %10s %10s %22s %16s  %s\n' example cpu parallel "cuda (+transfers)" \
        "cuda over cpu" outputs
    cat
} | tee "$OUT/summary.txt"

# The geometric mean of cuda's speed-up over cpu, or why there is none.
cat "$OUT"/*.csv | awk -F, '
    $3 == "cpu" && $4 == "ok" { cpu_run = $9; cpu_total = $12 }
    $3 == "cuda" && $4 == "ok" && cpu_run > 0 {
        n++; run += log(cpu_run / $9); total += log(cpu_total / $12) }
    END {
        if (n) printf "\ncuda over cpu, geometric mean of %d examples: %.1fx on the run, %.1fx counting transfers\n", n, exp(run / n), exp(total / n)
    }' | tee -a "$OUT/summary.txt"
reason=$(sed -n 's/^[^,]*,[^,]*,cuda,unavailable,.*,"\(.*\)"$/\1/p' "$OUT"/1.csv | head -1)
if [ -n "$reason" ]; then
    printf '\ncuda: unavailable here (%s)\n' "$reason" | tee -a "$OUT/summary.txt"
fi

# The images: on the GPU when there is one, else across the cores.
best=parallel
"$KJIT" info | grep -q '^  cuda      yes' && best=cuda
printf '\n== images (on %s)\n' "$best"
"$KJIT" run examples/mandelbrot.kern mandel_kernel -2.0 1.0 -1.0 1.0 zeros:u8:1024x1536 20 \
    --grid 32,16 --block 32,8 --target "$best" --save "4=$OUT/mandelbrot.png" | grep -E '^(wrote|mandel)'
# Delay-and-sum of the echoes of three point scatterers (echoes() in das.kern
# simulates them): the brightest pixels of the image are where they stand.
# Each scatterer's run adds its echoes to the last run's file and writes a
# new one: kjit run refuses to overwrite a file the run reads.
data="$OUT/echoes.npy"
"$KJIT" run examples/das.kern echoes zeros:i64:256000 30 20 1 --grid 1 --block 128 \
    --target "$best" --save "0=$OUT/echoes1.npy" > /dev/null &&
"$KJIT" run examples/das.kern echoes "$OUT/echoes1.npy" 80 50 1 --grid 1 --block 128 \
    --target "$best" --save "0=$OUT/echoes2.npy" > /dev/null &&
"$KJIT" run examples/das.kern echoes "$OUT/echoes2.npy" 100 30 1 --grid 1 --block 128 \
    --target "$best" --save "0=$data" > /dev/null &&
"$KJIT" run examples/das.kern das zeros:f64:76x120 "$data" --grid 120 --block 76 \
    --target "$best" --save "0=$OUT/das.png" | grep -E '^(wrote|das)'
for image in mandelbrot das; do
    [ -s "$OUT/$image.png" ] || { echo "demo: $OUT/$image.png was not made (see above)"; status=1; }
done
printf '\nimages and the tables (CSV, summary.txt) in %s\n' "$OUT"
exit $status
