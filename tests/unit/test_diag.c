/* test_diag.c: the reporter's exact format (location, source line, caret
 * lined up through tabs), notes, errors without a position, the error cap, and
 * the utilities it stands on (KjBuf, the arena, the hash). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_compiler.h"

static void collect(void *user, KjSeverity severity, const char *text)
{
    kj_buf_printf(user, "%s%s", severity == KJ_SEVERITY_NOTE ? "[note]" : "", text);
}

START_TEST(test_format_and_caret)
{
    static const char text[] = "fn f() {\n\t  let x = y;\r\n}";
    KjSource src = {"dir/a.kern", text, strlen(text)};
    KjBuf out = {0};
    KjDiag diag = {collect, &out, 0, 0};
    kj_error(&diag, (KjLoc){&src, 2, 12}, "unknown name '%s'", "y");
    kj_note(&diag, (KjLoc){&src, 1, 4}, "in this function");
    kj_error_plain(&diag, "missing.kern", "cannot read (%s)", "No such file");
    kj_error(&diag, (KjLoc){&src, 3, 5}, "past the end");
    ck_assert_str_eq(out.data, "dir/a.kern:2:12: error: unknown name 'y'\n"
                               "\t  let x = y;\n"
                               "\t          ^\n"
                               "[note]dir/a.kern:1:4: note: in this function\n"
                               "fn f() {\n"
                               "   ^\n"
                               "missing.kern: error: cannot read (No such file)\n"
                               "dir/a.kern:3:5: error: past the end\n"
                               "}\n"
                               "    ^\n");
    ck_assert_int_eq(diag.error_count, 3);
    kj_buf_free(&out);
}
END_TEST

START_TEST(test_cap_and_no_sink)
{
    KjSource src = {"a.kern", "x", 1};
    KjBuf out = {0};
    KjDiag diag = {collect, &out, 0, 3};
    for (int i = 0; i < 10; i++)
        kj_error(&diag, (KjLoc){&src, 1, 1}, "e%d", i);
    ck_assert_int_eq(diag.error_count, 10);
    ck_assert_ptr_nonnull(strstr(out.data, "e2"));
    ck_assert_ptr_null(strstr(out.data, "e3"));
    ck_assert_ptr_nonnull(strstr(out.data, "error: too many errors (3), stopping here\n"));
    kj_buf_free(&out);

    KjDiag silent = {0};
    kj_error(&silent, (KjLoc){&src, 1, 1}, "counted, not printed");
    ck_assert_int_eq(silent.error_count, 1);
}
END_TEST

START_TEST(test_utilities)
{
    KjArena arena = {0};
    KjVec vec = {0};
    for (intptr_t i = 0; i < 1000; i++)
        kj_vec_push(&arena, &vec, (void *)i);
    ck_assert_int_eq(vec.count, 1000);
    for (intptr_t i = 0; i < 1000; i++)
        ck_assert_int_eq((intptr_t)vec.items[i], i);
    unsigned char *big = kj_arena_alloc(&arena, 1 << 20);
    int nonzero = 0;
    for (int i = 0; i < 1 << 20; i++)
        nonzero += big[i] != 0;
    ck_assert_int_eq(nonzero, 0);
    ck_assert_int_eq((uintptr_t)kj_arena_alloc(&arena, 3) % 16, 0);
    ck_assert_str_eq(kj_arena_printf(&arena, "%s-%d", "x", 42), "x-42");
    ck_assert_str_eq(kj_arena_strndup(&arena, "abcdef", 3), "abc");
    kj_arena_free(&arena);

    KjBuf buf = {0};
    for (int i = 0; i < 100; i++)
        kj_buf_printf(&buf, "%d,", i);
    ck_assert_int_eq(buf.len, strlen(buf.data));
    ck_assert_int_eq(strncmp(buf.data, "0,1,2,", 6), 0);
    kj_buf_free(&buf);

    /* FNV-1a test vectors. */
    ck_assert_uint_eq(kj_hash_bytes(0, "", 0), 0xcbf29ce484222325ull);
    ck_assert_uint_eq(kj_hash_bytes(0, "a", 1), 0xaf63dc4c8601ec8cull);
    ck_assert_uint_eq(kj_hash_bytes(0, "foobar", 6), 0x85944171f73967e8ull);
    ck_assert_uint_eq(kj_hash_bytes(kj_hash_bytes(0, "foo", 3), "bar", 3),
                      kj_hash_bytes(0, "foobar", 6));
}
END_TEST

Suite *suite_diag(void)
{
    Suite *s = suite_create("diag");
    TCase *tc = tcase_create("diag");
    tcase_add_test(tc, test_format_and_caret);
    tcase_add_test(tc, test_cap_and_no_sink);
    tcase_add_test(tc, test_utilities);
    suite_add_tcase(s, tc);
    return s;
}
