/* test_barrier_split.c: kernels with syncthreads() on the cpu targets run
 * through their split form (barrier_split.c: loops over the block's threads
 * between barriers) and give the fiber path's answers bit for bit
 * (KJIT_CPU_SIMD=0, kjit_options.cpu_simd = 0), and a reference's: tree
 * reductions over block sizes 1 to 1024, values of several types (f16 and
 * complex too) across barriers in 3-D blocks, a shared-memory scan, barriers
 * under uniform ifs and loops, atomics in the fibers' order, regions on
 * SIMD lanes (varying loops and ifs, calls, gathers, masked tails) and the
 * vector code they make.  Kernels whose
 * barriers sit under varying control flow are refused by the pass and stay
 * on fibers, still correct. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kjit.h"
#include "kjit_compiler.h"
#include "kjit_tools.h"
#include "fixture.h"
#include "ir_fixture.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double uniform01(void)
{
    return (double)(next_random() >> 11) / 9007199254740992.0;
}

/* ------------------------------------------------------------ the pass */

/* Whether the pass splits `kernel` of `source`; *why says why not. */
static bool splits(const char *source, const char *kernel, const char **why_out)
{
    Compiled *cp = compile_ir(source);
    KjIrFunction *fn = compiled_function(cp, kernel);
    const char *why = NULL;
    KjIrFunction *split = kj_barrier_split(cp->module, fn, &why);
    if (split) {
        char *problem = NULL;
        ck_assert_msg(kj_ir_verify(cp->module, &problem), "%s", problem ? problem : "");
    }
    static char reason[256];
    snprintf(reason, sizeof reason, "%s", why ? why : "");
    if (why_out)
        *why_out = reason;
    compiled_free(cp);
    return split != NULL;
}

/* ------------------------------------------------------------ running */

enum { MAX_ARGS = 8 };

typedef struct Launch {
    const char *source, *kernel;
    uint32_t grid[3], block[3];
    int count;
    kjit_arg args[MAX_ARGS];
    kjit_array arrays[MAX_ARGS]; /* .data NULL: args[i] is a scalar */
    bool block_order[MAX_ARGS];  /* depends on the order of the blocks (parallel differs) */
} Launch;

static void add_array(Launch *l, void *data, kjit_dtype dtype, int64_t n)
{
    l->arrays[l->count] = kjit_array_make(data, dtype, 1, &n);
    l->count++;
}

static void add_scalar(Launch *l, kjit_arg arg)
{
    l->args[l->count] = arg;
    l->arrays[l->count].data = NULL;
    l->count++;
}

static size_t array_bytes(const kjit_array *a)
{
    size_t count = 1;
    for (int d = 0; d < a->ndim; d++)
        count *= (size_t)a->shape[d];
    return count * kjit_dtype_size(a->dtype);
}

/* Runs the launch on copies of its arrays; the copies are returned. */
static void **run_on(const Launch *l, kjit_target target, int cpu_simd)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = 3;
    options.cpu_simd = cpu_simd;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    kjit_module *module;
    ck_assert_msg(kjit_compile_string(context, "split.kern", l->source, &module) == KJIT_OK, "%s",
                  kjit_last_error(context));
    kjit_function *fn;
    ck_assert_int_eq(kjit_module_function(module, l->kernel, &fn), KJIT_OK);
    void **copies = calloc(MAX_ARGS, sizeof *copies);
    kjit_array arrays[MAX_ARGS];
    kjit_arg args[MAX_ARGS];
    for (int i = 0; i < l->count; i++) {
        if (!l->arrays[i].data) {
            args[i] = l->args[i];
            continue;
        }
        arrays[i] = l->arrays[i];
        copies[i] = malloc(array_bytes(&arrays[i]));
        memcpy(copies[i], l->arrays[i].data, array_bytes(&arrays[i]));
        arrays[i].data = copies[i];
        args[i] = kjit_arg_array(&arrays[i]);
    }
    ck_assert_msg(kjit_launch(fn, l->grid, l->block, args, l->count, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
    kjit_module_free(module);
    kjit_context_destroy(context);
    return copies;
}

static void free_copies(const Launch *l, void **copies)
{
    for (int i = 0; i < l->count; i++)
        free(copies[i]);
    free(copies);
}

/* Runs on the split form (cpu and parallel) and on fibers; every array must
 * come out the same bytes.  The split run on cpu is written back into the
 * launch's arrays for the caller's reference check. */
static void run_and_compare(Launch *l)
{
    void **fibers = run_on(l, KJIT_TARGET_CPU, 0);
    void **split = run_on(l, KJIT_TARGET_CPU, 1);
    void **parallel = run_on(l, KJIT_TARGET_PARALLEL, 1);
    for (int i = 0; i < l->count; i++) {
        if (!l->arrays[i].data)
            continue;
        size_t bytes = array_bytes(&l->arrays[i]);
        ck_assert_msg(memcmp(fibers[i], split[i], bytes) == 0,
                      "%s, block %ux%ux%u: argument %d differs between fibers and the split form",
                      l->kernel, l->block[0], l->block[1], l->block[2], i);
        ck_assert_msg(l->block_order[i] || memcmp(fibers[i], parallel[i], bytes) == 0,
                      "%s, block %ux%ux%u: argument %d differs between fibers and parallel",
                      l->kernel, l->block[0], l->block[1], l->block[2], i);
        memcpy(l->arrays[i].data, split[i], bytes);
    }
    free_copies(l, fibers);
    free_copies(l, split);
    free_copies(l, parallel);
}

/* ------------------------------------------------------- tree reduction */

/* The block's values padded with zeros to a power of two, summed in a tree
 * whose barriers sit in a uniform while loop. */
static const char tree_source[] =
    "@kernel\n"
    "fn tree_sum(a: f32[], out: f32[]) {\n"
    "    let sh = shared(f32, 2048);\n"
    "    let t = threadIdx.x;\n"
    "    let n = blockDim.x;\n"
    "    let p = 1;\n"
    "    while p < n { p = p * 2; }\n"
    "    let i = blockIdx.x * n + t;\n"
    "    sh[t] = i < len(a) ? a[i] : 0.0;\n"
    "    sh[t + n] = 0.0;\n"
    "    syncthreads();\n"
    "    let s = p / 2;\n"
    "    while s > 0 {\n"
    "        if t < s { sh[t] += sh[t + s]; }\n"
    "        syncthreads();\n"
    "        s = s / 2;\n"
    "    }\n"
    "    if t == 0 { out[blockIdx.x] = sh[0]; }\n"
    "}\n";

static float tree_reference(const float *a, int64_t n, int64_t first, int threads)
{
    int p = 1;
    while (p < threads)
        p *= 2;
    float sh[2048] = {0};
    for (int t = 0; t < threads; t++)
        sh[t] = first + t < n ? a[first + t] : 0.0f;
    for (int s = p / 2; s > 0; s /= 2)
        for (int t = 0; t < s; t++)
            sh[t] += sh[t + s];
    return sh[0];
}

START_TEST(tree_reduction_over_block_sizes)
{
    ck_assert(splits(tree_source, "tree_sum", NULL));
    const int sizes[] = {1, 3, 32, 33, 256, 1024};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int threads = sizes[k];
        int64_t n = 5 * threads + threads / 2 + 1;
        int64_t blocks = (n + threads - 1) / threads;
        float *a = malloc(sizeof *a * (size_t)n), *out = calloc((size_t)blocks, sizeof *out);
        for (int64_t i = 0; i < n; i++)
            a[i] = (float)(uniform01() * 2.0 - 1.0);
        Launch l = {.source = tree_source, .kernel = "tree_sum",
                    .grid = {(uint32_t)blocks, 1, 1}, .block = {(uint32_t)threads, 1, 1}};
        add_array(&l, a, KJIT_F32, n);
        add_array(&l, out, KJIT_F32, blocks);
        run_and_compare(&l);
        for (int64_t b = 0; b < blocks; b++) {
            float want = tree_reference(a, n, b * threads, threads);
            ck_assert_msg(memcmp(&out[b], &want, sizeof want) == 0,
                          "block size %d, block %lld: %.9g, the reference %.9g", threads,
                          (long long)b, out[b], want);
        }
        free(a);
        free(out);
    }
}
END_TEST

/* ------------------------------------------- values across barriers, 3-D */

/* Values of six types made before the barriers and used after them, in 3-D
 * blocks; each thread also reads a neighbour's value through shared memory. */
static const char mixed_source[] =
    "@kernel\n"
    "fn mixed(a: f64[], of: f32[], od: f64[], oi: i64[], oc: c64[], oh: f16[], ob: bool[]) {\n"
    "    let sh = shared(f64, 1024);\n"
    "    let count = blockDim.x * blockDim.y * blockDim.z;\n"
    "    let lin = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);\n"
    "    let g = blockIdx.x * count + lin;\n"
    "    let x = a[g];\n"
    "    let f = f32(x) * 1.5;\n"
    "    let k = i64(x * 1000.0);\n"
    "    let c = complex(f, -f);\n"
    "    let h = f16(x);\n"
    "    let flag = x > 0.5;\n"
    "    sh[lin] = x;\n"
    "    syncthreads();\n"
    "    let nb = sh[(lin + 1) % count];\n"
    "    syncthreads();\n"
    "    sh[lin] = nb * 2.0;\n"
    "    syncthreads();\n"
    "    of[g] = f + f32(sh[(lin + count - 1) % count]);\n"
    "    od[g] = x + nb;\n"
    "    oi[g] = k * 2 + i64(lin);\n"
    "    oc[g] = c * c;\n"
    "    oh[g] = h;\n"
    "    ob[g] = flag != (nb > 0.5);\n"
    "}\n";

START_TEST(values_of_several_types_live_across_barriers)
{
    ck_assert(splits(mixed_source, "mixed", NULL));
    const uint32_t shapes[][3] = {{4, 3, 2}, {1, 1, 1}, {8, 8, 16}, {3, 5, 7}, {33, 1, 1}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const uint32_t *b = shapes[k];
        int64_t count = (int64_t)b[0] * b[1] * b[2], blocks = 3, n = blocks * count;
        double *a = malloc(sizeof *a * (size_t)n), *od = calloc((size_t)n, sizeof *od);
        float *of = calloc((size_t)n, sizeof *of), *oc = calloc((size_t)(2 * n), sizeof *oc);
        int64_t *oi = calloc((size_t)n, sizeof *oi);
        uint16_t *oh = calloc((size_t)n, sizeof *oh);
        uint8_t *ob = calloc((size_t)n, sizeof *ob);
        for (int64_t i = 0; i < n; i++)
            a[i] = uniform01();
        Launch l = {.source = mixed_source, .kernel = "mixed", .grid = {(uint32_t)blocks, 1, 1},
                    .block = {b[0], b[1], b[2]}};
        add_array(&l, a, KJIT_F64, n);
        add_array(&l, of, KJIT_F32, n);
        add_array(&l, od, KJIT_F64, n);
        add_array(&l, oi, KJIT_I64, n);
        add_array(&l, oc, KJIT_C64, n);
        add_array(&l, oh, KJIT_F16, n);
        add_array(&l, ob, KJIT_BOOL, n);
        run_and_compare(&l);
        for (int64_t blk = 0; blk < blocks; blk++)
            for (int64_t lin = 0; lin < count; lin++) {
                int64_t g = blk * count + lin;
                double x = a[g], nb = a[blk * count + (lin + 1) % count];
                double before = a[blk * count + lin] * 2.0; /* the previous thread's nb */
                float f = (float)x * 1.5f;
                float want_f = f + (float)before;
                ck_assert_msg(of[g] == want_f, "f32 at %lld: %.9g vs %.9g", (long long)g, of[g],
                              want_f);
                ck_assert(od[g] == x + nb);
                ck_assert_int_eq(oi[g], (int64_t)(x * 1000.0) * 2 + lin);
                /* (f - if)^2 = -2if^2, to a rounding (LLVM may fuse its products) */
                ck_assert(fabsf(oc[2 * g]) <= 1e-6f * f * f &&
                          fabsf(oc[2 * g + 1] + 2.0f * f * f) <= 1e-6f * f * f);
                ck_assert_int_eq(oh[g], kjit_half_from_double(KJIT_F16, x));
                ck_assert_int_eq(ob[g], (x > 0.5) != (nb > 0.5));
            }
        free(a), free(od), free(of), free(oc), free(oi), free(oh), free(ob);
    }
}
END_TEST

/* ------------------------------------------------------------- scan */

/* Hillis and Steele's inclusive scan: the value read before the barrier is
 * added after it (a per-thread value across a barrier, in a uniform loop). */
static const char scan_source[] =
    "@kernel\n"
    "fn scan(a: i32[], out: i32[]) {\n"
    "    let sh = shared(i32, 1024);\n"
    "    let t = threadIdx.x;\n"
    "    let i = blockIdx.x * blockDim.x + t;\n"
    "    sh[t] = i < len(a) ? a[i] : 0;\n"
    "    syncthreads();\n"
    "    let d = 1;\n"
    "    while d < blockDim.x {\n"
    "        let v = t >= d ? sh[t - d] : 0;\n"
    "        syncthreads();\n"
    "        sh[t] += v;\n"
    "        syncthreads();\n"
    "        d = d * 2;\n"
    "    }\n"
    "    if i < len(a) { out[i] = sh[t]; }\n"
    "}\n";

START_TEST(shared_memory_scan)
{
    ck_assert(splits(scan_source, "scan", NULL));
    const int sizes[] = {1, 3, 32, 33, 256, 1024};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int threads = sizes[k];
        int64_t n = 4 * threads - 1, blocks = (n + threads - 1) / threads;
        int32_t *a = malloc(sizeof *a * (size_t)n), *out = calloc((size_t)n, sizeof *out);
        for (int64_t i = 0; i < n; i++)
            a[i] = (int32_t)(next_random() % 2001) - 1000;
        Launch l = {.source = scan_source, .kernel = "scan", .grid = {(uint32_t)blocks, 1, 1},
                    .block = {(uint32_t)threads, 1, 1}};
        add_array(&l, a, KJIT_I32, n);
        add_array(&l, out, KJIT_I32, n);
        run_and_compare(&l);
        int32_t running = 0;
        for (int64_t i = 0; i < n; i++) {
            running = i % threads == 0 ? a[i] : running + a[i];
            ck_assert_msg(out[i] == running, "block size %d, element %lld: %d vs %d", threads,
                          (long long)i, out[i], running);
        }
        free(a);
        free(out);
    }
}
END_TEST

/* ---------------------------------------- uniform ifs, loops, atomics */

/* Barriers under an if on blockIdx and in a loop over a scalar parameter;
 * a device function; float atomics into one element, whose sum depends on
 * the threads' order (the fibers' order, thread by thread). */
static const char uniform_source[] =
    "fn twice(x: f64) -> f64 { return x + x; }\n"
    "@kernel\n"
    "fn rounds(a: f64[], out: f64[], total: f32[], r: i32) {\n"
    "    let sh = shared(f64, 256);\n"
    "    let t = threadIdx.x;\n"
    "    let n = blockDim.x;\n"
    "    let acc = a[blockIdx.x * n + t];\n"
    "    for k in range(r) {\n"
    "        sh[t] = acc;\n"
    "        syncthreads();\n"
    "        if blockIdx.x % 2 == 0 {\n"
    "            acc = acc + sh[(t + 1) % n];\n"
    "            syncthreads();\n"
    "            sh[t] = twice(acc);\n"
    "            syncthreads();\n"
    "            acc = sh[(t + n - 1) % n] * 0.25;\n"
    "        } else {\n"
    "            acc = acc - sh[(t + 2) % n] * 0.5;\n"
    "        }\n"
    "        syncthreads();\n"
    "        atomic_add(total, 0, f32(acc) * 0.001);\n"
    "    }\n"
    "    out[blockIdx.x * n + t] = acc;\n"
    "}\n";

START_TEST(barriers_under_uniform_ifs_and_loops)
{
    ck_assert(splits(uniform_source, "rounds", NULL));
    const int sizes[] = {1, 3, 32, 33, 256};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int threads = sizes[k], blocks = 4, rounds = 3;
        int64_t n = (int64_t)threads * blocks;
        double *a = malloc(sizeof *a * (size_t)n), *out = calloc((size_t)n, sizeof *out);
        float total = 0;
        for (int64_t i = 0; i < n; i++)
            a[i] = uniform01() - 0.5;
        Launch l = {.source = uniform_source, .kernel = "rounds", .grid = {(uint32_t)blocks, 1, 1},
                    .block = {(uint32_t)threads, 1, 1}};
        add_array(&l, a, KJIT_F64, n);
        add_array(&l, out, KJIT_F64, n);
        add_array(&l, &total, KJIT_F32, 1);
        l.block_order[l.count - 1] = true;
        add_scalar(&l, kjit_arg_i32(rounds));
        run_and_compare(&l);
        /* the reference, a block at a time with the same rounding */
        double *acc = malloc(sizeof *acc * (size_t)threads), *sh = malloc(sizeof *sh * (size_t)threads);
        float want_total = 0;
        for (int b = 0; b < blocks; b++) {
            for (int t = 0; t < threads; t++)
                acc[t] = a[b * threads + t];
            for (int r = 0; r < rounds; r++) {
                memcpy(sh, acc, sizeof *sh * (size_t)threads);
                if (b % 2 == 0) {
                    for (int t = 0; t < threads; t++)
                        acc[t] = acc[t] + sh[(t + 1) % threads];
                    for (int t = 0; t < threads; t++)
                        sh[t] = acc[t] + acc[t];
                    for (int t = 0; t < threads; t++)
                        acc[t] = sh[(t + threads - 1) % threads] * 0.25;
                } else {
                    for (int t = 0; t < threads; t++)
                        acc[t] = acc[t] - sh[(t + 2) % threads] * 0.5;
                }
                for (int t = 0; t < threads; t++)
                    want_total += (float)acc[t] * 0.001f;
            }
            for (int t = 0; t < threads; t++)
                ck_assert_msg(out[b * threads + t] == acc[t], "block size %d: %.17g vs %.17g",
                              threads, out[b * threads + t], acc[t]);
        }
        /* cpu runs the blocks in order, so the float sum is the reference's */
        ck_assert_msg(fabsf(total - want_total) <= 1e-5f * (1 + fabsf(want_total)),
                      "total %.9g vs %.9g", total, want_total);
        free(acc);
        free(sh);
        free(a);
        free(out);
    }
}
END_TEST

/* --------------------------------------------------- kept on fibers */

/* A loop bound read from memory (varying as far as the pass can tell), and a
 * return before a barrier: both stay on fibers, and still give the answer. */
static const char fiber_source[] =
    "@kernel\n"
    "fn loaded_bound(a: f32[], m: i32[], out: f32[]) {\n"
    "    let sh = shared(f32, 256);\n"
    "    let t = threadIdx.x;\n"
    "    let v = a[blockIdx.x * blockDim.x + t];\n"
    "    for k in range(m[0]) {\n"
    "        sh[t] = v;\n"
    "        syncthreads();\n"
    "        v = v + sh[(t + 1) % blockDim.x];\n"
    "        syncthreads();\n"
    "    }\n"
    "    out[blockIdx.x * blockDim.x + t] = v;\n"
    "}\n"
    "@kernel\n"
    "fn early_return(a: f32[], out: f32[]) {\n"
    "    let sh = shared(f32, 256);\n"
    "    let t = threadIdx.x;\n"
    "    sh[t] = a[t];\n"
    "    if t >= 200 { return; }\n"
    "    syncthreads();\n"
    "    out[t] = sh[(t + 1) % 200];\n"
    "}\n";

/* A kernel without barriers gets a split form (one region, for the code of
 * a launch's block shape) only when it has no loop, no call and at most four
 * loads; its answers
 * are the fibers' and the general code's, on a ragged 2-D grid of 32 x 8
 * blocks whose inner blocks pass their bounds test and whose edges do not. */
static const char *plain_source =
    "fn twice(x: i32) -> i32 { return x * 2; }\n"
    "@kernel fn inc2(a: i32[,], b: i32[,]) {\n"
    "    let j, i = grid(2);\n"
    "    if i < a.shape[0] && j < a.shape[1] { b[i, j] = a[i, j] + 1; }\n"
    "}\n"
    "@kernel fn looped(a: i32[], b: i32[]) {\n"
    "    let i = grid(1);\n"
    "    for k in range(3) { if i < len(a) { b[i] += a[i]; } }\n"
    "}\n"
    "@kernel fn calls(a: i32[], b: i32[]) {\n"
    "    let i = grid(1);\n"
    "    if i < len(a) { b[i] = twice(a[i]); }\n"
    "}\n"
    "@kernel fn seven_loads(a: i32[], b: i32[]) {\n"
    "    let i = grid(1);\n"
    "    if i > 2 && i + 3 < len(a) {\n"
    "        b[i] = a[i - 3] + a[i - 2] + a[i - 1] + a[i] + a[i + 1] + a[i + 2] + a[i + 3];\n"
    "    }\n"
    "}\n"
    "@kernel fn six_loads(a: i32[], b: i32[]) {\n"
    "    let i = grid(1);\n"
    "    if i > 2 && i + 2 < len(a) { b[i] = a[i - 3] + a[i - 2] + a[i - 1] + a[i] + a[i + 1] + a[i + 2]; }\n"
    "}\n"
    "@kernel fn four_loads(a: i32[], b: i32[]) {\n"
    "    let i = grid(1);\n"
    "    if i > 1 && i + 1 < len(a) { b[i] = a[i - 2] + a[i - 1] + a[i] + a[i + 1]; }\n"
    "}\n";

START_TEST(straight_line_kernels_split_into_one_region)
{
    const char *why = NULL;
    ck_assert(splits(plain_source, "inc2", &why));
    ck_assert(!splits(plain_source, "looped", &why));
    ck_assert_msg(strstr(why, "no syncthreads()"), "%s", why);
    ck_assert(!splits(plain_source, "calls", &why));
    ck_assert(!splits(plain_source, "seven_loads", &why)); /* KJ_SPLIT_PLAIN_LOADS is 6 */
    ck_assert(splits(plain_source, "six_loads", &why));
    ck_assert(splits(plain_source, "four_loads", &why));

    /* b is larger than a, so a thread past a's bounds that ran unguarded
     * would leave a mark */
    enum { ROWS = 21, COLS = 77, BROWS = ROWS + 8, BCOLS = COLS + 32 };
    int32_t a[ROWS * COLS], b[BROWS * BCOLS];
    for (int i = 0; i < ROWS * COLS; i++)
        a[i] = (int32_t)(next_random() % 1000) - 500;
    for (int i = 0; i < BROWS * BCOLS; i++)
        b[i] = -1;
    Launch l = {.source = plain_source, .kernel = "inc2", .grid = {(COLS + 31) / 32, (ROWS + 7) / 8, 1},
                .block = {32, 8, 1}};
    int64_t shape[2] = {ROWS, COLS}, bshape[2] = {BROWS, BCOLS};
    l.arrays[0] = kjit_array_make(a, KJIT_I32, 2, shape);
    l.arrays[1] = kjit_array_make(b, KJIT_I32, 2, bshape);
    l.count = 2;
    run_and_compare(&l);
    for (int i = 0; i < BROWS; i++)
        for (int j = 0; j < BCOLS; j++)
            ck_assert_int_eq(b[i * BCOLS + j], i < ROWS && j < COLS ? a[i * COLS + j] + 1 : -1);
}
END_TEST

/* A block on the grid's edge runs the threads of x that pass its guards
 * (split_specialise.c's x_split): an upper bound (< and <=), a lower one (>=
 * and >, either side of the compare), an index made in 32 bits, and forms
 * whose failing threads do something (an else, an early return), which keep
 * the masked region.  b is wider than the grid (every thread's element is
 * in it), and every element must come out as the general code and the
 * fibers leave it, on grids whose edge blocks cut x at every offset of a
 * chunk, of 2 to 6 blocks a row (block by block, and a row of threads at a
 * time along the grid's row: kj_codegen_rows_first). */
static const char *edge_source =
    "@kernel fn band(a: i32[,], b: i32[,], lo: i64, hi: i64) {\n"
    "    let j, i = grid(2);\n"
    "    if j >= lo && i < a.shape[0] && j <= hi { b[i, j] = a[i, j] * 3; }\n"
    "}\n"
    "@kernel fn swapped(a: i32[,], b: i32[,], lo: i64, hi: i64) {\n"
    "    let j, i = grid(2);\n"
    "    if lo < j && hi > j && i < a.shape[0] { b[i, j] = a[i, j] - 7; }\n"
    "}\n"
    "@kernel fn narrow(a: i32[,], b: i32[,], lo: i64, hi: i64) {\n"
    "    let j = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    let i = blockIdx.y * blockDim.y + threadIdx.y;\n"
    "    if i < a.shape[0] && j < hi { b[i, j] = a[i, j] + 5; }\n"
    "}\n"
    "@kernel fn other_side(a: i32[,], b: i32[,], lo: i64, hi: i64) {\n"
    "    let j, i = grid(2);\n"
    "    if i < a.shape[0] && j < hi { b[i, j] = a[i, j] + 1; }\n"
    "    else if i < a.shape[0] { b[i, j] = 9; }\n"
    "}\n"
    "@kernel fn early(a: i32[,], b: i32[,], lo: i64, hi: i64) {\n"
    "    let j, i = grid(2);\n"
    "    if j >= hi || i >= a.shape[0] { return; }\n"
    "    b[i, j] = a[i, j] * 2;\n"
    "}\n";

START_TEST(edge_blocks_run_the_threads_that_pass)
{
    const char *kernels[] = {"band", "swapped", "narrow", "other_side", "early"};
    enum { ROWS = 19, COLS = 75, BCOLS = COLS + 64 };
    const uint32_t blocks[][3] = {{32, 8, 1}, {24, 4, 1}, {64, 2, 1}, {13, 6, 1}};
    const int64_t bands[][2] = {{0, COLS - 1}, {5, 60}, {17, 49}, {33, 34}, {40, 20}};
    int32_t a[ROWS * COLS], b[ROWS * BCOLS];
    for (int i = 0; i < ROWS * COLS; i++)
        a[i] = (int32_t)(next_random() % 1000) - 500;
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++)
        for (size_t s = 0; s < sizeof blocks / sizeof blocks[0]; s++)
            for (size_t w = 0; w < sizeof bands / sizeof bands[0]; w++) {
                for (int i = 0; i < ROWS * BCOLS; i++)
                    b[i] = -1;
                Launch l = {.source = edge_source, .kernel = kernels[k],
                            .grid = {(COLS + blocks[s][0] - 1) / blocks[s][0],
                                     (ROWS + blocks[s][1] - 1) / blocks[s][1], 1},
                            .block = {blocks[s][0], blocks[s][1], blocks[s][2]}};
                int64_t shape[2] = {ROWS, COLS}, bshape[2] = {ROWS, BCOLS};
                l.arrays[0] = kjit_array_make(a, KJIT_I32, 2, shape);
                l.arrays[1] = kjit_array_make(b, KJIT_I32, 2, bshape);
                l.count = 2;
                /* a reads a's row i at j < hi only: hi <= COLS */
                add_scalar(&l, kjit_arg_i64(bands[w][0]));
                add_scalar(&l, kjit_arg_i64(k == 0 || k == 1 ? bands[w][1] : bands[w][1] + 1));
                run_and_compare(&l);
                for (int i = 0; i < ROWS; i++)
                    for (int j = 0; j < BCOLS; j++) {
                        int64_t lo = bands[w][0], hi = bands[w][1];
                        int32_t want = -1, got = b[i * BCOLS + j];
                        if (k == 0 && j >= lo && j <= hi)
                            want = a[i * COLS + j] * 3;
                        else if (k == 1 && j > lo && j < hi)
                            want = a[i * COLS + j] - 7;
                        else if (k == 2 && j <= hi)
                            want = a[i * COLS + j] + 5;
                        else if (k == 3 && j <= hi)
                            want = a[i * COLS + j] + 1;
                        else if (k == 3 && j < (int)(l.grid[0] * blocks[s][0]))
                            want = 9;
                        else if (k == 4 && j <= hi)
                            want = a[i * COLS + j] * 2;
                        ck_assert_msg(got == want, "%s, block %ux%ux%u, band [%lld, %lld]: b[%d, %d] is %d, want %d",
                                      kernels[k], blocks[s][0], blocks[s][1], blocks[s][2], (long long)lo,
                                      (long long)hi, i, j, got, want);
                    }
            }
}
END_TEST

START_TEST(barriers_under_varying_control_stay_on_fibers)
{
    const char *why = NULL;
    ck_assert(!splits(fiber_source, "loaded_bound", &why));
    ck_assert_msg(strstr(why, "differ between threads"), "%s", why);
    ck_assert(!splits(fiber_source, "early_return", &why));
    ck_assert_msg(strstr(why, "differ") || strstr(why, "return"), "%s", why);

    enum { THREADS = 64, BLOCKS = 3, N = THREADS * BLOCKS, ROUNDS = 3 };
    float a[N], out[N] = {0};
    int32_t m = ROUNDS;
    for (int i = 0; i < N; i++)
        a[i] = (float)(next_random() % 100);
    Launch l = {.source = fiber_source, .kernel = "loaded_bound", .grid = {BLOCKS, 1, 1},
                .block = {THREADS, 1, 1}};
    add_array(&l, a, KJIT_F32, N);
    add_array(&l, &m, KJIT_I32, 1);
    add_array(&l, out, KJIT_F32, N);
    run_and_compare(&l);
    for (int b = 0; b < BLOCKS; b++) {
        float v[THREADS], sh[THREADS];
        for (int t = 0; t < THREADS; t++)
            v[t] = a[b * THREADS + t];
        for (int r = 0; r < ROUNDS; r++) {
            memcpy(sh, v, sizeof sh);
            for (int t = 0; t < THREADS; t++)
                v[t] = v[t] + sh[(t + 1) % THREADS];
        }
        for (int t = 0; t < THREADS; t++)
            ck_assert(out[b * THREADS + t] == v[t]); /* integers: exact */
    }
}
END_TEST

/* ------------------------------------------------ barriers in helpers */

/* Device functions that call syncthreads(), written into the kernel by
 * inline_barriers.c before the split: a tree sum returning its value, a
 * helper that returns early on a uniform test (its later barriers under
 * the flag's if), one helper calling another, and a parameter the helper
 * assigns.  Refused, and so on fibers: a call inside an expression, a
 * return inside a helper's loop. */
/* A block's tree sum in shared memory, as a helper that calls syncthreads()
 * (here and in first_thread_source below). */
#define TREE_HELPER \
    "fn tree(sh: f32[], t: i32, n: i32) -> f32 {\n" \
    "    let s = n / 2;\n" \
    "    while s > 0 {\n" \
    "        if t < s { sh[t] += sh[t + s]; }\n" \
    "        syncthreads();\n" \
    "        s = s / 2;\n" \
    "    }\n" \
    "    return sh[0];\n" \
    "}\n"

static const char helper_source[] =
    TREE_HELPER
    "fn load_and_sum(sh: f32[], a: f32[], i: i32, t: i32, scale: f32) -> f32 {\n"
    "    if scale == 0.0 { return 0.0; }\n"
    "    sh[t] = i < len(a) ? a[i] * scale : 0.0;\n"
    "    syncthreads();\n"
    "    scale = scale + 1.0;\n"
    "    let r = tree(sh, t, blockDim.x);\n"
    "    return r + scale;\n"
    "}\n"
    "@kernel\n"
    "fn helper_sum(a: f32[], sums: f32[], scale: f32) {\n"
    "    let sh = shared(f32, 1024);\n"
    "    let t = threadIdx.x;\n"
    "    let i = blockIdx.x * blockDim.x + t;\n"
    "    let total = load_and_sum(sh, a, i, t, scale);\n"
    "    syncthreads();\n"
    "    if t == 0 { sums[blockIdx.x] = total; }\n"
    "}\n"
    "@kernel\n"
    "fn in_expression(a: f32[], sums: f32[]) {\n"
    "    let sh = shared(f32, 1024);\n"
    "    let t = threadIdx.x;\n"
    "    sh[t] = a[t];\n"
    "    syncthreads();\n"
    "    let total = 1.0 + tree(sh, t, blockDim.x);\n"
    "    if t == 0 { sums[0] = total; }\n"
    "}\n"
    "fn loop_return(sh: f32[], t: i32) -> f32 {\n"
    "    for k in range(0, 4) {\n"
    "        syncthreads();\n"
    "        if sh[k] > 1.0 { return sh[k]; }\n"
    "    }\n"
    "    return 0.0;\n"
    "}\n"
    "@kernel\n"
    "fn returns_in_loop(a: f32[], sums: f32[]) {\n"
    "    let sh = shared(f32, 1024);\n"
    "    let t = threadIdx.x;\n"
    "    sh[t] = a[t];\n"
    "    let r = loop_return(sh, t);\n"
    "    if t == 0 { sums[0] = r; }\n"
    "}\n";

START_TEST(barriers_in_helpers_are_written_in)
{
    const char *why = NULL;
    ck_assert_msg(splits(helper_source, "helper_sum", &why), "%s", why);
    ck_assert(!splits(helper_source, "in_expression", &why));
    ck_assert_msg(strstr(why, "inside an expression"), "%s", why);
    ck_assert(!splits(helper_source, "returns_in_loop", &why));
    ck_assert_msg(strstr(why, "inside a loop"), "%s", why);

    const uint32_t threads[] = {1, 7, 64, 256};
    const float scales[] = {2.0f, 0.0f};
    for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++)
        for (size_t c = 0; c < 2; c++) {
            enum { BLOCKS = 3 };
            int64_t n = BLOCKS * threads[k] - threads[k] / 2;
            float *a = malloc(sizeof *a * (size_t)n), sums[BLOCKS] = {0};
            for (int64_t i = 0; i < n; i++)
                a[i] = (float)(next_random() % 1000);
            Launch l = {.source = helper_source, .kernel = "helper_sum", .grid = {BLOCKS, 1, 1},
                        .block = {threads[k], 1, 1}};
            add_array(&l, a, KJIT_F32, n);
            add_array(&l, sums, KJIT_F32, BLOCKS);
            add_scalar(&l, kjit_arg_f32(scales[c]));
            run_and_compare(&l);
            for (int b = 0; b < BLOCKS; b++) {
                /* the tree over the block (a power of two or not: the
                 * helper halves blockDim as written); integers: exact */
                float want = 0;
                if (scales[c] != 0) {
                    float sh[1024] = {0};
                    for (uint32_t t = 0; t < threads[k]; t++) {
                        int64_t i = (int64_t)b * threads[k] + t;
                        sh[t] = i < n ? a[i] * scales[c] : 0.0f;
                    }
                    for (int s = (int)threads[k] / 2; s > 0; s /= 2)
                        for (int t = 0; t < s; t++)
                            sh[t] += sh[t + s];
                    want = sh[0] + scales[c] + 1.0f;
                }
                ck_assert_msg(sums[b] == want, "block %d of %u threads, scale %g: %g, want %g", b,
                              threads[k], scales[c], sums[b], want);
            }
            free(a);
        }
}
END_TEST

/* e's value when it is a constant, a cast of one or a sum of such: else -2. */
static int64_t folded(const KjIrExpr *e)
{
    if (e->op == KJ_IR_CONST)
        return (int64_t)e->const_int;
    if (e->op == KJ_IR_CAST)
        return folded(e->args[0]);
    if (e->op == KJ_IR_ADD) {
        int64_t a = folded(e->args[0]), b = folded(e->args[1]);
        return a == -2 || b == -2 ? -2 : a + b;
    }
    return -2;
}

/* The last region of kernel's split form: its threads' range, each end a
 * constant (folded) or -1 where it has none (the block's). */
static void last_region_range(const char *source, const char *kernel, int64_t *start, int64_t *stop)
{
    Compiled *cp = compile_ir(source);
    const char *why = NULL;
    KjIrFunction *split = kj_barrier_split(cp->module, compiled_function(cp, kernel), &why);
    ck_assert_msg(split, "%s: %s", kernel, why ? why : "");
    const KjIrStmt *last = NULL;
    for (int i = 0; i < split->body->stmts.count; i++) {
        const KjIrStmt *st = split->body->stmts.items[i];
        if (st->kind == KJ_IR_STMT_THREADS)
            last = st;
    }
    ck_assert(last);
    *start = last->start ? folded(last->start) : -1;
    *stop = last->stop ? folded(last->stop) : -1;
    compiled_free(cp);
}

/* A helper's result that every thread reads and the first writes (`let
 * total = tree(...); if t == 0 { sums[b] = total; }`, the helper's `return
 * sh[0]` inlined as every thread's load): the load moves into the if, and
 * the last region runs thread 0 alone, as when the kernel writes `if t == 0
 * { sums[b] = sh[0]; }` itself (before, all the block's threads ran it: in
 * checked mode 2.8 times the unchecked call, tests/bench/simd.kern's
 * block_sum_helper).  Not when the value is read by the other threads too,
 * is a load that may fail its check (an array not a shared() tile, or
 * outside the tile), or when the if is not thread 0's.  Each form against
 * the fibers, bit for bit. */
static const char first_thread_source[] =
    TREE_HELPER
    "@kernel\n"
    "fn first(a: f32[], sums: f32[]) {\n"
    "    let sh = shared(f32, 256);\n"
    "    let t = threadIdx.x;\n"
    "    sh[t] = a[blockIdx.x * 256 + t];\n"
    "    syncthreads();\n"
    "    let total = tree(sh, t, 256);\n"
    "    let twice = total * 2.0 + f32(blockIdx.x);\n"
    "    if t == 0 { sums[blockIdx.x] = twice; }\n"
    "}\n"
    "@kernel\n"
    "fn every(a: f32[], sums: f32[]) {\n"
    "    let sh = shared(f32, 256);\n"
    "    let t = threadIdx.x;\n"
    "    sh[t] = a[blockIdx.x * 256 + t];\n"
    "    syncthreads();\n"
    "    let total = tree(sh, t, 256);\n"
    "    if t == 0 { sums[blockIdx.x] = total; }\n"
    "    a[blockIdx.x * 256 + t] = total;\n"
    "}\n"
    "@kernel\n"
    "fn global_load(a: f32[], sums: f32[]) {\n"
    "    let sh = shared(f32, 256);\n"
    "    let t = threadIdx.x;\n"
    "    sh[t] = a[blockIdx.x * 256 + t];\n"
    "    syncthreads();\n"
    "    let total = a[0];\n"
    "    if t == 0 { sums[blockIdx.x] = total; }\n"
    "}\n"
    "@kernel\n"
    "fn past_tile(a: f32[], sums: f32[]) {\n"
    "    let sh = shared(f32, 256);\n"
    "    let t = threadIdx.x;\n"
    "    sh[t] = a[blockIdx.x * 256 + t];\n"
    "    syncthreads();\n"
    "    let total = sh[256];\n"
    "    if t == 0 { sums[blockIdx.x] = total; }\n"
    "}\n"
    "@kernel\n"
    "fn second(a: f32[], sums: f32[]) {\n"
    "    let sh = shared(f32, 256);\n"
    "    let t = threadIdx.x;\n"
    "    sh[t] = a[blockIdx.x * 256 + t];\n"
    "    syncthreads();\n"
    "    let total = tree(sh, t, 256);\n"
    "    if t == 1 { sums[blockIdx.x] = total; }\n"
    "}\n";

START_TEST(first_threads_value_moves_into_its_if)
{
    int64_t start, stop;
    last_region_range(first_thread_source, "first", &start, &stop);
    ck_assert_msg(start == 0 && stop == 1, "first: threads [%lld, %lld)", (long long)start,
                  (long long)stop);
    static const char *const kept[] = {"every", "global_load", "past_tile", "second"};
    for (size_t k = 0; k < sizeof kept / sizeof *kept; k++) {
        last_region_range(first_thread_source, kept[k], &start, &stop);
        ck_assert_msg(!(start == 0 && stop == 1), "%s: narrowed to thread 0", kept[k]);
    }
    static const char *const run[] = {"first", "every", "second"};
    for (size_t k = 0; k < sizeof run / sizeof *run; k++) {
        enum { BLOCKS = 3 };
        float a[BLOCKS * 256], sums[BLOCKS] = {0};
        for (int i = 0; i < BLOCKS * 256; i++)
            a[i] = (float)(next_random() % 1000) * 0.25f;
        Launch l = {.source = first_thread_source, .kernel = run[k], .grid = {BLOCKS, 1, 1},
                    .block = {256, 1, 1}};
        add_array(&l, a, KJIT_F32, BLOCKS * 256);
        add_array(&l, sums, KJIT_F32, BLOCKS);
        run_and_compare(&l);
    }
}
END_TEST

/* ------------------------------------------------ regions on SIMD lanes */

/* Regions that codegen_simd_threads.c runs on SIMD lanes: a loop whose exit
 * varies, a call with a varying argument (its SIMD variant), a varying if,
 * gathers across the block, integer division, a guarded load, a divergent
 * return after the last barrier, per-thread values of three types across
 * barriers in 3-D blocks, a shared() array made after a varying value (in
 * the first region's loop, on each copy of it the same memory); and one
 * region with an f16 value, which the SIMD
 * lowering refuses, between them (its scalar loop). */
static const char lanes_source[] =
    "fn collatz_steps(x: i64) -> i64 {\n"
    "    let n: i64 = 0;\n"
    "    let v = x;\n"
    "    while v > 1 {\n"
    "        if v % 2 == 0 { v = v / 2; } else { v = 3 * v + 1; }\n"
    "        n += 1;\n"
    "    }\n"
    "    return n;\n"
    "}\n"
    "@kernel\n"
    "fn lanes(a: f64[], k: i64[], out: f64[], steps: i64[], halves: f16[]) {\n"
    "    let sh = shared(f64, 1024);\n"
    "    let count = blockDim.x * blockDim.y * blockDim.z;\n"
    "    let lin = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);\n"
    "    let g = blockIdx.x * count + lin;\n"
    "    let late = shared(f64, 1024);\n"
    "    let x = g < len(a) ? a[g] : 0.5;\n"
    "    late[count - 1 - lin] = x;\n"
    "    let zr = 0.0;\n"
    "    let zi = 0.0;\n"
    "    let it = 0;\n"
    "    while it < 64 && zr * zr + zi * zi < 4.0 {\n"
    "        let t = zr * zr - zi * zi + x;\n"
    "        zi = 2.0 * zr * zi + 0.25;\n"
    "        zr = t;\n"
    "        it += 1;\n"
    "    }\n"
    "    let c = collatz_steps(g < len(k) ? k[g] : 7);\n"
    "    sh[lin] = zr + f64(it);\n"
    "    syncthreads();\n"
    "    let nb = sh[(lin + 1) % count];\n"
    "    if lin % 3 == 0 { nb = nb * 2.0; } else { nb = nb - 1.0; }\n"
    "    syncthreads();\n"
    "    let h = f16(nb);\n"
    "    sh[lin] = nb + f64(c) + f64(h);\n"
    "    if g < len(halves) { halves[g] = h; }\n"
    "    syncthreads();\n"
    "    if g >= len(out) { return; }\n"
    "    out[g] = sh[(lin + count - 1) % count] + late[lin] / (1.0 + f64(lin));\n"
    "    steps[g] = c * 3 / (i64(lin) + 1) - i64(it);\n"
    "}\n";

static int64_t collatz_steps(int64_t v)
{
    int64_t n = 0;
    while (v > 1) {
        v = v % 2 == 0 ? v / 2 : 3 * v + 1;
        n++;
    }
    return n;
}

START_TEST(regions_on_lanes_over_block_shapes)
{
    ck_assert(splits(lanes_source, "lanes", NULL));
    const uint32_t shapes[][3] = {{1, 1, 1}, {3, 1, 1}, {32, 1, 1}, {33, 1, 1}, {256, 1, 1},
                                  {1024, 1, 1}, {5, 3, 2}, {8, 4, 4}, {9, 2, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const uint32_t *b = shapes[s];
        int64_t count = (int64_t)b[0] * b[1] * b[2], blocks = 3;
        int64_t n = blocks * count - count / 3; /* the last block partly outside the arrays */
        double *a = malloc(sizeof *a * (size_t)n), *out = calloc((size_t)n, sizeof *out);
        int64_t *k = malloc(sizeof *k * (size_t)n), *steps = calloc((size_t)n, sizeof *steps);
        uint16_t *halves = calloc((size_t)n, sizeof *halves);
        for (int64_t i = 0; i < n; i++) {
            a[i] = uniform01() * 2.5 - 2.0;
            k[i] = (int64_t)(next_random() % 100000) + 1;
        }
        Launch l = {.source = lanes_source, .kernel = "lanes", .grid = {(uint32_t)blocks, 1, 1},
                    .block = {b[0], b[1], b[2]}};
        add_array(&l, a, KJIT_F64, n);
        add_array(&l, k, KJIT_I64, n);
        add_array(&l, out, KJIT_F64, n);
        add_array(&l, steps, KJIT_I64, n);
        add_array(&l, halves, KJIT_F16, n);
        run_and_compare(&l);
        /* the reference, a block at a time */
        double *sh = malloc(sizeof *sh * (size_t)count), *nbs = malloc(sizeof *nbs * (size_t)count);
        double *xs = malloc(sizeof *xs * (size_t)count);
        int64_t *cs = malloc(sizeof *cs * (size_t)count), *its = malloc(sizeof *its * (size_t)count);
        for (int64_t blk = 0; blk < blocks; blk++) {
            for (int64_t lin = 0; lin < count; lin++) {
                int64_t g = blk * count + lin;
                double x = g < n ? a[g] : 0.5, zr = 0, zi = 0;
                int it = 0;
                while (it < 64 && zr * zr + zi * zi < 4.0) {
                    double t = zr * zr - zi * zi + x;
                    zi = 2.0 * zr * zi + 0.25;
                    zr = t;
                    it++;
                }
                xs[lin] = x;
                its[lin] = it;
                cs[lin] = collatz_steps(g < n ? k[g] : 7);
                sh[lin] = zr + it;
            }
            for (int64_t lin = 0; lin < count; lin++) {
                double nb = sh[(lin + 1) % count];
                nbs[lin] = lin % 3 == 0 ? nb * 2.0 : nb - 1.0;
            }
            for (int64_t lin = 0; lin < count; lin++) {
                uint16_t h = kjit_half_from_double(KJIT_F16, nbs[lin]);
                sh[lin] = nbs[lin] + (double)cs[lin] + kjit_half_to_double(KJIT_F16, h);
            }
            for (int64_t lin = 0; lin < count; lin++) {
                int64_t g = blk * count + lin;
                if (g >= n)
                    continue;
                double want = sh[(lin + count - 1) % count] + xs[count - 1 - lin] / (1.0 + (double)lin);
                ck_assert_msg(memcmp(&out[g], &want, sizeof want) == 0,
                              "block %ux%ux%u, element %lld: %.17g, the reference %.17g", b[0], b[1], b[2],
                              (long long)g, out[g], want);
                ck_assert_int_eq(steps[g], cs[lin] * 3 / (lin + 1) - its[lin]);
                ck_assert_int_eq(halves[g], kjit_half_from_double(KJIT_F16, nbs[lin]));
            }
        }
        free(sh), free(nbs), free(xs), free(cs), free(its);
        free(a), free(out), free(k), free(steps), free(halves);
    }
}
END_TEST

/* Compares of a widened i32 or u32 with a uniform i64 (made in the narrow
 * type on lanes) against bounds in and outside the narrow range, in a
 * region before a barrier; the answers go through shared memory. */
static const char compare_source[] =
    "@kernel\n"
    "fn compares(u: i64, out: u8[]) {\n"
    "    let sh = shared(i32, 1024);\n"
    "    let t = threadIdx.x;\n"
    "    let x = (t - 53) * 40000000 + blockIdx.x;\n"
    "    let y = u32(t) * 40000000 + u32(blockIdx.x);\n"
    "    let bits: i32 = 0;\n"
    "    if i64(x) < u { bits = bits | 1; }\n"
    "    if i64(x) <= u { bits = bits | 2; }\n"
    "    if i64(x) > u { bits = bits | 4; }\n"
    "    if i64(x) >= u { bits = bits | 8; }\n"
    "    if i64(x) == u { bits = bits | 16; }\n"
    "    if i64(x) != u { bits = bits | 32; }\n"
    "    if u < i64(y) { bits = bits | 64; }\n"
    "    if i64(y) <= u { bits = bits | 128; }\n"
    "    if u == i64(y) { bits = bits | 256; }\n"
    "    sh[t] = bits;\n"
    "    syncthreads();\n"
    "    let v = sh[(t + 1) % blockDim.x];\n"
    "    out[2 * (blockIdx.x * blockDim.x + t)] = u8(v & 255);\n"
    "    out[2 * (blockIdx.x * blockDim.x + t) + 1] = u8(v >> 8);\n"
    "}\n";

START_TEST(narrow_compares_on_lanes)
{
    ck_assert(splits(compare_source, "compares", NULL));
    const int64_t bounds[] = {-((int64_t)1 << 40), (int64_t)INT32_MIN - 1, INT32_MIN, (int64_t)INT32_MIN + 1,
                              -1, 0, 5, -53 * 40000000 + 1, INT32_MAX, (int64_t)INT32_MAX + 1,
                              (int64_t)UINT32_MAX, (int64_t)UINT32_MAX + 1, (int64_t)1 << 40, 40000001};
    enum { THREADS = 107, BLOCKS = 2, N = THREADS * BLOCKS };
    for (size_t k = 0; k < sizeof bounds / sizeof bounds[0]; k++) {
        int64_t u = bounds[k];
        uint8_t out[2 * N] = {0};
        Launch l = {.source = compare_source, .kernel = "compares", .grid = {BLOCKS, 1, 1},
                    .block = {THREADS, 1, 1}};
        add_scalar(&l, kjit_arg_i64(u));
        add_array(&l, out, KJIT_U8, 2 * N);
        run_and_compare(&l);
        for (int b = 0; b < BLOCKS; b++)
            for (int t = 0; t < THREADS; t++) {
                int n = (t + 1) % THREADS; /* the neighbour whose bits t wrote */
                int64_t x = (int64_t)(n - 53) * 40000000 + b;
                int64_t y = (int64_t)n * 40000000 + b;
                int want = (x < u) | (x <= u) << 1 | (x > u) << 2 | (x >= u) << 3 | (x == u) << 4 |
                           (x != u) << 5 | (u < y) << 6 | (y <= u) << 7 | (u == y) << 8;
                int got = out[2 * (b * THREADS + t)] | out[2 * (b * THREADS + t) + 1] << 8;
                ck_assert_msg(got == want, "u %lld, block %d, thread %d: bits %#x, want %#x", (long long)u,
                              b, t, got, want);
            }
    }
}
END_TEST

/* The text of function `name` in assembly (from its label to the next
 * .Lfunc_end label); NULL if there is none. */
static char *function_text(const char *asm_text, const char *name)
{
    char label[256];
    snprintf(label, sizeof label, "\n%s:", name);
    const char *start = strstr(asm_text, label);
    if (!start)
        return NULL;
    const char *end = strstr(start + 1, "\n.Lfunc_end");
    ck_assert(end);
    char *text = malloc((size_t)(end - start) + 1);
    memcpy(text, start, (size_t)(end - start));
    text[end - start] = '\0';
    return text;
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* The assembly of `function` in the .kern file `path` (source, when path is
 * NULL, written to a file first), with the SIMD lowering on or off, as the
 * runtime compiles it for any block dims with KJIT_CPU_SPECIALISE=0. */
static char *function_asm(const char *path, const char *source, const char *function, bool cpu_simd)
{
    char temp[] = "/tmp/kjit_split_XXXXXX.kern";
    if (!path) {
        fixture_temp_file(temp, 5, source);
        path = temp;
    }
    kjit_stage_options options;
    kjit_stage_options_init(&options);
    options.cpu_simd = cpu_simd;
    options.cpu_specialise = false; /* the split form's general __block */
    char *bytes = NULL, *error = NULL;
    size_t size = 0;
    ck_assert_msg(kjit_stage_file(path, KJIT_STAGE_ASM, &options, &bytes, &size, &error) == KJIT_OK, "%s",
                  error ? error : "?");
    if (path == temp)
        remove(temp);
    char *text = function_text(bytes, function);
    free(bytes);
    return text;
}

/* The split form's regions are on lanes: the block sum's adds are packed
 * (its tree's levels below a vector's width under masks, not a scalar
 * loop's adds), and so are the multiplies of an escape-time loop between
 * barriers, which LLVM's loop vectoriser cannot take (its exit varies). */
START_TEST(split_regions_are_simd_code)
{
    char *sum = function_asm("tests/bench/block_sum_barriers.kern", NULL, "block_sum__block", true);
    ck_assert_msg(sum, "no __block: the kernel was not split");
    ck_assert_msg(count_of(sum, "addps") >= 2 && count_of(sum, "addss") == 0,
                  "block_sum__block: %d packed and %d scalar f32 adds", count_of(sum, "addps"),
                  count_of(sum, "addss"));
    free(sum);
    char *lanes = function_asm(NULL, lanes_source, "lanes__block", true);
    ck_assert(lanes);
    ck_assert_msg(count_of(lanes, "mulpd") >= 3, "lanes__block: %d packed f64 multiplies",
                  count_of(lanes, "mulpd"));
    free(lanes);
    /* KJIT_CPU_SIMD=0: fibers, no split form and no __block */
    ck_assert(!function_asm("tests/bench/block_sum_barriers.kern", NULL, "block_sum__block", false));
}
END_TEST

/* ------------------------------------ values remade from variables (issue 22) */

/* sy and sx cross the barrier and are remade from their definitions; those
 * read x and y, which the later region never assigns: they must be remade
 * too, or the region reads the last thread's.  The 2-D shared halo stencil
 * of a ported Jacobi relaxation, exactly as it was reported. */
static const char halo_source[] =
    "@kernel\n"
    "fn relax(a: f64[,], b: f64[,], e: f64[,]) {\n"
    "    let t = shared(f64, 34, 34);\n"
    "    let x = threadIdx.x; let y = threadIdx.y;\n"
    "    let i = blockIdx.x * blockDim.x + x;\n"
    "    let j = blockIdx.y * blockDim.y + y;\n"
    "    let n = a.shape[0]; let m = a.shape[1];\n"
    "    let sy = y + 1; let sx = x + 1;\n"
    "    if j < n && i < m {\n"
    "        t[sy, sx] = a[j, i];\n"
    "        if x == 0 && i >= 1 { t[sy, 0] = a[j, i - 1]; }\n"
    "        if x == 31 && i + 1 < m { t[sy, 33] = a[j, i + 1]; }\n"
    "        if y == 0 && j >= 1 { t[0, sx] = a[j - 1, i]; }\n"
    "        if y == 31 && j + 1 < n { t[33, sx] = a[j + 1, i]; }\n"
    "    }\n"
    "    syncthreads();\n"
    "    if j >= 1 && j < n - 1 && i >= 1 && i < m - 1 {\n"
    "        b[j, i] = 0.25 * (t[sy, sx + 1] + t[sy, sx - 1] + t[sy - 1, sx] + t[sy + 1, sx]);\n"
    "        e[j, i] = b[j, i] - a[j, i];\n"
    "    }\n"
    "}\n";

START_TEST(remade_values_read_remade_variables)
{
    ck_assert(splits(halo_source, "relax", NULL));
    enum { N = 64 };
    static double a[N * N], b[N * N], e[N * N];
    for (int k = 0; k < N * N; k++) {
        a[k] = uniform01() * 2.0 - 1.0;
        b[k] = e[k] = 0.0;
    }
    Launch l = {.source = halo_source, .kernel = "relax", .grid = {2, 2, 1}, .block = {32, 32, 1}};
    int64_t shape[2] = {N, N};
    double *arrays[3] = {a, b, e};
    for (int k = 0; k < 3; k++) {
        l.arrays[l.count] = kjit_array_make(arrays[k], KJIT_F64, 2, shape);
        l.count++;
    }
    run_and_compare(&l);
    for (int j = 0; j < N; j++)
        for (int i = 0; i < N; i++) {
            double want = 0.0;
            if (j >= 1 && j < N - 1 && i >= 1 && i < N - 1)
                want = 0.25 * (a[j * N + i + 1] + a[j * N + i - 1] + a[(j - 1) * N + i] + a[(j + 1) * N + i]);
            ck_assert_msg(b[j * N + i] == want, "b[%d, %d] = %.17g, not %.17g", j, i, b[j * N + i], want);
        }
}
END_TEST

/* A u32 index made before a barrier loop and updated (p += n): the final
 * region's g is remade from t, which only the first region assigns. */
static const char hillis_steele_source[] =
    "@kernel\n"
    "fn prefix(dst: u32[], src: u32[], n: u32) {\n"
    "    let buf = shared(u32, 512);\n"
    "    let t = u32(threadIdx.x);\n"
    "    let g = i64(blockIdx.x) * i64(blockDim.x) + i64(t);\n"
    "    let v = src[g];\n"
    "    let p = 2 * t - (t & (n - 1));\n"
    "    buf[p] = 0;\n"
    "    p += n;\n"
    "    buf[p] = v;\n"
    "    let off: u32 = 1;\n"
    "    while off < n {\n"
    "        syncthreads();\n"
    "        let s = buf[p] + buf[p - off];\n"
    "        syncthreads();\n"
    "        buf[p] = s;\n"
    "        off <<= 1;\n"
    "    }\n"
    "    dst[g] = buf[p] - v;\n"
    "}\n";

START_TEST(hillis_steele_scan_across_barrier_loop)
{
    ck_assert(splits(hillis_steele_source, "prefix", NULL));
    enum { N = 1024, T = 256 };
    static uint32_t src[N], dst[N];
    for (int k = 0; k < N; k++) {
        src[k] = (uint32_t)(next_random() % 1000);
        dst[k] = 0;
    }
    Launch l = {.source = hillis_steele_source, .kernel = "prefix", .grid = {N / T, 1, 1},
                .block = {T, 1, 1}};
    add_array(&l, dst, KJIT_U32, N);
    add_array(&l, src, KJIT_U32, N);
    add_scalar(&l, (kjit_arg){.kind = KJIT_ARG_SCALAR, .dtype = KJIT_U32, .value.u = T});
    run_and_compare(&l);
    uint32_t running = 0;
    for (int k = 0; k < N; k++) {
        if (k % T == 0)
            running = 0;
        ck_assert_msg(dst[k] == running, "element %d: %u, not %u", k, dst[k], running);
        running += src[k];
    }
}
END_TEST

/* A uniform variable set before the barrier and, under a uniform if, after
 * it, then compared by threads that return: the split form copies it back
 * to its scalar slot after each region, and the return in the last region
 * made that copy look divergent, so the lanes kept the variable in vector
 * slots of their own, zero at each region's start (campaign seed 600903). */
static const char uniform_copy_source[] =
    "@kernel\n"
    "fn pick(out: i16[], n: i32) {\n"
    "    let g = grid(1);\n"
    "    let v: i32 = -1;\n"
    "    syncthreads();\n"
    "    if n == 0 { v = 0; }\n"
    "    if i32(threadIdx.x) != v { return; }\n"
    "    out[g] = 0;\n"
    "}\n";

START_TEST(uniform_copy_after_a_returning_region)
{
    ck_assert(splits(uniform_copy_source, "pick", NULL));
    enum { N = 512, T = 256 };
    for (int n = 0; n < 2; n++) {
        static int16_t out[N];
        for (int k = 0; k < N; k++)
            out[k] = 7;
        Launch l = {.source = uniform_copy_source, .kernel = "pick", .grid = {N / T, 1, 1},
                    .block = {T, 1, 1}};
        add_array(&l, out, KJIT_I16, N);
        add_scalar(&l, (kjit_arg){.kind = KJIT_ARG_SCALAR, .dtype = KJIT_I32, .value.i = n});
        run_and_compare(&l);
        for (int k = 0; k < N; k++) /* n == 0: thread 0 of each block stores; else none */
            ck_assert_msg(out[k] == (n == 0 && k % T == 0 ? 0 : 7), "n %d, element %d: %d", n, k, out[k]);
    }
}
END_TEST

Suite *suite_barrier_split(void)
{
    Suite *s = suite_create("barrier_split");
    TCase *c = tcase_create("split");
    tcase_set_timeout(c, 120);
    tcase_add_test(c, tree_reduction_over_block_sizes);
    tcase_add_test(c, values_of_several_types_live_across_barriers);
    tcase_add_test(c, shared_memory_scan);
    tcase_add_test(c, barriers_under_uniform_ifs_and_loops);
    tcase_add_test(c, barriers_under_varying_control_stay_on_fibers);
    tcase_add_test(c, straight_line_kernels_split_into_one_region);
    tcase_add_test(c, edge_blocks_run_the_threads_that_pass);
    tcase_add_test(c, barriers_in_helpers_are_written_in);
    tcase_add_test(c, first_threads_value_moves_into_its_if);
    tcase_add_test(c, regions_on_lanes_over_block_shapes);
    tcase_add_test(c, narrow_compares_on_lanes);
    tcase_add_test(c, split_regions_are_simd_code);
    tcase_add_test(c, remade_values_read_remade_variables);
    tcase_add_test(c, hillis_steele_scan_across_barrier_loop);
    tcase_add_test(c, uniform_copy_after_a_returning_region);
    suite_add_tcase(s, c);
    return s;
}
