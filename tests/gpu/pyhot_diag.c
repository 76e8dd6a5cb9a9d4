/*
 * pyhot_diag.c (module _pyhot_ext): a Python extension for tests/gpu/pyhot_diag.py, which takes the
 * cost of a cuda call from Python (`add(d, e, out=f)`) apart in one process
 * (issue 26 item 1: on one H200 the Python call read 1.36 us above the C
 * API's kjit_call measured in another process).  Built on the GPU machine by
 * pyhot_diag.py with cc against that Python's headers and the bundle's
 * runtime/kjit.h; libkjit is not linked: kjit_call's address comes from the
 * package's ctypes handle, as _fast.c gets it, so the one library the package
 * loaded (and its context) is what runs.
 *
 *   noop(*args, **kwargs)   returns None: what the interpreter charges a call
 *                           of three arguments, one a keyword, with nothing
 *                           behind it (the Vectorized object is called the
 *                           same way, by vectorcall)
 *   loop(what, calls, slot) runs one of the C loops below `calls` times on
 *                           the add set up in slot (0, 1 or 2) and returns the
 *                           host ns it took (CLOCK_MONOTONIC)
 *   setup(slot, call, function, a, b, out, driver)
 *                           kjit_call's address, the add's kjit_function and
 *                           the kjit_arrays of d, e and f (their `_addr`), and
 *                           the driver library to load the bare kernel from
 *                           ("" : no bare rows); the kjit context must be
 *                           current on the thread (make a call first).  Three
 *                           slots: the add of three contexts (Python's, one
 *                           made with cancellable=False, and one of the C
 *                           API's default options)
 *
 * The loops (`what`):
 *   0  kjit_call, the GIL held throughout
 *   1  kjit_call, the GIL released and taken back around each call, as
 *      _fast.c's vectorized_run does (Py_BEGIN/END_ALLOW_THREADS)
 *   2  the release and the taking back alone, no call
 *   3  a bare cuLaunchKernel of an add in kjit's parameter form (three
 *      {data, extent} records of 16 bytes as one `extra` buffer), GIL held
 *   4  the same with the GIL released and taken back around each launch
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "kjit.h"

typedef kjit_status (*call_fn)(kjit_function *, const kjit_arg *, int, kjit_array *,
                               kjit_array *);
typedef int (*ctx_get_fn)(void **);
typedef int (*module_load_fn)(void **, const void *, unsigned, int *, void **);
typedef int (*get_function_fn)(void **, void *, const char *);
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                         unsigned, void *, void **, void **);

static call_fn kj_call;
static launch_fn cu_launch;

/* One add to run: kjit's and the bare kernel's, on one context. */
typedef struct {
    kjit_function *function;
    kjit_arg args[2];
    kjit_array *out;
    void *bare_kernel;
    uint64_t bare_params[6]; /* {data, extent} of a, b, out */
    size_t bare_size;
    void *bare_extra[5];
} Slot;

static Slot slots[3];

/* The add of stream_diag.c in kjit's form: each array {data, extent}. */
static const char bare_ptx[] =
    ".version 6.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry add_desc(.param .align 8 .b8 a[16], .param .align 8 .b8 b[16],\n"
    "    .param .align 8 .b8 c[16])\n"
    "{\n"
    "  .reg .pred p;\n  .reg .b32 r<6>;\n  .reg .f32 f<4>;\n  .reg .b64 rd<12>;\n"
    "  ld.param.u64 rd1, [a];\n  ld.param.u64 rd2, [b];\n  ld.param.u64 rd3, [c];\n"
    "  ld.param.u64 rd10, [c+8];\n"
    "  mov.u32 r2, %ctaid.x;\n  mov.u32 r3, %ntid.x;\n  mov.u32 r4, %tid.x;\n"
    "  mad.lo.s32 r5, r2, r3, r4;\n  cvt.s64.s32 rd11, r5;\n  setp.ge.s64 p, rd11, rd10;\n"
    "  @p bra DONE;\n"
    "  cvta.to.global.u64 rd4, rd1;\n  cvta.to.global.u64 rd5, rd2;\n"
    "  cvta.to.global.u64 rd6, rd3;\n  mul.wide.s32 rd7, r5, 4;\n"
    "  add.s64 rd8, rd4, rd7;\n  ld.global.f32 f1, [rd8];\n"
    "  add.s64 rd8, rd5, rd7;\n  ld.global.f32 f2, [rd8];\n"
    "  add.f32 f3, f1, f2;\n  add.s64 rd9, rd6, rd7;\n  st.global.f32 [rd9], f3;\n"
    "DONE:\n  ret;\n}\n";

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static PyObject *noop(PyObject *module, PyObject *const *items, Py_ssize_t n,
                      PyObject *kwnames)
{
    Py_RETURN_NONE;
}

static kjit_array *array_at(PyObject *address)
{
    return (kjit_array *)PyLong_AsVoidPtr(address);
}

/* The bare kernel in the context current on this thread (kjit's). */
static const char *bare_load(const char *driver, void **bare_kernel)
{
    void *lib = dlopen(driver, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return "dlopen failed";
    ctx_get_fn ctx_get = (ctx_get_fn)dlsym(lib, "cuCtxGetCurrent");
    module_load_fn load = (module_load_fn)dlsym(lib, "cuModuleLoadDataEx");
    get_function_fn get = (get_function_fn)dlsym(lib, "cuModuleGetFunction");
    cu_launch = (launch_fn)dlsym(lib, "cuLaunchKernel");
    void *context = NULL, *module = NULL;
    if (!ctx_get || !load || !get || !cu_launch)
        return "a driver entry point is missing";
    if (ctx_get(&context) != 0 || !context)
        return "no current context (make a kjit call first)";
    if (load(&module, bare_ptx, 0, NULL, NULL) != 0)
        return "cuModuleLoadDataEx failed";
    if (get(bare_kernel, module, "add_desc") != 0)
        return "cuModuleGetFunction failed";
    return NULL;
}

static PyObject *setup(PyObject *module, PyObject *py_args)
{
    PyObject *call, *function, *a, *b, *out;
    const char *driver;
    int which;
    if (!PyArg_ParseTuple(py_args, "iOOOOOs", &which, &call, &function, &a, &b, &out, &driver))
        return NULL;
    if (which < 0 || which > 2) {
        PyErr_SetString(PyExc_ValueError, "pyhot_diag: slot 0, 1 or 2");
        return NULL;
    }
    Slot *slot = &slots[which];
    kj_call = (call_fn)PyLong_AsVoidPtr(call);
    slot->function = (kjit_function *)PyLong_AsVoidPtr(function);
    kjit_array *arrays[3] = {array_at(a), array_at(b), array_at(out)};
    if (PyErr_Occurred())
        return NULL;
    for (int i = 0; i < 2; i++) {
        slot->args[i].kind = KJIT_ARG_ARRAY;
        slot->args[i].dtype = arrays[i]->dtype;
        slot->args[i].value.array = arrays[i];
    }
    slot->out = arrays[2];
    for (int i = 0; i < 3; i++) {
        slot->bare_params[2 * i] = (uint64_t)(uintptr_t)arrays[i]->data;
        slot->bare_params[2 * i + 1] = (uint64_t)arrays[i]->shape[0];
    }
    slot->bare_size = sizeof slot->bare_params;
    slot->bare_extra[0] = (void *)(uintptr_t)1; /* CU_LAUNCH_PARAM_BUFFER_POINTER */
    slot->bare_extra[1] = slot->bare_params;
    slot->bare_extra[2] = (void *)(uintptr_t)2; /* CU_LAUNCH_PARAM_BUFFER_SIZE */
    slot->bare_extra[3] = &slot->bare_size;
    slot->bare_extra[4] = NULL;                 /* CU_LAUNCH_PARAM_END */
    const char *why = *driver ? bare_load(driver, &slot->bare_kernel) : "no driver named";
    if (why) {
        slot->bare_kernel = NULL;
        return PyUnicode_FromString(why);
    }
    Py_RETURN_NONE;
}

static int bare_launch(Slot *slot)
{
    unsigned n = (unsigned)slot->out->shape[0];
    return cu_launch(slot->bare_kernel, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, NULL,
                     slot->bare_extra);
}

static PyObject *loop(PyObject *module, PyObject *py_args)
{
    int what, which;
    long calls;
    if (!PyArg_ParseTuple(py_args, "ili", &what, &calls, &which))
        return NULL;
    if (which < 0 || which > 2) {
        PyErr_SetString(PyExc_ValueError, "pyhot_diag: slot 0, 1 or 2");
        return NULL;
    }
    Slot *slot = &slots[which];
    if (!kj_call || !slot->function || ((what == 3 || what == 4) && !slot->bare_kernel)) {
        PyErr_SetString(PyExc_RuntimeError, "pyhot_diag: not set up for that loop");
        return NULL;
    }
    int failed = 0;
    double start = now_ns();
    switch (what) {
    case 0:
        for (long i = 0; i < calls; i++)
            failed |= kj_call(slot->function, slot->args, 2, slot->out, NULL) != KJIT_OK;
        break;
    case 1:
        for (long i = 0; i < calls; i++) {
            kjit_status status;
            Py_BEGIN_ALLOW_THREADS
            status = kj_call(slot->function, slot->args, 2, slot->out, NULL);
            Py_END_ALLOW_THREADS
            failed |= status != KJIT_OK;
        }
        break;
    case 2:
        for (long i = 0; i < calls; i++) {
            Py_BEGIN_ALLOW_THREADS
            __asm__ volatile("" ::: "memory");
            Py_END_ALLOW_THREADS
        }
        break;
    case 3:
        for (long i = 0; i < calls; i++)
            failed |= bare_launch(slot) != 0;
        break;
    case 4:
        for (long i = 0; i < calls; i++) {
            int r;
            Py_BEGIN_ALLOW_THREADS
            r = bare_launch(slot);
            Py_END_ALLOW_THREADS
            failed |= r != 0;
        }
        break;
    default:
        PyErr_SetString(PyExc_ValueError, "pyhot_diag: no such loop");
        return NULL;
    }
    double took = now_ns() - start;
    if (failed) {
        PyErr_SetString(PyExc_RuntimeError, "pyhot_diag: a call failed");
        return NULL;
    }
    return PyFloat_FromDouble(took);
}

static PyMethodDef methods[] = {
    {"noop", (PyCFunction)(void (*)(void))noop, METH_FASTCALL | METH_KEYWORDS,
     "noop(*args, **kwargs): None"},
    {"setup", setup, METH_VARARGS,
     "setup(slot, call, function, a, b, out, driver): None, or why no bare rows"},
    {"loop", loop, METH_VARARGS, "loop(what, calls, slot): host ns"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_pyhot_ext", NULL, -1, methods};

PyMODINIT_FUNC PyInit__pyhot_ext(void)
{
    return PyModule_Create(&module_def);
}
