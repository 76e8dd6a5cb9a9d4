#!/bin/sh
# limits.sh: what bounds a compile (run by `make test-cli`; docs/language.md,
# "Limits").  An expression deeper than 1000 operators is refused by the
# parser with a caret, however it is built (a left-associative chain, `**` or
# `?:` chains, chains nested in calls), never a crash; one at the limit, in
# 250 nested blocks, compiles and runs on 1 MB of stack, the bound that the
# limit is chosen for.
#
#   tests/cli/limits.sh build/kjit
. "$(dirname "$0")/lib.sh"
export KJIT_CACHE=off
show_err=3

# chain N [BLOCKS]: a kernel whose out[0] is x added N times to x, inside
# BLOCKS nested ifs (all true: x is 1)
chain() {
    python3 - "$@" <<'PY'
import sys
n = int(sys.argv[1]); blocks = int(sys.argv[2]) if len(sys.argv) > 2 else 0
print("@kernel\nfn k(out: f64[]) {\n    let x = out[1];")
print("if x > 0.0 {\n" * blocks, end="")
print("    out[0] = x")
for i in range(0, n, 20):
    print("        " + " ".join(["+ x"] * min(20, n - i)))
print("    ;")
print("}\n" * blocks, end="")
print("}")
PY
}

# refused NAME: $tmp/$NAME.kern is refused with the depth or nesting error
refused() {
    "$kjit" check "$tmp/$1.kern" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc = 1 ] && grep -q "$2" "$tmp/err" && grep -q '^ *\^$' "$tmp/err"; then ok
    else bad "$1: exit $rc (expected 1) and '$2' with a caret"; fi
}

chain 1001 >"$tmp/deep.kern"
refused deep 'expression nested too deeply (more than 1000'
chain 200000 >"$tmp/deeper.kern"
refused deeper 'expression nested too deeply (more than 1000'
# chains nested in calls: f(f(...) + x + ... + x) + x + ..., each chain 99
# operators long, 100 calls deep (each level a line, so that an error's
# excerpt is short)
python3 -c '
e = "x"
for i in range(100):
    e = "f(" + e + ")\n" + " + x" * 99
print("fn f(x: f64) -> f64 { return x; }")
print("fn g(x: f64) -> f64 { return " + e + "; }")' >"$tmp/calls.kern"
refused calls 'expression nested too deeply (more than 1000'
python3 -c 'print("fn f(x: f64) -> f64 { return " + "x ** " * 100000 + "x; }")' >"$tmp/pow.kern"
refused pow 'nested too deeply (more than 256 levels)'
python3 -c 'print("fn f(x: f64) -> f64 { return " + "x > 1.0 ? x : " * 100000 + "x; }")' \
    >"$tmp/ternary.kern"
refused ternary 'nested too deeply (more than 256 levels)'

# the deepest expression allowed, in 250 nested blocks, on a 1 MB stack
chain 1000 250 >"$tmp/limit.kern"
if (ulimit -s 1024 && "$kjit" run "$tmp/limit.kern" k ones:f64:4 --grid 1 --block 1 \
        >"$tmp/out" 2>"$tmp/err") && grep -q "max 1001 " "$tmp/out"; then ok
else bad "1000 operators deep in 250 blocks: runs on 1 MB of stack, out[0] = 1001"; fi

# Compile bombs (issue 23): no test is timed (loaded CI machines), but each
# runs under a generous `timeout 60` and the work is checked where it can be.
# (a) functions that each call the one before twice, 24 deep: 2^24 paths
# through the calls that uniform.c's walk for effects once took one by one
python3 -c '
print("fn g0(x: f64) -> f64 { return x * 1.5 + 1.0; }")
for i in range(1, 25):
    print("fn g%d(x: f64) -> f64 { return g%d(x) + g%d(x + 1.0); }" % (i, i - 1, i - 1))
print("@kernel\nfn k(out: f64[]) { out[0] = g24(out[0]); }")' >"$tmp/calls24.kern"
if timeout 60 "$kjit" run "$tmp/calls24.kern" k zeros:f64:4 --grid 1 --block 1 >"$tmp/out" 2>"$tmp/err"
then ok; else bad "24 levels of calls that double: compiles and runs within 60 s"; fi

# (b) barriers: 60 make a split form of 61 regions; 400 stay on fibers
# (KJ_SPLIT_MAX_REGIONS, 64), whose code grows linearly
barriers() {
    python3 -c '
import sys
print("@kernel\nfn k(out: f64[]) {\n    let i = threadIdx.x;\n    let s = 0.0;")
for j in range(int(sys.argv[1])):
    print("    s += out[i];\n    syncthreads();")
print("    out[i] = s;\n}")' "$1"
}
barriers 60 >"$tmp/b60.kern"
barriers 400 >"$tmp/b400.kern"
"$kjit" check --dump=vec "$tmp/b60.kern" >"$tmp/out" 2>"$tmp/err"
if [ "$(grep -c '^  threads$' "$tmp/out")" = 61 ]; then ok
else bad "60 barriers: a split form of 61 regions"; fi
"$kjit" check --dump=vec "$tmp/b400.kern" >"$tmp/out" 2>"$tmp/err"
if [ $? = 0 ] && ! grep -q '^  threads$' "$tmp/out"; then ok
else bad "400 barriers: no split form"; fi
if timeout 60 "$kjit" run "$tmp/b400.kern" k ones:f64:64 --grid 1 --block 64 >"$tmp/out" 2>"$tmp/err" &&
    grep -q "max 400 " "$tmp/out"; then ok
else bad "400 barriers: compiles and runs (on fibers) within 60 s, out[i] = 400"; fi

# (c) 10,000 stores into a local() array: past the size the back end takes
# (KJ_MAX_ROOT_NODES, 50,000 IR nodes; LLVM's time on it grows faster than
# the code), refused at once; KJIT_MAX_IR_NODES moves the bound
python3 -c '
print("@kernel\nfn k(out: f64[]) {\n    let a = local(f64, 10000);")
for j in range(10000):
    print("    a[%d] = out[0] + %d.0;" % (j, j))
print("    out[0] = a[3];\n}")' >"$tmp/stores.kern"
timeout 60 "$kjit" run "$tmp/stores.kern" k zeros:f64:4 --grid 1 --block 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 1 ] && grep -q "'k' is too large to compile: 80009 IR nodes" "$tmp/err"; then ok
else bad "10,000 stores: refused with the node count (exit $rc)"; fi
KJIT_MAX_IR_NODES=100 timeout 60 "$kjit" run "$tmp/calls24.kern" k zeros:f64:4 --grid 1 --block 1 \
    >"$tmp/out" 2>"$tmp/err"
if [ $? = 1 ] && grep -q "more than 100 " "$tmp/err"; then ok
else bad "KJIT_MAX_IR_NODES=100 refuses the 24 levels of calls"; fi

# a chain of 10,000 functions, each calling the one before (once 90 s in
# LLVM's inliner): refused at the 65th (KJ_MAX_CALL_DEPTH), defined in either
# order (the checker checks a callee defined later first, recursing)
python3 -c '
print("fn h0(x: f64) -> f64 { return x * 1.5; }")
for i in range(1, 10001):
    print("fn h%d(x: f64) -> f64 { return h%d(x) + 1.0; }" % (i, i - 1))' >"$tmp/chain.kern"
refused chain 'calls nested too deeply: this call starts a chain of more than 64 calls'
python3 -c '
for i in range(10000, 0, -1):
    print("fn h%d(x: f64) -> f64 { return h%d(x) + 1.0; }" % (i, i - 1))
print("fn h0(x: f64) -> f64 { return x * 1.5; }")' >"$tmp/reversed.kern"
refused reversed 'calls nested too deeply: this call starts a chain of more than 64 calls'

finish
