# Ahead-of-time libraries and libkjit-rt (docs/aot.md).
#
#   make test-aot   libkjit-rt links no LLVM and no compiler object (rt_link.sh);
#                   every example as a library through libkjit-rt, bit for bit
#                   as the JIT; levels; refusals (aot.sh)
test-aot: $(BUILD)/libkjit-rt.so $(BUILD)/libkjit-rt.a $(BUILD)/libkjit.so $(BUILD)/kjit
	@bash tests/aot/aot.sh $(BUILD)
