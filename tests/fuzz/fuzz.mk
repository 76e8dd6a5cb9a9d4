# libFuzzer harnesses (tests/fuzz/fuzz_*.c), built with clang under ASan and
# UBSan.  Included by tests/tests.mk.
#
#   make fuzz FUZZ_SECONDS=600   each harness for that long (default 60)
#   make test-fuzz               each for FUZZ_CHECK_SECONDS (15), part of make check
#
# Each run starts from tests/fuzz/corpus/<harness>/ (seeds and the inputs of
# crashes found and fixed, kept as regressions) and, for the front end, every
# .kern file of examples/, stdlib/ and tests/golden/.  New inputs go to
# $(BUILD)/fuzz/corpus-<harness>/, never into the tree; a crash leaves its
# input as $(BUILD)/fuzz/crash-* and fails the run.

FUZZ_CC            ?= clang
FUZZ_SECONDS       ?= 60
FUZZ_CHECK_SECONDS ?= 15
FUZZ_FLAGS = -g -O1 -std=c11 -D_GNU_SOURCE -fno-omit-frame-pointer \
             -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
             -Wno-unused-command-line-argument
FUZZ_HARNESSES = front_end npy cli_args

# the front end and IR passes: every compiler/ source, no LLVM
$(BUILD)/fuzz/front_end: tests/fuzz/fuzz_front_end.c $(COMPILER_SRCS) $(LEXER_C) $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Icompiler -I$(BUILD)/gen -o $@ tests/fuzz/fuzz_front_end.c \
	  $(COMPILER_SRCS) $(LEXER_C) -lm
# the .npy reader, instrumented; the rest of the runtime from libkjit
$(BUILD)/fuzz/npy: tests/fuzz/fuzz_npy.c runtime/npy.c $(HEADERS) $(BUILD)/libkjit.so
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_npy.c runtime/npy.c -L$(BUILD) -lkjit \
	  -Wl,-rpath,'$$ORIGIN/..'
# kjit run's command line: the command's sources but main.c, instrumented
$(BUILD)/fuzz/cli_args: tests/fuzz/fuzz_cli_args.c $(filter-out %/main.c,$(CLI_SRCS)) $(HEADERS) \
                        $(BUILD)/libkjit.so
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_cli_args.c $(filter-out %/main.c,$(CLI_SRCS)) \
	  -L$(BUILD) -lkjit $(PNG_LIBS) -lpthread -Wl,-rpath,'$$ORIGIN/..'

FUZZ_BINARIES = $(FUZZ_HARNESSES:%=$(BUILD)/fuzz/%)
fuzz_seeds_front_end = tests/fuzz/corpus/front_end examples stdlib $(sort $(dir $(wildcard tests/golden/*/*.kern)))
fuzz_seeds_npy       = tests/fuzz/corpus/npy
fuzz_seeds_cli_args  = tests/fuzz/corpus/cli_args

# run-fuzz SECONDS: each harness in turn; stops at the first failure
define run-fuzz
	@for h in $(FUZZ_HARNESSES); do \
	  mkdir -p $(BUILD)/fuzz/corpus-$$h; \
	  case $$h in front_end) seeds="$(fuzz_seeds_front_end)";; npy) seeds="$(fuzz_seeds_npy)";; \
	    *) seeds="$(fuzz_seeds_cli_args)";; esac; \
	  echo "fuzz: $$h for $(1) s"; \
	  $(BUILD)/fuzz/$$h -max_total_time=$(1) -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
	    -print_final_stats=1 -artifact_prefix=$(BUILD)/fuzz/ $(BUILD)/fuzz/corpus-$$h $$seeds \
	    >$(BUILD)/fuzz/$$h.log 2>&1 || { tail -60 $(BUILD)/fuzz/$$h.log; \
	    echo "fuzz: $$h failed (log: $(BUILD)/fuzz/$$h.log)"; exit 1; }; \
	  grep -E '^stat::number_of_executed_units' $(BUILD)/fuzz/$$h.log | sed "s/^/fuzz: $$h: /"; \
	done
endef

.PHONY: fuzz test-fuzz
fuzz: deps $(FUZZ_BINARIES)
	$(call run-fuzz,$(FUZZ_SECONDS))
test-fuzz: deps $(FUZZ_BINARIES)
	$(call run-fuzz,$(FUZZ_CHECK_SECONDS))
