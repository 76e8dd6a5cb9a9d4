/*
 * kjit._fast: the compiled hot path of the Python package.
 *
 * ctypes and struct packing cost 15-30 us a call; NumPy's own add costs about
 * 1 us.  This file gives the two calls Python code makes in loops, a
 * @vectorize call and a kernel launch, a path in C: it reads NumPy arrays,
 * Python and NumPy scalars, kjit's device arrays and (on cuda) CuPy arrays
 * straight into kjit_array / kjit_arg values on the stack, allocates the
 * result with NumPy's C API (or the first device array's context pool) and
 * calls libkjit with the GIL released.
 *
 * A stream= is a kjit.Stream (its kjit_stream read here) or anything the
 * Python path's stream_pointer takes (a CuPy or PyTorch stream, a CUstream
 * handle), which is asked through it; the call is then kjit_call_async, as
 * on the Python path.  Anything else (PyTorch, Numba or DLPack arrays,
 * lists, an element type without a NumPy twin, a wrong argument count,
 * shapes that do not broadcast, a read-only array a kernel may write, a
 * stream= the Python path refuses) goes to the pure Python path
 * (`_call_slow`), before anything has run: that path accepts or refuses it
 * with its own messages, so the two paths cannot disagree on what is an
 * error.  Errors libkjit returns are raised by the package's
 * `_raise(context, status)`, as on the Python path.
 *
 * libkjit is not linked: the package hands over the addresses of the
 * functions it loaded through ctypes (setup()), so both paths use the one
 * library the package found.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <numpy/arrayscalars.h>
#include <numpy/ufuncobject.h>
#include <structmember.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kjit.h"

/* The most parameters the fast path packs on the stack; more go the slow way. */
#define FAST_MAX_ARGS 16

typedef kjit_status (*call_fn)(kjit_function *, const kjit_arg *, int, kjit_array *,
                               kjit_array *);
typedef kjit_status (*match_fn)(kjit_function *, const kjit_arg *, int, int *);
typedef kjit_status (*launch_fn)(kjit_function *, const uint32_t[3], const uint32_t[3],
                                 const kjit_arg *, int, const kjit_launch_options *);
typedef kjit_status (*call_async_fn)(kjit_function *, const kjit_arg *, int, kjit_array *,
                                     kjit_stream *);

static call_fn kj_call;
static call_async_fn kj_call_async; /* NULL: calls with a stream= take the Python path */
static match_fn kj_match;
static launch_fn kj_launch_ex;
static PyObject *raise_status;      /* _core._raise(context_handle, status) */
static PyObject *alloc_device;      /* _arrays._alloc_like_kjit(template, shape, code) */
static PyTypeObject *device_array;  /* kjit.DeviceArray */
static PyTypeObject *cupy_array;    /* cupy.ndarray, once the Python path has met one */
static PyObject *alloc_cupy;        /* _arrays._alloc_cupy(template, shape, code) */
static PyTypeObject *stream_type;   /* kjit.Stream */
static PyObject *stream_of;         /* _core._fast_stream(function, stream): a kjit.Stream */
static PyObject *str_call_slow, *str_out, *str_stream, *str_ptr_attr;
static PyObject *str_dtype, *str_shape, *str_strides, *str_data, *str_ptr;

/* ------------------------------------------------------------ element types */

/* kjit's code for a NumPy type number, or -1 (the slow path decides). */
static int code_of_typenum(int t)
{
    switch (t) {
    case NPY_BOOL: return KJIT_BOOL;
    case NPY_BYTE: return KJIT_I8;
    case NPY_SHORT: return KJIT_I16;
    case NPY_INT: return sizeof(int) == 4 ? KJIT_I32 : -1;
    case NPY_LONG: return sizeof(long) == 8 ? KJIT_I64 : KJIT_I32;
    case NPY_LONGLONG: return KJIT_I64;
    case NPY_UBYTE: return KJIT_U8;
    case NPY_USHORT: return KJIT_U16;
    case NPY_UINT: return sizeof(int) == 4 ? KJIT_U32 : -1;
    case NPY_ULONG: return sizeof(long) == 8 ? KJIT_U64 : KJIT_U32;
    case NPY_ULONGLONG: return KJIT_U64;
    case NPY_FLOAT: return KJIT_F32;
    case NPY_DOUBLE: return KJIT_F64;
    case NPY_CFLOAT: return KJIT_C64;
    case NPY_CDOUBLE: return KJIT_C128;
    case NPY_HALF: return KJIT_F16;
    default: return -1;
    }
}

/* Bytes of an element of a kjit type. */
static size_t kjit_dtype_size_of(kjit_dtype code)
{
    static const unsigned char sizes[KJIT_DTYPE_COUNT] = {1, 1, 2, 4, 8, 1, 2, 4, 8,
                                                          4, 8, 8, 16, 2, 2};
    return (unsigned)code < KJIT_DTYPE_COUNT ? sizes[code] : 1;
}

/* NumPy's type number for a kjit code; -1 for bf16 (no NumPy twin). */
static int typenum_of_code(int code)
{
    static const int table[KJIT_DTYPE_COUNT] = {
        NPY_BOOL, NPY_INT8, NPY_INT16, NPY_INT32, NPY_INT64, NPY_UINT8, NPY_UINT16,
        NPY_UINT32, NPY_UINT64, NPY_FLOAT32, NPY_FLOAT64, NPY_COMPLEX64, NPY_COMPLEX128,
        NPY_FLOAT16, -1};
    return code >= 0 && code < KJIT_DTYPE_COUNT ? table[code] : -1;
}

/* ---------------------------------------------------------------- arguments */

typedef struct {
    kjit_arg args[FAST_MAX_ARGS];
    kjit_array arrays[FAST_MAX_ARGS + 1]; /* + the output */
    int nd;                               /* the broadcast rank so far */
    npy_intp shape[KJIT_MAX_DIMS];        /* the broadcast shape so far */
    int any_array;                        /* an ndarray among the arguments */
    int any_device;                       /* a DeviceArray among them */
    int any_cupy;                         /* a CuPy array among them */
    PyObject *first;                      /* the first DeviceArray or CuPy array
                                             (borrowed): results go beside it, as the
                                             Python path allocates them */
} Packed;

enum { PACK_OK = 0, PACK_SLOW = 1, PACK_ERROR = -1 };

/* A NumPy array into a kjit_array: PACK_SLOW for what kjit_array cannot say
 * here (a type without a code, non-native byte order, too many dimensions). */
static int pack_ndarray(PyArrayObject *a, kjit_array *out)
{
    int code = code_of_typenum(PyArray_TYPE(a));
    int nd = PyArray_NDIM(a);
    if (code < 0 || !PyArray_ISNOTSWAPPED(a) || nd > KJIT_MAX_DIMS)
        return PACK_SLOW;
    out->data = PyArray_DATA(a);
    out->dtype = (kjit_dtype)code;
    out->ndim = nd;
    const npy_intp *shape = PyArray_SHAPE(a), *strides = PyArray_STRIDES(a);
    for (int d = 0; d < nd; d++) {
        out->shape[d] = shape[d];
        out->strides[d] = strides[d];
    }
    out->memory = KJIT_MEMORY_HOST;
    return PACK_OK;
}

/*
 * kjit's DeviceArray derives from DeviceBase when this module is there, so
 * what a call needs of it, the address of the kjit_array it keeps and
 * whether its memory is a GPU's, are two fields read in place: as Python
 * attributes (`_addr`, `_gpu`), reading them cost two attribute lookups per
 * array per call, a tenth of a call on device arrays.
 */
typedef struct {
    PyObject_HEAD
    unsigned long long addr; /* the kjit_array's address (`_addr`); 0 until set */
    char gpu;                /* GPU memory (`_gpu`) */
    kjit_array array;        /* the kjit_array itself, where `_keep` put it */
} DeviceBase;

static PyMemberDef device_base_members[] = {
    {"_addr", T_ULONGLONG, offsetof(DeviceBase, addr), 0,
     "the address of the kjit_array this array keeps"},
    {"_gpu", T_BOOL, offsetof(DeviceBase, gpu), 0, "True when the memory is a GPU's"},
    {NULL, 0, 0, 0, NULL}};

/* _keep(struct, ptr): the kjit_array's bytes (without the pointer) kept in
 * the object itself, `ptr` its data, `_addr` its address: what a ctypes
 * struct did, without building and freeing one a third of a microsecond
 * each (a result array of every call without out=). */
static PyObject *device_base_keep(PyObject *op, PyObject *args)
{
    DeviceBase *self = (DeviceBase *)op;
    Py_buffer bytes;
    unsigned long long ptr;
    if (!PyArg_ParseTuple(args, "y*K:_keep", &bytes, &ptr))
        return NULL;
    if (bytes.len != (Py_ssize_t)sizeof(kjit_array)) {
        PyErr_Format(PyExc_ValueError, "_keep: %zd bytes for a kjit_array of %zu", bytes.len,
                     sizeof(kjit_array));
        PyBuffer_Release(&bytes);
        return NULL;
    }
    memcpy(&self->array, bytes.buf, sizeof(kjit_array));
    PyBuffer_Release(&bytes);
    self->array.data = (void *)(uintptr_t)ptr;
    self->addr = (unsigned long long)(uintptr_t)&self->array;
    Py_RETURN_NONE;
}

/* `ptr`: the data address of the kjit_array at `_addr` (0 while unset). */
static PyObject *device_base_ptr(PyObject *op, void *closure)
{
    (void)closure;
    const DeviceBase *self = (const DeviceBase *)op;
    if (!self->addr)
        return PyLong_FromLong(0);
    return PyLong_FromUnsignedLongLong(
        (unsigned long long)(uintptr_t)((const kjit_array *)(uintptr_t)self->addr)->data);
}

static PyMethodDef device_base_methods[] = {
    {"_keep", device_base_keep, METH_VARARGS,
     "_keep(struct, ptr): keep the kjit_array in the object, its data at ptr"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef device_base_getset[] = {
    {"ptr", device_base_ptr, NULL, "the address of element 0", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject DeviceBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kjit._fast.DeviceBase",
    .tp_basicsize = sizeof(DeviceBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The fields of a kjit DeviceArray that calls read in C (a base of DeviceArray).",
    .tp_members = device_base_members,
    .tp_methods = device_base_methods,
    .tp_getset = device_base_getset,
    .tp_new = PyType_GenericNew,
};

/* The kjit_array a kjit DeviceArray keeps; PACK_SLOW for GPU memory on a
 * host target (the slow path's message says why) or an array whose fields
 * are not set. */
static int pack_device_array(PyObject *x, int is_cuda, kjit_array **out)
{
    const DeviceBase *d = (const DeviceBase *)x; /* Py_TYPE(x) is device_array */
    if ((d->gpu && !is_cuda) || !d->addr)
        return PACK_SLOW;
    *out = (kjit_array *)(uintptr_t)d->addr;
    return PACK_OK;
}

/* A tuple of at most KJIT_MAX_DIMS ints into int64s; -1 when it is not one. */
static int int_tuple(PyObject *t, int64_t *out)
{
    if (!t || !PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) > KJIT_MAX_DIMS)
        return -1;
    int n = (int)PyTuple_GET_SIZE(t);
    for (int d = 0; d < n; d++) {
        PyObject *v = PyTuple_GET_ITEM(t, d);
        int overflow = 0;
        long long x = PyLong_Check(v) ? PyLong_AsLongLongAndOverflow(v, &overflow) : -1;
        if (!PyLong_Check(v) || overflow || (x == -1 && PyErr_Occurred()))
            return -1;
        out[d] = x;
    }
    return n;
}

/*
 * A CuPy array into a kjit_array of GPU memory, from what the Python path's
 * converter (_cupy in _arrays.py) reads: .dtype (a NumPy dtype), .shape,
 * .strides (bytes) and .data.ptr.  Anything unusual (another dtype, an
 * attribute that is missing or odd) is PACK_SLOW, with no exception left:
 * the Python path takes the call and says what is wrong.  The caller holds
 * x for the call, and x its memory.
 */
static int pack_cupy(PyObject *x, kjit_array *out)
{
    int r = PACK_SLOW;
    PyObject *dtype = PyObject_GetAttr(x, str_dtype), *shape = NULL, *strides = NULL,
             *data = NULL, *ptr = NULL;
    if (!dtype || !PyArray_DescrCheck(dtype))
        goto done;
    PyArray_Descr *descr = (PyArray_Descr *)dtype;
    int code = code_of_typenum(descr->type_num);
    if (code < 0 || !PyArray_ISNBO(descr->byteorder))
        goto done;
    shape = PyObject_GetAttr(x, str_shape);
    strides = PyObject_GetAttr(x, str_strides);
    int64_t extents[KJIT_MAX_DIMS], steps[KJIT_MAX_DIMS];
    int nd = int_tuple(shape, extents);
    if (nd < 0 || int_tuple(strides, steps) != nd)
        goto done;
    data = PyObject_GetAttr(x, str_data);
    ptr = data ? PyObject_GetAttr(data, str_ptr) : NULL;
    if (!ptr || !PyLong_Check(ptr))
        goto done;
    void *address = PyLong_AsVoidPtr(ptr);
    if (PyErr_Occurred())
        goto done;
    memset(out, 0, sizeof *out);
    out->data = address;
    out->dtype = (kjit_dtype)code;
    out->ndim = nd;
    for (int d = 0; d < nd; d++) {
        out->shape[d] = extents[d];
        out->strides[d] = steps[d];
    }
    out->memory = KJIT_MEMORY_DEVICE;
    r = PACK_OK;
done:
    if (PyErr_Occurred())
        PyErr_Clear();
    Py_XDECREF(dtype);
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    Py_XDECREF(data);
    Py_XDECREF(ptr);
    return r;
}

/* A NumPy scalar (np.float32(1.5), a[0]) into a kjit_arg of its own type. */
static int pack_numpy_scalar(PyObject *x, kjit_arg *arg)
{
    PyArray_Descr *descr = PyArray_DescrFromScalar(x);
    if (!descr)
        return PACK_ERROR;
    int code = code_of_typenum(descr->type_num);
    int swapped = !PyArray_ISNBO(descr->byteorder);
    Py_DECREF(descr);
    if (code < 0 || swapped)
        return PACK_SLOW;
    union {
        npy_bool b; int8_t i8; int16_t i16; int32_t i32; int64_t i64;
        uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64;
        float f32; double f64; float c64[2]; double c128[2];
        char bytes[32];
    } v;
    memset(&v, 0, sizeof v);
    PyArray_ScalarAsCtype(x, &v);
    arg->kind = KJIT_ARG_SCALAR;
    arg->dtype = (kjit_dtype)code;
    switch (code) {
    case KJIT_BOOL: arg->value.i = v.b != 0; break;
    case KJIT_I8: arg->value.i = v.i8; break;
    case KJIT_I16: arg->value.i = v.i16; break;
    case KJIT_I32: arg->value.i = v.i32; break;
    case KJIT_I64: arg->value.i = v.i64; break;
    case KJIT_U8: arg->value.u = v.u8; break;
    case KJIT_U16: arg->value.u = v.u16; break;
    case KJIT_U32: arg->value.u = v.u32; break;
    case KJIT_U64: arg->value.u = v.u64; break;
    case KJIT_F32: arg->value.f = v.f32; break;
    case KJIT_F64: arg->value.f = v.f64; break;
    case KJIT_C64:
        arg->value.c[0] = v.c64[0];
        arg->value.c[1] = v.c64[1];
        break;
    case KJIT_C128:
        arg->value.c[0] = v.c128[0];
        arg->value.c[1] = v.c128[1];
        break;
    default: return PACK_SLOW; /* f16 scalars: the Python path rounds them */
    }
    return PACK_OK;
}

/* NumPy's broadcast of the shape so far with one more; 0 when they do not. */
static int broadcast(Packed *p, const kjit_array *a)
{
    int nd = a->ndim > p->nd ? a->ndim : p->nd;
    npy_intp shape[KJIT_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        int da = d - (nd - a->ndim), dp = d - (nd - p->nd);
        npy_intp x = da >= 0 ? a->shape[da] : 1, y = dp >= 0 ? p->shape[dp] : 1;
        if (x == y || y == 1)
            shape[d] = x;
        else if (x == 1)
            shape[d] = y;
        else
            return 0;
    }
    memcpy(p->shape, shape, sizeof(npy_intp) * (size_t)nd);
    p->nd = nd;
    return 1;
}

/* Argument i: PACK_OK, PACK_SLOW (the Python path takes the call) or
 * PACK_ERROR (a Python exception is set).  `written` says the function may
 * store into it (a read-only array is then the slow path's to refuse);
 * `bcast`, that arrays broadcast together (a @vectorize call's do, a
 * kernel's need not). */
static int pack_arg(Packed *p, int i, PyObject *x, int is_cuda, int written, int bcast)
{
    kjit_arg *arg = &p->args[i];
    /* kjit's own arrays first: a loop on device arrays is the call to be quick */
    if (device_array && Py_TYPE(x) == device_array) {
        kjit_array *view = NULL;
        int r = pack_device_array(x, is_cuda, &view);
        if (r != PACK_OK)
            return r;
        if (bcast && (view->ndim > KJIT_MAX_DIMS || !broadcast(p, view)))
            return PACK_SLOW;
        arg->kind = KJIT_ARG_ARRAY;
        arg->dtype = view->dtype;
        arg->value.array = view;
        if (!p->first)
            p->first = x;
        p->any_device = 1;
        return PACK_OK;
    }
    if (PyArray_CheckExact(x)) {
        PyArrayObject *a = (PyArrayObject *)x;
        if (written && !PyArray_ISWRITEABLE(a))
            return PACK_SLOW;
        int r = pack_ndarray(a, &p->arrays[i]);
        if (r != PACK_OK)
            return r;
        if (bcast && !broadcast(p, &p->arrays[i]))
            return PACK_SLOW;
        arg->kind = KJIT_ARG_ARRAY;
        arg->dtype = p->arrays[i].dtype;
        arg->value.array = &p->arrays[i];
        p->any_array = 1;
        return PACK_OK;
    }
    if (PyFloat_CheckExact(x)) {
        arg->kind = KJIT_ARG_SCALAR;
        arg->dtype = KJIT_F64;
        arg->value.f = PyFloat_AS_DOUBLE(x);
        return PACK_OK;
    }
    if (PyLong_CheckExact(x)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return PACK_SLOW;
        }
        arg->kind = KJIT_ARG_SCALAR;
        arg->dtype = KJIT_I64;
        arg->value.i = v;
        return PACK_OK;
    }
    if (PyBool_Check(x)) {
        arg->kind = KJIT_ARG_SCALAR;
        arg->dtype = KJIT_BOOL;
        arg->value.i = x == Py_True;
        return PACK_OK;
    }
    if (cupy_array && Py_TYPE(x) == cupy_array) {
        /* GPU memory: on a host target the Python path refuses it */
        if (!is_cuda || pack_cupy(x, &p->arrays[i]) != PACK_OK)
            return PACK_SLOW;
        if (bcast && !broadcast(p, &p->arrays[i]))
            return PACK_SLOW;
        arg->kind = KJIT_ARG_ARRAY;
        arg->dtype = p->arrays[i].dtype;
        arg->value.array = &p->arrays[i];
        if (!p->first)
            p->first = x;
        p->any_cupy = 1;
        return PACK_OK;
    }
    if (PyArray_IsScalar(x, Generic))
        return pack_numpy_scalar(x, arg);
    return PACK_SLOW;
}

/* The arguments of a call as they came: a tuple and a dict (tp_call), or
 * an array and the keywords' names (vectorcall); what the Python path gets. */
typedef struct {
    PyObject *args, *kwargs;
    PyObject *const *vector;
    size_t nargsf;
    PyObject *kwnames;
} CallArgs;

/* Calls self._call_slow(*args, **kwargs): the Python path. */
static PyObject *call_slow(PyObject *self, const CallArgs *call)
{
    PyObject *slow = PyObject_GetAttr(self, str_call_slow);
    if (!slow)
        return NULL;
    PyObject *r = call->vector ? PyObject_Vectorcall(slow, call->vector, call->nargsf,
                                                     call->kwnames)
                               : PyObject_Call(slow, call->args, call->kwargs);
    Py_DECREF(slow);
    return r;
}

static PyObject *raise_for(void *context, kjit_status status)
{
    PyObject *r = PyObject_CallFunction(raise_status, "Ni", PyLong_FromVoidPtr(context),
                                        (int)status);
    Py_XDECREF(r);
    if (!PyErr_Occurred())
        PyErr_Format(PyExc_RuntimeError, "kjit: status %d", (int)status);
    return NULL;
}

/* ------------------------------------------------------------- @vectorize */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall; /* vectorized_vectorcall: no tuple or dict per call */
    kjit_function *handle;
    void *context;
    int nparams;
    int nsigs;
    int results[64]; /* each signature's result code (-1: none) */
    int is_cuda;
    int bound;
} Vectorized;

static int vectorized_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return 0; /* the Python class's __init__ runs, then _fast_bind */
}

/* _fast_bind(handle, context, nparams, results, is_cuda) */
static PyObject *vectorized_bind(PyObject *op, PyObject *args)
{
    Vectorized *self = (Vectorized *)op;
    PyObject *handle, *context, *results;
    int nparams, is_cuda;
    if (!PyArg_ParseTuple(args, "OOiO!p", &handle, &context, &nparams, &PyTuple_Type,
                          &results, &is_cuda))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(results);
    self->bound = 0;
    if (n < 1 || n > 64 || nparams > FAST_MAX_ARGS)
        Py_RETURN_FALSE; /* this function stays on the Python path */
    for (Py_ssize_t s = 0; s < n; s++) {
        PyObject *r = PyTuple_GET_ITEM(results, s);
        self->results[s] = r == Py_None ? -1 : (int)PyLong_AsLong(r);
    }
    self->handle = PyLong_AsVoidPtr(handle);
    self->context = PyLong_AsVoidPtr(context);
    if (PyErr_Occurred())
        return NULL;
    self->nsigs = (int)n;
    self->nparams = nparams;
    self->is_cuda = is_cuda;
    self->bound = 1;
    Py_RETURN_TRUE;
}

/* The kjit_stream of a kjit.Stream (its `_ptr`); PACK_SLOW for a destroyed
 * one (`_ptr` None), or anything else, with no exception left. */
static int stream_handle(PyObject *stream, kjit_stream **out)
{
    PyObject *ptr = PyObject_GetAttr(stream, str_ptr_attr);
    int r = PACK_SLOW;
    if (ptr && PyLong_Check(ptr)) {
        *out = PyLong_AsVoidPtr(ptr);
        r = PyErr_Occurred() || !*out ? PACK_SLOW : PACK_OK;
    }
    Py_XDECREF(ptr);
    if (PyErr_Occurred())
        PyErr_Clear();
    return r;
}

/* The last foreign stream= (a CuPy, PyTorch or Numba stream, a handle) and
 * the kjit.Stream that wraps it in a context: a loop passes the same stream
 * each call, and finding the wrapper costs a Python call.  Both are held (so
 * neither the object, whose handle is fixed for its life, nor the wrapper
 * and the context it holds can go while cached); None as the wrapper is the
 * legacy default stream. */
static PyObject *last_stream, *last_wrapper;
static void *last_context;

/*
 * The kjit_stream of a stream= that is not None: PACK_OK with *out set (NULL
 * for the legacy default stream, a handle of 0), or PACK_SLOW where the
 * Python path takes the call (no kjit_call_async, a stream it refuses, with
 * its own message).  A kjit.Stream is read here; others through
 * _core.stream_object, as the Python path reads them.
 */
static int pack_stream(Vectorized *self, PyObject *stream, kjit_stream **out)
{
    if (!kj_call_async)
        return PACK_SLOW;
    if (stream_type && Py_TYPE(stream) == stream_type)
        return stream_handle(stream, out);
    if (stream != last_stream || self->context != last_context) {
        PyObject *wrapper = stream_of ? PyObject_CallFunctionObjArgs(stream_of, (PyObject *)self,
                                                                     stream, NULL)
                                      : NULL;
        if (!wrapper || (wrapper != Py_None && !(stream_type && Py_TYPE(wrapper) == stream_type))) {
            Py_XDECREF(wrapper);
            if (PyErr_Occurred())
                PyErr_Clear();
            return PACK_SLOW; /* the Python path says why */
        }
        Py_INCREF(stream);
        Py_XSETREF(last_stream, stream);
        Py_XSETREF(last_wrapper, wrapper);
        last_context = self->context;
    }
    if (last_wrapper == Py_None) {
        *out = NULL;
        return PACK_OK;
    }
    return stream_handle(last_wrapper, out);
}

static PyObject *new_device_array(PyObject *template, int nd, const npy_intp *shape,
                                  PyObject *shape_tuple, int code);

/* A call of n positional arguments, `out` (NULL: none) and `stream` (NULL:
 * none; call: the arguments as they came, for the Python path). */
static PyObject *vectorized_run(Vectorized *self, PyObject *const *items, Py_ssize_t n,
                                PyObject *out, PyObject *stream, const CallArgs *call)
{
    PyObject *op = (PyObject *)self;
    kjit_stream *on = NULL;
    if (stream && pack_stream(self, stream, &on) != PACK_OK)
        return call_slow(op, call);
    if (out && PyTuple_CheckExact(out)) { /* out=(array,), as NumPy's ufuncs take it */
        if (PyTuple_GET_SIZE(out) != 1)
            return call_slow(op, call); /* its error */
        out = PyTuple_GET_ITEM(out, 0);
        if (out == Py_None)
            out = NULL;
    }
    Packed p;
    p.nd = 0;
    p.any_array = p.any_device = p.any_cupy = 0;
    p.first = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int r = pack_arg(&p, (int)i, items[i], self->is_cuda, 0, 1);
        if (r == PACK_ERROR)
            return NULL;
        if (r == PACK_SLOW)
            return call_slow(op, call);
    }
    kjit_array *dst = &p.arrays[FAST_MAX_ARGS];
    PyObject *result;
    if (out) {
        if (PyArray_CheckExact(out)) {
            if (!PyArray_ISWRITEABLE((PyArrayObject *)out) ||
                pack_ndarray((PyArrayObject *)out, dst) != PACK_OK)
                return call_slow(op, call);
        } else if (device_array && Py_TYPE(out) == device_array) {
            int r = pack_device_array(out, self->is_cuda, &dst);
            if (r == PACK_ERROR)
                return NULL;
            if (r == PACK_SLOW)
                return call_slow(op, call);
        } else if (cupy_array && Py_TYPE(out) == cupy_array && self->is_cuda) {
            if (pack_cupy(out, dst) != PACK_OK)
                return call_slow(op, call);
        } else {
            return call_slow(op, call);
        }
        Py_INCREF(out);
        result = out;
    } else {
        int sig = 0;
        if (self->nsigs > 1) {
            kjit_status status = kj_match(self->handle, p.args, (int)n, &sig);
            if (status != KJIT_OK)
                return raise_for(self->context, status);
        }
        int typenum = sig < self->nsigs ? typenum_of_code(self->results[sig]) : -1;
        if (typenum < 0)
            return call_slow(op, call);
        if (p.first) {
            /* beside the first device array (from its context's pool) or
             * CuPy array (from CuPy's allocator, on its device), whichever
             * comes first, as the Python path allocates it */
            bool kjit_result = Py_TYPE(p.first) == device_array;
            PyObject *alloc = kjit_result ? alloc_device : alloc_cupy;
            if (!alloc)
                return call_slow(op, call);
            PyObject *shape = PyTuple_New(p.nd);
            if (!shape)
                return NULL;
            for (int d = 0; d < p.nd; d++) {
                PyObject *extent = PyLong_FromSsize_t(p.shape[d]);
                if (!extent) {
                    Py_DECREF(shape);
                    return NULL;
                }
                PyTuple_SET_ITEM(shape, d, extent);
            }
            /* a kjit result built here (its pool block, layout and object);
             * Python's allocator where this cannot (no C pool, a DeviceArray
             * class whose slots are not the known ones) */
            result = kjit_result ? new_device_array(p.first, p.nd, p.shape, shape,
                                                    self->results[sig])
                                 : NULL;
            if (!result && !PyErr_Occurred())
                result = PyObject_CallFunction(alloc, "OOi", p.first, shape, self->results[sig]);
            Py_DECREF(shape);
            if (!result)
                return NULL;
            int r = PACK_SLOW;
            if (kjit_result && Py_TYPE(result) == device_array)
                r = pack_device_array(result, self->is_cuda, &dst);
            else if (!kjit_result && Py_TYPE(result) == cupy_array)
                r = pack_cupy(result, dst);
            if (r != PACK_OK) {
                Py_DECREF(result);
                return r == PACK_ERROR ? NULL : call_slow(op, call);
            }
            goto call;
        }
        result = PyArray_Empty(p.nd, p.shape, PyArray_DescrFromType(typenum), 0);
        if (!result)
            return NULL;
        if (pack_ndarray((PyArrayObject *)result, dst) != PACK_OK) {
            Py_DECREF(result);
            return call_slow(op, call);
        }
    }
call:;
    kjit_status status;
    Py_BEGIN_ALLOW_THREADS
    status = stream ? kj_call_async(self->handle, p.args, (int)n, dst, on)
                    : kj_call(self->handle, p.args, (int)n, dst, NULL);
    Py_END_ALLOW_THREADS
    if (status != KJIT_OK) {
        Py_DECREF(result);
        return raise_for(self->context, status);
    }
    if (!out && !p.any_array && !p.any_device && !p.any_cupy)
        return PyArray_Return((PyArrayObject *)result); /* scalars in, a scalar out */
    return result;
}

static PyObject *vectorized_call(PyObject *op, PyObject *args, PyObject *kwargs)
{
    Vectorized *self = (Vectorized *)op;
    CallArgs call = {.args = args, .kwargs = kwargs};
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *out = NULL, *stream = NULL;
    if (!self->bound || n != self->nparams)
        return call_slow(op, &call);
    if (kwargs && PyDict_GET_SIZE(kwargs)) {
        Py_ssize_t left = PyDict_GET_SIZE(kwargs);
        out = PyDict_GetItemWithError(kwargs, str_out);
        if (out)
            left--;
        stream = PyDict_GetItemWithError(kwargs, str_stream);
        if (stream)
            left--;
        if (PyErr_Occurred())
            return NULL;
        if (left)
            return call_slow(op, &call); /* its TypeError */
        if (out == Py_None)
            out = NULL;
        if (stream == Py_None)
            stream = NULL;
    }
    return vectorized_run(self, ((PyTupleObject *)args)->ob_item, n, out, stream, &call);
}

/* A class that replaced __call__ after vectorcall was enabled for it
 * (Python before 3.12 keeps the flag then): its own __call__, with the
 * tuple and dict tp_call takes. */
static PyObject *call_replaced(PyObject *op, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf), nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *tuple = PyTuple_New(n), *dict = nk ? PyDict_New() : NULL, *r = NULL;
    if (!tuple || (nk && !dict))
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(tuple, i, args[i]);
    }
    for (Py_ssize_t k = 0; k < nk; k++)
        if (PyDict_SetItem(dict, PyTuple_GET_ITEM(kwnames, k), args[n + k]) < 0)
            goto done;
    r = Py_TYPE(op)->tp_call(op, tuple, dict);
done:
    Py_XDECREF(tuple);
    Py_XDECREF(dict);
    return r;
}

/* The same without the tuple and dict that tp_call costs (a call of a
 * device array's add is a few microseconds in all). */
static PyObject *vectorized_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf,
                                       PyObject *kwnames)
{
    Vectorized *self = (Vectorized *)op;
    CallArgs call = {.vector = args, .nargsf = nargsf, .kwnames = kwnames};
    if (Py_TYPE(op)->tp_call != vectorized_call)
        return call_replaced(op, args, nargsf, kwnames);
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (!self->bound || n != self->nparams)
        return call_slow(op, &call);
    PyObject *out = NULL, *stream = NULL;
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nk; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k), *value = args[n + k];
        if (name == str_out || PyUnicode_Compare(name, str_out) == 0)
            out = value;
        else if (name == str_stream || PyUnicode_Compare(name, str_stream) == 0)
            stream = value;
        else
            return call_slow(op, &call); /* its TypeError */
    }
    if (PyErr_Occurred())
        return NULL;
    if (out == Py_None)
        out = NULL;
    if (stream == Py_None)
        stream = NULL;
    return vectorized_run(self, args, n, out, stream, &call);
}

static PyMethodDef vectorized_methods[] = {
    {"_fast_bind", vectorized_bind, METH_VARARGS,
     "_fast_bind(handle, context, nparams, results, is_cuda): calls go through C"},
    {NULL, NULL, 0, NULL}};

static PyObject *vectorized_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *self = PyType_GenericNew(type, args, kwargs);
    if (self)
        ((Vectorized *)self)->vectorcall = vectorized_vectorcall;
    return self;
}

static PyTypeObject VectorizedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kjit._fast.Vectorized",
    .tp_basicsize = sizeof(Vectorized),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Vectorized, vectorcall),
    .tp_doc = "The C call of a @vectorize function (a base of kjit's VectorizedFunction).",
    .tp_call = vectorized_call,
    .tp_methods = vectorized_methods,
    .tp_init = vectorized_init,
    .tp_new = vectorized_new,
};

/* ---------------------------------------------------------------- launches */

/* What kernel[grid, block, ...] gives when this module is there: the Python
 * Launcher it wraps (`python`) checked the configuration and takes what the
 * C path does not; its attributes (function, grid, block, shared_bytes,
 * _call_slow) read through.  Launches are vectorcalls: no tuple of
 * arguments is made. */
typedef struct {
    PyObject_HEAD
    PyObject *python;
    vectorcallfunc vectorcall;
    kjit_function *handle;
    void *context;
    int nparams;
    uint32_t grid[3], block[3];
    kjit_launch_options options;
    unsigned char written[FAST_MAX_ARGS];
    int is_cuda;
    int bound; /* 0: every launch goes to `python` (too many parameters) */
} Launch;

static PyObject *launch_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames)
{
    Launch *self = (Launch *)op;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (!self->bound || n != self->nparams || (kwnames && PyTuple_GET_SIZE(kwnames)))
        return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
    Packed p;
    p.nd = 0;
    p.any_array = p.any_device = p.any_cupy = 0;
    p.first = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int r = pack_arg(&p, (int)i, args[i], self->is_cuda, self->written[i], 0);
        if (r == PACK_ERROR)
            return NULL;
        if (r == PACK_SLOW)
            return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
    }
    kjit_status status;
    Py_BEGIN_ALLOW_THREADS
    status = kj_launch_ex(self->handle, self->grid, self->block, p.args, (int)n,
                          &self->options);
    Py_END_ALLOW_THREADS
    if (status != KJIT_OK)
        return raise_for(self->context, status);
    Py_RETURN_NONE;
}

/* Launch(python, handle, context, written, grid, block, stream, shared_bytes, is_cuda) */
static PyObject *launch_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *python, *handle, *context, *stream;
    Py_buffer written;
    unsigned int g[3], b[3];
    unsigned long long shared;
    int is_cuda;
    if (kwargs && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "Launch() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOOy*(III)(III)OKp", &python, &handle, &context, &written,
                          &g[0], &g[1], &g[2], &b[0], &b[1], &b[2], &stream, &shared,
                          &is_cuda))
        return NULL;
    Launch *self = (Launch *)type->tp_alloc(type, 0);
    if (!self) {
        PyBuffer_Release(&written);
        return NULL;
    }
    Py_INCREF(python);
    self->python = python;
    self->vectorcall = launch_vectorcall;
    self->bound = written.len <= FAST_MAX_ARGS;
    if (self->bound) {
        self->nparams = (int)written.len;
        memcpy(self->written, written.buf, (size_t)written.len);
    }
    PyBuffer_Release(&written);
    self->handle = PyLong_AsVoidPtr(handle);
    self->context = PyLong_AsVoidPtr(context);
    self->options.stream = stream == Py_None ? NULL : PyLong_AsVoidPtr(stream);
    self->options.dynamic_shared_bytes = (size_t)shared;
    for (int d = 0; d < 3; d++) {
        self->grid[d] = g[d];
        self->block[d] = b[d];
    }
    self->is_cuda = is_cuda;
    if (PyErr_Occurred()) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int launch_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(((Launch *)op)->python);
    return 0;
}

static int launch_clear(PyObject *op)
{
    Py_CLEAR(((Launch *)op)->python);
    return 0;
}

static void launch_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    launch_clear(op);
    Py_TYPE(op)->tp_free(op);
}

/* Attributes of its own first, then the Python Launcher's. */
static PyObject *launch_getattro(PyObject *op, PyObject *name)
{
    PyObject *r = PyObject_GenericGetAttr(op, name);
    if (r || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return r;
    PyErr_Clear();
    Launch *self = (Launch *)op;
    if (!self->python) {
        PyErr_SetObject(PyExc_AttributeError, name);
        return NULL;
    }
    return PyObject_GetAttr(self->python, name);
}

static PyObject *launch_repr(PyObject *op)
{
    Launch *self = (Launch *)op;
    return PyUnicode_FromFormat("<kjit launch (compiled) of %R>", self->python);
}

static PyTypeObject LaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kjit._fast.Launch",
    .tp_basicsize = sizeof(Launch),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A kernel launch through C: kernel[grid, block, stream, shared_bytes].",
    .tp_vectorcall_offset = offsetof(Launch, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = launch_new,
    .tp_traverse = launch_traverse,
    .tp_clear = launch_clear,
    .tp_dealloc = launch_dealloc,
    .tp_getattro = launch_getattro,
    .tp_repr = launch_repr,
};

/* ------------------------------------------------------------------ ufuncs */

/*
 * A @vectorize function as a numpy.ufunc (cpu and parallel targets): one
 * loop per signature, as Numba's @vectorize makes.  NumPy picks the loop by
 * its own type rules (casting where it may), then hands it 1-D strided
 * operands, which become one kjit_call of that signature on 1-D views: the
 * compiled SIMD loop runs over them.  What a loop needs is in a capsule the
 * ufunc holds (its `obj`), with the kjit Function, so the compiled code lives
 * as long as the ufunc does.
 */
typedef struct {
    kjit_function *handle;
    void *context;
    int nin;
    int nout;                                /* 1 for @vectorize */
    kjit_dtype types[FAST_MAX_ARGS + 1];     /* the inputs', then the outputs' */
    /* @guvectorize: each operand's core rank, where its core strides start
     * among the loop's steps, and the index of each of its core dimensions
     * among the loop's dimensions (NumPy's core_dim_ixs) */
    int core_ndim[FAST_MAX_ARGS + 1];
    int core_offset[FAST_MAX_ARGS + 1];
    int core_dim[FAST_MAX_ARGS + 1][KJIT_MAX_DIMS];
} UfuncLoop;

typedef struct {
    PyObject *function;          /* the kjit Function: keeps its module alive */
    int nloops;
    PyUFuncGenericFunction *funcs;
    void **data;
    char *types;
    UfuncLoop *loops;
    char *name, *doc; /* NumPy keeps the pointers, not copies */
} UfuncKeep;

/* The bytes [lo, hi) that n elements at p, step apart, cover. */
static void extent(const char *p, npy_intp n, npy_intp step, npy_intp size, const char **lo,
                   const char **hi)
{
    const char *last = p + (n - 1) * step;
    *lo = step < 0 ? last : p;
    *hi = (step < 0 ? p : last) + size;
}

/* Whether the loop depends on its own results: NumPy's reduce and accumulate
 * hand it an output of stride 0, or an input that is the output shifted (out
 * = f(out - 1, x)), and expect the elements in order.  kjit_call would read
 * such an input from a copy (as NumPy's own calls do), so these loops run
 * element by element instead.  The very same view as the output is fine. */
static int loop_is_sequential(const UfuncLoop *loop, char **args, npy_intp n,
                              npy_intp const *steps)
{
    if (n < 2)
        return 0;
    npy_intp size = (npy_intp)kjit_dtype_size_of(loop->types[loop->nin]);
    if (steps[loop->nin] == 0)
        return 1;
    const char *olo, *ohi;
    extent(args[loop->nin], n, steps[loop->nin], size, &olo, &ohi);
    for (int i = 0; i < loop->nin; i++) {
        if (args[i] == args[loop->nin] && steps[i] == steps[loop->nin])
            continue;
        const char *lo, *hi;
        extent(args[i], n, steps[i], (npy_intp)kjit_dtype_size_of(loop->types[i]), &lo, &hi);
        if (lo < ohi && olo < hi)
            return 1;
    }
    return 0;
}

static void ufunc_loop(char **args, npy_intp const *dimensions, npy_intp const *steps,
                       void *data)
{
    UfuncLoop *loop = data;
    kjit_array arrays[FAST_MAX_ARGS + 1];
    kjit_arg kargs[FAST_MAX_ARGS];
    npy_intp n = dimensions[0];
    int sequential = loop_is_sequential(loop, args, n, steps);
    for (int i = 0; i <= loop->nin; i++) {
        kjit_array *a = &arrays[i];
        memset(a, 0, sizeof *a);
        a->data = args[i];
        a->dtype = loop->types[i];
        a->ndim = 1;
        a->shape[0] = sequential ? 1 : n;
        a->strides[0] = steps[i];
        a->memory = KJIT_MEMORY_HOST;
        if (i < loop->nin) {
            kargs[i].kind = KJIT_ARG_ARRAY;
            kargs[i].dtype = a->dtype;
            kargs[i].value.array = a;
        }
    }
    kjit_status status = KJIT_OK;
    if (!sequential) {
        status = kj_call(loop->handle, kargs, loop->nin, &arrays[loop->nin], NULL);
    } else {
        for (npy_intp e = 0; e < n && status == KJIT_OK; e++) {
            for (int i = 0; i <= loop->nin; i++)
                arrays[i].data = args[i] + e * steps[i];
            status = kj_call(loop->handle, kargs, loop->nin, &arrays[loop->nin], NULL);
        }
    }
    if (status != KJIT_OK) {
        /* NumPy may run the loop without the GIL: take it to raise */
        PyGILState_STATE gil = PyGILState_Ensure();
        if (!PyErr_Occurred())
            raise_for(loop->context, status);
        PyGILState_Release(gil);
    }
}

/*
 * A @guvectorize loop: NumPy hands over the outer loop (dimensions[0]
 * elements, steps[0..nargs) apart) and the core sizes (dimensions[1..]) and
 * strides (steps[nargs..], operand by operand).  Each operand becomes a
 * kjit_array of one loop dimension, then its core, and the whole loop is one
 * kjit_call of the signature the types pick: kjit runs its loop over the
 * elements (a broadcast operand has a loop stride of 0, which kjit reads as
 * NumPy does).  NumPy copies operands that overlap an output first
 * (gufuncs do not promise an order), so no sequential case arises here.
 */
static void gufunc_loop(char **args, npy_intp const *dimensions, npy_intp const *steps,
                        void *data)
{
    UfuncLoop *loop = data;
    int nargs = loop->nin + loop->nout;
    kjit_array arrays[FAST_MAX_ARGS + 1];
    kjit_arg kargs[FAST_MAX_ARGS + 1];
    for (int q = 0; q < nargs; q++) {
        kjit_array *a = &arrays[q];
        memset(a, 0, sizeof *a);
        a->data = args[q];
        a->dtype = loop->types[q];
        a->ndim = 1 + loop->core_ndim[q];
        a->shape[0] = dimensions[0];
        a->strides[0] = steps[q];
        for (int d = 0; d < loop->core_ndim[q]; d++) {
            a->shape[1 + d] = dimensions[1 + loop->core_dim[q][d]];
            a->strides[1 + d] = steps[nargs + loop->core_offset[q] + d];
        }
        a->memory = KJIT_MEMORY_HOST;
        kargs[q].kind = KJIT_ARG_ARRAY;
        kargs[q].dtype = a->dtype;
        kargs[q].value.array = a;
    }
    kjit_status status = kj_call(loop->handle, kargs, nargs, NULL, NULL);
    if (status != KJIT_OK) {
        PyGILState_STATE gil = PyGILState_Ensure();
        if (!PyErr_Occurred())
            raise_for(loop->context, status);
        PyGILState_Release(gil);
    }
}

/* The core dimensions NumPy parsed out of a gufunc's signature, into each
 * loop's data; -1 with an exception when a core is deeper than kjit_array. */
static int gufunc_cores(PyUFuncObject *u, UfuncKeep *keep)
{
    int nargs = u->nin + u->nout;
    for (int q = 0; q < nargs; q++) {
        int rank = u->core_num_dims[q];
        if (rank + 1 > KJIT_MAX_DIMS) {
            PyErr_Format(PyExc_ValueError, "make_ufunc: operand %d has %d core dimensions; "
                         "kjit arrays have at most %d dimensions", q, rank, KJIT_MAX_DIMS);
            return -1;
        }
        for (int l = 0; l < keep->nloops; l++) {
            UfuncLoop *loop = &keep->loops[l];
            loop->core_ndim[q] = rank;
            loop->core_offset[q] = u->core_offsets[q];
            for (int d = 0; d < rank; d++)
                loop->core_dim[q][d] = u->core_dim_ixs[u->core_offsets[q] + d];
        }
    }
    return 0;
}

static void ufunc_keep_free(PyObject *capsule)
{
    UfuncKeep *keep = PyCapsule_GetPointer(capsule, "kjit.ufunc");
    if (!keep)
        return;
    Py_XDECREF(keep->function);
    PyMem_Free(keep->funcs);
    PyMem_Free(keep->data);
    PyMem_Free(keep->types);
    PyMem_Free(keep->loops);
    PyMem_Free(keep->name);
    PyMem_Free(keep->doc);
    PyMem_Free(keep);
}

/* make_ufunc(function, handle, context, name, doc, nin, loops[, nout,
 * signature]): loops is a list of tuples of kjit codes, the inputs' then the
 * outputs'.  With a signature (a @guvectorize layout, "(n),(n)->()"), a
 * generalized ufunc of nout outputs; without, a ufunc of one. */
static PyObject *make_ufunc(PyObject *module, PyObject *args)
{
    PyObject *function, *handle, *context, *loops;
    const char *name, *doc, *signature = NULL;
    int nin, nout = 1;
    if (!PyArg_ParseTuple(args, "OOOssiO!|iz", &function, &handle, &context, &name, &doc, &nin,
                          &PyList_Type, &loops, &nout, &signature))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(loops);
    if (n < 1 || nin < 1 || nout < 1 || nin + nout > FAST_MAX_ARGS + 1 ||
        (!signature && nout != 1)) {
        PyErr_SetString(PyExc_ValueError, "make_ufunc: no loops, too many operands, or "
                        "several outputs without a signature");
        return NULL;
    }
    int nargs = nin + nout;
    UfuncKeep *keep = PyMem_Calloc(1, sizeof *keep);
    if (!keep)
        return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(keep, "kjit.ufunc", ufunc_keep_free);
    if (!capsule) {
        PyMem_Free(keep);
        return NULL;
    }
    Py_INCREF(function);
    keep->function = function;
    keep->nloops = (int)n;
    keep->funcs = PyMem_Calloc((size_t)n, sizeof *keep->funcs);
    keep->data = PyMem_Calloc((size_t)n, sizeof *keep->data);
    keep->types = PyMem_Calloc((size_t)n * (size_t)nargs, 1);
    keep->loops = PyMem_Calloc((size_t)n, sizeof *keep->loops);
    keep->name = PyMem_Malloc(strlen(name) + 1);
    keep->doc = PyMem_Malloc(strlen(doc) + 1);
    if (!keep->funcs || !keep->data || !keep->types || !keep->loops || !keep->name ||
        !keep->doc) {
        Py_DECREF(capsule);
        return PyErr_NoMemory();
    }
    strcpy(keep->name, name);
    strcpy(keep->doc, doc);
    void *h = PyLong_AsVoidPtr(handle), *c = PyLong_AsVoidPtr(context);
    if (PyErr_Occurred()) {
        Py_DECREF(capsule);
        return NULL;
    }
    for (Py_ssize_t l = 0; l < n; l++) {
        PyObject *codes = PyList_GET_ITEM(loops, l);
        if (!PyTuple_Check(codes) || PyTuple_GET_SIZE(codes) != nargs) {
            Py_DECREF(capsule);
            PyErr_SetString(PyExc_ValueError, "make_ufunc: a loop's codes are not nin + nout");
            return NULL;
        }
        UfuncLoop *loop = &keep->loops[l];
        loop->handle = h;
        loop->context = c;
        loop->nin = nin;
        loop->nout = nout;
        for (int i = 0; i < nargs; i++) {
            long code = PyLong_AsLong(PyTuple_GET_ITEM(codes, i));
            int typenum = typenum_of_code((int)code);
            if (typenum < 0) {
                Py_DECREF(capsule);
                if (!PyErr_Occurred())
                    PyErr_Format(PyExc_ValueError, "make_ufunc: kjit type %ld has no NumPy "
                                 "type", code);
                return NULL;
            }
            loop->types[i] = (kjit_dtype)code;
            keep->types[l * nargs + i] = (char)typenum;
        }
        keep->funcs[l] = signature ? gufunc_loop : ufunc_loop;
        keep->data[l] = loop;
    }
    PyObject *ufunc =
        signature ? PyUFunc_FromFuncAndDataAndSignature(keep->funcs, keep->data, keep->types,
                                                        (int)n, nin, nout, PyUFunc_None,
                                                        keep->name, keep->doc, 0, signature)
                  : PyUFunc_FromFuncAndData(keep->funcs, keep->data, keep->types, (int)n, nin,
                                            1, PyUFunc_None, keep->name, keep->doc, 0);
    if (!ufunc) {
        Py_DECREF(capsule);
        return NULL;
    }
    if (signature && gufunc_cores((PyUFuncObject *)ufunc, keep) < 0) {
        Py_DECREF(ufunc);
        Py_DECREF(capsule);
        return NULL;
    }
    /* the ufunc holds what its loops read (NumPy releases `obj` with it) */
    ((PyUFuncObject *)ufunc)->obj = capsule;
    return ufunc;
}

/* ------------------------------------------------------------------ module */

/* register_cupy(cupy.ndarray): the Python path's converter met CuPy's array
 * type (_arrays.converter_for), so calls with such arrays may take this
 * path; cupy is never imported from here. */
static PyObject *register_cupy(PyObject *module, PyObject *arg)
{
    if (!PyType_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "register_cupy takes cupy.ndarray");
        return NULL;
    }
    Py_INCREF(arg);
    Py_XSETREF(cupy_array, (PyTypeObject *)arg);
    Py_RETURN_NONE;
}

/* _pack_cupy(x): what pack_cupy reads of a CuPy-like array, as (address,
 * kjit code, shape, strides, is device memory), or None where the Python
 * path would take it; for the tests, which have no GPU to run it on. */
static PyObject *pack_cupy_for_tests(PyObject *module, PyObject *x)
{
    kjit_array a;
    if (pack_cupy(x, &a) != PACK_OK)
        Py_RETURN_NONE;
    PyObject *shape = PyTuple_New(a.ndim), *strides = PyTuple_New(a.ndim);
    if (!shape || !strides) {
        Py_XDECREF(shape);
        Py_XDECREF(strides);
        return NULL;
    }
    for (int d = 0; d < a.ndim; d++) {
        PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(a.shape[d]));
        PyTuple_SET_ITEM(strides, d, PyLong_FromLongLong(a.strides[d]));
    }
    return Py_BuildValue("NiNNO", PyLong_FromVoidPtr(a.data), (int)a.dtype, shape, strides,
                         a.memory == KJIT_MEMORY_DEVICE ? Py_True : Py_False);
}

/* use_vectorcall(cls): calls of a Python subclass of Vectorized (kjit's
 * VectorizedFunction) take the vectorcall too.  Python 3.12 passes the flag
 * on to such a class by itself; before, a heap type does not inherit it.
 * The instance's function pointer sits where the base put it (the
 * subclass's layout starts with Vectorized's), and a __call__ the class
 * replaces is still honoured (call_replaced). */
static PyObject *use_vectorcall(PyObject *module, PyObject *arg)
{
    if (!PyType_Check(arg) || !PyType_IsSubtype((PyTypeObject *)arg, &VectorizedType)) {
        PyErr_SetString(PyExc_TypeError, "use_vectorcall takes a subclass of Vectorized");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)arg;
    if (cls->tp_call != vectorized_call)
        Py_RETURN_FALSE; /* a __call__ of its own: tp_call it is */
    cls->tp_vectorcall_offset = offsetof(Vectorized, vectorcall);
    cls->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
    PyType_Modified(cls);
    Py_RETURN_TRUE;
}

static void find_slots(PyTypeObject *type);

/* setup(kjit_call, kjit_function_match, kjit_launch_ex, raise_status, DeviceArray
 *       [, alloc_device[, kjit_call_async, Stream, stream_of, alloc_cupy]]) */
static PyObject *setup(PyObject *module, PyObject *args)
{
    PyObject *call, *match, *launch, *raiser, *devtype, *alloc = NULL, *call_async = NULL,
             *streams = NULL, *of = NULL, *cupy_alloc = NULL;
    if (!PyArg_ParseTuple(args, "OOOOO!|OOOOO", &call, &match, &launch, &raiser, &PyType_Type,
                          &devtype, &alloc, &call_async, &streams, &of, &cupy_alloc))
        return NULL;
    if (streams && !PyType_Check(streams)) {
        PyErr_SetString(PyExc_TypeError, "kjit._fast.setup: Stream is not a type");
        return NULL;
    }
    void *a = call_async ? PyLong_AsVoidPtr(call_async) : NULL;
    if (PyErr_Occurred())
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)devtype, &DeviceBaseType)) {
        /* pack_device_array reads DeviceBase's fields */
        PyErr_SetString(PyExc_ImportError, "kjit._fast.setup: DeviceArray does not derive "
                        "from kjit._fast.DeviceBase (a package older than this extension?)");
        return NULL;
    }
    void *c = PyLong_AsVoidPtr(call), *m = PyLong_AsVoidPtr(match),
         *l = PyLong_AsVoidPtr(launch);
    if (PyErr_Occurred())
        return NULL;
    if (!c || !m || !l) {
        PyErr_SetString(PyExc_ValueError, "kjit._fast.setup: a NULL function address");
        return NULL;
    }
    kj_call = (call_fn)c;
    kj_match = (match_fn)m;
    kj_launch_ex = (launch_fn)l;
    kj_call_async = (call_async_fn)a;
    Py_XINCREF(streams);
    Py_XSETREF(stream_type, (PyTypeObject *)streams);
    Py_XINCREF(of);
    Py_XSETREF(stream_of, of);
    Py_XINCREF(cupy_alloc);
    Py_XSETREF(alloc_cupy, cupy_alloc);
    Py_INCREF(raiser);
    Py_XSETREF(raise_status, raiser);
    Py_INCREF(devtype);
    Py_XSETREF(device_array, (PyTypeObject *)devtype);
    find_slots(device_array);
    Py_XINCREF(alloc);
    Py_XSETREF(alloc_device, alloc);
    Py_RETURN_NONE;
}

/* ================================================== the device memory pool */

/*
 * Freed device arrays' memory, by size, for the next array of that size (a
 * 1,000-element call must not pay cuMemAlloc, and cuMemFree waits for the
 * whole device).  A Context keeps one (`_fast.Pool(free, limit)`, free being
 * its `_free(ptr)`); `pool.block(ptr, size)` is the owner a DeviceArray keeps,
 * whose deallocation gives the memory back here in C: no Python `__del__`,
 * no lock (every method runs under the GIL and calls nothing that releases
 * it, except `free` past the limit).  `take(size)` is a freed block's pointer
 * or None; `drain()` empties the pool and returns its pointers for the caller
 * to free (Context.empty_pool, and the out-of-memory retry).
 */
typedef struct {
    PyObject_HEAD
    PyObject *free;   /* callable(ptr): frees a block past the limit */
    PyObject *lists;  /* dict: size (int) -> list of pointers (ints) */
    Py_ssize_t bytes; /* held in the lists */
    Py_ssize_t limit;
} Pool;

typedef struct {
    PyObject_HEAD
    Pool *pool;
    unsigned long long ptr;
    Py_ssize_t size;
    PyObject *weakrefs;
} PoolBlock;

static PyTypeObject PoolType, PoolBlockType;

static PyObject *pool_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *free;
    Py_ssize_t limit;
    if (kwargs && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "Pool(free, limit) takes no keywords");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "On:Pool", &free, &limit))
        return NULL;
    Pool *self = (Pool *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->lists = PyDict_New();
    if (!self->lists) {
        Py_DECREF(self);
        return NULL;
    }
    Py_INCREF(free);
    self->free = free;
    self->limit = limit;
    return (PyObject *)self;
}

static int pool_traverse(Pool *self, visitproc visit, void *arg)
{
    Py_VISIT(self->free);
    Py_VISIT(self->lists);
    return 0;
}

static int pool_clear(Pool *self)
{
    Py_CLEAR(self->free);
    Py_CLEAR(self->lists);
    return 0;
}

static void pool_dealloc(Pool *self)
{
    /* what is left in the lists stays allocated: a Context lives as long as
     * the process (kjit.context caches it), and its Context frees the
     * device memory with it */
    PyObject_GC_UnTrack(self);
    pool_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A freed block of `size` bytes out of the pool: 1 with *ptr set, 0 when
 * there is none, -1 on an error (set). */
static int pool_pop(Pool *self, Py_ssize_t bytes, unsigned long long *ptr)
{
    if (!self->lists)
        return 0;
    PyObject *size = PyLong_FromSsize_t(bytes);
    if (!size)
        return -1;
    PyObject *list = PyDict_GetItemWithError(self->lists, size);
    Py_DECREF(size);
    if (!list)
        return PyErr_Occurred() ? -1 : 0;
    Py_ssize_t n = PyList_GET_SIZE(list);
    if (n == 0)
        return 0;
    *ptr = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(list, n - 1));
    if (PyErr_Occurred() || PyList_SetSlice(list, n - 1, n, NULL) < 0)
        return -1;
    self->bytes -= bytes;
    return 1;
}

static PyObject *pool_block_new(Pool *pool, unsigned long long ptr, Py_ssize_t size)
{
    PoolBlock *block = PyObject_New(PoolBlock, &PoolBlockType);
    if (!block)
        return NULL;
    Py_INCREF(pool);
    block->pool = pool;
    block->ptr = ptr;
    block->size = size;
    block->weakrefs = NULL;
    return (PyObject *)block;
}

static PyObject *pool_take(Pool *self, PyObject *size)
{
    PyObject *list = self->lists ? PyDict_GetItemWithError(self->lists, size) : NULL;
    if (!list) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyList_GET_SIZE(list);
    if (n == 0)
        Py_RETURN_NONE;
    PyObject *ptr = PyList_GET_ITEM(list, n - 1);
    Py_INCREF(ptr);
    if (PyList_SetSlice(list, n - 1, n, NULL) < 0) {
        Py_DECREF(ptr);
        return NULL;
    }
    self->bytes -= PyLong_AsSsize_t(size);
    return ptr;
}

static PyObject *pool_block(Pool *self, PyObject *args)
{
    unsigned long long ptr;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "Kn:block", &ptr, &size))
        return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "block: a negative size");
        return NULL;
    }
    return pool_block_new(self, ptr, size);
}

static PyObject *pool_drain(Pool *self, PyObject *unused)
{
    (void)unused;
    PyObject *all = PyList_New(0);
    if (!all || !self->lists)
        return all;
    PyObject *size, *list;
    Py_ssize_t at = 0;
    while (PyDict_Next(self->lists, &at, &size, &list)) {
        Py_ssize_t n = PyList_GET_SIZE(list);
        for (Py_ssize_t i = 0; i < n; i++)
            if (PyList_Append(all, PyList_GET_ITEM(list, i)) < 0) {
                Py_DECREF(all);
                return NULL;
            }
    }
    PyDict_Clear(self->lists);
    self->bytes = 0;
    return all;
}

/* The block's memory back into its pool (or freed past the limit); an
 * exception on the way is reported as unraisable, as a __del__'s is. */
static void pool_block_dealloc(PoolBlock *self)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (self->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)self);
    Pool *pool = self->pool;
    int kept = 0;
    if (pool->lists && pool->bytes + self->size <= pool->limit) {
        PyObject *size = PyLong_FromSsize_t(self->size), *ptr = PyLong_FromUnsignedLongLong(self->ptr);
        PyObject *list = size ? PyDict_GetItemWithError(pool->lists, size) : NULL;
        if (size && ptr && !list && !PyErr_Occurred()) {
            list = PyList_New(0);
            if (list && PyDict_SetItem(pool->lists, size, list) < 0)
                Py_CLEAR(list);
            Py_XDECREF(list); /* the dict holds it */
        }
        if (list && ptr && PyList_Append(list, ptr) == 0) {
            pool->bytes += self->size;
            kept = 1;
        }
        Py_XDECREF(size);
        Py_XDECREF(ptr);
    }
    if (!kept && !PyErr_Occurred() && pool->free) {
        PyObject *r = PyObject_CallFunction(pool->free, "K", self->ptr);
        Py_XDECREF(r);
    }
    if (PyErr_Occurred())
        PyErr_WriteUnraisable((PyObject *)pool);
    Py_DECREF(pool);
    PyObject_Free(self);
    PyErr_Restore(type, value, traceback);
}

/* ------------------------------------------- a call's result, built in C */

/*
 * The DeviceArray a call without out= returns on kjit device arrays, built
 * here as Context.device_array and DeviceArray._from_layout build it: memory
 * from the template's context's pool (`_fast.Pool`, or its `_allocate(size)`
 * when the pool has no block of that size class), a PoolBlock as its owner,
 * the kjit_array in the object, and the slots a DeviceArray has (context,
 * dtype, shape, C-order strides, _code, _owner, _arg, _info).  Done in
 * Python, that was about 1 us of a 0.3 us call on the fake driver: frames,
 * a layout lookup, the slots set one by one through descriptors.  The slots
 * are written at their offsets, which setup() read from DeviceArray's
 * member descriptors; where it could not (a class of other slots), or the
 * context has no C pool (KJIT_PURE_PYTHON's), this returns NULL with no
 * error and the caller asks Python's allocator.
 */
enum { SLOT_CONTEXT, SLOT_DTYPE, SLOT_SHAPE, SLOT_STRIDES, SLOT_CODE, SLOT_OWNER, SLOT_ARG,
       SLOT_INFO, SLOT_COUNT };
static const char *const slot_names[SLOT_COUNT] = {"context", "dtype", "shape", "strides",
                                                   "_code", "_owner", "_arg", "_info"};
static Py_ssize_t slot_offset[SLOT_COUNT];
static bool slots_known;

/* Where DeviceArray keeps each slot (its __slots__' member descriptors). */
static void find_slots(PyTypeObject *type)
{
    slots_known = false;
    for (int i = 0; i < SLOT_COUNT; i++) {
        PyObject *descr = PyObject_GetAttrString((PyObject *)type, slot_names[i]);
        if (!descr) {
            PyErr_Clear();
            return;
        }
        bool member = Py_IS_TYPE(descr, &PyMemberDescr_Type);
        PyMemberDef *def = member ? ((PyMemberDescrObject *)descr)->d_member : NULL;
        Py_DECREF(descr);
        if (!def || def->type != T_OBJECT_EX || def->offset < (Py_ssize_t)sizeof(DeviceBase))
            return;
        slot_offset[i] = def->offset;
    }
    slots_known = true;
}

static PyObject **slot(PyObject *object, int which)
{
    return (PyObject **)((char *)object + slot_offset[which]);
}

/* The context whose pool results were last taken from, and what of it. */
static PyObject *pool_context;  /* the kjit Context (held) */
static Pool *context_pool;      /* its _cpool */
static PyObject *context_alloc; /* its _allocate(size) */
static int context_gpu;         /* its is_cuda */

static int know_context(PyObject *context)
{
    if (context == pool_context)
        return 1;
    PyObject *pool = PyObject_GetAttrString(context, "_cpool");
    PyObject *alloc = pool ? PyObject_GetAttrString(context, "_allocate") : NULL;
    PyObject *cuda = alloc ? PyObject_GetAttrString(context, "is_cuda") : NULL;
    int gpu = cuda ? PyObject_IsTrue(cuda) : -1;
    Py_XDECREF(cuda);
    if (gpu < 0 || !Py_IS_TYPE(pool, &PoolType)) {
        Py_XDECREF(pool);
        Py_XDECREF(alloc);
        return gpu < 0 ? -1 : 0;
    }
    Py_INCREF(context);
    Py_XSETREF(pool_context, context);
    Py_XSETREF(context_pool, (Pool *)pool);
    Py_XSETREF(context_alloc, alloc);
    context_gpu = gpu;
    return 1;
}

static PyObject *new_device_array(PyObject *template, int nd, const npy_intp *shape,
                                  PyObject *shape_tuple, int code)
{
    int typenum = typenum_of_code(code);
    PyObject *context = slots_known ? *slot(template, SLOT_CONTEXT) : NULL;
    if (!context || typenum < 0 || nd > KJIT_MAX_DIMS)
        return NULL;
    int known = know_context(context);
    if (known <= 0)
        return NULL;
    /* C-order strides and the bytes, in the pool's 256-byte size classes */
    int64_t strides[KJIT_MAX_DIMS];
    int64_t step = (int64_t)kjit_dtype_size_of((kjit_dtype)code);
    for (int d = nd - 1; d >= 0; d--) {
        strides[d] = step;
        if (shape[d] && step > (INT64_MAX - 255) / shape[d])
            return NULL; /* too large: Python's allocator says so */
        step *= shape[d];
    }
    Py_ssize_t size = (Py_ssize_t)((step + 255) & ~(int64_t)255);
    unsigned long long ptr = 0;
    Pool *pool = context_pool;
    Py_INCREF(pool); /* (the cache may change under _allocate's Python code) */
    int found = pool_pop(pool, size, &ptr);
    if (found == 0) {
        PyObject *got = PyObject_CallFunction(context_alloc, "n", size);
        if (got) {
            ptr = PyLong_AsUnsignedLongLong(got);
            Py_DECREF(got);
        }
        found = PyErr_Occurred() ? -1 : 1;
    }
    PyObject *owner = found > 0 ? pool_block_new(pool, ptr, size) : NULL;
    Py_DECREF(pool);
    if (!owner)
        return NULL; /* (the error of the pool or of the allocation) */
    /* from here the owner gives the memory back if anything fails */
    PyObject *self = device_array->tp_alloc(device_array, 0);
    PyObject *strides_tuple = PyTuple_New(nd);
    PyObject *code_obj = PyLong_FromLong(code);
    PyObject *info = PyTuple_New(4);
    if (!self || !strides_tuple || !code_obj || !info)
        goto fail;
    for (int d = 0; d < nd; d++) {
        PyObject *stride = PyLong_FromLongLong(strides[d]);
        if (!stride)
            goto fail;
        PyTuple_SET_ITEM(strides_tuple, d, stride);
    }
    DeviceBase *base = (DeviceBase *)self;
    kjit_array *array = &base->array;
    memset(array, 0, sizeof *array);
    array->data = (void *)(uintptr_t)ptr;
    array->dtype = (kjit_dtype)code;
    array->ndim = nd;
    for (int d = 0; d < nd; d++) {
        array->shape[d] = shape[d];
        array->strides[d] = strides[d];
    }
    array->memory = context_gpu ? KJIT_MEMORY_DEVICE : KJIT_MEMORY_HOST;
    base->addr = (unsigned long long)(uintptr_t)array;
    base->gpu = (char)context_gpu;
    kjit_arg arg;
    memset(&arg, 0, sizeof arg);
    arg.kind = KJIT_ARG_ARRAY;
    arg.dtype = (kjit_dtype)code;
    arg.value.array = array;
    PyObject *arg_bytes = PyBytes_FromStringAndSize((const char *)&arg, sizeof arg);
    if (!arg_bytes)
        goto fail;
    Py_INCREF(code_obj);
    PyTuple_SET_ITEM(info, 0, code_obj);
    Py_INCREF(shape_tuple);
    PyTuple_SET_ITEM(info, 1, shape_tuple);
    Py_INCREF(alloc_device ? alloc_device : Py_None);
    PyTuple_SET_ITEM(info, 2, alloc_device ? alloc_device : Py_None);
    PyTuple_SET_ITEM(info, 3, PyBool_FromLong(context_gpu));
    Py_INCREF(context);
    *slot(self, SLOT_CONTEXT) = context;
    *slot(self, SLOT_DTYPE) = (PyObject *)PyArray_DescrFromType(typenum);
    Py_INCREF(shape_tuple);
    *slot(self, SLOT_SHAPE) = shape_tuple;
    *slot(self, SLOT_STRIDES) = strides_tuple;
    *slot(self, SLOT_CODE) = code_obj;
    *slot(self, SLOT_OWNER) = owner;
    *slot(self, SLOT_ARG) = arg_bytes;
    *slot(self, SLOT_INFO) = info;
    return self;
fail:
    Py_XDECREF(self);
    Py_XDECREF(strides_tuple);
    Py_XDECREF(code_obj);
    Py_XDECREF(info);
    Py_DECREF(owner);
    return NULL;
}

static PyMemberDef pool_members[] = {
    {"bytes", T_PYSSIZET, offsetof(Pool, bytes), READONLY, "bytes held for reuse"},
    {"limit", T_PYSSIZET, offsetof(Pool, limit), 0, "the most bytes held for reuse"},
    {NULL, 0, 0, 0, NULL}};

static PyMethodDef pool_methods[] = {
    {"take", (PyCFunction)pool_take, METH_O, "take(size): a freed block's pointer, or None"},
    {"block", (PyCFunction)pool_block, METH_VARARGS,
     "block(ptr, size): the owner that gives the memory back when freed"},
    {"drain", (PyCFunction)pool_drain, METH_NOARGS,
     "drain(): every pointer held, the pool emptied (the caller frees them)"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject PoolType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kjit._fast.Pool",
    .tp_basicsize = sizeof(Pool),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "freed device memory by size, for reuse",
    .tp_new = pool_new,
    .tp_dealloc = (destructor)pool_dealloc,
    .tp_traverse = (traverseproc)pool_traverse,
    .tp_clear = (inquiry)pool_clear,
    .tp_methods = pool_methods,
    .tp_members = pool_members,
};

static PyMemberDef pool_block_members[] = {
    {"ptr", T_ULONGLONG, offsetof(PoolBlock, ptr), READONLY, "the block's address"},
    {"size", T_PYSSIZET, offsetof(PoolBlock, size), READONLY, "its bytes"},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject PoolBlockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kjit._fast.PoolBlock",
    .tp_basicsize = sizeof(PoolBlock),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a pool's block, given back when freed",
    .tp_dealloc = (destructor)pool_block_dealloc,
    .tp_weaklistoffset = offsetof(PoolBlock, weakrefs),
    .tp_members = pool_block_members,
};

static PyMethodDef module_methods[] = {
    {"setup", setup, METH_VARARGS,
     "setup(kjit_call, kjit_function_match, kjit_launch_ex, raise_status, DeviceArray[, "
     "alloc_device[, kjit_call_async, Stream, stream_of, alloc_cupy]])"},
    {"register_cupy", register_cupy, METH_O,
     "register_cupy(cupy.ndarray): calls with CuPy arrays go through C on cuda"},
    {"_pack_cupy", pack_cupy_for_tests, METH_O,
     "_pack_cupy(x): (address, code, shape, strides, device) as a call reads a CuPy array"},
    {"use_vectorcall", use_vectorcall, METH_O,
     "use_vectorcall(cls): calls of this subclass of Vectorized take the vectorcall protocol"},
    {"make_ufunc", make_ufunc, METH_VARARGS,
     "make_ufunc(function, handle, context, name, doc, nin, loops[, nout, signature]): a "
     "numpy.ufunc, generalized when a signature is given"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "kjit._fast",
    "The compiled hot path of kjit's @vectorize calls and kernel launches.", -1,
    module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fast(void)
{
    import_array();
    import_umath();
    if (PyType_Ready(&VectorizedType) < 0 || PyType_Ready(&LaunchType) < 0 ||
        PyType_Ready(&DeviceBaseType) < 0 || PyType_Ready(&PoolType) < 0 ||
        PyType_Ready(&PoolBlockType) < 0)
        return NULL;
    str_call_slow = PyUnicode_InternFromString("_call_slow");
    str_out = PyUnicode_InternFromString("out");
    str_stream = PyUnicode_InternFromString("stream");
    str_ptr_attr = PyUnicode_InternFromString("_ptr");
    str_dtype = PyUnicode_InternFromString("dtype");
    str_shape = PyUnicode_InternFromString("shape");
    str_strides = PyUnicode_InternFromString("strides");
    str_data = PyUnicode_InternFromString("data");
    str_ptr = PyUnicode_InternFromString("ptr");
    if (!str_call_slow || !str_out || !str_stream || !str_ptr_attr || !str_dtype || !str_shape ||
        !str_strides || !str_data || !str_ptr)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    Py_INCREF(&VectorizedType);
    Py_INCREF(&LaunchType);
    Py_INCREF(&DeviceBaseType);
    if (PyModule_AddObject(m, "Vectorized", (PyObject *)&VectorizedType) < 0 ||
        PyModule_AddObject(m, "Launch", (PyObject *)&LaunchType) < 0 ||
        PyModule_AddObject(m, "DeviceBase", (PyObject *)&DeviceBaseType) < 0 ||
        PyModule_AddObject(m, "Pool", (PyObject *)&PoolType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
