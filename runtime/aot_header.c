/*
 * aot_header.c: kjit_build_header (kjit_tools.h), the C header that `kjit
 * build --emit=header` writes beside a library (docs/aot.md): a struct of
 * the module's functions, NAME_open to load the library and find them
 * (NAME_open_linked for one linked into the program, --emit=staticlib), and
 * one typed entry point per function and signature, each a static inline
 * function over kjit.h (kjit_call, kjit_launch, kjit_reduce), so that the
 * header needs nothing but kjit.h and links with libkjit-rt or libkjit.
 *
 *   @vectorize   NAME_f_SIG(m, n, const T *in..., R *out): n contiguous
 *                elements of each (no broadcasting: kjit_call does that)
 *   plain        NAME_f(m, T in..., R *result): its scalars, an array
 *                parameter as a kjit_array *
 *   @kernel      NAME_f(m, grid, block, T in...): arrays as kjit_array *
 *   @guvectorize NAME_f(m, args, nargs, out, result): as kjit_call
 *   @reduce      NAME_f(m, args, nargs, axes, naxes, out, result): as
 *                kjit_reduce
 * SIG is the signature's element type when every parameter has it ("f32"),
 * else every parameter's, joined by "_".
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

/* The C type of a scalar of kjit's type in memory. */
static const char *c_type(const KjType *t)
{
    switch (t->kind) {
    case KJ_TYPE_BOOL: case KJ_TYPE_U8: return "uint8_t";
    case KJ_TYPE_I8: return "int8_t";
    case KJ_TYPE_I16: return "int16_t";
    case KJ_TYPE_I32: return "int32_t";
    case KJ_TYPE_I64: return "int64_t";
    case KJ_TYPE_U16: case KJ_TYPE_F16: case KJ_TYPE_BF16: return "uint16_t";
    case KJ_TYPE_U32: return "uint32_t";
    case KJ_TYPE_U64: return "uint64_t";
    case KJ_TYPE_F32: case KJ_TYPE_C64: return "float";
    case KJ_TYPE_F64: case KJ_TYPE_C128: return "double";
    default: return "void";
    }
}

static const char *dtype_enum(const KjType *t)
{
    kjit_dtype d;
    if (!kj_type_dtype(t, &d))
        return "KJIT_DTYPE_COUNT";
    static char buf[KJIT_DTYPE_COUNT][16];
    snprintf(buf[d], sizeof buf[d], "KJIT_%s", kjit_dtype_name(d));
    for (char *p = buf[d]; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    return buf[d];
}

/* The kjit_arg of a typed scalar parameter `name`: its exact dtype. */
static void scalar_arg(KjBuf *b, const KjType *t, const char *name)
{
    const char *field = kj_type_is_float(t) ? "f" : t->kind >= KJ_TYPE_U8 && t->kind <= KJ_TYPE_U64
                                                        ? "u" : "i";
    if (t->kind == KJ_TYPE_F16 || t->kind == KJ_TYPE_BF16)
        kj_buf_printf(b, "{.kind = KJIT_ARG_SCALAR, .dtype = %s, .value.f = kjit_half_to_double(%s, %s)}",
                      dtype_enum(t), dtype_enum(t), name);
    else if (t->kind == KJ_TYPE_C64 || t->kind == KJ_TYPE_C128)
        kj_buf_printf(b, "{.kind = KJIT_ARG_SCALAR, .dtype = %s, .value.c = {%s[0], %s[1]}}",
                      dtype_enum(t), name, name);
    else
        kj_buf_printf(b, "{.kind = KJIT_ARG_SCALAR, .dtype = %s, .value.%s = %s}", dtype_enum(t),
                      field, name);
}

/* A complex scalar parameter is a pointer to its two parts. */
static void scalar_param(KjBuf *b, const KjType *t, const char *name)
{
    if (t->kind == KJ_TYPE_C64 || t->kind == KJ_TYPE_C128)
        kj_buf_printf(b, "const %s %s[2]", c_type(t), name);
    else
        kj_buf_printf(b, "%s %s", c_type(t), name);
}

static void signature_suffix(KjBuf *b, const KjIrFunction *fn)
{
    bool same = true;
    for (int i = 1; i < fn->param_count; i++)
        same &= fn->params[i]->type == fn->params[0]->type;
    for (int i = 0; i < (same ? (fn->param_count > 0) : fn->param_count); i++)
        kj_buf_printf(b, "_%s", kj_type_name(fn->params[i]->type));
}

static void emit_vectorize(KjBuf *b, const char *name, const KjIrEntry *e, int index)
{
    for (int s = 0; s < e->variants.count; s++) {
        const KjIrFunction *fn = e->variants.items[s];
        KjBuf suffix = {0};
        signature_suffix(&suffix, fn);
        kj_buf_printf(b, "/* %s, signature %s(", e->name, kj_type_name(fn->ret));
        for (int i = 0; i < fn->param_count; i++)
            kj_buf_printf(b, "%s%s", i ? ", " : "", kj_type_name(fn->params[i]->type));
        /* several outputs: out, out1, out2 ... each n elements, passed after
         * the inputs (kjit_call's convention for them) */
        int outputs = fn->output_count > 1 ? fn->output_count : 1;
        kj_buf_printf(b, "), elementwise over n contiguous elements of each input into out%s. */\n"
                         "static inline kjit_status %s_%s%s(const %s_module *m, int64_t n",
                      outputs > 1 ? " (and out1 ...)" : "", name, e->name,
                      suffix.data ? suffix.data : "", name);
        for (int i = 0; i < fn->param_count; i++)
            kj_buf_printf(b, ", const %s *%s", c_type(fn->params[i]->type), fn->params[i]->name);
        kj_buf_printf(b, ", %s *out", c_type(fn->ret));
        for (int k = 1; k < outputs; k++)
            kj_buf_printf(b, ", %s *out%d", c_type(fn->outputs[k]->type), k);
        kj_buf_printf(b, ")\n{\n");
        for (int i = 0; i < fn->param_count; i++)
            kj_buf_printf(b, "    kjit_array a%d = kjit_array_make((void *)%s, %s, 1, &n);\n", i,
                          fn->params[i]->name, dtype_enum(fn->params[i]->type));
        kj_buf_printf(b, "    kjit_array o = kjit_array_make(out, %s, 1, &n);\n", dtype_enum(fn->ret));
        for (int k = 1; k < outputs; k++)
            kj_buf_printf(b, "    kjit_array o%d = kjit_array_make(out%d, %s, 1, &n);\n", k, k,
                          dtype_enum(fn->outputs[k]->type));
        kj_buf_printf(b, "    kjit_arg args[%d] = {", fn->param_count + (outputs > 1 ? outputs : 0) + 1);
        for (int i = 0; i < fn->param_count; i++)
            kj_buf_printf(b, "%skjit_arg_array(&a%d)", i ? ", " : "", i);
        if (outputs > 1) {
            kj_buf_printf(b, "%skjit_arg_array(&o)", fn->param_count ? ", " : "");
            for (int k = 1; k < outputs; k++)
                kj_buf_printf(b, ", kjit_arg_array(&o%d)", k);
            kj_buf_printf(b, "};\n    return kjit_call(m->functions[%d], args, %d, NULL, NULL);\n}\n\n",
                          index, fn->param_count + outputs);
        } else {
            kj_buf_printf(b, "};\n    return kjit_call(m->functions[%d], args, %d, &o, NULL);\n}\n\n",
                          index, fn->param_count);
        }
        kj_buf_free(&suffix);
    }
}

static void emit_scalars(KjBuf *b, const KjIrFunction *fn, bool kernel)
{
    for (int i = 0; i < fn->param_count; i++) {
        kj_buf_printf(b, ", ");
        if (fn->params[i]->type->kind == KJ_TYPE_ARRAY)
            kj_buf_printf(b, "kjit_array *%s", fn->params[i]->name);
        else
            scalar_param(b, fn->params[i]->type, fn->params[i]->name);
    }
    (void)kernel;
}

static void emit_args(KjBuf *b, const KjIrFunction *fn)
{
    kj_buf_printf(b, "    kjit_arg args[%d] = {", fn->param_count ? fn->param_count : 1);
    for (int i = 0; i < fn->param_count; i++) {
        kj_buf_printf(b, "%s", i ? ", " : "");
        if (fn->params[i]->type->kind == KJ_TYPE_ARRAY)
            kj_buf_printf(b, "kjit_arg_array(%s)", fn->params[i]->name);
        else
            scalar_arg(b, fn->params[i]->type, fn->params[i]->name);
    }
    kj_buf_printf(b, "};\n");
}

kjit_status kjit_build_header(const char *path, const char *output, const char *name_given,
                              char **error)
{
    *error = NULL;
    char name[128];
    if (!kj_aot_c_name(output, name_given, name, error))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CPU;
    kjit_context *context = NULL;
    if (kjit_context_create(&options, &context) != KJIT_OK) {
        *error = kj_xstrdup(kjit_last_error(NULL));
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    kjit_module *module = NULL;
    kjit_status status = kjit_compile_file(context, path, &module);
    if (status != KJIT_OK) {
        *error = kj_xstrdup(kjit_last_error(context));
        kjit_context_destroy(context);
        return status;
    }
    KjBuf b = {0};
    kj_buf_printf(&b,
                  "/*\n * %s.h: typed entry points of %s, written by kjit build --emit=header.\n"
                  " * They call a library that `kjit build --emit=lib` made of the same file\n"
                  " * (docs/aot.md): %s_open loads it and finds its functions.  Needs kjit.h;\n"
                  " * links with libkjit-rt (or libkjit).  Each returns kjit.h's status, the\n"
                  " * message in kjit_last_error(context).\n */\n"
                  "#ifndef KJIT_AOT_%s_H\n#define KJIT_AOT_%s_H\n\n#include <stdint.h>\n\n"
                  "#include \"kjit.h\"\n\n",
                  name, path, name, name, name);
    kj_buf_printf(&b, "#define %s_FUNCTION_COUNT %d\n\n", name, module->function_count);
    kj_buf_printf(&b, "typedef struct %s_module {\n    kjit_module *module;\n"
                      "    kjit_function *functions[%d]; /* in this order:", name,
                  module->function_count ? module->function_count : 1);
    for (int i = 0; i < module->function_count; i++)
        kj_buf_printf(&b, " %s", module->functions[i]->entry->name);
    kj_buf_printf(&b, " */\n} %s_module;\n\n", name);
    kj_buf_printf(&b,
                  "/* m's functions, from m->module (loaded, status KJIT_OK). */\n"
                  "static inline kjit_status %s_functions(kjit_status status, %s_module *m)\n{\n"
                  "    static const char *const names[%d] = {",
                  name, name, module->function_count ? module->function_count : 1);
    for (int i = 0; i < module->function_count; i++)
        kj_buf_printf(&b, "%s\"%s\"", i ? ", " : "", module->functions[i]->entry->name);
    kj_buf_printf(&b,
                  "};\n"
                  "    for (int i = 0; status == KJIT_OK && i < %d; i++)\n"
                  "        status = kjit_module_function(m->module, names[i], &m->functions[i]);\n"
                  "    return status;\n}\n\n"
                  "/* Loads the library at path (kjit_module_load_library) into m. */\n"
                  "static inline kjit_status %s_open(kjit_context *context, const char *path, "
                  "%s_module *m)\n{\n"
                  "    return %s_functions(kjit_module_load_library(context, path, &m->module), m);\n"
                  "}\n\n"
                  "/* The library linked into the program (kjit build --emit=staticlib -o\n"
                  " * lib%s.a; link with lib%s.a -lkjit-rt -lmvec -lm): its module, as\n"
                  " * kjit_module_load_library gives one, the library ABI version checked. */\n"
                  "kjit_status %s_kjit_load(kjit_context *context, kjit_module **module);\n\n"
                  "/* %s_open for the library linked into the program (%s_kjit_load). */\n"
                  "static inline kjit_status %s_open_linked(kjit_context *context, %s_module *m)\n"
                  "{\n    return %s_functions(%s_kjit_load(context, &m->module), m);\n}\n\n"
                  "static inline void %s_close(%s_module *m)\n{\n"
                  "    kjit_module_free(m->module);\n    m->module = NULL;\n}\n\n",
                  module->function_count, name, name, name, name, name, name, name, name, name,
                  name, name, name, name, name);
    for (int i = 0; i < module->function_count; i++) {
        const KjIrEntry *e = module->functions[i]->entry;
        const KjIrFunction *fn = e->variants.count ? e->variants.items[0] : NULL;
        switch (e->kind) {
        case KJ_FN_VECTORIZE:
            emit_vectorize(&b, name, e, i);
            break;
        case KJ_FN_PLAIN:
            if (fn->device_use)
                break; /* kernels call it; the host cannot */
            kj_buf_printf(&b, "/* %s: a plain function%s */\n"
                              "static inline kjit_status %s_%s(const %s_module *m",
                          e->name, fn->ret->kind == KJ_TYPE_VOID ? "" : "; its value in *result",
                          name, e->name, name);
            emit_scalars(&b, fn, false);
            if (fn->ret->kind != KJ_TYPE_VOID)
                kj_buf_printf(&b, ", %s *result", c_type(fn->ret));
            kj_buf_printf(&b, ")\n{\n");
            emit_args(&b, fn);
            kj_buf_printf(&b, "    kjit_array r = {0};\n"
                              "    kjit_status status = kjit_call(m->functions[%d], args, %d, NULL, "
                              "&r);\n",
                          i, fn->param_count);
            if (fn->ret->kind != KJ_TYPE_VOID)
                kj_buf_printf(&b, "    if (status == KJIT_OK && result)\n"
                                  "        *result = *(const %s *)r.data;\n",
                              c_type(fn->ret));
            kj_buf_printf(&b, "    kjit_array_free(&r);\n    return status;\n}\n\n");
            break;
        case KJ_FN_KERNEL:
            kj_buf_printf(&b, "/* %s: a kernel, launched over grid x block */\n"
                              "static inline kjit_status %s_%s(const %s_module *m, "
                              "const uint32_t grid[3], const uint32_t block[3]",
                          e->name, name, e->name, name);
            emit_scalars(&b, fn, true);
            kj_buf_printf(&b, ")\n{\n");
            emit_args(&b, fn);
            kj_buf_printf(&b, "    return kjit_launch(m->functions[%d], grid, block, args, %d, "
                              "NULL);\n}\n\n",
                          i, fn->param_count);
            break;
        case KJ_FN_GUVECTORIZE:
            kj_buf_printf(&b, "/* %s: a @guvectorize \"%s\", called as kjit_call */\n"
                              "static inline kjit_status %s_%s(const %s_module *m, "
                              "const kjit_arg *args, int nargs, kjit_array *out, "
                              "kjit_array *result)\n{\n"
                              "    return kjit_call(m->functions[%d], args, nargs, out, result);\n}\n\n",
                          e->name, e->layout ? e->layout->text : "", name, e->name, name, i);
            break;
        case KJ_FN_REDUCE:
            kj_buf_printf(&b, "/* %s: a @reduce, called as kjit_reduce (no initial value) */\n"
                              "static inline kjit_status %s_%s(const %s_module *m, "
                              "const kjit_arg *args, int nargs, const int *axes, int naxes, "
                              "kjit_array *out, kjit_array *result)\n{\n"
                              "    return kjit_reduce(m->functions[%d], args, nargs, axes, naxes, "
                              "NULL, out, result);\n}\n\n",
                          e->name, name, e->name, name, i);
            break;
        }
    }
    kj_buf_printf(&b, "#endif\n");
    KjOutputFile out;
    char *why = NULL;
    status = kj_output_open(output, &out, &why);
    if (status == KJIT_OK) {
        bool written = fwrite(b.data, 1, b.len, out.file) == b.len;
        status = kj_output_close(&out, written, &why);
    }
    if (status != KJIT_OK)
        *error = why ? why : kj_xstrdup("cannot write the header");
    kj_buf_free(&b);
    kjit_module_free(module);
    kjit_context_destroy(context);
    return status;
}
