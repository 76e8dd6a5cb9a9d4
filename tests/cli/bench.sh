#!/bin/sh
# bench.sh: tests of `kjit bench` (run by `make test-cli`).
#
# The same calls on cpu and parallel (and cuda where a GPU is usable; where it
# is not, the cuda row must say why and the bench must still succeed), the
# table, the JSON (read back with python3) and the CSV; agreement with float64
# references that NumPy computes from random inputs, within the default
# tolerance of 16 ulps; a deliberately wrong reference reported as a mismatch
# (exit 1); usage errors (exit 2).  Run from the repository root:
#
#   tests/cli/bench.sh build/kjit
. "$(dirname "$0")/lib.sh"
show_out=40
show_err=20

# bench WANT_RC ARGS...: runs kjit bench, output in $tmp/out and $tmp/err.
bench() {
    want=$1
    shift
    "$kjit" bench "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" != "$want" ]; then
        bad "kjit bench $* exited $rc, expected $want"
        return 1
    fi
    return 0
}

# expect PATTERN DESCRIPTION: $tmp/out must match the extended regex.
expect() {
    if grep -Eq "$1" "$tmp/out"; then ok; else bad "$2: no line matches /$1/"; fi
}

case " $targets " in *" cuda "*) gpu=1 ;; *) gpu=0 ;; esac

# Inputs and float64 references from NumPy.
python3 - "$tmp" <<'PY' || { echo "bench.sh: python3 with numpy is needed"; exit 2; }
import sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(12345)
x64 = rng.standard_normal(100000) * 10
np.save(f"{d}/x64.npy", x64)
np.save(f"{d}/sin_ref.npy", np.sin(x64))
np.save(f"{d}/sin_wrong.npy", np.sin(x64) * (1 + 1e-9))
x32 = rng.standard_normal(50000).astype(np.float32)
np.save(f"{d}/x32.npy", x32)
np.save(f"{d}/exp_ref.npy", np.exp(x32.astype(np.float64)).astype(np.float32))
a = rng.random(30000).astype(np.float32)
b = rng.random(30000).astype(np.float32)
np.save(f"{d}/a.npy", a)
np.save(f"{d}/b.npy", b)
np.save(f"{d}/add_ref.npy", (a.astype(np.float64) + b).astype(np.float32))
# The Mandelbrot image of examples/mandelbrot.kern, 48 x 64 pixels, 20 iterations.
h, w, iters = 48, 64, 20
xs = -2.0 + np.arange(w) * (3.0 / w)
ys = -1.0 + np.arange(h) * (2.0 / h)
img = np.full((h, w), iters, dtype=np.uint8)
for j, y in enumerate(ys):
    for i, x in enumerate(xs):
        c = complex(x, y)
        z = 0j
        for k in range(iters):
            z = z * z + c
            if z.real * z.real + z.imag * z.imag >= 4:
                img[j, i] = k
                break
np.save(f"{d}/mandel_ref.npy", img)
wrong = img.copy()
wrong[10, 10] ^= 1
np.save(f"{d}/mandel_wrong.npy", wrong)
PY

# ---------------------------------------------------------------- the table
if bench 0 examples/add.kern add rand:f32:1e5 rand:f32:1e5 --repeat 3; then
    expect '^cpu +.*[0-9.]+x +[0-9.]+x +\(baseline\)$' "cpu is the baseline row"
    expect '^parallel +.*, [0-9]+ threads? .*identical$' "parallel agrees exactly on an add"
    expect '100000 elements, 1.2 MB moved per call' "elements and bytes of the call"
    expect 'compile ms +transfer ms +run ms +throughput +speed-up +agreement' "the column groups"
    if [ $gpu = 1 ]; then
        expect '^cuda +.*(identical|ok: )' "cuda agrees with cpu"
        expect '^cuda over cpu: [0-9.]+x on the run, [0-9.]+x counting transfers' "the cuda speed-up"
    else
        expect '^cuda +unavailable: .+' "cuda is listed as unavailable, with the reason"
    fi
    # Not a terminal: no progress on stderr.
    if [ -s "$tmp/err" ]; then bad "stderr is not quiet when it is not a terminal"; else ok; fi
fi

# A missing target alone is not an error; the first target that runs is the baseline.
if [ $gpu = 0 ] && bench 0 examples/add.kern add rand:f32:1e3 rand:f32:1e3 --targets cuda --repeat 1; then
    expect '^cuda +unavailable: ' "--targets cuda on a machine without a GPU"
fi
if [ $gpu = 0 ] && bench 0 examples/add.kern add rand:f32:1e3 rand:f32:1e3 --targets cuda,parallel,cpu --repeat 1; then
    expect '^cuda +unavailable: ' "an unavailable first target"
    expect '^parallel .*\(baseline\)$' "the first target that runs is the baseline"
    expect '^cpu .*identical$' "compared with that baseline"
fi

# ----------------------------------------------------------------- the JSON
if bench 0 examples/sin.kern vsin randn:f64:1e4 --repeat 3 --json; then
    if python3 - "$tmp/out" "$gpu" <<'PY'; then ok; else bad "the JSON of a bench"; fi
import json, sys
d = json.load(open(sys.argv[1]))
gpu = sys.argv[2] == "1"
assert d["function"] == "vsin" and d["kind"] == "vectorize" and d["signature"] == "f64(f64)"
assert d["repeat"] == 3 and d["reference"] is None
(res,) = d["results"]
assert res["elements"] == 10000 and res["bytes"] == 160000 and res["baseline"] == "cpu", res
t = {x["target"]: x for x in res["targets"]}
assert list(t) == ["cpu", "parallel", "cuda"]
for name in ["cpu", "parallel"]:
    x = t[name]
    assert x["available"] and x["ok"], x
    r = x["run_ms"]
    assert 0 < r["min"] <= r["median"] <= r["max"], r
    assert x["compile_ms"]["cold"] > 0 and x["compile_ms"]["cached"] > 0
    assert x["transfer_ms"] is None
    assert x["elements_per_s"] > 0 and x["gb_per_s"] > 0
assert t["cpu"]["agreement"]["verdict"] == "baseline"
assert t["cpu"]["speedup"] == 1
a = t["parallel"]["agreement"]
assert a["verdict"] in ("identical", "ok") and a["differing"] == 0 and a["compared"] == 10000, a
if gpu:
    x = t["cuda"]
    assert x["available"] and x["ok"] and x["transfer_ms"]["in"]["median"] > 0, x
    assert x["agreement"]["verdict"] in ("identical", "ok"), x["agreement"]
else:
    assert t["cuda"]["available"] is False and t["cuda"]["reason"], t["cuda"]
PY
fi

# A kernel, with --json written to a file beside the table, and --csv.
if bench 0 examples/mandelbrot.kern mandel_kernel -2.0 1.0 -1.0 1.0 zeros:u8:48x64 20 \
        --grid 4,4 --block 8,8 --repeat 2 --targets parallel,cpu --json="$tmp/m.json" \
        --csv="$tmp/m.csv"; then
    expect '^parallel .*\(baseline\)$' "the first target given is the baseline"
    expect '^cpu .*identical$' "the kernel's image agrees"
    if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); t=d["results"][0]["targets"]; assert d["kind"]=="kernel" and d["grid"]==[4,4,1] and [x["target"] for x in t]==["parallel","cpu"] and t[1]["agreement"]["compared"]==48*64' "$tmp/m.json"; then ok; else bad "the kernel's JSON file"; fi
    if [ "$(wc -l <"$tmp/m.csv")" = 3 ] && head -1 "$tmp/m.csv" | grep -q '^function,size,target,status,' &&
       grep -q '^mandel_kernel,3072,cpu,ok,' "$tmp/m.csv"; then ok; else bad "the CSV: $(cat "$tmp/m.csv")"; fi
fi

# ---------------------------------------------- agreement with references
if bench 0 examples/sin.kern vsin "$tmp/x64.npy" --reference "$tmp/sin_ref.npy" --repeat 2; then
    expect '^cpu .*(identical|ok: [0-9]+ ulp)' "sin f64 within 16 ulp of NumPy's"
    expect '^parallel .*(identical|ok: [0-9]+ ulp)' "sin f64 on parallel within 16 ulp of NumPy's"
fi
if bench 0 examples/exp.kern vexp "$tmp/x32.npy" --reference "$tmp/exp_ref.npy" --repeat 2; then
    expect '^cpu .*(identical|ok: [0-9]+ ulp)' "exp f32 within 16 ulp of float64 rounded"
fi
if bench 0 examples/add.kern add "$tmp/a.npy" "$tmp/b.npy" --reference "$tmp/add_ref.npy" --repeat 2; then
    expect '^cpu .*identical$' "f32 add is exactly float64 add rounded"
fi
if bench 0 examples/mandelbrot.kern mandel_kernel -2.0 1.0 -1.0 1.0 zeros:u8:48x64 20 \
        --grid 4,4 --block 8,8 --repeat 2 --reference 4="$tmp/mandel_ref.npy"; then
    expect '^cpu .*identical$' "the Mandelbrot image equals NumPy's"
fi

# A wrong reference is a mismatch: in the table, in the JSON, and exit 1.
if bench 1 examples/sin.kern vsin "$tmp/x64.npy" --reference "$tmp/sin_wrong.npy" --repeat 2; then
    expect '^cpu .*MISMATCH: [0-9]+ of 100000 differ' "a reference off by 1e-9 relative"
    expect '^parallel .*MISMATCH: ' "a wrong reference, parallel"
fi
if bench 1 examples/sin.kern vsin "$tmp/x64.npy" --reference "$tmp/sin_wrong.npy" --repeat 1 --json; then
    if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); a=[t["agreement"] for t in d["results"][0]["targets"] if t.get("ok")]; assert a and all(x["verdict"]=="mismatch" and x["differing"]>0 for x in a), a' "$tmp/out"; then ok; else bad "a mismatch in the JSON"; fi
fi
if bench 1 examples/mandelbrot.kern mandel_kernel -2.0 1.0 -1.0 1.0 zeros:u8:48x64 20 \
        --grid 4,4 --block 8,8 --repeat 1 --reference 4="$tmp/mandel_wrong.npy"; then
    expect '^cpu .*MISMATCH: 1 of 3072 differ, abs 1' "one wrong pixel"
fi
if bench 1 examples/sin.kern vsin randn:f64:999 --reference "$tmp/sin_ref.npy" --repeat 1; then
    expect 'MISMATCH: shape \(999,\), expected \(100000,\)' "a reference of another shape"
fi

# ------------------------------------------------------------ the sweep
if bench 0 examples/add.kern add rand:f32:10 rand:f32:10 --sizes 1e4,1e3,1e5 --repeat 2 --targets cpu,parallel,cuda; then
    expect '^size 1000:$' "one table per size, smallest first"
    expect '^100000 elements, 1.2 MB moved' "the generators resized"
    expect '^sweep: median ms per call, transfers included$' "the sweep table"
    expect '^crossover: (parallel beats cpu|no crossover up to 100000: parallel)' "parallel's crossover"
    if [ $gpu = 0 ]; then
        expect '^crossover: cuda unavailable \(.+\)$' "cuda's crossover when there is no GPU"
    else
        expect '^crossover: (cuda beats cpu|no crossover up to 100000: cuda)' "cuda's crossover"
    fi
fi
if bench 0 examples/add.kern add rand:f32:10 rand:f32:10 --sizes 1e3,1e4 --repeat 1 --json; then
    if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert [r["size"] for r in d["results"]]==[1000,10000]; assert d["results"][1]["args"]==["rand:f32:10000","rand:f32:10000"]; assert {c["target"] for c in d["crossover"]}=={"parallel","cuda"}' "$tmp/out"; then ok; else bad "the sweep's JSON"; fi
fi

# ------------------------------------------------ dynamic shared memory
# reverse_blocks reverses each block of 64 through shared(f32): with 256
# bytes every element moves; the targets must agree.
if bench 0 tests/golden/exec/dynamic_shared.kern reverse_blocks arange:f32:256 zeros:f32:256 \
    --grid 4 --block 64 --shared-bytes 256 --targets cpu,parallel --repeat 1; then
    expect '^parallel .*identical' "--shared-bytes reaches the kernel on every target"
fi
"$kjit" run tests/golden/exec/dynamic_shared.kern reverse_blocks arange:f32:128 zeros:f32:128 \
    --grid 2 --block 64 --shared-bytes 256 --target cpu --save 1="$tmp/reversed.npy" \
    >"$tmp/out" 2>"$tmp/err" &&
    python3 -c 'import numpy as np,sys; r=np.load(sys.argv[1]); a=np.arange(128,dtype=np.float32).reshape(2,64)[:,::-1].ravel(); assert (r==a).all()' "$tmp/reversed.npy" &&
    ok || bad "kjit run --shared-bytes: each block reversed"
bench 2 tests/golden/exec/dynamic_shared.kern reverse_blocks arange:f32:256 zeros:f32:256 \
    --grid 4 --block 64 --shared-bytes lots && ok

# --------------------------------------------------------- usage errors
bench 2 examples/add.kern add rand:f32:10 rand:f32:10 --targets cpu,gpu && ok
bench 2 examples/add.kern add rand:f32:10 rand:f32:10 --targets cpu,cpu && ok
bench 2 examples/add.kern add 1.0 2.0 --sizes 1e3 && ok
bench 2 examples/mandelbrot.kern mandel_kernel -2.0 1.0 -1.0 1.0 zeros:u8:48x64 20 && ok
bench 2 examples/das.kern das zeros:f64:76x120 rand:i64:256000 --grid 120 --block 76 \
    --reference "$tmp/sin_ref.npy" && ok
bench 2 examples/mandelbrot.kern mandel_kernel -2.0 1.0 -1.0 1.0 zeros:u8:48x64 20 \
    --grid 4,4 --block 8,8 --reference 0="$tmp/mandel_ref.npy" && ok
bench 2 examples/add.kern add rand:f32:10 && ok
bench 1 examples/add.kern nosuch rand:f32:10 && ok

finish
