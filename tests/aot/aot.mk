# Ahead-of-time libraries and libkjit-rt (docs/aot.md).
#
#   make test-aot   libkjit-rt links no LLVM and no compiler object (rt_link.sh)
test-aot: $(BUILD)/libkjit-rt.so
	@bash tests/aot/rt_link.sh $(BUILD)
