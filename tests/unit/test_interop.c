/*
 * test_interop.c: sharing streams with other GPU libraries (api_interop.c).
 *
 * On cpu a wrapped stream carries no CUDA stream and calls on it run as on
 * the default one.  On cuda, a wrapper over a CUstream kjit made stands in for
 * a CuPy or PyTorch stream: work on it gives the float64 answer, and
 * destroying the wrapper leaves the stream usable by its owner.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kjit.h"

static const char add_source[] = "@vectorize fn add(a: f32, b: f32) -> f32 { return a + b; }\n";

static kjit_function *compile_add(kjit_context *context, kjit_module **module)
{
    ck_assert_msg(kjit_compile_string(context, "interop.kern", add_source, module) == KJIT_OK,
                  "%s", kjit_last_error(context));
    kjit_function *add;
    ck_assert_int_eq(kjit_module_function(*module, "add", &add), KJIT_OK);
    return add;
}

/* add(a, 0.25) on n values through `stream`, checked against float64. */
static void add_on_stream(kjit_context *context, kjit_function *add, kjit_stream *stream)
{
    enum { N = 4099 };
    int64_t shape[1] = {N};
    float *host = malloc(sizeof(float) * N), *back = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++)
        host[i] = (float)((i * 7919 % 1000) / 37.0 - 13.0);
    kjit_array h = kjit_array_make(host, KJIT_F32, 1, shape);
    kjit_array b = kjit_array_make(back, KJIT_F32, 1, shape);
    kjit_array d, out;
    ck_assert_int_eq(kjit_device_alloc(context, KJIT_F32, 1, shape, &d), KJIT_OK);
    ck_assert_int_eq(kjit_device_alloc(context, KJIT_F32, 1, shape, &out), KJIT_OK);
    ck_assert_int_eq(kjit_copy(context, &d, &h, stream), KJIT_OK);
    kjit_arg args[2] = {kjit_arg_array(&d), kjit_arg_f64(0.25)};
    ck_assert_msg(kjit_call_async(add, args, 2, &out, stream) == KJIT_OK, "%s",
                  kjit_last_error(context));
    ck_assert_int_eq(kjit_copy(context, &b, &out, stream), KJIT_OK);
    ck_assert_int_eq(kjit_stream_synchronize(stream), KJIT_OK);
    for (int i = 0; i < N; i++)
        ck_assert_msg(fabs(back[i] - ((double)host[i] + 0.25)) <= 1e-6 * (1 + fabs(host[i])),
                      "element %d: %g", i, back[i]);
    kjit_device_free(context, &d);
    kjit_device_free(context, &out);
    free(host), free(back);
}

START_TEST(wrapped_stream_on_cpu)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CPU;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    kjit_module *module;
    kjit_function *add = compile_add(context, &module);
    kjit_stream *stream;
    /* Any handle: a cpu context has no CUDA stream to put it in. */
    ck_assert_int_eq(kjit_stream_wrap(context, (void *)0x1234, &stream), KJIT_OK);
    ck_assert_ptr_null(kjit_stream_handle(stream));
    add_on_stream(context, add, stream);
    kjit_stream_destroy(stream);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

START_TEST(wrapped_stream_on_cuda)
{
    char reason[512];
    if (kjit_cuda_available(reason, sizeof reason) != KJIT_OK) {
        printf("wrapped_stream_on_cuda: skipped: no CUDA driver (%s)\n", reason);
        return;
    }
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CUDA;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    kjit_module *module;
    kjit_function *add = compile_add(context, &module);
    kjit_stream *owner, *wrapper;
    ck_assert_int_eq(kjit_stream_create(context, &owner), KJIT_OK);
    void *handle = kjit_stream_handle(owner);
    ck_assert_ptr_nonnull(handle);
    ck_assert_int_eq(kjit_stream_wrap(context, handle, &wrapper), KJIT_OK);
    ck_assert_ptr_eq(kjit_stream_handle(wrapper), handle);
    add_on_stream(context, add, wrapper);
    kjit_stream_destroy(wrapper);
    /* The owner's stream survived its wrapper. */
    add_on_stream(context, add, owner);
    kjit_stream_destroy(owner);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

Suite *suite_interop(void)
{
    Suite *s = suite_create("interop");
    TCase *tc = tcase_create("interop");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, wrapped_stream_on_cpu);
    tcase_add_test(tc, wrapped_stream_on_cuda);
    suite_add_tcase(s, tc);
    return s;
}
