/*
 * aot_build.c: kjit_build_library (kjit_tools.h), the library that
 * `kjit build --emit=lib` writes (docs/aot.md; aot.c loads it).  libkjit
 * only: it compiles.
 *
 * The module is compiled as a context of the cpu target would compile it,
 * and every root the runtime can ask of it is made through the same
 * kj_api_prepare_root as a call's (so its symbol and code are the JIT's):
 * plain functions (not device functions), each @vectorize signature
 * contiguous with every set of scalar inputs (up to 4 inputs; beyond, none)
 * and strided over KJ_MAX_DIMS dimensions (the general code, which aot.c
 * runs for any other variant), each @kernel general and with every array
 * contiguous.  Each root is one object per x86-64 level, compiled by LLVM
 * for the level's CPU and features, as the JIT compiles one root per
 * object; its global symbols are named kjaot_<level>_<root>__<symbol>
 * (by LLVM: KjCodegenOptions.global_prefix), and the system's cc links the objects into a shared object
 * (with libmvec and libm, which the code calls).  The table and the
 * trailer (kjit_runtime.h) follow the shared object's bytes.
 * @guvectorize signatures over 1 to KJ_AOT_GUFUNC_LOOPS loop dimensions,
 * cores contiguous or not (a core that is not runs the other's code).
 * @reduce functions' levels in the form the cpu targets run them
 * (add_reduce_roots); a geometry of more ranks is refused, naming it.
 *
 * With --check (or KJIT_CHECK) every root is made twice, from the module
 * compiled unchecked and from it compiled in a checked context, and the
 * table carries checked mode's sites; with --block, each unchecked kernel
 * root with a split form also gets its code for those block shapes
 * (collect_shapes).  --emit=staticlib puts the objects (their symbols
 * kjlib_NAME_...) in an archive with a generated NAME_kjit_load that hands
 * the runtime the table and every symbol's address (write_archive).
 * Unless --cuda=off, the module is compiled once more as a cuda context
 * compiles it, and its roots' PTX and cubins (aot_cuda_build.c) follow in
 * the table's cuda section (build_cuda, write_cuda), in an archive's table
 * as in a shared library's; with --check=values (the checks a cuda context
 * runs) a checked cuda module's roots too, whose sites must be the cpu's;
 * with --block, each cuda kernel root with barriers for each shape too
 * (kj_aot_cuda_compile_shape; a root "block X,Y,Z").
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stdatomic.h>
#include <pthread.h>
#include <unistd.h>

#include "kjit_runtime.h"

/* ------------------------------------------------------------ the table */

typedef struct Writer {
    uint8_t *data;
    size_t len, cap;
} Writer;

static void put(Writer *w, const void *bytes, size_t n)
{
    if (w->len + n > w->cap) {
        w->cap = (w->len + n) * 2 + 256;
        w->data = kj_xrealloc(w->data, w->cap);
    }
    memcpy(w->data + w->len, bytes, n);
    w->len += n;
}

static void put_u32(Writer *w, uint32_t v)
{
    put(w, &v, 4);
}

static void put_u64(Writer *w, uint64_t v)
{
    put_u32(w, (uint32_t)v);
    put_u32(w, (uint32_t)(v >> 32));
}

static void put_str(Writer *w, const char *s)
{
    if (!s) {
        put_u32(w, KJ_AOT_NULL_STR);
        return;
    }
    size_t n = strlen(s);
    put_u32(w, (uint32_t)n);
    put(w, s, n);
}

static void put_type(Writer *w, const KjType *t)
{
    put_u32(w, t ? (uint32_t)t->kind : KJ_AOT_NO_TYPE);
    put_u32(w, t && t->elem ? (uint32_t)t->elem->kind : 0);
    put_u32(w, t ? (uint32_t)t->ndim : 0);
}

/* A size of a local() sized at launch (local_size.c's grammar: constants,
 * integer parameters, array extents, arithmetic, min, max, select on a
 * comparison, conversions): op, type, constant, dim, math, the parameter a
 * VAR names (its index, or -1), then the operands. */
static void put_size_expr(Writer *w, const KjIrFunction *fn, const KjIrExpr *e)
{
    put_u32(w, (uint32_t)e->op);
    put_type(w, e->type);
    put_u64(w, e->const_int);
    put_u32(w, (uint32_t)e->dim);
    put_u32(w, (uint32_t)e->math);
    int param = -1;
    for (int i = 0; e->op == KJ_IR_VAR && i < fn->param_count; i++)
        if (fn->params[i] == e->var)
            param = i;
    put_u32(w, (uint32_t)param);
    put_u32(w, (uint32_t)e->arg_count);
    for (int i = 0; i < e->arg_count; i++)
        put_size_expr(w, fn, e->args[i]);
}

static void put_header(Writer *w, const KjIrFunction *fn)
{
    put_str(w, fn->name);
    put_str(w, fn->symbol);
    put_u32(w, (uint32_t)fn->kind);
    put_u32(w, (uint32_t)fn->param_count);
    for (int i = 0; i < fn->param_count; i++) {
        put_str(w, fn->params[i]->name);
        put_type(w, fn->params[i]->type);
    }
    put_type(w, fn->ret);
    uint32_t flags = (fn->uses_syncthreads ? KJ_AOT_FN_SYNCTHREADS : 0) |
                     (fn->uses_syncgrid ? KJ_AOT_FN_SYNCGRID : 0) |
                     (fn->uses_dynamic_shared ? KJ_AOT_FN_DYNAMIC_SHARED : 0) |
                     (fn->unchecked ? KJ_AOT_FN_UNCHECKED : 0) |
                     (fn->contiguous ? KJ_AOT_FN_CONTIGUOUS : 0) |
                     (fn->split ? KJ_AOT_FN_SPLIT : 0);
    put_u32(w, flags);
    put_u64(w, (uint64_t)fn->shared_bytes);
    put_u64(w, (uint64_t)fn->local_bytes);
    put_str(w, fn->device_use);
    put_str(w, fn->device_chain);
    put_u32(w, (uint32_t)fn->device_loc.line);
    put_u32(w, (uint32_t)fn->device_loc.col);
    if (fn->split) {
        put_u64(w, (uint64_t)fn->split->shared_bytes);
        put_u64(w, (uint64_t)fn->split->local_bytes);
    }
    /* a @vectorize of several outputs: outputs 1.. */
    put_u32(w, (uint32_t)fn->output_count);
    for (int k = 1; k < fn->output_count; k++) {
        put_str(w, fn->outputs[k]->name);
        put_type(w, fn->outputs[k]->type);
    }
    /* a kernel's local() arrays sized at launch: what local_size.c reads */
    put_u32(w, (uint32_t)fn->launch_locals.count);
    for (int i = 0; i < fn->launch_locals.count; i++) {
        const KjIrExpr *e = fn->launch_locals.items[i];
        put_str(w, e->loc.src ? e->loc.src->path : NULL);
        put_u32(w, (uint32_t)e->loc.line);
        put_u32(w, (uint32_t)e->loc.col);
        put_type(w, e->alloc_elem);
        put_u32(w, (uint32_t)e->alloc_ndim);
        for (int k = 0; k < e->alloc_ndim; k++) {
            put_u64(w, (uint64_t)e->alloc_shape[k]);
            put_u32(w, e->alloc_size[k] != NULL);
            if (e->alloc_size[k])
                put_size_expr(w, fn, e->alloc_size[k]);
        }
    }
}

/* ------------------------------------------------------------ the roots */

typedef struct Root {
    int entry;
    KjCompiled compiled;
    kjit_module *module; /* the unchecked module's, or the checked one's */
    bool checked;
    uint32_t block[3]; /* a cuda root for blocks of these dims (--block); 0: any */
} Root;

typedef struct Roots {
    Root *items;
    int count, cap;
} Roots;

static void collect_text(void *user, KjSeverity severity, const char *formatted)
{
    (void)severity;
    kj_buf_printf(user, "%s", formatted);
}

/* A kernel root's split form specialised for one block shape (--block). */
typedef struct Shape {
    int root;
    uint32_t dims[3];
    bool shared_written;
    KjIrFunction *fn;
} Shape;

typedef struct Shapes {
    Shape *items;
    int count, cap;
} Shapes;

/* For each unchecked kernel root with a split form (barriers, SIMD lanes)
 * and each --block shape, the split form specialised for it, made by the
 * pass list's stage runtime_cpu.c's shape_generate runs for a launch. */
static kjit_status collect_shapes(const kjit_build_options *build, const Roots *roots,
                                  Shapes *shapes, char **error)
{
    for (int i = 0; i < roots->count; i++) {
        const Root *r = &roots->items[i];
        const KjIrFunction *root = r->compiled.root;
        if (r->checked || root->kind != KJ_IR_FN_KERNEL || !root->split || root->unchecked ||
            !r->module->context->options.cpu_simd)
            continue;
        for (int b = 0; b < build->block_count; b++) {
            KjBuf failures = {0};
            KjDiag diag = {.sink = collect_text, .user = &failures};
            KjPipelineRoot shaped = {.fn = (KjIrFunction *)root, .split_barriers = true,
                                     .block = {build->blocks[b][0], build->blocks[b][1],
                                               build->blocks[b][2]}};
            KjPipeline pipeline = {.arena = &r->module->arena, .diag = &diag,
                                   .module = r->module->ir, .roots = &shaped, .root_count = 1,
                                   .stop = KJ_STAGE_ROOTS,
                                   .verify = kj_jit->pipeline_verify_default()};
            if (!kj_jit->pipeline_run(&pipeline)) {
                KjBuf m = {0};
                kj_buf_printf(&m, "%s for blocks of %u x %u x %u: %s", root->name,
                              build->blocks[b][0], build->blocks[b][1], build->blocks[b][2],
                              failures.data ? failures.data : "internal error");
                kj_buf_free(&failures);
                *error = m.data;
                return KJIT_ERROR_BACKEND;
            }
            kj_buf_free(&failures);
            if (!shaped.root->split)
                continue;
            if (shapes->count == shapes->cap) {
                shapes->cap = shapes->cap * 2 + 8;
                shapes->items = kj_xrealloc(shapes->items, sizeof *shapes->items * (size_t)shapes->cap);
            }
            Shape *shape = &shapes->items[shapes->count++];
            shape->root = i;
            memcpy(shape->dims, shaped.block, sizeof shape->dims);
            shape->shared_written = kj_jit->split_writes_shared(shaped.root, shape->dims);
            shape->fn = shaped.root;
        }
    }
    return KJIT_OK;
}

/* Keeps a root kj_api_prepare_root made (status: how that went). */
static kjit_status keep_root(Roots *roots, kjit_function *function, Root root,
                             kjit_status status, char **error)
{
    if (status != KJIT_OK) {
        *error = kj_xstrdup(kjit_last_error(function->module->context));
        return status;
    }
    if (roots->count == roots->cap) {
        roots->cap = roots->cap * 2 + 16;
        roots->items = kj_xrealloc(roots->items, sizeof *roots->items * (size_t)roots->cap);
    }
    roots->items[roots->count++] = root;
    return KJIT_OK;
}

static kjit_status add_lifted(Roots *roots, kjit_function *function, int entry, int sig,
                              const KjPipelineRoot *request, const char *lifted, char **error)
{
    Root root = {entry, {0}, function->module, function->module->context->options.check != 0};
    kjit_status status = kj_api_prepare_root(function, sig, request, 0, lifted, &root.compiled);
    return keep_root(roots, function, root, status, error);
}

static kjit_status add_root(Roots *roots, kjit_function *function, int entry, int sig,
                            const KjVecVariant *variant, uint32_t contiguous, char **error)
{
    KjPipelineRoot request = {.vectorize = variant != NULL};
    if (variant)
        request.variant = *variant;
    Root root = {entry, {0}, function->module, function->module->context->options.check != 0};
    kjit_status status = kj_api_prepare_root(function, sig, &request, contiguous, NULL,
                                             &root.compiled);
    return keep_root(roots, function, root, status, error);
}

/* A @reduce's levels as the cpu targets run them (api_reduce.c): the LANES
 * form with SIMD lanes, kept ranks 0 to KJ_AOT_REDUCE_KEPT and reduced ranks
 * 1 to KJ_AOT_REDUCE_REDUCED, the reduced run contiguous or not, each
 * signature alone and, for a fused map, each of the map's signatures whose
 * result a signature reduces.  For cuda (reduce_in_warps) the forms it runs
 * instead: a contiguous run in WARPS (V lanes a thread from the widest
 * input, aligned or not), a strided one in COLUMNS. */
/* v (LANES) as cuda runs it (api_reduce.c): WARPS with V lanes a thread
 * from the widest input (the map's parameters, else the result), or
 * COLUMNS for a strided run. */
static void warps_variant(KjReduceVariant *v, const KjIrFunction *fn, const KjIrFunction *map,
                          int aligned)
{
    v->simd = false;
    if (!v->contiguous) {
        v->form = KJ_REDUCE_FORM_COLUMNS;
        v->thread_lanes = kj_reduce_column_lanes(fn->ret);
        return;
    }
    int widest = map ? 0 : kj_type_size(fn->ret);
    for (int q = 0; map && q < map->param_count; q++)
        if (kj_type_size(map->params[q]->type) > widest)
            widest = kj_type_size(map->params[q]->type);
    v->form = KJ_REDUCE_FORM_WARPS;
    v->thread_lanes = kj_reduce_thread_lanes(fn->ret, widest);
    v->aligned = aligned && v->thread_lanes > 1;
}

static kjit_status add_reduce_roots(Roots *roots, kjit_module *module, kjit_function *function,
                                    int e, char **error)
{
    const KjIrEntry *entry = function->entry;
    kjit_function *map = NULL;
    for (int i = 0; entry->map && i < module->function_count; i++)
        if (module->functions[i]->entry == entry->map)
            map = module->functions[i];
    int map_sigs = map ? map->entry->variants.count : 0;
    bool warps = module->context->runtime->reduce_in_warps;
    kjit_status status = KJIT_OK;
    for (int m = -1; m < map_sigs && status == KJIT_OK; m++) {
        for (int s = 0; s < entry->variants.count && status == KJIT_OK; s++) {
            const KjIrFunction *fn = entry->variants.items[s];
            if (m >= 0 && ((KjIrFunction *)map->entry->variants.items[m])->ret != fn->ret)
                continue;
            for (int k = 0; k <= KJ_AOT_REDUCE_KEPT && status == KJIT_OK; k++)
                for (int r = 1; r <= KJ_AOT_REDUCE_REDUCED && status == KJIT_OK; r++)
                    for (int c = r == 1; c >= 0 && status == KJIT_OK; c--)
                    for (int aligned = 0; aligned <= (warps && c) && status == KJIT_OK; aligned++) {
                        KjReduceVariant v = {.form = KJ_REDUCE_FORM_LANES, .kept_rank = k,
                                             .reduced_rank = r, .contiguous = c,
                                             .mapped = m >= 0, .simd = true};
                        if (warps)
                            warps_variant(&v, fn, m >= 0 ? map->entry->variants.items[m] : NULL,
                                          aligned);
                        if (aligned && !v.aligned)
                            continue; /* one lane a thread: nothing to align */
                        KjPipelineRoot request = {.reduce = &v};
                        if (m >= 0)
                            request.map = map->entry->variants.items[m];
                        char key[128];
                        kj_reduce_variant_key(&v, m, key, sizeof key);
                        status = add_lifted(roots, function, e, s, &request, key, error);
                    }
        }
    }
    return status;
}

/* Every root the runtime may ask of the module (above). */
static kjit_status collect_roots(kjit_module *module, Roots *roots, char **error)
{
    kjit_status status = KJIT_OK;
    for (int e = 0; e < module->function_count && status == KJIT_OK; e++) {
        kjit_function *function = module->functions[e];
        const KjIrEntry *entry = function->entry;
        for (int s = 0; s < entry->variants.count && status == KJIT_OK; s++) {
            const KjIrFunction *fn = entry->variants.items[s];
            switch (entry->kind) {
            case KJ_FN_PLAIN: /* on the host, whatever the target (kj_runtime_for) */
                if (!fn->device_use && kj_runtime_for(module->context, KJ_IR_FN_PLAIN) ==
                                           module->context->runtime)
                    status = add_root(roots, function, e, s, NULL, 0, error);
                break;
            case KJ_FN_VECTORIZE: {
                int n = fn->param_count;
                uint32_t masks = n <= 4 ? 1u << n : 1;
                for (uint32_t m = 0; m < masks && status == KJIT_OK; m++) {
                    KjVecVariant v = {KJ_LAYOUT_CONTIG, 1, m};
                    status = add_root(roots, function, e, s, &v, 0, error);
                }
                KjVecVariant general = {KJ_LAYOUT_STRIDED, KJ_MAX_DIMS, 0};
                if (status == KJIT_OK)
                    status = add_root(roots, function, e, s, &general, 0, error);
                break;
            }
            case KJ_FN_KERNEL: {
                uint32_t all = 0;
                for (int i = 0; i < fn->param_count && i < 32; i++)
                    if (fn->params[i]->type->kind == KJ_TYPE_ARRAY)
                        all |= 1u << i;
                status = add_root(roots, function, e, s, NULL, 0, error);
                if (status == KJIT_OK && all)
                    status = add_root(roots, function, e, s, NULL, all, error);
                break;
            }
            case KJ_FN_GUVECTORIZE:
                /* loop ranks 1 to KJ_AOT_GUFUNC_LOOPS, cores contiguous or not,
                 * named as api_guvec.c names them */
                for (int loop = 1; loop <= KJ_AOT_GUFUNC_LOOPS && status == KJIT_OK; loop++)
                    for (int contiguous = 0; contiguous < 2 && status == KJIT_OK; contiguous++) {
                        KjPipelineRoot request = {.gufunc = entry->layout, .loop_ndim = loop,
                                                  .gufunc_contiguous = contiguous};
                        char key[48];
                        snprintf(key, sizeof key, "guvectorize loop %d%s", loop,
                                 contiguous ? " contiguous" : "");
                        status = add_lifted(roots, function, e, s, &request, key, error);
                    }
                break;
            case KJ_FN_REDUCE:
                if (s == 0)
                    status = add_reduce_roots(roots, module, function, e, error);
                break;
            }
        }
    }
    return status;
}

static void put_root(Writer *w, const Root *r)
{
    const KjCompiled *c = &r->compiled;
    put_u32(w, (uint32_t)r->entry);
    put_u32(w, (uint32_t)c->signature);
    put_u32(w, c->vectorized);
    put_u32(w, (uint32_t)c->variant.layout);
    put_u32(w, (uint32_t)c->variant.ndim);
    put_u32(w, c->variant.scalar_mask);
    put_u32(w, c->contiguous);
    put_u32(w, r->checked);
    put_str(w, c->lifted[0] ? c->lifted : NULL);
    put_str(w, c->symbol);
    put_header(w, c->root);
}

/* Checked mode's sites (checks.c) and the sources they are in, for the
 * runtime's reports (check_report.c): each source's path and text once. */
static void write_sites(Writer *w, const KjIrModule *ir)
{
    KjVec sources = {0};
    KjArena arena = {0};
    int *index = kj_arena_alloc(&arena, sizeof *index * (size_t)(ir->check_sites.count + 1));
    for (int i = 0; i < ir->check_sites.count; i++) {
        const KjCheckSite *site = ir->check_sites.items[i];
        index[i] = -1;
        for (int k = 0; site->loc.src && k < sources.count && index[i] < 0; k++)
            if (sources.items[k] == site->loc.src)
                index[i] = k;
        if (site->loc.src && index[i] < 0) {
            index[i] = sources.count;
            kj_vec_push(&arena, &sources, (void *)site->loc.src);
        }
    }
    put_u32(w, (uint32_t)sources.count);
    for (int k = 0; k < sources.count; k++) {
        const KjSource *src = sources.items[k];
        put_str(w, src->path);
        put_str(w, src->text);
    }
    put_u32(w, (uint32_t)ir->check_sites.count);
    for (int i = 0; i < ir->check_sites.count; i++) {
        const KjCheckSite *site = ir->check_sites.items[i];
        put_u32(w, (uint32_t)site->kind);
        put_u32(w, (uint32_t)index[i]);
        put_u32(w, (uint32_t)site->loc.line);
        put_u32(w, (uint32_t)site->loc.col);
        put_str(w, site->array);
        put_str(w, site->type);
    }
    kj_arena_free(&arena);
}

static void write_table(Writer *w, kjit_module *module, const char *source,
                        const KjCpuLevel **levels, int level_count, const Roots *roots,
                        const Shapes *shapes, const kjit_module *checked)
{
    const kjit_options *o = &module->context->options;
    put_u32(w, KJ_AOT_ABI);
    put_str(w, KJIT_VERSION);
    put_str(w, source);
    put_u64(w, module->ir->source_hash);
    put_u32(w, checked ? (uint32_t)checked->context->options.check : 0);
    put_u32(w, (uint32_t)o->cancellable);
    put_u32(w, (uint32_t)o->cpu_simd);
    put_u32(w, (uint32_t)o->opt_level);
    put_u32(w, (uint32_t)level_count);
    for (int i = 0; i < level_count; i++)
        put_str(w, levels[i]->name);
    put_u32(w, (uint32_t)module->function_count);
    for (int e = 0; e < module->function_count; e++) {
        const kjit_function *function = module->functions[e];
        const KjIrEntry *entry = function->entry;
        put_str(w, entry->name);
        put_u32(w, (uint32_t)entry->kind);
        put_u32(w, function->params_written);
        put_u32(w, (uint32_t)entry->variants.count);
        for (int s = 0; s < entry->variants.count; s++)
            put_header(w, entry->variants.items[s]);
        const KjGufuncLayout *l = entry->layout;
        put_u32(w, l != NULL);
        if (l) {
            put_str(w, l->text);
            put_u32(w, (uint32_t)l->inputs);
            put_u32(w, (uint32_t)l->outputs);
            for (int q = 0; q < l->inputs + l->outputs; q++) {
                put_u32(w, (uint32_t)l->rank[q]);
                for (int d = 0; d < l->rank[q]; d++)
                    put_u32(w, (uint32_t)l->dims[q][d]);
            }
            put_u32(w, (uint32_t)l->name_count);
            for (int i = 0; i < l->name_count; i++)
                put_str(w, l->names[i]);
        }
        int map = -1;
        for (int i = 0; entry->map && i < module->function_count; i++)
            if (module->functions[i]->entry == entry->map)
                map = i;
        put_u32(w, (uint32_t)map);
    }
    put_u32(w, (uint32_t)roots->count);
    for (int i = 0; i < roots->count; i++)
        put_root(w, &roots->items[i]);
    put_u32(w, (uint32_t)shapes->count);
    for (int i = 0; i < shapes->count; i++) {
        put_u32(w, (uint32_t)shapes->items[i].root);
        for (int d = 0; d < 3; d++)
            put_u32(w, shapes->items[i].dims[d]);
        put_u32(w, shapes->items[i].shared_written);
    }
    if (checked)
        write_sites(w, checked->ir);
    else
        put_u32(w, 0), put_u32(w, 0);
}

/* ------------------------------------------------------------- for cuda */

/* The cuda code (aot_cuda_build.c) of the roots a cuda context asks for. */
typedef struct CudaBuild {
    bool on;
    KjAotCudaArchs archs;
    kjit_module *module; /* compiled as for a cuda context */
    kjit_module *checked; /* and as for a cuda context checked for values (--check=values) */
    Roots roots; /* the unchecked module's, then the checked one's */
    KjAotCudaCode *code; /* one per root */
    char *notes;         /* what was left out and why */
} CudaBuild;

/* The module compiled in `context` as a cuda context compiles it, into
 * *out, and its roots prepared as such a context prepares them (no split
 * forms, reductions in warps, plain functions left to the host's code):
 * the context's runtime is cuda's meanwhile, with no device opened, since
 * nothing runs. */
static kjit_status cuda_module(kjit_context *context, const char *path, kjit_module **out,
                               Roots *roots, char **error)
{
    const KjRuntimeTarget *host = context->runtime;
    context->runtime = &kj_runtime_cuda;
    kjit_status status = kjit_compile_file(context, path, out);
    if (status != KJIT_OK)
        *error = kj_xstrdup(kjit_last_error(context));
    else
        status = collect_roots(*out, roots, error);
    context->runtime = host;
    return status;
}

/* The checked cuda module's sites are the cpu's, which the table carries
 * (both made by checks.c from the same module before any target's pass):
 * a report names a site by its number, so a difference is refused. */
static kjit_status same_sites(const KjIrModule *cpu, const KjIrModule *cuda, char **error)
{
    bool same = cpu->check_sites.count == cuda->check_sites.count;
    for (int i = 0; same && i < cpu->check_sites.count; i++) {
        const KjCheckSite *a = cpu->check_sites.items[i], *b = cuda->check_sites.items[i];
        same = a->kind == b->kind && a->loc.line == b->loc.line && a->loc.col == b->loc.col &&
               strcmp(a->array ? a->array : "", b->array ? b->array : "") == 0;
    }
    if (same)
        return KJIT_OK;
    KjBuf m = {0};
    kj_buf_printf(&m, "checked mode's sites differ between the cpu code (%d) and the cuda code "
                  "(%d): no checked cuda code can be built (build with --cuda=off, or without "
                  "--check)", cpu->check_sites.count, cuda->check_sites.count);
    *error = m.data;
    return KJIT_ERROR_BACKEND;
}

/* The cuda code: the unchecked module's roots, and with --check=values
 * (the checks a cuda context runs: races are the host's) the checked
 * module's too, each a root of the cuda section (its `checked` word). */
/* One root's cuda code: PTX and, for each arch, ptxas's cubin.  The first
 * root finds which archs this ptxas targets (and says so in the notes); the
 * others only read that. */
static kjit_status compile_cuda_root(CudaBuild *cuda, int i, char **error)
{
    Root *r = &cuda->roots.items[i];
    return r->block[0] ? kj_aot_cuda_compile_shape(r->module->ir, &r->module->context->options,
                                                   &r->compiled, r->block, &cuda->archs,
                                                   &cuda->code[i], error)
                       : kj_aot_cuda_compile(r->module->ir, &r->module->context->options,
                                             &r->compiled, &cuda->archs, i == 0,
                                             &cuda->code[i], &cuda->notes, error);
}

typedef struct CudaWork {
    CudaBuild *cuda;
    kjit_status *status; /* per root */
    char **errors;       /* per root */
    atomic_int next;
} CudaWork;

static void *cuda_worker(void *arg)
{
    CudaWork *w = arg;
    for (int i; (i = atomic_fetch_add(&w->next, 1)) < w->cuda->roots.count;)
        w->status[i] = compile_cuda_root(w->cuda, i, &w->errors[i]);
    return NULL;
}

/* Every root's cuda code: the first alone, then the others on the threads
 * that compile groups (kj_codegen_compile_threads, KJIT_COMPILE_THREADS),
 * each its LLVM compile and its ptxas processes; the code lands in the
 * root's slot, so the library is the same bytes for any thread count, and
 * the first failing root (in order) is the error. */
static kjit_status compile_cuda_roots(CudaBuild *cuda, char **error)
{
    kjit_status status = compile_cuda_root(cuda, 0, error);
    int threads = status == KJIT_OK ? kj_codegen_compile_threads(error) : 1;
    if (threads == 0)
        return KJIT_ERROR_INVALID_ARGUMENT;
    int n = cuda->roots.count;
    if (status != KJIT_OK || n == 1)
        return status;
    CudaWork w = {.cuda = cuda, .status = kj_xcalloc((size_t)n, sizeof *w.status),
                  .errors = kj_xcalloc((size_t)n, sizeof *w.errors)};
    atomic_init(&w.next, 1);
    int helpers = (threads < n - 1 ? threads : n - 1) - 1;
    pthread_t *tids = kj_xcalloc((size_t)helpers + 1, sizeof *tids);
    int started = 0;
    while (started < helpers && pthread_create(&tids[started], NULL, cuda_worker, &w) == 0)
        started++;
    cuda_worker(&w);
    for (int t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    for (int i = 1; i < n; i++) {
        if (status == KJIT_OK && w.status[i] != KJIT_OK) {
            status = w.status[i];
            *error = w.errors[i];
            w.errors[i] = NULL;
        }
        free(w.errors[i]);
    }
    free(tids);
    free(w.status);
    free(w.errors);
    return status;
}

static kjit_status build_cuda(kjit_context *context, kjit_module *checked, const char *path,
                              const char *archs, const kjit_build_options *build,
                              CudaBuild *cuda, char **error)
{
    kjit_status status = kj_aot_cuda_archs(archs, &cuda->archs, error);
    if (status != KJIT_OK)
        return status;
    cuda->on = true;
    status = cuda_module(context, path, &cuda->module, &cuda->roots, error);
    /* --block: each kernel with barriers (as the cpu's shapes: the kernels
     * whose code a block shape changes most) also for each shape, a root
     * "block X,Y,Z" that launches of those dims run (aot.c) */
    int general = cuda->roots.count;
    for (int i = 0; i < general && status == KJIT_OK; i++) {
        const KjIrFunction *fn = cuda->roots.items[i].compiled.root;
        if (fn->kind != KJ_IR_FN_KERNEL || !fn->uses_syncthreads)
            continue;
        for (int b = 0; b < build->block_count; b++) {
            Root shaped = cuda->roots.items[i];
            memcpy(shaped.block, build->blocks[b], sizeof shaped.block);
            kj_aot_block_key(shaped.block, shaped.compiled.lifted, sizeof shaped.compiled.lifted);
            if (cuda->roots.count == cuda->roots.cap) {
                cuda->roots.cap = cuda->roots.cap * 2 + 16;
                cuda->roots.items = kj_xrealloc(cuda->roots.items,
                                                sizeof *cuda->roots.items * (size_t)cuda->roots.cap);
            }
            cuda->roots.items[cuda->roots.count++] = shaped;
        }
    }
    if (status == KJIT_OK && checked && checked->context->options.check == KJIT_CHECK_VALUES) {
        status = cuda_module(checked->context, path, &cuda->checked, &cuda->roots, error);
        /* (inserted at the first root's passes: none when every function
         * runs on the host, plain ones) */
        if (status == KJIT_OK && cuda->checked->ir->checks_inserted)
            status = same_sites(checked->ir, cuda->checked->ir, error);
    }
    cuda->code = kj_xcalloc((size_t)cuda->roots.count + 1, sizeof *cuda->code);
    if (status == KJIT_OK && cuda->roots.count > 0)
        status = compile_cuda_roots(cuda, error);
    return status;
}

static void put_blob(Writer *w, const void *bytes, size_t size)
{
    put_u64(w, size);
    put(w, bytes, size);
}

/* The cuda section (aot.c's read_cuda says its format). */
static void write_cuda(Writer *w, const CudaBuild *cuda)
{
    put_u32(w, cuda->on);
    if (!cuda->on)
        return;
    put_u32(w, (uint32_t)cuda->archs.count);
    for (int a = 0; a < cuda->archs.count; a++) {
        put_str(w, cuda->archs.names[a]);
        put_u32(w, cuda->archs.cubin[a]);
    }
    put_str(w, cuda->notes);
    put_u32(w, (uint32_t)cuda->roots.count);
    for (int i = 0; i < cuda->roots.count; i++) {
        put_root(w, &cuda->roots.items[i]);
        put_blob(w, cuda->code[i].ptx, strlen(cuda->code[i].ptx) + 1); /* with its NUL */
        for (int a = 0; a < cuda->archs.count; a++)
            if (cuda->archs.cubin[a])
                put_blob(w, cuda->code[i].cubin[a], cuda->code[i].cubin_size[a]);
    }
}

static void cuda_free(CudaBuild *cuda)
{
    for (int i = 0; cuda->code && i < cuda->roots.count; i++)
        kj_aot_cuda_code_free(&cuda->code[i]);
    free(cuda->code);
    free(cuda->roots.items);
    kjit_module_free(cuda->module);
    kjit_module_free(cuda->checked);
}

/* ------------------------------------------------------------ the build */

/* Runs a shell command of paths under our own temporary folder, its output
 * in the file at log; false and *error (what failed, its exit status and
 * its messages) when it fails.  run: the folder's messages.txt as the log. */
static bool run_logged(const char *log, const char *command, const char *what, char **error)
{
    KjBuf line = {0};
    kj_buf_printf(&line, "%s 2>'%s' >&2", command, log);
    int rc = system(line.data);
    kj_buf_free(&line);
    if (rc == 0)
        return true;
    KjBuf message = {0};
    size_t size = 0;
    char *text = kj_file_read(log, &size);
    kj_buf_printf(&message, "%s failed (exit status %d)%s%.2000s", what, rc,
                  text && size ? ":\n" : "", text ? text : "");
    free(text);
    *error = message.data;
    return false;
}

static bool run(const char *dir, const char *command, const char *what, char **error)
{
    char log[4200];
    snprintf(log, sizeof log, "%s/messages.txt", dir);
    return run_logged(log, command, what, error);
}

static void remove_folder(const char *dir)
{
    KjBuf command = {0};
    kj_buf_printf(&command, "rm -rf '%s'", dir);
    if (system(command.data) != 0) {
        /* a temporary folder left behind costs only disk */
    }
    kj_buf_free(&command);
}

/* ------------------------------------------------------ the static archive */

bool kj_aot_c_name(const char *output, const char *name_given, char name[128], char **error)
{
    const char *base = strrchr(output, '/') ? strrchr(output, '/') + 1 : output;
    snprintf(name, 128, "%s", name_given ? name_given : base);
    char *dot = strchr(name, '.');
    if (dot && !name_given)
        *dot = '\0';
    if (!strncmp(name, "lib", 3) && !name_given)
        memmove(name, name + 3, strlen(name + 3) + 1);
    for (char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_')
            *p = '_';
    if (!name[0] || isdigit((unsigned char)name[0])) {
        KjBuf m = {0};
        kj_buf_printf(&m, "'%s' makes no C name for the library's functions", name);
        *error = m.data;
        return false;
    }
    return true;
}


/* A symbol of an archive's object: the name the runtime asks for (a shared
 * library's, kjaot_<level>_<root>__<symbol>) and the one it has there. */
typedef struct Symbol {
    char *key, *name;
} Symbol;

typedef struct Symbols {
    Symbol *items;
    int count, cap;
} Symbols;

/* The renamed symbols of object `file` (its .syms file: "old new" lines). */
static kjit_status collect_symbols(Symbols *symbols, const char *file, const char *key_prefix,
                                   char **error)
{
    char path[4300];
    snprintf(path, sizeof path, "%s.syms", file);
    size_t size = 0;
    char *text = kj_file_read(path, &size);
    if (!text) {
        *error = kj_xstrdup("cannot read the renamed symbols");
        return KJIT_ERROR_IO;
    }
    kjit_status status = KJIT_OK;
    for (char *line = strtok(text, "\n"); line && status == KJIT_OK; line = strtok(NULL, "\n")) {
        char *space = strchr(line, ' ');
        if (!space)
            continue;
        *space = '\0';
        for (const char *p = space + 1; *p; p++)
            if (!(*p == '_' || *p == '.' || *p == '$' || (*p >= '0' && *p <= '9') ||
                  ((*p | 32) >= 'a' && (*p | 32) <= 'z'))) {
                KjBuf m = {0};
                kj_buf_printf(&m, "the object's symbol '%s' is not a C assembler name", space + 1);
                *error = m.data;
                status = KJIT_ERROR_BACKEND;
                break;
            }
        if (symbols->count == symbols->cap) {
            symbols->cap = symbols->cap * 2 + 64;
            symbols->items = kj_xrealloc(symbols->items, sizeof *symbols->items * (size_t)symbols->cap);
        }
        KjBuf key = {0};
        kj_buf_printf(&key, "%s%s", key_prefix, line);
        symbols->items[symbols->count++] = (Symbol){key.data, kj_xstrdup(space + 1)};
    }
    free(text);
    return status;
}

static int compare_keys(const void *a, const void *b)
{
    return strcmp(((const Symbol *)a)->key, ((const Symbol *)b)->key);
}

/* The entry point of an archive: NAME_kjit_load, which hands the runtime
 * the table and every symbol's address (kjit_module_load_linked).  Written
 * without kjit.h (kjit build may run where no header is installed): the
 * prototype below is kjit.h's, its status an int. */
static void write_entry(KjBuf *c, const char *name, const char *path, const Writer *table,
                        Symbols *symbols)
{
    qsort(symbols->items, (size_t)symbols->count, sizeof *symbols->items, compare_keys);
    kj_buf_printf(c, "/* %s_kjit_load: the kernels of %s, built by kjit build "
                     "--emit=staticlib (docs/aot.md). */\n"
                     "#include <stddef.h>\n#include <stdint.h>\n\n"
                     "struct kjit_context;\nstruct kjit_module;\n"
                     "int kjit_module_load_linked(struct kjit_context *, uint32_t, const char *,\n"
                     "    const unsigned char *, size_t, const char *const *, void *const *, size_t,\n"
                     "    struct kjit_module **);\n\n", name, path);
    for (int i = 0; i < symbols->count; i++)
        kj_buf_printf(c, "extern char kjs_%d[] __asm__(\"%s\");\n", i, symbols->items[i].name);
    kj_buf_printf(c, "\nstatic const char *const symbols[] = {\n");
    for (int i = 0; i < symbols->count; i++)
        kj_buf_printf(c, "    \"%s\",\n", symbols->items[i].key);
    kj_buf_printf(c, "    NULL};\nstatic void *const addresses[] = {\n");
    for (int i = 0; i < symbols->count; i++)
        kj_buf_printf(c, "    kjs_%d,\n", i);
    kj_buf_printf(c, "    NULL};\nstatic const unsigned char table[%zu] = {", table->len);
    for (size_t i = 0; i < table->len; i++)
        kj_buf_printf(c, "%s%u,", i % 24 ? "" : "\n    ", table->data[i]);
    kj_buf_printf(c, "\n};\n\n"
                     "int %s_kjit_load(struct kjit_context *context, struct kjit_module **module)\n"
                     "{\n    return kjit_module_load_linked(context, %uu, \"%s\", table, sizeof table,\n"
                     "                                   symbols, addresses, %d, module);\n}\n",
                  name, KJ_AOT_ABI, name, symbols->count);
}

/* The archive at output: the objects (`objects`, quoted paths) and the
 * entry point compiled by cc, put together by ar. */
static kjit_status write_archive(const char *dir, const char *output, const char *name,
                                 const char *path, const char *objects, const Writer *table,
                                 Symbols *symbols, char **error)
{
    KjBuf c = {0};
    write_entry(&c, name, path, table, symbols);
    char file[4200];
    snprintf(file, sizeof file, "%s/%s_kjit_load.c", dir, name);
    bool ok = kj_file_write(file, c.data, c.len);
    kj_buf_free(&c);
    if (!ok) {
        *error = kj_xstrdup("cannot write the entry point's source");
        return KJIT_ERROR_IO;
    }
    const char *cc = getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
    KjBuf command = {0};
    kj_buf_printf(&command, "%s -c -O1 -fPIC '%s' -o '%s/%s_kjit_load.o' && ar rcs '%s/lib.a'%s "
                            "'%s/%s_kjit_load.o'",
                  cc, file, dir, name, dir, objects, dir, name);
    ok = run(dir, command.data, "compiling the entry point and making the archive (cc, ar)", error);
    kj_buf_free(&command);
    if (!ok)
        return KJIT_ERROR_BACKEND;
    snprintf(file, sizeof file, "%s/lib.a", dir);
    size_t size = 0;
    char *bytes = kj_file_read(file, &size);
    KjOutputFile out;
    char *why = NULL;
    kjit_status status = bytes ? kj_output_open(output, &out, &why) : KJIT_ERROR_IO;
    if (status == KJIT_OK) {
        bool written = fwrite(bytes, 1, size, out.file) == size;
        status = kj_output_close(&out, written, &why);
    }
    if (status != KJIT_OK)
        *error = why ? why : kj_xstrdup("cannot write the archive");
    free(bytes);
    return status;
}

/* One object of the library: a root (or a shape's code) compiled for one
 * x86-64 level into DIR/<level>_<tag>.o, its global symbols renamed
 * kjaot_<level>_<tag>__<symbol> (a shared object; tag: the root's index,
 * or s and the shape's) or, in an archive, whose symbols share the
 * program's name space, kjlib_NAME_<level>_<tag>__<symbol>. */
typedef struct CpuObject {
    KjIrModule *ir;
    KjIrFunction *fn;
    KjCodegenOptions codegen;
    const KjCpuLevel *level;
    char tag[32];
    char file[4200];
    kjit_status status;
    char *error;
} CpuObject;

/* Compiles and writes one object, LLVM naming its global symbols with the
 * prefix (KjCodegenOptions.global_prefix: what `nm` and `objcopy
 * --redefine-syms` did, a process each, about a third of a library's CPU
 * time); touches nothing but its own CpuObject and file, so that several
 * run at once (compile_cpu_objects). */
static void compile_object(const char *dir, CpuObject *o, const kjit_build_options *build,
                           const char *name)
{
    char prefix[256];
    if (build->staticlib)
        snprintf(prefix, sizeof prefix, "kjlib_%s_%s_%s__", name, o->level->name, o->tag);
    else
        snprintf(prefix, sizeof prefix, "kjaot_%s_%s__", o->level->name, o->tag);
    o->codegen.cpu_name = o->level->llvm_cpu;
    o->codegen.cpu_features = o->level->llvm_features;
    o->codegen.global_prefix = prefix;
    size_t size = 0;
    char *failure = NULL;
    char *object = kj_jit->cpu_compile_object(o->ir, &o->fn, 1, &o->codegen, &size, &failure);
    o->codegen.global_prefix = NULL; /* the stack's */
    snprintf(o->file, sizeof o->file, "%s/%s_%s.o", dir, o->level->name, o->tag);
    o->status = KJIT_OK;
    if (!object || !kj_file_write(o->file, object, size)) {
        KjBuf m = {0};
        kj_buf_printf(&m, "code generation for %s (%s) failed: %s", o->fn->name, o->level->name,
                      failure ? failure : "cannot write the object");
        o->error = m.data;
        o->status = KJIT_ERROR_BACKEND;
    }
    free(object);
    free(failure);
    if (o->status != KJIT_OK || !build->staticlib)
        return;
    /* an archive's loader names every symbol (collect_symbols): the
     * object's global symbols, each with its name in the module */
    KjBuf list = {0}, log = {0};
    kj_buf_printf(&list,
                  "{ nm -g --defined-only '%s' | awk '{n = $3; if (index(n, \"%s\") == 1) "
                  "print substr(n, %d) \" \" n}' > '%s.syms'; }",
                  o->file, prefix, (int)strlen(prefix) + 1, o->file);
    kj_buf_printf(&log, "%s.messages", o->file);
    if (!run_logged(log.data, list.data, "listing the symbols (nm)", &o->error))
        o->status = KJIT_ERROR_BACKEND;
    kj_buf_free(&list);
    kj_buf_free(&log);
}

typedef struct CpuWork {
    const char *dir;
    const kjit_build_options *build;
    const char *name;
    CpuObject *objects;
    int count;
    atomic_int next;
} CpuWork;

static void *cpu_worker(void *arg)
{
    CpuWork *w = arg;
    for (int i; (i = atomic_fetch_add(&w->next, 1)) < w->count;)
        compile_object(w->dir, &w->objects[i], w->build, w->name);
    return NULL;
}

/* Every object on the threads that compile groups (kj_codegen_compile_threads,
 * KJIT_COMPILE_THREADS): a file of @reduce functions makes hundreds (each
 * signature's levels, times the x86-64 levels), each its own LLVM module and
 * renaming processes (nm, objcopy), one after another before.  Each object is the
 * same bytes whichever thread makes it, and they are listed (*objects) and
 * their symbols kept (*symbols, an archive's) in their order, so the
 * library is the same bytes for any thread count; the first failing object
 * (in order) is the error. */
static kjit_status compile_cpu_objects(const char *dir, CpuObject *objects, int count,
                                       const kjit_build_options *build, const char *name,
                                       KjBuf *list, Symbols *symbols, char **error)
{
    int threads = kj_codegen_compile_threads(error);
    if (threads == 0)
        return KJIT_ERROR_INVALID_ARGUMENT;
    CpuWork w = {.dir = dir, .build = build, .name = name, .objects = objects, .count = count};
    atomic_init(&w.next, 0);
    int helpers = (threads < count ? threads : count) - 1;
    pthread_t *tids = kj_xcalloc((size_t)(helpers > 0 ? helpers : 0) + 1, sizeof *tids);
    int started = 0;
    while (started < helpers && pthread_create(&tids[started], NULL, cpu_worker, &w) == 0)
        started++; /* fewer threads when the system has none to give */
    cpu_worker(&w);
    for (int t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    free(tids);
    kjit_status status = KJIT_OK;
    for (int i = 0; i < count; i++) {
        CpuObject *o = &objects[i];
        if (status == KJIT_OK && o->status != KJIT_OK) {
            status = o->status;
            *error = o->error;
            o->error = NULL;
        }
        free(o->error);
        if (status != KJIT_OK)
            continue;
        if (build->staticlib) {
            char key[256];
            snprintf(key, sizeof key, "kjaot_%s_%s__", o->level->name, o->tag);
            status = collect_symbols(symbols, o->file, key, error);
        }
        kj_buf_printf(list, " '%s'", o->file);
    }
    return status;
}

/* The module at path compiled in a cpu context of checked mode `check`
 * (KJIT_CHECK_* bits; 0 whatever KJIT_CHECK says). */
static kjit_status open_module(const char *path, int check, kjit_module **out, char **error)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CPU;
    options.check = check;
    kjit_context *context = NULL;
    if (kjit_context_create(&options, &context) != KJIT_OK) {
        *error = kj_xstrdup(kjit_last_error(NULL));
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    context->options.check = check; /* not KJIT_CHECK's, which create added */
    kjit_status status = kjit_compile_file(context, path, out);
    if (status != KJIT_OK) {
        *error = kj_xstrdup(kjit_last_error(context));
        kjit_context_destroy(context);
    }
    return status;
}

static void close_module(kjit_module *module)
{
    if (!module)
        return;
    kjit_context *context = module->context;
    kjit_module_free(module);
    kjit_context_destroy(context);
}

void kjit_build_options_init(kjit_build_options *options)
{
    memset(options, 0, sizeof *options);
}

kjit_status kjit_build_library(const char *path, const char *output, const char *levels,
                               char **error)
{
    kjit_build_options options;
    kjit_build_options_init(&options);
    options.levels = levels;
    return kjit_build_library_with(path, output, &options, NULL, error);
}

kjit_status kjit_build_library_with(const char *path, const char *output,
                                    const kjit_build_options *build, char **notes, char **error)
{
    *error = NULL;
    if (notes)
        *notes = NULL;
    char name[128] = "";
    if (build->staticlib && !kj_aot_c_name(output, build->name, name, error))
        return KJIT_ERROR_INVALID_ARGUMENT;
    const KjCpuLevel *levels[KJ_CPU_LEVEL_COUNT];
    int level_count = 0;
    const char *text = build->levels ? build->levels : "sse2,v3,v4";
    for (const char *p = text; *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(n < 31 ? n : 31), p);
        const KjCpuLevel *level = kj_cpu_level_named(name);
        if (!level) {
            KjBuf m = {0};
            kj_buf_printf(&m, "unknown x86-64 level '%s' in --cpu-levels (sse2, v3, v4)", name);
            *error = m.data;
            return KJIT_ERROR_INVALID_ARGUMENT;
        }
        /* lowest first, each once: the loader takes the last one it runs */
        bool seen = false;
        for (int i = 0; i < level_count; i++)
            seen |= levels[i] == level;
        if (!seen)
            levels[level_count++] = level;
        p += n + (comma ? 1 : 0);
    }
    if (level_count == 0) {
        *error = kj_xstrdup("--cpu-levels names no level");
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    for (int i = 1; i < level_count; i++)
        for (int j = i; j > 0 && levels[j] < levels[j - 1]; j--) {
            const KjCpuLevel *t = levels[j];
            levels[j] = levels[j - 1];
            levels[j - 1] = t;
        }

    /* the unchecked code, and with --check (or KJIT_CHECK) the checked code
     * too, each from the module compiled in a context of its mode */
    kjit_module *module = NULL, *checked = NULL;
    kjit_status status = open_module(path, 0, &module, error);
    int check = build->check | kj_check_env();
    if (status == KJIT_OK && check)
        status = open_module(path, check, &checked, error);
    Roots roots = {0};
    if (status == KJIT_OK)
        status = collect_roots(module, &roots, error);
    if (status == KJIT_OK && checked)
        status = collect_roots(checked, &roots, error);
    Shapes shapes = {0};
    if (status == KJIT_OK)
        status = collect_shapes(build, &roots, &shapes, error);
    CudaBuild cuda = {0};
    const char *archs = build->cuda_archs ? build->cuda_archs : KJ_AOT_CUDA_DEFAULT_ARCHS;
    if (status == KJIT_OK && strcmp(archs, "off") != 0)
        status = build_cuda(module->context, checked, path, archs, build, &cuda, error);

    char dir[] = "/tmp/kjit-lib-XXXXXX";
    bool have_dir = status == KJIT_OK && mkdtemp(dir) != NULL;
    if (status == KJIT_OK && !have_dir) {
        KjBuf m = {0};
        kj_buf_printf(&m, "cannot make a temporary folder: %s", strerror(errno));
        *error = m.data;
        status = KJIT_ERROR_IO;
    }
    const char *cc = getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
    KjBuf objects = {0};
    Symbols symbols = {0};
    /* the objects in the library's order: for each level its roots, then its shapes */
    int object_count = level_count * (roots.count + shapes.count), n = 0;
    CpuObject *cpu_objects = kj_xcalloc((size_t)object_count + 1, sizeof *cpu_objects);
    for (int l = 0; l < level_count && status == KJIT_OK; l++) {
        for (int i = 0; i < roots.count; i++) {
            KjCompiled *c = &roots.items[i].compiled;
            kjit_module *of = roots.items[i].module;
            CpuObject *o = &cpu_objects[n++];
            *o = (CpuObject){.ir = of->ir, .fn = c->root, .level = levels[l],
                             .codegen = kj_api_codegen_options(&kj_runtime_cpu, &of->context->options, c)};
            snprintf(o->tag, sizeof o->tag, "%d", i);
        }
        for (int k = 0; k < shapes.count; k++) {
            const Root *r = &roots.items[shapes.items[k].root];
            CpuObject *o = &cpu_objects[n++];
            *o = (CpuObject){.ir = r->module->ir, .fn = shapes.items[k].fn, .level = levels[l],
                             .codegen = kj_api_codegen_options(&kj_runtime_cpu,
                                                               &r->module->context->options,
                                                               &r->compiled)};
            memcpy(o->codegen.block_dims, shapes.items[k].dims, sizeof o->codegen.block_dims);
            snprintf(o->tag, sizeof o->tag, "s%d", k);
        }
    }
    if (status == KJIT_OK)
        status = compile_cpu_objects(dir, cpu_objects, n, build, name, &objects, &symbols, error);
    free(cpu_objects);
    if (status == KJIT_OK && build->staticlib) {
        Writer table = {0};
        write_table(&table, module, path, levels, level_count, &roots, &shapes, checked);
        write_cuda(&table, &cuda); /* in the program's table, as in a shared library's */
        status = write_archive(dir, output, name, path, objects.data ? objects.data : "", &table,
                               &symbols, error);
        free(table.data);
    } else if (status == KJIT_OK) {
        KjBuf link = {0};
        kj_buf_printf(&link, "%s -shared -o '%s/lib.so'%s -lmvec -lm -Wl,-z,defs", cc, dir,
                      objects.data ? objects.data : "");
        if (!run(dir, link.data, "linking the library (cc)", error))
            status = KJIT_ERROR_BACKEND;
        kj_buf_free(&link);
    }
    kj_buf_free(&objects);
    for (int i = 0; i < symbols.count; i++) {
        free(symbols.items[i].key);
        free(symbols.items[i].name);
    }
    free(symbols.items);

    if (status == KJIT_OK && !build->staticlib) {
        char so[4200];
        snprintf(so, sizeof so, "%s/lib.so", dir);
        size_t elf_size = 0;
        char *elf = kj_file_read(so, &elf_size);
        Writer w = {0};
        if (elf)
            put(&w, elf, elf_size);
        free(elf);
        write_table(&w, module, path, levels, level_count, &roots, &shapes, checked);
        write_cuda(&w, &cuda);
        uint8_t trailer[KJ_AOT_TRAILER_BYTES] = {0};
        memcpy(trailer, KJ_AOT_MAGIC, 8);
        uint32_t abi = KJ_AOT_ABI;
        uint64_t table_size = w.len - elf_size;
        uint64_t elf64 = elf_size;
        memcpy(trailer + 8, &abi, 4);
        memcpy(trailer + 16, &elf64, 8);
        memcpy(trailer + 24, &table_size, 8);
        put(&w, trailer, 32);
        KjSha256 sha;
        kj_sha256_init(&sha);
        kj_sha256_update(&sha, w.data, w.len);
        uint8_t digest[KJ_SHA256_BYTES];
        kj_sha256_final(&sha, digest);
        put(&w, digest, KJ_SHA256_BYTES);
        KjOutputFile out;
        char *why = NULL;
        status = elf ? kj_output_open(output, &out, &why) : KJIT_ERROR_IO;
        if (status == KJIT_OK) {
            bool written = fwrite(w.data, 1, w.len, out.file) == w.len;
            status = kj_output_close(&out, written, &why);
        }
        if (status != KJIT_OK)
            *error = why ? why : kj_xstrdup("cannot write the library");
        free(w.data);
    }
    if (have_dir)
        remove_folder(dir);
    free(roots.items);
    free(shapes.items);
    if (notes)
        *notes = cuda.notes;
    else
        free(cuda.notes);
    cuda_free(&cuda); /* before its context goes with the module's */
    close_module(module);
    close_module(checked);
    return status;
}
