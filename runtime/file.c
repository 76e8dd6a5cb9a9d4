/*
 * file.c: whole reads and writes of files, for the runtime's two users of the
 * file system: the cache (its entries, through descriptors it opened itself,
 * since it needs O_EXCL and fstat) and ptxas (the PTX it is given and the
 * cubin and log it leaves).  read(2) and write(2) may move fewer bytes than
 * asked or be interrupted by a signal; these loops are the one place that
 * knows.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
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
