/*
 * simd_ref.h: the C references of `make bench-cpu`'s SIMD rows
 * (tests/bench/simd_ref.c), each workload twice: scalar C, one element at a
 * time, and hand-written SIMD with as many lanes as the machine has.  Both
 * compute exactly what the kjit program computes (examples/mandelbrot.kern,
 * examples/das.kern, tests/bench/simd.kern), operation for operation.
 */
#ifndef SIMD_REF_H
#define SIMD_REF_H

#include <stdint.h>

/* The instruction set and lane counts simd_ref.c was compiled for, e.g.
 * "AVX2: 4 x f64/i64, 8 x f32/i32". */
const char *simd_ref_isa(void);

/* examples/mandelbrot.kern's mandel_kernel: image is height x width, row-major. */
void mandel_scalar(double min_x, double max_x, double min_y, double max_y, uint8_t *image,
                   int64_t height, int64_t width, int32_t iters);
void mandel_simd(double min_x, double max_x, double min_y, double max_y, uint8_t *image,
                 int64_t height, int64_t width, int32_t iters);

/* tests/bench/simd.kern's escape, elementwise over n points in f32. */
void escape_scalar(const float *re, const float *im, int32_t max_iters, int32_t *out, int64_t n);
void escape_simd(const float *re, const float *im, int32_t max_iters, int32_t *out, int64_t n);

/* tests/bench/simd.kern's collatz over n values (each at least 1). */
void collatz_scalar(const int64_t *in, int64_t *out, int64_t n);
void collatz_simd(const int64_t *in, int64_t *out, int64_t n);

/* examples/das.kern's das: out is height x width (rows j, columns i), data
 * 128 channels of 2000 samples. */
void das_scalar(double *out, int64_t height, int64_t width, const int64_t *data);
void das_simd(double *out, int64_t height, int64_t width, const int64_t *data);

/* tests/bench/simd.kern's block_sum: sums[b] is the sum of x[256 b .. 256 b + 255]
 * (zeros past n) by the kernel's tree; sums has ceil(n / 256) elements. */
void block_sum_scalar(const float *x, int64_t n, float *sums);
void block_sum_simd(const float *x, int64_t n, float *sums);

#endif
