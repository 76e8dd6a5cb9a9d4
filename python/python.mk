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
#   make bench-dask       kjit.dask on 1 and 2 worker processes
#                         (tests/bench/bench_dask.py; docs/scaling.md)

PYTHON    ?= python3
PIP_FLAGS ?=
PY_TEST_EXTRAS = pandas xarray 'dask[array]' mypy

.PHONY: test-python install-python python-dask-deps bench-dask

# Dask and distributed, for kjit.dask's tests and benchmark, from PyPI; where
# they cannot be installed the tests skip and say why.
python-dask-deps:
	@$(PYTHON) -c 'import dask.array, distributed' 2>/dev/null || \
	  $(PYTHON) -m pip install -q 'dask[array]' distributed || \
	  echo "skipped: Dask and distributed could not be installed (python/tests/test_dask.py skips)"

test-python: export KJIT_CACHE_DIR = $(abspath $(BUILD))/test-cache
test-python: deps $(BUILD)/libkjit.so $(BUILD)/libkjit-fakecuda.so python-dask-deps
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

# The package installed (with its compiled hot path) into a fresh virtual
# environment that sees the system's NumPy and Dask, then the benchmark run
# from outside the repository's Python folder.
bench-dask: export KJIT_CACHE_DIR = $(abspath $(BUILD))/test-cache
bench-dask: deps $(BUILD)/libkjit.so python-dask-deps
	rm -rf $(BUILD)/bench-venv
	$(PYTHON) -m venv --system-site-packages --without-pip $(BUILD)/bench-venv
	$(BUILD)/bench-venv/bin/python -m pip install -q --no-cache-dir ./python
	cd $(BUILD) && bench-venv/bin/python $(abspath tests/bench/bench_dask.py) $(BENCH_DASK_FLAGS)
