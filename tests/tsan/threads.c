/*
 * threads.c: one context used from several threads at once, as
 * docs/embedding.md's threading contract allows, built with
 * -fsanitize=thread over a libkjit whose objects are instrumented too
 * (tests/tests.mk, `make test-tsan`), so that a data race in the runtime is a
 * report and a failure.
 *
 * THREADS threads share one context per target (cpu, then parallel) and a
 * module compiled once; each compiles modules of its own (some with errors),
 * calls a @vectorize function (the first calls generate its code, in several
 * threads at once), launches a kernel, reduces, allocates and frees device
 * memory and streams, and makes calls that fail, each with a message that
 * names the thread.  After every failure the thread checks that
 * kjit_last_error(context) is its own message, whatever the other threads
 * did meanwhile; after every success that it is "".  The cpu target runs
 * again on a context made as the Python package makes its own (cancellable
 * code, Ctrl-C cancels: the signal guard of cancel.c, which calls pass with
 * atomic operations only, under eight threads at once).  Last, a file of
 * many roots is compiled in groups on four threads (kjit_stage_file,
 * codegen_groups.c: one IR module read by every group at once), and its
 * object must be the bytes of the one-thread compile; and a library's cpu
 * objects are compiled on four threads (kjit_build_library_with,
 * aot_build.c's compile_cpu_objects), the same bytes as on one.
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kjit.h"
#include "kjit_tools.h"

#define THREADS 8
#define ROUNDS 6
#define N 64

static const char shared_source[] =
    "@vectorize\n"
    "fn add(a: f32, b: f32) -> f32 { return a + b; }\n"
    "@vectorize\n"
    "fn scaled(a: f64, s: f64) -> f64 { return a * s; }\n"
    "@kernel\n"
    "fn fill(x: f32[], v: f32) { let i = grid(1); if i < len(x) { x[i] = v; } }\n"
    "@reduce\n"
    "fn total(a: f64, b: f64) -> f64 { return a + b; }\n";

typedef struct Shared {
    kjit_context *context;
    kjit_module *module;
    _Atomic int failures;
} Shared;

typedef struct Worker {
    Shared *shared;
    int id;
} Worker;

#define EXPECT(cond, ...)                                                                     \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "threads.c:%d: thread %d: ", __LINE__, w->id);                    \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fprintf(stderr, "\n");                                                            \
            w->shared->failures++;                                                            \
            return false;                                                                     \
        }                                                                                     \
    } while (0)

/* The thread's last error on the context contains `needle`. */
static bool error_names(Worker *w, kjit_status status, kjit_status want, const char *needle)
{
    const char *message = kjit_last_error(w->shared->context);
    EXPECT(status == want, "status %s, expected %s (%s)", kjit_status_name(status),
           kjit_status_name(want), message);
    EXPECT(strstr(message, needle) != NULL, "last error '%s' does not name '%s'", message,
           needle);
    return true;
}

static bool no_error(Worker *w, kjit_status status, const char *what)
{
    const char *message = kjit_last_error(w->shared->context);
    EXPECT(status == KJIT_OK, "%s: %s (%s)", what, kjit_status_name(status), message);
    EXPECT(message[0] == '\0', "%s succeeded but the last error is '%s'", what, message);
    return true;
}

static bool one_round(Worker *w, int round)
{
    kjit_context *context = w->shared->context;
    char name[64], source[256], needle[64];

    /* A module of its own, with an error that names the thread. */
    snprintf(name, sizeof name, "thread%d.kern", w->id);
    snprintf(source, sizeof source, "fn f%d(x: f32) -> f32 { return x + missing_%d_%d; }\n",
             w->id, w->id, round);
    kjit_module *broken = NULL;
    snprintf(needle, sizeof needle, "missing_%d_%d", w->id, round);
    if (!error_names(w, kjit_compile_string(context, name, source, &broken), KJIT_ERROR_COMPILE,
                     needle))
        return false;

    /* One that compiles, called once and freed. */
    snprintf(source, sizeof source, "fn twice%d(x: f64) -> f64 { return 2.0 * x + %d.0; }\n",
             w->id, round);
    kjit_module *mine;
    if (!no_error(w, kjit_compile_string(context, name, source, &mine), "compile"))
        return false;
    snprintf(needle, sizeof needle, "twice%d", w->id);
    kjit_function *twice;
    if (!no_error(w, kjit_module_function(mine, needle, &twice), "lookup"))
        return false;
    kjit_arg x = kjit_arg_f64(w->id);
    kjit_array value;
    if (!no_error(w, kjit_call(twice, &x, 1, NULL, &value), "plain call"))
        return false;
    EXPECT(*(double *)value.data == 2.0 * w->id + round, "twice%d gave %g", w->id,
           *(double *)value.data);
    kjit_array_free(&value);
    kjit_module_free(mine);

    /* The shared module: a lookup that fails, naming the thread. */
    kjit_function *add, *scaled, *fill, *total, *none;
    snprintf(needle, sizeof needle, "absent_%d_%d", w->id, round);
    if (!error_names(w, kjit_module_function(w->shared->module, needle, &none),
                     KJIT_ERROR_NOT_FOUND, needle))
        return false;
    if (!no_error(w, kjit_module_function(w->shared->module, "add", &add), "lookup add") ||
        !no_error(w, kjit_module_function(w->shared->module, "scaled", &scaled), "lookup") ||
        !no_error(w, kjit_module_function(w->shared->module, "fill", &fill), "lookup fill") ||
        !no_error(w, kjit_module_function(w->shared->module, "total", &total), "lookup"))
        return false;

    /* Calls whose code the first callers generate together: a contiguous
     * variant, a strided one, one with a scalar. */
    float a[N], b[N], out[N];
    for (int i = 0; i < N; i++) {
        a[i] = (float)(i + w->id);
        b[i] = (float)(2 * i);
    }
    int64_t n = N, half = N / 2;
    kjit_array A = kjit_array_make(a, KJIT_F32, 1, &n);
    kjit_array B = kjit_array_make(b, KJIT_F32, 1, &n);
    kjit_array O = kjit_array_make(out, KJIT_F32, 1, &n);
    kjit_arg ab[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
    if (!no_error(w, kjit_call(add, ab, 2, &O, NULL), "add"))
        return false;
    for (int i = 0; i < N; i++)
        EXPECT(out[i] == a[i] + b[i], "add[%d] = %g", i, out[i]);
    kjit_array every_other = kjit_array_make(a, KJIT_F32, 1, &half);
    every_other.strides[0] = 2 * sizeof(float);
    kjit_array O_half = kjit_array_make(out, KJIT_F32, 1, &half);
    kjit_arg strided[2] = {kjit_arg_array(&every_other), kjit_arg_f64(0.5)};
    if (!no_error(w, kjit_call(add, strided, 2, &O_half, NULL), "strided add"))
        return false;
    for (int i = 0; i < N / 2; i++)
        EXPECT(out[i] == a[2 * i] + 0.5f, "strided add[%d] = %g", i, out[i]);

    /* A call that fails: a shape the thread names (its own length). */
    int64_t wrong = 3 + w->id;
    kjit_array short_out = kjit_array_make(out, KJIT_F32, 1, &wrong);
    snprintf(needle, sizeof needle, "(%d,)", 3 + w->id);
    if (!error_names(w, kjit_call(add, ab, 2, &short_out, NULL), KJIT_ERROR_SHAPE, needle))
        return false;
    /* and a type error */
    double d[N];
    kjit_array D = kjit_array_make(d, KJIT_F64, 1, &n);
    kjit_arg mixed[2] = {kjit_arg_array(&D), kjit_arg_array(&B)};
    if (!error_names(w, kjit_call(add, mixed, 2, NULL, &value), KJIT_ERROR_TYPE, "add("))
        return false;

    /* A kernel launch, then one with a bad grid. */
    uint32_t grid[3] = {2, 1, 1}, block[3] = {32, 1, 1};
    kjit_arg fill_args[2] = {kjit_arg_array(&O), kjit_arg_f64(w->id + 0.25)};
    if (!no_error(w, kjit_launch(fill, grid, block, fill_args, 2, NULL), "launch"))
        return false;
    for (int i = 0; i < N; i++)
        EXPECT(out[i] == (float)(w->id + 0.25), "fill[%d] = %g", i, out[i]);
    uint32_t big_block[3] = {64 + w->id, 32, 1};
    snprintf(needle, sizeof needle, "%u threads", (64 + w->id) * 32);
    if (!error_names(w, kjit_launch(fill, grid, big_block, fill_args, 2, NULL),
                     KJIT_ERROR_INVALID_ARGUMENT, needle))
        return false;

    /* A reduction. */
    for (int i = 0; i < N; i++)
        d[i] = i + w->id;
    kjit_arg darg = kjit_arg_array(&D);
    kjit_array sum;
    if (!no_error(w, kjit_reduce(total, &darg, 1, NULL, 0, NULL, NULL, &sum), "reduce"))
        return false;
    EXPECT(*(double *)sum.data == N * (N - 1) / 2.0 + N * w->id, "total = %g",
           *(double *)sum.data);
    kjit_array_free(&sum);

    /* Device memory and a stream. */
    kjit_array device;
    if (!no_error(w, kjit_device_alloc(context, KJIT_F64, 1, &n, &device), "device alloc"))
        return false;
    kjit_stream *stream;
    if (!no_error(w, kjit_stream_create(context, &stream), "stream"))
        return false;
    kjit_arg scale[2] = {kjit_arg_array(&device), kjit_arg_f64(3)};
    if (!no_error(w, kjit_copy(context, &device, &D, stream), "copy in") ||
        !no_error(w, kjit_call_async(scaled, scale, 2, &device, stream), "async call") ||
        !no_error(w, kjit_copy(context, &D, &device, stream), "copy out") ||
        !no_error(w, kjit_stream_synchronize(stream), "synchronize"))
        return false;
    for (int i = 0; i < N; i++)
        EXPECT(d[i] == 3.0 * (i + w->id), "scaled[%d] = %g", i, d[i]);
    kjit_stream_destroy(stream);
    if (!no_error(w, kjit_device_free(context, &device), "device free"))
        return false;
    return true;
}

static void *work(void *user)
{
    Worker *w = user;
    for (int round = 0; round < ROUNDS; round++)
        if (!one_round(w, round))
            break;
    return NULL;
}

static int run_target(kjit_target target, bool as_python)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = 3;
    if (as_python) {
        options.cancellable = 1;
        options.cancel_signal = SIGINT;
    }
    Shared shared = {0};
    if (kjit_context_create(&options, &shared.context) != KJIT_OK) {
        fprintf(stderr, "threads.c: no %s context: %s\n", kjit_target_name(target),
                kjit_last_error(NULL));
        return 1;
    }
    if (kjit_compile_string(shared.context, "shared.kern", shared_source, &shared.module) !=
        KJIT_OK) {
        fprintf(stderr, "threads.c: %s\n", kjit_last_error(shared.context));
        return 1;
    }
    pthread_t ids[THREADS];
    Worker workers[THREADS];
    for (int t = 0; t < THREADS; t++) {
        workers[t] = (Worker){&shared, t};
        if (pthread_create(&ids[t], NULL, work, &workers[t]) != 0) {
            fprintf(stderr, "threads.c: pthread_create failed\n");
            return 1;
        }
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(ids[t], NULL);
    kjit_module_free(shared.module);
    kjit_context_destroy(shared.context);
    printf("threads: %d threads x %d rounds on one %s context%s: %s\n", THREADS, ROUNDS,
           kjit_target_name(target), as_python ? " (Python's options)" : "",
           shared.failures ? "FAILED" : "ok");
    return shared.failures != 0;
}

static char *stage_with(const char *threads, kjit_stage stage, kjit_target target, size_t *size)
{
    setenv("KJIT_COMPILE_THREADS", threads, 1);
    kjit_stage_options options;
    kjit_stage_options_init(&options);
    options.target = target;
    char *bytes = NULL, *error = NULL;
    if (kjit_stage_file("examples/reduce.kern", stage, &options, &bytes, size, &error) != KJIT_OK) {
        fprintf(stderr, "threads.c: examples/reduce.kern in groups: %s\n", error ? error : "?");
        bytes = NULL;
    }
    free(error);
    unsetenv("KJIT_COMPILE_THREADS");
    return bytes;
}

static int stage_in_groups(kjit_stage stage, kjit_target target)
{
    size_t one = 0, four = 0;
    char *a = stage_with("1", stage, target, &one), *b = stage_with("4", stage, target, &four);
    bool same = a && b && one == four && memcmp(a, b, one) == 0;
    printf("threads: examples/reduce.kern's %s compiled in groups on 4 threads: %s\n",
           kjit_target_name(target), same ? "ok" : "FAILED");
    free(a);
    free(b);
    return !same;
}

/* examples/add.kern's library (no cuda, two levels) built on `threads`
 * threads into path; its bytes, or NULL. */
static char *library_with(const char *threads, const char *path, size_t *size)
{
    setenv("KJIT_COMPILE_THREADS", threads, 1);
    kjit_build_options options;
    kjit_build_options_init(&options);
    options.levels = "sse2,v3";
    options.cuda_archs = "off";
    char *error = NULL, *bytes = NULL;
    if (kjit_build_library_with("examples/add.kern", path, &options, NULL, &error) != KJIT_OK) {
        fprintf(stderr, "threads.c: examples/add.kern's library: %s\n", error ? error : "?");
    } else {
        FILE *f = fopen(path, "rb");
        if (f && fseek(f, 0, SEEK_END) == 0 && (*size = (size_t)ftell(f)) > 0 &&
            fseek(f, 0, SEEK_SET) == 0) {
            bytes = malloc(*size);
            if (bytes && fread(bytes, 1, *size, f) != *size) {
                free(bytes);
                bytes = NULL;
            }
        }
        if (f)
            fclose(f);
        remove(path);
    }
    free(error);
    unsetenv("KJIT_COMPILE_THREADS");
    return bytes;
}

static int library_on_threads(void)
{
    char one_path[64], four_path[64];
    snprintf(one_path, sizeof one_path, "/tmp/kjit-tsan-%d-1.so", (int)getpid());
    snprintf(four_path, sizeof four_path, "/tmp/kjit-tsan-%d-4.so", (int)getpid());
    size_t one = 0, four = 0;
    char *a = library_with("1", one_path, &one), *b = library_with("4", four_path, &four);
    bool same = a && b && one == four && memcmp(a, b, one) == 0;
    printf("threads: examples/add.kern's library's cpu objects compiled on 4 threads: %s\n",
           same ? "ok" : "FAILED");
    free(a);
    free(b);
    return !same;
}

int main(void)
{
    int failed = stage_in_groups(KJIT_STAGE_OBJ, KJIT_TARGET_CPU);
    failed |= library_on_threads();
    char *error = NULL;
    if (kjit_libdevice_path(&error))
        failed |= stage_in_groups(KJIT_STAGE_PTX, KJIT_TARGET_CUDA);
    free(error);
    failed |= run_target(KJIT_TARGET_CPU, false);
    failed |= run_target(KJIT_TARGET_PARALLEL, false);
    failed |= run_target(KJIT_TARGET_CPU, true);
    return failed;
}
