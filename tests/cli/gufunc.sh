#!/bin/sh
# gufunc.sh: examples/gufunc.kern through `kjit run` (run by `make test-cli`).
#
# Every function of the example (dot, row norms, a moving average, matmul),
# on cpu and parallel, and on cuda where a GPU is usable, on fresh random
# inputs written by NumPy, against NumPy's float64 results: the dot over rows
# of 16 (1000 + a random count, so no multiple of anything), with an empty
# loop, one loop element, no loop dimension (a 0-d result) and broadcast loop
# dimensions; f32 matmul with broadcast loop dimensions; the moving average
# with a window given as a number and as an array of windows per row; the
# outputs given as arguments (--save).  Tolerances: relative 1e-12 for f64,
# 1e-5 for f32 (a few ulps of sums of products of numbers in [0, 1)).  Then
# a core size mismatch and a wrong output shape are clear errors (exit 1).
# Run from the repository root:
#
#   tests/cli/gufunc.sh build/kjit
. "$(dirname "$0")/lib.sh"
show_out=0
kern=examples/gufunc.kern

# Fresh inputs each run (the seed is printed for a failure to be replayed).
seed=${GUFUNC_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
echo "gufunc.sh: seed $seed (GUFUNC_SEED); targets: $targets"
python3 - "$tmp" "$seed" <<'PY' || { echo "FAIL: NumPy could not write the inputs"; exit 1; }
import sys
import numpy as np
d, seed = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(seed)
rows = 1000 + int(rng.integers(0, 999))
np.save(f"{d}/a.npy", rng.random((rows, 16)))
np.save(f"{d}/b.npy", rng.random((rows, 16)))
np.save(f"{d}/a_empty.npy", rng.random((0, 16)))
np.save(f"{d}/a_one.npy", rng.random((1, 16)))
np.save(f"{d}/v.npy", rng.random(37))
np.save(f"{d}/a3.npy", rng.random((7, 1, 9)))
np.save(f"{d}/b3.npy", rng.random((5, 9)))
np.save(f"{d}/x.npy", rng.random((13, 101)))
np.save(f"{d}/w.npy", rng.integers(1, 12, 13))
np.save(f"{d}/m1.npy", rng.random((3, 1, 6, 5)).astype(np.float32))
np.save(f"{d}/m2.npy", rng.random((4, 5, 7)).astype(np.float32))
np.save(f"{d}/out.npy", np.zeros(rows))
PY

# check NAME TOLERANCE: compares $tmp/NAME.got.npy with NumPy's reference.
check() {
    if python3 - "$tmp" "$1" "$2" >"$tmp/err" 2>&1 <<'PY'; then ok; else bad "$1 on $target"; fi
import sys
import numpy as np
d, name, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
L = lambda n: np.load(f"{d}/{n}.npy")
def moving(x, w):
    w = np.broadcast_to(w, x.shape[:-1])
    out = np.empty(x.shape)
    for r in np.ndindex(x.shape[:-1]):
        for i in range(x.shape[-1]):
            out[r + (i,)] = x[r][max(0, i - w[r] + 1):i + 1].mean()
    return out
ref = {
    "dot": lambda: np.einsum("...n,...n->...", L("a"), L("b")),
    "dot_empty": lambda: np.einsum("...n,...n->...", L("a_empty"), L("a_empty")),
    "dot_one": lambda: np.einsum("...n,...n->...", L("a_one"), L("a_one")),
    "dot_0d": lambda: np.dot(L("v"), L("v")),
    "dot_broadcast": lambda: np.einsum("...n,...n->...", L("a3"), L("b3")),
    "dot_given": lambda: np.einsum("...n,...n->...", L("a"), L("b")),
    "norm": lambda: np.linalg.norm(L("x"), axis=-1),
    "moving": lambda: moving(L("x"), 5),
    "moving_rows": lambda: moving(L("x"), L("w")),
    "matmul": lambda: np.matmul(L("m1").astype(np.float64), L("m2").astype(np.float64)),
}[name]()
got = L(name + ".got")
assert got.shape == ref.shape, f"shape {got.shape}, want {ref.shape}"
err = np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300), initial=0.0)
if name.startswith("moving"):
    # The example's running sum adds x[i] and subtracts x[i-w] each step: after
    # i+1 steps up to 2 (i+1) roundings of eps times the prefix sum of |x|,
    # divided by the window's length like the result.  err is in units of that.
    x = L("x")
    w = np.broadcast_to(5 if name == "moving" else L("w"), x.shape[:-1])[..., None]
    steps = np.arange(1, x.shape[-1] + 1)
    bound = 2 * steps * np.finfo(np.float64).eps * np.cumsum(np.abs(x), axis=-1)
    bound = bound / np.minimum(steps, w) + np.finfo(np.float64).tiny
    err, tol = np.max(np.abs(got - ref) / bound, initial=0.0), 1.0
assert err <= tol, f"relative error {err:.3g} > {tol}"
PY
}

# run NAME ARGS...: kjit run on $target writing the result to NAME.got.npy.
run() {
    name=$1
    shift
    if "$kjit" run $kern "$@" --target "$target" -o "$tmp/$name.got.npy" >/dev/null 2>"$tmp/err"; then
        check "$name" "$tol"
    else
        bad "kjit run $kern $* --target $target"
    fi
}

for target in $targets; do
    tol=1e-12
    run dot dot "$tmp/a.npy" "$tmp/b.npy"
    run dot_empty dot "$tmp/a_empty.npy" "$tmp/a_empty.npy"
    run dot_one dot "$tmp/a_one.npy" "$tmp/a_one.npy"
    run dot_0d dot "$tmp/v.npy" "$tmp/v.npy"
    run dot_broadcast dot "$tmp/a3.npy" "$tmp/b3.npy"
    run norm row_norm "$tmp/x.npy"
    run moving moving_average "$tmp/x.npy" 5
    run moving_rows moving_average "$tmp/x.npy" "$tmp/w.npy"
    tol=1e-5
    run matmul matmul "$tmp/m1.npy" "$tmp/m2.npy"
    # The output given as an argument, saved after the run.
    tol=1e-12
    if "$kjit" run $kern dot "$tmp/a.npy" "$tmp/b.npy" "$tmp/out.npy" --target "$target" \
            --save "2=$tmp/dot_given.got.npy" >/dev/null 2>"$tmp/err"; then
        check dot_given "$tol"
    else
        bad "dot with its output given on $target"
    fi
done

# Errors: exit 1 with the message the library gives.
target=cpu
if "$kjit" run $kern dot "$tmp/a.npy" "$tmp/v.npy" --target cpu >/dev/null 2>"$tmp/err"; then
    bad "a core size mismatch ran"
elif grep -q "core dimension n: 16 in argument 0, 37 in argument 1" "$tmp/err"; then
    ok
else
    bad "a core size mismatch: no message naming n and both sizes"
fi
if "$kjit" run $kern dot "$tmp/a.npy" "$tmp/b.npy" "$tmp/v.npy" --target cpu >/dev/null 2>"$tmp/err"; then
    bad "a wrong output shape ran"
elif grep -q "output 0 has shape (37,), but the call gives" "$tmp/err"; then
    ok
else
    bad "a wrong output shape: no message"
fi

finish
