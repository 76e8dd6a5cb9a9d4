/* test_types.c: the type universe.  Types are interned (compared by pointer),
 * every scalar and every rank 1..8 has a name that reads back, and the
 * predicates sort every kind the way the language rules need. */
#include <check.h>
#include <string.h>

#include "kjit_compiler.h"

START_TEST(test_interning_and_names)
{
    static const struct { KjTypeKind kind; const char *name; int size; } scalars[] = {
#define X(kind, name, size) {KJ_TYPE_##kind, name, size},
        KJ_SCALAR_TYPES(X)
#undef X
    };
    for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++) {
        const KjType *t = kj_type_scalar(scalars[i].kind);
        ck_assert_ptr_eq(t, kj_type_scalar(scalars[i].kind));
        ck_assert_ptr_eq(kj_type_from_name(scalars[i].name, strlen(scalars[i].name)), t);
        ck_assert_str_eq(kj_type_name(t), scalars[i].name);
        ck_assert_int_eq(kj_type_size(t), scalars[i].size);
        char name[32];
        strcpy(name, scalars[i].name);
        strcat(name, "[");
        for (int ndim = 1; ndim <= KJ_MAX_DIMS; ndim++) {
            const KjType *a = kj_type_array(t, ndim);
            ck_assert_ptr_eq(a, kj_type_array(t, ndim));
            ck_assert_int_eq(a->kind, KJ_TYPE_ARRAY);
            ck_assert_ptr_eq(a->elem, t);
            ck_assert_int_eq(a->ndim, ndim);
            ck_assert_str_eq(kj_type_name(a), strcat(strcpy((char[40]){0}, name), "]"));
            strcat(name, ",");
        }
    }
    ck_assert_ptr_eq(kj_type_from_name("f16", 3), kj_type_scalar(KJ_TYPE_F16));
    ck_assert_ptr_eq(kj_type_from_name("bf16", 4), kj_type_scalar(KJ_TYPE_BF16));
    ck_assert_ptr_null(kj_type_from_name("f8", 2));
    ck_assert_ptr_null(kj_type_from_name("void", 4));
    ck_assert_ptr_eq(kj_type_from_name("f32x", 3), kj_type_scalar(KJ_TYPE_F32));
    ck_assert_str_eq(kj_type_name(kj_type_void()), "void");
}
END_TEST

START_TEST(test_predicates)
{
    for (int k = KJ_TYPE_BOOL; k <= KJ_TYPE_LAST_SCALAR; k++) {
        const KjType *t = kj_type_scalar(k);
        bool is_int = k >= KJ_TYPE_I8 && k <= KJ_TYPE_U64;
        bool is_signed = k >= KJ_TYPE_I8 && k <= KJ_TYPE_I64;
        bool is_float = k == KJ_TYPE_F32 || k == KJ_TYPE_F64 || k == KJ_TYPE_F16 || k == KJ_TYPE_BF16;
        ck_assert_int_eq(kj_type_is_half(t), k == KJ_TYPE_F16 || k == KJ_TYPE_BF16);
        bool is_complex = k == KJ_TYPE_C64 || k == KJ_TYPE_C128;
        ck_assert_int_eq(kj_type_is_int(t), is_int);
        ck_assert_int_eq(kj_type_is_signed(t), is_signed);
        ck_assert_int_eq(kj_type_is_float(t), is_float);
        ck_assert_int_eq(kj_type_is_complex(t), is_complex);
        ck_assert_int_eq(kj_type_is_numeric(t), is_int || is_float || is_complex);
        ck_assert_int_eq(kj_type_int_bits(t), is_int ? kj_type_size(t) * 8 : k == KJ_TYPE_BOOL);
    }
    ck_assert_ptr_eq(kj_type_complex_part(kj_type_scalar(KJ_TYPE_C64)), kj_type_scalar(KJ_TYPE_F32));
    ck_assert_ptr_eq(kj_type_complex_part(kj_type_scalar(KJ_TYPE_C128)), kj_type_scalar(KJ_TYPE_F64));
    ck_assert_ptr_null(kj_type_complex_part(kj_type_scalar(KJ_TYPE_F64)));
    const KjType *arr = kj_type_array(kj_type_scalar(KJ_TYPE_F32), 1);
    ck_assert(!kj_type_is_numeric(arr));
    ck_assert(!kj_type_is_int(kj_type_scalar(KJ_TYPE_UNTYPED_INT)));
    ck_assert_str_eq(kj_type_name(kj_type_scalar(KJ_TYPE_UNTYPED_FLOAT)), "untyped float");
}
END_TEST

Suite *suite_types(void)
{
    Suite *s = suite_create("types");
    TCase *tc = tcase_create("types");
    tcase_add_test(tc, test_interning_and_names);
    tcase_add_test(tc, test_predicates);
    suite_add_tcase(s, tc);
    return s;
}
