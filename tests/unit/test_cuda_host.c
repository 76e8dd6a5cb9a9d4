/*
 * test_cuda_host.c: the driver calls of kjit's cuda calls, on the fake
 * driver of tests/cuda_host/fake_cuda.c (loaded through KJIT_CUDA_DRIVER, as
 * cuda_driver.c allows), so that they are checked on machines without a GPU.
 *
 * A call of a @vectorize function on device arrays with an output, a call on
 * a stream and a launch of a kernel on device arrays each make exactly one
 * cuLaunchKernel and no other driver call but cuCtxGetCurrent, once the
 * thread's current context is kjit's; when other code made another context
 * current, the next call makes kjit's current again (one cuCtxSetCurrent),
 * and so does a thread's first call.  The contexts are made as the Python
 * package makes its own (cancellable code, Ctrl-C cancels), and as C programs
 * make theirs.  KJIT_CUDA_DRIVER is refused where docs/security.md says.
 *
 * Each test runs in a process of its own (Check forks), which loads the
 * driver afresh; under CK_FORK=no the tests fail saying so.
 */
#include <check.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kjit.h"
#include "../cuda_host/diag_common.h"

#ifndef KJ_FAKE_CUDA
#error "KJ_FAKE_CUDA: the fake driver's path (tests/cuda_host/cuda_host.mk)"
#endif

typedef long (*count_fn)(const char *);
typedef void (*reset_fn)(void);
typedef void (*set_current_fn)(void *);
typedef const void *(*last_params_fn)(size_t *, int *);

static count_fn fake_count;
static reset_fn fake_reset;
static set_current_fn fake_set_current;
static last_params_fn fake_last_params;

static const char source[] = "@vectorize\nfn add(a: f32, b: f32) -> f32 {\n    return a + b;\n}\n"
                             "@vectorize\nfn axpb(x: f32, a: f32, b: f32) -> f32 {\n"
                             "    return a * x + b;\n}\n"
                             "@kernel\nfn fill(x: f32[], v: f32) {\n"
                             "    let i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                             "    if i < x.shape[0] { x[i] = v; }\n}\n";

/* The fake driver: where the build put it, else beside this program (the
 * GPU bundle's bin/); NULL when neither has it. */
static const char *fake_path(void)
{
    static char beside[4096];
    if (access(KJ_FAKE_CUDA, R_OK) == 0)
        return KJ_FAKE_CUDA;
    ssize_t n = readlink("/proc/self/exe", beside, sizeof beside - 64);
    if (n <= 0)
        return NULL;
    beside[n] = '\0';
    char *slash = strrchr(beside, '/');
    if (!slash)
        return NULL;
    strcpy(slash + 1, "libkjit-fakecuda.so");
    return access(beside, R_OK) == 0 ? beside : NULL;
}

/* The fake driver loaded as kjit's; fails the test when another was.  False
 * (the test skips, saying so) where the fake driver was not built: the
 * Makefile builds it beside the unit tests, so that is a copy elsewhere. */
static bool load_fake(const char *test)
{
    const char *path = fake_path();
    if (!path) {
        printf("%s: skipped: no fake CUDA driver at %s or beside this program\n", test,
               KJ_FAKE_CUDA);
        return false;
    }
    setenv("KJIT_CUDA_DRIVER", path, 1);
    char reason[512];
    ck_assert_msg(kjit_cuda_available(reason, sizeof reason) == KJIT_OK,
                  "the fake driver %s: %s", path, reason);
    void *handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    ck_assert_msg(handle, "kjit loaded another driver than %s (a test without a process of its "
                          "own: CK_FORK=no?)", path);
    fake_count = (count_fn)dlsym(handle, "kjit_fake_cuda_count");
    fake_reset = (reset_fn)dlsym(handle, "kjit_fake_cuda_reset");
    fake_set_current = (set_current_fn)dlsym(handle, "kjit_fake_cuda_set_current");
    fake_last_params = (last_params_fn)dlsym(handle, "kjit_fake_cuda_last_params");
    ck_assert(fake_count && fake_reset && fake_set_current && fake_last_params);
    return true;
}

/* Every driver call the fake counted (its own list, summed). */
static long all_calls(void)
{
    return fake_count(NULL);
}

/* The add's context, arrays and stream, as the host-cost tools make them
 * (tests/cuda_host/diag_common.h); the module's fill is what kjit_launch runs. */
typedef DiagAddSetup Setup;

static Setup open_setup_checked(bool as_python, bool checked)
{
    kjit_options options;
    diag_options(&options, KJIT_TARGET_CUDA, as_python); /* python/kjit/_core.py's options */
    options.check = checked;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    Setup s;
    const char *failed = "";
    kjit_status status = diag_add_open(&s, context, "cuda_host.kern", source, 1000, &failed);
    ck_assert_msg(status == KJIT_OK, "%s: %s", failed, kjit_last_error(context));
    return s;
}

static Setup open_setup(bool as_python)
{
    return open_setup_checked(as_python, false);
}

enum { CALL, CALL_ON_STREAM, LAUNCH, FORMS };
static const char *const form_names[FORMS] = {"kjit_call", "kjit_call_async", "kjit_launch"};

static void run(Setup *s, int form)
{
    kjit_arg args[2] = {kjit_arg_array(&s->x), kjit_arg_array(&s->y)};
    kjit_status status;
    if (form == LAUNCH) {
        uint32_t grid[3] = {4, 1, 1}, block[3] = {256, 1, 1};
        kjit_arg fill_args[2] = {kjit_arg_array(&s->out), kjit_arg_f32(1.5f)};
        kjit_function *fill;
        ck_assert_int_eq(kjit_module_function(s->module, "fill", &fill), KJIT_OK);
        status = kjit_launch(fill, grid, block, fill_args, 2, NULL);
    } else if (form == CALL_ON_STREAM) {
        status = kjit_call_async(s->add, args, 2, &s->out, s->stream);
    } else {
        status = kjit_call(s->add, args, 2, &s->out, NULL);
    }
    ck_assert_msg(status == KJIT_OK, "%s: %s", form_names[form], kjit_last_error(s->context));
}

#define CALLS 100

/* Each form's calls once its code is loaded: one cuLaunchKernel each, and
 * nothing else but the question which context is current. */
static void check_forms(bool as_python)
{
    if (!load_fake(as_python ? "one_launch_a_call_python_options"
                             : "one_launch_a_call_default_options"))
        return;
    Setup s = open_setup(as_python);
    for (int form = 0; form < FORMS; form++) {
        run(&s, form); /* code generated and loaded, the block size asked */
        fake_reset();
        for (int i = 0; i < CALLS; i++)
            run(&s, form);
        long launches = fake_count("cuLaunchKernel");
        long asked = fake_count("cuCtxGetCurrent");
        long set = fake_count("cuCtxSetCurrent");
        long total = all_calls();
        ck_assert_msg(launches == CALLS && set == 0 && asked <= CALLS &&
                          total == launches + asked,
                      "%s (%s options): %d calls made %ld cuLaunchKernel, %ld cuCtxSetCurrent, "
                      "%ld cuCtxGetCurrent and %ld other driver calls; want %d, 0, at most %d "
                      "and 0", form_names[form], as_python ? "Python's" : "default", CALLS,
                      launches, set, asked, total - launches - asked - set, CALLS, CALLS);
    }
    diag_add_close(&s);
}

START_TEST(one_launch_a_call_python_options)
{
    check_forms(true);
}
END_TEST

START_TEST(one_launch_a_call_default_options)
{
    check_forms(false);
}
END_TEST

static void *call_once(void *arg)
{
    run(arg, CALL);
    return NULL;
}

/* Another library's context made current, or a new thread: kjit's context is
 * made current again, once. */
START_TEST(another_context_current_is_replaced)
{
    if (!load_fake("another_context_current_is_replaced"))
        return;
    Setup s = open_setup(true);
    run(&s, CALL);
    static char other_context;
    for (int form = 0; form < FORMS; form++) {
        fake_set_current(&other_context);
        fake_reset();
        run(&s, form);
        run(&s, form);
        ck_assert_msg(fake_count("cuCtxSetCurrent") == 1 && fake_count("cuLaunchKernel") == 2,
                      "%s after another context was made current: %ld cuCtxSetCurrent, %ld "
                      "cuLaunchKernel in two calls; want 1 and 2", form_names[form],
                      fake_count("cuCtxSetCurrent"), fake_count("cuLaunchKernel"));
    }
    fake_reset();
    pthread_t thread;
    ck_assert_int_eq(pthread_create(&thread, NULL, call_once, &s), 0);
    pthread_join(thread, NULL);
    ck_assert_msg(fake_count("cuCtxSetCurrent") == 1,
                  "a new thread's first call made %ld cuCtxSetCurrent; want 1",
                  fake_count("cuCtxSetCurrent"));
    diag_add_close(&s);
}
END_TEST

/* The parameters the fake driver was given by the last launch: their bytes
 * (NULL when they came as kernelParams, a pointer each) and their size. */
static const unsigned char *last_packed(size_t *size)
{
    int packed = 0;
    const void *bytes = fake_last_params(size, &packed);
    return packed ? bytes : NULL;
}

static uint64_t word_at(const unsigned char *bytes, size_t offset)
{
    uint64_t word;
    memcpy(&word, bytes + offset, sizeof word);
    return word;
}

/* A vectorized call's parameters come as one buffer laid out as the kernel's
 * .entry takes them (runtime_cuda.c's pack_params, target_cuda.c's entry):
 * a contiguous array {data, extent} (16 bytes), a strided one a whole
 * descriptor, a scalar at its own alignment, checked mode's record last. */
START_TEST(vectorized_params_packed)
{
    if (!load_fake("vectorized_params_packed"))
        return;
    Setup s = open_setup(true);
    run(&s, CALL);
    size_t size = 0;
    const unsigned char *p = last_packed(&size);
    ck_assert_msg(p, "add(x, y, out=out) passed kernelParams, not one packed buffer");
    ck_assert_msg(size == 48, "add(x, y, out=out): %zu bytes of parameters; want 48", size);
    uint64_t want[6] = {(uint64_t)(uintptr_t)s.x.data, 1000, (uint64_t)(uintptr_t)s.y.data, 1000,
                        (uint64_t)(uintptr_t)s.out.data, 1000};
    for (int i = 0; i < 6; i++)
        ck_assert_msg(word_at(p, 8 * (size_t)i) == want[i],
                      "contiguous add: word %d of the parameters is %#llx; want %#llx", i,
                      (unsigned long long)word_at(p, 8 * (size_t)i),
                      (unsigned long long)want[i]);

    /* every other element of x and y: the strided variant, whole descriptors
     * (data, shape[8], strides[8] in elements) */
    kjit_array xs = s.x, ys = s.y, out = s.out;
    xs.shape[0] = ys.shape[0] = out.shape[0] = 500;
    xs.strides[0] = ys.strides[0] = 8;
    kjit_arg strided[2] = {kjit_arg_array(&xs), kjit_arg_array(&ys)};
    ck_assert_msg(kjit_call(s.add, strided, 2, &out, NULL) == KJIT_OK, "%s",
                  kjit_last_error(s.context));
    p = last_packed(&size);
    size_t desc = 8 + 2 * 8 * 8;
    ck_assert_msg(p && size == 3 * desc, "strided add: %zu bytes (%s); want %zu packed", size,
                  p ? "packed" : "kernelParams", 3 * desc);
    ck_assert(word_at(p, 0) == (uint64_t)(uintptr_t)xs.data && word_at(p, 8) == 500);
    ck_assert_msg(word_at(p, 8 + 64) == 2, "x's stride: %llu elements; want 2",
                  (unsigned long long)word_at(p, 8 + 64));
    ck_assert(word_at(p, desc) == (uint64_t)(uintptr_t)ys.data && word_at(p, desc + 72) == 2);
    ck_assert(word_at(p, 2 * desc) == (uint64_t)(uintptr_t)out.data &&
              word_at(p, 2 * desc + 72) == 1);

    /* a scalar: 4 bytes at offset 16, the output's descriptor at the next 8 */
    kjit_arg scalar[2] = {kjit_arg_array(&s.x), kjit_arg_f32(2.5f)};
    ck_assert_msg(kjit_call(s.add, scalar, 2, &s.out, NULL) == KJIT_OK, "%s",
                  kjit_last_error(s.context));
    p = last_packed(&size);
    ck_assert_msg(p && size == 40, "add(x, 2.5): %zu bytes; want 40 packed", size);
    float b;
    memcpy(&b, p + 16, sizeof b);
    ck_assert_msg(b == 2.5f, "add(x, 2.5): the scalar reads %g", (double)b);
    ck_assert(word_at(p, 0) == (uint64_t)(uintptr_t)s.x.data &&
              word_at(p, 24) == (uint64_t)(uintptr_t)s.out.data && word_at(p, 32) == 1000);

    /* two scalars: the second at offset 20, a 4-byte one's own alignment */
    kjit_function *axpb;
    ck_assert_int_eq(kjit_module_function(s.module, "axpb", &axpb), KJIT_OK);
    kjit_arg three[3] = {kjit_arg_array(&s.x), kjit_arg_f32(1.5f), kjit_arg_f32(-4.0f)};
    ck_assert_msg(kjit_call(axpb, three, 3, &s.out, NULL) == KJIT_OK, "%s",
                  kjit_last_error(s.context));
    p = last_packed(&size);
    ck_assert_msg(p && size == 40, "axpb(x, 1.5, -4): %zu bytes; want 40 packed", size);
    float a2[2];
    memcpy(a2, p + 16, sizeof a2);
    ck_assert_msg(a2[0] == 1.5f && a2[1] == -4.0f, "axpb's scalars read %g and %g",
                  (double)a2[0], (double)a2[1]);
    ck_assert(word_at(p, 24) == (uint64_t)(uintptr_t)s.out.data);
    diag_add_close(&s);

    /* checked mode: the record's device address after the parameters */
    s = open_setup_checked(true, true);
    run(&s, CALL);
    p = last_packed(&size);
    ck_assert_msg(p && size == 56, "checked add: %zu bytes; want 56 packed", size);
    ck_assert(word_at(p, 48) != 0);
    diag_add_close(&s);
}
END_TEST

/* KJIT_CUDA_PARAMS=pointers passes kernelParams (the form before); a value
 * that is neither form is refused, naming it. */
START_TEST(params_form_switch)
{
    if (!load_fake("params_form_switch"))
        return;
    setenv("KJIT_CUDA_PARAMS", "pointers", 1);
    Setup s = open_setup(false);
    run(&s, CALL);
    size_t size = 0;
    ck_assert_msg(!last_packed(&size), "KJIT_CUDA_PARAMS=pointers packed the parameters");
    diag_add_close(&s);
    setenv("KJIT_CUDA_PARAMS", "packed", 1);
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CUDA;
    kjit_context *context = NULL;
    kjit_status status = kjit_context_create(&options, &context);
    ck_assert_msg(status == KJIT_ERROR_INVALID_ARGUMENT,
                  "KJIT_CUDA_PARAMS=packed: kjit_context_create gave %s",
                  kjit_status_name(status));
    const char *why = kjit_last_error(context);
    ck_assert_msg(why && strstr(why, "KJIT_CUDA_PARAMS='packed'"), "the error says: %s",
                  why ? why : "(nothing)");
    kjit_context_destroy(context);
}
END_TEST

/* KJIT_CUDA_DRIVER is code kjit runs: a relative path, or a file others can
 * write, is refused (the cuda target then reports no driver, saying why). */
START_TEST(driver_override_is_checked)
{
    char reason[512];
    int which = _i;
    char path[] = "/tmp/kjit-fakecuda-XXXXXX";
    if (which == 0) {
        setenv("KJIT_CUDA_DRIVER", "build/libkjit-fakecuda.so", 1);
    } else {
        int fd = mkstemp(path);
        ck_assert(fd >= 0);
        close(fd);
        chmod(path, 0666);
        setenv("KJIT_CUDA_DRIVER", path, 1);
    }
    ck_assert_int_eq(kjit_cuda_available(reason, sizeof reason), KJIT_ERROR_NO_DEVICE);
    const char *want = which == 0 ? "not an absolute path" : "group or others can write it";
    ck_assert_msg(strstr(reason, "KJIT_CUDA_DRIVER") && strstr(reason, want),
                  "the reason \"%s\" does not say %s", reason, want);
    if (which == 1)
        unlink(path);
}
END_TEST

Suite *suite_cuda_host(void)
{
    Suite *suite = suite_create("cuda_host");
    TCase *tcase = tcase_create("cuda_host");
    tcase_set_timeout(tcase, 300);
    tcase_add_test(tcase, one_launch_a_call_python_options);
    tcase_add_test(tcase, one_launch_a_call_default_options);
    tcase_add_test(tcase, another_context_current_is_replaced);
    tcase_add_test(tcase, vectorized_params_packed);
    tcase_add_test(tcase, params_form_switch);
    tcase_add_loop_test(tcase, driver_override_is_checked, 0, 2);
    suite_add_tcase(suite, tcase);
    return suite;
}
