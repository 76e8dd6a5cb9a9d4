/*
 * module.c: sources, imports and the whole front-end pipeline.
 *
 * `import geo;` names geo.kern in the importing file's folder, else in each
 * stdlib folder in turn.  Modules are loaded depth first, each once however
 * often it is imported; an import that leads back to a file still being
 * loaded is a cycle, reported with the chain of files.  kj_compile_source is
 * the pass list of the front end: parse, load imports, check, verify.
 */
#include "kjit_compiler.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ================================================================= sources */

KjSource *kj_source_read(KjArena *arena, const char *path, KjDiag *diag)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        kj_error_plain(diag, path, "cannot open: %s", strerror(errno));
        return NULL;
    }
    char chunk[65536];
    size_t got;
    size_t total = 0;
    char *data = NULL;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        data = kj_xrealloc(data, total + got + 1);
        memcpy(data + total, chunk, got);
        total += got;
    }
    bool failed = ferror(f);
    fclose(f);
    if (failed) {
        free(data);
        kj_error_plain(diag, path, "cannot read: %s", strerror(errno ? errno : EIO));
        return NULL;
    }
    KjSource *src = kj_arena_alloc(arena, sizeof *src);
    src->path = kj_arena_strdup(arena, path);
    char *copy = kj_arena_alloc(arena, total + 1);
    if (total)
        memcpy(copy, data, total);
    copy[total] = '\0';
    free(data);
    src->text = copy;
    src->len = total;
    return src;
}

KjSource *kj_source_from_string(KjArena *arena, const char *name, const char *text)
{
    KjSource *src = kj_arena_alloc(arena, sizeof *src);
    src->path = kj_arena_strdup(arena, name);
    src->text = kj_arena_strdup(arena, text);
    src->len = strlen(text);
    return src;
}

/* ================================================================= imports */

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The folder part of a path ("." when it has none). */
static char *folder_of(KjArena *arena, const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return kj_arena_strdup(arena, ".");
    if (slash == path)
        return kj_arena_strdup(arena, "/");
    return kj_arena_strndup(arena, path, (size_t)(slash - path));
}

/* Two paths name the same file when they resolve to the same real path. */
static bool same_file(const char *a, const char *b)
{
    if (strcmp(a, b) == 0)
        return true;
    char ra[PATH_MAX], rb[PATH_MAX];
    return realpath(a, ra) && realpath(b, rb) && strcmp(ra, rb) == 0;
}

static KjAstFile *loaded_file(KjModuleLoader *loader, const char *path)
{
    for (int i = 0; i < loader->files.count; i++) {
        KjAstFile *file = loader->files.items[i];
        if (same_file(file->src->path, path))
            return file;
    }
    return NULL;
}

static void link_import(KjModuleLoader *loader, const KjNode *decl, KjAstFile *file)
{
    KjImportLink *link = kj_arena_alloc(loader->arena, sizeof *link);
    link->decl = decl;
    link->file = file;
    kj_vec_push(loader->arena, &loader->links, link);
}

/* A stdlib folder as messages show it: relative to the working folder when
 * it lies inside it, so that messages do not depend on where a tree is. */
static const char *display_folder(KjArena *arena, const char *folder)
{
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        return folder;
    size_t n = strlen(cwd);
    if (strncmp(folder, cwd, n) == 0 && folder[n] == '/' && folder[n + 1])
        return kj_arena_strdup(arena, folder + n + 1);
    return folder;
}

/* The path `import name;` in `from` resolves to, or NULL after an error that
 * lists every place looked at. */
static const char *resolve(KjModuleLoader *loader, const KjAstFile *from, const KjNode *decl)
{
    KjArena *arena = loader->arena;
    const char *name = decl->name;
    KjBuf tried = {0};
    const char *found = NULL;
    char *here = kj_arena_printf(arena, "%s/%s.kern", folder_of(arena, from->src->path), name);
    if (file_exists(here))
        found = here;
    kj_buf_printf(&tried, "%s", here);
    for (int i = 0; !found && loader->stdlib_dirs && loader->stdlib_dirs[i]; i++) {
        char *candidate = kj_arena_printf(arena, "%s/%s.kern",
                                          display_folder(arena, loader->stdlib_dirs[i]), name);
        if (file_exists(candidate))
            found = candidate;
        kj_buf_printf(&tried, ", %s", candidate);
    }
    if (!found)
        kj_error(loader->diag, decl->loc, "cannot find module '%s' (looked for %s)", name,
                 tried.data);
    kj_buf_free(&tried);
    return found;
}

static void load_imports(KjModuleLoader *loader, KjAstFile *file)
{
    kj_vec_push(loader->arena, &loader->loading, (void *)file->src->path);
    for (int d = 0; d < file->decls.count; d++) {
        KjNode *decl = file->decls.items[d];
        if (decl->kind != KJ_NODE_IMPORT)
            continue;
        const char *path = resolve(loader, file, decl);
        if (!path)
            continue;
        int cycle_start = -1;
        for (int i = 0; i < loader->loading.count; i++)
            if (same_file(loader->loading.items[i], path))
                cycle_start = i;
        if (cycle_start >= 0) {
            KjBuf chain = {0};
            for (int i = cycle_start; i < loader->loading.count; i++)
                kj_buf_printf(&chain, "%s -> ", (const char *)loader->loading.items[i]);
            kj_buf_printf(&chain, "%s", path);
            kj_error(loader->diag, decl->loc, "import cycle: %s", chain.data);
            kj_buf_free(&chain);
            continue;
        }
        KjAstFile *done = loaded_file(loader, path);
        if (done) {
            link_import(loader, decl, done);
            continue;
        }
        KjSource *src = kj_source_read(loader->arena, path, loader->diag);
        if (!src)
            continue;
        kj_vec_push(loader->arena, &loader->sources, src);
        int errors = loader->diag->error_count;
        KjAstFile *imported = kj_parse(loader->arena, src, loader->diag);
        if (loader->diag->error_count > errors)
            continue; /* its syntax errors are reported; checking it would only echo them */
        load_imports(loader, imported);
        kj_vec_push(loader->arena, &loader->files, imported);
        link_import(loader, decl, imported);
    }
    loader->loading.count--;
}

void kj_module_load_imports(KjModuleLoader *loader, KjAstFile *file)
{
    load_imports(loader, file);
}

KjAstFile *kj_module_imported(const KjModuleLoader *loader, const KjNode *import_decl)
{
    for (int i = 0; i < loader->links.count; i++) {
        const KjImportLink *link = loader->links.items[i];
        if (link->decl == import_decl)
            return link->file;
    }
    return NULL;
}

/* ================================================================= stdlib */

static bool folder_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* $KJIT_STDLIB; else, from the folder of the running binary, the installed
 * ../share/kjit/stdlib, then ../stdlib (a build folder inside the source
 * tree); else ./stdlib.  The answer is computed once and kept. */
const char *kj_default_stdlib_dir(void)
{
    static _Thread_local char chosen[PATH_MAX + 32];
    const char *env = getenv("KJIT_STDLIB");
    if (env && *env)
        return env;
    if (chosen[0])
        return chosen;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            const char *suffixes[] = {"/../share/kjit/stdlib", "/../stdlib"};
            for (int i = 0; i < 2; i++) {
                char candidate[PATH_MAX + 32];
                snprintf(candidate, sizeof candidate, "%s%s", exe, suffixes[i]);
                if (folder_exists(candidate)) {
                    snprintf(chosen, sizeof chosen, "%s", candidate);
                    return chosen;
                }
            }
        }
    }
    return "stdlib";
}
