/*
 * test_exec.c: the execution-model built-ins on the cpu and parallel targets,
 * through the public API: the warp collectives (a shuffle block sum and a
 * shuffle scan, bit for bit against a C emulation of the same additions in
 * the same order; votes with exited lanes and partial warps; every shuffle on
 * 32- and 64-bit values with source lanes in and out of range), the block
 * votes, syncgrid() (a heat equation against a float64 reference) and the
 * launch's dynamic shared memory, and the errors a launch gives.  The
 * kernels are the .kern files of tests/golden/exec, docs/language.md's
 * examples.
 * test_cuda.c runs the same kernels on a GPU and compares them with cpu.
 */
#include <check.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kjit.h"
#include "rng.h"

enum { WARP = 32 };

static uint64_t rng;

static void seed_once(void)
{
    if (rng)
        return;
    const char *fixed = getenv("KJIT_EXEC_SEED");
    rng = fixed ? strtoull(fixed, NULL, 10) : (uint64_t)time(NULL) * 2654435761u + 1;
    printf("test_exec: seed %llu (KJIT_EXEC_SEED)\n", (unsigned long long)rng);
}

static int64_t between(int64_t low, int64_t high)
{
    return low + (int64_t)(rng_next(&rng) % (uint64_t)(high - low + 1));
}

static kjit_context *make_context(kjit_target target)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = 3;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    return context;
}

static kjit_function *load(kjit_context *context, const char *file, const char *name,
                           kjit_module **module)
{
    kjit_status status = kjit_compile_file(context, file, module);
    ck_assert_msg(status == KJIT_OK, "%s: %s", file, kjit_last_error(context));
    kjit_function *function;
    ck_assert_int_eq(kjit_module_function(*module, name, &function), KJIT_OK);
    return function;
}

static kjit_array array_of(void *data, kjit_dtype dtype, int64_t n)
{
    return kjit_array_make(data, dtype, 1, &n);
}

static void launch(kjit_function *fn, uint32_t blocks, uint32_t threads, kjit_arg *args, int n,
                   size_t dynamic_bytes)
{
    uint32_t grid[3] = {blocks, 1, 1}, block[3] = {threads, 1, 1};
    kjit_launch_options options;
    kjit_launch_options_init(&options);
    options.dynamic_shared_bytes = dynamic_bytes;
    kjit_status status = kjit_launch_ex(fn, grid, block, args, n, &options);
    ck_assert_msg(status == KJIT_OK, "%s", kjit_last_error(NULL));
}

static const kjit_target targets[] = {KJIT_TARGET_CPU, KJIT_TARGET_PARALLEL};

/* ------------------------------------------------------ warp reductions */

/* block_sum's additions, in its order, in f32. */
static float block_sum_reference(const float *x, int64_t n, int64_t block, int64_t threads)
{
    float partial[WARP] = {0};
    int warps = (int)(threads / WARP);
    for (int w = 0; w < warps; w++) {
        float v[WARP];
        for (int l = 0; l < WARP; l++) {
            int64_t i = block * threads + w * WARP + l;
            v[l] = i < n ? x[i] : 0.0f;
        }
        for (int offset = 16; offset > 0; offset /= 2) {
            float next[WARP];
            for (int l = 0; l < WARP; l++)
                next[l] = v[l] + (l + offset < WARP ? v[l + offset] : v[l]);
            memcpy(v, next, sizeof v);
        }
        partial[w] = v[0];
    }
    float w[WARP];
    for (int l = 0; l < WARP; l++)
        w[l] = l < warps ? partial[l] : 0.0f;
    for (int k = 16; k > 0; k /= 2) {
        float next[WARP];
        for (int l = 0; l < WARP; l++)
            next[l] = w[l] + w[l ^ k];
        memcpy(w, next, sizeof w);
    }
    return w[0];
}

START_TEST(warp_block_sum_is_bit_exact)
{
    seed_once();
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        kjit_context *context = make_context(targets[t]);
        kjit_module *module;
        kjit_function *fn = load(context, "tests/golden/exec/warp.kern", "block_sum", &module);
        int64_t threads = 32 * between(1, 8), blocks = between(1, 40);
        int64_t n = blocks * threads - between(0, threads - 1);
        float *x = malloc(sizeof *x * (size_t)n), *out = malloc(sizeof *out * (size_t)blocks);
        for (int64_t i = 0; i < n; i++)
            x[i] = (float)rng_uniform(&rng, -100, 100);
        kjit_array X = array_of(x, KJIT_F32, n), O = array_of(out, KJIT_F32, blocks);
        kjit_arg args[2] = {kjit_arg_array(&X), kjit_arg_array(&O)};
        launch(fn, (uint32_t)blocks, (uint32_t)threads, args, 2, 0);
        for (int64_t b = 0; b < blocks; b++) {
            float want = block_sum_reference(x, n, b, threads);
            ck_assert_msg(memcmp(&out[b], &want, sizeof want) == 0,
                          "%s: block %lld of %lld threads: %.9g, want %.9g",
                          kjit_target_name(targets[t]), (long long)b, (long long)threads,
                          out[b], want);
        }
        free(x);
        free(out);
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

START_TEST(warp_scan_is_bit_exact)
{
    seed_once();
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        kjit_context *context = make_context(targets[t]);
        kjit_module *module;
        kjit_function *fn = load(context, "tests/golden/exec/warp.kern", "warp_scan", &module);
        int64_t threads = between(1, 300), blocks = between(1, 6);
        int64_t n = blocks * threads - between(0, threads - 1);
        double *x = malloc(sizeof *x * (size_t)n), *out = malloc(sizeof *out * (size_t)n);
        for (int64_t i = 0; i < n; i++)
            x[i] = rng_uniform(&rng, -1, 1);
        kjit_array X = array_of(x, KJIT_F64, n), O = array_of(out, KJIT_F64, n);
        kjit_arg args[2] = {kjit_arg_array(&X), kjit_arg_array(&O)};
        launch(fn, (uint32_t)blocks, (uint32_t)threads, args, 2, 0);
        /* Each warp of each block: lanes past the block's last thread do not
         * exist, so a shuffle from them gives the lane's own value. */
        for (int64_t b = 0; b < blocks; b++)
            for (int64_t base = 0; base < threads; base += WARP) {
                int lanes = (int)(threads - base < WARP ? threads - base : WARP);
                double v[WARP];
                for (int l = 0; l < lanes; l++) {
                    int64_t i = b * threads + base + l;
                    v[l] = i < n ? x[i] : 0.0;
                }
                for (int d = 1; d < WARP; d *= 2) {
                    double next[WARP];
                    for (int l = 0; l < lanes; l++)
                        next[l] = l >= d ? v[l] + v[l - d] : v[l];
                    memcpy(v, next, sizeof v);
                }
                for (int l = 0; l < lanes; l++) {
                    int64_t i = b * threads + base + l;
                    if (i < n)
                        ck_assert_msg(memcmp(&out[i], &v[l], sizeof v[l]) == 0,
                                      "%s: scan[%lld] = %.17g, want %.17g",
                                      kjit_target_name(targets[t]), (long long)i, out[i], v[l]);
                }
            }
        free(x);
        free(out);
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

/* ------------------------------------------------------------ votes */

START_TEST(votes_count_only_lanes_still_running)
{
    seed_once();
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        kjit_context *context = make_context(targets[t]);
        kjit_module *module;
        kjit_function *fn = load(context, "tests/golden/exec/warp.kern", "votes", &module);
        /* 48 threads a block: a full warp and a warp of 16; the last block is
         * cut short by threads that return before voting. */
        const int64_t threads = 48, blocks = 3;
        int64_t n = blocks * threads - between(1, 40);
        int32_t *x = malloc(sizeof *x * (size_t)n);
        uint32_t *ballots = calloc((size_t)n, 4), *masks = calloc((size_t)n, 4);
        uint8_t *alls = calloc((size_t)n, 1), *anys = calloc((size_t)n, 1);
        for (int64_t i = 0; i < n; i++) {
            int kind = (int)(rng_next(&rng) % 3);
            x[i] = kind == 0 ? -1 : 1; /* some warps all true */
            if (i >= 32 && i < 96)
                x[i] = 1;
            if (i >= 96 && i < 112)
                x[i] = -1;
        }
        kjit_array X = array_of(x, KJIT_I32, n), B = array_of(ballots, KJIT_U32, n),
                   AL = array_of(alls, KJIT_BOOL, n), AN = array_of(anys, KJIT_BOOL, n),
                   M = array_of(masks, KJIT_U32, n);
        kjit_arg args[5] = {kjit_arg_array(&X), kjit_arg_array(&B), kjit_arg_array(&AL),
                            kjit_arg_array(&AN), kjit_arg_array(&M)};
        launch(fn, (uint32_t)blocks, (uint32_t)threads, args, 5, 0);
        for (int64_t i = 0; i < n; i++) {
            int64_t b = i / threads, in_block = i % threads;
            int64_t base = b * threads + in_block / WARP * WARP;
            int64_t end = base + WARP < (b + 1) * threads ? base + WARP : (b + 1) * threads;
            uint32_t present = 0, ballot = 0;
            for (int64_t j = base; j < end && j < n; j++) {
                present |= 1u << (j - base);
                if (x[j] > 0)
                    ballot |= 1u << (j - base);
            }
            ck_assert_msg(masks[i] == present, "%s: activemask at %lld: %x, want %x",
                          kjit_target_name(targets[t]), (long long)i, masks[i], present);
            ck_assert_msg(ballots[i] == ballot, "%s: ballot at %lld: %x, want %x",
                          kjit_target_name(targets[t]), (long long)i, ballots[i], ballot);
            ck_assert_int_eq(alls[i], ballot == present);
            ck_assert_int_eq(anys[i], ballot != 0);
        }
        free(x);
        free(ballots);
        free(masks);
        free(alls);
        free(anys);
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

/* ------------------------------------------------------------ shuffles */

START_TEST(every_shuffle_on_32_and_64_bits)
{
    seed_once();
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        kjit_context *context = make_context(targets[t]);
        kjit_module *module;
        kjit_function *fn = load(context, "tests/golden/exec/warp.kern", "shuffles", &module);
        const int64_t threads = 64, blocks = 2, n = threads * blocks;
        int64_t a[128], ra[128];
        double b[128], rb[128];
        uint32_t c[128], rc[128];
        float d[128], rd[128];
        int32_t lanes[128];
        for (int64_t i = 0; i < n; i++) {
            a[i] = (int64_t)rng_next(&rng);
            b[i] = rng_uniform(&rng, -1e300, 1e300);
            c[i] = (uint32_t)rng_next(&rng);
            d[i] = (float)rng_uniform(&rng, -1e30, 1e30);
            /* mostly 0..31; some outside, of which only the low five bits count */
            lanes[i] = rng_next(&rng) % 4 ? (int32_t)between(0, 31) : (int32_t)between(-70, 70);
        }
        kjit_array A = array_of(a, KJIT_I64, n), B = array_of(b, KJIT_F64, n),
                   C = array_of(c, KJIT_U32, n), D = array_of(d, KJIT_F32, n),
                   L = array_of(lanes, KJIT_I32, n), RA = array_of(ra, KJIT_I64, n),
                   RB = array_of(rb, KJIT_F64, n), RC = array_of(rc, KJIT_U32, n),
                   RD = array_of(rd, KJIT_F32, n);
        kjit_arg args[9] = {kjit_arg_array(&A), kjit_arg_array(&B), kjit_arg_array(&C),
                            kjit_arg_array(&D), kjit_arg_array(&L), kjit_arg_array(&RA),
                            kjit_arg_array(&RB), kjit_arg_array(&RC), kjit_arg_array(&RD)};
        launch(fn, (uint32_t)blocks, (uint32_t)threads, args, 9, 0);
        for (int64_t i = 0; i < n; i++) {
            int64_t base = i / WARP * WARP;
            int lane = (int)(i - base), k = lanes[i] & 31;
            int up = lane - k >= 0 ? lane - k : lane;
            int down = lane + k < WARP ? lane + k : lane;
            ck_assert_msg(ra[i] == a[base + k], "%s: shfl at %lld lane %d", kjit_target_name(targets[t]),
                          (long long)i, lanes[i]);
            ck_assert_msg(memcmp(&rb[i], &b[base + up], 8) == 0, "shfl_up at %lld", (long long)i);
            ck_assert_msg(rc[i] == c[base + down], "shfl_down at %lld", (long long)i);
            ck_assert_msg(memcmp(&rd[i], &d[base + (lane ^ k)], 4) == 0, "shfl_xor at %lld",
                          (long long)i);
        }
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

START_TEST(block_votes)
{
    seed_once();
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        kjit_context *context = make_context(targets[t]);
        kjit_module *module;
        kjit_function *fn = load(context, "tests/golden/exec/warp.kern", "block_votes", &module);
        const int64_t threads = 128, blocks = 5, n = threads * blocks;
        float x[640];
        int32_t count[5];
        uint8_t every[5], some[5];
        for (int64_t i = 0; i < n; i++) {
            int64_t b = i / threads;
            x[i] = b == 0 ? 1.0f : b == 1 ? 0.0f : (float)rng_uniform(&rng, 0, 1);
        }
        kjit_array X = array_of(x, KJIT_F32, n), C = array_of(count, KJIT_I32, blocks),
                   E = array_of(every, KJIT_BOOL, blocks), S = array_of(some, KJIT_BOOL, blocks);
        kjit_arg args[4] = {kjit_arg_array(&X), kjit_arg_array(&C), kjit_arg_array(&E),
                            kjit_arg_array(&S)};
        launch(fn, (uint32_t)blocks, (uint32_t)threads, args, 4, 0);
        for (int64_t b = 0; b < blocks; b++) {
            int want = 0;
            for (int64_t j = 0; j < threads; j++)
                want += x[b * threads + j] > 0.5f;
            ck_assert_int_eq(count[b], want);
            ck_assert_int_eq(every[b], want == threads);
            ck_assert_int_eq(some[b], want > 0);
        }
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

/* ------------------------------------------------------------ syncgrid */

START_TEST(heat_equation_with_syncgrid)
{
    seed_once();
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        kjit_context *context = make_context(targets[t]);
        kjit_module *module;
        kjit_function *fn = load(context, "tests/golden/exec/grid.kern", "heat", &module);
        const int64_t threads = 128, blocks = 8;
        int64_t n = blocks * threads - between(0, 100);
        int steps = (int)between(20, 60);
        double alpha = rng_uniform(&rng, 0.1, 0.45);
        double *u = malloc(sizeof *u * (size_t)n), *scratch = calloc((size_t)n, sizeof *u);
        double *ref = malloc(sizeof *ref * (size_t)n), *next = malloc(sizeof *next * (size_t)n);
        for (int64_t i = 0; i < n; i++)
            u[i] = ref[i] = rng_uniform(&rng, 0, 1);
        for (int s = 0; s < steps; s++) {
            for (int64_t i = 0; i < n; i++)
                next[i] = i > 0 && i < n - 1
                              ? ref[i] + alpha * (ref[i - 1] - 2.0 * ref[i] + ref[i + 1])
                              : ref[i];
            memcpy(ref, next, sizeof *ref * (size_t)n);
        }
        kjit_array U = array_of(u, KJIT_F64, n), S = array_of(scratch, KJIT_F64, n);
        kjit_arg args[4] = {kjit_arg_array(&U), kjit_arg_array(&S), kjit_arg_f64(alpha),
                            kjit_arg_i64(steps)};
        launch(fn, (uint32_t)blocks, (uint32_t)threads, args, 4, 0);
        for (int64_t i = 0; i < n; i++)
            ck_assert_msg(fabs(u[i] - ref[i]) <= 1e-12 * fabs(ref[i]) + 1e-15,
                          "%s: u[%lld] = %.17g after %d steps, want %.17g",
                          kjit_target_name(targets[t]), (long long)i, u[i], steps, ref[i]);

        /* Too many threads to be resident at once: a clear error. */
        uint32_t grid[3] = {200, 1, 1}, block[3] = {128, 1, 1};
        ck_assert_int_eq(kjit_launch(fn, grid, block, args, 4, NULL), KJIT_ERROR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(kjit_last_error(context), "at most 16384") &&
                          strstr(kjit_last_error(context), "syncgrid()"),
                      "%s", kjit_last_error(context));
        free(u);
        free(scratch);
        free(ref);
        free(next);
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

START_TEST(mismatched_barriers_are_an_error)
{
    static const char source[] =
        "@kernel\n"
        "fn stuck(out: i32[]) {\n"
        "    if threadIdx.x == 0 { syncgrid(); } else { syncthreads(); }\n"
        "    out[grid(1)] = 1;\n"
        "}\n";
    kjit_context *context = make_context(KJIT_TARGET_CPU);
    kjit_module *module;
    ck_assert_int_eq(kjit_compile_string(context, "stuck.kern", source, &module), KJIT_OK);
    kjit_function *fn;
    ck_assert_int_eq(kjit_module_function(module, "stuck", &fn), KJIT_OK);
    int32_t out[64];
    kjit_array O = array_of(out, KJIT_I32, 64);
    kjit_arg args[1] = {kjit_arg_array(&O)};
    uint32_t grid[3] = {2, 1, 1}, block[3] = {32, 1, 1};
    ck_assert_int_eq(kjit_launch(fn, grid, block, args, 1, NULL), KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(kjit_last_error(context), "never all be reached"), "%s",
                  kjit_last_error(context));
    /* the context goes on */
    ck_assert_int_eq(kjit_compile_string(context, "ok.kern",
                                         "@kernel\nfn ok(o: i32[]) { o[grid(1)] = 2; }\n",
                                         &module), KJIT_OK);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

/* A device function's collectives are its calling thread's; syncgrid() in
 * one makes the kernel cooperative. */
START_TEST(collectives_in_device_functions)
{
    static const char source[] =
        "fn warp_total(v: f32) -> f32 {\n"
        "    let s = v;\n"
        "    for k in range(5) { s += shfl_xor(s, 16 >> k); }\n"
        "    return s;\n"
        "}\n"
        "fn everyone() { syncgrid(); }\n"
        "@kernel\n"
        "fn totals(x: f32[], out: f32[]) {\n"
        "    let i = grid(1);\n"
        "    x[i] = warp_total(x[i]);\n"
        "    everyone();\n"
        "    out[i] = x[(i + 32) % len(x)];\n"
        "}\n";
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        kjit_context *context = make_context(targets[t]);
        kjit_module *module;
        ck_assert_int_eq(kjit_compile_string(context, "device.kern", source, &module), KJIT_OK);
        kjit_function *fn;
        ck_assert_int_eq(kjit_module_function(module, "totals", &fn), KJIT_OK);
        float x[128], out[128];
        for (int i = 0; i < 128; i++)
            x[i] = (float)i;
        kjit_array X = array_of(x, KJIT_F32, 128), O = array_of(out, KJIT_F32, 128);
        kjit_arg args[2] = {kjit_arg_array(&X), kjit_arg_array(&O)};
        launch(fn, 4, 32, args, 2, 0);
        /* out[i] is the total of the next warp, written before the barrier */
        for (int i = 0; i < 128; i++) {
            int next = (i / 32 + 1) % 4;
            ck_assert_float_eq(out[i], (float)(32 * 32 * next + 496));
        }
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

/* ------------------------------------------------- local() sized at launch */

/* tests/golden/exec/local_launch.kern through the C API: sizes from scalar
 * parameters and from an array's extent, and the launch's refusals (a size
 * out of range, more than 512 KiB a thread) as a status and a message,
 * before anything runs. */
START_TEST(local_sized_at_launch)
{
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        kjit_context *context = make_context(targets[t]);
        kjit_module *module;
        kjit_function *fn = load(context, "tests/golden/exec/local_launch.kern", "prefix_windows",
                                 &module);
        int32_t x[40];
        int64_t out[40];
        for (int i = 0; i < 40; i++)
            x[i] = i * 7 % 13;
        kjit_array X = array_of(x, KJIT_I32, 40), O = array_of(out, KJIT_I64, 40);
        for (int w = 1; w <= 9; w += 4) {
            kjit_arg args[4] = {kjit_arg_array(&X), kjit_arg_array(&O), kjit_arg_i32(w),
                                kjit_arg_i64(20)};
            launch(fn, 2, 32, args, 4, 0);
            for (int i = 0; i < 40; i++) {
                int64_t want = (8 + w % 3) * 1000;
                for (int k = 0; k < w; k++)
                    want += x[(i + k) % 40];
                ck_assert_msg(out[i] == want, "%s: w %d: out[%d] = %lld, want %lld",
                              kjit_target_name(targets[t]), w, i, (long long)out[i],
                              (long long)want);
            }
        }
        /* min(lanes, 8) + w % 3 = -4: refused, nothing written */
        out[0] = -1;
        kjit_arg bad[4] = {kjit_arg_array(&X), kjit_arg_array(&O), kjit_arg_i32(2),
                           kjit_arg_i64(-6)};
        uint32_t grid[3] = {2, 1, 1}, block[3] = {32, 1, 1};
        ck_assert_int_eq(kjit_launch(fn, grid, block, bad, 4, NULL), KJIT_ERROR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(kjit_last_error(context), "is given size -4 by this launch"), "%s",
                      kjit_last_error(context));
        ck_assert_int_eq(out[0], -1);
        /* 131073 i32 (524304 bytes) and 16 more sized at launch, 32 fixed: past 512 KiB */
        kjit_arg big[4] = {kjit_arg_array(&X), kjit_arg_array(&O), kjit_arg_i32(131073),
                           kjit_arg_i64(1)};
        ck_assert_int_eq(kjit_launch(fn, grid, block, big, 4, NULL), KJIT_ERROR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(kjit_last_error(context), "take 524352 bytes per thread"), "%s",
                      kjit_last_error(context));
        /* a size from an array's extent */
        kjit_function *tri;
        ck_assert_int_eq(kjit_module_function(module, "tridiag_columns", &tri), KJIT_OK);
        int64_t shape[2] = {200, 3};
        double d[600], sol[600];
        for (int i = 0; i < 600; i++)
            d[i] = (double)(i % 17) - 8;
        kjit_array D = kjit_array_make(d, KJIT_F64, 2, shape), S = kjit_array_make(sol, KJIT_F64, 2, shape);
        kjit_arg targs[2] = {kjit_arg_array(&D), kjit_arg_array(&S)};
        launch(tri, 1, 4, targs, 2, 0);
        for (int i = 0; i < 200; i++)
            for (int j = 0; j < 3; j++) {
                double r = 4 * sol[i * 3 + j] - (i > 0 ? sol[(i - 1) * 3 + j] : 0) -
                           (i < 199 ? sol[(i + 1) * 3 + j] : 0) - d[i * 3 + j];
                ck_assert_msg(fabs(r) < 1e-12, "residual %g at (%d, %d)", r, i, j);
            }
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

/* ---------------------------------------------- @vectorize of several outputs */

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* tests/golden/vectorize/several_outputs.kern through the C API: outputs
 * given after the inputs (contiguous, strided, broadcast; one that is also
 * an input, read from a copy), allocated into a result of k arrays, on a
 * stream; the refusals of what does not fit. */
START_TEST(several_outputs)
{
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        kjit_context *context = make_context(targets[t]);
        kjit_module *module;
        kjit_function *fn = load(context, "tests/golden/vectorize/several_outputs.kern",
                                 "floor_divmod", &module);
        ck_assert_int_eq(kjit_function_output_count(fn), 2);
        kjit_dtype dtype;
        ck_assert_int_eq(kjit_function_output(fn, 0, 1, &dtype), KJIT_OK);
        ck_assert_int_eq(dtype, KJIT_I64);
        ck_assert_int_eq(kjit_function_output(fn, 0, 2, &dtype), KJIT_ERROR_INVALID_ARGUMENT);
        ck_assert_str_eq(kjit_function_signature(fn, 0), "(i64, i64)(i64, i64)");
        enum { N = 60 };
        int64_t a[N], b[10], q[N], r[N];
        for (int i = 0; i < N; i++)
            a[i] = i * 7 - 200;
        for (int j = 0; j < 10; j++)
            b[j] = (j % 2 ? -1 : 1) * (j + 1);
        int64_t shape[2] = {6, 10}, row = 10;
        kjit_array A = kjit_array_make(a, KJIT_I64, 2, shape), B = kjit_array_make(b, KJIT_I64, 1, &row);
        kjit_array Q = kjit_array_make(q, KJIT_I64, 2, shape), R = kjit_array_make(r, KJIT_I64, 2, shape);
        kjit_arg args[4] = {kjit_arg_array(&A), kjit_arg_array(&B), kjit_arg_array(&Q),
                            kjit_arg_array(&R)};
        ck_assert_msg(kjit_call(fn, args, 4, NULL, NULL) == KJIT_OK, "%s", kjit_last_error(context));
        for (int i = 0; i < N; i++) {
            ck_assert_int_eq(q[i], floor_div(a[i], b[i % 10]));
            ck_assert_int_eq(r[i], a[i] - floor_div(a[i], b[i % 10]) * b[i % 10]);
        }
        /* allocated: a result of two arrays */
        kjit_array res[2];
        ck_assert_msg(kjit_call_outputs(fn, args, 2, res, 2) == KJIT_OK, "%s",
                      kjit_last_error(context));
        ck_assert_int_eq(res[1].ndim, 2);
        ck_assert_int_eq(memcmp(res[0].data, q, sizeof q), 0);
        ck_assert_int_eq(memcmp(res[1].data, r, sizeof r), 0);
        kjit_array_free(&res[0]);
        kjit_array_free(&res[1]);
        /* strided outputs (every other column of a wider array) and a
         * scalar divisor, on a stream */
        int64_t wide[6 * 20] = {0}, strides[2] = {20 * 8, 16}, rem[60];
        kjit_array W = kjit_array_make(wide, KJIT_I64, 2, shape),
                   REM = kjit_array_make(rem, KJIT_I64, 2, shape);
        W.strides[0] = strides[0];
        W.strides[1] = strides[1];
        kjit_arg sargs[4] = {kjit_arg_array(&A), kjit_arg_i64(-7), kjit_arg_array(&W),
                             kjit_arg_array(&REM)};
        kjit_stream *stream;
        ck_assert_int_eq(kjit_stream_create(context, &stream), KJIT_OK);
        ck_assert_msg(kjit_call_async(fn, sargs, 4, NULL, stream) == KJIT_OK, "%s",
                      kjit_last_error(context));
        ck_assert_int_eq(kjit_stream_synchronize(stream), KJIT_OK);
        kjit_stream_destroy(stream);
        for (int i = 0; i < N; i++) {
            ck_assert_int_eq(wide[i / 10 * 20 + i % 10 * 2], floor_div(a[i], -7));
            ck_assert_int_eq(rem[i], a[i] - floor_div(a[i], -7) * -7);
        }
        /* output 0 is input 0: the quotient replaces a, the remainder reads the old a */
        int64_t keep[N];
        memcpy(keep, a, sizeof a);
        kjit_arg inplace[4] = {kjit_arg_array(&A), kjit_arg_i64(9), kjit_arg_array(&A),
                               kjit_arg_array(&R)};
        ck_assert_msg(kjit_call(fn, inplace, 4, NULL, NULL) == KJIT_OK, "%s",
                      kjit_last_error(context));
        for (int i = 0; i < N; i++) {
            ck_assert_int_eq(a[i], floor_div(keep[i], 9));
            ck_assert_int_eq(r[i], keep[i] - floor_div(keep[i], 9) * 9);
        }
        /* refusals */
        ck_assert_int_eq(kjit_call(fn, args, 2, &Q, NULL), KJIT_ERROR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(kjit_last_error(context), "pass them as arguments after its inputs"),
                      "%s", kjit_last_error(context));
        ck_assert_int_eq(kjit_call(fn, args, 3, NULL, NULL), KJIT_ERROR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(kjit_last_error(context), "takes 2 inputs, then optionally its 2 "
                                                       "outputs; 3 arguments given"),
                      "%s", kjit_last_error(context));
        ck_assert_int_eq(kjit_call(fn, args, 2, NULL, NULL), KJIT_ERROR_INVALID_ARGUMENT);
        /* kjit_call's single result cannot take two: refused, never written past */
        kjit_array one[2] = {{0}};
        ck_assert_int_eq(kjit_call(fn, args, 2, NULL, one), KJIT_ERROR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(kjit_last_error(context), "allocate them with kjit_call_outputs"),
                      "%s", kjit_last_error(context));
        ck_assert_ptr_null(one[0].data);
        ck_assert_ptr_null(one[1].data);
        ck_assert_int_eq(kjit_call_outputs(fn, args, 2, res, 3), KJIT_ERROR_INVALID_ARGUMENT);
        kjit_array short_r = kjit_array_make(r, KJIT_I64, 1, &row);
        kjit_arg bad_shape[4] = {kjit_arg_array(&A), kjit_arg_array(&B), kjit_arg_array(&Q),
                                 kjit_arg_array(&short_r)};
        ck_assert_int_eq(kjit_call(fn, bad_shape, 4, NULL, NULL), KJIT_ERROR_SHAPE);
        ck_assert_msg(strstr(kjit_last_error(context), "output 1 has shape (10,) but the "
                                                       "broadcast shape is (6,10)"),
                      "%s", kjit_last_error(context));
        float f[N];
        kjit_array F = kjit_array_make(f, KJIT_F32, 2, shape);
        kjit_arg bad_type[4] = {kjit_arg_array(&A), kjit_arg_array(&B), kjit_arg_array(&F),
                                kjit_arg_array(&R)};
        ck_assert_int_eq(kjit_call(fn, bad_type, 4, NULL, NULL), KJIT_ERROR_TYPE);
        ck_assert_msg(strstr(kjit_last_error(context), "output 0 (argument 2) must be a i64 array"),
                      "%s", kjit_last_error(context));
        /* three outputs of three types */
        kjit_function *wave;
        ck_assert_int_eq(kjit_module_function(module, "wave", &wave), KJIT_OK);
        float x[N], s[N], c[N];
        bool pos[N];
        for (int i = 0; i < N; i++)
            x[i] = (float)(i - 30) / 7.0f;
        int64_t n = N;
        kjit_array X = kjit_array_make(x, KJIT_F32, 1, &n), S = kjit_array_make(s, KJIT_F32, 1, &n),
                   C = kjit_array_make(c, KJIT_F32, 1, &n), P = kjit_array_make(pos, KJIT_BOOL, 1, &n);
        kjit_arg wargs[4] = {kjit_arg_array(&X), kjit_arg_array(&S), kjit_arg_array(&C),
                             kjit_arg_array(&P)};
        ck_assert_msg(kjit_call(wave, wargs, 4, NULL, NULL) == KJIT_OK, "%s",
                      kjit_last_error(context));
        for (int i = 0; i < N; i++) {
            ck_assert_msg(fabsf(s[i] - sinf(x[i])) < 1e-6f && fabsf(c[i] - cosf(x[i])) < 1e-6f,
                          "wave(%g) = %g, %g", x[i], s[i], c[i]);
            ck_assert_int_eq(pos[i], x[i] >= 0);
        }
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

/* --------------------------------------------------- dynamic shared memory */

START_TEST(dynamic_shared_memory)
{
    seed_once();
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        kjit_context *context = make_context(targets[t]);
        kjit_module *module;
        kjit_function *fn =
            load(context, "tests/golden/exec/dynamic_shared.kern", "reverse_blocks", &module);
        const int64_t threads = 64, blocks = 3, n = threads * blocks;
        float x[192], out[192];
        for (int64_t i = 0; i < n; i++)
            x[i] = (float)rng_uniform(&rng, -10, 10);
        kjit_array X = array_of(x, KJIT_F32, n), O = array_of(out, KJIT_F32, n);
        kjit_arg args[2] = {kjit_arg_array(&X), kjit_arg_array(&O)};
        /* the whole block's worth, then half of it: only half the threads
         * find their element */
        for (int half = 0; half < 2; half++) {
            int64_t tile = half ? threads / 2 : threads;
            for (int64_t i = 0; i < n; i++)
                out[i] = -1000;
            launch(fn, (uint32_t)blocks, (uint32_t)threads, args, 2, (size_t)tile * 4);
            for (int64_t i = 0; i < n; i++) {
                int64_t b = i / threads, from = threads - 1 - i % threads;
                float want = from < tile ? x[b * threads + from] : -1000;
                ck_assert_msg(out[i] == want, "%s: tile %lld, out[%lld] = %g, want %g",
                              kjit_target_name(targets[t]), (long long)tile, (long long)i,
                              out[i], want);
            }
        }
        kjit_function *alias;
        ck_assert_int_eq(kjit_module_function(module, "aliasing", &alias), KJIT_OK);
        uint32_t words[64];
        kjit_array W = array_of(words, KJIT_U32, 64);
        kjit_arg wargs[1] = {kjit_arg_array(&W)};
        launch(alias, 2, 32, wargs, 1, 24);
        for (int i = 0; i < 64; i++)
            ck_assert_uint_eq(words[i], (uint32_t)(i % 32 % 4 + 1) + 24 * 1000);

        /* the API's limit */
        uint32_t grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
        kjit_launch_options options;
        kjit_launch_options_init(&options);
        ck_assert_uint_eq(options.dynamic_shared_bytes, 0);
        ck_assert_ptr_null(options.stream);
        options.dynamic_shared_bytes = (size_t)1 << 31;
        ck_assert_int_eq(kjit_launch_ex(alias, grid, block, wargs, 1, &options),
                         KJIT_ERROR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(kjit_last_error(context), "dynamic shared memory"), "%s",
                      kjit_last_error(context));
        /* NULL options are kjit_launch's defaults: len(shared(T)) is 0 */
        for (int64_t i = 0; i < n; i++)
            out[i] = -1000;
        ck_assert_int_eq(kjit_launch_ex(fn, grid, block, args, 2, NULL), KJIT_OK);
        for (int64_t i = 0; i < n; i++)
            ck_assert(out[i] == -1000);
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

Suite *suite_exec(void)
{
    seed_once(); /* here, so that the forked tests share the seed printed once */
    Suite *s = suite_create("exec");
    TCase *tc = tcase_create("exec");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, warp_block_sum_is_bit_exact);
    tcase_add_test(tc, warp_scan_is_bit_exact);
    tcase_add_test(tc, votes_count_only_lanes_still_running);
    tcase_add_test(tc, every_shuffle_on_32_and_64_bits);
    tcase_add_test(tc, block_votes);
    tcase_add_test(tc, heat_equation_with_syncgrid);
    tcase_add_test(tc, mismatched_barriers_are_an_error);
    tcase_add_test(tc, collectives_in_device_functions);
    tcase_add_test(tc, dynamic_shared_memory);
    tcase_add_test(tc, local_sized_at_launch);
    tcase_add_test(tc, several_outputs);
    suite_add_tcase(s, tc);
    return s;
}
