#!/bin/sh
# several_outputs.sh: `kjit run` of a @vectorize of several outputs
# (tests/golden/vectorize/several_outputs.kern) on every target: -o names a
# file per output, each checked against NumPy (contiguous, broadcast and
# strided operands, scalars alone, --repeat into the first run's outputs,
# --check); -o with the wrong count of files is refused before anything runs.
#
#   tests/cli/several_outputs.sh build/kjit
. "$(dirname "$0")/lib.sh"
src=tests/golden/vectorize/several_outputs.kern
python3 - "$tmp" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
np.save(f"{d}/a.npy", np.arange(-30, 30, dtype=np.int64).reshape(6, 10))
np.save(f"{d}/b.npy", np.array([3, -4, 5, -7, 1, 2, -3, 9, -1, 6], np.int64))
np.save(f"{d}/at.npy", np.arange(-30, 30, dtype=np.int64).reshape(10, 6).T)
np.save(f"{d}/cr.npy", np.linspace(-2.0, 0.5, 48))
np.save(f"{d}/ci.npy", np.linspace(-1.2, 1.2, 30)[:, None])
np.save(f"{d}/x.npy", np.linspace(-3, 3, 101, dtype=np.float32))
PY

# compare CHECK: the Python expression CHECK over the saved files is True
compare() {
    if python3 - "$tmp" "$1" <<'PY'; then ok; else bad "outputs differ: $1"; fi
import sys
import numpy as np
d, check = sys.argv[1], sys.argv[2]
L = lambda name: np.load(f"{d}/{name}.npy")


def escape_ok(cr, ci, z, n, target, limit=60):
    cr, ci = np.broadcast_arrays(cr, ci)
    want_z, want_n = np.empty(cr.shape), np.full(cr.shape, limit, np.int32)
    for i in np.ndindex(cr.shape):
        zr = zi = 0.0
        for k in range(limit):
            zr, zi = zr * zr - zi * zi + cr[i], 2.0 * zr * zi + ci[i]
            if zr * zr + zi * zi > 4.0:
                want_n[i] = k
                break
        want_z[i] = np.sqrt(zr * zr + zi * zi)
    if target == "cuda":  # contracted multiply-adds: a point on the edge may escape a step apart
        same = n == want_n
        return n.dtype == np.int32 and same.mean() > 0.98 and np.allclose(z[same], want_z[same])
    return n.dtype == np.int32 and (n == want_n).all() and np.allclose(z, want_z, rtol=1e-12)


sys.exit(0 if eval(check) else 1)
PY
}

for t in $targets; do
    for extra in "" "--check" "--repeat 3"; do
        # shellcheck disable=SC2086
        if "$kjit" run $src floor_divmod "$tmp/a.npy" "$tmp/b.npy" --target $t $extra \
                -o "$tmp/q.npy,$tmp/r.npy" >"$tmp/out" 2>"$tmp/err"; then
            compare "(L('q') == L('a') // L('b')).all() and (L('r') == L('a') % L('b')).all()"
        else
            bad "floor_divmod on $t $extra"
        fi
    done
    if "$kjit" run $src floor_divmod "$tmp/at.npy" -7 --target $t -o "$tmp/q.npy,$tmp/r.npy" \
            >"$tmp/out" 2>"$tmp/err"; then
        compare "(L('q') == L('at') // -7).all() and (L('r') == L('at') % -7).all()"
    else
        bad "floor_divmod of a strided array on $t"
    fi
    if "$kjit" run $src floor_divmod -17 5 --target $t -o "$tmp/q.npy,$tmp/r.npy" \
            >"$tmp/out" 2>"$tmp/err"; then
        compare "L('q').shape == () and L('q') == -4 and L('r') == 3"
    else
        bad "floor_divmod of scalars on $t"
    fi
    if "$kjit" run $src escape "$tmp/cr.npy" "$tmp/ci.npy" 60 --target $t \
            -o "$tmp/z.npy,$tmp/n.npy" >"$tmp/out" 2>"$tmp/err"; then
        compare "escape_ok(L('cr'), L('ci'), L('z'), L('n'), '$t')"
    else
        bad "escape on $t"
    fi
    if "$kjit" run $src wave "$tmp/x.npy" --target $t -o "$tmp/s.npy,$tmp/c.npy,$tmp/p.npy" \
            >"$tmp/out" 2>"$tmp/err"; then
        compare "np.allclose(L('s'), np.sin(L('x')), atol=1e-6) and \
np.allclose(L('c'), np.cos(L('x')), atol=1e-6) and (L('p') == (L('x') >= 0)).all() and \
L('s').dtype == np.float32 and L('p').dtype == np.bool_"
    else
        bad "wave on $t"
    fi
done

# refused REGEX ARGS...: kjit run exits 2 with REGEX on stderr, writing nothing
refused() {
    pattern=$1
    shift
    rm -f "$tmp/q.npy"
    "$kjit" run "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc = 2 ] && grep -Eq -e "$pattern" "$tmp/err" && [ ! -e "$tmp/q.npy" ]; then
        ok
    else
        bad "kjit run $* exited $rc, expected 2 and /$pattern/"
    fi
}
refused "has 2 outputs: name a file for each, -o a.npy,b.npy" \
    $src floor_divmod 7 2 -o "$tmp/q.npy"
refused "-o names 3 files, but floor_divmod has 2 outputs" \
    $src floor_divmod 7 2 -o "$tmp/q.npy,$tmp/r.npy,$tmp/s.npy"
refused "-o names 2 files, but add has 1 output" \
    examples/add.kern add 1 2 -o "$tmp/q.npy,$tmp/r.npy"
finish
