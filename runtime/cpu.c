/*
 * cpu.c: the cpu and parallel targets: how compiled code is walked over its
 * index space on the host.
 *
 * A vectorized kernel's PARFOR is a range of elements cut into chunks for the
 * pool.  A @kernel runs with CUDA semantics: the runtime walks the grid's
 * blocks (across the pool on parallel), gives each block zeroed shared memory
 * of its own, and runs the block's threads.  A kernel without syncthreads()
 * runs its threads one after the other (the __block entry loops over them).  A
 * kernel with syncthreads() or another barrier (a warp collective,
 * syncthreads_count ...) runs each thread as a fiber with its own stack: the
 * barrier switches back to the group's scheduler, which resumes the next
 * fiber, and lets a barrier's threads go on only once all of them (the 32
 * lanes of a warp, the block, or the grid) have reached it, handing each the
 * collective's result.  That holds for barriers anywhere, inside loops and
 * branches too.  A kernel whose syncthreads() calls sit outside varying
 * control flow has a split form instead (barrier_split.c), whose __block
 * entry runs the block's threads in loops between the barriers: no fibers;
 * code compiled for the launch's block shape also has __blocks, which runs a
 * chunk of blocks in one call.
 * A kernel with syncgrid() runs every thread of its grid as fibers of one
 * group on the calling thread, so that all blocks are resident at once.
 * Under the race checker (check_race.c) every kernel runs on fibers, its
 * blocks one after another on the calling thread, and the scheduler tells
 * the checker of each barrier it releases and turns threads that wait at
 * different barriers, or at one that a returned thread never reaches, and
 * warp collectives with bad masks, into the call's failure.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "kjit_runtime.h"

/* ----------------------------------------------------------- vectorized */

typedef struct RangeJob {
    KjRangeFn range;
    void **args;
    int64_t lead, line; /* kj_cpu_run_range's */
} RangeJob;

void kj_cpu_run_range_here(KjRangeFn range, void **args, int64_t begin, int64_t end, int64_t chunk)
{
    for (int64_t b = begin; b < end; b += chunk) {
        if (kj_cancel_requested())
            return;
        range(args, b, end - b > chunk ? b + chunk : end);
    }
}

/*
 * [begin, end) with its first piece ending where an output element starts a
 * cache line, so that the loop of each later piece stores whole lines (the
 * chunk a multiple of the line): a 64-byte vector store or load that spans
 * two lines costs two accesses, and arrays from malloc start 16 bytes into a
 * page, so every one of a 512-bit loop's accesses did (in cache, 1e5 i32
 * elements took 0.0114 ms against 0.0085 aligned: docs/performance.md).  The
 * elements are independent, so where the pieces end changes no result.
 */
static void run_range_aligned(const RangeJob *job, int64_t begin, int64_t end, int64_t chunk)
{
    if (job->line > 1 && end - begin >= 4 * job->line) {
        int64_t first = begin + ((job->lead - begin) % job->line + job->line) % job->line;
        if (first > begin) {
            job->range(job->args, begin, first);
            begin = first;
        }
    }
    kj_cpu_run_range_here(job->range, job->args, begin, end, chunk);
}

static void run_range_chunk(void *user, int64_t begin, int64_t end)
{
    run_range_aligned(user, begin, end, KJ_CPU_CANCEL_CHUNK);
}

void kj_cpu_run_range(KjPool *pool, KjRangeFn range, void **args, int64_t count, int64_t lead, int64_t line)
{
    if (count <= 0)
        return;
    RangeJob job = {range, args, lead, line};
    if (!pool) {
        run_range_aligned(&job, 0, count, KJ_CPU_CANCEL_CHUNK);
        return;
    }
    kj_pool_run(pool, count, KJ_CPU_MIN_CHUNK, run_range_chunk, &job);
}

/* ------------------------------------------------------------ grid rows */

typedef struct RowsJob {
    KjRowFn fn;
    void **args;
    int64_t width;  /* the threads of a row run (x below it) */
    int64_t height; /* the rows of one z run (y below it) */
    const uint32_t *grid;
    /* where row (y, z)'s x 0 is in the output, in elements from a line's
     * start: (base + y * step_y + z * step_z) % line; line 0: not known */
    uint64_t base, step_y, step_z, line;
} RowsJob;

/* The output's place in its lines (RowsJob's base, steps and line), from
 * where a row's x 0 lies: its element (y, z, x 0); none when its elements
 * are not on a multiple of their size or its x axis has a stride. */
static void rows_lines(RowsJob *job, const KjRowLines *l)
{
    job->line = 0;
    if (!l || !l->out || l->ndim < 1 || l->size <= 0 || 64 % l->size != 0 ||
        l->out->strides[l->ndim - 1] != 1 || (uintptr_t)l->out->data % (uintptr_t)l->size != 0)
        return;
    job->line = (uint64_t)(64 / l->size);
    job->base = (uint64_t)((uintptr_t)l->out->data % 64) / (uint64_t)l->size;
    job->step_y = job->step_z = 0;
    for (int k = 0; k < l->ndim; k++) {
        /* unsigned: a negative stride steps back modulo the line alike */
        if (l->axis[k] == 1)
            job->step_y += (uint64_t)l->out->strides[k];
        else if (l->axis[k] == 2)
            job->step_z += (uint64_t)l->out->strides[k];
    }
}

/* Threads [begin, end) of row (y, z), the first piece ending where the
 * output's element starts a line, as run_range_aligned's does, then pieces
 * of KJ_CPU_CANCEL_CHUNK with a look at cancellation between them. */
static void run_row(const RowsJob *job, KjThreadCtx *ctx, int64_t y, int64_t z, int64_t begin, int64_t end)
{
    ctx->block_idx[1] = (int32_t)y;
    ctx->block_idx[2] = (int32_t)z;
    uint64_t line = job->line;
    if (line > 1 && (uint64_t)(end - begin) >= 4 * line) {
        /* the row's x 0 is at place p of a line; x = line - p starts one */
        uint64_t place = (job->base + (uint64_t)y * job->step_y + (uint64_t)z * job->step_z) & (line - 1);
        uint64_t lead = (line - place) & (line - 1);
        int64_t first = begin + (int64_t)((lead - (uint64_t)begin) & (line - 1));
        if (first > begin) {
            job->fn(job->args, ctx, begin, first);
            begin = first;
        }
    }
    for (int64_t b = begin; b < end; b += KJ_CPU_CANCEL_CHUNK) {
        if (b != begin && kj_cancel_requested())
            return;
        job->fn(job->args, ctx, b, end - b > KJ_CPU_CANCEL_CHUNK ? b + KJ_CPU_CANCEL_CHUNK : end);
    }
}

/* Threads [begin, end) of the run, numbered x fastest, then y, then z. */
static void run_rows_chunk(void *user, int64_t begin, int64_t end)
{
    const RowsJob *job = user;
    /* the row's coordinates as __xrange reads them: blockIdx.y and .z with
     * blockDim 1 and threadIdx 0, x as threadIdx.x (target_cpu.c) */
    KjThreadCtx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.syncthreads = kj_cpu_syncthreads;
    for (int d = 0; d < 3; d++) {
        ctx.block_dim[d] = 1;
        ctx.grid_dim[d] = (int32_t)job->grid[d];
    }
    /* the first row by division, the others by stepping */
    int64_t row = begin / job->width, x = begin - row * job->width;
    int64_t z = row / job->height, y = row - z * job->height;
    /* cancellation looked at once per KJ_CPU_CANCEL_CHUNK threads, not at
     * every row (the pool looked before this chunk): a row of 1000 i32 takes
     * some hundred nanoseconds, and the look a thread-local's address */
    int64_t unlooked = 0;
    while (begin < end) {
        if (unlooked >= KJ_CPU_CANCEL_CHUNK) {
            if (kj_cancel_requested())
                return;
            unlooked = 0;
        }
        int64_t stop = end - begin < job->width - x ? end : begin + (job->width - x);
        run_row(job, &ctx, y, z, x, x + (stop - begin));
        unlooked += stop - begin;
        begin = stop;
        x = 0;
        if (++y == job->height) {
            y = 0;
            z++;
        }
    }
}

/* value + add, held at INT64_MAX or INT64_MIN where the sum passes one: a
 * thread's x (at least 0, below 2^63) is below the bound exactly when it is
 * below the held sum. */
static int64_t bound_sum(int64_t value, int64_t add)
{
    int64_t sum;
    if (__builtin_add_overflow(value, add, &sum))
        return add > 0 ? INT64_MAX : INT64_MIN;
    return sum;
}

void kj_grid_rows_limits(const KjGridRows *form, void **args, int64_t limit[3])
{
    limit[0] = limit[1] = limit[2] = INT64_MAX;
    for (int i = 0; i < form->bound_count; i++) {
        const KjGridRowsBound *bound = &form->bounds[i];
        int64_t at = bound->add;
        if (bound->param >= 0 && bound->dim >= 0) {
            const KjArrayDesc *array = args[bound->param];
            at = bound_sum(array->shape[bound->dim], bound->add);
        } else if (bound->param >= 0) {
            const void *value = args[bound->param];
            at = bound_sum(bound->dim_bytes == 4 ? *(const int32_t *)value
                                                 : *(const int64_t *)value,
                           bound->add);
        }
        if (at < limit[bound->axis])
            limit[bound->axis] = at;
    }
}

/* Rows [begin, end) of the run, whole (y fastest, then z). */
static void run_whole_rows(void *user, int64_t begin, int64_t end)
{
    const RowsJob *job = user;
    run_rows_chunk(user, begin * job->width, end * job->width);
}

KjRowsCut kj_cpu_rows_cut_setting(void)
{
    const char *env = getenv("KJIT_CPU_ROWS_CUT");
    if (env && *env >= '0' && *env <= '2' && !env[1])
        return (KjRowsCut)(*env - '0');
    return KJ_ROWS_CUT_THREADS;
}

bool kj_cpu_run_rows(KjPool *pool, KjRowFn row_fn, void **args, const uint32_t grid[3],
                     const uint32_t block[3], const int64_t limit[3], const KjRowLines *lines,
                     KjRowsCut cut)
{
    int64_t extent[3];
    for (int d = 0; d < 3; d++) {
        extent[d] = (int64_t)grid[d] * block[d];
        if (limit[d] < extent[d])
            extent[d] = limit[d] > 0 ? limit[d] : 0;
    }
    int64_t width = extent[0], rows = extent[1] * extent[2];
    /* __xrange's x is 32 bits, and its last chunk reaches 64 lanes on */
    if (width > INT32_MAX - 1024 || (width > 0 && rows > INT64_MAX / width))
        return false;
    if (width == 0 || rows == 0)
        return true;
    RowsJob job = {.fn = row_fn, .args = args, .width = width, .height = extent[1], .grid = grid};
    rows_lines(&job, lines);
    if (cut == KJ_ROWS_CUT_THREADS) {
        kj_pool_run(pool, width * rows, KJ_CPU_GRAIN_THREADS, run_rows_chunk, &job);
        return true;
    }
    if (cut == KJ_ROWS_CUT_WHOLE && rows > 1) {
        kj_pool_run(pool, rows, (KJ_CPU_MIN_CHUNK + width - 1) / width, run_whole_rows, &job);
        return true;
    }
    kj_pool_run(pool, width * rows, KJ_CPU_MIN_CHUNK, run_rows_chunk, &job);
    return true;
}

/* --------------------------------------------------------------- fibers */

/* A fiber's stack holds its kernel's local() arrays (kernel->local_bytes, at
 * most KJ_MAX_LOCAL_BYTES) and, above them, this much for the thread's frames,
 * the plain functions it calls and libm.  The pages are only touched as the
 * stack grows; below each stack an inaccessible guard page turns an overflow
 * into a fault at once rather than into another fiber's data. */
#define FIBER_FRAME_BYTES (128 * 1024)

static size_t page_bytes(void)
{
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? (size_t)page : 4096;
}

/* One fiber's stack, guard page excluded, for a kernel whose local() arrays
 * sized at launch take launch_local bytes more (kj_local_launch_bytes). */
static size_t fiber_stack_bytes(const KjIrFunction *kernel, size_t launch_local)
{
    size_t page = page_bytes();
    size_t bytes = (size_t)kernel->local_bytes + launch_local + FIBER_FRAME_BYTES;
    return (bytes + page - 1) / page * page;
}

/*
 * Switching fibers is the hot path of a kernel with barriers (one switch per
 * thread per barrier), so on x86-64 it is a dozen instructions that save the
 * callee-saved registers and the floating-point control words on the old
 * stack and load them from the new one.  swapcontext, the portable fallback,
 * also saves and restores the signal mask: a system call per switch, which
 * makes such kernels tens of times slower.
 */
#if defined(__x86_64__)
#define KJ_FAST_FIBERS 1
/* void kj_fiber_switch(void **save_sp, void *load_sp) */
void kj_fiber_switch(void **save_sp, void *load_sp) __attribute__((visibility("hidden")));
__asm__(".text\n"
        ".globl kj_fiber_switch\n"
        ".hidden kj_fiber_switch\n"
        ".type kj_fiber_switch, @function\n"
        "kj_fiber_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size kj_fiber_switch, .-kj_fiber_switch\n");
#endif

/* Where a fiber stands between two turns of its group's scheduler. */
typedef enum {
    FIBER_READY,    /* to be resumed */
    FIBER_AT_BLOCK, /* at syncthreads() or syncthreads_count/_and/_or */
    FIBER_AT_WARP,  /* at a warp collective */
    FIBER_AT_GRID,  /* at syncgrid() */
    FIBER_DONE,     /* returned: inactive from now on, as an exited GPU thread */
} FiberState;

/* Plain syncthreads(), next to the KJ_EXEC_OPS ids that ctx->collective takes. */
#define OP_SYNCTHREADS (-1)

/* A thread's part in the collective it waits at: its operands, set before it
 * yields, and its result, set by the scheduler that releases it. */
typedef struct FiberSlot {
    FiberState state;
    int32_t op;
    int32_t arg;
    uint32_t mask;
    uint64_t value;
    uint64_t result;
} FiberSlot;

/*
 * The threads of one block (or, for a kernel with syncgrid(), of every block
 * of the grid, so that all are co-resident) as fibers on one OS thread.
 * Thread i is thread i % per_block of block i / per_block, in linear order
 * (x fastest), so its warp is (i % per_block) / 32 and its lane i % 32 of that.
 */
typedef struct FiberGroup {
#if KJ_FAST_FIBERS
    void *scheduler_sp;
    void **fiber_sp;
#else
    ucontext_t scheduler;
    ucontext_t *fibers;
#endif
    char *stacks;        /* count slots of a guard page and stack_bytes of stack */
    size_t stacks_bytes; /* the whole mapping */
    size_t stack_bytes;
    KjThreadCtx *contexts;
    FiberSlot *slots;
    int count;     /* threads in the group */
    int per_block; /* threads of one block */
    int current;
    KjThreadFn thread_fn;
    void **args;
    KjRaceState *race; /* the race checker's, or NULL */
} FiberGroup;

/* A fiber finds its group here (makecontext passes only ints, and the fast
 * switch passes nothing): it is set by the scheduler of this OS thread before
 * it switches to the group's fibers. */
static _Thread_local FiberGroup *running_group;

/* Back to the scheduler: at a barrier, or for good at the thread's end. */
static void fiber_yield(FiberGroup *group)
{
#if KJ_FAST_FIBERS
    kj_fiber_switch(&group->fiber_sp[group->current], group->scheduler_sp);
#else
    swapcontext(&group->fibers[group->current], &group->scheduler);
#endif
}

static void fiber_main(void)
{
    FiberGroup *group = running_group;
    int index = group->current;
    group->thread_fn(group->args, &group->contexts[index]);
    group->slots[index].state = FIBER_DONE;
#if KJ_FAST_FIBERS
    fiber_yield(group); /* never resumed */
    kj_unreachable();
#endif
    /* ucontext: returning resumes uc_link, the scheduler. */
}

static bool is_warp_op(int32_t op)
{
    return (op >= KJ_EXEC_ACTIVEMASK && op <= KJ_EXEC_SYNCWARP) || op == KJ_EXEC_MMA;
}

/*
 * mma() for the lanes `go` of a warp whose slots are `lanes` (docs/language.md,
 * "Matrix multiply-accumulate"; compiler/backend/codegen_mma.c has the same
 * operations as shuffles, for a GPU without the instruction).  Each lane's
 * value is the address of its double[4] {a, b, c0, c1}, on its fiber's
 * stack; lane 4 g + t gets D[g][2t + i] = the fma chain over k = 0 to 3 of
 * A[g][k] (lane 4 g + k's a) and B[k][2t + i] (lane 4 (2t + i) + k's b),
 * from c_i, into its c0 and c1.  A source lane that is not present (not in
 * the lane's mask and at this mma(), past the block's last thread, returned)
 * gives the lane's own value, as a shuffle's does.  Every result is computed
 * before any operand is overwritten.
 */
static void warp_mma(FiberSlot *lanes, uint32_t go, uint32_t waiting)
{
    double d[KJ_WARP_SIZE][2];
    for (int j = 0; j < KJ_WARP_SIZE; j++) {
        if (!(go >> j & 1u))
            continue;
        const double *own = (const double *)(uintptr_t)lanes[j].value;
        uint32_t present = (lanes[j].mask & waiting) | 1u << j;
        int g = j >> 2, t = j & 3;
        for (int i = 0; i < 2; i++) {
            double acc = own[2 + i];
            for (int k = 0; k < 4; k++) {
                int sa = 4 * g + k, sb = 4 * (2 * t + i) + k;
                bool a_in = (present >> sa & 1u) && lanes[sa].op == KJ_EXEC_MMA;
                bool b_in = (present >> sb & 1u) && lanes[sb].op == KJ_EXEC_MMA;
                double a = a_in ? ((const double *)(uintptr_t)lanes[sa].value)[0] : own[0];
                double b = b_in ? ((const double *)(uintptr_t)lanes[sb].value)[1] : own[1];
                acc = fma(a, b, acc);
            }
            d[j][i] = acc;
        }
    }
    for (int j = 0; j < KJ_WARP_SIZE; j++)
        if (go >> j & 1u) {
            double *own = (double *)(uintptr_t)lanes[j].value;
            own[2] = d[j][0];
            own[3] = d[j][1];
        }
}

/* A collective of a thread that runs alone (no fibers: nobody to meet). */
static uint64_t collective_alone(KjThreadCtx *ctx, int32_t op, uint64_t value, int32_t arg)
{
    int32_t lane = (ctx->thread_idx[0] +
                    ctx->block_dim[0] * (ctx->thread_idx[1] + ctx->block_dim[1] * ctx->thread_idx[2])) %
                   KJ_WARP_SIZE;
    switch (op) {
    case KJ_EXEC_ACTIVEMASK: return 1u << lane;
    case KJ_EXEC_BALLOT: return value ? 1u << lane : 0;
    case KJ_EXEC_ALL: case KJ_EXEC_ANY: case KJ_EXEC_SYNCTHREADS_AND: case KJ_EXEC_SYNCTHREADS_OR:
    case KJ_EXEC_SYNCTHREADS_COUNT:
        return value != 0;
    case KJ_EXEC_SHFL: case KJ_EXEC_SHFL_UP: case KJ_EXEC_SHFL_DOWN: case KJ_EXEC_SHFL_XOR:
        return value;
    case KJ_EXEC_MMA: { /* every other lane absent: its own a and b throughout */
        FiberSlot me[KJ_WARP_SIZE] = {0};
        me[lane] = (FiberSlot){.op = op, .value = value, .mask = 1u << lane};
        warp_mma(me, 1u << lane, 1u << lane);
        return 0;
    }
    default:
        (void)arg;
        return 0;
    }
}

/* ctx->collective: waits, as a fiber, until the scheduler releases this
 * thread's warp (or block, or grid), and returns what it computed. */
static uint64_t cpu_collective(KjThreadCtx *ctx, int32_t op, uint64_t value, int32_t arg,
                               uint32_t mask)
{
    FiberGroup *group = ctx->barrier;
    if (!group)
        return collective_alone(ctx, op, value, arg);
    FiberSlot *slot = &group->slots[ctx - group->contexts];
    slot->op = op;
    slot->value = value;
    slot->arg = arg;
    slot->mask = mask;
    slot->state = is_warp_op(op)          ? FIBER_AT_WARP
                  : op == KJ_EXEC_SYNCGRID ? FIBER_AT_GRID
                                           : FIBER_AT_BLOCK;
    fiber_yield(group);
    return slot->result;
}

void kj_cpu_syncthreads(KjThreadCtx *ctx)
{
    if (ctx->barrier) /* without fibers a single thread has nobody to wait for */
        cpu_collective(ctx, OP_SYNCTHREADS, 0, 0, 0);
}

/* ------------------------------------------------------- releasing barriers */

/*
 * The result of warp collective `op` for `lane`, among the lanes `present`
 * (a bit per lane) whose slots are `lanes`, `truth` having a bit for each
 * lane whose operand is not zero.  A shuffle whose source lane is
 * not present (it has exited, is not in the mask, or lies past the block's
 * last thread) gives the lane's own value: CUDA leaves that undefined.
 */
static uint64_t warp_result(const FiberSlot *lanes, int lane, uint32_t present, uint32_t truth)
{
    const FiberSlot *me = &lanes[lane];
    uint32_t ballot = truth & present;
    int source = lane;
    /* Only the low five bits of the lane argument count, as in PTX's shfl. */
    int arg = me->arg & (KJ_WARP_SIZE - 1);
    switch (me->op) {
    case KJ_EXEC_ACTIVEMASK: return present;
    case KJ_EXEC_BALLOT: return ballot;
    case KJ_EXEC_ALL: return ballot == present;
    case KJ_EXEC_ANY: return ballot != 0;
    case KJ_EXEC_SHFL: source = arg; break;
    case KJ_EXEC_SHFL_UP: source = lane - arg; break;
    case KJ_EXEC_SHFL_DOWN: source = lane + arg; break;
    case KJ_EXEC_SHFL_XOR: source = lane ^ arg; break;
    default: return 0; /* syncwarp */
    }
    if (source < 0 || source >= KJ_WARP_SIZE || !(present >> source & 1u))
        return me->value;
    return lanes[source].value;
}

/* ------------------------------------------------- the race checker's view */

/* The race checker's failure between threads a and b of the group (false, so
 * the caller stops releasing). */
static bool race_fail(FiberGroup *group, KjRaceKind kind, int a, int b, int64_t v0, int64_t v1)
{
    KjRaceState *race = group->race;
    kj_race_fail_sync(race, kind, a, kj_race_pending_site(race, a), b,
                      kj_race_pending_site(race, b), v0, v1);
    return false;
}

/*
 * Before lanes `go` of the warp at `base` (of `lanes` lanes) leave their
 * collectives: each names its own lane in its mask, the lanes it names that
 * meet it are at the same collective with the same mask, none it names is
 * live but elsewhere (at a block barrier: not strict), and a shuffle reads
 * a lane that takes part.  The lanes a partial warp lacks do not count.
 */
static bool race_check_warp(FiberGroup *group, int base, int lanes, uint32_t go, uint32_t waiting,
                            uint32_t live)
{
    FiberSlot *slots = &group->slots[base];
    uint32_t exists = lanes >= 32 ? 0xffffffffu : (1u << lanes) - 1;
    for (int j = 0; j < lanes; j++) {
        if (!(go >> j & 1u) || slots[j].op == KJ_EXEC_ACTIVEMASK)
            continue;
        uint32_t mask = slots[j].mask;
        if (!(mask >> j & 1u))
            return race_fail(group, KJ_RACE_MASK_OWN_LANE, base + j, base + j, mask, j);
        for (int k = 0; k < lanes; k++) {
            if (k == j || !(mask >> k & 1u) || !(live >> k & 1u))
                continue;
            if (!(waiting >> k & 1u) || slots[k].op != slots[j].op)
                return race_fail(group, KJ_RACE_DIVERGENT, base + j, base + k, 0, 0);
            if ((slots[k].mask & exists) != (mask & exists))
                return race_fail(group, KJ_RACE_MASK_DISAGREE, base + j, base + k, mask,
                                 slots[k].mask);
        }
        /* mma() reads every lane of the warp: one missing (past the block's
         * last thread, returned) is a mistake, undefined on a GPU */
        for (int k = 0; slots[j].op == KJ_EXEC_MMA && k < KJ_WARP_SIZE; k++)
            if (k >= lanes || !(waiting >> k & 1u))
                return race_fail(group, KJ_RACE_INACTIVE_LANE, base + j, base + j, k, 0);
        int source = -1, arg = slots[j].arg & (KJ_WARP_SIZE - 1);
        switch (slots[j].op) {
        case KJ_EXEC_SHFL: source = arg; break;
        case KJ_EXEC_SHFL_UP: source = j - arg; break;
        case KJ_EXEC_SHFL_DOWN: source = j + arg; break;
        case KJ_EXEC_SHFL_XOR: source = j ^ arg; break;
        default: break;
        }
        /* A source past the warp's ends (up, down), past the block's last
         * thread, or returned gives the lane's own value, as
         * docs/language.md defines; a live lane that is not in the mask, or
         * not at this collective, is a mistake. */
        bool is_shuffle = slots[j].op >= KJ_EXEC_SHFL && slots[j].op <= KJ_EXEC_SHFL_XOR;
        if (is_shuffle && source >= 0 && source < lanes && (live >> source & 1u) &&
            !((mask & waiting) >> source & 1u) && source != j)
            return race_fail(group, KJ_RACE_INACTIVE_LANE, base + j, base + j, source, 0);
    }
    return true;
}

/* Before a block's threads leave the barrier they all wait at: the same
 * barrier for all, and none of them has returned. */
static bool race_check_block(FiberGroup *group, int block)
{
    FiberSlot *slots = &group->slots[block];
    KjRaceState *race = group->race;
    int first = -1, returned = -1;
    for (int t = 0; t < group->per_block; t++) {
        if (slots[t].state == FIBER_DONE) {
            if (returned < 0)
                returned = t;
            continue;
        }
        if (first < 0)
            first = t;
        else if (kj_race_pending_site(race, block + t) != kj_race_pending_site(race, block + first))
            return race_fail(group, KJ_RACE_DIVERGENT, block + first, block + t, 0, 0);
    }
    if (first >= 0 && returned >= 0)
        return race_fail(group, KJ_RACE_RETURNED, block + first, block + returned, 0, 0);
    return true;
}

/* A group that can go no further: two threads of a block at different
 * barriers (a syncthreads() and a syncgrid()), as the checker's failure. */
static void race_check_stuck(FiberGroup *group)
{
    for (int block = 0; block < group->count; block += group->per_block)
        for (int t = block; t < block + group->per_block; t++)
            for (int u = t + 1; u < block + group->per_block; u++)
                if (group->slots[t].state != FIBER_DONE && group->slots[u].state != FIBER_DONE &&
                    group->slots[t].state != group->slots[u].state) {
                    race_fail(group, KJ_RACE_DIVERGENT, t, u, 0, 0);
                    return;
                }
}

/*
 * Releases lanes waiting at warp collectives.  strict: a lane goes on only
 * when every live lane of its mask waits at a warp collective too (they meet,
 * as on a GPU).  Not strict (no other barrier can be released: some lanes of
 * the mask wait at a block or grid barrier instead, as in code that diverges
 * around a shuffle), the lanes that wait go on among themselves, the others
 * counting as inactive.  Returns whether any lane was released.
 */
static bool release_warps(FiberGroup *group, bool strict)
{
    bool released = false;
    for (int block = 0; block < group->count; block += group->per_block)
        for (int base = block; base < block + group->per_block; base += KJ_WARP_SIZE) {
            int lanes = block + group->per_block - base;
            if (lanes > KJ_WARP_SIZE)
                lanes = KJ_WARP_SIZE;
            FiberSlot *slots = &group->slots[base];
            uint32_t waiting = 0, live = 0, truth = 0;
            for (int j = 0; j < lanes; j++) {
                if (slots[j].state == FIBER_AT_WARP)
                    waiting |= 1u << j;
                if (slots[j].state != FIBER_DONE)
                    live |= 1u << j;
                if (slots[j].value != 0)
                    truth |= 1u << j;
            }
            if (!waiting)
                continue;
            uint32_t go = 0;
            for (int j = 0; j < lanes; j++)
                if ((waiting >> j & 1u) && (!strict || (slots[j].mask & live & ~waiting) == 0))
                    go |= 1u << j;
            if (group->race && go && !race_check_warp(group, base, lanes, go, waiting, live))
                return false;
            uint32_t mma = 0;
            for (int j = 0; j < lanes; j++)
                if ((go >> j & 1u) && slots[j].op == KJ_EXEC_MMA)
                    mma |= 1u << j;
                else if (go >> j & 1u)
                    slots[j].result =
                        warp_result(slots, j, (slots[j].mask & waiting) | 1u << j, truth);
            if (mma)
                warp_mma(slots, mma, waiting);
            for (int j = 0; j < lanes; j++)
                if (go >> j & 1u)
                    slots[j].state = FIBER_READY;
            /* the lanes' accesses before and after are ordered only when
             * every live lane of the warp took part */
            if (group->race && go && go == live)
                kj_race_warp_barrier(group->race, block / group->per_block,
                                     (base - block) / KJ_WARP_SIZE);
            released = released || go;
        }
    return released;
}

/* Releases each block whose live threads all wait at a block barrier, with
 * the count, and and or of their predicates. */
static bool release_blocks(FiberGroup *group)
{
    bool released = false;
    for (int block = 0; block < group->count; block += group->per_block) {
        FiberSlot *slots = &group->slots[block];
        int live = 0, waiting = 0, count = 0;
        for (int t = 0; t < group->per_block; t++) {
            if (slots[t].state == FIBER_DONE)
                continue;
            live++;
            if (slots[t].state == FIBER_AT_BLOCK) {
                waiting++;
                count += slots[t].value != 0;
            }
        }
        if (live == 0 || waiting != live)
            continue;
        if (group->race) {
            if (!race_check_block(group, block))
                return false;
            kj_race_block_barrier(group->race, block / group->per_block);
        }
        for (int t = 0; t < group->per_block; t++) {
            if (slots[t].state != FIBER_AT_BLOCK)
                continue;
            slots[t].result = slots[t].op == KJ_EXEC_SYNCTHREADS_AND ? count == live
                              : slots[t].op == KJ_EXEC_SYNCTHREADS_OR ? count > 0
                                                                      : (uint64_t)count;
            slots[t].state = FIBER_READY;
        }
        released = true;
    }
    return released;
}

/* Releases the grid barrier once every live thread of the group waits at it. */
static bool release_grid(FiberGroup *group)
{
    int live = 0, waiting = 0;
    for (int i = 0; i < group->count; i++) {
        live += group->slots[i].state != FIBER_DONE;
        waiting += group->slots[i].state == FIBER_AT_GRID;
    }
    if (live == 0 || waiting != live)
        return false;
    if (group->race) {
        for (int block = 0; block < group->count; block += group->per_block)
            if (!race_check_block(group, block))
                return false;
        kj_race_grid_barrier(group->race);
    }
    for (int i = 0; i < group->count; i++)
        if (group->slots[i].state == FIBER_AT_GRID)
            group->slots[i].state = FIBER_READY;
    return true;
}

/* ------------------------------------------------------------ the group */

/* The start of fiber i's stack slot: its guard page, then its stack. */
static char *fiber_slot(FiberGroup *group, int i)
{
    return group->stacks + (size_t)i * (page_bytes() + group->stack_bytes);
}

static bool fiber_group_init(FiberGroup *group, int count, int per_block, size_t stack_bytes)
{
    memset(group, 0, sizeof *group);
    group->count = count;
    group->per_block = per_block;
    group->stack_bytes = stack_bytes;
#if KJ_FAST_FIBERS
    group->fiber_sp = calloc((size_t)count, sizeof *group->fiber_sp);
    bool switches = group->fiber_sp != NULL;
#else
    group->fibers = calloc((size_t)count, sizeof *group->fibers);
    bool switches = group->fibers != NULL;
#endif
    group->contexts = calloc((size_t)count, sizeof *group->contexts);
    group->slots = calloc((size_t)count, sizeof *group->slots);
    /* Reserved, not committed: a block of 1024 threads with 512 KiB of local()
     * each maps 640 MiB but uses only the pages its threads touch. */
    group->stacks_bytes = (size_t)count * (page_bytes() + stack_bytes);
    void *stacks = mmap(NULL, group->stacks_bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    group->stacks = stacks == MAP_FAILED ? NULL : stacks;
    bool guarded = group->stacks != NULL;
    for (int i = 0; guarded && i < count; i++)
        guarded = mprotect(fiber_slot(group, i), page_bytes(), PROT_NONE) == 0;
    return switches && group->contexts && group->slots && guarded;
}

static void fiber_group_free(FiberGroup *group)
{
#if KJ_FAST_FIBERS
    free(group->fiber_sp);
#else
    free(group->fibers);
#endif
    free(group->contexts);
    free(group->slots);
    if (group->stacks)
        munmap(group->stacks, group->stacks_bytes);
}

/* Makes fiber i start at fiber_main on its own stack the first time it is
 * switched to. */
static void fiber_prepare(FiberGroup *group, int i)
{
    char *stack = fiber_slot(group, i) + page_bytes();
#if KJ_FAST_FIBERS
    /* What kj_fiber_switch pops, from the top of a 16-byte aligned stack: a
     * fake return address for fiber_main (so it starts as if called), the
     * address kj_fiber_switch returns to, six callee-saved registers, and
     * the MXCSR and x87 control words of this thread. */
    uint64_t *top = (uint64_t *)(((uintptr_t)(stack + group->stack_bytes)) & ~(uintptr_t)15);
    uint64_t *sp = top - 9;
    sp[8] = 0;
    sp[7] = (uint64_t)(uintptr_t)fiber_main;
    for (int r = 1; r <= 6; r++)
        sp[r] = 0;
    uint32_t mxcsr;
    uint16_t fpu_control;
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(fpu_control));
    sp[0] = (uint64_t)mxcsr | ((uint64_t)fpu_control << 32);
    group->fiber_sp[i] = sp;
#else
    getcontext(&group->fibers[i]);
    group->fibers[i].uc_stack.ss_sp = stack;
    group->fibers[i].uc_stack.ss_size = group->stack_bytes;
    group->fibers[i].uc_link = &group->scheduler;
    makecontext(&group->fibers[i], fiber_main, 0);
#endif
}

static void fiber_resume(FiberGroup *group, int i)
{
    group->current = i;
    if (group->race) /* for the accesses of plain functions, which have no ctx */
        kj_race_running(group->race, &group->contexts[i]);
#if KJ_FAST_FIBERS
    kj_fiber_switch(&group->scheduler_sp, group->fiber_sp[i]);
#else
    swapcontext(&group->scheduler, &group->fibers[i]);
#endif
}

/*
 * Runs every thread of the group to its end, one barrier interval at a time:
 * each turn resumes every ready thread once, and it runs to its next barrier
 * or its end; then the barriers whose threads have all arrived let them go
 * (warp collectives first, then blocks, then the grid).  Threads that ended
 * no longer count, as on a GPU.  false when threads wait at barriers that can
 * never all be reached (some of a block at syncthreads(), others at
 * syncgrid()): the threads are abandoned where they stand.
 */
static bool fiber_group_turns(FiberGroup *group);

static bool fiber_group_run(FiberGroup *group)
{
    running_group = group;
    bool done = fiber_group_turns(group);
    running_group = NULL;
    if (group->race)
        kj_race_running(group->race, NULL);
    return done;
}

static bool fiber_group_turns(FiberGroup *group)
{
    for (int i = 0; i < group->count; i++) {
        group->slots[i].state = FIBER_READY;
        fiber_prepare(group, i);
    }
    for (;;) {
        /* a cancelled call's fibers are abandoned where they stand (at a
         * barrier, or after polling), as after a deadlock */
        if (kj_cancel_requested() || kj_race_failed(group->race))
            return true;
        bool live = false;
        for (int i = 0; i < group->count; i++) {
            if (group->slots[i].state == FIBER_READY)
                fiber_resume(group, i);
            live = live || group->slots[i].state != FIBER_DONE;
        }
        if (!live)
            return true;
        if (!release_warps(group, true) && !release_blocks(group) && !release_grid(group) &&
            !release_warps(group, false)) {
            if (!group->race)
                return false;
            /* the checker's failure says what went wrong, or the threads are stuck */
            if (!kj_race_failed(group->race))
                race_check_stuck(group);
            return kj_race_failed(group->race);
        }
    }
}

/* ---------------------------------------------------------------- kernels */

typedef struct KernelJob {
    const KjIrFunction *kernel;
    KjThreadFn thread_fn;
    KjThreadFn block_fn;
    KjBlocksFn blocks_fn; /* block_fn's blocks in one call, or NULL */
    void **args;
    uint32_t grid[3];
    uint32_t block[3];
    size_t dynamic_shared_bytes;
    size_t launch_local_bytes; /* per thread, for local() sized at launch */
    bool shared_written; /* block_fn writes all static shared memory before reading it */
    bool guard_shared;    /* KJIT_VERIFY: shared memory is fenced by guard bytes */
    KjRaceState *race;    /* the race checker's: fibers, blocks in order */
    _Atomic int failed;   /* a chunk could not get its memory */
    _Atomic int overrun;  /* the code wrote into a guard (a compiler bug) */
    _Atomic int deadlock; /* a block's threads waited at different barriers */
} KernelJob;

static void block_coordinates(const KernelJob *job, int64_t linear, int32_t out[3])
{
    out[0] = (int32_t)(linear % job->grid[0]);
    out[1] = (int32_t)((linear / job->grid[0]) % job->grid[1]);
    out[2] = (int32_t)(linear / ((int64_t)job->grid[0] * job->grid[1]));
}

static void fill_dims(const KernelJob *job, KjThreadCtx *ctx)
{
    ctx->syncthreads = kj_cpu_syncthreads;
    /* code that keeps the static part on its stack checks its own guard */
    ctx->shared_overrun = job->guard_shared ? (_Atomic int *)&job->overrun : NULL;
    ctx->collective = cpu_collective;
    ctx->dynamic_shared_bytes = (int64_t)job->dynamic_shared_bytes;
    for (int d = 0; d < 3; d++) {
        ctx->block_dim[d] = (int32_t)job->block[d];
        ctx->grid_dim[d] = (int32_t)job->grid[d];
    }
}

/* A block's shared memory, aligned for any vector access the code makes. */
static char *alloc_shared(size_t bytes)
{
    void *memory = NULL;
    return posix_memalign(&memory, 64, bytes) == 0 ? memory : NULL;
}

/* The shared memory of `blocks` blocks, each its static part then its
 * dynamic part (from a 64-byte boundary), one allocation. */
typedef struct SharedMemory {
    char *memory;
    size_t static_bytes, dynamic_offset, dynamic_bytes, stride;
    int64_t blocks;
    bool static_zeroed; /* false: the code writes the static part before it reads it */
} SharedMemory;

/*
 * With KJIT_VERIFY (every test sets it), each block's memory is followed by
 * KJ_SHARED_GUARD_BYTES more, and those and the padding after the static and
 * the dynamic part hold KJ_SHARED_GUARD_BYTE, checked when the memory is freed:
 * compiled code that addresses more than kernel->shared_bytes (its layout
 * and the checker's figure disagreeing, a lowering's store past an array)
 * fails the launch instead of corrupting the heap silently.
 */

static void guard_span(char *from, char *to, bool check, bool *intact)
{
    for (char *p = from; p < to; p++) {
        if (!check)
            *p = (char)KJ_SHARED_GUARD_BYTE;
        else if (*p != (char)KJ_SHARED_GUARD_BYTE)
            *intact = false;
    }
}

/* Fills the guards of every block (check false) or says whether they are
 * intact (check true). */
static bool shared_guards(const SharedMemory *shared, bool check)
{
    bool intact = true;
    for (int64_t b = 0; b < shared->blocks; b++) {
        char *base = shared->memory + shared->stride * (size_t)b;
        guard_span(base + shared->static_bytes, base + shared->dynamic_offset, check, &intact);
        guard_span(base + shared->dynamic_offset + shared->dynamic_bytes, base + shared->stride,
                   check, &intact);
    }
    return intact;
}

static bool shared_alloc(const KernelJob *job, int64_t blocks, SharedMemory *out)
{
    out->static_bytes = (size_t)job->kernel->shared_bytes;
    out->static_zeroed = true;
    out->dynamic_offset = (out->static_bytes + 63) & ~(size_t)63;
    out->dynamic_bytes = job->dynamic_shared_bytes;
    out->stride = (out->dynamic_offset + job->dynamic_shared_bytes + 63) & ~(size_t)63;
    out->blocks = blocks;
    out->memory = NULL;
    if (out->stride == 0)
        return true;
    if (job->guard_shared)
        out->stride += KJ_SHARED_GUARD_BYTES;
    out->memory = alloc_shared(out->stride * (size_t)blocks);
    if (out->memory && job->guard_shared)
        shared_guards(out, false);
    return out->memory != NULL;
}

/* Frees the memory, checking its guards first. */
static void shared_free(KernelJob *job, SharedMemory *shared)
{
    if (shared->memory && job->guard_shared && !shared_guards(shared, true))
        job->overrun = 1;
    free(shared->memory);
    shared->memory = NULL;
}

/* Block b's memory, zeroed, into ctx: the bytes the kernel declares and the
 * launch's dynamic bytes (the padding between and after them is never read). */
static void shared_give(const SharedMemory *shared, int64_t b, KjThreadCtx *ctx)
{
    char *base = shared->memory ? shared->memory + shared->stride * (size_t)b : NULL;
    if (base) {
        if (shared->static_zeroed)
            memset(base, 0, shared->static_bytes);
        if (shared->dynamic_bytes)
            memset(base + shared->dynamic_offset, 0, shared->dynamic_bytes);
    }
    ctx->shared = base;
    ctx->dynamic_shared = base ? base + shared->dynamic_offset : NULL;
}

/* Blocks [begin, end) of a kernel that has no barrier. */
static void run_plain_blocks(void *user, int64_t begin, int64_t end)
{
    KernelJob *job = user;
    SharedMemory shared;
    if (!shared_alloc(job, 1, &shared)) {
        job->failed = 1;
        return;
    }
    shared.static_zeroed = !(job->shared_written && job->block_fn);
    KjThreadCtx ctx;
    memset(&ctx, 0, sizeof ctx);
    fill_dims(job, &ctx);
    if (job->blocks_fn && job->block_fn) {
        /* one call runs the chunk, every block on the same shared memory,
         * which it zeroes before each block as shared_give does */
        ctx.shared = shared.memory;
        ctx.dynamic_shared = shared.memory ? shared.memory + shared.dynamic_offset : NULL;
        job->blocks_fn(job->args, &ctx, begin, end,
                       shared.static_zeroed ? (int64_t)shared.static_bytes : 0);
        shared_free(job, &shared);
        return;
    }
    /* The block's coordinates step along from the chunk's first, x fastest
     * (no divisions per block). */
    int32_t first[3];
    block_coordinates(job, begin, first);
    uint32_t bx = (uint32_t)first[0], by = (uint32_t)first[1], bz = (uint32_t)first[2];
    for (int64_t b = begin; b < end; b++) {
        if (kj_cancel_requested())
            break;
        if (b != begin && ++bx == job->grid[0]) {
            bx = 0;
            if (++by == job->grid[1]) {
                by = 0;
                bz++;
            }
        }
        ctx.block_idx[0] = (int32_t)bx;
        ctx.block_idx[1] = (int32_t)by;
        ctx.block_idx[2] = (int32_t)bz;
        shared_give(&shared, 0, &ctx);
        if (job->block_fn) {
            job->block_fn(job->args, &ctx);
            continue;
        }
        for (uint32_t z = 0; z < job->block[2]; z++)
            for (uint32_t y = 0; y < job->block[1]; y++)
                for (uint32_t x = 0; x < job->block[0]; x++) {
                    ctx.thread_idx[0] = (int32_t)x;
                    ctx.thread_idx[1] = (int32_t)y;
                    ctx.thread_idx[2] = (int32_t)z;
                    job->thread_fn(job->args, &ctx);
                }
    }
    shared_free(job, &shared);
}

/* Sets up the contexts of the threads of blocks [first, first + blocks) as
 * group members from index 0, and runs them. */
static bool run_fiber_group(KernelJob *job, FiberGroup *fg, const SharedMemory *shared,
                            int64_t first, int64_t blocks)
{
    int t = 0;
    for (int64_t b = 0; b < blocks; b++) {
        int32_t block_idx[3];
        block_coordinates(job, first + b, block_idx);
        KjThreadCtx block_ctx;
        shared_give(shared, b, &block_ctx);
        for (uint32_t z = 0; z < job->block[2]; z++)
            for (uint32_t y = 0; y < job->block[1]; y++)
                for (uint32_t x = 0; x < job->block[0]; x++, t++) {
                    KjThreadCtx *ctx = &fg->contexts[t];
                    fill_dims(job, ctx);
                    memcpy(ctx->block_idx, block_idx, sizeof block_idx);
                    ctx->thread_idx[0] = (int32_t)x;
                    ctx->thread_idx[1] = (int32_t)y;
                    ctx->thread_idx[2] = (int32_t)z;
                    ctx->shared = block_ctx.shared;
                    ctx->dynamic_shared = block_ctx.dynamic_shared;
                    ctx->barrier = fg;
                }
    }
    fg->race = job->race;
    if (job->race && !kj_race_group_begin(job->race, first, (int)blocks, fg->stacks,
                                          fg->stacks_bytes, shared->memory,
                                          shared->stride * (size_t)blocks))
        return true; /* out of memory: the checker's failure */
    return fiber_group_run(fg);
}

/* Blocks [begin, end) of a kernel with barriers: one set of fibers, reused. */
static void run_fiber_blocks(void *user, int64_t begin, int64_t end)
{
    KernelJob *job = user;
    int threads = (int)(job->block[0] * job->block[1] * job->block[2]);
    FiberGroup fg;
    SharedMemory shared;
    bool have_shared = shared_alloc(job, 1, &shared);
    if (!fiber_group_init(&fg, threads, threads,
                          fiber_stack_bytes(job->kernel, job->launch_local_bytes)) ||
        !have_shared) {
        fiber_group_free(&fg);
        free(shared.memory);
        job->failed = 1;
        return;
    }
    fg.thread_fn = job->thread_fn;
    fg.args = job->args;
    for (int64_t b = begin; b < end && !job->deadlock && !kj_cancel_requested() &&
                            !kj_race_failed(job->race) && !kj_race_out_of_memory(job->race);
         b++)
        if (!run_fiber_group(job, &fg, &shared, b, 1))
            job->deadlock = 1;
    fiber_group_free(&fg);
    shared_free(job, &shared);
}

/* A kernel with syncgrid(): every thread of the grid a fiber of one group, on
 * the calling thread, so that all blocks are co-resident. */
static void run_cooperative(KernelJob *job, int64_t blocks, int64_t threads)
{
    FiberGroup fg;
    SharedMemory shared;
    bool have_shared = shared_alloc(job, blocks, &shared);
    if (!fiber_group_init(&fg, (int)(blocks * threads), (int)threads,
                          fiber_stack_bytes(job->kernel, job->launch_local_bytes)) ||
        !have_shared) {
        fiber_group_free(&fg);
        free(shared.memory);
        job->failed = 1;
        return;
    }
    fg.thread_fn = job->thread_fn;
    fg.args = job->args;
    if (!run_fiber_group(job, &fg, &shared, 0, blocks))
        job->deadlock = 1;
    fiber_group_free(&fg);
    shared_free(job, &shared);
}

/* Kernels whose local() arrays are smaller run anywhere. */
#define CALLER_STACK_CHECK_BYTES (64 * 1024)

/* Bytes left below this point on the calling thread's stack (SIZE_MAX when
 * the system does not say). */
static size_t caller_stack_room(void)
{
    pthread_attr_t attr;
    void *low = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return SIZE_MAX;
    int got = pthread_attr_getstack(&attr, &low, &size);
    pthread_attr_destroy(&attr);
    char here;
    if (got != 0 || !low || (uintptr_t)&here < (uintptr_t)low)
        return SIZE_MAX;
    return (size_t)((uintptr_t)&here - (uintptr_t)low);
}

kjit_status kj_cpu_run_kernel(KjPool *pool, const KjIrFunction *kernel, KjThreadFn thread_fn,
                              KjThreadFn block_fn, void **args, const uint32_t grid[3],
                              const uint32_t block[3], size_t dynamic_shared_bytes, char **error)
{
    return kj_cpu_run_kernel_blocks(pool, kernel, thread_fn, block_fn, NULL, false, args, grid, block,
                                    dynamic_shared_bytes, 0, error);
}

static kjit_status run_kernel(KjPool *pool, KernelJob job, const uint32_t grid[3],
                              const uint32_t block[3], char **error);

kjit_status kj_cpu_run_kernel_blocks(KjPool *pool, const KjIrFunction *kernel, KjThreadFn thread_fn,
                                     KjThreadFn block_fn, KjBlocksFn blocks_fn, bool shared_written,
                                     void **args, const uint32_t grid[3], const uint32_t block[3],
                                     size_t dynamic_shared_bytes, size_t launch_local_bytes,
                                     char **error)
{
    KernelJob job = {.kernel = kernel, .thread_fn = thread_fn, .block_fn = block_fn,
                     .blocks_fn = blocks_fn,
                     .shared_written = shared_written,
                     .args = args, .dynamic_shared_bytes = dynamic_shared_bytes,
                     .launch_local_bytes = launch_local_bytes,
                     .guard_shared = kj_jit && kj_jit->pipeline_verify_default()};
    return run_kernel(pool, job, grid, block, error);
}

kjit_status kj_cpu_run_kernel_race(KjRaceState *race, const KjIrFunction *kernel,
                                   KjThreadFn thread_fn, void **args, const uint32_t grid[3],
                                   const uint32_t block[3], size_t dynamic_shared_bytes,
                                   size_t launch_local_bytes, char **error)
{
    KernelJob job = {.kernel = kernel, .thread_fn = thread_fn, .race = race,
                     .args = args, .dynamic_shared_bytes = dynamic_shared_bytes,
                     .launch_local_bytes = launch_local_bytes,
                     .guard_shared = kj_jit && kj_jit->pipeline_verify_default()};
    kj_race_launch(race, grid, block);
    return run_kernel(NULL, job, grid, block, error);
}

static kjit_status run_kernel(KjPool *pool, KernelJob job, const uint32_t grid[3],
                              const uint32_t block[3], char **error)
{
    const KjIrFunction *kernel = job.kernel;
    KjThreadFn thread_fn = job.thread_fn, block_fn = job.block_fn;
    int64_t blocks = 1;
    for (int d = 0; d < 3; d++) {
        job.grid[d] = grid[d];
        job.block[d] = block[d];
        blocks *= grid[d];
    }
    if (blocks == 0 || (uint64_t)block[0] * block[1] * block[2] == 0)
        return KJIT_OK;
    /* kjit_launch refuses larger blocks; the SIMD lowering's ranges
     * (codegen_simd_range.c) count on threadIdx staying below this */
    if ((uint64_t)block[0] * block[1] * block[2] > KJ_MAX_BLOCK_THREADS) {
        char message[96];
        snprintf(message, sizeof message, "a block of more than %d threads", KJ_MAX_BLOCK_THREADS);
        *error = kj_xstrdup(message);
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    /* A kernel with barriers runs without fibers when the code has a __block
     * entry for it: its split form (barrier_split.c), whose loops over the
     * block's threads keep per-thread values in arrays of at most
     * KJ_MAX_BLOCK_THREADS. */
    bool split = kernel->uses_syncthreads && !kernel->uses_syncgrid && kernel->split && block_fn &&
                 (uint64_t)block[0] * block[1] * block[2] <= KJ_MAX_BLOCK_THREADS;
    bool fibers = (kernel->uses_syncthreads && !split) || kernel->uses_syncgrid || job.race;
    int64_t local_bytes = (split ? kernel->split->local_bytes : kernel->local_bytes) +
                          (int64_t)job.launch_local_bytes;
    if (fibers && !thread_fn) {
        *error = kj_xstrdup("kernel has no per-thread entry point for its barriers");
        return KJIT_ERROR_BACKEND;
    }
    if (!fibers && local_bytes > CALLER_STACK_CHECK_BYTES) {
        /* Without fibers the threads run on this thread's stack (and the pool
         * workers', which have KJ_POOL_STACK_BYTES): make sure the local()
         * arrays fit before running rather than overflow it. */
        size_t need = (size_t)local_bytes + FIBER_FRAME_BYTES;
        size_t room = caller_stack_room();
        if (room < need) {
            char text[256];
            snprintf(text, sizeof text, "the local() arrays of kernel %s need %zu KiB of stack per "
                     "thread, and the calling thread has %zu KiB left; call it from a thread with "
                     "a larger stack", kernel->name, need / 1024, room / 1024);
            *error = kj_xstrdup(text);
            return KJIT_ERROR_INVALID_ARGUMENT;
        }
    }
    /* blocks reaches (2^31 - 1) * 65535^2, just under 2^63 (kjit_launch's
     * limits): the grid's thread count may not fit in 64 bits, so it is
     * compared by division. */
    int64_t threads = (int64_t)block[0] * block[1] * block[2];
    if (kernel->uses_syncgrid) {
        if (blocks > KJ_CPU_MAX_COOPERATIVE_THREADS / threads) {
            char message[256];
            snprintf(message, sizeof message,
                     "syncgrid() needs every thread of the grid resident at once: %lld blocks of "
                     "%lld threads; the cpu targets run at most %d threads (as fibers on one "
                     "thread)",
                     (long long)blocks, (long long)threads, KJ_CPU_MAX_COOPERATIVE_THREADS);
            *error = kj_xstrdup(message);
            return KJIT_ERROR_INVALID_ARGUMENT;
        }
        run_cooperative(&job, blocks, threads);
    } else {
        /* The grain (kj_pool_run's min_chunk): blocks of KJ_CPU_GRAIN_THREADS
         * threads, so that a launch takes a thread of the pool per grain, and
         * one of fewer than two grains stays on the calling thread (waking the
         * pool would cost more than it saves).  A chunk of a fiber kernel so
         * holds some thousands of threads too, as it pays for its fibers'
         * set-up once. */
        int64_t min_chunk = threads < KJ_CPU_GRAIN_THREADS ? KJ_CPU_GRAIN_THREADS / threads : 1;
        KjPoolFn run = fibers ? run_fiber_blocks : run_plain_blocks;
        kj_pool_run(pool, blocks, min_chunk, run, &job);
    }
    if (job.failed) {
        *error = kj_xstrdup(fibers ? "out of memory for the stacks of a block's threads"
                                   : "out of memory for a block's shared memory");
        return KJIT_ERROR_OUT_OF_MEMORY;
    }
    if (job.overrun) {
        char message[256];
        snprintf(message, sizeof message, "internal error: the code of kernel %s wrote past the "
                 "%lld bytes of shared memory its IR declares (a compiler bug, found by "
                 "KJIT_VERIFY's guard bytes)", kernel->name, (long long)kernel->shared_bytes);
        *error = kj_xstrdup(message);
        return KJIT_ERROR_BACKEND;
    }
    if (job.deadlock) {
        *error = kj_xstrdup("the threads of a block wait at barriers that can never all be "
                            "reached (some at syncthreads(), others at syncgrid()); the launch "
                            "was abandoned");
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    return KJIT_OK;
}
