/*
 * cpu.c: the cpu and parallel targets: how compiled code is walked over its
 * index space on the host.
 *
 * A vectorized kernel's PARFOR is a range of elements cut into chunks for the
 * pool.  A @kernel runs with CUDA semantics: the runtime walks the grid's
 * blocks (across the pool on parallel), gives each block zeroed shared memory
 * of its own, and runs the block's threads.  A kernel without syncthreads()
 * runs its threads one after the other (the __block entry loops over them).  A
 * kernel with syncthreads() runs each thread as a fiber with its own stack:
 * kj_cpu_syncthreads switches back to the block's scheduler, which resumes the
 * next fiber, so every thread reaches the barrier before any goes past it.
 * That holds for barriers anywhere, inside loops and branches too, which
 * splitting the kernel at its barriers would make hard.
 */
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
} RangeJob;

static void run_range_chunk(void *user, int64_t begin, int64_t end)
{
    RangeJob *job = user;
    job->range(job->args, begin, end);
}

void kj_cpu_run_range(KjPool *pool, KjRangeFn range, void **args, int64_t count)
{
    if (count <= 0)
        return;
    if (!pool) {
        range(args, 0, count);
        return;
    }
    RangeJob job = {range, args};
    kj_pool_run(pool, count, KJ_CPU_MIN_CHUNK, run_range_chunk, &job);
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

/* One fiber's stack, guard page excluded, for a kernel. */
static size_t fiber_stack_bytes(const KjIrFunction *kernel)
{
    size_t page = page_bytes();
    size_t bytes = (size_t)kernel->local_bytes + FIBER_FRAME_BYTES;
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

typedef struct FiberBlock {
#if KJ_FAST_FIBERS
    void *scheduler_sp;
    void **fiber_sp;
#else
    ucontext_t scheduler;
    ucontext_t *fibers;
#endif
    char *stacks;       /* count slots of a guard page and stack_bytes of stack */
    size_t stacks_bytes; /* the whole mapping */
    size_t stack_bytes;
    KjThreadCtx *contexts;
    bool *done;
    int count;
    int current;
    KjThreadFn thread_fn;
    void **args;
} FiberBlock;

/* A fiber finds its block here (makecontext passes only ints, and the fast
 * switch passes nothing): it is set by the scheduler of this OS thread before
 * it switches to the block's fibers. */
static _Thread_local FiberBlock *running_block;

/* Back to the scheduler: at a barrier, or for good at the thread's end. */
static void fiber_yield(FiberBlock *block)
{
#if KJ_FAST_FIBERS
    kj_fiber_switch(&block->fiber_sp[block->current], block->scheduler_sp);
#else
    swapcontext(&block->fibers[block->current], &block->scheduler);
#endif
}

static void fiber_main(void)
{
    FiberBlock *block = running_block;
    int index = block->current;
    block->thread_fn(block->args, &block->contexts[index]);
    block->done[index] = true;
#if KJ_FAST_FIBERS
    fiber_yield(block); /* never resumed */
    kj_unreachable();
#endif
    /* ucontext: returning resumes uc_link, the scheduler. */
}

void kj_cpu_syncthreads(KjThreadCtx *ctx)
{
    FiberBlock *block = ctx->barrier;
    if (!block)
        return; /* run without fibers: a single thread has nobody to wait for */
    fiber_yield(block);
}

/* The start of fiber i's stack slot: its guard page, then its stack. */
static char *fiber_slot(FiberBlock *block, int i)
{
    return block->stacks + (size_t)i * (page_bytes() + block->stack_bytes);
}

static bool fiber_block_init(FiberBlock *block, int count, size_t stack_bytes)
{
    memset(block, 0, sizeof *block);
    block->count = count;
    block->stack_bytes = stack_bytes;
#if KJ_FAST_FIBERS
    block->fiber_sp = calloc((size_t)count, sizeof *block->fiber_sp);
    bool switches = block->fiber_sp != NULL;
#else
    block->fibers = calloc((size_t)count, sizeof *block->fibers);
    bool switches = block->fibers != NULL;
#endif
    block->contexts = calloc((size_t)count, sizeof *block->contexts);
    block->done = calloc((size_t)count, sizeof *block->done);
    /* Reserved, not committed: a block of 1024 threads with 512 KiB of local()
     * each maps 640 MiB but uses only the pages its threads touch. */
    block->stacks_bytes = (size_t)count * (page_bytes() + stack_bytes);
    void *stacks = mmap(NULL, block->stacks_bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    block->stacks = stacks == MAP_FAILED ? NULL : stacks;
    bool guarded = block->stacks != NULL;
    for (int i = 0; guarded && i < count; i++)
        guarded = mprotect(fiber_slot(block, i), page_bytes(), PROT_NONE) == 0;
    return switches && block->contexts && block->done && guarded;
}

static void fiber_block_free(FiberBlock *block)
{
#if KJ_FAST_FIBERS
    free(block->fiber_sp);
#else
    free(block->fibers);
#endif
    free(block->contexts);
    free(block->done);
    if (block->stacks)
        munmap(block->stacks, block->stacks_bytes);
}

/* Makes fiber i start at fiber_main on its own stack the first time it is
 * switched to. */
static void fiber_prepare(FiberBlock *block, int i)
{
    char *stack = fiber_slot(block, i) + page_bytes();
#if KJ_FAST_FIBERS
    /* What kj_fiber_switch pops, from the top of a 16-byte aligned stack: a
     * fake return address for fiber_main (so it starts as if called), the
     * address kj_fiber_switch returns to, six callee-saved registers, and
     * the MXCSR and x87 control words of this thread. */
    uint64_t *top = (uint64_t *)(((uintptr_t)(stack + block->stack_bytes)) & ~(uintptr_t)15);
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
    block->fiber_sp[i] = sp;
#else
    getcontext(&block->fibers[i]);
    block->fibers[i].uc_stack.ss_sp = stack;
    block->fibers[i].uc_stack.ss_size = block->stack_bytes;
    block->fibers[i].uc_link = &block->scheduler;
    makecontext(&block->fibers[i], fiber_main, 0);
#endif
}

static void fiber_resume(FiberBlock *block, int i)
{
    block->current = i;
#if KJ_FAST_FIBERS
    kj_fiber_switch(&block->scheduler_sp, block->fiber_sp[i]);
#else
    swapcontext(&block->scheduler, &block->fibers[i]);
#endif
}

/* Runs every thread of one block to its end, one barrier interval at a time. */
static void fiber_block_run(FiberBlock *block)
{
    running_block = block;
    for (int i = 0; i < block->count; i++) {
        block->done[i] = false;
        fiber_prepare(block, i);
    }
    /* Each pass resumes every live thread once: it runs to its next barrier
     * or its end.  Threads that ended no longer count at later barriers, as on
     * a GPU. */
    int live = block->count;
    while (live > 0) {
        live = 0;
        for (int i = 0; i < block->count; i++) {
            if (block->done[i])
                continue;
            fiber_resume(block, i);
            if (!block->done[i])
                live++;
        }
    }
}

/* ---------------------------------------------------------------- kernels */

typedef struct KernelJob {
    const KjIrFunction *kernel;
    KjThreadFn thread_fn;
    KjThreadFn block_fn;
    void **args;
    uint32_t grid[3];
    uint32_t block[3];
    _Atomic int failed; /* a chunk could not get its memory */
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

/* Blocks [begin, end) of a kernel that has no barrier. */
static void run_plain_blocks(void *user, int64_t begin, int64_t end)
{
    KernelJob *job = user;
    size_t shared_bytes = (size_t)job->kernel->shared_bytes;
    char *shared = shared_bytes ? alloc_shared(shared_bytes) : NULL;
    if (shared_bytes && !shared) {
        job->failed = 1;
        return;
    }
    KjThreadCtx ctx;
    memset(&ctx, 0, sizeof ctx);
    fill_dims(job, &ctx);
    ctx.shared = shared;
    for (int64_t b = begin; b < end; b++) {
        block_coordinates(job, b, ctx.block_idx);
        if (shared_bytes)
            memset(shared, 0, shared_bytes);
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
    free(shared);
}

/* Blocks [begin, end) of a kernel with barriers: one set of fibers, reused. */
static void run_fiber_blocks(void *user, int64_t begin, int64_t end)
{
    KernelJob *job = user;
    size_t shared_bytes = (size_t)job->kernel->shared_bytes;
    int threads = (int)(job->block[0] * job->block[1] * job->block[2]);
    FiberBlock fb;
    char *shared = shared_bytes ? alloc_shared(shared_bytes) : NULL;
    if (!fiber_block_init(&fb, threads, fiber_stack_bytes(job->kernel)) ||
        (shared_bytes && !shared)) {
        fiber_block_free(&fb);
        free(shared);
        job->failed = 1;
        return;
    }
    fb.thread_fn = job->thread_fn;
    fb.args = job->args;
    for (int64_t b = begin; b < end; b++) {
        int32_t block_idx[3];
        block_coordinates(job, b, block_idx);
        if (shared_bytes)
            memset(shared, 0, shared_bytes);
        int t = 0;
        for (uint32_t z = 0; z < job->block[2]; z++)
            for (uint32_t y = 0; y < job->block[1]; y++)
                for (uint32_t x = 0; x < job->block[0]; x++, t++) {
                    KjThreadCtx *ctx = &fb.contexts[t];
                    fill_dims(job, ctx);
                    memcpy(ctx->block_idx, block_idx, sizeof block_idx);
                    ctx->thread_idx[0] = (int32_t)x;
                    ctx->thread_idx[1] = (int32_t)y;
                    ctx->thread_idx[2] = (int32_t)z;
                    ctx->shared = shared;
                    ctx->barrier = &fb;
                }
        fiber_block_run(&fb);
    }
    fiber_block_free(&fb);
    free(shared);
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
                              const uint32_t block[3], char **error)
{
    KernelJob job = {.kernel = kernel, .thread_fn = thread_fn, .block_fn = block_fn,
                     .args = args};
    int64_t blocks = 1;
    for (int d = 0; d < 3; d++) {
        job.grid[d] = grid[d];
        job.block[d] = block[d];
        blocks *= grid[d];
    }
    if (blocks == 0 || (uint64_t)block[0] * block[1] * block[2] == 0)
        return KJIT_OK;
    bool fibers = kernel->uses_syncthreads;
    if (fibers && !thread_fn) {
        *error = kj_xstrdup("kernel has no per-thread entry point for its barriers");
        return KJIT_ERROR_BACKEND;
    }
    if (!fibers && kernel->local_bytes > CALLER_STACK_CHECK_BYTES) {
        /* Without fibers the threads run on this thread's stack (and the pool
         * workers', which have KJ_POOL_STACK_BYTES): make sure the local()
         * arrays fit before running rather than overflow it. */
        size_t need = (size_t)kernel->local_bytes + FIBER_FRAME_BYTES;
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
    int64_t threads = (int64_t)block[0] * block[1] * block[2];
    /* A launch of fewer than some thousands of threads stays on the calling
     * thread (waking the pool would cost more than it saves).  Otherwise plain
     * blocks go one at a time, since a block's work is unknown and can be
     * large; a chunk of a fiber kernel holds some thousands of threads, as it
     * pays for its fibers' set-up once. */
    int64_t min_chunk = 1;
    if (blocks * threads < 4096)
        min_chunk = blocks;
    else if (fibers && threads < 4096)
        min_chunk = 4096 / threads;
    KjPoolFn run = fibers ? run_fiber_blocks : run_plain_blocks;
    kj_pool_run(pool, blocks, min_chunk, run, &job);
    if (job.failed) {
        *error = kj_xstrdup(fibers ? "out of memory for the stacks of a block's threads"
                                   : "out of memory for a block's shared memory");
        return KJIT_ERROR_OUT_OF_MEMORY;
    }
    return KJIT_OK;
}
