# The host cost of kjit's cuda calls without a GPU (tests/cuda_host/): a fake
# CUDA driver that counts driver calls (fake_cuda.c, loaded with
# KJIT_CUDA_DRIVER), and build/cuda-host, which times kjit_call,
# kjit_call_async and kjit_launch on it.  The unit suite cuda_host
# (tests/unit/test_cuda_host.c) asserts the driver calls per call.
#
#   make bench-cuda-host      the table (docs/performance.md, "cuda host cost")
.PHONY: bench-cuda-host

$(BUILD)/libkjit-fakecuda.so: tests/cuda_host/fake_cuda.c
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -shared -o $@ $<

$(BUILD)/cuda-host: tests/cuda_host/cuda_host.c tests/cuda_host/diag_common.h $(BUILD)/libkjit.so \
                   runtime/kjit.h
	$(CC) $(ALL_CFLAGS) -Iruntime -o $@ $< -L$(BUILD) -lkjit -ldl -Wl,-rpath,'$$ORIGIN'

# The cost of a call on each kind of stream (the driver's bare launch and
# kjit's call; tests/gpu/python.sh runs it on the GPU, make check on the fake).
$(BUILD)/stream-diag: tests/cuda_host/stream_diag.c tests/cuda_host/diag_common.h $(BUILD)/libkjit.so \
                     runtime/kjit.h
	$(CC) $(ALL_CFLAGS) -Iruntime -o $@ $< -L$(BUILD) -lkjit -ldl -Wl,-rpath,'$$ORIGIN'

# The unit tests find the fake driver beside themselves.
$(BUILD)/unit-tests: $(BUILD)/libkjit-fakecuda.so
$(BUILD)/obj/tests/unit/test_cuda_host.o: ALL_CFLAGS += \
    -DKJ_FAKE_CUDA='"$(abspath $(BUILD))/libkjit-fakecuda.so"'

bench-cuda-host: export KJIT_CACHE_DIR = $(abspath $(BUILD))/test-cache
bench-cuda-host: $(BUILD)/cuda-host $(BUILD)/libkjit-fakecuda.so
	KJIT_CUDA_DRIVER=$(abspath $(BUILD))/libkjit-fakecuda.so $(BUILD)/cuda-host

# make check: build/stream-diag on the fake driver, which refuses a malformed
# `extra` block: every row's driver calls a call (1 for the driver's own
# launch in each form, cuLaunchKernelEx's included; 2 for kjit's add in both
# of its parameter forms) and every group there.
.PHONY: test-cuda-host
test-cuda-host: export KJIT_CACHE_DIR = $(abspath $(BUILD))/test-cache
test-cuda-host: $(BUILD)/stream-diag $(BUILD)/libkjit-fakecuda.so
	KJIT_CUDA_DRIVER=$(abspath $(BUILD))/libkjit-fakecuda.so $(BUILD)/stream-diag \
	  > $(BUILD)/stream-diag-fake.log
	@log=$(BUILD)/stream-diag-fake.log; \
	  bad=$$(grep '^| ' $$log | grep -v '^| what \|^| --- ' | \
	    grep -v '^| \(bare cuLaunchKernel\|launch form\).* | 1\.00 |$$' | \
	    grep -v '^| kjit_call.* | 2\.00 |$$'); \
	  forms=$$(grep -c '^| launch form: ' $$log); \
	  kjit=$$(grep -c '^| kjit_call.*KJIT_CUDA_PARAMS=' $$log); \
	  if [ -n "$$bad" ] || [ "$$forms" != 7 ] || [ "$$kjit" != 4 ]; then \
	    echo "test-cuda-host: stream-diag on the fake driver ($$forms launch forms, $$kjit" \
	         "kjit form rows; want 7 and 4); rows off:"; echo "$$bad"; exit 1; fi; \
	  echo "test-cuda-host: stream-diag's $$forms launch forms and $$kjit kjit form rows passed"
