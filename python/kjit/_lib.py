"""libkjit.so through ctypes: finding the library and declaring kjit.h.

The structures mirror kjit.h exactly; ``struct`` formats beside them let the
hot path pack a whole kjit_array or kjit_arg in one call instead of setting
ctypes fields one by one.
"""
import ctypes
import os
import struct
import sys

MAX_DIMS = 8

# kjit_status, in kjit.h's order.
OK = 0
(ERROR_COMPILE, ERROR_IO, ERROR_NOT_FOUND, ERROR_INVALID_ARGUMENT, ERROR_SHAPE, ERROR_TYPE,
 ERROR_NO_DEVICE, ERROR_CUDA, ERROR_OUT_OF_MEMORY, ERROR_BACKEND, ERROR_CHECK, ERROR_CANCELLED,
 ERROR_TIMEOUT) = range(1, 14)

TARGETS = {"auto": 0, "cpu": 1, "parallel": 2, "cuda": 3}
TARGET_NAMES = {v: k for k, v in TARGETS.items()}

# kjit_dtype, in kjit.h's order.
DTYPE_NAMES = ("bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
               "f32", "f64", "c64", "c128", "f16", "bf16")
(BOOL, I8, I16, I32, I64, U8, U16, U32, U64, F32, F64, C64, C128, F16, BF16) = range(15)

MEMORY_HOST, MEMORY_DEVICE = 0, 1
ARG_SCALAR, ARG_ARRAY = 0, 1
FUNCTION_KINDS = ("plain", "vectorize", "kernel", "reduce", "guvectorize")


class Array(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("strides", ctypes.c_int64 * MAX_DIMS),
                ("memory", ctypes.c_int)]


class _ArgValue(ctypes.Union):
    _fields_ = [("i", ctypes.c_int64), ("u", ctypes.c_uint64), ("f", ctypes.c_double),
                ("c", ctypes.c_double * 2), ("array", ctypes.POINTER(Array))]


class Arg(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("dtype", ctypes.c_int), ("value", _ArgValue)]


class Options(ctypes.Structure):
    _fields_ = [("target", ctypes.c_int), ("num_threads", ctypes.c_int), ("device", ctypes.c_int),
                ("cuda_arch", ctypes.c_char_p), ("opt_level", ctypes.c_int),
                ("on_diagnostic", ctypes.c_void_p), ("diagnostic_user", ctypes.c_void_p),
                ("line_info", ctypes.c_int), ("check", ctypes.c_int),
                ("on_print", ctypes.c_void_p), ("print_user", ctypes.c_void_p),
                ("cpu_simd", ctypes.c_int), ("cpu_specialise", ctypes.c_int),
                ("cancellable", ctypes.c_int), ("time_limit_s", ctypes.c_double),
                ("cancel_signal", ctypes.c_int)]


class LaunchOptions(ctypes.Structure):
    _fields_ = [("stream", ctypes.c_void_p), ("dynamic_shared_bytes", ctypes.c_size_t)]


class DeviceInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 256), ("compute_major", ctypes.c_int),
                ("compute_minor", ctypes.c_int), ("total_memory", ctypes.c_size_t),
                ("driver_version", ctypes.c_int), ("multiprocessors", ctypes.c_int)]


# One kjit_array: data, dtype, ndim, shape[8], strides[8], memory (native layout).
ARRAY_STRUCT = struct.Struct("@Pii8q8qi")
# One kjit_arg: kind, dtype, then the value's first 16 bytes as one of these.
ARG_ARRAY_STRUCT = struct.Struct("@iiP")
ARG_INT_STRUCT = struct.Struct("@iiq")
ARG_UINT_STRUCT = struct.Struct("@iiQ")
ARG_FLOAT_STRUCT = struct.Struct("@iid")
ARG_COMPLEX_STRUCT = struct.Struct("@iidd")
assert ctypes.sizeof(Array) >= ARRAY_STRUCT.size and ctypes.sizeof(Arg) == 24
assert Arg.value.offset == 8 and Array.memory.offset == 144


HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates(name="libkjit.so"):
    """(path, how it was chosen) in the order they are tried: KJIT_LIBRARY, the
    copy installed inside this package (kjit/lib/libkjit.so, which `pip
    install ./python` bundles), the installed prefix (the one `make
    install-python` recorded, else Python's own, /usr/local and /usr), then
    the build folder of the repository this package's source lies in.  With
    name "libkjit-rt.so", the same places for the runtime alone (no
    compiler: it runs libraries that `kjit build --emit=lib` made), which the
    package uses when no libkjit.so is found (docs/python.md)."""
    env = os.environ.get("KJIT_LIBRARY")
    if env and name == "libkjit.so":
        yield env, "KJIT_LIBRARY"
    yield os.path.join(HERE, "lib", name), "inside the package"
    prefixes = []
    try:
        from . import _install
        prefixes.append(_install.PREFIX)
    except ImportError:
        pass
    prefixes += [sys.prefix, "/usr/local", "/usr"]
    seen = set()
    for prefix in prefixes:
        candidate = os.path.join(prefix, "lib", name)
        if candidate not in seen:
            seen.add(candidate)
            yield candidate, "installed prefix"
    yield (os.path.normpath(os.path.join(HERE, "..", "..", "build", name)),
           "the repository's build folder")


def _stdlib_for(library):
    """The stdlib folder that belongs with a library: kjit finds it beside the
    running program, which is python here, so it is named through KJIT_STDLIB.
    (A library inside the package, kjit/lib/, has kjit/stdlib/.)"""
    libdir = os.path.dirname(os.path.abspath(library))
    for candidate in (os.path.join(libdir, "..", "share", "kjit", "stdlib"),
                      os.path.join(libdir, "..", "stdlib")):
        if os.path.isdir(candidate):
            return os.path.normpath(candidate)
    return None


def _load():
    tried = []
    for path, why in list(_candidates()) + list(_candidates("libkjit-rt.so")):
        if not os.path.exists(path):
            tried.append(f"{path} ({why}: no such file)")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as error:
            tried.append(f"{path} ({why}: {error})")
            continue
        if not os.environ.get("KJIT_STDLIB"):
            stdlib = _stdlib_for(path)
            if stdlib:
                os.environ["KJIT_STDLIB"] = stdlib
        return lib, path
    raise ImportError("kjit: cannot find libkjit.so (or libkjit-rt.so); tried:\n  " +
                      "\n  ".join(tried) +
                      "\nbuild it with `make` in the kjit repository, or set KJIT_LIBRARY "
                      "to its path")


lib, path = _load()
# libkjit-rt, the runtime alone, has no compiler (kjit_tools.h's stages are
# libkjit's): it runs libraries, and kjit.load of a .kern says it needs libkjit.
RUNTIME_ONLY = not hasattr(lib, "kjit_stage_file")

_P = ctypes.c_void_p
_S = ctypes.c_int  # kjit_status
_protos = {
    "kjit_status_name": (ctypes.c_char_p, [_S]),
    "kjit_dtype_size": (ctypes.c_size_t, [ctypes.c_int]),
    "kjit_options_init": (None, [ctypes.POINTER(Options)]),
    "kjit_context_create": (_S, [ctypes.POINTER(Options), ctypes.POINTER(_P)]),
    "kjit_context_destroy": (None, [_P]),
    "kjit_context_target": (ctypes.c_int, [_P]),
    "kjit_context_cancel": (None, [_P]),
    "kjit_last_error": (ctypes.c_char_p, [_P]),
    "kjit_compile_file": (_S, [_P, ctypes.c_char_p, ctypes.POINTER(_P)]),
    "kjit_compile_string": (_S, [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(_P)]),
    "kjit_module_load_library": (_S, [_P, ctypes.c_char_p, ctypes.POINTER(_P)]),
    "kjit_module_free": (None, [_P]),
    "kjit_module_function": (_S, [_P, ctypes.c_char_p, ctypes.POINTER(_P)]),
    "kjit_module_function_count": (ctypes.c_int, [_P]),
    "kjit_module_function_name": (ctypes.c_char_p, [_P, ctypes.c_int]),
    "kjit_function_kind_of": (ctypes.c_int, [_P]),
    "kjit_function_name": (ctypes.c_char_p, [_P]),
    "kjit_function_param_count": (ctypes.c_int, [_P]),
    "kjit_function_signature_count": (ctypes.c_int, [_P]),
    "kjit_function_signature": (ctypes.c_char_p, [_P, ctypes.c_int]),
    "kjit_function_param": (_S, [_P, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                 ctypes.POINTER(ctypes.c_int)]),
    "kjit_function_result": (_S, [_P, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]),
    "kjit_function_param_written": (ctypes.c_int, [_P, ctypes.c_int]),
    "kjit_function_layout": (ctypes.c_char_p, [_P]),
    "kjit_function_layout_inputs": (ctypes.c_int, [_P]),
    "kjit_function_layout_outputs": (ctypes.c_int, [_P]),
    # Calls take raw addresses (c_void_p) so that the hot path passes ints.
    "kjit_call": (_S, [_P, _P, ctypes.c_int, _P, _P]),
    "kjit_call_async": (_S, [_P, _P, ctypes.c_int, _P, _P]),
    "kjit_array_free": (None, [_P]),
    # kjit_reduce(function, args, nargs, axes, naxes, init, out, result)
    "kjit_reduce": (_S, [_P, _P, ctypes.c_int, _P, ctypes.c_int, _P, _P, _P]),
    "kjit_reduce_async": (_S, [_P, _P, ctypes.c_int, _P, ctypes.c_int, _P, _P, _P]),
    "kjit_function_reduce_inputs": (ctypes.c_int, [_P]),
    "kjit_prepare": (_S, [_P, _P, ctypes.c_int, _P]),
    "kjit_function_match": (_S, [_P, _P, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]),
    "kjit_launch": (_S, [_P, _P, _P, _P, ctypes.c_int, _P]),
    "kjit_launch_ex": (_S, [_P, _P, _P, _P, ctypes.c_int, _P]),
    "kjit_device_alloc": (_S, [_P, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int64),
                               ctypes.POINTER(Array)]),
    "kjit_device_free": (_S, [_P, ctypes.POINTER(Array)]),
    "kjit_copy": (_S, [_P, _P, _P, _P]),
    "kjit_stream_create": (_S, [_P, ctypes.POINTER(_P)]),
    "kjit_stream_synchronize": (_S, [_P]),
    "kjit_stream_destroy": (None, [_P]),
    "kjit_synchronize": (_S, [_P]),
    "kjit_event_record": (_S, [_P, _P, ctypes.POINTER(_P)]),
    "kjit_event_elapsed": (_S, [_P, _P, ctypes.POINTER(ctypes.c_double)]),
    "kjit_event_destroy": (None, [_P]),
    "kjit_cuda_available": (_S, [ctypes.c_char_p, ctypes.c_size_t]),
    "kjit_cuda_device_info": (_S, [ctypes.c_int, ctypes.POINTER(DeviceInfo)]),
    "kjit_cuda_device_count": (ctypes.c_int, []),
    "kjit_stream_wrap": (_S, [_P, _P, ctypes.POINTER(_P)]),
    "kjit_stream_handle": (_P, [_P]),
    "kjit_function_output_count": (ctypes.c_int, [_P]),
    "kjit_function_output": (_S, [_P, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]),
}
for _name, (_restype, _argtypes) in _protos.items():
    try:
        _fn = getattr(lib, _name)
    except AttributeError:
        if _name in ("kjit_stream_wrap", "kjit_stream_handle"):
            continue  # an older library: foreign streams are refused (kjit.Stream says so)
        if _name == "kjit_function_param_written":
            continue  # an older library: every array argument counts as written
        if _name in ("kjit_function_output_count", "kjit_function_output"):
            continue  # an older library: every @vectorize has one output
        raise
    _fn.restype = _restype
    _fn.argtypes = _argtypes

HAS_PARAM_WRITTEN = (hasattr(lib, "kjit_function_param_written") and
                     lib.kjit_function_param_written.argtypes is not None)
HAS_OUTPUTS = (hasattr(lib, "kjit_function_output_count") and
               lib.kjit_function_output_count.argtypes is not None)
HAS_STREAM_WRAP = hasattr(lib, "kjit_stream_wrap") and lib.kjit_stream_wrap.argtypes is not None


def status_name(status):
    return lib.kjit_status_name(status).decode()
