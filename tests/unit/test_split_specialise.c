/* test_split_specialise.c: kernels with barriers on the cpu targets run code
 * compiled for their launch's block dims (split_specialise.c: blockDim a
 * constant, the loops between barriers unrolled where their trip counts
 * become constant; runtime/runtime_cpu.c keeps one such __block per shape).
 * Each kernel is launched with block shapes of 1, 2 and 3 dimensions, sizes
 * that are no multiple of the SIMD width, 1 thread and 1024, on fresh
 * random inputs, and must give the bits of the code for any shape
 * (kjit_options.cpu_specialise = 0), of the fibers (cpu_simd = 0) and of a
 * reference: a float tree summed in the kernel's order, checked in turn
 * against the float64 sum; integer folds against C.  A kernel launched
 * again with another shape runs the other shape's code, and a tree whose
 * bound comes from an argument (no unrolling) stays right. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kjit.h"
#include "kjit_tools.h"
#include "rng.h"

static uint64_t rng;

enum { MAX_ARGS = 4 };

typedef struct Run {
    kjit_context *context;
    kjit_module *module;
    kjit_function *fn;
} Run;

/* A context of `target`: cpu_simd and cpu_specialise as asked. */
static Run open_run(const char *source, const char *kernel, kjit_target target, int simd, int specialise)
{
    Run r;
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = 3;
    options.cpu_simd = simd;
    options.cpu_specialise = specialise;
    ck_assert_int_eq(kjit_context_create(&options, &r.context), KJIT_OK);
    ck_assert_msg(kjit_compile_string(r.context, "spec.kern", source, &r.module) == KJIT_OK, "%s",
                  kjit_last_error(r.context));
    ck_assert_int_eq(kjit_module_function(r.module, kernel, &r.fn), KJIT_OK);
    return r;
}

static void close_run(Run *r)
{
    kjit_module_free(r->module);
    kjit_context_destroy(r->context);
}

/* Launches r's kernel on copies of `arrays` (scalars in `scalars` where
 * arrays[i].data is NULL) and returns the copies. */
static void **launch_copies(Run *r, const uint32_t grid[3], const uint32_t block[3], const kjit_array *arrays,
                            const kjit_arg *scalars, int count)
{
    void **copies = calloc(MAX_ARGS, sizeof *copies);
    kjit_array local[MAX_ARGS];
    kjit_arg args[MAX_ARGS];
    for (int i = 0; i < count; i++) {
        if (!arrays[i].data) {
            args[i] = scalars[i];
            continue;
        }
        size_t bytes = (size_t)arrays[i].shape[0] * kjit_dtype_size(arrays[i].dtype);
        local[i] = arrays[i];
        copies[i] = malloc(bytes);
        memcpy(copies[i], arrays[i].data, bytes);
        local[i].data = copies[i];
        args[i] = kjit_arg_array(&local[i]);
    }
    ck_assert_msg(kjit_launch(r->fn, grid, block, args, count, NULL) == KJIT_OK, "%s",
                  kjit_last_error(r->context));
    return copies;
}

/* One launch in five ways: specialised on cpu and parallel, unspecialised,
 * on fibers (cpu_simd 0); every array must come out the same bytes.  The
 * specialised cpu run's arrays are copied back into `arrays`. */
static void run_five_ways(const char *source, const char *kernel, const uint32_t grid[3],
                          const uint32_t block[3], kjit_array *arrays, const kjit_arg *scalars, int count)
{
    struct { kjit_target target; int simd, specialise; const char *name; } ways[] = {
        {KJIT_TARGET_CPU, 1, 1, "cpu, specialised"},
        {KJIT_TARGET_PARALLEL, 1, 1, "parallel, specialised"},
        {KJIT_TARGET_CPU, 1, 0, "cpu, any shape"},
        {KJIT_TARGET_PARALLEL, 1, 0, "parallel, any shape"},
        {KJIT_TARGET_CPU, 0, 0, "fibers"},
    };
    void **first = NULL;
    for (size_t w = 0; w < sizeof ways / sizeof ways[0]; w++) {
        Run r = open_run(source, kernel, ways[w].target, ways[w].simd, ways[w].specialise);
        void **copies = launch_copies(&r, grid, block, arrays, scalars, count);
        close_run(&r);
        if (!first) {
            first = copies;
            continue;
        }
        for (int i = 0; i < count; i++) {
            if (!arrays[i].data)
                continue;
            size_t bytes = (size_t)arrays[i].shape[0] * kjit_dtype_size(arrays[i].dtype);
            ck_assert_msg(memcmp(first[i], copies[i], bytes) == 0,
                          "%s, block %ux%ux%u: argument %d differs between %s and %s", kernel, block[0],
                          block[1], block[2], i, ways[0].name, ways[w].name);
            free(copies[i]);
        }
        free(copies);
    }
    for (int i = 0; i < count; i++) {
        if (!arrays[i].data)
            continue;
        memcpy(arrays[i].data, first[i], (size_t)arrays[i].shape[0] * kjit_dtype_size(arrays[i].dtype));
        free(first[i]);
    }
    free(first);
}

/* ------------------------------------------------------ trees over blockDim */

/* A tree over blockDim.x threads of any count: n halves (rounding up) at each
 * level, thread t adding t + ceil(n/2) for t < n/2.  Its trip count is a
 * constant once blockDim is. */
static const char tree_source[] =
    "@kernel\n"
    "fn tree(a: f32[], out: f32[]) {\n"
    "    let sh = shared(f32, 1024);\n"
    "    let t = threadIdx.x;\n"
    "    let i = blockIdx.x * blockDim.x + t;\n"
    "    sh[t] = i < len(a) ? a[i] : 0.0;\n"
    "    syncthreads();\n"
    "    let n = blockDim.x;\n"
    "    while n > 1 {\n"
    "        let h = (n + 1) / 2;\n"
    "        if t < n / 2 { sh[t] += sh[t + h]; }\n"
    "        syncthreads();\n"
    "        n = h;\n"
    "    }\n"
    "    if t == 0 { out[blockIdx.x] = sh[0]; }\n"
    "}\n"
    "\n"
    "@kernel\n"
    "fn tree_arg(a: f32[], out: f32[], m: i32) {\n"
    "    let sh = shared(f32, 1024);\n"
    "    let t = threadIdx.x;\n"
    "    let i = blockIdx.x * blockDim.x + t;\n"
    "    sh[t] = i < len(a) ? a[i] : 0.0;\n"
    "    syncthreads();\n"
    "    let s = m / 2;\n"
    "    while s > 0 {\n"
    "        if t < s && t + s < blockDim.x { sh[t] += sh[t + s]; }\n"
    "        syncthreads();\n"
    "        s = s / 2;\n"
    "    }\n"
    "    if t == 0 { out[blockIdx.x] = sh[0]; }\n"
    "}\n";

/* The kernel `tree`'s sum of a[first, first + threads), in its order. */
static float tree_reference(const float *a, int64_t len, int64_t first, int threads)
{
    float sh[1024];
    for (int t = 0; t < threads; t++)
        sh[t] = first + t < len ? a[first + t] : 0.0f;
    for (int n = threads; n > 1;) {
        int h = (n + 1) / 2;
        for (int t = 0; t < n / 2; t++)
            sh[t] += sh[t + h];
        n = h;
    }
    return sh[0];
}

/* The kernel `tree_arg`'s, m a power of two at least threads. */
static float tree_arg_reference(const float *a, int64_t len, int64_t first, int threads, int m)
{
    float sh[1024];
    for (int t = 0; t < threads; t++)
        sh[t] = first + t < len ? a[first + t] : 0.0f;
    for (int s = m / 2; s > 0; s /= 2)
        for (int t = 0; t < s && t + s < threads; t++)
            sh[t] += sh[t + s];
    return sh[0];
}

/* A float sum of `count` values against the float64 one: within
 * (levels + 1) roundings of the sum of magnitudes. */
static void check_against_f64(float got, const float *a, int64_t len, int64_t first, int count)
{
    double exact = 0.0, magnitude = 0.0;
    for (int t = 0; t < count && first + t < len; t++) {
        exact += a[first + t];
        magnitude += fabs(a[first + t]);
    }
    double levels = count > 1 ? ceil(log2(count)) : 0.0;
    ck_assert_msg(fabs((double)got - exact) <= (levels + 1.0) * 0x1p-24 * magnitude,
                  "%.9g against the float64 sum %.17g", got, exact);
}

static const int tree_sizes[] = {1, 3, 8, 9, 33, 100, 256, 1000, 1024};

START_TEST(tree_over_block_sizes)
{
    rng_seed(&rng, "split_specialise");
    for (size_t k = 0; k < sizeof tree_sizes / sizeof tree_sizes[0]; k++) {
        int threads = tree_sizes[k];
        int64_t len = 3 * threads + threads / 2 + 1;
        uint32_t blocks = (uint32_t)((len + threads - 1) / threads);
        float *a = malloc(sizeof *a * (size_t)len), *out = calloc(blocks, sizeof *out);
        for (int64_t i = 0; i < len; i++)
            a[i] = (float)rng_uniform(&rng, -1.0, 1.0);
        kjit_array arrays[2] = {kjit_array_make(a, KJIT_F32, 1, &len),
                                kjit_array_make(out, KJIT_F32, 1, &(int64_t){blocks})};
        run_five_ways(tree_source, "tree", (uint32_t[3]){blocks, 1, 1}, (uint32_t[3]){(uint32_t)threads, 1, 1},
                      arrays, NULL, 2);
        for (uint32_t b = 0; b < blocks; b++) {
            float want = tree_reference(a, len, (int64_t)b * threads, threads);
            ck_assert_msg(memcmp(&out[b], &want, sizeof want) == 0,
                          "block size %d, block %u: %.9g, the reference %.9g", threads, b, out[b], want);
            check_against_f64(out[b], a, len, (int64_t)b * threads, threads);
        }
        free(a);
        free(out);
    }
}
END_TEST

/* A bound that comes from an argument: the loop stays a loop, still right. */
START_TEST(tree_with_a_bound_from_an_argument)
{
    rng_seed(&rng, "split_specialise");
    for (size_t k = 0; k < sizeof tree_sizes / sizeof tree_sizes[0]; k++) {
        int threads = tree_sizes[k], m = 1;
        while (m < threads)
            m *= 2;
        int64_t len = 2 * threads + 5;
        uint32_t blocks = (uint32_t)((len + threads - 1) / threads);
        float *a = malloc(sizeof *a * (size_t)len), *out = calloc(blocks, sizeof *out);
        for (int64_t i = 0; i < len; i++)
            a[i] = (float)rng_uniform(&rng, -1.0, 1.0);
        kjit_array arrays[3] = {kjit_array_make(a, KJIT_F32, 1, &len),
                                kjit_array_make(out, KJIT_F32, 1, &(int64_t){blocks}), {0}};
        kjit_arg scalars[3] = {{0}, {0}, kjit_arg_i32(m)};
        run_five_ways(tree_source, "tree_arg", (uint32_t[3]){blocks, 1, 1},
                      (uint32_t[3]){(uint32_t)threads, 1, 1}, arrays, scalars, 3);
        for (uint32_t b = 0; b < blocks; b++) {
            float want = tree_arg_reference(a, len, (int64_t)b * threads, threads, m);
            ck_assert_msg(memcmp(&out[b], &want, sizeof want) == 0,
                          "block size %d, block %u: %.9g, the reference %.9g", threads, b, out[b], want);
            check_against_f64(out[b], a, len, (int64_t)b * threads, threads);
        }
        free(a);
        free(out);
    }
}
END_TEST

/* ------------------------------------------------------- 2-D and 3-D blocks */

/* A tree over the block's linear index in 2-D and 3-D blocks, in f64. */
static const char linear_source[] =
    "@kernel\n"
    "fn linear_tree(a: f64[], out: f64[]) {\n"
    "    let sh = shared(f64, 1024);\n"
    "    let count = blockDim.x * blockDim.y * blockDim.z;\n"
    "    let lin = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);\n"
    "    let g = blockIdx.x * count + lin;\n"
    "    sh[lin] = a[g] * f64(threadIdx.z + 1) - f64(threadIdx.y);\n"
    "    syncthreads();\n"
    "    let n = count;\n"
    "    while n > 1 {\n"
    "        let h = (n + 1) / 2;\n"
    "        if lin < n / 2 { sh[lin] += sh[lin + h]; }\n"
    "        syncthreads();\n"
    "        n = h;\n"
    "    }\n"
    "    out[g] = sh[0] + f64(lin);\n"
    "}\n";

START_TEST(linear_tree_over_block_shapes)
{
    rng_seed(&rng, "split_specialise");
    const uint32_t shapes[][3] = {{4, 3, 2}, {1, 1, 1}, {8, 8, 16}, {3, 5, 7}, {32, 32, 1}, {1, 9, 1}, {1, 1, 6}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const uint32_t *b = shapes[k];
        int count = (int)(b[0] * b[1] * b[2]);
        int64_t blocks = 3, len = blocks * count;
        double *a = malloc(sizeof *a * (size_t)len), *out = calloc((size_t)len, sizeof *out);
        for (int64_t i = 0; i < len; i++)
            a[i] = rng_uniform(&rng, -1.0, 1.0);
        kjit_array arrays[2] = {kjit_array_make(a, KJIT_F64, 1, &len), kjit_array_make(out, KJIT_F64, 1, &len)};
        run_five_ways(linear_source, "linear_tree", (uint32_t[3]){(uint32_t)blocks, 1, 1}, b, arrays, NULL, 2);
        for (int64_t blk = 0; blk < blocks; blk++) {
            double sh[1024];
            for (int lin = 0; lin < count; lin++) {
                int y = (int)((lin / (int)b[0]) % (int)b[1]), z = lin / (int)(b[0] * b[1]);
                sh[lin] = a[blk * count + lin] * (double)(z + 1) - (double)y;
            }
            for (int n = count; n > 1;) {
                int h = (n + 1) / 2;
                for (int t = 0; t < n / 2; t++)
                    sh[t] += sh[t + h];
                n = h;
            }
            for (int lin = 0; lin < count; lin++) {
                double want = sh[0] + (double)lin;
                ck_assert_msg(memcmp(&out[blk * count + lin], &want, sizeof want) == 0,
                              "block %ux%ux%u, thread %d: %.17g, the reference %.17g", b[0], b[1], b[2], lin,
                              out[blk * count + lin], want);
            }
        }
        free(a);
        free(out);
    }
}
END_TEST

/* ------------------------------------------------------ grids of blocks */

/* Every block of a grid of three dims in one array, indexed by its linear
 * number from blockIdx and gridDim, with a tree over the block.  Specialised
 * code runs a chunk of blocks in one call (__blocks), stepping blockIdx from
 * the chunk's first block, which on the pool can start mid-row of the grid. */
static const char grid_source[] =
    "@kernel\n"
    "fn grid_tree(a: f64[], out: f64[], where: i32[]) {\n"
    "    let sh = shared(f64, 1024);\n"
    "    let count = blockDim.x * blockDim.y * blockDim.z;\n"
    "    let lin = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);\n"
    "    let blk = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);\n"
    "    sh[lin] = a[blk * count + lin] * f64(blockIdx.y + 1) - f64(blockIdx.z);\n"
    "    syncthreads();\n"
    "    let n = count;\n"
    "    while n > 1 {\n"
    "        let h = (n + 1) / 2;\n"
    "        if lin < n / 2 { sh[lin] += sh[lin + h]; }\n"
    "        syncthreads();\n"
    "        n = h;\n"
    "    }\n"
    "    if lin == 0 {\n"
    "        out[blk] = sh[0];\n"
    "        where[blk] = blockIdx.x + 100 * blockIdx.y + 10000 * blockIdx.z;\n"
    "    }\n"
    "}\n";

START_TEST(grids_of_several_dims)
{
    rng_seed(&rng, "split_specialise");
    /* 7x5x3 blocks of 64 threads is enough threads for the pool (3 threads,
     * chunks of 9 blocks: most start mid-row); the others stay on one thread */
    const uint32_t grids[][3] = {{7, 5, 3}, {1, 4, 5}, {3, 1, 2}, {11, 1, 1}};
    const uint32_t blocks_of[][3] = {{8, 4, 2}, {16, 1, 1}, {5, 3, 1}, {100, 1, 1}};
    for (size_t k = 0; k < sizeof grids / sizeof grids[0]; k++) {
        const uint32_t *gd = grids[k], *b = blocks_of[k];
        int count = (int)(b[0] * b[1] * b[2]);
        int64_t blocks = (int64_t)gd[0] * gd[1] * gd[2], len = blocks * count;
        double *a = malloc(sizeof *a * (size_t)len);
        double *out = calloc((size_t)len, sizeof *out);
        int32_t *where = calloc((size_t)len, sizeof *where);
        for (int64_t i = 0; i < len; i++)
            a[i] = rng_uniform(&rng, -1.0, 1.0);
        for (int64_t i = 0; i < len; i++)
            where[i] = -1;
        kjit_array arrays[3] = {kjit_array_make(a, KJIT_F64, 1, &len), kjit_array_make(out, KJIT_F64, 1, &len),
                                kjit_array_make(where, KJIT_I32, 1, &len)};
        run_five_ways(grid_source, "grid_tree", gd, b, arrays, NULL, 3);
        for (int64_t blk = 0; blk < blocks; blk++) {
            int x = (int)(blk % gd[0]), y = (int)(blk / gd[0] % gd[1]), z = (int)(blk / ((int64_t)gd[0] * gd[1]));
            double sh[1024];
            for (int lin = 0; lin < count; lin++)
                sh[lin] = a[blk * count + lin] * (double)(y + 1) - (double)z;
            for (int n = count; n > 1;) {
                int h = (n + 1) / 2;
                for (int t = 0; t < n / 2; t++)
                    sh[t] += sh[t + h];
                n = h;
            }
            ck_assert_msg(memcmp(&out[blk], &sh[0], sizeof sh[0]) == 0,
                          "grid %ux%ux%u, block %lld: %.17g, the reference %.17g", gd[0], gd[1], gd[2],
                          (long long)blk, out[blk], sh[0]);
            ck_assert_msg(where[blk] == x + 100 * y + 10000 * z, "grid %ux%ux%u, block %lld ran as %d",
                          gd[0], gd[1], gd[2], (long long)blk, where[blk]);
        }
        for (int64_t i = blocks; i < len; i++)
            ck_assert_msg(out[i] == 0.0 && where[i] == -1, "grid %ux%ux%u: element %lld written", gd[0], gd[1],
                          gd[2], (long long)i);
        free(a);
        free(out);
        free(where);
    }
}
END_TEST

/* ------------------------------------------------------ integer folding */

/* Integer values of blockDim folded in several types (wrapping, division by
 * 0 and -1, shifts), some deciding a barrier's if. */
static const char ints_source[] =
    "@kernel\n"
    "fn ints(out: i64[]) {\n"
    "    let sh = shared(i64, 1024);\n"
    "    let bx = blockDim.x;\n"
    "    let q = (bx - 7) / -2;\n"
    "    let r = (bx * 3) % -5;\n"
    "    let u = u32(bx) - u32(9);\n"
    "    let v = i64(u >> u32(1));\n"
    "    let b8 = i8(bx * 37);\n"
    "    let sr = (0 - bx) >> 2;\n"
    "    let sr64 = (0 - i64(bx) * 3) >> 3;\n"
    "    let z = bx / (bx - bx);\n"
    "    let m1 = bx % (bx - bx - 1);\n"
    "    let d1 = bx / (bx - bx - 1);\n"
    "    let big = (bx << 24) * 200;\n"
    "    let t = threadIdx.x;\n"
    "    sh[t] = i64(q) + i64(r) * 1000 + v;\n"
    "    syncthreads();\n"
    "    if r < -1 && u > u32(100) {\n"
    "        sh[t] += 1;\n"
    "        syncthreads();\n"
    "    }\n"
    "    out[blockIdx.x * bx + t] = sh[(t + 1) % bx] * 7 + i64(b8) + i64(sr) + i64(z) * 100000 +\n"
    "        i64(m1) + i64(d1) * 10 + i64(big) + sr64 * 1000003;\n"
    "}\n";

START_TEST(integer_values_of_blockdim_fold)
{
    const int sizes[] = {1, 2, 7, 8, 9, 13, 64, 100, 1024};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int bx = sizes[k];
        int64_t blocks = 2, len = blocks * bx;
        int64_t *out = calloc((size_t)len, sizeof *out);
        kjit_array arrays[1] = {kjit_array_make(out, KJIT_I64, 1, &len)};
        run_five_ways(ints_source, "ints", (uint32_t[3]){(uint32_t)blocks, 1, 1}, (uint32_t[3]){(uint32_t)bx, 1, 1},
                      arrays, NULL, 1);
        /* C for the parts C defines alike; z, m1, d1 as kjit defines them
         * (a divisor 0 or -1 divides as 1, then x / -1 is -x) */
        int32_t q = (bx - 7) / -2, r = (bx * 3) % -5;
        uint32_t u = (uint32_t)bx - 9u;
        int64_t v = (int64_t)(u >> 1);
        int8_t b8 = (int8_t)(uint8_t)(bx * 37);
        int32_t sr = (0 - bx) >> 2;
        int64_t sr64 = (0 - (int64_t)bx * 3) >> 3;
        int32_t z = bx, m1 = 0, d1 = -bx;
        int32_t big = (int32_t)(((uint32_t)bx << 24) * 200u);
        int64_t cell = (int64_t)q + (int64_t)r * 1000 + v + (r < -1 && u > 100u ? 1 : 0);
        for (int64_t g = 0; g < len; g++) {
            int64_t want = cell * 7 + b8 + sr + (int64_t)z * 100000 + m1 + (int64_t)d1 * 10 + big + sr64 * 1000003;
            ck_assert_msg(out[g] == want, "block size %d, thread %lld: %lld, C %lld", bx, (long long)g,
                          (long long)out[g], (long long)want);
        }
        free(out);
    }
}
END_TEST

/* ------------------------------------------------ guards near wrapping */

/* Guards `i < n` on indices that wrap within the block (i64 and i32): a
 * region runs without its guard only when no thread's index wraps. */
static const char edge_source[] =
    "@kernel\n"
    "fn edge64(out: i32[], base: i64, n: i64) {\n"
    "    let sh = shared(i32, 1024);\n"
    "    let t = threadIdx.x;\n"
    "    let i = base + i64(threadIdx.x);\n"
    "    sh[t] = i < n ? i32(1) : i32(2);\n"
    "    syncthreads();\n"
    "    out[blockIdx.x * blockDim.x + t] = sh[t] + sh[(t + 1) % blockDim.x] * 10;\n"
    "}\n"
    "\n"
    "@kernel\n"
    "fn edge32(out: i32[], base: i32, n: i64) {\n"
    "    let sh = shared(i32, 1024);\n"
    "    let t = threadIdx.x;\n"
    "    let i = base + threadIdx.x;\n"
    "    if i64(i) < n { sh[t] = i32(1); } else { sh[t] = i32(2); }\n"
    "    syncthreads();\n"
    "    out[blockIdx.x * blockDim.x + t] = sh[t] + sh[(t + 1) % blockDim.x] * 10;\n"
    "}\n";

START_TEST(guards_on_indices_that_wrap)
{
    const int64_t bases64[] = {INT64_MAX - 2, INT64_MAX - 40, 5, -3, INT64_MIN};
    const int32_t bases32[] = {INT32_MAX - 2, INT32_MAX - 40, 5, -3, INT32_MIN};
    const int64_t limits[] = {10, INT64_MAX, INT64_MIN, (int64_t)INT32_MAX + 5};
    const int sizes[] = {8, 33};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t b = 0; b < sizeof bases64 / sizeof bases64[0]; b++)
            for (size_t l = 0; l < sizeof limits / sizeof limits[0]; l++)
                for (int wide = 0; wide < 2; wide++) {
                    int threads = sizes[s];
                    int64_t len = threads;
                    int32_t *out = calloc((size_t)len, sizeof *out);
                    kjit_array arrays[3] = {kjit_array_make(out, KJIT_I32, 1, &len), {0}, {0}};
                    kjit_arg scalars[3] = {{0}, wide ? kjit_arg_i64(bases64[b]) : kjit_arg_i32(bases32[b]),
                                           kjit_arg_i64(limits[l])};
                    run_five_ways(edge_source, wide ? "edge64" : "edge32", (uint32_t[3]){1, 1, 1},
                                  (uint32_t[3]){(uint32_t)threads, 1, 1}, arrays, scalars, 3);
                    int cell[1024];
                    for (int t = 0; t < threads; t++) {
                        /* the index as the kernel computes it: wrapping */
                        int64_t i = wide ? (int64_t)((uint64_t)bases64[b] + (uint64_t)t)
                                         : (int64_t)(int32_t)((uint32_t)bases32[b] + (uint32_t)t);
                        cell[t] = i < limits[l] ? 1 : 2;
                    }
                    for (int t = 0; t < threads; t++)
                        ck_assert_msg(out[t] == cell[t] + cell[(t + 1) % threads] * 10,
                                      "%s, base %lld, n %lld, thread %d: %d", wide ? "i64" : "i32",
                                      (long long)(wide ? bases64[b] : bases32[b]), (long long)limits[l], t,
                                      out[t]);
                    free(out);
                }
}
END_TEST

/* ------------------------------------------------------ shared memory */

/* Shared memory that the first region does not write in full, or reads
 * first, is zero at each block's start however the block before left it
 * (a later region writes every element); the block sum's, written whole
 * before any read, need not be zeroed (tree_over_block_sizes at 1024). */
static const char zero_source[] =
    "@kernel\n"
    "fn bigger(out: i32[]) {\n"
    "    let a = shared(i32, 64);\n"
    "    let t = threadIdx.x;\n"
    "    a[t] = 1;\n"
    "    syncthreads();\n"
    "    out[blockIdx.x * 32 + t] = a[t + 32] * 100 + a[t] * 1000;\n"
    "    syncthreads();\n"
    "    a[t + 32] = 5;\n"
    "}\n"
    "\n"
    "@kernel\n"
    "fn partial(out: i32[]) {\n"
    "    let b = shared(i32, 32);\n"
    "    let t = threadIdx.x;\n"
    "    if t % 2 == 0 { b[t] = 2; }\n"
    "    syncthreads();\n"
    "    out[blockIdx.x * 32 + t] = b[t] * 10 + b[(t + 1) % 32];\n"
    "    syncthreads();\n"
    "    b[t] = 7;\n"
    "}\n"
    "\n"
    "@kernel\n"
    "fn early(out: i32[]) {\n"
    "    let a = shared(i32, 32);\n"
    "    let t = threadIdx.x;\n"
    "    let v = a[t];\n"
    "    a[t] = v + 1;\n"
    "    syncthreads();\n"
    "    out[blockIdx.x * 32 + t] = a[t];\n"
    "    syncthreads();\n"
    "    a[t] = 9;\n"
    "}\n"
    "\n"
    "@kernel\n"
    "fn second(out: i32[]) {\n"
    "    let a = shared(i32, 32);\n"
    "    let b = shared(i32, 32);\n"
    "    let t = threadIdx.x;\n"
    "    a[t] = 3;\n"
    "    syncthreads();\n"
    "    out[blockIdx.x * 32 + t] = a[t] + b[t] * 10;\n"
    "    syncthreads();\n"
    "    b[t] = 4;\n"
    "}\n";

START_TEST(shared_memory_not_written_first_is_zero)
{
    const char *kernels[] = {"bigger", "partial", "early", "second"};
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
        int64_t blocks = 5, len = blocks * 32;
        int32_t *out = calloc((size_t)len, sizeof *out);
        kjit_array arrays[1] = {kjit_array_make(out, KJIT_I32, 1, &len)};
        run_five_ways(zero_source, kernels[k], (uint32_t[3]){(uint32_t)blocks, 1, 1}, (uint32_t[3]){32, 1, 1},
                      arrays, NULL, 1);
        for (int64_t g = 0; g < len; g++) {
            int t = (int)(g % 32);
            int want = k == 0   ? 1000
                       : k == 1 ? (t % 2 == 0 ? 20 : 0) + ((t + 1) % 32 % 2 == 0 ? 2 : 0)
                       : k == 2 ? 1
                                : 3;
            ck_assert_msg(out[g] == want, "%s, thread %lld: %d, want %d", kernels[k], (long long)g, out[g], want);
        }
        free(out);
    }
}
END_TEST

/* ------------------------------------------------- one context, new shapes */

/* Launches of one function with shapes that change run each shape's code:
 * each is right, each new shape makes (or finds in the cache) one more
 * object, a shape seen before none, and cpu_specialise 0 none. */
START_TEST(new_block_shape_after_a_first)
{
    rng_seed(&rng, "split_specialise");
    const int shapes[] = {64, 100, 64, 1, 1024, 100};
    const bool fresh[] = {true, true, false, true, true, false};
    for (int specialise = 1; specialise >= 0; specialise--) {
        Run r = open_run(tree_source, "tree", KJIT_TARGET_CPU, 1, specialise);
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            int threads = shapes[k];
            int64_t len = 4 * threads - 1;
            uint32_t blocks = (uint32_t)((len + threads - 1) / threads);
            float *a = malloc(sizeof *a * (size_t)len), *out = calloc(blocks, sizeof *out);
            for (int64_t i = 0; i < len; i++)
                a[i] = (float)rng_uniform(&rng, -1.0, 1.0);
            kjit_array arrays[2] = {kjit_array_make(a, KJIT_F32, 1, &len),
                                    kjit_array_make(out, KJIT_F32, 1, &(int64_t){blocks})};
            kjit_cache_counters before = kjit_cache_stats();
            void **copies = launch_copies(&r, (uint32_t[3]){blocks, 1, 1}, (uint32_t[3]){(uint32_t)threads, 1, 1},
                                          arrays, NULL, 2);
            kjit_cache_counters after = kjit_cache_stats();
            /* the first launch also makes the code for any shape */
            uint64_t made = (after.compiles + after.memory_hits + after.disk_hits) -
                            (before.compiles + before.memory_hits + before.disk_hits) - (k == 0);
            ck_assert_msg(made == (uint64_t)(specialise && fresh[k]),
                          "launch %zu (block %d, cpu_specialise %d): %llu objects made or found", k, threads,
                          specialise, (unsigned long long)made);
            const float *sums = copies[1];
            for (uint32_t b = 0; b < blocks; b++) {
                float want = tree_reference(a, len, (int64_t)b * threads, threads);
                ck_assert_msg(memcmp(&sums[b], &want, sizeof want) == 0,
                              "launch %zu, block size %d, block %u: %.9g, the reference %.9g", k, threads, b,
                              sums[b], want);
            }
            free(copies[0]);
            free(copies[1]);
            free(copies);
            free(a);
            free(out);
        }
        close_run(&r);
    }
}
END_TEST

/* ------------------------------------------------- launches from threads */

typedef struct Launcher {
    kjit_function *fn;
    int threads;        /* the block's */
    uint64_t seed;
    int wrong;          /* blocks whose sum is not the reference's */
    kjit_status status;
} Launcher;

/* Several launches of one shape, each on fresh values, checked. */
static void *launch_from_thread(void *user)
{
    Launcher *l = user;
    for (int round = 0; round < 3; round++) {
        int64_t len = 5 * l->threads + 3;
        int64_t blocks = (len + l->threads - 1) / l->threads;
        float *a = malloc(sizeof *a * (size_t)len), *out = calloc((size_t)blocks, sizeof *out);
        for (int64_t i = 0; i < len; i++)
            a[i] = (float)rng_uniform(&l->seed, -1.0, 1.0);
        kjit_array arrays[2] = {kjit_array_make(a, KJIT_F32, 1, &len), kjit_array_make(out, KJIT_F32, 1, &blocks)};
        kjit_arg args[2] = {kjit_arg_array(&arrays[0]), kjit_arg_array(&arrays[1])};
        kjit_status status = kjit_launch(l->fn, (uint32_t[3]){(uint32_t)blocks, 1, 1},
                                         (uint32_t[3]){(uint32_t)l->threads, 1, 1}, args, 2, NULL);
        if (status != KJIT_OK)
            l->status = status;
        for (int64_t b = 0; b < blocks && status == KJIT_OK; b++) {
            float want = tree_reference(a, len, b * l->threads, l->threads);
            l->wrong += memcmp(&out[b], &want, sizeof want) != 0;
        }
        free(a);
        free(out);
    }
    return NULL;
}

/* Host threads launching one function with shapes new and shared, at once,
 * on cpu and parallel: each gets its shape's code. */
START_TEST(launches_from_several_host_threads)
{
    rng_seed(&rng, "split_specialise");
    const int shapes[] = {64, 100, 64, 256, 100, 33};
    enum { COUNT = sizeof shapes / sizeof shapes[0] };
    kjit_target targets[] = {KJIT_TARGET_CPU, KJIT_TARGET_PARALLEL};
    for (int t = 0; t < 2; t++) {
        Run r = open_run(tree_source, "tree", targets[t], 1, 1);
        Launcher launchers[COUNT];
        pthread_t ids[COUNT];
        for (int k = 0; k < COUNT; k++) {
            launchers[k] = (Launcher){r.fn, shapes[k], 0, 0, KJIT_OK};
            launchers[k].seed = (uint64_t)rng_uniform(&rng, 1.0, 9e15);
            ck_assert_int_eq(pthread_create(&ids[k], NULL, launch_from_thread, &launchers[k]), 0);
        }
        for (int k = 0; k < COUNT; k++) {
            pthread_join(ids[k], NULL);
            ck_assert_msg(launchers[k].status == KJIT_OK && launchers[k].wrong == 0,
                          "target %d, thread %d (block %d): status %d, %d wrong sums", t, k, shapes[k],
                          (int)launchers[k].status, launchers[k].wrong);
        }
        close_run(&r);
    }
}
END_TEST

Suite *suite_split_specialise(void)
{
    Suite *s = suite_create("split_specialise");
    TCase *c = tcase_create("core");
    tcase_add_test(c, tree_over_block_sizes);
    tcase_add_test(c, tree_with_a_bound_from_an_argument);
    tcase_add_test(c, linear_tree_over_block_shapes);
    tcase_add_test(c, grids_of_several_dims);
    tcase_add_test(c, integer_values_of_blockdim_fold);
    tcase_add_test(c, guards_on_indices_that_wrap);
    tcase_add_test(c, shared_memory_not_written_first_is_zero);
    tcase_add_test(c, new_block_shape_after_a_first);
    tcase_add_test(c, launches_from_several_host_threads);
    suite_add_tcase(s, c);
    return s;
}
