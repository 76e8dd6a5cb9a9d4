/*
 * api.c: kjit.h, the public API, on top of the compiler and the targets:
 * contexts, errors, modules and their functions, and the code behind them
 * (api_call.c runs it: calls, launches, arguments, device memory, streams).
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
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

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

kjit_status kj_api_set_error(kjit_context *context, kjit_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error_v(context, status, fmt, ap);
    va_end(ap);
    return status;
}

/* Takes a heap message from a lower layer, with a prefix. */
kjit_status kj_api_take_error(kjit_context *context, kjit_status status, const char *prefix,
                             char *message)
{
    kj_api_set_error(context, status, "%s%s", prefix, message ? message : "unknown failure");
    free(message);
    return status;
}

/* take_error with "name: " in front, formatted only when there is an error
 * (the hot paths keep no prefix buffer of their own). */
kjit_status kj_api_take_named_error(kjit_context *context, kjit_status status, const char *name,
                                   char *message)
{
    kj_api_set_error(context, status, "%s: %s", name, message ? message : "unknown failure");
    free(message);
    return status;
}

void kj_api_clear_error(kjit_context *context)
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
            kj_api_take_error(NULL, status, "cuda target: ", error);
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
    kj_reduce_scratch_free(context);
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
    kj_api_clear_error(context);
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
        kj_api_set_error(
            context, status, "%.*s", (int)len,
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

static void shared_cpu_release(struct KjSharedCpu *shared);

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
    kj_api_set_error(module->context, KJIT_ERROR_NOT_FOUND,
                     "no function named '%s' (the module has: %s)", name,
                     names.data ? names.data : "none");
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
    case KJ_FN_REDUCE: return KJIT_FUNCTION_REDUCE;
    }
    kj_unreachable();
}

const char *kjit_function_name(const kjit_function *function)
{
    return function->entry->name;
}

KjIrFunction *kj_api_variant_of(const kjit_function *function, int sig)
{
    return function->entry->variants.items[sig];
}

int kjit_function_param_count(const kjit_function *function)
{
    return function->entry->variants.count ? kj_api_variant_of(function, 0)->param_count : 0;
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
    const KjIrFunction *fn = kj_api_variant_of(function, sig);
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
    const KjIrFunction *fn = kj_api_variant_of(function, sig);
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
typedef struct KjSharedCpu {
    struct KjSharedCpu *next;
    KjCacheKey key;
    KjCpuCode *code;
    void *entry, *block;
    int users;
} KjSharedCpu;

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static KjSharedCpu *shared_cpu;

static bool same_key(const KjCacheKey *a, const KjCacheKey *b)
{
    return a->hash[0] == b->hash[0] && a->hash[1] == b->hash[1] && a->text.len == b->text.len &&
           memcmp(a->text.data, b->text.data, a->text.len) == 0;
}

/* The shared code for key, with one more user; NULL if none is loaded. */
static KjSharedCpu *shared_cpu_find(const KjCacheKey *key)
{
    pthread_mutex_lock(&shared_lock);
    KjSharedCpu *s = shared_cpu;
    while (s && !same_key(&s->key, key))
        s = s->next;
    if (s)
        s->users++;
    pthread_mutex_unlock(&shared_lock);
    return s;
}

/* Publishes freshly loaded code; when another thread was quicker, keeps
 * theirs and unloads this copy. */
static KjSharedCpu *shared_cpu_publish(KjSharedCpu *fresh)
{
    pthread_mutex_lock(&shared_lock);
    KjSharedCpu *s = shared_cpu;
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

static void shared_cpu_release(KjSharedCpu *shared)
{
    pthread_mutex_lock(&shared_lock);
    bool last = --shared->users == 0;
    if (last) {
        KjSharedCpu **link = &shared_cpu;
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
    if (compiled->lifted[0])
        kj_cache_key_add(key, "lifted", "%s", compiled->lifted);
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
    KjSharedCpu *shared = shared_cpu_find(&key);
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
            return kj_api_take_error(context, KJIT_ERROR_BACKEND, prefix, error);
        }
        code = kj_cpu_load_object(object, size, &error);
        entry = code ? lookup(code, compiled->symbol, suffix) : NULL;
        if (entry)
            cache_keep(&key, KJ_CACHE_CPU_OBJECT, object, size);
        free(object);
        if (!code) {
            kj_cache_key_free(&key);
            return kj_api_take_error(context, KJIT_ERROR_BACKEND, prefix, error);
        }
        if (!entry) {
            kj_cpu_code_free(code);
            kj_cache_key_free(&key);
            return kj_api_set_error(context, KJIT_ERROR_BACKEND, "%sthe generated code has no %s%s",
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
 * cuda: a cubin (compiled for this exact device, driver and assembler) loads
 * with no JIT at all; else cached PTX is assembled; else LLVM makes the PTX.
 * The toolkit's ptxas assembles whole-program when there is one (ptxas.c
 * says why), else the driver's linker; if ptxas's cubin does not load (a
 * driver older than the toolkit), the linker takes the same PTX.  What was
 * made is kept in both tiers.
 */
static kjit_status generate_cuda(kjit_module *module, KjCompiled *compiled, const char *prefix)
{
    kjit_context *context = module->context;
    KjIrFunction *root = compiled->root;
    const char *arch = context->options.cuda_arch ? context->options.cuda_arch
                                                  : kj_cuda_arch(context->cuda);
    const char *ptxas = kj_ptxas_path();
    KjCacheKey ptx_key = {0}, cubin_key = {0};
    build_key(module, compiled, true, arch, &ptx_key);
    kj_cache_key_add(&ptx_key, "whole-program", "%d", ptxas != NULL);
    kj_cache_key_finish(&ptx_key);
    build_key(module, compiled, true, arch, &cubin_key);
    kj_cache_key_add(&cubin_key, "device", "%s", context->device_text);
    kj_cache_key_add(&cubin_key, "assembler", "%s", kj_ptxas_identity());
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
                                        .contiguous_params = compiled->contiguous,
                                        .cuda_whole_program = ptxas != NULL};
            ptx = kj_ptx_generate(module->ir, &root, 1, &options, &error);
            if (!ptx) {
                kj_cache_key_free(&ptx_key);
                kj_cache_key_free(&cubin_key);
                return kj_api_take_error(context, KJIT_ERROR_BACKEND, prefix, error);
            }
            cache_keep(&ptx_key, KJ_CACHE_PTX, ptx, strlen(ptx));
        }
        void *cubin = NULL;
        size_t cubin_size = 0;
        char *ptxas_error = NULL;
        if (ptxas && kj_ptxas_compile(ptx, kj_cuda_arch(context->cuda), &cubin, &cubin_size,
                                      &ptxas_error) == KJIT_OK) {
            status = kj_cuda_load_cubin(context->cuda, cubin, cubin_size, &compiled->cuda_module,
                                        &ptxas_error);
            if (status != KJIT_OK) {
                free(cubin);
                cubin = NULL;
            }
        }
        if (status != KJIT_OK)
            status = kj_cuda_load_ptx(context->cuda, ptx, &compiled->cuda_module, &cubin,
                                      &cubin_size, &error);
        if (status != KJIT_OK && ptxas_error) {
            KjBuf both = {0};
            kj_buf_printf(&both, "%s (ptxas, tried first: %s)", error ? error : "", ptxas_error);
            free(error);
            error = both.data;
        }
        free(ptxas_error);
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
        return kj_api_take_error(context, status, "", error);
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

/* The middle of the pass list for one root (pipeline.c); an internal error
 * (the IR does not verify) becomes the context's error. */
static bool middle_passes(kjit_context *context, kjit_module *module, KjPipelineRoot *root)
{
    DiagCollector collector = {context, {0}};
    KjDiag diag = {.sink = collect_diagnostic, .user = &collector};
    KjPipeline p = {.arena = &module->arena, .diag = &diag, .module = module->ir,
                    .roots = root, .root_count = 1, .stop = KJ_STAGE_ROOTS,
                    .verify = kj_pipeline_verify_default()};
    bool ok = kj_pipeline_run(&p);
    if (!ok)
        kj_api_set_error(context, KJIT_ERROR_BACKEND, "%s",
                         collector.text.data ? collector.text.data : "internal error");
    kj_buf_free(&collector.text);
    return ok;
}

static bool same_variant(const KjVecVariant *a, const KjVecVariant *b)
{
    return a->layout == b->layout && a->ndim == b->ndim && a->scalar_mask == b->scalar_mask;
}

/* The code for signature `sig` (vectorized as `variant` when not NULL; a
 * kernel with the C-contiguous array parameters in `contiguous`), generated
 * now if this is its first use. */
static KjCompiled *lookup_compiled(KjCompiled *list, int sig, const KjVecVariant *variant,
                                   uint32_t contiguous, const char *lifted)
{
    for (KjCompiled *c = list; c; c = c->next)
        if (c->signature == sig && c->vectorized == (variant != NULL) &&
            c->contiguous == contiguous && (!variant || same_variant(&c->variant, variant)) &&
            strcmp(c->lifted, lifted ? lifted : "") == 0)
            return c;
    return NULL;
}

/* The code for signature `sig` as `request` asks (a root as it is, vectorized,
 * or lifted by another pass and named by `lifted`), generated now if this is
 * its first use. */
static kjit_status find_compiled(kjit_function *function, int sig, KjPipelineRoot *request,
                                 uint32_t contiguous, const char *lifted, KjCompiled **out)
{
    const KjVecVariant *variant = request->vectorize ? &request->variant : NULL;
    /* Every call comes here, so the common case takes no lock: the list only
     * grows, at its head, and an entry is complete before it is published. */
    KjCompiled *found = lookup_compiled(__atomic_load_n(&function->compiled, __ATOMIC_ACQUIRE),
                                        sig, variant, contiguous, lifted);
    if (found) {
        *out = found;
        return KJIT_OK;
    }
    kjit_module *module = function->module;
    kjit_context *context = module->context;
    pthread_mutex_lock(&context->lock);
    found = lookup_compiled(function->compiled, sig, variant, contiguous, lifted);
    if (found) {
        *out = found;
        pthread_mutex_unlock(&context->lock);
        return KJIT_OK;
    }
    KjCompiled *compiled = kj_xcalloc(1, sizeof *compiled);
    compiled->signature = sig;
    compiled->vectorized = variant != NULL;
    if (lifted)
        snprintf(compiled->lifted, sizeof compiled->lifted, "%s", lifted);
    KjIrFunction *fn = kj_api_variant_of(function, sig);
    KjPipelineRoot root = *request;
    root.fn = fn;
    if (variant)
        compiled->variant = *variant;
    else if (fn->kind == KJ_IR_FN_KERNEL || lifted)
        compiled->contiguous = contiguous;
    if (!middle_passes(context, module, &root)) {
        free(compiled);
        pthread_mutex_unlock(&context->lock);
        return KJIT_ERROR_BACKEND;
    }
    compiled->root = root.root;
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
    __atomic_store_n(&function->compiled, compiled, __ATOMIC_RELEASE);
    *out = compiled;
    pthread_mutex_unlock(&context->lock);
    return KJIT_OK;
}

kjit_status kj_api_find_compiled(kjit_function *function, int sig, const KjVecVariant *variant,
                                 uint32_t contiguous, KjCompiled **out)
{
    KjPipelineRoot request = {.vectorize = variant != NULL};
    if (variant)
        request.variant = *variant;
    return find_compiled(function, sig, &request, contiguous, NULL, out);
}

kjit_status kj_api_find_lifted(kjit_function *function, int sig, KjPipelineRoot *request,
                               uint32_t contiguous, const char *lifted, KjCompiled **out)
{
    return find_compiled(function, sig, request, contiguous, lifted, out);
}
