/*
 * fixture.h: a context on one target with one module compiled from a source
 * string, the set-up that the suites calling compiled functions through the
 * public API share (test_reduce.c, test_guvectorize.c); and a pair of them,
 * one with the cpu targets' SIMD lowering off and one with it on, for the
 * suites that compare the two (test_simd*.c).
 */
#ifndef FIXTURE_H
#define FIXTURE_H

#include "kjit.h"

/* Writes text to a new file made from template (mkstemps: its "XXXXXX" come
 * just before a suffix of suffix_len characters, such as ".kern"), which is
 * rewritten in place to the file's path; a failure fails the test. */
void fixture_temp_file(char *template, int suffix_len, const char *text);

/* What the running test is doing, in a few words (runner.c prints it when the
 * test dies of a signal). */
extern char unit_test_doing[512];

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

/* [0] with kjit_options.cpu_simd off, [1] with it on; 3 pool threads. */
typedef struct Pair {
    kjit_context *context[2];
    kjit_module *module[2];
} Pair;

Pair pair_open(kjit_target target, const char *file, const char *source);
void pair_close(Pair *p);
kjit_function *pair_fn(Pair *p, int simd, const char *name);
/* Launches kernel name of side simd; a failure fails the test. */
void pair_launch(Pair *p, int simd, const char *name, const uint32_t grid[3], const uint32_t block[3],
                 kjit_arg *args, int nargs);

#endif
