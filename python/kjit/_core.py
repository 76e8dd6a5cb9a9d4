"""Contexts, modules, functions, launches, streams and events over kjit.h.

A Context is a kjit_context: one per target and options, made on first use
and kept for the life of the process (device arrays, streams and modules hold
theirs).  A Module's functions are looked up once and kept as attributes, and
each Function keeps what every call needs (its handle, its context, its
result types, a free list of argument buffers), so that a call is a dict
lookup per argument, a few struct packs and one foreign call.
"""
import ctypes
import os
import re
import signal
import threading
import warnings

import numpy as np

from . import _lib
from ._arrays import (ARG_SIZE, CONVERTERS, NP_DTYPES, CallBuffers, DeviceArray,
                      _alloc_cupy, _alloc_like_kjit, _array_like, _dlpack, array_address,
                      converter_for, pack_out)
from ._lib import lib
from .errors import CacheWarning, InvalidArgumentError, ShapeError, from_status

_kjit_call = lib.kjit_call
_kjit_launch_ex = lib.kjit_launch_ex
_last_error = lib.kjit_last_error


def _raise(handle, status):
    raise from_status(status, _last_error(handle).decode(errors="replace"))


def _address(function):
    return ctypes.cast(function, ctypes.c_void_p).value


# The compiled hot path (_fast.c), when the install built it: @vectorize calls
# and launches of NumPy arrays, scalars and kjit's arrays go through C; the
# rest through the Python below.  KJIT_PURE_PYTHON=1 turns it off.
try:
    if os.environ.get("KJIT_PURE_PYTHON"):
        raise ImportError("KJIT_PURE_PYTHON is set")
    from . import _fast
    _fast.setup(_address(lib.kjit_call), _address(lib.kjit_function_match),
                _address(lib.kjit_launch_ex), _raise, DeviceArray, _alloc_like_kjit)
    HOT_PATH = "compiled"
except ImportError as _error:
    _fast = None
    HOT_PATH = f"pure Python ({_error})"


# ----------------------------------------------------------------- contexts

@ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)
def _on_diagnostic(user, text):
    """kjit_options.on_diagnostic: compile errors arrive in the exception's
    message (kjit_last_error); the runtime's warnings become CacheWarning."""
    text = text.decode(errors="replace")
    if text.startswith("kjit: warning: "):
        warnings.warn(text[len("kjit: warning: "):].rstrip("\n"), CacheWarning, stacklevel=2)


_CHECKS = {"values": 1, "race": 2, "all": 3}


def _check_bits(check):
    """kjit_options.check for check=: False/True (the value checks), or
    "values", "race" (data races and diverging barriers, cpu and parallel),
    "all"."""
    if isinstance(check, str):
        if check not in _CHECKS:
            raise InvalidArgumentError(f"check {check!r}: True, False, or one of "
                                       f"{', '.join(repr(k) for k in _CHECKS)}")
        return _CHECKS[check]
    return 1 if check else 0


class Context:
    """A kjit_context: a target ("cpu", "parallel", "cuda"; "auto" picks cuda
    when a GPU is usable) and its options."""

    def __init__(self, target="auto", device=-1, num_threads=0, opt_level=3, cuda_arch=None,
                 check=False, cancellable=True, time_limit=None):
        if target not in _lib.TARGETS:
            raise InvalidArgumentError(f"target {target!r}: one of "
                                       f"{', '.join(_lib.TARGETS)}")
        options = _lib.Options()
        lib.kjit_options_init(ctypes.byref(options))
        options.target = _lib.TARGETS[target]
        options.num_threads = num_threads
        options.device = device
        options.opt_level = opt_level
        options.check = _check_bits(check)
        options.on_diagnostic = ctypes.cast(_on_diagnostic, ctypes.c_void_p)
        # Ctrl-C during a call: libkjit's handler cancels the call, then
        # raises SIGINT again for Python's, which raises KeyboardInterrupt
        # once the call has returned.  With cancellable code every loop polls,
        # so a kernel that never ends stops too.
        options.cancellable = 1 if cancellable else 0
        options.cancel_signal = int(signal.SIGINT)
        if time_limit is not None:
            if not time_limit > 0:
                raise InvalidArgumentError(f"time_limit {time_limit!r}: seconds above 0, or None")
            options.time_limit_s = float(time_limit)
        self._arch = cuda_arch.encode() if cuda_arch else None
        options.cuda_arch = self._arch
        handle = ctypes.c_void_p()
        status = lib.kjit_context_create(ctypes.byref(options), ctypes.byref(handle))
        if status:
            raise from_status(status, lib.kjit_last_error(None).decode(errors="replace"))
        self.handle = handle.value
        self.target = _lib.TARGET_NAMES[lib.kjit_context_target(self.handle)]
        self.is_cuda = self.target == "cuda"
        self.device_ordinal = (device if device >= 0 else 0) if self.is_cuda else 0
        # freed device arrays' memory by size: in C with the compiled path
        # (_fast.Pool: its blocks give the memory back as they are freed, no
        # __del__ and no lock), else bytes -> [pointers] here
        self._cpool = _fast.Pool(self._free, self.POOL_LIMIT) if _fast is not None else None
        self._pool = {}
        self._pool_bytes = 0
        self._pool_lock = threading.Lock()
        self._layouts = {}       # (shape, dtype) -> DeviceArray._layout
        self._wrapped = {}       # CUstream handle -> Stream wrapping it
        self._default_stream = None

    def __repr__(self):
        return f"<kjit.Context {self.target}>"

    def check(self, status):
        if status:
            _raise(self.handle, status)

    def cancel(self):
        """Stops the calls running on this context now (from another thread):
        each raises CancelledError.  A call made afterwards runs normally."""
        lib.kjit_context_cancel(self.handle)

    # Modules ---------------------------------------------------------------
    def _needs_compiler(self, what):
        if _lib.RUNTIME_ONLY:
            raise InvalidArgumentError(
                f"{what} compiles kern source, which needs libkjit (the compiler); this kjit "
                f"runs on {_lib.path}, the runtime alone, which loads only libraries that "
                "`kjit build --emit=lib` made (kjit.load_library); install libkjit, or set "
                "KJIT_LIBRARY to its path")

    def load(self, path):
        self._needs_compiler(f"kjit.load({str(path)!r})")
        out = ctypes.c_void_p()
        self.check(lib.kjit_compile_file(self.handle, str(path).encode(), ctypes.byref(out)))
        return Module(self, out.value, str(path))

    def load_library(self, path):
        """A library that `kjit build --emit=lib` made (docs/aot.md)."""
        out = ctypes.c_void_p()
        self.check(lib.kjit_module_load_library(self.handle, str(path).encode(),
                                                ctypes.byref(out)))
        return Module(self, out.value, str(path))

    def compile(self, source, name="<source>.kern"):
        self._needs_compiler("kjit.compile")
        out = ctypes.c_void_p()
        self.check(lib.kjit_compile_string(self.handle, name.encode(), source.encode(),
                                           ctypes.byref(out)))
        return Module(self, out.value, name)

    # Device memory -----------------------------------------------------------
    # Freed device arrays go back to a pool by size (cuMemFree waits for the
    # whole device, and a 1,000-element call must not pay a cuMemAlloc).
    POOL_LIMIT = 256 << 20

    def device_array(self, shape, dtype=np.float64):
        try:
            layout = self._layouts[shape, dtype]
        except (KeyError, TypeError):
            layout = self._layout(shape, dtype)
        size = layout[5]
        cpool = self._cpool
        if cpool is not None:
            ptr = cpool.take(size)
            if ptr is None:
                ptr = self._allocate(size)
            return DeviceArray._from_layout(self, ptr, layout, cpool.block(ptr, size))
        with self._pool_lock:
            free = self._pool.get(size)
            ptr = free.pop() if free else None
            if ptr is not None:
                self._pool_bytes -= size
        if ptr is None:
            ptr = self._allocate(size)
        return DeviceArray._from_layout(self, ptr, layout, _PoolBlock(self, ptr, size))

    def _layout(self, shape, dtype):
        """What every device array of this shape and dtype shares."""
        key = (shape, dtype)
        if isinstance(shape, (int, np.integer)):
            shape = (int(shape),)
        layout = DeviceArray._layout(tuple(int(s) for s in shape), dtype, self.is_cuda)
        try:
            if len(self._layouts) < 1024:
                self._layouts[key] = layout
        except TypeError:  # an unhashable shape or dtype
            pass
        return layout

    def _allocate(self, size):
        block = _lib.Array()
        extent = (ctypes.c_int64 * 1)(max(size, 1))
        status = lib.kjit_device_alloc(self.handle, _lib.U8, 1, extent, ctypes.byref(block))
        if status == _lib.ERROR_OUT_OF_MEMORY and self._pool_held():
            self.empty_pool()
            status = lib.kjit_device_alloc(self.handle, _lib.U8, 1, extent, ctypes.byref(block))
        self.check(status)
        return block.data

    def _release(self, ptr, size):
        with self._pool_lock:
            if self._pool_bytes + size <= self.POOL_LIMIT:
                self._pool.setdefault(size, []).append(ptr)
                self._pool_bytes += size
                return
        self._free(ptr)

    def _free(self, ptr):
        block = _lib.Array()
        block.data = ptr
        block.memory = _lib.MEMORY_DEVICE
        lib.kjit_device_free(self.handle, ctypes.byref(block))

    def _pool_held(self):
        """The bytes of device memory that freed arrays left for reuse."""
        return self._cpool.bytes if self._cpool is not None else self._pool_bytes

    def empty_pool(self):
        """Frees the device memory that freed arrays left for reuse."""
        with self._pool_lock:
            blocks = [p for ptrs in self._pool.values() for p in ptrs]
            self._pool.clear()
            self._pool_bytes = 0
        if self._cpool is not None:
            blocks += self._cpool.drain()
        for ptr in blocks:
            self._free(ptr)

    def copy(self, dst, src, stream=None):
        """Copies between host and device arrays of one shape and dtype
        (both contiguous)."""
        cb = CallBuffers(2)
        for i, x in enumerate((dst, src)):
            conv = CONVERTERS.get(type(x)) or converter_for(type(x))
            if conv(x, cb, i)[3] and not self.is_cuda:
                raise InvalidArgumentError(f"copy: GPU memory on a {self.target} context")
        self.check(lib.kjit_copy(self.handle, array_address(cb, 0), array_address(cb, 1),
                                 stream_pointer(stream, self)))

    def synchronize(self):
        self.check(lib.kjit_synchronize(self.handle))


class _PoolBlock:
    __slots__ = ("context", "ptr", "size", "__weakref__")

    def __init__(self, context, ptr, size):
        self.context, self.ptr, self.size = context, ptr, size

    def __del__(self):
        try:
            self.context._release(self.ptr, self.size)
        except Exception:  # at interpreter exit
            pass


_contexts = {}
_contexts_lock = threading.Lock()


def context(target="auto", device=-1, num_threads=0, opt_level=3, cuda_arch=None, check=False,
            cancellable=True, time_limit=None):
    """The shared Context for these options (made on first use)."""
    key = (target, device, num_threads, opt_level, cuda_arch, _check_bits(check),
           bool(cancellable), time_limit)
    ctx = _contexts.get(key)
    if ctx is None:
        with _contexts_lock:
            ctx = _contexts.get(key)
            if ctx is None:
                ctx = _contexts[key] = Context(target, device, num_threads, opt_level,
                                               cuda_arch, check, cancellable, time_limit)
    return ctx


def default_context(gpu=None):
    """cuda when a GPU is usable (or asked for with gpu=True), else cpu."""
    if gpu:
        return context("cuda")
    if gpu is False:
        return context("cpu")
    return context("auto")


# ------------------------------------------------------------------ modules

class Module:
    """A compiled .kern file: its functions are attributes (m.add), or
    m["add"] for names that clash with the module's own."""

    def __init__(self, context, handle, name):
        self.context = context
        self.handle = handle
        self.name = name
        count = lib.kjit_module_function_count(handle)
        self.function_names = tuple(lib.kjit_module_function_name(handle, i).decode()
                                    for i in range(count))

    def function(self, name):
        out = ctypes.c_void_p()
        status = lib.kjit_module_function(self.handle, name.encode(), ctypes.byref(out))
        if status:
            _raise(self.context.handle, status)
        kind = _lib.FUNCTION_KINDS[lib.kjit_function_kind_of(out.value)]
        cls = {"vectorize": VectorizedFunction, "guvectorize": GuvectorizedFunction,
               "reduce": ReduceFunction}.get(kind, Function)
        if (kind == "vectorize" and _lib.HAS_OUTPUTS and
                lib.kjit_function_output_count(out.value) > 1):
            cls = SeveralOutputsFunction
        fn = cls(self, out.value)
        self.__dict__[name] = fn  # the next m.name is a plain attribute
        return fn

    def __getitem__(self, name):
        fn = self.__dict__.get(name)
        return fn if isinstance(fn, Function) else self.function(name)

    def __iter__(self):
        return (self[name] for name in self.function_names)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self.function(name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.function_names))

    def __repr__(self):
        return (f"<kjit.Module {self.name} on {self.context.target}: "
                f"{', '.join(self.function_names)}>")

    def __del__(self):
        handle, self.handle = getattr(self, "handle", None), None
        if handle:
            try:
                lib.kjit_module_free(handle)
            except Exception:
                pass


# ---------------------------------------------------------------- functions

class Function:
    """A function of a module: plain or @vectorize ones are called, @kernel
    ones launched with f[grid, block](...) or f[grid, block, stream](...)."""

    def __init__(self, module, handle):
        self.module = module  # keeps the module (and its code) alive
        self.handle = handle
        self.context = module.context
        self.name = lib.kjit_function_name(handle).decode()
        self.kind = _lib.FUNCTION_KINDS[lib.kjit_function_kind_of(handle)]
        self.param_count = lib.kjit_function_param_count(handle)
        count = lib.kjit_function_signature_count(handle)
        self.signatures = tuple(lib.kjit_function_signature(handle, s).decode()
                                for s in range(count))
        self._results = []
        for s in range(count):
            code = ctypes.c_int(-1)
            if lib.kjit_function_result(handle, s, ctypes.byref(code)) == 0:
                self._results.append(code.value)
            else:
                self._results.append(None)
        self._result_by_key = {}
        # The parameters the function may store into: a read-only array is
        # refused there (it would crash, or be changed behind its back).
        if _lib.HAS_PARAM_WRITTEN:
            self._written = tuple(bool(lib.kjit_function_param_written(handle, p))
                                  for p in range(self.param_count))
        else:
            self._written = (True,) * self.param_count
        self._writes = any(self._written)
        self._single = count == 1
        self._is_cuda = self.context.is_cuda
        self._free = []       # CallBuffers not in use
        self._launchers = {}  # launch configuration -> Launcher

    def __repr__(self):
        return f"<kjit.Function {self.kind} {self.name} {' | '.join(self.signatures)}>"

    def params(self, signature=0):
        """[(element type name, rank)] of each parameter of a signature."""
        out = []
        for p in range(self.param_count):
            code, ndim = ctypes.c_int(), ctypes.c_int()
            self.context.check(lib.kjit_function_param(self.handle, signature, p,
                                                       ctypes.byref(code), ctypes.byref(ndim)))
            out.append((_lib.DTYPE_NAMES[code.value], ndim.value))
        return out

    def result(self, signature=0):
        """The element type name a signature returns (None for kernels)."""
        code = self._results[signature]
        return None if code is None or code < 0 else _lib.DTYPE_NAMES[code]

    # Arguments ---------------------------------------------------------------
    def _pack(self, args):
        """CallBuffers holding args, and what the converters said of them."""
        n = len(args)
        if n != self.param_count:
            raise InvalidArgumentError(f"{self.name} takes {self.param_count} argument"
                                       f"{'' if self.param_count == 1 else 's'}, {n} given")
        cb = self._free.pop() if self._free else CallBuffers(n)
        try:
            info = [(CONVERTERS.get(type(x)) or converter_for(type(x)))(x, cb, i)
                    for i, x in enumerate(args)]
        except BaseException:
            cb.keep.clear()
            self._free.append(cb)
            raise
        if cb.keep:
            self._sync_producers(cb)
        return cb, info

    def _sync_producers(self, cb):
        for item in cb.keep:
            if type(item) is tuple and item[0] == "sync":
                stream = wrap_stream(self.context, item[1])
                self.context.check(lib.kjit_stream_synchronize(stream._ptr))

    def _refuse_read_only(self, args):
        """A read-only array (a NumPy array with flags.writeable False, or
        np.load(..., mmap_mode='r')) for a parameter the function may store
        into is an error, before anything runs."""
        for i, x in enumerate(args):
            if self._written[i] and isinstance(x, np.ndarray) and not x.flags.writeable:
                raise InvalidArgumentError(
                    f"{self.name}: argument {i} is a read-only array, and {self.name} may "
                    f"store into it; pass a writable array (a copy: np.array(x))")

    def _check_memory(self, info, what="argument {}"):
        if not self.context.is_cuda:
            for i, (_, _, _, gpu) in enumerate(info):
                if gpu:
                    raise InvalidArgumentError(
                        f"{self.name}: {what.format(i)} is in GPU memory but the module was "
                        f"compiled for the {self.context.target} target; load it with "
                        f"target='cuda'")

    def _done(self, cb):
        if cb.keep:
            cb.keep.clear()
        self._free.append(cb)

    def _call_packed(self, cb, count, out_addr, stream):
        """kjit_call of the packed arguments, or kjit_call_async on a stream."""
        if stream is None:
            status = _kjit_call(self.handle, cb.args_addr, count, out_addr, None)
        else:
            status = lib.kjit_call_async(self.handle, cb.args_addr, count, out_addr,
                                         stream_pointer(stream, self.context))
        if status:
            _raise(self.context.handle, status)

    # Calls -------------------------------------------------------------------
    def __call__(self, *args, out=None, stream=None):
        kind = self.kind
        if kind == "vectorize":
            return _VectorizedPython.__call__(self, *args, out=out, stream=stream)
        if kind == "guvectorize":
            return GuvectorizedFunction.__call__(self, *args, out=out, stream=stream)
        if kind == "reduce":
            raise InvalidArgumentError(f"{self.name} is a @reduce: call it as "
                                       f"{self.name}(x, axis=None, init=None, out=None)")
        if kind == "plain":
            if out is not None or stream is not None:
                raise InvalidArgumentError(f"{self.name} is a plain function: no out= or "
                                           f"stream=")
            return self._plain(args)
        raise InvalidArgumentError(f"{self.name} is a @kernel: launch it with "
                                   f"{self.name}[grid, block](...)")

    def _result_code(self, info, cb, n):
        results = self._results
        if len(results) == 1:
            return results[0]
        key = tuple(i[0] for i in info)
        code = self._result_by_key.get(key)
        if code is None:
            sig = ctypes.c_int()
            self.context.check(lib.kjit_function_match(self.handle, cb.args_addr, n,
                                                       ctypes.byref(sig)))
            code = self._result_by_key[key] = results[sig.value]
        return code

    def _plain(self, args):
        if self._writes:
            self._refuse_read_only(args)
        cb, info = self._pack(args)
        try:
            self._check_memory(info)
            result = _lib.Array()
            status = _kjit_call(self.handle, cb.args_addr, len(args), None,
                                ctypes.addressof(result))
            if status:
                _raise(self.context.handle, status)
        finally:
            self._done(cb)
        if not result.data:
            return None
        dtype = NP_DTYPES[result.dtype]
        value = np.frombuffer((ctypes.c_char * dtype.itemsize).from_address(result.data),
                              dtype)[0].copy()
        lib.kjit_array_free(ctypes.addressof(result))
        return value

    def prepare(self, *args, out=None):
        """Generates the code a call (or, for a kernel, a launch) with these
        arguments would run, without running it: time calls after this."""
        cb, info = self._pack(args)
        try:
            out_addr = None
            if out is not None:
                pack_out(out, cb, len(args))
                out_addr = array_address(cb, len(args))
            self.context.check(lib.kjit_prepare(self.handle, cb.args_addr, len(args), out_addr))
        finally:
            self._done(cb)

    def match(self, *args):
        """The index of the signature a call with these arguments takes."""
        cb, _ = self._pack(args)
        try:
            sig = ctypes.c_int()
            self.context.check(lib.kjit_function_match(self.handle, cb.args_addr, len(args),
                                                       ctypes.byref(sig)))
            return sig.value
        finally:
            self._done(cb)

    # Launches ----------------------------------------------------------------
    def __getitem__(self, config):
        launcher = self._launchers.get(config)
        if launcher is None:
            if self.kind != "kernel":
                raise InvalidArgumentError(f"{self.name} is not a @kernel: call it as "
                                           f"{self.name}(...)")
            launcher = _launcher(self, config)
            if len(self._launchers) < 64:
                self._launchers[config] = launcher
        return launcher


# ------------------------------------------------------ __array_ufunc__ (NEP 13)

def _overriding(args, out):
    """The arguments (outputs included) whose type defines __array_ufunc__
    and that kjit does not read itself (a pandas Series, an xarray DataArray,
    a Dask array; not NumPy, CuPy, PyTorch or kjit arrays, which kjit
    reads), one per type, subclasses before their bases, as NumPy orders
    them.  Empty for the arguments of nearly every call."""
    found = []
    for x in args + out:
        kind = type(x)
        if (CONVERTERS.get(kind) or converter_for(kind)) not in (_array_like, _dlpack):
            continue
        if getattr(kind, "__array_ufunc__", None) is None or \
                any(type(f) is kind for f in found):
            continue
        at = len(found)
        for j, f in enumerate(found):
            if issubclass(kind, type(f)):
                at = j
                break
        found.insert(at, x)
    return found


def _dispatch(fn, args, out, kwargs):
    """fn(*args) handed to the arguments' __array_ufunc__ as NumPy hands a
    ufunc call (fn has the ufunc's nin, nout, signature and __name__), or
    NotImplemented when no argument asks for it.  The library calls fn back
    on the arrays it holds (NumPy's, or CuPy's in Dask on the GPU)."""
    overriding = _overriding(args, out)
    if not overriding:
        return NotImplemented
    if out:
        kwargs = dict(kwargs, out=out)
    for x in overriding:
        result = type(x).__array_ufunc__(x, fn, "__call__", *args, **kwargs)
        if result is not NotImplemented:
            return result
    raise TypeError(f"operand type(s) all returned NotImplemented from __array_ufunc__("
                    f"{fn!r}, '__call__', ...): "
                    f"{', '.join(repr(type(x).__name__) for x in overriding)}")


def _outputs(out):
    """out= as a tuple (NumPy's ufuncs take an array or a tuple of them)."""
    if out is None:
        return ()
    return tuple(out) if isinstance(out, tuple) else (out,)


class ReduceFunction(Function):
    """A @reduce function: f(x, axis=None, init=None, out=None, stream=None),
    or, for @reduce(map = g), f(*g's arguments, ...), which reduces g's
    results without an array of them.  axis: None (every axis: a scalar),
    an int or a tuple of ints (negative ones count from the end); init: a
    scalar combined first, and the result of an empty reduction (which is a
    ShapeError without it); out: a C-contiguous array of the result's shape
    and f's type.  The same bits as kjit_reduce and `kjit run` (a tree whose
    order depends only on the number of reduced elements)."""

    def __init__(self, module, handle):
        super().__init__(module, handle)
        self.inputs = lib.kjit_function_reduce_inputs(handle)

    def __call__(self, *args, axis=None, init=None, out=None, stream=None):
        n = len(args)
        if n != self.inputs:
            raise InvalidArgumentError(f"{self.name} reduces {self.inputs} argument"
                                       f"{'' if self.inputs == 1 else 's'}, {n} given")
        if axis is None:
            axes, naxes = None, 0
        else:
            items = axis if isinstance(axis, tuple) else (axis,)
            for a in items:
                if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
                    raise InvalidArgumentError(f"{self.name}: axis {axis!r}: None, an int or a "
                                               f"tuple of ints")
            naxes = len(items)
            axes = (ctypes.c_int * max(naxes, 1))(*(int(a) for a in items))
        cb = CallBuffers(n + 1)  # the inputs, init, out
        info = [(CONVERTERS.get(type(x)) or converter_for(type(x)))(x, cb, i)
                for i, x in enumerate(args)]
        if cb.keep:
            self._sync_producers(cb)
        self._check_memory(info)
        init_addr = None
        if init is not None:
            conv = CONVERTERS.get(type(init)) or converter_for(type(init))
            if conv(init, cb, n)[1] is not None:
                raise InvalidArgumentError(f"{self.name}: init= is a scalar, not "
                                           f"{type(init).__name__}")
            init_addr = cb.args_addr + n * ARG_SIZE
        out_addr = None
        if out is not None:
            if pack_out(out, cb, n + 1)[3] and not self._is_cuda:
                self._check_memory([(0, 0, 0, True)], "the output (out=)")
            out_addr = array_address(cb, n + 1)
        if stream is not None:
            if out is None:
                raise InvalidArgumentError(f"{self.name}: a reduction on a stream writes "
                                           f"into out=; give one")
            status = lib.kjit_reduce_async(self.handle, cb.args_addr, n, axes, naxes,
                                           init_addr, out_addr,
                                           stream_pointer(stream, self.context))
            if status:
                _raise(self.context.handle, status)
            return out
        result = _lib.Array()
        status = lib.kjit_reduce(self.handle, cb.args_addr, n, axes, naxes, init_addr,
                                 out_addr, None if out is not None else ctypes.addressof(result))
        if status:
            _raise(self.context.handle, status)
        if out is not None:
            return out
        try:
            shape = tuple(result.shape[d] for d in range(result.ndim))
            dtype = NP_DTYPES[result.dtype]
            count = int(np.prod(shape, dtype=np.int64))
            data = (ctypes.c_char * (count * dtype.itemsize)).from_address(result.data) \
                if count else b""
            value = np.frombuffer(data, dtype, count).reshape(shape).copy()
        finally:
            lib.kjit_array_free(ctypes.addressof(result))
        return value[()] if value.ndim == 0 else value


class _VectorizedPython(Function):
    """A @vectorize function: f(*arrays_or_scalars, out=None, stream=None)."""

    # What a library's __array_ufunc__ reads of a ufunc.
    nout = 1
    signature = None

    @property
    def nin(self):
        return self.param_count

    @property
    def __name__(self):
        return self.name

    def __call__(self, *args, out=None, stream=None):
        # The hot path: kjit's device arrays are packed inline, other
        # arguments through their converter; then the output and one call.
        n = len(args)
        if n != self.param_count:
            self._pack(args)  # raises the argument-count error
        if isinstance(out, tuple):  # out=(array,), as NumPy's ufuncs take it
            if len(out) != 1:
                raise InvalidArgumentError(f"{self.name} has one output; out= gives "
                                           f"{len(out)}")
            out = out[0]
        if stream is None:
            result = _dispatch(self, args, _outputs(out), {})
            if result is not NotImplemented:
                return result
        free = self._free
        cb = free.pop() if free else CallBuffers(n)
        try:
            view = cb.args_view
            info = []
            i = 0
            for x in args:
                if type(x) is DeviceArray:
                    view[i * 24:i * 24 + 24] = x._arg
                    info.append(x._info)
                else:
                    info.append((CONVERTERS.get(type(x)) or converter_for(type(x)))(x, cb, i))
                i += 1
            if cb.keep:
                self._sync_producers(cb)
            if not self._is_cuda:
                self._check_memory(info)
            if out is None:
                alloc = template = shape = None
                for i, (code, s, a, g) in enumerate(info):
                    if a is not None and template is None:
                        alloc, template = a, args[i]
                    if s is not None:
                        if shape is None:
                            shape = s
                        elif s != shape:
                            shape = _broadcast(shape, s)
                if shape is False:
                    # Shapes that do not broadcast: kjit's own message says so.
                    result = _lib.Array()
                    _raise(self.context.handle,
                           _kjit_call(self.handle, cb.args_addr, n, None,
                                      ctypes.addressof(result)) or _lib.ERROR_SHAPE)
                code = self._results[0] if self._single else self._result_code(info, cb, n)
                result = (alloc or _alloc_host)(template, shape or (), code)
            else:
                result = out
            if type(result) is DeviceArray:
                # a GPU array written by host code would be a fault, not an error
                if result._gpu and not self._is_cuda:
                    self._check_memory([(0, 0, 0, True)], "the output (out=)")
                out_addr = result._addr
            else:
                if pack_out(result, cb, n)[3] and not self._is_cuda:
                    self._check_memory([(0, 0, 0, True)], "the output (out=)")
                out_addr = array_address(cb, n)
            self._call_packed(cb, n, out_addr, stream)
        finally:
            if cb.keep:
                cb.keep.clear()
            free.append(cb)
        if out is None and shape is None and alloc is None:
            return result[()]  # all scalars: a scalar, as NumPy's ufuncs give
        return result

    _call_slow = __call__

    # NumPy's ufunc protocol ----------------------------------------------------
    @property
    def ufunc(self):
        """This function as a numpy.ufunc (cpu and parallel targets, with the
        compiled path): one loop per signature, picked by NumPy's type rules
        (casting where NumPy may), so reduce, accumulate, outer, at, where=,
        dtype=, casting= and other libraries' __array_ufunc__ (Dask, xarray,
        pandas) work as with NumPy's own.  Made on first use."""
        u = self.__dict__.get("_ufunc")
        if u is None:
            u = self.__dict__["_ufunc"] = self._make_ufunc()
        return u

    def _make_ufunc(self):
        return _make_ufunc(self, self.param_count, 1, None)

    def reduce(self, *args, **kwargs):
        """numpy.ufunc.reduce of self.ufunc."""
        return self.ufunc.reduce(*args, **kwargs)

    def accumulate(self, *args, **kwargs):
        return self.ufunc.accumulate(*args, **kwargs)

    def outer(self, *args, **kwargs):
        return self.ufunc.outer(*args, **kwargs)

    def at(self, *args, **kwargs):
        return self.ufunc.at(*args, **kwargs)

    def reduceat(self, *args, **kwargs):
        return self.ufunc.reduceat(*args, **kwargs)


if _fast is not None:
    class VectorizedFunction(_fast.Vectorized, _VectorizedPython):
        """A @vectorize function: f(*arrays_or_scalars, out=None, stream=None).
        Calls go through _fast.c, which hands what it does not take to the
        Python path (_call_slow)."""

        def __init__(self, module, handle):
            _VectorizedPython.__init__(self, module, handle)
            self._fast_bind(handle, self.context.handle, self.param_count,
                            tuple(-1 if r is None else r for r in self._results),
                            self._is_cuda)

    _fast.use_vectorcall(VectorizedFunction)  # Python 3.12 does this itself
else:
    VectorizedFunction = _VectorizedPython


class SeveralOutputsFunction(Function):
    """A @vectorize function of several outputs (-> (f64, i32)):
    f(*inputs, out=None, stream=None) returns a tuple of arrays, one per
    output, of the inputs' broadcast shape (allocated beside the first input
    that is an array, on its device), or fills out=(a, b, ...).  With scalar
    inputs alone, a tuple of scalars."""

    def __init__(self, module, handle):
        super().__init__(module, handle)
        self.outputs = lib.kjit_function_output_count(handle)
        self._output_codes = []
        for s in range(len(self.signatures)):
            codes = []
            for k in range(self.outputs):
                code = ctypes.c_int(-1)
                self.context.check(lib.kjit_function_output(handle, s, k, ctypes.byref(code)))
                codes.append(code.value)
            self._output_codes.append(tuple(codes))

    def output_types(self, signature=0):
        """The element type names of a signature's outputs, in order."""
        return tuple(_lib.DTYPE_NAMES[c] for c in self._output_codes[signature])

    def __call__(self, *args, out=None, stream=None):
        n, k = self.param_count, self.outputs
        if len(args) != n:
            raise InvalidArgumentError(f"{self.name} takes {n} input{'' if n == 1 else 's'}, "
                                       f"{len(args)} given (its {k} outputs go to out=)")
        scalars = False
        if out is None:
            cb = CallBuffers(n)
            try:
                info = [(CONVERTERS.get(type(x)) or converter_for(type(x)))(x, cb, i)
                        for i, x in enumerate(args)]
                sig = ctypes.c_int()
                self.context.check(lib.kjit_function_match(self.handle, cb.args_addr, n,
                                                           ctypes.byref(sig)))
            finally:
                cb.keep.clear()
            alloc = template = None
            shape = ()
            for i, (_, s, a, _) in enumerate(info):
                if a is not None and template is None:
                    alloc, template = a, args[i]
                if s is not None:
                    shape = _broadcast(shape, s)
            if shape is False:
                shape = ()  # kjit's own message names the shapes
            scalars = all(s is None for (_, s, _, _) in info)
            outs = tuple((alloc or _alloc_host)(template, tuple(shape), code)
                         for code in self._output_codes[sig.value])
        else:
            outs = tuple(out) if isinstance(out, (tuple, list)) else None
            if outs is None or len(outs) != k:
                raise InvalidArgumentError(f"{self.name} has {k} outputs: out= takes a tuple of "
                                           f"{k} arrays")
        full = tuple(args) + outs
        cb = CallBuffers(len(full))
        try:
            info = [(CONVERTERS.get(type(x)) or converter_for(type(x)))(x, cb, i)
                    for i, x in enumerate(full)]
            if cb.keep:
                self._sync_producers(cb)
            if not self._is_cuda:
                self._check_memory(info)
            self._call_packed(cb, len(full), None, stream)
        finally:
            cb.keep.clear()
        if scalars:
            return tuple(o[()] for o in outs)
        return outs

    def prepare(self, *args, out=None):
        """Generates the code a call with these inputs would run."""
        cb = CallBuffers(len(args))
        for i, x in enumerate(args):
            (CONVERTERS.get(type(x)) or converter_for(type(x)))(x, cb, i)
        self.context.check(lib.kjit_prepare(self.handle, cb.args_addr, len(args), None))


class GuvectorizedFunction(Function):
    """A @guvectorize function: f(*inputs, out=None, stream=None) or
    f(*inputs, *outputs).  The loop dimensions (those before each operand's
    core) broadcast as NumPy's gufuncs do; outputs not given are allocated
    (beside the first input that is an array, on its device) and returned:
    one array, or a tuple for several outputs."""

    def __init__(self, module, handle):
        super().__init__(module, handle)
        self.layout = lib.kjit_function_layout(handle).decode()
        self.inputs = lib.kjit_function_layout_inputs(handle)
        self.outputs = lib.kjit_function_layout_outputs(handle)
        self._cores = _parse_layout(self.layout)

    def __repr__(self):
        return (f"<kjit.Function guvectorize {self.name} \"{self.layout}\" "
                f"{' | '.join(self.signatures)}>")

    @property
    def ufunc(self):
        """This function as a NumPy generalized ufunc with its layout as the
        signature (cpu and parallel targets, with the compiled path): one loop
        per signature, picked by NumPy's type rules, so axes=, axis=,
        keepdims=, out=, dtype=, casting= and other libraries'
        __array_ufunc__ (Dask's apply_gufunc) work as with NumPy's own
        gufuncs.  Made on first use."""
        u = self.__dict__.get("_ufunc")
        if u is None:
            u = self.__dict__["_ufunc"] = _make_ufunc(self, self.inputs, self.outputs,
                                                      self.layout)
        return u

    # What a library's __array_ufunc__ reads of a ufunc (Dask's apply_gufunc
    # takes the signature).
    @property
    def nin(self):
        return self.inputs

    @property
    def nout(self):
        return self.outputs

    @property
    def signature(self):
        return self.layout

    @property
    def __name__(self):
        return self.name

    def __call__(self, *args, out=None, stream=None):
        ni, no = self.inputs, self.outputs
        if stream is None and len(args) in (ni, ni + no):
            result = _dispatch(self, args[:ni], args[ni:] or _outputs(out), {})
            if result is not NotImplemented:
                return result
        if len(args) == ni + no:
            if out is not None:
                raise InvalidArgumentError(f"{self.name}: the outputs are among the "
                                           f"arguments; give no out=")
            outs = tuple(args[ni:])
        elif len(args) == ni:
            outs = None if out is None else (tuple(out) if isinstance(out, tuple) else (out,))
            if outs is not None and len(outs) != no:
                raise InvalidArgumentError(f"{self.name} has {no} output"
                                           f"{'' if no == 1 else 's'}; out= gives {len(outs)}")
        else:
            raise InvalidArgumentError(f"{self.name} takes its {ni} input"
                                       f"{'' if ni == 1 else 's'}, or its inputs and "
                                       f"{no} output{'' if no == 1 else 's'} "
                                       f"(\"{self.layout}\"); {len(args)} given")
        inputs = args[:ni]
        if outs is None:
            outs = self._allocate(inputs)
        full = tuple(inputs) + tuple(outs)
        if len(full) == len(self._written):
            self._refuse_read_only(full)
        cb, info = self._pack(full)
        try:
            if not self._is_cuda:
                self._check_memory(info)
            self._call_packed(cb, len(full), None, stream)
        finally:
            self._done(cb)
        return outs[0] if no == 1 else outs

    def _pack_inputs(self, args):
        """CallBuffers holding the inputs alone (or the inputs and outputs)."""
        if len(args) not in (self.inputs, self.inputs + self.outputs):
            raise InvalidArgumentError(f"{self.name} takes its {self.inputs} inputs, or its "
                                       f"inputs and outputs; {len(args)} given")
        cb = CallBuffers(len(args))
        info = [(CONVERTERS.get(type(x)) or converter_for(type(x)))(x, cb, i)
                for i, x in enumerate(args)]
        return cb, info

    def prepare(self, *args, out=None):
        """Generates the code a call with these inputs (and outputs) would run."""
        cb, _ = self._pack_inputs(args)
        self.context.check(lib.kjit_prepare(self.handle, cb.args_addr, len(args), None))

    def match(self, *args):
        """The index of the signature a call with these inputs takes."""
        cb, _ = self._pack_inputs(args)
        sig = ctypes.c_int()
        self.context.check(lib.kjit_function_match(self.handle, cb.args_addr, len(args),
                                                   ctypes.byref(sig)))
        return sig.value

    def _allocate(self, inputs):
        """Outputs of the shape the call gives: the broadcast loop shape, then
        each output's core, of the types of the signature the inputs pick."""
        n = len(inputs)
        cb, info = self._pack_inputs(inputs)
        sig = ctypes.c_int()
        self.context.check(lib.kjit_function_match(self.handle, cb.args_addr, n,
                                                   ctypes.byref(sig)))
        cores, sizes, loop = self._cores, {}, ()
        for q, (code, shape, alloc, gpu) in enumerate(info):
            shape = tuple(shape or ())
            rank = len(cores[q])
            if len(shape) < rank:
                loop = False
                break
            for name, size in zip(cores[q], shape[len(shape) - rank:]):
                if sizes.setdefault(name, size) != size:
                    loop = False
            if loop is False:
                break
            loop = _broadcast(loop, shape[:len(shape) - rank])
        if loop is False:
            # Shapes kjit refuses: its own message says why.
            self.context.check(lib.kjit_prepare(self.handle, cb.args_addr, n, None))
            raise ShapeError(f"{self.name}: the shapes do not fit \"{self.layout}\"")
        alloc = template = None
        for i, (_, _, a, _) in enumerate(info):
            if a is not None:
                alloc, template = a, inputs[i]
                break
        params = self.params(sig.value)
        outs = []
        for q in range(n, n + self.outputs):
            code = _lib.DTYPE_NAMES.index(params[q][0])
            shape = tuple(loop) + tuple(sizes[name] for name in cores[q])
            outs.append((alloc or _alloc_host)(template, shape, code))
        return tuple(outs)


def _make_ufunc(fn, nin, nout, layout):
    """A numpy.ufunc of fn's compiled loops, one per signature (NumPy has no
    bfloat16: signatures with it are left out); a gufunc with `layout`."""
    if _fast is None:
        raise InvalidArgumentError(f"{fn.name}.ufunc needs the compiled path, which "
                                   f"this install lacks: {HOT_PATH}")
    if fn._is_cuda:
        raise InvalidArgumentError(f"{fn.name}.ufunc: a numpy.ufunc runs on the host; "
                                   f"load the module for cpu or parallel")
    loops = []
    for s in range(len(fn.signatures)):
        codes = [_lib.DTYPE_NAMES.index(name) for name, _ in fn.params(s)]
        if layout is None:
            result = fn._results[s]
            if result is None or result < 0:
                continue
            codes.append(result)
        if _lib.BF16 in codes:
            continue
        loops.append(tuple(codes))
    if not loops:
        raise InvalidArgumentError(f"{fn.name}.ufunc: no signature has NumPy types")
    kind = "@vectorize" if layout is None else f"@guvectorize \"{layout}\""
    doc = f"kjit {kind} {fn.name}: {' | '.join(fn.signatures)}"
    if layout is None:
        return _fast.make_ufunc(fn, fn.handle, fn.context.handle, fn.name, doc, nin, loops)
    return _fast.make_ufunc(fn, fn.handle, fn.context.handle, fn.name, doc, nin, loops, nout,
                            layout)


def _parse_layout(layout):
    """[(dimension names of each operand's core)], inputs then outputs."""
    cores = []
    for side in layout.replace(" ", "").replace("\t", "").split("->"):
        for core in re.findall(r"\(([^)]*)\)", side):
            cores.append(tuple(d for d in core.split(",") if d))
    return cores


def _alloc_host(template, shape, code):
    return np.empty(shape, NP_DTYPES[code])


def _broadcast(a, b):
    """NumPy's broadcast of two shapes, or False when they do not broadcast."""
    if a is False:
        return False
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return False
    return tuple(out)


def _dims(value, what):
    if isinstance(value, (int, np.integer)):
        dims = (int(value), 1, 1)
    else:
        dims = tuple(int(v) for v in value)
        if not 1 <= len(dims) <= 3:
            raise InvalidArgumentError(f"the {what} has 1 to 3 extents, not {len(dims)}")
        dims += (1,) * (3 - len(dims))
    if any(d < 1 or d >= 1 << 32 for d in dims):
        # past 32 bits too (ctypes would wrap 2**32 to 0); kjit_launch holds
        # the rest to CUDA's limits on every target
        raise InvalidArgumentError(f"{what} {dims}: every extent is at least 1 and below 2**32")
    return (ctypes.c_uint32 * 3)(*dims)


class Launcher:
    """kernel[grid, block], kernel[grid, block, stream] or kernel[grid, block,
    stream, shared_bytes] (the launch's dynamic shared memory, for the
    kernel's shared(T) arrays): call it with the kernel's arguments to launch."""

    def __init__(self, function, config):
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise InvalidArgumentError(f"launch {function.name} as {function.name}[grid, "
                                       f"block], [grid, block, stream] or [grid, block, "
                                       f"stream, shared_bytes]")
        shared = config[3] if len(config) == 4 else 0
        if isinstance(shared, bool) or not isinstance(shared, (int, np.integer)) or \
                not 0 <= shared < 1 << 32:
            raise InvalidArgumentError(f"shared_bytes {shared!r}: the bytes of dynamic shared "
                                       f"memory per block, an int from 0")
        self.shared_bytes = int(shared)
        self.function = function
        self.grid = _dims(config[0], "grid")
        self.block = _dims(config[1], "block")
        self._grid_addr = ctypes.addressof(self.grid)
        self._block_addr = ctypes.addressof(self.block)
        stream = config[2] if len(config) > 2 else None
        self._stream = stream  # keeps a foreign stream object alive
        self._stream_ptr = stream_pointer(stream, function.context) if stream is not None \
            else None
        self._options = _lib.LaunchOptions(self._stream_ptr, self.shared_bytes)
        self._options_addr = ctypes.addressof(self._options)

    def __call__(self, *args):
        fn = self.function
        if fn._writes and len(args) == fn.param_count:
            fn._refuse_read_only(args)
        cb, info = fn._pack(args)
        try:
            if not fn.context.is_cuda:
                fn._check_memory(info)
            for i, x in enumerate(args):
                if CONVERTERS.get(type(x)) is _array_like:
                    raise InvalidArgumentError(
                        f"{fn.name}: argument {i} is a {type(x).__name__}; pass an array "
                        f"(a kernel may write into it)")
            status = _kjit_launch_ex(fn.handle, self._grid_addr, self._block_addr,
                                     cb.args_addr, len(args), self._options_addr)
            if status:
                _raise(fn.context.handle, status)
        finally:
            fn._done(cb)

    _call_slow = __call__


def _launcher(function, config):
    """What kernel[config] gives: a Launcher, wrapped in _fast.Launch (the C
    launch, which hands it what it does not take) when the module is there."""
    python = Launcher(function, config)
    if _fast is None:
        return python
    return _fast.Launch(python, function.handle, function.context.handle,
                        bytes(bool(w) for w in function._written), tuple(python.grid),
                        tuple(python.block), python._stream_ptr, python.shared_bytes,
                        function.context.is_cuda)


# ------------------------------------------------------------------ streams

class Stream:
    """A kjit stream: work queued on it runs in order, concurrently with other
    streams.  On cpu targets a stream is accepted and does nothing (calls
    complete before they return).  `handle` is the CUstream, for CuPy
    (cupy.cuda.ExternalStream(s.handle)) or PyTorch
    (torch.cuda.ExternalStream(s.handle))."""

    def __init__(self, context=None, _wrap=None):
        self.context = context or default_context()
        out = ctypes.c_void_p()
        self._borrowed = _wrap is not None
        if _wrap is None:
            self.context.check(lib.kjit_stream_create(self.context.handle, ctypes.byref(out)))
        else:
            if not _lib.HAS_STREAM_WRAP:
                raise InvalidArgumentError("this libkjit.so is older than kjit_stream_wrap: "
                                           "foreign streams are not accepted")
            self.context.check(lib.kjit_stream_wrap(self.context.handle, _wrap,
                                                    ctypes.byref(out)))
        self._ptr = out.value

    @property
    def handle(self):
        if not _lib.HAS_STREAM_WRAP:
            return 0
        return lib.kjit_stream_handle(self._ptr) or 0

    def __cuda_stream__(self):
        return (0, self.handle)

    def synchronize(self):
        self.context.check(lib.kjit_stream_synchronize(self._ptr))

    def __repr__(self):
        kind = "wrapping" if self._borrowed else "on"
        return f"<kjit.Stream {kind} {self.handle:#x} ({self.context.target})>"

    def __del__(self):
        ptr, self._ptr = getattr(self, "_ptr", None), None
        if ptr:
            try:
                lib.kjit_stream_destroy(ptr)
            except Exception:
                pass


def foreign_stream_handle(stream):
    """The CUstream of a CuPy, PyTorch or Numba stream, or of anything with
    __cuda_stream__; None when `stream` is none of them."""
    if isinstance(stream, (int, np.integer)):
        return int(stream)
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        return int(protocol()[1])
    for attribute in ("cuda_stream", "ptr"):  # PyTorch, CuPy
        value = getattr(stream, attribute, None)
        if isinstance(value, (int, np.integer)):
            return int(value)
    handle = getattr(stream, "handle", None)  # Numba: a ctypes c_void_p
    if handle is not None:
        return int(getattr(handle, "value", handle) or 0)
    return None


def wrap_stream(context, handle):
    stream = context._wrapped.get(handle)
    if stream is None:
        stream = context._wrapped[handle] = Stream(context, _wrap=handle)
    return stream


def stream_object(stream, context):
    """The kjit Stream for a stream= argument that is not None (a foreign
    stream's wrapper), or None for the legacy default stream."""
    if isinstance(stream, Stream):
        return stream
    handle = foreign_stream_handle(stream)
    if handle is None:
        raise InvalidArgumentError(f"{stream!r} is not a stream (kjit.Stream, a CuPy or "
                                   f"PyTorch stream, or a CUstream handle)")
    if handle == 0:
        return None  # the legacy default stream
    return wrap_stream(context, handle)


def stream_pointer(stream, context):
    """The kjit_stream pointer for a stream= argument (None: the default stream)."""
    if stream is None:
        return None
    found = stream_object(stream, context)
    return None if found is None else found._ptr


def _fast_stream(function, stream):
    """stream_object for _fast.c: the kjit Stream of a call's stream= (which
    holds its context), or None for the legacy default stream."""
    return stream_object(stream, function.context)


if _fast is not None:
    # What calls with stream= (and CuPy arrays without out=) need in C, now
    # that Stream and stream_pointer are defined.
    _fast.setup(_address(lib.kjit_call), _address(lib.kjit_function_match),
                _address(lib.kjit_launch_ex), _raise, DeviceArray, _alloc_like_kjit,
                _address(lib.kjit_call_async), Stream, _fast_stream, _alloc_cupy)


# ------------------------------------------------------------------- events

class Event:
    """A point recorded on a stream; end.elapsed_ms(start) or
    kjit.elapsed_ms(start, end) gives the time between two, in milliseconds
    (CUDA events on cuda, the host clock elsewhere)."""

    def __init__(self, stream=None, context=None):
        if context is None:
            context = stream.context if isinstance(stream, Stream) else default_context()
        self.context = context
        out = ctypes.c_void_p()
        context.check(lib.kjit_event_record(context.handle, stream_pointer(stream, context),
                                            ctypes.byref(out)))
        self._ptr = out.value

    def elapsed_ms(self, start):
        ms = ctypes.c_double()
        self.context.check(lib.kjit_event_elapsed(start._ptr, self._ptr, ctypes.byref(ms)))
        return ms.value

    def __del__(self):
        ptr, self._ptr = getattr(self, "_ptr", None), None
        if ptr:
            try:
                lib.kjit_event_destroy(ptr)
            except Exception:
                pass


# ------------------------------------------------------------------ devices

def cuda_reason():
    """None when the cuda target is usable, else why not."""
    reason = ctypes.create_string_buffer(512)
    if lib.kjit_cuda_available(reason, len(reason)) == 0:
        return None
    return reason.value.decode(errors="replace") or "no CUDA driver or GPU"


def device_info(index):
    info = _lib.DeviceInfo()
    status = lib.kjit_cuda_device_info(index, ctypes.byref(info))
    if status:
        raise from_status(status, cuda_reason() or f"no CUDA device {index}")
    return {"index": index, "name": info.name.decode(errors="replace"),
            "compute_capability": (info.compute_major, info.compute_minor),
            "total_memory": info.total_memory, "driver_version": info.driver_version,
            "multiprocessors": info.multiprocessors}
