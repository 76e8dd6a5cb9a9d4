/*
 * cuda.c: the cuda target's runtime: devices, modules, launches, memory,
 * streams and events, on top of the driver table of cuda_driver.c.
 *
 * Each device is used through its primary context, retained once per process
 * however many KjCuda handles are open on it, so kjit shares the context with
 * any CUDA runtime code in the same program.  Every driver failure becomes a
 * status and a message naming the call, the kernel where there is one, and the
 * driver's error name and text.
 *
 * Faults.  An illegal address or a failed launch leaves the context unusable
 * ("sticky" errors): every later call on it fails.  So that the host program
 * can keep using kjit, such an error resets the primary context at once
 * (cuDevicePrimaryCtxReset) and bumps the device's generation; the next call
 * retains a fresh context.  Some drivers (580 on the H100 machine) keep the
 * device poisoned for the process even after the reset: then every later cuda
 * call returns KJIT_ERROR_CUDA saying so, and the process goes on with the
 * cpu targets.  Everything that lived in the old context is gone:
 * modules, streams and events remember the generation they were made in and
 * report a clear error if used afterwards (the caller loads the module again),
 * and device memory allocated before the fault is released by the reset
 * (freeing it afterwards is accepted and does nothing).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

/* cuda.h's values for the few enums used here. */
enum {
    CU_SUCCESS = 0,
    CU_ERROR_INVALID_VALUE = 1,
    CU_ERROR_OUT_OF_MEMORY = 2,
    CU_ERROR_NOT_FOUND = 500,
    CU_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 95,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_JIT_INFO_LOG_BUFFER = 3,
    CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
    CU_JIT_INPUT_PTX = 1,
    CU_EVENT_DEFAULT = 0,
    CU_EVENT_DISABLE_TIMING = 2,
    CU_STREAM_DEFAULT = 0,
};

/* cuLaunchKernel's `extra` keys (cuda.h's CU_LAUNCH_PARAM_*) */
#define CU_LAUNCH_PARAM_END ((void *)0x00)
#define CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

#define MAX_DEVICES 64
#define JIT_LOG_SIZE 16384

/*
 * An elementwise launch uses at most this many grids' worth of fully occupied
 * multiprocessors; beyond that the kernel's grid-stride loop takes over, which
 * keeps block scheduling cheap at 1e8 elements.  KJIT_CUDA_WAVES overrides it
 * (the GPU benchmark uses that to compare settings).
 */
#define ELEMENTWISE_WAVES 8

static int64_t elementwise_waves(void)
{
    const char *env = getenv("KJIT_CUDA_WAVES");
    long waves = env ? strtol(env, NULL, 10) : 0;
    return waves > 0 ? waves : ELEMENTWISE_WAVES;
}

/* KJIT_CUDA_BLOCK, when set, replaces the occupancy calculator's block size
 * for elementwise launches (for comparing settings, as KJIT_CUDA_WAVES). */
static int elementwise_block_override(void)
{
    const char *env = getenv("KJIT_CUDA_BLOCK");
    long block = env ? strtol(env, NULL, 10) : 0;
    return block >= 32 && block <= 1024 ? (int)block : 0;
}

/* Per device, shared by every KjCuda open on it. */
typedef struct DeviceState {
    pthread_mutex_t lock;
    /* context and generation change under the lock but are read without it
     * (atomically), so that a launch takes no lock. */
    void *context;       /* the retained primary context; NULL: retain on next use */
    int open_count;      /* KjCuda handles open on this device */
    unsigned generation; /* bumped by every reset after a fault */
    char last_kernel[128]; /* the last kernel launched: faults surface later */
} DeviceState;

static DeviceState device_states[MAX_DEVICES];
static pthread_once_t device_states_once = PTHREAD_ONCE_INIT;

struct KjCuda {
    const KjCuDriver *cu;
    int ordinal;
    int device; /* CUdevice */
    DeviceState *state;
    int multiprocessors;
    char arch[16];
    /* a vectorized call's parameters as one packed buffer (`extra`), not a
     * pointer each (KJIT_CUDA_PARAMS, read when the handle is opened) */
    bool packs_params;
    /* kj_cuda_map_host: the host memory mapped, its device address, and the
     * context generation the mapping belongs to */
    void *mapped_host;
    size_t mapped_bytes;
    uint64_t mapped_device;
    unsigned mapped_generation;
};

typedef struct KjCudaKernel {
    struct KjCudaModule *module;
    void *function;    /* CUfunction */
    int block;         /* elementwise block size; 0 until first used */
    int64_t max_grid;  /* elementwise grid cap */
    size_t dynamic_allowed; /* dynamic shared bytes the kernel was allowed above 48 KiB */
} KjCudaKernel;

struct KjCudaModule {
    KjCuda *cuda;
    void *module; /* CUmodule */
    unsigned generation;
    KjCudaKernel **kernels;
    int kernel_count;
    /* syncgrid()'s counter is one global of the module (runtime_cuda.c in the
     * back end), so two cooperative launches of its kernels must not overlap:
     * the last one's completion event and stream, which a launch on another
     * stream waits for. */
    void *grid_done;   /* CUevent, made at the first cooperative launch */
    void *grid_stream; /* the stream it was recorded on */
};

struct KjCudaStream {
    void *stream;
    unsigned generation;
    bool borrowed; /* made elsewhere (kj_cuda_stream_wrap): never destroyed here */
};

struct KjCudaEvent {
    void *event;
    unsigned generation;
};

/* ================================================================ errors */

static char *format_heap(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    KjBuf buf = {0};
    kj_buf_vprintf(&buf, fmt, ap);
    va_end(ap);
    return buf.data;
}

static void set_error(char **error, char *message)
{
    if (error) {
        free(*error);
        *error = message;
    } else {
        free(message);
    }
}

/* KJIT_CUDA_PARAMS: "buffer" (the default) passes a vectorized call's
 * parameters to cuLaunchKernel as one packed buffer in `extra`, "pointers"
 * as kernelParams, a pointer to each (the form before; tests/cuda_host/
 * stream_diag.c times both).  Anything else is refused. */
static kjit_status params_form(bool *packs, char **error)
{
    const char *env = getenv("KJIT_CUDA_PARAMS");
    *packs = !env || !*env || strcmp(env, "buffer") == 0;
    if (*packs || strcmp(env, "pointers") == 0)
        return KJIT_OK;
    set_error(error, format_heap("KJIT_CUDA_PARAMS='%s' is neither 'buffer' nor 'pointers'",
                                 env));
    return KJIT_ERROR_INVALID_ARGUMENT;
}

/* The errors after which the context accepts no more work. */
static bool is_sticky(KjCuResult result)
{
    switch (result) {
    case 214: /* ECC_UNCORRECTABLE */
    case 700: /* ILLEGAL_ADDRESS */
    case 702: /* LAUNCH_TIMEOUT */
    case 710: /* ASSERT */
    case 714: /* HARDWARE_STACK_ERROR */
    case 715: /* ILLEGAL_INSTRUCTION */
    case 716: /* MISALIGNED_ADDRESS */
    case 717: /* INVALID_ADDRESS_SPACE */
    case 718: /* INVALID_PC */
    case 719: /* LAUNCH_FAILED */
    case 721: /* TENSOR_MEMORY_LEAK */
        return true;
    default:
        return false;
    }
}

/* Destroys the device's primary context (the caller holds state->lock); the
 * next call retains a fresh one.  The faulted context is made current on no
 * thread of ours first, so nothing refers to it while it goes. */
static KjCuResult reset_locked(KjCuda *cuda)
{
    DeviceState *state = cuda->state;
    cuda->cu->CtxSetCurrent(NULL);
    KjCuResult result = cuda->cu->DevicePrimaryCtxReset(cuda->device);
    __atomic_store_n(&state->context, NULL, __ATOMIC_RELEASE);
    __atomic_add_fetch(&state->generation, 1, __ATOMIC_RELEASE);
    return result;
}

static void reset_after_fault(KjCuda *cuda)
{
    DeviceState *state = cuda->state;
    pthread_mutex_lock(&state->lock);
    if (state->context)
        reset_locked(cuda);
    pthread_mutex_unlock(&state->lock);
}

/*
 * Turns a driver result into a status and message:
 * "<call> failed [for kernel 'k']: CUDA_ERROR_X (text)".
 */
static kjit_status fail(KjCuda *cuda, KjCuResult result, const char *call, const char *kernel,
                        char **error)
{
    char text[320];
    kj_cuda_result_text(result, text, sizeof text);
    KjBuf buf = {0};
    kj_buf_printf(&buf, "%s failed", call);
    if (kernel)
        kj_buf_printf(&buf, " for kernel '%s'", kernel);
    kj_buf_printf(&buf, ": %s", text);
    if (cuda && is_sticky(result)) {
        /* A fault is reported by whichever call comes after the kernel that
         * caused it: name that kernel too. */
        if (!kernel && cuda->state->last_kernel[0])
            kj_buf_printf(&buf, " (after launching kernel '%s')", cuda->state->last_kernel);
        kj_buf_printf(&buf, "; the GPU context was reset: modules, streams and device "
                            "arrays made before this fault are gone");
        reset_after_fault(cuda);
    }
    set_error(error, buf.data);
    return result == CU_ERROR_OUT_OF_MEMORY ? KJIT_ERROR_OUT_OF_MEMORY : KJIT_ERROR_CUDA;
}

static kjit_status stale(const char *what, char **error)
{
    set_error(error, format_heap("this %s was made before a GPU fault reset the context; "
                                 "make it again (modules: compile or load them again)",
                                 what));
    return KJIT_ERROR_CUDA;
}

/* ================================================================ devices */

static void device_states_init(void)
{
    for (int i = 0; i < MAX_DEVICES; i++)
        pthread_mutex_init(&device_states[i].lock, NULL);
}

/* Makes this device's primary context current on the calling thread,
 * retaining a fresh one after a reset.  Every call and launch comes here, so
 * when the thread's current context is ours already (as it is from the
 * second call of a thread on, unless other code made another current in
 * between) the driver is only asked which is current: cuCtxGetCurrent reads
 * the thread's own state, and cuCtxSetCurrent to the context already
 * current would change nothing.  The driver is asked each time rather than
 * remembered here, because CUDA runtime code in the same program (CuPy,
 * PyTorch) may make another device's context current between our calls. */
static kjit_status make_current(KjCuda *cuda, char **error)
{
    DeviceState *state = cuda->state;
    KjCuResult result = CU_SUCCESS;
    void *context = __atomic_load_n(&state->context, __ATOMIC_ACQUIRE);
    if (context) {
        void *current = NULL;
        if (cuda->cu->CtxGetCurrent(&current) == CU_SUCCESS && current == context)
            return KJIT_OK;
    } else {
        pthread_mutex_lock(&state->lock);
        context = state->context;
        if (!context) {
            result = cuda->cu->DevicePrimaryCtxRetain(&context, cuda->device);
            /* A fault another handle saw may still hold the device: reset once more. */
            if (is_sticky(result)) {
                reset_locked(cuda);
                result = cuda->cu->DevicePrimaryCtxRetain(&context, cuda->device);
            }
            if (result != CU_SUCCESS)
                context = NULL;
            __atomic_store_n(&state->context, context, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&state->lock);
    }
    if (is_sticky(result)) {
        /* Seen with driver 580 after an illegal address: the reset succeeds
         * but the device stays poisoned for this process. */
        char text[320];
        set_error(error, format_heap("the GPU cannot be used again by this process after the "
                                     "fault in kernel '%s': the driver still reports %s after "
                                     "a context reset (the cpu targets still work; restart "
                                     "the process to use the GPU)",
                                     state->last_kernel[0] ? state->last_kernel : "?",
                                     kj_cuda_result_text(result, text, sizeof text)));
        return KJIT_ERROR_CUDA;
    }
    if (result != CU_SUCCESS)
        return fail(cuda, result, "cuDevicePrimaryCtxRetain", NULL, error);
    result = cuda->cu->CtxSetCurrent(context);
    if (result != CU_SUCCESS)
        return fail(cuda, result, "cuCtxSetCurrent", NULL, error);
    return KJIT_OK;
}

static unsigned current_generation(KjCuda *cuda)
{
    return __atomic_load_n(&cuda->state->generation, __ATOMIC_ACQUIRE);
}

kjit_status kj_cuda_probe(char **error)
{
    return kj_cuda_driver(error) ? KJIT_OK : KJIT_ERROR_NO_DEVICE;
}

/* KJIT_DEVICE, when set, picks the device for callers that asked for -1. */
static int default_device(void)
{
    const char *env = getenv("KJIT_DEVICE");
    if (env && *env) {
        char *end;
        long value = strtol(env, &end, 10);
        if (*end == '\0' && value >= 0 && value < MAX_DEVICES)
            return (int)value;
        return -2; /* reported by the caller */
    }
    return 0;
}

kjit_status kj_cuda_open(int device, KjCuda **out, char **error)
{
    *out = NULL;
    const KjCuDriver *cu = kj_cuda_driver(error);
    if (!cu)
        return KJIT_ERROR_NO_DEVICE;
    pthread_once(&device_states_once, device_states_init);
    if (device < 0) {
        device = default_device();
        if (device == -2) {
            set_error(error, format_heap("KJIT_DEVICE='%s' is not a device number",
                                         getenv("KJIT_DEVICE")));
            return KJIT_ERROR_INVALID_ARGUMENT;
        }
    }
    int count = 0;
    cu->DeviceGetCount(&count);
    if (device >= count || device >= MAX_DEVICES) {
        set_error(error, format_heap("there is no CUDA device %d (this machine has %d)",
                                     device, count));
        return KJIT_ERROR_NO_DEVICE;
    }
    bool packs = true;
    kjit_status form = params_form(&packs, error);
    if (form != KJIT_OK)
        return form;
    KjCuda *cuda = kj_xcalloc(1, sizeof *cuda);
    cuda->packs_params = packs;
    cuda->cu = cu;
    cuda->ordinal = device;
    cuda->state = &device_states[device];
    KjCuResult result = cu->DeviceGet(&cuda->device, device);
    int major = 0, minor = 0;
    if (result == CU_SUCCESS)
        result = cu->DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                        cuda->device);
    if (result == CU_SUCCESS)
        result = cu->DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                        cuda->device);
    if (result == CU_SUCCESS)
        result = cu->DeviceGetAttribute(&cuda->multiprocessors,
                                        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, cuda->device);
    if (result != CU_SUCCESS) {
        kjit_status status = fail(NULL, result, "querying the CUDA device", NULL, error);
        free(cuda);
        return status;
    }
    snprintf(cuda->arch, sizeof cuda->arch, "sm_%d%d", major, minor);

    pthread_mutex_lock(&cuda->state->lock);
    cuda->state->open_count++;
    pthread_mutex_unlock(&cuda->state->lock);
    kjit_status status = make_current(cuda, error);
    if (status != KJIT_OK) {
        kj_cuda_close(cuda);
        return status;
    }
    *out = cuda;
    return KJIT_OK;
}

void kj_cuda_close(KjCuda *cuda)
{
    if (!cuda)
        return;
    DeviceState *state = cuda->state;
    if (cuda->mapped_host && cuda->mapped_generation == current_generation(cuda) &&
        make_current(cuda, NULL) == KJIT_OK)
        cuda->cu->MemHostUnregister(cuda->mapped_host);
    pthread_mutex_lock(&state->lock);
    if (--state->open_count == 0 && state->context) {
        cuda->cu->DevicePrimaryCtxRelease(cuda->device);
        __atomic_store_n(&state->context, NULL, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&state->lock);
    free(cuda);
}

const char *kj_cuda_arch(KjCuda *cuda)
{
    return cuda->arch;
}

static KjCuResult device_info(const KjCuDriver *cu, int ordinal, kjit_device_info *info)
{
    memset(info, 0, sizeof *info);
    int device;
    KjCuResult result = cu->DeviceGet(&device, ordinal);
    if (result == CU_SUCCESS)
        result = cu->DeviceGetName(info->name, (int)sizeof info->name, device);
    if (result == CU_SUCCESS)
        result = cu->DeviceGetAttribute(&info->compute_major,
                                        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    if (result == CU_SUCCESS)
        result = cu->DeviceGetAttribute(&info->compute_minor,
                                        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    if (result == CU_SUCCESS)
        result = cu->DeviceGetAttribute(&info->multiprocessors,
                                        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
    if (result == CU_SUCCESS)
        result = cu->DeviceTotalMem(&info->total_memory, device);
    if (result == CU_SUCCESS)
        result = cu->DriverGetVersion(&info->driver_version);
    return result;
}

kjit_status kj_cuda_info(KjCuda *cuda, kjit_device_info *info)
{
    return device_info(cuda->cu, cuda->ordinal, info) == CU_SUCCESS ? KJIT_OK
                                                                     : KJIT_ERROR_CUDA;
}

/* ---------------------------------------------------- the public device calls */

kjit_status kjit_cuda_available(char *reason, size_t reason_size)
{
    char *error = NULL;
    kjit_status status = kj_cuda_probe(&error);
    if (reason && reason_size > 0)
        snprintf(reason, reason_size, "%s", status == KJIT_OK ? "" : error);
    free(error);
    return status;
}

kjit_status kjit_cuda_device_info(int device, kjit_device_info *info)
{
    if (!info)
        return KJIT_ERROR_INVALID_ARGUMENT;
    const KjCuDriver *cu = kj_cuda_driver(NULL);
    if (!cu)
        return KJIT_ERROR_NO_DEVICE;
    if (device < 0 || device >= kjit_cuda_device_count())
        return KJIT_ERROR_INVALID_ARGUMENT;
    return device_info(cu, device, info) == CU_SUCCESS ? KJIT_OK : KJIT_ERROR_CUDA;
}

int kjit_cuda_device_count(void)
{
    const KjCuDriver *cu = kj_cuda_driver(NULL);
    int count = 0;
    if (cu && cu->DeviceGetCount(&count) != CU_SUCCESS)
        count = 0;
    return count;
}

/* ================================================================ modules */

kjit_status kj_cuda_load_cubin(KjCuda *cuda, const void *cubin, size_t size,
                               KjCudaModule **out, char **error)
{
    *out = NULL;
    kjit_status status = make_current(cuda, error);
    if (status != KJIT_OK)
        return status;
    unsigned generation = current_generation(cuda);
    void *handle = NULL;
    KjCuResult result = cuda->cu->ModuleLoadDataEx(&handle, cubin, 0, NULL, NULL);
    if (result != CU_SUCCESS)
        return fail(cuda, result, "cuModuleLoadDataEx", NULL, error);
    KjCudaModule *module = kj_xcalloc(1, sizeof *module);
    module->cuda = cuda;
    module->module = handle;
    module->generation = generation;
    *out = module;
    return KJIT_OK;
}

/* The driver's logs are NUL-terminated within their buffers; keep the tail
 * clean of the trailing newline the JIT tends to add. */
static void append_log(KjBuf *buf, const char *label, const char *log)
{
    size_t len = strnlen(log, JIT_LOG_SIZE);
    while (len > 0 && (log[len - 1] == '\n' || log[len - 1] == '\r'))
        len--;
    if (len > 0)
        kj_buf_printf(buf, "\n%s:\n%.*s", label, (int)len, log);
}

kjit_status kj_cuda_load_ptx(KjCuda *cuda, const char *ptx, KjCudaModule **out,
                             void **cubin_out, size_t *cubin_size, char **error)
{
    *out = NULL;
    if (cubin_out)
        *cubin_out = NULL;
    kjit_status status = make_current(cuda, error);
    if (status != KJIT_OK)
        return status;

    char *info_log = kj_xcalloc(1, JIT_LOG_SIZE);
    char *error_log = kj_xcalloc(1, JIT_LOG_SIZE);
    int options[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                     CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {info_log, (void *)(uintptr_t)(JIT_LOG_SIZE - 1), error_log,
                      (void *)(uintptr_t)(JIT_LOG_SIZE - 1)};
    void *link = NULL;
    const char *call = "cuLinkCreate";
    KjCuResult result = cuda->cu->LinkCreate(4, options, values, &link);
    void *cubin = NULL;
    size_t size = 0;
    if (result == CU_SUCCESS) {
        call = "the PTX JIT (cuLinkAddData)";
        result = cuda->cu->LinkAddData(link, CU_JIT_INPUT_PTX, (void *)ptx, strlen(ptx) + 1,
                                       "kjit.ptx", 0, NULL, NULL);
    }
    if (result == CU_SUCCESS) {
        call = "cuLinkComplete";
        result = cuda->cu->LinkComplete(link, &cubin, &size);
    }
    if (result != CU_SUCCESS) {
        fail(cuda, result, call, NULL, error);
        KjBuf buf = {0};
        kj_buf_printf(&buf, "%s", error && *error ? *error : "");
        append_log(&buf, "JIT error log", error_log);
        append_log(&buf, "JIT info log", info_log);
        set_error(error, buf.data);
        if (link)
            cuda->cu->LinkDestroy(link);
        free(info_log);
        free(error_log);
        return KJIT_ERROR_CUDA;
    }
    free(info_log);
    free(error_log);

    /* The cubin belongs to the link state: load (and copy) it before destroying that. */
    status = kj_cuda_load_cubin(cuda, cubin, size, out, error);
    if (status == KJIT_OK && cubin_out) {
        *cubin_out = kj_xmalloc(size);
        memcpy(*cubin_out, cubin, size);
        *cubin_size = size;
    }
    cuda->cu->LinkDestroy(link);
    return status;
}

void kj_cuda_module_free(KjCudaModule *module)
{
    if (!module)
        return;
    KjCuda *cuda = module->cuda;
    /* A module of a reset context died with it; only unload live ones. */
    if (module->generation == current_generation(cuda) && make_current(cuda, NULL) == KJIT_OK)
    {
        cuda->cu->ModuleUnload(module->module);
        if (module->grid_done)
            cuda->cu->EventDestroy(module->grid_done);
    }
    for (int i = 0; i < module->kernel_count; i++)
        free(module->kernels[i]);
    free(module->kernels);
    free(module);
}

kjit_status kj_cuda_function(KjCudaModule *module, const char *symbol, void **function,
                             char **error)
{
    *function = NULL;
    KjCuda *cuda = module->cuda;
    if (module->generation != current_generation(cuda))
        return stale("CUDA module", error);
    void *handle = NULL;
    KjCuResult result = cuda->cu->ModuleGetFunction(&handle, module->module, symbol);
    if (result == CU_ERROR_NOT_FOUND) {
        set_error(error, format_heap("the CUDA module has no kernel '%s'", symbol));
        return KJIT_ERROR_NOT_FOUND;
    }
    if (result != CU_SUCCESS)
        return fail(cuda, result, "cuModuleGetFunction", symbol, error);
    KjCudaKernel *kernel = kj_xcalloc(1, sizeof *kernel);
    kernel->module = module;
    kernel->function = handle;
    module->kernels = kj_xrealloc(module->kernels,
                                  (size_t)(module->kernel_count + 1) * sizeof *module->kernels);
    module->kernels[module->kernel_count++] = kernel;
    *function = kernel;
    return KJIT_OK;
}

/* =============================================================== launches */

static void remember_kernel(KjCuda *cuda, const char *name)
{
    /* Written without the lock: it only labels a later error message.  (Not
     * snprintf: this is on every launch's path.) */
    char *last = cuda->state->last_kernel;
    size_t length = name ? strnlen(name, sizeof cuda->state->last_kernel - 1) : 0;
    memcpy(last, name ? name : "", length);
    last[length] = '\0';
}

static kjit_status check_kernel(KjCuda *cuda, KjCudaKernel *kernel, KjCudaStream *stream,
                                char **error)
{
    unsigned generation = current_generation(cuda);
    if (kernel->module->generation != generation)
        return stale("CUDA module", error);
    if (stream && stream->generation != generation)
        return stale("stream", error);
    return make_current(cuda, error);
}

/* Dynamic shared memory above the 48 KiB every kernel may have must be
 * allowed per kernel, up to what the device lets a block opt in to. */
static kjit_status allow_dynamic_shared(KjCuda *cuda, KjCudaKernel *kernel, const char *name,
                                        size_t bytes, char **error)
{
    if (bytes <= 48 * 1024 || bytes <= kernel->dynamic_allowed)
        return KJIT_OK;
    int optin = 0, static_bytes = 0;
    KjCuResult result = cuda->cu->DeviceGetAttribute(
        &optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, cuda->device);
    if (result == CU_SUCCESS)
        result = cuda->cu->FuncGetAttribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                                            kernel->function);
    if (result != CU_SUCCESS)
        return fail(cuda, result, "cuFuncGetAttribute", name, error);
    if ((uint64_t)bytes + (uint64_t)static_bytes > (uint64_t)optin) {
        set_error(error, format_heap("kernel '%s': %zu bytes of dynamic shared memory and its "
                                     "%d static bytes exceed the %d bytes a block may have on "
                                     "this GPU", name, bytes, static_bytes, optin));
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    result = cuda->cu->FuncSetAttribute(kernel->function,
                                        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes);
    if (result != CU_SUCCESS)
        return fail(cuda, result, "cuFuncSetAttribute", name, error);
    kernel->dynamic_allowed = bytes;
    return KJIT_OK;
}

/* Whether every block of a cooperative launch can be resident at once (the
 * driver refuses the launch otherwise): the occupancy calculator's blocks per
 * multiprocessor for this block size and shared memory, times the
 * multiprocessors. */
static kjit_status check_cooperative(KjCuda *cuda, KjCudaKernel *kernel, const char *name,
                                     const uint32_t grid[3], const uint32_t block[3],
                                     size_t shared_bytes, char **error)
{
    int supported = 0;
    KjCuResult result = cuda->cu->DeviceGetAttribute(
        &supported, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, cuda->device);
    if (result != CU_SUCCESS)
        return fail(cuda, result, "cuDeviceGetAttribute", name, error);
    if (!supported) {
        set_error(error, format_heap("kernel '%s' calls syncgrid(), which needs a cooperative "
                                     "launch, and this GPU does not support one", name));
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    int threads = (int)(block[0] * block[1] * block[2]), per_sm = 0;
    result = cuda->cu->OccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel->function,
                                                                 threads, shared_bytes);
    if (result != CU_SUCCESS)
        return fail(cuda, result, "cuOccupancyMaxActiveBlocksPerMultiprocessor", name, error);
    uint64_t blocks = (uint64_t)grid[0] * grid[1] * grid[2];
    uint64_t most = (uint64_t)per_sm * (uint64_t)cuda->multiprocessors;
    if (blocks > most) {
        set_error(error, format_heap(
            "kernel '%s' calls syncgrid(), so every block of its grid must be resident on the "
            "GPU at once: a grid of %llu blocks of %d threads is too large; at most %llu fit "
            "(%d per multiprocessor x %d multiprocessors, with %zu bytes of dynamic shared "
            "memory)", name, (unsigned long long)blocks, threads, (unsigned long long)most,
            per_sm, cuda->multiprocessors, shared_bytes));
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    return KJIT_OK;
}

kjit_status kj_cuda_launch_ex(KjCuda *cuda, void *function, const char *kernel_name,
                              const uint32_t grid[3], const uint32_t block[3],
                              size_t dynamic_shared_bytes, bool cooperative, void **params,
                              KjCudaStream *stream, char **error)
{
    KjCudaKernel *kernel = function;
    kjit_status status = check_kernel(cuda, kernel, stream, error);
    if (status != KJIT_OK)
        return status;
    if ((uint64_t)grid[0] * grid[1] * grid[2] == 0 || (uint64_t)block[0] * block[1] * block[2] == 0)
        return KJIT_OK; /* an empty grid runs nothing, as in CUDA C */
    if (dynamic_shared_bytes > UINT32_MAX) {
        set_error(error, format_heap("kernel '%s': %zu bytes of dynamic shared memory is too "
                                     "many", kernel_name, dynamic_shared_bytes));
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    status = allow_dynamic_shared(cuda, kernel, kernel_name, dynamic_shared_bytes, error);
    if (status == KJIT_OK && cooperative)
        status = check_cooperative(cuda, kernel, kernel_name, grid, block, dynamic_shared_bytes,
                                   error);
    if (status != KJIT_OK)
        return status;
    remember_kernel(cuda, kernel_name);
    void *on = stream ? stream->stream : NULL;
    unsigned shared = (unsigned)dynamic_shared_bytes;
    KjCudaModule *module = kernel->module;
    KjCuResult result = CU_SUCCESS;
    if (cooperative && module->grid_done && module->grid_stream != on)
        result = cuda->cu->StreamWaitEvent(on, module->grid_done, 0);
    if (cooperative && !module->grid_done && result == CU_SUCCESS)
        result = cuda->cu->EventCreate(&module->grid_done, CU_EVENT_DISABLE_TIMING);
    if (result != CU_SUCCESS)
        return fail(cuda, result, "ordering the cooperative launch", kernel_name, error);
    result =
        cooperative
            ? cuda->cu->LaunchCooperativeKernel(kernel->function, grid[0], grid[1], grid[2],
                                                block[0], block[1], block[2], shared, on, params)
            : cuda->cu->LaunchKernel(kernel->function, grid[0], grid[1], grid[2], block[0],
                                     block[1], block[2], shared, on, params, NULL);
    if (result == CU_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) {
        set_error(error, format_heap("kernel '%s' calls syncgrid(), so every block of its grid "
                                     "must be resident on the GPU at once, and the driver says "
                                     "%u blocks of %u threads do not fit "
                                     "(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)", kernel_name,
                                     grid[0] * grid[1] * grid[2], block[0] * block[1] * block[2]));
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    if (result != CU_SUCCESS)
        return fail(cuda, result, cooperative ? "cuLaunchCooperativeKernel" : "cuLaunchKernel",
                    kernel_name, error);
    if (cooperative) {
        result = cuda->cu->EventRecord(module->grid_done, on);
        if (result != CU_SUCCESS)
            return fail(cuda, result, "cuEventRecord", kernel_name, error);
        module->grid_stream = on;
    }
    return KJIT_OK;
}

bool kj_cuda_packs_params(const KjCuda *cuda)
{
    return cuda->packs_params;
}

kjit_status kj_cuda_launch_elementwise(KjCuda *cuda, void *function, const char *kernel_name,
                                       int64_t n, void **params, const void *packed,
                                       size_t packed_bytes, KjCudaStream *stream, char **error)
{
    KjCudaKernel *kernel = function;
    kjit_status status = check_kernel(cuda, kernel, stream, error);
    if (status != KJIT_OK)
        return status;
    if (n <= 0)
        return KJIT_OK;
    if (kernel->block == 0) {
        /* The block size that reaches the best occupancy for this kernel's
         * registers; min_grid is the block count that fills every SM once. */
        int min_grid = 0, block = 0;
        double span = kj_trace_now();
        KjCuResult result = cuda->cu->OccupancyMaxPotentialBlockSize(
            &min_grid, &block, kernel->function, NULL, 0, 0);
        kj_trace("kernel's first launch: cuOccupancyMaxPotentialBlockSize", span);
        if (result != CU_SUCCESS)
            return fail(cuda, result, "cuOccupancyMaxPotentialBlockSize", kernel_name, error);
        if (block <= 0)
            block = 256;
        int forced = elementwise_block_override();
        if (forced) {
            /* min_grid was counted in blocks of the calculator's size. */
            min_grid = (int)((int64_t)min_grid * block / forced);
            block = forced;
        }
        if (min_grid <= 0)
            min_grid = cuda->multiprocessors;
        kernel->max_grid = (int64_t)min_grid * elementwise_waves();
        if (kernel->max_grid > INT32_MAX)
            kernel->max_grid = INT32_MAX;
        kernel->block = block;
    }
    int64_t blocks = (n + kernel->block - 1) / kernel->block;
    if (blocks > kernel->max_grid)
        blocks = kernel->max_grid;
    remember_kernel(cuda, kernel_name);
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                     &packed_bytes, CU_LAUNCH_PARAM_END};
    KjCuResult result = cuda->cu->LaunchKernel(kernel->function, (unsigned)blocks, 1, 1,
                                               (unsigned)kernel->block, 1, 1, 0,
                                               stream ? stream->stream : NULL,
                                               packed ? NULL : params, packed ? extra : NULL);
    if (result != CU_SUCCESS)
        return fail(cuda, result, "cuLaunchKernel", kernel_name, error);
    return KJIT_OK;
}

/* ================================================================= memory */

kjit_status kj_cuda_alloc(KjCuda *cuda, size_t bytes, void **device_ptr, char **error)
{
    *device_ptr = NULL;
    kjit_status status = make_current(cuda, error);
    if (status != KJIT_OK)
        return status;
    KjCuDevicePtr ptr = 0;
    /* cuMemAlloc rejects 0 bytes; one byte keeps the pointer distinct and freeable. */
    KjCuResult result = cuda->cu->MemAlloc(&ptr, bytes ? bytes : 1);
    if (result != CU_SUCCESS) {
        status = fail(cuda, result, "cuMemAlloc", NULL, error);
        if (status == KJIT_ERROR_OUT_OF_MEMORY)
            set_error(error, format_heap("out of GPU memory: cuMemAlloc of %zu bytes failed "
                                         "(%s)", bytes, *error));
        return status;
    }
    *device_ptr = (void *)(uintptr_t)ptr;
    return KJIT_OK;
}

/* cuMemHostRegister's flags: usable from every context, mapped into the
 * device's address space. */
#define CU_MEMHOSTREGISTER_PORTABLE 0x01
#define CU_MEMHOSTREGISTER_DEVICEMAP 0x02
#define CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712

kjit_status kj_cuda_map_host(KjCuda *cuda, void *host, size_t bytes, uint64_t *device,
                             char **error)
{
    kjit_status status = make_current(cuda, error);
    if (status != KJIT_OK)
        return status;
    unsigned generation = current_generation(cuda);
    if (cuda->mapped_host == host && cuda->mapped_generation == generation) {
        *device = cuda->mapped_device;
        return KJIT_OK;
    }
    if (cuda->mapped_host && cuda->mapped_host != host) {
        set_error(error, format_heap("kj_cuda_map_host: one mapping per device handle"));
        return KJIT_ERROR_BACKEND;
    }
    /* a mapping of an older generation went with its context */
    KjCuResult result = cuda->cu->MemHostRegister(host, bytes, CU_MEMHOSTREGISTER_PORTABLE |
                                                                   CU_MEMHOSTREGISTER_DEVICEMAP);
    if (result != CU_SUCCESS && result != CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
        return fail(cuda, result, "cuMemHostRegister", NULL, error);
    KjCuDevicePtr address = 0;
    result = cuda->cu->MemHostGetDevicePointer(&address, host, 0);
    if (result != CU_SUCCESS) {
        cuda->cu->MemHostUnregister(host);
        return fail(cuda, result, "cuMemHostGetDevicePointer", NULL, error);
    }
    cuda->mapped_host = host;
    cuda->mapped_bytes = bytes;
    cuda->mapped_device = address;
    cuda->mapped_generation = generation;
    *device = address;
    return KJIT_OK;
}

kjit_status kj_cuda_module_set_global(KjCudaModule *module, const char *name, const void *value,
                                      size_t bytes, char **error)
{
    KjCuda *cuda = module->cuda;
    if (module->generation != current_generation(cuda))
        return stale("CUDA module", error);
    kjit_status status = make_current(cuda, error);
    if (status != KJIT_OK)
        return status;
    KjCuDevicePtr address = 0;
    size_t size = 0;
    KjCuResult result = cuda->cu->ModuleGetGlobal(&address, &size, module->module, name);
    if (result == CU_ERROR_NOT_FOUND)
        return KJIT_ERROR_NOT_FOUND;
    if (result != CU_SUCCESS)
        return fail(cuda, result, "cuModuleGetGlobal", NULL, error);
    if (size != bytes) {
        set_error(error, format_heap("the CUDA module's global '%s' has %zu bytes, not %zu", name,
                                     size, bytes));
        return KJIT_ERROR_BACKEND;
    }
    result = cuda->cu->MemcpyHtoD(address, value, bytes);
    if (result != CU_SUCCESS)
        return fail(cuda, result, "cuMemcpyHtoD", NULL, error);
    return KJIT_OK;
}

kjit_status kj_cuda_free(KjCuda *cuda, void *device_ptr, char **error)
{
    if (!device_ptr)
        return KJIT_OK;
    unsigned generation = current_generation(cuda);
    kjit_status status = make_current(cuda, error);
    if (status != KJIT_OK)
        return status;
    KjCuResult result = cuda->cu->MemFree((KjCuDevicePtr)(uintptr_t)device_ptr);
    /* After a reset the pointer may be one the reset already released. */
    if (result == CU_ERROR_INVALID_VALUE && generation > 0)
        return KJIT_OK;
    if (result != CU_SUCCESS)
        return fail(cuda, result, "cuMemFree", NULL, error);
    return KJIT_OK;
}

typedef enum { TO_DEVICE, TO_HOST, ON_DEVICE } CopyDirection;

/* One copy of `bytes`, on the stream when there is one; the three public
 * copies differ only in the driver call. */
static kjit_status copy_bytes(KjCuda *cuda, CopyDirection direction, void *dst, const void *src,
                              size_t bytes, KjCudaStream *stream, char **error)
{
    if (stream && stream->generation != current_generation(cuda))
        return stale("stream", error);
    kjit_status status = make_current(cuda, error);
    if (status != KJIT_OK || bytes == 0)
        return status;
    const KjCuDriver *cu = cuda->cu;
    void *on = stream ? stream->stream : NULL;
    KjCuDevicePtr to = (KjCuDevicePtr)(uintptr_t)dst, from = (KjCuDevicePtr)(uintptr_t)src;
    KjCuResult result;
    const char *call;
    switch (direction) {
    case TO_DEVICE:
        result = stream ? cu->MemcpyHtoDAsync(to, src, bytes, on) : cu->MemcpyHtoD(to, src, bytes);
        call = stream ? "cuMemcpyHtoDAsync" : "cuMemcpyHtoD";
        break;
    case TO_HOST:
        result = stream ? cu->MemcpyDtoHAsync(dst, from, bytes, on) : cu->MemcpyDtoH(dst, from, bytes);
        call = stream ? "cuMemcpyDtoHAsync" : "cuMemcpyDtoH";
        break;
    case ON_DEVICE:
        result = stream ? cu->MemcpyDtoDAsync(to, from, bytes, on) : cu->MemcpyDtoD(to, from, bytes);
        call = stream ? "cuMemcpyDtoDAsync" : "cuMemcpyDtoD";
        break;
    default:
        kj_unreachable();
    }
    return result == CU_SUCCESS ? KJIT_OK : fail(cuda, result, call, NULL, error);
}

kjit_status kj_cuda_copy_to_device(KjCuda *cuda, void *dst, const void *src, size_t bytes,
                                   KjCudaStream *stream, char **error)
{
    return copy_bytes(cuda, TO_DEVICE, dst, src, bytes, stream, error);
}

kjit_status kj_cuda_copy_to_host(KjCuda *cuda, void *dst, const void *src, size_t bytes,
                                 KjCudaStream *stream, char **error)
{
    return copy_bytes(cuda, TO_HOST, dst, src, bytes, stream, error);
}

kjit_status kj_cuda_copy_on_device(KjCuda *cuda, void *dst, const void *src, size_t bytes,
                                   KjCudaStream *stream, char **error)
{
    return copy_bytes(cuda, ON_DEVICE, dst, src, bytes, stream, error);
}

/* ======================================================= streams and events */

kjit_status kj_cuda_stream_create(KjCuda *cuda, KjCudaStream **out, char **error)
{
    *out = NULL;
    kjit_status status = make_current(cuda, error);
    if (status != KJIT_OK)
        return status;
    void *handle = NULL;
    /* A blocking stream: it orders itself after the synchronous copies kjit
     * makes on the default stream, so mixing the two stays correct. */
    KjCuResult result = cuda->cu->StreamCreate(&handle, CU_STREAM_DEFAULT);
    if (result != CU_SUCCESS)
        return fail(cuda, result, "cuStreamCreate", NULL, error);
    KjCudaStream *stream = kj_xcalloc(1, sizeof *stream);
    stream->stream = handle;
    stream->generation = current_generation(cuda);
    *out = stream;
    return KJIT_OK;
}

kjit_status kj_cuda_stream_sync(KjCuda *cuda, KjCudaStream *stream, char **error)
{
    if (stream && stream->generation != current_generation(cuda))
        return stale("stream", error);
    kjit_status status = make_current(cuda, error);
    if (status != KJIT_OK)
        return status;
    KjCuResult result = stream ? cuda->cu->StreamSynchronize(stream->stream)
                               : cuda->cu->CtxSynchronize();
    if (result != CU_SUCCESS)
        return fail(cuda, result, stream ? "cuStreamSynchronize" : "cuCtxSynchronize", NULL,
                    error);
    return KJIT_OK;
}

kjit_status kj_cuda_stream_wrap(KjCuda *cuda, void *handle, KjCudaStream **out, char **error)
{
    *out = NULL;
    kjit_status status = make_current(cuda, error);
    if (status != KJIT_OK)
        return status;
    KjCudaStream *stream = kj_xcalloc(1, sizeof *stream);
    stream->stream = handle;
    stream->generation = current_generation(cuda);
    stream->borrowed = true;
    *out = stream;
    return KJIT_OK;
}

void *kj_cuda_stream_handle(const KjCudaStream *stream)
{
    return stream ? stream->stream : NULL;
}

void kj_cuda_stream_destroy(KjCuda *cuda, KjCudaStream *stream)
{
    if (!stream)
        return;
    if (!stream->borrowed && stream->generation == current_generation(cuda) && make_current(cuda, NULL) == KJIT_OK)
        cuda->cu->StreamDestroy(stream->stream);
    free(stream);
}

kjit_status kj_cuda_event_record(KjCuda *cuda, KjCudaStream *stream, KjCudaEvent **out,
                                 char **error)
{
    *out = NULL;
    if (stream && stream->generation != current_generation(cuda))
        return stale("stream", error);
    kjit_status status = make_current(cuda, error);
    if (status != KJIT_OK)
        return status;
    void *handle = NULL;
    KjCuResult result = cuda->cu->EventCreate(&handle, CU_EVENT_DEFAULT);
    if (result != CU_SUCCESS)
        return fail(cuda, result, "cuEventCreate", NULL, error);
    result = cuda->cu->EventRecord(handle, stream ? stream->stream : NULL);
    if (result != CU_SUCCESS) {
        cuda->cu->EventDestroy(handle);
        return fail(cuda, result, "cuEventRecord", NULL, error);
    }
    KjCudaEvent *event = kj_xcalloc(1, sizeof *event);
    event->event = handle;
    event->generation = current_generation(cuda);
    *out = event;
    return KJIT_OK;
}

kjit_status kj_cuda_event_elapsed(KjCuda *cuda, KjCudaEvent *start, KjCudaEvent *end,
                                  double *ms, char **error)
{
    *ms = 0;
    unsigned generation = current_generation(cuda);
    if (start->generation != generation || end->generation != generation)
        return stale("event", error);
    kjit_status status = make_current(cuda, error);
    if (status != KJIT_OK)
        return status;
    KjCuResult result = cuda->cu->EventSynchronize(end->event);
    if (result != CU_SUCCESS)
        return fail(cuda, result, "cuEventSynchronize", NULL, error);
    float elapsed = 0;
    result = cuda->cu->EventElapsedTime(&elapsed, start->event, end->event);
    if (result != CU_SUCCESS)
        return fail(cuda, result, "cuEventElapsedTime", NULL, error);
    *ms = elapsed;
    return KJIT_OK;
}

void kj_cuda_event_destroy(KjCuda *cuda, KjCudaEvent *event)
{
    if (!event)
        return;
    if (event->generation == current_generation(cuda) && make_current(cuda, NULL) == KJIT_OK)
        cuda->cu->EventDestroy(event->event);
    free(event);
}

/* ====================================================== for cuda_peer.c */

const KjCuDriver *kj_cuda_table(const KjCuda *cuda)
{
    return cuda->cu;
}

int kj_cuda_ordinal(const KjCuda *cuda)
{
    return cuda->ordinal;
}

kjit_status kj_cuda_make_current(KjCuda *cuda, char **error)
{
    return make_current(cuda, error);
}

kjit_status kj_cuda_fail(KjCuda *cuda, KjCuResult result, const char *call, char **error)
{
    return fail(cuda, result, call, NULL, error);
}

bool kj_cuda_stream_stale(KjCuda *cuda, const KjCudaStream *stream)
{
    return stream && stream->generation != current_generation(cuda);
}
