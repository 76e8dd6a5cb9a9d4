#!/bin/sh
# device_functions.sh: `kjit run` on kernels that call device functions, use
# the newer atomics on 2-D arrays and size shared memory with constants (run by
# `make test-cli`).  Fresh random inputs from NumPy each run; results compared
# with NumPy's, on cpu and parallel (and cuda where a GPU is usable); a device
# function called from the command line is refused, naming the built-in.
#
#   tests/cli/device_functions.sh build/kjit
. "$(dirname "$0")/lib.sh"
show_out=0
show_err=20

cat >"$tmp/hist.kern" <<'KERN'
const BLOCK = 256;
const BINS: i64 = 16;

fn add_byte(hist: i32[], v: u8) {
    atomic_add(hist, i64(v), 1);
}

fn global_index() -> i64 {
    return i64(blockIdx.x) * i64(blockDim.x) + i64(threadIdx.x);
}

@kernel
fn histogram(data: u8[], hist: i32[]) {
    let i = global_index();
    if i < len(data) { add_byte(hist, data[i]); }
}

@kernel
fn pairs(a: u8[], b: u8[], hist: u32[,]) {
    let i = global_index();
    if i < len(a) { atomic_add(hist[i64(a[i]) % BINS, i64(b[i]) % BINS], 1); }
}

fn rotate_in_block(tile: f32[], v: f32) -> f32 {
    let t = threadIdx.x;
    tile[t] = v;
    syncthreads();
    let r = tile[(t + 1) % BLOCK];
    syncthreads();
    return r;
}

@kernel
fn rotate(x: f32[], out: f32[]) {
    let tile = shared(f32, BLOCK);
    let i = grid(1);
    let r = rotate_in_block(tile, i < len(x) ? x[i] : 0.0);
    if i < len(out) { out[i] = r; }
}
KERN

python3 - "$tmp" <<'PY' || { echo "device_functions.sh: python3 with numpy is needed"; exit 2; }
import sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng()
np.save(f"{d}/a.npy", rng.integers(0, 256, 100000, dtype=np.uint8))
np.save(f"{d}/b.npy", rng.integers(0, 256, 100000, dtype=np.uint8))
np.save(f"{d}/x.npy", rng.standard_normal(2048).astype(np.float32))
PY

for t in $targets; do
    if "$kjit" run "$tmp/hist.kern" histogram "$tmp/a.npy" zeros:i32:256 --grid 391 --block 256 \
        --target "$t" --save "1=$tmp/hist_$t.npy" >/dev/null 2>"$tmp/err" &&
       "$kjit" run "$tmp/hist.kern" pairs "$tmp/a.npy" "$tmp/b.npy" zeros:u32:16x16 --grid 391 \
        --block 256 --target "$t" --save "2=$tmp/pairs_$t.npy" >/dev/null 2>>"$tmp/err" &&
       "$kjit" run "$tmp/hist.kern" rotate "$tmp/x.npy" zeros:f32:2048 --grid 8 --block 256 \
        --target "$t" --save "1=$tmp/rot_$t.npy" >/dev/null 2>>"$tmp/err"; then
        if python3 - "$tmp" "$t" <<'PY'
import sys
import numpy as np
d, t = sys.argv[1], sys.argv[2]
a, b, x = np.load(f"{d}/a.npy"), np.load(f"{d}/b.npy"), np.load(f"{d}/x.npy")
assert (np.load(f"{d}/hist_{t}.npy") == np.bincount(a, minlength=256)).all(), "histogram"
want = np.zeros((16, 16), np.uint32)
np.add.at(want, (a % 16, b % 16), 1)
assert (np.load(f"{d}/pairs_{t}.npy") == want).all(), "pairs"
assert (np.load(f"{d}/rot_{t}.npy") == np.roll(x.reshape(8, 256), -1, axis=1).ravel()).all(), "rotate"
PY
        then ok; else bad "results on $t differ from NumPy's"; fi
    else
        bad "kjit run on $t failed"
    fi
done

if "$kjit" run "$tmp/hist.kern" global_index --target cpu >/dev/null 2>"$tmp/err"; then
    bad "a device function ran from the command line"
elif grep -q "global_index is a device function (global_index uses blockIdx.x at .*hist.kern:9:" "$tmp/err"; then
    ok
else
    bad "the refusal of a device function does not name the built-in"
fi

finish
