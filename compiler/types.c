/*
 * types.c: the type universe.  Every type is a constant in a static table, so
 * types are compared by pointer, need no allocation, and are safe to share
 * between threads and compilations.  Array types exist for every scalar element
 * and every rank from 1 to KJ_MAX_DIMS; their names ("f32[,]") are string
 * literals made by the same X-macro as the table.
 */
#include "kjit_compiler.h"

#include <string.h>

static const KjType scalar_types[KJ_TYPE_COUNT] = {
    [KJ_TYPE_VOID] = {KJ_TYPE_VOID, NULL, 0},
#define X(kind, name, size) [KJ_TYPE_##kind] = {KJ_TYPE_##kind, NULL, 0},
    KJ_SCALAR_TYPES(X)
#undef X
    [KJ_TYPE_UNTYPED_INT] = {KJ_TYPE_UNTYPED_INT, NULL, 0},
    [KJ_TYPE_UNTYPED_FLOAT] = {KJ_TYPE_UNTYPED_FLOAT, NULL, 0},
};

static const char *const scalar_names[KJ_TYPE_COUNT] = {
    [KJ_TYPE_VOID] = "void",
#define X(kind, name, size) [KJ_TYPE_##kind] = name,
    KJ_SCALAR_TYPES(X)
#undef X
    [KJ_TYPE_UNTYPED_INT] = "untyped int",
    [KJ_TYPE_UNTYPED_FLOAT] = "untyped float",
};

static const int scalar_sizes[KJ_TYPE_COUNT] = {
#define X(kind, name, size) [KJ_TYPE_##kind] = size,
    KJ_SCALAR_TYPES(X)
#undef X
};

/* One row per scalar: its array types of rank 1..8 (index ndim - 1). */
#define KJ_ARRAY_ROW(kind)                                                                    \
    {{KJ_TYPE_ARRAY, &scalar_types[KJ_TYPE_##kind], 1}, {KJ_TYPE_ARRAY, &scalar_types[KJ_TYPE_##kind], 2}, \
     {KJ_TYPE_ARRAY, &scalar_types[KJ_TYPE_##kind], 3}, {KJ_TYPE_ARRAY, &scalar_types[KJ_TYPE_##kind], 4}, \
     {KJ_TYPE_ARRAY, &scalar_types[KJ_TYPE_##kind], 5}, {KJ_TYPE_ARRAY, &scalar_types[KJ_TYPE_##kind], 6}, \
     {KJ_TYPE_ARRAY, &scalar_types[KJ_TYPE_##kind], 7}, {KJ_TYPE_ARRAY, &scalar_types[KJ_TYPE_##kind], 8}}

static const KjType array_types[KJ_TYPE_COUNT][KJ_MAX_DIMS] = {
#define X(kind, name, size) [KJ_TYPE_##kind] = KJ_ARRAY_ROW(kind),
    KJ_SCALAR_TYPES(X)
#undef X
};

static const char *const array_names[KJ_TYPE_COUNT][KJ_MAX_DIMS] = {
#define X(kind, name, size)                                                                  \
    [KJ_TYPE_##kind] = {name "[]", name "[,]", name "[,,]", name "[,,,]", name "[,,,,]",       \
                        name "[,,,,,]", name "[,,,,,,]", name "[,,,,,,,]"},
    KJ_SCALAR_TYPES(X)
#undef X
};

_Static_assert(KJ_MAX_DIMS == 8, "array_types and array_names spell out 8 ranks");

static bool is_element_kind(KjTypeKind kind)
{
    return kind >= KJ_TYPE_BOOL && kind <= KJ_TYPE_LAST_SCALAR;
}

const KjType *kj_type_scalar(KjTypeKind kind)
{
    if (kind == KJ_TYPE_ARRAY || kind < 0 || kind >= KJ_TYPE_COUNT)
        kj_die("kj_type_scalar: kind %d is not a scalar", (int)kind);
    return &scalar_types[kind];
}

const KjType *kj_type_void(void)
{
    return &scalar_types[KJ_TYPE_VOID];
}

const KjType *kj_type_array(const KjType *elem, int ndim)
{
    if (!elem || !is_element_kind(elem->kind) || ndim < 1 || ndim > KJ_MAX_DIMS)
        kj_die("kj_type_array: bad element or rank %d", ndim);
    return &array_types[elem->kind][ndim - 1];
}

const KjType *kj_type_from_name(const char *name, size_t len)
{
    for (int kind = KJ_TYPE_BOOL; kind <= KJ_TYPE_LAST_SCALAR; kind++) {
        const char *s = scalar_names[kind];
        if (strlen(s) == len && memcmp(s, name, len) == 0)
            return &scalar_types[kind];
    }
    return NULL;
}

const char *kj_type_name(const KjType *type)
{
    if (!type)
        return "<no type>";
    if (type->kind == KJ_TYPE_ARRAY)
        return array_names[type->elem->kind][type->ndim - 1];
    return scalar_names[type->kind];
}

int kj_type_size(const KjType *type)
{
    if (type->kind == KJ_TYPE_UNTYPED_INT || type->kind == KJ_TYPE_UNTYPED_FLOAT)
        return 8;
    if (type->kind == KJ_TYPE_ARRAY)
        return 0;
    return scalar_sizes[type->kind];
}

bool kj_type_is_int(const KjType *type)
{
    return type && type->kind >= KJ_TYPE_I8 && type->kind <= KJ_TYPE_U64;
}

bool kj_type_is_signed(const KjType *type)
{
    return type && type->kind >= KJ_TYPE_I8 && type->kind <= KJ_TYPE_I64;
}

bool kj_type_is_float(const KjType *type)
{
    return type && (type->kind == KJ_TYPE_F32 || type->kind == KJ_TYPE_F64 || kj_type_is_half(type));
}

bool kj_type_is_half(const KjType *type)
{
    return type && (type->kind == KJ_TYPE_F16 || type->kind == KJ_TYPE_BF16);
}

bool kj_type_is_complex(const KjType *type)
{
    return type && (type->kind == KJ_TYPE_C64 || type->kind == KJ_TYPE_C128);
}

bool kj_type_is_numeric(const KjType *type)
{
    return kj_type_is_int(type) || kj_type_is_float(type) || kj_type_is_complex(type);
}

const KjType *kj_type_complex_part(const KjType *type)
{
    if (!type)
        return NULL;
    if (type->kind == KJ_TYPE_C64)
        return &scalar_types[KJ_TYPE_F32];
    if (type->kind == KJ_TYPE_C128)
        return &scalar_types[KJ_TYPE_F64];
    return NULL;
}

int kj_type_int_bits(const KjType *type)
{
    if (!type)
        return 0;
    if (type->kind == KJ_TYPE_BOOL)
        return 1;
    if (kj_type_is_int(type))
        return scalar_sizes[type->kind] * 8;
    return 0;
}
