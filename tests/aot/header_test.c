/*
 * header_test.c: the typed entry points that `kjit build --emit=header`
 * writes (add.h, mandelbrot.h) give what kjit_call and kjit_launch give;
 * built against kjit.h and the headers alone, linked with libkjit-rt
 * (tests/aot/aot.sh).
 *
 *   header_test libadd.so libmandelbrot.so
 *
 * Built with -DLINKED and linked with libadd.a and libmandelbrot.a (kjit
 * build --emit=staticlib): the same through add_open_linked and
 * mandelbrot_open_linked, two archives in one program; and
 * kjit_module_load_linked refuses another ABI version and a damaged table.
 *
 *   header_test --linked
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "add.h"
#include "mandelbrot.h"

static int failures;
static kjit_context *context;
static void expect(bool ok, const char *what)
{
    if (!ok) {
        printf("header_test: %s: %s\n", what, kjit_last_error(context));
        failures++;
    }
}

int main(int argc, char **argv)
{
#ifdef LINKED
    if (argc != 2 || strcmp(argv[1], "--linked") != 0)
        return 2;
#else
    if (argc != 3)
        return 2;
#endif
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CPU;
    if (kjit_context_create(&options, &context) != KJIT_OK)
        return 1;
    add_module am;
    mandelbrot_module mm;
#ifdef LINKED
    kjit_module *refused = NULL;
    static const unsigned char table[3] = {1, 0, 0};
    expect(kjit_module_load_linked(context, 99, "old", table, sizeof table, NULL, NULL, 0,
                                   &refused) == KJIT_ERROR_INVALID_ARGUMENT &&
               strstr(kjit_last_error(context), "ABI version 99; this runtime reads version"),
           "another ABI version was not refused");
    expect(kjit_module_load_linked(context, KJIT_LIBRARY_ABI, "short", table, sizeof table, NULL,
                                   NULL, 0, &refused) == KJIT_ERROR_INVALID_ARGUMENT &&
               strstr(kjit_last_error(context), "table is damaged"),
           "a damaged table was not refused");
    if (add_open_linked(context, &am) != KJIT_OK || mandelbrot_open_linked(context, &mm) != KJIT_OK) {
#else
    if (add_open(context, argv[1], &am) != KJIT_OK || mandelbrot_open(context, argv[2], &mm) != KJIT_OK) {
#endif
        printf("header_test: %s\n", kjit_last_error(context));
        return 1;
    }
    enum { N = 1000 };
    float a[N], b[N], typed[N], generic[N];
    for (int i = 0; i < N; i++)
        a[i] = (float)i * 0.37f, b[i] = 1.0f / (float)(i + 1);
    expect(add_add_f32(&am, N, a, b, typed) == KJIT_OK, "add_add_f32 failed");
    int64_t n = N;
    kjit_array xa = kjit_array_make(a, KJIT_F32, 1, &n), xb = kjit_array_make(b, KJIT_F32, 1, &n),
               out = kjit_array_make(generic, KJIT_F32, 1, &n);
    kjit_arg args[2] = {kjit_arg_array(&xa), kjit_arg_array(&xb)};
    expect(kjit_call(am.functions[0], args, 2, &out, NULL) == KJIT_OK, "kjit_call of add failed");
    expect(memcmp(typed, generic, sizeof typed) == 0, "add_add_f32 differs from kjit_call");
    for (int i = 0; i < N; i++)
        if (typed[i] != a[i] + b[i]) {
            expect(false, "add_add_f32 is not a + b");
            break;
        }

    int32_t iters = -1;
    expect(mandelbrot_mandel(&mm, -0.5, 0.25, 50, &iters) == KJIT_OK, "mandelbrot_mandel failed");
    expect(iters == 50, "mandel(-0.5, 0.25) did not stay for 50 iterations");
    expect(mandelbrot_mandel(&mm, 2.0, 2.0, 50, &iters) == KJIT_OK && iters < 3,
           "mandel(2, 2) did not leave at once");

    uint8_t image[48 * 64], image2[48 * 64];
    int64_t shape[2] = {48, 64};
    kjit_array img = kjit_array_make(image, KJIT_U8, 2, shape), img2 = kjit_array_make(image2, KJIT_U8, 2, shape);
    uint32_t grid[3] = {2, 2, 1}, block[3] = {16, 8, 1};
    expect(mandelbrot_mandel_kernel(&mm, grid, block, -2.0, 1.0, -1.0, 1.0, &img, 100) == KJIT_OK,
           "mandelbrot_mandel_kernel failed");
    kjit_arg kargs[6] = {kjit_arg_f64(-2), kjit_arg_f64(1), kjit_arg_f64(-1), kjit_arg_f64(1),
                         kjit_arg_array(&img2), kjit_arg_i64(100)};
    expect(kjit_launch(mm.functions[1], grid, block, kargs, 6, NULL) == KJIT_OK, "kjit_launch failed");
    expect(memcmp(image, image2, sizeof image) == 0, "mandelbrot_mandel_kernel differs from kjit_launch");
    add_close(&am);
    mandelbrot_close(&mm);
    kjit_context_destroy(context);
    if (!failures)
        printf("header_test: typed entry points agree with kjit_call and kjit_launch\n");
    return failures ? 1 : 0;
}
