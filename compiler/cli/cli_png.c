/*
 * cli_png.c: writes a 2-D array as an 8-bit grayscale PNG through libpng, for
 * `kjit run --save N=image.png` and the demo's images.  It lives in the CLI so
 * that libkjit itself never needs libpng.
 */
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static char *png_error_text(const char *path, const char *what)
{
    KjCliBuf buf = {0};
    kj_cli_printf(&buf, "%s: %s", path, what);
    return buf.data;
}

/* Element (y, x) of a 2-D view as a double (complex: its magnitude). */
static double element(const kjit_array *a, int64_t y, int64_t x)
{
    const char *p = (const char *)a->data + y * a->strides[0] + x * a->strides[1];
    double im = 0;
    double re = kj_cli_load_value(p, a->dtype, &im);
    return a->dtype == KJIT_C64 || a->dtype == KJIT_C128 ? hypot(re, im) : re;
}

bool kj_png_write(const char *path, const kjit_array *array, char **error)
{
    if (array->ndim != 2 || array->shape[0] < 1 || array->shape[1] < 1) {
        *error = png_error_text(path, "a PNG needs a non-empty 2-D array (height x width)");
        return false;
    }
    int64_t height = array->shape[0], width = array->shape[1];
    if (height > 1 << 20 || width > 1 << 20) {
        *error = png_error_text(path, "the array is too large for a PNG");
        return false;
    }
    /* Scaled from min..max, so that an image of small counts (iterations,
     * say) is not black; NaN and infinities are black. */
    double low = INFINITY, high = -INFINITY;
    for (int64_t y = 0; y < height; y++)
        for (int64_t x = 0; x < width; x++) {
            double v = element(array, y, x);
            if (isfinite(v)) {
                low = v < low ? v : low;
                high = v > high ? v : high;
            }
        }
    png_bytep pixels = malloc((size_t)(height * width));
    if (!pixels) {
        *error = png_error_text(path, "out of memory");
        return false;
    }
    for (int64_t y = 0; y < height; y++)
        for (int64_t x = 0; x < width; x++) {
            double v = element(array, y, x);
            v = !isfinite(v) || high <= low ? 0 : (v - low) / (high - low) * 255.0 + 0.5;
            pixels[y * width + x] = (png_byte)(v < 0 ? 0 : v > 255 ? 255 : v);
        }

    /* Whole or not at all: the previous image stays until this one is on disk. */
    kjit_output_file output;
    if (kjit_output_open(path, &output, error) != KJIT_OK) {
        free(pixels);
        return false;
    }
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        kjit_output_close(&output, false, NULL);
        free(pixels);
        *error = png_error_text(path, "libpng failed to write the image");
        return false;
    }
    png_init_io(png, output.file);
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8, PNG_COLOR_TYPE_GRAY,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int64_t y = 0; y < height; y++)
        png_write_row(png, pixels + y * width);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(pixels);
    return kjit_output_close(&output, true, error) == KJIT_OK;
}
