/* ir_fixture.c: see ir_fixture.h. */
#include "ir_fixture.h"

#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static void collect(void *user, KjSeverity severity, const char *text)
{
    (void)severity;
    kj_buf_printf(user, "%s", text);
}

static Compiled *compiled_new(void)
{
    Compiled *cp = kj_xcalloc(1, sizeof *cp);
    cp->diag = (KjDiag){collect, &cp->errors, 0, 0};
    return cp;
}

static Compiled *compile_from(Compiled *cp, KjSource *src)
{
    const char *dirs[] = {"stdlib", NULL};
    if (src)
        cp->module = kj_compile_source(&cp->arena, src, dirs, &cp->diag);
    return cp;
}

Compiled *compile_ir(const char *text)
{
    Compiled *cp = compiled_new();
    return compile_from(cp, kj_source_from_string(&cp->arena, "t.kern", text));
}

Compiled *compile_ir_file(const char *path)
{
    Compiled *cp = compiled_new();
    return compile_from(cp, kj_source_read(&cp->arena, path, &cp->diag));
}

void compiled_free(Compiled *cp)
{
    kj_arena_free(&cp->arena);
    kj_buf_free(&cp->errors);
    free(cp);
}

const char *compiled_errors(const Compiled *cp)
{
    return cp->errors.data ? cp->errors.data : "";
}

/* The function whose name (by_symbol false) or symbol is key. */
static KjIrFunction *find_function(const Compiled *cp, const char *key, bool by_symbol)
{
    ck_assert_msg(cp->module, "compile failed:\n%s", compiled_errors(cp));
    for (int i = 0; i < cp->module->functions.count; i++) {
        KjIrFunction *fn = cp->module->functions.items[i];
        if (strcmp(by_symbol ? fn->symbol : fn->name, key) == 0)
            return fn;
    }
    ck_abort_msg("no function %s", key);
    return NULL;
}

KjIrFunction *compiled_function(const Compiled *cp, const char *name)
{
    return find_function(cp, name, false);
}

KjIrFunction *compiled_function_symbol(const Compiled *cp, const char *symbol)
{
    return find_function(cp, symbol, true);
}
