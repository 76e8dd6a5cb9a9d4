/*
 * pool.c: the thread pool of the parallel target.
 *
 * One pool per context, created once and reused by every call; its workers
 * start at the first run that spreads work (a context that has not run in
 * parallel yet has no thread, so it is cheap to make).  A run hands
 * the workers a range [0, count) in slots, one per thread it may come to,
 * equal shares each with a counter of its own, and a chunk length; a thread
 * takes chunks from its home slot (the caller slot 0, worker w slot w), then
 * from the others' until none are left, so a slow chunk never holds up the
 * others.  As OpenMP's static schedule, a call of the same shape so gives
 * each core the share it had the last time, still in its cache (issue 25:
 * with one counter for all, inc i32 1.6e6 on 16 cores took 1.8-2 times Numba
 * parallel's time, its data fetched from other cores' L2 at every call), and
 * sixteen threads do not queue on one counter's line ($KJIT_POOL_SHARED=1
 * gives that counter back, for comparison).  A run from inside a chunk (a
 * nested call) or a range too short to be worth waking anybody runs on the
 * calling thread.
 *
 * Between runs a worker first spins for a while watching the run counter,
 * and only then sleeps on a futex, as OpenMP runtimes do: a run that follows
 * soon after the last (a loop of launches) finds its workers awake, instead
 * of paying a futex wake-up per worker, which on a machine of many cores
 * costs more than a short kernel.  The while is at least KJ_POOL_SPIN_NS
 * ($KJIT_POOL_SPIN_US), and twice the time between the last two runs when
 * that is under KJ_POOL_SPIN_MAX_NS (4 ms, $KJIT_POOL_SPIN_MAX_US): calls that
 * come every millisecond or so with the caller's own work between them
 * (issue 25: the block sum in bench_simd, behind Numba parallel as each of
 * its calls woke fifteen sleepers) find their workers awake, and a program
 * that calls seldom spins no longer than the base.  Sleepers wait on the
 * futex word itself, not on a condition variable, so the woken do not queue
 * on its mutex one after another.  The caller wakes as many as it has seats
 * in one FUTEX_WAKE (KJ_POOL_WAKE_FAN 0), or, with $KJIT_POOL_WAKE_FAN=N,
 * the first N of a tree whose woken each wake N more: on the 16-core host
 * the tree took longer (a call that woke fifteen: 0.072 ms against 0.048),
 * as each level pays a wake-up's latency.  The caller waits for the workers' last
 * chunks the same way (that wait, rare, on a condition variable).
 *
 * A run takes only as many threads as its work is worth (issue 25: a small
 * 3-D stencil ran 5.6 times slower on 16 cores than on one): its chunks of
 * at least min_chunk, the grain (as OpenMP's and TBB's), give at most
 * count / min_chunk seats, and only that many workers take part.  Workers
 * take the seats as they come (a spinning one first), sleepers are woken
 * for the seats only, and once the caller has run out of chunks it takes
 * back the seats nobody has taken: it never waits for a worker that has not
 * started, only for chunks that are running.
 *
 * The grain counts items, not work: a kernel of a few blocks whose threads
 * each loop for milliseconds (delay-and-sum on a small image) is "small" by
 * it, and on 16 cores ran on 4 threads, 1.5 times slower than Numba's
 * prange.  So a run whose first chunks take longer than the grow time
 * (KJ_POOL_GROW_NS, or $KJIT_POOL_GROW_US) grows to every thread its items
 * can feed: a run under two grains starts on the calling thread in pieces,
 * and hands what is left to the pool once it proves long; a run on fewer
 * threads than the pool offers the other workers seats.  A short run never
 * pays for more than a clock read per chunk.
 *
 * The grain prices a wake-up: workers still spinning from the last run cost
 * only a read and a seat, so a run that finds them so takes every thread its
 * pieces can feed at once ($KJIT_POOL_WIDEN=0 keeps the grain's count).
 */
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "kjit_runtime.h"

/* A cache line: the fields that workers spin on, those they count down and
 * each slot's counter sit on lines of their own, so that a worker taking a
 * piece of its slot does not take the line that fifteen others read. */
#define POOL_LINE 64

/* A slot: a contiguous share of the run, taken piece by piece from `next`
 * by its home thread first and by the others once theirs are empty. */
typedef struct PoolSlot {
    _Alignas(POOL_LINE) _Atomic uint64_t next;
    uint64_t end;
} PoolSlot;

typedef struct PoolWorker {
    KjPool *pool;
    int index; /* 1..: its home slot; the caller's is 0 */
} PoolWorker;

struct KjPool {
    int thread_count; /* workers + the calling thread */
    pthread_t *workers;
    PoolWorker *worker_args;
    /* the workers start at the first run that needs them (under run_lock):
     * `started` of them (fewer than asked if the system refused some) */
    bool start_tried;
    int started;
    pthread_mutex_t lock;
    pthread_cond_t finished;
    pthread_mutex_t run_lock;    /* one run at a time per pool */
    _Atomic int sleepers;        /* workers asleep on wake_word, or going to */
    int64_t spin_ns;             /* how long a worker watches before it sleeps, at least */
    int64_t spin_max_ns;         /* the most the window may grow to (0: it stays spin_ns) */
    int wake_fan;                /* sleepers each woken thread wakes (0: the caller wakes all) */
    int64_t grow_ns;             /* how long a run goes before it takes more threads */
    bool shared_counter;         /* $KJIT_POOL_SHARED=1: one counter for all (before slots) */
    bool widen;                  /* $KJIT_POOL_WIDEN (1): awake workers join past the grain */
    int64_t last_end_ns;         /* when the last run ended, under run_lock */

    /* read by every spinning worker, written once a run */
    _Alignas(POOL_LINE) _Atomic uint64_t generation; /* bumped by every run */
    _Atomic bool stopping;
    _Atomic uint32_t wake_word; /* the futex sleepers wait on: bumped after generation */
    _Atomic int64_t spin_window_ns; /* how long workers spin after this run (adaptive) */

    /* counted down by the workers of a run */
    _Alignas(POOL_LINE) _Atomic int busy; /* seated workers still inside the current run */
    _Atomic int seats;                    /* workers the current run may still take */
    _Atomic int grow_by;                  /* seats the current run may still add, under lock */

    /* the current run, written before its generation and only read during it */
    _Alignas(POOL_LINE) KjPoolFn fn;
    void *user;
    kjit_context *print_context; /* the caller's kj_print_context */
    KjCancelSlot *cancel_slot;   /* the caller's kj_cancel_slot */
    int64_t base, count, chunk;  /* the chunks cover [base, base + count) */
    int64_t started_ns;
    int slot_count;
    /* thread_count slots.  Counters are unsigned: a launch's count of blocks
     * comes near 2^63, and each thread adds at most one chunk past a slot's
     * end per visit (at most a slot's length in all, as no more threads
     * than slots take part), which must not wrap to a small begin */
    PoolSlot *slots;
};

/* Set on pool workers and on a caller while it runs chunks: a nested run then
 * stays on its thread instead of waiting for workers that are all busy. */
static _Thread_local bool inside_pool_run;

static int64_t now_ns(void);
static void grow_run(KjPool *pool);

/* Chunks until none are left, or the call is cancelled: then the rest are
 * left undone (the caller's status says so).  A thread takes the pieces of
 * its home slot first (the same share of the data as in the last run of
 * the same shape, still in its core's cache, and a counter no other thread
 * touches meanwhile), then those left in the other slots.  After each chunk
 * a run that may still grow looks at the clock. */
static void run_chunks(KjPool *pool, int home)
{
    int slots = pool->slot_count;
    uint64_t chunk = (uint64_t)pool->chunk;
    for (int k = 0; k < slots; k++) {
        PoolSlot *slot = &pool->slots[(home + k) % slots];
        for (;;) {
            if (kj_cancel_requested())
                return;
            /* another's slot is read before it is written: an empty one
             * costs its line no trip away from its owner */
            if (k > 0 && atomic_load_explicit(&slot->next, memory_order_relaxed) >= slot->end)
                break;
            uint64_t begin = atomic_fetch_add_explicit(&slot->next, chunk, memory_order_relaxed);
            if (begin >= slot->end)
                break;
            uint64_t end = slot->end - begin > chunk ? begin + chunk : slot->end;
            pool->fn(pool->user, pool->base + (int64_t)begin, pool->base + (int64_t)end);
            if (atomic_load_explicit(&pool->grow_by, memory_order_relaxed) > 0 &&
                now_ns() - pool->started_ns >= pool->grow_ns)
                grow_run(pool);
        }
    }
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Spins for up to `ns` until done(pool, arg) holds; whether it did.  The
 * clock is read every 64 rounds, and the thread yields its core every 1024
 * (a machine with more runnable threads than cores must not starve the
 * thread it waits for). */
static bool spin_until(KjPool *pool, int64_t ns, bool (*done)(KjPool *, uint64_t), uint64_t arg)
{
    if (ns <= 0)
        return done(pool, arg);
    int64_t deadline = 0;
    for (uint32_t round = 0;; round++) {
        if (done(pool, arg))
            return true;
        if ((round & 63) == 63) {
            int64_t t = now_ns();
            if (!deadline)
                deadline = t + ns;
            else if (t >= deadline)
                return false;
        }
        if ((round & 1023) == 1023)
            sched_yield();
        else
            cpu_relax();
    }
}

/* Sleeping on the word itself, not on a condition variable: a woken worker
 * takes no mutex, so sixteen of them do not queue on one to get going. */
static void futex_wait(_Atomic uint32_t *word, uint32_t seen)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word, int n)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* After a new generation (or stopping): bumps the word the sleepers wait
 * on and wakes up to n of them. */
static void wake_workers(KjPool *pool, int n)
{
    atomic_fetch_add(&pool->wake_word, 1);
    int sleeping = atomic_load(&pool->sleepers);
    if (sleeping > 0 && n > 0)
        futex_wake(&pool->wake_word, n);
}

/* The sleepers a run's caller wakes itself for n seats: all of them (the
 * default, wake_fan 0: one FUTEX_WAKE, whose wake-ups the kernel does one
 * after another on the caller's time, before its own chunks), else the
 * first `wake_fan` of a tree: each thread woken wakes as many again
 * (pass_wake_on), and the caller starts its chunks after a short syscall,
 * but the last are up only after three or four wake-ups' latency, which on
 * the 16-core host cost more than the caller's syscall saved. */
static int first_wave(const KjPool *pool, int n)
{
    return pool->wake_fan > 0 && n > pool->wake_fan ? pool->wake_fan : n;
}

/* A worker woken from its sleep for a run: while seats are left beyond its
 * own and somebody sleeps, it wakes the next `wake_fan` before it takes its
 * seat (a seat a spinning worker takes meanwhile just leaves a woken one
 * without: it sleeps again).  seq_cst reads, as the caller's: a sleeper
 * counted before the word moved is seen. */
static void pass_wake_on(KjPool *pool)
{
    if (pool->wake_fan <= 0)
        return;
    int others = atomic_load(&pool->seats) - 1;
    if (others > 0 && atomic_load(&pool->sleepers) > 0)
        futex_wake(&pool->wake_word, others < pool->wake_fan ? others : pool->wake_fan);
}

static bool new_run(KjPool *pool, uint64_t seen)
{
    return atomic_load_explicit(&pool->generation, memory_order_acquire) != seen ||
           atomic_load_explicit(&pool->stopping, memory_order_relaxed);
}

/* Whether any slot of the current run has chunks nobody took yet. */
static bool chunks_left(KjPool *pool)
{
    for (int s = 0; s < pool->slot_count; s++)
        if (atomic_load_explicit(&pool->slots[s].next, memory_order_relaxed) < pool->slots[s].end)
            return true;
    return false;
}

/* The run has gone on past the grow time with chunks left: the seats it may
 * still add are offered, and a new generation makes every worker look, those
 * that already found no seat in this run too.  Under the lock, as the
 * caller's closing of the run, so no seat is offered after it. */
static void grow_run(KjPool *pool)
{
    pthread_mutex_lock(&pool->lock);
    int more = atomic_exchange_explicit(&pool->grow_by, 0, memory_order_relaxed);
    if (more > 0 && chunks_left(pool)) {
        atomic_fetch_add_explicit(&pool->busy, more, memory_order_acq_rel);
        /* seats below 0 count workers that found none: they hold nothing */
        int seats = atomic_load_explicit(&pool->seats, memory_order_relaxed);
        while (!atomic_compare_exchange_weak_explicit(&pool->seats, &seats,
                                                      (seats > 0 ? seats : 0) + more,
                                                      memory_order_acq_rel, memory_order_relaxed))
            ;
        atomic_fetch_add_explicit(&pool->generation, 1, memory_order_acq_rel);
        wake_workers(pool, first_wave(pool, more));
    }
    pthread_mutex_unlock(&pool->lock);
}

static bool workers_done(KjPool *pool, uint64_t unused)
{
    return atomic_load_explicit(&pool->busy, memory_order_acquire) == 0;
}

static void *worker_main(void *arg)
{
    const PoolWorker *self = arg;
    KjPool *pool = self->pool;
    inside_pool_run = true;
    uint64_t seen = 0;
    for (;;) {
        int64_t window = atomic_load_explicit(&pool->spin_window_ns, memory_order_relaxed);
        bool slept = false;
        if (!spin_until(pool, window, new_run, seen)) {
            /* counted before it reads the word (seq_cst both, as the
             * caller's bump of the word and read of sleepers): a caller
             * that bumps after this read sees it counted, and wakes it */
            atomic_fetch_add(&pool->sleepers, 1);
            for (;;) {
                uint32_t word = atomic_load(&pool->wake_word);
                if (new_run(pool, seen))
                    break;
                futex_wait(&pool->wake_word, word);
                slept = true;
            }
            atomic_fetch_sub(&pool->sleepers, 1);
        }
        if (atomic_load(&pool->stopping))
            break;
        seen = atomic_load_explicit(&pool->generation, memory_order_acquire);
        if (slept)
            pass_wake_on(pool);
        /* a seat, or this run goes on without this worker (the caller took
         * the seats back, or the run needs fewer threads); acq_rel: the
         * caller stored the run's fields before its seats */
        if (atomic_fetch_sub_explicit(&pool->seats, 1, memory_order_acq_rel) <= 0)
            continue;
        kj_print_context = pool->print_context;
        kj_cancel_slot = pool->cancel_slot;
        run_chunks(pool, self->index % pool->slot_count);
        kj_cancel_slot = NULL;
        if (atomic_fetch_sub_explicit(&pool->busy, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool->lock);
            pthread_cond_signal(&pool->finished);
            pthread_mutex_unlock(&pool->lock);
        }
    }
    return NULL;
}

/* How long workers and the caller spin before sleeping: $KJIT_POOL_SPIN_US
 * microseconds (0 sleeps at once), else KJ_POOL_SPIN_NS. */
static int64_t spin_nanoseconds(void)
{
    const char *env = getenv("KJIT_POOL_SPIN_US");
    if (env && *env) {
        long us = strtol(env, NULL, 10);
        return us > 0 ? (int64_t)(us > 1000000 ? 1000000 : us) * 1000 : 0;
    }
    return KJ_POOL_SPIN_NS;
}

/* $name in microseconds, as nanoseconds, at most `most_us` (0 or below: 0),
 * else `otherwise` nanoseconds. */
static int64_t env_microseconds(const char *name, int64_t otherwise, long long most_us)
{
    const char *env = getenv(name);
    if (env && *env) {
        long long us = strtoll(env, NULL, 10);
        return us > 0 ? (int64_t)(us > most_us ? most_us : us) * 1000 : 0;
    }
    return otherwise;
}

/* $name as a count from 0 to `most`, else `otherwise`. */
static long env_count(const char *name, long otherwise, long most)
{
    const char *env = getenv(name);
    if (env && *env) {
        long n = strtol(env, NULL, 10);
        return n < 0 ? 0 : n > most ? most : n;
    }
    return otherwise;
}

/* How long a run goes before it takes more threads than its grain gave it:
 * $KJIT_POOL_GROW_US microseconds, else KJ_POOL_GROW_NS. */
static int64_t grow_nanoseconds(void)
{
    const char *env = getenv("KJIT_POOL_GROW_US");
    if (env && *env) {
        long long us = strtoll(env, NULL, 10);
        return us > 0 ? (int64_t)(us > 60000000 ? 60000000 : us) * 1000 : 0;
    }
    return KJ_POOL_GROW_NS;
}

/* threads <= 0: $KJIT_NUM_THREADS, else one per online core. */
static int default_thread_count(void)
{
    const char *env = getenv("KJIT_NUM_THREADS");
    if (env && *env) {
        long n = strtol(env, NULL, 10);
        if (n > 0)
            return n > 1024 ? 1024 : (int)n;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 ? (int)cores : 1;
}

/* Zeroed memory on a cache line of its own (the pool's lines must not
 * share one with whatever malloc puts beside them). */
static void *aligned_zeroed(size_t bytes)
{
    size_t rounded = (bytes + POOL_LINE - 1) / POOL_LINE * POOL_LINE;
    void *p = aligned_alloc(POOL_LINE, rounded);
    if (!p)
        kj_die("out of memory (%zu bytes for the thread pool)", rounded);
    memset(p, 0, rounded);
    return p;
}

KjPool *kj_pool_create(int threads)
{
    KjPool *pool = aligned_zeroed(sizeof *pool);
    pool->thread_count = threads > 0 ? threads : default_thread_count();
    pool->spin_ns = spin_nanoseconds();
    pool->spin_max_ns = env_microseconds("KJIT_POOL_SPIN_MAX_US", KJ_POOL_SPIN_MAX_NS, 1000000);
    pool->wake_fan = (int)env_count("KJIT_POOL_WAKE_FAN", KJ_POOL_WAKE_FAN, 64);
    atomic_store(&pool->spin_window_ns, pool->spin_ns);
    pool->grow_ns = grow_nanoseconds();
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->finished, NULL);
    pthread_mutex_init(&pool->run_lock, NULL);
    int workers = pool->thread_count - 1;
    pool->workers = kj_xcalloc(workers > 0 ? (size_t)workers : 1, sizeof(pthread_t));
    pool->worker_args = kj_xcalloc(workers > 0 ? (size_t)workers : 1, sizeof(PoolWorker));
    pool->slots = aligned_zeroed((size_t)pool->thread_count * sizeof(PoolSlot));
    const char *shared = getenv("KJIT_POOL_SHARED");
    pool->shared_counter = shared && *shared && strcmp(shared, "0") != 0;
    const char *widen = getenv("KJIT_POOL_WIDEN");
    pool->widen = !(widen && strcmp(widen, "0") == 0);
    return pool;
}

/* The workers, started by the first run that spreads its work (under
 * run_lock): a context that never runs in parallel, or not yet, pays for no
 * thread (its creation, and a library's first call, stay cheap). */
static void start_workers(KjPool *pool)
{
    pthread_attr_t attr;
    bool have_attr = pthread_attr_init(&attr) == 0;
    bool sized = have_attr && pthread_attr_setstacksize(&attr, KJ_POOL_STACK_BYTES) == 0;
    pool->start_tried = true;
    for (int i = 0; i < pool->thread_count - 1; i++) {
        /* Fewer threads than asked is still a working pool. */
        pool->worker_args[i] = (PoolWorker){pool, i + 1};
        if (pthread_create(&pool->workers[i], sized ? &attr : NULL, worker_main,
                           &pool->worker_args[i]) != 0)
            break;
        pool->started = i + 1;
    }
    if (have_attr)
        pthread_attr_destroy(&attr);
}

int kj_pool_threads(const KjPool *pool)
{
    return pool ? pool->thread_count : 1;
}

/* A run of [base, base + count) in chunks of at least `piece`, on `threads`
 * threads (the caller one of them) that may grow to `most` once it has gone
 * on for the grow time since `started`. */
static void run_on_pool(KjPool *pool, int64_t base, int64_t count, int64_t piece, int threads,
                        int most, int64_t started, KjPoolFn fn, void *user)
{
    pthread_mutex_lock(&pool->run_lock);
    if (!pool->start_tried)
        start_workers(pool);
    if (pool->started == 0) { /* the system gave no thread: the caller runs it */
        pthread_mutex_unlock(&pool->run_lock);
        fn(user, base, base + count);
        return;
    }
    /* at most the workers that started, and the caller */
    if (threads > pool->started + 1)
        threads = pool->started + 1;
    if (most > pool->started + 1)
        most = pool->started + 1;
    /* Workers still spinning from the last run (every one started, none
     * asleep, the last run ended well within their spin window) cost no wake-up,
     * only a read and a seat: a run takes every thread its pieces can feed
     * at once, not only its grain's (inc 1e5 as @vectorize, six grains,
     * ran on six of sixteen threads).  The grain still keeps a run from
     * waking sleepers it is not worth. */
    int64_t window = atomic_load_explicit(&pool->spin_window_ns, memory_order_relaxed);
    if (pool->widen && threads < most && pool->started == pool->thread_count - 1 &&
        atomic_load_explicit(&pool->sleepers, memory_order_relaxed) == 0 &&
        started - pool->last_end_ns < window - window / 4)
        threads = most;
    /* How long the workers spin after this run: twice the time since the
     * last run ended when that was under the cap (calls that come back
     * every few hundred microseconds, with the caller's own work between
     * them: the block sum in bench_simd, 0.5-1.03 ms apart, found every
     * worker asleep after 100 us and paid fifteen wake-ups a call), else the
     * base.  Bounded (spin_max_ns, $KJIT_POOL_SPIN_MAX_US): a program that
     * calls seldom pays no spinning beyond the base, one that calls often
     * at most the cap's worth per call. */
    window = pool->spin_ns;
    if (window > 0 && pool->spin_max_ns > window && pool->last_end_ns > 0) {
        int64_t gap = started - pool->last_end_ns;
        if (gap >= 0 && gap < pool->spin_max_ns)
            window = 2 * gap > pool->spin_max_ns ? pool->spin_max_ns
                     : 2 * gap > window          ? 2 * gap
                                                 : window;
    }
    atomic_store_explicit(&pool->spin_window_ns, window, memory_order_relaxed);
    /* About four chunks per slot: a thread that finishes its share early
     * takes a quarter of another's at a time, which balances uneven chunks
     * without many trips to the counters. */
    int64_t chunks = (int64_t)most * 4;
    int64_t chunk = count / chunks + (count % chunks != 0); /* rounded up, without overflow */
    if (chunk < piece)
        chunk = piece;

    /* No worker reads these until the counter below moves (release), and
     * every worker of the last run has left run_chunks (busy was 0). */
    pool->fn = fn;
    pool->user = user;
    pool->print_context = kj_print_context;
    pool->cancel_slot = kj_cancel_slot;
    pool->base = base;
    pool->count = count;
    pool->chunk = chunk;
    pool->started_ns = started;
    /* `most` slots of equal shares (to an item), taken in chunks, or one
     * that every thread takes from, with KJIT_POOL_SHARED.  Equal shares:
     * a thread with none would steal from the others at every call, and
     * move their data between cores. */
    int slots = pool->shared_counter ? 1 : most;
    int64_t share = count / slots, extra = count % slots;
    for (int s = 0; s < slots; s++) {
        int64_t begin = share * s + (s < extra ? s : extra);
        atomic_store_explicit(&pool->slots[s].next, (uint64_t)begin, memory_order_relaxed);
        pool->slots[s].end = (uint64_t)(begin + share + (s < extra));
    }
    pool->slot_count = slots;
    atomic_store_explicit(&pool->busy, threads - 1, memory_order_relaxed);
    atomic_store_explicit(&pool->grow_by, most - threads, memory_order_relaxed);
    atomic_store_explicit(&pool->seats, threads - 1, memory_order_release);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_acq_rel);
    /* Only as many sleepers as there are seats are woken (spinning workers
     * may take some first; those woken for nothing go back to sleep), the
     * first wave by the caller, the rest by the woken. */
    wake_workers(pool, first_wave(pool, threads - 1));

    inside_pool_run = true;
    run_chunks(pool, 0);
    inside_pool_run = false;
    /* Every chunk is taken: the run grows no more, the seats still free are
     * the caller's again, and a worker that comes for one later finds none. */
    pthread_mutex_lock(&pool->lock);
    atomic_store_explicit(&pool->grow_by, 0, memory_order_relaxed);
    int unseated = atomic_exchange_explicit(&pool->seats, 0, memory_order_acq_rel);
    pthread_mutex_unlock(&pool->lock);
    if (unseated > 0)
        atomic_fetch_sub_explicit(&pool->busy, unseated, memory_order_acq_rel);

    if (!spin_until(pool, pool->spin_ns, workers_done, 0)) {
        pthread_mutex_lock(&pool->lock);
        while (!workers_done(pool, 0))
            pthread_cond_wait(&pool->finished, &pool->lock);
        pthread_mutex_unlock(&pool->lock);
    }
    pool->last_end_ns = now_ns();
    pthread_mutex_unlock(&pool->run_lock);
}

static int threads_for(const KjPool *pool, int64_t units)
{
    return units < pool->thread_count ? (int)units : pool->thread_count;
}

void kj_pool_run(KjPool *pool, int64_t count, int64_t min_chunk, KjPoolFn fn, void *user)
{
    if (count <= 0)
        return;
    if (min_chunk < 1)
        min_chunk = 1;
    if (!pool || pool->thread_count == 1 || inside_pool_run) {
        fn(user, 0, count);
        return;
    }
    /* The finest chunk, should the run grow past its grain. */
    int64_t piece = min_chunk / 4 > 0 ? min_chunk / 4 : 1;
    int64_t started = now_ns();
    if (count / min_chunk < 2) {
        /* Under two grains: the calling thread runs it in pieces, and hands
         * the rest to the pool if it proves long. */
        int64_t done = 0;
        while (done < count) {
            int64_t end = count - done > piece ? done + piece : count;
            fn(user, done, end);
            done = end;
            int most = threads_for(pool, (count - done) / piece);
            if (most >= 2 && now_ns() - started >= pool->grow_ns && !kj_cancel_requested()) {
                run_on_pool(pool, done, count - done, piece, most, most, started, fn, user);
                return;
            }
        }
        return;
    }
    /* The threads the work is worth: one per grain, at most the pool's, and
     * as many as its pieces can feed should it prove long. */
    int threads = threads_for(pool, count / min_chunk);
    int most = threads_for(pool, count / piece);
    run_on_pool(pool, 0, count, piece, threads, most, started, fn, user);
}

void kj_pool_destroy(KjPool *pool)
{
    if (!pool)
        return;
    atomic_store(&pool->stopping, true);
    wake_workers(pool, INT_MAX);
    for (int i = 0; i < pool->started; i++)
        pthread_join(pool->workers[i], NULL);
    pthread_mutex_destroy(&pool->lock);
    pthread_cond_destroy(&pool->finished);
    pthread_mutex_destroy(&pool->run_lock);
    free(pool->workers);
    free(pool->worker_args);
    free(pool->slots);
    free(pool);
}
