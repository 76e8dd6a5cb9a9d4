/*
 * pipeline.c: the pass list, in one function.
 *
 * Every way into kjit (the runtime's first compile of a module, its first use
 * of a signature or a vectorized layout, `kjit check` and `kjit build`) goes
 * through kj_pipeline_run, which runs the front end's passes on a source file
 * and the middle passes on the roots asked for.  The back end (LLVM lowering,
 * optimisation, emission: compiler/backend/) takes the roots from there.
 *
 *   front end, once per module      parse -> imports -> check -> halves -> verify
 *   middle, once per module         promote locals (local() arrays of constant
 *                                   indices -> scalars), checks (checked mode:
 *                                   mark the check sites)
 *   middle, once per root           vectorize (a @vectorize signature),
 *                                   reduce (a @reduce signature, one level) or
 *                                   guvectorize (a @guvectorize signature) -> verify
 *                                   barrier split (cpu: a kernel's thread loops) -> verify
 *                                   specialise (cpu: the split form for a launch's
 *                                   block dims) -> verify
 *                                   size (what the back end gets, bounded)
 *   back end, per target            lower -> optimise -> emit (object or PTX)
 *
 * The checked module is always verified: a verifier failure is a compiler bug,
 * reported as an internal error at the main file, never a crash.  With
 * `verify` (kjit --verify, KJIT_VERIFY=1, on in make check) the verifier also
 * runs after each middle pass.  A new pass goes in the list below, opening
 * with its contract.
 */
#include "kjit_compiler.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A hash of the main file and every import, by path and text: the module's
 * part of every cache key. */
static uint64_t source_hash(const KjSource *src, const KjModuleLoader *loader)
{
    uint64_t hash = kj_hash_bytes(0, src->text, src->len);
    for (int i = 0; i < loader->sources.count; i++) {
        const KjSource *import = loader->sources.items[i];
        hash = kj_hash_bytes(hash, import->path, strlen(import->path));
        hash = kj_hash_bytes(hash, import->text, import->len);
    }
    return hash;
}

/* The module verifies, or `fn` does when not NULL (a function outside the
 * module's list, checked as if it stood where the module's function of its
 * symbol does); an internal error otherwise. */
static bool verified_ir(KjPipeline *p, const KjIrFunction *fn, const char *after)
{
    char *why = NULL;
    if (fn ? kj_ir_verify_function(p->module, fn, &why) : kj_ir_verify(p->module, &why))
        return true;
    const char *where = p->src ? p->src->path : "kjit";
    kj_error_plain(p->diag, where, "internal error: the IR does not verify after %s: %s", after,
                   why);
    free(why);
    return false;
}

/* ------------------------------------------------- the size of a root */

/*
 * A root's size: the IR nodes (statements and expressions) of the function
 * the back end gets, its split form, and every function it calls, each
 * counted once.  LLVM's optimiser is superlinear in a function's size on
 * some shapes (10,000 stores into one local() array: 18 s, in InstCombine
 * and the instruction scheduler) and cannot be stopped midway, so the input
 * it gets is bounded instead: KJ_MAX_ROOT_NODES, or KJIT_MAX_IR_NODES.
 */
enum { KJ_MAX_ROOT_NODES = 50000 };

typedef struct SizeWalk {
    const KjIrFunction **seen; /* open addressing, NULL = free */
    size_t cap, count;
    int64_t nodes;
} SizeWalk;

static void count_function(SizeWalk *w, const KjIrFunction *fn);

static bool count_expr(KjIrWalk *walk, const KjIrExpr *e)
{
    SizeWalk *w = walk->data;
    w->nodes++;
    if (e->op == KJ_IR_CALL && e->callee)
        count_function(w, e->callee);
    return true;
}

static KjIrWalkStep count_stmt(KjIrWalk *walk, const KjIrStmt *s)
{
    SizeWalk *w = walk->data;
    w->nodes++;
    return KJ_IR_WALK_ON;
}

/* Each function once: a call tree that doubles at each level holds few
 * functions but many paths.  The recursion follows calls, at most
 * KJ_MAX_CALL_DEPTH deep. */
static void count_function(SizeWalk *w, const KjIrFunction *fn)
{
    if (!fn)
        return;
    if (2 * (w->count + 1) > w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        const KjIrFunction **seen = kj_xcalloc(cap, sizeof *seen);
        for (size_t i = 0; i < w->cap; i++) {
            if (!w->seen[i])
                continue;
            size_t h = ((uintptr_t)w->seen[i] >> 4) & (cap - 1);
            while (seen[h])
                h = (h + 1) & (cap - 1);
            seen[h] = w->seen[i];
        }
        free(w->seen);
        w->seen = seen;
        w->cap = cap;
    }
    size_t h = ((uintptr_t)fn >> 4) & (w->cap - 1);
    for (; w->seen[h]; h = (h + 1) & (w->cap - 1))
        if (w->seen[h] == fn)
            return;
    w->seen[h] = fn;
    w->count++;
    KjIrWalk walk = {.stmt = count_stmt, .expr = count_expr, .data = w};
    kj_ir_walk_stmt(&walk, fn->body);
    count_function(w, fn->split);
}

static int64_t max_root_nodes(void)
{
    const char *env = getenv("KJIT_MAX_IR_NODES");
    char *end;
    long long n = env && *env ? strtoll(env, &end, 10) : 0;
    return env && *env && *end == '\0' && n > 0 ? n : KJ_MAX_ROOT_NODES;
}

/* ------------------------------------------------------------ the passes */

static bool verified(KjPipeline *p, const char *after) { return verified_ir(p, NULL, after); }

bool kj_pipeline_run(KjPipeline *p)
{
    int errors = p->diag->error_count;

    if (!p->module) {
        /* parse: source text -> AST.  Needs: a source.  Gives: an AST with
         * locations, or syntax errors. */
        p->ast = kj_parse(p->arena, p->src, p->diag);
        if (p->diag->error_count > errors || p->stop == KJ_STAGE_AST)
            return p->diag->error_count == errors;

        /* imports + check: AST -> typed IR (check.c loads the imports through
         * the loader).  Needs: an AST without syntax errors.  Gives: a module
         * of typed functions, callees before callers, or type errors. */
        KjModuleLoader loader = {.arena = p->arena, .diag = p->diag,
                                 .stdlib_dirs = p->stdlib_dirs};
        p->module = kj_check(p->arena, p->ast, &loader, p->diag);
        if (!p->module || p->diag->error_count > errors) {
            p->module = NULL;
            return false;
        }
        p->module->source_hash = source_hash(p->src, &loader);

        /* halves: f16/bf16 arithmetic -> f32 arithmetic rounded back (half.c
         * has the contract).  Needs: a checked module.  Gives: one whose
         * 16-bit values are only loaded, stored, converted and selected. */
        kj_half_lower(p->module);

        /* verify: always, once, on the checked module. */
        if (!verified(p, "check")) {
            p->module = NULL;
            return false;
        }
        /* barrier warnings (`kjit check`): barrier_warn.c has the contract */
        if (p->warn_barriers)
            kj_warn_divergent_barriers(p->arena, p->module, p->diag);
    }
    if (p->stop == KJ_STAGE_IR)
        return true;

    /* promote locals: local() arrays whose indices are constants after
     * unrolling small constant loops -> scalar variables (local_promote.c has
     * the contract).  Once per module, before any root's passes. */
    if (!p->module->locals_promoted) {
        kj_promote_locals(p->module);
        if (p->verify && !verified(p, "promote locals"))
            return false;
    }

    /* checks: marks the sites the back end tests in checked mode (checks.c
     * has the contract).  Once per module, before any vectorize pass. */
    if (((p->checks & KJ_CHECKS_VALUES) && !p->module->checks_inserted) ||
        ((p->checks & KJ_CHECKS_RACE) && !p->module->races_inserted)) {
        kj_checks_insert(p->module, p->checks);
        if (p->verify && !verified(p, "checks"))
            return false;
    }

    for (int i = 0; i < p->root_count; i++) {
        KjPipelineRoot *root = &p->roots[i];
        root->root = root->fn;
        /* vectorize: a SCALAR function -> a VEC_KERNEL over arrays laid out
         * as root->variant says (vectorize.c has the contract). */
        if (root->vectorize)
            root->root = kj_vectorize(p->module, root->fn, root->variant);
        /* reduce: a @reduce's SCALAR function (and its map's) -> a kernel for
         * one level of the reduction tree (reduce.c has the contract). */
        if (root->reduce)
            root->root = kj_reduce_lift(p->module, root->fn, root->map, *root->reduce);
        /* guvectorize: a @guvectorize's core function -> a VEC_KERNEL over
         * its loop dimensions (guvectorize.c has the contract). */
        if (root->gufunc)
            root->root = kj_guvectorize(p->module, root->fn, root->gufunc, root->loop_ndim,
                                        root->gufunc_contiguous);
        if (p->verify && (root->vectorize || root->reduce || root->gufunc) &&
            !verified(p, root->reduce ? "reduce" : root->gufunc ? "guvectorize" : "vectorize"))
            return false;
        /* grid rows: whether the cpu targets may run the kernel as rows of
         * its grid (grid_rows.c has the contract); read by the back end
         * (the __xrange entry) and the runtime (kj_cpu_run_rows). */
        if (root->root->kind == KJ_IR_FN_KERNEL && !root->block[0])
            root->root->grid_rows = kj_grid_rows(root->root);
        /* barrier split: a kernel with syncthreads() -> its split form, for
         * the cpu targets (barrier_split.c has the contract); none when its
         * barriers must stay on fibers. */
        if (root->split_barriers && root->root->kind == KJ_IR_FN_KERNEL &&
            (root->root->uses_syncthreads || kj_split_straight_line(root->root)) && !root->root->split) {
            kj_barrier_split(p->module, root->root, NULL);
            if (p->verify && !verified(p, "barrier split"))
                return false;
        }
        /* specialise: a kernel's split form -> a copy of the kernel whose
         * split form is made for the block dims of a launch (split_specialise.c
         * has the contract).  The copy is not in the module's list: it goes
         * to the back end alone, for one shape, and lives in p->arena. */
        if (root->block[0] && root->root->kind == KJ_IR_FN_KERNEL && root->root->split) {
            root->root = kj_split_specialise(p->arena, root->root, root->block);
            if (p->verify && !verified_ir(p, root->root->split, "specialise"))
                return false;
        }
        /* size: what the back end would get, bounded (see above) */
        SizeWalk walk = {0};
        count_function(&walk, root->root);
        free(walk.seen);
        int64_t limit = max_root_nodes();
        if (walk.nodes > limit) {
            kj_error(p->diag, root->fn->loc, "'%s' is too large to compile: %lld IR nodes with "
                     "the functions it calls, more than %lld (LLVM's time grows faster than "
                     "the code); split it into smaller functions or kernels, or raise "
                     "KJIT_MAX_IR_NODES", root->fn->name, (long long)walk.nodes, (long long)limit);
            return false;
        }
    }
    return true;
}

KjIrModule *kj_compile_source(KjArena *arena, const KjSource *src, const char **stdlib_dirs,
                              KjDiag *diag)
{
    KjPipeline p = {.arena = arena, .diag = diag, .src = src, .stdlib_dirs = stdlib_dirs,
                    .stop = KJ_STAGE_IR};
    return kj_pipeline_run(&p) ? p.module : NULL;
}

bool kj_pipeline_verify_default(void)
{
    const char *env = getenv("KJIT_VERIFY");
    return env && *env && strcmp(env, "0") != 0;
}
