/*
 * fuzz_cli_args.c: libFuzzer harness for kjit run's command line
 * (kj_cli_run_parse, cli_run.c, which reads it without running anything) and
 * the launch-shape and number readers it uses.  The input is the argument
 * list, one argument per line.  Any list may be refused; none may crash or
 * trip a sanitizer.
 */
#include "../../compiler/cli/cli.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_FUZZ_ARGS = 64 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[MAX_FUZZ_ARGS + 1];
    int argc = 0;
    for (char *line = text; line && argc < MAX_FUZZ_ARGS;) {
        char *next = memchr(line, '\n', (size_t)(text + size - line));
        if (next)
            *next++ = '\0';
        argv[argc++] = line;
        line = next;
    }
    argv[argc] = NULL;
    KjCliRunOptions options;
    char why[160];
    kj_cli_run_parse(argc, argv, &options, why, sizeof why);
    for (int i = 0; i < argc; i++) {
        uint32_t dims[3];
        kj_cli_parse_dim3(argv[i], dims);
        kj_cli_is_number(argv[i]);
    }
    free(text);
    return 0;
}
