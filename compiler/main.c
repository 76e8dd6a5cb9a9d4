/*
 * main.c: the kjit command line.  It dispatches to one function per command;
 * `check` and `build` live here, `run` and `info` in their own cli_ files.
 *
 * Exit codes: 0 success, 1 errors in the program (or a failed run), 2 usage or
 * I/O errors.
 */
#include <stdlib.h>
#include <string.h>

#include "../runtime/kjit_runtime.h"
#include "cli.h"
#include "kjit_compiler.h"

static const char usage_text[] =
    "usage: kjit <command> [options]\n"
    "\n"
    "commands:\n"
    "  check [--dump=ast|ir] FILE...       parse and type-check\n"
    "  build FILE [--target cpu|cuda] [--emit=llvm|asm|obj|ptx] [--arch sm_XX]\n"
    "             [--function NAME] [-O0..3] [-o OUT]   show a stage of code generation\n"
    "  run FILE FUNCTION [ARG...] [options]  run a function (kjit run --help)\n"
    "  bench FILE FUNCTION [ARG...] [options]  compare targets (kjit bench --help)\n"
    "  info                                targets, GPU, driver, libdevice\n"
    "  cache list|stats|clear              the compiled-code cache (kjit cache --help)\n"
    "  version                             print the version\n";

static void print_to_stderr(void *user, KjSeverity severity, const char *text)
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

/* Compiles one file into a checked module; NULL after printing diagnostics.
 * *io_error tells an unreadable file (exit 2) from a wrong program (exit 1). */
static KjIrModule *compile_file(KjArena *arena, const char *path, KjDiag *diag, bool *io_error)
{
    KjSource *src = kj_source_read(arena, path, diag);
    if (!src) {
        *io_error = true;
        return NULL;
    }
    const char *stdlib_dirs[] = {kj_default_stdlib_dir(), NULL};
    return kj_compile_source(arena, src, stdlib_dirs, diag);
}

/* ------------------------------------------------------------------ check */

static int cmd_check(int argc, char **argv)
{
    const char *dump = NULL;
    int status = 0, files = 0;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "--dump=", 7) == 0) {
            dump = argv[i] + 7;
            if (strcmp(dump, "ast") != 0 && strcmp(dump, "ir") != 0)
                return usage_error("unknown dump '%s' (ast or ir)", dump);
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            return usage_error("unknown option '%s'", argv[i]);
        files++;
        KjArena arena = {0};
        KjDiag diag = {.sink = print_to_stderr};
        if (dump && strcmp(dump, "ast") == 0) {
            KjSource *src = kj_source_read(&arena, argv[i], &diag);
            if (!src) {
                status = 2;
            } else {
                KjAstFile *ast = kj_parse(&arena, src, &diag);
                if (diag.error_count == 0)
                    kj_ast_dump(stdout, ast);
                else if (status == 0)
                    status = 1;
            }
            kj_arena_free(&arena);
            continue;
        }
        bool io_error = false;
        KjIrModule *module = compile_file(&arena, argv[i], &diag, &io_error);
        if (module && dump)
            kj_ir_print_module(stdout, module);
        if (!module && (io_error || status == 0))
            status = io_error ? 2 : 1;
        kj_arena_free(&arena);
    }
    if (files == 0)
        return usage_error("check: no input file%s", "");
    return status;
}

/* ------------------------------------------------------------------ build */

/* What `build` compiles: every plain function and kernel of the file, and for a
 * vectorized function each signature's scalar function and its contiguous
 * all-array kernel. */
static int collect_roots(KjIrModule *module, const char *only, KjIrFunction ***roots_out)
{
    int count = 0, capacity = 16;
    KjIrFunction **roots = kj_xmalloc(sizeof *roots * (size_t)capacity);
    for (int e = 0; e < module->entries.count; e++) {
        KjIrEntry *entry = module->entries.items[e];
        if (only && strcmp(entry->name, only) != 0)
            continue;
        for (int v = 0; v < entry->variants.count; v++) {
            KjIrFunction *fn = entry->variants.items[v];
            if (count + 2 > capacity) {
                capacity *= 2;
                roots = kj_xrealloc(roots, sizeof *roots * (size_t)capacity);
            }
            roots[count++] = fn;
            if (fn->kind == KJ_IR_FN_SCALAR) {
                KjVecVariant variant = {.layout = KJ_LAYOUT_CONTIG, .ndim = 1, .scalar_mask = 0};
                roots[count++] = kj_vectorize(module, fn, variant);
            }
        }
    }
    *roots_out = roots;
    return count;
}

static int cmd_build(int argc, char **argv)
{
    const char *path = NULL, *target = "cpu", *emit = NULL, *arch = NULL, *output = NULL;
    const char *only = NULL;
    int opt_level = 3;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--target=", 9) == 0) target = a + 9;
        else if (strcmp(a, "--target") == 0 && i + 1 < argc) target = argv[++i];
        else if (strncmp(a, "--emit=", 7) == 0) emit = a + 7;
        else if (strcmp(a, "--emit") == 0 && i + 1 < argc) emit = argv[++i];
        else if (strncmp(a, "--arch=", 7) == 0) arch = a + 7;
        else if (strcmp(a, "--arch") == 0 && i + 1 < argc) arch = argv[++i];
        else if (strcmp(a, "--function") == 0 && i + 1 < argc) only = argv[++i];
        else if (strcmp(a, "-o") == 0 && i + 1 < argc) output = argv[++i];
        else if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && !a[3]) opt_level = a[2] - '0';
        else if (a[0] == '-') return usage_error("build: unknown option '%s'", a);
        else if (!path) path = a;
        else return usage_error("build: more than one input file ('%s')", a);
    }
    if (!path)
        return usage_error("build: no input file%s", "");

    KjCodegenOptions options = {.opt_level = opt_level, .cuda_arch = arch ? arch : "sm_90"};
    KjEmitKind kind;
    if (strcmp(target, "cpu") == 0 || strcmp(target, "parallel") == 0) {
        options.target = KJ_CODEGEN_CPU;
        kind = KJ_EMIT_ASM;
    } else if (strcmp(target, "cuda") == 0) {
        options.target = KJ_CODEGEN_CUDA;
        kind = KJ_EMIT_PTX;
    } else {
        return usage_error("build: unknown target '%s' (cpu, parallel or cuda)", target);
    }
    if (emit) {
        if (strcmp(emit, "llvm") == 0) kind = KJ_EMIT_LLVM;
        else if (strcmp(emit, "asm") == 0) kind = KJ_EMIT_ASM;
        else if (strcmp(emit, "obj") == 0) kind = KJ_EMIT_OBJ;
        else if (strcmp(emit, "ptx") == 0) kind = KJ_EMIT_PTX;
        else return usage_error("build: unknown --emit '%s' (llvm, asm, obj or ptx)", emit);
    }
    if (kind == KJ_EMIT_PTX && options.target != KJ_CODEGEN_CUDA)
        return usage_error("build: --emit=ptx needs --target cuda%s", "");
    if ((kind == KJ_EMIT_ASM || kind == KJ_EMIT_OBJ) && options.target == KJ_CODEGEN_CUDA)
        return usage_error("build: --target cuda emits llvm or ptx, not '%s'", emit);
    if (kind == KJ_EMIT_OBJ && !output)
        return usage_error("build: --emit=obj needs -o FILE%s", "");

    KjArena arena = {0};
    KjDiag diag = {.sink = print_to_stderr};
    bool io_error = false;
    KjIrModule *module = compile_file(&arena, path, &diag, &io_error);
    if (!module) {
        kj_arena_free(&arena);
        return io_error ? 2 : 1;
    }
    KjIrFunction **roots;
    int root_count = collect_roots(module, only, &roots);
    int status = 0;
    if (root_count == 0) {
        fprintf(stderr, "kjit: build: %s has no function%s%s\n", path, only ? " named " : "",
                only ? only : "");
        status = 1;
    } else {
        char *error = NULL;
        size_t size = 0;
        char *bytes = kj_codegen_emit(module, roots, root_count, &options, kind, &size, &error);
        if (!bytes) {
            fprintf(stderr, "kjit: build: %s\n", error ? error : "code generation failed");
            status = 1;
        } else {
            FILE *out = output ? fopen(output, "wb") : stdout;
            if (!out) {
                fprintf(stderr, "kjit: build: cannot write '%s'\n", output);
                status = 2;
            } else {
                fwrite(bytes, 1, size, out);
                if (output) fclose(out);
            }
        }
        free(bytes);
        free(error);
    }
    free(roots);
    kj_arena_free(&arena);
    return status;
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
