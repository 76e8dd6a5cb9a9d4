/*
 * aot_driver.c: runs every function of a module with inputs made from its
 * signatures and prints a hash of each result, so that two runs can be
 * compared line by line (tests/aot/aot.sh): a module from a library
 * (--lib, built against kjit.h alone and linked with libkjit-rt only: no
 * LLVM on its include or library path) against the same module compiled by
 * the JIT (--kern, the same source linked with libkjit).
 *
 *   aot_driver --lib LIB|--kern FILE|--linked --target cpu|parallel|cuda
 *              [--dump DIR] [--launch NAME GX,GY,GZ BX,BY,BZ ARG... ;]...
 *
 * --linked: the library linked into the program (kjit build
 * --emit=staticlib), compiled with -DAOT_LOAD=NAME_kjit_load.
 * --dump DIR also writes each result as DIR/NAME.npy, NAME what its line
 * says with '_' for spaces (bf16 as its bits, NAME.bf16.npy), for
 * tests/gpu/aot.sh to compare cuda with cpu within tolerances.  On cuda the
 * arrays are the host's (staged by kjit), and each @vectorize signature also
 * runs on device arrays through kjit_call_async on a stream of its own.
 *
 * @vectorize functions: each signature with 1-d arrays of 1000 elements,
 * with the first input a scalar (when it has two or more), and with the
 * first input 2-d (17 x 33) against rows of 33 (a strided broadcast).
 * Plain functions of scalars: once.  Kernels: each --launch, its ARGs
 * "f64:0.5", "i64:7" or "arr:DTYPE:D0[,D1...]" (filled with a pattern),
 * every array hashed after it.  @guvectorize functions: each signature
 * over loops of (4) and (3, 4), every core dimension 5.  @reduce
 * functions: see run_reduce.  Exit status 1 when a call fails.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "kjit.h"

#ifdef AOT_LOAD
kjit_status AOT_LOAD(kjit_context *context, kjit_module **module);
#endif

static uint64_t fnv(const void *data, size_t n, uint64_t h)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* element i of a pattern: finite, non-zero integers, halves in range */
static void fill(kjit_array *a, int salt)
{
    int64_t n = 1;
    for (int d = 0; d < a->ndim; d++)
        n *= a->shape[d];
    size_t size = kjit_dtype_size(a->dtype);
    unsigned char *p = a->data;
    for (int64_t i = 0; i < n; i++, p += size) {
        double x = sin((double)i * 0.37 + salt) * 3.0;
        int64_t k = (i * 7 + salt * 3) % 97 + 1;
        switch (a->dtype) {
        case KJIT_BOOL: *(uint8_t *)p = (uint8_t)(i & 1); break;
        case KJIT_I8: *(int8_t *)p = (int8_t)k; break;
        case KJIT_U8: *(uint8_t *)p = (uint8_t)k; break;
        case KJIT_I16: *(int16_t *)p = (int16_t)k; break;
        case KJIT_U16: *(uint16_t *)p = (uint16_t)k; break;
        case KJIT_I32: *(int32_t *)p = (int32_t)k; break;
        case KJIT_U32: *(uint32_t *)p = (uint32_t)k; break;
        case KJIT_I64: *(int64_t *)p = k; break;
        case KJIT_U64: *(uint64_t *)p = (uint64_t)k; break;
        case KJIT_F32: *(float *)p = (float)x; break;
        case KJIT_F64: *(double *)p = x; break;
        case KJIT_C64: ((float *)p)[0] = (float)x, ((float *)p)[1] = (float)(x * 0.5); break;
        case KJIT_C128: ((double *)p)[0] = x, ((double *)p)[1] = x * 0.5; break;
        case KJIT_F16: case KJIT_BF16:
            *(uint16_t *)p = kjit_half_from_double(a->dtype, x);
            break;
        default: break;
        }
    }
}

static kjit_arg scalar_arg(kjit_dtype dtype, int salt)
{
    kjit_arg arg = {.kind = KJIT_ARG_SCALAR, .dtype = dtype};
    if (dtype == KJIT_F32 || dtype == KJIT_F64 || dtype == KJIT_F16 || dtype == KJIT_BF16)
        arg.value.f = 0.75 + salt * 0.25;
    else if (dtype == KJIT_C64 || dtype == KJIT_C128)
        arg.value.c[0] = 0.5, arg.value.c[1] = -0.25 * salt;
    else if (dtype == KJIT_BOOL)
        arg.value.i = 1;
    else if (dtype >= KJIT_U8 && dtype <= KJIT_U64)
        arg.value.u = 3 + (uint64_t)salt;
    else
        arg.value.i = 3 + salt;
    return arg;
}

static kjit_array make(kjit_dtype dtype, int ndim, const int64_t *shape, int salt)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    void *data = calloc((size_t)(n ? n : 1), kjit_dtype_size(dtype) ? kjit_dtype_size(dtype) : 1);
    kjit_array a = kjit_array_make(data, dtype, ndim, shape);
    fill(&a, salt);
    return a;
}

static const char *dump_dir;

/* a[] as a .npy file (format 1.0) in dump_dir, when --dump */
static void dump(const char *what, const kjit_array *a)
{
    static const char *const descr[KJIT_DTYPE_COUNT] = {
        [KJIT_BOOL] = "|b1", [KJIT_I8] = "|i1", [KJIT_U8] = "|u1", [KJIT_I16] = "<i2",
        [KJIT_U16] = "<u2", [KJIT_I32] = "<i4", [KJIT_U32] = "<u4", [KJIT_I64] = "<i8",
        [KJIT_U64] = "<u8", [KJIT_F16] = "<f2", [KJIT_BF16] = "<u2", [KJIT_F32] = "<f4",
        [KJIT_F64] = "<f8", [KJIT_C64] = "<c8", [KJIT_C128] = "<c16"};
    if (!dump_dir)
        return;
    char path[4096], header[512], shape[256] = "", name[256];
    snprintf(name, sizeof name, "%s", what);
    for (char *c = name; *c; c++)
        if (*c == ' ' || *c == '/')
            *c = '_';
    snprintf(path, sizeof path, "%s/%s%s.npy", dump_dir, name,
             a->dtype == KJIT_BF16 ? ".bf16" : "");
    int64_t n = 1;
    for (int d = 0; d < a->ndim; d++) {
        n *= a->shape[d];
        size_t used = strlen(shape);
        snprintf(shape + used, sizeof shape - used, "%lld,", (long long)a->shape[d]);
    }
    int len = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, "
                       "'shape': (%s), }", descr[a->dtype] ? descr[a->dtype] : "|u1", shape);
    while ((len + 11) % 64 != 0)
        header[len++] = ' ';
    header[len++] = '\n';
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "aot_driver: cannot write %s\n", path);
        exit(2);
    }
    unsigned char head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len & 0xff),
                              (unsigned char)(len >> 8)};
    fwrite(head, 1, 10, f);
    fwrite(header, 1, (size_t)len, f);
    fwrite(a->data, kjit_dtype_size(a->dtype), (size_t)n, f);
    fclose(f);
}

static void print_hash(const char *what, const kjit_array *a)
{
    dump(what, a);
    int64_t n = 1;
    for (int d = 0; d < a->ndim; d++)
        n *= a->shape[d];
    uint64_t h = fnv(a->data, (size_t)n * kjit_dtype_size(a->dtype), 1469598103934665603ull);
    printf("%s: %s", what, kjit_dtype_name(a->dtype));
    for (int d = 0; d < a->ndim; d++)
        printf("%s%lld", d ? "x" : " ", (long long)a->shape[d]);
    printf(" %016llx\n", (unsigned long long)h);
}

static int failures;

static void report(kjit_context *context, const char *what, kjit_status status)
{
    printf("%s: FAILED %s: %s\n", what, kjit_status_name(status), kjit_last_error(context));
    failures++;
}

/* On cuda: each signature over device arrays of 1000 elements, through
 * kjit_call_async on a stream of its own, the result copied back. */
static void run_vectorize_stream(kjit_context *context, kjit_function *f, int sig, int nargs,
                                 const kjit_dtype *types)
{
    kjit_stream *stream = NULL;
    kjit_array host[17], device[17];
    kjit_arg args[16];
    int64_t n[1] = {1000};
    kjit_dtype out_type;
    char what[256];
    snprintf(what, sizeof what, "%s sig %d stream", kjit_function_name(f), sig);
    kjit_status status = kjit_function_result(f, sig, &out_type);
    if (status == KJIT_OK)
        status = kjit_stream_create(context, &stream);
    int made = 0;
    for (int i = 0; i <= nargs && status == KJIT_OK; i++, made++) {
        kjit_dtype t = i < nargs ? types[i] : out_type;
        host[i] = make(t, 1, n, i);
        status = kjit_device_alloc(context, t, 1, n, &device[i]);
        if (status == KJIT_OK && i < nargs)
            status = kjit_copy(context, &device[i], &host[i], stream);
        if (i < nargs)
            args[i] = kjit_arg_array(&device[i]);
    }
    if (status == KJIT_OK)
        status = kjit_call_async(f, args, nargs, &device[nargs], stream);
    if (status == KJIT_OK)
        status = kjit_copy(context, &host[nargs], &device[nargs], stream);
    if (status == KJIT_OK)
        status = kjit_stream_synchronize(stream);
    if (status != KJIT_OK)
        report(context, what, status);
    else
        print_hash(what, &host[nargs]);
    for (int i = 0; i < made; i++) {
        free(host[i].data);
        kjit_device_free(context, &device[i]);
    }
    kjit_stream_destroy(stream);
}

static void run_vectorize(kjit_context *context, kjit_function *f)
{
    const char *name = kjit_function_name(f);
    int nargs = kjit_function_param_count(f);
    for (int sig = 0; sig < kjit_function_signature_count(f); sig++) {
        kjit_dtype types[16];
        for (int i = 0; i < nargs && i < 16; i++)
            kjit_function_param(f, sig, i, &types[i], NULL);
        for (int form = 0; form < 3; form++) {
            if (form == 1 && nargs < 2)
                continue;
            kjit_array arrays[16];
            kjit_arg args[16];
            for (int i = 0; i < nargs && i < 16; i++) {
                int64_t flat[1] = {1000}, wide[2] = {17, 33}, row[1] = {33};
                if (form == 1 && i == 0) {
                    args[i] = scalar_arg(types[i], i);
                    arrays[i].data = NULL;
                    continue;
                }
                arrays[i] = form == 2 ? (i == 0 ? make(types[i], 2, wide, i) : make(types[i], 1, row, i))
                                      : make(types[i], 1, flat, i);
                args[i] = kjit_arg_array(&arrays[i]);
            }
            /* a function of several outputs: each output's hash */
            int outputs = kjit_function_output_count(f);
            kjit_array results[8] = {{0}};
            char what[256];
            snprintf(what, sizeof what, "%s sig %d form %d", name, sig, form);
            kjit_status status = outputs > 1 && outputs <= 8
                                     ? kjit_call_outputs(f, args, nargs, results, outputs)
                                     : kjit_call(f, args, nargs, NULL, &results[0]);
            if (status != KJIT_OK)
                report(context, what, status);
            for (int k = 0; status == KJIT_OK && k < (outputs > 1 ? outputs : 1); k++) {
                char each[300];
                snprintf(each, sizeof each, "%s output %d", what, k);
                print_hash(each, &results[k]);
            }
            for (int k = 0; k < 8; k++)
                kjit_array_free(&results[k]);
            for (int i = 0; i < nargs && i < 16; i++)
                if (args[i].kind == KJIT_ARG_ARRAY)
                    free(arrays[i].data);
        }
        if (kjit_context_target(context) == KJIT_TARGET_CUDA && nargs < 16)
            run_vectorize_stream(context, f, sig, nargs, types);
    }
}

/* Every core dimension 5, the loop (4) then (3, 4) */
static void run_gufunc(kjit_context *context, kjit_function *f)
{
    const char *name = kjit_function_name(f);
    int nin = kjit_function_layout_inputs(f);
    for (int sig = 0; sig < kjit_function_signature_count(f); sig++) {
        for (int form = 0; form < 2; form++) {
            kjit_array arrays[16];
            kjit_arg args[16];
            for (int q = 0; q < nin && q < 16; q++) {
                kjit_dtype dtype;
                int core = 0;
                kjit_function_param(f, sig, q, &dtype, &core);
                int64_t shape[8];
                int ndim = 0;
                if (form == 1)
                    shape[ndim++] = 3;
                shape[ndim++] = 4;
                for (int d = 0; d < core && ndim < 8; d++)
                    shape[ndim++] = 5;
                arrays[q] = make(dtype, ndim, shape, q);
                args[q] = kjit_arg_array(&arrays[q]);
            }
            kjit_array result = {0};
            char what[256];
            snprintf(what, sizeof what, "%s sig %d form %d", name, sig, form);
            kjit_status status = kjit_call(f, args, nin, NULL, &result);
            if (status != KJIT_OK)
                report(context, what, status);
            else
                print_hash(what, &result);
            kjit_array_free(&result);
            for (int q = 0; q < nin && q < 16; q++)
                free(arrays[q].data);
        }
    }
}

/* Each signature (of the map, for a fused one): a 1-d array of 5000 over
 * everything, and a 2-d one of 40 x 70 over axis 0, axis 1, and both. */
static void run_reduce(kjit_context *context, kjit_function *f)
{
    const char *name = kjit_function_name(f);
    kjit_function *map = kjit_function_map(f);
    kjit_function *typed = map ? map : f;
    int nin = map ? kjit_function_param_count(map) : 1;
    for (int sig = 0; sig < kjit_function_signature_count(typed); sig++) {
        for (int form = 0; form < 4; form++) {
            kjit_array arrays[16];
            kjit_arg args[16];
            for (int q = 0; q < nin && q < 16; q++) {
                kjit_dtype dtype;
                kjit_function_param(typed, sig, q, &dtype, NULL);
                int64_t flat[1] = {5000}, wide[2] = {40, 70};
                arrays[q] = form == 0 ? make(dtype, 1, flat, q) : make(dtype, 2, wide, q);
                args[q] = kjit_arg_array(&arrays[q]);
            }
            int axes[2] = {0, 1};
            const int *ax = form == 0 ? NULL : form == 1 ? &axes[0] : form == 2 ? &axes[1] : axes;
            int naxes = form == 0 ? 0 : form == 3 ? 2 : 1;
            kjit_array result = {0};
            char what[256];
            snprintf(what, sizeof what, "%s sig %d form %d", name, sig, form);
            kjit_status status = kjit_reduce(f, args, nin, ax, naxes, NULL, NULL, &result);
            if (status != KJIT_OK)
                report(context, what, status);
            else
                print_hash(what, &result);
            kjit_array_free(&result);
            for (int q = 0; q < nin && q < 16; q++)
                free(arrays[q].data);
        }
    }
}

static void run_plain(kjit_context *context, kjit_function *f)
{
    int nargs = kjit_function_param_count(f);
    kjit_arg args[16];
    for (int i = 0; i < nargs && i < 16; i++) {
        kjit_dtype dtype;
        int ndim = 0;
        kjit_function_param(f, 0, i, &dtype, &ndim);
        if (ndim > 0) {
            printf("%s: skipped (array parameters)\n", kjit_function_name(f));
            return;
        }
        args[i] = scalar_arg(dtype, i);
    }
    kjit_array result = {0};
    kjit_status status = kjit_call(f, args, nargs, NULL, &result);
    if (status != KJIT_OK) /* a device function is refused the same way by both */
        printf("%s: refused %s\n", kjit_function_name(f), kjit_status_name(status));
    else
        print_hash(kjit_function_name(f), &result);
    kjit_array_free(&result);
}

static bool parse_dims(const char *text, uint32_t dims[3])
{
    dims[0] = dims[1] = dims[2] = 1;
    return sscanf(text, "%u,%u,%u", &dims[0], &dims[1], &dims[2]) >= 1;
}

/* --launch NAME G B ARG... ;  argv[*i] is NAME; leaves *i at the ";" */
static void run_launch(kjit_context *context, kjit_module *module, char **argv, int argc, int *i)
{
    const char *name = argv[(*i)++];
    uint32_t grid[3], block[3];
    if (*i + 1 >= argc || !parse_dims(argv[*i], grid) || !parse_dims(argv[*i + 1], block)) {
        fprintf(stderr, "aot_driver: --launch %s needs GRID and BLOCK\n", name);
        exit(2);
    }
    *i += 2;
    kjit_arg args[32];
    kjit_array arrays[32];
    int nargs = 0;
    for (; *i < argc && strcmp(argv[*i], ";") != 0 && nargs < 32; (*i)++, nargs++) {
        char type[16];
        const char *a = argv[*i];
        arrays[nargs].data = NULL;
        if (strncmp(a, "arr:", 4) == 0) {
            const char *colon = strchr(a + 4, ':');
            snprintf(type, sizeof type, "%.*s", (int)(colon - a - 4), a + 4);
            int64_t shape[8];
            int ndim = 0;
            for (const char *p = colon + 1; *p && ndim < 8; ndim++) {
                shape[ndim] = strtoll(p, (char **)&p, 10);
                if (*p == ',')
                    p++;
            }
            kjit_dtype dtype = KJIT_F64;
            for (int d = 0; d < KJIT_DTYPE_COUNT; d++)
                if (strcmp(kjit_dtype_name((kjit_dtype)d), type) == 0)
                    dtype = (kjit_dtype)d;
            arrays[nargs] = make(dtype, ndim, shape, nargs);
            args[nargs] = kjit_arg_array(&arrays[nargs]);
        } else if (strncmp(a, "f64:", 4) == 0) {
            args[nargs] = kjit_arg_f64(atof(a + 4));
        } else if (strncmp(a, "i64:", 4) == 0) {
            args[nargs] = kjit_arg_i64(atoll(a + 4));
        } else {
            fprintf(stderr, "aot_driver: unknown launch argument '%s'\n", a);
            exit(2);
        }
    }
    kjit_function *f = NULL;
    char what[256];
    snprintf(what, sizeof what, "launch %s", name);
    kjit_status status = kjit_module_function(module, name, &f);
    if (status == KJIT_OK)
        status = kjit_launch(f, grid, block, args, nargs, NULL);
    if (status != KJIT_OK)
        report(context, what, status);
    for (int k = 0; k < nargs; k++)
        if (arrays[k].data) {
            char arg[300];
            snprintf(arg, sizeof arg, "%s arg %d", what, k);
            if (status == KJIT_OK)
                print_hash(arg, &arrays[k]);
            free(arrays[k].data);
        }
}

int main(int argc, char **argv)
{
    const char *lib = NULL, *kern = NULL, *target = "cpu";
    bool linked = false;
    int launches = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--lib") == 0 && i + 1 < argc) lib = argv[++i];
        else if (strcmp(argv[i], "--linked") == 0) linked = true;
        else if (strcmp(argv[i], "--kern") == 0 && i + 1 < argc) kern = argv[++i];
        else if (strcmp(argv[i], "--target") == 0 && i + 1 < argc) target = argv[++i];
        else if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc) dump_dir = argv[++i];
        else if (strcmp(argv[i], "--launch") == 0) {
            launches = i + 1;
            break;
        } else {
            fprintf(stderr, "usage: aot_driver --lib LIB|--kern FILE [--target T] [--dump DIR] "
                            "[--launch ...]\n");
            return 2;
        }
    }
    kjit_options options;
    kjit_options_init(&options);
    options.target = strcmp(target, "parallel") == 0 ? KJIT_TARGET_PARALLEL
                     : strcmp(target, "cuda") == 0   ? KJIT_TARGET_CUDA
                                                     : KJIT_TARGET_CPU;
    options.num_threads = 4;
    kjit_context *context = NULL;
    if (kjit_context_create(&options, &context) != KJIT_OK) {
        fprintf(stderr, "aot_driver: %s\n", kjit_last_error(NULL));
        return 1;
    }
    kjit_module *module = NULL;
    kjit_status status;
    if (linked) {
#ifdef AOT_LOAD
        status = AOT_LOAD(context, &module);
        lib = "the linked library";
#else
        fprintf(stderr, "aot_driver: built without -DAOT_LOAD, so with no linked library\n");
        return 2;
#endif
    } else {
        status = lib ? kjit_module_load_library(context, lib, &module)
                     : kjit_compile_file(context, kern ? kern : "", &module);
    }
    if (status != KJIT_OK) {
        fprintf(stderr, "aot_driver: %s\n", kjit_last_error(context));
        kjit_context_destroy(context);
        return 3;
    }
    if (lib)
        fprintf(stderr, "aot_driver: %s runs its %s code%s%s\n", lib,
                kjit_module_library_level(module), kjit_module_library_cuda(module) ? ", on cuda its " : "",
                kjit_module_library_cuda(module) ? kjit_module_library_cuda(module) : "");
    for (int i = 0; i < kjit_module_function_count(module); i++) {
        kjit_function *f = NULL;
        kjit_module_function(module, kjit_module_function_name(module, i), &f);
        switch (kjit_function_kind_of(f)) {
        case KJIT_FUNCTION_VECTORIZE: run_vectorize(context, f); break;
        case KJIT_FUNCTION_PLAIN: run_plain(context, f); break;
        case KJIT_FUNCTION_KERNEL: break; /* --launch */
        case KJIT_FUNCTION_GUVECTORIZE: run_gufunc(context, f); break;
        case KJIT_FUNCTION_REDUCE: run_reduce(context, f); break;
        default: printf("%s: skipped (not in libraries yet)\n", kjit_function_name(f)); break;
        }
    }
    for (int i = launches; launches && i < argc; i++) {
        if (strcmp(argv[i], "--launch") == 0)
            continue;
        run_launch(context, module, argv, argc, &i);
    }
    kjit_module_free(module);
    kjit_context_destroy(context);
    return failures ? 1 : 0;
}
