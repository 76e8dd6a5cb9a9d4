/*
 * first_call.c: the time from a process's main to the end of its first call
 * (tests/aot/latency.sh, make bench-latency): a context, the module (a
 * library loaded, or a .kern compiled: cold, or from the disk cache), and
 * one call: add, vsin, vexp over 100,000 elements, or a 64 x 48
 * mandel_kernel launch.  Linked with libkjit-rt for --lib, with libkjit for
 * --kern.  Prints the milliseconds.
 *
 *   first_call --lib LIB|--kern FILE FUNCTION
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kjit.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

enum { N = 100000 };
static float a[N], b[N];
static double x[N];
static unsigned char image[48 * 64];

int main(int argc, char **argv)
{
    for (int i = 0; i < N; i++)
        a[i] = (float)i * 1e-5f, b[i] = 1.0f, x[i] = i * 1e-4;
    memset(image, 0, sizeof image);
    double t0 = now_ms();
    if (argc != 4) {
        fprintf(stderr, "usage: first_call --lib LIB|--kern FILE FUNCTION\n");
        return 2;
    }
    bool lib = strcmp(argv[1], "--lib") == 0;
    const char *name = argv[3];
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CPU;
    kjit_context *context = NULL;
    kjit_module *module = NULL;
    kjit_function *f = NULL;
    if (kjit_context_create(&options, &context) != KJIT_OK ||
        (lib ? kjit_module_load_library(context, argv[2], &module)
             : kjit_compile_file(context, argv[2], &module)) != KJIT_OK ||
        kjit_module_function(module, name, &f) != KJIT_OK) {
        fprintf(stderr, "first_call: %s\n", kjit_last_error(context));
        return 1;
    }
    kjit_status status;
    kjit_array result = {0};
    if (strcmp(name, "mandel_kernel") == 0) {
        int64_t shape[2] = {48, 64};
        kjit_array img = kjit_array_make(image, KJIT_U8, 2, shape);
        kjit_arg args[6] = {kjit_arg_f64(-2), kjit_arg_f64(1), kjit_arg_f64(-1), kjit_arg_f64(1),
                            kjit_arg_array(&img), kjit_arg_i64(100)};
        uint32_t grid[3] = {2, 2, 1}, block[3] = {16, 8, 1};
        status = kjit_launch(f, grid, block, args, 6, NULL);
    } else {
        int64_t n = N;
        bool f64 = strcmp(name, "vsin") == 0;
        kjit_array xa = kjit_array_make(f64 ? (void *)x : (void *)a, f64 ? KJIT_F64 : KJIT_F32, 1, &n);
        kjit_array xb = kjit_array_make(b, KJIT_F32, 1, &n);
        kjit_arg args[2] = {kjit_arg_array(&xa), kjit_arg_array(&xb)};
        status = kjit_call(f, args, strcmp(name, "add") == 0 ? 2 : 1, NULL, &result);
    }
    double t1 = now_ms();
    if (status != KJIT_OK) {
        fprintf(stderr, "first_call: %s\n", kjit_last_error(context));
        return 1;
    }
    printf("%.3f\n", t1 - t0);
    kjit_array_free(&result);
    kjit_module_free(module);
    kjit_context_destroy(context);
    return 0;
}
