/*
 * mandelbrot.c: launches the Mandelbrot @kernel of examples/mandelbrot.kern
 * on a 2-D grid from C, writes the image as a PGM file, and checks it against
 * the same computation done here in C.
 *
 *   ./mandelbrot [mandelbrot.kern] [out.pgm] [cpu|parallel|cuda]
 *
 * Exit status 0 when the image matches (points on the set's boundary may
 * differ by one iteration under a 1-ulp difference, such as a fused
 * multiply-add: up to 0.5% of them are allowed to), 1 otherwise.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit.h"

enum { WIDTH = 1536, HEIGHT = 1024, ITERS = 20 };

static int reference(double x, double y, int max_iters)
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

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "examples/mandelbrot.kern";
    const char *output = argc > 2 ? argv[2] : "mandelbrot.pgm";
    kjit_options options;
    kjit_options_init(&options);
    if (argc > 3)
        options.target = strcmp(argv[3], "cpu") == 0        ? KJIT_TARGET_CPU
                         : strcmp(argv[3], "parallel") == 0 ? KJIT_TARGET_PARALLEL
                         : strcmp(argv[3], "cuda") == 0     ? KJIT_TARGET_CUDA
                                                            : KJIT_TARGET_AUTO;
    kjit_context *context;
    if (kjit_context_create(&options, &context) != KJIT_OK) {
        fprintf(stderr, "mandelbrot: %s\n", kjit_last_error(NULL));
        return 1;
    }
    kjit_module *module;
    kjit_function *kernel;
    if (kjit_compile_file(context, path, &module) != KJIT_OK ||
        kjit_module_function(module, "mandel_kernel", &kernel) != KJIT_OK) {
        fprintf(stderr, "mandelbrot: %s\n", kjit_last_error(context));
        return 1;
    }

    uint8_t *image = calloc(WIDTH * HEIGHT, 1);
    int64_t shape[2] = {HEIGHT, WIDTH};
    kjit_array img = kjit_array_make(image, KJIT_U8, 2, shape);
    double min_x = -2.0, max_x = 1.0, min_y = -1.0, max_y = 1.0;
    kjit_arg args[6] = {kjit_arg_f64(min_x), kjit_arg_f64(max_x), kjit_arg_f64(min_y),
                        kjit_arg_f64(max_y), kjit_arg_array(&img), kjit_arg_i32(ITERS)};
    /* As in Numba's example: a grid smaller than the image, covered by the
     * kernel's grid-stride loops. */
    uint32_t grid[3] = {32, 16, 1}, block[3] = {32, 8, 1};
    if (kjit_launch(kernel, grid, block, args, 6, NULL) != KJIT_OK) {
        fprintf(stderr, "mandelbrot: %s\n", kjit_last_error(context));
        return 1;
    }

    int differ = 0, far = 0;
    for (int y = 0; y < HEIGHT; y++)
        for (int x = 0; x < WIDTH; x++) {
            int want = reference(min_x + x * ((max_x - min_x) / WIDTH),
                                 min_y + y * ((max_y - min_y) / HEIGHT), ITERS);
            int got = image[y * WIDTH + x];
            differ += got != want;
            far += abs(got - want) > 1;
        }

    FILE *out = fopen(output, "wb");
    if (out) {
        /* scale 0..ITERS to 0..255 so the picture is visible */
        fprintf(out, "P5\n%d %d\n255\n", WIDTH, HEIGHT);
        for (int i = 0; i < WIDTH * HEIGHT; i++)
            fputc(image[i] * 255 / ITERS, out);
        fclose(out);
    }
    bool ok = far == 0 && differ <= WIDTH * HEIGHT / 200 && out != NULL;
    printf("mandelbrot on %s: %dx%d, %d iterations, %d pixels differ from C by one step; "
           "wrote %s\n",
           kjit_target_name(kjit_context_target(context)), WIDTH, HEIGHT, ITERS, differ, output);
    free(image);
    kjit_module_free(module);
    kjit_context_destroy(context);
    return ok ? 0 : 1;
}
