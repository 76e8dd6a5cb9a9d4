"""The type stubs (kjit/__init__.pyi, with py.typed): their names are the
package's public names, every class's public members exist at run time, and
where mypy is installed, its stubtest finds the stubs agree with the running
package and mypy type-checks user code with them (both on the installed
package, which is what a user's mypy reads: python/install_check.sh)."""
import ast
import os
import subprocess
import sys

import pytest

import kjit
from conftest import HERE, INSTALLED

PACKAGE = os.path.dirname(os.path.abspath(kjit.__file__))
STUB = os.path.join(PACKAGE, "__init__.pyi")


def stub_tree():
    with open(STUB, encoding="utf-8") as f:
        return ast.parse(f.read(), STUB)


def public(name):
    return not name.startswith("_")


def test_the_package_ships_its_stubs():
    assert os.path.isfile(STUB), STUB
    assert os.path.isfile(os.path.join(PACKAGE, "py.typed")), "no py.typed beside the stubs"


def test_stub_names_are_the_public_names():
    names = {}
    for node in stub_tree().body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
    stubbed = {n for n in names if public(n)}
    exported = set(kjit.__all__)
    assert exported - stubbed == set(), f"in kjit.__all__ but not in the stubs: {exported - stubbed}"
    assert stubbed - exported == set(), f"in the stubs but not in kjit.__all__: {stubbed - exported}"
    for name in sorted(stubbed):
        assert hasattr(kjit, name), f"the stubs name kjit.{name}, which the package lacks"
    # each stubbed class's public members exist at run time (on the class,
    # or as an instance attribute its __init__ sets: those the stub declares
    # as plain annotations)
    for name, node in names.items():
        if not isinstance(node, ast.ClassDef) or not public(name):
            continue
        runtime = getattr(kjit, name)
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and public(item.name):
                assert hasattr(runtime, item.name), f"kjit.{name}.{item.name} is not there"


def run_mypy(args, cwd):
    env = dict(os.environ, MYPY_CACHE_DIR=os.path.join(cwd, ".mypy-cache-kjit"))
    return subprocess.run([sys.executable, "-m"] + args, cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)




@pytest.mark.skipif(not INSTALLED, reason="skipped: stubtest checks the installed package "
                                          "(python/install_check.sh runs it)")
def test_stubtest(tmp_path):
    pytest.importorskip("mypy.stubtest", reason="skipped: mypy is not installed")
    done = run_mypy(["mypy.stubtest", "kjit", "--mypy-config-file",
                     os.path.join(HERE, "stubtest.ini"), "--allowlist",
                     os.path.join(HERE, "stubtest_allow.txt"), "--ignore-unused-allowlist"],
                    str(tmp_path))
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


USER_CODE = '''
import numpy as np
import kjit
m = kjit.load("add.kern", target="cpu")
x: kjit.DeviceArray = kjit.to_device(np.ones(3)).reshape(3, 1).fill(2.0)
u: np.ufunc = m.add.ufunc
c: kjit.Context = kjit.context("cpu")
host: np.ndarray = x.copy_to_host()
try:
    kjit.compile("fn f() {}", target="cpu")
except kjit.CompileError as e:
    status: str = e.status
wrong: str = kjit.device_count()
'''


@pytest.mark.skipif(not INSTALLED, reason="skipped: mypy reads the installed package's "
                                          "stubs (python/install_check.sh runs it)")
def test_mypy_reads_the_stubs(tmp_path):
    pytest.importorskip("mypy", reason="skipped: mypy is not installed")
    (tmp_path / "user.py").write_text(USER_CODE)
    done = run_mypy(["mypy", "--no-error-summary", "--config-file",
                     os.path.join(HERE, "stubtest.ini"), "user.py"], str(tmp_path))
    lines = [l for l in done.stdout.splitlines() if ": error:" in l]
    # exactly the one wrong line: the others type-check against the stubs
    assert len(lines) == 1 and "user.py:13:" in lines[0] and "int" in lines[0], done.stdout
