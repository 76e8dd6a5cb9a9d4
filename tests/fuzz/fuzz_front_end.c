/*
 * fuzz_front_end.c: libFuzzer harness for the front end and the IR passes
 * (tests/fuzz/fuzz.mk builds it with ASan and UBSan).  The input is a .kern
 * file: parse, check (imports from stdlib/), the verifier after every pass,
 * then the middle passes on every root a cpu build would compile: each
 * function as it is (a kernel's split form and its specialisation for a
 * 64-thread block), each @vectorize signature lifted for contiguous arrays,
 * each @guvectorize over one loop dimension.  Code generation (LLVM) is left
 * out: it is slow per input and its input is what these passes give.
 *
 * Any input may be refused with errors; none may crash, hang, leak or trip a
 * sanitizer.
 */
#include "kjit_compiler.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void ignore_diagnostic(void *user, KjSeverity severity, const char *formatted) {}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    KjSource src = {"fuzz.kern", text, size};
    KjDiag diag = {ignore_diagnostic, NULL, 0, 0};
    KjArena arena = {0};
    const char *stdlib_dirs[] = {"stdlib", NULL};
    KjPipeline p = {.arena = &arena, .diag = &diag, .src = &src, .stdlib_dirs = stdlib_dirs,
                    .stop = KJ_STAGE_IR, .verify = true};
    if (kj_pipeline_run(&p)) {
        KjVec roots = {0};
        KjVecVariant contig = {.layout = KJ_LAYOUT_CONTIG, .ndim = 1, .scalar_mask = 0};
        for (int e = 0; e < p.module->entries.count; e++) {
            KjIrEntry *entry = p.module->entries.items[e];
            for (int v = 0; v < entry->variants.count; v++) {
                KjIrFunction *fn = entry->variants.items[v];
                KjPipelineRoot *root = kj_arena_alloc(&arena, sizeof *root);
                if (fn->kind == KJ_IR_FN_SCALAR && entry->kind == KJ_FN_VECTORIZE)
                    *root = (KjPipelineRoot){.fn = fn, .vectorize = true, .variant = contig};
                else if (entry->layout)
                    *root = (KjPipelineRoot){.fn = fn, .gufunc = entry->layout, .loop_ndim = 1,
                                             .gufunc_contiguous = true};
                else if (fn->kind == KJ_IR_FN_KERNEL)
                    *root = (KjPipelineRoot){.fn = fn, .split_barriers = true};
                else
                    continue;
                kj_vec_push(&arena, &roots, root);
            }
        }
        for (int i = 0; i < roots.count; i++) {
            KjPipeline middle = {.arena = &arena, .diag = &diag, .module = p.module,
                                 .roots = roots.items[i], .root_count = 1,
                                 .stop = KJ_STAGE_ROOTS, .verify = true};
            if (!kj_pipeline_run(&middle))
                continue;
            KjIrFunction *root = ((KjPipelineRoot *)roots.items[i])->root;
            static const uint32_t block[3] = {64, 1, 1};
            if (root && root->split)
                kj_split_specialise(&arena, root, block);
        }
    }
    kj_arena_free(&arena);
    free(text);
    return 0;
}
