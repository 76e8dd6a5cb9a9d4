#!/bin/sh
# `pip install ./python` into a fresh virtual environment, as a new user would,
# then the package used from outside the repository: it must find the library
# and the stdlib it carries (no KJIT_LIBRARY, no KJIT_STDLIB, no `make
# install`), and pass python/tests as installed.  Run by `make test-python`.
#
#   python/install_check.sh BUILD_DIR [PYTHON]
#
# The environment sees the system's packages (--system-site-packages), so that
# NumPy and pytest come from there and nothing is downloaded; its own
# site-packages is empty until the install.  The wheel bundles the library
# already built in BUILD_DIR (the build backend reuses it).
set -eu
build=$(cd "$1" && pwd)
python=${2:-python3}
repo=$(cd "$(dirname "$0")/.." && pwd)
venv="$build/py-venv"
rm -rf "$venv"
"$python" -m venv --system-site-packages --without-pip "$venv"
unset KJIT_LIBRARY KJIT_STDLIB PYTHONPATH KJIT_PREFIX
cd "$repo"
"$venv/bin/python" -m pip install -q --no-cache-dir ./python
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
test -f "$site/kjit/lib/libkjit.so" || { echo "install_check: no kjit/lib/libkjit.so in $site"; exit 1; }
test -f "$site/kjit/stdlib/geo.kern" || { echo "install_check: no kjit/stdlib in $site"; exit 1; }
# Outside the repository: nothing there can be found by accident.
cd "$venv"
"$venv/bin/python" - "$site" <<'PY'
import os, sys
import numpy as np
import kjit
site = sys.argv[1]
assert kjit.__file__.startswith(site), kjit.__file__
assert kjit.library_path == os.path.join(site, "kjit", "lib", "libkjit.so"), kjit.library_path
# the bundled stdlib: `import math;` resolves inside the package
m = kjit.compile("import math;\n@vectorize\nfn rad(a: f64) -> f64 { return deg2rad(a); }\n",
                 target="cpu")
x = np.array([0.0, 90.0, 180.0])
assert np.allclose(m.rad(x), np.deg2rad(x)), m.rad(x)
print(f"install_check: kjit from {os.path.dirname(kjit.__file__)}, "
      f"library {kjit.library_path}, hot path: {kjit.hot_path}")
assert kjit.hot_path == "compiled", kjit.hot_path
PY
cd "$repo"
# the fake CUDA driver of tests/cuda_host, for test_fast.py's driver-call counts
KJIT_TEST_FAKE_CUDA="$build/libkjit-fakecuda.so" KJIT_TEST_INSTALLED=1 "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider python/tests
