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
 *     header (CacheHeader: magic, format, kind, sizes, MAC)
 *     key text   (key_size bytes)
 *     payload    (payload_size bytes: an object file, PTX or a cubin)
 *
 * The MAC is HMAC-SHA-256, keyed with the folder's secret (cache_folder.c),
 * of the header before it, the key and the payload: the key alone is no
 * proof, since anyone with the same kjit and source can make it.  The whole
 * file is read and its MAC checked before any byte of it is returned, so a
 * forged or changed entry is never linked or loaded; the folder and the
 * entry's file are checked first (cache_folder.c).
 *
 * It is written to a temporary file in the same folder and renamed into place,
 * so readers see a whole entry or none; several processes storing the same
 * entry at once simply replace one another's identical bytes.  A file that is
 * short, has the wrong magic, format or kind, another key, or a MAC that
 * does not match is a miss: it is deleted and the caller compiles and stores
 * a fresh one (with a warning, unless it was a hash collision).  Every failure
 * here is a miss, never an error: the cache only ever saves time.
 *
 * The folder is bounded (KJIT_CACHE_MAX, 1 GiB unless set): a hit touches the
 * file's modification time and, after each store, the oldest entries go until
 * the folder fits.  Eviction and `kjit cache clear` remove only files kjit
 * wrote.  KJIT_CACHE=off turns the disk cache off.
 */
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
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
    /* HMAC-SHA-256 under the folder's secret of the bytes above, the key
     * and the payload. */
    uint8_t mac[KJ_SHA256_BYTES];
} CacheHeader;

_Static_assert(offsetof(CacheHeader, mac) == KJ_CACHE_MAC_OFFSET, "the MAC's place is part of the format");
_Static_assert(sizeof(CacheHeader) == KJ_CACHE_HEADER_BYTES, "the header's size is part of the format");

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
             KJIT_VERSION, kj_jit ? kj_jit->llvm_version() : "none", KJ_CACHE_FORMAT, size, mtime);
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

bool kj_cache_parse_size(const char *text, uint64_t *bytes)
{
    /* Parsed by hand, not with strtod: "1e30", "inf" and "nan" are numbers
     * to strtod and out of range for a size. */
    if (!text || !isdigit((unsigned char)*text))
        return false;
    const char *p = text;
    uint64_t whole = 0;
    for (; isdigit((unsigned char)*p); p++) {
        if (whole > (KJ_CACHE_MAX_LIMIT - 9) / 10)
            return false;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    double fraction = 0, place = 0.1;
    if (*p == '.') {
        for (p++; isdigit((unsigned char)*p); p++, place /= 10)
            fraction += (*p - '0') * place;
    }
    uint64_t scale = 1;
    switch (*p) {
    case 'k': case 'K': scale = 1ull << 10; p++; break;
    case 'm': case 'M': scale = 1ull << 20; p++; break;
    case 'g': case 'G': scale = 1ull << 30; p++; break;
    case 't': case 'T': scale = 1ull << 40; p++; break;
    default: break;
    }
    if (*p == 'i' && scale > 1)
        p++;
    if (*p == 'B' || *p == 'b')
        p++;
    if (*p != '\0' || whole > KJ_CACHE_MAX_LIMIT / scale)
        return false;
    uint64_t value = whole * scale + (uint64_t)(fraction * (double)scale);
    if (value > KJ_CACHE_MAX_LIMIT)
        return false;
    *bytes = value;
    return true;
}

/* Why KJIT_CACHE_MAX is not used (heap), or NULL when it is unset or fine. */
static char *max_bytes_warning(uint64_t *bytes)
{
    const char *text = getenv("KJIT_CACHE_MAX");
    *bytes = DEFAULT_MAX_BYTES;
    if (!text || kj_cache_parse_size(text, bytes))
        return NULL;
    *bytes = DEFAULT_MAX_BYTES;
    KjBuf message = {0};
    kj_buf_printf(&message,
                  "kjit: warning: KJIT_CACHE_MAX='%.64s' is not a size (bytes, with an optional K, M, G or "
                  "T suffix, at most 1024T: 512M, 2G); the cache keeps its default limit, 1G\n",
                  text);
    return message.data;
}

uint64_t kj_cache_max_bytes(const KjCacheWarn *warn)
{
    uint64_t bytes;
    char *message = max_bytes_warning(&bytes);
    if (message)
        kj_cache_warn(warn, message);
    free(message);
    return bytes;
}

void kj_cache_entry_path(const char *dir, const KjCacheKey *key, KjCacheKind kind, char *buf,
                         size_t size)
{
    snprintf(buf, size, "%s/%016llx%016llx-%s" CACHE_SUFFIX, dir, (unsigned long long)key->hash[0],
             (unsigned long long)key->hash[1], kj_cache_kind_name(kind));
}

/* The entry's file name, without the folder. */
static void entry_name(const KjCacheKey *key, KjCacheKind kind, char *buf, size_t size)
{
    snprintf(buf, size, "%016llx%016llx-%s" CACHE_SUFFIX, (unsigned long long)key->hash[0],
             (unsigned long long)key->hash[1], kj_cache_kind_name(kind));
}

static void warn_folder(const KjCacheWarn *warn, const char *dir, const char *why)
{
    KjBuf message = {0};
    kj_buf_printf(&message,
                  "kjit: warning: the cache folder %s is not used: %s; compiling without the disk cache "
                  "(see docs/security.md)\n",
                  dir, why);
    kj_cache_warn(warn, message.data);
    kj_buf_free(&message);
}

/* The cache folder, opened and checked, with its secret: the descriptor, or
 * -1 (a warning when it was refused). */
static int open_cache(const char *dir, bool create, uint8_t secret[KJ_CACHE_SECRET_BYTES],
                      const KjCacheWarn *warn)
{
    char *why = NULL;
    int folder = kj_cache_folder_open(dir, create, &why);
    if (folder >= 0 && !kj_cache_folder_secret(folder, create, secret, &why)) {
        close(folder);
        folder = -1;
    }
    if (why)
        warn_folder(warn, dir, why);
    free(why);
    return folder;
}

char *kj_cache_check(const char *dir)
{
    KjBuf out = {0};
    char *why = NULL;
    int folder = kj_cache_folder_open(dir, false, &why);
    uint8_t secret[KJ_CACHE_SECRET_BYTES];
    if (folder >= 0) {
        kj_cache_folder_secret(folder, false, secret, &why);
        memset(secret, 0, sizeof secret);
        close(folder);
    }
    if (why)
        kj_buf_printf(&out, "kjit: warning: the cache folder %s is not used: %s\n", dir, why);
    free(why);
    uint64_t bytes;
    char *max = max_bytes_warning(&bytes);
    if (max)
        kj_buf_printf(&out, "%s", max);
    free(max);
    return out.data;
}

/* ============================================================ the MAC */

static void entry_mac(const uint8_t secret[KJ_CACHE_SECRET_BYTES], const CacheHeader *header,
                      const void *key, size_t key_size, const void *payload, size_t payload_size,
                      uint8_t mac[KJ_SHA256_BYTES])
{
    KjHmacSha256 hmac;
    kj_hmac_sha256_init(&hmac, secret, KJ_CACHE_SECRET_BYTES);
    kj_hmac_sha256_update(&hmac, header, offsetof(CacheHeader, mac));
    kj_hmac_sha256_update(&hmac, key, key_size);
    kj_hmac_sha256_update(&hmac, payload, payload_size);
    kj_hmac_sha256_final(&hmac, mac);
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

/* What a load found: a hit, nothing, an entry refused with a reason (a
 * warning), or an intact entry of another key (a hash collision: silent). */
typedef enum { LOAD_HIT, LOAD_ABSENT, LOAD_REFUSED, LOAD_OTHER_KEY } LoadResult;

static LoadResult load_entry(int folder, const char *name, const uint8_t *secret, const KjCacheKey *key,
                             KjCacheKind kind, void **data, size_t *size, char **why)
{
    struct stat st;
    int fd = kj_cache_entry_open(folder, name, &st, why);
    if (fd < 0)
        return *why ? LOAD_REFUSED : LOAD_ABSENT;
    CacheHeader header;
    LoadResult result = LOAD_REFUSED;
    char *key_text = NULL, *payload = NULL;
    if (!read_header(fd, st.st_size, &header)) {
        *why = kj_xstrdup("it is not a whole cache entry of this kjit's format");
        goto done;
    }
    key_text = kj_xmalloc(header.key_size + 1);
    payload = kj_xmalloc(header.payload_size + 1);
    if (!kj_fd_read_all(fd, key_text, header.key_size) ||
        !kj_fd_read_all(fd, payload, header.payload_size)) {
        *why = kj_xstrdup("it does not read");
        goto done;
    }
    /* Nothing of the entry is looked at, let alone returned, before this. */
    uint8_t mac[KJ_SHA256_BYTES];
    entry_mac(secret, &header, key_text, header.key_size, payload, header.payload_size, mac);
    if (!kj_mac_equal(mac, header.mac, sizeof mac)) {
        *why = kj_xstrdup("its MAC does not match: it was not written by your kjit with this folder's "
                          "secret, or it was changed since");
        goto done;
    }
    const char *want = key->text.data ? key->text.data : "";
    if (header.kind != (uint32_t)kind || header.key_size != key->text.len ||
        memcmp(key_text, want, header.key_size) != 0) {
        result = LOAD_OTHER_KEY;
        goto done;
    }
    payload[header.payload_size] = '\0'; /* PTX is read as text */
    *data = payload;
    *size = header.payload_size;
    payload = NULL;
    /* Least recently used goes first: a hit makes the entry young. */
    futimens(fd, NULL);
    result = LOAD_HIT;
done:
    close(fd);
    free(key_text);
    free(payload);
    return result;
}

bool kj_cache_load(const KjCacheKey *key, KjCacheKind kind, void **data, size_t *size,
                   const KjCacheWarn *warn)
{
    *data = NULL;
    *size = 0;
    char dir[4096], name[128];
    uint8_t secret[KJ_CACHE_SECRET_BYTES];
    if (!kj_cache_enabled() || !kj_cache_dir(dir, sizeof dir))
        return false;
    int folder = open_cache(dir, false, secret, warn);
    if (folder < 0) {
        count(&counters.disk_misses);
        return false;
    }
    entry_name(key, kind, name, sizeof name);
    char *why = NULL;
    LoadResult result = load_entry(folder, name, secret, key, kind, data, size, &why);
    memset(secret, 0, sizeof secret);
    if (result == LOAD_HIT) {
        count(&counters.disk_hits);
        close(folder);
        return true;
    }
    count(&counters.disk_misses);
    if (result == LOAD_REFUSED || result == LOAD_OTHER_KEY) {
        if (why) {
            KjBuf message = {0};
            kj_buf_printf(&message, "kjit: warning: the cache entry %s/%s is not used: %s; compiling it again\n",
                          dir, name, why);
            kj_cache_warn(warn, message.data);
            kj_buf_free(&message);
        }
        /* Never loaded, and out of the way of the fresh entry the caller
         * stores.  The folder is the user's alone, so the name removed is
         * the one checked. */
        unlinkat(folder, name, 0);
        count(&counters.disk_rejected);
    }
    free(why);
    close(folder);
    return false;
}

/* ============================================================ writing */

static int evict_folder(int folder, uint64_t max_bytes, uint64_t *left);

/* What this process knows of the folder it last stored into: a listing of
 * the folder (evict_folder) stats every entry, 0.1 s for a folder of 75,000,
 * so a store lists it only when it may be over the limit. */
static struct {
    pthread_mutex_t lock;
    char dir[4096];
    uint64_t listed;  /* the entries' bytes the last listing left */
    uint64_t written; /* the bytes this process stored there since */
} folder_size = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Whether a store of `bytes` into dir lists the folder: the process's first
 * store there; past max_bytes by what the process knows; or a sixteenth of
 * max_bytes stored since its last listing, for what other processes store
 * (the folder stays within max_bytes and that much for each process storing
 * into it at once). */
static bool listing_due(const char *dir, uint64_t bytes, uint64_t max_bytes)
{
    pthread_mutex_lock(&folder_size.lock);
    bool due = strcmp(folder_size.dir, dir) != 0;
    if (due) {
        snprintf(folder_size.dir, sizeof folder_size.dir, "%s", dir);
        folder_size.listed = folder_size.written = 0;
    }
    folder_size.written += bytes;
    due = due || folder_size.listed + folder_size.written > max_bytes ||
          folder_size.written > max_bytes / 16;
    pthread_mutex_unlock(&folder_size.lock);
    return due;
}

static void note_listing(const char *dir, uint64_t left)
{
    pthread_mutex_lock(&folder_size.lock);
    if (strcmp(folder_size.dir, dir) == 0)
        folder_size.listed = left, folder_size.written = 0;
    pthread_mutex_unlock(&folder_size.lock);
}

bool kj_cache_store(const KjCacheKey *key, KjCacheKind kind, const void *data, size_t size,
                    const KjCacheWarn *warn)
{
    char dir[4096], name[128], temp[128];
    uint8_t secret[KJ_CACHE_SECRET_BYTES];
    if (!kj_cache_enabled() || !kj_cache_dir(dir, sizeof dir))
        return false;
    int folder = open_cache(dir, true, secret, warn);
    if (folder < 0)
        return false;
    entry_name(key, kind, name, sizeof name);
    static unsigned long sequence;
    unsigned long n = __atomic_fetch_add(&sequence, 1, __ATOMIC_RELAXED);
    snprintf(temp, sizeof temp, TEMP_PREFIX "%016llx-%ld-%lu", (unsigned long long)key->hash[0],
             (long)getpid(), n);
    int fd = openat(folder, temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        memset(secret, 0, sizeof secret);
        close(folder);
        return false;
    }
    const char *text = key->text.data ? key->text.data : "";
    CacheHeader header = {.format = KJ_CACHE_FORMAT,
                          .kind = (uint32_t)kind,
                          .key_size = (uint32_t)key->text.len,
                          .payload_size = size};
    memcpy(header.magic, CACHE_MAGIC, 8);
    entry_mac(secret, &header, text, key->text.len, data, size, header.mac);
    memset(secret, 0, sizeof secret);
    bool ok = kj_fd_write_all(fd, &header, sizeof header) &&
              kj_fd_write_all(fd, text, key->text.len) && kj_fd_write_all(fd, data, size);
    ok = close(fd) == 0 && ok;
    /* rename is atomic within a folder: readers see the old entry or this one. */
    if (!ok || renameat(folder, temp, folder, name) != 0) {
        unlinkat(folder, temp, 0);
        close(folder);
        return false;
    }
    count(&counters.disk_stores);
    uint64_t max_bytes = kj_cache_max_bytes(warn), left;
    if (listing_due(dir, sizeof header + key->text.len + size, max_bytes)) {
        evict_folder(folder, max_bytes, &left);
        note_listing(dir, left);
    }
    close(folder);
    return true;
}

/* =========================================================== the folder */

static bool has_suffix(const char *name, const char *suffix)
{
    size_t n = strlen(name), m = strlen(suffix);
    return n >= m && strcmp(name + n - m, suffix) == 0;
}

/* <32 hex digits>-<kind>.kjc, as entry_name makes them. */
static bool is_entry_name(const char *name)
{
    for (int i = 0; i < 32; i++)
        if (!isxdigit((unsigned char)name[i]))
            return false;
    if (name[32] != '-')
        return false;
    for (int k = KJ_CACHE_CPU_OBJECT; k <= KJ_CACHE_CUBIN; k++) {
        const char *kind = kj_cache_kind_name((KjCacheKind)k);
        size_t n = strlen(kind);
        if (strncmp(name + 33, kind, n) == 0 && strcmp(name + 33 + n, CACHE_SUFFIX) == 0)
            return true;
    }
    return false;
}

static bool is_temp_name(const char *name)
{
    return strncmp(name, TEMP_PREFIX, strlen(TEMP_PREFIX)) == 0 && isxdigit((unsigned char)name[5]);
}

/* Whether the folder's file `name` is one kjit wrote: an entry's or a
 * temporary file's name, a regular file (never a link, never opened when it
 * is a FIFO), that begins with kjit's magic.  Nothing else is removed. */
static bool written_by_kjit(int folder, const char *name)
{
    if (!is_entry_name(name) && !is_temp_name(name))
        return false;
    struct stat st;
    if (fstatat(folder, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        return false;
    int fd = openat(folder, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return false;
    char magic[8];
    bool ours = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && kj_fd_read_all(fd, magic, sizeof magic) &&
                memcmp(magic, CACHE_MAGIC, sizeof magic) == 0;
    close(fd);
    return ours;
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

/* The folder's entries through a descriptor of their own (closedir closes it). */
static DIR *read_folder(int folder)
{
    int fd = openat(folder, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *listing = fd >= 0 ? fdopendir(fd) : NULL;
    if (fd >= 0 && !listing)
        close(fd);
    return listing;
}

/* Removes kjit's oldest entries until the folder's are within max_bytes,
 * and temporary files of dead stores; *left: the entries' bytes after. */
static int evict_folder(int folder, uint64_t max_bytes, uint64_t *left)
{
    *left = 0;
    DIR *listing = read_folder(folder);
    if (!listing)
        return 0;
    count(&counters.listings);
    FileAge *files = NULL;
    int count_files = 0, capacity = 0, removed = 0;
    uint64_t total = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(listing))) {
        struct stat st;
        if (fstatat(folder, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (is_temp_name(e->d_name)) {
            if (now - st.st_mtim.tv_sec > STALE_TEMP_SECONDS && written_by_kjit(folder, e->d_name) &&
                unlinkat(folder, e->d_name, 0) == 0)
                removed++;
            continue;
        }
        if (!is_entry_name(e->d_name) || strlen(e->d_name) >= sizeof files->name)
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
        /* The magic is read only here, for the few files about to go: a file
         * kjit did not write is neither removed nor counted. */
        for (int i = 0; i < count_files && total > max_bytes; i++) {
            if (written_by_kjit(folder, files[i].name) && unlinkat(folder, files[i].name, 0) == 0) {
                removed++;
                count(&counters.evictions);
            }
            total -= files[i].size;
        }
    }
    closedir(listing);
    free(files);
    *left = total;
    return removed;
}

int kj_cache_evict(const char *dir, uint64_t max_bytes)
{
    int folder = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (folder < 0)
        return 0;
    uint64_t left;
    int removed = evict_folder(folder, max_bytes, &left);
    close(folder);
    return removed;
}

int kj_cache_list(const char *dir, KjCacheVisit visit, void *user)
{
    int folder = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *listing = folder >= 0 ? read_folder(folder) : NULL;
    if (!listing) {
        if (folder >= 0)
            close(folder);
        return -1;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(listing))) {
        if (!has_suffix(e->d_name, CACHE_SUFFIX) || e->d_name[0] == '.')
            continue;
        struct stat st;
        if (fstatat(folder, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        KjCacheEntryInfo info = {.name = e->d_name, .last_used = st.st_mtim.tv_sec};
        char *key_text = NULL;
        CacheHeader header;
        /* A link or a FIFO under an entry's name is listed, as damaged, but
         * never opened: listing must not follow it or hang. */
        int fd = S_ISREG(st.st_mode) ? openat(folder, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
                                     : -1;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
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
        }
        n++;
        if (visit)
            visit(user, &info);
        free(key_text);
        if (fd >= 0)
            close(fd);
    }
    closedir(listing);
    close(folder);
    return n;
}

int kj_cache_clear(const char *dir)
{
    int folder = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *listing = folder >= 0 ? read_folder(folder) : NULL;
    if (!listing) {
        if (folder >= 0)
            close(folder);
        return -1;
    }
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(listing)))
        if (written_by_kjit(folder, e->d_name) && unlinkat(folder, e->d_name, 0) == 0)
            removed++;
    /* A cleared cache starts again from nothing, its secret too. */
    kj_cache_remove_secret(folder);
    closedir(listing);
    close(folder);
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
bool kj_cache_fetch(const KjCacheKey *key, KjCacheKind kind, void **data, size_t *size,
                    const KjCacheWarn *warn)
{
    if (kj_cache_memory_get(key, kind, data, size))
        return true;
    if (!kj_cache_load(key, kind, data, size, warn))
        return false;
    kj_cache_memory_put(key, kind, *data, *size);
    return true;
}

void kj_cache_keep(const KjCacheKey *key, KjCacheKind kind, const void *data, size_t size,
                   const KjCacheWarn *warn)
{
    kj_cache_memory_put(key, kind, data, size);
    kj_cache_store(key, kind, data, size, warn);
}
