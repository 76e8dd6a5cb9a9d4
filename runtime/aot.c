/*
 * aot.c: modules from libraries built ahead of time (kjit build --emit=lib,
 * aot_build.c; docs/aot.md), in libkjit and libkjit-rt alike.
 *
 * kj_aot_open (for kjit_module_load_library, api.c) reads the file once,
 * through a descriptor opened
 * without following links, and refuses it before anything of it runs when
 * another user could have written it (the file, or its folder: the cache's
 * rule, docs/security.md), when its trailer is not kjit's or names another
 * ABI version (both versions in the message), when the SHA-256 of its bytes
 * is not the one the trailer holds (truncated or altered), or when this CPU
 * runs none of its x86-64 levels.  The file is read straight into a memfd,
 * checked there, and sealed (no write, no resize) before dlopen maps it,
 * so what runs is what was checked.  The table becomes a KjIrModule of function
 * headers (no bodies): what the API reads of the IR to choose signatures,
 * broadcast, launch and name things, so a library's functions go through
 * the same call paths as compiled ones; find_compiled (api.c) asks
 * kj_aot_find for a root instead of the pass list, and the cpu target's
 * generate asks kj_aot_generate for its entry points instead of LLVM.
 * A checked context runs the library's checked roots (of its kinds, else
 * the library is refused); a launch of a block shape the library was built
 * for runs that shape's code (kj_aot_shape).  kj_aot_open_linked does the
 * same for a library linked into the program (--emit=staticlib), whose
 * symbols its NAME_kjit_load hands over, sorted, instead of dlopen's.
 * On a cuda context the library's cuda roots (read_cuda) run the device's
 * cubin, else the PTX (aot_cuda.c chooses, and loads a root's code at its
 * first use); plain functions run the host's roots there, as under the JIT.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kjit_runtime.h"

/* ----------------------------------------------------------- the levels */

#define V2_FEATURES "+sse2,+sse3,+ssse3,+sse4.1,+sse4.2,+popcnt,+cx16,+sahf"
#define V3_FEATURES V2_FEATURES ",+avx,+avx2,+fma,+bmi,+bmi2,+f16c,+lzcnt,+movbe,+xsave"
const KjCpuLevel kj_cpu_levels[KJ_CPU_LEVEL_COUNT] = {
    {"sse2", "x86-64", "+sse2", "x86-64"},
    {"v3", "x86-64-v3", V3_FEATURES, "x86-64-v3"},
    {"v4", "x86-64-v4", V3_FEATURES ",+avx512f,+avx512bw,+avx512cd,+avx512dq,+avx512vl",
     "x86-64-v4"},
};

const KjCpuLevel *kj_cpu_level_named(const char *name)
{
    for (int i = 0; i < KJ_CPU_LEVEL_COUNT; i++)
        if (strcmp(kj_cpu_levels[i].name, name) == 0)
            return &kj_cpu_levels[i];
    return NULL;
}

/* "-avx2" (or "-avx2,..." anywhere) in KJIT_CPU_FEATURES takes avx2 away. */
static bool feature_removed(const char *feature, size_t len)
{
    const char *env = getenv("KJIT_CPU_FEATURES");
    for (const char *p = env; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == len + 1 && p[0] == '-' && strncmp(p + 1, feature, len) == 0)
            return true;
        p += n + (comma ? 1 : 0);
    }
    return false;
}

bool kj_cpu_level_usable(const KjCpuLevel *level)
{
    __builtin_cpu_init();
    bool has = strcmp(level->cpu_supports, "x86-64") == 0      ? true
               : strcmp(level->cpu_supports, "x86-64-v3") == 0 ? __builtin_cpu_supports("x86-64-v3")
               : strcmp(level->cpu_supports, "x86-64-v4") == 0 ? __builtin_cpu_supports("x86-64-v4")
                                                               : false;
    for (const char *p = level->llvm_features; has && *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n > 1 && feature_removed(p + 1, n - 1))
            has = false;
        p += n + (comma ? 1 : 0);
    }
    return has;
}

/* ---------------------------------------------------------- the library */

typedef struct AotRoot {
    int entry, sig;
    bool vectorized, checked;
    KjVecVariant variant;
    uint32_t contiguous;
    const char *lifted, *symbol;
    KjIrFunction *header;
    bool bound; /* its print and cancel hooks point at the runtime */
    /* a cuda root (aot_cuda.c): what the device runs of it, in the
     * library's copy of the file (NULL: none; the cubin first, else the
     * PTX, NUL-terminated) */
    bool cuda;
    const void *cubin;
    size_t cubin_size;
    const char *ptx;
    uint64_t sizes[KJ_AOT_CUDA_ARCHS + 1]; /* the file's: the PTX, each arch's cubin */
} AotRoot;

/* A kernel root's code for one block shape (kjit build --block). */
typedef struct AotShape {
    int root;
    uint32_t dims[3];
    bool shared_written;
    bool resolved; /* block and blocks looked up, hooks bound (under the lock) */
    void *block, *blocks;
} AotShape;

struct KjLibrary {
    /* dlopen's (on a cuda context opened at the first host root's lookup,
     * from the sealed memfd: a cuda call needs none of the cpu code), or
     * NULL for a library linked into the program: */
    void *handle;
    const char *const *symbols; /* its symbols, sorted, and their addresses */
    void *const *addresses;
    size_t symbol_count;
    /* the memfd dlopen mapped, open while the library is: the loader knows
     * an object by its name, /proc/self/fd/N, so N must not be reused while
     * it is loaded (a second library would be taken for the first) */
    int memfd;
    pthread_mutex_t dl_lock; /* the deferred dlopen, once */
    char *dl_error; /* why it failed, if it did */
    const KjCpuLevel *level;
    int check; /* the KJIT_CHECK_* bits of its checked roots; 0: none */
    int root_count;
    AotRoot *roots;
    int shape_count;
    AotShape *shapes;
    pthread_mutex_t lock;
    /* cuda (aot_cuda.c): whether the context is, its device's compute
     * capability, the archs the library holds and what the device runs */
    bool on_cuda;
    int major, minor;
    bool has_cuda;
    KjAotCudaArchs archs;
    int choice; /* an index of archs, KJ_AOT_CUDA_USE_PTX or _NONE */
    bool cuda_shapes; /* cuda roots for --block shapes ("block X,Y,Z") */
    /* on cuda, a copy of the table checked, where the roots' cuda code is
     * read (NULL for a linked library: its table is the program's) */
    uint8_t *file;
    char cuda_text[64];
    const char *notes, *source; /* the build's (the module's arena) */
    int cpu_level_count;
    const char *cpu_levels[KJ_CPU_LEVEL_COUNT + 1];
};

void kj_aot_free(KjLibrary *library)
{
    if (!library)
        return;
    if (library->handle)
        dlclose(library->handle);
    if (library->memfd >= 0)
        close(library->memfd);
    free(library->dl_error);
    pthread_mutex_destroy(&library->dl_lock);
    free(library->file);
    free(library->roots);
    free(library->shapes);
    pthread_mutex_destroy(&library->lock);
    free(library);
}

/* ------------------------------------------------------------ the table */

typedef struct Reader {
    const uint8_t *p, *end;
    bool bad;
    KjArena *arena;
} Reader;

static uint32_t get_u32(Reader *r)
{
    if (r->end - r->p < 4) {
        r->bad = true;
        return 0;
    }
    uint32_t v;
    memcpy(&v, r->p, 4);
    r->p += 4;
    return v;
}

static uint64_t get_u64(Reader *r)
{
    uint64_t lo = get_u32(r), hi = get_u32(r);
    return lo | hi << 32;
}

static const char *get_str(Reader *r)
{
    uint32_t n = get_u32(r);
    if (n == KJ_AOT_NULL_STR || r->bad)
        return NULL;
    if ((uint64_t)(r->end - r->p) < n) {
        r->bad = true;
        return NULL;
    }
    char *s = kj_arena_alloc(r->arena, (size_t)n + 1);
    memcpy(s, r->p, n);
    r->p += n;
    return s;
}

/* u64 size and the bytes: a pointer into the table (NULL when bad). */
static const uint8_t *get_blob(Reader *r, uint64_t *size)
{
    *size = get_u64(r);
    if (r->bad || (uint64_t)(r->end - r->p) < *size) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *at = r->p;
    r->p += *size;
    return at;
}

static const KjType *get_type(Reader *r)
{
    uint32_t kind = get_u32(r), elem = get_u32(r), ndim = get_u32(r);
    if (r->bad || kind == KJ_AOT_NO_TYPE)
        return NULL;
    if (kind == KJ_TYPE_VOID)
        return kj_type_void();
    if (kind == KJ_TYPE_ARRAY) {
        if (elem >= KJ_TYPE_ARRAY || ndim < 1 || ndim > KJ_MAX_DIMS) {
            r->bad = true;
            return NULL;
        }
        return kj_type_array(kj_type_scalar((KjTypeKind)elem), (int)ndim);
    }
    if (kind >= KJ_TYPE_ARRAY) {
        r->bad = true;
        return NULL;
    }
    return kj_type_scalar((KjTypeKind)kind);
}

/* A launch-sized local()'s size (aot_build.c's put_size_expr): only the
 * nodes local_size.c evaluates, each VAR a parameter of fn. */
static KjIrExpr *get_size_expr(Reader *r, KjIrFunction *fn, int depth)
{
    KjIrExpr *e = kj_arena_alloc(r->arena, sizeof *e);
    e->op = (KjIrOp)get_u32(r);
    e->type = get_type(r);
    e->const_int = get_u64(r);
    e->dim = (int)get_u32(r);
    e->math = (KjMathFn)get_u32(r);
    uint32_t param = get_u32(r), count = get_u32(r);
    bool known = e->op == KJ_IR_CONST || e->op == KJ_IR_VAR || e->op == KJ_IR_DIM ||
                 e->op == KJ_IR_NEG || e->op == KJ_IR_CAST || e->op == KJ_IR_SELECT ||
                 e->op == KJ_IR_MATH || e->op == KJ_IR_ADD || e->op == KJ_IR_SUB ||
                 e->op == KJ_IR_MUL || e->op == KJ_IR_DIV || e->op == KJ_IR_REM ||
                 e->op == KJ_IR_LT || e->op == KJ_IR_LE || e->op == KJ_IR_GT ||
                 e->op == KJ_IR_GE || e->op == KJ_IR_EQ || e->op == KJ_IR_NE;
    if (r->bad || !known || !e->type || count > 3 || depth > 64 || e->dim < 0 ||
        e->dim >= KJ_MAX_DIMS) {
        r->bad = true;
        return e;
    }
    if (e->op == KJ_IR_VAR) {
        if (param >= (uint32_t)fn->param_count) {
            r->bad = true;
            return e;
        }
        e->var = fn->params[param];
    }
    e->arg_count = (int)count;
    e->args = kj_arena_alloc(r->arena, sizeof *e->args * (count ? count : 1));
    for (uint32_t i = 0; i < count && !r->bad; i++)
        e->args[i] = get_size_expr(r, fn, depth + 1);
    /* the shapes local_size.c reads without looking */
    if (((e->op == KJ_IR_DIM || e->op == KJ_IR_NEG || e->op == KJ_IR_CAST) && count != 1) ||
        (e->op == KJ_IR_SELECT && (count != 3 || e->args[0]->arg_count != 2)) ||
        (e->op == KJ_IR_DIM && e->args[0]->op != KJ_IR_VAR))
        r->bad = true;
    return e;
}

static KjIrFunction *get_header(Reader *r, KjSource *src)
{
    KjIrFunction *fn = kj_arena_alloc(r->arena, sizeof *fn);
    fn->name = get_str(r);
    fn->symbol = get_str(r);
    fn->kind = (KjIrFunctionKind)get_u32(r);
    uint32_t count = get_u32(r);
    if (r->bad || count > 4096) {
        r->bad = true;
        return fn;
    }
    fn->param_count = (int)count;
    fn->params = kj_arena_alloc(r->arena, sizeof *fn->params * (count ? count : 1));
    for (uint32_t i = 0; i < count && !r->bad; i++) {
        KjIrVar *v = kj_arena_alloc(r->arena, sizeof *v);
        v->name = get_str(r);
        v->type = get_type(r);
        v->id = (int)i;
        v->is_param = true;
        fn->params[i] = v;
        if (!v->type)
            r->bad = true;
    }
    fn->ret = get_type(r);
    uint32_t flags = get_u32(r);
    fn->uses_syncthreads = flags & KJ_AOT_FN_SYNCTHREADS;
    fn->uses_syncgrid = flags & KJ_AOT_FN_SYNCGRID;
    fn->uses_dynamic_shared = flags & KJ_AOT_FN_DYNAMIC_SHARED;
    fn->unchecked = flags & KJ_AOT_FN_UNCHECKED;
    fn->contiguous = flags & KJ_AOT_FN_CONTIGUOUS;
    fn->shared_bytes = (int64_t)get_u64(r);
    fn->local_bytes = (int64_t)get_u64(r);
    fn->device_use = get_str(r);
    fn->device_chain = get_str(r);
    fn->device_loc.src = src;
    fn->device_loc.line = (int)get_u32(r);
    fn->device_loc.col = (int)get_u32(r);
    fn->loc.src = src;
    if (flags & KJ_AOT_FN_SPLIT) {
        /* the split form: what cpu.c reads of it (the body is the library's) */
        KjIrFunction *split = kj_arena_alloc(r->arena, sizeof *split);
        split->name = fn->name;
        split->symbol = fn->symbol;
        split->kind = fn->kind;
        split->shared_bytes = (int64_t)get_u64(r);
        split->local_bytes = (int64_t)get_u64(r);
        split->split_of = fn;
        fn->split = split;
    }
    uint32_t outputs = get_u32(r);
    if (outputs > 64) {
        r->bad = true;
        return fn;
    }
    fn->output_count = (int)outputs;
    if (outputs > 1) {
        fn->outputs = kj_arena_alloc(r->arena, sizeof *fn->outputs * outputs);
        for (uint32_t k = 1; k < outputs && !r->bad; k++) {
            KjIrVar *v = kj_arena_alloc(r->arena, sizeof *v);
            v->name = get_str(r);
            v->type = get_type(r);
            if (!v->type || v->type->kind >= KJ_TYPE_ARRAY)
                r->bad = true;
            fn->outputs[k] = v;
        }
    }
    uint32_t locals = get_u32(r);
    if (locals > 4096)
        r->bad = true;
    for (uint32_t i = 0; i < locals && !r->bad; i++) {
        KjIrExpr *e = kj_arena_alloc(r->arena, sizeof *e);
        e->op = KJ_IR_LOCAL;
        KjSource *at = kj_arena_alloc(r->arena, sizeof *at);
        at->path = get_str(r);
        at->text = "";
        e->loc.src = at->path ? at : NULL;
        e->loc.line = (int)get_u32(r);
        e->loc.col = (int)get_u32(r);
        e->alloc_elem = get_type(r);
        e->alloc_ndim = (int)get_u32(r);
        e->launch_local = (int)i;
        if (!e->alloc_elem || e->alloc_elem->kind >= KJ_TYPE_ARRAY || e->alloc_ndim < 1 ||
            e->alloc_ndim > 3) {
            r->bad = true;
            break;
        }
        for (int k = 0; k < e->alloc_ndim && !r->bad; k++) {
            e->alloc_shape[k] = (int64_t)get_u64(r);
            if (get_u32(r))
                e->alloc_size[k] = get_size_expr(r, fn, 0);
        }
        kj_vec_push(r->arena, &fn->launch_locals, e);
    }
    if (fn->shared_bytes < 0 || fn->local_bytes < 0 || fn->local_bytes > KJ_MAX_LOCAL_BYTES)
        r->bad = true;
    return fn;
}

/* One root's fields (the table's "each root"), the same for cpu and cuda. */
static void get_root(Reader *r, KjIrModule *ir, KjSource *src, AotRoot *root)
{
    root->entry = (int)get_u32(r);
    root->sig = (int)get_u32(r);
    root->vectorized = get_u32(r) != 0;
    root->variant.layout = (KjLayout)get_u32(r);
    root->variant.ndim = (int)get_u32(r);
    root->variant.scalar_mask = get_u32(r);
    root->contiguous = get_u32(r);
    root->checked = get_u32(r) != 0;
    root->lifted = get_str(r);
    root->symbol = get_str(r);
    root->header = get_header(r, src);
    if (root->entry < 0 || root->entry >= ir->entries.count || !root->symbol ||
        strlen(root->symbol) >= 400)
        r->bad = true;
    else if (root->sig < 0 ||
             root->sig >= ((KjIrEntry *)ir->entries.items[root->entry])->variants.count)
        r->bad = true;
}

/* The cuda section (aot_cuda.c): u32 0, or u32 1, the archs (u32 count,
 * each str name and u32 whether it has cubins; the first is the PTX's),
 * str notes, u32 roots, each a root, the PTX and a cubin per arch that has
 * them (u64 size, bytes).  On a cuda context what the device runs is
 * chosen (kj_aot_cuda_choose) and each root's copied. */
static void read_cuda(Reader *r, KjIrModule *ir, KjSource *src, KjLibrary *lib)
{
    lib->choice = KJ_AOT_CUDA_NONE;
    lib->has_cuda = get_u32(r) != 0;
    if (!lib->has_cuda || r->bad)
        return;
    uint32_t count = get_u32(r);
    if (count == 0 || count > KJ_AOT_CUDA_ARCHS) {
        r->bad = true;
        return;
    }
    lib->archs.count = (int)count;
    for (uint32_t a = 0; a < count && !r->bad; a++) {
        const char *name = get_str(r);
        snprintf(lib->archs.names[a], sizeof lib->archs.names[a], "%s", name ? name : "");
        lib->archs.cubin[a] = get_u32(r) != 0;
        int major, minor;
        if (!kj_aot_cuda_capability(lib->archs.names[a], &major, &minor))
            r->bad = true;
    }
    lib->notes = get_str(r);
    if (lib->on_cuda && !r->bad)
        lib->choice = kj_aot_cuda_choose(lib->major, lib->minor, &lib->archs, lib->archs.names[0]);
    bool ptx_runs = lib->on_cuda && kj_aot_cuda_choose(lib->major, lib->minor,
                                                       &(KjAotCudaArchs){0},
                                                       lib->archs.names[0]) == KJ_AOT_CUDA_USE_PTX;
    uint32_t roots = get_u32(r);
    if (r->bad || roots > 1000000) {
        r->bad = true;
        return;
    }
    int first = lib->root_count;
    lib->roots = kj_xrealloc(lib->roots, sizeof *lib->roots * (size_t)(first + (int)roots + 1));
    memset(lib->roots + first, 0, sizeof *lib->roots * ((size_t)roots + 1));
    lib->root_count += (int)roots;
    for (uint32_t i = 0; i < roots && !r->bad; i++) {
        AotRoot *root = &lib->roots[first + (int)i];
        get_root(r, ir, src, root);
        root->cuda = true;
        lib->cuda_shapes |= root->lifted && strncmp(root->lifted, "block ", 6) == 0;
        uint64_t size = 0;
        const uint8_t *ptx = get_blob(r, &size);
        root->sizes[0] = size;
        if (ptx && (size == 0 || ptx[size - 1] != '\0'))
            r->bad = true; /* the PTX is text with its NUL */
        else if (ptx_runs) /* the driver's fallback too, when a cubin is refused */
            root->ptx = (const char *)ptx;
        for (int a = 0; a < lib->archs.count && !r->bad; a++) {
            if (!lib->archs.cubin[a])
                continue;
            const uint8_t *cubin = get_blob(r, &size);
            root->sizes[a + 1] = size;
            if (cubin && a == lib->choice) {
                root->cubin = cubin;
                root->cubin_size = (size_t)size;
            }
        }
    }
}

/* Checked mode's sites and their sources (check_report.c reads them). */
static void read_sites(Reader *r, KjIrModule *ir)
{
    uint32_t count = get_u32(r);
    if (r->bad || count > 100000) {
        r->bad = true;
        return;
    }
    KjSource **sources = kj_arena_alloc(r->arena, sizeof *sources * (count ? count : 1));
    for (uint32_t i = 0; i < count && !r->bad; i++) {
        KjSource *src = kj_arena_alloc(r->arena, sizeof *src);
        src->path = get_str(r);
        src->text = get_str(r);
        src->len = src->text ? strlen(src->text) : 0;
        if (!src->path || !src->text)
            r->bad = true;
        sources[i] = src;
    }
    uint32_t sites = get_u32(r);
    if (r->bad || sites > 10000000) {
        r->bad = true;
        return;
    }
    for (uint32_t i = 0; i < sites && !r->bad; i++) {
        KjCheckSite *site = kj_arena_alloc(r->arena, sizeof *site);
        site->kind = (KjCheckKind)get_u32(r);
        uint32_t source = get_u32(r);
        site->loc.line = (int)get_u32(r);
        site->loc.col = (int)get_u32(r);
        site->array = get_str(r);
        site->type = get_str(r);
        if (site->kind >= KJ_CHECK_KIND_COUNT || (source != 0xffffffffu && source >= count))
            r->bad = true;
        else
            site->loc.src = source == 0xffffffffu ? NULL : sources[source];
        kj_vec_push(r->arena, &ir->check_sites, site);
    }
}

/* The module's IR of headers and the library's roots, from the table. */
static bool read_table(Reader *r, KjIrModule *ir, KjLibrary *lib, uint32_t **written,
                       char *why, size_t why_size)
{
    get_u32(r); /* the ABI, checked with the trailer's */
    get_str(r); /* kjit's version */
    KjSource *src = kj_arena_alloc(r->arena, sizeof *src);
    src->path = get_str(r);
    src->text = "";
    lib->source = src->path;
    ir->source_hash = get_u64(r);
    uint32_t check = get_u32(r), cancellable = get_u32(r), cpu_simd = get_u32(r),
             opt = get_u32(r);
    (void)cancellable, (void)cpu_simd, (void)opt;
    if (check & ~(uint32_t)KJIT_CHECK_ALL)
        r->bad = true;
    lib->check = (int)check;
    uint32_t levels = get_u32(r);
    bool best_found = false;
    for (uint32_t i = 0; i < levels && i < 64 && !r->bad; i++) {
        const char *name = get_str(r);
        const KjCpuLevel *level = name ? kj_cpu_level_named(name) : NULL;
        if (level && lib->cpu_level_count < KJ_CPU_LEVEL_COUNT)
            lib->cpu_levels[lib->cpu_level_count++] = level->name;
        /* the last one this CPU runs: the levels are written lowest first */
        if (level && kj_cpu_level_usable(level)) {
            lib->level = level;
            best_found = true;
        }
    }
    uint32_t entries = get_u32(r);
    if (r->bad || entries > 100000)
        return snprintf(why, why_size, "its table is damaged"), false;
    *written = kj_arena_alloc(r->arena, sizeof **written * (entries ? entries : 1));
    int32_t *maps = kj_arena_alloc(r->arena, sizeof *maps * (entries ? entries : 1));
    for (uint32_t e = 0; e < entries && !r->bad; e++) {
        KjIrEntry *entry = kj_arena_alloc(r->arena, sizeof *entry);
        entry->name = get_str(r);
        entry->kind = (KjFunctionKind)get_u32(r);
        (*written)[e] = get_u32(r);
        entry->loc.src = src;
        uint32_t sigs = get_u32(r);
        if (r->bad || sigs > 4096 || !entry->name)
            break;
        for (uint32_t s = 0; s < sigs && !r->bad; s++)
            kj_vec_push(r->arena, &entry->variants, get_header(r, src));
        if (get_u32(r)) {
            KjGufuncLayout *l = kj_arena_alloc(r->arena, sizeof *l);
            l->text = get_str(r);
            l->inputs = (int)get_u32(r);
            l->outputs = (int)get_u32(r);
            if (l->inputs < 0 || l->outputs < 0 ||
                l->inputs + l->outputs > KJ_GUFUNC_MAX_OPERANDS) {
                r->bad = true;
                break;
            }
            for (int q = 0; q < l->inputs + l->outputs && !r->bad; q++) {
                l->rank[q] = (int)get_u32(r);
                if (l->rank[q] < 0 || l->rank[q] > KJ_MAX_DIMS)
                    r->bad = true;
                for (int d = 0; d < l->rank[q] && !r->bad; d++)
                    l->dims[q][d] = (int)get_u32(r);
            }
            l->name_count = (int)get_u32(r);
            if (l->name_count < 0 || l->name_count > KJ_GUFUNC_MAX_NAMES)
                r->bad = true;
            for (int i = 0; i < l->name_count && !r->bad; i++)
                l->names[i] = get_str(r);
            entry->layout = l;
        }
        maps[e] = (int32_t)get_u32(r);
        kj_vec_push(r->arena, &ir->entries, entry);
    }
    for (int e = 0; e < ir->entries.count && !r->bad; e++) {
        KjIrEntry *entry = ir->entries.items[e];
        if (maps[e] >= ir->entries.count || (maps[e] >= 0 && entry->kind != KJ_FN_REDUCE))
            r->bad = true;
        else if (maps[e] >= 0)
            entry->map = ir->entries.items[maps[e]];
    }
    uint32_t roots = get_u32(r);
    if (r->bad || roots > 1000000)
        return snprintf(why, why_size, "its table is damaged"), false;
    lib->roots = kj_xcalloc(roots ? roots : 1, sizeof *lib->roots);
    lib->root_count = (int)roots;
    for (uint32_t i = 0; i < roots && !r->bad; i++)
        get_root(r, ir, src, &lib->roots[i]);
    uint32_t shapes = get_u32(r);
    if (r->bad || shapes > 100000)
        return snprintf(why, why_size, "its table is damaged"), false;
    lib->shapes = kj_xcalloc(shapes ? shapes : 1, sizeof *lib->shapes);
    lib->shape_count = (int)shapes;
    for (uint32_t i = 0; i < shapes && !r->bad; i++) {
        AotShape *shape = &lib->shapes[i];
        shape->root = (int)get_u32(r);
        for (int d = 0; d < 3; d++)
            shape->dims[d] = get_u32(r);
        shape->shared_written = get_u32(r) != 0;
        if (shape->root < 0 || shape->root >= lib->root_count ||
            lib->roots[shape->root].header->kind != KJ_IR_FN_KERNEL)
            r->bad = true;
    }
    read_sites(r, ir);
    read_cuda(r, ir, src, lib);
    if (r->bad || r->p != r->end)
        return snprintf(why, why_size, "its table is damaged"), false;
    if (!best_found)
        return snprintf(why, why_size, "no level this CPU runs"), false;
    if (lib->on_cuda)
        return kj_aot_cuda_usable(lib->has_cuda, &lib->archs, lib->major, lib->minor,
                                  lib->cuda_text, sizeof lib->cuda_text, why, why_size);
    return true;
}

/* ------------------------------------------------------------ the file */

/* The file (open on fd) and its folder are the user's or root's and no one
 * else can write them (a sticky folder aside), as for the cache. */
static bool safe_owner(int fd, const char *path, char *why, size_t why_size)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return snprintf(why, why_size, "it is not a regular file"), false;
    uid_t me = geteuid();
    if ((st.st_uid != me && st.st_uid != 0) || (st.st_mode & 022))
        return snprintf(why, why_size,
                        "another user can write it (owner uid %u, mode %03o): kjit runs only "
                        "code that only you or root can change",
                        (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777)),
               false;
    char folder[4096];
    snprintf(folder, sizeof folder, "%s", path);
    char *slash = strrchr(folder, '/');
    if (slash == folder)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(folder, sizeof folder, ".");
    struct stat dir;
    if (stat(folder, &dir) != 0)
        return snprintf(why, why_size, "its folder %.200s cannot be read", folder), false;
    if ((dir.st_uid != me && dir.st_uid != 0) || ((dir.st_mode & 022) && !(dir.st_mode & S_ISVTX)))
        return snprintf(why, why_size,
                        "its folder %.200s can be written by another user (owner uid %u, mode %03o)",
                        folder, (unsigned)dir.st_uid, (unsigned)(dir.st_mode & 0777)),
               false;
    return true;
}

static const char *check_name(int check)
{
    return check == KJIT_CHECK_ALL ? "all" : check == KJIT_CHECK_RACE ? "race" : "values";
}

bool kj_aot_checked_usable(int want, int held, bool on_cuda, bool cuda_checked, char *why,
                           size_t why_size)
{
    if (!want)
        return true; /* the unchecked code */
    if (on_cuda && held && !cuda_checked)
        return snprintf(why, why_size, "the cuda context is checked (KJIT_CHECK=%s, "
                        "kjit_options.check) and the library holds checked code for the cpu and "
                        "parallel targets only (it was built with --check=%s; a cuda context "
                        "checks values: build it with --check=values)", check_name(want),
                        check_name(held)), false;
    if (want == held)
        return true;
    if (held)
        return snprintf(why, why_size, "the context checks %s (KJIT_CHECK, kjit_options.check) "
                        "and the library holds checked code for %s only (build it with kjit "
                        "build --check=%s)", check_name(want), check_name(held),
                        check_name(want)), false;
    return snprintf(why, why_size, "the context is checked (KJIT_CHECK=%s, kjit_options.check) "
                    "and the library holds no checked code (build it with kjit build "
                    "--check=%s)", check_name(want), check_name(want)), false;
}

/* The module's IR and library (*lib, its roots) from a table of `size`
 * bytes: false with the reason in why when it does not read or holds no
 * level this CPU runs. */
static bool open_table(kjit_module *module, const uint8_t *table, size_t size, KjLibrary **lib_out,
                       uint32_t **written, char *why, size_t why_size)
{
    module->ir = kj_arena_alloc(&module->arena, sizeof *module->ir);
    module->ir->arena = &module->arena;
    KjLibrary *lib = kj_xcalloc(1, sizeof *lib);
    *lib_out = lib;
    lib->memfd = -1;
    pthread_mutex_init(&lib->lock, NULL);
    pthread_mutex_init(&lib->dl_lock, NULL);
    kjit_context *context = module->context;
    lib->on_cuda = context->runtime->codegen == KJ_CODEGEN_CUDA;
    if (lib->on_cuda)
        kj_aot_cuda_device(context, &lib->major, &lib->minor);
    Reader r = {table, table + size, false, &module->arena};
    bool ok = read_table(&r, module->ir, lib, written, why, why_size);
    /* a checked context runs the library's checked code, of its kinds; code
     * without checks would pass silently what the context asks to check */
    bool cuda_unchecked = false, cuda_checked = false; /* (no cuda root: all on the host) */
    for (int i = 0; ok && i < lib->root_count; i++) {
        cuda_checked |= lib->roots[i].cuda && lib->roots[i].checked;
        cuda_unchecked |= lib->roots[i].cuda && !lib->roots[i].checked;
    }
    cuda_checked |= !cuda_unchecked;
    if (ok)
        ok = kj_aot_checked_usable(context->options.check, lib->check, lib->on_cuda, cuda_checked,
                                   why, why_size);
    if (!ok && strstr(why, "no level")) {
        KjBuf levels = {0};
        Reader again = {table, table + size, false, &module->arena};
        get_u32(&again), get_str(&again), get_str(&again), get_u64(&again);
        for (int i = 0; i < 4; i++)
            get_u32(&again);
        uint32_t n = get_u32(&again);
        for (uint32_t i = 0; i < n && i < 64 && !again.bad; i++) {
            const char *name = get_str(&again);
            kj_buf_printf(&levels, "%s%s", i ? ", " : "", name ? name : "?");
        }
        snprintf(why, why_size, "it holds code for the x86-64 levels %s, none of which "
                 "this CPU runs%s (build it with --cpu-levels=sse2 too)",
                 levels.data ? levels.data : "(none)",
                 getenv("KJIT_CPU_FEATURES") ? " with KJIT_CPU_FEATURES" : "");
        kj_buf_free(&levels);
    }
    return ok;
}

/* What a library needs of the context, before anything of it is read. */
static kjit_status usable_context(kjit_context *context, const char *api, const char *name)
{
    if (!context->runtime->runs_libraries)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: %s: the %s target runs no library", api, name,
                                context->runtime->name);
    return KJIT_OK;
}

static void *library_lookup(void *code, const char *symbol);

/* dlopen of the sealed memfd, once (false with lib->dl_error when the
 * loader refuses it). */
static bool map_elf(KjLibrary *lib)
{
    if (__atomic_load_n(&lib->handle, __ATOMIC_ACQUIRE))
        return true;
    pthread_mutex_lock(&lib->dl_lock);
    if (!lib->handle && !lib->dl_error) {
        char fd_path[64];
        snprintf(fd_path, sizeof fd_path, "/proc/self/fd/%d", lib->memfd);
        void *handle = dlopen(fd_path, RTLD_NOW | RTLD_LOCAL);
        if (handle)
            __atomic_store_n(&lib->handle, handle, __ATOMIC_RELEASE);
        else
            lib->dl_error = kj_xstrdup(dlerror());
    }
    bool ok = lib->handle != NULL;
    pthread_mutex_unlock(&lib->dl_lock);
    return ok;
}

kjit_status kj_aot_open(kjit_module *module, const char *path, uint32_t **written_out)
{
    const char *api = "kjit_module_load_library";
    kjit_context *context = module->context;
    kjit_status usable = usable_context(context, api, path);
    if (usable != KJIT_OK)
        return usable;
    double span = kj_trace_now();
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return kj_api_set_error(context, errno == ENOENT ? KJIT_ERROR_NOT_FOUND : KJIT_ERROR_IO,
                                "%s: cannot open %s: %s", api, path, strerror(errno));
    char why[512] = "";
    /* The file is read once, straight into the memfd that dlopen will map
     * (no copy between), and checked there: what runs is what was checked. */
    uint8_t *data = MAP_FAILED;
    size_t size = 0;
    struct stat st;
    int mem = -1;
    bool ok = safe_owner(fd, path, why, sizeof why) && fstat(fd, &st) == 0;
    if (ok) {
        size = (size_t)st.st_size;
        mem = memfd_create("kjit-library", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        /* shorter than a trailer: refused below, nothing to read */
        if (size >= KJ_AOT_TRAILER_BYTES) {
            if (mem >= 0 && ftruncate(mem, (off_t)size) == 0)
                data = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
            ok = data != MAP_FAILED && kj_fd_read_all(fd, data, size);
            if (!ok)
                snprintf(why, sizeof why, "it cannot be read into memory: %s", strerror(errno));
        }
    }
    close(fd);
    kjit_status status = KJIT_ERROR_INVALID_ARGUMENT;
    uint64_t elf_size = 0, table_size = 0;
    if (ok) {
        const uint8_t *t = size >= KJ_AOT_TRAILER_BYTES ? data + size - KJ_AOT_TRAILER_BYTES : data;
        uint32_t abi = 0;
        if (size < KJ_AOT_TRAILER_BYTES || memcmp(t, KJ_AOT_MAGIC, 8) != 0) {
            ok = false;
            snprintf(why, sizeof why, "it is not a kjit library, or it is truncated (no kjit "
                     "trailer at its end)");
        } else if (memcpy(&abi, t + 8, 4), abi != KJ_AOT_ABI) {
            ok = false;
            snprintf(why, sizeof why, "it was built for kjit library ABI version %u; this "
                     "runtime reads version %u (rebuild it with this kjit)", abi, KJ_AOT_ABI);
        } else {
            memcpy(&elf_size, t + 16, 8);
            memcpy(&table_size, t + 24, 8);
            uint8_t digest[KJ_SHA256_BYTES];
            KjSha256 sha;
            kj_sha256_init(&sha);
            kj_sha256_update(&sha, data, size - KJ_SHA256_BYTES);
            kj_sha256_final(&sha, digest);
            if (elf_size > size || table_size > size ||
                elf_size + table_size + KJ_AOT_TRAILER_BYTES != size ||
                !kj_mac_equal(digest, t + 32, KJ_SHA256_BYTES)) {
                ok = false;
                snprintf(why, sizeof why, "its SHA-256 is not the one it was built with: it is "
                         "truncated or altered");
            }
        }
    }
    span = kj_trace("library: opened, read into a memfd, SHA-256 checked", span);
    KjLibrary *lib = NULL;
    uint32_t *written = NULL;
    /* On cuda the roots' cuda code is read where the table lies (aot_cuda.c
     * loads it at a root's first use), but the memfd keeps only the ELF
     * part: the table's checked bytes are copied once, and kept. */
    uint8_t *kept = NULL;
    if (ok) {
        const uint8_t *table = data + elf_size;
        if (context->runtime->codegen == KJ_CODEGEN_CUDA) {
            kept = kj_xcalloc(1, table_size ? (size_t)table_size : 1);
            memcpy(kept, table, (size_t)table_size);
            table = kept;
        }
        ok = open_table(module, table, table_size, &lib, &written, why, sizeof why);
        if (ok && kept) {
            lib->file = kept;
            kept = NULL;
        }
    }
    free(kept);
    if (data != MAP_FAILED)
        munmap(data, size);
    span = kj_trace("library: table read", span);
    if (ok) {
        /* dlopen maps exactly the bytes checked above: the ELF part, sealed
         * against any change from here on (on a cuda context at the first
         * host root's lookup, library_lookup: a cuda call runs none of it) */
        if (ftruncate(mem, (off_t)elf_size) != 0 ||
            fcntl(mem, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
            ok = false;
            status = KJIT_ERROR_IO;
            snprintf(why, sizeof why, "its memory file cannot be sealed: %s", strerror(errno));
        }
        if (ok) {
            lib->memfd = mem;
            mem = -1;
        }
        if (ok && !lib->on_cuda && !map_elf(lib)) {
            ok = false;
            status = KJIT_ERROR_BACKEND;
            snprintf(why, sizeof why, "the loader refused it: %s", lib->dl_error);
        }
        kj_trace(lib && lib->on_cuda ? "library: sealed (dlopen deferred: cuda)"
                                     : "library: sealed and dlopen'd", span);
    }
    if (mem >= 0)
        close(mem);
    if (!ok) {
        kj_aot_free(lib);
        return kj_api_set_error(context, status, "%s: %s is refused: %s", api, path, why);
    }
    module->library = lib;
    *written_out = written;
    return KJIT_OK;
}

kjit_status kj_aot_open_linked(kjit_module *module, const KjLinkedLibrary *linked,
                               uint32_t **written_out)
{
    const char *api = "kjit_module_load_linked";
    kjit_context *context = module->context;
    const char *name = linked->name ? linked->name : "(unnamed)";
    kjit_status usable = usable_context(context, api, name);
    if (usable != KJIT_OK)
        return usable;
    if (linked->abi != KJ_AOT_ABI)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: %s is refused: it was built for kjit library ABI version %u; "
                                "this runtime reads version %u (rebuild it with this kjit)",
                                api, name, linked->abi, KJ_AOT_ABI);
    char why[512] = "";
    KjLibrary *lib = NULL;
    uint32_t *written = NULL;
    bool ok = linked->table && (linked->symbol_count == 0 || (linked->symbols && linked->addresses)) &&
              open_table(module, linked->table, linked->table_size, &lib, &written, why,
                         sizeof why);
    for (size_t i = 1; ok && i < linked->symbol_count; i++)
        if (strcmp(linked->symbols[i - 1], linked->symbols[i]) >= 0) {
            ok = false;
            snprintf(why, sizeof why, "its symbols are not sorted");
        }
    if (!ok) {
        kj_aot_free(lib);
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT, "%s: %s is refused: %s",
                                api, name, why[0] ? why : "its table or symbols are missing");
    }
    lib->symbols = linked->symbols;
    lib->addresses = linked->addresses;
    lib->symbol_count = linked->symbol_count;
    module->library = lib;
    *written_out = written;
    return KJIT_OK;
}

const char *kjit_module_library_level(const kjit_module *module)
{
    if (!kj_api_live(module, KJ_HANDLE_MODULE, "kjit_module_library_level"))
        return NULL;
    return module->library ? module->library->level->name : NULL;
}

const char *kjit_module_library_cuda(const kjit_module *module)
{
    if (!kj_api_live(module, KJ_HANDLE_MODULE, "kjit_module_library_cuda"))
        return NULL;
    return module->library && module->library->on_cuda ? module->library->cuda_text : NULL;
}

void kj_aot_describe(const kjit_module *module, const char *path, KjBuf *out)
{
    const KjLibrary *lib = module->library;
    KjBuf *b = out;
    kj_buf_printf(b, "library:   %s (kjit library ABI %d)\nsource:    %s\nfunctions: %d\n",
                  path, KJ_AOT_ABI, lib->source ? lib->source : "?", module->function_count);
    int cpu = 0, cuda = 0;
    for (int i = 0; i < lib->root_count; i++)
        lib->roots[i].cuda ? cuda++ : cpu++;
    kj_buf_printf(b, "cpu:       %d roots, levels", cpu);
    for (int i = 0; i < lib->cpu_level_count; i++)
        kj_buf_printf(b, " %s", lib->cpu_levels[i]);
    kj_buf_printf(b, " (this CPU runs %s)\n", lib->level->name);
    int checked = 0, cuda_checked = 0;
    for (int i = 0; i < lib->root_count; i++)
        lib->roots[i].cuda ? (cuda_checked += lib->roots[i].checked)
                           : (checked += lib->roots[i].checked);
    if (lib->check)
        kj_buf_printf(b, "checked:   %s (%d cpu roots, %d cuda roots, --check)\n",
                      check_name(lib->check), checked, cuda_checked);
    for (int k = 0; k < lib->shape_count; k++)
        kj_buf_printf(b, "shape:     %s for blocks of %u x %u x %u (--block)\n",
                      lib->roots[lib->shapes[k].root].symbol, lib->shapes[k].dims[0],
                      lib->shapes[k].dims[1], lib->shapes[k].dims[2]);
    if (!lib->has_cuda) {
        kj_buf_printf(b, "cuda:      none (built with --cuda=off)\n");
    } else {
        uint64_t total[KJ_AOT_CUDA_ARCHS + 1] = {0};
        for (int i = 0; i < lib->root_count; i++)
            for (int a = 0; lib->roots[i].cuda && a <= lib->archs.count; a++)
                total[a] += lib->roots[i].sizes[a];
        kj_buf_printf(b, "cuda:      %d roots; PTX for %s (%llu bytes)", cuda,
                      lib->archs.names[0], (unsigned long long)total[0]);
        for (int a = 0; a < lib->archs.count; a++)
            if (lib->archs.cubin[a])
                kj_buf_printf(b, "; cubins for %s (%llu bytes)", lib->archs.names[a],
                              (unsigned long long)total[a + 1]);
            else
                kj_buf_printf(b, "; no cubin for %s", lib->archs.names[a]);
        kj_buf_printf(b, "\n");
        for (const char *p = lib->notes; p && *p;) {
            const char *nl = strchr(p, '\n');
            int n = nl ? (int)(nl - p) : (int)strlen(p);
            kj_buf_printf(b, "note:      %.*s\n", n, p);
            p += n + (nl ? 1 : 0);
        }
    }
    for (int i = 0; i < lib->root_count; i++) {
        const AotRoot *r = &lib->roots[i];
        kj_buf_printf(b, "root %d: %s %s%s%s%s%s", i, r->cuda ? "cuda" : "cpu ", r->symbol,
                      r->lifted ? " (" : "", r->lifted ? r->lifted : "", r->lifted ? ")" : "",
                      r->checked ? " checked" : "");
        for (int a = 0; r->cuda && a <= lib->archs.count; a++)
            if (a == 0 || lib->archs.cubin[a - 1])
                kj_buf_printf(b, " %s %s %llu", a ? "cubin" : "ptx",
                              lib->archs.names[a ? a - 1 : 0], (unsigned long long)r->sizes[a]);
        kj_buf_printf(b, "\n");
    }
}

kjit_status kj_aot_cuda_load(kjit_module *module, const KjCompiled *compiled,
                             KjCudaModule **loaded, char **error)
{
    kjit_context *context = module->context;
    const AotRoot *root = &module->library->roots[compiled->library_root];
    char *refused = NULL;
    if (root->cubin) {
        double span = kj_trace_now();
        kjit_status status = kj_cuda_load_cubin(context->cuda, root->cubin, root->cubin_size,
                                                loaded, &refused);
        if (kj_trace_on()) {
            char what[600];
            snprintf(what, sizeof what, "root %s%s%s%s: cuModuleLoadDataEx of its cubin",
                     root->symbol, root->lifted ? " (" : "", root->lifted ? root->lifted : "",
                     root->lifted ? ")" : "");
            kj_trace(what, span);
        }
        if (status == KJIT_OK || !root->ptx) {
            *error = refused;
            return status;
        }
    }
    /* no cubin for the device, or one its driver refuses (older than the
     * toolkit that made it): the driver compiles the PTX, as the JIT does */
    if (!root->ptx) {
        *error = kj_xstrdup("the library holds no cuda code this device runs for it");
        return KJIT_ERROR_NOT_FOUND;
    }
    double span = kj_trace_now();
    kjit_status status = kj_cuda_load_ptx(context->cuda, root->ptx, loaded, NULL, NULL, error);
    kj_trace("root: its PTX compiled and loaded by the driver", span);
    if (status != KJIT_OK && refused) {
        KjBuf both = {0};
        kj_buf_printf(&both, "%s (its cubin, tried first: %s)", *error ? *error : "", refused);
        free(*error);
        *error = both.data;
    }
    free(refused);
    return status;
}

/* ------------------------------------------------------------ the roots */

static bool same_variant(const KjVecVariant *a, const KjVecVariant *b)
{
    return a->layout == b->layout && a->ndim == b->ndim && a->scalar_mask == b->scalar_mask;
}

static int find_root(const KjLibrary *lib, bool cuda, bool checked, int function, int sig,
                     const KjVecVariant *variant, uint32_t contiguous, const char *lifted)
{
    for (int i = 0; i < lib->root_count; i++) {
        const AotRoot *r = &lib->roots[i];
        if (r->cuda == cuda && r->checked == checked && r->entry == function && r->sig == sig &&
            r->vectorized == (variant != NULL) &&
            r->contiguous == contiguous && (!variant || same_variant(&r->variant, variant)) &&
            strcmp(r->lifted ? r->lifted : "", lifted ? lifted : "") == 0)
            return i;
    }
    return -1;
}

kjit_status kj_aot_find(kjit_module *module, int function, int sig, const KjVecVariant *variant,
                        uint32_t contiguous, const char *lifted, KjCompiled *compiled)
{
    const KjLibrary *lib = module->library;
    /* plain functions run on the host whatever the target (kj_runtime_for) */
    const KjIrEntry *asked = module->ir->entries.items[function];
    bool cuda = lib->on_cuda && asked->kind != KJ_FN_PLAIN;
    bool checked = module->context->options.check != 0;
    int i = find_root(lib, cuda, checked, function, sig, variant, contiguous, lifted);
    if (i < 0 && variant) {
        /* the general code: every input an array of the most dimensions */
        KjVecVariant general = {KJ_LAYOUT_STRIDED, KJ_MAX_DIMS, 0};
        i = find_root(lib, cuda, checked, function, sig, &general, 0, lifted);
        compiled->generalized = i >= 0;
        compiled->ran_as = general;
    }
    if (i < 0 && !variant && contiguous)
        i = find_root(lib, cuda, checked, function, sig, NULL, 0, lifted); /* reads every stride */
    char general[96];
    const char *tail = lifted ? strstr(lifted, " contiguous") : NULL;
    if (i < 0 && tail && strcmp(tail, " contiguous") == 0) {
        /* a gufunc's cores read through their strides */
        snprintf(general, sizeof general, "%.*s", (int)(tail - lifted), lifted);
        i = find_root(lib, cuda, checked, function, sig, NULL, 0, general);
    }
    if (i < 0) {
        const KjIrEntry *entry = module->ir->entries.items[function];
        return kj_api_set_error(module->context, KJIT_ERROR_NOT_FOUND,
                                "%s: the library has no code for this call%s%s", entry->name,
                                lifted ? " (" : "", lifted ? lifted : "");
    }
    compiled->library_root = i;
    compiled->root = lib->roots[i].header;
    snprintf(compiled->symbol, sizeof compiled->symbol, "%s", lib->roots[i].symbol);
    return KJIT_OK;
}

bool kj_aot_cuda_shape(const kjit_function *function, const KjCompiled *general,
                       const uint32_t block[3], char *key, size_t key_size)
{
    const kjit_module *module = function->module;
    const KjLibrary *lib = module->library;
    if (!lib->on_cuda || !lib->cuda_shapes || general->lifted[0] ||
        module->context->options.check)
        return false;
    kj_aot_block_key(block, key, key_size);
    int index = 0;
    while (module->functions[index] != function)
        index++;
    /* not built for this shape: the general code */
    return find_root(lib, true, false, index, general->signature, NULL, general->contiguous,
                     key) >= 0;
}

/* A symbol of one root's object: kjaot_<level>_<root>__<symbol>. */
typedef struct RootCode {
    const KjLibrary *lib;
    char prefix[64];
} RootCode;

static int compare_symbol(const void *key, const void *item)
{
    return strcmp(key, *(const char *const *)item);
}

static void *library_lookup(void *code, const char *symbol)
{
    const RootCode *root = code;
    const KjLibrary *lib = root->lib;
    char name[600];
    snprintf(name, sizeof name, "%s%s", root->prefix, symbol);
    if (lib->memfd >= 0) /* a shared library: mapped now if it was deferred */
        return map_elf((KjLibrary *)lib) ? dlsym(lib->handle, name) : NULL;
    const char *const *found =
        bsearch(name, lib->symbols, lib->symbol_count, sizeof *lib->symbols, compare_symbol);
    return found ? lib->addresses[found - lib->symbols] : NULL;
}

/* A shape's entry points, and its object's print and cancel hooks bound. */
static void resolve_shape(KjLibrary *lib, AotShape *shape, int k, const char *symbol)
{
    RootCode code = {lib, ""};
    snprintf(code.prefix, sizeof code.prefix, "kjaot_%s_s%d__", lib->level->name, k);
    char name[520];
    snprintf(name, sizeof name, "%s__block", symbol);
    shape->block = library_lookup(&code, name);
    snprintf(name, sizeof name, "%s__blocks", symbol);
    shape->blocks = library_lookup(&code, name);
    kj_print_bind(library_lookup, &code);
    kj_cancel_bind(library_lookup, &code);
    __atomic_store_n(&shape->resolved, true, __ATOMIC_RELEASE);
}

bool kj_aot_shape(kjit_module *module, const KjCompiled *compiled, const uint32_t dims[3],
                  void **block, void **blocks, bool *shared_written)
{
    KjLibrary *lib = module->library;
    for (int k = 0; k < lib->shape_count; k++) {
        AotShape *shape = &lib->shapes[k];
        if (shape->root != compiled->library_root || memcmp(shape->dims, dims, sizeof shape->dims))
            continue;
        if (!__atomic_load_n(&shape->resolved, __ATOMIC_ACQUIRE)) {
            pthread_mutex_lock(&lib->lock);
            if (!shape->resolved)
                resolve_shape(lib, shape, k, compiled->symbol);
            pthread_mutex_unlock(&lib->lock);
        }
        if (!shape->block)
            return false;
        *block = shape->block;
        *blocks = shape->blocks;
        *shared_written = shape->shared_written;
        return true;
    }
    return false;
}

kjit_status kj_aot_generate(kjit_module *module, KjCompiled *compiled, const char *prefix)
{
    KjLibrary *lib = module->library;
    AotRoot *root = &lib->roots[compiled->library_root];
    RootCode code = {lib, ""};
    snprintf(code.prefix, sizeof code.prefix, "kjaot_%s_%d__", lib->level->name,
             compiled->library_root);
    const KjIrFunction *fn = compiled->root;
    const char *suffix = fn->kind == KJ_IR_FN_VEC_KERNEL ? "__range"
                         : fn->kind == KJ_IR_FN_KERNEL   ? "__thread"
                                                         : "__entry";
    char name[520];
    snprintf(name, sizeof name, "%s%s", compiled->symbol, suffix);
    compiled->entry = library_lookup(&code, name);
    if (!compiled->entry && lib->dl_error)
        return kj_api_set_error(module->context, KJIT_ERROR_BACKEND,
                                "%sthe loader refused the library's cpu code: %s", prefix,
                                lib->dl_error);
    if (!compiled->entry)
        return kj_api_set_error(module->context, KJIT_ERROR_BACKEND, "%sthe library has no %s%s",
                                prefix, code.prefix, name);
    if (fn->kind == KJ_IR_FN_KERNEL) {
        snprintf(name, sizeof name, "%s__block", compiled->symbol);
        compiled->block = library_lookup(&code, name);
    }
    pthread_mutex_lock(&lib->lock);
    if (!root->bound) {
        kj_print_bind(library_lookup, &code);
        kj_cancel_bind(library_lookup, &code);
        root->bound = true;
    }
    pthread_mutex_unlock(&lib->lock);
    compiled->code = NULL; /* the library's: freed with the module */
    return KJIT_OK;
}
