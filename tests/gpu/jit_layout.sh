#!/usr/bin/env bash
# tests/gpu/jit_layout.sh [BUNDLE [LIBDIR]]: whether code with line tables
# gets its constants within 2 GiB of its code while a cuda context is open
# (tests/gpu/jit_layout.c says why that matters), on the GPU machine.
#
# Builds the probe with gcc against the bundle's libkjit.so and runs it over
# $JIT_LAYOUT_OBJECTS objects (default 400); with LIBDIR (a folder holding another build's libkjit.so, say
# one made before cpu_jit.c linked each object into one reservation) it runs
# the same probe against that library too, for comparison.  Exits non-zero
# when the bundle's library put some object's constants far from its code.
set -u
other=${2:-}
[ -z "$other" ] || other=$(cd "$other" && pwd) || exit 1
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
export KJIT_CACHE=off
objects=${JIT_LAYOUT_OBJECTS:-400}

gcc -std=c11 -D_GNU_SOURCE -O2 -o "$work/jit_layout" \
    "$root/tests/gpu/jit_layout.c" -L"$root/bin" -lkjit || {
    echo "jit_layout.sh: the probe does not build here"
    exit 1
}
if [ -n "$other" ]; then
    echo "--- $other/libkjit.so"
    LD_LIBRARY_PATH=$other "$work/jit_layout" "$objects"
fi
echo "--- $root/bin/libkjit.so"
LD_LIBRARY_PATH=$root/bin "$work/jit_layout" "$objects"
