/* test_grid_rows.c: kernels that the cpu targets run as rows of their grid
 * (compiler/grid_rows.c, target_cpu.c's __xrange, runtime/cpu.c's
 * kj_cpu_run_rows; issue 25 item 5).
 *
 * - which kernels take the form (kj_grid_rows): grid() sums only, a guard of
 *   sums below extents, integer parameters or constants, the output whose
 *   lines a row is cut on; and which do not (threadIdx or blockDim read
 *   outside a sum, shared memory, atomics, an `if` that is no such guard,
 *   a bound the body assigns);
 * - the guard's bounds as the rows' limits at int64's edges (held, not
 *   wrapped), and a launch whose bound is INT64_MAX;
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
#include "kjit_runtime.h"
#include "kjit_tools.h"
#include "fixture.h"
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

/* Bound i of r: grid axis, array or integer parameter (-1: a constant), the
 * array's dim (-1: the parameter's value), and the add. */
static void expect_bound(const KjGridRows *r, int i, int axis, int param, int dim, int64_t add)
{
    const KjGridRowsBound *b = &r->bounds[i];
    ck_assert_msg(b->axis == axis && b->param == param && (param < 0 || b->dim == dim) &&
                      b->add == add,
                  "bound %d: axis %d param %d dim %d add %lld; want %d %d %d %lld", i, b->axis,
                  b->param, b->dim, (long long)b->add, axis, param, dim, (long long)add);
}

START_TEST(form_elementwise)
{
    KjGridRows r = form_of("@kernel fn k(a: i32[], b: i32[]) {\n"
                           "    let i = grid(1);\n"
                           "    if i < len(a) { b[i] = a[i] + 1; }\n"
                           "}\n", "k");
    ck_assert(r.ok);
    ck_assert_int_eq(r.bound_count, 1);
    expect_bound(&r, 0, 0, 0, 0, 0);
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
    expect_bound(&r, 0, 1, 0, 0, 0);
    expect_bound(&r, 1, 0, 2, -1, 1);
    ck_assert_int_eq(r.bounds[1].dim_bytes, 4);
    expect_bound(&r, 2, 0, -1, 0, 8);
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

/* The guard's bounds as the rows' limits (kj_grid_rows_limits) where value
 * plus add passes an edge of int64: held there, not wrapped (a bound past
 * INT64_MAX lets every thread run, one below INT64_MIN none).  The form is
 * made by hand: the compiler's adds are 0 or 1 on a parameter. */
START_TEST(limits_at_the_edges)
{
    int64_t top = INT64_MAX, near_top = INT64_MAX - 10, near_bottom = INT64_MIN + 1;
    int32_t top32 = INT32_MAX;
    int64_t n = 1000;
    KjArrayDesc array = {.shape = {n}};
    void *args[] = {&top, &near_top, &array, &top32, &near_bottom};
    KjGridRows form = {.ok = true, .bound_count = 6, .bounds = {
        {.axis = 0, .param = 0, .dim = -1, .dim_bytes = 8, .add = 1},
        {.axis = 0, .param = 1, .dim = -1, .dim_bytes = 8, .add = 64},
        {.axis = 1, .param = 2, .dim = 0, .add = INT64_MAX},
        {.axis = 1, .param = 1, .dim = -1, .dim_bytes = 8, .add = 5},
        {.axis = 2, .param = 3, .dim = -1, .dim_bytes = 4, .add = 1},
        {.axis = 2, .param = 4, .dim = -1, .dim_bytes = 8, .add = -4},
    }};
    int64_t limit[3];
    kj_grid_rows_limits(&form, args, limit);
    ck_assert_msg(limit[0] == INT64_MAX, "x <= INT64_MAX, x < INT64_MAX - 10 + 64: limit %lld",
                  (long long)limit[0]);
    ck_assert_msg(limit[1] == INT64_MAX - 5, "y: limit %lld; want INT64_MAX - 5", (long long)limit[1]);
    ck_assert_msg(limit[2] == INT64_MIN, "z < INT64_MIN + 1 - 4: limit %lld; want INT64_MIN",
                  (long long)limit[2]);
    form.bound_count = 5;
    kj_grid_rows_limits(&form, args, limit);
    ck_assert_msg(limit[2] == (int64_t)INT32_MAX + 1, "z <= INT32_MAX: limit %lld", (long long)limit[2]);
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

/* KJIT_CPU_ROWS_CUT for the fixtures open_rows opens (NULL: the default),
 * which the runtime reads when the code is loaded: the source then gains a
 * kernel named after it, so that its code is its own, not one loaded
 * before. */
static const char *cut_setting;

static Fixture open_rows(kjit_target target)
{
    if (!cut_setting)
        return fixture_open(target, "rows.kern", source);
    char text[8192];
    setenv("KJIT_CPU_ROWS_CUT", cut_setting, 1);
    snprintf(text, sizeof text, "%s\n@kernel fn cut_%s(a: i32[]) { let i = grid(1); if i < len(a) { a[i] = %s; } }\n",
             source, cut_setting, cut_setting);
    return fixture_open(target, "rows.kern", text);
}

static void close_rows(Fixture *f)
{
    fixture_close(f);
    unsetenv("KJIT_CPU_ROWS_CUT");
}

enum { GUARD = 64 }; /* sentinel elements on each side */

/* An output buffer of count elements of dtype (i32 or f64), each -7 before a
 * launch; want: what each must hold after it (-7 around the output). */
typedef struct Output {
    void *buffer;
    void *want;
    kjit_dtype dtype;
    int64_t count;
} Output;

static Output output_make(kjit_dtype dtype, int64_t count)
{
    size_t size = dtype == KJIT_F64 ? sizeof(double) : sizeof(int32_t);
    Output o = {aligned_alloc(64, size * (size_t)count), aligned_alloc(64, size * (size_t)count), dtype,
                count};
    return o;
}

static void output_free(Output *o)
{
    free(o->buffer);
    free(o->want);
}

/* Sets every element of o's buffer to the sentinel, launches kernel name of
 * f, and compares every element with o's want bit for bit; what names the
 * case, first is where the kernel's output starts in the buffer. */
static void launch_and_compare(Fixture *f, const char *name, const uint32_t grid[3],
                               const uint32_t block[3], kjit_arg *args, int nargs, Output *o,
                               int64_t first, const char *what)
{
    bool f64 = o->dtype == KJIT_F64;
    for (int64_t i = 0; i < o->count; i++) {
        if (f64)
            ((double *)o->buffer)[i] = -7.0;
        else
            ((int32_t *)o->buffer)[i] = -7;
    }
    ck_assert_msg(kjit_launch(fixture_fn(f, name), grid, block, args, nargs, NULL) == KJIT_OK, "%s: %s",
                  what, kjit_last_error(f->context));
    size_t size = f64 ? sizeof(double) : sizeof(int32_t);
    for (int64_t i = 0; i < o->count; i++) {
        const char *got = (const char *)o->buffer + size * (size_t)i;
        const char *want = (const char *)o->want + size * (size_t)i;
        if (memcmp(got, want, size) == 0)
            continue;
        if (f64)
            ck_abort_msg("%s %s: element %lld is %.17g, want %.17g", name, what, (long long)(i - first),
                         *(const double *)got, *(const double *)want);
        ck_abort_msg("%s %s: element %lld is %d, want %d", name, what, (long long)(i - first),
                     *(const int32_t *)got, *(const int32_t *)want);
    }
}

static uint32_t blocks_for(int64_t n, uint32_t block) { return (uint32_t)((n + block - 1) / block); }

/* 1-D: lengths around the lanes and the grain, the output at each 4-byte
 * offset into a line, grids of 1 to 3 spare blocks. */
static void one_dimension(kjit_target target)
{
    Fixture f = open_rows(target);
    static const int64_t lengths[] = {1, 15, 16, 17, 63, 64, 65, 100, 1000, 2 * 2048 + 37, 70001};
    const int64_t most = 70001 + 2 * GUARD + 16;
    int32_t *a = aligned_alloc(64, sizeof(int32_t) * (size_t)most);
    Output b = output_make(KJIT_I32, most);
    int32_t *want = b.want;
    for (int64_t i = 0; i < most; i++)
        a[i] = (int32_t)(i * 2654435761u);
    for (size_t k = 0; k < sizeof lengths / sizeof *lengths; k++)
        for (int offset = 0; offset < 16; offset += (lengths[k] > 1000 ? 5 : 1)) {
            int64_t n = lengths[k], first = GUARD + offset;
            int32_t *out = (int32_t *)b.buffer + first;
            char what[64];
            snprintf(what, sizeof what, "n %lld offset %d", (long long)n, offset);
            kjit_array A = kjit_array_make(a + 3, KJIT_I32, 1, &n), B = kjit_array_make(out, KJIT_I32, 1, &n);
            kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
            uint32_t block[3] = {offset % 2 ? 96 : 256, 1, 1};
            uint32_t grid[3] = {blocks_for(n, block[0]) + (uint32_t)(offset % 3), 1, 1};
            for (int64_t i = 0; i < most; i++) {
                int64_t at = i - first;
                want[i] = at >= 0 && at < n ? (int32_t)((uint32_t)a[at + 3] + 1u) : -7;
            }
            launch_and_compare(&f, "inc1", grid, block, args, 2, &b, first, what);
            /* n >= i: one more element than n, from a parameter */
            int64_t m = n + 1, bound = n - 1 - offset % 2;
            kjit_array A2 = kjit_array_make(a, KJIT_I32, 1, &m), B2 = kjit_array_make(out, KJIT_I32, 1, &m);
            kjit_arg args2[3] = {kjit_arg_array(&A2), kjit_arg_array(&B2), kjit_arg_i64(bound)};
            for (int64_t i = 0; i < most; i++) {
                int64_t at = i - first;
                want[i] = at >= 0 && at <= bound && at < (int64_t)grid[0] * block[0]
                              ? (int32_t)((uint32_t)a[at] * 3u) : -7;
            }
            launch_and_compare(&f, "le1", grid, block, args2, 3, &b, first, what);
        }
    free(a);
    output_free(&b);
    close_rows(&f);
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
    Fixture f = open_rows(target);
    static const int64_t shapes[][2] = {{1, 1}, {3, 17}, {9, 33}, {100, 1000}, {7, 250}, {33, 5}};
    const int64_t most = 100 * 1000 + 2 * GUARD + 16;
    int32_t *a = aligned_alloc(64, sizeof(int32_t) * (size_t)most);
    double *x = aligned_alloc(64, sizeof(double) * (size_t)most);
    Output b = output_make(KJIT_I32, most), y = output_make(KJIT_F64, most);
    int32_t *want = b.want;
    double *ywant = y.want;
    for (int64_t i = 0; i < most; i++)
        a[i] = (int32_t)(i * 2654435761u), x[i] = (double)(i % 1013) * 0.25;
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++)
        for (int offset = 0; offset < 16; offset += 3) {
            int64_t rows = shapes[k][0], cols = shapes[k][1], n = rows * cols, first = GUARD + offset;
            char what[64];
            snprintf(what, sizeof what, "%lldx%lld offset %d", (long long)rows, (long long)cols, offset);
            kjit_array A = kjit_array_make(a + 1, KJIT_I32, 2, shapes[k]),
                       B = kjit_array_make((int32_t *)b.buffer + first, KJIT_I32, 2, shapes[k]);
            kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
            uint32_t block[3] = {32, 8, 1};
            uint32_t grid[3] = {blocks_for(cols, 32) + (uint32_t)(offset % 2), blocks_for(rows, 8) + 1, 1};
            for (int64_t i = 0; i < most; i++) {
                int64_t at = i - first;
                want[i] = at >= 0 && at < n ? (int32_t)((uint32_t)a[at + 1] + 1u) : -7;
            }
            launch_and_compare(&f, "inc2", grid, block, args, 2, &b, first, what);
            /* cols2: j below m and below 50 */
            int32_t m = (int32_t)(cols - offset % 3);
            kjit_array X = kjit_array_make(x, KJIT_F64, 2, shapes[k]),
                       Y = kjit_array_make((double *)y.buffer + first, KJIT_F64, 2, shapes[k]);
            kjit_arg args2[3] = {kjit_arg_array(&X), kjit_arg_array(&Y), kjit_arg_i32(m)};
            for (int64_t i = 0; i < most; i++) {
                int64_t at = i - first, c = at >= 0 ? at % cols : -1;
                ywant[i] = at >= 0 && at < n && c < m && c < 50 ? x[at] * 0.5 + (double)c : -7.0;
            }
            snprintf(what, sizeof what, "%lldx%lld m %d", (long long)rows, (long long)cols, m);
            launch_and_compare(&f, "cols2", grid, block, args2, 3, &y, first, what);
            /* 3-D: the same elements as rows x 2 x cols/2, z the outer axis */
            int64_t shape3[3] = {rows, 2, (cols + 1) / 2};
            int64_t n3 = shape3[0] * shape3[1] * shape3[2];
            kjit_array A3 = kjit_array_make(a, KJIT_I32, 3, shape3),
                       B3 = kjit_array_make((int32_t *)b.buffer + first, KJIT_I32, 3, shape3);
            kjit_arg args3[2] = {kjit_arg_array(&A3), kjit_arg_array(&B3)};
            uint32_t block3[3] = {16, 2, 2};
            uint32_t grid3[3] = {blocks_for(shape3[2], 16) + 1, 1 + (uint32_t)(offset % 2), blocks_for(rows, 2)};
            for (int64_t i = 0; i < most; i++) {
                int64_t at = i - first, z = at >= 0 ? at / (shape3[1] * shape3[2]) : 0;
                want[i] = at >= 0 && at < n3 ? (int32_t)((uint32_t)a[at] - (uint32_t)z) : -7;
            }
            snprintf(what, sizeof what, "%lldx2x%lld offset %d", (long long)rows, (long long)shape3[2],
                     offset);
            launch_and_compare(&f, "inc3", grid3, block3, args3, 2, &b, first, what);
        }
    free(a);
    free(x);
    output_free(&b);
    output_free(&y);
    close_rows(&f);
}

START_TEST(more_dimensions_cpu) { more_dimensions(KJIT_TARGET_CPU); }
END_TEST

START_TEST(more_dimensions_parallel) { more_dimensions(KJIT_TARGET_PARALLEL); }
END_TEST

/* le1's bound n at INT64_MAX and just below: n >= i holds for every thread
 * (the rows' limit held at INT64_MAX, not wrapped below zero). */
START_TEST(bound_at_int64_max)
{
    Fixture f = fixture_open(KJIT_TARGET_CPU, "rows.kern", source);
    int64_t n = 128;
    int32_t a[128];
    Output b = output_make(KJIT_I32, n);
    for (int i = 0; i < 128; i++)
        a[i] = i, ((int32_t *)b.want)[i] = 3 * i;
    kjit_array A = kjit_array_make(a, KJIT_I32, 1, &n), B = kjit_array_make(b.buffer, KJIT_I32, 1, &n);
    static const int64_t bounds[] = {INT64_MAX, INT64_MAX - 1};
    for (int k = 0; k < 2; k++) {
        kjit_arg args[3] = {kjit_arg_array(&A), kjit_arg_array(&B), kjit_arg_i64(bounds[k])};
        uint32_t grid[3] = {2, 1, 1}, block[3] = {64, 1, 1};
        launch_and_compare(&f, "le1", grid, block, args, 3, &b, 0, k ? "n INT64_MAX - 1" : "n INT64_MAX");
    }
    output_free(&b);
    fixture_close(&f);
}
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
    Fixture fixture = fixture_open(KJIT_TARGET_CPU, "shapes.kern", text);
    float a[300], b[300];
    for (int i = 0; i < 300; i++)
        a[i] = (float)i;
    int64_t n = 300;
    kjit_array A = kjit_array_make(a, KJIT_F32, 1, &n), B = kjit_array_make(b, KJIT_F32, 1, &n);
    kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
    static const char *const names[2] = {"rows", "blocks"};
    for (int k = 0; k < 2; k++) {
        kjit_function *f = fixture_fn(&fixture, names[k]);
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
    fixture_close(&fixture);
}
END_TEST

Suite *suite_grid_rows(void)
{
    Suite *s = suite_create("grid_rows");
    TCase *form = tcase_create("form");
    tcase_add_test(form, form_elementwise);
    tcase_add_test(form, form_refused);
    tcase_add_test(form, limits_at_the_edges);
    suite_add_tcase(s, form);
    TCase *runs = tcase_create("launches");
    tcase_set_timeout(runs, 120);
    tcase_add_test(runs, one_dimension_cpu);
    tcase_add_test(runs, one_dimension_parallel);
    tcase_add_test(runs, more_dimensions_cpu);
    tcase_add_test(runs, more_dimensions_parallel);
    tcase_add_test(runs, bound_at_int64_max);
    tcase_add_test(runs, each_cut_parallel);
    tcase_add_test(runs, rows_need_no_shape_code);
    suite_add_tcase(s, runs);
    return s;
}
