/*
 * diag_common.h: what the host-cost tools share (tests/cuda_host/cuda_host.c
 * and stream_diag.c, tests/bench/latency.c, tests/gpu/launch_options.c):
 * their clocks, the median of a measurement's batches, and the options of a
 * context made as the Python package makes its own.  Static functions in a
 * header, not a source of its own: launch_options.c is built on the GPU
 * machine by one cc command (tests/gpu/python.sh), and latency.c by one rule.
 */
#ifndef KJ_DIAG_COMMON_H
#define KJ_DIAG_COMMON_H

#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "kjit.h"

static inline double diag_clock_ns(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* wall time: what a caller waits, the GPU's pace included */
static inline double diag_now_ns(void)
{
    return diag_clock_ns(CLOCK_MONOTONIC);
}

static inline double diag_now_us(void)
{
    return diag_now_ns() / 1e3;
}

/* this thread's cpu time: another process on a shared host does not count */
static inline double diag_thread_ns(void)
{
    return diag_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* qsort's order of doubles */
static inline int diag_by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v[0..n) and returns its median (the mean of the middle two when n is
 * even); v[0] is then the fastest batch. */
static inline double diag_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, diag_by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* kjit_options_init's options for `target`, and when as_python what the
 * Python package's contexts ask for (python/kjit/_core.py): cancellable code,
 * Ctrl-C (SIGINT) cancels a call. */
static inline void diag_options(kjit_options *options, kjit_target target, bool as_python)
{
    kjit_options_init(options);
    options->target = target;
    if (as_python) {
        options->cancellable = 1;
        options->cancel_signal = SIGINT;
    }
}

#endif
