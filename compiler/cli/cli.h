/*
 * cli.h: the commands of the kjit CLI that live in their own cli_ files, as
 * main.c dispatches to them.  Each takes the arguments after the command name
 * and returns the exit code: 0 success, 1 errors in the program or a failed
 * run, 2 usage or I/O errors.
 */
#ifndef KJIT_CLI_H
#define KJIT_CLI_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../../runtime/kjit.h"
#include "../../runtime/kjit_tools.h"

/* cli_run.c: kjit run FILE FUNCTION [ARG...] [options] */
int kj_cli_run(int argc, char **argv);

/* cli_bench.c: kjit bench FILE FUNCTION [ARG...] [options] */
int kj_cli_bench(int argc, char **argv);

/* cli_info.c: kjit info */
int kj_cli_info(int argc, char **argv);

/* cli_cache.c: kjit cache list|stats|clear [--dir DIR] */
int kj_cli_cache(int argc, char **argv);

/* cli_png.c: a 2-D array as an 8-bit grayscale PNG (scaled from its min..max);
 * false and *error (heap) on failure. */
bool kj_png_write(const char *path, const kjit_array *array, char **error);

/* cli_args.c: what run and bench share. */

/* Allocation that ends the command with a message when memory runs out. */
void *kj_cli_xmalloc(size_t size);
void *kj_cli_xcalloc(size_t count, size_t size);
char *kj_cli_xstrdup(const char *s);

/* A growable heap string. */
typedef struct KjCliBuf {
    char *data;
    size_t len;
} KjCliBuf;
void kj_cli_printf(KjCliBuf *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kj_cli_buf_free(KjCliBuf *buf);

/* In a loop over argv with `i` the index, `a` the current argument and `value`
 * a const char *: true when `a` is the option `name`, given as "name VALUE" or
 * "name=VALUE"; the value (NULL when missing) goes to `value`. */
#define KJ_CLI_OPTION(name) KJ_CLI_OPTION_AT(i, name)
#define KJ_CLI_OPTION_AT(i, name)                                                    \
    ((strcmp(a, name) == 0 && (value = (i) + 1 < argc ? argv[++(i)] : NULL, true)) || \
     (strncmp(a, name "=", strlen(name) + 1) == 0 && (value = a + strlen(name) + 1, true)))

#define KJ_CLI_MAX_ARGS 64

/* cli_reduce.c: --axis and --init for a @reduce function (part of KjCliCall). */
typedef struct KjCliReduce {
    bool has_axes; /* false: every axis */
    int axes[KJIT_MAX_DIMS];
    int naxes;
    bool has_init;
    const char *init_text; /* --init's text, parsed as the reduction's type by kj_cli_reduce_init */
    kjit_arg init;
} KjCliReduce;

/* What kjit run and kjit bench share: the call (a file, a function and its
 * arguments' texts), a kernel's launch shape, and the options that change the
 * inputs or the compiled code. */
typedef struct KjCliCall {
    const char *file;
    const char *function;
    const char *args[KJ_CLI_MAX_ARGS];
    int arg_count;
    bool has_grid, has_block;
    uint32_t grid[3], block[3];
    size_t shared_bytes; /* --shared-bytes: dynamic shared memory per block */
    uint64_t seed;       /* --seed: the rand/randn generators' stream */
    bool line_info;      /* --lineinfo */
    int check;           /* --check[=values|race|all]: checked mode, KJIT_CHECK_* bits */
    KjCliReduce reduce;  /* --axis, --init: a @reduce */
} KjCliCall;

/* The defaults: seed 1, nothing else set. */
void kj_cli_call_init(KjCliCall *call);
/* argv[*i] as one of the shared options (its value may be the next argument)
 * or a positional (file, function, then arguments): 1 when taken, 0 when it is
 * an option of the command's own, -1 with the usage message in why. */
int kj_cli_call_argument(int argc, char **argv, int *i, KjCliCall *call, char *why,
                         size_t why_size);
/* After the arguments: FILE and FUNCTION given, --grid and --block together;
 * false with the usage message in why. */
bool kj_cli_call_complete(const KjCliCall *call, char *why, size_t why_size);

/* An output path that names a file the command reads: NULL when `output`
 * does not exist yet or is another file; else the input it is (the .kern
 * source or a .npy argument), found by device and inode, so that no spelling
 * of the path (./x, a link) hides it.  Writing there would replace what the
 * run read (and the rename of a whole-file write would replace the source). */
const char *kj_cli_output_clash(const char *output, const KjCliCall *call);
/* The same against one input file (kjit build's source). */
bool kj_cli_same_file(const char *a, const char *b);
/* cli_run.c: kjit run's command line, read without running anything (the
 * fuzz harness tests/fuzz/fuzz_cli_args.c calls it too). */
#define KJ_CLI_MAX_SAVES 16
typedef struct KjCliRunOptions {
    KjCliCall call;
    kjit_target target;
    const char *output;
    int save_index[KJ_CLI_MAX_SAVES];
    const char *save_path[KJ_CLI_MAX_SAVES];
    int save_count;
    int repeat;
    double time_limit_s; /* --time-limit; 0: none */
} KjCliRunOptions;
/* 0: read; 1: --help asked; -1: refused, the usage message in why. */
int kj_cli_run_parse(int argc, char **argv, KjCliRunOptions *o, char *why, size_t why_size);

/* A function's arguments made from their command-line texts.  args[i] points
 * into arrays[i] for array arguments, so the struct must stay where it is. */
typedef struct KjCliArgs {
    kjit_arg args[KJ_CLI_MAX_ARGS];
    kjit_array arrays[KJ_CLI_MAX_ARGS];
    bool owned[KJ_CLI_MAX_ARGS];
    int count;
} KjCliArgs;

/* A number from the command line as a scalar of `dtype`, exactly (integers
 * without a detour through double, in range; floats that do not overflow the
 * type); false with *why (heap) otherwise. */
bool kj_cli_parse_number(const char *text, kjit_dtype dtype, kjit_arg *out, char **why);
double kj_cli_now_ms(void); /* a monotonic clock */
bool kj_cli_ends_with(const char *s, const char *suffix);
/* A diagnostic that is a runtime warning ("kjit: warning: ...", the disk
 * cache's), not an error of the program: printed, never counted as a failure. */
bool kj_cli_is_warning(const char *diagnostic);
bool kj_cli_is_number(const char *text);
bool kj_cli_parse_dim3(const char *text, uint32_t out[3]); /* "X[,Y[,Z]]", extents >= 1 */
/* Seeds the stream of the rand and randn generators. */
void kj_cli_seed(uint64_t seed);
/* Element `at` of type dtype as a double (*im: the imaginary part, else 0). */
double kj_cli_load_value(const void *at, kjit_dtype dtype, double *im);
/* Arguments from .npy files, numbers, true/false or generators
 * (zeros|ones|rand|randn|arange:[DTYPE:]SHAPE; the DTYPE defaults to the
 * parameter's when the function has one signature).  0, or the exit code after
 * printing "kjit COMMAND: argument N ..." on stderr; kj_cli_args_free either way. */
int kj_cli_make_args(const char *command, kjit_function *function, const char *const *texts,
                     int count, KjCliArgs *out);
void kj_cli_args_free(KjCliArgs *args);
/* A generator's text with its SHAPE resized to about `size` elements (extents
 * of 1 kept, the others scaled in proportion); NULL when the text is not a
 * generator or has no extent above 1.  Heap, caller frees. */
char *kj_cli_resize_generator(const char *text, int64_t size);

/* cli_reduce.c.  Takes `option` ("--axis", "--init") with its value: true when it is one of
 * them and well formed; false with *why set when malformed, NULL when it is
 * another option. */
bool kj_cli_reduce_option(const char *option, const char *value, KjCliReduce *r,
                          const char **why);
/* The function whose parameters type the command-line arguments (a fused
 * map's for @reduce(map = g)), and how many arguments a call takes. */
kjit_function *kj_cli_typing_function(kjit_function *function);
int kj_cli_param_count(kjit_function *function);
/* The module of FILE: a library built by `kjit build --emit=lib` when its
 * name ends in .so (kjit_module_load_library), else a .kern compiled. */
kjit_status kj_cli_load_module(kjit_context *context, const char *path, kjit_module **out);
/* --init's text as a scalar of the type the reduction of these arguments
 * gives, exactly (kj_cli_parse_number): 0, or 2 after printing "kjit COMMAND:
 * --init ..." when it does not fit.  Nothing to do without --init. */
int kj_cli_reduce_init(const char *command, kjit_function *function, const kjit_arg *args,
                       int nargs, KjCliReduce *r);
kjit_status kj_cli_reduce_prepare(kjit_function *function, const kjit_arg *args, int nargs,
                                  const KjCliReduce *r);
kjit_status kj_cli_reduce_call(kjit_function *function, const kjit_arg *args, int nargs,
                               const KjCliReduce *r, kjit_array *out, kjit_array *result);

#endif
