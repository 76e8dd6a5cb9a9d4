# kjit: build, test, install.
#
#   make              build/kjit, build/libkjit.so, build/libkjit.a, build/libkjit-rt.so (.a)
#   make check        every test that runs without a GPU (what CI runs)
#   make demo         the seed examples on every available target
#   make gpu-bundle   what the GPU machine needs, in build/gpu-bundle
#   make install PREFIX=/usr/local
#   make install-python   the Python package (python/), after make install
#
# LLVM 19 is linked statically into libkjit.so (once); kjit and the test programs
# link that shared library, so they also run where LLVM is not installed.

PREFIX      ?= /usr/local
BUILD       ?= build
LLVM_CONFIG ?= llvm-config-19
CC          ?= cc
RE2C        ?= re2c

# Debian packages the build needs (and NumPy, for the tests; clang and its
# libFuzzer runtime for tests/fuzz, clang 14 on Debian 12); `make deps` installs
# the missing ones.
DEB_PACKAGES = llvm-19-dev re2c check libpng-dev zlib1g-dev libzstd-dev pkg-config \
               clang libclang-rt-14-dev

CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter \
              -Wno-missing-field-initializers -fPIC -g
CFLAGS     ?= -O2
# Sources name what they include by relative path, so that the layers are
# visible in the #include lines (tests/layers.sh checks them); only the
# generated lexer and the tests search folders.
ALL_CFLAGS  = $(CFLAGS_BASE) $(CFLAGS) -I$(BUILD)/gen
TEST_CFLAGS = -Icompiler -Icompiler/backend -Iruntime

LLVM_CFLAGS = $(shell $(LLVM_CONFIG) --cflags 2>/dev/null | sed 's/-std=[^ ]*//')
LLVM_LIBDIR = $(shell $(LLVM_CONFIG) --libdir 2>/dev/null)
LLVM_LIBS   = $(shell $(LLVM_CONFIG) --link-static --libs orcjit perfjitevents native nvptx passes ipo \
                linker bitreader bitwriter irreader 2>/dev/null)
# Only what the static LLVM needs and every Linux machine has (z and zstd are
# linked statically too: the GPU machine may lack their -dev files but not the .so).
SYS_LIBS    = -Wl,-Bstatic -lz -lzstd -Wl,-Bdynamic -lpthread -ldl -lm -lrt
PNG_LIBS    = -Wl,-Bstatic -lpng16 -lz -Wl,-Bdynamic -lm
CHECK_LIBS  = -Wl,-Bstatic -lcheck_pic -lsubunit -Wl,-Bdynamic -lrt -lm -lpthread

# The layers, each in its folder, each built only on the ones before it:
# compiler/ (front end and IR passes) <- compiler/backend/ (LLVM) <- runtime/
# (libkjit, kjit.h) <- compiler/cli/ (the kjit command).
LEXER_C       = $(BUILD)/gen/lex.c
COMPILER_SRCS = $(wildcard compiler/*.c)
BACKEND_SRCS  = $(wildcard compiler/backend/*.c)
# runtime/jit_none.c is libkjit-rt's in place of runtime/jit.c (below).
RUNTIME_SRCS  = $(filter-out runtime/jit_none.c,$(wildcard runtime/*.c))
CLI_SRCS      = $(wildcard compiler/cli/*.c)

FRONT_OBJS   = $(COMPILER_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/lex.o
BACKEND_OBJS = $(BACKEND_SRCS:%.c=$(BUILD)/obj/%.o)
RUNTIME_OBJS = $(RUNTIME_SRCS:%.c=$(BUILD)/obj/%.o)
LIB_OBJS     = $(FRONT_OBJS) $(BACKEND_OBJS) $(RUNTIME_OBJS)
HEADERS      = $(wildcard compiler/*.h compiler/backend/*.h compiler/cli/*.h runtime/*.h)

.PHONY: all deps check test-layers test-unit test-golden test-robust test-tsan test-api-misuse demo bench-cpu \
        gpu-bundle install clean test-bench-refs bench-checks bench-cancel bench-pairs

all: deps $(BUILD)/kjit $(BUILD)/libkjit.so $(BUILD)/libkjit.a $(BUILD)/libkjit-rt.so \
     $(BUILD)/libkjit-rt.a $(BUILD)/kjit-rt.pc

# ----------------------------------------------------------------- set-up

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "missing packages; run: sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi
	@# NumPy writes the float64 references of the kjit bench tests (tests/cli).
	@python3 -c 'import numpy' 2>/dev/null || python3 -m pip install -q numpy || \
	  { echo "NumPy is missing; run: python3 -m pip install numpy"; exit 1; }

# ----------------------------------------------------------------- build

$(LEXER_C): grammar/kern.re | deps
	@mkdir -p $(dir $@)
	$(RE2C) -W --no-generation-date -o $@ $<

$(BUILD)/obj/gen/lex.o: $(LEXER_C) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Icompiler -c $< -o $@

$(BACKEND_SRCS:%.c=$(BUILD)/obj/%.o): ALL_CFLAGS += $(LLVM_CFLAGS)

$(BUILD)/obj/%.o: %.c $(HEADERS) | deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/libkjit.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libkjit.so: $(LIB_OBJS)
	$(CC) -shared -o $@ $^ -L$(LLVM_LIBDIR) $(LLVM_LIBS) $(SYS_LIBS) -lstdc++ \
	  -Wl,--exclude-libs,ALL -Wl,-soname,libkjit.so

# libkjit-rt: the runtime alone, for code from libraries that `kjit build
# --emit=lib` made (docs/aot.md).  The runtime's objects but jit.c (which
# fills the runtime's KjJit table with the compiler), tools.c and
# aot_build.c, aot_cuda_build.c, aot_header.c (kjit_tools.h: the compiler's
# stages, kjit build --emit=lib|header), jit_none.c in jit.c's place, and of
# compiler/ only the support the two share: the arena and buffers (util.c),
# types (types.c), the reporter (diag.c), f16/bf16 bits (half_bits.c) and
# the bytes of a local() sized at launch (local_size.c, which a launch asks)
# and the lanes of a cuda reduction (reduce_lanes.c, which a reduction asks).
# No LLVM, no pass: tests/aot/rt_link.sh proves it with nm and ldd.
RT_SUPPORT_OBJS = $(BUILD)/obj/compiler/util.o $(BUILD)/obj/compiler/types.o \
                  $(BUILD)/obj/compiler/diag.o $(BUILD)/obj/compiler/half_bits.o \
                  $(BUILD)/obj/compiler/local_size.o $(BUILD)/obj/compiler/reduce_lanes.o
RT_OBJS = $(RT_SUPPORT_OBJS) $(BUILD)/obj/runtime/jit_none.o \
          $(filter-out $(BUILD)/obj/runtime/jit.o $(BUILD)/obj/runtime/tools.o \
            $(BUILD)/obj/runtime/aot_build.o $(BUILD)/obj/runtime/aot_cuda_build.o \
            $(BUILD)/obj/runtime/aot_header.o,$(RUNTIME_OBJS))
$(BUILD)/libkjit-rt.so: $(RT_OBJS)
	$(CC) -shared -o $@ $^ -lpthread -ldl -lm -lrt -Wl,-z,defs -Wl,-soname,libkjit-rt.so

# for a program linked statically with a kernel library (--emit=staticlib)
$(BUILD)/libkjit-rt.a: $(RT_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/kjit-rt.pc: runtime/kjit-rt.pc.in
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|0.1.0|' $< > $@

CLI_OBJS = $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
$(BUILD)/kjit: $(CLI_OBJS) $(BUILD)/libkjit.so
	$(CC) -o $@ $(CLI_OBJS) -L$(BUILD) -lkjit $(PNG_LIBS) -lpthread -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../lib'

# ----------------------------------------------------------------- tests

include tests/tests.mk

# ----------------------------------------------------------------- install

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/share/kjit/stdlib
	install -m 755 $(BUILD)/kjit $(DESTDIR)$(PREFIX)/bin/kjit
	install -m 644 $(BUILD)/libkjit.so $(BUILD)/libkjit.a $(BUILD)/libkjit-rt.so $(BUILD)/libkjit-rt.a \
	  $(DESTDIR)$(PREFIX)/lib/
	install -m 644 runtime/kjit.h runtime/kjit_tools.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 stdlib/*.kern $(DESTDIR)$(PREFIX)/share/kjit/stdlib/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|0.1.0|' runtime/kjit.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/kjit.pc
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|0.1.0|' runtime/kjit-rt.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/kjit-rt.pc
	@echo "the Python package: make install-python PREFIX=$(PREFIX) (pip install ./python; docs/python.md)"

clean:
	rm -rf $(BUILD)
