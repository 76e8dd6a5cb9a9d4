/*
 * cache.c: compiled code kept in memory for the process and on disk across
 * processes, so that nothing is compiled twice.
 *
 * An entry is found by a key: a text that names everything the compiled bytes
 * depend on (the hash of the module's source and of every source it imports,
 * the function and its variant, the target and the exact device, the options,
 * kjit's and LLVM's versions and the build of libkjit itself), and a 128-bit
 * hash of that text that names the file.  The whole key text is stored in the
 * entry and compared on load, so a hash collision can never load the wrong
 * code.
 *
 * On disk an entry is one file, <dir>/<32 hex digits>-<kind>.kjc:
 *
 *     header (CacheHeader: magic, format, kind, sizes, checksums)
 *     key text   (key_size bytes)
 *     payload    (payload_size bytes: an object file, PTX or a cubin)
 *
 * It is written to a temporary file in the same folder and renamed into place,
 * so readers see a whole entry or none; several processes storing the same
 * entry at once simply replace one another's identical bytes.  A file that is
 * short, has the wrong magic, format or kind, another key, or a checksum that
 * does not match is a miss: it is deleted and the caller compiles and stores a
 * fresh one.  Every failure here is a miss, never an error: the cache only
 * ever saves time.
 *
 * The folder is bounded (KJIT_CACHE_MAX, 1 GiB unless set): a hit touches the
 * file's modification time and, after each store, the oldest entries go until
 * the folder fits.  KJIT_CACHE=off turns the disk cache off.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kjit_runtime.h"

#define CACHE_MAGIC "KJITCACH"
#define CACHE_SUFFIX ".kjc"
#define TEMP_PREFIX ".tmp-"
#define DEFAULT_MAX_BYTES (1ull << 30)
/* A temporary file older than this belongs to a process that died mid-write. */
#define STALE_TEMP_SECONDS 3600
/* The memory tier keeps payload bytes up to this total, oldest out first. */
#define MEMORY_TIER_MAX_BYTES (256ull << 20)

typedef struct CacheHeader {
    char magic[8];
    uint32_t format;
    uint32_t kind;
    uint32_t key_size;
    uint32_t reserved;
    uint64_t payload_size;
    uint64_t payload_checksum;
    uint64_t key_checksum;
} CacheHeader;

static KjCacheCounters counters;
static pthread_mutex_t counters_lock = PTHREAD_MUTEX_INITIALIZER;

static void count(uint64_t *counter)
{
    pthread_mutex_lock(&counters_lock);
    (*counter)++;
    pthread_mutex_unlock(&counters_lock);
}

KjCacheCounters kj_cache_counters(void)
{
    pthread_mutex_lock(&counters_lock);
    KjCacheCounters copy = counters;
    pthread_mutex_unlock(&counters_lock);
    return copy;
}

void kj_cache_count_compile(void)
{
    count(&counters.compiles);
}

void kj_cache_count_shared_hit(void)
{
    count(&counters.shared_hits);
}

const char *kj_cache_kind_name(KjCacheKind kind)
{
    switch (kind) {
    case KJ_CACHE_CPU_OBJECT: return "cpu-object";
    case KJ_CACHE_PTX: return "ptx";
    case KJ_CACHE_CUBIN: return "cubin";
    }
    return "unknown";
}

/* ================================================================== keys */

void kj_cache_key_add(KjCacheKey *key, const char *field, const char *fmt, ...)
{
    kj_buf_printf(&key->text, "%s=", field);
    va_list ap;
    va_start(ap, fmt);
    kj_buf_vprintf(&key->text, fmt, ap);
    va_end(ap);
    kj_buf_printf(&key->text, "\n");
}

void kj_cache_key_finish(KjCacheKey *key)
{
    const char *text = key->text.data ? key->text.data : "";
    /* Two FNV-1a streams from different starting points: a 128-bit name for
     * the file.  Only a name: the full text decides whether an entry fits. */
    key->hash[0] = kj_hash_bytes(0, text, key->text.len);
    key->hash[1] = kj_hash_bytes(0x84222325cbf29ce4ull ^ key->text.len, text, key->text.len);
}

void kj_cache_key_free(KjCacheKey *key)
{
    kj_buf_free(&key->text);
    memset(key, 0, sizeof *key);
}

/*
 * kjit's version is not enough during development, when the code generator
 * changes between builds of one version: the identity also names the file that
 * holds this code (libkjit.so, or the program libkjit.a was linked into) by
 * its size and modification time, so every rebuild starts a fresh key space.
 */
static pthread_once_t identity_once = PTHREAD_ONCE_INIT;
static char build_identity[512];

static void make_identity(void)
{
    Dl_info info;
    struct stat st;
    long long size = 0, mtime = 0;
    if (dladdr((void *)&make_identity, &info) && info.dli_fname && stat(info.dli_fname, &st) == 0) {
        size = (long long)st.st_size;
        mtime = (long long)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
    }
    snprintf(build_identity, sizeof build_identity, "kjit %s, llvm %s, cache format %d, build %lld-%lld",
             KJIT_VERSION, kj_llvm_version(), KJ_CACHE_FORMAT, size, mtime);
}

const char *kj_cache_build_identity(void)
{
    pthread_once(&identity_once, make_identity);
    return build_identity;
}

/* ========================================================= configuration */

bool kj_cache_enabled(void)
{
    const char *value = getenv("KJIT_CACHE");
    if (!value)
        return true;
    return !(strcmp(value, "off") == 0 || strcmp(value, "0") == 0 || strcmp(value, "no") == 0 ||
             strcmp(value, "false") == 0);
}

bool kj_cache_dir(char *buf, size_t size)
{
    const char *dir = getenv("KJIT_CACHE_DIR");
    int n;
    if (dir && *dir) {
        n = snprintf(buf, size, "%s", dir);
    } else if ((dir = getenv("XDG_CACHE_HOME")) && *dir) {
        n = snprintf(buf, size, "%s/kjit", dir);
    } else if ((dir = getenv("HOME")) && *dir) {
        n = snprintf(buf, size, "%s/.cache/kjit", dir);
    } else {
        return false;
    }
    return n > 0 && (size_t)n < size;
}

bool kj_cache_parse_size(const char *text, uint64_t *bytes)
{
    if (!text || !*text)
        return false;
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (errno || end == text || value < 0)
        return false;
    uint64_t scale = 1;
    switch (*end) {
    case 'k': case 'K': scale = 1ull << 10; end++; break;
    case 'm': case 'M': scale = 1ull << 20; end++; break;
    case 'g': case 'G': scale = 1ull << 30; end++; break;
    case 't': case 'T': scale = 1ull << 40; end++; break;
    default: break;
    }
    if (*end == 'i' && scale > 1)
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0')
        return false;
    *bytes = (uint64_t)(value * (double)scale);
    return true;
}

uint64_t kj_cache_max_bytes(void)
{
    uint64_t bytes;
    if (kj_cache_parse_size(getenv("KJIT_CACHE_MAX"), &bytes))
        return bytes;
    return DEFAULT_MAX_BYTES;
}

/* mkdir -p, mode 0700: compiled code is the user's own business. */
static bool make_dirs(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return false;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return false;
        *p = '/';
    }
    return mkdir(buf, 0700) == 0 || errno == EEXIST;
}

void kj_cache_entry_path(const char *dir, const KjCacheKey *key, KjCacheKind kind, char *buf,
                         size_t size)
{
    snprintf(buf, size, "%s/%016llx%016llx-%s" CACHE_SUFFIX, dir, (unsigned long long)key->hash[0],
             (unsigned long long)key->hash[1], kj_cache_kind_name(kind));
}

/* ============================================================ reading */

/* Reads and checks a header against the file's size: false for anything
 * that is not a whole entry of this format. */
static bool read_header(int fd, off_t file_size, CacheHeader *header)
{
    if (file_size < (off_t)sizeof *header || !kj_fd_read_all(fd, header, sizeof *header))
        return false;
    if (memcmp(header->magic, CACHE_MAGIC, 8) != 0 || header->format != KJ_CACHE_FORMAT)
        return false;
    if (header->kind < KJ_CACHE_CPU_OBJECT || header->kind > KJ_CACHE_CUBIN)
        return false;
    uint64_t expected = (uint64_t)sizeof *header + header->key_size + header->payload_size;
    return header->payload_size < (1ull << 40) && expected == (uint64_t)file_size;
}

/* Which part of a load failed: tells a miss from a damaged entry. */
typedef enum { LOAD_HIT, LOAD_ABSENT, LOAD_DAMAGED } LoadResult;

static LoadResult load_file(const char *path, const KjCacheKey *key, KjCacheKind kind,
                            void **data, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return LOAD_ABSENT;
    struct stat st;
    CacheHeader header;
    LoadResult result = LOAD_DAMAGED;
    char *key_text = NULL, *payload = NULL;
    if (fstat(fd, &st) != 0 || !read_header(fd, st.st_size, &header))
        goto done;
    const char *want = key->text.data ? key->text.data : "";
    if (header.kind != (uint32_t)kind || header.key_size != key->text.len ||
        header.key_checksum != kj_hash_bytes(0, want, key->text.len))
        goto done;
    key_text = kj_xmalloc(header.key_size + 1);
    if (!kj_fd_read_all(fd, key_text, header.key_size) ||
        memcmp(key_text, want, header.key_size) != 0)
        goto done;
    payload = kj_xmalloc(header.payload_size + 1);
    if (!kj_fd_read_all(fd, payload, header.payload_size) ||
        kj_hash_bytes(0, payload, header.payload_size) != header.payload_checksum)
        goto done;
    payload[header.payload_size] = '\0'; /* PTX is read as text */
    *data = payload;
    *size = header.payload_size;
    payload = NULL;
    result = LOAD_HIT;
done:
    close(fd);
    free(key_text);
    free(payload);
    return result;
}

bool kj_cache_load(const KjCacheKey *key, KjCacheKind kind, void **data, size_t *size)
{
    *data = NULL;
    *size = 0;
    char dir[4096], path[4200];
    if (!kj_cache_enabled() || !kj_cache_dir(dir, sizeof dir))
        return false;
    kj_cache_entry_path(dir, key, kind, path, sizeof path);
    LoadResult result = load_file(path, key, kind, data, size);
    if (result == LOAD_HIT) {
        /* Least recently used goes first: a hit makes the entry young. */
        utimensat(AT_FDCWD, path, NULL, 0);
        count(&counters.disk_hits);
        return true;
    }
    count(&counters.disk_misses);
    if (result == LOAD_DAMAGED) {
        /* Never loaded, and out of the way of the fresh entry the caller stores. */
        unlink(path);
        count(&counters.disk_rejected);
    }
    return false;
}

/* ============================================================ writing */

bool kj_cache_store(const KjCacheKey *key, KjCacheKind kind, const void *data, size_t size)
{
    char dir[4096], path[4200], temp[4300];
    if (!kj_cache_enabled() || !kj_cache_dir(dir, sizeof dir) || !make_dirs(dir))
        return false;
    kj_cache_entry_path(dir, key, kind, path, sizeof path);
    static unsigned long sequence;
    unsigned long n = __atomic_fetch_add(&sequence, 1, __ATOMIC_RELAXED);
    snprintf(temp, sizeof temp, "%s/" TEMP_PREFIX "%016llx-%ld-%lu", dir,
             (unsigned long long)key->hash[0], (long)getpid(), n);
    int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return false;
    const char *text = key->text.data ? key->text.data : "";
    CacheHeader header = {.format = KJ_CACHE_FORMAT,
                          .kind = (uint32_t)kind,
                          .key_size = (uint32_t)key->text.len,
                          .payload_size = size,
                          .payload_checksum = kj_hash_bytes(0, data, size),
                          .key_checksum = kj_hash_bytes(0, text, key->text.len)};
    memcpy(header.magic, CACHE_MAGIC, 8);
    bool ok = kj_fd_write_all(fd, &header, sizeof header) &&
              kj_fd_write_all(fd, text, key->text.len) && kj_fd_write_all(fd, data, size);
    ok = close(fd) == 0 && ok;
    /* rename is atomic within a folder: readers see the old entry or this one. */
    if (!ok || rename(temp, path) != 0) {
        unlink(temp);
        return false;
    }
    count(&counters.disk_stores);
    kj_cache_evict(dir, kj_cache_max_bytes());
    return true;
}

/* =========================================================== the folder */

static bool has_suffix(const char *name, const char *suffix)
{
    size_t n = strlen(name), m = strlen(suffix);
    return n >= m && strcmp(name + n - m, suffix) == 0;
}

typedef struct FileAge {
    char name[256];
    uint64_t size;
    struct timespec mtime;
} FileAge;

static int older_first(const void *a, const void *b)
{
    const FileAge *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

int kj_cache_evict(const char *dir, uint64_t max_bytes)
{
    DIR *folder = opendir(dir);
    if (!folder)
        return 0;
    FileAge *files = NULL;
    int count_files = 0, capacity = 0, removed = 0;
    uint64_t total = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(folder))) {
        struct stat st;
        if (fstatat(dirfd(folder), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (strncmp(e->d_name, TEMP_PREFIX, strlen(TEMP_PREFIX)) == 0) {
            if (now - st.st_mtim.tv_sec > STALE_TEMP_SECONDS && unlinkat(dirfd(folder), e->d_name, 0) == 0)
                removed++;
            continue;
        }
        if (!has_suffix(e->d_name, CACHE_SUFFIX) || strlen(e->d_name) >= sizeof files->name)
            continue;
        if (count_files == capacity) {
            capacity = capacity ? capacity * 2 : 64;
            files = kj_xrealloc(files, (size_t)capacity * sizeof *files);
        }
        FileAge *f = &files[count_files++];
        snprintf(f->name, sizeof f->name, "%s", e->d_name);
        f->size = (uint64_t)st.st_size;
        f->mtime = st.st_mtim;
        total += f->size;
    }
    if (total > max_bytes) {
        qsort(files, (size_t)count_files, sizeof *files, older_first);
        for (int i = 0; i < count_files && total > max_bytes; i++)
            if (unlinkat(dirfd(folder), files[i].name, 0) == 0) {
                total -= files[i].size;
                removed++;
                count(&counters.evictions);
            }
    }
    closedir(folder);
    free(files);
    return removed;
}

int kj_cache_list(const char *dir, KjCacheVisit visit, void *user)
{
    DIR *folder = opendir(dir);
    if (!folder)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(folder))) {
        if (!has_suffix(e->d_name, CACHE_SUFFIX) || e->d_name[0] == '.')
            continue;
        int fd = openat(dirfd(folder), e->d_name, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat st;
        CacheHeader header;
        KjCacheEntryInfo info = {.name = e->d_name};
        char *key_text = NULL;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
            info.file_bytes = (uint64_t)st.st_size;
            info.last_used = st.st_mtim.tv_sec;
            if (read_header(fd, st.st_size, &header)) {
                key_text = kj_xmalloc(header.key_size + 1);
                if (kj_fd_read_all(fd, key_text, header.key_size)) {
                    key_text[header.key_size] = '\0';
                    info.valid = true;
                    info.kind = (KjCacheKind)header.kind;
                    info.payload_bytes = header.payload_size;
                    info.key_text = key_text;
                }
            }
            n++;
            if (visit)
                visit(user, &info);
        }
        free(key_text);
        close(fd);
    }
    closedir(folder);
    return n;
}

int kj_cache_clear(const char *dir)
{
    DIR *folder = opendir(dir);
    if (!folder)
        return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(folder))) {
        bool ours = has_suffix(e->d_name, CACHE_SUFFIX) ||
                    strncmp(e->d_name, TEMP_PREFIX, strlen(TEMP_PREFIX)) == 0;
        if (ours && unlinkat(dirfd(folder), e->d_name, 0) == 0)
            removed++;
    }
    closedir(folder);
    return removed;
}

/* ======================================================== memory tier */

/*
 * Payload bytes this process compiled or loaded, by key: a module compiled a
 * second time (another context, or after the first was freed) finds its code
 * here without touching the disk, even with the disk cache off.
 */
typedef struct MemoryEntry {
    struct MemoryEntry *next;
    uint64_t hash[2];
    KjCacheKind kind;
    char *key_text;
    size_t key_size;
    void *data;
    size_t size;
} MemoryEntry;

static pthread_mutex_t memory_lock = PTHREAD_MUTEX_INITIALIZER;
static MemoryEntry *memory_entries; /* newest first */
static uint64_t memory_bytes;

static bool same_key(const MemoryEntry *e, const KjCacheKey *key, KjCacheKind kind)
{
    return e->hash[0] == key->hash[0] && e->hash[1] == key->hash[1] && e->kind == kind &&
           e->key_size == key->text.len && memcmp(e->key_text, key->text.data, e->key_size) == 0;
}

bool kj_cache_memory_get(const KjCacheKey *key, KjCacheKind kind, void **data, size_t *size)
{
    pthread_mutex_lock(&memory_lock);
    MemoryEntry *e = memory_entries;
    while (e && !same_key(e, key, kind))
        e = e->next;
    if (e) {
        *data = kj_xmalloc(e->size + 1);
        memcpy(*data, e->data, e->size);
        ((char *)*data)[e->size] = '\0';
        *size = e->size;
    }
    pthread_mutex_unlock(&memory_lock);
    if (e)
        count(&counters.memory_hits);
    return e != NULL;
}

void kj_cache_memory_put(const KjCacheKey *key, KjCacheKind kind, const void *data, size_t size)
{
    if (!key->text.data || size > MEMORY_TIER_MAX_BYTES)
        return;
    pthread_mutex_lock(&memory_lock);
    for (MemoryEntry *e = memory_entries; e; e = e->next)
        if (same_key(e, key, kind)) {
            pthread_mutex_unlock(&memory_lock);
            return;
        }
    MemoryEntry *e = kj_xcalloc(1, sizeof *e);
    e->hash[0] = key->hash[0];
    e->hash[1] = key->hash[1];
    e->kind = kind;
    e->key_size = key->text.len;
    e->key_text = kj_xmalloc(e->key_size);
    memcpy(e->key_text, key->text.data, e->key_size);
    e->data = kj_xmalloc(size ? size : 1);
    memcpy(e->data, data, size);
    e->size = size;
    e->next = memory_entries;
    memory_entries = e;
    memory_bytes += size;
    /* Over the bound: drop the oldest (the tail). */
    while (memory_bytes > MEMORY_TIER_MAX_BYTES && memory_entries->next) {
        MemoryEntry **tail = &memory_entries;
        while ((*tail)->next)
            tail = &(*tail)->next;
        MemoryEntry *old = *tail;
        *tail = NULL;
        memory_bytes -= old->size;
        free(old->key_text);
        free(old->data);
        free(old);
    }
    pthread_mutex_unlock(&memory_lock);
}

void kj_cache_memory_clear(void)
{
    pthread_mutex_lock(&memory_lock);
    while (memory_entries) {
        MemoryEntry *e = memory_entries;
        memory_entries = e->next;
        free(e->key_text);
        free(e->data);
        free(e);
    }
    memory_bytes = 0;
    pthread_mutex_unlock(&memory_lock);
}

/* ========================================================= both tiers */

/* What code generation asks: memory first (no file system at all), then the
 * disk, whose hit is kept in memory for the next context that asks. */
bool kj_cache_fetch(const KjCacheKey *key, KjCacheKind kind, void **data, size_t *size)
{
    if (kj_cache_memory_get(key, kind, data, size))
        return true;
    if (!kj_cache_load(key, kind, data, size))
        return false;
    kj_cache_memory_put(key, kind, *data, *size);
    return true;
}

void kj_cache_keep(const KjCacheKey *key, KjCacheKind kind, const void *data, size_t size)
{
    kj_cache_memory_put(key, kind, data, size);
    kj_cache_store(key, kind, data, size);
}
