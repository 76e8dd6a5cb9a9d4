/*
 * stream_align.c: does the cpu target's aligned first piece pay on this
 * CPU?  kj_cpu_run_range (runtime/cpu.c) cuts a vectorized call's range
 * into pieces of KJ_CPU_CANCEL_CHUNK elements, the first ending where the
 * output starts a cache line, so that every later 64-byte store is one
 * line (arrays from malloc and NumPy start 16 bytes into a page).  This
 * times the loop of examples/add.kern (f32 a + b into o, written in C, at
 * gcc -O3 -march=native) over arrays placed so, four ways:
 *   whole    one call over the range (as a NumPy ufunc or Numba's loop);
 *   pieces   pieces of 65536 from the start, lines split as they come;
 *   aligned  kjit's: a first piece to the output's line, then pieces;
 *   aligned whole  the first piece, then one call.
 * Prints a row per size (1e5 in L2, 1.6e6 and 1e7 from memory): the median
 * of 31 samples each, ms, the four ways taking turns within each sample.
 *
 *   stream_align [ROUNDS]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

enum { PIECE = 65536, SAMPLES = 31, WAYS = 4 };

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

__attribute__((noinline)) static void add(const float *restrict a, const float *restrict b, float *restrict o,
                                          int64_t begin, int64_t end)
{
    for (int64_t i = begin; i < end; i++)
        o[i] = a[i] + b[i];
}

/* n floats 16 bytes into fresh pages, as bench_common.h's bench_alloc */
static float *placed(int64_t n)
{
    size_t page = 4096, bytes = (size_t)n * sizeof(float) + 16, length = (bytes + page - 1) / page * page;
    char *p = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("stream_align: mmap");
        exit(1);
    }
    if (length > 2 * page)
        madvise(p + page, length - page, MADV_HUGEPAGE);
    float *f = (float *)(p + 16);
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)(i % 1000) * 0.5f;
    return f;
}

static void pieces(const float *a, const float *b, float *o, int64_t begin, int64_t n)
{
    for (int64_t s = begin; s < n; s += PIECE)
        add(a, b, o, s, n - s > PIECE ? s + PIECE : n);
}

static void run(int way, const float *a, const float *b, float *o, int64_t n)
{
    int64_t first = (int64_t)((64 - (uintptr_t)o % 64) % 64 / sizeof(float)); /* o + first on a line */
    switch (way) {
    case 0: add(a, b, o, 0, n); break;
    case 1: pieces(a, b, o, 0, n); break;
    case 2: add(a, b, o, 0, first); pieces(a, b, o, first, n); break;
    default: add(a, b, o, 0, first); add(a, b, o, first, n); break;
    }
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 1;
    static const int64_t sizes[] = {100000, 1600000, 10000000};
    printf("| elements | round | whole | pieces | aligned (kjit) | aligned whole | aligned / pieces |\n");
    printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        float *a = placed(n), *b = placed(n), *o = placed(n);
        int inner = n <= 100000 ? 200 : n <= 1600000 ? 10 : 1;
        for (int round = 0; round < rounds; round++) {
            double t[WAYS][SAMPLES];
            for (int k = 0; k < SAMPLES; k++)
                for (int way = 0; way < WAYS; way++) {
                    double t0 = now_ms();
                    for (int r = 0; r < inner; r++)
                        run(way, a, b, o, n);
                    t[way][k] = (now_ms() - t0) / inner;
                }
            double median[WAYS];
            for (int way = 0; way < WAYS; way++) {
                qsort(t[way], SAMPLES, sizeof t[way][0], by_value);
                median[way] = t[way][SAMPLES / 2];
            }
            for (int64_t i = 0; i < n; i += 997)
                if (o[i] != a[i] + b[i]) {
                    fprintf(stderr, "stream_align: o[%lld] is wrong\n", (long long)i);
                    return 1;
                }
            printf("| %lld | %d | %.4f | %.4f | %.4f | %.4f | %.2f |\n", (long long)n, round + 1, median[0],
                   median[1], median[2], median[3], median[2] / median[1]);
        }
    }
    return 0;
}
