/*
 * inputs.c: seeded inputs.  A case's values depend only on the seed, the
 * function, the case and the recipe, so that every process (one per
 * instruction set) makes the same ones without passing them around.
 */
#include "modes.h"

#include <math.h>
#include <string.h>

static const char *const recipe_names[RECIPE_COUNT] = {"wild", "tame", "index"};

const char *modes_recipe_name(int recipe)
{
    return recipe >= 0 && recipe < RECIPE_COUNT ? recipe_names[recipe] : "?";
}

int modes_recipe_from_name(const char *name)
{
    for (int i = 0; i < RECIPE_COUNT; i++)
        if (strcmp(name, recipe_names[i]) == 0)
            return i;
    return -1;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 31);
}

static uint64_t mix_text(uint64_t h, const char *s)
{
    for (; s && *s; s++)
        h = mix(h, (unsigned char)*s);
    return mix(h, 0xff);
}

ModesRng modes_rng(uint64_t seed, const char *a, const char *b, int c, int d)
{
    uint64_t h = mix(0x853c49e6748fea9bULL, seed);
    h = mix_text(h, a);
    h = mix_text(h, b);
    h = mix(h, (uint64_t)c);
    h = mix(h, (uint64_t)d);
    return (ModesRng){h ? h : 1};
}

uint64_t modes_rng_next(ModesRng *rng) /* splitmix64 */
{
    uint64_t z = (rng->state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double uniform01(ModesRng *rng) { return (double)(modes_rng_next(rng) >> 11) * 0x1.0p-53; }

static uint64_t below(ModesRng *rng, uint64_t n) { return n ? modes_rng_next(rng) % n : 0; }

static int int_bits(kjit_dtype t)
{
    switch (t) {
    case KJIT_I8: case KJIT_U8: return 8;
    case KJIT_I16: case KJIT_U16: return 16;
    case KJIT_I32: case KJIT_U32: return 32;
    default: return 64;
    }
}

static bool is_signed(kjit_dtype t) { return t >= KJIT_I8 && t <= KJIT_I64; }

/* An integer of the recipe, as a 64-bit pattern (truncated when stored). */
static uint64_t integer(ModesRng *rng, kjit_dtype t, int recipe, int64_t extent)
{
    int bits = int_bits(t);
    bool sign = is_signed(t);
    if (recipe == RECIPE_INDEX)
        return below(rng, (uint64_t)(extent > 0 ? extent : 1));
    if (recipe == RECIPE_TAME)
        return sign ? (uint64_t)((int64_t)below(rng, 201) - 100) : below(rng, 201);
    uint64_t top = bits == 64 ? ~0ULL : (1ULL << bits) - 1;
    uint64_t min_signed = 1ULL << (bits - 1);
    if (below(rng, 4) == 0) { /* an edge */
        uint64_t edges[] = {0, 1, top /* -1 or MAX */, 2, 3, 7, 31, 32, 63, 64,
                            min_signed, min_signed - 1, min_signed + 1, top - 1};
        uint64_t v = edges[below(rng, sizeof edges / sizeof *edges)];
        return sign && bits < 64 && (v & min_signed) ? v | ~top : v & top; /* sign-extend */
    }
    uint64_t v = modes_rng_next(rng) & top;
    if (sign && bits < 64 && (v & min_signed))
        v |= ~top;
    return v;
}

static double real(ModesRng *rng, int recipe)
{
    if (recipe == RECIPE_INDEX)
        return uniform01(rng);
    if (recipe == RECIPE_TAME)
        return uniform01(rng) * 8.0 - 4.0;
    if (below(rng, 10) == 0) {
        static const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0,
                                          0.5, 4.9e-324, -2.2250738585072014e-308, 1e30, -3e38};
        return specials[below(rng, sizeof specials / sizeof *specials)];
    }
    double m = uniform01(rng) * ldexp(1.0, (int)below(rng, 21) - 10);
    return below(rng, 2) ? -m : m;
}

void modes_fill(ModesRng *rng, kjit_dtype dtype, void *data, int64_t n, int recipe,
                int64_t extent)
{
    for (int64_t i = 0; i < n; i++) {
        switch (dtype) {
        case KJIT_BOOL: ((uint8_t *)data)[i] = (uint8_t)below(rng, 2); break;
        case KJIT_I8: case KJIT_U8: ((uint8_t *)data)[i] = (uint8_t)integer(rng, dtype, recipe, extent); break;
        case KJIT_I16: case KJIT_U16: ((uint16_t *)data)[i] = (uint16_t)integer(rng, dtype, recipe, extent); break;
        case KJIT_I32: case KJIT_U32: ((uint32_t *)data)[i] = (uint32_t)integer(rng, dtype, recipe, extent); break;
        case KJIT_I64: case KJIT_U64: ((uint64_t *)data)[i] = integer(rng, dtype, recipe, extent); break;
        case KJIT_F32: ((float *)data)[i] = (float)real(rng, recipe); break;
        case KJIT_F64: ((double *)data)[i] = real(rng, recipe); break;
        case KJIT_C64:
            ((float *)data)[2 * i] = (float)real(rng, recipe);
            ((float *)data)[2 * i + 1] = (float)real(rng, recipe);
            break;
        case KJIT_C128:
            ((double *)data)[2 * i] = real(rng, recipe);
            ((double *)data)[2 * i + 1] = real(rng, recipe);
            break;
        case KJIT_F16: case KJIT_BF16:
            ((uint16_t *)data)[i] = kjit_half_from_double(dtype, real(rng, recipe));
            break;
        default: break;
        }
    }
}

kjit_arg modes_scalar(ModesRng *rng, kjit_dtype dtype, int recipe, int64_t extent)
{
    kjit_arg a = {.kind = KJIT_ARG_SCALAR, .dtype = dtype};
    int64_t bound = extent > 0 ? extent : 16;
    if (dtype == KJIT_BOOL) {
        a.value.i = (int64_t)below(rng, 2);
    } else if (dtype >= KJIT_I8 && dtype <= KJIT_U64) {
        /* Scalars are sizes, counts and offsets: [1, min(extent, 64)] keeps
         * loops short; index: [0, extent). */
        int64_t v = recipe == RECIPE_INDEX ? (int64_t)below(rng, (uint64_t)bound)
                                           : 1 + (int64_t)below(rng, (uint64_t)(bound < 64 ? bound : 64));
        if (is_signed(dtype))
            a.value.i = v;
        else
            a.value.u = (uint64_t)v;
    } else if (dtype == KJIT_C64 || dtype == KJIT_C128) {
        a.value.c[0] = uniform01(rng) * 4.0 - 2.0;
        a.value.c[1] = uniform01(rng) * 4.0 - 2.0;
        if (dtype == KJIT_C64) {
            a.value.c[0] = (float)a.value.c[0];
            a.value.c[1] = (float)a.value.c[1];
        }
    } else {
        double v = recipe == RECIPE_INDEX ? uniform01(rng) : uniform01(rng) * 4.0 - 2.0;
        if (dtype == KJIT_F32)
            v = (float)v;
        else if (dtype == KJIT_F16 || dtype == KJIT_BF16)
            v = kjit_half_to_double(dtype, kjit_half_from_double(dtype, v));
        a.value.f = v;
    }
    return a;
}
