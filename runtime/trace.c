/*
 * trace.c: KJIT_TRACE=1 prints the spans of a library's load and of the
 * loading of a root's code on stderr, one line each ("kjit trace: <what>
 * <ms> ms"), for the breakdown of a first call (tests/gpu/aot.sh,
 * docs/aot.md "cuda: the first call").  Only load paths are traced, never
 * a call's: when the variable is unset, a span costs one load of a flag.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kjit_runtime.h"

static int trace_state; /* 0 unread, 1 off, 2 on */

bool kj_trace_on(void)
{
    int state = __atomic_load_n(&trace_state, __ATOMIC_RELAXED);
    if (state == 0) {
        const char *env = getenv("KJIT_TRACE");
        state = env && *env && !(env[0] == '0' && !env[1]) ? 2 : 1;
        __atomic_store_n(&trace_state, state, __ATOMIC_RELAXED);
    }
    return state == 2;
}

double kj_trace_now(void)
{
    if (!kj_trace_on())
        return 0;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

double kj_trace(const char *what, double since)
{
    if (!kj_trace_on())
        return 0;
    double now = kj_trace_now();
    fprintf(stderr, "kjit trace: %s %.3f ms\n", what, now - since);
    return now;
}
