/*
 * barrier_warn.c: `kjit check`'s warning about a block barrier that not every
 * thread of a block may reach.  A syncthreads() (or syncthreads_count/_and/
 * _or, syncgrid(), or a call of a device function that waits at one) under
 * control flow that depends on the thread (an `if` on threadIdx, a loop whose
 * trip count does, or after a `return` some threads take) is undefined
 * behaviour on a GPU: it hangs, or the threads meet at the wrong barrier.
 * The race checker (--check=race) finds it when it happens; this finds it
 * in the source, from uniform.c's analysis with threadIdx the only varying
 * source, so without a launch.  uniform.c is conservative (a value it cannot
 * prove the same for every thread counts as varying), so this is a warning.
 *
 * Needs: a checked module.  Gives: warnings to diag; the module is unchanged.
 */
#include "kjit_compiler.h"

#include <string.h>

/* The barrier a statement waits at, named for the message; NULL for none. */
static const char *barrier_of(const KjIrStmt *s)
{
    if ((s->kind != KJ_IR_STMT_EVAL && s->kind != KJ_IR_STMT_SET) || !s->value)
        return NULL;
    const KjIrExpr *e = s->value;
    if (e->op == KJ_IR_SYNCTHREADS)
        return "syncthreads";
    if (e->op == KJ_IR_EXEC &&
        (e->exec == KJ_EXEC_SYNCTHREADS_COUNT || e->exec == KJ_EXEC_SYNCTHREADS_AND ||
         e->exec == KJ_EXEC_SYNCTHREADS_OR || e->exec == KJ_EXEC_SYNCGRID))
        return kj_exec_names[e->exec];
    if (e->op == KJ_IR_CALL && e->callee &&
        (e->callee->uses_syncthreads || e->callee->uses_syncgrid))
        return e->callee->name;
    return NULL;
}

/* The walk's hook (ir.c): a warning for each barrier under divergence, in
 * the order of the source. */
typedef struct Warn {
    KjDiag *diag;
    const KjUniformity *u;
} Warn;

static KjIrWalkStep warn_stmt(KjIrWalk *w, const KjIrStmt *s)
{
    const Warn *warn = w->data;
    const char *barrier = barrier_of(s);
    if (barrier && kj_uniform_stmt_divergent(warn->u, s))
        kj_warning(warn->diag, s->value->loc,
                   "%s%s under control flow that depends on the thread: every thread of a block "
                   "must reach it, or none (a GPU hangs or meets the wrong barrier); "
                   "--check=race reports it when it happens",
                   barrier, "()");
    return KJ_IR_WALK_ON;
}

static void walk(KjDiag *diag, const KjUniformity *u, const KjIrStmt *s)
{
    Warn warn = {diag, u};
    KjIrWalk w = {.stmt = warn_stmt, .data = &warn};
    kj_ir_walk_stmt(&w, s);
}

void kj_warn_divergent_barriers(KjArena *arena, const KjIrModule *module, KjDiag *diag)
{
    KjUniformSources sources = {.sregs = 1u << KJ_SREG_TID_X | 1u << KJ_SREG_TID_Y |
                                         1u << KJ_SREG_TID_Z};
    for (int i = 0; i < module->functions.count; i++) {
        const KjIrFunction *fn = module->functions.items[i];
        if (fn->kind != KJ_IR_FN_KERNEL || !(fn->uses_syncthreads || fn->uses_syncgrid))
            continue;
        walk(diag, kj_uniform_analyze(arena, fn, sources), fn->body);
    }
}
