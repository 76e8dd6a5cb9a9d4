"""Runs kjit's CPU benchmark and the NumPy/Numba references side by side and
prints one markdown table of medians and ratios (kjit time / reference time:
below 1 means kjit is faster).

    python3 tests/bench/bench_cpu_report.py build/bench_cpu examples [REPEAT]
"""
import json
import os
import subprocess
import sys

bench, examples = sys.argv[1], sys.argv[2]
repeat = sys.argv[3] if len(sys.argv) > 3 else "7"
here = os.path.dirname(os.path.abspath(__file__))

kjit = json.loads(subprocess.run([bench, examples, repeat], check=True,
                                 capture_output=True, text=True).stdout)
refs = json.loads(subprocess.run([sys.executable, os.path.join(here, "bench_cpu.py"), repeat],
                                 check=True, capture_output=True, text=True).stdout)


def cell(ms):
    return "-" if ms is None else f"{ms:.2f}"


def ratio(a, b):
    return "-" if a is None or b is None else f"{a / b:.2f}"


print(f"median of {repeat} runs, ms; ratio = kjit / reference (below 1: kjit faster)\n")
print("| workload | kjit cpu | kjit parallel | NumPy | Numba | Numba parallel "
      "| cpu/NumPy | cpu/Numba | parallel/Numba parallel |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for name in kjit["cpu"]:
    cpu, par = kjit["cpu"][name], kjit["parallel"][name]
    ref = refs.get(name, {})
    np_ms, nb_ms, nbp_ms = ref.get("numpy"), ref.get("numba"), ref.get("numba_parallel")
    print(f"| {name} | {cell(cpu)} | {cell(par)} | {cell(np_ms)} | {cell(nb_ms)} | {cell(nbp_ms)} "
          f"| {ratio(cpu, np_ms)} | {ratio(cpu, nb_ms)} | {ratio(par, nbp_ms)} |")
