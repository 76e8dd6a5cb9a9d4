/* The one Check runner: every suite listed in build/gen/suites.h (made by the
 * Makefile from the tests/unit/test_<name>.c files). */
#include <check.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <ucontext.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define X(name) Suite *suite_##name(void);
#include "suites.h"
#undef X

/* A test that dies of a signal loses its output with its forked child; this
 * leaves the stack on stderr first (addresses in libkjit.so resolve with
 * `addr2line -e build/libkjit.so OFFSET` against the same build), with the
 * faulting address and instruction and the memory mappings around them,
 * then lets the signal kill the child as Check expects. */
static void put(const char *text) { (void)!write(STDERR_FILENO, text, strlen(text)); }

static void put_hex(uintptr_t v)
{
    char buf[19] = "0x";
    for (int i = 0; i < 16; i++)
        buf[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 15];
    buf[18] = 0;
    put(buf);
}

static uintptr_t parse_hex(const char **p)
{
    uintptr_t v = 0;
    for (;; (*p)++) {
        char c = **p;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return v;
        v = v * 16 + (uintptr_t)d;
    }
}

/* /proc/self/maps as text (the first MiB), read without allocating: the
 * handler may run where malloc is broken.  NULL when it cannot be read. */
static const char *read_maps(void)
{
    static char maps[1 << 20];
    int fd = open("/proc/self/maps", O_RDONLY);
    if (fd < 0)
        return NULL;
    size_t len = 0;
    ssize_t got;
    while (len < sizeof maps - 1 && (got = read(fd, maps + len, sizeof maps - 1 - len)) > 0)
        len += (size_t)got;
    close(fd);
    maps[len] = 0;
    return maps;
}

/* One line of /proc/self/maps: the mapping's bounds, where its permissions
 * start (*perms) and where the line ends (*end, its newline or the text's
 * end); returns the next line. */
static const char *parse_mapping(const char *line, uintptr_t *low, uintptr_t *high,
                                 const char **perms, const char **end)
{
    const char *p = line;
    *low = parse_hex(&p);
    p++;
    *high = parse_hex(&p);
    *perms = *p ? p + 1 : p;
    *end = strchr(line, '\n');
    if (!*end)
        *end = line + strlen(line);
    return **end ? *end + 1 : *end;
}

/* Writes one line of maps, from line to end, with its newline. */
static void put_line(const char *line, const char *end)
{
    put("    ");
    (void)!write(STDERR_FILENO, line, (size_t)(end - line) + (*end ? 1 : 0));
}

/* Whether [address, address + bytes) lies in one readable mapping (a fault
 * on a stack's guard page leaves the stack pointer in an unreadable one). */
static bool readable(uintptr_t address, size_t bytes)
{
    const char *maps = read_maps();
    for (const char *line = maps; line && *line;) {
        uintptr_t low, high;
        const char *perms, *end;
        const char *next = parse_mapping(line, &low, &high, &perms, &end);
        if (low <= address && address < high)
            return address + bytes <= high && perms[0] == 'r';
        line = next;
    }
    return false;
}

/* The lines of /proc/self/maps around each address (the mapping that holds
 * it, or the two it falls between): whether a fault is just past a buffer or
 * a stack, and whether the code is in a library or JIT-compiled. */
static void put_mappings(const uintptr_t *addresses, int count)
{
    const char *maps = read_maps();
    if (!maps)
        return;
    for (int a = 0; a < count; a++) {
        put("  near ");
        put_hex(addresses[a]);
        put(":\n");
        const char *previous = NULL, *previous_end = NULL;
        for (const char *line = maps; *line;) {
            uintptr_t low, high;
            const char *perms, *end;
            const char *next = parse_mapping(line, &low, &high, &perms, &end);
            if (high > addresses[a]) {
                if (low > addresses[a] && previous)
                    put_line(previous, previous_end);
                put_line(line, end);
                break;
            }
            previous = line, previous_end = end;
            line = next;
        }
    }
}

/* The mappings that hold the fault address plus or minus a multiple of 4 GiB
 * (smaller ones, far from it): a 32-bit PC-relative offset that overflowed
 * when code and its constants were linked more than 2 GiB apart faults at the
 * right address modulo 4 GiB. */
static void put_aliases(uintptr_t fault)
{
    const char *maps = read_maps();
    if (!maps)
        return;
    const uintptr_t span = (uintptr_t)1 << 32;
    int shown = 0;
    for (const char *line = maps; *line && shown < 8;) {
        uintptr_t low, high;
        const char *perms, *end;
        const char *next = parse_mapping(line, &low, &high, &perms, &end);
        uintptr_t distance = fault > low ? fault - low : low - fault;
        if (high - low < span && distance > span / 2 && (fault - low) % span < high - low) {
            if (!shown++)
                put("  mappings at the fault address modulo 4 GiB:\n");
            put_line(line, end);
        }
        line = next;
    }
}

/* What a test says it is doing (unit_test_doing), for the fault report:
 * which function, target and call, where the stack cannot tell (JIT code). */
char unit_test_doing[512];

/* The general registers, the code from the start of the faulting page (at
 * most 256 bytes before the instruction) up to 16 bytes past it, and
 * the top of the stack: enough to decode the instruction and its operands
 * with `objdump -D -b binary -m i386:x86-64` where the code is JIT-compiled. */
static void put_machine_state(const ucontext_t *uc)
{
#if defined(__x86_64__)
    static const struct { const char *name; int reg; } regs[] = {
        {"rax", REG_RAX}, {"rbx", REG_RBX}, {"rcx", REG_RCX}, {"rdx", REG_RDX},
        {"rsi", REG_RSI}, {"rdi", REG_RDI}, {"rbp", REG_RBP}, {"rsp", REG_RSP},
        {"r8", REG_R8},   {"r9", REG_R9},   {"r10", REG_R10}, {"r11", REG_R11},
        {"r12", REG_R12}, {"r13", REG_R13}, {"r14", REG_R14}, {"r15", REG_R15},
        {"rip", REG_RIP},
    };
    for (size_t i = 0; i < sizeof regs / sizeof regs[0]; i++) {
        put(i % 4 == 0 ? "  " : " ");
        put(regs[i].name);
        put("=");
        put_hex((uintptr_t)uc->uc_mcontext.gregs[regs[i].reg]);
        if (i % 4 == 3 || i + 1 == sizeof regs / sizeof regs[0])
            put("\n");
    }
    uintptr_t rip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    uintptr_t page = rip & ~(uintptr_t)4095, stop = rip + 16;
    if (rip - page > 256) /* the 256 bytes before it: its function's entry, often */
        page = rip - 256;
    if (stop > (rip & ~(uintptr_t)4095) + 4096)
        stop = (rip & ~(uintptr_t)4095) + 4096;
    if (!readable(page, (size_t)(stop - page)))
        stop = page;
    put("  code from ");
    put_hex(page);
    put(":");
    for (uintptr_t a = page; a < stop; a++) {
        char hex[4] = {(a - page) % 32 == 0 ? '\n' : ' ', 0, 0, 0};
        unsigned char b = *(const unsigned char *)a;
        hex[1] = "0123456789abcdef"[b >> 4];
        hex[2] = "0123456789abcdef"[b & 15];
        put(hex);
    }
    put("\n  stack:");
    const uintptr_t *sp = (const uintptr_t *)uc->uc_mcontext.gregs[REG_RSP];
    int words = readable((uintptr_t)sp, 16 * sizeof *sp) ? 16 : 0;
    for (int i = 0; i < words; i++) {
        put(i % 4 == 0 ? "\n   " : " ");
        put_hex(sp[i]);
    }
    put("\n");
#else
    (void)uc;
#endif
}

static void crash_backtrace(int sig, siginfo_t *info, void *context)
{
    ucontext_t *uc = context;
    uintptr_t at[2] = {(uintptr_t)info->si_addr, 0};
#if defined(__x86_64__)
    at[1] = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#else
    (void)uc;
#endif
    put("unit-tests: fault address ");
    put_hex(at[0]);
    put(", instruction ");
    put_hex(at[1]);
    put("\n");
    put_mappings(at, at[1] ? 2 : 1);
    if (sig == SIGSEGV || sig == SIGBUS)
        put_aliases(at[0]);
    if (unit_test_doing[0]) {
        put("unit-tests: the test was ");
        put(unit_test_doing);
        put("\n");
    }
    put_machine_state(uc);
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
        sa.sa_sigaction = crash_backtrace;
        sa.sa_flags = SA_RESETHAND | SA_ONSTACK | SA_SIGINFO;
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
