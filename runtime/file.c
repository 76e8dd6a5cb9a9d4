/*
 * file.c: whole reads and writes of files, for the runtime's two users of the
 * file system: the cache (its entries, through descriptors it opened itself,
 * since it needs O_EXCL and fstat) and ptxas (the PTX it is given and the
 * cubin and log it leaves), and the files kjit writes for its users (.npy,
 * and through kjit_tools.h the CLI's images and reports).  read(2) and
 * write(2) may move fewer bytes than asked or be interrupted by a signal;
 * these loops are the one place that knows.
 *
 * A user's output is written whole or not at all: into a new file beside it
 * that rename(2) puts in its place once every byte is on disk, so a full disk
 * or a crash leaves the previous file as it was, never a fragment.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kjit_runtime.h"

bool kj_fd_read_all(int fd, void *data, size_t size)
{
    char *p = data;
    while (size > 0) {
        ssize_t n = read(fd, p, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        size -= (size_t)n;
    }
    return true;
}

bool kj_fd_write_all(int fd, const void *data, size_t size)
{
    const char *p = data;
    while (size > 0) {
        ssize_t n = write(fd, p, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        size -= (size_t)n;
    }
    return true;
}

char *kj_file_read(const char *path, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t length = 0, capacity = 8192;
    char *data = kj_xmalloc(capacity + 1);
    for (;;) {
        ssize_t n = read(fd, data + length, capacity - length);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            close(fd);
            free(data);
            return NULL;
        }
        if (n == 0)
            break;
        length += (size_t)n;
        if (length == capacity)
            data = kj_xrealloc(data, (capacity *= 2) + 1);
    }
    close(fd);
    data[length] = '\0';
    *size = length;
    return data;
}

bool kj_file_write(const char *path, const void *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
        return false;
    bool ok = kj_fd_write_all(fd, data, size);
    return close(fd) == 0 && ok;
}

/* ------------------------------------------------------------ outputs */

static char *output_error(const char *path, const char *what, int error_number)
{
    KjBuf buf = {0};
    kj_buf_printf(&buf, "%s: %s: %s", path, what, strerror(error_number));
    return buf.data;
}

kjit_status kj_output_open(const char *path, KjOutputFile *out, char **error)
{
    memset(out, 0, sizeof *out);
    struct stat target;
    bool exists = stat(path, &target) == 0;
    if (exists && !S_ISREG(target.st_mode)) {
        /* /dev/stdout, /dev/null, a FIFO: written in place, there is no file
         * to keep whole */
        out->file = fopen(path, "wb");
        if (!out->file) {
            *error = output_error(path, "cannot open", errno);
            return KJIT_ERROR_IO;
        }
        out->path = kj_xstrdup(path);
        return KJIT_OK;
    }
    /* A link to a file is written through: the file it names is replaced,
     * not the link by a file of its own. */
    char *resolved = exists ? realpath(path, NULL) : NULL;
    if (resolved)
        path = resolved;
    /* A fresh name in the target's folder (rename(2) does not cross file
     * systems), created with O_EXCL so nothing else's file is ever used;
     * 0666 less the umask, as the target itself would have been made. */
    static _Atomic unsigned counter;
    KjBuf temp = {0};
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        temp.len = 0;
        unsigned serial = atomic_fetch_add(&counter, 1);
        kj_buf_printf(&temp, "%s.tmp-%ld-%u-%lx", path, (long)getpid(), serial,
                      (unsigned long)time(NULL) ^ (unsigned long)clock());
        fd = open(temp.data, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        *error = output_error(path, "cannot create a temporary file beside it", errno);
        kj_buf_free(&temp);
        free(resolved);
        return KJIT_ERROR_IO;
    }
    /* An existing file keeps its permissions (one the user made private
     * stays private). */
    if (exists)
        (void)fchmod(fd, target.st_mode & 07777);
    out->file = fdopen(fd, "wb");
    if (!out->file) {
        *error = output_error(path, "cannot write", errno);
        close(fd);
        unlink(temp.data);
        kj_buf_free(&temp);
        free(resolved);
        return KJIT_ERROR_IO;
    }
    out->path = kj_xstrdup(path);
    out->temp = temp.data;
    free(resolved);
    return KJIT_OK;
}

kjit_status kj_output_close(KjOutputFile *out, bool keep, char **error)
{
    if (!out->file)
        return KJIT_OK;
    kjit_status status = KJIT_OK;
    int failure = 0;
    if (keep && (fflush(out->file) != 0 || (out->temp && fsync(fileno(out->file)) != 0)))
        failure = errno;
    if (fclose(out->file) != 0 && !failure)
        failure = errno;
    out->file = NULL;
    if (keep && !failure && out->temp && rename(out->temp, out->path) != 0)
        failure = errno;
    if (keep && failure) {
        *error = output_error(out->path, "write failed", failure);
        status = KJIT_ERROR_IO;
    }
    if (out->temp && (!keep || failure))
        unlink(out->temp);
    free(out->path);
    free(out->temp);
    out->path = out->temp = NULL;
    return status;
}
