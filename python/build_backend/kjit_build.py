"""A PEP 517 build backend for the kjit package that needs nothing installed.

The package is pure Python, so a wheel is a zip of kjit/*.py and its
metadata; writing it here keeps `pip install ./python` working offline, where
pip could not fetch setuptools (and Debian 12's Python may lack `wheel`).

KJIT_PREFIX, when set in the environment of the build (make install-python
sets it), is recorded in kjit/_install.py so the package finds
<prefix>/lib/libkjit.so.  build_editable gives `pip install -e ./python`.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "kjit"
TAG = "py3-none-any"


def _project():
    text = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    section = text.split("[project]", 1)[1]
    version = re.search(r'^version\s*=\s*"([^"]+)"', section, re.M).group(1)
    summary = re.search(r'^description\s*=\s*"([^"]+)"', section, re.M).group(1)
    python = re.search(r'^requires-python\s*=\s*"([^"]+)"', section, re.M).group(1)
    deps = re.findall(r'"([^"]+)"', re.search(r"^dependencies\s*=\s*\[([^\]]*)\]", section,
                                              re.M).group(1))
    return version, summary, python, deps


def _dist_info():
    return f"{NAME}-{_project()[0]}.dist-info"


def _metadata():
    version, summary, python, deps = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {version}",
             f"Summary: {summary}", f"Requires-Python: {python}"]
    lines += [f"Requires-Dist: {d}" for d in deps]
    lines += ["Provides-Extra: test", 'Requires-Dist: pytest; extra == "test"']
    readme = os.path.join(ROOT, "README.md")
    if os.path.exists(readme):
        lines += ["Description-Content-Type: text/markdown", "",
                  open(readme, encoding="utf-8").read()]
    return "\n".join(lines) + "\n"


def _wheel_file():
    return f"Wheel-Version: 1.0\nGenerator: kjit_build\nRoot-Is-Purelib: true\nTag: {TAG}\n"


def _package_files():
    package = os.path.join(ROOT, NAME)
    for name in sorted(os.listdir(package)):
        if name.endswith(".py") and name != "_install.py":
            with open(os.path.join(package, name), "rb") as f:
                yield f"{NAME}/{name}", f.read()
    prefix = os.environ.get("KJIT_PREFIX")
    if prefix:
        yield f"{NAME}/_install.py", (
            '"""Written by the build: the prefix `make install` put libkjit.so under."""\n'
            f"PREFIX = {os.path.abspath(prefix)!r}\n").encode()


def _write_wheel(wheel_directory, files):
    version = _project()[0]
    dist_info = _dist_info()
    files = list(files) + [(f"{dist_info}/METADATA", _metadata().encode()),
                           (f"{dist_info}/WHEEL", _wheel_file().encode())]
    record = []
    name = f"{NAME}-{version}-{TAG}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w",
                         zipfile.ZIP_DEFLATED) as wheel:
        for path, data in files:
            wheel.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{path},sha256={digest.decode()},{len(data)}")
        record.append(f"{dist_info}/RECORD,,")
        wheel.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return name


# ------------------------------------------------------------- PEP 517 hooks

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist_info = os.path.join(metadata_directory, _dist_info())
    os.makedirs(dist_info, exist_ok=True)
    with open(os.path.join(dist_info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(dist_info, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_file())
    return _dist_info()


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth line puts this source folder on sys.path: edits show at once, and
    # the package still finds the repository's build/libkjit.so.
    return _write_wheel(wheel_directory, [(f"__editable__.{NAME}.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    version = _project()[0]
    base = f"{NAME}-{version}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as sdist:
        for folder in (NAME, "build_backend", "tests"):
            sdist.add(os.path.join(ROOT, folder), f"{base}/{folder}",
                      filter=lambda info: None if "__pycache__" in info.name else info)
        for file in ("pyproject.toml", "README.md"):
            sdist.add(os.path.join(ROOT, file), f"{base}/{file}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        sdist.addfile(info, io.BytesIO(data))
    return name
