#!/usr/bin/env python3
"""gen.py: random, well-defined .kern programs for differential testing.

    python3 tests/genprog/gen.py --seed S --count N --out DIR [--libm] [--size small|normal]
                                 [--summary] [--require]

writes DIR/p<S+i>.kern for i < N.  The same seed always gives the same
program (random.Random(seed), nothing else).  Each program holds plain and
device functions, @kernel functions, and @vectorize, @guvectorize and
@reduce functions; every entry the runner (genprog_run.c) runs has a
directive comment above it:

    //! kernel NAME grid=GX,GY block=BX,BY arrays=LEN,LEN,...
    //! vectorize NAME n=COUNT [off=K]     (outputs K elements into their buffers)
    //! guvectorize NAME loop=L core=C
    //! reduce NAME n=COUNT

What makes a program well-defined (docs/language.md, "Behaviour left
unspecified"), by construction:
  - every array index is in range: array[(i64(e) & 0x7fffffff) % len(array)],
    shared arrays modulo the block's thread count;
  - integer / and % divide by ((e & 15) + 1); shift counts are (e & (bits-1));
    float-to-int conversions convert only f64 values tested to lie in the
    type's range (NaN fails every test: 0);
  - no races: a kernel thread writes only its own element of an output array
    (index g, its global id) and only its own slot of a shared array (index t,
    its id in the block); between two barriers a shared array is either
    written (each thread its own slot, read back only there) or read (any
    slot), never both; the first segment fills every slot unconditionally;
    barriers sit in uniform control flow only (the kernel's top level, loops
    with a uniform trip count, ifs on uniform scalars);
  - atomics go to the thread's own element (their old value used) or, for the
    commutative integer ones, to a histogram the kernel never reads (one
    operation per histogram: max and add do not commute with each other);
  - warp collectives run with whole warps (the block's thread count a
    multiple of 32), at a segment's top level, before any thread can return;
  - loops are bounded (constant or masked trip counts; while loops count).
Control flow and integers depend only on integers and "pure" f64 values (those
computed by + - * / sqrt floor ceil trunc from integers, f64 inputs and
literals), which the reference evaluator computes bit for bit as the targets
do; f32, f16, c64 and c128 values only flow into float results, compared with a
tolerance (ref_eval rounds each operation to the type, as the targets do, but
computes libm functions in double).  libm calls (sin, exp, ...) only
with --libm.
"""
import argparse
import os
import random
import sys

INTS = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64}
FLOATS = ["f32", "f64", "f16"]
COMPLEX = ["c64", "c128"]
SHFL_TYPES = ["i32", "u32", "i64", "u64", "f32", "f64"]
LIBM1 = ["sin", "cos", "exp", "log", "tanh", "atan", "cbrt", "expm1", "log1p", "erf"]
LIBM2 = ["atan2", "hypot", "pow"]
# The lowering's paths a program may reach (docs/testing.md, "Generated
# programs"): gen.py --summary counts them over the programs it writes, and
# --require makes it fail when one of them occurs in none (make test-genprog),
# so that a change to the generator cannot silently stop producing them.
PARTIAL_BLOCKS = (249, 257, 263)
ELEM_BYTES = {"i8": 1, "u8": 1, "i16": 2, "u16": 2, "f16": 2, "i32": 4, "u32": 4, "f32": 4,
              "i64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
FEATURES = [
    "straight_guarded",    # a kernel of one guarded straight line of up to six loads (the split form, gen_if_full_or_masked)
    "straight_thread_sum", # its guard written X + threadIdx.x < len(a) (checked mode drops the index checks)
    "guard_bound_var",     # ... its bounds variables of the region (`let m = len(a)`, known before it)
    "guard_early_return",  # ... its guard an early `if !(...) { return; }` (proofs from the negation)
    "rows_2d",             # a 2-D grid of 2-D blocks, 4 or more a grid row, no barrier (rows first)
    "edge_2d",             # ... whose last blocks in x and y hold threads outside the guard (x_split)
    "local_promoted",      # a local() array indexed only by constants and small constant loops (local_promote.c)
    "barrier_helper_call", # a device function with barriers called from a kernel (inline_barriers.c)
    "cond_accumulate",     # if-updates, selects and bools as numbers summed in a loop, i64 -> f64 of a count
    "reduce_partial",      # a @reduce of a count that leaves a partial last lane group (LANES' masked step)
    "vectorize_offset",    # a @vectorize whose output starts off a cache line, long enough to be cut at one
    "block_partial_chunk", # a block of 249, 257 or 263 threads: a partial last chunk of lanes
    "mma",                 # mma() in a kernel of whole warps (cpu's emulation)
    "loop_fission",        # a straight-line loop of 3 to 20 accumulators (codegen_simd_fission.c)
]


def is_int(t):
    return t in BITS


def signed(t):
    return t.startswith("i")


def int_range(t):
    b = BITS[t]
    return (-(1 << (b - 1)), (1 << (b - 1)) - 1) if signed(t) else (0, (1 << b) - 1)


class Var:
    def __init__(self, name, typ, pure, mutable=True, uniform=False):
        self.name, self.type, self.pure, self.mutable = name, typ, pure, mutable
        self.uniform = uniform  # the same in every thread of a block, whatever happens


class Ctx:
    """What the function being generated may use."""

    def __init__(self, kind):
        self.kind = kind            # "kernel", "plain", "device", "vectorize", "gu", "reduce"
        self.scopes = [[]]
        self.loop_depth = 0
        self.inputs = []            # (name, elem type): read anywhere
        self.outputs = []           # (name, elem type): own element only (index g)
        self.hists = []             # u32/i32/u64/i64 arrays for commutative atomics
        self.shared = []            # (name, elem type, ndim): see the segment modes
        self.shared_mode = {}       # name -> "w" (own slot) or "r" (any slot)
        self.locals = []            # (name, elem type, size)
        self.rets = []              # a @vectorize of several outputs: their types
        self.barriers_ok = False    # in uniform control flow of a kernel
        self.may_have_returned = False
        self.warp_ok = False        # whole warps: nt a multiple of 32
        self.divergent = 0          # inside thread-varying control flow
        self.ret = None             # return type of a plain function
        self.warp_kernel = False    # collectives (ref_eval models none: keep them apart)
        self.allow_return = False   # a kernel's early return (after the first barrier)
        self.ret_pure = False
        self.no_shared = False      # while the shared arrays are being filled
        self.sync_tiles = {}        # element type -> the shared array for barrier_helper's
        self.uniform_only = False   # an expression the same in every thread of the block
        self.own = "g"              # the output element a kernel thread owns

    def vars(self):
        for s in self.scopes:
            yield from s

    def push(self):
        self.scopes.append([])

    def pop(self):
        self.scopes.pop()


class Gen:
    def __init__(self, seed, libm=False, size="normal"):
        self.r = random.Random(seed)
        self.seed = seed
        self.libm = libm
        self.small = size == "small"
        self.counter = 0
        self.no_calls = 0           # > 0: no helper calls (integer min/max arguments)
        self.helpers = []           # (name, param types, ret type, pure result, device)
        self.sync_helpers = []      # (name, element type): device functions with barriers
        self.lines = []
        self.ind = 0
        self.features = {f: 0 for f in FEATURES}  # FEATURES: how many of each this program has

    # ------------------------------------------------------------ output
    def emit(self, text):
        self.lines.append("    " * self.ind + text)

    def feature(self, name):
        self.features[name] += 1

    def fresh(self, prefix):
        self.counter += 1
        return "%s%d" % (prefix, self.counter)

    def chance(self, p):
        return self.r.random() < p

    def pick(self, seq):
        return self.r.choice(seq)

    # ------------------------------------------------------------ literals
    def int_lit(self, t):
        lo, hi = int_range(t)
        k = self.r.randrange(10)
        if k < 5:
            v = self.r.randint(max(lo, -20), min(hi, 40))
        elif k < 7:
            v = self.pick([lo, hi, 0, 1, hi // 2 + 1, lo + 1 if lo else 1])
        else:
            v = self.r.randint(lo, hi)
        if t == "i64" and v == lo:
            return "(i64(-9223372036854775807) - i64(1))"
        return "%s(%d)" % (t, v)

    def real_lit(self, t, pure):
        k = self.r.randrange(12)
        if k < 6:
            v = "%.6g" % self.r.uniform(-8, 8)
        elif k < 8:
            v = "%d.0" % self.r.randint(-5, 5)
        elif k < 9:
            v = "%.4g" % (self.r.choice([-1, 1]) * 10 ** self.r.uniform(-4, 4))
        elif k < 10 and not pure:
            v = self.pick(["inf", "nan", "-inf", "-0.0"])
        else:
            v = "0.5"
        if "e" in v and "." not in v.split("e")[0]:
            v = v.replace("e", ".0e", 1)
        elif "." not in v and "inf" not in v and "nan" not in v:
            v += ".0"
        return "%s(%s)" % (t, v)

    # ------------------------------------------------------------ expressions
    def vars_of(self, ctx, t, pure):
        return [v for v in ctx.vars() if v.type == t and (v.pure or not pure)]

    def expr(self, ctx, t, pure, depth):
        """An expression of type t (pure: for integers, bools and pure f64)."""
        if t == "bool":
            return self.bool_expr(ctx, depth)
        if is_int(t):
            return self.int_expr(ctx, t, depth)
        if t in COMPLEX:
            return self.complex_expr(ctx, t, depth)
        return self.real_expr(ctx, t, pure, depth)

    def leaf(self, ctx, t, pure):
        if ctx.uniform_only:
            vs = [v for v in ctx.vars() if v.type == t and v.uniform]
            if vs and self.chance(0.7):
                return self.pick(vs).name
            return self.int_lit(t) if is_int(t) else self.real_lit(t, True)
        vs = self.vars_of(ctx, t, pure)
        reads = [a for a in ctx.inputs + ctx.outputs if a[1] == t and (not pure or t != "f64" or a[2])]
        k = self.r.randrange(10)
        if vs and k < 6:
            return self.pick(vs).name
        if reads and k < 8 and ctx.kind in ("kernel", "device", "gu"):
            return self.read_array(ctx, self.pick(reads))
        if vs and k < 8:
            return self.pick(vs).name
        if is_int(t):
            return self.int_lit(t)
        if t in COMPLEX:
            p = "f32" if t == "c64" else "f64"
            return "complex(%s, %s)" % (self.real_lit(p, pure), self.real_lit(p, pure))
        return self.real_lit(t, pure)

    def index_of(self, ctx, length_expr):
        e = self.int_expr(ctx, self.pick(INTS), 1)
        return "(i64(%s) & 0x7fffffff) %% %s" % (e, length_expr)

    def read_array(self, ctx, arr):
        name = arr[0]
        if (name, arr[1]) in [(o[0], o[1]) for o in ctx.outputs]:
            return "%s[%s]" % (name, ctx.own)   # own element only
        if ctx.kind == "gu":
            return "%s[%s]" % (name, self.index_of(ctx, "len(%s)" % name))
        return "%s[%s]" % (name, self.index_of(ctx, "len(%s)" % name))

    def shared_read(self, ctx, t):
        if ctx.no_shared:
            return None
        cands = [s for s in ctx.shared if s[1] == t]
        if not cands:
            return None
        s = self.pick(cands)
        if ctx.shared_mode.get(s[0]) == "w":
            return self.shared_own(s)
        if s[2] == 2:
            return "%s[%s, %s]" % (s[0], self.index_of(ctx, "i64(blockDim.y)"),
                                   self.index_of(ctx, "i64(blockDim.x)"))
        return "%s[%s]" % (s[0], self.index_of(ctx, "nt"))

    def shared_own(self, s):
        return "%s[threadIdx.y, threadIdx.x]" % s[0] if s[2] == 2 else "%s[t]" % s[0]

    def call_helper(self, ctx, t, pure, depth):
        if self.no_calls:
            return None
        hs = [h for h in self.helpers if h[2] == t and (h[3] or not pure) and
              (not h[4] or ctx.kind in ("kernel", "device"))]
        if not hs:
            return None
        h = self.pick(hs)
        args = [self.expr(ctx, pt, pp, depth - 1) for pt, pp in h[1]]
        return "%s(%s)" % (h[0], ", ".join(args))

    def int_expr(self, ctx, t, depth):
        if depth <= 0 or self.chance(0.25):
            if ctx.uniform_only:
                if ctx.kind == "kernel" and self.chance(0.2):
                    return "%s(%s)" % (t, self.pick(["blockIdx.x", "blockDim.x", "blockDim.y", "gridDim.x"]))
                return self.leaf(ctx, t, True)
            if ctx.kind in ("kernel", "device") and self.chance(0.15):
                return "%s(%s)" % (t, self.pick(["threadIdx.x", "threadIdx.y", "blockIdx.x", "t", "laneid()",
                                                 "blockDim.x"] if ctx.kind == "kernel" else
                                                ["threadIdx.x", "blockIdx.x", "laneid()"]))
            if ctx.kind == "kernel" and self.chance(0.1):
                sr = self.shared_read(ctx, t)
                if sr:
                    return sr
            return self.leaf(ctx, t, True)
        d = depth - 1
        k = self.r.randrange(20)
        a = lambda: self.int_expr(ctx, t, d)
        if k < 6:
            return "(%s %s %s)" % (a(), self.pick(["+", "-", "*", "&", "|", "^"]), a())
        if k < 8:
            return "(%s %s (%s & %d))" % (a(), self.pick(["<<", ">>"]), a(), BITS[t] - 1)
        if k < 10:
            return "(%s %s ((%s & 15) + %s))" % (a(), self.pick(["/", "%"]), a(), "%s(1)" % t)
        if k < 11:
            return "%s(%s)" % (t, self.int_expr(ctx, self.pick(INTS), d))
        if k < 12:
            x = self.real_expr(ctx, "f64", True, d)
            lo, hi = int_range(t)
            lo_s = "-1.0" if lo == 0 else "%.1f" % max(lo, -9.0e18)
            hi_s = "%.1f" % min(hi + 1, 9.0e18) if BITS[t] < 64 else ("9.0e18" if signed(t) else "1.8e19")
            return "%s((%s > %s && %s < %s) ? %s : 0.0)" % (t, x, lo_s, x, hi_s, x)
        if k < 13:
            return "(%s ? %s : %s)" % (self.bool_expr(ctx, d), a(), a())
        if k < 14:
            # integer min/max evaluate an argument twice, and the checker refuses
            # one with effects: leaves, and no helper call in an index inside them
            self.no_calls += 1
            e = "%s(%s, %s)" % (self.pick(["min", "max"]), self.int_expr(ctx, t, 0), self.int_expr(ctx, t, 0))
            self.no_calls -= 1
            return e
        if k < 15 and BITS[t] >= 32:
            return "mulhi(%s, %s)" % (a(), a())
        if k < 16:
            return "(%s %s)" % (self.pick(["~", "-"]), a())
        if k < 17:
            return "(%s ** %d)" % (a(), self.r.randint(0, 3))
        if k < 18:
            c = self.call_helper(ctx, t, True, d)
            if c:
                return c
        return self.int_expr(ctx, t, 0)

    def warp_stmt(self, ctx):
        """A warp collective, at a segment's top level: every lane of the warp there."""
        name = self.fresh("wp")
        k = self.r.randrange(5)
        if k == 4:
            # the warp's 8x4 by 4x8 f64 product (cpu: the lanes' emulation)
            self.feature("mma")
            m1 = self.fresh("wp")
            args = ", ".join(self.expr(ctx, "f64", False, 1) for _ in range(4))
            self.emit("let %s, %s = mma(%s);" % (name, m1, args))
            ctx.scopes[-1].append(Var(name, "f64", False))
            ctx.scopes[-1].append(Var(m1, "f64", False))
            return
        if k < 2:
            t = self.pick(SHFL_TYPES)
            pure = is_int(t) or (t == "f64" and self.chance(0.5))
            op = self.pick(["shfl", "shfl_up", "shfl_down", "shfl_xor"])
            self.emit("let %s: %s = %s(%s, (%s & 31));" % (name, t, op, self.expr(ctx, t, pure, 2),
                                                           self.int_expr(ctx, "i32", 1)))
            ctx.scopes[-1].append(Var(name, t, pure))
        elif k < 3:
            self.emit("let %s: u32 = ballot(%s);" % (name, self.bool_expr(ctx, 1)))
            ctx.scopes[-1].append(Var(name, "u32", True))
        else:
            self.emit("let %s: i32 = i32(%s(%s));" % (name, self.pick(["any_sync", "all_sync"]), self.bool_expr(ctx, 1)))
            ctx.scopes[-1].append(Var(name, "i32", True))

    def bool_expr(self, ctx, depth):
        k = self.r.randrange(12)
        d = depth - 1
        if depth <= 0 or k < 5:
            t = self.pick(INTS)
            return "(%s %s %s)" % (self.int_expr(ctx, t, max(d, 0)), self.pick(["<", "<=", ">", ">=", "==", "!="]),
                                   self.int_expr(ctx, t, max(d, 0)))
        if k < 7:
            return "(%s %s %s)" % (self.real_expr(ctx, "f64", True, d), self.pick(["<", "<=", ">", "==", "!="]),
                                   self.real_expr(ctx, "f64", True, d))
        if k < 8:
            return "%s(%s)" % (self.pick(["isnan", "isinf", "isfinite"]), self.real_expr(ctx, "f64", True, d))
        if k < 10:
            return "(%s %s %s)" % (self.bool_expr(ctx, d), self.pick(["&&", "||"]), self.bool_expr(ctx, d))
        return "(!%s)" % self.bool_expr(ctx, d)

    def real_expr(self, ctx, t, pure, depth):
        if depth <= 0 or self.chance(0.25):
            if ctx.kind == "kernel" and self.chance(0.1):
                sr = self.shared_read(ctx, t)
                if sr and (not pure or t != "f64" or False):
                    return sr
            return self.leaf(ctx, t, pure)
        d = depth - 1
        a = lambda: self.real_expr(ctx, t, pure, d)
        k = self.r.randrange(20)
        if k < 7:
            return "(%s %s %s)" % (a(), self.pick(["+", "-", "*", "/"]), a())
        if k < 8:
            return "(%s %% %s)" % (a(), a())
        if k < 10:
            return "%s(%s)" % (self.pick(["sqrt", "floor", "ceil", "trunc", "abs"]), a())
        if k < 11:
            return "%s(%s)" % (t, self.int_expr(ctx, self.pick(INTS), d))
        if k < 12 and not pure:
            src = self.pick([x for x in FLOATS if x != t] or FLOATS)
            return "%s(%s)" % (t, self.real_expr(ctx, src, False, d))
        if k < 13:
            return "(%s ? %s : %s)" % (self.bool_expr(ctx, d), a(), a())
        if k < 14 and not pure:
            return "%s(%s, %s)" % (self.pick(["min", "max", "copysign"]), a(), a())
        if k < 15 and not pure:
            return "fma(%s, %s, %s)" % (a(), a(), a())
        if k < 16 and not pure:
            c = "c64" if t != "f64" else "c128"
            z = self.complex_expr(ctx, c, d)
            part = "(%s).%s" % (z, self.pick(["real", "imag"]))
            return part if t != "f16" else "f16(%s)" % part
        if k < 17:
            c = self.call_helper(ctx, t, pure, d)
            if c:
                return c
        if k < 18 and self.libm and not pure:
            if self.chance(0.7):
                return "%s(%s)" % (self.pick(LIBM1), a())
            return "%s(%s, %s)" % (self.pick(LIBM2), a(), a())
        if k < 20 and not pure and t == "f64" and self.chance(0.5):
            return "f64(%s)" % self.real_expr(ctx, "f32", False, d)
        return self.leaf(ctx, t, pure)

    def complex_expr(self, ctx, t, depth):
        p = "f32" if t == "c64" else "f64"
        if depth <= 0 or self.chance(0.25):
            return self.leaf(ctx, t, False)
        d = depth - 1
        a = lambda: self.complex_expr(ctx, t, d)
        k = self.r.randrange(10)
        if k < 4:
            return "(%s %s %s)" % (a(), self.pick(["+", "-", "*", "/"]), a())
        if k < 6:
            return "complex(%s, %s)" % (self.real_expr(ctx, p, False, d), self.real_expr(ctx, p, False, d))
        if k < 7:
            return "conj(%s)" % a()
        if k < 8:
            return "(%s * %s)" % (a(), self.real_expr(ctx, p, False, d))
        if k < 9 and t == "c128":
            return "c128(%s)" % self.complex_expr(ctx, "c64", d)
        if k < 10 and self.libm:
            return "%s(%s)" % (self.pick(["exp", "sqrt", "log"]), a())
        return "(%s ** %d)" % (a(), self.r.randint(-2, 3))

    # ------------------------------------------------------------ statements
    def any_type(self):
        k = self.r.randrange(10)
        if k < 5:
            return self.pick(INTS)
        if k < 8:
            return self.pick(FLOATS)
        return self.pick(COMPLEX)

    def declare(self, ctx, depth=3):
        t = self.any_type()
        pure = is_int(t) or (t == "f64" and self.chance(0.5))
        name = self.fresh("v")
        self.emit("let %s: %s = %s;" % (name, t, self.expr(ctx, t, pure, depth)))
        ctx.scopes[-1].append(Var(name, t, pure))

    def assign(self, ctx):
        vs = [v for v in ctx.vars() if v.mutable]
        if not vs:
            return self.declare(ctx)
        v = self.pick(vs)
        e = self.expr(ctx, v.type, v.pure, 3)
        if is_int(v.type) and self.chance(0.4):
            self.emit("%s %s= %s;" % (v.name, self.pick(["+", "-", "*", "^", "|", "&"]), e))
        elif v.type in FLOATS + COMPLEX and self.chance(0.3):
            self.emit("%s %s= %s;" % (v.name, self.pick(["+", "-", "*"]), e))
        else:
            self.emit("%s = %s;" % (v.name, e))

    def store(self, ctx):
        """A kernel's store: its own element of an output, or its shared slot."""
        choices = []
        if ctx.outputs:
            choices.append("out")
        ws = [s for s in ctx.shared if ctx.shared_mode.get(s[0]) == "w"]
        if ws:
            choices.append("shared")
        if ctx.locals:
            choices.append("local")
        if not choices:
            return self.assign(ctx)
        c = self.pick(choices)
        if c == "out":
            o = self.pick(ctx.outputs)
            op = "=" if o[1] in ("f16",) or self.chance(0.7) else ("+=" if o[1] != "bool" else "=")
            self.emit("%s[%s] %s %s;" % (o[0], ctx.own, op, self.expr(ctx, o[1], o[2], 3)))
        elif c == "shared":
            s = self.pick(ws)
            self.emit("%s = %s;" % (self.shared_own(s), self.expr(ctx, s[1], False, 3)))
        else:
            l = self.pick(ctx.locals)
            self.emit("%s[%s] = %s;" % (l[0], self.index_of(ctx, str(l[2])), self.expr(ctx, l[1], l[3], 3)))

    def atomic(self, ctx):
        own = [o for o in ctx.outputs if o[1] in ("i32", "u32", "i64", "u64", "f32", "f64")]
        if own and (not ctx.hists or self.chance(0.5)):
            o = self.pick(own)
            ints = is_int(o[1])
            ops = ["atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_exch"]
            if ints:
                ops += ["atomic_and", "atomic_or", "atomic_xor", "atomic_cas"]
            if o[1] in ("u32", "u64"):
                ops += ["atomic_inc", "atomic_dec"]
            op = self.pick(ops)
            v = self.expr(ctx, o[1], o[2], 2)
            args = "%s, %s, %s" % (o[0], ctx.own, v)
            if op == "atomic_cas":
                args = "%s, %s, %s, %s" % (o[0], ctx.own, self.expr(ctx, o[1], True, 1), v)
            name = self.fresh("a")
            self.emit("let %s = %s(%s);" % (name, op, args))
            ctx.scopes[-1].append(Var(name, o[1], o[2] or ints, mutable=True))
        elif ctx.hists:
            h = self.pick(ctx.hists)
            op = h[2]
            self.emit("%s(%s, %s, %s);" % (op, h[0], self.index_of(ctx, "len(%s)" % h[0]),
                                          self.expr(ctx, h[1], True, 2)))
        else:
            self.assign(ctx)

    def block(self, ctx, n, depth):
        ctx.push()
        self.ind += 1
        for _ in range(n):
            self.stmt(ctx, depth)
        self.ind -= 1
        ctx.pop()

    def uniform_expr(self, ctx, t, depth):
        ctx.uniform_only = True
        e = self.int_expr(ctx, t, depth)
        ctx.uniform_only = False
        return e

    def uniform_stmt(self, ctx):
        """A variable the same in every thread: declared, or changed, in uniform
        control flow from uniform values (scalars, blockIdx, other such)."""
        us = [v for v in ctx.vars() if v.uniform and v.name not in ("nt",) and getattr(v, "decl_uniform", False)]
        if us and self.chance(0.5):
            v = self.pick(us)
            self.emit("%s %s= %s;" % (v.name, self.pick(["", "+", "^", "*"]), self.uniform_expr(ctx, v.type, 2)))
            return
        t = self.pick(INTS)
        name = self.fresh("uv")
        self.emit("let %s: %s = %s;" % (name, t, self.uniform_expr(ctx, t, 2)))
        v = Var(name, t, True, mutable=False, uniform=True)
        v.decl_uniform = True
        ctx.scopes[-1].append(v)

    def stmt(self, ctx, depth):
        if ctx.kind == "kernel" and ctx.warp_ok and not ctx.divergent and self.chance(0.12):
            return self.warp_stmt(ctx)
        if ctx.kind == "kernel" and not ctx.divergent and self.chance(0.12):
            return self.uniform_stmt(ctx)
        k = self.r.randrange(24)
        if k < 5:
            return self.declare(ctx)
        if k < 9:
            return self.assign(ctx)
        if k < 12 and ctx.kind == "kernel":
            return self.store(ctx)
        if k < 13 and ctx.kind == "kernel":
            return self.atomic(ctx)
        if depth <= 0:
            return self.assign(ctx)
        n = self.r.randint(1, 2 if self.small else 4)
        if k < 16:
            self.emit("if %s {" % self.bool_expr(ctx, 2))
            ctx.divergent += 1
            self.block(ctx, n, depth - 1)
            if self.chance(0.4):
                self.emit("} else {")
                self.block(ctx, n, depth - 1)
            ctx.divergent -= 1
            self.emit("}")
            return
        if k < 19:
            i = self.fresh("it")
            tb = self.pick(INTS)
            k2 = self.r.randrange(3)
            if k2 == 0:
                rng = "range(%d)" % self.r.randint(0, 6)
                it = "i64"
            elif k2 == 1:
                rng = "range((%s & %s(7)))" % (self.int_expr(ctx, tb, 1), tb)
                it = tb
            else:
                rng = "range((%s & %s(3)), (%s & %s(7)))" % (self.int_expr(ctx, tb, 1), tb, self.int_expr(ctx, tb, 1), tb)
                it = tb
            self.emit("for %s in %s {" % (i, rng))
            ctx.divergent += 1
            ctx.loop_depth += 1
            ctx.push()
            ctx.scopes[-1].append(Var(i, it, True, mutable=False))
            self.loop_body(ctx, n, depth)
            ctx.pop()
            ctx.loop_depth -= 1
            ctx.divergent -= 1
            self.emit("}")
            return
        if k < 21:
            w = self.fresh("w")
            self.emit("let %s: i32 = 0;" % w)
            self.emit("while %s < %d {" % (w, self.r.randint(1, 6)))
            self.ind += 1
            self.emit("%s += 1;" % w)
            self.ind -= 1
            ctx.divergent += 1
            ctx.loop_depth += 1
            ctx.scopes[-1].append(Var(w, "i32", True, mutable=False))
            self.loop_body(ctx, n, depth)
            ctx.loop_depth -= 1
            ctx.divergent -= 1
            self.emit("}")
            return
        if k < 22 and ctx.kind == "kernel" and ctx.allow_return:
            self.emit("if %s {" % self.bool_expr(ctx, 1))
            self.ind += 1
            self.emit("return;")
            self.ind -= 1
            self.emit("}")
            ctx.may_have_returned = True
            ctx.warp_ok = False
            return
        if k < 23 and ctx.ret is not None:
            self.emit("if %s {" % self.bool_expr(ctx, 1))
            self.ind += 1
            if len(ctx.rets) > 1:  # a @vectorize of several outputs returns them all
                self.emit("return (%s);" % ", ".join(self.expr(ctx, t, is_int(t), 2) for t in ctx.rets))
            else:
                self.emit("return %s;" % self.expr(ctx, ctx.ret, ctx.ret_pure, 2))
            self.ind -= 1
            self.emit("}")
            return
        return self.declare(ctx)

    def loop_body(self, ctx, n, depth):
        self.ind += 1
        ctx.push()
        for _ in range(n):
            if self.chance(0.15):
                self.emit("if %s { %s; }" % (self.bool_expr(ctx, 1), self.pick(["break", "continue"])))
            self.stmt(ctx, depth - 1)
        ctx.pop()
        self.ind -= 1

    # ------------------------------------------------------------ lowering paths
    # Kernels of the shapes newer lowering paths look for (FEATURES): the
    # random kernels above almost never take them.
    def special_kernel(self):
        k = self.r.randrange(5)
        if k == 0:
            self.straight_kernel()
        elif k == 1:
            self.rows_kernel()
        elif k == 2:
            self.promote_kernel()
        elif k == 3:
            self.accumulate_kernel()
        else:
            self.fission_kernel()

    def straight_kernel(self):
        """One guarded straight line of up to six loads: the split form of a
        kernel without barriers, the guard tested once a block, whole chunks
        plain (gen_if_full_or_masked), checked mode's guards."""
        name = self.fresh("k")
        t = self.pick(["f64", "f32", "i32", "i64", "u8", "i16", "u32"])
        bx = self.pick([32, 64, 100, 249, 256, 257, 263, 16, 7])
        gx = self.r.randint(1, 4)
        nthreads = gx * bx
        if bx in PARTIAL_BLOCKS:
            self.feature("block_partial_chunk")
        nin = self.r.randint(1, 3)
        ins = [self.fresh("in") for _ in range(nin)]
        # inputs a little shorter or longer than the grid: edge blocks
        lens = [max(3, nthreads - self.r.randint(-4, bx + 2)) for _ in ins]
        nout = self.r.randint(1, 2)
        outs = [self.fresh("out") for _ in range(nout)]
        params = ["%s: %s[]" % (n, t) for n in ins + outs]
        scal = None
        if self.chance(0.5):
            scal = self.fresh("s")
            params.append("%s: %s" % (scal, t))
        form = self.r.randrange(3)
        self.emit("//! kernel %s grid=%d,1 block=%d,1 arrays=%s" % (
            name, gx, bx, ",".join(map(str, lens + [nthreads] * nout))))
        self.emit("@kernel")
        self.emit("fn %s(%s) {" % (name, ", ".join(params)))
        self.ind += 1
        if form == 0:
            self.emit("let i = grid(1);")
            ix = "i"
        elif form == 1:
            self.emit("let b = i64(blockIdx.x) * i64(blockDim.x);")
            ix = "(b + i64(threadIdx.x))"
            self.feature("straight_thread_sum")
        else:
            self.emit("let i = i64(threadIdx.x) + i64(blockIdx.x) * i64(blockDim.x);")
            ix = "i"
        wide = self.chance(0.5)   # a[i - 1] and a[i + 1] too
        extent = {n: "len(%s)" % n for n in ins}
        if self.chance(0.4):
            # the bounds in variables of the region, assigned before the guard
            for n in ins:
                extent[n] = self.fresh("m")
                self.emit("let %s = len(%s);" % (extent[n], n))
            self.feature("guard_bound_var")
        conds = []
        for n in ins:
            if wide:
                conds.append(self.pick(["%s + 1 < %s" % (ix, extent[n]), "%s - 1 > %s" % (extent[n], ix)]))
            else:
                conds.append("%s < %s" % (ix, extent[n]))
        if wide:
            conds.insert(0, "%s >= 1" % ix)
        loads = []
        for _ in range(self.r.randint(1, 6)):
            n = self.pick(ins)
            d = self.pick([-1, 0, 1]) if wide else 0
            loads.append("%s[%s%s]" % (n, ix, {-1: " - 1", 0: "", 1: " + 1"}[d]))
        if self.chance(0.2):
            # one load its guard does not cover: checked mode keeps (batches) its test
            n = self.pick(ins)
            loads.append("%s[(%s * 7 + 3) %% len(%s)]" % (n, ix, n))
        early = self.chance(0.3)
        if early:
            # the threads outside leave first: the guard's negation holds after it
            if self.chance(0.5):
                self.emit("if !(%s) { return; }" % " && ".join(conds))
            else:
                flip = {" < ": " >= ", " >= ": " < ", " > ": " <= "}
                outside = []
                for c in conds:
                    op = next(o for o in flip if o in c)
                    outside.append(c.replace(op, flip[op], 1))
                self.emit("if %s { return; }" % " || ".join(outside))
            self.feature("guard_early_return")
        else:
            self.emit("if %s {" % " && ".join(conds))
            self.ind += 1
        lits = [scal] if scal else []
        lits.append(self.int_lit(t) if is_int(t) else self.real_lit(t, True))
        for j, o in enumerate(outs):
            part = loads if j == 0 else loads[:2]
            e = part[0]
            for x in part[1:] + ([self.pick(lits)] if self.chance(0.6) else []):
                e = "(%s %s %s)" % (e, self.pick(["+", "-", "*"]), x)
            self.emit("%s[%s] %s %s;" % (o, ix, "=" if self.chance(0.8) else "+=", e))
        if not early:
            self.ind -= 1
            self.emit("}")
        self.ind -= 1
        self.emit("}")
        self.emit("")
        self.feature("straight_guarded")

    def rows_kernel(self):
        """A 2-D grid of 2-D blocks, at least 4 a grid row, no barrier: the
        rows-first walk (kj_codegen_rows_first); an extent that is not a
        multiple of the block gives edge blocks (split_specialise.c's x_split)."""
        name = self.fresh("k")
        t = self.pick(["f64", "f32", "i32", "i64", "u8", "u16"])
        bx, by = self.pick([(32, 8), (16, 4), (8, 8), (33, 3), (7, 5), (64, 2), (16, 2)])
        gx, gy = self.r.randint(4, 6), self.r.randint(1, 3)
        W = gx * bx - (self.r.randint(1, bx - 1) if self.chance(0.6) and bx > 1 else 0)
        H = gy * by - (self.r.randint(1, by - 1) if self.chance(0.5) and by > 1 else 0)
        if W % bx or H % by:
            self.feature("edge_2d")
        nthreads = gx * bx * gy * by
        nin = self.r.randint(1, 2)
        ins = [self.fresh("in") for _ in range(nin)]
        out = self.fresh("out")
        self.emit("//! kernel %s grid=%d,%d block=%d,%d arrays=%s" % (
            name, gx, gy, bx, by, ",".join(map(str, [W * H + self.r.randint(0, 5) for _ in ins] + [nthreads]))))
        self.emit("@kernel")
        self.emit("fn %s(%s) {" % (name, ", ".join("%s: %s[]" % (n, t) for n in ins + [out])))
        self.ind += 1
        self.emit("let j, i = grid(2);")
        self.emit("if i < %d && j < %d {" % (H, W))
        self.ind += 1
        e = "%s[i * %d + j]" % (ins[0], W)
        for _ in range(self.r.randint(0, 3)):
            x = self.pick(["%s[i * %d + j]" % (self.pick(ins), W),
                           self.int_lit(t) if is_int(t) else self.real_lit(t, True)])
            e = "(%s %s %s)" % (e, self.pick(["+", "-", "*"]), x)
        self.emit("%s[i * %d + j] = %s;" % (out, W, e))
        self.ind -= 1
        self.emit("}")
        self.ind -= 1
        self.emit("}")
        self.emit("")
        self.feature("rows_2d")

    def block_shape(self, shapes):
        """One of shapes (bx, by) and 1 to 3 blocks: bx, by, the blocks, the
        threads of a block and of the grid."""
        bx, by = self.pick(shapes)
        gx = self.r.randint(1, 3)
        nt = bx * by
        if nt in PARTIAL_BLOCKS:
            self.feature("block_partial_chunk")
        return bx, by, gx, nt, gx * nt

    def abg_kernel(self, name, t, shape, lengths):
        """The directive and opening of a kernel name(a, b, out) of element
        type t, shape (blocks, bx, by), arrays of lengths; then its thread
        t, the block's threads nt and the grid's thread g."""
        self.emit("//! kernel %s grid=%d,1 block=%d,%d arrays=%d,%d,%d" % ((name,) + shape + lengths))
        self.emit("@kernel")
        self.emit("fn %s(a: %s[], b: %s[], out: %s[]) {" % (name, t, t, t))
        self.ind += 1
        self.emit("let t = i64(threadIdx.x) + i64(blockDim.x) * i64(threadIdx.y);")
        self.emit("let nt = i64(blockDim.x) * i64(blockDim.y);")
        self.emit("let g = i64(blockIdx.x) * nt + t;")

    def b_source(self, t, nt, barrier, shift):
        """b's element for step k of a loop: with a barrier, from a shared
        tile of b that each thread fills (emitted here); else from b."""
        if not barrier:
            return "b[(g + k) % len(b)]"
        self.emit("let tile = shared(%s, %d);" % (t, nt))
        self.emit("tile[t] = b[g % len(b)];")
        self.emit("syncthreads();")
        return "tile[(t + k%s) %% nt]" % shift

    def promote_kernel(self):
        """A local() array indexed only by constants and the variables of small
        constant loops: local_promote.c unrolls those loops and makes each
        element a register; with a barrier, the elements live across it."""
        name = self.fresh("k")
        t = self.pick(["f64", "f32", "i32", "i64"])
        bx, by, gx, nt, nthreads = self.block_shape([(16, 1), (32, 1), (64, 1), (8, 4), (16, 4), (257, 1),
                                                     (100, 1)])
        rows = self.r.randint(1, 4)
        cols = self.r.randint(1, 4) if self.chance(0.4) else 0
        dims = "%d, %d" % (rows, cols) if cols else "%d" % rows
        la = self.r.randint(1, 300)
        self.abg_kernel(name, t, (gx, bx, by), (la, la, nthreads))
        self.emit("let acc = local(%s, %s);" % (t, dims))
        lit = lambda: self.int_lit(t) if is_int(t) else self.real_lit(t, True)
        if cols:
            self.emit("for q in range(%d) { for r in range(%d) { acc[q, r] = %s; } }" % (rows, cols, lit()))
            el, idx = "acc[q, r]", "(g * %d + q * %d + r + k)" % (rows * cols, cols)
            loops = ("for q in range(%d) {" % rows, "for r in range(%d) {" % cols)
        else:
            self.emit("for q in range(%d) { acc[q] = %s; }" % (rows, lit()))
            el, idx = "acc[q]", "(g * %d + q + k)" % rows
            loops = ("for q in range(%d) {" % rows,)
        src_a = "a[%s %% len(a)]" % idx
        barrier = self.chance(0.5)
        src_b = self.b_source(t, nt, barrier, " + q")
        self.emit("for k in range(%d) {" % self.r.randint(1, 4))
        self.ind += 1
        for l in loops:
            self.emit(l)
            self.ind += 1
        op = self.pick(["+", "-"]) if not is_int(t) else self.pick(["+", "^", "-"])
        self.emit("%s %s= %s * %s;" % (el, op, src_a, src_b))
        for l in loops:
            self.ind -= 1
            self.emit("}")
        self.ind -= 1
        self.emit("}")
        if barrier and self.chance(0.5):
            self.emit("syncthreads();")
            self.emit("acc[0%s] += tile[(t + 1) %% nt];" % (", 0" if cols else ""))
        terms = ["acc[%d, %d]" % (q, r) for q in range(rows) for r in range(cols)] if cols else \
            ["acc[%d]" % q for q in range(rows)]
        self.emit("out[g] = %s;" % " + ".join(terms))
        self.ind -= 1
        self.emit("}")
        self.emit("")
        self.feature("local_promoted")

    def fission_kernel(self):
        """A loop of 3 to 20 accumulators and the temporaries they share, in
        a straight line (a register block): codegen_simd_fission.c runs it as
        loops over groups of them where they need more vector registers than
        the host has (the avx2 children's 16 from 13 or so of them; any with
        KJIT_SIMD_FISSION_REGISTERS=4).  An accumulator that reads another
        joins its group; a temporary read after the loop takes its value from
        the last loop; with a barrier the accumulators live in the split
        form's per-thread arrays."""
        name = self.fresh("k")
        t = self.pick(["f64", "f64", "f32", "i32", "i64"])
        bx, by, gx, nt, nthreads = self.block_shape([(16, 1), (32, 1), (8, 4), (16, 2), (64, 1), (257, 1)])
        m = self.r.randint(3, 20)
        la = self.r.randint(1, 300)
        self.abg_kernel(name, t, (gx, bx, by), (la, self.r.randint(1, 300), nthreads))
        lit = lambda: self.int_lit(t) if is_int(t) else self.real_lit(t, True)
        barrier = self.chance(0.5)
        for i in range(m):
            if barrier or self.chance(0.5):
                self.emit("let s%d: %s = a[(g + %d) %% len(a)];" % (i, t, i))
            else:
                self.emit("let s%d: %s = %s;" % (i, t, lit()))
        self.emit("let last: %s = %s;" % (t, lit()))
        src_b = self.b_source(t, nt, barrier, "")
        if self.chance(0.5):
            bounds = "%d" % self.r.randint(1, 20)
        else:
            lo = self.r.randint(0, 5)
            bounds = "%d, %d, %d" % (lo, lo + self.r.randint(1, 30), self.r.randint(1, 4))
        self.emit("for k in range(%s) {" % bounds)
        self.ind += 1
        self.emit("let x = a[(g * 3 + k) % len(a)];")
        self.emit("let y = %s;" % src_b)
        ops = ["+", "-", "^"] if is_int(t) else ["+", "-"]
        for i in range(m):
            form = self.r.randrange(4)
            op = self.pick(ops)
            if form == 0:
                rhs = "x * y"
            elif form == 1:
                rhs = self.pick(["x", "y"])
            elif form == 2 or i == 0:
                rhs = "x * %s" % lit()
            else:
                rhs = "s%d" % self.r.randrange(i) # joins that accumulator's group
            self.emit("s%d = s%d %s %s;" % (i, i, op, rhs))
        if self.chance(0.5):
            self.emit("last = x - y;")
        self.ind -= 1
        self.emit("}")
        if barrier and self.chance(0.5):
            self.emit("syncthreads();")
            self.emit("s0 += tile[(t + 1) % nt];")
        self.emit("out[g] = %s + last;" % " + ".join("s%d" % i for i in range(m)))
        self.ind -= 1
        self.emit("}")
        self.emit("")
        self.feature("loop_fission")

    def accumulate_kernel(self):
        """Conditional accumulation in a block-strided loop, the three ways a
        user writes it (tests/bench/bins.kern): an if around the updates, a
        select, the test's bools as numbers; then i64 -> f64 of the count."""
        name = self.fresh("k")
        bx = self.pick([32, 64, 100, 249, 256, 257, 263])
        gx = self.r.randint(1, 3)
        nthreads = gx * bx
        if bx in PARTIAL_BLOCKS:
            self.feature("block_partial_chunk")
        t = self.pick(["f64", "f64", "i64", "i32"])
        lo = "%s(blockIdx.x) * %s - %s" % (t, "0.75" if t == "f64" else "3", "1.0" if t == "f64" else "2")
        self.emit("//! kernel %s grid=%d,1 block=%d,1 arrays=%d,%d,%d" % (
            name, gx, bx, self.r.randint(1, 3000), nthreads, nthreads))
        self.emit("@kernel")
        self.emit("fn %s(data: %s[], sums: %s[], counts: i64[]) {" % (name, t, t))
        self.ind += 1
        self.emit("let t = i64(threadIdx.x);")
        self.emit("let g = i64(blockIdx.x) * i64(blockDim.x) + t;")
        self.emit("let r1: %s = %s;" % (t, lo))
        self.emit("let r2: %s = r1 + %s;" % (t, "2.5" if t == "f64" else "%s(9)" % t))
        self.emit("let s: %s = %s;" % (t, "0.0" if t == "f64" else "%s(0)" % t))
        self.emit("let c: i64 = 0;")
        self.emit("for i in range(t, len(data), %s) {" % self.pick(["i64(blockDim.x)", str(bx)]))
        self.ind += 1
        self.emit("let r = data[i];")
        form = self.r.randrange(3)
        if form == 0:
            self.emit("if r1 <= r && r < r2 {")
            self.emit("    s += r;")
            self.emit("    c += 1;")
            self.emit("}")
        elif form == 1:
            self.emit("let inside = r1 <= r && r < r2;")
            self.emit("s += inside ? r : %s;" % ("0.0" if t == "f64" else "%s(0)" % t))
            self.emit("c += inside ? 1 : 0;")
        else:
            self.emit("let inside = i64(r1 <= r) * i64(r < r2);")
            self.emit("s += %s(inside) * r;" % t)
            self.emit("c += inside;")
        self.ind -= 1
        self.emit("}")
        if t == "f64":
            self.emit("sums[g] = s + f64(c) * 0.5;")
        else:
            self.emit("sums[g] = s + %s(c);" % t)
        self.emit("counts[g] = c;")
        self.ind -= 1
        self.emit("}")
        self.emit("")
        self.feature("cond_accumulate")

    # ------------------------------------------------------------ functions
    def helper(self, device):
        name = self.fresh("h")
        nparams = self.r.randint(1, 3)
        ret = self.pick(INTS + ["f64", "f64", "f32", "c128"])
        pure = is_int(ret) or (ret == "f64" and self.chance(0.5))
        params = []
        ctx = Ctx("device" if device else "plain")
        for _ in range(nparams):
            pt = self.pick(INTS + (["f64"] if pure else FLOATS + COMPLEX))
            pp = is_int(pt) or pure
            pn = self.fresh("p")
            params.append((pn, pt, pp))
            ctx.scopes[0].append(Var(pn, pt, pp))
        ctx.ret, ctx.ret_pure, ctx.allow_return = ret, pure, False
        self.emit("fn %s(%s) -> %s {" % (name, ", ".join("%s: %s" % (p[0], p[1]) for p in params), ret))
        self.ind += 1
        if self.chance(0.3):
            lt = self.pick(INTS)
            ln = self.fresh("loc")
            size = self.r.randint(1, 8)
            self.emit("let %s = local(%s, %d);" % (ln, lt, size))
            self.emit("for %s in range(%d) { %s[%s] = %s; }" % ("z" + ln, size, ln, "z" + ln, self.int_lit(lt)))
            ctx.locals.append((ln, lt, size, True))
        for _ in range(self.r.randint(1, 3 if self.small else 6)):
            self.stmt(ctx, 2)
        if ctx.locals and self.chance(0.7):
            l = ctx.locals[0]
            if l[1] == ret:
                self.emit("return %s[%s];" % (l[0], self.index_of(ctx, str(l[2]))))
            else:
                self.emit("return %s;" % self.expr(ctx, ret, pure, 3))
        else:
            self.emit("return %s;" % self.expr(ctx, ret, pure, 3))
        self.ind -= 1
        self.emit("}")
        self.emit("")
        self.helpers.append((name, [(p[1], p[2]) for p in params], ret, pure, device))

    def kernel(self):
        name = self.fresh("k")
        ctx = Ctx("kernel")
        warps = self.chance(0.3)
        if warps:
            bx, by = self.pick([(32, 1), (64, 1), (32, 2), (128, 1), (32, 4)])
        else:
            bx, by = self.pick([(1, 1), (7, 1), (16, 1), (33, 1), (48, 1), (64, 1), (8, 4), (16, 3), (100, 1), (256, 1),
                                (249, 1), (257, 1), (263, 1)])
        gx = self.r.randint(1, 3)
        if bx * by in PARTIAL_BLOCKS:
            self.feature("block_partial_chunk")
        self.tile = max(256, bx * by)   # shared tiles of a slot per thread
        nthreads = gx * bx * by
        params, lens = [], []
        for _ in range(self.r.randint(1, 3)):
            t = self.any_type()
            nm = self.fresh("in")
            pure = is_int(t) or (t == "f64" and self.chance(0.5))
            params.append("%s: %s[]" % (nm, t))
            lens.append(self.r.randint(1, 300))
            ctx.inputs.append((nm, t, pure))
        for _ in range(self.r.randint(1, 3)):
            t = self.any_type()
            nm = self.fresh("out")
            pure = is_int(t) or (t == "f64" and self.chance(0.5))
            params.append("%s: %s[]" % (nm, t))
            lens.append(nthreads)
            ctx.outputs.append((nm, t, pure))
        if self.chance(0.4):
            t = self.pick(["u32", "i32", "u64", "i64"])
            nm = self.fresh("hist")
            params.append("%s: %s[]" % (nm, t))
            lens.append(self.r.randint(1, 16))
            # one operation per histogram: add, or, xor, max, min each commute
            # with themselves, not with each other (max then add differs from
            # add then max)
            ctx.hists.append((nm, t, self.pick(["atomic_add", "atomic_or", "atomic_xor", "atomic_max",
                                                "atomic_min"])))
        scalars = []
        for _ in range(self.r.randint(0, 2)):
            t = self.pick(INTS + ["f64", "f32"])
            nm = self.fresh("s")
            params.append("%s: %s" % (nm, t))
            pure = is_int(t) or t == "f64"
            ctx.scopes[0].append(Var(nm, t, pure, mutable=False, uniform=True))
            scalars.append((nm, t))
        self.emit("//! kernel %s grid=%d,1 block=%d,%d arrays=%s" % (name, gx, bx, by, ",".join(map(str, lens))))
        self.emit("@kernel")
        self.emit("fn %s(%s) {" % (name, ", ".join(params)))
        self.ind += 1
        self.emit("let t = i64(threadIdx.x) + i64(blockDim.x) * i64(threadIdx.y);")
        self.emit("let nt = i64(blockDim.x) * i64(blockDim.y);")
        self.emit("let g = i64(blockIdx.x) * nt + t;")
        for v in ("t", "nt", "g"):
            ctx.scopes[0].append(Var(v, "i64", True, mutable=False))
        if self.chance(0.4):
            # each thread owns element o, a permutation of g: scattered stores
            import math
            k = self.pick([x for x in (3, 5, 7, 11, 13, 31, 37) if math.gcd(x, nthreads) == 1] or [1])
            self.emit("let o = (g * %d + %d) %% %d;" % (k, self.r.randint(0, nthreads - 1), nthreads))
            ctx.scopes[0].append(Var("o", "i64", True, mutable=False))
            ctx.own = "o"
        ctx.warp_ok = ctx.warp_kernel = warps
        # most kernels keep to what barrier_split.c splits (no local() across a
        # barrier, no return before one, no collectives, no barrier in a
        # device function), so the SIMD lowering of barriers is what runs
        friendly = not warps and self.chance(0.7)
        ctx.allow_return = False
        # shared arrays, each filled by every thread first
        for _ in range(self.r.randint(0, 3)):
            t = self.pick(INTS + ["f32", "f64", "c64", "c128", "f16"])
            nm = self.fresh("sh")
            two = by > 1 and self.chance(0.5)
            if two:
                self.emit("let %s = shared(%s, %d, %d);" % (nm, t, by, bx))
            else:
                self.emit("let %s = shared(%s, %d);" % (nm, t, self.tile if self.chance(0.5) else bx * by))
            ctx.shared.append((nm, t, 2 if two else 1))
            ctx.shared_mode[nm] = "w"
        if self.chance(0.1 if friendly else 0.5):
            lt = self.pick(INTS + ["f64"])
            ln = self.fresh("loc")
            size = self.r.randint(1, 8)
            if self.chance(0.3):
                # sized at launch (docs/language.md, "Local arrays sized at
                # launch"): from an input's length, at least 1
                self.emit("let %s = local(%s, min(len(%s), %d));" % (ln, lt, ctx.inputs[0][0], size))
                size = "len(%s)" % ln
            else:
                self.emit("let %s = local(%s, %d);" % (ln, lt, size))
            init = self.int_lit(lt) if is_int(lt) else self.real_lit(lt, True)
            self.emit("for %s in range(%s) { %s[%s] = %s; }" % ("z" + ln, size, ln, "z" + ln, init))
            ctx.locals.append((ln, lt, size, True))
        ctx.sync_tiles = {}
        for h in self.sync_helpers:
            if h[1] not in ctx.sync_tiles:
                tile = self.fresh("tile")
                self.emit("let %s = shared(%s, %d);" % (tile, h[1], self.tile))
                self.emit("%s[t] = %s;" % (tile, self.int_lit(h[1]) if is_int(h[1]) else self.real_lit(h[1], True)))
                ctx.sync_tiles[h[1]] = tile
        ctx.no_shared = True
        for s in ctx.shared:
            self.emit("%s = %s;" % (self.shared_own(s), self.expr(ctx, s[1], False, 2)))
        ctx.no_shared = False
        nseg = self.r.randint(1, 3 if self.small else 5)
        if nseg == 1:
            ctx.allow_return = self.chance(0.5)  # no barrier: returns on SIMD lanes
        for seg in range(nseg):
            self.segment(ctx, 2 if self.small else 3)
            if seg < nseg - 1:
                self.barrier(ctx)
                if self.chance(0.3) and ctx.shared:
                    self.barrier_loop(ctx, scalars)
                if self.sync_helpers and self.chance(0.4):
                    self.call_barrier_helper(ctx)
                if not ctx.may_have_returned and self.chance(0.2):
                    self.tree_reduction(ctx)
                if self.chance(0.2):
                    self.thread_if_segment(ctx)
                    self.barrier(ctx)
                ctx.allow_return = not friendly or self.chance(0.1)
        # every output gets a value from this thread, whatever happened
        for o in ctx.outputs:
            if self.chance(0.5):
                self.emit("%s[%s] = %s;" % (o[0], ctx.own, self.expr(ctx, o[1], o[2], 2)))
        self.ind -= 1
        self.emit("}")
        self.emit("")

    def barrier(self, ctx):
        if not ctx.warp_kernel or self.chance(0.8):
            self.emit("syncthreads();")
        else:
            c = self.fresh("cnt")
            self.emit("let %s: i32 = syncthreads_count(%s);" % (c, self.bool_expr(ctx, 1)))
            ctx.scopes[-1].append(Var(c, "i32", True, mutable=False))
        for s in ctx.shared:
            ctx.shared_mode[s[0]] = self.pick(["w", "r"])

    def barrier_loop(self, ctx, scalars):
        """A loop with a uniform trip count whose body has barriers."""
        i = self.fresh("r")
        ints = [s for s in scalars if is_int(s[1])]
        ints += [(v.name, v.type) for v in ctx.vars() if v.uniform and is_int(v.type) and v.name != "nt"]
        if self.chance(0.35):
            # an if whose condition is the same for the block's threads
            conds = ["(blockIdx.x %% 2) == %d" % self.r.randint(0, 1), "gridDim.x > %d" % self.r.randint(1, 2)]
            conds += ["(%s & %s(1)) == %s(0)" % (x[0], x[1], x[1]) for x in ints]
            self.emit("if %s {" % self.pick(conds))
            it = None
        elif ints and self.chance(0.5):
            s = self.pick(ints)
            self.emit("for %s in range((%s & %s(3))) {" % (i, s[0], s[1]))
            it = s[1]
        else:
            self.emit("for %s in range(%d) {" % (i, self.r.randint(1, 3)))
            it = "i64"
        self.ind += 1
        ctx.push()
        if it:
            ctx.scopes[-1].append(Var(i, it, True, mutable=False))
        saved = ctx.allow_return
        ctx.allow_return = False
        self.segment(ctx, 2)
        self.barrier(ctx)
        self.segment(ctx, 2)
        self.emit("syncthreads();")
        ctx.allow_return = saved
        for s in ctx.shared:
            ctx.shared_mode[s[0]] = self.pick(["w", "r"])
        ctx.pop()
        self.ind -= 1
        if it is None and self.chance(0.5):
            self.emit("} else {")
            self.ind += 1
            ctx.push()
            self.segment(ctx, 2)
            self.emit("syncthreads();")
            ctx.pop()
            self.ind -= 1
        self.emit("}")
        self.barrier(ctx)

    def tree_reduction(self, ctx):
        """The classic block reduction: a halving while loop with a barrier,
        the threads below the stride adding their partner's slot."""
        t = self.pick(["i32", "u32", "i64", "f32", "f64"])
        tile = self.fresh("red")
        st = self.fresh("st")
        acc = self.fresh("v")
        self.emit("let %s = shared(%s, %d);" % (tile, t, self.tile))
        self.emit("%s[t] = %s;" % (tile, self.expr(ctx, t, is_int(t), 2)))
        self.emit("syncthreads();")
        if self.chance(0.5):
            self.emit("let %s = nt / 2;" % st)
        else:
            self.emit("let %s = i64(blockDim.x * blockDim.y) / 2;" % st)
        op = self.pick(["+", "max"]) if not is_int(t) else self.pick(["+", "^", "max", "*"])
        comb = "max(%s[t], %s[t + %s])" % (tile, tile, st) if op == "max" else \
            "%s[t] %s %s[t + %s]" % (tile, op, tile, st)
        self.emit("while %s > 0 {" % st)
        self.ind += 1
        cond = self.pick(["t < %s" % st, "i64(threadIdx.x) + i64(blockDim.x) * i64(threadIdx.y) < %s" % st])
        self.emit("if %s { %s[t] = %s; }" % (cond, tile, comb))
        self.emit("syncthreads();")
        self.emit("%s /= 2;" % st)
        self.ind -= 1
        self.emit("}")
        self.emit("let %s: %s = %s[%s];" % (acc, t, tile, self.pick(["0", "0", "(t + 1) % nt"])))
        ctx.scopes[-1].append(Var(acc, t, is_int(t)))
        self.emit("syncthreads();")

    def thread_if_segment(self, ctx):
        """A segment that is one if on threadIdx against a uniform value (the
        split form loops only over the threads that pass it)."""
        us = [v.name for v in ctx.vars() if v.uniform and v.type == "i32"]
        bound = self.pick(us + ["%d" % self.r.randint(0, 40), "blockDim.x / 2"])
        self.emit("if threadIdx.x %s %s {" % (self.pick(["<", "==", ">=", "!="]), bound))
        ctx.divergent += 1
        self.block(ctx, self.r.randint(1, 3), 2)
        ctx.divergent -= 1
        self.emit("}")

    def barrier_helper(self):
        """A device function with barriers (docs/language.md's rotate_in_block):
        it writes the thread's slot of a shared array the kernel passes, waits,
        reads another thread's, waits again."""
        name = self.fresh("dsync")
        t = self.pick(INTS + ["f32", "f64"])
        k = self.r.randint(1, 40)
        self.emit("fn %s(tile: %s[], v: %s) -> %s {" % (name, t, t, t))
        self.ind += 1
        self.emit("let t = i64(threadIdx.x) + i64(blockDim.x) * i64(threadIdx.y);")
        self.emit("let nt = i64(blockDim.x) * i64(blockDim.y);")
        self.emit("tile[t] = v;")
        self.emit("syncthreads();")
        self.emit("let r = tile[(t + %d) %% nt];" % k)
        self.emit("syncthreads();")
        self.emit("return r;")
        self.ind -= 1
        self.emit("}")
        self.emit("")
        self.sync_helpers.append((name, t))

    def call_barrier_helper(self, ctx):
        h = self.pick(self.sync_helpers)
        tile = ctx.sync_tiles.get(h[1])
        if tile is None:
            return
        name = self.fresh("v")
        pure = is_int(h[1])
        self.feature("barrier_helper_call")
        self.emit("let %s: %s = %s(%s, %s);" % (name, h[1], h[0], tile, self.expr(ctx, h[1], pure, 2)))
        ctx.scopes[-1].append(Var(name, h[1], pure))

    def segment(self, ctx, depth):
        # short segments too: a region that uses a value carried across a
        # barrier without the values it was made from
        n = 1 if self.chance(0.4) else self.r.randint(1, 3 if self.small else 6)
        for _ in range(n):
            self.stmt(ctx, depth)

    def vectorize(self):
        name = self.fresh("vec")
        ctx = Ctx("vectorize")
        params = []
        for _ in range(self.r.randint(1, 3)):
            t = self.pick(INTS + FLOATS + COMPLEX)
            pn = self.fresh("x")
            pure = is_int(t) or (t == "f64" and self.chance(0.5))
            params.append((pn, t))
            ctx.scopes[0].append(Var(pn, t, pure))
        ret = self.pick(INTS + FLOATS + COMPLEX)
        ctx.ret, ctx.ret_pure, ctx.allow_return = ret, is_int(ret), False
        # several outputs (docs/language.md, "Several outputs"): -> (T, U, ...)
        rets = [ret] + [self.pick(INTS + FLOATS + COMPLEX)
                        for _ in range(self.r.randint(1, 2) if self.chance(0.25) else 0)]
        ctx.rets = rets
        n = self.r.randint(1, 300)
        off = 0
        if self.chance(0.5):
            # the output off a cache line and long enough that the cpu targets
            # cut the range where an output element starts one (runtime/cpu.c,
            # run_range_aligned: at least 4 lines)
            line = 64 // ELEM_BYTES[ret]
            off = self.r.randint(1, line - 1) if line > 1 else 0
            n = self.r.randint(4 * line - 2, 4 * line + 3 * line + 5)
            if off and n >= 4 * line:
                self.feature("vectorize_offset")
        self.emit("//! vectorize %s n=%d%s" % (name, n, " off=%d" % off if off else ""))
        self.emit("@vectorize")
        self.emit("fn %s(%s) -> %s {" % (name, ", ".join("%s: %s" % p for p in params),
                                         ret if len(rets) == 1 else "(%s)" % ", ".join(rets)))
        self.ind += 1
        for _ in range(self.r.randint(1, 3 if self.small else 6)):
            self.stmt(ctx, 2 if self.small else 3)
        if len(rets) == 1:
            self.emit("return %s;" % self.expr(ctx, ret, ctx.ret_pure, 3))
        else:
            self.emit("return (%s);" % ", ".join(self.expr(ctx, t, is_int(t), 3) for t in rets))
        self.ind -= 1
        self.emit("}")
        self.emit("")

    def guvectorize(self):
        name = self.fresh("gu")
        ctx = Ctx("gu")
        t = self.pick(INTS + ["f32", "f64"])
        pure = is_int(t)
        scalar_t = self.pick(INTS)
        self.emit("//! guvectorize %s loop=%d core=%d" % (name, self.r.randint(1, 12), self.r.randint(1, 20)))
        self.emit('@guvectorize("(n),(n),()->(n)")')
        self.emit("fn %s(a: %s[], b: %s[], w: %s, out: %s[]) {" % (name, t, t, scalar_t, t))
        self.ind += 1
        ctx.inputs = [("a", t, pure), ("b", t, pure)]
        ctx.scopes[0].append(Var("w", scalar_t, True, mutable=False))
        ctx.allow_return = False
        acc = self.fresh("acc")
        self.emit("let %s: %s = %s;" % (acc, t, self.expr(ctx, t, pure, 1)))
        ctx.scopes[0].append(Var(acc, t, pure))
        self.emit("for j in range(len(a)) {")
        self.ind += 1
        ctx.push()
        ctx.scopes[-1].append(Var("j", "i64", True, mutable=False))
        self.emit("let aj: %s = a[j];" % t)
        ctx.scopes[-1].append(Var("aj", t, pure))
        if self.chance(0.3):
            self.emit("if %s { continue; }" % self.bool_expr(ctx, 1))
        for _ in range(self.r.randint(1, 4)):
            self.stmt(ctx, 1)
        self.emit("%s = %s;" % (acc, self.expr(ctx, t, pure, 2)))
        self.emit("out[j] = %s;" % self.expr(ctx, t, pure, 2))
        if self.chance(0.2):
            self.emit("if %s { break; }" % self.bool_expr(ctx, 1))
        ctx.pop()
        self.ind -= 1
        self.emit("}")
        self.emit("out[0] = %s;" % acc)
        self.ind -= 1
        self.emit("}")
        self.emit("")

    def reduce(self):
        name = self.fresh("red")
        t = self.pick(INTS + ["f32", "f64"])
        ctx = Ctx("reduce")
        ctx.scopes[0] += [Var("a", t, is_int(t)), Var("b", t, is_int(t))]
        n = self.r.choice([1, 5, 31, 33, 100, 1024, 1500, 3000, 7, 9, 15, 17, 63, 65, 249, 257, 263, 4099])
        if n % 16:
            self.feature("reduce_partial")
        self.emit("//! reduce %s n=%d" % (name, n))
        self.emit("@reduce")
        self.emit("fn %s(a: %s, b: %s) -> %s {" % (name, t, t, t))
        self.ind += 1
        if is_int(t):
            body = self.pick(["(a + b)", "(a ^ b)", "max(a, b)", "min(a, b)", "(a | b)", "(a & b)", "(a * b)"])
        else:
            body = self.pick(["(a + b)", "max(a, b)", "min(a, b)", "(a * b)"])
        # a loop that does nothing to the result: @reduce bodies with loops
        if self.chance(0.5):
            k = self.fresh("q")
            self.emit("let %s = %s;" % (k, body))
            self.emit("for j in range(3) { if j == 1 { continue; } }")
            self.emit("return %s;" % k)
        else:
            self.emit("return %s;" % body)
        self.ind -= 1
        self.emit("}")
        self.emit("")

    def program(self):
        self.emit("// generated by tests/genprog/gen.py, seed %d%s" % (self.seed, " (libm)" if self.libm else ""))
        self.emit("")
        for _ in range(self.r.randint(0, 2)):
            self.helper(device=False)
        if self.chance(0.3):
            self.helper(device=True)
        if self.chance(0.3):
            self.barrier_helper()
        nk = self.r.randint(1, 2)
        for _ in range(nk):
            self.kernel()
        # (small programs, make check's: at most one, to keep its time)
        for _ in range(self.r.randint(0, 1 if self.small else 2)):
            self.special_kernel()
        if self.chance(0.7):
            self.vectorize()
        if self.chance(0.4):
            self.guvectorize()
        if self.chance(0.4):
            self.reduce()
        return "\n".join(self.lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--libm", action="store_true", help="call libm functions (sin, exp, hypot ...)")
    ap.add_argument("--size", choices=["small", "normal"], default="normal")
    ap.add_argument("--summary", action="store_true",
                    help="print, per lowering path (FEATURES), how many programs have one and how many in all")
    ap.add_argument("--require", action="store_true",
                    help="fail when a lowering path occurs in none of the programs")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    total = {f: 0 for f in FEATURES}
    programs = {f: 0 for f in FEATURES}
    for i in range(a.count):
        s = a.seed + i
        g = Gen(s, a.libm, a.size)
        text = g.program()
        with open(os.path.join(a.out, "p%d.kern" % s), "w") as f:
            f.write(text)
        for f, n in g.features.items():
            total[f] += n
            programs[f] += 1 if n else 0
    if a.summary:
        print("gen.py: %d programs, seeds %d to %d; lowering paths (programs, occurrences):" %
              (a.count, a.seed, a.seed + a.count - 1))
        for f in FEATURES:
            print("  %-20s %5d %6d" % (f, programs[f], total[f]))
    missing = [f for f in FEATURES if not total[f]]
    if a.require and missing:
        print("gen.py: no program has %s" % ", ".join(missing))
        sys.exit(1)


if __name__ == "__main__":
    main()
