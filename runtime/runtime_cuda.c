/*
 * runtime_cuda.c: the cuda runtime target, on top of cuda.c (one device
 * through the driver API).
 *
 * generate makes a loaded module from the cheapest thing the caches hold: a
 * cubin for this exact device, else PTX to assemble, else LLVM's PTX.  Calls
 * and launches may mix device arrays with host arrays: each host array is
 * staged (copied to the device for the one call, and the results back), so a
 * program written for the cpu targets runs here unchanged, only slower.
 * Device arrays, which kjit_call_async is measured on, pay for no staging:
 * the staging table is never even zeroed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

/* ------------------------------------------------------------- contexts */

static kjit_status cuda_open(kjit_context *context, char **error)
{
    kjit_status status = kj_cuda_probe(error);
    if (status == KJIT_OK)
        status = kj_cuda_open(context->options.device, &context->cuda, error);
    if (status != KJIT_OK)
        return status;
    /* A cubin is the driver's own compilation: it is keyed by the exact
     * device and driver as well as by what the PTX is keyed by. */
    kjit_device_info info;
    memset(&info, 0, sizeof info);
    kj_cuda_info(context->cuda, &info);
    snprintf(context->device_text, sizeof context->device_text,
             "%s, compute %d.%d, driver %d, %.100s", kj_cuda_arch(context->cuda),
             info.compute_major, info.compute_minor, info.driver_version, info.name);
    return KJIT_OK;
}

static void cuda_close(kjit_context *context)
{
    if (context->cuda)
        kj_cuda_close(context->cuda);
    context->cuda = NULL;
}

/* ------------------------------------------------------ code generation */

/*
 * A cubin (compiled for this exact device, driver and assembler) loads with
 * no JIT at all; else cached PTX is assembled; else LLVM makes the PTX.  The
 * toolkit's ptxas assembles whole-program when there is one (ptxas.c says
 * why), else the driver's linker; if ptxas's cubin does not load (a driver
 * older than the toolkit), the linker takes the same PTX.  What was made is
 * kept in both tiers.
 */
/* Cancellable code polls the context's flag in mapped host memory at the
 * device address in the module's KJ_CANCEL_WORD_SYMBOL (a module without
 * loops has none). */
static kjit_status bind_cancel(kjit_context *context, KjCudaModule *loaded, char **error)
{
    size_t bytes = 0;
    void *page = kj_cancel_device_page(context->cancel, &bytes);
    uint64_t device = 0;
    kjit_status status = kj_cuda_map_host(context->cuda, page, bytes, &device, error);
    if (status != KJIT_OK)
        return status;
    status = kj_cuda_module_set_global(loaded, KJ_CANCEL_WORD_SYMBOL, &device, sizeof device, error);
    return status == KJIT_ERROR_NOT_FOUND ? KJIT_OK : status;
}

/* The kernel of what was loaded (compiled->code owns it) and the cancel flag. */
static kjit_status bind_loaded(kjit_context *context, KjCompiled *compiled, KjCudaModule *loaded,
                               kjit_status status, char *error)
{
    compiled->code = loaded; /* release frees it if the kernel is not found */
    double span = kj_trace_now();
    if (status == KJIT_OK)
        status = kj_cuda_function(loaded, compiled->symbol, &compiled->entry, &error);
    kj_trace("root: cuModuleGetFunction", span);
    if (status == KJIT_OK && context->options.cancellable)
        status = bind_cancel(context, loaded, &error);
    if (status != KJIT_OK)
        return kj_api_take_error(context, status, "", error);
    return KJIT_OK;
}

static kjit_status cuda_generate(kjit_module *module, KjCompiled *compiled, const char *prefix)
{
    kjit_context *context = module->context;
    if (module->library) { /* a library's code for this device (aot_cuda.c) */
        char *error = NULL;
        KjCudaModule *loaded = NULL;
        kjit_status status = kj_aot_cuda_load(module, compiled, &loaded, &error);
        if (status != KJIT_OK)
            return kj_api_take_error(context, status, prefix, error);
        return bind_loaded(context, compiled, loaded, status, error);
    }
    KjIrFunction *root = compiled->root;
    const char *arch = context->options.cuda_arch ? context->options.cuda_arch
                                                  : kj_cuda_arch(context->cuda);
    const char *ptxas = kj_ptxas_path();
    KjCacheWarn warn = kj_context_cache_warn(context);
    KjCacheKey ptx_key = {0}, cubin_key = {0};
    kj_api_code_key(module, compiled, &ptx_key);
    kj_cache_key_add(&ptx_key, "target", "cuda %s", arch);
    kj_cache_key_add(&ptx_key, "whole-program", "%d", ptxas != NULL);
    kj_cache_key_finish(&ptx_key);
    kj_api_code_key(module, compiled, &cubin_key);
    kj_cache_key_add(&cubin_key, "target", "cuda %s", arch);
    kj_cache_key_add(&cubin_key, "device", "%s", context->device_text);
    kj_cache_key_add(&cubin_key, "assembler", "%s", kj_ptxas_identity());
    kj_cache_key_finish(&cubin_key);

    char *error = NULL;
    kjit_status status = KJIT_ERROR_BACKEND;
    KjCudaModule *loaded = NULL;
    void *data = NULL;
    size_t size = 0;
    if (kj_cache_fetch(&cubin_key, KJ_CACHE_CUBIN, &data, &size, &warn)) {
        status = kj_cuda_load_cubin(context->cuda, data, size, &loaded, NULL);
        free(data);
    }
    if (status != KJIT_OK) {
        char *ptx = NULL;
        if (kj_cache_fetch(&ptx_key, KJ_CACHE_PTX, &data, &size, &warn)) {
            ptx = data;
        } else {
            kj_cache_count_compile();
            KjCodegenOptions options =
                kj_api_codegen_options(context->runtime, &context->options, compiled);
            options.cuda_arch = arch;
            options.cuda_whole_program = ptxas != NULL;
            ptx = kj_jit->ptx_generate(module->ir, &root, 1, &options, &error);
            if (!ptx) {
                kj_cache_key_free(&ptx_key);
                kj_cache_key_free(&cubin_key);
                return kj_api_take_error(context, KJIT_ERROR_BACKEND, prefix, error);
            }
            kj_cache_keep(&ptx_key, KJ_CACHE_PTX, ptx, strlen(ptx), &warn);
        }
        void *cubin = NULL;
        size_t cubin_size = 0;
        char *ptxas_error = NULL;
        if (ptxas && kj_ptxas_compile(ptx, kj_cuda_arch(context->cuda), &cubin, &cubin_size,
                                      &ptxas_error) == KJIT_OK) {
            status = kj_cuda_load_cubin(context->cuda, cubin, cubin_size, &loaded, &ptxas_error);
            if (status != KJIT_OK) {
                free(cubin);
                cubin = NULL;
            }
        }
        if (status != KJIT_OK)
            status = kj_cuda_load_ptx(context->cuda, ptx, &loaded, &cubin, &cubin_size, &error);
        if (status != KJIT_OK && ptxas_error) {
            KjBuf both = {0};
            kj_buf_printf(&both, "%s (ptxas, tried first: %s)", error ? error : "", ptxas_error);
            free(error);
            error = both.data;
        }
        free(ptxas_error);
        free(ptx);
        if (status == KJIT_OK && cubin)
            kj_cache_keep(&cubin_key, KJ_CACHE_CUBIN, cubin, cubin_size, &warn);
        free(cubin);
    }
    kj_cache_key_free(&ptx_key);
    kj_cache_key_free(&cubin_key);
    return bind_loaded(context, compiled, loaded, status, error);
}

static void cuda_release(KjCompiled *compiled)
{
    if (compiled->code)
        kj_cuda_module_free(compiled->code);
}

/* -------------------------------------------------------------- staging */

/* A host array copied to the device for one call. */
typedef struct Staged {
    const kjit_array *host;
    char *device; /* the copy of the bytes [low, high) of host->data */
    int64_t low, high;
    bool copy_back;
} Staged;

typedef struct Staging {
    Staged items[KJ_MAX_VEC_INPUTS + 64];
    int count;
} Staging;

/* Copies the bytes a host view touches to the device (when copy_in) and
 * returns the device address that stands for host->data. */
static kjit_status stage(kjit_context *context, Staging *staging, const kjit_array *host,
                         bool copy_in, bool copy_back, void **device_data)
{
    if (staging->count == (int)(sizeof staging->items / sizeof staging->items[0]))
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "too many host arrays in one call");
    Staged *st = &staging->items[staging->count];
    st->host = host;
    st->copy_back = copy_back;
    kj_array_extent(host, &st->low, &st->high);
    size_t bytes = (size_t)(st->high - st->low);
    char *error = NULL;
    void *device = NULL;
    kjit_status status = kj_cuda_alloc(context->cuda, bytes ? bytes : 1, &device, &error);
    if (status != KJIT_OK)
        return kj_api_take_error(context, status, "", error);
    st->device = device;
    staging->count++;
    if (copy_in && bytes) {
        status = kj_cuda_copy_to_device(context->cuda, st->device, (char *)host->data + st->low,
                                        bytes, NULL, &error);
        if (status != KJIT_OK)
            return kj_api_take_error(context, status, "", error);
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
            kj_api_take_error(context, status, "", error), error = NULL;
    }
    for (int i = 0; i < staging->count; i++) {
        Staged *st = &staging->items[i];
        size_t bytes = (size_t)(st->high - st->low);
        if (status == KJIT_OK && st->copy_back && bytes) {
            status = kj_cuda_copy_to_host(context->cuda, (char *)st->host->data + st->low,
                                          st->device, bytes, NULL, &error);
            if (status != KJIT_OK)
                kj_api_take_error(context, status, "", error), error = NULL;
        }
        kj_cuda_free(context->cuda, st->device, &error);
        free(error);
        error = NULL;
    }
    staging->count = 0;
    return status;
}

/* -------------------------------------------------------------- running */

bool kj_vectorized_stages_input(const KjVectorizedRun *run, int i)
{
    return run->inputs[i] && !(run->plan->variant.scalar_mask & (1u << i)) &&
           run->inputs[i]->memory == KJIT_MEMORY_HOST;
}

/* The most bytes a vectorized call's packed parameters take: every operand
 * a whole descriptor, and checked mode's record.  (The driver takes 4 KiB of
 * parameters on every GPU kjit runs on; past that the pointers go.) */
#define PACKED_CAPACITY ((KJ_MAX_VEC_INPUTS + 1) * sizeof(KjArrayDesc) + 8)
#define PACKED_LIMIT 4096

/* One parameter's bytes: the sizes a call's parameters have (a scalar, a
 * 1-d contiguous array's {data, extent}) as fixed-size copies the compiler
 * makes moves of, not calls (the packing must cost the host less than the
 * driver's copy of each parameter saves). */
static inline void copy_param(unsigned char *to, const void *from, size_t size)
{
    switch (size) {
    case 1: memcpy(to, from, 1); return;
    case 2: memcpy(to, from, 2); return;
    case 4: memcpy(to, from, 4); return;
    case 8: memcpy(to, from, 8); return;
    case 16: memcpy(to, from, 16); return;
    case 24: memcpy(to, from, 24); return;
    default: memcpy(to, from, size); return;
    }
}

/*
 * A vectorized kernel's parameters packed as its .entry lays them out
 * (kjit_backend.h's kj_cuda_entry_param, the rule target_cuda.c builds the
 * .entry by), for cuLaunchKernel's `extra`: in order, each at the next
 * multiple of its alignment, with no padding after the last; every array
 * C-contiguous or none (the CONTIG layout); in checked mode the record's
 * device address last.  What the driver would copy from each of params'
 * pointers, copied here once: *bytes 0 (pass params) when the root is no
 * vectorized kernel or the block would pass the driver's limit.
 */
static void pack_params(const kjit_context *context, const KjCompiled *compiled, void **params,
                        unsigned char *packed, size_t *bytes)
{
    const KjIrFunction *root = compiled->root;
    *bytes = 0;
    if (root->kind != KJ_IR_FN_VEC_KERNEL)
        return;
    size_t at = 0;
    int count = root->param_count + (context->options.check ? 1 : 0);
    for (int i = 0; i < count; i++) {
        const KjType *type = i < root->param_count ? root->params[i]->type : NULL;
        KjCudaParam param = kj_cuda_entry_param(type, root->contiguous);
        at = (at + param.align - 1) / param.align * param.align;
        if (at + param.size > PACKED_LIMIT)
            return;
        copy_param(packed + at, params[i], param.size);
        at += param.size;
    }
    *bytes = at;
}

static kjit_status cuda_run_vectorized(kjit_context *context, KjVectorizedRun *run)
{
    KjBroadcastPlan *plan = run->plan;
    kjit_status status = KJIT_OK;
    Staging staging; /* not zeroed: only `count` items are ever read */
    staging.count = 0;
    for (int i = 0; i < run->input_count && status == KJIT_OK; i++) {
        /* outputs 1.. of a function of several come last: written back */
        bool output = i >= run->input_count - run->extra_outputs;
        if (kj_vectorized_stages_input(run, i))
            status = stage(context, &staging, run->inputs[i],
                           !output || !kj_array_is_contiguous(run->inputs[i]), output,
                           &plan->inputs[i].data);
    }
    if (status == KJIT_OK && run->output->memory == KJIT_MEMORY_HOST)
        status = stage(context, &staging, run->output, !kj_array_is_contiguous(run->output), true,
                       &plan->output.data);
    if (status == KJIT_OK) {
        char *error = NULL;
        /* not zeroed: only the bytes pack_params writes are passed */
        _Alignas(8) unsigned char packed[PACKED_CAPACITY];
        size_t bytes = 0;
        if (kj_cuda_packs_params(context->cuda))
            pack_params(context, run->compiled, run->params, packed, &bytes);
        status = kj_cuda_launch_elementwise(context->cuda, run->compiled->entry,
                                            run->compiled->root->symbol, plan->size, run->params,
                                            bytes ? packed : NULL, bytes,
                                            run->stream ? run->stream->handle : NULL, &error);
        if (status != KJIT_OK)
            kj_api_take_error(context, status, "", error);
    }
    return unstage(context, &staging, status);
}

static kjit_status cuda_launch(kjit_context *context, KjLaunch *launch)
{
    kjit_status status = KJIT_OK;
    Staging staging; /* not zeroed: only `count` items are ever read */
    staging.count = 0;
    for (int i = 0; i < launch->arg_count && status == KJIT_OK; i++) {
        const kjit_arg *arg = &launch->args[i];
        if (arg->kind == KJIT_ARG_ARRAY && arg->value.array->memory == KJIT_MEMORY_HOST)
            /* back to the host only if the kernel may have written it (the
             * host's may be read-only memory) */
            status = stage(context, &staging, arg->value.array, true,
                           i >= 32 || (launch->written >> i & 1), &launch->descs[i].data);
    }
    /* local() sized at launch: a scratch of the grid's threads times their
     * bytes (target_cuda.c lays it out), after the arguments and checked
     * mode's record; freed once the kernel is done */
    void *scratch = NULL;
    if (status == KJIT_OK && launch->compiled->root->launch_locals.count > 0) {
        uint64_t threads = 1;
        for (int d = 0; d < 3; d++)
            threads *= (uint64_t)launch->grid[d] * launch->block[d];
        char *error = NULL;
        if (threads > SIZE_MAX / launch->launch_local_bytes)
            status = kj_api_set_error(context, KJIT_ERROR_OUT_OF_MEMORY,
                                      "%s: %llu threads of %zu bytes of local() sized at launch "
                                      "do not fit the address space", launch->name,
                                      (unsigned long long)threads, launch->launch_local_bytes);
        else
            status = kj_cuda_alloc(context->cuda, threads * launch->launch_local_bytes, &scratch,
                                   &error);
        if (status == KJIT_OK)
            launch->params[launch->arg_count + (context->options.check ? 1 : 0)] = &scratch;
        else if (error)
            kj_api_take_named_error(context, status, launch->name, error);
    }
    if (status == KJIT_OK) {
        char *error = NULL;
        /* a kernel with syncgrid() is launched cooperatively */
        status = kj_cuda_launch_ex(context->cuda, launch->compiled->entry,
                                   launch->compiled->root->symbol, launch->grid, launch->block,
                                   launch->dynamic_shared_bytes,
                                   launch->compiled->root->uses_syncgrid, launch->params,
                                   launch->stream ? launch->stream->handle : NULL, &error);
        if (status != KJIT_OK)
            kj_api_take_error(context, status, "", error);
    }
    if (scratch) {
        char *error = NULL;
        kjit_status done = status == KJIT_OK ? kj_cuda_stream_sync(
                                                   context->cuda, launch->stream ? launch->stream->handle : NULL, &error)
                                             : KJIT_OK;
        if (done != KJIT_OK)
            status = kj_api_take_error(context, done, "", error), error = NULL;
        kj_cuda_free(context->cuda, scratch, &error);
        free(error);
    }
    return unstage(context, &staging, status);
}

/* --------------------------------------------------------------- memory */

/* A LANES level takes the elementwise launch shape (a thread per work item,
 * grid-stride); a WARPS level blocks of 8 warps, each warp taking V work
 * items (V lanes a thread; one item a warp when V is 0); a COLUMNS level
 * blocks of 32 work items, L / V warps each. */
static kjit_status cuda_run_items(kjit_context *context, const KjItemsRun *run)
{
    if (run->items <= 0)
        return KJIT_OK;
    const KjCompiled *c = run->compiled;
    KjCudaStream *stream = run->stream ? run->stream->handle : NULL;
    char *error = NULL;
    kjit_status status;
    if (!run->warps && !run->columns) {
        status = kj_cuda_launch_elementwise(context->cuda, c->entry, c->root->symbol, run->items,
                                            run->params, NULL, 0, stream, &error);
    } else {
        int64_t per_block;
        uint32_t threads;
        kj_items_block_shape(run, &per_block, &threads);
        int64_t blocks = (run->items + per_block - 1) / per_block;
        if (blocks > INT32_MAX)
            return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                    "%s: too many outputs for one reduction", run->name);
        uint32_t grid[3] = {(uint32_t)blocks, 1, 1};
        uint32_t block[3] = {threads, 1, 1};
        status = kj_cuda_launch_ex(context->cuda, c->entry, c->root->symbol, grid, block, 0,
                                   false, run->params, stream, &error);
    }
    if (status != KJIT_OK)
        kj_api_take_named_error(context, status, run->name, error);
    return status;
}

static kjit_status cuda_alloc(kjit_context *context, size_t bytes, void **data)
{
    char *error = NULL;
    kjit_status status = kj_cuda_alloc(context->cuda, bytes ? bytes : 1, data, &error);
    if (status != KJIT_OK)
        return kj_api_take_error(context, status, "", error);
    return KJIT_OK;
}

static kjit_status cuda_free(kjit_context *context, void *data)
{
    char *error = NULL;
    kjit_status status = kj_cuda_free(context->cuda, data, &error);
    if (status != KJIT_OK)
        kj_api_take_error(context, status, "", error);
    return status;
}

/* Host arrays are plain memory whatever context made them, so the direction
 * follows each side's memory; device arrays of two different GPUs (which
 * unified addressing tells apart) go through cuda_peer.c. */
static kjit_status cuda_copy(kjit_context *context, kjit_array *dst, const kjit_array *src,
                             size_t bytes, kjit_stream *stream)
{
    bool dst_device = dst->memory == KJIT_MEMORY_DEVICE;
    bool src_device = src->memory == KJIT_MEMORY_DEVICE;
    KjCudaStream *s = stream ? stream->handle : NULL;
    char *error = NULL;
    kjit_status status = KJIT_OK;
    if (!dst_device && !src_device) {
        memmove(dst->data, src->data, bytes);
    } else if (dst_device && !src_device) {
        status = kj_cuda_copy_to_device(context->cuda, dst->data, src->data, bytes, s, &error);
    } else if (!dst_device && src_device) {
        status = kj_cuda_copy_to_host(context->cuda, dst->data, src->data, bytes, s, &error);
    } else {
        int to = kj_cuda_pointer_device(context->cuda, dst->data);
        int from = kj_cuda_pointer_device(context->cuda, src->data);
        if (to >= 0 && from >= 0 && to != from)
            status = kj_cuda_copy_peer(context->cuda, to, dst->data, from, src->data, bytes, s,
                                       &error);
        else
            status = kj_cuda_copy_on_device(context->cuda, dst->data, src->data, bytes, s,
                                            &error);
    }
    if (status != KJIT_OK)
        kj_api_take_error(context, status, "kjit_copy: ", error);
    return status;
}

/* ------------------------------------------------------ streams, events */

static kjit_status cuda_stream_create(kjit_context *context, kjit_stream *stream)
{
    char *error = NULL;
    KjCudaStream *handle = NULL;
    kjit_status status = kj_cuda_stream_create(context->cuda, &handle, &error);
    if (status != KJIT_OK)
        return kj_api_take_error(context, status, "", error);
    stream->handle = handle;
    return KJIT_OK;
}

static kjit_status cuda_synchronize(kjit_context *context, kjit_stream *stream)
{
    char *error = NULL;
    kjit_status status = kj_cuda_stream_sync(context->cuda, stream ? stream->handle : NULL,
                                             &error);
    if (status != KJIT_OK)
        kj_api_take_error(context, status, "", error);
    return status;
}

static void cuda_stream_destroy(kjit_stream *stream)
{
    if (stream->handle)
        kj_cuda_stream_destroy(stream->context->cuda, stream->handle);
}

static kjit_status cuda_event_record(kjit_context *context, kjit_stream *stream, kjit_event *event)
{
    char *error = NULL;
    KjCudaEvent *handle = NULL;
    kjit_status status = kj_cuda_event_record(context->cuda, stream ? stream->handle : NULL,
                                              &handle, &error);
    if (status != KJIT_OK)
        return kj_api_take_error(context, status, "", error);
    event->handle = handle;
    return KJIT_OK;
}

static kjit_status cuda_event_elapsed(kjit_event *start, kjit_event *end, double *milliseconds)
{
    kjit_context *context = start->context;
    char *error = NULL;
    kjit_status status = kj_cuda_event_elapsed(context->cuda, start->handle, end->handle,
                                               milliseconds, &error);
    if (status != KJIT_OK)
        kj_api_take_error(context, status, "", error);
    return status;
}

static void cuda_event_destroy(kjit_event *event)
{
    if (event->handle)
        kj_cuda_event_destroy(event->context->cuda, event->handle);
}

/* ------------------------------------------------------------- the target */

const KjRuntimeTarget kj_runtime_cuda = {
    .name = "cuda",
    .device_memory_on_host = false,
    .codegen = KJ_CODEGEN_CUDA,
    .open = cuda_open,
    .close = cuda_close,
    .generate = cuda_generate,
    .release = cuda_release,
    .call = NULL, /* plain functions run on the host: kj_runtime_for */
    .run_vectorized = cuda_run_vectorized,
    .launch = cuda_launch,
    .reduce_in_warps = true,
    .runs_libraries = true, /* their cuda code (aot_cuda.c) */
    .run_items = cuda_run_items,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy = cuda_copy,
    .stream_create = cuda_stream_create,
    .synchronize = cuda_synchronize,
    .stream_destroy = cuda_stream_destroy,
    .event_record = cuda_event_record,
    .event_elapsed = cuda_event_elapsed,
    .event_destroy = cuda_event_destroy,
};
