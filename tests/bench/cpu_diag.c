/*
 * cpu_diag.c: the measurements behind tests/gpu/cpu_host_diag.sh, the short
 * run that looks into `make bench-cpu`'s rows behind Numba on another host
 * (issue 25: stencil3d's SIMD code slower than its scalar code on a Sapphire
 * Rapids host, and the small elementwise and parallel rows).  Prints one JSON
 * object {row: ms}; the script runs it under several environments
 * (KJIT_CPU_SIMD=0, KJIT_CPU_FEATURES=...) and prints them side by side.
 *
 *   cpu_diag BENCH_DIR [REPEAT]
 *
 * - "stencil3d N^3 at U/V": tests/bench/stencil3d.kern on the cpu target with
 *   u and v at byte offsets U and V into page-aligned buffers ("malloc": as
 *   bench_cpu.c allocates them), so that a row slow at one placement only
 *   shows itself (cache-line splits of unaligned vector loads, loads that
 *   alias the last store's address modulo 4 KiB);
 * - "call ... us": the cost of one call that does almost nothing (one block
 *   of inc.kern's inc1, vinc over 16 elements) on cpu and parallel, in
 *   microseconds: what a call spends beyond its loop;
 * - "inc1 1e5 parallel, T threads": the 1-D kernel over 1e5 i32 with T
 *   workers, the pool's wake-up against its work;
 * - "inc1 1e5 / inc2 100x1000 32x8 / vinc 1e5 TARGET, a % 64 = A, b % 64 =
 *   B": inc.kern's three forms with the arrays at byte offsets A and B from
 *   a page (a grid row's start against the output's lines, issue 25 item 5).
 * - "par SIZE VARIANT, TARGET": inc.kern's forms with the rows cut for the
 *   pool in several ways, timed in turn (par_rows; only when asked).
 * KJIT_DIAG_ONLY=stencil|call|inc|par (any of them in the text) picks sections.
 *
 * Every result is checked; the median of REPEAT samples (7), the wall clock
 * unless KJIT_BENCH_CLOCK=thread.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_PROGRAM "cpu_diag"
#include "bench_common.h"

static int repeat = 7;
static bool first_row = true;

static void emit(const char *name, double value)
{
    printf("%s\"%s\": %.4f", first_row ? "" : ", ", name, value);
    first_row = false;
    fflush(stdout);
}

/* A context on target; num_threads 0: the target's default. */
static kjit_context *open_context(kjit_target target, int num_threads)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = num_threads;
    kjit_context *context;
    die_on(kjit_context_create(&options, &context), NULL, "context");
    return context;
}

/* A launch (out NULL) or a vectorized call; the median over `repeat`
 * samples of `inner` calls, per call, after a warm-up call. */
static double median_ms(kjit_context *context, kjit_function *f, const uint32_t grid[3],
                        const uint32_t block[3], kjit_arg *args, int nargs, kjit_array *out, int inner)
{
    double times[64];
    int samples = repeat < 64 ? repeat : 64;
    for (int r = -1; r < samples; r++) {
        double t0 = now_ms();
        for (int i = 0; i < (r < 0 ? 1 : inner); i++)
            die_on(out ? kjit_call(f, args, nargs, out, NULL) : kjit_launch(f, grid, block, args, nargs, NULL),
                   context, "run");
        if (r >= 0)
            times[r] = (now_ms() - t0) / inner;
    }
    return median_of(times, samples); /* (an even count: the mean of the middle two) */
}

static void stencil_rows(kjit_context *context, const char *dir)
{
    kjit_function *f = load(context, dir, "stencil3d.kern", "jacobi");
    /* -1: malloc and calloc, as bench_cpu.c. */
    static const int places[][2] = {{-1, -1}, {0, 0}, {16, 16}, {0, 16}, {0, 64}, {0, 2048}, {16, 2064}};
    static const int sizes[2] = {32, 128};
    for (int s = 0; s < 2; s++) {
        int n = sizes[s];
        int64_t total = (int64_t)n * n * n, shape[3] = {n, n, n};
        size_t bytes = sizeof(double) * (size_t)total;
        char *ubuf = aligned_alloc(4096, bytes + 8192), *vbuf = aligned_alloc(4096, bytes + 8192);
        for (size_t p = 0; p < sizeof places / sizeof *places; p++) {
            double *u, *v;
            char name[96];
            if (places[p][0] < 0) {
                u = malloc(bytes), v = calloc((size_t)total, sizeof(double));
                snprintf(name, sizeof name, "stencil3d %d^3, u %% 4096 = %d, v %% 4096 = %d (malloc)", n,
                         (int)((uintptr_t)u % 4096), (int)((uintptr_t)v % 4096));
            } else {
                u = (double *)(ubuf + places[p][0]), v = (double *)(vbuf + places[p][1]);
                memset(v, 0, bytes);
                snprintf(name, sizeof name, "stencil3d %d^3, u %% 4096 = %d, v %% 4096 = %d", n,
                         places[p][0], places[p][1]);
            }
            for (int64_t i = 0; i < total; i++)
                u[i] = (double)((i * 2654435761u) % 1000003) / 1000003.0;
            kjit_array U = kjit_array_make(u, KJIT_F64, 3, shape), V = kjit_array_make(v, KJIT_F64, 3, shape);
            kjit_arg args[2] = {kjit_arg_array(&U), kjit_arg_array(&V)};
            uint32_t grid[3] = {(uint32_t)n / 32, (uint32_t)n / 4, (uint32_t)n / 2}, block[3] = {32, 4, 2};
            double ms = median_ms(context, f, grid, block, args, 2, NULL, n == 32 ? 20 : 1);
            for (int z = 1; z < n - 1; z++)
                for (int y = 1; y < n - 1; y++)
                    for (int x = 1; x < n - 1; x++) {
#define U(z, y, x) u[((int64_t)(z) * n + (y)) * n + (x)]
                        double want = (U(z, y, x - 1) + U(z, y, x + 1) + U(z, y - 1, x) + U(z, y + 1, x) +
                                       U(z - 1, y, x) + U(z + 1, y, x)) * (1.0 / 6.0);
#undef U
                        if (v[((int64_t)z * n + y) * n + x] != want) {
                            fprintf(stderr, "cpu_diag: %s: v[%d, %d, %d] wrong\n", name, z, y, x);
                            exit(1);
                        }
                    }
            emit(name, ms);
            if (places[p][0] < 0)
                free(u), free(v);
        }
        free(ubuf);
        free(vbuf);
    }
}

/* One call of almost no work, per target (us), and inc1 over 1e5 with 1 to
 * 16 workers on parallel. */
static void call_rows(const char *dir)
{
    const int64_t n = 100000;
    int32_t *a = malloc(sizeof(int32_t) * (size_t)n), *b = malloc(sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        a[i] = (int32_t)(i * 2654435761u);
    const kjit_target targets[2] = {KJIT_TARGET_CPU, KJIT_TARGET_PARALLEL};
    for (int t = 0; t < 2; t++) {
        kjit_context *context = open_context(targets[t], 0);
        kjit_function *inc1 = load(context, dir, "inc.kern", "inc1"), *vinc = load(context, dir, "inc.kern", "vinc");
        char name[96];
        for (int k = 0; k < 2; k++) {
            int64_t m = k == 0 ? 256 : 16;
            kjit_array A = kjit_array_make(a, KJIT_I32, 1, &m), B = kjit_array_make(b, KJIT_I32, 1, &m);
            kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
            uint32_t grid[3] = {1, 1, 1}, block[3] = {256, 1, 1};
            memset(b, 0, sizeof(int32_t) * (size_t)m);
            double ms = k == 0 ? median_ms(context, inc1, grid, block, args, 2, NULL, 2000)
                               : median_ms(context, vinc, NULL, NULL, args, 1, &B, 2000);
            snprintf(name, sizeof name, "call %s, %s, us", k == 0 ? "inc1 256 (one block)" : "vinc 16",
                     kjit_target_name(targets[t]));
            check_inc(name, a, b, m);
            emit(name, ms * 1e3);
        }
        kjit_context_destroy(context);
    }
    static const int threads[] = {1, 2, 4, 8, 16};
    for (size_t k = 0; k < sizeof threads / sizeof *threads; k++) {
        kjit_context *context = open_context(KJIT_TARGET_PARALLEL, threads[k]);
        kjit_function *inc1 = load(context, dir, "inc.kern", "inc1");
        kjit_array A = kjit_array_make(a, KJIT_I32, 1, &n), B = kjit_array_make(b, KJIT_I32, 1, &n);
        kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
        uint32_t grid[3] = {(uint32_t)((n + 255) / 256), 1, 1}, block[3] = {256, 1, 1};
        memset(b, 0, sizeof(int32_t) * (size_t)n);
        double ms = median_ms(context, inc1, grid, block, args, 2, NULL, 200);
        char name[96];
        snprintf(name, sizeof name, "inc1 1e5 parallel, %d threads", threads[k]);
        check_inc(name, a, b, n);
        emit(name, ms);
        kjit_context_destroy(context);
    }
    free(a);
    free(b);
}

/* inc.kern's three forms of b = a + 1 over 1e5 i32 (inc1 in blocks of 256,
 * inc2 as 100 x 1000 in blocks of 32 x 8, vinc), a and b at byte offsets
 * from a page (-1: malloc), on cpu and parallel: where the rows of a kernel
 * start against the output's lines (issue 25 item 5). */
static void inc_rows(const char *dir)
{
    static const int places[][2] = {{-1, -1}, {0, 0}, {16, 16}, {16, 0}, {0, 16}};
    const int64_t n = 100000, shape[2] = {100, 1000};
    char *abuf = aligned_alloc(4096, 4096 + sizeof(int32_t) * (size_t)n);
    char *bbuf = aligned_alloc(4096, 4096 + sizeof(int32_t) * (size_t)n);
    const kjit_target targets[2] = {KJIT_TARGET_CPU, KJIT_TARGET_PARALLEL};
    for (int t = 0; t < 2; t++) {
        kjit_context *context = open_context(targets[t], 0);
        kjit_function *f[3] = {load(context, dir, "inc.kern", "inc1"), load(context, dir, "inc.kern", "inc2"),
                               load(context, dir, "inc.kern", "vinc")};
        for (size_t p = 0; p < sizeof places / sizeof *places; p++) {
            int32_t *a, *b;
            if (places[p][0] < 0)
                a = malloc(sizeof(int32_t) * (size_t)n), b = malloc(sizeof(int32_t) * (size_t)n);
            else
                a = (int32_t *)(abuf + places[p][0]), b = (int32_t *)(bbuf + places[p][1]);
            for (int64_t i = 0; i < n; i++)
                a[i] = (int32_t)(i * 2654435761u);
            for (int k = 0; k < 3; k++) {
                kjit_array A = k == 1 ? kjit_array_make(a, KJIT_I32, 2, shape) : kjit_array_make(a, KJIT_I32, 1, &n);
                kjit_array B = k == 1 ? kjit_array_make(b, KJIT_I32, 2, shape) : kjit_array_make(b, KJIT_I32, 1, &n);
                kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
                uint32_t grid1[3] = {(uint32_t)((n + 255) / 256), 1, 1}, block1[3] = {256, 1, 1};
                uint32_t grid2[3] = {(1000 + 31) / 32, (100 + 7) / 8, 1}, block2[3] = {32, 8, 1};
                memset(b, 0, sizeof(int32_t) * (size_t)n);
                double ms = k == 0   ? median_ms(context, f[0], grid1, block1, args, 2, NULL, 200)
                            : k == 1 ? median_ms(context, f[1], grid2, block2, args, 2, NULL, 200)
                                     : median_ms(context, f[2], NULL, NULL, args, 1, &B, 200);
                char name[128];
                static const char *const forms[3] = {"inc1 1e5", "inc2 100x1000 32x8", "vinc 1e5"};
                if (places[p][0] < 0)
                    /* named alike on every run: malloc's offsets vary */
                    snprintf(name, sizeof name, "%s %s, a and b from malloc", forms[k], kjit_target_name(targets[t]));
                else
                    snprintf(name, sizeof name, "%s %s, a %% 64 = %d, b %% 64 = %d", forms[k],
                             kjit_target_name(targets[t]), places[p][0], places[p][1]);
                check_inc(name, a, b, n);
                emit(name, ms);
            }
            if (places[p][0] < 0)
                free(a), free(b);
        }
        kjit_context_destroy(context);
    }
    free(abuf);
    free(bbuf);
}

/*
 * "par": inc.kern's forms on cpu and parallel, the ways of running the rows
 * timed in turn in one process (same arrays, same pool): each sample runs
 * every variant's batch once, in order, so that a busy moment of the host
 * falls on all of them alike.  A variant is a copy of inc.kern, its
 * functions renamed, compiled and first run under its KJIT_CPU_ROWS_CUT
 * (KjRowsCut: 0 threads as kernels' blocks, 1 elements as @vectorize's, 2
 * whole rows; read when the code is loaded).  KJIT_DIAG_THREADS: the parallel contexts' thread
 * counts, "16,8" (0: the pool's default); sizes 1e5 (100 x 1000) and 1.6e6
 * (1000 x 1600).
 */
typedef struct ParVariant {
    const char *name;
    int form;        /* 0 inc1, 1 inc2, 2 vinc */
    const char *cut; /* KJIT_CPU_ROWS_CUT */
} ParVariant;

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cpu_diag: cannot read %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    size_t got = fread(text, 1, (size_t)n, f);
    text[got] = 0;
    fclose(f);
    return text;
}

/* text with "fn NAME(" of inc1, inc2 and vinc renamed "fn NAME_vV(". */
static char *renamed_source(const char *text, int v)
{
    char *out = malloc(strlen(text) * 2 + 64), *o = out;
    for (const char *p = text; *p;) {
        size_t name = strncmp(p, "fn inc1(", 8) == 0 || strncmp(p, "fn inc2(", 8) == 0 ? 7
                      : strncmp(p, "fn vinc(", 8) == 0                                ? 7
                                                                                      : 0;
        if (name) {
            memcpy(o, p, name);
            o += name;
            o += sprintf(o, "_v%d", v);
            p += name;
        } else {
            *o++ = *p++;
        }
    }
    *o = 0;
    return out;
}

static kjit_status par_run(const ParVariant *var, kjit_function *f, kjit_arg *args1, kjit_arg *args2,
                           kjit_array *out, const uint32_t grid[2][3], const uint32_t block[2][3])
{
    return var->form == 2 ? kjit_call(f, args1, 1, out, NULL)
                          : kjit_launch(f, grid[var->form], block[var->form], var->form == 0 ? args1 : args2, 2,
                                        NULL);
}

static void par_rows(const char *dir)
{
    static const ParVariant variants[] = {
        {"vinc", 2, "0"},       {"inc1 cut 0", 0, "0"}, {"inc1 cut 1", 0, "1"},
        {"inc2 cut 0", 1, "0"}, {"inc2 cut 1", 1, "1"}, {"inc2 cut 2", 1, "2"},
    };
    enum { VARIANTS = sizeof variants / sizeof *variants };
    const char *list = getenv("KJIT_DIAG_THREADS");
    if (!list || !*list)
        list = "16,8";
    char path[4096];
    snprintf(path, sizeof path, "%s/inc.kern", dir);
    char *text = read_text(path);
    static const int64_t rows_of[2] = {100, 1000}, cols_of[2] = {1000, 1600};
    static const char *sizes[2] = {"1e5", "1.6e6"};
    /* the cpu target first (threads -1), then parallel at each count */
    int counts[16] = {-1}, count_n = 1;
    for (const char *p = list; p && count_n < 16; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        counts[count_n++] = atoi(p);
    for (int c = 0; c < count_n; c++) {
        int threads = counts[c];
        kjit_options options;
        kjit_options_init(&options);
        options.target = threads < 0 ? KJIT_TARGET_CPU : KJIT_TARGET_PARALLEL;
        options.num_threads = threads > 0 ? threads : 0;
        kjit_context *context;
        die_on(kjit_context_create(&options, &context), NULL, "context");
        kjit_function *f[VARIANTS];
        for (int v = 0; v < VARIANTS; v++) {
            char *source = renamed_source(text, v), name[32];
            kjit_module *module;
            /* the setting while the code is made and loaded, eagerly or not */
            setenv("KJIT_CPU_ROWS_CUT", variants[v].cut, 1);
            die_on(kjit_compile_string(context, "inc.kern", source, &module), context, variants[v].name);
            unsetenv("KJIT_CPU_ROWS_CUT");
            static const char *const forms[3] = {"inc1", "inc2", "vinc"};
            snprintf(name, sizeof name, "%s_v%d", forms[variants[v].form], v);
            die_on(kjit_module_function(module, name, &f[v]), context, name);
            free(source);
        }
        for (int size = 0; size < 2; size++) {
            int64_t rows = rows_of[size], cols = cols_of[size], n = rows * cols, shape[2] = {rows, cols};
            int32_t *a = malloc(sizeof(int32_t) * (size_t)n), *b = malloc(sizeof(int32_t) * (size_t)n);
            for (int64_t i = 0; i < n; i++)
                a[i] = (int32_t)(i * 2654435761u);
            kjit_array A1 = kjit_array_make(a, KJIT_I32, 1, &n), B1 = kjit_array_make(b, KJIT_I32, 1, &n);
            kjit_array A2 = kjit_array_make(a, KJIT_I32, 2, shape), B2 = kjit_array_make(b, KJIT_I32, 2, shape);
            kjit_arg args1[2] = {kjit_arg_array(&A1), kjit_arg_array(&B1)};
            kjit_arg args2[2] = {kjit_arg_array(&A2), kjit_arg_array(&B2)};
            const uint32_t grid[2][3] = {{(uint32_t)((n + 255) / 256), 1, 1},
                                         {(uint32_t)((cols + 31) / 32), (uint32_t)((rows + 7) / 8), 1}};
            const uint32_t block[2][3] = {{256, 1, 1}, {32, 8, 1}};
            for (int v = 0; v < VARIANTS; v++) {
                setenv("KJIT_CPU_ROWS_CUT", variants[v].cut, 1);
                die_on(par_run(&variants[v], f[v], args1, args2, &B1, grid, block), context, variants[v].name);
                unsetenv("KJIT_CPU_ROWS_CUT");
            }
            int inner = size == 0 ? 200 : 20, samples = repeat < 64 ? repeat : 64;
            double times[VARIANTS][64];
            for (int r = 0; r < samples; r++)
                for (int v = 0; v < VARIANTS; v++) {
                    double t0 = now_ms();
                    for (int i = 0; i < inner; i++)
                        die_on(par_run(&variants[v], f[v], args1, args2, &B1, grid, block), context,
                               variants[v].name);
                    times[v][r] = (now_ms() - t0) / inner;
                }
            for (int v = 0; v < VARIANTS; v++) {
                memset(b, 0, sizeof(int32_t) * (size_t)n);
                die_on(par_run(&variants[v], f[v], args1, args2, &B1, grid, block), context, variants[v].name);
                char name[128];
                if (threads < 0)
                    snprintf(name, sizeof name, "par %s %s, cpu", sizes[size], variants[v].name);
                else
                    snprintf(name, sizeof name, "par %s %s, parallel %d", sizes[size], variants[v].name, threads);
                check_inc(name, a, b, n);
                emit(name, median_of(times[v], samples));
            }
            free(a);
            free(b);
        }
        kjit_context_destroy(context);
    }
    free(text);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: cpu_diag BENCH_DIR [REPEAT]\n");
        return 2;
    }
    if (argc > 2)
        repeat = atoi(argv[2]) > 0 ? atoi(argv[2]) : 7;
    const char *only = getenv("KJIT_DIAG_ONLY");
    printf("{");
    if (!only || !*only || strstr(only, "stencil")) {
        kjit_context *context = open_context(KJIT_TARGET_CPU, 0);
        stencil_rows(context, argv[1]);
        kjit_context_destroy(context);
    }
    if (!only || !*only || strstr(only, "call"))
        call_rows(argv[1]);
    if (!only || !*only || strstr(only, "inc"))
        inc_rows(argv[1]);
    if (only && strstr(only, "par"))
        par_rows(argv[1]);
    printf("}\n");
    return 0;
}
