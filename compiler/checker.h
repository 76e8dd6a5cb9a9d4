/*
 * checker.h: the checker's internals, shared by the compiler/check*.c files
 * and seen by no other file (kjit_compiler.h declares only kj_check).
 *
 * The checker is a stack of files, each calling only the ones below it
 * (tests/layers.sh fails on a circle of files):
 *
 *   check.c              the module, function declarations and signatures,
 *                        statements, constants; checks bodies on demand
 *   check_reduce.c       @reduce declarations and their map =
 *   check_guvectorize.c  @guvectorize layouts and parameters
 *   check_expr.c         expressions and calls (the recursion of the
 *                        language: an expression holds a call that holds
 *                        expressions), the arguments of built-ins checked
 *                        before their rules run
 *   check_builtin.c      the rules of casts, math, atomics and KJ_CALL_BUILTINS,
 *                        on checked arguments, and the built-ins' table
 *   check_print.c        print(...)'s rule
 *   check_exec.c         the execution-model built-ins' rule, warpsize
 *   check_operator.c     the operators, on checked operands
 *   check_scope.c        scopes and locals, functions and constants by name,
 *                        device-function marks, the tables of built-in names
 *   check_type.c         IR shorthands and the implicit typing
 */
#ifndef KJ_CHECKER_H
#define KJ_CHECKER_H

#include "kjit_compiler.h"

typedef enum { KJ_CHECK_FN_UNCHECKED, KJ_CHECK_FN_CHECKING, KJ_CHECK_FN_DONE } KjCheckFnState;

typedef struct KjCheckFile {
    KjAstFile *ast;
    KjVec imports; /* KjCheckFile*: the modules this file imports directly */
} KjCheckFile;

typedef struct KjCheckFn {
    KjFunctionDecl *decl;
    KjCheckFile *file;
    KjIrEntry *entry;
    KjCheckFnState state;
    bool bad;    /* its declaration is wrong: calls to it are not checked further */
    bool impure; /* stores to memory or calls something that does */
} KjCheckFn;

/* A module-level constant, `const N = 128;`: checked before any function, in
 * source order, so that its value is known wherever a literal could stand. */
typedef struct KjCheckConst {
    KjNode *decl;        /* CONST */
    KjCheckFile *file;
    KjCheckFnState state;
    KjIrExpr *value;     /* a CONST (untyped unless a type is written); NULL after an error */
} KjCheckConst;

/* A name bound in a block: locals may not hide one another in one function. */
typedef struct KjCheckBinding {
    const char *name;
    KjIrVar *var;
    KjLoc loc;
} KjCheckBinding;

typedef struct KjCheckScope {
    struct KjCheckScope *parent;
    KjVec bindings; /* KjCheckBinding* */
} KjCheckScope;

/* What is being checked right now: one signature of one function. */
typedef struct KjCheckFnCtx {
    KjCheckFn *info;
    KjIrFunction *ir;
    KjCheckScope *scope;
    int loop_depth;
    bool loop_has_break; /* the innermost loop has a `break` */
    KjVec *out;          /* the statement list being filled */
    KjVec poisoned;      /* KjIrVar* whose initialiser was an error: uses stay quiet */
    int64_t call_local_bytes; /* the most local() bytes one of its calls takes */
    KjLoc call_local_loc;     /* that call */
} KjCheckFnCtx;

typedef struct KjChecker KjChecker;
typedef struct KjChecker {
    KjArena *arena;
    KjDiag *diag;
    KjIrModule *module;
    KjVec files; /* KjCheckFile* */
    KjVec fns;   /* KjCheckFn*, every function of every file */
    KjVec consts; /* KjCheckConst*, every constant of every file, files in import order */
    KjVec stack; /* KjCheckFn* being checked, outermost first */
    KjCheckFnCtx *cur;
    KjCheckFile *const_file; /* while a constant's value is checked: its file (cur is NULL) */
    /* The `?:` that may choose between arrays: the value of a let or of an
     * array variable's assignment (and, within it, its arms); else NULL. */
    KjNode *array_choice;
    /* Checks a function's body (check.c's kj_check_function), for a call of
     * one not checked yet: the language lets a function call one declared
     * after it, so a call checks its callee first.  The module level hands
     * it down here; it is the one way check_expr.c reaches above itself. */
    void (*check_function)(KjChecker *c, KjCheckFn *info);
} KjChecker;

static inline const KjType *kj_check_t_bool(void) { return kj_type_scalar(KJ_TYPE_BOOL); }
static inline const KjType *kj_check_t_i32(void) { return kj_type_scalar(KJ_TYPE_I32); }
static inline const KjType *kj_check_t_i64(void) { return kj_type_scalar(KJ_TYPE_I64); }
static inline const KjType *kj_check_t_f64(void) { return kj_type_scalar(KJ_TYPE_F64); }
static inline const KjType *kj_check_t_untyped_int(void)
{
    return kj_type_scalar(KJ_TYPE_UNTYPED_INT);
}
static inline const KjType *kj_check_t_untyped_float(void)
{
    return kj_type_scalar(KJ_TYPE_UNTYPED_FLOAT);
}

static inline bool kj_check_is_untyped(const KjIrExpr *e)
{
    return e && (e->type->kind == KJ_TYPE_UNTYPED_INT || e->type->kind == KJ_TYPE_UNTYPED_FLOAT);
}

static inline bool kj_check_is_scalar(const KjType *t)
{
    return t && t->kind >= KJ_TYPE_BOOL && t->kind <= KJ_TYPE_LAST_SCALAR;
}

static inline bool kj_check_is_array(const KjType *t)
{
    return t && t->kind == KJ_TYPE_ARRAY;
}

static inline bool kj_check_is_real(const KjType *t)
{
    return kj_type_is_int(t) || kj_type_is_float(t);
}

/* ================================================================ check_type.c */

/* IR shorthands. */
KjIrExpr *kj_check_new_expr(KjChecker *c, KjIrOp op, const KjType *type, KjLoc loc, int n);
KjIrExpr *kj_check_unary_ir(KjChecker *c, KjIrOp op, const KjType *type, KjLoc loc, KjIrExpr *a);
KjIrExpr *kj_check_binary_ir(KjChecker *c, KjIrOp op, const KjType *type, KjLoc loc, KjIrExpr *a,
                             KjIrExpr *b);
KjIrExpr *kj_check_int_const(KjChecker *c, const KjType *type, int64_t value, KjLoc loc);
KjIrExpr *kj_check_float_const(KjChecker *c, const KjType *type, double value, KjLoc loc);
KjIrExpr *kj_check_var_ref(KjChecker *c, KjIrVar *var, KjLoc loc);
KjIrExpr *kj_check_sreg(KjChecker *c, KjSpecialReg reg, KjLoc loc);
/* e as `to`: itself if it has that type already, else a CAST. */
KjIrExpr *kj_check_cast_ir(KjChecker *c, KjIrExpr *e, const KjType *to);
KjIrExpr *kj_check_clone_expr(KjChecker *c, const KjIrExpr *e);
/* Whether an array expression names read-only memory (a constant array, or
 * a let of one); a store, an atomic or a call that writes it is refused
 * with an error at loc naming `what` (kj_check_refuse_read_only: true when refused). */
bool kj_check_is_read_only(const KjIrExpr *array);
bool kj_check_refuse_read_only(KjChecker *c, const KjIrExpr *array, KjLoc loc, const char *what);
bool kj_check_expr_is_pure(KjChecker *c, const KjIrExpr *e);
void kj_check_note_impure(KjChecker *c);

/* Implicit typing. */
const KjType *kj_check_common_type(const KjType *a, const KjType *b, const char **why);
bool kj_check_int_fits(int64_t v, const KjType *t);
KjIrExpr *kj_check_settle(KjChecker *c, KjIrExpr *e, const KjType *to, KjLoc loc);
KjIrExpr *kj_check_settle_default(KjChecker *c, KjIrExpr *e);
KjIrExpr *kj_check_convert(KjChecker *c, KjIrExpr *e, const KjType *to, KjLoc loc,
                           const char *context);
KjIrExpr *kj_check_need_value(KjChecker *c, KjIrExpr *e, KjLoc loc);
bool kj_check_constant_int(const KjIrExpr *e, int64_t *out);

/* =============================================================== check_scope.c */

/* Scopes and locals.  kj_check_declare declares a local; a name may not be
 * declared again while an earlier one of the same function is visible. */
void kj_check_push_scope(KjChecker *c, KjCheckScope *scope);
void kj_check_pop_scope(KjChecker *c);
KjCheckBinding *kj_check_lookup_local(KjChecker *c, const char *name);
KjIrVar *kj_check_declare(KjChecker *c, const char *name, const KjType *type, KjLoc loc);
bool kj_check_is_poisoned(KjChecker *c, const KjIrVar *var);
KjCheckFn *kj_check_find_function(KjChecker *c, const char *name);
/* Module-level constants.  The one named `name`, or NULL; the value of a use
 * of it at loc (NULL after an error: not visible from here, or used in a
 * constant before its definition). */
KjCheckConst *kj_check_find_const(KjChecker *c, const char *name);
KjIrExpr *kj_check_const_value(KjChecker *c, KjCheckConst *k, KjLoc loc);
/* The file whose code is being checked (a function's, or a constant's). */
KjCheckFile *kj_check_current_file(KjChecker *c);
/* Device functions.  A plain function being checked uses the kernel built-in
 * `what` at loc; a call at loc of the device function callee (false after an
 * error: the caller is @vectorize). */
void kj_check_device_use(KjChecker *c, const char *what, KjLoc loc);
bool kj_check_device_call(KjChecker *c, const KjIrFunction *callee, KjLoc loc);
bool kj_check_require_kernel(KjChecker *c, KjLoc loc, const char *what);
/* Built-in names. */
bool kj_check_is_builtin_name(const char *name);
bool kj_check_builtin_constant(const char *name, double *value);
int kj_check_register_group(const char *name);
int kj_check_math_lookup(const char *name);
int kj_check_atomic_lookup(const char *name);
bool kj_check_is_kernel_constant(const char *name);
bool kj_check_arg_count_is(KjChecker *c, KjNode *n, const char *name, int low, int high);

/* ============================================================ check_operator.c */

/* The operators.  kj_check_unify brings two operands to one type (NULL after
 * an error) and returns it; `op` names the operation in errors.  Operands
 * come checked, NULL after their error. */
KjIrExpr *kj_check_unary(KjChecker *c, KjNode *n, KjIrExpr *operand);
KjIrExpr *kj_check_binary_values(KjChecker *c, KjBinaryOp op, KjIrExpr *l, KjIrExpr *r,
                                 KjLoc loc);
const KjType *kj_check_unify(KjChecker *c, KjIrExpr **l, KjIrExpr **r, KjLoc loc,
                             const char *op);

/* ================================================ check_exec.c, check_print.c */

/* An entry of the built-ins' table (check_builtin.c, below). */
typedef struct KjCheckBuiltin KjCheckBuiltin;

/* The rules of the execution-model built-ins (KJ_EXEC_OPS: which one is
 * b->exec) and of print; the arguments come as KJ_CHECK_ARGS_EXPRS and
 * KJ_CHECK_ARGS_PRINT say. */
KjIrExpr *kj_check_exec(KjChecker *c, KjNode *n, const KjCheckBuiltin *b, KjIrExpr **args);
/* mma(a, b, c0, c1) that a let or an assignment takes apart, its four
 * arguments checked (NULL after an error): its EXEC, a c128 pair (d0, d1);
 * NULL after an error. */
KjIrExpr *kj_check_mma(KjChecker *c, KjNode *n, KjIrExpr **args);
KjIrExpr *kj_check_kernel_constant(KjChecker *c, KjNode *n);
KjIrExpr *kj_check_print(KjChecker *c, KjNode *n, const KjCheckBuiltin *b, KjIrExpr **args);

/* ============================================================= check_builtin.c */

/* How a built-in's rule takes its arguments, checked before it runs:
 *   VALUES  each checked, and a call that returns nothing refused; the rule
 *           runs only if all are good
 *   EXPRS   each checked, NULL after its error; the rule sees them all
 *   PRINT   as EXPRS, but a string literal is left to the rule (NULL) */
typedef enum { KJ_CHECK_ARGS_VALUES, KJ_CHECK_ARGS_EXPRS, KJ_CHECK_ARGS_PRINT } KjCheckArgs;

/* An entry of the one table of built-in calls: one of KJ_CALL_BUILTINS
 * (id), of KJ_EXEC_OPS (id KJ_BUILTIN_EXEC, exec which), of
 * KJ_MATH_BUILTINS (KJ_BUILTIN_MATH, math) or of KJ_ATOMIC_OPS
 * (KJ_BUILTIN_ATOMIC, atomic), each made from its X-macro line; the parser
 * knows none of them, the checker looks every call up here (casts aside: a
 * scalar type's name), and the rule builds the IR the back end lowers. */
struct KjCheckBuiltin {
    const char *name;
    int min_args, max_args;
    KjBuiltinWhere where;
    KjCheckArgs args;
    /* the rule, given this entry; NULL: never called as an expression (a
     * let's or a for's, which check.c takes apart) */
    KjIrExpr *(*rule)(KjChecker *c, KjNode *n, const KjCheckBuiltin *b, KjIrExpr **args);
    KjCallBuiltin id;
    KjExecOp exec;
    /* a let may take the call apart into its components (let x, y = grid(2);) */
    bool takes_apart;
    KjMathFn math;
    KjAtomicOp atomic;
    /* the check of the call's argument count where it is not min_args to
     * max_args (an atomic's hangs on its first argument's form); NULL: those */
    bool (*count)(KjChecker *c, KjNode *n, const KjCheckBuiltin *b);
};

const KjCheckBuiltin *kj_check_builtin_lookup(const char *name);
/* Casts, math functions and atomics: their argument counts are checked
 * (kj_check_atomic_count for atomics), and their arguments as VALUES. */
KjIrExpr *kj_check_cast(KjChecker *c, KjNode *n, const KjType *to, KjIrExpr *a);
KjIrExpr *kj_check_math(KjChecker *c, KjNode *n, KjMathFn fn, KjIrExpr **a);
bool kj_check_atomic_count(KjChecker *c, KjNode *n, KjAtomicOp op);
KjIrExpr *kj_check_atomic(KjChecker *c, KjNode *n, KjAtomicOp op, KjIrExpr **a);
/* grid(n) / gridsize(n): n (checked, NULL after its error) must be a
 * constant 1..3; the component `axis` of either, in i64. */
bool kj_check_grid_count(KjChecker *c, KjNode *n, const char *name, KjIrExpr *a, int64_t *count);
KjIrExpr *kj_check_grid_component(KjChecker *c, bool size, int axis, KjLoc loc);

/* =============================================== check_reduce.c, check_guvectorize.c */

/* A @reduce declaration (two parameters and a result of one scalar type, per
 * signature), and its map = f once every function is declared. */
void kj_check_reduce_decl(KjChecker *c, KjCheckFn *info);
void kj_check_reduce_map(KjChecker *c, KjCheckFn *info);

/* A @guvectorize declaration: its layout string (parsed into entry->layout),
 * the parameter count, and each parameter's rank against its operand's core
 * rank, for the typed form or one signature (`params`, `ret` the signature's
 * leading type or NULL); false after reporting. */
bool kj_check_guvectorize_layout(KjChecker *c, KjCheckFn *info);
bool kj_check_guvectorize_params(KjChecker *c, KjCheckFn *info, KjLoc where,
                                 const KjType *const *params, int count, const KjType *ret);

/* ================================================================ check_expr.c */

/* An expression; NULL after its error.  kj_check_name and kj_check_index for
 * the statements that assign to a name or an element. */
KjIrExpr *kj_check_expr(KjChecker *c, KjNode *n);
KjIrExpr *kj_check_name(KjChecker *c, KjNode *n);
KjIrExpr *kj_check_index(KjChecker *c, KjNode *n);
KjIrExpr *kj_check_call(KjChecker *c, KjNode *n);

/* ===================================================================== check.c */

/* Checks a function's body, once (KjChecker.check_function). */
void kj_check_function(KjChecker *c, KjCheckFn *info);

#endif
