/* test_ir.c: the IR's builders, printer and verifier.  A small module is
 * built by hand and must verify and print as expected; then it is broken in
 * one way at a time and the verifier must reject each, naming the problem.
 * Operand typing is checked over random type triples against a reference, and
 * the printer's float constants must read back as the same value. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_compiler.h"

static const KjType *T(KjTypeKind kind) { return kj_type_scalar(kind); }
static KjLoc no_loc(void) { return (KjLoc){0}; }

static KjIrExpr *var(KjArena *a, KjIrVar *v)
{
    KjIrExpr *e = kj_ir_new_expr(a, KJ_IR_VAR, v->type, no_loc(), 0);
    e->var = v;
    return e;
}

static KjIrExpr *fconst(KjArena *a, const KjType *t, double value)
{
    KjIrExpr *e = kj_ir_new_expr(a, KJ_IR_CONST, t, no_loc(), 0);
    e->const_float = value;
    return e;
}

static KjIrExpr *binary(KjArena *a, KjIrOp op, const KjType *t, KjIrExpr *l, KjIrExpr *r)
{
    KjIrExpr *e = kj_ir_new_expr(a, op, t, no_loc(), 2);
    e->args[0] = l;
    e->args[1] = r;
    return e;
}

static KjIrFunction *new_fn(KjArena *a, KjIrModule *m, const char *name, const KjType *param,
                            const KjType *ret)
{
    KjIrFunction *fn = kj_arena_alloc(a, sizeof *fn);
    fn->name = fn->symbol = name;
    fn->kind = KJ_IR_FN_PLAIN;
    fn->ret = ret;
    fn->param_count = 1;
    fn->params = kj_arena_alloc(a, sizeof *fn->params);
    fn->params[0] = kj_ir_new_var(a, fn, "x", param, no_loc());
    fn->params[0]->is_param = true;
    fn->body = kj_ir_new_stmt(a, KJ_IR_STMT_BLOCK, no_loc());
    kj_vec_push(a, &m->functions, fn);
    return fn;
}

static void add_stmt(KjArena *a, KjIrFunction *fn, KjIrStmt *s)
{
    kj_vec_push(a, &fn->body->stmts, s);
}

static KjIrStmt *ret(KjArena *a, KjIrExpr *value)
{
    KjIrStmt *s = kj_ir_new_stmt(a, KJ_IR_STMT_RETURN, no_loc());
    s->value = value;
    return s;
}

/* sq(x: f64) -> f64 { return x * x; }
 * f(x: f64) -> f64 { var y: f64; for i in 0..10 { y = y + 1.5 } return sq(y) } */
typedef struct Fixture {
    KjArena arena;
    KjIrModule module;
    KjIrFunction *sq, *f;
    KjIrVar *y, *i;
    KjIrStmt *loop;
    KjIrExpr *call;
} Fixture;

static void build(Fixture *fx)
{
    KjArena *a = &fx->arena;
    const KjType *f64 = T(KJ_TYPE_F64), *i64 = T(KJ_TYPE_I64);
    fx->module.arena = a;
    fx->sq = new_fn(a, &fx->module, "sq", f64, f64);
    add_stmt(a, fx->sq, ret(a, binary(a, KJ_IR_MUL, f64, var(a, fx->sq->params[0]),
                                      var(a, fx->sq->params[0]))));
    fx->f = new_fn(a, &fx->module, "f", f64, f64);
    fx->y = kj_ir_new_var(a, fx->f, "y", f64, no_loc());
    fx->i = kj_ir_new_var(a, fx->f, "i", i64, no_loc());
    KjIrStmt *init = kj_ir_new_stmt(a, KJ_IR_STMT_SET, no_loc());
    init->var = fx->y;
    init->value = var(a, fx->f->params[0]);
    add_stmt(a, fx->f, init);
    fx->loop = kj_ir_new_stmt(a, KJ_IR_STMT_FOR, no_loc());
    fx->loop->var = fx->i;
    KjIrExpr *k[3];
    int64_t bounds[3] = {0, 10, 1};
    for (int j = 0; j < 3; j++) {
        k[j] = kj_ir_new_expr(a, KJ_IR_CONST, i64, no_loc(), 0);
        k[j]->const_int = (uint64_t)bounds[j];
    }
    fx->loop->start = k[0];
    fx->loop->stop = k[1];
    fx->loop->step = k[2];
    fx->loop->body = kj_ir_new_stmt(a, KJ_IR_STMT_BLOCK, no_loc());
    KjIrStmt *inc = kj_ir_new_stmt(a, KJ_IR_STMT_SET, no_loc());
    inc->var = fx->y;
    inc->value = binary(a, KJ_IR_ADD, f64, var(a, fx->y), fconst(a, f64, 1.5));
    kj_vec_push(a, &fx->loop->body->stmts, inc);
    add_stmt(a, fx->f, fx->loop);
    fx->call = kj_ir_new_expr(a, KJ_IR_CALL, f64, no_loc(), 1);
    fx->call->callee = fx->sq;
    fx->call->args[0] = var(a, fx->y);
    add_stmt(a, fx->f, ret(a, fx->call));
}

static bool verify(Fixture *fx, const char *expect_in_why)
{
    char *why = NULL;
    bool ok = kj_ir_verify(&fx->module, &why);
    if (!ok && expect_in_why)
        ck_assert_msg(strstr(why, expect_in_why), "why: %s (expected '%s')", why, expect_in_why);
    if (ok && expect_in_why)
        ck_abort_msg("the verifier accepted IR broken by: %s", expect_in_why);
    if (!ok && !expect_in_why)
        ck_abort_msg("the verifier rejected good IR: %s", why);
    free(why);
    return ok;
}

START_TEST(good_module_verifies_and_prints)
{
    Fixture fx = {0};
    build(&fx);
    verify(&fx, NULL);
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    kj_ir_print_module(out, &fx.module);
    fclose(out);
    ck_assert_str_eq(text, "plain sq(x: f64) -> f64 [symbol sq]\n"
                           "  return (mul:f64 x:f64 x:f64)\n"
                           "\n"
                           "plain f(x: f64) -> f64 [symbol f]\n"
                           "  var y: f64\n"
                           "  var i: i64\n"
                           "  y = x:f64\n"
                           "  for i = 0:i64 to 10:i64 step 1:i64\n"
                           "    y = (add:f64 y:f64 1.5:f64)\n"
                           "  return (call.sq:f64 y:f64)\n");
    free(text);
    kj_arena_free(&fx.arena);
}
END_TEST

/* Each breakage, applied to a fresh fixture, with what `why` must say. */
enum {
    BREAK_OPERAND_TYPE, BREAK_FOREIGN_VAR, BREAK_BREAK_OUTSIDE_LOOP, BREAK_CALLEE_ORDER,
    BREAK_RETURN_TYPE, BREAK_UNTYPED_LEFT, BREAK_SREG_IN_PLAIN, BREAK_STORE_INDICES,
    BREAK_FOR_BOUND_TYPE, BREAK_CALL_ARITY, BREAK_IF_CONDITION, BREAK_DUPLICATE_SYMBOL,
    BREAK_COUNT
};

START_TEST(broken_module_is_rejected)
{
    Fixture fx = {0};
    build(&fx);
    KjArena *a = &fx.arena;
    const char *expect = NULL;
    switch (_i) {
    case BREAK_OPERAND_TYPE: {
        KjIrStmt *inc = fx.loop->body->stmts.items[0];
        inc->value->args[1] = fconst(a, T(KJ_TYPE_F32), 1.5f);
        expect = "operand 1 is f32";
        break;
    }
    case BREAK_FOREIGN_VAR:
        fx.call->args[0] = var(a, fx.sq->params[0]);
        expect = "not a local of this function";
        break;
    case BREAK_BREAK_OUTSIDE_LOOP:
        add_stmt(a, fx.f, kj_ir_new_stmt(a, KJ_IR_STMT_BREAK, no_loc()));
        expect = "break outside a loop";
        break;
    case BREAK_CALLEE_ORDER:
        fx.module.functions.items[0] = fx.f;
        fx.module.functions.items[1] = fx.sq;
        expect = "does not come before its caller";
        break;
    case BREAK_RETURN_TYPE:
        ((KjIrStmt *)fx.sq->body->stmts.items[0])->value = var(a, fx.sq->params[0]);
        fx.sq->ret = T(KJ_TYPE_F32);
        expect = "return of f64 from a function returning f32";
        break;
    case BREAK_UNTYPED_LEFT: {
        KjIrStmt *inc = fx.loop->body->stmts.items[0];
        inc->value->args[1] = fconst(a, T(KJ_TYPE_UNTYPED_FLOAT), 1.5);
        expect = "no settled type";
        break;
    }
    case BREAK_SREG_IN_PLAIN: {
        KjIrExpr *reg = kj_ir_new_expr(a, KJ_IR_SREG, T(KJ_TYPE_I32), no_loc(), 0);
        KjIrStmt *eval = kj_ir_new_stmt(a, KJ_IR_STMT_EVAL, no_loc());
        eval->value = reg;
        add_stmt(a, fx.f, eval);
        expect = "outside a kernel";
        break;
    }
    case BREAK_STORE_INDICES: {
        KjIrVar *arr = kj_ir_new_var(a, fx.f, "arr", kj_type_array(T(KJ_TYPE_F64), 2), no_loc());
        KjIrStmt *store = kj_ir_new_stmt(a, KJ_IR_STMT_STORE, no_loc());
        store->array = var(a, arr);
        store->index_count = 1;
        store->indices = kj_arena_alloc(a, sizeof *store->indices);
        store->indices[0] = kj_ir_new_expr(a, KJ_IR_CONST, T(KJ_TYPE_I64), no_loc(), 0);
        store->value = fconst(a, T(KJ_TYPE_F64), 0);
        add_stmt(a, fx.f, store);
        expect = "with 1 indices";
        break;
    }
    case BREAK_FOR_BOUND_TYPE:
        fx.loop->stop = kj_ir_new_expr(a, KJ_IR_CONST, T(KJ_TYPE_I32), no_loc(), 0);
        expect = "for bounds do not match";
        break;
    case BREAK_CALL_ARITY:
        fx.call->arg_count = 0;
        expect = "with 0 arguments";
        break;
    case BREAK_IF_CONDITION: {
        KjIrStmt *s = kj_ir_new_stmt(a, KJ_IR_STMT_IF, no_loc());
        s->cond = var(a, fx.y);
        s->then_stmt = kj_ir_new_stmt(a, KJ_IR_STMT_BLOCK, no_loc());
        add_stmt(a, fx.f, s);
        expect = "if condition is f64";
        break;
    }
    case BREAK_DUPLICATE_SYMBOL:
        fx.f->symbol = "sq";
        expect = "symbol sq is used twice";
        break;
    }
    verify(&fx, expect);
    kj_arena_free(&fx.arena);
}
END_TEST

/* Random (result, left, right) type triples for every arithmetic and bitwise
 * op: the verifier accepts exactly those the reference allows. */
START_TEST(operand_types_against_reference)
{
    static const KjIrOp ops[] = {KJ_IR_ADD, KJ_IR_SUB, KJ_IR_MUL, KJ_IR_DIV, KJ_IR_REM,
                                 KJ_IR_BITAND, KJ_IR_SHL, KJ_IR_LT, KJ_IR_EQ};
    uint64_t state = 12345;
    for (int round = 0; round < 2000; round++) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        KjIrOp op = ops[(state >> 33) % 9];
        KjTypeKind kinds[3];
        for (int j = 0; j < 3; j++) {
            state = state * 6364136223846793005u + 1442695040888963407u;
            kinds[j] = (KjTypeKind)(KJ_TYPE_BOOL + (int)((state >> 33) % 13));
        }
        const KjType *rt = T(kinds[0]), *lt = T(kinds[1]), *r2 = T(kinds[2]);
        bool is_int = kj_type_is_int(lt), numeric = kj_type_is_numeric(lt);
        bool want;
        switch (op) {
        case KJ_IR_REM: want = rt == lt && lt == r2 && (is_int || kj_type_is_float(lt)); break;
        case KJ_IR_BITAND:
        case KJ_IR_SHL: want = rt == lt && lt == r2 && is_int; break;
        case KJ_IR_LT:
            want = rt == T(KJ_TYPE_BOOL) && lt == r2 && (is_int || kj_type_is_float(lt));
            break;
        case KJ_IR_EQ: want = rt == T(KJ_TYPE_BOOL) && lt == r2; break;
        default: want = rt == lt && lt == r2 && numeric; break;
        }
        Fixture fx = {0};
        build(&fx);
        KjIrVar *l = kj_ir_new_var(&fx.arena, fx.f, "l", lt, no_loc());
        KjIrVar *r = kj_ir_new_var(&fx.arena, fx.f, "r", r2, no_loc());
        KjIrVar *out = kj_ir_new_var(&fx.arena, fx.f, "out", rt, no_loc());
        KjIrStmt *set = kj_ir_new_stmt(&fx.arena, KJ_IR_STMT_SET, no_loc());
        set->var = out;
        set->value = binary(&fx.arena, op, rt, var(&fx.arena, l), var(&fx.arena, r));
        add_stmt(&fx.arena, fx.f, set);
        char *why = NULL;
        bool ok = kj_ir_verify(&fx.module, &why);
        ck_assert_msg(ok == want, "%s:%s (%s, %s): verifier %s%s%s", kj_ir_op_name(op),
                      kj_type_name(rt), kj_type_name(lt), kj_type_name(r2),
                      ok ? "accepted" : "rejected", why ? ": " : "", why ? why : "");
        free(why);
        kj_arena_free(&fx.arena);
    }
}
END_TEST

/* Printed float constants read back as the same value (f64 and f32). */
START_TEST(float_constants_round_trip)
{
    uint64_t state = 99;
    for (int round = 0; round < 3000; round++) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        uint64_t bits = state;
        double value;
        memcpy(&value, &bits, sizeof value);
        if (!isfinite(value))
            continue;
        bool single = round % 2;
        if (single)
            value = (float)value;
        if (!isfinite(value))
            continue;
        KjArena arena = {0};
        KjIrModule module = {.arena = &arena};
        KjIrFunction *fn = new_fn(&arena, &module, "k", T(KJ_TYPE_F64), T(KJ_TYPE_F64));
        add_stmt(&arena, fn, ret(&arena, fconst(&arena, T(single ? KJ_TYPE_F32 : KJ_TYPE_F64),
                                                value)));
        char *text = NULL;
        size_t size = 0;
        FILE *out = open_memstream(&text, &size);
        kj_ir_print_function(out, fn);
        fclose(out);
        const char *at = strstr(text, "return ");
        ck_assert_ptr_nonnull(at);
        double back = strtod(at + 7, NULL);
        if (single)
            ck_assert_msg((float)back == (float)value, "%s", text);
        else
            ck_assert_msg(back == value, "%s", text);
        free(text);
        kj_arena_free(&arena);
    }
}
END_TEST

START_TEST(name_tables)
{
    ck_assert_str_eq(kj_math_names[KJ_MATH_SQRT], "sqrt");
    ck_assert_int_eq(kj_math_arity[KJ_MATH_SQRT], 1);
    ck_assert_str_eq(kj_math_names[KJ_MATH_ATAN2], "atan2");
    ck_assert_int_eq(kj_math_arity[KJ_MATH_ATAN2], 2);
    ck_assert_int_eq(kj_math_arity[KJ_MATH_FMA], 3);
    ck_assert_str_eq(kj_special_reg_names[KJ_SREG_BDIM_Y], "blockDim.y");
    ck_assert_str_eq(kj_ir_op_name(KJ_IR_IPOW), "IPOW");
    for (int i = 0; i < KJ_IR_OP_COUNT; i++)
        ck_assert_str_ne(kj_ir_op_name((KjIrOp)i), "?");
}
END_TEST

/* The one walk (ir.c): a store's array, its indices, then its value (the
 * order the lowering evaluates them in, which checked mode's site numbers
 * follow), each expression's operands before it, the statement after its
 * own expressions, then the statements under it; SKIP and STOP obeyed. */
typedef struct WalkLog {
    char text[256];
    const KjIrStmt *skip, *stop;
} WalkLog;

static void walk_note(WalkLog *log, const char *what)
{
    strncat(log->text, what, sizeof log->text - strlen(log->text) - 1);
    strncat(log->text, " ", sizeof log->text - strlen(log->text) - 1);
}

static bool walk_expr(KjIrWalk *w, const KjIrExpr *e)
{
    walk_note(w->data, e->op == KJ_IR_VAR ? e->var->name : kj_ir_op_name(e->op));
    return true;
}

static KjIrWalkStep walk_stmt(KjIrWalk *w, const KjIrStmt *s)
{
    WalkLog *log = w->data;
    static const char *const names[] = {
#define X(kind) #kind,
        KJ_IR_STMT_KINDS(X)
#undef X
    };
    walk_note(log, names[s->kind]);
    return s == log->stop ? KJ_IR_WALK_STOP : s == log->skip ? KJ_IR_WALK_SKIP : KJ_IR_WALK_ON;
}

START_TEST(one_walk_in_evaluation_order)
{
    KjArena a = {0};
    KjIrModule m = {.arena = &a};
    KjIrFunction *fn = new_fn(&a, &m, "f", kj_type_array(T(KJ_TYPE_F32), 1), T(KJ_TYPE_VOID));
    KjIrVar *arr = fn->params[0];
    KjIrVar *i = kj_ir_new_var(&a, fn, "i", T(KJ_TYPE_I64), no_loc());
    KjIrVar *v = kj_ir_new_var(&a, fn, "v", T(KJ_TYPE_F32), no_loc());
    KjIrStmt *store = kj_ir_new_stmt(&a, KJ_IR_STMT_STORE, no_loc());
    store->array = var(&a, arr);
    store->index_count = 1;
    store->indices = kj_arena_alloc(&a, sizeof *store->indices);
    store->indices[0] = var(&a, i);
    store->value = binary(&a, KJ_IR_ADD, T(KJ_TYPE_F32), var(&a, v), fconst(&a, T(KJ_TYPE_F32), 1));
    KjIrStmt *branch = kj_ir_new_stmt(&a, KJ_IR_STMT_IF, no_loc());
    branch->cond = binary(&a, KJ_IR_LT, T(KJ_TYPE_BOOL), var(&a, i), var(&a, i));
    branch->then_stmt = kj_ir_new_stmt(&a, KJ_IR_STMT_BLOCK, no_loc());
    kj_vec_push(&a, &branch->then_stmt->stmts, store);
    add_stmt(&a, fn, branch);
    add_stmt(&a, fn, kj_ir_set(&a, v, var(&a, i), no_loc()));

    WalkLog log = {0};
    KjIrWalk w = {.stmt = walk_stmt, .expr = walk_expr, .data = &log};
    ck_assert(kj_ir_walk_stmt(&w, fn->body));
    ck_assert_str_eq(log.text, "BLOCK i i LT IF BLOCK x i v CONST ADD STORE i SET ");

    memset(&log, 0, sizeof log); /* SKIP leaves out the if's branch, the walk goes on */
    log.skip = branch;
    ck_assert(kj_ir_walk_stmt(&w, fn->body));
    ck_assert_str_eq(log.text, "BLOCK i i LT IF i SET ");

    memset(&log, 0, sizeof log); /* STOP ends the whole walk */
    log.stop = store;
    ck_assert(!kj_ir_walk_stmt(&w, fn->body));
    ck_assert_str_eq(log.text, "BLOCK i i LT IF BLOCK x i v CONST ADD STORE ");

    ck_assert(kj_ir_expr_reads(store->value, v));
    ck_assert(!kj_ir_expr_reads(store->value, i));
    ck_assert(kj_ir_stmt_exprs_read(store, arr, true));
    ck_assert(!kj_ir_stmt_exprs_read(store, arr, false));
    ck_assert(!kj_ir_stmt_exprs_read(branch, v, true)); /* its own expressions only */
    kj_arena_free(&a);
}
END_TEST

Suite *suite_ir(void)
{
    Suite *s = suite_create("ir");
    TCase *tc = tcase_create("verifier");
    tcase_add_test(tc, good_module_verifies_and_prints);
    tcase_add_loop_test(tc, broken_module_is_rejected, 0, BREAK_COUNT);
    tcase_add_test(tc, operand_types_against_reference);
    tcase_add_test(tc, float_constants_round_trip);
    tcase_add_test(tc, name_tables);
    tcase_add_test(tc, one_walk_in_evaluation_order);
    suite_add_tcase(s, tc);
    return s;
}
