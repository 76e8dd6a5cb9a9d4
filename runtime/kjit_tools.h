/*
 * kjit_tools.h: what tools built on libkjit share beyond kjit.h: the `kjit`
 * command, the Python package and test programs use it.  .npy files, array
 * views in C order, the compiled-code cache, what the build found (LLVM, the
 * host CPU, libdevice, ptxas), and each stage of the compiler as text.
 *
 * Like kjit.h it shows nothing of the compiler's internals, LLVM or CUDA.
 * Messages come back as heap strings (*error) the caller frees with free().
 */
#ifndef KJIT_TOOLS_H
#define KJIT_TOOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kjit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ arrays */

/* Reads a .npy file (format 1.0-3.0, little-endian; Fortran order through
 * strides) into a new host array (kjit_array_free releases it). */
kjit_status kjit_npy_read(const char *path, kjit_array *out, char **error);
/* Writes any host view as a C-ordered .npy file (format 1.0). */
kjit_status kjit_npy_write(const char *path, const kjit_array *array, char **error);

/* The element count and byte size of a `dtype` array of that shape (either
 * pointer may be NULL), computed with overflow checks: the one place kjit
 * computes them.  KJIT_ERROR_INVALID_ARGUMENT with *error when the extents
 * (zeros counted as 1) times the element size pass 2^63 - 1 bytes, or the
 * dtype or rank is not one; KJIT_ERROR_SHAPE for a negative extent. */
kjit_status kjit_shape_size(kjit_dtype dtype, int ndim, const int64_t *shape, int64_t *count,
                            int64_t *bytes, char **error);

/* A file written whole or not at all (what kjit_npy_write and the kjit
 * command write through): open gives a FILE on a new file beside `path`;
 * close with keep flushes it to disk and renames it over `path`, so a full
 * disk or a crash never leaves a fragment of the old file or the new one;
 * close without keep (or a failed write) removes it.  An existing file's
 * permissions carry over; a symbolic link is written through (the file it
 * names is replaced, the link stays); a path that exists and is not a
 * regular file (/dev/stdout, a FIFO) is written in place.  KJIT_ERROR_IO
 * with *error. */
typedef struct kjit_output_file {
    FILE *file;
    char *path, *temp; /* temp: NULL when written in place */
} kjit_output_file;
kjit_status kjit_output_open(const char *path, kjit_output_file *out, char **error);
kjit_status kjit_output_close(kjit_output_file *out, bool keep, char **error);

/* Copies a host view into C order at dst (kjit_array_size * dtype size bytes). */
void kjit_array_copy_c_order(const kjit_array *array, void *dst);
/* C order, no gaps. */
bool kjit_array_is_contiguous(const kjit_array *array);
/* NumPy's spelling of a shape, "(3,4)", "(5,)" or "()"; returns buf. */
char *kjit_shape_text(char *buf, size_t size, int ndim, const int64_t *shape);

/* ------------------------------------------------------------------- cache */

bool kjit_cache_enabled(void);               /* false when KJIT_CACHE=off */
bool kjit_cache_dir(char *buf, size_t size); /* false when there is no usable folder */
/* KJIT_CACHE_MAX, else 1 GiB (also when KJIT_CACHE_MAX is not a size). */
uint64_t kjit_cache_max_bytes(void);
/* What keeps the disk cache in `dir` from working as configured: the folder
 * refused (not the user's, writable by group or others, a folder above it
 * unsafe, its secret wrong) or KJIT_CACHE_MAX not a size.  One
 * "kjit: warning: ...\n" line each (heap, free()), or NULL when all is well
 * (an absent folder is fine: it is made on the first store). */
char *kjit_cache_check(const char *dir);
/* kjit's and LLVM's versions, the cache format and this build of libkjit. */
const char *kjit_cache_build_identity(void);

typedef struct kjit_cache_entry {
    const char *name;     /* file name in the folder */
    bool valid;           /* the header reads; the payload and its MAC are not checked */
    const char *kind;     /* "cpu-object", "ptx", "cubin" (valid entries) */
    uint64_t file_bytes, payload_bytes;
    long long last_used;  /* seconds since the epoch */
    const char *key_text; /* what the code depends on, "field=value" lines; NULL when not valid */
} kjit_cache_entry;
typedef void (*kjit_cache_visit_fn)(void *user, const kjit_cache_entry *entry);
/* Visits every entry of the folder; the number of entries, -1 when there is no folder. */
int kjit_cache_list(const char *dir, kjit_cache_visit_fn visit, void *user);
/* Removes the entries kjit wrote (its names, its magic) and the folder's
 * secret, never another file; the number of entries removed, -1 when the
 * folder does not open. */
int kjit_cache_clear(const char *dir);
/* Empties this process's memory tier (the next compile reads the disk). */
void kjit_cache_memory_clear(void);

/* What this process's cache did.  `compiles`: code generation it could not avoid. */
typedef struct kjit_cache_counters {
    uint64_t memory_hits, disk_hits, disk_misses, disk_rejected, disk_stores, evictions;
    uint64_t compiles, shared_hits;
} kjit_cache_counters;
kjit_cache_counters kjit_cache_stats(void);

/* ------------------------------------------------------- the build's tools */

const char *kjit_host_cpu(void);     /* "znver4 +avx512f,...": what cpu code is tuned for */
const char *kjit_llvm_version(void); /* "19.1.7" */
/* libdevice.10.bc, or NULL and the folders tried in *error. */
const char *kjit_libdevice_path(char **error);
const char *kjit_ptxas_path(void);   /* the toolkit's ptxas, or NULL */

/* ---------------------------------------------------------------- stages */

/* What `kjit check --dump` and `kjit build --emit` print. */
typedef enum kjit_stage {
    KJIT_STAGE_AST,  /* the syntax tree */
    KJIT_STAGE_IR,   /* the checked IR */
    KJIT_STAGE_VEC,  /* the IR with each @vectorize signature lifted (contiguous layout) */
    KJIT_STAGE_LLVM, /* LLVM IR after optimisation, for the target */
    KJIT_STAGE_ASM,  /* host assembly (cpu) */
    KJIT_STAGE_OBJ,  /* a host object file (cpu) */
    KJIT_STAGE_PTX,  /* PTX (cuda) */
} kjit_stage;

typedef struct kjit_stage_options {
    kjit_target target;    /* cpu, parallel (the same code) or cuda */
    int opt_level;         /* 0..3 */
    const char *cuda_arch; /* NULL: sm_90 */
    const char *function;  /* NULL: every function of the file */
    bool verify;           /* the IR verifier after every pass */
    kjit_diagnostic_fn on_diagnostic; /* syntax and type errors, one call each */
    void *diagnostic_user;
    bool line_info;        /* .kern line tables (DWARF, PTX .loc); init: KJIT_LINEINFO */
    bool cpu_simd;         /* cpu: threads and elements on SIMD lanes, kernels' split
                              forms; init: unless KJIT_CPU_SIMD=0 */
    unsigned block[3];     /* cpu: code for blocks of these dims (blockDim a constant;
                              a kernel with a split form gets only the __block and
                              __blocks its launches with that shape run); block[0]
                              0: any dims */
    bool cpu_specialise;   /* cpu, any dims: as the runtime with kjit_options.cpu_specialise,
                              which compiles a split form for each launch's shape, a
                              kernel with a split form gets its fibers' __thread and no
                              general __block; init: unless KJIT_CPU_SPECIALISE=0 */
} kjit_stage_options;

void kjit_stage_options_init(kjit_stage_options *options); /* cpu, -O3, no verify */

/*
 * Runs the pipeline on a .kern file up to `stage` and returns that stage's
 * text (or object bytes) in *bytes (heap, *size bytes, NUL-terminated).
 * KJIT_ERROR_COMPILE after reporting the program's errors to on_diagnostic;
 * KJIT_ERROR_IO, KJIT_ERROR_NOT_FOUND (no such function), INVALID_ARGUMENT
 * (a stage the target has not) or BACKEND with a message in *error.
 */
kjit_status kjit_stage_file(const char *path, kjit_stage stage, const kjit_stage_options *options,
                            char **bytes, size_t *size, char **error);

#ifdef __cplusplus
}
#endif

/* kjit build --emit=lib (docs/aot.md): the module at `path` compiled ahead
 * of time into the library `output`, for the x86-64 levels of `levels`
 * ("sse2,v3,v4" when NULL; kjit_module_load_library picks the best the CPU
 * runs) and for cuda (cubins for sm_70, sm_80 and sm_90 where the toolkit's
 * ptxas can target them, and the PTX of the lowest): kjit_build_library_with
 * and the defaults of kjit_build_options.  Uses LLVM here, ptxas, and the
 * system's C compiler ($CC, else cc), nm, objcopy (and ar) to link; *error
 * (heap) says what failed. */
kjit_status kjit_build_library(const char *path, const char *output, const char *levels,
                               char **error);
/* kjit build --emit=lib|staticlib with its options (kjit_build_options_init
 * first: all off, cuda code for the default archs). */
typedef struct kjit_build_options {
    const char *levels; /* --cpu-levels; NULL: "sse2,v3,v4" */
    /* --arch: the cuda archs ("sm_70,sm_80,sm_90" when NULL), each a cubin
     * where the toolkit's ptxas can target it, and the lowest's PTX; "off"
     * (--cuda=off): no cuda code, the library runs on cpu and parallel */
    const char *cuda_archs;
    /* --emit=staticlib: an archive (.a) of the objects and NAME_kjit_load,
     * which gives the module (kjit_module_load_linked), its cuda code in
     * its table as a shared library's; NAME is `name`, or output's file
     * name without "lib" and its extension */
    bool staticlib;
    const char *name;
    /* --check: KJIT_CHECK_* bits (and KJIT_CHECK's): the library holds the
     * code of that checked mode beside the unchecked code, for the cpu and
     * parallel targets; a context of that mode runs it (docs/aot.md) */
    int check;
    /* --block X[,Y[,Z]] (repeated): kernels with a split form (barriers)
     * also get their cpu code specialised for blocks of these dims, which
     * launches of those dims run, as the JIT's split_specialise */
    int block_count;
    unsigned blocks[8][3];
} kjit_build_options;
void kjit_build_options_init(kjit_build_options *options);
/* kjit_build_library with options; *notes (heap, or NULL; when notes is not
 * NULL) says what the library leaves out and why (an arch ptxas cannot
 * target, no ptxas). */
kjit_status kjit_build_library_with(const char *path, const char *output,
                                    const kjit_build_options *options, char **notes,
                                    char **error);
/* `kjit info LIB` (docs/aot.md): what a library holds, as text (heap): its
 * source, x86-64 levels, checked code and block shapes, cuda archs (which
 * have cubins, the PTX's), the build's notes and each root; the library is
 * checked and loaded (on the cpu target, unchecked) as
 * kjit_module_load_library does, and *error says why not. */
kjit_status kjit_library_describe(const char *path, char **text, char **error);
/* kjit build --emit=header (docs/aot.md): `output`, a C header of typed entry
 * points (NAME_add_f32 ...) over kjit.h for a library of the module at
 * `path`; NAME is `name`, or output's file name without "lib" and its
 * extension. */
kjit_status kjit_build_header(const char *path, const char *output, const char *name,
                              char **error);

#endif
