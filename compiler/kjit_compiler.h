/*
 * kjit_compiler.h: the one internal header of the compiler.
 *
 * Sections follow the files that implement them: util.c (allocation, arena,
 * strings), diag.c (sources and the error reporter), types.c, lex.c (re2c, from
 * grammar/kern.re), parse.c (AST), check.c (names, types, AST to IR; the
 * checker's own files share compiler/checker.h), ir.c (IR builders and name
 * tables; ir_print.c the printer, ir_verify.c the verifier), module.c
 * (imports), vectorize.c, and pipeline.c (the pass list).  This is the lowest layer of kjit: it includes
 * nothing from the back end (compiler/backend/), the runtime or the command
 * line, and nothing of LLVM or CUDA.
 */
#ifndef KJIT_COMPILER_H
#define KJIT_COMPILER_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ===================================================================== util.c */

#define KJ_MAX_DIMS 8
/* x ** n for a constant n up to this in magnitude is a chain of products,
 * (x^(n/2))^2 times x when n is odd, in the checker and the code generators
 * alike (docs/language.md, "Powers"). */
#define KJ_POW_CHAIN_MAX 8
/* A kernel's local() arrays per thread: CUDA's limit of local memory per
 * thread, kept on every target so that a program runs on all of them. */
#define KJ_MAX_LOCAL_BYTES (512 * 1024)
/* The most outputs a @vectorize function may have (-> (f64, i32, ...)). */
#define KJ_MAX_VEC_OUTPUTS 8

/* The bytes one shared() array of `bytes` takes in a kernel's static shared
 * memory: each array is its own 16-byte aligned slice, in the order the calls
 * appear (the cpu code's layout).  The checker sums these into
 * shared_bytes before any code exists, so that code loaded from a cache, or
 * generated for another context, gets all the memory it addresses. */
#define KJ_SHARED_ALIGN 16
static inline int64_t kj_shared_slice_bytes(int64_t bytes)
{
    return (bytes + KJ_SHARED_ALIGN - 1) & ~(int64_t)(KJ_SHARED_ALIGN - 1);
}

/* The longest chain of calls a program may make (f calls g calls h ...: 2).
 * LLVM's inliner copies a chain of n small functions n^2/2 instructions
 * (10,000 took 90 s), and the checker and the code generator recurse down
 * chains.  Real kernels call a few levels deep. */
#define KJ_MAX_CALL_DEPTH 64

/* Internal invariants only: bad user input is never a reason to die. */
_Noreturn void kj_die_at(const char *file, int line, const char *fmt, ...);
#define kj_die(...) kj_die_at(__FILE__, __LINE__, __VA_ARGS__)
#define kj_unreachable() kj_die_at(__FILE__, __LINE__, "unreachable")

/* For a helper of a recursive walk that holds large locals: inlined, its frame
 * would be paid at every level of the recursion, not only where it is used
 * (the depth the passes may recurse to is bounded in parse.c). */
#define KJ_NOINLINE __attribute__((noinline))

/* The one checked wrapper for allocations that outlive a compilation. */
void *kj_xmalloc(size_t size);
void *kj_xcalloc(size_t count, size_t size);
void *kj_xrealloc(void *ptr, size_t size);
char *kj_xstrdup(const char *s);

/* Per-compilation memory: everything of an AST, the types of a module and its
 * IR live in one arena and go away with kj_arena_free. */
typedef struct KjArenaBlock KjArenaBlock;
typedef struct KjArena {
    KjArenaBlock *head;
} KjArena;

void *kj_arena_alloc(KjArena *arena, size_t size); /* zeroed, 16-byte aligned */
char *kj_arena_strdup(KjArena *arena, const char *s);
char *kj_arena_strndup(KjArena *arena, const char *s, size_t n);
char *kj_arena_printf(KjArena *arena, const char *fmt, ...);
void kj_arena_free(KjArena *arena);

/* A growable array of pointers, allocated in an arena. */
typedef struct KjVec {
    void **items;
    int count, capacity;
} KjVec;
void kj_vec_push(KjArena *arena, KjVec *vec, void *item);

/* A growable string (heap). */
typedef struct KjBuf {
    char *data;
    size_t len, cap;
} KjBuf;
void kj_buf_printf(KjBuf *buf, const char *fmt, ...);
void kj_buf_vprintf(KjBuf *buf, const char *fmt, va_list ap);
void kj_buf_free(KjBuf *buf);

/* text between double quotes, with \n \t \" \\ escaped (dumps of strings). */
void kj_write_quoted(FILE *out, const char *text);

/* 64-bit FNV-1a, for content hashes. */
uint64_t kj_hash_bytes(uint64_t seed, const void *data, size_t len);

/* ===================================================================== diag.c */

/* A source file held in memory for the life of a compilation. */
typedef struct KjSource {
    const char *path; /* as given by the user: appears in diagnostics */
    const char *text; /* NUL-terminated */
    size_t len;
} KjSource;

typedef struct KjLoc {
    const KjSource *src;
    int line, col; /* both from 1; col counts bytes */
} KjLoc;

typedef enum { KJ_SEVERITY_ERROR, KJ_SEVERITY_NOTE, KJ_SEVERITY_WARNING } KjSeverity;

/* The reporter formats "file:line:col: error: message\n<line>\n   ^\n" and hands
 * each complete diagnostic to the sink; it never prints by itself. */
typedef void (*KjDiagSink)(void *user, KjSeverity severity, const char *formatted);

typedef struct KjDiag {
    KjDiagSink sink;
    void *user;
    int error_count;
    int max_errors; /* stop reporting after this many (0: 100) */
} KjDiag;

void kj_error(KjDiag *diag, KjLoc loc, const char *fmt, ...);
void kj_note(KjDiag *diag, KjLoc loc, const char *fmt, ...);
/* "file:line:col: warning: message": not an error (error_count stays). */
void kj_warning(KjDiag *diag, KjLoc loc, const char *fmt, ...);
/* An error with no source position (I/O, usage): "file: error: message". */
void kj_error_plain(KjDiag *diag, const char *where, const char *fmt, ...);

/* ==================================================================== types.c */

/* X(kind, name, size_bytes). Scalars are singletons: compare types by pointer. */
#define KJ_SCALAR_TYPES(X) \
    X(BOOL, "bool", 1)     \
    X(I8, "i8", 1)         \
    X(I16, "i16", 2)       \
    X(I32, "i32", 4)       \
    X(I64, "i64", 8)       \
    X(U8, "u8", 1)         \
    X(U16, "u16", 2)       \
    X(U32, "u32", 4)       \
    X(U64, "u64", 8)       \
    X(F32, "f32", 4)       \
    X(F64, "f64", 8)       \
    X(C64, "c64", 8)       \
    X(C128, "c128", 16)    \
    X(F16, "f16", 2)       \
    X(BF16, "bf16", 2)

typedef enum {
    KJ_TYPE_VOID,
#define X(kind, name, size) KJ_TYPE_##kind,
    KJ_SCALAR_TYPES(X)
#undef X
    KJ_TYPE_LAST_SCALAR = KJ_TYPE_BF16,
    KJ_TYPE_ARRAY,       /* elem, ndim */
    KJ_TYPE_UNTYPED_INT, /* literal whose type is not settled yet (checker only) */
    KJ_TYPE_UNTYPED_FLOAT,
    KJ_TYPE_COUNT
} KjTypeKind;

typedef struct KjType {
    KjTypeKind kind;
    const struct KjType *elem; /* ARRAY: element type (a scalar) */
    int ndim;                  /* ARRAY: 1..KJ_MAX_DIMS */
} KjType;

/* Interned: the same kind (and elem, ndim) always gives the same pointer. */
const KjType *kj_type_scalar(KjTypeKind kind);
const KjType *kj_type_array(const KjType *elem, int ndim);
const KjType *kj_type_void(void);
const KjType *kj_type_from_name(const char *name, size_t len); /* "f32" ...; NULL if none */
const char *kj_type_name(const KjType *type);                  /* "f32[,]" (static) */
int kj_type_size(const KjType *type);                          /* scalars: bytes */
bool kj_type_is_int(const KjType *type);                       /* i*, u* */
bool kj_type_is_signed(const KjType *type);
bool kj_type_is_float(const KjType *type);   /* f16 bf16 f32 f64 */
bool kj_type_is_half(const KjType *type);    /* f16 bf16: stored narrow, computed as f32 */
bool kj_type_is_complex(const KjType *type); /* c64 c128 */
bool kj_type_is_numeric(const KjType *type); /* int, float or complex */
const KjType *kj_type_complex_part(const KjType *type); /* c64 -> f32, c128 -> f64 */
int kj_type_int_bits(const KjType *type);

/* half.c: f16 (IEEE binary16) and bf16 (bfloat16) bit patterns.  Narrowing
 * rounds to nearest, ties to even, in one step from f64 (no double rounding);
 * NaN stays NaN (quiet) and infinities stay infinite.  kind is KJ_TYPE_F16 or
 * KJ_TYPE_BF16. */
uint16_t kj_half_from_double(KjTypeKind kind, double value);
double kj_half_to_double(KjTypeKind kind, uint16_t bits);
double kj_half_round(KjTypeKind kind, double value); /* value rounded to the type */
/* The pass: f16/bf16 arithmetic becomes f32 arithmetic and a rounding CAST. */
struct KjIrModule;
void kj_half_lower(struct KjIrModule *module);

/* ====================================================================== lex.c */

/* X(kind, spelling): punctuators and keywords share one list so the enum and the
 * name table cannot drift apart. */
#define KJ_TOKENS(X)                                                                     \
    X(EOF, "end of file") X(IDENT, "identifier") X(INT, "integer literal")              \
    X(FLOAT, "float literal") X(STRING, "string literal") X(ERROR, "invalid character") \
    X(KW_FN, "fn") X(KW_LET, "let") X(KW_IF, "if") X(KW_ELSE, "else") X(KW_FOR, "for")  \
    X(KW_IN, "in") X(KW_WHILE, "while") X(KW_BREAK, "break") X(KW_CONTINUE, "continue") \
    X(KW_RETURN, "return") X(KW_IMPORT, "import") X(KW_TRUE, "true")                     \
    X(KW_FALSE, "false") X(KW_CONST, "const")                                            \
    X(LPAREN, "(") X(RPAREN, ")") X(LBRACE, "{") X(RBRACE, "}") X(LBRACKET, "[")       \
    X(RBRACKET, "]") X(COMMA, ",") X(SEMI, ";") X(COLON, ":") X(DOT, ".") X(AT, "@")   \
    X(ARROW, "->") X(QUESTION, "?")                                                      \
    X(PLUS, "+") X(MINUS, "-") X(STAR, "*") X(SLASH, "/") X(PERCENT, "%")              \
    X(STARSTAR, "**") X(AMP, "&") X(PIPE, "|") X(CARET, "^") X(TILDE, "~")             \
    X(SHL, "<<") X(SHR, ">>") X(AMPAMP, "&&") X(PIPEPIPE, "||") X(BANG, "!")           \
    X(EQ, "==") X(NE, "!=") X(LT, "<") X(LE, "<=") X(GT, ">") X(GE, ">=")              \
    X(ASSIGN, "=") X(PLUS_ASSIGN, "+=") X(MINUS_ASSIGN, "-=") X(STAR_ASSIGN, "*=")      \
    X(SLASH_ASSIGN, "/=") X(PERCENT_ASSIGN, "%=") X(AMP_ASSIGN, "&=")                   \
    X(PIPE_ASSIGN, "|=") X(CARET_ASSIGN, "^=") X(SHL_ASSIGN, "<<=") X(SHR_ASSIGN, ">>=")

typedef enum {
#define X(kind, spelling) KJ_TOK_##kind,
    KJ_TOKENS(X)
#undef X
    KJ_TOK_COUNT
} KjTokenKind;

typedef struct KjToken {
    KjTokenKind kind;
    const char *start; /* points into the source text */
    int len;
    KjLoc loc;
    /* INT: value (underscores removed, overflow reported by the lexer);
     * FLOAT: value parsed with strtod after removing underscores. */
    uint64_t int_value;
    double float_value;
} KjToken;

const char *kj_token_name(KjTokenKind kind);

/* Lexes the whole source; the array ends with one KJ_TOK_EOF.  Lexical errors
 * go to diag and lexing goes on. */
KjToken *kj_lex(KjArena *arena, const KjSource *src, KjDiag *diag, int *count);

/* ==================================================================== parse.c */

/* Binary and unary operators, written once.  X(op, spelling) */
#define KJ_BINARY_OPS(X)                                                              \
    X(ADD, "+") X(SUB, "-") X(MUL, "*") X(DIV, "/") X(REM, "%") X(POW, "**")        \
    X(BITAND, "&") X(BITOR, "|") X(BITXOR, "^") X(SHL, "<<") X(SHR, ">>")            \
    X(EQ, "==") X(NE, "!=") X(LT, "<") X(LE, "<=") X(GT, ">") X(GE, ">=")            \
    X(LOGAND, "&&") X(LOGOR, "||")

typedef enum {
#define X(op, spelling) KJ_BIN_##op,
    KJ_BINARY_OPS(X)
#undef X
    KJ_BIN_COUNT
} KjBinaryOp;

#define KJ_UNARY_OPS(X) X(NEG, "-") X(PLUS, "+") X(NOT, "!") X(BITNOT, "~")
typedef enum {
#define X(op, spelling) KJ_UN_##op,
    KJ_UNARY_OPS(X)
#undef X
    KJ_UN_COUNT
} KjUnaryOp;

const char *kj_binary_op_spelling(KjBinaryOp op);
const char *kj_unary_op_spelling(KjUnaryOp op);

/* AST node kinds.  The comment after each names the fields of KjNode it uses. */
#define KJ_NODE_KINDS(X)                                                              \
    /* expressions */                                                                 \
    X(INT_LIT)     /* int_value */                                                    \
    X(FLOAT_LIT)   /* float_value */                                                  \
    X(STRING_LIT)  /* name (the text, escapes decoded); only as a print() argument */ \
    X(BOOL_LIT)    /* int_value (0 or 1) */                                           \
    X(NAME)        /* name */                                                         \
    X(UNARY)       /* unary_op, lhs */                                                \
    X(BINARY)      /* binary_op, lhs, rhs */                                          \
    X(TERNARY)     /* cond, lhs (then), rhs (else) */                                 \
    X(CALL)        /* lhs (callee: a NAME, or a type name used as a cast), args */    \
    X(INDEX)       /* lhs (the array), args (indices, one per dimension) */           \
    X(MEMBER)      /* lhs, name (a.shape, z.real, threadIdx.x) */                     \
    /* statements */                                                                  \
    X(BLOCK)       /* body (statements) */                                            \
    X(LET)         /* names (char*), declared_type (or NULL), rhs (initialiser) */    \
    X(ASSIGN)      /* assign_op (KJ_TOK_ASSIGN, KJ_TOK_PLUS_ASSIGN ...), lhs, rhs; \
                      a, b = x, y: args (the targets), body (the values) too */         \
    X(EXPR_STMT)   /* lhs */                                                          \
    X(IF)          /* cond, then_body (BLOCK), else_body (BLOCK or IF, or NULL) */    \
    X(FOR)         /* name (loop variable), args (range arguments: 1 to 3), then_body */ \
    X(WHILE)       /* cond, then_body */                                              \
    X(BREAK)                                                                          \
    X(CONTINUE)                                                                       \
    X(RETURN)      /* lhs (or NULL); return (a, b): args */                           \
    /* declarations */                                                                \
    X(IMPORT)      /* name (module) */                                                \
    X(CONST)       /* name, declared_type (or NULL), rhs (the value); a constant array:    \
                      declared_type T[,..], args (its shape), rhs an ARRAY_LIT */          \
    X(ARRAY_LIT)   /* args (elements: expressions, or ARRAY_LITs one axis down) */         \
    X(FUNCTION)    /* see KjFunctionDecl: fn */

typedef enum {
#define X(kind) KJ_NODE_##kind,
    KJ_NODE_KINDS(X)
#undef X
    KJ_NODE_COUNT
} KjNodeKind;

const char *kj_node_kind_name(KjNodeKind kind);

typedef enum {
    KJ_FN_PLAIN,     /* fn f(...) */
    KJ_FN_VECTORIZE, /* @vectorize or @vectorize(sig, ...) */
    KJ_FN_KERNEL,    /* @kernel */
    KJ_FN_REDUCE,    /* @reduce, @reduce(sig, ...), @reduce(map = f, ...): a binary
                        associative function, checked like @vectorize */
    KJ_FN_GUVECTORIZE, /* @guvectorize("(n),(n)->()") or @guvectorize(sig, ..., "layout"):
                        a core function over arrays, lifted over loop dimensions */
} KjFunctionKind;

typedef struct KjParam {
    const char *name;
    const KjType *type; /* NULL when untyped (signature-list @vectorize) */
    KjLoc loc;
} KjParam;

/* One signature of @vectorize(f32(f32, f32), ...). */
typedef struct KjSignature {
    const KjType *ret;
    const KjType **params;
    int param_count;
    KjLoc loc;
} KjSignature;

typedef struct KjFunctionDecl {
    const char *name;
    KjFunctionKind kind;
    KjParam *params;
    int param_count;
    const KjType *ret;        /* NULL when not written (void, or untyped vectorize) */
    const KjType **results;   /* -> (T, U, ...): every output's type (ret the first); else
                                 NULL */
    int result_count;         /* 0 or 1: one result (ret) */
    KjLoc results_loc;
    KjSignature *signatures;  /* @vectorize(...) list; NULL/0 when absent */
    int signature_count;
    struct KjNode *body;      /* BLOCK */
    KjLoc loc;                /* at the name */
    const char *map_name;     /* @reduce(map = name): the @vectorize it fuses; else NULL */
    KjLoc map_loc;
    const char *layout_text;  /* @guvectorize("..."): the string token, quotes kept; else NULL */
    KjLoc layout_loc;         /* at its opening quote */
} KjFunctionDecl;

typedef struct KjNode {
    KjNodeKind kind;
    KjLoc loc;
    const char *name;
    uint64_t int_value;
    double float_value;
    KjBinaryOp binary_op;
    KjUnaryOp unary_op;
    KjTokenKind assign_op;
    struct KjNode *lhs, *rhs, *cond;
    struct KjNode *then_body, *else_body;
    KjVec args;  /* KjNode* */
    KjVec body;  /* KjNode* */
    KjVec names; /* const char* (LET: one, or two for `let a, b = grid(2)`) */
    const KjType *declared_type;
    KjFunctionDecl *fn;
    int height; /* an expression's: operators, calls, indexes and members on its longest
                 * path to a leaf, 0 for a leaf (parse.c bounds it) */
} KjNode;

/* A parsed file: its imports, constants and functions in source order. */
typedef struct KjAstFile {
    const KjSource *src;
    KjVec decls; /* KjNode* of kind IMPORT, CONST or FUNCTION */
} KjAstFile;

/* Parses a whole file.  Syntax errors go to diag; the parser recovers at the next
 * statement or declaration and returns what it could build (never NULL). */
KjAstFile *kj_parse(KjArena *arena, const KjSource *src, KjDiag *diag);

/* --dump=ast: an indented S-expression-like tree, one node per line. */
void kj_ast_dump(FILE *out, const KjAstFile *file);

/* The grammar productions the parser implements, one per parse function, for
 * the test that keeps grammar/kern.ebnf in step.  NULL-terminated. */
extern const char *const kj_parser_productions[];

/* ======================================================================= ir.c */

/*
 * The typed IR: structured control flow over typed expression trees.  Every
 * value has a type settled by the checker (no untyped literals remain); every
 * node has a source location.  Local variables are mutable slots (KjIrVar);
 * the LLVM back end turns them into allocas that mem2reg promotes to SSA.
 */

/* Math built-ins: X(id, name, arity, complex, libm, libmvec, lower), one row
 * each, the one place that says how each is checked and lowered.  Valid for
 * f32 and f64 operands; `complex` 1: also for c64 and c128 ones (the result is
 * then complex too, lowered in codegen_complex.c from real math calls).  The
 * back end's columns (codegen_value.c alone expands `lower`; a target may
 * still lower one its own way through its KjTarget `math` hook, as cuda does
 * round and fmod and the cpu lgamma):
 *   libm     the math library's function (f64; f32 adds "f"; cuda's
 *            libdevice prefixes "__nv_")
 *   libmvec  1: glibc's libmvec has vector routines of it (the cpu code calls
 *            one routine for scalars and lanes alike)
 *   lower    KJ_LOWER_LLVM(intrinsic): that LLVM intrinsic, overloaded on the
 *            operand type, on scalars and vectors alike;
 *            KJ_LOWER_RULE(rule, cheap): codegen_value.c's function `rule`,
 *            on scalars and vectors alike, `cheap` 0 when it may still cost a
 *            library call (LLVM's frem is fmod's on x86);
 *            KJ_LOWER_LIBM: a call of `libm` (on lanes, of libmvec's routine
 *            where there is one, else one call per lane). */
#define KJ_MATH_BUILTINS(X)                                                            \
    X(SQRT, "sqrt", 1, 1, "sqrt", 0, KJ_LOWER_LLVM("llvm.sqrt"))                        \
    X(CBRT, "cbrt", 1, 0, "cbrt", 1, KJ_LOWER_LIBM)                                     \
    X(EXP, "exp", 1, 1, "exp", 1, KJ_LOWER_LIBM)                                        \
    X(EXP2, "exp2", 1, 0, "exp2", 1, KJ_LOWER_LIBM)                                     \
    X(EXPM1, "expm1", 1, 0, "expm1", 1, KJ_LOWER_LIBM)                                  \
    X(LOG, "log", 1, 1, "log", 1, KJ_LOWER_LIBM)                                        \
    X(LOG2, "log2", 1, 0, "log2", 1, KJ_LOWER_LIBM)                                     \
    X(LOG10, "log10", 1, 0, "log10", 1, KJ_LOWER_LIBM)                                  \
    X(LOG1P, "log1p", 1, 0, "log1p", 1, KJ_LOWER_LIBM)                                  \
    X(SIN, "sin", 1, 1, "sin", 1, KJ_LOWER_LIBM)                                        \
    X(COS, "cos", 1, 1, "cos", 1, KJ_LOWER_LIBM)                                        \
    X(TAN, "tan", 1, 0, "tan", 1, KJ_LOWER_LIBM)                                        \
    X(ASIN, "asin", 1, 0, "asin", 1, KJ_LOWER_LIBM)                                     \
    X(ACOS, "acos", 1, 0, "acos", 1, KJ_LOWER_LIBM)                                     \
    X(ATAN, "atan", 1, 0, "atan", 1, KJ_LOWER_LIBM)                                     \
    X(ATAN2, "atan2", 2, 0, "atan2", 1, KJ_LOWER_LIBM)                                  \
    X(SINH, "sinh", 1, 0, "sinh", 1, KJ_LOWER_LIBM)                                     \
    X(COSH, "cosh", 1, 0, "cosh", 1, KJ_LOWER_LIBM)                                     \
    X(TANH, "tanh", 1, 1, "tanh", 1, KJ_LOWER_LIBM)                                     \
    X(ASINH, "asinh", 1, 0, "asinh", 1, KJ_LOWER_LIBM)                                  \
    X(ACOSH, "acosh", 1, 0, "acosh", 1, KJ_LOWER_LIBM)                                  \
    X(ATANH, "atanh", 1, 0, "atanh", 1, KJ_LOWER_LIBM)                                  \
    X(POW, "pow", 2, 1, "pow", 1, KJ_LOWER_LIBM)                                        \
    X(HYPOT, "hypot", 2, 0, "hypot", 1, KJ_LOWER_LIBM)                                  \
    X(FLOOR, "floor", 1, 0, "floor", 0, KJ_LOWER_LLVM("llvm.floor"))                    \
    X(CEIL, "ceil", 1, 0, "ceil", 0, KJ_LOWER_LLVM("llvm.ceil"))                        \
    X(TRUNC, "trunc", 1, 0, "trunc", 0, KJ_LOWER_LLVM("llvm.trunc"))                    \
    X(ROUND, "round", 1, 0, "round", 0, KJ_LOWER_LLVM("llvm.round"))                    \
    X(FABS, "abs", 1, 0, "fabs", 0, KJ_LOWER_LLVM("llvm.fabs"))                         \
    X(FMIN, "min", 2, 0, "fmin", 0, KJ_LOWER_RULE(min_max, 1))                          \
    X(FMAX, "max", 2, 0, "fmax", 0, KJ_LOWER_RULE(min_max, 1))                          \
    X(FMA, "fma", 3, 0, "fma", 0, KJ_LOWER_LLVM("llvm.fma"))                            \
    X(ERF, "erf", 1, 0, "erf", 1, KJ_LOWER_LIBM)                                        \
    X(ERFC, "erfc", 1, 0, "erfc", 1, KJ_LOWER_LIBM)                                     \
    X(LGAMMA, "lgamma", 1, 0, "lgamma", 0, KJ_LOWER_LIBM)                               \
    X(TGAMMA, "tgamma", 1, 0, "tgamma", 0, KJ_LOWER_LIBM)                               \
    X(COPYSIGN, "copysign", 2, 0, "copysign", 0, KJ_LOWER_RULE(copy_sign, 1))           \
    X(FMOD, "fmod", 2, 0, "fmod", 0, KJ_LOWER_RULE(frem, 0))                            \
    X(ISNAN, "isnan", 1, 0, "isnan", 0, KJ_LOWER_RULE(is_nan, 1))                       \
    X(ISINF, "isinf", 1, 0, "isinf", 0, KJ_LOWER_RULE(inf_test, 1))                     \
    X(ISFINITE, "isfinite", 1, 0, "isfinite", 0, KJ_LOWER_RULE(inf_test, 1))

typedef enum {
#define X(id, name, arity, complex, libm, libmvec, lower) KJ_MATH_##id,
    KJ_MATH_BUILTINS(X)
#undef X
    KJ_MATH_COUNT
} KjMathFn;

extern const char *const kj_math_names[KJ_MATH_COUNT];
extern const int kj_math_arity[KJ_MATH_COUNT];
extern const bool kj_math_complex[KJ_MATH_COUNT];

/* Kernel special registers: X(id, name). Each is i32. */
#define KJ_SPECIAL_REGS(X)                                                   \
    X(TID_X, "threadIdx.x") X(TID_Y, "threadIdx.y") X(TID_Z, "threadIdx.z") \
    X(BID_X, "blockIdx.x") X(BID_Y, "blockIdx.y") X(BID_Z, "blockIdx.z")    \
    X(BDIM_X, "blockDim.x") X(BDIM_Y, "blockDim.y") X(BDIM_Z, "blockDim.z") \
    X(GDIM_X, "gridDim.x") X(GDIM_Y, "gridDim.y") X(GDIM_Z, "gridDim.z")

typedef enum {
#define X(id, name) KJ_SREG_##id,
    KJ_SPECIAL_REGS(X)
#undef X
    KJ_SREG_COUNT
} KjSpecialReg;

extern const char *const kj_special_reg_names[KJ_SREG_COUNT];

/* Atomics: X(id, name, elements), elements saying which element types the
 * op takes: KJ_ATOMIC_NUMBERS 32- and 64-bit integers and floats,
 * KJ_ATOMIC_INTS 32- and 64-bit integers, KJ_ATOMIC_UNSIGNED u32 and u64.
 * INC and DEC are CUDA's wrapping atomicInc / atomicDec. */
typedef enum { KJ_ATOMIC_NUMBERS, KJ_ATOMIC_INTS, KJ_ATOMIC_UNSIGNED } KjAtomicElements;
#define KJ_ATOMIC_OPS(X)                                                                 \
    X(ADD, "atomic_add", KJ_ATOMIC_NUMBERS) X(SUB, "atomic_sub", KJ_ATOMIC_NUMBERS)      \
    X(MIN, "atomic_min", KJ_ATOMIC_NUMBERS) X(MAX, "atomic_max", KJ_ATOMIC_NUMBERS)      \
    X(EXCH, "atomic_exch", KJ_ATOMIC_NUMBERS) X(CAS, "atomic_cas", KJ_ATOMIC_INTS)       \
    X(AND, "atomic_and", KJ_ATOMIC_INTS) X(OR, "atomic_or", KJ_ATOMIC_INTS)              \
    X(XOR, "atomic_xor", KJ_ATOMIC_INTS) X(INC, "atomic_inc", KJ_ATOMIC_UNSIGNED)        \
    X(DEC, "atomic_dec", KJ_ATOMIC_UNSIGNED)
typedef enum {
#define X(id, name, elements) KJ_ATOMIC_##id,
    KJ_ATOMIC_OPS(X)
#undef X
    KJ_ATOMIC_COUNT
} KjAtomicOp;

extern const char *const kj_atomic_names[KJ_ATOMIC_COUNT];

/*
 * Every other built-in a call can name: X(id, name, min_args, max_args, where, rule).
 *   where  KJ_IN_ANY: any function; KJ_IN_KERNEL: @kernel functions only;
 *          KJ_IN_LET: a kernel's let value only (let buf = shared(f32, 256););
 *          KJ_IN_FOR: a for loop's range only.
 *   rule   the check_builtin.c function that types the call (the X-macro is
 *          expanded there, with how the rule takes its arguments, and for the
 *          names in check_scope.c), and that builds the IR the back end lowers.
 * Adding a built-in is one line here, its rule, and the lowering of any new
 * IR op it makes.  Math functions and atomics have lists of their own above;
 * the execution-model built-ins are KJ_EXEC_OPS below, whose one rule
 * (kj_check_exec) the table adds for each.
 */
typedef enum { KJ_IN_ANY, KJ_IN_KERNEL, KJ_IN_LET, KJ_IN_FOR } KjBuiltinWhere;

#define KJ_CALL_BUILTINS(X)                                               \
    X(COMPLEX, "complex", 2, 2, KJ_IN_ANY, check_complex)                 \
    X(LEN, "len", 1, 1, KJ_IN_ANY, check_len)                             \
    X(CONJ, "conj", 1, 1, KJ_IN_ANY, check_conj)                          \
    X(ARG, "arg", 1, 1, KJ_IN_ANY, check_arg)                             \
    X(PHASE, "phase", 1, 1, KJ_IN_ANY, check_arg)                         \
    X(POLAR, "polar", 2, 2, KJ_IN_ANY, check_polar)                       \
    X(MULHI, "mulhi", 2, 2, KJ_IN_ANY, check_mulhi)                       \
    X(PRINT, "print", 0, 64, KJ_IN_ANY, kj_check_print)                   \
    X(GRID, "grid", 1, 1, KJ_IN_KERNEL, check_grid)                       \
    X(GRIDSIZE, "gridsize", 1, 1, KJ_IN_KERNEL, check_grid)               \
    X(SYNCTHREADS, "syncthreads", 0, 0, KJ_IN_KERNEL, check_syncthreads) \
    X(SHARED, "shared", 1, 4, KJ_IN_LET, NULL)                            \
    X(LOCAL, "local", 2, 4, KJ_IN_LET, NULL)                              \
    X(RANGE, "range", 1, 3, KJ_IN_FOR, NULL)

typedef enum {
#define X(id, name, min_args, max_args, where, rule) KJ_BUILTIN_##id,
    KJ_CALL_BUILTINS(X)
#undef X
    KJ_BUILTIN_EXEC,  /* one of KJ_EXEC_OPS, which the table adds */
    KJ_BUILTIN_MATH,  /* one of KJ_MATH_BUILTINS, which the table adds */
    KJ_BUILTIN_ATOMIC /* one of KJ_ATOMIC_OPS, which the table adds */
} KjCallBuiltin;

/*
 * The execution-model built-ins (warp, block and grid level), one IR op
 * (KJ_IR_EXEC) told apart by `exec`: X(id, name, barrier, min_args,
 * max_args, form, nvvm), one row each.  `barrier` is true for those the cpu
 * targets run as a meeting point of fibers (a kernel that uses one runs its
 * threads on fibers, as with syncthreads()); the argument counts are the
 * call's, an optional mask included (kernels only, as KJ_CALL_BUILTINS's
 * KJ_IN_KERNEL).  The order is an ABI: the cpu code passes the id to the
 * runtime (KjThreadCtx.collective), whose scheduler computes each
 * collective's result (runtime/cpu.c).  `form` (KjExecForm) says how the IR
 * reads and how the lowerings take it: every warp op's IR has its mask first
 * (the checker supplies 0xffffffff when the call names none), then its
 * operands:
 *   LANEID, ACTIVEMASK                () / (mask)      -> i32 / u32
 *   BALLOT, ALL, ANY                  (mask, pred)     -> u32 / bool / bool
 *   SHFL, SHFL_UP, SHFL_DOWN, SHFL_XOR (mask, v, lane) -> v's type (32/64 bits)
 *   SYNCWARP                          (mask)
 *   SYNCTHREADS_COUNT, _AND, _OR      (pred)           -> i32 / bool / bool
 *   THREADFENCE, THREADFENCE_BLOCK, SYNCGRID ()
 *   MMA                               (mask, a, b, c0, c1) -> c128: the lane's
 *                                     two elements of D = A B + C (8x8x4, f64),
 *                                     d0 the real part, d1 the imaginary (a
 *                                     pair, never a complex number to the
 *                                     user: a let or an assignment takes it
 *                                     apart); the mask is always the whole warp
 * `nvvm` is the NVVM intrinsic of PTX's instruction that cuda lowers it to,
 * given the IR's operands (target_cuda.c alone reads it; NULL: cuda builds
 * it, a shuffle by its mode, syncgrid() as a barrier over the grid, mma() as
 * mma.sync or shuffles, codegen_mma.c).  MMA came last, after the ids of
 * earlier runtimes; the cpu code passes it the address of the lane's {a, b,
 * c0, c1} and finds d0, d1 in place of c0, c1 (runtime/cpu.c).
 */
#define KJ_EXEC_OPS(X)                                                                               \
    X(LANEID, "laneid", false, 0, 0, KJ_EXEC_FORM_LANE, "llvm.nvvm.read.ptx.sreg.laneid")            \
    X(ACTIVEMASK, "activemask", true, 0, 0, KJ_EXEC_FORM_WARP, "llvm.nvvm.activemask")             \
    X(BALLOT, "ballot", true, 1, 2, KJ_EXEC_FORM_WARP, "llvm.nvvm.vote.ballot.sync")               \
    X(ALL, "all_sync", true, 1, 2, KJ_EXEC_FORM_WARP, "llvm.nvvm.vote.all.sync")                   \
    X(ANY, "any_sync", true, 1, 2, KJ_EXEC_FORM_WARP, "llvm.nvvm.vote.any.sync")                   \
    X(SHFL, "shfl", true, 2, 3, KJ_EXEC_FORM_WARP, NULL)                                           \
    X(SHFL_UP, "shfl_up", true, 2, 3, KJ_EXEC_FORM_WARP, NULL)                                     \
    X(SHFL_DOWN, "shfl_down", true, 2, 3, KJ_EXEC_FORM_WARP, NULL)                                 \
    X(SHFL_XOR, "shfl_xor", true, 2, 3, KJ_EXEC_FORM_WARP, NULL)                                   \
    X(SYNCWARP, "syncwarp", true, 0, 1, KJ_EXEC_FORM_WARP, "llvm.nvvm.bar.warp.sync")              \
    X(SYNCTHREADS_COUNT, "syncthreads_count", true, 1, 1, KJ_EXEC_FORM_BLOCK, "llvm.nvvm.barrier0.popc") \
    X(SYNCTHREADS_AND, "syncthreads_and", true, 1, 1, KJ_EXEC_FORM_BLOCK, "llvm.nvvm.barrier0.and") \
    X(SYNCTHREADS_OR, "syncthreads_or", true, 1, 1, KJ_EXEC_FORM_BLOCK, "llvm.nvvm.barrier0.or")   \
    X(THREADFENCE, "threadfence", false, 0, 0, KJ_EXEC_FORM_FENCE, "llvm.nvvm.membar.gl")          \
    X(THREADFENCE_BLOCK, "threadfence_block", false, 0, 0, KJ_EXEC_FORM_FENCE, "llvm.nvvm.membar.cta") \
    X(SYNCGRID, "syncgrid", true, 0, 0, KJ_EXEC_FORM_BLOCK, NULL)                                  \
    X(MMA, "mma", true, 4, 4, KJ_EXEC_FORM_WARP, NULL)

typedef enum {
#define X(id, name, barrier, min_args, max_args, form, nvvm) KJ_EXEC_##id,
    KJ_EXEC_OPS(X)
#undef X
    KJ_EXEC_COUNT
} KjExecOp;

/* KJ_EXEC_OPS' form column:
 *   LANE   the thread's own lane in its warp, no operands (laneid())
 *   FENCE  no operands, no result, the same for every thread: a memory
 *          fence, which lanes side by side run once for all
 *   WARP   a warp collective: the lane mask, then its operands
 *   BLOCK  a block's or the grid's collective: its operands, no mask */
typedef enum { KJ_EXEC_FORM_LANE, KJ_EXEC_FORM_FENCE, KJ_EXEC_FORM_WARP, KJ_EXEC_FORM_BLOCK } KjExecForm;

extern const char *const kj_exec_names[KJ_EXEC_COUNT];
extern const KjExecForm kj_exec_form[KJ_EXEC_COUNT];
extern const bool kj_exec_is_barrier[KJ_EXEC_COUNT];

/* Threads of a warp, on every target (the cpu targets group a block's threads
 * by their linear index, x fastest, 32 at a time, as CUDA does). */
#define KJ_WARP_SIZE 32

/* Named constants: X(id, name, value). */
#define KJ_CONSTANT_BUILTINS(X) \
    X(PI, "pi", M_PI) X(E, "e", M_E) X(INF, "inf", INFINITY) X(NAN, "nan", NAN)

/* The groups of special registers (threadIdx.x ...), KJ_SPECIAL_REGS's prefixes. */
#define KJ_REGISTER_GROUPS(X) X("threadIdx") X("blockIdx") X("blockDim") X("gridDim")

/* IR expression ops.  The comment names the fields used; `args` are operands. */
#define KJ_IR_OPS(X)                                                                          \
    X(CONST)       /* const_int (ints, bool) or const_float (floats); complex: re/im in        \
                      const_float/const_imag */                                                \
    X(VAR)         /* var */                                                                   \
    X(NEG) X(NOT) X(BITNOT)                      /* args[0] */                                 \
    X(ADD) X(SUB) X(MUL) X(DIV) X(REM)           /* args[0], args[1]; same type as result */   \
    X(BITAND) X(BITOR) X(BITXOR) X(SHL) X(SHR)   /* ints; SHR is arithmetic when signed */     \
    X(EQ) X(NE) X(LT) X(LE) X(GT) X(GE)          /* operands of one type; result bool */       \
    X(LOGAND) X(LOGOR)                           /* bool, short-circuit */                     \
    X(SELECT)      /* args[0] (bool), args[1], args[2]; only the chosen arm is evaluated */    \
    X(CAST)        /* args[0] converted to type (numeric and bool conversions) */              \
    X(CALL)        /* callee (a plain function), args */                                       \
    X(MATH)        /* math, args (all of the result's type, except ISNAN.. give bool); a     \
                      complex result for kj_math_complex functions */                         \
    X(IPOW)        /* args[0] ** args[1], args[1] an integer; a constant one from a base     \
                      the checker cannot copy into KJ_POW_CHAIN_MAX products */              \
    X(COMPLEX)     /* args[0] (re), args[1] (im) -> c64/c128 */                                \
    X(REAL) X(IMAG) X(CONJ) X(CABS) X(CARG)      /* args[0] complex */                         \
    X(POLAR)       /* args[0] (modulus), args[1] (angle), of the result's part type */         \
    X(MULHI)       /* args[0], args[1]: 32- or 64-bit ints of the result's type; the high      \
                      half of their full product */                                            \
    X(LOAD)        /* args[0] (array), args[1..ndim] (i64 indices) */                          \
    X(VIEW)        /* args[0] (array of rank n), args[1..k] (i64 indices, 0 < k < n): the array \
                      of rank n - k at those leading indices, sharing memory (made by the    \
                      guvectorize pass only) */                                               \
    X(DIM)         /* args[0] (array), dim: the i64 extent of dimension `dim` */               \
    X(SREG)        /* sreg: i32 */                                                             \
    X(SHARED)      /* alloc_elem, alloc_shape[0..alloc_ndim): a block-wide array */            \
    X(LOCAL)       /* alloc_elem, alloc_shape[0..alloc_ndim): a per-thread array */            \
    X(ATOMIC)      /* atomic, args[0] (array of rank n), args[1..n] (i64 indices), args[n+1] \
                      (value), args[n+2] (CAS: the new value); returns the old value */       \
    X(SYNCTHREADS) /* void */                                                                 \
    X(EXEC)        /* exec, args as KJ_EXEC_OPS says */                                        \
    X(PRINT)       /* void; format (a C printf format ending in a newline), args: scalars   \
                      that it formats, each passed as C's varargs promotion has it          \
                      (check_print.c says which conversions match) */                        \
    X(DYNAMIC_SHARED) /* alloc_elem: the launch's dynamic shared memory as a 1-D array of      \
                      (its bytes / the element size) elements; every one aliases the others */ \
    X(CONST_ARRAY) /* const_array: a module-level constant array, read-only; alloc_elem,      \
                      alloc_shape[0..alloc_ndim) its shape */

typedef enum {
#define X(op) KJ_IR_##op,
    KJ_IR_OPS(X)
#undef X
    KJ_IR_OP_COUNT
} KjIrOp;

const char *kj_ir_op_name(KjIrOp op);

/* Run-time checks of checked mode (checks.c): X(kind, name).  What the
 * failure record's values hold for each is in checks.c. */
#define KJ_CHECK_KINDS(X)                                                                 \
    X(INDEX, "index")       /* values: index, extent, axis */                        \
    X(DIVIDE, "division")   /* values: dividend, divisor, 1 for a remainder */            \
    X(CONVERT, "conversion") /* values: the float's f64 bits, target bits, signed */     \
    X(SHIFT, "shift")       /* values: count, width */                                    \
    X(POWER, "power")       /* values: the exponent */                                \
    /* race checking (--check=race): sites the runtime's race checker names */           \
    X(READ, "read")         /* a load of an array element */                              \
    X(WRITE, "write")       /* a store to an array element */                             \
    X(ATOMIC, "atomic")     /* an atomic read-modify-write of an array element */         \
    X(BARRIER, "barrier")   /* syncthreads(), a warp collective or syncgrid(); array: its name */

typedef enum {
    KJ_CHECK_NONE,
#define X(kind, name) KJ_CHECK_##kind,
    KJ_CHECK_KINDS(X)
#undef X
    KJ_CHECK_KIND_COUNT
} KjCheckKind;

/* One place in the source where a check can fail. */
typedef struct KjCheckSite {
    KjCheckKind kind;
    KjLoc loc;
    const char *array; /* INDEX: the array's name; else NULL */
    const char *type;  /* CONVERT: the target type's name; else NULL */
} KjCheckSite;

typedef struct KjIrVar {
    const char *name;
    const KjType *type;
    int id; /* unique within its function, from 0 */
    bool is_param;
    bool read_only; /* an array that may not be written: a constant array, or a let of one */
    KjLoc loc;
} KjIrVar;

/* A module-level constant array (`const T: u16[256] = [...];`): its
 * elements as the target stores them (C order, little-endian), and the
 * symbol its read-only global has in every compiled module. */
typedef struct KjIrConstArray {
    const char *name;   /* as written */
    const char *symbol; /* "kj_const_<name>" */
    const KjType *elem;
    int ndim;
    int64_t shape[3];
    const unsigned char *bytes;
    int64_t size; /* bytes */
} KjIrConstArray;

typedef struct KjIrExpr {
    KjIrOp op;
    const KjType *type;
    KjLoc loc;
    struct KjIrExpr **args;
    int arg_count;
    uint64_t const_int;
    double const_float, const_imag;
    KjIrVar *var;
    struct KjIrFunction *callee;
    KjMathFn math;
    KjSpecialReg sreg;
    KjAtomicOp atomic;
    KjExecOp exec;
    int dim;
    const char *format; /* PRINT */
    const KjIrConstArray *const_array; /* CONST_ARRAY */
    const KjType *alloc_elem;
    int alloc_ndim;
    int64_t alloc_shape[3];
    /* LOCAL in a kernel: the sizes given at launch (local_size.c), an
     * expression of the kernel's integer parameters and constants where
     * alloc_shape[k] is 0, NULL where alloc_shape[k] is the size; and the
     * array's index in the kernel's launch_locals */
    struct KjIrExpr *alloc_size[3];
    int launch_local;
    /* CALL of a function of several outputs (KjIrFunction.outputs): the
     * caller's variables that take outputs 1.. ([0] unused), set by the call;
     * only as the whole value of a statement (the vectorize pass makes them) */
    KjIrVar **call_outputs;
    /* SHARED: where its slice starts in the block's static shared memory on
     * cpu, given once by the checker, so that copies of the call (a region
     * versioned by split_specialise.c, inlined code) name the same memory */
    int64_t shared_offset;
    /* LOAD (and STORE in KjIrStmt): the array is known contiguous and args[1] is a
     * flat element index: address = data + index, strides ignored.  Only the
     * vectorize pass sets it, so the back end can see unit-stride accesses.
     * VIEW: the view is C-contiguous; its strides come from its extents (the
     * guvectorize pass sets it for cores the runtime found contiguous). */
    bool contiguous;
    /* LOAD: the address is a multiple of this many bytes (0: of the element's
     * size); reduce.c's aligned variants set it, so that LLVM joins a thread's
     * consecutive loads into one vector load.  LOCAL of a fixed size: the
     * allocation's alignment (0: 16); barrier_split.c's per-thread arrays
     * take a cache line's, so that a chunk's vector is one line. */
    int align_bytes;
    /* An i64 expression: its value as computed, one unknown to LLVM's
     * optimisers (the target's opaque_i64: an empty inline asm on cuda,
     * which no pass looks into; else an LLVM `freeze`).  reduce.c's WARPS
     * form marks the first element a thread reads of its block, so that loop
     * strength reduction sees each address in a loop as that base plus a
     * constant, not as the terms of the work item's geometry, each of which
     * it would try as a register of its own (issue 25: most of the form's
     * code generation time).  A freeze would not do on cuda: InstCombine
     * drops one whose value it can prove free of poison, as it is for one
     * output's geometry (thread and block numbers and constants). */
    bool opaque;
    /* Checked mode (checks.c): the site this node's run-time check reports,
     * an index into the module's check_sites from 1; 0 for no check. */
    int check_site;
    /* Race checking (checks.c): the READ, ATOMIC or BARRIER site the race
     * checker reports this node by, as check_site; 0 for none. */
    int race_site;
} KjIrExpr;

#define KJ_IR_STMT_KINDS(X)                                                                 \
    X(BLOCK)    /* stmts */                                                                  \
    X(EVAL)     /* value (evaluated for effect) */                                           \
    X(SET)      /* var = value */                                                            \
    X(STORE)    /* array[indices] = value; `array` is an array-typed expr, index_count = ndim */ \
    X(IF)       /* cond, then_stmt, else_stmt (or NULL) */                                   \
    X(FOR)      /* var (i64 or the range's int type) from start to stop by step: runs while   \
                   step > 0 ? var < stop : var > stop; stop and step evaluated once */       \
    X(WHILE)    /* cond, body */                                                             \
    X(BREAK) X(CONTINUE)                                                                     \
    X(RETURN)   /* value (or NULL) */                                                        \
    X(PARFOR)   /* var (i64) over [0, stop): the vectorize pass's index space; each target   \
                   walks it its own way (a loop over a sub-range on cpu, the thread pool on  \
                   parallel, a grid-stride loop on cuda). Only in VEC_KERNEL functions. */ \
    X(THREADS)  /* body, once for each thread of the block (z, y, x from 0, x fastest): in   \
                   it threadIdx is that thread's, and a return ends that thread's turn;      \
                   start, stop (i64, or NULL): only threads with start <= threadIdx.x < stop.\
                   Only in a kernel's split form (barrier_split.c), for the cpu targets. */

typedef enum {
#define X(kind) KJ_IR_STMT_##kind,
    KJ_IR_STMT_KINDS(X)
#undef X
    KJ_IR_STMT_COUNT
} KjIrStmtKind;

typedef struct KjIrStmt {
    KjIrStmtKind kind;
    KjLoc loc;
    KjVec stmts;       /* BLOCK: KjIrStmt* */
    KjIrVar *var;      /* SET, FOR, PARFOR */
    KjIrExpr *value;   /* EVAL, SET, STORE, RETURN */
    KjIrExpr *array;   /* STORE */
    KjIrExpr **indices;
    int index_count;
    KjIrExpr *cond;    /* IF, WHILE */
    KjIrExpr *start, *stop, *step; /* FOR; PARFOR uses stop */
    struct KjIrStmt *then_stmt, *else_stmt, *body; /* IF; FOR/WHILE/PARFOR/THREADS body */
    bool contiguous;   /* STORE: as KjIrExpr.contiguous (indices[0] is a flat index) */
    bool simd_lanes;   /* FOR over constant bounds: its iterations are independent SIMD
                          lanes (reduce.c): vectorised whole, never unrolled */
    bool lanes_scalar; /* with simd_lanes: left scalar and never unrolled (reduce.c's
                          strided levels' loads) */
    int unroll;        /* FOR over constant bounds, on targets that unroll such loops: the
                          copies asked for (reduce.c's COLUMNS); 0: the target's 4.
                          FOR, any bounds, any target: -1 never unrolled (reduce.c's
                          LANES steps, one vector chain each: copies only cost compile
                          time).
                          THREADS: 1 keeps its loops where its threads are known (a copy
                          that seldom runs, split_specialise.c); 0: the back end's choice */
    int check_site;    /* STORE: as KjIrExpr.check_site */
    int race_site;     /* STORE: its WRITE site, as KjIrExpr.race_site */
} KjIrStmt;

typedef enum {
    KJ_IR_FN_PLAIN,      /* callable from any function */
    KJ_IR_FN_SCALAR,     /* one signature of a @vectorize function: scalars in, one out */
    KJ_IR_FN_KERNEL,     /* @kernel: launched on a grid, returns nothing */
    KJ_IR_FN_VEC_KERNEL, /* made by the vectorize pass; holds one PARFOR */
} KjIrFunctionKind;

typedef struct KjGridRowsBound {
    int8_t axis;      /* the grid axis it bounds: threads at or past it do nothing */
    int param, dim;   /* the extent dim of array parameter param (dim -1: the value of
                         integer parameter param, dim_bytes 4 or 8), plus add; or */
    int64_t add;      /* param -1: the constant add */
    int8_t dim_bytes;
} KjGridRowsBound;

#define KJ_GRID_ROWS_BOUNDS 6

/* A kernel the cpu targets may run as rows of its grid (grid_rows.c): its
 * only reads of threadIdx, blockIdx and blockDim are grid()'s sums, and its
 * threads never meet.  guard: the `if` of the form `sets of grid() sums; if
 * a && b ... { ... }` whose every term says that a sum lies below an array's
 * extent or a constant (bounds[0..bound_count)), which the rows skip the
 * threads past and the rows' code takes as true; NULL when the body has no
 * `if` at its top level (a bound read from an integer parameter: one the
 * body never assigns).  out: the array parameter whose cache lines a
 * row's range is cut on (-1: none found), of out_ndim axes, axis k indexed
 * by grid axis out_axis[k] (0 x, 1 y, 2 z; the last is x), out_size bytes an
 * element. */
typedef struct KjGridRows {
    bool ok;
    const struct KjIrStmt *guard;
    int bound_count;
    KjGridRowsBound bounds[KJ_GRID_ROWS_BOUNDS];
    int out;
    int out_ndim;
    int8_t out_axis[KJ_MAX_DIMS];
    int out_size;
} KjGridRows;

typedef struct KjIrFunction {
    const char *name;        /* as the user wrote it */
    const char *symbol;      /* unique, for the back end: "add", "mul__f32_f32_f32" ... */
    KjIrFunctionKind kind;
    KjIrVar **params;
    int param_count;
    const KjType *ret;       /* void for kernels */
    KjVec locals;            /* KjIrVar*: every variable, params first */
    KjIrStmt *body;          /* BLOCK */
    KjLoc loc;
    bool uses_syncthreads;   /* kernels and device functions: some path calls syncthreads()
                                or another barrier (kj_exec_is_barrier), here or in a device
                                function it calls: the cpu targets run the kernel on fibers */
    bool uses_syncgrid;      /* the same for syncgrid(): the kernel is launched cooperatively */
    bool uses_dynamic_shared; /* kernels: some shared(T) takes the launch's dynamic bytes */
    int64_t shared_bytes;    /* kernels: static shared memory it declares, each shared()
                                array rounded up to kj_shared_slice_bytes; fixed by the
                                checker (code generation only reads it) */
    int64_t local_bytes;     /* what its local() arrays take per thread, each rounded up
                                to 16 bytes, plus the most that one of its calls takes (a
                                device function's local() arrays live on the caller's
                                stack too); at most KJ_MAX_LOCAL_BYTES */
    /* SCALAR of a @vectorize of several outputs (-> (f64, i32)): their count
     * (ret is the first's type), and the variables outputs[1..] that hold
     * the others when it returns (return (z, n) sets them, then returns z);
     * a call takes them into its call_outputs.  0 and NULL otherwise. */
    int output_count;
    KjIrVar **outputs;
    KjVec launch_locals;     /* KERNEL: KjIrExpr*, its LOCAL arrays sized at launch, in the
                                order of the source (local_size.c); their bytes are not in
                                local_bytes: the launch adds them up */
    struct KjIrFunction *scalar; /* VEC_KERNEL: the SCALAR function it lifts */
    bool unchecked;          /* made by reduce.c, whose runtime passes no check record:
                                compiled without checked mode's tests */
    bool contiguous;         /* VEC_KERNEL of the CONTIG layout: every array is C-contiguous */
    /* PLAIN: a device function, one that uses a kernel built-in (threadIdx.x,
     * an atomic, syncthreads() ...) or calls a device function, so that only
     * kernels and other device functions may call it (the checker proves it;
     * the runtime refuses to call it from the host).  device_use is the
     * built-in's spelling, NULL for other functions; device_chain the calls
     * that lead to it ("f -> g -> h", h using it) and device_loc where h uses
     * it: "f -> g -> h uses threadIdx.x at file:line:col". */
    const char *device_use;
    const char *device_chain;
    KjLoc device_loc;
    /* KERNEL with syncthreads(), cpu targets: the kernel cut at its barriers
     * into THREADS loops (barrier_split.c), which runs a whole block in one
     * call; NULL while none was asked for or when it must run on fibers.
     * split_of: in such a split form, the kernel it was made from. */
    struct KjIrFunction *split;
    struct KjIrFunction *split_of;
    int call_depth;          /* the longest chain of calls below it, 0 when it calls
                                nothing; at most KJ_MAX_CALL_DEPTH (check_expr.c) */
    /* uniform.c's memo of kj_uniform_call_has_effects (stores, atomics, print,
     * a read of the thread here or in a callee), asked once per function */
    enum { KJ_EFFECTS_UNKNOWN, KJ_EFFECTS_NONE, KJ_EFFECTS_SOME } effects;
    /* KERNEL: whether it runs as rows of its grid on cpu (kj_grid_rows),
     * set by the pass list for each kernel root */
    KjGridRows grid_rows;
    /* PLAIN made by a pass for several of its functions to call (reduce.c's
     * shared lane tree, which only the cpu LANES form calls): the back end
     * keeps it out of line, so that LLVM compiles it once, not once a caller */
    bool noinline;
} KjIrFunction;

/* One user-visible name, with what it compiled to. */
typedef struct KjIrEntry {
    const char *name;
    KjFunctionKind kind;
    KjVec variants; /* KjIrFunction*: PLAIN/KERNEL: one; VECTORIZE, REDUCE: one SCALAR per
                       signature */
    KjLoc loc;
    struct KjIrEntry *map; /* REDUCE with map = f: f's entry (a VECTORIZE); else NULL */
    const struct KjGufuncLayout *layout; /* GUVECTORIZE: its layout; else NULL */
} KjIrEntry;

/* A checked module: every function of the file and of what it imports. */
typedef struct KjIrModule {
    KjArena *arena;
    KjVec functions; /* KjIrFunction*, callees before callers */
    KjVec entries;   /* KjIrEntry*, the functions of the main file (imported ones too) */
    uint64_t source_hash; /* of the main source and every import's text */
    KjVec check_sites;    /* KjCheckSite*: checked mode's sites (checks.c), site i at i-1 */
    bool checks_inserted; /* checks.c has marked the module's value checks */
    bool races_inserted;  /* checks.c has marked the module's race sites */
    bool locals_promoted; /* local_promote.c has run on every function */
    bool locals_in_memory; /* ...and left them in memory (KJIT_PROMOTE_LOCALS=0) */
    KjVec const_arrays;   /* KjIrConstArray*: the constant arrays of every file */
    int64_t const_array_bytes; /* their sizes, each rounded up to 16 bytes */
} KjIrModule;

/* Builders (used by the checker and the vectorize pass). */
KjIrVar *kj_ir_new_var(KjArena *arena, KjIrFunction *fn, const char *name, const KjType *type,
                       KjLoc loc);
KjIrExpr *kj_ir_new_expr(KjArena *arena, KjIrOp op, const KjType *type, KjLoc loc, int arg_count);
KjIrStmt *kj_ir_new_stmt(KjArena *arena, KjIrStmtKind kind, KjLoc loc);
/* The nodes every pass builds (the checker, vectorize, reduce, guvectorize):
 * an op of one or two operands, integer and float constants, a reference to
 * a variable, `var = value`, and those below. */
KjIrExpr *kj_ir_unary(KjArena *arena, KjIrOp op, const KjType *type, KjLoc loc, KjIrExpr *a);
KjIrExpr *kj_ir_binary(KjArena *arena, KjIrOp op, const KjType *type, KjLoc loc, KjIrExpr *a,
                       KjIrExpr *b);
KjIrExpr *kj_ir_int_const(KjArena *arena, const KjType *type, int64_t value, KjLoc loc);
KjIrExpr *kj_ir_float_const(KjArena *arena, const KjType *type, double value, KjLoc loc);
KjIrExpr *kj_ir_var_ref(KjArena *arena, KjIrVar *var, KjLoc loc);
KjIrStmt *kj_ir_set(KjArena *arena, KjIrVar *var, KjIrExpr *value, KjLoc loc);
/* array.shape[dim] (i64); array[indices] (of the array's element type) and
 * array[indices] = value, `contiguous` as KjIrExpr.contiguous says; a call
 * of callee returning `type`, whose arg_count arguments the caller fills. */
KjIrExpr *kj_ir_dim(KjArena *arena, KjIrExpr *array, int dim, KjLoc loc);
KjIrExpr *kj_ir_load(KjArena *arena, KjIrExpr *array, KjIrExpr **indices, int count,
                     bool contiguous, KjLoc loc);
KjIrStmt *kj_ir_store(KjArena *arena, KjIrExpr *array, KjIrExpr **indices, int count,
                      KjIrExpr *value, bool contiguous, KjLoc loc);
KjIrExpr *kj_ir_call(KjArena *arena, KjIrFunction *callee, const KjType *type, int arg_count,
                     KjLoc loc);

/* The one walk of the IR (ir.c), for a pass that asks something of every
 * statement or expression under one: a statement's own expressions first
 * (the store's array, its indices, then value, cond, start, stop, step: the
 * order the lowering evaluates them in), each expression's operands before
 * it; then `stmt` on the statement; then the statements under it (a block's
 * in order, then, else, a loop's body).  Either hook may be NULL; `expr`
 * returning false, or `stmt` returning KJ_IR_WALK_STOP, ends the whole walk,
 * KJ_IR_WALK_SKIP leaves out the statements under that one.  `leave`, when
 * set, is called after the statements under one that `stmt` let the walk
 * into (KJ_IR_WALK_ON): a pass whose state hangs on where it is (how many
 * loops it is in, what a block's earlier statements did) keeps it in `data`,
 * pushed in `stmt` and popped in `leave` (uniform.c's divergence).  A hook
 * may mark the node it is shown (checks.c) or rewrite the operands of an
 * expression whose own operands were walked (half.c): the walk reads no
 * node twice.
 *
 * What the walk is not for: a pass that builds a new tree from the old one
 * (barrier_split.c's plan and build, split_specialise.c's folding,
 * inline_barriers.c, the lowerings themselves), whose step for a statement
 * returns the statement it made from what its children's steps made, and
 * chooses which children to visit and how often (an unrolled loop's body
 * once per turn). */
typedef enum { KJ_IR_WALK_ON, KJ_IR_WALK_SKIP, KJ_IR_WALK_STOP } KjIrWalkStep;
typedef struct KjIrWalk {
    KjIrWalkStep (*stmt)(struct KjIrWalk *w, const KjIrStmt *s);
    bool (*expr)(struct KjIrWalk *w, const KjIrExpr *e);
    void (*leave)(struct KjIrWalk *w, const KjIrStmt *s);
    void *data; /* the pass's own */
} KjIrWalk;
/* Each returns false when a hook ended the walk (NULL: nothing to walk). */
bool kj_ir_walk_stmt(KjIrWalk *w, const KjIrStmt *s);
bool kj_ir_walk_expr(KjIrWalk *w, const KjIrExpr *e);
/* Only s's own expressions, not the statements under it. */
bool kj_ir_walk_own_exprs(KjIrWalk *w, const KjIrStmt *s);

/* Whether expression e (NULL: no) names var anywhere in it. */
bool kj_ir_expr_reads(const KjIrExpr *e, const KjIrVar *var);
/* Whether statement s's own expressions (not the statements under it) name
 * var; with store_target false, the array variable a store writes through
 * does not count. */
bool kj_ir_stmt_exprs_read(const KjIrStmt *s, const KjIrVar *var, bool store_target);

/* The array parameters that fn, or a function it calls, may store into (a
 * store or an atomic through the parameter or an array `let` of it): bit i
 * for parameter i < 32 (parameters from 32 on: the caller counts them
 * written).  _at: the same at a depth of calls (past 64: every one). */
uint32_t kj_ir_params_written(const KjIrFunction *fn);
uint32_t kj_ir_params_written_at(const KjIrFunction *fn, int depth);

/* ============================================================== local_size.c */

/* A kernel's local() sized at launch (`local(f64, n)`, n an integer
 * parameter): NULL when size (a checked expression) is one, made of integer
 * constants, the kernel's integer parameters, its array parameters' extents
 * (a.shape[k], len(a)) and + - * / %, min and max and integer conversions,
 * else the part of it that is not, for the message. */
const KjIrExpr *kj_local_size_refusal(const KjIrExpr *size);
/* A constant of such a size, as a 64-bit value (false: a u64 above INT64_MAX). */
bool kj_local_size_const(const KjIrExpr *e, int64_t *out);
/* Its value at a launch, computed exactly in 64-bit integers from the
 * parameters' values (params[i] points to scalar parameter i's value, in
 * its type, as a launch passes it; shapes[i] to array parameter i's
 * extents): false on overflow or a division by zero. */
bool kj_local_size_eval(const KjIrFunction *fn, const KjIrExpr *size, void *const *params,
                        const int64_t *const *shapes, int64_t *out);
/* The bytes each thread's launch-sized local() arrays take at a launch
 * (each rounded up to 16, as the static ones), in *bytes; false, with a
 * message in why, when a size is not from 1 to 16777216 or cannot be
 * computed, or the thread's local() arrays with the static ones go past
 * KJ_MAX_LOCAL_BYTES. */
bool kj_local_launch_bytes(const KjIrFunction *fn, void *const *params,
                           const int64_t *const *shapes, int64_t *bytes, char *why,
                           size_t why_size);

/* ================================================================ ir_print.c */

/* --dump=ir */
void kj_ir_print_module(FILE *out, const KjIrModule *module);
void kj_ir_print_function(FILE *out, const KjIrFunction *fn);

/* =============================================================== ir_verify.c */

/* Checks structural invariants (types agree, vars belong to their function,
 * break/continue inside loops, ...).  Returns false and describes the first
 * problem in `why` (heap string, caller frees) when broken. */
bool kj_ir_verify(const KjIrModule *module, char **why);
/* One function made outside the module's list (split_specialise.c's forms),
 * checked as if it stood where the module's function of its symbol does. */
bool kj_ir_verify_function(const KjIrModule *module, const KjIrFunction *fn, char **why);

/* ==================================================================== check.c */

/* Resolves names and types of a parsed file (and its imports, through the module
 * loader) and builds the typed IR.  Errors go to diag; returns NULL if any. */
typedef struct KjModuleLoader KjModuleLoader;
KjIrModule *kj_check(KjArena *arena, KjAstFile *file, KjModuleLoader *loader, KjDiag *diag);

/* =================================================================== module.c */

/* Finds and parses imports: `import geo;` is geo.kern beside the importing file,
 * then in each stdlib folder.  Keeps every source loaded for the compilation. */
struct KjModuleLoader {
    KjArena *arena;
    KjDiag *diag;
    const char **stdlib_dirs; /* NULL-terminated */
    KjVec sources;            /* KjSource* */
    KjVec files;              /* KjAstFile*, parsed, by path */
    KjVec loading;            /* paths in the current import chain (cycle check) */
    KjVec links;              /* KjImportLink*: what each IMPORT declaration resolved to */
};

typedef struct KjImportLink {
    const KjNode *decl;   /* the IMPORT node */
    KjAstFile *file;      /* the module it loaded */
} KjImportLink;

/* Loads, depth first and each once, every module `file` imports directly or
 * not, and appends each to loader->files after the modules it imports; `file`
 * itself comes last.  Missing modules, import cycles and syntax errors in
 * imported files go to the loader's diag. */
void kj_module_load_imports(KjModuleLoader *loader, KjAstFile *file);

/* The module an IMPORT declaration loaded; NULL if it could not be loaded. */
KjAstFile *kj_module_imported(const KjModuleLoader *loader, const KjNode *import_decl);

/* Reads a file into the arena; NULL (and an error) if it cannot be read. */
KjSource *kj_source_read(KjArena *arena, const char *path, KjDiag *diag);
KjSource *kj_source_from_string(KjArena *arena, const char *name, const char *text);

/* The stdlib folder: $KJIT_STDLIB, else the one installed or beside the binary. */
const char *kj_default_stdlib_dir(void);

/* ================================================================ vectorize.c */

/*
 * How each operand of a vectorized call is passed to the lifted kernel:
 * as a scalar by value, as a contiguous 1-D array (index i), or as an N-D
 * strided array whose shape is the broadcast shape (broadcast dimensions have
 * stride 0).  The output is contiguous in the CONTIG layout and strided in the
 * STRIDED layout.
 */
typedef enum { KJ_OPERAND_SCALAR, KJ_OPERAND_ARRAY } KjOperandKind;

typedef enum {
    KJ_LAYOUT_CONTIG,  /* every array operand and the output: contiguous, same length */
    KJ_LAYOUT_STRIDED, /* every array operand and the output: rank `ndim`, any strides */
} KjLayout;

typedef struct KjVecVariant {
    KjLayout layout;
    int ndim;                   /* STRIDED: rank of the broadcast shape; CONTIG: 1 */
    uint32_t scalar_mask;       /* bit i set: input i is passed as a scalar */
} KjVecVariant;

/*
 * Lifts one SCALAR function into a VEC_KERNEL:
 *   params: for each input, a scalar or an array (elem type, rank ndim), then `out`
 *   body:   PARFOR i over [0, out total size): out[idx(i)] = scalar(in...[idx(i)])
 * The new function is appended to the module (callees before callers holds).
 */
KjIrFunction *kj_vectorize(KjIrModule *module, KjIrFunction *scalar, KjVecVariant variant);

/* The skeleton of a lifted VEC_KERNEL, shared by vectorize.c and
 * guvectorize.c.  kj_lift_kernel: the kernel `symbol` the module already
 * has (*is_new false), or a new one lifted from `from` (its name, location,
 * `scalar`), without parameters or body yet.  kj_lift_coords: sets into
 * `body` the coordinates of flat index `index` over the first `rank` extents
 * of array `shape`, last dimension fastest.  kj_lift_finish: fn's body, a
 * PARFOR of `index` over the product of those extents running `body`; fn
 * joins the module. */
KjIrFunction *kj_lift_kernel(KjIrModule *module, KjIrFunction *from, const char *symbol,
                             bool *is_new);
void kj_lift_coords(KjIrModule *module, KjIrFunction *fn, KjIrStmt *body, KjIrVar *index,
                    KjIrVar *shape, int rank, KjIrVar **coords);
void kj_lift_finish(KjIrModule *module, KjIrFunction *fn, KjIrVar *index, KjIrVar *shape,
                    int rank, KjIrStmt *body);

/* ================================================================== uniform.c */

/*
 * The uniformity analysis: which values of a function differ between the
 * threads (or the elements of a vectorized call) that run it side by side,
 * and which statements run under varying control flow.  The SIMD lowering of
 * the cpu targets keeps uniform values scalar and makes varying ones vectors;
 * the cpu barrier splitting asks whether a syncthreads() is divergent.
 */
typedef struct KjUniformSources {
    uint32_t sregs;  /* bit (1u << KjSpecialReg): that register is varying */
    uint64_t params; /* bit i: parameter i is varying */
    bool parfor_var; /* the PARFOR index is varying */
    bool loads;      /* every load and call varies: another thread may write the
                        memory between two threads' reads (the barrier split,
                        whose threads run one after another) */
    bool block_locals; /* local() makes one array for the whole block, not one
                          per thread: a split form's per-thread arrays, made
                          before its THREADS loops (codegen_simd_threads.c) */
} KjUniformSources;

typedef enum {
    KJ_ACCESS_UNIFORM,    /* every index uniform: one element for all threads */
    KJ_ACCESS_CONTIGUOUS, /* the last index is uniform + the lane's index (unit step),
                             the others uniform */
    KJ_ACCESS_GENERAL,    /* anything else: a gather or scatter */
} KjAccessKind;

typedef struct KjUniformity KjUniformity;

/* Runs the analysis to its fixed point; the result lives in arena. */
KjUniformity *kj_uniform_analyze(KjArena *arena, const KjIrFunction *fn, KjUniformSources sources);
bool kj_uniform_var_varying(const KjUniformity *u, const KjIrVar *var);
bool kj_uniform_expr_varying(const KjUniformity *u, const KjIrExpr *e);
/* e is uniform + the lane's index: threadIdx.x (when varying), the PARFOR
 * index, a variable only ever assigned such a value outside divergence. */
bool kj_uniform_expr_unit(const KjUniformity *u, const KjIrExpr *e);
/* var holds uniform + the lane's index in every lane, inactive ones too
 * (a FOR counter so started and stepped is never blended). */
bool kj_uniform_var_unit(const KjUniformity *u, const KjIrVar *var);
/* s may run with some of the threads inactive (under a varying if or loop,
 * or after a varying break, continue or return). */
bool kj_uniform_stmt_divergent(const KjUniformity *u, const KjIrStmt *s);
/* A FOR or WHILE whose threads may leave it at different times. */
bool kj_uniform_loop_varying(const KjUniformity *u, const KjIrStmt *loop);
/* Some return value is varying, or some return is divergent. */
bool kj_uniform_result_varying(const KjUniformity *u);
bool kj_uniform_divergent_return(const KjUniformity *u);
/* How an access array[indices] (indices as in LOAD, STORE, ATOMIC) varies. */
KjAccessKind kj_uniform_access(const KjUniformity *u, KjIrExpr *const *indices, int count);
/* The callee stores, prints, runs atomics or reads the thread (here or in
 * what it calls): a call to it runs once per thread. */
bool kj_uniform_call_has_effects(const KjIrFunction *callee);

/* ============================================================ local_promote.c */

/* local() arrays indexed only by constants (after unrolling the small
 * constant loops that index them) become one scalar variable per element, in
 * every function of the module; once (module->locals_promoted). */
void kj_promote_locals(KjIrModule *module);

/* ========================================================== inline_barriers.c */

/* Whether the kernel calls a device function that (transitively) uses a
 * barrier. */
bool kj_kernel_calls_barrier_helper(const KjIrFunction *kernel);
/* A copy of the kernel (not added to the module) with each such call that is
 * a whole statement replaced by the callee's body, for barrier_split.c; NULL
 * with *why (may be NULL) when one cannot be written in. */
KjIrFunction *kj_inline_barrier_helpers(KjArena *arena, const KjIrFunction *kernel, const char **why);

/* ============================================================ barrier_split.c */

/* The most threads a block has (CUDA's limit, which kjit_launch enforces):
 * the split form keeps the values that live across a barrier in arrays of
 * this many elements. */
#define KJ_MAX_BLOCK_THREADS 1024

/* The most regions (loops over a block's threads) a split form may have, made
 * by barrier_split.c or by split_specialise.c's unrolling: the split form is
 * one LLVM function, and LLVM's optimiser takes time quadratic in the loops
 * of a function (400 barriers: 16 s).  Past it the kernel runs on fibers,
 * whose code grows linearly (or the loop stays rolled). */
#define KJ_SPLIT_MAX_REGIONS 64

/*
 * The split form of a kernel whose syncthreads() calls all sit outside
 * varying control flow (the cpu targets run it without fibers): kernel->split,
 * made once and added to the module.  NULL when the kernel must stay on
 * fibers; *why (may be NULL) then says why, for --dump and the tests.
 */
KjIrFunction *kj_barrier_split(KjIrModule *module, KjIrFunction *kernel, const char **why);

/*
 * A kernel without barriers whose body has no loop, no call and at most 4
 * loads: the elementwise kind (`if i < len(a) { b[i] = a[i] + 1; }`), whose
 * threads do so little each that a chunk's index and bounds test cost as
 * much as its work.  kj_barrier_split makes it a split form of one region, so that the
 * code for a launch's block shape (split_specialise.c) tests its bounds once
 * for the block and loops over its whole chunks a constant number of times;
 * its general code stays the kernel's own (kj_codegen_uses_split).
 */
bool kj_split_straight_line(const KjIrFunction *kernel);

/* ============================================================= grid_rows.c */

/* The axis (0 x, 1 y, 2 z) of a grid() sum, i64(blockIdx.d) * i64(blockDim.d)
 * + i64(threadIdx.d) as the checker builds it; -1 for any other expression. */
int kj_grid_sum_axis(const KjIrExpr *e);
/* Whether kernel may run as rows of its grid, and the output whose lines
 * they are cut on (KjGridRows; .ok false: not this form). */
KjGridRows kj_grid_rows(const KjIrFunction *kernel);

/* ======================================================= split_specialise.c */

/*
 * The kernel's split form for blocks of `block` threads (x, y, z): blockDim a
 * constant, the uniform values outside its regions that then fold, folded,
 * and its loops between regions unrolled where their trip count becomes
 * constant.  Returns a shallow copy of `kernel` (its body, params and
 * symbol shared) whose split is the new form, made in `arena`; NULL when the
 * kernel has no split form.
 */
KjIrFunction *kj_split_specialise(KjArena *arena, const KjIrFunction *kernel, const uint32_t block[3]);
/* Whether the split form of `root` (kj_split_specialise's result for
 * `block`) stores every element of each of its shared() arrays in its first
 * region before anything reads it: the runtime then need not zero the
 * block's static shared memory. */
bool kj_split_writes_shared(const KjIrFunction *root, const uint32_t block[3]);

/* =================================================================== reduce.c */

/*
 * The reduce pass lifts the SCALAR function f(a: T, b: T) -> T of a @reduce
 * into a kernel that reduces one level of the fixed tree (docs/language.md,
 * "Reductions"): the reduced index space of each output element, m elements
 * in C order, is cut into blocks of KJ_REDUCE_BLOCK; each block is reduced in
 * KJ_REDUCE_LANES interleaved lanes (lane j takes elements j, j + L, j + 2L
 * ... in order), whose values are then combined by the fixed tree
 * lane[j] = f(lane[j], lane[j + s]) for s = L/2 ... 1.  Each block gives one
 * partial; the runtime reduces the partials with the same kernel shape until
 * one value per output is left.  The order is a function of m alone, so every
 * target that runs these kernels gives the same bits.
 */
#define KJ_REDUCE_BLOCK 1024
#define KJ_REDUCE_LANES 32
#define KJ_REDUCE_WARPS_PER_BLOCK 8 /* WARPS form: threads per block = 8 * 32 */
#define KJ_REDUCE_WARPS_UNROLL 2 /* WARPS form: copies of a full block's loop on cuda (the
                                    H200 ran 4 no faster; 3.8% less PTX compile: redwarps) */
#define KJ_REDUCE_COLUMN_ITEMS 32   /* COLUMNS form: work items (neighbouring outputs) per
                                       block of 32 L / V threads */

typedef enum {
    KJ_REDUCE_FORM_LANES, /* a VEC_KERNEL: one block of elements per PARFOR iteration, its
                             lanes unrolled in one thread (cpu, parallel) */
    KJ_REDUCE_FORM_WARPS, /* a KERNEL for cuda: 32 / V threads per block of elements, V
                             lanes a thread, the tree by warp shuffles (V = 0: a warp
                             per block, lane j on thread j, the tree in shared memory) */
    KJ_REDUCE_FORM_COLUMNS, /* a KERNEL for cuda's strided levels: 32 neighbouring work
                               items a block, L / V threads (one a warp) a work item,
                               V lanes a thread, the tree's steps across threads in
                               shared memory */
} KjReduceForm;

typedef struct KjReduceVariant {
    KjReduceForm form;
    int kept_rank;    /* 0..KJ_MAX_DIMS: the output's dimensions, after merging */
    int reduced_rank; /* 1..KJ_MAX_DIMS: the reduced dimensions, after merging */
    bool contiguous;  /* reduced_rank 1 and every input's reduced stride 1 */
    bool mapped;      /* the inputs are the map function's (the first level of a fused
                         @reduce(map = g)); else one input of type T */
    bool simd;        /* LANES: the lanes in a local array under an inner loop that the
                         loop vectoriser makes SIMD code of (cpu); else L variables
                         (registers on a GPU).  The order is the same. */
    int thread_lanes; /* WARPS: V, the lanes each thread holds (kj_reduce_thread_lanes);
                         0: one lane per thread, the tree in shared memory.
                         COLUMNS: V (kj_reduce_column_lanes), 1 to L */
    bool aligned;     /* WARPS with V lanes: each thread's V consecutive elements of
                         every input start at a multiple of V elements (the runtime
                         has checked the data pointers and the kept strides) */
} KjReduceVariant;

/* V for the WARPS form: lanes per thread, so that one thread's V consecutive
 * elements of the widest input fill 16 bytes (4 f32, 2 f64); 0 when T is not
 * a type warp shuffles move (then one lane per thread). */
int kj_reduce_thread_lanes(const KjType *t, int widest_input_bytes);

/* V for the COLUMNS form: the lanes each thread holds, so that L / V threads
 * share a work item (enough threads to keep the loads in flight, few
 * registers a thread). */
int kj_reduce_column_lanes(const KjType *t);

/* The switches of the @reduce forms that reduce.c reads, for measuring
 * variants (the cuda forms' on a GPU, tests/gpu/reduce_forms.sh; issue 25),
 * each 0 when unset.  They change the code, so the runtime puts them in a
 * lifted root's cache key (kj_api_code_key). */
typedef struct KjReduceKnobs {
    int warps_unroll; /* KJIT_REDUCE_WARPS_UNROLL=N: copies of the WARPS form's loop over a
                         full block's steps (0: two, KJ_REDUCE_WARPS_UNROLL) */
    int tail_unroll;  /* KJIT_REDUCE_TAIL_UNROLL=N: of its loop over the last block's */
    bool warps_main;  /* KJIT_REDUCE_WARPS_MAIN=1: the WARPS form's addresses and work item
                         as main at 169fe56 built them (no frozen base, a division by
                         chunks for one output): the "before" of the GPU script */
    bool lanes_main;  /* KJIT_REDUCE_LANES_MAIN=1: the cpu LANES form with SIMD lanes as
                         main at 7638880 built it (a first step for a whole block and
                         another for a short one), for timing its compile */
    bool o3;          /* KJIT_REDUCE_O3=1: LLVM's -O3 pipeline for the lifted kernels, not
                         the lean one (codegen_llvm.c), for measuring */
    bool strided_vector; /* KJIT_REDUCE_STRIDED_VECTOR=1: the cpu LANES form's strided
                         levels' lane loops left to LLVM's vectoriser (which adds a vector
                         copy for unit strides), not scalar, for timing its compile */
    bool tree_inline; /* KJIT_REDUCE_TREE_INLINE=1: the cpu LANES form's lane tree written
                         in each level, not one function of the combine's that its levels
                         call (reduce.c's shared_lane_tree), for timing its compile */
    bool warps_short; /* KJIT_REDUCE_WARPS_SHORT=1: the WARPS form's last block as COLUMNS
                         takes its blocks (count / L untested steps, then one tested), not a
                         loop of B / L steps each element tested: 4.6% less LLVM work for
                         the PTX (callgrind), but ptxas slower and dot f32 1.2% slower on
                         the H200, so off (redwarps, 2026-11-29) */
} KjReduceKnobs;
KjReduceKnobs kj_reduce_knobs(void);

/* The SIMD lowering's measuring switches (issue 25's block-shape forms):
 * NAME=0 builds the form before (codegen_simd.h's simd_switched_off).  They
 * change the code, so kj_api_code_key names each one that is set to 0. */
#define KJ_SIMD_GUARDED_LOADS "KJIT_SIMD_GUARDED_LOADS"
#define KJ_SIMD_ROW_CHUNKS "KJIT_SIMD_ROW_CHUNKS"
/* barrier_split.c's per-thread arrays: 0 gives their layout before (each
 * KJ_MAX_BLOCK_THREADS elements, 16-byte aligned) */
#define KJ_SIMD_THREAD_ARRAYS "KJIT_SIMD_THREAD_ARRAYS"
/* codegen_simd_fission.c: 0 keeps every loop whole; KJ_SIMD_FISSION_REGISTERS=N sets
 * the vector registers its estimate assumes (the cache key names it when set) */
#define KJ_SIMD_FISSION "KJIT_SIMD_FISSION"
#define KJ_SIMD_FISSION_REGISTERS "KJIT_SIMD_FISSION_REGISTERS"
#define KJ_SIMD_SWITCHES(X)                                                                   \
    X(KJ_SIMD_GUARDED_LOADS) X(KJ_SIMD_ROW_CHUNKS) X(KJ_SIMD_THREAD_ARRAYS) X(KJ_SIMD_FISSION)

/*
 * Lifts `combine` (a SCALAR f(T, T) -> T) into a kernel (VEC_KERNEL for LANES,
 * KERNEL for WARPS and COLUMNS) appended to the module, with parameters
 *     in_0 .. in_{n-1}   1-D arrays addressed by flat element offsets (the map's
 *                        parameter types when mapped, else T)
 *     out                T[], one element per work item
 *     items chunks m     i64: work items (outputs x chunks), blocks per output,
 *                        reduced elements per output
 *     ke_0 ..            i64 kept extents (kept_rank), then re_0 .. reduced extents
 *                        (when reduced_rank > 1)
 *     ks<q>_<d>, rs<q>_<d>  i64 element strides of input q, kept then reduced (no
 *                        reduced strides when contiguous)
 *     has_init, init     bool, T: out = f(init, value) when chunks == 1
 * Each work item reduces block c of output k into out[k chunks + c]; a
 * contiguous level numbers them w = k chunks + c, a strided one w = c outputs
 * + k (outputs = items / chunks).
 * The same (functions, variant) asked twice gives the same kernel.
 */
KjIrFunction *kj_reduce_lift(KjIrModule *module, KjIrFunction *combine, KjIrFunction *map,
                             KjReduceVariant variant);

/* ============================================================== guvectorize.c */

/*
 * A @guvectorize layout, NumPy's gufunc signature "(m,n),(n,p)->(m,p)": the
 * operands are the inputs, then the outputs (the function's parameters in
 * order); operand q has rank[q] core dimensions, each named by an index into
 * names.  Every output dimension also appears in some input.  A "()" input is
 * a scalar parameter; a "()" output is a one-element array (core rank 1 in
 * the lifted kernel, extent 1).
 */
#define KJ_GUFUNC_MAX_OPERANDS 32
#define KJ_GUFUNC_MAX_NAMES 32

typedef struct KjGufuncLayout {
    const char *text; /* as written, without the quotes */
    int inputs, outputs;
    int rank[KJ_GUFUNC_MAX_OPERANDS];
    int dims[KJ_GUFUNC_MAX_OPERANDS][KJ_MAX_DIMS];
    const char *names[KJ_GUFUNC_MAX_NAMES];
    int name_count;
} KjGufuncLayout;

/* Parses a layout (text without quotes); on an error returns false with a
 * message in `why` (static text) and the byte offset it points at. */
bool kj_gufunc_layout_parse(KjArena *arena, const char *text, KjGufuncLayout *out,
                            const char **why, int *offset);

/*
 * Lifts a @guvectorize signature (a PLAIN core function over the operands'
 * cores) into a VEC_KERNEL over `loop_ndim` (1..KJ_MAX_DIMS) loop dimensions:
 *   params: operand q as an array of rank loop_ndim + core rank (a "()"
 *           output: core rank 1; a "()" input: rank loop_ndim), the loop
 *           dimensions first, broadcast ones with stride 0
 *   body:   PARFOR i over the loop elements (the loop extents of operand
 *           `inputs`, the first output, which is never broadcast): i's
 *           coordinates c, then core(VIEW(op_0, c...) or op_0[c...], ...)
 * `contiguous`: every core is C-contiguous at every call of this code (the
 * runtime checks), so the views' strides come from their extents (the last
 * is 1) and the optimiser sees unit-stride cores once it inlines the core.
 * The same (function, loop_ndim, contiguous) asked twice gives the same kernel.
 */
KjIrFunction *kj_guvectorize(KjIrModule *module, KjIrFunction *core,
                             const KjGufuncLayout *layout, int loop_ndim, bool contiguous);

/* =================================================================== checks.c */

/* What checked mode tests, as bits (kjit.h's KJIT_CHECK_* have the same values). */
#define KJ_CHECKS_VALUES 1 /* indices, integer division, conversions, shifts, powers */
#define KJ_CHECKS_RACE 2   /* data races and barrier divergence (cpu targets) */

/* Checked mode: with KJ_CHECKS_VALUES, gives every array access, integer
 * division and remainder, float-to-integer conversion, shift and integer
 * power with a variable exponent of the module's checked functions a check
 * site (check_site, and an entry in module->check_sites) for the back end to
 * test at run time; with KJ_CHECKS_RACE, every array load, store and atomic
 * and every barrier a race site (race_site).  Each once per module; a second
 * call does nothing more. */
void kj_checks_insert(KjIrModule *module, int checks);

/* ============================================================ barrier_warn.c */

/* `kjit check`: a warning for each block barrier of a kernel (syncthreads(),
 * syncthreads_count/_and/_or, syncgrid(), a call that waits at one) under
 * control flow that depends on the thread (uniform.c). */
void kj_warn_divergent_barriers(KjArena *arena, const KjIrModule *module, KjDiag *diag);

/* ================================================================ pipeline.c */

/* How far kj_pipeline_run goes. */
typedef enum KjStage {
    KJ_STAGE_AST,   /* parse only */
    KJ_STAGE_IR,    /* the checked, verified module */
    KJ_STAGE_ROOTS, /* and the middle passes on each root asked for */
} KjStage;

/* A root the back end will compile: a checked function as it is, or a
 * @vectorize signature lifted into a kernel for one layout; on the cpu
 * targets, a kernel's split form, for one block shape or any. */
typedef struct KjPipelineRoot {
    KjIrFunction *fn;
    bool vectorize;
    KjVecVariant variant;
    const KjReduceVariant *reduce; /* a @reduce signature lifted by the reduce pass */
    KjIrFunction *map;             /* reduce->mapped: the map's signature */
    const KjGufuncLayout *gufunc;  /* a @guvectorize signature lifted over loop_ndim */
    int loop_ndim;
    bool gufunc_contiguous;        /* its cores C-contiguous (kj_guvectorize) */
    bool split_barriers;           /* cpu targets: make a kernel's split form (fn->split) */
    uint32_t block[3];             /* a launch's block dims, or 0s: a kernel with a split form
                                      becomes its copy specialised for them (split_specialise.c) */
    KjIrFunction *root; /* out: what to hand the back end */
} KjPipelineRoot;

typedef struct KjPipeline {
    KjArena *arena;
    KjDiag *diag;
    const KjSource *src;      /* the main file, when module is NULL */
    const char **stdlib_dirs; /* NULL-terminated */
    KjIrModule *module;       /* in: a module already checked (the front end is skipped);
                                 out: the checked module */
    KjAstFile *ast;           /* out, when the front end ran */
    KjPipelineRoot *roots;
    int root_count;
    KjStage stop;             /* the last stage to run */
    bool verify;              /* the verifier after every pass, not only after check */
    int checks;               /* checked mode, KJ_CHECKS_* bits: mark the module's sites (checks.c) */
    bool warn_barriers;       /* after the front end: barrier_warn.c's warnings */
} KjPipeline;

/* The pass list (pipeline.c says which passes, in which order).  false when a
 * stage reported errors to p->diag (a verifier failure is one, as an internal
 * error). */
bool kj_pipeline_run(KjPipeline *p);

/* The front end alone: source text to a verified, checked module; NULL on errors. */
KjIrModule *kj_compile_source(KjArena *arena, const KjSource *src, const char **stdlib_dirs,
                              KjDiag *diag);

/* Whether --verify is on by default: KJIT_VERIFY set and not 0. */
bool kj_pipeline_verify_default(void);

#endif
