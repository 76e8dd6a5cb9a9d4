/* test_lex.c: the lexer.  Literal values are checked against strtod/strtoull
 * on random inputs (exactly: both sides must give the same double or integer),
 * every punctuator and keyword against its spelling in KJ_TOKENS, locations,
 * comments, and that every lexical error is reported where it is and lexing
 * goes on. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_compiler.h"

typedef struct Lexed {
    KjArena arena;
    KjSource src;
    KjDiag diag;
    KjBuf errors;
    KjToken *tokens;
    int count;
} Lexed;

static void collect(void *user, KjSeverity severity, const char *text)
{
    kj_buf_printf(user, "%s", text);
}

static Lexed *lex(const char *text)
{
    Lexed *lx = kj_xcalloc(1, sizeof *lx);
    lx->src = (KjSource){"t.kern", text, strlen(text)};
    lx->diag = (KjDiag){collect, &lx->errors, 0, 0};
    lx->tokens = kj_lex(&lx->arena, &lx->src, &lx->diag, &lx->count);
    return lx;
}

static void lexed_free(Lexed *lx)
{
    kj_arena_free(&lx->arena);
    kj_buf_free(&lx->errors);
    free(lx);
}

static const char *errors(Lexed *lx)
{
    return lx->errors.data ? lx->errors.data : "";
}

START_TEST(test_int_literals)
{
    static const struct { const char *text; uint64_t value; } cases[] = {
        {"0", 0}, {"42", 42}, {"0xff", 255}, {"0XFF", 255}, {"1_000_000", 1000000},
        {"0xdead_beef", 0xdeadbeef}, {"18446744073709551615", UINT64_MAX},
        {"0xffffffffffffffff", UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Lexed *lx = lex(cases[i].text);
        ck_assert_int_eq(lx->count, 2);
        ck_assert_int_eq(lx->tokens[0].kind, KJ_TOK_INT);
        ck_assert_uint_eq(lx->tokens[0].int_value, cases[i].value);
        ck_assert_str_eq(errors(lx), "");
        lexed_free(lx);
    }
}
END_TEST

/* Random u64 values, in decimal and hex with random underscores, against the
 * value that produced them. */
START_TEST(test_int_literals_random)
{
    srand(12345);
    for (int i = 0; i < 2000; i++) {
        uint64_t value = ((uint64_t)rand() << 42) ^ ((uint64_t)rand() << 21) ^ (uint64_t)rand();
        value >>= rand() % 64;
        char plain[64], text[160];
        snprintf(plain, sizeof plain, i % 2 ? "%llu" : "%llx", (unsigned long long)value);
        size_t n = 0;
        if (i % 2 == 0) {
            text[n++] = '0';
            text[n++] = 'x';
        }
        for (size_t j = 0; plain[j]; j++) {
            if (j > 0 && rand() % 4 == 0)
                text[n++] = '_';
            text[n++] = plain[j];
        }
        text[n] = '\0';
        Lexed *lx = lex(text);
        ck_assert_msg(lx->count == 2 && lx->tokens[0].kind == KJ_TOK_INT, "%s", text);
        ck_assert_msg(lx->tokens[0].int_value == value, "%s", text);
        ck_assert_str_eq(errors(lx), "");
        lexed_free(lx);
    }
}
END_TEST

START_TEST(test_int_overflow)
{
    Lexed *lx = lex("let x = 18446744073709551616;");
    ck_assert_int_eq(lx->diag.error_count, 1);
    ck_assert_ptr_nonnull(strstr(errors(lx), "t.kern:1:9: error: integer literal "
                                             "'18446744073709551616' does not fit in 64 bits"));
    ck_assert_int_eq(lx->tokens[3].kind, KJ_TOK_INT); /* still a literal */
    ck_assert_int_eq(lx->tokens[4].kind, KJ_TOK_SEMI);
    lexed_free(lx);
    lx = lex("0x1_0000_0000_0000_0000");
    ck_assert_int_eq(lx->diag.error_count, 1);
    lexed_free(lx);
}
END_TEST

START_TEST(test_float_literals)
{
    static const struct { const char *text; double value; } cases[] = {
        {"1.0", 1.0}, {".5", 0.5}, {"2.", 2.0}, {"1e-3", 1e-3}, {"6.02e23", 6.02e23},
        {"1_000.25", 1000.25}, {"1E+2", 100.0}, {"0.008726645", 0.008726645}, {"1e1_0", 1e10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Lexed *lx = lex(cases[i].text);
        ck_assert_msg(lx->count == 2 && lx->tokens[0].kind == KJ_TOK_FLOAT, "%s", cases[i].text);
        ck_assert_double_eq(lx->tokens[0].float_value, cases[i].value);
        ck_assert_str_eq(errors(lx), "");
        lexed_free(lx);
    }
}
END_TEST

/* Random doubles printed with 17 significant digits must read back exactly
 * (tolerance 0: the lexer must agree with strtod bit for bit). */
START_TEST(test_float_literals_random)
{
    srand(777);
    for (int i = 0; i < 2000; i++) {
        double value = (double)rand() / RAND_MAX * 1000.0;
        int exp10 = rand() % 40 - 20;
        char text[64];
        snprintf(text, sizeof text, "%.17e", value);
        char *e = strchr(text, 'e');
        snprintf(e, 16, "e%d", exp10 + atoi(e + 1));
        double reference = strtod(text, NULL);
        Lexed *lx = lex(text);
        ck_assert_msg(lx->count == 2 && lx->tokens[0].kind == KJ_TOK_FLOAT, "%s", text);
        ck_assert_msg(lx->tokens[0].float_value == reference, "%s", text);
        lexed_free(lx);
    }
}
END_TEST

START_TEST(test_float_overflow_and_malformed)
{
    Lexed *lx = lex("1e999 0xfg 1__0 1_ 2.5x 7");
    ck_assert_int_eq(lx->diag.error_count, 5);
    ck_assert_ptr_nonnull(strstr(errors(lx), "t.kern:1:1: error: float literal '1e999' is too large"));
    ck_assert_ptr_nonnull(strstr(errors(lx), "t.kern:1:7: error: malformed number '0xfg'"));
    ck_assert_ptr_nonnull(strstr(errors(lx), "t.kern:1:12: error: malformed number '1__0'"));
    ck_assert_ptr_nonnull(strstr(errors(lx), "t.kern:1:17: error: malformed number '1_'"));
    ck_assert_ptr_nonnull(strstr(errors(lx), "t.kern:1:20: error: malformed number '2.5x'"));
    ck_assert_int_eq(lx->count, 7);
    ck_assert_uint_eq(lx->tokens[5].int_value, 7);
    lexed_free(lx);
}
END_TEST

START_TEST(test_every_punctuator_and_keyword)
{
    static const struct { KjTokenKind kind; const char *spelling; } all[] = {
#define X(kind, spelling) {KJ_TOK_##kind, spelling},
        KJ_TOKENS(X)
#undef X
    };
    int checked = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (all[i].kind < KJ_TOK_KW_FN)
            continue; /* classes, not spellings */
        Lexed *lx = lex(all[i].spelling);
        ck_assert_msg(lx->count == 2 && lx->tokens[0].kind == all[i].kind, "%s", all[i].spelling);
        ck_assert_int_eq(lx->tokens[0].len, (int)strlen(all[i].spelling));
        ck_assert_str_eq(kj_token_name(all[i].kind), all[i].spelling);
        lexed_free(lx);
        checked++;
    }
    ck_assert_int_eq(checked, KJ_TOK_COUNT - KJ_TOK_KW_FN);
}
END_TEST

static void assert_kinds(const char *text, const KjTokenKind *kinds, int n)
{
    Lexed *lx = lex(text);
    ck_assert_msg(lx->count == n + 1, "%s: %d tokens", text, lx->count - 1);
    for (int i = 0; i < n; i++)
        ck_assert_msg(lx->tokens[i].kind == kinds[i], "%s: token %d is %s", text, i,
                      kj_token_name(lx->tokens[i].kind));
    ck_assert_int_eq(lx->tokens[n].kind, KJ_TOK_EOF);
    lexed_free(lx);
}

START_TEST(test_maximal_munch_and_dots)
{
    assert_kinds("a<<=b>>c", (KjTokenKind[]){KJ_TOK_IDENT, KJ_TOK_SHL_ASSIGN, KJ_TOK_IDENT,
                                             KJ_TOK_SHR, KJ_TOK_IDENT}, 5);
    assert_kinds("x**-2", (KjTokenKind[]){KJ_TOK_IDENT, KJ_TOK_STARSTAR, KJ_TOK_MINUS,
                                          KJ_TOK_INT}, 4);
    assert_kinds("a.shape[0]", (KjTokenKind[]){KJ_TOK_IDENT, KJ_TOK_DOT, KJ_TOK_IDENT,
                                               KJ_TOK_LBRACKET, KJ_TOK_INT, KJ_TOK_RBRACKET}, 6);
    assert_kinds("z.real*2.", (KjTokenKind[]){KJ_TOK_IDENT, KJ_TOK_DOT, KJ_TOK_IDENT,
                                              KJ_TOK_STAR, KJ_TOK_FLOAT}, 5);
    assert_kinds("fnx in_ iff", (KjTokenKind[]){KJ_TOK_IDENT, KJ_TOK_IDENT, KJ_TOK_IDENT}, 3);
    assert_kinds("->-", (KjTokenKind[]){KJ_TOK_ARROW, KJ_TOK_MINUS}, 2);
    assert_kinds("&&&", (KjTokenKind[]){KJ_TOK_AMPAMP, KJ_TOK_AMP}, 2);
}
END_TEST

START_TEST(test_comments_and_locations)
{
    Lexed *lx = lex("a // one\n\tb /* two\nthree */ c\n/**/d/***/e");
    ck_assert_int_eq(lx->count, 6);
    int lines[] = {1, 2, 3, 4, 4}, cols[] = {1, 2, 10, 5, 11};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(lx->tokens[i].kind, KJ_TOK_IDENT);
        ck_assert_int_eq(lx->tokens[i].loc.line, lines[i]);
        ck_assert_int_eq(lx->tokens[i].loc.col, cols[i]);
    }
    ck_assert_str_eq(errors(lx), "");
    lexed_free(lx);
}
END_TEST

START_TEST(test_unterminated_comment)
{
    Lexed *lx = lex("a\n  /* never\nclosed");
    ck_assert_int_eq(lx->diag.error_count, 1);
    ck_assert_str_eq(errors(lx), "t.kern:2:3: error: unterminated block comment\n"
                                 "  /* never\n"
                                 "  ^\n");
    ck_assert_int_eq(lx->count, 2);
    lexed_free(lx);
}
END_TEST

START_TEST(test_invalid_characters_continue)
{
    static const char text[] = "a $ b\n\t# c \x01 d";
    Lexed *lx = lex(text);
    ck_assert_int_eq(lx->diag.error_count, 3);
    ck_assert_ptr_nonnull(strstr(errors(lx), "t.kern:1:3: error: invalid character '$'\na $ b\n  ^\n"));
    ck_assert_ptr_nonnull(strstr(errors(lx), "t.kern:2:2: error: invalid character '#'\n\t# c"));
    ck_assert_ptr_nonnull(strstr(errors(lx), "\n\t^\n"));
    ck_assert_ptr_nonnull(strstr(errors(lx), "t.kern:2:6: error: invalid byte 0x01"));
    /* a ERROR b ERROR c ERROR d EOF */
    ck_assert_int_eq(lx->count, 8);
    ck_assert_int_eq(lx->tokens[6].kind, KJ_TOK_IDENT);
    lexed_free(lx);
}
END_TEST

START_TEST(test_nul_byte_inside)
{
    static const char text[] = "a\0b";
    Lexed *lx = kj_xcalloc(1, sizeof *lx);
    lx->src = (KjSource){"t.kern", text, 3};
    lx->diag = (KjDiag){collect, &lx->errors, 0, 0};
    lx->tokens = kj_lex(&lx->arena, &lx->src, &lx->diag, &lx->count);
    ck_assert_int_eq(lx->count, 4);
    ck_assert_int_eq(lx->tokens[1].kind, KJ_TOK_ERROR);
    ck_assert_int_eq(lx->tokens[2].kind, KJ_TOK_IDENT);
    ck_assert_int_eq(lx->diag.error_count, 1);
    lexed_free(lx);
}
END_TEST

Suite *suite_lex(void)
{
    Suite *s = suite_create("lex");
    TCase *tc = tcase_create("lex");
    tcase_add_test(tc, test_int_literals);
    tcase_add_test(tc, test_int_literals_random);
    tcase_add_test(tc, test_int_overflow);
    tcase_add_test(tc, test_float_literals);
    tcase_add_test(tc, test_float_literals_random);
    tcase_add_test(tc, test_float_overflow_and_malformed);
    tcase_add_test(tc, test_every_punctuator_and_keyword);
    tcase_add_test(tc, test_maximal_munch_and_dots);
    tcase_add_test(tc, test_comments_and_locations);
    tcase_add_test(tc, test_unterminated_comment);
    tcase_add_test(tc, test_invalid_characters_continue);
    tcase_add_test(tc, test_nul_byte_inside);
    suite_add_tcase(s, tc);
    return s;
}
