/*
 * print.c: where print(...) of cpu code ends up.  Compiled code formats each
 * line itself (snprintf, compiler/backend/target_cpu.c) and calls
 * kj_print_line through the address the runtime put in the module's print
 * hook when it loaded the code.  One lock makes every line whole, however
 * many pool workers or fibers print at once; the line goes to the context's
 * on_print, or to stdout in one fwrite.
 */
#include "kjit_runtime.h"

#include <pthread.h>
#include <string.h>

_Thread_local kjit_context *kj_print_context;

static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

void kj_print_line(const char *line, int64_t len)
{
    /* A line cut at the buffer's end still ends in a newline. */
    char whole[KJ_PRINT_LINE_BYTES + 1];
    if (len <= 0 || line[len - 1] != '\n') {
        if (len < 0)
            len = 0;
        if (len > KJ_PRINT_LINE_BYTES - 1)
            len = KJ_PRINT_LINE_BYTES - 1;
        memcpy(whole, line, (size_t)len);
        whole[len++] = '\n';
        line = whole;
    }
    kjit_context *context = kj_print_context;
    pthread_mutex_lock(&print_lock);
    if (context && context->options.on_print)
        context->options.on_print(context->options.print_user, line, (size_t)len);
    else
        fwrite(line, 1, (size_t)len, stdout);
    pthread_mutex_unlock(&print_lock);
}

void kj_print_bind(KjSymbolLookup *lookup, void *code)
{
    KjPrintFn *hook = lookup(code, KJ_PRINT_HOOK_SYMBOL);
    if (hook)
        *hook = kj_print_line;
}
