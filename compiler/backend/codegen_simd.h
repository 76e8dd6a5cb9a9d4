/*
 * codegen_simd.h: what the two files of the SIMD lowering share:
 * codegen_simd.c (what goes on lanes, statements, masks, functions),
 * codegen_simd_expr.c (expressions, conversions, memory, math, calls),
 * codegen_simd_threads.c (a split form's regions between barriers) and
 * codegen_simd_fission.c (loops split over groups of their accumulators).
 * Private to them; codegen_llvm.h declares the entry points the cpu target
 * and the shared lowering call (kj_simd_lanes, kj_simd_define_chunk,
 * kj_simd_threads).
 */
#ifndef KJIT_CODEGEN_SIMD_H
#define KJIT_CODEGEN_SIMD_H

#define KJ_CODEGEN_LOWERING
#include "codegen_llvm.h"

#include <stdio.h>
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
#define SIMD_MAX_MASK_SLOTS 512
#define SIMD_MAX_LANE0 16

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
    LLVMValueRef mask_slots[SIMD_MAX_MASK_SLOTS]; /* every mask slot's alloca */
    int mask_slot_count;
    LLVMValueRef mask;       /* the lanes running the code being emitted */
    LLVMValueRef returned;   /* alloca: lanes that returned (NULL: no divergent return) */
    LLVMValueRef result;     /* callee: alloca of its result vector */
    LLVMBasicBlockRef exit_bb;
    LLVMBasicBlockRef skip[SIMD_MAX_DEPTH]; /* where to go when no lane is left */
    int skip_depth;
    SimdLoop loops[SIMD_MAX_DEPTH];
    int loop_depth;
    int full_copies; /* if sides copied for full masks (gen_if_full_or_masked): in this
                        chunk of a region (emit_chunk resets it), else in the function */
    LLVMValueRef lane_base;  /* kernel: threadIdx.x of lane 0 (i32) */
    uint64_t varying_params; /* callee: its parameters that are vectors */
    /* The plain region being emitted (an outermost varying loop, or a side
     * of an outermost varying if), and whether nothing partial (a varying
     * if or loop, a `continue`) lies between it and the code: see
     * assign_lanes. */
    const KjIrStmt *plain_loop;
    bool plain;
    /* The outermost varying while loop whose lanes that fail its condition
     * are recorded as broken, so that the variables it reads and nothing
     * after it reads need no blends (gen_loop).  NULL: none. */
    const KjIrStmt *exit_recorded;
    /* Inside the then side of an in-line varying if whose condition is
     * `even_var % 2^even_shift == 0` (even_var a signed integer, not yet
     * assigned there): the lanes whose values count hold multiples of
     * 2^even_shift, so even_var / 2^j (j <= even_shift) is a plain
     * arithmetic shift, without the rounding fixup of negative values.
     * Lanes outside the mask get some other value, blended away.  NULL: none. */
    KjIrVar *even_var;
    int even_shift;
    /* unit variables (uniform + lane) whose scalar slot holds lane 0's
     * value: the counters of the loops being emitted that gen_loop keeps
     * as lane 0's value (unit_counter) */
    const KjIrVar *lane0_vars[SIMD_MAX_LANE0];
    int lane0_count;
    struct SimdRanges *ranges; /* codegen_simd_range.c's variables (NULL until asked) */
    /* by var id: 1 an array variable assigned only block-private arrays
     * (shared(), local()), -1 any other; NULL until the first access asks
     * (see private_array in codegen_simd_expr.c) */
    signed char *private_vars;
    bool access_private; /* the access being built is to a block-private array */
    /* callees whose SIMD variant is declared but not yet defined */
    struct Pending *pending;
    int *pending_count;
    /* a call of several outputs (vectorize.c) made on lanes: outputs 1..,
     * which the statement that holds the call assigns once it is lowered
     * (codegen_simd.c) */
    int call_output_count;
    KjIrVar *call_output_vars[KJ_MAX_VEC_OUTPUTS];
    LLVMValueRef call_output_values[KJ_MAX_VEC_OUTPUTS];
    /* checked mode (codegen_simd_check.c): NULL when nothing here can fail;
     * the lanes of the statement being emitted; where a uniform failure in
     * a part of an expression under its own mask goes (NULL: none); an
     * access's indices lowered before its check (pre_for: of which access) */
    struct SimdChecks *checks;
    int64_t tid_x_end; /* a region's threads end below this threadIdx.x (0: not known) */
    /* checked mode: the for loops whose bodies are being emitted, whose
     * counters codegen_simd_range.c bounds by the loop there */
    const KjIrStmt *for_stack[SIMD_MAX_DEPTH];
    int for_depth;
    LLVMValueRef stmt_mask;
    LLVMBasicBlockRef escape;
    LLVMValueRef *pre_index;
    KjIrExpr *const *pre_for;
    /* checked mode: the statement being emitted is the copy for lanes that
     * all pass its every check, tested ahead (kj_simd_precheck): no check,
     * no failed lanes taken out of a mask */
    bool proven;
} Simd;

/* Checked mode on lanes (codegen_simd_check.c): what a chunk keeps of its
 * lanes' failures, and what it takes over of the Gen's checked state. */
typedef struct SimdChecks {
    LLVMValueRef record;            /* the call's KjCheckRecord */
    LLVMValueRef failed;            /* mask slot: the lanes that failed in this chunk */
    LLVMValueRef site, kind, values[3]; /* vector allocas: each failed lane's record */
    LLVMValueRef own_record, own_state; /* what impls called with uniform arguments fill */
    bool region;                    /* a split form's region: threads_stopped flags */
    bool stopped_before;            /* the region's copy for blocks where a thread has stopped */
    LLVMValueRef flags;             /* a region's chunk: its lane 0's stopped flag */
    const KjIrExpr **shared_of;     /* by var id: the shared() array it is (codegen_simd_check.c) */
    LLVMValueRef saved_record, saved_state;
    LLVMBasicBlockRef saved_bail;
    void (*saved_lane_check)(void *, int, KjCheckKind, LLVMValueRef, LLVMValueRef *);
    void (*saved_call_failed)(void *, LLVMBasicBlockRef, LLVMBasicBlockRef);
    void *saved_lane_data;
    LLVMValueRef saved_element;
} SimdChecks;

/* A callee's SIMD variant: the function, and which of its parameters vary
 * (those that are uniform at the call stay scalar). */
typedef struct Pending {
    KjIrFunction *fn;
    uint64_t varying_params;
} Pending;

/* ============================================================ types and constants */

static inline LLVMTypeRef vec_of(Simd *s, LLVMTypeRef elem) { return LLVMVectorType(elem, (unsigned)s->lanes); }

/* The vector type of a varying value of `type` (complex: a pair of vectors). */
static inline LLVMTypeRef vty(Simd *s, const KjType *type)
{
    if (kj_type_is_complex(type)) {
        LLVMTypeRef part = vec_of(s, llty(s->g, kj_type_complex_part(type)));
        return LLVMStructTypeInContext(s->g->ctx, (LLVMTypeRef[]){part, part}, 2, 0);
    }
    return vec_of(s, llty(s->g, type));
}

static inline LLVMValueRef splat_const(Simd *s, LLVMValueRef c)
{
    LLVMValueRef items[64];
    for (int k = 0; k < s->lanes; k++)
        items[k] = c;
    return LLVMConstVector(items, (unsigned)s->lanes);
}

static inline LLVMValueRef iota(Simd *s, LLVMTypeRef elem)
{
    LLVMValueRef items[64];
    for (int k = 0; k < s->lanes; k++)
        items[k] = LLVMConstInt(elem, (unsigned long long)k, 0);
    return LLVMConstVector(items, (unsigned)s->lanes);
}

/* A scalar (or a complex struct of scalars) repeated in every lane. */
static inline LLVMValueRef splat(Simd *s, LLVMValueRef x)
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

static inline LLVMValueRef no_lanes(Simd *s) { return LLVMConstNull(s->mask_type); }

static inline LLVMValueRef any_lane(Simd *s, LLVMValueRef mask)
{
    return kj_codegen_call_intrinsic(s->g, "llvm.vector.reduce.or", &s->mask_type, 1, &mask, 1);
}

static inline LLVMValueRef narrow_mask(Simd *s, LLVMValueRef wide);

static inline LLVMValueRef load_mask(Simd *s, LLVMValueRef slot)
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
static inline bool wide_masks(Simd *s) { return s->wide_masks; }

/* A wide mask (lanes all ones or zero) behind the barrier.  The asm
 * returns, and says so (willreturn, nosync, nounwind: it is an empty
 * string): a call that may not return kept LICM from sinking stores out of
 * every loop around one (__blocks' store of blockIdx.x to the context for
 * each block's row of the 2-D elementwise kernel with AVX2).  Not
 * memory(none): with it LLVM hoisted and merged the barriers and their
 * masks, and delay-and-sum and a bins kernel ran 11-16 % slower
 * (docs/performance.md, 2026-11-28, the mask barrier). */
static inline LLVMValueRef mask_barrier(Simd *s, LLVMValueRef wide)
{
    LLVMTypeRef t = s->slot_mask_type;
    LLVMTypeRef ft = LLVMFunctionType(t, &t, 1, 0);
    LLVMValueRef barrier = LLVMGetInlineAsm(ft, "", 0, "=x,0", 4, 0, 0, LLVMInlineAsmDialectATT, 0);
    LLVMValueRef call = LLVMBuildCall2(s->b, ft, barrier, &wide, 1, "mask.wide");
    static const char *const facts[] = {"nounwind", "willreturn", "nosync"};
    for (size_t i = 0; i < sizeof facts / sizeof facts[0]; i++) {
        unsigned kind = LLVMGetEnumAttributeKindForName(facts[i], strlen(facts[i]));
        LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(s->g->ctx, kind, 0));
    }
    return call;
}

static inline LLVMValueRef widen_mask(Simd *s, LLVMValueRef m)
{
    LLVMValueRef wide = LLVMBuildSExt(s->b, m, s->slot_mask_type, "");
    if (!wide_masks(s) || LLVMIsConstant(m))
        return wide;
    return mask_barrier(s, wide);
}

static inline LLVMValueRef narrow_mask(Simd *s, LLVMValueRef wide)
{
    return LLVMBuildICmp(s->b, LLVMIntSLT, wide, LLVMConstNull(s->slot_mask_type), "mask");
}

/* m as a wide mask: the wide one it was narrowed from (a barrier's, or a
 * load of a mask slot, whose lanes are all ones or zero), else m widened. */
static inline LLVMValueRef wide_form(Simd *s, LLVMValueRef m)
{
    LLVMValueRef from = LLVMIsAICmpInst(m) ? LLVMGetOperand(m, 0) : NULL;
    if (from && LLVMGetICmpPredicate(m) == LLVMIntSLT && LLVMIsNull(LLVMGetOperand(m, 1)) &&
        LLVMTypeOf(from) == s->slot_mask_type) {
        if (LLVMIsACallInst(from) && LLVMIsAInlineAsm(LLVMGetCalledValue(from)))
            return from;
        for (int i = 0; i < s->mask_slot_count && LLVMIsALoadInst(from); i++)
            if (s->mask_slots[i] == LLVMGetOperand(from, 0))
                return from;
    }
    return widen_mask(s, m);
}

static inline void store_mask(Simd *s, LLVMValueRef slot, LLVMValueRef m)
{
    LLVMBuildStore(s->b, widen_mask(s, m), slot);
}

static inline LLVMValueRef mask_slot(Simd *s, const char *name)
{
    LLVMValueRef slot = kj_codegen_alloca_in_entry(s->g, s->slot_mask_type, name);
    if (s->mask_slot_count < SIMD_MAX_MASK_SLOTS)
        s->mask_slots[s->mask_slot_count++] = slot;
    return slot;
}

/* A slot for lanes handed from block to block (a loop's carried lanes, the
 * lanes after a leaving if): wide where masks cross blocks so (wide_masks),
 * else the mask itself, which AVX-512's mask registers hold as it is. */
static inline LLVMValueRef lanes_slot(Simd *s, const char *name)
{
    return wide_masks(s) ? mask_slot(s, name) : kj_codegen_alloca_in_entry(s->g, s->mask_type, name);
}

static inline void store_lanes(Simd *s, LLVMValueRef slot, LLVMValueRef m)
{
    LLVMBuildStore(s->b, wide_masks(s) ? wide_form(s, m) : m, slot);
}

static inline LLVMValueRef load_lanes(Simd *s, LLVMValueRef slot)
{
    return wide_masks(s) ? load_mask(s, slot) : LLVMBuildLoad2(s->b, s->mask_type, slot, "lanes");
}

static inline LLVMValueRef mask_and_not(Simd *s, LLVMValueRef m, LLVMValueRef slot)
{
    return LLVMBuildAnd(s->b, m, LLVMBuildNot(s->b, load_mask(s, slot), ""), "");
}

static inline void add_lanes(Simd *s, LLVMValueRef slot, LLVMValueRef m)
{
    store_mask(s, slot, LLVMBuildOr(s->b, load_mask(s, slot), m, ""));
}

/*
 * select(mask, a, b) of 32- or 64-bit integer lanes on x86 without AVX-512,
 * as a select of their bytes under the mask's lanes widened to all ones or
 * zero: the back end makes a select of <4 x i64> a vblendvpd (it tests the
 * lanes' sign bits, so it turns an `x & 1 == 0` into a shift by 63 to feed
 * it), a floating-point instruction that costs integer data a bypass delay
 * each way (znver3: the Collatz step went from 3 to 5 cycles); the byte
 * select is a vpblendvb, an integer one, and takes the compare as it is.
 */
static inline bool byte_blend(Simd *s, LLVMTypeRef vt)
{
    if (!s->wide_masks || LLVMGetTypeKind(vt) != LLVMVectorTypeKind)
        return false;
    LLVMTypeRef elem = LLVMGetElementType(vt);
    return LLVMGetTypeKind(elem) == LLVMIntegerTypeKind &&
           (LLVMGetIntTypeWidth(elem) == 32 || LLVMGetIntTypeWidth(elem) == 64);
}

static inline LLVMValueRef blend_bytes(Simd *s, LLVMValueRef mask, LLVMValueRef a, LLVMValueRef b)
{
    LLVMTypeRef vt = LLVMTypeOf(a);
    unsigned bytes = (unsigned)s->lanes * LLVMGetIntTypeWidth(LLVMGetElementType(vt)) / 8;
    LLVMTypeRef bt = LLVMVectorType(LLVMInt8TypeInContext(s->g->ctx), bytes);
    LLVMValueRef full = LLVMBuildBitCast(s->b, LLVMBuildSExt(s->b, mask, vt, ""), bt, "");
    LLVMValueRef c = LLVMBuildICmp(s->b, LLVMIntSLT, full, LLVMConstNull(bt), "");
    LLVMValueRef r = LLVMBuildSelect(s->b, c, LLVMBuildBitCast(s->b, a, bt, ""), LLVMBuildBitCast(s->b, b, bt, ""), "");
    return LLVMBuildBitCast(s->b, r, vt, "");
}

/* select(mask, a, b) lane by lane; complex values part by part. */
static inline LLVMValueRef blend(Simd *s, LLVMValueRef mask, LLVMValueRef a, LLVMValueRef b)
{
    if (byte_blend(s, LLVMTypeOf(a)) && !LLVMIsConstant(mask))
        return blend_bytes(s, mask, a, b);
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

static inline void start_dead_block(Simd *s)
{
    LLVMPositionBuilderAtEnd(s->b, LLVMAppendBasicBlockInContext(s->g->ctx, s->g->llfn, "dead"));
}

static inline bool block_open(Simd *s) { return LLVMGetBasicBlockTerminator(LLVMGetInsertBlock(s->b)) == NULL; }

static inline LLVMValueRef entry_alloca(Simd *s, LLVMTypeRef t, const char *name)
{
    return kj_codegen_alloca_in_entry(s->g, t, name);
}


/* The host's vector register in bytes (SSE2 is the x86-64 baseline; other
 * hosts' vectors are 16 bytes too). */
static inline int register_bytes(Gen *g)
{
    const char *f = g->cpu_features ? g->cpu_features : "";
    if (kj_has_cpu_feature(f, "+avx512f"))
        return 64;
    if (kj_has_cpu_feature(f, "+avx"))
        return 32;
    return 16;
}

static inline bool simd_varying(Simd *s, const KjIrExpr *e) { return kj_uniform_expr_varying(s->u, e); }

/* A measurement switch NAME=0 (issue 25's block-shape lowerings, to time
 * them against the forms before on one host in one run: KJIT_SIMD_GUARDED_LOADS
 * and KJIT_SIMD_ROW_CHUNKS, docs/performance.md; KJ_SIMD_SWITCHES).  Read
 * when the code is made; the runtime's cache key names each one set to 0. */
static inline bool simd_switched_off(const char *name)
{
    const char *env = getenv(name);
    return env && strcmp(env, "0") == 0;
}

/* Whether every lane of a <W x i1> is set. */
static inline LLVMValueRef all_lanes(Simd *s, LLVMValueRef m)
{
    LLVMTypeRef bits = LLVMIntTypeInContext(s->g->ctx, (unsigned)s->lanes);
    return LLVMBuildICmp(s->b, LLVMIntEQ, LLVMBuildBitCast(s->b, m, bits, ""), LLVMConstAllOnes(bits), "");
}


/* Where code goes when no lane is left (the innermost first). */
static inline LLVMBasicBlockRef skip_target_of(Simd *s) { return s->skip[s->skip_depth - 1]; }

/* ---- codegen_simd_fission.c: a loop split over groups of its accumulators */

/* The loops to lower in place of FOR loop, in order (count of them, in
 * s->arena), when its carried values need more vector registers than the
 * target has and fall into groups; false: lower it whole. */
bool kj_simd_fission(Simd *s, KjIrStmt *loop, KjIrStmt ***loops, int *count);

/* ---- codegen_simd_check.c: checked mode on lanes */

/* Takes over checked mode for the lanes being lowered (record: the call's
 * KjCheckRecord, NULL where nothing can fail; region: a split form's);
 * s->checks is c when failures are kept, else NULL.  kj_simd_checks_end
 * gives the Gen's state back. */
void kj_simd_checks_begin(Simd *s, SimdChecks *c, LLVMValueRef record, bool region);
void kj_simd_checks_end(Simd *s, SimdChecks *c);
/* At a chunk's start (s->mask and lane_base set): no lane failed yet; in a
 * region, the threads stopped before are taken out of the mask (none left:
 * on at s->exit_bb). */
void kj_simd_checks_chunk_start(Simd *s);
/* At a chunk's end: the lowest failed lane claims the record. */
void kj_simd_checks_publish(Simd *s);
/* m less the lanes that failed (m when unchecked). */
LLVMValueRef kj_simd_drop_failed(Simd *s, LLVMValueRef m);
/* Fails check `site` in the running lanes where `ok` (a <W x i1>) is false;
 * values: the operands in every lane (i64 vectors, NULL for 0). */
void kj_simd_check_lanes(Simd *s, int site, KjCheckKind kind, LLVMValueRef ok, LLVMValueRef values[3]);
/* a[indices] at `site`: each index an i64 vector, or an i64 when uniform;
 * exprs are the index expressions (for their ranges). */
void kj_simd_check_index(Simd *s, int site, const ArrayVal *a, const KjIrExpr *array, KjIrExpr **exprs,
                         LLVMValueRef *indices, int count);
/* kj_codegen_check_operands on lanes (a, b vectors). */
void kj_simd_check_operands(Simd *s, const KjIrExpr *e, LLVMValueRef a, LLVMValueRef b);
/* Whether e, or st, holds a check (false when unchecked). */
bool kj_simd_expr_may_fail(const Simd *s, const KjIrExpr *e);
bool kj_simd_stmt_may_fail(const Simd *s, const KjIrStmt *st);
/* (codegen_simd_expr.c) A SET or STORE whose every check is an index of an
 * access (two or more) whose array is a variable and whose indices are
 * integer arithmetic on variables, registers and constants (no load, call
 * or check of their own):
 * the i1 that every running lane passes them all, tested ahead of the
 * statement (the indices and extents computed as the accesses will); NULL
 * for any other statement, or unchecked. */
LLVMValueRef kj_simd_precheck(Simd *s, const KjIrStmt *st);
/* A part of an expression under its own mask: the block that a uniform
 * failure inside it goes to (NULL unchecked), then, at its end, whether that
 * block was used; it goes on at `done` (which then takes a zero from it)
 * when lanes of the statement are left. */
LLVMBasicBlockRef kj_simd_escape_open(Simd *s, LLVMBasicBlockRef *saved);
bool kj_simd_escape_close(Simd *s, LLVMBasicBlockRef escape, LLVMBasicBlockRef saved, LLVMBasicBlockRef done);

/* ---- codegen_simd.c, for codegen_simd_threads.c (a split form's regions) */

/* The lanes a statement of a kernel can run on, as kj_simd_lanes says of a
 * root (its callees scanned too); 0 when something in it is refused. */
int kj_simd_region_lanes(Gen *g, const KjIrStmt *region, const KjUniformity *u);
/* s->mask_type, s->slot_mask_type and s->wide_masks for s->lanes lanes. */
void kj_simd_mask_types(Simd *s);
/* A statement on the lanes of s->mask. */
void kj_simd_stmt(Simd *s, KjIrStmt *st);
/* Where code goes when no lane is left (the innermost first). */
void kj_simd_push_skip(Simd *s, LLVMBasicBlockRef bb);
/* Every mask made in the blocks from first_bb on and used in another block
 * reaches it wide (see widen_mask), entry_mask excepted. */
void kj_simd_widen_crossing_masks(Simd *s, LLVMValueRef entry_mask, LLVMBasicBlockRef first_bb);
/* Defines the SIMD variants of the callees in pending[0 .. *count) (and of
 * theirs, appended), those not defined yet. */
void kj_simd_define_pending(Gen *g, int lanes, Pending *pending, int *count);

/* The scalar slot holding lane 0's value of the unit variable var, or NULL
 * (see Simd.lane0_vars). */
static inline LLVMValueRef lane0_slot(Simd *s, const KjIrVar *var)
{
    for (int i = 0; i < s->lane0_count; i++)
        if (s->lane0_vars[i] == var)
            return s->g->slots[var->id].scalar;
    return NULL;
}

/* ---- codegen_simd_expr.c */

/* The value of a varying expression, a vector (of the lanes of its type). */
LLVMValueRef kj_simd_expr(Simd *s, KjIrExpr *e);
/* The struct of vectors a function of several outputs returns on lanes. */
LLVMTypeRef kj_simd_outputs_type(Simd *s, const KjIrFunction *fn);

/* codegen_simd_range.c: whether every value of the integer expression e lies
 * in [lo, hi], in every lane and on every run (false when not known). */
bool kj_simd_fits(Simd *s, const KjIrExpr *e, int64_t lo, int64_t hi);
/* e's value in every lane, converted to `to`: a varying value as lowered
 * here, a uniform one by the shared lowering and repeated. */
LLVMValueRef kj_simd_lanes_of(Simd *s, KjIrExpr *e, const KjType *to);
/* Whether e reads memory or calls: code that must not run for no lane. */
bool kj_simd_touches_memory(const KjIrExpr *e);
/* a[indices] = value (a vector of the element type) in the running lanes;
 * array is the expression a was made from. */
void kj_simd_store(Simd *s, const KjIrExpr *array, const ArrayVal *a, KjIrExpr **indices, int count, bool flat,
                   LLVMValueRef value, LLVMValueRef *pre);
/* Checked mode, an access with check `site`: its indices lowered in order
 * into pre (vectors, or i64 scalars where uniform) for kj_simd_check_index
 * and the access (kj_simd_store's pre); false, with nothing done, unchecked. */
bool kj_simd_pre_indices(Simd *s, int site, KjIrExpr **indices, int count, LLVMValueRef *pre);
/* The type of a SIMD function of fn: arrays as in its impl, the scalar
 * parameters whose bit is in vector_scalars as vectors, then `extra`. */
LLVMTypeRef kj_simd_function_type(Simd *s, const KjIrFunction *fn, uint64_t vector_scalars, LLVMTypeRef ret,
                                  const LLVMTypeRef *extra, int extra_count);
/* The attributes of every SIMD function (always inlined). */
void kj_simd_function_attrs(Gen *g, LLVMValueRef fn);
/* "<symbol>__simd<lanes>_<varying parameters in hex>" */
void kj_simd_callee_name(const KjIrFunction *fn, int lanes, uint64_t varying_params, char *buf, size_t size);

#endif
