/*
 * runtime_cpu.c: the cpu and parallel runtime targets, which run code on the
 * host and differ only in the thread pool (parallel opens one; cpu runs
 * everything on the calling thread).  Plain functions of every context run
 * here too (kj_runtime_for).
 *
 * Host code travels as object files: generate finds one in the cache or has
 * LLVM make one, links it and looks up its entry points.  Loaded code is
 * shared by the whole process by cache key.  "Device" memory is ordinary
 * host memory, streams have nothing to wait for (a call is done when it
 * returns) and events read the monotonic clock.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kjit_runtime.h"

/* ------------------------------------------------------------- contexts */

static kjit_status cpu_open(kjit_context *context, char **error)
{
    return KJIT_OK;
}

static kjit_status parallel_open(kjit_context *context, char **error)
{
    context->pool = kj_pool_create(context->options.num_threads);
    return KJIT_OK;
}

static void cpu_close(kjit_context *context)
{
    kj_pool_destroy(context->pool);
    context->pool = NULL;
}

/* ------------------------------------------------------ code generation */

/*
 * Loaded cpu code is shared by every context and module of the process that
 * asks for the same key (the same source, function, variant, host and
 * options): a second kjit_compile_string of one text finds its functions
 * already linked.  The last user unloads it; its object bytes stay in the
 * cache's memory tier.
 */
/* The __block of a kernel with a split form compiled for one block shape
 * (kj_split_specialise), kept with the shared code it specialises. */
typedef struct KjShapeCode {
    struct KjShapeCode *next;
    uint32_t dims[3];
    KjCpuCode *code;
    void *block;
    void *blocks; /* its __blocks */
    bool shared_written; /* kj_split_writes_shared: no zeroing of shared memory */
} KjShapeCode;

typedef struct KjSharedCpu {
    struct KjSharedCpu *next;
    KjCacheKey key;
    KjCpuCode *code;
    void *entry, *block;
    void *xrange; /* a kernel's __xrange (KjGridRows), or NULL */
    KjRowsCut rows_cut; /* how its rows are cut (read when loaded) */
    KjShapeCode *shapes; /* under shared_lock; only grows while loaded */
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
        kj_jit->cpu_code_free(fresh->code);
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
        while (shared->shapes) {
            KjShapeCode *shape = shared->shapes;
            shared->shapes = shape->next;
            kj_jit->cpu_code_free(shape->code);
            free(shape);
        }
        kj_jit->cpu_code_free(shared->code);
        kj_cache_key_free(&shared->key);
        free(shared);
    }
}

/* The JIT's symbols as print.c and cancel.c look them up. */
static void *jit_lookup(void *code, const char *symbol)
{
    return kj_jit->cpu_lookup(code, symbol);
}

static void *lookup(KjCpuCode *code, const char *symbol, const char *suffix)
{
    char name[512];
    snprintf(name, sizeof name, "%s%s", symbol, suffix);
    return kj_jit->cpu_lookup(code, name);
}

static void use_shared(KjCompiled *compiled, KjSharedCpu *shared)
{
    compiled->code = shared;
    compiled->entry = shared->entry;
    compiled->block = shared->block;
}

/* Whether every launch of a compiled kernel with a split form runs code
 * compiled for its block shape (launch_shape) or its fibers: cpu_simd and
 * cpu_specialise on, checked or not (a checked launch of values runs its
 * shape's code, shape_wanted; the race checker the fibers' __thread).  Its
 * general code then leaves the split form's __block out
 * (KjCodegenOptions.split_shapes_only): only __thread and the shapes' code
 * run. */
static bool shapes_only(const kjit_context *context, const KjIrFunction *root)
{
    return root->kind == KJ_IR_FN_KERNEL && root->split && context->options.cpu_simd &&
           context->options.cpu_specialise && !root->unchecked;
}

/* The key of a compiled function's host code: the module's and the
 * function's, and this host. */
static void cpu_code_key(kjit_module *module, const KjCompiled *compiled, KjCacheKey *key)
{
    kj_api_code_key(module, compiled, key);
    kj_cache_key_add(key, "target", "cpu %s", kj_jit->host_cpu_description());
    if (shapes_only(module->context, compiled->root))
        kj_cache_key_add(key, "split", "shapes only");
}

static kjit_status cpu_generate(kjit_module *module, KjCompiled *compiled, const char *prefix)
{
    if (module->library)
        return kj_aot_generate(module, compiled, prefix);
    kjit_context *context = module->context;
    KjIrFunction *root = compiled->root;
    KjCacheWarn warn = kj_context_cache_warn(context);
    KjCacheKey key = {0};
    cpu_code_key(module, compiled, &key);
    kj_cache_key_finish(&key);
    KjSharedCpu *shared = shared_cpu_find(&key);
    if (shared) {
        kj_cache_count_shared_hit();
        kj_cache_key_free(&key);
        use_shared(compiled, shared);
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
    if (kj_cache_fetch(&key, KJ_CACHE_CPU_OBJECT, &object, &size, &warn)) {
        code = kj_jit->cpu_load_object(object, size, NULL);
        entry = code ? lookup(code, compiled->symbol, suffix) : NULL;
        if (!entry) {
            kj_jit->cpu_code_free(code);
            code = NULL;
        }
        free(object);
    }
    if (!code) {
        kj_cache_count_compile();
        KjCodegenOptions options = kj_api_codegen_options(context->runtime, &context->options, compiled);
        options.split_shapes_only = shapes_only(context, root);
        object = kj_jit->cpu_compile_object(module->ir, &root, 1, &options, &size, &error);
        if (!object) {
            kj_cache_key_free(&key);
            return kj_api_take_error(context, KJIT_ERROR_BACKEND, prefix, error);
        }
        code = kj_jit->cpu_load_object(object, size, &error);
        entry = code ? lookup(code, compiled->symbol, suffix) : NULL;
        if (entry)
            kj_cache_keep(&key, KJ_CACHE_CPU_OBJECT, object, size, &warn);
        free(object);
        if (!code) {
            kj_cache_key_free(&key);
            return kj_api_take_error(context, KJIT_ERROR_BACKEND, prefix, error);
        }
        if (!entry) {
            kj_jit->cpu_code_free(code);
            kj_cache_key_free(&key);
            return kj_api_set_error(context, KJIT_ERROR_BACKEND, "%sthe generated code has no %s%s",
                                    prefix, compiled->symbol, suffix);
        }
    }
    kj_print_bind(jit_lookup, code);
    kj_cancel_bind(jit_lookup, code);
    shared = kj_xcalloc(1, sizeof *shared);
    shared->key = key;
    shared->code = code;
    shared->entry = entry;
    if (root->kind == KJ_IR_FN_KERNEL) {
        shared->block = lookup(code, compiled->symbol, "__block");
        shared->xrange = root->grid_rows.ok ? lookup(code, compiled->symbol, "__xrange") : NULL;
        shared->rows_cut = kj_cpu_rows_cut_setting();
    }
    use_shared(compiled, shared_cpu_publish(shared));
    return KJIT_OK;
}

static void cpu_release(KjCompiled *compiled)
{
    if (compiled->code)
        shared_cpu_release(compiled->code);
}

/* -------------------------------------------------------------- running */

static void cpu_call(const KjCompiled *compiled, void **params, void *result)
{
    ((KjEntryFn)compiled->entry)(params, result);
}

/* A vectorized call's output walked in index order, one element after the
 * other (the plan merged it into one contiguous dimension): the elements a
 * 64-byte line holds and the index of the first that starts one, for
 * kj_cpu_run_range; else 0, 0. */
static void output_lines(const KjVectorizedRun *run, int64_t *lead, int64_t *line)
{
    *lead = *line = 0;
    const KjBroadcastPlan *plan = run->plan;
    size_t size = run->output ? kjit_dtype_size(run->output->dtype) : 0;
    if (plan->ndim != 1 || plan->output.strides[0] != 1 || size == 0 || 64 % size != 0)
        return;
    uintptr_t address = (uintptr_t)plan->output.data;
    if (address % size != 0)
        return;
    *line = (int64_t)(64 / size);
    *lead = (int64_t)((64 - address % 64) % 64 / size);
}

static kjit_status cpu_run_vectorized(kjit_context *context, KjVectorizedRun *run)
{
    int64_t lead, line;
    output_lines(run, &lead, &line);
    kj_cpu_run_range(context->pool, (KjRangeFn)run->compiled->entry, run->params, run->plan->size, lead,
                     line);
    return KJIT_OK;
}

/* ------------------------------------------- code for one block shape */

/* The code for dims among shared's shapes, or NULL; under shared_lock. */
static KjShapeCode *shape_search(KjSharedCpu *shared, const uint32_t dims[3])
{
    KjShapeCode *s = shared->shapes;
    while (s && memcmp(s->dims, dims, sizeof s->dims) != 0)
        s = s->next;
    return s;
}

static const KjShapeCode *shape_find(KjSharedCpu *shared, const uint32_t dims[3])
{
    pthread_mutex_lock(&shared_lock);
    const KjShapeCode *found = shape_search(shared, dims);
    pthread_mutex_unlock(&shared_lock);
    return found;
}

/* Adds fresh code for a shape; when another thread was quicker (a context
 * beside this one sharing the code), keeps theirs. */
static const KjShapeCode *shape_publish(KjSharedCpu *shared, KjShapeCode *fresh)
{
    pthread_mutex_lock(&shared_lock);
    KjShapeCode *found = shape_search(shared, fresh->dims);
    if (!found) {
        fresh->next = shared->shapes;
        shared->shapes = fresh;
    }
    pthread_mutex_unlock(&shared_lock);
    if (found) {
        kj_jit->cpu_code_free(fresh->code);
        free(fresh);
        return found;
    }
    return fresh;
}

/* A diagnostic sink that keeps the text (the pipeline reports an internal
 * error through it). */
static void collect_text(void *user, KjSeverity severity, const char *formatted)
{
    kj_buf_printf(user, "%s", formatted);
}

/* The split form's __block for blocks of `dims`, from the cache or compiled
 * now (under the context's lock, as all code generation from a module's IR
 * is).  NULL with *error set when it cannot be made (a compiler bug). */
static const KjShapeCode *shape_generate(kjit_context *context, kjit_module *module,
                                         const KjCompiled *compiled, const uint32_t dims[3],
                                         char **error)
{
    KjCacheWarn warn = kj_context_cache_warn(context);
    KjCacheKey key = {0};
    cpu_code_key(module, compiled, &key);
    kj_cache_key_add(&key, "block", "%u %u %u", (unsigned)dims[0], (unsigned)dims[1], (unsigned)dims[2]);
    kj_cache_key_finish(&key);
    KjCpuCode *code = NULL;
    void *block = NULL, *object = NULL;
    size_t size = 0;
    if (kj_cache_fetch(&key, KJ_CACHE_CPU_OBJECT, &object, &size, &warn)) {
        code = kj_jit->cpu_load_object(object, size, NULL);
        block = code ? lookup(code, compiled->symbol, "__block") : NULL;
        free(object);
        object = NULL;
    }
    /* the pass list's stage for a launch shape (pipeline.c): the split form
     * specialised for dims, and verified with KJIT_VERIFY */
    KjArena arena = {0};
    KjBuf failures = {0};
    KjDiag diag = {.sink = collect_text, .user = &failures};
    KjPipelineRoot shaped = {.fn = compiled->root, .split_barriers = true,
                             .block = {dims[0], dims[1], dims[2]}};
    KjPipeline pipeline = {.arena = &arena, .diag = &diag, .module = module->ir, .roots = &shaped,
                           .root_count = 1, .stop = KJ_STAGE_ROOTS,
                           .verify = kj_jit->pipeline_verify_default()};
    if (!kj_jit->pipeline_run(&pipeline)) {
        *error = failures.data ? failures.data : kj_xstrdup("internal error");
        kj_arena_free(&arena);
        kj_jit->cpu_code_free(code);
        kj_cache_key_free(&key);
        return NULL;
    }
    kj_buf_free(&failures);
    KjIrFunction *root = shaped.root->split ? shaped.root : NULL;
    bool shared_written = root && kj_jit->split_writes_shared(root, dims);
    if (!block) {
        kj_jit->cpu_code_free(code);
        code = NULL;
        kj_cache_count_compile();
        /* launch_shape asks for none with cpu_simd off or the race checker on */
        KjCodegenOptions options = kj_api_codegen_options(context->runtime, &context->options, compiled);
        memcpy(options.block_dims, dims, sizeof options.block_dims);
        char *failure = NULL;
        object = root ? kj_jit->cpu_compile_object(module->ir, &root, 1, &options, &size, &failure) : NULL;
        code = object ? kj_jit->cpu_load_object(object, size, &failure) : NULL;
        block = code ? lookup(code, compiled->symbol, "__block") : NULL;
        if (block)
            kj_cache_keep(&key, KJ_CACHE_CPU_OBJECT, object, size, &warn);
        else if (root) {
            KjBuf message = {0};
            kj_buf_printf(&message, "code generation for blocks of %u x %u x %u failed: %s", (unsigned)dims[0],
                          (unsigned)dims[1], (unsigned)dims[2], failure ? failure : "no __block entry");
            *error = message.data;
        }
        free(failure);
        free(object);
    }
    kj_cache_key_free(&key);
    kj_arena_free(&arena);
    if (!block) {
        kj_jit->cpu_code_free(code);
        return NULL;
    }
    kj_print_bind(jit_lookup, code);
    kj_cancel_bind(jit_lookup, code);
    KjShapeCode *shape = kj_xcalloc(1, sizeof *shape);
    memcpy(shape->dims, dims, sizeof shape->dims);
    shape->code = code;
    shape->block = block;
    shape->blocks = lookup(code, compiled->symbol, "__blocks");
    shape->shared_written = shared_written;
    return shape_publish(compiled->code, shape);
}

/* Whether a launch runs code specialised for its block dims, when there
 * is some: a kernel with a split form, cpu_simd on, not the race checker
 * (checked launches of values run their shape's code, its checks on lanes;
 * a library's shapes are unchecked code), unless cpu_specialise is off. */
static bool shape_wanted(const kjit_context *context, const KjLaunch *launch)
{
    const uint32_t *dims = launch->block;
    return shapes_only(context, launch->compiled->root) &&
           !(context->options.check & KJIT_CHECK_RACE) && launch->module &&
           !(launch->module->library && context->options.check) &&
           (uint64_t)dims[0] * dims[1] * dims[2] <= KJ_MAX_BLOCK_THREADS && dims[0] != 0;
}

/* The code for a launch's block dims, for a kernel with a split form
 * (cpu_simd on, checked mode too, not the race checker) unless
 * cpu_specialise is off; NULL: the general __block runs. */
static const KjShapeCode *launch_shape(kjit_context *context, const KjLaunch *launch, char **error)
{
    const KjCompiled *compiled = launch->compiled;
    const uint32_t *dims = launch->block;
    /* a library's shapes are those it was built with (cpu_launch) */
    if (!shape_wanted(context, launch) || launch->module->library)
        return NULL;
    const KjShapeCode *shape = shape_find(compiled->code, dims);
    if (shape)
        return shape;
    pthread_mutex_lock(&context->lock);
    shape = shape_find(compiled->code, dims);
    if (!shape)
        shape = shape_generate(context, launch->module, compiled, dims, error);
    pthread_mutex_unlock(&context->lock);
    return shape;
}

/* KJIT_CPU_ROWS=0 runs kernels of the grid_rows form by blocks, as before
 * (for measuring; the results are the same). */
static bool rows_switched_on(void)
{
    static _Atomic int on = -1;
    if (on < 0) {
        const char *env = getenv("KJIT_CPU_ROWS");
        on = !(env && strcmp(env, "0") == 0);
    }
    return on;
}

/*
 * A kernel of the grid_rows form (grid_rows.c) as rows of its grid
 * (kj_cpu_run_rows), the rows cut on its output's lines: unchecked launches
 * of code that has the __xrange entry, blocks that kjit_launch takes.  False
 * when it did not run so (the caller runs it by blocks).
 */
static bool cpu_launch_rows(kjit_context *context, const KjLaunch *launch)
{
    const KjCompiled *compiled = launch->compiled;
    const KjGridRows *form = &compiled->root->grid_rows;
    const uint32_t *b = launch->block;
    if (!form->ok || context->options.check || !launch->module || launch->module->library ||
        !compiled->code || (uint64_t)b[0] * b[1] * b[2] > KJ_MAX_BLOCK_THREADS || !rows_switched_on())
        return false;
    const KjSharedCpu *shared = compiled->code;
    if (!shared->xrange)
        return false;
    KjRowLines lines = {0};
    if (form->out >= 0 && form->out < compiled->root->param_count)
        lines = (KjRowLines){launch->params[form->out], form->out_ndim, form->out_axis, form->out_size};
    int64_t limit[3];
    kj_grid_rows_limits(form, launch->params, limit);
    return kj_cpu_run_rows(context->pool, (KjRowFn)shared->xrange, launch->params, launch->grid,
                           launch->block, limit, &lines, shared->rows_cut);
}

static kjit_status cpu_launch(kjit_context *context, KjLaunch *launch)
{
    const KjCompiled *compiled = launch->compiled;
    char *error = NULL;
    /* checked mode put the record's address after the arguments; the race
     * checker's state is in it (check_report.c) */
    KjCheckRecord *record = context->options.check ? launch->params[launch->arg_count] : NULL;
    if (record && record->race) {
        kjit_status status = kj_cpu_run_kernel_race(record->race, compiled->root,
                                                    (KjThreadFn)compiled->entry, launch->params,
                                                    launch->grid, launch->block,
                                                    launch->dynamic_shared_bytes,
                                                    launch->launch_local_bytes, &error);
        if (status != KJIT_OK)
            kj_api_take_named_error(context, status, launch->name, error);
        return status;
    }
    if (!record && cpu_launch_rows(context, launch))
        return KJIT_OK;
    const KjShapeCode *shape = launch_shape(context, launch, &error);
    if (error) {
        kj_api_take_named_error(context, KJIT_ERROR_BACKEND, launch->name, error);
        return KJIT_ERROR_BACKEND;
    }
    void *block = shape ? shape->block : compiled->block, *blocks = shape ? shape->blocks : NULL;
    bool shared_written = shape && shape->shared_written;
    /* a library built with --block holds the code for those shapes */
    if (!shape && shape_wanted(context, launch) && launch->module->library)
        kj_aot_shape(launch->module, compiled, launch->block, &block, &blocks, &shared_written);
    kjit_status status = kj_cpu_run_kernel_blocks(context->pool, compiled->root,
                                           (KjThreadFn)compiled->entry, (KjThreadFn)block,
                                           (KjBlocksFn)blocks, shared_written, launch->params,
                                           launch->grid, launch->block,
                                           launch->dynamic_shared_bytes,
                                           launch->launch_local_bytes, &error);
    if (status != KJIT_OK)
        kj_api_take_named_error(context, status, launch->name, error);
    return status;
}

/* --------------------------------------------------------------- memory */

typedef struct ReduceJob {
    KjRangeFn range;
    void **params;
} ReduceJob;

static void reduce_chunk(void *user, int64_t begin, int64_t end)
{
    ReduceJob *job = user;
    int64_t chunk = KJ_CPU_CANCEL_CHUNK / KJ_REDUCE_BLOCK;
    kj_cpu_run_range_here(job->range, job->params, begin, end, chunk > 0 ? chunk : 1);
}

/* A work item is a block of 1024 elements, so chunks of a few items are
 * already worth a thread; the WARPS and COLUMNS forms (only with
 * KJIT_REDUCE_FORM, for the tests) run as kernels, the CUDA way. */
static kjit_status cpu_run_items(kjit_context *context, const KjItemsRun *run)
{
    const KjCompiled *compiled = run->compiled;
    if (run->items <= 0)
        return KJIT_OK;
    if (run->warps || run->columns) {
        int64_t per_block;
        uint32_t threads;
        kj_items_block_shape(run, &per_block, &threads);
        int64_t blocks = run->items / per_block + (run->items % per_block != 0);
        if (blocks > KJIT_MAX_GRID_X)
            return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                    "%s: too many outputs for one reduction", run->name);
        uint32_t grid[3] = {(uint32_t)blocks, 1, 1};
        uint32_t block[3] = {threads, 1, 1};
        char *error = NULL;
        kjit_status status = kj_cpu_run_kernel(context->pool, compiled->root,
                                               (KjThreadFn)compiled->entry,
                                               (KjThreadFn)compiled->block, run->params, grid,
                                               block, 0, &error);
        if (status != KJIT_OK)
            kj_api_take_named_error(context, status, run->name, error);
        return status;
    }
    KjRangeFn range = (KjRangeFn)compiled->entry;
    if (!context->pool) {
        /* a work item is a block of KJ_REDUCE_BLOCK elements */
        int64_t chunk = KJ_CPU_CANCEL_CHUNK / KJ_REDUCE_BLOCK;
        kj_cpu_run_range_here(range, run->params, 0, run->items, chunk > 0 ? chunk : 1);
        return KJIT_OK;
    }
    ReduceJob job = {range, run->params};
    int64_t min_chunk = KJ_CPU_MIN_CHUNK / KJ_REDUCE_BLOCK;
    kj_pool_run(context->pool, run->items, min_chunk > 0 ? min_chunk : 1, reduce_chunk, &job);
    return KJIT_OK;
}

static kjit_status cpu_alloc(kjit_context *context, size_t bytes, void **data)
{
    if (!(*data = kj_api_alloc_aligned(bytes)))
        return kj_api_set_error(context, KJIT_ERROR_OUT_OF_MEMORY,
                                "out of memory for a device array of %zu bytes", bytes);
    return KJIT_OK;
}

static kjit_status cpu_free(kjit_context *context, void *data)
{
    free(data);
    return KJIT_OK;
}

static kjit_status cpu_copy(kjit_context *context, kjit_array *dst, const kjit_array *src,
                            size_t bytes, kjit_stream *stream)
{
    memmove(dst->data, src->data, bytes);
    return KJIT_OK;
}

/* ------------------------------------------------------ streams, events */

static kjit_status cpu_stream_create(kjit_context *context, kjit_stream *stream)
{
    return KJIT_OK;
}

static kjit_status cpu_synchronize(kjit_context *context, kjit_stream *stream)
{
    return KJIT_OK; /* cpu work is done when its call returns */
}

static void cpu_stream_destroy(kjit_stream *stream)
{
}

static kjit_status cpu_event_record(kjit_context *context, kjit_stream *stream, kjit_event *event)
{
    clock_gettime(CLOCK_MONOTONIC, &event->host);
    return KJIT_OK;
}

static kjit_status cpu_event_elapsed(kjit_event *start, kjit_event *end, double *milliseconds)
{
    *milliseconds = (double)(end->host.tv_sec - start->host.tv_sec) * 1e3 +
                    (double)(end->host.tv_nsec - start->host.tv_nsec) / 1e6;
    return KJIT_OK;
}

static void cpu_event_destroy(kjit_event *event)
{
}

/* ------------------------------------------------------------- the targets */

/* The two differ only in open: parallel's makes the pool that run_vectorized
 * and launch spread work across (a NULL pool keeps it on the caller). */
#define KJ_HOST_TARGET_FUNCTIONS                \
    .device_memory_on_host = true,              \
    .checks_races = true,                       \
    .runs_libraries = true,                     \
    .codegen = KJ_CODEGEN_CPU,                  \
    .close = cpu_close,                         \
    .generate = cpu_generate,                   \
    .release = cpu_release,                     \
    .call = cpu_call,                           \
    .run_vectorized = cpu_run_vectorized,       \
    .launch = cpu_launch,                       \
    .run_items = cpu_run_items,   \
    .alloc = cpu_alloc,                         \
    .free = cpu_free,                           \
    .copy = cpu_copy,                           \
    .stream_create = cpu_stream_create,         \
    .synchronize = cpu_synchronize,             \
    .stream_destroy = cpu_stream_destroy,       \
    .event_record = cpu_event_record,           \
    .event_elapsed = cpu_event_elapsed,         \
    .event_destroy = cpu_event_destroy

const KjRuntimeTarget kj_runtime_cpu = {
    .name = "cpu",
    .open = cpu_open,
    KJ_HOST_TARGET_FUNCTIONS,
};

const KjRuntimeTarget kj_runtime_parallel = {
    .name = "parallel",
    .open = parallel_open,
    KJ_HOST_TARGET_FUNCTIONS,
};
