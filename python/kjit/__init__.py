"""kjit from Python: compile .kern files and run them on NumPy, CuPy, PyTorch
and Numba arrays, through libkjit.so (ctypes, and the compiled hot path
kjit/_fast.c that the install builds: kjit.hot_path says which runs).

    import kjit, numpy as np
    m = kjit.load("examples/add.kern", target="cpu")     # or kjit.compile(source)
    s = m.add(a, b)                      # @vectorize: broadcasting, scalars, out=
    m.mandel_kernel[(48, 128), (32, 8)](-2.0, 1.0, -1.0, 1.0, image, 20)   # a launch

See docs/python.md.
"""
from . import _lib
from ._arrays import DeviceArray, from_dlpack
from ._core import (HOT_PATH, Context, Event, Function, GuvectorizedFunction, Launcher, Module,
                    ReduceFunction, Stream, VectorizedFunction, context, cuda_reason,
                    default_context, device_info)
from .errors import (BackendError, CacheWarning, CancelledError, CheckError, CompileError,
                     CudaError, DTypeError, InvalidArgumentError, KjitError, KjitIOError,
                     KjitMemoryError, KjitTimeoutError, NoDeviceError, NotFoundError,
                     ShapeError)

__version__ = "0.1.0"
library_path = _lib.path
# "compiled" when the install built kjit/_fast (the C hot path of calls and
# launches), else "pure Python (why)".
hot_path = HOT_PATH
TARGETS = ("auto", "cpu", "parallel", "cuda")
DTYPES = _lib.DTYPE_NAMES


def load(path, target="auto", **options):
    """Compiles a .kern file (and what it imports) for a target: "cpu",
    "parallel", "cuda" or "auto" (cuda when a GPU is usable, else cpu).
    Options: device, num_threads, opt_level, cuda_arch, check (checked mode:
    True for the value checks, "race" for data races and diverging barriers
    on cpu and parallel, "all" for both),
    cancellable (loops poll for a cancel: Ctrl-C stops any kernel; default
    True), time_limit (seconds a call may run: KjitTimeoutError past it)."""
    return context(target, **options).load(path)


def load_library(path, target="cpu", **options):
    """The module of a library that `kjit build --emit=lib` made (docs/aot.md):
    the same Module as load() gives, its code compiled ahead of time (cpu,
    parallel and cuda targets); refused (KjitError) when the file is not such a
    library, was altered, is of another ABI, suits no level of this CPU, holds
    no cuda code the device runs (on cuda), or another user can write it or
    its folder."""
    return context(target, **options).load_library(path)


def compile(source, name="<source>.kern", target="auto", **options):
    """Compiles kern source text; `name` is the file name its errors give."""
    return context(target, **options).compile(source, name)


def cuda_available():
    """True when the cuda target can run here (a CUDA driver and a GPU)."""
    return cuda_reason() is None


def device_count():
    return _lib.lib.kjit_cuda_device_count() if cuda_available() else 0


def devices():
    """Each GPU's name, compute capability, memory, driver and multiprocessors."""
    return [device_info(i) for i in range(device_count())]


def _device_context(target):
    if target is None:
        return default_context()
    return target if isinstance(target, Context) else context(target)


def device_array(shape, dtype="float64", target=None):
    """An uninitialised array in device memory (GPU memory when target is
    cuda, or auto and a GPU is usable; host memory on cpu targets)."""
    return _device_context(target).device_array(shape, dtype)


def device_array_like(array, target=None):
    return device_array(array.shape, array.dtype, target)


def to_device(array, stream=None, target=None):
    """A copy of a host array (anything NumPy takes) in device memory."""
    import numpy as np
    host = np.ascontiguousarray(array)
    out = _device_context(target).device_array(host.shape, host.dtype)
    return out.copy_from_host(host, stream)


def synchronize(target=None):
    """Waits for all work queued on the device (nothing to wait for on cpu)."""
    _device_context(target).synchronize()


def record_event(stream=None):
    """An Event recorded now on `stream` (the default stream when None)."""
    return Event(stream)


def elapsed_ms(start, end):
    """Milliseconds between two recorded events (waits for `end`)."""
    return end.elapsed_ms(start)


__all__ = ["load", "load_library", "compile", "cuda_available", "cuda_reason", "device_count", "devices",
           "device_info", "device_array", "device_array_like", "to_device", "from_dlpack",
           "synchronize", "record_event", "elapsed_ms", "context", "default_context",
           "Context", "Module", "Function", "VectorizedFunction",
           "GuvectorizedFunction", "ReduceFunction", "Launcher", "Stream", "Event", "DeviceArray",
           "KjitError", "CompileError", "KjitIOError", "NotFoundError", "InvalidArgumentError",
           "ShapeError", "DTypeError", "NoDeviceError", "CudaError", "KjitMemoryError",
           "BackendError", "CheckError", "CancelledError", "KjitTimeoutError", "CacheWarning", "TARGETS", "DTYPES", "library_path", "hot_path"]
