# Tests: included by the top-level Makefile.
#
# Unit tests: every tests/unit/test_<name>.c defines `Suite *suite_<name>(void)`;
# one runner (tests/unit/runner.c) runs them all, from a list made here.

UNIT_SRCS   = $(wildcard tests/unit/test_*.c)
UNIT_NAMES  = $(UNIT_SRCS:tests/unit/test_%.c=%)
UNIT_OBJS   = $(UNIT_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/tests/unit/runner.o \
              $(BUILD)/obj/tests/unit/rng.o $(BUILD)/obj/tests/unit/fixture.o \
              $(BUILD)/obj/tests/unit/ir_fixture.o \
              $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/unit/ref_*.c tests/unit/case_*.c))

$(BUILD)/gen/suites.h: $(UNIT_SRCS)
	@mkdir -p $(dir $@)
	@printf '%s\n' $(foreach n,$(UNIT_NAMES),"X($(n))") > $@.tmp
	@cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp

$(BUILD)/obj/tests/unit/runner.o: $(BUILD)/gen/suites.h
$(BUILD)/obj/tests/%.o: ALL_CFLAGS += $(TEST_CFLAGS)

$(BUILD)/unit-tests: $(UNIT_OBJS) $(BUILD)/libkjit.so
	$(CC) -o $@ $(UNIT_OBJS) -L$(BUILD) -lkjit $(CHECK_LIBS) -Wl,-rpath,'$$ORIGIN'

# Tests write their compiled code to a cache of their own, never the user's; the
# generous timeout is for loaded CI machines (no test is timed).
check test-unit test-golden test-robust test-embed test-cli test-bench-refs test-tsan test-api-misuse: export KJIT_CACHE_DIR = $(abspath $(BUILD))/test-cache
# The IR verifier after every pass (pipeline.c), in every test.
check test-unit test-golden test-robust test-embed test-cli test-bench-refs test-tsan test-api-misuse: export KJIT_VERIFY = 1
check test-unit: export CK_DEFAULT_TIMEOUT = 120

test-unit: deps $(BUILD)/unit-tests $(BUILD)/kjit
	$(BUILD)/unit-tests
	@if [ "$$(uname -m)" = x86_64 ]; then \
	  echo "the SIMD suites again with SSE registers only (KJIT_CPU_FEATURES=-avx):"; \
	  for s in simd simd_access simd_range barrier_split kernels_cpu; do \
	    KJIT_CPU_FEATURES=-avx CK_RUN_SUITE=$$s $(BUILD)/unit-tests || exit 1; done; \
	  echo "the math functions near libm's values with SSE registers only and with AVX2:"; \
	  KJIT_CPU_FEATURES=-avx CK_RUN_SUITE=math_modes CK_RUN_CASE=libm $(BUILD)/unit-tests || exit 1; \
	  if grep -qw avx512f /proc/cpuinfo; then \
	    KJIT_CPU_FEATURES=-avx512f CK_RUN_SUITE=math_modes CK_RUN_CASE=libm $(BUILD)/unit-tests || exit 1; \
	  else echo "AVX2 math case: skipped: the host has no avx512f (AVX2 is its own ISA, run above)"; fi; \
	else echo "SSE-only SIMD suites: skipped: not an x86-64 host"; fi

# Golden tests: tests/golden/<feature>/*.kern beside .ir / .ast / .err / .out files.
test-golden: deps $(BUILD)/kjit
	tests/golden/run.sh $(BUILD)/kjit

# Robustness: the front end under AddressSanitizer and UBSan over every prefix of
# every example and golden file, and over random bytes.
ASAN_FLAGS = -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
             -fno-sanitize-recover=undefined
ASAN_OBJS  = $(patsubst %.c,$(BUILD)/asan/%.o,$(COMPILER_SRCS) tests/robust/check_main.c) \
             $(BUILD)/asan/gen/lex.o

$(BUILD)/asan/gen/lex.o: $(LEXER_C) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(ASAN_FLAGS) -Icompiler -c $< -o $@
$(BACKEND_SRCS:%.c=$(BUILD)/asan/%.o): ASAN_EXTRA = $(LLVM_CFLAGS)
$(BUILD)/asan/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(ASAN_FLAGS) $(TEST_CFLAGS) $(ASAN_EXTRA) -I$(BUILD)/gen -c $< -o $@
$(BUILD)/kjit-check-asan: $(ASAN_OBJS)
	$(CC) $(ASAN_FLAGS) -o $@ $^ -lm

test-robust: deps $(BUILD)/kjit-check-asan
	tests/robust/run.sh $(BUILD)/kjit-check-asan

# The public API misused (tests/robust/api_misuse.c): NULL for every pointer
# argument, arrays without data, handles freed twice or used after, under
# ASan and UBSan over a libkjit built with them (LLVM itself is not).
MISUSE_OBJS = $(patsubst %.c,$(BUILD)/asan/%.o,$(COMPILER_SRCS) $(BACKEND_SRCS) $(RUNTIME_SRCS) \
                tests/robust/api_misuse.c) $(BUILD)/asan/gen/lex.o
$(BUILD)/kjit-api-misuse-asan: $(MISUSE_OBJS)
	$(CC) $(ASAN_FLAGS) -o $@ $^ -L$(LLVM_LIBDIR) $(LLVM_LIBS) $(SYS_LIBS) -lstdc++

test-api-misuse: deps $(BUILD)/kjit-api-misuse-asan
	ASAN_OPTIONS=detect_leaks=1 $(BUILD)/kjit-api-misuse-asan

# Threads: one context used from 8 threads at once (tests/tsan/threads.c) under
# ThreadSanitizer, linked with libkjit's own objects built with it too, so that
# a data race in the runtime or the compiler is a report and a failure (LLVM,
# linked statically, is not instrumented; the threads never run kernels with
# barriers, whose fibers TSan cannot follow).
TSAN_FLAGS = -O1 -g -fsanitize=thread -fno-omit-frame-pointer
TSAN_OBJS  = $(patsubst %.c,$(BUILD)/tsan/%.o,$(COMPILER_SRCS) $(BACKEND_SRCS) $(RUNTIME_SRCS) \
               tests/tsan/threads.c) $(BUILD)/tsan/gen/lex.o

$(BUILD)/tsan/gen/lex.o: $(LEXER_C) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(TSAN_FLAGS) -Icompiler -c $< -o $@
$(BACKEND_SRCS:%.c=$(BUILD)/tsan/%.o): TSAN_EXTRA = $(LLVM_CFLAGS)
$(BUILD)/tsan/tests/%.o: TSAN_EXTRA = $(TEST_CFLAGS)
$(BUILD)/tsan/%.o: %.c $(HEADERS) | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(TSAN_FLAGS) $(TSAN_EXTRA) -I$(BUILD)/gen -c $< -o $@
$(BUILD)/kjit-threads-tsan: $(TSAN_OBJS)
	$(CC) $(TSAN_FLAGS) -o $@ $^ -L$(LLVM_LIBDIR) $(LLVM_LIBS) $(SYS_LIBS) -lstdc++

test-tsan: deps $(BUILD)/kjit-threads-tsan
	TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1" $(BUILD)/kjit-threads-tsan

# Layers: no #include crosses the folders' order (docs/architecture.md), and no
# circle of files uses each other's symbols (read from the object files).
test-layers: $(LIB_OBJS)
	BUILD=$(BUILD) tests/layers.sh

check: all test-layers test-unit test-cuda-host test-golden test-robust test-tsan test-api-misuse test-embed \
       test-cli test-python test-bench-refs test-modes test-fuzz test-genprog test-mpi test-multigpu test-aot
	@echo "make check: all test groups passed"

# The GPU machine's bundle and tests (tests/gpu/gpu.mk), and the benchmarks.
-include tests/modes/modes.mk
include tests/fuzz/fuzz.mk
-include tests/gpu/gpu.mk
-include tests/bench/bench.mk
-include tests/bench/cpu.mk
-include tests/bench/latency.mk
include tests/cuda_host/cuda_host.mk
-include tests/cli/cli.mk
-include examples/embed/embed.mk
-include examples/mpi/mpi.mk
-include examples/multigpu/multigpu.mk
include tests/aot/aot.mk
-include python/python.mk

# Generated programs (tests/genprog): the runner links the reference evaluator.
GENPROG_OBJS = $(BUILD)/obj/tests/genprog/genprog_run.o $(BUILD)/obj/tests/unit/ref_eval.o
$(BUILD)/obj/tests/genprog/%.o: ALL_CFLAGS += -Itests/unit
$(BUILD)/genprog-run: $(GENPROG_OBJS) $(BUILD)/libkjit.so
	$(CC) -o $@ $(GENPROG_OBJS) -L$(BUILD) -lkjit -lm -Wl,-rpath,'$$ORIGIN'

# make check: a fixed set of generated programs (seeds 1 to GENPROG_CHECK_N, the
# small size), in two halves at once, and every saved reduction
# (tests/genprog/regress), in every cpu mode, the SSE and AVX2 children and
# against ref_eval; first, that an injected wrong bit is caught, in process and
# in the SSE child (in a program without libm calls, and in an integer output
# of one with them: the ISA children may differ only in a libm program's float
# outputs), and that the seeds in GENPROG_GEN_SEEDS, which once made programs
# the checker refused (generator bugs), make valid ones.  gen.py --require
# fails when one of the lowering paths it counts (gen.py's FEATURES: the
# split straight line, 2-D rows and edge blocks, promoted local() arrays,
# barrier helpers, conditional sums, partial lane groups, vectorize outputs
# off a cache line, mma) occurs in none of those programs.
GENPROG_CHECK_N = 300
GENPROG_GEN_SEEDS = 505431
test-genprog: deps $(BUILD)/genprog-run
	@rm -rf $(BUILD)/genprog/check && mkdir -p $(BUILD)/genprog/check/gen
	python3 tests/genprog/gen.py --seed 1 --count $(GENPROG_CHECK_N) --size small --out $(BUILD)/genprog/check \
	  --summary --require
	@if python3 tests/genprog/gen.py --seed 1 --count 1 --size small --out $(BUILD)/genprog/check/gen --require \
	  >/dev/null; then echo "test-genprog: gen.py --require passed a program without every lowering path"; exit 1; fi
	@if $(BUILD)/genprog-run --no-children --modes cpu,par-nospec --inject-fault par-nospec \
	  $(BUILD)/genprog/check/p1.kern >/dev/null; then \
	  echo "test-genprog: an injected wrong bit went unnoticed"; exit 1; fi
	@for f in regress/min_signed_zero.kern:k9 regress/libm_clog_c64.kern:k42; do \
	  $(BUILD)/genprog-run --modes cpu --child-modes cpu --inject-fault sse:cpu tests/genprog/$${f%:*} \
	    > $(BUILD)/genprog/check/isa.txt 2>&1; \
	  grep -q "sse:cpu (KJIT_CPU_FEATURES=-avx) differs from cpu: $${f#*:}" $(BUILD)/genprog/check/isa.txt || \
	  { cat $(BUILD)/genprog/check/isa.txt; \
	    echo "test-genprog: a wrong bit in the SSE child went unnoticed in $${f%:*}"; exit 1; }; done
	@for s in $(GENPROG_GEN_SEEDS); do \
	  python3 tests/genprog/gen.py --seed $$s --count 1 --out $(BUILD)/genprog/check/gen && \
	  $(BUILD)/genprog-run --no-children --modes cpu $(BUILD)/genprog/check/gen/p$$s.kern || \
	  { echo "test-genprog: gen.py seed $$s makes a program that fails"; exit 1; }; done
	@half=$$(( $(GENPROG_CHECK_N) / 2 )); \
	  $(BUILD)/genprog-run $$(seq -f "$(BUILD)/genprog/check/p%g.kern" 1 $$half) > $(BUILD)/genprog/check/a.txt 2>&1 & a=$$!; \
	  $(BUILD)/genprog-run $$(seq -f "$(BUILD)/genprog/check/p%g.kern" $$((half + 1)) $(GENPROG_CHECK_N)) \
	    > $(BUILD)/genprog/check/b.txt 2>&1; b=$$?; wait $$a; a=$$?; \
	  cat $(BUILD)/genprog/check/a.txt $(BUILD)/genprog/check/b.txt | grep -v '^cuda: skipped'; \
	  [ $$a = 0 ] && [ $$b = 0 ]
	$(BUILD)/genprog-run tests/genprog/regress/*.kern

# A campaign: make fuzz-modes SEED=1000 N=10000 [GENPROG_ARGS="--libm"]; mismatching
# programs are reduced into build/genprog/campaign-SEED/reduced.
SEED ?= 1
N ?= 1000
fuzz-modes: deps $(BUILD)/genprog-run
	python3 tests/genprog/campaign.py --seed $(SEED) --n $(N) --runner $(BUILD)/genprog-run \
	  --work $(BUILD)/genprog/campaign-$(SEED) --reduce $(GENPROG_ARGS)
fuzz-modes test-genprog: export KJIT_CACHE = off
fuzz-modes test-genprog: export KJIT_VERIFY = 1
.PHONY: test-genprog fuzz-modes
