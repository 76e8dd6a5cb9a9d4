/*
 * test_overlap.c: outputs that overlap inputs, through kjit_call, give what
 * NumPy gives (which reads such inputs from a copy): a[::-1] + a into a, a
 * shifted view into the array it was cut from, on cpu and on parallel with
 * enough elements for the pool, and a @guvectorize whose output is its
 * input; the very same view as input and output, which is safe elementwise
 * and needs no copy, still gives the right answer.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kjit.h"
#include "fixture.h"

static const char source[] =
    "@vectorize\n"
    "fn add(a: f64, b: f64) -> f64 { return a + b; }\n"
    "@guvectorize(\"(n),()->(n)\")\n"
    "fn moving_average(x: f64[], w: i64, out: f64[]) {\n"
    "    let s = 0.0;\n"
    "    for i in range(len(x)) {\n"
    "        s += x[i];\n"
    "        if i >= w { s -= x[i - w]; }\n"
    "        out[i] = s / f64(min(i + 1, w));\n"
    "    }\n"
    "}\n";

static void reversed_into_itself(kjit_target target, int64_t n)
{
    Fixture f = fixture_open(target, "overlap.kern", source);
    double *a = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        a[i] = (double)(i + 1);
    kjit_array A = kjit_array_make(a, KJIT_F64, 1, &n);
    kjit_array R = A; /* a[::-1] */
    R.data = a + n - 1;
    R.strides[0] = -(int64_t)sizeof(double);
    kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&R)};
    ck_assert_int_eq(kjit_call(fixture_fn(&f, "add"), args, 2, &A, NULL), KJIT_OK);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(a[i] == (double)(n + 1), "%s: a[%lld] = %g, not %g",
                      kjit_target_name(target), (long long)i, a[i], (double)(n + 1));
    free(a);
    fixture_close(&f);
}

START_TEST(reversed_view_into_its_array)
{
    reversed_into_itself(KJIT_TARGET_CPU, 8);
    reversed_into_itself(KJIT_TARGET_CPU, 1001);
    reversed_into_itself(KJIT_TARGET_PARALLEL, 200001);
}
END_TEST

START_TEST(shifted_view_and_same_view)
{
    Fixture f = fixture_open(KJIT_TARGET_CPU, "overlap.kern", source);
    kjit_function *add = fixture_fn(&f, "add");
    enum { N = 100 };
    double a[N + 1];
    for (int i = 0; i <= N; i++)
        a[i] = i;
    /* out = a[1:], inputs a[:-1] and 1: out[i] = a[i] + 1 from the a before */
    int64_t n = N;
    kjit_array head = kjit_array_make(a, KJIT_F64, 1, &n);
    kjit_array tail = kjit_array_make(a + 1, KJIT_F64, 1, &n);
    kjit_arg args[2] = {kjit_arg_array(&head), kjit_arg_f64(1)};
    ck_assert_int_eq(kjit_call(add, args, 2, &tail, NULL), KJIT_OK);
    ck_assert(a[0] == 0);
    for (int i = 1; i <= N; i++)
        ck_assert_msg(a[i] == i, "a[%d] = %g", i, a[i]);
    /* a into a (the same view twice): 2a */
    kjit_arg same[2] = {kjit_arg_array(&head), kjit_arg_array(&head)};
    ck_assert_int_eq(kjit_call(add, same, 2, &head, NULL), KJIT_OK);
    for (int i = 0; i < N; i++)
        ck_assert_msg(a[i] == 2.0 * i, "a[%d] = %g after a + a", i, a[i]);
    /* a row repeated (stride 0) over a 2-D output that holds it as its
     * first row: out[i, j] = row[j] + 1 of the row as it was */
    double m[4][5];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++)
            m[i][j] = 10 * i + j;
    int64_t shape[2] = {4, 5};
    kjit_array M = kjit_array_make(m, KJIT_F64, 2, shape);
    kjit_array rows = M;
    rows.strides[0] = 0;
    kjit_arg repeated[2] = {kjit_arg_array(&rows), kjit_arg_f64(1)};
    ck_assert_int_eq(kjit_call(add, repeated, 2, &M, NULL), KJIT_OK);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++)
            ck_assert_msg(m[i][j] == j + 1, "m[%d][%d] = %g", i, j, m[i][j]);
    fixture_close(&f);
}
END_TEST

START_TEST(gufunc_output_is_its_input)
{
    kjit_target targets[2] = {KJIT_TARGET_CPU, KJIT_TARGET_PARALLEL};
    for (int t = 0; t < 2; t++) {
        Fixture f = fixture_open(targets[t], "overlap.kern", source);
        enum { ROWS = 3, N = 9 };
        double x[ROWS][N], expect[ROWS][N];
        for (int r = 0; r < ROWS; r++)
            for (int i = 0; i < N; i++)
                x[r][i] = (r + 1) * (i * i % 7);
        for (int r = 0; r < ROWS; r++) {
            double s = 0;
            for (int i = 0; i < N; i++) {
                s += x[r][i];
                if (i >= 2)
                    s -= x[r][i - 2];
                expect[r][i] = s / (i + 1 < 2 ? i + 1 : 2);
            }
        }
        int64_t shape[2] = {ROWS, N};
        kjit_array X = kjit_array_make(x, KJIT_F64, 2, shape);
        kjit_arg args[3] = {kjit_arg_array(&X), kjit_arg_i64(2), kjit_arg_array(&X)};
        ck_assert_int_eq(kjit_call(fixture_fn(&f, "moving_average"), args, 3, NULL, NULL),
                         KJIT_OK);
        for (int r = 0; r < ROWS; r++)
            for (int i = 0; i < N; i++)
                ck_assert_msg(x[r][i] == expect[r][i], "%s: x[%d][%d] = %g, not %g",
                              kjit_target_name(targets[t]), r, i, x[r][i], expect[r][i]);
        fixture_close(&f);
    }
}
END_TEST

Suite *suite_overlap(void)
{
    Suite *s = suite_create("overlap");
    TCase *tc = tcase_create("overlap");
    tcase_add_test(tc, reversed_view_into_its_array);
    tcase_add_test(tc, shifted_view_and_same_view);
    tcase_add_test(tc, gufunc_output_is_its_input);
    suite_add_tcase(s, tc);
    return s;
}
