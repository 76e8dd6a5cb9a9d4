"""kjit.load_library: a library that `kjit build --emit=lib` made (docs/aot.md)
gives the same Module as kjit.load, with the same results."""
import os
import subprocess

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
