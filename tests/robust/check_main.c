/*
 * check_main.c: the front end alone, for the robustness test.  Built with
 * AddressSanitizer and UBSan from every compiler source but the back end;
 * tests/robust/run.sh feeds it truncated and random files.
 *
 *   kjit-check-asan FILE      (or - for stdin)
 *
 * Prints the diagnostics to stderr; exits 0 when the file is clean, 1 when it
 * has errors, 2 when it cannot be read.  Anything else (a sanitizer report, a
 * crash, a hang) is a bug in the front end.
 */
#include "kjit_compiler.h"

#include <stdlib.h>
#include <string.h>

/* The whole pipeline up to checked IR when module.c is linked in; the weak
 * reference lets this program also test a tree that has only the parser. */
__attribute__((weak)) KjIrModule *kj_compile_source(KjArena *arena, const KjSource *src,
                                                    const char **stdlib_dirs, KjDiag *diag);

static void print_diagnostic(void *user, KjSeverity severity, const char *formatted)
{
    fputs(formatted, stderr);
}

static char *read_all(FILE *in, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *data = kj_xmalloc(cap);
    for (;;) {
        if (cap - n < 2) {
            cap *= 2;
            data = kj_xrealloc(data, cap);
        }
        size_t got = fread(data + n, 1, cap - n - 1, in);
        if (got == 0)
            break;
        n += got;
    }
    if (ferror(in)) {
        free(data);
        return NULL;
    }
    data[n] = '\0';
    *len = n;
    return data;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s FILE|-\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    FILE *in = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!in) {
        fprintf(stderr, "%s: cannot open\n", path);
        return 2;
    }
    size_t len = 0;
    char *text = read_all(in, &len);
    if (in != stdin)
        fclose(in);
    if (!text) {
        fprintf(stderr, "%s: cannot read\n", path);
        return 2;
    }

    KjSource src = {strcmp(path, "-") == 0 ? "<stdin>" : path, text, len};
    KjDiag diag = {print_diagnostic, NULL, 0, 0};
    KjArena arena = {0};
    if (kj_compile_source) {
        const char *stdlib_dirs[] = {"stdlib", NULL};
        kj_compile_source(&arena, &src, stdlib_dirs, &diag);
    } else {
        kj_parse(&arena, &src, &diag);
    }
    kj_arena_free(&arena);
    free(text);
    return diag.error_count ? 1 : 0;
}
