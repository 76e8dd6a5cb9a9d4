/*
 * inline_barriers.c: a kernel with its barrier helpers written into it.
 *
 * CUDA code factors a block sum or a tile load into a device function that
 * calls syncthreads().  barrier_split.c cuts a kernel at its barriers, and
 * a call cannot be cut in the middle: a kernel that calls such a helper ran
 * on fibers, 46-59 times slower than the same barriers written in the kernel
 * (issue 25).  This pass writes the helpers into a copy of the kernel, so
 * that the split sees the code as if the user had written it there.
 *
 * Needs: a checked KERNEL.
 * Gives: a new KERNEL (not added to the module; the kernel is untouched)
 * with the same parameters and a body in which every call to a device
 * function that (transitively) uses a barrier is replaced by the callee's
 * body, recursively:
 *   - the callee's variables are new variables of the kernel (`helper.x`);
 *     a parameter the callee never assigns, passed a variable or a constant,
 *     is that argument where it is read (the caller's variables cannot
 *     change while the callee runs), so `t = threadIdx.x` passed on is
 *     still the thread's index to the split; other parameters are assigned
 *     their argument first, in order;
 *   - a return that ends the callee's body is an assignment of its value to
 *     the call's `let` (nothing for `helper(...);`); any other return sets a
 *     flag, and what follows it in each enclosing block runs under `if
 *     !flag` (a return that differs between threads then puts the later
 *     barriers under varying control, and the split refuses, as CUDA leaves
 *     a barrier some threads skip undefined);
 *   - only calls that are a whole statement are written in: `helper(...);`,
 *     `let x = helper(...);` and, inside a helper, `return helper(...);`.
 * Returns NULL with *why when a call cannot be written in: inside a larger
 * expression, a return inside a loop of the helper, a helper that calls
 * itself (the checker refuses recursion; this stays refused should that
 * change); the kernel then runs on fibers, as before.
 */
#include "kjit_compiler.h"

#include <string.h>

typedef struct Inline {
    KjArena *arena;
    KjIrFunction *fn; /* the copy being built */
    const char *why;
    const KjIrFunction *stack[KJ_MAX_CALL_DEPTH + 1]; /* the helpers being written in */
    int depth;
    int64_t local_bytes; /* the helpers' local() bytes, added to the kernel's */
} Inline;

/* One function body being copied into the kernel. */
typedef struct Frame {
    const KjIrFunction *from;
    KjIrVar **map;     /* its variable id -> the kernel's */
    KjIrExpr **subst;  /* id -> the argument read in its place, or NULL */
    KjIrVar *result;   /* a helper's: where its returned value goes (NULL: dropped) */
    KjIrVar *returned; /* a helper's flag of returns that are not its last statement */
    const KjIrStmt *last_return; /* the return that ends the helper's body, or NULL */
    int loops;         /* loops of the body around the statement being copied */
} Frame;

static void refuse(Inline *I, const char *why)
{
    if (!I->why)
        I->why = why;
}

static bool is_barrier_call(const KjIrExpr *e)
{
    return e && e->op == KJ_IR_CALL && e->callee && e->callee->uses_syncthreads;
}

static KjIrExpr *copy_expr(Inline *I, Frame *F, const KjIrExpr *e)
{
    if (!e)
        return NULL;
    if (is_barrier_call(e))
        refuse(I, "a device function with a barrier is called inside an expression");
    KjIrExpr *c = kj_arena_alloc(I->arena, sizeof *c);
    if (e->op == KJ_IR_VAR && F->subst[e->var->id]) {
        /* the caller's variable or constant, already the kernel's */
        *c = *F->subst[e->var->id];
        c->loc = e->loc;
        return c;
    }
    *c = *e;
    if (e->op == KJ_IR_VAR) {
        c->var = F->map[e->var->id];
        return c;
    }
    if (e->arg_count > 0) {
        c->args = kj_arena_alloc(I->arena, sizeof *c->args * (size_t)e->arg_count);
        for (int i = 0; i < e->arg_count; i++)
            c->args[i] = copy_expr(I, F, e->args[i]);
    }
    return c;
}

/* Whether s (nested statements included) returns; whether it assigns var:
 * walks (ir.c) that stop at the first. */
static KjIrWalkStep stop_at_return(KjIrWalk *w, const KjIrStmt *s)
{
    return s->kind == KJ_IR_STMT_RETURN ? KJ_IR_WALK_STOP : KJ_IR_WALK_ON;
}

static bool stmt_returns(const KjIrStmt *s)
{
    KjIrWalk w = {.stmt = stop_at_return};
    return !kj_ir_walk_stmt(&w, s);
}

static KjIrWalkStep stop_at_assignment(KjIrWalk *w, const KjIrStmt *s)
{
    return (s->kind == KJ_IR_STMT_SET || s->kind == KJ_IR_STMT_FOR) && s->var == w->data
               ? KJ_IR_WALK_STOP
               : KJ_IR_WALK_ON;
}

static bool stmt_assigns(const KjIrStmt *s, const KjIrVar *var)
{
    KjIrWalk w = {.stmt = stop_at_assignment, .data = (void *)var};
    return !kj_ir_walk_stmt(&w, s);
}

static KjIrStmt *new_block(Inline *I, KjLoc loc)
{
    return kj_ir_new_stmt(I->arena, KJ_IR_STMT_BLOCK, loc);
}

static void copy_stmt(Inline *I, Frame *F, const KjIrStmt *s, KjIrStmt *out);

/* The statements of a block into out; what follows a statement that may
 * return (not the body's last) runs only while the helper has not. */
static void copy_items(Inline *I, Frame *F, const KjVec *items, KjIrStmt *out)
{
    for (int i = 0; i < items->count; i++) {
        const KjIrStmt *s = items->items[i];
        copy_stmt(I, F, s, out);
        if (F->returned && i + 1 < items->count && stmt_returns(s)) {
            KjIrStmt *rest = kj_ir_new_stmt(I->arena, KJ_IR_STMT_IF, s->loc);
            rest->cond = kj_ir_unary(I->arena, KJ_IR_NOT, F->returned->type, s->loc,
                                     kj_ir_var_ref(I->arena, F->returned, s->loc));
            rest->then_stmt = new_block(I, s->loc);
            kj_vec_push(I->arena, &out->stmts, rest);
            out = rest->then_stmt;
        }
    }
}

static void inline_call(Inline *I, Frame *caller, const KjIrExpr *call, KjIrVar *result, KjIrStmt *out);

/* A helper's return: its value to the call's result, and the flag. */
static void copy_return(Inline *I, Frame *F, const KjIrStmt *s, KjIrStmt *out)
{
    if (F->loops > 0) {
        refuse(I, "a device function with a barrier returns from inside a loop");
        return;
    }
    if (s->value && is_barrier_call(s->value)) {
        inline_call(I, F, s->value, F->result, out);
    } else if (s->value && F->result) {
        kj_vec_push(I->arena, &out->stmts, kj_ir_set(I->arena, F->result, copy_expr(I, F, s->value), s->loc));
    } else if (s->value) {
        /* the value is dropped; what it does is kept */
        KjIrStmt *eval = kj_ir_new_stmt(I->arena, KJ_IR_STMT_EVAL, s->loc);
        eval->value = copy_expr(I, F, s->value);
        kj_vec_push(I->arena, &out->stmts, eval);
    }
    if (s != F->last_return) {
        KjIrExpr *yes = kj_ir_int_const(I->arena, F->returned->type, 1, s->loc);
        kj_vec_push(I->arena, &out->stmts, kj_ir_set(I->arena, F->returned, yes, s->loc));
    }
}

static void copy_stmt(Inline *I, Frame *F, const KjIrStmt *s, KjIrStmt *out)
{
    if (!s || I->why)
        return;
    if (s->kind == KJ_IR_STMT_BLOCK) {
        KjIrStmt *b = new_block(I, s->loc);
        copy_items(I, F, &s->stmts, b);
        kj_vec_push(I->arena, &out->stmts, b);
        return;
    }
    if (s->kind == KJ_IR_STMT_EVAL && is_barrier_call(s->value)) {
        inline_call(I, F, s->value, NULL, out);
        return;
    }
    if (s->kind == KJ_IR_STMT_SET && is_barrier_call(s->value)) {
        inline_call(I, F, s->value, F->map[s->var->id], out);
        return;
    }
    if (s->kind == KJ_IR_STMT_RETURN && F->from->kind != KJ_IR_FN_KERNEL) {
        copy_return(I, F, s, out);
        return;
    }
    KjIrStmt *c = kj_arena_alloc(I->arena, sizeof *c);
    *c = *s;
    c->stmts = (KjVec){0};
    c->var = s->var ? F->map[s->var->id] : NULL;
    c->value = copy_expr(I, F, s->value);
    c->array = copy_expr(I, F, s->array);
    c->cond = copy_expr(I, F, s->cond);
    c->start = copy_expr(I, F, s->start);
    c->stop = copy_expr(I, F, s->stop);
    c->step = copy_expr(I, F, s->step);
    if (s->index_count > 0) {
        c->indices = kj_arena_alloc(I->arena, sizeof *c->indices * (size_t)s->index_count);
        for (int i = 0; i < s->index_count; i++)
            c->indices[i] = copy_expr(I, F, s->indices[i]);
    }
    /* an if's sides and a loop's body are blocks of their own */
    const KjIrStmt *subs[3] = {s->then_stmt, s->else_stmt, s->body};
    KjIrStmt **outs[3] = {&c->then_stmt, &c->else_stmt, &c->body};
    bool loop = s->kind == KJ_IR_STMT_FOR || s->kind == KJ_IR_STMT_WHILE;
    F->loops += loop;
    for (int k = 0; k < 3; k++) {
        if (!subs[k])
            continue;
        KjIrStmt *b = new_block(I, subs[k]->loc);
        copy_stmt(I, F, subs[k], b);
        *outs[k] = b->stmts.count == 1 && ((KjIrStmt *)b->stmts.items[0])->kind == KJ_IR_STMT_BLOCK
                       ? b->stmts.items[0]
                       : b;
    }
    F->loops -= loop;
    kj_vec_push(I->arena, &out->stmts, c);
}

/* The new variables of a function body written into the kernel. */
static void map_variables(Inline *I, Frame *F, const KjIrFunction *from, const char *prefix)
{
    int count = from->locals.count;
    F->map = kj_arena_alloc(I->arena, sizeof *F->map * (size_t)(count + 1));
    F->subst = kj_arena_alloc(I->arena, sizeof *F->subst * (size_t)(count + 1));
    for (int i = 0; i < count; i++) {
        const KjIrVar *v = from->locals.items[i];
        const char *name = prefix ? kj_arena_printf(I->arena, "%s.%s", prefix, v->name) : v->name;
        F->map[i] = kj_ir_new_var(I->arena, I->fn, name, v->type, v->loc);
        F->map[i]->is_param = !prefix && v->is_param;
    }
}

/* The return that ends a body (its last statement), or NULL. */
static const KjIrStmt *final_return(const KjIrStmt *body)
{
    if (!body || body->kind != KJ_IR_STMT_BLOCK || body->stmts.count == 0)
        return NULL;
    const KjIrStmt *last = body->stmts.items[body->stmts.count - 1];
    return last->kind == KJ_IR_STMT_RETURN ? last : NULL;
}

static bool returns_elsewhere(const KjIrStmt *s, const KjIrStmt *except)
{
    if (!s)
        return false;
    if (s->kind == KJ_IR_STMT_RETURN)
        return s != except;
    for (int i = 0; i < s->stmts.count; i++)
        if (returns_elsewhere(s->stmts.items[i], except))
            return true;
    return returns_elsewhere(s->then_stmt, except) || returns_elsewhere(s->else_stmt, except) ||
           returns_elsewhere(s->body, except);
}

/* `[result =] call(args)`: the callee's body, its statements among the
 * caller's (a block of its own would end the caller's region before it and
 * start one after it, where the code written in place has none). */
static void inline_call(Inline *I, Frame *caller, const KjIrExpr *call, KjIrVar *result, KjIrStmt *out)
{
    const KjIrFunction *callee = call->callee;
    for (int i = 0; i < I->depth; i++)
        if (I->stack[i] == callee)
            refuse(I, "a device function with a barrier calls itself");
    if (I->depth >= KJ_MAX_CALL_DEPTH)
        refuse(I, "device functions with barriers nest too deep");
    if (I->why)
        return;
    I->stack[I->depth++] = callee;
    I->local_bytes += callee->local_bytes;

    KjIrStmt *block = out;
    Frame F = {.from = callee, .result = result};
    map_variables(I, &F, callee, callee->name);
    for (int i = 0; i < callee->param_count && i < call->arg_count; i++) {
        const KjIrVar *p = callee->params[i];
        const KjIrExpr *arg = call->args[i];
        if ((arg->op == KJ_IR_VAR || arg->op == KJ_IR_CONST) && arg->type == p->type &&
            !stmt_assigns(callee->body, p)) {
            F.subst[p->id] = copy_expr(I, caller, arg);
            continue;
        }
        kj_vec_push(I->arena, &block->stmts, kj_ir_set(I->arena, F.map[p->id], copy_expr(I, caller, arg), arg->loc));
    }
    F.last_return = final_return(callee->body);
    if (returns_elsewhere(callee->body, F.last_return)) {
        F.returned = kj_ir_new_var(I->arena, I->fn, kj_arena_printf(I->arena, "%s.returned", callee->name),
                                   kj_type_scalar(KJ_TYPE_BOOL), call->loc);
        kj_vec_push(I->arena, &block->stmts,
                    kj_ir_set(I->arena, F.returned, kj_ir_int_const(I->arena, F.returned->type, 0, call->loc),
                              call->loc));
    }
    copy_items(I, &F, &callee->body->stmts, block);
    I->depth--;
}

static bool not_barrier_call(KjIrWalk *w, const KjIrExpr *e) { return !is_barrier_call(e); }

bool kj_kernel_calls_barrier_helper(const KjIrFunction *kernel)
{
    KjIrWalk w = {.expr = not_barrier_call};
    return !kj_ir_walk_stmt(&w, kernel->body);
}

KjIrFunction *kj_inline_barrier_helpers(KjArena *arena, const KjIrFunction *kernel, const char **why)
{
    Inline inl = {.arena = arena}, *I = &inl;
    KjIrFunction *fn = kj_arena_alloc(arena, sizeof *fn);
    *fn = *kernel;
    fn->locals = (KjVec){0};
    fn->split = NULL;
    I->fn = fn;
    Frame F = {.from = kernel};
    map_variables(I, &F, kernel, NULL);
    fn->params = kj_arena_alloc(arena, sizeof *fn->params * (size_t)(kernel->param_count + 1));
    for (int i = 0; i < kernel->param_count; i++)
        fn->params[i] = F.map[kernel->params[i]->id];
    fn->body = new_block(I, kernel->body->loc);
    copy_items(I, &F, &kernel->body->stmts, fn->body);
    fn->local_bytes = kernel->local_bytes + I->local_bytes;
    if (!I->why && fn->local_bytes > KJ_MAX_LOCAL_BYTES)
        refuse(I, "the helpers' local() arrays take too much memory written into the kernel");
    if (why)
        *why = I->why;
    return I->why ? NULL : fn;
}
