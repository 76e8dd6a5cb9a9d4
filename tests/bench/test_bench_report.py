"""make test-bench-refs: bench_cpu_report.py's rounds (KJIT_BENCH_ROUNDS) on
made-up figures, timing nothing: each time is the median over the rounds,
each ratio the median of the rounds' own ratios (not the ratio of the
medians), a reference missing in every round stays "-", and one round prints
as before the rounds existed.

    python3 tests/bench/test_bench_report.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_cpu_report as report  # noqa: E402

failures = 0


def expect(what, got, want):
    global failures
    if got != want:
        failures += 1
        print(f"FAIL: {what}: {got!r}, want {want!r}")


# Row "a": kjit cpu 1, 4, 2 ms against Numba 2, 2, 8: the medians are 2 and 2
# (ratio 1.00), the rounds' ratios 0.5, 2.0, 0.25 (median 0.50).  Row "b" has
# no reference; row "c" lacks Numba in one round.
rounds = [
    {"a": {"cpu": 1.0, "parallel": 0.3, "numba": 2.0, "numba_parallel": 0.6, "numpy": None},
     "b": {"cpu": 5.0, "parallel": 1.0},
     "c": {"cpu": 1.0, "parallel": 1.0, "numba": 4.0}},
    {"a": {"cpu": 4.0, "parallel": 0.4, "numba": 2.0, "numba_parallel": 0.2, "numpy": None},
     "b": {"cpu": 7.0, "parallel": 1.0},
     "c": {"cpu": 1.0, "parallel": 1.0, "numba": None}},
    {"a": {"cpu": 2.0, "parallel": 0.5, "numba": 8.0, "numba_parallel": 0.5, "numpy": None},
     "b": {"cpu": 6.0, "parallel": 1.0},
     "c": {"cpu": 3.0, "parallel": 1.0, "numba": 2.0}},
]
table = {name: (times, ratios) for name, times, ratios in report.combine(rounds)}
expect("row order", list(table), ["a", "b", "c"])
times, ratios = table["a"]
expect("a: cpu, median of rounds", times["cpu"], 2.0)
expect("a: Numba, median of rounds", times["numba"], 2.0)
expect("a: NumPy missing", report.cell(times["numpy"]), "-")
expect("a: cpu / Numba", report.ratio_cell(ratios[("cpu", "numba")]), "0.50 (0.25-2.00)")
expect("a: parallel / Numba parallel", report.ratio_cell(ratios[("parallel", "numba_parallel")]),
       "1.00 (0.50-2.00)")
expect("a: cpu / NumPy", report.ratio_cell(ratios[("cpu", "numpy")]), "-")
times, ratios = table["b"]
expect("b: cpu", report.cell(times["cpu"]), "6.00")
expect("b: hand-SIMD missing", report.cell(times["hand_simd"]), "-")
expect("b: no ratio", [report.ratio_cell(ratios[r]) for r in report.RATIOS], ["-"] * 4)
times, ratios = table["c"]
expect("c: Numba of two rounds", times["numba"], 3.0)
expect("c: cpu / Numba of two rounds", report.ratio_cell(ratios[("cpu", "numba")]),
       "0.88 (0.25-1.50)")

times, ratios = report.combine(rounds[:1])[0][1:]
expect("one round: cpu / Numba as before", report.ratio_cell(ratios[("cpu", "numba")]), "0.50")
expect("one round: a small time", report.cell(0.01234), "0.0123")

if failures:
    sys.exit(f"test_bench_report: {failures} failed")
print("test_bench_report: the rounds' medians and ratios as documented")
