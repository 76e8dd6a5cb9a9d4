/* rng.c: see rng.h. */
#include "rng.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

void rng_seed(uint64_t *state, const char *suite)
{
    if (*state)
        return;
    *state = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
    printf("%s: random seed %llu\n", suite, (unsigned long long)*state);
}

uint64_t rng_next(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

double rng_uniform(uint64_t *state, double lo, double hi)
{
    return lo + (hi - lo) * (double)(rng_next(state) >> 11) / 9007199254740992.0;
}
