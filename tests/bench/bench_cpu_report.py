"""`make bench-cpu`: runs kjit's CPU benchmarks and their references side by
side and prints one markdown table of medians and ratios (kjit time /
reference time: below 1 means kjit is faster).

    python3 tests/bench/bench_cpu_report.py BENCH_CPU BENCH_SIMD EXAMPLES_DIR [REPEAT]

- BENCH_CPU (tests/bench/bench_cpu.c): the elementwise and reduction rows on
  kjit's cpu and parallel targets; tests/bench/bench_cpu.py: NumPy and Numba.
- BENCH_SIMD (tests/bench/bench_simd.c): the kernel rows of issue 10 on kjit's
  cpu and parallel targets beside scalar C and hand-written SIMD C taking
  turns in one process; tests/bench/bench_simd.py: Numba on the same inputs.
- Both kjit programs run once more on cpu with KJIT_CPU_SIMD=0 (and no disk
  cache, so that code compiled the other way is not reused): the column
  without kjit's own SIMD lowering of kernel threads and vectorized loops.

Every program checks its results before it prints a time (see each file).
KJIT_BENCH_CLOCK=thread times every row by the calling thread's CPU time
instead of the wall clock: steadier one-thread columns on a busy machine, but
the parallel columns then mean nothing.
"""
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

bench_cpu, bench_simd, examples = sys.argv[1], sys.argv[2], sys.argv[3]
repeat = sys.argv[4] if len(sys.argv) > 4 else "7"
here = os.path.dirname(os.path.abspath(__file__))


def run_json(command, **env):
    environment = dict(os.environ, **env)
    result = subprocess.run(command, capture_output=True, text=True, env=environment)
    if result.returncode != 0:
        sys.exit(f"bench-cpu: {' '.join(command)} failed:\n{result.stderr}")
    return json.loads(result.stdout)


def machine():
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    arch = ""
    try:
        out = subprocess.run(["gcc", "-march=native", "-Q", "--help=target"], capture_output=True,
                             text=True).stdout
        arch = next((line.split()[-1] for line in out.splitlines()
                     if line.strip().startswith("-march=")), "")
    except OSError:
        pass
    return f"{model}{f' ({arch})' if arch else ''}, {os.cpu_count()} logical cpus"


def simd_switch_known():
    """Whether this libkjit reads KJIT_CPU_SIMD at all."""
    library = os.path.join(os.path.dirname(os.path.abspath(bench_simd)), "libkjit.so")
    try:
        with open(library, "rb") as f:
            return b"KJIT_CPU_SIMD" in f.read()
    except OSError:
        return False


no_simd = {"KJIT_CPU_SIMD": "0", "KJIT_CACHE": "off"}
load_before = os.getloadavg()
with tempfile.TemporaryDirectory() as refs_dir:
    simd = run_json([bench_simd, f"--repeat={repeat}", f"--save-refs={refs_dir}", examples, here])
    simd_off = run_json([bench_simd, f"--repeat={repeat}", "--targets=cpu", "--no-refs",
                         examples, here], **no_simd)
    numba_simd = run_json([sys.executable, os.path.join(here, "bench_simd.py"), refs_dir, repeat])
elementwise = run_json([bench_cpu, examples, repeat])
elementwise_off = run_json([bench_cpu, examples, repeat], KJIT_BENCH_TARGETS="cpu", **no_simd)
refs = run_json([sys.executable, os.path.join(here, "bench_cpu.py"), repeat])
load_after = os.getloadavg()

rows = []  # (name, {column: ms})
for name in simd["cpu"]:
    ref = numba_simd.get(name, {})
    rows.append((name, {
        "cpu": simd["cpu"][name], "parallel": simd["parallel"][name],
        "cpu_no_simd": simd_off["cpu"][name],
        "hand_simd": simd["hand_simd"][name], "scalar_c": simd["scalar_c"][name],
        "numba": ref.get("numba"), "numba_parallel": ref.get("numba_parallel")}))
for name in elementwise["cpu"]:
    ref = refs.get(name, {})
    rows.append((name, {
        "cpu": elementwise["cpu"][name], "parallel": elementwise["parallel"][name],
        "cpu_no_simd": elementwise_off["cpu"][name],
        "numpy": ref.get("numpy"), "numba": ref.get("numba"),
        "numba_parallel": ref.get("numba_parallel")}))


def cell(ms):
    """Two decimals, four below 0.1 ms (the in-cache elementwise rows)."""
    return "-" if ms is None else f"{ms:.4f}" if ms < 0.1 else f"{ms:.2f}"


def ratio(a, b):
    return "-" if a is None or b is None else f"{a / b:.2f}"


switch = ("KJIT_CPU_SIMD=0" if simd_switch_known()
          else "KJIT_CPU_SIMD=0 (not read by this build: the same code as kjit cpu)")
print(f"{datetime.date.today().isoformat()}, {machine()}; "
      f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
print(f"hand-SIMD C: {simd['isa']} (gcc -O3 -march=native -ffp-contract=off)")
if os.environ.get("KJIT_BENCH_CLOCK") == "thread":
    print("clock: the calling thread's CPU time (KJIT_BENCH_CLOCK=thread): "
          "the parallel columns mean nothing")
print(f"median of {repeat} runs, ms; ratio = kjit / reference (below 1: kjit faster); "
      "goals: cpu / hand-SIMD at most 1.25, parallel / Numba parallel below 1\n")
print(f"| workload | kjit cpu | kjit parallel | kjit cpu, {switch} | hand-SIMD C | scalar C "
      "| NumPy | Numba | Numba parallel | cpu / hand-SIMD | cpu / NumPy | cpu / Numba "
      "| parallel / Numba parallel |")
print("| --- |" + " ---: |" * 12)
for name, c in rows:
    print(f"| {name} | {cell(c['cpu'])} | {cell(c['parallel'])} | {cell(c['cpu_no_simd'])} "
          f"| {cell(c.get('hand_simd'))} | {cell(c.get('scalar_c'))} | {cell(c.get('numpy'))} "
          f"| {cell(c.get('numba'))} | {cell(c.get('numba_parallel'))} "
          f"| {ratio(c['cpu'], c.get('hand_simd'))} | {ratio(c['cpu'], c.get('numpy'))} "
          f"| {ratio(c['cpu'], c.get('numba'))} | {ratio(c['parallel'], c.get('numba_parallel'))} |")
