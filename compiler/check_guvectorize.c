/*
 * check_guvectorize.c: the declaration rules of @guvectorize, beside check.c,
 * and the parser of its layout string.
 *
 * A @guvectorize function is a core function over arrays whose layout string
 * says, as NumPy's gufunc signatures do, which core dimensions each operand
 * has: "(n),(n)->()" for a dot product, "(m,n),(n,p)->(m,p)" for matmul.  Its
 * parameters are the inputs, then the outputs, in the layout's order; each is
 * an array of its core's rank, except that a "()" input is a scalar and a
 * "()" output a one-element array (out[0]).  The function returns nothing.
 * The rules are checked here so that the messages speak of @guvectorize; the
 * guvectorize pass (guvectorize.c) and the runtime (runtime/api_guvec.c)
 * rely on them.
 */
#include "checker.h"

#include <ctype.h>
#include <string.h>

/* ------------------------------------------------------------ the layout */

typedef struct LayoutParser {
    KjArena *arena;
    const char *text, *at;
    KjGufuncLayout *out;
    const char *why;
    int offset;
} LayoutParser;

static void skip_spaces(LayoutParser *lp)
{
    while (*lp->at == ' ' || *lp->at == '\t')
        lp->at++;
}

static bool fail(LayoutParser *lp, const char *why)
{
    lp->why = why;
    lp->offset = (int)(lp->at - lp->text);
    return false;
}

static int name_index(LayoutParser *lp, const char *start, size_t len)
{
    KjGufuncLayout *l = lp->out;
    for (int i = 0; i < l->name_count; i++)
        if (strlen(l->names[i]) == len && memcmp(l->names[i], start, len) == 0)
            return i;
    if (l->name_count == KJ_GUFUNC_MAX_NAMES)
        return -1;
    l->names[l->name_count] = kj_arena_strndup(lp->arena, start, len);
    return l->name_count++;
}

/* core = "(" [ IDENT { "," IDENT } ] ")" */
static bool core(LayoutParser *lp, bool output)
{
    KjGufuncLayout *l = lp->out;
    int q = l->inputs + l->outputs;
    skip_spaces(lp);
    if (*lp->at != '(')
        return fail(lp, "expected '(' opening an operand's core dimensions");
    if (q == KJ_GUFUNC_MAX_OPERANDS)
        return fail(lp, "too many operands (at most 32)");
    lp->at++;
    skip_spaces(lp);
    int rank = 0;
    if (*lp->at != ')') {
        for (;;) {
            skip_spaces(lp);
            const char *start = lp->at;
            if (!isalpha((unsigned char)*start) && *start != '_')
                return fail(lp, "expected a dimension name (a letter or an identifier)");
            while (isalnum((unsigned char)*lp->at) || *lp->at == '_')
                lp->at++;
            if (rank == KJ_MAX_DIMS) {
                lp->at = start;
                return fail(lp, "a core has at most 8 dimensions");
            }
            int index = name_index(lp, start, (size_t)(lp->at - start));
            if (index < 0) {
                lp->at = start;
                return fail(lp, "too many dimension names (at most 32)");
            }
            if (output) {
                bool seen = false;
                for (int i = 0; i < l->inputs && !seen; i++)
                    for (int d = 0; d < l->rank[i] && !seen; d++)
                        seen = l->dims[i][d] == index;
                if (!seen) {
                    lp->at = start;
                    return fail(lp, "this output dimension appears in no input (kjit takes "
                                    "every core size from the inputs)");
                }
            }
            l->dims[q][rank++] = index;
            skip_spaces(lp);
            if (*lp->at == ',') {
                lp->at++;
                continue;
            }
            if (*lp->at == ')')
                break;
            return fail(lp, "expected ',' or ')' after a dimension name");
        }
    }
    lp->at++;
    l->rank[q] = rank;
    if (output)
        l->outputs++;
    else
        l->inputs++;
    return true;
}

/* layout = core { "," core } "->" core { "," core } */
bool kj_gufunc_layout_parse(KjArena *arena, const char *text, KjGufuncLayout *out,
                            const char **why, int *offset)
{
    memset(out, 0, sizeof *out);
    out->text = text;
    LayoutParser lp = {arena, text, text, out, NULL, 0};
    bool ok = true;
    for (bool output = false;; ) {
        if (!(ok = core(&lp, output)))
            break;
        skip_spaces(&lp);
        if (*lp.at == ',') {
            lp.at++;
            continue;
        }
        if (!output && lp.at[0] == '-' && lp.at[1] == '>') {
            lp.at += 2;
            output = true;
            continue;
        }
        if (!output) {
            ok = fail(&lp, "expected ',' or '->' after an input's core");
            break;
        }
        if (*lp.at != '\0')
            ok = fail(&lp, "expected ',' or the end of the layout after an output's core");
        break;
    }
    if (!ok) {
        *why = lp.why;
        *offset = lp.offset;
    }
    return ok;
}

/* ------------------------------------------------------- the declaration */

/* The layout as written, for messages. */
static const char *layout_of(const KjCheckFn *info)
{
    return info->entry->layout ? info->entry->layout->text : "";
}

bool kj_check_guvectorize_layout(KjChecker *c, KjCheckFn *info)
{
    const KjFunctionDecl *decl = info->decl;
    if (!decl->layout_text)
        return false; /* the parser has said so */
    size_t len = strlen(decl->layout_text);
    const char *text = kj_arena_strndup(c->arena, decl->layout_text + 1, len >= 2 ? len - 2 : 0);
    KjGufuncLayout *layout = kj_arena_alloc(c->arena, sizeof *layout);
    const char *why = NULL;
    int offset = 0;
    if (!kj_gufunc_layout_parse(c->arena, text, layout, &why, &offset)) {
        KjLoc at = decl->layout_loc;
        at.col += 1 + offset; /* past the quote; layouts hold no escapes or newlines */
        kj_error(c->diag, at, "malformed @guvectorize layout: %s (a layout reads like "
                 "\"(m,n),(n,p)->(m,p)\")", why);
        return false;
    }
    info->entry->layout = layout;
    return true;
}

/* "(m,n)" for operand q. */
static void core_text(const KjGufuncLayout *l, int q, KjBuf *buf)
{
    kj_buf_printf(buf, "(");
    for (int d = 0; d < l->rank[q]; d++)
        kj_buf_printf(buf, "%s%s", d ? "," : "", l->names[l->dims[q][d]]);
    kj_buf_printf(buf, ")");
}

bool kj_check_guvectorize_params(KjChecker *c, KjCheckFn *info, KjLoc where,
                                 const KjType *const *params, int count, const KjType *ret)
{
    const KjFunctionDecl *decl = info->decl;
    const KjGufuncLayout *l = info->entry->layout;
    int want = l->inputs + l->outputs;
    if (count != want) {
        kj_error(c->diag, where, "the layout \"%s\" has %d input%s and %d output%s, so '%s' "
                 "takes %d parameters, not %d", layout_of(info), l->inputs,
                 l->inputs == 1 ? "" : "s", l->outputs, l->outputs == 1 ? "" : "s", decl->name,
                 want, count);
        return false;
    }
    bool ok = true;
    for (int q = 0; q < count; q++) {
        const KjType *t = params[q];
        if (!t) {
            ok = false; /* the parser has said so */
            continue;
        }
        bool output = q >= l->inputs;
        KjLoc at = decl->signature_count ? where : decl->params[q].loc;
        KjBuf core = {0};
        core_text(l, q, &core);
        if (!output && l->rank[q] == 0) {
            if (!kj_check_is_scalar(t)) {
                kj_error(c->diag, at, "parameter '%s' is input %d of the layout, whose core is "
                         "(): a scalar, not %s", decl->params[q].name, q, kj_type_name(t));
                ok = false;
            }
            kj_buf_free(&core);
            continue;
        }
        int rank = l->rank[q] ? l->rank[q] : 1;
        if (t->kind != KJ_TYPE_ARRAY || t->ndim != rank) {
            kj_error(c->diag, at, "parameter '%s' is %s %d of the layout, whose core is %s: an "
                     "array of %d dimension%s%s, not %s", decl->params[q].name,
                     output ? "output" : "input", output ? q - l->inputs : q, core.data, rank,
                     rank == 1 ? "" : "s",
                     output && l->rank[q] == 0 ? " (a () output is one element, out[0])" : "",
                     kj_type_name(t));
            ok = false;
        }
        kj_buf_free(&core);
    }
    if (ok && ret && decl->signature_count) {
        const KjType *first_out = params[l->inputs];
        if (first_out->elem != ret) {
            kj_error(c->diag, where, "a @guvectorize signature is named by its first output's "
                     "element type: %s here, not %s", kj_type_name(first_out->elem),
                     kj_type_name(ret));
            ok = false;
        }
    }
    return ok;
}
