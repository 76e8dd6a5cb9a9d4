/*
 * codegen_simd.c: the SIMD lowering of the cpu targets, as ISPC and the
 * OpenCL CPU runtimes have it: the threads of a block (threadIdx.x), or the
 * elements of a vectorized call (the PARFOR index), run side by side on the
 * lanes of the host's vector registers.
 *
 * Needs: a KERNEL without barriers or a VEC_KERNEL made by vectorize.c,
 * unchecked, whose code (and that of the functions it calls) uses nothing
 * this file refuses (kj_simd_lanes says which).  Gives: a "chunk" function
 * that runs W lanes at once, lane 0 given, the lanes past a count inactive;
 * target_cpu.c's __block and __range entries loop over chunks.
 *
 * The uniformity analysis (uniform.c) says which values vary between lanes.
 * Uniform ones stay scalar and are lowered by the shared code
 * (kj_codegen_expr) from the scalar slots of their variables; varying ones
 * are <W x T> vectors (a complex value is a pair of vectors) in slots of
 * their own.  A mask (<W x i1>) says which lanes run:
 *   - an `if` on a varying condition runs each side under its lanes' mask,
 *     skipping a side no lane takes; a uniform one stays a branch;
 *   - a loop whose exit varies runs while any lane is active; lanes leave it
 *     through its condition, `break` (a mask of broken lanes per loop),
 *     `continue` (a mask per iteration) and `return` (a mask per function);
 *     a uniform loop stays a loop of branches;
 *   - an assignment under divergence blends (select) the new value into the
 *     old under the mask; a store is a masked vector store when the index is
 *     uniform + the lane (contiguous) and the array's last stride is 1,
 *     else a masked scatter; loads likewise (masked load, gather);
 *   - after a statement that may have retired lanes, no lane left means the
 *     rest is skipped, so uniform code never runs for threads that left;
 *   - math is LLVM's vector intrinsics, libmvec's vector functions (lane
 *     counts split to the widest ISA the host has), or per lane;
 *   - atomics run lane by lane under the mask, in lane order; a call to a
 *     plain function with varying arguments calls its own SIMD variant
 *     (every scalar parameter varying, the mask last).
 * Integer division keeps the scalar rules in every lane (inactive ones
 * included: no lane traps).  No fast-math: each lane computes what the
 * scalar code computes, libmvec's results aside (the scalar code's loops
 * call the same functions when the loop vectoriser takes them).
 */
#define KJ_CODEGEN_LOWERING
#include "codegen_llvm.h"

#include <stdlib.h>
#include <string.h>

/* ============================================================ state */

typedef enum { ROLE_KERNEL, ROLE_VEC_KERNEL, ROLE_CALLEE } Role;

typedef struct SimdLoop {
    bool varying;
    LLVMBasicBlockRef break_bb, continue_bb; /* uniform: targets; varying: exit, latch */
    LLVMValueRef break_slot, continue_slot;  /* varying: lanes that left (allocas) */
} SimdLoop;

#define SIMD_MAX_DEPTH 256
#define SIMD_MAX_PENDING 256

typedef struct Simd {
    Gen *g;
    LLVMBuilderRef b;
    int lanes;
    Role role;
    KjIrFunction *fn;
    KjUniformity *u;
    KjArena arena;           /* the analysis */
    LLVMValueRef *vslots;    /* by var id: a varying variable's vector alloca */
    LLVMTypeRef mask_type;
    /* Masks kept in slots (lanes that broke, continued, returned) are
     * integers of the lanes' width, all ones or zero: across the blocks of
     * a loop the backend then keeps them in the form its compares make
     * (<4 x i1> would travel as <4 x i32> beside 64-bit lanes, packed and
     * unpacked on every iteration). */
    LLVMTypeRef slot_mask_type;
    bool wide_masks; /* see widen_mask */
    LLVMValueRef mask;       /* the lanes running the code being emitted */
    LLVMValueRef returned;   /* alloca: lanes that returned (NULL: no divergent return) */
    LLVMValueRef result;     /* callee: alloca of its result vector */
    LLVMBasicBlockRef exit_bb;
    LLVMBasicBlockRef skip[SIMD_MAX_DEPTH]; /* where to go when no lane is left */
    int skip_depth;
    SimdLoop loops[SIMD_MAX_DEPTH];
    int loop_depth;
    LLVMValueRef lane_base;  /* kernel: threadIdx.x of lane 0 (i32) */
    uint64_t varying_params; /* callee: its parameters that are vectors */
    /* The plain region being emitted (an outermost varying loop, or a side
     * of an outermost varying if), and whether nothing partial (a varying
     * if or loop, a `continue`) lies between it and the code: see
     * assign_lanes. */
    const KjIrStmt *plain_loop;
    bool plain;
    /* callees whose SIMD variant is declared but not yet defined */
    struct Pending *pending;
    int *pending_count;
} Simd;

/* A callee's SIMD variant: the function, and which of its parameters vary
 * (those that are uniform at the call stay scalar). */
typedef struct Pending {
    KjIrFunction *fn;
    uint64_t varying_params;
} Pending;

/* ============================================================ types and constants */

static LLVMTypeRef vec_of(Simd *s, LLVMTypeRef elem) { return LLVMVectorType(elem, (unsigned)s->lanes); }

/* The vector type of a varying value of `type` (complex: a pair of vectors). */
static LLVMTypeRef vty(Simd *s, const KjType *type)
{
    if (kj_type_is_complex(type)) {
        LLVMTypeRef part = vec_of(s, llty(s->g, kj_type_complex_part(type)));
        return LLVMStructTypeInContext(s->g->ctx, (LLVMTypeRef[]){part, part}, 2, 0);
    }
    return vec_of(s, llty(s->g, type));
}

static LLVMValueRef splat_const(Simd *s, LLVMValueRef c)
{
    LLVMValueRef items[64];
    for (int k = 0; k < s->lanes; k++)
        items[k] = c;
    return LLVMConstVector(items, (unsigned)s->lanes);
}

static LLVMValueRef iota(Simd *s, LLVMTypeRef elem)
{
    LLVMValueRef items[64];
    for (int k = 0; k < s->lanes; k++)
        items[k] = LLVMConstInt(elem, (unsigned long long)k, 0);
    return LLVMConstVector(items, (unsigned)s->lanes);
}

/* A scalar (or a complex struct of scalars) repeated in every lane. */
static LLVMValueRef splat(Simd *s, LLVMValueRef x)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    if (LLVMGetTypeKind(t) == LLVMStructTypeKind) {
        LLVMValueRef re = splat(s, LLVMBuildExtractValue(s->b, x, 0, "")),
                     im = splat(s, LLVMBuildExtractValue(s->b, x, 1, ""));
        LLVMTypeRef vt = LLVMStructTypeInContext(s->g->ctx, (LLVMTypeRef[]){LLVMTypeOf(re), LLVMTypeOf(re)}, 2, 0);
        LLVMValueRef v = LLVMBuildInsertValue(s->b, LLVMGetPoison(vt), re, 0, "");
        return LLVMBuildInsertValue(s->b, v, im, 1, "");
    }
    if (LLVMIsConstant(x))
        return splat_const(s, x);
    LLVMTypeRef vt = vec_of(s, t);
    LLVMValueRef v = LLVMBuildInsertElement(s->b, LLVMGetPoison(vt), x, const_i32(s->g, 0), "");
    return LLVMBuildShuffleVector(s->b, v, LLVMGetPoison(vt), LLVMConstNull(vec_of(s, s->g->t_i32)), "splat");
}

static LLVMValueRef no_lanes(Simd *s) { return LLVMConstNull(s->mask_type); }

static LLVMValueRef any_lane(Simd *s, LLVMValueRef mask)
{
    return kj_codegen_call_intrinsic(s->g, "llvm.vector.reduce.or", &s->mask_type, 1, &mask, 1);
}

static LLVMValueRef narrow_mask(Simd *s, LLVMValueRef wide);

static LLVMValueRef load_mask(Simd *s, LLVMValueRef slot)
{
    return narrow_mask(s, LLVMBuildLoad2(s->b, s->slot_mask_type, slot, ""));
}

/*
 * A mask's lanes as integers of the lanes' width, behind an empty inline
 * asm that the optimiser cannot see through.  Between blocks (and around a
 * loop) the x86 back end keeps a <4 x i1> as <4 x i32>, whatever the width
 * of the compares that made it and of the selects that use it: beside
 * 64-bit lanes every such mask is packed after its compare and unpacked
 * before its blend, on the loop's critical path.  Kept as the compares
 * make it, it needs neither.  Only on x86 without AVX-512 (whose mask
 * registers hold any <W x i1>).
 */
static bool wide_masks(Simd *s) { return s->wide_masks; }

static LLVMValueRef widen_mask(Simd *s, LLVMValueRef m)
{
    LLVMValueRef wide = LLVMBuildSExt(s->b, m, s->slot_mask_type, "");
    if (!wide_masks(s) || LLVMIsConstant(m))
        return wide;
    LLVMTypeRef t = s->slot_mask_type;
    LLVMTypeRef ft = LLVMFunctionType(t, &t, 1, 0);
    LLVMValueRef barrier = LLVMGetInlineAsm(ft, "", 0, "=x,0", 4, 0, 0, LLVMInlineAsmDialectATT, 0);
    return LLVMBuildCall2(s->b, ft, barrier, &wide, 1, "mask.wide");
}

static LLVMValueRef narrow_mask(Simd *s, LLVMValueRef wide)
{
    return LLVMBuildICmp(s->b, LLVMIntSLT, wide, LLVMConstNull(s->slot_mask_type), "mask");
}

static void store_mask(Simd *s, LLVMValueRef slot, LLVMValueRef m)
{
    LLVMBuildStore(s->b, widen_mask(s, m), slot);
}

static LLVMValueRef mask_slot(Simd *s, const char *name)
{
    LLVMValueRef slot = kj_codegen_alloca_in_entry(s->g, s->slot_mask_type, name);
    return slot;
}

static LLVMValueRef mask_and_not(Simd *s, LLVMValueRef m, LLVMValueRef slot)
{
    return LLVMBuildAnd(s->b, m, LLVMBuildNot(s->b, load_mask(s, slot), ""), "");
}

static void add_lanes(Simd *s, LLVMValueRef slot, LLVMValueRef m)
{
    store_mask(s, slot, LLVMBuildOr(s->b, load_mask(s, slot), m, ""));
}

/* select(mask, a, b) lane by lane; complex values part by part. */
static LLVMValueRef blend(Simd *s, LLVMValueRef mask, LLVMValueRef a, LLVMValueRef b)
{
    if (LLVMGetTypeKind(LLVMTypeOf(a)) == LLVMStructTypeKind) {
        LLVMValueRef re = LLVMBuildSelect(s->b, mask, LLVMBuildExtractValue(s->b, a, 0, ""),
                                          LLVMBuildExtractValue(s->b, b, 0, ""), "");
        LLVMValueRef im = LLVMBuildSelect(s->b, mask, LLVMBuildExtractValue(s->b, a, 1, ""),
                                          LLVMBuildExtractValue(s->b, b, 1, ""), "");
        LLVMValueRef v = LLVMBuildInsertValue(s->b, LLVMGetPoison(LLVMTypeOf(a)), re, 0, "");
        return LLVMBuildInsertValue(s->b, v, im, 1, "");
    }
    return LLVMBuildSelect(s->b, mask, a, b, "");
}

static void start_dead_block(Simd *s)
{
    LLVMPositionBuilderAtEnd(s->b, LLVMAppendBasicBlockInContext(s->g->ctx, s->g->llfn, "dead"));
}

static bool block_open(Simd *s) { return LLVMGetBasicBlockTerminator(LLVMGetInsertBlock(s->b)) == NULL; }

static LLVMValueRef entry_alloca(Simd *s, LLVMTypeRef t, const char *name)
{
    return kj_codegen_alloca_in_entry(s->g, t, name);
}

/* ============================================================ what is supported */

typedef struct Scan {
    Gen *g;
    bool ok;
    bool has_f64, has_f32, has_wide_int, has_loop;
    int depth;
} Scan;

static void scan_type(Scan *sc, const KjType *t)
{
    if (!t)
        return;
    if (t->kind == KJ_TYPE_ARRAY)
        t = t->elem;
    switch (t->kind) {
    case KJ_TYPE_F16: case KJ_TYPE_BF16: sc->ok = false; break;
    case KJ_TYPE_F64: case KJ_TYPE_C128: sc->has_f64 = true; break;
    case KJ_TYPE_F32: case KJ_TYPE_C64: sc->has_f32 = true; break;
    case KJ_TYPE_I64: case KJ_TYPE_U64: sc->has_wide_int = true; break;
    default: break;
    }
}

static void scan_fn(Scan *sc, const KjIrFunction *fn, bool root);

static void scan_expr(Scan *sc, const KjIrExpr *e)
{
    if (!e || !sc->ok)
        return;
    scan_type(sc, e->type);
    switch (e->op) {
    case KJ_IR_PRINT: case KJ_IR_LOCAL: case KJ_IR_SYNCTHREADS: case KJ_IR_CARG: case KJ_IR_POLAR:
    case KJ_IR_VIEW: /* a @guvectorize core's views: the scalar code walks them */
        sc->ok = false;
        return;
    case KJ_IR_EXEC:
        if (e->exec != KJ_EXEC_THREADFENCE && e->exec != KJ_EXEC_THREADFENCE_BLOCK)
            sc->ok = false;
        return;
    case KJ_IR_MATH:
        if (kj_type_is_complex(e->type) || (e->arg_count > 0 && kj_type_is_complex(e->args[0]->type)))
            sc->ok = false;
        break;
    case KJ_IR_IPOW:
        if (e->args[1]->op != KJ_IR_CONST)
            sc->ok = false;
        break;
    case KJ_IR_CALL:
        if (!e->callee || e->callee->device_use || sc->depth > 16) {
            sc->ok = false;
            return;
        }
        sc->depth++;
        scan_fn(sc, e->callee, false);
        sc->depth--;
        break;
    default:
        break;
    }
    for (int i = 0; i < e->arg_count; i++)
        scan_expr(sc, e->args[i]);
}

static void scan_stmt(Scan *sc, const KjIrStmt *s)
{
    if (!s || !sc->ok)
        return;
    if (s->kind == KJ_IR_STMT_FOR || s->kind == KJ_IR_STMT_WHILE)
        sc->has_loop = true;
    for (int i = 0; i < s->stmts.count; i++)
        scan_stmt(sc, s->stmts.items[i]);
    const KjIrExpr *es[] = {s->value, s->array, s->cond, s->start, s->stop, s->step};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++)
        scan_expr(sc, es[i]);
    for (int i = 0; i < s->index_count; i++)
        scan_expr(sc, s->indices[i]);
    if (s->var)
        scan_type(sc, s->var->type);
    scan_stmt(sc, s->then_stmt);
    scan_stmt(sc, s->else_stmt);
    scan_stmt(sc, s->body);
}

/* Array variables must stay uniform: a varying one (assigned under
 * divergence) would need a pointer per lane. */
static bool arrays_uniform(const KjIrFunction *fn, KjUniformSources sources)
{
    KjArena arena = {0};
    KjUniformity *u = kj_uniform_analyze(&arena, fn, sources);
    bool ok = true;
    for (int i = 0; i < fn->locals.count; i++) {
        const KjIrVar *v = fn->locals.items[i];
        if (v->type->kind == KJ_TYPE_ARRAY && kj_uniform_var_varying(u, v))
            ok = false;
    }
    kj_arena_free(&arena);
    return ok;
}

/* Every scalar parameter: the sources of the variant that scan_fn checks,
 * the most varying one. */
static uint64_t all_scalar_params(const KjIrFunction *fn)
{
    uint64_t params = 0;
    for (int i = 0; i < fn->param_count && i < 64; i++)
        if (fn->params[i]->type->kind != KJ_TYPE_ARRAY)
            params |= 1ull << i;
    return params;
}

static KjUniformSources callee_sources(const KjIrFunction *fn)
{
    return (KjUniformSources){.params = all_scalar_params(fn)};
}

static KjUniformSources root_sources(const KjIrFunction *fn)
{
    KjUniformSources src = {0};
    if (fn->kind == KJ_IR_FN_KERNEL)
        src.sregs = 1u << KJ_SREG_TID_X;
    else
        src.parfor_var = true;
    return src;
}

static void scan_fn(Scan *sc, const KjIrFunction *fn, bool root)
{
    if (!root && !arrays_uniform(fn, callee_sources(fn)))
        sc->ok = false;
    scan_stmt(sc, fn->body);
    for (int i = 0; i < fn->param_count; i++)
        scan_type(sc, fn->params[i]->type);
}

/* A VEC_KERNEL as vectorize.c makes it: one PARFOR whose body ends in
 * out[...] = scalar(...), the scalar function taking scalars alone (the
 * kernels of reduce.c and guvectorize.c keep the scalar code). */
static bool is_lifted(const KjIrFunction *fn)
{
    const KjIrStmt *body = fn->body;
    if (!fn->scalar || fn->scalar->kind != KJ_IR_FN_SCALAR || body->kind != KJ_IR_STMT_BLOCK ||
        body->stmts.count != 1)
        return false;
    const KjIrStmt *loop = body->stmts.items[0];
    if (loop->kind != KJ_IR_STMT_PARFOR || loop->body->kind != KJ_IR_STMT_BLOCK || loop->body->stmts.count == 0)
        return false;
    const KjIrStmt *last = loop->body->stmts.items[loop->body->stmts.count - 1];
    if (last->kind != KJ_IR_STMT_STORE || last->value->op != KJ_IR_CALL || last->value->callee != fn->scalar)
        return false;
    for (int i = 0; i < fn->scalar->param_count; i++)
        if (is_array(fn->scalar->params[i]->type))
            return false;
    return true;
}

/* Whether the feature list ("+avx,+avx2,-avx512f,...") turns `name` on. */
static bool has_feature(const char *features, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = features; (p = strstr(p, name)) != NULL; p += n)
        if ((p == features || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

/* The host's vector register in bytes (SSE2 is the x86-64 baseline; other
 * hosts' vectors are 16 bytes too). */
static int register_bytes(Gen *g)
{
    const char *f = g->cpu_features ? g->cpu_features : "";
    if (has_feature(f, "+avx512f"))
        return 64;
    if (has_feature(f, "+avx"))
        return 32;
    return 16;
}

int kj_simd_lanes(Gen *g, KjIrFunction *fn)
{
    if (!g->options->cpu_simd || g->options->checks)
        return 0;
    if (fn->kind == KJ_IR_FN_KERNEL) {
        if (fn->uses_syncthreads || fn->uses_syncgrid)
            return 0;
    } else if (fn->kind != KJ_IR_FN_VEC_KERNEL || !is_lifted(fn)) {
        return 0;
    }
    Scan sc = {.g = g, .ok = true};
    scan_fn(&sc, fn, true);
    if (!sc.ok || !arrays_uniform(fn, root_sources(fn)))
        return 0;
    /* A vectorized body without loops is left to the loop vectoriser, which
     * already makes SIMD code of it (add, sin, exp). */
    if (fn->kind == KJ_IR_FN_VEC_KERNEL && !sc.has_loop)
        return 0;
    /* Lanes of the widest float the code uses (else of its widest integer):
     * 4 f64 or 8 f32 in AVX2's 32 bytes. */
    int elem = sc.has_f64 ? 8 : sc.has_f32 ? 4 : sc.has_wide_int ? 8 : 4;
    int lanes = register_bytes(g) / elem;
    return lanes < 2 ? 2 : lanes > 16 ? 16 : lanes;
}

/* ============================================================ conversions */

static LLVMValueRef make_pair(Simd *s, LLVMValueRef re, LLVMValueRef im)
{
    LLVMTypeRef t = LLVMStructTypeInContext(s->g->ctx, (LLVMTypeRef[]){LLVMTypeOf(re), LLVMTypeOf(re)}, 2, 0);
    LLVMValueRef v = LLVMBuildInsertValue(s->b, LLVMGetPoison(t), re, 0, "");
    return LLVMBuildInsertValue(s->b, v, im, 1, "");
}

/*
 * 64-bit integers and f64 on hosts without AVX-512DQ, which have no packed
 * instruction for either conversion: LLVM would convert lane by lane (and
 * the saturating one with a branch per lane).  Both are exact here in a
 * few vector instructions, with the scalar code's results:
 *   i64 -> f64: hi * 2^32 + lo, the halves converted exactly (hi signed or
 *     unsigned, lo unsigned); the one addition rounds once, to nearest, as
 *     the scalar conversion does;
 *   f64 -> i64, saturating: t = trunc(x), hi = floor(t / 2^32) and
 *     lo = t - hi * 2^32 are exact integers of 32 bits, converted and put
 *     together; NaN gives 0, and what is out of range the nearest bound.
 */
static bool split_64bit_conversions(Simd *s)
{
    const char *f = s->g->cpu_features ? s->g->cpu_features : "";
    return strncmp(LLVMGetTarget(s->g->mod), "x86_64", 6) == 0 && !has_feature(f, "+avx512dq");
}

static LLVMValueRef vconst_f64(Simd *s, double v) { return splat_const(s, LLVMConstReal(s->g->t_f64, v)); }

/* Whether every lane of a <W x i1> is set. */
static LLVMValueRef all_lanes(Simd *s, LLVMValueRef m)
{
    LLVMTypeRef bits = LLVMIntTypeInContext(s->g->ctx, (unsigned)s->lanes);
    return LLVMBuildICmp(s->b, LLVMIntEQ, LLVMBuildBitCast(s->b, m, bits, ""), LLVMConstAllOnes(bits), "");
}

/* `fast` when cond holds, else `slow`: both are built by fn on v, each
 * behind its side of a branch, and a phi joins them. */
typedef LLVMValueRef (*ConvertFn)(Simd *s, LLVMValueRef v, bool fast, bool flag);

static LLVMValueRef fast_or_slow(Simd *s, LLVMValueRef cond, ConvertFn fn, LLVMValueRef v, bool flag)
{
    LLVMBasicBlockRef fast_bb = new_block(s->g, "convert.fast"), slow_bb = new_block(s->g, "convert.slow"),
                      done = new_block(s->g, "convert.done");
    LLVMBuildCondBr(s->b, cond, fast_bb, slow_bb);
    LLVMPositionBuilderAtEnd(s->b, fast_bb);
    LLVMValueRef a = fn(s, v, true, flag);
    LLVMBasicBlockRef fast_end = LLVMGetInsertBlock(s->b);
    LLVMBuildBr(s->b, done);
    LLVMPositionBuilderAtEnd(s->b, slow_bb);
    LLVMValueRef b = fn(s, v, false, flag);
    LLVMBasicBlockRef slow_end = LLVMGetInsertBlock(s->b);
    LLVMBuildBr(s->b, done);
    LLVMPositionBuilderAtEnd(s->b, done);
    LLVMValueRef phi = LLVMBuildPhi(s->b, LLVMTypeOf(a), "");
    LLVMAddIncoming(phi, (LLVMValueRef[]){a, b}, (LLVMBasicBlockRef[]){fast_end, slow_end}, 2);
    return phi;
}

static LLVMValueRef i64_to_f64_split(Simd *s, LLVMValueRef v, bool is_signed)
{
    LLVMBuilderRef B = s->b;
    Gen *g = s->g;
    LLVMTypeRef i64v = vec_of(s, g->t_i64), i32v = vec_of(s, g->t_i32), f64v = vec_of(s, g->t_f64);
    LLVMValueRef shift = splat_const(s, LLVMConstInt(g->t_i64, 32, 0));
    LLVMValueRef hi = LLVMBuildTrunc(B, is_signed ? LLVMBuildAShr(B, v, shift, "") : LLVMBuildLShr(B, v, shift, ""),
                                     i32v, "");
    LLVMValueRef lo = LLVMBuildAnd(B, v, splat_const(s, LLVMConstInt(g->t_i64, 0xffffffffu, 0)), "");
    (void)i64v;
    LLVMValueRef hf = is_signed ? LLVMBuildSIToFP(B, hi, f64v, "") : LLVMBuildUIToFP(B, hi, f64v, "");
    LLVMValueRef lf = LLVMBuildSIToFP(B, LLVMBuildTrunc(B, LLVMBuildLShr(B, lo, splat_const(s, LLVMConstInt(g->t_i64, 1, 0)), ""), i32v, ""),
                                      f64v, "");
    /* lo as two exact halves: (lo >> 1) * 2 + (lo & 1), each below 2^31 */
    lf = LLVMBuildFAdd(B, LLVMBuildFMul(B, lf, vconst_f64(s, 2.0), ""),
                       LLVMBuildUIToFP(B, LLVMBuildTrunc(B, LLVMBuildAnd(B, lo, splat_const(s, LLVMConstInt(g->t_i64, 1, 0)), ""),
                                                         i32v, ""), f64v, ""), "");
    return LLVMBuildFAdd(B, LLVMBuildFMul(B, hf, vconst_f64(s, 4294967296.0), ""), lf, "");
}

static LLVMValueRef f64_to_i64_sat_split(Simd *s, LLVMValueRef x)
{
    LLVMBuilderRef B = s->b;
    Gen *g = s->g;
    LLVMTypeRef f64v = vec_of(s, g->t_f64), i32v = vec_of(s, g->t_i32), i64v = vec_of(s, g->t_i64);
    LLVMValueRef t = kj_codegen_call_intrinsic(g, "llvm.trunc", &f64v, 1, &x, 1);
    /* in range (and not NaN): [-2^63, 2^63) */
    LLVMValueRef low_ok = LLVMBuildFCmp(B, LLVMRealOGE, t, vconst_f64(s, -9223372036854775808.0), "");
    LLVMValueRef high_ok = LLVMBuildFCmp(B, LLVMRealOLT, t, vconst_f64(s, 9223372036854775808.0), "");
    LLVMValueRef in_range = LLVMBuildAnd(B, low_ok, high_ok, "");
    LLVMValueRef safe = LLVMBuildSelect(B, in_range, t, LLVMConstNull(f64v), "");
    LLVMValueRef hf = LLVMBuildFMul(B, safe, vconst_f64(s, 1.0 / 4294967296.0), "");
    hf = kj_codegen_call_intrinsic(g, "llvm.floor", &f64v, 1, &hf, 1);
    LLVMValueRef lf = LLVMBuildFSub(B, safe, LLVMBuildFMul(B, hf, vconst_f64(s, 4294967296.0), ""), "");
    /* hi in [-2^31, 2^31); lo in [0, 2^32), converted as lo - 2^31 */
    LLVMValueRef hi = LLVMBuildFPToSI(B, hf, i32v, "");
    LLVMValueRef lo = LLVMBuildFPToSI(B, LLVMBuildFSub(B, lf, vconst_f64(s, 2147483648.0), ""), i32v, "");
    lo = LLVMBuildXor(B, lo, splat_const(s, LLVMConstInt(g->t_i32, 0x80000000u, 0)), "");
    LLVMValueRef r = LLVMBuildOr(B, LLVMBuildShl(B, LLVMBuildSExt(B, hi, i64v, ""), splat_const(s, LLVMConstInt(g->t_i64, 32, 0)), ""),
                                 LLVMBuildZExt(B, lo, i64v, ""), "");
    LLVMValueRef bound = LLVMBuildSelect(B, low_ok, splat_const(s, LLVMConstInt(g->t_i64, (unsigned long long)INT64_MAX, 0)),
                                         splat_const(s, LLVMConstInt(g->t_i64, (unsigned long long)INT64_MIN, 0)), "");
    LLVMValueRef is_nan = LLVMBuildFCmp(B, LLVMRealUNO, x, x, "");
    bound = LLVMBuildSelect(B, is_nan, LLVMConstNull(i64v), bound, "");
    return LLVMBuildSelect(B, in_range, r, bound, "");
}

/* The common case first: values that fit 32 bits convert in one packed
 * instruction each way; the split forms above take the rest. */
static LLVMValueRef i64_to_f64_step(Simd *s, LLVMValueRef v, bool fast, bool is_signed)
{
    if (!fast)
        return i64_to_f64_split(s, v, is_signed);
    LLVMValueRef narrow = LLVMBuildTrunc(s->b, v, vec_of(s, s->g->t_i32), "");
    return LLVMBuildSIToFP(s->b, narrow, vec_of(s, s->g->t_f64), "");
}

static LLVMValueRef i64_to_f64(Simd *s, LLVMValueRef v, bool is_signed)
{
    /* fits: the value is its low half, sign-extended (non-negative for u64) */
    LLVMValueRef narrow = LLVMBuildTrunc(s->b, v, vec_of(s, s->g->t_i32), "");
    LLVMValueRef back = LLVMBuildSExt(s->b, narrow, vec_of(s, s->g->t_i64), "");
    LLVMValueRef fits = LLVMBuildICmp(s->b, LLVMIntEQ, back, v, "");
    if (!is_signed)
        fits = LLVMBuildAnd(s->b, fits, LLVMBuildICmp(s->b, LLVMIntSGE, v, LLVMConstNull(LLVMTypeOf(v)), ""), "");
    return fast_or_slow(s, all_lanes(s, fits), i64_to_f64_step, v, is_signed);
}

static LLVMValueRef f64_to_i64_step(Simd *s, LLVMValueRef x, bool fast, bool unused)
{
    (void)unused;
    if (!fast)
        return f64_to_i64_sat_split(s, x);
    LLVMValueRef narrow = LLVMBuildFPToSI(s->b, x, vec_of(s, s->g->t_i32), "");
    return LLVMBuildSExt(s->b, narrow, vec_of(s, s->g->t_i64), "");
}

static LLVMValueRef f64_to_i64_sat(Simd *s, LLVMValueRef x)
{
    /* truncation lands in i32's range (NaN fails both tests) */
    LLVMValueRef above = LLVMBuildFCmp(s->b, LLVMRealOGT, x, vconst_f64(s, -2147483649.0), "");
    LLVMValueRef below = LLVMBuildFCmp(s->b, LLVMRealOLT, x, vconst_f64(s, 2147483648.0), "");
    return fast_or_slow(s, all_lanes(s, LLVMBuildAnd(s->b, above, below, "")), f64_to_i64_step, x, false);
}

/* kj_codegen_convert on vectors (f16 and bf16 never get here). */
static LLVMValueRef vconvert(Simd *s, LLVMValueRef v, const KjType *from, const KjType *to)
{
    LLVMBuilderRef B = s->b;
    if (from == to)
        return v;
    LLVMTypeRef dst = vty(s, to);
    if (kj_type_is_complex(to)) {
        const KjType *part = kj_type_complex_part(to);
        if (kj_type_is_complex(from)) {
            const KjType *fpart = kj_type_complex_part(from);
            return make_pair(s, vconvert(s, LLVMBuildExtractValue(B, v, 0, ""), fpart, part),
                             vconvert(s, LLVMBuildExtractValue(B, v, 1, ""), fpart, part));
        }
        LLVMValueRef re = vconvert(s, v, from, part);
        return make_pair(s, re, LLVMConstNull(LLVMTypeOf(re)));
    }
    if (kj_type_is_complex(from))
        return vconvert(s, LLVMBuildExtractValue(B, v, 0, ""), kj_type_complex_part(from), to);
    if (to->kind == KJ_TYPE_BOOL)
        return kj_type_is_float(from) ? LLVMBuildFCmp(B, LLVMRealUNE, v, LLVMConstNull(LLVMTypeOf(v)), "")
                                      : LLVMBuildICmp(B, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
    if (from->kind == KJ_TYPE_BOOL)
        return kj_type_is_float(to) ? LLVMBuildUIToFP(B, v, dst, "") : LLVMBuildZExt(B, v, dst, "");
    if (kj_type_is_int(from) && kj_type_is_int(to)) {
        int fb = kj_type_int_bits(from), tb = kj_type_int_bits(to);
        if (fb == tb)
            return v;
        if (fb > tb)
            return LLVMBuildTrunc(B, v, dst, "");
        return kj_type_is_signed(from) ? LLVMBuildSExt(B, v, dst, "") : LLVMBuildZExt(B, v, dst, "");
    }
    if (kj_type_is_int(from) && kj_type_is_float(to)) {
        if (kj_type_int_bits(from) == 64 && to->kind == KJ_TYPE_F64 && split_64bit_conversions(s))
            return i64_to_f64(s, v, kj_type_is_signed(from));
        return kj_type_is_signed(from) ? LLVMBuildSIToFP(B, v, dst, "") : LLVMBuildUIToFP(B, v, dst, "");
    }
    if (from->kind == KJ_TYPE_F64 && (to->kind == KJ_TYPE_I64) && split_64bit_conversions(s))
        return f64_to_i64_sat(s, v);
    if (kj_type_is_float(from) && kj_type_is_int(to)) {
        LLVMTypeRef ts[2] = {dst, LLVMTypeOf(v)};
        return kj_codegen_call_intrinsic(s->g, kj_type_is_signed(to) ? "llvm.fptosi.sat" : "llvm.fptoui.sat",
                                         ts, 2, &v, 1);
    }
    if (kj_type_is_float(from) && kj_type_is_float(to))
        return kj_type_size(to) > kj_type_size(from) ? LLVMBuildFPExt(B, v, dst, "")
                                                     : LLVMBuildFPTrunc(B, v, dst, "");
    kj_die("no vector conversion from %s to %s", kj_type_name(from), kj_type_name(to));
}

/* ============================================================ expressions */

static LLVMValueRef vexpr(Simd *s, KjIrExpr *e);

static bool varying(Simd *s, const KjIrExpr *e) { return kj_uniform_expr_varying(s->u, e); }

/* e's value in every lane, of e's type: a varying value as lowered here, a
 * uniform one by the shared code and repeated. */
static LLVMValueRef lanes_of(Simd *s, KjIrExpr *e, const KjType *to)
{
    LLVMValueRef v = varying(s, e) ? vexpr(s, e) : splat(s, kj_codegen_expr(s->g, e));
    return vconvert(s, v, e->type, to);
}

/* Whether e reads memory or calls: code that must not run for no lane. */
static bool touches_memory(const KjIrExpr *e)
{
    if (e->op == KJ_IR_LOAD || e->op == KJ_IR_CALL || e->op == KJ_IR_ATOMIC)
        return true;
    for (int i = 0; i < e->arg_count; i++)
        if (touches_memory(e->args[i]))
            return true;
    return false;
}

/* e under `mask`: evaluated only when some lane is in it, when it touches
 * memory (a uniform load behind `i < n &&` must not run for no lane). */
static LLVMValueRef lanes_under(Simd *s, KjIrExpr *e, const KjType *to, LLVMValueRef mask)
{
    LLVMValueRef saved = s->mask;
    s->mask = mask;
    LLVMValueRef v;
    if (!touches_memory(e)) {
        v = lanes_of(s, e, to);
    } else {
        LLVMBasicBlockRef before = LLVMGetInsertBlock(s->b);
        LLVMBasicBlockRef run = new_block(s->g, "lanes.run"), done = new_block(s->g, "lanes.done");
        LLVMBuildCondBr(s->b, any_lane(s, mask), run, done);
        LLVMPositionBuilderAtEnd(s->b, run);
        LLVMValueRef r = lanes_of(s, e, to);
        LLVMBasicBlockRef run_end = LLVMGetInsertBlock(s->b);
        LLVMBuildBr(s->b, done);
        LLVMPositionBuilderAtEnd(s->b, done);
        v = LLVMBuildPhi(s->b, LLVMTypeOf(r), "");
        LLVMAddIncoming(v, (LLVMValueRef[]){LLVMConstNull(LLVMTypeOf(r)), r},
                        (LLVMBasicBlockRef[]){before, run_end}, 2);
    }
    s->mask = saved;
    return v;
}

static LLVMValueRef vint_div(Simd *s, KjIrOp op, const KjType *type, LLVMValueRef a, LLVMValueRef d)
{
    LLVMBuilderRef B = s->b;
    LLVMTypeRef t = vty(s, type);
    LLVMValueRef zero = LLVMConstNull(t), one = splat_const(s, LLVMConstInt(llty(s->g, type), 1, 0));
    LLVMValueRef is_zero = LLVMBuildICmp(B, LLVMIntEQ, d, zero, "");
    if (!kj_type_is_signed(type)) {
        LLVMValueRef safe = LLVMBuildSelect(B, is_zero, one, d, "");
        return op == KJ_IR_DIV ? LLVMBuildUDiv(B, a, safe, "") : LLVMBuildURem(B, a, safe, "");
    }
    /* as gen_int_div: divisors 0 and -1 become 1 (in inactive lanes too) */
    LLVMValueRef is_minus_one = LLVMBuildICmp(B, LLVMIntEQ, d, LLVMConstAllOnes(t), "");
    LLVMValueRef safe = LLVMBuildSelect(B, LLVMBuildOr(B, is_zero, is_minus_one, ""), one, d, "");
    if (op == KJ_IR_REM)
        return LLVMBuildSRem(B, a, safe, "");
    LLVMValueRef q = LLVMBuildSDiv(B, a, safe, "");
    return LLVMBuildSelect(B, is_minus_one, LLVMBuildSub(B, zero, a, ""), q, "");
}

/* gen_arith on vectors; b of the result's type except a shift's count. */
static LLVMValueRef varith(Simd *s, KjIrOp op, const KjType *type, LLVMValueRef a, LLVMValueRef b,
                           const KjType *btype)
{
    LLVMBuilderRef B = s->b;
    if (kj_type_is_complex(type))
        return kj_codegen_complex_arith(s->g, op, a, b);
    if (kj_type_is_float(type)) {
        switch (op) {
        case KJ_IR_ADD: return LLVMBuildFAdd(B, a, b, "");
        case KJ_IR_SUB: return LLVMBuildFSub(B, a, b, "");
        case KJ_IR_MUL: return LLVMBuildFMul(B, a, b, "");
        case KJ_IR_DIV: return LLVMBuildFDiv(B, a, b, "");
        case KJ_IR_REM: return LLVMBuildFRem(B, a, b, "");
        default: kj_unreachable();
        }
    }
    switch (op) {
    case KJ_IR_ADD: return LLVMBuildAdd(B, a, b, "");
    case KJ_IR_SUB: return LLVMBuildSub(B, a, b, "");
    case KJ_IR_MUL: return LLVMBuildMul(B, a, b, "");
    case KJ_IR_DIV: case KJ_IR_REM: return vint_div(s, op, type, a, b);
    case KJ_IR_BITAND: return LLVMBuildAnd(B, a, b, "");
    case KJ_IR_BITOR: return LLVMBuildOr(B, a, b, "");
    case KJ_IR_BITXOR: return LLVMBuildXor(B, a, b, "");
    case KJ_IR_SHL: case KJ_IR_SHR: {
        int bits = kj_type_int_bits(type), bbits = kj_type_int_bits(btype);
        LLVMTypeRef t = vty(s, type);
        if (bbits > bits)
            b = LLVMBuildTrunc(B, b, t, "");
        else if (bbits < bits)
            b = LLVMBuildZExt(B, b, t, "");
        b = LLVMBuildAnd(B, b, splat_const(s, LLVMConstInt(llty(s->g, type), (unsigned)bits - 1, 0)), "");
        if (op == KJ_IR_SHL)
            return LLVMBuildShl(B, a, b, "");
        return kj_type_is_signed(type) ? LLVMBuildAShr(B, a, b, "") : LLVMBuildLShr(B, a, b, "");
    }
    default: kj_unreachable();
    }
}

static LLVMValueRef vcompare(Simd *s, KjIrOp op, const KjType *type, LLVMValueRef a, LLVMValueRef b)
{
    LLVMBuilderRef B = s->b;
    if (kj_type_is_complex(type)) {
        LLVMValueRef re = LLVMBuildFCmp(B, LLVMRealOEQ, LLVMBuildExtractValue(B, a, 0, ""),
                                        LLVMBuildExtractValue(B, b, 0, ""), "");
        LLVMValueRef im = LLVMBuildFCmp(B, LLVMRealOEQ, LLVMBuildExtractValue(B, a, 1, ""),
                                        LLVMBuildExtractValue(B, b, 1, ""), "");
        LLVMValueRef eq = LLVMBuildAnd(B, re, im, "");
        return op == KJ_IR_EQ ? eq : LLVMBuildNot(B, eq, "");
    }
    if (kj_type_is_float(type)) {
        static const LLVMRealPredicate preds[] = {
            [KJ_IR_EQ] = LLVMRealOEQ, [KJ_IR_NE] = LLVMRealUNE, [KJ_IR_LT] = LLVMRealOLT,
            [KJ_IR_LE] = LLVMRealOLE, [KJ_IR_GT] = LLVMRealOGT, [KJ_IR_GE] = LLVMRealOGE};
        return LLVMBuildFCmp(B, preds[op], a, b, "");
    }
    bool sgn = kj_type_is_signed(type);
    LLVMIntPredicate p;
    switch (op) {
    case KJ_IR_EQ: p = LLVMIntEQ; break;
    case KJ_IR_NE: p = LLVMIntNE; break;
    case KJ_IR_LT: p = sgn ? LLVMIntSLT : LLVMIntULT; break;
    case KJ_IR_LE: p = sgn ? LLVMIntSLE : LLVMIntULE; break;
    case KJ_IR_GT: p = sgn ? LLVMIntSGT : LLVMIntUGT; break;
    case KJ_IR_GE: p = sgn ? LLVMIntSGE : LLVMIntUGE; break;
    default: kj_unreachable();
    }
    return LLVMBuildICmp(B, p, a, b, "");
}

/* ---- math */

/* fn applied lane by lane through the scalar lowering. */
static LLVMValueRef math_per_lane(Simd *s, KjMathFn fn, LLVMValueRef *a, int arity)
{
    LLVMValueRef out = NULL;
    for (int k = 0; k < s->lanes; k++) {
        LLVMValueRef lane[3];
        for (int i = 0; i < arity; i++)
            lane[i] = LLVMBuildExtractElement(s->b, a[i], const_i32(s->g, k), "");
        LLVMValueRef r = kj_codegen_math(s->g, fn, lane, arity);
        if (!out)
            out = LLVMGetPoison(vec_of(s, LLVMTypeOf(r)));
        out = LLVMBuildInsertElement(s->b, out, r, const_i32(s->g, k), "");
    }
    return out;
}

/* Lanes [first, first + count) of v. */
static LLVMValueRef sub_vector(Simd *s, LLVMValueRef v, int first, int count)
{
    LLVMValueRef idx[64];
    for (int k = 0; k < count; k++)
        idx[k] = const_i32(s->g, first + k);
    return LLVMBuildShuffleVector(s->b, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(idx, (unsigned)count), "");
}

/* A libmvec function: _ZGV<isa>N<lanes><v...>_<name>, the widest ISA the
 * host has whose lane count divides ours, called on each piece. */
static LLVMValueRef math_libmvec(Simd *s, KjMathFn fn, const char *libm, LLVMValueRef *a, int arity)
{
    Gen *g = s->g;
    LLVMTypeRef elem = LLVMGetElementType(LLVMTypeOf(a[0]));
    bool is_f32 = elem == g->t_f32;
    struct { bool ok; char isa; int lanes_f64; } isas[3] = {
        {g->vec_avx512, 'e', 8}, {g->vec_avx2, 'd', 4}, {g->vec_sse, 'b', 2}};
    for (int i = 0; i < 3; i++) {
        int piece = isas[i].lanes_f64 * (is_f32 ? 2 : 1);
        if (!isas[i].ok || piece > s->lanes || s->lanes % piece != 0)
            continue;
        char name[96];
        snprintf(name, sizeof name, "_ZGV%cN%d%s_%s%s", isas[i].isa, piece, arity == 1 ? "v" : "vv", libm,
                 is_f32 ? "f" : "");
        LLVMTypeRef pt = LLVMVectorType(elem, (unsigned)piece);
        LLVMTypeRef ps[2] = {pt, pt};
        LLVMTypeRef ft = LLVMFunctionType(pt, ps, (unsigned)arity, 0);
        LLVMValueRef callee = LLVMGetNamedFunction(g->mod, name);
        if (!callee) {
            callee = LLVMAddFunction(g->mod, name, ft);
            kj_codegen_add_fn_attr(g, callee, "nounwind");
            LLVMAddAttributeAtIndex(callee, LLVMAttributeFunctionIndex, memory_none(g));
        }
        LLVMValueRef out = LLVMGetPoison(LLVMTypeOf(a[0]));
        for (int first = 0; first < s->lanes; first += piece) {
            LLVMValueRef args[2];
            for (int j = 0; j < arity; j++)
                args[j] = piece == s->lanes ? a[j] : sub_vector(s, a[j], first, piece);
            LLVMValueRef r = LLVMBuildCall2(s->b, ft, callee, args, (unsigned)arity, "");
            if (piece == s->lanes)
                return r;
            for (int k = 0; k < piece; k++)
                out = LLVMBuildInsertElement(s->b, out, LLVMBuildExtractElement(s->b, r, const_i32(g, k), ""),
                                             const_i32(g, first + k), "");
        }
        return out;
    }
    return math_per_lane(s, fn, a, arity);
}

static LLVMValueRef vmath(Simd *s, KjMathFn fn, LLVMValueRef *a, int arity)
{
    Gen *g = s->g;
    LLVMTypeRef t = LLVMTypeOf(a[0]);
    switch (fn) {
    case KJ_MATH_SQRT: return kj_codegen_call_intrinsic(g, "llvm.sqrt", &t, 1, a, 1);
    case KJ_MATH_FABS: return kj_codegen_call_intrinsic(g, "llvm.fabs", &t, 1, a, 1);
    case KJ_MATH_FLOOR: return kj_codegen_call_intrinsic(g, "llvm.floor", &t, 1, a, 1);
    case KJ_MATH_CEIL: return kj_codegen_call_intrinsic(g, "llvm.ceil", &t, 1, a, 1);
    case KJ_MATH_TRUNC: return kj_codegen_call_intrinsic(g, "llvm.trunc", &t, 1, a, 1);
    case KJ_MATH_FMA: return kj_codegen_call_intrinsic(g, "llvm.fma", &t, 1, a, 3);
    case KJ_MATH_FMIN: return kj_codegen_call_intrinsic(g, "llvm.minnum", &t, 1, a, 2);
    case KJ_MATH_FMAX: return kj_codegen_call_intrinsic(g, "llvm.maxnum", &t, 1, a, 2);
    case KJ_MATH_COPYSIGN: return kj_codegen_call_intrinsic(g, "llvm.copysign", &t, 1, a, 2);
    case KJ_MATH_ROUND: return kj_codegen_call_intrinsic(g, "llvm.round", &t, 1, a, 1);
    case KJ_MATH_FMOD: return LLVMBuildFRem(s->b, a[0], a[1], "");
    case KJ_MATH_ISNAN: return LLVMBuildFCmp(s->b, LLVMRealUNO, a[0], a[0], "");
    case KJ_MATH_ISINF:
    case KJ_MATH_ISFINITE: {
        LLVMValueRef mag = kj_codegen_call_intrinsic(g, "llvm.fabs", &t, 1, a, 1);
        LLVMValueRef inf = splat_const(s, LLVMConstReal(LLVMGetElementType(t), __builtin_inf()));
        return LLVMBuildFCmp(s->b, fn == KJ_MATH_ISINF ? LLVMRealOEQ : LLVMRealOLT, mag, inf, "");
    }
    default: {
        bool libmvec;
        const char *libm = kj_codegen_math_libm(fn, &libmvec);
        if (libmvec && (g->vec_sse || g->vec_avx2 || g->vec_avx512))
            return math_libmvec(s, fn, libm, a, arity);
        return math_per_lane(s, fn, a, arity);
    }
    }
}

/* x ** n for a constant n, as ipow_const: square-and-multiply. */
static LLVMValueRef vipow_const(Simd *s, const KjType *type, LLVMValueRef x, int64_t n)
{
    LLVMValueRef one;
    if (kj_type_is_complex(type)) {
        LLVMTypeRef pt = vty(s, kj_type_complex_part(type));
        one = make_pair(s, splat_const(s, LLVMConstReal(LLVMGetElementType(pt), 1.0)), LLVMConstNull(pt));
    } else if (kj_type_is_float(type)) {
        one = splat_const(s, LLVMConstReal(llty(s->g, type), 1.0));
    } else {
        one = splat_const(s, LLVMConstInt(llty(s->g, type), 1, 0));
    }
    uint64_t m = n < 0 ? (uint64_t)0 - (uint64_t)n : (uint64_t)n;
    LLVMValueRef result = NULL, base = x;
    while (m) {
        if (m & 1)
            result = result ? varith(s, KJ_IR_MUL, type, result, base, type) : base;
        m >>= 1;
        if (m)
            base = varith(s, KJ_IR_MUL, type, base, base, type);
    }
    if (!result)
        result = one;
    if (n < 0)
        result = varith(s, KJ_IR_DIV, type, one, result, type);
    return result;
}

/* ---- memory */

/* The element offsets of a[indices] in every lane (i64 vector), and whether
 * they are known to run lane by lane (contiguous) when the last stride is 1. */
static LLVMValueRef offsets(Simd *s, const ArrayVal *a, KjIrExpr **indices, int count, bool flat)
{
    const KjType *i64 = kj_type_scalar(KJ_TYPE_I64);
    if (flat)
        return lanes_of(s, indices[0], i64);
    LLVMValueRef offset = NULL;
    for (int k = 0; k < count; k++) {
        LLVMValueRef term = LLVMBuildMul(s->b, lanes_of(s, indices[k], i64), splat(s, a->strides[k]), "");
        offset = offset ? LLVMBuildAdd(s->b, offset, term, "") : term;
    }
    return offset;
}

static LLVMValueRef align_of(Simd *s, const KjType *elem)
{
    return const_i32(s->g, (int32_t)kj_type_size(elem));
}

/* Runs `contiguous` when the lanes' elements are neighbours (the access is
 * uniform + lane and, unless flat, the last stride is 1), else `general`:
 * the two build the access at the offsets and return its value (or NULL). */
typedef LLVMValueRef (*AccessFn)(Simd *s, const ArrayVal *a, LLVMValueRef offs, LLVMValueRef value, bool contiguous);

static LLVMValueRef access(Simd *s, const ArrayVal *a, KjIrExpr **indices, int count, bool flat,
                          LLVMValueRef value, AccessFn fn)
{
    LLVMValueRef offs = offsets(s, a, indices, count, flat);
    if (kj_uniform_access(s->u, indices, count) != KJ_ACCESS_CONTIGUOUS)
        return fn(s, a, offs, value, false);
    if (flat)
        return fn(s, a, offs, value, true);
    /* a stride that only the call knows: both ways, picked at run time (the
     * contiguous variants' constant stride folds the test away) */
    LLVMValueRef unit = LLVMBuildICmp(s->b, LLVMIntEQ, a->strides[count - 1], const_i64(s->g, 1), "");
    LLVMBasicBlockRef yes = new_block(s->g, "access.contiguous"), no = new_block(s->g, "access.general"),
                      done = new_block(s->g, "access.done");
    LLVMBuildCondBr(s->b, unit, yes, no);
    LLVMPositionBuilderAtEnd(s->b, yes);
    LLVMValueRef r1 = fn(s, a, offs, value, true);
    LLVMBasicBlockRef yes_end = LLVMGetInsertBlock(s->b);
    LLVMBuildBr(s->b, done);
    LLVMPositionBuilderAtEnd(s->b, no);
    LLVMValueRef r2 = fn(s, a, offs, value, false);
    LLVMBasicBlockRef no_end = LLVMGetInsertBlock(s->b);
    LLVMBuildBr(s->b, done);
    LLVMPositionBuilderAtEnd(s->b, done);
    if (!r1)
        return NULL;
    LLVMValueRef phi = LLVMBuildPhi(s->b, LLVMTypeOf(r1), "");
    LLVMAddIncoming(phi, (LLVMValueRef[]){r1, r2}, (LLVMBasicBlockRef[]){yes_end, no_end}, 2);
    return phi;
}

/* A complex element's parts in every lane: the addresses of part `part`
 * (0 real, 1 imaginary) of the elements at offs. */
static LLVMValueRef part_addresses(Simd *s, const ArrayVal *a, LLVMValueRef offs, int part)
{
    LLVMValueRef idx[2] = {offs, const_i32(s->g, part)};
    return LLVMBuildGEP2(s->b, llty(s->g, a->elem), a->data, idx, 2, "");
}

/* Complex elements go part by part through gathers and scatters. */
static LLVMValueRef complex_access(Simd *s, const ArrayVal *a, LLVMValueRef offs, LLVMValueRef value)
{
    Gen *g = s->g;
    const KjType *part_type = kj_type_complex_part(a->elem);
    LLVMTypeRef pt = vty(s, part_type);
    LLVMTypeRef ts[2] = {pt, vec_of(s, g->t_ptr)};
    LLVMValueRef parts[2];
    for (int k = 0; k < 2; k++) {
        LLVMValueRef ps = part_addresses(s, a, offs, k);
        if (value) {
            LLVMValueRef args[4] = {LLVMBuildExtractValue(s->b, value, (unsigned)k, ""), ps,
                                    align_of(s, part_type), s->mask};
            kj_codegen_call_intrinsic(g, "llvm.masked.scatter", ts, 2, args, 4);
        } else {
            LLVMValueRef args[4] = {ps, align_of(s, part_type), s->mask, LLVMConstNull(pt)};
            parts[k] = kj_codegen_call_intrinsic(g, "llvm.masked.gather", ts, 2, args, 4);
        }
    }
    return value ? NULL : make_pair(s, parts[0], parts[1]);
}

static LLVMValueRef load_at(Simd *s, const ArrayVal *a, LLVMValueRef offs, LLVMValueRef unused, bool contiguous)
{
    (void)unused;
    Gen *g = s->g;
    if (kj_type_is_complex(a->elem))
        return complex_access(s, a, offs, NULL);
    LLVMTypeRef mt = vec_of(s, memty(g, a->elem));
    LLVMValueRef v;
    if (contiguous) {
        LLVMValueRef first = LLVMBuildExtractElement(s->b, offs, const_i32(g, 0), "");
        LLVMValueRef p = LLVMBuildInBoundsGEP2(s->b, memty(g, a->elem), a->data, &first, 1, "");
        LLVMTypeRef ts[2] = {mt, g->t_ptr};
        LLVMValueRef args[4] = {p, align_of(s, a->elem), s->mask, LLVMConstNull(mt)};
        v = kj_codegen_call_intrinsic(g, "llvm.masked.load", ts, 2, args, 4);
    } else {
        LLVMValueRef ps = LLVMBuildGEP2(s->b, memty(g, a->elem), a->data, &offs, 1, "");
        LLVMTypeRef ts[2] = {mt, vec_of(s, g->t_ptr)};
        if (s->wide_masks) {
            /* Without AVX-512 LLVM expands a masked gather into a branch
             * per lane: when every lane is active (the usual case), an
             * unmasked one, lane by lane without branches. */
            LLVMBasicBlockRef all_bb = new_block(g, "gather.all"), some_bb = new_block(g, "gather.some"),
                              done = new_block(g, "gather.done");
            LLVMBuildCondBr(s->b, all_lanes(s, s->mask), all_bb, some_bb);
            LLVMPositionBuilderAtEnd(s->b, all_bb);
            LLVMValueRef all_args[4] = {ps, align_of(s, a->elem), LLVMConstAllOnes(s->mask_type), LLVMConstNull(mt)};
            LLVMValueRef all = kj_codegen_call_intrinsic(g, "llvm.masked.gather", ts, 2, all_args, 4);
            LLVMBuildBr(s->b, done);
            LLVMPositionBuilderAtEnd(s->b, some_bb);
            LLVMValueRef some_args[4] = {ps, align_of(s, a->elem), s->mask, LLVMConstNull(mt)};
            LLVMValueRef some = kj_codegen_call_intrinsic(g, "llvm.masked.gather", ts, 2, some_args, 4);
            LLVMBuildBr(s->b, done);
            LLVMPositionBuilderAtEnd(s->b, done);
            v = LLVMBuildPhi(s->b, mt, "");
            LLVMAddIncoming(v, (LLVMValueRef[]){all, some}, (LLVMBasicBlockRef[]){all_bb, some_bb}, 2);
        } else {
            LLVMValueRef args[4] = {ps, align_of(s, a->elem), s->mask, LLVMConstNull(mt)};
            v = kj_codegen_call_intrinsic(g, "llvm.masked.gather", ts, 2, args, 4);
        }
    }
    if (a->elem->kind == KJ_TYPE_BOOL)
        v = LLVMBuildICmp(s->b, LLVMIntNE, v, LLVMConstNull(mt), "");
    return v;
}

static LLVMValueRef store_at(Simd *s, const ArrayVal *a, LLVMValueRef offs, LLVMValueRef value, bool contiguous)
{
    Gen *g = s->g;
    if (kj_type_is_complex(a->elem))
        return complex_access(s, a, offs, value);
    LLVMTypeRef mt = vec_of(s, memty(g, a->elem));
    if (a->elem->kind == KJ_TYPE_BOOL)
        value = LLVMBuildZExt(s->b, value, mt, "");
    if (contiguous) {
        LLVMValueRef first = LLVMBuildExtractElement(s->b, offs, const_i32(g, 0), "");
        LLVMValueRef p = LLVMBuildInBoundsGEP2(s->b, memty(g, a->elem), a->data, &first, 1, "");
        LLVMTypeRef ts[2] = {mt, g->t_ptr};
        LLVMValueRef args[4] = {value, p, align_of(s, a->elem), s->mask};
        kj_codegen_call_intrinsic(g, "llvm.masked.store", ts, 2, args, 4);
    } else {
        /* lanes that meet at one element store in lane order: the last
         * active lane's value stays, as when the threads run one by one */
        LLVMValueRef ps = LLVMBuildGEP2(s->b, memty(g, a->elem), a->data, &offs, 1, "");
        LLVMTypeRef ts[2] = {mt, vec_of(s, g->t_ptr)};
        LLVMValueRef args[4] = {value, ps, align_of(s, a->elem), s->mask};
        kj_codegen_call_intrinsic(g, "llvm.masked.scatter", ts, 2, args, 4);
    }
    return NULL;
}

/* ---- lane by lane */

/* An atomic for each active lane, in lane order. */
static LLVMValueRef vatomic(Simd *s, KjIrExpr *e)
{
    Gen *g = s->g;
    ArrayVal a;
    kj_codegen_array(g, e->args[0], &a);
    int ndim = a.ndim;
    LLVMValueRef offs = offsets(s, &a, e->args + 1, ndim, false);
    LLVMValueRef value = lanes_of(s, e->args[1 + ndim], e->type);
    LLVMValueRef swap = e->atomic == KJ_ATOMIC_CAS ? lanes_of(s, e->args[2 + ndim], e->type) : NULL;
    LLVMValueRef result_slot = entry_alloca(s, vty(s, e->type), "atomic.old");
    LLVMBuildStore(s->b, LLVMConstNull(vty(s, e->type)), result_slot);
    bool is_float = kj_type_is_float(e->type), sgn = kj_type_is_signed(e->type);
    LLVMAtomicOrdering order = g->target->atomic_ordering;
    for (int k = 0; k < s->lanes; k++) {
        LLVMValueRef lane = const_i32(g, k);
        LLVMBasicBlockRef run = new_block(g, "atomic.lane"), next = new_block(g, "atomic.next");
        LLVMBuildCondBr(s->b, LLVMBuildExtractElement(s->b, s->mask, lane, ""), run, next);
        LLVMPositionBuilderAtEnd(s->b, run);
        LLVMValueRef off = LLVMBuildExtractElement(s->b, offs, lane, "");
        LLVMValueRef p = LLVMBuildInBoundsGEP2(s->b, memty(g, a.elem), a.data, &off, 1, "");
        LLVMValueRef v = LLVMBuildExtractElement(s->b, value, lane, ""), old;
        if (e->atomic == KJ_ATOMIC_CAS) {
            LLVMValueRef nv = LLVMBuildExtractElement(s->b, swap, lane, "");
            LLVMValueRef pair = LLVMBuildAtomicCmpXchg(s->b, p, v, nv, order, order, 0);
            old = LLVMBuildExtractValue(s->b, pair, 0, "");
        } else {
            LLVMAtomicRMWBinOp op;
            switch (e->atomic) {
            case KJ_ATOMIC_ADD: op = is_float ? LLVMAtomicRMWBinOpFAdd : LLVMAtomicRMWBinOpAdd; break;
            case KJ_ATOMIC_SUB: op = is_float ? LLVMAtomicRMWBinOpFSub : LLVMAtomicRMWBinOpSub; break;
            case KJ_ATOMIC_MIN: op = is_float ? LLVMAtomicRMWBinOpFMin : sgn ? LLVMAtomicRMWBinOpMin : LLVMAtomicRMWBinOpUMin; break;
            case KJ_ATOMIC_MAX: op = is_float ? LLVMAtomicRMWBinOpFMax : sgn ? LLVMAtomicRMWBinOpMax : LLVMAtomicRMWBinOpUMax; break;
            case KJ_ATOMIC_EXCH: op = LLVMAtomicRMWBinOpXchg; break;
            case KJ_ATOMIC_AND: op = LLVMAtomicRMWBinOpAnd; break;
            case KJ_ATOMIC_OR: op = LLVMAtomicRMWBinOpOr; break;
            case KJ_ATOMIC_XOR: op = LLVMAtomicRMWBinOpXor; break;
            case KJ_ATOMIC_INC: op = LLVMAtomicRMWBinOpUIncWrap; break;
            case KJ_ATOMIC_DEC: op = LLVMAtomicRMWBinOpUDecWrap; break;
            default: kj_unreachable();
            }
            old = LLVMBuildAtomicRMW(s->b, op, p, v, order, 0);
        }
        LLVMValueRef all = LLVMBuildLoad2(s->b, vty(s, e->type), result_slot, "");
        LLVMBuildStore(s->b, LLVMBuildInsertElement(s->b, all, old, lane, ""), result_slot);
        LLVMBuildBr(s->b, next);
        LLVMPositionBuilderAtEnd(s->b, next);
    }
    return LLVMBuildLoad2(s->b, vty(s, e->type), result_slot, "");
}

/* ---- calls */

static void set_function_attrs(Gen *g, LLVMValueRef fn)
{
    kj_codegen_add_fn_attr(g, fn, "nounwind");
    if (g->cpu_name && *g->cpu_name)
        kj_codegen_add_string_attr(g, fn, "target-cpu", g->cpu_name);
    if (g->cpu_features && *g->cpu_features)
        kj_codegen_add_string_attr(g, fn, "target-features", g->cpu_features);
    g->target->function_attrs(g, fn);
    kj_codegen_add_fn_attr(g, fn, "alwaysinline");
}

/* Parameters of fn's SIMD function: arrays as in its impl, scalars as
 * vectors when their bit is in `vector_scalars`, then `extra`. */
static LLVMTypeRef simd_type(Simd *s, const KjIrFunction *fn, uint64_t vector_scalars, LLVMTypeRef ret,
                             const LLVMTypeRef *extra, int extra_count)
{
    Gen *g = s->g;
    int cap = extra_count + 1;
    for (int i = 0; i < fn->param_count; i++)
        cap += 1 + 2 * KJ_MAX_DIMS;
    LLVMTypeRef *ps = kj_xmalloc(sizeof *ps * (size_t)cap);
    int n = 0;
    for (int i = 0; i < fn->param_count; i++) {
        const KjType *t = fn->params[i]->type;
        if (is_array(t)) {
            ps[n++] = g->t_ptr;
            for (int k = 0; k < 2 * t->ndim; k++)
                ps[n++] = g->t_i64;
        } else {
            ps[n++] = i < 64 && (vector_scalars >> i & 1u) ? vty(s, t) : llty(g, t);
        }
    }
    for (int i = 0; i < extra_count; i++)
        ps[n++] = extra[i];
    LLVMTypeRef ft = LLVMFunctionType(ret, ps, (unsigned)n, 0);
    free(ps);
    return ft;
}

static LLVMTypeRef callee_type(Simd *s, const KjIrFunction *fn, uint64_t varying_params)
{
    LLVMTypeRef ret = fn->ret->kind == KJ_TYPE_VOID ? s->g->t_void : vty(s, fn->ret);
    return simd_type(s, fn, varying_params, ret, &s->mask_type, 1);
}

static void callee_name(const KjIrFunction *fn, int lanes, uint64_t varying_params, char *buf, size_t size)
{
    snprintf(buf, size, "%s__simd%d_%llx", fn->symbol, lanes, (unsigned long long)varying_params);
}

static LLVMValueRef vcall(Simd *s, KjIrExpr *e)
{
    Gen *g = s->g;
    KjIrFunction *callee = e->callee;
    uint64_t varying_params = 0;
    for (int i = 0; i < e->arg_count && i < 64; i++)
        if (!is_array(e->args[i]->type) && varying(s, e->args[i]))
            varying_params |= 1ull << i;
    char name[512];
    callee_name(callee, s->lanes, varying_params, name, sizeof name);
    LLVMTypeRef ft = callee_type(s, callee, varying_params);
    LLVMValueRef fn = LLVMGetNamedFunction(g->mod, name);
    if (!fn) {
        fn = LLVMAddFunction(g->mod, name, ft);
        LLVMSetLinkage(fn, LLVMInternalLinkage);
        set_function_attrs(g, fn);
        if (*s->pending_count >= SIMD_MAX_PENDING)
            kj_codegen_error(g, "too many functions called on SIMD lanes%s", NULL);
        else
            s->pending[(*s->pending_count)++] = (Pending){callee, varying_params};
    }
    int cap = 1;
    for (int i = 0; i < e->arg_count; i++)
        cap += 1 + 2 * KJ_MAX_DIMS;
    LLVMValueRef *args = kj_xmalloc(sizeof *args * (size_t)cap);
    int n = 0;
    for (int i = 0; i < e->arg_count; i++) {
        if (is_array(e->args[i]->type)) {
            ArrayVal a;
            kj_codegen_array(g, e->args[i], &a);
            args[n++] = a.data;
            for (int k = 0; k < a.ndim; k++)
                args[n++] = a.shape[k];
            for (int k = 0; k < a.ndim; k++)
                args[n++] = a.strides[k];
        } else if (i < 64 && (varying_params >> i & 1u)) {
            args[n++] = lanes_of(s, e->args[i], callee->params[i]->type);
        } else {
            args[n++] = kj_codegen_convert(g, kj_codegen_expr(g, e->args[i]), e->args[i]->type,
                                           callee->params[i]->type);
        }
    }
    args[n++] = s->mask;
    LLVMValueRef r = LLVMBuildCall2(s->b, ft, fn, args, (unsigned)n, "");
    free(args);
    return r;
}

/* ---- the expression switch */

static LLVMValueRef vexpr(Simd *s, KjIrExpr *e)
{
    Gen *g = s->g;
    LLVMBuilderRef B = s->b;
    if (!varying(s, e))
        return splat(s, kj_codegen_expr(g, e));
    switch (e->op) {
    case KJ_IR_VAR:
        return LLVMBuildLoad2(B, vty(s, e->type), s->vslots[e->var->id], e->var->name);
    case KJ_IR_NEG: {
        LLVMValueRef x = vexpr(s, e->args[0]);
        if (kj_type_is_complex(e->type))
            return make_pair(s, LLVMBuildFNeg(B, LLVMBuildExtractValue(B, x, 0, ""), ""),
                             LLVMBuildFNeg(B, LLVMBuildExtractValue(B, x, 1, ""), ""));
        return kj_type_is_float(e->type) ? LLVMBuildFNeg(B, x, "") : LLVMBuildNeg(B, x, "");
    }
    case KJ_IR_NOT: case KJ_IR_BITNOT:
        return LLVMBuildNot(B, vexpr(s, e->args[0]), "");
    case KJ_IR_ADD: case KJ_IR_SUB: case KJ_IR_MUL: case KJ_IR_DIV: case KJ_IR_REM:
    case KJ_IR_BITAND: case KJ_IR_BITOR: case KJ_IR_BITXOR: case KJ_IR_SHL: case KJ_IR_SHR: {
        if (e->op == KJ_IR_MUL && kj_type_is_complex(e->type) && e->args[0]->op == KJ_IR_VAR &&
            e->args[1]->op == KJ_IR_VAR && e->args[0]->var == e->args[1]->var &&
            e->args[0]->type == e->type && e->args[1]->type == e->type)
            return kj_codegen_complex_square(g, vexpr(s, e->args[0]));
        LLVMValueRef a = lanes_of(s, e->args[0], e->type);
        bool shift = e->op == KJ_IR_SHL || e->op == KJ_IR_SHR;
        const KjType *bt = shift ? e->args[1]->type : e->type;
        LLVMValueRef b = lanes_of(s, e->args[1], bt);
        return varith(s, e->op, e->type, a, b, bt);
    }
    case KJ_IR_EQ: case KJ_IR_NE: case KJ_IR_LT: case KJ_IR_LE: case KJ_IR_GT: case KJ_IR_GE: {
        const KjType *t = e->args[0]->type;
        LLVMValueRef a = lanes_of(s, e->args[0], t);
        LLVMValueRef b = lanes_of(s, e->args[1], t);
        return vcompare(s, e->op, t, a, b);
    }
    case KJ_IR_LOGAND: case KJ_IR_LOGOR: {
        bool is_and = e->op == KJ_IR_LOGAND;
        LLVMValueRef l = lanes_of(s, e->args[0], e->type);
        LLVMValueRef rhs_mask = LLVMBuildAnd(B, s->mask, is_and ? l : LLVMBuildNot(B, l, ""), "");
        LLVMValueRef r = lanes_under(s, e->args[1], e->type, rhs_mask);
        return is_and ? LLVMBuildAnd(B, l, r, "") : LLVMBuildOr(B, l, r, "");
    }
    case KJ_IR_SELECT: {
        LLVMValueRef c = lanes_of(s, e->args[0], kj_type_scalar(KJ_TYPE_BOOL));
        LLVMValueRef a = lanes_under(s, e->args[1], e->type, LLVMBuildAnd(B, s->mask, c, ""));
        LLVMValueRef b = lanes_under(s, e->args[2], e->type, LLVMBuildAnd(B, s->mask, LLVMBuildNot(B, c, ""), ""));
        return blend(s, c, a, b);
    }
    case KJ_IR_CAST:
        return vconvert(s, vexpr(s, e->args[0]), e->args[0]->type, e->type);
    case KJ_IR_CALL:
        return vcall(s, e);
    case KJ_IR_MATH: {
        LLVMValueRef a[3];
        const KjType *ft = e->args[0]->type;
        for (int i = 0; i < e->arg_count && i < 3; i++)
            a[i] = lanes_of(s, e->args[i], ft);
        return vmath(s, e->math, a, e->arg_count);
    }
    case KJ_IR_IPOW: {
        LLVMValueRef x = lanes_of(s, e->args[0], e->type);
        int64_t n = (int64_t)e->args[1]->const_int;
        if (kj_type_int_bits(e->args[1]->type) < 64 && kj_type_is_signed(e->args[1]->type)) {
            int bits = kj_type_int_bits(e->args[1]->type);
            n = (int64_t)(e->args[1]->const_int << (64 - bits)) >> (64 - bits);
        } else if (!kj_type_is_signed(e->args[1]->type) && e->args[1]->const_int > INT64_MAX) {
            n = INT64_MAX;
        }
        return vipow_const(s, e->type, x, n);
    }
    case KJ_IR_COMPLEX: {
        const KjType *part = kj_type_complex_part(e->type);
        LLVMValueRef re = lanes_of(s, e->args[0], part);
        LLVMValueRef im = lanes_of(s, e->args[1], part);
        return make_pair(s, re, im);
    }
    case KJ_IR_REAL: return LLVMBuildExtractValue(B, vexpr(s, e->args[0]), 0, "re");
    case KJ_IR_IMAG: return LLVMBuildExtractValue(B, vexpr(s, e->args[0]), 1, "im");
    case KJ_IR_CONJ: {
        LLVMValueRef z = vexpr(s, e->args[0]);
        return make_pair(s, LLVMBuildExtractValue(B, z, 0, ""), LLVMBuildFNeg(B, LLVMBuildExtractValue(B, z, 1, ""), ""));
    }
    case KJ_IR_CABS: {
        LLVMValueRef z = vexpr(s, e->args[0]);
        LLVMValueRef parts[2] = {LLVMBuildExtractValue(B, z, 0, ""), LLVMBuildExtractValue(B, z, 1, "")};
        return vmath(s, KJ_MATH_HYPOT, parts, 2);
    }
    case KJ_IR_MULHI: {
        LLVMValueRef a = lanes_of(s, e->args[0], e->type), b = lanes_of(s, e->args[1], e->type);
        unsigned bits = (unsigned)kj_type_int_bits(e->type);
        LLVMTypeRef wide = vec_of(s, LLVMIntTypeInContext(g->ctx, 2 * bits));
        bool sgn = kj_type_is_signed(e->type);
        LLVMValueRef wa = sgn ? LLVMBuildSExt(B, a, wide, "") : LLVMBuildZExt(B, a, wide, "");
        LLVMValueRef wb = sgn ? LLVMBuildSExt(B, b, wide, "") : LLVMBuildZExt(B, b, wide, "");
        LLVMValueRef high = LLVMBuildLShr(B, LLVMBuildMul(B, wa, wb, ""),
                                          splat_const(s, LLVMConstInt(LLVMGetElementType(wide), bits, 0)), "");
        return LLVMBuildTrunc(B, high, vty(s, e->type), "mulhi");
    }
    case KJ_IR_LOAD: {
        ArrayVal a;
        kj_codegen_array(g, e->args[0], &a);
        return access(s, &a, e->args + 1, e->arg_count - 1, e->contiguous, NULL, load_at);
    }
    case KJ_IR_SREG:
        /* only threadIdx.x varies: lane k of the chunk is lane_base + k */
        return LLVMBuildAdd(B, splat(s, s->lane_base), iota(s, g->t_i32), "tid.x");
    case KJ_IR_ATOMIC:
        return vatomic(s, e);
    default:
        break;
    }
    kj_codegen_error(g, "the SIMD lowering cannot lower this %s expression", kj_ir_op_name(e->op));
    return LLVMGetPoison(vty(s, e->type));
}

/* ============================================================ statements */

static void gen_stmt(Simd *s, KjIrStmt *st);

static SimdLoop *current_loop(Simd *s) { return s->loop_depth ? &s->loops[s->loop_depth - 1] : NULL; }

static LLVMBasicBlockRef skip_target(Simd *s) { return s->skip[s->skip_depth - 1]; }

static void push_skip(Simd *s, LLVMBasicBlockRef bb)
{
    if (s->skip_depth >= SIMD_MAX_DEPTH) {
        kj_codegen_error(s->g, "statements are nested too deep for the SIMD lowering%s", NULL);
        return;
    }
    s->skip[s->skip_depth++] = bb;
}

/* Whether st may retire lanes of the running region: a divergent return, or
 * a masked break or continue of the current loop. */
static bool may_leave(Simd *s, const KjIrStmt *st, bool nested_loop)
{
    if (!st)
        return false;
    switch (st->kind) {
    case KJ_IR_STMT_RETURN:
        return kj_uniform_stmt_divergent(s->u, st);
    case KJ_IR_STMT_BREAK: case KJ_IR_STMT_CONTINUE: {
        SimdLoop *loop = current_loop(s);
        return !nested_loop && loop && loop->varying;
    }
    case KJ_IR_STMT_FOR: case KJ_IR_STMT_WHILE:
        return may_leave(s, st->body, true);
    default:
        break;
    }
    for (int i = 0; i < st->stmts.count; i++)
        if (may_leave(s, st->stmts.items[i], nested_loop))
            return true;
    return may_leave(s, st->then_stmt, nested_loop) || may_leave(s, st->else_stmt, nested_loop);
}

/* After a statement that may have retired lanes: the running mask is what
 * it was before, less the lanes that left; with none left, go on at the
 * skip target. */
static void refresh_mask(Simd *s, LLVMValueRef before)
{
    LLVMValueRef m = before;
    if (s->returned)
        m = mask_and_not(s, m, s->returned);
    SimdLoop *loop = current_loop(s);
    if (loop && loop->varying) {
        m = mask_and_not(s, m, loop->break_slot);
        m = mask_and_not(s, m, loop->continue_slot);
    }
    s->mask = m;
    LLVMBasicBlockRef go_on = new_block(s->g, "lanes.left");
    LLVMBuildCondBr(s->b, any_lane(s, m), go_on, skip_target(s));
    LLVMPositionBuilderAtEnd(s->b, go_on);
}

/* var = value (a vector for a varying var, blended in under divergence). */
static bool reads_var(const KjIrExpr *e, const KjIrVar *var)
{
    if (!e)
        return false;
    if (e->op == KJ_IR_VAR && e->var == var)
        return true;
    for (int i = 0; i < e->arg_count; i++)
        if (reads_var(e->args[i], var))
            return true;
    return false;
}

/* Whether st reads var outside `inside` (a loop: its body and condition). */
static bool reads_outside(const KjIrStmt *st, const KjIrVar *var, const KjIrStmt *inside)
{
    if (!st)
        return false;
    if (st == inside)
        return reads_var(st->start, var) || reads_var(st->stop, var) || reads_var(st->step, var);
    const KjIrExpr *es[] = {st->value, st->array, st->cond, st->start, st->stop, st->step};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++)
        if (reads_var(es[i], var))
            return true;
    for (int i = 0; i < st->index_count; i++)
        if (reads_var(st->indices[i], var))
            return true;
    for (int i = 0; i < st->stmts.count; i++)
        if (reads_outside(st->stmts.items[i], var, inside))
            return true;
    return reads_outside(st->then_stmt, var, inside) || reads_outside(st->else_stmt, var, inside) ||
           reads_outside(st->body, var, inside);
}

static bool has_continue(const KjIrStmt *st)
{
    if (!st)
        return false;
    if (st->kind == KJ_IR_STMT_CONTINUE)
        return true;
    if (st->kind == KJ_IR_STMT_FOR || st->kind == KJ_IR_STMT_WHILE)
        return false; /* an inner loop's own */
    for (int i = 0; i < st->stmts.count; i++)
        if (has_continue(st->stmts.items[i]))
            return true;
    return has_continue(st->then_stmt) || has_continue(st->else_stmt);
}

/*
 * var = v in the running lanes.  Under divergence the new value is blended
 * into the old, so that the lanes that do not run keep theirs; except where
 * those lanes can never read it again: in a plain region, an outermost
 * varying loop or a side of an outermost varying if (each runs at most once
 * per call), with nothing partial in between (no varying if or inner
 * varying loop, no continue: every lane running there ran all of the region
 * before it), for a variable read nowhere outside the region.  The lanes
 * that left the region, or never entered it, then never see the value (the
 * Mandelbrot iteration's z and i, delay-and-sum's loop counters need no
 * blends).
 */
static void assign_lanes(Simd *s, KjIrVar *var, LLVMValueRef v, bool divergent)
{
    LLVMValueRef slot = s->vslots[var->id];
    if (divergent && s->plain_loop && s->plain && !reads_outside(s->fn->body, var, s->plain_loop))
        divergent = false;
    if (divergent)
        v = blend(s, s->mask, v, LLVMBuildLoad2(s->b, vty(s, var->type), slot, ""));
    LLVMBuildStore(s->b, v, slot);
}

static void gen_set(Simd *s, KjIrStmt *st)
{
    Gen *g = s->g;
    KjIrVar *var = st->var;
    if (is_array(var->type)) {
        ArrayVal a;
        kj_codegen_array(g, st->value, &a);
        ArraySlots *slots = &g->slots[var->id].array;
        LLVMBuildStore(s->b, a.data, slots->data);
        for (int k = 0; k < var->type->ndim && k < a.ndim; k++) {
            LLVMBuildStore(s->b, a.shape[k], slots->shape[k]);
            LLVMBuildStore(s->b, a.strides[k], slots->strides[k]);
        }
        return;
    }
    if (!kj_uniform_var_varying(s->u, var)) {
        LLVMValueRef v = kj_codegen_convert(g, kj_codegen_expr(g, st->value), st->value->type, var->type);
        LLVMBuildStore(s->b, v, g->slots[var->id].scalar);
        return;
    }
    assign_lanes(s, var, lanes_of(s, st->value, var->type), kj_uniform_stmt_divergent(s->u, st));
}

static void gen_store(Simd *s, KjIrStmt *st)
{
    Gen *g = s->g;
    ArrayVal a;
    kj_codegen_array(g, st->array, &a);
    bool any_varying = varying(s, st->value);
    for (int k = 0; k < st->index_count; k++)
        any_varying = any_varying || varying(s, st->indices[k]);
    if (!any_varying) {
        /* one element, one value: the store the threads all make */
        LLVMValueRef idx[KJ_MAX_DIMS];
        for (int k = 0; k < st->index_count && k < KJ_MAX_DIMS; k++)
            idx[k] = kj_codegen_convert(g, kj_codegen_expr(g, st->indices[k]), st->indices[k]->type,
                                        kj_type_scalar(KJ_TYPE_I64));
        LLVMValueRef v = kj_codegen_convert(g, kj_codegen_expr(g, st->value), st->value->type, a.elem);
        LLVMValueRef p = kj_codegen_element_address(g, &a, idx, st->index_count, st->contiguous);
        LLVMBuildStore(s->b, to_mem(g, a.elem, v), p);
        return;
    }
    LLVMValueRef v = lanes_of(s, st->value, a.elem);
    access(s, &a, st->indices, st->index_count, st->contiguous, v, store_at);
}

/* Whether e costs little to compute for lanes that do not need it: no
 * memory, no calls, no libm function. */
static bool cheap_expr(const KjIrExpr *e)
{
    switch (e->op) {
    case KJ_IR_LOAD: case KJ_IR_CALL: case KJ_IR_ATOMIC: case KJ_IR_IPOW: case KJ_IR_PRINT:
    case KJ_IR_EXEC: case KJ_IR_CABS:
        return false;
    case KJ_IR_MATH: {
        bool libmvec;
        kj_codegen_math_libm(e->math, &libmvec);
        if (libmvec || e->math == KJ_MATH_LGAMMA || e->math == KJ_MATH_TGAMMA || e->math == KJ_MATH_FMOD)
            return false;
        break;
    }
    default:
        break;
    }
    for (int i = 0; i < e->arg_count; i++)
        if (!cheap_expr(e->args[i]))
            return false;
    return true;
}

/* A side of an if that is a few cheap assignments: run for every lane
 * under its mask rather than behind a branch on whether any lane takes it
 * (a branch that lanes of mixed minds make hard to predict). */
static bool cheap_side(const KjIrStmt *st, int *budget)
{
    if (!st)
        return true;
    switch (st->kind) {
    case KJ_IR_STMT_BLOCK:
        for (int i = 0; i < st->stmts.count; i++)
            if (!cheap_side(st->stmts.items[i], budget))
                return false;
        return true;
    case KJ_IR_STMT_SET:
        return --*budget >= 0 && !is_array(st->var->type) && cheap_expr(st->value);
    case KJ_IR_STMT_IF:
        return cheap_expr(st->cond) && cheap_side(st->then_stmt, budget) && cheap_side(st->else_stmt, budget);
    default:
        return false;
    }
}

/* The variables a side assigns (SETs, in nested ifs too), at most 16. */
static int assigned_vars(const KjIrStmt *st, KjIrVar **vars, int count)
{
    if (!st)
        return count;
    if (st->kind == KJ_IR_STMT_SET) {
        for (int i = 0; i < count; i++)
            if (vars[i] == st->var)
                return count;
        if (count < 16)
            vars[count++] = st->var;
        return count;
    }
    for (int i = 0; i < st->stmts.count; i++)
        count = assigned_vars(st->stmts.items[i], vars, count);
    count = assigned_vars(st->then_stmt, vars, count);
    return assigned_vars(st->else_stmt, vars, count);
}

/*
 * A varying if of cheap sides, in line: the then side under its mask, then
 * the else side under its own, reading and writing shadows of the
 * variables either side assigns, which start as they were before the if;
 * last, each variable takes the else side's value in the else lanes.  The
 * else lanes see what they would have seen (the then side changes nothing
 * of theirs), and the two sides no longer wait for one another: x = x / 2
 * or 3 * x + 1 is one blend deep, not two.
 */
static void gen_if_in_line(Simd *s, KjIrStmt *st, LLVMValueRef then_mask, LLVMValueRef else_mask)
{
    const KjIrStmt *plain_region = s->plain_loop;
    bool plain = s->plain;
    s->plain = false;
    KjIrVar *vars[16];
    int count = st->else_stmt ? assigned_vars(st->then_stmt, vars, 0) : 0;
    if (st->else_stmt)
        count = assigned_vars(st->else_stmt, vars, count);
    LLVMValueRef shadows[16], real[16];
    for (int i = 0; i < count; i++) {
        LLVMTypeRef t = vty(s, vars[i]->type);
        real[i] = s->vslots[vars[i]->id];
        shadows[i] = entry_alloca(s, t, "shadow");
        LLVMBuildStore(s->b, LLVMBuildLoad2(s->b, t, real[i], ""), shadows[i]);
    }
    s->mask = then_mask;
    gen_stmt(s, st->then_stmt);
    if (st->else_stmt) {
        for (int i = 0; i < count; i++)
            s->vslots[vars[i]->id] = shadows[i];
        s->mask = else_mask;
        gen_stmt(s, st->else_stmt);
        for (int i = 0; i < count; i++) {
            LLVMTypeRef t = vty(s, vars[i]->type);
            s->vslots[vars[i]->id] = real[i];
            LLVMValueRef v = blend(s, else_mask, LLVMBuildLoad2(s->b, t, shadows[i], ""),
                                   LLVMBuildLoad2(s->b, t, real[i], ""));
            LLVMBuildStore(s->b, v, real[i]);
        }
    }
    s->plain_loop = plain_region;
    s->plain = plain;
}

static void gen_if(Simd *s, KjIrStmt *st)
{
    Gen *g = s->g;
    LLVMValueRef before = s->mask;
    bool leaves = may_leave(s, st, false);
    if (!varying(s, st->cond)) {
        LLVMValueRef c = kj_codegen_expr(g, st->cond);
        LLVMBasicBlockRef then_bb = new_block(g, "if.then"), done = new_block(g, "if.done");
        LLVMBasicBlockRef else_bb = st->else_stmt ? new_block(g, "if.else") : done;
        LLVMBuildCondBr(s->b, c, then_bb, else_bb);
        LLVMPositionBuilderAtEnd(s->b, then_bb);
        gen_stmt(s, st->then_stmt);
        if (block_open(s))
            LLVMBuildBr(s->b, done);
        if (st->else_stmt) {
            LLVMPositionBuilderAtEnd(s->b, else_bb);
            s->mask = before;
            gen_stmt(s, st->else_stmt);
            if (block_open(s))
                LLVMBuildBr(s->b, done);
        }
        LLVMPositionBuilderAtEnd(s->b, done);
        s->mask = before;
        if (leaves)
            refresh_mask(s, before);
        return;
    }
    /* both sides, each under its lanes, each skipped when it has none */
    LLVMValueRef c = lanes_of(s, st->cond, kj_type_scalar(KJ_TYPE_BOOL));
    LLVMValueRef then_mask = LLVMBuildAnd(s->b, before, c, "then.mask");
    LLVMValueRef else_mask = LLVMBuildAnd(s->b, before, LLVMBuildNot(s->b, c, ""), "else.mask");
    /* a few cheap assignments: both sides in line, under their masks */
    int budget = 8;
    if (cheap_side(st->then_stmt, &budget) && cheap_side(st->else_stmt, &budget)) {
        gen_if_in_line(s, st, then_mask, else_mask);
        s->mask = before;
        return;
    }
    LLVMBasicBlockRef then_bb = new_block(g, "vif.then"), else_check = new_block(g, "vif.else.check"),
                      done = new_block(g, "vif.done");
    LLVMBuildCondBr(s->b, any_lane(s, then_mask), then_bb, else_check);
    LLVMPositionBuilderAtEnd(s->b, then_bb);
    /* an if that runs once per call is a plain region of its own, side by
     * side; one inside a plain region makes it partial */
    const KjIrStmt *plain_region = s->plain_loop;
    bool plain = s->plain;
    bool region = s->loop_depth == 0 && !s->plain_loop;
    s->plain_loop = region ? st->then_stmt : plain_region;
    s->plain = region;
    s->mask = then_mask;
    push_skip(s, else_check);
    gen_stmt(s, st->then_stmt);
    s->skip_depth--;
    if (block_open(s))
        LLVMBuildBr(s->b, else_check);
    LLVMPositionBuilderAtEnd(s->b, else_check);
    if (st->else_stmt) {
        LLVMBasicBlockRef else_bb = new_block(g, "vif.else");
        LLVMBuildCondBr(s->b, any_lane(s, else_mask), else_bb, done);
        LLVMPositionBuilderAtEnd(s->b, else_bb);
        s->mask = else_mask;
        s->plain_loop = region ? st->else_stmt : plain_region;
        s->plain = region;
        push_skip(s, done);
        gen_stmt(s, st->else_stmt);
        s->skip_depth--;
    }
    if (block_open(s))
        LLVMBuildBr(s->b, done);
    LLVMPositionBuilderAtEnd(s->b, done);
    s->plain_loop = plain_region;
    s->plain = plain;
    s->mask = before;
    if (leaves)
        refresh_mask(s, before);
}

static void push_loop(Simd *s, SimdLoop loop)
{
    if (s->loop_depth >= SIMD_MAX_DEPTH) {
        kj_codegen_error(s->g, "loops are nested too deep for the SIMD lowering%s", NULL);
        return;
    }
    s->loops[s->loop_depth++] = loop;
}

/* for and while.  A uniform loop is the scalar code's loop of branches (its
 * variable, if varying, set in the running lanes); a varying one runs while
 * any lane is active. */
static void gen_loop(Simd *s, KjIrStmt *st)
{
    Gen *g = s->g;
    LLVMBuilderRef B = s->b;
    bool is_for = st->kind == KJ_IR_STMT_FOR;
    bool loop_varying = kj_uniform_loop_varying(s->u, st);
    LLVMValueRef before = s->mask;
    const KjType *t = is_for ? st->var->type : NULL;
    bool sgn = t && kj_type_is_signed(t);

    /* the counter: scalar when the bounds are uniform, else one per lane */
    bool lane_counter = is_for && (varying(s, st->start) || varying(s, st->stop) || varying(s, st->step));
    LLVMValueRef counter = NULL, stop = NULL, step = NULL, up = NULL;
    LLVMTypeRef ct = NULL;
    if (is_for) {
        if (lane_counter) {
            ct = vty(s, t);
            counter = entry_alloca(s, ct, "for.lanes");
            LLVMBuildStore(B, lanes_of(s, st->start, t), counter);
            stop = lanes_of(s, st->stop, t);
            step = lanes_of(s, st->step, t);
        } else {
            ct = llty(g, t);
            counter = entry_alloca(s, ct, "for.counter");
            LLVMBuildStore(B, kj_codegen_convert(g, kj_codegen_expr(g, st->start), st->start->type, t), counter);
            stop = kj_codegen_convert(g, kj_codegen_expr(g, st->stop), st->stop->type, t);
            step = kj_codegen_convert(g, kj_codegen_expr(g, st->step), st->step->type, t);
        }
        up = LLVMBuildICmp(B, sgn ? LLVMIntSGT : LLVMIntNE, step, LLVMConstNull(ct), "up");
    }
    SimdLoop loop = {.varying = loop_varying};
    if (loop_varying) {
        loop.break_slot = mask_slot(s, "break.lanes");
        loop.continue_slot = mask_slot(s, "continue.lanes");
        store_mask(s, loop.break_slot, no_lanes(s));
    }
    LLVMBasicBlockRef head = new_block(g, "loop.head"), body = new_block(g, "loop.body"),
                      latch = new_block(g, "loop.latch"), exit = new_block(g, "loop.exit");
    LLVMBuildBr(B, head);
    LLVMPositionBuilderAtEnd(B, head);

    LLVMValueRef go_on = NULL, i = NULL;
    if (is_for) {
        i = LLVMBuildLoad2(B, ct, counter, "i");
        LLVMValueRef below = LLVMBuildICmp(B, sgn ? LLVMIntSLT : LLVMIntULT, i, stop, "");
        LLVMValueRef above = LLVMBuildICmp(B, sgn ? LLVMIntSGT : LLVMIntUGT, i, stop, "");
        go_on = LLVMBuildSelect(B, up, below, above, "");
    }
    if (!loop_varying) {
        if (!is_for)
            go_on = kj_codegen_expr(g, st->cond);
        LLVMBuildCondBr(B, go_on, body, exit);
        LLVMPositionBuilderAtEnd(B, body);
    } else {
        LLVMValueRef active = mask_and_not(s, before, loop.break_slot);
        if (s->returned)
            active = mask_and_not(s, active, s->returned);
        if (!is_for) {
            /* the condition under the lanes still in the loop; one that
             * touches memory only while there are some */
            if (touches_memory(st->cond)) {
                LLVMBasicBlockRef cond_bb = new_block(g, "loop.cond");
                LLVMBuildCondBr(B, any_lane(s, active), cond_bb, exit);
                LLVMPositionBuilderAtEnd(B, cond_bb);
            }
            s->mask = active;
            go_on = lanes_of(s, st->cond, kj_type_scalar(KJ_TYPE_BOOL));
        } else if (!lane_counter) {
            /* a uniform count ends the loop for every lane at once */
            LLVMBasicBlockRef counted = new_block(g, "loop.counted");
            LLVMBuildCondBr(B, go_on, counted, exit);
            LLVMPositionBuilderAtEnd(B, counted);
            go_on = splat_const(s, LLVMConstInt(g->t_i1, 1, 0));
        }
        /* lanes whose condition fails leave for good, as by break */
        add_lanes(s, loop.break_slot, LLVMBuildAnd(B, active, LLVMBuildNot(B, go_on, ""), ""));
        active = LLVMBuildAnd(B, active, go_on, "active");
        LLVMBuildCondBr(B, any_lane(s, active), body, exit);
        LLVMPositionBuilderAtEnd(B, body);
        store_mask(s, loop.continue_slot, no_lanes(s));
        s->mask = active;
    }
    const KjIrStmt *plain_loop = s->plain_loop;
    bool plain = s->plain;
    if (loop_varying && s->loop_depth == 0 && !s->plain_loop) {
        s->plain_loop = st;
        s->plain = !has_continue(st->body);
    } else if (loop_varying) {
        s->plain = false; /* lanes leave this inner loop and read on after it */
    }
    if (is_for) {
        if (kj_uniform_var_varying(s->u, st->var))
            assign_lanes(s, st->var, lane_counter ? i : splat(s, i), true);
        else
            LLVMBuildStore(B, i, g->slots[st->var->id].scalar);
    }
    loop.break_bb = exit;
    loop.continue_bb = latch;
    push_loop(s, loop);
    if (loop_varying)
        push_skip(s, latch);
    gen_stmt(s, st->body);
    if (loop_varying)
        s->skip_depth--;
    s->loop_depth--;
    s->plain_loop = plain_loop;
    s->plain = plain;
    if (block_open(s))
        LLVMBuildBr(B, latch);
    LLVMPositionBuilderAtEnd(B, latch);
    kj_codegen_debug_loc(g, st->loc);
    if (is_for) {
        LLVMValueRef cur = LLVMBuildLoad2(B, ct, counter, "");
        LLVMBuildStore(B, LLVMBuildAdd(B, cur, step, ""), counter);
    }
    LLVMBuildBr(B, head);
    LLVMPositionBuilderAtEnd(B, exit);
    s->mask = before;
    if (may_leave(s, st, false))
        refresh_mask(s, before);
}

static void gen_leave(Simd *s, KjIrStmt *st)
{
    Gen *g = s->g;
    if (st->kind == KJ_IR_STMT_RETURN) {
        if (st->value && s->result) {
            LLVMValueRef v = lanes_of(s, st->value, s->fn->ret);
            LLVMValueRef old = LLVMBuildLoad2(s->b, vty(s, s->fn->ret), s->result, "");
            LLVMBuildStore(s->b, blend(s, s->mask, v, old), s->result);
        }
        if (kj_uniform_stmt_divergent(s->u, st)) {
            add_lanes(s, s->returned, s->mask);
            LLVMBuildBr(s->b, skip_target(s));
        } else {
            LLVMBuildBr(s->b, s->exit_bb);
        }
        start_dead_block(s);
        return;
    }
    SimdLoop *loop = current_loop(s);
    if (!loop) {
        kj_codegen_error(g, "break or continue outside a loop%s", NULL);
        return;
    }
    bool is_break = st->kind == KJ_IR_STMT_BREAK;
    if (loop->varying) {
        add_lanes(s, is_break ? loop->break_slot : loop->continue_slot, s->mask);
        LLVMBuildBr(s->b, skip_target(s));
    } else {
        LLVMBuildBr(s->b, is_break ? loop->break_bb : loop->continue_bb);
    }
    start_dead_block(s);
}

/* A vectorized kernel's PARFOR: one chunk of its elements, lane k element
 * lane_base + k (target_cpu.c's __range walks the chunks). */
static void gen_parfor(Simd *s, KjIrStmt *st, LLVMValueRef first)
{
    LLVMValueRef index = LLVMBuildAdd(s->b, splat(s, first), iota(s, s->g->t_i64), "element");
    LLVMBuildStore(s->b, index, s->vslots[st->var->id]);
    gen_stmt(s, st->body);
}

static void gen_stmt(Simd *s, KjIrStmt *st)
{
    Gen *g = s->g;
    if (!block_open(s))
        start_dead_block(s);
    if (st->kind != KJ_IR_STMT_BLOCK)
        kj_codegen_debug_loc(g, st->loc);
    switch (st->kind) {
    case KJ_IR_STMT_BLOCK:
        for (int i = 0; i < st->stmts.count; i++)
            gen_stmt(s, st->stmts.items[i]);
        return;
    case KJ_IR_STMT_EVAL:
        if (varying(s, st->value))
            vexpr(s, st->value);
        else
            kj_codegen_expr(g, st->value);
        return;
    case KJ_IR_STMT_SET: gen_set(s, st); return;
    case KJ_IR_STMT_STORE: gen_store(s, st); return;
    case KJ_IR_STMT_IF: gen_if(s, st); return;
    case KJ_IR_STMT_FOR: case KJ_IR_STMT_WHILE: gen_loop(s, st); return;
    case KJ_IR_STMT_BREAK: case KJ_IR_STMT_CONTINUE: case KJ_IR_STMT_RETURN: gen_leave(s, st); return;
    case KJ_IR_STMT_PARFOR:
        kj_codegen_error(g, "a parallel loop inside a function on SIMD lanes%s", NULL);
        return;
    case KJ_IR_STMT_THREADS: /* split forms are lowered by codegen_llvm.c */
        kj_codegen_error(g, "a loop over a block's threads inside a function on SIMD lanes%s", NULL);
        return;
    case KJ_IR_STMT_COUNT:
        break;
    }
    kj_unreachable();
}

/* ============================================================ functions */

/* Slots of every variable: scalar ones for uniform variables and arrays
 * (the shared lowering reads those), vectors for varying ones; all start
 * at zero. */
static void make_slots(Simd *s)
{
    Gen *g = s->g;
    KjIrFunction *fn = s->fn;
    int max_id = -1;
    for (int i = 0; i < fn->locals.count; i++) {
        KjIrVar *v = fn->locals.items[i];
        if (v->id > max_id)
            max_id = v->id;
    }
    g->slot_count = max_id + 1;
    g->slots = kj_xcalloc((size_t)g->slot_count + 1, sizeof(VarSlot));
    s->vslots = kj_xcalloc((size_t)g->slot_count + 1, sizeof *s->vslots);
    for (int i = 0; i < fn->locals.count; i++) {
        KjIrVar *v = fn->locals.items[i];
        VarSlot *slot = &g->slots[v->id];
        if (is_array(v->type)) {
            slot->array.data = LLVMBuildAlloca(s->b, g->t_ptr, v->name);
            LLVMBuildStore(s->b, LLVMConstNull(g->t_ptr), slot->array.data);
            for (int k = 0; k < v->type->ndim; k++) {
                slot->array.shape[k] = LLVMBuildAlloca(s->b, g->t_i64, "shape");
                slot->array.strides[k] = LLVMBuildAlloca(s->b, g->t_i64, "stride");
                LLVMBuildStore(s->b, const_i64(g, 0), slot->array.shape[k]);
                LLVMBuildStore(s->b, const_i64(g, 0), slot->array.strides[k]);
            }
        } else if (v->type->kind != KJ_TYPE_VOID) {
            if (kj_uniform_var_varying(s->u, v)) {
                s->vslots[v->id] = LLVMBuildAlloca(s->b, vty(s, v->type), v->name);
                LLVMBuildStore(s->b, LLVMConstNull(vty(s, v->type)), s->vslots[v->id]);
            }
            /* a scalar slot too: kj_codegen_expr of a uniform expression
             * never reads it for a varying variable, but it must exist */
            slot->scalar = LLVMBuildAlloca(s->b, llty(g, v->type), v->name);
            LLVMBuildStore(s->b, zero_of(g, v->type), slot->scalar);
        }
    }
}

/* The parameters, from index 0: arrays into their slots, scalars into
 * theirs (vectors for a callee, repeated for a varying one of a root). */
static unsigned bind_params(Simd *s)
{
    Gen *g = s->g;
    KjIrFunction *fn = s->fn;
    unsigned p = 0;
    for (int i = 0; i < fn->param_count; i++) {
        KjIrVar *v = fn->params[i];
        VarSlot *slot = &g->slots[v->id];
        if (is_array(v->type)) {
            LLVMBuildStore(s->b, LLVMGetParam(g->llfn, p++), slot->array.data);
            for (int k = 0; k < v->type->ndim; k++)
                LLVMBuildStore(s->b, LLVMGetParam(g->llfn, p++), slot->array.shape[k]);
            for (int k = 0; k < v->type->ndim; k++)
                LLVMBuildStore(s->b, LLVMGetParam(g->llfn, p++), slot->array.strides[k]);
            continue;
        }
        LLVMValueRef x = LLVMGetParam(g->llfn, p++);
        if (s->role == ROLE_CALLEE && i < 64 && (s->varying_params >> i & 1u)) {
            LLVMBuildStore(s->b, x, s->vslots[v->id]);
        } else {
            LLVMBuildStore(s->b, x, slot->scalar);
            if (s->vslots[v->id])
                LLVMBuildStore(s->b, splat(s, x), s->vslots[v->id]);
        }
    }
    return p;
}

/* Every mask used in a block other than its own reaches it wide (see
 * widen_mask): widened once after its definition, narrowed before each use.
 * Phis of masks are left as they are. */
static void widen_crossing_masks(Simd *s, LLVMValueRef entry_mask)
{
    Gen *g = s->g;
    LLVMBuilderRef b = s->b;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(g->llfn); bb; bb = LLVMGetNextBasicBlock(bb)) {
        for (LLVMValueRef def = LLVMGetFirstInstruction(bb); def; def = LLVMGetNextInstruction(def)) {
            /* the lanes a chunk starts with become a constant once inlined
             * into the entry's loop over whole chunks: left in the open */
            if (LLVMTypeOf(def) != s->mask_type || LLVMIsAPHINode(def) || def == entry_mask)
                continue;
            LLVMValueRef wide = NULL;
            LLVMUseRef next;
            for (LLVMUseRef use = LLVMGetFirstUse(def); use; use = next) {
                next = LLVMGetNextUse(use);
                LLVMValueRef user = LLVMGetUser(use);
                if (LLVMIsAPHINode(user) || !LLVMIsAInstruction(user) || LLVMGetInstructionParent(user) == bb)
                    continue;
                if (!wide) {
                    LLVMPositionBuilderBefore(b, LLVMGetNextInstruction(def));
                    wide = widen_mask(s, def);
                }
                LLVMPositionBuilderBefore(b, user);
                LLVMValueRef narrow = narrow_mask(s, wide);
                for (unsigned k = 0; k < (unsigned)LLVMGetNumOperands(user); k++)
                    if (LLVMGetOperand(user, k) == def)
                        LLVMSetOperand(user, k, narrow);
            }
        }
    }
}

/* Defines llfn, fn's code on s->lanes lanes in role. */
static void define(Gen *g, KjIrFunction *fn, Role role, uint64_t varying_params, int lanes, LLVMValueRef llfn,
                   Pending *pending, int *pending_count)
{
    Simd simd = {.g = g, .b = g->b, .lanes = lanes, .role = role, .fn = fn, .pending = pending,
                 .pending_count = pending_count, .varying_params = varying_params};
    Simd *s = &simd;
    s->mask_type = vec_of(s, g->t_i1);
    int mask_bits = register_bytes(g) * 8 / lanes;
    s->slot_mask_type = vec_of(s, LLVMIntTypeInContext(g->ctx, (unsigned)(mask_bits < 8 ? 8 : mask_bits > 64 ? 64 : mask_bits)));
    const char *triple = LLVMGetTarget(g->mod);
    s->wide_masks = strncmp(triple, "x86_64", 6) == 0 && register_bytes(g) < 64;
    KjUniformSources sources = role == ROLE_CALLEE ? (KjUniformSources){.params = varying_params}
                                                   : root_sources(fn);
    s->u = kj_uniform_analyze(&s->arena, fn, sources);

    g->fn = fn;
    g->llfn = llfn;
    g->loop_depth = 0;
    g->thread_ctx = g->shared_base = g->range_begin = g->range_end = NULL;
    g->shared_offset = 0;
    memset(g->sreg, 0, sizeof g->sreg);
    kj_codegen_debug_function(g, llfn, fn->name, fn->loc);
    g->entry_bb = new_block(g, "entry");
    LLVMBasicBlockRef start = new_block(g, "start");
    LLVMPositionBuilderAtEnd(s->b, g->entry_bb);
    LLVMBuildBr(s->b, start);
    LLVMPositionBuilderBefore(s->b, LLVMGetBasicBlockTerminator(g->entry_bb));
    make_slots(s);
    unsigned p = bind_params(s);
    LLVMValueRef count = NULL, first = NULL;
    if (role == ROLE_KERNEL) {
        g->target->bind_hidden_params(g, fn, p); /* ctx, threadIdx.x/y/z, as the impl's */
        s->lane_base = LLVMGetParam(llfn, p + 1);
        count = LLVMGetParam(llfn, p + 4);
    } else if (role == ROLE_VEC_KERNEL) {
        first = LLVMGetParam(llfn, p);
        count = LLVMGetParam(llfn, p + 1);
    }
    if (kj_uniform_divergent_return(s->u)) {
        s->returned = LLVMBuildAlloca(s->b, s->slot_mask_type, "returned");
        store_mask(s, s->returned, no_lanes(s));
    }
    if (role == ROLE_CALLEE && fn->ret->kind != KJ_TYPE_VOID) {
        s->result = LLVMBuildAlloca(s->b, vty(s, fn->ret), "result");
        LLVMBuildStore(s->b, LLVMConstNull(vty(s, fn->ret)), s->result);
    }

    LLVMPositionBuilderAtEnd(s->b, start);
    if (role == ROLE_CALLEE)
        s->mask = LLVMGetParam(llfn, p);
    else
        s->mask = LLVMBuildICmp(s->b, LLVMIntULT, iota(s, g->t_i32), splat(s, count), "lanes");
    LLVMValueRef entry_mask = s->mask;
    s->exit_bb = new_block(g, "exit");
    push_skip(s, s->exit_bb);
    if (role == ROLE_VEC_KERNEL)
        gen_parfor(s, fn->body->stmts.items[0], first);
    else
        gen_stmt(s, fn->body);
    if (block_open(s))
        LLVMBuildBr(s->b, s->exit_bb);
    LLVMPositionBuilderAtEnd(s->b, s->exit_bb);
    if (s->result)
        LLVMBuildRet(s->b, LLVMBuildLoad2(s->b, vty(s, fn->ret), s->result, ""));
    else
        LLVMBuildRetVoid(s->b);
    if (wide_masks(s))
        widen_crossing_masks(s, entry_mask);
    if (g->shared_offset > fn->shared_bytes)
        fn->shared_bytes = g->shared_offset;
    free(g->slots);
    g->slots = NULL;
    free(s->vslots);
    kj_arena_free(&s->arena);
}

LLVMValueRef kj_simd_define_chunk(Gen *g, KjIrFunction *fn, int lanes, LLVMTypeRef *type)
{
    Simd probe = {.g = g, .lanes = lanes};
    LLVMTypeRef extra[5];
    int extra_count;
    if (fn->kind == KJ_IR_FN_KERNEL) {
        extra[0] = g->t_ptr;
        extra[1] = extra[2] = extra[3] = extra[4] = g->t_i32;
        extra_count = 5;
    } else {
        extra[0] = g->t_i64;
        extra[1] = g->t_i32;
        extra_count = 2;
    }
    *type = simd_type(&probe, fn, 0, g->t_void, extra, extra_count);
    char symbol[480], name[512];
    kj_kernel_variant_symbol(fn, kj_codegen_root_contiguous(g, fn), symbol, sizeof symbol);
    snprintf(name, sizeof name, "%s__simd%d", symbol, lanes);
    LLVMValueRef chunk = LLVMAddFunction(g->mod, name, *type);
    LLVMSetLinkage(chunk, LLVMInternalLinkage);
    set_function_attrs(g, chunk);
    if (fn->kind == KJ_IR_FN_KERNEL)
        kj_codegen_add_param_attr(g, chunk, (unsigned)(LLVMCountParamTypes(*type) - 5), "noalias", 0);

    Pending pending[SIMD_MAX_PENDING];
    int pending_count = 0;
    define(g, fn, fn->kind == KJ_IR_FN_KERNEL ? ROLE_KERNEL : ROLE_VEC_KERNEL, 0, lanes, chunk, pending,
           &pending_count);
    /* the SIMD variants of the functions it calls with varying arguments,
     * and of those they call */
    for (int i = 0; i < pending_count && !g->error; i++) {
        char name[512];
        callee_name(pending[i].fn, lanes, pending[i].varying_params, name, sizeof name);
        LLVMValueRef callee = LLVMGetNamedFunction(g->mod, name);
        if (LLVMCountBasicBlocks(callee) == 0)
            define(g, pending[i].fn, ROLE_CALLEE, pending[i].varying_params, lanes, callee, pending,
                   &pending_count);
    }
    return chunk;
}
