#!/bin/sh
# sizes.sh: what `kjit run`, `build` and `bench` do with sizes and files that
# come from their input (run by `make test-cli`).
#
# A .npy header or a generator whose shape times the element size passes
# 2^63 bytes, a header that claims more data than its file holds (said before
# anything is allocated), a header that gives a key twice, a number that
# overflows its float parameter (1e39 for f32, 70000 for f16) or the type a
# reduction's --init becomes, and a launch
# past CUDA's limits are errors naming the problem, never a crash or exit 0.
# An output (-o, --save, build -o, bench --json=) that is the source or an
# input is refused before anything runs; an output that cannot be written
# whole (a file size limit, as a full disk would) leaves the previous file
# as it was and no temporary behind.  Run from the repository root:
#
#   tests/cli/sizes.sh build/kjit
. "$(dirname "$0")/lib.sh"

# run WANT_RC ARGS...: kjit ARGS, output in $tmp/out and $tmp/err.
run() {
    want=$1
    shift
    "$kjit" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" != "$want" ]; then
        bad "kjit $* exited $rc, expected $want"
        return 1
    fi
    return 0
}

# refused WANT_RC PATTERN ARGS...: kjit ARGS exits WANT_RC with PATTERN on stderr.
refused() {
    want=$1
    pattern=$2
    shift 2
    if run "$want" "$@"; then
        if grep -Eq -e "$pattern" "$tmp/err"; then ok; else bad "kjit $*: stderr lacks /$pattern/"; fi
    fi
}

cat >"$tmp/add.kern" <<'EOF'
@vectorize
fn add(a: f32, b: f32) -> f32 { return a + b; }
@vectorize(f16(f16, f16), f64(f64, f64))
fn add2(a, b) { return a + b; }
@kernel
fn fill(out: i32[]) {
    let i = grid(1);
    if i < len(out) { out[i] = i32(i); }
}
EOF
add="$tmp/add.kern"

# .npy files whose header says what no file can hold
python3 - "$tmp" <<'PY'
import struct, sys
def npy(name, header, data):
    h = header.encode()
    h += b' ' * ((-(10 + len(h) + 1)) % 64) + b'\n'
    open(sys.argv[1] + '/' + name, 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h + data)
npy('big62.npy', "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }", bytes(64))
npy('big32.npy', "{'descr': '|u1', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", bytes(64))
npy('claims.npy', "{'descr': '<f8', 'fortran_order': False, 'shape': (5000000000,), }", bytes(64))
npy('dup.npy', "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (4,), }", bytes(16))
PY
refused 1 'big62.npy: the shape \(4611686018427387904,\) of f32 elements would take more than 2\^63 - 1 bytes' \
    run "$add" add "$tmp/big62.npy" 1 --target cpu
refused 1 'big32.npy: the shape \(4294967296,4294967296\) of u8 elements' \
    run "$add" add "$tmp/big32.npy" 1 --target cpu
refused 1 'claims.npy: truncated: the header claims 40000000000 bytes of data, the file holds 64' \
    run "$add" add "$tmp/claims.npy" 1 --target cpu
refused 1 "dup.npy: the header gives 'shape' twice" run "$add" add "$tmp/dup.npy" 1 --target cpu

# generators
refused 2 'the shape \(3037000500,3037000500\) of f32 elements would take more than 2\^63 - 1 bytes' \
    run "$add" add rand:f32:3037000500x3037000500 1 --target cpu
refused 2 'the shape \(4294967296,4294967296\) of f32 elements' \
    run "$add" add zeros:4294967296x4294967296 1 --target cpu
if run 0 run "$add" add zeros:0x4294967296 1 --target cpu; then
    if grep -q 'shape (0,4294967296)' "$tmp/out"; then ok; else bad "0x4294967296 is 0 by 4294967296"; fi
fi

# numbers that overflow their float parameter; infinities given as such pass
refused 2 '1e39 does not fit f32 \(its largest finite value is 3\.4028235e\+38\)' \
    run "$add" add 1e39 0 --target cpu
refused 2 '-1e39 does not fit f32' run "$add" add -1e39 0 --target cpu
refused 2 '70000 does not fit f16 \(its largest finite value is 65504\)' \
    run "$add" add2 70000 zeros:f16:4 --target cpu
refused 2 '1e400 does not fit f64' run "$add" add2 1e400 zeros:f64:4 --target cpu
if run 0 run "$add" add inf 1e38 --target cpu; then
    if grep -q 'result: f32 inf' "$tmp/out"; then ok; else bad "inf is an f32"; fi
fi
run 0 run "$add" add 1e-50 0 --target cpu && ok # underflow rounds, as NumPy's float32 does

# --init as the reduction's type, exactly
reduce=examples/reduce.kern
refused 2 '--init 1e39 does not fit f32 .*, the reduction.s type' \
    run "$reduce" vmax zeros:f32:0 --init 1e39 --target cpu
refused 2 '--init 3000000000 does not fit i32 \(-2147483648 to 2147483647\)' \
    run "$reduce" vmax zeros:i32:0 --init 3000000000 --target cpu
refused 2 '--init 1e39 does not fit f32' run "$reduce" dot zeros:f32:0 zeros:f32:0 --init 1e39 --target cpu
refused 2 '--init 1e39 does not fit f32' bench "$reduce" vmax zeros:f32:8 --init 1e39 --targets cpu --repeat 1
if run 0 run "$reduce" vmax zeros:i64:3 --init 9223372036854775807 --target cpu; then
    if grep -q 'result: i64 9223372036854775807$' "$tmp/out"; then ok; else bad "--init of the largest i64"; fi
fi

# the options' numbers: in range, or a usage error (2^31 was a negative index)
refused 2 '--save takes N=FILE' run "$add" add arange:f32:4 1 --target cpu --save 2147483648="$tmp/x.npy"
refused 2 '--repeat takes a count from 1 to 1000000' run "$add" add arange:f32:4 1 --repeat 99999999999
refused 2 '--seed takes a whole number' run "$add" add rand:f32:4 1 --seed -1

# CUDA's launch limits on every target
for target in $targets; do
    refused 1 'a grid of 2147483648 blocks in x; at most 2147483647' \
        run "$add" fill zeros:i32:8 --grid 2147483648 --block 1 --target "$target"
    refused 1 'a grid of 65536 blocks in y; at most 65535' \
        run "$add" fill zeros:i32:8 --grid 1,65536 --block 1 --target "$target"
    refused 1 'a block of 65 threads in z; at most 64' \
        run "$add" fill zeros:i32:8 --grid 1 --block 1,1,65 --target "$target"
done

# outputs that are inputs: refused before anything runs, the input intact
python3 -c 'import numpy as np, sys; np.save(sys.argv[1], np.arange(6, dtype=np.float32))' "$tmp/in.npy"
cp "$add" "$tmp/add.copy"
cp "$tmp/in.npy" "$tmp/in.copy"
ln -s in.npy "$tmp/link.npy"
refused 2 "-o $tmp/add.kern is the file $tmp/add.kern, an input of this run; refusing" \
    run "$add" add "$tmp/in.npy" 1 --target cpu -o "$add"
refused 2 'an input of this run' run "$add" add "$tmp/in.npy" 1 --target cpu -o "$tmp/./in.npy"
refused 2 'is the file .*in\.npy, an input' run "$add" add "$tmp/in.npy" 1 --target cpu -o "$tmp/link.npy"
refused 2 '--save .* an input of this run' \
    run "$add" fill "$tmp/in.npy" --grid 1 --block 8 --target cpu --save 0="$tmp/in.npy"
refused 2 'is the source file .*; refusing' build "$add" --emit=llvm -o "$add"
refused 2 'is an input of this bench; refusing' \
    bench "$add" add "$tmp/in.npy" 1 --targets cpu --repeat 1 --json="$tmp/in.npy"
if cmp -s "$add" "$tmp/add.copy" && cmp -s "$tmp/in.npy" "$tmp/in.copy"; then ok; else
    bad "a refused output changed an input"; fi

# a write that fails (a file size limit of 1 KiB, as a full disk would) keeps
# the previous file whole and leaves no temporary file
mkdir "$tmp/outs"
if run 0 run "$add" add arange:f32:100 1 --target cpu -o "$tmp/outs/prev.npy"; then
    cp "$tmp/outs/prev.npy" "$tmp/prev.copy"
    (ulimit -f 1; trap '' XFSZ; "$kjit" run "$add" add arange:f32:4000 1 --target cpu \
        -o "$tmp/outs/prev.npy" >"$tmp/out" 2>"$tmp/err")
    rc=$?
    if [ "$rc" = 2 ] && grep -q 'prev.npy: write failed' "$tmp/err"; then ok; else
        bad "a failed write exited $rc"; fi
    if cmp -s "$tmp/outs/prev.npy" "$tmp/prev.copy"; then ok; else bad "a failed write changed the previous file"; fi
    if [ "$(ls -A "$tmp/outs")" = prev.npy ]; then ok; else bad "a failed write left $(ls -A "$tmp/outs")"; fi
    # and a write that succeeds replaces it, keeping its permissions
    chmod 600 "$tmp/outs/prev.npy"
    if run 0 run "$add" add arange:f32:4000 1 --target cpu -o "$tmp/outs/prev.npy"; then
        python3 -c 'import numpy as np, sys; a = np.load(sys.argv[1]); sys.exit(0 if a.shape == (4000,) and a[3999] == 4000 else 1)' \
            "$tmp/outs/prev.npy" && ok || bad "the new file is not the run's result"
        [ "$(stat -c %a "$tmp/outs/prev.npy")" = 600 ] && ok || bad "the replaced file lost its mode"
        [ "$(ls -A "$tmp/outs")" = prev.npy ] && ok || bad "a write left $(ls -A "$tmp/outs")"
    fi
fi
# a link is written through: the file it names is replaced, the link stays
ln -s prev.npy "$tmp/outs/link.npy"
if run 0 run "$add" add arange:f32:7 1 --target cpu -o "$tmp/outs/link.npy"; then
    if [ -L "$tmp/outs/link.npy" ] && python3 -c 'import numpy as np, sys; sys.exit(0 if np.load(sys.argv[1]).shape == (7,) else 1)' "$tmp/outs/prev.npy"; then
        ok; else bad "a write through a link"; fi
fi
# /dev/null is written in place, not replaced
run 0 run "$add" add arange:f32:10 1 --target cpu -o /dev/null && ok

finish
