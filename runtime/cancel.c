/*
 * cancel.c: stopping calls: kjit_context_cancel, the time limit's watchdog,
 * and what compiled code and the runtime's loops ask while they run.
 *
 * Each call of the API that runs code (kjit_call, kjit_call_async,
 * kjit_launch_ex, kjit_reduce, kjit_reduce_async) takes one of its
 * context's slots for its run and gives it back at its end; a slot's flag
 * says that this call is cancelled.  kjit_context_cancel sets the flag of
 * every slot in use and nothing else, with atomic operations only, so a
 * signal handler or another thread may call it at any time: it stops the
 * calls running then, and a call that starts later runs normally (a claimed
 * slot starts clear).  The watchdog of a context with a time limit sets the
 * flag of a slot whose call has run past it, and marks it timed out.
 *
 * The running call's slot is in a thread-local (kj_cancel_slot) that the
 * pool's workers take from the caller, as they take kj_print_context: the
 * runtime's loops over chunks, blocks and fibers ask kj_cancel_requested
 * between pieces.  Compiled code built with cancellation polls one word,
 * the process's count of raised flags (cancel_pending), which is 0 unless
 * some call somewhere is being cancelled; only then does it call the hook,
 * which asks its own thread's slot (kjit_backend.h, "Cancellation").
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kjit_runtime.h"

static int kj_signal_guard_begin(kjit_context *context);
static void kj_signal_guard_end(int slot);

/* Slots of one context: calls running at once beyond this share the last. */
#define KJ_CANCEL_SLOTS 64

struct KjCancelSlot {
    _Atomic int32_t flag;   /* 1: the call is cancelled */
    _Atomic int32_t users;  /* calls holding it (more than 1 only for the last slot) */
    _Atomic int32_t timed_out; /* the watchdog raised the flag */
    int64_t deadline_ns;    /* the time limit's end (0: none), under the context's watch lock */
};

struct KjCancel {
    KjCancelSlot slots[KJ_CANCEL_SLOTS];
    double time_limit_s;
    pthread_mutex_t lock; /* deadlines and the watchdog */
    pthread_cond_t wake;
    pthread_t watchdog;
    bool watchdog_running, stopping;
    /* cuda: the context's flag in mapped host memory, which its kernels poll
     * (the first word of device_page, ours, mapped by the cuda target) */
    _Atomic int32_t *device_flag;
    void *device_page;
    /* calls running on the context: what `alone` asks (cuda), without
     * reading every slot twice a call */
    _Atomic int32_t running;
};

_Thread_local KjCancelSlot *kj_cancel_slot;

/* How many flags are raised in the whole process: what compiled code polls. */
static _Atomic int32_t cancel_pending;

static void raise_flag(KjCancelSlot *slot)
{
    if (atomic_exchange(&slot->flag, 1) == 0)
        atomic_fetch_add(&cancel_pending, 1);
}

static void clear_flag(KjCancelSlot *slot)
{
    if (atomic_exchange(&slot->flag, 0) == 1)
        atomic_fetch_sub(&cancel_pending, 1);
}

bool kj_cancel_requested(void)
{
    KjCancelSlot *slot = kj_cancel_slot;
    return slot && atomic_load_explicit(&slot->flag, memory_order_relaxed) != 0;
}

/* What compiled code calls when the pending count is not 0 (KjCancelFn). */
static int32_t cancel_hook(void)
{
    return kj_cancel_requested();
}

void kj_cancel_bind(KjSymbolLookup *lookup, void *code)
{
    _Atomic int32_t **word = lookup(code, KJ_CANCEL_WORD_SYMBOL);
    KjCancelFn *hook = lookup(code, KJ_CANCEL_HOOK_SYMBOL);
    if (hook)
        *hook = cancel_hook;
    if (word)
        *word = &cancel_pending;
}

/* ------------------------------------------------------------- contexts */

KjCancel *kj_cancel_create(const kjit_options *options)
{
    KjCancel *cancel = kj_xcalloc(1, sizeof *cancel);
    cancel->time_limit_s = options->time_limit_s > 0 ? options->time_limit_s : 0;
    pthread_mutex_init(&cancel->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&cancel->wake, &attr);
    pthread_condattr_destroy(&attr);
    return cancel;
}

void kj_cancel_destroy(KjCancel *cancel)
{
    if (!cancel)
        return;
    pthread_mutex_lock(&cancel->lock);
    cancel->stopping = true;
    pthread_cond_signal(&cancel->wake);
    bool running = cancel->watchdog_running;
    pthread_mutex_unlock(&cancel->lock);
    if (running)
        pthread_join(cancel->watchdog, NULL);
    for (int i = 0; i < KJ_CANCEL_SLOTS; i++)
        clear_flag(&cancel->slots[i]);
    pthread_mutex_destroy(&cancel->lock);
    pthread_cond_destroy(&cancel->wake);
    free(cancel->device_page);
    free(cancel);
}

void kj_cancel_set_device_flag(KjCancel *cancel, void *host_flag)
{
    cancel->device_flag = host_flag;
}

void *kj_cancel_device_page(KjCancel *cancel, size_t *bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    *bytes = page > 0 ? (size_t)page : 4096;
    pthread_mutex_lock(&cancel->lock);
    if (!cancel->device_page) {
        if (posix_memalign(&cancel->device_page, *bytes, *bytes) != 0)
            kj_die("out of memory for a page");
        memset(cancel->device_page, 0, *bytes);
        cancel->device_flag = cancel->device_page;
    }
    pthread_mutex_unlock(&cancel->lock);
    return cancel->device_page;
}

bool kj_cancel_take_device_flag(KjCancel *cancel)
{
    return cancel->device_flag && atomic_load(cancel->device_flag) &&
           atomic_exchange(cancel->device_flag, 0) != 0;
}

void kjit_context_cancel(kjit_context *context)
{
    if (!context || !context->cancel)
        return;
    KjCancel *cancel = context->cancel;
    for (int i = 0; i < KJ_CANCEL_SLOTS; i++)
        if (atomic_load(&cancel->slots[i].users) > 0)
            raise_flag(&cancel->slots[i]);
    if (cancel->device_flag)
        atomic_store(cancel->device_flag, 1);
}

/* ------------------------------------------------------------- watchdog */

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Raises the flag of every call past its deadline, then sleeps until the
 * next deadline (or until a call sets one). */
static void *watchdog_main(void *arg)
{
    KjCancel *cancel = arg;
    pthread_mutex_lock(&cancel->lock);
    while (!cancel->stopping) {
        int64_t now = now_ns(), next = 0;
        for (int i = 0; i < KJ_CANCEL_SLOTS; i++) {
            KjCancelSlot *slot = &cancel->slots[i];
            if (!slot->deadline_ns)
                continue;
            if (slot->deadline_ns <= now) {
                atomic_store(&slot->timed_out, 1);
                raise_flag(slot);
                if (cancel->device_flag)
                    atomic_store(cancel->device_flag, 1);
                slot->deadline_ns = 0;
            } else if (!next || slot->deadline_ns < next) {
                next = slot->deadline_ns;
            }
        }
        if (!next) {
            pthread_cond_wait(&cancel->wake, &cancel->lock);
            continue;
        }
        struct timespec until = {.tv_sec = next / 1000000000, .tv_nsec = next % 1000000000};
        pthread_cond_timedwait(&cancel->wake, &cancel->lock, &until);
    }
    pthread_mutex_unlock(&cancel->lock);
    return NULL;
}

/* Under the lock: a deadline for the slot, the watchdog started on first use. */
static void set_deadline(KjCancel *cancel, KjCancelSlot *slot)
{
    int64_t limit = cancel->time_limit_s >= 1e9 ? (int64_t)1e18 : (int64_t)(cancel->time_limit_s * 1e9);
    slot->deadline_ns = now_ns() + (limit > 0 ? limit : 1);
    if (!cancel->watchdog_running &&
        pthread_create(&cancel->watchdog, NULL, watchdog_main, cancel) == 0)
        cancel->watchdog_running = true;
    pthread_cond_signal(&cancel->wake);
}

/* ----------------------------------------------------------------- calls */

/* Whether the calling call is the only one running on the context. */
static bool alone(KjCancel *cancel)
{
    return atomic_load(&cancel->running) == 1;
}

void kj_cancel_begin(kjit_context *context, KjCancelCall *call)
{
    KjCancel *cancel = context->cancel;
    call->previous = kj_cancel_slot;
    call->signal_slot = kj_signal_guard_begin(context);
    atomic_fetch_add(&cancel->running, 1);
    KjCancelSlot *slot = &cancel->slots[KJ_CANCEL_SLOTS - 1];
    for (int i = 0; i < KJ_CANCEL_SLOTS - 1; i++) {
        int32_t free_slot = 0;
        if (atomic_compare_exchange_strong(&cancel->slots[i].users, &free_slot, 1)) {
            slot = &cancel->slots[i];
            break;
        }
    }
    /* a slot starts clear (the shared last one when its first user takes
     * it); the hot path reads and writes nothing more when it is */
    if (slot != &cancel->slots[KJ_CANCEL_SLOTS - 1] || atomic_fetch_add(&slot->users, 1) == 0) {
        if (atomic_load_explicit(&slot->flag, memory_order_relaxed))
            clear_flag(slot);
        if (atomic_load_explicit(&slot->timed_out, memory_order_relaxed))
            atomic_store(&slot->timed_out, 0);
    }
    call->slot = slot;
    /* cuda: a request that no running call took is not kept for this one
     * (the kernels it stopped were reported by a synchronisation, or not);
     * cleared only when set, since a seq_cst store is a full fence and this
     * is every call's path (a request made after the load is one made after
     * the store was, before: both leave it for this call's kernels) */
    if (cancel->device_flag &&
        atomic_load_explicit(cancel->device_flag, memory_order_relaxed) && alone(cancel))
        atomic_store(cancel->device_flag, 0);
    if (cancel->time_limit_s > 0) {
        pthread_mutex_lock(&cancel->lock);
        set_deadline(cancel, slot);
        pthread_mutex_unlock(&cancel->lock);
    }
    kj_cancel_slot = slot;
}

kjit_status kj_cancel_end(kjit_context *context, KjCancelCall *call, const char *name,
                          kjit_status status)
{
    KjCancel *cancel = context->cancel;
    KjCancelSlot *slot = call->slot;
    kj_cancel_slot = call->previous;
    kj_signal_guard_end(call->signal_slot);
    if (cancel->time_limit_s > 0) {
        pthread_mutex_lock(&cancel->lock);
        slot->deadline_ns = 0;
        pthread_mutex_unlock(&cancel->lock);
    }
    bool cancelled = atomic_load(&slot->flag) != 0;
    bool timed_out = atomic_load(&slot->timed_out) != 0;
    /* cuda: the kernels poll the context's flag; the last call running
     * clears it */
    if (cancel->device_flag && atomic_load(cancel->device_flag)) {
        cancelled = true;
        if (alone(cancel))
            atomic_store(cancel->device_flag, 0);
    }
    atomic_fetch_sub(&cancel->running, 1);
    if (slot == &cancel->slots[KJ_CANCEL_SLOTS - 1]) {
        if (atomic_fetch_sub(&slot->users, 1) == 1) {
            clear_flag(slot);
            atomic_store(&slot->timed_out, 0);
        }
    } else {
        if (cancelled)
            clear_flag(slot);
        if (timed_out)
            atomic_store(&slot->timed_out, 0);
        atomic_store_explicit(&slot->users, 0, memory_order_release);
        /* a cancel that saw this call running may land just now: leave no
         * raised flag on a free slot (it would keep the pending count up) */
        if (atomic_load_explicit(&slot->flag, memory_order_relaxed))
            clear_flag(slot);
    }
    /* a call that failed otherwise keeps its own error */
    if (status != KJIT_OK || !cancelled)
        return status;
    if (timed_out)
        return kj_api_set_error(context, KJIT_ERROR_TIMEOUT,
                                "%s: stopped: it ran past the time limit of %g s "
                                "(kjit_options.time_limit_s); its results are incomplete",
                                name, cancel->time_limit_s);
    return kj_api_set_error(context, KJIT_ERROR_CANCELLED,
                            "%s: cancelled by kjit_context_cancel; its results are incomplete",
                            name);
}

kjit_status kj_cancel_device_status(kjit_context *context, const char *name)
{
    if (!kj_cancel_take_device_flag(context->cancel))
        return KJIT_OK;
    return kj_api_set_error(context, KJIT_ERROR_CANCELLED,
                            "%s: cancelled on the GPU (kjit_context_cancel or the time limit); "
                            "its results are incomplete", name);
}

/* ---------------------------------------------------- cancel_signal */

/*
 * kjit_options.cancel_signal: while calls of such contexts run, the signal's
 * handler is kjit's, which cancels them.  Handlers are process-wide, so the
 * contexts running are in a table the handler reads with atomic loads only,
 * and one handler serves them all.  A signal that came is raised again for
 * the handler put back when that is a function (Python's sets its flag, and
 * Python raises KeyboardInterrupt once the call has returned); the default
 * action is not taken again (a command line reads KJIT_ERROR_CANCELLED
 * instead).
 *
 * Installing a handler and putting the old one back are two system calls,
 * which cost more than a whole call on 1,000 elements (about 1 us of 2 from
 * Python).  So a call only registers itself; a watcher thread, started on
 * first use, installs kjit's handler once calls have been running for
 * KJ_SIGNAL_GRACE_NS without a pause, and the last call to end puts the old
 * one back (only then is there a system call).  A signal in a call's first
 * milliseconds goes to the handler in place: a short call ends anyway, and
 * Python raises KeyboardInterrupt when it returns.  Calls read no clock: the
 * end of each run of calls (the calls running going to 0) bumps a
 * generation, and the watcher, polling every millisecond, installs the
 * handler when it has seen calls running in the same generation for
 * KJ_SIGNAL_GRACE_POLLS polls in a row; it sleeps once no call has come for
 * KJ_SIGNAL_IDLE_POLLS.
 *
 * A call takes no lock while the watcher is awake and the signal is the one
 * in use (signal_awake): it registers its context and counts itself with
 * atomic operations only (a mutex taken twice a call was a tenth of a cpu
 * call from Python), three read-modify-writes a call: the table entry it
 * claims, and the count of calls running and the generation, which share one
 * word (signal_state) so a call counts itself in and out with one operation
 * each (five operations cost a cpu launch about 12 ns over default options
 * on the 2-core build machine, three about 7-8: tests/gpu/launch_options.c).  The lock is for what changes the process's state:
 * starting or waking the watcher, another signal, and putting the old
 * handler back, which the last call to end does when kjit's is in place.
 * Two races are closed by the watcher: a call that ends just as the watcher
 * installs the handler leaves it with no call running, and the watcher, which
 * looks again after installing and at every poll, puts the old one back; and
 * a call that starts just as the watcher goes to sleep sees signal_awake
 * false (the watcher clears it before its last look at signal_users, the
 * call reads it after counting itself) and wakes it under the lock.
 */
#define KJ_SIGNAL_CONTEXTS 64
#define KJ_SIGNAL_POLL_NS 1000000 /* 1 ms */
#define KJ_SIGNAL_GRACE_POLLS 5   /* about 5 ms: faster than anyone notices */
#define KJ_SIGNAL_IDLE_POLLS 1000 /* about 1 s without calls: the watcher sleeps */

static pthread_mutex_t signal_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t signal_wake = PTHREAD_COND_INITIALIZER;
static kjit_context *_Atomic signal_contexts[KJ_SIGNAL_CONTEXTS];
/* read by calls without the lock; changed by calls with atomic operations
 * (users, generation, declined) or under signal_lock (number, installed,
 * awake) */
static _Atomic int signal_number;
/* the calls running (low 32 bits) and the runs of calls ended so far (the
 * generation, high 32 bits) */
static _Atomic uint64_t signal_state;
static _Atomic bool signal_installed;      /* kjit's handler is in place */
static _Atomic bool signal_declined;       /* this run of calls found the signal ignored */
static _Atomic bool signal_awake;          /* the watcher runs and polls */
/* under signal_lock: */
static bool signal_watching; /* the watcher thread runs */
static bool signal_idle;     /* it waits on signal_wake */
static struct sigaction signal_previous;
static volatile sig_atomic_t signal_seen;

static void on_signal(int signo)
{
    (void)signo;
    signal_seen = 1;
    for (int i = 0; i < KJ_SIGNAL_CONTEXTS; i++) {
        kjit_context *context = atomic_load(&signal_contexts[i]);
        if (context)
            kjit_context_cancel(context);
    }
}

/* Under signal_lock: kjit's handler in place of the one found. */
static void signal_install(void)
{
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    signal_seen = 0;
    int signo = atomic_load(&signal_number);
    if (sigaction(signo, &action, &signal_previous) != 0) {
        atomic_store(&signal_declined, true);
        return;
    }
    if (!(signal_previous.sa_flags & SA_SIGINFO) && signal_previous.sa_handler == SIG_IGN) {
        /* an ignored signal stays ignored (a shell's background job) */
        sigaction(signo, &signal_previous, NULL);
        atomic_store(&signal_declined, true);
        return;
    }
    atomic_store(&signal_installed, true);
}

/* Under signal_lock, no call running: the handler found put back, and a
 * signal that came raised again for it. */
static void signal_uninstall(void)
{
    int signo = atomic_load(&signal_number);
    sigaction(signo, &signal_previous, NULL);
    atomic_store(&signal_installed, false);
    bool handler = !(signal_previous.sa_flags & SA_SIGINFO)
                       ? signal_previous.sa_handler != SIG_DFL &&
                             signal_previous.sa_handler != SIG_IGN
                       : signal_previous.sa_sigaction != NULL;
    if (signal_seen && handler)
        raise(signo);
    signal_seen = 0;
}

static uint32_t signal_users(void)
{
    return (uint32_t)atomic_load(&signal_state);
}

static void *signal_watcher(void *arg)
{
    (void)arg;
    uint32_t seen = 0; /* the generation of the last poll */
    int busy = 0;      /* polls in a row that saw calls running in it */
    int idle = 0;      /* polls in a row that saw none, and no run end */
    pthread_mutex_lock(&signal_lock);
    for (;;) {
        uint64_t state = atomic_load(&signal_state);
        uint32_t generation = (uint32_t)(state >> 32), users = (uint32_t)state;
        if (generation != seen) {
            seen = generation;
            busy = idle = 0;
        }
        if (users > 0) {
            busy++;
            idle = 0;
        } else {
            idle++;
            busy = 0;
        }
        if (users > 0 && !atomic_load(&signal_installed) && !atomic_load(&signal_declined) &&
            busy >= KJ_SIGNAL_GRACE_POLLS)
            signal_install();
        /* a call that ended while the handler went in: nobody else puts
         * the old one back */
        if (signal_users() == 0 && atomic_load(&signal_installed))
            signal_uninstall();
        if (users == 0 && idle >= KJ_SIGNAL_IDLE_POLLS) {
            atomic_store(&signal_awake, false);
            if (signal_users() == 0) { /* (a call counted before `awake` went) */
                signal_idle = true;
                while (signal_idle)
                    pthread_cond_wait(&signal_wake, &signal_lock);
            }
            atomic_store(&signal_awake, true);
            busy = idle = 0;
            continue;
        }
        pthread_mutex_unlock(&signal_lock);
        struct timespec pause = {.tv_sec = 0, .tv_nsec = KJ_SIGNAL_POLL_NS};
        nanosleep(&pause, NULL);
        pthread_mutex_lock(&signal_lock);
    }
    return NULL;
}

/* A forked child has no watcher: the first guarded call there starts one. */
static void signal_after_fork(void)
{
    signal_watching = signal_idle = false;
    atomic_store(&signal_awake, false);
}

static void signal_register_atfork(void)
{
    pthread_atfork(NULL, NULL, signal_after_fork);
}

/* A free entry of the table for `context`, or -1. */
static int signal_claim(kjit_context *context)
{
    for (int i = 0; i < KJ_SIGNAL_CONTEXTS; i++) {
        kjit_context *none = NULL;
        if (atomic_compare_exchange_strong(&signal_contexts[i], &none, context))
            return i;
    }
    return -1;
}

/* The call counted: a run of calls starts again from a handler not declined. */
static void signal_count_call(void)
{
    if ((uint32_t)atomic_fetch_add(&signal_state, 1) == 0 &&
        atomic_load_explicit(&signal_declined, memory_order_relaxed))
        atomic_store(&signal_declined, false);
}

/* The call counted out; the last of a run ends it (the generation moves on).
 * The calls left running. */
static uint32_t signal_uncount_call(void)
{
    uint64_t old = atomic_load_explicit(&signal_state, memory_order_relaxed), next;
    do
        next = (uint32_t)old == 1 ? old - 1 + ((uint64_t)1 << 32) : old - 1;
    while (!atomic_compare_exchange_weak(&signal_state, &old, next));
    return (uint32_t)next;
}

static int kj_signal_guard_begin(kjit_context *context)
{
    int signo = context->options.cancel_signal;
    if (signo <= 0)
        return -1;
    /* the common case: atomic operations only */
    if (atomic_load(&signal_awake) && atomic_load(&signal_number) == signo) {
        int slot = signal_claim(context);
        if (slot < 0)
            return -1;
        signal_count_call();
        if (atomic_load(&signal_awake) && atomic_load(&signal_number) == signo)
            return slot;
        /* the watcher went to sleep, or another signal came in, meanwhile:
         * the careful way, below */
        signal_uncount_call();
        atomic_store(&signal_contexts[slot], NULL);
    }
    pthread_mutex_lock(&signal_lock);
    int slot = -1;
    if (signal_users() == 0 || atomic_load(&signal_number) == signo)
        slot = signal_claim(context);
    if (slot >= 0) {
        atomic_store(&signal_number, signo);
        signal_count_call();
        if (!signal_watching) {
            static pthread_once_t once = PTHREAD_ONCE_INIT;
            pthread_once(&once, signal_register_atfork);
            pthread_attr_t attr;
            pthread_t thread;
            pthread_attr_init(&attr);
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            if (pthread_create(&thread, &attr, signal_watcher, NULL) == 0) {
                signal_watching = true;
                atomic_store(&signal_awake, true);
            }
            pthread_attr_destroy(&attr);
        } else if (signal_idle) {
            signal_idle = false;
            pthread_cond_signal(&signal_wake);
        }
    }
    pthread_mutex_unlock(&signal_lock);
    return slot;
}

static void kj_signal_guard_end(int slot)
{
    if (slot < 0)
        return;
    /* (a release store, not a read-modify-write: a handler that still sees
     * the context cancels only the calls running on it) */
    atomic_store_explicit(&signal_contexts[slot], NULL, memory_order_release);
    if (signal_uncount_call() != 0 || !atomic_load(&signal_installed))
        return;
    pthread_mutex_lock(&signal_lock);
    if (signal_users() == 0 && atomic_load(&signal_installed))
        signal_uninstall();
    pthread_mutex_unlock(&signal_lock);
}

kjit_status kj_cancel_end_result(kjit_context *context, KjCancelCall *call, const char *name,
                                 kjit_status ran, kjit_array *result)
{
    kjit_status status = kj_cancel_end(context, call, name, ran);
    if (ran == KJIT_OK && status != KJIT_OK && result) {
        kjit_array_free(result);
        memset(result, 0, sizeof *result);
    }
    return status;
}
