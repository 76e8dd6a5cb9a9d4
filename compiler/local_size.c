/*
 * local_size.c: local() arrays sized at launch.  `local(f64, n)` in a
 * kernel, n an integer parameter (or an expression of them and constants),
 * is a per-thread array whose size the launch gives, as a tridiagonal
 * solve along a column needs a scratch of the column's length.
 *
 * What a size may be is decided here once, for the checker (which refuses
 * any other size), the runtime (which computes the sizes at each launch,
 * before anything runs, and refuses sizes out of range and threads whose
 * local() arrays take more than KJ_MAX_LOCAL_BYTES) and the back end
 * (which computes them again in the kernel, codegen_expr.c): integer
 * constants, the kernel's integer parameters (never assigned, the checker
 * makes sure), the extents of its array parameters, + - * / %, unary -,
 * min, max, c ? a : b on a comparison of such values and integer
 * conversions.  The
 * value is the exact one, in 64-bit integers: the runtime refuses a launch
 * where a step overflows or divides by zero, so the kernel's wrapping i64
 * arithmetic gives the same numbers.
 */
#include "kjit_compiler.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static bool is_compare(KjIrOp op)
{
    return op == KJ_IR_LT || op == KJ_IR_LE || op == KJ_IR_GT || op == KJ_IR_GE ||
           op == KJ_IR_EQ || op == KJ_IR_NE;
}

const KjIrExpr *kj_local_size_refusal(const KjIrExpr *e)
{
    if (!e || !kj_type_is_int(e->type))
        return e;
    switch (e->op) {
    case KJ_IR_CONST:
        return NULL;
    case KJ_IR_VAR:
        return e->var->is_param ? NULL : e;
    case KJ_IR_DIM: /* an array parameter's extent (arrays are never re-bound) */
        return e->args[0]->op == KJ_IR_VAR && e->args[0]->var->is_param ? NULL : e;
    case KJ_IR_NEG:
    case KJ_IR_CAST:
        if (e->op == KJ_IR_CAST && !kj_type_is_int(e->args[0]->type))
            return e;
        return kj_local_size_refusal(e->args[0]);
    case KJ_IR_SELECT: { /* c ? a : b on a comparison of sizes (min and max are these) */
        const KjIrExpr *c = e->args[0];
        if (!is_compare(c->op))
            return c;
        const KjIrExpr *bad = kj_local_size_refusal(c->args[0]);
        bad = bad ? bad : kj_local_size_refusal(c->args[1]);
        bad = bad ? bad : kj_local_size_refusal(e->args[1]);
        return bad ? bad : kj_local_size_refusal(e->args[2]);
    }
    case KJ_IR_MATH:
        if (e->math != KJ_MATH_FMIN && e->math != KJ_MATH_FMAX)
            return e;
        /* fall through */
    case KJ_IR_ADD: case KJ_IR_SUB: case KJ_IR_MUL: case KJ_IR_DIV: case KJ_IR_REM: {
        const KjIrExpr *a = kj_local_size_refusal(e->args[0]);
        return a ? a : kj_local_size_refusal(e->args[1]);
    }
    default:
        return e;
    }
}

/* The integer of `type` at p, as a launch marshals it; false for a u64
 * above INT64_MAX. */
static bool read_int(const KjType *type, const void *p, int64_t *out)
{
    switch (kj_type_int_bits(type)) {
    case 8:
        *out = kj_type_is_signed(type) ? (int64_t)*(const int8_t *)p : (int64_t)*(const uint8_t *)p;
        return true;
    case 16:
        *out = kj_type_is_signed(type) ? (int64_t)*(const int16_t *)p : (int64_t)*(const uint16_t *)p;
        return true;
    case 32:
        *out = kj_type_is_signed(type) ? (int64_t)*(const int32_t *)p : (int64_t)*(const uint32_t *)p;
        return true;
    case 64:
        if (kj_type_is_signed(type)) {
            *out = *(const int64_t *)p;
            return true;
        }
        *out = (int64_t)*(const uint64_t *)p;
        return *(const uint64_t *)p <= INT64_MAX;
    default:
        return false;
    }
}

/* A constant's value: its low bits, sign-extended for signed types. */
bool kj_local_size_const(const KjIrExpr *e, int64_t *out)
{
    int bits = kj_type_int_bits(e->type);
    uint64_t v = e->const_int;
    if (bits < 64) {
        v &= ((uint64_t)1 << bits) - 1;
        if (kj_type_is_signed(e->type) && (v >> (bits - 1) & 1))
            v |= ~(((uint64_t)1 << bits) - 1);
    } else if (!kj_type_is_signed(e->type) && v > INT64_MAX) {
        return false;
    }
    *out = (int64_t)v;
    return true;
}

bool kj_local_size_eval(const KjIrFunction *fn, const KjIrExpr *e, void *const *params,
                        const int64_t *const *shapes, int64_t *out)
{
    int64_t a, b;
    switch (e->op) {
    case KJ_IR_DIM:
        for (int i = 0; i < fn->param_count; i++)
            if (fn->params[i] == e->args[0]->var && shapes[i]) {
                *out = shapes[i][e->dim];
                return true;
            }
        return false;
    case KJ_IR_CONST:
        return kj_local_size_const(e, out);
    case KJ_IR_VAR:
        for (int i = 0; i < fn->param_count; i++)
            if (fn->params[i] == e->var)
                return read_int(e->var->type, params[i], out);
        return false;
    case KJ_IR_CAST:
        return kj_local_size_eval(fn, e->args[0], params, shapes, out);
    case KJ_IR_NEG:
        return kj_local_size_eval(fn, e->args[0], params, shapes, &a) && !__builtin_sub_overflow(0, a, out);
    case KJ_IR_SELECT: { /* both arms computable, as the kernel computes both */
        const KjIrExpr *c = e->args[0];
        int64_t x, y;
        if (!kj_local_size_eval(fn, c->args[0], params, shapes, &x) ||
            !kj_local_size_eval(fn, c->args[1], params, shapes, &y) ||
            !kj_local_size_eval(fn, e->args[1], params, shapes, &a) ||
            !kj_local_size_eval(fn, e->args[2], params, shapes, &b))
            return false;
        bool taken = c->op == KJ_IR_LT ? x < y : c->op == KJ_IR_LE ? x <= y
                   : c->op == KJ_IR_GT ? x > y : c->op == KJ_IR_GE ? x >= y
                   : c->op == KJ_IR_EQ ? x == y : x != y;
        *out = taken ? a : b;
        return true;
    }
    default:
        break;
    }
    if (e->arg_count != 2 || !kj_local_size_eval(fn, e->args[0], params, shapes, &a) ||
        !kj_local_size_eval(fn, e->args[1], params, shapes, &b))
        return false;
    switch (e->op) {
    case KJ_IR_ADD: return !__builtin_add_overflow(a, b, out);
    case KJ_IR_SUB: return !__builtin_sub_overflow(a, b, out);
    case KJ_IR_MUL: return !__builtin_mul_overflow(a, b, out);
    case KJ_IR_DIV:
    case KJ_IR_REM:
        if (b == 0 || (a == INT64_MIN && b == -1))
            return false;
        *out = e->op == KJ_IR_DIV ? a / b : a % b;
        return true;
    case KJ_IR_MATH:
        *out = (e->math == KJ_MATH_FMIN) == (a < b) ? a : b;
        return true;
    default:
        return false;
    }
}

/* Far above any limit: sums are kept at or below it, so they cannot overflow. */
#define HUGE_BYTES ((int64_t)1 << 36)

bool kj_local_launch_bytes(const KjIrFunction *fn, void *const *params,
                           const int64_t *const *shapes, int64_t *bytes, char *why,
                           size_t why_size)
{
    int64_t total = 0;
    for (int i = 0; i < fn->launch_locals.count; i++) {
        const KjIrExpr *e = fn->launch_locals.items[i];
        const char *path = e->loc.src ? e->loc.src->path : "?";
        int64_t count = kj_type_size(e->alloc_elem);
        for (int k = 0; k < e->alloc_ndim; k++) {
            int64_t size = e->alloc_shape[k];
            if (e->alloc_size[k] && !kj_local_size_eval(fn, e->alloc_size[k], params, shapes, &size)) {
                snprintf(why, why_size, "the size of the local() at %s:%d:%d cannot be computed "
                         "for this launch (it overflows 64 bits or divides by zero)", path,
                         e->loc.line, e->loc.col);
                return false;
            }
            if (size < 1 || size > (1 << 24)) {
                snprintf(why, why_size, "the local() at %s:%d:%d is given size %" PRId64 " by "
                         "this launch; its sizes must be from 1 to 16777216", path, e->loc.line,
                         e->loc.col, size);
                return false;
            }
            count *= size; /* at most 2^36 * 2^24 before it is clamped */
            if (count > HUGE_BYTES)
                count = HUGE_BYTES;
        }
        total += (count + 15) & ~(int64_t)15;
        if (total > HUGE_BYTES)
            total = HUGE_BYTES;
    }
    if (fn->local_bytes + total > KJ_MAX_LOCAL_BYTES) {
        snprintf(why, why_size, "with the sizes this launch gives, the local() arrays of kernel "
                 "%s take %s%" PRId64 " bytes per thread (%" PRId64 " of them sized at launch); "
                 "the most is %d (512 KiB, as on CUDA)", fn->name,
                 total == HUGE_BYTES ? "more than " : "", fn->local_bytes + total, total,
                 KJ_MAX_LOCAL_BYTES);
        return false;
    }
    *bytes = total;
    return true;
}
