/*
 * compare.c: one output against the reference's.  On cpu and parallel every
 * element must have the same bits, but a NaN need only meet a NaN (of any
 * sign and payload: see below).  Against cuda, which contracts a
 * multiply feeding an add into one fused multiply-add and calls libdevice
 * instead of glibc, a float element may differ within the tolerance below;
 * integers and booleans must still agree exactly, and the class of a float
 * (NaN, an infinity and its sign) too, but where a contraction meets an
 * overflow: a product that overflows to an infinity when rounded alone may
 * not when fused with its addend, so an infinity may meet a NaN, or a finite
 * value of its sign (2.2e38 against inf in a saxpy, 7.8e37 in a lerp: the
 * fused sum of a product past the largest and an addend of the other sign
 * can be any such value).
 */
#include "modes.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Within 16 ULP, or within a relative 2^-16 (f32, c64), 2^-40 (f64, c128)
 * or 2^-7 (f16, bf16) of the larger magnitude of the two elements or of the
 * reference array's largest finite magnitude (a difference of two large
 * values that nearly cancel keeps the large values' absolute error). */
const char *modes_cuda_tolerance_text(void)
{
    return "floats within 16 ULP or a relative 2^-16 (f32), 2^-40 (f64), 2^-7 (f16, bf16) "
           "of the larger of the element and the array's largest magnitude";
}

static int64_t ulp_distance(double a, double b, bool single)
{
    if (single) {
        float fa = (float)a, fb = (float)b;
        int32_t ia, ib;
        memcpy(&ia, &fa, 4);
        memcpy(&ib, &fb, 4);
        int64_t ka = ia < 0 ? (int64_t)INT32_MIN - ia : ia, kb = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
        return ka > kb ? ka - kb : kb - ka;
    }
    int64_t ia, ib;
    memcpy(&ia, &a, 8);
    memcpy(&ib, &b, 8);
    int64_t ka = ia < 0 ? INT64_MIN - ia : ia, kb = ib < 0 ? INT64_MIN - ib : ib;
    if ((ka < 0) != (kb < 0))
        return INT64_MAX; /* far apart in any case */
    return ka > kb ? ka - kb : kb - ka;
}

static bool close_enough(double a, double b, double scale, kjit_dtype real_type, bool single_rel)
{
    if (isnan(a) || isnan(b)) /* NaN against NaN, or an infinity a fused product kept from a NaN */
        return (isnan(a) || isinf(a)) && (isnan(b) || isinf(b));
    if (isinf(a) || isinf(b)) /* the same infinity, or a finite value of its sign that a
                                 fused product did not overflow into */
        return a == b || signbit(a) == signbit(b);
    bool single = real_type == KJIT_F32;
    double rel = real_type == KJIT_F32 || (single_rel && real_type == KJIT_F64) ? 0x1p-16
                 : real_type == KJIT_F64                                    ? 0x1p-40
                                                                            : 0x1p-7;
    if (real_type != KJIT_F16 && real_type != KJIT_BF16 && ulp_distance(a, b, single) <= 16)
        return true;
    double big = fmax(fabs(a), fabs(b));
    return fabs(a - b) <= rel * fmax(big, scale);
}

static bool is_float(kjit_dtype t) { return t >= KJIT_F32 && t <= KJIT_BF16; }

/* Part k of element i as a double, and the real type of a part. */
static double part(kjit_dtype t, const void *data, int64_t i, int k)
{
    switch (t) {
    case KJIT_F32: return ((const float *)data)[i];
    case KJIT_F64: return ((const double *)data)[i];
    case KJIT_C64: return ((const float *)data)[2 * i + k];
    case KJIT_C128: return ((const double *)data)[2 * i + k];
    case KJIT_F16: case KJIT_BF16: return kjit_half_to_double(t, ((const uint16_t *)data)[i]);
    default: return 0;
    }
}

static kjit_dtype real_type(kjit_dtype t)
{
    return t == KJIT_C64 ? KJIT_F32 : t == KJIT_C128 ? KJIT_F64 : t;
}

int64_t modes_compare(kjit_dtype dtype, const void *ref, const void *got, int64_t n,
                      ModesTolerance tolerance, int64_t *differing, int64_t *inexact)
{
    size_t size = kjit_dtype_size(dtype);
    int parts = dtype == KJIT_C64 || dtype == KJIT_C128 ? 2 : 1;
    double scale = 0;
    bool near = tolerance == TOLERANCE_CUDA || tolerance == TOLERANCE_SINGLE;
    if (near && is_float(dtype))
        for (int64_t i = 0; i < n; i++)
            for (int k = 0; k < parts; k++) {
                double v = fabs(part(dtype, ref, i, k));
                if (isfinite(v) && v > scale)
                    scale = v;
            }
    int64_t first = -1;
    *differing = 0;
    *inexact = 0;
    for (int64_t i = 0; i < n; i++) {
        if (memcmp((const char *)ref + (size_t)i * size, (const char *)got + (size_t)i * size, size) == 0)
            continue;
        bool ok = false;
        if (tolerance == TOLERANCE_BITS && is_float(dtype)) {
            /* NaN against NaN of another sign or payload: IEEE 754 leaves
             * open which NaN an operation on two NaNs returns, and x86
             * returns its first operand's, which LLVM may swap for a
             * commutative one (a + b) in one mode and not another. */
            bool nans = true;
            for (int k = 0; k < parts; k++) {
                double a = part(dtype, ref, i, k), b = part(dtype, got, i, k);
                nans = nans && (isnan(a) ? isnan(b) : !isnan(b) && memcmp(&a, &b, sizeof a) == 0);
            }
            if (nans) {
                (*inexact)++;
                continue;
            }
        }
        if (near && is_float(dtype)) {
            ok = true;
            for (int k = 0; k < parts; k++)
                ok = ok && close_enough(part(dtype, ref, i, k), part(dtype, got, i, k), scale,
                                        real_type(dtype), tolerance == TOLERANCE_SINGLE);
        }
        if (ok) {
            (*inexact)++;
            continue;
        }
        if (first < 0)
            first = i;
        (*differing)++;
    }
    return first;
}

void modes_element_text(kjit_dtype dtype, const void *data, int64_t i, char *buf, size_t size)
{
    const unsigned char *p = (const unsigned char *)data + (size_t)i * kjit_dtype_size(dtype);
    switch (dtype) {
    case KJIT_BOOL: case KJIT_U8: snprintf(buf, size, "0x%02x (%u)", p[0], p[0]); break;
    case KJIT_I8: snprintf(buf, size, "0x%02x (%d)", p[0], (int8_t)p[0]); break;
    case KJIT_I16: case KJIT_U16: {
        uint16_t v;
        memcpy(&v, p, 2);
        snprintf(buf, size, "0x%04x (%d)", v, dtype == KJIT_I16 ? (int)(int16_t)v : (int)v);
        break;
    }
    case KJIT_I32: case KJIT_U32: {
        uint32_t v;
        memcpy(&v, p, 4);
        if (dtype == KJIT_I32)
            snprintf(buf, size, "0x%08x (%d)", v, (int32_t)v);
        else
            snprintf(buf, size, "0x%08x (%u)", v, v);
        break;
    }
    case KJIT_I64: case KJIT_U64: {
        uint64_t v;
        memcpy(&v, p, 8);
        if (dtype == KJIT_I64)
            snprintf(buf, size, "0x%016llx (%lld)", (unsigned long long)v, (long long)v);
        else
            snprintf(buf, size, "0x%016llx (%llu)", (unsigned long long)v, (unsigned long long)v);
        break;
    }
    case KJIT_F32: {
        uint32_t v;
        float f;
        memcpy(&v, p, 4);
        memcpy(&f, p, 4);
        snprintf(buf, size, "0x%08x (%.9g)", v, f);
        break;
    }
    case KJIT_F64: {
        uint64_t v;
        double f;
        memcpy(&v, p, 8);
        memcpy(&f, p, 8);
        snprintf(buf, size, "0x%016llx (%.17g)", (unsigned long long)v, f);
        break;
    }
    case KJIT_C64: {
        uint32_t a, b;
        float fa, fb;
        memcpy(&a, p, 4);
        memcpy(&b, p + 4, 4);
        memcpy(&fa, p, 4);
        memcpy(&fb, p + 4, 4);
        snprintf(buf, size, "0x%08x 0x%08x (%.9g%+.9gj)", a, b, fa, fb);
        break;
    }
    case KJIT_C128: {
        uint64_t a, b;
        double fa, fb;
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        memcpy(&fa, p, 8);
        memcpy(&fb, p + 8, 8);
        snprintf(buf, size, "0x%016llx 0x%016llx (%.17g%+.17gj)", (unsigned long long)a,
                 (unsigned long long)b, fa, fb);
        break;
    }
    case KJIT_F16: case KJIT_BF16: {
        uint16_t v;
        memcpy(&v, p, 2);
        snprintf(buf, size, "0x%04x (%.6g)", v, kjit_half_to_double(dtype, v));
        break;
    }
    default: snprintf(buf, size, "?"); break;
    }
}
