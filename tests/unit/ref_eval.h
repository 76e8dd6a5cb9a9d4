/*
 * ref_eval.h: a reference evaluator of the typed IR, for tests only.
 *
 * It walks KjIrFunction bodies directly, with none of the code generator:
 * floats are computed in double and each operation's result rounded to its
 * type (an f32 or c64 operation's to f32, an f16 or bf16 one's to the type,
 * as the targets compute them; so that where the order of roundings decides,
 * as with f32 overflow or a difference lost before a %, it decides as they
 * do), integers exactly with the wrapping,
 * truncating and saturating rules that docs/language.md and the comment at the
 * top of compiler/codegen_expr.c choose, complex numbers in double complex with
 * the textbook formulas, math built-ins through libm's double functions.
 * Kernels run their grid one thread at a time (laneid() is the linear thread
 * index modulo 32; the other warp and block collectives are not modelled); a kernel that calls
 * syncthreads() runs each block's threads as fibers in lock-step phases, one
 * phase per barrier.  Atomics are plain read-modify-writes.
 *
 * Behaviour the language leaves unspecified and the evaluator cannot decide
 * (an index outside its array, a run longer than the step budget) stops the
 * evaluation with a reason instead of a value, so a test draws other inputs.
 */
#ifndef REF_EVAL_H
#define REF_EVAL_H

#include <complex.h>
#include <stdbool.h>
#include <stdint.h>

#include "kjit_compiler.h"

/* An array the evaluator reads and writes: elements stored as the element
 * type's C type (f32 as float, c64 as two floats), strides in elements. */
typedef struct RefArray {
    KjTypeKind elem;
    int ndim;
    int64_t shape[KJ_MAX_DIMS];
    int64_t strides[KJ_MAX_DIMS];
    void *data;
    int64_t count; /* elements the storage holds: every access is checked against it */
    /* Kernels, optional: set for each element that two threads stored different
     * values into with plain stores (a race: any of the values may win). */
    bool *racy;
    int64_t *writer; /* ref_launch's own: the thread (from 1) that stored last */
} RefArray;

/* A scalar (interpreted by its IR type) or an array. */
typedef union RefValue {
    uint64_t u;        /* bool (0 or 1) and integers, sign- or zero-extended to 64 bits */
    double f;          /* f32 and f64 */
    double complex c;  /* c64 and c128 */
    RefArray *array;
} RefValue;

typedef struct RefStatus {
    char error[256];  /* why the evaluation stopped ("" when it ran to the end) */
    double magnitude; /* the largest finite |value| of any float or complex expression */
    /* the same over f32 and c64 values that an operation rounded (not mere
     * reads): nonzero when a result carries f32 rounding errors, whatever its
     * own type */
    double single_magnitude;
    int64_t steps;    /* statements and loop iterations run */
    int64_t budget;   /* the most steps allowed; 0: 20 million */
    bool lock_step;   /* a kernel ran with barriers (fibers) */
} RefStatus;

/* A C-ordered contiguous view of `data` (count = product of the shape). */
RefArray ref_array_make(void *data, KjTypeKind elem, int ndim, const int64_t *shape);
int ref_elem_size(KjTypeKind elem);
RefValue ref_array_read(const RefArray *array, int64_t flat);
void ref_array_write(RefArray *array, int64_t flat, RefValue value);

/* The value of `value` (of type from) converted to type `to`, as the language
 * converts: integers wrap, floats to integers truncate and saturate (NaN: 0),
 * into f32 or c64 rounds to f32. */
RefValue ref_convert(RefValue value, const KjType *from, const KjType *to);

/* Calls a plain, scalar (@vectorize signature) or vectorized-kernel function.
 * args: one per parameter, scalars of the parameter's type or arrays.  False,
 * with status->error saying why, when the evaluation stopped. */
bool ref_call(const KjIrFunction *fn, const RefValue *args, RefValue *result, RefStatus *status);
/* The same for a @vectorize signature of several outputs: result[k] for each
 * output k (result[0] as ref_call's). */
bool ref_call_outputs(const KjIrFunction *fn, const RefValue *args, RefValue *result,
                      RefStatus *status);

/* Runs a @kernel over grid x block threads. */
bool ref_launch(const KjIrFunction *fn, const RefValue *args, const uint32_t grid[3],
                const uint32_t block[3], RefStatus *status);

#endif
