/*
 * codegen_gen.c: the bottom of the LLVM lowering: what every lowering file
 * (codegen_llvm.c, codegen_expr.c, codegen_check.c, codegen_complex.c, the
 * SIMD lowering) and the targets' entry points (target_cpu.c,
 * target_cuda.c) build on, and that calls none of them: the first error of
 * a compilation, function and parameter attributes, allocas in the entry
 * block, the parameter layout (how an IR function's parameters travel as
 * LLVM arguments), the impl of an IR function, line tables, and the pieces
 * of entry points.  The Gen state itself, LLVM types and constants are in
 * codegen_llvm.h.
 */
#define KJ_CODEGEN_LOWERING
#include "codegen_llvm.h"

#include <llvm-c/DebugInfo.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ============================================================ errors */

void kj_codegen_error(Gen *g, const char *fmt, const char *arg)
{
    if (g->error)
        return;
    size_t n = strlen(fmt) + (arg ? strlen(arg) : 0) + 1;
    g->error = kj_xmalloc(n);
    snprintf(g->error, n, fmt, arg ? arg : "");
}

void kj_codegen_check_shared(Gen *g, const KjIrFunction *fn)
{
    if (g->shared_offset > fn->shared_bytes)
        kj_codegen_error(g, "internal error: the shared() arrays of %s take more memory than "
                         "the checker recorded (kj_shared_slice_bytes)", fn->name);
}

/* ============================================================ attributes */

void kj_codegen_add_fn_attr(Gen *g, LLVMValueRef fn, const char *name)
{
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, kind, 0));
}

void kj_codegen_add_param_attr(Gen *g, LLVMValueRef fn, unsigned param, const char *name, uint64_t value)
{
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(fn, param + 1, LLVMCreateEnumAttribute(g->ctx, kind, value));
}

void kj_codegen_add_string_attr(Gen *g, LLVMValueRef fn, const char *key, const char *value)
{
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(g->ctx, key, strlen(key), value, strlen(value)));
}

/* Every function we define: no exceptions, tuned for the target machine. */
void kj_codegen_set_common_attrs(Gen *g, LLVMValueRef fn)
{
    kj_codegen_add_fn_attr(g, fn, "nounwind");
    if (g->cpu_name && *g->cpu_name)
        kj_codegen_add_string_attr(g, fn, "target-cpu", g->cpu_name);
    if (g->cpu_features && *g->cpu_features)
        kj_codegen_add_string_attr(g, fn, "target-features", g->cpu_features);
    g->target->function_attrs(g, fn);
}

/* ============================================================ allocas */

void kj_codegen_loop_no_unroll(Gen *g, LLVMValueRef back_edge)
{
    /* a loop ID names itself: a temporary first operand, then replaced */
    LLVMMetadataRef no_unroll =
        LLVMMDStringInContext2(g->ctx, "llvm.loop.unroll.disable", strlen("llvm.loop.unroll.disable"));
    LLVMMetadataRef ops[2] = {LLVMTemporaryMDNode(g->ctx, NULL, 0), LLVMMDNodeInContext2(g->ctx, &no_unroll, 1)};
    LLVMMetadataRef loop = LLVMMDNodeInContext2(g->ctx, ops, 2);
    LLVMMetadataReplaceAllUsesWith(ops[0], loop);
    LLVMSetMetadata(back_edge, LLVMGetMDKindIDInContext(g->ctx, "llvm.loop", strlen("llvm.loop")),
                    LLVMMetadataAsValue(g->ctx, loop));
}

LLVMValueRef kj_codegen_alloca_in_entry(Gen *g, LLVMTypeRef t, const char *name)
{
    LLVMBuilderRef ab = LLVMCreateBuilderInContext(g->ctx);
    LLVMPositionBuilderBefore(ab, LLVMGetBasicBlockTerminator(g->entry_bb));
    LLVMValueRef slot = LLVMBuildAlloca(ab, t, name);
    LLVMDisposeBuilder(ab);
    return slot;
}

/* ============================================================ functions */

/* ============================================================ the parameter layout */

/* How an IR function's parameters travel as LLVM arguments, the same in its
 * impl, its SIMD functions, every call and every entry point: in order, an
 * array as its data pointer, shape[ndim] and strides[ndim] (i64), a scalar
 * as one value; the target's hidden parameters and checked mode's follow.
 * The four functions below are the only ones that know it. */

/* A function of several outputs returns them in one struct, in order:
 * each element's type from each (vector_of: the SIMD lowering's type of
 * each, when given). */
LLVMTypeRef kj_codegen_outputs_type(Gen *g, const KjIrFunction *fn,
                                    LLVMTypeRef (*vector_of)(void *, const KjType *), void *user)
{
    LLVMTypeRef fields[KJ_MAX_VEC_OUTPUTS];
    int count = fn->output_count < KJ_MAX_VEC_OUTPUTS ? fn->output_count : KJ_MAX_VEC_OUTPUTS;
    for (int k = 0; k < count; k++) {
        const KjType *t = k == 0 ? fn->ret : fn->outputs[k]->type;
        fields[k] = vector_of ? vector_of(user, t) : llty(g, t);
    }
    return LLVMStructTypeInContext(g->ctx, fields, (unsigned)count, 0);
}

/* How many LLVM arguments the impl of fn takes (an upper bound is enough):
 * 8 for the target's hidden parameters and checked mode's two. */
int kj_codegen_impl_arg_capacity(const KjIrFunction *fn)
{
    int n = 10;
    for (int i = 0; i < fn->param_count; i++)
        n += is_array(fn->params[i]->type) ? 1 + 2 * fn->params[i]->type->ndim : 1;
    return n;
}

int kj_codegen_param_types(Gen *g, const KjIrFunction *fn, const LLVMTypeRef *scalar_types, LLVMTypeRef *out)
{
    int n = 0;
    for (int i = 0; i < fn->param_count; i++) {
        const KjType *t = fn->params[i]->type;
        if (is_array(t)) {
            out[n++] = g->t_ptr;
            for (int k = 0; k < 2 * t->ndim; k++)
                out[n++] = g->t_i64;
        } else {
            out[n++] = scalar_types ? scalar_types[i] : llty(g, t);
        }
    }
    return n;
}

int kj_codegen_array_args(const ArrayVal *a, LLVMValueRef *out)
{
    int n = 0;
    out[n++] = a->data;
    for (int k = 0; k < a->ndim; k++)
        out[n++] = a->shape[k];
    for (int k = 0; k < a->ndim; k++)
        out[n++] = a->strides[k];
    return n;
}

unsigned kj_codegen_bind_array_param(Gen *g, unsigned p, const ArraySlots *slots, int ndim)
{
    LLVMBuildStore(g->b, LLVMGetParam(g->llfn, p++), slots->data);
    for (int k = 0; k < ndim; k++)
        LLVMBuildStore(g->b, LLVMGetParam(g->llfn, p++), slots->shape[k]);
    for (int k = 0; k < ndim; k++)
        LLVMBuildStore(g->b, LLVMGetParam(g->llfn, p++), slots->strides[k]);
    return p;
}

FnInfo *kj_codegen_fn_info(Gen *g, const KjIrFunction *fn)
{
    for (int i = 0; i < g->fn_count; i++)
        if (g->fns[i].ir == fn)
            return &g->fns[i];
    kj_die("function %s was not declared", fn->symbol);
}

/* ============================================================ line info */

/* The DIFile of a source, made on first use. */
static LLVMMetadataRef debug_file(Gen *g, const KjSource *src)
{
    for (int i = 0; i < g->di_file_count; i++)
        if (g->di_sources[i] == src)
            return g->di_files[i];
    const char *path = src && src->path ? src->path : "<source>";
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    /* an absolute folder, so a debugger finds the file from anywhere */
    char dir[4096] = ".", cwd[3072];
    bool relative = path[0] != '/' && getcwd(cwd, sizeof cwd);
    if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else if (slash && relative)
        snprintf(dir, sizeof dir, "%s/%.*s", cwd, (int)(slash - path), path);
    else if (slash)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    else if (relative)
        snprintf(dir, sizeof dir, "%s", cwd);
    LLVMMetadataRef file = LLVMDIBuilderCreateFile(g->di, name, strlen(name), dir, strlen(dir));
    if (g->di_file_count < (int)(sizeof g->di_files / sizeof g->di_files[0])) {
        g->di_sources[g->di_file_count] = src;
        g->di_files[g->di_file_count++] = file;
    }
    return file;
}

/* The compile unit, in the main file (the first root's), and the module
 * flags that make LLVM emit what it describes. */
void kj_codegen_debug_begin(Gen *g, const KjSource *main_source)
{
    if (!g->options->line_info)
        return;
    g->di = LLVMCreateDIBuilder(g->mod);
    LLVMMetadataRef file = debug_file(g, main_source);
    g->di_unit = LLVMDIBuilderCreateCompileUnit(
        g->di, LLVMDWARFSourceLanguageC, file, "kjit", 4, g->options->opt_level > 0, "", 0, 0, "",
        0, g->target->line_info_kind, 0, 0, 0, "", 0, "", 0);
    LLVMAddModuleFlag(g->mod, LLVMModuleFlagBehaviorWarning, "Debug Info Version", 18,
                      LLVMValueAsMetadata(LLVMConstInt(g->t_i32, LLVMDebugMetadataVersion(), 0)));
    LLVMAddModuleFlag(g->mod, LLVMModuleFlagBehaviorWarning, "Dwarf Version", 13,
                      LLVMValueAsMetadata(LLVMConstInt(g->t_i32, 4, 0)));
}

void kj_codegen_debug_end(Gen *g)
{
    if (!g->di)
        return;
    LLVMDIBuilderFinalize(g->di);
    LLVMDisposeDIBuilder(g->di);
    g->di = NULL;
}

void kj_codegen_debug_function(Gen *g, LLVMValueRef fn, const char *name, KjLoc loc)
{
    if (!g->di)
        return;
    LLVMMetadataRef file = debug_file(g, loc.src);
    LLVMMetadataRef type = LLVMDIBuilderCreateSubroutineType(g->di, file, NULL, 0, LLVMDIFlagZero);
    size_t len;
    const char *linkage = LLVMGetValueName2(fn, &len);
    unsigned line = loc.line > 0 ? (unsigned)loc.line : 1;
    g->di_scope = LLVMDIBuilderCreateFunction(g->di, file, name, strlen(name), linkage, len, file,
                                              line, type, LLVMGetLinkage(fn) == LLVMInternalLinkage,
                                              1, line, LLVMDIFlagZero, g->options->opt_level > 0);
    LLVMSetSubprogram(fn, g->di_scope);
    kj_codegen_debug_loc(g, loc);
}

void kj_codegen_debug_loc(Gen *g, KjLoc loc)
{
    if (!g->di || !g->di_scope)
        return;
    unsigned line = loc.line > 0 ? (unsigned)loc.line : 0, col = loc.col > 0 ? (unsigned)loc.col : 0;
    LLVMSetCurrentDebugLocation2(g->b, LLVMDIBuilderCreateDebugLocation(g->ctx, line, col, g->di_scope, NULL));
}

/* ============================================================ entry points */

/* What the targets' entry points (target_cpu.c, target_cuda.c) are built from. */

/* The contiguous array parameters of a root's code (KjCodegenOptions): only
 * kernels are specialised; the vectorize pass has layouts of its own. */
uint32_t kj_codegen_root_contiguous(Gen *g, const KjIrFunction *fn)
{
    if (fn->kind == KJ_IR_FN_VEC_KERNEL && fn->contiguous)
        return UINT32_MAX;
    return fn->kind == KJ_IR_FN_KERNEL ? g->options->contiguous_params : 0;
}

/* An array's fields read from its KjArrayDesc.  For an array the runtime
 * promises to be C-contiguous the strides are computed from the shape instead
 * (1, then running products of the extents): the impl, inlined here, then
 * indexes its last dimension with no multiply, and LLVM sees unit stride. */
void kj_codegen_array_from_desc(Gen *g, LLVMValueRef desc_ptr, LLVMTypeRef desc_type,
                                const KjType *type, bool contiguous, ArrayVal *out)
{
    out->ndim = type->ndim;
    out->elem = type->elem;
    LLVMValueRef p = LLVMBuildStructGEP2(g->b, desc_type, desc_ptr, 0, "");
    out->data = LLVMBuildLoad2(g->b, g->t_ptr, p, "data");
    for (int k = 0; k < type->ndim; k++) {
        LLVMValueRef idx[3] = {const_i32(g, 0), const_i32(g, 1), const_i32(g, k)};
        out->shape[k] = LLVMBuildLoad2(g->b, g->t_i64, LLVMBuildInBoundsGEP2(g->b, desc_type, desc_ptr, idx, 3, ""), "shape");
        if (contiguous)
            continue;
        idx[1] = const_i32(g, 2);
        out->strides[k] = LLVMBuildLoad2(g->b, g->t_i64, LLVMBuildInBoundsGEP2(g->b, desc_type, desc_ptr, idx, 3, ""), "stride");
    }
    if (contiguous && type->ndim > 0) {
        out->strides[type->ndim - 1] = const_i64(g, 1);
        for (int k = type->ndim - 2; k >= 0; k--)
            out->strides[k] = LLVMBuildNSWMul(g->b, out->strides[k + 1], out->shape[k + 1], "stride");
    }
}

/* An entry point of root fn: its variant's symbol, then suffix. */
LLVMValueRef kj_codegen_add_entry(Gen *g, const KjIrFunction *fn, const char *suffix, LLVMTypeRef type)
{
    char symbol[480], name[512];
    kj_kernel_variant_symbol(fn, kj_codegen_root_contiguous(g, fn), symbol, sizeof symbol);
    snprintf(name, sizeof name, "%s%s", symbol, suffix);
    LLVMValueRef entry = LLVMAddFunction(g->mod, name, type);
    kj_codegen_set_common_attrs(g, entry);
    g->llfn = entry;
    LLVMPositionBuilderAtEnd(g->b, new_block(g, "entry"));
    /* the entry's own code (and the impl inlined into it) at the function's line */
    kj_codegen_debug_function(g, entry, fn->name, fn->loc);
    return entry;
}

/* Whether a kernel root runs its blocks through its split form here. */
bool kj_codegen_uses_split(Gen *g, const KjIrFunction *fn)
{
    /* the general code of a runtime that compiles every launch's shape
     * leaves the split form out (KjCodegenOptions.split_shapes_only); a
     * kernel without barriers has one for the code of a block shape only
     * (kj_split_straight_line): its general code is its own, on lanes */
    return fn->split && (fn->uses_syncthreads || g->options->block_dims[0]) &&
           kj_target_splits_barriers(g->target, g->options) &&
           !(g->options->split_shapes_only && !g->options->block_dims[0]);
}

/* e reads nothing but values, extents and registers, and nothing checked
 * mode would check: a test a call of the split impl may make again. */
static bool plain_test(const KjIrExpr *e)
{
    switch (e->op) {
    case KJ_IR_CONST: case KJ_IR_VAR: case KJ_IR_SREG: case KJ_IR_DIM: case KJ_IR_NEG: case KJ_IR_NOT:
    case KJ_IR_ADD: case KJ_IR_SUB: case KJ_IR_MUL: case KJ_IR_EQ: case KJ_IR_NE: case KJ_IR_LT: case KJ_IR_LE:
    case KJ_IR_GT: case KJ_IR_GE: case KJ_IR_LOGAND: case KJ_IR_LOGOR: case KJ_IR_SELECT: case KJ_IR_CAST:
        break;
    default:
        return false;
    }
    for (int i = 0; i < e->arg_count; i++)
        if (!plain_test(e->args[i]))
            return false;
    return true;
}

/* s is ifs on plain tests whose every path ends in at most one region. */
static bool one_region_per_path(const KjIrStmt *s)
{
    if (!s)
        return true;
    switch (s->kind) {
    case KJ_IR_STMT_THREADS:
        return true;
    case KJ_IR_STMT_IF:
        return plain_test(s->cond) && one_region_per_path(s->then_stmt) && one_region_per_path(s->else_stmt);
    case KJ_IR_STMT_BLOCK:
        return s->stmts.count == 0 ||
               (s->stmts.count == 1 && one_region_per_path(s->stmts.items[0]));
    default:
        return false;
    }
}

/*
 * The code for a block shape of a kernel without barriers (the split form
 * of one region, kj_split_straight_line) and of more than one row of
 * threads runs, in __blocks, a row of threadIdx.y, .z of each block of a
 * row of the grid in turn, not each block whole: a 32 x 8 block holds 8
 * rows of 128 bytes of a 2-D array, and the blocks of a grid row walked so
 * read and write each row of the array in one stream, as the same
 * @vectorize does, where block after block makes 16 streams of 128 bytes
 * (docs/performance.md).  The split impl then takes threadIdx.x 0 for one
 * row, threadIdx.y and .z those it is given, and 1 for the whole block
 * (target_cpu.c: grid rows of a few blocks go block by block).  The
 * threads of a block run in the order they did (z, y, x); only blocks
 * interleave, which the parallel target does anyway.  In checked mode each
 * row's failure goes into a record of its own, and the one first in the
 * blocks' order claims the call's (codegen_check.c).  Not under the race
 * checker (fibers), with shared memory, or anything but tests and the
 * region outside it (each call makes them again).
 */
bool kj_codegen_rows_first(Gen *g, const KjIrFunction *split)
{
    const uint32_t *dims = g->options->block_dims;
    const KjIrFunction *kernel = split ? split->split_of : NULL;
    return kernel && dims[0] && (uint64_t)dims[1] * dims[2] > 1 && g->options->cpu_simd &&
           !g->options->race && kj_split_straight_line(kernel) && kernel->shared_bytes == 0 &&
           !kernel->uses_dynamic_shared && one_region_per_path(split->body);
}

/* The target policy behind kj_codegen_splits_barriers (target.c), here so
 * that the lowering asks it of the target it is given. */
bool kj_target_splits_barriers(const KjTarget *target, const KjCodegenOptions *options)
{
    /* checked mode too (its failures end a thread's turn in the loops,
     * codegen_check.c); race checking follows each thread on fibers */
    return target->thread_loops && options->cpu_simd && !options->race;
}
