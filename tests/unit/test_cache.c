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

static void setup(void)
{
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
    ck_assert(kj_cache_store(&cpu_a, KJ_CACHE_CPU_OBJECT, payload, sizeof payload));
    void *data;
    size_t size;
    ck_assert(!kj_cache_load(&cpu_b, KJ_CACHE_CPU_OBJECT, &data, &size));
    ck_assert(!kj_cache_load(&cuda, KJ_CACHE_PTX, &data, &size));
    /* the same key of another kind of payload is a miss too */
    ck_assert(!kj_cache_load(&cpu_a, KJ_CACHE_PTX, &data, &size));
    ck_assert(kj_cache_load(&cpu_a, KJ_CACHE_CPU_OBJECT, &data, &size));
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
        off_t at = how == FLIP_PAYLOAD ? st.st_size - 100 : 60;
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
    ck_assert(kj_cache_store(&other, KJ_CACHE_CPU_OBJECT, "theirs", 6));
    char from[512], to[512];
    kj_cache_entry_path(cache_dir, &other, KJ_CACHE_CPU_OBJECT, from, sizeof from);
    kj_cache_entry_path(cache_dir, &mine, KJ_CACHE_CPU_OBJECT, to, sizeof to);
    ck_assert_int_eq(rename(from, to), 0);
    void *data;
    size_t size;
    KjCacheCounters before = kj_cache_counters();
    ck_assert(!kj_cache_load(&mine, KJ_CACHE_CPU_OBJECT, &data, &size));
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
    ck_assert(kj_cache_store(&key, KJ_CACHE_CPU_OBJECT, payload, bytes));
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
    ck_assert(kj_cache_load(&key, KJ_CACHE_CPU_OBJECT, &data, &size));
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
    ck_assert_int_eq(kj_cache_clear(cache_dir), 2);
    ck_assert_int_eq(count_files("", ".kjc"), 0);
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
    tcase_add_test(tc, cache_off_writes_nothing);
    tcase_add_test(tc, sizes_and_listing);
    suite_add_tcase(suite, tc);
    return suite;
}
