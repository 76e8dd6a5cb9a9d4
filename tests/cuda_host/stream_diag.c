/*
 * stream_diag.c: what a cuda call costs on each kind of stream (issue 26
 * item 1: on the H200, Python's add(d, e, out=f) took 4.95 us on the null
 * stream and 4.20 us with a kjit.Stream, and the C API's kjit_call 4.6 us
 * against kjit_call_async's 4.0).
 *
 *   build/stream-diag                   (the bundle's bin/stream-diag; python.sh runs it)
 *   KJIT_CUDA_DRIVER=$PWD/build/libkjit-fakecuda.so build/stream-diag
 *
 * The streams: the legacy default stream (NULL), the per-thread default
 * stream (CU_STREAM_PER_THREAD), a created blocking stream (flags 0, what
 * kjit_stream_create makes) and a created non-blocking one
 * (CU_STREAM_NON_BLOCKING).  The legacy stream is measured twice: before
 * this process has made any stream, and after (a launch on it waits for the
 * blocking streams of the context, so what it costs may grow with them).
 *
 * Rows ("| what | stream | host us | with sync us | GPU us | driver calls |"),
 * each the median of 7 batches of 2,000 calls:
 *   - host us: the batch's host time, its synchronisation outside the
 *     timing (what bin/cuda-host times);
 *   - with sync us: the batch and its synchronisation (what
 *     tests/bench/bench_python.py times): above "host us" when the GPU, not
 *     the host, sets the pace;
 *   - GPU us: the time between CUDA events recorded on the stream around a
 *     batch, a call: the GPU's own pace on that stream;
 *   - driver calls a call: on the fake driver, every call it counted (the
 *     synchronisation's taken off), else n/a.
 * The forms: the driver's bare cuLaunchKernel of an empty kernel (one block
 * of 128) and of an add of 1,000 f32 (4 blocks of 256; PTX text here, no
 * kjit), then kjit's add of 1,000 f32 device arrays: kjit_call (the null
 * stream) and kjit_call_async on kjit_stream_wrap(NULL) (the same stream
 * through the other entry point), on kjit_stream_wrap(CU_STREAM_PER_THREAD),
 * on kjit_stream_create's stream and on a wrapped non-blocking stream; on a
 * context of default options and on one of Python's (cancellable, SIGINT).
 * How to read it: where "host us" differ between streams, the driver's
 * launch costs more on one; where only "with sync" and "GPU" differ, the
 * GPU's pace does (an implicit wait per launch on the legacy stream, say);
 * where kjit_call and kjit_call_async on the same wrapped NULL stream
 * differ, kjit's entry points do.  Exit 0 when every call succeeded.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kjit.h"

#define RUNS 7
#define CALLS 2000
#define ELEMENTS 1000

typedef int CUresult;
typedef void *CUstream;
typedef void *CUevent;
typedef unsigned long long CUdeviceptr;

#define CU_STREAM_PER_THREAD ((CUstream)0x2)
#define CU_STREAM_NON_BLOCKING 0x1

static struct {
    CUresult (*DevicePrimaryCtxRetain)(void **, int);
    CUresult (*CtxSetCurrent)(void *);
    CUresult (*ModuleLoadDataEx)(void **, const void *, unsigned, int *, void **);
    CUresult (*ModuleGetFunction)(void **, void *, const char *);
    CUresult (*LaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
    CUresult (*CtxSynchronize)(void);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
} cu;

typedef long (*count_fn)(const char *);
static count_fn fake_count;
static int failures;

static const char ptx[] =
    ".version 6.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry add_like(.param .align 8 .b8 a[40], .param .align 8 .b8 b[40],\n"
    "    .param .align 8 .b8 c[40], .param .u64 n) { ret; }\n"
    ".visible .entry add_f32(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u32 n)\n"
    "{\n"
    "  .reg .pred p;\n  .reg .b32 r<6>;\n  .reg .f32 f<4>;\n  .reg .b64 rd<10>;\n"
    "  ld.param.u64 rd1, [pa];\n  ld.param.u64 rd2, [pb];\n  ld.param.u64 rd3, [pc];\n"
    "  ld.param.u32 r1, [n];\n"
    "  mov.u32 r2, %ctaid.x;\n  mov.u32 r3, %ntid.x;\n  mov.u32 r4, %tid.x;\n"
    "  mad.lo.s32 r5, r2, r3, r4;\n  setp.ge.s32 p, r5, r1;\n  @p bra DONE;\n"
    "  cvta.to.global.u64 rd4, rd1;\n  cvta.to.global.u64 rd5, rd2;\n"
    "  cvta.to.global.u64 rd6, rd3;\n  mul.wide.s32 rd7, r5, 4;\n"
    "  add.s64 rd8, rd4, rd7;\n  ld.global.f32 f1, [rd8];\n"
    "  add.s64 rd8, rd5, rd7;\n  ld.global.f32 f2, [rd8];\n"
    "  add.f32 f3, f1, f2;\n  add.s64 rd9, rd6, rd7;\n  st.global.f32 [rd9], f3;\n"
    "DONE:\n  ret;\n}\n";

static void cu_check(CUresult r, const char *what)
{
    if (r != 0) {
        fprintf(stderr, "stream-diag: %s: CUresult %d\n", what, r);
        failures++;
    }
}

static void kjit_check(kjit_context *context, kjit_status status, const char *what)
{
    if (status == KJIT_OK)
        return;
    fprintf(stderr, "stream-diag: %s: %s: %s\n", what, kjit_status_name(status),
            context ? kjit_last_error(context) : "");
    exit(1);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v)
{
    qsort(v, RUNS, sizeof *v, by_value);
    return v[RUNS / 2];
}

/* One call of a form; its stream is where the events go and what is synced. */
typedef struct Form {
    const char *what;
    const char *stream_name;
    CUstream stream;
    /* the driver's own launch */
    void *function;
    unsigned grid, block;
    void **params;
    /* kjit's */
    kjit_context *context;
    kjit_function *add;
    kjit_arg args[2];
    kjit_array *out;
    kjit_stream *on; /* NULL: kjit_call */
} Form;

static void run_form(const Form *f)
{
    if (f->function) {
        cu_check(cu.LaunchKernel(f->function, f->grid, 1, 1, f->block, 1, 1, 0, f->stream,
                                 f->params, NULL), "cuLaunchKernel");
        return;
    }
    kjit_status status = f->on ? kjit_call_async(f->add, f->args, 2, f->out, f->on)
                               : kjit_call(f->add, f->args, 2, f->out, NULL);
    kjit_check(f->context, status, f->what);
}

/* kjit_synchronize for kjit's forms (what Python's sync does), the stream's
 * for the driver's */
static void sync_form(const Form *f)
{
    if (f->function)
        cu_check(f->stream ? cu.StreamSynchronize(f->stream) : cu.CtxSynchronize(), "sync");
    else
        kjit_check(f->context, f->on ? kjit_stream_synchronize(f->on)
                                     : kjit_synchronize(f->context), "synchronize");
}

static long counted(void)
{
    return fake_count ? fake_count(NULL) : 0;
}

static void measure(const Form *f)
{
    double host[RUNS], synced[RUNS], gpu[RUNS];
    long calls = 0;
    CUevent start, end;
    cu_check(cu.EventCreate(&start, 0), "cuEventCreate");
    cu_check(cu.EventCreate(&end, 0), "cuEventCreate");
    run_form(f); /* code generated, block size asked */
    sync_form(f);
    for (int r = 0; r < RUNS; r++) {
        /* the batch, its synchronisation outside the timing */
        long before = counted();
        double t0 = now_us();
        for (int i = 0; i < CALLS; i++)
            run_form(f);
        host[r] = (now_us() - t0) / CALLS;
        calls += counted() - before;
        sync_form(f);
        /* the batch and its synchronisation */
        t0 = now_us();
        for (int i = 0; i < CALLS; i++)
            run_form(f);
        sync_form(f);
        synced[r] = (now_us() - t0) / CALLS;
        /* the GPU's pace on the stream (the events are outside the counts) */
        cu_check(cu.EventRecord(start, f->stream), "cuEventRecord");
        for (int i = 0; i < CALLS; i++)
            run_form(f);
        cu_check(cu.EventRecord(end, f->stream), "cuEventRecord");
        cu_check(cu.EventSynchronize(end), "cuEventSynchronize");
        float ms = 0;
        cu_check(cu.EventElapsedTime(&ms, start, end), "cuEventElapsedTime");
        gpu[r] = ms * 1e3 / CALLS;
        sync_form(f);
    }
    printf("| %s | %s | %.2f | %.2f | %.2f |", f->what, f->stream_name, median(host),
           median(synced), median(gpu));
    if (fake_count)
        printf(" %.2f |\n", (double)calls / ((double)RUNS * CALLS));
    else
        printf(" n/a |\n");
}

static void *resolve(void *driver, const char *name, const char *other)
{
    void *p = dlsym(driver, name);
    if (!p && other)
        p = dlsym(driver, other);
    if (!p) {
        fprintf(stderr, "stream-diag: the driver has no %s\n", name);
        exit(1);
    }
    return p;
}

static void load_driver(void)
{
    /* the driver kjit loaded (it is loaded by the first context) */
    const char *fake = getenv("KJIT_CUDA_DRIVER");
    const char *path = fake && *fake ? fake : "libcuda.so.1";
    void *driver = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!driver)
        driver = dlopen(path, RTLD_NOW);
    if (!driver) {
        fprintf(stderr, "stream-diag: cannot load %s: %s\n", path, dlerror());
        exit(1);
    }
    if (fake && *fake)
        fake_count = (count_fn)dlsym(driver, "kjit_fake_cuda_count");
    *(void **)&cu.DevicePrimaryCtxRetain = resolve(driver, "cuDevicePrimaryCtxRetain", NULL);
    *(void **)&cu.CtxSetCurrent = resolve(driver, "cuCtxSetCurrent", NULL);
    *(void **)&cu.ModuleLoadDataEx = resolve(driver, "cuModuleLoadDataEx", NULL);
    *(void **)&cu.ModuleGetFunction = resolve(driver, "cuModuleGetFunction", NULL);
    *(void **)&cu.LaunchKernel = resolve(driver, "cuLaunchKernel", NULL);
    *(void **)&cu.CtxSynchronize = resolve(driver, "cuCtxSynchronize", NULL);
    *(void **)&cu.StreamCreate = resolve(driver, "cuStreamCreate", NULL);
    *(void **)&cu.StreamSynchronize = resolve(driver, "cuStreamSynchronize", NULL);
    *(void **)&cu.StreamDestroy = resolve(driver, "cuStreamDestroy_v2", NULL);
    *(void **)&cu.EventCreate = resolve(driver, "cuEventCreate", NULL);
    *(void **)&cu.EventRecord = resolve(driver, "cuEventRecord", NULL);
    *(void **)&cu.EventSynchronize = resolve(driver, "cuEventSynchronize", NULL);
    *(void **)&cu.EventElapsedTime = resolve(driver, "cuEventElapsedTime", "cuEventElapsedTime_v2");
    *(void **)&cu.MemAlloc = resolve(driver, "cuMemAlloc_v2", NULL);
}

static kjit_context *open_context(bool as_python)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CUDA;
    if (as_python) { /* what the Python package's contexts ask for (_core.py) */
        options.cancellable = 1;
        options.cancel_signal = SIGINT;
    }
    kjit_context *context;
    kjit_check(NULL, kjit_context_create(&options, &context), "context");
    return context;
}

static const char source[] = "@vectorize\nfn add(a: f32, b: f32) -> f32 {\n    return a + b;\n}\n";

/* kjit's add on every stream, on one context. */
static void kjit_rows(kjit_context *context, const char *options, CUstream non_blocking)
{
    kjit_module *module;
    kjit_check(context, kjit_compile_string(context, "stream_diag.kern", source, &module),
               "compile");
    kjit_function *add;
    kjit_check(context, kjit_module_function(module, "add", &add), "add");
    int64_t shape[1] = {ELEMENTS};
    kjit_array x, y, out;
    kjit_check(context, kjit_device_alloc(context, KJIT_F32, 1, shape, &x), "alloc");
    kjit_check(context, kjit_device_alloc(context, KJIT_F32, 1, shape, &y), "alloc");
    kjit_check(context, kjit_device_alloc(context, KJIT_F32, 1, shape, &out), "alloc");
    kjit_stream *legacy, *per_thread, *made, *nb;
    kjit_check(context, kjit_stream_wrap(context, NULL, &legacy), "wrap NULL");
    kjit_check(context, kjit_stream_wrap(context, CU_STREAM_PER_THREAD, &per_thread),
               "wrap CU_STREAM_PER_THREAD");
    kjit_check(context, kjit_stream_create(context, &made), "kjit_stream_create");
    kjit_check(context, kjit_stream_wrap(context, non_blocking, &nb), "wrap non-blocking");
    char what[5][96];
    snprintf(what[0], sizeof what[0], "kjit_call add, %s options", options);
    for (int i = 1; i < 5; i++)
        snprintf(what[i], sizeof what[i], "kjit_call_async add, %s options", options);
    Form forms[] = {
        {.what = what[0], .stream_name = "legacy (NULL)", .stream = NULL, .on = NULL},
        {.what = what[1], .stream_name = "legacy (kjit_stream_wrap(NULL))", .stream = NULL,
         .on = legacy},
        {.what = what[2], .stream_name = "per-thread", .stream = CU_STREAM_PER_THREAD,
         .on = per_thread},
        {.what = what[3], .stream_name = "created, blocking (kjit_stream_create)",
         .stream = kjit_stream_handle(made), .on = made},
        {.what = what[4], .stream_name = "created, non-blocking", .stream = non_blocking,
         .on = nb},
    };
    for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++) {
        forms[k].context = context;
        forms[k].add = add;
        forms[k].args[0] = kjit_arg_array(&x);
        forms[k].args[1] = kjit_arg_array(&y);
        forms[k].out = &out;
        measure(&forms[k]);
    }
    kjit_stream_destroy(legacy);
    kjit_stream_destroy(per_thread);
    kjit_stream_destroy(made);
    kjit_stream_destroy(nb);
    kjit_device_free(context, &x);
    kjit_device_free(context, &y);
    kjit_device_free(context, &out);
    kjit_module_free(module);
}

int main(void)
{
    char reason[512];
    if (kjit_cuda_available(reason, sizeof reason) != KJIT_OK) {
        fprintf(stderr, "stream-diag: no cuda target: %s\n", reason);
        return 1;
    }
    kjit_context *plain = open_context(false); /* loads the driver, makes no stream */
    load_driver();
    printf("driver: %s\n", fake_count ? getenv("KJIT_CUDA_DRIVER") : "the real one (libcuda.so.1)");
    void *primary, *module, *empty, *add;
    cu_check(cu.DevicePrimaryCtxRetain(&primary, 0), "cuDevicePrimaryCtxRetain");
    cu_check(cu.CtxSetCurrent(primary), "cuCtxSetCurrent");
    cu_check(cu.ModuleLoadDataEx(&module, ptx, 0, NULL, NULL), "cuModuleLoadDataEx");
    cu_check(cu.ModuleGetFunction(&empty, module, "add_like"), "cuModuleGetFunction");
    cu_check(cu.ModuleGetFunction(&add, module, "add_f32"), "cuModuleGetFunction");
    if (failures)
        return 1;
    CUdeviceptr a = 0, b = 0, c = 0;
    cu_check(cu.MemAlloc(&a, ELEMENTS * 4), "cuMemAlloc");
    cu_check(cu.MemAlloc(&b, ELEMENTS * 4), "cuMemAlloc");
    cu_check(cu.MemAlloc(&c, ELEMENTS * 4), "cuMemAlloc");
    char descriptor[3][40] = {{0}};
    uint64_t n64 = ELEMENTS;
    unsigned n32 = ELEMENTS;
    void *empty_params[] = {descriptor[0], descriptor[1], descriptor[2], &n64};
    void *add_params[] = {&a, &b, &c, &n32};

    printf("| what | stream | host us | with sync us | GPU us | driver calls |\n");
    printf("| --- | --- | --- | --- | --- | --- |\n");
    Form bare[] = {
        {.what = "bare cuLaunchKernel, empty", .function = empty, .grid = 1, .block = 128,
         .params = empty_params},
        {.what = "bare cuLaunchKernel, add 1,000 f32", .function = add,
         .grid = (ELEMENTS + 255) / 256, .block = 256, .params = add_params},
    };
    /* half a second of launches first: bench_python.py's first cuda row read
     * 0.9 us more than the same call measured later in the process */
    for (double until = now_us() + 5e5; now_us() < until;)
        for (int i = 0; i < 100; i++)
            run_form(&bare[0]);
    cu_check(cu.CtxSynchronize(), "sync");
    /* the legacy stream before any stream is made in this process */
    for (int k = 0; k < 2; k++) {
        bare[k].stream_name = "legacy, no stream made yet";
        bare[k].stream = NULL;
        measure(&bare[k]);
    }
    CUstream created, non_blocking;
    cu_check(cu.StreamCreate(&created, 0), "cuStreamCreate");
    cu_check(cu.StreamCreate(&non_blocking, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    if (failures)
        return 1;
    struct { const char *name; CUstream stream; } streams[] = {
        {"legacy (NULL)", NULL},
        {"per-thread", CU_STREAM_PER_THREAD},
        {"created, blocking", created},
        {"created, non-blocking", non_blocking},
    };
    for (int k = 0; k < 2; k++)
        for (size_t s = 0; s < sizeof streams / sizeof streams[0]; s++) {
            bare[k].stream_name = streams[s].name;
            bare[k].stream = streams[s].stream;
            measure(&bare[k]);
        }
    kjit_rows(plain, "default", non_blocking);
    kjit_context_destroy(plain);
    kjit_context *python = open_context(true);
    kjit_rows(python, "Python's", non_blocking);
    kjit_context_destroy(python);
    cu_check(cu.StreamDestroy(created), "cuStreamDestroy");
    cu_check(cu.StreamDestroy(non_blocking), "cuStreamDestroy");
    printf("stream-diag: %d failed driver calls\n", failures);
    return failures ? 1 : 0;
}
