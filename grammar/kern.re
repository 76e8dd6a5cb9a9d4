/*
 * kern.re: the .kern lexer (re2c generates build/gen/lex.c from it).
 *
 * One pass over the whole source, producing an array of tokens that ends with
 * one KJ_TOK_EOF.  The source must be NUL-terminated at src->len: re2c runs in
 * its bounded "sentinel + limit" mode, so NUL bytes inside the text are merely
 * invalid characters, and nothing is ever read past the end.
 *
 * Errors never stop the lexer.  An invalid character is reported and becomes a
 * KJ_TOK_ERROR token, which the parser skips silently (the error is already
 * out) instead of reporting a second, confusing syntax error.  A malformed or
 * overflowing number is reported and still becomes a literal (value 0), so the
 * statement around it parses normally.  Comments are scanned by hand: a block
 * comment may hold any bytes, and an unterminated one is reported at its start.
 * A string literal ("x =\n", print's arguments only) keeps its quotes in the
 * token; the lexer checks its escapes (\n \t \" \\) and the parser decodes it.
 */
#include "kjit_compiler.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *kj_token_name(KjTokenKind kind)
{
    static const char *const names[KJ_TOK_COUNT] = {
#define X(kind, spelling) [KJ_TOK_##kind] = spelling,
        KJ_TOKENS(X)
#undef X
    };
    if ((int)kind < 0 || kind >= KJ_TOK_COUNT)
        kj_unreachable();
    return names[kind];
}

typedef struct Lexer {
    const KjSource *src;
    KjDiag *diag;
    const unsigned char *text, *limit;
    const unsigned char *line_start;
    int line;
    KjToken *tokens;
    int count, capacity;
} Lexer;

static KjLoc loc_at(const Lexer *lx, const unsigned char *p)
{
    return (KjLoc){lx->src, lx->line, (int)(p - lx->line_start) + 1};
}

static KjToken *push(Lexer *lx, KjTokenKind kind, const unsigned char *start,
                     const unsigned char *end)
{
    if (lx->count == lx->capacity) {
        lx->capacity = lx->capacity ? lx->capacity * 2 : 256;
        lx->tokens = kj_xrealloc(lx->tokens, sizeof(KjToken) * (size_t)lx->capacity);
    }
    KjToken *tok = &lx->tokens[lx->count++];
    memset(tok, 0, sizeof *tok);
    tok->kind = kind;
    tok->start = (const char *)start;
    tok->len = (int)(end - start);
    tok->loc = loc_at(lx, start);
    return tok;
}

/* The digits of a literal without its underscores, in a buffer the caller
 * frees. */
static char *strip_underscores(const unsigned char *start, const unsigned char *end)
{
    char *digits = kj_xmalloc((size_t)(end - start) + 1);
    size_t n = 0;
    for (const unsigned char *p = start; p < end; p++)
        if (*p != '_')
            digits[n++] = (char)*p;
    digits[n] = '\0';
    return digits;
}

static int digit_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return c - 'A' + 10;
}

static void lex_int(Lexer *lx, const unsigned char *start, const unsigned char *end, int base)
{
    KjToken *tok = push(lx, KJ_TOK_INT, start, end);
    char *digits = strip_underscores(start + (base == 16 ? 2 : 0), end);
    uint64_t value = 0;
    for (const char *p = digits; *p; p++) {
        unsigned d = (unsigned)digit_value(*p);
        if (value > (UINT64_MAX - d) / (uint64_t)base) {
            kj_error(lx->diag, tok->loc, "integer literal '%.*s' does not fit in 64 bits",
                     tok->len, tok->start);
            value = 0;
            break;
        }
        value = value * (uint64_t)base + d;
    }
    tok->int_value = value;
    free(digits);
}

static void lex_float(Lexer *lx, const unsigned char *start, const unsigned char *end)
{
    KjToken *tok = push(lx, KJ_TOK_FLOAT, start, end);
    char *digits = strip_underscores(start, end);
    errno = 0;
    double value = strtod(digits, NULL);
    if (errno == ERANGE && isinf(value)) {
        kj_error(lx->diag, tok->loc, "float literal '%.*s' is too large for f64", tok->len,
                 tok->start);
        value = 0;
    }
    tok->float_value = value;
    free(digits);
}

static void lex_bad_number(Lexer *lx, const unsigned char *start, const unsigned char *end)
{
    /* Still a literal, so the expression around it parses without more noise. */
    bool looks_float = false;
    for (const unsigned char *p = start; p < end; p++)
        if (*p == '.')
            looks_float = true;
    KjToken *tok = push(lx, looks_float ? KJ_TOK_FLOAT : KJ_TOK_INT, start, end);
    kj_error(lx->diag, tok->loc, "malformed number '%.*s'", tok->len, tok->start);
}

static void lex_string(Lexer *lx, const unsigned char *start, const unsigned char *end,
                       bool terminated)
{
    KjToken *tok = push(lx, KJ_TOK_STRING, start, end);
    if (!terminated) {
        kj_error(lx->diag, tok->loc, "unterminated string literal");
        return;
    }
    for (const unsigned char *p = start + 1; p < end - 1; p++) {
        if (*p != '\\')
            continue;
        p++;
        if (*p != 'n' && *p != 't' && *p != '"' && *p != '\\')
            kj_error(lx->diag, loc_at(lx, p - 1),
                     "unknown escape '\\%c' in a string (only \\n \\t \\\" and \\\\ are known)",
                     *p >= 0x20 && *p < 0x7f ? *p : '?');
    }
}

static void lex_invalid(Lexer *lx, const unsigned char *start, const unsigned char *end)
{
    KjToken *tok = push(lx, KJ_TOK_ERROR, start, end);
    unsigned char c = *start;
    if (c >= 0x21 && c < 0x7f)
        kj_error(lx->diag, tok->loc, "invalid character '%c'", c);
    else if (c >= 0xc0 && end - start > 1)
        kj_error(lx->diag, tok->loc, "invalid character '%.*s' (only ASCII is allowed outside comments)",
                 tok->len, tok->start);
    else
        kj_error(lx->diag, tok->loc, "invalid byte 0x%02x", c);
}

/* After "//": up to (not including) the end of the line. */
static const unsigned char *skip_line_comment(Lexer *lx, const unsigned char *p)
{
    while (p < lx->limit && *p != '\n')
        p++;
    return p;
}

/* After "/\*": past the closing "*\/", counting lines; at the end of the text
 * when unterminated (reported at `start`). */
static const unsigned char *skip_block_comment(Lexer *lx, const unsigned char *start,
                                               const unsigned char *p)
{
    KjLoc at = loc_at(lx, start);
    while (p < lx->limit) {
        if (p[0] == '*' && p + 1 < lx->limit && p[1] == '/')
            return p + 2;
        if (*p == '\n') {
            lx->line++;
            lx->line_start = p + 1;
        }
        p++;
    }
    kj_error(lx->diag, at, "unterminated block comment");
    return p;
}

KjToken *kj_lex(KjArena *arena, const KjSource *src, KjDiag *diag, int *count)
{
    Lexer lx = {0};
    lx.src = src;
    lx.diag = diag;
    lx.text = (const unsigned char *)src->text;
    lx.limit = lx.text + src->len;
    lx.line_start = lx.text;
    lx.line = 1;

    const unsigned char *YYCURSOR = lx.text, *YYLIMIT = lx.limit, *YYMARKER = NULL;
    for (;;) {
        const unsigned char *start = YYCURSOR;
        /*!re2c
            re2c:define:YYCTYPE = "unsigned char";
            re2c:yyfill:enable = 0;
            re2c:eof = 0;

            dec   = [0-9] ("_"? [0-9])*;
            hex   = "0" [xX] [0-9a-fA-F] ("_"? [0-9a-fA-F])*;
            exp   = [eE] [+-]? dec;
            float = dec "." dec? exp? | "." dec exp? | dec exp;
            tail  = [0-9A-Za-z_];
            ident = [A-Za-z_] [A-Za-z0-9_]*;
            utf8  = [\xc0-\xff] [\x80-\xbf]*;
            strch = [^"\\\n\x00] | "\\" [^\n\x00];

            $ { push(&lx, KJ_TOK_EOF, start, start); break; }

            "\n"             { lx.line++; lx.line_start = YYCURSOR; continue; }
            [ \t\r\f\v]+     { continue; }
            "//"             { YYCURSOR = skip_line_comment(&lx, YYCURSOR); continue; }
            "/*"             { YYCURSOR = skip_block_comment(&lx, start, YYCURSOR); continue; }

            dec              { lex_int(&lx, start, YYCURSOR, 10); continue; }
            hex              { lex_int(&lx, start, YYCURSOR, 16); continue; }
            float            { lex_float(&lx, start, YYCURSOR); continue; }
            (dec | hex | float) tail+ | [0-9] tail*
                             { lex_bad_number(&lx, start, YYCURSOR); continue; }

            "\"" strch* "\"" { lex_string(&lx, start, YYCURSOR, true); continue; }
            "\"" strch*      { lex_string(&lx, start, YYCURSOR, false); continue; }

            "fn"       { push(&lx, KJ_TOK_KW_FN, start, YYCURSOR); continue; }
            "let"      { push(&lx, KJ_TOK_KW_LET, start, YYCURSOR); continue; }
            "if"       { push(&lx, KJ_TOK_KW_IF, start, YYCURSOR); continue; }
            "else"     { push(&lx, KJ_TOK_KW_ELSE, start, YYCURSOR); continue; }
            "for"      { push(&lx, KJ_TOK_KW_FOR, start, YYCURSOR); continue; }
            "in"       { push(&lx, KJ_TOK_KW_IN, start, YYCURSOR); continue; }
            "while"    { push(&lx, KJ_TOK_KW_WHILE, start, YYCURSOR); continue; }
            "break"    { push(&lx, KJ_TOK_KW_BREAK, start, YYCURSOR); continue; }
            "continue" { push(&lx, KJ_TOK_KW_CONTINUE, start, YYCURSOR); continue; }
            "return"   { push(&lx, KJ_TOK_KW_RETURN, start, YYCURSOR); continue; }
            "import"   { push(&lx, KJ_TOK_KW_IMPORT, start, YYCURSOR); continue; }
            "true"     { push(&lx, KJ_TOK_KW_TRUE, start, YYCURSOR); continue; }
            "false"    { push(&lx, KJ_TOK_KW_FALSE, start, YYCURSOR); continue; }
            "const"    { push(&lx, KJ_TOK_KW_CONST, start, YYCURSOR); continue; }
            ident      { push(&lx, KJ_TOK_IDENT, start, YYCURSOR); continue; }

            "("   { push(&lx, KJ_TOK_LPAREN, start, YYCURSOR); continue; }
            ")"   { push(&lx, KJ_TOK_RPAREN, start, YYCURSOR); continue; }
            "{"   { push(&lx, KJ_TOK_LBRACE, start, YYCURSOR); continue; }
            "}"   { push(&lx, KJ_TOK_RBRACE, start, YYCURSOR); continue; }
            "["   { push(&lx, KJ_TOK_LBRACKET, start, YYCURSOR); continue; }
            "]"   { push(&lx, KJ_TOK_RBRACKET, start, YYCURSOR); continue; }
            ","   { push(&lx, KJ_TOK_COMMA, start, YYCURSOR); continue; }
            ";"   { push(&lx, KJ_TOK_SEMI, start, YYCURSOR); continue; }
            ":"   { push(&lx, KJ_TOK_COLON, start, YYCURSOR); continue; }
            "."   { push(&lx, KJ_TOK_DOT, start, YYCURSOR); continue; }
            "@"   { push(&lx, KJ_TOK_AT, start, YYCURSOR); continue; }
            "->"  { push(&lx, KJ_TOK_ARROW, start, YYCURSOR); continue; }
            "?"   { push(&lx, KJ_TOK_QUESTION, start, YYCURSOR); continue; }
            "+"   { push(&lx, KJ_TOK_PLUS, start, YYCURSOR); continue; }
            "-"   { push(&lx, KJ_TOK_MINUS, start, YYCURSOR); continue; }
            "*"   { push(&lx, KJ_TOK_STAR, start, YYCURSOR); continue; }
            "/"   { push(&lx, KJ_TOK_SLASH, start, YYCURSOR); continue; }
            "%"   { push(&lx, KJ_TOK_PERCENT, start, YYCURSOR); continue; }
            "**"  { push(&lx, KJ_TOK_STARSTAR, start, YYCURSOR); continue; }
            "&"   { push(&lx, KJ_TOK_AMP, start, YYCURSOR); continue; }
            "|"   { push(&lx, KJ_TOK_PIPE, start, YYCURSOR); continue; }
            "^"   { push(&lx, KJ_TOK_CARET, start, YYCURSOR); continue; }
            "~"   { push(&lx, KJ_TOK_TILDE, start, YYCURSOR); continue; }
            "<<"  { push(&lx, KJ_TOK_SHL, start, YYCURSOR); continue; }
            ">>"  { push(&lx, KJ_TOK_SHR, start, YYCURSOR); continue; }
            "&&"  { push(&lx, KJ_TOK_AMPAMP, start, YYCURSOR); continue; }
            "||"  { push(&lx, KJ_TOK_PIPEPIPE, start, YYCURSOR); continue; }
            "!"   { push(&lx, KJ_TOK_BANG, start, YYCURSOR); continue; }
            "=="  { push(&lx, KJ_TOK_EQ, start, YYCURSOR); continue; }
            "!="  { push(&lx, KJ_TOK_NE, start, YYCURSOR); continue; }
            "<"   { push(&lx, KJ_TOK_LT, start, YYCURSOR); continue; }
            "<="  { push(&lx, KJ_TOK_LE, start, YYCURSOR); continue; }
            ">"   { push(&lx, KJ_TOK_GT, start, YYCURSOR); continue; }
            ">="  { push(&lx, KJ_TOK_GE, start, YYCURSOR); continue; }
            "="   { push(&lx, KJ_TOK_ASSIGN, start, YYCURSOR); continue; }
            "+="  { push(&lx, KJ_TOK_PLUS_ASSIGN, start, YYCURSOR); continue; }
            "-="  { push(&lx, KJ_TOK_MINUS_ASSIGN, start, YYCURSOR); continue; }
            "*="  { push(&lx, KJ_TOK_STAR_ASSIGN, start, YYCURSOR); continue; }
            "/="  { push(&lx, KJ_TOK_SLASH_ASSIGN, start, YYCURSOR); continue; }
            "%="  { push(&lx, KJ_TOK_PERCENT_ASSIGN, start, YYCURSOR); continue; }
            "&="  { push(&lx, KJ_TOK_AMP_ASSIGN, start, YYCURSOR); continue; }
            "|="  { push(&lx, KJ_TOK_PIPE_ASSIGN, start, YYCURSOR); continue; }
            "^="  { push(&lx, KJ_TOK_CARET_ASSIGN, start, YYCURSOR); continue; }
            "<<=" { push(&lx, KJ_TOK_SHL_ASSIGN, start, YYCURSOR); continue; }
            ">>=" { push(&lx, KJ_TOK_SHR_ASSIGN, start, YYCURSOR); continue; }

            utf8  { lex_invalid(&lx, start, YYCURSOR); continue; }
            *     { lex_invalid(&lx, start, YYCURSOR); continue; }
        */
    }
    (void)YYMARKER;

    KjToken *tokens = kj_arena_alloc(arena, sizeof(KjToken) * (size_t)lx.count);
    memcpy(tokens, lx.tokens, sizeof(KjToken) * (size_t)lx.count);
    free(lx.tokens);
    *count = lx.count;
    return tokens;
}
