/*
 * call_cost.c: the host cost of a call, from a library against the JIT's
 * code for the same root (tests/aot/latency.sh, make bench-latency): a
 * tight loop of kjit_call of add on 16 f32 elements (its output given) and
 * of kjit_launch of mandel_kernel on one thread of a 1 x 1 image (1
 * iteration), where the kernel's own work is a few nanoseconds and the rest
 * is the call path: argument checks, signature dispatch, the look-up of the
 * code, the entry.  Linked with libkjit-rt for --lib, with libkjit for
 * --kern; the code is found (or compiled) before the clock starts.  Prints
 * the best of 5 rounds of ROUNDS calls, in nanoseconds per call.
 *
 *   call_cost --lib LIB|--kern FILE add|mandel_kernel
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kjit.h"

enum { ROUNDS = 100000 };

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: call_cost --lib LIB|--kern FILE add|mandel_kernel\n");
        return 2;
    }
    bool lib = strcmp(argv[1], "--lib") == 0, launch = strcmp(argv[3], "mandel_kernel") == 0;
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CPU;
    kjit_context *context = NULL;
    kjit_module *module = NULL;
    kjit_function *f = NULL;
    if (kjit_context_create(&options, &context) != KJIT_OK ||
        (lib ? kjit_module_load_library(context, argv[2], &module)
             : kjit_compile_file(context, argv[2], &module)) != KJIT_OK ||
        kjit_module_function(module, argv[3], &f) != KJIT_OK) {
        fprintf(stderr, "call_cost: %s\n", kjit_last_error(context));
        return 1;
    }
    float a[16], b[16], c[16];
    unsigned char pixel = 0;
    for (int i = 0; i < 16; i++)
        a[i] = (float)i, b[i] = 0.5f;
    int64_t n = 16, shape[2] = {1, 1};
    kjit_array xa = kjit_array_make(a, KJIT_F32, 1, &n), xb = kjit_array_make(b, KJIT_F32, 1, &n);
    kjit_array xc = kjit_array_make(c, KJIT_F32, 1, &n);
    kjit_array image = kjit_array_make(&pixel, KJIT_U8, 2, shape);
    kjit_arg add_args[2] = {kjit_arg_array(&xa), kjit_arg_array(&xb)};
    kjit_arg launch_args[6] = {kjit_arg_f64(-2), kjit_arg_f64(1), kjit_arg_f64(-1),
                               kjit_arg_f64(1), kjit_arg_array(&image), kjit_arg_i64(1)};
    uint32_t one[3] = {1, 1, 1};
    double best = 1e30;
    for (int round = 0; round <= 5; round++) {
        double start = now_ns();
        for (int i = 0; i < ROUNDS; i++) {
            kjit_status status = launch ? kjit_launch(f, one, one, launch_args, 6, NULL)
                                        : kjit_call(f, add_args, 2, &xc, NULL);
            if (status != KJIT_OK) {
                fprintf(stderr, "call_cost: %s\n", kjit_last_error(context));
                return 1;
            }
        }
        double per_call = (now_ns() - start) / ROUNDS;
        if (round > 0 && per_call < best) /* round 0 finds the code and warms up */
            best = per_call;
    }
    if (!launch && c[3] != 3.5f) {
        fprintf(stderr, "call_cost: add gave %g, not 3.5\n", c[3]);
        return 1;
    }
    printf("%.1f\n", best);
    kjit_module_free(module);
    kjit_context_destroy(context);
    return 0;
}
