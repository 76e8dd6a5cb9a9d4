/*
 * genprog_run.c: runs generated programs (tests/genprog/gen.py) in every
 * execution mode and against the reference evaluator (tests/unit/ref_eval.c).
 *
 *   genprog-run [--modes LIST] [--child-modes LIST] [--no-children] [--digest]
 *               [--inject-fault MODE] [-v] FILE.kern ...
 *
 * Each entry with a directive comment (gen.py's docstring lists them) runs on
 * inputs drawn from a seed made of the file's first line and the entry's name
 * (so a reduced program, which keeps both, gets the same inputs), in each mode:
 *
 *   cpu, cpu-nospec, cpu-scalar      the cpu target with cpu_simd 1 and
 *   par, par-nospec, par-scalar      cpu_specialise 1, cpu_simd 1 and
 *                                    cpu_specialise 0, cpu_simd 0 (fibers); par:
 *                                    the parallel target, 3 threads
 *   MODE+check (cpu+check)           MODE in checked mode (checks on SIMD lanes)
 *   cuda                             when kjit_cuda_available() says so
 *                                    (else "skipped: no CUDA driver")
 *   sse:cpu, sse:cpu-nospec, sse:par the same in a child process under
 *   avx2:...                         KJIT_CPU_FEATURES=-avx (SSE lanes) and, on
 *                                    a host with AVX-512, -avx512f (AVX2 lanes)
 *
 * What is compared:
 *   - every cpu mode with the first one (cpu), bit for bit, except that any
 *     NaN equals any NaN (NaN payloads and signs are not promised);
 *   - cpu with ref_eval: integers and bools exactly; floats within the
 *     tolerance below (the evaluator rounds each f32, f16 and c64 operation
 *     to its type as the targets do, but its math functions are libm's
 *     double ones and its reductions' order is not theirs);
 *     kernels that use warp collectives are not evaluated (ref_eval does not
 *     model them);
 *   - cuda with ref_eval, as cpu, and the share of integer elements allowed to
 *     differ where f64 contraction (fma) moved a comparison: CUDA_INT_SLACK;
 *     a float where contraction met an overflow may be an infinity against a
 *     NaN or a finite value of its sign (contraction_overflow).
 *
 * Output: one line per file: "ok FILE", "mismatch FILE: ..." (each mismatch on
 * its own "  " line after it) or "invalid FILE: ..." (the program is not
 * well-defined after all: the evaluator stopped, or found a race; a
 * generator bug, or a reduction that broke the program).  The exit status is
 * 1 when some file mismatched, 2 when none did but some was invalid, else 0.
 * --digest prints, instead, two hashes per entry and mode (the child's output):
 * of every output, and of every output but the float ones.
 *
 * The one exception to bit for bit: a program that calls a libm function
 * glibc's libmvec has (sin, exp, atan2 ..., any complex function but
 * conj, and the modulus abs of a complex number, which is hypot) may differ
 * between the instruction-set children in its float outputs, as
 * docs/language.md documents (each machine calls libmvec's routine for its
 * widest ISA, and the routines of two ISAs differ in the last bits).  Its
 * integer and bool outputs, and everything of every other program, are
 * still compared bit for bit; the last line counts the differences accepted.
 * The last line counts the kernels with barriers that barrier_split.c splits
 * and why it leaves the others on fibers: the generator should reach both.
 * --inject-fault MODE flips a bit of that mode's first result (make check
 * shows with it that a wrong bit is caught); MODE sse:cpu (a child's mode)
 * makes that child flip it.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kjit.h"
#include "kjit_compiler.h"
#include "kjit_runtime.h"
#include "ref_eval.h"

#define TOLERANCE                                                                              \
    "ints exactly; f64 within 1e-9 relative or 1e-9 x the largest |value| of the evaluation; " \
    "f32, f16, c64 and what they feed within 1e-3 relative or 1e-3 x that magnitude"

enum { MAX_MODES = 16, MAX_PARAMS = 16, MAX_ENTRIES = 32, MAX_ARRAYS = 16 };
static const double CUDA_INT_SLACK = 0.02;

/* ================================================================ modes */

typedef struct Mode {
    char name[32];
    kjit_target target;
    int simd, specialise, check;
    kjit_context *context;
    kjit_module *module;
    bool cuda;
} Mode;

static Mode modes[MAX_MODES];
static int mode_count;
static bool verbose, digest_only, show_inputs;
static const char *save_inputs_dir;
/* --inject-fault MODE: flips a bit of that mode's first result, to show that
 * the comparison (and the reducer) catch a wrong result */
static const char *inject_fault;

static void discard_line(void *user, const char *line, size_t len)
{
    (void)user, (void)line, (void)len;
}

static bool add_mode(const char *name)
{
    Mode *m = &modes[mode_count];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->simd = 1, m->specialise = 1;
    if (strncmp(name, "cpu", 3) == 0)
        m->target = KJIT_TARGET_CPU;
    else if (strncmp(name, "par", 3) == 0)
        m->target = KJIT_TARGET_PARALLEL;
    else if (strcmp(name, "cuda") == 0) {
        char reason[256];
        if (kjit_cuda_available(reason, sizeof reason) != KJIT_OK) {
            printf("cuda: skipped: no CUDA driver (%s)\n", reason);
            return true;
        }
        m->target = KJIT_TARGET_CUDA;
        m->cuda = true;
    } else {
        fprintf(stderr, "genprog-run: unknown mode '%s'\n", name);
        return false;
    }
    /* NAME+check: checked mode (kjit_options.check), which a well-defined
     * program passes with the same results */
    char base[32];
    snprintf(base, sizeof base, "%s", name);
    char *plus = strchr(base, '+');
    if (plus && strcmp(plus, "+check") == 0) {
        m->check = KJIT_CHECK_VALUES;
        *plus = '\0';
    } else if (plus) {
        fprintf(stderr, "genprog-run: unknown mode '%s'\n", name);
        return false;
    }
    const char *dash = strchr(base, '-');
    if (dash && strcmp(dash, "-nospec") == 0)
        m->specialise = 0;
    else if (dash && strcmp(dash, "-scalar") == 0)
        m->simd = 0;
    else if (dash) {
        fprintf(stderr, "genprog-run: unknown mode '%s'\n", name);
        return false;
    }
    kjit_options o;
    kjit_options_init(&o);
    o.target = m->target;
    o.num_threads = 3;
    o.cpu_simd = m->simd;
    o.cpu_specialise = m->specialise;
    o.check = m->check;
    o.on_print = discard_line;
    if (kjit_context_create(&o, &m->context) != KJIT_OK) {
        fprintf(stderr, "genprog-run: %s: %s\n", name, kjit_last_error(NULL));
        return false;
    }
    mode_count++;
    return true;
}

/* ================================================================ random inputs */

static uint64_t rng;

static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static double uniform(double lo, double hi)
{
    return lo + (hi - lo) * ((double)(next_random() >> 11) / 9007199254740992.0);
}

static double to_single(double x)
{
    volatile float f = (float)x;
    return f;
}

/* Moderate values mostly; some integers, tiny and large ones, and the
 * specials: inf, -inf, nan, -0. */
static double draw_real(void)
{
    int k = (int)(next_random() % 40);
    if (k < 20)
        return uniform(-4, 4);
    if (k < 28)
        return (next_random() & 1 ? -1 : 1) * exp(uniform(log(1e-3), log(1e3)));
    if (k < 33)
        return (double)(int64_t)(next_random() % 11) - 5;
    if (k < 35)
        return uniform(-1e4, 1e4);
    static const double special[5] = {INFINITY, -INFINITY, NAN, -0.0, 0.0};
    return special[k - 35];
}

static RefValue draw_scalar(const KjType *t)
{
    RefValue v = {0};
    if (t->kind == KJ_TYPE_BOOL) {
        v.u = next_random() & 1;
        return v;
    }
    if (kj_type_is_int(t)) {
        int k = (int)(next_random() % 20);
        bool sgn = kj_type_is_signed(t);
        int bits = kj_type_int_bits(t);
        uint64_t min = sgn ? (uint64_t)1 << (bits - 1) : 0;
        uint64_t special[5] = {0, 1, (uint64_t)-1, min, min - 1};
        uint64_t raw = k < 10   ? (uint64_t)((int64_t)(next_random() % 81) - (sgn ? 40 : 0))
                       : k < 14 ? special[next_random() % 5]
                                : next_random();
        return ref_convert((RefValue){.u = raw}, kj_type_scalar(KJ_TYPE_I64), t);
    }
    if (kj_type_is_float(t)) {
        v.f = draw_real();
        if (t->kind == KJ_TYPE_F32)
            v.f = to_single(v.f);
        if (kj_type_is_half(t))
            v.f = kj_half_round(t->kind, v.f);
        return v;
    }
    double re = draw_real(), im = draw_real();
    if (t->kind == KJ_TYPE_C64)
        re = to_single(re), im = to_single(im);
    v.c = CMPLX(re, im);
    return v;
}

/* ================================================================ comparison */

typedef struct Scale {
    double magnitude, single_magnitude;
} Scale;

static bool float_close(double got, double want, bool single, Scale s)
{
    if (isnan(got) || isnan(want))
        return isnan(got) && isnan(want);
    if (got == want)
        return true;
    bool loose = single || s.single_magnitude > 0;
    /* f32 arithmetic the evaluator did in double may overflow in one and not
     * the other, or cancel differently: a result next to such magnitudes is
     * inconclusive */
    if (loose && (isinf(got) || isinf(want)) && s.magnitude > 1e30)
        return true;
    if (isinf(got) || isinf(want))
        return false;
    double rel = loose ? 1e-3 : 1e-9;
    return fabs(got - want) <= fmax(rel * fabs(want), rel * fmax(s.magnitude, 1e-300));
}

/* Reference comparison of one element. */
static bool ref_match(RefValue got, RefValue want, const KjType *t, Scale s)
{
    if (kj_type_is_complex(t)) {
        /* Annex G edges (inf and nan parts) are the targets' own business */
        if (!isfinite(creal(want.c)) || !isfinite(cimag(want.c)) || !isfinite(creal(got.c)) ||
            !isfinite(cimag(got.c)))
            return true;
        bool single = t->kind == KJ_TYPE_C64;
        return float_close(creal(got.c), creal(want.c), single, s) &&
               float_close(cimag(got.c), cimag(want.c), single, s);
    }
    if (kj_type_is_half(t)) {
        if (isnan(got.f) || isnan(want.f))
            return isnan(got.f) && isnan(want.f);
        if (got.f == want.f)
            return true;
        if (isinf(got.f) || isinf(want.f))
            return s.magnitude > 1e4; /* f16 overflow next to large f32 values */
        int bits = t->kind == KJ_TYPE_F16 ? 10 : 7;
        double step = ldexp(1.0, ilogb(want.f == 0 ? 1e-30 : want.f) - bits);
        return fabs(got.f - want.f) <= fmax(2 * step, 1e-3 * s.magnitude);
    }
    if (kj_type_is_float(t))
        return float_close(got.f, want.f, t->kind == KJ_TYPE_F32, s);
    return got.u == want.u;
}

/* Mode-to-mode comparison: the same bits, any NaN equal to any NaN. */
static bool same_bits(RefValue a, RefValue b, const KjType *t)
{
    if (kj_type_is_complex(t)) {
        double p[4] = {creal(a.c), cimag(a.c), creal(b.c), cimag(b.c)};
        for (int i = 0; i < 2; i++) {
            if (isnan(p[i]) || isnan(p[i + 2])) {
                if (!(isnan(p[i]) && isnan(p[i + 2])))
                    return false;
            } else if (memcmp(&p[i], &p[i + 2], sizeof(double)) != 0)
                return false;
        }
        return true;
    }
    if (kj_type_is_float(t)) {
        if (isnan(a.f) || isnan(b.f))
            return isnan(a.f) && isnan(b.f);
        return memcmp(&a.f, &b.f, sizeof a.f) == 0;
    }
    return a.u == b.u;
}

static void format_value(char *buf, size_t size, RefValue v, const KjType *t)
{
    if (kj_type_is_complex(t))
        snprintf(buf, size, "(%.17g, %.17g)", creal(v.c), cimag(v.c));
    else if (kj_type_is_float(t))
        snprintf(buf, size, "%.17g", v.f);
    else if (kj_type_is_signed(t))
        snprintf(buf, size, "%lld", (long long)v.u);
    else
        snprintf(buf, size, "%llu", (unsigned long long)v.u);
}

/* ================================================================ one run's outputs */

/* The arrays a run produced (every array argument after the call, or the
 * result), as RefArrays over owned copies. */
typedef struct Outputs {
    int count;
    const KjType *types[MAX_ARRAYS]; /* element types */
    const char *names[MAX_ARRAYS];
    RefArray arrays[MAX_ARRAYS];
    char error[512]; /* the call failed */
} Outputs;

static void outputs_free(Outputs *o)
{
    for (int i = 0; i < o->count; i++) {
        free(o->arrays[i].data);
        free(o->arrays[i].racy);
    }
    o->count = 0;
}

static RefArray copy_array(const RefArray *a)
{
    RefArray c = *a;
    size_t bytes = (size_t)a->count * (size_t)ref_elem_size(a->elem);
    c.data = kj_xmalloc(bytes ? bytes : 1);
    memcpy(c.data, a->data, bytes);
    c.racy = NULL;
    c.writer = NULL;
    return c;
}

/* A hash of the outputs; with ints_only, of all but the float and complex
 * arrays' values (what an ISA child must still match in a libm program). */
static uint64_t outputs_hash(const Outputs *o, bool ints_only)
{
    uint64_t h = 1469598103934665603ull;
    if (o->error[0])
        return fnv(o->error, strlen(o->error), h);
    for (int i = 0; i < o->count; i++)
        for (int64_t k = 0; k < o->arrays[i].count; k++) {
            if (ints_only && (kj_type_is_float(o->types[i]) || kj_type_is_complex(o->types[i]))) {
                h = fnv(&k, sizeof k, h); /* the count still */
                continue;
            }
            RefValue v = ref_array_read(&o->arrays[i], k);
            const KjType *t = o->types[i];
            if (kj_type_is_complex(t)) {
                double p[2] = {creal(v.c), cimag(v.c)};
                for (int j = 0; j < 2; j++)
                    if (isnan(p[j]))
                        p[j] = NAN;
                h = fnv(p, sizeof p, h);
            } else if (kj_type_is_float(t)) {
                double f = isnan(v.f) ? NAN : v.f;
                h = fnv(&f, sizeof f, h);
            } else {
                h = fnv(&v.u, sizeof v.u, h);
            }
        }
    return h;
}

/* ================================================================ reports */

typedef struct Report {
    KjBuf text;
    int mismatches;
    char invalid[600];
} Report;

static void mismatch(Report *r, const char *fmt, ...)
{
    r->mismatches++;
    if (r->mismatches > 12)
        return;
    va_list ap;
    va_start(ap, fmt);
    kj_buf_printf(&r->text, "  ");
    kj_buf_vprintf(&r->text, fmt, ap);
    kj_buf_printf(&r->text, "\n");
    va_end(ap);
}

/* On cuda a multiply feeding an add contracts into one fma: a product that
 * overflows when rounded alone may not when fused with its addend, so an
 * infinity may meet a NaN, or a finite value of its sign (tests/modes/compare.c
 * admits the same; docs/testing.md). */
static bool contraction_overflow(RefValue got, RefValue want, const KjType *t)
{
    if (!kj_type_is_float(t)) /* f16 and bf16 too: computed in f32, then converted */
        return false;
    double g = got.f, w = want.f;
    if (isnan(g) || isnan(w))
        return (isnan(g) || isinf(g)) && (isnan(w) || isinf(w));
    if (isinf(g) || isinf(w))
        return signbit(g) == signbit(w);
    return false;
}

/* Compares a mode's outputs with the baseline's (bits) or the reference's. */
static void compare(Report *r, const char *entry, const char *what, const Outputs *got,
                    const Outputs *want, bool bits, Scale scale, double int_slack, bool cuda)
{
    if (got->error[0] || want->error[0]) {
        if (strcmp(got->error, want->error) != 0)
            mismatch(r, "%s: %s: call gave '%s', want '%s'", entry, what, got->error, want->error);
        return;
    }
    for (int i = 0; i < got->count && i < want->count; i++) {
        const KjType *t = got->types[i];
        int bad = 0;
        int64_t differ = 0;
        bool exact = !kj_type_is_float(t) && !kj_type_is_complex(t);
        char first[256] = "";
        for (int64_t k = 0; k < want->arrays[i].count; k++) {
            if (want->arrays[i].racy && want->arrays[i].racy[k])
                continue;
            RefValue g = ref_array_read(&got->arrays[i], k), w = ref_array_read(&want->arrays[i], k);
            if (bits ? same_bits(g, w, t) : ref_match(g, w, t, scale))
                continue;
            if (!bits && cuda && contraction_overflow(g, w, t))
                continue;
            differ++;
            char gs[96], ws[96];
            format_value(gs, sizeof gs, g, t);
            format_value(ws, sizeof ws, w, t);
            if (exact && int_slack > 0) {
                /* the first one, for the count's message below */
                if (differ == 1)
                    snprintf(first, sizeof first, "; %s[%lld] = %s, want %s", got->names[i],
                             (long long)k, gs, ws);
                continue;
            }
            if (bad++ < 2)
                mismatch(r, "%s: %s: %s[%lld] = %s, want %s", entry, what, got->names[i],
                         (long long)k, gs, ws);
        }
        if (exact && int_slack > 0 && differ > (int64_t)(int_slack * (double)want->arrays[i].count) + 1)
            mismatch(r, "%s: %s: %lld of %lld elements of %s differ%s", entry, what, (long long)differ,
                     (long long)want->arrays[i].count, got->names[i], first);
    }
}

/* ================================================================ directives */

typedef struct Directive {
    char kind[16], name[64];
    uint32_t grid[3], block[3];
    int64_t lens[MAX_PARAMS];
    int nlens;
    int64_t n, loop, core;
    int64_t off; /* a @vectorize's outputs start this many elements into their buffers */
} Directive;

static int read_directives(const char *text, Directive *out, int max)
{
    int count = 0;
    for (const char *p = strstr(text, "//! "); p && count < max; p = strstr(p + 1, "//! ")) {
        Directive *d = &out[count];
        memset(d, 0, sizeof *d);
        d->grid[1] = d->grid[2] = d->block[1] = d->block[2] = 1;
        const char *end = strchr(p, '\n');
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(end ? end - p : (long)strlen(p)), p + 4);
        char *save = NULL, *tok = strtok_r(line, " ", &save);
        if (!tok)
            continue;
        snprintf(d->kind, sizeof d->kind, "%s", tok);
        tok = strtok_r(NULL, " ", &save);
        if (!tok)
            continue;
        snprintf(d->name, sizeof d->name, "%s", tok);
        while ((tok = strtok_r(NULL, " ", &save))) {
            if (sscanf(tok, "grid=%u,%u", &d->grid[0], &d->grid[1]) >= 1 && tok[0] == 'g')
                continue;
            if (sscanf(tok, "block=%u,%u", &d->block[0], &d->block[1]) >= 1 && tok[0] == 'b')
                continue;
            if (strncmp(tok, "arrays=", 7) == 0) {
                char *q = tok + 7;
                while (*q && d->nlens < MAX_PARAMS) {
                    d->lens[d->nlens++] = strtoll(q, &q, 10);
                    if (*q == ',')
                        q++;
                }
                continue;
            }
            long long v;
            if (sscanf(tok, "n=%lld", &v) == 1)
                d->n = v;
            else if (sscanf(tok, "loop=%lld", &v) == 1)
                d->loop = v;
            else if (sscanf(tok, "core=%lld", &v) == 1)
                d->core = v;
            else if (sscanf(tok, "off=%lld", &v) == 1 && v >= 0 && v < 64)
                d->off = v;
        }
        count++;
    }
    return count;
}

/* ================================================================ arguments */

static RefArray new_array(KjTypeKind elem, int ndim, const int64_t *shape)
{
    RefArray probe = ref_array_make(NULL, elem, ndim, shape);
    void *data = kj_xcalloc((size_t)(probe.count ? probe.count : 1), (size_t)ref_elem_size(elem));
    return ref_array_make(data, elem, ndim, shape);
}

static kjit_arg scalar_arg(RefValue v, const KjType *t)
{
    kjit_arg a = {.kind = KJIT_ARG_SCALAR};
    kj_type_dtype(t, &a.dtype);
    if (kj_type_is_complex(t)) {
        a.value.c[0] = creal(v.c);
        a.value.c[1] = cimag(v.c);
    } else if (kj_type_is_float(t)) {
        a.value.f = v.f;
    } else if (t->kind != KJ_TYPE_BOOL && !kj_type_is_signed(t)) {
        a.value.u = v.u;
    } else {
        a.value.i = (int64_t)v.u;
    }
    return a;
}

/* The inputs of one entry: each parameter's scalar or array contents. */
typedef struct Inputs {
    int count;
    const KjType *types[MAX_PARAMS]; /* element types for arrays */
    bool is_array[MAX_PARAMS];
    RefValue scalars[MAX_PARAMS];
    RefArray arrays[MAX_PARAMS]; /* the initial contents */
    const char *names[MAX_PARAMS];
} Inputs;

static void inputs_free(Inputs *in)
{
    for (int i = 0; i < in->count; i++)
        if (in->is_array[i])
            free(in->arrays[i].data);
    in->count = 0;
}

static void fill(RefArray *a, const KjType *t)
{
    for (int64_t k = 0; k < a->count; k++)
        ref_array_write(a, k, draw_scalar(t));
}

/* ================================================================ entries */

typedef struct Run {
    const Directive *d;
    const KjIrEntry *entry;
    const KjIrFunction *fn; /* the variant that runs */
    Inputs in;
} Run;

/* A kernel in one mode (mode NULL: the evaluator). */
static void run_kernel(Run *run, Mode *mode, Outputs *out, RefStatus *st, bool *ref_ok)
{
    const Inputs *in = &run->in;
    out->count = 0;
    RefArray arrays[MAX_PARAMS];
    RefValue rargs[MAX_PARAMS];
    kjit_arg kargs[MAX_PARAMS];
    kjit_array views[MAX_PARAMS];
    for (int i = 0; i < in->count; i++) {
        if (!in->is_array[i]) {
            rargs[i] = in->scalars[i];
            kargs[i] = scalar_arg(in->scalars[i], run->fn->params[i]->type);
            continue;
        }
        arrays[i] = copy_array(&in->arrays[i]);
        if (!mode)
            arrays[i].racy = kj_xcalloc((size_t)(arrays[i].count + 1), sizeof(bool));
        rargs[i].array = &arrays[i];
        kjit_dtype dt;
        kj_type_dtype(in->types[i], &dt);
        views[i] = kjit_array_make(arrays[i].data, dt, 1, &arrays[i].count);
        kargs[i] = kjit_arg_array(&views[i]);
    }
    if (!mode) {
        *ref_ok = ref_launch(run->fn, rargs, run->d->grid, run->d->block, st);
    } else {
        kjit_function *kf;
        if (kjit_module_function(mode->module, run->d->name, &kf) != KJIT_OK ||
            kjit_launch(kf, run->d->grid, run->d->block, kargs, in->count, NULL) != KJIT_OK)
            snprintf(out->error, sizeof out->error, "%s", kjit_last_error(mode->context));
    }
    for (int i = 0; i < in->count; i++) {
        if (!in->is_array[i])
            continue;
        out->types[out->count] = in->types[i];
        out->names[out->count] = in->names[i];
        out->arrays[out->count++] = arrays[i];
    }
}

static void run_vectorize(Run *run, Mode *mode, Outputs *out, RefStatus *st, bool *ref_ok)
{
    const Inputs *in = &run->in;
    const KjIrFunction *fn = run->fn;
    int64_t n = run->d->n;
    /* a function of several outputs (-> (f64, i32)): one array each */
    int outputs = fn->output_count > 1 ? fn->output_count : 1;
    static const char *const names[KJ_MAX_VEC_OUTPUTS] = {"result", "result1", "result2", "result3",
                                                          "result4", "result5", "result6", "result7"};
    RefArray results[KJ_MAX_VEC_OUTPUTS];
    out->count = outputs;
    for (int j = 0; j < outputs; j++) {
        out->types[j] = j == 0 ? fn->ret : fn->outputs[j]->type;
        out->names[j] = names[j];
        results[j] = new_array(out->types[j]->kind, 1, &n);
    }
    if (!mode) {
        *ref_ok = true;
        for (int64_t k = 0; k < n && *ref_ok; k++) {
            RefValue args[MAX_PARAMS], r[KJ_MAX_VEC_OUTPUTS];
            for (int p = 0; p < in->count; p++)
                args[p] = ref_array_read(&in->arrays[p], k);
            RefStatus one = {.budget = 2000000};
            *ref_ok = ref_call_outputs(fn, args, r, &one);
            if (!*ref_ok)
                snprintf(st->error, sizeof st->error, "%s", one.error);
            st->magnitude = fmax(st->magnitude, one.magnitude);
            st->single_magnitude = fmax(st->single_magnitude, one.single_magnitude);
            for (int j = 0; j < outputs; j++)
                ref_array_write(&results[j], k, r[j]);
        }
    } else {
        kjit_arg args[MAX_PARAMS + KJ_MAX_VEC_OUTPUTS];
        kjit_array views[MAX_PARAMS], outs[KJ_MAX_VEC_OUTPUTS];
        for (int p = 0; p < in->count; p++) {
            kjit_dtype dt;
            kj_type_dtype(in->types[p], &dt);
            views[p] = kjit_array_make(in->arrays[p].data, dt, 1, &n);
            args[p] = kjit_arg_array(&views[p]);
        }
        /* off=K: each output K elements into a buffer (calloc's 16 bytes
         * into a line, plus K), so the cpu targets' cut of the range at an
         * output cache line (runtime/cpu.c) falls elsewhere */
        int64_t off = run->d->off;
        char *bufs[KJ_MAX_VEC_OUTPUTS];
        for (int j = 0; j < outputs; j++) {
            kjit_dtype rt;
            kj_type_dtype(out->types[j], &rt);
            size_t size = (size_t)ref_elem_size(out->types[j]->kind);
            bufs[j] = kj_xcalloc((size_t)(n + off + 1), size);
            outs[j] = kjit_array_make(bufs[j] + off * (int64_t)size, rt, 1, &n);
            args[in->count + j] = kjit_arg_array(&outs[j]);
        }
        kjit_function *kf;
        if (kjit_module_function(mode->module, run->d->name, &kf) != KJIT_OK ||
            (outputs > 1 ? kjit_call(kf, args, in->count + outputs, NULL, NULL)
                         : kjit_call(kf, args, in->count, &outs[0], NULL)) != KJIT_OK)
            snprintf(out->error, sizeof out->error, "%s", kjit_last_error(mode->context));
        for (int j = 0; j < outputs; j++) {
            size_t size = (size_t)ref_elem_size(out->types[j]->kind);
            memcpy(results[j].data, bufs[j] + off * (int64_t)size, (size_t)n * size);
            free(bufs[j]);
        }
    }
    for (int j = 0; j < outputs; j++)
        out->arrays[j] = results[j];
}

/* @guvectorize("(n),(n),()->(n)"): a, b of (loop, core), w of (loop), out. */
static void run_gufunc(Run *run, Mode *mode, Outputs *out, RefStatus *st, bool *ref_ok)
{
    const Inputs *in = &run->in;
    int64_t loop = run->d->loop, core = run->d->core;
    RefArray o = copy_array(&in->arrays[3]);
    out->count = 1;
    out->types[0] = in->types[3];
    out->names[0] = "out";
    if (!mode) {
        *ref_ok = true;
        for (int64_t l = 0; l < loop && *ref_ok; l++) {
            RefArray va = in->arrays[0], vb = in->arrays[1], vo = o;
            int esz = ref_elem_size(va.elem);
            va = ref_array_make((char *)in->arrays[0].data + l * core * esz, va.elem, 1, &core);
            vb = ref_array_make((char *)in->arrays[1].data + l * core * esz, vb.elem, 1, &core);
            vo = ref_array_make((char *)o.data + l * core * esz, vo.elem, 1, &core);
            RefValue args[4];
            args[0].array = &va;
            args[1].array = &vb;
            args[2] = ref_array_read(&in->arrays[2], l);
            args[3].array = &vo;
            RefStatus one = {.budget = 2000000};
            *ref_ok = ref_call(run->fn, args, NULL, &one);
            if (!*ref_ok)
                snprintf(st->error, sizeof st->error, "%s", one.error);
            st->magnitude = fmax(st->magnitude, one.magnitude);
            st->single_magnitude = fmax(st->single_magnitude, one.single_magnitude);
        }
    } else {
        kjit_arg args[4];
        kjit_array views[4];
        int64_t shape2[2] = {loop, core};
        for (int p = 0; p < 4; p++) {
            kjit_dtype dt;
            kj_type_dtype(in->types[p], &dt);
            void *data = p == 3 ? o.data : in->arrays[p].data;
            views[p] = p == 2 ? kjit_array_make(data, dt, 1, &loop) : kjit_array_make(data, dt, 2, shape2);
            args[p] = kjit_arg_array(&views[p]);
        }
        kjit_function *kf;
        if (kjit_module_function(mode->module, run->d->name, &kf) != KJIT_OK ||
            kjit_call(kf, args, 4, NULL, NULL) != KJIT_OK)
            snprintf(out->error, sizeof out->error, "%s", kjit_last_error(mode->context));
    }
    out->arrays[0] = o;
}

/* The documented order (docs/language.md, Reductions): blocks of 1024, 32
 * lanes each taking every 32nd element, a tree over the lanes, again over
 * the partials until one value is left. */
static bool ref_reduce(const KjIrFunction *fn, RefValue *vals, int64_t m, RefValue *result,
                       RefStatus *st)
{
    while (true) {
        int64_t parts = 0;
        for (int64_t start = 0; start < m; start += 1024) {
            RefValue lane[32];
            bool has[32] = {0};
            int64_t end = start + 1024 < m ? start + 1024 : m;
            for (int64_t j = start; j < end; j++) {
                int l = (int)((j - start) % 32);
                if (!has[l]) {
                    lane[l] = vals[j];
                    has[l] = true;
                } else {
                    RefValue args[2] = {lane[l], vals[j]};
                    RefStatus one = {.budget = 100000};
                    if (!ref_call(fn, args, &lane[l], &one)) {
                        snprintf(st->error, sizeof st->error, "%s", one.error);
                        return false;
                    }
                    st->magnitude = fmax(st->magnitude, one.magnitude);
                    st->single_magnitude = fmax(st->single_magnitude, one.single_magnitude);
                }
            }
            for (int s = 16; s > 0; s /= 2)
                for (int j = 0; j < s; j++) {
                    if (!has[j + s])
                        continue;
                    if (!has[j]) {
                        lane[j] = lane[j + s];
                        has[j] = true;
                        continue;
                    }
                    RefValue args[2] = {lane[j], lane[j + s]};
                    RefStatus one = {.budget = 100000};
                    if (!ref_call(fn, args, &lane[j], &one)) {
                        snprintf(st->error, sizeof st->error, "%s", one.error);
                        return false;
                    }
                    st->magnitude = fmax(st->magnitude, one.magnitude);
                    st->single_magnitude = fmax(st->single_magnitude, one.single_magnitude);
                }
            vals[parts++] = lane[0];
        }
        m = parts;
        if (m <= 1)
            break;
    }
    *result = vals[0];
    return true;
}

static void run_reduce(Run *run, Mode *mode, Outputs *out, RefStatus *st, bool *ref_ok)
{
    const Inputs *in = &run->in;
    int64_t one = 1;
    RefArray result = new_array(run->fn->ret->kind, 1, &one);
    out->count = 1;
    out->types[0] = run->fn->ret;
    out->names[0] = "result";
    if (!mode) {
        int64_t m = in->arrays[0].count;
        RefValue *vals = kj_xcalloc((size_t)m, sizeof *vals);
        for (int64_t k = 0; k < m; k++)
            vals[k] = ref_array_read(&in->arrays[0], k);
        RefValue r = {0};
        *ref_ok = ref_reduce(run->fn, vals, m, &r, st);
        ref_array_write(&result, 0, r);
        free(vals);
    } else {
        kjit_dtype dt;
        kj_type_dtype(in->types[0], &dt);
        kjit_array x = kjit_array_make(in->arrays[0].data, dt, 1, &in->arrays[0].count);
        kjit_arg arg = kjit_arg_array(&x);
        kjit_dtype rt;
        kj_type_dtype(run->fn->ret, &rt);
        kjit_array o = kjit_array_make(result.data, rt, 0, NULL);
        kjit_function *kf;
        if (kjit_module_function(mode->module, run->d->name, &kf) != KJIT_OK ||
            kjit_reduce(kf, &arg, 1, NULL, 0, NULL, &o, NULL) != KJIT_OK)
            snprintf(out->error, sizeof out->error, "%s", kjit_last_error(mode->context));
    }
    out->arrays[0] = result;
}

/* Draws the inputs of an entry; false when the directive does not fit it. */
/* --show-inputs: an entry's drawn scalars and the first elements of its arrays;
 * --save-inputs DIR also writes each array to DIR/ENTRY.PARAM.npy, so that
 * `kjit run` replays the entry on one target (docs/testing.md). */
static void print_inputs(const char *entry, const Inputs *in)
{
    for (int i = 0; i < in->count; i++) {
        char v[96];
        printf("  %s input %s:", entry, in->names[i]);
        if (!in->is_array[i]) {
            format_value(v, sizeof v, in->scalars[i], in->types[i]);
            printf(" %s\n", v);
            continue;
        }
        if (save_inputs_dir) {
            char path[1024], *error = NULL;
            kjit_dtype dt;
            kj_type_dtype(in->types[i], &dt);
            int64_t count = in->arrays[i].count;
            kjit_array a = kjit_array_make(in->arrays[i].data, dt, 1, &count);
            snprintf(path, sizeof path, "%s/%s.%s.npy", save_inputs_dir, entry, in->names[i]);
            if (kj_npy_write(path, &a, &error) != KJIT_OK)
                printf(" (not saved: %s)", error ? error : "?");
            else
                printf(" [%s]", path);
            free(error);
        }
        int64_t n = in->arrays[i].count;
        for (int64_t k = 0; k < n && k < 16; k++) {
            format_value(v, sizeof v, ref_array_read(&in->arrays[i], k), in->types[i]);
            printf(" %s", v);
        }
        printf(n > 16 ? " ... (%lld elements)\n" : "\n", (long long)n);
    }
}

static bool draw_inputs(Run *run, const char *first_line)
{
    const Directive *d = run->d;
    const KjIrFunction *fn = run->fn;
    Inputs *in = &run->in;
    memset(in, 0, sizeof *in);
    rng = fnv(d->name, strlen(d->name), fnv(first_line, strlen(first_line), 1469598103934665603ull));
    rng = rng ? rng : 1;
    in->count = fn->param_count;
    int arrays = 0;
    for (int i = 0; i < fn->param_count; i++) {
        const KjType *t = fn->params[i]->type;
        in->names[i] = fn->params[i]->name;
        bool is_array = t->kind == KJ_TYPE_ARRAY;
        const KjType *et = is_array ? t->elem : t;
        in->types[i] = et;
        if (strcmp(d->kind, "kernel") == 0) {
            if (!is_array) {
                in->scalars[i] = draw_scalar(t);
                continue;
            }
            if (arrays >= d->nlens)
                return false;
            int64_t n = d->lens[arrays++];
            in->is_array[i] = true;
            in->arrays[i] = new_array(et->kind, 1, &n);
        } else if (strcmp(d->kind, "vectorize") == 0) {
            in->is_array[i] = true;
            in->arrays[i] = new_array(et->kind, 1, &d->n);
        } else if (strcmp(d->kind, "guvectorize") == 0) {
            int64_t shape[2] = {d->loop, d->core};
            in->is_array[i] = true;
            in->arrays[i] = i == 2 ? new_array(et->kind, 1, &d->loop) : new_array(et->kind, 2, shape);
            in->arrays[i] = ref_array_make(in->arrays[i].data, et->kind, 1,
                                           (int64_t[1]){in->arrays[i].count});
        } else if (strcmp(d->kind, "reduce") == 0) {
            if (i == 0) {
                in->is_array[i] = true;
                in->arrays[i] = new_array(et->kind, 1, &d->n);
            } else {
                in->count = 1;
                break;
            }
        }
        if (in->is_array[i])
            fill(&in->arrays[i], et);
    }
    return true;
}

static bool uses_collectives(const KjIrModule *module, const KjIrFunction *fn, int depth);

static bool expr_has_exec(const KjIrModule *module, const KjIrExpr *e, int depth)
{
    if (!e)
        return false;
    if (e->op == KJ_IR_EXEC && e->exec != KJ_EXEC_LANEID) /* ref_eval models laneid() */
        return true;
    if (e->op == KJ_IR_CALL && e->callee && uses_collectives(module, e->callee, depth + 1))
        return true;
    for (int i = 0; i < e->arg_count; i++)
        if (expr_has_exec(module, e->args[i], depth))
            return true;
    return false;
}

static bool stmt_has_exec(const KjIrModule *module, const KjIrStmt *s, int depth)
{
    if (!s)
        return false;
    const KjIrExpr *exprs[6] = {s->value, s->array, s->cond, s->start, s->stop, s->step};
    for (int i = 0; i < 6; i++)
        if (expr_has_exec(module, exprs[i], depth))
            return true;
    for (int i = 0; i < s->index_count; i++)
        if (expr_has_exec(module, s->indices[i], depth))
            return true;
    for (int i = 0; i < s->stmts.count; i++)
        if (stmt_has_exec(module, s->stmts.items[i], depth))
            return true;
    return stmt_has_exec(module, s->then_stmt, depth) || stmt_has_exec(module, s->else_stmt, depth) ||
           stmt_has_exec(module, s->body, depth);
}

static bool uses_collectives(const KjIrModule *module, const KjIrFunction *fn, int depth)
{
    return depth < 8 && stmt_has_exec(module, fn->body, depth);
}

/* Whether e, or an expression in it, calls a math function that libmvec
 * computes (docs/language.md, "Accuracy of the math functions"): every math
 * built-in but the exact ones and lgamma/tgamma (libm everywhere); on complex
 * operands every one (they are made of exp, log, sin, cos, hypot ...). */
static bool expr_calls_libmvec(const KjIrExpr *e)
{
    if (!e)
        return false;
    if (e->op == KJ_IR_MATH) {
        if (e->arg_count && kj_type_is_complex(e->args[0]->type))
            return true;
        switch (e->math) {
        case KJ_MATH_SQRT: case KJ_MATH_FLOOR: case KJ_MATH_CEIL: case KJ_MATH_TRUNC:
        case KJ_MATH_ROUND: case KJ_MATH_FABS: case KJ_MATH_FMIN: case KJ_MATH_FMAX:
        case KJ_MATH_FMA: case KJ_MATH_COPYSIGN: case KJ_MATH_FMOD: case KJ_MATH_ISNAN:
        case KJ_MATH_ISINF: case KJ_MATH_ISFINITE: case KJ_MATH_LGAMMA: case KJ_MATH_TGAMMA:
            break;
        default:
            return true;
        }
    }
    for (int i = 0; i < e->arg_count; i++)
        if (expr_calls_libmvec(e->args[i]))
            return true;
    return false;
}

static bool stmt_calls_libmvec(const KjIrStmt *s)
{
    if (!s)
        return false;
    const KjIrExpr *exprs[6] = {s->value, s->array, s->cond, s->start, s->stop, s->step};
    for (int i = 0; i < 6; i++)
        if (expr_calls_libmvec(exprs[i]))
            return true;
    for (int i = 0; i < s->index_count; i++)
        if (expr_calls_libmvec(s->indices[i]))
            return true;
    for (int i = 0; i < s->stmts.count; i++)
        if (stmt_calls_libmvec(s->stmts.items[i]))
            return true;
    return stmt_calls_libmvec(s->then_stmt) || stmt_calls_libmvec(s->else_stmt) ||
           stmt_calls_libmvec(s->body);
}

/* The program calls a libmvec function somewhere (any of its functions). */
static bool module_calls_libmvec(const KjIrModule *module)
{
    for (int i = 0; i < module->functions.count; i++) {
        const KjIrFunction *fn = module->functions.items[i];
        if (stmt_calls_libmvec(fn->body))
            return true;
    }
    return false;
}

/* ================================================================ files */

typedef struct Totals {
    int files, ok, mismatched, invalid, entries, runs, ref_skipped;
} Totals;

static Totals totals;

/* Kernels with barriers: how many barrier_split.c splits (their barriers
 * then run as loops over the threads, on SIMD lanes), and why it leaves the
 * others on fibers. */
enum { MAX_WHY = 16 };
static struct {
    int split, fibers;
    const char *why[MAX_WHY];
    int count[MAX_WHY];
} splits;

static void note_split(KjIrModule *module, KjIrFunction *fn)
{
    if (fn->kind != KJ_IR_FN_KERNEL || !fn->uses_syncthreads)
        return;
    const char *why = NULL;
    if (fn->split || kj_barrier_split(module, fn, &why)) {
        splits.split++;
        return;
    }
    splits.fibers++;
    for (int i = 0; i < MAX_WHY; i++) {
        if (!splits.why[i])
            splits.why[i] = why ? why : "?";
        if (strcmp(splits.why[i], why ? why : "?") == 0) {
            splits.count[i]++;
            return;
        }
    }
}

static void collect_diag(void *user, KjSeverity severity, const char *text)
{
    (void)severity;
    kj_buf_printf(user, "%s", text);
}

/* The digests of one file's runs: "entry mode hash" lines, for the children. */
static KjBuf digests;

static void check_file(const char *path)
{
    totals.files++;
    Report rep = {0};
    KjArena arena = {0};
    KjBuf messages = {0};
    KjDiag diag = {.sink = collect_diag, .user = &messages};
    const char *dirs[2] = {kj_default_stdlib_dir(), NULL};
    KjSource *src = kj_source_read(&arena, path, &diag);
    KjIrModule *module = src ? kj_compile_source(&arena, src, dirs, &diag) : NULL;
    Directive ds[MAX_ENTRIES];
    int nd = 0;
    char first_line[256] = "";
    if (!module) {
        snprintf(rep.invalid, sizeof rep.invalid, "does not compile: %.400s",
                 messages.data ? messages.data : "");
        goto done;
    }
    sscanf(src->text, "%255[^\n]", first_line);
    nd = read_directives(src->text, ds, MAX_ENTRIES);
    if (!digest_only && module_calls_libmvec(module))
        kj_buf_printf(&digests, "libm\n"); /* run_child reads it */
    for (int m = 0; m < mode_count; m++) {
        modes[m].module = NULL;
        if (kjit_compile_file(modes[m].context, path, &modes[m].module) != KJIT_OK)
            mismatch(&rep, "%s: kjit_compile_file: %s", modes[m].name,
                     kjit_last_error(modes[m].context));
    }
    for (int k = 0; k < nd && !rep.invalid[0]; k++) {
        Run run = {.d = &ds[k]};
        for (int i = 0; i < module->entries.count; i++) {
            KjIrEntry *e = module->entries.items[i];
            if (strcmp(e->name, ds[k].name) == 0)
                run.entry = e;
        }
        if (!run.entry) {
            continue; /* a reduction may remove an entry */
        }
        run.fn = run.entry->variants.items[0];
        if (!draw_inputs(&run, first_line)) {
            snprintf(rep.invalid, sizeof rep.invalid, "%s: the directive does not fit", ds[k].name);
            inputs_free(&run.in);
            break;
        }
        totals.entries++;
        if (show_inputs)
            print_inputs(ds[k].name, &run.in);
        void (*runner)(Run *, Mode *, Outputs *, RefStatus *, bool *) =
            strcmp(ds[k].kind, "kernel") == 0        ? run_kernel
            : strcmp(ds[k].kind, "vectorize") == 0   ? run_vectorize
            : strcmp(ds[k].kind, "guvectorize") == 0 ? run_gufunc
                                                     : run_reduce;
        /* the reference */
        Outputs want = {0};
        RefStatus st = {.budget = 20000000};
        bool ref_ok = false, have_ref = !digest_only;
        if (have_ref && run.entry->kind == KJ_FN_KERNEL && uses_collectives(module, run.fn, 0))
            have_ref = false, totals.ref_skipped++;
        if (have_ref) {
            runner(&run, NULL, &want, &st, &ref_ok);
            if (!ref_ok) {
                snprintf(rep.invalid, sizeof rep.invalid, "%s: the evaluator stopped: %s", ds[k].name,
                         st.error);
            } else {
                for (int i = 0; i < want.count; i++)
                    for (int64_t j = 0; want.arrays[i].racy && j < want.arrays[i].count; j++)
                        if (want.arrays[i].racy[j] && !rep.invalid[0])
                            snprintf(rep.invalid, sizeof rep.invalid, "%s: a race on %s[%lld]",
                                     ds[k].name, want.names[i], (long long)j);
            }
        }
        Outputs base = {0};
        bool have_base = false;
        for (int m = 0; m < mode_count && !rep.invalid[0]; m++) {
            if (!modes[m].module)
                continue;
            Outputs got = {0};
            RefStatus unused = {0};
            bool unused_ok;
            runner(&run, &modes[m], &got, &unused, &unused_ok);
            totals.runs++;
            if (inject_fault && strcmp(inject_fault, modes[m].name) == 0 && got.count &&
                got.arrays[0].count)
                ((unsigned char *)got.arrays[0].data)[0] ^= 1;
            if (digest_only)
                kj_buf_printf(&digests, "%s %s %016llx %016llx\n", ds[k].name, modes[m].name,
                              (unsigned long long)outputs_hash(&got, false),
                              (unsigned long long)outputs_hash(&got, true));
            char what[160];
            if (have_ref && ref_ok && (m == 0 || modes[m].cuda)) {
                snprintf(what, sizeof what, "%.31s against ref_eval", modes[m].name);
                Scale sc = {st.magnitude, st.single_magnitude};
                compare(&rep, ds[k].name, what, &got, &want, false, sc,
                        modes[m].cuda && st.magnitude > 0 ? CUDA_INT_SLACK : 0, modes[m].cuda);
            }
            if (!modes[m].cuda) {
                if (!have_base) {
                    base = got;
                    have_base = true;
                    if (!digest_only)
                        kj_buf_printf(&digests, "%s %s %016llx %016llx\n", ds[k].name, "base",
                                      (unsigned long long)outputs_hash(&got, false),
                                      (unsigned long long)outputs_hash(&got, true));
                    continue;
                }
                snprintf(what, sizeof what, "%.31s against %.31s", modes[m].name, modes[0].name);
                compare(&rep, ds[k].name, what, &got, &base, true, (Scale){0, 0}, 0, false);
            }
            outputs_free(&got);
        }
        outputs_free(&base);
        outputs_free(&want);
        inputs_free(&run.in);
        if (run.entry->kind == KJ_FN_KERNEL) /* after the evaluator's run: it adds fn->split */
            note_split(module, run.entry->variants.items[0]);
    }
done:
    for (int m = 0; m < mode_count; m++) {
        kjit_module_free(modes[m].module);
        modes[m].module = NULL;
    }
    if (rep.mismatches) {
        totals.mismatched++;
        printf("mismatch %s: %d mismatches\n%s", path, rep.mismatches, rep.text.data);
        if (rep.mismatches > 12)
            printf("  ... and %d more\n", rep.mismatches - 12);
    } else if (rep.invalid[0]) {
        totals.invalid++;
        printf("invalid %s: %s\n", path, rep.invalid);
    } else {
        totals.ok++;
        if (verbose)
            printf("ok %s\n", path);
    }
    fflush(stdout);
    kj_buf_free(&rep.text);
    kj_buf_free(&messages);
    kj_arena_free(&arena);
}

/* ================================================================ children */

/* Runs this program again under KJIT_CPU_FEATURES=features with --digest
 * over the files, and compares each digest with the parent's "base" one. */
/* The "ENTRY base HASH INTS_HASH" line of digests (the parent's run). */
static bool find_base(const char *digests, const char *entry, unsigned long long *hash,
                      unsigned long long *ints_hash)
{
    for (const char *line = digests; line && *line;) {
        char name[64], mode[32];
        if (sscanf(line, "%63s %31s %llx %llx", name, mode, hash, ints_hash) == 4 &&
            strcmp(name, entry) == 0 && strcmp(mode, "base") == 0)
            return true;
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    return false;
}

/* Float differences between the ISA children accepted in libm programs. */
static int libm_accepted;

static int run_child(const char *self, const char *label, const char *features, int nfiles,
                     char **files, const char *child_modes, char **base_digests)
{
    /* --inject-fault LABEL:MODE goes to this child as --inject-fault MODE */
    size_t label_len = strlen(label);
    const char *child_fault = inject_fault && strncmp(inject_fault, label, label_len) == 0 &&
                                      inject_fault[label_len] == ':'
                                  ? inject_fault + label_len + 1
                                  : NULL;
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        setenv("KJIT_CPU_FEATURES", features, 1);
        char **argv = calloc((size_t)nfiles + 8, sizeof *argv);
        int a = 0;
        argv[a++] = (char *)self;
        argv[a++] = "--digest";
        argv[a++] = "--modes";
        argv[a++] = (char *)child_modes;
        if (child_fault) {
            argv[a++] = "--inject-fault";
            argv[a++] = (char *)child_fault;
        }
        for (int i = 0; i < nfiles; i++)
            argv[a++] = files[i];
        execv(self, argv);
        _exit(127);
    }
    close(fds[1]);
    FILE *in = fdopen(fds[0], "r");
    char line[1024];
    int file = -1, bad = 0;
    while (fgets(line, sizeof line, in)) {
        if (strncmp(line, "file ", 5) == 0) {
            file++;
            continue;
        }
        char entry[64], mode[32];
        unsigned long long hash, ints_hash;
        if (sscanf(line, "%63s %31s %llx %llx", entry, mode, &hash, &ints_hash) != 4 || file < 0 ||
            file >= nfiles)
            continue;
        /* the parent's base digest of this entry */
        const char *digests = base_digests[file];
        unsigned long long base, base_ints;
        if (!find_base(digests, entry, &base, &base_ints))
            continue;
        bool libm = strncmp(digests, "libm\n", 5) == 0;
        if (base != hash && libm && base_ints == ints_hash) {
            libm_accepted++;
            if (verbose)
                printf("note %s: %s:%s (KJIT_CPU_FEATURES=%s) differs from cpu in the float outputs "
                       "of %s, a program with libm calls: accepted\n", files[file], label, mode,
                       features, entry);
        } else if (base != hash) {
            bad++;
            printf("mismatch %s: %s:%s (KJIT_CPU_FEATURES=%s) differs from cpu: %s%s\n", files[file],
                   label, mode, features, entry,
                   libm ? " (a program with libm calls, in its integer or bool outputs)" : "");
        }
    }
    fclose(in);
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 2)) {
        printf("mismatch (child %s): exited with status %d (signal %d)\n", label,
               WIFEXITED(status) ? WEXITSTATUS(status) : -1,
               WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        bad++;
    }
    return bad;
}

int main(int argc, char **argv)
{
    const char *mode_list = "cpu,cpu-nospec,cpu-scalar,cpu+check,par,par-nospec,par-scalar,cuda";
    const char *child_modes = "cpu,cpu-nospec,par,cpu+check";
    bool children = true;
    int first = 1;
    for (; first < argc && argv[first][0] == '-'; first++) {
        if (strcmp(argv[first], "--modes") == 0 && first + 1 < argc)
            mode_list = argv[++first];
        else if (strcmp(argv[first], "--child-modes") == 0 && first + 1 < argc)
            child_modes = argv[++first];
        else if (strcmp(argv[first], "--no-children") == 0)
            children = false;
        else if (strcmp(argv[first], "--digest") == 0)
            digest_only = true, children = false;
        else if (strcmp(argv[first], "--inject-fault") == 0 && first + 1 < argc)
            inject_fault = argv[++first];
        else if (strcmp(argv[first], "-v") == 0)
            verbose = true;
        else if (strcmp(argv[first], "--show-inputs") == 0)
            show_inputs = verbose = true;
        else if (strcmp(argv[first], "--save-inputs") == 0 && first + 1 < argc) {
            save_inputs_dir = argv[++first];
            show_inputs = verbose = true;
        } else {
            fprintf(stderr, "usage: genprog-run [--modes LIST] [--child-modes LIST] [--no-children] "
                            "[--digest] [--inject-fault MODE] [-v] [--show-inputs] [--save-inputs DIR] FILE.kern ...\n");
            return 64;
        }
    }
    char list[512];
    snprintf(list, sizeof list, "%s", mode_list);
    for (char *save = NULL, *m = strtok_r(list, ",", &save); m; m = strtok_r(NULL, ",", &save))
        if (!add_mode(m))
            return 64;
    if (mode_count == 0) {
        fprintf(stderr, "genprog-run: no mode to run\n");
        return 64;
    }
    int nfiles = argc - first;
    char **base = kj_xcalloc((size_t)nfiles + 1, sizeof *base);
    for (int i = 0; i < nfiles; i++) {
        digests.len = 0;
        if (digests.data)
            digests.data[0] = '\0';
        if (digest_only)
            printf("file %s\n", argv[first + i]);
        check_file(argv[first + i]);
        if (digest_only)
            printf("%s", digests.data ? digests.data : "");
        base[i] = kj_xstrdup(digests.data ? digests.data : "");
    }
    int child_bad = 0;
    const char *children_run = "none";
#if defined(__x86_64__)
    if (children && nfiles) {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0) {
            self[n] = '\0';
            child_bad += run_child(self, "sse", "-avx", nfiles, argv + first, child_modes, base);
            children_run = "sse";
            __builtin_cpu_init();
            if (__builtin_cpu_supports("avx512f")) {
                child_bad += run_child(self, "avx2", "-avx512f", nfiles, argv + first, child_modes, base);
                children_run = "sse, avx2";
            }
        }
    }
#endif
    for (int m = 0; m < mode_count; m++)
        kjit_context_destroy(modes[m].context);
    if (!digest_only) {
        printf("genprog-run: %d files: %d ok, %d mismatched, %d invalid; %d entries, %d runs in %d "
               "modes (", totals.files, totals.ok, totals.mismatched, totals.invalid,
               totals.entries, totals.runs, mode_count);
        for (int m = 0; m < mode_count; m++)
            printf("%s%s", m ? "," : "", modes[m].name);
        printf("; children: %s, %d mismatches, %d float differences of libm programs accepted; "
               "%d kernels with warp collectives not evaluated); tolerance against ref_eval: %s\n",
               children_run, child_bad, libm_accepted, totals.ref_skipped, TOLERANCE);
    }
    if (!digest_only) {
        printf("genprog-run: kernels with barriers: %d split, %d on fibers", splits.split,
               splits.fibers);
        for (int i = 0; i < MAX_WHY && splits.why[i]; i++)
            printf("%s%d: %s", i ? "; " : " (", splits.count[i], splits.why[i]);
        printf("%s\n", splits.fibers ? ")" : "");
    }
    return totals.mismatched || child_bad ? 1 : totals.invalid ? 2 : 0;
}
