/*
 * cli_run.c: `kjit run`, one function of a .kern file run from the command
 * line through the public API (kjit.h), as any host program would.
 *
 * Arguments come from .npy files, literals typed by the signature, or
 * generators (zeros|ones|rand|randn|arange:DTYPE:SHAPE).  A @vectorize or
 * plain function's result is summarised and can be written with -o; a
 * @kernel is launched on --grid x --block and any argument can be written
 * afterwards with --save N=FILE (.npy, or .png for 2-D arrays).  Exit codes:
 * 0 success, 1 errors in the program or the run, 2 usage or I/O errors.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char run_usage[] =
    "usage: kjit run FILE.kern FUNCTION [ARG...] [options]\n"
    "\n"
    "ARG: a .npy file, a number, true/false, or a generator\n"
    "     zeros|ones|rand|randn|arange:DTYPE:SHAPE  (SHAPE: 1000, 1e6, 300x200;\n"
    "     DTYPE may be left out: NAME:SHAPE takes the parameter's element type)\n"
    "\n"
    "options:\n"
    "  --target cpu|parallel|cuda|auto   where to run (default auto: cuda if usable)\n"
    "  -o OUT.npy|OUT.png                write the result of a vectorized function (or of\n"
    "                                    a @guvectorize given its inputs only); for\n"
    "                                    several outputs a file each: -o a.npy,b.npy\n"
    "  --grid X[,Y[,Z]] --block X[,Y[,Z]] launch shape of a @kernel\n"
    "  --shared-bytes N                  dynamic shared memory per block, for a\n"
    "                                    @kernel's shared(T) arrays (default 0)\n"
    "  --save N=OUT.npy|OUT.png          write argument N (from 0) after the run\n"
    "  --axis N[,N...]                   a @reduce: the axes to reduce (default: every\n"
    "                                    axis, a 0-d result; negative from the end)\n"
    "  --init V                          a @reduce: the initial value (without it an\n"
    "                                    empty reduction is an error)\n"
    "  --seed S                          seed of the rand/randn generators (default 1)\n"
    "  --repeat N                        time N runs (each launch runs again on the\n"
    "                                    same arrays; the median is reported)\n"
    "  --lineinfo                        .kern line tables in the code (gdb, perf,\n"
    "                                    Nsight Compute); also KJIT_LINEINFO=1\n"
    "  --check                           checked mode: bad indices, integer division by\n"
    "                                    zero, bad conversions and shifts are reported at\n"
    "                                    their source line (also KJIT_CHECK=1)\n"
    "  --check=race                      data races and diverging barriers of kernels,\n"
    "                                    threads run in one fixed order (cpu, parallel;\n"
    "                                    also KJIT_CHECK=race); --check=all: both\n"
    "  --time-limit S                    stop a run (each, with --repeat) that takes more\n"
    "                                    than S seconds: an error, exit status 1\n"
    "\n"
    "Ctrl-C (SIGINT) during a run stops the running code and exits with status 130.\n"
    "The code is built to be stoppable (kjit_options.cancellable) unless\n"
    "KJIT_CANCELLABLE=0.\n";

static int usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "kjit run: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", run_usage);
    return 2;
}

int kj_cli_run_parse(int argc, char **argv, KjCliRunOptions *o, char *why, size_t why_size)
{
    memset(o, 0, sizeof *o);
    kj_cli_call_init(&o->call);
    o->target = KJIT_TARGET_AUTO;
    o->repeat = 1;
#define REFUSE(...) return (snprintf(why, why_size, __VA_ARGS__), -1)
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *value = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return 1;
        int taken = kj_cli_call_argument(argc, argv, &i, &o->call, why, why_size);
        if (taken < 0)
            return -1;
        if (taken > 0)
            continue;
        if (KJ_CLI_OPTION("--target")) {
            if (!value) REFUSE("--target needs a value");
            if (strcmp(value, "cpu") == 0) o->target = KJIT_TARGET_CPU;
            else if (strcmp(value, "parallel") == 0) o->target = KJIT_TARGET_PARALLEL;
            else if (strcmp(value, "cuda") == 0) o->target = KJIT_TARGET_CUDA;
            else if (strcmp(value, "auto") == 0) o->target = KJIT_TARGET_AUTO;
            else REFUSE("unknown target '%s' (cpu, parallel, cuda or auto)", value);
        } else if (KJ_CLI_OPTION("-o") || KJ_CLI_OPTION("--output")) {
            if (!value) REFUSE("-o needs a file name");
            o->output = value;
        } else if (KJ_CLI_OPTION("--save")) {
            char *end;
            long n = value ? strtol(value, &end, 10) : -1;
            if (!value || end == value || *end != '=' || n < 0 || n >= KJ_CLI_MAX_ARGS ||
                end[1] == '\0')
                REFUSE("--save takes N=FILE (N from 0, an argument), not '%s'", value ? value : "");
            if (o->save_count == KJ_CLI_MAX_SAVES)
                REFUSE("at most %d --save options", KJ_CLI_MAX_SAVES);
            o->save_index[o->save_count] = (int)n;
            o->save_path[o->save_count++] = end + 1;
        } else if (KJ_CLI_OPTION("--time-limit")) {
            char *end = NULL;
            double seconds = value ? strtod(value, &end) : 0;
            if (!value || end == value || *end != '\0' || !(seconds > 0) || seconds >= 1e9)
                REFUSE("--time-limit takes a number of seconds above 0, not '%s'",
                       value ? value : "");
            o->time_limit_s = seconds;
        } else if (KJ_CLI_OPTION("--repeat")) {
            kjit_arg count;
            char *error = NULL;
            if (!value || !kj_cli_parse_number(value, KJIT_I32, &count, &error) ||
                count.value.i < 1 || count.value.i > 1000000) {
                free(error);
                REFUSE("--repeat takes a count from 1 to 1000000, not '%s'", value ? value : "");
            }
            o->repeat = (int)count.value.i;
        } else {
            REFUSE("unknown option '%s'", a);
        }
    }
#undef REFUSE
    if (!kj_cli_call_complete(&o->call, why, why_size))
        return -1;
    return 0;
}

/* kj_cli_run_parse, with --help and the usage message printed: -1 to go on,
 * else the exit code. */
static int parse_options(int argc, char **argv, KjCliRunOptions *o)
{
    char why[160];
    int code = kj_cli_run_parse(argc, argv, o, why, sizeof why);
    if (code == 1) {
        fputs(run_usage, stdout);
        return 0;
    }
    return code < 0 ? usage("%s", why) : -1;
}

/* ---------------------------------------------------------------- summary */

static bool is_signed_int(kjit_dtype d) { return d >= KJIT_I8 && d <= KJIT_I64; }
static bool is_unsigned_int(kjit_dtype d) { return d >= KJIT_U8 && d <= KJIT_U64; }

/* Integers exactly: a double holds only 53 bits (2^53 + 1 would print as 2^53). */
static int64_t load_signed(const void *at, kjit_dtype dtype)
{
    switch (dtype) {
    case KJIT_I8: return *(const int8_t *)at;
    case KJIT_I16: return *(const int16_t *)at;
    case KJIT_I32: return *(const int32_t *)at;
    default: return *(const int64_t *)at;
    }
}

static uint64_t load_unsigned(const void *at, kjit_dtype dtype)
{
    switch (dtype) {
    case KJIT_U8: return *(const uint8_t *)at;
    case KJIT_U16: return *(const uint16_t *)at;
    case KJIT_U32: return *(const uint32_t *)at;
    default: return *(const uint64_t *)at;
    }
}

static void print_value(const void *at, kjit_dtype dtype)
{
    double im;
    double re = kj_cli_load_value(at, dtype, &im);
    if (dtype == KJIT_C64 || dtype == KJIT_C128)
        printf("%.6g%+.6gj", re, im);
    else if (dtype == KJIT_F32 || dtype == KJIT_F64)
        printf("%.7g", re);
    else if (dtype == KJIT_F16 || dtype == KJIT_BF16)
        printf("%.5g", re); /* enough digits to tell neighbouring f16 values apart */
    else if (dtype == KJIT_BOOL)
        printf("%s", re != 0 ? "true" : "false");
    else if (is_signed_int(dtype))
        printf("%lld", (long long)load_signed(at, dtype));
    else
        printf("%llu", (unsigned long long)load_unsigned(at, dtype));
}

/* "min A  max B" of an integer array, exactly. */
static void print_integer_range(const char *flat, int64_t size, kjit_dtype dtype)
{
    size_t elem = kjit_dtype_size(dtype);
    if (is_signed_int(dtype)) {
        int64_t low = INT64_MAX, high = INT64_MIN;
        for (int64_t i = 0; i < size; i++) {
            int64_t v = load_signed(flat + i * (int64_t)elem, dtype);
            low = v < low ? v : low;
            high = v > high ? v : high;
        }
        printf("  min %lld  max %lld", (long long)low, (long long)high);
        return;
    }
    uint64_t low = UINT64_MAX, high = 0;
    for (int64_t i = 0; i < size; i++) {
        uint64_t v = load_unsigned(flat + i * (int64_t)elem, dtype);
        low = v < low ? v : low;
        high = v > high ? v : high;
    }
    printf("  min %llu  max %llu", (unsigned long long)low, (unsigned long long)high);
}

static void summarise(const char *label, const kjit_array *a)
{
    char shape[160];
    kjit_shape_text(shape, sizeof shape, a->ndim, a->shape);
    int64_t size = kjit_array_size(a);
    if (a->ndim == 0) {
        printf("%s: %s ", label, kjit_dtype_name(a->dtype));
        print_value(a->data, a->dtype);
        printf("\n");
        return;
    }
    printf("%s: %s array of shape %s\n", label, kjit_dtype_name(a->dtype), shape);
    if (size == 0)
        return;
    size_t elem = kjit_dtype_size(a->dtype);
    char *flat = malloc((size_t)size * elem);
    if (!flat)
        return;
    kjit_array_copy_c_order(a, flat);
    printf("  first:");
    for (int64_t i = 0; i < size && i < 8; i++) {
        printf(i ? ", " : " ");
        print_value(flat + i * (int64_t)elem, a->dtype);
    }
    printf(size > 8 ? ", ...\n" : "\n");
    bool complex = a->dtype == KJIT_C64 || a->dtype == KJIT_C128;
    double low = INFINITY, high = -INFINITY, sum = 0;
    int64_t nans = 0;
    for (int64_t i = 0; i < size; i++) {
        double im;
        double v = kj_cli_load_value(flat + i * (int64_t)elem, a->dtype, &im);
        if (complex)
            v = hypot(v, im);
        if (isnan(v)) {
            nans++;
            continue;
        }
        low = v < low ? v : low;
        high = v > high ? v : high;
        sum += v;
    }
    int64_t counted = size - nans;
    if (is_signed_int(a->dtype) || is_unsigned_int(a->dtype)) {
        /* min and max exactly; the mean and sum are approximate (doubles) */
        print_integer_range(flat, size, a->dtype);
        printf("  mean %.7g  sum %.7g", sum / (double)size, sum);
    } else {
        printf("  %smin %.7g  max %.7g  mean %.7g  sum %.7g", complex ? "|z|: " : "", low, high,
               counted ? sum / (double)counted : NAN, sum);
    }
    if (nans)
        printf("  (%lld NaN)", (long long)nans);
    printf("\n");
    free(flat);
}

static int write_array(const char *path, const kjit_array *a)
{
    char *error = NULL;
    if (kj_cli_ends_with(path, ".png")) {
        if (!kj_png_write(path, a, &error)) {
            fprintf(stderr, "kjit run: %s\n", error);
            free(error);
            return 2;
        }
    } else if (kjit_npy_write(path, a, &error) != KJIT_OK) {
        fprintf(stderr, "kjit run: %s\n", error);
        free(error);
        return 2;
    }
    printf("wrote %s\n", path);
    return 0;
}

/* ------------------------------------------------------------------- run */

/* The most outputs -o names (a @vectorize of several: KJ_MAX_VEC_OUTPUTS). */
#define MAX_OUTPUTS 8

static int diagnostics_printed;

static void print_diagnostic(void *user, const char *text)
{
    if (!kj_cli_is_warning(text))
        diagnostics_printed++;
    fputs(text, stderr);
    size_t n = strlen(text);
    if (n && text[n - 1] != '\n')
        fputc('\n', stderr);
}

static int exit_code(kjit_status status)
{
    return status == KJIT_ERROR_IO ? 2 : 1;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int kj_cli_run(int argc, char **argv)
{
    KjCliRunOptions o;
    int code = parse_options(argc, argv, &o);
    if (code >= 0)
        return code;
    /* -o a.npy,b.npy: a file per output of a @vectorize of several */
    char *out_list = o.output ? strdup(o.output) : NULL;
    const char *out_paths[MAX_OUTPUTS + 1];
    int out_count = 0;
    for (char *save = NULL, *p = out_list ? strtok_r(out_list, ",", &save) : NULL;
         p && out_count <= MAX_OUTPUTS; p = strtok_r(NULL, ",", &save))
        out_paths[out_count++] = p;
    if (o.output && (out_count == 0 || out_count > MAX_OUTPUTS)) {
        fprintf(stderr, "kjit run: -o %s: name one file, or one per output (at most %d)\n",
                o.output, MAX_OUTPUTS);
        free(out_list);
        return 2;
    }
    /* Before anything runs: an output must not replace what the run reads. */
    for (int s = -out_count; s < o.save_count; s++) {
        const char *path = s < 0 ? out_paths[-s - 1] : o.save_path[s];
        const char *input = path ? kj_cli_output_clash(path, &o.call) : NULL;
        if (input) {
            fprintf(stderr, "kjit run: %s %s is the file %s, an input of this run; refusing to "
                            "overwrite it\n", s < 0 ? "-o" : "--save", path, input);
            free(out_list);
            return 2;
        }
    }
    kj_cli_seed(o.call.seed);

    kjit_options options;
    kjit_options_init(&options);
    options.target = o.target;
    options.check = o.call.check;
    options.on_diagnostic = print_diagnostic;
    /* Ctrl-C must stop any kernel, one that never ends included */
    const char *cancellable = getenv("KJIT_CANCELLABLE");
    options.cancellable = !(cancellable && strcmp(cancellable, "0") == 0);
    options.time_limit_s = o.time_limit_s;
    options.cancel_signal = SIGINT; /* a Ctrl-C during a run cancels it */
    if (o.call.line_info)
        options.line_info = 1;
    kjit_context *context = NULL;
    kjit_status status = kjit_context_create(&options, &context);
    if (status != KJIT_OK) {
        fprintf(stderr, "kjit run: %s\n", kjit_last_error(NULL));
        return 1;
    }
    kjit_module *module = NULL;
    kjit_function *function = NULL;
    static KjCliArgs made;
    kjit_arg *args = made.args;
    kjit_array *arrays = made.arrays;
    kjit_array result = {0};
    kjit_array results[MAX_OUTPUTS] = {{0}}; /* a @vectorize of several outputs */
    int outputs = 1;
    double times[1024];
    int timed = 0;
    code = 0;

    double t0 = kj_cli_now_ms();
    status = kj_cli_load_module(context, o.call.file, &module);
    double t_front = kj_cli_now_ms() - t0;
    if (status != KJIT_OK) {
        /* Diagnostics were printed as they came. */
        if (diagnostics_printed == 0)
            fprintf(stderr, "kjit run: %s\n", kjit_last_error(context));
        code = exit_code(status);
        goto done;
    }
    status = kjit_module_function(module, o.call.function, &function);
    if (status != KJIT_OK) {
        fprintf(stderr, "kjit run: %s: %s\n", o.call.file, kjit_last_error(context));
        code = 1;
        goto done;
    }
    kjit_function_kind kind = kjit_function_kind_of(function);
    int params = kj_cli_param_count(function);
    if ((o.call.reduce.has_axes || o.call.reduce.has_init) && kind != KJIT_FUNCTION_REDUCE) {
        fprintf(stderr, "kjit run: --axis and --init are for a @reduce function\n");
        code = 2;
        goto done;
    }
    /* A @guvectorize takes its inputs, or its inputs and outputs. */
    if (kind == KJIT_FUNCTION_GUVECTORIZE && o.call.arg_count == kjit_function_param_count(function))
        params = o.call.arg_count;
    if (o.call.arg_count != params) {
        fprintf(stderr, "kjit run: %s takes %d argument%s (%s), %d given\n", o.call.function, params,
                params == 1 ? "" : "s", kjit_function_signature(function, 0), o.call.arg_count);
        code = 2;
        goto done;
    }
    outputs = kind == KJIT_FUNCTION_VECTORIZE ? kjit_function_output_count(function) : 1;
    if (o.output && out_count != 1 && out_count != outputs) {
        fprintf(stderr, "kjit run: -o names %d files, but %s has %d output%s\n", out_count,
                o.call.function, outputs, outputs == 1 ? "" : "s");
        code = 2;
        goto done;
    }
    if (o.output && outputs > 1 && out_count != outputs) {
        fprintf(stderr, "kjit run: %s has %d outputs: name a file for each, -o %s\n",
                o.call.function, outputs, outputs == 2 ? "a.npy,b.npy" : "a.npy,b.npy,...");
        code = 2;
        goto done;
    }
    if (kind == KJIT_FUNCTION_KERNEL && !o.call.has_grid) {
        fprintf(stderr, "kjit run: %s is a @kernel: give --grid and --block\n", o.call.function);
        code = 2;
        goto done;
    }

    if ((code = kj_cli_make_args("run", kj_cli_typing_function(function), o.call.args, o.call.arg_count, &made)) != 0)
        goto done;
    if ((code = kj_cli_reduce_init("run", function, args, o.call.arg_count, &o.call.reduce)) != 0)
        goto done;

    /* Code generation, timed apart from the runs. */
    t0 = kj_cli_now_ms();
    if (kind == KJIT_FUNCTION_REDUCE)
        status = kj_cli_reduce_prepare(function, args, o.call.arg_count, &o.call.reduce);
    else
        status = kjit_prepare(function, args, o.call.arg_count, NULL);
    double t_codegen = kj_cli_now_ms() - t0;
    if (status != KJIT_OK) {
        fprintf(stderr, "kjit run: %s\n", kjit_last_error(context));
        code = 1;
        goto done;
    }
    for (int r = 0; r < o.repeat; r++) {
        t0 = kj_cli_now_ms();
        if (kind == KJIT_FUNCTION_KERNEL) {
            kjit_launch_options launch;
            kjit_launch_options_init(&launch);
            launch.dynamic_shared_bytes = o.call.shared_bytes;
            status = kjit_launch_ex(function, o.call.grid, o.call.block, args, o.call.arg_count, &launch);
        }
        else if (outputs > 1 && results[0].data) {
            /* again into the outputs of the first run, given after the inputs */
            kjit_arg all[KJ_CLI_MAX_ARGS + MAX_OUTPUTS];
            memcpy(all, args, sizeof *args * (size_t)o.call.arg_count);
            for (int k = 0; k < outputs; k++)
                all[o.call.arg_count + k] = kjit_arg_array(&results[k]);
            status = kjit_call(function, all, o.call.arg_count + outputs, NULL, NULL);
        } else if (outputs > 1)
            status = kjit_call_outputs(function, args, o.call.arg_count, results, outputs);
        else if (kind == KJIT_FUNCTION_REDUCE) {
            kjit_array_free(&result);
            status = kj_cli_reduce_call(function, args, o.call.arg_count, &o.call.reduce, NULL,
                                        &result);
        } else if ((kind == KJIT_FUNCTION_VECTORIZE || kind == KJIT_FUNCTION_GUVECTORIZE) &&
                   r > 0 && result.data)
            status = kjit_call(function, args, o.call.arg_count, &result, NULL);
        else
            status = kjit_call(function, args, o.call.arg_count, NULL, &result);
        if (status == KJIT_OK)
            status = kjit_synchronize(context);
        if (timed < 1024)
            times[timed++] = kj_cli_now_ms() - t0;
        if (status == KJIT_ERROR_CANCELLED) { /* only SIGINT cancels here */
            fprintf(stderr, "kjit run: interrupted (Ctrl-C): %s was stopped before it finished; "
                    "nothing was written\n", o.call.function);
            code = 130;
            goto done;
        }
        if (status != KJIT_OK) {
            fprintf(stderr, "kjit run: %s\n", kjit_last_error(context));
            code = 1;
            goto done;
        }
        if (kind == KJIT_FUNCTION_PLAIN && r + 1 < o.repeat)
            kjit_array_free(&result);
    }

    int signature = 0;
    kjit_function_match(function, args, o.call.arg_count, &signature);
    for (int s = 0; kind == KJIT_FUNCTION_REDUCE && s < kjit_function_signature_count(function); s++) {
        kjit_dtype dtype;
        if (kjit_function_result(function, s, &dtype) == KJIT_OK && dtype == result.dtype)
            signature = s;
    }
    printf("%s %s on %s\n", o.call.function, kjit_function_signature(function, signature),
           kjit_target_name(kjit_context_target(context)));
    if (kind == KJIT_FUNCTION_KERNEL || (kind == KJIT_FUNCTION_GUVECTORIZE && !result.data)) {
        for (int i = 0; i < o.call.arg_count; i++)
            if (args[i].kind == KJIT_ARG_ARRAY) {
                char label[32];
                snprintf(label, sizeof label, "argument %d", i);
                summarise(label, &arrays[i]);
            }
    } else if (outputs > 1) {
        for (int k = 0; k < outputs; k++) {
            char label[32];
            snprintf(label, sizeof label, "result %d", k);
            summarise(label, &results[k]);
        }
    } else if (result.data) {
        summarise("result", &result);
    } else {
        printf("result: none\n");
    }
    qsort(times, (size_t)timed, sizeof times[0], compare_double);
    printf("compile: %.2f ms (front end %.2f ms, code generation %.2f ms)\n",
           t_front + t_codegen, t_front, t_codegen);
    if (timed == 1)
        printf("run: %.3f ms\n", times[0]);
    else
        printf("run: %.3f ms median of %d (min %.3f ms, max %.3f ms)\n", times[timed / 2], timed,
               times[0], times[timed - 1]);

    for (int k = 0; o.output && outputs > 1 && k < outputs; k++)
        if ((code = write_array(out_paths[k], &results[k])) != 0)
            goto done;
    if (o.output && outputs == 1) {
        if (!result.data) {
            fprintf(stderr, "kjit run: -o: %s has no result array to write (use --save N=FILE)\n",
                    o.call.function);
            code = 2;
            goto done;
        }
        if ((code = write_array(o.output, &result)) != 0)
            goto done;
    }
    for (int s = 0; s < o.save_count; s++) {
        int n = o.save_index[s];
        if (n >= o.call.arg_count || args[n].kind != KJIT_ARG_ARRAY) {
            fprintf(stderr, "kjit run: --save %d: argument %d is not an array\n", n, n);
            code = 2;
            goto done;
        }
        if ((code = write_array(o.save_path[s], &arrays[n])) != 0)
            goto done;
    }

done:
    kjit_array_free(&result);
    for (int k = 0; k < MAX_OUTPUTS; k++)
        kjit_array_free(&results[k]);
    free(out_list);
    kj_cli_args_free(&made);
    kjit_module_free(module);
    kjit_context_destroy(context);
    return code;
}
