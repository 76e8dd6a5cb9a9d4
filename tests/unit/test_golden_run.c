/*
 * test_golden_run.c: every golden program and every example, run on every
 * target and compared with the reference evaluator (ref_eval.c).
 *
 * For each .kern file under tests/golden/types, tests/golden/syntax and
 * examples/ (files with an .err expectation do not compile and are skipped),
 * the file is checked once into IR for the evaluator and compiled through the
 * public API on cpu, parallel and, when kjit_cuda_available() says a GPU is
 * usable, cuda (parallel and cuda with kjit_options.line_info, cpu without).  Then each function of the file (and of what it imports, each
 * once) runs on fresh random inputs:
 *   - plain functions: PLAIN_SAMPLES calls with random scalars (and random
 *     arrays for array parameters); the return value and every array argument
 *     after the call are compared; a device function (one that uses kernel
 *     built-ins) must be refused by kjit_call, naming the built-in;
 *   - @vectorize signatures: arrays of VEC_COUNT elements, then the first
 *     input as a broadcast scalar; every element is compared, and the
 *     evaluator also runs the vectorize pass's own kernel (PARFOR) over the
 *     same inputs, which must give the very same bits as element by element;
 *   - kernels: random arrays of the parameter types on a grid that covers
 *     them (1-D: 1000 elements, grid 4 x block 256; 2-D: 32 x 48, grid 3 x 2 of
 *     16 x 16 blocks; a few kernels need a launch of their own, listed in
 *     launch_overrides); every array is compared after the launch, except
 *     elements that two threads stored different values into (a race).
 * Inputs the evaluator cannot give a meaningful answer for (an index outside
 * its array, a loop past the step budget, a NaN result) are drawn again.
 *
 * Tolerance (TOLERANCE below): integers and bools exactly; f64 within 1e-12
 * relative, 8 ULP, or 1e-12 times the largest |value| any expression of the
 * evaluation produced (the absolute floor for results that cancel to near
 * zero); f32 (computed by the reference in double), and f64 results that
 * f32 arithmetic fed, within 1e-5 relative, 8 f32 ULP, or 1e-5 times that
 * magnitude; complex numbers part by part; f16 and bf16 within one step of
 * the type at the result or at that magnitude (cuda fuses a 16-bit multiply
 * and add into one fma, as it contracts f32's).
 *
 * The seed comes from the clock unless KJIT_GOLDEN_SEED is set; every failure
 * names it with the file, function, target, inputs and both results.
 * KJIT_GOLDEN_VERBOSE=1 lists each function as it is checked.
 */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fixture.h"
#include "kjit_runtime.h"
#include "ref_eval.h"

#define TOLERANCE                                                                              \
    "ints and bools exactly; f64 within 1e-12 relative, 8 ULP or 1e-12 x the largest |value| " \
    "of the evaluation; f32, and f64 computed through f32 arithmetic, within 1e-5 relative, "   \
    "8 f32 ULP or 1e-5 x that magnitude"

enum {
    PLAIN_SAMPLES = 64,  /* calls per plain function */
    KERNEL_SAMPLES = 2,  /* launches per kernel */
    VEC_COUNT = 1000,    /* elements per vectorized call */
    DRAWS = 40,          /* tries to find inputs the reference can evaluate */
    MAX_PARAMS = 16,
    MAX_REPORTED = 3,    /* mismatching elements described per array */
};

/* The share of integer elements of a kernel's arrays that may differ on cuda
 * when the kernel computes with floats (see check_kernel). */
static const double CUDA_INT_SLACK = 0.01;

/* ================================================================ random inputs */

static uint64_t seed, rng;

static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* x rounded to f32.  Through a volatile: GCC 12.2 at -O2 drops the rounding
 * when its SLP vectorizer pairs two (double)(float) round trips. */
static double to_single(double x)
{
    volatile float rounded = (float)x;
    return rounded;
}

static double uniform(double lo, double hi)
{
    return lo + (hi - lo) * ((double)(next_random() >> 11) / 9007199254740992.0);
}

static int64_t int_between(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(next_random() % (uint64_t)(hi - lo + 1));
}

/* Mostly moderate values of both signs, some tiny or large ones and some
 * small integers (to reach the branches that compare with them); kept where
 * exp, pow and powers stay finite in f32 most of the time. */
static double draw_real(void)
{
    int kind = (int)(next_random() % 20);
    if (kind < 10)
        return uniform(-4, 4);
    if (kind < 15)
        return (next_random() & 1 ? -1 : 1) * exp(uniform(log(1e-3), log(100)));
    if (kind < 18)
        return (double)int_between(-5, 5);
    return uniform(-60, 60);
}

/* Small integers of both signs mostly (loop bounds and indices stay sane),
 * some larger, and some anywhere in the type's range (wrapping, shifts). */
static RefValue draw_scalar(const KjType *t)
{
    RefValue v = {0};
    if (t->kind == KJ_TYPE_BOOL) {
        v.u = next_random() & 1;
        return v;
    }
    if (kj_type_is_int(t)) {
        int kind = (int)(next_random() % 20);
        bool sgn = kj_type_is_signed(t);
        int bits = kj_type_int_bits(t);
        /* the edges of integer arithmetic: 0, +-1, MIN, MAX */
        uint64_t min = sgn ? (uint64_t)1 << (bits - 1) : 0;
        uint64_t special[5] = {0, 1, (uint64_t)-1, min, min - 1};
        uint64_t raw = kind < 11   ? (uint64_t)(sgn ? int_between(-40, 40) : int_between(0, 80))
                       : kind < 15 ? (uint64_t)(sgn ? int_between(-200, 200) : int_between(0, 400))
                       : kind < 18 ? special[next_random() % 5]
                                   : next_random();
        return ref_convert((RefValue){.u = raw}, kj_type_scalar(KJ_TYPE_I64), t);
    }
    if (kj_type_is_float(t)) {
        v.f = t->kind == KJ_TYPE_F32 ? to_single(draw_real()) : draw_real();
        if (kj_type_is_half(t))
            v.f = kj_half_round(t->kind, v.f);
        return v;
    }
    double re = draw_real(), im = draw_real();
    if (t->kind == KJ_TYPE_C64) {
        re = to_single(re);
        im = to_single(im);
    }
    v.c = CMPLX(re, im);
    return v;
}

/* ================================================================ values */

static bool is_nan_value(RefValue v, const KjType *t)
{
    if (kj_type_is_float(t))
        return isnan(v.f);
    if (kj_type_is_complex(t))
        return isnan(creal(v.c)) || isnan(cimag(v.c));
    return false;
}

static void format_value(char *buf, size_t size, RefValue v, const KjType *t)
{
    if (kj_type_is_complex(t))
        snprintf(buf, size, "(%.17g, %.17g)", creal(v.c), cimag(v.c));
    else if (kj_type_is_float(t))
        snprintf(buf, size, "%.17g", v.f);
    else if (t->kind == KJ_TYPE_BOOL)
        snprintf(buf, size, "%s", v.u ? "true" : "false");
    else if (kj_type_is_signed(t))
        snprintf(buf, size, "%lld", (long long)v.u);
    else
        snprintf(buf, size, "%llu", (unsigned long long)v.u);
}

/* How large the values of one evaluation ran (RefStatus): the absolute floor
 * of the tolerance, for results that cancel to near zero. */
typedef struct Scale {
    double magnitude;        /* any float value */
    double single_magnitude; /* f32 arithmetic; nonzero: f32 errors reach the result */
} Scale;

static Scale scale_of(const RefStatus *st)
{
    return (Scale){st->magnitude, st->single_magnitude};
}

static bool float_close(double got, double want, bool single, Scale scale)
{
    if (single)
        want = to_single(want); /* the reference's double rounded as an f32 result is */
    if (isnan(got) || isnan(want))
        return isnan(got) && isnan(want);
    if (got == want)
        return true;
    if (isinf(got) || isinf(want))
        return false;
    /* an f64 result computed through f32 arithmetic is only as good as f32 */
    double rel = single || scale.single_magnitude > 0 ? 1e-5 : 1e-12;
    double ulp = want == 0 ? 0 : ldexp(1.0, ilogb(want) - (single ? 23 : 52));
    double tol = fmax(fmax(rel * fabs(want), 8 * ulp), rel * scale.magnitude);
    return fabs(got - want) <= tol;
}

static bool values_match(RefValue got, RefValue want, const KjType *t, Scale scale)
{
    if (kj_type_is_complex(t)) {
        bool single = t->kind == KJ_TYPE_C64;
        return float_close(creal(got.c), creal(want.c), single, scale) &&
               float_close(cimag(got.c), cimag(want.c), single, scale);
    }
    if (kj_type_is_half(t)) {
        /* + - * / round the same in both; what f32 arithmetic or an f32 math
         * function fed may land one step of the type away */
        if (isnan(got.f) || isnan(want.f))
            return isnan(got.f) && isnan(want.f);
        if (got.f == want.f)
            return true;
        int bits = t->kind == KJ_TYPE_F16 ? 10 : 7;
        double step = ldexp(1.0, ilogb(want.f == 0 ? 1e-30 : want.f) - bits);
        /* cuda may fuse a 16-bit multiply and add into one fma (rounded once,
         * as the f32 rule's contraction): a result that cancels is then as
         * good as one step of the type at the largest value that fed it */
        double fed = scale.magnitude > 0 ? ldexp(1.0, ilogb(scale.magnitude) - bits) : 0;
        return !isinf(got.f) && !isinf(want.f) &&
               fabs(got.f - want.f) <= fmax(fmax(step, fed), 1e-5 * scale.magnitude);
    }
    if (kj_type_is_float(t))
        return float_close(got.f, want.f, t->kind == KJ_TYPE_F32, scale);
    return got.u == want.u;
}

/* ================================================================ report */

typedef struct Report {
    KjBuf failures;
    int failure_count;
    KjBuf not_run;
    int not_run_count;
    int functions;  /* functions (signatures of @vectorize) compared */
    int runs;       /* function x target x sample runs compared */
    KjBuf checked;  /* "  file: f, g [sig], k\n" */
    bool verbose;
} Report;

static void checked_name(Report *rep, const char *name)
{
    rep->functions++;
    bool first = rep->checked.data[rep->checked.len - 1] == ' '; /* after "file: " */
    kj_buf_printf(&rep->checked, "%s%s", first ? "" : ", ", name);
}

static void failure(Report *rep, const char *fmt, ...)
{
    rep->failure_count++;
    if (rep->failure_count > 400)
        return; /* the count says how many more */
    va_list ap;
    va_start(ap, fmt);
    kj_buf_vprintf(&rep->failures, fmt, ap);
    va_end(ap);
    kj_buf_printf(&rep->failures, " [seed %llu; tolerance: %s]\n", (unsigned long long)seed,
                  TOLERANCE);
}

static void not_run(Report *rep, const char *file, const char *name, const char *why)
{
    rep->not_run_count++;
    kj_buf_printf(&rep->not_run, "  not run: %s: %s: %s\n", file, name, why);
}

static void discard_line(void *user, const char *line, size_t len)
{
    (void)user, (void)line, (void)len;
}

/* ================================================================ targets */

typedef struct Target {
    kjit_target kind;
    kjit_context *context;
    kjit_module *module;
} Target;

static int open_targets(Target *targets, char *cuda_note, size_t note_size)
{
    kjit_target kinds[3] = {KJIT_TARGET_CPU, KJIT_TARGET_PARALLEL, KJIT_TARGET_CUDA};
    int count = 2;
    char reason[256] = "";
    if (kjit_cuda_available(reason, sizeof reason) == KJIT_OK) {
        count = 3;
        snprintf(cuda_note, note_size, "cuda included");
    } else {
        snprintf(cuda_note, note_size, "cuda not run: %s", reason);
    }
    for (int i = 0; i < count; i++) {
        kjit_options options;
        kjit_options_init(&options);
        options.target = kinds[i];
        /* parallel and cuda code carries line tables: they must change no result */
        options.line_info = kinds[i] != KJIT_TARGET_CPU;
        options.on_print = discard_line; /* print's text is the .out goldens' business */
        targets[i].kind = kinds[i];
        targets[i].module = NULL;
        ck_assert_msg(kjit_context_create(&options, &targets[i].context) == KJIT_OK, "%s: %s",
                      kjit_target_name(kinds[i]), kjit_last_error(NULL));
    }
    return count;
}

/* ================================================================ arrays */

/* The shape an array parameter of rank ndim gets by default. */
static void default_shape(int ndim, int64_t *shape)
{
    static const int64_t two_d[2] = {32, 48}, three_d[3] = {6, 7, 8};
    for (int k = 0; k < ndim; k++)
        shape[k] = ndim == 1 ? 1000 : ndim == 2 ? two_d[k] : ndim == 3 ? three_d[k] : 2;
}

/* One argument list: scalars, and arrays as their drawn contents (`initial`)
 * and the reference's copy (`ref`), which the evaluator changes. */
typedef struct Args {
    int count;
    const KjType *types[MAX_PARAMS];
    RefValue values[MAX_PARAMS];   /* scalars; arrays point at ref[i] */
    RefArray initial[MAX_PARAMS];
    RefArray ref[MAX_PARAMS];
} Args;

static void args_free(Args *a)
{
    for (int i = 0; i < a->count; i++) {
        if (a->types[i]->kind != KJ_TYPE_ARRAY)
            continue;
        free(a->initial[i].data);
        free(a->ref[i].data);
        free(a->ref[i].racy);
    }
    a->count = 0;
}

static RefArray new_array(KjTypeKind elem, int ndim, const int64_t *shape)
{
    RefArray probe = ref_array_make(NULL, elem, ndim, shape);
    void *data = kj_xcalloc((size_t)probe.count, (size_t)ref_elem_size(elem));
    return ref_array_make(data, elem, ndim, shape);
}

static void copy_contents(RefArray *to, const RefArray *from)
{
    memcpy(to->data, from->data, (size_t)from->count * (size_t)ref_elem_size(from->elem));
}

/* Draws every argument of fn; shapes[i] (rank entries) gives array i's shape,
 * or NULL for the defaults. */
static void args_draw(Args *a, const KjIrFunction *fn, int64_t (*shapes)[KJ_MAX_DIMS], bool races)
{
    a->count = fn->param_count;
    for (int i = 0; i < fn->param_count; i++) {
        const KjType *t = fn->params[i]->type;
        a->types[i] = t;
        if (t->kind != KJ_TYPE_ARRAY) {
            a->values[i] = draw_scalar(t);
            continue;
        }
        int64_t shape[KJ_MAX_DIMS];
        if (shapes && shapes[i][0] > 0)
            memcpy(shape, shapes[i], sizeof shape);
        else
            default_shape(t->ndim, shape);
        a->initial[i] = new_array(t->elem->kind, t->ndim, shape);
        for (int64_t k = 0; k < a->initial[i].count; k++)
            ref_array_write(&a->initial[i], k, draw_scalar(t->elem));
        a->ref[i] = new_array(t->elem->kind, t->ndim, shape);
        copy_contents(&a->ref[i], &a->initial[i]);
        if (races)
            a->ref[i].racy = kj_xcalloc((size_t)a->ref[i].count, sizeof(bool));
        a->values[i].array = &a->ref[i];
    }
}

static void describe_args(char *buf, size_t size, const KjIrFunction *fn, const Args *a)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < a->count && len < size; i++) {
        char v[96];
        if (a->types[i]->kind == KJ_TYPE_ARRAY) {
            char dims[64] = "";
            size_t dl = 0;
            for (int k = 0; k < a->initial[i].ndim; k++)
                dl += (size_t)snprintf(dims + dl, sizeof dims - dl, "%s%lld", k ? "x" : "",
                                       (long long)a->initial[i].shape[k]);
            snprintf(v, sizeof v, "random %s %s", kj_type_name(a->types[i]), dims);
        } else {
            format_value(v, sizeof v, a->values[i], a->types[i]);
        }
        len += (size_t)snprintf(buf + len, size - len, "%s%s=%s", i ? ", " : "",
                                fn->params[i]->name, v);
    }
}

/* The target's kjit_args for a; arrays are fresh copies of the initial
 * contents, kept in views[] (caller frees views[i].data). */
static void make_kjit_args(const Args *a, kjit_arg *out, kjit_array *views)
{
    for (int i = 0; i < a->count; i++) {
        const KjType *t = a->types[i];
        if (t->kind == KJ_TYPE_ARRAY) {
            kjit_dtype dt;
            kj_type_dtype(t->elem, &dt);
            RefArray copy = new_array(t->elem->kind, t->ndim, a->initial[i].shape);
            copy_contents(&copy, &a->initial[i]);
            views[i] = kjit_array_make(copy.data, dt, t->ndim, a->initial[i].shape);
            out[i] = kjit_arg_array(&views[i]);
            continue;
        }
        views[i].data = NULL;
        kjit_arg arg = {.kind = KJIT_ARG_SCALAR};
        kj_type_dtype(t, &arg.dtype);
        if (kj_type_is_complex(t)) {
            arg.value.c[0] = creal(a->values[i].c);
            arg.value.c[1] = cimag(a->values[i].c);
        } else if (kj_type_is_float(t)) {
            arg.value.f = a->values[i].f;
        } else if (t->kind != KJ_TYPE_BOOL && !kj_type_is_signed(t)) {
            arg.value.u = a->values[i].u;
        } else {
            arg.value.i = (int64_t)a->values[i].u;
        }
        out[i] = arg;
    }
}

static void free_views(const Args *a, kjit_array *views)
{
    for (int i = 0; i < a->count; i++)
        if (a->types[i]->kind == KJ_TYPE_ARRAY)
            free(views[i].data);
}

/* Compares every array argument the target changed with the reference's.
 * int_slack: the share of integer elements allowed to differ (see
 * check_kernel).  Returns the number of mismatching elements. */
static int compare_arrays(Report *rep, const char *where, const KjIrFunction *fn, const Args *a,
                          const kjit_array *views, Scale scale, double int_slack, int *racy_skipped)
{
    int bad_total = 0;
    for (int i = 0; i < a->count; i++) {
        if (a->types[i]->kind != KJ_TYPE_ARRAY)
            continue;
        const RefArray *want = &a->ref[i];
        RefArray got = *want;
        got.data = views[i].data;
        const KjType *et = a->types[i]->elem;
        int bad = 0;
        bool exact = !kj_type_is_float(et) && !kj_type_is_complex(et);
        if (exact && int_slack > 0) {
            int64_t differ = 0;
            for (int64_t k = 0; k < want->count; k++)
                differ += !(want->racy && want->racy[k]) &&
                          !values_match(ref_array_read(&got, k), ref_array_read(want, k), et, scale);
            if (differ <= (int64_t)(int_slack * (double)want->count)) {
                if (differ)
                    printf("  note: %s: %lld of %lld elements of %s differ (allowed on this "
                           "target)\n", where, (long long)differ, (long long)want->count,
                           fn->params[i]->name);
                continue;
            }
        }
        for (int64_t k = 0; k < want->count; k++) {
            if (want->racy && want->racy[k]) {
                (*racy_skipped)++;
                continue;
            }
            RefValue g = ref_array_read(&got, k), w = ref_array_read(want, k);
            if (values_match(g, w, et, scale))
                continue;
            if (bad++ < MAX_REPORTED) {
                char gs[96], ws[96], is[96];
                format_value(gs, sizeof gs, g, et);
                format_value(ws, sizeof ws, w, et);
                format_value(is, sizeof is, ref_array_read(&a->initial[i], k), et);
                failure(rep, "%s: array %s element %lld (flat; was %s): got %s, want %s", where,
                        fn->params[i]->name, (long long)k, is, gs, ws);
            }
        }
        bad_total += bad;
    }
    return bad_total;
}

/* ================================================================ plain functions */

typedef struct Checked {
    const char *file;      /* for messages */
    Target *targets;
    int target_count;
    Report *rep;
} Checked;

static void check_plain(Checked *c, const KjIrFunction *fn)
{
    int samples_run = 0, redrawn = 0, nan_results = 0;
    char reason[300] = "";
    for (int sample = 0; sample < PLAIN_SAMPLES; sample++) {
        Args a = {0};
        RefValue want = {0};
        RefStatus st = {.budget = 5000000};
        bool found = false;
        for (int draw = 0; draw < DRAWS && !found; draw++) {
            args_free(&a);
            args_draw(&a, fn, NULL, false);
            if (!ref_call(fn, a.values, &want, &st)) {
                snprintf(reason, sizeof reason, "%s", st.error);
                redrawn++;
                continue;
            }
            /* a NaN result says little: look for inputs that give a number */
            found = fn->ret->kind == KJ_TYPE_VOID || !is_nan_value(want, fn->ret) ||
                    draw == DRAWS - 1;
            redrawn += !found;
        }
        nan_results += found && fn->ret->kind != KJ_TYPE_VOID && is_nan_value(want, fn->ret);
        if (!found) {
            args_free(&a);
            continue;
        }
        samples_run++;
        char inputs[600];
        describe_args(inputs, sizeof inputs, fn, &a);
        for (int t = 0; t < c->target_count; t++) {
            kjit_function *kf = NULL;
            const char *tname = kjit_target_name(c->targets[t].kind);
            char where[900];
            snprintf(where, sizeof where, "%s: %s on %s (%s)", c->file, fn->name, tname, inputs);
            if (kjit_module_function(c->targets[t].module, fn->name, &kf) != KJIT_OK) {
                failure(c->rep, "%s: not found: %s", where, kjit_last_error(c->targets[t].context));
                continue;
            }
            kjit_arg args[MAX_PARAMS];
            kjit_array views[MAX_PARAMS];
            make_kjit_args(&a, args, views);
            kjit_array result;
            memset(&result, 0, sizeof result);
            snprintf(unit_test_doing, sizeof unit_test_doing, "kjit_call %.480s", where);
            kjit_status s = kjit_call(kf, args, a.count, NULL, &result);
            if (s != KJIT_OK) {
                failure(c->rep, "%s: kjit_call: %s", where, kjit_last_error(c->targets[t].context));
            } else {
                if (fn->ret->kind != KJ_TYPE_VOID) {
                    RefArray r = ref_array_make(result.data, fn->ret->kind, 0, NULL);
                    RefValue got = ref_array_read(&r, 0);
                    if (!values_match(got, want, fn->ret, scale_of(&st))) {
                        char gs[96], ws[96];
                        format_value(gs, sizeof gs, got, fn->ret);
                        format_value(ws, sizeof ws, want, fn->ret);
                        failure(c->rep, "%s: returned %s, want %s (magnitude %g)", where, gs, ws,
                                st.magnitude);
                    }
                    kjit_array_free(&result);
                }
                int racy = 0;
                compare_arrays(c->rep, where, fn, &a, views, scale_of(&st), 0, &racy);
                c->rep->runs++;
            }
            free_views(&a, views);
        }
        args_free(&a);
    }
    if (samples_run == 0) {
        not_run(c->rep, c->file, fn->name, reason);
        return;
    }
    checked_name(c->rep, fn->name);
    if (c->rep->verbose)
        printf("  %s: %s (plain): %d samples x %d targets (%d inputs drawn again, %d NaN "
               "results kept; last reason: %s)\n", c->file, fn->name, samples_run, c->target_count,
               redrawn, nan_results, reason[0] ? reason : "none");
}

/* A device function (a plain function using kernel built-ins) runs only in
 * kernels: kjit_call from the host must refuse it, naming the built-in. */
static void check_device_refused(Checked *c, const KjIrFunction *fn)
{
    for (int t = 0; t < c->target_count; t++) {
        kjit_function *kf = NULL;
        const char *tname = kjit_target_name(c->targets[t].kind);
        if (kjit_module_function(c->targets[t].module, fn->name, &kf) != KJIT_OK) {
            failure(c->rep, "%s: %s on %s: not found", c->file, fn->name, tname);
            continue;
        }
        kjit_status s = kjit_call(kf, NULL, 0, NULL, NULL);
        const char *message = kjit_last_error(c->targets[t].context);
        if (s == KJIT_OK || !strstr(message, "device function") || !strstr(message, fn->device_use))
            failure(c->rep, "%s: the device function %s on %s: kjit_call gave %s (%s), not a "
                    "refusal naming %s", c->file, fn->name, tname, kjit_status_name(s), message,
                    fn->device_use);
    }
    checked_name(c->rep, fn->name);
}

/* ================================================================ @vectorize */

/* One vectorized call: every input an array of VEC_COUNT, or input 0 a scalar. */
static void check_vectorized_call(Checked *c, KjIrModule *module, const KjIrEntry *entry, int sig,
                                  KjIrFunction *scalar, bool first_scalar)
{
    int n = scalar->param_count;
    const KjType *ret = scalar->ret;
    int64_t count = VEC_COUNT;
    RefArray inputs[MAX_PARAMS];
    RefValue scalars[MAX_PARAMS];
    RefValue *want = kj_xcalloc((size_t)count, sizeof *want);
    Scale *scale = kj_xcalloc((size_t)count, sizeof *scale);
    for (int p = 0; p < n; p++) {
        inputs[p] = new_array(scalar->params[p]->type->kind, 1, &count);
        scalars[p] = draw_scalar(scalar->params[p]->type);
    }
    const char *mode = first_scalar ? "input 0 a scalar" : "all arrays";
    char reason[300] = "";
    bool usable = true;
    for (int64_t i = 0; i < count && usable; i++) {
        bool found = false;
        for (int draw = 0; draw < DRAWS && !found; draw++) {
            RefValue args[MAX_PARAMS];
            for (int p = 0; p < n; p++) {
                RefValue v = first_scalar && p == 0 ? scalars[0] : draw_scalar(scalar->params[p]->type);
                ref_array_write(&inputs[p], i, v);
                args[p] = ref_array_read(&inputs[p], i);
            }
            RefStatus st = {.budget = 1000000};
            if (!ref_call(scalar, args, &want[i], &st)) {
                snprintf(reason, sizeof reason, "%s", st.error);
                continue;
            }
            scale[i] = scale_of(&st);
            found = !is_nan_value(want[i], ret) || draw == DRAWS - 1;
        }
        usable = found;
    }
    char label[200];
    snprintf(label, sizeof label, "%s [%s]", entry->name, scalar->symbol);
    if (!usable) {
        not_run(c->rep, c->file, label, reason);
        goto done;
    }

    /* The vectorize pass's own kernel, walked by the evaluator: the same
     * element computations, so the very same bits. */
    {
        KjVecVariant variant = {KJ_LAYOUT_CONTIG, 1, first_scalar ? 1u : 0u};
        KjIrFunction *vk = kj_vectorize(module, scalar, variant);
        RefValue args[MAX_PARAMS + 1];
        for (int p = 0; p < n; p++) {
            if (first_scalar && p == 0)
                args[p] = scalars[0];
            else
                args[p].array = &inputs[p];
        }
        RefArray out = new_array(ret->kind, 1, &count);
        RefArray expect = new_array(ret->kind, 1, &count);
        for (int64_t i = 0; i < count; i++)
            ref_array_write(&expect, i, want[i]);
        args[n].array = &out;
        RefStatus st = {.budget = 50000000};
        if (!ref_call(vk, args, NULL, &st))
            failure(c->rep, "%s: %s (%s): the evaluator stopped in the vectorized kernel: %s",
                    c->file, label, mode, st.error);
        else if (memcmp(out.data, expect.data, (size_t)count * (size_t)ref_elem_size(ret->kind)) != 0)
            failure(c->rep, "%s: %s (%s): the vectorize pass's kernel differs from the scalar "
                    "function under the evaluator", c->file, label, mode);
        free(out.data);
        free(expect.data);
    }

    for (int t = 0; t < c->target_count; t++) {
        const char *tname = kjit_target_name(c->targets[t].kind);
        kjit_function *kf = NULL;
        if (kjit_module_function(c->targets[t].module, entry->name, &kf) != KJIT_OK) {
            failure(c->rep, "%s: %s on %s: not found", c->file, label, tname);
            continue;
        }
        kjit_arg args[MAX_PARAMS];
        kjit_array views[MAX_PARAMS];
        for (int p = 0; p < n; p++) {
            const KjType *pt = scalar->params[p]->type;
            kjit_dtype dt;
            kj_type_dtype(pt, &dt);
            if (first_scalar && p == 0) {
                Args one = {.count = 1, .types = {pt}, .values = {scalars[0]}};
                make_kjit_args(&one, &args[p], &views[p]);
                continue;
            }
            views[p] = kjit_array_make(inputs[p].data, dt, 1, &count);
            args[p] = kjit_arg_array(&views[p]);
        }
        int chosen = -1;
        if (kjit_function_match(kf, args, n, &chosen) != KJIT_OK || chosen != sig) {
            failure(c->rep, "%s: %s on %s (%s): the arguments chose signature %d, not %d (%s)",
                    c->file, label, tname, mode, chosen, sig, kjit_last_error(c->targets[t].context));
            continue;
        }
        kjit_array result;
        memset(&result, 0, sizeof result);
        snprintf(unit_test_doing, sizeof unit_test_doing, "kjit_call %s: %s on %s (%s)", c->file,
                 label, tname, mode);
        if (kjit_call(kf, args, n, NULL, &result) != KJIT_OK) {
            failure(c->rep, "%s: %s on %s (%s): kjit_call: %s", c->file, label, tname, mode,
                    kjit_last_error(c->targets[t].context));
            continue;
        }
        c->rep->runs++;
        if (result.ndim != 1 || result.shape[0] != count) {
            failure(c->rep, "%s: %s on %s (%s): result of rank %d", c->file, label, tname, mode,
                    result.ndim);
            kjit_array_free(&result);
            continue;
        }
        RefArray got = ref_array_make(result.data, ret->kind, 1, &count);
        int bad = 0;
        for (int64_t i = 0; i < count; i++) {
            RefValue g = ref_array_read(&got, i);
            if (values_match(g, want[i], ret, scale[i]) || bad++ >= MAX_REPORTED)
                continue;
            char text[600] = "", gs[96], ws[96];
            size_t len = 0;
            for (int p = 0; p < n; p++) {
                char v[96];
                format_value(v, sizeof v, ref_array_read(&inputs[p], first_scalar && p == 0 ? 0 : i),
                             scalar->params[p]->type);
                if (first_scalar && p == 0)
                    format_value(v, sizeof v, scalars[0], scalar->params[p]->type);
                len += (size_t)snprintf(text + len, sizeof text - len, "%s%s=%s", p ? ", " : "",
                                        scalar->params[p]->name, v);
            }
            format_value(gs, sizeof gs, g, ret);
            format_value(ws, sizeof ws, want[i], ret);
            failure(c->rep, "%s: %s on %s (%s), element %lld (%s): got %s, want %s", c->file, label,
                    tname, mode, (long long)i, text, gs, ws);
        }
        kjit_array_free(&result);
    }
done:
    for (int p = 0; p < n; p++)
        free(inputs[p].data);
    free(want);
    free(scale);
}

static void check_vectorize(Checked *c, KjIrModule *module, const KjIrEntry *entry)
{
    for (int sig = 0; sig < entry->variants.count; sig++) {
        KjIrFunction *scalar = entry->variants.items[sig];
        int before = c->rep->not_run_count;
        check_vectorized_call(c, module, entry, sig, scalar, false);
        if (scalar->param_count >= 2)
            check_vectorized_call(c, module, entry, sig, scalar, true);
        if (c->rep->not_run_count == before)
            checked_name(c->rep, scalar->symbol);
        if (c->rep->verbose)
            printf("  %s: %s [%s] (@vectorize): %d elements x %d targets\n", c->file, entry->name,
                   scalar->symbol, VEC_COUNT, c->target_count);
    }
}

/* ================================================================ kernels */

/* Kernels whose indexing needs a launch (or shapes) of its own. */
typedef struct LaunchOverride {
    const char *file, *kernel;
    uint32_t grid[3], block[3];
    int64_t shapes[4][KJ_MAX_DIMS]; /* by parameter; {0} keeps the default */
    int samples;
    const char *why;
} LaunchOverride;

static const LaunchOverride launch_overrides[] = {
    /* one block per column i, one thread per row j; data holds 128 channels
     * of 2000 samples; a small image keeps the 128 x 128 inner loops cheap */
    {"examples/das.kern", "das", {6, 1, 1}, {4, 1, 1}, {{4, 6}, {256000}}, 1, "das layout"},
    /* one thread per channel, each writing its own 2000 samples */
    {"examples/das.kern", "echoes", {1, 1, 1}, {128, 1, 1}, {{256000}}, 2, "echoes layout"},
    /* b[i, 0] with i = the global x index: no more threads than rows of b */
    {"tests/golden/syntax/arrays.kern", "arrays", {1, 1, 1}, {32, 1, 1}, {{0}}, 2, "b rows"},
};

static void check_kernel(Checked *c, const KjIrFunction *fn)
{
    uint32_t grid[3] = {4, 1, 1}, block[3] = {256, 1, 1};
    int64_t shapes[MAX_PARAMS][KJ_MAX_DIMS];
    memset(shapes, 0, sizeof shapes);
    int samples = KERNEL_SAMPLES;
    bool two_d = false;
    for (int i = 0; i < fn->param_count; i++)
        if (fn->params[i]->type->kind == KJ_TYPE_ARRAY && fn->params[i]->type->ndim >= 2)
            two_d = true;
    if (two_d) {
        /* 32 x 48 arrays: x (columns) 3 blocks of 16, y (rows) 2 blocks of 16 */
        grid[0] = 3, grid[1] = 2, block[0] = 16, block[1] = 16;
    }
    for (size_t o = 0; o < sizeof launch_overrides / sizeof launch_overrides[0]; o++) {
        const LaunchOverride *lo = &launch_overrides[o];
        if (strcmp(lo->file, c->file) != 0 || strcmp(lo->kernel, fn->name) != 0)
            continue;
        memcpy(grid, lo->grid, sizeof grid);
        memcpy(block, lo->block, sizeof block);
        for (int i = 0; i < 4 && i < fn->param_count; i++)
            memcpy(shapes[i], lo->shapes[i], sizeof shapes[i]);
        samples = lo->samples;
    }
    int samples_run = 0;
    char reason[300] = "";
    for (int sample = 0; sample < samples; sample++) {
        Args a = {0};
        RefStatus st = {.budget = 50000000};
        bool found = false;
        for (int draw = 0; draw < DRAWS / 4 && !found; draw++) {
            args_free(&a);
            args_draw(&a, fn, shapes, true);
            found = ref_launch(fn, a.values, grid, block, &st);
            if (!found)
                snprintf(reason, sizeof reason, "%s", st.error);
        }
        if (!found) {
            args_free(&a);
            continue;
        }
        samples_run++;
        char inputs[600];
        describe_args(inputs, sizeof inputs, fn, &a);
        for (int t = 0; t < c->target_count; t++) {
            const char *tname = kjit_target_name(c->targets[t].kind);
            char where[1000];
            snprintf(where, sizeof where, "%s: kernel %s on %s, grid (%u,%u,%u) block (%u,%u,%u) (%s)",
                     c->file, fn->name, tname, grid[0], grid[1], grid[2], block[0], block[1],
                     block[2], inputs);
            kjit_function *kf = NULL;
            if (kjit_module_function(c->targets[t].module, fn->name, &kf) != KJIT_OK) {
                failure(c->rep, "%s: not found", where);
                continue;
            }
            kjit_arg args[MAX_PARAMS];
            kjit_array views[MAX_PARAMS];
            make_kjit_args(&a, args, views);
            snprintf(unit_test_doing, sizeof unit_test_doing, "kjit_launch %.480s", where);
            if (kjit_launch(kf, grid, block, args, a.count, NULL) != KJIT_OK) {
                failure(c->rep, "%s: kjit_launch: %s", where, kjit_last_error(c->targets[t].context));
            } else {
                /* NVPTX contracts a * b + c into one fma, so a float comparison
                 * right at its threshold (an escape test) may go the other way
                 * on cuda: integers a kernel computes from floats may differ
                 * there, in a few elements (CUDA_INT_SLACK), each one noted */
                double slack = c->targets[t].kind == KJIT_TARGET_CUDA && st.magnitude > 0
                                   ? CUDA_INT_SLACK : 0;
                int racy = 0;
                compare_arrays(c->rep, where, fn, &a, views, scale_of(&st), slack, &racy);
                c->rep->runs++;
                if (c->rep->verbose && racy && t == 0)
                    printf("  %s: %s: %d racy elements not compared\n", c->file, fn->name, racy);
            }
            free_views(&a, views);
        }
        args_free(&a);
    }
    if (samples_run == 0) {
        not_run(c->rep, c->file, fn->name, reason);
        return;
    }
    checked_name(c->rep, fn->name);
    if (c->rep->verbose)
        printf("  %s: %s (@kernel%s): %d launches x %d targets\n", c->file, fn->name,
               fn->uses_syncthreads ? ", barriers in lock step" : "", samples_run, c->target_count);
}

/* ================================================================ files */

typedef struct Seen {
    char **keys;
    int count;
} Seen;

/* Functions of imported modules come with every importer: check each once. */
static bool seen_before(Seen *seen, const KjIrEntry *entry)
{
    char key[600];
    snprintf(key, sizeof key, "%s:%s", entry->loc.src ? entry->loc.src->path : "", entry->name);
    for (int i = 0; i < seen->count; i++)
        if (strcmp(seen->keys[i], key) == 0)
            return true;
    seen->keys = kj_xrealloc(seen->keys, sizeof *seen->keys * (size_t)(seen->count + 1));
    seen->keys[seen->count++] = kj_xstrdup(key);
    return false;
}

static void collect_diag(void *user, KjSeverity severity, const char *text)
{
    kj_buf_printf(user, "%s", text);
}

static void check_file(Report *rep, Target *targets, int target_count, const char *path, Seen *seen)
{
    KjArena arena = {0};
    KjBuf messages = {0};
    KjDiag diag = {.sink = collect_diag, .user = &messages};
    const char *dirs[2] = {kj_default_stdlib_dir(), NULL};
    KjSource *src = kj_source_read(&arena, path, &diag);
    KjIrModule *module = src ? kj_compile_source(&arena, src, dirs, &diag) : NULL;
    if (!module) {
        /* a syntax golden (only an .ast expectation) need not type-check */
        char ast[600], ir[600];
        struct stat sb;
        snprintf(ast, sizeof ast, "%.*s.ast", (int)strlen(path) - 5, path);
        snprintf(ir, sizeof ir, "%.*s.ir", (int)strlen(path) - 5, path);
        const char *text = messages.data ? messages.data : "";
        if (stat(ast, &sb) == 0 && stat(ir, &sb) != 0)
            not_run(rep, path, "(every function)",
                    kj_arena_printf(&arena, "a syntax-only golden that does not type-check: %.*s",
                                    (int)strcspn(text, "\n"), text));
        else
            failure(rep, "%s does not compile (and has no .err expectation): %s", path, text);
        goto done;
    }
    for (int t = 0; t < target_count; t++) {
        targets[t].module = NULL;
        if (kjit_compile_file(targets[t].context, path, &targets[t].module) != KJIT_OK)
            failure(rep, "%s on %s: kjit_compile_file: %s", path, kjit_target_name(targets[t].kind),
                    kjit_last_error(targets[t].context));
    }
    for (int t = 0; t < target_count; t++)
        if (!targets[t].module)
            goto done;
    Checked c = {.file = path, .targets = targets, .target_count = target_count, .rep = rep};
    kj_buf_printf(&rep->checked, "  %s: ", path);
    for (int i = 0; i < module->entries.count; i++) {
        KjIrEntry *entry = module->entries.items[i];
        if (seen_before(seen, entry))
            continue;
        switch (entry->kind) {
        case KJ_FN_PLAIN: {
            const KjIrFunction *fn = entry->variants.items[0];
            if (fn->device_use)
                check_device_refused(&c, fn);
            else
                check_plain(&c, fn);
            break;
        }
        case KJ_FN_VECTORIZE: check_vectorize(&c, module, entry); break;
        case KJ_FN_KERNEL: check_kernel(&c, entry->variants.items[0]); break;
        case KJ_FN_REDUCE: break; /* test_reduce.c runs reductions */
        case KJ_FN_GUVECTORIZE: break; /* test_guvectorize.c runs gufuncs */
        }
    }
    kj_buf_printf(&rep->checked, "\n");
done:
    for (int t = 0; t < target_count; t++) {
        kjit_module_free(targets[t].module);
        targets[t].module = NULL;
    }
    kj_buf_free(&messages);
    kj_arena_free(&arena);
}

static int kern_file(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return n > 5 && strcmp(d->d_name + n - 5, ".kern") == 0;
}

/* Every .kern of one folder that is meant to compile, in name order. */
static void check_folder(const char *folder)
{
    Report rep = {.verbose = getenv("KJIT_GOLDEN_VERBOSE") != NULL};
    const char *env = getenv("KJIT_GOLDEN_SEED");
    seed = env && *env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
    rng = seed ? seed : 1;
    Target targets[3];
    char cuda_note[300];
    int target_count = open_targets(targets, cuda_note, sizeof cuda_note);
    Seen seen = {0};
    struct dirent **names = NULL;
    int count = scandir(folder, &names, kern_file, alphasort);
    ck_assert_msg(count > 0, "no .kern files in %s", folder);
    int files = 0;
    for (int i = 0; i < count; i++) {
        char path[600], err[600];
        snprintf(path, sizeof path, "%s/%s", folder, names[i]->d_name);
        snprintf(err, sizeof err, "%.*s.err", (int)strlen(path) - 5, path);
        struct stat sb;
        if (stat(err, &sb) != 0) {
            check_file(&rep, targets, target_count, path, &seen);
            files++;
        }
        free(names[i]);
    }
    free(names);
    for (int i = 0; i < seen.count; i++)
        free(seen.keys[i]);
    free(seen.keys);
    for (int t = 0; t < target_count; t++)
        kjit_context_destroy(targets[t].context);

    printf("golden_run %s: %d files, %d functions checked on %d targets (%d runs compared; %s; "
           "seed %llu):\n%s",
           folder, files, rep.functions, target_count, rep.runs, cuda_note,
           (unsigned long long)seed, rep.checked.data ? rep.checked.data : "");
    printf("%s", rep.not_run.data ? rep.not_run.data : "");
    fflush(stdout);
    if (rep.failure_count > 12)
        kj_buf_printf(&rep.failures, "... and %d more\n", rep.failure_count - 12);
    /* Check's messages are short: the whole list goes to stdout, the first
     * mismatch into the assertion */
    if (rep.failure_count) {
        printf("golden_run %s: %d mismatches:\n%s", folder, rep.failure_count, rep.failures.data);
        fflush(stdout);
    }
    ck_assert_msg(rep.failure_count == 0, "%d mismatches in %s (listed above); the first: %.3000s",
                  rep.failure_count, folder, rep.failures.data);
    ck_assert_msg(rep.functions > 0, "no function of %s could be checked", folder);
    kj_buf_free(&rep.failures);
    kj_buf_free(&rep.not_run);
    kj_buf_free(&rep.checked);
}

START_TEST(golden_types_run)
{
    check_folder("tests/golden/types");
}
END_TEST

START_TEST(golden_syntax_run)
{
    check_folder("tests/golden/syntax");
}
END_TEST

START_TEST(examples_run)
{
    check_folder("examples");
}
END_TEST

Suite *suite_golden_run(void)
{
    Suite *s = suite_create("golden_run");
    TCase *tc = tcase_create("golden_run");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, golden_types_run);
    tcase_add_test(tc, golden_syntax_run);
    tcase_add_test(tc, examples_run);
    suite_add_tcase(s, tc);
    return s;
}
