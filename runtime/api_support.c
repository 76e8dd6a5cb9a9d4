/*
 * api_support.c: what the runtime targets (runtime_cpu.c, runtime_cuda.c)
 * and the call paths above them share of the API's internals: the cache key
 * of one root's code, the code generator's options for it, host memory
 * aligned for vector loads, and the block shape of a reduction's items.  It sits below the targets, so that they
 * call only down.
 */
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

/*
 * The key of one root's code: everything the bytes depend on but the target,
 * whose own fields (its name, the host CPU or the GPU and assembler) each
 * target adds.  The module's source hash covers its text and the path and
 * text of every module it imports, so editing an import changes the key of
 * each importer.
 */
void kj_api_code_key(const kjit_module *module, const KjCompiled *compiled, KjCacheKey *key)
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
    if (compiled->lifted[0]) {
        kj_cache_key_add(key, "lifted", "%s", compiled->lifted);
        KjReduceKnobs knobs = kj_reduce_knobs(); /* reduce.c's measuring switches */
        if (knobs.warps_unroll || knobs.tail_unroll || knobs.warps_main || knobs.lanes_main ||
            knobs.o3 || knobs.warps_short || knobs.tree_inline ||
            knobs.strided_vector)
            kj_cache_key_add(key, "reduce knobs",
                             "warps %d tail %d main %d lanes main %d o3 %d short %d tree inline %d"
                             " strided vector %d",
                             knobs.warps_unroll, knobs.tail_unroll, (int)knobs.warps_main,
                             (int)knobs.lanes_main, (int)knobs.o3, (int)knobs.warps_short,
                             (int)knobs.tree_inline, (int)knobs.strided_vector);
    }
    kj_cache_key_add(key, "opt", "%d%s%s", module->context->options.opt_level,
                     module->context->options.line_info ? " lineinfo" : "",
                     module->context->options.cpu_simd ? "" : " nosimd");
    if (module->context->options.check)
        kj_cache_key_add(key, "checks", "%d", module->context->options.check);
    /* KJIT_VERIFY: the cpu code fences a block's shared memory on its stack
     * with guard bytes it checks (target_cpu.c's impl_owns_shared) */
    if (kj_jit->pipeline_verify_default && kj_jit->pipeline_verify_default())
        kj_cache_key_add(key, "verify", "shared guards");
    if (module->context->options.cancellable)
        kj_cache_key_add(key, "cancel", "%d", 1);
    if (module->ir->locals_in_memory)
        kj_cache_key_add(key, "locals", "in memory");
#define KJ_SIMD_SWITCH_KEY(name)                                                              \
    if (getenv(name) && strcmp(getenv(name), "0") == 0)                                           \
        kj_cache_key_add(key, "simd switch", "%s=0", name);
    KJ_SIMD_SWITCHES(KJ_SIMD_SWITCH_KEY)
#undef KJ_SIMD_SWITCH_KEY
    if (getenv(KJ_SIMD_FISSION_REGISTERS) && *getenv(KJ_SIMD_FISSION_REGISTERS))
        kj_cache_key_add(key, "simd fission registers", "%s", getenv(KJ_SIMD_FISSION_REGISTERS));
}

void *kj_api_alloc_aligned(size_t bytes)
{
    void *data = NULL;
    if (posix_memalign(&data, 64, bytes ? bytes : 64) != 0)
        return NULL;
    return data;
}

void kj_items_block_shape(const KjItemsRun *run, int64_t *items_per_block, uint32_t *threads)
{
    if (run->columns) {
        *items_per_block = KJ_REDUCE_COLUMN_ITEMS;
        *threads = KJ_REDUCE_COLUMN_ITEMS * (KJ_REDUCE_LANES / run->thread_lanes);
    } else {
        *items_per_block =
            KJ_REDUCE_WARPS_PER_BLOCK * (run->thread_lanes > 0 ? run->thread_lanes : 1);
        *threads = KJ_REDUCE_WARPS_PER_BLOCK * KJ_REDUCE_LANES;
    }
}

KjCodegenOptions kj_api_codegen_options(const KjRuntimeTarget *runtime, const kjit_options *asked,
                                        const KjCompiled *compiled)
{
    /* cpu_simd goes to every target: only those with thread loops read it */
    KjCodegenOptions options = {.target = runtime->codegen,
                                .opt_level = asked->opt_level,
                                .line_info = asked->line_info != 0,
                                .cpu_simd = asked->cpu_simd != 0,
                                .checks = asked->check != 0,
                                .race = (asked->check & KJIT_CHECK_RACE) != 0,
                                .cancel = asked->cancellable != 0};
    if (compiled) {
        options.contiguous_params = compiled->contiguous;
        options.checks = options.checks && !compiled->root->unchecked;
        options.race = options.race && options.checks;
    }
    return options;
}
