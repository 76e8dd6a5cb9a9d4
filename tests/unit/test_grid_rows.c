/* test_grid_rows.c: kernels that the cpu targets run as rows of their grid
 * (compiler/grid_rows.c, target_cpu.c's __xrange, runtime/cpu.c's
 * kj_cpu_run_rows; issue 25 item 5).
 *
 * - which kernels take the form (kj_grid_rows): grid() sums only, a guard of
 *   sums below extents, integer parameters or constants, the output whose
 *   lines a row is cut on; and which do not (threadIdx or blockDim read
 *   outside a sum, shared memory, atomics, an `if` that is no such guard,
 *   a bound the body assigns);
 * - launches on cpu and parallel of 1-, 2- and 3-D kernels, guards of <, <=,
 *   reversed and constant bounds, grids wider and taller than the arrays,
 *   outputs at every 4-byte offset into a line, sizes around the SIMD width
 *   and the pool's grain: every element the C reference's, and nothing
 *   beside the output written (sentinels); on parallel with each way of
 *   cutting the rows for the pool (KJIT_CPU_ROWS_CUT);
 * - a launch of the form with a block shape not seen before compiles
 *   nothing (it runs the general code's __xrange, not code for the shape),
 *   where a kernel not of the form compiles that shape's code. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit.h"
#include "kjit_compiler.h"
#include "kjit_tools.h"
#include "ir_fixture.h"

/* ------------------------------------------------------------ the form */

static KjGridRows form_of(const char *text, const char *name)
{
    Compiled *cp = compile_ir(text);
    KjGridRows rows = kj_grid_rows(compiled_function(cp, name));
    rows.guard = NULL; /* the arena goes */
    compiled_free(cp);
    return rows;
}

START_TEST(form_elementwise)
{
    KjGridRows r = form_of("@kernel fn k(a: i32[], b: i32[]) {\n"
                           "    let i = grid(1);\n"
                           "    if i < len(a) { b[i] = a[i] + 1; }\n"
                           "}\n", "k");
    ck_assert(r.ok);
    ck_assert_int_eq(r.bound_count, 1);
    ck_assert_int_eq(r.bounds[0].axis, 0);
    ck_assert_int_eq(r.bounds[0].param, 0);
    ck_assert_int_eq(r.bounds[0].dim, 0);
    ck_assert_int_eq(r.bounds[0].add, 0);
    ck_assert_int_eq(r.out, 1);
    ck_assert_int_eq(r.out_ndim, 1);
    ck_assert_int_eq(r.out_axis[0], 0);
    ck_assert_int_eq(r.out_size, 4);

    r = form_of("@kernel fn k(a: f64[,], b: f64[,], n: i32) {\n"
                "    let j, i = grid(2);\n"
                "    if len(a) > i && j <= n && 7 >= j { b[i, j] = a[i, j] * 2.0; }\n"
                "}\n", "k");
    ck_assert(r.ok);
    ck_assert_int_eq(r.bound_count, 3);
    ck_assert_int_eq(r.bounds[0].axis, 1);
    ck_assert_int_eq(r.bounds[0].param, 0);
    ck_assert_int_eq(r.bounds[1].axis, 0);
    ck_assert_int_eq(r.bounds[1].param, 2);
    ck_assert_int_eq(r.bounds[1].dim, -1);
    ck_assert_int_eq(r.bounds[1].dim_bytes, 4);
    ck_assert_int_eq(r.bounds[1].add, 1);
    ck_assert_int_eq(r.bounds[2].param, -1);
    ck_assert_int_eq(r.bounds[2].add, 8);
    ck_assert_int_eq(r.out, 1);
    ck_assert_int_eq(r.out_ndim, 2);
    ck_assert_int_eq(r.out_axis[0], 1);
    ck_assert_int_eq(r.out_axis[1], 0);
    ck_assert_int_eq(r.out_size, 8);

    /* no guard at all: the form, none of its bounds */
    r = form_of("@kernel fn k(a: f32[], b: f32[]) { let i = grid(1); b[i] = a[i]; }\n", "k");
    ck_assert(r.ok);
    ck_assert_int_eq(r.bound_count, 0);
    ck_assert_int_eq(r.out, 1);
}
END_TEST

START_TEST(form_refused)
{
    static const char *const refused[] = {
        /* threadIdx outside a sum */
        "@kernel fn k(a: i32[], b: i32[]) { let i = grid(1); if i < len(a) { b[i] = a[i] + threadIdx.x; } }\n",
        /* blockDim outside a sum */
        "@kernel fn k(a: i32[], b: i32[]) { let i = grid(1); if i < len(a) { b[i] = blockDim.x; } }\n",
        /* gridsize() reads gridDim */
        "@kernel fn k(a: i32[], b: i32[]) { let i = grid(1); if i < len(a) { b[i] = i32(gridsize(1)); } }\n",
        /* threads that meet */
        "@kernel fn k(a: i32[], b: i32[]) { let i = grid(1); if i < len(a) { atomic_add(b, 0, a[i]); } }\n",
        /* (s's length, not a slot of it: no thread reads what none wrote) */
        "@kernel fn k(a: i32[], b: i32[]) { let s = shared(i32, 32); let i = grid(1); "
        "if i < len(a) { b[i] = a[i] + i32(len(s)); } }\n",
        /* an `if` that is no guard of the form */
        "@kernel fn k(a: i32[], b: i32[]) { let i = grid(1); if a[i] > 0 { b[i] = 1; } }\n",
        "@kernel fn k(a: i32[], b: i32[]) { let i = grid(1); if i < len(a) { b[i] = 1; } else { b[0] = 2; } }\n",
        "@kernel fn k(a: i32[], b: i32[]) { let i = grid(1); if i < len(a) { b[i] = 1; } if i == 0 { b[0] = 3; } }\n",
        /* a bound the body assigns */
        "@kernel fn k(a: i32[], b: i32[], n: i64) { let i = grid(1); n = n - 1; if i < n { b[i] = 1; } }\n",
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        ck_assert_msg(!form_of(refused[i], "k").ok, "taken: %s", refused[i]);
}
END_TEST

/* ------------------------------------------------------------- launches */

static const char *const source =
    "@kernel\n"
    "fn inc1(a: i32[], b: i32[]) {\n"
    "    let i = grid(1);\n"
    "    if i < len(a) { b[i] = a[i] + 1; }\n"
    "}\n"
    "@kernel\n"
    "fn le1(a: i32[], b: i32[], n: i64) {\n"
    "    let i = grid(1);\n"
    "    if n >= i { b[i] = a[i] * 3; }\n"
    "}\n"
    "@kernel\n"
    "fn inc2(a: i32[,], b: i32[,]) {\n"
    "    let j, i = grid(2);\n"
    "    if i < a.shape[0] && j < a.shape[1] { b[i, j] = a[i, j] + 1; }\n"
    "}\n"
    "@kernel\n"
    "fn cols2(a: f64[,], b: f64[,], m: i32) {\n"
    "    let j, i = grid(2);\n"
    "    if i < len(a) && j < m && j < 50 { b[i, j] = a[i, j] * 0.5 + f64(j); }\n"
    "}\n"
    "@kernel\n"
    "fn inc3(a: i32[,,], b: i32[,,]) {\n"
    "    let x, y, z = grid(3);\n"
    "    if z < a.shape[0] && y < a.shape[1] && x < a.shape[2] { b[z, y, x] = a[z, y, x] - i32(z); }\n"
    "}\n";

enum { GUARD = 64 }; /* sentinel elements on each side */

typedef struct Launcher {
    kjit_context *context;
    kjit_module *module;
} Launcher;

/* KJIT_CPU_ROWS_CUT for the launchers opened (NULL: the default), which
 * the runtime reads when the code is loaded: the source then gains a kernel
 * named after it, so that its code is its own, not one loaded before. */
static const char *cut_setting;

static Launcher open_launcher(kjit_target target)
{
    Launcher l;
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = 3;
    ck_assert_int_eq(kjit_context_create(&options, &l.context), KJIT_OK);
    char text[8192];
    if (cut_setting) {
        setenv("KJIT_CPU_ROWS_CUT", cut_setting, 1);
        snprintf(text, sizeof text, "%s\n@kernel fn cut_%s(a: i32[]) { let i = grid(1); if i < len(a) { a[i] = %s; } }\n",
                 source, cut_setting, cut_setting);
    } else {
        snprintf(text, sizeof text, "%s", source);
    }
    ck_assert_msg(kjit_compile_string(l.context, "rows.kern", text, &l.module) == KJIT_OK, "%s",
                  kjit_last_error(l.context));
    return l;
}

static void close_launcher(Launcher *l)
{
    kjit_module_free(l->module);
    kjit_context_destroy(l->context);
    unsetenv("KJIT_CPU_ROWS_CUT");
}

static void launch(Launcher *l, const char *name, const uint32_t grid[3], const uint32_t block[3], kjit_arg *args,
                   int nargs)
{
    kjit_function *f;
    ck_assert_int_eq(kjit_module_function(l->module, name, &f), KJIT_OK);
    ck_assert_msg(kjit_launch(f, grid, block, args, nargs, NULL) == KJIT_OK, "%s", kjit_last_error(l->context));
}

static uint32_t blocks_for(int64_t n, uint32_t block) { return (uint32_t)((n + block - 1) / block); }

/* 1-D: lengths around the lanes and the grain, the output at each 4-byte
 * offset into a line, grids of 1 to 3 spare blocks. */
static void one_dimension(kjit_target target)
{
    Launcher l = open_launcher(target);
    static const int64_t lengths[] = {1, 15, 16, 17, 63, 64, 65, 100, 1000, 2 * 2048 + 37, 70001};
    const int64_t most = 70001 + 2 * GUARD + 16;
    int32_t *a = aligned_alloc(64, sizeof(int32_t) * (size_t)most), *b = aligned_alloc(64, sizeof(int32_t) * (size_t)most);
    for (int64_t i = 0; i < most; i++)
        a[i] = (int32_t)(i * 2654435761u);
    for (size_t k = 0; k < sizeof lengths / sizeof *lengths; k++)
        for (int offset = 0; offset < 16; offset += (lengths[k] > 1000 ? 5 : 1)) {
            int64_t n = lengths[k];
            int32_t *out = b + GUARD + offset;
            for (int64_t i = 0; i < most; i++)
                b[i] = -7;
            kjit_array A = kjit_array_make(a + 3, KJIT_I32, 1, &n), B = kjit_array_make(out, KJIT_I32, 1, &n);
            kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
            uint32_t block[3] = {offset % 2 ? 96 : 256, 1, 1};
            uint32_t grid[3] = {blocks_for(n, block[0]) + (uint32_t)(offset % 3), 1, 1};
            launch(&l, "inc1", grid, block, args, 2);
            for (int64_t i = 0; i < most; i++) {
                int64_t at = i - GUARD - offset;
                int32_t want = at >= 0 && at < n ? (int32_t)((uint32_t)a[at + 3] + 1u) : -7;
                if (!(b[i] == want))
                    ck_abort_msg("inc1 n %lld offset %d: b[%lld] is %d, want %d", (long long)n, offset,
                              (long long)at, b[i], want);
            }
            /* n >= i: one more element than n, from a parameter */
            int64_t m = n + 1, bound = n - 1 - offset % 2;
            kjit_array A2 = kjit_array_make(a, KJIT_I32, 1, &m), B2 = kjit_array_make(out, KJIT_I32, 1, &m);
            kjit_arg args2[3] = {kjit_arg_array(&A2), kjit_arg_array(&B2), kjit_arg_i64(bound)};
            for (int64_t i = 0; i < most; i++)
                b[i] = -7;
            launch(&l, "le1", grid, block, args2, 3);
            for (int64_t i = 0; i < most; i++) {
                int64_t at = i - GUARD - offset;
                int32_t want = at >= 0 && at <= bound && at < (int64_t)grid[0] * block[0]
                                   ? (int32_t)((uint32_t)a[at] * 3u) : -7;
                if (!(b[i] == want))
                    ck_abort_msg("le1 n %lld offset %d: b[%lld] is %d, want %d", (long long)n, offset,
                              (long long)at, b[i], want);
            }
        }
    free(a);
    free(b);
    close_launcher(&l);
}

START_TEST(one_dimension_cpu) { one_dimension(KJIT_TARGET_CPU); }
END_TEST

START_TEST(one_dimension_parallel) { one_dimension(KJIT_TARGET_PARALLEL); }
END_TEST

/* 2-D and 3-D: row lengths that move each row's start against the lines,
 * grids past the arrays on every axis, a bound from a parameter and a
 * constant below the array's width. */
static void more_dimensions(kjit_target target)
{
    Launcher l = open_launcher(target);
    static const int64_t shapes[][2] = {{1, 1}, {3, 17}, {9, 33}, {100, 1000}, {7, 250}, {33, 5}};
    const int64_t most = 100 * 1000 + 2 * GUARD + 16;
    int32_t *a = aligned_alloc(64, sizeof(int32_t) * (size_t)most), *b = aligned_alloc(64, sizeof(int32_t) * (size_t)most);
    double *x = aligned_alloc(64, sizeof(double) * (size_t)most), *y = aligned_alloc(64, sizeof(double) * (size_t)most);
    for (int64_t i = 0; i < most; i++)
        a[i] = (int32_t)(i * 2654435761u), x[i] = (double)(i % 1013) * 0.25;
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++)
        for (int offset = 0; offset < 16; offset += 3) {
            int64_t rows = shapes[k][0], cols = shapes[k][1], n = rows * cols;
            int32_t *out = b + GUARD + offset;
            for (int64_t i = 0; i < most; i++)
                b[i] = -7;
            kjit_array A = kjit_array_make(a + 1, KJIT_I32, 2, shapes[k]), B = kjit_array_make(out, KJIT_I32, 2, shapes[k]);
            kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
            uint32_t block[3] = {32, 8, 1};
            uint32_t grid[3] = {blocks_for(cols, 32) + (uint32_t)(offset % 2), blocks_for(rows, 8) + 1, 1};
            launch(&l, "inc2", grid, block, args, 2);
            for (int64_t i = 0; i < most; i++) {
                int64_t at = i - GUARD - offset;
                int32_t want = at >= 0 && at < n ? (int32_t)((uint32_t)a[at + 1] + 1u) : -7;
                if (!(b[i] == want))
                    ck_abort_msg("inc2 %lldx%lld offset %d: b[%lld] is %d, want %d", (long long)rows,
                              (long long)cols, offset, (long long)at, b[i], want);
            }
            /* cols2: j below m and below 50 */
            double *yout = y + GUARD + offset;
            for (int64_t i = 0; i < most; i++)
                y[i] = -7.0;
            int32_t m = (int32_t)(cols - offset % 3);
            kjit_array X = kjit_array_make(x, KJIT_F64, 2, shapes[k]), Y = kjit_array_make(yout, KJIT_F64, 2, shapes[k]);
            kjit_arg args2[3] = {kjit_arg_array(&X), kjit_arg_array(&Y), kjit_arg_i32(m)};
            launch(&l, "cols2", grid, block, args2, 3);
            for (int64_t i = 0; i < most; i++) {
                int64_t at = i - GUARD - offset, r = at >= 0 ? at / cols : -1, c = at >= 0 ? at % cols : -1;
                double want = at >= 0 && at < n && c < m && c < 50 ? x[at] * 0.5 + (double)c : -7.0;
                if (!(y[i] == want))
                    ck_abort_msg("cols2 %lldx%lld m %d: y[%lld, %lld] is %g, want %g", (long long)rows,
                              (long long)cols, m, (long long)r, (long long)c, y[i], want);
            }
            /* 3-D: the same elements as rows x 1 x cols, z the outer axis */
            int64_t shape3[3] = {rows, 2, (cols + 1) / 2};
            int64_t n3 = shape3[0] * shape3[1] * shape3[2];
            for (int64_t i = 0; i < most; i++)
                b[i] = -7;
            kjit_array A3 = kjit_array_make(a, KJIT_I32, 3, shape3), B3 = kjit_array_make(out, KJIT_I32, 3, shape3);
            kjit_arg args3[2] = {kjit_arg_array(&A3), kjit_arg_array(&B3)};
            uint32_t block3[3] = {16, 2, 2};
            uint32_t grid3[3] = {blocks_for(shape3[2], 16) + 1, 1 + (uint32_t)(offset % 2), blocks_for(rows, 2)};
            launch(&l, "inc3", grid3, block3, args3, 2);
            for (int64_t i = 0; i < most; i++) {
                int64_t at = i - GUARD - offset, z = at >= 0 ? at / (shape3[1] * shape3[2]) : 0;
                int32_t want = at >= 0 && at < n3 ? (int32_t)((uint32_t)a[at] - (uint32_t)z) : -7;
                if (!(b[i] == want))
                    ck_abort_msg("inc3 %lldx2x%lld offset %d: b[%lld] is %d, want %d", (long long)rows,
                              (long long)shape3[2], offset, (long long)at, b[i], want);
            }
        }
    free(a);
    free(b);
    free(x);
    free(y);
    close_launcher(&l);
}

START_TEST(more_dimensions_cpu) { more_dimensions(KJIT_TARGET_CPU); }
END_TEST

START_TEST(more_dimensions_parallel) { more_dimensions(KJIT_TARGET_PARALLEL); }
END_TEST

/* The pool's other cuts of the rows (KjRowsCut: by elements as a
 * @vectorize's, and in whole rows) give the same elements. */
START_TEST(each_cut_parallel)
{
    static const char *const cuts[] = {"1", "2"};
    for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
        cut_setting = cuts[c];
        one_dimension(KJIT_TARGET_PARALLEL);
        more_dimensions(KJIT_TARGET_PARALLEL);
    }
    cut_setting = NULL;
}
END_TEST

/* Code generation and cache lookups a launch caused. */
static uint64_t work_done(void)
{
    kjit_cache_counters c = kjit_cache_stats();
    return c.compiles + c.memory_hits + c.disk_hits + c.disk_misses + c.shared_hits;
}

/* A kernel of the form runs its general code's __xrange at any block shape
 * (no code for the shape: nothing compiled or looked up); one that is not
 * (a guard on a loaded value) compiles code for each new shape. */
START_TEST(rows_need_no_shape_code)
{
    static const char *const text =
        "@kernel fn rows(a: f32[], b: f32[]) { let i = grid(1); if i < len(a) { b[i] = a[i] * 2.0; } }\n"
        "@kernel fn blocks(a: f32[], b: f32[]) { let i = grid(1); if a[0] > -1.0 && i < len(a) { b[i] = a[i]; } }\n";
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CPU;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    kjit_module *module;
    ck_assert_msg(kjit_compile_string(context, "shapes.kern", text, &module) == KJIT_OK, "%s",
                  kjit_last_error(context));
    float a[300], b[300];
    for (int i = 0; i < 300; i++)
        a[i] = (float)i;
    int64_t n = 300;
    kjit_array A = kjit_array_make(a, KJIT_F32, 1, &n), B = kjit_array_make(b, KJIT_F32, 1, &n);
    kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
    static const char *const names[2] = {"rows", "blocks"};
    for (int k = 0; k < 2; k++) {
        kjit_function *f;
        ck_assert_int_eq(kjit_module_function(module, names[k], &f), KJIT_OK);
        uint32_t grid[3] = {10, 1, 1}, block[3] = {32, 1, 1};
        ck_assert_int_eq(kjit_launch(f, grid, block, args, 2, NULL), KJIT_OK); /* its general code */
        for (uint32_t shape = 33; shape < 36; shape++) {
            uint64_t before = work_done();
            uint32_t block2[3] = {shape, 1, 1}, grid2[3] = {blocks_for(n, shape), 1, 1};
            memset(b, 0, sizeof b);
            ck_assert_int_eq(kjit_launch(f, grid2, block2, args, 2, NULL), KJIT_OK);
            for (int i = 0; i < 300; i++)
                ck_assert(b[i] == (k == 0 ? 2.0f : 1.0f) * a[i]);
            if (k == 0)
                ck_assert_msg(work_done() == before, "rows: a block of %u compiled or looked up code", shape);
            else
                ck_assert_msg(work_done() > before, "blocks: a block of %u ran no code of its own", shape);
        }
    }
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

Suite *suite_grid_rows(void)
{
    Suite *s = suite_create("grid_rows");
    TCase *form = tcase_create("form");
    tcase_add_test(form, form_elementwise);
    tcase_add_test(form, form_refused);
    suite_add_tcase(s, form);
    TCase *runs = tcase_create("launches");
    tcase_set_timeout(runs, 120);
    tcase_add_test(runs, one_dimension_cpu);
    tcase_add_test(runs, one_dimension_parallel);
    tcase_add_test(runs, more_dimensions_cpu);
    tcase_add_test(runs, more_dimensions_parallel);
    tcase_add_test(runs, each_cut_parallel);
    tcase_add_test(runs, rows_need_no_shape_code);
    suite_add_tcase(s, runs);
    return s;
}
