/*
 * test_broadcast.c: NumPy broadcasting for vectorized calls.
 *
 * First the plan (runtime/array.c) on its own: which variant a call gets and
 * the descriptors it passes.  Then through the public API on cpu and parallel:
 * random shapes of rank 0 to 4 with size-1 dimensions, inputs as contiguous
 * arrays, scalars, 0-d arrays, and transposed, reversed or sliced views; the
 * output given (also as a strided view) or allocated.  Every result is
 * compared with a float64 loop in C over the broadcast index space; the
 * kernel computes a * b + c in f64, so the tolerance is 2 ulp (an FMA may or
 * may not be used).  Error cases check the message text.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

/* ------------------------------------------------------------------ plans */

static kjit_array make_view(int ndim, const int64_t *shape)
{
    return kjit_array_make((void *)0x1000, KJIT_F32, ndim, shape);
}

START_TEST(plan_contiguous_collapses_to_one_dimension)
{
    int64_t shape[3] = {2, 3, 4};
    kjit_array a = make_view(3, shape), b = make_view(3, shape), out = make_view(3, shape);
    const kjit_array *inputs[2] = {&a, &b};
    KjBroadcastPlan plan;
    char *error = NULL;
    ck_assert_int_eq(kj_broadcast_plan(inputs, 2, &out, &plan, &error), KJIT_OK);
    ck_assert_int_eq(plan.variant.layout, KJ_LAYOUT_CONTIG);
    ck_assert_int_eq(plan.size, 24);
    ck_assert_int_eq(plan.inputs[0].shape[0], 24);
    ck_assert_int_eq(plan.output.strides[0], 1);
    ck_assert_uint_eq(plan.variant.scalar_mask, 0);
}
END_TEST

START_TEST(plan_scalars_and_single_elements)
{
    int64_t shape[2] = {5, 6}, one[2] = {1, 1};
    kjit_array a = make_view(2, shape), s = make_view(2, one), z = make_view(0, NULL),
               out = make_view(2, shape);
    const kjit_array *inputs[4] = {&a, NULL, &s, &z};
    KjBroadcastPlan plan;
    char *error = NULL;
    ck_assert_int_eq(kj_broadcast_plan(inputs, 4, &out, &plan, &error), KJIT_OK);
    ck_assert_int_eq(plan.variant.layout, KJ_LAYOUT_CONTIG);
    ck_assert_uint_eq(plan.variant.scalar_mask, 0xe);
    ck_assert_ptr_eq(plan.scalar_data[2], s.data);
    ck_assert_ptr_eq(plan.scalar_data[3], z.data);
    ck_assert_ptr_null(plan.scalar_data[1]);
    ck_assert_int_eq(plan.ndim, 2);
}
END_TEST

START_TEST(plan_row_broadcast_is_strided)
{
    int64_t shape[2] = {3, 4}, row[1] = {4}, column[2] = {3, 1};
    kjit_array a = make_view(2, shape), r = make_view(1, row), c = make_view(2, column),
               out = make_view(2, shape);
    const kjit_array *inputs[3] = {&a, &r, &c};
    KjBroadcastPlan plan;
    char *error = NULL;
    ck_assert_int_eq(kj_broadcast_plan(inputs, 3, &out, &plan, &error), KJIT_OK);
    ck_assert_int_eq(plan.variant.layout, KJ_LAYOUT_STRIDED);
    ck_assert_int_eq(plan.variant.ndim, 2);
    ck_assert_int_eq(plan.inputs[1].strides[0], 0);
    ck_assert_int_eq(plan.inputs[1].strides[1], 1);
    ck_assert_int_eq(plan.inputs[2].strides[0], 1);
    ck_assert_int_eq(plan.inputs[2].strides[1], 0);
    ck_assert_int_eq(plan.output.strides[0], 4);
    ck_assert_int_eq(plan.output.shape[1], 4);
}
END_TEST

START_TEST(plan_merges_what_it_can)
{
    /* a[:, :, ::2] of a (2,3,8) array against contiguous (2,3,4): every
     * dimension merges into one run of stride 2. */
    int64_t full[3] = {2, 3, 8}, shape[3] = {2, 3, 4};
    kjit_array base = make_view(3, full);
    kjit_array stepped = base;
    stepped.shape[2] = 4;
    stepped.strides[2] = 8;
    kjit_array b = make_view(3, shape), out = make_view(3, shape);
    const kjit_array *inputs[2] = {&stepped, &b};
    KjBroadcastPlan plan;
    char *error = NULL;
    ck_assert_int_eq(kj_broadcast_plan(inputs, 2, &out, &plan, &error), KJIT_OK);
    ck_assert_int_eq(plan.variant.layout, KJ_LAYOUT_STRIDED);
    ck_assert_int_eq(plan.variant.ndim, 1);
    ck_assert_int_eq(plan.inputs[0].shape[0], 24);
    ck_assert_int_eq(plan.inputs[0].strides[0], 2);
    ck_assert_int_eq(plan.output.strides[0], 1);

    /* a[:, :, :4] of a (2,3,10) array: the outer two merge, the rows keep
     * their gaps. */
    int64_t wide[3] = {2, 3, 10};
    kjit_array wide_base = make_view(3, wide);
    kjit_array cut = wide_base;
    cut.shape[2] = 4;
    inputs[0] = &cut;
    ck_assert_int_eq(kj_broadcast_plan(inputs, 2, &out, &plan, &error), KJIT_OK);
    ck_assert_int_eq(plan.variant.layout, KJ_LAYOUT_STRIDED);
    ck_assert_int_eq(plan.variant.ndim, 2);
    ck_assert_int_eq(plan.inputs[0].shape[0], 6);
    ck_assert_int_eq(plan.inputs[0].shape[1], 4);
    ck_assert_int_eq(plan.inputs[0].strides[0], 10);
    ck_assert_int_eq(plan.inputs[0].strides[1], 1);
    ck_assert_int_eq(plan.inputs[1].strides[0], 4);
    ck_assert_int_eq(plan.output.strides[0], 4);
}
END_TEST

START_TEST(plan_errors_name_both_shapes)
{
    int64_t s34[2] = {3, 4}, s5[1] = {5}, s3[1] = {3};
    kjit_array a = make_view(2, s34), b = make_view(1, s5), out = make_view(1, s3);
    const kjit_array *inputs[2] = {&a, &b};
    KjBroadcastPlan plan;
    char *error = NULL;
    ck_assert_int_eq(kj_broadcast_plan(inputs, 2, &out, &plan, &error), KJIT_ERROR_SHAPE);
    ck_assert_msg(strstr(error, "shapes (3,4) and (5,) do not broadcast"), "%s", error);
    free(error);

    const kjit_array *one[1] = {&a};
    ck_assert_int_eq(kj_broadcast_plan(one, 1, &out, &plan, &error), KJIT_ERROR_SHAPE);
    ck_assert_msg(strstr(error, "output has shape (3,) but the broadcast shape is (3,4)"), "%s",
                  error);
    free(error);

    kjit_array odd = a;
    odd.strides[1] = 6; /* not a multiple of 4 bytes */
    kjit_array out34 = make_view(2, s34);
    const kjit_array *bad[1] = {&odd};
    ck_assert_int_eq(kj_broadcast_plan(bad, 1, &out34, &plan, &error), KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(error, "not a multiple"), "%s", error);
    free(error);
}
END_TEST

/* ------------------------------------------------------- through the API */

static const char fma_source[] =
    "@vectorize\n"
    "fn fma3(a: f64, b: f64, c: f64) -> f64 { return a * b + c; }\n";

static const char add_source[] =
    "@vectorize(f32(f32, f32), f64(f64, f64), i32(i32, i32))\n"
    "fn add(a, b) { return a + b; }\n";

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double uniform(void) { return (double)(next_random() >> 11) / 9007199254740992.0 * 4 - 2; }

/* A random view of `shape` over fresh memory: C order, reversed in some
 * dimensions, transposed, or a slice with a step. */
typedef struct View {
    kjit_array array;
    double *memory;
} View;

static View random_view(int ndim, const int64_t *shape)
{
    View v;
    int64_t size = 1;
    for (int d = 0; d < ndim; d++)
        size *= shape[d];
    int style = (int)(next_random() % 4);
    int64_t step = style == 3 ? 2 : 1;
    int64_t alloc = size * step + 1;
    v.memory = malloc((size_t)alloc * sizeof(double));
    for (int64_t i = 0; i < alloc; i++)
        v.memory[i] = uniform();
    v.array = kjit_array_make(v.memory, KJIT_F64, ndim, shape);
    if (style == 1 && ndim > 0) {
        /* reverse the last dimension */
        int d = ndim - 1;
        v.array.data = (char *)v.array.data + (shape[d] - 1) * v.array.strides[d];
        v.array.strides[d] = -v.array.strides[d];
    } else if (style == 2 && ndim > 1) {
        /* Fortran order: the transpose of a C-ordered buffer */
        int64_t stride = sizeof(double);
        for (int d = 0; d < ndim; d++) {
            v.array.strides[d] = stride;
            stride *= shape[d];
        }
    } else if (style == 3) {
        for (int d = 0; d < ndim; d++)
            v.array.strides[d] *= step;
    }
    return v;
}

static double at(const kjit_array *a, int ndim, const int64_t *index)
{
    const char *p = a->data;
    for (int k = 0; k < a->ndim; k++) {
        int d = ndim - a->ndim + k;
        if (a->shape[k] != 1)
            p += index[d] * a->strides[k];
    }
    return *(const double *)p;
}

static bool close_enough(double got, double want)
{
    return fabs(got - want) <= 2 * 2.220446049250313e-16 * (fabs(want) + 4.0);
}

/* One random broadcast case through kjit_call, checked element by element. */
static void random_case(kjit_function *fma3, kjit_context *context, int rank, bool big)
{
    int64_t shape[4];
    for (int d = 0; d < rank; d++)
        shape[d] = big ? 30 + (int64_t)(next_random() % 20) : 1 + (int64_t)(next_random() % 4);
    View views[3];
    kjit_arg args[3];
    double scalars[3];
    bool is_scalar[3];
    for (int i = 0; i < 3; i++) {
        int kind = (int)(next_random() % 6);
        is_scalar[i] = kind == 0;
        if (is_scalar[i]) {
            scalars[i] = uniform();
            args[i] = kjit_arg_f64(scalars[i]);
            views[i].memory = NULL;
            continue;
        }
        int in_rank = kind == 1 ? 0 : (int)(next_random() % (unsigned)(rank + 1));
        int64_t in_shape[4];
        for (int k = 0; k < in_rank; k++) {
            int d = rank - in_rank + k;
            in_shape[k] = next_random() % 3 == 0 ? 1 : shape[d];
        }
        views[i] = random_view(in_rank, in_shape);
        args[i] = kjit_arg_array(&views[i].array);
    }
    /* The broadcast shape is `shape` only where some input has the extent;
     * work it out as NumPy would. */
    int64_t want_shape[4];
    int want_rank = 0;
    for (int i = 0; i < 3; i++)
        if (!is_scalar[i] && views[i].array.ndim > want_rank)
            want_rank = views[i].array.ndim;
    for (int d = 0; d < want_rank; d++) {
        want_shape[d] = 1;
        for (int i = 0; i < 3; i++) {
            if (is_scalar[i])
                continue;
            int k = d - (want_rank - views[i].array.ndim);
            if (k >= 0 && views[i].array.shape[k] != 1)
                want_shape[d] = views[i].array.shape[k];
        }
    }

    bool give_out = next_random() % 2;
    View out_view = {0};
    kjit_array result = {0};
    kjit_status status;
    if (give_out) {
        out_view = random_view(want_rank, want_shape);
        status = kjit_call(fma3, args, 3, &out_view.array, NULL);
        result = out_view.array;
    } else {
        status = kjit_call(fma3, args, 3, NULL, &result);
    }
    ck_assert_msg(status == KJIT_OK, "%s", kjit_last_error(context));
    ck_assert_int_eq(result.ndim, want_rank);
    for (int d = 0; d < want_rank; d++)
        ck_assert_int_eq(result.shape[d], want_shape[d]);

    int64_t size = kjit_array_size(&result), index[4] = {0};
    for (int64_t n = 0; n < size; n++) {
        double v[3];
        for (int i = 0; i < 3; i++)
            v[i] = is_scalar[i] ? scalars[i] : at(&views[i].array, want_rank, index);
        double want = v[0] * v[1] + v[2];
        double got = at(&result, want_rank, index);
        ck_assert_msg(close_enough(got, want), "rank %d element %lld: got %.17g want %.17g",
                      want_rank, (long long)n, got, want);
        for (int d = want_rank - 1; d >= 0; d--) {
            if (++index[d] < want_shape[d])
                break;
            index[d] = 0;
        }
    }
    for (int i = 0; i < 3; i++)
        free(views[i].memory);
    if (give_out)
        free(out_view.memory);
    else
        kjit_array_free(&result);
}

static void random_cases_on(kjit_target target)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = 3;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    kjit_module *module;
    ck_assert_msg(kjit_compile_string(context, "fma.kern", fma_source, &module) == KJIT_OK, "%s",
                  kjit_last_error(context));
    kjit_function *fma3;
    ck_assert_int_eq(kjit_module_function(module, "fma3", &fma3), KJIT_OK);
    for (int rank = 0; rank <= 4; rank++)
        for (int trial = 0; trial < 40; trial++)
            random_case(fma3, context, rank, false);
    /* large enough for the pool to split the work */
    for (int trial = 0; trial < 6; trial++)
        random_case(fma3, context, 3, true);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

START_TEST(random_broadcasts_cpu)
{
    random_cases_on(KJIT_TARGET_CPU);
}
END_TEST

START_TEST(random_broadcasts_parallel)
{
    random_cases_on(KJIT_TARGET_PARALLEL);
}
END_TEST

/* The cpu targets start each run's pieces on the output's cache lines
 * (cpu.c, run_range_aligned): an output at every offset into a line, of
 * lengths around the line and the pool's chunk, gets every element once and
 * nothing beside it (sentinels); the inputs at another offset. */
static void line_offsets_on(kjit_target target)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = 3;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    kjit_module *module;
    ck_assert_msg(kjit_compile_string(context, "add.kern", add_source, &module) == KJIT_OK, "%s",
                  kjit_last_error(context));
    kjit_function *add;
    ck_assert_int_eq(kjit_module_function(module, "add", &add), KJIT_OK);
    static const int64_t lengths[] = {1, 15, 63, 64, 65, 100, 3 * 16384 + 37};
    const int64_t most = 3 * 16384 + 37 + 64;
    float *a = aligned_alloc(64, sizeof(float) * (size_t)most), *b = aligned_alloc(64, sizeof(float) * (size_t)most);
    float *o = aligned_alloc(64, sizeof(float) * (size_t)most);
    for (int64_t i = 0; i < most; i++)
        a[i] = (float)i, b[i] = (float)(i % 7) * 0.5f;
    for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++)
        for (int offset = 0; offset < 17; offset++) {
            int64_t n = lengths[l];
            for (int64_t i = 0; i < most; i++)
                o[i] = -1.0f;
            kjit_array A = kjit_array_make(a + 3, KJIT_F32, 1, &n), B = kjit_array_make(b + 5, KJIT_F32, 1, &n);
            kjit_array O = kjit_array_make(o + offset, KJIT_F32, 1, &n);
            kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
            ck_assert_msg(kjit_call(add, args, 2, &O, NULL) == KJIT_OK, "%s", kjit_last_error(context));
            for (int64_t i = 0; i < most; i++) {
                float want = i >= offset && i < offset + n ? a[i - offset + 3] + b[i - offset + 5] : -1.0f;
                ck_assert_msg(o[i] == want, "n %lld, offset %d: o[%lld] is %g, want %g", (long long)n, offset,
                              (long long)i, o[i], want);
            }
        }
    free(a);
    free(b);
    free(o);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

START_TEST(line_offsets_cpu)
{
    line_offsets_on(KJIT_TARGET_CPU);
}
END_TEST

START_TEST(line_offsets_parallel)
{
    line_offsets_on(KJIT_TARGET_PARALLEL);
}
END_TEST

START_TEST(call_errors)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CPU;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    kjit_module *module;
    ck_assert_msg(kjit_compile_string(context, "add.kern", add_source, &module) == KJIT_OK, "%s",
                  kjit_last_error(context));
    kjit_function *add;
    ck_assert_int_eq(kjit_module_function(module, "add", &add), KJIT_OK);

    float a[12] = {0}, b[5] = {0}, o[3];
    double d[5] = {0};
    int64_t s34[2] = {3, 4}, s5[1] = {5}, s3[1] = {3};
    kjit_array A = kjit_array_make(a, KJIT_F32, 2, s34), B = kjit_array_make(b, KJIT_F32, 1, s5);
    kjit_array D = kjit_array_make(d, KJIT_F64, 1, s5), O = kjit_array_make(o, KJIT_F32, 1, s3);
    kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
    kjit_array result;
    ck_assert_int_eq(kjit_call(add, args, 2, NULL, &result), KJIT_ERROR_SHAPE);
    ck_assert_msg(strstr(kjit_last_error(context), "shapes (3,4) and (5,) do not broadcast"), "%s",
                  kjit_last_error(context));

    args[1] = kjit_arg_f64(1.0);
    ck_assert_int_eq(kjit_call(add, args, 2, &O, NULL), KJIT_ERROR_SHAPE);
    ck_assert_msg(strstr(kjit_last_error(context),
                         "output has shape (3,) but the broadcast shape is (3,4)"),
                  "%s", kjit_last_error(context));

    /* f32 array with an f64 array: no signature takes them together */
    args[1] = kjit_arg_array(&D);
    args[0] = kjit_arg_array(&B);
    ck_assert_int_eq(kjit_call(add, args, 2, NULL, &result), KJIT_ERROR_TYPE);
    const char *message = kjit_last_error(context);
    ck_assert_msg(strstr(message, "f32(f32, f32), f64(f64, f64), i32(i32, i32)"), "%s", message);

    /* an i16 array matches no signature at all: the argument is named */
    int16_t h[5] = {0};
    kjit_array H = kjit_array_make(h, KJIT_I16, 1, s5);
    args[1] = kjit_arg_array(&H);
    ck_assert_int_eq(kjit_call(add, args, 2, NULL, &result), KJIT_ERROR_TYPE);
    message = kjit_last_error(context);
    ck_assert_msg(strstr(message, "argument 1 has type i16[]"), "%s", message);

    /* wrong output element type */
    double od[5];
    kjit_array OD = kjit_array_make(od, KJIT_F64, 1, s5);
    args[1] = kjit_arg_array(&B);
    ck_assert_int_eq(kjit_call(add, args, 2, &OD, NULL), KJIT_ERROR_TYPE);

    /* wrong argument count */
    ck_assert_int_eq(kjit_call(add, args, 1, NULL, &result), KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(kjit_last_error(context), "takes 2 arguments"), "%s",
                  kjit_last_error(context));

    /* the context still works: an f32 and an i32 call pick their signatures */
    for (int i = 0; i < 5; i++)
        b[i] = (float)i * 0.25f;
    args[0] = kjit_arg_array(&B);
    args[1] = kjit_arg_f64(0.5);
    ck_assert_int_eq(kjit_call(add, args, 2, NULL, &result), KJIT_OK);
    ck_assert_int_eq(result.dtype, KJIT_F32);
    for (int i = 0; i < 5; i++)
        ck_assert(((float *)result.data)[i] == b[i] + 0.5f);
    kjit_array_free(&result);

    int32_t n[5] = {1, 2, 3, 4, 5};
    kjit_array N = kjit_array_make(n, KJIT_I32, 1, s5);
    args[0] = kjit_arg_array(&N);
    args[1] = kjit_arg_i64(10);
    ck_assert_int_eq(kjit_call(add, args, 2, NULL, &result), KJIT_OK);
    ck_assert_int_eq(result.dtype, KJIT_I32);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(((int32_t *)result.data)[i], n[i] + 10);
    kjit_array_free(&result);

    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

Suite *suite_broadcast(void)
{
    Suite *s = suite_create("broadcast");
    TCase *plans = tcase_create("plans");
    tcase_add_test(plans, plan_contiguous_collapses_to_one_dimension);
    tcase_add_test(plans, plan_scalars_and_single_elements);
    tcase_add_test(plans, plan_row_broadcast_is_strided);
    tcase_add_test(plans, plan_merges_what_it_can);
    tcase_add_test(plans, plan_errors_name_both_shapes);
    suite_add_tcase(s, plans);
    TCase *calls = tcase_create("calls");
    tcase_set_timeout(calls, 120);
    tcase_add_test(calls, random_broadcasts_cpu);
    tcase_add_test(calls, random_broadcasts_parallel);
    tcase_add_test(calls, line_offsets_cpu);
    tcase_add_test(calls, line_offsets_parallel);
    tcase_add_test(calls, call_errors);
    suite_add_tcase(s, calls);
    return s;
}
