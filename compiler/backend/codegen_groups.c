/*
 * codegen_groups.c: a file's roots compiled in groups on several threads
 * (kjit build, kjit_stage_file), the way LLVM's own parallel code generation
 * cuts a module: LLVM spends a file's compile time in its -O3 pipeline and
 * code generation, one function after another, so a file of many roots
 * (examples/reduce.kern: 24 reduction kernels) took the sum of theirs on one
 * core.
 *
 * The roots are cut into groups by a weight that depends on the roots alone
 * (never on the thread count), so the output is the same bytes for any
 * number of threads: the roots other than reduce.c's kernels in their order,
 * then reduce.c's kernels in theirs (a group holds one kind, so that those
 * take their lean pipeline: kj_codegen_lean_roots); a reduction kernel or a
 * kernel with a split form weighs ROOT_HEAVY (about 18 ms of LLVM each on
 * cpu), any other root 1, and a group closes before it would pass
 * GROUP_WEIGHT or where the kind changes. A small file
 * is one group, which is kj_codegen_emit's module and bytes. Each group is
 * kj_codegen_emit on its own LLVMContext and target machine (LLVM's C API
 * is safe to use from several threads that way; the IR module is only
 * read), run by a worker that takes the next group not yet taken; the
 * caller is one of the workers. The results are joined in group order:
 * objects by elf_join.c, PTX texts by ptx.c's kj_ptx_join, each group of
 * PTX after the first with its internal names suffixed (__g<group>) so that
 * two groups' internal copies of one device function never clash.
 */
#include "codegen_llvm.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROOT_HEAVY 4
#define GROUP_WEIGHT 8
/* the default's cap: LLVM's compile of one group keeps a core busy; past
 * this many a file's groups are too few to keep more of them busy */
#define DEFAULT_THREADS_CAP 16

int kj_codegen_compile_threads(char **error)
{
    const char *env = getenv("KJIT_COMPILE_THREADS");
    if (env && *env) {
        char *end = NULL;
        long n = strtol(env, &end, 10);
        if (*end != '\0' || n < 1 || n > KJ_COMPILE_THREADS_MAX) {
            if (error) {
                KjBuf b = {0};
                kj_buf_printf(&b, "KJIT_COMPILE_THREADS=%s is not a thread count from 1 to %d",
                              env, KJ_COMPILE_THREADS_MAX);
                *error = b.data;
            }
            return 0;
        }
        return (int)n;
    }
    cpu_set_t set;
    long n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                         : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > DEFAULT_THREADS_CAP ? DEFAULT_THREADS_CAP : (int)n;
}

static int root_weight(const KjIrFunction *fn)
{
    /* reduce.c's kernels (the only unchecked ones) and kernels with a split
     * form are the large ones in LLVM */
    return fn->unchecked || fn->split ? ROOT_HEAVY : 1;
}

typedef struct Group {
    int first, count;
    char *bytes;
    size_t size;
    char *error;
} Group;

typedef struct Work {
    KjIrModule *module;
    KjIrFunction **roots;
    const KjCodegenOptions *options;
    KjEmitKind kind;
    Group *groups;
    int group_count;
    bool suffix; /* cuda: groups after the first rename their internal names */
    atomic_int next;
} Work;

static void compile_group(Work *w, int i)
{
    Group *g = &w->groups[i];
    KjCodegenOptions options = *w->options;
    char suffix[24];
    if (w->suffix && i > 0) {
        snprintf(suffix, sizeof suffix, "__g%d", i);
        options.local_suffix = suffix;
    }
    g->bytes = kj_codegen_emit(w->module, w->roots + g->first, g->count, &options, w->kind,
                               &g->size, &g->error);
    if (!g->bytes && !g->error)
        g->error = kj_xstrdup("LLVM gave no code");
}

static void *worker(void *arg)
{
    Work *w = arg;
    for (int i; (i = atomic_fetch_add(&w->next, 1)) < w->group_count;)
        compile_group(w, i);
    return NULL;
}

char *kj_codegen_emit_grouped(KjIrModule *module, KjIrFunction **roots, int root_count,
                              const KjCodegenOptions *options, KjEmitKind kind, size_t *size,
                              char **error)
{
    bool cuda = options->target == KJ_CODEGEN_CUDA;
    /* line tables in PTX number the file in each text (.file 1): one module */
    bool joinable = (kind == KJ_EMIT_OBJ && !cuda) ||
                    (kind == KJ_EMIT_PTX && cuda && !options->line_info);
    int threads = kj_codegen_compile_threads(error);
    if (threads == 0)
        return NULL;
    /* reduce.c's kernels after the other roots, each in their order, so that
     * a group holds one kind and takes its pipeline (kj_codegen_lean_roots) */
    KjIrFunction **order = kj_xcalloc((size_t)root_count + 1, sizeof *order);
    int placed = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < root_count; i++)
            if (roots[i]->unchecked == (pass == 1))
                order[placed++] = roots[i];
    Group *groups = kj_xcalloc((size_t)root_count + 1, sizeof *groups);
    int group_count = 0, weight = 0;
    for (int i = 0; i < root_count; i++) {
        int w = root_weight(order[i]);
        bool kind_changes = i > 0 && order[i]->unchecked != order[i - 1]->unchecked;
        if (group_count == 0 || (joinable && (weight + w > GROUP_WEIGHT || kind_changes))) {
            groups[group_count++] = (Group){.first = i};
            weight = 0;
        }
        groups[group_count - 1].count++;
        weight += w;
    }
    if (group_count <= 1) {
        free(groups);
        free(order);
        return kj_codegen_emit(module, roots, root_count, options, kind, size, error);
    }
    roots = order;

    Work w = {.module = module, .roots = roots, .options = options, .kind = kind,
              .groups = groups, .group_count = group_count, .suffix = cuda};
    atomic_init(&w.next, 0);
    int helpers = (threads < group_count ? threads : group_count) - 1;
    pthread_t *tids = kj_xcalloc((size_t)helpers + 1, sizeof *tids);
    int started = 0;
    while (started < helpers && pthread_create(&tids[started], NULL, worker, &w) == 0)
        started++; /* fewer threads when the system has none to give */
    worker(&w);
    for (int t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    free(tids);

    char *result = NULL;
    int failed = -1;
    for (int i = 0; i < group_count && failed < 0; i++)
        if (!groups[i].bytes)
            failed = i;
    if (failed >= 0) {
        if (error) {
            *error = groups[failed].error;
            groups[failed].error = NULL;
        }
    } else {
        char **parts = kj_xcalloc((size_t)group_count, sizeof *parts);
        size_t *sizes = kj_xcalloc((size_t)group_count, sizeof *sizes);
        for (int i = 0; i < group_count; i++)
            parts[i] = groups[i].bytes, sizes[i] = groups[i].size;
        result = cuda ? kj_ptx_join(parts, group_count, error)
                      : kj_elf_join(parts, sizes, group_count, size, error);
        if (result && cuda && size)
            *size = strlen(result);
        free(parts);
        free(sizes);
    }
    for (int i = 0; i < group_count; i++) {
        free(groups[i].bytes);
        free(groups[i].error);
    }
    free(groups);
    free(order);
    return result;
}
