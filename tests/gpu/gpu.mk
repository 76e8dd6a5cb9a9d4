# The GPU machine's bundle: included by tests/tests.mk.
#
#   make gpu-bundle    $(BUILD)/gpu-bundle: everything tests/gpu/run.sh needs on
#                      a machine with a GPU but no LLVM, re2c or Check;
#                      tests/gpu/multigpu.sh runs from it on one with 2 GPUs
#                      (bin/multigpu; examples/mpi/heat2d.c is built there
#                      with mpicc when that machine has MPI)
#
# The bundle mirrors the repository's layout (run.sh, the unit tests and the
# benchmark find examples/, stdlib/ and tests/ relative to it) and holds the
# built programs in bin/ (libkjit.so as libkjit.so.xz, unpacked by run.sh).  LLVM, zlib, zstd, libpng and Check are linked
# statically, so the programs need only glibc, libstdc++ and libgcc; the
# bundle is checked for that, and for its size, every time it is made.

GPU_BUNDLE      = $(BUILD)/gpu-bundle
GPU_BUNDLE_MAX_MB = 40
# Shared libraries every Linux machine with a CUDA driver has.
GPU_BUNDLE_LIBS = linux-vdso|libc\.so|libm\.so|libstdc\+\+|libgcc_s|libpthread|libdl\.so|librt\.so|ld-linux|libkjit\.so|libkjit-rt\.so

# Libraries' cuda code on the GPU machine (tests/gpu/aot.sh): every example
# built here as a library with sm_90 cubins and PTX and the sse2 cpu code
# alone (the bundle's size), add without cuda code (a refusal), the golden
# kernel that prints, the golden programs of failed checks (--check), a
# tree sum built with --block 64 --block 128; the C programs that run them, linked with libkjit-rt
# alone (-rt) or with libkjit (-jit), built here (that machine has no
# compiler to spare).
GPU_AOT = $(BUILD)/gpu-aot
# Checked mode on cuda: each golden program of a failed value check,
# built with --check (its checked cuda roots).
GPU_AOT_CHECKED = $(patsubst tests/golden/checks/%.run,$(GPU_AOT)/checked_%.so, \
                    $(wildcard tests/golden/checks/*.run))
GPU_AOT_LIBS = $(patsubst examples/%.kern,$(GPU_AOT)/lib%.so,$(wildcard examples/*.kern)) \
               $(GPU_AOT)/libadd_nocuda.so $(GPU_AOT)/libprint_kernel.so $(GPU_AOT_CHECKED) \
               $(GPU_AOT)/libaot_tree.so
GPU_AOT_BINS = $(GPU_AOT)/aot-driver-rt $(GPU_AOT)/aot-driver-jit $(GPU_AOT)/aot-bench-rt \
               $(GPU_AOT)/aot-bench-jit
$(GPU_AOT)/lib%.so: examples/%.kern $(BUILD)/kjit $(BUILD)/libkjit.so
	@mkdir -p $(GPU_AOT) && chmod 700 $(GPU_AOT)
	$(BUILD)/kjit build $< --emit=lib --cpu-levels=sse2 --arch=sm_90 -o $@
$(GPU_AOT)/libadd_nocuda.so: examples/add.kern $(BUILD)/kjit $(BUILD)/libkjit.so
	@mkdir -p $(GPU_AOT) && chmod 700 $(GPU_AOT)
	$(BUILD)/kjit build $< --emit=lib --cpu-levels=sse2 --cuda=off -o $@
$(GPU_AOT)/checked_%.so: tests/golden/checks/%.kern $(BUILD)/kjit $(BUILD)/libkjit.so
	@mkdir -p $(GPU_AOT) && chmod 700 $(GPU_AOT)
	$(BUILD)/kjit build $< --emit=lib --check --cpu-levels=sse2 --arch=sm_90 -o $@
$(GPU_AOT)/libaot_tree.so: tests/gpu/aot_tree.kern $(BUILD)/kjit $(BUILD)/libkjit.so
	@mkdir -p $(GPU_AOT) && chmod 700 $(GPU_AOT)
	$(BUILD)/kjit build $< --emit=lib --cpu-levels=sse2 --arch=sm_90 --block 64 --block 128 -o $@
$(GPU_AOT)/libprint_kernel.so: tests/golden/print/kernel.kern $(BUILD)/kjit $(BUILD)/libkjit.so
	@mkdir -p $(GPU_AOT) && chmod 700 $(GPU_AOT)
	$(BUILD)/kjit build $< --emit=lib --cpu-levels=sse2 --arch=sm_90 -o $@
$(GPU_AOT)/aot-driver-%: tests/aot/aot_driver.c runtime/kjit.h $(BUILD)/libkjit.so $(BUILD)/libkjit-rt.so
	@mkdir -p $(GPU_AOT) && chmod 700 $(GPU_AOT)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -Wall -Iruntime $< -o $@ -L$(BUILD) -lkjit$(if $(filter rt,$*),-rt,) \
	  -lm -Wl,-rpath,'$$ORIGIN'
$(GPU_AOT)/aot-bench-%: tests/gpu/aot_bench.c runtime/kjit.h $(BUILD)/libkjit.so $(BUILD)/libkjit-rt.so
	@mkdir -p $(GPU_AOT) && chmod 700 $(GPU_AOT)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -Wall -Iruntime $< -o $@ -L$(BUILD) -lkjit$(if $(filter rt,$*),-rt,) \
	  -lm -Wl,-rpath,'$$ORIGIN'


.PHONY: gpu-bundle
gpu-bundle: $(BUILD)/kjit $(BUILD)/libkjit.so $(BUILD)/unit-tests $(BUILD)/latency $(BUILD)/modes-test \
            $(BUILD)/genprog-run $(BUILD)/multigpu/multigpu $(BUILD)/libkjit-rt.so $(GPU_AOT_LIBS) \
            $(GPU_AOT_BINS) $(BUILD)/cuda-host $(BUILD)/stream-diag $(BUILD)/libkjit-fakecuda.so
	@rm -rf $(GPU_BUNDLE)
	@mkdir -p $(GPU_BUNDLE)/bin $(GPU_BUNDLE)/tests $(GPU_BUNDLE)/libdevice
	cp $(BUILD)/kjit $(BUILD)/unit-tests $(BUILD)/latency $(BUILD)/modes-test $(BUILD)/genprog-run \
	  $(BUILD)/multigpu/multigpu $(BUILD)/cuda-host $(BUILD)/stream-diag $(BUILD)/libkjit-fakecuda.so \
	  $(GPU_BUNDLE)/bin/
	strip --strip-unneeded -o $(GPU_BUNDLE)/bin/libkjit.so $(BUILD)/libkjit.so
	strip --strip-unneeded -o $(GPU_BUNDLE)/bin/libkjit-rt.so $(BUILD)/libkjit-rt.so
	cp $(GPU_AOT_BINS) $(GPU_BUNDLE)/bin/
	@# the libraries travel xz-compressed (reduce's cubins and PTX weigh 5 MB)
	mkdir -p $(GPU_BUNDLE)/aot && tar -C $(GPU_AOT) -cf - $(notdir $(GPU_AOT_LIBS)) | \
	  xz -T0 -6 > $(GPU_BUNDLE)/aot/libs.tar.xz
	strip $(GPU_BUNDLE)/bin/kjit $(GPU_BUNDLE)/bin/unit-tests $(GPU_BUNDLE)/bin/latency \
	  $(GPU_BUNDLE)/bin/modes-test $(GPU_BUNDLE)/bin/genprog-run $(GPU_BUNDLE)/bin/multigpu
	cp -r examples stdlib $(GPU_BUNDLE)/
	cp -r tests/golden tests/gpu tests/bench tests/cli tests/modes tests/genprog $(GPU_BUNDLE)/tests/
	@# launch_options.c, built there, includes tests/cuda_host/diag_common.h
	cp -r tests/cuda_host $(GPU_BUNDLE)/tests/
	@# bin/modes-test runs the .kern sources the unit tests hold as C literals.
	mkdir -p $(GPU_BUNDLE)/tests/unit && cp tests/unit/*.c $(GPU_BUNDLE)/tests/unit/
	@# The grammar test reads the grammar and the parser's source.
	mkdir -p $(GPU_BUNDLE)/compiler && cp compiler/parse.c $(GPU_BUNDLE)/compiler/
	cp -r grammar $(GPU_BUNDLE)/
	cp runtime/kjit.h $(GPU_BUNDLE)/tests/bench/
	@# bench_simd.c and bench_cpu.c include ../../runtime/kjit.h (tests/gpu/bench_cpu_host.sh).
	mkdir -p $(GPU_BUNDLE)/runtime && cp runtime/kjit.h $(GPU_BUNDLE)/runtime/
	@# The Python package and its tests, and pytest's wheels for a machine
	@# without network (when they can be fetched here; run.sh says if not).
	mkdir -p $(GPU_BUNDLE)/python && cp -r python/kjit python/tests python/build_backend \
	  python/pyproject.toml python/README.md $(GPU_BUNDLE)/python/
	find $(GPU_BUNDLE)/python -name __pycache__ -prune -exec rm -rf {} +
	@# The compiled hot path is built on the GPU machine, for its Python
	@# (build_python_extension in tests/gpu/bundle.sh), never carried from here.
	rm -f $(GPU_BUNDLE)/python/kjit/_fast*.so
	-@python3 -m pip download -q -d $(GPU_BUNDLE)/python/wheels pytest >/dev/null 2>&1 || \
	  echo "gpu-bundle: no pytest wheels (offline?): the GPU machine needs its own pytest"
	@# Dask and distributed for tests/gpu/dask.sh (NumPy is the machine's own):
	@# this Python's wheels, and the compiled ones of other Pythons where found.
	-@python3 -m pip download -q -d $(GPU_BUNDLE)/python/dask-wheels dask distributed >/dev/null 2>&1 || \
	  echo "gpu-bundle: no Dask wheels (offline?): tests/gpu/dask.sh needs the GPU machine's own Dask"
	-@for v in 3.10 3.12 3.13; do python3 -m pip download -q -d $(GPU_BUNDLE)/python/dask-wheels \
	  --only-binary=:all: --python-version $$v --platform manylinux_2_28_x86_64 \
	  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux1_x86_64 \
	  dask distributed >/dev/null 2>&1; done; true
	@# A fallback for a machine whose toolkit lacks nvvm/ (run.sh uses it only then).
	@lib=$$(KJIT_LIBDEVICE= $(GPU_BUNDLE)/bin/kjit info 2>/dev/null | sed -n 's/^libdevice: *\(\/.*\)/\1/p'); \
	  if [ -n "$$lib" ]; then cp "$$lib" $(GPU_BUNDLE)/libdevice/; fi
	@bad=$$(for f in $(GPU_BUNDLE)/bin/*; do ldd $$f | awk '{print $$1}'; done | \
	  grep -Ev '^(.*/)?($(GPU_BUNDLE_LIBS))' | sort -u); \
	  if [ -n "$$bad" ]; then echo "gpu-bundle: links libraries the GPU machine may lack: $$bad"; exit 1; fi
	@# LLVM makes libkjit.so ~50 MB: it travels xz-compressed and run.sh unpacks it.
	xz -T0 -6 $(GPU_BUNDLE)/bin/libkjit.so
	@size=$$(du -sm $(GPU_BUNDLE) | cut -f1); \
	  if [ $$size -gt $(GPU_BUNDLE_MAX_MB) ]; then \
	    echo "gpu-bundle: $$size MB, over the $(GPU_BUNDLE_MAX_MB) MB limit"; exit 1; fi; \
	  echo "gpu-bundle: $(GPU_BUNDLE) ($$size MB); on the GPU machine: bash tests/gpu/run.sh $(GPU_BUNDLE)"; \
	  echo "  and on one with 2 GPUs: bash tests/gpu/multigpu.sh $(GPU_BUNDLE)"

# The GPU benchmark (tests/bench/bench_gpu.cu) is built on the GPU machine by
# tests/bench/bench_gpu.sh, with nvcc against the bundle's libkjit.so and
# kjit.h (copied into tests/bench/ above).
