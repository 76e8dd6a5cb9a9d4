/* test_uniform.c: the uniformity analysis (uniform.c) on small kernels and
 * scalar functions: which variables vary with the thread, which statements
 * run under divergence, which loops have a varying exit, and how array
 * accesses are classified. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_compiler.h"
#include "ir_fixture.h"

static KjIrVar *var(KjIrFunction *fn, const char *name)
{
    for (int i = 0; i < fn->locals.count; i++) {
        KjIrVar *v = fn->locals.items[i];
        if (strcmp(v->name, name) == 0)
            return v;
    }
    ck_abort_msg("no variable %s in %s", name, fn->name);
    return NULL;
}

/* The n-th statement of `kind` in source order (pre-order walk), from 0. */
static KjIrStmt *find_stmt(KjIrStmt *s, KjIrStmtKind kind, int *n)
{
    if (!s)
        return NULL;
    if (s->kind == kind && (*n)-- == 0)
        return s;
    for (int i = 0; i < s->stmts.count; i++) {
        KjIrStmt *r = find_stmt(s->stmts.items[i], kind, n);
        if (r)
            return r;
    }
    KjIrStmt *parts[] = {s->then_stmt, s->else_stmt, s->body};
    for (int i = 0; i < 3; i++) {
        KjIrStmt *r = find_stmt(parts[i], kind, n);
        if (r)
            return r;
    }
    return NULL;
}

static KjIrStmt *nth_stmt(KjIrFunction *fn, KjIrStmtKind kind, int n)
{
    KjIrStmt *s = find_stmt(fn->body, kind, &n);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* The first LOAD of array variable `name` under s. */
static KjIrExpr *find_load(KjIrExpr *e, const char *name)
{
    if (!e)
        return NULL;
    if (e->op == KJ_IR_LOAD && e->args[0]->op == KJ_IR_VAR && strcmp(e->args[0]->var->name, name) == 0)
        return e;
    for (int i = 0; i < e->arg_count; i++) {
        KjIrExpr *r = find_load(e->args[i], name);
        if (r)
            return r;
    }
    return NULL;
}

static KjIrExpr *load_in(KjIrStmt *s, const char *name)
{
    if (!s)
        return NULL;
    KjIrExpr *es[] = {s->value, s->cond, s->start, s->stop, s->step};
    for (int i = 0; i < 5; i++) {
        KjIrExpr *r = find_load(es[i], name);
        if (r)
            return r;
    }
    for (int i = 0; i < s->index_count; i++) {
        KjIrExpr *r = find_load(s->indices[i], name);
        if (r)
            return r;
    }
    for (int i = 0; i < s->stmts.count; i++) {
        KjIrExpr *r = load_in(s->stmts.items[i], name);
        if (r)
            return r;
    }
    KjIrStmt *parts[] = {s->then_stmt, s->else_stmt, s->body};
    for (int i = 0; i < 3; i++) {
        KjIrExpr *r = load_in(parts[i], name);
        if (r)
            return r;
    }
    return NULL;
}

static const KjUniformSources THREAD_X = {.sregs = 1u << KJ_SREG_TID_X};
static const KjUniformSources THREAD_XYZ = {
    .sregs = 1u << KJ_SREG_TID_X | 1u << KJ_SREG_TID_Y | 1u << KJ_SREG_TID_Z};

START_TEST(saxpy_is_contiguous)
{
    Compiled *cp = compile_ir("@kernel\n"
                              "fn saxpy(a: f32, x: f32[], y: f32[]) {\n"
                              "    let i = grid(1);\n"
                              "    let n = x.shape[0];\n"
                              "    if i < n { y[i] = a * x[i] + y[i]; }\n"
                              "}\n");
    KjIrFunction *fn = compiled_function(cp, "saxpy");
    KjUniformity *u = kj_uniform_analyze(&cp->arena, fn, THREAD_X);
    ck_assert(kj_uniform_var_varying(u, var(fn, "i")));
    ck_assert(!kj_uniform_var_varying(u, var(fn, "n")));
    ck_assert(!kj_uniform_var_varying(u, var(fn, "a")));
    KjIrStmt *store = nth_stmt(fn, KJ_IR_STMT_STORE, 0);
    ck_assert(kj_uniform_stmt_divergent(u, store));
    ck_assert(!kj_uniform_stmt_divergent(u, nth_stmt(fn, KJ_IR_STMT_IF, 0)));
    ck_assert_int_eq(kj_uniform_access(u, store->indices, store->index_count), KJ_ACCESS_CONTIGUOUS);
    KjIrExpr *load = load_in(store, "x");
    ck_assert_int_eq(kj_uniform_access(u, load->args + 1, load->arg_count - 1), KJ_ACCESS_CONTIGUOUS);
    ck_assert(!kj_uniform_result_varying(u));
    compiled_free(cp);
}
END_TEST

START_TEST(delay_and_sum)
{
    Compiled *cp = compile_ir("@kernel\n"
                              "fn das(out: f64[,], data: i64[]) {\n"
                              "    let i = blockIdx.x;\n"
                              "    let j = threadIdx.x;\n"
                              "    if i < out.shape[1] && j < out.shape[0] {\n"
                              "        let acc = 0.0;\n"
                              "        for k in range(128) {\n"
                              "            let order = i64(f64(j - k) ** 0.5);\n"
                              "            if order < 2000 { acc += f64(data[k * 2000 + order]); }\n"
                              "        }\n"
                              "        out[j, i] = acc;\n"
                              "        out[i, j] = acc;\n"
                              "    }\n"
                              "}\n");
    KjIrFunction *fn = compiled_function(cp, "das");
    KjUniformity *u = kj_uniform_analyze(&cp->arena, fn, THREAD_X);
    ck_assert(!kj_uniform_var_varying(u, var(fn, "i")));
    ck_assert(kj_uniform_var_varying(u, var(fn, "j")));
    ck_assert(kj_uniform_var_varying(u, var(fn, "acc")));
    ck_assert(kj_uniform_var_varying(u, var(fn, "order")));
    /* the loop's bounds are uniform: its exit is too */
    ck_assert(!kj_uniform_loop_varying(u, nth_stmt(fn, KJ_IR_STMT_FOR, 0)));
    KjIrStmt *gather = nth_stmt(fn, KJ_IR_STMT_IF, 1);
    KjIrExpr *load = load_in(gather, "data");
    ck_assert_int_eq(kj_uniform_access(u, load->args + 1, load->arg_count - 1), KJ_ACCESS_GENERAL);
    KjIrStmt *column = nth_stmt(fn, KJ_IR_STMT_STORE, 0), *row = nth_stmt(fn, KJ_IR_STMT_STORE, 1);
    ck_assert_int_eq(kj_uniform_access(u, column->indices, 2), KJ_ACCESS_GENERAL);
    ck_assert_int_eq(kj_uniform_access(u, row->indices, 2), KJ_ACCESS_CONTIGUOUS);
    compiled_free(cp);
}
END_TEST

START_TEST(varying_break_makes_the_loop_varying)
{
    Compiled *cp = compile_ir("@kernel\n"
                              "fn steps(out: i32[], n: i32) {\n"
                              "    let t = threadIdx.x;\n"
                              "    let count = 0;\n"
                              "    let k = 0;\n"
                              "    let total = 0;\n"
                              "    while k < n {\n"
                              "        if t + k > 50 { break; }\n"
                              "        count += 1;\n"
                              "        k += 1;\n"
                              "    }\n"
                              "    for m in range(n) { total += m; }\n"
                              "    out[t] = i32(count + total);\n"
                              "}\n");
    KjIrFunction *fn = compiled_function(cp, "steps");
    KjUniformity *u = kj_uniform_analyze(&cp->arena, fn, THREAD_X);
    ck_assert(kj_uniform_loop_varying(u, nth_stmt(fn, KJ_IR_STMT_WHILE, 0)));
    ck_assert(kj_uniform_var_varying(u, var(fn, "count")));
    ck_assert(kj_uniform_var_varying(u, var(fn, "k")));
    /* the second loop is uniform, and so is what it sums */
    ck_assert(!kj_uniform_loop_varying(u, nth_stmt(fn, KJ_IR_STMT_FOR, 0)));
    ck_assert(!kj_uniform_var_varying(u, var(fn, "total")));
    ck_assert(!kj_uniform_var_varying(u, var(fn, "m")));
    ck_assert(!kj_uniform_stmt_divergent(u, nth_stmt(fn, KJ_IR_STMT_FOR, 0)));
    compiled_free(cp);
}
END_TEST

START_TEST(divergent_return_and_barriers)
{
    Compiled *cp = compile_ir("@kernel\n"
                              "fn k(out: f32[]) {\n"
                              "    let buf = shared(f32, 64);\n"
                              "    buf[threadIdx.x] = 1.0;\n"
                              "    syncthreads();\n"
                              "    if blockIdx.x == 3 { return; }\n"
                              "    syncthreads();\n"
                              "    if threadIdx.y == 0 { return; }\n"
                              "    syncthreads();\n"
                              "    out[threadIdx.x] = buf[threadIdx.x];\n"
                              "}\n");
    KjIrFunction *fn = compiled_function(cp, "k");
    KjUniformity *u = kj_uniform_analyze(&cp->arena, fn, THREAD_XYZ);
    ck_assert(!kj_uniform_stmt_divergent(u, nth_stmt(fn, KJ_IR_STMT_EVAL, 0)));
    ck_assert(!kj_uniform_stmt_divergent(u, nth_stmt(fn, KJ_IR_STMT_EVAL, 1)));
    ck_assert(kj_uniform_stmt_divergent(u, nth_stmt(fn, KJ_IR_STMT_EVAL, 2)));
    ck_assert(kj_uniform_divergent_return(u));
    /* with only threadIdx.x varying, threadIdx.y is the same for all lanes */
    u = kj_uniform_analyze(&cp->arena, fn, THREAD_X);
    ck_assert(!kj_uniform_stmt_divergent(u, nth_stmt(fn, KJ_IR_STMT_EVAL, 2)));
    ck_assert(!kj_uniform_divergent_return(u));
    compiled_free(cp);
}
END_TEST

START_TEST(escape_time_function)
{
    Compiled *cp = compile_ir("fn mandel(x: f64, y: f64, max_iters: i32) -> i32 {\n"
                              "    let c = complex(x, y);\n"
                              "    let z = complex(0.0, 0.0);\n"
                              "    let limit = 4.0;\n"
                              "    for i in range(max_iters) {\n"
                              "        z = z * z + c;\n"
                              "        if z.real * z.real + z.imag * z.imag >= limit { return i; }\n"
                              "    }\n"
                              "    return max_iters;\n"
                              "}\n");
    KjIrFunction *fn = compiled_function(cp, "mandel");
    /* x and y vary, max_iters does not */
    KjUniformity *u = kj_uniform_analyze(&cp->arena, fn, (KjUniformSources){.params = 3});
    ck_assert(kj_uniform_var_varying(u, var(fn, "z")));
    ck_assert(!kj_uniform_var_varying(u, var(fn, "limit")));
    ck_assert(kj_uniform_loop_varying(u, nth_stmt(fn, KJ_IR_STMT_FOR, 0)));
    ck_assert(kj_uniform_divergent_return(u));
    ck_assert(kj_uniform_result_varying(u));
    /* nothing varying: everything is uniform */
    u = kj_uniform_analyze(&cp->arena, fn, (KjUniformSources){0});
    ck_assert(!kj_uniform_var_varying(u, var(fn, "z")));
    ck_assert(!kj_uniform_loop_varying(u, nth_stmt(fn, KJ_IR_STMT_FOR, 0)));
    ck_assert(!kj_uniform_result_varying(u));
    compiled_free(cp);
}
END_TEST

START_TEST(effects_vary)
{
    Compiled *cp = compile_ir("fn bump(a: i32[]) -> i32 { a[0] = a[0] + 1; return 0; }\n"
                              "fn pure(v: i32) -> i32 { return v * 2; }\n"
                              "@kernel\n"
                              "fn k(a: i32[], b: i32[]) {\n"
                              "    let old = atomic_add(a, 0, 1);\n"
                              "    let x = bump(b);\n"
                              "    let y = pure(b[0]);\n"
                              "    let w = threadIdx.y;\n"
                              "    b[1] = old + x + y + w;\n"
                              "}\n");
    KjIrFunction *fn = compiled_function(cp, "k");
    KjUniformity *u = kj_uniform_analyze(&cp->arena, fn, THREAD_X);
    ck_assert(kj_uniform_var_varying(u, var(fn, "old")));
    ck_assert(kj_uniform_var_varying(u, var(fn, "x")));
    ck_assert(!kj_uniform_var_varying(u, var(fn, "y")));
    ck_assert(!kj_uniform_var_varying(u, var(fn, "w")));
    u = kj_uniform_analyze(&cp->arena, fn, THREAD_XYZ);
    ck_assert(kj_uniform_var_varying(u, var(fn, "w")));
    compiled_free(cp);
}
END_TEST

/* Counters read only in their loop: the grid-stride x stays uniform + lane
 * under its varying exit, the y inside it uniform; a counter assigned in its
 * body, read after its loop, or started anywhere else does not. */
START_TEST(grid_stride_counters)
{
    Compiled *cp = compile_ir("@kernel\n"
                              "fn image(out: u8[,], n: i64) {\n"
                              "    let sx, sy = grid(2);\n"
                              "    let gx, gy = gridsize(2);\n"
                              "    let last: i64 = 0;\n"
                              "    for x in range(sx, out.shape[1], gx) {\n"
                              "        for y in range(sy, out.shape[0], gy) { out[y, x] = u8(x + y); }\n"
                              "        for q in range(n) { last = q; }\n"
                              "    }\n"
                              "    for t in range(sx, n, gx) { if t > 3 { t = t + 1; } out[0, t] = 1; }\n"
                              "    for r in range(sx * 2, n, gx) { out[0, r] = 2; }\n"
                              "    let k: i64 = 0;\n"
                              "    for k2 in range(n) { if sx > 2 { k = k2; } }\n"
                              "    out[0, k] = 3;\n"
                              "}\n");
    KjIrFunction *fn = compiled_function(cp, "image");
    KjUniformity *u = kj_uniform_analyze(&cp->arena, fn, THREAD_X);
    ck_assert(kj_uniform_loop_varying(u, nth_stmt(fn, KJ_IR_STMT_FOR, 0)));
    ck_assert(kj_uniform_var_unit(u, var(fn, "x")));
    ck_assert(!kj_uniform_var_varying(u, var(fn, "y")));
    ck_assert(!kj_uniform_var_varying(u, var(fn, "q")));
    ck_assert(kj_uniform_var_varying(u, var(fn, "last"))); /* read after the loop */
    KjIrStmt *store = nth_stmt(fn, KJ_IR_STMT_STORE, 0);
    ck_assert_int_eq(kj_uniform_access(u, store->indices, 2), KJ_ACCESS_CONTIGUOUS);
    ck_assert(kj_uniform_var_varying(u, var(fn, "t")) && !kj_uniform_var_unit(u, var(fn, "t")));
    ck_assert(kj_uniform_var_varying(u, var(fn, "r")) && !kj_uniform_var_unit(u, var(fn, "r")));
    ck_assert(!kj_uniform_var_varying(u, var(fn, "k2")));
    ck_assert(kj_uniform_var_varying(u, var(fn, "k")));
    compiled_free(cp);
}
END_TEST

START_TEST(vectorized_index_is_unit)
{
    Compiled *cp = compile_ir("@vectorize(f64(f64, f64))\n"
                              "fn f(a, b) { return a + b; }\n");
    KjIrFunction *scalar = compiled_function(cp, "f");
    KjIrFunction *contig = kj_vectorize(cp->module, scalar, (KjVecVariant){KJ_LAYOUT_CONTIG, 1, 0});
    KjUniformity *u = kj_uniform_analyze(&cp->arena, contig, (KjUniformSources){.parfor_var = true});
    KjIrStmt *store = nth_stmt(contig, KJ_IR_STMT_STORE, 0);
    ck_assert_int_eq(kj_uniform_access(u, store->indices, 1), KJ_ACCESS_CONTIGUOUS);
    KjIrFunction *strided = kj_vectorize(cp->module, scalar, (KjVecVariant){KJ_LAYOUT_STRIDED, 2, 0});
    u = kj_uniform_analyze(&cp->arena, strided, (KjUniformSources){.parfor_var = true});
    store = nth_stmt(strided, KJ_IR_STMT_STORE, 0);
    ck_assert_int_eq(kj_uniform_access(u, store->indices, 2), KJ_ACCESS_GENERAL);
    u = kj_uniform_analyze(&cp->arena, strided, (KjUniformSources){0});
    ck_assert_int_eq(kj_uniform_access(u, store->indices, 2), KJ_ACCESS_UNIFORM);
    compiled_free(cp);
}
END_TEST

Suite *suite_uniform(void)
{
    Suite *s = suite_create("uniform");
    TCase *tc = tcase_create("analysis");
    tcase_add_test(tc, saxpy_is_contiguous);
    tcase_add_test(tc, delay_and_sum);
    tcase_add_test(tc, varying_break_makes_the_loop_varying);
    tcase_add_test(tc, divergent_return_and_barriers);
    tcase_add_test(tc, escape_time_function);
    tcase_add_test(tc, effects_vary);
    tcase_add_test(tc, vectorized_index_is_unit);
    tcase_add_test(tc, grid_stride_counters);
    suite_add_tcase(s, tc);
    return s;
}
