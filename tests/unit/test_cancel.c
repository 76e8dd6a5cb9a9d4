/*
 * test_cancel.c: stopping calls on the cpu targets (runtime/cancel.c,
 * compiler/backend/codegen_cancel.c).  Kernels and functions that loop
 * without end (their `stop` argument is a value their counter never takes)
 * run on a second thread; kjit_context_cancel from this one must end them
 * with KJIT_ERROR_CANCELLED, on cpu and parallel, with the SIMD lowering
 * on and off, without barriers, with barriers the split form takes, and on
 * fibers; a time limit must end them with KJIT_ERROR_TIMEOUT.  After each,
 * the same context runs the same function with a reachable `stop` and gets
 * the right answer.  A call that never returns fails the test after
 * JOIN_SECONDS instead of hanging it.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixture.h"

/* How long a cancelled call may take to return. */
#define JOIN_SECONDS 10

static const char *const source =
    /* every thread counts mod 1000 until it meets stop (-1: never) */
    "@kernel\n"
    "fn spin(out: i32[], stop: i32) {\n"
    "    let i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    let k = i % 7;\n"
    "    while k != stop {\n"
    "        k = (k + 1) % 1000;\n"
    "    }\n"
    "    out[i] = k;\n"
    "}\n"
    /* the same with a barrier in the loop: uniform, so the split form takes it */
    "@kernel\n"
    "fn spin_sync(out: i32[], stop: i32) {\n"
    "    let sh = shared(i32, 256);\n"
    "    let t = threadIdx.x;\n"
    "    let k: i32 = 0;\n"
    "    while k != stop {\n"
    "        sh[t] = k;\n"
    "        syncthreads();\n"
    "        k = (k + 1) % 1000;\n"
    "        syncthreads();\n"
    "    }\n"
    "    out[blockIdx.x * blockDim.x + t] = sh[t] + 1;\n"
    "}\n"
    /* a barrier under varying control (fibers always), then a loop without one */
    "@kernel\n"
    "fn spin_fiber(out: i32[], stop: i32) {\n"
    "    let t = threadIdx.x;\n"
    "    if t < 1000 {\n"
    "        syncthreads();\n"
    "    }\n"
    "    let k = t % 5;\n"
    "    while k != stop {\n"
    "        k = (k + 3) % 1000;\n"
    "    }\n"
    "    out[blockIdx.x * blockDim.x + t] = k;\n"
    "}\n"
    /* a counted loop far too long to wait for (no while at all) */
    "@kernel\n"
    "fn long_for(out: i64[], n: i64) {\n"
    "    let i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    let total: i64 = 0;\n"
    "    for j in range(n) {\n"
    "        total = (total + j * 3 + i64(i)) % 1000003;\n"
    "    }\n"
    "    out[i] = total;\n"
    "}\n"
    "@vectorize\n"
    "fn vspin(x: i32, stop: i32) -> i32 {\n"
    "    let k = x;\n"
    "    while k != stop {\n"
    "        k = (k + 1) % 1000;\n"
    "    }\n"
    "    return k;\n"
    "}\n"
    "fn count_to(stop: i64) -> i64 {\n"
    "    let k: i64 = 0;\n"
    "    while k != stop {\n"
    "        k = (k + 1) % 1000;\n"
    "    }\n"
    "    return k;\n"
    "}\n"
    "fn pspin(stop: i64) -> i64 {\n"
    "    return count_to(stop) + 1;\n"
    "}\n";

enum { THREADS = 64, BLOCKS = 4, N = THREADS * BLOCKS };

/* The context of the calls the test makes now (open_context sets it). */
static kjit_context *calls_context;

static kjit_context *open_context(kjit_target target, int simd, int cancellable, double limit,
                                  kjit_module **module)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = target == KJIT_TARGET_PARALLEL ? 3 : 0;
    options.cpu_simd = simd;
    options.cancellable = cancellable;
    options.time_limit_s = limit;
    kjit_context *context = NULL;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    calls_context = context;
    ck_assert_msg(kjit_compile_string(context, "cancel.kern", source, module) == KJIT_OK, "%s",
                  kjit_last_error(context));
    return context;
}

static kjit_function *function_of(kjit_module *module, const char *name)
{
    kjit_function *fn = NULL;
    ck_assert_int_eq(kjit_module_function(module, name, &fn), KJIT_OK);
    return fn;
}

/* One call, run on a thread of its own. */
typedef struct Call {
    kjit_function *fn;
    int32_t *out;    /* N elements (kernels, vectorize) */
    int64_t *out64;  /* long_for */
    int32_t stop;
    int64_t count;   /* long_for's n */
    kjit_status status;
    int64_t scalar;  /* a plain function's result */
    char message[512]; /* kjit_last_error on the calling thread (errors are per thread) */
    _Atomic int started, done;
} Call;


static void *run_call(void *arg)
{
    Call *c = arg;
    c->started = 1;
    kjit_function *fn = c->fn;
    int64_t shape[1] = {N};
    switch (kjit_function_kind_of(fn)) {
    case KJIT_FUNCTION_KERNEL: {
        kjit_array out = c->out64 ? kjit_array_make(c->out64, KJIT_I64, 1, shape)
                                  : kjit_array_make(c->out, KJIT_I32, 1, shape);
        kjit_arg args[2] = {kjit_arg_array(&out), c->out64 ? kjit_arg_i64(c->count) : kjit_arg_i32(c->stop)};
        uint32_t grid[3] = {BLOCKS, 1, 1}, block[3] = {THREADS, 1, 1};
        c->status = kjit_launch(fn, grid, block, args, 2, NULL);
        break;
    }
    case KJIT_FUNCTION_VECTORIZE: {
        int32_t in[N];
        for (int i = 0; i < N; i++)
            in[i] = i % 13;
        kjit_array x = kjit_array_make(in, KJIT_I32, 1, shape);
        kjit_array out = kjit_array_make(c->out, KJIT_I32, 1, shape);
        kjit_arg args[2] = {kjit_arg_array(&x), kjit_arg_i32(c->stop)};
        c->status = kjit_call(fn, args, 2, &out, NULL);
        break;
    }
    default: {
        kjit_arg args[1] = {kjit_arg_i64(c->stop)};
        kjit_array result;
        c->status = kjit_call(fn, args, 1, NULL, &result);
        if (c->status == KJIT_OK) {
            c->scalar = *(int64_t *)result.data;
            kjit_array_free(&result);
        }
        break;
    }
    }
    snprintf(c->message, sizeof c->message, "%s", kjit_last_error(calls_context));
    c->done = 1;
    return NULL;
}

static double seconds_since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

/* Waits for the call's thread; a call still running after JOIN_SECONDS
 * fails the test (the forked test dies with its thread). */
static void join_or_fail(pthread_t thread, Call *c, const char *what)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (!c->done) {
        ck_assert_msg(seconds_since(&start) < JOIN_SECONDS, "%s: still running %d s after the cancel",
                      what, JOIN_SECONDS);
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    pthread_join(thread, NULL);
}

/* Starts `name` with a stop it never meets, cancels it after a while, and
 * checks the status; then a finite call on the same context. */
static void cancel_and_reuse(kjit_target target, int simd, int cancellable, const char *name)
{
    snprintf(unit_test_doing, sizeof unit_test_doing, "cancel %s on %s, simd %d, cancellable %d", name,
             kjit_target_name(target), simd, cancellable);
    kjit_module *module = NULL;
    kjit_context *context = open_context(target, simd, cancellable, 0, &module);
    static int32_t out[N];
    static int64_t out64[N];
    Call call = {.fn = function_of(module, name), .out = out, .stop = -1};
    if (strcmp(name, "long_for") == 0) {
        call.out64 = out64;
        call.count = (int64_t)1 << 50;
    }
    /* compiled before, so that the cancel finds it running */
    Call warm = call;
    warm.stop = 3;
    warm.count = 10;
    run_call(&warm);
    ck_assert_msg(warm.status == KJIT_OK, "%s: %s", name, kjit_last_error(context));

    pthread_t thread;
    ck_assert_int_eq(pthread_create(&thread, NULL, run_call, &call), 0);
    while (!call.started)
        sched_yield();
    struct timespec pause = {0, 50 * 1000000};
    nanosleep(&pause, NULL);
    ck_assert_msg(!call.done, "%s: an endless call returned (status %d) before the cancel", name,
                  (int)call.status);
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    kjit_context_cancel(context);
    join_or_fail(thread, &call, name);
    double took = seconds_since(&start);
    ck_assert_msg(call.status == KJIT_ERROR_CANCELLED, "%s on %s (simd %d): status %s: %s", name,
                  kjit_target_name(target), simd, kjit_status_name(call.status), call.message);
    ck_assert_msg(strstr(call.message, "cancelled") && strstr(call.message, name), "message: %s", call.message);
    ck_assert_msg(took < 2.0, "%s: the cancel took %.3f s", name, took);

    /* the context goes on: a finite call gives the right answer */
    Call again = call;
    again.stop = 500;
    again.count = 1000;
    again.done = 0;
    memset(out, 0, sizeof out);
    run_call(&again);
    ck_assert_msg(again.status == KJIT_OK, "%s after the cancel: %s", name, kjit_last_error(context));
    if (strcmp(name, "pspin") == 0)
        ck_assert_int_eq(again.scalar, 501);
    else if (strcmp(name, "spin_sync") == 0)
        ck_assert_int_eq(out[N - 1], 500); /* sh holds the last k, 499, plus 1 */
    else if (strcmp(name, "long_for") == 0) {
        int64_t total = 0;
        for (int64_t j = 0; j < 1000; j++)
            total = (total + j * 3 + (N - 1)) % 1000003;
        ck_assert_int_eq(out64[N - 1], total);
    } else
        for (int i = 0; i < N; i += 37)
            ck_assert_int_eq(out[i], 500);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

static const char *const endless[] = {"spin", "spin_sync", "spin_fiber", "long_for", "vspin", "pspin"};

START_TEST(cancel_on_cpu)
{
    for (size_t k = 0; k < sizeof endless / sizeof endless[0]; k++)
        cancel_and_reuse(KJIT_TARGET_CPU, _i, 1, endless[k]);
}
END_TEST

START_TEST(cancel_on_parallel)
{
    for (size_t k = 0; k < sizeof endless / sizeof endless[0]; k++)
        cancel_and_reuse(KJIT_TARGET_PARALLEL, _i, 1, endless[k]);
}
END_TEST

/* Without cancellable code the runtime still stops a kernel at its
 * barriers: the fibers' scheduler asks between them. */
START_TEST(cancel_at_barriers_without_polls)
{
    cancel_and_reuse(KJIT_TARGET_CPU, 0, 0, "spin_sync");
    cancel_and_reuse(KJIT_TARGET_PARALLEL, 0, 0, "spin_sync");
}
END_TEST

/* Cancels a context after a pause, from another thread. */
typedef struct Later {
    kjit_context *context;
    int milliseconds;
} Later;

static void *cancel_later(void *arg)
{
    Later *later = arg;
    struct timespec pause = {later->milliseconds / 1000, (long)(later->milliseconds % 1000) * 1000000};
    nanosleep(&pause, NULL);
    kjit_context_cancel(later->context);
    return NULL;
}

/* Without cancellable code a launch of many blocks stops between blocks,
 * and a long vectorized call between chunks of elements. */
START_TEST(cancel_between_pieces_without_polls)
{
    static const char pieces_source[] =
        "@kernel\n"
        "fn slow(out: f64[], n: i64) {\n"
        "    let i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    let x = 0.0;\n"
        "    for j in range(n) { x = x * 0.5 + f64(j); }\n"
        "    out[i % 64] = x;\n"
        "}\n"
        "@vectorize\n"
        "fn slow_element(x: f64, n: i64) -> f64 {\n"
        "    let y = x;\n"
        "    for j in range(n) { y = y * 0.5 + f64(j); }\n"
        "    return y;\n"
        "}\n";
    for (int parallel = 0; parallel < 2; parallel++) {
        snprintf(unit_test_doing, sizeof unit_test_doing, "cancel between pieces, parallel %d", parallel);
        kjit_options options;
        kjit_options_init(&options);
        options.target = parallel ? KJIT_TARGET_PARALLEL : KJIT_TARGET_CPU;
        options.num_threads = 3;
        options.cancellable = 0;
        kjit_context *context;
        kjit_module *module;
        ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
        ck_assert_int_eq(kjit_compile_string(context, "slow.kern", pieces_source, &module), KJIT_OK);

        static double out[1 << 22];
        int64_t shape[1] = {64};
        kjit_array array = kjit_array_make(out, KJIT_F64, 1, shape);
        /* some microseconds a block; a million blocks would take minutes */
        kjit_arg args[2] = {kjit_arg_array(&array), kjit_arg_i64(20000)};
        uint32_t grid[3] = {1000000, 1, 1}, block[3] = {64, 1, 1};
        Later later = {context, 100};
        pthread_t thread;
        ck_assert_int_eq(pthread_create(&thread, NULL, cancel_later, &later), 0);
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        kjit_status status = kjit_launch(function_of(module, "slow"), grid, block, args, 2, NULL);
        pthread_join(thread, NULL);
        ck_assert_msg(status == KJIT_ERROR_CANCELLED, "launch: %s", kjit_last_error(context));
        ck_assert_msg(seconds_since(&start) < 5, "the launch took %.1f s", seconds_since(&start));

        /* a vectorized call over 2^22 elements of some microseconds each
         * (many seconds in all; its loop is in the element, where the
         * polls would be) */
        int64_t big[1] = {1 << 22};
        kjit_array x = kjit_array_make(out, KJIT_F64, 1, big);
        kjit_arg vargs[2] = {kjit_arg_array(&x), kjit_arg_i64(2000)};
        later.milliseconds = 100;
        ck_assert_int_eq(pthread_create(&thread, NULL, cancel_later, &later), 0);
        clock_gettime(CLOCK_MONOTONIC, &start);
        status = kjit_call(function_of(module, "slow_element"), vargs, 2, &x, NULL);
        pthread_join(thread, NULL);
        ck_assert_msg(status == KJIT_ERROR_CANCELLED, "call: %s", kjit_last_error(context));
        ck_assert_msg(seconds_since(&start) < 4, "the call took %.1f s", seconds_since(&start));
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

/* A cancel applies to the calls running when it comes: one made while
 * nothing runs is not kept for the next call. */
START_TEST(cancel_with_nothing_running_is_not_kept)
{
    kjit_module *module = NULL;
    kjit_context *context = open_context(KJIT_TARGET_CPU, 1, 1, 0, &module);
    kjit_context_cancel(context);
    static int32_t out[N];
    Call call = {.fn = function_of(module, "spin"), .out = out, .stop = 200};
    run_call(&call);
    ck_assert_msg(call.status == KJIT_OK, "%s", kjit_last_error(context));
    ck_assert_int_eq(out[N - 1], 200);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

/* A time limit ends an endless call with KJIT_ERROR_TIMEOUT and a message
 * naming the limit; the next call runs with a fresh limit. */
START_TEST(time_limit_stops_a_call)
{
    for (int k = 0; k < 3; k++) {
        const char *name = k == 0 ? "spin" : k == 1 ? "spin_sync" : "vspin";
        snprintf(unit_test_doing, sizeof unit_test_doing, "time limit on %s, %s", name,
                 _i ? "parallel" : "cpu");
        kjit_module *module = NULL;
        kjit_context *context =
            open_context(_i ? KJIT_TARGET_PARALLEL : KJIT_TARGET_CPU, 1, 0, 0.25, &module);
        static int32_t out[N];
        Call call = {.fn = function_of(module, name), .out = out, .stop = -1};
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        pthread_t thread;
        ck_assert_int_eq(pthread_create(&thread, NULL, run_call, &call), 0);
        join_or_fail(thread, &call, name);
        double took = seconds_since(&start);
        ck_assert_msg(call.status == KJIT_ERROR_TIMEOUT, "%s: %s: %s", name, kjit_status_name(call.status),
                      call.message);
        ck_assert_msg(strstr(call.message, "time limit of 0.25 s"), "message: %s", call.message);
        ck_assert_msg(took >= 0.24 && took < 5, "stopped after %.3f s", took);
        Call again = call;
        again.stop = 100;
        again.done = 0;
        run_call(&again);
        ck_assert_msg(again.status == KJIT_OK, "%s after its time limit: %s", name, kjit_last_error(context));
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

/* ------------------------------------------- cancel_signal's handler */

static volatile sig_atomic_t own_signals;

static void own_handler(int signo)
{
    (void)signo;
    own_signals++;
}

static bool own_handler_in_place(void)
{
    struct sigaction now;
    sigaction(SIGUSR1, NULL, &now);
    return !(now.sa_flags & SA_SIGINFO) && now.sa_handler == own_handler;
}

/* Waits up to 2 s for kjit's handler to be in place of ours. */
static bool kjit_handler_comes(void)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (seconds_since(&start) < 2) {
        if (!own_handler_in_place())
            return true;
        struct timespec pause = {0, 200000};
        nanosleep(&pause, NULL);
    }
    return false;
}

/* Short calls one after another on a thread (until `stop` is set). */
typedef struct Shorts {
    Call call;
    _Atomic int stop;
    int calls;
} Shorts;

static void *short_calls(void *arg)
{
    Shorts *shorts = arg;
    while (!shorts->stop) {
        run_call(&shorts->call);
        shorts->calls++;
    }
    return NULL;
}

/*
 * kjit_options.cancel_signal (cancel.c): between calls the handler in place
 * is the program's own; a call that runs past the grace gets kjit's, also
 * while short calls on another thread start and end around it (the run of
 * calls goes on), and the signal then cancels it and reaches the program's
 * handler once the old one is back.
 */
START_TEST(cancel_signal_guard)
{
    struct sigaction own, before;
    memset(&own, 0, sizeof own);
    own.sa_handler = own_handler;
    sigemptyset(&own.sa_mask);
    ck_assert_int_eq(sigaction(SIGUSR1, &own, &before), 0);
    own_signals = 0;
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CPU;
    options.cancellable = 1;
    options.cancel_signal = SIGUSR1;
    kjit_context *context = NULL;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    calls_context = context;
    kjit_module *module = NULL;
    ck_assert_msg(kjit_compile_string(context, "cancel.kern", source, &module) == KJIT_OK, "%s",
                  kjit_last_error(context));
    static int32_t out[N], short_out[N];
    /* short calls: the program's handler between each */
    Call quick = {.fn = function_of(module, "spin"), .out = short_out, .stop = 6};
    for (int i = 0; i < 200; i++) {
        run_call(&quick);
        ck_assert_msg(quick.status == KJIT_OK, "%s", quick.message);
        ck_assert_msg(own_handler_in_place(), "after short call %d kjit's handler stayed", i);
    }
    /* an endless call beside short calls on a third thread */
    Shorts shorts = {.call = quick};
    pthread_t short_thread, long_thread;
    ck_assert_int_eq(pthread_create(&short_thread, NULL, short_calls, &shorts), 0);
    Call endless_call = {.fn = function_of(module, "spin"), .out = out, .stop = -1};
    ck_assert_int_eq(pthread_create(&long_thread, NULL, run_call, &endless_call), 0);
    /* (a short call held up past the grace may put kjit's handler in for a
     * moment before the endless one starts: look once that one runs) */
    while (!endless_call.started)
        sched_yield();
    struct timespec settle = {0, 100000000};
    nanosleep(&settle, NULL);
    bool installed = kjit_handler_comes();
    shorts.stop = 1;
    pthread_join(short_thread, NULL);
    ck_assert_msg(installed, "no kjit handler while a call ran for 2 s (beside %d short calls)",
                  shorts.calls);
    ck_assert_msg(shorts.calls > 0 && shorts.call.status == KJIT_OK, "short calls: %d, %s",
                  shorts.calls, shorts.call.message);
    kill(getpid(), SIGUSR1);
    join_or_fail(long_thread, &endless_call, "spin under cancel_signal");
    ck_assert_msg(endless_call.status == KJIT_ERROR_CANCELLED, "%s: %s",
                  kjit_status_name(endless_call.status), endless_call.message);
    ck_assert_msg(own_handler_in_place(), "the program's handler is back after the call");
    ck_assert_int_eq(own_signals, 1); /* raised again for it */
    /* and the context runs the next call */
    run_call(&quick);
    ck_assert_msg(quick.status == KJIT_OK, "%s", quick.message);
    ck_assert_int_eq(short_out[N - 1], 6);
    kjit_module_free(module);
    kjit_context_destroy(context);
    sigaction(SIGUSR1, &before, NULL);
}
END_TEST

Suite *suite_cancel(void)
{
    Suite *s = suite_create("cancel");
    TCase *tc = tcase_create("cancel");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, cancel_on_cpu, 0, 2);
    tcase_add_loop_test(tc, cancel_on_parallel, 0, 2);
    tcase_add_test(tc, cancel_at_barriers_without_polls);
    tcase_add_test(tc, cancel_between_pieces_without_polls);
    tcase_add_test(tc, cancel_with_nothing_running_is_not_kept);
    tcase_add_loop_test(tc, time_limit_stops_a_call, 0, 2);
    tcase_add_test(tc, cancel_signal_guard);
    suite_add_tcase(s, tc);
    return s;
}
