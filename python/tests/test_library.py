"""kjit.load_library: a library that `kjit build --emit=lib` made (docs/aot.md)
gives the same Module as kjit.load, with the same results."""
import os
import subprocess
import sys

import numpy as np
import pytest

import kjit
from conftest import REPO, TARGETS, example

KJIT = os.path.join(REPO, "build", "kjit")
pytestmark = pytest.mark.skipif(not os.access(KJIT, os.X_OK), reason="skipped: build/kjit is not built")


@pytest.fixture(scope="module")
def libsin(tmp_path_factory):
    folder = tmp_path_factory.mktemp("aot")
    os.chmod(folder, 0o700)
    path = folder / "libsin.so"
    subprocess.run([KJIT, "build", example("sin.kern"), "--emit=lib", "-o", str(path)], check=True)
    return path


@pytest.mark.parametrize("target", TARGETS)
def test_library_matches_the_jit(libsin, target):
    x = np.linspace(-10, 10, 100_001)
    from_library = kjit.load_library(libsin, target=target).vsin(x)
    from_source = kjit.load(example("sin.kern"), target=target).vsin(x)
    assert from_library.dtype == np.float64
    assert np.array_equal(from_library.view(np.uint64), from_source.view(np.uint64))


def test_altered_library_is_refused(libsin, tmp_path):
    os.chmod(tmp_path, 0o700)
    data = bytearray(libsin.read_bytes())
    data[len(data) // 2] ^= 0xFF
    altered = tmp_path / "altered.so"
    altered.write_bytes(bytes(data))
    with pytest.raises(kjit.KjitError, match="truncated or altered"):
        kjit.load_library(altered, target="cpu")


RUNTIME = os.path.join(REPO, "build", "libkjit-rt.so")

# Run with only libkjit-rt: the library's vsin saved, what the process maps,
# and what kjit.load of a .kern says.
ON_RUNTIME = """
import sys, numpy as np, kjit
assert kjit._lib.RUNTIME_ONLY, kjit._lib.path
mapped = [line.split()[-1] for line in open("/proc/self/maps") if "libkjit" in line]
assert mapped and all(m.endswith("libkjit-rt.so") for m in mapped), mapped
np.save(sys.argv[2], kjit.load_library(sys.argv[1], target=sys.argv[3]).vsin(np.linspace(-10, 10, 100_001)))
try:
    kjit.load(sys.argv[4])
except kjit.KjitError as error:
    print(error)
"""


@pytest.mark.skipif(not os.path.exists(RUNTIME), reason="skipped: build/libkjit-rt.so is not built")
@pytest.mark.parametrize("target", ["cpu", "parallel"])
def test_runs_on_libkjit_rt_alone(libsin, tmp_path, target):
    """The package on libkjit-rt alone (KJIT_LIBRARY names it; no libkjit.so is
    loaded): load_library runs the library with the JIT's bits, and load of
    source says that it needs libkjit."""
    env = dict(os.environ, KJIT_LIBRARY=RUNTIME,
               PYTHONPATH=os.pathsep.join([os.path.join(REPO, "python"), os.environ.get("PYTHONPATH", "")]))
    saved = tmp_path / "vsin.npy"
    done = subprocess.run([sys.executable, "-c", ON_RUNTIME, str(libsin), str(saved), target,
                           example("sin.kern")], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "needs libkjit (the compiler)" in done.stdout and "kjit.load_library" in done.stdout
    from_source = kjit.load(example("sin.kern"), target=target).vsin(np.linspace(-10, 10, 100_001))
    assert np.array_equal(np.load(saved).view(np.uint64), from_source.view(np.uint64))
