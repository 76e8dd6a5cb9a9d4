"""kjit.dask on a real distributed.LocalCluster of 2 worker processes: every
form (@vectorize, @guvectorize, @reduce, @kernel stencils) against NumPy, the
reduction's bits the same on every scheduler and worker count, each module
compiled once per worker, and a worker killed mid-computation survived.
Skipped, saying so, where Dask or distributed is not installed."""
import logging
import os
import signal
import sys
import time

import numpy as np
import pytest

from conftest import INSTALLED, REPO, TARGETS, example
import kjit

try:
    import dask
    import dask.array as da
except ImportError as e:
    pytest.skip(f"skipped: dask is not installed (python3 -m pip install 'dask[array]'): {e}",
                allow_module_level=True)
try:
    import distributed
except ImportError as e:
    pytest.skip(f"skipped: distributed is not installed (python3 -m pip install distributed): "
                f"{e}", allow_module_level=True)
import kjit.dask as kd  # noqa: E402

HEAT = example("dask/heat.kern")


@pytest.fixture(scope="module")
def client():
    # Worker processes are started afresh (spawn): they find this kjit (the
    # source tree's, or the installed one) and its library as the test does.
    if not INSTALLED:
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [os.path.join(REPO, "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       silence_logs=logging.CRITICAL,
                                       dashboard_address=None, worker_dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def numpy_heat(u, alpha, steps):
    """The stencil in NumPy: the outer ring fixed."""
    u = u.copy()
    for _ in range(steps):
        v = u.copy()
        around = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
        v[1:-1, 1:-1] = u[1:-1, 1:-1] + alpha * (around - np.float32(4) * u[1:-1, 1:-1])
        u = v
    return u


def kjit_heat(u, alpha, steps, target="cpu"):
    """The same kernel on the whole grid in one process."""
    k = kjit.load(HEAT, target=target).heat_step
    a, b = u.copy(), u.copy()
    for _ in range(steps):
        k[(-(-u.shape[1] // 32), -(-u.shape[0] // 8)), (32, 8)](a, b, alpha)
        a, b = b, a
    return a


@pytest.mark.parametrize("target", ["cpu", "parallel"])
def test_vectorize_broadcasts_over_chunks(client, rng, target):
    m = kd.load(example("add.kern"), target=target)
    a = rng.random((600, 500)).astype(np.float32)
    b = rng.random(500).astype(np.float32)
    da_ = da.from_array(a, chunks=(150, 200))
    db = da.from_array(b, chunks=120)            # chunks unlike a's: aligned by Dask
    r = m.add(da_, db)
    assert isinstance(r, da.Array) and r.dtype == np.float32 and r.shape == a.shape
    np.testing.assert_array_equal(client.compute(r).result(), a + b)
    np.testing.assert_array_equal(m.add(da_, 1.5).compute(), a + np.float32(1.5))
    np.testing.assert_array_equal(m.add(da_, b).compute(), a + b)   # a NumPy argument


def test_guvectorize_keeps_cores_whole(client, rng):
    g = kd.load(example("gufunc.kern"), target="parallel")
    x = rng.random((2000, 16))
    y = rng.random((2000, 16))
    # the core dimension (16) split in x: rechunked whole, as apply_gufunc does
    r = g.dot(da.from_array(x, chunks=(500, 4)), da.from_array(y, chunks=(300, 16)))
    assert r.shape == (2000,)
    np.testing.assert_allclose(client.compute(r).result(), (x * y).sum(axis=1), rtol=1e-12)
    a = rng.random((6, 5, 4)).astype(np.float32)
    b = rng.random((4, 3)).astype(np.float32)
    r = g.matmul(da.from_array(a, chunks=(2, 5, 4)), b)
    np.testing.assert_allclose(client.compute(r).result(), a @ b, rtol=1e-5)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2), -1])
def test_reduce_against_numpy(client, rng, axis):
    r = kd.load(example("reduce.kern"), target="parallel")
    x = rng.random((90, 70, 40)).astype(np.float32)
    dx = da.from_array(x, chunks=(20, 30, 17))
    got = client.compute(r.vsum(dx, axis=axis)).result()
    np.testing.assert_allclose(got, x.sum(axis=axis, dtype=np.float64), rtol=2e-6)
    got = client.compute(r.vmax(dx, axis=axis, init=0.5, keepdims=True)).result()
    np.testing.assert_array_equal(got, np.maximum(x.max(axis=axis, keepdims=True), 0.5))


def test_reduce_with_a_map(client, rng):
    r = kd.load(example("reduce.kern"), target="cpu")
    x = rng.random((300, 200))
    y = rng.random(200)
    dx = da.from_array(x, chunks=(64, 64))
    got = client.compute(r.dot(dx, y, combine="vsum", axis=1)).result()
    np.testing.assert_allclose(got, x @ y, rtol=1e-12)
    got = client.compute(r.sumsq(dx, combine=r.vsum)).result()
    np.testing.assert_allclose(got, (x * x).sum(), rtol=1e-12)
    with pytest.raises(kjit.InvalidArgumentError, match="combine="):
        r.dot(dx, dx)   # a map's partials are not f of its arguments
    with pytest.raises(kjit.InvalidArgumentError, match="without a map"):
        r.dot(dx, dx, combine="sumsq")


def test_reduce_same_bits_on_every_scheduler(client, rng):
    r = kd.load(example("reduce.kern"), target="parallel")
    # values of many magnitudes, so that another order gives other bits
    x = (rng.standard_normal(1_000_000) * 10.0 ** rng.integers(-6, 7, 1_000_000)) \
        .astype(np.float32)
    dx = da.from_array(x, chunks=33_333)
    total = r.vsum(dx, split_every=4)
    cluster = [client.compute(total).result() for _ in range(3)]
    with dask.config.set(scheduler="sync"):          # one worker, in order
        sync = total.compute()
    with dask.config.set(scheduler="threads", num_workers=3):
        threads = total.compute()
    bits = {np.float32(v).tobytes() for v in cluster + [sync, threads]}
    assert len(bits) == 1, f"the same chunking gave {len(bits)} different sums"
    # an f32 sum of 1e6 values from 1e-6 to 1e6 in magnitude cancels: its
    # rounding error reached 1.8e-5 of the sum for one seed (4167663732)
    np.testing.assert_allclose(sync, x.sum(dtype=np.float64), rtol=1e-4)
    # and the tree is Dask's: another split gives the same bits run after run
    other = r.vsum(dx, split_every=2)
    assert client.compute(other).result().tobytes() == other.compute(scheduler="sync").tobytes()


def test_stencil_time_steps_against_numpy(client, rng):
    h = kd.load(HEAT, target="parallel")
    u = rng.random((300, 260)).astype(np.float32)
    du = da.from_array(u, chunks=(80, 70))
    alpha = np.float32(0.2)
    steps = 11
    got = client.compute(h.heat_step.stencil(du, alpha, depth=4, steps=steps)).result()
    # the chunked run gives the bits of one launch sequence on the whole grid
    np.testing.assert_array_equal(got, kjit_heat(u, alpha, steps))
    np.testing.assert_allclose(got, numpy_heat(u, alpha, steps), rtol=1e-5, atol=1e-6)
    # depth 1: one step per exchange
    got = h.heat_step.stencil(du, alpha, depth=1, steps=3).compute(scheduler="sync")
    np.testing.assert_array_equal(got, kjit_heat(u, alpha, 3))
    with pytest.raises(kjit.InvalidArgumentError, match="u: T"):
        h.heat_step.stencil(du.astype(np.float64), alpha, depth=2)
    with pytest.raises(kjit.InvalidArgumentError, match="less than the radius"):
        h.heat_step.stencil(du, alpha, depth=1, radius=2)


def test_each_worker_compiles_a_module_once(client, rng):
    m = kd.compile("@vectorize\nfn twice(x: f64) -> f64 { return 2.0 * x; }\n",
                   name="twice.kern", target="cpu")
    x = rng.random(100_000)
    r = m.twice(da.from_array(x, chunks=1000))   # 100 tasks
    np.testing.assert_array_equal(client.compute(r).result(), 2 * x)
    counts = client.run(kd.compiled_modules)
    per_worker = [c.get("twice.kern on cpu", 0) for c in counts.values()]
    assert max(per_worker) == 1 and sum(per_worker) >= 1, counts


def test_a_killed_worker_is_survived(client, rng):
    h = kd.load(HEAT, target="cpu")
    u = rng.random((1024, 512)).astype(np.float32)
    du = da.from_array(u, chunks=(128, 512))
    alpha = np.float32(0.1)
    steps = 120
    want = kjit_heat(u, alpha, steps)
    future = client.compute(h.heat_step.stencil(du, alpha, depth=40, steps=steps))
    pids = client.run(os.getpid)
    victim = None
    deadline = time.monotonic() + 30
    while victim is None and time.monotonic() < deadline:
        busy = [w for w, tasks in client.processing().items() if tasks]
        if busy and not future.done():
            victim = busy[0]
        time.sleep(0.02)
    assert victim is not None, "no worker was ever busy"
    os.kill(pids[victim], signal.SIGKILL)
    print(f"killed {victim} (pid {pids[victim]}) with the result not yet done")
    got = future.result(timeout=120)
    np.testing.assert_array_equal(got, want)
    assert victim not in client.scheduler_info()["workers"] or \
        client.run(os.getpid).get(victim) != pids[victim]


@pytest.mark.parametrize("target", [t for t in TARGETS if getattr(t, "values", [t])[0] == "cuda"])
def test_cupy_chunks_on_cuda(rng, target):
    cupy = pytest.importorskip("cupy", reason="skipped: CuPy is not installed")
    m = kd.load(example("add.kern"), target="cuda")
    a = rng.random((400, 300)).astype(np.float32)
    d = da.from_array(cupy.asarray(a), chunks=(100, 100))
    r = m.add(d, d)
    assert type(r._meta).__module__.startswith("cupy")
    with dask.config.set(scheduler="sync"):
        np.testing.assert_array_equal(cupy.asnumpy(r.compute()), a + a)
        red = kd.load(example("reduce.kern"), target="cuda")
        s = red.vsum(d, axis=0).compute()
        assert type(s).__module__.startswith("cupy")
        np.testing.assert_allclose(cupy.asnumpy(s), a.sum(axis=0), rtol=1e-5)
        h = kd.load(HEAT, target="cuda")
        got = h.heat_step.stencil(d, np.float32(0.2), depth=2, steps=5).compute()
        np.testing.assert_allclose(cupy.asnumpy(got), kjit_heat(a, np.float32(0.2), 5),
                                   rtol=1e-5, atol=1e-6)


def test_stencil_periodic_boundary(rng):
    # with a periodic halo every cell of the array is an inner cell of its
    # padded chunk: the heat equation on a torus
    h = kd.load(HEAT, target="cpu")
    u = rng.random((64, 96)).astype(np.float32)
    alpha = np.float32(0.1)
    got = h.heat_step.stencil(da.from_array(u, chunks=(32, 48)), alpha, depth=2, steps=5,
                              boundary="periodic").compute(scheduler="sync")
    want = u.copy()
    for _ in range(5):
        around = sum(np.roll(want, s, axis=a) for s in (1, -1) for a in (0, 1))
        want = want + alpha * (around - np.float32(4) * want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_errors_name_the_problem():
    m = kd.compile("fn plain(x: f64) -> f64 { return x; }\n@vectorize\n"
                   "fn v(x: f64) -> f64 { return x; }\n", name="errors.kern", target="cpu")
    with pytest.raises(kjit.InvalidArgumentError, match="plain function"):
        m.plain
    with pytest.raises(kjit.NotFoundError):
        m.missing
    with pytest.raises(kjit.DTypeError):
        m.v(da.zeros(10, dtype=np.int8, chunks=5))   # no signature takes i8
    with pytest.raises(kjit.KjitIOError):
        kd.load("/nonexistent/file.kern")
    r = kd.load(example("reduce.kern"), target="cpu")
    with pytest.raises(kjit.InvalidArgumentError, match="axis"):
        r.vsum(da.zeros((4, 4), chunks=2), axis=2)
    with pytest.raises(kjit.ShapeError, match="init="):
        r.vsum(da.zeros((0, 4), chunks=2), axis=0)
    np.testing.assert_array_equal(
        r.vsum(da.zeros((0, 4), chunks=2), axis=0, init=1.5).compute(), np.full(4, 1.5))


def test_gpu_cluster_gives_each_worker_its_own_device():
    # The arrangement alone (no GPU needed): one worker process per device
    # ordinal, each with CUDA_VISIBLE_DEVICES its own.
    try:
        import dask_cuda  # noqa: F401
        pytest.skip("skipped: dask-cuda is installed, and gpu_cluster uses it (GPUs needed)")
    except ImportError:
        pass
    from distributed import system
    from distributed.worker_memory import CPU_COUNT
    # a worker count unlike the core count, so that the limit below is not
    # also Dask's default (the host's memory over the cores, per thread)
    n = 3 if CPU_COUNT != 3 else 2
    with kd.gpu_cluster(devices=list(range(n)), silence_logs=logging.CRITICAL) as cluster, \
            distributed.Client(cluster) as c:
        seen = c.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
        limits = c.run(lambda dask_worker: dask_worker.memory_manager.memory_limit)
    assert sorted(seen.values()) == [str(d) for d in range(n)], seen
    # Each worker gets its share of the host's memory, not Dask's default
    # share by cores, against which Dask counts CuPy chunks' device bytes and
    # spills them to disk past 60%.
    assert list(limits.values()) == [system.MEMORY_LIMIT // n] * n, limits
    assert kd.worker_memory_limit("auto", 1) == system.MEMORY_LIMIT
    assert kd.worker_memory_limit("4 GiB", 3) == "4 GiB"


def test_an_edited_file_is_compiled_afresh(tmp_path):
    path = tmp_path / "edited.kern"
    path.write_text("@vectorize\nfn f(x: f64) -> f64 { return x + 1.0; }\n")
    ones = da.ones(4, chunks=2)
    np.testing.assert_array_equal(
        kd.load(path, target="cpu").f(ones).compute(scheduler="sync"), np.full(4, 2.0))
    path.write_text("@vectorize\nfn f(x: f64) -> f64 { return x + 20.0; }\n")
    np.testing.assert_array_equal(
        kd.load(path, target="cpu").f(ones).compute(scheduler="sync"), np.full(4, 21.0))
