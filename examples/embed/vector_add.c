/*
 * vector_add.c: the smallest complete kjit host program.
 *
 * It compiles a @vectorize function from a string, adds two arrays of host
 * data with it (into an output array it owns), then adds a scalar to one of
 * them (into an array kjit allocates), and checks both against a plain C
 * loop.  Exit status 0 when every element matches, 1 otherwise.
 *
 *   cc vector_add.c -lkjit -o vector_add && ./vector_add [cpu|parallel|cuda]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit.h"

static const char source[] =
    "@vectorize\n"
    "fn add(a: f32, b: f32) -> f32 { return a + b; }\n";

static int fail(kjit_context *context, const char *what)
{
    fprintf(stderr, "vector_add: %s: %s\n", what, kjit_last_error(context));
    return 1;
}

int main(int argc, char **argv)
{
    kjit_options options;
    kjit_options_init(&options);
    if (argc > 1)
        options.target = strcmp(argv[1], "cpu") == 0        ? KJIT_TARGET_CPU
                         : strcmp(argv[1], "parallel") == 0 ? KJIT_TARGET_PARALLEL
                         : strcmp(argv[1], "cuda") == 0     ? KJIT_TARGET_CUDA
                                                            : KJIT_TARGET_AUTO;
    kjit_context *context;
    if (kjit_context_create(&options, &context) != KJIT_OK)
        return fail(NULL, "no context");

    kjit_module *module;
    if (kjit_compile_string(context, "add.kern", source, &module) != KJIT_OK)
        return fail(context, "compile");
    kjit_function *add;
    if (kjit_module_function(module, "add", &add) != KJIT_OK)
        return fail(context, "lookup");

    enum { N = 1000000 };
    float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float));
    float *sum = malloc(N * sizeof(float));
    unsigned seed = 12345;
    for (int i = 0; i < N; i++) {
        seed = seed * 1103515245u + 12345u;
        a[i] = (float)(seed >> 8) / 65536.0f;
        seed = seed * 1103515245u + 12345u;
        b[i] = (float)(seed >> 8) / -32768.0f;
    }

    /* Views over the host's own memory: nothing is copied on cpu targets. */
    int64_t shape[1] = {N};
    kjit_array A = kjit_array_make(a, KJIT_F32, 1, shape);
    kjit_array B = kjit_array_make(b, KJIT_F32, 1, shape);
    kjit_array SUM = kjit_array_make(sum, KJIT_F32, 1, shape);
    kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
    if (kjit_call(add, args, 2, &SUM, NULL) != KJIT_OK)
        return fail(context, "add(a, b)");

    /* A scalar broadcasts; with no output given kjit allocates one. */
    kjit_array shifted;
    args[1] = kjit_arg_f64(0.5);
    if (kjit_call(add, args, 2, NULL, &shifted) != KJIT_OK)
        return fail(context, "add(a, 0.5)");

    int wrong = 0;
    for (int i = 0; i < N; i++) {
        if (sum[i] != a[i] + b[i])
            wrong++;
        if (((float *)shifted.data)[i] != a[i] + 0.5f)
            wrong++;
    }
    printf("vector_add on %s: %d elements, sum[0] = %g, sum[%d] = %g, %d wrong\n",
           kjit_target_name(kjit_context_target(context)), N, sum[0], N - 1, sum[N - 1], wrong);

    kjit_array_free(&shifted);
    free(a);
    free(b);
    free(sum);
    kjit_module_free(module);
    kjit_context_destroy(context);
    return wrong == 0 ? 0 : 1;
}
