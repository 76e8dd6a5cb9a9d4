"""What scales with the host in the empty launch from Python (issue 26 item 3).

On the 16-core GPU host the launch of an empty kernel (cpu target, grid 1,
block 1, one array) from Python was 3.16x the C API's kjit_launch (goal 2x),
on this project's 2-core machine 1.95x.  This diag runs, each in a process of
its own so the environment is set before kjit loads, the Python launch and the
C API's (build/latency cpu --calls, or the bundle's bin/latency) under:

  default            as bench_python.py runs them
  threads=1          KJIT_NUM_THREADS=1 (runtime/pool.c starts no workers)
  pinned             both processes on one CPU (os.sched_setaffinity)
  pinned, threads=1  both

and, where KJIT_LAUNCH_OPTIONS names a build of tests/gpu/launch_options.c,
the C launch under default, cancellable, cancel_signal and Python's options
in one process (the first two figures came from two processes, and moved),
and beside them the interpreter's own floor on this machine: a loop calling a
C builtin of one argument (len(a)) and a bound method of no arguments
(a.__len__()), which is what any call from Python pays before kjit is
reached.  It prints "| config | what | us | note |" rows, then one ratio row
a config: if the ratio falls to 2x with threads=1 or pinned, the pool's
workers (or their wakeups) are what the 16 cores add; if the Python floor is
itself high (above ~0.05 us) the interpreter is (another Python than 3.11's,
or a frequency/turbo state); if neither moves it, the Python side's own work
(argument packing in kjit/_fast.c) is what is left.

  python3 tests/gpu/launch_diag.py       (tests/gpu/python.sh runs it)
"""
import json
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
CONFIGS = (("default", {}, False), ("threads=1", {"KJIT_NUM_THREADS": "1"}, False),
           ("pinned", {}, True), ("pinned, threads=1", {"KJIT_NUM_THREADS": "1"}, True))


def child(pinned):
    """One configuration: prints a JSON object of per-call microseconds."""
    if pinned:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    sys.path.insert(0, os.path.join(REPO, "tests", "bench"))
    import numpy as np
    import bench_python as bp
    kjit = bp.kjit
    a = np.zeros(1000, np.float32)
    nosync = lambda: None  # noqa: E731
    out = {"floor len(a)": bp.per_call_us(lambda: len(a), nosync),
           "floor a.__len__()": bp.per_call_us(a.__len__, nosync)}
    launch = kjit.compile(bp.EMPTY, target="cpu").empty[1, 1]
    d = kjit.to_device(a, target="cpu")
    out["launch, NumPy array"] = bp.per_call_us(lambda: launch(a), nosync)
    out["launch, kjit array"] = bp.per_call_us(lambda: launch(d), nosync)
    # the C API's in a process of its own, under the same affinity (a child
    # inherits it) and environment
    c_launch, c_python = bp.c_api_launch_us()
    out["C kjit_launch"] = c_launch
    out["C kjit_launch, Python's options"] = c_python
    # the four option sets in one process, interleaved (tests/gpu/launch_options.c,
    # built by python.sh or by hand: KJIT_LAUNCH_OPTIONS names it): what the
    # cancellable context costs a launch, free of the process-to-process drift
    prog = os.environ.get("KJIT_LAUNCH_OPTIONS")
    if prog and os.access(prog, os.X_OK):
        done = subprocess.run([prog], capture_output=True, text=True)
        for line in done.stdout.splitlines():
            cells = [c.strip() for c in line.strip("|").split("|")]
            if len(cells) == 4 and cells[1].replace(".", "").isdigit():
                out[f"C launch, {cells[0]} options, one process"] = float(cells[1]) / 1e3
    out["hot path"] = kjit.hot_path
    print(json.dumps(out))


def main():
    print(f"Python {platform.python_version()} ({sys.executable}), {os.cpu_count()} CPUs, "
          f"{len(os.sched_getaffinity(0))} usable")
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
        print(f"CPU: {model}")
    except OSError:
        pass
    governor = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
    if os.path.exists(governor):
        print(f"governor: {open(governor).read().strip()}")
    print("| config | what | time | note |")
    print("| --- | --- | --- | --- |")
    ratios = []
    failed = 0
    for name, env, pinned in CONFIGS:
        done = subprocess.run([sys.executable, __file__, "--child", "1" if pinned else "0"],
                              env={**os.environ, **env}, capture_output=True, text=True)
        try:
            found = json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            print(f"| {name} | (failed) | - | {done.stderr.strip()[-300:]} |")
            failed += 1
            continue
        for what, us in found.items():
            if what == "hot path":
                continue
            print(f"| {name} | {what} | {'-' if us is None else f'{us:.3f} us'} | "
                  f"{found['hot path'] if what.startswith('launch') else ''} |")
        c, cp = found["C kjit_launch"], found["C kjit_launch, Python's options"]
        py = found["launch, NumPy array"]
        one, one_py = (found.get("C launch, default options, one process"),
                       found.get("C launch, Python's (both) options, one process"))
        if one and one_py:
            ratios.append(f"| {name} | ratio, one process | {py / one:.2f}x | the Python launch "
                          f"against launch_options.c's default C launch; {py / one_py:.2f}x "
                          f"against its Python's options; Python's options cost the C launch "
                          f"{(one_py - one) * 1e3:+.1f} ns |")
        if c and cp:
            ratios.append(f"| {name} | ratio | {py / c:.2f}x | the Python launch (NumPy array) "
                          f"against the C API's; {py / cp:.2f}x against Python's options; "
                          f"Python's part {py - cp:.3f} us = "
                          f"{(py - cp) / found['floor len(a)']:.1f} interpreter floors (goal 2x) |")
        else:
            ratios.append(f"| {name} | ratio | - | no build/latency or bin/latency |")
    print("\n".join(ratios))
    print(f"launch-diag: {len(CONFIGS) - failed} of {len(CONFIGS)} configs ran")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2] == "1")
    else:
        sys.exit(main())
