"""A PEP 517 build backend for the kjit package that needs nothing installed.

It writes the wheel itself (a zip of kjit/*.py, the files below and the
metadata), so `pip install ./python` works offline, where pip could not fetch
setuptools (and Debian 12's Python may lack `wheel`).  What goes in:

- libkjit.so and the .kern standard library, inside the package (kjit/lib/,
  kjit/stdlib/), so that a fresh virtual environment works alone.  In the
  repository the library is the one `make` built (build/libkjit.so, reused
  when present, else made here with the project's Makefile), stripped of its
  debug information.  Outside it (an unpacked sdist) an installed library is
  recorded instead.  KJIT_PREFIX (set by `make install-python`) records
  <prefix>/lib/libkjit.so in kjit/_install.py and bundles nothing.
- kjit/_fast*.so, the compiled hot path (kjit/_fast.c, CPython and NumPy C
  API), built with the C compiler Python was built with.  When it cannot be
  built (no compiler, no Python or NumPy headers, KJIT_NO_EXTENSION=1) the
  wheel has none and the package runs its pure Python path; the reason is
  printed.

build_editable gives `pip install -e ./python` (the source folder on
sys.path; nothing compiled or bundled).
"""
import base64
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(ROOT)
NAME = "kjit"
PURE_TAG = "py3-none-any"


def _in_repository():
    return all(os.path.exists(os.path.join(REPO, p))
               for p in ("Makefile", "runtime/kjit.h", "stdlib"))


def _platform_tag():
    impl = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{impl}-{impl}-{platform}"


def _log(text):
    print(f"kjit build: {text}", file=sys.stderr, flush=True)


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


def _wheel_file(tag=PURE_TAG):
    pure = "true" if tag == PURE_TAG else "false"
    return f"Wheel-Version: 1.0\nGenerator: kjit_build\nRoot-Is-Purelib: {pure}\nTag: {tag}\n"


def _package_files(work):
    """(path in the wheel, bytes) of everything installed; `work` is a
    scratch folder.  The second value says whether the files are
    platform-specific (a compiled file among them)."""
    files, binary = [], False
    package = os.path.join(ROOT, NAME)
    for name in sorted(os.listdir(package)):
        if (name.endswith((".py", ".pyi", ".c")) or name == "py.typed") and \
                name != "_install.py":
            with open(os.path.join(package, name), "rb") as f:
                files.append((f"{NAME}/{name}", f.read()))
    prefix = os.environ.get("KJIT_PREFIX")
    if prefix:
        files.append((f"{NAME}/_install.py", (
            '"""Written by the build: the prefix `make install` put libkjit.so under."""\n'
            f"PREFIX = {os.path.abspath(prefix)!r}\n").encode()))
    elif _in_repository():
        files += _bundled_library(work)
        binary = True
    else:
        installed = _installed_prefix()
        if installed is None:
            raise RuntimeError("kjit build: no libkjit.so to bundle or find: build the package "
                               "from the kjit repository (python/), or `make install` kjit "
                               "first (or set KJIT_PREFIX to where it is installed)")
        _log(f"using the installed {installed}/lib/libkjit.so")
        files.append((f"{NAME}/_install.py", (
            '"""Written by the build: the prefix libkjit.so was found under."""\n'
            f"PREFIX = {installed!r}\n").encode()))
    extension = _build_extension(work)
    if extension:
        files.append(extension)
        binary = True
    return files, binary


def _installed_prefix():
    for prefix in (sys.prefix, "/usr/local", "/usr"):
        if os.path.exists(os.path.join(prefix, "lib", "libkjit.so")):
            return prefix
    return None


def _bundled_library(work):
    """kjit/lib/libkjit.so (without debug information) and kjit/stdlib/*.kern,
    from the repository: build/libkjit.so when it is there, else made with
    the project's Makefile."""
    library = os.path.join(REPO, "build", "libkjit.so")
    if os.path.exists(library):
        _log(f"bundling {library} (already built; run `make` first to rebuild it)")
    else:
        _log(f"building libkjit.so: make -C {REPO} build/libkjit.so")
        jobs = str(max(1, min(os.cpu_count() or 1, 8)))
        done = subprocess.run(["make", "-C", REPO, "-j", jobs, "build/libkjit.so"],
                              stdout=sys.stderr)
        if done.returncode != 0 or not os.path.exists(library):
            raise RuntimeError(f"kjit build: `make -C {REPO} build/libkjit.so` failed "
                               f"(exit {done.returncode}); see its output above")
    stripped = os.path.join(work, "libkjit.so")
    try:
        subprocess.run(["strip", "--strip-debug", "-o", stripped, library], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except (OSError, subprocess.CalledProcessError):
        shutil.copyfile(library, stripped)
    files = []
    with open(stripped, "rb") as f:
        files.append((f"{NAME}/lib/libkjit.so", f.read()))
    stdlib = os.path.join(REPO, "stdlib")
    for name in sorted(os.listdir(stdlib)):
        if name.endswith(".kern"):
            with open(os.path.join(stdlib, name), "rb") as f:
                files.append((f"{NAME}/stdlib/{name}", f.read()))
    return files


def _numpy_include():
    """NumPy's C headers: from this interpreter, or (pip builds in an isolated
    environment that hides the target's packages) from the same interpreter
    run without that isolation (-I ignores PYTHONPATH, which carries it)."""
    try:
        import numpy
        return numpy.get_include()
    except ImportError:
        pass
    try:
        done = subprocess.run([sys.executable, "-I", "-c",
                               "import numpy; print(numpy.get_include())"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    path = done.stdout.strip()
    return path if done.returncode == 0 and os.path.isdir(path) else None


def _kjit_header():
    for folder in (os.path.join(REPO, "runtime"), os.path.join(ROOT, NAME),
                   os.path.join(sys.prefix, "include"), "/usr/local/include", "/usr/include"):
        if os.path.exists(os.path.join(folder, "kjit.h")):
            return folder
    return None


def _build_extension(work):
    """(wheel path, bytes) of the compiled kjit/_fast, or None (why, printed)."""
    source = os.path.join(ROOT, NAME, "_fast.c")
    if not os.path.exists(source):
        return None
    if os.environ.get("KJIT_NO_EXTENSION"):
        _log("KJIT_NO_EXTENSION is set: no compiled hot path (pure Python calls)")
        return None
    numpy_include, kjit_include = _numpy_include(), _kjit_header()
    python_include = sysconfig.get_paths().get("include")
    missing = [what for what, path in (("NumPy's C headers", numpy_include),
                                       ("kjit.h", kjit_include)) if not path]
    if not python_include or not os.path.exists(os.path.join(python_include, "Python.h")):
        missing.append("Python.h (the Python development headers)")
    if missing:
        _log(f"no compiled hot path (pure Python calls): {', '.join(missing)} not found")
        return None
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = os.path.join(work, "_fast" + suffix)
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    command = cc + ["-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Wextra",
                    "-Wno-unused-parameter", "-Wno-missing-field-initializers",
                    f"-I{python_include}", f"-I{numpy_include}", f"-I{kjit_include}",
                    source, "-o", target]
    try:
        done = subprocess.run(command, capture_output=True, text=True)
    except OSError as error:
        _log(f"no compiled hot path (pure Python calls): {cc[0]}: {error}")
        return None
    if done.returncode != 0:
        _log("no compiled hot path (pure Python calls): the compiler failed:\n" +
             done.stderr[-4000:])
        return None
    with open(target, "rb") as f:
        return f"{NAME}/_fast{suffix}", f.read()


def _write_wheel(wheel_directory, files, tag=PURE_TAG):
    version = _project()[0]
    dist_info = _dist_info()
    files = list(files) + [(f"{dist_info}/METADATA", _metadata().encode()),
                           (f"{dist_info}/WHEEL", _wheel_file(tag).encode())]
    record = []
    name = f"{NAME}-{version}-{tag}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w",
                         zipfile.ZIP_DEFLATED) as wheel:
        for path, data in files:
            # the library is large: the fastest compression keeps installs quick
            wheel.writestr(path, data, compresslevel=1 if len(data) > (1 << 20) else None)
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
    with tempfile.TemporaryDirectory(prefix="kjit-build-") as work:
        files, binary = _package_files(work)
        return _write_wheel(wheel_directory, files, _platform_tag() if binary else PURE_TAG)


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
