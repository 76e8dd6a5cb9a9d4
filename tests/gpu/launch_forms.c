/* tests/gpu/launch_forms.c: what the driver charges for the forms a kjit call
 * on cuda could take (issue 26 items 1 and 2), measured on the real driver
 * with no kjit in the way.  Built on the GPU machine with its cc (no CUDA
 * toolkit needed: libcuda.so.1 is dlopened, the kernel is PTX text here):
 *
 *   cc -O2 -o launch-forms tests/gpu/launch_forms.c -ldl && ./launch-forms
 *
 * Rows ("| form | us a call | note |"), each the median of 7 batches of
 * 2,000 calls, each batch synchronised at its end, host time:
 *   - cuLaunchKernel of an empty kernel of kjit's add parameters (three
 *     array descriptors of 40 bytes and an i64 count) with kernelParams
 *     (one pointer a parameter, the driver copies each), and with one
 *     CU_LAUNCH_PARAM_BUFFER_POINTER buffer in `extra` (one copy);
 *   - the same with 4 i64 parameters (a smaller argument block);
 *   - on the null stream and on a created stream;
 *   - cuMemAlloc + cuMemFree of 4,000 bytes against cuMemAllocAsync +
 *     cuMemFreeAsync on a stream (the driver's stream-ordered pool), each
 *     pair once a call, so what a result array built without a pool of
 *     kjit's own would cost;
 *   - a launch followed by cuMemAllocAsync/cuMemFreeAsync of its output (the
 *     whole call without out= built on the driver's pool).
 * Exit status 0 when every driver call succeeded. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef void *CUfunc;
typedef void *CUmod;
typedef void *CUctx;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;

static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGet)(int *, int);
static CUresult (*cuDevicePrimaryCtxRetain)(CUctx *, int);
static CUresult (*cuCtxSetCurrent)(CUctx);
static CUresult (*cuModuleLoadDataEx)(CUmod *, const void *, unsigned, int *, void **);
static CUresult (*cuModuleGetFunction)(CUfunc *, CUmod, const char *);
static CUresult (*cuLaunchKernel)(CUfunc, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  unsigned, unsigned, CUstream, void **, void **);
static CUresult (*cuCtxSynchronize)(void);
static CUresult (*cuStreamCreate)(CUstream *, unsigned);
static CUresult (*cuStreamSynchronize)(CUstream);
static CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*cuMemFree)(CUdeviceptr);
static CUresult (*cuMemAllocAsync)(CUdeviceptr *, size_t, CUstream);
static CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);

#define CU_LAUNCH_PARAM_END ((void *)0x00)
#define CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

/* kjit passes an array as a descriptor; 40 bytes stands for one (data,
 * memory kind, rank, extent, stride) of a 1-D array. */
static const char ptx[] =
    ".version 6.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry add_like(.param .align 8 .b8 a[40], .param .align 8 .b8 b[40],\n"
    "    .param .align 8 .b8 c[40], .param .u64 n) { ret; }\n"
    ".visible .entry four(.param .u64 a, .param .u64 b, .param .u64 c, .param .u64 n) "
    "{ ret; }\n";

static int failures;

static void check(CUresult r, const char *what)
{
    if (r != 0) {
        fprintf(stderr, "%s: CUresult %d\n", what, r);
        failures++;
    }
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { RUNS = 7, CALLS = 2000 };

typedef void (*Body)(void *);

static double median_us(Body body, void *arg, CUstream sync_on)
{
    double runs[RUNS];
    body(arg);
    check(sync_on ? cuStreamSynchronize(sync_on) : cuCtxSynchronize(), "sync");
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_us();
        for (int i = 0; i < CALLS; i++)
            body(arg);
        check(sync_on ? cuStreamSynchronize(sync_on) : cuCtxSynchronize(), "sync");
        runs[r] = (now_us() - t0) / CALLS;
    }
    qsort(runs, RUNS, sizeof runs[0], cmp);
    return runs[RUNS / 2];
}

typedef struct {
    CUfunc f;
    CUstream stream;
    void **params;
    void *buffer;
    size_t size;
} Launch;

static void by_params(void *p)
{
    Launch *l = p;
    check(cuLaunchKernel(l->f, 1, 1, 1, 128, 1, 1, 0, l->stream, l->params, NULL),
          "cuLaunchKernel(kernelParams)");
}

static void by_extra(void *p)
{
    Launch *l = p;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, l->buffer, CU_LAUNCH_PARAM_BUFFER_SIZE,
                     &l->size, CU_LAUNCH_PARAM_END};
    check(cuLaunchKernel(l->f, 1, 1, 1, 128, 1, 1, 0, l->stream, NULL, extra),
          "cuLaunchKernel(extra)");
}

static CUstream alloc_stream;

static void alloc_free(void *p)
{
    (void)p;
    CUdeviceptr d;
    check(cuMemAlloc(&d, 4000), "cuMemAlloc");
    check(cuMemFree(d), "cuMemFree");
}

static void alloc_free_async(void *p)
{
    (void)p;
    CUdeviceptr d;
    check(cuMemAllocAsync(&d, 4000, alloc_stream), "cuMemAllocAsync");
    check(cuMemFreeAsync(d, alloc_stream), "cuMemFreeAsync");
}

static void launch_with_async_output(void *p)
{
    Launch *l = p;
    CUdeviceptr d;
    check(cuMemAllocAsync(&d, 4000, l->stream), "cuMemAllocAsync");
    check(cuLaunchKernel(l->f, 1, 1, 1, 128, 1, 1, 0, l->stream, l->params, NULL),
          "cuLaunchKernel(kernelParams)");
    check(cuMemFreeAsync(d, l->stream), "cuMemFreeAsync");
}

#define LOAD(name)                                                                       \
    do {                                                                                 \
        *(void **)&name = dlsym(lib, #name);                                             \
        if (!name) {                                                                     \
            fprintf(stderr, "libcuda.so.1 has no %s\n", #name);                          \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

static void row(const char *form, double us, const char *note)
{
    printf("| %-52s | %6.2f us | %s |\n", form, us, note);
}

int main(int argc, char **argv)
{
    /* argv[1]: another driver library (tests/cuda_host's fake one tries the
     * program where no GPU is) */
    const char *driver = argc > 1 ? argv[1] : "libcuda.so.1";
    void *lib = dlopen(driver, RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "launch-forms: cannot open %s: %s\n", driver, dlerror());
        return 1;
    }
    LOAD(cuInit);
    LOAD(cuDeviceGet);
    LOAD(cuDevicePrimaryCtxRetain);
    LOAD(cuCtxSetCurrent);
    LOAD(cuModuleLoadDataEx);
    LOAD(cuModuleGetFunction);
    *(void **)&cuLaunchKernel = dlsym(lib, "cuLaunchKernel");
    *(void **)&cuCtxSynchronize = dlsym(lib, "cuCtxSynchronize");
    *(void **)&cuStreamCreate = dlsym(lib, "cuStreamCreate");
    *(void **)&cuStreamSynchronize = dlsym(lib, "cuStreamSynchronize");
    *(void **)&cuMemAlloc = dlsym(lib, "cuMemAlloc_v2");
    *(void **)&cuMemFree = dlsym(lib, "cuMemFree_v2");
    /* (drivers before CUDA 11.2 have no stream-ordered pool: those rows are
     * skipped, said so) */
    *(void **)&cuMemAllocAsync = dlsym(lib, "cuMemAllocAsync");
    *(void **)&cuMemFreeAsync = dlsym(lib, "cuMemFreeAsync");
    if (!cuLaunchKernel || !cuCtxSynchronize || !cuStreamCreate || !cuStreamSynchronize ||
        !cuMemAlloc || !cuMemFree) {
        fprintf(stderr, "launch-forms: libcuda.so.1 lacks a function it needs\n");
        return 1;
    }
    CUctx ctx;
    int dev;
    CUmod mod;
    CUfunc add_like, four;
    check(cuInit(0), "cuInit");
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    check(cuModuleLoadDataEx(&mod, ptx, 0, NULL, NULL), "cuModuleLoadDataEx");
    check(cuModuleGetFunction(&add_like, mod, "add_like"), "cuModuleGetFunction");
    check(cuModuleGetFunction(&four, mod, "four"), "cuModuleGetFunction");
    CUstream stream;
    check(cuStreamCreate(&stream, 0), "cuStreamCreate");
    alloc_stream = stream;
    if (failures)
        return 1;

    /* add_like: three 40-byte descriptors and n, packed as the driver lays
     * them out (each 8-aligned: 0, 40, 80, 120; 128 bytes). */
    unsigned char desc[3][40];
    memset(desc, 0, sizeof desc);
    int64_t n = 1000;
    void *params_add[] = {desc[0], desc[1], desc[2], &n};
    unsigned char block_add[128];
    memcpy(block_add, desc, sizeof desc);
    memcpy(block_add + 120, &n, 8);
    int64_t four_args[4] = {0, 0, 0, 1000};
    void *params_four[] = {&four_args[0], &four_args[1], &four_args[2], &four_args[3]};

    printf("| %-52s | %9s | %s |\n", "form", "time", "note");
    printf("| --- | --- | --- |\n");
    for (int s = 0; s < 2; s++) {
        CUstream on = s ? stream : NULL;
        const char *where = s ? "a created stream" : "the null stream";
        char what[96];
        Launch a = {add_like, on, params_add, block_add, sizeof block_add};
        Launch f = {four, on, params_four, four_args, sizeof four_args};
        /* interleaved twice, so drift shows as a spread between the two */
        for (int pass = 0; pass < 2; pass++) {
            snprintf(what, sizeof what, "add-like (3 x 40 B + i64), kernelParams");
            row(what, median_us(by_params, &a, on), where);
            snprintf(what, sizeof what, "add-like (3 x 40 B + i64), extra buffer");
            row(what, median_us(by_extra, &a, on), where);
            snprintf(what, sizeof what, "4 x i64, kernelParams");
            row(what, median_us(by_params, &f, on), where);
            snprintf(what, sizeof what, "4 x i64, extra buffer");
            row(what, median_us(by_extra, &f, on), where);
        }
    }
    bool async = cuMemAllocAsync && cuMemFreeAsync;
    if (!async)
        printf("(no cuMemAllocAsync in %s: its rows are skipped)\n", driver);
    for (int pass = 0; pass < 2; pass++) {
        row("cuMemAlloc + cuMemFree, 4,000 B", median_us(alloc_free, NULL, NULL),
            "a pair a call (cuMemFree synchronises the device)");
        if (async)
            row("cuMemAllocAsync + cuMemFreeAsync, 4,000 B",
                median_us(alloc_free_async, NULL, stream),
                "a pair a call, a created stream, the device's default pool");
    }
    Launch a = {add_like, stream, params_add, block_add, sizeof block_add};
    for (int pass = 0; pass < 2; pass++) {
        row("add-like launch alone", median_us(by_params, &a, stream), "a created stream");
        if (async)
            row("add-like launch + its output by cuMemAllocAsync/FreeAsync",
            median_us(launch_with_async_output, &a, stream),
            "a created stream: a call without out= on the driver's pool");
    }
    printf("launch-forms: %d failed driver calls\n", failures);
    return failures ? 1 : 0;
}
