/*
 * diag.c: the one error reporter.  Every diagnostic reads
 *
 *     file:line:col: error: message
 *     <the source line>
 *           ^
 *
 * and is handed, complete, to the host's sink; the reporter never prints by
 * itself, so the CLI writes to stderr and an embedder keeps the text.  Errors
 * are counted (the caller decides from the count whether compilation failed)
 * and capped, so that a file of garbage does not produce a flood.
 */
#include "kjit_compiler.h"

#include <stdlib.h>
#include <string.h>

enum { KJ_DEFAULT_MAX_ERRORS = 100 };

static int max_errors(const KjDiag *diag)
{
    return diag->max_errors > 0 ? diag->max_errors : KJ_DEFAULT_MAX_ERRORS;
}

/* Appends the source line of `loc` and a caret under its column.  Tabs before
 * the column are copied into the caret line so the caret lines up whatever the
 * terminal's tab width. */
static void append_excerpt(KjBuf *buf, KjLoc loc)
{
    const KjSource *src = loc.src;
    if (!src || !src->text || loc.line < 1)
        return;
    const char *text = src->text, *end = src->text + src->len;
    const char *p = text;
    for (int line = 1; line < loc.line && p < end; p++)
        if (*p == '\n')
            line++;
    const char *line_end = p;
    while (line_end < end && *line_end != '\n')
        line_end++;
    if (line_end > p && line_end[-1] == '\r')
        line_end--;

    /* NUL bytes would cut the C string the sink receives. */
    size_t n = (size_t)(line_end - p);
    char *line = kj_xmalloc(n + 1);
    for (size_t i = 0; i < n; i++)
        line[i] = p[i] == '\0' ? ' ' : p[i];
    line[n] = '\0';
    kj_buf_printf(buf, "%s\n", line);

    for (int col = 1; col < loc.col; col++) {
        size_t i = (size_t)(col - 1);
        kj_buf_printf(buf, "%c", i < n && line[i] == '\t' ? '\t' : ' ');
    }
    kj_buf_printf(buf, "^\n");
    free(line);
}

static void report(KjDiag *diag, KjSeverity severity, const KjLoc *loc, const char *where,
                   const char *fmt, va_list ap)
{
    if (severity == KJ_SEVERITY_ERROR)
        diag->error_count++;
    int cap = max_errors(diag);
    if (diag->error_count > cap) {
        /* Say once that we stopped, then stay silent (notes too: they would
         * belong to errors nobody sees). */
        if (severity == KJ_SEVERITY_ERROR && diag->error_count == cap + 1 && diag->sink) {
            char text[96];
            snprintf(text, sizeof text, "error: too many errors (%d), stopping here\n", cap);
            diag->sink(diag->user, KJ_SEVERITY_ERROR, text);
        }
        return;
    }
    if (!diag->sink)
        return;

    KjBuf buf = {0};
    const char *label = severity == KJ_SEVERITY_ERROR     ? "error"
                        : severity == KJ_SEVERITY_WARNING ? "warning"
                                                          : "note";
    if (loc && loc->src)
        kj_buf_printf(&buf, "%s:%d:%d: %s: ", loc->src->path ? loc->src->path : "<input>",
                      loc->line, loc->col, label);
    else if (where)
        kj_buf_printf(&buf, "%s: %s: ", where, label);
    else
        kj_buf_printf(&buf, "%s: ", label);
    kj_buf_vprintf(&buf, fmt, ap);
    kj_buf_printf(&buf, "\n");
    if (loc)
        append_excerpt(&buf, *loc);
    diag->sink(diag->user, severity, buf.data);
    kj_buf_free(&buf);
}

void kj_error(KjDiag *diag, KjLoc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(diag, KJ_SEVERITY_ERROR, &loc, NULL, fmt, ap);
    va_end(ap);
}

void kj_note(KjDiag *diag, KjLoc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(diag, KJ_SEVERITY_NOTE, &loc, NULL, fmt, ap);
    va_end(ap);
}

void kj_warning(KjDiag *diag, KjLoc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(diag, KJ_SEVERITY_WARNING, &loc, NULL, fmt, ap);
    va_end(ap);
}

void kj_error_plain(KjDiag *diag, const char *where, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(diag, KJ_SEVERITY_ERROR, NULL, where, fmt, ap);
    va_end(ap);
}
