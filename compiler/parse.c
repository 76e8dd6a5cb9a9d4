/*
 * parse.c: tokens to AST, by recursive descent.  Each parse function is named
 * after the grammar production it implements (grammar/kern.ebnf holds the same
 * rules, and test_grammar keeps the two in step through kj_parser_productions)
 * and opens with that rule as a comment.  Binary operators are one function per
 * precedence level, lowest first, all through binary_left().
 *
 * Error recovery is panic mode.  The first syntax error of a statement is
 * reported and sets `panic`; until the statement (or, at the top level, the
 * declaration) is resynchronised, further errors are dropped, so one mistake
 * gives one message.  Loops that gather lists stop when panicking, and the
 * synchronisers always consume a token or stop at one that ends the enclosing
 * loop, so no input can make the parser spin.  Nesting is capped so that a file
 * of ten thousand '(' cannot overflow the stack.  Errors that do not lose the
 * parser's place (a[i][j], too many dimensions) are reported without panic.
 *
 * Invalid characters arrive as KJ_TOK_ERROR tokens that the lexer has already
 * reported: a syntax error found at one is not reported again.
 */
#include "kjit_compiler.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

const char *const kj_parser_productions[] = {
    "file", "import_decl", "const_decl", "const_type", "array_literal", "function_decl", "attribute", "attribute_arg", "signature", "param", "type",
    "block", "statement", "let_stmt", "if_stmt", "for_stmt", "while_stmt", "jump_stmt",
    "simple_stmt", "expr", "ternary", "logor", "logand", "bitor", "bitxor", "bitand",
    "equality", "relational", "shift", "add", "mul", "unary", "power", "postfix", "args",
    "call_args", "primary", NULL,
};

const char *kj_binary_op_spelling(KjBinaryOp op)
{
    static const char *const spellings[KJ_BIN_COUNT] = {
#define X(op, spelling) [KJ_BIN_##op] = spelling,
        KJ_BINARY_OPS(X)
#undef X
    };
    if ((int)op < 0 || op >= KJ_BIN_COUNT)
        kj_unreachable();
    return spellings[op];
}

const char *kj_unary_op_spelling(KjUnaryOp op)
{
    static const char *const spellings[KJ_UN_COUNT] = {
#define X(op, spelling) [KJ_UN_##op] = spelling,
        KJ_UNARY_OPS(X)
#undef X
    };
    if ((int)op < 0 || op >= KJ_UN_COUNT)
        kj_unreachable();
    return spellings[op];
}

const char *kj_node_kind_name(KjNodeKind kind)
{
    static const char *const names[KJ_NODE_COUNT] = {
#define X(kind) [KJ_NODE_##kind] = #kind,
        KJ_NODE_KINDS(X)
#undef X
    };
    if ((int)kind < 0 || kind >= KJ_NODE_COUNT)
        kj_unreachable();
    return names[kind];
}

/* Deeper nesting than this is certainly not a real program. */
enum { KJ_MAX_NESTING = 256 };

/* How deep an expression's tree may be, counting every operator, call, index
 * and member on the longest path to a leaf (parentheses alone add nothing).
 * Every pass after the parser (checker, IR passes, code generation, the SIMD
 * lowering) recurses over expression trees; this bound is what keeps them
 * within the stack of any thread a compile may run on.  Measured at about
 * 0.5 KB of stack a level in the deepest of them, 1000 levels and 256 nested
 * blocks fit in 1 MB (docs/language.md, "Limits").  A left-associative chain
 * (a + b + c + ...) is built by a loop here but is as deep as it is long. */
enum { KJ_MAX_EXPR_DEPTH = 1000 };

/* A lexer error, held back so that it comes out in source order among the
 * parser's errors rather than all of them first. */
typedef struct PendingError {
    KjLoc loc;
    const char *message;
} PendingError;

typedef struct Parser {
    KjArena *arena;
    KjDiag *diag;
    const KjSource *src;
    KjToken *tokens;
    int pos, count;
    bool panic;
    int depth;
    PendingError *pending;
    int pending_count, pending_next;
    bool eof_in_comment; /* an unterminated comment ate the rest of the file */
} Parser;

/* ------------------------------------------------- lexer errors, in order */

static const char *source_path(const KjSource *src)
{
    return src->path ? src->path : "<input>";
}

/* The sink the lexer reports to during kj_parse.  It takes the formatted
 * "path:line:col: error: message" apart again (the format is diag.c's own) so
 * the error can be re-issued, with its excerpt, at the right moment. */
static void capture_lexer_error(void *user, KjSeverity severity, const char *text)
{
    Parser *p = user;
    PendingError err = {{p->src, 1, 1}, text};
    const char *path = source_path(p->src);
    size_t path_len = strlen(path);
    if (strncmp(text, path, path_len) == 0 && text[path_len] == ':') {
        char *end;
        long line = strtol(text + path_len + 1, &end, 10);
        long col = *end == ':' ? strtol(end + 1, &end, 10) : 0;
        const char *label = ": error: ";
        if (line > 0 && col > 0 && strncmp(end, label, strlen(label)) == 0) {
            const char *message = end + strlen(label);
            const char *newline = strchr(message, '\n');
            err.loc.line = (int)line;
            err.loc.col = (int)col;
            err.message = kj_arena_strndup(p->arena, message,
                                           newline ? (size_t)(newline - message) : strlen(message));
        }
    }
    if (err.message == text)
        err.message = kj_arena_strdup(p->arena, text);
    if (strcmp(err.message, "unterminated block comment") == 0)
        p->eof_in_comment = true;
    p->pending = kj_xrealloc(p->pending, sizeof(PendingError) * (size_t)(p->pending_count + 1));
    p->pending[p->pending_count++] = err;
}

static bool loc_before_or_at(KjLoc a, KjLoc b)
{
    return a.line < b.line || (a.line == b.line && a.col <= b.col);
}

/* Issues the held-back lexer errors at or before `loc`. */
static void flush_lexer_errors(Parser *p, KjLoc loc)
{
    while (p->pending_next < p->pending_count &&
           loc_before_or_at(p->pending[p->pending_next].loc, loc)) {
        PendingError *err = &p->pending[p->pending_next++];
        kj_error(p->diag, err->loc, "%s", err->message);
    }
}

/* --------------------------------------------------------------- helpers */

static KjToken *peek(Parser *p)
{
    return &p->tokens[p->pos];
}

static bool at(Parser *p, KjTokenKind kind)
{
    return p->tokens[p->pos].kind == kind;
}

static KjToken *advance(Parser *p)
{
    KjToken *tok = &p->tokens[p->pos];
    if (tok->kind != KJ_TOK_EOF)
        p->pos++;
    return tok;
}

static bool accept(Parser *p, KjTokenKind kind)
{
    if (!at(p, kind))
        return false;
    advance(p);
    return true;
}

/* Where a declaration begins: recovery never skips one.  A stray '@' inside a
 * statement is not an attribute: that takes '@' name, then 'fn' or '('. */
static bool at_decl_start(Parser *p)
{
    if (at(p, KJ_TOK_KW_FN) || at(p, KJ_TOK_KW_IMPORT) || at(p, KJ_TOK_KW_CONST))
        return true;
    if (!at(p, KJ_TOK_AT) || p->pos + 2 >= p->count)
        return false;
    const KjToken *after = &p->tokens[p->pos + 2];
    return p->tokens[p->pos + 1].kind == KJ_TOK_IDENT &&
           (after->kind == KJ_TOK_KW_FN || after->kind == KJ_TOK_LPAREN);
}

/* How a token reads in a message: 'x', '{', end of file. */
static const char *describe(Parser *p, const KjToken *tok)
{
    if (tok->kind == KJ_TOK_EOF)
        return "end of file";
    int len = tok->len > 32 ? 32 : tok->len;
    return kj_arena_printf(p->arena, "'%.*s%s'", len, tok->start, tok->len > 32 ? "..." : "");
}

static void vreport(Parser *p, KjLoc loc, const char *fmt, va_list ap)
{
    flush_lexer_errors(p, loc);
    KjBuf buf = {0};
    kj_buf_vprintf(&buf, fmt, ap);
    kj_error(p->diag, loc, "%s", buf.data);
    kj_buf_free(&buf);
}

/* An error that does not lose the parser's place: always reported. */
static void report(Parser *p, KjLoc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(p, loc, fmt, ap);
    va_end(ap);
}

/* A syntax error: reported unless the statement already has one (or the lexer
 * already complained about the token at hand); the parser then panics until the
 * next synchronisation point. */
static void note_floor_division(Parser *p);

static void syntax_error(Parser *p, KjLoc loc, const char *fmt, ...)
{
    if (p->panic)
        return;
    p->panic = true;
    /* The lexer has said all there is to say about these. */
    if (at(p, KJ_TOK_ERROR) || (at(p, KJ_TOK_EOF) && p->eof_in_comment))
        return;
    va_list ap;
    va_start(ap, fmt);
    vreport(p, loc, fmt, ap);
    va_end(ap);
    note_floor_division(p);
}

/* Whether a token can end an operand: what Python's `a // b` would follow. */
static bool ends_operand(KjTokenKind kind)
{
    return kind == KJ_TOK_IDENT || kind == KJ_TOK_INT || kind == KJ_TOK_FLOAT ||
           kind == KJ_TOK_RPAREN || kind == KJ_TOK_RBRACKET || kind == KJ_TOK_KW_TRUE ||
           kind == KJ_TOK_KW_FALSE;
}

/* After a syntax error: when the token before the error ends an operand and
 * is followed on its line by `//`, the user most likely meant Python's floor
 * division, which here starts a comment that swallowed the rest of the line. */
static void note_floor_division(Parser *p)
{
    if (p->pos == 0)
        return;
    const KjToken *prev = &p->tokens[p->pos - 1];
    if (!ends_operand(prev->kind))
        return;
    const char *s = prev->start + prev->len;
    int col = prev->loc.col + prev->len;
    while (*s == ' ' || *s == '\t')
        s++, col++;
    if (s[0] != '/' || s[1] != '/')
        return;
    KjLoc loc = prev->loc;
    loc.col = col;
    kj_note(p->diag, loc, "'//' starts a comment here; there is no floor division: write "
            "floor(a / b) for floats ('/' on integers truncates toward zero)");
}

/* Two '+' or two '-' tokens written together, at tokens[at] and tokens[at + 1]. */
static bool is_increment(Parser *p, int at)
{
    if (at < 0 || at + 1 >= p->count)
        return false;
    const KjToken *a = &p->tokens[at], *b = &p->tokens[at + 1];
    return (a->kind == KJ_TOK_PLUS || a->kind == KJ_TOK_MINUS) && b->kind == a->kind &&
           b->start == a->start + 1;
}

/* "there is no '++' operator": `v++` and `++v` as C writes them.  `name` is
 * the variable's token when known. */
static void no_increment(Parser *p, const KjToken *op, const KjToken *name, bool prefix)
{
    bool plus = op->kind == KJ_TOK_PLUS;
    const char *var = name && name->kind == KJ_TOK_IDENT
                          ? kj_arena_printf(p->arena, "%.*s ", name->len, name->start)
                          : "";
    syntax_error(p, op->loc, "there is no '%s' operator; write '%s%s= 1;'%s", plus ? "++" : "--",
                 var, plus ? "+" : "-",
                 !prefix ? "" : plus ? " (or '+ +' with a space for two signs)"
                                     : " (or '- -' with a space for two signs)");
}

static bool expect(Parser *p, KjTokenKind kind)
{
    if (accept(p, kind))
        return true;
    /* Punctuators and keywords are quoted; "identifier" is not. */
    const char *quote = kind >= KJ_TOK_KW_FN ? "'" : "";
    syntax_error(p, peek(p)->loc, "expected %s%s%s, found %s", quote, kj_token_name(kind), quote,
                 describe(p, peek(p)));
    return false;
}

/* A missing ';' is shown just after the token it should follow, where the
 * user will type it, rather than at the start of the next line. */
static bool expect_semi(Parser *p)
{
    if (accept(p, KJ_TOK_SEMI))
        return true;
    KjLoc loc = peek(p)->loc;
    if (p->pos > 0) {
        const KjToken *prev = &p->tokens[p->pos - 1];
        loc = prev->loc;
        loc.col += prev->len;
    }
    syntax_error(p, loc, "expected ';' before %s", describe(p, peek(p)));
    return false;
}

static bool enter(Parser *p)
{
    if (++p->depth > KJ_MAX_NESTING) {
        syntax_error(p, peek(p)->loc, "nested too deeply (more than %d levels)", KJ_MAX_NESTING);
        return false;
    }
    return true;
}

static void leave(Parser *p)
{
    p->depth--;
}

static KjNode *new_node(Parser *p, KjNodeKind kind, KjLoc loc)
{
    KjNode *node = kj_arena_alloc(p->arena, sizeof *node);
    node->kind = kind;
    node->loc = loc;
    return node;
}

/* Sets a just-built expression node's height from its children's and refuses
 * it when that passes KJ_MAX_EXPR_DEPTH; the caret is at the node's own spot
 * (the operator of a chain, the name of a call). */
static KjNode *bounded(Parser *p, KjNode *node)
{
    int height = 0; /* a leaf's */
    const KjNode *children[] = {node->lhs, node->rhs, node->cond};
    for (int i = 0; i < 3; i++)
        if (children[i] && children[i]->height > height)
            height = children[i]->height;
    for (int i = 0; i < node->args.count; i++) {
        const KjNode *arg = node->args.items[i];
        if (arg->height > height)
            height = arg->height;
    }
    node->height = height + 1;
    if (node->height > KJ_MAX_EXPR_DEPTH && !p->panic)
        syntax_error(p, node->loc, "expression nested too deeply (more than %d operators, calls "
                                   "and indexes on one path); split it with let",
                     KJ_MAX_EXPR_DEPTH);
    return node;
}

/* What a failed expression becomes: a harmless literal, so callers need no
 * NULL checks (the AST of a file with errors is never checked). */
static KjNode *error_node(Parser *p)
{
    return new_node(p, KJ_NODE_INT_LIT, peek(p)->loc);
}

static const char *token_text(Parser *p, const KjToken *tok)
{
    return kj_arena_strndup(p->arena, tok->start, (size_t)tok->len);
}

static bool is_statement_keyword(KjTokenKind kind)
{
    switch (kind) {
    case KJ_TOK_KW_LET: case KJ_TOK_KW_IF: case KJ_TOK_KW_FOR: case KJ_TOK_KW_WHILE:
    case KJ_TOK_KW_RETURN: case KJ_TOK_KW_BREAK: case KJ_TOK_KW_CONTINUE:
        return true;
    default:
        return false;
    }
}

/* After a bad statement: skip past the next ';' or balanced '{...}' (and any
 * else-branches after it), or stop before a '}' that closes the enclosing
 * block, a keyword that starts a statement, or a declaration. */
static void sync_statement(Parser *p)
{
    int depth = 0;
    for (;;) {
        KjTokenKind kind = peek(p)->kind;
        if (kind == KJ_TOK_EOF || at_decl_start(p))
            return;
        if (depth == 0 && is_statement_keyword(kind))
            return;
        if (kind == KJ_TOK_SEMI && depth == 0) {
            advance(p);
            return;
        }
        if (kind == KJ_TOK_LBRACE) {
            depth++;
        } else if (kind == KJ_TOK_RBRACE) {
            if (depth == 0)
                return;
            advance(p);
            if (--depth == 0 && !at(p, KJ_TOK_KW_ELSE))
                return;
            continue;
        }
        advance(p);
    }
}

/* After a bad declaration: skip to the next one. */
static void sync_top(Parser *p)
{
    while (!at(p, KJ_TOK_EOF) && !at_decl_start(p))
        advance(p);
}

/* ------------------------------------------------------------- expressions */

static KjNode *expr(Parser *p);
static KjNode *unary(Parser *p);

// primary = INT | FLOAT | "true" | "false" | IDENT | "(" expr ")"
static KjNode *primary(Parser *p)
{
    KjToken *tok = peek(p);
    KjNode *node;
    switch (tok->kind) {
    case KJ_TOK_INT:
        node = new_node(p, KJ_NODE_INT_LIT, advance(p)->loc);
        node->int_value = tok->int_value;
        return node;
    case KJ_TOK_FLOAT:
        node = new_node(p, KJ_NODE_FLOAT_LIT, advance(p)->loc);
        node->float_value = tok->float_value;
        return node;
    case KJ_TOK_KW_TRUE:
    case KJ_TOK_KW_FALSE:
        node = new_node(p, KJ_NODE_BOOL_LIT, advance(p)->loc);
        node->int_value = tok->kind == KJ_TOK_KW_TRUE;
        return node;
    case KJ_TOK_IDENT:
        node = new_node(p, KJ_NODE_NAME, advance(p)->loc);
        node->name = token_text(p, tok);
        return node;
    case KJ_TOK_LPAREN:
        advance(p);
        node = expr(p);
        expect(p, KJ_TOK_RPAREN);
        return node;
    case KJ_TOK_STRING:
        report(p, tok->loc, "a string can only be printed: print(\"text\", x)");
        advance(p);
        return error_node(p);
    default:
        /* `v++;`: the second '+' looked for an operand. */
        if (is_increment(p, p->pos - 2)) {
            const KjToken *op = &p->tokens[p->pos - 2];
            no_increment(p, op, p->pos >= 3 ? &p->tokens[p->pos - 3] : NULL, false);
            return error_node(p);
        }
        syntax_error(p, tok->loc, "expected an expression, found %s", describe(p, tok));
        return error_node(p);
    }
}

// args = expr ("," expr)*
static void args(Parser *p, KjVec *out)
{
    kj_vec_push(p->arena, out, expr(p));
    while (!p->panic && accept(p, KJ_TOK_COMMA))
        kj_vec_push(p->arena, out, expr(p));
}

/* A string token's text without its quotes, escapes decoded (the lexer has
 * reported any it does not know; they stay as written). */
static const char *string_value(Parser *p, const KjToken *tok)
{
    int n = tok->len >= 2 && tok->start[tok->len - 1] == '"' ? tok->len - 2 : tok->len - 1;
    const char *in = tok->start + 1;
    char *out = kj_arena_alloc(p->arena, (size_t)n + 1);
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (in[i] == '\\' && i + 1 < n) {
            char e = in[++i];
            out[k++] = e == 'n' ? '\n' : e == 't' ? '\t' : e;
        } else {
            out[k++] = in[i];
        }
    }
    out[k] = 0;
    return out;
}

/* Any call's arguments: which built-in takes a string (print) is the
 * checker's table's to say, so the parser knows no built-in's name;
 * anywhere else a string is an error of the checker's. */
// call_args = (STRING | expr) ("," (STRING | expr))*
static void call_args(Parser *p, KjVec *out)
{
    do {
        KjToken *tok = peek(p);
        if (tok->kind == KJ_TOK_STRING) {
            KjNode *node = new_node(p, KJ_NODE_STRING_LIT, advance(p)->loc);
            node->name = string_value(p, tok);
            kj_vec_push(p->arena, out, node);
        } else {
            kj_vec_push(p->arena, out, expr(p));
        }
    } while (!p->panic && accept(p, KJ_TOK_COMMA));
}

// postfix = primary ("(" args? ")" | "[" args "]" | "." IDENT)*
static KjNode *postfix(Parser *p)
{
    KjNode *node = primary(p);
    while (!p->panic) {
        KjToken *tok = peek(p);
        if (tok->kind == KJ_TOK_LPAREN) {
            advance(p);
            if (node->kind != KJ_NODE_NAME) {
                syntax_error(p, tok->loc, "only a function or a type name can be called");
                break;
            }
            KjNode *call = new_node(p, KJ_NODE_CALL, node->loc);
            call->lhs = node;
            if (!at(p, KJ_TOK_RPAREN))
                call_args(p, &call->args);
            expect(p, KJ_TOK_RPAREN);
            node = bounded(p, call);
        } else if (tok->kind == KJ_TOK_LBRACKET) {
            advance(p);
            if (node->kind == KJ_NODE_INDEX) {
                /* Keep going as if a[i, j] had been written: the mistake is
                 * clear and nothing after it is in doubt. */
                report(p, tok->loc, "an array is indexed once with every index: write a[i, j], not a[i][j]");
                args(p, &node->args);
                expect(p, KJ_TOK_RBRACKET);
                bounded(p, node);
                continue;
            }
            KjNode *index = new_node(p, KJ_NODE_INDEX, tok->loc);
            index->lhs = node;
            args(p, &index->args);
            expect(p, KJ_TOK_RBRACKET);
            node = bounded(p, index);
        } else if (tok->kind == KJ_TOK_DOT) {
            advance(p);
            KjToken *name = peek(p);
            if (!expect(p, KJ_TOK_IDENT))
                break;
            KjNode *member = new_node(p, KJ_NODE_MEMBER, name->loc);
            member->lhs = node;
            member->name = token_text(p, name);
            node = bounded(p, member);
        } else {
            break;
        }
    }
    return node;
}

// power = postfix ("**" unary)?
static KjNode *power(Parser *p)
{
    KjNode *base = postfix(p);
    if (p->panic || !at(p, KJ_TOK_STARSTAR))
        return base;
    KjNode *node = new_node(p, KJ_NODE_BINARY, advance(p)->loc);
    node->binary_op = KJ_BIN_POW;
    node->lhs = base;
    /* right-associative, and 2 ** -1 is fine; a chain of them recurses here */
    node->rhs = enter(p) ? unary(p) : error_node(p);
    leave(p);
    return bounded(p, node);
}

// unary = ("-" | "+" | "!" | "~") unary | power
static KjNode *unary(Parser *p)
{
    KjUnaryOp op;
    switch (peek(p)->kind) {
    case KJ_TOK_MINUS: op = KJ_UN_NEG; break;
    case KJ_TOK_PLUS: op = KJ_UN_PLUS; break;
    case KJ_TOK_BANG: op = KJ_UN_NOT; break;
    case KJ_TOK_TILDE: op = KJ_UN_BITNOT; break;
    default: return power(p);
    }
    /* `++v` and `--v` read as C's increment: say so rather than take them as
     * two signs (write `- -v` for that). */
    if (is_increment(p, p->pos)) {
        no_increment(p, peek(p), &p->tokens[p->pos + 2], true);
        return error_node(p);
    }
    KjNode *node = new_node(p, KJ_NODE_UNARY, advance(p)->loc);
    node->unary_op = op;
    if (enter(p))
        node->lhs = unary(p);
    else
        node->lhs = error_node(p);
    leave(p);
    return bounded(p, node);
}

typedef struct OpMap {
    KjTokenKind token;
    KjBinaryOp op;
} OpMap;

/* operand (op operand)*, left-associative; the node sits at the operator. */
static KjNode *binary_left(Parser *p, KjNode *(*operand)(Parser *), const OpMap *ops, int op_count)
{
    KjNode *node = operand(p);
    while (!p->panic) {
        int i = 0;
        while (i < op_count && !at(p, ops[i].token))
            i++;
        if (i == op_count)
            break;
        KjNode *bin = new_node(p, KJ_NODE_BINARY, advance(p)->loc);
        bin->binary_op = ops[i].op;
        bin->lhs = node;
        bin->rhs = operand(p);
        node = bounded(p, bin);
    }
    return node;
}

// mul = unary (("*" | "/" | "%") unary)*
static KjNode *mul(Parser *p)
{
    static const OpMap ops[] = {
        {KJ_TOK_STAR, KJ_BIN_MUL}, {KJ_TOK_SLASH, KJ_BIN_DIV}, {KJ_TOK_PERCENT, KJ_BIN_REM}};
    return binary_left(p, unary, ops, 3);
}

// add = mul (("+" | "-") mul)*
static KjNode *add(Parser *p)
{
    static const OpMap ops[] = {{KJ_TOK_PLUS, KJ_BIN_ADD}, {KJ_TOK_MINUS, KJ_BIN_SUB}};
    return binary_left(p, mul, ops, 2);
}

// shift = add (("<<" | ">>") add)*
static KjNode *shift(Parser *p)
{
    static const OpMap ops[] = {{KJ_TOK_SHL, KJ_BIN_SHL}, {KJ_TOK_SHR, KJ_BIN_SHR}};
    return binary_left(p, add, ops, 2);
}

// relational = shift (("<" | "<=" | ">" | ">=") shift)*
static KjNode *relational(Parser *p)
{
    static const OpMap ops[] = {{KJ_TOK_LT, KJ_BIN_LT}, {KJ_TOK_LE, KJ_BIN_LE},
                                {KJ_TOK_GT, KJ_BIN_GT}, {KJ_TOK_GE, KJ_BIN_GE}};
    return binary_left(p, shift, ops, 4);
}

// equality = relational (("==" | "!=") relational)*
static KjNode *equality(Parser *p)
{
    static const OpMap ops[] = {{KJ_TOK_EQ, KJ_BIN_EQ}, {KJ_TOK_NE, KJ_BIN_NE}};
    return binary_left(p, relational, ops, 2);
}

// bitand = equality ("&" equality)*
static KjNode *bitand(Parser *p)
{
    static const OpMap ops[] = {{KJ_TOK_AMP, KJ_BIN_BITAND}};
    return binary_left(p, equality, ops, 1);
}

// bitxor = bitand ("^" bitand)*
static KjNode *bitxor(Parser *p)
{
    static const OpMap ops[] = {{KJ_TOK_CARET, KJ_BIN_BITXOR}};
    return binary_left(p, bitand, ops, 1);
}

// bitor = bitxor ("|" bitxor)*
static KjNode *bitor(Parser *p)
{
    static const OpMap ops[] = {{KJ_TOK_PIPE, KJ_BIN_BITOR}};
    return binary_left(p, bitxor, ops, 1);
}

// logand = bitor ("&&" bitor)*
static KjNode *logand(Parser *p)
{
    static const OpMap ops[] = {{KJ_TOK_AMPAMP, KJ_BIN_LOGAND}};
    return binary_left(p, bitor, ops, 1);
}

// logor = logand ("||" logand)*
static KjNode *logor(Parser *p)
{
    static const OpMap ops[] = {{KJ_TOK_PIPEPIPE, KJ_BIN_LOGOR}};
    return binary_left(p, logand, ops, 1);
}

// ternary = logor ("?" expr ":" ternary)?
static KjNode *ternary(Parser *p)
{
    KjNode *cond = logor(p);
    if (p->panic || !at(p, KJ_TOK_QUESTION))
        return cond;
    KjNode *node = new_node(p, KJ_NODE_TERNARY, advance(p)->loc);
    node->cond = cond;
    node->lhs = expr(p);
    if (!expect(p, KJ_TOK_COLON)) {
        node->rhs = error_node(p);
        return node;
    }
    /* a ? b : c ? d : ... recurses here */
    node->rhs = enter(p) ? ternary(p) : error_node(p);
    leave(p);
    return bounded(p, node);
}

// expr = ternary
static KjNode *expr(Parser *p)
{
    KjNode *node = enter(p) ? ternary(p) : error_node(p);
    leave(p);
    return node;
}

/* -------------------------------------------------------------- statements */

static KjNode *statement(Parser *p);

// type = IDENT ("[" ","* "]")?
static const KjType *type(Parser *p)
{
    KjToken *name = peek(p);
    if (name->kind != KJ_TOK_IDENT) {
        syntax_error(p, name->loc, "expected a type, found %s", describe(p, name));
        return NULL;
    }
    advance(p);
    const KjType *scalar = kj_type_from_name(name->start, (size_t)name->len);
    if (!scalar)
        report(p, name->loc, "unknown type '%.*s'", name->len, name->start);
    KjToken *open = peek(p);
    if (!accept(p, KJ_TOK_LBRACKET))
        return scalar;
    int ndim = 1;
    while (accept(p, KJ_TOK_COMMA))
        ndim++;
    if (!expect(p, KJ_TOK_RBRACKET))
        return NULL;
    if (ndim > KJ_MAX_DIMS) {
        report(p, open->loc, "an array has at most %d dimensions, this one has %d", KJ_MAX_DIMS,
               ndim);
        ndim = KJ_MAX_DIMS;
    }
    return scalar ? kj_type_array(scalar, ndim) : NULL;
}

// block = "{" statement* "}"
static KjNode *block(Parser *p)
{
    KjNode *node = new_node(p, KJ_NODE_BLOCK, peek(p)->loc);
    if (!expect(p, KJ_TOK_LBRACE))
        return node;
    if (!enter(p)) {
        leave(p);
        return node;
    }
    while (!at(p, KJ_TOK_RBRACE) && !at(p, KJ_TOK_EOF) && !at_decl_start(p)) {
        int start = p->pos;
        KjNode *stmt = statement(p);
        if (p->panic) {
            sync_statement(p);
            p->panic = false;
            if (p->pos == start)
                advance(p);
        } else {
            kj_vec_push(p->arena, &node->body, stmt);
        }
    }
    leave(p);
    expect(p, KJ_TOK_RBRACE);
    return node;
}

// let_stmt = "let" IDENT ("," IDENT)* (":" type)? "=" expr ";"
static KjNode *let_stmt(Parser *p)
{
    KjNode *node = new_node(p, KJ_NODE_LET, advance(p)->loc);
    do {
        KjToken *name = peek(p);
        if (!expect(p, KJ_TOK_IDENT))
            return node;
        kj_vec_push(p->arena, &node->names, (void *)token_text(p, name));
    } while (accept(p, KJ_TOK_COMMA));
    node->name = node->names.items[0];
    if (accept(p, KJ_TOK_COLON)) {
        KjToken *type_tok = peek(p);
        node->declared_type = type(p);
        if (node->names.count > 1 && !p->panic)
            report(p, type_tok->loc, "a destructuring let takes its types from the right-hand side; "
                                     "drop the type");
    }
    if (p->panic)
        return node;
    if (!expect(p, KJ_TOK_ASSIGN))
        return node;
    node->rhs = expr(p);
    expect_semi(p);
    return node;
}

// if_stmt = "if" expr block ("else" (if_stmt | block))?
static KjNode *if_stmt(Parser *p)
{
    KjNode *node = new_node(p, KJ_NODE_IF, advance(p)->loc);
    node->cond = expr(p);
    if (p->panic)
        return node;
    node->then_body = block(p);
    if (p->panic || !accept(p, KJ_TOK_KW_ELSE))
        return node;
    if (at(p, KJ_TOK_KW_IF)) {
        /* else-if chains recurse; count them against the nesting cap. */
        if (enter(p))
            node->else_body = if_stmt(p);
        leave(p);
    } else {
        node->else_body = block(p);
    }
    return node;
}

// for_stmt = "for" IDENT "in" "range" "(" args ")" block
static KjNode *for_stmt(Parser *p)
{
    KjNode *node = new_node(p, KJ_NODE_FOR, advance(p)->loc);
    KjToken *var = peek(p);
    if (!expect(p, KJ_TOK_IDENT))
        return node;
    node->name = token_text(p, var);
    if (!expect(p, KJ_TOK_KW_IN))
        return node;
    KjToken *range = peek(p);
    if (range->kind != KJ_TOK_IDENT || range->len != 5 || memcmp(range->start, "range", 5) != 0) {
        syntax_error(p, range->loc, "a for loop runs over range(...): write for %s in range(n), "
                                    "range(a, b) or range(a, b, step)", node->name);
        return node;
    }
    advance(p);
    KjToken *open = peek(p);
    if (!expect(p, KJ_TOK_LPAREN))
        return node;
    if (!at(p, KJ_TOK_RPAREN))
        args(p, &node->args);
    if (!expect(p, KJ_TOK_RPAREN))
        return node;
    if (node->args.count < 1 || node->args.count > 3)
        report(p, open->loc, "range takes 1 to 3 arguments (stop; start, stop; or start, stop, "
                             "step), not %d", node->args.count);
    node->then_body = block(p);
    return node;
}

// while_stmt = "while" expr block
static KjNode *while_stmt(Parser *p)
{
    KjNode *node = new_node(p, KJ_NODE_WHILE, advance(p)->loc);
    node->cond = expr(p);
    if (p->panic)
        return node;
    node->then_body = block(p);
    return node;
}

/* At "(": whether a comma sits in these parentheses (not in nested ones)
 * before they close, as in return (z, n); */
static bool tuple_ahead(Parser *p)
{
    int depth = 0;
    for (int i = p->pos; i < p->count; i++) {
        KjTokenKind k = p->tokens[i].kind;
        if (k == KJ_TOK_LPAREN || k == KJ_TOK_LBRACKET)
            depth++;
        else if (k == KJ_TOK_RPAREN || k == KJ_TOK_RBRACKET)
            depth--;
        else if (k == KJ_TOK_COMMA && depth == 1)
            return true;
        if (depth == 0 || k == KJ_TOK_SEMI || k == KJ_TOK_LBRACE || k == KJ_TOK_EOF)
            return false;
    }
    return false;
}

// jump_stmt = "break" ";" | "continue" ";" | "return" ("(" expr ("," expr)+ ")" | expr)? ";"
static KjNode *jump_stmt(Parser *p)
{
    KjToken *tok = advance(p);
    KjNodeKind kind = tok->kind == KJ_TOK_KW_BREAK      ? KJ_NODE_BREAK
                      : tok->kind == KJ_TOK_KW_CONTINUE ? KJ_NODE_CONTINUE
                                                        : KJ_NODE_RETURN;
    KjNode *node = new_node(p, kind, tok->loc);
    if (kind == KJ_NODE_RETURN && at(p, KJ_TOK_LPAREN) && tuple_ahead(p)) {
        /* return (z, n); the values of a @vectorize with several outputs */
        advance(p);
        do
            kj_vec_push(p->arena, &node->args, expr(p));
        while (!p->panic && accept(p, KJ_TOK_COMMA));
        if (!p->panic)
            expect(p, KJ_TOK_RPAREN);
    } else if (kind == KJ_NODE_RETURN && !at(p, KJ_TOK_SEMI) && !at(p, KJ_TOK_RBRACE)) {
        node->lhs = expr(p);
    }
    expect_semi(p);
    return node;
}

static bool is_assign_op(KjTokenKind kind)
{
    return kind >= KJ_TOK_ASSIGN && kind <= KJ_TOK_SHR_ASSIGN;
}

// simple_stmt = expr ("," expr)* (("=" | "+=" | "-=" | "*=" | "/=" | "%=" | "&=" | "|=" | "^=" | "<<=" | ">>=") expr ("," expr)*)? ";"
static KjNode *simple_stmt(Parser *p)
{
    KjNode *lhs = expr(p);
    if (p->panic)
        return lhs;
    KjNode *node;
    /* a, b = b, a: the targets into args and the values into body, every
     * value computed before any target is assigned */
    KjVec targets = {0};
    kj_vec_push(p->arena, &targets, lhs);
    while (!p->panic && accept(p, KJ_TOK_COMMA))
        kj_vec_push(p->arena, &targets, expr(p));
    if (p->panic)
        return lhs;
    if (is_assign_op(peek(p)->kind)) {
        KjToken *op = advance(p);
        node = new_node(p, KJ_NODE_ASSIGN, op->loc);
        node->assign_op = op->kind;
        node->lhs = lhs;
        node->rhs = expr(p);
        for (int i = 0; i < targets.count; i++) {
            KjNode *t = targets.items[i];
            if (t->kind != KJ_NODE_NAME && t->kind != KJ_NODE_INDEX && t->kind != KJ_NODE_MEMBER)
                report(p, t->loc, "cannot assign to this expression: only a variable or an "
                                  "array element can be assigned");
        }
        if (targets.count > 1) {
            node->args = targets;
            kj_vec_push(p->arena, &node->body, node->rhs);
            while (!p->panic && accept(p, KJ_TOK_COMMA))
                kj_vec_push(p->arena, &node->body, expr(p));
            if (!p->panic && op->kind != KJ_TOK_ASSIGN)
                report(p, op->loc, "several targets take '=', not '%s'", kj_token_name(op->kind));
            else if (!p->panic && node->body.count != targets.count &&
                     !(node->body.count == 1 && node->rhs->kind == KJ_NODE_CALL))
                /* one call may give several values (d0, d1 = mma(...);): the
                 * checker takes it apart */
                report(p, op->loc, "%d targets but %d values: a, b = x, y; assigns one value to "
                       "each", targets.count, node->body.count);
        }
    } else {
        if (targets.count > 1)
            syntax_error(p, peek(p)->loc, "expected '=' after the targets of a multiple "
                         "assignment, found %s", describe(p, peek(p)));
        node = new_node(p, KJ_NODE_EXPR_STMT, lhs->loc);
        node->lhs = lhs;
    }
    expect_semi(p);
    return node;
}

// statement = let_stmt | if_stmt | for_stmt | while_stmt | jump_stmt | block | simple_stmt
static KjNode *statement(Parser *p)
{
    switch (peek(p)->kind) {
    case KJ_TOK_KW_LET: return let_stmt(p);
    case KJ_TOK_KW_IF: return if_stmt(p);
    case KJ_TOK_KW_FOR: return for_stmt(p);
    case KJ_TOK_KW_WHILE: return while_stmt(p);
    case KJ_TOK_KW_BREAK:
    case KJ_TOK_KW_CONTINUE:
    case KJ_TOK_KW_RETURN: return jump_stmt(p);
    case KJ_TOK_LBRACE: return block(p);
    default: return simple_stmt(p);
    }
}

/* ------------------------------------------------------------ declarations */

// import_decl = "import" IDENT ";"
static KjNode *import_decl(Parser *p)
{
    KjNode *node = new_node(p, KJ_NODE_IMPORT, advance(p)->loc);
    KjToken *name = peek(p);
    if (!expect(p, KJ_TOK_IDENT))
        return node;
    node->name = token_text(p, name);
    expect_semi(p);
    return node;
}

/* A constant array's type and shape, u16[256] or f64[3, 3]: the extents
 * into node->args (constant expressions the checker evaluates). */
// const_type = IDENT "[" expr ("," expr)* "]"
static void const_type(Parser *p, KjNode *node)
{
    KjToken *name = advance(p);
    const KjType *scalar = kj_type_from_name(name->start, (size_t)name->len);
    if (!scalar)
        report(p, name->loc, "unknown type '%.*s'", name->len, name->start);
    KjToken *open = advance(p); /* "[" */
    do {
        kj_vec_push(p->arena, &node->args, expr(p));
    } while (!p->panic && accept(p, KJ_TOK_COMMA));
    if (p->panic || !expect(p, KJ_TOK_RBRACKET))
        return;
    int ndim = node->args.count;
    if (ndim > 3) {
        report(p, open->loc, "a constant array has at most 3 dimensions, this one has %d", ndim);
        ndim = 3;
    }
    node->declared_type = scalar ? kj_type_array(scalar, ndim) : NULL;
}

// array_literal = "[" (array_literal | expr) ("," (array_literal | expr))* ","? "]"
static KjNode *array_literal(Parser *p)
{
    KjNode *node = new_node(p, KJ_NODE_ARRAY_LIT, advance(p)->loc);
    if (!enter(p)) {
        leave(p);
        return node;
    }
    while (!p->panic && !at(p, KJ_TOK_RBRACKET)) {
        kj_vec_push(p->arena, &node->args, at(p, KJ_TOK_LBRACKET) ? array_literal(p) : expr(p));
        if (!accept(p, KJ_TOK_COMMA))
            break;
    }
    leave(p);
    if (!p->panic)
        expect(p, KJ_TOK_RBRACKET);
    return node;
}

// const_decl = "const" IDENT (":" (const_type | type))? "=" (array_literal | expr) ";"
static KjNode *const_decl(Parser *p)
{
    KjNode *node = new_node(p, KJ_NODE_CONST, advance(p)->loc);
    KjToken *name = peek(p);
    if (!expect(p, KJ_TOK_IDENT))
        return node;
    node->name = token_text(p, name);
    node->loc = name->loc;
    if (accept(p, KJ_TOK_COLON)) {
        /* T[N, ...] with extents is a constant array's type; T[] and T[,]
         * (no extents) stay a plain type, which the checker refuses */
        bool shaped = at(p, KJ_TOK_IDENT) && p->pos + 2 < p->count &&
                      p->tokens[p->pos + 1].kind == KJ_TOK_LBRACKET &&
                      p->tokens[p->pos + 2].kind != KJ_TOK_COMMA &&
                      p->tokens[p->pos + 2].kind != KJ_TOK_RBRACKET;
        if (shaped)
            const_type(p, node);
        else
            node->declared_type = type(p);
    }
    if (p->panic || !expect(p, KJ_TOK_ASSIGN))
        return node;
    node->rhs = at(p, KJ_TOK_LBRACKET) ? array_literal(p) : expr(p);
    expect_semi(p);
    return node;
}

// signature = type "(" (type ("," type)*)? ")"
static void signature(Parser *p, KjSignature *sig)
{
    sig->loc = peek(p)->loc;
    sig->ret = type(p);
    if (!expect(p, KJ_TOK_LPAREN))
        return;
    KjVec params = {0};
    if (!at(p, KJ_TOK_RPAREN)) {
        do {
            kj_vec_push(p->arena, &params, (void *)type(p));
        } while (!p->panic && accept(p, KJ_TOK_COMMA));
    }
    expect(p, KJ_TOK_RPAREN);
    sig->params = (const KjType **)params.items;
    sig->param_count = params.count;
}

// attribute_arg = IDENT "=" IDENT | STRING | signature
static void attribute_arg(Parser *p, KjFunctionDecl *fn, KjVec *sigs)
{
    KjToken *key = peek(p);
    if (key->kind == KJ_TOK_STRING) {
        advance(p);
        if (fn->kind != KJ_FN_GUVECTORIZE) {
            syntax_error(p, key->loc, "a string here is a @guvectorize layout; this attribute "
                         "takes signatures");
            return;
        }
        if (fn->layout_text) {
            report(p, key->loc, "@guvectorize takes one layout string");
            return;
        }
        fn->layout_text = token_text(p, key);
        fn->layout_loc = key->loc;
        return;
    }
    if (key->kind == KJ_TOK_IDENT && p->pos + 1 < p->count &&
        p->tokens[p->pos + 1].kind == KJ_TOK_ASSIGN) {
        advance(p);
        advance(p);
        KjToken *value = peek(p);
        if (!expect(p, KJ_TOK_IDENT))
            return;
        if (!(key->len == 3 && memcmp(key->start, "map", 3) == 0) || fn->kind != KJ_FN_REDUCE) {
            syntax_error(p, key->loc, "unknown attribute argument '%.*s' (only @reduce takes "
                         "one: map = a @vectorize function)", key->len, key->start);
            return;
        }
        if (fn->map_name) {
            report(p, key->loc, "map is given twice");
            return;
        }
        fn->map_name = token_text(p, value);
        fn->map_loc = value->loc;
        return;
    }
    KjSignature *sig = kj_arena_alloc(p->arena, sizeof *sig);
    signature(p, sig);
    kj_vec_push(p->arena, sigs, sig);
}

// attribute = "@" IDENT ("(" attribute_arg ("," attribute_arg)* ")")?
static void attribute(Parser *p, KjFunctionDecl *fn)
{
    advance(p);
    KjToken *name = peek(p);
    if (!expect(p, KJ_TOK_IDENT))
        return;
    bool is_vectorize = name->len == 9 && memcmp(name->start, "vectorize", 9) == 0;
    bool is_kernel = name->len == 6 && memcmp(name->start, "kernel", 6) == 0;
    bool is_reduce = name->len == 6 && memcmp(name->start, "reduce", 6) == 0;
    bool is_gufunc = name->len == 11 && memcmp(name->start, "guvectorize", 11) == 0;
    if (!is_vectorize && !is_kernel && !is_reduce && !is_gufunc) {
        syntax_error(p, name->loc, "unknown attribute '@%.*s' (there are @vectorize, "
                     "@guvectorize, @reduce and @kernel)", name->len, name->start);
        return;
    }
    fn->kind = is_vectorize ? KJ_FN_VECTORIZE : is_reduce ? KJ_FN_REDUCE
             : is_gufunc ? KJ_FN_GUVECTORIZE : KJ_FN_KERNEL;
    KjToken *open = peek(p);
    if (!accept(p, KJ_TOK_LPAREN))
        return;
    if (is_kernel) {
        syntax_error(p, open->loc, "@kernel takes no arguments");
        return;
    }
    KjVec sigs = {0};
    do {
        attribute_arg(p, fn, &sigs);
    } while (!p->panic && accept(p, KJ_TOK_COMMA));
    if (!expect(p, KJ_TOK_RPAREN))
        return;
    if (is_gufunc && !fn->layout_text)
        report(p, open->loc, "@guvectorize needs a layout string, as in "
               "@guvectorize(\"(n),(n)->()\")");
    fn->signature_count = sigs.count;
    fn->signatures = kj_arena_alloc(p->arena, sizeof(KjSignature) * (size_t)(sigs.count + 1));
    for (int i = 0; i < sigs.count; i++)
        fn->signatures[i] = *(KjSignature *)sigs.items[i];
}

// param = IDENT (":" type)?
static bool param(Parser *p, KjParam *out)
{
    KjToken *name = peek(p);
    out->loc = name->loc;
    if (!expect(p, KJ_TOK_IDENT))
        return false;
    out->name = token_text(p, name);
    if (!accept(p, KJ_TOK_COLON))
        return false;
    out->type = type(p);
    return true;
}

// function_decl = attribute? "fn" IDENT "(" (param ("," param)*)? ")" ("->" type)? block
static KjNode *function_decl(Parser *p)
{
    KjFunctionDecl *fn = kj_arena_alloc(p->arena, sizeof *fn);
    fn->kind = KJ_FN_PLAIN;
    if (at(p, KJ_TOK_AT))
        attribute(p, fn);
    if (p->panic || !expect(p, KJ_TOK_KW_FN))
        return NULL;
    KjToken *name = peek(p);
    if (!expect(p, KJ_TOK_IDENT))
        return NULL;
    fn->name = token_text(p, name);
    fn->loc = name->loc;
    KjNode *node = new_node(p, KJ_NODE_FUNCTION, name->loc);
    node->name = fn->name;
    node->fn = fn;
    if (!expect(p, KJ_TOK_LPAREN))
        return NULL;

    KjVec params = {0};
    if (!at(p, KJ_TOK_RPAREN)) {
        do {
            KjParam *prm = kj_arena_alloc(p->arena, sizeof *prm);
            bool typed = param(p, prm);
            kj_vec_push(p->arena, &params, prm);
            if (p->panic)
                break;
            if (!typed && fn->signature_count == 0)
                report(p, prm->loc, "parameter '%s' needs a type, as in %s: f64 (only "
                                    "@vectorize(signature, ...) leaves parameters untyped)",
                       prm->name, prm->name);
            else if (typed && fn->signature_count > 0)
                report(p, prm->loc, "parameter '%s' of a @vectorize with a signature list takes "
                                    "its type from the signatures; drop the type", prm->name);
        } while (accept(p, KJ_TOK_COMMA));
    }
    if (p->panic || !expect(p, KJ_TOK_RPAREN))
        return NULL;
    fn->param_count = params.count;
    fn->params = kj_arena_alloc(p->arena, sizeof(KjParam) * (size_t)(params.count + 1));
    for (int i = 0; i < params.count; i++)
        fn->params[i] = *(KjParam *)params.items[i];

    KjToken *arrow = peek(p);
    if (accept(p, KJ_TOK_ARROW) && at(p, KJ_TOK_LPAREN)) {
        /* -> (f64, i32): a @vectorize of several outputs */
        fn->results_loc = advance(p)->loc;
        KjVec types = {0};
        do
            kj_vec_push(p->arena, &types, (void *)type(p));
        while (!p->panic && accept(p, KJ_TOK_COMMA));
        if (!p->panic && expect(p, KJ_TOK_RPAREN)) {
            fn->result_count = types.count;
            fn->results = kj_arena_alloc(p->arena, sizeof *fn->results * (size_t)types.count);
            for (int i = 0; i < types.count; i++)
                fn->results[i] = types.items[i];
            fn->ret = fn->results[0];
        }
        if (!p->panic && fn->signature_count > 0)
            report(p, arrow->loc, "a @vectorize with a signature list takes its return type from "
                                  "the signatures; drop '-> type'");
    } else if (arrow->kind == KJ_TOK_ARROW) {
        fn->ret = type(p);
        if (!p->panic && fn->signature_count > 0)
            report(p, arrow->loc, "a @vectorize with a signature list takes its return type from "
                                  "the signatures; drop '-> type'");
    }
    if (p->panic)
        return NULL;
    fn->body = block(p);
    return node;
}

// file = (import_decl | const_decl | function_decl)*
static void file(Parser *p, KjAstFile *out)
{
    while (!at(p, KJ_TOK_EOF)) {
        KjNode *decl = NULL;
        if (at(p, KJ_TOK_KW_IMPORT))
            decl = import_decl(p);
        else if (at(p, KJ_TOK_KW_CONST))
            decl = const_decl(p);
        else if (at(p, KJ_TOK_KW_FN) || at(p, KJ_TOK_AT))
            decl = function_decl(p);
        else
            syntax_error(p, peek(p)->loc, "expected 'fn', '@', 'const' or 'import', found %s",
                         describe(p, peek(p)));
        if (decl && !((decl->kind == KJ_NODE_IMPORT || decl->kind == KJ_NODE_CONST) && p->panic))
            kj_vec_push(p->arena, &out->decls, decl);
        if (p->panic) {
            sync_top(p);
            p->panic = false;
        }
    }
}

KjAstFile *kj_parse(KjArena *arena, const KjSource *src, KjDiag *diag)
{
    Parser p = {0};
    p.arena = arena;
    p.diag = diag;
    p.src = src;
    KjDiag lexer_diag = {capture_lexer_error, &p, 0, INT32_MAX};
    p.tokens = kj_lex(arena, src, &lexer_diag, &p.count);
    KjAstFile *out = kj_arena_alloc(arena, sizeof *out);
    out->src = src;
    file(&p, out);
    flush_lexer_errors(&p, (KjLoc){src, INT32_MAX, INT32_MAX});
    free(p.pending);
    return out;
}

/* --------------------------------------------------------------- AST dump */

/* The shortest decimal that reads back as the same double, always with a '.'
 * or an exponent so that it reads as a float. */
static void print_float(FILE *out, double value)
{
    char text[40];
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(text, sizeof text, "%.*g", precision, value);
        if (strtod(text, NULL) == value)
            break;
    }
    fputs(text, out);
    if (!strpbrk(text, ".eEn"))
        fputs(".0", out);
}

static void dump_indent(FILE *out, int depth)
{
    for (int i = 0; i < depth; i++)
        fputs("  ", out);
}

static void dump_node(FILE *out, const KjNode *node, int depth);

static void dump_loc_end(FILE *out, KjLoc loc)
{
    fprintf(out, " @%d:%d\n", loc.line, loc.col);
}

static void dump_children(FILE *out, const KjVec *vec, int depth)
{
    for (int i = 0; i < vec->count; i++)
        dump_node(out, vec->items[i], depth);
}

static void dump_function(FILE *out, const KjNode *node, int depth)
{
    static const char *const kinds[] = {"plain", "vectorize", "kernel", "reduce", "guvectorize"};
    const KjFunctionDecl *fn = node->fn;
    fprintf(out, "function %s %s", fn->name, kinds[fn->kind]);
    if (fn->map_name)
        fprintf(out, " map=%s", fn->map_name);
    if (fn->layout_text)
        fprintf(out, " layout=%s", fn->layout_text);
    if (fn->ret)
        fprintf(out, " -> %s", kj_type_name(fn->ret));
    dump_loc_end(out, node->loc);
    for (int i = 0; i < fn->signature_count; i++) {
        const KjSignature *sig = &fn->signatures[i];
        dump_indent(out, depth + 1);
        fprintf(out, "signature %s(", kj_type_name(sig->ret));
        for (int j = 0; j < sig->param_count; j++)
            fprintf(out, "%s%s", j ? ", " : "", kj_type_name(sig->params[j]));
        fputc(')', out);
        dump_loc_end(out, sig->loc);
    }
    for (int i = 0; i < fn->param_count; i++) {
        dump_indent(out, depth + 1);
        fprintf(out, "param %s", fn->params[i].name);
        if (fn->params[i].type)
            fprintf(out, ": %s", kj_type_name(fn->params[i].type));
        dump_loc_end(out, fn->params[i].loc);
    }
    dump_node(out, fn->body, depth + 1);
}

static void dump_node(FILE *out, const KjNode *node, int depth)
{
    if (!node)
        return;
    dump_indent(out, depth);
    switch (node->kind) {
    case KJ_NODE_INT_LIT:
        fprintf(out, "int %" PRIu64, node->int_value);
        break;
    case KJ_NODE_FLOAT_LIT:
        fputs("float ", out);
        print_float(out, node->float_value);
        break;
    case KJ_NODE_BOOL_LIT:
        fputs(node->int_value ? "bool true" : "bool false", out);
        break;
    case KJ_NODE_STRING_LIT:
        fputs("string ", out);
        kj_write_quoted(out, node->name);
        break;
    case KJ_NODE_NAME:
        fprintf(out, "name %s", node->name);
        break;
    case KJ_NODE_UNARY:
        fprintf(out, "unary %s", kj_unary_op_spelling(node->unary_op));
        break;
    case KJ_NODE_BINARY:
        fprintf(out, "binary %s", kj_binary_op_spelling(node->binary_op));
        break;
    case KJ_NODE_TERNARY: fputs("ternary", out); break;
    case KJ_NODE_CALL: fputs("call", out); break;
    case KJ_NODE_INDEX: fputs("index", out); break;
    case KJ_NODE_MEMBER:
        fprintf(out, "member .%s", node->name);
        break;
    case KJ_NODE_BLOCK: fputs("block", out); break;
    case KJ_NODE_LET:
        fputs("let", out);
        for (int i = 0; i < node->names.count; i++)
            fprintf(out, "%s%s", i ? ", " : " ", (const char *)node->names.items[i]);
        if (node->declared_type)
            fprintf(out, ": %s", kj_type_name(node->declared_type));
        break;
    case KJ_NODE_ASSIGN:
        fprintf(out, "assign %s", kj_token_name(node->assign_op));
        break;
    case KJ_NODE_EXPR_STMT: fputs("expr", out); break;
    case KJ_NODE_IF: fputs("if", out); break;
    case KJ_NODE_FOR:
        fprintf(out, "for %s in range", node->name);
        break;
    case KJ_NODE_WHILE: fputs("while", out); break;
    case KJ_NODE_BREAK: fputs("break", out); break;
    case KJ_NODE_CONTINUE: fputs("continue", out); break;
    case KJ_NODE_RETURN: fputs("return", out); break;
    case KJ_NODE_IMPORT:
        fprintf(out, "import %s", node->name);
        break;
    case KJ_NODE_CONST:
        fprintf(out, "const %s", node->name);
        if (node->declared_type)
            fprintf(out, ": %s", kj_type_name(node->declared_type));
        break;
    case KJ_NODE_ARRAY_LIT:
        fprintf(out, "array literal of %d", node->args.count);
        break;
    case KJ_NODE_FUNCTION:
        dump_function(out, node, depth);
        return;
    default:
        kj_unreachable();
    }
    dump_loc_end(out, node->loc);

    /* Children in a fixed order: condition, operands, arguments, bodies. */
    dump_node(out, node->cond, depth + 1);
    dump_node(out, node->lhs, depth + 1);
    dump_node(out, node->rhs, depth + 1);
    dump_children(out, &node->args, depth + 1);
    dump_node(out, node->then_body, depth + 1);
    dump_node(out, node->else_body, depth + 1);
    dump_children(out, &node->body, depth + 1);
}

void kj_ast_dump(FILE *out, const KjAstFile *file)
{
    fprintf(out, "file %s\n", file->src && file->src->path ? file->src->path : "<input>");
    for (int i = 0; i < file->decls.count; i++)
        dump_node(out, file->decls.items[i], 1);
}
