"""kjit functions on dask.array arrays, chunk by chunk, on any Dask scheduler
(threads, processes, a distributed cluster of many hosts or one worker per
GPU).

    import kjit.dask as kd
    m = kd.load("examples/add.kern", target="parallel")   # "cpu", "parallel", "cuda"
    c = m.add(a, b)                       # @vectorize: a lazy dask array
    s = r.vsum(x, axis=0)                 # @reduce: partials, a fixed tree
    y = h.heat_step.stencil(u, 0.1, depth=4, steps=100)   # @kernel, map_overlap

Dask does the distributing; kjit only runs on each chunk.  What travels to
the workers is a ModuleSource (the .kern file's path, or the source text, with
the target and options), never a compiled handle: each worker process compiles
a module the first time a task needs it (from the shared disk cache when
another process compiled it before) and keeps it for every later task.

Chunks may be NumPy arrays (cpu and parallel, or cuda with a copy in and out)
or CuPy arrays (cuda, on the worker's own GPU: see gpu_cluster()).
See docs/scaling.md.
"""
import ctypes
import math
import os
import threading

import numpy as np

try:
    import dask.array as da
except ImportError as e:
    raise ImportError(f"kjit.dask needs Dask: python3 -m pip install 'dask[array]' distributed "
                      f"({e})") from e

from . import _core
from ._arrays import NP_DTYPES
from ._lib import DTYPE_NAMES
from .errors import InvalidArgumentError, ShapeError

__all__ = ["load", "compile", "ModuleSource", "DaskModule", "compiled_modules", "gpu_cluster",
           "worker_memory_limit"]


# ------------------------------------------------------ modules on workers

class ModuleSource:
    """What a worker needs to compile a module: a .kern path (which every
    worker must be able to read: a shared file system, or the same checkout)
    or source text, the target and the context's options.  Pickles as these
    plain values; equal sources share one compiled module per process."""

    def __init__(self, target, options, path=None, source=None, name="<source>.kern"):
        if (path is None) == (source is None):
            raise InvalidArgumentError("a ModuleSource has a path or source text, one of them")
        if target not in ("cpu", "parallel", "cuda", "auto"):
            raise InvalidArgumentError(f"target {target!r}: one of auto, cpu, parallel, cuda")
        self.path = None if path is None else os.path.abspath(os.fspath(path))
        self.source = source
        self.name = name if source is not None else self.path
        self.target = target
        self.options = tuple(sorted(options.items()))
        # The file's size and time when loaded: an edited file is another
        # module, compiled afresh, not the one a worker kept from before.
        stat = os.stat(self.path) if self.path and os.path.exists(self.path) else None
        self.stamp = (stat.st_size, stat.st_mtime_ns) if stat else None
        self.key = (self.path, self.stamp, self.source, self.name, self.target, self.options)

    def __eq__(self, other):
        return isinstance(other, ModuleSource) and self.key == other.key

    def __hash__(self):
        return hash(self.key)

    def __repr__(self):
        what = self.path or f"source {self.name}"
        return f"<kjit.dask.ModuleSource {what} on {self.target}>"

    def compile(self, target=None, options=None):
        """Compiles it here (no cache: module() is the cached way)."""
        ctx = _core.context(target or self.target, **dict(self.options if options is None
                                                          else options))
        return ctx.load(self.path) if self.path else ctx.compile(self.source, self.name)


_modules = {}          # ModuleSource -> Module, in this process
_compiles = {}         # ModuleSource's name and target -> times compiled here
_modules_lock = threading.Lock()


def module(source):
    """The process's compiled module for `source`: compiled on first use,
    then kept (a worker compiles each module once, not per task)."""
    m = _modules.get(source)
    if m is None:
        with _modules_lock:
            m = _modules.get(source)
            if m is None:
                m = _modules[source] = source.compile()
                label = f"{source.name} on {source.target}"
                _compiles[label] = _compiles.get(label, 0) + 1
    return m


def compiled_modules():
    """{"path on target": times compiled} for this process: run it on every
    worker with client.run(kjit.dask.compiled_modules) to see that each
    compiled each module once."""
    return dict(_compiles)


# --------------------------------------------------------- the client side

def load(path, target="parallel", **options):
    """A DaskModule over a .kern file: its functions take dask arrays.  The
    file is compiled here too, on cpu, for its functions' kinds and types
    (which do not depend on the target)."""
    return DaskModule(ModuleSource(target, options, path=path))


def compile(source, name="<source>.kern", target="parallel", **options):
    """A DaskModule over kern source text (the text travels to the workers)."""
    return DaskModule(ModuleSource(target, options, source=source, name=name))


class DaskModule:
    """A module whose functions apply to dask arrays: m.f, or m["f"]."""

    def __init__(self, source):
        self.source = source
        # Kinds, signatures and result types: the same on every target, so a
        # client without a GPU learns them from a cpu compile.
        self.local = module(ModuleSource("cpu", {}, path=source.path, source=source.source,
                                         name=source.name))
        self.function_names = self.local.function_names
        self._functions = {}

    def __getitem__(self, name):
        fn = self._functions.get(name)
        if fn is None:
            local = self.local[name]
            cls = {"vectorize": VectorizedDask, "guvectorize": GuvectorizedDask,
                   "reduce": ReduceDask, "kernel": KernelDask}.get(local.kind)
            if cls is None:
                raise InvalidArgumentError(f"{name} is a plain function; kjit.dask applies "
                                           f"@vectorize, @guvectorize, @reduce and @kernel ones")
            fn = self._functions[name] = cls(self, local)
        return fn

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self[name]

    def __repr__(self):
        return f"<kjit.dask.DaskModule {self.source.name} on {self.source.target}>"


class _DaskFunction:
    def __init__(self, owner, local):
        self.source = owner.source
        self.local = local          # the client's cpu compile: kinds and types only
        self.name = local.name
        self.kind = local.kind

    def __repr__(self):
        return f"<kjit.dask {self.kind} {self.name} on {self.source.target}>"

    def _dtype(self, signature, param=None):
        name = self.local.result(signature) if param is None else \
            self.local.params(signature)[param][0]
        return NP_DTYPES[DTYPE_NAMES.index(name)]


def _sample(x, value=0):
    """A one-element stand-in of x's element type, for matching signatures."""
    if hasattr(x, "dtype") and getattr(x, "ndim", 0) > 0:
        return np.full(1, value, x.dtype)
    if hasattr(x, "dtype"):
        return np.full((), value, x.dtype)[()]
    return x


def _meta(args, dtype, ndim):
    """An empty array of the chunks' library (CuPy when any input is) and the
    result's type, so that Dask never calls a kjit function to guess it."""
    for a in args:
        m = getattr(a, "_meta", None)
        if m is not None and type(m).__module__.split(".")[0] == "cupy":
            import cupy
            return cupy.empty((0,) * ndim, dtype)
    return np.empty((0,) * ndim, dtype)


def _as_dask(x):
    if isinstance(x, da.Array):
        return x
    if isinstance(x, (list, tuple)):
        x = np.asarray(x)
    if hasattr(x, "shape") and getattr(x, "ndim", 0) > 0:
        return da.from_array(x, chunks=x.shape)   # one chunk; dask aligns it
    return x                                       # a scalar, passed as it is


# ------------------------------------------------------------ @vectorize

class _CallChunks:
    """The task: f on aligned chunks, on the worker's compiled module."""

    def __init__(self, source, name):
        self.source, self.name = source, name

    def __call__(self, *chunks):
        return module(self.source)[self.name](*chunks)


class VectorizedDask(_DaskFunction):
    """f(*args): elementwise over aligned chunks, broadcast as NumPy does
    (dask arrays, NumPy arrays and scalars; chunks of different sizes are
    rechunked to a common chunking first)."""

    def __call__(self, *args):
        args = [_as_dask(a) for a in args]
        dtype = self._dtype(self.local.match(*(_sample(a) for a in args)))
        arrays = [a for a in args if isinstance(a, da.Array)]
        if not arrays:
            return module(self.source)[self.name](*args)
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        ndim = len(shape)
        pairs = []
        for a in args:
            if isinstance(a, da.Array):
                pairs += [a, tuple(range(ndim - a.ndim, ndim))]
            else:
                pairs += [a, None]
        return da.blockwise(_CallChunks(self.source, self.name), tuple(range(ndim)), *pairs,
                            dtype=dtype, meta=_meta(arrays, dtype, ndim),
                            name=f"kjit-{self.name}-" + _token(self.source, args))


def _token(source, args):
    from dask.base import tokenize
    return tokenize(source.key, *args)


# ---------------------------------------------------------- @guvectorize

class GuvectorizedDask(_DaskFunction):
    """f(*inputs): the gufunc over dask arrays, as dask.array.apply_gufunc
    runs one: loop dimensions chunked and broadcast, each core dimension
    whole in every chunk (rechunked to one chunk when it is split)."""

    def __call__(self, *inputs):
        local = self.local
        if len(inputs) != local.inputs:
            raise InvalidArgumentError(f"{self.name} takes {local.inputs} input"
                                       f"{'' if local.inputs == 1 else 's'} (\"{local.layout}\"); "
                                       f"{len(inputs)} given")
        cores = _core._parse_layout(local.layout)
        samples = []
        for q, x in enumerate(inputs):
            rank = len(cores[q])
            if hasattr(x, "dtype") and getattr(x, "ndim", 0) > 0:
                samples.append(np.zeros((1,) * max(rank, 1), x.dtype) if rank else
                               np.zeros((), x.dtype)[()])
            else:
                samples.append(_sample(x))
        sig = local.match(*samples)
        n = local.inputs
        dtypes = [self._dtype(sig, n + q) for q in range(local.outputs)]
        arrays = [a for a in inputs if isinstance(a, da.Array)]
        metas = tuple(_meta(arrays, dt, 0) for dt in dtypes)
        return da.apply_gufunc(_CallChunks(self.source, self.name), local.layout, *inputs,
                               meta=metas if local.outputs > 1 else metas[0],
                               allow_rechunk=True, vectorize=False)


# --------------------------------------------------------------- @reduce

class _Partials:
    """The task of the first level: f over this chunk's reduced axes (map's
    arguments broadcast), kept as extent-1 dimensions."""

    def __init__(self, source, name, axes, dtype):
        self.source, self.name, self.axes, self.dtype = source, name, axes, dtype

    def __call__(self, *chunks):
        shape = np.broadcast_shapes(*(c.shape for c in chunks if hasattr(c, "shape")))
        keep = tuple(1 if d in self.axes else s for d, s in enumerate(shape))
        template = next(c for c in chunks if getattr(c, "ndim", 0) > 0)
        out = _empty_like(template, tuple(s for d, s in enumerate(shape) if d not in self.axes),
                          self.dtype)
        module(self.source)[self.name](*chunks, axis=self.axes, out=out)
        return out.reshape(keep)


class _Combine:
    """The tasks of the later levels: `combine` (f itself, or the plain
    @reduce with f's combine for a @reduce(map = g)) over partials that Dask
    concatenated in chunk order along the reduced axes; init in the last."""

    def __init__(self, source, name, dtype, init=None):
        self.source, self.name, self.dtype, self.init = source, name, dtype, init

    def __call__(self, x, axis, keepdims):
        axes = tuple(sorted(axis)) if isinstance(axis, tuple) else (axis,)
        kept = tuple(s for d, s in enumerate(x.shape) if d not in axes)
        out = _empty_like(x, kept, self.dtype)
        module(self.source)[self.name](x, axis=axes, init=self.init, out=out)
        if keepdims:
            out = out.reshape(tuple(1 if d in axes else s for d, s in enumerate(x.shape)))
        return out


def _chunk_identity(x, axis, keepdims):
    return x


def _empty_like(template, shape, dtype):
    if type(template).__module__.split(".")[0] == "cupy":
        import cupy
        return cupy.empty(shape, dtype)
    return np.empty(shape, dtype)


class ReduceDask(_DaskFunction):
    """f(*args, axis=None, init=None, keepdims=False, split_every=None,
    combine=None): each chunk is reduced by kjit to one partial per kept
    element; the partials are combined by f in the tree Dask's reduction
    builds (split_every of them at a time, in chunk order), which depends on
    the chunking and split_every alone: a given chunking gives the same bits
    on every run, scheduler and worker count.  A @reduce(map = g) reduces g
    of its arguments (broadcast together); its partials are combined by
    `combine`, a @reduce of the module with the same combining operation
    without the map (vsum for dot), which kjit cannot derive itself."""

    def __call__(self, *args, axis=None, init=None, keepdims=False, split_every=None,
                 combine=None):
        local = self.local
        if len(args) != local.inputs:
            raise InvalidArgumentError(f"{self.name} reduces {local.inputs} argument"
                                       f"{'' if local.inputs == 1 else 's'}, {len(args)} given")
        mapped = _has_map(local)
        if combine is None:
            if mapped:
                raise InvalidArgumentError(
                    f"{self.name} is a @reduce(map = ...): name the @reduce of this module "
                    f"that combines its partial results without the map, "
                    f"combine=\"...\" (for a sum of g, a plain sum)")
            combine = self.name
        elif not isinstance(combine, str):
            combine = combine.name
        combine_local = local.module[combine]
        if combine_local.kind != "reduce" or combine_local.inputs != 1 or \
                _has_map(combine_local):
            raise InvalidArgumentError(f"combine={combine!r}: a @reduce without a map, of the "
                                       f"same module")
        args = [_as_dask(a) for a in args]
        arrays = [a for a in args if isinstance(a, da.Array)]
        if not arrays:
            raise InvalidArgumentError(f"{self.name}: no dask or NumPy array to reduce")
        # The result type: the probe's reduction of one element of each
        # argument's type (ones: a map need not like zeros).
        dtype = np.asarray(local(*(_sample(a, 1) for a in args))).dtype
        np.asarray(combine_local(np.ones(1, dtype)))   # raises if it lacks f's type
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        ndim = len(shape)
        axes = _normalise_axes(axis, ndim, self.name)
        if math.prod(shape[d] for d in axes) == 0:
            if init is None:
                raise ShapeError(f"{self.name}: an empty reduction needs init=")
            kept = tuple(1 if d in axes else s for d, s in enumerate(shape)) if keepdims else \
                tuple(s for d, s in enumerate(shape) if d not in axes)
            return da.full(kept, init, dtype=dtype)
        args = [da.broadcast_to(a, shape) if isinstance(a, da.Array) else a for a in args]
        pairs = []
        for a in args:
            pairs += [a, tuple(range(ndim))] if isinstance(a, da.Array) else [a, None]
        partials = da.blockwise(_Partials(self.source, self.name, axes, dtype), tuple(range(ndim)),
                                *pairs, adjust_chunks={d: 1 for d in axes}, dtype=dtype,
                                meta=_meta(arrays, dtype, ndim),
                                name=f"kjit-{self.name}-partials-" + _token(self.source, args)
                                + str(axes))
        return da.reduction(partials, _chunk_identity,
                            _Combine(self.source, combine, dtype, init), axis=axes,
                            keepdims=keepdims, dtype=dtype, split_every=split_every,
                            combine=_Combine(self.source, combine, dtype),
                            concatenate=True, meta=_meta(arrays, dtype, ndim - (
                                0 if keepdims else len(axes))),
                            name=f"kjit-{self.name}-{combine}")


def _has_map(fn):
    """Whether a @reduce is a @reduce(map = g) (kjit_function_map)."""
    get = _core.lib.kjit_function_map
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    return bool(get(fn.handle))


def _normalise_axes(axis, ndim, name):
    if axis is None:
        return tuple(range(ndim))
    items = axis if isinstance(axis, tuple) else (axis,)
    out = []
    for a in items:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or not -ndim <= a < ndim:
            raise InvalidArgumentError(f"{name}: axis {axis!r}: None, or ints in "
                                       f"[{-ndim}, {ndim}) for {ndim} dimensions")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise InvalidArgumentError(f"{name}: axis {axis!r} names an axis twice")
    return tuple(sorted(out))


# --------------------------------------------------------------- @kernel

class _StencilSteps:
    """The task of one exchange: `steps` launches of the kernel on a chunk
    with its halo, ping-ponging between two buffers (the kernel reads its
    first array and writes its second, both the padded chunk's shape)."""

    def __init__(self, source, name, steps, args, block):
        self.source, self.name, self.steps, self.args, self.block = \
            source, name, steps, args, block

    def __call__(self, chunk):
        kernel = module(self.source)[self.name]
        a = chunk.copy()    # Dask's chunks may be read-only or shared
        b = a.copy()        # cells the kernel leaves keep their values
        launch = kernel[_grid(a.shape, self.block), self.block]
        for _ in range(self.steps):
            launch(a, b, *self.args)
            a, b = b, a
        return a


def _default_block(ndim):
    return {1: (256,), 2: (32, 8), 3: (32, 4, 4)}.get(ndim)


def _grid(shape, block):
    """Blocks enough for one thread per element; x is the last axis (as in
    `let x, y = grid(2)` with a[y, x])."""
    extents = tuple(reversed(shape))
    return tuple(max(1, -(-e // b)) for e, b in zip(extents, block))


class KernelDask(_DaskFunction):
    """kernel.stencil(x, *args, depth, steps=1, radius=1, boundary="none",
    block=None): runs `steps` time steps of a @kernel stencil
    fn k(u: T[...], out: T[...], *args) over a dask array without gathering
    it.  Each chunk gets a halo of `depth` cells from its neighbours
    (dask.array.map_overlap); a stencil of `radius` leaves depth // radius
    steps valid inside the halo, so the chunks run that many steps before the
    next exchange.  boundary is map_overlap's ("none": the array's outer
    cells are the kernel's own boundary; "periodic", "reflect", "nearest",
    or a constant).  The launch is one thread per element of the padded
    chunk: grid = ceil(shape / block), x along the last axis."""

    def stencil(self, x, *args, depth, steps=1, radius=1, boundary="none", block=None):
        x = _as_dask(x)
        if not isinstance(x, da.Array) or x.ndim not in (1, 2, 3):
            raise InvalidArgumentError(f"{self.name}.stencil: a 1-, 2- or 3-D array")
        depths = depth if isinstance(depth, tuple) else (depth,) * x.ndim
        if len(depths) != x.ndim or any(not isinstance(d, (int, np.integer)) or d < 0
                                        for d in depths):
            raise InvalidArgumentError(f"{self.name}.stencil: depth {depth!r}: an int >= 0 or "
                                       f"one per dimension")
        if not isinstance(radius, (int, np.integer)) or radius < 1:
            raise InvalidArgumentError(f"{self.name}.stencil: radius {radius!r}: an int >= 1")
        per_exchange = min(depths) // radius
        if steps and per_exchange < 1:
            raise InvalidArgumentError(f"{self.name}.stencil: depth {depth!r} is less than the "
                                       f"radius {radius}: no step would be valid")
        block = tuple(block) if block is not None else _default_block(x.ndim)
        if len(block) != x.ndim:
            raise InvalidArgumentError(f"{self.name}.stencil: block {block!r}: one extent per "
                                       f"dimension")
        params = self.local.params(0)
        if len(params) != 2 + len(args) or params[0] != params[1] or \
                params[0][1] != x.ndim or NP_DTYPES[DTYPE_NAMES.index(params[0][0])] != x.dtype:
            raise InvalidArgumentError(
                f"{self.name}.stencil: the kernel must be fn {self.name}(u: T[...], out: T[...], "
                f"...) with T[...] the array's type and rank ({x.dtype}, {x.ndim}-D) and "
                f"{len(args)} more argument{'' if len(args) == 1 else 's'}; it is "
                f"{self.local.signatures[0]}")
        done = 0
        while done < steps:
            k = min(per_exchange, steps - done)
            x = x.map_overlap(_StencilSteps(self.source, self.name, k, args, block),
                              depth=dict(enumerate(depths)), boundary=boundary,
                              dtype=x.dtype, meta=x._meta, trim=True)
            done += k
        return x


# ------------------------------------------------------------- clusters

def gpu_cluster(devices=None, threads_per_worker=1, memory_limit="auto", **kwargs):
    """A local Dask cluster of one worker process per GPU, each seeing its
    own GPU alone (CUDA_VISIBLE_DEVICES, as dask-cuda sets it), so a cuda
    module on a worker runs on that worker's GPU.  dask-cuda's
    LocalCUDACluster when it is installed; else the same arrangement with
    distributed's SpecCluster.  devices: the GPU ordinals (default: every
    GPU kjit sees).

    memory_limit: each worker's, as Dask takes it ("auto": the host's memory
    divided among the workers, as dask-cuda's default is; 0 or None: no
    limit).  Dask's own default gives a worker of one thread its share of
    the host by cores (8 GiB of 256 on 32 cores), and it counts CuPy chunks'
    device bytes against it: past 60% it spills them to disk through host
    memory, every task reading one back.  That made one worker holding 8 GB
    of chunks of one GPU 20x to 280x slower than two holding 4 GB each
    (docs/scaling.md)."""
    from . import device_count
    if devices is None:
        devices = list(range(device_count()))
    if not devices:
        raise InvalidArgumentError("gpu_cluster: no GPU (kjit.cuda_reason(): "
                                   f"{_core.cuda_reason()})")
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        LocalCUDACluster = None
    if LocalCUDACluster is not None:
        # its "auto" is the host's memory divided among the workers already
        return LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(map(str, devices)),
                                threads_per_worker=threads_per_worker,
                                memory_limit=memory_limit, **kwargs)
    from distributed import Nanny, Scheduler, SpecCluster
    limit = worker_memory_limit(memory_limit, len(devices))
    # On this host only (the GPU machine may have no network to listen on).
    quiet = {"silence_logs": kwargs["silence_logs"]} if kwargs.get("silence_logs") else {}
    workers = {f"gpu{d}": {"cls": Nanny,
                           "options": {"nthreads": threads_per_worker, "host": "127.0.0.1",
                                       "memory_limit": limit,
                                       "env": {"CUDA_VISIBLE_DEVICES": str(d)}, **quiet}}
               for d in devices}
    scheduler = {"cls": Scheduler, "options": {"dashboard": False, "dashboard_address": ":0",
                                               "host": "127.0.0.1"}}
    return SpecCluster(workers=workers, scheduler=scheduler, **kwargs)


def worker_memory_limit(memory_limit, workers):
    """The memory_limit gpu_cluster gives each of `workers` workers: "auto" is
    the host's memory (as Dask measures it, cgroups included) over the
    workers; anything else goes to Dask as it is."""
    if memory_limit != "auto":
        return memory_limit
    from distributed import system
    return int(system.MEMORY_LIMIT // max(1, workers))
