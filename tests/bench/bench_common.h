/*
 * bench_common.h: what the CPU benchmarks share (tests/bench/bench_cpu.c,
 * bench_simd.c and cpu_diag.c): their clock, qsort's order of doubles, a
 * median, the KJIT_BENCH_ONLY filter, the exit on an error and the loading of
 * one kernel.
 * Static functions in a header, as tests/cuda_host/diag_common.h: each
 * program is built by one cc command (here and on the GPU machine,
 * tests/gpu/bench_cpu_host.sh), and tests/bench/ travels whole in the GPU
 * bundle.
 *
 * The including file defines BENCH_PROGRAM, the name its errors start with.
 */
#ifndef KJ_BENCH_COMMON_H
#define KJ_BENCH_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "../../runtime/kjit.h"

#ifndef BENCH_PROGRAM
#error "define BENCH_PROGRAM (the program's name) before including bench_common.h"
#endif

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

/* The benchmarks' arrays, as NumPy allocates its own (numpy/_core/src/
 * multiarray/alloc.c) in a fresh process: glibc serves 128 KiB or more with
 * an mmap of its own, the array 16 bytes into its first page (the chunk's
 * header), and for 4 MiB or more NumPy advises the whole pages inside to
 * transparent huge pages (its madvise_hugepage, on by default on Linux), so
 * that a memory-bound row compares kjit and NumPy or Numba on the same kind
 * of pages (with THP set to `madvise`, plain pages are 4 KiB: 10-30% on the
 * streaming rows).  Not every array on a 2 MiB boundary: two arrays at one
 * offset into their huge pages fill the same sets of a cache indexed by
 * physical address, so a stencil's u[z, y, x] and v[z, y, x] evicted each
 * other (tests/bench/stencil3d.kern at 128^3 ran 4.3-4.5 ms so on the
 * 16-core host, 1.5-2.7 with its arrays placed as NumPy's, where Numba took
 * 2.1-2.7: docs/performance.md).  The mmap is made here, not left to malloc:
 * once a process has freed such a block glibc raises its mmap threshold, and
 * a later array of that size lands on the heap, in the 4 KiB pages it has
 * (the parallel stencil at 128^3 then ran 1.6 times slower on that host);
 * tests/bench/bench_arrays.py places the Python references' arrays the same
 * way.  Exits when there is no memory; bench_free frees it. */
enum { BENCH_MMAP_BYTES = 128 << 10, BENCH_HUGE_BYTES = 4 << 20, BENCH_HEADER = 16 };

static inline void *bench_alloc(size_t bytes)
{
    size_t page = 4096, length = (bytes + BENCH_HEADER + page - 1) / page * page;
    char *base;
    if (bytes >= BENCH_MMAP_BYTES) {
        base = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED)
            base = NULL;
        else if (bytes >= BENCH_HUGE_BYTES)
            madvise(base + page, length - page, MADV_HUGEPAGE); /* advice: no error matters */
    } else {
        length = 0; /* from malloc */
        base = malloc(bytes + BENCH_HEADER);
    }
    if (!base) {
        fprintf(stderr, BENCH_PROGRAM ": out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    memcpy(base, &length, sizeof length); /* for bench_free */
    return base + BENCH_HEADER;
}

static inline void bench_free(void *p)
{
    if (!p)
        return;
    char *base = (char *)p - BENCH_HEADER;
    size_t length;
    memcpy(&length, base, sizeof length);
    if (length)
        munmap(base, length);
    else
        free(base);
}

/* qsort's order of doubles */
static inline int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of n times (sorts them): of an even n the mean of the middle
 * two, as Python's statistics.median of the reference programs, so that
 * bench_cpu_report.py's rounds of 2 runs (ROUND_REPEAT) favour neither side. */
static inline double median_of(double *times, int n)
{
    qsort(times, (size_t)n, sizeof *times, compare_doubles);
    return n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
}

/* KJIT_BENCH_ONLY=TEXT: only the rows whose name holds TEXT; "A|B": holds A
 * or B (tests/gpu/cpu_host_diag.sh times the stencil and inc rows alone).
 * bench_cpu.c and bench_simd.c read it, as bench_cpu.py does, so that it
 * narrows bench_cpu_report.py's whole table. */
static inline bool wanted(const char *name)
{
    const char *only = getenv("KJIT_BENCH_ONLY");
    if (!only || !*only)
        return true;
    for (const char *p = only;;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        for (const char *q = name; len > 0 && *q; q++)
            if (strncmp(q, p, len) == 0)
                return true;
        if (!bar)
            return false;
        p = bar + 1;
    }
}

/* Ends the program on a failed call; context NULL: no context's error yet. */
static inline void die_on(kjit_status status, kjit_context *context, const char *what)
{
    if (status == KJIT_OK)
        return;
    fprintf(stderr, BENCH_PROGRAM ": %s: %s: %s\n", what, kjit_status_name(status),
            context ? kjit_last_error(context) : "");
    exit(1);
}

/* The function `name` of DIR/FILE compiled on context. */
static inline kjit_function *load(kjit_context *context, const char *dir, const char *file,
                                  const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    kjit_module *module;
    die_on(kjit_compile_file(context, path, &module), context, path);
    kjit_function *function;
    die_on(kjit_module_function(module, name, &function), context, name);
    return function;
}

/* inc.kern's forms' result: b[i] == a[i] + 1 (wrapping), else the run fails. */
static inline void check_inc(const char *name, const int32_t *a, const int32_t *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (b[i] != (int32_t)((uint32_t)a[i] + 1u)) {
            fprintf(stderr, BENCH_PROGRAM ": %s: b[%lld] is %d, want %d\n", name, (long long)i, b[i],
                    (int32_t)((uint32_t)a[i] + 1u));
            exit(1);
        }
}

#endif
