/*
 * cli_bench.c: `kjit bench`, the same call compared on several targets.
 *
 * The inputs are made once on the host (the generators and seed of `kjit
 * run`).  Each target then compiles the function twice - in a fresh context
 * with an empty cache (cold), and in another fresh context once the cache holds
 * the code (cached) - runs it once to warm up and --repeat times timed, and
 * hands back its outputs, which are compared with those of the first target
 * that ran (or with
 * a --reference file).  Every run starts from the pristine inputs, so a
 * kernel that updates its arrays in place does the same work each time and
 * its outputs are those of exactly one run.
 *
 * On cuda the arrays live in device memory: the copies in, the run and the
 * copies out are timed apart with CUDA events (kjit_event_*); elsewhere the
 * events read the host clock and nothing is copied.  Bench compiles against a
 * private cache folder that it removes at the end, so that "cold" is cold and
 * the user's cache is left as it was.
 *
 * Output: one table per size, then (with --sizes) the sweep and the size from
 * which each target beats the baseline; --json and --csv print the same data
 * for scripts (to stdout, or with =FILE to a file beside the table).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../runtime/kjit_runtime.h"
#include "cli.h"

static const char bench_usage[] =
    "usage: kjit bench FILE.kern FUNCTION [ARG...] [options]\n"
    "\n"
    "Runs the same call on each target and compares compile time, transfers,\n"
    "run time, throughput and whether the outputs agree.\n"
    "\n"
    "ARG: as for kjit run: a .npy file, a number, true/false, or a generator\n"
    "     zeros|ones|rand|randn|arange:[DTYPE:]SHAPE\n"
    "\n"
    "options:\n"
    "  --targets cpu,parallel,cuda   targets to compare; the first that runs is the\n"
    "                                baseline (default: all three; one that is not\n"
    "                                available here is listed with the reason)\n"
    "  --repeat N                    timed runs per target (default 10)\n"
    "  --warmup N                    untimed runs before them (default 1)\n"
    "  --sizes 1e3,1e5,1e7           run once per size, with every generator resized\n"
    "                                to that many elements; prints the crossover\n"
    "  --grid X[,Y[,Z]] --block X[,Y[,Z]]  launch shape of a @kernel\n"
    "  --seed S                      seed of the rand/randn generators (default 1)\n"
    "  --threads N                   threads of the parallel target\n"
    "  --reference [N=]FILE.npy      compare every target with this array (the\n"
    "                                result, or argument N of a @kernel)\n"
    "  --ulps N                      agreement tolerance for floats (default 16)\n"
    "  --json[=FILE]                 the data as JSON (to stdout instead of the table)\n"
    "  --csv[=FILE]                  the data as CSV, one row per target and size\n";

#define MAX_TARGETS 3
#define MAX_SIZES 32
#define DEFAULT_ULPS 16

/* ================================================================ options */

typedef struct BenchOptions {
    const char *file;
    const char *function;
    const char *args[KJ_CLI_MAX_ARGS];
    int arg_count;
    kjit_target targets[MAX_TARGETS];
    int target_count;
    int repeat, warmup;
    int64_t sizes[MAX_SIZES];
    int size_count;
    bool has_grid, has_block;
    uint32_t grid[3], block[3];
    uint64_t seed;
    int threads;
    const char *reference;
    int reference_arg; /* -1: the result, or the only array argument of a kernel */
    int ulps;
    bool json, csv;
    const char *json_path, *csv_path; /* NULL: stdout, in place of the table */
} BenchOptions;

static int usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kjit bench: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%s", bench_usage);
    return 2;
}

static bool parse_targets(const char *text, BenchOptions *o)
{
    o->target_count = 0;
    while (*text) {
        size_t n = strcspn(text, ",");
        kjit_target t;
        if (n == 3 && strncmp(text, "cpu", 3) == 0) t = KJIT_TARGET_CPU;
        else if (n == 8 && strncmp(text, "parallel", 8) == 0) t = KJIT_TARGET_PARALLEL;
        else if (n == 4 && strncmp(text, "cuda", 4) == 0) t = KJIT_TARGET_CUDA;
        else return false;
        for (int i = 0; i < o->target_count; i++)
            if (o->targets[i] == t)
                return false;
        o->targets[o->target_count++] = t;
        text += n;
        if (*text == ',')
            text++;
    }
    return o->target_count > 0;
}

static int compare_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* "1e3,1e5,1e7": sorted, without repeats. */
static bool parse_sizes(const char *text, BenchOptions *o)
{
    o->size_count = 0;
    while (*text) {
        char *end;
        double v = strtod(text, &end);
        if (end == text || v < 1 || v > 1e12 || v != floor(v) || o->size_count == MAX_SIZES)
            return false;
        o->sizes[o->size_count++] = (int64_t)v;
        if (*end == '\0')
            break;
        if (*end != ',')
            return false;
        text = end + 1;
    }
    qsort(o->sizes, (size_t)o->size_count, sizeof o->sizes[0], compare_int64);
    int kept = 0;
    for (int i = 0; i < o->size_count; i++)
        if (kept == 0 || o->sizes[kept - 1] != o->sizes[i])
            o->sizes[kept++] = o->sizes[i];
    o->size_count = kept;
    return kept > 0;
}

static bool parse_count(const char *value, int low, int *out)
{
    if (!value || !kj_cli_is_number(value))
        return false;
    double v = strtod(value, NULL);
    if (v < low || v > 1e6 || v != floor(v))
        return false;
    *out = (int)v;
    return true;
}

/* -1 when the options were fine, else the exit code. */
static int parse_options(int argc, char **argv, BenchOptions *o)
{
    memset(o, 0, sizeof *o);
    o->targets[0] = KJIT_TARGET_CPU;
    o->targets[1] = KJIT_TARGET_PARALLEL;
    o->targets[2] = KJIT_TARGET_CUDA;
    o->target_count = 3;
    o->repeat = 10;
    o->warmup = 1;
    o->seed = 1;
    o->ulps = DEFAULT_ULPS;
    o->reference_arg = -1;
    int positional = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *value = NULL;
#define OPTION(name)                                                                   \
    ((strcmp(a, name) == 0 && (value = i + 1 < argc ? argv[++i] : NULL, true)) ||     \
     (strncmp(a, name "=", strlen(name) + 1) == 0 && (value = a + strlen(name) + 1, true)))
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(bench_usage, stdout);
            return 0;
        }
        if (a[0] == '-' && a[1] != '\0' && !kj_cli_is_number(a)) {
            if (strcmp(a, "--json") == 0 || strncmp(a, "--json=", 7) == 0) {
                o->json = true;
                o->json_path = a[6] == '=' ? a + 7 : NULL;
            } else if (strcmp(a, "--csv") == 0 || strncmp(a, "--csv=", 6) == 0) {
                o->csv = true;
                o->csv_path = a[5] == '=' ? a + 6 : NULL;
            } else if (OPTION("--targets")) {
                if (!value || !parse_targets(value, o))
                    return usage("--targets takes a list of cpu, parallel and cuda, each once "
                                 "(not '%s')", value ? value : "");
            } else if (OPTION("--repeat")) {
                if (!parse_count(value, 1, &o->repeat))
                    return usage("--repeat takes a count >= 1");
            } else if (OPTION("--warmup")) {
                if (!parse_count(value, 0, &o->warmup))
                    return usage("--warmup takes a count >= 0");
            } else if (OPTION("--sizes")) {
                if (!value || !parse_sizes(value, o))
                    return usage("--sizes takes up to %d sizes >= 1 such as 1e3,1e5,1e7 (not '%s')",
                                 MAX_SIZES, value ? value : "");
            } else if (OPTION("--grid")) {
                if (!value || !kj_cli_parse_dim3(value, o->grid))
                    return usage("--grid takes X[,Y[,Z]] with extents >= 1, not '%s'",
                                 value ? value : "");
                o->has_grid = true;
            } else if (OPTION("--block")) {
                if (!value || !kj_cli_parse_dim3(value, o->block))
                    return usage("--block takes X[,Y[,Z]] with extents >= 1, not '%s'",
                                 value ? value : "");
                o->has_block = true;
            } else if (OPTION("--seed")) {
                if (!value || !kj_cli_is_number(value))
                    return usage("--seed takes a number");
                o->seed = strtoull(value, NULL, 10);
            } else if (OPTION("--threads")) {
                if (!parse_count(value, 1, &o->threads))
                    return usage("--threads takes a count >= 1");
            } else if (OPTION("--ulps")) {
                if (!parse_count(value, 0, &o->ulps))
                    return usage("--ulps takes a count >= 0");
            } else if (OPTION("--reference")) {
                if (!value || !*value)
                    return usage("--reference takes [N=]FILE.npy");
                char *end;
                long n = strtol(value, &end, 10);
                if (end != value && *end == '=' && n >= 0) {
                    o->reference_arg = (int)n;
                    value = end + 1;
                }
                if (!kj_cli_ends_with(value, ".npy"))
                    return usage("--reference takes [N=]FILE.npy, not '%s'", value);
                o->reference = value;
            } else {
                return usage("unknown option '%s'", a);
            }
#undef OPTION
            continue;
        }
        if (positional == 0) o->file = a;
        else if (positional == 1) o->function = a;
        else if (o->arg_count == KJ_CLI_MAX_ARGS) return usage("too many arguments");
        else o->args[o->arg_count++] = a;
        positional++;
    }
    if (!o->file || !o->function)
        return usage("needs a FILE and a FUNCTION");
    if (o->has_grid != o->has_block)
        return usage("--grid and --block go together");
    if (o->json && o->csv && !o->json_path && !o->csv_path)
        return usage("--json and --csv cannot both go to stdout (give one a =FILE)");
    return -1;
}

/* =============================================================== progress */

/* A status line on stderr while targets compile and run, for terminals only;
 * it appears after half a second and is wiped when the bench is done. */
static struct {
    bool enabled, shown;
    double start, last;
} progress;

static void progress_update(const char *fmt, ...)
{
    if (!progress.enabled)
        return;
    double now = kj_cli_now_ms();
    if (now - progress.start < 500 || now - progress.last < 100)
        return;
    progress.last = now;
    progress.shown = true;
    va_list ap;
    va_start(ap, fmt);
    fputs("\r\033[Kkjit bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
}

static void progress_clear(void)
{
    if (progress.shown)
        fputs("\r\033[K", stderr);
    progress.shown = false;
}

/* ================================================================ results */

typedef struct Stats {
    double median, min, max;
} Stats;

/* An output as the host sees it: C-ordered bytes. */
typedef struct Output {
    int arg; /* the argument it is, or -1 for the result */
    kjit_dtype dtype;
    int ndim;
    int64_t shape[KJIT_MAX_DIMS];
    void *data;
} Output;

typedef enum { VERDICT_NONE, VERDICT_BASELINE, VERDICT_IDENTICAL, VERDICT_OK, VERDICT_MISMATCH } Verdict;

static const char *const verdict_names[] = {"none", "baseline", "identical", "ok", "mismatch"};

typedef struct Agreement {
    Verdict verdict;
    bool floats; /* max_ulp means something */
    double max_abs, max_rel, max_ulp;
    int64_t differing, total;
    char detail[200]; /* why a mismatch is one, when it is not a count */
} Agreement;

typedef enum { TARGET_OK, TARGET_UNAVAILABLE, TARGET_FAILED } TargetState;

typedef struct TargetRun {
    kjit_target target;
    TargetState state;
    char *reason; /* unavailable or failed: why */
    char device[320];
    int threads;
    double compile_ms[2]; /* cold, cached: front end and code generation */
    const char *cached_from;
    bool transfers;
    Stats in, run, out;
    double total; /* median in + run + out */
    Output outputs[KJ_CLI_MAX_ARGS + 1];
    int output_count;
    Agreement agreement;
} TargetRun;

typedef struct SizeRun {
    int64_t size; /* 0 without --sizes */
    char *args[KJ_CLI_MAX_ARGS]; /* the argument texts, resized */
    int64_t elements;
    double bytes;
    TargetRun targets[MAX_TARGETS];
} SizeRun;

/* The target the others are measured against: the first that ran. */
static const TargetRun *baseline_of(const SizeRun *s, int target_count)
{
    for (int k = 0; k < target_count; k++)
        if (s->targets[k].state == TARGET_OK)
            return &s->targets[k];
    return NULL;
}

/* What every target shares. */
typedef struct Bench {
    const BenchOptions *o;
    kjit_function_kind kind;
    const char *signature;
    char cache_root[256]; /* private cache folders live under it */
    int cache_dirs;
    char cpu_name[256];
    Output reference;
    bool have_reference;
} Bench;

static void outputs_free(TargetRun *t)
{
    for (int i = 0; i < t->output_count; i++)
        free(t->outputs[i].data);
    t->output_count = 0;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static Stats stats_of(double *values, int count)
{
    qsort(values, (size_t)count, sizeof values[0], compare_double);
    double median = count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2;
    return (Stats){median, values[0], values[count - 1]};
}

static int64_t output_size(const Output *out)
{
    int64_t size = 1;
    for (int d = 0; d < out->ndim; d++)
        size *= out->shape[d];
    return size;
}

/* ============================================================== devices */

/* "AMD EPYC 9R45 (znver5)": /proc/cpuinfo's name and the CPU LLVM tunes for. */
static void describe_cpu(char *buf, size_t size)
{
    char model[200] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "model name", 10) == 0) {
                const char *colon = strchr(line, ':');
                if (colon) {
                    colon++;
                    while (*colon == ' ' || *colon == '\t')
                        colon++;
                    snprintf(model, sizeof model, "%.*s", (int)strcspn(colon, "\n"), colon);
                }
                break;
            }
        fclose(f);
    }
    const char *llvm = kj_host_cpu_description();
    int llvm_len = (int)strcspn(llvm, " ");
    if (model[0])
        snprintf(buf, size, "%s (%.*s)", model, llvm_len, llvm);
    else
        snprintf(buf, size, "%.*s", llvm_len, llvm);
}

static int parallel_threads(const BenchOptions *o)
{
    if (o->threads > 0)
        return o->threads;
    const char *env = getenv("KJIT_NUM_THREADS");
    if (env && atoi(env) > 0)
        return atoi(env);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 ? (int)cores : 1;
}

/* ============================================================ compiling */

typedef struct Compiled {
    kjit_context *context;
    kjit_module *module;
    kjit_function *function;
    KjBuf diagnostics;
} Compiled;

static void collect_diagnostic(void *user, const char *text)
{
    kj_buf_printf(user, "%s", text);
}

static void compiled_free(Compiled *c)
{
    kjit_module_free(c->module);
    kjit_context_destroy(c->context);
    kj_buf_free(&c->diagnostics);
    memset(c, 0, sizeof *c);
}

/* A fresh context for the target that has compiled the function for these
 * arguments; false and *error (heap) when any step fails. */
static bool compile_on(const Bench *b, kjit_target target, const KjCliArgs *inputs, Compiled *c,
                       double *ms, char **error)
{
    memset(c, 0, sizeof *c);
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = b->o->threads;
    options.on_diagnostic = collect_diagnostic;
    options.diagnostic_user = &c->diagnostics;
    double t0 = kj_cli_now_ms();
    if (kjit_context_create(&options, &c->context) != KJIT_OK) {
        *error = kj_xstrdup(kjit_last_error(NULL));
        return false;
    }
    kjit_status status = kjit_compile_file(c->context, b->o->file, &c->module);
    if (status == KJIT_OK)
        status = kjit_module_function(c->module, b->o->function, &c->function);
    if (status == KJIT_OK)
        status = kjit_prepare(c->function, inputs->args, inputs->count, NULL);
    *ms = kj_cli_now_ms() - t0;
    if (status != KJIT_OK) {
        *error = kj_xstrdup(c->diagnostics.data && c->diagnostics.data[0] ? c->diagnostics.data
                                                                            : kjit_last_error(c->context));
        return false;
    }
    return true;
}

/* A new, empty folder for the cache to use from now on. */
static void fresh_cache_dir(Bench *b)
{
    if (!b->cache_root[0])
        return;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/%d", b->cache_root, b->cache_dirs++);
    mkdir(dir, 0700);
    setenv("KJIT_CACHE_DIR", dir, 1);
    kj_cache_memory_clear();
}

static void remove_cache_dirs(Bench *b)
{
    if (!b->cache_root[0])
        return;
    for (int i = 0; i < b->cache_dirs; i++) {
        char dir[300];
        snprintf(dir, sizeof dir, "%s/%d", b->cache_root, i);
        kj_cache_clear(dir);
        rmdir(dir);
    }
    rmdir(b->cache_root);
}

/* What served the second compile, from the cache's counters around it. */
static const char *cached_from(KjCacheCounters before, KjCacheCounters after)
{
    if (after.compiles > before.compiles)
        return "compiled again";
    if (after.disk_hits > before.disk_hits)
        return "disk";
    if (after.memory_hits > before.memory_hits || after.shared_hits > before.shared_hits)
        return "memory";
    return "compiled again";
}

/* ============================================================== running */

/* Where one target's runs keep their arrays. */
typedef struct Working {
    kjit_context *context;
    kjit_function *function;
    kjit_arg args[KJ_CLI_MAX_ARGS];
    kjit_array arrays[KJ_CLI_MAX_ARGS]; /* device arrays, or host copies for in-place updates */
    bool device[KJ_CLI_MAX_ARGS], copied[KJ_CLI_MAX_ARGS];
    void *host_out[KJ_CLI_MAX_ARGS]; /* cuda @kernel: where arrays come back to */
    kjit_array result;               /* host: a vectorized or plain function's result */
    kjit_array result_device;        /* cuda: where a vectorized result is written */
} Working;

static size_t array_bytes(const kjit_array *a)
{
    return (size_t)kjit_array_size(a) * kjit_dtype_size(a->dtype);
}

static kjit_status fail(Working *w, char **error)
{
    *error = kj_xstrdup(kjit_last_error(w->context));
    return KJIT_ERROR_INVALID_ARGUMENT;
}

/* The arrays a run needs: on cuda, device arrays for every array argument
 * (plain functions run as a host call there and keep host arrays); elsewhere
 * host copies of the arrays a kernel or plain function may write. */
static bool working_setup(const Bench *b, const KjCliArgs *inputs, Working *w, char **error)
{
    bool on_gpu = kjit_context_target(w->context) == KJIT_TARGET_CUDA;
    for (int i = 0; i < inputs->count; i++) {
        w->args[i] = inputs->args[i];
        if (inputs->args[i].kind != KJIT_ARG_ARRAY)
            continue;
        const kjit_array *in = &inputs->arrays[i];
        if (on_gpu && b->kind != KJIT_FUNCTION_PLAIN) {
            if (kjit_device_alloc(w->context, in->dtype, in->ndim, in->shape, &w->arrays[i]) != KJIT_OK) {
                fail(w, error);
                return false;
            }
            w->device[i] = true;
            if (b->kind == KJIT_FUNCTION_KERNEL && !(w->host_out[i] = malloc(array_bytes(in) + 1))) {
                *error = kj_xstrdup("out of memory for the outputs");
                return false;
            }
        } else if (b->kind != KJIT_FUNCTION_VECTORIZE) {
            w->arrays[i] = *in;
            if (!(w->arrays[i].data = malloc(array_bytes(in) + 1))) {
                *error = kj_xstrdup("out of memory for a copy of the inputs");
                return false;
            }
            w->copied[i] = true;
        } else {
            continue;
        }
        w->args[i] = kjit_arg_array(&w->arrays[i]);
    }
    if (b->kind == KJIT_FUNCTION_VECTORIZE) {
        /* The first call, from host arrays, gives the result's shape. */
        if (kjit_call(w->function, inputs->args, inputs->count, NULL, &w->result) != KJIT_OK) {
            fail(w, error);
            return false;
        }
        if (on_gpu && kjit_device_alloc(w->context, w->result.dtype, w->result.ndim,
                                        w->result.shape, &w->result_device) != KJIT_OK) {
            fail(w, error);
            return false;
        }
    }
    return true;
}

static void working_free(Working *w)
{
    for (int i = 0; i < KJ_CLI_MAX_ARGS; i++) {
        if (w->device[i])
            kjit_device_free(w->context, &w->arrays[i]);
        if (w->copied[i])
            free(w->arrays[i].data);
        free(w->host_out[i]);
    }
    kjit_array_free(&w->result);
    if (w->result_device.data)
        kjit_device_free(w->context, &w->result_device);
}

/* One run from the pristine inputs: copies in, the call, copies out, each
 * timed between events. */
static kjit_status run_once(const Bench *b, const KjCliArgs *inputs, Working *w, double ms[3],
                            char **error)
{
    int n = inputs->count;
    for (int i = 0; i < n; i++)
        if (w->copied[i])
            memcpy(w->arrays[i].data, inputs->arrays[i].data, array_bytes(&inputs->arrays[i]));
    kjit_event *events[4] = {NULL};
    kjit_status status = kjit_event_record(w->context, NULL, &events[0]);
    for (int i = 0; i < n && status == KJIT_OK; i++)
        if (w->device[i])
            status = kjit_copy(w->context, &w->arrays[i], &inputs->arrays[i], NULL);
    if (status == KJIT_OK)
        status = kjit_event_record(w->context, NULL, &events[1]);
    if (status == KJIT_OK) {
        switch (b->kind) {
        case KJIT_FUNCTION_KERNEL:
            status = kjit_launch(w->function, b->o->grid, b->o->block, w->args, n, NULL);
            break;
        case KJIT_FUNCTION_VECTORIZE:
            status = kjit_call(w->function, w->args, n,
                               w->result_device.data ? &w->result_device : &w->result, NULL);
            break;
        case KJIT_FUNCTION_PLAIN:
            kjit_array_free(&w->result);
            status = kjit_call(w->function, w->args, n, NULL, &w->result);
            break;
        }
    }
    if (status == KJIT_OK)
        status = kjit_event_record(w->context, NULL, &events[2]);
    if (status == KJIT_OK && w->result_device.data)
        status = kjit_copy(w->context, &w->result, &w->result_device, NULL);
    for (int i = 0; i < n && status == KJIT_OK; i++)
        if (w->host_out[i]) {
            kjit_array host = inputs->arrays[i];
            host.data = w->host_out[i];
            status = kjit_copy(w->context, &host, &w->arrays[i], NULL);
        }
    if (status == KJIT_OK)
        status = kjit_event_record(w->context, NULL, &events[3]);
    if (status == KJIT_OK)
        status = kjit_synchronize(w->context);
    for (int k = 0; k < 3 && status == KJIT_OK; k++)
        status = kjit_event_elapsed(events[k], events[k + 1], &ms[k]);
    for (int k = 0; k < 4; k++)
        kjit_event_destroy(events[k]);
    if (status != KJIT_OK)
        fail(w, error);
    return status;
}

/* The outputs a target hands over for comparison (the Working gives up the
 * buffers it passes on). */
static bool take_outputs(const Bench *b, const KjCliArgs *inputs, Working *w, TargetRun *t)
{
    if (b->kind != KJIT_FUNCTION_KERNEL) {
        Output *out = &t->outputs[t->output_count++];
        *out = (Output){.arg = -1, .dtype = w->result.dtype, .ndim = w->result.ndim};
        memcpy(out->shape, w->result.shape, sizeof out->shape);
        size_t bytes = array_bytes(&w->result);
        if (!(out->data = malloc(bytes + 1)))
            return false;
        kj_array_gather(&w->result, out->data);
        return true;
    }
    for (int i = 0; i < inputs->count; i++) {
        if (inputs->args[i].kind != KJIT_ARG_ARRAY)
            continue;
        const kjit_array *in = &inputs->arrays[i];
        Output *out = &t->outputs[t->output_count++];
        *out = (Output){.arg = i, .dtype = in->dtype, .ndim = in->ndim};
        memcpy(out->shape, in->shape, sizeof out->shape);
        if (w->host_out[i]) {
            out->data = w->host_out[i];
            w->host_out[i] = NULL;
        } else {
            out->data = w->arrays[i].data;
            w->copied[i] = false;
        }
    }
    return true;
}

static void bench_target(Bench *b, const KjCliArgs *inputs, const char *size_label, TargetRun *t)
{
    const char *name = kjit_target_name(t->target);
    char reason[512];
    if (t->target == KJIT_TARGET_CUDA) {
        if (kjit_cuda_available(reason, sizeof reason) != KJIT_OK) {
            t->state = TARGET_UNAVAILABLE;
            t->reason = kj_xstrdup(reason);
            return;
        }
        kjit_device_info info;
        int device = getenv("KJIT_DEVICE") ? atoi(getenv("KJIT_DEVICE")) : 0;
        if (kjit_cuda_device_info(device, &info) == KJIT_OK)
            snprintf(t->device, sizeof t->device, "%s (sm_%d%d)", info.name, info.compute_major,
                     info.compute_minor);
        else
            snprintf(t->device, sizeof t->device, "GPU %d", device);
    } else {
        t->threads = t->target == KJIT_TARGET_PARALLEL ? parallel_threads(b->o) : 1;
        snprintf(t->device, sizeof t->device, "%s, %d thread%s", b->cpu_name, t->threads,
                 t->threads == 1 ? "" : "s");
    }

    char *error = NULL;
    Compiled cold, again;
    progress_update("%s%s: compiling", size_label, name);
    fresh_cache_dir(b);
    bool ok = compile_on(b, t->target, inputs, &cold, &t->compile_ms[0], &error);
    compiled_free(&cold);
    if (!ok) {
        t->state = TARGET_FAILED;
        t->reason = error;
        return;
    }
    /* The second context finds what a new process would: nothing loaded, and
     * the code in the cache. */
    kj_cache_memory_clear();
    KjCacheCounters before = kj_cache_counters();
    ok = compile_on(b, t->target, inputs, &again, &t->compile_ms[1], &error);
    t->cached_from = cached_from(before, kj_cache_counters());
    if (!ok) {
        t->state = TARGET_FAILED;
        t->reason = error;
        compiled_free(&again);
        return;
    }

    Working w = {.context = again.context, .function = again.function};
    int repeat = b->o->repeat, total = b->o->warmup + repeat;
    double *times = kj_xmalloc(sizeof *times * (size_t)repeat * 3);
    t->transfers = kjit_context_target(again.context) == KJIT_TARGET_CUDA &&
                   b->kind != KJIT_FUNCTION_PLAIN;
    ok = working_setup(b, inputs, &w, &error);
    for (int r = 0; ok && r < total; r++) {
        progress_update("%s%s: run %d of %d", size_label, name, r + 1, total);
        double ms[3];
        ok = run_once(b, inputs, &w, ms, &error) == KJIT_OK;
        if (ok && r >= b->o->warmup)
            for (int k = 0; k < 3; k++)
                times[k * repeat + r - b->o->warmup] = ms[k];
    }
    if (ok && !take_outputs(b, inputs, &w, t)) {
        ok = false;
        error = kj_xstrdup("out of memory for the outputs");
    }
    if (ok) {
        t->state = TARGET_OK;
        t->in = stats_of(times, repeat);
        t->run = stats_of(times + repeat, repeat);
        t->out = stats_of(times + 2 * repeat, repeat);
        t->total = t->run.median + (t->transfers ? t->in.median + t->out.median : 0);
    } else {
        t->state = TARGET_FAILED;
        t->reason = error;
    }
    free(times);
    working_free(&w);
    compiled_free(&again);
}

/* ============================================================ agreement */

static int64_t ordered_f64(double x)
{
    int64_t i;
    memcpy(&i, &x, sizeof i);
    return i < 0 ? INT64_MIN - i : i;
}

static int32_t ordered_f32(float x)
{
    int32_t i;
    memcpy(&i, &x, sizeof i);
    return i < 0 ? INT32_MIN - i : i;
}

/* Units in the last place between x and r in the precision of `single`. */
static double ulp_distance(double x, double r, bool single)
{
    if (single) {
        int64_t d = (int64_t)ordered_f32((float)x) - (int64_t)ordered_f32((float)r);
        return (double)(d < 0 ? -d : d);
    }
    int64_t a = ordered_f64(x), c = ordered_f64(r);
    uint64_t d = a > c ? (uint64_t)a - (uint64_t)c : (uint64_t)c - (uint64_t)a;
    return (double)d;
}

static bool dtype_is_float(kjit_dtype d)
{
    return d == KJIT_F32 || d == KJIT_F64 || d == KJIT_C64 || d == KJIT_C128;
}

/*
 * Compares a target's output with the reference output, element by element.
 * Integers and bools must be equal.  Floats (each part of a complex) agree
 * when both are NaN, or when they differ by at most `ulps` units in the last
 * place of the element, or of the array's largest magnitude: a result near
 * zero is then judged at the array's scale, where rounding differences of the
 * steps before it live.
 */
static void compare_output(const Output *got, const Output *ref, int ulps, Agreement *a)
{
    char s1[160], s2[160];
    if (got->ndim != ref->ndim || memcmp(got->shape, ref->shape, sizeof(int64_t) * (size_t)got->ndim)) {
        a->verdict = VERDICT_MISMATCH;
        snprintf(a->detail, sizeof a->detail, "shape %s, expected %s",
                 kj_shape_string(s1, sizeof s1, got->ndim, got->shape),
                 kj_shape_string(s2, sizeof s2, ref->ndim, ref->shape));
        return;
    }
    bool floats = dtype_is_float(got->dtype);
    if (floats != dtype_is_float(ref->dtype)) {
        a->verdict = VERDICT_MISMATCH;
        snprintf(a->detail, sizeof a->detail, "type %s, expected %s", kjit_dtype_name(got->dtype),
                 kjit_dtype_name(ref->dtype));
        return;
    }
    bool complex = got->dtype == KJIT_C64 || got->dtype == KJIT_C128;
    bool single = got->dtype == KJIT_F32 || got->dtype == KJIT_C64;
    size_t got_elem = kjit_dtype_size(got->dtype), ref_elem = kjit_dtype_size(ref->dtype);
    int64_t size = output_size(got);
    bool same_ints = !floats && got->dtype == ref->dtype;
    a->floats = a->floats || floats;
    a->total += size;

    double scale = 0;
    for (int64_t i = 0; floats && i < size; i++) {
        double im, re = kj_cli_load_value((char *)ref->data + i * (int64_t)ref_elem, ref->dtype, &im);
        if (isfinite(re) && fabs(re) > scale) scale = fabs(re);
        if (isfinite(im) && fabs(im) > scale) scale = fabs(im);
    }
    double eps = single ? 0x1p-23 : 0x1p-52;
    double scale_tolerance = (double)ulps * eps * scale;

    for (int64_t i = 0; i < size; i++) {
        const char *gp = (char *)got->data + i * (int64_t)got_elem;
        const char *rp = (char *)ref->data + i * (int64_t)ref_elem;
        double gv[2], rv[2];
        gv[0] = kj_cli_load_value(gp, got->dtype, &gv[1]);
        rv[0] = kj_cli_load_value(rp, ref->dtype, &rv[1]);
        bool element_ok = true;
        for (int part = 0; part < (complex ? 2 : 1); part++) {
            double x = gv[part], r = rv[part];
            if (!floats) {
                bool equal = same_ints ? memcmp(gp, rp, got_elem) == 0 : x == r;
                if (!equal) {
                    double d = fabs(x - r);
                    element_ok = false;
                    a->max_abs = fmax(a->max_abs, d);
                    a->max_rel = fmax(a->max_rel, d / fmax(fabs(x), fabs(r)));
                }
                continue;
            }
            if ((isnan(x) && isnan(r)) || x == r)
                continue;
            double d = fabs(x - r);
            double ulp = ulp_distance(x, r, single);
            if (isnan(x) || isnan(r)) {
                d = INFINITY;
                ulp = INFINITY;
            }
            a->max_abs = fmax(a->max_abs, d);
            a->max_rel = fmax(a->max_rel, isfinite(d) ? d / fmax(fabs(x), fabs(r)) : INFINITY);
            a->max_ulp = fmax(a->max_ulp, ulp);
            if (a->verdict != VERDICT_MISMATCH)
                a->verdict = VERDICT_OK;
            if (!(ulp <= ulps || d <= scale_tolerance))
                element_ok = false;
        }
        if (!element_ok) {
            a->differing++;
            a->verdict = VERDICT_MISMATCH;
        }
    }
}

static void compare_target(const Bench *b, TargetRun *t, const TargetRun *base)
{
    Agreement *a = &t->agreement;
    memset(a, 0, sizeof *a);
    if (t->state != TARGET_OK)
        return;
    if (!b->have_reference && t == base) {
        a->verdict = VERDICT_BASELINE;
        return;
    }
    if (!b->have_reference && !base)
        return;
    a->verdict = VERDICT_IDENTICAL;
    if (b->have_reference) {
        const Output *got = NULL;
        for (int i = 0; i < t->output_count; i++)
            if (t->outputs[i].arg == b->reference.arg)
                got = &t->outputs[i];
        if (!got) {
            a->verdict = VERDICT_MISMATCH;
            snprintf(a->detail, sizeof a->detail, "no output %d to compare with the reference",
                     b->reference.arg);
            return;
        }
        compare_output(got, &b->reference, b->o->ulps, a);
        return;
    }
    for (int i = 0; i < t->output_count && i < base->output_count; i++)
        compare_output(&t->outputs[i], &base->outputs[i], b->o->ulps, a);
}

/* "identical", "ok: 2 ulp, abs 1.2e-07, rel 3.4e-08", "MISMATCH: ...". */
static void agreement_text(const Agreement *a, char *buf, size_t size)
{
    switch (a->verdict) {
    case VERDICT_NONE: snprintf(buf, size, "-"); return;
    case VERDICT_BASELINE: snprintf(buf, size, "(baseline)"); return;
    case VERDICT_IDENTICAL: snprintf(buf, size, "identical"); return;
    case VERDICT_OK:
        snprintf(buf, size, "ok: %.0f ulp, abs %.2g, rel %.2g", a->max_ulp, a->max_abs, a->max_rel);
        return;
    case VERDICT_MISMATCH:
        if (a->detail[0]) {
            snprintf(buf, size, "MISMATCH: %s", a->detail);
        } else {
            int n = snprintf(buf, size, "MISMATCH: %lld of %lld differ, abs %.3g, rel %.3g",
                             (long long)a->differing, (long long)a->total, a->max_abs, a->max_rel);
            if (a->floats && n > 0 && (size_t)n < size)
                snprintf(buf + n, size - (size_t)n, ", %.3g ulp", a->max_ulp);
        }
        return;
    }
}

/* ============================================================ one size */

/* Every array contiguous in C order, so that kjit_copy can move it. */
static void make_contiguous(KjCliArgs *args)
{
    for (int i = 0; i < args->count; i++) {
        kjit_array *a = &args->arrays[i];
        if (args->args[i].kind != KJIT_ARG_ARRAY || kj_array_is_contiguous(a))
            continue;
        void *data = kj_xmalloc(array_bytes(a) + 1);
        kj_array_gather(a, data);
        kjit_array copy = kjit_array_make(data, a->dtype, a->ndim, a->shape);
        if (args->owned[i])
            kjit_array_free(a);
        *a = copy;
        args->owned[i] = true;
    }
}

/* Elements and bytes moved by one call: a vectorized call reads its array
 * inputs and writes its result; a kernel is counted as touching every array
 * argument once, its elements being those of its largest array. */
static void measure_work(const Bench *b, const KjCliArgs *inputs, const TargetRun *done,
                         SizeRun *s)
{
    int64_t largest = 0;
    double bytes = 0;
    for (int i = 0; i < inputs->count; i++)
        if (inputs->args[i].kind == KJIT_ARG_ARRAY) {
            bytes += (double)array_bytes(&inputs->arrays[i]);
            int64_t n = kjit_array_size(&inputs->arrays[i]);
            largest = n > largest ? n : largest;
        }
    s->elements = largest ? largest : 1;
    if (b->kind != KJIT_FUNCTION_KERNEL && done) {
        const Output *out = &done->outputs[0];
        bytes += (double)output_size(out) * (double)kjit_dtype_size(out->dtype);
        s->elements = output_size(out);
    }
    s->bytes = bytes;
}

static int bench_size(Bench *b, kjit_function *typing, SizeRun *s)
{
    const BenchOptions *o = b->o;
    char label[64] = "";
    if (s->size)
        snprintf(label, sizeof label, "[size %lld] ", (long long)s->size);
    kj_cli_seed(o->seed);
    KjCliArgs *inputs = kj_xcalloc(1, sizeof *inputs);
    int code = kj_cli_make_args("bench", typing, (const char *const *)s->args, o->arg_count, inputs);
    if (code != 0) {
        kj_cli_args_free(inputs);
        free(inputs);
        return code;
    }
    make_contiguous(inputs);
    for (int k = 0; k < o->target_count; k++) {
        s->targets[k].target = o->targets[k];
        bench_target(b, inputs, label, &s->targets[k]);
    }
    const TargetRun *base = baseline_of(s, o->target_count);
    measure_work(b, inputs, base, s);
    for (int k = 0; k < o->target_count; k++)
        compare_target(b, &s->targets[k], base);
    kj_cli_args_free(inputs);
    free(inputs);
    return 0;
}

/* ================================================================ table */

#define MAX_COLUMNS 16
#define MAX_ROWS (MAX_SIZES + 1)

typedef struct Table {
    char cells[MAX_ROWS][MAX_COLUMNS][96];
    char wide[MAX_ROWS][600]; /* a row told in words (an unavailable target) */
    int rows, columns;
    bool left[MAX_COLUMNS];
} Table;

static void cell(Table *t, int row, int column, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->cells[row][column], sizeof t->cells[row][column], fmt, ap);
    va_end(ap);
}

/* Milliseconds with three or four significant digits. */
static void format_ms(char *buf, size_t size, double ms)
{
    if (ms >= 1000) snprintf(buf, size, "%.0f", ms);
    else if (ms >= 1) snprintf(buf, size, "%.4g", ms);
    else snprintf(buf, size, "%.3g", ms);
}

/* 2.43G: a rate with an SI prefix. */
static void format_rate(char *buf, size_t size, double v)
{
    static const char prefixes[] = " kMGTP";
    int p = 0;
    while (v >= 1000 && p < 5) {
        v /= 1000;
        p++;
    }
    if (p == 0) snprintf(buf, size, "%.3g", v);
    else snprintf(buf, size, "%.3g%c", v, prefixes[p]);
}

static void format_bytes(char *buf, size_t size, double bytes)
{
    if (bytes >= 1e9) snprintf(buf, size, "%.2f GB", bytes / 1e9);
    else if (bytes >= 1e6) snprintf(buf, size, "%.1f MB", bytes / 1e6);
    else if (bytes >= 1e3) snprintf(buf, size, "%.1f kB", bytes / 1e3);
    else snprintf(buf, size, "%.0f bytes", bytes);
}

/* A title over the columns first..last. */
typedef struct Group {
    int first, last;
    const char *title;
} Group;

static void print_table(FILE *f, const Table *t, const Group *groups, int group_count)
{
    int width[MAX_COLUMNS] = {0};
    for (int r = 0; r < t->rows; r++)
        for (int c = 0; c < t->columns; c++) {
            int n = (int)strlen(t->cells[r][c]);
            width[c] = n > width[c] ? n : width[c];
        }
    for (int g = 0; g < group_count; g++) {
        int span = 0;
        for (int c = groups[g].first; c <= groups[g].last; c++)
            span += width[c] + (c > groups[g].first ? 2 : 0);
        int need = (int)strlen(groups[g].title);
        if (need > span)
            width[groups[g].last] += need - span;
    }
    if (group_count) {
        KjBuf line = {0};
        int column = 0;
        for (int g = 0; g < group_count; g++) {
            for (; column < groups[g].first; column++)
                kj_buf_printf(&line, "%*s", width[column] + 2, "");
            int span = 0;
            for (int c = groups[g].first; c <= groups[g].last; c++)
                span += width[c] + 2;
            kj_buf_printf(&line, "%-*s", span, groups[g].title);
            column = groups[g].last + 1;
        }
        size_t n = strlen(line.data);
        while (n > 0 && line.data[n - 1] == ' ')
            line.data[--n] = '\0';
        fprintf(f, "%s\n", line.data);
        kj_buf_free(&line);
    }
    for (int r = 0; r < t->rows; r++) {
        KjBuf line = {0};
        for (int c = 0; c < t->columns; c++) {
            if (t->wide[r][0] && c == 1) {
                kj_buf_printf(&line, "%s", t->wide[r]);
                break;
            }
            bool last = c == t->columns - 1;
            if (last && t->left[c])
                kj_buf_printf(&line, "%s", t->cells[r][c]);
            else if (t->left[c])
                kj_buf_printf(&line, "%-*s  ", width[c], t->cells[r][c]);
            else
                kj_buf_printf(&line, last ? "%*s" : "%*s  ", width[c], t->cells[r][c]);
        }
        size_t n = line.data ? strlen(line.data) : 0;
        while (n > 0 && line.data[n - 1] == ' ')
            line.data[--n] = '\0';
        fprintf(f, "%s\n", line.data ? line.data : "");
        kj_buf_free(&line);
    }
}

static void print_size_table(FILE *f, const Bench *b, const SizeRun *s)
{
    const BenchOptions *o = b->o;
    char bytes[64];
    format_bytes(bytes, sizeof bytes, s->bytes);
    if (s->size)
        fprintf(f, "\nsize %lld:", (long long)s->size);
    fprintf(f, "\n%lld element%s, %s moved per call (arrays read and written)\n",
            (long long)s->elements, s->elements == 1 ? "" : "s", bytes);

    Table *t = kj_xcalloc(1, sizeof *t);
    t->columns = 14;
    t->left[0] = t->left[1] = t->left[13] = true;
    static const char *const heads[] = {"target", "device", "cold", "cached", "in", "out",
                                        "median", "min", "max", "elem/s", "GB/s", "run",
                                        "+transfers", ""};
    for (int c = 0; c < 14; c++)
        cell(t, 0, c, "%s", heads[c]);
    const TargetRun *base = baseline_of(s, o->target_count);
    if (b->have_reference)
        cell(t, 0, 13, "vs %s", o->reference);
    else if (base)
        cell(t, 0, 13, "vs %s", kjit_target_name(base->target));
    t->rows = 1;
    for (int k = 0; k < o->target_count; k++) {
        const TargetRun *r = &s->targets[k];
        int row = t->rows++;
        cell(t, row, 0, "%s", kjit_target_name(r->target));
        if (r->state == TARGET_UNAVAILABLE) {
            snprintf(t->wide[row], sizeof t->wide[row], "unavailable: %s", r->reason);
            continue;
        }
        if (r->state == TARGET_FAILED) {
            snprintf(t->wide[row], sizeof t->wide[row], "FAILED: %.*s", (int)strcspn(r->reason, "\n"),
                     r->reason);
            continue;
        }
        char buf[64];
        cell(t, row, 1, "%s", r->device);
        format_ms(buf, sizeof buf, r->compile_ms[0]);
        cell(t, row, 2, "%s", buf);
        format_ms(buf, sizeof buf, r->compile_ms[1]);
        cell(t, row, 3, "%s", buf);
        if (r->transfers) {
            format_ms(buf, sizeof buf, r->in.median);
            cell(t, row, 4, "%s", buf);
            format_ms(buf, sizeof buf, r->out.median);
            cell(t, row, 5, "%s", buf);
        } else {
            cell(t, row, 4, "-");
            cell(t, row, 5, "-");
        }
        const Stats *st = &r->run;
        format_ms(buf, sizeof buf, st->median);
        cell(t, row, 6, "%s", buf);
        format_ms(buf, sizeof buf, st->min);
        cell(t, row, 7, "%s", buf);
        format_ms(buf, sizeof buf, st->max);
        cell(t, row, 8, "%s", buf);
        double seconds = st->median / 1e3;
        format_rate(buf, sizeof buf, seconds > 0 ? (double)s->elements / seconds : INFINITY);
        cell(t, row, 9, "%s", buf);
        cell(t, row, 10, "%.3g", seconds > 0 ? s->bytes / seconds / 1e9 : INFINITY);
        if (base) {
            cell(t, row, 11, "%.2fx", base->run.median / st->median);
            cell(t, row, 12, "%.2fx", base->total / r->total);
        } else {
            cell(t, row, 11, "-");
            cell(t, row, 12, "-");
        }
        agreement_text(&r->agreement, t->cells[row][13], sizeof t->cells[row][13]);
    }
    static const Group groups[] = {{2, 3, "compile ms"}, {4, 5, "transfer ms"},
                                   {6, 8, "run ms"},     {9, 10, "throughput"},
                                   {11, 12, "speed-up"}, {13, 13, "agreement"}};
    print_table(f, t, groups, 6);
    free(t);

    for (int k = 0; k < o->target_count; k++)
        if (s->targets[k].state == TARGET_OK) {
            fprintf(f, "compile: cold in a fresh context with an empty cache; cached in another "
                       "once the first is gone (code from: %s)\n", s->targets[k].cached_from);
            break;
        }
    const TargetRun *cpu = NULL, *cuda = NULL;
    for (int k = 0; k < o->target_count; k++) {
        const TargetRun *r = &s->targets[k];
        if (r->state != TARGET_OK)
            continue;
        if (r->target == KJIT_TARGET_CPU) cpu = r;
        if (r->target == KJIT_TARGET_CUDA) cuda = r;
    }
    if (cpu && cuda)
        fprintf(f, "cuda over cpu: %.2fx on the run, %.2fx counting transfers\n",
                cpu->run.median / cuda->run.median, cpu->total / cuda->total);
}

/* ================================================================ sweep */

/* The baseline of the sweep: cpu when it is compared, else the first target. */
static int sweep_baseline(const BenchOptions *o)
{
    for (int k = 0; k < o->target_count; k++)
        if (o->targets[k] == KJIT_TARGET_CPU)
            return k;
    return 0;
}

/* The smallest size from which target k is faster than the baseline (counting
 * its transfers) at every larger size tried; 0 when it never is. */
static int64_t crossover(const SizeRun *runs, int count, int base, int k)
{
    int64_t from = 0;
    for (int i = count - 1; i >= 0; i--) {
        const TargetRun *t = &runs[i].targets[k], *b = &runs[i].targets[base];
        if (t->state != TARGET_OK || b->state != TARGET_OK || !(t->total < b->total))
            break;
        from = runs[i].size;
    }
    return from;
}

static void print_sweep(FILE *f, const Bench *b, const SizeRun *runs)
{
    const BenchOptions *o = b->o;
    Table *t = kj_xcalloc(1, sizeof *t);
    int base = sweep_baseline(o);
    t->columns = 1 + o->target_count;
    t->left[0] = true;
    cell(t, 0, 0, "size");
    for (int k = 0; k < o->target_count; k++)
        cell(t, 0, 1 + k, "%s", kjit_target_name(o->targets[k]));
    t->rows = 1;
    for (int i = 0; i < o->size_count; i++) {
        int row = t->rows++;
        cell(t, row, 0, "%lld", (long long)runs[i].size);
        for (int k = 0; k < o->target_count; k++) {
            const TargetRun *r = &runs[i].targets[k];
            char buf[64];
            if (r->state == TARGET_UNAVAILABLE) {
                cell(t, row, 1 + k, "unavailable");
                continue;
            }
            if (r->state == TARGET_FAILED) {
                cell(t, row, 1 + k, "failed");
                continue;
            }
            format_ms(buf, sizeof buf, r->total);
            cell(t, row, 1 + k, "%s%s", buf,
                 r->agreement.verdict == VERDICT_MISMATCH ? " (mismatch)" : "");
        }
    }
    fprintf(f, "\nsweep: median ms per call, transfers included\n");
    print_table(f, t, NULL, 0);
    free(t);
    const char *base_name = kjit_target_name(o->targets[base]);
    for (int k = 0; k < o->target_count; k++) {
        if (k == base)
            continue;
        const char *name = kjit_target_name(o->targets[k]);
        const TargetRun *last = &runs[o->size_count - 1].targets[k];
        if (last->state == TARGET_UNAVAILABLE) {
            fprintf(f, "crossover: %s unavailable (%s)\n", name, last->reason);
            continue;
        }
        int64_t from = crossover(runs, o->size_count, base, k);
        if (from == 0)
            fprintf(f, "crossover: no crossover up to %lld: %s does not beat %s\n",
                    (long long)o->sizes[o->size_count - 1], name, base_name);
        else if (from == o->sizes[0])
            fprintf(f, "crossover: %s beats %s at every size tried (from %lld)\n", name, base_name,
                    (long long)from);
        else
            fprintf(f, "crossover: %s beats %s from %lld elements on\n", name, base_name,
                    (long long)from);
    }
}

/* ================================================================= JSON */

static void json_string(KjBuf *j, const char *s)
{
    kj_buf_printf(j, "\"");
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') kj_buf_printf(j, "\\%c", c);
        else if (c == '\n') kj_buf_printf(j, "\\n");
        else if (c == '\t') kj_buf_printf(j, "\\t");
        else if (c < 0x20) kj_buf_printf(j, "\\u%04x", c);
        else kj_buf_printf(j, "%c", c);
    }
    kj_buf_printf(j, "\"");
}

/* JSON has no NaN or infinity: those are null. */
static void json_number(KjBuf *j, double v)
{
    if (isfinite(v)) kj_buf_printf(j, "%.9g", v);
    else kj_buf_printf(j, "null");
}

static void json_stats(KjBuf *j, const Stats *s)
{
    kj_buf_printf(j, "{\"median\": ");
    json_number(j, s->median);
    kj_buf_printf(j, ", \"min\": ");
    json_number(j, s->min);
    kj_buf_printf(j, ", \"max\": ");
    json_number(j, s->max);
    kj_buf_printf(j, "}");
}

static void json_target(KjBuf *j, const SizeRun *s, const TargetRun *r, const TargetRun *base)
{
    kj_buf_printf(j, "{\"target\": ");
    json_string(j, kjit_target_name(r->target));
    if (r->state == TARGET_UNAVAILABLE) {
        kj_buf_printf(j, ", \"available\": false, \"reason\": ");
        json_string(j, r->reason);
        kj_buf_printf(j, "}");
        return;
    }
    kj_buf_printf(j, ", \"available\": true, \"ok\": %s, \"device\": ",
                  r->state == TARGET_OK ? "true" : "false");
    json_string(j, r->device);
    if (r->threads)
        kj_buf_printf(j, ", \"threads\": %d", r->threads);
    if (r->state == TARGET_FAILED) {
        kj_buf_printf(j, ", \"error\": ");
        json_string(j, r->reason);
        kj_buf_printf(j, "}");
        return;
    }
    kj_buf_printf(j, ", \"compile_ms\": {\"cold\": ");
    json_number(j, r->compile_ms[0]);
    kj_buf_printf(j, ", \"cached\": ");
    json_number(j, r->compile_ms[1]);
    kj_buf_printf(j, ", \"cached_from\": ");
    json_string(j, r->cached_from);
    kj_buf_printf(j, "}, \"transfer_ms\": ");
    if (r->transfers) {
        kj_buf_printf(j, "{\"in\": ");
        json_stats(j, &r->in);
        kj_buf_printf(j, ", \"out\": ");
        json_stats(j, &r->out);
        kj_buf_printf(j, "}");
    } else {
        kj_buf_printf(j, "null");
    }
    kj_buf_printf(j, ", \"run_ms\": ");
    json_stats(j, &r->run);
    kj_buf_printf(j, ", \"total_ms\": ");
    json_number(j, r->total);
    double seconds = r->run.median / 1e3;
    kj_buf_printf(j, ", \"elements_per_s\": ");
    json_number(j, (double)s->elements / seconds);
    kj_buf_printf(j, ", \"gb_per_s\": ");
    json_number(j, s->bytes / seconds / 1e9);
    kj_buf_printf(j, ", \"speedup\": ");
    json_number(j, base->run.median / r->run.median);
    kj_buf_printf(j, ", \"speedup_with_transfers\": ");
    json_number(j, base->total / r->total);
    const Agreement *a = &r->agreement;
    kj_buf_printf(j, ", \"agreement\": {\"verdict\": ");
    json_string(j, verdict_names[a->verdict]);
    kj_buf_printf(j, ", \"max_abs\": ");
    json_number(j, a->max_abs);
    kj_buf_printf(j, ", \"max_rel\": ");
    json_number(j, a->max_rel);
    kj_buf_printf(j, ", \"max_ulp\": ");
    json_number(j, a->floats ? a->max_ulp : NAN);
    kj_buf_printf(j, ", \"differing\": %lld, \"compared\": %lld", (long long)a->differing,
                  (long long)a->total);
    if (a->detail[0]) {
        kj_buf_printf(j, ", \"detail\": ");
        json_string(j, a->detail);
    }
    kj_buf_printf(j, "}}");
}

static char *json_report(const Bench *b, const SizeRun *runs, int run_count)
{
    const BenchOptions *o = b->o;
    static const char *const kinds[] = {"plain", "vectorize", "kernel"};
    KjBuf j = {0};
    kj_buf_printf(&j, "{\"kjit\": \"%s\", \"file\": ", KJIT_VERSION);
    json_string(&j, o->file);
    kj_buf_printf(&j, ", \"function\": ");
    json_string(&j, o->function);
    kj_buf_printf(&j, ", \"kind\": \"%s\", \"signature\": ", kinds[b->kind]);
    json_string(&j, b->signature);
    kj_buf_printf(&j, ", \"seed\": %llu, \"repeat\": %d, \"warmup\": %d, \"ulps\": %d",
                  (unsigned long long)o->seed, o->repeat, o->warmup, o->ulps);
    if (o->has_grid)
        kj_buf_printf(&j, ", \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u]", o->grid[0],
                      o->grid[1], o->grid[2], o->block[0], o->block[1], o->block[2]);
    kj_buf_printf(&j, ", \"reference\": ");
    if (b->have_reference)
        json_string(&j, o->reference);
    else
        kj_buf_printf(&j, "null");
    kj_buf_printf(&j, ", \"results\": [");
    for (int i = 0; i < run_count; i++) {
        const SizeRun *s = &runs[i];
        kj_buf_printf(&j, "%s\n  {\"size\": ", i ? "," : "");
        if (s->size) kj_buf_printf(&j, "%lld", (long long)s->size);
        else kj_buf_printf(&j, "null");
        kj_buf_printf(&j, ", \"args\": [");
        for (int a = 0; a < o->arg_count; a++) {
            kj_buf_printf(&j, a ? ", " : "");
            json_string(&j, s->args[a]);
        }
        const TargetRun *base = baseline_of(s, o->target_count);
        kj_buf_printf(&j, "], \"elements\": %lld, \"bytes\": %.0f, \"baseline\": ",
                      (long long)s->elements, s->bytes);
        if (base)
            json_string(&j, kjit_target_name(base->target));
        else
            kj_buf_printf(&j, "null");
        kj_buf_printf(&j, ", \"targets\": [");
        for (int k = 0; k < o->target_count; k++) {
            kj_buf_printf(&j, "%s\n    ", k ? "," : "");
            json_target(&j, s, &s->targets[k], base);
        }
        kj_buf_printf(&j, "]}");
    }
    kj_buf_printf(&j, "]");
    if (o->size_count) {
        int base = sweep_baseline(o);
        kj_buf_printf(&j, ",\n \"crossover\": [");
        bool any = false;
        for (int k = 0; k < o->target_count; k++) {
            if (k == base)
                continue;
            const TargetRun *last = &runs[run_count - 1].targets[k];
            kj_buf_printf(&j, "%s{\"target\": \"%s\", \"baseline\": \"%s\", ", any ? ", " : "",
                          kjit_target_name(o->targets[k]), kjit_target_name(o->targets[base]));
            any = true;
            if (last->state == TARGET_UNAVAILABLE) {
                kj_buf_printf(&j, "\"available\": false, \"reason\": ");
                json_string(&j, last->reason);
                kj_buf_printf(&j, "}");
                continue;
            }
            int64_t from = crossover(runs, run_count, base, k);
            kj_buf_printf(&j, "\"available\": true, \"from_size\": ");
            if (from) kj_buf_printf(&j, "%lld", (long long)from);
            else kj_buf_printf(&j, "null");
            kj_buf_printf(&j, ", \"largest_size\": %lld}", (long long)o->sizes[o->size_count - 1]);
        }
        kj_buf_printf(&j, "]");
    }
    kj_buf_printf(&j, "}\n");
    return j.data;
}

/* ================================================================== CSV */

/* Free text goes last and is quoted, so that `cut -d,` or awk -F, can take
 * the numbers before it. */
static void csv_text(KjBuf *c, const char *s)
{
    kj_buf_printf(c, "\"");
    for (; s && *s; s++) {
        if (*s == '\n') kj_buf_printf(c, " ");
        else kj_buf_printf(c, *s == '"' ? "\"\"" : "%c", *s);
    }
    kj_buf_printf(c, "\"");
}

static char *csv_report(const Bench *b, const SizeRun *runs, int run_count)
{
    const BenchOptions *o = b->o;
    KjBuf c = {0};
    kj_buf_printf(&c, "function,size,target,status,compile_cold_ms,compile_cached_ms,in_ms,out_ms,"
                      "run_median_ms,run_min_ms,run_max_ms,total_ms,elements,bytes,"
                      "elements_per_s,gb_per_s,speedup,speedup_with_transfers,agreement,"
                      "max_abs,max_rel,max_ulp,differing,device,reason\n");
    for (int i = 0; i < run_count; i++) {
        const SizeRun *s = &runs[i];
        const TargetRun *base = baseline_of(s, o->target_count);
        for (int k = 0; k < o->target_count; k++) {
            const TargetRun *r = &s->targets[k];
            static const char *const states[] = {"ok", "unavailable", "failed"};
            kj_buf_printf(&c, "%s,%lld,%s,%s", o->function, (long long)(s->size ? s->size : s->elements),
                          kjit_target_name(r->target), states[r->state]);
            if (r->state == TARGET_OK) {
                double seconds = r->run.median / 1e3;
                double with = base->total / r->total;
                double speedup = base->run.median / r->run.median;
                kj_buf_printf(&c, ",%.6g,%.6g,", r->compile_ms[0], r->compile_ms[1]);
                if (r->transfers)
                    kj_buf_printf(&c, "%.6g,%.6g", r->in.median, r->out.median);
                else
                    kj_buf_printf(&c, ",");
                kj_buf_printf(&c, ",%.6g,%.6g,%.6g,%.6g,%lld,%.0f,%.6g,%.6g,%.4g,%.4g,%s,%.3g,%.3g,",
                              r->run.median, r->run.min, r->run.max, r->total,
                              (long long)s->elements, s->bytes, (double)s->elements / seconds,
                              s->bytes / seconds / 1e9, speedup, with,
                              verdict_names[r->agreement.verdict], r->agreement.max_abs,
                              r->agreement.max_rel);
                if (r->agreement.floats)
                    kj_buf_printf(&c, "%.3g", r->agreement.max_ulp);
                kj_buf_printf(&c, ",%lld,", (long long)r->agreement.differing);
            } else {
                kj_buf_printf(&c, ",,,,,,,,,%lld,%.0f,,,,,,,,,,", (long long)s->elements, s->bytes);
            }
            csv_text(&c, r->device);
            kj_buf_printf(&c, ",");
            csv_text(&c, r->reason ? r->reason : "");
            kj_buf_printf(&c, "\n");
        }
    }
    return c.data;
}

static int write_text(const char *path, const char *text)
{
    if (!path) {
        fputs(text, stdout);
        return 0;
    }
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "kjit bench: cannot write '%s': %s\n", path, strerror(errno));
        return 2;
    }
    return 0;
}

/* ================================================================= main */

static void print_diagnostic(void *user, const char *text)
{
    (*(int *)user)++;
    fputs(text, stderr);
    size_t n = strlen(text);
    if (n && text[n - 1] != '\n')
        fputc('\n', stderr);
}

/* The reference array given with --reference, checked against the function. */
static int load_reference(Bench *b)
{
    const BenchOptions *o = b->o;
    kjit_array array;
    char *why = NULL;
    kjit_status status = kj_npy_read(o->reference, &array, &why);
    if (status != KJIT_OK) {
        fprintf(stderr, "kjit bench: --reference: %s\n", why);
        free(why);
        return status == KJIT_ERROR_IO ? 2 : 1;
    }
    Output *r = &b->reference;
    *r = (Output){.arg = o->reference_arg, .dtype = array.dtype, .ndim = array.ndim};
    memcpy(r->shape, array.shape, sizeof r->shape);
    r->data = kj_xmalloc(array_bytes(&array) + 1);
    kj_array_gather(&array, r->data);
    kjit_array_free(&array);
    b->have_reference = true;
    if (b->kind != KJIT_FUNCTION_KERNEL && o->reference_arg >= 0) {
        fprintf(stderr, "kjit bench: --reference N=FILE is for a @kernel's argument N; "
                        "%s's result is compared with FILE alone\n", o->function);
        return 2;
    }
    return 0;
}

int kj_cli_bench(int argc, char **argv)
{
    BenchOptions o;
    int code = parse_options(argc, argv, &o);
    if (code >= 0)
        return code;
    code = 0;
    progress.enabled = isatty(STDERR_FILENO);
    progress.start = kj_cli_now_ms();

    /* A cpu context reads the program once, to type the arguments and report
     * errors in it before any target is tried. */
    int diagnostics = 0;
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CPU;
    options.on_diagnostic = print_diagnostic;
    options.diagnostic_user = &diagnostics;
    kjit_context *context = NULL;
    if (kjit_context_create(&options, &context) != KJIT_OK) {
        fprintf(stderr, "kjit bench: %s\n", kjit_last_error(NULL));
        return 1;
    }
    kjit_module *module = NULL;
    kjit_function *function = NULL;
    Bench b = {.o = &o};
    SizeRun *runs = NULL;
    int run_count = o.size_count ? o.size_count : 1;
    kjit_status status = kjit_compile_file(context, o.file, &module);
    if (status != KJIT_OK) {
        if (diagnostics == 0)
            fprintf(stderr, "kjit bench: %s\n", kjit_last_error(context));
        code = status == KJIT_ERROR_IO ? 2 : 1;
        goto done;
    }
    if (kjit_module_function(module, o.function, &function) != KJIT_OK) {
        fprintf(stderr, "kjit bench: %s: %s\n", o.file, kjit_last_error(context));
        code = 1;
        goto done;
    }
    b.kind = kjit_function_kind_of(function);
    b.signature = kjit_function_signature(function, 0);
    int params = kjit_function_param_count(function);
    if (o.arg_count != params) {
        fprintf(stderr, "kjit bench: %s takes %d argument%s (%s), %d given\n", o.function, params,
                params == 1 ? "" : "s", b.signature, o.arg_count);
        code = 2;
        goto done;
    }
    if (b.kind == KJIT_FUNCTION_KERNEL && !o.has_grid) {
        fprintf(stderr, "kjit bench: %s is a @kernel: give --grid and --block\n", o.function);
        code = 2;
        goto done;
    }
    if (b.kind != KJIT_FUNCTION_KERNEL && o.has_grid) {
        fprintf(stderr, "kjit bench: --grid and --block are for a @kernel; %s is not one\n",
                o.function);
        code = 2;
        goto done;
    }
    if (o.reference && (code = load_reference(&b)) != 0)
        goto done;
    if (b.kind == KJIT_FUNCTION_KERNEL && o.reference && o.reference_arg < 0) {
        int arrays = 0, last = -1;
        for (int i = 0; i < o.arg_count; i++) {
            kjit_dtype dtype;
            int ndim = 0;
            if (kjit_function_param(function, 0, i, &dtype, &ndim) == KJIT_OK && ndim > 0)
                arrays++, last = i;
        }
        if (arrays != 1) {
            fprintf(stderr, "kjit bench: %s has %d array arguments: say which one the "
                            "reference is with --reference N=FILE\n", o.function, arrays);
            code = 2;
            goto done;
        }
        b.reference.arg = last;
    }
    if (b.kind == KJIT_FUNCTION_KERNEL && o.reference && o.reference_arg >= 0) {
        kjit_dtype dtype;
        int ndim = 0;
        if (o.reference_arg >= o.arg_count ||
            kjit_function_param(function, 0, o.reference_arg, &dtype, &ndim) != KJIT_OK || ndim == 0) {
            fprintf(stderr, "kjit bench: --reference %d=FILE: argument %d of %s is not an array\n",
                    o.reference_arg, o.reference_arg, o.function);
            code = 2;
            goto done;
        }
    }

    runs = kj_xcalloc((size_t)run_count, sizeof *runs);
    bool resized_any = false;
    for (int i = 0; i < run_count; i++) {
        runs[i].size = o.size_count ? o.sizes[i] : 0;
        for (int a = 0; a < o.arg_count; a++) {
            char *resized = o.size_count ? kj_cli_resize_generator(o.args[a], runs[i].size) : NULL;
            resized_any = resized_any || resized;
            runs[i].args[a] = resized ? resized : kj_xstrdup(o.args[a]);
        }
    }
    if (o.size_count && !resized_any) {
        fprintf(stderr, "kjit bench: --sizes resizes generator arguments (rand:f32:1e6 ...), "
                        "and none is given\n");
        code = 2;
        goto done;
    }

    describe_cpu(b.cpu_name, sizeof b.cpu_name);
    const char *tmp = getenv("TMPDIR");
    snprintf(b.cache_root, sizeof b.cache_root, "%s/kjit-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(b.cache_root))
        b.cache_root[0] = '\0'; /* then the usual cache: cold may not be cold */

    for (int i = 0; i < run_count && code == 0; i++)
        code = bench_size(&b, function, &runs[i]);
    progress_clear();
    remove_cache_dirs(&b);
    if (code != 0)
        goto done;

    bool table = !(o.json && !o.json_path) && !(o.csv && !o.csv_path);
    if (table) {
        printf("kjit bench: %s %s in %s", o.function, b.signature, o.file);
        for (int a = 0; a < o.arg_count; a++)
            printf(" %s", o.args[a]);
        printf("\n%d timed run%s after %d warm-up; seed %llu", o.repeat, o.repeat == 1 ? "" : "s",
               o.warmup, (unsigned long long)o.seed);
        if (o.has_grid)
            printf("; grid %u,%u,%u block %u,%u,%u", o.grid[0], o.grid[1], o.grid[2], o.block[0],
                   o.block[1], o.block[2]);
        printf("\n");
        for (int i = 0; i < run_count; i++)
            print_size_table(stdout, &b, &runs[i]);
        if (o.size_count)
            print_sweep(stdout, &b, runs);
    }
    if (o.json) {
        char *text = json_report(&b, runs, run_count);
        code = write_text(o.json_path, text);
        free(text);
    }
    if (o.csv && code == 0) {
        char *text = csv_report(&b, runs, run_count);
        code = write_text(o.csv_path, text);
        free(text);
    }
    /* A target that failed or disagrees is a failed bench; one that is not
     * available here is not. */
    for (int i = 0; i < run_count && code == 0; i++)
        for (int k = 0; k < o.target_count; k++) {
            const TargetRun *r = &runs[i].targets[k];
            if (r->state == TARGET_FAILED || r->agreement.verdict == VERDICT_MISMATCH)
                code = 1;
            if (r->state == TARGET_FAILED && !table)
                fprintf(stderr, "kjit bench: %s: %s\n", kjit_target_name(r->target), r->reason);
        }

done:
    if (runs)
        for (int i = 0; i < run_count; i++) {
            for (int a = 0; a < o.arg_count; a++)
                free(runs[i].args[a]);
            for (int k = 0; k < MAX_TARGETS; k++) {
                outputs_free(&runs[i].targets[k]);
                free(runs[i].targets[k].reason);
            }
        }
    free(runs);
    free(b.reference.data);
    kjit_module_free(module);
    kjit_context_destroy(context);
    return code;
}
