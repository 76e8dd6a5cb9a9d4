/*
 * half_bits.c: the bit patterns of f16 (IEEE binary16) and bf16 (bfloat16)
 * from and to double, by the rounding the language gives them (half.c).
 * Apart from half.c's lowering so that the runtime (libkjit-rt, which holds
 * no pass of the compiler) can read and write 16-bit arrays.
 */
#include "kjit_compiler.h"

#include <math.h>

/* ============================================================ conversions */

typedef struct {
    int mantissa_bits; /* stored fraction bits */
    int bias;
} HalfFormat;

static HalfFormat format_of(KjTypeKind kind)
{
    if (kind == KJ_TYPE_F16)
        return (HalfFormat){10, 15};
    if (kind == KJ_TYPE_BF16)
        return (HalfFormat){7, 127};
    kj_die("half.c: kind %d is not f16 or bf16", (int)kind);
}

uint16_t kj_half_from_double(KjTypeKind kind, double value)
{
    HalfFormat f = format_of(kind);
    uint16_t sign = signbit(value) ? 0x8000 : 0;
    uint16_t inf = (uint16_t)(((2 * f.bias + 1) << f.mantissa_bits));
    if (isnan(value))
        return sign | inf | (uint16_t)(1 << (f.mantissa_bits - 1));
    double a = fabs(value);
    if (isinf(a))
        return sign | inf;
    int min_exponent = 1 - f.bias;
    if (a < ldexp(1.0, min_exponent)) /* subnormal: a multiple of the smallest step */
        return sign | (uint16_t)nearbyint(ldexp(a, f.mantissa_bits - min_exponent));
    int exponent;
    frexp(a, &exponent);
    exponent--; /* a = 1.m * 2^exponent */
    if (exponent > f.bias)
        return sign | inf;
    /* Scaled to an integer of mantissa_bits + 1 bits; rounding up to the next
     * power of two carries into the exponent field by itself. */
    double scaled = nearbyint(ldexp(a, f.mantissa_bits - exponent));
    uint32_t bits = ((uint32_t)(exponent + f.bias) << f.mantissa_bits) +
                    (uint32_t)scaled - (1u << f.mantissa_bits);
    return sign | (uint16_t)(bits >= inf ? inf : bits);
}

double kj_half_to_double(KjTypeKind kind, uint16_t bits)
{
    HalfFormat f = format_of(kind);
    int exponent_field = (bits & 0x7fff) >> f.mantissa_bits;
    int mantissa = bits & ((1 << f.mantissa_bits) - 1);
    double sign = bits & 0x8000 ? -1.0 : 1.0;
    if (exponent_field == 2 * f.bias + 1)
        return mantissa ? NAN : sign * INFINITY;
    if (exponent_field == 0)
        return sign * ldexp(mantissa, 1 - f.bias - f.mantissa_bits);
    return sign * ldexp(mantissa + (1 << f.mantissa_bits),
                        exponent_field - f.bias - f.mantissa_bits);
}

double kj_half_round(KjTypeKind kind, double value)
{
    return kj_half_to_double(kind, kj_half_from_double(kind, value));
}
