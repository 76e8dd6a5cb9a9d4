/*
 * guvectorize.c: the guvectorize pass, which lifts the core function of one
 * @guvectorize signature into a VEC_KERNEL over the loop dimensions.
 *
 * Needs: a checked module, one signature of a @guvectorize (a PLAIN function
 * whose parameters match the layout, as check_guvectorize.c guarantees) and
 * the number of loop dimensions, 1 to KJ_MAX_DIMS (the runtime gives an
 * extent-1 loop dimension to a call without any).
 * Gives: a new VEC_KERNEL appended to the module (callees before callers
 * still holds) with one parameter per operand, the inputs then the outputs:
 *     operand q    an array of the core's element type and rank
 *                  loop_ndim + r (r the core rank; 1 for a "()" output,
 *                  whose core is one element), its loop dimensions first;
 *                  a broadcast loop dimension has stride 0, set up by the
 *                  runtime, as in vectorize.c's STRIDED layout
 * and a body that is one PARFOR over the loop elements, whose extents are
 * the first output's loop dimensions (an output is never broadcast):
 *     i split into coordinates c (last dimension fastest);
 *     core(op_0 at c, ..., op_{n-1} at c)
 * where an operand "at c" is VIEW(op, c...), the sub-array of its core with
 * the operand's own strides, or for a "()" input the element op[c...]
 * itself, passed by value.  Every target walks the PARFOR its own way (a
 * loop on cpu, the pool on parallel, a grid-stride loop on cuda: one
 * thread per loop element); this pass knows none of them.
 * With `contiguous` (every core C-contiguous, as the runtime has checked),
 * each VIEW is marked so: the back end computes its strides from its extents.
 * The same (function, loop_ndim, contiguous) asked twice gives the same kernel.
 */
#include "kjit_compiler.h"

#include <string.h>

typedef struct Lift {
    KjArena *arena;
    KjIrFunction *fn;
    KjLoc loc;
    KjIrStmt *body;
} Lift;

static const KjType *i64_type(void) { return kj_type_scalar(KJ_TYPE_I64); }

static KjIrExpr *ref(Lift *l, KjIrVar *var) { return kj_ir_var_ref(l->arena, var, l->loc); }

/* Operand `array` at loop coordinates c: a LOAD of the element (rank
 * loop_ndim) or a VIEW of the core beyond them. */
static KjIrExpr *at_coords(Lift *l, KjIrVar *array, KjIrVar **coords, int loop_ndim,
                           bool contiguous)
{
    bool element = array->type->ndim == loop_ndim;
    const KjType *type = element ? array->type->elem
                                 : kj_type_array(array->type->elem, array->type->ndim - loop_ndim);
    KjIrExpr *e = kj_ir_new_expr(l->arena, element ? KJ_IR_LOAD : KJ_IR_VIEW, type, l->loc,
                                 1 + loop_ndim);
    e->args[0] = ref(l, array);
    for (int k = 0; k < loop_ndim; k++)
        e->args[1 + k] = ref(l, coords[k]);
    e->contiguous = contiguous && !element;
    return e;
}

KjIrFunction *kj_guvectorize(KjIrModule *module, KjIrFunction *core,
                             const KjGufuncLayout *layout, int loop_ndim, bool contiguous)
{
    if (core->kind != KJ_IR_FN_PLAIN || !layout)
        kj_die("kj_guvectorize: %s is not a @guvectorize signature", core->symbol);
    if (loop_ndim < 1 || loop_ndim > KJ_MAX_DIMS)
        kj_die("kj_guvectorize: %d loop dimensions", loop_ndim);
    int n = core->param_count;
    if (n != layout->inputs + layout->outputs || layout->outputs < 1)
        kj_die("kj_guvectorize: %s does not match its layout", core->symbol);

    KjArena *arena = module->arena;
    const char *symbol = kj_arena_printf(arena, "%s__g%d%s", core->symbol, loop_ndim,
                                         contiguous ? "c" : "");
    bool is_new;
    KjIrFunction *fn = kj_lift_kernel(module, core, symbol, &is_new);
    if (!is_new)
        return fn;
    fn->local_bytes = core->local_bytes;
    Lift lift = {arena, fn, core->loc, NULL}, *l = &lift;

    fn->param_count = n;
    fn->params = kj_arena_alloc(arena, sizeof *fn->params * (size_t)n);
    for (int q = 0; q < n; q++) {
        const KjType *t = core->params[q]->type;
        const KjType *elem = t->kind == KJ_TYPE_ARRAY ? t->elem : t;
        int core_rank = t->kind == KJ_TYPE_ARRAY ? t->ndim : 0;
        if (loop_ndim + core_rank > KJ_MAX_DIMS)
            kj_die("kj_guvectorize: %d loop and %d core dimensions", loop_ndim, core_rank);
        KjIrVar *p = kj_ir_new_var(arena, fn, core->params[q]->name,
                                   kj_type_array(elem, loop_ndim + core_rank),
                                   core->params[q]->loc);
        p->is_param = true;
        fn->params[q] = p;
    }
    KjIrVar *first_out = fn->params[layout->inputs];

    KjIrVar *index = kj_ir_new_var(arena, fn, "i", i64_type(), l->loc);
    l->body = kj_ir_new_stmt(arena, KJ_IR_STMT_BLOCK, l->loc);

    /* Coordinates of loop element i, last dimension first. */
    KjIrVar *coords[KJ_MAX_DIMS];
    kj_lift_coords(module, fn, l->body, index, first_out, loop_ndim, coords);

    /* core(operands at c) */
    KjIrExpr *call = kj_ir_call(arena, core, kj_type_void(), n, l->loc);
    for (int q = 0; q < n; q++)
        call->args[q] = at_coords(l, fn->params[q], coords, loop_ndim, contiguous);
    KjIrStmt *eval = kj_ir_new_stmt(arena, KJ_IR_STMT_EVAL, l->loc);
    eval->value = call;
    kj_vec_push(arena, &l->body->stmts, eval);

    /* PARFOR i over the loop elements (the loop extents lead every operand) */
    kj_lift_finish(module, fn, index, first_out, loop_ndim, l->body);
    return fn;
}
