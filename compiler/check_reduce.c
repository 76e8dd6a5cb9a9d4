/*
 * check_reduce.c: the declaration rules of @reduce, beside check.c.
 *
 * A @reduce function combines two values of one scalar type T into a third of
 * the same type (f(a: T, b: T) -> T), in the typed form or once per signature
 * of a signature list; the body is then checked as a @vectorize body is.  Its
 * optional `map = g` names a @vectorize function whose results are what gets
 * reduced: g's parameters become the reduction's inputs, so that sum(x * y)
 * reads x and y once and makes no temporary array.  The rules are checked
 * here so that the messages speak of @reduce; the reduce pass (reduce.c) and
 * the runtime rely on them.
 */
#include "checker.h"

#include <string.h>

/* One signature (or the typed form): two parameters and a result, all T. */
static bool check_shape(KjChecker *c, const KjFunctionDecl *decl, KjLoc where,
                        const KjType *const *params, int count, const KjType *ret)
{
    if (count != 2) {
        kj_error(c->diag, where, "a @reduce function combines two values: it takes 2 "
                 "parameters, and '%s' has %d", decl->name, count);
        return false;
    }
    if (!params[0] || !params[1] || !ret)
        return false; /* the parser has said so */
    if (!kj_check_is_scalar(ret)) {
        kj_error(c->diag, where, "a @reduce function returns a scalar, not %s", kj_type_name(ret));
        return false;
    }
    if (params[0] != ret || params[1] != ret) {
        kj_error(c->diag, where, "a @reduce function takes two values of its result type and "
                 "returns one: '%s' takes (%s, %s) and returns %s", decl->name,
                 kj_type_name(params[0]), kj_type_name(params[1]), kj_type_name(ret));
        return false;
    }
    return true;
}

void kj_check_reduce_decl(KjChecker *c, KjCheckFn *info)
{
    const KjFunctionDecl *decl = info->decl;
    if (decl->signature_count == 0) {
        if (!decl->ret) {
            kj_error(c->diag, decl->loc, "a @reduce function needs a return type "
                     "(fn %s(a: f64, b: f64) -> f64) or a signature list "
                     "(@reduce(f64(f64, f64)))", decl->name);
            info->bad = true;
            return;
        }
        const KjType *params[2] = {NULL, NULL};
        for (int i = 0; i < decl->param_count && i < 2; i++)
            params[i] = decl->params[i].type;
        if (!check_shape(c, decl, decl->loc, params, decl->param_count, decl->ret))
            info->bad = true;
        return;
    }
    if (decl->param_count != 2) {
        kj_error(c->diag, decl->loc, "a @reduce function combines two values: it takes 2 "
                 "parameters, and '%s' has %d", decl->name, decl->param_count);
        info->bad = true;
        return;
    }
    for (int s = 0; s < decl->signature_count; s++) {
        const KjSignature *sig = &decl->signatures[s];
        if (!check_shape(c, decl, sig->loc, sig->params, sig->param_count, sig->ret))
            info->bad = true;
    }
}

void kj_check_reduce_map(KjChecker *c, KjCheckFn *info)
{
    const KjFunctionDecl *decl = info->decl;
    if (decl->kind != KJ_FN_REDUCE || !decl->map_name || info->bad)
        return;
    KjCheckFn *map = kj_check_find_function(c, decl->map_name);
    if (!map) {
        kj_error(c->diag, decl->map_loc, "unknown function '%s' (map = names a @vectorize "
                 "function)", decl->map_name);
        info->bad = true;
        return;
    }
    bool visible = map->file == info->file;
    for (int i = 0; !visible && i < info->file->imports.count; i++)
        visible = info->file->imports.items[i] == map->file;
    if (!visible) {
        kj_error(c->diag, decl->map_loc, "'%s' is defined in %s, which this file does not "
                 "import", decl->map_name, map->file->ast->src->path);
        info->bad = true;
        return;
    }
    if (map->decl->kind != KJ_FN_VECTORIZE) {
        kj_error(c->diag, decl->map_loc, "map = '%s' must name a @vectorize function",
                 decl->map_name);
        kj_note(c->diag, map->decl->loc, "'%s' is declared here", decl->map_name);
        info->bad = true;
        return;
    }
    if (map->bad)
        return;
    if (map->decl->result_count > 1) {
        kj_error(c->diag, decl->map_loc, "map = '%s' returns %d values; a reduction's map "
                 "returns one", decl->map_name, map->decl->result_count);
        info->bad = true;
        return;
    }
    /* Some signature of the map must give values this reduction combines. */
    for (int m = 0; m < map->entry->variants.count; m++) {
        const KjIrFunction *g = map->entry->variants.items[m];
        for (int r = 0; r < info->entry->variants.count; r++) {
            const KjIrFunction *f = info->entry->variants.items[r];
            if (g->ret == f->ret) {
                info->entry->map = map->entry;
                return;
            }
        }
    }
    KjBuf have = {0};
    for (int m = 0; m < map->entry->variants.count; m++) {
        const KjIrFunction *g = map->entry->variants.items[m];
        kj_buf_printf(&have, "%s%s", m ? ", " : "", kj_type_name(g->ret));
    }
    kj_error(c->diag, decl->map_loc, "'%s' returns %s, which no signature of '%s' combines",
             decl->map_name, have.data ? have.data : "nothing", decl->name);
    kj_buf_free(&have);
    info->bad = true;
}
