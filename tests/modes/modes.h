/*
 * modes.h: "every mode, every kernel" (tests/modes/, docs/testing.md).  The
 * harness runs every @kernel, @vectorize, @guvectorize and @reduce function
 * of the repository's .kern sources in every execution mode and compares
 * the outputs with the reference mode's (cpu, cpu_simd = 0) bit for bit.
 * Sections follow the files: corpus.c finds the sources, rules.c reads
 * tests/modes/rules.txt (input recipes and documented exceptions), inputs.c
 * makes the seeded inputs of one case, compare.c compares two outputs, and
 * modes.c runs the modes, in one process per instruction set.
 */
#ifndef MODES_H
#define MODES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kjit.h"

/* ------------------------------------------------------------- corpus.c */

/* One .kern source: a file (path set: imports resolve beside it) or a
 * string literal taken out of a unit test's C file (path NULL). */
typedef struct ModesSource {
    char *name; /* "examples/das.kern" or "tests/unit/test_simd.c:41" */
    char *file; /* the file it came from: "tests/unit/test_simd.c" (rules name it) */
    char *path; /* NULL for an extracted literal */
    char *text; /* the literal's text; NULL for a file */
} ModesSource;

/* Every source under root: tests/golden/<group>/ .kern files, examples/, stdlib/
 * and each run of adjacent string literals in
 * the C files of tests/unit that holds a kernel, vectorized, generalized or reduce
 * function (equal texts once).  Sorted by name; returns the count (-1 and
 * a message on stderr when root has none of these folders). */
int modes_corpus(const char *root, ModesSource **out);

/* -------------------------------------------------------------- rules.c */

typedef enum ModesRuleKind {
    RULE_START,  /* the first input recipe tried (wild inputs make it loop for ever) */
    RULE_LENGTH, /* an array parameter's length (rank 1) or shape */
    RULE_ORDER,  /* results depend on the order threads run in: run, not compared */
    RULE_SKIP,   /* not run at all */
    RULE_CUDA,   /* cuda: outputs not compared (a documented difference) */
    RULE_LAUNCH, /* a launch shape of a kernel, instead of the three usual ones */
    RULE_UNDEFINED, /* reads what nothing wrote: run, not compared */
    RULE_RACY,   /* a race or barrier error on purpose: not run under the race checker */
} ModesRuleKind;

typedef struct ModesRule {
    ModesRuleKind kind;
    char *file, *function; /* function "*": every function of the file */
    int recipe;            /* RULE_START */
    char *param;           /* RULE_LENGTH */
    int ndim;
    int64_t shape[KJIT_MAX_DIMS];
    uint32_t grid[3], block[3]; /* RULE_LAUNCH */
    char *reason;
    int used;
} ModesRule;

typedef struct ModesRules {
    ModesRule *rules;
    int count;
} ModesRules;

/* Reads the rules file; false and a message on stderr when it cannot. */
bool modes_rules_read(const char *path, ModesRules *out);
/* Whether the rule names this function of this source. */
bool modes_rule_applies(const ModesRule *rule, const ModesSource *source, const char *function);
/* The first rule of this kind for the function, or NULL (marks it used). */
ModesRule *modes_rule_find(ModesRules *rules, ModesRuleKind kind, const ModesSource *source,
                           const char *function);

/* ------------------------------------------------------------- inputs.c */

/* The input recipes, from the widest values to the tamest; a case takes the
 * first one whose run in checked mode keeps every index in range. */
typedef enum ModesRecipe {
    RECIPE_WILD,  /* integers over their whole range with their edges; floats of
                     both signs, +-0, inf, nan, subnormals */
    RECIPE_TAME,  /* integers in [-100, 100] ([0, 200] unsigned); floats in [-4, 4] */
    RECIPE_INDEX, /* integers in [0, n) for the smallest extent n; floats in [0, 1) */
    RECIPE_COUNT
} ModesRecipe;

const char *modes_recipe_name(int recipe);
int modes_recipe_from_name(const char *name); /* -1 when unknown */

typedef struct ModesRng {
    uint64_t state;
} ModesRng;
ModesRng modes_rng(uint64_t seed, const char *a, const char *b, int c, int d);
uint64_t modes_rng_next(ModesRng *rng);

/* Fills n elements of dtype at data with values of the recipe.  extent:
 * the smallest array extent (RECIPE_INDEX's bound). */
void modes_fill(ModesRng *rng, kjit_dtype dtype, void *data, int64_t n, int recipe,
                int64_t extent);
/* A scalar argument of dtype (RECIPE_WILD and TAME: small counts, as
 * scalars are sizes and counts; RECIPE_INDEX: [0, extent)). */
kjit_arg modes_scalar(ModesRng *rng, kjit_dtype dtype, int recipe, int64_t extent);

/* ------------------------------------------------------------ compare.c */

typedef enum ModesTolerance {
    TOLERANCE_BITS,  /* the same bits; a NaN meets any NaN */
    TOLERANCE_CUDA,  /* floats within the cuda tolerance (docs/testing.md); integers exact */
    TOLERANCE_SINGLE, /* the same with f32's relative 2^-16 for f64 and c128 too */
} ModesTolerance;

/* Compares n elements; returns the index of the first difference (and the
 * count of differing elements in *differing), or -1.  *inexact counts float
 * elements that differ but are within the tolerance (for TOLERANCE_BITS:
 * NaNs that differ in sign or payload only). */
int64_t modes_compare(kjit_dtype dtype, const void *ref, const void *got, int64_t n,
                      ModesTolerance tolerance, int64_t *differing, int64_t *inexact);
/* Element i as hex bits and as a value: "0x3ff0000000000000 (1)". */
void modes_element_text(kjit_dtype dtype, const void *data, int64_t i, char *buf, size_t size);
/* The cuda tolerance, in words (for the report). */
const char *modes_cuda_tolerance_text(void);

#endif

/* -------------------------------------------------------------- cases.c */

#define MODES_MAX_ARGS 32

/* One way to call a function: a signature and the shapes of its operands
 * (the launch shape of a kernel). */
typedef struct ModesCase {
    kjit_function_kind kind;
    int signature; /* of the function (of its map, for a @reduce with one) */
    int variant;   /* which shapes */
    uint32_t grid[3], block[3];
    bool launch_rule; /* the shape is a launch rule's: one the kernel is written for */
    char label[128];
} ModesCase;

/* A case's arguments, made for one run (each mode gets fresh copies). */
typedef struct ModesArgs {
    int nargs;
    kjit_arg args[MODES_MAX_ARGS];
    kjit_array arrays[MODES_MAX_ARGS];
    void *buffers[MODES_MAX_ARGS];
    bool has_result;
    kjit_array result; /* a vectorized call's or a reduction's */
    int more_results;  /* a @vectorize of several outputs: outputs 1.. */
    kjit_array more[7];
    bool has_init;
    kjit_arg init;
    int axes[2], naxes;
} ModesArgs;

/* One output to compare: a view of data the ModesArgs owns. */
typedef struct ModesOutput {
    kjit_dtype dtype;
    int64_t count;
    const void *data;
    char name[64];
} ModesOutput;

/* The cases of a function (at most max; a kernel's launches from the
 * rules when they give any); 0 when it takes no call this harness knows
 * how to make (*why says why). */
int modes_cases(kjit_function *function, ModesRules *rules, const ModesSource *source,
                ModesCase *cases, int max, const char **why);
/* Makes the arguments of a case with the recipe's values; lengths: the
 * rules' array lengths for this function.  false and *why when the
 * function's parameters cannot be made (an unknown layout). */
bool modes_args_make(kjit_function *function, const ModesCase *c, int recipe, uint64_t seed,
                     const ModesSource *source, ModesRules *rules, ModesArgs *out, const char **why);
void modes_args_free(ModesArgs *args);
/* Runs the case on the arguments. */
kjit_status modes_invoke(kjit_function *function, const ModesCase *c, ModesArgs *args);
/* The outputs the run left (every array argument of a kernel or a
 * @guvectorize; the result of a vectorized call or a reduction). */
int modes_outputs(const ModesCase *c, ModesArgs *args, ModesOutput *out, int max);
