"""kjit.dask on 1 and 2 worker processes of a distributed.LocalCluster (one
thread each, kjit's cpu target: the workers are the only parallelism), for a
large elementwise call, a reduction and a stencil, in strong scaling (the same
size on both) and weak scaling (twice the size on 2); then the cost of one
task, a kjit call on a chunk against NumPy's own function on the same chunk.

    python3 tests/bench/bench_dask.py [--quick]      (make bench-dask)

Inputs are made on the workers (dask.array.random) and persisted before the
clock starts; each result is persisted and waited for, so the figures are
the work on the workers, not transfers to the client.  Each figure is the
fastest of 5 runs (the machine is shared).  Prints a Markdown table (docs/scaling.md has the last one)."""
import argparse
import logging
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))

import numpy as np  # noqa: E402

try:
    import kjit  # an installed kjit (make bench-dask installs one, with its compiled path)
except ImportError:
    sys.path.insert(0, os.path.join(REPO, "python"))
    os.environ.setdefault("KJIT_LIBRARY", os.path.join(REPO, "build", "libkjit.so"))
    # the workers, started afresh, find the source tree's too
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(REPO, "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    import kjit

try:
    import dask.array as da
    import distributed
except ImportError as e:
    print(f"skipped: bench_dask needs dask and distributed ({e})")
    sys.exit(0)

import kjit.dask as kd  # noqa: E402
from dask.graph_manipulation import clone  # noqa: E402

# A compute-bound elementwise function: a few hundred flops an element.
SOURCE = """
@vectorize(f32(f32), f64(f64))
fn work(x) {
    let s = x;
    for i in range(24) { s = sin(s) * 0.5 + cos(s) * 0.5; }
    return s;
}

@reduce(f32(f32, f32), f64(f64, f64))
fn total(a, b) { return a + b; }
"""
HEAT = os.path.join(REPO, "examples", "dask", "heat.kern")


def timed(run, repeat=5):
    """The fastest of `repeat` runs: on a machine shared with other jobs,
    the run that other work disturbed least."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def persist_wait(client, x):
    y = client.persist(x)
    distributed.wait(y)
    return y


def run_once(client, x, inputs):
    """Computes x on the workers and waits for it; x's own tasks get new
    keys each run (the inputs' are kept), so no run finds the last one's."""
    persist_wait(client, clone(x, omit=inputs))


def workloads(client, scale, quick):
    """name -> seconds, for inputs `scale` times the base size."""
    m = kd.compile(SOURCE, name="bench_dask.kern", target="cpu")
    h = kd.load(HEAT, target="cpu")
    n_elem = (2 if quick else 8) * 1_000_000 * scale
    n_sum = (10 if quick else 40) * 1_000_000 * scale
    rows = (1024 if quick else 2048) * scale
    cols = 1024 if quick else 2048
    out = {}
    x = persist_wait(client, da.random.random(n_elem, chunks=n_elem // 8).astype(np.float32))
    out["elementwise"] = timed(lambda: run_once(client, m.work(x), x))
    y = persist_wait(client, da.random.random(n_sum, chunks=n_sum // 8).astype(np.float32))
    out["reduction"] = timed(lambda: run_once(client, m.total(y), y))
    u = persist_wait(client, da.random.random((rows, cols), chunks=(rows // 8, cols))
                     .astype(np.float32))
    alpha = np.float32(0.1)
    out["stencil"] = timed(lambda: run_once(
        client, h.heat_step.stencil(u, alpha, depth=8, steps=32), u))
    del x, y, u
    return out


def task_cost(client, quick):
    """Seconds per task of one kjit call on a chunk and of NumPy on the same
    chunk: a graph of many small chunks, each task one call."""
    m = kd.load(os.path.join(REPO, "examples", "add.kern"), target="cpu")
    rows = []
    for chunk in (1_000, 100_000):
        tasks = 400 if quick else 1000
        a = persist_wait(client, da.random.random(chunk * tasks, chunks=chunk)
                         .astype(np.float32))
        t_kjit = timed(lambda: run_once(client, m.add(a, a), a))
        t_numpy = timed(lambda: run_once(client, a + a, a))
        # the calls alone, in this process, on one chunk
        host = np.random.default_rng(1).random(chunk).astype(np.float32)
        f = kjit.load(os.path.join(REPO, "examples", "add.kern"), target="cpu").add
        f(host, host)
        calls = 2000
        c_kjit = timed(lambda: [f(host, host) for _ in range(calls)]) / calls
        c_numpy = timed(lambda: [np.add(host, host) for _ in range(calls)]) / calls
        rows.append((chunk, tasks, t_kjit / tasks, t_numpy / tasks, c_kjit, c_numpy))
        del a
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    args = parser.parse_args()
    results = {}
    started = os.getloadavg()[0]
    for workers in (1, 2):
        with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                      dashboard_address=None, worker_dashboard_address=None,
                                      silence_logs=logging.ERROR) as cluster, \
                distributed.Client(cluster) as client:
            results[workers, "strong"] = workloads(client, 1, args.quick)
            results[workers, "weak"] = workloads(client, workers, args.quick)
            if workers == 1:
                cost = task_cost(client, args.quick)
    load = os.getloadavg()
    print(f"kjit.dask on {os.cpu_count()} cores (load average {started:.1f} at the start, "
          f"{load[0]:.1f} at the end), "
          f"cpu target, 1 thread a worker, hot path {kjit.hot_path}"
          f"{' (quick sizes)' if args.quick else ''}\n")
    print("| workload | 1 worker | 2 workers, same size | strong efficiency "
          "| 2 workers, twice the size | weak efficiency |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in ("elementwise", "reduction", "stencil"):
        t1 = results[1, "strong"][name]
        t2 = results[2, "strong"][name]
        w2 = results[2, "weak"][name]
        print(f"| {name} | {t1 * 1e3:.0f} ms | {t2 * 1e3:.0f} ms ({t1 / t2:.2f}x) "
              f"| {t1 / (2 * t2):.0%} | {w2 * 1e3:.0f} ms | {t1 / w2:.0%} |")
    print("\n| chunk (f32) | tasks | kjit add, a task | NumPy add, a task "
          "| kjit add, a call | NumPy add, a call |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for chunk, tasks, tk, tn, ck, cn in cost:
        print(f"| {chunk:,} | {tasks} | {tk * 1e6:.0f} us | {tn * 1e6:.0f} us "
              f"| {ck * 1e6:.1f} us | {cn * 1e6:.1f} us |")


if __name__ == "__main__":
    main()
