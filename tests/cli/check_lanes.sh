#!/bin/sh
# check_lanes.sh: checked mode on SIMD lanes (run by `make test-cli`).  A
# chunk of lanes runs its threads statement by statement, so the first lane
# to fail in time need not be the first thread in the threads' order; the
# lowest failed lane claims the record at the chunk's end
# (compiler/backend/codegen_simd_check.c).  Each kernel below fails in
# several threads; `kjit run --check` must report the same first failure
# (kind, place, block, thread) on lanes (KJIT_CPU_SIMD=1: kernels on lanes,
# split forms' regions on lanes, specialised for the block or not) as in the
# scalar code (KJIT_CPU_SIMD=0: a kernel's threads one by one, barriers on
# fibers), on cpu and parallel, and it must be the thread named here.
#
#   tests/cli/check_lanes.sh build/kjit
. "$(dirname "$0")/lib.sh"

# name, the thread that must win, the kernel's arguments; the source on stdin
case_of() {
    name=$1 thread=$2
    shift 2
    cat >"$tmp/$name.kern"
    KJIT_CPU_SIMD=0 KJIT_CACHE=off "$kjit" run --check "$tmp/$name.kern" "$@" --target cpu >/dev/null 2>"$tmp/scalar"
    status=$?
    case $thread in *,*) ;; *) thread="$thread,0,0" ;; esac
    if [ $status = 1 ] && grep -q "thread ($thread)" "$tmp/scalar"; then ok
    else cp "$tmp/scalar" "$tmp/err"; bad "$name: the scalar code reports thread $thread"; fi
    for target in cpu parallel; do
        for specialise in 1 0; do
            KJIT_CPU_SIMD=1 KJIT_CPU_SPECIALISE=$specialise KJIT_CACHE=off \
                "$kjit" run --check "$tmp/$name.kern" "$@" --target $target >/dev/null 2>"$tmp/err"
            if [ $? = 1 ] && cmp -s "$tmp/scalar" "$tmp/err"; then ok
            else bad "$name on lanes ($target, KJIT_CPU_SPECIALISE=$specialise): the scalar code's report"; fi
        done
    done
}

# Two lanes of one chunk: thread 5 fails first in time (the division, the
# first statement), thread 3 first in order (the load, the next one).
case_of one_chunk 3 k arange:i64:64 zeros:i64:64 --grid 1 --block 64 <<'EOF'
@kernel
fn k(a: i64[], out: i64[]) {
    let t = threadIdx.x;
    let v = a[t];
    let q = 100 / (v - 5);
    out[t] = q + a[t + 1000 * i64(v == 3)];
}
EOF

# Two chunks (for any lane count up to 32): thread 40 fails first in time,
# thread 2 first in order; and in the later chunk alone, threads 37 and 39.
case_of two_chunks 2 k arange:i64:64 zeros:i64:64 --grid 2 --block 64 <<'EOF'
@kernel
fn k(a: i64[], out: i64[]) {
    let t = i64(threadIdx.x);
    let early = a[t + 1000 * i64(t == 40 || t == 39)];
    out[t] = early + a[t + 1000 * i64(t == 2 || t == 37)];
}
EOF
case_of later_chunk 37 k arange:i64:64 zeros:i64:64 --grid 1 --block 64 <<'EOF'
@kernel
fn k(a: i64[], out: i64[]) {
    let t = i64(threadIdx.x);
    let early = a[t + 1000 * i64(t == 39)];
    out[t] = early + a[t + 1000 * i64(t == 37)];
}
EOF

# A uniform failure (every thread's a[n]) after thread 0 failed alone: the
# chunk's lowest lane is thread 0, with its own report.
case_of uniform_after 0 k arange:i64:64 1000000 zeros:i64:64 --grid 1 --block 64 <<'EOF'
@kernel
fn k(a: i64[], n: i64, out: i64[]) {
    let t = i64(threadIdx.x);
    out[t] = a[t + 1000 * i64(t == 0)];
    out[t] = a[n];
}
EOF

# Inside a part of an expression under its own mask (a side of ?:), a
# conversion and a shift: thread 6 shifts too far first, thread 4's
# conversion comes later in the statement.
case_of kinds 4 k arange:f64:64 zeros:i32:64 --grid 1 --block 64 <<'EOF'
@kernel
fn k(x: f64[], out: i32[]) {
    let t = threadIdx.x;
    let big = t == 4 ? 1e20 : x[t];
    let s = t % 2 == 0 ? i32(1) << (t * i32(t == 6) * 10) : i32(0);
    out[t] = s + i32(t > 2 ? big : 0.0);
}
EOF

# A split form: thread 7 fails in the first region, thread 1 in the second
# (as the fibers run, every thread reaches the barrier first); thread 7 sits
# the second region out.
case_of regions 7 k arange:i64:128 zeros:i64:128 --grid 2 --block 64 <<'EOF'
@kernel
fn k(a: i64[], out: i64[]) {
    let tile = shared(i64, 64);
    let t = threadIdx.x;
    let i = i64(blockIdx.x) * 64 + i64(t);
    tile[t] = a[i + 1000 * i64(t == 7)];
    syncthreads();
    out[i] = tile[63 - t] / (a[i] - 1);
}
EOF

# The same across regions and chunks: thread 70 fails in the first region,
# thread 3 in the second; 70 wins, as every thread ran the first region.
case_of regions_chunks 70 k arange:i64:128 zeros:i64:128 --grid 1 --block 128 <<'EOF'
@kernel
fn k(a: i64[], out: i64[]) {
    let tile = shared(f64, 128);
    let t = threadIdx.x;
    tile[t] = f64(a[i64(t) + 1000 * i64(t == 70)]);
    syncthreads();
    out[t] = i64(tile[127 - t]) + a[i64(t) + 1000 * i64(t == 3)];
}
EOF

# A region that split_specialise.c runs without its tests for the blocks
# inside the array (`i < len(a)` true for the last thread) drops the check
# of a[i] there only with i >= 0 for the first thread in the same test:
# block 0's i starts at -100, below the array, where the upper bound alone
# holds; thread 0 of block 0 must still fail.
case_of guard_below 0 k arange:f32:256 zeros:f32:4 --grid 4 --block 64 <<'EOF'
@kernel
fn k(a: f32[], out: f32[]) {
    let tile = shared(f32, 64);
    let t = threadIdx.x;
    let i = (blockIdx.x * 64 - 100) + t;
    tile[t] = i < len(a) ? a[i] : 0;
    syncthreads();
    if t == 0 { out[blockIdx.x] = tile[0] + tile[63]; }
}
EOF

# The same in a later region, after a first one whose accesses the test
# proves inside: threads 0 to 4 of block 0 store below the array there,
# thread 0 first.
case_of guard_later 0 k arange:f32:64 zeros:f32:64 --grid 4 --block 16 <<'EOF'
@kernel
fn k(a: f32[], out: f32[]) {
    let tile = shared(f32, 16);
    let t = threadIdx.x;
    let i = blockIdx.x * 16 + t;
    tile[t] = i < len(a) ? a[i] : 0;
    syncthreads();
    let j = (blockIdx.x * 16 - 5) + t;
    if j < len(out) { out[j] = tile[t]; }
}
EOF

# Statements whose checks are all indices computed from variables: the
# lanes test them all ahead and run the statement unchecked when every lane
# passes (kj_simd_precheck); here some lane fails, so the checked copy runs.
# Thread 0 fails the second access (a[-2]) while threads 22 and up fail the
# first, earlier in time on lanes.
case_of ahead_order 0 k arange:i64:64 zeros:i64:64 --grid 1 --block 64 <<'EOF'
@kernel
fn k(a: i64[], out: i64[]) {
    let t = i64(threadIdx.x);
    out[t] = a[t * 3] + a[t - 2];
}
EOF

# The store's own index: thread 63 stores past the end, its loads inside.
case_of ahead_store 63 k arange:i64:64 zeros:i64:64 --grid 1 --block 64 <<'EOF'
@kernel
fn k(a: i64[], out: i64[]) {
    let t = i64(threadIdx.x);
    out[t + 1] = a[t] + a[63 - t];
}
EOF

# Two axes, a uniform one and one on lanes: thread (7,0,0) reads a[0, 8]
# (axis 1), the threads of row 7 a[8, x] (axis 0).
case_of ahead_2d 7 k arange:i64:8x8 zeros:i64:8x8 --grid 1,1 --block 8,8 <<'EOF'
@kernel
fn k(a: i64[,], out: i64[,]) {
    let x, y = grid(2);
    out[y, x] = a[y, x + 1] + a[y + 1, x];
}
EOF
# A kernel without barriers and with rows of threads runs, in checked mode
# too, a row of each block of a grid row before the next row
# (kj_codegen_rows_first): block 2's thread (2,0,0) fails first in time,
# block 1's thread (3,1,0) first in the blocks' order, and wins.
case_of rows_first 3,1,0 k arange:i64:2x32 zeros:i64:2x32 --grid 4,1 --block 8,2 <<'EOF'
@kernel
fn k(a: i64[,], out: i64[,]) {
    let x, y = grid(2);
    let bad = (blockIdx.x == 1 && threadIdx.y == 1 && threadIdx.x == 3) ||
              (blockIdx.x == 2 && threadIdx.y == 0 && threadIdx.x == 2);
    out[y, x] = a[y, x + 1000 * i64(bad)];
}
EOF

# Accesses whose guards split_specialise.c proves inside the array for a
# block lose their checks there; here the guard bounds x by the extent of
# another axis (u is 40 x 24), so x + 1 leaves u at x = 23, first in block
# (2,0,0)'s thread (7,1,0).
case_of guard_other_axis 7,1,0 k arange:f64:40x24 zeros:f64:40x40 --grid 5,5 --block 8,8 <<'EOF'
@kernel
fn k(u: f64[,], v: f64[,]) {
    let x, y = grid(2);
    let n = u.shape[0];
    if x >= 1 && y >= 1 && x < n - 1 && y < n - 1 {
        v[y, x] = u[y, x - 1] + u[y, x + 1] + u[y - 1, x] + u[y + 1, x];
    }
}
EOF

# The same from an early return: i < len(out) after it, and a[i + 2] leaves
# a (one longer than out) at i = 63, block 3's thread 15.
case_of guard_return 15 k arange:f32:65 zeros:f32:64 --grid 4 --block 16 <<'EOF'
@kernel
fn k(a: f32[], out: f32[]) {
    let i = grid(1);
    if i >= len(out) { return; }
    out[i] = a[i + 2];
}
EOF

finish
