/*
 * vectorize.c: the vectorize pass, which lifts one SCALAR function (a
 * signature of a @vectorize function) into a VEC_KERNEL over arrays.
 *
 * Needs: a checked module and one of its SCALAR functions.
 * Gives: a new VEC_KERNEL appended to the module (callees before callers
 * still holds), with parameters
 *     in_0 .. in_{n-1}   each a scalar of the signature's type (its bit set in
 *                        variant.scalar_mask) or an array of that type,
 *     out1 .. out{k-1}   for a function of k outputs (-> (f64, i32)): arrays
 *                        of outputs 1.., of the shape and layout of out,
 *     out                an array of the result type (output 0),
 * and a body that is one PARFOR over every element of `out` (with several
 * outputs, the call takes outputs 1.. into variables r1 .., stored after
 * out's element into out1 ..):
 *     CONTIG:  out[i] = scalar(in_0[i], s, ...)   arrays rank 1 and contiguous,
 *              the accesses marked `contiguous` so the back end sees unit
 *              strides and the loop vectoriser makes SIMD code of it;
 *     STRIDED: i split into coordinates (last dimension fastest) by the
 *              extents of `out`, each operand indexed with its own strides;
 *              broadcast dimensions have stride 0, set up by the runtime.
 * Every target walks the PARFOR its own way; this pass knows none of them.
 * The same (function, variant) asked twice gives the same kernel.
 */
#include "kjit_compiler.h"

#include <string.h>

typedef struct Lifter {
    KjArena *arena;
    KjIrFunction *fn;
    KjLoc loc;
} Lifter;

static const KjType *i64_type(void) { return kj_type_scalar(KJ_TYPE_I64); }

/* ir.c's builders with the lifter's arena and location. */
static KjIrExpr *var_ref(Lifter *l, KjIrVar *var) { return kj_ir_var_ref(l->arena, var, l->loc); }

static KjIrExpr *dim_of(Lifter *l, KjIrVar *array, int dim)
{
    return kj_ir_dim(l->arena, var_ref(l, array), dim, l->loc);
}

static KjIrExpr *binary(Lifter *l, KjIrOp op, KjIrExpr *a, KjIrExpr *b)
{
    return kj_ir_binary(l->arena, op, a->type, l->loc, a, b);
}

static KjIrStmt *set_var(Lifter *l, KjIrVar *var, KjIrExpr *value)
{
    return kj_ir_set(l->arena, var, value, l->loc);
}

/* A load of array `var` at the given i64 index expressions. */
static KjIrExpr *load_at(Lifter *l, KjIrVar *var, KjIrExpr **index, int count, bool contiguous)
{
    return kj_ir_load(l->arena, var_ref(l, var), index, count, contiguous, l->loc);
}

/* ------------------------------------ the skeleton of a lifted kernel */

KjIrFunction *kj_lift_kernel(KjIrModule *module, KjIrFunction *from, const char *symbol,
                             bool *is_new)
{
    *is_new = false;
    for (int i = 0; i < module->functions.count; i++) {
        KjIrFunction *existing = module->functions.items[i];
        if (existing->kind == KJ_IR_FN_VEC_KERNEL && strcmp(existing->symbol, symbol) == 0)
            return existing;
    }
    *is_new = true;
    KjIrFunction *fn = kj_arena_alloc(module->arena, sizeof *fn);
    fn->name = from->name;
    fn->symbol = symbol;
    fn->kind = KJ_IR_FN_VEC_KERNEL;
    fn->ret = kj_type_void();
    fn->loc = from->loc;
    fn->scalar = from;
    return fn;
}

void kj_lift_coords(KjIrModule *module, KjIrFunction *fn, KjIrStmt *body, KjIrVar *index,
                    KjIrVar *shape, int rank, KjIrVar **coords)
{
    KjArena *arena = module->arena;
    Lifter lifter = {arena, fn, fn->loc}, *l = &lifter;
    KjIrVar *rest = kj_ir_new_var(arena, fn, "rest", i64_type(), l->loc);
    kj_vec_push(arena, &body->stmts, set_var(l, rest, var_ref(l, index)));
    for (int k = rank - 1; k >= 0; k--) {
        KjIrVar *c = kj_ir_new_var(arena, fn, kj_arena_printf(arena, "c%d", k), i64_type(), l->loc);
        if (k == 0) {
            kj_vec_push(arena, &body->stmts, set_var(l, c, var_ref(l, rest)));
        } else {
            kj_vec_push(arena, &body->stmts, set_var(l, c, binary(l, KJ_IR_REM, var_ref(l, rest), dim_of(l, shape, k))));
            kj_vec_push(arena, &body->stmts, set_var(l, rest, binary(l, KJ_IR_DIV, var_ref(l, rest), dim_of(l, shape, k))));
        }
        coords[k] = c;
    }
}

void kj_lift_finish(KjIrModule *module, KjIrFunction *fn, KjIrVar *index, KjIrVar *shape,
                    int rank, KjIrStmt *body)
{
    KjArena *arena = module->arena;
    Lifter lifter = {arena, fn, fn->loc}, *l = &lifter;
    KjIrExpr *total = dim_of(l, shape, 0);
    for (int k = 1; k < rank; k++)
        total = binary(l, KJ_IR_MUL, total, dim_of(l, shape, k));
    KjIrStmt *loop = kj_ir_new_stmt(arena, KJ_IR_STMT_PARFOR, l->loc);
    loop->var = index;
    loop->stop = total;
    loop->body = body;

    fn->body = kj_ir_new_stmt(arena, KJ_IR_STMT_BLOCK, l->loc);
    kj_vec_push(arena, &fn->body->stmts, loop);
    kj_vec_push(arena, &module->functions, fn);
}

/* ------------------------------------------------------------ the pass */

static const char *kernel_symbol(KjArena *arena, const KjIrFunction *scalar, KjVecVariant variant)
{
    if (variant.layout == KJ_LAYOUT_CONTIG)
        return kj_arena_printf(arena, "%s__v%uc", scalar->symbol, (unsigned)variant.scalar_mask);
    return kj_arena_printf(arena, "%s__v%us%d", scalar->symbol, (unsigned)variant.scalar_mask, variant.ndim);
}

KjIrFunction *kj_vectorize(KjIrModule *module, KjIrFunction *scalar, KjVecVariant variant)
{
    if (scalar->kind != KJ_IR_FN_SCALAR && scalar->kind != KJ_IR_FN_PLAIN)
        kj_die("kj_vectorize: %s is not a scalar function", scalar->symbol);
    int rank = variant.layout == KJ_LAYOUT_CONTIG ? 1 : variant.ndim;
    if (rank < 1 || rank > KJ_MAX_DIMS)
        kj_die("kj_vectorize: rank %d out of range", rank);

    KjArena *arena = module->arena;
    bool is_new;
    KjIrFunction *fn = kj_lift_kernel(module, scalar, kernel_symbol(arena, scalar, variant),
                                      &is_new);
    if (!is_new)
        return fn;
    fn->contiguous = variant.layout == KJ_LAYOUT_CONTIG;
    Lifter lifter = {arena, fn, scalar->loc}, *l = &lifter;

    /* Parameters: the inputs in order, then outputs 1.. of a function of
     * several, then out (output 0). */
    int n_in = scalar->param_count;
    int extra = scalar->output_count > 1 ? scalar->output_count - 1 : 0;
    fn->param_count = n_in + extra + 1;
    fn->params = kj_arena_alloc(arena, sizeof *fn->params * (size_t)fn->param_count);
    for (int i = 0; i < n_in; i++) {
        const KjType *t = scalar->params[i]->type;
        bool is_scalar = i < 32 && (variant.scalar_mask >> i) & 1u;
        KjIrVar *p = kj_ir_new_var(arena, fn, scalar->params[i]->name,
                                   is_scalar ? t : kj_type_array(t, rank), scalar->params[i]->loc);
        p->is_param = true;
        fn->params[i] = p;
    }
    for (int k = 1; k <= extra; k++) {
        KjIrVar *p = kj_ir_new_var(arena, fn, kj_arena_printf(arena, "out%d", k),
                                   kj_type_array(scalar->outputs[k]->type, rank), scalar->loc);
        p->is_param = true;
        fn->params[n_in + k - 1] = p;
    }
    KjIrVar *out = kj_ir_new_var(arena, fn, "out", kj_type_array(scalar->ret, rank), scalar->loc);
    out->is_param = true;
    fn->params[n_in + extra] = out;

    KjIrVar *index = kj_ir_new_var(arena, fn, "i", i64_type(), l->loc);
    KjIrStmt *body = kj_ir_new_stmt(arena, KJ_IR_STMT_BLOCK, l->loc);

    /* Coordinates of element i: CONTIG needs none (i itself indexes every
     * array); STRIDED peels them off i, last dimension first. */
    KjIrVar *coords[KJ_MAX_DIMS] = {0};
    if (variant.layout != KJ_LAYOUT_CONTIG)
        kj_lift_coords(module, fn, body, index, out, rank, coords);
    bool contiguous = variant.layout == KJ_LAYOUT_CONTIG;

    /* out[idx] = scalar(args...) */
    KjIrExpr *call = kj_ir_call(arena, scalar, scalar->ret, n_in, l->loc);
    for (int i = 0; i < n_in; i++) {
        KjIrVar *p = fn->params[i];
        if (p->type->kind != KJ_TYPE_ARRAY) {
            call->args[i] = var_ref(l, p);
        } else if (contiguous) {
            KjIrExpr *flat = var_ref(l, index);
            call->args[i] = load_at(l, p, &flat, 1, true);
        } else {
            KjIrExpr *idx[KJ_MAX_DIMS];
            for (int k = 0; k < rank; k++)
                idx[k] = var_ref(l, coords[k]);
            call->args[i] = load_at(l, p, idx, rank, false);
        }
    }
    KjIrExpr *at[KJ_MAX_DIMS];
    for (int k = 0; k < rank; k++)
        at[k] = var_ref(l, contiguous ? index : coords[k]);
    /* outputs 1..: the call sets a variable each, stored after it */
    KjIrVar *taken[KJ_MAX_VEC_OUTPUTS] = {0};
    if (extra > 0) {
        call->call_outputs = kj_arena_alloc(arena, sizeof *call->call_outputs * (size_t)(extra + 1));
        for (int k = 1; k <= extra; k++)
            call->call_outputs[k] = taken[k] =
                kj_ir_new_var(arena, fn, kj_arena_printf(arena, "r%d", k), scalar->outputs[k]->type,
                              l->loc);
    }
    kj_vec_push(arena, &body->stmts,
                kj_ir_store(arena, var_ref(l, out), at, rank, call, contiguous, l->loc));
    for (int k = 1; k <= extra; k++) {
        KjIrExpr *at_k[KJ_MAX_DIMS];
        for (int d = 0; d < rank; d++)
            at_k[d] = var_ref(l, contiguous ? index : coords[d]);
        kj_vec_push(arena, &body->stmts,
                    kj_ir_store(arena, var_ref(l, fn->params[n_in + k - 1]), at_k, rank,
                                var_ref(l, taken[k]), contiguous, l->loc));
    }

    /* PARFOR i over every element of out */
    kj_lift_finish(module, fn, index, out, rank, body);
    return fn;
}
