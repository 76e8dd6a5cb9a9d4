/*
 * cuda_host.c: the host cost of kjit's cuda calls, and the driver calls each
 * makes, measured without a GPU.
 *
 *   KJIT_CUDA_DRIVER=$PWD/build/libkjit-fakecuda.so build/cuda-host
 *
 * With the fake driver (fake_cuda.c: every driver call returns at once and
 * is counted) the time per call is kjit's own host work, which on a GPU
 * machine comes on top of the driver's (a bare cuLaunchKernel is about 3 us
 * on the H100/H200 machine).  Each row: a call form, on a context made as C
 * programs make one (default options) and as the Python package makes its
 * own (cancellable code, Ctrl-C cancels: _core.py); the median over RUNS
 * batches of calls, in ns, each batch synchronised outside its timing; then
 * the driver calls one call makes.  On a real driver (no fake) the times are
 * printed and the driver columns say "n/a" (tests/gpu/python.sh runs both).
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "diag_common.h"
#include "kjit.h"

#define RUNS 9
#define ELEMENTS 1000
/* calls a batch: on a GPU as many as build/latency times (the queue of
 * launches stays short), on the fake driver more (nothing queues) */
#define CALLS_GPU 2000
#define CALLS_FAKE 20000

static const char source[] =
    "@vectorize\nfn add(a: f32, b: f32) -> f32 {\n    return a + b;\n}\n"
    "@kernel\nfn empty(x: f32[]) {\n}\n";

typedef long (*count_fn)(const char *);
typedef void (*reset_fn)(void);
static count_fn fake_count;
static reset_fn fake_reset;

/* The driver calls a call may make, in the order printed. */
static const char *const watched[] = {"cuLaunchKernel", "cuCtxGetCurrent", "cuCtxSetCurrent"};
#define WATCHED (int)(sizeof watched / sizeof watched[0])

static void check(kjit_context *context, kjit_status status, const char *what)
{
    if (status == KJIT_OK)
        return;
    fprintf(stderr, "cuda-host: %s: %s: %s\n", what, kjit_status_name(status),
            context ? kjit_last_error(context) : "");
    exit(1);
}

typedef struct Form {
    const char *name;
    kjit_function *add, *empty;
    kjit_arg args[2];
    kjit_array *out;
    kjit_stream *stream;
    int launch; /* kjit_launch of the empty kernel */
} Form;

static kjit_status run_form(const Form *f)
{
    static const uint32_t one[3] = {1, 1, 1};
    if (f->launch)
        return kjit_launch(f->empty, one, one, f->args, 1, f->stream);
    if (f->stream)
        return kjit_call_async(f->add, f->args, 2, f->out, f->stream);
    return kjit_call(f->add, f->args, 2, f->out, NULL);
}

/* The median ns a call (*fastest: the fastest batch's, which other work on a
 * shared machine cannot inflate), and the driver calls of one (calls[i] for
 * watched[i], *total for all of them). */
static double measure(kjit_context *context, const Form *f, double calls[WATCHED],
                      double *total, double *fastest)
{
    check(context, run_form(f), f->name); /* code generated, block size asked */
    check(context, kjit_synchronize(context), "synchronize");
    int per_batch = fake_count ? CALLS_FAKE : CALLS_GPU;
    double times[RUNS];
    /* the driver calls of the synchronisations, taken off the counts */
    long synced[WATCHED] = {0}, synced_total = 0;
    if (fake_reset)
        fake_reset();
    for (int r = 0; r < RUNS; r++) {
        double start = diag_now_ns();
        for (int i = 0; i < per_batch; i++)
            if (run_form(f) != KJIT_OK)
                check(context, run_form(f), f->name);
        times[r] = (diag_now_ns() - start) / per_batch;
        long before[WATCHED], before_total = 0;
        for (int i = 0; fake_count && i < WATCHED; i++)
            before[i] = fake_count(watched[i]);
        if (fake_count)
            before_total = fake_count(NULL); /* every call the fake counts */
        check(context, kjit_synchronize(context), "synchronize");
        for (int i = 0; fake_count && i < WATCHED; i++)
            synced[i] += fake_count(watched[i]) - before[i];
        if (fake_count)
            synced_total += fake_count(NULL);
        synced_total -= before_total;
    }
    double count = (double)RUNS * per_batch;
    for (int i = 0; fake_count && i < WATCHED; i++)
        calls[i] = (double)(fake_count(watched[i]) - synced[i]) / count;
    *total = ((fake_count ? (double)fake_count(NULL) : 0) - (double)synced_total) / count;
    double median = diag_median(times, RUNS);
    *fastest = times[0];
    return median;
}

static void rows(bool as_python)
{
    kjit_options options;
    diag_options(&options, KJIT_TARGET_CUDA, as_python);
    kjit_context *context;
    check(NULL, kjit_context_create(&options, &context), "context");
    DiagAddSetup s;
    const char *failed = "";
    kjit_status status = diag_add_open(&s, context, "cuda_host.kern", source, ELEMENTS, &failed);
    check(context, status, failed);
    kjit_function *empty;
    check(context, kjit_module_function(s.module, "empty", &empty), "empty");
    Form forms[] = {
        {"kjit_call add, device arrays, out=", s.add, empty, {kjit_arg_array(&s.x),
         kjit_arg_array(&s.y)}, &s.out, NULL, 0},
        {"kjit_call_async add, device arrays, stream", s.add, empty, {kjit_arg_array(&s.x),
         kjit_arg_array(&s.y)}, &s.out, s.stream, 0},
        {"kjit_launch empty kernel, device array", s.add, empty, {kjit_arg_array(&s.x)}, NULL, NULL,
         1},
    };
    for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++) {
        double calls[WATCHED] = {0}, total = 0, fastest = 0;
        double ns = measure(context, &forms[k], calls, &total, &fastest);
        printf("| %s | %s | %.0f | %.0f |", forms[k].name, as_python ? "Python's" : "default", ns,
               fastest);
        for (int i = 0; i < WATCHED; i++)
            fake_count ? printf(" %.2f |", calls[i]) : printf(" n/a |");
        fake_count ? printf(" %.2f |\n", total) : printf(" n/a |\n");
    }
    diag_add_close(&s);
}

int main(void)
{
    char reason[512];
    if (kjit_cuda_available(reason, sizeof reason) != KJIT_OK) {
        fprintf(stderr, "cuda-host: no cuda target: %s\n", reason);
        return 1;
    }
    /* The fake driver, when it is the one loaded, says what it counted. */
    const char *fake = getenv("KJIT_CUDA_DRIVER");
    void *handle = fake && *fake ? dlopen(fake, RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (handle) {
        fake_count = (count_fn)dlsym(handle, "kjit_fake_cuda_count");
        fake_reset = (reset_fn)dlsym(handle, "kjit_fake_cuda_reset");
    }
    printf("driver: %s\n", fake_count ? fake : "the real one (libcuda.so.1)");
    printf("| call | options | host ns a call | fastest batch | cuLaunchKernel | "
           "cuCtxGetCurrent | cuCtxSetCurrent | driver calls in all |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    rows(false);
    rows(true);
    return 0;
}
