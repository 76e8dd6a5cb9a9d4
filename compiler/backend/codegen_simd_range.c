/*
 * codegen_simd_range.c: the values an integer expression can take, for the
 * SIMD lowering's narrowing rules (codegen_simd_expr.c).  Hosts without
 * AVX-512 have no 64-bit lane multiply and no conversion between 64-bit
 * integers and f64; when every value of an operand is known to lie in a
 * smaller range, a cheaper sequence gives the same bits:
 *   - a 64-bit product of two operands in [-2^31, 2^31) is the product of
 *     their low halves sign-extended (one vpmuldq), and never wraps;
 *   - an integer in [-2^51, 2^51) is exactly f64(x) = bits(x + B) - B', B
 *     the bits of 1.5 * 2^52 (no carry reaches the exponent) and B' that
 *     double, subtracted exactly (+0.0 for 0, as the conversion gives).
 *
 * The ranges are intervals, one per expression, that hold in every lane and
 * on every run: constants; threadIdx in [0, KJ_MAX_BLOCK_THREADS) and
 * blockDim in [1, KJ_MAX_BLOCK_THREADS] (kjit_launch refuses larger blocks
 * and kj_cpu_run_kernel checks again); a cast that keeps every value of
 * its operand; +, -, * and negation whose exact result fits the type (so no
 * lane wraps); & with a non-negative side; a select's two sides; a
 * variable's every assignment (flow-insensitive, 0 included for safety),
 * and a `for` counter's bounds when the loop is its only writer and the
 * step a constant.  Anything else, and a variable that depends on itself,
 * has its type's whole range: the answer is always sound, only sometimes
 * loose.  Results are computed in 128 bits, where no bound of a 64-bit
 * product overflows (operands above 2^63 in size give up first).
 */
#include "codegen_simd.h"

typedef __int128 Wide;

typedef struct Span {
    Wide lo, hi;
} Span;

/* A variable's span, computed once per lowering (var id -> state). */
enum { SPAN_UNKNOWN, SPAN_VISITING, SPAN_DONE };
struct SimdRanges {
    int count;
    unsigned char *state;
    Span *spans;
};

static Span type_span(const KjType *t)
{
    if (t->kind == KJ_TYPE_BOOL)
        return (Span){0, 1};
    int bits = kj_type_int_bits(t);
    if (kj_type_is_signed(t))
        return (Span){-((Wide)1 << (bits - 1)), ((Wide)1 << (bits - 1)) - 1};
    return (Span){0, ((Wide)1 << bits) - 1};
}

static bool is_int_type(const KjType *t) { return t && (t->kind == KJ_TYPE_BOOL || kj_type_is_int(t)); }

/* r when it lies inside t's range, else t's range: what a value of type t
 * that would mathematically be r can be (a wrapped one, when it does not). */
static Span within(Span r, const KjType *t)
{
    Span full = type_span(t);
    return r.lo >= full.lo && r.hi <= full.hi ? r : full;
}

static Span join(Span a, Span b) { return (Span){a.lo < b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi}; }

static Wide min4(Wide a, Wide b, Wide c, Wide d)
{
    Wide m = a < b ? a : b;
    m = m < c ? m : c;
    return m < d ? m : d;
}

static Wide max4(Wide a, Wide b, Wide c, Wide d)
{
    Wide m = a > b ? a : b;
    m = m > c ? m : c;
    return m > d ? m : d;
}

static Span expr_span(Simd *s, const KjIrExpr *e, int depth);

static Span var_span(Simd *s, const KjIrVar *v, int depth);

/* ---- a variable's writers */

typedef struct Writers {
    Simd *s;
    const KjIrVar *var;
    int depth;
    Span span;
    bool unknown; /* some writer we cannot bound */
    bool in_for;  /* a `for` counts with it */
    int sets;
} Writers;

static Span for_span(Simd *s, const KjIrStmt *st, int depth)
{
    const KjType *t = st->var->type;
    if (!st->step || st->step->op != KJ_IR_CONST || !is_int_type(st->step->type))
        return type_span(t);
    Span step = within(expr_span(s, st->step, depth), st->step->type);
    if (step.lo != step.hi || step.lo == 0)
        return type_span(t);
    Span start = expr_span(s, st->start, depth), stop = expr_span(s, st->stop, depth);
    Span full = type_span(t);
    /* the body sees [start, stop) (or (stop, start] going down); the
     * counter ends one step past its last value, or at start */
    Span r;
    if (step.lo > 0) {
        Wide last = stop.hi - 1 + step.lo;
        if (last > full.hi)
            return full; /* the counter could wrap and go round again */
        r = (Span){start.lo, start.hi > last ? start.hi : last};
    } else {
        Wide last = stop.lo + 1 + step.lo;
        if (last < full.lo)
            return full;
        r = (Span){start.lo < last ? start.lo : last, start.hi};
    }
    return within(r, t);
}

/* The walk's hook (ir.c): every statement that assigns w->var, in the
 * order the function has them. */
static KjIrWalkStep find_writer(KjIrWalk *walk, const KjIrStmt *st)
{
    Writers *w = walk->data;
    /* a call of several outputs (vectorize.c) sets its variables: any value */
    const KjIrExpr *call = st->value;
    if (call && call->op == KJ_IR_CALL && call->call_outputs)
        for (int k = 1; k < call->callee->output_count; k++)
            if (call->call_outputs[k] == w->var) {
                w->sets++;
                w->span = join(w->span, type_span(w->var->type));
            }
    if (st->var != w->var)
        return KJ_IR_WALK_ON;
    switch (st->kind) {
    case KJ_IR_STMT_SET:
        w->sets++;
        w->span = join(w->span, within(expr_span(w->s, st->value, w->depth), w->var->type));
        break;
    case KJ_IR_STMT_FOR:
        w->in_for = true;
        w->span = join(w->span, for_span(w->s, st, w->depth));
        break;
    case KJ_IR_STMT_PARFOR: {
        Span stop = expr_span(w->s, st->stop, w->depth);
        w->span = join(w->span, within((Span){0, stop.hi > 0 ? stop.hi - 1 : 0}, w->var->type));
        break;
    }
    default:
        break;
    }
    return KJ_IR_WALK_ON;
}

static void find_writers(Writers *w, const KjIrStmt *st)
{
    KjIrWalk walk = {.stmt = find_writer, .data = w};
    kj_ir_walk_stmt(&walk, st);
}

static Span var_span(Simd *s, const KjIrVar *v, int depth)
{
    const KjType *t = v->type;
    if (!is_int_type(t) || v->is_param || !s->fn)
        return type_span(t);
    if (!s->ranges) {
        s->ranges = kj_arena_alloc(&s->arena, sizeof *s->ranges);
        s->ranges->count = s->fn->locals.count;
        s->ranges->state = kj_arena_alloc(&s->arena, (size_t)s->ranges->count + 1);
        s->ranges->spans = kj_arena_alloc(&s->arena, sizeof(Span) * ((size_t)s->ranges->count + 1));
    }
    struct SimdRanges *r = s->ranges;
    if (v->id < 0 || v->id >= r->count)
        return type_span(t);
    if (r->state[v->id] == SPAN_DONE)
        return r->spans[v->id];
    if (r->state[v->id] == SPAN_VISITING)
        return type_span(t); /* it depends on itself */
    r->state[v->id] = SPAN_VISITING;
    Writers w = {.s = s, .var = v, .depth = depth + 1, .span = {0, 0}};
    find_writers(&w, s->fn->body);
    /* a counter that the body also assigns can go anywhere */
    Span span = w.in_for && w.sets > 0 ? type_span(t) : w.span;
    r->spans[v->id] = span;
    r->state[v->id] = SPAN_DONE;
    return span;
}

/* The walk's hook: whether a statement other than the for loop (the
 * data) assigns its counter. */
static KjIrWalkStep stop_at_other_writer(KjIrWalk *walk, const KjIrStmt *st)
{
    const KjIrStmt *loop = walk->data;
    return st != loop && st->var == loop->var && st->kind != KJ_IR_STMT_PARFOR ? KJ_IR_WALK_STOP : KJ_IR_WALK_ON;
}

/* A for counter read in the body of its loop (st, being emitted, checked
 * mode): within [start, stop) going up by a constant step, when nothing
 * else assigns it; else as everywhere. */
static Span body_span(Simd *s, const KjIrStmt *st, int depth)
{
    const KjType *t = st->var->type;
    KjIrWalk walk = {.stmt = stop_at_other_writer, .data = (void *)st};
    if (!st->step || st->step->op != KJ_IR_CONST || !is_int_type(st->step->type) ||
        !kj_ir_walk_stmt(&walk, s->fn->body))
        return var_span(s, st->var, depth);
    Span step = within(expr_span(s, st->step, depth + 1), st->step->type);
    if (step.lo != step.hi || step.lo <= 0)
        return var_span(s, st->var, depth);
    Span start = expr_span(s, st->start, depth + 1), stop = expr_span(s, st->stop, depth + 1);
    if (stop.hi - 1 < start.lo)
        return var_span(s, st->var, depth);
    return within((Span){start.lo, stop.hi - 1}, t);
}

/* ---- expressions */

static Span const_span(const KjIrExpr *e)
{
    const KjType *t = e->type;
    if (t->kind == KJ_TYPE_BOOL)
        return (Span){e->const_int != 0, e->const_int != 0};
    int bits = kj_type_int_bits(t);
    uint64_t v = bits == 64 ? e->const_int : e->const_int & ((1ull << bits) - 1);
    if (kj_type_is_signed(t) && bits < 64 && (v >> (bits - 1)) & 1)
        return (Span){(Wide)v - ((Wide)1 << bits), (Wide)v - ((Wide)1 << bits)};
    if (kj_type_is_signed(t) && bits == 64)
        return (Span){(int64_t)v, (int64_t)v};
    return (Span){v, v};
}

/* a and b at most 2^63 in size, so that no bound of their product leaves
 * 128 bits */
static bool small_enough(Span a, Span b)
{
    const Wide lim = (Wide)1 << 63;
    return a.lo >= -lim && a.hi <= lim && b.lo >= -lim && b.hi <= lim;
}

static Span expr_span(Simd *s, const KjIrExpr *e, int depth)
{
    const KjType *t = e->type;
    if (!is_int_type(t))
        return (Span){0, 0}; /* not asked: callers only ask about integers */
    Span full = type_span(t);
    if (depth > 24)
        return full;
    switch (e->op) {
    case KJ_IR_CONST:
        return const_span(e);
    case KJ_IR_VAR:
        for (int i = s->for_depth - 1; i >= 0; i--)
            if (s->for_stack[i]->var == e->var)
                return body_span(s, s->for_stack[i], depth);
        return var_span(s, e->var, depth);
    case KJ_IR_SREG:
        switch (e->sreg) {
        case KJ_SREG_TID_X: case KJ_SREG_TID_Y: case KJ_SREG_TID_Z: {
            /* below the launch's block dims where the code is made for them,
             * and x below the end of the threads a region runs */
            int k = e->sreg - KJ_SREG_TID_X;
            int64_t end = s->g->options->block_dims[k] ? s->g->options->block_dims[k] : KJ_MAX_BLOCK_THREADS;
            if (k == 0 && s->tid_x_end > 0 && s->tid_x_end < end)
                end = s->tid_x_end;
            return within((Span){0, end - 1}, t);
        }
        case KJ_SREG_BDIM_X: case KJ_SREG_BDIM_Y: case KJ_SREG_BDIM_Z:
            return within((Span){1, KJ_MAX_BLOCK_THREADS}, t);
        default:
            return full;
        }
    case KJ_IR_CAST:
        if (!is_int_type(e->args[0]->type))
            return full;
        return within(expr_span(s, e->args[0], depth + 1), t);
    case KJ_IR_NEG: {
        Span a = expr_span(s, e->args[0], depth + 1);
        return within((Span){-a.hi, -a.lo}, t);
    }
    case KJ_IR_ADD: case KJ_IR_SUB: case KJ_IR_MUL: {
        if (e->args[0]->type != t || e->args[1]->type != t)
            return full;
        Span a = expr_span(s, e->args[0], depth + 1), b = expr_span(s, e->args[1], depth + 1);
        if (e->op == KJ_IR_ADD)
            return within((Span){a.lo + b.lo, a.hi + b.hi}, t);
        if (e->op == KJ_IR_SUB)
            return within((Span){a.lo - b.hi, a.hi - b.lo}, t);
        if (!small_enough(a, b))
            return full;
        Wide p1 = a.lo * b.lo, p2 = a.lo * b.hi, p3 = a.hi * b.lo, p4 = a.hi * b.hi;
        return within((Span){min4(p1, p2, p3, p4), max4(p1, p2, p3, p4)}, t);
    }
    case KJ_IR_BITAND: {
        if (e->args[0]->type != t || e->args[1]->type != t)
            return full;
        Span a = expr_span(s, e->args[0], depth + 1), b = expr_span(s, e->args[1], depth + 1);
        if (a.lo >= 0 && b.lo >= 0)
            return (Span){0, a.hi < b.hi ? a.hi : b.hi};
        if (a.lo >= 0)
            return (Span){0, a.hi};
        if (b.lo >= 0)
            return (Span){0, b.hi};
        return full;
    }
    case KJ_IR_SELECT:
        if (e->args[1]->type != t || e->args[2]->type != t)
            return full;
        return join(expr_span(s, e->args[1], depth + 1), expr_span(s, e->args[2], depth + 1));
    default:
        return full;
    }
}

bool kj_simd_fits(Simd *s, const KjIrExpr *e, int64_t lo, int64_t hi)
{
    if (!is_int_type(e->type))
        return false;
    Span r = expr_span(s, e, 0);
    return r.lo >= lo && r.hi <= hi;
}
