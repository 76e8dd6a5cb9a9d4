# Several GPUs of one host from C (examples/multigpu/multigpu.c).  Included by
# tests/tests.mk.
#
#   make test-multigpu   the example on cpu contexts (what it does where there
#                        is no GPU): the split runs against one piece, the
#                        copies between parts byte for byte, and a split
#                        without its halo copies caught
#   on a machine with 2 GPUs: make gpu-bundle here, then
#   bash tests/gpu/multigpu.sh build/gpu-bundle there (checks and 1 vs 2 GPUs)

# Both rpaths: build/multigpu/ finds build/libkjit.so, the GPU bundle's bin/
# its own.
$(BUILD)/multigpu/multigpu: examples/multigpu/multigpu.c runtime/kjit.h $(BUILD)/libkjit.so
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -Wextra -Iruntime -o $@ $< -L$(BUILD) -lkjit -lm \
	  -Wl,-rpath,'$$ORIGIN/..:$$ORIGIN'

.PHONY: test-multigpu
test-multigpu: export KJIT_CACHE_DIR = $(abspath $(BUILD))/test-cache
test-multigpu: export KJIT_VERIFY = 1
test-multigpu: $(BUILD)/multigpu/multigpu
	@m=$(BUILD)/multigpu/multigpu; out=$(BUILD)/multigpu/out.txt; \
	for case in "heat --target cpu --rows 600 --cols 400 --steps 40 --check" \
	            "heat --target parallel --parts 3 --rows 301 --cols 77 --steps 30 --check" \
	            "sum --target cpu --parts 3 --n 3000001 --repeat 2"; do \
	  $$m $$case > $$out 2>&1 || { cat $$out; echo "test-multigpu: multigpu $$case failed"; exit 1; }; \
	  grep -c "^check: ok" $$out | grep -qx "2" || { cat $$out; echo "test-multigpu: multigpu $$case: not 2 checks passed"; exit 1; }; \
	done; \
	$$m copy --target cpu --parts 3 > $$out 2>&1 && [ "$$(grep -c '^check: ok' $$out)" = 24 ] || \
	  { cat $$out; echo "test-multigpu: multigpu copy failed"; exit 1; }; \
	if $$m heat --target cpu --rows 200 --cols 100 --steps 20 --check --no-exchange > $$out 2>&1; then \
	  cat $$out; echo "test-multigpu: a split without halo copies went unnoticed"; exit 1; fi; \
	grep -q "^check: FAILED: the field of 2 parts" $$out || { cat $$out; exit 1; }; \
	echo "test-multigpu: heat and sum split over 2 and 3 cpu contexts match one piece, copies between them are exact; missing halo copies are caught"
