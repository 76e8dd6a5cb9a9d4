"""Arrays: what a Python object becomes in a kjit call, and kjit's own device arrays.

Every argument goes through a converter picked by its exact type (one dict
lookup on the hot path): NumPy arrays, kjit's DeviceArray, CuPy arrays, PyTorch
tensors, anything with __cuda_array_interface__ (Numba's device arrays), then
anything with __dlpack__, then Python and NumPy scalars.  No converter copies:
views, transposes and broadcasts go to kjit as strides in bytes.

A converter packs argument i into a call's buffers (the kjit_arg, and the
kjit_array it points to) and returns (code, shape, allocator, gpu):
code is the element type (arrays) or -1 - type (scalars, for picking the
result type), shape is None for scalars, allocator makes an output like this
argument (None: a NumPy array), and gpu says the memory is on a GPU.
"""
import ctypes
import math
import os
import weakref

import numpy as np

from . import _lib
from ._lib import (ARG_ARRAY, ARG_ARRAY_STRUCT, ARG_COMPLEX_STRUCT, ARG_FLOAT_STRUCT,
                   ARG_INT_STRUCT, ARG_SCALAR, ARG_UINT_STRUCT, ARRAY_STRUCT, MAX_DIMS,
                   MEMORY_DEVICE, MEMORY_HOST, lib)
from .errors import DTypeError, InvalidArgumentError, ShapeError, from_status

ARRAY_SIZE = ctypes.sizeof(_lib.Array)
_ARG_PAD = bytes(8)
ARG_SIZE = ctypes.sizeof(_lib.Arg)
PAD = tuple((0,) * (MAX_DIMS - n) for n in range(MAX_DIMS + 1))

# bf16: NumPy has none.  With ml_dtypes installed its bfloat16 is kjit's bf16
# both ways; without it, a bf16 argument is an array of two raw bytes
# (a.view("V2"), what np.load gives for a bf16 .npy file) and a bf16 result
# comes back the same way: r.view(np.uint16) are the raw bits, and
# (r.view(np.uint16).astype(np.uint32) << 16).view(np.float32) the values.
try:
    import ml_dtypes
    BF16_DTYPE = np.dtype(ml_dtypes.bfloat16)
except ImportError:
    BF16_DTYPE = None

# NumPy's types for kjit's, in kjit_dtype's order, and the way back.
NP_DTYPES = tuple(np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64,
                                        np.uint8, np.uint16, np.uint32, np.uint64,
                                        np.float32, np.float64, np.complex64, np.complex128,
                                        np.float16, BF16_DTYPE or np.dtype("V2")))
NP_CODES = {dtype: code for code, dtype in enumerate(NP_DTYPES)}
NP_CODES[np.dtype("V2")] = _lib.BF16
for _char in "lLqQ":  # the other spellings of the 64-bit integers
    NP_CODES.setdefault(np.dtype(_char), NP_CODES[np.dtype(_char).newbyteorder("=")])
SCALAR_TYPES = {t.type: code for code, t in enumerate(NP_DTYPES) if t.kind != "V"}


def dtype_code(dtype):
    """kjit's code for a NumPy dtype (or anything np.dtype takes), with the
    reason when kjit has no such type."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise DTypeError(f"{dtype!r} is not an element type") from None
    code = NP_CODES.get(dt)
    if code is None:
        raise DTypeError(_dtype_refusal(dt))
    return code


def _dtype_refusal(dt):
    if dt.hasobject:
        return ("object arrays hold Python objects, not numbers: kjit takes arrays of "
                "bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64, complex64, complex128")
    if not dt.isnative and NP_CODES.get(dt.newbyteorder("=")) is not None:
        return (f"the array's bytes are in non-native byte order ({dt.str}); convert it "
                f"first, e.g. a.astype(a.dtype.newbyteorder('='))")
    return (f"kjit has no element type for {dt} (it takes bool, int8..int64, "
            f"uint8..uint64, float16, bfloat16 (ml_dtypes, or raw 'V2'), float32, float64, "
            f"complex64, complex128)")


class CallBuffers:
    """The kjit_arg and kjit_array blocks of one call in flight, reused from a
    free list (one per thread in flight: calls release the GIL)."""
    __slots__ = ("args", "arrays", "args_addr", "arrays_addr", "args_view", "keep")

    def __init__(self, n):
        self.args = ctypes.create_string_buffer(ARG_SIZE * (n + 1))  # + the output's, unused
        self.arrays = ctypes.create_string_buffer(ARRAY_SIZE * (n + 1))  # + the output
        self.args_addr = ctypes.addressof(self.args)
        self.arrays_addr = ctypes.addressof(self.arrays)
        self.args_view = memoryview(self.args).cast("B")
        self.keep = []  # objects that must live until the call returns


def _pack_array(cb, i, ptr, code, shape, strides, memory):
    nd = len(shape)
    if nd > MAX_DIMS:
        raise ShapeError(f"argument {i} has {nd} dimensions; kjit takes at most {MAX_DIMS}")
    ARRAY_STRUCT.pack_into(cb.arrays, i * ARRAY_SIZE, ptr, code, nd, *shape, *PAD[nd],
                           *strides, *PAD[nd], memory)
    ARG_ARRAY_STRUCT.pack_into(cb.args, i * ARG_SIZE, ARG_ARRAY, code,
                               cb.arrays_addr + i * ARRAY_SIZE)


# ------------------------------------------------------------- converters

def _numpy(x, cb, i):
    code = NP_CODES.get(x.dtype)
    if code is None:
        raise DTypeError(f"argument {i}: {_dtype_refusal(x.dtype)}")
    _pack_array(cb, i, x.__array_interface__["data"][0], code, x.shape, x.strides, MEMORY_HOST)
    return code, x.shape, None, False


def _device_array(x, cb, i):
    start = i * ARG_SIZE
    cb.args_view[start:start + ARG_SIZE] = x._arg
    return x._info


def _alloc_numpy(template, shape, code):
    return np.empty(shape, NP_DTYPES[code])


def _alloc_like_kjit(template, shape, code):
    return template.context.device_array(shape, NP_DTYPES[code])


def _cupy(x, cb, i):
    code = NP_CODES.get(x.dtype)
    if code is None:
        raise DTypeError(f"argument {i}: {_dtype_refusal(x.dtype)}")
    _pack_array(cb, i, x.data.ptr, code, x.shape, x.strides, MEMORY_DEVICE)
    return code, x.shape, _alloc_cupy, True


def _alloc_cupy(template, shape, code):
    import cupy
    with template.device:
        return cupy.empty(shape, NP_DTYPES[code])


_TORCH_CODES = None
_TORCH_DTYPES = None


def _torch_tables():
    global _TORCH_CODES, _TORCH_DTYPES
    import torch
    names = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float32", "float64", "complex64", "complex128", "float16", "bfloat16")
    _TORCH_DTYPES = [getattr(torch, name, None) for name in names]
    _TORCH_CODES = {t: code for code, t in enumerate(_TORCH_DTYPES) if t is not None}


def _torch(x, cb, i):
    if _TORCH_CODES is None:
        _torch_tables()
    code = _TORCH_CODES.get(x.dtype)
    if code is None:
        raise DTypeError(f"argument {i}: kjit has no element type for {x.dtype}")
    if code >= _lib.C64 and (x.is_conj() or x.is_neg()):
        raise InvalidArgumentError(
            f"argument {i}: a tensor with a lazy conjugate or negation bit; call "
            f".resolve_conj() / .resolve_neg() first")
    gpu = x.is_cuda
    if not gpu and x.device.type != "cpu":
        raise InvalidArgumentError(f"argument {i}: a tensor on {x.device}; kjit takes cpu "
                                   f"and cuda tensors")
    item = x.element_size()
    shape = tuple(x.shape)
    _pack_array(cb, i, x.data_ptr(), code, shape, tuple(s * item for s in x.stride()),
                MEMORY_DEVICE if gpu else MEMORY_HOST)
    return code, shape, _alloc_torch, gpu


def _alloc_torch(template, shape, code):
    import torch
    return torch.empty(shape, dtype=_TORCH_DTYPES[code], device=template.device)


def _alloc_numba(template, shape, code):
    from numba import cuda
    return cuda.device_array(shape, NP_DTYPES[code])


def cai_view(cai, i="the array"):
    """(ptr, code, shape, strides in bytes) of a __cuda_array_interface__ dict."""
    dt = np.dtype(cai["typestr"])
    code = NP_CODES.get(dt)
    if code is None:
        raise DTypeError(f"argument {i}: {_dtype_refusal(dt)}")
    if cai.get("mask") is not None:
        raise InvalidArgumentError(f"argument {i}: masked device arrays are not supported")
    shape = tuple(cai["shape"])
    strides = cai.get("strides")
    if strides is None:
        strides, step = [], dt.itemsize
        for extent in reversed(shape):
            strides.append(step)
            step *= extent
        strides = tuple(reversed(strides))
    return cai["data"][0] or 0, code, shape, tuple(strides)


def _cuda_array_interface(x, cb, i):
    cai = x.__cuda_array_interface__
    ptr, code, shape, strides = cai_view(cai, i)
    stream = cai.get("stream")
    # 1 is the legacy default stream, which kjit's launches follow anyway.
    if stream not in (None, 1):
        cb.keep.append(("sync", stream))
    _pack_array(cb, i, ptr, code, shape, strides, MEMORY_DEVICE)
    module = type(x).__module__ or ""
    return code, shape, _alloc_numba if module.startswith("numba") else _alloc_like_kjit, True


def _dlpack(x, cb, i):
    view = from_dlpack(x)
    cb.keep.append(view)
    code, shape, _, gpu = _device_array(view, cb, i)
    return code, shape, (_alloc_like_kjit if gpu else None), gpu


def _array_like(x, cb, i):
    a = np.asarray(x)
    cb.keep.append(a)
    return _numpy(a, cb, i)


def _int(x, cb, i):
    try:
        ARG_INT_STRUCT.pack_into(cb.args, i * ARG_SIZE, ARG_SCALAR, _lib.I64, x)
    except struct_error:
        if 0 <= x < 1 << 64:
            ARG_UINT_STRUCT.pack_into(cb.args, i * ARG_SIZE, ARG_SCALAR, _lib.U64, x)
            return -1 - _lib.U64, None, None, False
        raise InvalidArgumentError(f"argument {i}: {x} does not fit in 64 bits") from None
    return -1 - _lib.I64, None, None, False


def _float(x, cb, i):
    ARG_FLOAT_STRUCT.pack_into(cb.args, i * ARG_SIZE, ARG_SCALAR, _lib.F64, x)
    return -1 - _lib.F64, None, None, False


def _complex(x, cb, i):
    ARG_COMPLEX_STRUCT.pack_into(cb.args, i * ARG_SIZE, ARG_SCALAR, _lib.C128, x.real, x.imag)
    return -1 - _lib.C128, None, None, False


def _bool(x, cb, i):
    ARG_INT_STRUCT.pack_into(cb.args, i * ARG_SIZE, ARG_SCALAR, _lib.BOOL, int(x))
    return -1 - _lib.BOOL, None, None, False


def _numpy_scalar(code):
    if code in (_lib.F32, _lib.F64, _lib.F16, _lib.BF16):
        def convert(x, cb, i):
            ARG_FLOAT_STRUCT.pack_into(cb.args, i * ARG_SIZE, ARG_SCALAR, code, float(x))
            return -1 - code, None, None, False
    elif code in (_lib.C64, _lib.C128):
        def convert(x, cb, i):
            ARG_COMPLEX_STRUCT.pack_into(cb.args, i * ARG_SIZE, ARG_SCALAR, code,
                                         float(x.real), float(x.imag))
            return -1 - code, None, None, False
    elif _lib.U8 <= code <= _lib.U64:
        def convert(x, cb, i):
            ARG_UINT_STRUCT.pack_into(cb.args, i * ARG_SIZE, ARG_SCALAR, code, int(x))
            return -1 - code, None, None, False
    else:
        def convert(x, cb, i):
            ARG_INT_STRUCT.pack_into(cb.args, i * ARG_SIZE, ARG_SCALAR, code, int(x))
            return -1 - code, None, None, False
    return convert


from struct import error as struct_error  # noqa: E402

CONVERTERS = {np.ndarray: _numpy, int: _int, float: _float, complex: _complex, bool: _bool}
for _type, _code in SCALAR_TYPES.items():
    CONVERTERS[_type] = _numpy_scalar(_code)


def _refuse(what):
    def convert(x, cb, i):
        raise DTypeError(f"argument {i} is {what}, which kjit cannot take")
    return convert


def converter_for(kind):
    """The converter for objects of type `kind`, found once and remembered."""
    conv = CONVERTERS.get(kind)
    if conv is not None:
        return conv
    module = kind.__module__ or ""
    if issubclass(kind, DeviceArray):
        conv = _device_array
    elif issubclass(kind, np.ndarray):
        conv = _numpy
    elif module.split(".")[0] == "cupy" and kind.__name__ == "ndarray":
        conv = _cupy
        if _register_cupy is not None:  # later calls read such arrays in C (cuda)
            _register_cupy(kind)
    elif module.split(".")[0] == "torch" and hasattr(kind, "data_ptr"):
        conv = _torch
    elif hasattr(kind, "__cuda_array_interface__"):
        conv = _cuda_array_interface
    elif hasattr(kind, "__dlpack__"):
        conv = _dlpack
    elif issubclass(kind, (str, bytes, dict, set)) or kind is type(None):
        conv = _refuse(f"a {kind.__name__}")
    elif issubclass(kind, np.generic):
        conv = _refuse(f"a NumPy {kind.__name__} scalar")
    else:
        conv = _array_like
    CONVERTERS[kind] = conv
    return conv


def array_address(cb, i):
    """The kjit_array that the kjit_arg in slot i points to."""
    return ARG_ARRAY_STRUCT.unpack_from(cb.args, i * ARG_SIZE)[2]


def pack_out(x, cb, i):
    """Packs an output array (a writable array of any kind) into slot i; its
    kjit_array is at array_address(cb, i)."""
    if isinstance(x, np.ndarray) and not x.flags.writeable:
        raise InvalidArgumentError("the output array is read-only")
    conv = CONVERTERS.get(type(x)) or converter_for(type(x))
    if conv in (_array_like, _int, _float, _complex, _bool) or type(x) in SCALAR_TYPES:
        raise InvalidArgumentError(f"out= must be an array, not {type(x).__name__}")
    return conv(x, cb, i)


# ------------------------------------------------------- kjit's device arrays

# With the compiled hot path (_fast.c), DeviceArray's `_addr` (the address of
# the kjit_array it keeps) and `_gpu` are fields of a C base that a call reads
# in place; without it, plain attributes.  (_core imports _fast the same way.)
try:
    if os.environ.get("KJIT_PURE_PYTHON"):
        raise ImportError("KJIT_PURE_PYTHON is set")
    from ._fast import DeviceBase as _DeviceBase
    from ._fast import register_cupy as _register_cupy
except ImportError:
    _DeviceBase = object
    _register_cupy = None


# Its attributes as slots: under a C base, Python (3.11) gives a class's
# instances a dict of their own, which made a DeviceArray 1 us slower to make
# than under `object` (a result of a call without out= is one); __dict__ and
# __weakref__ stay, for what else is set on one.
_DEVICE_SLOTS = ("context", "dtype", "shape", "strides", "_code", "_owner", "_struct", "_arg",
                 "_info", "__dict__", "__weakref__")


class DeviceArray(_DeviceBase):
    """An array in a kjit context's device memory (GPU memory on the cuda
    target, host memory on cpu targets, so that code written for cuda runs
    there too), or a view over another library's memory (from_dlpack).

    It exports __cuda_array_interface__ and __dlpack__ (GPU memory), or
    __array_interface__ and __dlpack__ (host memory), so CuPy, PyTorch, Numba
    and NumPy take it without a copy.
    """
    __slots__ = _DEVICE_SLOTS + (() if _DeviceBase is not object else ("_addr", "_gpu"))

    def __init__(self, context, ptr, shape, dtype, strides=None, gpu=False, owner=None):
        self.context = context
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(s) for s in shape)
        if len(self.shape) > MAX_DIMS:
            raise ShapeError(f"{len(self.shape)} dimensions; kjit takes at most {MAX_DIMS}")
        self._code = dtype_code(self.dtype)
        if strides is None:
            strides, step = [], self.dtype.itemsize
            for extent in reversed(self.shape):
                strides.append(step)
                step *= extent
            strides = tuple(reversed(strides))
        self.strides = tuple(int(s) for s in strides)
        self._gpu = bool(gpu)
        self._owner = owner  # what keeps the memory alive (a pool block, a DLPack tensor)
        self._struct = _lib.Array()
        nd = len(self.shape)
        ARRAY_STRUCT.pack_into(self._struct, 0, ptr, self._code, nd, *self.shape, *PAD[nd],
                               *self.strides, *PAD[nd], MEMORY_DEVICE if gpu else MEMORY_HOST)
        self._addr = ctypes.addressof(self._struct)
        self._arg = ARG_ARRAY_STRUCT.pack(ARG_ARRAY, self._code, self._addr) + _ARG_PAD
        # what the converters say of it: (code, shape, allocator, gpu)
        self._info = (self._code, self.shape, _alloc_like_kjit, self._gpu)

    @staticmethod
    def _layout(shape, dtype, gpu):
        """(shape, dtype, code, strides, kjit_array bytes without the pointer,
        bytes to allocate) of a C-ordered array."""
        dtype = np.dtype(dtype)
        code = dtype_code(dtype)
        nd = len(shape)
        if nd > MAX_DIMS:
            raise ShapeError(f"{nd} dimensions; kjit takes at most {MAX_DIMS}")
        strides, step = [], dtype.itemsize
        for extent in reversed(shape):
            if extent < 0:
                raise ShapeError(f"negative extent in shape {shape}")
            strides.append(step)
            step *= extent
        strides = tuple(reversed(strides))
        struct = ARRAY_STRUCT.pack(0, code, nd, *shape, *PAD[nd], *strides, *PAD[nd],
                                   MEMORY_DEVICE if gpu else MEMORY_HOST)
        struct += bytes(ARRAY_SIZE - len(struct))
        return shape, dtype, code, strides, struct, (step + 255) & ~255

    @classmethod
    def _from_layout(cls, context, ptr, layout, owner):
        self = cls.__new__(cls)
        self.context = context
        self.shape, self.dtype, self._code, self.strides, struct, _ = layout
        self._gpu = bool(context.is_cuda)
        self._owner = owner
        if _DeviceBase is object:
            self._struct = s = _lib.Array.from_buffer_copy(struct)
            s.data = ptr
            self._addr = addr = ctypes.addressof(s)
        else:  # the kjit_array inside the object (_fast.c's DeviceBase)
            self._keep(struct, ptr)
            addr = self._addr
        self._arg = ARG_ARRAY_STRUCT.pack(ARG_ARRAY, self._code, addr) + _ARG_PAD
        self._info = (self._code, self.shape, _alloc_like_kjit, self._gpu)
        return self

    if _DeviceBase is object:
        ptr = property(lambda self: self._struct.data or 0, doc="the address of element 0")
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    nbytes = property(lambda self: self.size * self.dtype.itemsize)
    on_gpu = property(lambda self: self._gpu, doc="True when the memory is a GPU's")

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self):
        where = "gpu" if self._gpu else "host"
        return f"<kjit.DeviceArray {self.dtype} {self.shape} on {where} at {self.ptr:#x}>"

    def is_contiguous(self):
        step = self.dtype.itemsize
        for extent, stride in zip(reversed(self.shape), reversed(self.strides)):
            if extent != 1 and stride != step:
                return False
            step *= extent
        return True

    # Views ----------------------------------------------------------------------
    def _view(self, offset, shape, strides):
        """A DeviceArray over this one's memory (which it keeps alive)."""
        return DeviceArray(self.context, self.ptr + offset, shape, self.dtype, strides,
                           self._gpu, owner=self)

    def reshape(self, *shape):
        """A view of another shape (one extent may be -1), as NumPy's reshape
        of a C-contiguous array; a strided array cannot be reshaped here."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = tuple(int(s) for s in shape)
        unknown = [i for i, s in enumerate(shape) if s == -1]
        known = math.prod(s for s in shape if s != -1)
        if len(unknown) > 1 or any(s < -1 for s in shape):
            raise ShapeError(f"reshape {shape}: extents from 0, and at most one -1")
        if unknown:
            if known == 0 or self.size % known:
                raise ShapeError(f"cannot reshape {self.size} elements into {shape}")
            shape = shape[:unknown[0]] + (self.size // known,) + shape[unknown[0] + 1:]
        if math.prod(shape) != self.size:
            raise ShapeError(f"cannot reshape {self.size} elements into {shape}")
        if not self.is_contiguous():
            raise ShapeError("reshape of a strided view: copy it first")
        return self._view(0, shape, None)

    def __getitem__(self, key):
        """Basic indexing, as NumPy's: ints, slices (any step) and ..., giving
        a view (a 0-d DeviceArray for a single element).  Index arrays and
        masks are refused."""
        if not isinstance(key, tuple):
            key = (key,)
        if sum(k is Ellipsis for k in key) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        fill = self.ndim - sum(1 for k in key if k is not Ellipsis)
        if fill < 0:
            raise IndexError(f"too many indices: {len(key)} for {self.ndim} dimensions")
        expanded = []
        for k in key:
            expanded.extend([slice(None)] * fill if k is Ellipsis else [k])
        expanded += [slice(None)] * (self.ndim - len(expanded))
        offset, shape, strides = 0, [], []
        for d, k in enumerate(expanded):
            extent, stride = self.shape[d], self.strides[d]
            if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
                i = int(k) + (extent if k < 0 else 0)
                if not 0 <= i < extent:
                    raise IndexError(f"index {int(k)} is out of bounds for axis {d} with "
                                     f"size {extent}")
                offset += i * stride
            elif isinstance(k, slice):
                start, stop, step = k.indices(extent)
                n = len(range(start, stop, step))
                offset += start * stride if n else 0
                shape.append(n)
                strides.append(stride * step)
            else:
                raise IndexError(f"{type(k).__name__} index: a kjit DeviceArray takes ints, "
                                 f"slices and ... (basic indexing, giving views)")
        return self._view(offset, tuple(shape), tuple(strides))

    def fill(self, value):
        """Sets every element to value (cast to the dtype, as NumPy's fill)."""
        if not self._gpu:
            np.asarray(_HostView(self))[...] = value
            return self
        if not self.is_contiguous():
            raise ShapeError("fill of a strided GPU view: fill the array it views")
        self.copy_from_host(np.full(self.shape, value, self.dtype))
        return self

    def copy_to_host(self, out=None, stream=None):
        """A NumPy array with the contents (into `out` when given).  With a
        stream, the copy is queued on it: synchronize it before reading."""
        if out is None:
            out = np.empty(self.shape, self.dtype)
        elif out.shape != self.shape or out.dtype != self.dtype:
            raise ShapeError(f"copy_to_host: {self.dtype} {self.shape} into "
                             f"{out.dtype} {out.shape}")
        self.context.copy(out, self, stream)
        return out

    def copy_from_host(self, host, stream=None):
        """Copies a NumPy array of the same shape and dtype into this array."""
        host = np.ascontiguousarray(host)
        if host.shape != self.shape or host.dtype != self.dtype:
            raise ShapeError(f"copy_from_host: {host.dtype} {host.shape} into "
                             f"{self.dtype} {self.shape}")
        self.context.copy(self, host, stream)
        return self

    def __array__(self, dtype=None, copy=None):
        if self._gpu:
            if copy is False:
                raise ValueError("a GPU array cannot become a NumPy array without a copy")
            a = self.copy_to_host()
        else:
            a = np.asarray(_HostView(self))
        return a if dtype is None else a.astype(dtype, copy=False)

    @property
    def __array_interface__(self):
        if self._gpu:
            raise AttributeError("a GPU array has no __array_interface__ (use copy_to_host)")
        return _interface(self, 3)

    @property
    def __cuda_array_interface__(self):
        if not self._gpu:
            raise AttributeError("a host array has no __cuda_array_interface__")
        d = _interface(self, 3)
        d["stream"] = 1  # kjit's default work goes on the legacy default stream
        return d

    def __dlpack_device__(self):
        if self._gpu:
            return (_DL_CUDA, self.context.device_ordinal)
        return (_DL_CPU, 0)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("kjit exports its arrays without a copy only")
        if self._gpu and stream not in (None, 1, -1):
            # The consumer works on another stream: let kjit's work finish first.
            self.context.synchronize()
        return export_dlpack(self)


class _HostView:
    def __init__(self, array):
        self.__array_interface__ = _interface(array, 3)
        self._array = array


def _interface(a, version):
    return {"shape": a.shape, "typestr": a.dtype.str, "data": (a.ptr, False),
            "strides": a.strides, "version": version}


# --------------------------------------------------------------- DLPack

_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_COMPLEX, _DL_BOOL = 0, 1, 2, 5, 6


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", _DELETER)]

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))

_DLTENSOR = b"dltensor"
_USED_DLTENSOR = b"used_dltensor"
_exports = {}  # address of a DLManagedTensor we made -> what keeps it and its array alive


@_DELETER
def _delete_export(managed):
    _exports.pop(ctypes.addressof(managed.contents), None)


@ctypes.PYFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    # A capsule nobody consumed still owns its tensor.
    if _api.PyCapsule_IsValid(capsule, _DLTENSOR):
        address = _raw_get_pointer(capsule, _DLTENSOR)
        _exports.pop(address, None)


def export_dlpack(array):
    """A "dltensor" capsule over `array` (DLPack 0.x, which every consumer takes)."""
    if array._code == _lib.BOOL:
        code, bits = _DL_BOOL, 8
    elif array._code <= _lib.I64:
        code, bits = _DL_INT, array.dtype.itemsize * 8
    elif array._code <= _lib.U64:
        code, bits = _DL_UINT, array.dtype.itemsize * 8
    elif array._code <= _lib.F64:
        code, bits = _DL_FLOAT, array.dtype.itemsize * 8
    else:
        code, bits = _DL_COMPLEX, array.dtype.itemsize * 8
    nd = array.ndim
    shape = (ctypes.c_int64 * max(nd, 1))(*array.shape)
    strides = (ctypes.c_int64 * max(nd, 1))(*(s // array.dtype.itemsize for s in array.strides))
    if any(s % array.dtype.itemsize for s in array.strides):
        raise BufferError("DLPack counts strides in elements; this array's are not whole "
                          "elements")
    managed = _DLManagedTensor()
    t = managed.dl_tensor
    t.data = array.ptr
    t.device = _DLDevice(*array.__dlpack_device__())
    t.ndim = nd
    t.dtype = _DLDataType(code, bits, 1)
    t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    managed.deleter = _delete_export
    address = ctypes.addressof(managed)
    _exports[address] = (managed, shape, strides, array)
    return _api.PyCapsule_New(address, _DLTENSOR, ctypes.cast(_capsule_destructor,
                                                                ctypes.c_void_p))


class _Imported:
    """Owns a consumed DLManagedTensor: its deleter runs when this goes."""

    def __init__(self, address, producer):
        self.producer = producer
        managed = _DLManagedTensor.from_address(address)
        deleter = managed.deleter
        self._finalizer = weakref.finalize(self, _run_deleter, deleter, address)


def _run_deleter(deleter, address):
    if deleter:
        deleter(ctypes.cast(address, ctypes.POINTER(_DLManagedTensor)))


def from_dlpack(x, context=None):
    """A DeviceArray over the memory of any DLPack producer (CuPy, PyTorch,
    JAX, NumPy ...), without a copy."""
    from . import _core
    if isinstance(x, DeviceArray):
        return x
    try:
        device_type, device_id = x.__dlpack_device__()
    except AttributeError:
        device_type, device_id = _DL_CPU, 0
    gpu = device_type in (_DL_CUDA, _DL_CUDA_MANAGED)
    if device_type not in (_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED):
        raise InvalidArgumentError(f"DLPack device type {device_type} is neither the host "
                                   f"nor a CUDA GPU")
    capsule = x.__dlpack__(stream=1) if gpu else x.__dlpack__()
    address = _capsule_pointer(capsule, _DLTENSOR)
    owner = _Imported(address, x)
    _api.PyCapsule_SetName(capsule, _USED_DLTENSOR)
    t = _DLManagedTensor.from_address(address).dl_tensor
    kinds = {(_DL_BOOL, 8): "?", (_DL_INT, 8): "i1", (_DL_INT, 16): "i2", (_DL_INT, 32): "i4",
             (_DL_INT, 64): "i8", (_DL_UINT, 8): "u1", (_DL_UINT, 16): "u2",
             (_DL_UINT, 32): "u4", (_DL_UINT, 64): "u8", (_DL_FLOAT, 32): "f4",
             (_DL_FLOAT, 64): "f8", (_DL_COMPLEX, 64): "c8", (_DL_COMPLEX, 128): "c16"}
    char = kinds.get((t.dtype.code, t.dtype.bits))
    if char is None or t.dtype.lanes != 1:
        raise DTypeError(f"DLPack type code {t.dtype.code}, {t.dtype.bits} bits, "
                         f"{t.dtype.lanes} lanes has no kjit element type")
    dtype = np.dtype(char)
    shape = tuple(t.shape[d] for d in range(t.ndim))
    strides = None
    if t.strides:
        strides = tuple(t.strides[d] * dtype.itemsize for d in range(t.ndim))
    if context is None:
        context = _core.default_context(gpu)
    if gpu and not context.is_cuda:
        raise InvalidArgumentError("a GPU array needs a cuda context")
    return DeviceArray(context, (t.data or 0) + t.byte_offset, shape, dtype, strides, gpu,
                       owner)


def check_status(context, status):
    if status:
        raise from_status(status, lib.kjit_last_error(context).decode(errors="replace"))
