/*
 * diag_common.h: what the host-cost tools share (tests/cuda_host/cuda_host.c
 * and stream_diag.c, tests/bench/latency.c, tests/gpu/launch_options.c):
 * their clocks, the median of a measurement's batches, the options of a
 * context made as the Python package makes its own, and the add's set-up
 * that they and the unit suite cuda_host (tests/unit/test_cuda_host.c) run
 * on.  Static functions in a
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

/* A module's `add` on a context, three device arrays of f32 for it (x, y,
 * out) and a stream of the context's own. */
typedef struct DiagAddSetup {
    kjit_context *context;
    kjit_module *module;
    kjit_function *add;
    kjit_array x, y, out;
    kjit_stream *stream;
} DiagAddSetup;

/* Fills s on context (s then owns it): source compiled as file, x, y and out
 * of elements each.  KJIT_OK, or the first step's failure with *what naming
 * the step (what s holds then is zeroed past it: diag_add_close takes it). */
static inline kjit_status diag_add_open(DiagAddSetup *s, kjit_context *context, const char *file,
                                        const char *source, int64_t elements, const char **what)
{
    *s = (DiagAddSetup){.context = context};
    int64_t shape[1] = {elements};
    kjit_status status;
    if ((status = kjit_compile_string(context, file, source, &s->module)) != KJIT_OK)
        return *what = "compile", status;
    if ((status = kjit_module_function(s->module, "add", &s->add)) != KJIT_OK)
        return *what = "add", status;
    kjit_array *arrays[3] = {&s->x, &s->y, &s->out};
    for (int i = 0; i < 3; i++)
        if ((status = kjit_device_alloc(context, KJIT_F32, 1, shape, arrays[i])) != KJIT_OK)
            return *what = "alloc", status;
    if ((status = kjit_stream_create(context, &s->stream)) != KJIT_OK)
        return *what = "kjit_stream_create", status;
    return KJIT_OK;
}

static inline void diag_add_close(DiagAddSetup *s)
{
    kjit_stream_destroy(s->stream);
    kjit_device_free(s->context, &s->x);
    kjit_device_free(s->context, &s->y);
    kjit_device_free(s->context, &s->out);
    kjit_module_free(s->module);
    kjit_context_destroy(s->context);
}

#endif
