/*
 * bench_clock.h: the clock and the sort of samples that the cpu benchmark
 * programs share (bench_cpu.c, bench_simd.c, cpu_diag.c).
 */
#ifndef KJIT_BENCH_CLOCK_H
#define KJIT_BENCH_CLOCK_H

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* KJIT_BENCH_CLOCK=thread: the calling thread's CPU time instead of the wall
 * clock, which a busy machine does not inflate (meaningful for the cpu target
 * only: parallel's work runs on other threads). */
static inline double now_ms(void)
{
    static int clock_id = -1;
    if (clock_id < 0) {
        const char *env = getenv("KJIT_BENCH_CLOCK");
        clock_id = env && strcmp(env, "thread") == 0 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
    }
    struct timespec ts;
    clock_gettime((clockid_t)clock_id, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* qsort's order of doubles, for the median of samples. */
static inline int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
