#!/usr/bin/env bash
# Dumps every stage the compiler prints for every .kern under examples/,
# tests/golden/, tests/bench/ and stdlib/ into one folder, so that a change
# meant to move code without changing what it does (issue 24, the layers) can
# be checked with `diff -r` against the folder the unchanged tree wrote:
#
#   tests/layers_output.sh build/kjit OUT_DIR
#
# For each file: the typed IR and the IR after the middle passes (plain and
# split for one block shape), the LLVM IR for cpu (general, scalar and for
# that block shape) and for cuda, and the PTX for sm_90.  Each dump
# keeps the command's exit status and its errors, so a file that does not
# compile is compared by its message.  The host's CPU decides the cpu code's
# features: compare dumps from one machine only.
set -u
kjit=$(realpath "${1:?usage: layers_output.sh KJIT OUT_DIR}")
out=${2:?usage: layers_output.sh KJIT OUT_DIR}
cd "$(dirname "$0")/.."
mkdir -p "$out"
out=$(realpath "$out")
export KJIT_CACHE_DIR="$out/.cache"
unset KJIT_CHECK KJIT_CPU_SIMD KJIT_CPU_SPECIALISE KJIT_VERIFY
# one stdlib folder whichever kjit runs (its default is beside the binary,
# and a missing import's message names it)
export KJIT_STDLIB="$PWD/stdlib"

dump() { # name command...
    local name=$1
    shift
    "$@" >"$dir/$name" 2>"$dir/$name.err"
    echo "exit $?" >>"$dir/$name.err"
}

for file in examples/*.kern stdlib/*.kern tests/bench/*.kern $(find tests/golden -name '*.kern' | sort); do
    dir="$out/${file%.kern}"
    mkdir -p "$dir"
    dump ir "$kjit" check --dump=ir "$file"
    dump vec "$kjit" check --dump=vec "$file"
    dump vec.block "$kjit" check --dump=vec --block=64,2 "$file"
    dump cpu.ll "$kjit" build "$file" --emit=llvm --target cpu
    dump cpu.scalar.ll env KJIT_CPU_SIMD=0 "$kjit" build "$file" --emit=llvm --target cpu
    dump cpu.block.ll "$kjit" build "$file" --emit=llvm --target cpu --block 64,2
    dump cuda.ll "$kjit" build "$file" --emit=llvm --target cuda --arch sm_90
    dump cuda.ptx "$kjit" build "$file" --target cuda --emit=ptx --arch sm_90
done
rm -rf "$out/.cache"
echo "layers_output: $(find "$out" -type f | wc -l) files in $out"
