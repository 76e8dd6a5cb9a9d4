/*
 * codegen_simd_fission.c: a loop whose accumulators do not fit the vector
 * registers, lowered as several loops, each over a group of them (loop
 * fission), on the SIMD lanes of the cpu targets.
 *
 * A register-blocked matrix multiply keeps a thread's 4x4 block of c in 16
 * accumulators across its k loop; a k step also needs the 4 values of b and
 * a broadcast of a: 21 vectors, where AVX2 has 16 registers, so LLVM
 * spills and moves registers in every step (issue 25: 2.0-2.5x OpenBLAS's
 * Haswell kernel, against 1.4x on AVX-512, whose 32 registers hold them).
 * Run as two loops, rows 0-1 of the block over the whole k range and then
 * rows 2-3, each loop needs 14 registers and spills nothing; the loads of b
 * are made twice.  Each accumulator gets the same operations in the same
 * order: the same bits.
 *
 * Needs: a FOR statement being lowered on lanes (gen_stmt), not in checked
 * mode.  Gives: the loops to lower in its place, in order, or false when
 * the loop stays whole.  A loop is split when:
 *   - its bounds are uniform (kj_uniform_loop_varying false) and read no
 *     variable its body assigns; it is not a reduce.c lanes loop;
 *   - its body is straight-line: blocks, assignments of scalar variables
 *     and stores into private arrays (set only from local(), used only
 *     through loads and stores: the split form's per-thread arrays and
 *     local() arrays), with no call, atomic, barrier, print or allocation:
 *     nothing but those stores writes memory, so a load gives the same value
 *     in every copy of the loop;
 *   - its carried values (a variable the body reads before it assigns it,
 *     an array it stores into) fall into more than one group (below) and
 *     the estimate of the registers they need with the temporaries they
 *     read is over the target's (vector_registers);
 *   - every temporary (a variable the body assigns before it reads it) that
 *     code after the loop may read gets its last assignment from no carried
 *     value.
 * Groups: a statement that assigns or stores a carried value joins the
 * carried values it reads, directly or through the temporaries it reads
 * (each temporary's last assignment before it), into one group; groups are
 * then packed, in the order of their first statement, into as few loops as
 * fit the registers, as evenly as that allows.  Each loop is a copy of the
 * FOR whose body is its groups' statements and those of the temporaries
 * they read, in the body's order; the last also takes the statements no
 * group needs and the last assignment of each temporary read after the
 * loop, with what those read, so that every variable ends the loops with
 * the value the one loop gave it.
 *
 * KJIT_SIMD_FISSION=0 keeps every loop whole (a measuring switch, in the
 * cache key); KJIT_SIMD_FISSION_REGISTERS=N sets the registers assumed
 * (tests: a small N splits most loops that can be split; in the cache key).
 */
#include "codegen_simd.h"

#include <stdlib.h>

enum {
    FISSION_MAX_ITEMS = 512, /* statements of a body considered */
    FISSION_RESERVED = 2,    /* registers for a product and a broadcast in flight */
};

enum { VAR_UNTOUCHED, VAR_TEMP, VAR_CARRIED };

typedef struct Item {
    KjIrStmt *st;
    int writes;      /* the SET's variable or the STORE's array (var id) */
    int *reads;      /* var ids its expressions name */
    int read_count;
    int *defs;       /* items whose temporaries it reads */
    int def_count;
    int group;       /* a carried var id (union-find), -1: none */
} Item;

typedef struct Fission {
    Simd *s;
    KjArena *arena;
    const KjIrStmt *loop;
    Item *items;
    int count;
    int var_count;
    KjIrVar **vars;        /* by id */
    unsigned char *role;   /* by id: VAR_* */
    bool *stored;          /* by id: an array the body stores into */
    int *parent;           /* by id: union-find of carried values */
    int *last_set;         /* by id: the body's last assignment of it (item + 1), 0: none */
    bool ok;
    /* the expression walk's */
    Item *current;
} Fission;

/* ------------------------------------------------------------- the body */

static bool allowed_expr(KjIrWalk *w, const KjIrExpr *e)
{
    Fission *f = w->data;
    switch (e->op) {
    case KJ_IR_CALL: case KJ_IR_ATOMIC: case KJ_IR_SYNCTHREADS: case KJ_IR_EXEC: case KJ_IR_PRINT:
    case KJ_IR_LOCAL: case KJ_IR_SHARED: case KJ_IR_DYNAMIC_SHARED: case KJ_IR_VIEW:
        f->ok = false;
        return false;
    case KJ_IR_VAR: {
        Item *it = f->current;
        if (!it) /* a bound: bounds_free tests its reads */
            return true;
        if (e->var->id < 0 || e->var->id >= f->var_count) {
            f->ok = false;
            return false;
        }
        f->vars[e->var->id] = e->var;
        for (int i = 0; i < it->read_count; i++)
            if (it->reads[i] == e->var->id)
                return true;
        int *reads = kj_arena_alloc(f->arena, sizeof *reads * (size_t)(it->read_count + 1));
        memcpy(reads, it->reads, sizeof *reads * (size_t)it->read_count);
        reads[it->read_count++] = e->var->id;
        it->reads = reads;
        return true;
    }
    default:
        return true;
    }
}

/* Whether st is straight-line in the shape flatten takes (blocks, sets,
 * stores), at most FISSION_MAX_ITEMS statements: the test every loop the
 * lowering meets takes, before anything is allocated. */
static bool straight_line(const KjIrStmt *st, int *count)
{
    if (st->kind == KJ_IR_STMT_BLOCK) {
        for (int i = 0; i < st->stmts.count; i++)
            if (!straight_line(st->stmts.items[i], count))
                return false;
        return true;
    }
    return (st->kind == KJ_IR_STMT_SET || st->kind == KJ_IR_STMT_STORE) && ++*count <= FISSION_MAX_ITEMS;
}

/* Appends the straight-line statements of st to f->items; false for
 * anything else. */
static bool flatten(Fission *f, KjIrStmt *st)
{
    if (st->kind == KJ_IR_STMT_BLOCK) {
        for (int i = 0; i < st->stmts.count; i++)
            if (!flatten(f, st->stmts.items[i]))
                return false;
        return true;
    }
    int id;
    if (st->kind == KJ_IR_STMT_SET && !is_array(st->var->type) && st->var != f->loop->var)
        id = st->var->id;
    else if (st->kind == KJ_IR_STMT_STORE && st->array->op == KJ_IR_VAR && !st->array->var->is_param)
        id = st->array->var->id;
    else
        return false;
    if (id < 0 || id >= f->var_count)
        return false;
    Item *it = &f->items[f->count++];
    *it = (Item){.st = st, .writes = id, .group = -1};
    f->vars[id] = st->kind == KJ_IR_STMT_SET ? st->var : st->array->var;
    f->current = it;
    KjIrWalk walk = {.expr = allowed_expr, .data = f};
    kj_ir_walk_own_exprs(&walk, st);
    f->current = NULL;
    if (st->kind == KJ_IR_STMT_STORE)
        f->stored[id] = true;
    return f->ok;
}

/* A bound of the loop: evaluated again by each copy, so it may read nothing
 * the body assigns or stores into. */
static bool bounds_free(Fission *f, const KjIrExpr *e)
{
    for (int i = 0; i < f->count; i++)
        if (kj_ir_expr_reads(e, f->vars[f->items[i].writes]))
            return false;
    KjIrWalk walk = {.expr = allowed_expr, .data = f};
    return kj_ir_walk_expr(&walk, e) && f->ok;
}

/* ------------------------------------------------------------ the groups */

static int find(Fission *f, int id)
{
    while (f->parent[id] != id)
        id = f->parent[id] = f->parent[f->parent[id]];
    return id;
}

static int join(Fission *f, int a, int b)
{
    if (a < 0)
        return b < 0 ? -1 : find(f, b);
    if (b < 0)
        return find(f, a);
    a = find(f, a);
    b = find(f, b);
    if (a != b)
        f->parent[b] = a;
    return a;
}

/* Which variables are carried and which temporaries, each one's last
 * assignment, each read's reaching assignment, and the groups. */
static void classify(Fission *f)
{
    int *last = f->last_set; /* item + 1 */
    bool *read_first = kj_xcalloc((size_t)f->var_count, sizeof *read_first);
    for (int i = 0; i < f->count; i++) {
        Item *it = &f->items[i];
        for (int r = 0; r < it->read_count; r++)
            if (!last[it->reads[r]])
                read_first[it->reads[r]] = true;
        if (it->st->kind == KJ_IR_STMT_STORE) {
            f->role[it->writes] = VAR_CARRIED;
        } else {
            if (!last[it->writes])
                f->role[it->writes] = read_first[it->writes] ? VAR_CARRIED : VAR_TEMP;
            last[it->writes] = i + 1;
        }
    }
    free(read_first);
    for (int id = 0; id < f->var_count; id++)
        f->parent[id] = id;
    last = kj_xcalloc((size_t)f->var_count, sizeof *last); /* the assignments so far */
    for (int i = 0; i < f->count; i++) {
        Item *it = &f->items[i];
        it->defs = kj_arena_alloc(f->arena, sizeof *it->defs * (size_t)(it->read_count + 1));
        int group = -1;
        for (int r = 0; r < it->read_count; r++) {
            int id = it->reads[r];
            if (f->role[id] == VAR_CARRIED) {
                group = join(f, group, id);
            } else if (f->role[id] == VAR_TEMP && last[id]) {
                int d = last[id] - 1;
                it->defs[it->def_count++] = d;
                group = join(f, group, f->items[d].group);
            }
        }
        if (f->role[it->writes] == VAR_CARRIED)
            group = join(f, group, it->writes);
        it->group = group;
        if (it->st->kind == KJ_IR_STMT_SET)
            last[it->writes] = i + 1;
    }
    free(last);
}

/* ------------------------------------------------------ the registers */

static int vector_registers(Gen *g)
{
    const char *env = getenv(KJ_SIMD_FISSION_REGISTERS);
    if (env && *env) {
        int n = atoi(env);
        return n < FISSION_RESERVED + 1 ? FISSION_RESERVED + 1 : n > 64 ? 64 : n;
    }
    if (strncmp(LLVMGetTarget(g->mod), "x86_64", 6) != 0)
        return 32; /* AArch64's 32 NEON registers */
    return register_bytes(g) == 64 ? 32 : 16;
}

/* The registers a value of var takes: a vector (a part of one per lane) when
 * it varies or is an array's element of each thread, a broadcast when a
 * float is uniform, none for a uniform integer (a general register). */
static int weight(Fission *f, int id)
{
    const KjIrVar *v = f->vars[id];
    if (!v)
        return 0;
    const KjType *t = is_array(v->type) ? v->type->elem : v->type;
    bool lanes = is_array(v->type) || kj_uniform_var_varying(f->s->u, v);
    int parts = kj_type_is_complex(t) ? 2 : 1;
    if (!lanes)
        return kj_type_is_float(t) || kj_type_is_complex(t) ? parts : 0;
    int bytes = register_bytes(f->s->g), need = f->s->lanes * kj_type_size(t);
    int regs = (need + bytes - 1) / bytes;
    return regs < parts ? parts : regs;
}

/* Marks in `in` the items of the groups marked in `groups` (by var id) and
 * those of the temporaries they read. */
static void members(Fission *f, const bool *groups, bool *in)
{
    for (int i = f->count - 1; i >= 0; i--) {
        const Item *it = &f->items[i];
        if (it->group >= 0 && groups[find(f, it->group)])
            in[i] = true;
        if (in[i])
            for (int d = 0; d < it->def_count; d++)
                in[it->defs[d]] = true;
    }
}

/* The estimate of the registers one loop of these items needs: its carried
 * values, live throughout, and the most temporaries live at once. */
static int pressure(Fission *f, const bool *in, bool *live, int *carried_weight)
{
    int carried = 0, now = 0, most = 0;
    memset(live, 0, (size_t)f->var_count);
    for (int i = f->count - 1; i >= 0; i--) {
        if (!in[i])
            continue;
        const Item *it = &f->items[i];
        if (f->role[it->writes] == VAR_TEMP && live[it->writes]) {
            live[it->writes] = false;
            now -= weight(f, it->writes);
        }
        for (int r = 0; r < it->read_count; r++) {
            int id = it->reads[r];
            if (f->role[id] == VAR_TEMP && !live[id]) {
                live[id] = true;
                now += weight(f, id);
            }
        }
        most = now > most ? now : most;
    }
    memset(live, 0, (size_t)f->var_count); /* now: carried values counted */
    for (int i = 0; i < f->count; i++) {
        int id = f->items[i].writes;
        if (in[i] && f->role[id] == VAR_CARRIED && !live[id]) {
            live[id] = true;
            carried += weight(f, id);
        }
    }
    *carried_weight = carried;
    return carried + most;
}

/* Packs the groups (reps, in order) into loops: loop_of[k] for reps[k].
 * cap: the most carried weight a loop takes (0: none).  Returns the loops. */
static int pack(Fission *f, const int *reps, int rep_count, int budget, int cap, int *loop_of,
                bool *groups, bool *in, bool *live)
{
    int loops = 0, first = 0;
    for (int k = 0; k < rep_count; k++) {
        memset(groups, 0, (size_t)f->var_count);
        for (int j = first; j <= k; j++)
            groups[reps[j]] = true;
        memset(in, 0, (size_t)f->count);
        members(f, groups, in);
        int carried, need = pressure(f, in, live, &carried);
        if (k > first && (need > budget || (cap && carried > cap))) {
            loops++;
            first = k;
        }
        loop_of[k] = loops;
    }
    return loops + 1;
}

/* --------------------------------------------------------- outside reads */

typedef struct Outside {
    const KjIrStmt *loop;
    int inside;  /* the walk is in the loop's body */
    bool *read;  /* by var id: named outside the loop */
    bool *local; /* by var id: an array set from local() only */
    int *refs, *bases;
    int var_count;
} Outside;

static KjIrWalkStep outside_stmt(KjIrWalk *w, const KjIrStmt *st)
{
    Outside *o = w->data;
    o->inside += st == o->loop;
    if (st->kind == KJ_IR_STMT_SET && st->var->id >= 0 && st->var->id < o->var_count &&
        (!st->value || st->value->op != KJ_IR_LOCAL))
        o->local[st->var->id] = false;
    if (st->kind == KJ_IR_STMT_STORE && st->array->op == KJ_IR_VAR && st->array->var->id >= 0 &&
        st->array->var->id < o->var_count)
        o->bases[st->array->var->id]++;
    return KJ_IR_WALK_ON;
}

static void outside_leave(KjIrWalk *w, const KjIrStmt *st)
{
    Outside *o = w->data;
    o->inside -= st == o->loop;
}

static bool outside_expr(KjIrWalk *w, const KjIrExpr *e)
{
    Outside *o = w->data;
    if (e->op == KJ_IR_VAR && e->var->id >= 0 && e->var->id < o->var_count) {
        o->read[e->var->id] |= !o->inside;
        o->refs[e->var->id]++;
    }
    if (e->op == KJ_IR_LOAD && e->args[0]->op == KJ_IR_VAR && e->args[0]->var->id >= 0 &&
        e->args[0]->var->id < o->var_count)
        o->bases[e->args[0]->var->id]++;
    return true;
}

/* Whether every array the body stores into is private (set only from
 * local(), named only by the loads and stores through it), and which
 * variables code outside the loop names (read[]). */
static bool check_outside(Fission *f, bool *read)
{
    Outside o = {.loop = f->loop, .read = read, .var_count = f->var_count};
    o.local = kj_xcalloc((size_t)f->var_count, sizeof *o.local);
    o.refs = kj_xcalloc((size_t)f->var_count, sizeof *o.refs);
    o.bases = kj_xcalloc((size_t)f->var_count, sizeof *o.bases);
    for (int id = 0; id < f->var_count; id++)
        o.local[id] = true;
    KjIrWalk walk = {.stmt = outside_stmt, .expr = outside_expr, .leave = outside_leave, .data = &o};
    kj_ir_walk_stmt(&walk, f->s->fn->body);
    bool ok = true;
    for (int id = 0; id < f->var_count && ok; id++)
        if (f->stored[id])
            ok = o.local[id] && o.refs[id] == o.bases[id] && !f->vars[id]->is_param;
    free(o.local);
    free(o.refs);
    free(o.bases);
    return ok;
}

/* ------------------------------------------------------------- the split */

static bool split(Fission *f, KjIrStmt ***loops_out, int *loop_count)
{
    Simd *s = f->s;
    int budget = vector_registers(s->g) - FISSION_RESERVED;
    bool *groups = kj_arena_alloc(f->arena, (size_t)f->var_count + 1);
    bool *in = kj_arena_alloc(f->arena, (size_t)f->count + 1);
    bool *live = kj_arena_alloc(f->arena, (size_t)f->var_count + 1);
    int *reps = kj_arena_alloc(f->arena, sizeof *reps * (size_t)(f->var_count + 1));
    int rep_count = 0;
    for (int i = 0; i < f->count; i++) {
        int g = f->items[i].group;
        if (g < 0)
            continue;
        g = find(f, g);
        if (!groups[g]) {
            groups[g] = true;
            reps[rep_count++] = g;
        }
    }
    if (rep_count < 2)
        return false;
    memset(in, 0, (size_t)f->count);
    for (int i = 0; i < f->count; i++)
        in[i] = true;
    int total_carried;
    if (pressure(f, in, live, &total_carried) <= budget)
        return false;

    int *loop_of = kj_arena_alloc(f->arena, sizeof *loop_of * (size_t)rep_count);
    int loops = pack(f, reps, rep_count, budget, 0, loop_of, groups, in, live);
    if (loops < 2)
        return false;
    /* as even as the registers allow: the same loops, each at most its share */
    int *even = kj_arena_alloc(f->arena, sizeof *even * (size_t)rep_count);
    int share = (total_carried + loops - 1) / loops;
    if (pack(f, reps, rep_count, budget, share, even, groups, in, live) == loops)
        loop_of = even;

    bool *outside = kj_arena_alloc(f->arena, (size_t)f->var_count + 1);
    if (!check_outside(f, outside))
        return false;
    /* the last loop: what no group needs, and the last assignment of each
     * temporary read after the loop (which must need no carried value) */
    bool *rest = kj_arena_alloc(f->arena, (size_t)f->count + 1);
    bool *claimed = kj_arena_alloc(f->arena, (size_t)f->count + 1);
    KjIrStmt **out = kj_arena_alloc(f->arena, sizeof *out * (size_t)loops);
    for (int l = 0; l < loops; l++) {
        memset(groups, 0, (size_t)f->var_count);
        for (int k = 0; k < rep_count; k++)
            groups[reps[k]] = loop_of[k] == l;
        memset(in, 0, (size_t)f->count);
        members(f, groups, in);
        for (int i = 0; i < f->count; i++)
            claimed[i] |= in[i];
        if (l == loops - 1) {
            bool ok = true;
            for (int i = 0; i < f->count; i++) {
                const Item *it = &f->items[i];
                bool needed = !claimed[i] ||
                              (f->role[it->writes] == VAR_TEMP && outside[it->writes] &&
                               f->last_set[it->writes] == i + 1);
                if (needed && it->group >= 0 && !groups[find(f, it->group)])
                    ok = false;
                rest[i] = needed;
            }
            if (!ok)
                return false;
            for (int i = f->count - 1; i >= 0; i--) {
                if (rest[i])
                    in[i] = true;
                if (in[i])
                    for (int d = 0; d < f->items[i].def_count; d++)
                        in[f->items[i].defs[d]] = true;
            }
        }
        KjIrStmt *copy = kj_arena_alloc(f->arena, sizeof *copy);
        *copy = *f->loop;
        copy->body = kj_ir_new_stmt(f->arena, KJ_IR_STMT_BLOCK, f->loop->body->loc);
        for (int i = 0; i < f->count; i++)
            if (in[i])
                kj_vec_push(f->arena, &copy->body->stmts, f->items[i].st);
        out[l] = copy;
    }
    *loops_out = out;
    *loop_count = loops;
    return true;
}

bool kj_simd_fission(Simd *s, KjIrStmt *loop, KjIrStmt ***loops, int *count)
{
    Gen *g = s->g;
    if (loop->kind != KJ_IR_STMT_FOR || loop->simd_lanes || g->options->checks || s->checks ||
        kj_uniform_loop_varying(s->u, loop) || simd_switched_off(KJ_SIMD_FISSION))
        return false;
    int items = 0;
    if (!straight_line(loop->body, &items) || items < 2 || g->slot_count <= 0)
        return false;
    Fission f = {.s = s, .arena = &s->arena, .loop = loop, .ok = true, .var_count = g->slot_count};
    f.items = kj_xcalloc((size_t)items, sizeof *f.items);
    f.vars = kj_arena_alloc(f.arena, sizeof *f.vars * (size_t)f.var_count);
    f.role = kj_arena_alloc(f.arena, (size_t)f.var_count);
    f.stored = kj_arena_alloc(f.arena, (size_t)f.var_count);
    f.parent = kj_arena_alloc(f.arena, sizeof *f.parent * (size_t)f.var_count);
    f.last_set = kj_arena_alloc(f.arena, sizeof *f.last_set * (size_t)f.var_count);
    bool done = flatten(&f, loop->body) && f.count >= 2 && bounds_free(&f, loop->start) &&
                bounds_free(&f, loop->stop) && bounds_free(&f, loop->step);
    if (done) {
        classify(&f);
        done = split(&f, loops, count);
    }
    free(f.items);
    return done;
}
