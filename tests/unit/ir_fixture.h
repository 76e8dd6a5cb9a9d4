/*
 * ir_fixture.h: a source string checked into IR with its diagnostics kept,
 * the set-up of the suites that look at the IR rather than run it
 * (test_check.c, test_uniform.c, test_barrier_split.c, test_grid_rows.c).
 */
#ifndef IR_FIXTURE_H
#define IR_FIXTURE_H

#include "kjit_compiler.h"

typedef struct Compiled {
    KjArena arena;
    KjDiag diag;
    KjBuf errors;      /* every diagnostic's text, in order */
    KjIrModule *module; /* NULL when the source has an error */
} Compiled;

/* text compiled as "t.kern" with stdlib/ on the import path; a failing
 * compile gives module NULL and its errors, not a failed test. */
Compiled *compile_ir(const char *text);
/* The same for the file at path (one that cannot be read: module NULL, the
 * error in errors). */
Compiled *compile_ir_file(const char *path);
void compiled_free(Compiled *cp);
/* The diagnostics' text ("" when none). */
const char *compiled_errors(const Compiled *cp);
/* The function called name; a failed compile or no such function fails the
 * test. */
KjIrFunction *compiled_function(const Compiled *cp, const char *name);
/* The same by symbol (the name code is emitted under: a generic's instance,
 * an import's qualified name). */
KjIrFunction *compiled_function_symbol(const Compiled *cp, const char *symbol);

#endif
