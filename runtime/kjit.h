/*
 * kjit.h: the public C API for programs that embed the kjit JIT compiler.
 *
 * Nothing of LLVM or CUDA shows through.  Every call returns a kjit_status; on
 * failure the context keeps a message (kjit_last_error) that names the file,
 * line and column for compile errors, or the kernel and the driver's error for
 * GPU failures.  The library never prints and never exits.
 *
 * Threads: a context, its modules and functions may be used from any number
 * of threads at once (code is generated once, whichever thread asks first);
 * kjit_last_error(context) is the calling thread's own last message on that
 * context.  Freeing a handle (kjit_module_free, kjit_context_destroy,
 * kjit_stream_destroy ...) while another thread uses it is the caller's
 * error.  Every function refuses NULL pointers and handles that were freed
 * (KJIT_ERROR_INVALID_ARGUMENT; getters answer 0 or NULL) instead of
 * crashing; docs/embedding.md has the whole contract.
 */
#ifndef KJIT_H
#define KJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KJIT_VERSION "0.1.0"
#define KJIT_MAX_DIMS 8

typedef enum kjit_status {
    KJIT_OK = 0,
    KJIT_ERROR_COMPILE,          /* syntax or type errors in the source */
    KJIT_ERROR_IO,               /* a file could not be read or written */
    KJIT_ERROR_NOT_FOUND,        /* no function of that name */
    KJIT_ERROR_INVALID_ARGUMENT, /* wrong argument count, type or value */
    KJIT_ERROR_SHAPE,            /* shapes that do not broadcast, wrong output shape */
    KJIT_ERROR_TYPE,             /* element types that match no signature */
    KJIT_ERROR_NO_DEVICE,        /* no CUDA driver or GPU for the cuda target */
    KJIT_ERROR_CUDA,             /* a driver call failed (launch, fault, JIT) */
    KJIT_ERROR_OUT_OF_MEMORY,    /* host or device memory exhausted */
    KJIT_ERROR_BACKEND,          /* code generation failed (a bug, or a missing libdevice) */
    KJIT_ERROR_CHECK,            /* checked mode: a run-time check failed (the message names
                                    the source place and the values) */
    KJIT_ERROR_CANCELLED,        /* kjit_context_cancel stopped the call; its outputs are
                                    partly written */
    KJIT_ERROR_TIMEOUT,          /* the call ran past kjit_options.time_limit_s and was
                                    stopped; its outputs are partly written */
} kjit_status;

const char *kjit_status_name(kjit_status status);

typedef enum kjit_target {
    KJIT_TARGET_AUTO = 0, /* cuda when a GPU is usable, else cpu */
    KJIT_TARGET_CPU,      /* one thread */
    KJIT_TARGET_PARALLEL, /* a thread pool over the cores */
    KJIT_TARGET_CUDA,     /* an NVIDIA GPU through the driver API */
} kjit_target;

const char *kjit_target_name(kjit_target target);

/* Element types, in the order of the language's scalar types. */
typedef enum kjit_dtype {
    KJIT_BOOL, KJIT_I8, KJIT_I16, KJIT_I32, KJIT_I64,
    KJIT_U8, KJIT_U16, KJIT_U32, KJIT_U64,
    KJIT_F32, KJIT_F64, KJIT_C64, KJIT_C128,
    KJIT_F16, KJIT_BF16, /* IEEE half; bfloat16 (the top half of an f32): in memory,
                            2-byte bit patterns */
    KJIT_DTYPE_COUNT
} kjit_dtype;

size_t kjit_dtype_size(kjit_dtype dtype);
const char *kjit_dtype_name(kjit_dtype dtype); /* "f32" */
/* f16 and bf16 bit patterns: a double rounded to nearest even (NaN and
 * infinities kept), and back exactly.  dtype is KJIT_F16 or KJIT_BF16. */
uint16_t kjit_half_from_double(kjit_dtype dtype, double value);
double kjit_half_to_double(kjit_dtype dtype, uint16_t bits);

typedef enum kjit_memory { KJIT_MEMORY_HOST = 0, KJIT_MEMORY_DEVICE = 1 } kjit_memory;

/*
 * An array view over memory the caller owns (or that kjit_device_alloc gave).
 * Strides are in bytes, so transposed and sliced views work; a stride of 0
 * repeats an element.  ndim 0 is a scalar held at data.
 */
typedef struct kjit_array {
    void *data;
    kjit_dtype dtype;
    int ndim;
    int64_t shape[KJIT_MAX_DIMS];
    int64_t strides[KJIT_MAX_DIMS];
    kjit_memory memory;
} kjit_array;

/* The ndim of an array that kjit_array_make could not describe. */
#define KJIT_NDIM_INVALID (-1)

/* A C-ordered contiguous view of `data` with the given shape.  A shape no
 * array can have (ndim outside 0..KJIT_MAX_DIMS, shape NULL with ndim > 0, a
 * negative extent, an unknown dtype, or extents whose product (zeros counted
 * as 1) times the element size passes 2^63 - 1 bytes) gives a view of ndim
 * KJIT_NDIM_INVALID with no extents, which every call refuses with
 * KJIT_ERROR_INVALID_ARGUMENT: check ndim, or let the call report it. */
kjit_array kjit_array_make(void *data, kjit_dtype dtype, int ndim, const int64_t *shape);
/* The number of elements; -1 for a view that describes no array (as above). */
int64_t kjit_array_size(const kjit_array *array);

/* One argument of a call: a scalar (copied) or an array view (referenced). */
typedef struct kjit_arg {
    enum { KJIT_ARG_SCALAR, KJIT_ARG_ARRAY } kind;
    kjit_dtype dtype; /* SCALAR */
    union {
        int64_t i;  /* bool and signed ints */
        uint64_t u; /* unsigned ints */
        double f;   /* f16, bf16, f32 and f64 (rounded to the type when passed) */
        double c[2];
        kjit_array *array; /* ARRAY */
    } value;
} kjit_arg;

kjit_arg kjit_arg_f64(double v);
kjit_arg kjit_arg_f32(float v);
kjit_arg kjit_arg_i64(int64_t v);
kjit_arg kjit_arg_i32(int32_t v);
kjit_arg kjit_arg_array(kjit_array *array);

/* ---------------------------------------------------------------- contexts */

typedef struct kjit_context kjit_context;
typedef struct kjit_module kjit_module;
typedef struct kjit_function kjit_function;
typedef struct kjit_stream kjit_stream;

/* Called once per diagnostic with the text "file:line:col: error: ...\n<line>\n<caret>\n",
 * and with the runtime's warnings, "kjit: warning: ...\n" (a cache folder or entry
 * refused, docs/security.md), which never make a call fail. */
typedef void (*kjit_diagnostic_fn)(void *user, const char *text);

typedef void (*kjit_print_fn)(void *user, const char *line, size_t len);

/* What checked mode tests (kjit_options.check): bits. */
enum {
    KJIT_CHECK_VALUES = 1, /* indices, division, conversions, shifts, powers */
    KJIT_CHECK_RACE = 2,   /* data races and diverging barriers (cpu, parallel) */
    KJIT_CHECK_ALL = 3,
};

typedef struct kjit_options {
    kjit_target target;
    int num_threads;            /* parallel: 0 means KJIT_NUM_THREADS or one per core */
    int device;                 /* cuda: ordinal; -1 means KJIT_DEVICE or 0 */
    const char *cuda_arch;      /* "sm_90"; NULL: the device's own */
    int opt_level;              /* 0..3; default 3 */
    kjit_diagnostic_fn on_diagnostic;
    void *diagnostic_user;
    /* 1: compiled code carries the .kern source's line tables (DWARF on cpu
     * for gdb and perf, .loc lines in PTX for Nsight Compute and
     * compute-sanitizer); part of the cache key.  Default: KJIT_LINEINFO. */
    int line_info;
    /* Checked mode, KJIT_CHECK_* bits (0: off).  KJIT_CHECK_VALUES: indices,
     * integer division, float-to-int conversions, shifts and integer powers
     * tested at run time.  KJIT_CHECK_RACE (cpu and parallel only; a cuda
     * context refuses it, AUTO picks cpu): data races between threads and
     * barriers that threads reach apart, found by running each launch's
     * threads in one fixed order.  The first failure ends the call with
     * KJIT_ERROR_CHECK.  KJIT_CHECK (1, values, race, all) in the
     * environment adds its bits; part of the cache key. */
    int check;
    /* print(...) on the cpu targets: each line, whole and ending in '\n', goes
     * here (one call at a time, from whichever thread printed it) instead of
     * to stdout.  NULL: stdout.  On cuda the driver's printf buffer goes to
     * stdout at the next synchronisation, as in CUDA C; this is not called. */
    kjit_print_fn on_print;
    void *print_user;
    /* cpu and parallel: 1 runs a kernel's threads (without barriers) and a
     * vectorized function's elements (when it loops) on SIMD lanes, and a
     * kernel whose syncthreads() calls sit outside varying control flow as
     * loops over its threads between the barriers; 0 keeps the scalar code
     * and runs every kernel with barriers on fibers, one per thread (for
     * comparison and debugging); part of the cache key.
     * Default: 1 unless KJIT_CPU_SIMD=0. */
    int cpu_simd;
    /* cpu and parallel, with cpu_simd: 1 runs a kernel that has barriers
     * (and a split form) through code compiled for the launch's block dims,
     * once per shape on its first launch (blockDim a constant, the loops
     * between barriers unrolled where that makes their trip counts
     * constant); 0 uses the code for any block dims.  The results are the
     * same bits.  Default: 1 unless KJIT_CPU_SPECIALISE=0. */
    int cpu_specialise;
    /* 1: compiled code polls for kjit_context_cancel at every loop's back
     * edge (and after calls, and between a kernel's barrier regions), so a
     * kernel that loops without end can be stopped; part of the cache key.
     * Without it a cancel still stops a call between its pieces (chunks of
     * elements, blocks, barriers on fibers), but not inside a loop.  Costs
     * a load and a branch per turn of a loop (a `for` of a constant step:
     * a test and a branch, the load once in 1,024 turns), and keeps LLVM from
     * vectorising loops that the SIMD lowering does not take (docs/
     * embedding.md has the figures).  Default: KJIT_CANCELLABLE (0 unless
     * set).  A time limit turns it on. */
    int cancellable;
    /* > 0: a call (kjit_call, kjit_launch, kjit_reduce ...) that runs longer
     * than this many seconds is stopped and returns KJIT_ERROR_TIMEOUT.
     * 0: no limit.  Default: KJIT_TIME_LIMIT (seconds) or 0. */
    double time_limit_s;
    /* A signal number (SIGINT) or 0: while a call of this context runs, that
     * signal cancels it (kjit_context_cancel, from kjit's handler).  The
     * handler is installed once such calls have run for about 5 ms without a
     * pause (a watcher thread does it, so short calls make no system call;
     * a signal before then goes to the handler in place while the call
     * finishes) and the one it replaced is put back when the last ends; if the signal
     * came and the handler put back is a function (Python's), the signal is
     * raised again for it.  For hosts whose own handler cannot act while a
     * call holds the thread: Python's KeyboardInterrupt, a command line's
     * Ctrl-C (which then sees KJIT_ERROR_CANCELLED).  Default: 0. */
    int cancel_signal;
} kjit_options;

/* Fills the defaults (target AUTO, opt_level 3, device -1, line_info from
 * KJIT_LINEINFO, check from KJIT_CHECK, cpu_simd from KJIT_CPU_SIMD,
 * cpu_specialise from KJIT_CPU_SPECIALISE, cancellable from
 * KJIT_CANCELLABLE, time_limit_s from KJIT_TIME_LIMIT). */
void kjit_options_init(kjit_options *options);

kjit_status kjit_context_create(const kjit_options *options, kjit_context **out);
/* Frees the context and everything made through it that is still alive: its
 * modules (and so their functions), streams, events and device arrays. */
void kjit_context_destroy(kjit_context *context);
kjit_target kjit_context_target(const kjit_context *context); /* AUTO settled */
/*
 * Stops the calls running on the context now (from any thread, or from a
 * signal handler: it only stores to atomic flags).  Each ends as soon as
 * practical with KJIT_ERROR_CANCELLED, its outputs partly written: at its
 * next loop back edge when the context is cancellable (above; within 1,024
 * turns of a `for` of a constant step), else at the
 * next piece the runtime hands out (a chunk of elements, a block, a
 * barrier).  It applies to the calls in flight only: a call that starts
 * afterwards runs normally, and the context stays usable.  On cuda the
 * kernels poll a flag in mapped host memory when cancellable; the call or
 * synchronisation that waits for a cancelled kernel returns
 * KJIT_ERROR_CANCELLED.
 */
void kjit_context_cancel(kjit_context *context);
/* The message of the calling thread's last failed call on this context (""
 * after a call that succeeded); valid until that thread's next call on it.
 * With NULL (or a context that is not live): the thread's last failure that
 * had no live context to keep it: kjit_context_create, or a call refused
 * because a handle it was given was NULL or freed. */
const char *kjit_last_error(const kjit_context *context);

/* ----------------------------------------------------------------- modules */

kjit_status kjit_compile_file(kjit_context *context, const char *path, kjit_module **out);
kjit_status kjit_compile_string(kjit_context *context, const char *name, const char *source,
                                kjit_module **out);
/* A module from a library that `kjit build --emit=lib` made (docs/aot.md):
 * its functions work as compiled ones, on the cpu, parallel and cuda
 * targets, in libkjit and in libkjit-rt (which has no compiler).  Refused,
 * with the reason as the context's error and nothing of the file run: a
 * file or folder another user can write, a file that is not such a library
 * or was truncated or altered (its SHA-256), another library ABI version
 * (both named), code for no x86-64 level this CPU runs
 * (KJIT_CPU_FEATURES=-avx2 and the like take features away), on cuda no
 * cuda code the device runs (both named), or a checked context (KJIT_CHECK)
 * and no checked code of its kinds (kjit build --check; cpu and parallel
 * only).  The best level the CPU runs is used; on cuda the cubin of the
 * device's arch, else the PTX. */
kjit_status kjit_module_load_library(kjit_context *context, const char *path, kjit_module **out);
/* A module from a library linked into the program: `kjit build
 * --emit=staticlib` makes an archive whose NAME_kjit_load(context, &module)
 * (declared in the --emit=header header) calls this with what it holds;
 * not meant to be called by hand.  Refused, with both versions named, when
 * abi is not this runtime's library ABI version; otherwise as
 * kjit_module_load_library (the table, the CPU's levels, the cuda code). */
#define KJIT_LIBRARY_ABI 2 /* the library ABI version of this runtime (docs/aot.md) */
kjit_status kjit_module_load_linked(kjit_context *context, uint32_t abi, const char *name,
                                    const unsigned char *table, size_t table_size,
                                    const char *const *symbols, void *const *addresses,
                                    size_t symbol_count, kjit_module **out);
/* The x86-64 level a library module runs ("sse2", "v3", "v4"); NULL for a
 * module compiled from source. */
const char *kjit_module_library_level(const kjit_module *module);
/* On a cuda context, what the device runs of a library module: "cubin
 * sm_90" (built for its arch), "ptx sm_70" (compiled by the driver, for a
 * device newer than every cubin); NULL on other targets and for compiled
 * modules. */
const char *kjit_module_library_cuda(const kjit_module *module);
void kjit_module_free(kjit_module *module);

/* ---------------------------------------------------------------- functions */

typedef enum kjit_function_kind {
    KJIT_FUNCTION_PLAIN, KJIT_FUNCTION_VECTORIZE, KJIT_FUNCTION_KERNEL, KJIT_FUNCTION_REDUCE,
    KJIT_FUNCTION_GUVECTORIZE
} kjit_function_kind;

kjit_status kjit_module_function(kjit_module *module, const char *name, kjit_function **out);
int kjit_module_function_count(const kjit_module *module);
const char *kjit_module_function_name(const kjit_module *module, int index);

kjit_function_kind kjit_function_kind_of(const kjit_function *function);
const char *kjit_function_name(const kjit_function *function);
int kjit_function_param_count(const kjit_function *function);
int kjit_function_signature_count(const kjit_function *function);
/* "f32(f32, f32)" or, for a kernel, "(f32, f32[], f32[])" (owned by the function). */
const char *kjit_function_signature(const kjit_function *function, int index);
/* Parameter `param` of signature `sig`: element type, rank (0 for a scalar). */
kjit_status kjit_function_param(const kjit_function *function, int sig, int param,
                                kjit_dtype *dtype, int *ndim);
kjit_status kjit_function_result(const kjit_function *function, int sig, kjit_dtype *dtype);
/* A @vectorize function's outputs: 1, or k for one of several (-> (f64, i32));
 * 0 for other functions.  kjit_function_output: the element type of output
 * `output` (from 0; 0 is kjit_function_result's) of signature `sig`. */
int kjit_function_output_count(const kjit_function *function);
kjit_status kjit_function_output(const kjit_function *function, int sig, int output,
                                 kjit_dtype *dtype);
/* 1 when the function (a kernel, a @guvectorize core, a plain function) may
 * store into array parameter `param`, or a function it calls may: through
 * the parameter, an array `let` of it, or an atomic; 0 for a parameter it
 * only reads, a scalar, or no such parameter.  A caller may pass read-only
 * memory for the parameters it gives 0. */
int kjit_function_param_written(const kjit_function *function, int param);

/*
 * Calls a plain function with scalar arguments, or a @vectorize function
 * elementwise with NumPy broadcasting over arrays and scalars.
 * - out given: results are written there (its shape must be the broadcast shape).
 * - out NULL and result non-NULL: a C-ordered host array is allocated
 *   (kjit_array_free releases it); for a plain function, *result is ndim 0 and
 *   holds the scalar.
 * - A @vectorize of k > 1 outputs (kjit_function_output_count) takes out and
 *   result NULL: its outputs are given as k arrays after the inputs in args
 *   (nargs = inputs + k); kjit_call_outputs allocates them.
 * Host arrays on the cuda target are copied in and out; device arrays are not,
 * and then the call does not synchronise.  An input that `out` overlaps
 * (other than as the very same view, which an elementwise call may read and
 * write in place) is read from a copy, as NumPy does.
 */
kjit_status kjit_call(kjit_function *function, const kjit_arg *args, int nargs,
                      kjit_array *out, kjit_array *result);
/* A @vectorize function called on its inputs alone, its outputs allocated:
 * results[0..count) receive new C-ordered host arrays (kjit_array_free
 * releases each), output 0 first; count must be kjit_function_output_count
 * (1 for a function of one output, as kjit_call's result). */
kjit_status kjit_call_outputs(kjit_function *function, const kjit_arg *args, int nargs,
                              kjit_array *results, int count);
/*
 * A @guvectorize function is called with kjit_call too, over its inputs'
 * loop dimensions (the leading ones, before each operand's core dimensions),
 * broadcast with NumPy's rules; each core dimension's size must be the same
 * in every operand that has it.  args are the inputs (a "()" input may be a
 * scalar), then optionally every output as an array of the loop shape
 * followed by its core (a "()" output: the loop shape alone).  With the
 * inputs only, the one output goes to `out` or is allocated into *result
 * (a function of several outputs takes them as arguments).  kjit_call_async
 * takes it too, with its outputs given.
 */
/* A @guvectorize's layout ("(n),(n)->()"), inputs and outputs; NULL and 0
 * for other functions. */
const char *kjit_function_layout(const kjit_function *function);
int kjit_function_layout_inputs(const kjit_function *function);
int kjit_function_layout_outputs(const kjit_function *function);
kjit_status kjit_call_async(kjit_function *function, const kjit_arg *args, int nargs,
                            kjit_array *out, kjit_stream *stream);
void kjit_array_free(kjit_array *array); /* for arrays kjit allocated on the host */

/* Generates the code that kjit_call (or, for a kernel, kjit_launch) would run
 * with these arguments, without running anything: code generation is otherwise
 * done on first use.  `out` may be NULL. */
kjit_status kjit_prepare(kjit_function *function, const kjit_arg *args, int nargs,
                         const kjit_array *out);

/* The signature a kjit_call with these arguments takes (0 for plain functions
 * and kernels, which have one; for a @reduce, the one kjit_reduce takes);
 * KJIT_ERROR_TYPE when none matches. */
kjit_status kjit_function_match(kjit_function *function, const kjit_arg *args, int nargs,
                                int *signature);

/*
 * Reduces with a @reduce function f, over every axis (axes NULL: a 0-d
 * result) or over the `naxes` axes listed (negative ones count from the end).
 * args: the array to reduce; for @reduce(map = g), g's arguments (arrays and
 * scalars, broadcast together), whose results are reduced without a
 * temporary array.  init: NULL, or a scalar combined first, f(init, ...),
 * and the result of an empty reduction (without it, an empty reduction is
 * KJIT_ERROR_SHAPE).  The result has the kept dimensions in order: written to
 * `out` (C-contiguous, of f's type) or to a host array allocated into
 * *result.  Floats are summed as a tree whose order depends only on the
 * number of reduced elements: the same bits on every run and on cpu and
 * parallel.  As for kjit_call, host arrays on the cuda target are copied in
 * and out; with device arrays and `out` the call does not synchronise.
 */
kjit_status kjit_reduce(kjit_function *function, const kjit_arg *args, int nargs,
                        const int *axes, int naxes, const kjit_arg *init, kjit_array *out,
                        kjit_array *result);
/* The same on a stream, into `out`.  A reduction of more than 1024 elements
 * per output needs partial results; on a stream other than the default one
 * they are allocated for the call, and the call waits for its stream. */
kjit_status kjit_reduce_async(kjit_function *function, const kjit_arg *args, int nargs,
                              const int *axes, int naxes, const kjit_arg *init, kjit_array *out,
                              kjit_stream *stream);
/* Generates the code of that reduction without running it (`init` does not
 * change the code, so it is not asked for). */
kjit_status kjit_reduce_prepare(kjit_function *function, const kjit_arg *args, int nargs,
                                const int *axes, int naxes);
/* The arguments kjit_reduce takes: 1, or the map's parameter count (0 for a
 * function that is not a @reduce). */
int kjit_function_reduce_inputs(const kjit_function *function);
/* A @reduce(map = g)'s g (its arguments are the reduction's); else NULL. */
kjit_function *kjit_function_map(const kjit_function *function);

/* The launch shapes every target takes, CUDA's: grid x up to 2^31 - 1 blocks,
 * y and z up to 65535; blocks of at most 1024 threads, 1024 in x and y and
 * 64 in z.  Anything past them is KJIT_ERROR_INVALID_ARGUMENT. */
#define KJIT_MAX_GRID_X 2147483647u
#define KJIT_MAX_GRID_YZ 65535u
#define KJIT_MAX_BLOCK_XY 1024u
#define KJIT_MAX_BLOCK_Z 64u
#define KJIT_MAX_BLOCK_THREADS 1024

/* Launches a @kernel on grid x block threads (CUDA semantics on every target). */
kjit_status kjit_launch(kjit_function *function, const uint32_t grid[3], const uint32_t block[3],
                        const kjit_arg *args, int nargs, kjit_stream *stream);

/* What else a launch may say; kjit_launch_options_init fills the defaults
 * (those of kjit_launch). */
typedef struct kjit_launch_options {
    kjit_stream *stream;         /* NULL: the default stream */
    size_t dynamic_shared_bytes; /* per block, for the kernel's shared(T) arrays (CUDA's
                                    sharedMemBytes; 0: none) */
} kjit_launch_options;
void kjit_launch_options_init(kjit_launch_options *options);
/* kjit_launch with options (NULL: the defaults).  A kernel that calls
 * syncgrid() is launched cooperatively by either call: on cuda, when its
 * blocks cannot all be resident at once, KJIT_ERROR_INVALID_ARGUMENT names the
 * most that can. */
kjit_status kjit_launch_ex(kjit_function *function, const uint32_t grid[3],
                           const uint32_t block[3], const kjit_arg *args, int nargs,
                           const kjit_launch_options *options);

/* ------------------------------------------------- device memory, streams */

kjit_status kjit_device_alloc(kjit_context *context, kjit_dtype dtype, int ndim,
                              const int64_t *shape, kjit_array *out);
/* Frees what kjit_device_alloc gave this context (then sets array->data to
 * NULL); anything else, or memory freed already, is KJIT_ERROR_INVALID_ARGUMENT. */
kjit_status kjit_device_free(kjit_context *context, kjit_array *array);
/* Copies between arrays of equal dtype and shape (both contiguous). */
kjit_status kjit_copy(kjit_context *context, kjit_array *dst, const kjit_array *src,
                      kjit_stream *stream);
kjit_status kjit_stream_create(kjit_context *context, kjit_stream **out);
kjit_status kjit_stream_synchronize(kjit_stream *stream);
void kjit_stream_destroy(kjit_stream *stream);
kjit_status kjit_synchronize(kjit_context *context);

/* Milliseconds between two points recorded on a stream (CUDA events on cuda,
 * the host clock elsewhere). */
typedef struct kjit_event kjit_event;
kjit_status kjit_event_record(kjit_context *context, kjit_stream *stream, kjit_event **out);
kjit_status kjit_event_elapsed(kjit_event *start, kjit_event *end, double *milliseconds);
void kjit_event_destroy(kjit_event *event);

/* ----------------------------------------------------------------- devices */

typedef struct kjit_device_info {
    char name[256];
    int compute_major, compute_minor;
    size_t total_memory;
    int driver_version;
    int multiprocessors;
} kjit_device_info;

/* KJIT_ERROR_NO_DEVICE with a reason when no driver or GPU is usable. */
kjit_status kjit_cuda_available(char *reason, size_t reason_size);
kjit_status kjit_cuda_device_info(int device, kjit_device_info *info);
int kjit_cuda_device_count(void);
/*
 * Several GPUs: one context per device (kjit_options.device), and kjit_copy
 * between device arrays of different devices, given the context of either
 * (its stream, if any, orders the copy).  Unified addressing tells each
 * array's device.  The copy goes straight between the GPUs (NVLink or PCIe;
 * cuCtxEnablePeerAccess, then cuMemcpyPeer) when they have peer access, and
 * is staged through host memory (synchronously) otherwise.  Without a
 * stream the copy comes after the work queued on both devices; on a stream
 * (of the context's device), after that stream's work, and the other
 * device's is the caller's to have finished.  KJIT_CUDA_PEER=0 in the
 * environment forces the staged copy.  1 when a copy from `device`'s memory
 * to `peer`'s (or back) goes straight, else 0 (no such devices, or no driver).
 */
int kjit_cuda_peer_access(int device, int peer);

/* ------------------------------------- sharing a GPU with other libraries */

/*
 * kjit uses each device's primary context, as the CUDA runtime (and so CuPy,
 * PyTorch and Numba) does: their device pointers go straight into a
 * kjit_array with memory DEVICE, and their streams can carry kjit's work.
 *
 * kjit_stream_wrap makes a kjit_stream over a CUstream another library made on
 * the context's device; kjit launches and copies on it and
 * kjit_stream_destroy frees the wrapper, never the stream (which must outlive
 * it).  A NULL handle, or a context of a cpu target, gives a stream that acts
 * as the default one.  kjit_stream_handle returns the CUstream under any
 * kjit_stream (NULL on cpu targets), for handing kjit's streams to them.
 */
kjit_status kjit_stream_wrap(kjit_context *context, void *cu_stream, kjit_stream **out);
void *kjit_stream_handle(const kjit_stream *stream);

#ifdef __cplusplus
}
#endif

#endif
