/* The one Check runner: every suite listed in build/gen/suites.h (made by the
 * Makefile from the tests/unit/test_<name>.c files). */
#include <check.h>
#include <execinfo.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define X(name) Suite *suite_##name(void);
#include "suites.h"
#undef X

/* A test that dies of a signal loses its output with its forked child; this
 * leaves the stack on stderr first (addresses in libkjit.so resolve with
 * `addr2line -e build/libkjit.so OFFSET` against the same build), then lets
 * the signal kill the child as Check expects. */
static void crash_backtrace(int sig)
{
    void *frames[24];
    int n = backtrace(frames, 24);
    const char *head = "unit-tests: signal ";
    char num[16];
    int len = 0;
    for (int v = sig; v > 0 && len < 15; v /= 10)
        len++;
    for (int i = len - 1, v = sig; i >= 0; i--, v /= 10)
        num[i] = (char)('0' + v % 10);
    if (write(STDERR_FILENO, head, strlen(head)) < 0 || write(STDERR_FILENO, num, (size_t)len) < 0 ||
        write(STDERR_FILENO, " in a test (it passes if the test expects it); the stack:\n", 58) < 0)
        _exit(128 + sig);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(void)
{
    /* Load libgcc's unwinder now: backtrace() may not allocate in the handler. */
    void *warm[1];
    backtrace(warm, 1);
    if (getenv("KJIT_TEST_BACKTRACE") == NULL || strcmp(getenv("KJIT_TEST_BACKTRACE"), "0") != 0) {
        static char alt[1 << 16]; /* a fiber's stack overflow reaches here too */
        stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt};
        sigaltstack(&ss, NULL);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = crash_backtrace;
        sa.sa_flags = SA_RESETHAND | SA_ONSTACK;
        sigaction(SIGSEGV, &sa, NULL);
        sigaction(SIGBUS, &sa, NULL);
        sigaction(SIGFPE, &sa, NULL);
        sigaction(SIGILL, &sa, NULL);
    }
    SRunner *runner = srunner_create(NULL);
#define X(name) srunner_add_suite(runner, suite_##name());
#include "suites.h"
#undef X
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
