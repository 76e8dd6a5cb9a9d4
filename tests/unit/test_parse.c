/* test_parse.c: the parser.  Precedence and associativity are checked on
 * random expression trees: each tree is printed with only the parentheses the
 * design's precedence table requires, parsed back, and must come out as the
 * same tree.  Then every statement and declaration form, the fields the
 * checker relies on, and the syntax errors: message, place, recovery (several
 * errors in one run, one error per mistake). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_compiler.h"

typedef struct Parsed {
    KjArena arena;
    KjSource src;
    KjDiag diag;
    KjBuf errors;
    KjAstFile *file;
} Parsed;

static void collect(void *user, KjSeverity severity, const char *text)
{
    kj_buf_printf(user, "%s", text);
}

static Parsed *parse(const char *text)
{
    Parsed *ps = kj_xcalloc(1, sizeof *ps);
    ps->src = (KjSource){"t.kern", text, strlen(text)};
    ps->diag = (KjDiag){collect, &ps->errors, 0, 0};
    ps->file = kj_parse(&ps->arena, &ps->src, &ps->diag);
    return ps;
}

static void parsed_free(Parsed *ps)
{
    kj_arena_free(&ps->arena);
    kj_buf_free(&ps->errors);
    free(ps);
}

static const char *errors(Parsed *ps)
{
    return ps->errors.data ? ps->errors.data : "";
}

/* The statements of the first function's body. */
static KjVec *body(Parsed *ps)
{
    ck_assert_int_ge(ps->file->decls.count, 1);
    KjNode *fn = ps->file->decls.items[0];
    ck_assert_int_eq(fn->kind, KJ_NODE_FUNCTION);
    return &fn->fn->body->body;
}

static KjNode *stmt(Parsed *ps, int i)
{
    KjVec *stmts = body(ps);
    ck_assert_int_gt(stmts->count, i);
    return stmts->items[i];
}

/* A compact S-expression of an expression AST. */
static void sexpr(KjBuf *out, const KjNode *n)
{
    switch (n->kind) {
    case KJ_NODE_INT_LIT: kj_buf_printf(out, "%llu", (unsigned long long)n->int_value); return;
    case KJ_NODE_FLOAT_LIT: kj_buf_printf(out, "%g", n->float_value); return;
    case KJ_NODE_BOOL_LIT: kj_buf_printf(out, n->int_value ? "true" : "false"); return;
    case KJ_NODE_NAME: kj_buf_printf(out, "%s", n->name); return;
    case KJ_NODE_UNARY:
        kj_buf_printf(out, "(u%s ", kj_unary_op_spelling(n->unary_op));
        sexpr(out, n->lhs);
        break;
    case KJ_NODE_BINARY:
        kj_buf_printf(out, "(%s ", kj_binary_op_spelling(n->binary_op));
        sexpr(out, n->lhs);
        kj_buf_printf(out, " ");
        sexpr(out, n->rhs);
        break;
    case KJ_NODE_TERNARY:
        kj_buf_printf(out, "(? ");
        sexpr(out, n->cond);
        kj_buf_printf(out, " ");
        sexpr(out, n->lhs);
        kj_buf_printf(out, " ");
        sexpr(out, n->rhs);
        break;
    case KJ_NODE_CALL:
    case KJ_NODE_INDEX:
        kj_buf_printf(out, n->kind == KJ_NODE_CALL ? "(call " : "([] ");
        sexpr(out, n->lhs);
        for (int i = 0; i < n->args.count; i++) {
            kj_buf_printf(out, " ");
            sexpr(out, n->args.items[i]);
        }
        break;
    case KJ_NODE_MEMBER:
        kj_buf_printf(out, "(. ");
        sexpr(out, n->lhs);
        kj_buf_printf(out, " %s", n->name);
        break;
    default:
        ck_abort_msg("not an expression: %s", kj_node_kind_name(n->kind));
    }
    kj_buf_printf(out, ")");
}

/* Parses `fn f() { return EXPR; }` and gives the expression's S-expression. */
static char *parse_expr(const char *expr)
{
    KjBuf text = {0};
    kj_buf_printf(&text, "fn f() { return %s; }", expr);
    Parsed *ps = parse(text.data);
    ck_assert_msg(ps->diag.error_count == 0, "%s: %s", expr, errors(ps));
    KjNode *ret = stmt(ps, 0);
    ck_assert_int_eq(ret->kind, KJ_NODE_RETURN);
    KjBuf out = {0};
    sexpr(&out, ret->lhs);
    char *result = kj_xstrdup(out.data);
    kj_buf_free(&out);
    kj_buf_free(&text);
    parsed_free(ps);
    return result;
}

START_TEST(test_precedence_table)
{
    static const char *const cases[][2] = {
        {"a + b * c", "(+ a (* b c))"},
        {"a - b - c", "(- (- a b) c)"},
        {"a / b % c * d", "(* (% (/ a b) c) d)"},
        {"-x ** 2", "(u- (** x 2))"},
        {"2 ** 3 ** 2", "(** 2 (** 3 2))"},
        {"a ** -b", "(** a (u- b))"},
        {"(-x) ** 2", "(** (u- x) 2)"},
        {"a || b && c", "(|| a (&& b c))"},
        {"a | b ^ c & d", "(| a (^ b (& c d)))"},
        {"a & b == c", "(& a (== b c))"},
        {"a == b < c", "(== a (< b c))"},
        {"a != b >= c", "(!= a (>= b c))"},
        {"a < b << c", "(< a (<< b c))"},
        {"a << b + c", "(<< a (+ b c))"},
        {"a >> b - c", "(>> a (- b c))"},
        {"c ? a : b ? d : e", "(? c a (? b d e))"},
        {"a || b ? c + 1 : d", "(? (|| a b) (+ c 1) d)"},
        {"c ? x ? 1 : 2 : 3", "(? c (? x 1 2) 3)"},
        {"!a && ~b", "(&& (u! a) (u~ b))"},
        {"- -+x", "(u- (u- (u+ x)))"},
        {"f(x, y)[i, j].real", "(. ([] (call f x y) i j) real)"},
        {"f32(x) * 0.5", "(* (call f32 x) 0.5)"},
        {"(a + b) * c", "(* (+ a b) c)"},
        {"a.shape[0] + len(a)", "(+ ([] (. a shape) 0) (call len a))"},
        {"threadIdx.x + blockIdx.x * blockDim.x",
         "(+ (. threadIdx x) (* (. blockIdx x) (. blockDim x)))"},
        {"true && false", "(&& true false)"},
        {"g()", "(call g)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = parse_expr(cases[i][0]);
        ck_assert_msg(strcmp(got, cases[i][1]) == 0, "%s: got %s, want %s", cases[i][0], got,
                      cases[i][1]);
        free(got);
    }
}
END_TEST

/* ---- random trees printed with minimal parentheses must parse back as themselves */

typedef struct Tree {
    int kind; /* 0 leaf, 1 unary, 2 binary, 3 ternary */
    int op;   /* unary: KjUnaryOp, binary: KjBinaryOp */
    int leaf;
    struct Tree *kid[3];
} Tree;

/* The design's table: higher binds tighter; unary is 12 and ** 13. */
static int binary_prec(KjBinaryOp op)
{
    switch (op) {
    case KJ_BIN_LOGOR: return 2;
    case KJ_BIN_LOGAND: return 3;
    case KJ_BIN_BITOR: return 4;
    case KJ_BIN_BITXOR: return 5;
    case KJ_BIN_BITAND: return 6;
    case KJ_BIN_EQ: case KJ_BIN_NE: return 7;
    case KJ_BIN_LT: case KJ_BIN_LE: case KJ_BIN_GT: case KJ_BIN_GE: return 8;
    case KJ_BIN_SHL: case KJ_BIN_SHR: return 9;
    case KJ_BIN_ADD: case KJ_BIN_SUB: return 10;
    case KJ_BIN_MUL: case KJ_BIN_DIV: case KJ_BIN_REM: return 11;
    case KJ_BIN_POW: return 13;
    default: return 0;
    }
}

static int tree_prec(const Tree *t)
{
    switch (t->kind) {
    case 0: return 100;
    case 1: return 12;
    case 2: return binary_prec(t->op);
    default: return 1;
    }
}

static Tree *random_tree(int depth)
{
    Tree *t = kj_xcalloc(1, sizeof *t);
    int r = depth <= 0 ? 0 : rand() % 10;
    if (r < 3) {
        t->kind = 0;
        t->leaf = rand() % 26;
    } else if (r < 4) {
        t->kind = 1;
        t->op = rand() % KJ_UN_COUNT;
        t->kid[0] = random_tree(depth - 1);
    } else if (r < 9) {
        t->kind = 2;
        t->op = rand() % KJ_BIN_COUNT;
        t->kid[0] = random_tree(depth - 1);
        t->kid[1] = random_tree(depth - 1);
    } else {
        t->kind = 3;
        for (int i = 0; i < 3; i++)
            t->kid[i] = random_tree(depth - 1);
    }
    return t;
}

static void tree_free(Tree *t)
{
    for (int i = 0; i < 3; i++)
        if (t->kid[i])
            tree_free(t->kid[i]);
    free(t);
}

static void print_tree(KjBuf *out, const Tree *t);

static void print_kid(KjBuf *out, const Tree *kid, bool parens)
{
    if (parens)
        kj_buf_printf(out, "(");
    print_tree(out, kid);
    if (parens)
        kj_buf_printf(out, ")");
}

static void print_tree(KjBuf *out, const Tree *t)
{
    switch (t->kind) {
    case 0:
        kj_buf_printf(out, "%c", 'a' + t->leaf);
        break;
    case 1:
        kj_buf_printf(out, "%s ", kj_unary_op_spelling(t->op));
        print_kid(out, t->kid[0], tree_prec(t->kid[0]) < 12);
        break;
    case 2: {
        int p = binary_prec(t->op);
        if (t->op == KJ_BIN_POW) {
            /* The base is a postfix expression; the exponent may be unary. */
            print_kid(out, t->kid[0], tree_prec(t->kid[0]) <= 13);
            kj_buf_printf(out, " ** ");
            print_kid(out, t->kid[1], tree_prec(t->kid[1]) < 12);
        } else {
            print_kid(out, t->kid[0], tree_prec(t->kid[0]) < p);
            kj_buf_printf(out, " %s ", kj_binary_op_spelling(t->op));
            print_kid(out, t->kid[1], tree_prec(t->kid[1]) <= p);
        }
        break;
    }
    default:
        print_kid(out, t->kid[0], tree_prec(t->kid[0]) <= 1);
        kj_buf_printf(out, " ? ");
        print_kid(out, t->kid[1], false);
        kj_buf_printf(out, " : ");
        print_kid(out, t->kid[2], false);
        break;
    }
}

static void tree_sexpr(KjBuf *out, const Tree *t)
{
    switch (t->kind) {
    case 0: kj_buf_printf(out, "%c", 'a' + t->leaf); return;
    case 1:
        kj_buf_printf(out, "(u%s ", kj_unary_op_spelling(t->op));
        tree_sexpr(out, t->kid[0]);
        break;
    case 2:
        kj_buf_printf(out, "(%s ", kj_binary_op_spelling(t->op));
        tree_sexpr(out, t->kid[0]);
        kj_buf_printf(out, " ");
        tree_sexpr(out, t->kid[1]);
        break;
    default:
        kj_buf_printf(out, "(? ");
        for (int i = 0; i < 3; i++) {
            tree_sexpr(out, t->kid[i]);
            kj_buf_printf(out, i < 2 ? " " : "");
        }
        break;
    }
    kj_buf_printf(out, ")");
}

START_TEST(test_precedence_random_trees)
{
    srand(4242);
    for (int i = 0; i < 1000; i++) {
        Tree *t = random_tree(1 + rand() % 5);
        KjBuf text = {0}, want = {0};
        print_tree(&text, t);
        tree_sexpr(&want, t);
        char *got = parse_expr(text.data);
        ck_assert_msg(strcmp(got, want.data) == 0, "%s: got %s, want %s", text.data, got,
                      want.data);
        free(got);
        kj_buf_free(&text);
        kj_buf_free(&want);
        tree_free(t);
    }
}
END_TEST

/* ----------------------------------------------------------- statements */

START_TEST(test_let_forms)
{
    Parsed *ps = parse("fn f() { let x = 1.0; let acc: f64 = 0; let px, py = grid(2);\n"
                       "let img: u8[,] = a; }");
    ck_assert_str_eq(errors(ps), "");
    KjNode *a = stmt(ps, 0), *b = stmt(ps, 1), *c = stmt(ps, 2), *d = stmt(ps, 3);
    ck_assert_int_eq(a->kind, KJ_NODE_LET);
    ck_assert_int_eq(a->names.count, 1);
    ck_assert_str_eq(a->names.items[0], "x");
    ck_assert_ptr_null(a->declared_type);
    ck_assert_int_eq(a->rhs->kind, KJ_NODE_FLOAT_LIT);
    ck_assert_ptr_eq(b->declared_type, kj_type_scalar(KJ_TYPE_F64));
    ck_assert_int_eq(c->names.count, 2);
    ck_assert_str_eq(c->names.items[1], "py");
    ck_assert_int_eq(c->rhs->kind, KJ_NODE_CALL);
    ck_assert_ptr_eq(d->declared_type, kj_type_array(kj_type_scalar(KJ_TYPE_U8), 2));
    parsed_free(ps);
}
END_TEST

START_TEST(test_every_assignment_operator)
{
    for (KjTokenKind op = KJ_TOK_ASSIGN; op <= KJ_TOK_SHR_ASSIGN; op++) {
        KjBuf text = {0};
        kj_buf_printf(&text, "fn f() { a[i, j] %s 1; }", kj_token_name(op));
        Parsed *ps = parse(text.data);
        ck_assert_msg(ps->diag.error_count == 0, "%s", errors(ps));
        KjNode *s = stmt(ps, 0);
        ck_assert_int_eq(s->kind, KJ_NODE_ASSIGN);
        ck_assert_int_eq(s->assign_op, op);
        ck_assert_int_eq(s->lhs->kind, KJ_NODE_INDEX);
        ck_assert_int_eq(s->lhs->args.count, 2);
        ck_assert_int_eq(s->rhs->kind, KJ_NODE_INT_LIT);
        parsed_free(ps);
        kj_buf_free(&text);
    }
}
END_TEST

START_TEST(test_control_flow)
{
    Parsed *ps = parse("fn f(n: i64) -> i64 {\n"
                       "  if a { } else if b { x = 1; } else { y = 2; }\n"
                       "  for i in range(n) { break; }\n"
                       "  for i in range(1, n) { continue; }\n"
                       "  for i in range(n, 0, -1) { }\n"
                       "  while i < n { i += 1; }\n"
                       "  { g(); }\n"
                       "  return;\n"
                       "  return n * 2;\n"
                       "}");
    ck_assert_str_eq(errors(ps), "");
    KjNode *s = stmt(ps, 0);
    ck_assert_int_eq(s->kind, KJ_NODE_IF);
    ck_assert_int_eq(s->cond->kind, KJ_NODE_NAME);
    ck_assert_int_eq(s->then_body->kind, KJ_NODE_BLOCK);
    ck_assert_int_eq(s->else_body->kind, KJ_NODE_IF);
    ck_assert_int_eq(s->else_body->else_body->kind, KJ_NODE_BLOCK);
    ck_assert_int_eq(s->else_body->else_body->body.count, 1);
    for (int i = 1; i <= 3; i++) {
        s = stmt(ps, i);
        ck_assert_int_eq(s->kind, KJ_NODE_FOR);
        ck_assert_str_eq(s->name, "i");
        ck_assert_int_eq(s->args.count, i);
        ck_assert_int_eq(s->then_body->kind, KJ_NODE_BLOCK);
    }
    ck_assert_int_eq(((KjNode *)stmt(ps, 1)->then_body->body.items[0])->kind, KJ_NODE_BREAK);
    ck_assert_int_eq(((KjNode *)stmt(ps, 2)->then_body->body.items[0])->kind, KJ_NODE_CONTINUE);
    s = stmt(ps, 4);
    ck_assert_int_eq(s->kind, KJ_NODE_WHILE);
    ck_assert_int_eq(s->cond->kind, KJ_NODE_BINARY);
    ck_assert_int_eq(s->then_body->body.count, 1);
    s = stmt(ps, 5);
    ck_assert_int_eq(s->kind, KJ_NODE_BLOCK);
    ck_assert_int_eq(((KjNode *)s->body.items[0])->kind, KJ_NODE_EXPR_STMT);
    ck_assert_int_eq(stmt(ps, 6)->kind, KJ_NODE_RETURN);
    ck_assert_ptr_null(stmt(ps, 6)->lhs);
    ck_assert_int_eq(stmt(ps, 7)->lhs->kind, KJ_NODE_BINARY);
    ck_assert_int_eq(stmt(ps, 7)->loc.line, 9);
    ck_assert_int_eq(stmt(ps, 7)->loc.col, 3);
    parsed_free(ps);
}
END_TEST

START_TEST(test_declarations)
{
    Parsed *ps = parse("import geo;\n"
                       "fn hypot2(x: f64, y: f64) -> f64 { return x * x + y * y; }\n"
                       "@vectorize\nfn add(a: f32, b: f32) -> f32 { return a + b; }\n"
                       "@vectorize(f32(f32, f32), f64(f64, f64))\nfn mul(a, b) { return a * b; }\n"
                       "@kernel\nfn k(a: f32, x: f32[], m: u8[,], t: f64[,,,,,,,]) { }\n");
    ck_assert_str_eq(errors(ps), "");
    ck_assert_int_eq(ps->file->decls.count, 5);
    KjNode *imp = ps->file->decls.items[0];
    ck_assert_int_eq(imp->kind, KJ_NODE_IMPORT);
    ck_assert_str_eq(imp->name, "geo");

    KjFunctionDecl *fn = ((KjNode *)ps->file->decls.items[1])->fn;
    ck_assert_str_eq(fn->name, "hypot2");
    ck_assert_int_eq(fn->kind, KJ_FN_PLAIN);
    ck_assert_int_eq(fn->param_count, 2);
    ck_assert_ptr_eq(fn->ret, kj_type_scalar(KJ_TYPE_F64));
    ck_assert_int_eq(fn->loc.line, 2);
    ck_assert_int_eq(fn->loc.col, 4);

    fn = ((KjNode *)ps->file->decls.items[2])->fn;
    ck_assert_int_eq(fn->kind, KJ_FN_VECTORIZE);
    ck_assert_int_eq(fn->signature_count, 0);
    ck_assert_ptr_eq(fn->params[1].type, kj_type_scalar(KJ_TYPE_F32));

    fn = ((KjNode *)ps->file->decls.items[3])->fn;
    ck_assert_int_eq(fn->kind, KJ_FN_VECTORIZE);
    ck_assert_int_eq(fn->signature_count, 2);
    ck_assert_ptr_eq(fn->signatures[1].ret, kj_type_scalar(KJ_TYPE_F64));
    ck_assert_int_eq(fn->signatures[0].param_count, 2);
    ck_assert_ptr_eq(fn->signatures[0].params[1], kj_type_scalar(KJ_TYPE_F32));
    ck_assert_ptr_null(fn->params[0].type);
    ck_assert_ptr_null(fn->ret);

    fn = ((KjNode *)ps->file->decls.items[4])->fn;
    ck_assert_int_eq(fn->kind, KJ_FN_KERNEL);
    ck_assert_int_eq(fn->param_count, 4);
    ck_assert_str_eq(kj_type_name(fn->params[1].type), "f32[]");
    ck_assert_str_eq(kj_type_name(fn->params[2].type), "u8[,]");
    ck_assert_int_eq(fn->params[3].type->ndim, 8);
    ck_assert_ptr_null(fn->ret);
    parsed_free(ps);
}
END_TEST

START_TEST(test_dump)
{
    Parsed *ps = parse("@kernel\nfn k(x: f32[]) {\n  x[0] = -2.5 ** 2;\n}\n");
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    kj_ast_dump(out, ps->file);
    fclose(out);
    ck_assert_str_eq(text, "file t.kern\n"
                           "  function k kernel @2:4\n"
                           "    param x: f32[] @2:6\n"
                           "    block @2:16\n"
                           "      assign = @3:8\n"
                           "        index @3:4\n"
                           "          name x @3:3\n"
                           "          int 0 @3:5\n"
                           "        unary - @3:10\n"
                           "          binary ** @3:15\n"
                           "            float 2.5 @3:11\n"
                           "            int 2 @3:18\n");
    free(text);
    parsed_free(ps);
}
END_TEST

/* ----------------------------------------------------------- errors */

START_TEST(test_missing_semicolon)
{
    Parsed *ps = parse("fn f() {\n    let x = 1\n    let y = 2;\n}\n");
    ck_assert_str_eq(errors(ps), "t.kern:2:14: error: expected ';' before 'let'\n"
                                 "    let x = 1\n"
                                 "             ^\n");
    /* Recovery resumes at the next statement: y is still declared. */
    ck_assert_int_eq(body(ps)->count, 1);
    ck_assert_str_eq(stmt(ps, 0)->name, "y");
    parsed_free(ps);
}
END_TEST

START_TEST(test_chained_index)
{
    Parsed *ps = parse("fn f() { a[i][j] = 1; }");
    ck_assert_int_eq(ps->diag.error_count, 1);
    ck_assert_ptr_nonnull(strstr(errors(ps), "t.kern:1:14: error: an array is indexed once with "
                                             "every index: write a[i, j], not a[i][j]"));
    parsed_free(ps);
}
END_TEST

START_TEST(test_for_needs_range)
{
    Parsed *ps = parse("fn f() { for i in xs { } for j in range(1, 2, 3, 4) { } }");
    ck_assert_int_eq(ps->diag.error_count, 2);
    ck_assert_ptr_nonnull(strstr(errors(ps), "t.kern:1:19: error: a for loop runs over range(...)"));
    ck_assert_ptr_nonnull(strstr(errors(ps), "t.kern:1:40: error: range takes 1 to 3 arguments"));
    parsed_free(ps);
}
END_TEST

START_TEST(test_too_many_dims_and_types)
{
    Parsed *ps = parse("fn f(a: f32[,,,,,,,,], b: float, c) { }");
    ck_assert_int_eq(ps->diag.error_count, 3);
    ck_assert_ptr_nonnull(strstr(errors(ps), "t.kern:1:12: error: an array has at most 8 dimensions, this one has 9"));
    ck_assert_ptr_nonnull(strstr(errors(ps), "t.kern:1:27: error: unknown type 'float'"));
    ck_assert_ptr_nonnull(strstr(errors(ps), "t.kern:1:34: error: parameter 'c' needs a type"));
    parsed_free(ps);
}
END_TEST

START_TEST(test_attribute_errors)
{
    Parsed *ps = parse("@jit\nfn a() { }\n@kernel(f32(f32))\nfn b() { }\n"
                       "@vectorize(f32(f32))\nfn c(x: f32) -> f32 { return x; }\nfn ok() { }\n");
    ck_assert_int_eq(ps->diag.error_count, 4);
    ck_assert_ptr_nonnull(strstr(errors(ps), "t.kern:1:2: error: unknown attribute '@jit'"));
    ck_assert_ptr_nonnull(strstr(errors(ps), "t.kern:3:8: error: @kernel takes no arguments"));
    ck_assert_ptr_nonnull(strstr(errors(ps), "t.kern:6:6: error: parameter 'x' of a @vectorize with a signature list"));
    ck_assert_ptr_nonnull(strstr(errors(ps), "t.kern:6:14: error: a @vectorize with a signature list takes its return type"));
    /* The last function still parses. */
    KjNode *last = ps->file->decls.items[ps->file->decls.count - 1];
    ck_assert_str_eq(last->name, "ok");
    parsed_free(ps);
}
END_TEST

/* One message per mistake, several mistakes per run, in source order. */
START_TEST(test_several_errors_in_order)
{
    Parsed *ps = parse("fn f() {\n"
                       "  let = 1;\n"
                       "  x = (1 + ;\n"
                       "  let ok = 2;\n"
                       "  y = 3 $ 4;\n"
                       "  if x { z = ; } else { w = 1; }\n"
                       "}\n"
                       "junk\n"
                       "fn g() -> f32 { return 1.0 }\n"
                       "fn h() { }\n");
    static const char *const want[] = {
        "t.kern:2:7: error: expected identifier, found '='",
        "t.kern:3:12: error: expected an expression, found ';'",
        "t.kern:5:9: error: invalid character '$'",
        "t.kern:6:14: error: expected an expression, found ';'",
        "t.kern:8:1: error: expected 'fn', '@', 'const' or 'import', found 'junk'",
        "t.kern:9:27: error: expected ';' before '}'",
    };
    int n = sizeof want / sizeof want[0];
    ck_assert_msg(ps->diag.error_count == n, "%s", errors(ps));
    const char *at = errors(ps);
    for (int i = 0; i < n; i++) {
        const char *found = strstr(at, want[i]);
        ck_assert_msg(found != NULL, "missing or out of order: %s\nin:\n%s", want[i], errors(ps));
        at = found + 1;
    }
    ck_assert_int_eq(ps->file->decls.count, 3);
    ck_assert_str_eq(stmt(ps, 0)->name, "ok");
    parsed_free(ps);
}
END_TEST

START_TEST(test_missing_brace_before_next_function)
{
    Parsed *ps = parse("fn f() {\n  let x = 1;\n\nfn g() { }\n");
    ck_assert_int_eq(ps->diag.error_count, 1);
    ck_assert_ptr_nonnull(strstr(errors(ps), "t.kern:4:1: error: expected '}', found 'fn'"));
    ck_assert_int_eq(ps->file->decls.count, 2);
    parsed_free(ps);
}
END_TEST

START_TEST(test_deep_nesting_is_an_error_not_a_crash)
{
    size_t n = 100000;
    char *text = kj_xmalloc(n * 2 + 64);
    strcpy(text, "fn f() { return ");
    size_t len = strlen(text);
    memset(text + len, '(', n);
    strcpy(text + len + n, "1; }");
    Parsed *ps = parse(text);
    ck_assert_int_eq(ps->diag.error_count, 1);
    ck_assert_ptr_nonnull(strstr(errors(ps), "nested too deeply"));
    parsed_free(ps);
    free(text);
}
END_TEST

START_TEST(test_error_cap)
{
    KjBuf text = {0};
    for (int i = 0; i < 300; i++)
        kj_buf_printf(&text, "$\n");
    Parsed *ps = parse(text.data);
    ck_assert_int_eq(ps->diag.error_count, 300);
    ck_assert_ptr_nonnull(strstr(errors(ps), "error: too many errors (100), stopping here\n"));
    ck_assert_ptr_null(strstr(errors(ps), "t.kern:101:1"));
    ck_assert_ptr_nonnull(strstr(errors(ps), "t.kern:100:1"));
    parsed_free(ps);
    kj_buf_free(&text);
}
END_TEST

Suite *suite_parse(void)
{
    Suite *s = suite_create("parse");
    TCase *tc = tcase_create("parse");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_precedence_table);
    tcase_add_test(tc, test_precedence_random_trees);
    tcase_add_test(tc, test_let_forms);
    tcase_add_test(tc, test_every_assignment_operator);
    tcase_add_test(tc, test_control_flow);
    tcase_add_test(tc, test_declarations);
    tcase_add_test(tc, test_dump);
    tcase_add_test(tc, test_missing_semicolon);
    tcase_add_test(tc, test_chained_index);
    tcase_add_test(tc, test_for_needs_range);
    tcase_add_test(tc, test_too_many_dims_and_types);
    tcase_add_test(tc, test_attribute_errors);
    tcase_add_test(tc, test_several_errors_in_order);
    tcase_add_test(tc, test_missing_brace_before_next_function);
    tcase_add_test(tc, test_deep_nesting_is_an_error_not_a_crash);
    tcase_add_test(tc, test_error_cap);
    suite_add_tcase(s, tc);
    return s;
}
