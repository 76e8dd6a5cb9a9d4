/*
 * pool.c: the thread pool of the parallel target.
 *
 * One pool per context, created once and reused by every call.  A run hands
 * the workers a range [0, count) and a chunk length; workers and the calling
 * thread take chunks from one atomic counter until none are left, so a slow
 * chunk never holds up the others.  A run from inside a chunk (a nested call)
 * or a range too short to be worth waking anybody runs on the calling thread.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "kjit_runtime.h"

struct KjPool {
    int thread_count; /* workers + the calling thread */
    pthread_t *workers;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_cond_t finished;
    pthread_mutex_t run_lock; /* one run at a time per pool */
    uint64_t generation;      /* bumped by every run, under lock */
    int busy;                 /* workers still inside the current run */
    bool stopping;

    /* the current run */
    KjPoolFn fn;
    void *user;
    kjit_context *print_context; /* the caller's kj_print_context */
    int64_t count, chunk;
    _Atomic int64_t next;
};

/* Set on pool workers and on a caller while it runs chunks: a nested run then
 * stays on its thread instead of waiting for workers that are all busy. */
static _Thread_local bool inside_pool_run;

static void run_chunks(KjPool *pool)
{
    for (;;) {
        int64_t begin = atomic_fetch_add(&pool->next, pool->chunk);
        if (begin >= pool->count)
            return;
        int64_t end = begin + pool->chunk < pool->count ? begin + pool->chunk : pool->count;
        pool->fn(pool->user, begin, end);
    }
}

static void *worker_main(void *arg)
{
    KjPool *pool = arg;
    inside_pool_run = true;
    uint64_t seen = 0;
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (pool->generation == seen && !pool->stopping)
            pthread_cond_wait(&pool->wake, &pool->lock);
        if (pool->stopping)
            break;
        seen = pool->generation;
        kj_print_context = pool->print_context;
        pthread_mutex_unlock(&pool->lock);
        run_chunks(pool);
        pthread_mutex_lock(&pool->lock);
        if (--pool->busy == 0)
            pthread_cond_signal(&pool->finished);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
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

KjPool *kj_pool_create(int threads)
{
    KjPool *pool = kj_xcalloc(1, sizeof *pool);
    pool->thread_count = threads > 0 ? threads : default_thread_count();
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->finished, NULL);
    pthread_mutex_init(&pool->run_lock, NULL);
    int workers = pool->thread_count - 1;
    pool->workers = kj_xcalloc(workers > 0 ? (size_t)workers : 1, sizeof(pthread_t));
    pthread_attr_t attr;
    bool have_attr = pthread_attr_init(&attr) == 0;
    bool sized = have_attr && pthread_attr_setstacksize(&attr, KJ_POOL_STACK_BYTES) == 0;
    for (int i = 0; i < workers; i++) {
        if (pthread_create(&pool->workers[i], sized ? &attr : NULL, worker_main, pool) != 0) {
            /* Fewer threads than asked is still a working pool. */
            pool->thread_count = i + 1;
            break;
        }
    }
    if (have_attr)
        pthread_attr_destroy(&attr);
    return pool;
}

int kj_pool_threads(const KjPool *pool)
{
    return pool ? pool->thread_count : 1;
}

void kj_pool_run(KjPool *pool, int64_t count, int64_t min_chunk, KjPoolFn fn, void *user)
{
    if (count <= 0)
        return;
    if (min_chunk < 1)
        min_chunk = 1;
    if (!pool || pool->thread_count == 1 || count < min_chunk * 2 || inside_pool_run) {
        fn(user, 0, count);
        return;
    }
    /* About four chunks per thread balances uneven chunks without making
     * the shared counter a hot spot. */
    int64_t chunk = (count + pool->thread_count * 4 - 1) / (pool->thread_count * 4);
    if (chunk < min_chunk)
        chunk = min_chunk;

    pthread_mutex_lock(&pool->run_lock);
    pthread_mutex_lock(&pool->lock);
    pool->fn = fn;
    pool->user = user;
    pool->print_context = kj_print_context;
    pool->count = count;
    pool->chunk = chunk;
    atomic_store(&pool->next, 0);
    pool->busy = pool->thread_count - 1;
    pool->generation++;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);

    inside_pool_run = true;
    run_chunks(pool);
    inside_pool_run = false;

    pthread_mutex_lock(&pool->lock);
    while (pool->busy > 0)
        pthread_cond_wait(&pool->finished, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
    pthread_mutex_unlock(&pool->run_lock);
}

void kj_pool_destroy(KjPool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->lock);
    pool->stopping = true;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < pool->thread_count - 1; i++)
        pthread_join(pool->workers[i], NULL);
    pthread_mutex_destroy(&pool->lock);
    pthread_cond_destroy(&pool->wake);
    pthread_cond_destroy(&pool->finished);
    pthread_mutex_destroy(&pool->run_lock);
    free(pool->workers);
    free(pool);
}
