# tests/gpu/bundle.sh: what the scripts that run from the GPU bundle share
# (tests/gpu/run.sh, tests/gpu/bench_cpu_host.sh, tests/bench/bench_gpu.sh);
# sourced, from the bundle's root.

# bin/libkjit.so from the bin/libkjit.so.xz the bundle carries, unless it is
# there already; fails when it cannot.
unpack_libkjit() {
    [ -f bin/libkjit.so ] ||
        python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
            bin/libkjit.so.xz bin/libkjit.so
}

# numba_pythonpath DIR: prints the PYTHONPATH under which Numba finds a NumPy
# it can import: $KJIT_NUMBA_WHEELS (a folder of wheels), when set, installed
# into DIR and put in front of $PYTHONPATH; else $PYTHONPATH as it is.
numba_pythonpath() {
    local path=${PYTHONPATH:-}
    if [ -n "${KJIT_NUMBA_WHEELS:-}" ]; then
        python3 -m pip install -q --no-index --no-deps --no-compile --target "$1" \
            "$KJIT_NUMBA_WHEELS"/*.whl >&2 && path=$1${path:+:$path}
    fi
    echo "$path"
}
