// bench_gpu_cuda.cu: the hand-written CUDA C side of the GPU benchmark.
//
// Each seed workload written the way a CUDA programmer would (one thread per
// element, 256-thread blocks; the 2-D kernels on 32 x 8 blocks), built with
// `nvcc -O3 -arch=sm_90`, timed with CUDA events: the median of 20 launches
// after 3 warm-ups.  Also measures the device-to-device copy bandwidth
// (bytes read + written) that the elementwise rows are held against.
// Prints one line per workload: "<name> <ms>", and "copy_gbps <GB/s>".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t err_ = (call);                                                    \
        if (err_ != cudaSuccess) {                                                    \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,        \
                         cudaGetErrorString(err_));                                   \
            std::exit(1);                                                             \
        }                                                                             \
    } while (0)

template <typename Launch> static double median_ms(Launch launch)
{
    cudaEvent_t start, end;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&end));
    for (int i = 0; i < 3; i++)
        launch();
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<float> times;
    for (int i = 0; i < 20; i++) {
        CHECK(cudaEventRecord(start));
        launch();
        CHECK(cudaEventRecord(end));
        CHECK(cudaEventSynchronize(end));
        CHECK(cudaGetLastError());
        float ms;
        CHECK(cudaEventElapsedTime(&ms, start, end));
        times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    cudaEventDestroy(start);
    cudaEventDestroy(end);
    return (times[9] + times[10]) / 2;
}

__global__ void add_f32(const float *a, const float *b, float *c, long n)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

__global__ void sin_f64(const double *x, double *y, long n)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = sin(x[i]);
}

__global__ void exp_f32(const float *x, float *y, long n)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = expf(x[i]);
}

__device__ int mandel(double x, double y, int max_iters)
{
    double zr = 0, zi = 0;
    for (int i = 0; i < max_iters; i++) {
        double r = zr * zr - zi * zi + x;
        zi = 2 * zr * zi + y;
        zr = r;
        if (zr * zr + zi * zi >= 4)
            return i;
    }
    return max_iters;
}

__global__ void mandel_kernel(double min_x, double max_x, double min_y, double max_y,
                              unsigned char *image, int height, int width, int iters)
{
    double px = (max_x - min_x) / width, py = (max_y - min_y) / height;
    int sx = blockIdx.x * blockDim.x + threadIdx.x, sy = blockIdx.y * blockDim.y + threadIdx.y;
    int gx = gridDim.x * blockDim.x, gy = gridDim.y * blockDim.y;
    for (int x = sx; x < width; x += gx)
        for (int y = sy; y < height; y += gy)
            image[(long)y * width + x] = (unsigned char)mandel(min_x + x * px, min_y + y * py, iters);
}

__global__ void lla_mesh(double lat0, double lon0, double dlat, double dlon, double lat2,
                         double lon2, double s, double *out, int rows, int cols)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y;
    if (j < rows && i < cols) {
        double lat1 = lat0 + j * dlat, lon1 = lon0 + i * dlon;
        double sa = sin(0.008726645 * (lat2 - lat1)), so = sin(0.008726645 * (lon2 - lon1));
        double a = sa * sa + cos(0.01745329 * lat1) * cos(0.01745329 * lat2) * so * so;
        out[(long)j * cols + i] = atan2(a, 1 - a) * s;
    }
}

__global__ void das(double *out, int rows, int cols, const long *data)
{
    long i = blockIdx.x, j = threadIdx.x;
    if (i < cols && j < rows) {
        double acc = 0;
        for (long k = 0; k < 128; k++)
            for (long n = 0; n < 128; n++) {
                long order = (long)((sqrt((double)(i * i + (j - k * 6) * (j - k * 6))) +
                                     sqrt((double)(i * i + (j - n * 6) * (j - n * 6)))) *
                                    0.05 / 1.54 * 30);
                if (order < 2000)
                    acc += (double)data[k * 2000 + order];
            }
        out[j * cols + i] = acc;
    }
}

template <typename T> static T *device_random(long n, double lo, double hi)
{
    std::vector<T> host(n);
    for (long i = 0; i < n; i++)
        host[i] = (T)(lo + (hi - lo) * (std::rand() / (double)RAND_MAX));
    T *dev;
    CHECK(cudaMalloc(&dev, n * sizeof(T)));
    CHECK(cudaMemcpy(dev, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    return dev;
}

int main()
{
    std::srand(1);
    const long big = 100000000;
    float *a = device_random<float>(big, -1, 1), *b = device_random<float>(big, -1, 1);
    float *c;
    CHECK(cudaMalloc(&c, big * sizeof(float)));

    double copy_ms = median_ms([&] {
        CHECK(cudaMemcpyAsync(c, a, big * sizeof(float), cudaMemcpyDeviceToDevice));
    });
    std::printf("copy_gbps %.1f\n", 2.0 * big * sizeof(float) / copy_ms / 1e6);

    for (long n : {big, 1000000L}) {
        double ms = median_ms([&] { add_f32<<<(n + 255) / 256, 256>>>(a, b, c, n); });
        std::printf("add_f32_%s %.4f\n", n == big ? "1e8" : "1e6", ms);
    }
    {
        double *x = device_random<double>(big, -10, 10), *y;
        CHECK(cudaMalloc(&y, big * sizeof(double)));
        double ms = median_ms([&] { sin_f64<<<(big + 255) / 256, 256>>>(x, y, big); });
        std::printf("sin_f64_1e8 %.4f\n", ms);
        CHECK(cudaFree(x));
        CHECK(cudaFree(y));
    }
    {
        long n = 10000000;
        double ms = median_ms([&] { exp_f32<<<(n + 255) / 256, 256>>>(a, c, n); });
        std::printf("exp_f32_1e7 %.4f\n", ms);
    }
    for (int big_image = 0; big_image < 2; big_image++) {
        int width = big_image ? 8192 : 1536, height = big_image ? 8192 : 1024;
        int iters = big_image ? 256 : 20;
        unsigned char *image;
        CHECK(cudaMalloc(&image, (long)width * height));
        dim3 block(32, 8), grid((width + 31) / 32, (height + 7) / 8);
        double ms = median_ms([&] {
            mandel_kernel<<<grid, block>>>(-2.0, 1.0, -1.0, 1.0, image, height, width, iters);
        });
        std::printf("mandel_%dx%dx%d %.4f\n", width, height, iters, ms);
        CHECK(cudaFree(image));
    }
    {
        int rows = 1000, cols = 1000;
        double *out;
        CHECK(cudaMalloc(&out, (long)rows * cols * sizeof(double)));
        dim3 block(32, 8), grid((cols + 31) / 32, (rows + 7) / 8);
        double ms = median_ms([&] {
            lla_mesh<<<grid, block>>>(-45.0, -90.0, 0.09, 0.18, 30.0, 60.0, 6371.0, out, rows,
                                      cols);
        });
        std::printf("lla_1000x1000 %.4f\n", ms);
        CHECK(cudaFree(out));
    }
    {
        int rows = 762, cols = 1200;
        double *out;
        CHECK(cudaMalloc(&out, (long)rows * cols * sizeof(double)));
        long *data = device_random<long>(128 * 2000, 0, 100);
        double ms = median_ms([&] { das<<<cols, rows>>>(out, rows, cols, data); });
        std::printf("das_1200x762 %.4f\n", ms);
        CHECK(cudaFree(out));
        CHECK(cudaFree(data));
    }
    return 0;
}
