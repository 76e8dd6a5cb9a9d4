"""Why one Dask worker holding several CuPy chunks of one GPU ran 20x (stencil)
and 280x (sum) slower than two workers holding one each (docs/scaling.md):
one run on the GPU machine that times each step apart.

    python3 tests/gpu/dask_diag.py ROOT [--small] [--cpu]
    (ROOT: the bundle or the repository; tests/gpu/dask.sh's Python path;
    --small: a quarter of the sizes; --cpu: the NumPy control alone, which
    runs on any machine)

1. Without Dask, in this process: kjit on one CuPy chunk beside CuPy's own
   call (the sum of a 1 GB chunk; 8 steps of the heat stencil on a padded
   16400^2 chunk), then the whole 1-GPU workload as a loop over its chunks:
   the floor that a 1-worker Dask run should come near.
2. With Dask (kjit.dask on kd.gpu_cluster): the benchmark's sum of 2e9 f32
   (8 chunks of 1 GB) and stencil of 2 x 16384^2 f32 (64 steps, halo 8) on
   1 worker and on 2, each worker's memory_limit either Dask's own default
   (the host's memory over its cores, per thread: what gpu_cluster gave
   before) or gpu_cluster's (the host's memory over the workers).  For each:
   the wall time, the task stream's time by action (compute, transfer,
   disk-write, disk-read, deserialize), chunks serialized to host memory by
   Dask (count, bytes, seconds: a CuPy chunk's bytes go device to host then),
   the workers' spill counters, pauses in their logs.
3. --cpu (or no GPU): the same mechanism with NumPy chunks on the cpu target,
   1 worker with a memory_limit below the data against one above it.

The hypothesis the reading gave: Dask counts a CuPy chunk's device bytes
(dask.sizeof) against the worker's memory_limit, and spills chunks past 60%
of it to disk through host memory.  Dask's default limit for a worker of one
thread is the host's memory over its cores (8 GiB on 256 GiB and 32 cores):
one worker holding the 8 GB of the sum spills 3 of its 8 chunks, and reading
them in order through an LRU cache of 5 misses every time (16 GB through the
disk a run); two workers holding 4 GB each spill nothing.  The last line
says whether this run bears it out.  Prints as it goes; about 2 minutes on 2
H200s (a phase that would start past 150 s is skipped, said so)."""
import logging
import os
import sys
import time
from collections import defaultdict

import numpy as np

root = next((a for a in sys.argv[1:] if not a.startswith("--")), ".")
SMALL = "--small" in sys.argv
CPU_ONLY = "--cpu" in sys.argv
START = time.perf_counter()
BUDGET_S = 150

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import distributed  # noqa: E402
from dask.graph_manipulation import clone  # noqa: E402

import kjit  # noqa: E402
import kjit.dask as kd  # noqa: E402

try:
    import cupy
except ImportError:
    cupy = None

HEAT = os.path.join(root, "examples", "dask", "heat.kern")
REDUCE = os.path.join(root, "examples", "reduce.kern")
QUIET = logging.ERROR


def say(text=""):
    print(text, flush=True)


def elapsed():
    return time.perf_counter() - START


def best(run, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return min(times)


def dask_default_limit(threads=1):
    """Dask's memory_limit="auto" for a worker of `threads` threads: the
    host's memory times threads over cores (distributed.worker_memory)."""
    from dask.system import CPU_COUNT
    from distributed import system
    return int(system.MEMORY_LIMIT * min(1, threads / CPU_COUNT))


def gib(n):
    return "no limit" if not n else f"{n / 2**30:.1f} GiB"


# ------------------------------------------------ counters on the workers

def install_counters(dask_worker=None):
    """Wraps Dask's serialization of NumPy and CuPy arrays in this process
    (a worker: spilling to disk and sending to another worker both go
    through it; for CuPy it is the copy to host memory, and back)."""
    from distributed.protocol.serialize import dask_deserialize, dask_serialize
    import builtins
    if getattr(builtins, "_kjit_diag_counts", None) is not None:
        builtins._kjit_diag_counts.clear()
        return True
    counts = builtins._kjit_diag_counts = defaultdict(float)
    types = [np.ndarray]
    try:
        import cupy as cp
        types.append(cp.ndarray)
    except ImportError:
        pass
    for t in types:
        name = "cupy" if t is not np.ndarray else "numpy"
        ser, deser = dask_serialize.dispatch(t), dask_deserialize.dispatch(t)

        # chunks (1 MiB and up) apart from small results and partials
        def wrapped_ser(x, _ser=ser, _name=name):
            t0 = time.perf_counter()
            r = _ser(x)
            what = _name if x.nbytes >= 1 << 20 else f"small {_name}"
            counts[f"{what} to host: count"] += 1
            counts[f"{what} to host: bytes"] += x.nbytes
            counts[f"{what} to host: s"] += time.perf_counter() - t0
            return r

        def wrapped_deser(header, frames, _deser=deser, _name=name):
            t0 = time.perf_counter()
            r = _deser(header, frames)
            what = _name if getattr(r, "nbytes", 0) >= 1 << 20 else f"small {_name}"
            counts[f"{what} from host: count"] += 1
            counts[f"{what} from host: s"] += time.perf_counter() - t0
            return r
        dask_serialize.register(t)(wrapped_ser)
        dask_deserialize.register(t)(wrapped_deser)
    return True


def read_counters(dask_worker):
    import builtins
    counts = dict(getattr(builtins, "_kjit_diag_counts", {}) or {})
    data = dask_worker.data
    for (label, unit), v in getattr(data, "cumulative_metrics", {}).items():
        counts[f"spill {label} ({unit})"] = v
    slow = getattr(data, "slow", None)
    counts["chunks on disk now"] = len(slow) if slow is not None else 0
    counts["memory_limit"] = dask_worker.memory_manager.memory_limit or 0
    counts["status"] = str(dask_worker.status)
    return counts


def reset_counters(dask_worker):
    import builtins
    if getattr(builtins, "_kjit_diag_counts", None) is not None:
        builtins._kjit_diag_counts.clear()
    data = dask_worker.data
    if hasattr(data, "cumulative_metrics"):
        data.cumulative_metrics.clear()


def pauses(client):
    found = 0
    try:
        for lines in client.get_worker_logs(n=1000).values():
            found += sum("Paus" in msg for _, msg in lines)
    except Exception:
        pass
    return found


def actions(stream):
    """Seconds by task-stream action (summed over tasks and workers)."""
    out = defaultdict(float)
    for task in stream:
        for ss in task.get("startstops", ()):
            out[ss["action"]] += ss["stop"] - ss["start"]
    return out


# ------------------------------------------------------------- workloads

def random_block(block_info=None, gpu=True):
    info = block_info[None]
    seed = hash(tuple(info["chunk-location"])) & 0xFFFFFFFF
    xp = cupy if gpu and cupy is not None else np
    return xp.random.default_rng(seed).random(info["chunk-shape"], dtype=np.float32)


def random_array(shape, chunks, gpu):
    xp = cupy if gpu and cupy is not None else np
    return da.map_blocks(random_block, gpu=gpu, dtype=np.float32, meta=xp.empty(
        (0,) * len(shape), np.float32), chunks=da.core.normalize_chunks(chunks, shape))


def synchronize_gpu():
    if cupy is not None:
        cupy.cuda.Device().synchronize()
    if kjit.cuda_available():
        kjit.synchronize(kjit.context("cuda"))


TIMEOUT_S = 60  # one wait; a paused worker would wait for ever


def one_config(label, devices, memory_limit, side, total, gpu, repeat):
    """The sum and the stencil on one cluster: a dict of figures (with
    "error" when a step failed or timed out: a paused worker, say)."""
    row = {"config": label, "memory_limit": gib(memory_limit) if memory_limit != "auto"
           else "auto", "sum s": float("nan"), "stencil s": float("nan"), "pauses": 0,
           "sum actions": {}, "stencil actions": {}, "sum workers": {}, "stencil workers": {}}
    try:
        run_config(row, devices, memory_limit, side, total, gpu, repeat)
    except Exception as error:  # reported, and the next configuration runs
        row["error"] = f"{type(error).__name__}: {error}"
    return row


def run_config(row, devices, memory_limit, side, total, gpu, repeat):
    target = "cuda" if gpu else "cpu"
    T = TIMEOUT_S
    if gpu:
        cluster = kd.gpu_cluster(devices=devices, memory_limit=memory_limit,
                                 silence_logs=QUIET)
    else:
        cluster = distributed.LocalCluster(n_workers=len(devices), threads_per_worker=1,
                                           memory_limit=memory_limit, processes=True,
                                           silence_logs=QUIET, dashboard_address=":0")
    with cluster, distributed.Client(cluster) as client:
        client.run(install_counters)
        limits = client.run(lambda dask_worker: dask_worker.memory_manager.memory_limit)
        row["memory_limit"] = gib(next(iter(limits.values())))
        r = kd.load(REDUCE, target=target)
        h = kd.load(HEAT, target=target)

        try:
            x = client.persist(random_array((total,), total // 8, gpu))
            distributed.wait(x, timeout=T)
            s = r.vsum(x)
            client.compute(clone(s, omit=x)).result(timeout=T)   # compiles on each worker
            client.run(reset_counters)
            with distributed.get_task_stream(client) as ts:
                row["sum s"] = best(lambda: client.compute(clone(s, omit=x)).result(timeout=T),
                                    repeat)
            row["sum actions"] = actions(ts.data)
            row["sum workers"] = client.run(read_counters)
            del x, s

            u = client.persist(random_array((2 * side, side), (side, side), gpu))
            distributed.wait(u, timeout=T)
            st = h.heat_step.stencil(u, np.float32(0.1), depth=8, steps=64)

            def run_stencil():
                distributed.wait(client.persist(clone(st, omit=u)), timeout=T)
                client.run(synchronize_gpu)
            run_stencil()
            client.run(reset_counters)
            with distributed.get_task_stream(client) as ts:
                row["stencil s"] = best(run_stencil, repeat)
            row["stencil actions"] = actions(ts.data)
            row["stencil workers"] = client.run(read_counters)
            del u, st
        finally:
            row["pauses"] = pauses(client)
            try:
                row["status"] = sorted(set(client.run(
                    lambda dask_worker: str(dask_worker.status), timeout=10).values()))
            except Exception as error:
                row["status"] = [f"unknown ({type(error).__name__})"]
    return row


def summarize(row):
    say(f"\n--- {row['config']} (memory_limit {row['memory_limit']} a worker)")
    if "error" in row:
        say(f"FAILED or TIMED OUT (> {TIMEOUT_S} s a step): {row['error'][:300]}")
    for work in ("sum", "stencil"):
        acts = row[f"{work} actions"]
        acts_text = ", ".join(f"{k} {v:.2f} s" for k, v in sorted(acts.items())) or "none"
        say(f"{work}: best {row[f'{work} s'] * 1e3:.0f} ms; task stream (all runs, all "
            f"workers): {acts_text}")
        for worker, counts in sorted(row[f"{work} workers"].items()):
            shown = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in counts.items()
                     if k not in ("memory_limit",) and v}
            say(f"  {worker}: {shown}")
    say(f"pauses in the workers' logs: {row['pauses']}; workers' status at the end: "
        f"{', '.join(row.get('status', ['?']))}")


def host_copies(row, work):
    """Chunks (1 MiB and up) Dask serialized to host memory during the timed
    runs: spilled, or sent to another worker."""
    return sum(c.get("cupy to host: count", 0) + c.get("numpy to host: count", 0)
               for c in row[f"{work} workers"].values())


def disk(row, work):
    acts = row[f"{work} actions"]
    return acts.get("disk-write", 0) + acts.get("disk-read", 0)


# ------------------------------------------------------------ no Dask

def without_dask(side, total):
    say("\n=== 1. without Dask, this process, one GPU")
    r = kjit.load(REDUCE, target="cuda")
    h = kjit.load(HEAT, target="cuda")
    n = total // 8
    x = cupy.random.default_rng(1).random(n, dtype=np.float32)
    o = cupy.empty((), np.float32)
    r.vsum(x, axis=(0,), out=o)
    synchronize_gpu()

    def kjit_sum():
        r.vsum(x, axis=(0,), out=o)
        synchronize_gpu()

    def cupy_sum():
        cupy.sum(x, out=o)
        synchronize_gpu()
    k, c = best(kjit_sum, 5), best(cupy_sum, 5)
    say(f"sum of one chunk ({n:.1e} f32, {x.nbytes / 1e9:.1f} GB): kjit {k * 1e3:.2f} ms, "
        f"CuPy {c * 1e3:.2f} ms ({x.nbytes / k / 1e9:.0f} GB/s kjit)")
    del x
    pad = side + 16
    a = cupy.random.default_rng(2).random((pad, pad), dtype=np.float32)
    b = a.copy()
    launch = h.heat_step[(-(-pad // 32), -(-pad // 8)), (32, 8)]

    def kjit_steps():
        p, q = a, b
        for _ in range(8):
            launch(p, q, np.float32(0.1))
            p, q = q, p
        synchronize_gpu()

    def cupy_copy():
        cupy.copyto(b, a)
        synchronize_gpu()
    k, c = best(kjit_steps, 3), best(cupy_copy, 3)
    say(f"8 stencil steps on one padded chunk ({pad}^2 f32): kjit {k * 1e3:.1f} ms "
        f"({k / 8 * 1e3:.2f} ms a step; a CuPy copy of the chunk {c * 1e3:.2f} ms)")
    per_step = k / 8
    del a, b
    # the 1-GPU floors: 8 chunk sums and a combine; 2 chunks x 64 steps
    xs = [cupy.random.default_rng(10 + i).random(n, dtype=np.float32) for i in range(2)]

    parts = [cupy.empty((), np.float32) for _ in range(8)]

    def sums():
        for i in range(8):   # 8 chunks, 2 distinct (memory): the same bytes read
            r.vsum(xs[i % 2], axis=(0,), out=parts[i])
        r.vsum(cupy.stack(parts))
        synchronize_gpu()
    floor_sum = best(sums, 3)
    floor_stencil = per_step * 64 * 2
    say(f"the 1-GPU floor: the sum of 8 chunks {floor_sum * 1e3:.0f} ms (a loop of kjit calls); "
        f"the stencil 2 chunks x 64 steps about {floor_stencil * 1e3:.0f} ms (steps alone)")
    del xs
    cupy.get_default_memory_pool().free_all_blocks()
    return floor_sum, floor_stencil


# ------------------------------------------------------------------ main

def report(rows, floors=None):
    say("\n| configuration | memory_limit | sum | sum: chunks to host, disk s | stencil | "
        "stencil: chunks to host, disk s | pauses |")
    say("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        if "error" in row:
            say(f"| {row['config']} | {row['memory_limit']} | failed or timed out: "
                f"{row['error'][:80]} | | | | {row['pauses']} |")
            continue
        say(f"| {row['config']} | {row['memory_limit']} | {row['sum s'] * 1e3:.0f} ms | "
            f"{host_copies(row, 'sum')}, {disk(row, 'sum'):.2f} s | "
            f"{row['stencil s'] * 1e3:.0f} ms | {host_copies(row, 'stencil')}, "
            f"{disk(row, 'stencil'):.2f} s | {row['pauses']} |")
    if floors:
        say(f"| no Dask, 1 GPU (section 1) | - | {floors[0] * 1e3:.0f} ms | - | "
            f"{floors[1] * 1e3:.0f} ms | - | - |")


def verdict(rows):
    by = {row["config"]: row for row in rows}
    old = by.get("1 worker, Dask's default limit")
    new = by.get("1 worker, gpu_cluster's limit")
    two = by.get("2 workers, gpu_cluster's limit")
    if not old or not new or "error" in new:
        say("\nverdict: incomplete (a configuration did not run)")
        return
    if "error" in old:
        say(f"\nverdict: with Dask's default limit the run failed or timed out ({old['pauses']} "
            f"pauses logged) and with gpu_cluster's it ran: the memory limit it is")
        return
    spilled_old = host_copies(old, "sum") + host_copies(old, "stencil") > 0 or \
        disk(old, "sum") + disk(old, "stencil") > 0
    spilled_new = host_copies(new, "sum") + host_copies(new, "stencil") > 0 or \
        disk(new, "sum") + disk(new, "stencil") > 0
    faster = old["sum s"] / new["sum s"]
    say(f"\n1 worker: gpu_cluster's limit ({new['memory_limit']}) against Dask's default "
        f"({old['memory_limit']}): sum {faster:.1f}x faster, stencil "
        f"{old['stencil s'] / new['stencil s']:.1f}x")
    if two:
        say(f"2 workers against 1 (gpu_cluster's limit): sum {new['sum s'] / two['sum s']:.2f}x, "
            f"stencil {new['stencil s'] / two['stencil s']:.2f}x (goal 1.8x)")
    if spilled_old and not spilled_new and faster > 3:
        say("verdict: CONFIRMED: the 1-worker slowness is Dask spilling chunks to disk through "
            "host memory under its default memory_limit; gpu_cluster's limit removes it")
    elif spilled_old and not spilled_new:
        say(f"verdict: the mechanism is there (chunks spilled under the small limit, none "
            f"under gpu_cluster's) but costs {faster:.1f}x here; on the GPU each spilled "
            f"chunk also crosses to host memory and back")
    elif not spilled_old:
        say("verdict: NOT the memory limit: no chunk went to host memory or disk; read the "
            "task stream's actions above")
    else:
        say("verdict: spilling seen, but it does not explain the times alone; read the "
            "actions and counters above")


def main():
    say(f"dask {dask.__version__}, distributed {distributed.__version__}, "
        f"CuPy {cupy.__version__ if cupy is not None else 'absent'}, kjit.hot_path "
        f"{kjit.hot_path}")
    from dask.system import CPU_COUNT
    from distributed import system
    say(f"host: {CPU_COUNT} cores, {gib(system.MEMORY_LIMIT)} as Dask measures it; Dask's default "
        f"memory_limit for a 1-thread worker: {gib(dask_default_limit())} (spills past 60%: "
        f"{gib(0.6 * dask_default_limit())})")
    gpus = kjit.device_count() if kjit.cuda_available() else 0
    gpu = gpus > 0 and cupy is not None and not CPU_ONLY
    if gpu:
        say(f"GPUs: {gpus} ({', '.join(d['name'] for d in kjit.devices())})")
    else:
        say(f"no GPU run: {'--cpu' if CPU_ONLY else kjit.cuda_reason() or 'no CuPy'}; the "
            f"NumPy control alone")
    rows = []
    if gpu:
        side, total = (8192, 500_000_000) if SMALL else (16384, 2_000_000_000)
        floors = without_dask(side, total)
        default = dask_default_limit()
        configs = [("1 worker, gpu_cluster's limit", [0], "auto", 2)]
        if gpus >= 2:
            configs.append(("2 workers, gpu_cluster's limit", [0, 1], "auto", 2))
        configs.append(("1 worker, Dask's default limit", [0], default, 1))
        if gpus >= 2:
            configs.append(("2 workers, Dask's default limit", [0, 1], default, 1))
        say(f"\n=== 2. Dask: the sum of {total:.0e} f32 (8 chunks) and the stencil of "
            f"2 x {side}^2 f32 (64 steps, halo 8)")
        for label, devices, limit, repeat in configs:
            if elapsed() > BUDGET_S:
                say(f"skipped: {label} (past {BUDGET_S} s)")
                continue
            rows.append(one_config(label, devices, limit, side, total, True, repeat))
            summarize(rows[-1])
        report(rows, floors)
        verdict(rows)
    else:
        # NumPy chunks: 8 x 12.5 MB of sum data, 2 x 1024^2 stencil; a limit
        # whose 60% (77 MB) is below the 100 MB of the sum, against none.
        # NumPy chunks are host memory, which the process-memory thresholds
        # (spill 70%, pause 80%) would see too; a CuPy chunk's device bytes
        # count in the managed measure alone, so those are turned off here.
        side, total = 1024, 25_000_000
        say(f"\n=== 3. the NumPy control on cpu: the sum of {total:.1e} f32 in 8 chunks "
            f"({total * 4 / 1e6:.0f} MB), the stencil 2 x {side}^2")
        with dask.config.set({"distributed.worker.memory.spill": False,
                              "distributed.worker.memory.pause": False,
                              "distributed.worker.memory.terminate": False}):
            for label, limit in (("1 worker, gpu_cluster's limit", 0),
                                 ("1 worker, Dask's default limit", 128 << 20)):
                rows.append(one_config(label, [0], limit, side, total, False, 2))
                summarize(rows[-1])
        say("\n(on cpu the 128 MiB limit stands for Dask's default on the GPU host: 60% of it "
            "is below the data, as 4.8 GiB is below the GPU sum's 8 GB)")
        report(rows)
        verdict(rows)
    say(f"\ndone in {elapsed():.0f} s")


if __name__ == "__main__":
    main()
