/*
 * bench_cpu.c: kjit's side of `make bench-cpu`'s elementwise and reduction
 * rows (the kernels are tests/bench/bench_simd.c's).  Times them on the cpu and
 * parallel targets through the public API (host arrays, outputs given), median
 * of REPEAT runs after a warm-up call that also compiles, and prints one JSON
 * object keyed like tests/bench/bench_cpu.py's.  KJIT_BENCH_TARGETS=cpu (or
 * parallel) times one target only; KJIT_BENCH_ONLY some rows (bench_common.h).
 *
 *   bench_cpu EXAMPLES_DIR [REPEAT [BENCH_DIR]]
 *
 * BENCH_DIR (tests/bench by default) holds issue 25's kernels.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_PROGRAM "bench_cpu"
#include "bench_common.h"

static int repeat = 7;
static bool first_row = true;

/* One "name": ms of the target's object. */
static void emit(const char *name, double ms)
{
    printf("%s\"%s\": %.4f", first_row ? "" : ", ", name, ms);
    first_row = false;
}

typedef struct Call {
    kjit_function *function;
    kjit_arg *args;
    int nargs;
    kjit_array *out;            /* vectorized */
    uint32_t grid[3], block[3]; /* kernels */
    bool reduce;                /* @reduce over every axis, into out */
    int inner;                  /* runs per timed sample (0: 1), the time per run kept */
} Call;

static kjit_status run_once(const Call *call)
{
    if (call->reduce)
        return kjit_reduce(call->function, call->args, call->nargs, NULL, 0, NULL, call->out, NULL);
    if (call->out)
        return kjit_call(call->function, call->args, call->nargs, call->out, NULL);
    return kjit_launch(call->function, call->grid, call->block, call->args, call->nargs, NULL);
}

static double median_ms(kjit_context *context, const Call *call)
{
    die_on(run_once(call), context, "warm-up");
    double *times = malloc(sizeof *times * (size_t)repeat);
    int inner = call->inner > 0 ? call->inner : 1;
    for (int r = 0; r < repeat; r++) {
        double t0 = now_ms();
        for (int i = 0; i < inner; i++)
            die_on(run_once(call), context, "run");
        times[r] = (now_ms() - t0) / inner;
    }
    double median = median_of(times, repeat);
    free(times);
    return median;
}

/* The elementwise rows' results against float64: add exact (an f32 sum
 * rounded once), sin within 1e-15, exp within 4 f32 ulps; fails the run. */
static void check_elementwise(const char *name, const float *a32, const float *b32,
                              const double *x64, const float *o32, const double *o64, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        double got, want, tolerance;
        if (strcmp(name, "add f32 1e7") == 0)
            got = o32[i], want = (float)((double)a32[i] + b32[i]), tolerance = 0;
        else if (strcmp(name, "sin f64 1e7") == 0)
            got = o64[i], want = sin(x64[i]), tolerance = 1e-15;
        else if (strcmp(name, "exp f32 1e7") == 0)
            want = exp((double)a32[i]), got = o32[i], tolerance = want * 0x1p-21;
        else
            return;
        if (!(fabs(got - want) <= tolerance)) {
            fprintf(stderr, "bench_cpu: %s: element %lld is %.17g, float64 gives %.17g\n", name,
                    (long long)i, got, want);
            exit(1);
        }
    }
}

static void fill_random(float *f32, double *f64, int64_t n, double scale)
{
    unsigned long long state = 88172645463325252ull;
    for (int64_t i = 0; i < n; i++) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        double u = (double)(state >> 11) / 9007199254740992.0 * scale;
        if (f32) f32[i] = (float)u;
        if (f64) f64[i] = u;
    }
}

/* The @guvectorize rows, beside the others of a target's object: a dot per
 * row over 1e6 rows of 16 f64 (examples/gufunc.kern), against Numba's
 * @guvectorize and NumPy's einsum in bench_cpu.py. */
static void gufunc_rows(kjit_context *context, const char *dir)
{
    static double *a, *b, *out;
    const int64_t rows = 1000000, shape[2] = {rows, 16};
    if (!a) {
        a = bench_alloc(sizeof(double) * (size_t)(rows * 16));
        b = bench_alloc(sizeof(double) * (size_t)(rows * 16));
        out = bench_alloc(sizeof(double) * (size_t)rows);
        fill_random(NULL, a, rows * 16, 1.0);
        fill_random(NULL, b, rows * 16, 2.0);
    }
    static kjit_array A, B, OUT;
    A = kjit_array_make(a, KJIT_F64, 2, shape);
    B = kjit_array_make(b, KJIT_F64, 2, shape);
    OUT = kjit_array_make(out, KJIT_F64, 1, &rows);
    kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
    Call call = {load(context, dir, "gufunc.kern", "dot"), args, 2, &OUT};
    emit("gufunc dot f64 1e6x16", median_ms(context, &call));
}

/* The kernel's step as matmul.kern writes it, and as MATMUL_FMA_ROW's
 * kernel does: the same file with that one line replaced. */
#define MATMUL_STEP "acc[i, j] += av * bv[j];"
#define MATMUL_FMA_STEP "acc[i, j] = fma(av, bv[j], acc[i, j]);"
#define MATMUL_ROW "matmul f64 512 (4x4 per thread)"
#define MATMUL_FMA_ROW "matmul f64 512, fma() step"

/* matmul.kern's kernel with its step written as an fma (each product and
 * sum rounded once, as OpenBLAS's kernels compute): kjit never contracts a
 * multiply and an add (docs/language.md), so this is how a user asks for it.
 * The file's text with MATMUL_STEP replaced, compiled from the string. */
static kjit_function *load_matmul_fma(kjit_context *context, const char *bench_dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/matmul.kern", bench_dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "bench_cpu: %s cannot be read\n", path);
        exit(1);
    }
    char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char *step = strstr(text, MATMUL_STEP);
    if (n == sizeof text - 1 || !step || strstr(step + 1, MATMUL_STEP)) {
        fprintf(stderr, "bench_cpu: %s does not hold its step '%s' once\n", path, MATMUL_STEP);
        exit(1);
    }
    char source[sizeof text + sizeof MATMUL_FMA_STEP];
    snprintf(source, sizeof source, "%.*s%s%s", (int)(step - text), text, MATMUL_FMA_STEP,
             step + strlen(MATMUL_STEP));
    kjit_module *module;
    die_on(kjit_compile_string(context, "matmul_fma.kern", source, &module), context, "matmul, fma()");
    kjit_function *function;
    die_on(kjit_module_function(module, "matmul", &function), context, "matmul");
    return function;
}

/* Issue 25's kernels, launched as GPU code is: tests/bench/matmul.kern, a
 * register-blocked matrix multiply of two 512x512 f64 matrices (blocks of
 * 16x16 threads, each making 4x4 elements of c), against NumPy's `@`
 * (OpenBLAS) and Numba's @njit of the same blocking in bench_cpu.py.  Each
 * element is a sum over k in order from 0.0, as a plain loop adds it (with
 * `fused`, the fma chain over k in order), so a sample of them is compared
 * with C's exactly. */
static void matmul_rows(kjit_context *context, const char *bench_dir, bool fused)
{
    enum { N = 512 };
    static double *a, *b, *c;
    const int64_t shape[2] = {N, N};
    if (!a) {
        a = bench_alloc(sizeof(double) * N * N);
        b = bench_alloc(sizeof(double) * N * N);
        c = bench_alloc(sizeof(double) * N * N);
        fill_random(NULL, a, (int64_t)N * N, 1.0);
        fill_random(NULL, b, (int64_t)N * N, 2.0);
    }
    static kjit_array A, B, C;
    A = kjit_array_make(a, KJIT_F64, 2, shape);
    B = kjit_array_make(b, KJIT_F64, 2, shape);
    C = kjit_array_make(c, KJIT_F64, 2, shape);
    kjit_arg args[3] = {kjit_arg_array(&A), kjit_arg_array(&B), kjit_arg_array(&C)};
    kjit_function *kernel = fused ? load_matmul_fma(context, bench_dir)
                                  : load(context, bench_dir, "matmul.kern", "matmul");
    Call call = {kernel, args, 3, NULL, {N / 64, N / 64, 1}, {16, 16, 1}};
    memset(c, 0, sizeof(double) * N * N);
    double ms = median_ms(context, &call);
    /* KJIT_BENCH_UNCHECKED=1: a variant of the kernel that computes
     * something else on purpose (tests/gpu/matmul_cpu.sh's parts of the
     * time: no tile loads, no arithmetic, ...), timed without the check */
    const char *unchecked = getenv("KJIT_BENCH_UNCHECKED");
    for (int sample = 0; sample < 4096 && !(unchecked && strcmp(unchecked, "1") == 0); sample++) {
        int i = (sample * 7919) % N, j = (sample * 104729) % N;
        double want = 0.0;
        for (int k = 0; k < N; k++)
            want = fused ? fma(a[(size_t)i * N + k], b[(size_t)k * N + j], want)
                         : want + a[(size_t)i * N + k] * b[(size_t)k * N + j];
        if (c[(size_t)i * N + j] != want) {
            fprintf(stderr, "bench_cpu: %s: c[%d, %d] is %.17g, the %s in order %.17g\n",
                    fused ? MATMUL_FMA_ROW : MATMUL_ROW, i, j, c[(size_t)i * N + j],
                    fused ? "fma chain" : "sum", want);
            exit(1);
        }
    }
    emit(fused ? MATMUL_FMA_ROW : MATMUL_ROW, ms);
}

/* tests/bench/matmul_tc.kern, the tensor-core matrix multiply (mma()), of two
 * 256x256 f64 matrices (blocks of 256 threads, 128x128 of c each), against
 * NumPy's `@` in bench_cpu.py (Numba has no warp to run it on).  On the cpu
 * each mma() is one meeting of the warp's fibers, whose runtime does the
 * warp's 256 fmas; each element is the fma chain over k in order from 0.0,
 * so a sample of them is compared with C's exactly. */
static void matmul_tc_rows(kjit_context *context, const char *bench_dir)
{
    enum { N = 256 };
    static double *a, *b, *c;
    const int64_t shape[2] = {N, N};
    if (!a) {
        a = bench_alloc(sizeof(double) * N * N);
        b = bench_alloc(sizeof(double) * N * N);
        c = bench_alloc(sizeof(double) * N * N);
        fill_random(NULL, a, (int64_t)N * N, 1.0);
        fill_random(NULL, b, (int64_t)N * N, 2.0);
    }
    static kjit_array A, B, C;
    A = kjit_array_make(a, KJIT_F64, 2, shape);
    B = kjit_array_make(b, KJIT_F64, 2, shape);
    C = kjit_array_make(c, KJIT_F64, 2, shape);
    kjit_arg args[3] = {kjit_arg_array(&A), kjit_arg_array(&B), kjit_arg_array(&C)};
    Call call = {load(context, bench_dir, "matmul_tc.kern", "matmul_tc"), args, 3, NULL,
                 {N / 128, N / 128, 1}, {256, 1, 1}};
    memset(c, 0, sizeof(double) * N * N);
    double ms = median_ms(context, &call);
    for (int sample = 0; sample < 4096; sample++) {
        int i = (sample * 7919) % N, j = (sample * 104729) % N;
        double want = 0.0;
        for (int k = 0; k < N; k++)
            want = fma(a[(size_t)i * N + k], b[(size_t)k * N + j], want);
        if (c[(size_t)i * N + j] != want) {
            fprintf(stderr, "bench_cpu: matmul_tc: c[%d, %d] is %.17g, the fma chain %.17g\n", i,
                    j, c[(size_t)i * N + j], want);
            exit(1);
        }
    }
    emit("matmul f64 256, mma() tiles", ms);
}

/* tests/bench/bins.kern: 1000 blocks of 256 threads each sum and count the
 * elements of 400,000 f64 in [0, 1) that fall in its bin of width 0.001, by
 * an `if`, a select and bools made numbers (issue 25, item 4), against
 * NumPy's bincount over the whole array and Numba's @njit of the same
 * algorithm in bench_cpu.py.  The three forms add the same values in the
 * same order (a select's 0.0 and a product by 0 leave a sum as it was), so
 * they must agree bit for bit; the counts must be the bins' counts. */
static void bins_rows(kjit_context *context, const char *bench_dir)
{
    enum { N = 400000, BINS = 1000 };
    static double *data, sums[3][BINS];
    static int64_t counts[3][BINS];
    const int64_t n = N, bins = BINS;
    if (!data) {
        data = bench_alloc(sizeof(double) * N);
        fill_random(NULL, data, n, 1.0);
    }
    static kjit_array D, S[3], C[3];
    D = kjit_array_make(data, KJIT_F64, 1, &n);
    const char *kernels[3] = {"bins_if", "bins_select", "bins_numbers"};
    const char *names[3] = {"bins f64 4e5 x 1000, if", "bins f64 4e5 x 1000, select",
                            "bins f64 4e5 x 1000, bools as numbers"};
    for (int k = 0; k < 3; k++) {
        if (!wanted(names[k]))
            continue;
        S[k] = kjit_array_make(sums[k], KJIT_F64, 1, &bins);
        C[k] = kjit_array_make(counts[k], KJIT_I64, 1, &bins);
        kjit_arg args[4] = {kjit_arg_array(&D), kjit_arg_f64(0.001), kjit_arg_array(&S[k]),
                            kjit_arg_array(&C[k])};
        Call call = {load(context, bench_dir, "bins.kern", kernels[k]), args, 4, NULL,
                     {BINS, 1, 1}, {256, 1, 1}};
        double ms = median_ms(context, &call);
        int64_t want[BINS] = {0};
        for (int i = 0; i < N; i++) /* the kernel's test, near data[i] / width */
            for (int b = (int)(data[i] / 0.001) - 1; b <= (int)(data[i] / 0.001) + 1; b++)
                if (b >= 0 && b < BINS && (double)b * 0.001 <= data[i] &&
                    data[i] < (double)b * 0.001 + 0.001)
                    want[b]++;
        for (int b = 0; b < BINS; b++)
            if (counts[k][b] != want[b] || (k > 0 && wanted(names[0]) &&
                                            (counts[k][b] != counts[0][b] || sums[k][b] != sums[0][b]))) {
                fprintf(stderr, "bench_cpu: %s: bin %d has %lld (sum %.17g), want %lld (%s's %.17g)\n",
                        kernels[k], b, (long long)counts[k][b], sums[k][b], (long long)want[b],
                        kernels[0], sums[0][b]);
                exit(1);
            }
        emit(names[k], ms);
    }
}

/* tests/bench/stencil3d.kern: one Jacobi step of the 7-point stencil, a
 * thread per point on blocks of 32x4x2, on a small grid (32^3, where the
 * parallel target must not lose to cpu: issue 25, item 7) and a larger one,
 * against NumPy's slices and Numba's loops in bench_cpu.py.  The interior is
 * compared with C's sums in the kernel's order, exactly.  The arrays are
 * made once, for every target, as the other rows' and bench_cpu.py's are:
 * made again after the cpu target freed its own, glibc's raised mmap
 * threshold put them on the heap, and the parallel target's 128^3 step
 * took 1.6 times as long as in a process that ran it alone (16-core host:
 * 0.27-0.30 ms against 0.15-0.18).  A sample is 50 steps at 32^3 and 4 at
 * 128^3, as in bench_cpu.py: one step of 10-30 microseconds timed alone
 * spread 0.79-1.21 of Numba's over a table's rounds on the 16-core host. */
static void stencil_rows(kjit_context *context, const char *bench_dir)
{
    static const int sizes[2] = {32, 128};
    static double *us[2], *vs[2];
    for (int s = 0; s < 2; s++) {
        int n = sizes[s];
        char name[64];
        snprintf(name, sizeof name, "stencil3d f64 %d^3", n);
        if (!wanted(name))
            continue;
        int64_t shape[3] = {n, n, n}, total = (int64_t)n * n * n;
        if (!us[s]) {
            us[s] = bench_alloc(sizeof(double) * (size_t)total);
            vs[s] = bench_alloc(sizeof(double) * (size_t)total);
            fill_random(NULL, us[s], total, 1.0);
        }
        double *u = us[s], *v = vs[s];
        memset(v, 0, sizeof(double) * (size_t)total);
        kjit_array U = kjit_array_make(u, KJIT_F64, 3, shape), V = kjit_array_make(v, KJIT_F64, 3, shape);
        kjit_arg args[2] = {kjit_arg_array(&U), kjit_arg_array(&V)};
        Call call = {load(context, bench_dir, "stencil3d.kern", "jacobi"), args, 2, NULL,
                     {(uint32_t)n / 32, (uint32_t)n / 4, (uint32_t)n / 2}, {32, 4, 2}};
        call.inner = n == 32 ? 50 : 4;
        double ms = median_ms(context, &call);
        for (int z = 1; z < n - 1; z++)
            for (int y = 1; y < n - 1; y++)
                for (int x = 1; x < n - 1; x++) {
#define U(z, y, x) u[((int64_t)(z) * n + (y)) * n + (x)]
                    double want = (U(z, y, x - 1) + U(z, y, x + 1) + U(z, y - 1, x) + U(z, y + 1, x) +
                                   U(z - 1, y, x) + U(z + 1, y, x)) * (1.0 / 6.0);
#undef U
                    if (v[((int64_t)z * n + y) * n + x] != want) {
                        fprintf(stderr, "bench_cpu: %s: v[%d, %d, %d] is %.17g, want %.17g\n", name, z, y,
                                x, v[((int64_t)z * n + y) * n + x], want);
                        exit(1);
                    }
                }
        emit(name, ms);
    }
}

/* tests/bench/inc.kern: b = a + 1 over i32 by a one-line @kernel, 1-D on
 * blocks of 256 and 2-D on blocks of 32 x 8, and by the same @vectorize
 * (issue 25, item 5), at 1e5 elements (100 x 1000 for the 2-D form; in
 * cache) and 1.6e6 (1000 x 1600; bound by memory), against NumPy's np.add
 * and Numba's loops in bench_cpu.py.  A sample is timed over enough
 * launches to be some tens of microseconds; every element is checked.  The
 * arrays are made once, for every target (stencil_rows says why). */
static void inc_rows(kjit_context *context, const char *bench_dir)
{
    static const int64_t rows_of[2] = {100, 1000}, cols_of[2] = {1000, 1600};
    static int32_t *as[2], *bs[2];
    static const char *sizes[2] = {"1e5", "1.6e6"};
    const char *forms[3] = {"@kernel 1-D", "@kernel 2-D 32x8", "@vectorize"};
    for (int size = 0; size < 2; size++) {
        int64_t rows = rows_of[size], cols = cols_of[size], n = rows * cols, shape[2] = {rows, cols};
        if (!as[size]) {
            as[size] = bench_alloc(sizeof(int32_t) * (size_t)n);
            bs[size] = bench_alloc(sizeof(int32_t) * (size_t)n);
            for (int64_t i = 0; i < n; i++)
                as[size][i] = (int32_t)(i * 2654435761u);
        }
        int32_t *a = as[size], *b = bs[size];
        kjit_array A1 = kjit_array_make(a, KJIT_I32, 1, &n), B1 = kjit_array_make(b, KJIT_I32, 1, &n);
        kjit_array A2 = kjit_array_make(a, KJIT_I32, 2, shape), B2 = kjit_array_make(b, KJIT_I32, 2, shape);
        kjit_arg args1[2] = {kjit_arg_array(&A1), kjit_arg_array(&B1)};
        kjit_arg args2[2] = {kjit_arg_array(&A2), kjit_arg_array(&B2)};
        for (int form = 0; form < 3; form++) {
            char name[64];
            snprintf(name, sizeof name, "inc i32 %s, %s", sizes[size], forms[form]);
            if (!wanted(name))
                continue;
            Call call;
            if (form == 0)
                call = (Call){load(context, bench_dir, "inc.kern", "inc1"), args1, 2, NULL,
                              {(uint32_t)((n + 255) / 256), 1, 1}, {256, 1, 1}};
            else if (form == 1)
                call = (Call){load(context, bench_dir, "inc.kern", "inc2"), args2, 2, NULL,
                              {(uint32_t)((cols + 31) / 32), (uint32_t)((rows + 7) / 8), 1}, {32, 8, 1}};
            else
                call = (Call){load(context, bench_dir, "inc.kern", "vinc"), args1, 1, &B1};
            call.inner = size == 0 ? 200 : 10;
            memset(b, 0, sizeof(int32_t) * (size_t)n);
            double ms = median_ms(context, &call);
            check_inc(name, a, b, n);
            emit(name, ms);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_cpu EXAMPLES_DIR [REPEAT [BENCH_DIR]]\n");
        return 2;
    }
    const char *dir = argv[1];
    if (argc > 2) repeat = atoi(argv[2]) > 0 ? atoi(argv[2]) : 7;
    const char *bench_dir = argc > 3 ? argv[3] : "tests/bench";

    const int64_t n = 10000000;
    float *a32 = bench_alloc(sizeof(float) * n), *b32 = bench_alloc(sizeof(float) * n);
    float *o32 = bench_alloc(sizeof(float) * n);
    double *x64 = bench_alloc(sizeof(double) * n), *o64 = bench_alloc(sizeof(double) * n);
    fill_random(a32, NULL, n, 1.0);
    fill_random(b32, NULL, n, 1.0);
    fill_random(NULL, x64, n, 6.283185307179586);
    kjit_array A32 = kjit_array_make(a32, KJIT_F32, 1, &n);
    kjit_array B32 = kjit_array_make(b32, KJIT_F32, 1, &n);
    kjit_array O32 = kjit_array_make(o32, KJIT_F32, 1, &n);
    kjit_array X64 = kjit_array_make(x64, KJIT_F64, 1, &n);
    kjit_array O64 = kjit_array_make(o64, KJIT_F64, 1, &n);

    /* The reductions: 1e8 elements, as NumPy's np.sum is usually timed. */
    const int64_t big = 100000000;
    float *s32 = bench_alloc(sizeof(float) * big);
    double *s64 = bench_alloc(sizeof(double) * big);
    fill_random(s32, s64, big, 1.0);
    kjit_array S32 = kjit_array_make(s32, KJIT_F32, 1, &big);
    kjit_array S64 = kjit_array_make(s64, KJIT_F64, 1, &big);
    float r32;
    double r64;
    kjit_array R32 = kjit_array_make(&r32, KJIT_F32, 0, NULL);
    kjit_array R64 = kjit_array_make(&r64, KJIT_F64, 0, NULL);

    const kjit_target targets[2] = {KJIT_TARGET_CPU, KJIT_TARGET_PARALLEL};
    const char *only = getenv("KJIT_BENCH_TARGETS");
    bool first_target = true;
    printf("{");
    for (int t = 0; t < 2; t++) {
        if (only && *only && !strstr(only, kjit_target_name(targets[t])))
            continue;
        kjit_options options;
        kjit_options_init(&options);
        options.target = targets[t];
        kjit_context *context;
        die_on(kjit_context_create(&options, &context), NULL, "context");

        kjit_arg add_args[2] = {kjit_arg_array(&A32), kjit_arg_array(&B32)};
        kjit_arg sin_args[1] = {kjit_arg_array(&X64)};
        kjit_arg exp_args[1] = {kjit_arg_array(&A32)};
        kjit_arg sum32_args[1] = {kjit_arg_array(&S32)};
        kjit_arg sum64_args[1] = {kjit_arg_array(&S64)};
        kjit_arg dot_args[2] = {kjit_arg_array(&A32), kjit_arg_array(&B32)};
        Call calls[6] = {
            {load(context, dir, "add.kern", "add"), add_args, 2, &O32},
            {load(context, dir, "sin.kern", "vsin"), sin_args, 1, &O64},
            {load(context, dir, "exp.kern", "vexp"), exp_args, 1, &O32},
            {load(context, dir, "reduce.kern", "vsum"), sum32_args, 1, &R32, .reduce = true},
            {load(context, dir, "reduce.kern", "vsum"), sum64_args, 1, &R64, .reduce = true},
            {load(context, dir, "reduce.kern", "dot"), dot_args, 2, &R32, .reduce = true},
        };
        const char *names[6] = {"add f32 1e7", "sin f64 1e7", "exp f32 1e7",
                                "sum f32 1e8", "sum f64 1e8", "dot f32 1e7"};
        printf("%s\"%s\": {", first_target ? "" : ", ", kjit_target_name(targets[t]));
        first_target = false;
        first_row = true;
        for (int w = 0; w < 6; w++) {
            if (!wanted(names[w]))
                continue;
            double ms = median_ms(context, &calls[w]);
            check_elementwise(names[w], a32, b32, x64, o32, o64, n);
            emit(names[w], ms);
        }
        if (wanted("gufunc dot f64 1e6x16"))
            gufunc_rows(context, dir);
        if (wanted(MATMUL_ROW))
            matmul_rows(context, bench_dir, false);
        if (wanted(MATMUL_FMA_ROW))
            matmul_rows(context, bench_dir, true);
        if (wanted("matmul f64 256, mma() tiles"))
            matmul_tc_rows(context, bench_dir);
        bins_rows(context, bench_dir);
        stencil_rows(context, bench_dir);
        inc_rows(context, bench_dir);
        printf("}");
        kjit_context_destroy(context);
    }
    printf("}\n");
    return 0;
}
