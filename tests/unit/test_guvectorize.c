/*
 * test_guvectorize.c: @guvectorize through the public API (kjit_call) on cpu,
 * parallel and, where a GPU is usable, cuda, against float64 references on
 * fresh random inputs: dot products, row norms, a moving average and matmul,
 * with empty loop dimensions, one loop element, none at all (a 0-d result),
 * sizes that are not multiples of anything, broadcast loop dimensions,
 * strided (transposed) operands, given outputs, several outputs, device
 * arrays and a stream on cuda; checked mode in a core function; and the
 * errors, which name the dimension letter and both sizes.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit.h"
#include "fixture.h"
#include "rng.h"

static const char source[] =
    "@guvectorize(f32(f32[], f32[], f32[]), f64(f64[], f64[], f64[]), \"(n),(n)->()\")\n"
    "fn dot(a, b, out) {\n"
    "    out[0] = 0.0;\n"
    "    for i in range(len(a)) { out[0] += a[i] * b[i]; }\n"
    "}\n"
    "@guvectorize(\"(n)->()\")\n"
    "fn row_norm(x: f64[], out: f64[]) {\n"
    "    let s = 0.0;\n"
    "    for i in range(len(x)) { s += x[i] * x[i]; }\n"
    "    out[0] = sqrt(s);\n"
    "}\n"
    "@guvectorize(\"(n),()->(n)\")\n"
    "fn moving_average(x: f64[], w: i64, out: f64[]) {\n"
    "    let s = 0.0;\n"
    "    for i in range(len(x)) {\n"
    "        s += x[i];\n"
    "        if i >= w { s -= x[i - w]; }\n"
    "        out[i] = s / f64(min(i + 1, w));\n"
    "    }\n"
    "}\n"
    "@guvectorize(f32(f32[,], f32[,], f32[,]), f64(f64[,], f64[,], f64[,]), "
    "\"(m, n), (n, p) -> (m, p)\")\n"
    "fn matmul(a, b, c) {\n"
    "    for i in range(a.shape[0]) {\n"
    "        for j in range(b.shape[1]) {\n"
    "            c[i, j] = 0.0;\n"
    "            for k in range(a.shape[1]) { c[i, j] += a[i, k] * b[k, j]; }\n"
    "        }\n"
    "    }\n"
    "}\n"
    "@guvectorize(\"(n)->(),()\")\n"
    "fn min_max(x: f64[], lo: f64[], hi: f64[]) {\n"
    "    lo[0] = x[0];\n"
    "    hi[0] = x[0];\n"
    "    for i in range(1, len(x)) { lo[0] = min(lo[0], x[i]); hi[0] = max(hi[0], x[i]); }\n"
    "}\n"
    "@guvectorize(\"(n)->(n)\")\n"
    "fn shifted(x: f64[], out: f64[]) {\n"
    "    for i in range(len(x)) { out[i] = x[i + 1]; }\n"
    "}\n";

static uint64_t rng_state;
static void seed_rng(void) { rng_seed(&rng_state, "test_guvectorize"); }
static double uniform(double lo, double hi) { return rng_uniform(&rng_state, lo, hi); }

/* The targets to run on: cpu, parallel, and cuda when a GPU is usable (the
 * check is made in the forked test, never in the suite's parent). */
static int targets_here(kjit_target *out)
{
    int n = 0;
    out[n++] = KJIT_TARGET_CPU;
    out[n++] = KJIT_TARGET_PARALLEL;
    char reason[512];
    if (kjit_cuda_available(reason, sizeof reason) == KJIT_OK)
        out[n++] = KJIT_TARGET_CUDA;
    else
        printf("test_guvectorize: cuda skipped: no CUDA driver (%s)\n", reason);
    return n;
}

static double *random_f64(int64_t count, double lo, double hi)
{
    double *x = malloc(sizeof *x * (size_t)(count ? count : 1));
    for (int64_t i = 0; i < count; i++)
        x[i] = uniform(lo, hi);
    return x;
}

/* ---------------------------------------------------------------- dot */

/* dot over a of shape (rows..., n) and b of shape (brows..., n), broadcast;
 * the result against a float64 reference within n ulps of sum |a b|. */
static void check_dot(Fixture *f, int andim, const int64_t *ashape, int bndim,
                      const int64_t *bshape)
{
    int64_t asize = 1, bsize = 1;
    for (int d = 0; d < andim; d++)
        asize *= ashape[d];
    for (int d = 0; d < bndim; d++)
        bsize *= bshape[d];
    double *a = random_f64(asize, -1, 1), *b = random_f64(bsize, -1, 1);
    kjit_array A = kjit_array_make(a, KJIT_F64, andim, ashape);
    kjit_array B = kjit_array_make(b, KJIT_F64, bndim, bshape);
    kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
    kjit_array r;
    kjit_status status = kjit_call(fixture_fn(f, "dot"), args, 2, NULL, &r);
    ck_assert_msg(status == KJIT_OK, "dot: %s", kjit_last_error(f->context));
    /* The loop shape: the two loop shapes broadcast. */
    int ln = andim - 1 > bndim - 1 ? andim - 1 : bndim - 1;
    int64_t loop[8];
    for (int k = 0; k < ln; k++) {
        int i = k - (ln - (andim - 1)), j = k - (ln - (bndim - 1));
        int64_t x = i >= 0 ? ashape[i] : 1, y = j >= 0 ? bshape[j] : 1;
        loop[k] = x == 1 ? y : x;
    }
    ck_assert_int_eq(r.ndim, ln);
    int64_t items = 1;
    for (int k = 0; k < ln; k++) {
        ck_assert_int_eq(r.shape[k], loop[k]);
        items *= loop[k];
    }
    int64_t n = ashape[andim - 1];
    const double *got = r.data;
    for (int64_t e = 0; e < items; e++) {
        /* Element e's row in a and in b (stride 0 where broadcast). */
        int64_t rest = e, aoff = 0, boff = 0, astride = n, bstride = n;
        for (int k = ln - 1; k >= 0; k--) {
            int64_t c = rest % loop[k];
            rest /= loop[k];
            int i = k - (ln - (andim - 1)), j = k - (ln - (bndim - 1));
            if (i >= 0) {
                aoff += (ashape[i] == 1 ? 0 : c) * astride;
                astride *= ashape[i];
            }
            if (j >= 0) {
                boff += (bshape[j] == 1 ? 0 : c) * bstride;
                bstride *= bshape[j];
            }
        }
        double want = 0, scale = 0;
        for (int64_t i = 0; i < n; i++) {
            want += a[aoff + i] * b[boff + i];
            scale += fabs(a[aoff + i] * b[boff + i]);
        }
        ck_assert_msg(fabs(got[e] - want) <= (double)(n + 1) * 0x1p-53 * scale,
                      "dot element %lld on %s: %.17g, want %.17g", (long long)e,
                      kjit_target_name(f->target), got[e], want);
    }
    kjit_array_free(&r);
    free(a);
    free(b);
}

START_TEST(dot_against_float64)
{
    seed_rng();
    kjit_target targets[3];
    int count = targets_here(targets);
    for (int t = 0; t < count; t++) {
        Fixture f = fixture_open(targets[t], "gufunc.kern", source);
        int64_t rows = 1000 + (int64_t)uniform(0, 999); /* rarely a multiple of anything */
        int64_t n = 1 + (int64_t)uniform(0, 40);
        check_dot(&f, 2, (int64_t[]){rows, n}, 2, (int64_t[]){rows, n});
        check_dot(&f, 2, (int64_t[]){1, n}, 2, (int64_t[]){1, n});         /* one element */
        check_dot(&f, 2, (int64_t[]){0, n}, 2, (int64_t[]){0, n});         /* empty loop */
        check_dot(&f, 1, (int64_t[]){n}, 1, (int64_t[]){n});               /* no loop: 0-d */
        check_dot(&f, 3, (int64_t[]){7, 1, n}, 2, (int64_t[]){5, n});      /* broadcast */
        check_dot(&f, 2, (int64_t[]){33, n}, 1, (int64_t[]){n});           /* b broadcast */
        check_dot(&f, 2, (int64_t[]){3, 0}, 2, (int64_t[]){3, 0});         /* empty cores */
        check_dot(&f, 4, (int64_t[]){2, 3, 1, n}, 3, (int64_t[]){1, 4, n}); /* 3 loop dims */
        fixture_close(&f);
    }
}
END_TEST

/* ---------------------------------------------- matmul, strided, f32 */

START_TEST(matmul_against_float64)
{
    seed_rng();
    kjit_target targets[3];
    int count = targets_here(targets);
    for (int t = 0; t < count; t++) {
        Fixture f = fixture_open(targets[t], "gufunc.kern", source);
        int64_t L = 3 + (int64_t)uniform(0, 20), M = 1 + (int64_t)uniform(0, 7);
        int64_t N = 1 + (int64_t)uniform(0, 9), P = 1 + (int64_t)uniform(0, 6);
        /* a: (L, M, N) f32; b: (N, P) given as the transpose of a (P, N)
         * array, so that its strides are not C order; the loop broadcasts b. */
        float *a = malloc(sizeof *a * (size_t)(L * M * N));
        float *bt = malloc(sizeof *bt * (size_t)(P * N));
        for (int64_t i = 0; i < L * M * N; i++)
            a[i] = (float)uniform(-1, 1);
        for (int64_t i = 0; i < P * N; i++)
            bt[i] = (float)uniform(-1, 1);
        kjit_array A = kjit_array_make(a, KJIT_F32, 3, (int64_t[]){L, M, N});
        kjit_array B = kjit_array_make(bt, KJIT_F32, 2, (int64_t[]){N, P});
        B.strides[0] = 4;
        B.strides[1] = 4 * N;
        /* A given output, itself strided: every other element of a bigger array. */
        float *big = malloc(sizeof *big * (size_t)(2 * L * M * P));
        for (int64_t i = 0; i < 2 * L * M * P; i++)
            big[i] = -7.0f;
        kjit_array C = kjit_array_make(big, KJIT_F32, 3, (int64_t[]){L, M, P});
        C.strides[2] = 8;
        C.strides[1] = 8 * P;
        C.strides[0] = 8 * P * M;
        kjit_arg args[3] = {kjit_arg_array(&A), kjit_arg_array(&B), kjit_arg_array(&C)};
        kjit_status status = kjit_call(fixture_fn(&f, "matmul"), args, 3, NULL, NULL);
        ck_assert_msg(status == KJIT_OK, "matmul: %s", kjit_last_error(f.context));
        for (int64_t l = 0; l < L; l++)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < P; j++) {
                    double want = 0, scale = 0;
                    for (int64_t k = 0; k < N; k++) {
                        double x = (double)a[(l * M + i) * N + k] * (double)bt[j * N + k];
                        want += x;
                        scale += fabs(x);
                    }
                    float got = big[2 * ((l * M + i) * P + j)];
                    ck_assert_msg(fabs((double)got - want) <= (double)(N + 1) * 0x1p-24 * scale,
                                  "matmul [%lld,%lld,%lld] on %s: %g, want %g", (long long)l,
                                  (long long)i, (long long)j, kjit_target_name(f.target),
                                  (double)got, want);
                    ck_assert(big[2 * ((l * M + i) * P + j) + 1] == -7.0f); /* the gaps */
                }
        free(a);
        free(bt);
        free(big);
        fixture_close(&f);
    }
}
END_TEST

/* ------------------------------ moving average: a () input, a scalar */

START_TEST(moving_average_and_norms)
{
    seed_rng();
    kjit_target targets[3];
    int count = targets_here(targets);
    for (int t = 0; t < count; t++) {
        Fixture f = fixture_open(targets[t], "gufunc.kern", source);
        int64_t rows = 2 + (int64_t)uniform(0, 50), n = 1 + (int64_t)uniform(0, 300);
        double *x = random_f64(rows * n, -10, 10);
        kjit_array X = kjit_array_make(x, KJIT_F64, 2, (int64_t[]){rows, n});
        /* One window for every row (a host scalar), then one per row (an
         * i64 array broadcast against the rows' loop dimension). */
        int64_t windows[64];
        for (int64_t r = 0; r < rows; r++)
            windows[r] = 1 + (int64_t)uniform(0, 9);
        kjit_array W = kjit_array_make(windows, KJIT_I64, 1, (int64_t[]){rows});
        for (int pass = 0; pass < 2; pass++) {
            kjit_arg args[2] = {kjit_arg_array(&X), pass ? kjit_arg_array(&W) : kjit_arg_i64(4)};
            kjit_array r;
            kjit_status status = kjit_call(fixture_fn(&f, "moving_average"), args, 2, NULL, &r);
            ck_assert_msg(status == KJIT_OK, "moving_average: %s", kjit_last_error(f.context));
            ck_assert_int_eq(r.ndim, 2);
            ck_assert_int_eq(r.shape[0], rows);
            ck_assert_int_eq(r.shape[1], n);
            const double *got = r.data;
            for (int64_t row = 0; row < rows; row++) {
                int64_t w = pass ? windows[row] : 4;
                for (int64_t i = 0; i < n; i++) {
                    double s = 0, scale = 0;
                    int64_t from = i - w + 1 < 0 ? 0 : i - w + 1;
                    for (int64_t j = from; j <= i; j++)
                        s += x[row * n + j], scale += fabs(x[row * n + j]);
                    double want = s / (double)(i - from + 1);
                    /* A running sum: i additions and subtractions of error each. */
                    ck_assert_msg(fabs(got[row * n + i] - want) <=
                                      (double)(2 * i + 4) * 0x1p-53 * 10 * (double)n,
                                  "moving_average [%lld,%lld] on %s: %.17g, want %.17g",
                                  (long long)row, (long long)i, kjit_target_name(f.target),
                                  got[row * n + i], want);
                }
            }
            kjit_array_free(&r);
        }
        /* Row norms over a 3-D array: loop shape (d0, d1). */
        int64_t d0 = 1 + (int64_t)uniform(0, 6), d1 = 1 + (int64_t)uniform(0, 6);
        double *y = random_f64(d0 * d1 * n, -3, 3);
        kjit_array Y = kjit_array_make(y, KJIT_F64, 3, (int64_t[]){d0, d1, n});
        kjit_arg arg = kjit_arg_array(&Y);
        kjit_array r;
        ck_assert_msg(kjit_call(fixture_fn(&f, "row_norm"), &arg, 1, NULL, &r) == KJIT_OK, "%s",
                      kjit_last_error(f.context));
        ck_assert_int_eq(r.ndim, 2);
        for (int64_t e = 0; e < d0 * d1; e++) {
            double s = 0;
            for (int64_t i = 0; i < n; i++)
                s += y[e * n + i] * y[e * n + i];
            double want = sqrt(s), got = ((double *)r.data)[e];
            ck_assert_msg(fabs(got - want) <= (double)(n + 2) * 0x1p-53 * want,
                          "row_norm %lld: %.17g, want %.17g", (long long)e, got, want);
        }
        kjit_array_free(&r);
        free(x);
        free(y);
        fixture_close(&f);
    }
}
END_TEST

/* --------------------------------------------------- several outputs */

START_TEST(several_outputs_given)
{
    seed_rng();
    kjit_target targets[3];
    int count = targets_here(targets);
    for (int t = 0; t < count; t++) {
        Fixture f = fixture_open(targets[t], "gufunc.kern", source);
        int64_t rows = 1 + (int64_t)uniform(0, 100), n = 1 + (int64_t)uniform(0, 50);
        double *x = random_f64(rows * n, -5, 5);
        double *lo = calloc((size_t)rows, sizeof *lo), *hi = calloc((size_t)rows, sizeof *hi);
        kjit_array X = kjit_array_make(x, KJIT_F64, 2, (int64_t[]){rows, n});
        kjit_array LO = kjit_array_make(lo, KJIT_F64, 1, &rows);
        kjit_array HI = kjit_array_make(hi, KJIT_F64, 1, &rows);
        kjit_arg args[3] = {kjit_arg_array(&X), kjit_arg_array(&LO), kjit_arg_array(&HI)};
        kjit_function *min_max = fixture_fn(&f, "min_max");
        ck_assert_msg(kjit_call(min_max, args, 3, NULL, NULL) == KJIT_OK, "%s",
                      kjit_last_error(f.context));
        for (int64_t r = 0; r < rows; r++) {
            double a = x[r * n], b = x[r * n];
            for (int64_t i = 1; i < n; i++)
                a = fmin(a, x[r * n + i]), b = fmax(b, x[r * n + i]);
            ck_assert(lo[r] == a && hi[r] == b);
        }
        /* Without them: the call says to give them. */
        kjit_array r;
        ck_assert_int_eq(kjit_call(min_max, args, 1, NULL, &r), KJIT_ERROR_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(kjit_last_error(f.context), "has 2 outputs"));
        free(x);
        free(lo);
        free(hi);
        fixture_close(&f);
    }
}
END_TEST

/* ------------------------------------------- device arrays, a stream */

START_TEST(device_arrays_on_a_stream)
{
    seed_rng();
    char reason[512];
    if (kjit_cuda_available(reason, sizeof reason) != KJIT_OK) {
        printf("device_arrays_on_a_stream: skipped: no CUDA driver (%s)\n", reason);
        return;
    }
    Fixture f = fixture_open(KJIT_TARGET_CUDA, "gufunc.kern", source);
    int64_t rows = 4097, n = 16;
    double *a = random_f64(rows * n, -1, 1), *b = random_f64(rows * n, -1, 1);
    double *out = calloc((size_t)rows, sizeof *out);
    int64_t shape[2] = {rows, n};
    kjit_array A = kjit_array_make(a, KJIT_F64, 2, shape), B = kjit_array_make(b, KJIT_F64, 2, shape);
    kjit_array dA, dB, dOut;
    ck_assert_int_eq(kjit_device_alloc(f.context, KJIT_F64, 2, shape, &dA), KJIT_OK);
    ck_assert_int_eq(kjit_device_alloc(f.context, KJIT_F64, 2, shape, &dB), KJIT_OK);
    ck_assert_int_eq(kjit_device_alloc(f.context, KJIT_F64, 1, &rows, &dOut), KJIT_OK);
    kjit_stream *stream;
    ck_assert_int_eq(kjit_stream_create(f.context, &stream), KJIT_OK);
    ck_assert_int_eq(kjit_copy(f.context, &dA, &A, stream), KJIT_OK);
    ck_assert_int_eq(kjit_copy(f.context, &dB, &B, stream), KJIT_OK);
    kjit_arg args[2] = {kjit_arg_array(&dA), kjit_arg_array(&dB)};
    ck_assert_msg(kjit_call_async(fixture_fn(&f, "dot"), args, 2, &dOut, stream) == KJIT_OK, "%s",
                  kjit_last_error(f.context));
    kjit_array Out = kjit_array_make(out, KJIT_F64, 1, &rows);
    ck_assert_int_eq(kjit_copy(f.context, &Out, &dOut, stream), KJIT_OK);
    ck_assert_int_eq(kjit_stream_synchronize(stream), KJIT_OK);
    for (int64_t r = 0; r < rows; r++) {
        double want = 0, scale = 0;
        for (int64_t i = 0; i < n; i++)
            want += a[r * n + i] * b[r * n + i], scale += fabs(a[r * n + i] * b[r * n + i]);
        ck_assert_msg(fabs(out[r] - want) <= (double)(n + 1) * 0x1p-53 * scale,
                      "row %lld: %.17g, want %.17g", (long long)r, out[r], want);
    }
    kjit_stream_destroy(stream);
    kjit_device_free(f.context, &dA);
    kjit_device_free(f.context, &dB);
    kjit_device_free(f.context, &dOut);
    free(a);
    free(b);
    free(out);
    fixture_close(&f);
}
END_TEST

/* ------------------------------------------------------ checked mode */

START_TEST(checked_mode_reports_the_core_line)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_PARALLEL;
    options.check = 1;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    kjit_module *module;
    ck_assert_int_eq(kjit_compile_string(context, "gufunc.kern", source, &module), KJIT_OK);
    kjit_function *shifted;
    ck_assert_int_eq(kjit_module_function(module, "shifted", &shifted), KJIT_OK);
    double x[3 * 5] = {0};
    kjit_array X = kjit_array_make(x, KJIT_F64, 2, (int64_t[]){3, 5});
    kjit_arg arg = kjit_arg_array(&X);
    kjit_array r;
    ck_assert_int_eq(kjit_call(shifted, &arg, 1, NULL, &r), KJIT_ERROR_CHECK);
    const char *message = kjit_last_error(context);
    ck_assert_msg(strstr(message, "gufunc.kern:38:40:") && strstr(message, "index 5 out of range"),
                  "message: %s", message);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

/* ------------------------------------------------------------ errors */

static kjit_status call_dot(Fixture *f, kjit_array *a, kjit_array *b, kjit_array *out)
{
    kjit_arg args[2] = {kjit_arg_array(a), kjit_arg_array(b)};
    kjit_array r;
    kjit_status status = kjit_call(fixture_fn(f, "dot"), args, 2, out, out ? NULL : &r);
    if (status == KJIT_OK && !out)
        kjit_array_free(&r);
    return status;
}

START_TEST(errors_name_the_problem)
{
    Fixture f = fixture_open(KJIT_TARGET_CPU, "gufunc.kern", source);
    double data[64] = {0};
    kjit_array a16 = kjit_array_make(data, KJIT_F64, 2, (int64_t[]){4, 16});
    kjit_array a12 = kjit_array_make(data, KJIT_F64, 2, (int64_t[]){4, 12});
    ck_assert_int_eq(call_dot(&f, &a16, &a12, NULL), KJIT_ERROR_SHAPE);
    ck_assert_str_eq(kjit_last_error(f.context),
                     "dot: core dimension n: 16 in argument 0, 12 in argument 1");

    kjit_array b3 = kjit_array_make(data, KJIT_F64, 2, (int64_t[]){3, 16});
    ck_assert_int_eq(call_dot(&f, &a16, &b3, NULL), KJIT_ERROR_SHAPE);
    ck_assert_ptr_nonnull(strstr(kjit_last_error(f.context), "do not broadcast"));

    kjit_array scalar = kjit_array_make(data, KJIT_F64, 0, NULL);
    ck_assert_int_eq(call_dot(&f, &scalar, &a16, NULL), KJIT_ERROR_SHAPE);
    ck_assert_str_eq(kjit_last_error(f.context),
                     "dot: argument 0 has 0 dimensions, but its core (n) needs at least 1");

    double o[8];
    kjit_array wrong = kjit_array_make(o, KJIT_F64, 1, (int64_t[]){3});
    ck_assert_int_eq(call_dot(&f, &a16, &a16, &wrong), KJIT_ERROR_SHAPE);
    ck_assert_str_eq(kjit_last_error(f.context),
                     "dot: output 0 has shape (3,), but the call gives (4,) (the loop shape, "
                     "then the core)");
    kjit_array wrong_type = kjit_array_make(o, KJIT_F32, 1, (int64_t[]){4});
    ck_assert_int_eq(call_dot(&f, &a16, &a16, &wrong_type), KJIT_ERROR_TYPE);

    kjit_array repeated = kjit_array_make(o, KJIT_F64, 1, (int64_t[]){4});
    repeated.strides[0] = 0;
    ck_assert_int_eq(call_dot(&f, &a16, &a16, &repeated), KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(kjit_last_error(f.context), "stride of 0"));

    int32_t ints[64] = {0};
    kjit_array i16 = kjit_array_make(ints, KJIT_I32, 2, (int64_t[]){4, 16});
    ck_assert_int_eq(call_dot(&f, &i16, &i16, NULL), KJIT_ERROR_TYPE);
    ck_assert_ptr_nonnull(strstr(kjit_last_error(f.context), "signatures on offer"));

    kjit_arg one = kjit_arg_array(&a16);
    kjit_array r;
    ck_assert_int_eq(kjit_call(fixture_fn(&f, "dot"), &one, 1, NULL, &r), KJIT_ERROR_INVALID_ARGUMENT);

    /* matmul's n: named with the letter, as written in the layout. */
    kjit_array m23 = kjit_array_make(data, KJIT_F64, 2, (int64_t[]){2, 3});
    kjit_array m42 = kjit_array_make(data, KJIT_F64, 2, (int64_t[]){4, 2});
    kjit_arg margs[2] = {kjit_arg_array(&m23), kjit_arg_array(&m42)};
    ck_assert_int_eq(kjit_call(fixture_fn(&f, "matmul"), margs, 2, NULL, &r), KJIT_ERROR_SHAPE);
    ck_assert_str_eq(kjit_last_error(f.context),
                     "matmul: core dimension n: 3 in argument 0, 4 in argument 1");

    ck_assert_str_eq(kjit_function_layout(fixture_fn(&f, "matmul")), "(m, n), (n, p) -> (m, p)");
    ck_assert_int_eq(kjit_function_layout_inputs(fixture_fn(&f, "min_max")), 1);
    ck_assert_int_eq(kjit_function_layout_outputs(fixture_fn(&f, "min_max")), 2);
    ck_assert_int_eq(kjit_function_kind_of(fixture_fn(&f, "dot")), KJIT_FUNCTION_GUVECTORIZE);
    fixture_close(&f);
}
END_TEST

Suite *suite_guvectorize(void)
{
    Suite *suite = suite_create("guvectorize");
    TCase *tcase = tcase_create("guvectorize");
    tcase_add_test(tcase, dot_against_float64);
    tcase_add_test(tcase, matmul_against_float64);
    tcase_add_test(tcase, moving_average_and_norms);
    tcase_add_test(tcase, several_outputs_given);
    tcase_add_test(tcase, device_arrays_on_a_stream);
    tcase_add_test(tcase, checked_mode_reports_the_core_line);
    tcase_add_test(tcase, errors_name_the_problem);
    suite_add_tcase(suite, tcase);
    return suite;
}
