#!/bin/sh
# run.sh: tests of `kjit run` (run by `make test-cli`).
#
# Scalar arguments parse exactly for every type: random integers over each
# integer type's whole range (its bounds included) and random f32 and f64
# values written with the fewest digits that round-trip come back from a
# kernel bit for bit (read back with NumPy); a number that does not fit its
# parameter (2^64 or -1 for u64, 300 for u8 or for the signature a call takes,
# 2.5 for an integer) is an error naming the type and its range, exit 2; the
# summary prints integers exactly (2^53 + 1, the i64 bounds).  On cpu and
# parallel, and on cuda where a GPU is usable.  Run from the repository root:
#
#   tests/cli/run.sh build/kjit
. "$(dirname "$0")/lib.sh"

# run WANT_RC ARGS...: runs kjit run, output in $tmp/out and $tmp/err.
run() {
    want=$1
    shift
    "$kjit" run "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" != "$want" ]; then
        bad "kjit run $* exited $rc, expected $want"
        return 1
    fi
    return 0
}

# expect FILE PATTERN DESCRIPTION: FILE must match the extended regex.
expect() {
    if grep -Eq "$2" "$1"; then ok; else bad "$3: no line matches /$2/"; fi
}


cat >"$tmp/scalars.kern" <<'EOF'
// Each kernel stores its five scalar arguments, so that they can be read back.
@kernel
fn store_i8(a: i8, b: i8, c: i8, d: i8, e: i8, out: i8[]) { out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e; }
@kernel
fn store_i16(a: i16, b: i16, c: i16, d: i16, e: i16, out: i16[]) { out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e; }
@kernel
fn store_i32(a: i32, b: i32, c: i32, d: i32, e: i32, out: i32[]) { out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e; }
@kernel
fn store_i64(a: i64, b: i64, c: i64, d: i64, e: i64, out: i64[]) { out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e; }
@kernel
fn store_u8(a: u8, b: u8, c: u8, d: u8, e: u8, out: u8[]) { out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e; }
@kernel
fn store_u16(a: u16, b: u16, c: u16, d: u16, e: u16, out: u16[]) { out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e; }
@kernel
fn store_u32(a: u32, b: u32, c: u32, d: u32, e: u32, out: u32[]) { out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e; }
@kernel
fn store_u64(a: u64, b: u64, c: u64, d: u64, e: u64, out: u64[]) { out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e; }
@kernel
fn store_f32(a: f32, b: f32, c: f32, d: f32, e: f32, out: f32[]) { out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e; }
@kernel
fn store_f64(a: f64, b: f64, c: f64, d: f64, e: f64, out: f64[]) { out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e; }

@vectorize
fn ident_u64(x: u64) -> u64 { return x; }
@vectorize
fn ident_i64(x: i64) -> i64 { return x; }
@vectorize(i8(i8), u64(u64), f32(f32))
fn ident_multi(x) { return x; }
fn plain_u8(x: u8) -> u8 { return x; }
@vectorize
fn flag(b: bool) -> bool { return b; }
@vectorize
fn re_im(z: c128) -> f64 { return z.real + 10.0 * z.imag; }
EOF

# Random values per type (the bounds first), one line "TYPE V1 V2 V3 V4 V5"
# each, and the i64 array of the summary test.
python3 - "$tmp" <<'PY' || { echo "run.sh: python3 with numpy is needed"; exit 2; }
import sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng()
with open(f"{d}/values", "w") as f:
    for t in ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]:
        info = np.iinfo(np.dtype({"i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64"}[t]))
        lo, hi = int(info.min), int(info.max)
        vals = [lo, hi] + [int(rng.integers(lo, hi, endpoint=True, dtype=info.dtype)) for _ in range(3)]
        f.write(t + " " + " ".join(str(v) for v in vals) + "\n")
    # floats: the shortest text that round-trips (repr), over a wide range
    f32 = [np.float32(1) / np.float32(3), np.float32(3.4028235e38), np.float32(1e-45)] + \
          [np.float32(rng.standard_normal() * 10.0 ** rng.integers(-30, 30)) for _ in range(2)]
    f.write("f32 " + " ".join(np.format_float_scientific(v, unique=True) for v in f32) + "\n")
    f64 = [0.1, 1.7976931348623157e308, 5e-324] + \
          [float(rng.standard_normal() * 10.0 ** rng.integers(-300, 300)) for _ in range(2)]
    f.write("f64 " + " ".join(repr(v) for v in f64) + "\n")
np.save(f"{d}/big_i64.npy", np.array([9007199254740993, -9223372036854775808, 9223372036854775807], dtype=np.int64))
PY

for target in $targets; do
    # ------------------------------------------- exact scalars, every type
    while read -r type v1 v2 v3 v4 v5; do
        run 0 "$tmp/scalars.kern" "store_$type" "$v1" "$v2" "$v3" "$v4" "$v5" "zeros:$type:5" \
            --grid 1 --block 1 --target "$target" --save 5="$tmp/got_${type}_$target.npy" &&
            echo "$tmp/got_${type}_$target.npy $type $v1 $v2 $v3 $v4 $v5" >>"$tmp/saved"
    done <"$tmp/values"

    # ---------------------------------------- u64 past 2^63 (issue 16)
    if run 0 "$tmp/scalars.kern" ident_u64 18446744073709551615 --target "$target" -o "$tmp/u_$target.npy"; then
        expect "$tmp/out" '^result: u64 18446744073709551615$' "2^64-1 printed exactly on $target"
        echo "$tmp/u_$target.npy u64 18446744073709551615" >>"$tmp/saved"
    fi
    run 0 "$tmp/scalars.kern" ident_u64 9223372036854775808 --target "$target" &&
        expect "$tmp/out" '^result: u64 9223372036854775808$' "2^63 on $target"
    run 0 "$tmp/scalars.kern" ident_u64 0xfffffffffffffffe --target "$target" &&
        expect "$tmp/out" '^result: u64 18446744073709551614$' "a hex u64 on $target"
    run 0 "$tmp/scalars.kern" ident_u64 1e19 --target "$target" &&
        expect "$tmp/out" '^result: u64 10000000000000000000$' "1e19, a whole float, as u64 on $target"
    run 0 "$tmp/scalars.kern" ident_i64 9007199254740993 --target "$target" &&
        expect "$tmp/out" '^result: i64 9007199254740993$' "2^53+1 printed exactly on $target"
    # the summary of an integer array: first values, min and max exactly
    if run 0 "$tmp/scalars.kern" ident_i64 "$tmp/big_i64.npy" --target "$target"; then
        expect "$tmp/out" 'first: 9007199254740993, -9223372036854775808, 9223372036854775807$' "integer elements printed exactly on $target"
        expect "$tmp/out" 'min -9223372036854775808  max 9223372036854775807  mean' "exact min and max on $target"
    fi
    # several signatures: the value is read as the matching signature's type
    run 0 "$tmp/scalars.kern" ident_multi 18446744073709551615 --target "$target" &&
        expect "$tmp/out" '^result: u64 18446744073709551615$' "u64 picked by its value on $target"
    run 0 "$tmp/scalars.kern" ident_multi -5 --target "$target" &&
        expect "$tmp/out" '^result: i8 -5$' "i8 signature on $target"
    run 0 "$tmp/scalars.kern" re_im 2.5 --target "$target" &&
        expect "$tmp/out" '^result: f64 2.5$' "a number as a complex parameter's real part on $target"
    run 0 "$tmp/scalars.kern" flag 1 --target "$target" &&
        expect "$tmp/out" '^result: bool true$' "1 as a bool on $target"
done

# Every saved array against the values given, bit for bit, in one python3 (its
# start-up is slow): integers exactly, floats with their bits.
python3 - "$tmp/saved" >"$tmp/verdicts" <<'PY'
import sys
import numpy as np
names = {"i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
         "u16": "uint16", "u32": "uint32", "u64": "uint64", "f32": "float32", "f64": "float64"}
for line in open(sys.argv[1]):
    path, kern_type, *texts = line.split()
    t = names[kern_type]
    got = np.load(path)
    if t[0] in "iu":
        want = np.array([int(v) for v in texts], dtype=t)
    elif t == "float32":
        want = np.array([np.float32(v) for v in texts], dtype=t)  # one rounding, as strtof
    else:
        want = np.array([float(v) for v in texts], dtype=t)
    good = got.dtype == np.dtype(t) and got.tobytes() == want.reshape(got.shape).tobytes()
    print("ok" if good else f"bad {path}: got {got!r}, want {want!r}")
PY
while read -r verdict rest; do
    if [ "$verdict" = ok ]; then ok; else bad "scalars read back: $rest"; fi
done <"$tmp/verdicts"
[ "$(wc -l <"$tmp/verdicts")" = "$(wc -l <"$tmp/saved")" ] || bad "the saved arrays could not all be read"

# ------------------------------------------------ values that do not fit
# check_error ARGS... PATTERN: exit 2 and stderr matching the pattern.
check_error() {
    pattern=$1
    shift
    if run 2 "$tmp/scalars.kern" "$@" --target cpu; then
        expect "$tmp/err" "$pattern" "kjit run $*"
    fi
}
check_error 'argument 0: -1 does not fit u64 \(0 to 18446744073709551615\)' ident_u64 -1
check_error 'argument 0: 18446744073709551616 does not fit u64' ident_u64 18446744073709551616
check_error 'argument 0: 1e20 does not fit u64' ident_u64 1e20
check_error 'argument 0: 9223372036854775808 does not fit i64 \(-9223372036854775808 to 9223372036854775807\)' ident_i64 9223372036854775808
check_error 'argument 0: -9223372036854775809 does not fit i64' ident_i64 -9223372036854775809
check_error 'argument 0: 2.5 is not a whole number, and the parameter is u64' ident_u64 2.5
check_error 'argument 0: 256 does not fit u8 \(0 to 255\)' plain_u8 256
check_error 'argument 4: 128 does not fit i8 \(-128 to 127\)' store_i8 1 2 3 4 128 zeros:i8:5 --grid 1 --block 1
check_error 'argument 0: 300 does not fit i8 \(-128 to 127\), in the signature i8\(i8\) that the call takes' ident_multi 300
check_error 'argument 0: 99999999999999999999 is outside the 64-bit integers' ident_multi 99999999999999999999
check_error 'argument 0: a bool argument is true, false, 0 or 1' flag 2

# A device function's local() array (128 KiB) called from a kernel with a
# barrier: on cpu and parallel every thread's fiber stack must hold it too.
cat >"$tmp/devlocal.kern" <<'EOF'
fn window_sum(x: f64[], t: i64) -> f64 {
    let l = local(f64, 16384);
    for k in range(16384) { l[k] = x[(k + t) % len(x)]; }
    let s = 0.0;
    for k in range(16384) { s += l[k]; }
    return s;
}
@kernel
fn windows(x: f64[], out: f64[]) {
    let t = grid(1);
    let s = window_sum(x, t);
    syncthreads();
    out[t] = s;
}
EOF
python3 -c 'import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(5).standard_normal(1000))' "$tmp/devx.npy"
for target in $targets; do
    if run 0 "$tmp/devlocal.kern" windows "$tmp/devx.npy" zeros:f64:64 --grid 2 --block 32 \
           --target "$target" --save 1="$tmp/devout.$target.npy"; then
        python3 - "$tmp/devx.npy" "$tmp/devout.$target.npy" <<'PY' && ok || bad "device function local() on $target"
import sys, numpy as np
x, out = np.load(sys.argv[1]), np.load(sys.argv[2])
want = np.array([x[(np.arange(16384) + t) % len(x)].sum() for t in range(64)])
sys.exit(0 if np.allclose(out, want, rtol=1e-12, atol=1e-9) else 1)
PY
    fi
done

# print() of 16-bit floats: C's varargs take them as doubles, as every float.
cat >"$tmp/halfprint.kern" <<'EOF'
fn show(x: f16, y: bf16) -> f32 {
    print("x = %.3f", x, "y =", y);
    return f32(x) + f32(y);
}
EOF
for target in $targets; do
    if run 0 "$tmp/halfprint.kern" show 1.5 2.25 --target "$target"; then
        expect "$tmp/out" '^x = 1\.500 y = 2\.25$' "print of f16 and bf16 on $target"
    fi
done

finish
