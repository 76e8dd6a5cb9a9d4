# make bench-cpu: kjit on cpu and parallel beside hand-written C (scalar and
# SIMD), NumPy and Numba, one run (KJIT_BENCH_ROUNDS=N: N runs in turn), one
# table.  Not a timed test: it reports ratios; see docs/performance.md.

$(BUILD)/bench_cpu: tests/bench/bench_cpu.c tests/bench/bench_common.h $(BUILD)/libkjit.so runtime/kjit.h
	$(CC) $(ALL_CFLAGS) -Iruntime -o $@ $< -L$(BUILD) -lkjit -lm -Wl,-rpath,'$$ORIGIN'

# tests/gpu/cpu_host_diag.sh's measurements (stencil3d at chosen page offsets,
# a call's own cost, the parallel row by workers); built and run once,
# untimed, by test-bench-refs so that it cannot rot.
$(BUILD)/cpu_diag: tests/bench/cpu_diag.c tests/bench/bench_common.h $(BUILD)/libkjit.so runtime/kjit.h
	$(CC) $(ALL_CFLAGS) -Iruntime -o $@ $< -L$(BUILD) -lkjit -lm -Wl,-rpath,'$$ORIGIN'

# The C references are GCC's (vector extensions, __builtin_shuffle), built for
# this machine's vector units; -ffp-contract=off because kjit never fuses a
# multiply and an add, so both compute the same bits.
BENCH_REF_CC     ?= gcc
BENCH_REF_CFLAGS  = -std=c11 -D_GNU_SOURCE -O3 -march=native -ffp-contract=off -Wall -Wextra -g

$(BUILD)/bench/simd_ref.o: tests/bench/simd_ref.c tests/bench/simd_ref.h
	@mkdir -p $(dir $@)
	$(BENCH_REF_CC) $(BENCH_REF_CFLAGS) -c $< -o $@

$(BUILD)/bench_simd: tests/bench/bench_simd.c tests/bench/bench_common.h tests/bench/simd_ref.h \
                     $(BUILD)/bench/simd_ref.o $(BUILD)/libkjit.so runtime/kjit.h
	$(CC) $(ALL_CFLAGS) -Iruntime -o $@ $< $(BUILD)/bench/simd_ref.o \
	  -L$(BUILD) -lkjit -lm -Wl,-rpath,'$$ORIGIN'

bench-cpu: all $(BUILD)/bench_cpu $(BUILD)/bench_simd
	@python3 -c 'import numpy' 2>/dev/null || python3 -m pip install -q numpy
	@python3 -c 'import numba' 2>/dev/null || python3 -m pip install -q numba || \
	  echo "bench-cpu: Numba could not be installed; its columns show -"
	python3 tests/bench/bench_cpu_report.py $(BUILD)/bench_cpu $(BUILD)/bench_simd examples

# make bench-pairs: the rows whose ratio moves between bench-cpu's tables,
# timed in pairs in one process (tests/bench/bench_pairs.py: kjit through its
# Python package, installed with its compiled hot path into a virtual
# environment that sees the system's NumPy and Numba, taking turns with Numba
# or NumPy on the same arrays), after stream_align (does the aligned first
# piece of a vectorized call pay on this CPU).  KJIT_PAIRS=N pairs a row.
$(BUILD)/stream_align: tests/bench/stream_align.c
	$(CC) -std=c11 -D_GNU_SOURCE -O3 -march=native -o $@ $<

bench-pairs: all $(BUILD)/stream_align
	@python3 -c 'import numpy' 2>/dev/null || python3 -m pip install -q numpy
	@python3 -c 'import numba' 2>/dev/null || python3 -m pip install -q numba
	$(BUILD)/stream_align 2
	rm -rf $(BUILD)/pairs-venv
	python3 -m venv --system-site-packages --without-pip $(BUILD)/pairs-venv
	$(BUILD)/pairs-venv/bin/python -m pip install -q --no-cache-dir ./python
	cd $(BUILD) && pairs-venv/bin/python $(abspath tests/bench/bench_pairs.py) $(abspath .)

# make test-bench-refs (part of make check): the C references of bench-cpu
# build and agree with kjit on cpu and parallel at small sizes.  Times nothing;
# cpu_diag checks its results (one sample each; its par section, which runs
# only when asked, too); test_bench_report.py checks the report's medians and
# ratios over rounds (KJIT_BENCH_ROUNDS) on made-up figures; stream_align
# checks its sums (its timings are bench-pairs').
test-bench-refs: $(BUILD)/bench_simd $(BUILD)/cpu_diag $(BUILD)/stream_align
	$(BUILD)/bench_simd --smoke examples tests/bench
	$(BUILD)/stream_align 1 > /dev/null
	python3 tests/bench/test_bench_report.py
	$(BUILD)/cpu_diag tests/bench 1 > /dev/null
	KJIT_DIAG_ONLY=par KJIT_DIAG_THREADS=2 $(BUILD)/cpu_diag tests/bench 1 > /dev/null

# make bench-checks: what checked mode (KJIT_CHECK=1) and the race checker
# (KJIT_CHECK=race, one round) cost on the same workloads.  CHECK_BEFORE=DIR
# (a copy of another version's build/bench_cpu, bench_simd and libkjit.so)
# adds that version's checked times beside this one's; KJIT_BENCH_CLOCK=thread
# times by the thread's CPU time (docs/performance.md).
bench-checks: all $(BUILD)/bench_cpu $(BUILD)/bench_simd
	KJIT_CACHE_DIR=$(abspath $(BUILD))/bench-cache tests/bench/check_cost.sh $(BUILD)/bench_cpu \
	  $(BENCH_ROUNDS) $(BENCH_REPEAT)

# make bench-cancel: what cancellation polls (KJIT_CANCELLABLE=1) cost there.
bench-cancel: all $(BUILD)/bench_cpu $(BUILD)/bench_simd
	KJIT_CACHE_DIR=$(abspath $(BUILD))/bench-cache KJIT_COST_OPTION=KJIT_CANCELLABLE \
	  tests/bench/check_cost.sh $(BUILD)/bench_cpu $(BENCH_ROUNDS) $(BENCH_REPEAT)
