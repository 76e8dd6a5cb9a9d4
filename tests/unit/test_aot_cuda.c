/*
 * test_aot_cuda.c: what a library's cuda code a device runs (aot_cuda.c;
 * docs/aot.md, "cuda"), without a GPU: an arch's compute capability, the
 * --arch list (sorted lowest first, each once, bad names refused), and the
 * choice: the cubin of the device's major with the highest minor not above
 * its own, else the PTX when its arch is not above the device's, else none
 * (the loader's refusal).  And what a vectorized call from a library hands
 * a device target (general_code_scalars_are_staged): every operand its code
 * reads through a pointer is memory the target stages, a scalar included.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kjit_runtime.h"

START_TEST(capability_of_arch_names)
{
    int major = -1, minor = -1;
    ck_assert(kj_aot_cuda_capability("sm_86", &major, &minor));
    ck_assert_int_eq(major, 8);
    ck_assert_int_eq(minor, 6);
    ck_assert(kj_aot_cuda_capability("sm_100", &major, &minor));
    ck_assert_int_eq(major, 10);
    ck_assert_int_eq(minor, 0);
    ck_assert(kj_aot_cuda_capability("sm_90a", &major, &minor));
    ck_assert_int_eq(major, 9);
    const char *bad[] = {"sm_", "sm_x0", "compute_90", "sm_90b", "sm_9", "sm_090", "sm_-70",
                         "sm_70 ", "", NULL};
    for (int i = 0; bad[i]; i++)
        ck_assert_msg(!kj_aot_cuda_capability(bad[i], &major, &minor), "accepted '%s'", bad[i]);
    ck_assert(!kj_aot_cuda_capability(NULL, &major, &minor));
}
END_TEST

START_TEST(arch_list_sorted_and_checked)
{
    KjAotCudaArchs archs;
    char *error = NULL;
    ck_assert_int_eq(kj_aot_cuda_archs("sm_90,sm_70,sm_80,sm_90", &archs, &error), KJIT_OK);
    ck_assert_int_eq(archs.count, 3);
    ck_assert_str_eq(archs.names[0], "sm_70");
    ck_assert_str_eq(archs.names[1], "sm_80");
    ck_assert_str_eq(archs.names[2], "sm_90");
    ck_assert_int_eq(kj_aot_cuda_archs("sm_100,sm_75", &archs, &error), KJIT_OK);
    ck_assert_str_eq(archs.names[0], "sm_75");
    ck_assert_str_eq(archs.names[1], "sm_100");
    ck_assert_int_eq(kj_aot_cuda_archs("sm_80,volta", &archs, &error),
                     KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(error && strstr(error, "unknown CUDA architecture 'volta' in --arch"), "%s",
                  error ? error : "(none)");
    free(error);
    error = NULL;
    ck_assert_int_eq(kj_aot_cuda_archs("", &archs, &error), KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert(error && strstr(error, "names no architecture"));
    free(error);
}
END_TEST

/* archs "sm_70,sm_80,sm_86,sm_90" with cubins for those in `cubins`. */
static KjAotCudaArchs held(const char *cubins)
{
    KjAotCudaArchs archs;
    char *error = NULL;
    ck_assert_int_eq(kj_aot_cuda_archs("sm_70,sm_80,sm_86,sm_90", &archs, &error), KJIT_OK);
    for (int a = 0; a < archs.count; a++)
        archs.cubin[a] = strstr(cubins, archs.names[a]) != NULL;
    return archs;
}

START_TEST(choice_of_code_for_a_device)
{
    KjAotCudaArchs all = held("sm_70 sm_80 sm_86 sm_90");
    ck_assert_int_eq(kj_aot_cuda_choose(9, 0, &all, "sm_70"), 3);   /* its own */
    ck_assert_int_eq(kj_aot_cuda_choose(8, 9, &all, "sm_70"), 2);   /* sm_86 on 8.9 */
    ck_assert_int_eq(kj_aot_cuda_choose(8, 0, &all, "sm_70"), 1);   /* not sm_86 on 8.0 */
    ck_assert_int_eq(kj_aot_cuda_choose(7, 5, &all, "sm_70"), 0);
    /* a newer major than every cubin: the PTX, which the driver compiles */
    ck_assert_int_eq(kj_aot_cuda_choose(10, 0, &all, "sm_70"), KJ_AOT_CUDA_USE_PTX);
    ck_assert_int_eq(kj_aot_cuda_choose(12, 0, &all, "sm_70"), KJ_AOT_CUDA_USE_PTX);
    /* older than everything: nothing */
    ck_assert_int_eq(kj_aot_cuda_choose(6, 1, &all, "sm_70"), KJ_AOT_CUDA_NONE);
    /* what ptxas could not make is not chosen (CUDA 13 has no sm_70) */
    KjAotCudaArchs no70 = held("sm_80 sm_86 sm_90");
    ck_assert_int_eq(kj_aot_cuda_choose(7, 0, &no70, "sm_70"), KJ_AOT_CUDA_USE_PTX);
    ck_assert_int_eq(kj_aot_cuda_choose(7, 5, &no70, "sm_70"), KJ_AOT_CUDA_USE_PTX);
    /* a cubin of the same major but a higher minor is not run: the PTX */
    KjAotCudaArchs only86 = held("sm_86");
    ck_assert_int_eq(kj_aot_cuda_choose(8, 0, &only86, "sm_70"), KJ_AOT_CUDA_USE_PTX);
    ck_assert_int_eq(kj_aot_cuda_choose(8, 0, &only86, "sm_86"), KJ_AOT_CUDA_NONE);
    /* no cubins (no ptxas at build time): the PTX or nothing */
    KjAotCudaArchs none = held("");
    ck_assert_int_eq(kj_aot_cuda_choose(9, 0, &none, "sm_70"), KJ_AOT_CUDA_USE_PTX);
    ck_assert_int_eq(kj_aot_cuda_choose(9, 0, &none, "sm_100"), KJ_AOT_CUDA_NONE);
    /* sm_90a's code runs on 9.0 alone, and its PTX is no fallback */
    KjAotCudaArchs specific;
    char *error = NULL;
    ck_assert_int_eq(kj_aot_cuda_archs("sm_90a", &specific, &error), KJIT_OK);
    specific.cubin[0] = true;
    ck_assert_int_eq(kj_aot_cuda_choose(9, 0, &specific, "sm_90a"), 0);
    ck_assert_int_eq(kj_aot_cuda_choose(10, 0, &specific, "sm_90a"), KJ_AOT_CUDA_NONE);
}
END_TEST

/* The loader's verdict on a cuda context (aot.c): what it runs, or why
 * nothing, naming the device and what the library holds. */
START_TEST(refusals_name_device_and_library)
{
    unsetenv("KJIT_AOT_CUDA_DEVICE");
    char chosen[64] = "", why[512] = "";
    KjAotCudaArchs archs = held("sm_80 sm_86 sm_90");
    ck_assert(!kj_aot_cuda_usable(false, &archs, 9, 0, chosen, sizeof chosen, why, sizeof why));
    ck_assert_str_eq(why, "it holds no cuda code (it was built with --cuda=off); build it "
                          "without --cuda=off to run it on the cuda target");
    ck_assert(kj_aot_cuda_usable(true, &archs, 9, 0, chosen, sizeof chosen, why, sizeof why));
    ck_assert_str_eq(chosen, "cubin sm_90");
    ck_assert(kj_aot_cuda_usable(true, &archs, 12, 0, chosen, sizeof chosen, why, sizeof why));
    ck_assert_str_eq(chosen, "ptx sm_70");
    ck_assert(!kj_aot_cuda_usable(true, &archs, 6, 1, chosen, sizeof chosen, why, sizeof why));
    ck_assert_str_eq(why, "this device (compute capability 6.1, sm_61) runs none of its cuda "
                          "code: it holds cubins for sm_80, sm_86 and sm_90 and PTX for sm_70 "
                          "(build it with --arch=sm_61)");
    /* sm_90 alone (the GPU bundle's) on a faked 8.0 */
    KjAotCudaArchs only90;
    char *error = NULL;
    ck_assert_int_eq(kj_aot_cuda_archs("sm_90", &only90, &error), KJIT_OK);
    only90.cubin[0] = true;
    setenv("KJIT_AOT_CUDA_DEVICE", "sm_80", 1);
    ck_assert(!kj_aot_cuda_usable(true, &only90, 8, 0, chosen, sizeof chosen, why, sizeof why));
    ck_assert_str_eq(why, "this device (compute capability 8.0, sm_80, as KJIT_AOT_CUDA_DEVICE "
                          "says) runs none of its cuda code: it holds cubins for sm_90 and PTX "
                          "for sm_90 (build it with --arch=sm_80)");
    unsetenv("KJIT_AOT_CUDA_DEVICE");
    only90.cubin[0] = false; /* built without ptxas */
    ck_assert(!kj_aot_cuda_usable(true, &only90, 7, 5, chosen, sizeof chosen, why, sizeof why));
    ck_assert_msg(strstr(why, "it holds no cubin and PTX for sm_90"), "%s", why);
}
END_TEST

/* A checked context and a library's checked code (aot.c): the kinds must be
 * the same, and on cuda the library must hold checked cuda roots, which
 * --check=values builds (a cuda context checks values alone). */
START_TEST(checked_cuda_needs_checked_cuda_roots)
{
    char why[512] = "";
    /* unchecked contexts run the unchecked code of any library */
    ck_assert(kj_aot_checked_usable(0, KJIT_CHECK_VALUES, true, false, why, sizeof why));
    /* cuda, values, and a --check=values library with its checked cuda roots */
    ck_assert(kj_aot_checked_usable(KJIT_CHECK_VALUES, KJIT_CHECK_VALUES, true, true, why,
                                    sizeof why));
    /* one of before (checked code for the host's targets only) */
    ck_assert(!kj_aot_checked_usable(KJIT_CHECK_VALUES, KJIT_CHECK_VALUES, true, false, why,
                                     sizeof why));
    ck_assert_str_eq(why, "the cuda context is checked (KJIT_CHECK=values, kjit_options.check) "
                          "and the library holds checked code for the cpu and parallel targets "
                          "only (it was built with --check=values; a cuda context checks values: "
                          "build it with --check=values)");
    /* --check=all holds no checked cuda roots */
    ck_assert(!kj_aot_checked_usable(KJIT_CHECK_VALUES, KJIT_CHECK_ALL, true, false, why,
                                     sizeof why));
    ck_assert_msg(strstr(why, "built with --check=all"), "%s", why);
    /* no checked code at all, or of other kinds: as on cpu */
    ck_assert(!kj_aot_checked_usable(KJIT_CHECK_VALUES, 0, true, false, why, sizeof why));
    ck_assert_msg(strstr(why, "holds no checked code (build it with kjit build --check=values)"),
                  "%s", why);
    ck_assert(!kj_aot_checked_usable(KJIT_CHECK_RACE, KJIT_CHECK_VALUES, false, false, why,
                                     sizeof why));
    ck_assert_msg(strstr(why, "checks race") && strstr(why, "for values only"), "%s", why);
    ck_assert(kj_aot_checked_usable(KJIT_CHECK_ALL, KJIT_CHECK_ALL, false, false, why,
                                    sizeof why));
}
END_TEST

/* --block on cuda (aot_cuda_build.c): the root's PTX with blockDim the
 * shape's, declared on the entry as .reqntid (which the driver enforces:
 * only launches of that shape run it). */
START_TEST(ptx_for_a_block_shape)
{
    const char *ptx = ".visible .entry tree(\n"
                      "\t.param .align 8 .b8 tree_param_0[136]\n"
                      ")\n{\n"
                      "\tmov.u32 \t%r10, %ntid.x;\n"
                      "\tmov.u32 \t%r11, %ntid.z;\n"
                      "\tmov.u32 \t%r12, %tid.x;\n"
                      "}\n"
                      ".func helper()\n{\n\tmov.u32 \t%r1, %ntid.y;\n}\n";
    uint32_t dims[3] = {64, 2, 1};
    char *shaped = kj_ptx_for_block(ptx, dims);
    ck_assert_ptr_nonnull(shaped);
    ck_assert_str_eq(shaped, ".visible .entry tree(\n"
                             "\t.param .align 8 .b8 tree_param_0[136]\n"
                             ")\n.reqntid 64, 2, 1\n{\n"
                             "\tmov.u32 \t%r10, 64;\n"
                             "\tmov.u32 \t%r11, 1;\n"
                             "\tmov.u32 \t%r12, %tid.x;\n"
                             "}\n"
                             ".func helper()\n{\n\tmov.u32 \t%r1, 2;\n}\n");
    free(shaped);
    /* no entry, two entries, or a thread count declared already: none */
    ck_assert_ptr_null(kj_ptx_for_block(".func f()\n{\n}\n", dims));
    ck_assert_ptr_null(kj_ptx_for_block(".entry a(\n)\n{\n}\n.entry b(\n)\n{\n}\n", dims));
    ck_assert_ptr_null(kj_ptx_for_block(".entry a(\n)\n.maxntid 64, 1, 1\n{\n}\n", dims));
    char key[32];
    kj_aot_block_key(dims, key, sizeof key);
    ck_assert_str_eq(key, "block 64,2,1");
}
END_TEST

/* ------------------------------------------- a device target's operands */

/* A cpu context made to stage as runtime_cuda.c's run_vectorized does: each
 * input kj_vectorized_stages_input names, and the output, is copied to
 * memory of its own (the "device") and the plan's pointer moved there; the
 * cpu code then runs on the copies.  Every operand read through a
 * descriptor must then point into a copy: one that still points at the
 * host's memory is an address the device could not read (lla_a's scalar on
 * an H200: an illegal address). */
static int staged_runs, unstaged_operands;

static bool in_copy(const void *p, char *const *copies, const int64_t *sizes, int count)
{
    for (int k = 0; k < count; k++)
        if ((const char *)p >= copies[k] && (const char *)p < copies[k] + sizes[k])
            return true;
    return false;
}

static kjit_status staging_run_vectorized(kjit_context *context, KjVectorizedRun *run)
{
    KjBroadcastPlan *plan = run->plan;
    char *copies[KJ_MAX_VEC_INPUTS + 1];
    int64_t sizes[KJ_MAX_VEC_INPUTS + 1];
    int count = 0;
    for (int i = 0; i <= run->input_count; i++) {
        const kjit_array *host = i < run->input_count ? run->inputs[i] : run->output;
        if (i < run->input_count && !kj_vectorized_stages_input(run, i))
            continue;
        int64_t low, high;
        kj_array_extent(host, &low, &high);
        copies[count] = malloc((size_t)(high - low));
        sizes[count] = high - low;
        memcpy(copies[count], (char *)host->data + low, (size_t)(high - low));
        KjArrayDesc *desc = i < run->input_count ? &plan->inputs[i] : &plan->output;
        desc->data = copies[count] - low;
        count++;
    }
    for (int i = 0; i < run->input_count; i++)
        if (!(plan->variant.scalar_mask & (1u << i)) &&
            !in_copy(plan->inputs[i].data, copies, sizes, count))
            unstaged_operands++;
    kjit_status status = kj_runtime_cpu.run_vectorized(context, run);
    int64_t low, high; /* the output, copied back */
    kj_array_extent(run->output, &low, &high);
    memcpy((char *)run->output->data + low, copies[count - 1], (size_t)(high - low));
    for (int k = 0; k < count; k++)
        free(copies[k]);
    staged_runs++;
    return status;
}

START_TEST(general_code_scalars_are_staged)
{
    char dir[] = "/tmp/kjit-aot-stage-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char kern[128], lib[128];
    snprintf(kern, sizeof kern, "%s/five.kern", dir);
    snprintf(lib, sizeof lib, "%s/libfive.so", dir);
    /* five inputs: the library holds the contiguous variant of arrays
     * alone and the general code, which runs any set of scalars */
    FILE *f = fopen(kern, "w");
    ck_assert_ptr_nonnull(f);
    fputs("@vectorize\nfn five(a: f64, b: f64, c: f64, d: f64, s: f64) -> f64 {\n"
          "    return (a - b) * c + d * s;\n}\n", f);
    fclose(f);
    kjit_build_options build;
    kjit_build_options_init(&build);
    build.levels = "sse2";
    build.cuda_archs = "off";
    char *error = NULL;
    ck_assert_msg(kjit_build_library_with(kern, lib, &build, NULL, &error) == KJIT_OK, "%s",
                  error ? error : "");
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CPU;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    kjit_module *module;
    ck_assert_msg(kjit_module_load_library(context, lib, &module) == KJIT_OK, "%s",
                  kjit_last_error(context));
    KjRuntimeTarget staging = *context->runtime;
    staging.run_vectorized = staging_run_vectorized;
    context->runtime = &staging;
    kjit_function *five;
    ck_assert_int_eq(kjit_module_function(module, "five", &five), KJIT_OK);
    enum { N = 100 };
    double x[4][N], out[N];
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < N; i++)
            x[k][i] = (double)(i * (k + 2) % 17) - 3.5 * k;
    int64_t n = N, one = 1;
    double held = -1.25;
    kjit_array arrays[5], output = kjit_array_make(out, KJIT_F64, 1, &n);
    for (int k = 0; k < 4; k++)
        arrays[k] = kjit_array_make(x[k], KJIT_F64, 1, &n);
    arrays[4] = kjit_array_make(&held, KJIT_F64, 1, &one);
    /* s a host scalar, then a one-element array (passed as a scalar), then
     * a in front a scalar too */
    for (int form = 0; form < 3; form++) {
        kjit_arg args[5];
        for (int k = 0; k < 4; k++)
            args[k] = kjit_arg_array(&arrays[k]);
        double s = form == 1 ? held : 2.5, a = 0.75;
        args[4] = form == 1 ? kjit_arg_array(&arrays[4]) : kjit_arg_f64(s);
        if (form == 2)
            args[0] = kjit_arg_f64(a);
        staged_runs = unstaged_operands = 0;
        memset(out, 0, sizeof out);
        ck_assert_msg(kjit_call(five, args, 5, &output, NULL) == KJIT_OK, "%s",
                      kjit_last_error(context));
        ck_assert_int_eq(staged_runs, 1);
        ck_assert_msg(unstaged_operands == 0,
                      "form %d: %d operand(s) read through a descriptor would reach the device "
                      "at a host address", form, unstaged_operands);
        for (int i = 0; i < N; i++) {
            double first = form == 2 ? a : x[0][i];
            ck_assert_msg(out[i] == (first - x[1][i]) * x[2][i] + x[3][i] * s,
                          "form %d: element %d is %g", form, i, out[i]);
        }
    }
    context->runtime = &kj_runtime_cpu;
    kjit_module_free(module);
    kjit_context_destroy(context);
    unlink(lib);
    unlink(kern);
    rmdir(dir);
}
END_TEST

Suite *suite_aot_cuda(void)
{
    Suite *s = suite_create("aot_cuda");
    TCase *t = tcase_create("choice");
    tcase_add_test(t, capability_of_arch_names);
    tcase_add_test(t, arch_list_sorted_and_checked);
    tcase_add_test(t, choice_of_code_for_a_device);
    tcase_add_test(t, refusals_name_device_and_library);
    tcase_add_test(t, checked_cuda_needs_checked_cuda_roots);
    tcase_add_test(t, ptx_for_a_block_shape);
    suite_add_tcase(s, t);
    TCase *staged = tcase_create("staging");
    tcase_add_test(staged, general_code_scalars_are_staged);
    suite_add_tcase(s, staged);
    return s;
}
