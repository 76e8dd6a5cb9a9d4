/*
 * test_kernels_cpu.c: @kernel functions with CUDA semantics on the cpu and
 * parallel targets.
 *
 * First the runtime's own machinery with thread functions written in C: the
 * pool covers every index once, the grid walk gives each thread the CUDA
 * indices, and the fiber scheduler makes syncthreads() a real barrier (a
 * shared-memory tree reduction and a barrier inside a loop give exact answers).
 * Then kernels written in .kern, through the public API: a block reduction in
 * shared memory, atomics, device functions (a histogram's helper, a block
 * scan's step with its barriers), the newer atomics on elements of 2-D arrays,
 * the Mandelbrot and delay-and-sum seeds, each against a float64 reference
 * computed here in C on random inputs; kernels with local() arrays of 128 and
 * 512 KiB per thread, with and without barriers, and the guard page under
 * each fiber's stack.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kjit_runtime.h"

#include "case_device_functions.h"
#include "rng.h"

static uint64_t rng = 0x2545f4914f6cdd1dULL;
static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* ------------------------------------------------------------------ pool */

static void count_indices(void *user, int64_t begin, int64_t end)
{
    _Atomic int *hits = user;
    for (int64_t i = begin; i < end; i++)
        atomic_fetch_add(&hits[i], 1);
}

typedef struct Nested {
    KjPool *pool;
    _Atomic int *hits;
} Nested;

static void nested_run(void *user, int64_t begin, int64_t end)
{
    Nested *n = user;
    for (int64_t i = begin; i < end; i++)
        kj_pool_run(n->pool, 10, 1, count_indices, (void *)(n->hits + i * 10));
}

/* A pool of threads made under settings, "NAME=value ..." of the
 * KJIT_POOL_NAME variables the pool reads when it is created (set for the
 * call, unset after). */
static KjPool *pool_with(int threads, const char *settings)
{
    char copy[256], names[8][64];
    int count = 0;
    ck_assert_int_lt(snprintf(copy, sizeof copy, "%s", settings), (int)sizeof copy);
    char *rest = NULL;
    for (char *item = strtok_r(copy, " ", &rest); item; item = strtok_r(NULL, " ", &rest)) {
        char *equals = strchr(item, '=');
        ck_assert_msg(equals && count < 8, "bad pool setting %s", item);
        *equals = '\0';
        snprintf(names[count], sizeof names[count], "KJIT_POOL_%s", item);
        setenv(names[count++], equals + 1, 1);
    }
    KjPool *pool = kj_pool_create(threads);
    while (count > 0)
        unsetenv(names[--count]);
    return pool;
}

/* Every index once, with each thread's share in a slot of its own (the
 * default: shares of whole chunks, the last ones short or empty) and with
 * one counter shared by all (KJIT_POOL_SHARED=1, the pool before slots). */
START_TEST(pool_covers_every_index_once)
{
    for (int shared = 0; shared < 2; shared++) {
        KjPool *pool = pool_with(4, shared ? "SHARED=1" : "");
        ck_assert_int_eq(kj_pool_threads(pool), 4);
        int64_t counts[] = {1, 7, 33, 1000, 4097, 100003};
        int64_t grains[] = {1, 16, 600};
        for (int c = 0; c < 6; c++) {
            for (int g = 0; g < 3; g++) {
                for (int repeat = 0; repeat < 3; repeat++) {
                    _Atomic int *hits = calloc((size_t)counts[c], sizeof *hits);
                    kj_pool_run(pool, counts[c], grains[g], count_indices, hits);
                    for (int64_t i = 0; i < counts[c]; i++)
                        ck_assert_int_eq(hits[i], 1);
                    free(hits);
                }
            }
        }
        /* a run from inside a chunk runs on its own thread, without deadlock */
        _Atomic int *hits = calloc(64 * 10, sizeof *hits);
        Nested n = {pool, hits};
        kj_pool_run(pool, 64, 1, nested_run, &n);
        for (int i = 0; i < 640; i++)
            ck_assert_int_eq(hits[i], 1);
        free(hits);
        kj_pool_destroy(pool);
    }
}
END_TEST

/* Which threads ran chunks of a run: each chunk notes its thread, and waits
 * a little so that every worker that can come does. */
typedef struct Seen {
    pthread_mutex_t lock;
    pthread_t threads[64];
    int count;
} Seen;

static void note_thread(void *user, int64_t begin, int64_t end)
{
    Seen *seen = user;
    pthread_mutex_lock(&seen->lock);
    bool known = false;
    for (int i = 0; i < seen->count; i++)
        known = known || pthread_equal(seen->threads[i], pthread_self());
    if (!known && seen->count < 64)
        seen->threads[seen->count++] = pthread_self();
    pthread_mutex_unlock(&seen->lock);
    usleep(2000);
}

/* user: int64_t hits[]; each item of the range counted, slowly. */
static void count_hits(void *user, int64_t begin, int64_t end)
{
    int64_t *hits = user;
    for (int64_t i = begin; i < end; i++)
        __atomic_fetch_add(&hits[i], 1, __ATOMIC_RELAXED);
    usleep(500);
}

static int threads_taking_part(KjPool *pool, int64_t count, int64_t min_chunk)
{
    Seen seen = {.lock = PTHREAD_MUTEX_INITIALIZER};
    kj_pool_run(pool, count, min_chunk, note_thread, &seen);
    return seen.count;
}

/* The grain (issue 25, item 7): a run takes at most count / min_chunk
 * threads, so a small one does not wake the whole pool; a large one may
 * take them all.  (KJIT_POOL_WIDEN=0: runs back to back find the workers
 * awake, and take them past the grain otherwise: the next test.) */
START_TEST(pool_threads_follow_the_work)
{
    /* chunks of 2 ms would prove the runs long: no growth here */
    KjPool *pool = pool_with(8, "GROW_US=60000000 WIDEN=0");
    for (int round = 0; round < 5; round++) {
        ck_assert_int_eq(threads_taking_part(pool, 10, 10), 1);  /* under two grains: the caller */
        ck_assert_int_le(threads_taking_part(pool, 20, 10), 2);
        ck_assert_int_le(threads_taking_part(pool, 39, 10), 3);
        ck_assert_int_le(threads_taking_part(pool, 40, 10), 4);
    }
    int most = 0;
    for (int round = 0; round < 5; round++) {
        int n = threads_taking_part(pool, 64, 1);
        most = n > most ? n : most;
    }
    ck_assert_int_gt(most, 4); /* the whole pool can still take part */
    kj_pool_destroy(pool);
}
END_TEST

/* Workers still spinning from the last run join a run past its grain (it
 * takes every thread its pieces, a quarter grain, can feed), and not
 * with workers that sleep at once. */
START_TEST(pool_awake_workers_join_past_the_grain)
{
    KjPool *pool = pool_with(8, "GROW_US=60000000 SPIN_US=1000000");
    KjPool *sleepy = pool_with(8, "GROW_US=60000000 SPIN_US=0");
    int most = 0, most_sleepy = 0;
    for (int round = 0; round < 5; round++) {
        threads_taking_part(pool, 64, 1); /* starts the workers; they spin */
        int n = threads_taking_part(pool, 40, 20); /* two grains; pieces of 5: 8 threads */
        most = n > most ? n : most;
        threads_taking_part(sleepy, 64, 1);
        n = threads_taking_part(sleepy, 40, 20);
        most_sleepy = n > most_sleepy ? n : most_sleepy;
    }
    ck_assert_int_gt(most, 2);
    ck_assert_int_le(most_sleepy, 2);
    kj_pool_destroy(pool);
    kj_pool_destroy(sleepy);
}
END_TEST

/* A run whose items are longer than its grain supposes (a few blocks of
 * threads that loop for milliseconds) takes more threads once it has gone
 * on for the grow time: from the calling thread alone (under two grains),
 * and from its grain's threads. */
START_TEST(pool_grows_when_the_work_is_long)
{
    KjPool *pool = pool_with(8, "GROW_US=1000");
    int alone = 0, grained = 0;
    for (int round = 0; round < 5; round++) {
        int n = threads_taking_part(pool, 8, 8); /* one grain: pieces of 2, 2 ms each */
        alone = n > alone ? n : alone;
        n = threads_taking_part(pool, 40, 20); /* two grains; pieces of 5 */
        grained = n > grained ? n : grained;
    }
    ck_assert_int_gt(alone, 1);
    ck_assert_int_gt(grained, 2);
    /* every item still runs exactly once */
    int64_t hits[64] = {0};
    kj_pool_run(pool, 64, 64, count_hits, hits);
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(hits[i], 1);
    kj_pool_destroy(pool);
}
END_TEST

/* Every thread of a run at once: each chunk counts itself in and waits
 * (up to 5 s) until `want` have come, so a run of `want` one-item slots
 * meets only if every worker it seats gets there. */
typedef struct Meeting {
    _Atomic int arrived, came; /* came: those that had when the first gave up */
    int want;
    _Atomic bool met, given_up;
} Meeting;

static void meet(void *user, int64_t begin, int64_t end)
{
    Meeting *m = user;
    atomic_fetch_add(&m->arrived, 1);
    for (int waited = 0; waited < 25000 && !atomic_load(&m->given_up); waited++) {
        if (atomic_load(&m->arrived) >= m->want) {
            atomic_store(&m->met, true);
            return;
        }
        usleep(200);
    }
    if (!atomic_exchange(&m->given_up, true)) /* the chunks left (stolen) do not wait again */
        atomic_store(&m->came, atomic_load(&m->arrived));
}

/* Runs that find every worker asleep (no spinning) wake them all: by the
 * caller alone (KJIT_POOL_WAKE_FAN=0), or in a tree whose woken wake the
 * next (fan 1: a chain of single wake-ups, the deepest; 2; 3).
 * A woken worker that does not pass the wake on leaves the run short of
 * threads, and its meeting never happens. */
START_TEST(pool_wakes_every_sleeper)
{
    const char *fans[] = {"0", "1", "2", "3"};
    for (int f = 0; f < 4; f++) {
        char settings[64];
        snprintf(settings, sizeof settings, "SPIN_US=0 GROW_US=60000000 WAKE_FAN=%s", fans[f]);
        KjPool *pool = pool_with(8, settings);
        for (int round = 0; round < 4; round++) {
            Meeting m = {.want = 8};
            kj_pool_run(pool, 8, 1, meet, &m);
            ck_assert_msg(atomic_load(&m.met), "fan %s, round %d: %d of 8 threads came", fans[f],
                          round, atomic_load(&m.came));
            usleep(5000); /* the workers go back to sleep */
        }
        kj_pool_destroy(pool);
    }
}
END_TEST

/* Runs that come 20 ms apart: with the spin window grown from the time
 * between runs (KJIT_POOL_SPIN_MAX_US above it) the workers are still
 * spinning when the next comes, and join it past its grain; with the fixed
 * 100 us (SPIN_MAX_US=0) they sleep, and it keeps its grain's two threads. */
START_TEST(pool_spin_follows_the_time_between_runs)
{
    KjPool *adaptive = pool_with(4, "GROW_US=60000000 SPIN_US=100 SPIN_MAX_US=1000000");
    KjPool *fixed = pool_with(4, "GROW_US=60000000 SPIN_US=100 SPIN_MAX_US=0");
    KjPool *pools[2] = {adaptive, fixed};
    int most[2] = {0, 0};
    for (int p = 0; p < 2; p++) {
        threads_taking_part(pools[p], 64, 1); /* starts the workers */
        for (int round = 0; round < 6; round++) {
            usleep(20000);
            int n = threads_taking_part(pools[p], 40, 20); /* two grains; pieces of 5: 4 */
            most[p] = n > most[p] ? n : most[p];
        }
    }
    ck_assert_int_gt(most[0], 2);
    ck_assert_int_le(most[1], 2);
    kj_pool_destroy(adaptive);
    kj_pool_destroy(fixed);
}
END_TEST

/* ------------------------------------------------------ C thread functions */

static KjIrFunction fake_kernel(bool barriers, int64_t shared_bytes)
{
    KjIrFunction fn;
    memset(&fn, 0, sizeof fn);
    fn.name = "test_kernel";
    fn.symbol = "test_kernel";
    fn.kind = KJ_IR_FN_KERNEL;
    fn.uses_syncthreads = barriers;
    fn.shared_bytes = shared_bytes;
    return fn;
}

/* args[0]: int64_t *out; writes an id that encodes every index it saw. */
static void record_indices(void **args, KjThreadCtx *ctx)
{
    int64_t *out = args[0];
    int64_t bx = ctx->block_dim[0], by = ctx->block_dim[1];
    int64_t gx = ctx->grid_dim[0], gy = ctx->grid_dim[1];
    int64_t x = ctx->block_idx[0] * bx + ctx->thread_idx[0];
    int64_t y = ctx->block_idx[1] * by + ctx->thread_idx[1];
    int64_t z = ctx->block_idx[2] * ctx->block_dim[2] + ctx->thread_idx[2];
    int64_t linear = (z * gy * by + y) * gx * bx + x;
    /* shared memory starts zeroed for every block */
    ck_assert(ctx->shared == NULL || ((int32_t *)ctx->shared)[0] >= 0);
    out[linear] += linear + 1;
}

static void grid_walk(KjPool *pool)
{
    uint32_t grid[3] = {3, 2, 2}, block[3] = {4, 3, 2};
    int64_t total = 3 * 2 * 2 * 4 * 3 * 2;
    int64_t *out = calloc((size_t)total, sizeof *out);
    void *args[1] = {out};
    KjIrFunction kernel = fake_kernel(false, 0);
    char *error = NULL;
    ck_assert_int_eq(kj_cpu_run_kernel(pool, &kernel, record_indices, NULL, args, grid, block,
                                       0, &error), KJIT_OK);
    for (int64_t i = 0; i < total; i++)
        ck_assert_int_eq(out[i], i + 1);
    free(out);
}

START_TEST(grid_walk_gives_cuda_indices)
{
    grid_walk(NULL);
    KjPool *pool = kj_pool_create(3);
    grid_walk(pool);
    kj_pool_destroy(pool);
}
END_TEST

/* Block tree reduction in shared memory: args[0] int64 *in, args[1] int64 *out. */
static void block_reduce(void **args, KjThreadCtx *ctx)
{
    const int64_t *in = args[0];
    int64_t *out = args[1];
    int64_t *cache = (int64_t *)ctx->shared;
    int t = ctx->thread_idx[0], n = ctx->block_dim[0];
    cache[t] = in[ctx->block_idx[0] * n + t];
    kj_cpu_syncthreads(ctx);
    for (int stride = n / 2; stride > 0; stride /= 2) {
        if (t < stride)
            cache[t] += cache[t + stride];
        kj_cpu_syncthreads(ctx);
    }
    if (t == 0)
        out[ctx->block_idx[0]] = cache[0];
}

static void reduce_on(KjPool *pool)
{
    enum { BLOCKS = 37, THREADS = 256 };
    int64_t *in = malloc(sizeof(int64_t) * BLOCKS * THREADS);
    int64_t out[BLOCKS], want[BLOCKS] = {0};
    for (int b = 0; b < BLOCKS; b++)
        for (int t = 0; t < THREADS; t++) {
            in[b * THREADS + t] = (int64_t)(next_random() % 1000000);
            want[b] += in[b * THREADS + t];
        }
    void *args[2] = {in, out};
    KjIrFunction kernel = fake_kernel(true, THREADS * sizeof(int64_t));
    uint32_t grid[3] = {BLOCKS, 1, 1}, block[3] = {THREADS, 1, 1};
    char *error = NULL;
    ck_assert_int_eq(kj_cpu_run_kernel(pool, &kernel, block_reduce, NULL, args, grid, block,
                                       0, &error), KJIT_OK);
    for (int b = 0; b < BLOCKS; b++)
        ck_assert_int_eq(out[b], want[b]);
    free(in);
}

START_TEST(syncthreads_reduction_is_exact)
{
    reduce_on(NULL);
    KjPool *pool = kj_pool_create(4);
    reduce_on(pool);
    kj_pool_destroy(pool);
}
END_TEST

/* A barrier in a loop: each round every thread reads its left neighbour's
 * value from the previous round.  Without a real barrier, some threads read
 * a value already updated in this round. */
static void rotate_rounds(void **args, KjThreadCtx *ctx)
{
    int64_t *out = args[0];
    int64_t *cell = (int64_t *)ctx->shared;
    int t = ctx->thread_idx[0], n = ctx->block_dim[0];
    cell[t] = t;
    kj_cpu_syncthreads(ctx);
    for (int round = 0; round < 5; round++) {
        int64_t left = cell[(t + n - 1) % n];
        kj_cpu_syncthreads(ctx);
        cell[t] = left * 3 + round;
        kj_cpu_syncthreads(ctx);
    }
    out[ctx->block_idx[0] * n + t] = cell[t];
}

START_TEST(barrier_inside_a_loop)
{
    enum { THREADS = 64, BLOCKS = 5 };
    int64_t out[BLOCKS * THREADS];
    void *args[1] = {out};
    KjIrFunction kernel = fake_kernel(true, THREADS * sizeof(int64_t));
    uint32_t grid[3] = {BLOCKS, 1, 1}, block[3] = {THREADS, 1, 1};
    char *error = NULL;
    ck_assert_int_eq(kj_cpu_run_kernel(NULL, &kernel, rotate_rounds, NULL, args, grid, block,
                                       0, &error), KJIT_OK);
    int64_t want[THREADS], next[THREADS];
    for (int t = 0; t < THREADS; t++)
        want[t] = t;
    for (int round = 0; round < 5; round++) {
        for (int t = 0; t < THREADS; t++)
            next[t] = want[(t + THREADS - 1) % THREADS] * 3 + round;
        memcpy(want, next, sizeof want);
    }
    for (int b = 0; b < BLOCKS; b++)
        for (int t = 0; t < THREADS; t++)
            ck_assert_int_eq(out[b * THREADS + t], want[t]);
}
END_TEST

/* Uses about 200 KiB of stack, a page at a time from the top down, as a
 * deep call chain would: one frame of 1 KiB per level. */
static __attribute__((noinline)) int64_t deep_frames(int depth)
{
    volatile char frame[1024];
    frame[0] = (char)depth;
    frame[sizeof frame - 1] = (char)depth;
    if (depth == 0)
        return frame[0];
    return deep_frames(depth - 1) + frame[sizeof frame - 1];
}

/* Thread 1 of the block overflows its 128 KiB fiber stack (the kernel
 * declares no local() arrays) into the stack below it, thread 0's, which has
 * ended: without a guard page nothing would notice. */
static void overflow_thread(void **args, KjThreadCtx *ctx)
{
    int64_t *out = args[0];
    if (ctx->thread_idx[0] == 1)
        out[1] = deep_frames(200);
}

/* The guard page below each fiber's stack: an overflow faults where it
 * happens (SIGSEGV, which Check expects) instead of writing over the
 * stack of the fiber below. */
START_TEST(fiber_stack_overflow_hits_the_guard_page)
{
    int64_t out[2] = {0, 0};
    void *args[1] = {out};
    KjIrFunction kernel = fake_kernel(true, 0);
    uint32_t grid[3] = {1, 1, 1}, block[3] = {2, 1, 1};
    char *error = NULL;
    kj_cpu_run_kernel(NULL, &kernel, overflow_thread, NULL, args, grid, block, 0, &error);
}
END_TEST

/* The same depth fits once the kernel declares its local() bytes: the fiber
 * stacks grow with kernel->local_bytes. */
START_TEST(fiber_stacks_grow_with_local_bytes)
{
    int64_t out[2] = {0, 0};
    void *args[1] = {out};
    KjIrFunction kernel = fake_kernel(true, 0);
    kernel.local_bytes = 256 * 1024;
    uint32_t grid[3] = {1, 1, 1}, block[3] = {2, 1, 1};
    char *error = NULL;
    ck_assert_int_eq(kj_cpu_run_kernel(NULL, &kernel, overflow_thread, NULL, args, grid, block,
                                       0, &error), KJIT_OK);
    ck_assert_int_eq(out[1], deep_frames(200));
}
END_TEST

/* --------------------------------------------------- .kern through the API */

static const char kernels_source[] =
    "@kernel\n"
    "fn block_sum(x: f64[], partial: f64[], total: i64[], counts: i64[]) {\n"
    "    let cache = shared(f64, 128);\n"
    "    let t = threadIdx.x;\n"
    "    let i = grid(1);\n"
    "    cache[t] = i < len(x) ? x[i] : 0.0;\n"
    "    syncthreads();\n"
    "    let stride = 64;\n"
    "    while stride > 0 {\n"
    "        if t < stride { cache[t] += cache[t + stride]; }\n"
    "        syncthreads();\n"
    "        stride = stride / 2;\n"
    "    }\n"
    "    if t == 0 { partial[blockIdx.x] = cache[0]; }\n"
    "    if i < len(x) {\n"
    "        atomic_add(total, 0, i64(x[i] * 1000.0));\n"
    "        atomic_add(counts, i64(x[i] * 10.0), 1);\n"
    "    }\n"
    "}\n";

static kjit_context *make_context(kjit_target target)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = 4;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    return context;
}

static void block_sum_on(kjit_target target)
{
    kjit_context *context = make_context(target);
    kjit_module *module;
    ck_assert_msg(kjit_compile_string(context, "kernels.kern", kernels_source, &module) == KJIT_OK,
                  "%s", kjit_last_error(context));
    kjit_function *fn;
    ck_assert_int_eq(kjit_module_function(module, "block_sum", &fn), KJIT_OK);
    enum { N = 100000, THREADS = 128 };
    int blocks = (N + THREADS - 1) / THREADS;
    double *x = malloc(N * sizeof(double));
    double *partial = calloc((size_t)blocks, sizeof(double));
    int64_t total = 0, counts[10] = {0};
    int64_t want_total = 0, want_counts[10] = {0};
    for (int i = 0; i < N; i++) {
        x[i] = (double)(next_random() % 1000) / 1000.0; /* exact in f64 */
        want_total += (int64_t)(x[i] * 1000.0);
        want_counts[(int64_t)(x[i] * 10.0)]++;
    }
    int64_t n = N, nb = blocks, one = 1, ten = 10;
    kjit_array X = kjit_array_make(x, KJIT_F64, 1, &n), P = kjit_array_make(partial, KJIT_F64, 1, &nb);
    kjit_array T = kjit_array_make(&total, KJIT_I64, 1, &one);
    kjit_array C = kjit_array_make(counts, KJIT_I64, 1, &ten);
    kjit_arg args[4] = {kjit_arg_array(&X), kjit_arg_array(&P), kjit_arg_array(&T),
                        kjit_arg_array(&C)};
    uint32_t grid[3] = {(uint32_t)blocks, 1, 1}, block[3] = {THREADS, 1, 1};
    ck_assert_msg(kjit_launch(fn, grid, block, args, 4, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
    for (int b = 0; b < blocks; b++) {
        /* integers / 1000 summed in a tree: exact to well under 1e-12 */
        double want = 0;
        for (int i = b * THREADS; i < N && i < (b + 1) * THREADS; i++)
            want += x[i];
        ck_assert_msg(fabs(partial[b] - want) <= 1e-12 * (1 + fabs(want)), "block %d: %g vs %g", b,
                      partial[b], want);
    }
    ck_assert_int_eq(total, want_total);
    for (int k = 0; k < 10; k++)
        ck_assert_int_eq(counts[k], want_counts[k]);
    free(x);
    free(partial);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

START_TEST(shared_reduction_and_atomics_cpu)
{
    block_sum_on(KJIT_TARGET_CPU);
}
END_TEST

START_TEST(shared_reduction_and_atomics_parallel)
{
    block_sum_on(KJIT_TARGET_PARALLEL);
}
END_TEST

/* ------------------------------------------- device functions and atomics */

static void device_functions_on(kjit_target target)
{
    kjit_context *context = make_context(target);
    static uint64_t state;
    rng_seed(&state, "test_kernels_cpu device functions");
    case_device_functions(context, &state);
    kjit_context_destroy(context);
}

/* ------------------------------------------------------ local() memory */

/* 128 KiB and 512 KiB (the most) of local() per thread, with barriers, so
 * that every thread of a block runs on a fiber stack of its own; and 512 KiB
 * without barriers, on the pool's and the caller's stacks. */
static const char local_source[] =
    "@kernel\n"
    "fn local_128k(x: f64[], out: f64[]) {\n"
    "    let l = local(f64, 16384);\n"
    "    let t = grid(1);\n"
    "    for k in range(16384) { l[k] = x[(k * 7 + t) % len(x)]; }\n"
    "    syncthreads();\n"
    "    let s = 0.0;\n"
    "    for k in range(16384) { s += l[(k * 3) % 16384] * f64(k % 5 + 1); }\n"
    "    out[t] = s;\n"
    "}\n"
    "@kernel\n"
    "fn local_512k(x: f64[], out: f64[]) {\n"
    "    let l = local(f64, 32768);\n"
    "    let m = local(i64, 32768);\n"
    "    let t = grid(1);\n"
    "    for k in range(32768) { l[k] = x[(k * 7 + t) % len(x)]; m[k] = k % 5 + 1; }\n"
    "    syncthreads();\n"
    "    let s = 0.0;\n"
    "    for k in range(32768) { s += l[(k * 3) % 32768] * f64(m[k]); }\n"
    "    out[t] = s;\n"
    "}\n"
    "@kernel\n"
    "fn local_512k_no_barrier(x: f64[], out: f64[]) {\n"
    "    let l = local(f64, 65536);\n"
    "    let t = grid(1);\n"
    "    for k in range(65536) { l[k] = x[(k * 7 + t) % len(x)]; }\n"
    "    let s = 0.0;\n"
    "    for k in range(65536) { s += l[(k * 3) % 65536] * f64(k % 5 + 1); }\n"
    "    out[t] = s;\n"
    "}\n";

/* What thread t of local_*(x, out) writes, with `count` local elements. */
static double local_reference(const double *x, int64_t n, int64_t t, int64_t count)
{
    double s = 0;
    for (int64_t k = 0; k < count; k++)
        s += x[((k * 3) % count * 7 + t) % n] * (double)(k % 5 + 1);
    return s;
}

void kj_test_local_kernel_on(kjit_target target, const char *name, int64_t count,
                             uint32_t blocks, uint32_t threads, double rtol, bool may_fail);

/* Launches local_*(x, out) on blocks x threads and compares every thread's sum
 * with the reference within rtol.  may_fail: a launch the device refuses (a
 * GPU that cannot reserve that much local memory) is accepted if it fails
 * with a message.  test_cuda.c calls it for cuda. */
void kj_test_local_kernel_on(kjit_target target, const char *name, int64_t count,
                             uint32_t blocks, uint32_t threads, double rtol, bool may_fail)
{
    kjit_context *context = make_context(target);
    kjit_module *module;
    ck_assert_msg(kjit_compile_string(context, "local.kern", local_source, &module) == KJIT_OK,
                  "%s", kjit_last_error(context));
    kjit_function *fn;
    ck_assert_int_eq(kjit_module_function(module, name, &fn), KJIT_OK);
    int64_t n = 1009, total = (int64_t)blocks * threads;
    double *x = malloc((size_t)n * sizeof(double));
    double *out = calloc((size_t)total, sizeof(double));
    for (int64_t i = 0; i < n; i++)
        x[i] = (double)(next_random() >> 11) / 9007199254740992.0;
    kjit_array X = kjit_array_make(x, KJIT_F64, 1, &n), O = kjit_array_make(out, KJIT_F64, 1, &total);
    kjit_arg args[2] = {kjit_arg_array(&X), kjit_arg_array(&O)};
    uint32_t grid[3] = {blocks, 1, 1}, block[3] = {threads, 1, 1};
    kjit_status status = kjit_launch(fn, grid, block, args, 2, NULL);
    if (status == KJIT_OK)
        status = kjit_synchronize(context);
    if (may_fail && status != KJIT_OK) {
        ck_assert_msg(kjit_last_error(context)[0] != '\0', "%s failed without a message", name);
        printf("%s on %s: refused: %s\n", name, kjit_target_name(target), kjit_last_error(context));
    } else {
        ck_assert_msg(status == KJIT_OK, "%s on %s: %s", name, kjit_target_name(target),
                      kjit_last_error(context));
        /* positive terms summed in the same order: within rtol */
        for (int64_t t = 0; t < total; t++) {
            double want = local_reference(x, n, t, count);
            ck_assert_msg(fabs(out[t] - want) <= rtol * want,
                          "%s on %s, thread %lld: %.17g vs %.17g", name,
                          kjit_target_name(target), (long long)t, out[t], want);
        }
    }
    free(x);
    free(out);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

START_TEST(device_functions_and_atomics_cpu)
{
    device_functions_on(KJIT_TARGET_CPU);
}
END_TEST

START_TEST(device_functions_and_atomics_parallel)
{
    device_functions_on(KJIT_TARGET_PARALLEL);
}
END_TEST

START_TEST(local_arrays_with_barriers_cpu)
{
    kj_test_local_kernel_on(KJIT_TARGET_CPU, "local_128k", 16384, 1, 64, 1e-12, false);
    kj_test_local_kernel_on(KJIT_TARGET_CPU, "local_512k", 32768, 2, 32, 1e-12, false);
    kj_test_local_kernel_on(KJIT_TARGET_CPU, "local_512k_no_barrier", 65536, 2, 32, 1e-12, false);
}
END_TEST

START_TEST(local_arrays_with_barriers_parallel)
{
    kj_test_local_kernel_on(KJIT_TARGET_PARALLEL, "local_128k", 16384, 1, 64, 1e-12, false);
    kj_test_local_kernel_on(KJIT_TARGET_PARALLEL, "local_512k", 32768, 3, 32, 1e-12, false);
    kj_test_local_kernel_on(KJIT_TARGET_PARALLEL, "local_512k_no_barrier", 65536, 3, 64, 1e-12,
                            false);
}
END_TEST

typedef struct SmallStackLaunch {
    kjit_function *fn;
    kjit_arg args[2];
    kjit_status status;
    kjit_context *context;
    char message[512]; /* the launching thread's last error (errors are per thread) */
} SmallStackLaunch;

static void *launch_on_small_stack(void *user)
{
    SmallStackLaunch *launch = user;
    uint32_t grid[3] = {1, 1, 1}, block[3] = {4, 1, 1};
    launch->status = kjit_launch(launch->fn, grid, block, launch->args, 2, NULL);
    snprintf(launch->message, sizeof launch->message, "%s", kjit_last_error(launch->context));
    return NULL;
}

/* A kernel without barriers runs on the calling thread's stack: one that has
 * no room for its local() arrays gets an error before anything runs. */
START_TEST(local_arrays_past_the_caller_stack_are_an_error)
{
    kjit_context *context = make_context(KJIT_TARGET_CPU);
    kjit_module *module;
    ck_assert_msg(kjit_compile_string(context, "local.kern", local_source, &module) == KJIT_OK,
                  "%s", kjit_last_error(context));
    SmallStackLaunch launch = {.context = context};
    ck_assert_int_eq(kjit_module_function(module, "local_512k_no_barrier", &launch.fn), KJIT_OK);
    int64_t n = 16, four = 4;
    double x[16] = {0}, out[4] = {-1, -1, -1, -1};
    kjit_array X = kjit_array_make(x, KJIT_F64, 1, &n), O = kjit_array_make(out, KJIT_F64, 1, &four);
    launch.args[0] = kjit_arg_array(&X);
    launch.args[1] = kjit_arg_array(&O);
    /* Code generation needs a deep stack: do it here, then launch there. */
    ck_assert_int_eq(kjit_prepare(launch.fn, launch.args, 2, NULL), KJIT_OK);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t thread;
    ck_assert_int_eq(pthread_create(&thread, &attr, launch_on_small_stack, &launch), 0);
    pthread_join(thread, NULL);
    pthread_attr_destroy(&attr);
    ck_assert_msg(launch.status == KJIT_ERROR_INVALID_ARGUMENT, "got %s: %s",
                  kjit_status_name(launch.status), launch.message);
    ck_assert_msg(strstr(launch.message, "local()") != NULL, "%s", launch.message);
    ck_assert(out[0] == -1); /* nothing ran */
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

/* The kernel of tests/genprog/regress/shared_layout.kern: shared() arrays
 * whose sizes are not multiples of 16 bytes (33 + 66 + 528), the last
 * c128 slot written by thread 32. */
static const char *unaligned_shared_source =
    "@kernel\n"
    "fn k(x: f64[], out: f64[]) {\n"
    "    let t = i64(threadIdx.x);\n"
    "    let a = shared(i8, 33);\n"
    "    let h = shared(f16, 33);\n"
    "    let z = shared(c128, 33);\n"
    "    a[t] = i8(t);\n"
    "    h[t] = f16(0.5);\n"
    "    z[t] = complex(x[t], f64(t));\n"
    "    out[t] = z[t].real + z[t].imag + f64(a[t]) + f64(h[t]);\n"
    "}\n";

/* The same kernel compiled in two contexts: the second finds the first's code
 * loaded (or in the cache) without generating any, and must still get shared
 * memory for the code's 16-byte aligned layout.  The checker once summed the
 * bare sizes (627 bytes) and only code generation raised the figure to 656,
 * so the second launch wrote past its block's memory; KJIT_VERIFY's guard
 * bytes (set for the tests) turn that into an error here. */
START_TEST(shared_layout_holds_without_code_generation)
{
    for (int round = 0; round < 2; round++) {
        kjit_context *context = make_context(round ? KJIT_TARGET_PARALLEL : KJIT_TARGET_CPU);
        kjit_module *module;
        ck_assert_msg(kjit_compile_string(context, "shared.kern", unaligned_shared_source, &module) ==
                          KJIT_OK, "%s", kjit_last_error(context));
        kjit_function *fn;
        ck_assert_int_eq(kjit_module_function(module, "k", &fn), KJIT_OK);
        int64_t n = 33;
        double x[33], out[33];
        for (int i = 0; i < 33; i++) {
            x[i] = i * 0.25;
            out[i] = -1;
        }
        kjit_array X = kjit_array_make(x, KJIT_F64, 1, &n), O = kjit_array_make(out, KJIT_F64, 1, &n);
        kjit_arg args[2] = {kjit_arg_array(&X), kjit_arg_array(&O)};
        uint32_t grid[3] = {1, 1, 1}, block[3] = {33, 1, 1};
        ck_assert_msg(kjit_launch(fn, grid, block, args, 2, NULL) == KJIT_OK, "round %d: %s", round,
                      kjit_last_error(context));
        for (int i = 0; i < 33; i++)
            ck_assert(out[i] == x[i] + 2.0 * i + 0.5);
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

/* Float atomic_min/atomic_max order -0 below +0, as min and max do, whichever
 * operand holds which zero, on scalar code and SIMD lanes alike (LLVM's own
 * loop around llvm.maxnum kept either zero: regress/atomic_max_zero.kern). */
static const char *atomic_zero_source =
    "@kernel\n"
    "fn z(lo: f32[], hi: f64[], vlo: f32[], vhi: f64[]) {\n"
    "    let i = i64(threadIdx.x);\n"
    "    let a = atomic_min(lo, i, vlo[i]);\n"
    "    let b = atomic_max(hi, i, vhi[i]);\n"
    "}\n";

START_TEST(atomic_min_max_order_signed_zeros)
{
    for (int simd = 0; simd < 2; simd++) {
        kjit_options options;
        kjit_options_init(&options);
        options.target = KJIT_TARGET_CPU;
        options.cpu_simd = simd;
        kjit_context *context;
        ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
        kjit_module *module;
        ck_assert_msg(kjit_compile_string(context, "zero.kern", atomic_zero_source, &module) == KJIT_OK,
                      "%s", kjit_last_error(context));
        kjit_function *fn;
        ck_assert_int_eq(kjit_module_function(module, "z", &fn), KJIT_OK);
        enum { N = 16 };
        float lo[N], vlo[N];
        double hi[N], vhi[N];
        for (int i = 0; i < N; i++) { /* even: -0 in the array, odd: -0 as the operand */
            lo[i] = i % 2 ? 0.0f : -0.0f;
            vlo[i] = i % 2 ? -0.0f : 0.0f;
            hi[i] = i % 2 ? 0.0 : -0.0;
            vhi[i] = i % 2 ? -0.0 : 0.0;
        }
        int64_t n = N;
        kjit_array L = kjit_array_make(lo, KJIT_F32, 1, &n), H = kjit_array_make(hi, KJIT_F64, 1, &n),
                   VL = kjit_array_make(vlo, KJIT_F32, 1, &n), VH = kjit_array_make(vhi, KJIT_F64, 1, &n);
        kjit_arg args[4] = {kjit_arg_array(&L), kjit_arg_array(&H), kjit_arg_array(&VL),
                            kjit_arg_array(&VH)};
        uint32_t grid[3] = {1, 1, 1}, block[3] = {N, 1, 1};
        ck_assert_msg(kjit_launch(fn, grid, block, args, 4, NULL) == KJIT_OK, "%s",
                      kjit_last_error(context));
        for (int i = 0; i < N; i++) {
            ck_assert_msg(lo[i] == 0 && signbit(lo[i]), "simd %d: atomic_min kept +0 at %d", simd, i);
            ck_assert_msg(hi[i] == 0 && !signbit(hi[i]), "simd %d: atomic_max kept -0 at %d", simd, i);
        }
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

/* The split form's impl keeps a block's static shared memory on its stack
 * (target_cpu.c's impl_owns_shared), fenced under KJIT_VERIFY by guard bytes
 * it checks itself: a kernel whose threads 0..15 store at tile[t + k] of a
 * 256-element tile passes at k = 240 and fails the launch as the runtime's
 * guards do at k = 256 (16 floats into the guard), on cpu and parallel,
 * with the specialised code and the general code. */
static const char *own_shared_source =
    "@kernel\n"
    "fn over(x: f32[], out: f32[], k: i64) {\n"
    "    let tile = shared(f32, 256);\n"
    "    let t = threadIdx.x;\n"
    "    tile[t] = x[i64(blockIdx.x) * 256 + i64(t)];\n"
    "    syncthreads();\n"
    "    if t < 16 {\n"
    "        tile[i64(t) + k] = -1.0;\n"
    "    }\n"
    "    syncthreads();\n"
    "    out[i64(blockIdx.x) * 256 + i64(t)] = tile[t];\n"
    "}\n";

START_TEST(own_shared_overrun_is_caught_with_verify)
{
    const char *saved = getenv("KJIT_VERIFY");
    char *keep = saved ? strdup(saved) : NULL;
    setenv("KJIT_VERIFY", "1", 1);
    for (int round = 0; round < 4; round++) {
        kjit_options options;
        kjit_options_init(&options);
        options.target = round % 2 ? KJIT_TARGET_PARALLEL : KJIT_TARGET_CPU;
        options.num_threads = 4;
        options.cpu_specialise = round < 2;
        kjit_context *context;
        ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
        kjit_module *module;
        ck_assert_msg(kjit_compile_string(context, "own_shared.kern", own_shared_source, &module) ==
                          KJIT_OK, "%s", kjit_last_error(context));
        kjit_function *fn;
        ck_assert_int_eq(kjit_module_function(module, "over", &fn), KJIT_OK);
        enum { N = 1024 };
        float x[N], out[N];
        for (int i = 0; i < N; i++)
            x[i] = (float)(next_random() % 1000) / 8.0f;
        int64_t n = N;
        kjit_array X = kjit_array_make(x, KJIT_F32, 1, &n), O = kjit_array_make(out, KJIT_F32, 1, &n);
        uint32_t grid[3] = {N / 256, 1, 1}, block[3] = {256, 1, 1};
        for (int64_t k = 240; k <= 256; k += 16) {
            kjit_arg args[3] = {kjit_arg_array(&X), kjit_arg_array(&O), kjit_arg_i64(k)};
            kjit_status status = kjit_launch(fn, grid, block, args, 3, NULL);
            if (k == 240) {
                ck_assert_msg(status == KJIT_OK, "round %d: %s", round, kjit_last_error(context));
                for (int i = 0; i < N; i++)
                    ck_assert(out[i] == (i % 256 >= 240 ? -1.0f : x[i]));
            } else {
                ck_assert_msg(status == KJIT_ERROR_BACKEND, "round %d: k = 256 passed", round);
                ck_assert_msg(strstr(kjit_last_error(context), "wrote past the 1024 bytes of shared memory"),
                              "%s", kjit_last_error(context));
            }
        }
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
    if (keep) {
        setenv("KJIT_VERIFY", keep, 1);
        free(keep);
    } else {
        unsetenv("KJIT_VERIFY");
    }
}
END_TEST

/* Writes one byte at args[0]'s offset into the block's shared memory. */
static void poke_shared(void **args, KjThreadCtx *ctx)
{
    if (ctx->thread_idx[0] == 0 && ctx->block_idx[0] == 1)
        ctx->shared[*(int64_t *)args[0]] = 1;
}

/* The guard itself: with KJIT_VERIFY, a write just past the kernel's declared
 * shared bytes fails the launch with an internal error; one inside does not;
 * without KJIT_VERIFY nothing is checked. */
START_TEST(shared_overrun_is_caught_with_verify)
{
    const char *saved = getenv("KJIT_VERIFY");
    char *keep = saved ? strdup(saved) : NULL;
    KjPool *pool = kj_pool_create(2);
    uint32_t grid[3] = {3, 1, 1}, block[3] = {4, 1, 1};
    for (int barriers = 0; barriers < 2; barriers++) {
        KjIrFunction kernel = fake_kernel(barriers, 20);
        int64_t offsets[] = {19, 20, 63, 64 + 63};
        for (int o = 0; o < 4; o++) {
            for (int verify = 0; verify < 2; verify++) {
                setenv("KJIT_VERIFY", verify ? "1" : "0", 1);
                int64_t offset = offsets[o];
                if (!verify && offset >= 64)
                    continue; /* past the allocation itself without the guard */
                void *args[1] = {&offset};
                char *error = NULL;
                kjit_status status = kj_cpu_run_kernel(pool, &kernel, poke_shared,
                                                       barriers ? NULL : poke_shared, args, grid,
                                                       block, 0, &error);
                bool past = offset >= 20 && verify;
                ck_assert_msg(status == (past ? KJIT_ERROR_BACKEND : KJIT_OK),
                              "barriers %d offset %lld verify %d: %s", barriers, (long long)offset,
                              verify, error ? error : "ok");
                if (past)
                    ck_assert_msg(strstr(error, "wrote past the 20 bytes of shared memory"), "%s",
                                  error);
                free(error);
            }
        }
    }
    kj_pool_destroy(pool);
    if (keep)
        setenv("KJIT_VERIFY", keep, 1);
    else
        unsetenv("KJIT_VERIFY");
    free(keep);
}
END_TEST

/* ------------------------------------------------------------ the seeds */

/* The seed kernels are read from examples/, so the examples themselves are
 * what is tested (the tests run from the repository root). */
static kjit_module *load_example(kjit_context *context, const char *path)
{
    kjit_module *module = NULL;
    ck_assert_msg(kjit_compile_file(context, path, &module) == KJIT_OK, "%s",
                  kjit_last_error(context));
    return module;
}

static int mandel_reference(double x, double y, int max_iters)
{
    double zr = 0, zi = 0;
    for (int i = 0; i < max_iters; i++) {
        double r = zr * zr - zi * zi + x;
        zi = zr * zi + zi * zr + y;
        zr = r;
        if (zr * zr + zi * zi >= 4)
            return i;
    }
    return max_iters;
}

static void mandel_on(kjit_target target)
{
    kjit_context *context = make_context(target);
    kjit_module *module = load_example(context, "examples/mandelbrot.kern");
    kjit_function *fn;
    ck_assert_int_eq(kjit_module_function(module, "mandel_kernel", &fn), KJIT_OK);
    enum { H = 200, W = 300, ITERS = 20 };
    uint8_t *image = malloc(H * W);
    memset(image, 0xff, H * W);
    int64_t shape[2] = {H, W};
    kjit_array img = kjit_array_make(image, KJIT_U8, 2, shape);
    double min_x = -2.0, max_x = 1.0, min_y = -1.0, max_y = 1.0;
    kjit_arg args[6] = {kjit_arg_f64(min_x), kjit_arg_f64(max_x), kjit_arg_f64(min_y),
                        kjit_arg_f64(max_y), kjit_arg_array(&img), kjit_arg_i64(ITERS)};
    /* fewer threads than pixels: the grid-stride loops cover the rest */
    uint32_t grid[3] = {8, 4, 1}, block[3] = {16, 8, 1};
    ck_assert_msg(kjit_launch(fn, grid, block, args, 6, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
    /* Points on the set's boundary can change their count under a 1-ulp
     * difference (an FMA, say): allow 0.5% of pixels to differ by one step. */
    int differ = 0;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            int want = mandel_reference(min_x + x * ((max_x - min_x) / W),
                                        min_y + y * ((max_y - min_y) / H), ITERS);
            int got = image[y * W + x];
            if (got != want) {
                differ++;
                ck_assert_msg(abs(got - want) <= 1, "pixel (%d,%d): %d vs %d", y, x, got, want);
            }
        }
    ck_assert_msg(differ <= H * W / 200, "%d pixels differ", differ);
    free(image);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

/*
 * atomic_min and atomic_max of floats: -0.0 is below 0.0 (docs/language.md),
 * in every mode and with every ISA (make test-unit runs this suite again
 * under KJIT_CPU_FEATURES=-avx).  LLVM's own loop around llvm.maxnum kept
 * whichever zero x86's operand order gave, and that differed between the
 * code for one block shape and the code for any under AVX2 and SSE (the
 * campaign's seed 1042, tests/genprog/regress/atomic_max_signed_zero.kern).
 * Each thread meets its element with the other zero, alone and then
 * against a thread of another block, in f32 and f64.
 */
START_TEST(float_atomic_min_max_order_signed_zeros)
{
    static const char source[] =
        "@kernel\nfn zeros(a: f32[], b: f32[], c: f64[], d: f64[], old: f32[]) {\n"
        "    let i = i64(threadIdx.x);\n"
        "    let z = (i % 2 == 0) ? 0.0 : -0.0;\n"
        "    let o = atomic_max(a, i, f32(-z));\n"
        "    atomic_min(b, i, f32(-z));\n"
        "    atomic_max(c, i, -z);\n"
        "    atomic_min(d, i, -z);\n"
        "    old[i] = o;\n"
        "}\n";
    enum { N = 37 };
    for (int target = 0; target < 2; target++)
        for (int mode = 0; mode < 3; mode++) {
            kjit_options options;
            kjit_options_init(&options);
            options.target = target ? KJIT_TARGET_PARALLEL : KJIT_TARGET_CPU;
            options.cpu_simd = mode < 2;
            options.cpu_specialise = mode == 0;
            kjit_context *context;
            ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
            kjit_module *module;
            ck_assert_msg(kjit_compile_string(context, "zeros.kern", source, &module) == KJIT_OK, "%s",
                          kjit_last_error(context));
            kjit_function *fn;
            ck_assert_int_eq(kjit_module_function(module, "zeros", &fn), KJIT_OK);
            float a[N], b[N], old[N];
            double c[N], d[N];
            for (int i = 0; i < N; i++) { /* the element holds the zero the thread does not bring */
                a[i] = b[i] = i % 2 == 0 ? 0.0f : -0.0f;
                c[i] = d[i] = i % 2 == 0 ? 0.0 : -0.0;
            }
            int64_t n = N;
            kjit_array A = kjit_array_make(a, KJIT_F32, 1, &n), B = kjit_array_make(b, KJIT_F32, 1, &n);
            kjit_array C = kjit_array_make(c, KJIT_F64, 1, &n), D = kjit_array_make(d, KJIT_F64, 1, &n);
            kjit_array O = kjit_array_make(old, KJIT_F32, 1, &n);
            kjit_arg args[5] = {kjit_arg_array(&A), kjit_arg_array(&B), kjit_arg_array(&C), kjit_arg_array(&D),
                                kjit_arg_array(&O)};
            uint32_t grid[3] = {1, 1, 1}, block[3] = {N, 1, 1};
            ck_assert_msg(kjit_launch(fn, grid, block, args, 5, NULL) == KJIT_OK, "%s", kjit_last_error(context));
            ck_assert_int_eq(kjit_synchronize(context), KJIT_OK);
            for (int i = 0; i < N; i++) {
                const char *how = target ? "parallel" : "cpu";
                ck_assert_msg(!signbit(a[i]) && a[i] == 0, "%s mode %d: atomic_max f32 of the zeros [%d] gave %g (sign %d)",
                              how, mode, i, a[i], signbit(a[i]) != 0);
                ck_assert_msg(signbit(b[i]) && b[i] == 0, "%s mode %d: atomic_min f32 of the zeros [%d] gave %g (sign %d)",
                              how, mode, i, b[i], signbit(b[i]) != 0);
                ck_assert_msg(!signbit(c[i]) && c[i] == 0, "%s mode %d: atomic_max f64 of the zeros [%d] gave %g (sign %d)",
                              how, mode, i, c[i], signbit(c[i]) != 0);
                ck_assert_msg(signbit(d[i]) && d[i] == 0, "%s mode %d: atomic_min f64 of the zeros [%d] gave %g (sign %d)",
                              how, mode, i, d[i], signbit(d[i]) != 0);
                ck_assert_msg((signbit(old[i]) != 0) == (i % 2 != 0), "%s mode %d: atomic_max's old value [%d]",
                              how, mode, i);
            }
            kjit_module_free(module);
            kjit_context_destroy(context);
        }
}
END_TEST

START_TEST(mandelbrot_cpu)
{
    mandel_on(KJIT_TARGET_CPU);
}
END_TEST

START_TEST(mandelbrot_parallel)
{
    mandel_on(KJIT_TARGET_PARALLEL);
}
END_TEST

static void das_on(kjit_target target)
{
    kjit_context *context = make_context(target);
    kjit_module *module = load_example(context, "examples/das.kern");
    kjit_function *fn;
    ck_assert_int_eq(kjit_module_function(module, "das", &fn), KJIT_OK);
    enum { ROWS = 40, COLS = 24 }; /* out[j, i]: j < ROWS (threads), i < COLS (blocks) */
    int64_t *data = malloc(128 * 2000 * sizeof(int64_t));
    for (int i = 0; i < 128 * 2000; i++)
        data[i] = (int64_t)(next_random() % 2001) - 1000;
    double *out = calloc(ROWS * COLS, sizeof(double));
    int64_t out_shape[2] = {ROWS, COLS}, data_shape[1] = {128 * 2000};
    kjit_array O = kjit_array_make(out, KJIT_F64, 2, out_shape);
    kjit_array D = kjit_array_make(data, KJIT_I64, 1, data_shape);
    kjit_arg args[2] = {kjit_arg_array(&O), kjit_arg_array(&D)};
    uint32_t grid[3] = {COLS, 1, 1}, block[3] = {64, 1, 1};
    ck_assert_msg(kjit_launch(fn, grid, block, args, 2, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
    /* The index `order` is a truncation of a float expression: a 1-ulp
     * difference can move it across an integer and pick another sample.
     * Allow that for at most 1 in 1000 of the 16384 terms of a pixel. */
    int bad = 0;
    for (int j = 0; j < ROWS; j++)
        for (int i = 0; i < COLS; i++) {
            double acc = 0;
            for (int k = 0; k < 128; k++)
                for (int n = 0; n < 128; n++) {
                    int64_t order = (int64_t)((sqrt((double)(i * i + (j - k * 6) * (j - k * 6))) +
                                               sqrt((double)(i * i + (j - n * 6) * (j - n * 6)))) *
                                              0.05 / 1.54 * 30);
                    if (order < 2000)
                        acc += (double)data[k * 2000 + order];
                }
            if (fabs(out[j * COLS + i] - acc) > 16 * 2000)
                bad++;
        }
    ck_assert_msg(bad == 0, "%d pixels off", bad);
    free(data);
    free(out);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

START_TEST(delay_and_sum_cpu)
{
    das_on(KJIT_TARGET_CPU);
}
END_TEST

START_TEST(delay_and_sum_parallel)
{
    das_on(KJIT_TARGET_PARALLEL);
}
END_TEST

Suite *suite_kernels_cpu(void)
{
    Suite *s = suite_create("kernels_cpu");
    TCase *runtime = tcase_create("runtime");
    tcase_set_timeout(runtime, 60);
    tcase_add_test(runtime, pool_covers_every_index_once);
    tcase_add_test(runtime, pool_threads_follow_the_work);
    tcase_add_test(runtime, pool_awake_workers_join_past_the_grain);
    tcase_add_test(runtime, pool_grows_when_the_work_is_long);
    tcase_add_test(runtime, pool_wakes_every_sleeper);
    tcase_add_test(runtime, pool_spin_follows_the_time_between_runs);
    tcase_add_test(runtime, grid_walk_gives_cuda_indices);
    tcase_add_test(runtime, syncthreads_reduction_is_exact);
    tcase_add_test(runtime, barrier_inside_a_loop);
    tcase_add_test_raise_signal(runtime, fiber_stack_overflow_hits_the_guard_page, SIGSEGV);
    tcase_add_test(runtime, fiber_stacks_grow_with_local_bytes);
    tcase_add_test(runtime, shared_overrun_is_caught_with_verify);
    tcase_add_test(runtime, own_shared_overrun_is_caught_with_verify);
    suite_add_tcase(s, runtime);
    TCase *kern = tcase_create("kern");
    tcase_set_timeout(kern, 120);
    tcase_add_test(kern, shared_reduction_and_atomics_cpu);
    tcase_add_test(kern, shared_reduction_and_atomics_parallel);
    tcase_add_test(kern, device_functions_and_atomics_cpu);
    tcase_add_test(kern, device_functions_and_atomics_parallel);
    tcase_add_test(kern, float_atomic_min_max_order_signed_zeros);
    tcase_add_test(kern, mandelbrot_cpu);
    tcase_add_test(kern, mandelbrot_parallel);
    tcase_add_test(kern, delay_and_sum_cpu);
    tcase_add_test(kern, delay_and_sum_parallel);
    tcase_add_test(kern, local_arrays_with_barriers_cpu);
    tcase_add_test(kern, local_arrays_with_barriers_parallel);
    tcase_add_test(kern, local_arrays_past_the_caller_stack_are_an_error);
    tcase_add_test(kern, shared_layout_holds_without_code_generation);
    tcase_add_test(kern, atomic_min_max_order_signed_zeros);
    suite_add_tcase(s, kern);
    return s;
}
