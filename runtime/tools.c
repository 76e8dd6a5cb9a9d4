/*
 * tools.c: kjit_tools.h, the runtime's services for tools (the kjit command,
 * the Python package, tests) in public types: .npy files, C-order copies, the
 * cache, what the build found, and the compiler's stages as text.
 *
 * kjit_stage_file runs the same pass list as the runtime (pipeline.c) and
 * hands the roots to the back end's emitter; it is how `kjit check --dump`
 * and `kjit build --emit` see the compiler without including its headers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

/* ------------------------------------------------------------------ arrays */

/* A pointer argument given as NULL: the message in *error when there is
 * one to fill, and as the thread's error (kjit_last_error(NULL)) always. */
static kjit_status refuse_null(const char *api, const char *what, char **error)
{
    kj_api_null(NULL, api, what);
    if (error)
        *error = kj_xstrdup(kjit_last_error(NULL));
    return KJIT_ERROR_INVALID_ARGUMENT;
}

/* A view that kjit can walk: a known dtype and rank, no negative extent, and
 * data unless it has no elements. */
static bool valid_view(const kjit_array *array)
{
    if ((unsigned)array->dtype >= KJIT_DTYPE_COUNT || array->ndim < 0 ||
        array->ndim > KJIT_MAX_DIMS)
        return false;
    for (int d = 0; d < array->ndim; d++)
        if (array->shape[d] < 0)
            return false;
    return array->data || !kj_array_has_elements(array);
}

kjit_status kjit_npy_read(const char *path, kjit_array *out, char **error)
{
    if (!path || !out || !error)
        return refuse_null("kjit_npy_read", !path ? "path" : !out ? "out" : "error", error);
    return kj_npy_read(path, out, error);
}

kjit_status kjit_npy_write(const char *path, const kjit_array *array, char **error)
{
    if (!path || !array || !error)
        return refuse_null("kjit_npy_write", !path ? "path" : !array ? "array" : "error", error);
    if (!valid_view(array)) {
        *error = kj_xstrdup("kjit_npy_write: the array is not a valid view (NULL data with "
                            "elements, a negative extent, or an unknown dtype or rank)");
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    return kj_npy_write(path, array, error);
}

kjit_status kjit_shape_size(kjit_dtype dtype, int ndim, const int64_t *shape, int64_t *count,
                            int64_t *bytes, char **error)
{
    return kj_shape_size(dtype, ndim, shape, count, bytes, error);
}

kjit_status kjit_output_open(const char *path, kjit_output_file *out, char **error)
{
    return kj_output_open(path, out, error);
}

kjit_status kjit_output_close(kjit_output_file *out, bool keep, char **error)
{
    return kj_output_close(out, keep, error);
}

void kjit_array_copy_c_order(const kjit_array *array, void *dst)
{
    if (!array || !dst || !valid_view(array)) {
        kj_api_set_error(NULL, KJIT_ERROR_INVALID_ARGUMENT,
                         "kjit_array_copy_c_order: %s", !array ? "array is NULL"
                                                        : !dst ? "dst is NULL"
                                                               : "the array is not a valid view");
        return;
    }
    kj_array_gather(array, dst);
}

bool kjit_array_is_contiguous(const kjit_array *array)
{
    return array && array->ndim >= 0 && array->ndim <= KJIT_MAX_DIMS &&
           kj_array_is_contiguous(array);
}

char *kjit_shape_text(char *buf, size_t size, int ndim, const int64_t *shape)
{
    if (!buf || size == 0)
        return buf;
    if ((!shape && ndim > 0) || ndim < 0 || ndim > KJIT_MAX_DIMS) {
        snprintf(buf, size, "(?)");
        return buf;
    }
    return kj_shape_string(buf, size, ndim, shape);
}

/* ------------------------------------------------------------------- cache */

bool kjit_cache_enabled(void) { return kj_cache_enabled(); }
bool kjit_cache_dir(char *buf, size_t size) { return buf && size && kj_cache_dir(buf, size); }
uint64_t kjit_cache_max_bytes(void) { return kj_cache_max_bytes(NULL); }
char *kjit_cache_check(const char *dir) { return kj_cache_check(dir); }
const char *kjit_cache_build_identity(void) { return kj_cache_build_identity(); }
int kjit_cache_clear(const char *dir) { return dir ? kj_cache_clear(dir) : 0; }
void kjit_cache_memory_clear(void) { kj_cache_memory_clear(); }

typedef struct ListVisit {
    kjit_cache_visit_fn visit;
    void *user;
} ListVisit;

static void visit_entry(void *user, const KjCacheEntryInfo *info)
{
    ListVisit *v = user;
    kjit_cache_entry entry = {
        .name = info->name,
        .valid = info->valid,
        .kind = info->valid ? kj_cache_kind_name(info->kind) : "?",
        .file_bytes = info->file_bytes,
        .payload_bytes = info->payload_bytes,
        .last_used = info->last_used,
        .key_text = info->key_text,
    };
    v->visit(v->user, &entry);
}

int kjit_cache_list(const char *dir, kjit_cache_visit_fn visit, void *user)
{
    if (!dir || !visit)
        return -1;
    ListVisit v = {visit, user};
    return kj_cache_list(dir, visit ? visit_entry : NULL, &v);
}

kjit_cache_counters kjit_cache_stats(void)
{
    KjCacheCounters c = kj_cache_counters();
    return (kjit_cache_counters){c.memory_hits, c.disk_hits,  c.disk_misses, c.disk_rejected,
                                 c.disk_stores, c.evictions, c.compiles,    c.shared_hits};
}

/* ------------------------------------------------------- the build's tools */

const char *kjit_host_cpu(void) { return kj_host_cpu_description(); }
const char *kjit_llvm_version(void) { return kj_llvm_version(); }
const char *kjit_libdevice_path(char **error) { return kj_find_libdevice(error); }
const char *kjit_ptxas_path(void) { return kj_ptxas_path(); }

/* ---------------------------------------------------------------- stages */

void kjit_stage_options_init(kjit_stage_options *options)
{
    if (!options)
        return;
    memset(options, 0, sizeof *options);
    options->target = KJIT_TARGET_CPU;
    options->opt_level = 3;
    options->line_info = kj_codegen_line_info_default();
    options->cpu_simd = kj_codegen_cpu_simd_default();
    const char *specialise = getenv("KJIT_CPU_SPECIALISE");
    options->cpu_specialise = !(specialise && strcmp(specialise, "0") == 0);
}

typedef struct StageDiag {
    const kjit_stage_options *options;
} StageDiag;

static void stage_diagnostic(void *user, KjSeverity severity, const char *text)
{
    const kjit_stage_options *options = ((StageDiag *)user)->options;
    if (options->on_diagnostic)
        options->on_diagnostic(options->diagnostic_user, text);
}

/* The map signature of a fused @reduce whose result is the reduce
 * signature's type, or NULL. */
static KjIrFunction *reduce_map_for(const KjIrEntry *entry, const KjIrFunction *fn)
{
    if (!entry->map)
        return NULL;
    for (int s = 0; s < entry->map->variants.count; s++) {
        KjIrFunction *g = entry->map->variants.items[s];
        if (g->ret == fn->ret)
            return g;
    }
    return NULL;
}

/* What `build` compiles: every plain function and kernel of the file (or the
 * one named), for a vectorized function each signature's scalar function and
 * its contiguous all-array kernel, for a @guvectorize each signature's core
 * function and its kernel over one loop dimension and contiguous cores, and
 * for a @reduce each signature's first level of a full reduction of
 * contiguous inputs and its level over the leading axis of a C-contiguous
 * 2-D array, in the forms the target runs (KjRuntimeTarget.reduce_in_warps). */
static int collect_roots(KjArena *arena, KjIrModule *module, const char *only,
                         const KjRuntimeTarget *runtime, KjPipelineRoot **out)
{
    int count = 0;
    for (int e = 0; e < module->entries.count; e++) {
        KjIrEntry *entry = module->entries.items[e];
        if (!only || strcmp(entry->name, only) == 0)
            count += 3 * entry->variants.count;
    }
    KjPipelineRoot *roots = kj_arena_alloc(arena, sizeof *roots * (size_t)(count + 1));
    int n = 0;
    KjVecVariant contig = {.layout = KJ_LAYOUT_CONTIG, .ndim = 1, .scalar_mask = 0};
    bool warps = runtime->reduce_in_warps;
    for (int e = 0; e < module->entries.count; e++) {
        KjIrEntry *entry = module->entries.items[e];
        if (only && strcmp(entry->name, only) != 0)
            continue;
        for (int v = 0; v < entry->variants.count; v++) {
            KjIrFunction *fn = entry->variants.items[v];
            roots[n++] = (KjPipelineRoot){.fn = fn};
            if (fn->kind == KJ_IR_FN_SCALAR && entry->kind == KJ_FN_REDUCE) {
                KjIrFunction *map = reduce_map_for(entry, fn);
                if (entry->map && !map)
                    continue;
                KjReduceVariant *full = kj_arena_alloc(arena, sizeof *full);
                *full = (KjReduceVariant){
                    .form = warps ? KJ_REDUCE_FORM_WARPS : KJ_REDUCE_FORM_LANES, .kept_rank = 0,
                    .reduced_rank = 1, .contiguous = true, .mapped = map != NULL, .simd = !warps};
                if (warps) {
                    int widest = map ? 0 : kj_type_size(fn->ret);
                    for (int q = 0; map && q < map->param_count; q++)
                        if (kj_type_size(map->params[q]->type) > widest)
                            widest = kj_type_size(map->params[q]->type);
                    full->thread_lanes = kj_reduce_thread_lanes(fn->ret, widest);
                    full->aligned = full->thread_lanes > 1;
                }
                KjReduceVariant *leading = kj_arena_alloc(arena, sizeof *leading);
                *leading = (KjReduceVariant){
                    .form = warps ? KJ_REDUCE_FORM_COLUMNS : KJ_REDUCE_FORM_LANES,
                    .kept_rank = 1, .reduced_rank = 1, .contiguous = false,
                    .mapped = map != NULL, .simd = !warps,
                    .thread_lanes = warps ? kj_reduce_column_lanes(fn->ret) : 0};
                roots[n++] = (KjPipelineRoot){.fn = fn, .reduce = full, .map = map};
                roots[n++] = (KjPipelineRoot){.fn = fn, .reduce = leading, .map = map};
            } else if (fn->kind == KJ_IR_FN_SCALAR) {
                roots[n++] = (KjPipelineRoot){.fn = fn, .vectorize = true, .variant = contig};
            }
            if (entry->layout) /* a @guvectorize: its kernel over one loop dimension */
                roots[n++] = (KjPipelineRoot){.fn = fn, .gufunc = entry->layout, .loop_ndim = 1,
                                              .gufunc_contiguous = true};
        }
    }
    *out = roots;
    return n;
}

/* What a printer writes, as a heap string. */
static char *text_of(void (*print)(FILE *, const void *), const void *what, size_t *size)
{
    char *data = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&data, &len);
    if (!f)
        kj_die("out of memory");
    print(f, what);
    fclose(f);
    *size = len;
    return data;
}

static void print_ast(FILE *f, const void *ast) { kj_ast_dump(f, ast); }
static void print_ir(FILE *f, const void *module) { kj_ir_print_module(f, module); }

/* The split forms of a module's kernels, each specialised for one block
 * shape by the pipeline (its roots' block dims). */
typedef struct KjSpecialised {
    const KjPipeline *pipeline;
    const unsigned *block;
} KjSpecialised;

static void print_specialised(FILE *f, const void *what)
{
    const KjSpecialised *shapes = what;
    for (int i = 0; i < shapes->pipeline->root_count; i++) {
        const KjIrFunction *fn = shapes->pipeline->roots[i].root;
        if (!fn->split)
            continue;
        fprintf(f, "// %s for blocks of %u x %u x %u threads\n", fn->split->symbol,
                shapes->block[0], shapes->block[1], shapes->block[2]);
        kj_ir_print_function(f, fn->split);
    }
}

/* The runtime target whose code a stage shows: cpu, parallel (the same
 * code) or cuda; AUTO, the zero value, is cpu here (a stage never asks for a
 * GPU). */
static const KjRuntimeTarget *stage_runtime(const kjit_stage_options *options)
{
    return kj_runtime_target_of(options->target == KJIT_TARGET_AUTO ? KJIT_TARGET_CPU
                                                                    : options->target);
}

/* The code generator's options for a stage (the cpu_ ones and block_dims
 * matter only where the target has thread loops), and for an emitted stage
 * its kind, which the target must make. */
static bool stage_codegen(kjit_stage stage, const kjit_stage_options *options,
                          KjCodegenOptions *codegen, KjEmitKind *kind, char **error)
{
    kjit_options asked = {.opt_level = options->opt_level,
                          .line_info = options->line_info,
                          .cpu_simd = options->cpu_simd}; /* no checks, no cancel */
    *codegen = kj_api_codegen_options(stage_runtime(options), &asked, NULL);
    codegen->cuda_arch = options->cuda_arch ? options->cuda_arch : "sm_90";
    codegen->verify = options->verify;
    for (int k = 0; k < 3; k++)
        codegen->block_dims[k] = options->block[0] ? options->block[k] : 0;
    codegen->split_shapes_only = options->cpu_specialise; /* (the runtime's, unchecked) */
    switch (stage) {
    case KJIT_STAGE_AST:
    case KJIT_STAGE_IR:
    case KJIT_STAGE_VEC: return true;
    case KJIT_STAGE_LLVM: *kind = KJ_EMIT_LLVM; break;
    case KJIT_STAGE_ASM: *kind = KJ_EMIT_ASM; break;
    case KJIT_STAGE_OBJ: *kind = KJ_EMIT_OBJ; break;
    case KJIT_STAGE_PTX: *kind = KJ_EMIT_PTX; break;
    default: *error = kj_xstrdup("unknown stage"); return false;
    }
    *error = kj_codegen_emit_refusal(codegen->target, *kind);
    return *error == NULL;
}

kjit_status kjit_stage_file(const char *path, kjit_stage stage, const kjit_stage_options *options,
                            char **bytes, size_t *size, char **error)
{
    if (!path || !options || !bytes || !size || !error)
        return refuse_null("kjit_stage_file",
                           !path ? "path" : !options ? "options" : !bytes ? "bytes"
                                          : !size ? "size" : "error",
                           error);
    if ((unsigned)stage > KJIT_STAGE_PTX)
        return refuse_null("kjit_stage_file", "a known stage (it is not); stage", error);
    *bytes = NULL;
    *size = 0;
    *error = NULL;
    KjCodegenOptions codegen;
    KjEmitKind kind = KJ_EMIT_LLVM;
    if (!stage_codegen(stage, options, &codegen, &kind, error))
        return KJIT_ERROR_INVALID_ARGUMENT;

    KjArena arena = {0};
    StageDiag user = {options};
    KjDiag diag = {.sink = stage_diagnostic, .user = &user};
    KjSource *src = kj_source_read(&arena, path, &diag);
    if (!src) {
        kj_arena_free(&arena);
        *error = kj_xstrdup("cannot read the source");
        return KJIT_ERROR_IO;
    }
    const char *stdlib_dirs[] = {kj_default_stdlib_dir(), NULL};
    KjPipeline p = {.arena = &arena, .diag = &diag, .src = src, .stdlib_dirs = stdlib_dirs,
                    .stop = stage == KJIT_STAGE_AST ? KJ_STAGE_AST : KJ_STAGE_IR,
                    .verify = options->verify,
                    .warn_barriers = stage == KJIT_STAGE_IR};
    kjit_status status = KJIT_OK;
    if (!kj_pipeline_run(&p)) {
        status = KJIT_ERROR_COMPILE;
    } else if (stage == KJIT_STAGE_AST) {
        *bytes = text_of(print_ast, p.ast, size);
    } else if (stage == KJIT_STAGE_IR) {
        *bytes = text_of(print_ir, p.module, size);
    } else {
        p.root_count = collect_roots(&arena, p.module, options->function,
                                     stage_runtime(options), &p.roots);
        p.stop = KJ_STAGE_ROOTS;
        bool split = kj_codegen_splits_barriers(&codegen);
        for (int i = 0; i < p.root_count; i++) {
            /* the split forms where the target runs them, for --block's shape if given */
            p.roots[i].split_barriers = split;
            for (int k = 0; k < 3 && split; k++)
                p.roots[i].block[k] = codegen.block_dims[k];
        }
        if (p.root_count == 0) {
            KjBuf why = {0};
            kj_buf_printf(&why, "%s has no function%s%s", path, options->function ? " named " : "",
                          options->function ? options->function : "");
            *error = why.data;
            status = KJIT_ERROR_NOT_FOUND;
        } else if (!kj_pipeline_run(&p)) {
            status = KJIT_ERROR_COMPILE;
        } else if (stage == KJIT_STAGE_VEC && split && codegen.block_dims[0]) {
            /* each split form as the code for that block shape has it */
            KjSpecialised shapes = {&p, options->block};
            *bytes = text_of(print_specialised, &shapes, size);
        } else if (stage == KJIT_STAGE_VEC) {
            *bytes = text_of(print_ir, p.module, size);
        } else {
            /* for a block shape, only the code that depends on it (the split
             * forms' __block and __blocks), as the runtime compiles a shape
             * (runtime_cpu.c); the rest is the same as without --block */
            bool shape_only = split && codegen.block_dims[0];
            KjIrFunction **roots = kj_arena_alloc(&arena, sizeof *roots * (size_t)p.root_count);
            int n = 0;
            for (int i = 0; i < p.root_count; i++)
                if (!shape_only || p.roots[i].root->split)
                    roots[n++] = p.roots[i].root;
            *bytes = kj_codegen_emit_grouped(p.module, roots, n, &codegen, kind, size, error);
            if (!*bytes)
                status = KJIT_ERROR_BACKEND;
        }
    }
    kj_arena_free(&arena);
    return status;
}

/* ------------------------------------------------------------ libraries */

kjit_status kjit_library_describe(const char *path, char **text, char **error)
{
    if (!path || !text || !error)
        return refuse_null("kjit_library_describe", !path ? "path" : !text ? "text" : "error",
                           error);
    *text = *error = NULL;
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CPU;
    kjit_context *context = NULL;
    kjit_module *module = NULL;
    kjit_status status = kjit_context_create(&options, &context);
    if (status == KJIT_OK) {
        context->options.check = 0; /* not KJIT_CHECK's: the unchecked code is read */
        status = kjit_module_load_library(context, path, &module);
    }
    if (status != KJIT_OK) {
        *error = kj_xstrdup(kjit_last_error(context));
        kjit_context_destroy(context);
        return status;
    }
    KjBuf b = {0};
    kj_aot_describe(module, path, &b);
    *text = b.data;
    kjit_module_free(module);
    kjit_context_destroy(context);
    return KJIT_OK;
}
