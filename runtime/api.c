/*
 * api.c: kjit.h, the public API, on top of the compiler and the targets:
 * contexts, errors, modules and their functions, and the code behind them
 * (api_call.c runs it: calls, launches, device memory; api_args.c checks the
 * arguments, api_stream.c keeps the streams and events).
 *
 * A context owns its target (AUTO settled when it is made) and that target's
 * state (the thread pool of the parallel target, the cuda device), the last
 * error and the diagnostic callback.  Everything that differs between targets
 * is behind the KjRuntimeTarget the context holds (runtime_cpu.c,
 * runtime_cuda.c); this file picks it once and never asks again.
 *
 * A module owns the arena its checked IR lives in and the code generated from
 * it.  Code is generated lazily, on the first call that needs it: one piece
 * per plain function or kernel, and one per vectorized variant, keyed by
 * (signature, layout, rank, scalar mask), and one per kernel variant,
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

/* ---------------------------------------------------------------- names */

const char *kjit_status_name(kjit_status status)
{
    static const char *const names[] = {
        "ok", "compile error", "I/O error", "not found", "invalid argument", "shape error",
        "type error", "no device", "CUDA error", "out of memory", "back-end error",
        "check failed", "cancelled", "time limit exceeded",
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
    if (!options)
        return;
    memset(options, 0, sizeof *options);
    options->target = KJIT_TARGET_AUTO;
    options->device = -1;
    options->opt_level = 3;
    options->line_info = kj_jit && kj_jit->codegen_line_info_default();
    options->cpu_simd = !kj_jit || kj_jit->codegen_cpu_simd_default();
    const char *specialise = getenv("KJIT_CPU_SPECIALISE");
    options->cpu_specialise = !(specialise && strcmp(specialise, "0") == 0);
    const char *cancellable = getenv("KJIT_CANCELLABLE");
    options->cancellable = cancellable && *cancellable && strcmp(cancellable, "0") != 0;
    const char *limit = getenv("KJIT_TIME_LIMIT");
    if (limit && *limit) {
        char *end = NULL;
        double seconds = strtod(limit, &end);
        if (end != limit && *end == '\0' && seconds > 0 && seconds < 1e9)
            options->time_limit_s = seconds;
    }
}

static void context_free(kjit_context *context)
{
    kj_cancel_destroy(context->cancel);
    pthread_mutex_destroy(&context->lock);
    pthread_mutex_destroy(&context->handles_lock);
    kj_handle_free(context);
}

kjit_status kjit_context_create(const kjit_options *options, kjit_context **out)
{
    if (!out)
        return kj_api_null(NULL, "kjit_context_create", "out");
    *out = NULL;
    kjit_options defaults;
    if (!options) {
        kjit_options_init(&defaults);
        options = &defaults;
    }
    /* A target kjit does not know is a mistake to report, not cpu to guess. */
    if ((unsigned)options->target > KJIT_TARGET_CUDA)
        return kj_api_set_error(NULL, KJIT_ERROR_INVALID_ARGUMENT,
                                "unknown target %d (KJIT_TARGET_AUTO, _CPU, _PARALLEL or _CUDA)",
                                (int)options->target);
    if (options->check & ~KJIT_CHECK_ALL)
        return kj_api_set_error(NULL, KJIT_ERROR_INVALID_ARGUMENT,
                                "unknown check bits %#x (KJIT_CHECK_VALUES, _RACE or _ALL)",
                                (unsigned)options->check);
    kjit_context *context = kj_handle_new(KJ_HANDLE_CONTEXT, sizeof *context);
    context->options = *options;
    if (context->options.opt_level < 0 || context->options.opt_level > 3)
        context->options.opt_level = 3;
    context->options.check |= kj_check_env();
    if (!(context->options.time_limit_s > 0)) /* NaN and negatives too: no limit */
        context->options.time_limit_s = 0;
    if (context->options.time_limit_s > 0)
        context->options.cancellable = 1;
    context->options.cancellable = context->options.cancellable != 0;
    context->cancel = kj_cancel_create(&context->options);
    pthread_mutex_init(&context->lock, NULL);
    pthread_mutex_init(&context->handles_lock, NULL);
    context->stdlib_dirs[0] = kj_jit ? kj_jit->default_stdlib_dir() : NULL;
    context->stdlib_dirs[1] = NULL;

    /* Races are checked on the host only (check_race.c): a GPU has
     * compute-sanitizer's racecheck. */
    bool races = (context->options.check & KJIT_CHECK_RACE) != 0;
    if (races && options->target != KJIT_TARGET_AUTO &&
        !kj_runtime_target_of(options->target)->checks_races) {
        context_free(context);
        return kj_api_set_error(NULL, KJIT_ERROR_INVALID_ARGUMENT,
                                "race checking runs on the cpu and parallel targets only; on a "
                                "GPU use compute-sanitizer --tool racecheck (shared memory) on "
                                "the unchecked program");
    }
    /* AUTO is cuda when a GPU answers, else cpu (race checking: cpu). */
    kjit_target target = options->target == KJIT_TARGET_AUTO ? kj_runtime_target_auto(races)
                                                             : options->target;
    const KjRuntimeTarget *runtime = kj_runtime_target_of(target);
    char *error = NULL;
    kjit_status status = runtime->open(context, &error);
    if (status != KJIT_OK && options->target == KJIT_TARGET_AUTO) {
        free(error);
        error = NULL;
        runtime = &kj_runtime_cpu;
        target = KJIT_TARGET_CPU;
        status = runtime->open(context, &error);
    }
    if (status != KJIT_OK) {
        kj_api_set_error(NULL, status, "%s target: %s", runtime->name,
                         error ? error : "unknown failure");
        free(error);
        context_free(context);
        return status;
    }
    free(error);
    context->runtime = runtime;
    context->target = target;
    *out = context;
    return KJIT_OK;
}

void kjit_context_destroy(kjit_context *context)
{
    if (!context)
        return; /* as free(NULL) */
    if (!kj_api_live(context, KJ_HANDLE_CONTEXT, "kjit_context_destroy"))
        return;
    /* What the context made dies with it, before its target closes. */
    while (context->modules)
        kjit_module_free(context->modules);
    kj_api_release_handles(context);
    kj_reduce_scratch_free(context);
    kj_check_context_free(context); /* through the target, before it closes */
    context->runtime->close(context);
    context_free(context);
}

kjit_target kjit_context_target(const kjit_context *context)
{
    if (!kj_api_live(context, KJ_HANDLE_CONTEXT, "kjit_context_target"))
        return KJIT_TARGET_AUTO;
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
    if (!kernel && fn->output_count > 1) { /* (f64, i32)(f64, f64): several outputs */
        kj_buf_printf(&buf, "(%s", kj_type_name(fn->ret));
        for (int k = 1; k < fn->output_count; k++)
            kj_buf_printf(&buf, ", %s", kj_type_name(fn->outputs[k]->type));
        kj_buf_printf(&buf, ")");
    } else if (!kernel && fn->ret && fn->ret->kind != KJ_TYPE_VOID)
        kj_buf_printf(&buf, "%s", kj_type_name(fn->ret));
    kj_buf_printf(&buf, "(");
    for (int i = 0; i < fn->param_count; i++)
        kj_buf_printf(&buf, "%s%s", i ? ", " : "", kj_type_name(fn->params[i]->type));
    kj_buf_printf(&buf, ")");
    return buf.data;
}

static kjit_status compile_module(kjit_context *context, const char *path, const char *name,
                                  const char *source, kjit_module **out, const char *api)
{
    if (!kj_api_live(context, KJ_HANDLE_CONTEXT, api))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kj_api_clear_error(context);
    if (!out)
        return kj_api_null(context, api, "out");
    *out = NULL;
    if (path ? !path[0] : !source)
        return kj_api_null(context, api, path ? "the path is empty; it" : "source");
    if (!kj_jit)
        return kj_api_set_error(context, KJIT_ERROR_COMPILE, "%s: %s", api, KJ_NO_JIT_MESSAGE);
    kjit_module *module = kj_handle_new(KJ_HANDLE_MODULE, sizeof *module);
    module->context = context;
    DiagCollector collector = {context, {0}};
    KjDiag diag = {.sink = collect_diagnostic, .user = &collector};

    const KjSource *src = path ? kj_jit->source_read(&module->arena, path, &diag)
                               : kj_jit->source_from_string(&module->arena, name, source);
    kjit_status status = KJIT_OK;
    if (!src) {
        status = KJIT_ERROR_IO;
    } else {
        module->ir = kj_jit->compile_source(&module->arena, src, context->stdlib_dirs, &diag);
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
        kj_handle_free(module);
        return status;
    }
    kj_buf_free(&collector.text);
    kj_api_module_publish(module, NULL);
    *out = module;
    return KJIT_OK;
}

void kj_api_module_publish(kjit_module *module, const uint32_t *params_written)
{
    kjit_context *context = module->context;
    module->function_count = module->ir->entries.count;
    module->functions = kj_xcalloc((size_t)(module->function_count ? module->function_count : 1),
                                   sizeof *module->functions);
    for (int i = 0; i < module->function_count; i++) {
        kjit_function *function = kj_handle_new(KJ_HANDLE_FUNCTION, sizeof *function);
        module->functions[i] = function;
        function->module = module;
        function->entry = module->ir->entries.items[i];
        int count = function->entry->variants.count;
        function->signature_text = kj_xcalloc((size_t)(count ? count : 1), sizeof(char *));
        for (int s = 0; s < count; s++)
            function->signature_text[s] = signature_text(function->entry->variants.items[s],
                                                         function->entry->kind == KJ_FN_KERNEL);
        if (params_written)
            function->params_written = params_written[i];
        else
            for (int s = 0; s < count; s++)
                function->params_written |=
                    kj_jit->ir_params_written(function->entry->variants.items[s]);
    }
    pthread_mutex_lock(&context->handles_lock);
    module->next = context->modules;
    if (module->next)
        module->next->prev = module;
    context->modules = module;
    pthread_mutex_unlock(&context->handles_lock);
}

kjit_status kjit_compile_file(kjit_context *context, const char *path, kjit_module **out)
{
    if (!path) {
        if (kj_api_live(context, KJ_HANDLE_CONTEXT, "kjit_compile_file"))
            kj_api_clear_error(context);
        return kj_api_null(context, "kjit_compile_file", "path");
    }
    return compile_module(context, path, NULL, NULL, out, "kjit_compile_file");
}

/* kjit_module_load_library's and kjit_module_load_linked's module: from the
 * file at path, or from linked. */
static kjit_status load_aot(kjit_context *context, const char *api, const char *path,
                            const KjLinkedLibrary *linked, kjit_module **out)
{
    if (!kj_api_live(context, KJ_HANDLE_CONTEXT, api))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kj_api_clear_error(context);
    if (!out || (!path && !linked))
        return kj_api_null(context, api, out ? (linked ? "table" : "path") : "out");
    *out = NULL;
    kjit_module *module = kj_handle_new(KJ_HANDLE_MODULE, sizeof *module);
    module->context = context;
    uint32_t *written = NULL;
    kjit_status status = path ? kj_aot_open(module, path, &written)
                              : kj_aot_open_linked(module, linked, &written);
    if (status != KJIT_OK) {
        kj_arena_free(&module->arena);
        kj_handle_free(module);
        return status;
    }
    kj_api_module_publish(module, written);
    *out = module;
    return KJIT_OK;
}

kjit_status kjit_module_load_library(kjit_context *context, const char *path, kjit_module **out)
{
    return load_aot(context, "kjit_module_load_library", path, NULL, out);
}

kjit_status kjit_module_load_linked(kjit_context *context, uint32_t abi, const char *name,
                                    const unsigned char *table, size_t table_size,
                                    const char *const *symbols, void *const *addresses,
                                    size_t symbol_count, kjit_module **out)
{
    KjLinkedLibrary linked = {abi, name, table, table_size, symbols, addresses, symbol_count};
    return load_aot(context, "kjit_module_load_linked", NULL, &linked, out);
}

kjit_status kjit_compile_string(kjit_context *context, const char *name, const char *source,
                                kjit_module **out)
{
    return compile_module(context, NULL, name ? name : "<string>", source, out,
                          "kjit_compile_string");
}

static void compiled_free(KjCompiled *compiled)
{
    compiled->runtime->release(compiled);
    free(compiled);
}

void kjit_module_free(kjit_module *module)
{
    if (!module)
        return; /* as free(NULL) */
    if (!kj_api_live(module, KJ_HANDLE_MODULE, "kjit_module_free"))
        return;
    kjit_context *context = module->context;
    pthread_mutex_lock(&context->handles_lock);
    if (module->prev)
        module->prev->next = module->next;
    else
        context->modules = module->next;
    if (module->next)
        module->next->prev = module->prev;
    pthread_mutex_unlock(&context->handles_lock);
    for (int i = 0; i < module->function_count; i++) {
        kjit_function *function = module->functions[i];
        for (KjCompiled *c = function->compiled, *next; c; c = next) {
            next = c->next;
            compiled_free(c);
        }
        for (int s = 0; s < function->entry->variants.count; s++)
            free(function->signature_text[s]);
        free(function->signature_text);
        kj_handle_free(function);
    }
    free(module->functions);
    kj_aot_free(module->library);
    kj_arena_free(&module->arena);
    kj_handle_free(module);
}

/* ------------------------------------------------------------ functions */

kjit_status kjit_module_function(kjit_module *module, const char *name, kjit_function **out)
{
    if (!kj_api_live(module, KJ_HANDLE_MODULE, "kjit_module_function"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kj_api_clear_error(module->context);
    if (!out || !name)
        return kj_api_null(module->context, "kjit_module_function", out ? "name" : "out");
    *out = NULL;
    for (int i = 0; i < module->function_count; i++)
        if (strcmp(module->functions[i]->entry->name, name) == 0) {
            *out = module->functions[i];
            return KJIT_OK;
        }
    KjBuf names = {0};
    for (int i = 0; i < module->function_count; i++)
        kj_buf_printf(&names, "%s%s", i ? ", " : "", module->functions[i]->entry->name);
    kj_api_set_error(module->context, KJIT_ERROR_NOT_FOUND,
                     "no function named '%s' (the module has: %s)", name,
                     names.data ? names.data : "none");
    kj_buf_free(&names);
    return KJIT_ERROR_NOT_FOUND;
}

int kjit_module_function_count(const kjit_module *module)
{
    if (!kj_api_live(module, KJ_HANDLE_MODULE, "kjit_module_function_count"))
        return 0;
    return module->function_count;
}

const char *kjit_module_function_name(const kjit_module *module, int index)
{
    if (!kj_api_live(module, KJ_HANDLE_MODULE, "kjit_module_function_name"))
        return NULL;
    if (index < 0 || index >= module->function_count)
        return NULL;
    return module->functions[index]->entry->name;
}

/* The getters below answer a harmless value for a function that is not live
 * (NULL, or freed), having said why in the thread's error. */
#define LIVE_OR(function, value)                                                               \
    do {                                                                                       \
        if (!kj_api_live(function, KJ_HANDLE_FUNCTION, __func__))                              \
            return value;                                                                      \
    } while (0)

kjit_function_kind kjit_function_kind_of(const kjit_function *function)
{
    LIVE_OR(function, KJIT_FUNCTION_PLAIN);
    switch (function->entry->kind) {
    case KJ_FN_PLAIN: return KJIT_FUNCTION_PLAIN;
    case KJ_FN_VECTORIZE: return KJIT_FUNCTION_VECTORIZE;
    case KJ_FN_KERNEL: return KJIT_FUNCTION_KERNEL;
    case KJ_FN_REDUCE: return KJIT_FUNCTION_REDUCE;
    case KJ_FN_GUVECTORIZE: return KJIT_FUNCTION_GUVECTORIZE;
    }
    kj_unreachable();
}

const char *kjit_function_name(const kjit_function *function)
{
    LIVE_OR(function, NULL);
    return function->entry->name;
}

KjIrFunction *kj_api_variant_of(const kjit_function *function, int sig)
{
    return function->entry->variants.items[sig];
}

int kjit_function_param_count(const kjit_function *function)
{
    LIVE_OR(function, 0);
    return function->entry->variants.count ? kj_api_variant_of(function, 0)->param_count : 0;
}

int kjit_function_signature_count(const kjit_function *function)
{
    LIVE_OR(function, 0);
    return function->entry->variants.count;
}

const char *kjit_function_signature(const kjit_function *function, int index)
{
    LIVE_OR(function, NULL);
    if (index < 0 || index >= function->entry->variants.count)
        return NULL;
    return function->signature_text[index];
}

kjit_status kjit_function_param(const kjit_function *function, int sig, int param,
                                kjit_dtype *dtype, int *ndim)
{
    LIVE_OR(function, KJIT_ERROR_INVALID_ARGUMENT);
    if (!dtype)
        return kj_api_null(function->module->context, __func__, "dtype");
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

int kjit_function_param_written(const kjit_function *function, int param)
{
    LIVE_OR(function, 0);
    if (!function->entry->variants.count || param < 0 ||
        param >= kj_api_variant_of(function, 0)->param_count)
        return 0;
    const KjType *type = kj_api_variant_of(function, 0)->params[param]->type;
    if (type->kind != KJ_TYPE_ARRAY)
        return 0; /* a scalar is passed by value */
    return param >= 32 || (function->params_written >> param & 1);
}

kjit_status kjit_function_result(const kjit_function *function, int sig, kjit_dtype *dtype)
{
    LIVE_OR(function, KJIT_ERROR_INVALID_ARGUMENT);
    if (!dtype)
        return kj_api_null(function->module->context, __func__, "dtype");
    if (sig < 0 || sig >= function->entry->variants.count)
        return KJIT_ERROR_INVALID_ARGUMENT;
    const KjIrFunction *fn = kj_api_variant_of(function, sig);
    if (!fn->ret || !kj_type_dtype(fn->ret, dtype))
        return KJIT_ERROR_NOT_FOUND; /* kernels and functions that return nothing */
    return KJIT_OK;
}

int kjit_function_output_count(const kjit_function *function)
{
    LIVE_OR(function, 0);
    if (function->entry->kind != KJ_FN_VECTORIZE || function->entry->variants.count == 0)
        return 0;
    int k = kj_api_variant_of(function, 0)->output_count;
    return k > 1 ? k : 1;
}

kjit_status kjit_function_output(const kjit_function *function, int sig, int output,
                                 kjit_dtype *dtype)
{
    LIVE_OR(function, KJIT_ERROR_INVALID_ARGUMENT);
    if (!dtype)
        return kj_api_null(function->module->context, __func__, "dtype");
    int count = kjit_function_output_count(function);
    if (sig < 0 || sig >= function->entry->variants.count || output < 0 || output >= count)
        return KJIT_ERROR_INVALID_ARGUMENT;
    const KjIrFunction *fn = kj_api_variant_of(function, sig);
    return kj_type_dtype(output == 0 ? fn->ret : fn->outputs[output]->type, dtype)
               ? KJIT_OK : KJIT_ERROR_NOT_FOUND;
}

/* ------------------------------------------------------ code generation */

/* The middle of the pass list for one root (pipeline.c); an internal error
 * (the IR does not verify) becomes the context's error. */
static bool middle_passes(kjit_context *context, kjit_module *module, KjPipelineRoot *root)
{
    DiagCollector collector = {context, {0}};
    KjDiag diag = {.sink = collect_diagnostic, .user = &collector};
    KjPipeline p = {.arena = &module->arena, .diag = &diag, .module = module->ir,
                    .roots = root, .root_count = 1, .stop = KJ_STAGE_ROOTS,
                    .verify = kj_jit->pipeline_verify_default(),
                    .checks = context->options.check};
    /* a kernel with barriers runs through its split form where the target
     * says so (the cpu targets, with SIMD lanes, unchecked) */
    KjCodegenOptions asked = kj_api_codegen_options(context->runtime, &context->options, NULL);
    root->split_barriers = kj_jit->codegen_splits_barriers(&asked);
    bool ok = kj_jit->pipeline_run(&p);
    if (!ok)
        kj_api_set_error(context, KJIT_ERROR_BACKEND, "%s",
                         collector.text.data ? collector.text.data : "internal error");
    kj_buf_free(&collector.text);
    return ok;
}

kjit_status kj_api_prepare_root(kjit_function *function, int sig, const KjPipelineRoot *request,
                                uint32_t contiguous, const char *lifted, KjCompiled *compiled)
{
    kjit_module *module = function->module;
    const KjVecVariant *variant = request->vectorize ? &request->variant : NULL;
    KjIrFunction *fn = kj_api_variant_of(function, sig);
    compiled->signature = sig;
    compiled->vectorized = variant != NULL;
    if (lifted)
        snprintf(compiled->lifted, sizeof compiled->lifted, "%s", lifted);
    if (variant)
        compiled->variant = *variant;
    else if (fn->kind == KJ_IR_FN_KERNEL || lifted)
        compiled->contiguous = contiguous;
    if (module->library) {
        int index = 0;
        while (module->functions[index] != function)
            index++;
        return kj_aot_find(module, index, sig, variant, compiled->contiguous, lifted, compiled);
    }
    KjPipelineRoot root = *request;
    root.fn = fn;
    if (!middle_passes(module->context, module, &root))
        return KJIT_ERROR_BACKEND;
    compiled->root = root.root;
    kj_kernel_variant_symbol(compiled->root, compiled->contiguous, compiled->symbol,
                             sizeof compiled->symbol);
    return KJIT_OK;
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
            (lifted ? strcmp(c->lifted, lifted) == 0 : c->lifted[0] == '\0'))
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
    kjit_status prepared = kj_api_prepare_root(function, sig, request, contiguous, lifted,
                                               compiled);
    if (prepared != KJIT_OK) {
        free(compiled);
        pthread_mutex_unlock(&context->lock);
        return prepared;
    }
    /* Finds (in the caches) or generates code for the root and loads it. */
    compiled->runtime = kj_runtime_for(context, compiled->root->kind);
    char prefix[256];
    snprintf(prefix, sizeof prefix, "code generation for %s failed: ", compiled->root->name);
    kjit_status status = compiled->runtime->generate(module, compiled, prefix);
    if (status != KJIT_OK) {
        compiled_free(compiled);
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
