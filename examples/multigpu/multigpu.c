/*
 * multigpu.c: one problem split over every GPU of the host, one kjit_context
 * per device, the GPUs' edges swapped with kjit_copy between devices (peer
 * copies where the GPUs have peer access).  Without a GPU the same program
 * splits the work over cpu contexts instead, so it runs (and is tested)
 * everywhere.
 *
 *   multigpu heat [--parts K] [--target T] [--rows N] [--cols M] [--steps S]
 *                 [--check] [--no-exchange] [--kern FILE]
 *   multigpu sum  [--parts K] [--target T] [--n COUNT] [--repeat R]
 *   multigpu copy [--parts K] [--target T]
 *
 * heat: the 2-D heat equation of examples/mpi/heat2d.kern, the N x M grid
 * cut into K bands of rows, one per device, each with a halo row above and
 * below; every step launches the kernel on every device (the launches do not
 * wait, so the devices run at once), then copies each band's edge rows into
 * its neighbours' halos, device to device.  The residual sum((v - u)^2) is a
 * @reduce on each device into device memory, the partial sums added here.
 * --check: the same steps on the whole grid in one piece on the first device
 * must give the same field bitwise (each point is the same expression of the
 * same inputs however the rows are cut), and on the cpu the same field to
 * within 1e-5 (cuda contracts a multiply and an add into one fma; the cpu
 * does not); the residual to a relative 1e-9 of one part's (its sums run
 * in another order) and 1e-3 of the cpu's (each (v - u)^2 carries the
 * fma's rounding, relative to a difference far smaller than u).
 *
 * sum: COUNT f32 values, a fixed pattern written on each device by a kernel,
 * summed by the @reduce `total` on each device at once; checked against the
 * exact sum to a relative 1e-5.
 *
 * copy: kjit_copy between the device arrays of each pair of neighbouring
 * parts, both ways, through either's context, without and with a stream,
 * for sizes from one element to more than the 64 MiB a staged copy takes at
 * a time; every byte checked.
 *
 * heat and sum print the time of the split run and of the same work on the first
 * device alone ("... speed-up X on K devices"): the figures of
 * tests/gpu/multigpu.sh.  T is cuda (the default when a GPU is present; K
 * then defaults to every GPU), cpu or parallel (K defaults to 2).  Exit
 * status 0 when every check passed.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kjit.h"

typedef struct Options {
    const char *mode;
    kjit_target target;
    int parts;
    int64_t rows, cols, n;
    int steps, repeat;
    bool check, exchange;
    const char *kern;
} Options;

/* One device's share: its context, kernels and band (or slice). */
typedef struct Part {
    kjit_context *context;
    kjit_function *step, *residual, *total, *fill;
    int64_t first, rows; /* heat: global index of the first own row, own rows */
    kjit_array u, v;     /* heat: (rows + 2) x cols; sum: u is the slice */
    kjit_array partial;  /* a 0-d device array for the reductions */
} Part;

static int failed;

static void die(kjit_context *context, const char *what)
{
    fprintf(stderr, "multigpu: %s: %s\n", what, kjit_last_error(context));
    exit(2);
}

static void need(kjit_status status, kjit_context *context, const char *what)
{
    if (status != KJIT_OK)
        die(context, what);
}

/* Host memory, or a clear exit (a grid too large for this machine). */
static void *xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size);
    if (!p) {
        fprintf(stderr, "multigpu: out of host memory (%zu x %zu bytes)\n", count, size);
        exit(2);
    }
    return p;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void usage(void)
{
    fprintf(stderr, "usage: multigpu heat [--parts K] [--target cuda|cpu|parallel] [--rows N] "
                    "[--cols M] [--steps S] [--check] [--no-exchange] [--kern FILE]\n"
                    "       multigpu sum [--parts K] [--target cuda|cpu|parallel] [--n COUNT] "
                    "[--repeat R] [--kern FILE]\n"
                    "       multigpu copy [--parts K] [--target cuda|cpu|parallel]\n");
    exit(2);
}

static int64_t parse_count(const char *text, const char *option)
{
    char *end;
    double value = strtod(text, &end); /* 2e9 as well as 2000000000 */
    if (*end != '\0' || !(value >= 1) || value > 9e15 || value != floor(value)) {
        fprintf(stderr, "multigpu: %s takes a positive whole number, not '%s'\n", option, text);
        usage();
    }
    return (int64_t)value;
}

static Options parse(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "heat") != 0 && strcmp(argv[1], "sum") != 0 &&
                     strcmp(argv[1], "copy") != 0))
        usage();
    Options o = {argv[1], KJIT_TARGET_AUTO, 0, 4096, 4096, 100000000, 100, 10, false, true,
                 "examples/mpi/heat2d.kern"};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(a, "--target") == 0 && has_value) {
            const char *t = argv[++i];
            o.target = strcmp(t, "cpu") == 0        ? KJIT_TARGET_CPU
                       : strcmp(t, "parallel") == 0 ? KJIT_TARGET_PARALLEL
                       : strcmp(t, "cuda") == 0     ? KJIT_TARGET_CUDA
                                                    : KJIT_TARGET_AUTO;
            if (o.target == KJIT_TARGET_AUTO) {
                fprintf(stderr, "multigpu: unknown target '%s'\n", t);
                usage();
            }
        } else if (strcmp(a, "--parts") == 0 && has_value) {
            o.parts = (int)parse_count(argv[++i], a);
        } else if (strcmp(a, "--rows") == 0 && has_value) {
            o.rows = parse_count(argv[++i], a);
        } else if (strcmp(a, "--cols") == 0 && has_value) {
            o.cols = parse_count(argv[++i], a);
        } else if (strcmp(a, "--n") == 0 && has_value) {
            o.n = parse_count(argv[++i], a);
        } else if (strcmp(a, "--steps") == 0 && has_value) {
            o.steps = (int)parse_count(argv[++i], a);
        } else if (strcmp(a, "--repeat") == 0 && has_value) {
            o.repeat = (int)parse_count(argv[++i], a);
        } else if (strcmp(a, "--kern") == 0 && has_value) {
            o.kern = argv[++i];
        } else if (strcmp(a, "--check") == 0) {
            o.check = true;
        } else if (strcmp(a, "--no-exchange") == 0) {
            o.exchange = false;
        } else {
            usage();
        }
    }
    int gpus = kjit_cuda_device_count();
    if (o.target == KJIT_TARGET_AUTO)
        o.target = gpus > 0 ? KJIT_TARGET_CUDA : KJIT_TARGET_CPU;
    if (o.target == KJIT_TARGET_CUDA && gpus == 0) {
        char reason[256] = "";
        kjit_cuda_available(reason, sizeof reason);
        fprintf(stderr, "multigpu: --target cuda: %s\n", reason);
        exit(2);
    }
    if (o.parts == 0)
        o.parts = o.target == KJIT_TARGET_CUDA ? gpus : 2;
    if (o.target == KJIT_TARGET_CUDA && o.parts > gpus) {
        fprintf(stderr, "multigpu: --parts %d: this machine has %d GPU%s\n", o.parts, gpus,
                gpus == 1 ? "" : "s");
        exit(2);
    }
    if (o.cols < 3 || o.rows < 3 || o.rows < o.parts) {
        fprintf(stderr, "multigpu: the grid needs at least 3 columns and max(3, parts) rows\n");
        usage();
    }
    return o;
}

/* Part k's context: GPU k on cuda. */
static void part_open(Part *p, const Options *o, kjit_target target, int device)
{
    memset(p, 0, sizeof *p);
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.device = device;
    need(kjit_context_create(&options, &p->context), NULL, "kjit_context_create");
    kjit_module *module;
    need(kjit_compile_file(p->context, o->kern, &module), p->context, o->kern);
    need(kjit_module_function(module, "heat_step", &p->step), p->context, "heat_step");
    need(kjit_module_function(module, "residual", &p->residual), p->context, "residual");
    need(kjit_module_function(module, "total", &p->total), p->context, "total");
    need(kjit_module_function(module, "fill", &p->fill), p->context, "fill");
}

static void part_close(Part *p)
{
    kjit_context_destroy(p->context); /* and its device arrays */
}

static kjit_array rows_of(const kjit_array *whole, int64_t row, int64_t count)
{
    int64_t shape[2] = {count, whole->shape[1]};
    kjit_array a = kjit_array_make((char *)whole->data + row * whole->shape[1] * sizeof(float),
                                   KJIT_F32, 2, shape);
    a.memory = whole->memory;
    return a;
}

/* ================================================================ heat */

static float initial(int64_t i, int64_t j, int64_t rows, int64_t cols)
{
    if (i == 0)
        return 1.0f;
    if (i == rows - 1)
        return 0.0f;
    if (j == 0 || j == cols - 1)
        return 0.5f;
    return (float)((i * 7 + j * 13) % 17) / 17.0f;
}

/* The band of rows first .. first + rows - 1 and its halos into u and v
 * (device arrays of the part's context). */
static void heat_fill(Part *p, const Options *o, int64_t first, int64_t rows)
{
    p->first = first;
    p->rows = rows;
    int64_t shape[2] = {rows + 2, o->cols};
    need(kjit_device_alloc(p->context, KJIT_F32, 2, shape, &p->u), p->context, "alloc");
    need(kjit_device_alloc(p->context, KJIT_F32, 2, shape, &p->v), p->context, "alloc");
    need(kjit_device_alloc(p->context, KJIT_F64, 0, NULL, &p->partial), p->context, "alloc");
    float *host = xcalloc((size_t)(rows + 2) * (size_t)o->cols, sizeof(float));
    for (int64_t k = 0; k < rows + 2; k++) {
        int64_t i = first - 1 + k;
        for (int64_t j = 0; j < o->cols; j++)
            host[k * o->cols + j] =
                i < 0 || i >= o->rows ? 0.0f : initial(i, j, o->rows, o->cols);
    }
    kjit_array h = kjit_array_make(host, KJIT_F32, 2, shape);
    need(kjit_copy(p->context, &p->u, &h, NULL), p->context, "copy in");
    need(kjit_copy(p->context, &p->v, &h, NULL), p->context, "copy in");
    free(host);
    kjit_arg args[5] = {kjit_arg_array(&p->u), kjit_arg_array(&p->v), kjit_arg_i64(1),
                        kjit_arg_i64(1), kjit_arg_f32(0.2f)};
    need(kjit_prepare(p->step, args, 5, NULL), p->context, "heat_step");
    need(kjit_reduce_prepare(p->residual, args, 2, NULL, 0), p->context, "residual");
}

/* v = step(u) on the band's moving rows (launched, not waited for). */
static void heat_step(Part *p, int64_t grid_rows)
{
    int64_t first = p->first == 0 ? 2 : 1;
    int64_t last = p->rows + 1 - (p->first + p->rows == grid_rows);
    if (last > first) {
        int64_t cols = p->u.shape[1] - 2, rows = last - first;
        uint32_t block[3] = {256, 1, 1};
        uint32_t grid[3] = {(uint32_t)((cols + 255) / 256),
                            (uint32_t)(rows < 65535 ? rows : 65535), 1};
        kjit_arg args[5] = {kjit_arg_array(&p->u), kjit_arg_array(&p->v), kjit_arg_i64(first),
                            kjit_arg_i64(last), kjit_arg_f32(0.2f)};
        need(kjit_launch(p->step, grid, block, args, 5, NULL), p->context, "heat_step");
    }
    kjit_array t = p->u;
    p->u = p->v;
    p->v = t;
}

/* Each band's edge rows into its neighbours' halos, device to device. */
static void heat_exchange(Part *parts, int count)
{
    for (int k = 0; k + 1 < count; k++) {
        Part *a = &parts[k], *b = &parts[k + 1];
        kjit_array a_last = rows_of(&a->u, a->rows, 1), a_halo = rows_of(&a->u, a->rows + 1, 1);
        kjit_array b_first = rows_of(&b->u, 1, 1), b_halo = rows_of(&b->u, 0, 1);
        need(kjit_copy(a->context, &b_halo, &a_last, NULL), a->context, "halo copy");
        need(kjit_copy(a->context, &a_halo, &b_first, NULL), a->context, "halo copy");
    }
}

/* The residual of the last step: a reduction on every device into its own
 * device memory (none waits), then the partial sums added in part order. */
static double heat_residual(Part *parts, int count)
{
    for (int k = 0; k < count; k++) {
        Part *p = &parts[k];
        kjit_array now_rows = rows_of(&p->u, 1, p->rows), before = rows_of(&p->v, 1, p->rows);
        kjit_arg args[2] = {kjit_arg_array(&now_rows), kjit_arg_array(&before)};
        need(kjit_reduce(p->residual, args, 2, NULL, 0, NULL, &p->partial, NULL), p->context,
             "residual");
    }
    double sum = 0;
    for (int k = 0; k < count; k++) {
        double value = 0;
        kjit_array h = kjit_array_make(&value, KJIT_F64, 0, NULL);
        need(kjit_copy(parts[k].context, &h, &parts[k].partial, NULL), parts[k].context,
             "copy out");
        sum += value;
    }
    return sum;
}

/* S steps of the grid cut over `count` parts (the first `count` devices of
 * the target): the seconds of the steps, the field (host, malloc'ed) and
 * the residual. */
static double heat_run(const Options *o, kjit_target target, int count, bool exchange,
                       float **field, double *residual)
{
    Part *parts = xcalloc((size_t)count, sizeof *parts);
    for (int k = 0; k < count; k++) {
        part_open(&parts[k], o, target, target == KJIT_TARGET_CUDA ? k : -1);
        int64_t first = o->rows * k / count, next = o->rows * (k + 1) / count;
        heat_fill(&parts[k], o, first, next - first);
    }
    for (int k = 0; k < count; k++)
        need(kjit_synchronize(parts[k].context), parts[k].context, "synchronize");
    double start = now();
    for (int s = 0; s < o->steps; s++) {
        if (exchange)
            heat_exchange(parts, count);
        for (int k = 0; k < count; k++)
            heat_step(&parts[k], o->rows);
    }
    *residual = heat_residual(parts, count); /* waits for every device */
    double seconds = now() - start;
    *field = xcalloc((size_t)(o->rows * o->cols), sizeof(float));
    for (int k = 0; k < count; k++) {
        Part *p = &parts[k];
        int64_t shape[2] = {p->rows, o->cols};
        kjit_array h = kjit_array_make(*field + p->first * o->cols, KJIT_F32, 2, shape);
        kjit_array own = rows_of(&p->u, 1, p->rows);
        need(kjit_copy(p->context, &h, &own, NULL), p->context, "copy out");
        part_close(p);
    }
    free(parts);
    return seconds;
}

static void report(bool ok, const char *text)
{
    printf("check: %s: %s\n", ok ? "ok" : "FAILED", text);
    failed |= !ok;
}

static void heat(const Options *o)
{
    const char *target = kjit_target_name(o->target);
    float *split = NULL, *whole = NULL;
    double r_split = 0, r_whole = 0;
    double t_split = heat_run(o, o->target, o->parts, o->exchange, &split, &r_split);
    double t_whole = heat_run(o, o->target, 1, true, &whole, &r_whole);
    double bytes = 2.0 * (double)o->rows * (double)o->cols * sizeof(float) * o->steps;
    printf("heat: %lld x %lld f32, %d steps on %s: 1 part %.4f s (%.0f GB/s), %d parts %.4f s "
           "(%.0f GB/s): speed-up %.2f on %d, efficiency %.0f%%\n",
           (long long)o->rows, (long long)o->cols, o->steps, target, t_whole,
           bytes / t_whole * 1e-9, o->parts, t_split, bytes / t_split * 1e-9, t_whole / t_split,
           o->parts, 100 * t_whole / t_split / o->parts);
    printf("heat: residual %.17g (split), %.17g (one part)\n", r_split, r_whole);
    if (o->check) {
        size_t n = (size_t)(o->rows * o->cols);
        size_t differ = 0, at = 0;
        for (size_t k = 0; k < n; k++)
            if (memcmp(&split[k], &whole[k], sizeof(float)) != 0 && differ++ == 0)
                at = k;
        char text[320];
        snprintf(text, sizeof text, "the field of %d parts against one part on %s: %zu of %zu "
                 "points differ%s", o->parts, target, differ, n, differ ? "" : " (bitwise equal)");
        if (differ)
            snprintf(text + strlen(text), sizeof text - strlen(text),
                     ", first at row %zu, column %zu: %.9g, want %.9g", at / (size_t)o->cols,
                     at % (size_t)o->cols, split[at], whole[at]);
        report(differ == 0, text);
        double rel = fabs(r_split - r_whole) / (r_whole != 0 ? fabs(r_whole) : 1);
        snprintf(text, sizeof text, "the residual against one part's: relative difference "
                 "%.3g (allowed 1e-9)", rel);
        report(rel <= 1e-9, text);
        if (o->target == KJIT_TARGET_CUDA) {
            /* The cpu, one piece, the pool's threads: the reference that
             * shares no code with the GPU. */
            float *cpu = NULL;
            double r_cpu = 0;
            heat_run(o, KJIT_TARGET_PARALLEL, 1, true, &cpu, &r_cpu);
            double worst = 0;
            for (size_t k = 0; k < n; k++)
                worst = fmax(worst, fabs((double)split[k] - (double)cpu[k]));
            snprintf(text, sizeof text, "the field on %d GPUs against the cpu: largest "
                     "difference %.3g (allowed 1e-5)", o->parts, worst);
            report(worst <= 1e-5, text);
            rel = fabs(r_split - r_cpu) / (r_cpu != 0 ? fabs(r_cpu) : 1);
            snprintf(text, sizeof text, "the residual against the cpu's: relative difference "
                     "%.3g (allowed 1e-3)", rel);
            report(rel <= 1e-3, text);
            free(cpu);
        }
    }
    free(split);
    free(whole);
}

/* ================================================================= sum */

/* The exact sum of fill's values at indices 0 .. n - 1. */
static double exact_sum(int64_t n)
{
    double one_round = 0, sum = 0;
    for (int k = 0; k < 1000; k++)
        one_round += (double)((float)k / 1000.0f);
    sum = (double)(n / 1000) * one_round;
    for (int64_t k = 0; k < n % 1000; k++)
        sum += (double)((float)k / 1000.0f);
    return sum;
}

/* The seconds of the fastest of R sums of n values over `count` devices, and
 * the sum. */
static double sum_run(const Options *o, int count, double *result)
{
    Part *parts = xcalloc((size_t)count, sizeof *parts);
    for (int k = 0; k < count; k++) {
        Part *p = &parts[k];
        part_open(p, o, o->target, o->target == KJIT_TARGET_CUDA ? k : -1);
        int64_t first = o->n * k / count, size = o->n * (k + 1) / count - first;
        need(kjit_device_alloc(p->context, KJIT_F32, 1, &size, &p->u), p->context, "alloc");
        need(kjit_device_alloc(p->context, KJIT_F32, 0, NULL, &p->partial), p->context, "alloc");
        uint32_t grid[3] = {4096, 1, 1}, block[3] = {256, 1, 1};
        kjit_arg args[2] = {kjit_arg_array(&p->u), kjit_arg_i64(first)};
        need(kjit_launch(p->fill, grid, block, args, 2, NULL), p->context, "fill");
        kjit_arg x = kjit_arg_array(&p->u);
        need(kjit_reduce_prepare(p->total, &x, 1, NULL, 0), p->context, "total");
    }
    for (int k = 0; k < count; k++)
        need(kjit_synchronize(parts[k].context), parts[k].context, "synchronize");
    double best = INFINITY;
    for (int r = 0; r < o->repeat; r++) {
        double start = now();
        for (int k = 0; k < count; k++) {
            kjit_arg x = kjit_arg_array(&parts[k].u);
            need(kjit_reduce(parts[k].total, &x, 1, NULL, 0, NULL, &parts[k].partial, NULL),
                 parts[k].context, "total");
        }
        double sum = 0;
        for (int k = 0; k < count; k++) {
            float value = 0;
            kjit_array h = kjit_array_make(&value, KJIT_F32, 0, NULL);
            need(kjit_copy(parts[k].context, &h, &parts[k].partial, NULL), parts[k].context,
                 "copy out");
            sum += value;
        }
        best = fmin(best, now() - start);
        *result = sum;
    }
    for (int k = 0; k < count; k++)
        part_close(&parts[k]);
    free(parts);
    return best;
}

static void sum(const Options *o)
{
    double s_split = 0, s_whole = 0;
    double t_split = sum_run(o, o->parts, &s_split);
    double t_whole = sum_run(o, 1, &s_whole);
    double bytes = (double)o->n * sizeof(float);
    printf("sum: %lld f32 on %s, best of %d: 1 part %.5f s (%.0f GB/s), %d parts %.5f s "
           "(%.0f GB/s): speed-up %.2f on %d, efficiency %.0f%%\n",
           (long long)o->n, kjit_target_name(o->target), o->repeat, t_whole,
           bytes / t_whole * 1e-9, o->parts, t_split, bytes / t_split * 1e-9, t_whole / t_split,
           o->parts, 100 * t_whole / t_split / o->parts);
    double want = exact_sum(o->n);
    char text[256];
    for (int k = 0; k < 2; k++) {
        double got = k ? s_whole : s_split, rel = fabs(got - want) / want;
        snprintf(text, sizeof text, "the sum on %d part%s %.9g against the exact %.9g: relative "
                 "difference %.3g (allowed 1e-5)", k ? 1 : o->parts, k || o->parts == 1 ? "" : "s",
                 got, want, rel);
        report(rel <= 1e-5, text);
    }
}

/* ================================================================ copy */

/* Device array `a` of part p holds pattern(seed) and nothing else. */
static void copy_expect(Part *p, kjit_array *a, uint32_t seed, const char *what)
{
    int64_t n = a->shape[0];
    uint32_t *h = xcalloc((size_t)n, sizeof *h);
    kjit_array host = kjit_array_make(h, KJIT_U32, 1, &n);
    need(kjit_copy(p->context, &host, a, NULL), p->context, "copy out");
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (h[i] != (uint32_t)i * 2654435761u + seed)
            bad = i;
    char text[256];
    snprintf(text, sizeof text, "%s, %lld u32%s", what, (long long)n,
             bad < 0 ? "" : " (first wrong element below)");
    report(bad < 0, text);
    if (bad >= 0)
        printf("  element %lld: %u, want %u\n", (long long)bad, h[bad],
               (uint32_t)bad * 2654435761u + seed);
    free(h);
}

static void copy_fill(Part *p, kjit_array *a, uint32_t seed)
{
    int64_t n = a->shape[0];
    uint32_t *h = xcalloc((size_t)n, sizeof *h);
    for (int64_t i = 0; i < n; i++)
        h[i] = (uint32_t)i * 2654435761u + seed;
    kjit_array host = kjit_array_make(h, KJIT_U32, 1, &n);
    need(kjit_copy(p->context, a, &host, NULL), p->context, "copy in");
    free(h);
}

static void copy(const Options *o)
{
    Part *parts = xcalloc((size_t)o->parts, sizeof *parts);
    for (int k = 0; k < o->parts; k++)
        part_open(&parts[k], o, o->target, o->target == KJIT_TARGET_CUDA ? k : -1);
    const int64_t sizes[] = {1, 1000, 1 << 20, (int64_t)20e6 + 3};
    for (int k = 0; k + 1 < o->parts; k++) {
        Part *a = &parts[k], *b = &parts[k + 1];
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            int64_t n = sizes[i];
            kjit_array x, y;
            need(kjit_device_alloc(a->context, KJIT_U32, 1, &n, &x), a->context, "alloc");
            need(kjit_device_alloc(b->context, KJIT_U32, 1, &n, &y), b->context, "alloc");
            char what[128];
            copy_fill(a, &x, 1);
            need(kjit_copy(a->context, &y, &x, NULL), a->context, "kjit_copy");
            snprintf(what, sizeof what, "part %d to %d through %d's context", k, k + 1, k);
            copy_expect(b, &y, 1, what);
            copy_fill(b, &y, 2);
            need(kjit_copy(a->context, &x, &y, NULL), a->context, "kjit_copy");
            snprintf(what, sizeof what, "part %d to %d through %d's context", k + 1, k, k);
            copy_expect(a, &x, 2, what);
            /* On a stream of the other side's context, which orders the
             * copy after that stream's work only: the source's device must
             * be done with the fill (its last bytes may still be on the way
             * when the host copy returns). */
            kjit_stream *stream;
            need(kjit_stream_create(b->context, &stream), b->context, "stream");
            copy_fill(a, &x, 3);
            need(kjit_synchronize(a->context), a->context, "synchronize");
            need(kjit_copy(b->context, &y, &x, stream), b->context, "kjit_copy");
            need(kjit_stream_synchronize(stream), b->context, "stream");
            snprintf(what, sizeof what, "part %d to %d on a stream of %d", k, k + 1, k + 1);
            copy_expect(b, &y, 3, what);
            kjit_stream_destroy(stream);
            need(kjit_device_free(a->context, &x), a->context, "free");
            need(kjit_device_free(b->context, &y), b->context, "free");
        }
    }
    for (int k = 0; k < o->parts; k++)
        part_close(&parts[k]);
    free(parts);
}

int main(int argc, char **argv)
{
    Options o = parse(argc, argv);
    if (o.target == KJIT_TARGET_CUDA) {
        printf("multigpu: %d GPU%s used:", o.parts, o.parts == 1 ? "" : "s");
        for (int k = 0; k < o.parts; k++) {
            kjit_device_info info;
            if (kjit_cuda_device_info(k, &info) == KJIT_OK)
                printf(" [%d] %s", k, info.name);
        }
        printf("\n");
        for (int k = 0; k + 1 < o.parts; k++)
            printf("multigpu: GPU %d <-> GPU %d: %s\n", k, k + 1,
                   kjit_cuda_peer_access(k, k + 1) ? "peer access (copies go straight)"
                                                    : "no peer access (copies staged through "
                                                      "host memory)");
    } else {
        printf("multigpu: no GPU used: %d parts on %s\n", o.parts, kjit_target_name(o.target));
    }
    if (strcmp(o.mode, "heat") == 0)
        heat(&o);
    else if (strcmp(o.mode, "sum") == 0)
        sum(&o);
    else
        copy(&o);
    return failed;
}
