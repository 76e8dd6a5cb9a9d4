/*
 * api_misuse.c: every public function of kjit.h and kjit_tools.h called
 * with NULL for each of its pointer arguments, with an array whose data is
 * NULL though it has elements, and with handles used after they were freed
 * or freed twice (a module, a context, a stream, an event, device memory),
 * built with AddressSanitizer and UBSan over a libkjit built with them too
 * (tests/tests.mk, `make test-api-misuse`): each must give
 * KJIT_ERROR_INVALID_ARGUMENT (or, for a getter, a harmless value) with a
 * message that says what was wrong, never a crash or a report.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit.h"
#include "kjit_tools.h"

static int failures, checks;

/* A status, and the message of the failure (on the context when it is
 * live, else the thread's). */
static void expect_status(int line, const char *what, kjit_status got, kjit_status want,
                          const kjit_context *context, const char *needle)
{
    checks++;
    const char *message = kjit_last_error(context);
    if (got != want) {
        fprintf(stderr, "api_misuse.c:%d: %s: %s, expected %s (%s)\n", line, what,
                kjit_status_name(got), kjit_status_name(want), message);
        failures++;
    } else if (needle && !strstr(message, needle)) {
        fprintf(stderr, "api_misuse.c:%d: %s: the message '%s' does not say '%s'\n", line, what,
                message, needle);
        failures++;
    }
}

static void expect_true(int line, const char *what, bool ok)
{
    checks++;
    if (!ok) {
        fprintf(stderr, "api_misuse.c:%d: %s\n", line, what);
        failures++;
    }
}

/* The call's status is `want` and the message names `needle` (NULL: any). */
#define STATUS(call, want, context, needle)                                                   \
    expect_status(__LINE__, #call, (call), (want), (context), (needle))
#define INVALID(call, context, needle) STATUS(call, KJIT_ERROR_INVALID_ARGUMENT, context, needle)
#define TRUE(cond) expect_true(__LINE__, #cond, (cond))
/* A void call returns; SAYS: and its complaint, naming `needle`, is the thread's. */
#define QUIET(call) call
#define SAYS(call, needle)                                                                    \
    do {                                                                                      \
        call;                                                                                 \
        expect_true(__LINE__, #call ": " needle, strstr(kjit_last_error(NULL), needle));     \
    } while (0)

static const char source[] =
    "@vectorize\n"
    "fn add(a: f32, b: f32) -> f32 { return a + b; }\n"
    "fn twice(x: f64) -> f64 { return 2.0 * x; }\n"
    "@kernel\n"
    "fn fill(x: f32[], v: f32) { let i = grid(1); if i < len(x) { x[i] = v; } }\n"
    "@reduce\n"
    "fn total(a: f32, b: f32) -> f32 { return a + b; }\n"
    "@guvectorize(\"(n)->()\")\n"
    "fn first(x: f32[], out: f32[]) { out[0] = x[0]; }\n";

static kjit_context *context_on(kjit_target target)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    kjit_context *context = NULL;
    if (kjit_context_create(&options, &context) != KJIT_OK) {
        fprintf(stderr, "api_misuse.c: no context: %s\n", kjit_last_error(NULL));
        exit(1);
    }
    return context;
}

static kjit_context *cpu_context(void) { return context_on(KJIT_TARGET_CPU); }

static kjit_function *function(kjit_module *module, const char *name)
{
    kjit_function *fn = NULL;
    if (kjit_module_function(module, name, &fn) != KJIT_OK) {
        fprintf(stderr, "api_misuse.c: no function %s\n", name);
        exit(1);
    }
    return fn;
}

static void visit(void *user, const kjit_cache_entry *entry) {}

static void null_arguments(void)
{
    /* contexts */
    QUIET(kjit_options_init(NULL));
    INVALID(kjit_context_create(NULL, NULL), NULL, "out is NULL");
    QUIET(kjit_context_destroy(NULL));
    TRUE(kjit_context_target(NULL) == KJIT_TARGET_AUTO);
    TRUE(kjit_last_error(NULL) != NULL);
    kjit_context *context = cpu_context();
    kjit_module *module = NULL;

    /* modules */
    INVALID(kjit_compile_string(NULL, "x.kern", source, &module), NULL, "context is NULL");
    INVALID(kjit_compile_string(context, "x.kern", NULL, &module), context, "source is NULL");
    INVALID(kjit_compile_string(context, "x.kern", source, NULL), context, "out is NULL");
    INVALID(kjit_compile_file(NULL, "x.kern", &module), NULL, "context is NULL");
    INVALID(kjit_compile_file(context, NULL, &module), context, "path is NULL");
    INVALID(kjit_compile_file(context, "x.kern", NULL), context, "out is NULL");
    STATUS(kjit_compile_string(context, NULL, source, &module), KJIT_OK, context, NULL);
    kjit_function *fn = NULL;
    INVALID(kjit_module_function(NULL, "add", &fn), NULL, "module is NULL");
    INVALID(kjit_module_function(module, NULL, &fn), context, "name is NULL");
    INVALID(kjit_module_function(module, "add", NULL), context, "out is NULL");
    TRUE(kjit_module_function_count(NULL) == 0);
    TRUE(kjit_module_function_name(NULL, 0) == NULL);
    QUIET(kjit_module_free(NULL));
    kjit_function *add = function(module, "add"), *twice = function(module, "twice");
    kjit_function *fill = function(module, "fill"), *total = function(module, "total");
    kjit_function *first = function(module, "first");

    /* functions */
    TRUE(kjit_function_kind_of(NULL) == KJIT_FUNCTION_PLAIN);
    TRUE(kjit_function_name(NULL) == NULL);
    TRUE(kjit_function_param_count(NULL) == 0);
    TRUE(kjit_function_signature_count(NULL) == 0);
    TRUE(kjit_function_signature(NULL, 0) == NULL);
    kjit_dtype dtype;
    int ndim;
    INVALID(kjit_function_param(NULL, 0, 0, &dtype, &ndim), NULL, "function is NULL");
    INVALID(kjit_function_param(add, 0, 0, NULL, &ndim), context, "dtype is NULL");
    STATUS(kjit_function_param(add, 0, 0, &dtype, NULL), KJIT_OK, context, NULL);
    INVALID(kjit_function_result(NULL, 0, &dtype), NULL, "function is NULL");
    INVALID(kjit_function_result(add, 0, NULL), context, "dtype is NULL");
    TRUE(kjit_function_param_written(NULL, 0) == 0);
    TRUE(kjit_function_layout(NULL) == NULL);
    TRUE(kjit_function_layout_inputs(NULL) == 0);
    TRUE(kjit_function_layout_outputs(NULL) == 0);
    TRUE(kjit_function_reduce_inputs(NULL) == 0);
    TRUE(kjit_function_map(NULL) == NULL);
    TRUE(kjit_function_output_count(NULL) == 0);
    TRUE(kjit_function_output_count(add) == 1);
    INVALID(kjit_function_output(NULL, 0, 0, &dtype), NULL, "function is NULL");
    INVALID(kjit_function_output(add, 0, 0, NULL), context, "dtype is NULL");
    STATUS(kjit_function_output(add, 0, 1, &dtype), KJIT_ERROR_INVALID_ARGUMENT, context, NULL);

    /* calls */
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, o[4];
    int64_t four = 4;
    kjit_array A = kjit_array_make(a, KJIT_F32, 1, &four);
    kjit_array B = kjit_array_make(b, KJIT_F32, 1, &four);
    kjit_array O = kjit_array_make(o, KJIT_F32, 1, &four);
    kjit_array no_data = kjit_array_make(NULL, KJIT_F32, 1, &four);
    kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
    kjit_arg null_array[2] = {kjit_arg_array(NULL), kjit_arg_array(&B)};
    kjit_arg null_data[2] = {kjit_arg_array(&no_data), kjit_arg_array(&B)};
    INVALID(kjit_call(NULL, args, 2, &O, NULL), NULL, "function is NULL");
    INVALID(kjit_call(add, NULL, 2, &O, NULL), context, "args is NULL");
    INVALID(kjit_call(add, args, -1, &O, NULL), context, "nargs");
    INVALID(kjit_call(add, args, 2, NULL, NULL), context, "output");
    INVALID(kjit_call(add, null_array, 2, &O, NULL), context, "NULL array");
    INVALID(kjit_call(add, null_data, 2, &O, NULL), context, "NULL data");
    INVALID(kjit_call(add, args, 2, &no_data, NULL), context, "NULL data");
    STATUS(kjit_call(add, args, 2, &O, NULL), KJIT_OK, context, NULL);
    TRUE(o[3] == 12);
    kjit_arg x = kjit_arg_f64(3);
    STATUS(kjit_call(twice, &x, 1, NULL, NULL), KJIT_OK, context, NULL); /* result dropped */
    kjit_array two[2];
    INVALID(kjit_call_outputs(NULL, args, 2, two, 1), NULL, "function is NULL");
    INVALID(kjit_call_outputs(add, args, 2, NULL, 1), context, "results is NULL");
    INVALID(kjit_call_outputs(add, args, 2, two, 2), context, "given 2 results");
    INVALID(kjit_call_outputs(add, NULL, 2, two, 1), context, "args is NULL");
    STATUS(kjit_call_outputs(add, args, 2, two, 1), KJIT_OK, context, NULL);
    TRUE(((float *)two[0].data)[3] == 12);
    kjit_array_free(&two[0]);
    INVALID(kjit_call_async(NULL, args, 2, &O, NULL), NULL, "function is NULL");
    INVALID(kjit_call_async(add, args, 2, NULL, NULL), context, "output");
    INVALID(kjit_call_async(add, NULL, 2, &O, NULL), context, "args is NULL");
    INVALID(kjit_prepare(NULL, args, 2, NULL), NULL, "function is NULL");
    INVALID(kjit_prepare(add, NULL, 2, NULL), context, "args is NULL");
    /* preparing reads no data: arrays may be shapes alone */
    STATUS(kjit_prepare(add, null_data, 2, NULL), KJIT_OK, context, NULL);
    int sig;
    INVALID(kjit_function_match(NULL, args, 2, &sig), NULL, "function is NULL");
    INVALID(kjit_function_match(add, args, 2, NULL), context, "signature is NULL");
    INVALID(kjit_function_match(add, NULL, 2, &sig), context, "args is NULL");
    kjit_arg gufunc_args[2] = {kjit_arg_array(&A), kjit_arg_array(&no_data)};
    int64_t one = 1;
    kjit_array first_out = kjit_array_make(o, KJIT_F32, 0, &one);
    INVALID(kjit_call(first, gufunc_args, 2, NULL, NULL), context, "NULL data");
    INVALID(kjit_call(first, null_data, 1, &first_out, NULL), context, "NULL data");

    /* reductions */
    kjit_arg whole = kjit_arg_array(&A);
    kjit_array sum;
    INVALID(kjit_reduce(NULL, &whole, 1, NULL, 0, NULL, NULL, &sum), NULL, "function is NULL");
    INVALID(kjit_reduce(total, NULL, 1, NULL, 0, NULL, NULL, &sum), context, "args is NULL");
    INVALID(kjit_reduce(total, &whole, 1, NULL, 0, NULL, NULL, NULL), context, "output");
    INVALID(kjit_reduce(total, null_data, 1, NULL, 0, NULL, NULL, &sum), context, "NULL data");
    INVALID(kjit_reduce_async(NULL, &whole, 1, NULL, 0, NULL, &O, NULL), NULL, "NULL");
    INVALID(kjit_reduce_async(total, &whole, 1, NULL, 0, NULL, NULL, NULL), context, "output");
    INVALID(kjit_reduce_prepare(NULL, &whole, 1, NULL, 0), NULL, "function is NULL");
    INVALID(kjit_reduce_prepare(total, NULL, 1, NULL, 0), context, "args is NULL");

    /* launches */
    uint32_t grid[3] = {1, 1, 1}, block[3] = {4, 1, 1};
    kjit_arg fill_args[2] = {kjit_arg_array(&O), kjit_arg_f64(2)};
    kjit_arg fill_null[2] = {kjit_arg_array(&no_data), kjit_arg_f64(2)};
    INVALID(kjit_launch(NULL, grid, block, fill_args, 2, NULL), NULL, "function is NULL");
    INVALID(kjit_launch(fill, NULL, block, fill_args, 2, NULL), context, "grid is NULL");
    INVALID(kjit_launch(fill, grid, NULL, fill_args, 2, NULL), context, "block is NULL");
    INVALID(kjit_launch(fill, grid, block, NULL, 2, NULL), context, "args is NULL");
    INVALID(kjit_launch(fill, grid, block, fill_null, 2, NULL), context, "NULL data");
    QUIET(kjit_launch_options_init(NULL));
    STATUS(kjit_launch_ex(fill, grid, block, fill_args, 2, NULL), KJIT_OK, context, NULL);
    TRUE(o[0] == 2);

    /* device memory */
    kjit_array device;
    INVALID(kjit_device_alloc(NULL, KJIT_F32, 1, &four, &device), NULL, "context is NULL");
    INVALID(kjit_device_alloc(context, KJIT_F32, 1, NULL, &device), context, "shape is NULL");
    INVALID(kjit_device_alloc(context, KJIT_F32, 1, &four, NULL), context, "out is NULL");
    STATUS(kjit_device_alloc(context, KJIT_F32, 1, &four, &device), KJIT_OK, context, NULL);
    INVALID(kjit_copy(NULL, &device, &A, NULL), NULL, "context is NULL");
    INVALID(kjit_copy(context, NULL, &A, NULL), context, "dst is NULL");
    INVALID(kjit_copy(context, &device, NULL, NULL), context, "src is NULL");
    INVALID(kjit_copy(context, &device, &no_data, NULL), context, "NULL data");
    STATUS(kjit_copy(context, &device, &A, NULL), KJIT_OK, context, NULL);
    INVALID(kjit_device_free(NULL, &device), NULL, "context is NULL");
    STATUS(kjit_device_free(context, NULL), KJIT_OK, context, NULL);
    kjit_array copy_of_device = device;
    STATUS(kjit_device_free(context, &device), KJIT_OK, context, NULL);
    INVALID(kjit_device_free(context, &copy_of_device), context, "freed already");
    kjit_array not_ours = A;
    not_ours.memory = KJIT_MEMORY_DEVICE;
    INVALID(kjit_device_free(context, &not_ours), context, "kjit_device_alloc");

    /* streams and events */
    kjit_stream *stream = NULL;
    kjit_event *event = NULL;
    double ms;
    INVALID(kjit_stream_create(NULL, &stream), NULL, "context is NULL");
    INVALID(kjit_stream_create(context, NULL), context, "out is NULL");
    INVALID(kjit_stream_synchronize(NULL), NULL, "stream is NULL");
    QUIET(kjit_stream_destroy(NULL));
    INVALID(kjit_synchronize(NULL), NULL, "context is NULL");
    INVALID(kjit_event_record(NULL, NULL, &event), NULL, "context is NULL");
    INVALID(kjit_event_record(context, NULL, NULL), context, "out is NULL");
    STATUS(kjit_event_record(context, NULL, &event), KJIT_OK, context, NULL);
    INVALID(kjit_event_elapsed(NULL, event, &ms), NULL, "event is NULL");
    INVALID(kjit_event_elapsed(event, NULL, &ms), NULL, "event is NULL");
    INVALID(kjit_event_elapsed(event, event, NULL), context, "milliseconds is NULL");
    QUIET(kjit_event_destroy(NULL));
    kjit_event_destroy(event);
    INVALID(kjit_stream_wrap(NULL, NULL, &stream), NULL, "context is NULL");
    INVALID(kjit_stream_wrap(context, NULL, NULL), context, "out is NULL");
    TRUE(kjit_stream_handle(NULL) == NULL);

    /* devices */
    TRUE(kjit_cuda_available(NULL, 0) >= KJIT_OK);
    STATUS(kjit_cuda_device_info(0, NULL), KJIT_ERROR_INVALID_ARGUMENT, NULL, NULL);
    TRUE(kjit_cuda_device_count() >= 0);
    TRUE(kjit_cuda_peer_access(-1, 0) == 0 && kjit_cuda_peer_access(0, -1) == 0);
    TRUE(kjit_cuda_peer_access(0, 0) == 0 && kjit_cuda_peer_access(1 << 30, 0) == 0);

    /* arrays */
    kjit_array made = kjit_array_make(a, KJIT_F32, 2, NULL);
    TRUE(made.ndim == KJIT_NDIM_INVALID && kjit_array_size(&made) == -1);
    TRUE(kjit_array_size(NULL) == 0);
    QUIET(kjit_array_free(NULL));
    TRUE(kjit_arg_array(NULL).value.array == NULL);

    /* kjit_tools.h */
    char *error = NULL;
    kjit_array read;
    INVALID(kjit_npy_read(NULL, &read, &error), NULL, "path is NULL");
    TRUE(error && strstr(error, "path is NULL"));
    free(error);
    error = NULL;
    INVALID(kjit_npy_read("x.npy", NULL, &error), NULL, "out is NULL");
    free(error);
    error = NULL;
    INVALID(kjit_npy_read("x.npy", &read, NULL), NULL, "error is NULL");
    INVALID(kjit_npy_write(NULL, &A, &error), NULL, "path is NULL");
    free(error);
    error = NULL;
    INVALID(kjit_npy_write("/nonexistent/x.npy", NULL, &error), NULL, "array is NULL");
    free(error);
    error = NULL;
    INVALID(kjit_npy_write("/nonexistent/x.npy", &A, NULL), NULL, "error is NULL");
    STATUS(kjit_npy_write("/nonexistent/x.npy", &no_data, &error), KJIT_ERROR_INVALID_ARGUMENT,
           NULL, NULL);
    TRUE(error && strstr(error, "NULL data"));
    free(error);
    error = NULL;
    SAYS(kjit_array_copy_c_order(NULL, o), "array is NULL");
    SAYS(kjit_array_copy_c_order(&A, NULL), "dst is NULL");
    SAYS(kjit_array_copy_c_order(&no_data, o), "not a valid view");
    TRUE(!kjit_array_is_contiguous(NULL));
    char text[32];
    TRUE(kjit_shape_text(NULL, 32, 1, &four) == NULL);
    TRUE(strcmp(kjit_shape_text(text, sizeof text, 1, NULL), "(?)") == 0);
    TRUE(!kjit_cache_dir(NULL, 64));
    TRUE(kjit_cache_list(NULL, visit, NULL) == -1);
    TRUE(kjit_cache_list(".", NULL, NULL) == -1);
    TRUE(kjit_cache_clear(NULL) == 0);
    (void)kjit_libdevice_path(NULL);
    QUIET(kjit_stage_options_init(NULL));
    kjit_stage_options stage_options;
    kjit_stage_options_init(&stage_options);
    char *bytes = NULL;
    size_t size = 0;
    INVALID(kjit_stage_file(NULL, KJIT_STAGE_IR, &stage_options, &bytes, &size, &error), NULL,
            "path is NULL");
    free(error);
    error = NULL;
    INVALID(kjit_stage_file("x.kern", KJIT_STAGE_IR, NULL, &bytes, &size, &error), NULL,
            "options is NULL");
    free(error);
    error = NULL;
    INVALID(kjit_stage_file("x.kern", KJIT_STAGE_IR, &stage_options, NULL, &size, &error), NULL,
            "bytes is NULL");
    free(error);
    error = NULL;
    INVALID(kjit_stage_file("x.kern", KJIT_STAGE_IR, &stage_options, &bytes, NULL, &error), NULL,
            "size is NULL");
    free(error);
    error = NULL;
    INVALID(kjit_stage_file("x.kern", KJIT_STAGE_IR, &stage_options, &bytes, &size, NULL), NULL,
            "error is NULL");
    INVALID(kjit_stage_file("x.kern", (kjit_stage)99, &stage_options, &bytes, &size, &error),
            NULL, "stage");
    free(error);

    kjit_module_free(module);
    kjit_context_destroy(context);
}

static void lifetimes(void)
{
    /* a module freed twice, its function used after */
    kjit_context *context = cpu_context();
    kjit_module *module;
    STATUS(kjit_compile_string(context, "x.kern", source, &module), KJIT_OK, context, NULL);
    kjit_function *add = function(module, "add");
    float a[4] = {1, 2, 3, 4}, o[4];
    int64_t four = 4;
    kjit_array A = kjit_array_make(a, KJIT_F32, 1, &four);
    kjit_array O = kjit_array_make(o, KJIT_F32, 1, &four);
    kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&A)};
    STATUS(kjit_call(add, args, 2, &O, NULL), KJIT_OK, context, NULL);
    kjit_module_free(module);
    SAYS(kjit_module_free(module), "not a live module");
    INVALID(kjit_call(add, args, 2, &O, NULL), NULL, "not a live function");
    TRUE(kjit_function_name(add) == NULL);
    kjit_function *gone;
    INVALID(kjit_module_function(module, "add", &gone), NULL, "not a live module");

    /* streams and events destroyed twice, or used after */
    kjit_stream *stream;
    kjit_event *event;
    STATUS(kjit_stream_create(context, &stream), KJIT_OK, context, NULL);
    STATUS(kjit_event_record(context, stream, &event), KJIT_OK, context, NULL);
    kjit_stream_destroy(stream);
    SAYS(kjit_stream_destroy(stream), "not a live stream");
    INVALID(kjit_stream_synchronize(stream), NULL, "not a live stream");
    kjit_event *refused;
    INVALID(kjit_event_record(context, stream, &refused), context, "not a live stream");
    TRUE(refused == NULL);
    kjit_event_destroy(event);
    SAYS(kjit_event_destroy(event), "not a live event");
    double ms;
    INVALID(kjit_event_elapsed(event, event, &ms), NULL, "not a live event");

    /* a stream of a context of another target (one of the same target and
     * device is the device's stream, and welcome) */
    kjit_context *other = context_on(KJIT_TARGET_PARALLEL);
    kjit_stream *foreign;
    STATUS(kjit_stream_create(other, &foreign), KJIT_OK, other, NULL);
    STATUS(kjit_compile_string(context, "x.kern", source, &module), KJIT_OK, context, NULL);
    add = function(module, "add");
    INVALID(kjit_call_async(add, args, 2, &O, foreign), context, "another target or device");

    /* everything a context made dies with it: its modules (and so their
     * functions), streams, events and device memory */
    kjit_array device;
    STATUS(kjit_device_alloc(context, KJIT_F32, 1, &four, &device), KJIT_OK, context, NULL);
    kjit_stream *mine;
    STATUS(kjit_stream_create(context, &mine), KJIT_OK, context, NULL);
    STATUS(kjit_event_record(context, mine, &event), KJIT_OK, context, NULL);
    kjit_context_destroy(context);
    SAYS(kjit_context_destroy(context), "not a live context");
    INVALID(kjit_call(add, args, 2, &O, NULL), NULL, "not a live function");
    SAYS(kjit_module_free(module), "not a live module");
    INVALID(kjit_stream_synchronize(mine), NULL, "not a live stream");
    SAYS(kjit_stream_destroy(mine), "not a live stream");
    SAYS(kjit_event_destroy(event), "not a live event");
    INVALID(kjit_device_free(context, &device), NULL, "not a live context");
    INVALID(kjit_synchronize(context), NULL, "not a live context");
    TRUE(kjit_context_target(context) == KJIT_TARGET_AUTO);
    INVALID(kjit_compile_string(context, "x.kern", source, &module), NULL, "not a live context");
    TRUE(strcmp(kjit_last_error(context), kjit_last_error(NULL)) == 0);

    /* the other context is untouched */
    STATUS(kjit_stream_synchronize(foreign), KJIT_OK, other, NULL);
    kjit_stream_destroy(foreign);
    kjit_context_destroy(other);
}

int main(void)
{
    null_arguments();
    lifetimes();
    printf("api_misuse: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
