/*
 * aot_first.cu: the anchor of the first-call breakdown (tests/gpu/aot.sh,
 * docs/aot.md "cuda: the first call"): the first call of add over 100,000
 * f32 from a new process, as a CUDA C program makes it, built with nvcc on
 * the GPU machine.  What it pays, every CUDA program pays; the rest of
 * kjit's breakdown (aot_bench steps) is kjit's.
 *
 *   aot_first driver CUBIN   the driver API, the steps kjit takes from a
 *                            library: context (cuInit, the primary
 *                            context), cuModuleLoadData of a cubin read from
 *                            CUBIN (this file's add, nvcc -cubin), the
 *                            function, the first cuMemAlloc, the other two,
 *                            two copies in, cuLaunchKernel, the
 *                            synchronisation, the copy back, the frees
 *   aot_first runtime        the runtime API (cudaMalloc, cudaMemcpy, <<<>>>,
 *                            the module loaded lazily at the first launch)
 *
 * Prints "driver" or "runtime" and the milliseconds of each step, then the
 * sum after the context.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        c[i] = a[i] + b[i];
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

#define CU(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { \
    fprintf(stderr, "aot_first: %s failed (%d)\n", #call, (int)r_); exit(1); } } while (0)
#define RT(call) do { cudaError_t r_ = (call); if (r_ != cudaSuccess) { \
    fprintf(stderr, "aot_first: %s failed: %s\n", #call, cudaGetErrorString(r_)); exit(1); } } while (0)

enum { N = 100000 };
static float a[N], b[N], c[N];

static void print(const char *what, const double *t, int k)
{
    if (c[N - 1] != a[N - 1] + b[N - 1]) {
        fprintf(stderr, "aot_first: the sum is wrong\n");
        exit(1);
    }
    printf("%s", what);
    for (int i = 1; i < k; i++)
        printf(" %.3f", t[i] - t[i - 1]);
    printf(" %.3f\n", t[k - 1] - t[1]);
}

static int driver(const char *path)
{
    double t[16];
    int k = 0;
    t[k++] = now_ms();
    CUdevice device;
    CUcontext context;
    CU(cuInit(0));
    CU(cuDeviceGet(&device, 0));
    CU(cuDevicePrimaryCtxRetain(&context, device));
    CU(cuCtxSetCurrent(context));
    t[k++] = now_ms();
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    static char cubin[1 << 20];
    size_t size = fread(cubin, 1, sizeof cubin, f);
    fclose(f);
    CUmodule module;
    CU(cuModuleLoadData(&module, cubin));
    t[k++] = now_ms();
    CUfunction function;
    CU(cuModuleGetFunction(&function, module, "add"));
    t[k++] = now_ms();
    for (int i = 0; i < N; i++)
        a[i] = (float)i * 1e-5f, b[i] = 1.0f;
    CUdeviceptr da, db, dc;
    CU(cuMemAlloc(&da, sizeof a));
    t[k++] = now_ms();
    CU(cuMemAlloc(&db, sizeof b));
    CU(cuMemAlloc(&dc, sizeof c));
    t[k++] = now_ms();
    CU(cuMemcpyHtoD(da, a, sizeof a));
    CU(cuMemcpyHtoD(db, b, sizeof b));
    t[k++] = now_ms();
    long long n = N;
    void *params[] = {&da, &db, &dc, &n};
    CU(cuLaunchKernel(function, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
    t[k++] = now_ms();
    CU(cuCtxSynchronize());
    t[k++] = now_ms();
    CU(cuMemcpyDtoH(c, dc, sizeof c));
    t[k++] = now_ms();
    CU(cuMemFree(da));
    CU(cuMemFree(db));
    CU(cuMemFree(dc));
    t[k++] = now_ms();
    (void)size;
    print("driver", t, k);
    return 0;
}

static int runtime(void)
{
    double t[16];
    int k = 0;
    t[k++] = now_ms();
    RT(cudaFree(0));
    t[k++] = now_ms();
    for (int i = 0; i < N; i++)
        a[i] = (float)i * 1e-5f, b[i] = 1.0f;
    float *da, *db, *dc;
    RT(cudaMalloc(&da, sizeof a));
    t[k++] = now_ms();
    RT(cudaMalloc(&db, sizeof b));
    RT(cudaMalloc(&dc, sizeof c));
    t[k++] = now_ms();
    RT(cudaMemcpy(da, a, sizeof a, cudaMemcpyHostToDevice));
    RT(cudaMemcpy(db, b, sizeof b, cudaMemcpyHostToDevice));
    t[k++] = now_ms();
    add<<<(N + 255) / 256, 256>>>(da, db, dc, N);
    RT(cudaGetLastError());
    t[k++] = now_ms();
    RT(cudaDeviceSynchronize());
    t[k++] = now_ms();
    RT(cudaMemcpy(c, dc, sizeof c, cudaMemcpyDeviceToHost));
    t[k++] = now_ms();
    RT(cudaFree(da));
    RT(cudaFree(db));
    RT(cudaFree(dc));
    t[k++] = now_ms();
    print("runtime", t, k);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "driver"))
        return driver(argv[2]);
    if (argc == 2 && !strcmp(argv[1], "runtime"))
        return runtime();
    fprintf(stderr, "usage: aot_first driver CUBIN | aot_first runtime\n");
    return 2;
}
