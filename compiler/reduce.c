/*
 * reduce.c: the reduce pass, which lifts the SCALAR function f(a: T, b: T)
 * -> T of a @reduce into a kernel for one level of the fixed reduction tree.
 *
 * Needs: a checked module, one SCALAR signature of a @reduce (its two
 * parameters and its result of one type T, as check_reduce.c guarantees) and,
 * for the first level of a fused @reduce(map = g), g's SCALAR signature that
 * returns T.
 * Gives: a new kernel appended to the module (callees before callers still
 * holds) with the parameters kjit_compiler.h lists under kj_reduce_lift, in
 * which each work item reduces one block c of the reduced elements of one
 * output k and stores the block's value in out[k chunks + c] (a contiguous
 * level numbers its work items w = k chunks + c; a strided one
 * w = c outputs + k, neighbouring outputs side by side):
 *     block c of an output: its elements t in [c B, min((c + 1) B, m)), in C
 *                  order of the reduced dimensions;
 *     lanes:       lane j (0 <= j < L) takes the elements j, j + L, j + 2L ...
 *                  of the block, in that order: lane = x[j], then
 *                  lane = f(lane, x[j + i L]) for i = 1, 2 ...;
 *     tree:        for s = L/2, L/4 ... 1: lane[j] = f(lane[j], lane[j + s])
 *                  for every j < s whose partner lane holds a value;
 *     value:       lane[0], and f(init, lane[0]) at the last level when the
 *                  caller gives an initial value.
 * The LANES form is a VEC_KERNEL whose PARFOR walks the work items, each with
 * its L lanes as L local variables (the loads of one step are consecutive in
 * a contiguous input; with `simd` the lanes sit in a local array under an
 * inner loop over the L lanes that the back end vectorises whole, so they
 * stay in vector registers across the steps: IEEE operations, no
 * reassociation).  The WARPS form is a KERNEL for cuda in which G threads of
 * a warp take one work item: with V = L / G lanes a thread
 * (kj_reduce_thread_lanes) thread g holds lanes V g .. V g + V - 1, reads
 * its V consecutive elements of a step as one vector where the variant is
 * aligned, and the tree's steps across threads are warp shuffles; for a T
 * no shuffle moves, one lane a thread and the tree in shared memory between
 * barriers.  The COLUMNS form is a KERNEL for cuda's strided levels: a
 * thread block takes 32 neighbouring work items (neighbouring outputs) and
 * G = L / V threads each (kj_reduce_column_lanes), thread g of an item
 * holding lanes V g .. V g + V - 1, so that a warp is one lane group of 32
 * neighbouring outputs whose loads fall side by side; the tree's steps
 * across threads go through shared memory, one barrier a step.  Every form
 * computes the same operations in the same order, so their results are the
 * same bits.
 */
#include "kjit_compiler.h"

#include <stdio.h>
#include <string.h>

#define MAX_INPUTS 32

typedef struct Lift {
    KjArena *arena;
    KjIrModule *module;
    KjIrFunction *fn;
    KjLoc loc;
    KjIrFunction *combine, *map;
    KjReduceVariant v;
    const KjType *t; /* T */
    int n_in;
    KjIrVar *in[MAX_INPUTS], *out;
    KjIrVar *items, *chunks, *m, *has_init, *init;
    KjIrVar *ke[KJ_MAX_DIMS], *re[KJ_MAX_DIMS];
    KjIrVar *ks[MAX_INPUTS][KJ_MAX_DIMS], *rs[MAX_INPUTS][KJ_MAX_DIMS];
    KjIrVar *off[MAX_INPUTS];   /* each input's offset of the current output */
    KjIrVar *coord[KJ_MAX_DIMS]; /* scratch: coordinates peeled off an index */
    KjVec *body;                /* where statements go */
    bool aligned_group;         /* element(): its loads start a thread's aligned group
                                   of V elements */
} Lift;

/* ---------------------------------------------------------------- builders */

static const KjType *i64_type(void) { return kj_type_scalar(KJ_TYPE_I64); }
static const KjType *bool_type(void) { return kj_type_scalar(KJ_TYPE_BOOL); }

static KjIrVar *new_var(Lift *l, const char *name, const KjType *type)
{
    return kj_ir_new_var(l->arena, l->fn, name, type, l->loc);
}

static KjIrVar *new_param(Lift *l, const char *name, const KjType *type)
{
    KjIrVar *p = new_var(l, name, type);
    p->is_param = true;
    return p;
}

/* ir.c's builders with the lift's arena and location. */
static KjIrExpr *ref(Lift *l, KjIrVar *var) { return kj_ir_var_ref(l->arena, var, l->loc); }

static KjIrExpr *int_const(Lift *l, const KjType *type, int64_t value)
{
    return kj_ir_int_const(l->arena, type, value, l->loc);
}

static KjIrExpr *i64(Lift *l, int64_t value) { return int_const(l, i64_type(), value); }

static KjIrExpr *zero_of(Lift *l, const KjType *type)
{
    KjIrExpr *e = kj_ir_new_expr(l->arena, KJ_IR_CONST, type, l->loc, 0);
    return e; /* const_int, const_float and const_imag are all zero */
}

static KjIrExpr *op2(Lift *l, KjIrOp op, const KjType *type, KjIrExpr *a, KjIrExpr *b)
{
    return kj_ir_binary(l->arena, op, type, l->loc, a, b);
}

static KjIrExpr *add(Lift *l, KjIrExpr *a, KjIrExpr *b) { return op2(l, KJ_IR_ADD, i64_type(), a, b); }
static KjIrExpr *mul(Lift *l, KjIrExpr *a, KjIrExpr *b) { return op2(l, KJ_IR_MUL, i64_type(), a, b); }
static KjIrExpr *less(Lift *l, KjIrExpr *a, KjIrExpr *b) { return op2(l, KJ_IR_LT, bool_type(), a, b); }

/* A second node for the same value (expressions are trees). */
static KjIrExpr *copy(Lift *l, const KjIrExpr *e)
{
    KjIrExpr *c = kj_arena_alloc(l->arena, sizeof *c);
    *c = *e;
    return c;
}

static KjIrExpr *min_i64(Lift *l, KjIrExpr *a, KjIrExpr *b)
{
    KjIrExpr *e = kj_ir_new_expr(l->arena, KJ_IR_SELECT, i64_type(), l->loc, 3);
    e->args[0] = less(l, a, b);
    e->args[1] = copy(l, a);
    e->args[2] = copy(l, b);
    return e;
}

static KjIrExpr *combine(Lift *l, KjIrExpr *a, KjIrExpr *b)
{
    KjIrExpr *e = kj_ir_call(l->arena, l->combine, l->t, 2, l->loc);
    e->args[0] = a;
    e->args[1] = b;
    return e;
}

static KjIrExpr *load_flat(Lift *l, KjIrVar *array, KjIrExpr *index)
{
    return kj_ir_load(l->arena, ref(l, array), &index, 1, true, l->loc);
}

static void emit(Lift *l, KjIrStmt *s) { kj_vec_push(l->arena, l->body, s); }

static void set(Lift *l, KjIrVar *var, KjIrExpr *value) { emit(l, kj_ir_set(l->arena, var, value, l->loc)); }

static void store_flat(Lift *l, KjIrVar *array, KjIrExpr *index, KjIrExpr *value)
{
    emit(l, kj_ir_store(l->arena, ref(l, array), &index, 1, value, true, l->loc));
}

/* Opens a block that statements go to until close_block; returns the
 * previous destination. */
static KjVec *open_block(Lift *l, KjIrStmt **block)
{
    *block = kj_ir_new_stmt(l->arena, KJ_IR_STMT_BLOCK, l->loc);
    KjVec *saved = l->body;
    l->body = &(*block)->stmts;
    return saved;
}

/* if cond { ... }: the caller fills the returned block, then restores l->body. */
static KjVec *open_if(Lift *l, KjIrExpr *cond)
{
    KjIrStmt *s = kj_ir_new_stmt(l->arena, KJ_IR_STMT_IF, l->loc);
    s->cond = cond;
    emit(l, s);
    return open_block(l, &s->then_stmt);
}

/* for var in [start, stop) { ... } */
static KjVec *open_for(Lift *l, KjIrVar *var, KjIrExpr *start, KjIrExpr *stop)
{
    KjIrStmt *s = kj_ir_new_stmt(l->arena, KJ_IR_STMT_FOR, l->loc);
    s->var = var;
    s->start = start;
    s->stop = stop;
    s->step = i64(l, 1);
    emit(l, s);
    return open_block(l, &s->body);
}

/* for j in [0, width) over lanes, vectorised whole by the back end. */
static KjVec *open_lanes_for_width(Lift *l, KjIrVar *j, int width)
{
    KjVec *saved = open_for(l, j, i64(l, 0), i64(l, width));
    KjIrStmt *loop = saved->items[saved->count - 1];
    loop->simd_lanes = true;
    return saved;
}

/* for j in [0, L) over the lanes. */
static KjVec *open_lanes_for(Lift *l, KjIrVar *j) { return open_lanes_for_width(l, j, KJ_REDUCE_LANES); }

/* for j in [0, L) over the lanes, each loading an element: in a strided
 * level the loop stays scalar (KjIrStmt.lanes_scalar), where LLVM would
 * vectorise it for a unit stride only, behind a test of the stride, and
 * the runtime never runs a strided level with unit strides (a level whose
 * inputs all have one is a contiguous level: api_reduce.c). */
static KjVec *open_element_lanes_for(Lift *l, KjIrVar *j)
{
    KjVec *saved = open_lanes_for(l, j);
    if (!l->v.contiguous && !kj_reduce_knobs().strided_vector) {
        KjIrStmt *loop = saved->items[saved->count - 1];
        loop->lanes_scalar = true;
    }
    return saved;
}

/* ---------------------------------------------------------------- the body */

/* Peels the coordinates of `index` off the extents (last dimension fastest)
 * into l->coord[0..rank). */
static void peel(Lift *l, KjIrExpr *index, KjIrVar **extents, int rank)
{
    KjIrVar *rest = new_var(l, "rest", i64_type());
    set(l, rest, index);
    for (int d = rank - 1; d >= 0; d--) {
        if (d == 0) {
            set(l, l->coord[d], ref(l, rest));
        } else {
            set(l, l->coord[d], op2(l, KJ_IR_REM, i64_type(), ref(l, rest), ref(l, extents[d])));
            set(l, rest, op2(l, KJ_IR_DIV, i64_type(), ref(l, rest), ref(l, extents[d])));
        }
    }
}

/* The value of reduced element t (an i64 expression, the flat index in the
 * output's reduced space) of the current output: an input's element, or the
 * map applied to the inputs' elements. */
static KjIrExpr *element(Lift *l, KjIrExpr *t)
{
    bool peeled = !l->v.contiguous && l->v.reduced_rank > 1;
    if (peeled)
        peel(l, t, l->re, l->v.reduced_rank);
    KjIrExpr *loads[MAX_INPUTS];
    for (int q = 0; q < l->n_in; q++) {
        KjIrExpr *offset;
        KjIrExpr *tq = copy(l, t);
        if (l->v.contiguous) {
            offset = tq;
        } else if (!peeled) {
            offset = mul(l, tq, ref(l, l->rs[q][0]));
        } else {
            offset = mul(l, ref(l, l->coord[0]), ref(l, l->rs[q][0]));
            for (int d = 1; d < l->v.reduced_rank; d++)
                offset = add(l, offset, mul(l, ref(l, l->coord[d]), ref(l, l->rs[q][d])));
        }
        loads[q] = load_flat(l, l->in[q], add(l, ref(l, l->off[q]), offset));
        if (l->aligned_group)
            loads[q]->align_bytes = l->v.thread_lanes * (int)kj_type_size(l->in[q]->type->elem);
    }
    if (!l->v.mapped)
        return loads[0];
    KjIrExpr *call = kj_ir_call(l->arena, l->map, l->t, l->n_in, l->loc);
    for (int q = 0; q < l->n_in; q++)
        call->args[q] = loads[q];
    return call;
}

/* An i64 expression that is a variable reference or a constant: `element`
 * copies such a node once per input. */
static KjIrExpr *index_var(Lift *l, const char *name, KjIrExpr *value)
{
    KjIrVar *var = new_var(l, name, i64_type());
    set(l, var, value);
    return ref(l, var);
}

/* Sets l->off[q] for output k (an i64 variable): the sum of k's kept
 * coordinates times input q's kept strides. */
static void output_offsets(Lift *l, KjIrVar *k)
{
    if (l->v.kept_rank > 0)
        peel(l, ref(l, k), l->ke, l->v.kept_rank);
    for (int q = 0; q < l->n_in; q++) {
        KjIrExpr *offset = i64(l, 0);
        for (int d = 0; d < l->v.kept_rank; d++)
            offset = add(l, offset, mul(l, ref(l, l->coord[d]), ref(l, l->ks[q][d])));
        set(l, l->off[q], offset);
    }
}

/* Work item w's output k, its block `chunk` and the `slot` of out its value
 * goes to: a contiguous level numbers the items w = k chunks + chunk; a
 * strided one w = chunk outputs + k, so that neighbouring work items take
 * neighbouring outputs of one chunk (on a GPU a warp's loads of a step then
 * fall side by side when the kept dimension is the fast one: the columns of
 * a sum along axis 0); the value still goes to out[k chunks + chunk]. */
static void item_coords(Lift *l, KjIrVar *w, KjIrVar *k, KjIrVar *chunk, KjIrVar *slot)
{
    if (l->v.contiguous && l->v.kept_rank == 0 && l->v.form == KJ_REDUCE_FORM_WARPS &&
        !kj_reduce_knobs().warps_main) {
        /* one output (no kept dimension): its blocks are the work items, and
         * no division by chunks, which ptxas writes out as a 64-bit
         * subroutine of its own (a fifth of its time on the f32 form) */
        set(l, k, i64(l, 0));
        set(l, chunk, ref(l, w));
        set(l, slot, ref(l, w));
    } else if (l->v.contiguous) {
        set(l, k, op2(l, KJ_IR_DIV, i64_type(), ref(l, w), ref(l, l->chunks)));
        set(l, chunk, op2(l, KJ_IR_SUB, i64_type(), ref(l, w), mul(l, ref(l, k), ref(l, l->chunks))));
        set(l, slot, ref(l, w));
    } else {
        KjIrVar *outputs = new_var(l, "outputs", i64_type());
        set(l, outputs, op2(l, KJ_IR_DIV, i64_type(), ref(l, l->items), ref(l, l->chunks)));
        set(l, chunk, op2(l, KJ_IR_DIV, i64_type(), ref(l, w), ref(l, outputs)));
        set(l, k, op2(l, KJ_IR_SUB, i64_type(), ref(l, w), mul(l, ref(l, chunk), ref(l, outputs))));
        set(l, slot, add(l, mul(l, ref(l, k), ref(l, l->chunks)), ref(l, chunk)));
    }
}

/* The opening of the WARPS and COLUMNS forms' work item w: an IF w < items
 * (returned is the list to go back to after it), its output k, block chunk
 * and out's slot (set in `slot`), the inputs' offsets for k, the block's
 * first element `start`, its `count` of elements and in `ne` how many of the
 * L lanes have one. */
static KjVec *open_work_item(Lift *l, KjIrVar *w, KjIrVar *slot, KjIrVar *ne,
                             KjIrVar **start_out, KjIrVar **count_out)
{
    const int L = KJ_REDUCE_LANES, B = KJ_REDUCE_BLOCK;
    KjVec *saved = open_if(l, less(l, ref(l, w), ref(l, l->items)));
    KjIrVar *k = new_var(l, "k", i64_type()), *chunk = new_var(l, "chunk", i64_type());
    KjIrVar *start = new_var(l, "start", i64_type()), *count = new_var(l, "count", i64_type());
    item_coords(l, w, k, chunk, slot);
    output_offsets(l, k);
    set(l, start, mul(l, ref(l, chunk), i64(l, B)));
    set(l, count, min_i64(l, i64(l, B), op2(l, KJ_IR_SUB, i64_type(), ref(l, l->m), ref(l, start))));
    set(l, ne, min_i64(l, ref(l, count), i64(l, L)));
    *start_out = start;
    *count_out = count;
    return saved;
}

/* The lane tree over lane[0..L), each combining step taken only when the
 * partner holds a value (`ne`, a variable holding how many lanes do, or NULL
 * when all do). */
static void lane_tree(Lift *l, KjIrVar **lane, KjIrVar *ne)
{
    for (int s = KJ_REDUCE_LANES / 2; s >= 1; s /= 2) {
        for (int j = 0; j < s; j++) {
            KjVec *saved = NULL;
            if (ne)
                saved = open_if(l, less(l, i64(l, j + s), ref(l, ne)));
            set(l, lane[j], combine(l, ref(l, lane[j]), ref(l, lane[j + s])));
            if (ne)
                l->body = saved;
        }
        if (ne)
            set(l, ne, min_i64(l, ref(l, ne), i64(l, s)));
    }
}

/* The lane tree over the local array `lanes` (its L elements the lanes), in
 * place: each step one loop over the s lanes it writes, vectorised whole
 * (one vector operation a step, where the tree over L variables is L - 1
 * scalar calls that LLVM's SLP vectoriser has to put back together, at some
 * cost in compile time).  `ne` as lane_tree's, or NULL when all lanes hold
 * values.  The same operations in the same order as lane_tree. */
static void lane_array_tree(Lift *l, KjIrVar *lanes, KjIrVar *ne)
{
    for (int s = KJ_REDUCE_LANES / 2; s >= 1; s /= 2) {
        if (s < 4) {
            /* the last steps (2 lanes, 1) written out: asked for vectors so
             * narrow, LLVM's vectoriser may decline and say so on stderr,
             * and as loops they cost its loop passes for nothing */
            for (int j = 0; j < s; j++) {
                KjVec *saved = NULL;
                if (ne)
                    saved = open_if(l, less(l, i64(l, j + s), ref(l, ne)));
                store_flat(l, lanes, i64(l, j),
                           combine(l, load_flat(l, lanes, i64(l, j)), load_flat(l, lanes, i64(l, j + s))));
                if (ne)
                    l->body = saved;
            }
            if (ne)
                set(l, ne, min_i64(l, ref(l, ne), i64(l, s)));
            continue;
        }
        KjIrVar *j = new_var(l, "j", i64_type());
        KjVec *loop = open_lanes_for_width(l, j, s);
        KjVec *saved = NULL;
        if (ne)
            saved = open_if(l, less(l, add(l, ref(l, j), i64(l, s)), ref(l, ne)));
        store_flat(l, lanes, ref(l, j),
                   combine(l, load_flat(l, lanes, ref(l, j)), load_flat(l, lanes, add(l, ref(l, j), i64(l, s)))));
        if (ne)
            l->body = saved;
        l->body = loop;
        if (ne)
            set(l, ne, min_i64(l, ref(l, ne), i64(l, s)));
    }
}

/* A local array of L elements of T, in a new variable. */
static KjIrVar *local_lanes(Lift *l, const char *name)
{
    KjIrVar *lanes = new_var(l, name, kj_type_array(l->t, 1));
    KjIrExpr *alloc = kj_ir_new_expr(l->arena, KJ_IR_LOCAL, lanes->type, l->loc, 0);
    alloc->alloc_elem = l->t;
    alloc->alloc_ndim = 1;
    alloc->alloc_shape[0] = KJ_REDUCE_LANES;
    set(l, lanes, alloc);
    return lanes;
}

/* simd_lanes_body's tree as a function of the module, `<combine>__lanetree(lanes:
 * T[], ne: i64) -> T`: lane_array_tree over the first ne lanes of the array, then
 * lane 0.  Every level of the combine (the contiguous and strided ones of a
 * file's @reduce, each fused map's) calls the one function, which the cpu back
 * end keeps out of line (noinline), so that LLVM compiles the tree once a
 * combine where it compiled it once a level: the levels differ in how they
 * load their elements, not in their tree (examples/reduce.kern: 12 trees, not
 * 24).  The same operations in the same order, so the same bits; a call an
 * output block, its lanes through memory once. */
static KjIrFunction *shared_lane_tree(Lift *caller)
{
    KjIrModule *module = caller->module;
    const char *symbol = kj_arena_printf(caller->arena, "%s__lanetree", caller->combine->symbol);
    for (int i = 0; i < module->functions.count; i++) {
        KjIrFunction *existing = module->functions.items[i];
        if (existing->kind == KJ_IR_FN_PLAIN && existing->noinline &&
            strcmp(existing->symbol, symbol) == 0)
            return existing;
    }
    KjIrFunction *fn = kj_arena_alloc(caller->arena, sizeof *fn);
    fn->name = caller->combine->name;
    fn->symbol = symbol;
    fn->kind = KJ_IR_FN_PLAIN;
    fn->ret = caller->t;
    fn->loc = caller->combine->loc;
    fn->unchecked = true;
    fn->noinline = true;
    fn->call_depth = caller->combine->call_depth + 1;
    Lift tree = {.arena = caller->arena, .module = module, .fn = fn, .loc = caller->loc,
                 .combine = caller->combine, .t = caller->t};
    Lift *l = &tree;
    KjIrVar *lanes = new_param(l, "lanes", kj_type_array(l->t, 1));
    KjIrVar *count = new_param(l, "ne", i64_type());
    fn->param_count = 2;
    fn->params = kj_arena_alloc(l->arena, 2 * sizeof *fn->params);
    fn->params[0] = lanes;
    fn->params[1] = count;
    fn->body = kj_ir_new_stmt(l->arena, KJ_IR_STMT_BLOCK, l->loc);
    l->body = &fn->body->stmts;
    KjIrVar *ne = new_var(l, "holding", i64_type()); /* the tree lowers it step by step */
    set(l, ne, ref(l, count));
    lane_array_tree(l, lanes, ne);
    KjIrStmt *ret = kj_ir_new_stmt(l->arena, KJ_IR_STMT_RETURN, l->loc);
    ret->value = load_flat(l, lanes, i64(l, 0));
    emit(l, ret);
    kj_vec_push(l->arena, &module->functions, fn);
    return fn;
}

/* The LANES forms' start of work item w: its output's offsets, and
 * `start` and `count`, the first element of its block of one output and how
 * many of the block's KJ_REDUCE_BLOCK elements there are. */
static void block_of_item(Lift *l, KjIrVar *w, KjIrVar *slot, KjIrVar **start, KjIrVar **count)
{
    const int B = KJ_REDUCE_BLOCK;
    KjIrVar *k = new_var(l, "k", i64_type()), *chunk = new_var(l, "chunk", i64_type());
    *start = new_var(l, "start", i64_type());
    *count = new_var(l, "count", i64_type());
    item_coords(l, w, k, chunk, slot);
    output_offsets(l, k);
    set(l, *start, mul(l, ref(l, chunk), i64(l, B)));
    set(l, *count, min_i64(l, i64(l, B), op2(l, KJ_IR_SUB, i64_type(), ref(l, l->m), ref(l, *start))));
}

/* LANES without `simd`: the body of work item w: one block of one output,
 * its L lanes in L local variables; a full block takes a path without
 * tests. */
static void lanes_body(Lift *l, KjIrVar *w, KjIrVar *value, KjIrVar *slot)
{
    const int L = KJ_REDUCE_LANES, B = KJ_REDUCE_BLOCK;
    KjIrVar *start, *count;
    block_of_item(l, w, slot, &start, &count);

    KjIrVar *lane[KJ_REDUCE_LANES];
    for (int j = 0; j < L; j++)
        lane[j] = new_var(l, kj_arena_printf(l->arena, "lane%d", j), l->t);
    KjIrVar *tail = local_lanes(l, "tail");

    KjIrStmt *full = kj_ir_new_stmt(l->arena, KJ_IR_STMT_IF, l->loc);
    full->cond = op2(l, KJ_IR_EQ, bool_type(), ref(l, count), i64(l, B));
    emit(l, full);

    /* A full block, without tests. */
    KjVec *saved = open_block(l, &full->then_stmt);
    /* The lanes as L variables, the loop over steps holding L
     * independent chains (registers on a GPU). */
    for (int j = 0; j < L; j++) {
        KjIrExpr *t = index_var(l, "t", add(l, ref(l, start), i64(l, j)));
        set(l, lane[j], element(l, t));
    }
    KjIrVar *i = new_var(l, "i", i64_type());
    KjVec *outer = open_for(l, i, i64(l, 1), i64(l, B / L));
    KjIrVar *base = new_var(l, "base", i64_type());
    set(l, base, add(l, ref(l, start), mul(l, ref(l, i), i64(l, L))));
    for (int j = 0; j < L; j++) {
        KjIrExpr *t = index_var(l, "t", add(l, ref(l, base), i64(l, j)));
        set(l, lane[j], combine(l, ref(l, lane[j]), element(l, t)));
    }
    l->body = outer;
    lane_tree(l, lane, NULL);
    set(l, value, ref(l, lane[0]));
    l->body = saved;

    /* The last block of an output, shorter than B: element u goes to lane
     * u % L, and the tree skips the lanes that got none. */
    saved = open_block(l, &full->else_stmt);
    KjIrVar *u = new_var(l, "u", i64_type()), *j = new_var(l, "j", i64_type());
    KjVec *loop = open_for(l, u, i64(l, 0), ref(l, count));
    set(l, j, op2(l, KJ_IR_REM, i64_type(), ref(l, u), i64(l, L)));
    KjIrExpr *e = element(l, index_var(l, "t", add(l, ref(l, start), ref(l, u))));
    KjIrStmt *first = kj_ir_new_stmt(l->arena, KJ_IR_STMT_IF, l->loc);
    first->cond = less(l, ref(l, u), i64(l, L));
    emit(l, first);
    KjVec *branch = open_block(l, &first->then_stmt);
    store_flat(l, tail, ref(l, j), e);
    l->body = branch;
    branch = open_block(l, &first->else_stmt);
    store_flat(l, tail, ref(l, j), combine(l, load_flat(l, tail, ref(l, j)), copy(l, e)));
    l->body = branch;
    l->body = loop;
    for (int q = 0; q < L; q++)
        set(l, lane[q], zero_of(l, l->t));
    for (int q = 0; q < L; q++) {
        KjVec *in_if = open_if(l, less(l, i64(l, q), ref(l, count)));
        set(l, lane[q], load_flat(l, tail, i64(l, q)));
        l->body = in_if;
    }
    KjIrVar *ne = new_var(l, "ne", i64_type());
    set(l, ne, min_i64(l, ref(l, count), i64(l, L)));
    lane_tree(l, lane, ne);
    set(l, value, ref(l, lane[0]));
    l->body = saved;
}

/* One element a lane from start, in the first count lanes (every lane
 * where count is NULL): the first step. */
static void first_step(Lift *l, KjIrVar *lanes, KjIrVar *start, KjIrVar *count)
{
    KjIrVar *j = new_var(l, "j", i64_type());
    KjVec *inner = open_element_lanes_for(l, j);
    KjVec *in_count = count ? open_if(l, less(l, ref(l, j), ref(l, count))) : NULL;
    store_flat(l, lanes, ref(l, j), element(l, index_var(l, "t", add(l, ref(l, start), ref(l, j)))));
    if (in_count)
        l->body = in_count;
    l->body = inner;
}

/* The whole steps 1 .. steps after the first, each lane combining the
 * element L further on. */
static void whole_steps(Lift *l, KjIrVar *lanes, KjIrVar *start, KjIrVar *steps)
{
    const int L = KJ_REDUCE_LANES;
    KjIrVar *i = new_var(l, "i", i64_type()), *at = new_var(l, "at", i64_type());
    KjVec *outer = open_for(l, i, i64(l, 1), ref(l, steps));
    /* not unrolled: each step is one vector operation a lane chain, which
     * waits for the last; LLVM's four copies added 10% to the file's
     * compile time (examples/reduce.kern) for no speed */
    ((KjIrStmt *)outer->items[outer->count - 1])->unroll = -1;
    set(l, at, add(l, ref(l, start), mul(l, ref(l, i), i64(l, L))));
    KjIrVar *j = new_var(l, "j", i64_type());
    KjVec *inner = open_element_lanes_for(l, j);
    KjIrExpr *t = index_var(l, "t", add(l, ref(l, at), ref(l, j)));
    store_flat(l, lanes, ref(l, j), combine(l, load_flat(l, lanes, ref(l, j)), element(l, t)));
    l->body = inner;
    l->body = outer;
}

/* The rest's lanes: the first rest lanes combine the element at base + j. */
static void rest_lanes(Lift *l, KjIrVar *lanes, KjIrVar *base, KjIrVar *rest)
{
    KjIrVar *j = new_var(l, "j", i64_type());
    KjVec *inner = open_element_lanes_for(l, j);
    KjVec *in_rest = open_if(l, less(l, ref(l, j), ref(l, rest)));
    KjIrExpr *t = index_var(l, "t", add(l, ref(l, base), ref(l, j)));
    store_flat(l, lanes, ref(l, j), combine(l, load_flat(l, lanes, ref(l, j)), element(l, t)));
    l->body = in_rest;
    l->body = inner;
}

/* The steps of simd_lanes_body: the first, one element a lane for the
 * first min(count, L) lanes (all of them but in a block shorter than L),
 * the whole steps after it, then, after a whole first step, the rest's
 * lanes.  (main at 7638880 had a first step for a whole block and another
 * for a short one, lanes_steps_main: one masked first step for both is a
 * 32-lane loop less a kernel to compile, 6% of examples/reduce.kern's
 * instructions, at the cost of a test a lane once a block.) */
static void lanes_steps(Lift *l, KjIrVar *lanes, KjIrVar *start, KjIrVar *count, KjIrVar *steps,
                        KjIrVar *base, KjIrVar *rest)
{
    first_step(l, lanes, start, count);
    whole_steps(l, lanes, start, steps);
    /* the rest's lanes, after a whole first step */
    KjVec *saved = open_if(l, less(l, i64(l, 0), ref(l, steps)));
    rest_lanes(l, lanes, base, rest);
    l->body = saved;
}

/* KJIT_REDUCE_LANES_MAIN=1: lanes_steps as main at 7638880 made them. */
static void lanes_steps_main(Lift *l, KjIrVar *lanes, KjIrVar *start, KjIrVar *count, KjIrVar *steps,
                             KjIrVar *base, KjIrVar *rest)
{
    KjIrStmt *whole = kj_ir_new_stmt(l->arena, KJ_IR_STMT_IF, l->loc);
    whole->cond = less(l, i64(l, 0), ref(l, steps));
    emit(l, whole);
    /* count >= L: the first step, the whole ones, then the rest's lanes */
    KjVec *saved = open_block(l, &whole->then_stmt);
    first_step(l, lanes, start, NULL);
    whole_steps(l, lanes, start, steps);
    rest_lanes(l, lanes, base, rest);
    l->body = saved;
    /* count < L: one element a lane, for the first count lanes */
    saved = open_block(l, &whole->else_stmt);
    first_step(l, lanes, start, count);
    l->body = saved;
}

/* LANES with `simd`: the body of work item w, its L lanes in a local array
 * walked by loops over the L lanes that the back end vectorises whole
 * (simd_lanes): each lane an independent chain, all of them in vector
 * registers across the steps.  One path for every block: the steps in which
 * every lane has an element (count / L of them; 32 in a full block), then
 * one step of the rest (count % L), then the tree over the ne lanes that
 * hold a value; a block shorter than L is that one step.  A lane takes the
 * same elements in the same order as in the form without `simd`.  (A full
 * block had a path of its own, its steps' loop of a constant count, which
 * LLVM wrote out 31 times, and the last block a loop over its elements with
 * the lanes in L variables: twice the code to compile for no speed.) */
static void simd_lanes_body(Lift *l, KjIrVar *w, KjIrVar *value, KjIrVar *slot)
{
    const int L = KJ_REDUCE_LANES;
    KjIrVar *start, *count;
    block_of_item(l, w, slot, &start, &count);
    KjIrVar *lanes = local_lanes(l, "lanes");
    KjIrVar *steps = new_var(l, "steps", i64_type()), *rest = new_var(l, "rest", i64_type());
    KjIrVar *base = new_var(l, "base", i64_type());
    set(l, steps, op2(l, KJ_IR_DIV, i64_type(), ref(l, count), i64(l, L)));
    set(l, base, add(l, ref(l, start), mul(l, ref(l, steps), i64(l, L))));
    set(l, rest, op2(l, KJ_IR_SUB, i64_type(), ref(l, count), mul(l, ref(l, steps), i64(l, L))));

    if (kj_reduce_knobs().lanes_main)
        lanes_steps_main(l, lanes, start, count, steps, base, rest);
    else
        lanes_steps(l, lanes, start, count, steps, base, rest);

    KjIrVar *ne = new_var(l, "ne", i64_type());
    set(l, ne, min_i64(l, ref(l, count), i64(l, L)));
    if (kj_reduce_knobs().tree_inline) {
        lane_array_tree(l, lanes, ne);
        set(l, value, load_flat(l, lanes, i64(l, 0)));
        return;
    }
    KjIrExpr *tree = kj_ir_call(l->arena, shared_lane_tree(l), l->t, 2, l->loc);
    tree->args[0] = ref(l, lanes);
    tree->args[1] = ref(l, ne);
    set(l, value, tree);
}

/* out[w] = value, or f(init, value) at the last level when there is an init. */
static void store_result(Lift *l, KjIrVar *w, KjIrVar *value)
{
    KjIrExpr *last = op2(l, KJ_IR_EQ, bool_type(), ref(l, l->chunks), i64(l, 1));
    KjIrExpr *cond = op2(l, KJ_IR_LOGAND, bool_type(), ref(l, l->has_init), last);
    KjVec *saved = open_if(l, cond);
    set(l, value, combine(l, ref(l, l->init), ref(l, value)));
    l->body = saved;
    store_flat(l, l->out, ref(l, w), ref(l, value));
}

static KjIrExpr *sreg_i64(Lift *l, KjSpecialReg reg)
{
    KjIrExpr *r = kj_ir_new_expr(l->arena, KJ_IR_SREG, kj_type_scalar(KJ_TYPE_I32), l->loc, 0);
    r->sreg = reg;
    KjIrExpr *e = kj_ir_new_expr(l->arena, KJ_IR_CAST, i64_type(), l->loc, 1);
    e->args[0] = r;
    return e;
}

static void syncthreads(Lift *l)
{
    KjIrStmt *s = kj_ir_new_stmt(l->arena, KJ_IR_STMT_EVAL, l->loc);
    s->value = kj_ir_new_expr(l->arena, KJ_IR_SYNCTHREADS, kj_type_void(), l->loc, 0);
    emit(l, s);
}

/* WARPS: the body of a cuda kernel of 8 warps per thread block, one work item
 * per warp. */
static void warps_body(Lift *l)
{
    const int L = KJ_REDUCE_LANES, B = KJ_REDUCE_BLOCK, W = KJ_REDUCE_WARPS_PER_BLOCK;
    l->fn->uses_syncthreads = true;
    l->fn->shared_bytes = kj_shared_slice_bytes((int64_t)W * L * kj_type_size(l->t));
    KjIrVar *tid = new_var(l, "tid", i64_type()), *lane = new_var(l, "lane", i64_type());
    KjIrVar *w = new_var(l, "w", i64_type()), *acc = new_var(l, "acc", l->t);
    KjIrVar *ne = new_var(l, "ne", i64_type());
    set(l, tid, sreg_i64(l, KJ_SREG_TID_X));
    set(l, lane, op2(l, KJ_IR_REM, i64_type(), ref(l, tid), i64(l, L)));
    set(l, w, add(l, mul(l, sreg_i64(l, KJ_SREG_BID_X), i64(l, W)),
                  op2(l, KJ_IR_DIV, i64_type(), ref(l, tid), i64(l, L))));
    KjIrVar *tile = new_var(l, "tile", kj_type_array(l->t, 1));
    KjIrExpr *shared = kj_ir_new_expr(l->arena, KJ_IR_SHARED, tile->type, l->loc, 0);
    shared->alloc_elem = l->t;
    shared->alloc_ndim = 1;
    shared->alloc_shape[0] = (int64_t)W * L;
    set(l, tile, shared);
    set(l, acc, zero_of(l, l->t));
    set(l, ne, i64(l, 0));

    KjIrVar *start, *count, *slot = new_var(l, "slot", i64_type()); /* w: contiguous */
    KjVec *saved = open_work_item(l, w, slot, ne, &start, &count);
    KjVec *in_if = open_if(l, less(l, ref(l, lane), ref(l, count)));
    set(l, acc, element(l, index_var(l, "t", add(l, ref(l, start), ref(l, lane)))));
    l->body = in_if;
    KjIrVar *i = new_var(l, "i", i64_type()), *u = new_var(l, "u", i64_type());
    KjVec *outer = open_for(l, i, i64(l, 1), i64(l, B / L));
    set(l, u, add(l, mul(l, ref(l, i), i64(l, L)), ref(l, lane)));
    in_if = open_if(l, less(l, ref(l, u), ref(l, count)));
    KjIrExpr *t = index_var(l, "t", add(l, ref(l, start), ref(l, u)));
    set(l, acc, combine(l, ref(l, acc), element(l, t)));
    l->body = in_if;
    l->body = outer;
    l->body = saved;

    store_flat(l, tile, ref(l, tid), ref(l, acc));
    syncthreads(l);
    for (int s = L / 2; s >= 1; s /= 2) {
        KjIrExpr *cond = op2(l, KJ_IR_LOGAND, bool_type(), less(l, ref(l, lane), i64(l, s)),
                             less(l, add(l, ref(l, lane), i64(l, s)), ref(l, ne)));
        saved = open_if(l, cond);
        set(l, acc, combine(l, load_flat(l, tile, ref(l, tid)),
                            load_flat(l, tile, add(l, ref(l, tid), i64(l, s)))));
        store_flat(l, tile, ref(l, tid), ref(l, acc));
        l->body = saved;
        syncthreads(l);
    }
    KjIrExpr *first = op2(l, KJ_IR_LOGAND, bool_type(), less(l, ref(l, w), ref(l, l->items)),
                          op2(l, KJ_IR_EQ, bool_type(), ref(l, lane), i64(l, 0)));
    saved = open_if(l, first);
    set(l, acc, load_flat(l, tile, ref(l, tid)));
    store_result(l, w, acc);
    l->body = saved;
}

/* -------------------------------------------------- WARPS, V lanes a thread */

static KjIrExpr *shfl_down(Lift *l, KjIrVar *value, int delta)
{
    KjIrExpr *e = kj_ir_new_expr(l->arena, KJ_IR_EXEC, l->t, l->loc, 3);
    e->exec = KJ_EXEC_SHFL_DOWN;
    e->args[0] = int_const(l, kj_type_scalar(KJ_TYPE_U32), (int64_t)0xffffffffu);
    e->args[1] = ref(l, value);
    e->args[2] = int_const(l, kj_type_scalar(KJ_TYPE_I32), delta);
    return e;
}

/* A block's first step (lane j0 + v takes element j0 + v, v < V) and its
 * step `step` (element step L + j0 + v, combined into the lane), each
 * element tested against the block's count. */
static void first_step_tested(Lift *l, KjIrVar *start, KjIrVar *count, KjIrVar *j0, KjIrVar **acc)
{
    for (int v = 0; v < l->v.thread_lanes; v++) {
        KjIrExpr *u = add(l, ref(l, j0), i64(l, v));
        KjVec *in_if = open_if(l, less(l, u, ref(l, count)));
        set(l, acc[v], element(l, index_var(l, "t", add(l, ref(l, start), copy(l, u)))));
        l->body = in_if;
    }
}

static void step_tested(Lift *l, KjIrVar *step, KjIrVar *start, KjIrVar *count, KjIrVar *j0,
                        KjIrVar **acc)
{
    for (int v = 0; v < l->v.thread_lanes; v++) {
        KjIrVar *u = new_var(l, "u", i64_type());
        set(l, u, add(l, add(l, mul(l, ref(l, step), i64(l, KJ_REDUCE_LANES)), ref(l, j0)), i64(l, v)));
        KjVec *in_if = open_if(l, less(l, ref(l, u), ref(l, count)));
        KjIrExpr *t = index_var(l, "t", add(l, ref(l, start), ref(l, u)));
        set(l, acc[v], combine(l, ref(l, acc[v]), element(l, t)));
        l->body = in_if;
    }
}

/* A block of an output for COLUMNS, full or the last one (shorter than B):
 * the steps in which every lane has an element (count / L of them) without
 * tests, then the last step's elements each tested, so that the loads of a
 * step need not wait for each other's tests. */
static void accumulate_short_block(Lift *l, KjIrVar *start, KjIrVar *count, KjIrVar *j0,
                                   KjIrVar **acc)
{
    const int L = KJ_REDUCE_LANES, V = l->v.thread_lanes;
    KjIrVar *steps = new_var(l, "steps", i64_type());
    set(l, steps, op2(l, KJ_IR_DIV, i64_type(), ref(l, count), i64(l, L)));
    first_step_tested(l, start, count, j0, acc);
    KjIrVar *i = new_var(l, "i", i64_type()), *base = new_var(l, "base", i64_type());
    KjVec *loop = open_for(l, i, i64(l, 1), ref(l, steps));
    set(l, base, add(l, add(l, ref(l, start), ref(l, j0)), mul(l, ref(l, i), i64(l, L))));
    for (int v = 0; v < V; v++) {
        KjIrExpr *t = index_var(l, "t", add(l, ref(l, base), i64(l, v)));
        set(l, acc[v], combine(l, ref(l, acc[v]), element(l, t)));
    }
    l->body = loop;
    KjVec *last = open_if(l, less(l, i64(l, 0), ref(l, steps)));
    step_tested(l, steps, start, count, j0, acc);
    l->body = last;
}

/* The WARPS form's last block of an output: its base, `first` = start + j0
 * (opaque) and `lim` = count - j0, so that lane j0 + v's element u (v, then
 * in steps of L) is first + u while u < lim; its first step, and its step
 * `step` (u = step L + v), each element tested. */
static void last_block_first(Lift *l, KjIrVar *start, KjIrVar *count, KjIrVar *j0, KjIrVar **first,
                             KjIrVar **lim)
{
    *first = new_var(l, "first", i64_type());
    *lim = new_var(l, "lim", i64_type());
    KjIrExpr *first_value = add(l, ref(l, start), ref(l, j0));
    first_value->opaque = true;
    set(l, *first, first_value);
    set(l, *lim, op2(l, KJ_IR_SUB, i64_type(), ref(l, count), ref(l, j0)));
}

static void last_block_first_step(Lift *l, KjIrVar *first, KjIrVar *lim, KjIrVar **acc)
{
    for (int v = 0; v < l->v.thread_lanes; v++) {
        KjVec *in_if = open_if(l, less(l, i64(l, v), ref(l, lim)));
        set(l, acc[v], element(l, index_var(l, "t", add(l, ref(l, first), i64(l, v)))));
        l->body = in_if;
    }
}

/* The last block's step `step`, each element u = step L + v tested. */
static void last_block_step(Lift *l, KjIrVar *step, KjIrVar *first, KjIrVar *lim, KjIrVar **acc)
{
    for (int v = 0; v < l->v.thread_lanes; v++) {
        KjIrVar *u = new_var(l, "u", i64_type());
        set(l, u, add(l, mul(l, ref(l, step), i64(l, KJ_REDUCE_LANES)), i64(l, v)));
        KjVec *in_if = open_if(l, less(l, ref(l, u), ref(l, lim)));
        KjIrExpr *t = index_var(l, "t", add(l, ref(l, first), ref(l, u)));
        set(l, acc[v], combine(l, ref(l, acc[v]), element(l, t)));
        l->body = in_if;
    }
}

/* The WARPS form's loops over the steps of a full block (two copies on cuda,
 * KJ_REDUCE_WARPS_UNROLL) and of an output's last block (shorter than B,
 * each element tested; the target's four copies); kj_reduce_knobs changes
 * either for measuring.  What made them slow to
 * compile was not the copies but their addresses: each load's index, the
 * work item's geometry (chunk B + j0, chunk = w - k chunks, w from the block
 * and thread numbers, k from a division) plus i L + v, is a sum of several
 * terms to LLVM's scalar evolution, and loop strength reduction tried each
 * term as a register of its own for each of a loop's 32 loads (f32 `dot`:
 * two inputs, four lanes, four copies): 33 of the f32 form's 45 ms of NVPTX
 * code generation.  The block's first element a thread reads, `first`, is
 * now opaque (KjIrExpr.opaque: one unknown to LLVM, no instruction), and the
 * last block's indices are first + u with u = i L + v tested against
 * count - j0, so that every address of both loops is that base plus
 * constants: 4 ms.  The loads and their order are main's. */
static void last_block_tested(Lift *l, KjIrVar *start, KjIrVar *count, KjIrVar *j0,
                              KjIrVar **acc, int unroll)
{
    KjIrVar *first, *lim;
    last_block_first(l, start, count, j0, &first, &lim);
    last_block_first_step(l, first, lim, acc);
    KjIrVar *i = new_var(l, "i", i64_type());
    KjVec *loop = open_for(l, i, i64(l, 1), i64(l, KJ_REDUCE_BLOCK / KJ_REDUCE_LANES));
    ((KjIrStmt *)loop->items[loop->count - 1])->unroll = unroll;
    last_block_step(l, i, first, lim, acc);
    l->body = loop;
}

/* The WARPS form's last block of an output (shorter than B) as COLUMNS
 * takes its blocks (accumulate_short_block): the steps in which every lane
 * has an element (count / L of them) without tests, then the last step's
 * elements each tested, one copy of the loads where the loop of B / L steps
 * tested each element made four; the addresses are `first` (opaque, as in
 * last_block_tested) plus constants and i L.  Lane j0 + v takes its
 * elements in the same order. */
static void last_block_short(Lift *l, KjIrVar *start, KjIrVar *count, KjIrVar *j0, KjIrVar **acc)
{
    const int L = KJ_REDUCE_LANES, V = l->v.thread_lanes;
    KjIrVar *first, *lim;
    last_block_first(l, start, count, j0, &first, &lim);
    KjIrVar *steps = new_var(l, "steps", i64_type());
    set(l, steps, op2(l, KJ_IR_DIV, i64_type(), ref(l, count), i64(l, L)));
    last_block_first_step(l, first, lim, acc);
    KjIrVar *i = new_var(l, "i", i64_type()), *base = new_var(l, "base", i64_type());
    KjVec *loop = open_for(l, i, i64(l, 1), ref(l, steps));
    set(l, base, add(l, ref(l, first), mul(l, ref(l, i), i64(l, L))));
    for (int v = 0; v < V; v++) {
        KjIrExpr *t = index_var(l, "t", add(l, ref(l, base), i64(l, v)));
        set(l, acc[v], combine(l, ref(l, acc[v]), element(l, t)));
    }
    l->body = loop;
    KjVec *last = open_if(l, less(l, i64(l, 0), ref(l, steps)));
    last_block_step(l, steps, first, lim, acc);
    l->body = last;
}

/* The lanes j0 ... j0 + V - 1 of a work item's block (the first element
 * `start`, `count` elements) in acc[0..V), V = l->v.thread_lanes: lane j0 + v
 * takes the elements j0 + v + i L of the block in order, as in the LANES
 * form.  A full block takes a path without tests; `aligned` marks each
 * step's first load of a thread's V consecutive elements. */
static void accumulate_thread_lanes(Lift *l, KjIrVar *start, KjIrVar *count, KjIrVar *j0,
                                    KjIrVar **acc, bool aligned)
{
    const int L = KJ_REDUCE_LANES, B = KJ_REDUCE_BLOCK, V = l->v.thread_lanes;
    const KjReduceKnobs knobs = kj_reduce_knobs();
    if (l->v.form == KJ_REDUCE_FORM_COLUMNS) {
        /* COLUMNS: a full block takes the short block's path too (count
         * / L steps untested, then the last step tested: for a full block
         * none of its elements is in the block), one copy of the form's
         * loads where a full block's own path made two for LLVM to
         * optimise (a fifth of examples/reduce.kern's PTX compile) */
        accumulate_short_block(l, start, count, j0, acc);
        return;
    }
    KjIrStmt *full = kj_ir_new_stmt(l->arena, KJ_IR_STMT_IF, l->loc);
    full->cond = op2(l, KJ_IR_EQ, bool_type(), ref(l, count), i64(l, B));
    emit(l, full);

    /* A full block, without tests. */
    KjVec *outer_saved = open_block(l, &full->then_stmt);
    KjIrVar *first = new_var(l, "first", i64_type());
    KjIrExpr *first_value = add(l, ref(l, start), ref(l, j0));
    first_value->opaque = !knobs.warps_main;
    set(l, first, first_value);
    for (int v = 0; v < V; v++) {
        l->aligned_group = aligned && v == 0;
        set(l, acc[v], element(l, index_var(l, "t", add(l, ref(l, first), i64(l, v)))));
    }
    KjIrVar *i = new_var(l, "i", i64_type()), *base = new_var(l, "base", i64_type());
    KjVec *loop = open_for(l, i, i64(l, 1), i64(l, B / L));
    ((KjIrStmt *)loop->items[loop->count - 1])->unroll =
        knobs.warps_unroll ? knobs.warps_unroll : knobs.warps_main ? 0 : KJ_REDUCE_WARPS_UNROLL;
    set(l, base, add(l, ref(l, first), mul(l, ref(l, i), i64(l, L))));
    for (int v = 0; v < V; v++) {
        l->aligned_group = aligned && v == 0;
        KjIrExpr *t = index_var(l, "t", add(l, ref(l, base), i64(l, v)));
        set(l, acc[v], combine(l, ref(l, acc[v]), element(l, t)));
    }
    l->aligned_group = false;
    l->body = loop;
    l->body = outer_saved;

    /* The last block of an output, shorter than B: each element tested. */
    outer_saved = open_block(l, &full->else_stmt);
    if (knobs.warps_short && !knobs.warps_main) {
        last_block_short(l, start, count, j0, acc);
    } else if (!knobs.warps_main) {
        last_block_tested(l, start, count, j0, acc, knobs.tail_unroll);
    } else {
        /* main's (169fe56) indices, start + i L + j0 + v, for measuring */
        first_step_tested(l, start, count, j0, acc);
        loop = open_for(l, i, i64(l, 1), i64(l, B / L));
        ((KjIrStmt *)loop->items[loop->count - 1])->unroll = knobs.tail_unroll;
        step_tested(l, i, start, count, j0, acc);
        l->body = loop;
    }
    l->body = outer_saved;
}

/* The tree's steps s < V, inside the thread that holds lanes j0 ... j0 + V
 * - 1 in acc: lane j = j0 + v takes lane j + s when j < s and j + s < ne. */
static void thread_tree(Lift *l, KjIrVar *j0, KjIrVar *ne, KjIrVar **acc)
{
    const int V = l->v.thread_lanes;
    for (int s = V / 2; s >= 1; s /= 2) {
        for (int v = 0; v < s; v++) {
            KjIrExpr *j = add(l, ref(l, j0), i64(l, v));
            KjIrExpr *partner_in = less(l, add(l, copy(l, j), i64(l, s)), ref(l, ne));
            KjIrExpr *cond = op2(l, KJ_IR_LOGAND, bool_type(), less(l, j, i64(l, s)), partner_in);
            KjVec *in_if = open_if(l, cond);
            set(l, acc[v], combine(l, ref(l, acc[v]), ref(l, acc[v + s])));
            l->body = in_if;
        }
    }
}

/* WARPS with V lanes a thread: G = L / V threads of a warp take one work
 * item, thread g holding the lanes j = V g ... V g + V - 1 in V registers, so
 * that a step's V elements of a thread are consecutive (one vector load when
 * the variant is aligned) and a warp's step reads V blocks' 32 elements each,
 * contiguously.  The tree's steps s >= V take the partner lane from thread
 * g + s / V by a warp shuffle, the steps s < V stay in the thread: no shared
 * memory and no barrier.  The lanes, their elements and the tree are the
 * LANES form's, in the same order. */
static void thread_lanes_body(Lift *l)
{
    const int L = KJ_REDUCE_LANES, V = l->v.thread_lanes, G = L / V;
    const int per_block = KJ_REDUCE_WARPS_PER_BLOCK * KJ_REDUCE_LANES / G;
    l->fn->uses_syncthreads = true; /* the shuffles are barriers on the cpu targets */
    KjIrVar *tid = new_var(l, "tid", i64_type()), *g = new_var(l, "g", i64_type());
    KjIrVar *j0 = new_var(l, "j0", i64_type()), *w = new_var(l, "w", i64_type());
    KjIrVar *ne = new_var(l, "ne", i64_type());
    KjIrVar *slot = new_var(l, "slot", i64_type()); /* w: a contiguous level */
    set(l, tid, sreg_i64(l, KJ_SREG_TID_X));
    set(l, g, op2(l, KJ_IR_REM, i64_type(), ref(l, tid), i64(l, G)));
    set(l, j0, mul(l, ref(l, g), i64(l, V)));
    set(l, w, add(l, mul(l, sreg_i64(l, KJ_SREG_BID_X), i64(l, per_block)),
                  op2(l, KJ_IR_DIV, i64_type(), ref(l, tid), i64(l, G))));
    KjIrVar *acc[KJ_REDUCE_LANES];
    for (int v = 0; v < V; v++) {
        acc[v] = new_var(l, kj_arena_printf(l->arena, "acc%d", v), l->t);
        set(l, acc[v], zero_of(l, l->t));
    }
    set(l, ne, i64(l, 0));

    KjIrVar *start, *count;
    KjVec *saved = open_work_item(l, w, slot, ne, &start, &count);
    accumulate_thread_lanes(l, start, count, j0, acc, l->v.aligned);
    l->body = saved;

    /* The tree: lane j = j0 + v takes lane j + s when j < s and j + s < ne;
     * the steps s >= V from thread g + s / V by a shuffle. */
    for (int s = L / 2; s >= V; s /= 2) {
        for (int v = 0; v < V; v++) {
            KjIrExpr *j = add(l, ref(l, j0), i64(l, v));
            KjIrExpr *partner_in = less(l, add(l, copy(l, j), i64(l, s)), ref(l, ne));
            KjIrExpr *cond = op2(l, KJ_IR_LOGAND, bool_type(), less(l, j, i64(l, s)), partner_in);
            KjIrVar *other = new_var(l, "other", l->t);
            set(l, other, shfl_down(l, acc[v], s / V));
            KjVec *in_if = open_if(l, cond);
            set(l, acc[v], combine(l, ref(l, acc[v]), ref(l, other)));
            l->body = in_if;
        }
    }
    thread_tree(l, j0, ne, acc);
    KjIrExpr *leader = op2(l, KJ_IR_LOGAND, bool_type(), less(l, ref(l, w), ref(l, l->items)),
                           op2(l, KJ_IR_EQ, bool_type(), ref(l, g), i64(l, 0)));
    saved = open_if(l, leader);
    store_result(l, w, acc[0]);
    l->body = saved;
}

/* ------------------------------------------ COLUMNS, strided levels on cuda */

/* COLUMNS: a cuda kernel for a strided level, whose work items are numbered
 * outputs fastest.  A thread block takes X = KJ_REDUCE_COLUMN_ITEMS
 * neighbouring work items and G = L / V threads for each: thread tid is
 * work item x = tid % X of the block, lane group g = tid / X, holding the
 * lanes j = V g ... V g + V - 1 in V registers.  A warp is then one lane
 * group of 32 neighbouring outputs, and each of its loads reads one row of
 * 32 neighbouring columns (a sum along axis 0), as the LANES form's warps
 * did with a thread per work item, but with G times the threads and V
 * rather than L registers of lanes each.  The tree's steps s >= V cross
 * threads through shared memory, tile[j X + x] holding lane j of item x:
 * before step s the groups [s / V, 2 s / V) write their lanes [s, 2 s),
 * and after a barrier the groups below s / V combine them into theirs (the
 * lanes a step reads are not those the next one writes, so one barrier a
 * step); the steps s < V stay in group 0's thread.  The lanes, their
 * elements and the tree are the LANES form's, in the same order. */
static void columns_body(Lift *l)
{
    const int L = KJ_REDUCE_LANES, V = l->v.thread_lanes, X = KJ_REDUCE_COLUMN_ITEMS;
    l->fn->uses_syncthreads = true;
    KjIrVar *tid = new_var(l, "tid", i64_type()), *x = new_var(l, "x", i64_type());
    KjIrVar *g = new_var(l, "g", i64_type()), *j0 = new_var(l, "j0", i64_type());
    KjIrVar *w = new_var(l, "w", i64_type()), *ne = new_var(l, "ne", i64_type());
    KjIrVar *slot = new_var(l, "slot", i64_type());
    set(l, tid, sreg_i64(l, KJ_SREG_TID_X));
    set(l, x, op2(l, KJ_IR_REM, i64_type(), ref(l, tid), i64(l, X)));
    set(l, g, op2(l, KJ_IR_DIV, i64_type(), ref(l, tid), i64(l, X)));
    set(l, j0, mul(l, ref(l, g), i64(l, V)));
    set(l, w, add(l, mul(l, sreg_i64(l, KJ_SREG_BID_X), i64(l, X)), ref(l, x)));
    KjIrVar *acc[KJ_REDUCE_LANES];
    for (int v = 0; v < V; v++) {
        acc[v] = new_var(l, kj_arena_printf(l->arena, "acc%d", v), l->t);
        set(l, acc[v], zero_of(l, l->t));
    }
    set(l, ne, i64(l, 0));
    set(l, slot, i64(l, 0));

    KjIrVar *start, *count;
    KjVec *saved = open_work_item(l, w, slot, ne, &start, &count);
    accumulate_thread_lanes(l, start, count, j0, acc, false);
    l->body = saved;

    if (V < L) {
        l->fn->shared_bytes = kj_shared_slice_bytes((int64_t)L * X * kj_type_size(l->t));
        KjIrVar *tile = new_var(l, "tile", kj_type_array(l->t, 1));
        KjIrExpr *shared = kj_ir_new_expr(l->arena, KJ_IR_SHARED, tile->type, l->loc, 0);
        shared->alloc_elem = l->t;
        shared->alloc_ndim = 1;
        shared->alloc_shape[0] = (int64_t)L * X;
        set(l, tile, shared);
        for (int s = L / 2; s >= V; s /= 2) {
            /* groups [s / V, 2 s / V) publish their lanes */
            KjIrExpr *from = op2(l, KJ_IR_LE, bool_type(), i64(l, s / V), ref(l, g));
            KjIrExpr *below = less(l, ref(l, g), i64(l, 2 * s / V));
            saved = open_if(l, op2(l, KJ_IR_LOGAND, bool_type(), from, below));
            for (int v = 0; v < V; v++) {
                KjIrExpr *j = add(l, ref(l, j0), i64(l, v));
                store_flat(l, tile, add(l, mul(l, j, i64(l, X)), ref(l, x)), ref(l, acc[v]));
            }
            l->body = saved;
            syncthreads(l);
            /* groups below s / V take them: lane j from lane j + s */
            saved = open_if(l, less(l, ref(l, g), i64(l, s / V)));
            for (int v = 0; v < V; v++) {
                KjIrExpr *partner = add(l, add(l, ref(l, j0), i64(l, v)), i64(l, s));
                KjVec *in_if = open_if(l, less(l, partner, ref(l, ne)));
                KjIrExpr *at = add(l, mul(l, copy(l, partner), i64(l, X)), ref(l, x));
                set(l, acc[v], combine(l, ref(l, acc[v]), load_flat(l, tile, at)));
                l->body = in_if;
            }
            l->body = saved;
        }
    }
    thread_tree(l, j0, ne, acc);
    KjIrExpr *leader = op2(l, KJ_IR_LOGAND, bool_type(), less(l, ref(l, w), ref(l, l->items)),
                           op2(l, KJ_IR_EQ, bool_type(), ref(l, g), i64(l, 0)));
    saved = open_if(l, leader);
    store_result(l, slot, acc[0]);
    l->body = saved;
}

/* ------------------------------------------------------------------ driver */

static const char *kernel_symbol(KjArena *arena, const KjIrFunction *combine,
                                 const KjIrFunction *map, KjReduceVariant v)
{
    char lanes[16] = "";
    if (v.form != KJ_REDUCE_FORM_LANES && v.thread_lanes > 0)
        snprintf(lanes, sizeof lanes, "t%d%s", v.thread_lanes, v.aligned ? "a" : "");
    char form = v.form == KJ_REDUCE_FORM_WARPS     ? 'w'
                : v.form == KJ_REDUCE_FORM_COLUMNS ? 'k'
                : v.simd                           ? 'v'
                                                   : 'l';
    return kj_arena_printf(arena, "%s__r%c%s%d%d%c%s%s", combine->symbol, form, lanes,
                           v.kept_rank, v.reduced_rank, v.contiguous ? 'c' : 's',
                           v.mapped ? "__m_" : "", v.mapped ? map->symbol : "");
}

KjIrFunction *kj_reduce_lift(KjIrModule *module, KjIrFunction *combine_fn, KjIrFunction *map,
                             KjReduceVariant variant)
{
    if (combine_fn->kind != KJ_IR_FN_SCALAR || combine_fn->param_count != 2)
        kj_die("kj_reduce_lift: %s is not a binary scalar function", combine_fn->symbol);
    if (variant.mapped && (!map || map->ret != combine_fn->ret || map->param_count > MAX_INPUTS))
        kj_die("kj_reduce_lift: bad map for %s", combine_fn->symbol);
    if (variant.kept_rank < 0 || variant.kept_rank > KJ_MAX_DIMS || variant.reduced_rank < 1 ||
        variant.reduced_rank > KJ_MAX_DIMS || (variant.contiguous && variant.reduced_rank != 1) ||
        (variant.thread_lanes != 0 &&
         (variant.form == KJ_REDUCE_FORM_LANES ||
          (variant.form == KJ_REDUCE_FORM_WARPS && !variant.contiguous) ||
          variant.thread_lanes < 0 || variant.thread_lanes > KJ_REDUCE_LANES ||
          (variant.thread_lanes & (variant.thread_lanes - 1)) != 0)) ||
        (variant.form == KJ_REDUCE_FORM_COLUMNS && variant.thread_lanes == 0) ||
        (variant.aligned && (variant.thread_lanes == 0 || variant.form != KJ_REDUCE_FORM_WARPS)))
        kj_die("kj_reduce_lift: bad variant");

    KjArena *arena = module->arena;
    const char *symbol = kernel_symbol(arena, combine_fn, map, variant);
    for (int i = 0; i < module->functions.count; i++) {
        KjIrFunction *existing = module->functions.items[i];
        if ((existing->kind == KJ_IR_FN_VEC_KERNEL || existing->kind == KJ_IR_FN_KERNEL) &&
            strcmp(existing->symbol, symbol) == 0)
            return existing;
    }

    KjIrFunction *fn = kj_arena_alloc(arena, sizeof *fn);
    fn->name = combine_fn->name;
    fn->symbol = symbol;
    fn->kind = variant.form == KJ_REDUCE_FORM_LANES ? KJ_IR_FN_VEC_KERNEL : KJ_IR_FN_KERNEL;
    fn->ret = kj_type_void();
    fn->loc = combine_fn->loc;
    fn->scalar = combine_fn;
    fn->contiguous = true; /* every array is addressed by flat offsets */
    fn->unchecked = true;  /* api_reduce.c passes no check record */

    Lift lift = {.arena = arena, .module = module, .fn = fn, .loc = combine_fn->loc,
                 .combine = combine_fn, .map = variant.mapped ? map : NULL, .v = variant,
                 .t = combine_fn->ret};
    Lift *l = &lift;
    l->n_in = variant.mapped ? map->param_count : 1;

    /* Parameters, in the order kjit_compiler.h gives. */
    KjVec params = {0};
    for (int q = 0; q < l->n_in; q++) {
        const KjType *elem = variant.mapped ? map->params[q]->type : l->t;
        l->in[q] = new_param(l, kj_arena_printf(arena, "in%d", q), kj_type_array(elem, 1));
        kj_vec_push(arena, &params, l->in[q]);
    }
    l->out = new_param(l, "out", kj_type_array(l->t, 1));
    kj_vec_push(arena, &params, l->out);
    l->items = new_param(l, "items", i64_type());
    l->chunks = new_param(l, "chunks", i64_type());
    l->m = new_param(l, "m", i64_type());
    kj_vec_push(arena, &params, l->items);
    kj_vec_push(arena, &params, l->chunks);
    kj_vec_push(arena, &params, l->m);
    for (int d = 0; d < variant.kept_rank; d++) {
        l->ke[d] = new_param(l, kj_arena_printf(arena, "ke%d", d), i64_type());
        kj_vec_push(arena, &params, l->ke[d]);
    }
    for (int d = 0; variant.reduced_rank > 1 && d < variant.reduced_rank; d++) {
        l->re[d] = new_param(l, kj_arena_printf(arena, "re%d", d), i64_type());
        kj_vec_push(arena, &params, l->re[d]);
    }
    for (int q = 0; q < l->n_in; q++) {
        for (int d = 0; d < variant.kept_rank; d++) {
            l->ks[q][d] = new_param(l, kj_arena_printf(arena, "ks%d_%d", q, d), i64_type());
            kj_vec_push(arena, &params, l->ks[q][d]);
        }
        for (int d = 0; !variant.contiguous && d < variant.reduced_rank; d++) {
            l->rs[q][d] = new_param(l, kj_arena_printf(arena, "rs%d_%d", q, d), i64_type());
            kj_vec_push(arena, &params, l->rs[q][d]);
        }
    }
    l->has_init = new_param(l, "has_init", bool_type());
    l->init = new_param(l, "init", l->t);
    kj_vec_push(arena, &params, l->has_init);
    kj_vec_push(arena, &params, l->init);
    fn->param_count = params.count;
    fn->params = (KjIrVar **)params.items;

    for (int q = 0; q < l->n_in; q++)
        l->off[q] = new_var(l, kj_arena_printf(arena, "off%d", q), i64_type());
    for (int d = 0; d < KJ_MAX_DIMS; d++)
        l->coord[d] = new_var(l, kj_arena_printf(arena, "c%d", d), i64_type());

    fn->body = kj_ir_new_stmt(arena, KJ_IR_STMT_BLOCK, l->loc);
    l->body = &fn->body->stmts;
    if (variant.form == KJ_REDUCE_FORM_COLUMNS) {
        columns_body(l);
    } else if (variant.form == KJ_REDUCE_FORM_WARPS && variant.thread_lanes > 0) {
        thread_lanes_body(l);
    } else if (variant.form == KJ_REDUCE_FORM_WARPS) {
        warps_body(l);
    } else {
        KjIrVar *w = new_var(l, "w", i64_type()), *value = new_var(l, "value", l->t);
        KjIrStmt *loop = kj_ir_new_stmt(arena, KJ_IR_STMT_PARFOR, l->loc);
        loop->var = w;
        loop->stop = ref(l, l->items);
        emit(l, loop);
        open_block(l, &loop->body);
        KjIrVar *slot = new_var(l, "slot", i64_type());
        if (l->v.simd)
            simd_lanes_body(l, w, value, slot);
        else
            lanes_body(l, w, value, slot);
        store_result(l, slot, value);
    }
    kj_vec_push(arena, &module->functions, fn);
    return fn;
}
