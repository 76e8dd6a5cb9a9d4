/*
 * api.c: kjit.h, the public API, on top of the compiler and the targets.
 *
 * A context owns its target (AUTO settled when it is made), the thread pool of
 * the parallel target, the cuda device, the last error and the diagnostic
 * callback.  A module owns the arena its checked IR lives in and the code
 * generated from it.  Code is generated lazily, on the first call that needs
 * it: one piece per plain function or kernel, and one per vectorized variant,
 * keyed by (signature, layout, rank, scalar mask), and one per kernel variant,
 * keyed by which array arguments are C-contiguous (their strides are then
 * computed, not read: the launch checks every argument).  Each is kept in its
 * function, so nothing is compiled twice in a context; across contexts and
 * processes the cache (cache.c) finds code by a key of everything it depends
 * on: loaded cpu code is shared by the whole process, object files, PTX and
 * cubins come from memory or disk before anything is compiled.
 *
 * Plain functions always run on the host, whatever the target: the cuda
 * target has no entry point for them and a GPU round trip for one scalar
 * would never pay.  On cpu targets "device" memory is ordinary host memory,
 * so a program written for cuda runs unchanged there.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kjit_runtime.h"

/* ---------------------------------------------------------------- types */

/* One piece of generated code and its entry points. */
typedef struct KjCompiled {
    struct KjCompiled *next;
    int signature;
    bool vectorized;
    KjVecVariant variant;
    uint32_t contiguous; /* kernels: the array parameters compiled as C-contiguous */
    char symbol[480];    /* the entry points' symbol (kj_kernel_variant_symbol) */
    KjIrFunction *root;
    struct SharedCpu *cpu; /* cpu code, shared across the process by cache key */
    void *entry; /* __entry, __range or __thread */
    void *block; /* __block, when the kernel has one */
    KjCudaModule *cuda_module;
    void *cuda_function;
} KjCompiled;

struct kjit_context {
    kjit_options options;
    kjit_target target;
    KjPool *pool;
    KjCuda *cuda;
    char *last_error;
    const char *stdlib_dirs[2];
    char device_text[160]; /* cuda: the device as cubin cache keys name it */
    pthread_mutex_t lock; /* code generation and the tables of compiled code */
};

struct kjit_function {
    kjit_module *module;
    KjIrEntry *entry;
    char **signature_text;
    KjCompiled *compiled;
};

struct kjit_module {
    kjit_context *context;
    KjArena arena;
    KjIrModule *ir;
    kjit_function *functions;
    int function_count;
};

struct kjit_stream {
    kjit_context *context;
    KjCudaStream *cuda;
};

struct kjit_event {
    kjit_context *context;
    KjCudaEvent *cuda;
    struct timespec host;
};

/* A scalar argument in the representation compiled code reads. */
typedef union KjScalar {
    bool b;
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    float f32;
    double f64;
    float c64[2];
    double c128[2];
} KjScalar;

/* --------------------------------------------------------------- errors */

/* Failures with no context to keep them (kjit_context_create). */
static _Thread_local char *orphan_error;

static kjit_status set_error_v(kjit_context *context, kjit_status status, const char *fmt,
                               va_list ap)
{
    KjBuf buf = {0};
    kj_buf_vprintf(&buf, fmt, ap);
    char **slot = context ? &context->last_error : &orphan_error;
    free(*slot);
    *slot = buf.data;
    return status;
}

static kjit_status set_error(kjit_context *context, kjit_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static kjit_status set_error(kjit_context *context, kjit_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error_v(context, status, fmt, ap);
    va_end(ap);
    return status;
}

/* Takes a heap message from a lower layer, with a prefix. */
static kjit_status take_error(kjit_context *context, kjit_status status, const char *prefix,
                              char *message)
{
    set_error(context, status, "%s%s", prefix, message ? message : "unknown failure");
    free(message);
    return status;
}

/* take_error with "name: " in front, formatted only when there is an error
 * (the hot paths keep no prefix buffer of their own). */
static kjit_status take_named_error(kjit_context *context, kjit_status status, const char *name,
                                    char *message)
{
    set_error(context, status, "%s: %s", name, message ? message : "unknown failure");
    free(message);
    return status;
}

static void clear_error(kjit_context *context)
{
    if (context && context->last_error)
        context->last_error[0] = '\0';
}

const char *kjit_last_error(const kjit_context *context)
{
    const char *message = context ? context->last_error : orphan_error;
    return message ? message : "";
}

const char *kjit_status_name(kjit_status status)
{
    static const char *const names[] = {
        "ok", "compile error", "I/O error", "not found", "invalid argument", "shape error",
        "type error", "no device", "CUDA error", "out of memory", "back-end error",
    };
    return (unsigned)status < sizeof names / sizeof names[0] ? names[status] : "unknown status";
}

const char *kjit_target_name(kjit_target target)
{
    switch (target) {
    case KJIT_TARGET_AUTO: return "auto";
    case KJIT_TARGET_CPU: return "cpu";
    case KJIT_TARGET_PARALLEL: return "parallel";
    case KJIT_TARGET_CUDA: return "cuda";
    }
    return "unknown";
}

/* ------------------------------------------------------------- arguments */

kjit_arg kjit_arg_f64(double v)
{
    kjit_arg arg = {.kind = KJIT_ARG_SCALAR, .dtype = KJIT_F64};
    arg.value.f = v;
    return arg;
}

kjit_arg kjit_arg_f32(float v)
{
    kjit_arg arg = {.kind = KJIT_ARG_SCALAR, .dtype = KJIT_F32};
    arg.value.f = v;
    return arg;
}

kjit_arg kjit_arg_i64(int64_t v)
{
    kjit_arg arg = {.kind = KJIT_ARG_SCALAR, .dtype = KJIT_I64};
    arg.value.i = v;
    return arg;
}

kjit_arg kjit_arg_i32(int32_t v)
{
    kjit_arg arg = {.kind = KJIT_ARG_SCALAR, .dtype = KJIT_I32};
    arg.value.i = v;
    return arg;
}

kjit_arg kjit_arg_array(kjit_array *array)
{
    kjit_arg arg = {.kind = KJIT_ARG_ARRAY};
    arg.value.array = array;
    if (array)
        arg.dtype = array->dtype;
    return arg;
}

static bool dtype_is_unsigned(kjit_dtype d) { return d >= KJIT_U8 && d <= KJIT_U64; }
static bool dtype_is_float(kjit_dtype d) { return d == KJIT_F32 || d == KJIT_F64; }
static bool dtype_is_complex(kjit_dtype d) { return d == KJIT_C64 || d == KJIT_C128; }

/* Stores a host scalar as `type`.  False when the conversion would lose the
 * imaginary part (complex to real), the one the language never does implicitly. */
static bool convert_scalar(const kjit_arg *arg, const KjType *type, KjScalar *out)
{
    memset(out, 0, sizeof *out);
    double re = 0, im = 0;
    int64_t as_int = 0;
    uint64_t as_uint = 0;
    kjit_dtype from = arg->dtype;
    if (dtype_is_complex(from)) {
        re = arg->value.c[0];
        im = arg->value.c[1];
        as_int = (int64_t)re;
    } else if (dtype_is_float(from)) {
        re = arg->value.f;
        as_int = (int64_t)re;
        as_uint = re < 0 ? (uint64_t)as_int : (uint64_t)re;
    } else if (dtype_is_unsigned(from)) {
        as_uint = arg->value.u;
        as_int = (int64_t)as_uint;
        re = (double)as_uint;
    } else {
        as_int = arg->value.i;
        as_uint = (uint64_t)as_int;
        re = (double)as_int;
    }
    if (dtype_is_complex(from) && !kj_type_is_complex(type))
        return false;
    if (!dtype_is_float(from) && !dtype_is_complex(from))
        as_uint = (uint64_t)as_int;
    switch (type->kind) {
    case KJ_TYPE_BOOL: out->b = dtype_is_float(from) ? re != 0 : as_int != 0; break;
    case KJ_TYPE_I8: out->i8 = (int8_t)as_int; break;
    case KJ_TYPE_I16: out->i16 = (int16_t)as_int; break;
    case KJ_TYPE_I32: out->i32 = (int32_t)as_int; break;
    case KJ_TYPE_I64: out->i64 = as_int; break;
    case KJ_TYPE_U8: out->u8 = (uint8_t)as_uint; break;
    case KJ_TYPE_U16: out->u16 = (uint16_t)as_uint; break;
    case KJ_TYPE_U32: out->u32 = (uint32_t)as_uint; break;
    case KJ_TYPE_U64: out->u64 = as_uint; break;
    case KJ_TYPE_F32: out->f32 = (float)re; break;
    case KJ_TYPE_F64: out->f64 = re; break;
    case KJ_TYPE_C64: out->c64[0] = (float)re; out->c64[1] = (float)im; break;
    case KJ_TYPE_C128: out->c128[0] = re; out->c128[1] = im; break;
    default: return false;
    }
    return true;
}

/* How a vectorized signature takes a host scalar: 0 exactly, 1 through the
 * host's generic i64/f64 (Python's int and float), -1 not at all. */
static int scalar_match(kjit_dtype given, const KjType *param)
{
    kjit_dtype want;
    if (!kj_type_dtype(param, &want))
        return -1;
    if (given == want)
        return 0;
    if (given == KJIT_I64 && kj_type_is_numeric(param))
        return 1;
    if (given == KJIT_F64 && (kj_type_is_float(param) || kj_type_is_complex(param)))
        return 1;
    if (given == KJIT_C128 && kj_type_is_complex(param))
        return 1;
    return -1;
}

static void describe_arg(const kjit_arg *arg, char *buf, size_t size)
{
    if (arg->kind == KJIT_ARG_SCALAR) {
        snprintf(buf, size, "%s", kjit_dtype_name(arg->dtype));
        return;
    }
    const kjit_array *a = arg->value.array;
    if (a->ndim == 0) {
        snprintf(buf, size, "%s (0-d array)", kjit_dtype_name(a->dtype));
        return;
    }
    snprintf(buf, size, "%s", kj_type_name(kj_type_array(kj_dtype_type(a->dtype), a->ndim)));
}

static kjit_status check_args_present(kjit_context *context, const kjit_function *function,
                                      const kjit_arg *args, int nargs)
{
    int want = kjit_function_param_count(function);
    if (nargs != want)
        return set_error(context, KJIT_ERROR_INVALID_ARGUMENT, "%s takes %d argument%s, %d given",
                         function->entry->name, want, want == 1 ? "" : "s", nargs);
    for (int i = 0; i < nargs; i++) {
        if (args[i].kind == KJIT_ARG_ARRAY) {
            const kjit_array *a = args[i].value.array;
            if (!a)
                return set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                 "argument %d of %s is a NULL array", i, function->entry->name);
            if ((unsigned)a->dtype >= KJIT_DTYPE_COUNT || a->ndim < 0 || a->ndim > KJIT_MAX_DIMS)
                return set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                 "argument %d of %s is not a valid array (dtype %d, ndim %d)", i,
                                 function->entry->name, (int)a->dtype, a->ndim);
            for (int d = 0; d < a->ndim; d++)
                if (a->shape[d] < 0)
                    return set_error(context, KJIT_ERROR_SHAPE,
                                     "argument %d of %s has a negative extent", i,
                                     function->entry->name);
        } else if (args[i].kind != KJIT_ARG_SCALAR || (unsigned)args[i].dtype >= KJIT_DTYPE_COUNT) {
            return set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                             "argument %d of %s is neither a scalar nor an array", i,
                             function->entry->name);
        }
    }
    return KJIT_OK;
}

/* ------------------------------------------------------------- contexts */

void kjit_options_init(kjit_options *options)
{
    memset(options, 0, sizeof *options);
    options->target = KJIT_TARGET_AUTO;
    options->device = -1;
    options->opt_level = 3;
}

kjit_status kjit_context_create(const kjit_options *options, kjit_context **out)
{
    *out = NULL;
    kjit_options defaults;
    if (!options) {
        kjit_options_init(&defaults);
        options = &defaults;
    }
    kjit_context *context = kj_xcalloc(1, sizeof *context);
    context->options = *options;
    if (context->options.opt_level < 0 || context->options.opt_level > 3)
        context->options.opt_level = 3;
    pthread_mutex_init(&context->lock, NULL);
    context->stdlib_dirs[0] = kj_default_stdlib_dir();
    context->stdlib_dirs[1] = NULL;

    kjit_target target = options->target;
    if (target == KJIT_TARGET_AUTO || target == KJIT_TARGET_CUDA) {
        char *error = NULL;
        kjit_status status = kj_cuda_probe(&error);
        if (status == KJIT_OK)
            status = kj_cuda_open(options->device, &context->cuda, &error);
        if (status == KJIT_OK) {
            target = KJIT_TARGET_CUDA;
            free(error);
        } else if (target == KJIT_TARGET_CUDA) {
            take_error(NULL, status, "cuda target: ", error);
            pthread_mutex_destroy(&context->lock);
            free(context);
            return status;
        } else {
            free(error);
            target = KJIT_TARGET_CPU;
        }
    }
    if (target == KJIT_TARGET_PARALLEL)
        context->pool = kj_pool_create(options->num_threads);
    if (context->cuda) {
        /* A cubin is the driver's own compilation: it is keyed by the exact
         * device and driver as well as by what the PTX is keyed by. */
        kjit_device_info info;
        memset(&info, 0, sizeof info);
        kj_cuda_info(context->cuda, &info);
        snprintf(context->device_text, sizeof context->device_text,
                 "%s, compute %d.%d, driver %d, %.100s", kj_cuda_arch(context->cuda),
                 info.compute_major, info.compute_minor, info.driver_version, info.name);
    }
    context->target = target;
    *out = context;
    return KJIT_OK;
}

void kjit_context_destroy(kjit_context *context)
{
    if (!context)
        return;
    kj_pool_destroy(context->pool);
    if (context->cuda)
        kj_cuda_close(context->cuda);
    free(context->last_error);
    pthread_mutex_destroy(&context->lock);
    free(context);
}

kjit_target kjit_context_target(const kjit_context *context)
{
    return context->target;
}

/* -------------------------------------------------------------- modules */

typedef struct DiagCollector {
    kjit_context *context;
    KjBuf text;
} DiagCollector;

static void collect_diagnostic(void *user, KjSeverity severity, const char *formatted)
{
    DiagCollector *collector = user;
    const kjit_options *options = &collector->context->options;
    if (options->on_diagnostic)
        options->on_diagnostic(options->diagnostic_user, formatted);
    kj_buf_printf(&collector->text, "%s", formatted);
}

static char *signature_text(const KjIrFunction *fn, bool kernel)
{
    KjBuf buf = {0};
    if (!kernel && fn->ret && fn->ret->kind != KJ_TYPE_VOID)
        kj_buf_printf(&buf, "%s", kj_type_name(fn->ret));
    kj_buf_printf(&buf, "(");
    for (int i = 0; i < fn->param_count; i++)
        kj_buf_printf(&buf, "%s%s", i ? ", " : "", kj_type_name(fn->params[i]->type));
    kj_buf_printf(&buf, ")");
    return buf.data;
}

static kjit_status compile_module(kjit_context *context, const char *path, const char *name,
                                  const char *source, kjit_module **out)
{
    *out = NULL;
    clear_error(context);
    kjit_module *module = kj_xcalloc(1, sizeof *module);
    module->context = context;
    DiagCollector collector = {context, {0}};
    KjDiag diag = {.sink = collect_diagnostic, .user = &collector};

    const KjSource *src = path ? kj_source_read(&module->arena, path, &diag)
                               : kj_source_from_string(&module->arena, name, source);
    kjit_status status = KJIT_OK;
    if (!src) {
        status = KJIT_ERROR_IO;
    } else {
        module->ir = kj_compile_source(&module->arena, src, context->stdlib_dirs, &diag);
        if (!module->ir)
            status = KJIT_ERROR_COMPILE;
    }
    if (status != KJIT_OK) {
        const char *text = collector.text.data ? collector.text.data : "";
        size_t len = strlen(text);
        while (len > 0 && text[len - 1] == '\n')
            len--;
        set_error(context, status, "%.*s", (int)len,
                  len ? text : (status == KJIT_ERROR_IO ? "cannot read the source" : "errors"));
        kj_buf_free(&collector.text);
        kj_arena_free(&module->arena);
        free(module);
        return status;
    }
    kj_buf_free(&collector.text);

    module->function_count = module->ir->entries.count;
    module->functions = kj_xcalloc((size_t)(module->function_count ? module->function_count : 1),
                                   sizeof *module->functions);
    for (int i = 0; i < module->function_count; i++) {
        kjit_function *function = &module->functions[i];
        function->module = module;
        function->entry = module->ir->entries.items[i];
        int count = function->entry->variants.count;
        function->signature_text = kj_xcalloc((size_t)(count ? count : 1), sizeof(char *));
        for (int s = 0; s < count; s++)
            function->signature_text[s] = signature_text(function->entry->variants.items[s],
                                                         function->entry->kind == KJ_FN_KERNEL);
    }
    *out = module;
    return KJIT_OK;
}

kjit_status kjit_compile_file(kjit_context *context, const char *path, kjit_module **out)
{
    return compile_module(context, path, NULL, NULL, out);
}

kjit_status kjit_compile_string(kjit_context *context, const char *name, const char *source,
                                kjit_module **out)
{
    return compile_module(context, NULL, name ? name : "<string>", source, out);
}

static void shared_cpu_release(struct SharedCpu *shared);

static void compiled_free(kjit_context *context, KjCompiled *compiled)
{
    if (compiled->cpu)
        shared_cpu_release(compiled->cpu);
    if (compiled->cuda_module)
        kj_cuda_module_free(compiled->cuda_module);
    free(compiled);
}

void kjit_module_free(kjit_module *module)
{
    if (!module)
        return;
    for (int i = 0; i < module->function_count; i++) {
        kjit_function *function = &module->functions[i];
        for (KjCompiled *c = function->compiled, *next; c; c = next) {
            next = c->next;
            compiled_free(module->context, c);
        }
        for (int s = 0; s < function->entry->variants.count; s++)
            free(function->signature_text[s]);
        free(function->signature_text);
    }
    free(module->functions);
    kj_arena_free(&module->arena);
    free(module);
}

/* ------------------------------------------------------------ functions */

kjit_status kjit_module_function(kjit_module *module, const char *name, kjit_function **out)
{
    *out = NULL;
    for (int i = 0; i < module->function_count; i++)
        if (strcmp(module->functions[i].entry->name, name) == 0) {
            *out = &module->functions[i];
            return KJIT_OK;
        }
    KjBuf names = {0};
    for (int i = 0; i < module->function_count; i++)
        kj_buf_printf(&names, "%s%s", i ? ", " : "", module->functions[i].entry->name);
    set_error(module->context, KJIT_ERROR_NOT_FOUND, "no function named '%s' (the module has: %s)",
              name, names.data ? names.data : "none");
    kj_buf_free(&names);
    return KJIT_ERROR_NOT_FOUND;
}

int kjit_module_function_count(const kjit_module *module)
{
    return module->function_count;
}

const char *kjit_module_function_name(const kjit_module *module, int index)
{
    if (index < 0 || index >= module->function_count)
        return NULL;
    return module->functions[index].entry->name;
}

kjit_function_kind kjit_function_kind_of(const kjit_function *function)
{
    switch (function->entry->kind) {
    case KJ_FN_PLAIN: return KJIT_FUNCTION_PLAIN;
    case KJ_FN_VECTORIZE: return KJIT_FUNCTION_VECTORIZE;
    case KJ_FN_KERNEL: return KJIT_FUNCTION_KERNEL;
    }
    kj_unreachable();
}

const char *kjit_function_name(const kjit_function *function)
{
    return function->entry->name;
}

static KjIrFunction *variant_of(const kjit_function *function, int sig)
{
    return function->entry->variants.items[sig];
}

int kjit_function_param_count(const kjit_function *function)
{
    return function->entry->variants.count ? variant_of(function, 0)->param_count : 0;
}

int kjit_function_signature_count(const kjit_function *function)
{
    return function->entry->variants.count;
}

const char *kjit_function_signature(const kjit_function *function, int index)
{
    if (index < 0 || index >= function->entry->variants.count)
        return NULL;
    return function->signature_text[index];
}

kjit_status kjit_function_param(const kjit_function *function, int sig, int param,
                                kjit_dtype *dtype, int *ndim)
{
    if (sig < 0 || sig >= function->entry->variants.count)
        return KJIT_ERROR_INVALID_ARGUMENT;
    const KjIrFunction *fn = variant_of(function, sig);
    if (param < 0 || param >= fn->param_count)
        return KJIT_ERROR_INVALID_ARGUMENT;
    const KjType *type = fn->params[param]->type;
    bool array = type->kind == KJ_TYPE_ARRAY;
    if (!kj_type_dtype(array ? type->elem : type, dtype))
        return KJIT_ERROR_INVALID_ARGUMENT;
    if (ndim)
        *ndim = array ? type->ndim : 0;
    return KJIT_OK;
}

kjit_status kjit_function_result(const kjit_function *function, int sig, kjit_dtype *dtype)
{
    if (sig < 0 || sig >= function->entry->variants.count)
        return KJIT_ERROR_INVALID_ARGUMENT;
    const KjIrFunction *fn = variant_of(function, sig);
    if (!fn->ret || !kj_type_dtype(fn->ret, dtype))
        return KJIT_ERROR_NOT_FOUND; /* kernels and functions that return nothing */
    return KJIT_OK;
}

/* ------------------------------------------------------ code generation */

/*
 * Loaded cpu code is shared by every context and module of the process that
 * asks for the same key (the same source, function, variant, host and
 * options): a second kjit_compile_string of one text finds its functions
 * already linked.  The last user unloads it; its object bytes stay in the
 * cache's memory tier.
 */
typedef struct SharedCpu {
    struct SharedCpu *next;
    KjCacheKey key;
    KjCpuCode *code;
    void *entry, *block;
    int users;
} SharedCpu;

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static SharedCpu *shared_cpu;

static bool same_key(const KjCacheKey *a, const KjCacheKey *b)
{
    return a->hash[0] == b->hash[0] && a->hash[1] == b->hash[1] && a->text.len == b->text.len &&
           memcmp(a->text.data, b->text.data, a->text.len) == 0;
}

/* The shared code for key, with one more user; NULL if none is loaded. */
static SharedCpu *shared_cpu_find(const KjCacheKey *key)
{
    pthread_mutex_lock(&shared_lock);
    SharedCpu *s = shared_cpu;
    while (s && !same_key(&s->key, key))
        s = s->next;
    if (s)
        s->users++;
    pthread_mutex_unlock(&shared_lock);
    return s;
}

/* Publishes freshly loaded code; when another thread was quicker, keeps
 * theirs and unloads this copy. */
static SharedCpu *shared_cpu_publish(SharedCpu *fresh)
{
    pthread_mutex_lock(&shared_lock);
    SharedCpu *s = shared_cpu;
    while (s && !same_key(&s->key, &fresh->key))
        s = s->next;
    if (s) {
        s->users++;
    } else {
        fresh->users = 1;
        fresh->next = shared_cpu;
        shared_cpu = fresh;
    }
    pthread_mutex_unlock(&shared_lock);
    if (s) {
        kj_cpu_code_free(fresh->code);
        kj_cache_key_free(&fresh->key);
        free(fresh);
    }
    return s ? s : fresh;
}

static void shared_cpu_release(SharedCpu *shared)
{
    pthread_mutex_lock(&shared_lock);
    bool last = --shared->users == 0;
    if (last) {
        SharedCpu **link = &shared_cpu;
        while (*link != shared)
            link = &(*link)->next;
        *link = shared->next;
    }
    pthread_mutex_unlock(&shared_lock);
    if (last) {
        kj_cpu_code_free(shared->code);
        kj_cache_key_free(&shared->key);
        free(shared);
    }
}

static void *lookup(KjCpuCode *code, const char *symbol, const char *suffix)
{
    char name[512];
    snprintf(name, sizeof name, "%s%s", symbol, suffix);
    return kj_cpu_lookup(code, name);
}

/*
 * The key of one root's code: everything the bytes depend on.  The module's
 * source hash covers its text and the path and text of every module it
 * imports, so editing an import changes the key of each importer.
 */
static void build_key(const kjit_module *module, const KjCompiled *compiled, bool on_gpu,
                      const char *arch, KjCacheKey *key)
{
    const KjIrFunction *root = compiled->root;
    kj_cache_key_add(key, "build", "%s", kj_cache_build_identity());
    kj_cache_key_add(key, "source", "%016llx", (unsigned long long)module->ir->source_hash);
    kj_cache_key_add(key, "symbol", "%s", compiled->symbol);
    KjBuf signature = {0};
    for (int i = 0; i < root->param_count; i++)
        kj_buf_printf(&signature, "%s%s", i ? "," : "", kj_type_name(root->params[i]->type));
    kj_cache_key_add(key, "signature", "%d %s(%s)", (int)root->kind,
                     root->ret ? kj_type_name(root->ret) : "void",
                     signature.data ? signature.data : "");
    kj_buf_free(&signature);
    if (compiled->vectorized)
        kj_cache_key_add(key, "variant", "layout %d ndim %d scalars %x", (int)compiled->variant.layout,
                         compiled->variant.ndim, (unsigned)compiled->variant.scalar_mask);
    if (compiled->contiguous)
        kj_cache_key_add(key, "contiguous", "%x", (unsigned)compiled->contiguous);
    kj_cache_key_add(key, "opt", "%d", module->context->options.opt_level);
    if (on_gpu)
        kj_cache_key_add(key, "target", "cuda %s", arch);
    else
        kj_cache_key_add(key, "target", "cpu %s", kj_host_cpu_description());
}

/* A payload from the memory tier, else the disk (then kept in memory). */
static bool cache_fetch(const KjCacheKey *key, KjCacheKind kind, void **data, size_t *size)
{
    if (kj_cache_memory_get(key, kind, data, size))
        return true;
    if (!kj_cache_load(key, kind, data, size))
        return false;
    kj_cache_memory_put(key, kind, *data, *size);
    return true;
}

static void cache_keep(const KjCacheKey *key, KjCacheKind kind, const void *data, size_t size)
{
    kj_cache_memory_put(key, kind, data, size);
    kj_cache_store(key, kind, data, size);
}

static kjit_status generate_cpu(kjit_module *module, KjCompiled *compiled, const char *prefix)
{
    kjit_context *context = module->context;
    KjIrFunction *root = compiled->root;
    KjCacheKey key = {0};
    build_key(module, compiled, false, NULL, &key);
    kj_cache_key_finish(&key);
    SharedCpu *shared = shared_cpu_find(&key);
    if (shared) {
        kj_cache_count_shared_hit();
        kj_cache_key_free(&key);
        compiled->cpu = shared;
        compiled->entry = shared->entry;
        compiled->block = shared->block;
        return KJIT_OK;
    }

    const char *suffix = root->kind == KJ_IR_FN_VEC_KERNEL ? "__range"
                         : root->kind == KJ_IR_FN_KERNEL   ? "__thread"
                                                           : "__entry";
    char *error = NULL;
    KjCpuCode *code = NULL;
    void *entry = NULL;
    void *object = NULL;
    size_t size = 0;
    /* A cached object that will not link or lacks its entry point is treated
     * as damaged: compiled again below. */
    if (cache_fetch(&key, KJ_CACHE_CPU_OBJECT, &object, &size)) {
        code = kj_cpu_load_object(object, size, NULL);
        entry = code ? lookup(code, compiled->symbol, suffix) : NULL;
        if (!entry) {
            kj_cpu_code_free(code);
            code = NULL;
        }
        free(object);
    }
    if (!code) {
        kj_cache_count_compile();
        KjCodegenOptions options = {.target = KJ_CODEGEN_CPU,
                                    .opt_level = context->options.opt_level,
                                    .contiguous_params = compiled->contiguous};
        object = kj_cpu_compile_object(module->ir, &root, 1, &options, &size, &error);
        if (!object) {
            kj_cache_key_free(&key);
            return take_error(context, KJIT_ERROR_BACKEND, prefix, error);
        }
        code = kj_cpu_load_object(object, size, &error);
        entry = code ? lookup(code, compiled->symbol, suffix) : NULL;
        if (entry)
            cache_keep(&key, KJ_CACHE_CPU_OBJECT, object, size);
        free(object);
        if (!code) {
            kj_cache_key_free(&key);
            return take_error(context, KJIT_ERROR_BACKEND, prefix, error);
        }
        if (!entry) {
            kj_cpu_code_free(code);
            kj_cache_key_free(&key);
            return set_error(context, KJIT_ERROR_BACKEND, "%sthe generated code has no %s%s",
                             prefix, compiled->symbol, suffix);
        }
    }
    shared = kj_xcalloc(1, sizeof *shared);
    shared->key = key;
    shared->code = code;
    shared->entry = entry;
    if (root->kind == KJ_IR_FN_KERNEL)
        shared->block = lookup(code, compiled->symbol, "__block");
    shared = shared_cpu_publish(shared);
    compiled->cpu = shared;
    compiled->entry = shared->entry;
    compiled->block = shared->block;
    return KJIT_OK;
}

/*
 * cuda: a cubin (the driver's compilation for this exact device and driver)
 * loads with no JIT at all; else cached PTX goes through the driver's JIT;
 * else LLVM makes the PTX.  What was made is kept in both tiers.
 */
static kjit_status generate_cuda(kjit_module *module, KjCompiled *compiled, const char *prefix)
{
    kjit_context *context = module->context;
    KjIrFunction *root = compiled->root;
    const char *arch = context->options.cuda_arch ? context->options.cuda_arch
                                                  : kj_cuda_arch(context->cuda);
    KjCacheKey ptx_key = {0}, cubin_key = {0};
    build_key(module, compiled, true, arch, &ptx_key);
    kj_cache_key_finish(&ptx_key);
    build_key(module, compiled, true, arch, &cubin_key);
    kj_cache_key_add(&cubin_key, "device", "%s", context->device_text);
    kj_cache_key_finish(&cubin_key);

    char *error = NULL;
    kjit_status status = KJIT_ERROR_BACKEND;
    void *data = NULL;
    size_t size = 0;
    if (cache_fetch(&cubin_key, KJ_CACHE_CUBIN, &data, &size)) {
        status = kj_cuda_load_cubin(context->cuda, data, size, &compiled->cuda_module, NULL);
        free(data);
    }
    if (status != KJIT_OK) {
        char *ptx = NULL;
        if (cache_fetch(&ptx_key, KJ_CACHE_PTX, &data, &size)) {
            ptx = data;
        } else {
            kj_cache_count_compile();
            KjCodegenOptions options = {.target = KJ_CODEGEN_CUDA,
                                        .opt_level = context->options.opt_level,
                                        .cuda_arch = arch,
                                        .contiguous_params = compiled->contiguous};
            ptx = kj_ptx_generate(module->ir, &root, 1, &options, &error);
            if (!ptx) {
                kj_cache_key_free(&ptx_key);
                kj_cache_key_free(&cubin_key);
                return take_error(context, KJIT_ERROR_BACKEND, prefix, error);
            }
            cache_keep(&ptx_key, KJ_CACHE_PTX, ptx, strlen(ptx));
        }
        void *cubin = NULL;
        size_t cubin_size = 0;
        status = kj_cuda_load_ptx(context->cuda, ptx, &compiled->cuda_module, &cubin, &cubin_size,
                                  &error);
        free(ptx);
        if (status == KJIT_OK && cubin)
            cache_keep(&cubin_key, KJ_CACHE_CUBIN, cubin, cubin_size);
        free(cubin);
    }
    kj_cache_key_free(&ptx_key);
    kj_cache_key_free(&cubin_key);
    if (status == KJIT_OK)
        status = kj_cuda_function(compiled->cuda_module, compiled->symbol, &compiled->cuda_function,
                                  &error);
    if (status != KJIT_OK)
        return take_error(context, status, "", error);
    return KJIT_OK;
}

/* Finds (in the caches) or generates code for one root and its entry points:
 * host code for the cpu targets (and for plain functions on any target), a
 * loaded module on cuda. */
static kjit_status generate(kjit_module *module, KjCompiled *compiled, bool on_gpu)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, "code generation for %s failed: ", compiled->root->name);
    return on_gpu ? generate_cuda(module, compiled, prefix) : generate_cpu(module, compiled, prefix);
}

static bool same_variant(const KjVecVariant *a, const KjVecVariant *b)
{
    return a->layout == b->layout && a->ndim == b->ndim && a->scalar_mask == b->scalar_mask;
}

/* The code for signature `sig` (vectorized as `variant` when not NULL; a
 * kernel with the C-contiguous array parameters in `contiguous`), generated
 * now if this is its first use. */
static kjit_status find_compiled(kjit_function *function, int sig, const KjVecVariant *variant,
                                 uint32_t contiguous, KjCompiled **out)
{
    kjit_module *module = function->module;
    kjit_context *context = module->context;
    pthread_mutex_lock(&context->lock);
    for (KjCompiled *c = function->compiled; c; c = c->next)
        if (c->signature == sig && c->vectorized == (variant != NULL) &&
            c->contiguous == contiguous && (!variant || same_variant(&c->variant, variant))) {
            *out = c;
            pthread_mutex_unlock(&context->lock);
            return KJIT_OK;
        }
    KjCompiled *compiled = kj_xcalloc(1, sizeof *compiled);
    compiled->signature = sig;
    compiled->vectorized = variant != NULL;
    KjIrFunction *fn = variant_of(function, sig);
    if (variant) {
        compiled->variant = *variant;
        compiled->root = kj_vectorize(module->ir, fn, *variant);
    } else {
        compiled->root = fn;
        compiled->contiguous = fn->kind == KJ_IR_FN_KERNEL ? contiguous : 0;
    }
    kj_kernel_variant_symbol(compiled->root, compiled->contiguous, compiled->symbol,
                             sizeof compiled->symbol);
    bool on_gpu = context->target == KJIT_TARGET_CUDA && compiled->root->kind != KJ_IR_FN_PLAIN;
    kjit_status status = generate(module, compiled, on_gpu);
    if (status != KJIT_OK) {
        compiled_free(context, compiled);
        pthread_mutex_unlock(&context->lock);
        return status;
    }
    compiled->next = function->compiled;
    function->compiled = compiled;
    *out = compiled;
    pthread_mutex_unlock(&context->lock);
    return KJIT_OK;
}

/* ------------------------------------------------------- cuda transfers */

/* A host array copied to the device for one call. */
typedef struct Staged {
    kjit_array *host;
    char *device;  /* the copy of the bytes [low, high) of host->data */
    int64_t low, high;
    bool copy_back;
} Staged;

typedef struct Staging {
    Staged items[KJ_MAX_VEC_INPUTS + 64];
    int count;
} Staging;

/* Copies the bytes a host view touches to the device (when copy_in) and
 * returns the device address that stands for host->data. */
static kjit_status stage(kjit_context *context, Staging *staging, kjit_array *host, bool copy_in,
                         bool copy_back, void **device_data)
{
    if (staging->count == (int)(sizeof staging->items / sizeof staging->items[0]))
        return set_error(context, KJIT_ERROR_INVALID_ARGUMENT, "too many host arrays in one call");
    Staged *st = &staging->items[staging->count];
    st->host = host;
    st->copy_back = copy_back;
    kj_array_extent(host, &st->low, &st->high);
    size_t bytes = (size_t)(st->high - st->low);
    char *error = NULL;
    void *device = NULL;
    kjit_status status = kj_cuda_alloc(context->cuda, bytes ? bytes : 1, &device, &error);
    if (status != KJIT_OK)
        return take_error(context, status, "", error);
    st->device = device;
    staging->count++;
    if (copy_in && bytes) {
        status = kj_cuda_copy_to_device(context->cuda, st->device, (char *)host->data + st->low,
                                        bytes, NULL, &error);
        if (status != KJIT_OK)
            return take_error(context, status, "", error);
    }
    *device_data = st->device - st->low;
    return KJIT_OK;
}

/* Waits for the launch, copies results back and frees the device copies. */
static kjit_status unstage(kjit_context *context, Staging *staging, kjit_status status)
{
    char *error = NULL;
    if (staging->count == 0)
        return status;
    if (status == KJIT_OK) {
        status = kj_cuda_stream_sync(context->cuda, NULL, &error);
        if (status != KJIT_OK)
            take_error(context, status, "", error), error = NULL;
    }
    for (int i = 0; i < staging->count; i++) {
        Staged *st = &staging->items[i];
        size_t bytes = (size_t)(st->high - st->low);
        if (status == KJIT_OK && st->copy_back && bytes) {
            status = kj_cuda_copy_to_host(context->cuda, (char *)st->host->data + st->low,
                                          st->device, bytes, NULL, &error);
            if (status != KJIT_OK)
                take_error(context, status, "", error), error = NULL;
        }
        kj_cuda_free(context->cuda, st->device, &error);
        free(error);
        error = NULL;
    }
    staging->count = 0;
    return status;
}

/* ---------------------------------------------------- vectorized calls */

static kjit_status choose_signature(kjit_function *function, const kjit_arg *args, int nargs,
                                    int *sig)
{
    kjit_context *context = function->module->context;
    int best = -1, best_score = 0;
    int count = function->entry->variants.count;
    for (int s = 0; s < count; s++) {
        const KjIrFunction *fn = variant_of(function, s);
        int score = 0;
        bool ok = fn->param_count == nargs;
        for (int i = 0; ok && i < nargs; i++) {
            const KjType *param = fn->params[i]->type;
            if (args[i].kind == KJIT_ARG_ARRAY) {
                kjit_dtype want;
                ok = kj_type_dtype(param, &want) && args[i].value.array->dtype == want;
            } else {
                int m = scalar_match(args[i].dtype, param);
                ok = m >= 0;
                score += m;
            }
        }
        if (ok && (best < 0 || score < best_score)) {
            best = s;
            best_score = score;
        }
    }
    if (best >= 0) {
        *sig = best;
        return KJIT_OK;
    }
    KjBuf message = {0};
    const char *name = function->entry->name;
    KjBuf given = {0};
    for (int i = 0; i < nargs; i++) {
        char text[96];
        describe_arg(&args[i], text, sizeof text);
        kj_buf_printf(&given, "%s%s", i ? ", " : "", text);
    }
    /* Name the first argument that no signature takes in its place, if any. */
    int culprit = -1;
    for (int i = 0; i < nargs && culprit < 0; i++) {
        bool taken = false;
        for (int s = 0; s < count && !taken; s++) {
            const KjType *param = variant_of(function, s)->params[i]->type;
            kjit_dtype want;
            if (args[i].kind == KJIT_ARG_ARRAY)
                taken = kj_type_dtype(param, &want) && args[i].value.array->dtype == want;
            else
                taken = scalar_match(args[i].dtype, param) >= 0;
        }
        if (!taken)
            culprit = i;
    }
    if (culprit >= 0) {
        char text[96];
        describe_arg(&args[culprit], text, sizeof text);
        kj_buf_printf(&message, "%s(%s): argument %d has type %s, which no signature of %s takes",
                      name, given.data, culprit, text, name);
    } else {
        kj_buf_printf(&message, "%s(%s): no signature of %s takes these argument types together",
                      name, given.data ? given.data : "", name);
    }
    kj_buf_printf(&message, "; signatures on offer: ");
    for (int s = 0; s < count; s++)
        kj_buf_printf(&message, "%s%s", s ? ", " : "", function->signature_text[s]);
    kj_buf_printf(&message, " (array element types must match exactly)");
    set_error(context, KJIT_ERROR_TYPE, "%s", message.data);
    kj_buf_free(&message);
    kj_buf_free(&given);
    return KJIT_ERROR_TYPE;
}

static void *aligned_alloc_bytes(size_t bytes)
{
    void *data = NULL;
    if (posix_memalign(&data, 64, bytes ? bytes : 64) != 0)
        return NULL;
    return data;
}

/*
 * A @vectorize call: picks the signature, broadcasts, allocates the output if
 * asked, generates the variant's code, and (when run) runs it.
 */
static kjit_status call_vectorized(kjit_function *function, const kjit_arg *args, int nargs,
                                   const kjit_array *out, kjit_array *result, kjit_stream *stream,
                                   bool run)
{
    kjit_context *context = function->module->context;
    const char *name = function->entry->name;
    kjit_status status = check_args_present(context, function, args, nargs);
    if (status != KJIT_OK)
        return status;
    if (nargs > KJ_MAX_VEC_INPUTS)
        return set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                         "%s: a vectorized call takes at most %d inputs", name, KJ_MAX_VEC_INPUTS);
    int sig;
    status = choose_signature(function, args, nargs, &sig);
    if (status != KJIT_OK)
        return status;
    const KjIrFunction *scalar = variant_of(function, sig);
    kjit_dtype ret;
    if (!kj_type_dtype(scalar->ret, &ret))
        return set_error(context, KJIT_ERROR_BACKEND, "%s returns no scalar", name);

    const kjit_array *inputs[KJ_MAX_VEC_INPUTS];
    for (int i = 0; i < nargs; i++)
        inputs[i] = args[i].kind == KJIT_ARG_ARRAY ? args[i].value.array : NULL;
    int ndim;
    int64_t shape[KJ_MAX_DIMS];
    char *error = NULL;
    status = kj_broadcast_shape(inputs, nargs, &ndim, shape, &error);
    if (status != KJIT_OK)
        return take_named_error(context, status, name, error);

    kjit_array target, allocated = {0};
    if (out) {
        if (out->dtype != ret)
            return set_error(context, KJIT_ERROR_TYPE,
                             "%s: the output has element type %s but %s%s returns %s", name,
                             kjit_dtype_name(out->dtype), name, function->signature_text[sig],
                             kjit_dtype_name(ret));
        target = *out;
    } else if (!run) {
        target = kjit_array_make(NULL, ret, ndim, shape);
    } else if (result) {
        int64_t size = 1;
        for (int d = 0; d < ndim; d++)
            size *= shape[d];
        void *data = aligned_alloc_bytes((size_t)size * kjit_dtype_size(ret));
        if (!data)
            return set_error(context, KJIT_ERROR_OUT_OF_MEMORY,
                             "%s: out of memory for an output of %lld elements", name,
                             (long long)size);
        allocated = kjit_array_make(data, ret, ndim, shape);
        target = allocated;
    } else {
        return set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                         "%s: give an output array or a result to fill", name);
    }

    KjBroadcastPlan plan;
    status = kj_broadcast_plan(inputs, nargs, &target, &plan, &error);
    if (status != KJIT_OK) {
        free(allocated.data);
        return take_named_error(context, status, name, error);
    }
    KjCompiled *compiled = NULL;
    if (plan.size > 0)
        status = find_compiled(function, sig, &plan.variant, 0, &compiled);
    if (status != KJIT_OK || !run || plan.size == 0) {
        if (status == KJIT_OK && run && result)
            *result = allocated;
        else
            free(allocated.data);
        return status;
    }

    KjScalar scalars[KJ_MAX_VEC_INPUTS];
    void *params[KJ_MAX_VEC_INPUTS + 1];
    for (int i = 0; i < nargs; i++) {
        if (!(plan.variant.scalar_mask & (1u << i)))
            params[i] = &plan.inputs[i];
        else if (plan.scalar_data[i])
            params[i] = (void *)plan.scalar_data[i];
        else {
            convert_scalar(&args[i], scalar->params[i]->type, &scalars[i]);
            params[i] = &scalars[i];
        }
    }
    params[nargs] = &plan.output;

    if (context->target != KJIT_TARGET_CUDA) {
        kj_cpu_run_range(context->pool, (KjRangeFn)compiled->entry, params, plan.size);
    } else {
        Staging staging; /* not zeroed: only `count` items are ever read */
        staging.count = 0;
        for (int i = 0; i < nargs && status == KJIT_OK; i++)
            if (inputs[i] && !(plan.variant.scalar_mask & (1u << i)) &&
                inputs[i]->memory == KJIT_MEMORY_HOST)
                status = stage(context, &staging, (kjit_array *)inputs[i], true, false,
                               &plan.inputs[i].data);
        if (status == KJIT_OK && target.memory == KJIT_MEMORY_HOST)
            status = stage(context, &staging, &target, !kj_array_is_contiguous(&target), true,
                           &plan.output.data);
        if (status == KJIT_OK) {
            status = kj_cuda_launch_elementwise(context->cuda, compiled->cuda_function,
                                                compiled->root->symbol, plan.size, params,
                                                stream ? stream->cuda : NULL, &error);
            if (status != KJIT_OK)
                take_error(context, status, "", error);
        }
        status = unstage(context, &staging, status);
    }
    if (status == KJIT_OK && result)
        *result = allocated;
    else
        free(allocated.data);
    return status;
}

/* ------------------------------------------- plain functions and kernels */

#define MAX_PARAMS 64

/* Arguments of a plain function or kernel as its entry point takes them:
 * scalars converted to the parameter types, arrays checked for element type
 * and rank and turned into descriptors. */
typedef struct Marshalled {
    KjScalar scalars[MAX_PARAMS];
    KjArrayDesc descs[MAX_PARAMS];
    void *params[MAX_PARAMS];
    uint32_t contiguous; /* bit i: array argument i (i < 32) is C-contiguous */
} Marshalled;

static kjit_status marshal(kjit_function *function, const kjit_arg *args, int nargs,
                           Marshalled *m)
{
    kjit_context *context = function->module->context;
    const char *name = function->entry->name;
    kjit_status status = check_args_present(context, function, args, nargs);
    if (status != KJIT_OK)
        return status;
    if (nargs > MAX_PARAMS)
        return set_error(context, KJIT_ERROR_INVALID_ARGUMENT, "%s: more than %d arguments", name,
                         MAX_PARAMS);
    const KjIrFunction *fn = variant_of(function, 0);
    m->contiguous = 0;
    for (int i = 0; i < nargs; i++) {
        const KjType *param = fn->params[i]->type;
        /* Described only for an error message: launches pay for none of it. */
        char given[96];
        if (param->kind == KJ_TYPE_ARRAY) {
            const kjit_array *a = args[i].kind == KJIT_ARG_ARRAY ? args[i].value.array : NULL;
            kjit_dtype want;
            kj_type_dtype(param->elem, &want);
            if (!a || a->dtype != want || a->ndim != param->ndim) {
                describe_arg(&args[i], given, sizeof given);
                return set_error(context, KJIT_ERROR_TYPE,
                                 "%s: argument %d (%s) must be a %s array, not %s", name, i,
                                 fn->params[i]->name, kj_type_name(param), given);
            }
            char *error = NULL;
            status = kj_array_desc(a, &m->descs[i], &error);
            if (status != KJIT_OK) {
                char prefix[160];
                snprintf(prefix, sizeof prefix, "%s: argument %d: ", name, i);
                return take_error(context, status, prefix, error);
            }
            m->params[i] = &m->descs[i];
            if (i < 32 && kj_array_is_contiguous(a))
                m->contiguous |= 1u << i;
            continue;
        }
        if (args[i].kind != KJIT_ARG_SCALAR) {
            describe_arg(&args[i], given, sizeof given);
            return set_error(context, KJIT_ERROR_TYPE,
                             "%s: argument %d (%s) must be a %s scalar, not %s", name, i,
                             fn->params[i]->name, kj_type_name(param), given);
        }
        if (!convert_scalar(&args[i], param, &m->scalars[i])) {
            describe_arg(&args[i], given, sizeof given);
            return set_error(context, KJIT_ERROR_TYPE,
                             "%s: argument %d (%s) is %s, which does not convert to %s", name, i,
                             fn->params[i]->name, given, kj_type_name(param));
        }
        m->params[i] = &m->scalars[i];
    }
    return KJIT_OK;
}

static kjit_status call_plain(kjit_function *function, const kjit_arg *args, int nargs,
                              kjit_array *result, bool run)
{
    kjit_context *context = function->module->context;
    Marshalled m;
    kjit_status status = marshal(function, args, nargs, &m);
    if (status != KJIT_OK)
        return status;
    for (int i = 0; i < nargs; i++)
        if (args[i].kind == KJIT_ARG_ARRAY && context->target == KJIT_TARGET_CUDA &&
            args[i].value.array->memory == KJIT_MEMORY_DEVICE)
            return set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                             "%s: plain functions run on the host; argument %d is a device array",
                             function->entry->name, i);
    KjCompiled *compiled;
    status = find_compiled(function, 0, NULL, 0, &compiled);
    if (status != KJIT_OK || !run)
        return status;
    KjScalar value;
    memset(&value, 0, sizeof value);
    ((KjEntryFn)compiled->entry)(m.params, &value);
    kjit_dtype ret;
    if (result && kj_type_dtype(compiled->root->ret, &ret)) {
        void *data = aligned_alloc_bytes(sizeof value);
        if (!data)
            return set_error(context, KJIT_ERROR_OUT_OF_MEMORY, "out of memory");
        memcpy(data, &value, sizeof value);
        *result = kjit_array_make(data, ret, 0, NULL);
    }
    return KJIT_OK;
}

kjit_status kjit_call(kjit_function *function, const kjit_arg *args, int nargs,
                      kjit_array *out, kjit_array *result)
{
    kjit_context *context = function->module->context;
    clear_error(context);
    switch (function->entry->kind) {
    case KJ_FN_VECTORIZE:
        return call_vectorized(function, args, nargs, out, result, NULL, true);
    case KJ_FN_PLAIN:
        return call_plain(function, args, nargs, result, true);
    case KJ_FN_KERNEL:
        break;
    }
    return set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                     "%s is a @kernel: launch it with kjit_launch", function->entry->name);
}

kjit_status kjit_call_async(kjit_function *function, const kjit_arg *args, int nargs,
                            kjit_array *out, kjit_stream *stream)
{
    kjit_context *context = function->module->context;
    clear_error(context);
    if (function->entry->kind != KJ_FN_VECTORIZE)
        return set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                         "%s: kjit_call_async takes a @vectorize function", function->entry->name);
    if (!out)
        return set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                         "%s: kjit_call_async needs an output array", function->entry->name);
    return call_vectorized(function, args, nargs, out, NULL, stream, true);
}

static kjit_status check_launch_shape(kjit_function *function, const uint32_t grid[3],
                                      const uint32_t block[3])
{
    kjit_context *context = function->module->context;
    const char *name = function->entry->name;
    if (function->entry->kind != KJ_FN_KERNEL)
        return set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                         "%s is not a @kernel: call it with kjit_call", name);
    for (int d = 0; d < 3; d++)
        if (grid[d] == 0 || block[d] == 0)
            return set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                             "%s: grid (%u,%u,%u) and block (%u,%u,%u) need every extent >= 1",
                             name, grid[0], grid[1], grid[2], block[0], block[1], block[2]);
    uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
    if (threads > 1024)
        return set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                         "%s: a block of %llu threads; at most 1024 (as on a GPU)", name,
                         (unsigned long long)threads);
    if (grid[1] > 65535 || grid[2] > 65535)
        return set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                         "%s: grid y and z extents are at most 65535", name);
    return KJIT_OK;
}

kjit_status kjit_launch(kjit_function *function, const uint32_t grid[3], const uint32_t block[3],
                        const kjit_arg *args, int nargs, kjit_stream *stream)
{
    kjit_context *context = function->module->context;
    clear_error(context);
    kjit_status status = check_launch_shape(function, grid, block);
    if (status != KJIT_OK)
        return status;
    Marshalled m;
    status = marshal(function, args, nargs, &m);
    if (status != KJIT_OK)
        return status;
    KjCompiled *compiled;
    status = find_compiled(function, 0, NULL, m.contiguous, &compiled);
    if (status != KJIT_OK)
        return status;
    char *error = NULL;
    if (context->target != KJIT_TARGET_CUDA) {
        status = kj_cpu_run_kernel(context->pool, compiled->root, (KjThreadFn)compiled->entry,
                                   (KjThreadFn)compiled->block, m.params, grid, block, &error);
        if (status != KJIT_OK)
            take_named_error(context, status, function->entry->name, error);
        return status;
    }
    Staging staging; /* not zeroed: only `count` items are ever read */
    staging.count = 0;
    for (int i = 0; i < nargs && status == KJIT_OK; i++)
        if (args[i].kind == KJIT_ARG_ARRAY && args[i].value.array->memory == KJIT_MEMORY_HOST)
            status = stage(context, &staging, args[i].value.array, true, true, &m.descs[i].data);
    if (status == KJIT_OK) {
        status = kj_cuda_launch(context->cuda, compiled->cuda_function, compiled->root->symbol,
                                grid, block, 0, m.params, stream ? stream->cuda : NULL, &error);
        if (status != KJIT_OK)
            take_error(context, status, "", error);
    }
    return unstage(context, &staging, status);
}

kjit_status kjit_prepare(kjit_function *function, const kjit_arg *args, int nargs,
                         const kjit_array *out)
{
    kjit_context *context = function->module->context;
    clear_error(context);
    switch (function->entry->kind) {
    case KJ_FN_VECTORIZE:
        return call_vectorized(function, args, nargs, out, NULL, NULL, false);
    case KJ_FN_PLAIN:
        return call_plain(function, args, nargs, NULL, false);
    case KJ_FN_KERNEL: {
        Marshalled m;
        kjit_status status = marshal(function, args, nargs, &m);
        KjCompiled *compiled;
        return status != KJIT_OK ? status
                                 : find_compiled(function, 0, NULL, m.contiguous, &compiled);
    }
    }
    kj_unreachable();
}

kjit_status kjit_function_match(kjit_function *function, const kjit_arg *args, int nargs,
                                int *signature)
{
    clear_error(function->module->context);
    if (function->entry->kind != KJ_FN_VECTORIZE) {
        *signature = 0;
        return KJIT_OK;
    }
    return choose_signature(function, args, nargs, signature);
}

/* ------------------------------------------------------- device memory */

kjit_status kjit_device_alloc(kjit_context *context, kjit_dtype dtype, int ndim,
                              const int64_t *shape, kjit_array *out)
{
    clear_error(context);
    memset(out, 0, sizeof *out);
    if ((unsigned)dtype >= KJIT_DTYPE_COUNT || ndim < 0 || ndim > KJIT_MAX_DIMS)
        return set_error(context, KJIT_ERROR_INVALID_ARGUMENT, "invalid dtype or rank");
    int64_t size = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return set_error(context, KJIT_ERROR_SHAPE, "negative extent in a device array");
        size *= shape[d];
    }
    size_t bytes = (size_t)size * kjit_dtype_size(dtype);
    void *data = NULL;
    if (context->cuda) {
        char *error = NULL;
        kjit_status status = kj_cuda_alloc(context->cuda, bytes ? bytes : 1, &data, &error);
        if (status != KJIT_OK)
            return take_error(context, status, "", error);
    } else if (!(data = aligned_alloc_bytes(bytes))) {
        return set_error(context, KJIT_ERROR_OUT_OF_MEMORY,
                         "out of memory for a device array of %zu bytes", bytes);
    }
    *out = kjit_array_make(data, dtype, ndim, shape);
    out->memory = KJIT_MEMORY_DEVICE;
    return KJIT_OK;
}

kjit_status kjit_device_free(kjit_context *context, kjit_array *array)
{
    clear_error(context);
    if (!array || !array->data)
        return KJIT_OK;
    if (array->memory != KJIT_MEMORY_DEVICE)
        return set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                         "kjit_device_free takes a device array (use kjit_array_free)");
    kjit_status status = KJIT_OK;
    if (context->cuda) {
        char *error = NULL;
        status = kj_cuda_free(context->cuda, array->data, &error);
        if (status != KJIT_OK)
            take_error(context, status, "", error);
    } else {
        free(array->data);
    }
    array->data = NULL;
    return status;
}

kjit_status kjit_copy(kjit_context *context, kjit_array *dst, const kjit_array *src,
                      kjit_stream *stream)
{
    clear_error(context);
    bool same = dst->dtype == src->dtype && dst->ndim == src->ndim;
    for (int d = 0; same && d < src->ndim; d++)
        same = dst->shape[d] == src->shape[d];
    if (!same) {
        char a[160], b[160];
        return set_error(context, KJIT_ERROR_SHAPE, "kjit_copy: %s %s into %s %s",
                         kjit_dtype_name(src->dtype), kj_shape_string(a, sizeof a, src->ndim, src->shape),
                         kjit_dtype_name(dst->dtype), kj_shape_string(b, sizeof b, dst->ndim, dst->shape));
    }
    if (!kj_array_is_contiguous(dst) || !kj_array_is_contiguous(src))
        return set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                         "kjit_copy copies contiguous arrays only");
    size_t bytes = (size_t)kjit_array_size(src) * kjit_dtype_size(src->dtype);
    if (bytes == 0)
        return KJIT_OK;
    bool dst_device = context->cuda && dst->memory == KJIT_MEMORY_DEVICE;
    bool src_device = context->cuda && src->memory == KJIT_MEMORY_DEVICE;
    KjCudaStream *s = stream ? stream->cuda : NULL;
    char *error = NULL;
    kjit_status status = KJIT_OK;
    if (!dst_device && !src_device) {
        memmove(dst->data, src->data, bytes);
    } else if (dst_device && !src_device) {
        status = kj_cuda_copy_to_device(context->cuda, dst->data, src->data, bytes, s, &error);
    } else if (!dst_device && src_device) {
        status = kj_cuda_copy_to_host(context->cuda, dst->data, src->data, bytes, s, &error);
    } else {
        /* Device to device through the host: rare, and the driver seam has no
         * direct copy. */
        void *bounce = malloc(bytes);
        if (!bounce)
            return set_error(context, KJIT_ERROR_OUT_OF_MEMORY, "out of memory");
        status = kj_cuda_copy_to_host(context->cuda, bounce, src->data, bytes, s, &error);
        if (status == KJIT_OK)
            status = kj_cuda_stream_sync(context->cuda, s, &error);
        if (status == KJIT_OK)
            status = kj_cuda_copy_to_device(context->cuda, dst->data, bounce, bytes, s, &error);
        if (status == KJIT_OK)
            status = kj_cuda_stream_sync(context->cuda, s, &error);
        free(bounce);
    }
    if (status != KJIT_OK)
        take_error(context, status, "kjit_copy: ", error);
    return status;
}

/* ------------------------------------------------------ streams, events */

kjit_status kjit_stream_create(kjit_context *context, kjit_stream **out)
{
    clear_error(context);
    kjit_stream *stream = kj_xcalloc(1, sizeof *stream);
    stream->context = context;
    if (context->cuda) {
        char *error = NULL;
        kjit_status status = kj_cuda_stream_create(context->cuda, &stream->cuda, &error);
        if (status != KJIT_OK) {
            free(stream);
            *out = NULL;
            return take_error(context, status, "", error);
        }
    }
    *out = stream;
    return KJIT_OK;
}

kjit_status kjit_stream_synchronize(kjit_stream *stream)
{
    kjit_context *context = stream->context;
    clear_error(context);
    if (!context->cuda)
        return KJIT_OK; /* cpu work is done when its call returns */
    char *error = NULL;
    kjit_status status = kj_cuda_stream_sync(context->cuda, stream->cuda, &error);
    if (status != KJIT_OK)
        take_error(context, status, "", error);
    return status;
}

void kjit_stream_destroy(kjit_stream *stream)
{
    if (!stream)
        return;
    if (stream->cuda)
        kj_cuda_stream_destroy(stream->context->cuda, stream->cuda);
    free(stream);
}

kjit_status kjit_synchronize(kjit_context *context)
{
    clear_error(context);
    if (!context->cuda)
        return KJIT_OK;
    char *error = NULL;
    kjit_status status = kj_cuda_stream_sync(context->cuda, NULL, &error);
    if (status != KJIT_OK)
        take_error(context, status, "", error);
    return status;
}

kjit_status kjit_event_record(kjit_context *context, kjit_stream *stream, kjit_event **out)
{
    clear_error(context);
    kjit_event *event = kj_xcalloc(1, sizeof *event);
    event->context = context;
    if (context->cuda) {
        char *error = NULL;
        kjit_status status = kj_cuda_event_record(context->cuda, stream ? stream->cuda : NULL,
                                                  &event->cuda, &error);
        if (status != KJIT_OK) {
            free(event);
            *out = NULL;
            return take_error(context, status, "", error);
        }
    } else {
        clock_gettime(CLOCK_MONOTONIC, &event->host);
    }
    *out = event;
    return KJIT_OK;
}

kjit_status kjit_event_elapsed(kjit_event *start, kjit_event *end, double *milliseconds)
{
    kjit_context *context = start->context;
    clear_error(context);
    if (start->cuda && end->cuda) {
        char *error = NULL;
        kjit_status status = kj_cuda_event_elapsed(context->cuda, start->cuda, end->cuda,
                                                   milliseconds, &error);
        if (status != KJIT_OK)
            take_error(context, status, "", error);
        return status;
    }
    if (start->cuda || end->cuda)
        return set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                         "events from different kinds of context");
    *milliseconds = (double)(end->host.tv_sec - start->host.tv_sec) * 1e3 +
                    (double)(end->host.tv_nsec - start->host.tv_nsec) / 1e6;
    return KJIT_OK;
}

void kjit_event_destroy(kjit_event *event)
{
    if (!event)
        return;
    if (event->cuda)
        kj_cuda_event_destroy(event->context->cuda, event->cuda);
    free(event);
}
