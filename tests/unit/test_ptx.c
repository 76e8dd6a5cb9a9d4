/*
 * test_ptx.c: the cuda target's code generation, without a GPU.
 *
 * Every function of every example (examples/NAME.kern) that runs on a device (each
 * @kernel, and each @vectorize signature lifted as a contiguous, a strided and
 * a scalar-operand kernel) is compiled to PTX for sm_90.  The PTX must hold an
 * .entry per kernel, no unresolved libdevice call (libdevice linked and its
 * __nvvm_reflect settled), and, when ptxas is installed, assemble.  A few
 * sources written here check that libdevice's code really lands in the PTX
 * and that a missing libdevice or an unknown architecture is a clear error.
 */
#include <check.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kjit_runtime.h"
#include "kjit_tools.h"
#include "fixture.h"

static void diag_to_stderr(void *user, KjSeverity severity, const char *text)
{
    fputs(text, stderr);
}

static void assemble_for(const char *ptx, const char *label, const char *arch);

/* Assembles `ptx` for sm_90; a failure shows ptxas's own messages. */
static void assemble(const char *ptx, const char *label) { assemble_for(ptx, label, "sm_90"); }

static void assemble_for(const char *ptx, const char *label, const char *arch)
{
    const char *ptxas = kj_ptxas_path(); /* the one the runtime assembles with */
    if (!ptxas) {
        static bool said;
        if (!said)
            printf("test_ptx: ptxas not found: PTX checked by text only\n");
        said = true;
        return;
    }
    char ptx_path[] = "/tmp/kjit-test-XXXXXX.ptx";
    fixture_temp_file(ptx_path, 4, ptx);
    char log_path[sizeof ptx_path + 4];
    snprintf(log_path, sizeof log_path, "%s.log", ptx_path);
    char command[1400];
    snprintf(command, sizeof command, "'%s' -arch=%s '%s' -o /dev/null >'%s' 2>&1", ptxas,
             arch, ptx_path, log_path);
    int rc = system(command);
    char log[2048] = "";
    FILE *log_file = fopen(log_path, "r");
    if (log_file) {
        size_t n = fread(log, 1, sizeof log - 1, log_file);
        log[n] = '\0';
        fclose(log_file);
    }
    unlink(ptx_path);
    unlink(log_path);
    ck_assert_msg(rc == 0, "ptxas rejected the PTX of %s:\n%s", label, log);
}

/* The checks every generated PTX must pass. */
static void check_ptx(const char *ptx, KjIrFunction **roots, int count, const char *label)
{
    ck_assert_msg(strstr(ptx, ".target sm_90") != NULL, "%s: PTX not for sm_90", label);
    for (int i = 0; i < count; i++) {
        char entry[512];
        snprintf(entry, sizeof entry, ".entry %s(", roots[i]->symbol);
        ck_assert_msg(strstr(ptx, entry) != NULL, "%s: no '%s' in the PTX", label, entry);
    }
    ck_assert_msg(strstr(ptx, ".extern .func __nv_") == NULL,
                  "%s: an unresolved libdevice call is left in the PTX", label);
    ck_assert_msg(strstr(ptx, "__nvvm_reflect") == NULL, "%s: __nvvm_reflect left unsettled",
                  label);
    assemble(ptx, label);
}

/* Compiles `src` and generates PTX for every device entry it has. */
static char *ptx_for_source(KjArena *arena, const KjSource *src, KjIrFunction ***roots_out,
                            int *count_out)
{
    KjDiag diag = {.sink = diag_to_stderr};
    const char *stdlib_dirs[] = {"stdlib", NULL};
    KjIrModule *module = kj_compile_source(arena, src, stdlib_dirs, &diag);
    ck_assert_msg(module != NULL, "%s does not compile", src->path);

    KjVec roots = {0};
    for (int i = 0; i < module->entries.count; i++) {
        KjIrEntry *entry = module->entries.items[i];
        for (int v = 0; v < entry->variants.count; v++) {
            KjIrFunction *fn = entry->variants.items[v];
            if (fn->kind == KJ_IR_FN_KERNEL) {
                kj_vec_push(arena, &roots, fn);
            } else if (fn->kind == KJ_IR_FN_SCALAR) {
                KjVecVariant contig = {KJ_LAYOUT_CONTIG, 1, 0};
                KjVecVariant strided = {KJ_LAYOUT_STRIDED, 2, 0};
                kj_vec_push(arena, &roots, kj_vectorize(module, fn, contig));
                kj_vec_push(arena, &roots, kj_vectorize(module, fn, strided));
                if (fn->param_count > 1) {
                    /* The first input as a kernel parameter, the rest arrays. */
                    KjVecVariant scalar_first = {KJ_LAYOUT_CONTIG, 1, 1u};
                    kj_vec_push(arena, &roots, kj_vectorize(module, fn, scalar_first));
                }
            }
            if (fn->kind == KJ_IR_FN_SCALAR && entry->kind == KJ_FN_REDUCE && v == 0) {
                /* A reduction's levels in the forms cuda runs (for its first
                 * signature: the test's time is mostly ptxas's): V lanes a
                 * thread, aligned or not; one lane a thread; strided COLUMNS,
                 * one reduced dimension and two; strided LANES. */
                KjIrFunction *map = NULL;
                for (int m = 0; entry->map && m < entry->map->variants.count; m++)
                    if (((KjIrFunction *)entry->map->variants.items[m])->ret == fn->ret)
                        map = entry->map->variants.items[m];
                if (entry->map && !map)
                    continue;
                int widest = map ? kj_type_size(map->params[0]->type) : kj_type_size(fn->ret);
                KjReduceVariant forms[6] = {
                    {.form = KJ_REDUCE_FORM_WARPS, .reduced_rank = 1, .contiguous = true,
                     .thread_lanes = kj_reduce_thread_lanes(fn->ret, widest)},
                    {.form = KJ_REDUCE_FORM_WARPS, .kept_rank = 1, .reduced_rank = 1,
                     .contiguous = true, .thread_lanes = kj_reduce_thread_lanes(fn->ret, widest)},
                    {.form = KJ_REDUCE_FORM_WARPS, .kept_rank = 1, .reduced_rank = 1,
                     .contiguous = true},
                    {.form = KJ_REDUCE_FORM_COLUMNS, .kept_rank = 1, .reduced_rank = 1,
                     .thread_lanes = kj_reduce_column_lanes(fn->ret)},
                    {.form = KJ_REDUCE_FORM_COLUMNS, .kept_rank = 1, .reduced_rank = 2,
                     .thread_lanes = kj_reduce_column_lanes(fn->ret)},
                    {.form = KJ_REDUCE_FORM_LANES, .kept_rank = 2, .reduced_rank = 2}};
                forms[0].aligned = forms[0].thread_lanes > 1;
                for (int k = 0; k < 6; k++) {
                    forms[k].mapped = map != NULL;
                    kj_vec_push(arena, &roots, kj_reduce_lift(module, fn, map, forms[k]));
                }
            }
        }
    }
    KjCodegenOptions options = {.target = KJ_CODEGEN_CUDA, .opt_level = 3,
                                .cuda_arch = "sm_90", .verify = true};
    char *error = NULL;
    char *ptx = NULL;
    if (roots.count > 0) {
        ptx = kj_ptx_generate(module, (KjIrFunction **)roots.items, roots.count, &options,
                              &error);
        ck_assert_msg(ptx != NULL, "%s: PTX generation failed: %s", src->path,
                      error ? error : "?");
    }
    *roots_out = (KjIrFunction **)roots.items;
    *count_out = roots.count;
    return ptx;
}

START_TEST(every_example_assembles)
{
    glob_t files;
    int found = glob("examples/*.kern", 0, NULL, &files);
    ck_assert_msg(found == 0 && files.gl_pathc > 0,
                  "no examples/*.kern (run the tests from the repository root)");
    int with_entries = 0;
    for (size_t f = 0; f < files.gl_pathc; f++) {
        KjArena arena = {0};
        KjDiag diag = {.sink = diag_to_stderr};
        KjSource *src = kj_source_read(&arena, files.gl_pathv[f], &diag);
        ck_assert_msg(src != NULL, "cannot read %s", files.gl_pathv[f]);
        KjIrFunction **roots;
        int count;
        char *ptx = ptx_for_source(&arena, src, &roots, &count);
        if (ptx) {
            check_ptx(ptx, roots, count, files.gl_pathv[f]);
            with_entries++;
        }
        free(ptx);
        kj_arena_free(&arena);
    }
    ck_assert_msg(with_entries > 0, "no example has a kernel or a vectorized function");
    globfree(&files);
}
END_TEST

static char *ptx_for_string(KjArena *arena, const char *text, KjIrFunction ***roots, int *count)
{
    KjSource *src = kj_source_from_string(arena, "test.kern", text);
    return ptx_for_source(arena, src, roots, count);
}

START_TEST(libdevice_code_is_linked)
{
    KjArena arena = {0};
    KjIrFunction **roots;
    int count;
    char *ptx = ptx_for_string(&arena,
                               "@vectorize fn s64(x: f64) -> f64 { return sin(x); }\n"
                               "@vectorize fn e32(x: f32) -> f32 { return exp(x); }\n"
                               "@vectorize fn a64(y: f64, x: f64) -> f64 { return atan2(y, x) + "
                               "erf(x) + lgamma(y); }\n",
                               &roots, &count);
    check_ptx(ptx, roots, count, "sin/exp/atan2/erf/lgamma");
    /* libdevice's sin reduces large arguments with its 2/pi table, and its
     * expf is built on the ex2 instruction: both only come from libdevice. */
    ck_assert_msg(strstr(ptx, "__cudart_i2opi_d") != NULL, "libdevice's __nv_sin not linked");
    ck_assert_msg(strstr(ptx, "ex2.approx") != NULL, "libdevice's __nv_expf not linked");
    /* Only what is used is kept: cos's and the rest's entry points are gone. */
    ck_assert_msg(strstr(ptx, "__nv_cos") == NULL, "unused libdevice functions were kept");
    free(ptx);
    kj_arena_free(&arena);
}
END_TEST

START_TEST(kernel_features_assemble)
{
    KjArena arena = {0};
    KjIrFunction **roots;
    int count;
    char *ptx = ptx_for_string(
        &arena,
        "@kernel fn reduce(x: f32[], total: f64[], counts: i32[]) {\n"
        "    let tile = shared(f32, 256);\n"
        "    let t = threadIdx.x;\n"
        "    let i = grid(1);\n"
        "    tile[t] = i < len(x) ? x[i] : 0.0;\n"
        "    syncthreads();\n"
        "    if t == 0 {\n"
        "        let s: f64 = 0;\n"
        "        for k in range(256) { s += f64(tile[k]); }\n"
        "        atomic_add(total, 0, s);\n"
        "        atomic_max(counts, 0, blockIdx.x);\n"
        "    }\n"
        "}\n",
        &roots, &count);
    check_ptx(ptx, roots, count, "shared/syncthreads/atomics");
    ck_assert_msg(strstr(ptx, ".shared") != NULL, "shared array not in address space 3");
    ck_assert_msg(strstr(ptx, "bar.sync") != NULL || strstr(ptx, "barrier.sync") != NULL,
                  "syncthreads() is not a barrier");
    ck_assert_msg(strstr(ptx, "atom.global.add.f64") != NULL, "f64 atomic add not native");
    free(ptx);
    kj_arena_free(&arena);
}
END_TEST

/* The execution-model kernels (tests/golden/exec) assemble, each built-in
 * its PTX instruction, syncgrid() a global counter, shared(T) an extern
 * shared array sized by %dynamic_smem_size, local() sized at launch a slice
 * of the launch's scratch, the parameter after the kernel's own. */
START_TEST(exec_builtins_assemble)
{
    const char *files[] = {"tests/golden/exec/warp.kern", "tests/golden/exec/grid.kern",
                           "tests/golden/exec/dynamic_shared.kern",
                           "tests/golden/exec/local_launch.kern",
                           "tests/golden/vectorize/several_outputs.kern"};
    const char *want[5][9] = {
        {"shfl.sync.down.b32", "shfl.sync.bfly.b32", "shfl.sync.up.b32", "shfl.sync.idx.b32",
         "vote.sync.ballot.b32", "vote.sync.all.pred", "activemask.b32", "bar.red.popc",
         "%laneid"},
        {"atom.global.add.u32", "ld.volatile.global.u32", "membar.gl", "kj_grid_barrier"},
        {".extern .shared .align 16 .b8 kj_dynamic_shared[]", "%dynamic_smem_size"},
        {".param .u64 tridiag_columns_param_2", ".param .u64 prefix_windows_param_4",
         ".param .u64 reverse_in_local_param_3"},
        /* outputs 1.. after the inputs, output 0 last */
        {".entry floor_divmod__v0c(", "floor_divmod__v0c_param_3", ".entry wave__v0c(",
         "wave__v0c_param_3"},
    };
    for (int f = 0; f < 5; f++) {
        KjArena arena = {0};
        KjDiag diag = {.sink = diag_to_stderr};
        KjSource *src = kj_source_read(&arena, files[f], &diag);
        ck_assert_msg(src != NULL, "cannot read %s", files[f]);
        KjIrFunction **roots;
        int count;
        char *ptx = ptx_for_source(&arena, src, &roots, &count);
        check_ptx(ptx, roots, count, files[f]);
        for (int k = 0; k < 9 && want[f][k]; k++)
            ck_assert_msg(strstr(ptx, want[f][k]) != NULL, "%s: no '%s' in the PTX", files[f],
                          want[f][k]);
        free(ptx);
        kj_arena_free(&arena);
    }
}
END_TEST

/* mma(): on sm_80 and later PTX's mma.sync.aligned.m8n8k4.row.col.f64, one
 * per call (the tensor-core matrix multiply's 8 x 4 a step of k, unrolled),
 * and no shuffle, except that on sm_90 the matrix multiply's calls go in
 * pairs on the same B as m16n8k4 (ptx_mma.c), none left alone; before (sm_75),
 * twelve f64 shuffles (as 32-bit halves) and eight fma.rn.f64 per call and
 * no mma.sync.  Each assembles for its architecture. */
START_TEST(mma_is_mma_sync_from_sm_80)
{
    const char *files[2] = {"tests/golden/exec/mma.kern", "tests/bench/matmul_tc.kern"};
    const char *arches[3] = {"sm_90", "sm_80", "sm_75"};
    for (int f = 0; f < 2; f++)
        for (int a = 0; a < 3; a++) {
            KjArena arena = {0};
            KjDiag diag = {.sink = diag_to_stderr};
            KjSource *src = kj_source_read(&arena, files[f], &diag);
            ck_assert_msg(src != NULL, "cannot read %s", files[f]);
            const char *stdlib_dirs[] = {"stdlib", NULL};
            KjIrModule *module = kj_compile_source(&arena, src, stdlib_dirs, &diag);
            ck_assert_msg(module != NULL, "%s does not compile", files[f]);
            KjIrEntry *entry = module->entries.items[0];
            KjIrFunction *root = entry->variants.items[0];
            KjCodegenOptions options = {.target = KJ_CODEGEN_CUDA, .opt_level = 3,
                                        .cuda_arch = arches[a], .verify = true};
            char *error = NULL;
            char *ptx = kj_ptx_generate(module, &root, 1, &options, &error);
            ck_assert_msg(ptx != NULL, "%s for %s: %s", files[f], arches[a], error ? error : "?");
            int mma = 0, tall = 0, shuffles = 0, fmas = 0;
            for (const char *p = ptx; (p = strstr(p, "mma.sync.aligned.m8n8k4.row.col.f64")); p++)
                mma++;
            for (const char *p = ptx; (p = strstr(p, "mma.sync.aligned.m16n8k4.row.col.f64")); p++)
                tall++;
            for (const char *p = ptx; (p = strstr(p, "shfl.sync.idx.b32")); p++)
                shuffles++;
            for (const char *p = ptx; (p = strstr(p, "fma.rn.f64")); p++)
                fmas++;
            /* mma.kern calls mma() once; matmul_tc.kern in loops LLVM unrolls */
            bool native = a < 2, paired = a == 0 && f == 1, once = f == 0;
            int calls = native ? mma + 2 * tall : fmas / 8;
            ck_assert_msg(native ? (once ? calls == 1 : calls >= 32) && shuffles == 0 &&
                                       (paired ? mma == 0 : tall == 0)
                                 : mma == 0 && tall == 0 && (once ? calls == 1 : calls >= 1) &&
                                       fmas == 8 * calls && shuffles == 24 * calls,
                          "%s for %s: %d mma.sync m8n8k4, %d m16n8k4, %d shuffles, %d fma.rn.f64",
                          files[f], arches[a], mma, tall, shuffles, fmas);
            assemble_for(ptx, files[f], arches[a]);
            free(ptx);
            kj_arena_free(&arena);
        }
}
END_TEST

/* ptx_mma.c's pairing on sm_90: two mma() on the same B whose results are
 * not read before the second become one m16n8k4 (in either order of
 * source); a second call that reads the first's result, one on another B,
 * or a first call's result read before the second, stay two m8n8k4. */
START_TEST(mma_pairs_are_m16n8k4_on_sm_90)
{
    static const struct {
        const char *body;
        int m8, m16;
    } cases[] = {
        /* two tiles of a column: one m16n8k4 */
        {"let x0, x1 = mma(a[l], b[l], c[l], c[l + 32]);\n"
         "let y0, y1 = mma(a[l + 32], b[l], c[l + 64], c[l + 96]);\n"
         "d[l] = x0; d[l + 32] = x1; d[l + 64] = y0; d[l + 96] = y1;\n", 0, 1},
        /* four: two pairs */
        {"let x0, x1 = mma(a[l], b[l], c[l], c[l + 32]);\n"
         "let y0, y1 = mma(a[l + 32], b[l], c[l + 64], c[l + 96]);\n"
         "let z0, z1 = mma(a[l + 64], b[l + 32], x0, x1);\n"
         "let w0, w1 = mma(a[l + 96], b[l + 32], y0, y1);\n"
         "d[l] = z0; d[l + 32] = z1; d[l + 64] = w0; d[l + 96] = w1;\n", 0, 2},
        /* a chain on one B: the second reads the first */
        {"let x0, x1 = mma(a[l], b[l], c[l], c[l + 32]);\n"
         "let y0, y1 = mma(a[l + 32], b[l], x0, x1);\n"
         "d[l] = y0; d[l + 32] = y1;\n", 2, 0},
        /* the second's A is made of the first's result */
        {"let x0, x1 = mma(a[l], b[l], c[l], c[l + 32]);\n"
         "let y0, y1 = mma(x0 * 2.0, b[l], c[l + 64], c[l + 96]);\n"
         "d[l] = x1; d[l + 32] = y0; d[l + 64] = y1;\n", 2, 0},
        /* two B */
        {"let x0, x1 = mma(a[l], b[l], c[l], c[l + 32]);\n"
         "let y0, y1 = mma(a[l + 32], b[l + 32], c[l + 64], c[l + 96]);\n"
         "d[l] = x0; d[l + 32] = x1; d[l + 64] = y0; d[l + 96] = y1;\n", 2, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int a = 0; a < 2; a++) {
            const char *arch = a == 0 ? "sm_90" : "sm_80";
            KjArena arena = {0};
            KjBuf text = {0};
            kj_buf_printf(&text,
                          "@kernel\nfn pair(a: f64[], b: f64[], c: f64[], d: f64[]) {\n"
                          "let l = i64(laneid());\n%s}\n", cases[k].body);
            KjDiag diag = {.sink = diag_to_stderr};
            KjSource *src = kj_source_from_string(&arena, "pair.kern", text.data);
            const char *stdlib_dirs[] = {"stdlib", NULL};
            KjIrModule *module = kj_compile_source(&arena, src, stdlib_dirs, &diag);
            ck_assert_msg(module != NULL, "case %zu does not compile", k);
            KjIrFunction *root = ((KjIrEntry *)module->entries.items[0])->variants.items[0];
            KjCodegenOptions options = {.target = KJ_CODEGEN_CUDA, .opt_level = 3,
                                        .cuda_arch = arch, .verify = true};
            char *error = NULL;
            char *ptx = kj_ptx_generate(module, &root, 1, &options, &error);
            ck_assert_msg(ptx != NULL, "case %zu for %s: %s", k, arch, error ? error : "?");
            int m8 = 0, m16 = 0;
            for (const char *p = ptx; (p = strstr(p, "mma.sync.aligned.m8n8k4.row.col.f64")); p++)
                m8++;
            for (const char *p = ptx; (p = strstr(p, "mma.sync.aligned.m16n8k4.row.col.f64")); p++)
                m16++;
            int want8 = a == 0 ? cases[k].m8 : cases[k].m8 + 2 * cases[k].m16;
            int want16 = a == 0 ? cases[k].m16 : 0;
            ck_assert_msg(m8 == want8 && m16 == want16,
                          "case %zu for %s: %d m8n8k4 and %d m16n8k4, not %d and %d:\n%s", k, arch,
                          m8, m16, want8, want16, text.data);
            assemble_for(ptx, "pair.kern", arch);
            free(ptx);
            free(text.data);
            kj_arena_free(&arena);
        }
}
END_TEST

/* print(...) in a kernel, a device function and a vectorized function: a
 * call of vprintf with the values in a local buffer, the format a global
 * constant; ptxas takes it. */
START_TEST(print_calls_vprintf)
{
    const char *files[] = {"tests/golden/print/kernel.kern", "tests/golden/print/vectorize.kern",
                           "tests/golden/print/formats.kern"};
    for (int f = 0; f < 3; f++) {
        KjArena arena = {0};
        KjDiag diag = {.sink = diag_to_stderr};
        KjSource *src = kj_source_read(&arena, files[f], &diag);
        ck_assert_msg(src != NULL, "cannot read %s", files[f]);
        KjIrFunction **roots;
        int count;
        char *ptx = ptx_for_source(&arena, src, &roots, &count);
        check_ptx(ptx, roots, count, files[f]);
        const char *want[] = {".extern .func  (.param .b32 func_retval0) vprintf", "call.uni",
                              ".global .align 1 .b8", "st.local.f64",
                              f == 2 ? "st.local.u32" : "vprintf"};
        for (int k = 0; k < 5; k++)
            ck_assert_msg(strstr(ptx, want[k]) != NULL, "%s: no '%s' in the PTX", files[f],
                          want[k]);
        free(ptx);
        kj_arena_free(&arena);
    }
}
END_TEST

/* mulhi is PTX's mul.hi in every signedness and width, never a 64-bit
 * product taken apart (mov.b64 {lo, hi}): ptxas -O3 (CUDA 13) kept part of
 * that product loop-invariant in a loop where it varies (genprog seed 6645,
 * tests/genprog/regress/cuda_mulhi_loop.kern). */
START_TEST(mulhi_is_mul_hi)
{
    const char *path = "tests/genprog/regress/cuda_mulhi_loop.kern";
    const char *text =
        "@kernel\n"
        "fn k(a: i32[], b: u32[], c: i64[], d: u64[]) {\n"
        "    let i = grid(1);\n"
        "    a[i] = mulhi(a[i], a[i + 1]); b[i] = mulhi(b[i], b[i + 1]);\n"
        "    c[i] = mulhi(c[i], c[i + 1]); d[i] = mulhi(d[i], d[i + 1]);\n"
        "}\n";
    for (int f = 0; f < 2; f++) {
        KjArena arena = {0};
        KjDiag diag = {.sink = diag_to_stderr};
        KjSource *src = f == 0 ? kj_source_read(&arena, path, &diag)
                               : kj_source_from_string(&arena, "mulhi.kern", text);
        ck_assert_msg(src != NULL, "cannot read %s", path);
        KjIrFunction **roots;
        int count;
        char *ptx = ptx_for_source(&arena, src, &roots, &count);
        check_ptx(ptx, roots, count, f == 0 ? path : "mulhi.kern");
        ck_assert_msg(strstr(ptx, "mov.b64 {") == NULL, "a 64-bit product taken apart in the PTX");
        const char *want[] = {"mul.hi.s32", "mul.hi.u32", "mul.hi.s64", "mul.hi.u64"};
        for (int k = 0; k < (f == 0 ? 1 : 4); k++)
            ck_assert_msg(strstr(ptx, want[k]) != NULL, "no '%s' in the PTX", want[k]);
        free(ptx);
        kj_arena_free(&arena);
    }
}
END_TEST

/* Constant arrays live in constant memory (.const, read with ld.const) while
 * the module's tables fit 64 KiB, else in global memory; both assemble. */
START_TEST(const_arrays_in_constant_memory)
{
    KjArena arena = {0};
    KjIrFunction **roots;
    int count;
    char *ptx = ptx_for_source(&arena, kj_source_read(&arena, "tests/golden/exec/const_array.kern",
                                                      &(KjDiag){.sink = diag_to_stderr}),
                               &roots, &count);
    check_ptx(ptx, roots, count, "const_array.kern");
    ck_assert_msg(strstr(ptx, ".const .align 16 .b8 kj_const_CRC_NIBBLE[32]") != NULL,
                  "the CRC table is not in constant memory");
    ck_assert_msg(strstr(ptx, "ld.const.u16") != NULL, "the CRC table is not read with ld.const");
    free(ptx);
    /* arrays chosen by '?:', re-bound and swapped */
    ptx = ptx_for_source(&arena, kj_source_read(&arena, "tests/golden/exec/array_values.kern",
                                                &(KjDiag){.sink = diag_to_stderr}),
                         &roots, &count);
    check_ptx(ptx, roots, count, "array_values.kern");
    free(ptx);

    /* 9,000 f64 (72,000 bytes) pass 64 KiB: global memory instead */
    KjBuf text = {0};
    kj_buf_printf(&text, "const BIG: f64[9000] = [");
    for (int i = 0; i < 9000; i++)
        kj_buf_printf(&text, "%s%d.5", i ? ", " : "", i);
    kj_buf_printf(&text, "];\n@kernel fn k(i: i32[], out: f64[]) { out[0] = BIG[i[0]]; }\n");
    ptx = ptx_for_string(&arena, text.data, &roots, &count);
    check_ptx(ptx, roots, count, "a 72,000-byte table");
    ck_assert_msg(strstr(ptx, ".global .align 16 .b8 kj_const_BIG[72000]") != NULL,
                  "a table past 64 KiB is not in global memory");
    ck_assert_msg(strstr(ptx, ".const") == NULL, "a table past 64 KiB is in constant memory");
    free(ptx);
    kj_buf_free(&text);
    kj_arena_free(&arena);
}
END_TEST

/* Device functions (plain functions using kernel built-ins, called from a
 * kernel) and every atomic, on elements of 2-D arrays too, sized by
 * constants; LLVM makes compare-and-swap loops of the ones PTX lacks. */
START_TEST(device_functions_and_atomics_assemble)
{
    KjArena arena = {0};
    KjIrFunction **roots;
    int count;
    char *ptx = ptx_for_string(
        &arena,
        "const TILE = 64;\n"
        "fn lane() -> i32 { return threadIdx.x % 32; }\n"
        "fn step(tile: f32[], t: i32) -> f32 { syncthreads(); return tile[(t + 1) % TILE]; }\n"
        "fn bump(h: u32[,], i: i64, j: i64) -> u32 { return atomic_inc(h[i, j], 9); }\n"
        "@kernel fn k(x: f32[], h: u32[,], f: f64[], w: i64[]) {\n"
        "    let tile = shared(f32, TILE);\n"
        "    let t = threadIdx.x;\n"
        "    tile[t] = x[grid(1)];\n"
        "    let v = step(tile, t);\n"
        "    let old = bump(h, i64(lane()), 0);\n"
        "    atomic_dec(h[1, 1], 9);\n"
        "    atomic_sub(f, 0, f64(v));\n"
        "    atomic_min(f[1], f64(v));\n"
        "    atomic_max(f, 2, f64(old));\n"
        "    atomic_and(w, 0, 12);\n"
        "    atomic_or(w[1], 3);\n"
        "    atomic_xor(w, 2, i64(t));\n"
        "    atomic_cas(w[3], 0, 1);\n"
        "}\n",
        &roots, &count);
    check_ptx(ptx, roots, count, "device functions and atomics");
    ck_assert_msg(strstr(ptx, "bar.sync") != NULL || strstr(ptx, "barrier.sync") != NULL,
                  "syncthreads() in a device function is not a barrier");
    const char *native[] = {"atom.global.and.b64", "atom.global.or.b64", "atom.global.xor.b64",
                            "atom.global.cas.b64", "atom.global.cas.b32"};
    for (size_t i = 0; i < sizeof native / sizeof native[0]; i++)
        ck_assert_msg(strstr(ptx, native[i]) != NULL, "no %s in the PTX", native[i]);
    free(ptx);
    kj_arena_free(&arena);
}
END_TEST

/* A launch copies its parameter block, so C-contiguous arrays travel as the
 * short record {data, shape[ndim]}; other arrays as the whole descriptor. */
START_TEST(contiguous_arrays_travel_as_records)
{
    KjArena arena = {0};
    KjDiag diag = {.sink = diag_to_stderr};
    KjSource *src = kj_source_from_string(
        &arena, "records.kern",
        "@vectorize fn add(a: f32, b: f32) -> f32 { return a + b; }\n"
        "@kernel fn scale(m: f64[,], v: f64[,]) {\n"
        "    let i, j = grid(2);\n"
        "    if i < m.shape[0] && j < m.shape[1] { m[i, j] = 2.0 * v[i, j]; }\n"
        "}\n");
    const char *stdlib_dirs[] = {"stdlib", NULL};
    KjIrModule *module = kj_compile_source(&arena, src, stdlib_dirs, &diag);
    ck_assert_ptr_nonnull(module);
    KjIrEntry *add = module->entries.items[0], *scale = module->entries.items[1];
    KjVecVariant contig = {KJ_LAYOUT_CONTIG, 1, 0}, strided = {KJ_LAYOUT_STRIDED, 2, 0};
    KjIrFunction *roots[3] = {kj_vectorize(module, add->variants.items[0], contig),
                              kj_vectorize(module, add->variants.items[0], strided),
                              scale->variants.items[0]};
    /* m (bit 0) is C-contiguous, v is not. */
    KjCodegenOptions options = {.target = KJ_CODEGEN_CUDA, .opt_level = 3,
                                .cuda_arch = "sm_90", .verify = true, .contiguous_params = 1u};
    char *error = NULL;
    char *ptx = kj_ptx_generate(module, roots, 3, &options, &error);
    ck_assert_msg(ptx != NULL, "PTX generation failed: %s", error ? error : "?");
    const char *want[] = {"add__v0c_param_0[16]", "add__v0c_param_2[16]",
                          "add__v0s2_param_0[136]", "scale__c1_param_0[24]",
                          "scale__c1_param_1[136]"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(ptx, want[i]) != NULL, "no parameter %s in the PTX", want[i]);
    assemble(ptx, "records.kern");
    free(ptx);
    kj_arena_free(&arena);
}
END_TEST

/* Cancellation on cuda (KjCodegenOptions.cancel): a kernel's loop polls
 * the flag whose device address the runtime writes into the module's global
 * kj_cancel_word, with a volatile load every KJ_CANCEL_CUDA_STRIDE turns, and
 * ptxas takes it; without the option the PTX has neither. */
START_TEST(cancel_polls_in_loops)
{
    KjArena arena = {0};
    KjDiag diag = {.sink = diag_to_stderr};
    KjSource *src = kj_source_from_string(
        &arena, "spin.kern",
        "@kernel fn spin(out: i32[], stop: i32) {\n"
        "    let i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    let k = i % 7;\n"
        "    while k != stop { k = (k + 1) % 1000; }\n"
        "    out[i] = k;\n"
        "}\n");
    const char *stdlib_dirs[] = {"stdlib", NULL};
    KjIrModule *module = kj_compile_source(&arena, src, stdlib_dirs, &diag);
    ck_assert_ptr_nonnull(module);
    KjIrFunction *root = ((KjIrEntry *)module->entries.items[0])->variants.items[0];
    for (int cancel = 0; cancel < 2; cancel++) {
        KjCodegenOptions options = {.target = KJ_CODEGEN_CUDA, .opt_level = 3,
                                    .cuda_arch = "sm_90", .verify = true, .cancel = cancel};
        char *error = NULL;
        char *ptx = kj_ptx_generate(module, &root, 1, &options, &error);
        ck_assert_msg(ptx != NULL, "PTX generation failed: %s", error ? error : "?");
        bool word = strstr(ptx, ".global .align 8 .u64 " KJ_CANCEL_WORD_SYMBOL) != NULL;
        bool poll = strstr(ptx, "ld.volatile") != NULL;
        bool stride = strstr(ptx, "1023") != NULL; /* the turn counter's mask */
        if (cancel)
            ck_assert_msg(word && poll && stride, "no poll in the PTX (word %d, volatile load %d, "
                          "stride %d):\n%s", word, poll, stride, ptx);
        else
            ck_assert_msg(!word && !poll, "a poll without the option:\n%s", ptx);
        assemble(ptx, cancel ? "spin.kern, cancellable" : "spin.kern");
        free(ptx);
    }
    kj_arena_free(&arena);
}
END_TEST

/* With the toolkit's ptxas, PTX becomes a whole-program cubin (an ELF file);
 * PTX that ptxas rejects comes back as an error carrying its message. */
START_TEST(ptxas_assembles_whole_program)
{
    if (!kj_ptxas_path()) {
        printf("test_ptx: skipped ptxas_assembles_whole_program: no ptxas found\n");
        return;
    }
    KjArena arena = {0};
    KjIrFunction **roots;
    int count;
    char *ptx = ptx_for_string(&arena, "@vectorize fn s(x: f64) -> f64 { return sin(x); }\n",
                               &roots, &count);
    void *cubin = NULL;
    size_t size = 0;
    char *error = NULL;
    kjit_status status = kj_ptxas_compile(ptx, "sm_90", &cubin, &size, &error);
    ck_assert_msg(status == KJIT_OK, "ptxas failed: %s", error ? error : "?");
    ck_assert_msg(size > 4 && memcmp(cubin, "\x7f" "ELF", 4) == 0, "not a cubin (%zu bytes)", size);
    free(cubin);
    free(ptx);

    status = kj_ptxas_compile(".version 8.5\n.target sm_90\n.address_size 64\nnonsense;\n",
                              "sm_90", &cubin, &size, &error);
    ck_assert_int_eq(status, KJIT_ERROR_BACKEND);
    ck_assert_msg(error && strstr(error, "ptxas") && strstr(error, "nonsense"),
                  "unclear error: %s", error ? error : "(none)");
    ck_assert_ptr_null(cubin);
    free(error);
    kj_arena_free(&arena);
}
END_TEST

/* libdevice's sin ends choosing between two polynomial steps and between a
 * value and its negation; those choices are branches in the PTX, as nvcc's,
 * not both sides computed and selected (ptx_branches.c). */
START_TEST(sin_tails_are_branches)
{
    KjArena arena = {0};
    KjIrFunction **roots;
    int count;
    char *ptx = ptx_for_string(&arena, "@vectorize fn s(x: f64) -> f64 { return sin(x); }\n",
                               &roots, &count);
    check_ptx(ptx, roots, count, "sin");
    /* Three kernels (contiguous, strided, scalar-first is not made for one
     * input): at most the one select each that is not a choice of work. */
    int selects = 0;
    for (const char *p = ptx; (p = strstr(p, "selp.f64")) != NULL; p++)
        selects++;
    ck_assert_msg(selects <= count, "%d selp.f64 in %d kernels: sin's tails were selected",
                  selects, count);
    free(ptx);
    kj_arena_free(&arena);
}
END_TEST

/* --lineinfo (kjit build, kjit_stage_options.line_info): PTX carries .loc
 * lines naming the .kern file, as nvcc -lineinfo, and ptxas takes it; cpu
 * assembly carries .file/.loc; without it neither has any. */
static char *stage_of(const char *path, kjit_stage stage, kjit_target target, bool line_info)
{
    kjit_stage_options options;
    kjit_stage_options_init(&options);
    options.target = target;
    options.line_info = line_info;
    char *bytes = NULL, *error = NULL;
    size_t size = 0;
    kjit_status status = kjit_stage_file(path, stage, &options, &bytes, &size, &error);
    ck_assert_msg(status == KJIT_OK, "%s: %s", path, error ? error : "?");
    free(error);
    return bytes;
}

/* The .loc lines of `text` name file 1 and only lines the source has. */
static int loc_lines(const char *text, int max_line)
{
    int count = 0;
    for (const char *p = strstr(text, ".loc\t"); p; p = strstr(p + 1, ".loc\t")) {
        int file = 0, line = -1;
        ck_assert_msg(sscanf(p, ".loc\t%d %d", &file, &line) == 2, "bad .loc: %.40s", p);
        ck_assert_int_eq(file, 1);
        ck_assert_msg(line >= 0 && line <= max_line, "a .loc at line %d of %d", line, max_line);
        count += line > 0;
    }
    return count;
}

START_TEST(line_info_names_the_kern_lines)
{
    char path[] = "/tmp/kjit-lines-XXXXXX.kern";
    fixture_temp_file(path, 5,
                      "@kernel\n"
                      "fn scale(a: f32[], b: f32[], s: f32) {\n"
                      "    let i = grid(1);\n"
                      "    if i < len(a) {\n"
                      "        b[i] = sin(a[i]) * s;\n"
                      "    }\n"
                      "}\n"
                      "@vectorize\n"
                      "fn rot(z: c64, phi: f32) -> c64 {\n"
                      "    return z * exp(complex(0.0, phi));\n"
                      "}\n");
    const char *name = strrchr(path, '/') + 1;

    char *ptx = stage_of(path, KJIT_STAGE_PTX, KJIT_TARGET_CUDA, true);
    ck_assert_msg(strstr(ptx, ".file\t1 \"") && strstr(ptx, name), "no .file naming %s", name);
    ck_assert_int_gt(loc_lines(ptx, 11), 0);
    ck_assert_msg(strstr(ptx, ".loc\t1 5 "), "no .loc for line 5 (b[i] = ...)");
    ck_assert_msg(strstr(ptx, ".loc\t1 10 "), "no .loc for line 10 (return z * exp(...))");
    assemble(ptx, "the --lineinfo PTX");
    free(ptx);
    ptx = stage_of(path, KJIT_STAGE_PTX, KJIT_TARGET_CUDA, false);
    ck_assert_msg(!strstr(ptx, ".loc\t") && !strstr(ptx, ".file\t"), "line info without --lineinfo");
    free(ptx);

    char *asm_text = stage_of(path, KJIT_STAGE_ASM, KJIT_TARGET_CPU, true);
    ck_assert_msg(strstr(asm_text, ".file\t1 \"") && strstr(asm_text, name), "no .file naming %s", name);
    ck_assert_int_gt(loc_lines(asm_text, 11), 0);
    ck_assert_msg(strstr(asm_text, ".loc\t1 5 ") && strstr(asm_text, ".loc\t1 10 "),
                  "cpu assembly lacks lines 5 and 10");
    free(asm_text);
    asm_text = stage_of(path, KJIT_STAGE_ASM, KJIT_TARGET_CPU, false);
    ck_assert_msg(!strstr(asm_text, ".loc\t"), "cpu line info without --lineinfo");
    free(asm_text);
    unlink(path);
}
END_TEST

START_TEST(missing_libdevice_is_a_clear_error)
{
    KjArena arena = {0};
    KjDiag diag = {.sink = diag_to_stderr};
    KjSource *src = kj_source_from_string(&arena, "t.kern",
                                          "@vectorize fn f(x: f32) -> f32 { return sin(x); }\n");
    const char *stdlib_dirs[] = {"stdlib", NULL};
    KjIrModule *module = kj_compile_source(&arena, src, stdlib_dirs, &diag);
    ck_assert_ptr_nonnull(module);
    KjIrEntry *entry = module->entries.items[0];
    KjVecVariant contig = {KJ_LAYOUT_CONTIG, 1, 0};
    KjIrFunction *root = kj_vectorize(module, entry->variants.items[0], contig);

    setenv("KJIT_LIBDEVICE", "/nonexistent/libdevice.10.bc", 1);
    KjCodegenOptions options = {.target = KJ_CODEGEN_CUDA, .opt_level = 3};
    char *error = NULL;
    char *ptx = kj_ptx_generate(module, &root, 1, &options, &error);
    unsetenv("KJIT_LIBDEVICE");
    ck_assert_ptr_null(ptx);
    ck_assert_msg(error && strstr(error, "libdevice") && strstr(error, "KJIT_LIBDEVICE"),
                  "unclear error: %s", error ? error : "(none)");
    free(error);

    error = NULL;
    options.cuda_arch = "sm_13";
    ptx = kj_ptx_generate(module, &root, 1, &options, &error);
    ck_assert_ptr_null(ptx);
    ck_assert_msg(error && strstr(error, "sm_13"), "unclear error: %s", error ? error : "(none)");
    free(error);
    kj_arena_free(&arena);
}
END_TEST

Suite *suite_ptx(void)
{
    Suite *suite = suite_create("ptx");
    TCase *tcase = tcase_create("ptx");
    tcase_set_timeout(tcase, 120);
    tcase_add_test(tcase, every_example_assembles);
    tcase_add_test(tcase, libdevice_code_is_linked);
    tcase_add_test(tcase, kernel_features_assemble);
    tcase_add_test(tcase, exec_builtins_assemble);
    tcase_add_test(tcase, mma_is_mma_sync_from_sm_80);
    tcase_add_test(tcase, mma_pairs_are_m16n8k4_on_sm_90);
    tcase_add_test(tcase, print_calls_vprintf);
    tcase_add_test(tcase, const_arrays_in_constant_memory);
    tcase_add_test(tcase, device_functions_and_atomics_assemble);
    tcase_add_test(tcase, contiguous_arrays_travel_as_records);
    tcase_add_test(tcase, ptxas_assembles_whole_program);
    tcase_add_test(tcase, cancel_polls_in_loops);
    tcase_add_test(tcase, mulhi_is_mul_hi);
    tcase_add_test(tcase, sin_tails_are_branches);
    tcase_add_test(tcase, missing_libdevice_is_a_clear_error);
    tcase_add_test(tcase, line_info_names_the_kern_lines);
    suite_add_tcase(suite, tcase);
    return suite;
}
