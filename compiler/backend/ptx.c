/*
 * ptx.c: typed IR to PTX, through LLVM's NVPTX back end and libdevice.
 *
 * The shared lowering (codegen_llvm.c) builds the module for
 * nvptx64-nvidia-cuda: kernels with the PTX kernel calling convention, math
 * as calls to libdevice's __nv_* functions.  This file supplies the target
 * machine, links libdevice into the module before optimisation, keeping only
 * what the module calls, settles __nvvm_reflect (flush-to-zero off, the
 * device's own architecture), optimises, and emits PTX text.
 *
 * libdevice is found here; libdevice_split.c links it, reading lazily only
 * the bodies the module calls (each compilation has its own LLVM context, so
 * compilations on several threads never share one).
 */
#include <glob.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "codegen_llvm.h"

#define PTX_TRIPLE "nvptx64-nvidia-cuda"
#define DEFAULT_ARCH "sm_90"
/* The newest PTX ISA LLVM 19 writes; CUDA 12.5 and later drivers load it. */
#define PTX_FEATURES "+ptx85"
#define LIBDEVICE_NAME "libdevice.10.bc"

/* ============================================================= libdevice */

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Paths handed out by kj_find_libdevice live for the process: callers keep
 * the pointer, and the environment may name a different file later. */
static pthread_mutex_t libdevice_lock = PTHREAD_MUTEX_INITIALIZER;
typedef struct InternedPath {
    struct InternedPath *next;
    char path[];
} InternedPath;
static InternedPath *interned_paths;

static const char *intern_path(const char *path)
{
    pthread_mutex_lock(&libdevice_lock);
    InternedPath *p = interned_paths;
    while (p && strcmp(p->path, path) != 0)
        p = p->next;
    if (!p) {
        size_t len = strlen(path);
        p = kj_xmalloc(sizeof *p + len + 1);
        memcpy(p->path, path, len + 1);
        p->next = interned_paths;
        interned_paths = p;
    }
    pthread_mutex_unlock(&libdevice_lock);
    return p->path;
}

/* Tries <root>/nvvm/libdevice/libdevice.10.bc; notes the folder tried. */
static const char *try_cuda_root(const char *root, KjBuf *tried)
{
    if (!root || !*root)
        return NULL;
    KjBuf path = {0};
    kj_buf_printf(&path, "%s/nvvm/libdevice/" LIBDEVICE_NAME, root);
    const char *found = is_file(path.data) ? intern_path(path.data) : NULL;
    kj_buf_printf(tried, "\n  %s", path.data);
    kj_buf_free(&path);
    return found;
}

const char *kj_find_libdevice(char **error)
{
    KjBuf tried = {0};
    const char *found = NULL;

    /* An explicit choice is final: a wrong KJIT_LIBDEVICE is an error, not a
     * reason to pick some other libdevice silently. */
    const char *env = getenv("KJIT_LIBDEVICE");
    if (env && *env) {
        if (is_file(env))
            return intern_path(env);
        if (is_dir(env)) {
            KjBuf path = {0};
            kj_buf_printf(&path, "%s/" LIBDEVICE_NAME, env);
            if (is_file(path.data))
                found = intern_path(path.data);
            kj_buf_free(&path);
            if (found)
                return found;
        }
        if (error) {
            KjBuf buf = {0};
            kj_buf_printf(&buf, "libdevice not found: KJIT_LIBDEVICE=%s is neither "
                                "libdevice.10.bc nor a folder holding it", env);
            *error = buf.data;
        }
        return NULL;
    }

    const char *roots[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda",
                           "/opt/cuda", "/usr/lib/cuda"};
    for (size_t i = 0; !found && i < sizeof roots / sizeof roots[0]; i++)
        found = try_cuda_root(roots[i], &tried);

    /* Versioned installs (/usr/local/cuda-13.0) when no /usr/local/cuda link exists. */
    if (!found) {
        glob_t matches;
        if (glob("/usr/local/cuda-*/nvvm/libdevice/" LIBDEVICE_NAME, 0, NULL, &matches) == 0) {
            found = intern_path(matches.gl_pathv[matches.gl_pathc - 1]);
            globfree(&matches);
        }
        kj_buf_printf(&tried, "\n  /usr/local/cuda-*/nvvm/libdevice/" LIBDEVICE_NAME);
    }
    /* Debian's nvidia-cuda-toolkit package. */
    if (!found) {
        const char *debian = "/usr/lib/nvidia-cuda-toolkit/libdevice/" LIBDEVICE_NAME;
        if (is_file(debian))
            found = intern_path(debian);
        kj_buf_printf(&tried, "\n  %s", debian);
    }

    if (!found && error) {
        KjBuf buf = {0};
        kj_buf_printf(&buf, "libdevice not found (set KJIT_LIBDEVICE or CUDA_HOME); "
                            "kjit looked for:%s", tried.data);
        *error = buf.data;
    }
    kj_buf_free(&tried);
    return found;
}

static char *take_llvm_error(LLVMErrorRef err, const char *what)
{
    char *message = LLVMGetErrorMessage(err);
    KjBuf buf = {0};
    kj_buf_printf(&buf, "%s: %s", what, message);
    LLVMDisposeErrorMessage(message);
    return buf.data;
}

/*
 * libdevice keeps its rare slow paths (the Payne-Hanek reduction of sin and
 * cos for |x| >= 2^31, ...) out of line, as calls.  The driver's linker
 * compiles kjit's PTX as relocatable code, and there a kernel that calls a
 * function takes the callee's register count, which for
 * __internal_trig_reduction_slowpathd is 46: a sin kernel that needs 32 ran
 * at 62% occupancy and 12% slower than CUDA C.  Inlined, the slow path's
 * registers are allocated with the kernel's and the count stays at the
 * kernel's own.
 */
static void inline_libdevice(LLVMModuleRef mod)
{
    LLVMContextRef context = LLVMGetModuleContext(mod);
    unsigned noinline = LLVMGetEnumAttributeKindForName("noinline", 8);
    unsigned alwaysinline = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn)) {
        size_t len;
        const char *name = LLVMGetValueName2(fn, &len);
        if (LLVMIsDeclaration(fn) || LLVMGetLinkage(fn) != LLVMInternalLinkage ||
            strncmp(name, "__", 2) != 0)
            continue;
        LLVMRemoveEnumAttributeAtIndex(fn, LLVMAttributeFunctionIndex, noinline);
        if (!LLVMGetEnumAttributeAtIndex(fn, LLVMAttributeFunctionIndex, alwaysinline))
            LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                    LLVMCreateEnumAttribute(context, alwaysinline, 0));
    }
}

/* ======================================================== target machine */

/*
 * Multiply-adds are contracted into fma on the device, as nvcc does by
 * default (--fmad=true): CUDA C code kjit is measured against is built that
 * way, and without it Mandelbrot-like loops run a third slower.  The C API
 * has no target option for it, so it is set through the NVPTX back end's own
 * flag, which affects no other target.  Results may differ from the cpu
 * target's in the last bits.
 */
static void initialize_nvptx(void)
{
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    const char *const flags[] = {"kjit", "-nvptx-fma-level=2"};
    LLVMParseCommandLineOptions(2, flags, NULL);
}

/*
 * The architectures LLVM 19's NVPTX back end knows.  A newer device (sm_100
 * ...) gets sm_90 PTX, which its driver compiles forward; an unknown name
 * would otherwise make LLVM print a warning and emit generic code.
 */
static const char *const known_arches[] = {
    "sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75",
    "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a", NULL,
};

static const char *choose_arch(const char *requested, char **error)
{
    if (!requested || !*requested)
        return DEFAULT_ARCH;
    for (int i = 0; known_arches[i]; i++)
        if (strcmp(known_arches[i], requested) == 0)
            return known_arches[i];
    int number = 0;
    if (sscanf(requested, "sm_%d", &number) == 1 && number > 90)
        return DEFAULT_ARCH;
    KjBuf buf = {0};
    kj_buf_printf(&buf, "unknown CUDA architecture '%s' (expected sm_50 ... sm_90a)",
                  requested);
    *error = buf.data;
    return NULL;
}

static pthread_once_t nvptx_once = PTHREAD_ONCE_INIT;

/* ======================================================== groups joined */

static bool local_linkage(LLVMValueRef v)
{
    LLVMLinkage l = LLVMGetLinkage(v);
    return !LLVMIsDeclaration(v) && (l == LLVMInternalLinkage || l == LLVMPrivateLinkage);
}

static void suffix_name(LLVMValueRef v, const char *suffix)
{
    size_t len;
    const char *name = LLVMGetValueName2(v, &len);
    KjBuf b = {0};
    kj_buf_printf(&b, "%.*s%s", (int)len, name, suffix);
    LLVMSetValueName2(v, b.data, strlen(b.data));
    kj_buf_free(&b);
}

/* One group of a file compiled in groups (codegen_groups.c): its internal
 * functions and globals renamed, so that joined to the others' PTX no name
 * is defined twice in the module (PTX has no per-file names). */
static void suffix_locals(LLVMModuleRef mod, const char *suffix)
{
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn))
        if (local_linkage(fn))
            suffix_name(fn, suffix);
    for (LLVMValueRef gv = LLVMGetFirstGlobal(mod); gv; gv = LLVMGetNextGlobal(gv))
        if (local_linkage(gv))
            suffix_name(gv, suffix);
}

/* The end of a PTX text's header: just past its .address_size line, or NULL. */
static const char *header_end(const char *text)
{
    const char *at = strstr(text, "\n.address_size ");
    if (!at)
        return NULL;
    const char *eol = strchr(at + 1, '\n');
    return eol ? eol + 1 : NULL;
}

char *kj_ptx_join(char *const *texts, int count, char **error)
{
    const char *first = count > 0 ? header_end(texts[0]) : NULL;
    size_t header = first ? (size_t)(first - texts[0]) : 0;
    KjBuf out = {0};
    for (int i = 0; first && i < count; i++) {
        const char *body = header_end(texts[i]);
        if (!body || (size_t)(body - texts[i]) != header ||
            memcmp(texts[i], texts[0], header) != 0) {
            kj_buf_free(&out);
            first = NULL;
            break;
        }
        if (i == 0)
            kj_buf_printf(&out, "%.*s", (int)header, texts[0]);
        kj_buf_printf(&out, "%s", body);
    }
    if (!first) {
        if (error)
            *error = kj_xstrdup("joining the compiled groups' PTX: a group's header "
                                "(.version, .target, .address_size) differs from the first's");
        return NULL;
    }
    return out.data;
}

/* ============================================================== generate */

char *kj_ptx_emit(const KjTarget *cuda, KjIrModule *module, KjIrFunction **roots, int root_count,
                  const KjCodegenOptions *options, char **error)
{
    *error = NULL;
    const char *arch = choose_arch(options->cuda_arch, error);
    if (!arch)
        return NULL;
    const char *libdevice_path = options->libdevice_path;
    if (!libdevice_path && !(libdevice_path = kj_find_libdevice(error)))
        return NULL;

    pthread_once(&nvptx_once, initialize_nvptx);
    LLVMTargetRef target;
    char *message = NULL;
    if (LLVMGetTargetFromTriple(PTX_TRIPLE, &target, &message)) {
        KjBuf buf = {0};
        kj_buf_printf(&buf, "the NVPTX back end is missing from this LLVM: %s", message);
        LLVMDisposeMessage(message);
        *error = buf.data;
        return NULL;
    }
    int opt_level = options->opt_level;
    /* reduce.c's kernels: code generation at the default level too, whose
     * NVPTX passes clean up with early CSE where the aggressive one runs
     * GVN twice (9% of their code generation; ptxas optimises the PTX again) */
    bool lean = kj_codegen_lean_roots(roots, root_count, opt_level);
    LLVMCodeGenOptLevel codegen_level = opt_level <= 0            ? LLVMCodeGenLevelNone
                                        : opt_level == 1          ? LLVMCodeGenLevelLess
                                        : opt_level == 2 || lean ? LLVMCodeGenLevelDefault
                                                                  : LLVMCodeGenLevelAggressive;
    LLVMTargetMachineRef machine =
        LLVMCreateTargetMachine(target, PTX_TRIPLE, arch, PTX_FEATURES, codegen_level,
                                LLVMRelocDefault, LLVMCodeModelDefault);
    LLVMContextRef context = LLVMContextCreate();
    char *ptx = NULL;
    LLVMModuleRef mod =
        kj_codegen_module(cuda, context, machine, module, roots, root_count, options,
                          error);
    if (!mod)
        goto done;
    if (!kj_libdevice_link_lazy(mod, machine, libdevice_path, error))
        goto done;
    if (!options->cuda_whole_program)
        inline_libdevice(mod);

    /* __nvvm_reflect("__CUDA_FTZ") reads this flag: 0 keeps denormals, as the
     * cpu target does.  Settling the reflect calls first lets the optimiser
     * drop libdevice's unused branches even at -O0. */
    LLVMTypeRef i32 = LLVMInt32TypeInContext(context);
    LLVMAddModuleFlag(mod, LLVMModuleFlagBehaviorOverride, "nvvm-reflect-ftz", 16,
                      LLVMValueAsMetadata(LLVMConstInt(i32, 0, 0)));
    LLVMPassBuilderOptionsRef pass_options = LLVMCreatePassBuilderOptions();
    LLVMErrorRef err = LLVMRunPasses(mod, "function(nvvm-reflect),globaldce", machine,
                                     pass_options);
    LLVMDisposePassBuilderOptions(pass_options);
    if (err) {
        *error = take_llvm_error(err, "settling __nvvm_reflect");
        goto done;
    }
    if (!kj_codegen_optimize(mod, machine, opt_level, lean, error))
        goto done;
    if (opt_level > 0) {
        kj_ptx_branch_selects(mod);
        kj_ptx_fuse_mma(mod, arch);
    }
    if (options->local_suffix)
        suffix_locals(mod, options->local_suffix);
    if (options->verify && LLVMVerifyModule(mod, LLVMReturnStatusAction, &message)) {
        KjBuf buf = {0};
        kj_buf_printf(&buf, "the NVPTX module does not verify: %s", message);
        LLVMDisposeMessage(message);
        *error = buf.data;
        goto done;
    }

    LLVMMemoryBufferRef output = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(machine, mod, LLVMAssemblyFile, &message,
                                            &output)) {
        KjBuf buf = {0};
        kj_buf_printf(&buf, "PTX emission failed: %s", message);
        LLVMDisposeMessage(message);
        *error = buf.data;
        goto done;
    }
    size_t size = LLVMGetBufferSize(output);
    ptx = kj_xmalloc(size + 1);
    memcpy(ptx, LLVMGetBufferStart(output), size);
    ptx[size] = '\0';
    LLVMDisposeMemoryBuffer(output);

done:
    if (mod)
        LLVMDisposeModule(mod);
    LLVMContextDispose(context);
    LLVMDisposeTargetMachine(machine);
    return ptx;
}
