/* tests/gpu/launch_options.c: what the Python package's context options cost
 * a launch in the C API (issue 26 item 3).  The Python package makes its
 * contexts cancellable with cancel_signal SIGINT (Ctrl-C cancels a call);
 * programs in C make them with default options.  bench_python.py compared
 * the Python launch with build/latency's C launch, each in a process of its
 * own, and the C figure moved between runs (0.21 us against 0.38 us with
 * Python's options in one run on the 16-core host, 0.42 against 0.39 in
 * another), so here all four contexts are timed in one process, their
 * batches interleaved:
 *
 *   default          kjit_options_init's
 *   cancellable      cancellable code (its kernels poll the cancel word)
 *   cancel_signal    cancel_signal SIGINT (which makes the code cancellable
 *                    too, and guards each call for the signal: cancel.c)
 *   Python's         both, as python/kjit/_core.py asks
 *
 * An empty kernel (grid 1, block 1, one f32 array of 1,000) on the cpu
 * target, RUNS batches of CALLS launches each, per-call time of the fastest
 * batch and the median (thread cpu clock, so another process on the host
 * does not count).  Rows "| options | fastest ns | median ns | over default |".
 *
 *   cc -O2 -Iruntime -o launch-options tests/gpu/launch_options.c -Lbuild -lkjit \
 *       -Wl,-rpath,$PWD/build && ./launch-options
 * (tests/gpu/python.sh builds it with the bundle's bin/libkjit.so and
 * tests/gpu/launch_diag.py runs it in each of its configurations.) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../cuda_host/diag_common.h"
#include "kjit.h"

enum { FORMS = 4, RUNS = 15, CALLS = 20000 };

int main(void)
{
    static const char *const names[FORMS] = {"default", "cancellable", "cancel_signal",
                                             "Python's (both)"};
    kjit_context *context[FORMS];
    kjit_function *empty[FORMS];
    kjit_array array[FORMS];
    for (int k = 0; k < FORMS; k++) {
        kjit_options options;
        diag_options(&options, KJIT_TARGET_CPU, false);
        options.cancellable = k & 1;
        options.cancel_signal = k & 2 ? SIGINT : 0;
        kjit_module *module;
        int64_t shape[1] = {1000};
        if (kjit_context_create(&options, &context[k]) != KJIT_OK ||
            kjit_compile_string(context[k], "launch_options.kern",
                                "@kernel\nfn empty(x: f32[]) {\n}\n", &module) != KJIT_OK ||
            kjit_module_function(module, "empty", &empty[k]) != KJIT_OK ||
            kjit_device_alloc(context[k], KJIT_F32, 1, shape, &array[k]) != KJIT_OK) {
            fprintf(stderr, "launch-options: %s: %s\n", names[k], kjit_last_error(context[k]));
            return 1;
        }
    }
    static const uint32_t one[3] = {1, 1, 1};
    double times[FORMS][RUNS];
    for (int r = 0; r < RUNS; r++)
        for (int k = 0; k < FORMS; k++) {
            kjit_arg arg = kjit_arg_array(&array[k]);
            double start = diag_thread_ns();
            for (int i = 0; i < CALLS; i++)
                if (kjit_launch(empty[k], one, one, &arg, 1, NULL) != KJIT_OK) {
                    fprintf(stderr, "launch-options: %s\n", kjit_last_error(context[k]));
                    return 1;
                }
            times[k][r] = (diag_thread_ns() - start) / CALLS;
        }
    printf("| options | fastest ns | median ns | over default |\n| --- | --- | --- | --- |\n");
    double base = 0;
    for (int k = 0; k < FORMS; k++) {
        double median = diag_median(times[k], RUNS);
        if (k == 0)
            base = times[k][0];
        printf("| %s | %.1f | %.1f | %+.1f ns |\n", names[k], times[k][0], median,
               times[k][0] - base);
    }
    for (int k = 0; k < FORMS; k++) {
        kjit_device_free(context[k], &array[k]);
        kjit_context_destroy(context[k]);
    }
    return 0;
}
