/*
 * cli_bench_report.c: what `kjit bench` prints.  One table per size (columns
 * sized to their contents, titles over groups of columns), the sweep with each
 * target's crossover against the baseline, and the same figures as JSON and
 * CSV for scripts.  Nothing here measures: cli_bench.c hands over SizeRuns.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli_bench.h"

static const char *const verdict_names[] = {"none", "baseline", "identical", "ok", "mismatch"};

const TargetRun *kj_bench_baseline(const SizeRun *s, int target_count)
{
    for (int k = 0; k < target_count; k++)
        if (s->targets[k].state == TARGET_OK)
            return &s->targets[k];
    return NULL;
}

/* ============================================================ agreement */

/* "identical", "ok: 2 ulp, abs 1.2e-07, rel 3.4e-08", "MISMATCH: ...". */
static void agreement_text(const Agreement *a, char *buf, size_t size)
{
    switch (a->verdict) {
    case VERDICT_NONE: snprintf(buf, size, "-"); return;
    case VERDICT_BASELINE: snprintf(buf, size, "(baseline)"); return;
    case VERDICT_IDENTICAL: snprintf(buf, size, "identical"); return;
    case VERDICT_OK:
        snprintf(buf, size, "ok: %.0f ulp, abs %.2g, rel %.2g", a->max_ulp, a->max_abs, a->max_rel);
        return;
    case VERDICT_MISMATCH:
        if (a->detail[0]) {
            snprintf(buf, size, "MISMATCH: %s", a->detail);
        } else {
            int n = snprintf(buf, size, "MISMATCH: %lld of %lld differ, abs %.3g, rel %.3g",
                             (long long)a->differing, (long long)a->total, a->max_abs, a->max_rel);
            if (a->floats && n > 0 && (size_t)n < size)
                snprintf(buf + n, size - (size_t)n, ", %.3g ulp", a->max_ulp);
        }
        return;
    }
}

/* ================================================================ table */

#define MAX_COLUMNS 16
#define MAX_ROWS (KJ_BENCH_MAX_SIZES + 1)

typedef struct Table {
    char cells[MAX_ROWS][MAX_COLUMNS][96];
    char wide[MAX_ROWS][600]; /* a row told in words (an unavailable target) */
    int rows, columns;
    bool left[MAX_COLUMNS];
} Table;

static void cell(Table *t, int row, int column, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->cells[row][column], sizeof t->cells[row][column], fmt, ap);
    va_end(ap);
}

/* Milliseconds with three or four significant digits. */
static void format_ms(char *buf, size_t size, double ms)
{
    if (ms >= 1000) snprintf(buf, size, "%.0f", ms);
    else if (ms >= 1) snprintf(buf, size, "%.4g", ms);
    else snprintf(buf, size, "%.3g", ms);
}

/* 2.43G: a rate with an SI prefix. */
static void format_rate(char *buf, size_t size, double v)
{
    static const char prefixes[] = " kMGTP";
    int p = 0;
    while (v >= 1000 && p < 5) {
        v /= 1000;
        p++;
    }
    if (p == 0) snprintf(buf, size, "%.3g", v);
    else snprintf(buf, size, "%.3g%c", v, prefixes[p]);
}

static void format_bytes(char *buf, size_t size, double bytes)
{
    if (bytes >= 1e9) snprintf(buf, size, "%.2f GB", bytes / 1e9);
    else if (bytes >= 1e6) snprintf(buf, size, "%.1f MB", bytes / 1e6);
    else if (bytes >= 1e3) snprintf(buf, size, "%.1f kB", bytes / 1e3);
    else snprintf(buf, size, "%.0f bytes", bytes);
}

/* A title over the columns first..last. */
typedef struct Group {
    int first, last;
    const char *title;
} Group;

static void print_table(FILE *f, const Table *t, const Group *groups, int group_count)
{
    int width[MAX_COLUMNS] = {0};
    for (int r = 0; r < t->rows; r++)
        for (int c = 0; c < t->columns; c++) {
            int n = (int)strlen(t->cells[r][c]);
            width[c] = n > width[c] ? n : width[c];
        }
    for (int g = 0; g < group_count; g++) {
        int span = 0;
        for (int c = groups[g].first; c <= groups[g].last; c++)
            span += width[c] + (c > groups[g].first ? 2 : 0);
        int need = (int)strlen(groups[g].title);
        if (need > span)
            width[groups[g].last] += need - span;
    }
    if (group_count) {
        KjCliBuf line = {0};
        int column = 0;
        for (int g = 0; g < group_count; g++) {
            for (; column < groups[g].first; column++)
                kj_cli_printf(&line, "%*s", width[column] + 2, "");
            int span = 0;
            for (int c = groups[g].first; c <= groups[g].last; c++)
                span += width[c] + 2;
            kj_cli_printf(&line, "%-*s", span, groups[g].title);
            column = groups[g].last + 1;
        }
        size_t n = strlen(line.data);
        while (n > 0 && line.data[n - 1] == ' ')
            line.data[--n] = '\0';
        fprintf(f, "%s\n", line.data);
        kj_cli_buf_free(&line);
    }
    for (int r = 0; r < t->rows; r++) {
        KjCliBuf line = {0};
        for (int c = 0; c < t->columns; c++) {
            if (t->wide[r][0] && c == 1) {
                kj_cli_printf(&line, "%s", t->wide[r]);
                break;
            }
            bool last = c == t->columns - 1;
            if (last && t->left[c])
                kj_cli_printf(&line, "%s", t->cells[r][c]);
            else if (t->left[c])
                kj_cli_printf(&line, "%-*s  ", width[c], t->cells[r][c]);
            else
                kj_cli_printf(&line, last ? "%*s" : "%*s  ", width[c], t->cells[r][c]);
        }
        size_t n = line.data ? strlen(line.data) : 0;
        while (n > 0 && line.data[n - 1] == ' ')
            line.data[--n] = '\0';
        fprintf(f, "%s\n", line.data ? line.data : "");
        kj_cli_buf_free(&line);
    }
}

void kj_bench_print_size(FILE *f, const Bench *b, const SizeRun *s)
{
    const BenchOptions *o = b->o;
    char bytes[64];
    format_bytes(bytes, sizeof bytes, s->bytes);
    if (s->size)
        fprintf(f, "\nsize %lld:", (long long)s->size);
    fprintf(f, "\n%lld element%s, %s moved per call (arrays read and written)\n",
            (long long)s->elements, s->elements == 1 ? "" : "s", bytes);

    Table *t = kj_cli_xcalloc(1, sizeof *t);
    t->columns = 14;
    t->left[0] = t->left[1] = t->left[13] = true;
    static const char *const heads[] = {"target", "device", "cold", "cached", "in", "out",
                                        "median", "min", "max", "elem/s", "GB/s", "run",
                                        "+transfers", ""};
    for (int c = 0; c < 14; c++)
        cell(t, 0, c, "%s", heads[c]);
    const TargetRun *base = kj_bench_baseline(s, o->target_count);
    if (b->have_reference)
        cell(t, 0, 13, "vs %s", o->reference);
    else if (base)
        cell(t, 0, 13, "vs %s", kjit_target_name(base->target));
    t->rows = 1;
    for (int k = 0; k < o->target_count; k++) {
        const TargetRun *r = &s->targets[k];
        int row = t->rows++;
        cell(t, row, 0, "%s", kjit_target_name(r->target));
        if (r->state == TARGET_UNAVAILABLE) {
            snprintf(t->wide[row], sizeof t->wide[row], "unavailable: %s", r->reason);
            continue;
        }
        if (r->state == TARGET_FAILED) {
            snprintf(t->wide[row], sizeof t->wide[row], "FAILED: %.*s", (int)strcspn(r->reason, "\n"),
                     r->reason);
            continue;
        }
        char buf[64];
        cell(t, row, 1, "%s", r->device);
        format_ms(buf, sizeof buf, r->compile_ms[0]);
        cell(t, row, 2, "%s", buf);
        format_ms(buf, sizeof buf, r->compile_ms[1]);
        cell(t, row, 3, "%s", buf);
        if (r->transfers) {
            format_ms(buf, sizeof buf, r->in.median);
            cell(t, row, 4, "%s", buf);
            format_ms(buf, sizeof buf, r->out.median);
            cell(t, row, 5, "%s", buf);
        } else {
            cell(t, row, 4, "-");
            cell(t, row, 5, "-");
        }
        const Stats *st = &r->run;
        format_ms(buf, sizeof buf, st->median);
        cell(t, row, 6, "%s", buf);
        format_ms(buf, sizeof buf, st->min);
        cell(t, row, 7, "%s", buf);
        format_ms(buf, sizeof buf, st->max);
        cell(t, row, 8, "%s", buf);
        double seconds = st->median / 1e3;
        format_rate(buf, sizeof buf, seconds > 0 ? (double)s->elements / seconds : INFINITY);
        cell(t, row, 9, "%s", buf);
        cell(t, row, 10, "%.3g", seconds > 0 ? s->bytes / seconds / 1e9 : INFINITY);
        if (base) {
            cell(t, row, 11, "%.2fx", base->run.median / st->median);
            cell(t, row, 12, "%.2fx", base->total / r->total);
        } else {
            cell(t, row, 11, "-");
            cell(t, row, 12, "-");
        }
        agreement_text(&r->agreement, t->cells[row][13], sizeof t->cells[row][13]);
    }
    static const Group groups[] = {{2, 3, "compile ms"}, {4, 5, "transfer ms"},
                                   {6, 8, "run ms"},     {9, 10, "throughput"},
                                   {11, 12, "speed-up"}, {13, 13, "agreement"}};
    print_table(f, t, groups, 6);
    free(t);

    for (int k = 0; k < o->target_count; k++)
        if (s->targets[k].state == TARGET_OK) {
            fprintf(f, "compile: cold in a fresh context with an empty cache; cached in another "
                       "once the first is gone (code from: %s)\n", s->targets[k].cached_from);
            break;
        }
    const TargetRun *cpu = NULL, *cuda = NULL;
    for (int k = 0; k < o->target_count; k++) {
        const TargetRun *r = &s->targets[k];
        if (r->state != TARGET_OK)
            continue;
        if (r->target == KJIT_TARGET_CPU) cpu = r;
        if (r->target == KJIT_TARGET_CUDA) cuda = r;
    }
    if (cpu && cuda)
        fprintf(f, "cuda over cpu: %.2fx on the run, %.2fx counting transfers\n",
                cpu->run.median / cuda->run.median, cpu->total / cuda->total);
}

/* ================================================================ sweep */

/* The baseline of the sweep: cpu when it is compared, else the first target. */
static int sweep_baseline(const BenchOptions *o)
{
    for (int k = 0; k < o->target_count; k++)
        if (o->targets[k] == KJIT_TARGET_CPU)
            return k;
    return 0;
}

/* The smallest size from which target k is faster than the baseline (counting
 * its transfers) at every larger size tried; 0 when it never is. */
static int64_t crossover(const SizeRun *runs, int count, int base, int k)
{
    int64_t from = 0;
    for (int i = count - 1; i >= 0; i--) {
        const TargetRun *t = &runs[i].targets[k], *b = &runs[i].targets[base];
        if (t->state != TARGET_OK || b->state != TARGET_OK || !(t->total < b->total))
            break;
        from = runs[i].size;
    }
    return from;
}

void kj_bench_print_sweep(FILE *f, const Bench *b, const SizeRun *runs)
{
    const BenchOptions *o = b->o;
    Table *t = kj_cli_xcalloc(1, sizeof *t);
    int base = sweep_baseline(o);
    t->columns = 1 + o->target_count;
    t->left[0] = true;
    cell(t, 0, 0, "size");
    for (int k = 0; k < o->target_count; k++)
        cell(t, 0, 1 + k, "%s", kjit_target_name(o->targets[k]));
    t->rows = 1;
    for (int i = 0; i < o->size_count; i++) {
        int row = t->rows++;
        cell(t, row, 0, "%lld", (long long)runs[i].size);
        for (int k = 0; k < o->target_count; k++) {
            const TargetRun *r = &runs[i].targets[k];
            char buf[64];
            if (r->state == TARGET_UNAVAILABLE) {
                cell(t, row, 1 + k, "unavailable");
                continue;
            }
            if (r->state == TARGET_FAILED) {
                cell(t, row, 1 + k, "failed");
                continue;
            }
            format_ms(buf, sizeof buf, r->total);
            cell(t, row, 1 + k, "%s%s", buf,
                 r->agreement.verdict == VERDICT_MISMATCH ? " (mismatch)" : "");
        }
    }
    fprintf(f, "\nsweep: median ms per call, transfers included\n");
    print_table(f, t, NULL, 0);
    free(t);
    const char *base_name = kjit_target_name(o->targets[base]);
    for (int k = 0; k < o->target_count; k++) {
        if (k == base)
            continue;
        const char *name = kjit_target_name(o->targets[k]);
        const TargetRun *last = &runs[o->size_count - 1].targets[k];
        if (last->state == TARGET_UNAVAILABLE) {
            fprintf(f, "crossover: %s unavailable (%s)\n", name, last->reason);
            continue;
        }
        int64_t from = crossover(runs, o->size_count, base, k);
        if (from == 0)
            fprintf(f, "crossover: no crossover up to %lld: %s does not beat %s\n",
                    (long long)o->sizes[o->size_count - 1], name, base_name);
        else if (from == o->sizes[0])
            fprintf(f, "crossover: %s beats %s at every size tried (from %lld)\n", name, base_name,
                    (long long)from);
        else
            fprintf(f, "crossover: %s beats %s from %lld elements on\n", name, base_name,
                    (long long)from);
    }
}

/* ================================================================= JSON */

static void json_string(KjCliBuf *j, const char *s)
{
    kj_cli_printf(j, "\"");
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') kj_cli_printf(j, "\\%c", c);
        else if (c == '\n') kj_cli_printf(j, "\\n");
        else if (c == '\t') kj_cli_printf(j, "\\t");
        else if (c < 0x20) kj_cli_printf(j, "\\u%04x", c);
        else kj_cli_printf(j, "%c", c);
    }
    kj_cli_printf(j, "\"");
}

/* JSON has no NaN or infinity: those are null. */
static void json_number(KjCliBuf *j, double v)
{
    if (isfinite(v)) kj_cli_printf(j, "%.9g", v);
    else kj_cli_printf(j, "null");
}

static void json_stats(KjCliBuf *j, const Stats *s)
{
    kj_cli_printf(j, "{\"median\": ");
    json_number(j, s->median);
    kj_cli_printf(j, ", \"min\": ");
    json_number(j, s->min);
    kj_cli_printf(j, ", \"max\": ");
    json_number(j, s->max);
    kj_cli_printf(j, "}");
}

static void json_target(KjCliBuf *j, const SizeRun *s, const TargetRun *r, const TargetRun *base)
{
    kj_cli_printf(j, "{\"target\": ");
    json_string(j, kjit_target_name(r->target));
    if (r->state == TARGET_UNAVAILABLE) {
        kj_cli_printf(j, ", \"available\": false, \"reason\": ");
        json_string(j, r->reason);
        kj_cli_printf(j, "}");
        return;
    }
    kj_cli_printf(j, ", \"available\": true, \"ok\": %s, \"device\": ",
                  r->state == TARGET_OK ? "true" : "false");
    json_string(j, r->device);
    if (r->threads)
        kj_cli_printf(j, ", \"threads\": %d", r->threads);
    if (r->state == TARGET_FAILED) {
        kj_cli_printf(j, ", \"error\": ");
        json_string(j, r->reason);
        kj_cli_printf(j, "}");
        return;
    }
    kj_cli_printf(j, ", \"compile_ms\": {\"cold\": ");
    json_number(j, r->compile_ms[0]);
    kj_cli_printf(j, ", \"cached\": ");
    json_number(j, r->compile_ms[1]);
    kj_cli_printf(j, ", \"cached_from\": ");
    json_string(j, r->cached_from);
    kj_cli_printf(j, "}, \"transfer_ms\": ");
    if (r->transfers) {
        kj_cli_printf(j, "{\"in\": ");
        json_stats(j, &r->in);
        kj_cli_printf(j, ", \"out\": ");
        json_stats(j, &r->out);
        kj_cli_printf(j, "}");
    } else {
        kj_cli_printf(j, "null");
    }
    kj_cli_printf(j, ", \"run_ms\": ");
    json_stats(j, &r->run);
    kj_cli_printf(j, ", \"total_ms\": ");
    json_number(j, r->total);
    double seconds = r->run.median / 1e3;
    kj_cli_printf(j, ", \"elements_per_s\": ");
    json_number(j, (double)s->elements / seconds);
    kj_cli_printf(j, ", \"gb_per_s\": ");
    json_number(j, s->bytes / seconds / 1e9);
    kj_cli_printf(j, ", \"speedup\": ");
    json_number(j, base->run.median / r->run.median);
    kj_cli_printf(j, ", \"speedup_with_transfers\": ");
    json_number(j, base->total / r->total);
    const Agreement *a = &r->agreement;
    kj_cli_printf(j, ", \"agreement\": {\"verdict\": ");
    json_string(j, verdict_names[a->verdict]);
    kj_cli_printf(j, ", \"max_abs\": ");
    json_number(j, a->max_abs);
    kj_cli_printf(j, ", \"max_rel\": ");
    json_number(j, a->max_rel);
    kj_cli_printf(j, ", \"max_ulp\": ");
    json_number(j, a->floats ? a->max_ulp : NAN);
    kj_cli_printf(j, ", \"differing\": %lld, \"compared\": %lld", (long long)a->differing,
                  (long long)a->total);
    if (a->detail[0]) {
        kj_cli_printf(j, ", \"detail\": ");
        json_string(j, a->detail);
    }
    kj_cli_printf(j, "}}");
}

char *kj_bench_json(const Bench *b, const SizeRun *runs, int run_count)
{
    const BenchOptions *o = b->o;
    static const char *const kinds[] = {"plain", "vectorize", "kernel"};
    KjCliBuf j = {0};
    kj_cli_printf(&j, "{\"kjit\": \"%s\", \"file\": ", KJIT_VERSION);
    json_string(&j, o->call.file);
    kj_cli_printf(&j, ", \"function\": ");
    json_string(&j, o->call.function);
    kj_cli_printf(&j, ", \"kind\": \"%s\", \"signature\": ", kinds[b->kind]);
    json_string(&j, b->signature);
    kj_cli_printf(&j, ", \"seed\": %llu, \"repeat\": %d, \"warmup\": %d, \"ulps\": %d",
                  (unsigned long long)o->call.seed, o->repeat, o->warmup, o->ulps);
    if (o->call.has_grid)
        kj_cli_printf(&j, ", \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u]", o->call.grid[0],
                      o->call.grid[1], o->call.grid[2], o->call.block[0], o->call.block[1], o->call.block[2]);
    kj_cli_printf(&j, ", \"reference\": ");
    if (b->have_reference)
        json_string(&j, o->reference);
    else
        kj_cli_printf(&j, "null");
    kj_cli_printf(&j, ", \"results\": [");
    for (int i = 0; i < run_count; i++) {
        const SizeRun *s = &runs[i];
        kj_cli_printf(&j, "%s\n  {\"size\": ", i ? "," : "");
        if (s->size) kj_cli_printf(&j, "%lld", (long long)s->size);
        else kj_cli_printf(&j, "null");
        kj_cli_printf(&j, ", \"args\": [");
        for (int a = 0; a < o->call.arg_count; a++) {
            kj_cli_printf(&j, a ? ", " : "");
            json_string(&j, s->args[a]);
        }
        const TargetRun *base = kj_bench_baseline(s, o->target_count);
        kj_cli_printf(&j, "], \"elements\": %lld, \"bytes\": %.0f, \"baseline\": ",
                      (long long)s->elements, s->bytes);
        if (base)
            json_string(&j, kjit_target_name(base->target));
        else
            kj_cli_printf(&j, "null");
        kj_cli_printf(&j, ", \"targets\": [");
        for (int k = 0; k < o->target_count; k++) {
            kj_cli_printf(&j, "%s\n    ", k ? "," : "");
            json_target(&j, s, &s->targets[k], base);
        }
        kj_cli_printf(&j, "]}");
    }
    kj_cli_printf(&j, "]");
    if (o->size_count) {
        int base = sweep_baseline(o);
        kj_cli_printf(&j, ",\n \"crossover\": [");
        bool any = false;
        for (int k = 0; k < o->target_count; k++) {
            if (k == base)
                continue;
            const TargetRun *last = &runs[run_count - 1].targets[k];
            kj_cli_printf(&j, "%s{\"target\": \"%s\", \"baseline\": \"%s\", ", any ? ", " : "",
                          kjit_target_name(o->targets[k]), kjit_target_name(o->targets[base]));
            any = true;
            if (last->state == TARGET_UNAVAILABLE) {
                kj_cli_printf(&j, "\"available\": false, \"reason\": ");
                json_string(&j, last->reason);
                kj_cli_printf(&j, "}");
                continue;
            }
            int64_t from = crossover(runs, run_count, base, k);
            kj_cli_printf(&j, "\"available\": true, \"from_size\": ");
            if (from) kj_cli_printf(&j, "%lld", (long long)from);
            else kj_cli_printf(&j, "null");
            kj_cli_printf(&j, ", \"largest_size\": %lld}", (long long)o->sizes[o->size_count - 1]);
        }
        kj_cli_printf(&j, "]");
    }
    kj_cli_printf(&j, "}\n");
    return j.data;
}

/* ================================================================== CSV */

/* Free text goes last and is quoted, so that `cut -d,` or awk -F, can take
 * the numbers before it. */
static void csv_text(KjCliBuf *c, const char *s)
{
    kj_cli_printf(c, "\"");
    for (; s && *s; s++) {
        if (*s == '\n') kj_cli_printf(c, " ");
        else kj_cli_printf(c, *s == '"' ? "\"\"" : "%c", *s);
    }
    kj_cli_printf(c, "\"");
}

char *kj_bench_csv(const Bench *b, const SizeRun *runs, int run_count)
{
    const BenchOptions *o = b->o;
    KjCliBuf c = {0};
    kj_cli_printf(&c, "function,size,target,status,compile_cold_ms,compile_cached_ms,in_ms,out_ms,"
                      "run_median_ms,run_min_ms,run_max_ms,total_ms,elements,bytes,"
                      "elements_per_s,gb_per_s,speedup,speedup_with_transfers,agreement,"
                      "max_abs,max_rel,max_ulp,differing,device,reason\n");
    for (int i = 0; i < run_count; i++) {
        const SizeRun *s = &runs[i];
        const TargetRun *base = kj_bench_baseline(s, o->target_count);
        for (int k = 0; k < o->target_count; k++) {
            const TargetRun *r = &s->targets[k];
            static const char *const states[] = {"ok", "unavailable", "failed"};
            kj_cli_printf(&c, "%s,%lld,%s,%s", o->call.function, (long long)(s->size ? s->size : s->elements),
                          kjit_target_name(r->target), states[r->state]);
            if (r->state == TARGET_OK) {
                double seconds = r->run.median / 1e3;
                double with = base->total / r->total;
                double speedup = base->run.median / r->run.median;
                kj_cli_printf(&c, ",%.6g,%.6g,", r->compile_ms[0], r->compile_ms[1]);
                if (r->transfers)
                    kj_cli_printf(&c, "%.6g,%.6g", r->in.median, r->out.median);
                else
                    kj_cli_printf(&c, ",");
                kj_cli_printf(&c, ",%.6g,%.6g,%.6g,%.6g,%lld,%.0f,%.6g,%.6g,%.4g,%.4g,%s,%.3g,%.3g,",
                              r->run.median, r->run.min, r->run.max, r->total,
                              (long long)s->elements, s->bytes, (double)s->elements / seconds,
                              s->bytes / seconds / 1e9, speedup, with,
                              verdict_names[r->agreement.verdict], r->agreement.max_abs,
                              r->agreement.max_rel);
                if (r->agreement.floats)
                    kj_cli_printf(&c, "%.3g", r->agreement.max_ulp);
                kj_cli_printf(&c, ",%lld,", (long long)r->agreement.differing);
            } else {
                kj_cli_printf(&c, ",,,,,,,,,%lld,%.0f,,,,,,,,,,", (long long)s->elements, s->bytes);
            }
            csv_text(&c, r->device);
            kj_cli_printf(&c, ",");
            csv_text(&c, r->reason ? r->reason : "");
            kj_cli_printf(&c, "\n");
        }
    }
    return c.data;
}
