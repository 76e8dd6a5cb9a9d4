#!/usr/bin/env bash
# Libraries built ahead of time and libkjit-rt (docs/aot.md), in make check:
#   1. libkjit-rt has no LLVM and no compiler object (rt_link.sh);
#   2. every example built with `kjit build --emit=lib` runs, on cpu and
#      parallel, from tests/aot/aot_driver.c compiled against kjit.h alone
#      and linked with libkjit-rt alone (no LLVM on its include or library
#      path), bit for bit as the JIT runs the .kern (the same driver linked
#      with libkjit); the comparison itself is shown to see a changed bit;
#      every golden program that runs (tests/golden/*/*.out) prints, as a
#      library under `kjit run LIB`, what it prints under the JIT;
#   3. --emit=header: typed entry points agree with kjit_call and kjit_launch
#      (header_test.c);
#   4. the x86-64 level: the best the CPU runs is taken, KJIT_CPU_FEATURES
#      forces a lower one (same bits as the JIT so restricted), and a
#      library of no level the CPU runs is refused, clearly; the sse2 level
#      builds without LLVM warnings;
#   4b. checked mode: golden programs of failed checks and races, built
#      with --check, report under `kjit run --check LIB` what the JIT does;
#   5. refusals before anything runs: another ABI version (both named), a
#      truncated or altered file, a file or folder others can write;
#      libkjit-rt refuses to compile a .kern;
#   6. cuda code (no GPU here: tests/gpu/aot.sh runs it): the default build
#      holds PTX for sm_70 and, for each of sm_70, sm_80, sm_90, cubins or
#      a note saying why not (CUDA 13's ptxas has no sm_70); every root's
#      PTX, taken from the file, assembles with ptxas and its cubins are
#      ELF; --arch and --cuda=off, an arch ptxas cannot target, no ptxas
#      (KJIT_PTXAS=off: PTX only, said); the choice and the refusals on a
#      cuda context are unit tests (tests/unit/test_aot_cuda.c).
# Usage: tests/aot/aot.sh [build folder]
set -u
BUILD=${1:-build}
KJIT=$BUILD/kjit
OUT=$BUILD/aot
export KJIT_CACHE_DIR=${KJIT_CACHE_DIR:-$PWD/$BUILD/test-cache}
export KJIT_VERIFY=${KJIT_VERIFY:-1}
unset KJIT_CPU_FEATURES KJIT_CHECK
fail=0
bad() { echo "aot: $*"; fail=1; }

bash tests/aot/rt_link.sh "$BUILD" || fail=1

rm -rf "$OUT" && mkdir -p "$OUT/include" "$OUT/lib" "$OUT/libs" && chmod 700 "$OUT" "$OUT/libs"
# The driver sees kjit.h and libkjit-rt.so alone.
cp runtime/kjit.h "$OUT/include/"
cp "$BUILD/libkjit-rt.so" "$OUT/lib/"
CC=${CC:-cc}
$CC -std=c11 -D_GNU_SOURCE -O1 -Wall -I"$OUT/include" tests/aot/aot_driver.c -o "$OUT/driver-rt" \
    -L"$OUT/lib" -lkjit-rt -lm -Wl,-rpath,"$PWD/$OUT/lib" || { echo "aot: the driver does not build"; exit 1; }
$CC -std=c11 -D_GNU_SOURCE -O1 -Wall -I"$OUT/include" tests/aot/aot_driver.c -o "$OUT/driver-jit" \
    -L"$BUILD" -lkjit -lm -Wl,-rpath,"$PWD/$BUILD" || exit 1
if ldd "$OUT/driver-rt" | grep -Eq 'LLVM|libkjit\.so'; then bad "driver-rt links more than libkjit-rt"; fi

# The examples' kernels, launched with arguments their indexing stays inside.
launch_das="--launch echoes 1,1,1 128,1,1 arr:i64:256000 i64:100 i64:300 i64:1000 ;
            --launch das 30,1,1 40,1,1 arr:f64:40,30 arr:i64:256000 ;"
launch_lla="--launch lla 4,4,1 8,8,1 f64:0.5 f64:0.6 f64:0.1 f64:0.9 f64:0.2 f64:0.8 f64:1.0
            i64:30 i64:20 arr:f64:20,30 ;"
launch_mandelbrot="--launch mandel_kernel 2,2,1 16,8,1 f64:-2 f64:1 f64:-1 f64:1 arr:u8:48,64 i64:100 ;"

# add with every level (and cuda code, the default): which one this CPU runs best
"$KJIT" build examples/add.kern --emit=lib -o "$OUT/libs/libadd.so" 2>"$OUT/add.notes" || bad "build of add failed"
best=$("$OUT/driver-rt" --lib "$OUT/libs/libadd.so" 2>&1 >/dev/null | sed -n 's/.* runs its \(.*\) code/\1/p')
[ -n "$best" ] || { bad "libadd.so does not load"; best=sse2; }
echo "aot: this CPU runs the $best code"

# the sse2 level quietly: LLVM warned "loop not vectorized" for each lane loop
# of a reduction it could not vectorise there, while the code asked it to
# (codegen_llvm.c, request_simd_lanes: a width hint now, not a demand)
"$KJIT" build examples/reduce.kern --emit=lib --cpu-levels=sse2 --cuda=off -o "$OUT/libs/reduce-sse2.so" \
    2>"$OUT/reduce-sse2.err" || bad "build of reduce at sse2 failed: $(cat "$OUT/reduce-sse2.err")"
if grep -q warning "$OUT/reduce-sse2.err"; then
    bad "kjit build examples/reduce.kern --emit=lib --cpu-levels=sse2 warns" \
        "($(grep -c warning "$OUT/reduce-sse2.err") lines): $(head -1 "$OUT/reduce-sse2.err")"
fi

# compare NAME LIB KERN TARGET [driver args]: the library through libkjit-rt
# against the source through the JIT.
compare() {
    local name=$1 lib=$2 kern=$3 target=$4; shift 4
    "$OUT/driver-rt" --lib "$lib" --target "$target" "$@" >"$OUT/$name.$target.rt" 2>"$OUT/$name.err"
    local rc=$?
    "$OUT/driver-jit" --kern "$kern" --target "$target" "$@" >"$OUT/$name.$target.jit" 2>>"$OUT/$name.err"
    if [ $rc != 0 ] || ! [ -s "$OUT/$name.$target.rt" ] ||
       ! cmp -s "$OUT/$name.$target.rt" "$OUT/$name.$target.jit"; then
        return 1
    fi
}

lines=0
for kern in examples/*.kern; do
    name=$(basename "$kern" .kern)
    lib="$OUT/libs/lib$name.so"
    # (cuda code apart: section 6 checks it; tests/gpu/aot.sh runs it)
    if [ "$name" != add ] && ! "$KJIT" build "$kern" --emit=lib --cpu-levels="$best" --cuda=off -o "$lib"; then
        bad "kjit build --emit=lib $kern failed"; continue
    fi
    launch=launch_$name
    for target in cpu parallel; do
        # shellcheck disable=SC2086
        if compare "$name" "$lib" "$kern" "$target" ${!launch:-}; then
            lines=$((lines + $(wc -l <"$OUT/$name.$target.rt")))
        else
            bad "$name on $target: the library differs from the JIT"
            cat "$OUT/$name.err"; diff "$OUT/$name.$target.rt" "$OUT/$name.$target.jit" | head -10
        fi
    done
done
echo "aot: $(ls examples/*.kern | wc -l) examples from libraries through libkjit-rt, $lines results bit for bit as the JIT's"

# Every golden program that runs (tests/golden/*/*.out) as a library through
# `kjit run LIB ARGS` (libkjit loading the library): its print lines as
# run.sh compares them, on cpu and parallel.
golden=0
for out in tests/golden/*/*.out; do
    kern=${out%.out}.kern
    name=golden_$(basename "$kern" .kern)
    args=$(sed -n 's|^// run: ||p' "$kern" | head -1)
    if ! "$KJIT" build "$kern" --emit=lib --cpu-levels="$best" --cuda=off -o "$OUT/libs/$name.so" 2>"$OUT/$name.err"; then
        # what libraries do not hold yet (below) is refused, not run
        grep -q "which libraries do not hold yet" "$OUT/$name.err" && continue
        bad "kjit build --emit=lib $kern failed: $(cat "$OUT/$name.err")"; continue
    fi
    for target in cpu parallel; do
        # shellcheck disable=SC2086
        KJIT_STDLIB=$PWD/stdlib "$KJIT" run --target "$target" "$OUT/libs/$name.so" $args \
            >"$OUT/$name.out" 2>"$OUT/$name.err" || { bad "$name on $target: $(cat "$OUT/$name.err")"; continue; }
        if ! diff <(head -n "$(wc -l <"$out")" "$OUT/$name.out" | LC_ALL=C sort) <(LC_ALL=C sort "$out") >/dev/null; then
            bad "$name on $target: the library printed otherwise"; diff "$OUT/$name.out" "$out" | head -5
        fi
    done
    golden=$((golden + 1))
done
echo "aot: $golden golden programs from libraries through kjit run print what they print under the JIT"

# Checked mode: every golden program of a failed check (.run) or a race
# (.race) built with --check (--check=race) reports, as a library under
# `kjit run --check LIB`, on cpu and parallel, what the JIT reports (the
# golden stderr, exactly; exit 1).
checked=0
for want in tests/golden/*/*.run tests/golden/*/*.race; do
    kern=${want%.*} kind=${want##*.}
    kern=$kern.kern name=checked_$(basename "$kern" .kern)
    flag=--check; [ "$kind" = race ] && flag=--check=race
    if ! "$KJIT" build "$kern" --emit=lib $flag --cpu-levels="$best" -o "$OUT/libs/$name.so" 2>"$OUT/$name.err"; then
        grep -q "which libraries do not hold yet" "$OUT/$name.err" && continue
        bad "kjit build --emit=lib $flag $kern failed: $(cat "$OUT/$name.err")"; continue
    fi
    args=$(sed -n '1s|^// run: ||p' "$kern")
    for target in cpu parallel; do
        # shellcheck disable=SC2086
        KJIT_STDLIB=$PWD/stdlib "$KJIT" run $flag "$OUT/libs/$name.so" $args --target "$target" \
            >/dev/null 2>"$OUT/$name.got"
        rc=$?
        if [ $rc != 1 ] || ! cmp -s "$OUT/$name.got" "$want"; then
            bad "$name on $target (exit $rc): the library's checked mode reported otherwise"
            diff "$OUT/$name.got" "$want" | head -6
        fi
    done
    checked=$((checked + 1))
done
echo "aot: $checked golden programs of checked mode from libraries built with --check report what the JIT reports"
# a checked context and a library of no checked code, or of other checks
msg=$(KJIT_CHECK=1 "$OUT/driver-rt" --lib "$OUT/libs/libadd.so" 2>&1)
[[ "$msg" == *"is checked (KJIT_CHECK=values"*"holds no checked code (build it with kjit build --check=values)"* ]] ||
    bad "KJIT_CHECK=1 ran a library of no checked code: $msg"
msg=$(KJIT_CHECK=race "$OUT/driver-rt" --lib "$OUT/libs/checked_index_kernel.so" 2>&1)
[[ "$msg" == *"checks race"*"holds checked code for values only"* ]] ||
    bad "KJIT_CHECK=race ran a library of value checks: $msg"

# --block: a kernel with barriers built with the code for blocks of 64 and
# 128 threads; launches of those shapes run it (the loader looks its
# symbols up: LD_DEBUG), one of 32 the general code; every launch's bits
# are the JIT's (which specialises every shape), on cpu and parallel.
cat >"$OUT/tree.kern" <<'KERN'
@kernel
fn tree(a: f32[], out: f32[]) {
    let sh = shared(f32, 1024);
    let t = threadIdx.x;
    let i = blockIdx.x * blockDim.x + t;
    sh[t] = i < len(a) ? a[i] : 0.0;
    syncthreads();
    let s = blockDim.x / 2;
    while s > 0 {
        if t < s { sh[t] += sh[t + s]; }
        syncthreads();
        s = s / 2;
    }
    if t == 0 { out[blockIdx.x] = sh[0]; }
}
KERN
if "$KJIT" build "$OUT/tree.kern" --emit=lib --cpu-levels="$best" --block 64 --block 128,1,1 \
        -o "$OUT/libs/libtree.so"; then
    for b in 64 128 32; do
        for target in cpu parallel; do
            compare tree "$OUT/libs/libtree.so" "$OUT/tree.kern" "$target" \
                --launch tree 4,1,1 $b,1,1 arr:f32:1000 arr:f32:4 \; ||
                bad "tree with blocks of $b on $target: the library differs from the JIT"
        done
        looked=$(LD_DEBUG=symbols "$OUT/driver-rt" --lib "$OUT/libs/libtree.so" \
                 --launch tree 4,1,1 $b,1,1 arr:f32:1000 arr:f32:4 \; 2>&1 | grep -c "symbol=kjaot_${best}_s[0-9]*__tree.*__block;")
        case $b in
        32) [ "$looked" = 0 ] || bad "blocks of 32 ran code specialised for another shape" ;;
        *) [ "$looked" -gt 0 ] || bad "blocks of $b did not run the code built with --block $b" ;;
        esac
    done
    # and on cuda: each kernel root with barriers for each shape, a root
    # "block X,Y,Z" whose PTX reads blockDim as the shape and declares it
    # (.reqntid); tests/gpu/aot.sh launches them
    info=$("$KJIT" info "$OUT/libs/libtree.so")
    [ "$(grep -c '^root [0-9]*: cuda tree\(__c3\)\? (block \(64\|128\),1,1) ptx' <<<"$info")" = 4 ] ||
        bad "libtree.so: not 4 cuda roots for blocks of 64 and 128: $info"
    ptxas=$(KJIT_PTXAS= "$KJIT" info | sed -n 's/^ptxas: *\(\/[^ ]*\).*/\1/p')
    python3 - "$OUT/libs/libtree.so" "$ptxas" "$OUT" <<'PY' || bad "libtree.so: the cuda shapes' PTX is not specialised"
import re, struct, subprocess, sys
data, at, general, shaped = open(sys.argv[1], "rb").read(), 0, 0, []
mark = b"//\n// Generated by LLVM NVPTX Back-End"
while (at := data.find(mark, at)) >= 0:
    size = struct.unpack_from("<Q", data, at - 8)[0]
    ptx = data[at:at + size]
    at += size
    m = re.search(rb"\n\)\n\.reqntid (\d+), 1, 1\n", ptx)
    if not m:
        assert b"%ntid.x" in ptx, "the general code reads blockDim"
        general += 1
        continue
    assert b"%ntid" not in ptx, "a shape's code reads blockDim"
    assert re.search(rb"mov\.u32 \t%r\d+, " + m.group(1) + rb";", ptx), "blockDim is not the shape's"
    shaped.append(int(m.group(1)))
    if sys.argv[2]:  # it assembles
        open(f"{sys.argv[3]}/shape.ptx", "wb").write(ptx.rstrip(b"\0"))
        subprocess.run([sys.argv[2], "-arch=sm_80", "-o", f"{sys.argv[3]}/shape.cubin",
                        f"{sys.argv[3]}/shape.ptx"], check=True)
assert general == 2 and sorted(shaped) == [64, 64, 128, 128], (general, shaped)
PY
else
    bad "kjit build --emit=lib --block failed"
fi
# the cpu objects (each root and shape, for each level) compiled on one
# thread and on three (KJIT_COMPILE_THREADS, aot_build.c's
# compile_cpu_objects): the same bytes, as a shared library and as an
# archive's members (ar's headers hold times)
for t in 1 3; do
    mkdir -p "$OUT/libs/t$t"
    KJIT_COMPILE_THREADS=$t "$KJIT" build "$OUT/tree.kern" --emit=lib --cuda=off --block 64 \
        --cpu-levels="sse2,$best" -o "$OUT/libs/tree_t$t.so" ||
        bad "KJIT_COMPILE_THREADS=$t --emit=lib build of tree.kern failed"
    KJIT_COMPILE_THREADS=$t "$KJIT" build "$OUT/tree.kern" --emit=staticlib --cuda=off --block 64 \
        --cpu-levels="sse2,$best" -o "$OUT/libs/t$t/libtree.a" ||
        bad "KJIT_COMPILE_THREADS=$t --emit=staticlib build of tree.kern failed"
done
cmp -s "$OUT/libs/tree_t1.so" "$OUT/libs/tree_t3.so" ||
    bad "tree.kern's library differs between 1 and 3 compile threads"
[ "$(ar t "$OUT/libs/t1/libtree.a")" = "$(ar t "$OUT/libs/t3/libtree.a")" ] &&
    cmp -s <(ar p "$OUT/libs/t1/libtree.a") <(ar p "$OUT/libs/t3/libtree.a") ||
    bad "tree.kern's archive differs between 1 and 3 compile threads"

# --emit=header: typed entry points, built against kjit.h and the headers
# alone, linked with libkjit-rt, agree with kjit_call and kjit_launch.
if "$KJIT" build examples/add.kern --emit=header -o "$OUT/include/add.h" &&
   "$KJIT" build examples/mandelbrot.kern --emit=header -o "$OUT/include/mandelbrot.h" &&
   $CC -std=c11 -D_GNU_SOURCE -O1 -Wall -Werror -I"$OUT/include" tests/aot/header_test.c \
       -o "$OUT/header-test" -L"$OUT/lib" -lkjit-rt -lm -Wl,-rpath,"$PWD/$OUT/lib"; then
    "$OUT/header-test" "$OUT/libs/libadd.so" "$OUT/libs/libmandelbrot.so" || bad "the typed entry points failed"
else
    bad "--emit=header: the headers do not build"
fi

# --emit=staticlib: add and mandelbrot as archives, linked statically with
# libkjit-rt.a into the driver (-DAOT_LOAD=NAME_kjit_load), bit for bit as
# the JIT (the outputs above); both archives in one program through the
# header's NAME_open_linked; another ABI and a damaged table refused.
cp "$BUILD/libkjit-rt.a" "$OUT/lib/"
static=0
for name in add mandelbrot; do
    "$KJIT" build "examples/$name.kern" --emit=staticlib --cpu-levels="$best" -o "$OUT/libs/lib$name.a" ||
        { bad "kjit build --emit=staticlib examples/$name.kern failed"; continue; }
    $CC -std=c11 -D_GNU_SOURCE -O1 -Wall -I"$OUT/include" -DAOT_LOAD="${name}_kjit_load" tests/aot/aot_driver.c \
        "$OUT/libs/lib$name.a" "$OUT/lib/libkjit-rt.a" -lmvec -lm -lpthread -ldl -lrt -o "$OUT/driver-$name-static" ||
        { bad "the driver does not link with lib$name.a and libkjit-rt.a"; continue; }
    ldd "$OUT/driver-$name-static" | grep -q 'libkjit' && bad "driver-$name-static links a shared libkjit"
    launch=launch_$name
    for target in cpu parallel; do
        # shellcheck disable=SC2086
        "$OUT/driver-$name-static" --linked --target "$target" ${!launch:-} >"$OUT/$name.$target.static" 2>"$OUT/$name.static.err"
        if [ $? = 0 ] && [ -s "$OUT/$name.$target.static" ] && cmp -s "$OUT/$name.$target.static" "$OUT/$name.$target.jit"; then
            static=$((static + $(wc -l <"$OUT/$name.$target.static")))
        else
            bad "$name on $target: the linked library differs from the JIT"; cat "$OUT/$name.static.err"
        fi
    done
done
if $CC -std=c11 -D_GNU_SOURCE -O1 -Wall -Werror -DLINKED -I"$OUT/include" tests/aot/header_test.c \
       -o "$OUT/header-test-linked" "$OUT/libs/libadd.a" "$OUT/libs/libmandelbrot.a" "$OUT/lib/libkjit-rt.a" \
       -lmvec -lm -lpthread -ldl -lrt; then
    "$OUT/header-test-linked" --linked || bad "the linked libraries' typed entry points failed"
else
    bad "--emit=staticlib: the header test does not link with libadd.a and libmandelbrot.a"
fi
# The archive's table carries the cuda code as a shared library's does (its
# PTX, in the entry point's object), and none with --cuda=off.
strings "$OUT/libs/libadd.a" | grep -q '^\.target sm_70' ||
    bad "--emit=staticlib: libadd.a holds no PTX for sm_70"
"$KJIT" build examples/add.kern --emit=staticlib --cuda=off --cpu-levels="$best" -o "$OUT/libs/libadd-nocuda.a" &&
    strings "$OUT/libs/libadd-nocuda.a" | grep -q '^\.target sm_' &&
    bad "--emit=staticlib --cuda=off: the archive still holds PTX"
echo "aot: add and mandelbrot linked statically (--emit=staticlib, libkjit-rt.a): $static results bit for bit as the JIT's"

# The comparison sees a changed result: add built from a - b.
sed 's/a + b/a - b/' examples/add.kern >"$OUT/add_minus.kern"
"$KJIT" build "$OUT/add_minus.kern" --emit=lib --cpu-levels="$best" -o "$OUT/libs/libminus.so"
if compare minus "$OUT/libs/libminus.so" examples/add.kern cpu; then
    bad "a library of a - b compares equal to add: the comparison cannot fail"
fi

# A @vectorize of several outputs and a kernel's local() sized at launch
# (its size an expression of its parameters, which the table holds): bit
# for bit as the JIT, through kjit_call_outputs and kjit_launch.
cat >"$OUT/more.kern" <<'KERN'
@vectorize
fn two(x: f64, y: f32) -> (f64, i32) { return (x * 2.0 + f64(y), i32(x) - 3); }
@kernel
fn scratch(a: f64[], out: f64[], n: i32) {
    let s = local(f64, max(n, 2) * 2 - 1);
    for j in range(2 * n - 1) { s[j] = a[(grid(1) + j) % len(a)] * 0.5; }
    let t = 0.0;
    for j in range(2 * n - 1) { t += s[j] * f64(j); }
    out[grid(1)] = t;
}
KERN
if "$KJIT" build "$OUT/more.kern" --emit=lib --cpu-levels="$best" -o "$OUT/libs/libmore.so"; then
    for target in cpu parallel; do
        if compare more "$OUT/libs/libmore.so" "$OUT/more.kern" "$target" \
                --launch scratch 2,1,1 8,1,1 arr:f64:16 arr:f64:16 i64:5 \; \
                --launch scratch 1,1,1 16,1,1 arr:f64:16 arr:f64:16 i64:300 \;; then
            lines=$((lines + $(wc -l <"$OUT/more.$target.rt")))
            grep -q "two sig 0 form 0 output 1" "$OUT/more.$target.rt" || bad "two's second output was not compared"
            grep -q "launch scratch arg 1" "$OUT/more.$target.rt" || bad "scratch did not run"
        else
            bad "more.kern on $target: the library differs from the JIT"; cat "$OUT/more.err"
            diff "$OUT/more.$target.rt" "$OUT/more.$target.jit" | head -6
        fi
    done
    # its header: two's typed entry point takes both outputs
    if "$KJIT" build "$OUT/more.kern" --emit=header -o "$OUT/include/more.h"; then
        printf '#include "more.h"\nint main(void) { double x[1] = {1}, o[1]; float y[1] = {2}; int32_t k[1];\n'\
'  more_module m = {0}; return more_two_f64_f32(&m, 1, x, y, o, k) == KJIT_OK; }\n' >"$OUT/more_header.c"
        $CC -std=c11 -Wall -Werror -fsyntax-only -I"$OUT/include" "$OUT/more_header.c" ||
            bad "the header of a @vectorize of several outputs does not compile"
    else
        bad "--emit=header of more.kern failed"
    fi
else
    bad "kjit build --emit=lib of a @vectorize of several outputs and a launch-sized local() failed"
fi

# Levels.  KJIT_CPU_FEATURES=-avx forces the sse2 code of a library of all
# three, with the bits of the JIT so restricted (sin: libmvec's SSE routine).
"$KJIT" build examples/sin.kern --emit=lib -o "$OUT/libs/libsin3.so" || bad "build of sin failed"
forced=$(KJIT_CPU_FEATURES=-avx "$OUT/driver-rt" --lib "$OUT/libs/libsin3.so" 2>&1 >/dev/null)
[[ "$forced" == *"runs its sse2 code"* ]] || bad "KJIT_CPU_FEATURES=-avx did not force sse2: $forced"
if ! KJIT_CPU_FEATURES=-avx compare sin3 "$OUT/libs/libsin3.so" examples/sin.kern cpu; then
    bad "sin's sse2 code differs from the JIT's under KJIT_CPU_FEATURES=-avx"
fi
# A library of v3 and v4 alone, on a CPU without AVX: refused, naming its levels.
"$KJIT" build examples/add.kern --emit=lib --cpu-levels=v4,v3 -o "$OUT/libs/libhigh.so"
msg=$(KJIT_CPU_FEATURES=-avx "$OUT/driver-rt" --lib "$OUT/libs/libhigh.so" 2>&1)
rc=$?
[ $rc = 3 ] && [[ "$msg" == *"levels v3, v4, none of which this CPU runs"* ]] ||
    bad "a library of v3 and v4 ran under KJIT_CPU_FEATURES=-avx (exit $rc): $msg"
"$KJIT" build examples/add.kern --emit=lib --cpu-levels=v5 -o "$OUT/libs/x.so" 2>"$OUT/v5.err" &&
    bad "--cpu-levels=v5 was accepted"
grep -q "unknown x86-64 level 'v5'" "$OUT/v5.err" || bad "--cpu-levels=v5: $(cat "$OUT/v5.err")"

# refused NAME LIB WANT: the driver refuses LIB (exit 3) with WANT in the message.
refused() {
    local msg rc
    msg=$("$OUT/driver-rt" --lib "$2" 2>&1); rc=$?
    if [ $rc != 3 ] || [[ "$msg" != *"$3"* ]]; then
        bad "$1: not refused as expected (exit $rc): $msg"
    fi
}
lib="$OUT/libs/libadd.so"
size=$(stat -c %s "$lib")
# another ABI version: the trailer's version word (8 bytes into the last 64)
cp "$lib" "$OUT/libs/abi.so"
printf '\x63\x00\x00\x00' | dd of="$OUT/libs/abi.so" bs=1 seek=$((size - 64 + 8)) conv=notrunc status=none
refused "ABI 99" "$OUT/libs/abi.so" "ABI version 99; this runtime reads version 2"
# altered: one byte of the code, then one of the table
for at in 4096 $((size - 200)); do
    cp "$lib" "$OUT/libs/altered.so"
    printf '\x5a' | dd of="$OUT/libs/altered.so" bs=1 seek=$at conv=notrunc status=none
    cmp -s "$lib" "$OUT/libs/altered.so" && printf '\xa5' | dd of="$OUT/libs/altered.so" bs=1 seek=$at conv=notrunc status=none
    refused "a byte altered at $at" "$OUT/libs/altered.so" "truncated or altered"
done
head -c $((size - 100)) "$lib" >"$OUT/libs/short.so"
refused "truncated" "$OUT/libs/short.so" "is truncated"
head -c 1000 /dev/urandom >"$OUT/libs/random.so"
refused "not a library" "$OUT/libs/random.so" "not a kjit library"
# others can write the file, or its folder
cp "$lib" "$OUT/libs/open.so" && chmod 666 "$OUT/libs/open.so"
refused "a file others can write" "$OUT/libs/open.so" "another user can write it"
mkdir -p "$OUT/open" && chmod 777 "$OUT/open" && cp "$lib" "$OUT/open/libadd.so"
refused "a folder others can write" "$OUT/open/libadd.so" "can be written by another user"
# libkjit-rt compiles nothing
msg=$("$OUT/driver-rt" --kern examples/add.kern 2>&1)
[[ "$msg" == *"libkjit-rt, which has no compiler"* ]] || bad "libkjit-rt compiled a .kern: $msg"

# 6. cuda code.  cuda_roots LIB: every cuda root's PTX (assembled by ptxas
# for sm_80, the PTX being for sm_70 or sm_80) and cubins (ELF), found in the
# file by the table's layout: the PTX's u64 size, its text, then each
# cubin's u64 size and bytes; prints "roots cubins".
PTXAS=$(KJIT_PTXAS= "$KJIT" info | sed -n 's/^ptxas: *\(\/[^ ]*\).*/\1/p')
cuda_roots() {
    python3 - "$1" "$2" "$PTXAS" "$OUT" <<'PY'
import struct, subprocess, sys
data, cubins_each, ptxas, out = open(sys.argv[1], "rb").read(), int(sys.argv[2]), sys.argv[3], sys.argv[4]
mark, at, roots, cubins = b"//\n// Generated by LLVM NVPTX Back-End", 0, 0, 0
while (at := data.find(mark, at)) >= 0:
    size = struct.unpack_from("<Q", data, at - 8)[0]
    ptx, at = data[at:at + size], at + size
    assert ptx.endswith(b"\0") and ptx.rstrip(b"\0").rstrip().endswith(b"}"), "a PTX is cut short"
    with open(f"{out}/root.ptx", "wb") as f:
        f.write(ptx.rstrip(b"\0"))
    if ptxas:
        subprocess.run([ptxas, "-arch=sm_80", "-o", f"{out}/root.cubin", f"{out}/root.ptx"], check=True)
    for _ in range(cubins_each):
        size = struct.unpack_from("<Q", data, at)[0]
        assert data[at + 8:at + 12] == b"\x7fELF", "a cubin is not ELF"
        at += 8 + size
        cubins += 1
    roots += 1
print(roots, cubins)
PY
}
info=$("$KJIT" info "$OUT/libs/libadd.so")
echo "$info" | sed -n 's/^\(cuda\|note\): *//p' | sed 's/^/aot: /'
[[ "$info" == *"cuda:      5 roots; PTX for sm_70"* ]] || bad "libadd.so: not 5 cuda roots with PTX for sm_70: $info"
made=0
for arch in sm_70 sm_80 sm_90; do
    if [[ "$info" == *"cubins for $arch ("* ]]; then made=$((made + 1))
    elif ! [[ "$info" == *"no cubin for $arch"* && "$info" == *"cannot target $arch"* ]] ||
         ! grep -q "kjit build: note: .*cannot target $arch" "$OUT/add.notes"; then
        bad "libadd.so: neither a cubin for $arch nor a note saying why: $info"
    fi
done
if [ -n "$PTXAS" ]; then
    [ $made -ge 2 ] || bad "libadd.so: ptxas $PTXAS made cubins for $made of sm_70, sm_80, sm_90"
    found=$(cuda_roots "$OUT/libs/libadd.so" $made) || bad "libadd.so: a PTX does not assemble, or a cubin is not ELF"
    [ "$found" = "5 $((5 * made))" ] || bad "libadd.so: $found roots and cubins found in the file, not 5 and $((5 * made))"
    echo "aot: libadd.so: 5 cuda roots' PTX assemble with ptxas, $((5 * made)) cubins"
    # mandelbrot's kernel and a @reduce in the cuda forms (WARPS, COLUMNS), one arch
    printf '@reduce\nfn total(a: f64, b: f64) -> f64 { return a + b; }\n' >"$OUT/total.kern"
    for kern in examples/mandelbrot.kern "$OUT/total.kern"; do
        name=$(basename "$kern" .kern)
        "$KJIT" build "$kern" --emit=lib --cpu-levels="$best" --arch=sm_80 -o "$OUT/libs/cuda_$name.so" ||
            { bad "--arch=sm_80 build of $kern failed"; continue; }
        roots=$("$KJIT" info "$OUT/libs/cuda_$name.so" | sed -n 's/^cuda: *\([0-9]*\) roots.*/\1/p')
        found=$(cuda_roots "$OUT/libs/cuda_$name.so" 1) && [ "$found" = "$roots $roots" ] ||
            bad "cuda_$name.so: $found roots and cubins found in the file, not $roots"
    done
    # its cuda roots compiled (LLVM and ptxas) on one thread and on three
    # (KJIT_COMPILE_THREADS, aot_build.c's compile_cuda_roots): the same bytes
    for t in 1 3; do
        KJIT_COMPILE_THREADS=$t "$KJIT" build "$OUT/total.kern" --emit=lib --cpu-levels="$best" \
            --arch=sm_80 -o "$OUT/libs/total_t$t.so" || bad "KJIT_COMPILE_THREADS=$t build of total.kern failed"
    done
    cmp -s "$OUT/libs/total_t1.so" "$OUT/libs/total_t3.so" ||
        bad "total.kern's library differs between 1 and 3 compile threads"
    "$KJIT" info "$OUT/libs/cuda_total.so" | grep -q 'cuda.*(reduce form 1 lanes 2 aligned kept 0' ||
        bad "a @reduce's library holds no WARPS root (aligned, 2 lanes a thread)"
    "$KJIT" info "$OUT/libs/cuda_total.so" | grep -q 'cuda.*(reduce form 2 lanes 4 kept 1 reduced 2' ||
        bad "a @reduce's library holds no COLUMNS root over 2 reduced dimensions"
    # checked mode on cuda: --check (values) builds the checked module's
    # cuda roots too, each taking the check record (a parameter more);
    # --check=all none (a cuda context checks values alone)
    kern=tests/golden/checks/index_kernel.kern
    "$KJIT" build $kern --emit=lib --cpu-levels="$best" --arch=sm_80 --check \
        -o "$OUT/libs/cuda_checked.so" || bad "--check --arch=sm_80 build of $kern failed"
    info=$("$KJIT" info "$OUT/libs/cuda_checked.so")
    [[ "$info" == *"checked:   values (2 cpu roots, 2 cuda roots, --check)"* ]] &&
        [ "$(grep -c '^root [0-9]*: cuda shift_left.* checked ptx' <<<"$info")" = 2 ] ||
        bad "cuda_checked.so holds no checked cuda roots: $info"
    found=$(cuda_roots "$OUT/libs/cuda_checked.so" 1) && [ "$found" = "4 4" ] ||
        bad "cuda_checked.so: $found roots and cubins found in the file, not 4 and 4"
    python3 - "$OUT/libs/cuda_checked.so" <<'PY' || bad "cuda_checked.so: the checked roots' PTX does not take the check record"
import re, struct, sys
data, at, params = open(sys.argv[1], "rb").read(), 0, []
mark = b"//\n// Generated by LLVM NVPTX Back-End"
while (at := data.find(mark, at)) >= 0:
    size = struct.unpack_from("<Q", data, at - 8)[0]
    entry = re.search(rb"\.entry \w+\(([^)]*)\)", data[at:at + size]).group(1)
    params.append(entry.count(b".param"))
    at += size
assert params[2:] == [p + 1 for p in params[:2]], params  # unchecked, then checked
PY
    "$KJIT" build $kern --emit=lib --cpu-levels="$best" --arch=sm_80 --check=all \
        -o "$OUT/libs/cuda_checked_all.so" || bad "--check=all --arch=sm_80 build of $kern failed"
    "$KJIT" info "$OUT/libs/cuda_checked_all.so" | grep -q 'checked:   all (2 cpu roots, 0 cuda roots' ||
        bad "--check=all built checked cuda roots: $("$KJIT" info "$OUT/libs/cuda_checked_all.so" | grep checked)"
    # an arch this ptxas cannot target: left out, said
    "$KJIT" build examples/add.kern --emit=lib --cpu-levels="$best" --arch=sm_80,sm_999 \
        -o "$OUT/libs/cuda_999.so" 2>"$OUT/999.err" || bad "--arch=sm_80,sm_999 failed: $(cat "$OUT/999.err")"
    grep -q "note: .*cannot target sm_999: the library holds no cubin for it" "$OUT/999.err" ||
        bad "--arch=sm_999 was not said to be left out: $(cat "$OUT/999.err")"
    "$KJIT" info "$OUT/libs/cuda_999.so" | grep -q 'cubins for sm_80 (.*no cubin for sm_999' ||
        bad "cuda_999.so: $("$KJIT" info "$OUT/libs/cuda_999.so" | grep '^cuda')"
fi
# no ptxas: PTX alone, said
KJIT_PTXAS=off "$KJIT" build examples/add.kern --emit=lib --cpu-levels="$best" --arch=sm_80 \
    -o "$OUT/libs/cuda_noptxas.so" 2>"$OUT/noptxas.err" || bad "a build without ptxas failed"
grep -q "note: no ptxas .*the library holds PTX only" "$OUT/noptxas.err" || bad "no ptxas: not said: $(cat "$OUT/noptxas.err")"
"$KJIT" info "$OUT/libs/cuda_noptxas.so" | grep -q '^cuda: .*PTX for sm_80 .*no cubin for sm_80' ||
    bad "cuda_noptxas.so: $("$KJIT" info "$OUT/libs/cuda_noptxas.so" | grep '^cuda')"
# --cuda=off and bad --arch
"$KJIT" info "$OUT/libs/libsin3.so" | grep -q '^cuda: .*roots; PTX for sm_70' || bad "libsin3.so holds no cuda code"
"$KJIT" build examples/add.kern --emit=lib --cuda=off --cpu-levels="$best" -o "$OUT/libs/nocuda.so" &&
    "$KJIT" info "$OUT/libs/nocuda.so" | grep -q '^cuda: *none (built with --cuda=off)' || bad "--cuda=off: $("$KJIT" info "$OUT/libs/nocuda.so" 2>&1 | grep cuda)"
"$KJIT" build examples/add.kern --emit=lib --arch=volta -o "$OUT/libs/x.so" 2>"$OUT/volta.err" && bad "--arch=volta was accepted"
grep -q "unknown CUDA architecture 'volta' in --arch" "$OUT/volta.err" || bad "--arch=volta: $(cat "$OUT/volta.err")"
"$KJIT" build examples/add.kern --cuda=off 2>"$OUT/off.err" && bad "--cuda=off without --emit=lib was accepted"
grep -q -- "--cuda=off is for --emit=lib" "$OUT/off.err" || bad "--cuda=off without --emit=lib: $(cat "$OUT/off.err")"
# The GPU machine's script runs here, from a bundle of what it needs first
# (make gpu-bundle makes the whole one), up to where it needs a GPU.
if ! "$KJIT" info | grep -q '^  cuda      yes'; then
    B=$OUT/bundle
    mkdir -p "$B/bin" "$B/aot" "$B/tests"
    cp "$KJIT" "$B/bin/" && ln -sf "$PWD/$BUILD/libkjit.so" "$PWD/$BUILD/libkjit-rt.so" "$B/bin/"
    ln -sf "$PWD/stdlib" "$B/stdlib" && ln -sf "$PWD/tests/gpu" "$B/tests/gpu"
    for side in rt jit; do
        $CC -std=c11 -D_GNU_SOURCE -O1 -Iruntime tests/aot/aot_driver.c -o "$B/bin/aot-driver-$side" \
            -L"$BUILD" -lkjit$([ $side = rt ] && echo -rt) -lm -Wl,-rpath,'$ORIGIN'
    done
    tar -C "$OUT/libs" -cf - libadd.so | xz > "$B/aot/libs.tar.xz"
    msg=$(bash tests/gpu/aot.sh "$B" 2>&1)
    [[ "$msg" == *"PASS libadd.so runs on cpu through libkjit-rt"*"skipped: no CUDA driver"*"1 passed, 0 failed" ]] ||
        bad "tests/gpu/aot.sh without a GPU: $msg"
    echo "aot: tests/gpu/aot.sh here: $(grep '^skipped' <<<"$msg")"
fi

[ $fail = 0 ] && echo "aot: all passed"
exit $fail
