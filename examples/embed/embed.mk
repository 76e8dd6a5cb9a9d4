# Host programs that embed kjit, and the demo.  Included by tests/tests.mk.
#
#   make test-embed   builds examples/embed/*.c against libkjit.so and runs them
#                     on cpu and parallel (each exits non-zero on a wrong result)
#   make demo         every seed example through `kjit bench` on every available
#                     target, one summary table, and the Mandelbrot/das PNGs

EMBED_SRCS     = $(wildcard examples/embed/*.c)
EMBED_PROGRAMS = $(EMBED_SRCS:examples/embed/%.c=$(BUILD)/embed/%)

$(BUILD)/embed/%: examples/embed/%.c runtime/kjit.h $(BUILD)/libkjit.so
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -Wextra -Iruntime -o $@ $< -L$(BUILD) -lkjit -lm \
	  -Wl,-rpath,'$$ORIGIN/..'

.PHONY: test-embed

test-embed: $(EMBED_PROGRAMS)
	@for target in cpu parallel; do \
	  $(BUILD)/embed/vector_add $$target || exit 1; \
	  $(BUILD)/embed/mandelbrot examples/mandelbrot.kern $(BUILD)/embed/mandelbrot-$$target.pgm \
	    $$target || exit 1; \
	done

demo: deps $(BUILD)/kjit
	examples/demo.sh $(BUILD)/kjit $(BUILD)/demo
