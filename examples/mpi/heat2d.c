/*
 * heat2d.c: the 2-D heat equation over MPI ranks, each rank's step a kjit
 * kernel (examples/mpi/heat2d.kern) on cpu, parallel or cuda (one GPU per
 * rank on a host).
 *
 *   mpirun -np 2 build/mpi/heat2d [--target cpu|parallel|cuda] [--rows N]
 *       [--cols M] [--steps S] [--every K] [--weak] [--check] [--no-exchange]
 *       [--kern examples/mpi/heat2d.kern]
 *
 * The N x M grid is cut into bands of rows, one per rank; each rank holds its
 * band with one halo row above and below, and before every step swaps its
 * edge rows with its neighbours by MPI_Sendrecv (through host buffers on
 * cuda: the MPI may not be CUDA-aware).  The global edge rows and columns
 * stay fixed.  Every K steps, and after the last, the residual sum((v - u)^2)
 * is a kjit @reduce over each rank's own rows, and the ranks' partial sums go
 * through MPI_Allreduce.  --weak makes N the rows of each rank (the grid
 * grows with the ranks: weak scaling).
 *
 * --check: rank 0 gathers the field and runs the same steps on the whole grid
 * in one piece (the one-process run).  The field must match bitwise: each
 * point is the same expression of the same inputs however the rows are cut.
 * The residual is a sum whose order follows the cut (kjit's tree over each
 * band, then MPI's over the ranks), so it must match to a relative 1e-12.
 * --no-exchange leaves the halos stale (a fault for the test to catch).
 *
 * Output: one line per residual, then "heat2d: ..." with the step loop's time
 * (the slowest rank's) and, with --check, "check: ..." lines; the exit status
 * is 0 when every check passed.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "kjit.h"

typedef struct Options {
    kjit_target target;
    int64_t rows, cols;
    int steps, every;
    bool weak, check, exchange;
    const char *kern;
} Options;

/* One rank's kjit objects and its band. */
typedef struct Band {
    kjit_context *context;
    kjit_function *step, *residual;
    bool device;   /* arrays in GPU memory */
    int64_t first; /* global index of the band's first own row */
    int64_t rows;  /* own rows */
    int64_t cols;
    kjit_array u, v; /* (rows + 2) x cols */
} Band;

static int rank, ranks;

static void die(const char *what, const char *message)
{
    fprintf(stderr, "heat2d (rank %d): %s: %s\n", rank, what, message);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

static void need(kjit_status status, kjit_context *context, const char *what)
{
    if (status != KJIT_OK)
        die(what, kjit_last_error(context));
}

static void usage(void)
{
    if (rank == 0)
        fprintf(stderr, "usage: heat2d [--target cpu|parallel|cuda] [--rows N] [--cols M] "
                        "[--steps S] [--every K] [--weak] [--check] [--no-exchange] "
                        "[--kern FILE]\n");
    MPI_Finalize();
    exit(2);
}

static int64_t parse_count(const char *text, const char *option)
{
    char *end;
    long long value = strtoll(text, &end, 10);
    if (*end != '\0' || value < 1 || value > (1ll << 40)) {
        if (rank == 0)
            fprintf(stderr, "heat2d: %s takes a positive count, not '%s'\n", option, text);
        usage();
    }
    return value;
}

static Options parse(int argc, char **argv)
{
    Options o = {KJIT_TARGET_CPU, 1024, 1024, 100, 10, false, false, true,
                 "examples/mpi/heat2d.kern"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(a, "--target") == 0 && has_value) {
            const char *t = argv[++i];
            o.target = strcmp(t, "cpu") == 0        ? KJIT_TARGET_CPU
                       : strcmp(t, "parallel") == 0 ? KJIT_TARGET_PARALLEL
                       : strcmp(t, "cuda") == 0     ? KJIT_TARGET_CUDA
                                                    : KJIT_TARGET_AUTO;
            if (o.target == KJIT_TARGET_AUTO) {
                if (rank == 0)
                    fprintf(stderr, "heat2d: unknown target '%s'\n", t);
                usage();
            }
        } else if (strcmp(a, "--rows") == 0 && has_value) {
            o.rows = parse_count(argv[++i], a);
        } else if (strcmp(a, "--cols") == 0 && has_value) {
            o.cols = parse_count(argv[++i], a);
        } else if (strcmp(a, "--steps") == 0 && has_value) {
            o.steps = (int)parse_count(argv[++i], a);
        } else if (strcmp(a, "--every") == 0 && has_value) {
            o.every = (int)parse_count(argv[++i], a);
        } else if (strcmp(a, "--kern") == 0 && has_value) {
            o.kern = argv[++i];
        } else if (strcmp(a, "--weak") == 0) {
            o.weak = true;
        } else if (strcmp(a, "--check") == 0) {
            o.check = true;
        } else if (strcmp(a, "--no-exchange") == 0) {
            o.exchange = false;
        } else {
            usage();
        }
    }
    if (o.cols < 3) {
        if (rank == 0)
            fprintf(stderr, "heat2d: --cols must be at least 3\n");
        usage();
    }
    return o;
}

/* The starting field: hot top edge, cold bottom, warm sides, and a pattern
 * inside so that every point moves.  A function of the global place only,
 * so every cut starts from the same bits. */
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

static kjit_array view(const kjit_array *whole, int64_t row, int64_t count, bool device)
{
    int64_t shape[2] = {count, whole->shape[1]};
    kjit_array a = kjit_array_make((char *)whole->data + row * whole->shape[1] * sizeof(float),
                                   KJIT_F32, 2, shape);
    a.memory = device ? KJIT_MEMORY_DEVICE : KJIT_MEMORY_HOST;
    return a;
}

/* Makes the context (the rank's GPU on cuda: ranks of one host take its GPUs
 * in turn), compiles the kernels and fills the band's two arrays. */
static void band_open(Band *b, const Options *o, int local_rank, int64_t grid_rows,
                      int64_t first, int64_t rows)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = o->target;
    if (o->target == KJIT_TARGET_CUDA) {
        int count = kjit_cuda_device_count();
        if (count < 1) {
            char reason[256] = "";
            kjit_cuda_available(reason, sizeof reason);
            die("no GPU for --target cuda", reason);
        }
        options.device = local_rank % count;
    }
    need(kjit_context_create(&options, &b->context), NULL, "kjit_context_create");
    kjit_module *module;
    need(kjit_compile_file(b->context, o->kern, &module), b->context, o->kern);
    need(kjit_module_function(module, "heat_step", &b->step), b->context, "heat_step");
    need(kjit_module_function(module, "residual", &b->residual), b->context, "residual");
    b->device = o->target == KJIT_TARGET_CUDA;
    b->first = first;
    b->rows = rows;
    b->cols = o->cols;

    int64_t shape[2] = {rows + 2, o->cols};
    size_t count = (size_t)(rows + 2) * (size_t)o->cols;
    float *host = malloc(count * sizeof(float));
    if (!host)
        die("malloc", "out of memory");
    for (int64_t k = 0; k < rows + 2; k++) {
        int64_t i = first - 1 + k; /* -1 and grid_rows: outside the grid, never read */
        for (int64_t j = 0; j < o->cols; j++)
            host[k * o->cols + j] = i < 0 || i >= grid_rows ? 0.0f : initial(i, j, grid_rows,
                                                                              o->cols);
    }
    kjit_array h = kjit_array_make(host, KJIT_F32, 2, shape);
    if (b->device) {
        need(kjit_device_alloc(b->context, KJIT_F32, 2, shape, &b->u), b->context, "alloc");
        need(kjit_device_alloc(b->context, KJIT_F32, 2, shape, &b->v), b->context, "alloc");
        need(kjit_copy(b->context, &b->u, &h, NULL), b->context, "copy in");
        need(kjit_copy(b->context, &b->v, &h, NULL), b->context, "copy in");
        free(host);
    } else {
        float *second = malloc(count * sizeof(float));
        if (!second)
            die("malloc", "out of memory");
        memcpy(second, host, count * sizeof(float));
        b->u = h;
        b->v = kjit_array_make(second, KJIT_F32, 2, shape);
    }
    /* Code generation (or the cache's load) before the clock starts. */
    kjit_arg args[5] = {kjit_arg_array(&b->u), kjit_arg_array(&b->v), kjit_arg_i64(1),
                        kjit_arg_i64(1), kjit_arg_f32(0.2f)};
    need(kjit_prepare(b->step, args, 5, NULL), b->context, "heat_step");
    need(kjit_reduce_prepare(b->residual, args, 2, NULL, 0), b->context, "residual");
}

/* One step: v = step(u) on the rows that move; then u and v trade places. */
static void band_step(Band *b, int64_t grid_rows)
{
    int64_t first = b->first == 0 ? 2 : 1;                     /* global row 0 is fixed */
    int64_t last = b->rows + 1 - (b->first + b->rows == grid_rows); /* and row N - 1 */
    if (last > first) {
        int64_t cols = b->cols - 2, rows = last - first;
        uint32_t block[3] = {256, 1, 1};
        uint32_t grid[3] = {(uint32_t)((cols + 255) / 256), (uint32_t)(rows < 65535 ? rows : 65535),
                            1};
        kjit_arg args[5] = {kjit_arg_array(&b->u), kjit_arg_array(&b->v), kjit_arg_i64(first),
                            kjit_arg_i64(last), kjit_arg_f32(0.2f)};
        need(kjit_launch(b->step, grid, block, args, 5, NULL), b->context, "heat_step");
    }
    kjit_array t = b->u;
    b->u = b->v;
    b->v = t;
}

/* sum((u - v)^2) over the band's own rows: after a step u is the new field
 * and v the one before. */
static double band_residual(Band *b)
{
    kjit_array now = view(&b->u, 1, b->rows, b->device);
    kjit_array before = view(&b->v, 1, b->rows, b->device);
    kjit_arg args[2] = {kjit_arg_array(&now), kjit_arg_array(&before)};
    kjit_array result;
    need(kjit_reduce(b->residual, args, 2, NULL, 0, NULL, NULL, &result), b->context, "residual");
    double value = *(double *)result.data;
    kjit_array_free(&result);
    return value;
}

/* Row `row` of u to or from a host buffer (a plain copy on the cpu targets). */
static void row_copy(Band *b, int64_t row, float *host, bool to_host)
{
    kjit_array r = view(&b->u, row, 1, b->device);
    int64_t shape[2] = {1, b->cols};
    kjit_array h = kjit_array_make(host, KJIT_F32, 2, shape);
    need(to_host ? kjit_copy(b->context, &h, &r, NULL) : kjit_copy(b->context, &r, &h, NULL),
         b->context, "halo copy");
}

/* The halo swap: own edge rows out, the neighbours' into the halo rows. */
static void band_exchange(Band *b, float *send, float *recv)
{
    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int down = rank < ranks - 1 ? rank + 1 : MPI_PROC_NULL;
    int n = (int)b->cols;
    /* the first own row goes up; the row below the band comes from below */
    row_copy(b, 1, send, true);
    MPI_Sendrecv(send, n, MPI_FLOAT, up, 0, recv, n, MPI_FLOAT, down, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (down != MPI_PROC_NULL)
        row_copy(b, b->rows + 1, recv, false);
    /* the last own row goes down; the row above comes from above */
    row_copy(b, b->rows, send, true);
    MPI_Sendrecv(send, n, MPI_FLOAT, down, 1, recv, n, MPI_FLOAT, up, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (up != MPI_PROC_NULL)
        row_copy(b, 0, recv, false);
}

static void band_close(Band *b)
{
    if (b->device) {
        kjit_device_free(b->context, &b->u);
        kjit_device_free(b->context, &b->v);
    } else {
        free(b->u.data);
        free(b->v.data);
    }
    kjit_context_destroy(b->context);
}

/* The band's own rows, on the host (the caller frees them). */
static float *band_field(Band *b)
{
    float *out = malloc((size_t)(b->rows * b->cols) * sizeof(float));
    if (!out)
        die("malloc", "out of memory");
    int64_t shape[2] = {b->rows, b->cols};
    kjit_array h = kjit_array_make(out, KJIT_F32, 2, shape);
    kjit_array own = view(&b->u, 1, b->rows, b->device);
    need(kjit_copy(b->context, &h, &own, NULL), b->context, "copy out");
    return out;
}

/* The steps on one band; returns the last residual (every rank has it). */
static double run(Band *b, const Options *o, int64_t grid_rows, bool exchange, bool print,
                  double *seconds)
{
    float *send = malloc((size_t)b->cols * sizeof(float));
    float *recv = malloc((size_t)b->cols * sizeof(float));
    if (!send || !recv)
        die("malloc", "out of memory");
    double residual = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int s = 1; s <= o->steps; s++) {
        if (exchange)
            band_exchange(b, send, recv);
        band_step(b, grid_rows);
        if (s % o->every == 0 || s == o->steps) {
            double partial = band_residual(b);
            MPI_Allreduce(&partial, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            if (print && rank == 0)
                printf("step %d: residual %.17g\n", s, residual);
        }
    }
    if (b->device)
        need(kjit_synchronize(b->context), b->context, "synchronize");
    double mine = MPI_Wtime() - start;
    MPI_Allreduce(&mine, seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    free(send);
    free(recv);
    return residual;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    Options o = parse(argc, argv);
    int64_t grid_rows = o.weak ? o.rows * ranks : o.rows;
    if (grid_rows < 3 || grid_rows < ranks) {
        if (rank == 0)
            fprintf(stderr, "heat2d: %lld rows are too few for %d ranks\n", (long long)grid_rows,
                    ranks);
        usage();
    }
    MPI_Comm local;
    int local_rank = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank);
    MPI_Comm_free(&local);

    int64_t first = grid_rows * rank / ranks, next = grid_rows * (rank + 1) / ranks;
    Band b = {0};
    band_open(&b, &o, local_rank, grid_rows, first, next - first);
    double seconds = 0;
    double residual = run(&b, &o, grid_rows, o.exchange, true, &seconds);
    if (rank == 0)
        printf("heat2d: %lld x %lld, %d steps, %d ranks, %s: %.4f s (%.3f Gpoint-steps/s), "
               "residual %.17g\n",
               (long long)grid_rows, (long long)o.cols, o.steps, ranks,
               kjit_target_name(o.target), seconds,
               (double)grid_rows * (double)o.cols * o.steps / seconds * 1e-9, residual);

    int failed = 0;
    if (o.check) {
        /* The one-process run: rank 0 steps the whole grid as one band. */
        float *mine = band_field(&b);
        int *counts = NULL, *displs = NULL;
        float *gathered = NULL;
        if (rank == 0) {
            counts = malloc(ranks * sizeof(int));
            displs = malloc(ranks * sizeof(int));
            gathered = malloc((size_t)(grid_rows * o.cols) * sizeof(float));
            if (!counts || !displs || !gathered)
                die("malloc", "out of memory");
            for (int r = 0; r < ranks; r++) {
                int64_t a = grid_rows * r / ranks, z = grid_rows * (r + 1) / ranks;
                if ((z - a) * o.cols > 0x7fffffff || a * o.cols > 0x7fffffff)
                    die("--check", "the grid is too large to gather (MPI counts are int)");
                counts[r] = (int)((z - a) * o.cols);
                displs[r] = (int)(a * o.cols);
            }
        }
        MPI_Gatherv(mine, (int)(b.rows * o.cols), MPI_FLOAT, gathered, counts, displs, MPI_FLOAT,
                    0, MPI_COMM_WORLD);
        free(mine);
        if (rank == 0) {
            /* The same steps with no neighbours: ranks is 1 for this band. */
            int saved_ranks = ranks;
            ranks = 1;
            Band whole = {0};
            band_open(&whole, &o, local_rank, grid_rows, 0, grid_rows);
            double want = 0;
            for (int s = 1; s <= o.steps; s++) {
                band_step(&whole, grid_rows);
                if (s == o.steps)
                    want = band_residual(&whole);
            }
            float *reference = band_field(&whole);
            int64_t differ = 0, first_differ = -1;
            for (int64_t k = 0; k < grid_rows * o.cols; k++)
                if (memcmp(&reference[k], &gathered[k], sizeof(float)) != 0) {
                    if (first_differ < 0)
                        first_differ = k;
                    differ++;
                }
            if (differ) {
                int64_t k = first_differ;
                printf("check: FAILED: %lld of %lld points differ from the one-process run "
                       "(first at row %lld, column %lld: %.9g, want %.9g)\n",
                       (long long)differ, (long long)(grid_rows * o.cols),
                       (long long)(k / o.cols), (long long)(k % o.cols), gathered[k],
                       reference[k]);
                failed = 1;
            } else {
                printf("check: the field matches the one-process run bitwise (%lld points)\n",
                       (long long)(grid_rows * o.cols));
            }
            double error = fabs(residual - want) / (want != 0 ? fabs(want) : 1.0);
            bool close = error <= 1e-12;
            printf("check: %s: the residual %.17g against the one-process run's %.17g "
                   "(relative difference %.3g, allowed 1e-12)\n",
                   close ? "ok" : "FAILED", residual, want, error);
            failed |= !close;
            free(reference);
            free(gathered);
            free(counts);
            free(displs);
            band_close(&whole);
            ranks = saved_ranks;
        }
        MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    band_close(&b);
    MPI_Finalize();
    return failed;
}
