"""Shared set-up of the Python tests: the package from this source tree (not an
installed copy), the repository's build/libkjit.so unless KJIT_LIBRARY says
otherwise, fresh random inputs, and the GPU skip with its visible reason.

With KJIT_TEST_INSTALLED=1 (python/install_check.sh) the tests run the
installed package instead, with the library and stdlib it carries, and
refuse to run the source tree's by mistake."""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
INSTALLED = bool(os.environ.get("KJIT_TEST_INSTALLED"))
if not INSTALLED:
    sys.path.insert(0, os.path.join(REPO, "python"))
    os.environ.setdefault("KJIT_LIBRARY", os.path.join(REPO, "build", "libkjit.so"))

import kjit  # noqa: E402

if INSTALLED:
    _package = os.path.dirname(os.path.abspath(kjit.__file__))
    assert not _package.startswith(os.path.join(REPO, "python")), \
        f"KJIT_TEST_INSTALLED: kjit was imported from the source tree ({_package})"
    assert kjit.library_path == os.path.join(_package, "lib", "libkjit.so"), \
        f"KJIT_TEST_INSTALLED: the library is {kjit.library_path}, not the package's own"

EXAMPLES = os.path.join(REPO, "examples")
_reason = kjit.cuda_reason()
if _reason is not None and not _reason.startswith("no CUDA driver"):
    _reason = f"no CUDA driver ({_reason})"
NO_GPU_REASON = None if _reason is None else f"skipped: {_reason}"
requires_gpu = pytest.mark.skipif(NO_GPU_REASON is not None, reason=NO_GPU_REASON or "")


def example(name):
    return os.path.join(EXAMPLES, name)


@pytest.fixture
def rng():
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"random seed {seed}")
    return np.random.default_rng(seed)


# cpu and parallel run everywhere; cuda joins where a GPU is usable.
CPU_TARGETS = ["cpu", "parallel"]
ALL_TARGETS = CPU_TARGETS + ["cuda"]


def target_param(target):
    if target == "cuda":
        return pytest.param(target, marks=requires_gpu)
    return target


TARGETS = [target_param(t) for t in ALL_TARGETS]
