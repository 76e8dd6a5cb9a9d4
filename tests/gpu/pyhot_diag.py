"""Where a cuda call from Python goes, layer by layer, in one process (issue 26 item 1).

On one H200 machine `add(d, e, out=f)` (1,000 f32 kjit device arrays, the
null stream) read 5.13 us a call in tests/bench/bench_python.py while the C
API's kjit_call of the same add read 3.77 us in another process
(bin/latency) and a bare cuLaunchKernel 3.65: 1.36 us unexplained, where the
Python path's own host work on the fake driver is about 0.15 us.  This
script times, in each of several child processes, the layers of that call
side by side, rows taking turns round by round (the median of ROUNDS rounds
is printed):

  Python, empty loop          `for _ in range(k): pass`: the loop alone
  Python, noop(d, e, out=f)   a C function that does nothing, called with the
                              same three arguments (tests/gpu/pyhot_diag.c):
                              the interpreter's call and its argument passing
  Python, add(d, e, out=f)    the call itself (the compiled hot path)
  Python, lambda: add(...)    as bench_python.py calls it (one more frame)
  Python, add, cancellable=False context / the C API's default options
                              the same add on two more contexts: code without
                              cancel polls (a cancellable cuda kernel reads
                              its flag in mapped host memory), and also no
                              Ctrl-C guard (cancel_signal 0), as bin/latency's
  C, kjit_call, GIL held      kjit_call in a C loop inside this process
  C, kjit_call, GIL released  the same with the GIL released and taken back
                              around each call, as _fast.c does
  C, GIL release+take alone   that pair with nothing between
  C, bare cuLaunchKernel      the driver's launch of an add in kjit's form
                              (three 16-byte {data, extent} records as one
                              `extra` buffer), on the same context and stream
  C, bare launch, GIL released
  C, kjit_call on the other two contexts, GIL held

each in two batch forms:

  short   SHORT calls timed, then a synchronisation not timed: the launch
          queue never fills, so this is host time a call
  long    LONG calls and one synchronisation, timed together, as
          bench_python.py and bin/latency time them (2,000 calls, more
          than the driver's launch queue holds): once the queue is full a
          launch waits for the GPU, so a row can read the GPU's pace rather
          than its own host cost
  (calls) the long batch's calls alone, without its synchronisation

and in these processes:

  real              the driver, no affinity set
  real, pinned      the whole process on one CPU, set before kjit loads (the
                    driver's threads share it), as launch_diag.py pins
  real, main pinned the Python thread alone on one CPU, set after kjit's
                    context is made (the driver's threads free)
  fake              tests/cuda_host's fake driver (KJIT_CUDA_DRIVER): every
                    driver call returns at once, so each row is host work
                    alone (kjit's and Python's); the bare rows are the fake's

Reading: Python's share = add(...) - C kjit_call with the GIL released (the
same call from C); of it, noop - empty loop is what any call with these
arguments costs, the rest is _fast.c's packing and checks; the GIL pair's
cost is its own row; C kjit_call - bare launch is libkjit's host work on the
real driver; long against short says whether a figure is the GPU's pace; the
default-options rows against Python's say what Python's context (its polls,
its Ctrl-C guard) adds, on the host (short) and on the GPU (long).

  python3 tests/gpu/pyhot_diag.py [BUNDLE_OR_REPO]   (tests/gpu/pyhot.sh runs it)

Needs the compiled hot path (kjit.hot_path == "compiled"), cc, and Python's
headers (sysconfig's include folder) to build pyhot_diag.c.
"""
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
ROUNDS, SHORT, SHORT_BATCHES, LONG, N = 21, 50, 8, 2000, 1000

ROWS = (("empty", "Python, empty loop"),
        ("noop", "Python, noop(d, e, out=f)"),
        ("add", "Python, add(d, e, out=f)"),
        ("lambda", "Python, lambda: add(d, e, out=f)"),
        ("add_nocancel", "Python, add(d, e, out=f), cancellable=False context"),
        ("add_defaults", "Python, add(d, e, out=f), the C API's default options"),
        ("c_held", "C, kjit_call, GIL held"),
        ("c_released", "C, kjit_call, GIL released each call"),
        ("gil_pair", "C, GIL release + take alone"),
        ("bare", "C, bare cuLaunchKernel (kjit's form)"),
        ("bare_released", "C, bare cuLaunchKernel, GIL released"),
        ("c_nocancel", "C, kjit_call, cancellable=False context, GIL held"),
        ("c_defaults", "C, kjit_call, the C API's default options, GIL held"))


def build(work):
    """pyhot_diag's extension module in work; its folder."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = os.path.join(work, "_pyhot_ext" + suffix)
    include = sysconfig.get_paths()["include"]
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-D_GNU_SOURCE", f"-I{include}",
                    f"-I{os.path.join(ROOT, 'runtime')}", os.path.join(HERE, "pyhot_diag.c"),
                    "-o", target, "-ldl"], check=True)
    return work


def child(config):
    """One process's rows: prints a JSON object {row: {form: us}}."""
    if config == "real, pinned":
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import kjit
    from kjit import _core
    import _pyhot_ext as ext
    if kjit.hot_path != "compiled":
        print(json.dumps({"error": f"kjit.hot_path: {kjit.hot_path}"}))
        return
    if not kjit.cuda_available():
        print(json.dumps({"error": "no cuda (kjit.cuda_available() is False)"}))
        return
    add = kjit.load(os.path.join(ROOT, "examples", "add.kern"), target="cuda").add
    a = np.random.default_rng(0).random(N, dtype=np.float32)
    d, e = kjit.to_device(a, target="cuda"), kjit.to_device(a[::-1].copy(), target="cuda")
    f = kjit.device_array(N, np.float32, target="cuda")
    sync = kjit.context("cuda").synchronize
    add(d, e, out=f)
    sync()
    driver = os.environ.get("KJIT_CUDA_DRIVER") or "libcuda.so.1"
    bare_why = ext.setup(0, _core._address(_core.lib.kjit_call), add.handle, d._addr, e._addr,
                         f._addr, driver)
    # the same add on two more contexts, on the same arrays (one device, one
    # primary context) and an output of its own: cancellable=False (no cancel
    # polls in the code: a cancellable cuda kernel reads its flag in mapped
    # host memory), and the C API's default options, as bin/latency makes its
    # context (no polls and no Ctrl-C guard: the package always sets
    # cancel_signal, so this one is made with _core.signal's SIGINT as 0)
    nocancel = kjit.context("cuda", cancellable=False)
    real_signal = _core.signal
    _core.signal = type("NoSignal", (), {"SIGINT": 0})
    try:
        defaults = _core.Context("cuda", cancellable=False)
    finally:
        _core.signal = real_signal
    others = {}
    for slot, (name, ctx) in enumerate((("nocancel", nocancel), ("defaults", defaults)), 1):
        fn = ctx.load(os.path.join(ROOT, "examples", "add.kern")).add
        out_array = ctx.device_array(N, np.float32)
        fn(d, e, out=out_array)
        ctx.synchronize()
        ext.setup(slot, _core._address(_core.lib.kjit_call), fn.handle, d._addr, e._addr,
                  out_array._addr, "")
        others[name] = (fn, out_array, slot)
    if config == "real, main pinned":
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})  # this thread only
    noop = ext.noop
    c_loop = ext.loop

    def empty(k):
        t = time.perf_counter_ns()
        for _ in range(k):
            pass
        return time.perf_counter_ns() - t

    def noop_rows(k):
        t = time.perf_counter_ns()
        for _ in range(k):
            noop(d, e, out=f)
        return time.perf_counter_ns() - t

    def add_rows(k):
        t = time.perf_counter_ns()
        for _ in range(k):
            add(d, e, out=f)
        return time.perf_counter_ns() - t

    call = lambda: add(d, e, out=f)  # noqa: E731

    def rows_of(fn, out_array):
        def rows(k):
            t = time.perf_counter_ns()
            for _ in range(k):
                fn(d, e, out=out_array)
            return time.perf_counter_ns() - t
        return rows

    def lambda_rows(k):
        t = time.perf_counter_ns()
        for _ in range(k):
            call()
        return time.perf_counter_ns() - t

    runs = {"empty": empty, "noop": noop_rows, "add": add_rows, "lambda": lambda_rows,
            "c_held": lambda k: c_loop(0, k, 0), "c_released": lambda k: c_loop(1, k, 0),
            "gil_pair": lambda k: c_loop(2, k, 0)}
    for name, (fn, out_array, slot) in others.items():
        runs["add_" + name] = rows_of(fn, out_array)
        runs["c_" + name] = lambda k, slot=slot: c_loop(0, k, slot)
    if bare_why is None:
        runs["bare"] = lambda k: c_loop(3, k, 0)
        runs["bare_released"] = lambda k: c_loop(4, k, 0)
    # warm: half a second of calls, as bench_python.py does before its rows
    until = time.perf_counter() + 0.5
    while time.perf_counter() < until:
        for run in runs.values():
            run(100)
        sync()
    samples = {name: {"short": [], "long": [], "calls": []} for name in runs}
    names = list(runs)
    for r in range(ROUNDS):
        turn = names[r % len(names):] + names[:r % len(names)]
        for name in turn:
            run = runs[name]
            short = 0.0
            for _ in range(SHORT_BATCHES):
                sync()
                short += run(SHORT)
            sync()
            samples[name]["short"].append(short / (SHORT * SHORT_BATCHES) / 1e3)
            t = time.perf_counter_ns()
            calls = run(LONG)
            sync()
            samples[name]["long"].append((time.perf_counter_ns() - t) / LONG / 1e3)
            samples[name]["calls"].append(calls / LONG / 1e3)
    out = {name: {form: statistics.median(v) for form, v in forms.items()}
           for name, forms in samples.items()}
    out["spread"] = {name: [min(samples[name]["short"]), max(samples[name]["short"])]
                     for name in runs}
    if bare_why is not None:
        out["bare_why"] = bare_why
    if not os.environ.get("KJIT_CUDA_DRIVER"):
        host = f.copy_to_host()
        out["checked"] = all(np.array_equal(x.copy_to_host(), a + a[::-1])
                             for x in [f] + [o for _, o, _ in others.values()])
    print(json.dumps(out))


CONFIGS = (("real", {}), ("real, pinned", {}), ("real, main pinned", {}))


def main():
    root = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    import platform
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"{len(os.sched_getaffinity(0))} usable; {ROUNDS} rounds, short = "
          f"{SHORT_BATCHES} batches of {SHORT} calls, long = {LONG} calls + sync; "
          f"us a call, median of the rounds")
    configs = list(CONFIGS)
    fake = os.path.join(root, "bin", "libkjit-fakecuda.so")
    if not os.path.exists(fake):
        fake = os.path.join(root, "build", "libkjit-fakecuda.so")
    if os.path.exists(fake):
        configs.append(("fake", {"KJIT_CUDA_DRIVER": fake}))
    with tempfile.TemporaryDirectory(prefix="pyhot-") as work:
        build(work)
        results = {}
        for config, env in configs:
            environment = dict(os.environ, **env)
            environment["PYTHONPATH"] = work + os.pathsep + environment.get("PYTHONPATH", "")
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", config],
                                  capture_output=True, text=True, env=environment)
            try:
                results[config] = json.loads(done.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                results[config] = {"error": (done.stderr or done.stdout)[-600:]}
    ok = True
    for config, got in results.items():
        if "error" in got:
            print(f"{config}: ERROR {got['error']}")
            ok = False
        if "bare_why" in got:
            print(f"{config}: no bare rows: {got['bare_why']}")
        if got.get("checked") is False:
            print(f"{config}: FAIL: f is not d + e after the rounds")
            ok = False
    shown = [c for c, _ in configs if "error" not in results[c]]
    print("| layer | " + " | ".join(f"{c}: short | {c}: long | {c}: (calls)" for c in shown) + " |")
    print("| --- |" + " ---: |" * (3 * len(shown)))
    for name, what in ROWS:
        cells = []
        for c in shown:
            row = results[c].get(name)
            cells += ([f"{row['short']:.3f}", f"{row['long']:.3f}", f"{row['calls']:.3f}"]
                      if row else ["-", "-", "-"])
        print(f"| {what} | " + " | ".join(cells) + " |")
    print()
    for c in shown:
        r = results[c]
        s = lambda name, form="short": r[name][form] if name in r else float("nan")  # noqa: E731
        print(f"{c}: Python over C (add - C released) short {s('add') - s('c_released'):+.3f} us, "
              f"long {s('add', 'long') - s('c_released', 'long'):+.3f}; "
              f"the interpreter's call (noop - empty) {s('noop') - s('empty'):.3f}; "
              f"_fast.c's own (add - noop - C released) "
              f"{s('add') - s('noop') - s('c_released'):+.3f}; GIL pair {s('gil_pair'):.3f}; "
              f"libkjit over the bare launch (C held - bare) {s('c_held') - s('bare'):+.3f}; "
              f"long - short for add {s('add', 'long') - s('add'):+.3f} "
              f"(for the bare launch {s('bare', 'long') - s('bare'):+.3f}); "
              f"Python's options over the C API's defaults: Python short "
              f"{s('add') - s('add_defaults'):+.3f}, long "
              f"{s('add', 'long') - s('add_defaults', 'long'):+.3f}, C short "
              f"{s('c_held') - s('c_defaults'):+.3f}, long "
              f"{s('c_held', 'long') - s('c_defaults', 'long'):+.3f}; of it the polls "
              f"(cancellable=False), C long {s('c_held', 'long') - s('c_nocancel', 'long'):+.3f}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        sys.exit(main())
