/*
 * cli_bench.h: what the two halves of `kjit bench` share.  cli_bench.c runs
 * the targets and fills a SizeRun per size; cli_bench_report.c turns them into
 * the table, the sweep, JSON and CSV.
 */
#ifndef KJIT_CLI_BENCH_H
#define KJIT_CLI_BENCH_H

#include <stdio.h>

#include "cli.h"

#define KJ_BENCH_MAX_TARGETS 3
#define KJ_BENCH_MAX_SIZES 32

typedef struct BenchOptions {
    KjCliCall call;
    kjit_target targets[KJ_BENCH_MAX_TARGETS];
    int target_count;
    int repeat, warmup;
    int64_t sizes[KJ_BENCH_MAX_SIZES];
    int size_count;
    int threads;
    const char *reference;
    int reference_arg; /* -1: the result, or the only array argument of a kernel */
    int ulps;
    bool json, csv;
    const char *json_path, *csv_path; /* NULL: stdout, in place of the table */
    KjCliReduce reduce;               /* a @reduce: --axis, --init */
} BenchOptions;

typedef struct Stats {
    double median, min, max;
} Stats;

/* An output as the host sees it: C-ordered bytes. */
typedef struct Output {
    int arg; /* the argument it is, or -1 for the result */
    kjit_dtype dtype;
    int ndim;
    int64_t shape[KJIT_MAX_DIMS];
    void *data;
} Output;

typedef enum { VERDICT_NONE, VERDICT_BASELINE, VERDICT_IDENTICAL, VERDICT_OK, VERDICT_MISMATCH } Verdict;

typedef struct Agreement {
    Verdict verdict;
    bool floats; /* max_ulp means something */
    double max_abs, max_rel, max_ulp;
    int64_t differing, total;
    char detail[200]; /* why a mismatch is one, when it is not a count */
} Agreement;

typedef enum { TARGET_OK, TARGET_UNAVAILABLE, TARGET_FAILED } TargetState;

typedef struct TargetRun {
    kjit_target target;
    TargetState state;
    char *reason; /* unavailable or failed: why */
    char device[320];
    int threads;
    double compile_ms[2]; /* cold, cached: front end and code generation */
    const char *cached_from;
    bool transfers;
    Stats in, run, out;
    double total; /* median in + run + out */
    Output outputs[KJ_CLI_MAX_ARGS + 1];
    int output_count;
    Agreement agreement;
} TargetRun;

typedef struct SizeRun {
    int64_t size; /* 0 without --sizes */
    char *args[KJ_CLI_MAX_ARGS]; /* the argument texts, resized */
    int64_t elements;
    double bytes;
    TargetRun targets[KJ_BENCH_MAX_TARGETS];
} SizeRun;

/* What every target shares. */
typedef struct Bench {
    const BenchOptions *o;
    kjit_function_kind kind;
    const char *signature;
    char cache_root[256]; /* private cache folders live under it */
    int cache_dirs;
    char cpu_name[256];
    Output reference;
    bool have_reference;
} Bench;

/* cli_bench_report.c */

/* The target the others are measured against: the first that ran, or NULL. */
const TargetRun *kj_bench_baseline(const SizeRun *s, int target_count);
/* One size's table, with the cuda-over-cpu line when both ran. */
void kj_bench_print_size(FILE *f, const Bench *b, const SizeRun *s);
/* The sweep over --sizes and each target's crossover. */
void kj_bench_print_sweep(FILE *f, const Bench *b, const SizeRun *runs);
/* The same data for scripts (heap text, caller frees). */
char *kj_bench_json(const Bench *b, const SizeRun *runs, int run_count);
char *kj_bench_csv(const Bench *b, const SizeRun *runs, int run_count);

#endif
