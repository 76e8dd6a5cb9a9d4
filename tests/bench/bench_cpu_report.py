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

KJIT_BENCH_ROUNDS=N (1) runs the whole set of programs N times in turn and
prints each time as the median over the rounds and each ratio as the median
of the rounds' own ratios, with their range (lowest-highest): on a shared
machine a burst of load that slows one side of a ratio in one round then
moves the range, not the figure.  REPEAT is 7 for one round, ROUND_REPEAT a
round for several (docs/performance.md says why).  KJIT_BENCH_ONLY=TEXT
("A|B": either) keeps only the rows whose name holds TEXT, in every program.
KJIT_BENCH_CLOCK=thread times every row by the calling thread's CPU time
instead of the wall clock: steadier one-thread columns on a busy machine, but
the parallel columns then mean nothing.
"""
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
ROUND_REPEAT = "2"  # a round's runs when there are several (docs/performance.md)


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


def simd_switch_known(bench_simd):
    """Whether this libkjit reads KJIT_CPU_SIMD at all."""
    library = os.path.join(os.path.dirname(os.path.abspath(bench_simd)), "libkjit.so")
    try:
        with open(library, "rb") as f:
            return b"KJIT_CPU_SIMD" in f.read()
    except OSError:
        return False


def one_round(bench_cpu, bench_simd, examples, repeat):
    """Every program once: the hand-SIMD C's ISA and {row name: {column: ms or None}}."""
    no_simd = {"KJIT_CPU_SIMD": "0", "KJIT_CACHE": "off"}
    with tempfile.TemporaryDirectory() as refs_dir:
        simd = run_json([bench_simd, f"--repeat={repeat}", f"--save-refs={refs_dir}", examples, here])
        simd_off = run_json([bench_simd, f"--repeat={repeat}", "--targets=cpu", "--no-refs",
                             examples, here], **no_simd)
        numba_simd = run_json([sys.executable, os.path.join(here, "bench_simd.py"), refs_dir, repeat])
    elementwise = run_json([bench_cpu, examples, repeat])
    elementwise_off = run_json([bench_cpu, examples, repeat], KJIT_BENCH_TARGETS="cpu", **no_simd)
    refs = run_json([sys.executable, os.path.join(here, "bench_cpu.py"), repeat])

    rows = {}
    for name in simd["cpu"]:
        ref = numba_simd.get(name, {})
        rows[name] = {
            "cpu": simd["cpu"][name], "parallel": simd["parallel"][name],
            "cpu_no_simd": simd_off["cpu"][name],
            "hand_simd": simd["hand_simd"][name], "scalar_c": simd["scalar_c"][name],
            "numba": ref.get("numba"), "numba_parallel": ref.get("numba_parallel")}
    for name in elementwise["cpu"]:
        ref = refs.get(name, {})
        rows[name] = {
            "cpu": elementwise["cpu"][name], "parallel": elementwise["parallel"][name],
            "cpu_no_simd": elementwise_off["cpu"][name],
            "numpy": ref.get("numpy"), "numba": ref.get("numba"),
            "numba_parallel": ref.get("numba_parallel")}
    return simd["isa"], rows


TIMES = ("cpu", "parallel", "cpu_no_simd", "hand_simd", "scalar_c", "numpy", "numba",
         "numba_parallel")
RATIOS = (("cpu", "hand_simd"), ("cpu", "numpy"), ("cpu", "numba"), ("parallel", "numba_parallel"))


def combine(rounds):
    """The rounds' rows ({name: {column: ms or None}} each, the same names) as
    [(name, {column: ms or None}, {(kjit, reference): [ratio of each round]})]:
    each time the median over the rounds, each ratio taken within its round,
    so that kjit and its reference are always of the same round."""
    table = []
    for name in rounds[0]:
        cells = [r[name] for r in rounds]
        times = {}
        for column in TIMES:
            values = [c[column] for c in cells if c.get(column) is not None]
            times[column] = statistics.median(values) if values else None
        ratios = {(a, b): [c[a] / c[b] for c in cells
                           if c.get(a) is not None and c.get(b) is not None]
                  for a, b in RATIOS}
        table.append((name, times, ratios))
    return table


def cell(ms):
    """Two decimals, four below 0.1 ms (the in-cache elementwise rows)."""
    return "-" if ms is None else f"{ms:.4f}" if ms < 0.1 else f"{ms:.2f}"


def ratio_cell(ratios):
    """One round's ratio; of several, their median and (lowest-highest)."""
    if not ratios:
        return "-"
    if len(ratios) == 1:
        return f"{ratios[0]:.2f}"
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"


def main():
    bench_cpu, bench_simd, examples = sys.argv[1], sys.argv[2], sys.argv[3]
    rounds_text = os.environ.get("KJIT_BENCH_ROUNDS", "1")
    if not rounds_text.isdigit() or int(rounds_text) < 1:
        sys.exit(f"bench-cpu: KJIT_BENCH_ROUNDS={rounds_text!r}: want a count of rounds, 1 or more")
    count = int(rounds_text)
    repeat = sys.argv[4] if len(sys.argv) > 4 else "7" if count == 1 else ROUND_REPEAT
    load_before = os.getloadavg()
    rounds = []
    for _ in range(count):
        isa, rows = one_round(bench_cpu, bench_simd, examples, repeat)
        rounds.append(rows)
    load_after = os.getloadavg()

    switch = ("KJIT_CPU_SIMD=0" if simd_switch_known(bench_simd)
              else "KJIT_CPU_SIMD=0 (not read by this build: the same code as kjit cpu)")
    print(f"{datetime.date.today().isoformat()}, {machine()}; "
          f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    print(f"hand-SIMD C: {isa} (gcc -O3 -march=native -ffp-contract=off)")
    if os.environ.get("KJIT_BENCH_CLOCK") == "thread":
        print("clock: the calling thread's CPU time (KJIT_BENCH_CLOCK=thread): "
              "the parallel columns mean nothing")
    how = (f"median of {repeat} runs, ms" if count == 1 else
           f"{count} rounds, each running every program once, in turn: each time the median of "
           f"the rounds' medians of {repeat} runs, ms; each ratio the median of the rounds' "
           "ratios (kjit and reference of the same round), (lowest-highest) over the rounds")
    print(f"{how}; ratio = kjit / reference (below 1: kjit faster); "
          "goals: cpu / hand-SIMD at most 1.25, parallel / Numba parallel below 1\n")
    print(f"| workload | kjit cpu | kjit parallel | kjit cpu, {switch} | hand-SIMD C | scalar C "
          "| NumPy | Numba | Numba parallel | cpu / hand-SIMD | cpu / NumPy | cpu / Numba "
          "| parallel / Numba parallel |")
    print("| --- |" + " ---: |" * 12)
    for name, times, ratios in combine(rounds):
        print(f"| {name} | " + " | ".join(cell(times[c]) for c in TIMES) + " | "
              + " | ".join(ratio_cell(ratios[r]) for r in RATIOS) + " |")


if __name__ == "__main__":
    main()
