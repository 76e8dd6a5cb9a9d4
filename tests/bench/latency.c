/*
 * latency.c: what a user waits for, apart from the work itself.
 *
 *   cold compile   source to a callable function with an empty cache, in a
 *                  new process (the program runs itself with --child)
 *   warm start     the same in a new process whose disk cache holds the code
 *   launch         kjit_launch of an empty kernel, host time per call, beside
 *                  a bare cuLaunchKernel of an empty kernel with the same
 *                  parameter (cuda only)
 *   vectorized     kjit_call of an add on 1,000-element device arrays, host
 *                  time per call
 *   launch gap     (cuda) what the GPU sees: CUDA events recorded just before
 *                  and just after one call on an idle stream, around an add
 *                  on 1e6 f32 device arrays.  This is how the GPU benchmark
 *                  times its rows, so host work between the two records adds
 *                  to a short kernel's time.  kjit's vectorized call and
 *                  kjit_launch, beside bare cuLaunchKernel calls of one
 *                  hand-written PTX add taking its arrays as pointers, as
 *                  16-byte {data, extent} records (kjit's contiguous arrays)
 *                  and as full 136-byte descriptors.
 *
 *   programs       with folders: every .kern in them compiled cold, each in
 *                  new processes: every function (what `kjit build` does),
 *                  the code for a block shape, PTX, and for a file with
 *                  @reduce functions the slowest first call of one of its
 *                  signatures (what the JIT compiles before the call runs)
 *
 * Compile times are the median of RUNS new processes; call costs the median
 * of RUNS batches of CALLS calls.  Each compiled function's results are
 * checked against a float64 value computed here, so broken cached code cannot
 * post a time.  Usage: latency [cpu|parallel|cuda|auto] [FOLDER...] [--calls]
 * (default: cpu, and cuda too when a GPU is usable; the folders' programs;
 * --calls: the call costs alone).
 */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kjit_runtime.h"
#include "kjit_tools.h"
#include "../cuda_host/diag_common.h"

#define RUNS 7
#define CALLS 2000
#define ELEMENTS 1000

static void die(kjit_context *context, kjit_status status, const char *what)
{
    fprintf(stderr, "latency: %s: %s: %s\n", what, kjit_status_name(status),
            kjit_last_error(context));
    exit(1);
}

/* The workloads: a vectorized add, a libdevice-heavy sin and exp, and an
 * empty kernel for launch cost. */
static const char *const workload_names[] = {"add", "sin", "exp"};
static const char source[] =
    "@vectorize\nfn add(a: f32, b: f32) -> f32 {\n    return a + b;\n}\n"
    "@vectorize\nfn vsin(x: f64, y: f64) -> f64 {\n    return sin(x) + y;\n}\n"
    "@vectorize\nfn vexp(x: f32, y: f32) -> f32 {\n    return exp(x) * y;\n}\n"
    "@kernel\nfn empty(x: f32[]) {\n}\n"
    "@kernel\nfn addk(a: f32[], b: f32[], c: f32[]) {\n"
    "    let i = grid(1);\n    if i < c.shape[0] { c[i] = a[i] + b[i]; }\n}\n";

static kjit_context *open_context_as(kjit_target target, bool as_python)
{
    kjit_options options;
    diag_options(&options, target, as_python);
    kjit_context *context;
    kjit_status status = kjit_context_create(&options, &context);
    if (status != KJIT_OK)
        die(NULL, status, "context");
    return context;
}

static kjit_context *open_context(kjit_target target)
{
    return open_context_as(target, false);
}

/* kjit_launch of the empty kernel on a context made as Python makes its
 * own (cancellable code, Ctrl-C cancels): the C side of a launch from
 * Python, for tests/bench/bench_python.py. */
static double python_options_launch_us(kjit_target target);

/* Runs workload w once on 1,000 host elements and checks it. */
static void run_and_check(kjit_context *context, kjit_function *function, int w)
{
    static float xf[ELEMENTS], yf[ELEMENTS], of[ELEMENTS];
    static double xd[ELEMENTS], yd[ELEMENTS], od[ELEMENTS];
    bool f64 = w == 1;
    for (int i = 0; i < ELEMENTS; i++) {
        xd[i] = -3.0 + 6.0 * i / ELEMENTS;
        yd[i] = 0.5 + (double)(i % 7);
        xf[i] = (float)xd[i];
        yf[i] = (float)yd[i];
    }
    int64_t shape[1] = {ELEMENTS};
    kjit_dtype dtype = f64 ? KJIT_F64 : KJIT_F32;
    kjit_array x = kjit_array_make(f64 ? (void *)xd : (void *)xf, dtype, 1, shape);
    kjit_array y = kjit_array_make(f64 ? (void *)yd : (void *)yf, dtype, 1, shape);
    kjit_array out = kjit_array_make(f64 ? (void *)od : (void *)of, dtype, 1, shape);
    kjit_arg args[2] = {kjit_arg_array(&x), kjit_arg_array(&y)};
    kjit_status status = kjit_call(function, args, 2, &out, NULL);
    if (status != KJIT_OK)
        die(context, status, "call");
    for (int i = 0; i < ELEMENTS; i++) {
        double a = xd[i], b = yd[i];
        double want = w == 0 ? (double)xf[i] + (double)yf[i] : w == 1 ? sin(a) + b : exp(a) * b;
        double got = f64 ? od[i] : (double)of[i];
        double tolerance = f64 ? 1e-13 : 4e-6;
        if (fabs(got - want) > tolerance * fmax(1.0, fabs(want))) {
            fprintf(stderr, "latency: %s element %d is %.9g, want %.9g\n", workload_names[w], i,
                    got, want);
            exit(1);
        }
    }
}

/*
 * --child TARGET W: in a new process, compile the source and prepare workload
 * w; print the milliseconds from kjit_compile_string to a function ready to
 * call (the context, made first, is not counted: it is opened once per
 * program), then check the results.
 */
static int child(kjit_target target, int w)
{
    kjit_context *context = open_context(target);
    double start = diag_now_us();
    kjit_module *module;
    kjit_status status = kjit_compile_string(context, "latency.kern", source, &module);
    if (status != KJIT_OK)
        die(context, status, "compile");
    kjit_function *function;
    const char *names[] = {"add", "vsin", "vexp"};
    status = kjit_module_function(module, names[w], &function);
    if (status != KJIT_OK)
        die(context, status, "function");
    int64_t shape[1] = {ELEMENTS};
    kjit_dtype dtype = w == 1 ? KJIT_F64 : KJIT_F32;
    kjit_array probe = kjit_array_make(NULL, dtype, 1, shape);
    kjit_arg args[2] = {kjit_arg_array(&probe), kjit_arg_array(&probe)};
    status = kjit_prepare(function, args, 2, NULL);
    if (status != KJIT_OK)
        die(context, status, "prepare");
    double elapsed = (diag_now_us() - start) / 1e3;
    run_and_check(context, function, w);
    KjCacheCounters counters = kj_cache_counters();
    printf("%.3f %llu\n", elapsed, (unsigned long long)counters.compiles);
    kjit_module_free(module);
    kjit_context_destroy(context);
    return 0;
}

/* Runs this program again with the arguments given (cache_dir, when not
 * NULL, as its KJIT_CACHE_DIR) and reads its one line of output into buf;
 * false when it failed. */
static bool run_self(const char *self, const char *a1, const char *a2, const char *a3,
                     const char *cache_dir, char *buf, size_t size)
{
    int fds[2];
    if (pipe(fds) != 0)
        exit(1);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        if (cache_dir)
            setenv("KJIT_CACHE_DIR", cache_dir, 1);
        execl(self, self, a1, a2, a3, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], buf, size - 1);
    close(fds[0]);
    buf[n > 0 ? n : 0] = '\0';
    int status;
    waitpid(pid, &status, 0);
    return n > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Runs this program with --child in a new process; its milliseconds. */
static double spawn(const char *self, const char *target, int w, const char *cache_dir,
                    unsigned long long *compiles)
{
    char wtext[8], buf[128];
    snprintf(wtext, sizeof wtext, "%d", w);
    double ms;
    if (!run_self(self, "--child", target, wtext, cache_dir, buf, sizeof buf) ||
        sscanf(buf, "%lf %llu", &ms, compiles) != 2) {
        fprintf(stderr, "latency: the child for %s %s failed\n", target, workload_names[w]);
        exit(1);
    }
    return ms;
}

static void compile_times(const char *self, const char *target)
{
    for (int w = 0; w < 3; w++) {
        double cold[RUNS], warm[RUNS];
        unsigned long long cold_compiles = 0, warm_compiles = 0, c;
        for (int r = 0; r < RUNS; r++) {
            char dir[] = "/tmp/kjit-latency-XXXXXX";
            if (!mkdtemp(dir))
                exit(1);
            cold[r] = spawn(self, target, w, dir, &c);
            cold_compiles += c;
            warm[r] = spawn(self, target, w, dir, &c);
            warm_compiles += c;
            char command[128];
            snprintf(command, sizeof command, "rm -rf %s", dir);
            if (system(command) != 0)
                exit(1);
        }
        printf("| %-8s | %-3s | cold compile, new process | %9.2f ms | %s |\n", target,
               workload_names[w], diag_median(cold, RUNS),
               cold_compiles == RUNS ? "compiled each run" : "?? cache not cold");
        printf("| %-8s | %-3s | warm start, new process   | %9.2f ms | %s |\n", target,
               workload_names[w], diag_median(warm, RUNS),
               warm_compiles == 0 ? "disk cache hit, nothing compiled" : "?? compiled again");
        fflush(stdout);
    }
}

/* Host microseconds per call of fn(), median of RUNS batches. */
static double per_call_us(void (*fn)(void *), void *user, kjit_context *context)
{
    double batches[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double start = diag_now_us();
        for (int i = 0; i < CALLS; i++)
            fn(user);
        batches[r] = (diag_now_us() - start) / CALLS;
        kjit_synchronize(context); /* outside the timing: host cost only */
    }
    return diag_median(batches, RUNS);
}

typedef struct LaunchCase {
    kjit_context *context;
    kjit_function *function;
    kjit_arg args[2];
    kjit_array out;
    /* bare driver */
    const KjCuDriver *cu;
    void *cu_function;
    void *params[1];
    KjArrayDesc desc;
} LaunchCase;

static void kjit_launch_once(void *user)
{
    LaunchCase *c = user;
    static const uint32_t one[3] = {1, 1, 1};
    kjit_status status = kjit_launch(c->function, one, one, c->args, 1, NULL);
    if (status != KJIT_OK)
        die(c->context, status, "launch");
}

static void kjit_call_once(void *user)
{
    LaunchCase *c = user;
    kjit_status status = kjit_call(c->function, c->args, 2, &c->out, NULL);
    if (status != KJIT_OK)
        die(c->context, status, "vectorized call");
}

static void bare_launch_once(void *user)
{
    LaunchCase *c = user;
    if (c->cu->LaunchKernel(c->cu_function, 1, 1, 1, 1, 1, 1, 0, NULL, c->params, NULL) != 0) {
        fprintf(stderr, "latency: cuLaunchKernel failed\n");
        exit(1);
    }
}

/* An empty kernel that takes one 136-byte array descriptor, as kjit's does. */
static const char bare_ptx[] = ".version 7.0\n.target sm_50\n.address_size 64\n"
                               ".visible .entry bare_empty(.param .align 8 .b8 x[136])\n{\n"
                               "    ret;\n}\n";

/* ------------------------------------------------------------ launch gap */

#define GAP_ELEMENTS 1000000
#define GAP_RUNS 101
#define GAP_BLOCK 256

/* One add kernel, three ways of passing its arrays: %s is the parameter
 * list, the loads read the data pointers and c's extent. */
static const char gap_ptx_format[] =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry %s(%s)\n{\n"
    "    .reg .pred %%p<2>;\n    .reg .b32 %%r<4>;\n    .reg .b64 %%rd<12>;\n"
    "    .reg .f32 %%f<4>;\n"
    "    ld.param.u64 %%rd1, [pa];\n    ld.param.u64 %%rd2, [pb];\n"
    "    ld.param.u64 %%rd3, [pc];\n    ld.param.u64 %%rd4, [%s];\n"
    "    mov.u32 %%r1, %%ctaid.x;\n    mov.u32 %%r2, %%ntid.x;\n    mov.u32 %%r3, %%tid.x;\n"
    "    mul.wide.u32 %%rd5, %%r1, %%r2;\n    cvt.u64.u32 %%rd6, %%r3;\n"
    "    add.s64 %%rd5, %%rd5, %%rd6;\n    setp.ge.s64 %%p1, %%rd5, %%rd4;\n"
    "    @%%p1 bra DONE;\n    shl.b64 %%rd7, %%rd5, 2;\n"
    "    cvta.to.global.u64 %%rd1, %%rd1;\n    cvta.to.global.u64 %%rd2, %%rd2;\n"
    "    cvta.to.global.u64 %%rd3, %%rd3;\n"
    "    add.s64 %%rd8, %%rd1, %%rd7;\n    add.s64 %%rd9, %%rd2, %%rd7;\n"
    "    add.s64 %%rd10, %%rd3, %%rd7;\n"
    "    ld.global.f32 %%f1, [%%rd8];\n    ld.global.f32 %%f2, [%%rd9];\n"
    "    add.f32 %%f3, %%f1, %%f2;\n    st.global.f32 [%%rd10], %%f3;\n"
    "DONE:\n    ret;\n}\n";

typedef struct GapCase {
    const char *label;
    kjit_context *context;
    const KjCuDriver *cu;
    void *cu_function;     /* bare cases */
    void *params[4];
    kjit_function *function; /* kjit cases */
    kjit_arg args[3];
    kjit_array *out;
    double times[GAP_RUNS];
} GapCase;

static void gap_call(GapCase *g)
{
    kjit_status status = KJIT_OK;
    unsigned blocks = (GAP_ELEMENTS + GAP_BLOCK - 1) / GAP_BLOCK;
    if (g->cu_function) {
        if (g->cu->LaunchKernel(g->cu_function, blocks, 1, 1, GAP_BLOCK, 1, 1, 0, NULL, g->params,
                                NULL) != 0) {
            fprintf(stderr, "latency: cuLaunchKernel failed for %s\n", g->label);
            exit(1);
        }
    } else if (g->out) {
        status = kjit_call_async(g->function, g->args, 2, g->out, NULL);
    } else {
        const uint32_t grid[3] = {blocks, 1, 1}, block[3] = {GAP_BLOCK, 1, 1};
        status = kjit_launch(g->function, grid, block, g->args, 3, NULL);
    }
    if (status != KJIT_OK)
        die(g->context, status, g->label);
}

static void *gap_kernel(const KjCuDriver *cu, const char *name, const char *params,
                        const char *extent)
{
    char ptx[4096];
    snprintf(ptx, sizeof ptx, gap_ptx_format, name, params, extent);
    void *module = NULL, *function = NULL;
    if (cu->ModuleLoadDataEx(&module, ptx, 0, NULL, NULL) != 0 ||
        cu->ModuleGetFunction(&function, module, name) != 0) {
        fprintf(stderr, "latency: the PTX of %s did not load\n", name);
        exit(1);
    }
    return function;
}

/* Fails unless c == a + b everywhere (the case's kernel ran, and right). */
static void gap_check(GapCase *g, kjit_array *c, const float *a, const float *b, float *got)
{
    kjit_array host = kjit_array_make(got, KJIT_F32, 1, c->shape);
    kjit_status status = kjit_copy(g->context, &host, c, NULL);
    if (status != KJIT_OK)
        die(g->context, status, "copy back");
    for (int64_t i = 0; i < GAP_ELEMENTS; i++)
        if (got[i] != a[i] + b[i]) {
            fprintf(stderr, "latency: %s: element %lld is %g, want %g\n", g->label,
                    (long long)i, got[i], a[i] + b[i]);
            exit(1);
        }
}

static void launch_gaps(kjit_context *context, kjit_module *module)
{
    const KjCuDriver *cu = kj_cuda_driver(NULL);
    int64_t shape[1] = {GAP_ELEMENTS};
    kjit_array a, b, c;
    kjit_status status;
    if ((status = kjit_device_alloc(context, KJIT_F32, 1, shape, &a)) != KJIT_OK ||
        (status = kjit_device_alloc(context, KJIT_F32, 1, shape, &b)) != KJIT_OK ||
        (status = kjit_device_alloc(context, KJIT_F32, 1, shape, &c)) != KJIT_OK)
        die(context, status, "device arrays");
    float *ha = malloc(GAP_ELEMENTS * sizeof *ha), *hb = malloc(GAP_ELEMENTS * sizeof *hb);
    float *hc = malloc(GAP_ELEMENTS * sizeof *hc);
    srand(7);
    for (int64_t i = 0; i < GAP_ELEMENTS; i++) {
        ha[i] = (float)rand() / (float)RAND_MAX * 200.0f - 100.0f;
        hb[i] = (float)rand() / (float)RAND_MAX * 200.0f - 100.0f;
    }
    kjit_array host_a = kjit_array_make(ha, KJIT_F32, 1, shape);
    kjit_array host_b = kjit_array_make(hb, KJIT_F32, 1, shape);
    if ((status = kjit_copy(context, &a, &host_a, NULL)) != KJIT_OK ||
        (status = kjit_copy(context, &b, &host_b, NULL)) != KJIT_OK)
        die(context, status, "copy in");

    /* Parameter blocks: pointers; {data, extent}; full descriptors. */
    void *ptrs[3] = {a.data, b.data, c.data};
    int64_t n = GAP_ELEMENTS;
    KjArrayDesc descs[3];
    memset(descs, 0, sizeof descs);
    for (int i = 0; i < 3; i++) {
        descs[i].data = ptrs[i];
        descs[i].shape[0] = n;
        descs[i].strides[0] = 1;
    }
    GapCase cases[5] = {
        {.label = "bare cuLaunchKernel, pointer parameters"},
        {.label = "bare cuLaunchKernel, 16-byte array records"},
        {.label = "bare cuLaunchKernel, 136-byte descriptors"},
        {.label = "kjit_call_async (vectorized add)"},
        {.label = "kjit_launch (@kernel add)"},
    };
    for (int k = 0; k < 5; k++) {
        cases[k].context = context;
        cases[k].cu = cu;
    }
    cases[0].cu_function = gap_kernel(cu, "gap_ptr",
                                      ".param .u64 pa, .param .u64 pb, .param .u64 pc, "
                                      ".param .u64 pn", "pn");
    for (int i = 0; i < 3; i++)
        cases[0].params[i] = &ptrs[i];
    cases[0].params[3] = &n;
    cases[1].cu_function = gap_kernel(cu, "gap_record",
                                      ".param .align 8 .b8 pa[16], .param .align 8 .b8 pb[16], "
                                      ".param .align 8 .b8 pc[16]", "pc+8");
    cases[2].cu_function = gap_kernel(cu, "gap_desc",
                                      ".param .align 8 .b8 pa[136], .param .align 8 .b8 pb[136], "
                                      ".param .align 8 .b8 pc[136]", "pc+8");
    for (int i = 0; i < 3; i++)
        cases[1].params[i] = cases[2].params[i] = &descs[i];
    if ((status = kjit_module_function(module, "add", &cases[3].function)) != KJIT_OK ||
        (status = kjit_module_function(module, "addk", &cases[4].function)) != KJIT_OK)
        die(context, status, "add");
    cases[3].args[0] = cases[4].args[0] = kjit_arg_array(&a);
    cases[3].args[1] = cases[4].args[1] = kjit_arg_array(&b);
    cases[4].args[2] = kjit_arg_array(&c);
    cases[3].out = &c;

    void *start, *end;
    if (cu->EventCreate(&start, 0) != 0 || cu->EventCreate(&end, 0) != 0)
        die(context, KJIT_ERROR_CUDA, "cuEventCreate");
    for (int k = 0; k < 5; k++) {
        for (int w = 0; w < 3; w++)
            gap_call(&cases[k]);
        kjit_synchronize(context);
        gap_check(&cases[k], &c, ha, hb, hc);
        if ((status = kjit_copy(context, &c, &a, NULL)) != KJIT_OK) /* spoil c for the next */
            die(context, status, "copy");
    }
    /* The cases take turns, so drift in the GPU's clocks reaches them alike. */
    for (int r = 0; r < GAP_RUNS; r++)
        for (int k = 0; k < 5; k++) {
            float ms = 0;
            cu->EventRecord(start, NULL);
            gap_call(&cases[k]);
            cu->EventRecord(end, NULL);
            if (cu->EventSynchronize(end) != 0 || cu->EventElapsedTime(&ms, start, end) != 0)
                die(context, KJIT_ERROR_CUDA, "events");
            cases[k].times[r] = ms * 1e3;
        }
    double floor = diag_median(cases[0].times, GAP_RUNS);
    for (int k = 0; k < 5; k++) {
        double us = k == 0 ? floor : diag_median(cases[k].times, GAP_RUNS);
        printf("| cuda     | add | launch gap, 1e6 f32       | %9.2f us | %s; %+.1f%% over pointer parameters |\n",
               us, cases[k].label, 100.0 * (us - floor) / floor);
    }
    cu->EventDestroy(start);
    cu->EventDestroy(end);
    free(ha);
    free(hb);
    free(hc);
    kjit_device_free(context, &a);
    kjit_device_free(context, &b);
    kjit_device_free(context, &c);
}

static void call_costs(kjit_target target)
{
    kjit_context *context = open_context(target);
    const char *name = kjit_target_name(kjit_context_target(context));
    kjit_module *module;
    kjit_status status = kjit_compile_string(context, "latency.kern", source, &module);
    if (status != KJIT_OK)
        die(context, status, "compile");
    LaunchCase c = {.context = context};
    int64_t shape[1] = {ELEMENTS};
    kjit_array a, b;
    if ((status = kjit_device_alloc(context, KJIT_F32, 1, shape, &a)) != KJIT_OK ||
        (status = kjit_device_alloc(context, KJIT_F32, 1, shape, &b)) != KJIT_OK ||
        (status = kjit_device_alloc(context, KJIT_F32, 1, shape, &c.out)) != KJIT_OK)
        die(context, status, "device arrays");

    if ((status = kjit_module_function(module, "empty", &c.function)) != KJIT_OK)
        die(context, status, "empty");
    c.args[0] = kjit_arg_array(&a);
    kjit_launch_once(&c); /* code generation outside the timing */
    kjit_synchronize(context);
    double launch = per_call_us(kjit_launch_once, &c, context);

    double bare = -1;
    if (kjit_context_target(context) == KJIT_TARGET_CUDA) {
        c.cu = kj_cuda_driver(NULL);
        void *cu_module = NULL;
        if (c.cu && c.cu->ModuleLoadDataEx(&cu_module, bare_ptx, 0, NULL, NULL) == 0 &&
            c.cu->ModuleGetFunction(&c.cu_function, cu_module, "bare_empty") == 0) {
            memset(&c.desc, 0, sizeof c.desc);
            c.desc.data = a.data;
            c.params[0] = &c.desc;
            bare_launch_once(&c);
            kjit_synchronize(context);
            bare = per_call_us(bare_launch_once, &c, context);
        }
    }

    if ((status = kjit_module_function(module, "add", &c.function)) != KJIT_OK)
        die(context, status, "add");
    c.args[0] = kjit_arg_array(&a);
    c.args[1] = kjit_arg_array(&b);
    kjit_call_once(&c);
    kjit_synchronize(context);
    double call = per_call_us(kjit_call_once, &c, context);

    if (bare > 0)
        printf("| %-8s | -   | launch, empty kernel      | %9.2f us | bare cuLaunchKernel %.2f us (%+.0f%%) |\n",
               name, launch, bare, 100.0 * (launch - bare) / bare);
    else
        printf("| %-8s | -   | launch, empty kernel      | %9.2f us | grid 1x1, block 1x1 |\n", name,
               launch);
    printf("| %-8s | -   | launch, Python's options  | %9.2f us | the same, cancellable, "
           "cancel_signal SIGINT |\n", name, python_options_launch_us(target));
    printf("| %-8s | add | vectorized call, device   | %9.2f us | %d f32 elements, host time |\n",
           name, call, ELEMENTS);
    if (kjit_context_target(context) == KJIT_TARGET_CUDA)
        launch_gaps(context, module);
    kjit_device_free(context, &a);
    kjit_device_free(context, &b);
    kjit_device_free(context, &c.out);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

static double python_options_launch_us(kjit_target target)
{
    kjit_context *context = open_context_as(target, true);
    kjit_module *module;
    kjit_status status = kjit_compile_string(context, "latency.kern", source, &module);
    if (status != KJIT_OK)
        die(context, status, "compile");
    LaunchCase c = {.context = context};
    int64_t shape[1] = {ELEMENTS};
    kjit_array a;
    if ((status = kjit_device_alloc(context, KJIT_F32, 1, shape, &a)) != KJIT_OK)
        die(context, status, "device array");
    if ((status = kjit_module_function(module, "empty", &c.function)) != KJIT_OK)
        die(context, status, "empty");
    c.args[0] = kjit_arg_array(&a);
    kjit_launch_once(&c);
    kjit_synchronize(context);
    double us = per_call_us(kjit_launch_once, &c, context);
    kjit_device_free(context, &a);
    kjit_module_free(module);
    kjit_context_destroy(context);
    return us;
}

/* ------------------------------------------------------------ programs */

#define PROGRAM_RUNS 5
#define PROGRAM_GOAL_MS 250.0
#define MAX_PROGRAMS 64

enum { PROGRAM_OBJ, PROGRAM_SHAPE, PROGRAM_PTX, PROGRAM_KINDS };
static const char *const program_kinds[PROGRAM_KINDS] = {"cpu", "cpu, block shape", "cuda PTX"};

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    size_t got = text ? fread(text, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!text)
        return NULL;
    text[got] = '\0';
    return text;
}

/* The block shape a file's kernels with barriers are timed at (256 x 1 x 1,
 * or the file's `// bench-latency: block X[,Y[,Z]]`); its thread count, 0
 * for a file without syncthreads(), whose code has no shape to be compiled
 * for. */
static unsigned program_block(const char *path, unsigned shape[3])
{
    shape[0] = 256, shape[1] = shape[2] = 1;
    char *text = read_text(path);
    if (!text)
        return 0;
    /* a kernel without barriers has code for a block shape too when it is
     * straight-line (kj_split_straight_line): its file says so by the mark */
    const char *mark = strstr(text, "// bench-latency: block ");
    unsigned threads = strstr(text, "syncthreads(") || mark ? 256 : 0;
    if (threads && mark) {
        const char *p = mark + strlen("// bench-latency: block ");
        for (int k = 0; k < 3; k++) {
            shape[k] = (unsigned)strtoul(p, (char **)&p, 10);
            if (*p != ',')
                break;
            p++;
        }
        threads = shape[0] * shape[1] * shape[2];
    }
    free(text);
    return threads;
}

/* The wall clock, or with KJIT_BENCH_CLOCK=thread the CPU time of the
 * compile: steadier on a busy machine.  A first call compiles on the calling
 * thread (its CPU time); kjit_stage_file compiles a file's groups of roots on
 * worker threads too (codegen_groups.c), so for `every function` it is the
 * whole process's, which does nothing else: the thread count does not lower
 * it, only the wall clock. */
static double program_clock_us(bool whole_process)
{
    const char *clock = getenv("KJIT_BENCH_CLOCK");
    if (!clock || strcmp(clock, "thread") != 0)
        return diag_now_us();
    struct timespec t;
    clock_gettime(whole_process ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* --program PATH KIND: in a new process, the milliseconds of one cold
 * compile of the whole file. */
static int program_child(const char *path, int kind)
{
    kjit_stage_options options;
    kjit_stage_options_init(&options);
    kjit_stage stage = KJIT_STAGE_OBJ;
    unsigned shape[3];
    if (kind == PROGRAM_SHAPE && program_block(path, shape))
        options.block[0] = shape[0], options.block[1] = shape[1], options.block[2] = shape[2];
    if (kind == PROGRAM_PTX)
        options.target = KJIT_TARGET_CUDA, stage = KJIT_STAGE_PTX;
    char *bytes = NULL, *error = NULL;
    size_t size = 0;
    double start = program_clock_us(true);
    kjit_status status = kjit_stage_file(path, stage, &options, &bytes, &size, &error);
    double elapsed = (program_clock_us(true) - start) / 1e3;
    if (status != KJIT_OK || size == 0) {
        fprintf(stderr, "latency: %s (%s): %s: %s\n", path, program_kinds[kind],
                kjit_status_name(status), error ? error : "no code");
        return 1;
    }
    printf("%.3f %zu\n", elapsed, size);
    free(bytes);
    free(error);
    return 0;
}

static double spawn_program(const char *self, const char *path, int kind, size_t *bytes)
{
    char ktext[8], buf[128];
    snprintf(ktext, sizeof ktext, "%d", kind);
    double ms;
    if (!run_self(self, "--program", path, ktext, NULL, buf, sizeof buf) ||
        sscanf(buf, "%lf %zu", &ms, bytes) != 2) {
        fprintf(stderr, "latency: the child for %s (%s) failed\n", path, program_kinds[kind]);
        exit(1);
    }
    return ms;
}

static kjit_target parse_target(const char *text);

/* ------------------------------------------------------------ first calls */

/* A @reduce's first call: what the JIT compiles before it runs (api_reduce.c
 * finds or compiles each level's form as the call needs it), for a sum of a
 * vector of FIRST_CALL_ELEMENTS, which takes two levels: the first (mapped,
 * for a fused @reduce) and one over its partial results.  The "every
 * function" column is `kjit build`'s work, every signature's forms; a call
 * compiles those of its signature only. */
#define FIRST_CALL_ELEMENTS 1000000
#define MAX_FIRST_CALLS 32

/* The element types of a call's arguments for @reduce signature sig (the
 * map's parameters for a fused one, of the map signature that gives the
 * reduction's type): their count, 0 when there is none. */
static int reduce_arg_dtypes(kjit_function *function, int sig, kjit_dtype *dtypes, int cap)
{
    kjit_dtype t;
    if (kjit_function_result(function, sig, &t) != KJIT_OK)
        return 0;
    kjit_function *map = kjit_function_map(function);
    if (!map) {
        dtypes[0] = t;
        return 1;
    }
    for (int m = 0; m < kjit_function_signature_count(map); m++) {
        kjit_dtype r;
        int n = kjit_function_param_count(map), ndim;
        if (kjit_function_result(map, m, &r) != KJIT_OK || r != t || n > cap)
            continue;
        for (int q = 0; q < n; q++)
            if (kjit_function_param(map, m, q, &dtypes[q], &ndim) != KJIT_OK)
                return 0;
        return n;
    }
    return 0;
}

/* The CPU time of this process's children that have ended (ptxas), in us. */
static double children_cpu_us(void)
{
    struct rusage u;
    getrusage(RUSAGE_CHILDREN, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/* --first-call PATH TARGET:NAME:SIG[:ROWSxCOLS:AXIS]: in a new process
 * without a disk cache, the milliseconds from the source to @reduce NAME's
 * signature SIG ready for its first call (kjit_reduce_prepare), and how many
 * compiles that took.  With KJIT_BENCH_CLOCK=thread the compiling thread's
 * CPU time and that of ptxas (cuda), a process of its own.  The call sums a
 * vector of FIRST_CALL_ELEMENTS, or with ROWSxCOLS:AXIS a C-order matrix
 * along that axis (the forms of a sum along an axis: tests/gpu/reduce_forms.sh). */
static int first_call_child(const char *path, const char *spec)
{
    char target[16], name[128];
    int sig, axis = -1, fields;
    long long rows = 0, cols = 0;
    fields = sscanf(spec, "%15[^:]:%127[^:]:%d:%lldx%lld:%d", target, name, &sig, &rows, &cols, &axis);
    if (fields != 3 && !(fields == 6 && rows > 0 && cols > 0 && (axis == 0 || axis == 1))) {
        fprintf(stderr, "latency: --first-call wants TARGET:NAME:SIG[:ROWSxCOLS:AXIS], not %s\n", spec);
        return 2;
    }
    setenv("KJIT_CACHE", "off", 1);
    kjit_context *context = open_context(parse_target(target));
    const char *clock = getenv("KJIT_BENCH_CLOCK");
    bool thread = clock && strcmp(clock, "thread") == 0;
    double start = program_clock_us(false), start_children = thread ? children_cpu_us() : 0;
    kjit_module *module;
    kjit_status status = kjit_compile_file(context, path, &module);
    if (status != KJIT_OK)
        die(context, status, "compile");
    kjit_function *function;
    status = kjit_module_function(module, name, &function);
    if (status != KJIT_OK)
        die(context, status, "function");
    kjit_dtype dtypes[8];
    int n = reduce_arg_dtypes(function, sig, dtypes, 8);
    if (n == 0) {
        fprintf(stderr, "latency: %s: no arguments for signature %d of %s\n", path, sig, name);
        return 1;
    }
    int64_t shape[2] = {FIRST_CALL_ELEMENTS, 0};
    int ndim = 1;
    if (fields == 6)
        shape[0] = rows, shape[1] = cols, ndim = 2;
    kjit_array arrays[8];
    kjit_arg args[8];
    for (int q = 0; q < n; q++) {
        arrays[q] = kjit_array_make(NULL, dtypes[q], ndim, shape);
        args[q] = kjit_arg_array(&arrays[q]);
    }
    status = kjit_reduce_prepare(function, args, n, fields == 6 ? &axis : NULL, fields == 6 ? 1 : 0);
    if (status != KJIT_OK)
        die(context, status, "kjit_reduce_prepare");
    double elapsed = program_clock_us(false) - start;
    if (thread)
        elapsed += children_cpu_us() - start_children;
    KjCacheCounters counters = kj_cache_counters();
    printf("%.3f %llu\n", elapsed / 1e3, (unsigned long long)counters.compiles);
    kjit_module_free(module);
    kjit_context_destroy(context);
    return 0;
}

typedef struct FirstCall {
    char spec[160]; /* NAME:SIG */
    char what[160]; /* "vsum f32(f32, f32)" */
} FirstCall;

/* The file's @reduce signatures, each a first call to time; their count. */
static int first_calls_of(const char *path, FirstCall *calls, int cap)
{
    kjit_context *context = open_context(KJIT_TARGET_CPU);
    kjit_module *module;
    int n = 0;
    if (kjit_compile_file(context, path, &module) == KJIT_OK) { /* the front end only */
        for (int f = 0; f < kjit_module_function_count(module); f++) {
            kjit_function *function;
            const char *name = kjit_module_function_name(module, f);
            if (kjit_module_function(module, name, &function) != KJIT_OK ||
                kjit_function_kind_of(function) != KJIT_FUNCTION_REDUCE)
                continue;
            for (int sig = 0; sig < kjit_function_signature_count(function) && n < cap; sig++) {
                snprintf(calls[n].spec, sizeof calls[n].spec, "%s:%d", name, sig);
                snprintf(calls[n].what, sizeof calls[n].what, "%s %s", name,
                         kjit_function_signature(function, sig));
                n++;
            }
        }
        kjit_module_free(module);
    }
    kjit_context_destroy(context);
    return n;
}

/* The slowest first call of a file's @reduce signatures on target (the
 * median of PROGRAM_RUNS new processes each), naming it in what (empty for
 * a file without one, whose time is 0). */
static double first_call_ms(const char *self, const char *path, const char *target, char *what,
                            size_t size)
{
    FirstCall calls[MAX_FIRST_CALLS];
    int n = first_calls_of(path, calls, MAX_FIRST_CALLS);
    double worst = 0;
    what[0] = '\0';
    for (int c = 0; c < n; c++) {
        char spec[192], buf[128];
        snprintf(spec, sizeof spec, "%.16s:%.160s", target, calls[c].spec);
        double runs[PROGRAM_RUNS];
        for (int r = 0; r < PROGRAM_RUNS; r++) {
            unsigned long long compiles = 0;
            if (!run_self(self, "--first-call", path, spec, NULL, buf, sizeof buf) ||
                sscanf(buf, "%lf %llu", &runs[r], &compiles) != 2 || compiles == 0) {
                fprintf(stderr, "latency: the first call of %s (%s) failed or compiled nothing\n",
                        calls[c].what, target);
                exit(1);
            }
        }
        double ms = diag_median(runs, PROGRAM_RUNS);
        if (ms > worst) {
            worst = ms;
            snprintf(what, size, "%s", calls[c].what);
        }
    }
    return worst;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every .kern of the folders, cold, in new processes: a second table (with
 * cuda, the first calls of @reduce signatures on the GPU too). */
static void program_times(const char *self, char **folders, int count, bool cuda)
{
    char *paths[MAX_PROGRAMS];
    int n = 0;
    for (int f = 0; f < count; f++) {
        DIR *d = opendir(folders[f]);
        if (!d) {
            fprintf(stderr, "latency: cannot read the folder %s\n", folders[f]);
            exit(1);
        }
        struct dirent *e;
        while ((e = readdir(d)) && n < MAX_PROGRAMS) {
            size_t len = strlen(e->d_name);
            if (len < 6 || strcmp(e->d_name + len - 5, ".kern") != 0)
                continue;
            paths[n] = malloc(strlen(folders[f]) + len + 2);
            sprintf(paths[n++], "%s/%s", folders[f], e->d_name);
        }
        closedir(d);
    }
    qsort(paths, (size_t)n, sizeof *paths, by_name);
    printf("\n| program | cpu: every function | cpu: block shape | cpu: first launch | cuda: PTX "
           "| @reduce first call, cpu%s | note |\n", cuda ? " | @reduce first call, cuda" : "");
    printf("| --- | ---: | ---: | ---: | ---: | ---: |%s --- |\n", cuda ? " ---: |" : "");
    int over = 0, calls_over = 0, with_calls = 0;
    for (int i = 0; i < n; i++) {
        unsigned dims[3];
        unsigned block = program_block(paths[i], dims);
        double ms[PROGRAM_KINDS] = {0};
        for (int kind = 0; kind < PROGRAM_KINDS; kind++) {
            if (kind == PROGRAM_SHAPE && !block)
                continue;
            double runs[PROGRAM_RUNS];
            size_t bytes;
            for (int r = 0; r < PROGRAM_RUNS; r++)
                runs[r] = spawn_program(self, paths[i], kind, &bytes);
            ms[kind] = diag_median(runs, PROGRAM_RUNS);
        }
        double first = ms[PROGRAM_OBJ] + ms[PROGRAM_SHAPE];
        bool slow = first > PROGRAM_GOAL_MS || ms[PROGRAM_PTX] > PROGRAM_GOAL_MS;
        over += slow;
        char shape[32] = "-", note[256];
        if (block)
            snprintf(shape, sizeof shape, "%.1f ms", ms[PROGRAM_SHAPE]);
        snprintf(note, sizeof note, "%s%s", block ? "" : "no shape: no barriers nor mark",
                 slow ? (block ? "over the 250 ms goal" : "; over the 250 ms goal") : "");
        if (block && !slow)
            snprintf(note, sizeof note, "blocks of %u threads (%ux%ux%u)", block, dims[0], dims[1],
                     dims[2]);
        /* a @reduce file: its slowest signature's first call, beside the
         * whole file that `kjit build` compiles */
        char cpu_what[160], cuda_what[160] = "";
        double cpu_call = first_call_ms(self, paths[i], "cpu", cpu_what, sizeof cpu_what);
        double cuda_call =
            cuda ? first_call_ms(self, paths[i], "cuda", cuda_what, sizeof cuda_what) : 0;
        char cpu_text[32] = "-", cuda_text[48] = "";
        if (cpu_what[0]) {
            with_calls++;
            calls_over += cpu_call > PROGRAM_GOAL_MS || cuda_call > PROGRAM_GOAL_MS;
            snprintf(cpu_text, sizeof cpu_text, "%.1f ms", cpu_call);
            size_t len = strlen(note);
            bool differs = cuda_what[0] && strcmp(cuda_what, cpu_what) != 0;
            snprintf(note + len, sizeof note - len, "%sslowest call: %s%s%s%s", len ? "; " : "",
                     cpu_what, differs ? " (cuda: " : "", differs ? cuda_what : "",
                     differs ? ")" : "");
        }
        if (cuda)
            snprintf(cuda_text, sizeof cuda_text, cuda_what[0] ? " %.1f ms |" : " - |", cuda_call);
        printf("| %s | %.1f ms | %s | %.1f ms | %.1f ms | %s |%s %s |\n", paths[i], ms[PROGRAM_OBJ],
               shape, first, ms[PROGRAM_PTX], cpu_text, cuda_text, note);
        fflush(stdout);
        free(paths[i]);
    }
    const char *clock = getenv("KJIT_BENCH_CLOCK");
    printf("\ncold compiles, median of %d new processes each (%s); %d of %d programs over %.0f ms "
           "compiling every function; %d of %d @reduce files with a first call over it\n",
           PROGRAM_RUNS, clock && strcmp(clock, "thread") == 0
                             ? "CPU time: the compile's process, a first call's thread"
                             : "wall clock",
           over, n, PROGRAM_GOAL_MS, calls_over, with_calls);
}

static kjit_target parse_target(const char *text)
{
    if (strcmp(text, "cpu") == 0) return KJIT_TARGET_CPU;
    if (strcmp(text, "parallel") == 0) return KJIT_TARGET_PARALLEL;
    if (strcmp(text, "cuda") == 0) return KJIT_TARGET_CUDA;
    if (strcmp(text, "auto") == 0) return KJIT_TARGET_AUTO;
    fprintf(stderr, "latency: unknown target '%s' (cpu, parallel, cuda, auto)\n", text);
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--child") == 0)
        return child(parse_target(argv[2]), atoi(argv[3]));
    if (argc == 4 && strcmp(argv[1], "--program") == 0)
        return program_child(argv[2], atoi(argv[3]));
    if (argc == 4 && strcmp(argv[1], "--first-call") == 0)
        return first_call_child(argv[2], argv[3]);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = '\0';
    const char *targets[2] = {"cpu", NULL};
    /* --calls (last): the call costs alone, no compile times (bench_python.py) */
    bool calls_only = argc > 1 && strcmp(argv[argc - 1], "--calls") == 0;
    if (calls_only)
        argc--;
    char *folders[16];
    int folder_count = 0;
    bool named = false;
    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        if (d) {
            closedir(d);
            if (folder_count < 16)
                folders[folder_count++] = argv[i];
        } else {
            parse_target(argv[i]); /* refuses an unknown one */
            targets[0] = argv[i];
            named = true;
        }
    }
    if (!named && kjit_cuda_available(NULL, 0) == KJIT_OK)
        targets[1] = "cuda";
    printf("| target   | fn  | what                      |      time    | note |\n");
    printf("| --- | --- | --- | ---: | --- |\n");
    for (int t = 0; t < 2 && targets[t]; t++) {
        if (!calls_only)
            compile_times(self, targets[t]);
        call_costs(parse_target(targets[t]));
    }
    if (folder_count > 0)
        program_times(self, folders, folder_count,
                      targets[1] || strcmp(targets[0], "cuda") == 0);
    return 0;
}
