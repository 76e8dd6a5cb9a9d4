/*
 * bench_simd.c: the SIMD rows of `make bench-cpu` (issue 10: "the cpu targets
 * use the vector units").  Five workloads whose loops a compiler must turn
 * into lanes by itself: the Mandelbrot @kernel, an escape-time @vectorize in
 * f32, delay-and-sum, Collatz step counts over i64 and a block sum through
 * shared memory and syncthreads().  Each runs through kjit's public API on the
 * cpu and parallel targets and as C (tests/bench/simd_ref.c: scalar, and
 * hand-written SIMD with as many lanes as the machine has), in one process,
 * taking turns, so that a busy neighbour slows every column alike.
 *
 * Before a time is printed every result is checked: the integer results
 * (image and escape counts, Collatz steps, delay-and-sum's sums of integers)
 * must equal the scalar C's exactly; each block sum must lie within 1e-5 of
 * the sum of its block's absolute values from the float64 sum, and kjit's and
 * both C references' block sums must be the same bits (one tree, one order).
 * Prints one JSON object:
 *
 *   {"isa": "AVX2: 4 x f64/i64, 8 x f32/i32",
 *    "cpu": {workload: ms}, "parallel": {...}, "hand_simd": {...}, "scalar_c": {...}}
 *
 * each figure the median of REPEAT runs after a warm-up that also compiles.
 *
 *   bench_simd [--repeat=N] [--targets=cpu,parallel] [--no-refs] [--only=KEY,...]
 *              [--save-refs=DIR] [--smoke] EXAMPLES_DIR BENCH_DIR
 *
 * --no-refs times kjit only (the references still compute the results kjit is
 * checked against, once); --save-refs writes the inputs and the expected
 * results, with a manifest.json, for tests/bench/bench_simd.py's Numba rows;
 * --only runs some workloads (keys: mandel, escape, das, collatz, block_sum,
 * block_sum_helper), and so does KJIT_BENCH_ONLY (by the rows' names, as
 * bench_cpu.c; not with --smoke);
 * --smoke runs small sizes (odd ones, so that partial vectors and blocks
 * happen) once each and only checks: `make check` runs it so that the
 * references cannot rot.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_PROGRAM "bench_simd"
#include "bench_common.h"
#include "simd_ref.h"

enum { RUNNER_CPU, RUNNER_PARALLEL, RUNNER_HAND_SIMD, RUNNER_SCALAR_C, RUNNER_COUNT };
static const char *const runner_keys[RUNNER_COUNT] = {"cpu", "parallel", "hand_simd", "scalar_c"};

/* ------------------------------------------------------------ the workloads */

/* One row.  The kjit call writes kjit_out (its args point there); the C
 * references write into their own buffers through run_c; check compares a
 * runner's output with the scalar C's and says what differs. */
typedef struct Workload Workload;
struct Workload {
    char name[64];
    const char *key; /* file names under --save-refs */
    const char *file, *function_name;
    bool in_examples; /* file is in EXAMPLES_DIR, else in BENCH_DIR */
    kjit_arg args[6];
    int nargs;
    kjit_array arrays[3];      /* what the args' arrays point at */
    kjit_array kjit_out_array; /* vectorized: the out array */
    bool is_kernel;
    uint32_t grid[3], block[3];
    kjit_function *function[2]; /* on cpu, parallel */
    void *kjit_out, *c_out[2];  /* [0] scalar C, [1] hand SIMD */
    size_t out_bytes;
    int64_t elements; /* of the output */
    void (*run_c)(const Workload *w, bool simd, void *out);
    bool (*check)(const Workload *w, const void *out, char *why, size_t why_size);
    /* The inputs, by workload. */
    int64_t height, width, n;
    int32_t iters;
    float *re, *im, *x;
    int64_t *values, *data;
    double *block_sum_f64, *block_abs_f64;
    int64_t data_n;
};

static const double MANDEL_BOX[4] = {-2.0, 1.0, -1.0, 1.0};

static void mandel_c(const Workload *w, bool simd, void *out)
{
    (simd ? mandel_simd : mandel_scalar)(MANDEL_BOX[0], MANDEL_BOX[1], MANDEL_BOX[2],
                                         MANDEL_BOX[3], out, w->height, w->width, w->iters);
}

static void escape_c(const Workload *w, bool simd, void *out)
{
    (simd ? escape_simd : escape_scalar)(w->re, w->im, w->iters, out, w->n);
}

static void collatz_c(const Workload *w, bool simd, void *out)
{
    (simd ? collatz_simd : collatz_scalar)(w->values, out, w->n);
}

static void das_c(const Workload *w, bool simd, void *out)
{
    (simd ? das_simd : das_scalar)(out, w->height, w->width, w->data);
}

static void block_sum_c(const Workload *w, bool simd, void *out)
{
    (simd ? block_sum_simd : block_sum_scalar)(w->x, w->n, out);
}

/* Integer results, and delay-and-sum's exact sums: equal to the scalar C's. */
static bool check_exact(const Workload *w, const void *out, char *why, size_t why_size)
{
    if (memcmp(out, w->c_out[0], w->out_bytes) == 0)
        return true;
    size_t differ = 0, first = 0, element = w->out_bytes / (size_t)w->elements;
    const unsigned char *a = out, *b = w->c_out[0];
    for (size_t e = (size_t)w->elements; e-- > 0;)
        if (memcmp(a + e * element, b + e * element, element) != 0) differ++, first = e;
    snprintf(why, why_size, "%zu of %lld elements differ from the scalar C's, the first at %zu",
             differ, (long long)w->elements, first);
    return false;
}

/* Block sums: near the float64 sum, and the same bits as every other runner. */
static bool check_block_sum(const Workload *w, const void *out, char *why, size_t why_size)
{
    const float *sums = out, *scalar = w->c_out[0];
    for (int64_t b = 0; b < w->elements; b++) {
        double error = fabs((double)sums[b] - w->block_sum_f64[b]);
        if (!(error <= 1e-5 * w->block_abs_f64[b] + 1e-30)) {
            snprintf(why, why_size, "block %lld: %.9g, float64 sum %.17g", (long long)b,
                     (double)sums[b], w->block_sum_f64[b]);
            return false;
        }
        if (memcmp(&sums[b], &scalar[b], sizeof(float)) != 0) {
            snprintf(why, why_size, "block %lld: %.9g, not the bits of the scalar C's tree %.9g",
                     (long long)b, (double)sums[b], (double)scalar[b]);
            return false;
        }
    }
    return true;
}

/* xorshift64, as bench_cpu.c's fill_random: the same inputs every run. */
static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13, *state ^= *state >> 7, *state ^= *state << 17;
    return *state;
}

static void setup_mandel(Workload *w, bool smoke)
{
    w->height = smoke ? 37 : 1024, w->width = smoke ? 101 : 1536, w->iters = 20;
    snprintf(w->name, sizeof w->name, "mandelbrot %lldx%lldx%d", (long long)w->width,
             (long long)w->height, w->iters);
    w->file = "mandelbrot.kern", w->function_name = "mandel_kernel";
    w->in_examples = true;
    w->elements = w->height * w->width, w->out_bytes = (size_t)w->elements;
    w->kjit_out = bench_alloc(w->out_bytes);
    int64_t shape[2] = {w->height, w->width};
    w->arrays[0] = kjit_array_make(w->kjit_out, KJIT_U8, 2, shape);
    w->args[0] = kjit_arg_f64(MANDEL_BOX[0]), w->args[1] = kjit_arg_f64(MANDEL_BOX[1]);
    w->args[2] = kjit_arg_f64(MANDEL_BOX[2]), w->args[3] = kjit_arg_f64(MANDEL_BOX[3]);
    w->args[4] = kjit_arg_array(&w->arrays[0]), w->args[5] = kjit_arg_i32(w->iters);
    w->nargs = 6, w->is_kernel = true;
    /* bench_cpu.c's launch: 32 x 8 blocks, a grid that covers the image once. */
    w->grid[0] = (uint32_t)((w->width + 31) / 32), w->grid[1] = (uint32_t)((w->height + 7) / 8);
    w->grid[2] = 1, w->block[0] = 32, w->block[1] = 8, w->block[2] = 1;
    w->run_c = mandel_c, w->check = check_exact;
}

/* The points of the Mandelbrot image [-2, 1] x [-1, 1], rounded to f32. */
static void setup_escape(Workload *w, bool smoke)
{
    int64_t height = smoke ? 29 : 1024, width = smoke ? 43 : 1536;
    w->n = height * width, w->iters = 64;
    snprintf(w->name, sizeof w->name, "escape f32 %lldx%lldx%d", (long long)width,
             (long long)height, w->iters);
    w->file = "simd.kern", w->function_name = "escape";
    w->re = bench_alloc(sizeof(float) * (size_t)w->n), w->im = bench_alloc(sizeof(float) * (size_t)w->n);
    for (int64_t y = 0; y < height; y++)
        for (int64_t x = 0; x < width; x++) {
            w->re[y * width + x] = (float)(-2.0 + 3.0 * (double)x / (double)width);
            w->im[y * width + x] = (float)(-1.0 + 2.0 * (double)y / (double)height);
        }
    w->elements = w->n, w->out_bytes = sizeof(int32_t) * (size_t)w->n;
    w->kjit_out = bench_alloc(w->out_bytes);
    kjit_array *a = w->arrays;
    a[0] = kjit_array_make(w->re, KJIT_F32, 1, &w->n);
    a[1] = kjit_array_make(w->im, KJIT_F32, 1, &w->n);
    w->kjit_out_array = kjit_array_make(w->kjit_out, KJIT_I32, 1, &w->n);
    w->args[0] = kjit_arg_array(&a[0]), w->args[1] = kjit_arg_array(&a[1]);
    w->args[2] = kjit_arg_i32(w->iters), w->nargs = 3;
    w->run_c = escape_c, w->check = check_exact;
}

static void setup_collatz(Workload *w, bool smoke)
{
    w->n = smoke ? 1003 : 1 << 20;
    snprintf(w->name, sizeof w->name, "collatz i64 1..%lld", (long long)w->n);
    w->file = "simd.kern", w->function_name = "collatz";
    w->values = bench_alloc(sizeof(int64_t) * (size_t)w->n);
    for (int64_t i = 0; i < w->n; i++) w->values[i] = i + 1;
    w->elements = w->n, w->out_bytes = sizeof(int64_t) * (size_t)w->n;
    w->kjit_out = bench_alloc(w->out_bytes);
    w->arrays[0] = kjit_array_make(w->values, KJIT_I64, 1, &w->n);
    w->kjit_out_array = kjit_array_make(w->kjit_out, KJIT_I64, 1, &w->n);
    w->args[0] = kjit_arg_array(&w->arrays[0]), w->nargs = 1;
    w->run_c = collatz_c, w->check = check_exact;
}

/* 128 channels of 2000 samples, integers below 1000 (bench_cpu.c's). */
static void setup_das(Workload *w, bool smoke)
{
    w->height = smoke ? 9 : 76, w->width = smoke ? 13 : 120;
    snprintf(w->name, sizeof w->name, "delay-and-sum %lldx%lld", (long long)w->width,
             (long long)w->height);
    w->file = "das.kern", w->function_name = "das";
    w->in_examples = true;
    w->data_n = 128 * 2000;
    w->data = bench_alloc(sizeof(int64_t) * (size_t)w->data_n);
    for (int64_t i = 0; i < w->data_n; i++) w->data[i] = (i * 7919) % 1000;
    w->elements = w->height * w->width, w->out_bytes = sizeof(double) * (size_t)w->elements;
    w->kjit_out = bench_alloc(w->out_bytes);
    int64_t shape[2] = {w->height, w->width};
    kjit_array *a = w->arrays;
    a[0] = kjit_array_make(w->kjit_out, KJIT_F64, 2, shape);
    a[1] = kjit_array_make(w->data, KJIT_I64, 1, &w->data_n);
    w->args[0] = kjit_arg_array(&a[0]), w->args[1] = kjit_arg_array(&a[1]), w->nargs = 2;
    w->is_kernel = true;
    w->grid[0] = (uint32_t)w->width, w->grid[1] = w->grid[2] = 1;
    w->block[0] = (uint32_t)w->height, w->block[1] = w->block[2] = 1;
    w->run_c = das_c, w->check = check_exact;
}

static void setup_block_sum(Workload *w, bool smoke)
{
    w->n = smoke ? 256 * 5 + 37 : 1 << 19;
    int64_t blocks = (w->n + 255) / 256;
    snprintf(w->name, sizeof w->name, "block sum f32 %lld (256 per block)", (long long)w->n);
    w->file = "simd.kern", w->function_name = "block_sum";
    w->x = bench_alloc(sizeof(float) * (size_t)w->n);
    uint64_t state = 88172645463325252ull;
    for (int64_t i = 0; i < w->n; i++)
        w->x[i] = (float)((double)(next_random(&state) >> 11) / 9007199254740992.0 - 0.25);
    w->block_sum_f64 = bench_alloc(sizeof(double) * (size_t)blocks);
    w->block_abs_f64 = bench_alloc(sizeof(double) * (size_t)blocks);
    for (int64_t b = 0; b < blocks; b++) {
        double sum = 0, abs_sum = 0;
        for (int64_t i = b * 256; i < w->n && i < (b + 1) * 256; i++)
            sum += w->x[i], abs_sum += fabs(w->x[i]);
        w->block_sum_f64[b] = sum, w->block_abs_f64[b] = abs_sum;
    }
    w->elements = blocks, w->out_bytes = sizeof(float) * (size_t)blocks;
    w->kjit_out = bench_alloc(w->out_bytes);
    kjit_array *a = w->arrays;
    a[0] = kjit_array_make(w->x, KJIT_F32, 1, &w->n);
    a[1] = kjit_array_make(w->kjit_out, KJIT_F32, 1, &blocks);
    w->args[0] = kjit_arg_array(&a[0]), w->args[1] = kjit_arg_array(&a[1]), w->nargs = 2;
    w->is_kernel = true;
    w->grid[0] = (uint32_t)blocks, w->grid[1] = w->grid[2] = 1;
    w->block[0] = 256, w->block[1] = w->block[2] = 1;
    w->run_c = block_sum_c, w->check = check_block_sum;
}

/* The block sum with its tree in a device function (simd.kern): the same
 * inputs, references and checks. */
static void setup_block_sum_helper(Workload *w, bool smoke)
{
    setup_block_sum(w, smoke);
    snprintf(w->name, sizeof w->name, "block sum f32 %lld, tree in a helper", (long long)w->n);
    w->function_name = "block_sum_helper";
}

/* The rows, in the table's order; the keys are --only's names. */
static const struct {
    const char *key;
    void (*setup)(Workload *w, bool smoke);
} rows[] = {
    {"mandel", setup_mandel},   {"escape", setup_escape},       {"das", setup_das},
    {"collatz", setup_collatz}, {"block_sum", setup_block_sum},
    {"block_sum_helper", setup_block_sum_helper},
};
enum { WORKLOAD_COUNT = sizeof rows / sizeof rows[0] };

/* ------------------------------------------------------------ running */

typedef struct Bench {
    kjit_context *context[2]; /* cpu, parallel; NULL when not timed */
    bool timed[RUNNER_COUNT];
} Bench;

/* One run of one runner; its output lands in w->kjit_out or w->c_out[simd]. */
static void run_once(const Bench *bench, Workload *w, int runner)
{
    if (runner == RUNNER_HAND_SIMD || runner == RUNNER_SCALAR_C) {
        bool simd = runner == RUNNER_HAND_SIMD;
        w->run_c(w, simd, w->c_out[simd]);
        return;
    }
    kjit_function *function = w->function[runner];
    kjit_context *context = bench->context[runner];
    kjit_status status =
        w->is_kernel ? kjit_launch(function, w->grid, w->block, w->args, w->nargs, NULL)
                     : kjit_call(function, w->args, w->nargs, &w->kjit_out_array, NULL);
    die_on(status, context, w->name);
}

static void *runner_output(Workload *w, int runner)
{
    if (runner == RUNNER_HAND_SIMD) return w->c_out[1];
    if (runner == RUNNER_SCALAR_C) return w->c_out[0];
    return w->kjit_out;
}

/* Runs a runner once on a poisoned output and checks what it wrote. */
static bool run_checked(const Bench *bench, Workload *w, int runner)
{
    void *out = runner_output(w, runner);
    memset(out, 0xa5, w->out_bytes);
    run_once(bench, w, runner);
    char why[256];
    if (w->check(w, out, why, sizeof why))
        return true;
    fprintf(stderr, "bench_simd: %s on %s: %s\n", w->name, runner_keys[runner], why);
    return false;
}

static bool write_file(const char *dir, const char *name, const void *data, size_t bytes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *file = fopen(path, "wb");
    bool ok = file && fwrite(data, 1, bytes, file) == bytes;
    if (file) ok = fclose(file) == 0 && ok;
    if (!ok) fprintf(stderr, "bench_simd: cannot write %s\n", path);
    return ok;
}

/* The inputs and the scalar C's results, for the Numba rows. */
static bool save_refs(const char *dir, Workload *w, int count)
{
    char name[128];
    bool ok = true;
    FILE *manifest;
    char path[4096];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (!(manifest = fopen(path, "w"))) {
        fprintf(stderr, "bench_simd: cannot write %s\n", path);
        return false;
    }
    fprintf(manifest, "{");
    for (int i = 0; i < count; i++) {
        Workload *v = &w[i];
        snprintf(name, sizeof name, "%s.expected", v->key);
        ok = write_file(dir, name, v->c_out[0], v->out_bytes) && ok;
        fprintf(manifest, "%s\"%s\": {\"name\": \"%s\", \"height\": %lld, \"width\": %lld, "
                "\"n\": %lld, \"iters\": %d, \"elements\": %lld}", i ? ", " : "", v->key, v->name,
                (long long)v->height, (long long)v->width, (long long)v->n, v->iters,
                (long long)v->elements);
        if (v->re) ok = write_file(dir, "escape.re", v->re, sizeof(float) * (size_t)v->n) && ok;
        if (v->im) ok = write_file(dir, "escape.im", v->im, sizeof(float) * (size_t)v->n) && ok;
        if (v->data) ok = write_file(dir, "das.data", v->data, sizeof(int64_t) * 128 * 2000) && ok;
        if (v->x) {
            ok = write_file(dir, "block_sum.x", v->x, sizeof(float) * (size_t)v->n) && ok;
            ok = write_file(dir, "block_sum.f64", v->block_sum_f64,
                            sizeof(double) * (size_t)v->elements) && ok;
            ok = write_file(dir, "block_sum.abs", v->block_abs_f64,
                            sizeof(double) * (size_t)v->elements) && ok;
        }
    }
    fprintf(manifest, "}\n");
    return fclose(manifest) == 0 && ok;
}

/* Whether key is one of the comma-separated list's names. */
static bool listed(const char *list, const char *key)
{
    size_t length = strlen(key);
    for (const char *p = list; *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
        if (strncmp(p, key, length) == 0 && (p[length] == ',' || p[length] == '\0'))
            return true;
    }
    return false;
}

static bool parse_targets(const char *list, Bench *bench)
{
    bench->timed[RUNNER_CPU] = bench->timed[RUNNER_PARALLEL] = false;
    char copy[64];
    snprintf(copy, sizeof copy, "%s", list);
    for (char *name = strtok(copy, ","); name; name = strtok(NULL, ",")) {
        if (strcmp(name, "cpu") == 0) bench->timed[RUNNER_CPU] = true;
        else if (strcmp(name, "parallel") == 0) bench->timed[RUNNER_PARALLEL] = true;
        else return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    int repeat = 7;
    bool smoke = false;
    const char *save_dir = NULL, *only = NULL, *dirs[2] = {NULL, NULL};
    int ndirs = 0;
    Bench bench = {.timed = {true, true, true, true}};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--repeat=", 9) == 0 && atoi(arg + 9) > 0) repeat = atoi(arg + 9);
        else if (strncmp(arg, "--targets=", 10) == 0 && parse_targets(arg + 10, &bench)) {}
        else if (strcmp(arg, "--no-refs") == 0)
            bench.timed[RUNNER_HAND_SIMD] = bench.timed[RUNNER_SCALAR_C] = false;
        else if (strncmp(arg, "--save-refs=", 12) == 0) save_dir = arg + 12;
        else if (strncmp(arg, "--only=", 7) == 0) only = arg + 7;
        else if (strcmp(arg, "--smoke") == 0) smoke = true;
        else if (arg[0] != '-' && ndirs < 2) dirs[ndirs++] = arg;
        else {
            fprintf(stderr, "usage: bench_simd [--repeat=N] [--targets=cpu,parallel] [--no-refs]\n"
                            "                  [--only=KEY,...] [--save-refs=DIR] [--smoke]\n"
                            "                  EXAMPLES_DIR BENCH_DIR\n");
            return 2;
        }
    }
    if (ndirs != 2) {
        fprintf(stderr, "bench_simd: EXAMPLES_DIR and BENCH_DIR are needed\n");
        return 2;
    }

    const kjit_target targets[2] = {KJIT_TARGET_CPU, KJIT_TARGET_PARALLEL};
    Workload workloads[WORKLOAD_COUNT];
    memset(workloads, 0, sizeof workloads);
    for (int t = 0; t < 2; t++) {
        if (!bench.timed[t]) continue;
        kjit_options options;
        kjit_options_init(&options);
        options.target = targets[t];
        die_on(kjit_context_create(&options, &bench.context[t]), NULL, "context");
    }
    int count = 0;
    for (int i = 0; i < WORKLOAD_COUNT; i++) {
        if (only && !listed(only, rows[i].key))
            continue;
        Workload *w = &workloads[count++];
        w->key = rows[i].key;
        rows[i].setup(w, smoke);
        if (!smoke && !wanted(w->name)) { /* KJIT_BENCH_ONLY (bench_common.h) */
            memset(w, 0, sizeof *w), count--;
            continue;
        }
        w->c_out[0] = bench_alloc(w->out_bytes), w->c_out[1] = bench_alloc(w->out_bytes);
        for (int t = 0; t < 2; t++)
            if (bench.timed[t])
                w->function[t] = load(bench.context[t], dirs[w->in_examples ? 0 : 1],
                                            w->file, w->function_name);
    }

    /* The scalar C's results are what everything is checked against. */
    for (int i = 0; i < count; i++) {
        Workload *w = &workloads[i];
        w->run_c(w, false, w->c_out[0]);
        char why[256];
        if (w->check == check_block_sum && !check_block_sum(w, w->c_out[0], why, sizeof why)) {
            fprintf(stderr, "bench_simd: %s on scalar_c: %s\n", w->name, why);
            return 1;
        }
    }
    if (save_dir && !save_refs(save_dir, workloads, count))
        return 1;

    double medians[WORKLOAD_COUNT][RUNNER_COUNT];
    bool ok = true;
    double *times = bench_alloc(sizeof(double) * (size_t)repeat * RUNNER_COUNT);
    for (int i = 0; i < count; i++) {
        Workload *w = &workloads[i];
        for (int r = 0; r < RUNNER_COUNT; r++)
            if (bench.timed[r] || smoke)
                if (r >= RUNNER_HAND_SIMD || bench.context[r])
                    ok = run_checked(&bench, w, r) && ok;
        if (smoke || !ok)
            continue;
        for (int k = 0; k < repeat; k++)
            for (int r = 0; r < RUNNER_COUNT; r++) {
                if (!bench.timed[r]) continue;
                double t0 = now_ms();
                run_once(&bench, w, r);
                times[r * repeat + k] = now_ms() - t0;
            }
        for (int r = 0; r < RUNNER_COUNT; r++) {
            if (!bench.timed[r]) continue;
            medians[i][r] = median_of(times + r * repeat, repeat);
        }
        /* Timed runs write the outputs again: check the last ones too. */
        for (int r = 0; r < RUNNER_COUNT; r++) {
            char why[256];
            if (bench.timed[r] && !w->check(w, runner_output(w, r), why, sizeof why)) {
                fprintf(stderr, "bench_simd: %s on %s, timed: %s\n", w->name, runner_keys[r], why);
                ok = false;
            }
        }
    }
    bench_free(times);
    if (!ok)
        return 1;
    if (smoke) {
        printf("bench_simd --smoke: %d workloads agree on", count);
        for (int r = 0; r < RUNNER_COUNT; r++)
            if (r >= RUNNER_HAND_SIMD || bench.context[r]) printf(" %s", runner_keys[r]);
        printf(" (%s)\n", simd_ref_isa());
    } else {
        printf("{\"isa\": \"%s\"", simd_ref_isa());
        for (int r = 0; r < RUNNER_COUNT; r++) {
            if (!bench.timed[r]) continue;
            printf(", \"%s\": {", runner_keys[r]);
            for (int i = 0; i < count; i++)
                printf("%s\"%s\": %.4f", i ? ", " : "", workloads[i].name, medians[i][r]);
            printf("}");
        }
        printf("}\n");
    }
    for (int t = 0; t < 2; t++)
        if (bench.context[t]) kjit_context_destroy(bench.context[t]);
    return 0;
}
