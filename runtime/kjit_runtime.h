/*
 * kjit_runtime.h: the one internal header of the runtime (libkjit).
 *
 * Sections follow their files: file.c, ptxas.c, print.c, pool.c (the thread pool),
 * cpu.c (how host code walks its index space), array.c, npy.c, cuda.c (the
 * driver, one device), cuda_driver.c (the driver API opened with dlopen),
 * sha256.c (the cache's MAC), cache.c, the objects that the api*.c files share behind kjit.h, and the
 * runtime targets (runtime_cpu.c, runtime_cuda.c) they call through.  The runtime sits on the back
 * end (compiler/backend/kjit_backend.h, for the ABI of compiled code and the
 * code generators) and the front end below it; the command line sits on top
 * and sees only kjit.h and kjit_tools.h.
 */
#ifndef KJIT_RUNTIME_H
#define KJIT_RUNTIME_H

#include <sys/stat.h>

#include "../compiler/backend/kjit_backend.h"
#include "kjit.h"
#include "kjit_tools.h"

/* ================================================================= file.c */

/* read(2) and write(2) of exactly `size` bytes, through EINTR and short
 * transfers; false on an error or an early end of file. */
bool kj_fd_read_all(int fd, void *data, size_t size);
bool kj_fd_write_all(int fd, const void *data, size_t size);
/* A whole file (heap, NUL-terminated past *size), or NULL. */
char *kj_file_read(const char *path, size_t *size);
/* Creates or truncates path and writes `size` bytes; false on any failure. */
bool kj_file_write(const char *path, const void *data, size_t size);

/* A user's output file (kjit_output_open in kjit_tools.h), written whole or
 * not at all: `file` is a new file beside `path` that kj_output_close(keep)
 * flushes to disk and renames over it; kj_output_close(!keep), or a failed
 * write, removes it and leaves `path` as it was.  A path that exists and is
 * not a regular file (/dev/stdout, a FIFO) is written in place. */
typedef struct kjit_output_file KjOutputFile;
kjit_status kj_output_open(const char *path, KjOutputFile *out, char **error);
kjit_status kj_output_close(KjOutputFile *out, bool keep, char **error);

/* ==================================================== jit.c, jit_none.c */

/*
 * The compiler, as the runtime sees it: every call from the runtime into the
 * front end, the pass list and the back end goes through this table, so that
 * the line between compiler and runtime is a link-time fact.  libkjit links
 * jit.c, whose kj_jit points at the compiler's functions; libkjit-rt links
 * jit_none.c, whose kj_jit is NULL, and runs only code loaded from libraries
 * that `kjit build --emit=lib` made (aot.c, docs/aot.md).  Each caller asks
 * kj_jit first and says what it cannot do without it.
 */
typedef struct KjJit {
    KjSource *(*source_read)(KjArena *arena, const char *path, KjDiag *diag);
    KjSource *(*source_from_string)(KjArena *arena, const char *name, const char *text);
    KjIrModule *(*compile_source)(KjArena *arena, const KjSource *src, const char **stdlib_dirs,
                                  KjDiag *diag);
    const char *(*default_stdlib_dir)(void);
    bool (*pipeline_run)(KjPipeline *p);
    bool (*pipeline_verify_default)(void);
    uint32_t (*ir_params_written)(const KjIrFunction *fn);
    bool (*split_writes_shared)(const KjIrFunction *root, const uint32_t block[3]);
    bool (*codegen_splits_barriers)(const KjCodegenOptions *options);
    bool (*codegen_cpu_simd_default)(void);
    bool (*codegen_line_info_default)(void);
    char *(*cpu_compile_object)(KjIrModule *module, KjIrFunction **roots, int root_count,
                                const KjCodegenOptions *options, size_t *size, char **error);
    KjCpuCode *(*cpu_load_object)(const void *object, size_t size, char **error);
    void *(*cpu_lookup)(KjCpuCode *code, const char *symbol);
    void (*cpu_code_free)(KjCpuCode *code);
    const char *(*host_cpu_description)(void);
    const char *(*llvm_version)(void);
    char *(*ptx_generate)(KjIrModule *module, KjIrFunction **roots, int root_count,
                          const KjCodegenOptions *options, char **error);
    const char *(*find_libdevice)(char **error);
} KjJit;
/* The compiler linked into this library, or NULL (libkjit-rt). */
extern const KjJit *const kj_jit;
/* The message of an API that needs the compiler, in libkjit-rt. */
#define KJ_NO_JIT_MESSAGE                                                                      \
    "this is libkjit-rt, which has no compiler: load a library made by "                      \
    "`kjit build --emit=lib` (kjit_module_load_library), or link libkjit"

/* A symbol of loaded code (the JIT's KjCpuCode, or a library's dlopen
 * handle): print.c and cancel.c bind their hooks through it. */
typedef void *KjSymbolLookup(void *code, const char *symbol);

/* ================================================================ ptxas.c */

/* The toolkit's ptxas (KJIT_PTXAS, beside libdevice, CUDA_HOME, PATH ...), or
 * NULL; looked for once per process.  The identity ("path size mtime", or
 * "none") goes into cache keys. */
const char *kj_ptxas_path(void);
const char *kj_ptxas_identity(void);
/* PTX -> cubin (heap) for `arch`, assembled whole-program by ptxas, as nvcc
 * does; ptxas's messages in *error when it fails. */
kjit_status kj_ptxas_compile(const char *ptx, const char *arch, void **cubin, size_t *size,
                             char **error);

/* ================================================================= print.c */

/* The context whose call or launch this thread is running, so that a cpu
 * print(...) reaches its on_print (the pool's workers take the caller's). */
extern _Thread_local kjit_context *kj_print_context;
/* What compiled cpu code calls through its KJ_PRINT_HOOK_SYMBOL (KjPrintFn). */
void kj_print_line(const char *line, int64_t len);
/* After loading cpu code: points its print hook, if it has one, at kj_print_line. */
void kj_print_bind(KjSymbolLookup *lookup, void *code);

/* ================================================================ cancel.c */

typedef struct KjCancel KjCancel;         /* a context's cancellation state */
typedef struct KjCancelSlot KjCancelSlot; /* one running call's flag */
/* The slot of the call this thread runs (NULL outside calls); the pool's
 * workers take the caller's. */
extern _Thread_local KjCancelSlot *kj_cancel_slot;
/* Whether the call this thread runs is cancelled: the runtime's loops ask
 * between chunks, blocks and barriers. */
bool kj_cancel_requested(void);
/* After loading cpu code: points its cancellation globals, if it has them,
 * at the runtime's (kjit_backend.h, "Cancellation"). */
void kj_cancel_bind(KjSymbolLookup *lookup, void *code);
KjCancel *kj_cancel_create(const kjit_options *options);
void kj_cancel_destroy(KjCancel *cancel);
/* cuda: the context's flag in mapped host memory (NULL: none), which
 * kjit_context_cancel and the watchdog set; take returns and clears it. */
void kj_cancel_set_device_flag(KjCancel *cancel, void *host_flag);
/* A zeroed page of the context's (made on first use) whose first word is its
 * device flag (set as kj_cancel_set_device_flag does); its size in *bytes. */
void *kj_cancel_device_page(KjCancel *cancel, size_t *bytes);
bool kj_cancel_take_device_flag(KjCancel *cancel);
/* One call of the API that runs code: a slot taken for it, and at its end
 * the status: KJIT_ERROR_CANCELLED or KJIT_ERROR_TIMEOUT (with the
 * message, naming `name`) when it was stopped, else `status`. */
typedef struct KjCancelCall {
    KjCancelSlot *slot;
    KjCancelSlot *previous;
    int signal_slot; /* kjit_options.cancel_signal's table entry, or -1 */
} KjCancelCall;
void kj_cancel_begin(kjit_context *context, KjCancelCall *call);
kjit_status kj_cancel_end(kjit_context *context, KjCancelCall *call, const char *name,
                          kjit_status status);
/* kj_cancel_end for a call that may have allocated *result: a stopped call
 * hands back none (it is freed and zeroed). */
kjit_status kj_cancel_end_result(kjit_context *context, KjCancelCall *call, const char *name,
                                 kjit_status ran, kjit_array *result);
/* cuda, after waiting for the context's kernels: KJIT_ERROR_CANCELLED (and
 * the flag cleared) when a cancel reached them. */
kjit_status kj_cancel_device_status(kjit_context *context, const char *name);

/* ============================================================ thread pool */

typedef struct KjPool KjPool;
/* Calls fn(user, begin, end) over [0, count) split into chunks across the pool
 * and the calling thread; returns when every chunk is done. */
typedef void (*KjPoolFn)(void *user, int64_t begin, int64_t end);
KjPool *kj_pool_create(int threads);
void kj_pool_run(KjPool *pool, int64_t count, int64_t min_chunk, KjPoolFn fn, void *user);
int kj_pool_threads(const KjPool *pool);
void kj_pool_destroy(KjPool *pool);

/* The stack of each pool worker: a kernel's threads run on it with their
 * local() arrays (up to KJ_MAX_LOCAL_BYTES), whatever the process's default. */
#define KJ_POOL_STACK_BYTES (8 * 1024 * 1024)
/* How long an idle pool worker spins before it sleeps (pool.c), at least,
 * and at most when runs come often (the window is twice the time between
 * runs, up to this).  4 ms, not 1: bench_simd's block sum calls came 1.03 ms
 * apart on the 16-core host (its scalar C reference 0.87 ms between them),
 * just past a 1 ms cap, and every call woke fifteen sleepers again; OpenMP's
 * workers (Numba's omp layer) spin GOMP_SPINCOUNT's 300000 pauses, longer. */
#define KJ_POOL_SPIN_NS 100000
#define KJ_POOL_SPIN_MAX_NS 4000000
/* How many sleeping workers each thread woken for a run wakes in turn
 * (pool.c: a tree), or 0: the caller wakes them all in one FUTEX_WAKE (on
 * the 16-core host the tree took longer: each level pays a wake-up's
 * latency, docs/performance.md). */
#define KJ_POOL_WAKE_FAN 0
/* How long a run goes on its grain's threads before it takes every thread
 * its pieces can feed (pool.c). */
#define KJ_POOL_GROW_NS 50000

/* ================================================================ cpu.c */

/* Elements below which a vectorized call stays on the calling thread (a chunk
 * of the parallel target is at least this long). */
#define KJ_CPU_MIN_CHUNK 16384
/* A kernel launch's grain on the parallel target: a pool thread takes part
 * for each this many of its threads (cpu.c), so a launch of fewer than twice
 * as many runs on the calling thread. */
#define KJ_CPU_GRAIN_THREADS 2048

/* The barrier compiled kernels call through KjThreadCtx.syncthreads: switches
 * to the next fiber of the block (a no-op when the block runs without fibers). */
void kj_cpu_syncthreads(KjThreadCtx *ctx);

/* Runs a VEC_KERNEL's __range over [0, count): across the pool in chunks of at
 * least KJ_CPU_MIN_CHUNK, or on the calling thread when pool is NULL.  With
 * line > 1 (elements a cache line holds, a power of two dividing
 * KJ_CPU_CANCEL_CHUNK), each run's first piece ends at an index i with
 * i % line == lead % line, the output's first element on a line, so that the
 * pieces after it start on a line (0, 0: anywhere). */
void kj_cpu_run_range(KjPool *pool, KjRangeFn range, void **args, int64_t count, int64_t lead,
                      int64_t line);
/* Elements a run on the calling thread hands __range at a time, asking
 * between pieces whether the call is cancelled. */
#define KJ_CPU_CANCEL_CHUNK 65536
/* range over [begin, end) on this thread in pieces of `chunk`, stopping
 * between pieces when the call is cancelled. */
void kj_cpu_run_range_here(KjRangeFn range, void **args, int64_t begin, int64_t end, int64_t chunk);

/*
 * Runs a kernel over grid x block with CUDA semantics: blocks in order (or
 * across the pool), each with its own zeroed shared memory of
 * kernel->shared_bytes, and dynamic_shared_bytes more for shared(T).  Kernels
 * that use syncthreads() or another barrier run each thread of a block as a
 * fiber through thread_fn (those with syncgrid(): every thread of the grid, on
 * the calling thread); the others run block_fn (or, when that is NULL,
 * thread_fn once per thread).  A fiber's stack is sized from
 * kernel->local_bytes (and launch_local_bytes, for local() sized at launch,
 * in the _blocks and _race forms) and has a guard page below it.  KJIT_ERROR_OUT_OF_MEMORY
 * with *error set when the fiber stacks cannot be had; KJIT_ERROR_INVALID_ARGUMENT
 * before anything runs when a kernel without barriers has local() arrays that
 * do not fit the calling thread's stack, and for a grid too large for
 * syncgrid() or threads stuck at different barriers.
 */
kjit_status kj_cpu_run_kernel(KjPool *pool, const KjIrFunction *kernel, KjThreadFn thread_fn,
                              KjThreadFn block_fn, void **args, const uint32_t grid[3],
                              const uint32_t block[3], size_t dynamic_shared_bytes, char **error);
/* The same, where shared_written says that block_fn writes the block's
 * static shared memory before it reads it (kj_split_writes_shared: when
 * block_fn runs the blocks, that memory is not zeroed first), and blocks_fn
 * (may be NULL), the __blocks of block_fn's code, runs each chunk of blocks
 * in one call. */
kjit_status kj_cpu_run_kernel_blocks(KjPool *pool, const KjIrFunction *kernel, KjThreadFn thread_fn,
                                     KjThreadFn block_fn, KjBlocksFn blocks_fn, bool shared_written,
                                     void **args, const uint32_t grid[3], const uint32_t block[3],
                                     size_t dynamic_shared_bytes, size_t launch_local_bytes,
                                     char **error);
/* Where a row of a kernel that runs as rows of its grid starts a cache line
 * of its output: out (NULL: nowhere known) the output's descriptor, its
 * axis k indexed by grid axis axis[k] (0 x, 1 y, 2 z), ndim axes, size bytes
 * an element. */
typedef struct KjRowLines {
    const KjArrayDesc *out;
    int ndim;
    const int8_t *axis;
    int size;
} KjRowLines;
/*
 * Runs a kernel of the grid_rows form (kj_grid_rows) over grid x block as
 * rows of the grid: for each y and z of the grid (every thread of it, not
 * each block) below limit[1] and limit[2], the threads of every x below
 * limit[0] through row_fn (its __xrange), in pieces whose first ends where
 * the row's output element starts a 64-byte line, as kj_cpu_run_range's;
 * across the pool by threads, as kj_cpu_run_kernel does by blocks.  The
 * threads at or past a limit are not run (the kernel's guard: they would
 * do nothing).  The pool takes the threads as `cut` says.  False, with
 * nothing run, when the grid is too wide for row_fn's 32-bit x (the caller
 * runs it by blocks).
 */
/* How kj_cpu_run_rows hands a run of rows to the pool:
 * - KJ_ROWS_CUT_THREADS: as a kernel's blocks, chunks of at least
 *   KJ_CPU_GRAIN_THREADS threads (the default);
 * - KJ_ROWS_CUT_ELEMENTS: as a vectorized call's elements, at least
 *   KJ_CPU_MIN_CHUNK;
 * - KJ_ROWS_CUT_WHOLE: that grain in whole rows (a grid of more than one).
 * On the 16-core host the three ran within noise of each other and of the
 * @vectorize (docs/performance.md, branch par2d): at 1.6e6 threads the
 * pool's chunk is count / (4 x threads) whatever the grain. */
typedef enum { KJ_ROWS_CUT_THREADS, KJ_ROWS_CUT_ELEMENTS, KJ_ROWS_CUT_WHOLE } KjRowsCut;
/* $KJIT_CPU_ROWS_CUT (0, 1, 2), else KJ_ROWS_CUT_THREADS: read when a
 * kernel's code is loaded (runtime_cpu.c), so that one process can time
 * the cuts in turn on copies of a kernel (tests/bench/cpu_diag.c). */
KjRowsCut kj_cpu_rows_cut_setting(void);
bool kj_cpu_run_rows(KjPool *pool, KjRowFn row_fn, void **args, const uint32_t grid[3],
                     const uint32_t block[3], const int64_t limit[3], const KjRowLines *lines,
                     KjRowsCut cut);
/* kj_cpu_run_rows's limits for a launch of form with args: on each grid axis
 * the least of its guard's bounds (an array's extent or an integer
 * parameter, plus the bound's add; a constant), INT64_MAX where none bounds
 * it or a bound passes INT64_MAX (every thread passes it). */
void kj_grid_rows_limits(const KjGridRows *form, void **args, int64_t limit[3]);
typedef struct KjRaceState KjRaceState;
/* A launch under the race checker (check_race.c): every block's threads as
 * fibers through thread_fn, the blocks one after another on the calling
 * thread, so that the order of every access is the same on every run. */
kjit_status kj_cpu_run_kernel_race(KjRaceState *race, const KjIrFunction *kernel,
                                   KjThreadFn thread_fn, void **args, const uint32_t grid[3],
                                   const uint32_t block[3], size_t dynamic_shared_bytes,
                                   size_t launch_local_bytes, char **error);

/* The most threads a launch of a kernel with syncgrid() may have on the cpu
 * targets: they are all fibers at once (a stack each) on the calling thread. */
#define KJ_CPU_MAX_COOPERATIVE_THREADS 16384

/* ============================================================== array.c */

/* Inputs a vectorized call can take: scalar_mask is 32 bits wide. */
#define KJ_MAX_VEC_INPUTS 31

/* kjit_dtype_size without a call (the hot paths' checks); 0 for no dtype. */
static inline int64_t kj_dtype_bytes(kjit_dtype dtype)
{
    switch (dtype) {
    case KJIT_BOOL: case KJIT_I8: case KJIT_U8: return 1;
    case KJIT_I16: case KJIT_U16: case KJIT_F16: case KJIT_BF16: return 2;
    case KJIT_I32: case KJIT_U32: case KJIT_F32: return 4;
    case KJIT_I64: case KJIT_U64: case KJIT_F64: case KJIT_C64: return 8;
    case KJIT_C128: return 16;
    case KJIT_DTYPE_COUNT: break;
    }
    return 0;
}

/* kjit_dtype <-> the language's scalar types (same order from KJ_TYPE_BOOL). */
const KjType *kj_dtype_type(kjit_dtype dtype);
bool kj_type_dtype(const KjType *type, kjit_dtype *dtype); /* false: not a scalar */

/* NumPy's spelling of a shape, "(3,4)", "(5,)" or "()"; returns buf.  A
 * buffer of KJ_SHAPE_TEXT_SIZE holds any shape of KJIT_MAX_DIMS extents. */
char *kj_shape_string(char *buf, size_t size, int ndim, const int64_t *shape);
#define KJ_SHAPE_TEXT_SIZE 192

/* The one place element counts and byte sizes are computed, with overflow
 * checks: *count elements and *bytes bytes (either may be NULL) of a `dtype`
 * array of that shape.  KJIT_ERROR_INVALID_ARGUMENT for an unknown dtype, a
 * rank outside 0..KJIT_MAX_DIMS or a shape whose extents (zeros counted as 1)
 * times the element size pass 2^63 - 1 bytes; KJIT_ERROR_SHAPE for a negative
 * extent; the message in *error (heap; error may be NULL). */
kjit_status kj_shape_size(kjit_dtype dtype, int ndim, const int64_t *shape, int64_t *count,
                          int64_t *bytes, char **error);
/* A view the host passed: kj_shape_size's checks, and the bytes its strides
 * reach from data (before and after) fit in 64 bits.  Every array that
 * enters through the API passes here (kj_api_check_call). */
kjit_status kj_array_check(const kjit_array *array, char **error);

/* The view as compiled code sees it: byte strides -> element strides.
 * KJIT_ERROR_INVALID_ARGUMENT when a stride is not a multiple of the element size. */
kjit_status kj_array_desc(const kjit_array *array, KjArrayDesc *desc, char **error);
bool kj_array_is_contiguous(const kjit_array *array); /* C order, no gaps */
bool kj_array_has_elements(const kjit_array *array);  /* no extent is 0 */
/* The bytes a view touches: [*low, *high) relative to array->data. */
void kj_array_extent(const kjit_array *array, int64_t *low, int64_t *high);

/*
 * How a vectorized call runs: the broadcast shape (the output's) and, after
 * dropping size-1 dimensions and merging dimensions that every operand walks
 * contiguously, the variant to compile and each operand's descriptor in it.
 * An input given as NULL is a host scalar; a host array of one element is
 * passed as a scalar too (its value read through scalar_data).
 */
typedef struct KjBroadcastPlan {
    int ndim;
    int64_t shape[KJ_MAX_DIMS];
    int64_t size;
    KjVecVariant variant;
    KjArrayDesc inputs[KJ_MAX_VEC_INPUTS]; /* for inputs passed as arrays */
    const void *scalar_data[KJ_MAX_VEC_INPUTS]; /* for arrays passed as scalars */
    KjArrayDesc output;
} KjBroadcastPlan;

/* The broadcast shape of the inputs (NULL ones are scalars); KJIT_ERROR_SHAPE
 * naming both shapes when two do not broadcast. */
kjit_status kj_broadcast_shape(const kjit_array *const *inputs, int count, int *ndim,
                               int64_t *shape, char **error);
/* Fills the plan for inputs and an output of the broadcast shape. */
kjit_status kj_broadcast_plan(const kjit_array *const *inputs, int count, const kjit_array *out,
                              KjBroadcastPlan *plan, char **error);
/* The same where the inputs of bit i in `outputs` are outputs too (of a
 * @vectorize of several, api_call.c): of the broadcast shape, written, so
 * never taken for scalars however small. */
kjit_status kj_broadcast_plan_outputs(const kjit_array *const *inputs, int count, uint32_t outputs,
                                      const kjit_array *out, KjBroadcastPlan *plan, char **error);

/* =============================================================== npy.c */

/* Reads a .npy file (format 1.0-3.0, little-endian; Fortran order through
 * strides) into a new host array (kjit_array_free releases it). */
kjit_status kj_npy_read(const char *path, kjit_array *out, char **error);
/* Writes any host view as a C-ordered .npy file (format 1.0). */
kjit_status kj_npy_write(const char *path, const kjit_array *array, char **error);
/* Copies a host view into C order at dst (kjit_array_size * dtype size bytes). */
void kj_array_gather(const kjit_array *array, void *dst);

/* ============================================================ cuda.c */

/*
 * One GPU, for runtime_cuda.c.  The driver (libcuda.so.1) is opened with
 * dlopen on first use; nothing links against it.  Every failure returns a
 * status and a heap message in *error naming the call, the driver's error
 * name and its text (and the kernel, for launches).  After a sticky fault (illegal address ...) the
 * next call re-creates the context, so the host program can go on.
 */
typedef struct KjCuda KjCuda;             /* one device, its primary context */
typedef struct KjCudaModule KjCudaModule; /* a loaded cubin */
typedef struct KjCudaStream KjCudaStream;
typedef struct KjCudaEvent KjCudaEvent;

/* NO_DEVICE with a reason when the driver or a GPU is missing. */
kjit_status kj_cuda_probe(char **error);
kjit_status kj_cuda_open(int device, KjCuda **out, char **error);
void kj_cuda_close(KjCuda *cuda);
kjit_status kj_cuda_info(KjCuda *cuda, kjit_device_info *info);
const char *kj_cuda_arch(KjCuda *cuda); /* "sm_90" */

/* PTX -> cubin through cuLinkCreate/cuLinkAddData/cuLinkComplete, with the
 * linker's error and info logs in *error on failure.  The cubin is returned
 * (heap, *cubin_size) when cubin_out is not NULL, for the cache. */
kjit_status kj_cuda_load_ptx(KjCuda *cuda, const char *ptx, KjCudaModule **out,
                             void **cubin_out, size_t *cubin_size, char **error);
kjit_status kj_cuda_load_cubin(KjCuda *cuda, const void *cubin, size_t size,
                               KjCudaModule **out, char **error);
void kj_cuda_module_free(KjCudaModule *module);
/* A kernel by symbol: an opaque CUfunction. */
kjit_status kj_cuda_function(KjCudaModule *module, const char *symbol, void **function,
                             char **error);

/* A kernel launch, params as cuLaunchKernel takes them: params[i] points to
 * parameter i's value (an array parameter points to a KjArrayDesc holding the
 * device pointer).  With the launch's dynamic shared memory (above 48 KiB the
 * kernel is first allowed it, up to the device's opt-in limit) and, when
 * `cooperative`, through cuLaunchCooperativeKernel (a kernel with
 * syncgrid()), after checking with the occupancy calculator that the grid's
 * blocks can all be resident at once: KJIT_ERROR_INVALID_ARGUMENT naming the
 * most blocks when they cannot. */
kjit_status kj_cuda_launch_ex(KjCuda *cuda, void *function, const char *kernel_name,
                              const uint32_t grid[3], const uint32_t block[3],
                              size_t dynamic_shared_bytes, bool cooperative, void **params,
                              KjCudaStream *stream, char **error);
/* A vectorized kernel over n elements: the launch shape is chosen here
 * (occupancy-aware, cached per function).  Its parameters as `params` (a
 * pointer each) or, when packed is not NULL, as the packed_bytes at packed,
 * laid out as the kernel's .entry takes them (cuLaunchKernel's `extra`). */
kjit_status kj_cuda_launch_elementwise(KjCuda *cuda, void *function, const char *kernel_name,
                                       int64_t n, void **params, const void *packed,
                                       size_t packed_bytes, KjCudaStream *stream, char **error);
/* Whether vectorized calls pass their parameters packed (KJIT_CUDA_PARAMS). */
bool kj_cuda_packs_params(const KjCuda *cuda);

kjit_status kj_cuda_alloc(KjCuda *cuda, size_t bytes, void **device_ptr, char **error);
/* Host memory of ours (page-aligned, `bytes`) mapped into the device's
 * address space (cuMemHostRegister with DEVICEMAP, cuMemHostGetDevicePointer):
 * its device address in *device.  One mapping per KjCuda, made again after a
 * fault reset the context; kj_cuda_close undoes it.  The memory stays the
 * caller's: a host store to it is always safe. */
kjit_status kj_cuda_map_host(KjCuda *cuda, void *host, size_t bytes, uint64_t *device,
                             char **error);
/* Writes `bytes` at the module's global `name`: KJIT_ERROR_NOT_FOUND (no
 * message) when it has none. */
kjit_status kj_cuda_module_set_global(KjCudaModule *module, const char *name, const void *value,
                                      size_t bytes, char **error);
kjit_status kj_cuda_free(KjCuda *cuda, void *device_ptr, char **error);
kjit_status kj_cuda_copy_to_device(KjCuda *cuda, void *dst, const void *src, size_t bytes,
                                   KjCudaStream *stream, char **error);
kjit_status kj_cuda_copy_to_host(KjCuda *cuda, void *dst, const void *src, size_t bytes,
                                 KjCudaStream *stream, char **error);
kjit_status kj_cuda_copy_on_device(KjCuda *cuda, void *dst, const void *src, size_t bytes,
                                   KjCudaStream *stream, char **error);
kjit_status kj_cuda_stream_create(KjCuda *cuda, KjCudaStream **out, char **error);
kjit_status kj_cuda_stream_sync(KjCuda *cuda, KjCudaStream *stream, char **error); /* NULL: ctx */
void kj_cuda_stream_destroy(KjCuda *cuda, KjCudaStream *stream);
/* A stream over a CUstream another library made in the same primary context
 * (CuPy, PyTorch): launches go on it, kj_cuda_stream_destroy leaves it alone. */
kjit_status kj_cuda_stream_wrap(KjCuda *cuda, void *handle, KjCudaStream **out, char **error);
void *kj_cuda_stream_handle(const KjCudaStream *stream); /* the CUstream */
kjit_status kj_cuda_event_record(KjCuda *cuda, KjCudaStream *stream, KjCudaEvent **out,
                                 char **error);
kjit_status kj_cuda_event_elapsed(KjCuda *cuda, KjCudaEvent *start, KjCudaEvent *end,
                                  double *ms, char **error);
void kj_cuda_event_destroy(KjCuda *cuda, KjCudaEvent *event);

/* ====================================================== cuda_driver.c */

/*
 * The slice of the CUDA Driver API that cuda.c uses, resolved with dlsym from
 * libcuda.so.1.  Handles are opaque pointers and device pointers are 64-bit
 * integers, as in cuda.h; the toolkit's headers are not needed to build.
 */
typedef int KjCuResult; /* CUresult: 0 is CUDA_SUCCESS */
typedef uint64_t KjCuDevicePtr;

typedef struct KjCuDriver {
    KjCuResult (*Init)(unsigned flags);
    KjCuResult (*DriverGetVersion)(int *version);
    KjCuResult (*GetErrorName)(KjCuResult error, const char **name);
    KjCuResult (*GetErrorString)(KjCuResult error, const char **text);
    KjCuResult (*DeviceGetCount)(int *count);
    KjCuResult (*DeviceGet)(int *device, int ordinal);
    KjCuResult (*DeviceGetName)(char *name, int length, int device);
    KjCuResult (*DeviceGetAttribute)(int *value, int attribute, int device);
    KjCuResult (*DeviceTotalMem)(size_t *bytes, int device);
    KjCuResult (*DevicePrimaryCtxRetain)(void **context, int device);
    KjCuResult (*DevicePrimaryCtxRelease)(int device);
    KjCuResult (*DevicePrimaryCtxReset)(int device);
    KjCuResult (*CtxSetCurrent)(void *context);
    KjCuResult (*CtxGetCurrent)(void **context);
    KjCuResult (*CtxSynchronize)(void);
    KjCuResult (*LinkCreate)(unsigned count, int *options, void **values, void **state);
    KjCuResult (*LinkAddData)(void *state, int type, void *data, size_t size, const char *name,
                              unsigned count, int *options, void **values);
    KjCuResult (*LinkComplete)(void *state, void **cubin, size_t *size);
    KjCuResult (*LinkDestroy)(void *state);
    KjCuResult (*ModuleLoadDataEx)(void **module, const void *image, unsigned count,
                                   int *options, void **values);
    KjCuResult (*ModuleUnload)(void *module);
    KjCuResult (*ModuleGetFunction)(void **function, void *module, const char *name);
    KjCuResult (*LaunchKernel)(void *function, unsigned grid_x, unsigned grid_y,
                               unsigned grid_z, unsigned block_x, unsigned block_y,
                               unsigned block_z, unsigned shared_bytes, void *stream,
                               void **params, void **extra);
    KjCuResult (*LaunchCooperativeKernel)(void *function, unsigned grid_x, unsigned grid_y,
                                          unsigned grid_z, unsigned block_x, unsigned block_y,
                                          unsigned block_z, unsigned shared_bytes, void *stream,
                                          void **params);
    KjCuResult (*FuncGetAttribute)(int *value, int attribute, void *function);
    KjCuResult (*FuncSetAttribute)(void *function, int attribute, int value);
    KjCuResult (*OccupancyMaxPotentialBlockSize)(int *min_grid, int *block, void *function,
                                                 size_t (*dynamic_shared)(int),
                                                 size_t shared_bytes, int block_limit);
    KjCuResult (*OccupancyMaxActiveBlocksPerMultiprocessor)(int *blocks, void *function,
                                                            int block, size_t shared_bytes);
    KjCuResult (*MemAlloc)(KjCuDevicePtr *ptr, size_t bytes);
    KjCuResult (*MemFree)(KjCuDevicePtr ptr);
    KjCuResult (*MemcpyHtoD)(KjCuDevicePtr dst, const void *src, size_t bytes);
    KjCuResult (*MemcpyDtoH)(void *dst, KjCuDevicePtr src, size_t bytes);
    KjCuResult (*MemcpyHtoDAsync)(KjCuDevicePtr dst, const void *src, size_t bytes,
                                  void *stream);
    KjCuResult (*MemcpyDtoHAsync)(void *dst, KjCuDevicePtr src, size_t bytes, void *stream);
    KjCuResult (*MemcpyDtoD)(KjCuDevicePtr dst, KjCuDevicePtr src, size_t bytes);
    KjCuResult (*MemcpyDtoDAsync)(KjCuDevicePtr dst, KjCuDevicePtr src, size_t bytes,
                                  void *stream);
    KjCuResult (*StreamCreate)(void **stream, unsigned flags);
    KjCuResult (*StreamSynchronize)(void *stream);
    KjCuResult (*StreamDestroy)(void *stream);
    KjCuResult (*EventCreate)(void **event, unsigned flags);
    KjCuResult (*EventRecord)(void *event, void *stream);
    KjCuResult (*EventSynchronize)(void *event);
    KjCuResult (*EventElapsedTime)(float *ms, void *start, void *end);
    KjCuResult (*EventDestroy)(void *event);
    KjCuResult (*StreamWaitEvent)(void *stream, void *event, unsigned flags);
    /* cancellation (cancel.c): host memory the kernels read, and a module's global */
    KjCuResult (*MemHostRegister)(void *host, size_t bytes, unsigned flags);
    KjCuResult (*MemHostUnregister)(void *host);
    KjCuResult (*MemHostGetDevicePointer)(KjCuDevicePtr *device, void *host, unsigned flags);
    KjCuResult (*ModuleGetGlobal)(KjCuDevicePtr *device, size_t *bytes, void *module,
                                  const char *name);
    KjCuResult (*PointerGetAttribute)(void *value, int attribute, KjCuDevicePtr ptr);
    KjCuResult (*DeviceCanAccessPeer)(int *can, int device, int peer);
    KjCuResult (*CtxEnablePeerAccess)(void *peer_context, unsigned flags);
    KjCuResult (*MemcpyPeer)(KjCuDevicePtr dst, void *dst_context, KjCuDevicePtr src,
                             void *src_context, size_t bytes);
    KjCuResult (*MemcpyPeerAsync)(KjCuDevicePtr dst, void *dst_context, KjCuDevicePtr src,
                                  void *src_context, size_t bytes, void *stream);
} KjCuDriver;

/* The driver, opened and cuInit'ed once per process; NULL and a reason in
 * *error (heap) when libcuda.so.1 or a GPU is missing. */
const KjCuDriver *kj_cuda_driver(char **error);
/* "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)". */
const char *kj_cuda_result_text(KjCuResult result, char *buf, size_t size);

/* For cuda_peer.c: the driver table and device ordinal of a handle; the
 * handle's primary context made current (retained again after a fault
 * reset); a driver failure as a status and message (resetting the context
 * after a sticky fault, as every call of cuda.c does); whether a stream
 * was made before the last reset. */
const KjCuDriver *kj_cuda_table(const KjCuda *cuda);
int kj_cuda_ordinal(const KjCuda *cuda);
kjit_status kj_cuda_make_current(KjCuda *cuda, char **error);
kjit_status kj_cuda_fail(KjCuda *cuda, KjCuResult result, const char *call, char **error);
bool kj_cuda_stream_stale(KjCuda *cuda, const KjCudaStream *stream);

/* ========================================================== cuda_peer.c */

/* The device that holds `ptr` (CUDA's unified addressing names it), or -1
 * when the driver knows no device memory there. */
int kj_cuda_pointer_device(KjCuda *cuda, const void *ptr);
/* Copies between the memory of two devices: through peer access (enabled
 * once both ways, cuMemcpyPeer) when the devices have it, else staged
 * through host memory.  Ordered after the work of both devices' contexts
 * (and `stream`'s, a stream of cuda's device); the staged copy returns
 * when done, the peer copy on a stream may not have. */
kjit_status kj_cuda_copy_peer(KjCuda *cuda, int dst_device, void *dst, int src_device,
                              const void *src, size_t bytes, KjCudaStream *stream, char **error);

/* ================================================================ sha256.c */

/* SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104): the disk cache's MAC. */
#define KJ_SHA256_BYTES 32

typedef struct KjSha256 {
    uint32_t state[8];
    uint64_t length; /* bytes so far */
    uint8_t block[64];
    size_t used;     /* bytes of block filled */
} KjSha256;

void kj_sha256_init(KjSha256 *sha);
void kj_sha256_update(KjSha256 *sha, const void *data, size_t size);
void kj_sha256_final(KjSha256 *sha, uint8_t digest[KJ_SHA256_BYTES]); /* and wipes sha */
/* true: the portable code from now on, even where the CPU has the SHA
 * extensions; false: the extensions where the CPU has them (the default).
 * For the tests, which check both against the standard's vectors. */
void kj_sha256_portable(bool portable);

typedef struct KjHmacSha256 {
    KjSha256 inner, outer;
} KjHmacSha256;

void kj_hmac_sha256_init(KjHmacSha256 *hmac, const void *key, size_t key_size);
void kj_hmac_sha256_update(KjHmacSha256 *hmac, const void *data, size_t size);
void kj_hmac_sha256_final(KjHmacSha256 *hmac, uint8_t mac[KJ_SHA256_BYTES]);
/* In time that depends only on size (a MAC check must not say where it failed). */
bool kj_mac_equal(const uint8_t *a, const uint8_t *b, size_t size);

/* ========================================================= cache_folder.c */

/*
 * Which folder the disk cache may use and how its files are opened, so that
 * only the user can put code there that kjit runs (docs/security.md).
 */

/* Where the disk cache's warnings go (a refused folder or entry, a bad
 * KJIT_CACHE_MAX): a context's on_diagnostic.  NULL or fn NULL: nowhere. */
typedef struct KjCacheWarn {
    kjit_diagnostic_fn fn;
    void *user;
} KjCacheWarn;
/* Gives `text` (a whole "kjit: warning: ...\n" line) to warn, each distinct
 * text once per process. */
void kj_cache_warn(const KjCacheWarn *warn, const char *text);

/* $KJIT_CACHE_DIR, else $XDG_CACHE_HOME/kjit (an absolute one), else
 * $HOME/.cache/kjit, else the password database's home/.cache/kjit; false
 * when there is none. */
bool kj_cache_dir(char *buf, size_t size);

/* Opens the cache folder `dir` (made, 0700, when create and it is absent)
 * after checking that it is the effective user's and not writable by group
 * or others, and that every folder above it is the user's or root's and not
 * writable by group or others unless sticky.  A descriptor (O_DIRECTORY), or
 * -1: with *why (heap) when the folder is refused, *why NULL when it is
 * absent or the file system failed. */
int kj_cache_folder_open(const char *dir, bool create, char **why);

#define KJ_CACHE_SECRET_BYTES 32
/* The folder's secret, the key of its entries' MACs: a 0600 regular file of
 * the user's, made from getrandom when create and absent.  false with *why
 * (heap) when it is refused; false, *why NULL, when absent or unreadable. */
bool kj_cache_folder_secret(int folder, bool create, uint8_t secret[KJ_CACHE_SECRET_BYTES], char **why);
/* Removes the folder's secret (kjit cache clear); true when there was one. */
bool kj_cache_remove_secret(int folder);

/* Opens entry `name` of the folder to read: never through a symbolic link,
 * never blocking (a FIFO is refused before it is opened), and only a regular
 * file of the user's that group and others cannot write.  The descriptor
 * and *st; -1 with *why (heap) when refused, -1 alone when absent. */
int kj_cache_entry_open(int folder, const char *name, struct stat *st, char **why);

/* ================================================================ cache.c */

/*
 * Compiled code by content: a key names everything the bytes depend on; the
 * payload is an object file, PTX or a cubin.  A process-wide memory tier,
 * then the disk (kj_cache_dir).  Every failure is a miss (the caller
 * compiles): damaged, forged, foreign or wrong-format entries are deleted,
 * never loaded; a refused folder or entry is also a warning.
 */
#define KJ_CACHE_FORMAT 2

/* An entry's header: magic, format, kind, key size, a reserved word, payload
 * size (32 bytes), then the MAC of those bytes, the key and the payload. */
#define KJ_CACHE_MAC_OFFSET 32
#define KJ_CACHE_HEADER_BYTES (KJ_CACHE_MAC_OFFSET + KJ_SHA256_BYTES)

typedef enum KjCacheKind {
    KJ_CACHE_CPU_OBJECT = 1,
    KJ_CACHE_PTX = 2,
    KJ_CACHE_CUBIN = 3,
} KjCacheKind;

typedef struct KjCacheKey {
    KjBuf text;       /* "field=value\n" lines */
    uint64_t hash[2]; /* of the text, set by kj_cache_key_finish */
} KjCacheKey;

void kj_cache_key_add(KjCacheKey *key, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void kj_cache_key_finish(KjCacheKey *key);
void kj_cache_key_free(KjCacheKey *key);
/* kjit's and LLVM's versions, the cache format and this build of libkjit. */
const char *kj_cache_build_identity(void);
const char *kj_cache_kind_name(KjCacheKind kind);
/* <dir>/<the key's hash in hex>-<kind>.kjc */
void kj_cache_entry_path(const char *dir, const KjCacheKey *key, KjCacheKind kind, char *buf,
                         size_t size);

bool kj_cache_enabled(void);                   /* false when KJIT_CACHE=off */
/* KJIT_CACHE_MAX, else 1 GiB; a value that is not a size is a warning and
 * the default. */
uint64_t kj_cache_max_bytes(const KjCacheWarn *warn);
/* "512M", "2G", "1.5G", "100000": digits, an optional fraction, K, M, G or T
 * (powers of 1024, "KiB" and "KB" too); at most KJ_CACHE_MAX_LIMIT.  No
 * exponents, inf, nan, signs or spaces. */
#define KJ_CACHE_MAX_LIMIT (1ull << 50) /* 1024T */
bool kj_cache_parse_size(const char *text, uint64_t *bytes);
/* What keeps the cache in `dir` from working as configured ("kjit: warning:"
 * lines, heap), or NULL: kjit_cache_check. */
char *kj_cache_check(const char *dir);

/* A hit: the payload (heap, NUL-terminated past *size) and the entry made young. */
bool kj_cache_load(const KjCacheKey *key, KjCacheKind kind, void **data, size_t *size,
                   const KjCacheWarn *warn);
/* Writes atomically, then evicts the least recently used beyond the limit. */
bool kj_cache_store(const KjCacheKey *key, KjCacheKind kind, const void *data, size_t size,
                    const KjCacheWarn *warn);
/* Removes the oldest entries until the folder holds at most max_bytes (and
 * temporary files left by dead writers); returns the number removed.  Only
 * files kjit wrote (its entry names, its magic) are counted or removed. */
int kj_cache_evict(const char *dir, uint64_t max_bytes);

typedef struct KjCacheEntryInfo {
    const char *name;       /* file name in the folder */
    bool valid;             /* the header reads; the payload and MAC are not checked here */
    KjCacheKind kind;
    uint64_t file_bytes, payload_bytes;
    long long last_used;    /* seconds since the epoch */
    const char *key_text;   /* NULL when not valid */
} KjCacheEntryInfo;
typedef void (*KjCacheVisit)(void *user, const KjCacheEntryInfo *entry);
int kj_cache_list(const char *dir, KjCacheVisit visit, void *user); /* -1: no folder */
/* Removes the entries kjit wrote (named as its entries or temporary files,
 * regular files that begin with its magic) and the folder's secret; other
 * files stay.  The number of entries removed; -1 when there is no folder. */
int kj_cache_clear(const char *dir);

/* Both tiers, as code generation uses them: a payload from memory, else from
 * the disk (then kept in memory); and a fresh payload kept in both. */
bool kj_cache_fetch(const KjCacheKey *key, KjCacheKind kind, void **data, size_t *size,
                    const KjCacheWarn *warn);
void kj_cache_keep(const KjCacheKey *key, KjCacheKind kind, const void *data, size_t size,
                   const KjCacheWarn *warn);

/* The memory tier (process-wide, bounded): a copy of the payload on a hit. */
bool kj_cache_memory_get(const KjCacheKey *key, KjCacheKind kind, void **data, size_t *size);
void kj_cache_memory_put(const KjCacheKey *key, KjCacheKind kind, const void *data, size_t size);
void kj_cache_memory_clear(void);

/* What this process's cache did: for tests, `kjit cache stats` and benchmarks.
 * `compiles` counts code generation the cache could not avoid. */
typedef struct KjCacheCounters {
    uint64_t memory_hits, disk_hits, disk_misses, disk_rejected, disk_stores, evictions;
    uint64_t compiles, shared_hits;
    uint64_t listings; /* a store's listing of the folder, for eviction (cache.c) */
} KjCacheCounters;
KjCacheCounters kj_cache_counters(void);
void kj_cache_count_compile(void);
void kj_cache_count_shared_hit(void);

/* ============================================================== handle.c */

/*
 * The memory of kjit.h's handles: a KjHandle header first in each, whose
 * magic says the kind while the handle lives and is cleared when it is
 * freed; freed blocks are kept (and reused for the same kind only after
 * many others), so that a freed handle reads as freed instead of as freed
 * memory.  kj_handle_new gives zeroed memory of `size` bytes (the same for
 * every handle of a kind).
 */
typedef enum KjHandleKind {
    KJ_HANDLE_CONTEXT, KJ_HANDLE_MODULE, KJ_HANDLE_FUNCTION, KJ_HANDLE_STREAM, KJ_HANDLE_EVENT,
    KJ_HANDLE_KIND_COUNT
} KjHandleKind;
/* "kjh" and the kind while live; KJ_HANDLE_FREED once freed. */
#define KJ_HANDLE_MAGIC(kind) (0x6b6a6800u + (uint32_t)(kind))
#define KJ_HANDLE_FREED 0xdeadf7eeu
typedef struct KjHandle {
    uint32_t magic;
    uint64_t serial; /* unique in the process while live; 0 once freed */
} KjHandle;
void *kj_handle_new(KjHandleKind kind, size_t size);
void kj_handle_free(void *handle);
/* false for NULL (inline: every call asks) */
static inline bool kj_handle_live(const void *handle, KjHandleKind kind)
{
    return handle && __atomic_load_n(&((const KjHandle *)handle)->magic, __ATOMIC_ACQUIRE) ==
                         KJ_HANDLE_MAGIC(kind);
}
static inline uint64_t kj_handle_serial(const void *handle)
{
    return __atomic_load_n(&((const KjHandle *)handle)->serial, __ATOMIC_ACQUIRE);
}
const char *kj_handle_kind_name(KjHandleKind kind);

/* ============================================ the api*.c files' internals */

/*
 * The objects behind kjit.h's handles, shared by the two halves of the API:
 * api.c makes contexts, modules and functions and the code they run;
 * api_call.c (with api_guvec.c and api_reduce.c) runs it, through the
 * context's runtime target (below).  The helpers they share sit below them:
 * api_args.c (arguments), api_stage.c (operands), api_stream.c (streams,
 * events), api_support.c (what the targets need too); docs/architecture.md
 * gives the order.
 */
#include <pthread.h>
#include <time.h>

typedef struct KjRuntimeTarget KjRuntimeTarget;

/* One piece of generated code and its entry points. */
typedef struct KjCompiled {
    struct KjCompiled *next;
    const KjRuntimeTarget *runtime; /* the target that made it, and frees it */
    int signature;
    bool vectorized;
    KjVecVariant variant;
    uint32_t contiguous; /* kernels: the array parameters compiled as C-contiguous */
    char lifted[96];     /* a root another pass made (reduce.c): its variant, for the
                            lookup and the cache key; "" otherwise */
    char symbol[480];    /* the entry points' symbol (kj_kernel_variant_symbol) */
    /* From a library that lacks the vectorized variant asked for: the
     * variant the code is (STRIDED, no scalars), which the call then runs
     * (api_call.c); and the library's name of the code's symbols. */
    bool generalized;
    KjVecVariant ran_as;
    int library_root;
    KjIrFunction *root;
    /* What the target loaded, in its own terms: on the host the code shared
     * across the process by cache key and the addresses of __entry, __range
     * or __thread and of __block (when the kernel has one); on cuda the
     * loaded module and its kernel (kj_cuda_function's handle). */
    void *code;
    void *entry;
    void *block;
} KjCompiled;

/* The partial results of reductions on the default stream, in the target's
 * memory, kept for the next call (api_reduce.c; kj_reduce_scratch_free in
 * api_stream.c); the lock is held from the first level's launch to the last,
 * so that two host threads never interleave in it. */
typedef struct KjReduceScratch {
    pthread_mutex_t lock;
    void *data;
    size_t bytes;
} KjReduceScratch;

/* A set of pointers (open addressing; NULL is never a member). */
typedef struct KjPointerSet {
    void **slots;
    size_t capacity, count; /* count: members and tombstones */
} KjPointerSet;
bool kj_pointer_set_add(KjPointerSet *set, void *pointer);
bool kj_pointer_set_remove(KjPointerSet *set, void *pointer); /* false: not a member */
/* Calls visit on every member, then empties the set. */
void kj_pointer_set_drain(KjPointerSet *set, void (*visit)(void *user, void *pointer),
                          void *user);

struct kjit_context {
    KjHandle header;
    kjit_options options;
    kjit_target target;
    const KjRuntimeTarget *runtime; /* chosen once, in kjit_context_create */
    /* The targets' state, each touched only by its own target's functions. */
    KjPool *pool;          /* parallel */
    KjCuda *cuda;          /* cuda */
    char device_text[160]; /* cuda: the device as cubin cache keys name it */
    const char *stdlib_dirs[2];
    void *check_device;    /* checked mode, a target with device memory: the record there */
    pthread_mutex_t lock; /* code generation and the tables of compiled code */
    KjReduceScratch *reduce_scratch; /* cuda: partial results of reductions (api_reduce.c) */
    KjCancel *cancel;      /* kjit_context_cancel and the time limit (cancel.c) */
    /* What the context made and frees when it is destroyed (its handles die
     * with it): modules, streams, events (each list linked through its
     * handles' next and prev) and device memory from kjit_device_alloc;
     * under handles_lock. */
    pthread_mutex_t handles_lock;
    kjit_module *modules;
    kjit_stream *streams;
    kjit_event *events;
    KjPointerSet device_blocks;
};

/* The disk cache's warnings for code a context compiles go to its on_diagnostic. */
static inline KjCacheWarn kj_context_cache_warn(const kjit_context *context)
{
    return (KjCacheWarn){context->options.on_diagnostic, context->options.diagnostic_user};
}

struct kjit_function {
    KjHandle header;
    kjit_module *module;
    KjIrEntry *entry;
    char **signature_text;
    KjCompiled *compiled;
    uint32_t params_written; /* bit i: array parameter i may be stored into by some
                                signature (kj_ir_params_written; from 32 on: always) */
};

struct kjit_module {
    KjHandle header;
    kjit_context *context;
    kjit_module *next, *prev; /* the context's modules */
    KjArena arena;
    KjIrModule *ir;
    kjit_function **functions;
    int function_count;
    struct KjLibrary *library; /* a module loaded from a library (aot.c); NULL: compiled here */
};

struct kjit_stream {
    KjHandle header;
    kjit_context *context;
    kjit_stream *next, *prev; /* the context's streams */
    void *handle; /* the target's stream (a KjCudaStream); NULL on the host */
};

struct kjit_event {
    KjHandle header;
    kjit_context *context;
    kjit_event *next, *prev; /* the context's events */
    void *handle;         /* the target's event (a KjCudaEvent) */
    struct timespec host; /* when the target keeps time on the host */
};

/* The context's last error (a NULL context keeps it per thread, for
 * kjit_context_create); each returns `status`. */
kjit_status kj_api_set_error(kjit_context *context, kjit_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Takes a heap message from a lower layer, with a prefix. */
kjit_status kj_api_take_error(kjit_context *context, kjit_status status, const char *prefix,
                              char *message);
/* kj_api_take_error with "name: " in front, formatted only when there is an
 * error (the hot paths keep no prefix buffer of their own). */
kjit_status kj_api_take_named_error(kjit_context *context, kjit_status status, const char *name,
                                    char *message);
void kj_api_clear_error(kjit_context *context);
/* The checks at the door of each public function (api_error.c): true when
 * `handle` is a live handle of that kind; else false, with a message naming
 * `api` and what is wrong with the handle (NULL, or freed: a module freed,
 * its context destroyed) as the thread's error that kjit_last_error(NULL)
 * returns.  kj_api_live_function also clears the function's context's error. */
bool kj_api_live(const void *handle, KjHandleKind kind, const char *api);
static inline bool kj_api_live_function(const kjit_function *function, const char *api);
/* A pointer argument given as NULL: KJIT_ERROR_INVALID_ARGUMENT naming it,
 * on the context when it is live, else the thread's. */
kjit_status kj_api_null(kjit_context *context, const char *api, const char *what);

/* api_args.c: the door of each public entry point that runs a function's
 * code (kjit_call, kjit_call_async, kjit_launch_ex, kjit_reduce,
 * kjit_reduce_async): kj_api_enter is false (the thread's error set) unless
 * `function` is a live handle; else it clears its context's last error,
 * sends this thread's print() to the context and takes a cancel slot
 * (kj_cancel_begin).  Each true is paired with one kj_api_leave, which
 * gives the slot back and returns the call's status, or why it was stopped
 * (kj_cancel_end); given `result`, a stopped call's is freed and zeroed. */
typedef struct KjApiCall {
    kjit_context *context;
    const char *name; /* the function's, for the messages */
    KjCancelCall cancel;
} KjApiCall;
bool kj_api_enter(kjit_function *function, const char *api, KjApiCall *call);
kjit_status kj_api_leave(KjApiCall *call, kjit_status status, kjit_array *result);
/* api_args.c: the one check of what a call is given beyond its function,
 * each argument looked at once, before any path of a call, launch,
 * gufunc or reduction (which then ask only how many arguments they take):
 * args not NULL when nargs > 0; each argument a scalar of a known dtype or
 * an array that is there and a view kjit can read (kj_array_check); `out`
 * (when not NULL) such a view too; the stream (when not NULL) a live one
 * of the function's context; and when the call `runs` (it is not
 * kjit_prepare or kjit_function_match, which only look at shapes and
 * types), no array argument nor output with NULL data and elements. */
kjit_status kj_api_check_call(kjit_function *function, const char *api, const kjit_arg *args,
                              int nargs, const kjit_array *out, const kjit_stream *stream,
                              bool runs);
kjit_status kj_api_check_array(kjit_context *context, const char *api, const char *what,
                               const kjit_array *array);
/* api_stream.c: the stream of a call, when not NULL, a live one that the
 * context may queue work on (its own, or one of a context of the same
 * target and device). */
kjit_status kj_api_check_stream(kjit_context *context, const char *api,
                                const kjit_stream *stream);
/* A new stream joins its context's list (kjit_stream_create, kjit_stream_wrap). */
void kj_api_stream_register(kjit_stream *stream);
/* kjit_context_destroy: the context's streams, events and device memory. */
void kj_api_release_handles(kjit_context *context);
/* kjit_context_destroy: the context's reduction scratch memory (api_reduce.c). */
void kj_reduce_scratch_free(kjit_context *context);

/* api_args.c: how far a call's arguments are from a signature's parameters: 0 when every
 * one is exact, one more for each scalar that widens implicitly (an i64 to
 * any number, an f64 to any float or complex, a c128 to any complex); -1 when
 * they do not fit.  The call takes the signature of the least. */
int kj_api_signature_distance(const KjIrFunction *fn, const kjit_arg *args, int nargs);
/* A measure of that kind, for kj_api_closest_signature; user is the caller's. */
typedef int KjSignatureDistance(const KjIrFunction *fn, const kjit_arg *args, int nargs,
                                const void *user);
/* The signature of function whose distance from the arguments is least (the
 * first of equals), or -1 when every distance is -1. */
int kj_api_closest_signature(const kjit_function *function, KjSignatureDistance *distance,
                             const kjit_arg *args, int nargs, const void *user);
/* The same for one argument and a parameter of scalar type `elem` (an array
 * argument's element type must be elem exactly). */
int kj_api_arg_distance(const kjit_arg *arg, const KjType *elem);
/* For the message of a call that no signature takes: "name(f64 array, i64)",
 * and the function's signatures, then that element types must match exactly. */
void kj_api_print_element_types(KjBuf *message, const char *name, const kjit_arg *args,
                                int nargs);
void kj_api_print_signatures(KjBuf *message, const kjit_function *function);
/* "f64 2-d array", "i64" or "f32 (0-d array)": what an argument is, for the
 * messages of a call that cannot take it. */
void kj_api_describe_arg(const kjit_arg *arg, char *buf, size_t size);

/* api.c: a new module's functions (their signatures' texts, and what they
 * write: params_written[i] for function i, or from the IR when NULL), and
 * the module joins its context's list. */
void kj_api_module_publish(kjit_module *module, const uint32_t *params_written);
/* The root for what find_compiled asks, in compiled (its signature,
 * variant, contiguous parameters, lifted name, root and symbol): through
 * the pass list, or from the module's library; no code yet. */
kjit_status kj_api_prepare_root(kjit_function *function, int sig, const KjPipelineRoot *request,
                                uint32_t contiguous, const char *lifted, KjCompiled *compiled);
/* api.c: the checked IR of signature `sig` of a function. */
KjIrFunction *kj_api_variant_of(const kjit_function *function, int sig);
/* The code for signature `sig` (vectorized as `variant` when not NULL; a
 * kernel with the C-contiguous array parameters in `contiguous`), generated
 * now if this is its first use. */
kjit_status kj_api_find_compiled(kjit_function *function, int sig, const KjVecVariant *variant,
                                 uint32_t contiguous, KjCompiled **out);
/* The same for a root that a middle pass other than vectorize makes (the
 * reduce pass: request->reduce): `lifted` names the variant (it goes into
 * the lookup and the cache key), `contiguous` the array parameters compiled
 * as C-contiguous. */
kjit_status kj_api_find_lifted(kjit_function *function, int sig, KjPipelineRoot *request,
                               uint32_t contiguous, const char *lifted, KjCompiled **out);

/* api_reduce.c: the name of a level's variant (map_sig: the fused map's
 * signature), for the compiled-code table, the cache key and libraries. */
void kj_reduce_variant_key(const KjReduceVariant *v, int map_sig, char *buf, size_t size);
/* api_reduce.c: kjit_prepare of a @reduce function (over every axis). */
kjit_status kj_reduce_prepare(kjit_function *function, const kjit_arg *args, int nargs);
/* The signature kjit_reduce takes for these arguments (kjit_function_match). */
kjit_status kj_reduce_match(kjit_function *function, const kjit_arg *args, int nargs,
                            int *signature);

/* A host scalar in the representation compiled code reads (16 bytes). */
typedef union KjScalar {
    bool b;
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    float f32;
    double f64;
    float c64[2];
    double c128[2];
} KjScalar;
/* api_args.c: a host scalar stored as `type` at out (a KjScalar; false for
 * complex to real), and how a signature's parameter of that type takes it
 * (0 exactly, 1 widened from the host's i64/f64/c128, -1 not at all). */
bool kj_api_convert_scalar(const kjit_arg *arg, const KjType *type, void *out);
int kj_api_scalar_match(kjit_dtype given, const KjType *param);

/* api_guvec.c: kjit_call, kjit_call_async and kjit_prepare (run false) of a
 * @guvectorize function; kjit_function_match of one. */
kjit_status kj_gufunc_call(kjit_function *function, const kjit_arg *args, int nargs,
                           kjit_array *out, kjit_array *result, kjit_stream *stream, bool run);
kjit_status kj_gufunc_match(kjit_function *function, const kjit_arg *args, int nargs,
                            int *signature);

/* api_support.c: the cache key of one root's code, every field but the target's (which each
 * target adds last: its name and what it compiles for). */
void kj_api_code_key(const kjit_module *module, const KjCompiled *compiled, KjCacheKey *key);
/* The code generator's options that what is asked (a context's options, or a
 * stage's in their terms) says to use for code of `runtime`'s target, with,
 * when `compiled` is not NULL, the root's own (its C-contiguous parameters;
 * no checks in a root without them).  What only the caller knows it adds
 * (cuda: the arch, whole-program PTX; the cpu's block dims; verify). */
KjCodegenOptions kj_api_codegen_options(const KjRuntimeTarget *runtime, const kjit_options *asked,
                                        const KjCompiled *compiled);
/* aligned for SIMD loads; NULL when the memory cannot be had (0 bytes: 64). */
void *kj_api_alloc_aligned(size_t bytes);
/* api_stage.c: a call's result array, allocated so on the host (C-contiguous); out of
 * memory is an error that names the function. */
kjit_status kj_api_alloc_output(kjit_context *context, const char *name, kjit_dtype dtype,
                                int ndim, const int64_t *shape, kjit_array *out);

/* api_stage.c: host operands staged on a target whose memory is not the host's
 * (api_guvec.c, api_reduce.c).  The target memory a call makes, freed at its
 * end: every operand of a gufunc, or a reduction's inputs, output and partials. */
#define KJ_API_MAX_TEMPS (KJ_GUFUNC_MAX_OPERANDS + 4)
typedef struct KjTemps {
    void *ptr[KJ_API_MAX_TEMPS];
    int count;
} KjTemps;
kjit_status kj_api_temp_alloc(kjit_context *context, KjTemps *temps, size_t bytes, void **out);
void kj_api_free_temps(kjit_context *context, KjTemps *temps);
/* Each input array that one of the outputs overlaps (in the same memory),
 * unless, for an `elementwise` call, as the very same view, is replaced in
 * inputs[] by a C-ordered copy, &copies[i], as NumPy copies them: on the
 * host in host_copies[i], on a device in a temporary (kj_api_free_temps,
 * after the stream is done).  *copied: how many; when not 0, the caller
 * frees host_copies[0..count) (NULL for the inputs not copied); when 0,
 * host_copies is not written. */
kjit_status kj_api_unalias(kjit_context *context, const kjit_array **inputs, int count,
                           const kjit_array *const *outputs, int output_count,
                           bool elementwise, kjit_array *copies, KjTemps *temps,
                           void **host_copies, int *copied, kjit_stream *stream);
/* Bytes between host memory and the target's, through its copy. */
kjit_status kj_api_copy_bytes(kjit_context *context, void *dst, bool dst_target, const void *src,
                              bool src_target, size_t bytes, kjit_stream *stream);
/* Target memory for the extent of `host`, a temporary, filled from it when
 * `copy`; *data is where the staged array's data pointer goes (the copy
 * less the extent's low offset). */
kjit_status kj_api_stage(kjit_context *context, KjTemps *temps, const kjit_array *host,
                         bool copy, kjit_stream *stream, void **data);

/* ========================================== runtime_cpu.c, runtime_cuda.c */

/*
 * A runtime target: everything that differs between running code on the host
 * and on a GPU, as QBE's Target struct holds what differs between machines.
 * The api*.c files check arguments, choose signatures and variants, and
 * broadcast; then they call through the context's target and never ask which
 * one it is.
 *
 * Every function that can fail leaves its message as the context's error
 * (kj_api_set_error and friends) and returns the status, except `open`, which
 * runs before there is a context to keep one.
 */

/* A vectorized call, planned (kj_broadcast_plan) and its code found.  params
 * point into plan (arrays), at converted host scalars and at plan->output;
 * a target may change the data pointers in plan (cuda stages host arrays). */
typedef struct KjVectorizedRun {
    const KjCompiled *compiled;
    KjBroadcastPlan *plan;
    void **params;
    /* NULL for host scalars passed by value (bit i of plan->variant's
     * scalar_mask); every input the code reads through a descriptor has its
     * array here, a host scalar that a library's general code reads as a
     * 0-d host array (api_call.c's generalize), so a device target stages
     * each (kj_vectorized_stages_input) */
    const kjit_array *const *inputs;
    int input_count;
    kjit_array *output;
    int extra_outputs; /* a @vectorize of several outputs: the last extra_outputs inputs
                          are its outputs 1.. (written, copied back from a device) */
    kjit_stream *stream; /* NULL: the default stream */
} KjVectorizedRun;
/* runtime_cuda.c: whether a target whose device cannot read the host's
 * memory copies input i of run to the device for the call: a host array
 * the code reads through its descriptor. */
bool kj_vectorized_stages_input(const KjVectorizedRun *run, int i);

/* A kernel launch, its arguments marshalled: descs[i] is array argument i's
 * descriptor, which params[i] points to (cuda may stage a host array and
 * point its descriptor at the copy). */
typedef struct KjLaunch {
    const char *name; /* the kernel, for messages */
    kjit_module *module; /* its module (the cpu targets compile code for the
                            launch's block shape from its IR) */
    const KjCompiled *compiled;
    const uint32_t *grid, *block;
    const kjit_arg *args;
    int arg_count;
    KjArrayDesc *descs;
    void **params;
    kjit_stream *stream;
    size_t dynamic_shared_bytes; /* per block, for shared(T) */
    size_t launch_local_bytes; /* per thread, for local() sized at launch (kj_local_launch_bytes);
                                  cuda puts its scratch's address in params after the
                                  arguments and checked mode's record */
    uint32_t written; /* bit i: the kernel may store into array argument i (from 32 on:
                         always counted written); cuda copies only those back */
} KjLaunch;

/* `items` work items of a VEC_KERNEL (a PARFOR iteration per item): one
 * level of a reduction's LANES form (api_reduce.c) or a gufunc's loop
 * elements (api_guvec.c); or, with `warps`, of a reduction's WARPS kernel (a
 * KERNEL on blocks of KJ_REDUCE_WARPS_PER_BLOCK warps, a warp per item).
 * params as the kernel takes them. */
typedef struct KjItemsRun {
    const char *name; /* the function, for messages */
    const KjCompiled *compiled;
    bool warps;
    bool columns;     /* a reduction's COLUMNS kernel: KJ_REDUCE_COLUMN_ITEMS work items
                         a block of KJ_REDUCE_COLUMN_ITEMS L / V threads */
    int thread_lanes; /* WARPS: the variant's V (0 counts as 1): 8 V work items a block;
                         COLUMNS: its V */
    int64_t items;
    void **params;
    kjit_stream *stream;
} KjItemsRun;

/* The thread blocks of a WARPS or COLUMNS run (api_support.c): how many work
 * items a block takes and its threads. */
void kj_items_block_shape(const KjItemsRun *run, int64_t *items_per_block, uint32_t *threads);

struct KjRuntimeTarget {
    const char *name;
    /* Device arrays are ordinary host memory, which host code can read (the
     * cpu targets: a program written for cuda runs there unchanged). */
    bool device_memory_on_host;
    /* The back end target its code is compiled for; the policy that hangs on
     * it (barrier splitting: kj_codegen_splits_barriers) is asked of it. */
    KjCodegenTarget codegen;

    /* The context's state for this target (a pool, a device); on failure a
     * heap message in *error.  close undoes open. */
    kjit_status (*open)(kjit_context *context, char **error);
    void (*close)(kjit_context *context);

    /* Code for compiled->root (its symbol set): from the caches or generated
     * now, loaded, its entry points in compiled; `prefix` opens the message
     * of a failure.  release frees what generate left, after a failure too. */
    kjit_status (*generate)(kjit_module *module, KjCompiled *compiled, const char *prefix);
    void (*release)(KjCompiled *compiled);

    /* A plain function (NULL where the target runs none: see kj_runtime_for);
     * result receives its value. */
    void (*call)(const KjCompiled *compiled, void **params, void *result);
    kjit_status (*run_vectorized)(kjit_context *context, KjVectorizedRun *run);
    kjit_status (*launch)(kjit_context *context, KjLaunch *launch);
    /* Reductions: contiguous levels run as the WARPS form (a GPU) or as the
     * LANES form with SIMD lanes (the host); strided ones as LANES, with the
     * lanes in registers where reduce_in_warps. */
    bool reduce_in_warps;
    /* The race checker (--check=race, check_race.c) runs on its code: the
     * host's threads (a GPU has compute-sanitizer's racecheck). */
    bool checks_races;
    /* Runs the code of libraries built ahead of time (aot.c; kjit build
     * --emit=lib): the host's, and cuda's (aot_cuda.c). */
    bool runs_libraries;
    kjit_status (*run_items)(kjit_context *context, const KjItemsRun *run);

    /* Device memory (bytes may be 0), and copies between contiguous arrays of
     * either memory, in the stream's order when one is given. */
    kjit_status (*alloc)(kjit_context *context, size_t bytes, void **data);
    kjit_status (*free)(kjit_context *context, void *data);
    kjit_status (*copy)(kjit_context *context, kjit_array *dst, const kjit_array *src,
                        size_t bytes, kjit_stream *stream);

    /* Streams (synchronize with NULL: all the context's work) and events.
     * Two events can be compared when the same event_elapsed measures them. */
    kjit_status (*stream_create)(kjit_context *context, kjit_stream *stream);
    kjit_status (*synchronize)(kjit_context *context, kjit_stream *stream);
    void (*stream_destroy)(kjit_stream *stream);
    kjit_status (*event_record)(kjit_context *context, kjit_stream *stream, kjit_event *event);
    kjit_status (*event_elapsed)(kjit_event *start, kjit_event *end, double *milliseconds);
    void (*event_destroy)(kjit_event *event);
};

extern const KjRuntimeTarget kj_runtime_cpu;      /* runtime_cpu.c: the calling thread */
extern const KjRuntimeTarget kj_runtime_parallel; /* runtime_cpu.c: the thread pool */
extern const KjRuntimeTarget kj_runtime_cuda;     /* runtime_cuda.c */

/* The runtime target for a kjit_target (runtime_target.c): AUTO is cuda, the first
 * that kjit_context_create tries; an unknown value is cpu. */
const KjRuntimeTarget *kj_runtime_target_of(kjit_target target);
/* What AUTO stands for in kjit_context_create: the first choice (a GPU; the
 * context falls back to cpu when none answers), or, where races are checked,
 * a target that checks them. */
kjit_target kj_runtime_target_auto(bool check_races);

/*
 * The target that makes and runs code of this kind in a context.  Plain
 * functions always run on the host, whatever the context's target: the cuda
 * target has no entry point for them and a GPU round trip for one scalar
 * would never pay.
 */
static inline const KjRuntimeTarget *kj_runtime_for(const kjit_context *context,
                                                    KjIrFunctionKind kind)
{
    return kind == KJ_IR_FN_PLAIN ? &kj_runtime_cpu : context->runtime;
}

/* ======================================================== check_report.c */

/*
 * Checked mode at run time: a KjCheckRecord per call (kjit_backend.h) handed
 * to the compiled code, read back after it, and a failure turned into the
 * call's KJIT_ERROR_CHECK with a message naming the source place.
 */
typedef struct KjCheckCall {
    const KjRuntimeTarget *runtime; /* the target running the call */
    KjCheckRecord host;  /* on the host: the record itself; else the copy read back */
    void *device;        /* a target with device memory: the context's record there */
} KjCheckCall;

/* The KJIT_CHECK_* bits KJIT_CHECK asks for: 0 unset or "0", RACE for
 * "race", ALL for "all", else VALUES. */
int kj_check_env(void);
/* The parameter compiled code takes for the record: on the host the record's
 * address; on a device a pointer to the device record's address (the
 * context's, made on first use through the target's alloc and copy). */
kjit_status kj_check_begin(kjit_context *context, const KjRuntimeTarget *runtime,
                           KjCheckCall *call, void **param);
/* After the call (status: how it went so far): on a device, waits for
 * `stream` and reads the record back (zeroing it again after a failure); a
 * failure becomes KJIT_ERROR_CHECK with its message on the context. */
kjit_status kj_check_end(kjit_context *context, KjCheckCall *call, const KjIrModule *module,
                         const char *function, kjit_stream *stream, kjit_status status);
/* The message of a failed record: "file:line:col: error: ...", the line, a caret. */
char *kj_check_message(const KjIrModule *module, const KjCheckRecord *record,
                       const char *function);
/* A message at its place in the source: file:line:col, the line and a caret. */
char *kj_check_message_at(KjLoc loc, const char *what);
/* Frees the device record, through the context's target (before it closes). */
void kj_check_context_free(kjit_context *context);

/* =========================================================== check_race.c */

/*
 * The race checker (KJIT_CHECK_RACE, cpu targets): kj_check_begin makes a
 * state per call and puts it and kj_race_access in the record; cpu.c runs
 * the launch in one fixed order, tells the state of each fiber group and
 * each barrier released, and reports what goes wrong at barriers;
 * kj_check_end turns a failure into the call's message.
 */
typedef enum KjRaceKind {
    KJ_RACE_DATA,          /* first: the access now, second: the one it races with */
    KJ_RACE_DIVERGENT,     /* first and second wait at different barriers */
    KJ_RACE_RETURNED,      /* first waits at a barrier, second has returned */
    KJ_RACE_MASK_OWN_LANE, /* values: the mask, the lane */
    KJ_RACE_MASK_DISAGREE, /* values: first's mask, second's */
    KJ_RACE_INACTIVE_LANE, /* values: the source lane */
    KJ_RACE_OUT_OF_MEMORY,
} KjRaceKind;

typedef struct KjRaceParty {
    int32_t site; /* the module's check site (a READ, WRITE, ATOMIC or BARRIER one) */
    int32_t thread[3], block[3];
} KjRaceParty;

typedef struct KjRaceReport {
    KjRaceKind kind;
    KjRaceParty first, second;
    int index_count;
    int64_t indices[KJ_MAX_DIMS];
    int64_t values[2];
} KjRaceReport;

typedef struct KjRaceState KjRaceState;

KjRaceState *kj_race_create(void);
void kj_race_free(KjRaceState *race);
bool kj_race_failed(const KjRaceState *race);
bool kj_race_out_of_memory(const KjRaceState *race);
const KjRaceReport *kj_race_report(const KjRaceState *race);
/* KjCheckRecord.race_access: an access or a barrier of compiled code. */
int32_t kj_race_access(KjCheckRecord *record, KjThreadCtx *ctx, void *address,
                       const int64_t *indices, int32_t site, int32_t flags);
/* A launch's shape, before its first group. */
void kj_race_launch(KjRaceState *race, const uint32_t grid[3], const uint32_t block[3]);
/* A fiber group of `blocks` blocks from first_block starts: its threads'
 * stacks (local() arrays) and its shared memory; epochs start at 0.  false
 * (and the state out of memory) without memory. */
bool kj_race_group_begin(KjRaceState *race, int64_t first_block, int blocks, void *local_lo,
                         size_t local_bytes, void *shared_lo, size_t shared_bytes);
/* The thread (fiber) that runs now, or NULL: for the accesses of plain
 * functions, which have no ctx of their own. */
void kj_race_running(KjRaceState *race, KjThreadCtx *ctx);
/* The barrier site thread `index` of the group last announced. */
int32_t kj_race_pending_site(const KjRaceState *race, int index);
/* A barrier released: a warp's (all its live lanes), a block's, the grid's. */
void kj_race_warp_barrier(KjRaceState *race, int block, int warp);
void kj_race_block_barrier(KjRaceState *race, int block);
void kj_race_grid_barrier(KjRaceState *race);
/* A synchronisation error the scheduler found, between threads of the group. */
void kj_race_fail_sync(KjRaceState *race, KjRaceKind kind, int first_index, int32_t first_site,
                       int second_index, int32_t second_site, int64_t value0, int64_t value1);
/* "file:line:col: error: ...", the line and a caret, as kj_check_message. */
char *kj_race_message(const KjIrModule *module, const KjRaceState *race, const char *function);

/* ============================================================== trace.c */

/* KJIT_TRACE=1: spans of load paths on stderr ("kjit trace: WHAT MS ms").
 * kj_trace_now is 0 when off; kj_trace prints the time since `since` and
 * returns now (0 when off), to chain spans. */
bool kj_trace_on(void);
double kj_trace_now(void);
double kj_trace(const char *what, double since);

/* ======================================================= aot.c, aot_build.c */

/*
 * Libraries built ahead of time (docs/aot.md): `kjit build --emit=lib`
 * (aot_build.c, libkjit only) compiles every root the runtime may ask for,
 * each for every x86-64 level asked, into one object per (root, level)
 * whose global symbols are renamed to kjaot_<level>_<root>__<symbol>, links
 * them with the system's cc into a shared object, and appends the table
 * (the module's functions, signatures and roots: what the runtime reads of
 * the IR) and a trailer: magic, ABI version, sizes, and the SHA-256 of all
 * the bytes before it.  kjit_module_load_library (aot.c, in libkjit and
 * libkjit-rt) checks the file's owner and mode, the ABI, the digest and the
 * CPU, and loads exactly the bytes it checked (through a memfd).
 */
#define KJ_AOT_ABI KJIT_LIBRARY_ABI /* kjit.h */
#define KJ_AOT_MAGIC "KJITLIB\0"
#define KJ_AOT_TRAILER_BYTES 64 /* magic 8, abi 4, pad 4, elf 8, table 8, sha 32 */

/* The x86-64 levels (aot.c), lowest first: the name libraries and
 * --cpu-levels use, LLVM's CPU and features, and what a CPU must have to
 * run it (the compiler's name for __builtin_cpu_supports; KJIT_CPU_FEATURES
 * with "-f" for any feature f of the level makes it unusable). */
typedef struct KjCpuLevel {
    const char *name, *llvm_cpu, *llvm_features, *cpu_supports;
} KjCpuLevel;
#define KJ_CPU_LEVEL_COUNT 3
extern const KjCpuLevel kj_cpu_levels[KJ_CPU_LEVEL_COUNT];
const KjCpuLevel *kj_cpu_level_named(const char *name);
/* Whether this CPU (less what KJIT_CPU_FEATURES takes away) runs the level. */
bool kj_cpu_level_usable(const KjCpuLevel *level);

/* A loaded library (kjit_module.library). */
typedef struct KjLibrary KjLibrary;
/* kjit_module_load_library's work (api.c makes the module and publishes
 * it): the file at path checked and loaded into module (its ir, of function
 * headers, and library), what each function writes in *written (the
 * module's arena); else the status with the context's error, and the
 * caller frees the module. */
kjit_status kj_aot_open(kjit_module *module, const char *path, uint32_t **written);
/* Whether a context checking `want` (KJIT_CHECK_* bits; 0: unchecked) runs
 * a library whose checked code checks `held` (0: none), on cuda with
 * checked cuda roots or not (--check=values builds them); false with why. */
bool kj_aot_checked_usable(int want, int held, bool on_cuda, bool cuda_checked, char *why,
                           size_t why_size);
/* A library linked into the program (kjit build --emit=staticlib): what its
 * NAME_kjit_load passes to kjit_module_load_linked.  The linker put its code
 * in the program, so there is no file to check: the ABI is, and the table
 * is read as a shared library's; symbols are sorted (strcmp). */
typedef struct KjLinkedLibrary {
    uint32_t abi;
    const char *name;
    const uint8_t *table;
    size_t table_size;
    const char *const *symbols;
    void *const *addresses;
    size_t symbol_count;
} KjLinkedLibrary;
kjit_status kj_aot_open_linked(kjit_module *module, const KjLinkedLibrary *linked,
                               uint32_t **written);
/* NAME of a library's C names (NAME.h's functions, NAME_kjit_load):
 * name_given, else output's file name without "lib" and its extension, any
 * character but letters, digits and _ made _ (aot_build.c, libkjit). */
bool kj_aot_c_name(const char *output, const char *name_given, char name[128], char **error);
/* The root a library holds for what find_compiled asks (api.c): fills
 * compiled (root, symbol; when the library has no such variant, the general
 * one: compiled->ran_as and ->generalized); KJIT_ERROR_NOT_FOUND with the
 * context's error when it holds nothing that runs it. */
kjit_status kj_aot_find(kjit_module *module, int function, int sig, const KjVecVariant *variant,
                        uint32_t contiguous, const char *lifted, KjCompiled *compiled);
/* The code a library built with --block holds for launches of the kernel
 * root `compiled` with blocks of dims (its split form specialised for them,
 * as runtime_cpu.c's shape_generate makes it): *block, *blocks and
 * *shared_written set and true; false, nothing set, when it holds none. */
bool kj_aot_shape(kjit_module *module, const KjCompiled *compiled, const uint32_t dims[3],
                  void **block, void **blocks, bool *shared_written);
/* The entry points of compiled (runtime_cpu.c's generate for a library). */
kjit_status kj_aot_generate(kjit_module *module, KjCompiled *compiled, const char *prefix);
void kj_aot_free(KjLibrary *library);

/* The table (aot_build.c writes it, aot.c reads it), little-endian:
 *   u32 ABI; str kjit version, source path; u64 source hash; u32 check,
 *   cancellable, cpu_simd, opt_level; u32 levels, each str name;
 *   u32 entries, each: str name, u32 kind, u32 params_written, u32
 *     signatures, each a function header; u32 1 and a gufunc layout (str
 *     text, u32 inputs, outputs, each operand's u32 rank and dims, u32
 *     names, each str) or u32 0; i32 the entry of a @reduce's map or -1;
 *   u32 roots, each: u32 entry, sig, vectorized, layout, ndim, scalar_mask,
 *     contiguous, checked; str lifted, symbol; a function header;
 *   u32 shapes (kjit build --block), each u32 root, dims[3], shared_written:
 *     the objects kjaot_<level>_s<shape>__ hold its __block and __blocks;
 *   checked mode's sites: u32 sources, each str path, text; u32 sites,
 *     each u32 kind, source (0xffffffff: none), line, col; str array, type;
 *   the cuda section: u32 0 (--cuda=off), or u32 1, u32 archs, each str
 *     name and u32 whether it has cubins (the first is the PTX's); str the
 *     build's notes; u32 cuda roots, each a root (as above, never checked),
 *     u64 size and the PTX with its NUL, and for each arch with cubins u64
 *     size and the cubin.
 * `check` is the KJIT_CHECK_* bits of the roots marked checked (0: none).
 * The version rule: KJIT_LIBRARY_ABI (kjit.h) goes up by one whenever what
 * this format means changes, in one commit landing on main; work merged
 * together (the cuda section, checked roots and shapes: version 2) shares
 * one bump.  The runtime reads its own version only, and names both.
 * A function header: str name, symbol; u32 kind, param count, each str name
 * and a type; a type (return); u32 flags (KJ_AOT_FN_*); i64 shared_bytes,
 * local_bytes; str device_use, device_chain; u32 device line, col; with
 * KJ_AOT_FN_SPLIT, i64 the split form's shared_bytes, local_bytes; u32
 * output_count, outputs 1.. each str name and a type; u32 launch-sized
 * local()s, each str path, u32 line, col, a type (element), u32 ndim, per
 * dimension i64 size, u32 1 and a size expression (u32 op, a type, u64
 * const_int, u32 dim, math, param index or -1, arg count, the args) or 0.  A type:
 * u32 kind (KJ_AOT_NO_TYPE for none), elem kind, ndim.  A str: u32 length,
 * bytes (0xffffffff: NULL). */
enum {
    KJ_AOT_FN_SYNCTHREADS = 1, KJ_AOT_FN_SYNCGRID = 2, KJ_AOT_FN_DYNAMIC_SHARED = 4,
    KJ_AOT_FN_UNCHECKED = 8, KJ_AOT_FN_CONTIGUOUS = 16, KJ_AOT_FN_SPLIT = 32,
};
#define KJ_AOT_NO_TYPE 0xffffffffu
#define KJ_AOT_GUFUNC_LOOPS 3 /* the loop ranks a library's @guvectorize code takes */
#define KJ_AOT_REDUCE_KEPT 1  /* the kept and reduced ranks of a library's @reduce code */
#define KJ_AOT_REDUCE_REDUCED 2
#define KJ_AOT_NULL_STR 0xffffffffu

/* ======================================================== aot_cuda*.c */

/*
 * The cuda code of a library (docs/aot.md, "cuda"): each root a cuda context
 * asks for, made as the JIT makes it (aot_cuda_build.c, libkjit only): for
 * each --arch, LLVM's PTX for it assembled whole-program by ptxas into a
 * cubin (an arch that ptxas cannot target is left out, and said), and the
 * PTX of the lowest arch, relocatable, for the driver to compile on a newer
 * device.  aot_cuda.c (both libraries) chooses at load time what the device
 * runs and loads a root's code at its first use.
 */
#define KJ_AOT_CUDA_ARCHS 8
#define KJ_AOT_CUDA_DEFAULT_ARCHS "sm_70,sm_80,sm_90"
typedef struct KjAotCudaArchs {
    int count;
    char names[KJ_AOT_CUDA_ARCHS][16]; /* as asked, lowest first */
    bool cubin[KJ_AOT_CUDA_ARCHS];     /* ptxas made its cubins */
} KjAotCudaArchs;
typedef struct KjAotCudaCode {
    char *ptx; /* the lowest arch's, relocatable */
    void *cubin[KJ_AOT_CUDA_ARCHS];
    size_t cubin_size[KJ_AOT_CUDA_ARCHS];
} KjAotCudaCode;
/* "sm_70,sm_80,sm_90" into archs (sorted, each once); else *error (heap). */
kjit_status kj_aot_cuda_archs(const char *text, KjAotCudaArchs *archs, char **error);
/* The code of one root of `ir` (compiled as a cuda context prepares it) for
 * archs; the first root's call finds which archs ptxas can target (cubin[]),
 * appending to *notes (heap) what it leaves out and why.  *error on failure. */
kjit_status kj_aot_cuda_compile(KjIrModule *ir, const kjit_options *options, KjCompiled *root,
                                KjAotCudaArchs *archs, bool first, KjAotCudaCode *code,
                                char **notes, char **error);
/* The same root's code for blocks of `dims` only (kjit build --block):
 * its PTX with every read of %ntid the block's extent and the entry
 * declaring .reqntid, so ptxas folds blockDim as the cpu targets'
 * split_specialise does; launched by those blocks alone (aot.c's
 * kj_aot_cuda_shape).  The PTX text's transform: heap, or NULL when the
 * PTX has no .entry to declare it on. */
kjit_status kj_aot_cuda_compile_shape(KjIrModule *ir, const kjit_options *options,
                                      KjCompiled *root, const uint32_t dims[3],
                                      const KjAotCudaArchs *archs, KjAotCudaCode *code,
                                      char **error);
char *kj_ptx_for_block(const char *ptx, const uint32_t dims[3]);
/* A cuda root's lifted name for blocks of dims: "block X,Y,Z". */
void kj_aot_block_key(const uint32_t dims[3], char *key, size_t size);
void kj_aot_cuda_code_free(KjAotCudaCode *code);

/* An arch's compute capability: "sm_86" -> 8, 6 (false when not sm_N). */
bool kj_aot_cuda_capability(const char *arch, int *major, int *minor);
/* What a device of compute capability major.minor runs of a library: the
 * index of the cubin arch (same major, the highest minor not above the
 * device's), KJ_AOT_CUDA_USE_PTX (the PTX's arch is not above the device),
 * or KJ_AOT_CUDA_NONE. */
enum { KJ_AOT_CUDA_USE_PTX = -1, KJ_AOT_CUDA_NONE = -2 };
int kj_aot_cuda_choose(int major, int minor, const KjAotCudaArchs *archs, const char *ptx_arch);
/* Whether a device of compute capability major.minor runs a library's cuda
 * code (has_cuda: it holds some; archs, the PTX's first): then what it runs
 * in `chosen` ("cubin sm_90", "ptx sm_70"), else why not in `why`, naming
 * the device and what the library holds. */
bool kj_aot_cuda_usable(bool has_cuda, const KjAotCudaArchs *archs, int major, int minor,
                        char *chosen, size_t chosen_size, char *why, size_t why_size);
/* The device a cuda context's library code is chosen for: its compute
 * capability, or KJIT_AOT_CUDA_DEVICE=sm_XY's (a test hook, docs/aot.md). */
void kj_aot_cuda_device(kjit_context *context, int *major, int *minor);
/* aot.c: whether, on a cuda context, a kernel launch of blocks of `block`
 * from a library built for that shape (--block) has the shape's root, named
 * `key` ("block X,Y,Z", lifted: api_call.c runs it instead of `general`). */
bool kj_aot_cuda_shape(const kjit_function *function, const KjCompiled *general,
                       const uint32_t block[3], char *key, size_t key_size);
/* aot.c: a library root's cuda code for the device (its cubin, else its
 * PTX, or the PTX when the driver refuses the cubin) loaded for compiled
 * (runtime_cuda.c's generate for a library); *error (heap) on failure. */
kjit_status kj_aot_cuda_load(kjit_module *module, const KjCompiled *compiled,
                             KjCudaModule **loaded, char **error);
/* aot.c: what a library module holds, as text (kjit_library_describe). */
void kj_aot_describe(const kjit_module *module, const char *path, KjBuf *out);

/* ============================================================ api_error.c */

static inline bool kj_api_live_function(const kjit_function *function, const char *api)
{
    if (__builtin_expect(!kj_handle_live(function, KJ_HANDLE_FUNCTION), 0))
        return kj_api_live(function, KJ_HANDLE_FUNCTION, api); /* says why */
    kj_api_clear_error(function->module->context);
    kj_print_context = function->module->context;
    return true;
}

#endif
