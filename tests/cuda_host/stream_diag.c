/*
 * stream_diag.c: what a cuda call costs on each kind of stream, and in each
 * form the driver takes a launch in (issue 26 item 1: on the H200s Python's
 * add(d, e, out=f) took 3.9-5.7 us, the C API's kjit_call 3.0-5.0 us, the
 * driver's bare cuLaunchKernel 2.9-5 us, by machine).
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
 * each the median of 7 batches of 2,000 calls (21 in the two groups of forms,
 * whose rows differ by less: each ends with a line of its ratios), the rows
 * of one group taking turns batch by batch (so a machine that slows down
 * mid-run slows them all):
 *   - host us: the batch's host time, its synchronisation outside the
 *     timing (what bin/cuda-host times);
 *   - with sync us: the batch and its synchronisation (what
 *     tests/bench/bench_python.py times): above "host us" when the GPU, not
 *     the host, sets the pace;
 *   - GPU us: the time between CUDA events recorded on the stream around a
 *     batch, a call: the GPU's own pace on that stream;
 *   - driver calls a call: on the fake driver, every call it counted (the
 *     synchronisation's taken off), else n/a.
 * The groups:
 *   - the driver's bare cuLaunchKernel of an empty kernel (one block of 128)
 *     and of an add of 1,000 f32 (4 blocks of 256; PTX text here, no kjit)
 *     on each stream;
 *   - the launch's forms, the add on the legacy stream: kjit's parameters
 *     (three array descriptors {data, extent} of 16 bytes) with
 *     kernelParams (a pointer each, the driver copies each) and as one
 *     packed `extra` buffer (CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END,
 *     one copy), each through cuLaunchKernel and cuLaunchKernelEx (a
 *     CUlaunchConfig with no attributes; "n/a" where the driver has none);
 *     then fewer parameters: the three pointers and the count as one 32-byte
 *     struct, and as four scalars (kernelParams and `extra`);
 *   - kjit's add of 1,000 f32 device arrays: kjit_call (the null stream)
 *     and kjit_call_async on kjit_stream_wrap(NULL) (the same stream
 *     through the other entry point), on kjit_stream_wrap(
 *     CU_STREAM_PER_THREAD), on kjit_stream_create's stream and on a wrapped
 *     non-blocking stream; on a context of default options and on one of
 *     Python's (cancellable, SIGINT);
 *   - kjit's add in the two forms libkjit can pass its parameters in, on
 *     two contexts of Python's options side by side: KJIT_CUDA_PARAMS=
 *     pointers (kernelParams, the form before) and =buffer (one packed
 *     buffer, the default), kjit_call and kjit_call_async on a created
 *     stream; on a GPU each form's result is checked against x + y ("results
 *     ... identical" or a failure).
 * How to read it: where "host us" differ between streams or forms, the
 * driver's launch costs more in one; where only "with sync" and "GPU"
 * differ, the GPU's pace does (an implicit wait per launch on the legacy
 * stream, say); where kjit_call and kjit_call_async on the same wrapped NULL
 * stream differ, kjit's entry points do.  Exit 0 when every call succeeded.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag_common.h"
#include "kjit.h"

#define RUNS 7
/* the two groups of forms, whose rows differ by less than the machine's
 * spread: more turns */
#define FORM_RUNS 21
#define CALLS 2000
#define ELEMENTS 1000

typedef int CUresult;
typedef void *CUstream;
typedef void *CUevent;
typedef unsigned long long CUdeviceptr;

#define CU_STREAM_PER_THREAD ((CUstream)0x2)
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_LAUNCH_PARAM_END ((void *)0x00)
#define CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

/* cuda.h's CUlaunchConfig (CUDA 11.8 on) */
typedef struct LaunchConfig {
    unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
    CUstream stream;
    void *attributes;
    unsigned attribute_count;
} LaunchConfig;

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
    CUresult (*LaunchKernelEx)(const LaunchConfig *, void *, void **, void **); /* or NULL */
} cu;

typedef long (*count_fn)(const char *);
static count_fn fake_count;
static int failures;

/* The add's PTX, in the pieces its three entries below share: registers
 * (add_desc, add_struct), the thread's index r5 and the branch past the end
 * when it is not below the count in rd10 (the same two), and the body: c[i]
 * = a[i] + b[i] from the pointers in rd1, rd2, rd3 (all three). */
#define ADD_F32_REGS                                                                      \
    "{\n"                                                                                 \
    "  .reg .pred p;\n  .reg .b32 r<6>;\n  .reg .f32 f<4>;\n  .reg .b64 rd<12>;\n"
#define ADD_F32_INDEX_BELOW_RD10                                                          \
    "  mov.u32 r2, %ctaid.x;\n  mov.u32 r3, %ntid.x;\n  mov.u32 r4, %tid.x;\n"             \
    "  mad.lo.s32 r5, r2, r3, r4;\n  cvt.s64.s32 rd11, r5;\n  setp.ge.s64 p, rd11, rd10;\n" \
    "  @p bra DONE;\n"
#define ADD_F32_BODY                                                                      \
    "  cvta.to.global.u64 rd4, rd1;\n  cvta.to.global.u64 rd5, rd2;\n"                    \
    "  cvta.to.global.u64 rd6, rd3;\n  mul.wide.s32 rd7, r5, 4;\n"                        \
    "  add.s64 rd8, rd4, rd7;\n  ld.global.f32 f1, [rd8];\n"                              \
    "  add.s64 rd8, rd5, rd7;\n  ld.global.f32 f2, [rd8];\n"                              \
    "  add.f32 f3, f1, f2;\n  add.s64 rd9, rd6, rd7;\n  st.global.f32 [rd9], f3;\n"      \
    "DONE:\n  ret;\n}\n"

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
    ADD_F32_BODY
    /* kjit's form of the add: each array a {data, extent} of 16 bytes */
    ".visible .entry add_desc(.param .align 8 .b8 a[16], .param .align 8 .b8 b[16],\n"
    "    .param .align 8 .b8 c[16])\n"
    ADD_F32_REGS
    "  ld.param.u64 rd1, [a];\n  ld.param.u64 rd2, [b];\n  ld.param.u64 rd3, [c];\n"
    "  ld.param.u64 rd10, [c+8];\n"
    ADD_F32_INDEX_BELOW_RD10
    ADD_F32_BODY
    /* fewer, larger parameters: the three pointers and the count as one struct */
    ".visible .entry add_struct(.param .align 8 .b8 s[32])\n"
    ADD_F32_REGS
    "  ld.param.u64 rd1, [s];\n  ld.param.u64 rd2, [s+8];\n  ld.param.u64 rd3, [s+16];\n"
    "  ld.param.u64 rd10, [s+24];\n"
    ADD_F32_INDEX_BELOW_RD10
    ADD_F32_BODY;

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

/* How a bare launch hands the driver its parameters. */
typedef enum How { BY_POINTERS, BY_BUFFER, EX_POINTERS, EX_BUFFER } How;

/* One call of a form; its stream is where the events go and what is synced. */
typedef struct Form {
    const char *what;
    const char *stream_name;
    CUstream stream;
    /* the driver's own launch */
    void *function;
    unsigned grid, block;
    How how;
    void **params;      /* kernelParams */
    void *buffer;       /* or the packed parameters */
    size_t buffer_size;
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
        size_t size = f->buffer_size;
        void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, f->buffer, CU_LAUNCH_PARAM_BUFFER_SIZE,
                         &size, CU_LAUNCH_PARAM_END};
        bool packed = f->how == BY_BUFFER || f->how == EX_BUFFER;
        if (f->how == EX_POINTERS || f->how == EX_BUFFER) {
            LaunchConfig config = {f->grid, 1, 1, f->block, 1, 1, 0, f->stream, NULL, 0};
            cu_check(cu.LaunchKernelEx(&config, f->function, packed ? NULL : f->params,
                                       packed ? extra : NULL), "cuLaunchKernelEx");
        } else {
            cu_check(cu.LaunchKernel(f->function, f->grid, 1, 1, f->block, 1, 1, 0, f->stream,
                                     packed ? NULL : f->params, packed ? extra : NULL),
                     "cuLaunchKernel");
        }
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

/* The forms' rows, their batches taking turns (run r of every form, then
 * run r + 1), so that what the machine does meanwhile falls on all of them;
 * each form's median host us in host_us[k] when host_us is not NULL. */
static void measure_group(const Form *forms, int n, int runs, double *host_us)
{
    double host[n][runs], synced[n][runs], gpu[n][runs];
    long calls[n];
    CUevent start, end;
    cu_check(cu.EventCreate(&start, 0), "cuEventCreate");
    cu_check(cu.EventCreate(&end, 0), "cuEventCreate");
    for (int k = 0; k < n; k++) {
        calls[k] = 0;
        run_form(&forms[k]); /* code generated, block size asked */
        sync_form(&forms[k]);
    }
    for (int r = 0; r < runs; r++)
        for (int k = 0; k < n; k++) {
            const Form *f = &forms[k];
            /* the batch, its synchronisation outside the timing */
            long before = counted();
            double t0 = diag_now_us();
            for (int i = 0; i < CALLS; i++)
                run_form(f);
            host[k][r] = (diag_now_us() - t0) / CALLS;
            calls[k] += counted() - before;
            sync_form(f);
            /* the batch and its synchronisation */
            t0 = diag_now_us();
            for (int i = 0; i < CALLS; i++)
                run_form(f);
            sync_form(f);
            synced[k][r] = (diag_now_us() - t0) / CALLS;
            /* the GPU's pace on the stream (the events are outside the counts) */
            cu_check(cu.EventRecord(start, f->stream), "cuEventRecord");
            for (int i = 0; i < CALLS; i++)
                run_form(f);
            cu_check(cu.EventRecord(end, f->stream), "cuEventRecord");
            cu_check(cu.EventSynchronize(end), "cuEventSynchronize");
            float ms = 0;
            cu_check(cu.EventElapsedTime(&ms, start, end), "cuEventElapsedTime");
            gpu[k][r] = ms * 1e3 / CALLS;
            sync_form(f);
        }
    for (int k = 0; k < n; k++) {
        double median = diag_median(host[k], runs);
        if (host_us)
            host_us[k] = median;
        printf("| %s | %s | %.2f | %.2f | %.2f |", forms[k].what, forms[k].stream_name, median,
               diag_median(synced[k], runs), diag_median(gpu[k], runs));
        if (fake_count)
            printf(" %.2f |\n", (double)calls[k] / ((double)runs * CALLS));
        else
            printf(" n/a |\n");
    }
}

static void measure(const Form *f)
{
    measure_group(f, 1, RUNS, NULL);
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
    *(void **)&cu.LaunchKernelEx = dlsym(driver, "cuLaunchKernelEx"); /* CUDA 11.8 on */
}

static kjit_context *open_context(bool as_python)
{
    kjit_options options;
    diag_options(&options, KJIT_TARGET_CUDA, as_python);
    kjit_context *context;
    kjit_check(NULL, kjit_context_create(&options, &context), "context");
    return context;
}

static const char source[] = "@vectorize\nfn add(a: f32, b: f32) -> f32 {\n    return a + b;\n}\n";

/* kjit's add on every stream, on one context (closed here). */
static void kjit_rows(kjit_context *context, const char *options, CUstream non_blocking)
{
    DiagAddSetup s;
    const char *failed = "";
    kjit_status status = diag_add_open(&s, context, "stream_diag.kern", source, ELEMENTS, &failed);
    kjit_check(context, status, failed);
    kjit_stream *legacy, *per_thread, *made = s.stream, *nb;
    kjit_check(context, kjit_stream_wrap(context, NULL, &legacy), "wrap NULL");
    kjit_check(context, kjit_stream_wrap(context, CU_STREAM_PER_THREAD, &per_thread),
               "wrap CU_STREAM_PER_THREAD");
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
        forms[k].add = s.add;
        forms[k].args[0] = kjit_arg_array(&s.x);
        forms[k].args[1] = kjit_arg_array(&s.y);
        forms[k].out = &s.out;
        measure(&forms[k]);
    }
    kjit_stream_destroy(legacy);
    kjit_stream_destroy(per_thread);
    kjit_stream_destroy(nb);
    diag_add_close(&s);
}

/* The driver's forms of the launch, the add on the legacy stream, side by
 * side (a, b, c: its arrays). */
static void driver_forms(void *module, void *add_f32, CUdeviceptr a, CUdeviceptr b,
                         CUdeviceptr c)
{
    void *add_desc, *add_struct;
    cu_check(cu.ModuleGetFunction(&add_desc, module, "add_desc"), "cuModuleGetFunction");
    cu_check(cu.ModuleGetFunction(&add_struct, module, "add_struct"), "cuModuleGetFunction");
    if (failures)
        return;
    /* kjit's descriptors of a contiguous 1-d array: {data, extent} */
    uint64_t desc[3][2] = {{a, ELEMENTS}, {b, ELEMENTS}, {c, ELEMENTS}};
    void *desc_params[] = {desc[0], desc[1], desc[2]};
    uint64_t one[4] = {a, b, c, ELEMENTS};
    void *struct_params[] = {one};
    unsigned n32 = ELEMENTS;
    void *scalar_params[] = {&a, &b, &c, &n32};
    _Alignas(8) unsigned char scalars[28]; /* as the .entry lays them out: no tail padding */
    memcpy(scalars, &a, 8);
    memcpy(scalars + 8, &b, 8);
    memcpy(scalars + 16, &c, 8);
    memcpy(scalars + 24, &n32, 4);
    unsigned grid = (ELEMENTS + 255) / 256;
    Form forms[] = {
        {.what = "launch form: cuLaunchKernel, kernelParams, 3 descriptors of 16 bytes "
                 "(kjit's before)", .function = add_desc, .how = BY_POINTERS,
         .params = desc_params},
        {.what = "launch form: cuLaunchKernel, one extra buffer of 48 bytes, 3 descriptors "
                 "(kjit's now)", .function = add_desc, .how = BY_BUFFER, .buffer = desc,
         .buffer_size = sizeof desc},
        {.what = "launch form: cuLaunchKernelEx, kernelParams, 3 descriptors",
         .function = add_desc, .how = EX_POINTERS, .params = desc_params},
        {.what = "launch form: cuLaunchKernelEx, one extra buffer, 3 descriptors",
         .function = add_desc, .how = EX_BUFFER, .buffer = desc, .buffer_size = sizeof desc},
        {.what = "launch form: cuLaunchKernel, kernelParams, one struct of 32 bytes",
         .function = add_struct, .how = BY_POINTERS, .params = struct_params},
        {.what = "launch form: cuLaunchKernel, kernelParams, 4 scalars", .function = add_f32,
         .how = BY_POINTERS, .params = scalar_params},
        {.what = "launch form: cuLaunchKernel, one extra buffer of 28 bytes, 4 scalars",
         .function = add_f32, .how = BY_BUFFER, .buffer = scalars,
         .buffer_size = sizeof scalars},
    };
    int n = 0;
    Form kept[sizeof forms / sizeof forms[0]];
    double host[sizeof forms / sizeof forms[0]];
    for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++) {
        forms[k].stream_name = "legacy (NULL)";
        forms[k].grid = grid;
        forms[k].block = 256;
        bool ex = forms[k].how == EX_POINTERS || forms[k].how == EX_BUFFER;
        if (ex && !cu.LaunchKernelEx)
            printf("| %s | legacy (NULL) | n/a | n/a | n/a | the driver has no "
                   "cuLaunchKernelEx |\n", forms[k].what);
        else
            kept[n++] = forms[k];
    }
    measure_group(kept, n, FORM_RUNS, host);
    /* each form's host time over the first's, kjit's form before */
    printf("launch forms' host us over kernelParams' (the first row), %d turns:", FORM_RUNS);
    for (int k = 1; k < n; k++)
        printf(" %.3fx", host[k] / host[0]);
    printf("\n");
}

/* A context of Python's options whose vectorized calls pass their parameters
 * as KJIT_CUDA_PARAMS says (`form`). */
static kjit_context *open_form_context(const char *form)
{
    const char *was = getenv("KJIT_CUDA_PARAMS");
    char *saved = was ? strdup(was) : NULL;
    setenv("KJIT_CUDA_PARAMS", form, 1);
    kjit_context *context = open_context(true);
    if (saved)
        setenv("KJIT_CUDA_PARAMS", saved, 1);
    else
        unsetenv("KJIT_CUDA_PARAMS");
    free(saved);
    return context;
}

/* One form's context: the add, its arrays (x = i, y = 2i) and a stream. */
static DiagAddSetup form_setup(const char *form)
{
    DiagAddSetup s;
    const char *what = "";
    kjit_context *context = open_form_context(form);
    kjit_status status = diag_add_open(&s, context, "stream_diag.kern", source, ELEMENTS, &what);
    kjit_check(context, status, what);
    static float host_x[ELEMENTS], host_y[ELEMENTS];
    for (int i = 0; i < ELEMENTS; i++) {
        host_x[i] = (float)i;
        host_y[i] = 2.0f * (float)i;
    }
    int64_t shape[1] = {ELEMENTS};
    kjit_array hx = kjit_array_make(host_x, KJIT_F32, 1, shape);
    kjit_array hy = kjit_array_make(host_y, KJIT_F32, 1, shape);
    kjit_check(s.context, kjit_copy(s.context, &s.x, &hx, NULL), "copy x");
    kjit_check(s.context, kjit_copy(s.context, &s.y, &hy, NULL), "copy y");
    return s;
}

/* Whether a form's call wrote x + y (out cleared first); on the fake driver,
 * which runs no kernel, not asked. */
static bool form_result_right(const Form *f)
{
    static float zero[ELEMENTS], got[ELEMENTS];
    int64_t shape[1] = {ELEMENTS};
    kjit_array hz = kjit_array_make(zero, KJIT_F32, 1, shape);
    kjit_array hg = kjit_array_make(got, KJIT_F32, 1, shape);
    kjit_check(f->context, kjit_copy(f->context, f->out, &hz, NULL), "clear out");
    run_form(f);
    sync_form(f);
    kjit_check(f->context, kjit_copy(f->context, &hg, f->out, NULL), "copy out");
    for (int i = 0; i < ELEMENTS; i++)
        if (got[i] != 3.0f * (float)i) {
            fprintf(stderr, "stream-diag: %s: element %d is %g, not %g\n", f->what, i,
                    (double)got[i], 3.0 * i);
            return false;
        }
    return true;
}

/* kjit's add with its parameters as a pointer each and as one buffer, on
 * contexts of Python's options side by side. */
static void kjit_param_forms(void)
{
    DiagAddSetup pointers = form_setup("pointers"), buffer = form_setup("buffer");
    DiagAddSetup *setups[2] = {&pointers, &buffer};
    static const char *const names[4] = {
        "kjit_call add, Python's options, KJIT_CUDA_PARAMS=pointers (kernelParams, before)",
        "kjit_call add, Python's options, KJIT_CUDA_PARAMS=buffer (one extra buffer, now)",
        "kjit_call_async add, Python's options, KJIT_CUDA_PARAMS=pointers",
        "kjit_call_async add, Python's options, KJIT_CUDA_PARAMS=buffer",
    };
    Form forms[4];
    for (int k = 0; k < 4; k++) {
        DiagAddSetup *s = setups[k % 2];
        bool on_stream = k >= 2;
        forms[k] = (Form){.what = names[k],
                          .stream_name = on_stream ? "created, blocking (kjit_stream_create)"
                                                   : "legacy (NULL)",
                          .stream = on_stream ? kjit_stream_handle(s->stream) : NULL,
                          .context = s->context, .add = s->add,
                          .args = {kjit_arg_array(&s->x), kjit_arg_array(&s->y)},
                          .out = &s->out, .on = on_stream ? s->stream : NULL};
    }
    double host[4];
    measure_group(forms, 4, FORM_RUNS, host);
    printf("kjit's packed parameters over its pointers, host us, %d turns: kjit_call %.3fx "
           "(%+.3f us), kjit_call_async %.3fx (%+.3f us)\n", FORM_RUNS, host[1] / host[0],
           host[1] - host[0], host[3] / host[2], host[3] - host[2]);
    if (fake_count) {
        printf("results of the two forms: not checked (the fake driver runs no kernel)\n");
    } else {
        int wrong = 0;
        for (int k = 0; k < 4; k++)
            wrong += !form_result_right(&forms[k]);
        printf("results of the two forms: %s\n",
               wrong ? "DIFFER (see above)" : "x + y on every row, identical");
        failures += wrong;
    }
    diag_add_close(&pointers);
    diag_add_close(&buffer);
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
    for (double until = diag_now_us() + 5e5; diag_now_us() < until;)
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
    driver_forms(module, add, a, b, c);
    kjit_rows(plain, "default", non_blocking);
    kjit_rows(open_context(true), "Python's", non_blocking);
    kjit_param_forms();
    cu_check(cu.StreamDestroy(created), "cuStreamDestroy");
    cu_check(cu.StreamDestroy(non_blocking), "cuStreamDestroy");
    printf("stream-diag: %d failed driver calls\n", failures);
    return failures ? 1 : 0;
}
