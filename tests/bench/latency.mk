# make bench-latency: cold and warm compile times (each in a new process),
# launch and vectorized-call costs, on cpu and, where a GPU is usable, cuda;
# then every program of examples/ and tests/bench compiled cold (every
# function, and a @reduce file's slowest first call); then the
# first call of a new process from a library (libkjit-rt) against a cold JIT
# and a warm disk cache, and the libraries' sizes (tests/aot/latency.sh,
# docs/aot.md).
# Prints a Markdown table; see docs/performance.md ("Latency").
.PHONY: bench-latency

$(BUILD)/latency: tests/bench/latency.c tests/cuda_host/diag_common.h $(BUILD)/libkjit.so $(HEADERS)
	$(CC) $(ALL_CFLAGS) $(TEST_CFLAGS) -o $@ $< -L$(BUILD) -lkjit -lm -Wl,-rpath,'$$ORIGIN'

bench-latency: $(BUILD)/latency $(BUILD)/libkjit-rt.so $(BUILD)/kjit
	$(BUILD)/latency examples tests/bench
	@bash tests/aot/latency.sh $(BUILD)
