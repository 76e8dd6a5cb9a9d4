/* test_grammar.c: grammar/kern.ebnf and the parser must describe the same
 * language.  Every production the parser implements (kj_parser_productions,
 * one per parse function) needs a rule of the same name in the EBNF, every
 * rule in the EBNF needs its parse function, and every lowercase name a rule
 * uses must be defined.  And the list itself must be true: compiler/parse.c has,
 * for each production, a function of that name opened by its rule comment
 * (`// name = ...`), and no rule comment for anything else. */
#include <check.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_compiler.h"

enum { MAX_NAMES = 256 };

typedef struct Names {
    char *items[MAX_NAMES];
    int count;
} Names;

static bool names_has(const Names *names, const char *s)
{
    for (int i = 0; i < names->count; i++)
        if (strcmp(names->items[i], s) == 0)
            return true;
    return false;
}

static void names_add(Names *names, const char *s, size_t len)
{
    ck_assert_int_lt(names->count, MAX_NAMES);
    char *copy = kj_xmalloc(len + 1);
    memcpy(copy, s, len);
    copy[len] = '\0';
    names->items[names->count++] = copy;
}

static void names_free(Names *names)
{
    for (int i = 0; i < names->count; i++)
        free(names->items[i]);
    names->count = 0;
}

static char *read_text(const char *path)
{
    FILE *in = fopen(path, "rb");
    ck_assert_msg(in != NULL, "%s not found (run the tests from the repo root)", path);
    fseek(in, 0, SEEK_END);
    long n = ftell(in);
    fseek(in, 0, SEEK_SET);
    char *text = kj_xmalloc((size_t)n + 1);
    ck_assert_int_eq(fread(text, 1, (size_t)n, in), (size_t)n);
    text[n] = '\0';
    fclose(in);
    return text;
}

/* Blanks out (* comments *) and "quoted terminals", keeping newlines, so what
 * is left is rule names, references and punctuation. */
static void strip_comments_and_terminals(char *text)
{
    for (char *p = text; *p; p++) {
        if (p[0] == '(' && p[1] == '*') {
            char *end = strstr(p + 2, "*)");
            ck_assert_msg(end != NULL, "unterminated comment in kern.ebnf");
            for (; p < end + 2; p++)
                if (*p != '\n')
                    *p = ' ';
            p--;
        } else if (*p == '"') {
            *p++ = ' ';
            while (*p && *p != '"' && *p != '\n')
                *p++ = ' ';
            ck_assert_msg(*p == '"', "unterminated string in kern.ebnf");
            *p = ' ';
        }
    }
}

/* A rule starts a line: `name = ...`. */
static void collect(const char *text, Names *defined, Names *used)
{
    bool line_start = true;
    for (const char *p = text; *p;) {
        if (*p == '\n') {
            line_start = true;
            p++;
            continue;
        }
        if (islower((unsigned char)*p) || *p == '_') {
            const char *start = p;
            while (islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_')
                p++;
            const char *q = p;
            while (*q == ' ' || *q == '\t')
                q++;
            size_t len = (size_t)(p - start);
            if (line_start && *q == '=') {
                char name[64];
                snprintf(name, sizeof name, "%.*s", (int)len, start);
                ck_assert_msg(!names_has(defined, name), "rule %s defined twice", name);
                names_add(defined, start, len);
            } else {
                names_add(used, start, len);
            }
            line_start = false;
            continue;
        }
        if (!isspace((unsigned char)*p))
            line_start = false;
        p++;
    }
}

START_TEST(test_ebnf_matches_parser)
{
    char *text = read_text("grammar/kern.ebnf");
    strip_comments_and_terminals(text);
    Names defined = {0}, used = {0};
    collect(text, &defined, &used);
    ck_assert_int_gt(defined.count, 10);

    int productions = 0;
    for (const char *const *name = kj_parser_productions; *name; name++, productions++)
        ck_assert_msg(names_has(&defined, *name),
                      "the parser implements '%s' but grammar/kern.ebnf has no rule for it", *name);
    for (int i = 0; i < defined.count; i++) {
        bool found = false;
        for (const char *const *name = kj_parser_productions; *name; name++)
            found = found || strcmp(*name, defined.items[i]) == 0;
        ck_assert_msg(found, "grammar/kern.ebnf has rule '%s' but no parse function implements it",
                      defined.items[i]);
    }
    ck_assert_int_eq(productions, defined.count);
    for (int i = 0; i < used.count; i++)
        ck_assert_msg(names_has(&defined, used.items[i]),
                      "grammar/kern.ebnf uses '%s', which no rule defines", used.items[i]);
    names_free(&defined);
    names_free(&used);
    free(text);
}
END_TEST

START_TEST(test_productions_are_parse_functions)
{
    char *text = read_text("compiler/parse.c");
    int productions = 0;
    for (const char *const *name = kj_parser_productions; *name; name++, productions++) {
        char comment[80], definition[80];
        snprintf(comment, sizeof comment, "\n// %s = ", *name);
        snprintf(definition, sizeof definition, "%s(Parser *p", *name);
        const char *at = strstr(text, comment);
        ck_assert_msg(at != NULL, "parse.c has no rule comment '// %s = ...'", *name);
        const char *line2 = strchr(at + 1, '\n');
        const char *line2_end = line2 ? strchr(line2 + 1, '\n') : NULL;
        const char *def = strstr(at, definition);
        ck_assert_msg(def != NULL && line2_end && def > line2 && def < line2_end &&
                          (def[-1] == ' ' || def[-1] == '*'),
                      "the rule comment for '%s' is not followed by its function %s(Parser *p...)",
                      *name, *name);
    }
    int comments = 0;
    for (const char *p = text; (p = strstr(p, "\n// ")) != NULL; p++) {
        const char *q = p + 4;
        while (islower((unsigned char)*q) || *q == '_')
            q++;
        if (q > p + 4 && strncmp(q, " = ", 3) == 0)
            comments++;
    }
    ck_assert_int_eq(comments, productions);
    free(text);
}
END_TEST

Suite *suite_grammar(void)
{
    Suite *s = suite_create("grammar");
    TCase *tc = tcase_create("grammar");
    tcase_add_test(tc, test_ebnf_matches_parser);
    tcase_add_test(tc, test_productions_are_parse_functions);
    suite_add_tcase(s, tc);
    return s;
}
