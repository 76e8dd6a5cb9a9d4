/*
 * host_ops.c: what the operations a kjit call makes on the host cost on this
 * CPU, in ns each (issue 26 item 1, tests/gpu/host_ops.sh builds and runs it).
 * On an H200 host libkjit's kjit_call (fake driver) and CPython's GIL pair
 * took three times their time on the 2-core build machine, where the
 * interpreter's own loop took 1.5x: this says whether the atomic
 * read-modify-writes, the mutexes and condition variable, or the
 * thread-local lookups of a dlopened library (the general-dynamic TLS model:
 * a call of __tls_get_addr) are what is slow there.  Each row is the best of
 * 7 runs of ITERS operations, thread clock; the first row (a plain add to a
 * volatile) is the loop's own cost, not subtracted.
 *
 *   host_ops LIBTLS   (LIBTLS: host_ops_tls.so, built from the same file
 *                      with -DTLS_LIB -fPIC -shared)
 */
#ifdef TLS_LIB
static __thread long tls_counter;
static long plain_counter;
long tls_bump(void) { return ++tls_counter; }
long plain_bump(void) { return ++plain_counter; }
#else
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#define ITERS 2000000
#define RUNS 7

static volatile long sink;
static long counter;
static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static long (*tls_bump)(void), (*plain_bump)(void);

static double thread_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void op_plain(void) { sink = sink + 1; }
static void op_fetch_add(void) { __atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST); }
static void op_cas(void)
{
    long old = __atomic_load_n(&counter, __ATOMIC_RELAXED);
    __atomic_compare_exchange_n(&counter, &old, old + 1, 0, __ATOMIC_SEQ_CST,
                                __ATOMIC_RELAXED);
}
static void op_store_seq_cst(void) { __atomic_store_n(&counter, 1, __ATOMIC_SEQ_CST); }
static void op_mutex(void)
{
    pthread_mutex_lock(&mutex);
    pthread_mutex_unlock(&mutex);
}
/* CPython's drop_gil and take_gil, in outline: a mutex pair around a store
 * and a signal, twice */
static void op_gil_like(void)
{
    pthread_mutex_lock(&mutex);
    sink = 0;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&mutex);
    pthread_mutex_lock(&mutex);
    sink = 1;
    pthread_mutex_unlock(&mutex);
}
static void op_tls(void) { sink = tls_bump(); }
static void op_call(void) { sink = plain_bump(); }

static void row(const char *what, void (*op)(void))
{
    double best = 1e30;
    for (int r = 0; r < RUNS; r++) {
        double start = thread_ns();
        for (long i = 0; i < ITERS; i++)
            op();
        double ns = (thread_ns() - start) / ITERS;
        best = ns < best ? ns : best;
    }
    printf("| %s | %.2f |\n", what, best);
}

int main(int argc, char **argv)
{
    void *lib = argc > 1 ? dlopen(argv[1], RTLD_NOW) : NULL;
    if (lib) {
        tls_bump = (long (*)(void))dlsym(lib, "tls_bump");
        plain_bump = (long (*)(void))dlsym(lib, "plain_bump");
    }
    printf("| operation (each through a function pointer) | ns |\n| --- | ---: |\n");
    row("a plain add to a volatile (the loop)", op_plain);
    row("atomic fetch-add, seq_cst (lock xadd)", op_fetch_add);
    row("atomic compare-and-swap, seq_cst", op_cas);
    row("atomic store, seq_cst (xchg)", op_store_seq_cst);
    row("pthread mutex lock + unlock", op_mutex);
    row("a GIL-like pair (2 mutex pairs, a cond signal)", op_gil_like);
    if (tls_bump && plain_bump) {
        row("call into a dlopened library, a static", op_call);
        row("the same, a __thread variable (__tls_get_addr)", op_tls);
    } else {
        printf("(no TLS rows: %s)\n", dlerror());
    }
    return 0;
}
#endif
