/*
 * test_cache.c: the compiled-code cache (runtime/cache.c and its use in api.c).
 *
 * Hits and misses in memory and on disk; invalidation when a function, an
 * imported module, the target or an option changes; damaged entries
 * (truncated, flipped bytes, garbage, another format, another key) that must
 * be recompiled and replaced, never loaded; several processes filling one
 * cache at once; least-recently-used eviction under KJIT_CACHE_MAX; and
 * KJIT_CACHE=off.  Every test runs in a cache folder of its own (mkdtemp),
 * never the user's, and checks the results of the cached code against a
 * float64 reference on random inputs.
 *
 * "A new process" is played within one by freeing every module (which
 * unloads the shared code) and emptying the memory tier, so that the next
 * compilation can only find its code on disk.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kjit_runtime.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static double uniform(double low, double high)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return low + (high - low) * (double)(rng >> 11) / 9007199254740992.0;
}

static char cache_dir[256];

/* What the contexts of a test were warned of (kjit_options.on_diagnostic). */
static KjBuf warnings;

static void capture_warning(void *user, const char *text)
{
    kj_buf_printf(&warnings, "%s", text);
}

static const KjCacheWarn test_warn = {capture_warning, NULL};

static void expect_warning(const char *part)
{
    ck_assert_msg(warnings.data && strstr(warnings.data, part), "no warning says '%s'; warnings: %s", part,
                  warnings.data ? warnings.data : "(none)");
}

static void setup(void)
{
    kj_buf_free(&warnings);
    snprintf(cache_dir, sizeof cache_dir, "/tmp/kjit-cache-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(cache_dir));
    setenv("KJIT_CACHE_DIR", cache_dir, 1);
    unsetenv("KJIT_CACHE");
    unsetenv("KJIT_CACHE_MAX");
    kj_cache_memory_clear();
}

static void teardown(void)
{
    char command[400];
    snprintf(command, sizeof command, "rm -rf '%s'", cache_dir);
    ck_assert_int_eq(system(command), 0);
    unsetenv("KJIT_CACHE_DIR");
    unsetenv("KJIT_CACHE");
    unsetenv("KJIT_CACHE_MAX");
}

static void write_text(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", cache_dir, name);
    FILE *file = fopen(path, "w");
    ck_assert_ptr_nonnull(file);
    fputs(text, file);
    fclose(file);
}

static kjit_context *make_context(int opt_level)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CPU;
    options.opt_level = opt_level;
    options.on_diagnostic = capture_warning;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    return context;
}

#define N 1000

/* Calls function `name` of `module` elementwise on x in [-4, 4] (and y, for
 * two inputs) and checks every element against expect(x, y) to 1e-12
 * relative (the code is f64 throughout). */
static void check_results(kjit_context *context, kjit_module *module, const char *name, int inputs,
                          double (*expect)(double, double))
{
    kjit_function *function;
    ck_assert_int_eq(kjit_module_function(module, name, &function), KJIT_OK);
    static double x[N], y[N], out[N];
    for (int i = 0; i < N; i++) {
        x[i] = uniform(-4, 4);
        y[i] = uniform(-4, 4);
        out[i] = NAN;
    }
    int64_t shape[1] = {N};
    kjit_array ax = kjit_array_make(x, KJIT_F64, 1, shape);
    kjit_array ay = kjit_array_make(y, KJIT_F64, 1, shape);
    kjit_array aout = kjit_array_make(out, KJIT_F64, 1, shape);
    kjit_arg args[2] = {kjit_arg_array(&ax), kjit_arg_array(&ay)};
    kjit_status status = kjit_call(function, args, inputs, &aout, NULL);
    ck_assert_msg(status == KJIT_OK, "%s: %s", name, kjit_last_error(context));
    for (int i = 0; i < N; i++) {
        double want = expect(x[i], y[i]);
        ck_assert_msg(fabs(out[i] - want) <= 1e-12 * fmax(1.0, fabs(want)),
                      "%s: element %d is %.17g, want %.17g", name, i, out[i], want);
    }
}

static double add_twice(double a, double b) { return a + 2.0 * b; }
static double sub_twice(double a, double b) { return a - 2.0 * b; }
static double scaled_2(double x, double y) { return x * 2.0 + 1.0; }
static double scaled_3(double x, double y) { return x * 3.0 + 1.0; }
static double sine(double x, double y) { return sin(x); }

static const char add_source[] = "@vectorize\n"
                                 "fn f(a: f64, b: f64) -> f64 {\n"
                                 "    return a + 2.0 * b;\n"
                                 "}\n";
static const char sub_source[] = "@vectorize\n"
                                 "fn f(a: f64, b: f64) -> f64 {\n"
                                 "    return a - 2.0 * b;\n"
                                 "}\n";

/* Compiles `source` in a fresh context, checks f against expect, frees it all. */
static void run_string(const char *source, double (*expect)(double, double), int opt_level)
{
    kjit_context *context = make_context(opt_level);
    kjit_module *module;
    kjit_status status = kjit_compile_string(context, "cached.kern", source, &module);
    ck_assert_msg(status == KJIT_OK, "%s", kjit_last_error(context));
    check_results(context, module, "f", 2, expect);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

static int count_files(const char *prefix, const char *suffix)
{
    DIR *dir = opendir(cache_dir);
    ck_assert_ptr_nonnull(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        size_t len = strlen(e->d_name), slen = strlen(suffix);
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 &&
            (len >= slen && strcmp(e->d_name + len - slen, suffix) == 0))
            n++;
    }
    closedir(dir);
    return n;
}

/* The path of the one .kjc entry in the folder. */
static void only_entry(char *path, size_t size)
{
    DIR *dir = opendir(cache_dir);
    struct dirent *e;
    int found = 0;
    while ((e = readdir(dir))) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".kjc") == 0) {
            snprintf(path, size, "%s/%s", cache_dir, e->d_name);
            found++;
        }
    }
    closedir(dir);
    ck_assert_int_eq(found, 1);
}

/* ------------------------------------------------------------ hits, misses */

START_TEST(disk_miss_then_hit)
{
    KjCacheCounters before = kj_cache_counters();
    run_string(add_source, add_twice, 3);
    KjCacheCounters after = kj_cache_counters();
    ck_assert_uint_eq(after.compiles - before.compiles, 1);
    ck_assert_uint_eq(after.disk_stores - before.disk_stores, 1);
    ck_assert_int_eq(count_files("", ".kjc"), 1);

    /* A new process: nothing in memory, the object comes from disk. */
    kj_cache_memory_clear();
    before = kj_cache_counters();
    run_string(add_source, add_twice, 3);
    after = kj_cache_counters();
    ck_assert_uint_eq(after.compiles - before.compiles, 0);
    ck_assert_uint_eq(after.disk_hits - before.disk_hits, 1);
    ck_assert_int_eq(count_files("", ".kjc"), 1);
}
END_TEST

START_TEST(memory_shared_across_contexts)
{
    /* With the disk cache off, sharing in the process still works. */
    setenv("KJIT_CACHE", "off", 1);
    KjCacheCounters before = kj_cache_counters();
    kjit_context *a = make_context(3), *b = make_context(3);
    kjit_module *ma, *mb;
    ck_assert_int_eq(kjit_compile_string(a, "one.kern", add_source, &ma), KJIT_OK);
    ck_assert_int_eq(kjit_compile_string(b, "two.kern", add_source, &mb), KJIT_OK);
    check_results(a, ma, "f", 2, add_twice);
    check_results(b, mb, "f", 2, add_twice);
    KjCacheCounters after = kj_cache_counters();
    ck_assert_uint_eq(after.compiles - before.compiles, 1);
    ck_assert_uint_eq(after.shared_hits - before.shared_hits, 1);
    /* The second module outlives the first: its code must stay loaded. */
    kjit_module_free(ma);
    check_results(b, mb, "f", 2, add_twice);
    kjit_module_free(mb);
    /* Both gone: a third compilation relinks from the memory tier. */
    run_string(add_source, add_twice, 3);
    after = kj_cache_counters();
    ck_assert_uint_eq(after.compiles - before.compiles, 1);
    ck_assert_uint_ge(after.memory_hits - before.memory_hits, 1);
    ck_assert_int_eq(count_files("", ""), 2); /* "." and "..": nothing written */
    kjit_context_destroy(a);
    kjit_context_destroy(b);
}
END_TEST

/* ------------------------------------------------------------ invalidation */

START_TEST(edited_function_recompiles)
{
    run_string(add_source, add_twice, 3);
    kj_cache_memory_clear();
    KjCacheCounters before = kj_cache_counters();
    run_string(sub_source, sub_twice, 3);
    KjCacheCounters after = kj_cache_counters();
    ck_assert_uint_eq(after.compiles - before.compiles, 1);
    ck_assert_int_eq(count_files("", ".kjc"), 2);
}
END_TEST

/* The Numba bug this cache must not have: a cached importer still running
 * the old code of a module it imports after that module was edited. */
START_TEST(edited_import_invalidates_importer)
{
    write_text("helper.kern", "fn scale(x: f64) -> f64 {\n    return x * 2.0;\n}\n");
    write_text("main.kern", "import helper;\n@vectorize\nfn g(x: f64) -> f64 {\n"
                            "    return scale(x) + 1.0;\n}\n");
    char main_path[512];
    snprintf(main_path, sizeof main_path, "%s/main.kern", cache_dir);
    for (int round = 0; round < 3; round++) {
        if (round == 2)
            write_text("helper.kern", "fn scale(x: f64) -> f64 {\n    return x * 3.0;\n}\n");
        kj_cache_memory_clear();
        KjCacheCounters before = kj_cache_counters();
        kjit_context *context = make_context(3);
        kjit_module *module;
        ck_assert_msg(kjit_compile_file(context, main_path, &module) == KJIT_OK, "%s",
                      kjit_last_error(context));
        check_results(context, module, "g", 1, round == 2 ? scaled_3 : scaled_2);
        kjit_module_free(module);
        kjit_context_destroy(context);
        KjCacheCounters after = kj_cache_counters();
        /* round 0 compiles, round 1 hits the disk, round 2 must compile again */
        ck_assert_uint_eq(after.compiles - before.compiles, round == 1 ? 0 : 1);
        ck_assert_uint_eq(after.disk_hits - before.disk_hits, round == 1 ? 1 : 0);
    }
}
END_TEST

START_TEST(changed_option_recompiles)
{
    run_string(add_source, add_twice, 3);
    kj_cache_memory_clear();
    KjCacheCounters before = kj_cache_counters();
    run_string(add_source, add_twice, 0);
    KjCacheCounters after = kj_cache_counters();
    ck_assert_uint_eq(after.compiles - before.compiles, 1);
    ck_assert_int_eq(count_files("", ".kjc"), 2);
    /* and each opt level now hits its own entry */
    kj_cache_memory_clear();
    before = kj_cache_counters();
    run_string(add_source, add_twice, 0);
    run_string(add_source, add_twice, 3);
    after = kj_cache_counters();
    ck_assert_uint_eq(after.compiles - before.compiles, 0);
    ck_assert_uint_eq(after.disk_hits - before.disk_hits, 2);
}
END_TEST

/* A key as api.c makes them, differing only in the target line. */
static void make_key(KjCacheKey *key, const char *target)
{
    memset(key, 0, sizeof *key);
    kj_cache_key_add(key, "build", "%s", kj_cache_build_identity());
    kj_cache_key_add(key, "source", "%016llx", 0x1234ull);
    kj_cache_key_add(key, "symbol", "%s", "f__v0c");
    kj_cache_key_add(key, "target", "%s", target);
    kj_cache_key_finish(key);
}

START_TEST(changed_target_misses)
{
    KjCacheKey cpu_a, cpu_b, cuda;
    make_key(&cpu_a, "cpu znver4 +avx512f");
    make_key(&cpu_b, "cpu skylake +avx2");
    make_key(&cuda, "cuda sm_90");
    const char payload[] = "object bytes for one machine";
    ck_assert(kj_cache_store(&cpu_a, KJ_CACHE_CPU_OBJECT, payload, sizeof payload, NULL));
    void *data;
    size_t size;
    ck_assert(!kj_cache_load(&cpu_b, KJ_CACHE_CPU_OBJECT, &data, &size, NULL));
    ck_assert(!kj_cache_load(&cuda, KJ_CACHE_PTX, &data, &size, NULL));
    /* the same key of another kind of payload is a miss too */
    ck_assert(!kj_cache_load(&cpu_a, KJ_CACHE_PTX, &data, &size, NULL));
    ck_assert(kj_cache_load(&cpu_a, KJ_CACHE_CPU_OBJECT, &data, &size, NULL));
    ck_assert_uint_eq(size, sizeof payload);
    ck_assert_mem_eq(data, payload, size);
    free(data);
    kj_cache_key_free(&cpu_a);
    kj_cache_key_free(&cpu_b);
    kj_cache_key_free(&cuda);
}
END_TEST

/* ------------------------------------------------------------- corruption */

typedef enum { TRUNCATE_HEADER, TRUNCATE_PAYLOAD, FLIP_PAYLOAD, FLIP_KEY, GARBAGE, WRONG_FORMAT,
               EMPTY, DAMAGE_COUNT } Damage;

static void damage(const char *path, Damage how)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    unsigned char byte;
    switch (how) {
    case TRUNCATE_HEADER: ck_assert_int_eq(ftruncate(fd, 20), 0); break;
    case TRUNCATE_PAYLOAD: ck_assert_int_eq(ftruncate(fd, st.st_size - 7), 0); break;
    case FLIP_PAYLOAD:
    case FLIP_KEY: {
        off_t at = how == FLIP_PAYLOAD ? st.st_size - 100 : KJ_CACHE_HEADER_BYTES + 4;
        ck_assert_int_eq(pread(fd, &byte, 1, at), 1);
        byte ^= 0x40;
        ck_assert_int_eq(pwrite(fd, &byte, 1, at), 1);
        break;
    }
    case GARBAGE: {
        ck_assert_int_eq(ftruncate(fd, 0), 0);
        unsigned char junk[4096];
        for (size_t i = 0; i < sizeof junk; i++)
            junk[i] = (unsigned char)(uniform(0, 256));
        ck_assert_int_eq(pwrite(fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
        break;
    }
    case WRONG_FORMAT: {
        uint32_t format = KJ_CACHE_FORMAT + 1;
        ck_assert_int_eq(pwrite(fd, &format, 4, 8), 4);
        break;
    }
    case EMPTY: ck_assert_int_eq(ftruncate(fd, 0), 0); break;
    case DAMAGE_COUNT: break;
    }
    close(fd);
}

START_TEST(damaged_entry_is_recompiled)
{
    Damage how = (Damage)_i;
    run_string(add_source, add_twice, 3);
    char path[512];
    only_entry(path, sizeof path);
    damage(path, how);
    kj_cache_memory_clear();
    KjCacheCounters before = kj_cache_counters();
    run_string(add_source, add_twice, 3);
    KjCacheCounters after = kj_cache_counters();
    ck_assert_uint_eq(after.disk_hits - before.disk_hits, 0);
    ck_assert_uint_eq(after.disk_rejected - before.disk_rejected, 1);
    ck_assert_uint_eq(after.compiles - before.compiles, 1);
    /* replaced by a good entry: the next new process hits it */
    kj_cache_memory_clear();
    before = kj_cache_counters();
    run_string(add_source, add_twice, 3);
    after = kj_cache_counters();
    ck_assert_uint_eq(after.disk_hits - before.disk_hits, 1);
    ck_assert_uint_eq(after.compiles - before.compiles, 0);
}
END_TEST

/* An intact entry stored under another key's file name (a hash collision,
 * or a file copied in from elsewhere) is not loaded. */
START_TEST(foreign_entry_is_rejected)
{
    KjCacheKey mine, other;
    make_key(&mine, "cpu mine");
    make_key(&other, "cpu other");
    ck_assert(kj_cache_store(&other, KJ_CACHE_CPU_OBJECT, "theirs", 6, NULL));
    char from[512], to[512];
    kj_cache_entry_path(cache_dir, &other, KJ_CACHE_CPU_OBJECT, from, sizeof from);
    kj_cache_entry_path(cache_dir, &mine, KJ_CACHE_CPU_OBJECT, to, sizeof to);
    ck_assert_int_eq(rename(from, to), 0);
    void *data;
    size_t size;
    KjCacheCounters before = kj_cache_counters();
    ck_assert(!kj_cache_load(&mine, KJ_CACHE_CPU_OBJECT, &data, &size, NULL));
    ck_assert_uint_eq(kj_cache_counters().disk_rejected - before.disk_rejected, 1);
    ck_assert_int_ne(access(to, F_OK), 0); /* deleted */
    kj_cache_key_free(&mine);
    kj_cache_key_free(&other);
}
END_TEST

/* ------------------------------------------------------------ concurrency */

START_TEST(many_processes_one_cache)
{
    enum { PROCESSES = 6 };
    static const char source[] = "@vectorize\nfn f(x: f64, y: f64) -> f64 {\n"
                                 "    return sin(x);\n}\n";
    pid_t children[PROCESSES];
    for (int p = 0; p < PROCESSES; p++) {
        children[p] = fork();
        ck_assert_int_ge(children[p], 0);
        if (children[p] == 0) {
            /* Each child compiles (or finds) the code and checks it; a failed
             * check exits non-zero through Check's own assertion. */
            rng += (uint64_t)p * 7919;
            run_string(source, sine, 3);
            run_string(source, sine, 3);
            _exit(0);
        }
    }
    for (int p = 0; p < PROCESSES; p++) {
        int status;
        ck_assert_int_eq(waitpid(children[p], &status, 0), children[p]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "process %d failed (status %d)", p, status);
    }
    ck_assert_int_eq(count_files(".tmp-", ""), 0);
    ck_assert_int_eq(count_files("", ".kjc"), 1);
    /* and the entry they left is whole */
    kj_cache_memory_clear();
    KjCacheCounters before = kj_cache_counters();
    run_string(source, sine, 3);
    ck_assert_uint_eq(kj_cache_counters().disk_hits - before.disk_hits, 1);
}
END_TEST

/* --------------------------------------------------------------- eviction */

static void store_payload(const char *target, size_t bytes)
{
    KjCacheKey key;
    make_key(&key, target);
    char *payload = calloc(1, bytes);
    ck_assert(kj_cache_store(&key, KJ_CACHE_CPU_OBJECT, payload, bytes, NULL));
    free(payload);
    kj_cache_key_free(&key);
}

static bool present(const char *target)
{
    KjCacheKey key;
    make_key(&key, target);
    char path[512];
    kj_cache_entry_path(cache_dir, &key, KJ_CACHE_CPU_OBJECT, path, sizeof path);
    kj_cache_key_free(&key);
    return access(path, F_OK) == 0;
}

static void age(const char *target, int seconds_ago)
{
    KjCacheKey key;
    make_key(&key, target);
    char path[512];
    kj_cache_entry_path(cache_dir, &key, KJ_CACHE_CPU_OBJECT, path, sizeof path);
    kj_cache_key_free(&key);
    struct timespec times[2];
    clock_gettime(CLOCK_REALTIME, &times[0]);
    times[0].tv_sec -= seconds_ago;
    times[1] = times[0];
    ck_assert_int_eq(utimensat(AT_FDCWD, path, times, 0), 0);
}

START_TEST(least_recently_used_evicted)
{
    /* Room for two entries of 10 kB (each has a header and a key too). */
    setenv("KJIT_CACHE_MAX", "25K", 1);
    store_payload("cpu a", 10000);
    age("cpu a", 30);
    store_payload("cpu b", 10000);
    age("cpu b", 20);
    /* a hit makes `a` the young one */
    KjCacheKey key;
    make_key(&key, "cpu a");
    void *data;
    size_t size;
    ck_assert(kj_cache_load(&key, KJ_CACHE_CPU_OBJECT, &data, &size, NULL));
    free(data);
    kj_cache_key_free(&key);
    KjCacheCounters before = kj_cache_counters();
    store_payload("cpu c", 10000);
    ck_assert(present("cpu a"));
    ck_assert(!present("cpu b"));
    ck_assert(present("cpu c"));
    ck_assert_uint_eq(kj_cache_counters().evictions - before.evictions, 1);

    /* compiled code under a limit smaller than any entry: the folder stays
     * within it and the code still runs */
    setenv("KJIT_CACHE_MAX", "1", 1);
    run_string(add_source, add_twice, 3);
    ck_assert_int_eq(count_files("", ".kjc"), 0);
}
END_TEST

START_TEST(cache_off_writes_nothing)
{
    setenv("KJIT_CACHE", "off", 1);
    run_string(add_source, add_twice, 3);
    ck_assert_int_eq(count_files("", ".kjc"), 0);
    /* on again, in a new process */
    unsetenv("KJIT_CACHE");
    kj_cache_memory_clear();
    run_string(add_source, add_twice, 3);
    ck_assert_int_eq(count_files("", ".kjc"), 1);
}
END_TEST

typedef struct Tally {
    int valid, invalid;
} Tally;

static void tally_entry(void *user, const KjCacheEntryInfo *entry)
{
    Tally *tally = user;
    if (entry->valid) {
        tally->valid++;
        ck_assert_int_eq(entry->kind, KJ_CACHE_CPU_OBJECT);
        ck_assert_ptr_nonnull(strstr(entry->key_text, "symbol=f__"));
    } else {
        tally->invalid++;
    }
}

START_TEST(sizes_and_listing)
{
    uint64_t bytes;
    ck_assert(kj_cache_parse_size("100", &bytes) && bytes == 100);
    ck_assert(kj_cache_parse_size("4K", &bytes) && bytes == 4096);
    ck_assert(kj_cache_parse_size("2M", &bytes) && bytes == 2u << 20);
    ck_assert(kj_cache_parse_size("1.5G", &bytes) && bytes == 3ull << 29);
    ck_assert(kj_cache_parse_size("3GiB", &bytes) && bytes == 3ull << 30);
    ck_assert(!kj_cache_parse_size("lots", &bytes));
    ck_assert(!kj_cache_parse_size("5X", &bytes));
    ck_assert(!kj_cache_parse_size("", &bytes));

    run_string(add_source, add_twice, 3);
    write_text("junk.kjc", "not an entry");
    Tally tally = {0, 0};
    ck_assert_int_eq(kj_cache_list(cache_dir, tally_entry, &tally), 2);
    ck_assert_int_eq(tally.valid, 1);
    ck_assert_int_eq(tally.invalid, 1);
    /* clear removes kjit's entry, not a file it did not write */
    ck_assert_int_eq(kj_cache_clear(cache_dir), 1);
    ck_assert_int_eq(count_files("", ".kjc"), 1);
}
END_TEST

/* ====================================================== planted entries
 *
 * Issue 23, item 1: another local user must not get code run through the
 * victim's cache.  Another user's folder cannot be had without root; the
 * tests run as root (CI), so chown to an unused uid plays the other user.
 * Each attack leaves the compile working and the results right, with a
 * warning, and nothing from the planted file ever runs.
 */

#define OTHER_UID 12345

static bool can_chown(void)
{
    if (geteuid() == 0)
        return true;
    fprintf(stderr, "test_cache: not root, so another user's files cannot be played: skipped\n");
    return false;
}

static void chown_path(const char *path)
{
    ck_assert_msg(lchown(path, OTHER_UID, OTHER_UID) == 0, "chown %s", path);
}

/* The bytes of a file (heap) and their count. */
static unsigned char *read_whole(const char *path, size_t *size)
{
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    unsigned char *data = malloc((size_t)st.st_size + 1);
    ck_assert(kj_fd_read_all(fd, data, (size_t)st.st_size));
    close(fd);
    *size = (size_t)st.st_size;
    return data;
}

static void write_whole(const char *path, const void *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert(kj_fd_write_all(fd, data, size));
    close(fd);
}

/* A new process compiles add_source: it must compile (no disk hit), get
 * the right results, and warn with `part` (unless NULL). */
static void expect_refused(const char *part)
{
    kj_cache_memory_clear();
    kj_buf_free(&warnings);
    KjCacheCounters before = kj_cache_counters();
    run_string(add_source, add_twice, 3);
    KjCacheCounters after = kj_cache_counters();
    ck_assert_uint_eq(after.disk_hits - before.disk_hits, 0);
    ck_assert_uint_eq(after.compiles - before.compiles, 1);
    if (part)
        expect_warning(part);
}

/* A new process compiles add_source and finds it on disk. */
static void expect_hit(void)
{
    kj_cache_memory_clear();
    KjCacheCounters before = kj_cache_counters();
    run_string(add_source, add_twice, 3);
    KjCacheCounters after = kj_cache_counters();
    ck_assert_uint_eq(after.disk_hits - before.disk_hits, 1);
    ck_assert_uint_eq(after.compiles - before.compiles, 0);
}

START_TEST(second_run_hits)
{
    /* The checks below cost no hit: a normal second run still loads. */
    run_string(add_source, add_twice, 3);
    expect_hit();
    expect_hit();
    ck_assert_ptr_null(warnings.data);
}
END_TEST

/* A folder another user made first (/tmp/kjit-cache, or wherever
 * KJIT_CACHE_DIR points): even a perfectly formed entry with a MAC under the
 * folder's own secret is not loaded, since that user holds the secret too. */
START_TEST(folder_of_another_user_is_not_used)
{
    if (!can_chown())
        return;
    run_string(add_source, add_twice, 3);
    char entry[512], secret[512];
    only_entry(entry, sizeof entry);
    snprintf(secret, sizeof secret, "%s/.kjit-secret", cache_dir);
    /* the folder alone (the secret inside it would be refused too) */
    chown_path(cache_dir);
    expect_refused("is owned by uid 12345, not by you");
    chown_path(entry);
    chown_path(secret);
    expect_refused(NULL); /* the same warning: given once */
    /* nothing written there either */
    ck_assert_int_eq(count_files("", ".kjc"), 1);
    ck_assert_int_eq(count_files(".tmp-", ""), 0);
}
END_TEST

static const unsigned unsafe_modes[] = {0770, 0707, 0777, 0720, 0702, 01777};

START_TEST(folder_writable_by_others_is_not_used)
{
    run_string(add_source, add_twice, 3);
    ck_assert_int_eq(chmod(cache_dir, unsafe_modes[_i]), 0);
    expect_refused("is writable by its group or by others");
    ck_assert_int_eq(chmod(cache_dir, 0700), 0);
    expect_hit();
}
END_TEST

/* The folders above the cache: another user's, writable by others and not
 * sticky, or sticky but another user's, are refused; root's sticky (/tmp) is
 * fine. */
static const struct {
    unsigned mode;
    bool other_owner, usable;
    const char *why;
} parents[] = {
    {0755, true, false, "is owned by uid 12345, neither you"},
    {0777, false, false, "is writable by its group or by others and not sticky"},
    {0775, false, false, "is writable by its group or by others and not sticky"},
    {01777, true, false, "is owned by uid 12345, neither you"},
    {01777, false, true, NULL},
    {0755, false, true, NULL},
};

START_TEST(folder_above_is_checked)
{
    if (parents[_i].other_owner && !can_chown())
        return;
    char parent[300], dir[400];
    snprintf(parent, sizeof parent, "%s/parent", cache_dir);
    snprintf(dir, sizeof dir, "%s/cache", parent);
    ck_assert_int_eq(mkdir(parent, 0755), 0);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    setenv("KJIT_CACHE_DIR", dir, 1);
    run_string(add_source, add_twice, 3);
    ck_assert_int_eq(chmod(parent, parents[_i].mode), 0);
    if (parents[_i].other_owner)
        chown_path(parent);
    if (parents[_i].usable) {
        expect_hit();
    } else {
        expect_refused(parents[_i].why);
        expect_warning(parent);
    }
}
END_TEST

START_TEST(folder_is_made_private)
{
    char dir[400], secret[500];
    snprintf(dir, sizeof dir, "%s/new/deeper/cache", cache_dir);
    setenv("KJIT_CACHE_DIR", dir, 1);
    umask(0);
    run_string(add_source, add_twice, 3);
    umask(022);
    const char *made[] = {"new", "new/deeper", "new/deeper/cache"};
    for (int i = 0; i < 3; i++) {
        char path[500];
        snprintf(path, sizeof path, "%s/%s", cache_dir, made[i]);
        struct stat st;
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_msg((st.st_mode & 07777) == 0700, "%s has mode %04o", path, st.st_mode & 07777);
    }
    /* the secret: 32 bytes only the user can read */
    snprintf(secret, sizeof secret, "%s/.kjit-secret", dir);
    struct stat st;
    ck_assert_int_eq(lstat(secret, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ck_assert_int_eq(st.st_size, KJ_CACHE_SECRET_BYTES);
    ck_assert_int_eq(st.st_uid, geteuid());
    expect_hit();
}
END_TEST

/* KJIT_CACHE_DIR through a symbolic link: the user's own links are followed,
 * and what they lead to is what is checked. */
START_TEST(folder_through_a_link)
{
    char real[400], link[400];
    snprintf(real, sizeof real, "%s/real", cache_dir);
    snprintf(link, sizeof link, "%s/link", cache_dir);
    ck_assert_int_eq(mkdir(real, 0700), 0);
    ck_assert_int_eq(symlink(real, link), 0);
    setenv("KJIT_CACHE_DIR", link, 1);
    run_string(add_source, add_twice, 3);
    expect_hit();
    if (!can_chown())
        return;
    chown_path(real);
    expect_refused("is owned by uid 12345, not by you");
}
END_TEST

/* One warning per refused folder, not one per compile. */
START_TEST(refused_folder_warns_once)
{
    ck_assert_int_eq(chmod(cache_dir, 0777), 0);
    run_string(add_source, add_twice, 3);
    run_string(sub_source, sub_twice, 3);
    expect_warning("kjit: warning:");
    const char *first = strstr(warnings.data, "kjit: warning:");
    ck_assert_ptr_nonnull(first);
    ck_assert_ptr_null(strstr(first + 1, "kjit: warning:"));
}
END_TEST

START_TEST(linked_entry_is_not_followed)
{
    run_string(add_source, add_twice, 3);
    char entry[512], elsewhere[300], target[400];
    only_entry(entry, sizeof entry);
    snprintf(elsewhere, sizeof elsewhere, "/tmp/kjit-cache-elsewhere-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(elsewhere));
    snprintf(target, sizeof target, "%s/planted.kjc", elsewhere);
    size_t size;
    unsigned char *bytes = read_whole(entry, &size);
    write_whole(target, bytes, size);
    ck_assert_int_eq(unlink(entry), 0);
    ck_assert_int_eq(symlink(target, entry), 0);
    expect_refused("symbolic link");
    /* replaced by a regular entry; the link's target untouched */
    struct stat st;
    ck_assert_int_eq(lstat(entry, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    size_t after_size;
    unsigned char *after = read_whole(target, &after_size);
    ck_assert_uint_eq(after_size, size);
    ck_assert_mem_eq(after, bytes, size);
    free(after);
    free(bytes);
    ck_assert_int_eq(unlink(target), 0);
    ck_assert_int_eq(rmdir(elsewhere), 0);
    expect_hit();
}
END_TEST

/* A FIFO under an entry's name blocked `kjit run` forever: now it is refused
 * without being opened (this test case's timeout fails a hang), and listing
 * or clearing the folder does not hang on it either. */
START_TEST(fifo_entry_does_not_block)
{
    run_string(add_source, add_twice, 3);
    char entry[512];
    only_entry(entry, sizeof entry);
    ck_assert_int_eq(unlink(entry), 0);
    ck_assert_int_eq(mkfifo(entry, 0600), 0);
    Tally tally = {0, 0};
    ck_assert_int_eq(kj_cache_list(cache_dir, tally_entry, &tally), 1);
    ck_assert_int_eq(tally.invalid, 1);
    expect_refused("a FIFO");
    struct stat st;
    ck_assert_int_eq(lstat(entry, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    expect_hit();
    /* not kjit's: clear leaves it */
    ck_assert_int_eq(unlink(entry), 0);
    ck_assert_int_eq(mkfifo(entry, 0600), 0);
    ck_assert_int_eq(kj_cache_clear(cache_dir), 0);
    ck_assert_int_eq(lstat(entry, &st), 0);
    ck_assert(S_ISFIFO(st.st_mode));
}
END_TEST

START_TEST(entry_of_another_user_is_refused)
{
    if (!can_chown())
        return;
    run_string(add_source, add_twice, 3);
    char entry[512];
    only_entry(entry, sizeof entry);
    chown_path(entry);
    expect_refused("is owned by uid 12345, not by you");
    expect_hit();
}
END_TEST

START_TEST(entry_writable_by_others_is_refused)
{
    run_string(add_source, add_twice, 3);
    char entry[512];
    only_entry(entry, sizeof entry);
    ck_assert_int_eq(chmod(entry, 0666), 0);
    expect_refused("is writable by its group or by others");
    expect_hit();
}
END_TEST

/* One byte changed anywhere the MAC covers: the header, the key, the payload,
 * the MAC itself. */
static const off_t tampered_at[] = {20 /* reserved */, KJ_CACHE_MAC_OFFSET + 5, KJ_CACHE_HEADER_BYTES + 2, -1,
                                    -300};

START_TEST(tampered_entry_is_refused)
{
    run_string(add_source, add_twice, 3);
    char entry[512];
    only_entry(entry, sizeof entry);
    size_t size;
    unsigned char *bytes = read_whole(entry, &size);
    off_t at = tampered_at[_i] >= 0 ? tampered_at[_i] : (off_t)size + tampered_at[_i];
    bytes[at] ^= 0x01;
    write_whole(entry, bytes, size);
    free(bytes);
    expect_refused("its MAC does not match");
    expect_hit();
}
END_TEST

/* A planted entry with a well-formed header and no MAC: zeros where the MAC
 * goes, or the layout of format 1 (unkeyed FNV-1a checksums, which anyone
 * can compute). */
START_TEST(entry_without_mac_is_refused)
{
    run_string(add_source, add_twice, 3);
    char entry[512];
    only_entry(entry, sizeof entry);
    size_t size;
    unsigned char *bytes = read_whole(entry, &size);
    if (_i == 0) {
        memset(bytes + KJ_CACHE_MAC_OFFSET, 0, KJ_SHA256_BYTES);
        write_whole(entry, bytes, size);
        expect_refused("its MAC does not match");
    } else {
        uint32_t key_size;
        uint64_t payload_size;
        memcpy(&key_size, bytes + 16, 4);
        memcpy(&payload_size, bytes + 24, 8);
        const unsigned char *key = bytes + KJ_CACHE_HEADER_BYTES, *payload = key + key_size;
        unsigned char old[48];
        memcpy(old, bytes, 32);
        uint32_t format = 1;
        memcpy(old + 8, &format, 4);
        uint64_t payload_sum = kj_hash_bytes(0, payload, payload_size), key_sum = kj_hash_bytes(0, key, key_size);
        memcpy(old + 32, &payload_sum, 8);
        memcpy(old + 40, &key_sum, 8);
        int fd = open(entry, O_WRONLY | O_TRUNC);
        ck_assert(kj_fd_write_all(fd, old, sizeof old) && kj_fd_write_all(fd, key, key_size) &&
                  kj_fd_write_all(fd, payload, payload_size));
        close(fd);
        expect_refused("not a whole cache entry of this kjit's format");
    }
    free(bytes);
    expect_hit();
}
END_TEST

/* The attack itself: another function's machine code planted under add's
 * key.  With a MAC under the folder's secret it would run (which shows the
 * forgery is well formed and the secret is all that stops it); with any
 * other key it is refused and add's own code runs. */
static void forge(const char *entry, const unsigned char *add_entry, const unsigned char *sub_entry,
                  const uint8_t secret[KJ_CACHE_SECRET_BYTES])
{
    uint32_t key_size;
    uint64_t payload_size;
    memcpy(&key_size, add_entry + 16, 4);
    memcpy(&payload_size, sub_entry + 24, 8);
    uint32_t sub_key_size;
    memcpy(&sub_key_size, sub_entry + 16, 4);
    const unsigned char *key = add_entry + KJ_CACHE_HEADER_BYTES;
    const unsigned char *payload = sub_entry + KJ_CACHE_HEADER_BYTES + sub_key_size;
    unsigned char header[KJ_CACHE_HEADER_BYTES];
    memcpy(header, add_entry, KJ_CACHE_MAC_OFFSET);
    memcpy(header + 24, &payload_size, 8);
    KjHmacSha256 hmac;
    kj_hmac_sha256_init(&hmac, secret, KJ_CACHE_SECRET_BYTES);
    kj_hmac_sha256_update(&hmac, header, KJ_CACHE_MAC_OFFSET);
    kj_hmac_sha256_update(&hmac, key, key_size);
    kj_hmac_sha256_update(&hmac, payload, payload_size);
    kj_hmac_sha256_final(&hmac, header + KJ_CACHE_MAC_OFFSET);
    int fd = open(entry, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert(kj_fd_write_all(fd, header, sizeof header) && kj_fd_write_all(fd, key, key_size) &&
              kj_fd_write_all(fd, payload, payload_size));
    close(fd);
}

START_TEST(planted_code_never_runs)
{
    char sub_entry[512], add_entry[512], secret_path[400];
    run_string(sub_source, sub_twice, 3);
    only_entry(sub_entry, sizeof sub_entry);
    size_t size;
    unsigned char *sub_bytes = read_whole(sub_entry, &size);
    ck_assert_int_eq(unlink(sub_entry), 0);
    run_string(add_source, add_twice, 3);
    only_entry(add_entry, sizeof add_entry);
    unsigned char *add_bytes = read_whole(add_entry, &size);
    snprintf(secret_path, sizeof secret_path, "%s/.kjit-secret", cache_dir);
    unsigned char *secret = read_whole(secret_path, &size);
    ck_assert_uint_eq(size, KJ_CACHE_SECRET_BYTES);

    forge(add_entry, add_bytes, sub_bytes, secret);
    kj_cache_memory_clear();
    run_string(add_source, sub_twice, 3); /* sub's code ran for add */

    uint8_t guess[KJ_CACHE_SECRET_BYTES];
    memcpy(guess, secret, sizeof guess);
    guess[7] ^= 0x10;
    forge(add_entry, add_bytes, sub_bytes, guess);
    expect_refused("its MAC does not match");
    expect_hit();
    free(secret);
    free(add_bytes);
    free(sub_bytes);
}
END_TEST

/* The secret: refused (and with it the folder) unless it is a 0600 regular
 * file of the user's, 32 bytes long. */
START_TEST(secret_is_checked)
{
    run_string(add_source, add_twice, 3);
    char secret[400], elsewhere[400];
    snprintf(secret, sizeof secret, "%s/.kjit-secret", cache_dir);
    snprintf(elsewhere, sizeof elsewhere, "%s/stolen", cache_dir);
    switch (_i) {
    case 0:
        ck_assert_int_eq(chmod(secret, 0644), 0);
        expect_refused("can be read or written by others");
        break;
    case 1:
        ck_assert_int_eq(rename(secret, elsewhere), 0);
        ck_assert_int_eq(symlink(elsewhere, secret), 0);
        expect_refused("is a symbolic link");
        break;
    case 2:
        ck_assert_int_eq(truncate(secret, 16), 0);
        expect_refused("is not 32 bytes long");
        break;
    case 3:
        if (!can_chown())
            return;
        chown_path(secret);
        expect_refused("is owned by uid 12345");
        break;
    }
    /* and once the user removes it, a new one is made with the next entry */
    ck_assert_int_eq(unlink(secret), 0);
    expect_refused(NULL);
    expect_hit();
}
END_TEST

/* ================================================ KJIT_CACHE_MAX, clear */

START_TEST(cache_max_must_be_a_size)
{
    uint64_t bytes;
    const char *bad[] = {"1e30", "inf", "nan", "-1", " 5", "0x10", "1e3", "99999999999999999999",
                         "2000T", "1025T", "5 G", "1.5.5G", "G"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(!kj_cache_parse_size(bad[i], &bytes), "'%s' was taken as %llu", bad[i],
                      (unsigned long long)bytes);
    ck_assert(kj_cache_parse_size("1024T", &bytes) && bytes == KJ_CACHE_MAX_LIMIT);
    ck_assert(kj_cache_parse_size("0", &bytes) && bytes == 0);
    ck_assert(kj_cache_parse_size("18KB", &bytes) && bytes == 18 << 10);

    for (int i = 0; i < 3; i++) {
        kj_buf_free(&warnings);
        setenv("KJIT_CACHE_MAX", bad[i], 1);
        ck_assert_uint_eq(kj_cache_max_bytes(&test_warn), 1ull << 30);
        expect_warning("KJIT_CACHE_MAX=");
        expect_warning(bad[i]);
        char *check = kj_cache_check(cache_dir);
        ck_assert_ptr_nonnull(check);
        ck_assert_ptr_nonnull(strstr(check, "is not a size"));
        free(check);
    }
    /* and the cache keeps its default limit: nothing is evicted */
    setenv("KJIT_CACHE_MAX", "inf", 1);
    store_payload("cpu a", 10000);
    store_payload("cpu b", 10000);
    ck_assert(present("cpu a") && present("cpu b"));
    unsetenv("KJIT_CACHE_MAX");
    ck_assert_ptr_null(kj_cache_check(cache_dir));
}
END_TEST

/* A store lists the folder (to evict) only when it may be over the limit:
 * its process's first store there, a sixteenth of the limit stored since the
 * last listing, or past the limit by what the process knows; listing a large
 * folder at every store made each store cost the folder's size. */
START_TEST(folder_listed_when_it_may_be_full)
{
    KjCacheCounters before = kj_cache_counters();
    store_payload("cpu a", 1000);
    store_payload("cpu b", 1000);
    store_payload("cpu c", 1000);
    ck_assert_uint_eq(kj_cache_counters().listings - before.listings, 1);
    /* a limit of 32 kB: a sixteenth is 2 kB, so each 3 kB store lists */
    setenv("KJIT_CACHE_MAX", "32K", 1);
    before = kj_cache_counters();
    store_payload("cpu d", 3000);
    store_payload("cpu e", 3000);
    ck_assert_uint_eq(kj_cache_counters().listings - before.listings, 2);
    /* another folder is listed at its first store */
    unsetenv("KJIT_CACHE_MAX");
    char other[300];
    snprintf(other, sizeof other, "%s/other", cache_dir);
    ck_assert_int_eq(mkdir(other, 0700), 0);
    setenv("KJIT_CACHE_DIR", other, 1);
    before = kj_cache_counters();
    store_payload("cpu f", 1000);
    store_payload("cpu g", 1000);
    ck_assert_uint_eq(kj_cache_counters().listings - before.listings, 1);
    setenv("KJIT_CACHE_DIR", cache_dir, 1);
}
END_TEST

/* KJIT_CACHE_DIR pointed at a folder of other things: clear and eviction
 * remove only what kjit wrote. */
START_TEST(clear_removes_only_kjit_entries)
{
    run_string(add_source, add_twice, 3);
    run_string(sub_source, sub_twice, 3);
    char entry[512];
    /* kjit's temporary file, left by a process that died */
    write_text(".tmp-0123456789abcdef-1-0", "KJITCACH and the rest");
    /* files kjit did not write, some under its names */
    write_text("notes.kjc", "mine");
    write_text("0123456789abcdef0123456789abcdef-cpu-object.kjc", "looks like an entry, is not");
    write_text(".tmp-0123456789abcdef-2-0", "somebody else's");
    write_text("thesis.tex", "\\documentclass{article}");
    snprintf(entry, sizeof entry, "%s/fedcba9876543210fedcba9876543210-ptx.kjc", cache_dir);
    ck_assert_int_eq(mkfifo(entry, 0600), 0);
    /* a link under an entry's name to a kjit entry elsewhere: the link is not
     * kjit's, and what it points to is not in this folder */
    char elsewhere[300], target[400], link[400];
    snprintf(elsewhere, sizeof elsewhere, "/tmp/kjit-cache-elsewhere-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(elsewhere));
    snprintf(target, sizeof target, "%s/kept.kjc", elsewhere);
    write_whole(target, "KJITCACH", 8);
    snprintf(link, sizeof link, "%s/00000000000000000000000000000000-cubin.kjc", cache_dir);
    ck_assert_int_eq(symlink(target, link), 0);

    ck_assert_int_eq(kj_cache_clear(cache_dir), 3); /* two entries, one temporary file */
    ck_assert_int_eq(count_files("", ".kjc"), 4);
    ck_assert_int_eq(count_files(".tmp-", ""), 1);
    ck_assert_int_eq(count_files("thesis", ""), 1);
    ck_assert_int_eq(count_files(".kjit-secret", ""), 0);
    ck_assert_int_eq(access(target, F_OK), 0);
    /* eviction under the smallest limit leaves them too */
    setenv("KJIT_CACHE_MAX", "1", 1);
    store_payload("cpu a", 100);
    ck_assert_int_eq(count_files("", ".kjc"), 4);
    ck_assert_int_eq(unlink(target), 0);
    ck_assert_int_eq(rmdir(elsewhere), 0);
}
END_TEST

Suite *suite_cache(void)
{
    Suite *suite = suite_create("cache");
    TCase *tc = tcase_create("cache");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, disk_miss_then_hit);
    tcase_add_test(tc, memory_shared_across_contexts);
    tcase_add_test(tc, edited_function_recompiles);
    tcase_add_test(tc, edited_import_invalidates_importer);
    tcase_add_test(tc, changed_option_recompiles);
    tcase_add_test(tc, changed_target_misses);
    tcase_add_loop_test(tc, damaged_entry_is_recompiled, 0, DAMAGE_COUNT);
    tcase_add_test(tc, foreign_entry_is_rejected);
    tcase_add_test(tc, many_processes_one_cache);
    tcase_add_test(tc, least_recently_used_evicted);
    tcase_add_test(tc, folder_listed_when_it_may_be_full);
    tcase_add_test(tc, cache_off_writes_nothing);
    tcase_add_test(tc, sizes_and_listing);
    tcase_add_test(tc, cache_max_must_be_a_size);
    tcase_add_test(tc, clear_removes_only_kjit_entries);
    suite_add_tcase(suite, tc);

    /* Issue 23, item 1; a short timeout: a FIFO must not hang the compile. */
    TCase *attacks = tcase_create("planted entries");
    tcase_add_checked_fixture(attacks, setup, teardown);
    tcase_set_timeout(attacks, 30);
    tcase_add_test(attacks, second_run_hits);
    tcase_add_test(attacks, folder_of_another_user_is_not_used);
    tcase_add_loop_test(attacks, folder_writable_by_others_is_not_used, 0,
                        (int)(sizeof unsafe_modes / sizeof *unsafe_modes));
    tcase_add_loop_test(attacks, folder_above_is_checked, 0, (int)(sizeof parents / sizeof *parents));
    tcase_add_test(attacks, folder_is_made_private);
    tcase_add_test(attacks, folder_through_a_link);
    tcase_add_test(attacks, refused_folder_warns_once);
    tcase_add_test(attacks, linked_entry_is_not_followed);
    tcase_add_test(attacks, fifo_entry_does_not_block);
    tcase_add_test(attacks, entry_of_another_user_is_refused);
    tcase_add_test(attacks, entry_writable_by_others_is_refused);
    tcase_add_loop_test(attacks, tampered_entry_is_refused, 0,
                        (int)(sizeof tampered_at / sizeof *tampered_at));
    tcase_add_loop_test(attacks, entry_without_mac_is_refused, 0, 2);
    tcase_add_test(attacks, planted_code_never_runs);
    tcase_add_loop_test(attacks, secret_is_checked, 0, 4);
    suite_add_tcase(suite, attacks);
    return suite;
}
