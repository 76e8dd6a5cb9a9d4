/*
 * fixture.h: a context on one target with one module compiled from a source
 * string, the set-up that the suites calling compiled functions through the
 * public API share (test_reduce.c, test_guvectorize.c).
 */
#ifndef FIXTURE_H
#define FIXTURE_H

#include "kjit.h"

typedef struct Fixture {
    kjit_context *context;
    kjit_module *module;
    kjit_target target;
} Fixture;

/* A context on target (3 pool threads on parallel) with source compiled as
 * file; a failure fails the test, naming the compiler's message. */
Fixture fixture_open(kjit_target target, const char *file, const char *source);
void fixture_close(Fixture *f);
/* The module's function name; a missing one fails the test. */
kjit_function *fixture_fn(Fixture *f, const char *name);

#endif
