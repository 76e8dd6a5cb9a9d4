/*
 * checks.c: checked mode's pass.  It finds every operation whose result the
 * language leaves unspecified for some operands (docs/language.md, "Checked
 * mode") and gives it a check site: a number stored in the node
 * (check_site) and an entry in the module's table (module->check_sites)
 * with the kind of check, the source place and, for an array access, the
 * array's name.  The back end tests each marked node at run time; a failure
 * writes the site's number and the operands into a record the runtime reads
 * back and turns into a message through this table.
 *
 * Needs: a checked, verified module.  Gives: the same module with sites
 * marked, once (module->checks_inserted); the IR's meaning is unchanged.
 * Kernels that the vectorize pass makes are skipped: their accesses are the
 * runtime's own broadcasting, in range by construction, and the scalar
 * function each one calls carries its own sites.
 *
 * What gets a site:
 *   - LOAD, STORE and atomics: each index against its axis's extent;
 *   - integer / and %: a divisor of zero, and MIN / -1 (no site when the
 *     divisor is a constant other than 0 and -1);
 *   - float-to-integer casts: NaN and values whose truncation the integer
 *     type cannot hold;
 *   - << and >>: counts outside 0 .. width-1 (none for a constant in range);
 *   - an integer raised to a signed integer power held in a variable: a
 *     negative exponent.
 *
 * Race checking (KJ_CHECKS_RACE) gives every LOAD a READ site, every STORE a
 * WRITE site and every atomic an ATOMIC site (race_site), local() arrays
 * included (the runtime knows their memory and leaves it alone), and every
 * barrier (syncthreads(), the warp and block collectives, syncgrid()) a
 * BARRIER site named after the built-in, so the runtime's race checker can
 * say where two conflicting accesses, or two diverging barriers, are.
 */
#include "kjit_compiler.h"

static int new_site(KjIrModule *module, KjCheckKind kind, KjLoc loc, const char *array,
                    const char *type)
{
    KjCheckSite *site = kj_arena_alloc(module->arena, sizeof *site);
    site->kind = kind;
    site->loc = loc;
    site->array = array;
    site->type = type;
    kj_vec_push(module->arena, &module->check_sites, site);
    return module->check_sites.count;
}

static const char *array_name(const KjIrExpr *array)
{
    if (array && array->op == KJ_IR_CONST_ARRAY)
        return array->const_array->name;
    return array && array->op == KJ_IR_VAR && array->var ? array->var->name : NULL;
}

/* A constant integer operand's value, as a signed 64-bit number. */
static bool constant_int(const KjIrExpr *e, int64_t *out)
{
    if (e->op != KJ_IR_CONST || !kj_type_is_int(e->type))
        return false;
    int bits = kj_type_int_bits(e->type);
    uint64_t v = e->const_int;
    if (bits < 64 && kj_type_is_signed(e->type))
        *out = (int64_t)(v << (64 - bits)) >> (64 - bits);
    else
        *out = (int64_t)v;
    return true;
}

/* The race sites, through the walk (ir.c) as the value checks: a site's
 * number is its place in module->sites, in the walk's order (each
 * expression after its operands, a store's write after its reads). */
static bool mark_race_expr(KjIrWalk *w, const KjIrExpr *node)
{
    KjIrModule *module = w->data;
    KjIrExpr *e = (KjIrExpr *)node; /* the one field it writes, which the walk does not read */
    switch (e->op) {
    case KJ_IR_LOAD:
        e->race_site = new_site(module, KJ_CHECK_READ, e->loc, array_name(e->args[0]), NULL);
        break;
    case KJ_IR_ATOMIC:
        e->race_site = new_site(module, KJ_CHECK_ATOMIC, e->loc, array_name(e->args[0]), NULL);
        break;
    case KJ_IR_SYNCTHREADS:
        e->race_site = new_site(module, KJ_CHECK_BARRIER, e->loc, "syncthreads", NULL);
        break;
    case KJ_IR_EXEC:
        if (kj_exec_is_barrier[e->exec])
            e->race_site = new_site(module, KJ_CHECK_BARRIER, e->loc, kj_exec_names[e->exec], NULL);
        break;
    default:
        break;
    }
    return true;
}

static KjIrWalkStep mark_race_stmt(KjIrWalk *w, const KjIrStmt *node)
{
    KjIrModule *module = w->data;
    KjIrStmt *s = (KjIrStmt *)node;
    if (s->kind == KJ_IR_STMT_STORE)
        s->race_site = new_site(module, KJ_CHECK_WRITE, s->array ? s->array->loc : s->loc,
                                array_name(s->array), NULL);
    return KJ_IR_WALK_ON;
}

/* The walk (ir.c) shows the nodes as const; this pass marks them, the one
 * field of theirs it writes, which the walk does not read. */
static bool mark_expr(KjIrWalk *w, const KjIrExpr *node)
{
    KjIrModule *module = w->data;
    KjIrExpr *e = (KjIrExpr *)node;
    int64_t k;
    switch (e->op) {
    case KJ_IR_LOAD:
        if (!e->contiguous)
            e->check_site = new_site(module, KJ_CHECK_INDEX, e->loc, array_name(e->args[0]), NULL);
        return true;
    case KJ_IR_ATOMIC:
        e->check_site = new_site(module, KJ_CHECK_INDEX, e->loc, array_name(e->args[0]), NULL);
        return true;
    case KJ_IR_DIV:
    case KJ_IR_REM:
        if (!kj_type_is_int(e->type))
            return true;
        if (constant_int(e->args[1], &k) && k != 0 && !(k == -1 && kj_type_is_signed(e->type)))
            return true;
        e->check_site = new_site(module, KJ_CHECK_DIVIDE, e->loc, NULL, kj_type_name(e->type));
        return true;
    case KJ_IR_CAST:
        if (kj_type_is_float(e->args[0]->type) && kj_type_is_int(e->type))
            e->check_site = new_site(module, KJ_CHECK_CONVERT, e->loc, NULL, kj_type_name(e->type));
        return true;
    case KJ_IR_SHL:
    case KJ_IR_SHR:
        if (constant_int(e->args[1], &k) && k >= 0 && k < kj_type_int_bits(e->type))
            return true;
        e->check_site = new_site(module, KJ_CHECK_SHIFT, e->loc, NULL,
                                 kj_type_name(e->args[1]->type));
        return true;
    case KJ_IR_IPOW:
        if (kj_type_is_int(e->type) && e->args[1]->op != KJ_IR_CONST &&
            kj_type_is_signed(e->args[1]->type))
            e->check_site = new_site(module, KJ_CHECK_POWER, e->loc, NULL, NULL);
        return true;
    default:
        return true;
    }
}

/* After the statement's own expressions (the stored value after the
 * indices: the order code generation evaluates them in), as the walk has it. */
static KjIrWalkStep mark_stmt(KjIrWalk *w, const KjIrStmt *node)
{
    KjIrModule *module = w->data;
    KjIrStmt *s = (KjIrStmt *)node;
    if (s->kind == KJ_IR_STMT_STORE && !s->contiguous)
        /* at the array's name: the statement's own place is its `=` */
        s->check_site = new_site(module, KJ_CHECK_INDEX, s->array ? s->array->loc : s->loc,
                                 array_name(s->array), NULL);
    return KJ_IR_WALK_ON;
}

void kj_checks_insert(KjIrModule *module, int checks)
{
    bool values = (checks & KJ_CHECKS_VALUES) && !module->checks_inserted;
    bool races = (checks & KJ_CHECKS_RACE) && !module->races_inserted;
    module->checks_inserted = module->checks_inserted || values;
    module->races_inserted = module->races_inserted || races;
    KjIrWalk walk = {.stmt = mark_stmt, .expr = mark_expr, .data = module};
    KjIrWalk race_walk = {.stmt = mark_race_stmt, .expr = mark_race_expr, .data = module};
    for (int i = 0; i < module->functions.count; i++) {
        KjIrFunction *fn = module->functions.items[i];
        if (fn->kind == KJ_IR_FN_VEC_KERNEL)
            continue;
        if (values)
            kj_ir_walk_stmt(&walk, fn->body);
        if (races)
            kj_ir_walk_stmt(&race_walk, fn->body);
    }
}
