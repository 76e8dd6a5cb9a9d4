"""tests/gpu/param_forms.py: kjit's add(d, e, out=f) from Python on 1,000
f32 device arrays with libkjit passing the kernel's parameters in each of its
two forms, in one process (issue 26 item 1):

  - KJIT_CUDA_PARAMS=pointers: cuLaunchKernel's kernelParams, a pointer to
    each parameter (the driver copies each: kjit's form before);
  - KJIT_CUDA_PARAMS=buffer: one packed buffer in `extra`
    (CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END, one copy: the default).

libkjit reads the switch when a context is made, so the two are two
kjit.Contexts side by side; their batches take turns (a machine that slows
down mid-run slows both).  A third row takes the process's shared context
(kjit.load(..., target="cuda"), what bench_python.py's rows use, in the
environment's form) on the null stream: the first GPU run read 4.9-5.1 us
here against bench_python.py's 3.57, and this row says whether the two extra
contexts are why.  Rows "| form | us a call (median) | fastest batch |",
then the ratio of the medians; each form's result is checked against x + y
on a GPU (not on the fake driver, which runs no kernel).  Exit 0 when both
forms gave x + y.

    python3 tests/gpu/param_forms.py        (tests/gpu/python.sh runs it)
"""
import os
import statistics
import sys
import time

import numpy as np

import kjit

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N = 1000
RUNS = 21
CALLS = 2000
FORMS = ("pointers", "buffer")


def context_of(form):
    """A cuda Context whose calls pass their parameters as `form`."""
    was = os.environ.get("KJIT_CUDA_PARAMS")
    os.environ["KJIT_CUDA_PARAMS"] = form
    try:
        return kjit.Context("cuda")
    finally:
        if was is None:
            del os.environ["KJIT_CUDA_PARAMS"]
        else:
            os.environ["KJIT_CUDA_PARAMS"] = was


def main():
    if not kjit.cuda_available():
        print("param_forms: no cuda target here")
        return 1
    fake = bool(os.environ.get("KJIT_CUDA_DRIVER"))
    x = np.arange(N, dtype=np.float32)
    y = 2 * x
    setups = {}
    for form in FORMS:
        ctx = context_of(form)
        add = ctx.load(os.path.join(REPO, "examples", "add.kern")).add
        d, e = kjit.to_device(x, target=ctx), kjit.to_device(y, target=ctx)
        f = kjit.device_array(N, np.float32, target=ctx)
        stream = kjit.Stream(ctx)
        setups[form] = (ctx, add, d, e, f, stream)
    calls = {}
    for form in FORMS:
        ctx, add, d, e, f, stream = setups[form]
        calls[(form, "null stream")] = ((lambda add=add, d=d, e=e, f=f: add(d, e, out=f)),
                                        ctx.synchronize)
        calls[(form, "a kjit.Stream")] = (
            (lambda add=add, d=d, e=e, f=f, s=stream: add(d, e, out=f, stream=s)),
            stream.synchronize)
    shared = kjit.load(os.path.join(REPO, "examples", "add.kern"), target="cuda").add
    sd, se = kjit.to_device(x, target="cuda"), kjit.to_device(y, target="cuda")
    sf = kjit.device_array(N, np.float32, target="cuda")
    calls[("the shared context's", "null stream")] = (
        (lambda: shared(sd, se, out=sf)), kjit.context("cuda").synchronize)
    # half a second of calls first (the first cuda row of a process reads high)
    until = time.perf_counter() + 0.5
    while time.perf_counter() < until:
        for call, sync in calls.values():
            for _ in range(50):
                call()
            sync()
    times = {key: [] for key in calls}
    for _ in range(RUNS):
        for key, (call, sync) in calls.items():
            t0 = time.perf_counter()
            for _ in range(CALLS):
                call()
            sync()
            times[key].append((time.perf_counter() - t0) / CALLS * 1e6)
    print(f"python: {kjit.hot_path} hot path; driver: "
          f"{os.environ['KJIT_CUDA_DRIVER'] if fake else 'the real one'}")
    print("| form | stream | us a call (median) | fastest batch |")
    print("| --- | --- | --- | --- |")
    for (form, where), batch in times.items():
        name = form if form not in FORMS else f"KJIT_CUDA_PARAMS={form}"
        print(f"| add(d, e, out=f), {name} | {where} | "
              f"{statistics.median(batch):.3f} | {min(batch):.3f} |")
    for where in ("null stream", "a kjit.Stream"):
        before = statistics.median(times[("pointers", where)])
        after = statistics.median(times[("buffer", where)])
        print(f"buffer against pointers, {where}: {after:.3f} / {before:.3f} us = "
              f"{after / before:.3f}x ({after - before:+.3f} us)")
    if fake:
        print("results: not checked (the fake driver runs no kernel)")
        return 0
    wrong = 0
    for form in FORMS:
        ctx, add, d, e, f, stream = setups[form]
        for call, sync in (calls[(form, "null stream")], calls[(form, "a kjit.Stream")]):
            f.copy_from_host(np.zeros(N, np.float32))
            ctx.synchronize()
            call()
            sync()
            got = f.copy_to_host()
            if not np.array_equal(got, x + y):
                wrong += 1
                print(f"FAIL KJIT_CUDA_PARAMS={form}: add gave {got[:4]}..., not x + y")
    print("results: " + ("x + y in both forms, identical" if not wrong else f"{wrong} WRONG"))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
