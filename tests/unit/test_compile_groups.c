/* A file's roots compiled in groups on several threads (codegen_groups.c,
 * elf_join.c, ptx.c's kj_ptx_join): the same bytes for any thread count,
 * a joined object that loads and runs, and clear refusals. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kjit_backend.h"
#include "kjit_runtime.h"
#include "kjit_tools.h"
#include "fixture.h"

#define FILE_OF_GROUPS "examples/reduce.kern" /* 19 groups on cpu */

static bool line_tables; /* kjit_stage_options.line_info of the next stage() */

static char *stage(const char *threads, kjit_stage stage, kjit_target target, const char *function,
                   size_t *size, kjit_status *status, char **error)
{
    if (threads)
        setenv("KJIT_COMPILE_THREADS", threads, 1);
    else
        unsetenv("KJIT_COMPILE_THREADS");
    kjit_stage_options options;
    kjit_stage_options_init(&options);
    options.target = target;
    options.function = function;
    options.line_info = line_tables;
    char *bytes = NULL;
    *error = NULL;
    *status = kjit_stage_file(FILE_OF_GROUPS, stage, &options, &bytes, size, error);
    unsetenv("KJIT_COMPILE_THREADS");
    return bytes;
}

static char *stage_ok(const char *threads, kjit_stage st, kjit_target target, size_t *size)
{
    kjit_status status;
    char *error;
    char *bytes = stage(threads, st, target, NULL, size, &status, &error);
    ck_assert_msg(status == KJIT_OK && bytes, "%s", error ? error : "?");
    free(error);
    return bytes;
}

/* The "kjit" file symbols of an object: one per group joined. */
static int file_symbols(const char *object, size_t size)
{
    int count = 0;
    const char needle[] = "kjit";
    for (size_t i = 0; i + sizeof needle <= size; i++)
        count += i > 0 && object[i - 1] == '\0' && memcmp(object + i, needle, sizeof needle) == 0;
    return count;
}

START_TEST(same_bytes_for_any_thread_count)
{
    size_t one = 0, four = 0, other = 0;
    char *a = stage_ok("1", KJIT_STAGE_OBJ, KJIT_TARGET_CPU, &one);
    char *b = stage_ok("4", KJIT_STAGE_OBJ, KJIT_TARGET_CPU, &four);
    char *c = stage_ok(NULL, KJIT_STAGE_OBJ, KJIT_TARGET_CPU, &other);
    ck_assert_uint_eq(one, four);
    ck_assert_uint_eq(one, other);
    ck_assert_msg(memcmp(a, b, one) == 0 && memcmp(a, c, one) == 0,
                  "the object differs between 1 and 4 threads");
    ck_assert_int_gt(file_symbols(a, one), 1); /* it was compiled in groups */
    free(a), free(b), free(c);

    char *error = NULL;
    if (!kj_find_libdevice(&error)) {
        free(error);
        return;
    }
    char *p = stage_ok("1", KJIT_STAGE_PTX, KJIT_TARGET_CUDA, &one);
    char *q = stage_ok("3", KJIT_STAGE_PTX, KJIT_TARGET_CUDA, &four);
    ck_assert_str_eq(p, q);
    int headers = 0;
    for (const char *s = strstr(p, ".address_size"); s; s = strstr(s + 1, ".address_size"))
        headers++;
    ck_assert_int_eq(headers, 1);
    free(p), free(q);
}
END_TEST

typedef void (*ScalarEntry)(void **args, void *result);

static double call2(KjCpuCode *code, const char *symbol, double x, double y)
{
    ScalarEntry f = (ScalarEntry)kj_cpu_lookup(code, symbol);
    ck_assert_msg(f != NULL, "%s is not in the joined object", symbol);
    void *args[] = {&x, &y};
    double r = 0;
    f(args, &r);
    return r;
}

/* The joined object links in kjit's own JIT and its functions, from the
 * first group to the last, run: without line tables (JITLink) and with
 * them (their DWARF sections joined; RuntimeDyld, cpu_jit.c). */
START_TEST(joined_object_runs)
{
    line_tables = _i == 1;
    size_t size = 0;
    char *object = stage_ok("2", KJIT_STAGE_OBJ, KJIT_TARGET_CPU, &size);
    char *error = NULL;
    KjCpuCode *code = kj_cpu_load_object(object, size, &error);
    ck_assert_msg(code != NULL, "%s", error ? error : "?");
    ck_assert(call2(code, "vsum__f64_f64__entry", 3, 4) == 7);
    ck_assert(call2(code, "vmax__f64_f64__entry", 3, 4) == 4);
    ck_assert(call2(code, "mul__f64_f64__entry", 3, 4) == 12);
    ck_assert(call2(code, "sumsq__f64_f64__entry", 2.5, 4) == 6.5);
    const char *kernels[] = {"vsum__f32_f32__rv01c__range", "vmax__i64_i64__rv11s__range",
                             "dot__f64_f64__rv11s__m_mul__f64_f64__range",
                             "sumsq__f64_f64__rv11s__m_square__f64__range"};
    for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++)
        ck_assert_msg(kj_cpu_lookup(code, kernels[i]) != NULL, "%s is missing", kernels[i]);
    kj_cpu_code_free(code);
    free(object);
    line_tables = false;
}
END_TEST

START_TEST(join_refuses_what_it_cannot_join)
{
    size_t size = 0, joined_size = 0;
    kjit_status status;
    char *error = NULL;
    char *one = stage("1", KJIT_STAGE_OBJ, KJIT_TARGET_CPU, "mul", &size, &status, &error);
    ck_assert_msg(status == KJIT_OK, "%s", error ? error : "?");
    /* the same functions twice: a global defined in two objects */
    char *twice[] = {one, one};
    size_t sizes[] = {size, size};
    char *joined = kj_elf_join(twice, sizes, 2, &joined_size, &error);
    ck_assert_ptr_null(joined);
    ck_assert_msg(error && strstr(error, "defines mul__f"), "unclear: %s", error ? error : "(none)");
    free(error);
    error = NULL;
    /* not an object */
    char text[] = "not an object, but long enough to be read as an ELF header of 64 bytes";
    char *bad[] = {one, text};
    size_t bad_sizes[] = {size, sizeof text};
    ck_assert_ptr_null(kj_elf_join(bad, bad_sizes, 2, &joined_size, &error));
    ck_assert_msg(error && strstr(error, "object 2 is not a relocatable"), "unclear: %s",
                  error ? error : "(none)");
    free(error);
    error = NULL;
    /* one object alone joins to a loadable copy */
    joined = kj_elf_join(&one, &size, 1, &joined_size, &error);
    ck_assert_msg(joined != NULL, "%s", error ? error : "?");
    KjCpuCode *code = kj_cpu_load_object(joined, joined_size, &error);
    ck_assert_msg(code != NULL, "%s", error ? error : "?");
    ck_assert(call2(code, "mul__f64_f64__entry", 3, 5) == 15);
    kj_cpu_code_free(code);
    free(joined);
    free(one);

    char *ptx[] = {".version 8.5\n.target sm_90\n.address_size 64\n\n.visible .entry a() { ret; }\n",
                   ".version 8.5\n.target sm_80\n.address_size 64\n\n.visible .entry b() { ret; }\n"};
    ck_assert_ptr_null(kj_ptx_join(ptx, 2, &error));
    ck_assert_msg(error && strstr(error, "header"), "unclear: %s", error ? error : "(none)");
    free(error);
    ptx[1] = ".version 8.5\n.target sm_90\n.address_size 64\n\n.visible .entry b() { ret; }\n";
    char *both = kj_ptx_join(ptx, 2, &error);
    ck_assert_str_eq(both, ".version 8.5\n.target sm_90\n.address_size 64\n\n.visible .entry a() "
                           "{ ret; }\n\n.visible .entry b() { ret; }\n");
    free(both);
}
END_TEST

START_TEST(thread_count_from_the_environment)
{
    const char *bad[] = {"0", "x", "2x", "-1", "65"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        size_t size = 0;
        kjit_status status;
        char *error = NULL;
        char *bytes = stage(bad[i], KJIT_STAGE_OBJ, KJIT_TARGET_CPU, NULL, &size, &status, &error);
        ck_assert_ptr_null(bytes);
        ck_assert_int_ne(status, KJIT_OK);
        ck_assert_msg(error && strstr(error, "KJIT_COMPILE_THREADS"), "%s: unclear: %s", bad[i],
                      error ? error : "(none)");
        free(error);
    }
    char *error = NULL;
    setenv("KJIT_COMPILE_THREADS", "7", 1);
    ck_assert_int_eq(kj_codegen_compile_threads(&error), 7);
    unsetenv("KJIT_COMPILE_THREADS");
    int n = kj_codegen_compile_threads(&error);
    ck_assert_int_ge(n, 1);
    ck_assert_int_le(n, KJ_COMPILE_THREADS_MAX);
}
END_TEST

/* Groups of PTX joined into one module that ptxas takes: every kernel
 * prints (a format string, an internal global, in every group) and calls a
 * device function too large to inline; without the later groups' names
 * suffixed both are defined twice. */
START_TEST(joined_ptx_assembles)
{
    char *error = NULL;
    if (!kj_find_libdevice(&error) || !kj_ptxas_path()) {
        free(error);
        printf("test_compile_groups: skipped joined_ptx_assembles: no libdevice or ptxas\n");
        return;
    }
    char source[8192];
    int used = snprintf(source, sizeof source, "%s",
                        "fn helper(x: f64, n: i32) -> f64 {\n"
                        "    let s = x;\n"
                        "    for j in range(n) {\n"
                        "        s = s * 1.5 + sin(s) * f64(j); if s > 1e9 { s = s - 1e9; }\n"
                        "    }\n"
                        "    return s;\n"
                        "}\n");
    for (int k = 0; k < 12; k++) {
        ck_assert_int_lt(used, (int)sizeof source);
        used += snprintf(source + used, sizeof source - used,
                         "@kernel\nfn k%d(a: f64[], n: i32) {\n    let i = grid(1);\n"
                         "    if i < len(a) {\n"
                         "        a[i] = helper(a[i], n + %d); print(\"k%d %%g\", a[i]);\n"
                         "    }\n}\n",
                         k, k, k);
    }
    ck_assert_int_lt(used, (int)sizeof source);
    char path[] = "/tmp/kjit-groups-XXXXXX.kern";
    fixture_temp_file(path, 5, source);
    setenv("KJIT_COMPILE_THREADS", "2", 1);
    kjit_stage_options options;
    kjit_stage_options_init(&options);
    options.target = KJIT_TARGET_CUDA;
    char *ptx = NULL;
    size_t size = 0;
    kjit_status status = kjit_stage_file(path, KJIT_STAGE_PTX, &options, &ptx, &size, &error);
    unsetenv("KJIT_COMPILE_THREADS");
    unlink(path);
    ck_assert_msg(status == KJIT_OK, "%s", error ? error : "?");
    ck_assert_msg(strstr(ptx, "__g1"), "the PTX has no second group's names");
    void *cubin = NULL;
    size_t cubin_size = 0;
    status = kj_ptxas_compile(ptx, "sm_90", &cubin, &cubin_size, &error);
    ck_assert_msg(status == KJIT_OK, "ptxas rejected the joined PTX: %s", error ? error : "?");
    free(cubin);
    free(ptx);
}
END_TEST

/* A group's failure is the compile's, as one module's would be. */
START_TEST(a_failing_group_is_the_error)
{
    char *error = NULL;
    if (!kj_find_libdevice(&error)) {
        free(error);
        return;
    }
    setenv("KJIT_COMPILE_THREADS", "3", 1);
    kjit_stage_options options;
    kjit_stage_options_init(&options);
    options.target = KJIT_TARGET_CUDA;
    options.cuda_arch = "sm_13";
    char *bytes = NULL;
    size_t size = 0;
    kjit_status status = kjit_stage_file(FILE_OF_GROUPS, KJIT_STAGE_PTX, &options, &bytes, &size,
                                         &error);
    unsetenv("KJIT_COMPILE_THREADS");
    ck_assert_int_eq(status, KJIT_ERROR_BACKEND);
    ck_assert_ptr_null(bytes);
    ck_assert_msg(error && strstr(error, "unknown CUDA architecture 'sm_13'"), "unclear: %s",
                  error ? error : "(none)");
    free(error);
}
END_TEST

Suite *suite_compile_groups(void)
{
    Suite *suite = suite_create("compile_groups");
    TCase *tcase = tcase_create("compile_groups");
    tcase_set_timeout(tcase, 240);
    tcase_add_test(tcase, same_bytes_for_any_thread_count);
    tcase_add_loop_test(tcase, joined_object_runs, 0, 2);
    tcase_add_test(tcase, join_refuses_what_it_cannot_join);
    tcase_add_test(tcase, thread_count_from_the_environment);
    tcase_add_test(tcase, a_failing_group_is_the_error);
    tcase_add_test(tcase, joined_ptx_assembles);
    suite_add_tcase(suite, tcase);
    return suite;
}
