/*
 * rng.h: the random inputs of the unit tests that draw fresh ones each run
 * (test_reduce.c, test_guvectorize.c; test_api.c, test_checks.c and test_exec.c
 * draw from fixed or chosen seeds of their own): xorshift64 over a state of the
 * suite's own, seeded once from the clock and the process id, the seed
 * printed under the suite's name so that a failure can be told apart from
 * the next run's.
 */
#ifndef RNG_H
#define RNG_H

#include <stdint.h>

/* Seeds *state unless it is seeded already, printing "SUITE: random seed N". */
void rng_seed(uint64_t *state, const char *suite);
/* The next 64 random bits. */
uint64_t rng_next(uint64_t *state);
/* A double in [lo, hi). */
double rng_uniform(uint64_t *state, double lo, double hi);

#endif
