#!/usr/bin/env bash
# libkjit-rt links no LLVM and no compiler object (docs/aot.md):
#   - ldd: it needs no LLVM, no libstdc++ and no libkjit;
#   - nm: it defines and uses no LLVM symbol, and none of the global symbols
#     that the compiler's objects define (compiler/, compiler/backend/, the
#     lexer), but for the support libkjit-rt shares with them by design
#     (util.c, types.c, diag.c, half_bits.c, local_size.c, reduce_lanes.c: the Makefile's
#     RT_SUPPORT_OBJS).
# Usage: tests/aot/rt_link.sh [build folder] [library]
set -u
BUILD=${1:-build}
LIB=${2:-$BUILD/libkjit-rt.so}
fail=0
[ -f "$LIB" ] || { echo "rt_link: $LIB is missing (make $LIB)"; exit 1; }

deps=$(ldd "$LIB" 2>&1)
if grep -Eiq 'llvm|stdc\+\+|libkjit\.so' <<<"$deps"; then
    echo "rt_link: $LIB needs a library of the compiler:"; grep -Ei 'llvm|stdc\+\+|libkjit\.so' <<<"$deps"
    fail=1
fi

all=$(nm "$LIB" | awk '{print $NF}')
llvm=$(grep -Ec '(^|_)(LLVM|_ZN4llvm)' <<<"$all")
if [ "$llvm" != 0 ]; then
    echo "rt_link: $LIB names $llvm LLVM symbols, e.g.:"; grep -E '(^|_)(LLVM|_ZN4llvm)' <<<"$all" | head -5
    fail=1
fi

support="util types diag half_bits local_size reduce_lanes"
compiler_syms=$(for o in "$BUILD"/obj/compiler/*.o "$BUILD"/obj/compiler/backend/*.o "$BUILD"/obj/gen/lex.o; do
    base=$(basename "$o" .o)
    [[ " $support " == *" $base "* ]] && [[ "$o" != */backend/* ]] && continue
    nm -g --defined-only "$o" | awk '{print $3}'
done | sort -u)
count=$(wc -l <<<"$compiler_syms")
if [ "$count" -lt 100 ]; then
    echo "rt_link: only $count compiler symbols found under $BUILD/obj: build first"; exit 1
fi
found=$(comm -12 <(sort -u <<<"$all") <(echo "$compiler_syms"))
if [ -n "$found" ]; then
    echo "rt_link: $LIB defines or uses $(wc -l <<<"$found") symbols of the compiler's objects, e.g.:"
    head -8 <<<"$found"
    fail=1
fi
if [ "$fail" = 0 ]; then
    tmp=$(mktemp); strip -o "$tmp" "$LIB" && size=$(stat -c %s "$tmp"); rm -f "$tmp"
    echo "rt_link: $LIB has no LLVM and none of the compiler's $count symbols ($size bytes stripped)"
fi
exit $fail
