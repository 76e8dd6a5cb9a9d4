#!/usr/bin/env bash
# tests/gpu/aot.sh [BUNDLE]: libraries' cuda code (kjit build --emit=lib,
# docs/aot.md) on the GPU machine, which has no LLVM and no compiler: the
# libraries (aot/libs.tar.xz: every example with sm_90 cubins and PTX, add
# with no cuda code, the golden kernel that prints) and the programs that
# run them (bin/aot-driver-rt and bin/aot-bench-rt linked with libkjit-rt
# alone, -jit with libkjit) were built where kjit was.
#   1. (any machine) the libraries load through libkjit-rt, on cpu;
#   then, where a CUDA driver answers (else "skipped: no CUDA driver"):
#   2. every example's functions on cuda from its library (libkjit-rt)
#      against the JIT's cuda (libkjit), bit for bit, and against the JIT's
#      cpu within tests/gpu/aot_compare.py's tolerances: @vectorize (arrays,
#      scalars, broadcasts, and device arrays on a stream), kernels with
#      grid and block, @guvectorize, @reduce;
#   3. the choice of code: a faked newer device (KJIT_AOT_CUDA_DEVICE=sm_100)
#      runs the PTX, compiled by the driver, with the same bits; a faked
#      older one (sm_80) and a library without cuda code are refused,
#      naming what the device is and what the library holds;
#   4. print on cuda from a library (kjit run LIB), Python's
#      kjit.load_library(path, target="cuda") against kjit.load; checked
#      mode: the golden programs of failed checks built with --check report
#      on cuda what the JIT's checked cuda code reports; --block: a tree
#      sum's launches of the shapes it was built for run their code;
#   5. the first call of a new process (library, cold JIT, warm disk cache;
#      context creation apart), the same first call step by step against a
#      CUDA C program built here with nvcc (tests/gpu/aot_first.cu: the
#      driver's part and kjit's read off one run), and calls and launches
#      from a library against the JIT (host cost within 5%, same kernel
#      time).
# Ends with one line: "N passed, N failed".
set -u
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
kjit=$root/bin/kjit
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }

# The libraries, in a folder only we can write (the loader refuses others).
libs=$work/aot-libs
mkdir -m 700 "$libs"
if ! python3 -c 'import lzma, sys, tarfile
t = tarfile.open(fileobj=lzma.open(sys.argv[1]))
t.extractall(sys.argv[2], **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))' \
        "$root/aot/libs.tar.xz" "$libs"; then
    fail "unpacking aot/libs.tar.xz"; finish
fi
chmod 600 "$libs"/*.so
rt=$root/bin/aot-driver-rt
jit=$root/bin/aot-driver-jit

echo "=== libraries through libkjit-rt on cpu"
if "$rt" --lib "$libs/libadd.so" --target cpu > "$work/aot-cpu.txt" 2>&1 && grep -q '^add sig 0' "$work/aot-cpu.txt"; then
    pass "libadd.so runs on cpu through libkjit-rt ($(grep -c . "$work/aot-cpu.txt") lines)"
else
    cat "$work/aot-cpu.txt"; fail "libadd.so runs on cpu through libkjit-rt"
fi
if ldd "$rt" | grep -Eq 'libLLVM|libkjit\.so'; then fail "bin/aot-driver-rt links more than libkjit-rt"; fi

if ! "$kjit" info | grep -q '^  cuda      yes'; then
    echo "skipped: no CUDA driver ($("$kjit" info | sed -n 's/^  cuda      no: //p'))"
    finish
fi

echo "=== every example's cuda functions from its library, against the JIT"
# The kernels, launched with arguments their indexing stays inside (as in
# tests/aot/aot.sh).
launch_das="--launch echoes 1,1,1 128,1,1 arr:i64:256000 i64:100 i64:300 i64:1000 ;
            --launch das 30,1,1 40,1,1 arr:f64:40,30 arr:i64:256000 ;"
launch_lla="--launch lla 4,4,1 8,8,1 f64:0.5 f64:0.6 f64:0.1 f64:0.9 f64:0.2 f64:0.8 f64:1.0
            i64:30 i64:20 arr:f64:20,30 ;"
launch_mandelbrot="--launch mandel_kernel 2,2,1 16,8,1 f64:-2 f64:1 f64:-1 f64:1 arr:u8:48,64 i64:100 ;"
for kern in "$root"/examples/*.kern; do
    name=$(basename "$kern" .kern)
    launch=launch_$name
    for side in lib jit cpu; do mkdir -p "$work/aot-$name-$side"; done
    # shellcheck disable=SC2086
    "$rt" --lib "$libs/lib$name.so" --target cuda --dump "$work/aot-$name-lib" ${!launch:-} \
        > "$work/aot-$name.lib" 2> "$work/aot-$name.err"
    lib_rc=$?
    # shellcheck disable=SC2086
    "$jit" --kern "$kern" --target cuda --dump "$work/aot-$name-jit" ${!launch:-} \
        > "$work/aot-$name.jit" 2>> "$work/aot-$name.err"
    jit_rc=$?
    # shellcheck disable=SC2086
    "$jit" --kern "$kern" --target cpu --dump "$work/aot-$name-cpu" ${!launch:-} \
        > "$work/aot-$name.cpu" 2>> "$work/aot-$name.err"
    cpu_rc=$?
    grep -h 'runs its' "$work/aot-$name.err"
    lines=$(grep -c . "$work/aot-$name.lib")
    if [ $lib_rc = 0 ] && [ $jit_rc = 0 ] && [ "$lines" -gt 0 ] &&
       cmp -s "$work/aot-$name.lib" "$work/aot-$name.jit"; then
        pass "$name: $lines results from the library on cuda, bit for bit the JIT's"
    else
        cat "$work/aot-$name.err"; diff "$work/aot-$name.lib" "$work/aot-$name.jit" | head -10
        fail "$name: the library on cuda against the JIT on cuda (exit $lib_rc, $jit_rc)"
    fi
    if [ $cpu_rc = 0 ] && python3 "$root/tests/gpu/aot_compare.py" "$work/aot-$name-cpu" "$work/aot-$name-lib"; then
        pass "$name: the library on cuda against the JIT on cpu, within the tolerances"
    else
        fail "$name: the library on cuda against the JIT on cpu (exit $cpu_rc)"
    fi
done

# lla_a has 5 inputs: with a scalar among them the library has no variant
# of its own (it holds every set of scalars for up to 4 inputs) and runs the
# general code, the scalar staged to the device as a 0-d array (it was
# handed the host's address before: an illegal address on an H200)
general=$(grep '^lla_a sig 0 form 1 output 0:' "$work/aot-lla.lib")
if [ -n "$general" ] && [ "$general" = "$(grep '^lla_a sig 0 form 1 output 0:' "$work/aot-lla.jit")" ]; then
    pass "lla_a with a scalar among 5 inputs runs the library's general code on cuda, the JIT's bits ($general)"
else
    fail "lla_a with a scalar among 5 inputs from the library on cuda: '$general'"
fi

echo "=== the code a device runs"
for name in add mandelbrot reduce; do
    launch=launch_$name
    # shellcheck disable=SC2086
    KJIT_AOT_CUDA_DEVICE=sm_100 "$rt" --lib "$libs/lib$name.so" --target cuda ${!launch:-} \
        > "$work/aot-$name.ptx" 2> "$work/aot-$name.ptx.err"
    if grep -q 'on cuda its ptx sm_90' "$work/aot-$name.ptx.err" && cmp -s "$work/aot-$name.ptx" "$work/aot-$name.jit"; then
        pass "$name: a newer device (faked sm_100) runs the PTX through the driver, bit for bit the JIT's"
    else
        cat "$work/aot-$name.ptx.err"; diff "$work/aot-$name.ptx" "$work/aot-$name.jit" | head -5
        fail "$name: the PTX on a newer device (faked sm_100)"
    fi
done
# refused CASE WANT [env]: the driver refuses (exit 3) with WANT in its message
msg=$(KJIT_AOT_CUDA_DEVICE=sm_80 "$rt" --lib "$libs/libadd.so" --target cuda 2>&1); rc=$?
want="this device (compute capability 8.0, sm_80, as KJIT_AOT_CUDA_DEVICE says) runs none of its cuda code: it holds cubins for sm_90 and PTX for sm_90"
[ $rc = 3 ] && [[ "$msg" == *"$want"* ]] && pass "an older device (faked sm_80) is refused: $msg" \
    || fail "an older device (faked sm_80) refused (exit $rc): $msg"
msg=$("$rt" --lib "$libs/libadd_nocuda.so" --target cuda 2>&1); rc=$?
[ $rc = 3 ] && [[ "$msg" == *"it holds no cuda code (it was built with --cuda=off)"* ]] \
    && pass "a library without cuda code is refused on cuda: $msg" \
    || fail "a library without cuda code on cuda (exit $rc): $msg"

echo "=== print and Python"
out=$root/tests/golden/print/kernel.out
args=$(sed -n 's|^// run: ||p' "$root/tests/golden/print/kernel.kern" | head -1)
# shellcheck disable=SC2086
if "$kjit" run --target cuda "$libs/libprint_kernel.so" $args > "$work/aot-print.txt" 2>&1 &&
   diff <(head -n "$(wc -l < "$out")" "$work/aot-print.txt" | LC_ALL=C sort) <(LC_ALL=C sort "$out") > /dev/null; then
    pass "a kernel's print on cuda from a library (kjit run LIB)"
else
    cat "$work/aot-print.txt"; fail "a kernel's print on cuda from a library"
fi
if KJIT_LIBRARY=$root/bin/libkjit.so PYTHONPATH=$root/python python3 - "$libs/libsin.so" "$root/examples/sin.kern" <<'PY'
import sys
import numpy as np
import kjit
x = np.linspace(-10, 10, 100_001)
lib = kjit.load_library(sys.argv[1], target="cuda").vsin(x)
jit = kjit.load(sys.argv[2], target="cuda").vsin(x)
assert lib.dtype == np.float64 and np.array_equal(lib.view(np.uint64), jit.view(np.uint64)), "bits differ"
assert np.max(np.abs(lib - np.sin(x))) < 1e-12
print("kjit.load_library(target='cuda').vsin: the JIT's bits")
PY
then pass "Python kjit.load_library(path, target=\"cuda\")"; else fail "Python kjit.load_library(path, target=\"cuda\")"; fi

echo "=== block shapes on cuda from a library (--block)"
# A tree sum built with --block 64 --block 128: launches of those shapes
# run the cuda code made for them (KJIT_TRACE=1 names the root it loads),
# one of 32 the general code; each the JIT's bits.
for b in 64 128 32; do
    tree="--launch tree 4,1,1 $b,1,1 arr:f32:1000 arr:f32:4 ;"
    # shellcheck disable=SC2086
    KJIT_TRACE=1 "$rt" --lib "$libs/libaot_tree.so" --target cuda $tree > "$work/aot-tree.lib" 2> "$work/aot-tree.err"
    lib_rc=$?
    # shellcheck disable=SC2086
    "$jit" --kern "$root/tests/gpu/aot_tree.kern" --target cuda $tree > "$work/aot-tree.jit" 2>> "$work/aot-tree.err"
    jit_rc=$?
    shaped=$(grep -c "root tree[_c3]* (block $b,1,1): cuModuleLoadDataEx" "$work/aot-tree.err")
    others=$(grep -c "root tree[_c3]* (block [0-9,]*): cuModuleLoadDataEx" "$work/aot-tree.err")
    if [ $lib_rc = 0 ] && [ $jit_rc = 0 ] && cmp -s "$work/aot-tree.lib" "$work/aot-tree.jit" &&
       { { [ $b = 32 ] && [ "$others" = 0 ]; } || { [ $b != 32 ] && [ "$shaped" = 1 ]; }; }; then
        pass "tree, blocks of $b: $([ $b = 32 ] && echo "the general code" || echo "the code built for them"), the JIT's bits ($(cut -d' ' -f2- "$work/aot-tree.lib" | tr '\n' ' '))"
    else
        cat "$work/aot-tree.err"; diff "$work/aot-tree.lib" "$work/aot-tree.jit" | head -4
        fail "tree, blocks of $b from a library built with --block (exit $lib_rc, $jit_rc; shape roots loaded: $shaped of this shape, $others in all)"
    fi
done

echo "=== checked mode on cuda from libraries (--check)"
# Each golden program of a failed value check, built with --check (its
# checked cuda roots), reports under kjit run --check --target cuda what the
# JIT's checked cuda code reports for the .kern: the same text, or, where
# several threads fail and the first to record differs between runs, the
# same site and message with another block and thread.
checked_same=0 checked_site=0 checked_bad=0
for lib in "$libs"/checked_*.so; do
    [ -e "$lib" ] || continue
    name=$(basename "$lib" .so) name=${name#checked_}
    kern=$root/tests/golden/checks/$name.kern
    args=$(sed -n '1s|^// run: ||p' "$kern")
    # shellcheck disable=SC2086
    KJIT_STDLIB=$root/stdlib "$kjit" run --check --target cuda "$lib" $args > /dev/null 2> "$work/aot-check-$name.lib"
    lib_rc=$?
    # shellcheck disable=SC2086
    # from the root, by the relative path the library was built from (the
    # reports name the file as the compiler was given it)
    (cd "$root" && KJIT_STDLIB=$root/stdlib "$kjit" run --check --target cuda \
        "tests/golden/checks/$name.kern" $args) > /dev/null 2> "$work/aot-check-$name.jit"
    jit_rc=$?
    strip_thread() { sed -E 's/ in block \([0-9,]+\), thread \([0-9,]+\)//' "$1"; }
    if [ $lib_rc = 1 ] && [ $jit_rc = 1 ] && cmp -s "$work/aot-check-$name.lib" "$work/aot-check-$name.jit"; then
        checked_same=$((checked_same + 1))
    elif [ $lib_rc = 1 ] && [ $jit_rc = 1 ] && [ -s "$work/aot-check-$name.lib" ] &&
         cmp -s <(strip_thread "$work/aot-check-$name.lib") <(strip_thread "$work/aot-check-$name.jit"); then
        checked_site=$((checked_site + 1))
    else
        checked_bad=$((checked_bad + 1))
        echo "  $name: library (exit $lib_rc) against the JIT (exit $jit_rc):"
        diff "$work/aot-check-$name.lib" "$work/aot-check-$name.jit" | head -6 | sed 's/^/    /'
    fi
done
head -3 "$work/aot-check-index_kernel.lib" 2>/dev/null | sed 's/^/  (index_kernel from its library) /'
if [ $checked_bad = 0 ] && [ $((checked_same + checked_site)) -gt 0 ]; then
    pass "checked mode on cuda from libraries: $checked_same golden programs report what the JIT's checked cuda code reports, $checked_site the same site and message from another thread"
else
    fail "checked mode on cuda from libraries: $checked_bad of $((checked_same + checked_site + checked_bad)) report otherwise than the JIT"
fi

echo "=== latency: a new process's first call on cuda"
bench_rt=$root/bin/aot-bench-rt
bench_jit=$root/bin/aot-bench-jit
median() { sort -g | sed -n 3p; }
printf '| first call, cuda (ms, median of 5) | context creation | library (libkjit-rt): load + call | cold JIT: compile + call | warm disk cache: load + call |\n'
printf '| --- | --- | --- | --- | --- |\n'
latency_ok=1
for pair in add:add sin:vsin exp:vexp mandelbrot:mandel_kernel; do
    ex=${pair%%:*} fn=${pair#*:}
    for mode in lib cold warm; do
        : > "$work/aot-first-$mode.txt"
        for i in 1 2 3 4 5; do
            case $mode in
            lib) "$bench_rt" first --lib "$libs/lib$ex.so" "$fn" ;;
            cold) rm -rf "$work/aot-cache"; KJIT_CACHE_DIR=$work/aot-cache "$bench_jit" first --kern "$root/examples/$ex.kern" "$fn" ;;
            warm) KJIT_CACHE_DIR=$work/aot-cache "$bench_jit" first --kern "$root/examples/$ex.kern" "$fn" ;;
            esac >> "$work/aot-first-$mode.txt" || latency_ok=0
        done
        printf -v "cell_$mode" '%.2f' "$(cut -d' ' -f2 "$work/aot-first-$mode.txt" | median)"
    done
    ctx=$(cut -d' ' -f1 "$work/aot-first-lib.txt" | median)
    printf '| %s (%s) | %.1f | %s | %s | %s |\n' "$ex" "$fn" "$ctx" "$cell_lib" "$cell_cold" "$cell_warm"
done
[ $latency_ok = 1 ] && pass "first-call latency measured (goal: the library's load + call under 1 ms)" \
    || fail "first-call latency measured"

echo "=== the first call on cuda, step by step"
# add over 100,000 f32 from a new process, in the same steps: kjit from the
# library (aot-bench-rt steps; kjit_prepare loads the root's cubin), the
# JIT from the warm disk cache, and a CUDA C program built here with nvcc
# (tests/gpu/aot_first.cu): through the driver API with the same steps
# (its cubin, nvcc -cubin, read from a file), and through the runtime API
# (the module loaded lazily at the first launch).  What the CUDA C program
# pays every CUDA program pays; the difference is kjit's.  Median of 5
# processes per column; then kjit's own spans of one library load
# (KJIT_TRACE=1).
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
[ "$arch" = sm_ ] && arch=sm_90
anchor=0
if [ -x "$nvcc" ] &&
   "$nvcc" -cubin -arch="$arch" "$root/tests/gpu/aot_first.cu" -o "$work/aot_first_add.cubin" 2> "$work/aot-nvcc.err" &&
   "$nvcc" -O2 -arch="$arch" "$root/tests/gpu/aot_first.cu" -o "$work/aot_first" \
       -L"$(dirname "$nvcc")/../lib64/stubs" -lcuda 2>> "$work/aot-nvcc.err"; then
    anchor=1
else
    cat "$work/aot-nvcc.err" 2>/dev/null; echo "(no CUDA C anchor: nvcc at '$nvcc' failed or is missing)"
fi
steps_ok=1
: > "$work/aot-steps.txt"
for mode in lib warm driver runtime; do
    for i in 1 2 3 4 5; do
        case $mode in
        lib) "$bench_rt" steps --lib "$libs/libadd.so" ;;
        warm) KJIT_CACHE_DIR=$work/aot-cache "$bench_jit" steps --kern "$root/examples/add.kern" ;;
        driver) [ $anchor = 1 ] && "$work/aot_first" driver "$work/aot_first_add.cubin" ;;
        runtime) [ $anchor = 1 ] && "$work/aot_first" runtime ;;
        esac > "$work/aot-step.txt" 2>&1
        rc=$?
        if [ $rc = 0 ]; then grep -E '^(steps|driver|runtime) ' "$work/aot-step.txt" | sed "s/^[a-z]*/$mode/" >> "$work/aot-steps.txt"
        elif [ $anchor = 1 ] || [ "$mode" = lib ] || [ "$mode" = warm ]; then cat "$work/aot-step.txt"; steps_ok=0; fi
    done
done
python3 - "$work/aot-steps.txt" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault(f[0], []).append([float(x) for x in f[1:]])
def med(mode):
    return [statistics.median(c) for c in zip(*rows[mode])] if mode in rows else None
print("| first call of add, cuda (ms, median of 5) | context | library load / compile | code: module load + function | 1st cuMemAlloc | 2 more | 2 copies in | launch | synchronise | copy back | 3 frees | after the context |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for mode, label in (("lib", "kjit, library (libkjit-rt)"), ("warm", "kjit, JIT (warm disk cache)")):
    m = med(mode)
    if m:  # context, load, prepare, alloc1, alloc2, copies, launch, sync, back, frees, total
        print("| %s | %s |" % (label, " | ".join("%.3f" % x for x in m)))
m = med("driver")
if m:  # context, module, function, alloc1, alloc2, copies, launch, sync, back, frees, total
    print("| CUDA C, driver API (nvcc) | %.3f | - | %.3f | %s |" % (m[0], m[1] + m[2], " | ".join("%.3f" % x for x in m[3:])))
m = med("runtime")
if m:  # context, alloc1, alloc2, copies, launch, sync, back, frees, total
    print("| CUDA C, runtime API (nvcc) | %.3f | - | (lazy, in the launch) | %s |" % (m[0], " | ".join("%.3f" % x for x in m[1:])))
if "lib" in rows and "driver" in rows:
    lib, drv = med("lib"), med("driver")
    print("after the context: library %.3f ms, CUDA C (driver API, same steps) %.3f ms: kjit's part %.3f ms"
          % (lib[-1], drv[-1], lib[-1] - drv[-1]))
PY
echo "kjit's spans of one library load and first call (KJIT_TRACE=1):"
KJIT_TRACE=1 "$bench_rt" steps --lib "$libs/libadd.so" 2>&1 | sed 's/^/  /'
[ $steps_ok = 1 ] && pass "the first call's steps measured (library, JIT, CUDA C anchor: $([ $anchor = 1 ] && echo built || echo missing))" \
    || fail "the first call's steps measured"

echo "=== calls and launches from a library against the JIT"
if "$bench_jit" calls "$libs" "$root/examples" > "$work/aot-calls.txt" 2>&1; then
    cat "$work/aot-calls.txt"; pass "calls and launches from a library: host cost within 5% of the JIT's, same kernel time"
else
    cat "$work/aot-calls.txt"; fail "calls and launches from a library against the JIT"
fi
echo "library sizes (sse2 and sm_90 only):"
for f in "$libs"/*.so; do printf '  %s %d bytes\n' "$(basename "$f")" "$(stat -c %s "$f")"; done
finish
