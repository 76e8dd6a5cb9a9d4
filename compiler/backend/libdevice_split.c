/*
 * libdevice_split.c: links into an NVPTX module only the libdevice functions
 * it uses, without parsing the other five hundred.
 *
 * Parsing all of libdevice.10.bc, pruning it and linking what is left costs
 * tens of milliseconds per compilation.  Here the bitcode is opened lazily
 * (LLVMGetBitcodeModuleInContext2): only the module's index is read, every
 * function body stays in the file until something asks for it.  Functions the
 * module does not declare are made internal; the IR linker then moves just
 * the declared ones and what they reach, materialising only those bodies.
 *
 * The file's bytes are read once per path and kept for the life of the
 * process: a lazily read module points into them until it is gone.
 */
#include <llvm-c/BitReader.h>
#include <llvm-c/Core.h>
#include <llvm-c/Linker.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_llvm.h"

typedef struct LibdeviceBytes {
    struct LibdeviceBytes *next;
    char *path;
    char *data;
    size_t size;
} LibdeviceBytes;

static pthread_mutex_t bytes_lock = PTHREAD_MUTEX_INITIALIZER;
static LibdeviceBytes *loaded;

static const LibdeviceBytes *libdevice_bytes(const char *path, char **error)
{
    pthread_mutex_lock(&bytes_lock);
    LibdeviceBytes *b = loaded;
    while (b && strcmp(b->path, path) != 0)
        b = b->next;
    if (!b) {
        FILE *file = fopen(path, "rb");
        KjBuf buf = {0};
        bool ok = file != NULL;
        if (ok) {
            char chunk[1 << 16];
            size_t n;
            while ((n = fread(chunk, 1, sizeof chunk, file)) > 0) {
                if (buf.len + n + 1 > buf.cap) {
                    buf.cap = (buf.len + n + 1) * 2;
                    buf.data = kj_xrealloc(buf.data, buf.cap);
                }
                memcpy(buf.data + buf.len, chunk, n);
                buf.len += n;
            }
            ok = !ferror(file) && buf.len > 0;
            fclose(file);
        }
        if (ok) {
            b = kj_xcalloc(1, sizeof *b);
            b->path = kj_xstrdup(path);
            b->data = buf.data;
            b->size = buf.len;
            b->next = loaded;
            loaded = b;
        } else {
            kj_buf_free(&buf);
            KjBuf message = {0};
            kj_buf_printf(&message, "cannot read libdevice at %s", path);
            *error = message.data;
        }
    }
    pthread_mutex_unlock(&bytes_lock);
    return b;
}

static bool is_libdevice_name(const char *name)
{
    return strncmp(name, "__nv_", 5) == 0;
}

bool kj_libdevice_link_lazy(void *module_ref, void *machine_ref, const char *path, char **error)
{
    LLVMModuleRef mod = module_ref;
    (void)machine_ref;
    bool needed = false;
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn && !needed; fn = LLVMGetNextFunction(fn)) {
        size_t len;
        needed = LLVMIsDeclaration(fn) && is_libdevice_name(LLVMGetValueName2(fn, &len));
    }
    if (!needed)
        return true;
    const LibdeviceBytes *bytes = libdevice_bytes(path, error);
    if (!bytes)
        return false;

    LLVMContextRef context = LLVMGetModuleContext(mod);
    /* The lazy module owns the buffer; the buffer only points at the bytes. */
    LLVMMemoryBufferRef buffer =
        LLVMCreateMemoryBufferWithMemoryRange(bytes->data, bytes->size, "libdevice", 0);
    LLVMModuleRef libdevice = NULL;
    if (LLVMGetBitcodeModuleInContext2(context, buffer, &libdevice)) {
        KjBuf message = {0};
        kj_buf_printf(&message, "libdevice at %s is not valid LLVM bitcode", path);
        *error = message.data;
        return false;
    }
    LLVMSetTarget(libdevice, LLVMGetTarget(mod));
    LLVMSetDataLayout(libdevice, LLVMGetDataLayoutStr(mod));
    /* A body not yet read is not a declaration: every libdevice definition
     * the module does not ask for becomes internal, so the linker leaves it
     * (and its body) behind unless a wanted function calls it. */
    for (LLVMValueRef fn = LLVMGetFirstFunction(libdevice); fn; fn = LLVMGetNextFunction(fn)) {
        if (LLVMIsDeclaration(fn))
            continue;
        size_t len;
        LLVMValueRef wanted = LLVMGetNamedFunction(mod, LLVMGetValueName2(fn, &len));
        if (!wanted || !LLVMIsDeclaration(wanted))
            LLVMSetLinkage(fn, LLVMInternalLinkage);
    }
    for (LLVMValueRef g = LLVMGetFirstGlobal(libdevice); g; g = LLVMGetNextGlobal(g)) {
        size_t len;
        if (!LLVMIsDeclaration(g) && !LLVMGetNamedGlobal(mod, LLVMGetValueName2(g, &len)))
            LLVMSetLinkage(g, LLVMInternalLinkage);
    }
    /* LLVMLinkModules2 consumes libdevice either way. */
    if (LLVMLinkModules2(mod, libdevice)) {
        KjBuf message = {0};
        kj_buf_printf(&message, "linking libdevice (%s) failed", path);
        *error = message.data;
        return false;
    }
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn)) {
        size_t len;
        if (!LLVMIsDeclaration(fn) && is_libdevice_name(LLVMGetValueName2(fn, &len)))
            LLVMSetLinkage(fn, LLVMInternalLinkage);
    }
    return true;
}
