# make bench-cpu: kjit on cpu and parallel beside NumPy and Numba, one run, one table.
# Not a timed test: it reports ratios; see docs/performance.md.

$(BUILD)/bench_cpu: tests/bench/bench_cpu.c $(BUILD)/libkjit.so runtime/kjit.h
	$(CC) $(ALL_CFLAGS) -Iruntime -o $@ $< -L$(BUILD) -lkjit -Wl,-rpath,'$$ORIGIN'

bench-cpu: all $(BUILD)/bench_cpu
	@python3 -c 'import numpy' 2>/dev/null || python3 -m pip install -q numpy numba
	python3 tests/bench/bench_cpu_report.py $(BUILD)/bench_cpu examples

# make bench-checks: what checked mode (KJIT_CHECK=1) costs on the same workloads.
bench-checks: all $(BUILD)/bench_cpu
	KJIT_CACHE_DIR=$(abspath $(BUILD))/bench-cache tests/bench/check_cost.sh $(BUILD)/bench_cpu
