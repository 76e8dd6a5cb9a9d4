/*
 * codegen_llvm.c: the typed IR lowered to LLVM IR, shared by the cpu target
 * (cpu_jit.c, ORC on the host) and the cuda target (ptx.c, NVPTX).
 *
 * Every IR function becomes an internal "<symbol>__impl" function whose
 * arrays arrive as SSA values (data pointer, then the first ndim extents and
 * strides), so that element stores never force the descriptor to be read
 * again; the entry points kjit_runtime.h lists are thin wrappers that unpack
 * their arguments and call the impl, which the optimiser inlines.  Local
 * variables are allocas in the entry block (mem2reg makes them SSA values).
 *
 * Choices a reader of the generated code should know:
 *   - Integer arithmetic wraps.  Division never traps: x / 0 gives x, x % 0
 *     gives 0, and MIN / -1 wraps to MIN, the one quotient that overflows.
 *   - Shift counts are masked to the operand's width (x << 65 is x << 1 on
 *     i64), as the x86 and PTX shift instructions do, so no shift is poison.
 *   - Float to int conversion saturates (llvm.fptosi.sat): out-of-range
 *     values clamp to the integer range and NaN gives 0.
 *   - Complex * and / use the textbook formulas, with no rescaling: a / b
 *     overflows when |b|^2 does (about 1e154 for c128, 1e19 for c64).
 *   - No fast-math flags: IEEE semantics, no reassociation, no contraction.
 *   - On cpu, libm calls carry "vector-function-abi-variant" naming glibc's
 *     libmvec functions for the host's vector ISA, so the loop vectoriser
 *     turns a loop over sin() into calls to _ZGVeN8v_sin and kin.
 */
#include "codegen_llvm.h"

#include <dlfcn.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================ state */

/* Where an array lives while a function runs: one slot (alloca) per field. */
typedef struct ArraySlots {
    LLVMValueRef data, shape[KJ_MAX_DIMS], strides[KJ_MAX_DIMS];
} ArraySlots;

/* An array value: its fields as SSA values. */
typedef struct ArrayVal {
    int ndim;
    const KjType *elem;
    LLVMValueRef data, shape[KJ_MAX_DIMS], strides[KJ_MAX_DIMS];
} ArrayVal;

typedef struct VarSlot {
    LLVMValueRef scalar; /* alloca of a scalar variable */
    ArraySlots array;    /* array variables */
} VarSlot;

typedef struct FnInfo {
    KjIrFunction *ir;
    LLVMValueRef impl;
    LLVMTypeRef impl_type;
} FnInfo;

typedef struct LoopTargets {
    LLVMBasicBlockRef break_bb, continue_bb;
} LoopTargets;

typedef struct Gen {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    KjCodegenTarget target;
    const KjCodegenOptions *options;
    char *error;

    LLVMTypeRef t_void, t_i1, t_i8, t_i16, t_i32, t_i64, t_f32, t_f64, t_ptr, t_c64, t_c128;
    LLVMTypeRef t_desc;       /* KjArrayDesc */
    LLVMTypeRef t_thread_ctx; /* KjThreadCtx */

    const char *cpu_name, *cpu_features;
    bool vec_sse, vec_avx2, vec_avx512; /* libmvec ISAs the host can run */
    LLVMValueRef *used; /* vector math declarations for llvm.compiler.used */
    int used_count, used_cap;

    FnInfo *fns;
    int fn_count;

    /* the function being generated */
    KjIrFunction *fn;
    LLVMValueRef llfn;
    LLVMBasicBlockRef entry_bb;
    VarSlot *slots;
    int slot_count;
    LoopTargets loops[256];
    int loop_depth;
    LLVMValueRef sreg[KJ_SREG_COUNT]; /* cpu kernels: the special registers */
    LLVMValueRef thread_ctx;          /* cpu kernels */
    LLVMValueRef shared_base;         /* cpu kernels: ctx->shared */
    int64_t shared_offset;            /* cpu kernels: bytes of shared memory laid out */
    LLVMValueRef range_begin, range_end; /* cpu VEC_KERNEL */
} Gen;

static void gen_error(Gen *g, const char *fmt, const char *arg)
{
    if (g->error)
        return;
    size_t n = strlen(fmt) + (arg ? strlen(arg) : 0) + 1;
    g->error = kj_xmalloc(n);
    snprintf(g->error, n, fmt, arg ? arg : "");
}

/* ============================================================ attributes */

static void add_fn_attr(Gen *g, LLVMValueRef fn, const char *name)
{
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, kind, 0));
}

static void add_param_attr(Gen *g, LLVMValueRef fn, unsigned param, const char *name, uint64_t value)
{
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(fn, param + 1, LLVMCreateEnumAttribute(g->ctx, kind, value));
}

static void add_string_attr(Gen *g, LLVMValueRef fn, const char *key, const char *value)
{
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(g->ctx, key, strlen(key), value, strlen(value)));
}

/* memory(none): the call reads and writes no memory the program can see. */
static LLVMAttributeRef memory_none(Gen *g)
{
    unsigned kind = LLVMGetEnumAttributeKindForName("memory", 6);
    return LLVMCreateEnumAttribute(g->ctx, kind, 0);
}

/* Every function we define: no exceptions, tuned for the target machine. */
static void set_common_attrs(Gen *g, LLVMValueRef fn)
{
    add_fn_attr(g, fn, "nounwind");
    if (g->cpu_name && *g->cpu_name)
        add_string_attr(g, fn, "target-cpu", g->cpu_name);
    if (g->cpu_features && *g->cpu_features)
        add_string_attr(g, fn, "target-features", g->cpu_features);
    if (g->target == KJ_CODEGEN_CPU && g->vec_avx512)
        /* The libmvec AVX-512 variants take 512-bit vectors; without this the
         * vectoriser may settle on 256 bits and never pick them. */
        add_string_attr(g, fn, "prefer-vector-width", "512");
    if (g->target == KJ_CODEGEN_CUDA)
        /* Barriers must not be moved across control flow by the optimiser. */
        add_fn_attr(g, fn, "convergent");
}

/* ============================================================ types */

static LLVMTypeRef llty(Gen *g, const KjType *type)
{
    switch (type->kind) {
    case KJ_TYPE_VOID: return g->t_void;
    case KJ_TYPE_BOOL: return g->t_i1;
    case KJ_TYPE_I8: case KJ_TYPE_U8: return g->t_i8;
    case KJ_TYPE_I16: case KJ_TYPE_U16: return g->t_i16;
    case KJ_TYPE_I32: case KJ_TYPE_U32: return g->t_i32;
    case KJ_TYPE_I64: case KJ_TYPE_U64: return g->t_i64;
    case KJ_TYPE_F32: return g->t_f32;
    case KJ_TYPE_F64: return g->t_f64;
    case KJ_TYPE_C64: return g->t_c64;
    case KJ_TYPE_C128: return g->t_c128;
    default: kj_die("no LLVM type for %s", kj_type_name(type));
    }
}

/* In memory a bool is one byte holding 0 or 1. */
static LLVMTypeRef memty(Gen *g, const KjType *type)
{
    return type->kind == KJ_TYPE_BOOL ? g->t_i8 : llty(g, type);
}

static LLVMValueRef to_mem(Gen *g, const KjType *type, LLVMValueRef v)
{
    return type->kind == KJ_TYPE_BOOL ? LLVMBuildZExt(g->b, v, g->t_i8, "") : v;
}

static LLVMValueRef from_mem(Gen *g, const KjType *type, LLVMValueRef v)
{
    return type->kind == KJ_TYPE_BOOL
               ? LLVMBuildICmp(g->b, LLVMIntNE, v, LLVMConstInt(g->t_i8, 0, 0), "")
               : v;
}

static bool is_array(const KjType *type) { return type->kind == KJ_TYPE_ARRAY; }

static LLVMValueRef const_i64(Gen *g, int64_t v) { return LLVMConstInt(g->t_i64, (uint64_t)v, 1); }
static LLVMValueRef const_i32(Gen *g, int32_t v) { return LLVMConstInt(g->t_i32, (uint64_t)(int64_t)v, 1); }

static LLVMValueRef zero_of(Gen *g, const KjType *type) { return LLVMConstNull(llty(g, type)); }

/* ============================================================ intrinsics and calls */

static LLVMValueRef call_intrinsic(Gen *g, const char *name, LLVMTypeRef *overloads, int overload_count,
                                   LLVMValueRef *args, int arg_count)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    if (id == 0)
        kj_die("unknown LLVM intrinsic %s", name);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(g->mod, id, overloads, (size_t)overload_count);
    LLVMTypeRef type = LLVMIntrinsicGetType(g->ctx, id, overloads, (size_t)overload_count);
    return LLVMBuildCall2(g->b, type, fn, args, (unsigned)arg_count, "");
}

/* A declared external function (libm, libdevice, the runtime). */
static LLVMValueRef get_extern(Gen *g, const char *name, LLVMTypeRef type)
{
    LLVMValueRef fn = LLVMGetNamedFunction(g->mod, name);
    if (!fn) {
        fn = LLVMAddFunction(g->mod, name, type);
        add_fn_attr(g, fn, "nounwind");
    }
    return fn;
}

/* ============================================================ math */

/* The libm name (f64; f32 adds "f") and whether glibc's libmvec has it. */
static const struct {
    const char *libm;
    bool libmvec;
} math_info[KJ_MATH_COUNT] = {
    [KJ_MATH_SQRT] = {"sqrt", false},   [KJ_MATH_CBRT] = {"cbrt", true},
    [KJ_MATH_EXP] = {"exp", true},      [KJ_MATH_EXP2] = {"exp2", true},
    [KJ_MATH_EXPM1] = {"expm1", true},  [KJ_MATH_LOG] = {"log", true},
    [KJ_MATH_LOG2] = {"log2", true},    [KJ_MATH_LOG10] = {"log10", true},
    [KJ_MATH_LOG1P] = {"log1p", true},  [KJ_MATH_SIN] = {"sin", true},
    [KJ_MATH_COS] = {"cos", true},      [KJ_MATH_TAN] = {"tan", true},
    [KJ_MATH_ASIN] = {"asin", true},    [KJ_MATH_ACOS] = {"acos", true},
    [KJ_MATH_ATAN] = {"atan", true},    [KJ_MATH_ATAN2] = {"atan2", true},
    [KJ_MATH_SINH] = {"sinh", true},    [KJ_MATH_COSH] = {"cosh", true},
    [KJ_MATH_TANH] = {"tanh", true},    [KJ_MATH_ASINH] = {"asinh", true},
    [KJ_MATH_ACOSH] = {"acosh", true},  [KJ_MATH_ATANH] = {"atanh", true},
    [KJ_MATH_POW] = {"pow", true},      [KJ_MATH_HYPOT] = {"hypot", true},
    [KJ_MATH_FLOOR] = {"floor", false}, [KJ_MATH_CEIL] = {"ceil", false},
    [KJ_MATH_TRUNC] = {"trunc", false}, [KJ_MATH_ROUND] = {"round", false},
    [KJ_MATH_FABS] = {"fabs", false},   [KJ_MATH_FMIN] = {"fmin", false},
    [KJ_MATH_FMAX] = {"fmax", false},   [KJ_MATH_FMA] = {"fma", false},
    [KJ_MATH_ERF] = {"erf", true},      [KJ_MATH_ERFC] = {"erfc", true},
    [KJ_MATH_LGAMMA] = {"lgamma", false}, [KJ_MATH_TGAMMA] = {"tgamma", false},
    [KJ_MATH_COPYSIGN] = {"copysign", false}, [KJ_MATH_FMOD] = {"fmod", false},
    [KJ_MATH_ISNAN] = {"isnan", false}, [KJ_MATH_ISINF] = {"isinf", false},
    [KJ_MATH_ISFINITE] = {"isfinite", false},
};

/*
 * The "vector-function-abi-variant" list for a libm function: one entry per
 * libmvec ISA the host runs (sse 'b', avx2 'd', avx-512 'e'), each with the
 * vector length that ISA's registers hold.  The vectoriser picks the entry
 * whose length matches the width it chose.
 */
static void add_libmvec_variants(Gen *g, LLVMValueRef call, const char *name, bool is_f32, int arity)
{
    struct { bool ok; char isa; int lanes_f64; } isas[3] = {
        {g->vec_sse, 'b', 2}, {g->vec_avx2, 'd', 4}, {g->vec_avx512, 'e', 8}};
    char list[1024] = "";
    size_t len = 0;
    const char *params = arity == 1 ? "v" : "vv";
    LLVMTypeRef elem = is_f32 ? g->t_f32 : g->t_f64;
    for (int i = 0; i < 3; i++) {
        if (!isas[i].ok)
            continue;
        int lanes = isas[i].lanes_f64 * (is_f32 ? 2 : 1);
        char vname[96];
        snprintf(vname, sizeof vname, "_ZGV%cN%d%s_%s", isas[i].isa, lanes, params, name);
        /* The vector function must be declared for the vectoriser to use it, and
         * kept in llvm.compiler.used so no pass drops the unused declaration. */
        if (!LLVMGetNamedFunction(g->mod, vname)) {
            LLVMTypeRef vt = LLVMVectorType(elem, (unsigned)lanes);
            LLVMTypeRef ps[2] = {vt, vt};
            LLVMValueRef vfn = LLVMAddFunction(g->mod, vname, LLVMFunctionType(vt, ps, (unsigned)arity, 0));
            add_fn_attr(g, vfn, "nounwind");
            LLVMAddAttributeAtIndex(vfn, LLVMAttributeFunctionIndex, memory_none(g));
            if (g->used_count == g->used_cap) {
                g->used_cap = g->used_cap ? 2 * g->used_cap : 32;
                g->used = kj_xrealloc(g->used, sizeof *g->used * (size_t)g->used_cap);
            }
            g->used[g->used_count++] = vfn;
        }
        len += (size_t)snprintf(list + len, sizeof list - len, "%s_ZGV_LLVM_N%d%s_%s(%s)",
                                len ? "," : "", lanes, params, name, vname);
    }
    if (len == 0)
        return;
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex,
                             LLVMCreateStringAttribute(g->ctx, "vector-function-abi-variant", 27,
                                                       list, (unsigned)len));
}

/* A call to libm (cpu) or libdevice (cuda) by base name: "sin" -> sinf/sin or
 * __nv_sinf/__nv_sin. */
static LLVMValueRef call_math_lib(Gen *g, const char *base, bool vectorizable, LLVMValueRef *args,
                                  int arity)
{
    LLVMTypeRef t = LLVMTypeOf(args[0]);
    bool is_f32 = t == g->t_f32;
    char name[64];
    snprintf(name, sizeof name, "%s%s%s", g->target == KJ_CODEGEN_CUDA ? "__nv_" : "", base,
             is_f32 ? "f" : "");
    LLVMTypeRef ps[3] = {t, t, t};
    LLVMTypeRef ft = LLVMFunctionType(t, ps, (unsigned)arity, 0);
    LLVMValueRef fn = get_extern(g, name, ft);
    LLVMValueRef call = LLVMBuildCall2(g->b, ft, fn, args, (unsigned)arity, "");
    /* errno is never read, so a math call is a pure function of its operands:
     * that lets the optimiser hoist, merge and vectorise it. */
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex, memory_none(g));
    if (g->target == KJ_CODEGEN_CPU && vectorizable) {
        char vname[64];
        snprintf(vname, sizeof vname, "%s%s", base, is_f32 ? "f" : "");
        add_libmvec_variants(g, call, vname, is_f32, arity);
    }
    return call;
}

/* lgamma through lgamma_r: plain lgamma writes the global signgam, a data race
 * when the parallel target runs it on several threads. */
static LLVMValueRef call_lgamma(Gen *g, LLVMValueRef x)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    bool is_f32 = t == g->t_f32;
    if (g->target == KJ_CODEGEN_CUDA)
        return call_math_lib(g, "lgamma", false, &x, 1);
    LLVMBuilderRef ab = LLVMCreateBuilderInContext(g->ctx);
    LLVMPositionBuilderBefore(ab, LLVMGetBasicBlockTerminator(g->entry_bb));
    LLVMValueRef sign = LLVMBuildAlloca(ab, g->t_i32, "signgam");
    LLVMDisposeBuilder(ab);
    LLVMTypeRef ps[2] = {t, g->t_ptr};
    LLVMTypeRef ft = LLVMFunctionType(t, ps, 2, 0);
    LLVMValueRef fn = get_extern(g, is_f32 ? "lgammaf_r" : "lgamma_r", ft);
    LLVMValueRef args[2] = {x, sign};
    return LLVMBuildCall2(g->b, ft, fn, args, 2, "");
}

static LLVMValueRef gen_math(Gen *g, KjMathFn math, LLVMValueRef *a, int arity)
{
    LLVMTypeRef t = LLVMTypeOf(a[0]);
    bool cuda = g->target == KJ_CODEGEN_CUDA;
    switch (math) {
    case KJ_MATH_SQRT: return call_intrinsic(g, "llvm.sqrt", &t, 1, a, 1);
    case KJ_MATH_FABS: return call_intrinsic(g, "llvm.fabs", &t, 1, a, 1);
    case KJ_MATH_FLOOR: return call_intrinsic(g, "llvm.floor", &t, 1, a, 1);
    case KJ_MATH_CEIL: return call_intrinsic(g, "llvm.ceil", &t, 1, a, 1);
    case KJ_MATH_TRUNC: return call_intrinsic(g, "llvm.trunc", &t, 1, a, 1);
    case KJ_MATH_FMA: return call_intrinsic(g, "llvm.fma", &t, 1, a, 3);
    case KJ_MATH_FMIN: return call_intrinsic(g, "llvm.minnum", &t, 1, a, 2);
    case KJ_MATH_FMAX: return call_intrinsic(g, "llvm.maxnum", &t, 1, a, 2);
    case KJ_MATH_COPYSIGN: return call_intrinsic(g, "llvm.copysign", &t, 1, a, 2);
    case KJ_MATH_ROUND:
        /* llvm.round (half away from zero, as C's round) has no PTX instruction. */
        return cuda ? call_math_lib(g, "round", false, a, 1)
                    : call_intrinsic(g, "llvm.round", &t, 1, a, 1);
    case KJ_MATH_FMOD:
        /* The NVPTX back end expands frem with an inexact formula; libdevice's is exact. */
        return cuda ? call_math_lib(g, "fmod", false, a, 2) : LLVMBuildFRem(g->b, a[0], a[1], "");
    case KJ_MATH_ISNAN: return LLVMBuildFCmp(g->b, LLVMRealUNO, a[0], a[0], "");
    case KJ_MATH_ISINF:
    case KJ_MATH_ISFINITE: {
        LLVMValueRef mag = call_intrinsic(g, "llvm.fabs", &t, 1, a, 1);
        LLVMValueRef inf = LLVMConstReal(t, __builtin_inf());
        return LLVMBuildFCmp(g->b, math == KJ_MATH_ISINF ? LLVMRealOEQ : LLVMRealOLT, mag, inf, "");
    }
    case KJ_MATH_LGAMMA: return call_lgamma(g, a[0]);
    default:
        return call_math_lib(g, math_info[math].libm, math_info[math].libmvec, a, arity);
    }
}

/* ============================================================ complex */

static LLVMValueRef make_complex(Gen *g, LLVMTypeRef ct, LLVMValueRef re, LLVMValueRef im)
{
    LLVMValueRef v = LLVMGetUndef(ct);
    v = LLVMBuildInsertValue(g->b, v, re, 0, "");
    return LLVMBuildInsertValue(g->b, v, im, 1, "");
}

static LLVMValueRef re_of(Gen *g, LLVMValueRef z) { return LLVMBuildExtractValue(g->b, z, 0, "re"); }
static LLVMValueRef im_of(Gen *g, LLVMValueRef z) { return LLVMBuildExtractValue(g->b, z, 1, "im"); }

static LLVMValueRef complex_mul(Gen *g, LLVMValueRef x, LLVMValueRef y)
{
    LLVMValueRef a = re_of(g, x), b = im_of(g, x), c = re_of(g, y), d = im_of(g, y);
    LLVMValueRef re = LLVMBuildFSub(g->b, LLVMBuildFMul(g->b, a, c, ""), LLVMBuildFMul(g->b, b, d, ""), "");
    LLVMValueRef im = LLVMBuildFAdd(g->b, LLVMBuildFMul(g->b, a, d, ""), LLVMBuildFMul(g->b, b, c, ""), "");
    return make_complex(g, LLVMTypeOf(x), re, im);
}

/* (a+bi)/(c+di) = ((ac+bd) + (bc-ad)i) / (c^2+d^2): the textbook formula. */
static LLVMValueRef complex_div(Gen *g, LLVMValueRef x, LLVMValueRef y)
{
    LLVMValueRef a = re_of(g, x), b = im_of(g, x), c = re_of(g, y), d = im_of(g, y);
    LLVMValueRef den = LLVMBuildFAdd(g->b, LLVMBuildFMul(g->b, c, c, ""), LLVMBuildFMul(g->b, d, d, ""), "");
    LLVMValueRef re = LLVMBuildFAdd(g->b, LLVMBuildFMul(g->b, a, c, ""), LLVMBuildFMul(g->b, b, d, ""), "");
    LLVMValueRef im = LLVMBuildFSub(g->b, LLVMBuildFMul(g->b, b, c, ""), LLVMBuildFMul(g->b, a, d, ""), "");
    return make_complex(g, LLVMTypeOf(x), LLVMBuildFDiv(g->b, re, den, ""), LLVMBuildFDiv(g->b, im, den, ""));
}

static LLVMValueRef complex_abs(Gen *g, LLVMValueRef z)
{
    LLVMValueRef parts[2] = {re_of(g, z), im_of(g, z)};
    return call_math_lib(g, "hypot", true, parts, 2);
}

/* ============================================================ conversions */

static LLVMValueRef convert(Gen *g, LLVMValueRef v, const KjType *from, const KjType *to)
{
    if (from == to)
        return v;
    LLVMTypeRef dst = llty(g, to);
    if (kj_type_is_complex(to)) {
        const KjType *part = kj_type_complex_part(to);
        if (kj_type_is_complex(from)) {
            const KjType *fpart = kj_type_complex_part(from);
            return make_complex(g, dst, convert(g, re_of(g, v), fpart, part), convert(g, im_of(g, v), fpart, part));
        }
        return make_complex(g, dst, convert(g, v, from, part), LLVMConstNull(llty(g, part)));
    }
    if (kj_type_is_complex(from)) /* complex to real: the real part */
        return convert(g, re_of(g, v), kj_type_complex_part(from), to);
    if (to->kind == KJ_TYPE_BOOL) {
        if (kj_type_is_float(from))
            return LLVMBuildFCmp(g->b, LLVMRealUNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
        return LLVMBuildICmp(g->b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
    }
    if (from->kind == KJ_TYPE_BOOL) {
        if (kj_type_is_float(to))
            return LLVMBuildUIToFP(g->b, v, dst, "");
        return LLVMBuildZExt(g->b, v, dst, "");
    }
    if (kj_type_is_int(from) && kj_type_is_int(to)) {
        int fb = kj_type_int_bits(from), tb = kj_type_int_bits(to);
        if (fb == tb)
            return v;
        if (fb > tb)
            return LLVMBuildTrunc(g->b, v, dst, "");
        return kj_type_is_signed(from) ? LLVMBuildSExt(g->b, v, dst, "") : LLVMBuildZExt(g->b, v, dst, "");
    }
    if (kj_type_is_int(from) && kj_type_is_float(to))
        return kj_type_is_signed(from) ? LLVMBuildSIToFP(g->b, v, dst, "") : LLVMBuildUIToFP(g->b, v, dst, "");
    if (kj_type_is_float(from) && kj_type_is_int(to)) {
        LLVMTypeRef ts[2] = {dst, LLVMTypeOf(v)};
        return call_intrinsic(g, kj_type_is_signed(to) ? "llvm.fptosi.sat" : "llvm.fptoui.sat", ts, 2, &v, 1);
    }
    if (kj_type_is_float(from) && kj_type_is_float(to))
        return kj_type_size(to) > kj_type_size(from) ? LLVMBuildFPExt(g->b, v, dst, "")
                                                     : LLVMBuildFPTrunc(g->b, v, dst, "");
    kj_die("no conversion from %s to %s", kj_type_name(from), kj_type_name(to));
}

/* ============================================================ arrays */

static void array_from_desc(Gen *g, LLVMValueRef desc_ptr, const KjType *type, ArrayVal *out)
{
    out->ndim = type->ndim;
    out->elem = type->elem;
    LLVMValueRef p = LLVMBuildStructGEP2(g->b, g->t_desc, desc_ptr, 0, "");
    out->data = LLVMBuildLoad2(g->b, g->t_ptr, p, "data");
    for (int k = 0; k < type->ndim; k++) {
        LLVMValueRef idx[3] = {const_i32(g, 0), const_i32(g, 1), const_i32(g, k)};
        out->shape[k] = LLVMBuildLoad2(g->b, g->t_i64, LLVMBuildInBoundsGEP2(g->b, g->t_desc, desc_ptr, idx, 3, ""), "shape");
        idx[1] = const_i32(g, 2);
        out->strides[k] = LLVMBuildLoad2(g->b, g->t_i64, LLVMBuildInBoundsGEP2(g->b, g->t_desc, desc_ptr, idx, 3, ""), "stride");
    }
}

/* A fixed-shape, row-major array (shared and local memory). */
static void array_fixed(Gen *g, LLVMValueRef data, const KjIrExpr *e, ArrayVal *out)
{
    out->ndim = e->alloc_ndim;
    out->elem = e->alloc_elem;
    out->data = data;
    int64_t stride = 1;
    for (int k = e->alloc_ndim - 1; k >= 0; k--) {
        out->shape[k] = const_i64(g, e->alloc_shape[k]);
        out->strides[k] = const_i64(g, stride);
        stride *= e->alloc_shape[k];
    }
}

static int64_t alloc_count(const KjIrExpr *e)
{
    int64_t n = 1;
    for (int k = 0; k < e->alloc_ndim; k++)
        n *= e->alloc_shape[k];
    return n;
}

static LLVMValueRef element_address(Gen *g, const ArrayVal *a, LLVMValueRef *indices, int count, bool contiguous)
{
    LLVMValueRef offset;
    if (contiguous) {
        offset = indices[0];
    } else {
        offset = NULL;
        for (int k = 0; k < count; k++) {
            LLVMValueRef term = LLVMBuildNSWMul(g->b, indices[k], a->strides[k], "");
            offset = offset ? LLVMBuildNSWAdd(g->b, offset, term, "") : term;
        }
    }
    return LLVMBuildInBoundsGEP2(g->b, memty(g, a->elem), a->data, &offset, 1, "");
}

/* ============================================================ expressions */

static LLVMValueRef gen_expr(Gen *g, KjIrExpr *e);
static void gen_array(Gen *g, KjIrExpr *e, ArrayVal *out);
static void gen_stmt(Gen *g, KjIrStmt *s);

static FnInfo *fn_info(Gen *g, const KjIrFunction *fn)
{
    for (int i = 0; i < g->fn_count; i++)
        if (g->fns[i].ir == fn)
            return &g->fns[i];
    kj_die("function %s was not declared", fn->symbol);
}

/* Code after a terminator (break, return) goes to a fresh block nothing
 * branches to; the optimiser drops it. */
static void start_dead_block(Gen *g)
{
    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, g->llfn, "dead"));
}

static bool block_open(Gen *g) { return LLVMGetBasicBlockTerminator(LLVMGetInsertBlock(g->b)) == NULL; }

static void branch_to(Gen *g, LLVMBasicBlockRef bb)
{
    if (block_open(g))
        LLVMBuildBr(g->b, bb);
}

static LLVMBasicBlockRef new_block(Gen *g, const char *name)
{
    return LLVMAppendBasicBlockInContext(g->ctx, g->llfn, name);
}

static LLVMValueRef gen_int_div(Gen *g, KjIrOp op, const KjType *type, LLVMValueRef a, LLVMValueRef d)
{
    LLVMTypeRef t = llty(g, type);
    LLVMValueRef zero = LLVMConstNull(t), one = LLVMConstInt(t, 1, 0);
    LLVMValueRef is_zero = LLVMBuildICmp(g->b, LLVMIntEQ, d, zero, "");
    if (!kj_type_is_signed(type)) {
        LLVMValueRef safe = LLVMBuildSelect(g->b, is_zero, one, d, "");
        return op == KJ_IR_DIV ? LLVMBuildUDiv(g->b, a, safe, "") : LLVMBuildURem(g->b, a, safe, "");
    }
    /* Divisors 0 and -1 become 1: no trap on zero, none on MIN / -1. */
    LLVMValueRef is_minus_one = LLVMBuildICmp(g->b, LLVMIntEQ, d, LLVMConstAllOnes(t), "");
    LLVMValueRef bad = LLVMBuildOr(g->b, is_zero, is_minus_one, "");
    LLVMValueRef safe = LLVMBuildSelect(g->b, bad, one, d, "");
    if (op == KJ_IR_REM)
        return LLVMBuildSRem(g->b, a, safe, ""); /* x % -1 == 0 == x % 1 */
    LLVMValueRef q = LLVMBuildSDiv(g->b, a, safe, "");
    return LLVMBuildSelect(g->b, is_minus_one, LLVMBuildSub(g->b, zero, a, ""), q, "");
}

static LLVMValueRef gen_arith(Gen *g, KjIrOp op, const KjType *type, LLVMValueRef a, LLVMValueRef b)
{
    LLVMBuilderRef B = g->b;
    if (kj_type_is_complex(type)) {
        switch (op) {
        case KJ_IR_ADD:
            return make_complex(g, LLVMTypeOf(a), LLVMBuildFAdd(B, re_of(g, a), re_of(g, b), ""),
                                LLVMBuildFAdd(B, im_of(g, a), im_of(g, b), ""));
        case KJ_IR_SUB:
            return make_complex(g, LLVMTypeOf(a), LLVMBuildFSub(B, re_of(g, a), re_of(g, b), ""),
                                LLVMBuildFSub(B, im_of(g, a), im_of(g, b), ""));
        case KJ_IR_MUL: return complex_mul(g, a, b);
        case KJ_IR_DIV: return complex_div(g, a, b);
        default: gen_error(g, "complex operands are not supported for %s", kj_ir_op_name(op)); return a;
        }
    }
    if (kj_type_is_float(type)) {
        switch (op) {
        case KJ_IR_ADD: return LLVMBuildFAdd(B, a, b, "");
        case KJ_IR_SUB: return LLVMBuildFSub(B, a, b, "");
        case KJ_IR_MUL: return LLVMBuildFMul(B, a, b, "");
        case KJ_IR_DIV: return LLVMBuildFDiv(B, a, b, "");
        case KJ_IR_REM:
            return g->target == KJ_CODEGEN_CUDA ? call_math_lib(g, "fmod", false, (LLVMValueRef[]){a, b}, 2)
                                                : LLVMBuildFRem(B, a, b, "");
        default: gen_error(g, "float operands are not supported for %s", kj_ir_op_name(op)); return a;
        }
    }
    switch (op) {
    case KJ_IR_ADD: return LLVMBuildAdd(B, a, b, "");
    case KJ_IR_SUB: return LLVMBuildSub(B, a, b, "");
    case KJ_IR_MUL: return LLVMBuildMul(B, a, b, "");
    case KJ_IR_DIV:
    case KJ_IR_REM: return gen_int_div(g, op, type, a, b);
    case KJ_IR_BITAND: return LLVMBuildAnd(B, a, b, "");
    case KJ_IR_BITOR: return LLVMBuildOr(B, a, b, "");
    case KJ_IR_BITXOR: return LLVMBuildXor(B, a, b, "");
    case KJ_IR_SHL:
    case KJ_IR_SHR: {
        LLVMTypeRef t = LLVMTypeOf(a);
        unsigned bits = LLVMGetIntTypeWidth(t);
        unsigned bbits = LLVMGetIntTypeWidth(LLVMTypeOf(b));
        if (bbits > bits)
            b = LLVMBuildTrunc(B, b, t, "");
        else if (bbits < bits)
            b = LLVMBuildZExt(B, b, t, "");
        b = LLVMBuildAnd(B, b, LLVMConstInt(t, bits - 1, 0), "");
        if (op == KJ_IR_SHL)
            return LLVMBuildShl(B, a, b, "");
        return kj_type_is_signed(type) ? LLVMBuildAShr(B, a, b, "") : LLVMBuildLShr(B, a, b, "");
    }
    default: kj_unreachable();
    }
}

static LLVMValueRef gen_compare(Gen *g, KjIrOp op, const KjType *type, LLVMValueRef a, LLVMValueRef b)
{
    if (kj_type_is_complex(type)) {
        LLVMValueRef re = LLVMBuildFCmp(g->b, LLVMRealOEQ, re_of(g, a), re_of(g, b), "");
        LLVMValueRef im = LLVMBuildFCmp(g->b, LLVMRealOEQ, im_of(g, a), im_of(g, b), "");
        LLVMValueRef eq = LLVMBuildAnd(g->b, re, im, "");
        if (op == KJ_IR_EQ)
            return eq;
        if (op == KJ_IR_NE)
            return LLVMBuildNot(g->b, eq, "");
        gen_error(g, "complex values have no order%s", NULL);
        return eq;
    }
    if (kj_type_is_float(type)) {
        static const LLVMRealPredicate preds[] = {
            [KJ_IR_EQ] = LLVMRealOEQ, [KJ_IR_NE] = LLVMRealUNE, [KJ_IR_LT] = LLVMRealOLT,
            [KJ_IR_LE] = LLVMRealOLE, [KJ_IR_GT] = LLVMRealOGT, [KJ_IR_GE] = LLVMRealOGE};
        return LLVMBuildFCmp(g->b, preds[op], a, b, "");
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
    return LLVMBuildICmp(g->b, p, a, b, "");
}

/* The constant 1 of a numeric type. */
static LLVMValueRef unit_of(Gen *g, const KjType *type)
{
    if (kj_type_is_complex(type)) {
        LLVMTypeRef pt = llty(g, kj_type_complex_part(type));
        return LLVMConstStructInContext(g->ctx, (LLVMValueRef[]){LLVMConstReal(pt, 1.0), LLVMConstNull(pt)}, 2, 0);
    }
    if (kj_type_is_float(type))
        return LLVMConstReal(llty(g, type), 1.0);
    return LLVMConstInt(llty(g, type), 1, 0);
}

/* x ** n for a constant n: square-and-multiply unrolled at compile time. */
static LLVMValueRef ipow_const(Gen *g, const KjType *type, LLVMValueRef x, int64_t n)
{
    LLVMValueRef one = unit_of(g, type);
    uint64_t m = n < 0 ? (uint64_t)0 - (uint64_t)n : (uint64_t)n;
    LLVMValueRef result = NULL, base = x;
    while (m) {
        if (m & 1)
            result = result ? gen_arith(g, KJ_IR_MUL, type, result, base) : base;
        m >>= 1;
        if (m)
            base = gen_arith(g, KJ_IR_MUL, type, base, base);
    }
    if (!result)
        result = one;
    if (n < 0)
        result = gen_arith(g, KJ_IR_DIV, type, one, result);
    return result;
}

/* x ** n for a run-time integer n: a square-and-multiply loop.  A negative n
 * gives 1 / x**-n for floats and complex; for integers it gives 0 unless |x|
 * is 1 (what the integer 1 / x**-n truncates to). */
static LLVMValueRef gen_ipow(Gen *g, const KjType *type, LLVMValueRef x, LLVMValueRef n, const KjType *ntype)
{
    n = convert(g, n, ntype, kj_type_scalar(KJ_TYPE_I64));
    LLVMTypeRef t = llty(g, type);
    LLVMValueRef one = unit_of(g, type);
    LLVMValueRef neg = LLVMBuildICmp(g->b, LLVMIntSLT, n, const_i64(g, 0), "");
    LLVMValueRef mag = LLVMBuildSelect(g->b, neg, LLVMBuildSub(g->b, const_i64(g, 0), n, ""), n, "");

    LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b);
    LLVMBasicBlockRef loop = new_block(g, "ipow.loop"), done = new_block(g, "ipow.done");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, mag, const_i64(g, 0), ""), done, loop);

    LLVMPositionBuilderAtEnd(g->b, loop);
    LLVMValueRef acc = LLVMBuildPhi(g->b, t, "acc");
    LLVMValueRef base = LLVMBuildPhi(g->b, t, "base");
    LLVMValueRef m = LLVMBuildPhi(g->b, g->t_i64, "m");
    LLVMValueRef odd = LLVMBuildTrunc(g->b, m, g->t_i1, "");
    LLVMValueRef acc2 = LLVMBuildSelect(g->b, odd, gen_arith(g, KJ_IR_MUL, type, acc, base), acc, "");
    LLVMValueRef base2 = gen_arith(g, KJ_IR_MUL, type, base, base);
    LLVMValueRef m2 = LLVMBuildLShr(g->b, m, const_i64(g, 1), "");
    LLVMBasicBlockRef loop_end = LLVMGetInsertBlock(g->b);
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, m2, const_i64(g, 0), ""), done, loop);
    LLVMAddIncoming(acc, (LLVMValueRef[]){one, acc2}, (LLVMBasicBlockRef[]){pre, loop_end}, 2);
    LLVMAddIncoming(base, (LLVMValueRef[]){x, base2}, (LLVMBasicBlockRef[]){pre, loop_end}, 2);
    LLVMAddIncoming(m, (LLVMValueRef[]){mag, m2}, (LLVMBasicBlockRef[]){pre, loop_end}, 2);

    LLVMPositionBuilderAtEnd(g->b, done);
    LLVMValueRef r = LLVMBuildPhi(g->b, t, "pow");
    LLVMAddIncoming(r, (LLVMValueRef[]){one, acc2}, (LLVMBasicBlockRef[]){pre, loop_end}, 2);
    if (kj_type_is_int(type)) {
        /* 1 / x**m for m > 0: 1 when x is 1, +-1 when x is -1, else 0. */
        LLVMValueRef is_one = LLVMBuildICmp(g->b, LLVMIntEQ, x, one, "");
        LLVMValueRef is_m1 = LLVMBuildICmp(g->b, LLVMIntEQ, x, LLVMConstAllOnes(t), "");
        LLVMValueRef inv = LLVMBuildSelect(g->b, is_one, one,
                                           LLVMBuildSelect(g->b, is_m1, r, LLVMConstNull(t), ""), "");
        return LLVMBuildSelect(g->b, neg, inv, r, "");
    }
    return LLVMBuildSelect(g->b, neg, gen_arith(g, KJ_IR_DIV, type, one, r), r, "");
}

static LLVMValueRef read_sreg(Gen *g, KjSpecialReg reg)
{
    if (g->target == KJ_CODEGEN_CPU) {
        if (!g->sreg[reg]) {
            gen_error(g, "%s is only available in kernels", kj_special_reg_names[reg]);
            return const_i32(g, 0);
        }
        return g->sreg[reg];
    }
    static const char *const names[KJ_SREG_COUNT] = {
        [KJ_SREG_TID_X] = "llvm.nvvm.read.ptx.sreg.tid.x",     [KJ_SREG_TID_Y] = "llvm.nvvm.read.ptx.sreg.tid.y",
        [KJ_SREG_TID_Z] = "llvm.nvvm.read.ptx.sreg.tid.z",     [KJ_SREG_BID_X] = "llvm.nvvm.read.ptx.sreg.ctaid.x",
        [KJ_SREG_BID_Y] = "llvm.nvvm.read.ptx.sreg.ctaid.y",   [KJ_SREG_BID_Z] = "llvm.nvvm.read.ptx.sreg.ctaid.z",
        [KJ_SREG_BDIM_X] = "llvm.nvvm.read.ptx.sreg.ntid.x",   [KJ_SREG_BDIM_Y] = "llvm.nvvm.read.ptx.sreg.ntid.y",
        [KJ_SREG_BDIM_Z] = "llvm.nvvm.read.ptx.sreg.ntid.z",   [KJ_SREG_GDIM_X] = "llvm.nvvm.read.ptx.sreg.nctaid.x",
        [KJ_SREG_GDIM_Y] = "llvm.nvvm.read.ptx.sreg.nctaid.y", [KJ_SREG_GDIM_Z] = "llvm.nvvm.read.ptx.sreg.nctaid.z",
    };
    return call_intrinsic(g, names[reg], NULL, 0, NULL, 0);
}

static LLVMValueRef gen_atomic(Gen *g, KjIrExpr *e)
{
    ArrayVal a;
    gen_array(g, e->args[0], &a);
    LLVMValueRef index = gen_expr(g, e->args[1]);
    /* The flat index counts elements along the array's storage: for a 1-D view
     * that is the first stride; for N-D arrays the checker gives a row-major index
     * into a contiguous array. */
    LLVMValueRef ptr = a.ndim == 1 ? element_address(g, &a, &index, 1, false)
                                   : element_address(g, &a, &index, 1, true);
    LLVMValueRef v = gen_expr(g, e->args[2]);
    const KjType *t = e->type;
    LLVMAtomicOrdering order = g->target == KJ_CODEGEN_CUDA ? LLVMAtomicOrderingMonotonic
                                                            : LLVMAtomicOrderingSequentiallyConsistent;
    if (!kj_type_is_int(t) && !kj_type_is_float(t)) {
        gen_error(g, "atomics on %s are not supported", kj_type_name(t));
        return v;
    }
    bool is_float = kj_type_is_float(t), sgn = kj_type_is_signed(t);
    LLVMAtomicRMWBinOp op;
    switch (e->atomic) {
    case KJ_ATOMIC_ADD: op = is_float ? LLVMAtomicRMWBinOpFAdd : LLVMAtomicRMWBinOpAdd; break;
    case KJ_ATOMIC_MIN: op = is_float ? LLVMAtomicRMWBinOpFMin : sgn ? LLVMAtomicRMWBinOpMin : LLVMAtomicRMWBinOpUMin; break;
    case KJ_ATOMIC_MAX: op = is_float ? LLVMAtomicRMWBinOpFMax : sgn ? LLVMAtomicRMWBinOpMax : LLVMAtomicRMWBinOpUMax; break;
    case KJ_ATOMIC_EXCH: op = LLVMAtomicRMWBinOpXchg; break;
    case KJ_ATOMIC_CAS: {
        LLVMValueRef nv = gen_expr(g, e->args[3]);
        LLVMTypeRef it = is_float ? LLVMIntTypeInContext(g->ctx, (unsigned)kj_type_size(t) * 8) : llty(g, t);
        LLVMValueRef cmp = is_float ? LLVMBuildBitCast(g->b, v, it, "") : v;
        LLVMValueRef nw = is_float ? LLVMBuildBitCast(g->b, nv, it, "") : nv;
        LLVMValueRef pair = LLVMBuildAtomicCmpXchg(g->b, ptr, cmp, nw, order, order, 0);
        LLVMValueRef old = LLVMBuildExtractValue(g->b, pair, 0, "");
        return is_float ? LLVMBuildBitCast(g->b, old, llty(g, t), "") : old;
    }
    default: kj_unreachable();
    }
    return LLVMBuildAtomicRMW(g->b, op, ptr, v, order, 0);
}

static LLVMValueRef gen_call(Gen *g, KjIrExpr *e)
{
    FnInfo *info = fn_info(g, e->callee);
    LLVMValueRef args[8 * (1 + 2 * KJ_MAX_DIMS) + 8];
    LLVMValueRef *many = NULL;
    int cap = 0;
    for (int i = 0; i < e->arg_count; i++)
        cap += is_array(e->args[i]->type) ? 1 + 2 * e->args[i]->type->ndim : 1;
    cap += 8;
    LLVMValueRef *out = args;
    if (cap > (int)(sizeof args / sizeof args[0]))
        out = many = kj_xmalloc(sizeof(LLVMValueRef) * (size_t)cap);
    int n = 0;
    for (int i = 0; i < e->arg_count; i++) {
        const KjType *pt = e->callee->params[i]->type;
        if (is_array(e->args[i]->type)) {
            ArrayVal a;
            gen_array(g, e->args[i], &a);
            out[n++] = a.data;
            for (int k = 0; k < a.ndim; k++)
                out[n++] = a.shape[k];
            for (int k = 0; k < a.ndim; k++)
                out[n++] = a.strides[k];
        } else {
            out[n++] = convert(g, gen_expr(g, e->args[i]), e->args[i]->type, pt);
        }
    }
    if (e->callee->kind == KJ_IR_FN_KERNEL && g->target == KJ_CODEGEN_CPU) {
        out[n++] = g->thread_ctx;
        for (int k = 0; k < 3; k++)
            out[n++] = g->sreg[KJ_SREG_TID_X + k];
    }
    LLVMValueRef call = LLVMBuildCall2(g->b, info->impl_type, info->impl, out, (unsigned)n, "");
    free(many);
    return call;
}

static LLVMValueRef gen_short_circuit(Gen *g, KjIrExpr *e)
{
    bool is_and = e->op == KJ_IR_LOGAND;
    LLVMValueRef lhs = gen_expr(g, e->args[0]);
    LLVMBasicBlockRef lhs_end = LLVMGetInsertBlock(g->b);
    LLVMBasicBlockRef rhs_bb = new_block(g, is_and ? "and.rhs" : "or.rhs"), done = new_block(g, "logic.done");
    if (is_and)
        LLVMBuildCondBr(g->b, lhs, rhs_bb, done);
    else
        LLVMBuildCondBr(g->b, lhs, done, rhs_bb);
    LLVMPositionBuilderAtEnd(g->b, rhs_bb);
    LLVMValueRef rhs = gen_expr(g, e->args[1]);
    LLVMBasicBlockRef rhs_end = LLVMGetInsertBlock(g->b);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, done);
    LLVMValueRef phi = LLVMBuildPhi(g->b, g->t_i1, "");
    LLVMValueRef short_value = LLVMConstInt(g->t_i1, is_and ? 0 : 1, 0);
    LLVMAddIncoming(phi, (LLVMValueRef[]){short_value, rhs}, (LLVMBasicBlockRef[]){lhs_end, rhs_end}, 2);
    return phi;
}

static LLVMValueRef gen_select(Gen *g, KjIrExpr *e)
{
    LLVMValueRef cond = gen_expr(g, e->args[0]);
    LLVMBasicBlockRef then_bb = new_block(g, "sel.then"), else_bb = new_block(g, "sel.else"),
                      done = new_block(g, "sel.done");
    LLVMBuildCondBr(g->b, cond, then_bb, else_bb);
    LLVMPositionBuilderAtEnd(g->b, then_bb);
    LLVMValueRef a = convert(g, gen_expr(g, e->args[1]), e->args[1]->type, e->type);
    LLVMBasicBlockRef then_end = LLVMGetInsertBlock(g->b);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, else_bb);
    LLVMValueRef b = convert(g, gen_expr(g, e->args[2]), e->args[2]->type, e->type);
    LLVMBasicBlockRef else_end = LLVMGetInsertBlock(g->b);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, done);
    LLVMValueRef phi = LLVMBuildPhi(g->b, llty(g, e->type), "");
    LLVMAddIncoming(phi, (LLVMValueRef[]){a, b}, (LLVMBasicBlockRef[]){then_end, else_end}, 2);
    return phi;
}

static LLVMValueRef gen_expr(Gen *g, KjIrExpr *e)
{
    LLVMBuilderRef B = g->b;
    switch (e->op) {
    case KJ_IR_CONST:
        if (kj_type_is_complex(e->type)) {
            LLVMTypeRef pt = llty(g, kj_type_complex_part(e->type));
            return LLVMConstStructInContext(g->ctx, (LLVMValueRef[]){LLVMConstReal(pt, e->const_float), LLVMConstReal(pt, e->const_imag)}, 2, 0);
        }
        if (kj_type_is_float(e->type))
            return LLVMConstReal(llty(g, e->type), e->const_float);
        if (e->type->kind == KJ_TYPE_BOOL)
            return LLVMConstInt(g->t_i1, e->const_int != 0, 0);
        return LLVMConstInt(llty(g, e->type), e->const_int, 0);
    case KJ_IR_VAR:
        if (is_array(e->type))
            break;
        return LLVMBuildLoad2(B, llty(g, e->type), g->slots[e->var->id].scalar, e->var->name);
    case KJ_IR_NEG: {
        LLVMValueRef x = gen_expr(g, e->args[0]);
        if (kj_type_is_complex(e->type))
            return make_complex(g, LLVMTypeOf(x), LLVMBuildFNeg(B, re_of(g, x), ""), LLVMBuildFNeg(B, im_of(g, x), ""));
        return kj_type_is_float(e->type) ? LLVMBuildFNeg(B, x, "") : LLVMBuildNeg(B, x, "");
    }
    case KJ_IR_NOT:
    case KJ_IR_BITNOT: return LLVMBuildNot(B, gen_expr(g, e->args[0]), "");
    case KJ_IR_ADD: case KJ_IR_SUB: case KJ_IR_MUL: case KJ_IR_DIV: case KJ_IR_REM:
    case KJ_IR_BITAND: case KJ_IR_BITOR: case KJ_IR_BITXOR: case KJ_IR_SHL: case KJ_IR_SHR: {
        LLVMValueRef a = convert(g, gen_expr(g, e->args[0]), e->args[0]->type, e->type);
        LLVMValueRef b = gen_expr(g, e->args[1]);
        if (e->op != KJ_IR_SHL && e->op != KJ_IR_SHR)
            b = convert(g, b, e->args[1]->type, e->type);
        return gen_arith(g, e->op, e->type, a, b);
    }
    case KJ_IR_EQ: case KJ_IR_NE: case KJ_IR_LT: case KJ_IR_LE: case KJ_IR_GT: case KJ_IR_GE: {
        const KjType *t = e->args[0]->type;
        LLVMValueRef a = gen_expr(g, e->args[0]);
        LLVMValueRef b = convert(g, gen_expr(g, e->args[1]), e->args[1]->type, t);
        return gen_compare(g, e->op, t, a, b);
    }
    case KJ_IR_LOGAND:
    case KJ_IR_LOGOR: return gen_short_circuit(g, e);
    case KJ_IR_SELECT: return gen_select(g, e);
    case KJ_IR_CAST: return convert(g, gen_expr(g, e->args[0]), e->args[0]->type, e->type);
    case KJ_IR_CALL: return gen_call(g, e);
    case KJ_IR_MATH: {
        LLVMValueRef a[3];
        const KjType *ft = e->args[0]->type;
        for (int i = 0; i < e->arg_count && i < 3; i++)
            a[i] = convert(g, gen_expr(g, e->args[i]), e->args[i]->type, ft);
        return gen_math(g, e->math, a, e->arg_count);
    }
    case KJ_IR_IPOW: {
        LLVMValueRef x = convert(g, gen_expr(g, e->args[0]), e->args[0]->type, e->type);
        if (e->args[1]->op == KJ_IR_CONST && kj_type_is_int(e->args[1]->type)) {
            int64_t n = kj_type_is_signed(e->args[1]->type) || e->args[1]->const_int <= INT64_MAX
                            ? (int64_t)e->args[1]->const_int : INT64_MAX;
            if (kj_type_int_bits(e->args[1]->type) < 64 && kj_type_is_signed(e->args[1]->type)) {
                int bits = kj_type_int_bits(e->args[1]->type);
                n = (int64_t)(e->args[1]->const_int << (64 - bits)) >> (64 - bits);
            }
            if (n >= -64 && n <= 64)
                return ipow_const(g, e->type, x, n);
        }
        return gen_ipow(g, e->type, x, gen_expr(g, e->args[1]), e->args[1]->type);
    }
    case KJ_IR_COMPLEX: {
        const KjType *part = kj_type_complex_part(e->type);
        LLVMValueRef re = convert(g, gen_expr(g, e->args[0]), e->args[0]->type, part);
        LLVMValueRef im = convert(g, gen_expr(g, e->args[1]), e->args[1]->type, part);
        return make_complex(g, llty(g, e->type), re, im);
    }
    case KJ_IR_REAL: return re_of(g, gen_expr(g, e->args[0]));
    case KJ_IR_IMAG: return im_of(g, gen_expr(g, e->args[0]));
    case KJ_IR_CONJ: {
        LLVMValueRef z = gen_expr(g, e->args[0]);
        return make_complex(g, LLVMTypeOf(z), re_of(g, z), LLVMBuildFNeg(B, im_of(g, z), ""));
    }
    case KJ_IR_CABS: return complex_abs(g, gen_expr(g, e->args[0]));
    case KJ_IR_LOAD: {
        ArrayVal a;
        gen_array(g, e->args[0], &a);
        LLVMValueRef idx[KJ_MAX_DIMS];
        int count = e->arg_count - 1;
        for (int k = 0; k < count && k < KJ_MAX_DIMS; k++)
            idx[k] = convert(g, gen_expr(g, e->args[1 + k]), e->args[1 + k]->type, kj_type_scalar(KJ_TYPE_I64));
        LLVMValueRef p = element_address(g, &a, idx, count, e->contiguous);
        return from_mem(g, e->type, LLVMBuildLoad2(B, memty(g, e->type), p, ""));
    }
    case KJ_IR_DIM: {
        ArrayVal a;
        gen_array(g, e->args[0], &a);
        if (e->dim < 0 || e->dim >= a.ndim) {
            gen_error(g, "dimension out of range%s", NULL);
            return const_i64(g, 0);
        }
        return a.shape[e->dim];
    }
    case KJ_IR_SREG: return read_sreg(g, e->sreg);
    case KJ_IR_ATOMIC: return gen_atomic(g, e);
    case KJ_IR_SYNCTHREADS:
        if (g->target == KJ_CODEGEN_CUDA) {
            call_intrinsic(g, "llvm.nvvm.barrier0", NULL, 0, NULL, 0);
        } else if (g->thread_ctx) {
            LLVMTypeRef ft = LLVMFunctionType(g->t_void, &g->t_ptr, 1, 0);
            LLVMBuildCall2(B, ft, get_extern(g, "kj_cpu_syncthreads", ft), &g->thread_ctx, 1, "");
        } else {
            gen_error(g, "syncthreads() is only available in kernels%s", NULL);
        }
        return NULL;
    case KJ_IR_SHARED:
    case KJ_IR_LOCAL:
        break;
    default:
        break;
    }
    gen_error(g, "the code generator cannot lower this %s expression", kj_ir_op_name(e->op));
    return e->type->kind == KJ_TYPE_VOID || is_array(e->type) ? NULL : zero_of(g, e->type);
}

static void gen_array(Gen *g, KjIrExpr *e, ArrayVal *out)
{
    memset(out, 0, sizeof *out);
    switch (e->op) {
    case KJ_IR_VAR: {
        const KjType *t = e->var->type;
        ArraySlots *s = &g->slots[e->var->id].array;
        out->ndim = t->ndim;
        out->elem = t->elem;
        out->data = LLVMBuildLoad2(g->b, g->t_ptr, s->data, "data");
        for (int k = 0; k < t->ndim; k++) {
            out->shape[k] = LLVMBuildLoad2(g->b, g->t_i64, s->shape[k], "shape");
            out->strides[k] = LLVMBuildLoad2(g->b, g->t_i64, s->strides[k], "stride");
        }
        return;
    }
    case KJ_IR_LOCAL: {
        LLVMBuilderRef ab = LLVMCreateBuilderInContext(g->ctx);
        LLVMPositionBuilderBefore(ab, LLVMGetBasicBlockTerminator(g->entry_bb));
        LLVMTypeRef at = LLVMArrayType2(memty(g, e->alloc_elem), (uint64_t)alloc_count(e));
        LLVMValueRef mem = LLVMBuildAlloca(ab, at, "local");
        LLVMSetAlignment(mem, 16);
        LLVMDisposeBuilder(ab);
        array_fixed(g, mem, e, out);
        return;
    }
    case KJ_IR_SHARED: {
        int64_t bytes = alloc_count(e) * kj_type_size(e->alloc_elem);
        if (g->target == KJ_CODEGEN_CUDA) {
            LLVMTypeRef at = LLVMArrayType2(memty(g, e->alloc_elem), (uint64_t)alloc_count(e));
            LLVMValueRef gv = LLVMAddGlobalInAddressSpace(g->mod, at, "shared", 3);
            LLVMSetLinkage(gv, LLVMInternalLinkage);
            LLVMSetInitializer(gv, LLVMGetUndef(at));
            LLVMSetAlignment(gv, 16);
            array_fixed(g, LLVMBuildAddrSpaceCast(g->b, gv, g->t_ptr, ""), e, out);
            return;
        }
        if (!g->shared_base) {
            gen_error(g, "shared() is only available in kernels%s", NULL);
            array_fixed(g, LLVMConstNull(g->t_ptr), e, out);
            return;
        }
        /* Each shared() call gets its own 16-byte aligned slice of ctx->shared,
         * in the order the calls appear in the function. */
        int64_t offset = g->shared_offset;
        g->shared_offset += (bytes + 15) & ~(int64_t)15;
        LLVMValueRef off = const_i64(g, offset);
        array_fixed(g, LLVMBuildInBoundsGEP2(g->b, g->t_i8, g->shared_base, &off, 1, "shared"), e, out);
        return;
    }
    default:
        gen_error(g, "the code generator cannot make an array from a %s expression", kj_ir_op_name(e->op));
        out->ndim = e->type->ndim;
        out->elem = e->type->elem;
        out->data = LLVMConstNull(g->t_ptr);
        for (int k = 0; k < out->ndim; k++)
            out->shape[k] = out->strides[k] = const_i64(g, 0);
        return;
    }
}

/* ============================================================ statements */

static void store_var(Gen *g, KjIrVar *var, KjIrExpr *value)
{
    if (is_array(var->type)) {
        ArrayVal a;
        gen_array(g, value, &a);
        ArraySlots *s = &g->slots[var->id].array;
        LLVMBuildStore(g->b, a.data, s->data);
        for (int k = 0; k < var->type->ndim && k < a.ndim; k++) {
            LLVMBuildStore(g->b, a.shape[k], s->shape[k]);
            LLVMBuildStore(g->b, a.strides[k], s->strides[k]);
        }
        return;
    }
    LLVMValueRef v = convert(g, gen_expr(g, value), value->type, var->type);
    LLVMBuildStore(g->b, v, g->slots[var->id].scalar);
}

static void push_loop(Gen *g, LLVMBasicBlockRef break_bb, LLVMBasicBlockRef continue_bb)
{
    if (g->loop_depth >= (int)(sizeof g->loops / sizeof g->loops[0])) {
        gen_error(g, "loops are nested more than 256 deep%s", NULL);
        g->loop_depth--; /* the caller's pop keeps the count balanced */
    }
    g->loops[++g->loop_depth - 1] = (LoopTargets){break_bb, continue_bb};
}

static LLVMValueRef alloca_in_entry(Gen *g, LLVMTypeRef t, const char *name)
{
    LLVMBuilderRef ab = LLVMCreateBuilderInContext(g->ctx);
    LLVMPositionBuilderBefore(ab, LLVMGetBasicBlockTerminator(g->entry_bb));
    LLVMValueRef slot = LLVMBuildAlloca(ab, t, name);
    LLVMDisposeBuilder(ab);
    return slot;
}

static void gen_for(Gen *g, KjIrStmt *s)
{
    const KjType *t = s->var->type;
    LLVMTypeRef lt = llty(g, t);
    LLVMValueRef start = convert(g, gen_expr(g, s->start), s->start->type, t);
    LLVMValueRef stop = convert(g, gen_expr(g, s->stop), s->stop->type, t);
    LLVMValueRef step = convert(g, gen_expr(g, s->step), s->step->type, t);
    bool sgn = kj_type_is_signed(t);
    /* The loop counts with its own hidden counter, so assigning to the loop
     * variable in the body does not change the iterations (as in Python). */
    LLVMValueRef counter = alloca_in_entry(g, lt, "for.counter");
    LLVMBuildStore(g->b, start, counter);
    LLVMValueRef up = LLVMBuildICmp(g->b, sgn ? LLVMIntSGT : LLVMIntNE, step, LLVMConstNull(lt), "up");

    LLVMBasicBlockRef cond_bb = new_block(g, "for.cond"), body_bb = new_block(g, "for.body"),
                      inc_bb = new_block(g, "for.inc"), exit_bb = new_block(g, "for.exit");
    LLVMBuildBr(g->b, cond_bb);
    LLVMPositionBuilderAtEnd(g->b, cond_bb);
    LLVMValueRef i = LLVMBuildLoad2(g->b, lt, counter, "i");
    LLVMValueRef below = LLVMBuildICmp(g->b, sgn ? LLVMIntSLT : LLVMIntULT, i, stop, "");
    LLVMValueRef above = LLVMBuildICmp(g->b, sgn ? LLVMIntSGT : LLVMIntUGT, i, stop, "");
    LLVMBuildCondBr(g->b, LLVMBuildSelect(g->b, up, below, above, ""), body_bb, exit_bb);

    LLVMPositionBuilderAtEnd(g->b, body_bb);
    LLVMBuildStore(g->b, i, g->slots[s->var->id].scalar);
    push_loop(g, exit_bb, inc_bb);
    gen_stmt(g, s->body);
    g->loop_depth--;
    branch_to(g, inc_bb);

    LLVMPositionBuilderAtEnd(g->b, inc_bb);
    LLVMValueRef cur = LLVMBuildLoad2(g->b, lt, counter, "");
    LLVMBuildStore(g->b, LLVMBuildAdd(g->b, cur, step, ""), counter);
    LLVMBuildBr(g->b, cond_bb);
    LLVMPositionBuilderAtEnd(g->b, exit_bb);
}

/* PARFOR: on cpu the iterations [begin, end) the runtime hands to __range; on
 * cuda a grid-stride loop over [0, stop). */
static void gen_parfor(Gen *g, KjIrStmt *s)
{
    LLVMValueRef begin, end, step;
    bool cuda = g->target == KJ_CODEGEN_CUDA;
    if (cuda) {
        end = convert(g, gen_expr(g, s->stop), s->stop->type, kj_type_scalar(KJ_TYPE_I64));
        LLVMValueRef bid = LLVMBuildZExt(g->b, read_sreg(g, KJ_SREG_BID_X), g->t_i64, "");
        LLVMValueRef bdim = LLVMBuildZExt(g->b, read_sreg(g, KJ_SREG_BDIM_X), g->t_i64, "");
        LLVMValueRef tid = LLVMBuildZExt(g->b, read_sreg(g, KJ_SREG_TID_X), g->t_i64, "");
        LLVMValueRef gdim = LLVMBuildZExt(g->b, read_sreg(g, KJ_SREG_GDIM_X), g->t_i64, "");
        begin = LLVMBuildNUWAdd(g->b, LLVMBuildNUWMul(g->b, bid, bdim, ""), tid, "");
        step = LLVMBuildNUWMul(g->b, bdim, gdim, "");
    } else {
        if (!g->range_begin) {
            gen_error(g, "a parallel loop outside a vectorized kernel%s", NULL);
            return;
        }
        begin = g->range_begin;
        end = g->range_end;
        step = const_i64(g, 1);
    }
    LLVMValueRef counter = alloca_in_entry(g, g->t_i64, "parfor.i");
    LLVMBuildStore(g->b, begin, counter);
    LLVMBasicBlockRef cond_bb = new_block(g, "parfor.cond"), body_bb = new_block(g, "parfor.body"),
                      inc_bb = new_block(g, "parfor.inc"), exit_bb = new_block(g, "parfor.exit");
    LLVMBuildBr(g->b, cond_bb);
    LLVMPositionBuilderAtEnd(g->b, cond_bb);
    LLVMValueRef i = LLVMBuildLoad2(g->b, g->t_i64, counter, "i");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, i, end, ""), body_bb, exit_bb);
    LLVMPositionBuilderAtEnd(g->b, body_bb);
    LLVMBuildStore(g->b, i, g->slots[s->var->id].scalar);
    push_loop(g, exit_bb, inc_bb);
    gen_stmt(g, s->body);
    g->loop_depth--;
    branch_to(g, inc_bb);
    LLVMPositionBuilderAtEnd(g->b, inc_bb);
    LLVMValueRef cur = LLVMBuildLoad2(g->b, g->t_i64, counter, "");
    LLVMBuildStore(g->b, LLVMBuildNSWAdd(g->b, cur, step, ""), counter);
    LLVMBuildBr(g->b, cond_bb);
    LLVMPositionBuilderAtEnd(g->b, exit_bb);
}

static void gen_stmt(Gen *g, KjIrStmt *s)
{
    if (!block_open(g))
        start_dead_block(g);
    switch (s->kind) {
    case KJ_IR_STMT_BLOCK:
        for (int i = 0; i < s->stmts.count; i++)
            gen_stmt(g, s->stmts.items[i]);
        return;
    case KJ_IR_STMT_EVAL:
        gen_expr(g, s->value);
        return;
    case KJ_IR_STMT_SET:
        store_var(g, s->var, s->value);
        return;
    case KJ_IR_STMT_STORE: {
        ArrayVal a;
        gen_array(g, s->array, &a);
        LLVMValueRef idx[KJ_MAX_DIMS];
        for (int k = 0; k < s->index_count && k < KJ_MAX_DIMS; k++)
            idx[k] = convert(g, gen_expr(g, s->indices[k]), s->indices[k]->type, kj_type_scalar(KJ_TYPE_I64));
        LLVMValueRef v = convert(g, gen_expr(g, s->value), s->value->type, a.elem);
        LLVMValueRef p = element_address(g, &a, idx, s->index_count, s->contiguous);
        LLVMBuildStore(g->b, to_mem(g, a.elem, v), p);
        return;
    }
    case KJ_IR_STMT_IF: {
        LLVMValueRef c = gen_expr(g, s->cond);
        LLVMBasicBlockRef then_bb = new_block(g, "if.then"), done = new_block(g, "if.done");
        LLVMBasicBlockRef else_bb = s->else_stmt ? new_block(g, "if.else") : done;
        LLVMBuildCondBr(g->b, c, then_bb, else_bb);
        LLVMPositionBuilderAtEnd(g->b, then_bb);
        gen_stmt(g, s->then_stmt);
        branch_to(g, done);
        if (s->else_stmt) {
            LLVMPositionBuilderAtEnd(g->b, else_bb);
            gen_stmt(g, s->else_stmt);
            branch_to(g, done);
        }
        LLVMPositionBuilderAtEnd(g->b, done);
        return;
    }
    case KJ_IR_STMT_FOR:
        gen_for(g, s);
        return;
    case KJ_IR_STMT_WHILE: {
        LLVMBasicBlockRef cond_bb = new_block(g, "while.cond"), body_bb = new_block(g, "while.body"),
                          exit_bb = new_block(g, "while.exit");
        LLVMBuildBr(g->b, cond_bb);
        LLVMPositionBuilderAtEnd(g->b, cond_bb);
        LLVMBuildCondBr(g->b, gen_expr(g, s->cond), body_bb, exit_bb);
        LLVMPositionBuilderAtEnd(g->b, body_bb);
        push_loop(g, exit_bb, cond_bb);
        gen_stmt(g, s->body);
        g->loop_depth--;
        branch_to(g, cond_bb);
        LLVMPositionBuilderAtEnd(g->b, exit_bb);
        return;
    }
    case KJ_IR_STMT_BREAK:
    case KJ_IR_STMT_CONTINUE:
        if (g->loop_depth == 0) {
            gen_error(g, "break or continue outside a loop%s", NULL);
            return;
        }
        LLVMBuildBr(g->b, s->kind == KJ_IR_STMT_BREAK ? g->loops[g->loop_depth - 1].break_bb
                                                      : g->loops[g->loop_depth - 1].continue_bb);
        return;
    case KJ_IR_STMT_RETURN:
        if (s->value && g->fn->ret->kind != KJ_TYPE_VOID)
            LLVMBuildRet(g->b, convert(g, gen_expr(g, s->value), s->value->type, g->fn->ret));
        else
            LLVMBuildRetVoid(g->b);
        return;
    case KJ_IR_STMT_PARFOR:
        gen_parfor(g, s);
        return;
    default:
        kj_unreachable();
    }
}

/* ============================================================ functions */

static bool is_cpu_kernel(Gen *g, const KjIrFunction *fn)
{
    return g->target == KJ_CODEGEN_CPU && fn->kind == KJ_IR_FN_KERNEL;
}

/* The impl's parameters: each IR parameter (an array as data, shape[ndim],
 * strides[ndim]); cpu kernels add ctx and threadIdx.x/y/z; cpu vectorized
 * kernels add the [begin, end) range. */
/* How many LLVM arguments the impl of fn takes (an upper bound is enough). */
static int impl_arg_capacity(const KjIrFunction *fn)
{
    int n = 8;
    for (int i = 0; i < fn->param_count; i++)
        n += is_array(fn->params[i]->type) ? 1 + 2 * fn->params[i]->type->ndim : 1;
    return n;
}

static LLVMTypeRef impl_type(Gen *g, const KjIrFunction *fn)
{
    LLVMTypeRef *ps = kj_xmalloc(sizeof *ps * (size_t)impl_arg_capacity(fn));
    int n = 0;
    for (int i = 0; i < fn->param_count; i++) {
        const KjType *t = fn->params[i]->type;
        if (is_array(t)) {
            ps[n++] = g->t_ptr;
            for (int k = 0; k < 2 * t->ndim; k++)
                ps[n++] = g->t_i64;
        } else {
            ps[n++] = llty(g, t);
        }
    }
    if (is_cpu_kernel(g, fn)) {
        ps[n++] = g->t_ptr;
        ps[n++] = g->t_i32;
        ps[n++] = g->t_i32;
        ps[n++] = g->t_i32;
    }
    if (g->target == KJ_CODEGEN_CPU && fn->kind == KJ_IR_FN_VEC_KERNEL) {
        ps[n++] = g->t_i64;
        ps[n++] = g->t_i64;
    }
    LLVMTypeRef ret = fn->kind == KJ_IR_FN_KERNEL || fn->kind == KJ_IR_FN_VEC_KERNEL ? g->t_void : llty(g, fn->ret);
    LLVMTypeRef type = LLVMFunctionType(ret, ps, (unsigned)n, 0);
    free(ps);
    return type;
}

static void declare_impl(Gen *g, KjIrFunction *fn)
{
    FnInfo *info = &g->fns[g->fn_count++];
    info->ir = fn;
    info->impl_type = impl_type(g, fn);
    char name[512];
    snprintf(name, sizeof name, "%s__impl", fn->symbol);
    info->impl = LLVMAddFunction(g->mod, name, info->impl_type);
    LLVMSetLinkage(info->impl, LLVMInternalLinkage);
    set_common_attrs(g, info->impl);
    /* Scalar bodies of vectorized functions and kernel bodies are inlined into
     * their loops and entry points; that is what lets the loop vectoriser see
     * the whole element computation.  Plain functions are left to the inliner. */
    if (fn->kind != KJ_IR_FN_PLAIN)
        add_fn_attr(g, info->impl, "alwaysinline");
    if (is_cpu_kernel(g, fn)) {
        unsigned ctx_index = LLVMCountParamTypes(info->impl_type) - 4;
        add_param_attr(g, info->impl, ctx_index, "noalias", 0);
    }
}

static void define_impl(Gen *g, FnInfo *info)
{
    KjIrFunction *fn = info->ir;
    g->fn = fn;
    g->llfn = info->impl;
    g->loop_depth = 0;
    g->thread_ctx = g->shared_base = g->range_begin = g->range_end = NULL;
    g->shared_offset = 0;
    memset(g->sreg, 0, sizeof g->sreg);

    int max_id = -1;
    for (int i = 0; i < fn->locals.count; i++) {
        KjIrVar *v = fn->locals.items[i];
        if (v->id > max_id)
            max_id = v->id;
    }
    for (int i = 0; i < fn->param_count; i++)
        if (fn->params[i]->id > max_id)
            max_id = fn->params[i]->id;
    g->slot_count = max_id + 1;
    g->slots = kj_xcalloc((size_t)g->slot_count + 1, sizeof(VarSlot));

    g->entry_bb = new_block(g, "entry");
    LLVMBasicBlockRef start = new_block(g, "start");
    LLVMPositionBuilderAtEnd(g->b, g->entry_bb);
    LLVMBuildBr(g->b, start);
    LLVMPositionBuilderBefore(g->b, LLVMGetBasicBlockTerminator(g->entry_bb));

    /* Slots for every variable; scalars start at zero so that no read sees undef. */
    for (int i = 0; i < fn->locals.count; i++) {
        KjIrVar *v = fn->locals.items[i];
        VarSlot *s = &g->slots[v->id];
        if (is_array(v->type)) {
            s->array.data = LLVMBuildAlloca(g->b, g->t_ptr, v->name);
            LLVMBuildStore(g->b, LLVMConstNull(g->t_ptr), s->array.data);
            for (int k = 0; k < v->type->ndim; k++) {
                s->array.shape[k] = LLVMBuildAlloca(g->b, g->t_i64, "shape");
                s->array.strides[k] = LLVMBuildAlloca(g->b, g->t_i64, "stride");
                LLVMBuildStore(g->b, const_i64(g, 0), s->array.shape[k]);
                LLVMBuildStore(g->b, const_i64(g, 0), s->array.strides[k]);
            }
        } else if (v->type->kind != KJ_TYPE_VOID) {
            s->scalar = LLVMBuildAlloca(g->b, llty(g, v->type), v->name);
            LLVMBuildStore(g->b, zero_of(g, v->type), s->scalar);
        }
    }
    unsigned p = 0;
    for (int i = 0; i < fn->param_count; i++) {
        KjIrVar *v = fn->params[i];
        VarSlot *s = &g->slots[v->id];
        if (is_array(v->type)) {
            if (!s->array.data) {
                s->array.data = LLVMBuildAlloca(g->b, g->t_ptr, v->name);
                for (int k = 0; k < v->type->ndim; k++) {
                    s->array.shape[k] = LLVMBuildAlloca(g->b, g->t_i64, "shape");
                    s->array.strides[k] = LLVMBuildAlloca(g->b, g->t_i64, "stride");
                }
            }
            LLVMBuildStore(g->b, LLVMGetParam(g->llfn, p++), s->array.data);
            for (int k = 0; k < v->type->ndim; k++)
                LLVMBuildStore(g->b, LLVMGetParam(g->llfn, p++), s->array.shape[k]);
            for (int k = 0; k < v->type->ndim; k++)
                LLVMBuildStore(g->b, LLVMGetParam(g->llfn, p++), s->array.strides[k]);
        } else {
            if (!s->scalar)
                s->scalar = LLVMBuildAlloca(g->b, llty(g, v->type), v->name);
            LLVMBuildStore(g->b, LLVMGetParam(g->llfn, p++), s->scalar);
        }
    }
    if (is_cpu_kernel(g, fn)) {
        /* The special registers are read once: ctx is noalias, and SSA values
         * keep them out of the way of the kernel's own stores. */
        g->thread_ctx = LLVMGetParam(g->llfn, p++);
        for (int k = 0; k < 3; k++)
            g->sreg[KJ_SREG_TID_X + k] = LLVMGetParam(g->llfn, p++);
        for (int field = 1; field < 4; field++)
            for (int k = 0; k < 3; k++) {
                LLVMValueRef idx[3] = {const_i32(g, 0), const_i32(g, field), const_i32(g, k)};
                LLVMValueRef ptr = LLVMBuildInBoundsGEP2(g->b, g->t_thread_ctx, g->thread_ctx, idx, 3, "");
                g->sreg[KJ_SREG_TID_X + field * 3 + k] = LLVMBuildLoad2(g->b, g->t_i32, ptr, "");
            }
        LLVMValueRef sp = LLVMBuildStructGEP2(g->b, g->t_thread_ctx, g->thread_ctx, 4, "");
        g->shared_base = LLVMBuildLoad2(g->b, g->t_ptr, sp, "shared");
    }
    if (g->target == KJ_CODEGEN_CPU && fn->kind == KJ_IR_FN_VEC_KERNEL) {
        g->range_begin = LLVMGetParam(g->llfn, p++);
        g->range_end = LLVMGetParam(g->llfn, p++);
    }

    LLVMPositionBuilderAtEnd(g->b, start);
    gen_stmt(g, fn->body);
    if (block_open(g)) {
        LLVMTypeRef rt = LLVMGetReturnType(info->impl_type);
        if (rt == g->t_void)
            LLVMBuildRetVoid(g->b);
        else /* the checker proves every path returns; this block is dead */
            LLVMBuildRet(g->b, LLVMConstNull(rt));
    }
    /* The checker sums the sizes of the shared() arrays; the 16-byte aligned
     * layout above may need a little more, and the runtime allocates what
     * shared_bytes says. */
    if (is_cpu_kernel(g, fn) && g->shared_offset > fn->shared_bytes)
        fn->shared_bytes = g->shared_offset;
    free(g->slots);
    g->slots = NULL;
}

/* ============================================================ entry points */

/* Unpacks `void **args` (cpu entries) into impl arguments. */
static int unpack_args(Gen *g, const KjIrFunction *fn, LLVMValueRef args_ptr, LLVMValueRef *out)
{
    int n = 0;
    for (int i = 0; i < fn->param_count; i++) {
        const KjType *t = fn->params[i]->type;
        LLVMValueRef idx = const_i64(g, i);
        LLVMValueRef slot = LLVMBuildInBoundsGEP2(g->b, g->t_ptr, args_ptr, &idx, 1, "");
        LLVMValueRef p = LLVMBuildLoad2(g->b, g->t_ptr, slot, fn->params[i]->name);
        if (is_array(t)) {
            ArrayVal a;
            array_from_desc(g, p, t, &a);
            out[n++] = a.data;
            for (int k = 0; k < t->ndim; k++)
                out[n++] = a.shape[k];
            for (int k = 0; k < t->ndim; k++)
                out[n++] = a.strides[k];
        } else {
            out[n++] = from_mem(g, t, LLVMBuildLoad2(g->b, memty(g, t), p, ""));
        }
    }
    return n;
}

static LLVMValueRef add_entry(Gen *g, const char *symbol, const char *suffix, LLVMTypeRef type)
{
    char name[512];
    snprintf(name, sizeof name, "%s%s", symbol, suffix);
    LLVMValueRef fn = LLVMAddFunction(g->mod, name, type);
    set_common_attrs(g, fn);
    g->llfn = fn;
    LLVMPositionBuilderAtEnd(g->b, new_block(g, "entry"));
    return fn;
}

static void emit_cpu_entries_into(Gen *g, FnInfo *info, LLVMValueRef *args);

static void emit_cpu_entries(Gen *g, FnInfo *info)
{
    KjIrFunction *fn = info->ir;
    LLVMValueRef *args = kj_xmalloc(sizeof *args * (size_t)impl_arg_capacity(fn));
    emit_cpu_entries_into(g, info, args);
    free(args);
}

static void emit_cpu_entries_into(Gen *g, FnInfo *info, LLVMValueRef *args)
{
    KjIrFunction *fn = info->ir;
    LLVMTypeRef two_ptrs[2] = {g->t_ptr, g->t_ptr};
    switch (fn->kind) {
    case KJ_IR_FN_PLAIN:
    case KJ_IR_FN_SCALAR: {
        LLVMValueRef e = add_entry(g, fn->symbol, "__entry", LLVMFunctionType(g->t_void, two_ptrs, 2, 0));
        int n = unpack_args(g, fn, LLVMGetParam(e, 0), args);
        LLVMValueRef r = LLVMBuildCall2(g->b, info->impl_type, info->impl, args, (unsigned)n, "");
        if (fn->ret->kind != KJ_TYPE_VOID)
            LLVMBuildStore(g->b, to_mem(g, fn->ret, r), LLVMGetParam(e, 1));
        LLVMBuildRetVoid(g->b);
        return;
    }
    case KJ_IR_FN_KERNEL: {
        LLVMTypeRef ft = LLVMFunctionType(g->t_void, two_ptrs, 2, 0);
        LLVMValueRef e = add_entry(g, fn->symbol, "__thread", ft);
        LLVMValueRef ctx = LLVMGetParam(e, 1);
        int n = unpack_args(g, fn, LLVMGetParam(e, 0), args);
        args[n++] = ctx;
        for (int k = 0; k < 3; k++) {
            LLVMValueRef idx[3] = {const_i32(g, 0), const_i32(g, 0), const_i32(g, k)};
            args[n++] = LLVMBuildLoad2(g->b, g->t_i32, LLVMBuildInBoundsGEP2(g->b, g->t_thread_ctx, ctx, idx, 3, ""), "tid");
        }
        LLVMBuildCall2(g->b, info->impl_type, info->impl, args, (unsigned)n, "");
        LLVMBuildRetVoid(g->b);
        if (fn->uses_syncthreads)
            return;

        /* __block: every thread of the block in turn, z outermost.  The thread
         * indices go to the impl as values; ctx->thread_idx is not written. */
        e = add_entry(g, fn->symbol, "__block", ft);
        ctx = LLVMGetParam(e, 1);
        n = unpack_args(g, fn, LLVMGetParam(e, 0), args);
        args[n] = ctx;
        LLVMValueRef dims[3];
        for (int k = 0; k < 3; k++) {
            LLVMValueRef idx[3] = {const_i32(g, 0), const_i32(g, 2), const_i32(g, k)};
            dims[k] = LLVMBuildLoad2(g->b, g->t_i32, LLVMBuildInBoundsGEP2(g->b, g->t_thread_ctx, ctx, idx, 3, ""), "bdim");
        }
        /* Counters live in allocas (mem2reg makes them SSA): z outermost. */
        LLVMValueRef counters[3];
        for (int k = 0; k < 3; k++) {
            counters[k] = LLVMBuildAlloca(g->b, g->t_i32, "t");
        }
        LLVMBasicBlockRef conds[3], bodies[3], incs[3], exits[3];
        for (int level = 2; level >= 0; level--) {
            conds[level] = new_block(g, "thread.cond");
            bodies[level] = new_block(g, "thread.body");
            incs[level] = new_block(g, "thread.inc");
            exits[level] = new_block(g, "thread.exit");
            LLVMBuildStore(g->b, const_i32(g, 0), counters[level]);
            LLVMBuildBr(g->b, conds[level]);
            LLVMPositionBuilderAtEnd(g->b, conds[level]);
            LLVMValueRef t = LLVMBuildLoad2(g->b, g->t_i32, counters[level], "");
            LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, t, dims[level], ""), bodies[level], exits[level]);
            LLVMPositionBuilderAtEnd(g->b, bodies[level]);
        }
        for (int k = 0; k < 3; k++)
            args[n + 1 + k] = LLVMBuildLoad2(g->b, g->t_i32, counters[k], "");
        LLVMBuildCall2(g->b, info->impl_type, info->impl, args, (unsigned)n + 4, "");
        for (int level = 0; level < 3; level++) {
            LLVMBuildBr(g->b, incs[level]);
            LLVMPositionBuilderAtEnd(g->b, incs[level]);
            LLVMValueRef t = LLVMBuildLoad2(g->b, g->t_i32, counters[level], "");
            LLVMBuildStore(g->b, LLVMBuildNSWAdd(g->b, t, const_i32(g, 1), ""), counters[level]);
            LLVMBuildBr(g->b, conds[level]);
            LLVMPositionBuilderAtEnd(g->b, exits[level]);
        }
        LLVMBuildRetVoid(g->b);
        return;
    }
    case KJ_IR_FN_VEC_KERNEL: {
        LLVMTypeRef ps[3] = {g->t_ptr, g->t_i64, g->t_i64};
        LLVMValueRef e = add_entry(g, fn->symbol, "__range", LLVMFunctionType(g->t_void, ps, 3, 0));
        int n = unpack_args(g, fn, LLVMGetParam(e, 0), args);
        args[n++] = LLVMGetParam(e, 1);
        args[n++] = LLVMGetParam(e, 2);
        LLVMBuildCall2(g->b, info->impl_type, info->impl, args, (unsigned)n, "");
        LLVMBuildRetVoid(g->b);
        return;
    }
    }
}

/* The cuda .entry: parameters in IR order, arrays (and complex scalars) by
 * value as byval pointers, bools as one byte. */
static void emit_cuda_kernel(Gen *g, FnInfo *info)
{
    KjIrFunction *fn = info->ir;
    if (fn->kind != KJ_IR_FN_KERNEL && fn->kind != KJ_IR_FN_VEC_KERNEL)
        return;
    LLVMTypeRef *ps = kj_xmalloc(sizeof *ps * (size_t)(fn->param_count + 1));
    LLVMValueRef *args = kj_xmalloc(sizeof *args * (size_t)impl_arg_capacity(fn));
    for (int i = 0; i < fn->param_count; i++) {
        const KjType *t = fn->params[i]->type;
        ps[i] = is_array(t) || kj_type_is_complex(t) ? g->t_ptr : memty(g, t);
    }
    LLVMValueRef e = add_entry(g, fn->symbol, "", LLVMFunctionType(g->t_void, ps, (unsigned)fn->param_count, 0));
    LLVMSetFunctionCallConv(e, LLVMPTXKernelCallConv);
    free(ps);
    int n = 0;
    for (int i = 0; i < fn->param_count; i++) {
        const KjType *t = fn->params[i]->type;
        LLVMValueRef p = LLVMGetParam(e, (unsigned)i);
        if (is_array(t) || kj_type_is_complex(t)) {
            LLVMTypeRef vt = is_array(t) ? g->t_desc : llty(g, t);
            unsigned kind = LLVMGetEnumAttributeKindForName("byval", 5);
            LLVMAddAttributeAtIndex(e, (unsigned)i + 1, LLVMCreateTypeAttribute(g->ctx, kind, vt));
            add_param_attr(g, e, (unsigned)i, "align", is_array(t) ? 8 : (uint64_t)kj_type_size(kj_type_complex_part(t)));
        }
        if (is_array(t)) {
            ArrayVal a;
            array_from_desc(g, p, t, &a);
            args[n++] = a.data;
            for (int k = 0; k < t->ndim; k++)
                args[n++] = a.shape[k];
            for (int k = 0; k < t->ndim; k++)
                args[n++] = a.strides[k];
        } else if (kj_type_is_complex(t)) {
            args[n++] = LLVMBuildLoad2(g->b, llty(g, t), p, "");
        } else {
            args[n++] = from_mem(g, t, p);
        }
    }
    LLVMBuildCall2(g->b, info->impl_type, info->impl, args, (unsigned)n, "");
    LLVMBuildRetVoid(g->b);
    free(args);

    LLVMMetadataRef md[3] = {LLVMValueAsMetadata(e), LLVMMDStringInContext2(g->ctx, "kernel", 6),
                             LLVMValueAsMetadata(const_i32(g, 1))};
    LLVMAddNamedMetadataOperand(g->mod, "nvvm.annotations",
                                LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, md, 3)));
}

/* ============================================================ reachability */

static void mark_expr(KjIrFunction **seen, int *count, int cap, KjIrExpr *e);
static void mark_fn(KjIrFunction **seen, int *count, int cap, KjIrFunction *fn);

static void mark_stmt(KjIrFunction **seen, int *count, int cap, KjIrStmt *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->stmts.count; i++)
        mark_stmt(seen, count, cap, s->stmts.items[i]);
    KjIrExpr *es[] = {s->value, s->array, s->cond, s->start, s->stop, s->step};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++)
        mark_expr(seen, count, cap, es[i]);
    for (int i = 0; i < s->index_count; i++)
        mark_expr(seen, count, cap, s->indices[i]);
    mark_stmt(seen, count, cap, s->then_stmt);
    mark_stmt(seen, count, cap, s->else_stmt);
    mark_stmt(seen, count, cap, s->body);
}

static void mark_expr(KjIrFunction **seen, int *count, int cap, KjIrExpr *e)
{
    if (!e)
        return;
    for (int i = 0; i < e->arg_count; i++)
        mark_expr(seen, count, cap, e->args[i]);
    if (e->op == KJ_IR_CALL && e->callee)
        mark_fn(seen, count, cap, e->callee);
}

static void mark_fn(KjIrFunction **seen, int *count, int cap, KjIrFunction *fn)
{
    for (int i = 0; i < *count; i++)
        if (seen[i] == fn)
            return;
    if (*count >= cap)
        kj_die("too many functions");
    seen[(*count)++] = fn;
    mark_stmt(seen, count, cap, fn->body);
}

/* ============================================================ the module */

static void init_types(Gen *g)
{
    LLVMContextRef c = g->ctx;
    g->t_void = LLVMVoidTypeInContext(c);
    g->t_i1 = LLVMInt1TypeInContext(c);
    g->t_i8 = LLVMInt8TypeInContext(c);
    g->t_i16 = LLVMInt16TypeInContext(c);
    g->t_i32 = LLVMInt32TypeInContext(c);
    g->t_i64 = LLVMInt64TypeInContext(c);
    g->t_f32 = LLVMFloatTypeInContext(c);
    g->t_f64 = LLVMDoubleTypeInContext(c);
    g->t_ptr = LLVMPointerTypeInContext(c, 0);
    g->t_c64 = LLVMStructTypeInContext(c, (LLVMTypeRef[]){g->t_f32, g->t_f32}, 2, 0);
    g->t_c128 = LLVMStructTypeInContext(c, (LLVMTypeRef[]){g->t_f64, g->t_f64}, 2, 0);
    LLVMTypeRef dims = LLVMArrayType2(g->t_i64, KJ_MAX_DIMS);
    g->t_desc = LLVMStructCreateNamed(c, "KjArrayDesc");
    LLVMStructSetBody(g->t_desc, (LLVMTypeRef[]){g->t_ptr, dims, dims}, 3, 0);
    LLVMTypeRef three = LLVMArrayType2(g->t_i32, 3);
    g->t_thread_ctx = LLVMStructCreateNamed(c, "KjThreadCtx");
    LLVMStructSetBody(g->t_thread_ctx, (LLVMTypeRef[]){three, three, three, three, g->t_ptr, g->t_ptr}, 6, 0);
}

LLVMModuleRef kj_codegen_module(LLVMContextRef context, LLVMTargetMachineRef machine, KjIrModule *module,
                                KjIrFunction **roots, int root_count, const KjCodegenOptions *options,
                                char **error)
{
    Gen gen = {0}, *g = &gen;
    g->ctx = context;
    g->options = options;
    g->target = options->target;
    g->mod = LLVMModuleCreateWithNameInContext("kjit", context);
    g->b = LLVMCreateBuilderInContext(context);
    init_types(g);

    char *triple = LLVMGetTargetMachineTriple(machine);
    LLVMSetTarget(g->mod, triple);
    LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(machine);
    LLVMSetModuleDataLayout(g->mod, layout);
    LLVMDisposeTargetData(layout);
    char *cpu = LLVMGetTargetMachineCPU(machine);
    char *features = LLVMGetTargetMachineFeatureString(machine);
    g->cpu_name = cpu;
    g->cpu_features = features;
    /* Vector variants only when libmvec is in the process (cpu_jit.c loads it):
     * a host without it gets scalar libm calls rather than unresolved symbols. */
    if (g->target == KJ_CODEGEN_CPU && strncmp(triple, "x86_64", 6) == 0 &&
        dlsym(RTLD_DEFAULT, "_ZGVbN2v_sin") != NULL) {
        g->vec_sse = true;
        g->vec_avx2 = strstr(features, "+avx2") != NULL;
        g->vec_avx512 = strstr(features, "+avx512f") != NULL;
    }

    int cap = module->functions.count + root_count + 1;
    KjIrFunction **reach = kj_xcalloc((size_t)cap, sizeof *reach);
    int reach_count = 0;
    for (int i = 0; i < root_count; i++)
        mark_fn(reach, &reach_count, cap, roots[i]);
    g->fns = kj_xcalloc((size_t)reach_count + 1, sizeof(FnInfo));
    for (int i = 0; i < reach_count; i++)
        declare_impl(g, reach[i]);
    for (int i = 0; i < g->fn_count && !g->error; i++)
        define_impl(g, &g->fns[i]);
    for (int i = 0; i < root_count && !g->error; i++) {
        FnInfo *info = fn_info(g, roots[i]);
        if (g->target == KJ_CODEGEN_CPU)
            emit_cpu_entries(g, info);
        else
            emit_cuda_kernel(g, info);
    }

    if (g->used_count > 0) {
        LLVMTypeRef at = LLVMArrayType2(g->t_ptr, (uint64_t)g->used_count);
        LLVMValueRef used = LLVMAddGlobal(g->mod, at, "llvm.compiler.used");
        LLVMSetLinkage(used, LLVMAppendingLinkage);
        LLVMSetSection(used, "llvm.metadata");
        LLVMSetInitializer(used, LLVMConstArray2(g->t_ptr, g->used, (uint64_t)g->used_count));
    }
    free(g->used);

    if (!g->error && options->verify) {
        char *message = NULL;
        if (LLVMVerifyModule(g->mod, LLVMReturnStatusAction, &message)) {
            gen_error(g, "LLVM verifier: %s", message);
        }
        LLVMDisposeMessage(message);
    }

    LLVMDisposeBuilder(g->b);
    LLVMDisposeMessage(triple);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(features);
    free(reach);
    free(g->fns);
    if (g->error) {
        LLVMDisposeModule(g->mod);
        if (error)
            *error = g->error;
        else
            free(g->error);
        return NULL;
    }
    return g->mod;
}

bool kj_codegen_optimize(LLVMModuleRef mod, LLVMTargetMachineRef machine, int opt_level, char **error)
{
    char pipeline[32];
    snprintf(pipeline, sizeof pipeline, "default<O%d>", opt_level < 0 ? 0 : opt_level > 3 ? 3 : opt_level);
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(opts, opt_level >= 2);
    LLVMPassBuilderOptionsSetSLPVectorization(opts, opt_level >= 2);
    LLVMPassBuilderOptionsSetLoopUnrolling(opts, opt_level >= 2);
    LLVMPassBuilderOptionsSetLoopInterleaving(opts, opt_level >= 2);
    LLVMErrorRef err = LLVMRunPasses(mod, pipeline, machine, opts);
    LLVMDisposePassBuilderOptions(opts);
    if (err) {
        char *msg = LLVMGetErrorMessage(err);
        if (error)
            *error = kj_xstrdup(msg);
        LLVMDisposeErrorMessage(msg);
        return false;
    }
    return true;
}
