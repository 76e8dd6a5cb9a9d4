# Tests of the kjit command line, as a user runs it.  Included by the Makefile.
#
#   make test-cli   tests/cli/*.sh against $(BUILD)/kjit (each exits non-zero on a failure;
#                   lib.sh is the preamble they source)

.PHONY: test-cli

test-cli: $(BUILD)/kjit
	@for t in tests/cli/*.sh; do [ $$t = tests/cli/lib.sh ] || $$t $(BUILD)/kjit || exit 1; done
