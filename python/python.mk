# The Python package (python/kjit): its tests and its installation.  Included
# at the end of tests/tests.mk.
#
#   make test-python      python/tests with pytest, on the CPU with NumPy alone
#                         (the GPU tests in the same files skip, saying why,
#                         where no GPU is usable): from the source tree, then
#                         as `pip install ./python` installs them into a fresh
#                         virtual environment (python/install_check.sh);
#                         part of `make check`
#   make install-python   pip installs the package, recording PREFIX so that it
#                         finds $(PREFIX)/lib/libkjit.so (after `make install`)

PYTHON    ?= python3
PIP_FLAGS ?=
PY_TEST_EXTRAS = pandas xarray 'dask[array]' mypy

.PHONY: test-python install-python

test-python: export KJIT_CACHE_DIR = $(abspath $(BUILD))/test-cache
test-python: deps $(BUILD)/libkjit.so
	@$(PYTHON) -m pytest --version >/dev/null 2>&1 || $(PYTHON) -m pip install -q pytest || \
	  { echo "pytest is missing; run: $(PYTHON) -m pip install pytest"; exit 1; }
	@# What the interop and stub tests use (python/tests/test_interop.py,
	@# test_stubs.py): each is optional, and its tests skip, saying so, without it.
	@$(PYTHON) -c 'import pandas, xarray, dask.array, mypy' >/dev/null 2>&1 || \
	  $(PYTHON) -m pip install -q $(PY_TEST_EXTRAS) >/dev/null 2>&1 || \
	  echo "test-python: could not install $(PY_TEST_EXTRAS): the tests that use them skip"
	KJIT_PURE_PYTHON=1 KJIT_LIBRARY=$(abspath $(BUILD))/libkjit.so $(PYTHON) -m pytest -q -rs -p no:cacheprovider \
	  python/tests
	python/install_check.sh $(BUILD) $(PYTHON)

# The package's own build backend needs nothing from the network, so this
# works offline.
install-python:
	KJIT_PREFIX=$(PREFIX) $(PYTHON) -m pip install $(PIP_FLAGS) ./python
