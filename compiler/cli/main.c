/*
 * main.c: the kjit command line.  It dispatches to one function per command;
 * `check` and `build` live here, `run` and `info` in their own cli_ files.
 *
 * Exit codes: 0 success, 1 errors in the program (or a failed run), 2 usage or
 * I/O errors.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] =
    "usage: kjit <command> [options]\n"
    "\n"
    "commands:\n"
    "  check [--dump=ast|ir|vec] [--block=X,Y,Z] [--verify] FILE...\n"
    "                                      parse and type-check (kjit check --help)\n"
    "  build FILE [--target cpu|cuda] [--emit=llvm|asm|obj|ptx] [options]\n"
    "                                      show a stage of code generation (kjit build --help)\n"
    "  run FILE FUNCTION [ARG...] [options]  run a function (kjit run --help)\n"
    "  bench FILE FUNCTION [ARG...] [options]  compare targets (kjit bench --help)\n"
    "  info [LIBRARY]                      targets, GPU, driver, libdevice; a library's contents\n"
    "  cache list|stats|clear              the compiled-code cache (kjit cache --help)\n"
    "  version                             print the version\n";

static const char check_usage[] =
    "usage: kjit check [--dump=ast|ir|vec] [--block=X,Y,Z] [--verify] FILE...\n"
    "  parse and type-check each FILE; errors as file:line:col with the line and a caret\n"
    "  --dump=ast|ir|vec  print the syntax tree, the IR, or the IR after the SIMD lowering\n"
    "  --block=X,Y,Z      the launch's block shape the kernels are specialised for\n"
    "  --verify           run the IR verifier after every pass\n";

static const char build_usage[] =
    "usage: kjit build FILE [--target cpu|parallel|cuda]\n"
    "                  [--emit=llvm|asm|obj|ptx|lib|staticlib|header]\n"
    "                  [--arch sm_XX] [--function NAME] [--block X,Y,Z] [--verify]\n"
    "                  [--lineinfo] [-O0..3] [--cpu-levels L,...] [--check[=K]]\n"
    "                  [--cuda=off] [-o OUT]\n"
    "  show a stage of code generation (assembly for cpu, PTX for cuda by default),\n"
    "  or build a library of the whole module ahead of time (--emit=lib, docs/aot.md)\n"
    "  --target T      cpu (or parallel) or cuda\n"
    "  --emit E        llvm (IR), asm, obj (needs -o), ptx, or lib (needs -o): a shared\n"
    "                  library that kjit_module_load_library, kjit run and libkjit-rt load;\n"
    "                  staticlib (needs -o libNAME.a): the same as an archive to link\n"
    "                  into a program, loaded by NAME_kjit_load (see the header);\n"
    "                  or header (needs -o NAME.h): typed C entry points NAME_f_SIG for it\n"
    "  --cpu-levels L  --emit=lib|staticlib: the x86-64 levels to build, of sse2,\n"
    "                  v3, v4 (all three by default; the loader runs the best one\n"
    "                  the CPU has)\n"
    "  --check[=K]     --emit=lib|staticlib: checked code too (K: values, the\n"
    "                  default, race or all), which a context checked so runs\n"
    "  --arch sm_XX    the GPU architecture for --target cuda; with --emit=lib or\n"
    "                  staticlib a list (sm_70,sm_80,sm_90 by default): a cubin\n"
    "                  for each that ptxas can target and PTX for the lowest\n"
    "  --cuda=off      --emit=lib|staticlib: no cuda code (cpu and parallel only)\n"
    "  --function NAME only this function\n"
    "  --block X,Y,Z   the launch's block shape the kernels are specialised for\n"
    "                  (--emit=lib|staticlib: repeated, up to 8 shapes; launches of\n"
    "                  other shapes run the general code)\n"
    "  --verify        run the IR verifier after every pass\n"
    "  --lineinfo      .kern line numbers in the PTX (for profilers)\n"
    "  -O0..3          LLVM optimisation level\n"
    "  -o OUT          write to OUT instead of standard output\n";

static const char info_usage[] =
    "usage: kjit info [LIBRARY]\n"
    "  targets, GPUs, driver, libdevice, ptxas, host CPU and cache folder;\n"
    "  or what a library of `kjit build --emit=lib` holds (levels, cuda archs, roots)\n";

static const char version_usage[] =
    "usage: kjit version\n"
    "  print the version\n";

static bool is_help(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

static void print_to_stderr(void *user, const char *text)
{
    fputs(text, stderr);
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "kjit: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", usage_text);
    return 2;
}

/* One stage of one file to `output` (stdout when NULL); the exit code. */
static int print_stage(const char *command, const char *path, kjit_stage stage,
                       const kjit_stage_options *options, const char *output)
{
    char *bytes = NULL, *error = NULL;
    size_t size = 0;
    if (output && kj_cli_same_file(output, path)) {
        fprintf(stderr, "kjit: %s: -o %s is the source file %s; refusing to overwrite it\n",
                command, output, path);
        return 2;
    }
    kjit_status status = kjit_stage_file(path, stage, options, &bytes, &size, &error);
    int code = 0;
    if (status == KJIT_OK && !output) {
        fwrite(bytes, 1, size, stdout);
    } else if (status == KJIT_OK) {
        /* whole or not at all: the previous file stays until this one is on disk */
        kjit_output_file out;
        status = kjit_output_open(output, &out, &error);
        if (status == KJIT_OK) {
            bool written = fwrite(bytes, 1, size, out.file) == size;
            status = kjit_output_close(&out, written, &error);
            if (!written && status == KJIT_OK) {
                status = KJIT_ERROR_IO;
                error = strdup("write failed");
            }
        }
        if (status != KJIT_OK) {
            fprintf(stderr, "kjit: %s: cannot write '%s': %s\n", command, output,
                    error ? error : "");
            code = 2;
        }
    } else if (status == KJIT_ERROR_IO) {
        code = 2; /* the diagnostic said which file and why */
    } else if (status == KJIT_ERROR_INVALID_ARGUMENT) {
        fprintf(stderr, "kjit: %s: %s\n%s", command, error, usage_text);
        code = 2;
    } else {
        if (error)
            fprintf(stderr, "kjit: %s: %s\n", command, error);
        code = 1;
    }
    free(bytes);
    free(error);
    return code;
}

/* ------------------------------------------------------------------ check */

/* "X[,Y[,Z]]" into dims (the rest 1): a block of 1 to 1024 threads. */
static bool parse_block(const char *text, unsigned dims[3])
{
    dims[0] = dims[1] = dims[2] = 1;
    unsigned long long threads = 1;
    for (int k = 0; k < 3; k++) {
        char *end;
        unsigned long v = strtoul(text, &end, 10);
        if (end == text || v == 0 || v > 1024)
            return false;
        dims[k] = (unsigned)v;
        threads *= v;
        if (*end == '\0')
            return threads <= 1024;
        if (*end != ',')
            return false;
        text = end + 1;
    }
    return false;
}

static int cmd_check(int argc, char **argv)
{
    kjit_stage_options options;
    kjit_stage_options_init(&options);
    options.on_diagnostic = print_to_stderr;
    const char *dump = NULL;
    kjit_stage stage = KJIT_STAGE_IR;
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(check_usage, stdout);
            return 0;
        }
        if (strncmp(argv[i], "--dump=", 7) == 0) {
            dump = argv[i] + 7;
            if (strcmp(dump, "ast") == 0) stage = KJIT_STAGE_AST;
            else if (strcmp(dump, "ir") == 0) stage = KJIT_STAGE_IR;
            else if (strcmp(dump, "vec") == 0) stage = KJIT_STAGE_VEC;
            else return usage_error("unknown dump '%s' (ast, ir or vec)", dump);
        } else if (strcmp(argv[i], "--verify") == 0) {
            options.verify = true;
        } else if (strncmp(argv[i], "--block=", 8) == 0) {
            if (!parse_block(argv[i] + 8, options.block))
                return usage_error("check: --block= takes X[,Y[,Z]], 1 to 1024 threads in all ('%s')", argv[i]);
        }
    }
    int status = 0, files = 0;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "--dump=", 7) == 0 || strcmp(argv[i], "--verify") == 0 ||
            strncmp(argv[i], "--block=", 8) == 0)
            continue;
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            return usage_error("unknown option '%s'", argv[i]);
        files++;
        /* Without --dump the stage is only run, for its diagnostics. */
        const char *discard = dump ? NULL : "/dev/null";
        int code = print_stage("check", argv[i], stage, &options, discard);
        if (code == 2 || (code == 1 && status == 0))
            status = code;
    }
    if (files == 0)
        return usage_error("check: no input file%s", "");
    return status;
}

/* ------------------------------------------------------------------ build */


static int cmd_build(int argc, char **argv)
{
    kjit_stage_options options;
    kjit_stage_options_init(&options);
    options.on_diagnostic = print_to_stderr;
    const char *path = NULL, *target = "cpu", *emit = NULL, *output = NULL, *levels = NULL;
    bool cuda_off = false;
    int check = -1; /* --check[=...]: for --emit=lib and staticlib */
    unsigned blocks[8][3]; /* every --block, for --emit=lib and staticlib */
    int block_count = 0;
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(build_usage, stdout);
            return 0;
        }
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--target=", 9) == 0) target = a + 9;
        else if (strcmp(a, "--target") == 0 && i + 1 < argc) target = argv[++i];
        else if (strncmp(a, "--emit=", 7) == 0) emit = a + 7;
        else if (strcmp(a, "--emit") == 0 && i + 1 < argc) emit = argv[++i];
        else if (strncmp(a, "--arch=", 7) == 0) options.cuda_arch = a + 7;
        else if (strcmp(a, "--arch") == 0 && i + 1 < argc) options.cuda_arch = argv[++i];
        else if (strcmp(a, "--function") == 0 && i + 1 < argc) options.function = argv[++i];
        else if (strcmp(a, "--verify") == 0) options.verify = true;
        else if (strcmp(a, "--lineinfo") == 0) options.line_info = true;
        else if (strcmp(a, "--cuda=off") == 0) cuda_off = true;
        else if (strcmp(a, "--check") == 0) check = KJIT_CHECK_VALUES;
        else if (strncmp(a, "--check=", 8) == 0) {
            check = strcmp(a + 8, "values") == 0 ? KJIT_CHECK_VALUES
                    : strcmp(a + 8, "race") == 0 ? KJIT_CHECK_RACE
                    : strcmp(a + 8, "all") == 0  ? KJIT_CHECK_ALL
                                                 : -2;
            if (check == -2)
                return usage_error("build: --check= takes values, race or all, not '%s'", a + 8);
        }
        else if (strncmp(a, "--cpu-levels=", 13) == 0) levels = a + 13;
        else if (strcmp(a, "--cpu-levels") == 0 && i + 1 < argc) levels = argv[++i];
        else if (strncmp(a, "--block=", 8) == 0 || (strcmp(a, "--block") == 0 && i + 1 < argc)) {
            if (!parse_block(a[7] == '=' ? a + 8 : argv[++i], options.block))
                return usage_error("build: --block takes X[,Y[,Z]], 1 to 1024 threads in all ('%s')", a);
            if (block_count == 8)
                return usage_error("build: at most 8 --block shapes%s", "");
            memcpy(blocks[block_count++], options.block, sizeof blocks[0]);
        }
        else if (strcmp(a, "-o") == 0 && i + 1 < argc) output = argv[++i];
        else if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && !a[3]) options.opt_level = a[2] - '0';
        else if (a[0] == '-') return usage_error("build: unknown option '%s'", a);
        else if (!path) path = a;
        else return usage_error("build: more than one input file ('%s')", a);
    }
    if (!path)
        return usage_error("build: no input file%s", "");

    if (emit && (strcmp(emit, "lib") == 0 || strcmp(emit, "staticlib") == 0)) {
        if (!output)
            return usage_error("build: --emit=%s needs -o FILE", emit);
        if (strcmp(target, "cpu") != 0 && strcmp(target, "parallel") != 0)
            return usage_error("build: --emit=%s builds the code of every target (cuda's unless "
                               "--cuda=off); --target is not for it", emit);
        kjit_build_options build;
        kjit_build_options_init(&build);
        build.levels = levels;
        build.staticlib = strcmp(emit, "staticlib") == 0;
        build.check = check > 0 ? check : 0;
        build.block_count = block_count;
        memcpy(build.blocks, blocks, sizeof blocks);
        build.cuda_archs = cuda_off ? "off" : options.cuda_arch;
        char *error = NULL, *notes = NULL;
        kjit_status built = kjit_build_library_with(path, output, &build, &notes, &error);
        for (char *line = notes, *next; line && *line; line = next) {
            next = strchr(line, '\n');
            if (next)
                *next++ = '\0';
            fprintf(stderr, "kjit build: note: %s\n", line);
        }
        free(notes);
        if (built != KJIT_OK) {
            fprintf(stderr, "kjit build: %s\n", error ? error : "failed");
            free(error);
            return 1;
        }
        return 0;
    }
    if (emit && strcmp(emit, "header") == 0) {
        if (!output)
            return usage_error("build: --emit=header needs -o NAME.h%s", "");
        char *error = NULL;
        if (kjit_build_header(path, output, NULL, &error) != KJIT_OK) {
            fprintf(stderr, "kjit build: %s\n", error ? error : "failed");
            free(error);
            return 1;
        }
        return 0;
    }
    if (levels)
        return usage_error("build: --cpu-levels is for --emit=lib and --emit=staticlib%s", "");
    if (check >= 0)
        return usage_error("build: --check is for --emit=lib and --emit=staticlib%s", "");
    if (cuda_off)
        return usage_error("build: --cuda=off is for --emit=lib and --emit=staticlib%s", "");
    kjit_stage stage;
    if (strcmp(target, "cpu") == 0 || strcmp(target, "parallel") == 0) {
        options.target = KJIT_TARGET_CPU;
        stage = KJIT_STAGE_ASM;
    } else if (strcmp(target, "cuda") == 0) {
        options.target = KJIT_TARGET_CUDA;
        stage = KJIT_STAGE_PTX;
    } else {
        return usage_error("build: unknown target '%s' (cpu, parallel or cuda)", target);
    }
    if (emit) {
        if (strcmp(emit, "llvm") == 0) stage = KJIT_STAGE_LLVM;
        else if (strcmp(emit, "asm") == 0) stage = KJIT_STAGE_ASM;
        else if (strcmp(emit, "obj") == 0) stage = KJIT_STAGE_OBJ;
        else if (strcmp(emit, "ptx") == 0) stage = KJIT_STAGE_PTX;
        else return usage_error("build: unknown --emit '%s' (llvm, asm, obj, ptx, lib, staticlib or header)", emit);
    }
    if (stage == KJIT_STAGE_OBJ && !output)
        return usage_error("build: --emit=obj needs -o FILE%s", "");
    return print_stage("build", path, stage, &options, output);
}

/* ------------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return 2;
    }
    const char *command = argv[1];
    if (strcmp(command, "check") == 0) return cmd_check(argc - 2, argv + 2);
    if (strcmp(command, "build") == 0) return cmd_build(argc - 2, argv + 2);
    if (strcmp(command, "run") == 0) return kj_cli_run(argc - 2, argv + 2);
    if (strcmp(command, "bench") == 0) return kj_cli_bench(argc - 2, argv + 2);
    if (argc > 2 && is_help(argv[2]) &&
        (strcmp(command, "info") == 0 || strcmp(command, "version") == 0)) {
        fputs(strcmp(command, "info") == 0 ? info_usage : version_usage, stdout);
        return 0;
    }
    if (strcmp(command, "info") == 0) return kj_cli_info(argc - 2, argv + 2);
    if (strcmp(command, "cache") == 0) return kj_cli_cache(argc - 2, argv + 2);
    if (strcmp(command, "version") == 0 || strcmp(command, "--version") == 0) {
        printf("kjit %s\n", KJIT_VERSION);
        return 0;
    }
    if (strcmp(command, "help") == 0 || strcmp(command, "--help") == 0 || strcmp(command, "-h") == 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    return usage_error("unknown command '%s'", command);
}
