/*
 * cli_bench.c: `kjit bench`, the same call compared on several targets.
 *
 * The inputs are made once on the host (the generators and seed of `kjit
 * run`).  Each target then compiles the function twice - in a fresh context
 * with an empty cache (cold), and in another fresh context once the cache holds
 * the code (cached) - runs it once to warm up and --repeat times timed, and
 * hands back its outputs, which are compared with those of the first target
 * that ran (or with a --reference file).  Every run starts from the pristine
 * inputs, so a kernel that updates its arrays in place does the same work each
 * time and its outputs are those of exactly one run.
 *
 * On cuda the arrays live in device memory: the copies in, the run and the
 * copies out are timed apart with CUDA events (kjit_event_*); elsewhere the
 * events read the host clock and nothing is copied.  Bench compiles against a
 * private cache folder that it removes at the end, so that "cold" is cold and
 * the user's cache is left as it was.
 *
 * The figures go to cli_bench_report.c, which prints one table per size, then
 * (with --sizes) the sweep and the size from which each target beats the
 * baseline, or the same data as JSON or CSV for scripts (to stdout, or with
 * =FILE to a file beside the table).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_bench.h"

#define DEFAULT_ULPS 16

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
    "  --shared-bytes N                    dynamic shared memory per block (shared(T))\n"
    "  --seed S                      seed of the rand/randn generators (default 1)\n"
    "  --threads N                   threads of the parallel target\n"
    "  --reference [N=]FILE.npy      compare every target with this array (the\n"
    "                                result, or argument N of a @kernel)\n"
    "  --ulps N                      agreement tolerance for floats (default 16)\n"
    "  --axis N[,N...]  --init V     a @reduce: the axes to reduce (default every\n"
    "                                axis) and the initial value\n"
    "  --check[=race|all]            every target in checked mode (as kjit run --check)\n"
    "  --lineinfo                    .kern line tables in the code (as kjit run --lineinfo)\n"
    "  --json[=FILE]                 the data as JSON (to stdout instead of the table)\n"
    "  --csv[=FILE]                  the data as CSV, one row per target and size\n";


/* ================================================================ options */


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
        if (end == text || v < 1 || v > 1e12 || v != floor(v) || o->size_count == KJ_BENCH_MAX_SIZES)
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
    kj_cli_call_init(&o->call);
    o->ulps = DEFAULT_ULPS;
    o->reference_arg = -1;
    char why[160];
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *value = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(bench_usage, stdout);
            return 0;
        }
        int taken = kj_cli_call_argument(argc, argv, &i, &o->call, why, sizeof why);
        if (taken < 0)
            return usage("%s", why);
        if (taken == 0) {
            if (strcmp(a, "--json") == 0 || strncmp(a, "--json=", 7) == 0) {
                o->json = true;
                o->json_path = a[6] == '=' ? a + 7 : NULL;
            } else if (strcmp(a, "--csv") == 0 || strncmp(a, "--csv=", 6) == 0) {
                o->csv = true;
                o->csv_path = a[5] == '=' ? a + 6 : NULL;
            } else if (KJ_CLI_OPTION("--targets")) {
                if (!value || !parse_targets(value, o))
                    return usage("--targets takes a list of cpu, parallel and cuda, each once "
                                 "(not '%s')", value ? value : "");
            } else if (KJ_CLI_OPTION("--repeat")) {
                if (!parse_count(value, 1, &o->repeat))
                    return usage("--repeat takes a count >= 1");
            } else if (KJ_CLI_OPTION("--warmup")) {
                if (!parse_count(value, 0, &o->warmup))
                    return usage("--warmup takes a count >= 0");
            } else if (KJ_CLI_OPTION("--sizes")) {
                if (!value || !parse_sizes(value, o))
                    return usage("--sizes takes up to %d sizes >= 1 such as 1e3,1e5,1e7 (not '%s')",
                                 KJ_BENCH_MAX_SIZES, value ? value : "");
            } else if (KJ_CLI_OPTION("--threads")) {
                if (!parse_count(value, 1, &o->threads))
                    return usage("--threads takes a count >= 1");
            } else if (KJ_CLI_OPTION("--ulps")) {
                if (!parse_count(value, 0, &o->ulps))
                    return usage("--ulps takes a count >= 0");
            } else if (KJ_CLI_OPTION("--reference")) {
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
        }
    }
    if (!kj_cli_call_complete(&o->call, why, sizeof why))
        return usage("%s", why);
    if (o->json && o->csv && !o->json_path && !o->csv_path)
        return usage("--json and --csv cannot both go to stdout (give one a =FILE)");
    const char *reports[2] = {o->json_path, o->csv_path};
    for (int r = 0; r < 2; r++)
        if (reports[r] && (kj_cli_output_clash(reports[r], &o->call) ||
                           (o->reference && kj_cli_same_file(reports[r], o->reference))))
            return usage("%s is an input of this bench; refusing to overwrite it", reports[r]);
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
    const char *llvm = kjit_host_cpu();
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
    KjCliBuf diagnostics;
} Compiled;

/* Errors are kept for the report; a warning (the disk cache's) goes out now. */
static void collect_diagnostic(void *user, const char *text)
{
    if (kj_cli_is_warning(text))
        fputs(text, stderr);
    else
        kj_cli_printf(user, "%s", text);
}

static void compiled_free(Compiled *c)
{
    kjit_module_free(c->module);
    kjit_context_destroy(c->context);
    kj_cli_buf_free(&c->diagnostics);
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
    options.check = b->o->call.check;
    options.line_info = b->o->call.line_info;
    options.on_diagnostic = collect_diagnostic;
    options.diagnostic_user = &c->diagnostics;
    double t0 = kj_cli_now_ms();
    if (kjit_context_create(&options, &c->context) != KJIT_OK) {
        *error = kj_cli_xstrdup(kjit_last_error(NULL));
        return false;
    }
    kjit_status status = kj_cli_load_module(c->context, b->o->call.file, &c->module);
    if (status == KJIT_OK)
        status = kjit_module_function(c->module, b->o->call.function, &c->function);
    if (status == KJIT_OK && kjit_function_kind_of(c->function) == KJIT_FUNCTION_REDUCE)
        status = kj_cli_reduce_prepare(c->function, inputs->args, inputs->count,
                                       &b->o->call.reduce);
    else if (status == KJIT_OK)
        status = kjit_prepare(c->function, inputs->args, inputs->count, NULL);
    *ms = kj_cli_now_ms() - t0;
    if (status != KJIT_OK) {
        *error = kj_cli_xstrdup(c->diagnostics.data && c->diagnostics.data[0] ? c->diagnostics.data
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
    kjit_cache_memory_clear();
}

static void remove_cache_dirs(Bench *b)
{
    if (!b->cache_root[0])
        return;
    for (int i = 0; i < b->cache_dirs; i++) {
        char dir[300];
        snprintf(dir, sizeof dir, "%s/%d", b->cache_root, i);
        kjit_cache_clear(dir);
        rmdir(dir);
    }
    rmdir(b->cache_root);
}

/* What served the second compile, from the cache's counters around it. */
static const char *cached_from(kjit_cache_counters before, kjit_cache_counters after)
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

/* The context's message about the call that just failed. */
static void fail(Working *w, char **error)
{
    *error = kj_cli_xstrdup(kjit_last_error(w->context));
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
                *error = kj_cli_xstrdup("out of memory for the outputs");
                return false;
            }
        } else if (b->kind != KJIT_FUNCTION_VECTORIZE && b->kind != KJIT_FUNCTION_REDUCE &&
                   b->kind != KJIT_FUNCTION_GUVECTORIZE) {
            w->arrays[i] = *in;
            if (!(w->arrays[i].data = malloc(array_bytes(in) + 1))) {
                *error = kj_cli_xstrdup("out of memory for a copy of the inputs");
                return false;
            }
            w->copied[i] = true;
        } else {
            continue;
        }
        w->args[i] = kjit_arg_array(&w->arrays[i]);
    }
    if (b->kind == KJIT_FUNCTION_VECTORIZE || b->kind == KJIT_FUNCTION_REDUCE ||
        b->kind == KJIT_FUNCTION_GUVECTORIZE) {
        /* The first call, from host arrays, gives the result's shape. */
        kjit_status status =
            b->kind == KJIT_FUNCTION_REDUCE
                ? kj_cli_reduce_call(w->function, inputs->args, inputs->count, &b->o->call.reduce,
                                     NULL, &w->result)
                : kjit_call(w->function, inputs->args, inputs->count, NULL, &w->result);
        if (status != KJIT_OK) {
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
        case KJIT_FUNCTION_KERNEL: {
            kjit_launch_options launch;
            kjit_launch_options_init(&launch);
            launch.dynamic_shared_bytes = b->o->call.shared_bytes;
            status = kjit_launch_ex(w->function, b->o->call.grid, b->o->call.block, w->args, n, &launch);
            break;
        }
        case KJIT_FUNCTION_VECTORIZE:
        case KJIT_FUNCTION_GUVECTORIZE:
            status = kjit_call(w->function, w->args, n,
                               w->result_device.data ? &w->result_device : &w->result, NULL);
            break;
        case KJIT_FUNCTION_PLAIN:
            kjit_array_free(&w->result);
            status = kjit_call(w->function, w->args, n, NULL, &w->result);
            break;
        case KJIT_FUNCTION_REDUCE:
            status = kj_cli_reduce_call(w->function, w->args, n, &b->o->call.reduce,
                                        w->result_device.data ? &w->result_device : &w->result,
                                        NULL);
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
        kjit_array_copy_c_order(&w->result, out->data);
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
            t->reason = kj_cli_xstrdup(reason);
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
    kjit_cache_memory_clear();
    kjit_cache_counters before = kjit_cache_stats();
    ok = compile_on(b, t->target, inputs, &again, &t->compile_ms[1], &error);
    t->cached_from = cached_from(before, kjit_cache_stats());
    if (!ok) {
        t->state = TARGET_FAILED;
        t->reason = error;
        compiled_free(&again);
        return;
    }

    Working w = {.context = again.context, .function = again.function};
    int repeat = b->o->repeat, total = b->o->warmup + repeat;
    double *times = kj_cli_xmalloc(sizeof *times * (size_t)repeat * 3);
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
        error = kj_cli_xstrdup("out of memory for the outputs");
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

/* The same for f16 and bf16, in their own last place. */
static double half_ulp_distance(double x, double r, kjit_dtype d)
{
    uint16_t a = kjit_half_from_double(d, x), c = kjit_half_from_double(d, r);
    int32_t oa = a & 0x8000 ? -(int32_t)(a & 0x7fff) : a, oc = c & 0x8000 ? -(int32_t)(c & 0x7fff) : c;
    return fabs((double)oa - (double)oc);
}

static bool dtype_is_half(kjit_dtype d) { return d == KJIT_F16 || d == KJIT_BF16; }

static bool dtype_is_float(kjit_dtype d)
{
    return d == KJIT_F32 || d == KJIT_F64 || d == KJIT_C64 || d == KJIT_C128 || dtype_is_half(d);
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
                 kjit_shape_text(s1, sizeof s1, got->ndim, got->shape),
                 kjit_shape_text(s2, sizeof s2, ref->ndim, ref->shape));
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
    if (dtype_is_half(got->dtype))
        eps = got->dtype == KJIT_F16 ? 0x1p-10 : 0x1p-7;
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
            double ulp = dtype_is_half(got->dtype) && got->dtype == ref->dtype
                             ? half_ulp_distance(x, r, got->dtype)
                             : ulp_distance(x, r, single);
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

/* ============================================================ one size */

/* Every array contiguous in C order, so that kjit_copy can move it. */
static void make_contiguous(KjCliArgs *args)
{
    for (int i = 0; i < args->count; i++) {
        kjit_array *a = &args->arrays[i];
        if (args->args[i].kind != KJIT_ARG_ARRAY || kjit_array_is_contiguous(a))
            continue;
        void *data = kj_cli_xmalloc(array_bytes(a) + 1);
        kjit_array_copy_c_order(a, data);
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
        /* a reduction's elements are its inputs', and so are a gufunc's */
        if (b->kind != KJIT_FUNCTION_REDUCE && b->kind != KJIT_FUNCTION_GUVECTORIZE)
            s->elements = output_size(out);
    }
    s->bytes = bytes;
}

static int bench_size(Bench *b, kjit_function *function, SizeRun *s)
{
    kjit_function *typing = kj_cli_typing_function(function);
    const BenchOptions *o = b->o;
    char label[64] = "";
    if (s->size)
        snprintf(label, sizeof label, "[size %lld] ", (long long)s->size);
    kj_cli_seed(o->call.seed);
    KjCliArgs *inputs = kj_cli_xcalloc(1, sizeof *inputs);
    int code = kj_cli_make_args("bench", typing, (const char *const *)s->args, o->call.arg_count, inputs);
    /* --init as the reduction's type (the options are the caller's own,
     * const here only so that the runs cannot change them) */
    if (code == 0 && b->kind == KJIT_FUNCTION_REDUCE)
        code = kj_cli_reduce_init("bench", function, inputs->args, inputs->count,
                                  (KjCliReduce *)&o->call.reduce);
    if (code != 0) {
        kj_cli_args_free(inputs);
        free(inputs);
        return code;
    }
    make_contiguous(inputs);
    int signature = 0;
    if (kjit_function_match(typing, inputs->args, inputs->count, &signature) == KJIT_OK)
        b->signature = kjit_function_signature(typing, signature);
    for (int k = 0; k < o->target_count; k++) {
        s->targets[k].target = o->targets[k];
        bench_target(b, inputs, label, &s->targets[k]);
    }
    const TargetRun *base = kj_bench_baseline(s, o->target_count);
    measure_work(b, inputs, base, s);
    for (int k = 0; k < o->target_count; k++)
        compare_target(b, &s->targets[k], base);
    kj_cli_args_free(inputs);
    free(inputs);
    return 0;
}

static int write_text(const char *path, const char *text)
{
    if (!path) {
        fputs(text, stdout);
        return 0;
    }
    /* whole or not at all: the previous report stays until this one is on disk */
    kjit_output_file out;
    char *error = NULL;
    kjit_status status = kjit_output_open(path, &out, &error);
    if (status == KJIT_OK) {
        bool written = fputs(text, out.file) >= 0;
        status = kjit_output_close(&out, written, &error);
        if (!written && status == KJIT_OK) {
            status = KJIT_ERROR_IO;
            error = kj_cli_xstrdup("write failed");
        }
    }
    if (status != KJIT_OK) {
        fprintf(stderr, "kjit bench: cannot write '%s': %s\n", path, error ? error : "");
        free(error);
        return 2;
    }
    return 0;
}

/* ================================================================= main */

static void print_diagnostic(void *user, const char *text)
{
    if (!kj_cli_is_warning(text))
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
    kjit_status status = kjit_npy_read(o->reference, &array, &why);
    if (status != KJIT_OK) {
        fprintf(stderr, "kjit bench: --reference: %s\n", why);
        free(why);
        return status == KJIT_ERROR_IO ? 2 : 1;
    }
    Output *r = &b->reference;
    *r = (Output){.arg = o->reference_arg, .dtype = array.dtype, .ndim = array.ndim};
    memcpy(r->shape, array.shape, sizeof r->shape);
    r->data = kj_cli_xmalloc(array_bytes(&array) + 1);
    kjit_array_copy_c_order(&array, r->data);
    kjit_array_free(&array);
    b->have_reference = true;
    if (b->kind != KJIT_FUNCTION_KERNEL && o->reference_arg >= 0) {
        fprintf(stderr, "kjit bench: --reference N=FILE is for a @kernel's argument N; "
                        "%s's result is compared with FILE alone\n", o->call.function);
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
    kjit_status status = kj_cli_load_module(context, o.call.file, &module);
    if (status != KJIT_OK) {
        if (diagnostics == 0)
            fprintf(stderr, "kjit bench: %s\n", kjit_last_error(context));
        code = status == KJIT_ERROR_IO ? 2 : 1;
        goto done;
    }
    if (kjit_module_function(module, o.call.function, &function) != KJIT_OK) {
        fprintf(stderr, "kjit bench: %s: %s\n", o.call.file, kjit_last_error(context));
        code = 1;
        goto done;
    }
    b.kind = kjit_function_kind_of(function);
    b.signature = kjit_function_signature(function, 0);
    int params = kj_cli_param_count(function);
    if ((o.call.reduce.has_axes || o.call.reduce.has_init) && b.kind != KJIT_FUNCTION_REDUCE) {
        fprintf(stderr, "kjit bench: --axis and --init are for a @reduce function\n");
        code = 2;
        goto done;
    }
    if (o.call.arg_count != params) {
        fprintf(stderr, "kjit bench: %s takes %d argument%s (%s), %d given\n", o.call.function, params,
                params == 1 ? "" : "s", b.signature, o.call.arg_count);
        code = 2;
        goto done;
    }
    if (b.kind == KJIT_FUNCTION_KERNEL && !o.call.has_grid) {
        fprintf(stderr, "kjit bench: %s is a @kernel: give --grid and --block\n", o.call.function);
        code = 2;
        goto done;
    }
    if (b.kind != KJIT_FUNCTION_KERNEL && o.call.has_grid) {
        fprintf(stderr, "kjit bench: --grid and --block are for a @kernel; %s is not one\n",
                o.call.function);
        code = 2;
        goto done;
    }
    if (o.reference && (code = load_reference(&b)) != 0)
        goto done;
    if (b.kind == KJIT_FUNCTION_KERNEL && o.reference && o.reference_arg < 0) {
        int arrays = 0, last = -1;
        for (int i = 0; i < o.call.arg_count; i++) {
            kjit_dtype dtype;
            int ndim = 0;
            if (kjit_function_param(function, 0, i, &dtype, &ndim) == KJIT_OK && ndim > 0)
                arrays++, last = i;
        }
        if (arrays != 1) {
            fprintf(stderr, "kjit bench: %s has %d array arguments: say which one the "
                            "reference is with --reference N=FILE\n", o.call.function, arrays);
            code = 2;
            goto done;
        }
        b.reference.arg = last;
    }
    if (b.kind == KJIT_FUNCTION_KERNEL && o.reference && o.reference_arg >= 0) {
        kjit_dtype dtype;
        int ndim = 0;
        if (o.reference_arg >= o.call.arg_count ||
            kjit_function_param(function, 0, o.reference_arg, &dtype, &ndim) != KJIT_OK || ndim == 0) {
            fprintf(stderr, "kjit bench: --reference %d=FILE: argument %d of %s is not an array\n",
                    o.reference_arg, o.reference_arg, o.call.function);
            code = 2;
            goto done;
        }
    }

    runs = kj_cli_xcalloc((size_t)run_count, sizeof *runs);
    bool resized_any = false;
    for (int i = 0; i < run_count; i++) {
        runs[i].size = o.size_count ? o.sizes[i] : 0;
        for (int a = 0; a < o.call.arg_count; a++) {
            char *resized = o.size_count ? kj_cli_resize_generator(o.call.args[a], runs[i].size) : NULL;
            resized_any = resized_any || resized;
            runs[i].args[a] = resized ? resized : kj_cli_xstrdup(o.call.args[a]);
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
        printf("kjit bench: %s %s in %s", o.call.function, b.signature, o.call.file);
        for (int a = 0; a < o.call.arg_count; a++)
            printf(" %s", o.call.args[a]);
        printf("\n%d timed run%s after %d warm-up; seed %llu", o.repeat, o.repeat == 1 ? "" : "s",
               o.warmup, (unsigned long long)o.call.seed);
        if (o.call.has_grid)
            printf("; grid %u,%u,%u block %u,%u,%u", o.call.grid[0], o.call.grid[1], o.call.grid[2], o.call.block[0],
                   o.call.block[1], o.call.block[2]);
        printf("\n");
        for (int i = 0; i < run_count; i++)
            kj_bench_print_size(stdout, &b, &runs[i]);
        if (o.size_count)
            kj_bench_print_sweep(stdout, &b, runs);
    }
    if (o.json) {
        char *text = kj_bench_json(&b, runs, run_count);
        code = write_text(o.json_path, text);
        free(text);
    }
    if (o.csv && code == 0) {
        char *text = kj_bench_csv(&b, runs, run_count);
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
            for (int a = 0; a < o.call.arg_count; a++)
                free(runs[i].args[a]);
            for (int k = 0; k < KJ_BENCH_MAX_TARGETS; k++) {
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
