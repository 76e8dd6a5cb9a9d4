/*
 * modes.c: every mode, every kernel (docs/testing.md).
 *
 *   build/modes-test [--seed N] [--root DIR] [--rules FILE] [--only TEXT] [--quiet]
 *
 * The instruction set of the cpu code is fixed when a process first makes
 * code (KJIT_CPU_FEATURES is read then), so the harness runs one child
 * process per instruction set: the host's own (AVX-512 where it has it),
 * AVX2 (KJIT_CPU_FEATURES=-avx512f, on an AVX-512 host) and SSE only
 * (-avx, on an AVX host), in that order.  The first child runs every case in
 * the reference mode (cpu, cpu_simd = 0) and writes the outputs to a folder;
 * every child runs its modes and compares each output with those (the
 * first child's include the race checker, cpu with check=race, in which
 * a race or a synchronisation error is a failure).  A child
 * that crashes or stops answering is reported with the function and mode it
 * was in, and a new one goes on after that function.
 *
 * Before the reference run, each case's inputs are tried in checked mode
 * (kjit_options.check) from the widest recipe down (inputs.c): the first
 * that runs clean is taken.  When none does, the first that stopped only at
 * a division by zero, a shift or a conversion out of range (behaviour left
 * unspecified, docs/language.md) is: the cpu modes still compare the bits,
 * and cuda skips the case.  A child stuck in checked mode is started again
 * on that function from the next recipe.
 *
 * The child writes its report to stdout and its progress (what it is
 * running, its counts) as lines on file descriptor 3, which the parent
 * reads to know where it was.  Exit status: 0 when nothing differed and
 * nothing failed.
 */
#include "modes.h"
#include "kjit_tools.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------- the modes */

typedef struct Mode {
    char name[64];
    kjit_target target;
    int simd, specialise;
    int check; /* KJIT_CHECK_RACE: the race checker, which must find nothing */
} Mode;

/* An instruction set: a child process. */
typedef struct Isa {
    const char *name;     /* "avx512" */
    const char *features; /* KJIT_CPU_FEATURES, NULL for the host's own */
} Isa;

#define MAX_MODES 12
#define MAX_CASES 64
#define MAX_OUTPUTS MODES_MAX_ARGS

/* The modes a child with this instruction set runs; the host's own set
 * also runs the reference and, when a driver is there, cuda. */
static int modes_of(const Isa *isa, bool first, bool cuda, Mode *modes)
{
    int n = 0;
    static const struct { kjit_target target; int simd, specialise; } all[] = {
        {KJIT_TARGET_CPU, 1, 1},      {KJIT_TARGET_CPU, 1, 0},      {KJIT_TARGET_PARALLEL, 0, 1},
        {KJIT_TARGET_PARALLEL, 1, 1}, {KJIT_TARGET_PARALLEL, 1, 0}, {KJIT_TARGET_CPU, 0, 1},
    };
    for (int i = 0; i < (int)(sizeof all / sizeof *all); i++) {
        /* Another instruction set changes the code of every mode (the
         * scalar code too, which LLVM's own vectoriser compiles for it),
         * so each child runs the cpu and parallel modes; the reference
         * (cpu, cpu_simd = 0) is the first child's own. */
        if (first && all[i].target == KJIT_TARGET_CPU && !all[i].simd)
            continue;
        Mode *m = &modes[n++];
        m->target = all[i].target;
        m->simd = all[i].simd;
        m->specialise = all[i].specialise;
        m->check = 0;
        snprintf(m->name, sizeof m->name, "%s simd=%d%s%s%s", kjit_target_name(m->target), m->simd,
                 m->simd && !m->specialise ? " spec=0" : "", first ? "" : " ", first ? "" : isa->name);
    }
    if (first) {
        /* every kernel runs clean under the race checker, with the same results */
        Mode *m = &modes[n++];
        m->target = KJIT_TARGET_CPU;
        m->simd = 0;
        m->specialise = 1;
        m->check = KJIT_CHECK_RACE;
        snprintf(m->name, sizeof m->name, "cpu check=race");
    }
    if (first && cuda) {
        Mode *m = &modes[n++];
        m->target = KJIT_TARGET_CUDA;
        m->simd = 1;
        m->specialise = 1;
        m->check = 0;
        snprintf(m->name, sizeof m->name, "cuda");
    }
    return n;
}

/* --------------------------------------------------------- the settings */

typedef struct Settings {
    uint64_t seed;
    const char *root, *rules_path, *only, *refdir;
    bool quiet;
    int isa;                  /* child: which */
    int from_source, from_fn; /* child: where to start */
    int from_recipe;          /* child: the first function's first recipe (after one that hung) */
} Settings;

static Isa isas[3];
static int nisas;

static FILE *progress; /* fd 3 in a child */

static void tell(const char *fmt, ...)
{
    if (!progress)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(progress, fmt, ap);
    va_end(ap);
    fflush(progress);
}

/* --------------------------------------------------------- the child */

typedef struct Counts {
    long functions, cases, runs, compared, mismatches, errors, skipped, ordered, cuda_inexact;
    long recipes[RECIPE_COUNT], unclean; /* the cases' recipes; those not clean */
    long nan_payloads; /* NaNs of another sign or payload than the reference's */
    long isa_inexact;  /* another ISA's libmvec routine: floats within the tolerance */
} Counts;

typedef struct Child {
    const Settings *settings;
    ModesRules rules;
    Mode modes[MAX_MODES];
    int nmodes;
    kjit_context *contexts[MAX_MODES];
    kjit_context *reference, *checked; /* first child only */
    bool first;
    bool resumed_here; /* running the function the child was started at */
    bool cuda;         /* a cuda mode runs */
    bool float_math;   /* the source computes with floats (has_float_math) */
    bool isa_math;     /* not the host's ISA, and the source calls libmvec (has_isa_math) */
    bool isa_single;   /* ... on single or half precision floats */
    Counts counts;
} Child;

static void discard_print(void *user, const char *line, size_t len) {}

static kjit_context *context_for(kjit_target target, int simd, int specialise, int check)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = target == KJIT_TARGET_PARALLEL ? 3 : 0;
    options.cpu_simd = simd;
    options.cpu_specialise = specialise;
    options.check = check;
    options.on_print = discard_print; /* the programs' print() lines are not the report */
    kjit_context *context = NULL;
    if (kjit_context_create(&options, &context) != KJIT_OK) {
        printf("FAIL context for %s: %s\n", kjit_target_name(target), kjit_last_error(NULL));
        return NULL;
    }
    return context;
}

static kjit_status compile(kjit_context *context, const ModesSource *source, kjit_module **out)
{
    return source->path ? kjit_compile_file(context, source->path, out)
                        : kjit_compile_string(context, source->name, source->text, out);
}

/* The reference file of a function. */
static void ref_path(const Child *child, const ModesSource *source, const char *fn, char *buf,
                     size_t size)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *s = source->name; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    h = (h ^ '/') * 1099511628211ULL;
    for (const char *s = fn; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    snprintf(buf, size, "%s/%016llx.ref", child->settings->refdir, (unsigned long long)h);
}

/* What the reference run of one case left. */
typedef struct CaseRef {
    int recipe;  /* -1: not run (no recipe, or the reference failed) */
    int clean;   /* checked mode found nothing at all: cuda runs it */
    int noutputs;
    ModesOutput outputs[MAX_OUTPUTS];
    void *data[MAX_OUTPUTS];
} CaseRef;

static bool write_refs(const char *path, const CaseRef *refs, int ncases)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    fwrite(&ncases, sizeof ncases, 1, f);
    for (int c = 0; c < ncases; c++) {
        const CaseRef *r = &refs[c];
        fwrite(&r->recipe, sizeof r->recipe, 1, f);
        fwrite(&r->clean, sizeof r->clean, 1, f);
        fwrite(&r->noutputs, sizeof r->noutputs, 1, f);
        for (int o = 0; o < r->noutputs; o++) {
            const ModesOutput *out = &r->outputs[o];
            fwrite(out, sizeof *out, 1, f);
            fwrite(out->data, kjit_dtype_size(out->dtype), (size_t)out->count, f);
        }
    }
    return fclose(f) == 0;
}

static int read_refs(const char *path, CaseRef *refs, int max)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    int ncases = -1;
    if (fread(&ncases, sizeof ncases, 1, f) != 1 || ncases < 0 || ncases > max) {
        fclose(f);
        return -1;
    }
    for (int c = 0; c < ncases; c++) {
        CaseRef *r = &refs[c];
        memset(r, 0, sizeof *r);
        if (fread(&r->recipe, sizeof r->recipe, 1, f) != 1 || fread(&r->clean, sizeof r->clean, 1, f) != 1 ||
            fread(&r->noutputs, sizeof r->noutputs, 1, f) != 1 || r->noutputs > MAX_OUTPUTS) {
            fclose(f);
            return -1;
        }
        for (int o = 0; o < r->noutputs; o++) {
            ModesOutput *out = &r->outputs[o];
            if (fread(out, sizeof *out, 1, f) != 1) {
                fclose(f);
                return -1;
            }
            size_t bytes = kjit_dtype_size(out->dtype) * (size_t)out->count;
            r->data[o] = malloc(bytes ? bytes : 1);
            if (fread(r->data[o], 1, bytes, f) != bytes) {
                fclose(f);
                return -1;
            }
            out->data = r->data[o];
        }
    }
    fclose(f);
    return ncases;
}

static void free_refs(CaseRef *refs, int ncases)
{
    for (int c = 0; c < ncases; c++)
        for (int o = 0; o < refs[c].noutputs; o++)
            free(refs[c].data[o]);
}

/* Keeps copies of the outputs of a run. */
static void keep_outputs(CaseRef *r, const ModesCase *c, ModesArgs *args)
{
    r->noutputs = modes_outputs(c, args, r->outputs, MAX_OUTPUTS);
    for (int o = 0; o < r->noutputs; o++) {
        size_t bytes = kjit_dtype_size(r->outputs[o].dtype) * (size_t)r->outputs[o].count;
        r->data[o] = malloc(bytes ? bytes : 1);
        memcpy(r->data[o], r->outputs[o].data, bytes);
        r->outputs[o].data = r->data[o];
    }
}

/* A float or complex operation of the checked IR, "name:type" (the text
 * after a '(' up to the ':', and whether the type is complex): whether it
 * is what the caller looks for. */
typedef bool (*IrOpMatch)(const char *name, size_t len, const char *type);

static bool name_in(const char *name, size_t len, const char *const *list, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (strlen(list[k]) == len && strncmp(name, list[k], len) == 0)
            return true;
    return false;
}

/* Whether an operation of the source's checked IR matches; true when in
 * doubt (the IR cannot be made), so that the caller takes the tolerance. */
static bool source_has_op(const Child *child, const ModesSource *source, IrOpMatch match)
{
    char path[4096];
    const char *file = source->path;
    if (!file) { /* a unit test's literal: through a file of its own */
        snprintf(path, sizeof path, "%s/source.kern", child->settings->refdir);
        FILE *f = fopen(path, "w");
        if (!f || fputs(source->text, f) < 0) {
            if (f)
                fclose(f);
            return true;
        }
        fclose(f);
        file = path;
    }
    kjit_stage_options options;
    kjit_stage_options_init(&options);
    char *ir = NULL, *error = NULL;
    size_t size = 0;
    if (kjit_stage_file(file, KJIT_STAGE_IR, &options, &ir, &size, &error) != KJIT_OK) {
        free(error);
        return true;
    }
    bool found = false;
    for (const char *p = strchr(ir, '('); p && !found; p = strchr(p + 1, '(')) {
        const char *colon = p + 1;
        while (*colon && (isalnum((unsigned char)*colon) || *colon == '_' || *colon == '.'))
            colon++;
        if (*colon != ':')
            continue;
        const char *type = colon + 1;
        bool real = (type[0] == 'f' || type[0] == 'c' || strncmp(type, "bf16", 4) == 0) &&
                    isdigit((unsigned char)type[type[0] == 'b' ? 2 : 1]);
        if (real)
            found = match(p + 1, (size_t)(colon - (p + 1)), type);
    }
    free(ir);
    return found;
}

/* An arithmetic operation, a power or a math function (other than the
 * exact ones) of a float or complex type.  A source without any moves,
 * compares and converts floats only, and cuda must give its bits exactly. */
static bool is_float_math(const char *name, size_t len, const char *type)
{
    static const char *const exact[] = {"math.min", "math.max", "math.abs", "math.floor",
                                        "math.ceil", "math.trunc", "math.round", "math.copysign"};
    static const char *const arithmetic[] = {"add", "sub", "mul", "div", "rem", "pow", "fma",
                                             "cabs", "carg", "polar", "atomic_add", "atomic_sub"};
    bool is_math = len > 5 && strncmp(name, "math.", 5) == 0 &&
                   !name_in(name, len, exact, sizeof exact / sizeof *exact);
    return is_math || name_in(name, len, arithmetic, sizeof arithmetic / sizeof *arithmetic);
}

static bool has_float_math(const Child *child, const ModesSource *source)
{
    return source_has_op(child, source, is_float_math);
}

/* A function that the cpu code calls libmvec's routine for (docs/language.md:
 * each ISA has its own, which differ in the last bits): every math function
 * of a float but the exact ones and libm's own (lgamma, tgamma), every one
 * of a complex number, and abs, arg and polar of complex numbers. */
static bool is_isa_math(const char *name, size_t len, const char *type)
{
    bool complex = type[0] == 'c';
    static const char *const same[] = {"math.min", "math.max", "math.abs", "math.floor",
                                       "math.ceil", "math.trunc", "math.round", "math.copysign",
                                       "math.sqrt", "math.fma", "math.fmod", "math.lgamma",
                                       "math.tgamma", "math.isnan", "math.isinf", "math.isfinite"};
    static const char *const complex_ops[] = {"cabs", "carg", "polar"};
    if (len > 5 && strncmp(name, "math.", 5) == 0)
        return complex || !name_in(name, len, same, sizeof same / sizeof *same);
    return name_in(name, len, complex_ops, sizeof complex_ops / sizeof *complex_ops);
}

static bool has_isa_math(const Child *child, const ModesSource *source)
{
    return source_has_op(child, source, is_isa_math);
}

/* The same, of an f32, c64, f16 or bf16: a last bit of such a result, fed
 * into f64 (philox.kern's normals: rand_normal + f64(rand_normal_f32)), is a
 * difference far beyond f64's tolerance. */
static bool is_isa_math_single(const char *name, size_t len, const char *type)
{
    bool single = strncmp(type, "f32", 3) == 0 || strncmp(type, "c64", 3) == 0 ||
                  strncmp(type, "f16", 3) == 0 || strncmp(type, "bf16", 4) == 0;
    return single && is_isa_math(name, len, type);
}

/* Chooses the case's recipe in checked mode and runs the reference. */
static void reference_case(Child *child, const ModesSource *source, kjit_function *checked_fn,
                           kjit_function *ref_fn, const ModesCase *c, int start, CaseRef *r)
{
    const char *name = kjit_function_name(ref_fn);
    memset(r, 0, sizeof *r);
    r->recipe = -1;
    char last[600] = "";
    int unclean = -1; /* the first recipe whose only failures are unspecified operations */
    for (int recipe = start; recipe < RECIPE_COUNT && r->recipe < 0; recipe++) {
        ModesArgs args;
        const char *why = "";
        if (!modes_args_make(checked_fn, c, recipe, child->settings->seed, source,
                             &child->rules, &args, &why)) {
            printf("FAIL %s %s [%s]: %s\n", source->name, name, c->label, why);
            child->counts.errors++;
            return;
        }
        tell("at %s %s [%s] checked, %s inputs\n", source->name, name, c->label,
             modes_recipe_name(recipe));
        kjit_status s = modes_invoke(checked_fn, c, &args);
        modes_args_free(&args);
        if (s == KJIT_OK) {
            r->recipe = recipe;
            r->clean = 1;
        } else if (s == KJIT_ERROR_CHECK) {
            snprintf(last, sizeof last, "%s", kjit_last_error(child->checked));
            last[strcspn(last, "\n")] = 0;
            if (!strstr(last, "out of range for axis") && unclean < 0)
                unclean = recipe;
        } else {
            snprintf(last, sizeof last, "%s: %s", kjit_status_name(s), kjit_last_error(child->checked));
            last[strcspn(last, "\n")] = 0;
        }
    }
    /* No recipe runs clean: take the first that stopped only at a division,
     * shift or conversion whose result is unspecified (the cpu modes still
     * must agree on it; cuda skips it).  Checked mode stops a thread at its
     * first failure, so such a run may still index out of range unchecked:
     * a crash then says so, and the function needs a rule. */
    if (r->recipe < 0 && unclean >= 0) {
        r->recipe = unclean;
        r->clean = 0;
        child->counts.unclean++;
    }
    if (r->recipe >= 0)
        child->counts.recipes[r->recipe]++;
    if (r->recipe < 0) {
        printf("skipped: %s %s [%s]: no input recipe keeps it in range (needs a rule in "
               "tests/modes/rules.txt): %s\n", source->name, name, c->label, last);
        child->counts.skipped++;
        return;
    }
    ModesArgs args;
    const char *why = "";
    modes_args_make(ref_fn, c, r->recipe, child->settings->seed, source, &child->rules, &args, &why);
    tell("at %s %s [%s] cpu simd=0 (reference)\n", source->name, name, c->label);
    kjit_status s = modes_invoke(ref_fn, c, &args);
    child->counts.runs++;
    if (s != KJIT_OK) {
        printf("FAIL %s %s [%s] cpu simd=0 (reference): %s: %s\n", source->name, name, c->label,
               kjit_status_name(s), kjit_last_error(child->reference));
        child->counts.errors++;
        r->recipe = -1;
    } else {
        keep_outputs(r, c, &args);
    }
    modes_args_free(&args);
}

/* The modes in which each output of a case differed after the first (whose
 * line says how): printed in one line when the case is done. */
typedef struct Also {
    bool printed[MAX_OUTPUTS];
    char modes[MAX_OUTPUTS][512];
} Also;

static void print_also(const Also *also)
{
    for (int o = 0; o < MAX_OUTPUTS; o++)
        if (also->modes[o][0])
            printf("  and the same output differs in:%s\n", also->modes[o]);
}

/* Whether the race checker runs a case: a launch rule's shape, or the usual
 * 1-D one (grid and block along x).  A kernel that indexes by threadIdx.x
 * alone really races in a block of 8 x 5 threads, so the 2-D and 3-D shapes
 * of a kernel not written for them are left out. */
static bool race_shape(const ModesCase *c)
{
    if (c->kind != KJIT_FUNCTION_KERNEL || c->launch_rule)
        return true;
    return c->grid[1] == 1 && c->grid[2] == 1 && c->block[1] == 1 && c->block[2] == 1;
}

/* Runs a case in one mode and compares it with the reference. */
static void mode_case(Child *child, const ModesSource *source, kjit_function *fn, int m,
                      const ModesCase *c, const CaseRef *r, bool compare, int skip_output, bool may_fail,
                      Also *also)
{
    const Mode *mode = &child->modes[m];
    const char *name = kjit_function_name(fn);
    ModesArgs args;
    const char *why = "";
    modes_args_make(fn, c, r->recipe, child->settings->seed, source, &child->rules, &args, &why);
    tell("at %s %s [%s] %s\n", source->name, name, c->label, mode->name);
    kjit_status s = modes_invoke(fn, c, &args);
    child->counts.runs++;
    if (s != KJIT_OK && may_fail) {
        printf("refused (a cuda rule): %s %s [%s] %s: %s: %s\n", source->name, name, c->label, mode->name,
               kjit_status_name(s), kjit_last_error(child->contexts[m]));
        modes_args_free(&args);
        return;
    }
    if (s != KJIT_OK) {
        printf("FAIL %s %s [%s] %s: %s: %s\n", source->name, name, c->label, mode->name,
               kjit_status_name(s), kjit_last_error(child->contexts[m]));
        child->counts.errors++;
        modes_args_free(&args);
        return;
    }
    if (compare) {
        ModesOutput got[MAX_OUTPUTS];
        int n = modes_outputs(c, &args, got, MAX_OUTPUTS);
        /* cuda, and another ISA than the reference's where libmvec is called:
         * the same tolerance (another math library) */
        bool isa = mode->target != KJIT_TARGET_CUDA && child->isa_math;
        ModesTolerance tol = isa && child->isa_single ? TOLERANCE_SINGLE
                             : (mode->target == KJIT_TARGET_CUDA && child->float_math) || isa
                                 ? TOLERANCE_CUDA
                                 : TOLERANCE_BITS;
        char skipped[64];
        snprintf(skipped, sizeof skipped, "argument %d", skip_output);
        for (int o = 0; o < n && o < r->noutputs; o++) {
            const ModesOutput *want = &r->outputs[o];
            if (strcmp(got[o].name, skipped) == 0)
                continue;
            child->counts.compared++;
            if (want->dtype != got[o].dtype || want->count != got[o].count) {
                printf("MISMATCH %s %s [%s] %s vs cpu simd=0: %s: %s[%lld] against %s[%lld]\n",
                       source->name, name, c->label, mode->name, got[o].name,
                       kjit_dtype_name(got[o].dtype), (long long)got[o].count,
                       kjit_dtype_name(want->dtype), (long long)want->count);
                child->counts.mismatches++;
                continue;
            }
            int64_t differing, inexact;
            int64_t i = modes_compare(want->dtype, want->data, got[o].data, want->count, tol,
                                      &differing, &inexact);
            if (isa && tol != TOLERANCE_BITS)
                child->counts.isa_inexact += inexact;
            else if (tol == TOLERANCE_CUDA)
                child->counts.cuda_inexact += inexact;
            else
                child->counts.nan_payloads += inexact;
            if (i < 0)
                continue;
            child->counts.mismatches++;
            if (also->printed[o]) {
                size_t len = strlen(also->modes[o]);
                snprintf(also->modes[o] + len, sizeof also->modes[o] - len, "%s %s",
                         len ? "," : "", mode->name);
                continue;
            }
            also->printed[o] = true;
            char a[128], b[128];
            modes_element_text(want->dtype, want->data, i, a, sizeof a);
            modes_element_text(want->dtype, got[o].data, i, b, sizeof b);
            printf("MISMATCH %s %s [%s, %s inputs] %s vs cpu simd=0: %s (%s, %lld elements): "
                   "%lld differ, the first at %lld: %s against %s\n",
                   source->name, name, c->label, modes_recipe_name(r->recipe), mode->name, got[o].name,
                   kjit_dtype_name(want->dtype), (long long)want->count, (long long)differing,
                   (long long)i, b, a);
        }
    }
    modes_args_free(&args);
}

static void run_function(Child *child, const ModesSource *source, kjit_module *const *modules,
                         kjit_module *ref_module, kjit_module *checked_module, const char *name)
{
    kjit_function *fns[MAX_MODES] = {0}, *ref_fn = NULL, *checked_fn = NULL;
    if (child->first) {
        kjit_module_function(ref_module, name, &ref_fn);
        kjit_module_function(checked_module, name, &checked_fn);
    }
    for (int m = 0; m < child->nmodes; m++)
        if (modules[m])
            kjit_module_function(modules[m], name, &fns[m]);
    kjit_function *any = ref_fn ? ref_fn : fns[0];
    if (!any)
        return;
    ModesCase cases[MAX_CASES];
    const char *why = "";
    int ncases = modes_cases(any, &child->rules, source, cases, MAX_CASES, &why);
    if (ncases == 0)
        return; /* plain functions: not this harness's */
    ModesRule *skip = modes_rule_find(&child->rules, RULE_SKIP, source, name);
    if (skip) {
        if (child->first) {
            printf("skipped: %s %s: %s\n", source->name, name, skip->reason);
            child->counts.skipped++;
        }
        return;
    }
    ModesRule *order = modes_rule_find(&child->rules, RULE_ORDER, source, name);
    if (!order)
        order = modes_rule_find(&child->rules, RULE_UNDEFINED, source, name);
    ModesRule *cuda_rule = modes_rule_find(&child->rules, RULE_CUDA, source, name);
    ModesRule *racy_rule = modes_rule_find(&child->rules, RULE_RACY, source, name);
    int skip_output = -1; /* an argument not compared, when the rule names one */
    if (order && order->param) {
        skip_output = atoi(order->param + 3);
    }
    if (order && child->first) {
        printf("not compared (%s): %s %s%s%s: %s\n",
               order->kind == RULE_ORDER ? "order-dependent" : "undefined", source->name, name,
               order->param ? ", " : "", order->param ? order->param : "", order->reason);
        child->counts.ordered++;
    }
    if (order && order->param)
        order = NULL; /* the other outputs are compared */
    if (child->first)
        child->counts.functions++;
    CaseRef refs[MAX_CASES];
    char path[4096];
    ref_path(child, source, name, path, sizeof path);
    if (child->first) {
        ModesRule *start = modes_rule_find(&child->rules, RULE_START, source, name);
        int first = start ? start->recipe : 0;
        if (child->resumed_here && child->settings->from_recipe > first)
            first = child->settings->from_recipe;
        for (int c = 0; c < ncases; c++)
            reference_case(child, source, checked_fn, ref_fn, &cases[c], first, &refs[c]);
        if (!write_refs(path, refs, ncases)) {
            printf("FAIL cannot write %s\n", path);
            child->counts.errors++;
        }
    } else if (read_refs(path, refs, MAX_CASES) != ncases) {
        return; /* the first child skipped it, and said so */
    }
    for (int c = 0; c < ncases; c++) {
        if (refs[c].recipe < 0)
            continue;
        if (child->first)
            child->counts.cases++;
        Also also = {0};
        for (int m = 0; m < child->nmodes; m++) {
            if (!fns[m])
                continue;
            bool cuda = child->modes[m].target == KJIT_TARGET_CUDA;
            if (cuda && !refs[c].clean)
                continue; /* unspecified behaviour: the targets may differ */
            if (child->modes[m].check && (racy_rule || !race_shape(&cases[c])))
                continue; /* the race checker stops it, as its golden test expects */
            bool cuda_whole = cuda && cuda_rule && !cuda_rule->param;
            int skipped = cuda && cuda_rule && cuda_rule->param ? atoi(cuda_rule->param + 3) : skip_output;
            if (skipped != skip_output && skip_output >= 0)
                cuda_whole = true; /* two outputs left out: mode_case leaves out one */
            mode_case(child, source, fns[m], m, &cases[c], &refs[c], !order && !cuda_whole, skipped,
                      cuda_whole, &also);
        }
        print_also(&also);
    }
    free_refs(refs, ncases);
}

static void tell_counts(const Child *child)
{
    const Counts *k = &child->counts;
    tell("counts %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld\n", k->functions, k->cases,
         k->runs, k->compared, k->mismatches, k->errors, k->skipped, k->ordered, k->cuda_inexact,
         k->recipes[0], k->recipes[1], k->recipes[2], k->unclean, k->nan_payloads, k->isa_inexact);
}

static int run_child(const Settings *settings, const ModesSource *sources, int nsources)
{
    Child child = {.settings = settings, .first = settings->isa == 0};
    progress = fdopen(3, "w");
    if (!modes_rules_read(settings->rules_path, &child.rules))
        return 2;
    bool cuda = false;
    if (child.first) {
        char reason[512];
        cuda = kjit_cuda_available(reason, sizeof reason) == KJIT_OK;
        if (!cuda && settings->from_source == 0 && settings->from_fn == 0)
            printf("cuda: skipped: no CUDA driver (%s)\n", reason);
        child.reference = context_for(KJIT_TARGET_CPU, 0, 1, 0);
        child.checked = context_for(KJIT_TARGET_CPU, 0, 1, 1);
        if (!child.reference || !child.checked)
            return 2;
    }
    child.cuda = cuda;
    child.nmodes = modes_of(&isas[settings->isa], child.first, cuda, child.modes);
    for (int m = 0; m < child.nmodes; m++) {
        child.contexts[m] = context_for(child.modes[m].target, child.modes[m].simd,
                                        child.modes[m].specialise, child.modes[m].check);
        if (!child.contexts[m])
            return 2;
    }
    for (int s = settings->from_source; s < nsources; s++) {
        const ModesSource *source = &sources[s];
        if (settings->only && !strstr(source->name, settings->only))
            continue;
        kjit_module *modules[MAX_MODES] = {0}, *ref_module = NULL, *checked_module = NULL;
        kjit_module *listing = NULL;
        if (child.first) {
            if (compile(child.reference, source, &ref_module) != KJIT_OK) {
                if (!settings->quiet)
                    printf("not run: %s does not compile: %.200s\n", source->name,
                           kjit_last_error(child.reference));
                tell("nocompile\n");
                continue;
            }
            compile(child.checked, source, &checked_module);
            listing = ref_module;
        }
        bool ok = true;
        for (int m = 0; m < child.nmodes; m++)
            if (compile(child.contexts[m], source, &modules[m]) != KJIT_OK) {
                if (child.first) {
                    printf("FAIL %s compiles for the reference but not for %s: %s\n", source->name,
                           child.modes[m].name, kjit_last_error(child.contexts[m]));
                    child.counts.errors++;
                }
                ok = false;
            }
        if (!listing)
            listing = modules[0];
        child.float_math = child.cuda && has_float_math(&child, source);
        child.isa_math = !child.first && has_isa_math(&child, source); /* another ISA */
        child.isa_single = child.isa_math && source_has_op(&child, source, is_isa_math_single);
        if (ok && listing) {
            int n = kjit_module_function_count(listing);
            for (int f = s == settings->from_source ? settings->from_fn : 0; f < n; f++) {
                tell("function %d %d\n", s, f);
                child.resumed_here = s == settings->from_source && f == settings->from_fn;
                run_function(&child, source, modules, ref_module, checked_module,
                             kjit_module_function_name(listing, f));
                tell_counts(&child);
            }
        }
        for (int m = 0; m < child.nmodes; m++)
            kjit_module_free(modules[m]);
        kjit_module_free(ref_module);
        kjit_module_free(checked_module);
        fflush(stdout);
    }
    tell_counts(&child);
    tell("done\n");
    fflush(stdout);
    bool whole = !settings->only && settings->from_source == 0 && settings->from_fn == 0;
    for (int r = 0; r < child.rules.count && child.first && whole; r++)
        if (!child.rules.rules[r].used)
            printf("note: rule for %s %s matched no function\n", child.rules.rules[r].file,
                   child.rules.rules[r].function);
    return 0;
}

/* --------------------------------------------------------- the parent */

static bool cpu_has(const char *flag)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return false;
    char line[8192];
    bool found = false;
    size_t n = strlen(flag);
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0)
            continue;
        for (char *p = strstr(line, flag); p && !found; p = strstr(p + 1, flag))
            found = (p == line || p[-1] == ' ' || p[-1] == '\t') &&
                    (p[n] == ' ' || p[n] == '\n' || p[n] == 0);
        break;
    }
    fclose(f);
    return found;
}

typedef struct Run {
    Counts counts; /* the last counts line */
    int source, fn;
    char at[700];
    bool done;
} Run;

/* Reads one child's progress until it ends or is silent for timeout_s. */
static int watch(int fd, pid_t pid, Run *run, int timeout_s)
{
    char buf[8192];
    size_t len = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    for (;;) {
        int r = poll(&p, 1, timeout_s * 1000);
        if (r == 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return -1; /* silent */
        }
        if (r < 0 && errno == EINTR)
            continue;
        ssize_t got = read(fd, buf + len, sizeof buf - 1 - len);
        if (got <= 0)
            break;
        len += (size_t)got;
        buf[len] = 0;
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = 0;
            Counts *k = &run->counts;
            if (strncmp(line, "at ", 3) == 0)
                snprintf(run->at, sizeof run->at, "%s", line + 3);
            else if (strncmp(line, "function ", 9) == 0)
                sscanf(line + 9, "%d %d", &run->source, &run->fn);
            else if (strncmp(line, "counts ", 7) == 0)
                sscanf(line + 7, "%ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld",
                       &k->functions, &k->cases, &k->runs, &k->compared, &k->mismatches, &k->errors,
                       &k->skipped, &k->ordered, &k->cuda_inexact, &k->recipes[0], &k->recipes[1],
                       &k->recipes[2], &k->unclean, &k->nan_payloads, &k->isa_inexact);
            else if (strcmp(line, "done") == 0)
                run->done = true;
            line = nl + 1;
        }
        len = strlen(line);
        memmove(buf, line, len + 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

static void add_counts(Counts *total, const Counts *k)
{
    total->functions += k->functions;
    total->cases += k->cases;
    total->runs += k->runs;
    total->compared += k->compared;
    total->mismatches += k->mismatches;
    total->errors += k->errors;
    total->skipped += k->skipped;
    total->ordered += k->ordered;
    total->cuda_inexact += k->cuda_inexact;
    for (int r = 0; r < RECIPE_COUNT; r++)
        total->recipes[r] += k->recipes[r];
    total->unclean += k->unclean;
    total->nan_payloads += k->nan_payloads;
    total->isa_inexact += k->isa_inexact;
}

static void usage(void)
{
    fprintf(stderr, "usage: modes-test [--seed N] [--root DIR] [--rules FILE] [--only TEXT] [--quiet]\n");
}

int main(int argc, char **argv)
{
    Settings settings = {.root = ".", .isa = -1};
    bool seeded = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--seed") == 0 && v) {
            settings.seed = strtoull(v, NULL, 0);
            seeded = true;
            i++;
        } else if (strcmp(a, "--root") == 0 && v) {
            settings.root = v;
            i++;
        } else if (strcmp(a, "--rules") == 0 && v) {
            settings.rules_path = v;
            i++;
        } else if (strcmp(a, "--only") == 0 && v) {
            settings.only = v;
            i++;
        } else if (strcmp(a, "--quiet") == 0) {
            settings.quiet = true;
        } else if (strcmp(a, "--child") == 0 && i + 5 < argc) { /* internal */
            settings.isa = atoi(argv[i + 1]);
            settings.from_source = atoi(argv[i + 2]);
            settings.from_fn = atoi(argv[i + 3]);
            settings.from_recipe = atoi(argv[i + 4]);
            settings.refdir = argv[i + 5];
            i += 5;
        } else {
            usage();
            return 2;
        }
    }
    if (!seeded) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        settings.seed = ((uint64_t)ts.tv_sec * 1000003u) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid();
        settings.seed %= 1000000007u;
    }
    char rules_default[4096];
    if (!settings.rules_path) {
        snprintf(rules_default, sizeof rules_default, "%s/tests/modes/rules.txt", settings.root);
        settings.rules_path = rules_default;
    }
    /* The instruction sets, from /proc/cpuinfo at run time. */
    bool avx512 = cpu_has("avx512f"), avx = cpu_has("avx");
    isas[nisas++] = (Isa){avx512 ? "avx512" : avx ? (cpu_has("avx2") ? "avx2" : "avx") : "native", NULL};
    if (avx512)
        isas[nisas++] = (Isa){"avx2", "-avx512f"};
    if (avx)
        isas[nisas++] = (Isa){"sse", "-avx"};

    ModesSource *sources;
    int nsources = modes_corpus(settings.root, &sources);
    if (nsources < 0)
        return 2;
    if (settings.isa >= 0)
        return run_child(&settings, sources, nsources);

    ModesRules check_rules;
    if (!modes_rules_read(settings.rules_path, &check_rules))
        return 2;
    printf("modes: seed %llu (rerun: build/modes-test --seed %llu), %d sources\n",
           (unsigned long long)settings.seed, (unsigned long long)settings.seed, nsources);
    printf("modes: instruction sets:");
    for (int i = 0; i < nisas; i++)
        printf(" %s%s%s%s", isas[i].name, isas[i].features ? " (KJIT_CPU_FEATURES=" : "",
               isas[i].features ? isas[i].features : "", isas[i].features ? ")" : "");
    printf("%s\n", avx512 ? "" : "; AVX-512: skipped: the host has no avx512f");
    fflush(stdout);
    char refdir[] = "/tmp/kjit-modes-XXXXXX";
    if (!mkdtemp(refdir)) {
        perror("modes: mkdtemp");
        return 2;
    }
    Counts total = {0};
    long crashes = 0;
    int nmodes_total = 0;
    time_t t0 = time(NULL);
    for (int isa = 0; isa < nisas; isa++) {
        Mode modes[MAX_MODES];
        nmodes_total += modes_of(&isas[isa], isa == 0, false, modes);
        int from_source = 0, from_fn = 0, from_recipe = 0;
        for (;;) {
            int fds[2];
            if (pipe(fds) != 0) {
                perror("modes: pipe");
                return 2;
            }
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                close(fds[0]);
                if (fds[1] != 3) {
                    dup2(fds[1], 3);
                    close(fds[1]);
                }
                if (isas[isa].features)
                    setenv("KJIT_CPU_FEATURES", isas[isa].features, 1);
                char a[16], b[16], c[16], d[16];
                snprintf(d, sizeof d, "%d", from_recipe);
                snprintf(a, sizeof a, "%d", isa);
                snprintf(b, sizeof b, "%d", from_source);
                snprintf(c, sizeof c, "%d", from_fn);
                char seed[32];
                snprintf(seed, sizeof seed, "%llu", (unsigned long long)settings.seed);
                char *args[20];
                int n = 0;
                args[n++] = argv[0];
                args[n++] = "--seed";
                args[n++] = seed;
                args[n++] = "--root";
                args[n++] = (char *)settings.root;
                args[n++] = "--rules";
                args[n++] = (char *)settings.rules_path;
                if (settings.only) {
                    args[n++] = "--only";
                    args[n++] = (char *)settings.only;
                }
                if (settings.quiet)
                    args[n++] = "--quiet";
                args[n++] = "--child";
                args[n++] = a;
                args[n++] = b;
                args[n++] = c;
                args[n++] = d;
                args[n++] = refdir;
                args[n] = NULL;
                execv("/proc/self/exe", args);
                perror("modes: exec");
                _exit(127);
            }
            close(fds[1]);
            Run run = {.source = from_source, .fn = from_fn};
            int status = watch(fds[0], pid, &run, 20);
            close(fds[0]);
            add_counts(&total, &run.counts);
            if (run.done && status == 0)
                break;
            crashes++;
            if (status < 0)
                printf("FAIL [%s] no progress for 20 s at %s: killed\n", isas[isa].name, run.at);
            else if (WIFSIGNALED(status))
                printf("FAIL [%s] crashed (signal %d, %s) at %s\n", isas[isa].name, WTERMSIG(status),
                       strsignal(WTERMSIG(status)), run.at);
            else
                printf("FAIL [%s] exited %d at %s\n", isas[isa].name, WEXITSTATUS(status), run.at);
            if (status > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 2)
                break; /* set-up failed: nothing to go on with */
            from_source = run.source;
            from_fn = run.fn + 1;
            from_recipe = 0;
            /* Stuck in checked mode on a recipe: wild values as loop counts.
             * The same function again from the next recipe. */
            int stuck = -1;
            for (int r = 0; r < RECIPE_COUNT - 1 && status < 0; r++) {
                char probe[64];
                snprintf(probe, sizeof probe, "] checked, %s inputs", modes_recipe_name(r));
                if (strstr(run.at, probe))
                    stuck = r;
            }
            if (stuck >= 0) {
                printf("  (it loops on %s inputs: it needs a start rule in tests/modes/rules.txt; "
                       "going on from %s inputs)\n", modes_recipe_name(stuck),
                       modes_recipe_name(stuck + 1));
                from_fn = run.fn;
                from_recipe = stuck + 1;
            }
        }
    }
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", refdir);
    if (system(cmd) != 0)
        fprintf(stderr, "modes: could not remove %s\n", refdir);
    printf("modes: %ld functions, %ld cases x %d modes: %ld runs, %ld outputs compared, "
           "%ld mismatches, %ld failures, %ld crashes; %ld not compared (order-dependent or undefined), "
           "%ld skipped; %ld s (seed %llu)\n",
           total.functions, total.cases, nmodes_total, total.runs, total.compared, total.mismatches,
           total.errors, crashes, total.ordered, total.skipped, (long)(time(NULL) - t0),
           (unsigned long long)settings.seed);
    printf("modes: inputs: %ld cases wild, %ld tame, %ld index; %ld of them with an unspecified "
           "division, shift or conversion (not run on cuda)\n",
           total.recipes[RECIPE_WILD], total.recipes[RECIPE_TAME], total.recipes[RECIPE_INDEX],
           total.unclean);
    if (total.nan_payloads)
        printf("modes: %ld NaN elements had another sign or payload than the reference's NaN "
               "(not a mismatch: IEEE 754 leaves it open)\n", total.nan_payloads);
    if (total.cuda_inexact)
        printf("modes: cuda: %ld float elements differ within the tolerance (%s)\n",
               total.cuda_inexact, modes_cuda_tolerance_text());
    if (total.isa_inexact)
        printf("modes: other ISAs: %ld float elements of sources that call libmvec differ within "
               "the cuda tolerance, f32's where libmvec is called on f32 (each ISA has its own "
               "routine: docs/language.md)\n", total.isa_inexact);
    return total.mismatches || total.errors || crashes ? 1 : 0;
}
