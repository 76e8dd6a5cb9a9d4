# Every mode, every kernel (tests/modes/, docs/testing.md): included by tests/tests.mk.
#
#   make test-modes   build/modes-test: every @kernel, @vectorize, @guvectorize and
#                     @reduce of tests/golden, examples, stdlib and the unit tests'
#                     sources, in every cpu mode (and cuda where a driver is), the
#                     outputs compared with cpu, cpu_simd = 0 bit for bit.
#                     MODES_SEED=N reruns one seed; MODES_ONLY=TEXT only the sources
#                     whose name holds TEXT.

MODES_SRCS = $(wildcard tests/modes/*.c)
MODES_OBJS = $(MODES_SRCS:%.c=$(BUILD)/obj/%.o)

$(BUILD)/obj/tests/modes/%.o: tests/modes/%.c tests/modes/modes.h runtime/kjit.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -Iruntime -c $< -o $@

$(BUILD)/modes-test: $(MODES_OBJS) $(BUILD)/libkjit.so
	$(CC) -o $@ $(MODES_OBJS) -L$(BUILD) -lkjit -lm -Wl,-rpath,'$$ORIGIN'

.PHONY: test-modes
test-modes: export KJIT_CACHE_DIR = $(abspath $(BUILD))/test-cache
test-modes: export KJIT_VERIFY = 1
test-modes: export KJIT_STDLIB = $(abspath stdlib)
test-modes: deps $(BUILD)/modes-test
	$(BUILD)/modes-test --quiet $(if $(MODES_SEED),--seed $(MODES_SEED)) $(if $(MODES_ONLY),--only $(MODES_ONLY))
