/*
 * cache_folder.c: which folder the disk cache may use, its secret, and how
 * an entry is opened, so that nobody but the user can put code there that
 * kjit would run (docs/security.md says what each check guards).
 *
 * Compiled code from the cache is run with the user's rights, so the cache
 * is trusted exactly as far as the user's own files are.  As OpenSSH's
 * StrictModes and Git's safe.directory do, a folder is used only when it is
 * owned by the effective user and not writable by group or others, and every
 * folder above it up to / is owned by the user or root and either not
 * writable by group or others or sticky (as /tmp is: others cannot rename or
 * remove what is ours there).  The path is resolved once (symbolic links the
 * user made are followed) and then walked down from / one descriptor at a
 * time with O_NOFOLLOW, so what is checked is what is used: nothing can be
 * swapped in between.  Folders made here are 0700.
 *
 * Each folder holds a secret, 32 random bytes in a 0600 file only the user
 * can read; every entry carries an HMAC-SHA-256 under it (cache.c), so a file
 * that somehow got into the folder is still not loaded.  Entries are opened
 * without following links or blocking (a FIFO under an entry's name must not
 * hang the compile) and must be regular files of the user's.
 *
 * A refusal is a warning through the context's on_diagnostic (once per
 * process per text) and a compile without the disk cache, never an error.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kjit_runtime.h"

#define SECRET_NAME ".kjit-secret"
#define SECRET_TEMP_PREFIX ".tmp-secret-"

/* ============================================================= warnings */

/* Texts already given: a refused folder is met by every compile. */
#define MAX_REMEMBERED_WARNINGS 256
static pthread_mutex_t warned_lock = PTHREAD_MUTEX_INITIALIZER;
static char *warned[MAX_REMEMBERED_WARNINGS];
static int warned_count;

void kj_cache_warn(const KjCacheWarn *warn, const char *text)
{
    if (!warn || !warn->fn)
        return; /* not remembered: the next context may have a callback */
    pthread_mutex_lock(&warned_lock);
    for (int i = 0; i < warned_count; i++)
        if (strcmp(warned[i], text) == 0) {
            pthread_mutex_unlock(&warned_lock);
            return;
        }
    if (warned_count < MAX_REMEMBERED_WARNINGS)
        warned[warned_count++] = kj_xstrdup(text);
    pthread_mutex_unlock(&warned_lock);
    warn->fn(warn->user, text);
}

/* ====================================================== the default place */

bool kj_cache_dir(char *buf, size_t size)
{
    const char *dir = getenv("KJIT_CACHE_DIR");
    int n;
    if (dir && *dir) {
        n = snprintf(buf, size, "%s", dir);
    } else if ((dir = getenv("XDG_CACHE_HOME")) && dir[0] == '/') {
        /* The XDG spec: a relative XDG_CACHE_HOME is invalid and ignored. */
        n = snprintf(buf, size, "%s/kjit", dir);
    } else if ((dir = getenv("HOME")) && *dir) {
        n = snprintf(buf, size, "%s/.cache/kjit", dir);
    } else {
        /* No HOME (a service, a cron job): the user's home from the password
         * database, never a shared folder such as /tmp. */
        struct passwd entry, *found = NULL;
        char text[4096];
        if (getpwuid_r(geteuid(), &entry, text, sizeof text, &found) != 0 || !found ||
            !found->pw_dir || found->pw_dir[0] != '/')
            return false;
        n = snprintf(buf, size, "%s/.cache/kjit", found->pw_dir);
    }
    return n > 0 && (size_t)n < size;
}

/* ============================================================ the folder */

static char *text_of(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *text_of(const char *fmt, ...)
{
    KjBuf buf = {0};
    va_list ap;
    va_start(ap, fmt);
    kj_buf_vprintf(&buf, fmt, ap);
    va_end(ap);
    return buf.data;
}

/* Why a folder on the way to the cache (is_cache: the cache folder itself)
 * may not be used, or NULL. */
static char *unsafe_folder(const struct stat *st, const char *path, bool is_cache)
{
    uid_t me = geteuid();
    unsigned mode = (unsigned)st->st_mode & 07777;
    if (!S_ISDIR(st->st_mode))
        return text_of("%s is not a folder", path);
    if (is_cache) {
        if (st->st_uid != me)
            return text_of("it is owned by uid %u, not by you (uid %u)", (unsigned)st->st_uid, (unsigned)me);
        if (mode & (S_IWGRP | S_IWOTH))
            return text_of("it is writable by its group or by others (mode %04o; chmod go-w fixes it)", mode);
        return NULL;
    }
    if (st->st_uid != me && st->st_uid != 0)
        return text_of("the folder %s above it is owned by uid %u, neither you (uid %u) nor root", path,
                       (unsigned)st->st_uid, (unsigned)me);
    /* A sticky folder (/tmp) lets others add names but not rename or remove ours. */
    if ((mode & (S_IWGRP | S_IWOTH)) && !(mode & S_ISVTX))
        return text_of("the folder %s above it is writable by its group or by others and not sticky (mode %04o)",
                       path, mode);
    return NULL;
}

/* dir as an absolute path whose existing part is resolved (symbolic links
 * followed) and whose missing tail (when create) is appended as given.  false
 * with *why when it cannot be; false alone when it is absent and !create. */
static bool resolve(const char *dir, bool create, char *out, size_t size, char **why)
{
    char path[PATH_MAX];
    int n;
    if (dir[0] == '/') {
        n = snprintf(path, sizeof path, "%s", dir);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd))
            return false;
        n = snprintf(path, sizeof path, "%s/%s", cwd, dir);
    }
    if (n <= 0 || (size_t)n >= sizeof path)
        return false;
    /* The longest part that exists; what follows it is made below. */
    char prefix[PATH_MAX];
    memcpy(prefix, path, (size_t)n + 1);
    size_t existing = (size_t)n;
    char *resolved;
    while (!(resolved = realpath(prefix, NULL))) {
        if (errno != ENOENT || !create)
            return false;
        char *slash = strrchr(prefix, '/');
        if (slash == prefix)
            slash[1] = '\0';
        else
            *slash = '\0';
        existing = strlen(prefix);
    }
    const char *tail = path + existing;
    for (const char *p = tail; *p;) {
        while (*p == '/')
            p++;
        const char *end = strchrnul(p, '/');
        if (end - p == 2 && p[0] == '.' && p[1] == '.') {
            *why = text_of("its path has '..' below a folder that does not exist yet");
            free(resolved);
            return false;
        }
        p = end;
    }
    n = snprintf(out, size, "%s%s%s", resolved, strcmp(resolved, "/") == 0 || !*tail ? "" : "/",
                 tail[0] == '/' ? tail + 1 : tail);
    free(resolved);
    return n > 0 && (size_t)n < size;
}

int kj_cache_folder_open(const char *dir, bool create, char **why)
{
    *why = NULL;
    char path[PATH_MAX];
    if (!resolve(dir, create, path, sizeof path, why))
        return -1;
    int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char walked[PATH_MAX] = "";
    size_t walked_len = 0;
    struct stat st;
    const char *p = path;
    while (*p == '/')
        p++;
    if (fstat(fd, &st) != 0 || (*why = unsafe_folder(&st, "/", *p == '\0'))) {
        close(fd);
        return -1;
    }
    while (*p) {
        const char *end = strchrnul(p, '/');
        char name[NAME_MAX + 1];
        size_t len = (size_t)(end - p);
        if (len > NAME_MAX) {
            close(fd);
            return -1;
        }
        memcpy(name, p, len);
        name[len] = '\0';
        while (*end == '/')
            end++;
        p = end;
        if (len == 0 || strcmp(name, ".") == 0)
            continue;
        walked_len += (size_t)snprintf(walked + walked_len, sizeof walked - walked_len, "/%s", name);
        int next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 && errno == ENOENT && create) {
            if (mkdirat(fd, name, 0700) != 0 && errno != EEXIST) {
                close(fd);
                return -1;
            }
            next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        int error = errno;
        close(fd);
        if (next < 0) {
            /* A file, or a link where realpath saw a folder (changed since). */
            if (error == ELOOP || error == ENOTDIR)
                *why = text_of("%s is not a folder (a file, or a symbolic link made while it was checked)",
                               walked);
            return -1;
        }
        fd = next;
        if (fstat(fd, &st) != 0 || (*why = unsafe_folder(&st, walked, *p == '\0'))) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

/* ============================================================ the secret */

/* Reads the folder's secret: 1, 0 when there is none, -1 with *why. */
static int read_secret(int folder, uint8_t secret[KJ_CACHE_SECRET_BYTES], char **why)
{
    int fd = openat(folder, SECRET_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ELOOP)
            *why = text_of("its secret " SECRET_NAME " is a symbolic link");
        else if (errno != ENOENT)
            *why = text_of("its secret " SECRET_NAME " does not open: %s", strerror(errno));
        return errno == ENOENT ? 0 : -1;
    }
    struct stat st;
    int result = -1;
    if (fstat(fd, &st) != 0)
        *why = text_of("its secret " SECRET_NAME " does not stat: %s", strerror(errno));
    else if (!S_ISREG(st.st_mode))
        *why = text_of("its secret " SECRET_NAME " is not a regular file");
    else if (st.st_uid != geteuid())
        *why = text_of("its secret " SECRET_NAME " is owned by uid %u, not by you (uid %u)",
                       (unsigned)st.st_uid, (unsigned)geteuid());
    else if (st.st_mode & 077)
        *why = text_of("its secret " SECRET_NAME " can be read or written by others (mode %04o; it must be 0600)",
                       (unsigned)st.st_mode & 07777);
    else if (st.st_size != KJ_CACHE_SECRET_BYTES || !kj_fd_read_all(fd, secret, KJ_CACHE_SECRET_BYTES))
        *why = text_of("its secret " SECRET_NAME " is not %d bytes long (remove it to have a new one made)",
                       KJ_CACHE_SECRET_BYTES);
    else
        result = 1;
    close(fd);
    return result;
}

/* 32 bytes from the kernel's random source, or false. */
static bool random_bytes(uint8_t *out, size_t size)
{
    while (size > 0) {
        ssize_t n = getrandom(out, size, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        out += n;
        size -= (size_t)n;
    }
    return true;
}

/* A new secret, written whole to a temporary file and linked into place:
 * link never replaces, so of processes racing here one secret wins and the
 * others read it; nobody ever reads a partly written one. */
static void make_secret(int folder)
{
    static unsigned long sequence;
    char temp[64];
    snprintf(temp, sizeof temp, SECRET_TEMP_PREFIX "%ld-%lu", (long)getpid(),
             __atomic_fetch_add(&sequence, 1, __ATOMIC_RELAXED));
    uint8_t secret[KJ_CACHE_SECRET_BYTES];
    if (!random_bytes(secret, sizeof secret))
        return;
    int fd = openat(folder, temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    bool ok = fchmod(fd, 0600) == 0 && kj_fd_write_all(fd, secret, sizeof secret);
    ok = close(fd) == 0 && ok;
    memset(secret, 0, sizeof secret);
    if (ok)
        linkat(folder, temp, folder, SECRET_NAME, 0);
    unlinkat(folder, temp, 0);
}

bool kj_cache_folder_secret(int folder, bool create, uint8_t secret[KJ_CACHE_SECRET_BYTES], char **why)
{
    *why = NULL;
    int found = read_secret(folder, secret, why);
    if (found == 0 && create) {
        make_secret(folder);
        found = read_secret(folder, secret, why);
    }
    return found == 1;
}

bool kj_cache_remove_secret(int folder)
{
    struct stat st;
    if (fstatat(folder, SECRET_NAME, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_size != KJ_CACHE_SECRET_BYTES)
        return false;
    return unlinkat(folder, SECRET_NAME, 0) == 0;
}

/* ============================================================= entries */

static const char *file_type(mode_t mode)
{
    if (S_ISLNK(mode)) return "a symbolic link";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    return "not a regular file";
}

int kj_cache_entry_open(int folder, const char *name, struct stat *st, char **why)
{
    *why = NULL;
    /* Looked at before it is opened: a FIFO or a device is never opened at all. */
    if (fstatat(folder, name, st, AT_SYMLINK_NOFOLLOW) != 0)
        return -1;
    if (!S_ISREG(st->st_mode)) {
        *why = text_of("it is %s, not a regular file", file_type(st->st_mode));
        return -1;
    }
    /* O_NOFOLLOW and O_NONBLOCK: swapped for a link or a FIFO since, it
     * still neither follows nor hangs; fstat then says what was opened. */
    int fd = openat(folder, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ELOOP)
            *why = text_of("it is a symbolic link, not a regular file");
        return -1;
    }
    if (fstat(fd, st) != 0)
        *why = text_of("it does not stat: %s", strerror(errno));
    else if (!S_ISREG(st->st_mode))
        *why = text_of("it is %s, not a regular file", file_type(st->st_mode));
    else if (st->st_uid != geteuid())
        *why = text_of("it is owned by uid %u, not by you (uid %u)", (unsigned)st->st_uid,
                       (unsigned)geteuid());
    else if (st->st_mode & (S_IWGRP | S_IWOTH))
        *why = text_of("it is writable by its group or by others (mode %04o)", (unsigned)st->st_mode & 07777);
    if (*why) {
        close(fd);
        return -1;
    }
    return fd;
}
