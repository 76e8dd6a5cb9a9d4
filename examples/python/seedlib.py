"""What the Python seed examples share: the kjit package (from this repository
when it is not installed), a --target option, best-of-N timing, and CuPy when
it is installed and a GPU is usable."""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
try:
    import kjit  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(REPO, "python"))
    import kjit  # noqa: F401


def kern(name):
    return os.path.join(REPO, "examples", name)


def options(description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--target", default="auto", choices=kjit.TARGETS,
                        help="kjit's target (auto: cuda when a GPU is usable)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs; the best is shown")
    return parser


def best_ms(fn, repeat, sync=None):
    """The best of `repeat` runs of fn(), in milliseconds, after one warm-up run
    (which compiles)."""
    fn()
    if sync:
        sync()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def cupy_or_none():
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
        return cupy
    except Exception:
        return None


def report(title, rows):
    print(f"\n{title}")
    width = max(len(name) for name, _, _ in rows)
    for name, ms, note in rows:
        shown = f"{ms:10.3f} ms" if ms is not None else "         -   "
        print(f"  {name:<{width}}  {shown}  {note}")
