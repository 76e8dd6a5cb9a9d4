/*
 * ptxas.c: PTX to cubin with the CUDA toolkit's ptxas, when there is one.
 *
 * The driver's linker (cuLinkAddData) compiles PTX as relocatable code, in
 * which ptxas's own subroutines (f64 division and square root, libdevice's
 * trigonometric reduction) are calls through the ABI and every kernel that
 * makes one is charged the callee's registers: the delay-and-sum kernel took
 * 43 registers that way and 30 whole-program, and ran 10% slower.  nvcc
 * assembles whole-program, so kjit does too when it finds ptxas, as Triton
 * and CUDA.jl do; the cubin is then loaded and cached like the linker's.
 * Without ptxas (a machine with a driver but no toolkit) the linker remains.
 *
 * ptxas is looked for as KJIT_PTXAS (a path, or "off"), then beside the
 * libdevice in use (<toolkit>/nvvm/libdevice/.. -> <toolkit>/bin/ptxas),
 * then in $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin and PATH.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kjit_runtime.h"

extern char **environ;

static bool is_program(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* <dir>/ptxas when it is a program: a heap copy, else NULL. */
static char *try_dir(const char *dir, size_t length)
{
    if (length == 0)
        return NULL;
    KjBuf path = {0};
    kj_buf_printf(&path, "%.*s/ptxas", (int)length, dir);
    if (is_program(path.data))
        return path.data;
    kj_buf_free(&path);
    return NULL;
}

static char *search(void)
{
    const char *env = getenv("KJIT_PTXAS");
    if (env && *env)
        return strcmp(env, "off") != 0 && is_program(env) ? kj_xstrdup(env) : NULL;
    char *found = NULL;
    const char *libdevice = kj_jit ? kj_jit->find_libdevice(NULL) : NULL;
    const char *tail = libdevice ? strstr(libdevice, "/nvvm/libdevice/") : NULL;
    if (tail) {
        KjBuf bin = {0};
        kj_buf_printf(&bin, "%.*s/bin", (int)(tail - libdevice), libdevice);
        found = try_dir(bin.data, strlen(bin.data));
        kj_buf_free(&bin);
    }
    const char *roots[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
    for (size_t i = 0; !found && i < sizeof roots / sizeof roots[0]; i++) {
        if (!roots[i] || !*roots[i])
            continue;
        KjBuf bin = {0};
        kj_buf_printf(&bin, "%s/bin", roots[i]);
        found = try_dir(bin.data, strlen(bin.data));
        kj_buf_free(&bin);
    }
    for (const char *p = getenv("PATH"); !found && p && *p;) {
        const char *end = strchr(p, ':');
        size_t length = end ? (size_t)(end - p) : strlen(p);
        found = try_dir(p, length);
        p = end ? end + 1 : NULL;
    }
    return found;
}

static pthread_once_t search_once = PTHREAD_ONCE_INIT;
static char *found_ptxas;
static char found_identity[600];

static void search_now(void)
{
    found_ptxas = search();
    struct stat st;
    if (found_ptxas && stat(found_ptxas, &st) == 0)
        snprintf(found_identity, sizeof found_identity, "%s %lld %lld", found_ptxas,
                 (long long)st.st_size, (long long)st.st_mtime);
    else
        snprintf(found_identity, sizeof found_identity, "none");
}

const char *kj_ptxas_path(void)
{
    pthread_once(&search_once, search_now);
    return found_ptxas;
}

const char *kj_ptxas_identity(void)
{
    pthread_once(&search_once, search_now);
    return found_identity;
}

kjit_status kj_ptxas_compile(const char *ptx, const char *arch, void **cubin, size_t *size,
                             char **error)
{
    *cubin = NULL;
    *size = 0;
    const char *ptxas = kj_ptxas_path();
    if (!ptxas) {
        *error = kj_xstrdup("ptxas not found");
        return KJIT_ERROR_NOT_FOUND;
    }
    const char *tmp = getenv("TMPDIR");
    KjBuf dir = {0};
    kj_buf_printf(&dir, "%s/kjit-ptxas-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir.data)) {
        KjBuf message = {0};
        kj_buf_printf(&message, "cannot make a folder for ptxas (%s): %s", dir.data,
                      strerror(errno));
        kj_buf_free(&dir);
        *error = message.data;
        return KJIT_ERROR_IO;
    }
    KjBuf in = {0}, out = {0}, log = {0}, arch_flag = {0};
    kj_buf_printf(&in, "%s/kjit.ptx", dir.data);
    kj_buf_printf(&out, "%s/kjit.cubin", dir.data);
    kj_buf_printf(&log, "%s/ptxas.log", dir.data);
    kj_buf_printf(&arch_flag, "-arch=%s", arch);
    kjit_status status = KJIT_OK;
    if (!kj_file_write(in.data, ptx, strlen(ptx))) {
        *error = kj_xstrdup("cannot write the PTX for ptxas");
        status = KJIT_ERROR_IO;
    }
    pid_t pid = 0;
    if (status == KJIT_OK) {
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 1, log.data, O_WRONLY | O_CREAT | O_TRUNC,
                                         0600);
        posix_spawn_file_actions_adddup2(&actions, 1, 2);
        char *argv[] = {(char *)ptxas, arch_flag.data, "-O3", "-o", out.data, in.data, NULL};
        int rc = posix_spawn(&pid, ptxas, &actions, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&actions);
        if (rc != 0) {
            KjBuf message = {0};
            kj_buf_printf(&message, "cannot run %s: %s", ptxas, strerror(rc));
            *error = message.data;
            status = KJIT_ERROR_IO;
        }
    }
    if (status == KJIT_OK) {
        int wstatus = 0;
        pid_t waited;
        do
            waited = waitpid(pid, &wstatus, 0);
        while (waited < 0 && errno == EINTR);
        size_t log_size = 0;
        char *text = kj_file_read(log.data, &log_size);
        if (waited < 0 || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
            KjBuf message = {0};
            kj_buf_printf(&message, "%s %s failed", ptxas, arch_flag.data);
            if (text && log_size)
                kj_buf_printf(&message, ":\n%.*s", (int)log_size, text);
            *error = message.data;
            status = KJIT_ERROR_BACKEND;
        } else if (!(*cubin = kj_file_read(out.data, size)) || *size == 0) {
            free(*cubin);
            *cubin = NULL;
            *error = kj_xstrdup("ptxas wrote no cubin");
            status = KJIT_ERROR_BACKEND;
        }
        free(text);
    }
    unlink(in.data);
    unlink(out.data);
    unlink(log.data);
    rmdir(dir.data);
    kj_buf_free(&dir);
    kj_buf_free(&in);
    kj_buf_free(&out);
    kj_buf_free(&log);
    kj_buf_free(&arch_flag);
    return status;
}
