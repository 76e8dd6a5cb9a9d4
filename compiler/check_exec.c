/*
 * check_exec.c: the checker's rules for the execution-model built-ins
 * (KJ_EXEC_OPS in kjit_compiler.h): the warp level (laneid, activemask,
 * ballot, all_sync, any_sync, the four shuffles, syncwarp), the block level
 * (syncthreads_count/_and/_or, threadfence, threadfence_block), the grid
 * level (syncgrid), the warp's matrix multiply-accumulate (mma, whose two
 * results check.c takes apart), and the kernel constant `warpsize`.
 *
 * Every warp collective takes an optional first argument, the mask of the
 * lanes that take part (u32, as CUDA's *_sync forms); without one the mask is
 * the whole warp, 0xffffffff, which on every target means "every lane of the
 * warp that has not exited".  The IR always carries the mask as args[0], so
 * the back ends see one form.  A kernel that calls a barrier-like built-in
 * (kj_exec_is_barrier) is marked uses_syncthreads, which makes the cpu
 * targets run it on fibers; one that calls syncgrid() is marked
 * uses_syncgrid, which makes every target launch it cooperatively.
 */
#include "checker.h"

/* ============================================================ helpers */

static KjNode *arg_node(KjNode *n, int i) { return n->args.items[i]; }

/* Each helper below takes an argument checked (e, NULL after its error) and
 * its node, for the place its own errors point at. */

/* A lane mask: any integer that converts to u32 (a literal up to 0xffffffff,
 * a u32 or narrower unsigned value, such as ballot()'s or activemask()'s). */
static KjIrExpr *check_mask(KjChecker *c, KjNode *node, KjIrExpr *e)
{
    if (!e)
        return NULL;
    return kj_check_convert(c, e, kj_type_scalar(KJ_TYPE_U32), node->loc, "the lane mask");
}

static KjIrExpr *full_mask(KjChecker *c, KjLoc loc)
{
    return kj_check_int_const(c, kj_type_scalar(KJ_TYPE_U32), (int64_t)0xffffffffu, loc);
}

static KjIrExpr *check_predicate(KjChecker *c, KjNode *node, KjIrExpr *e, const char *name)
{
    if (e && e->type != kj_check_t_bool()) {
        kj_error(c->diag, node->loc, "the predicate of %s() must be bool, not %s%s", name,
                 kj_type_name(e->type),
                 kj_type_is_numeric(e->type) || kj_check_is_untyped(e) ? " (compare: x != 0)"
                                                                         : "");
        return NULL;
    }
    return e;
}

/* A lane index, delta or xor mask: any integer, taken as an i32 (a typed
 * integer keeps its low 32 bits, as CUDA's int parameter would). */
static KjIrExpr *check_lane(KjChecker *c, KjNode *node, KjIrExpr *e, const char *name)
{
    if (!e)
        return NULL;
    const KjType *i32 = kj_check_t_i32();
    if (kj_check_is_untyped(e))
        return kj_check_convert(c, e, i32, node->loc, "the lane");
    if (!kj_type_is_int(e->type)) {
        kj_error(c->diag, node->loc, "the lane argument of %s() must be an integer, not %s", name,
                 kj_type_name(e->type));
        return NULL;
    }
    if (e->type == i32)
        return e;
    KjIrExpr *cast = kj_check_new_expr(c, KJ_IR_CAST, i32, e->loc, 1);
    cast->args[0] = e;
    return cast;
}

/* The value a shuffle moves: a 32- or 64-bit integer or a float. */
static KjIrExpr *check_shuffled(KjChecker *c, KjNode *node, KjIrExpr *e, const char *name)
{
    if (!e)
        return NULL;
    e = kj_check_settle_default(c, e);
    if (!e)
        return NULL;
    int bits = kj_type_int_bits(e->type);
    if (!kj_type_is_float(e->type) && bits != 32 && bits != 64) {
        kj_error(c->diag, node->loc, "%s() moves 32- and 64-bit integers and floats, not %s", name,
                 kj_type_name(e->type));
        return NULL;
    }
    return e;
}

/* ============================================================ the rule */

/* The rule of every KJ_EXEC_OPS entry (check_builtin.c's table adds each);
 * the argument count and the kernel-only check are done, and each argument
 * is checked (NULL after its error: KJ_CHECK_ARGS_EXPRS). */
KjIrExpr *kj_check_exec(KjChecker *c, KjNode *n, const KjCheckBuiltin *b, KjIrExpr **args)
{
    const char *name = b->name;
    KjExecOp op = b->exec;
    int given = n->args.count;
    KjIrFunction *fn = c->cur->ir;
    if (kj_exec_is_barrier[op]) {
        fn->uses_syncthreads = true;
        kj_check_note_impure(c);
    }
    if (op == KJ_EXEC_SYNCGRID)
        fn->uses_syncgrid = true;
    if (kj_exec_form[op] == KJ_EXEC_FORM_FENCE)
        kj_check_note_impure(c);

    const KjType *type = kj_type_void();
    KjIrExpr *ir_args[3] = {NULL, NULL, NULL};
    int count = 0;
    bool ok = true;
    switch (op) {
    case KJ_EXEC_LANEID:
        type = kj_check_t_i32();
        break;
    case KJ_EXEC_ACTIVEMASK:
        type = kj_type_scalar(KJ_TYPE_U32);
        ir_args[count++] = full_mask(c, n->loc);
        break;
    case KJ_EXEC_BALLOT:
    case KJ_EXEC_ALL:
    case KJ_EXEC_ANY:
        type = op == KJ_EXEC_BALLOT ? kj_type_scalar(KJ_TYPE_U32) : kj_check_t_bool();
        ir_args[count++] = given == 2 ? check_mask(c, arg_node(n, 0), args[0]) : full_mask(c, n->loc);
        ir_args[count++] = check_predicate(c, arg_node(n, given - 1), args[given - 1], name);
        break;
    case KJ_EXEC_SHFL:
    case KJ_EXEC_SHFL_UP:
    case KJ_EXEC_SHFL_DOWN:
    case KJ_EXEC_SHFL_XOR:
        ir_args[count++] = given == 3 ? check_mask(c, arg_node(n, 0), args[0]) : full_mask(c, n->loc);
        ir_args[count++] = check_shuffled(c, arg_node(n, given - 2), args[given - 2], name);
        ir_args[count++] = check_lane(c, arg_node(n, given - 1), args[given - 1], name);
        type = ir_args[1] ? ir_args[1]->type : NULL;
        break;
    case KJ_EXEC_SYNCWARP:
        ir_args[count++] = given == 1 ? check_mask(c, arg_node(n, 0), args[0]) : full_mask(c, n->loc);
        break;
    case KJ_EXEC_SYNCTHREADS_COUNT:
    case KJ_EXEC_SYNCTHREADS_AND:
    case KJ_EXEC_SYNCTHREADS_OR:
        type = op == KJ_EXEC_SYNCTHREADS_COUNT ? kj_check_t_i32() : kj_check_t_bool();
        ir_args[count++] = check_predicate(c, arg_node(n, 0), args[0], name);
        break;
    case KJ_EXEC_THREADFENCE:
    case KJ_EXEC_THREADFENCE_BLOCK:
    case KJ_EXEC_SYNCGRID:
        break;
    case KJ_EXEC_MMA:
        /* two results: only a let or an assignment of two names takes them */
        kj_error(c->diag, n->loc, "mma() gives two values; take them apart: let d0, d1 = "
                 "mma(a, b, c0, c1); or c0, c1 = mma(a, b, c0, c1);");
        return NULL;
    default:
        kj_unreachable();
    }
    for (int i = 0; i < count; i++)
        ok = ok && ir_args[i];
    if (!ok || !type)
        return NULL;
    KjIrExpr *e = kj_check_new_expr(c, KJ_IR_EXEC, type, n->loc, count);
    e->exec = op;
    for (int i = 0; i < count; i++)
        e->args[i] = ir_args[i];
    return e;
}

/* ============================================================ mma */

/*
 * mma(a, b, c0, c1), taken apart by a let or an assignment (check.c): the
 * warp's 8x8x4 f64 matrix multiply-accumulate D = A B + C, each lane giving
 * its element of A (8x4), of B (4x8) and its two of C (8x8), PTX's
 * mma.m8n8k4 layout (docs/language.md, "Matrix multiply-accumulate").  Its
 * IR is one EXEC of the whole warp's mask whose c128 value is the pair (d0,
 * d1); like a shuffle it is a meeting point of the warp, so the kernel runs
 * on fibers on the cpu targets.  The caller has checked the call's place
 * and argument count, and each argument (args[i], NULL after its error);
 * each operand converts to f64 as an argument of a function taking f64
 * would.
 */
KjIrExpr *kj_check_mma(KjChecker *c, KjNode *n, KjIrExpr **args)
{
    static const char *const operand[4] = {"the element of A (a) of mma()",
                                           "the element of B (b) of mma()",
                                           "the first accumulator (c0) of mma()",
                                           "the second accumulator (c1) of mma()"};
    KjIrFunction *fn = c->cur->ir;
    fn->uses_syncthreads = true;
    kj_check_note_impure(c);
    KjIrExpr *ir_args[5];
    bool ok = true;
    ir_args[0] = full_mask(c, n->loc);
    for (int i = 0; i < 4; i++) {
        KjNode *node = arg_node(n, i);
        KjIrExpr *e = args[i];
        if (e && kj_type_is_complex(e->type)) {
            kj_error(c->diag, node->loc, "%s must be a real number, not %s", operand[i],
                     kj_type_name(e->type));
            e = NULL;
        }
        ir_args[1 + i] = e ? kj_check_convert(c, e, kj_check_t_f64(), node->loc, operand[i]) : NULL;
        ok = ok && ir_args[1 + i];
    }
    if (!ok)
        return NULL;
    KjIrExpr *e = kj_check_new_expr(c, KJ_IR_EXEC, kj_type_scalar(KJ_TYPE_C128), n->loc, 5);
    e->exec = KJ_EXEC_MMA;
    for (int i = 0; i < 5; i++)
        e->args[i] = ir_args[i];
    return e;
}

/* ============================================================ warpsize */

/* `warpsize`: the integer constant 32, in kernels only.  It is an untyped
 * integer, as a literal, so it takes its type from where it is used. */
KjIrExpr *kj_check_kernel_constant(KjChecker *c, KjNode *n)
{
    if (!kj_check_require_kernel(c, n->loc, n->name))
        return NULL;
    return kj_check_int_const(c, kj_check_t_untyped_int(), KJ_WARP_SIZE, n->loc);
}
