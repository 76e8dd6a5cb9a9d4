#!/usr/bin/env bash
# How often a walk of one type check climbs back up the checker's stack of
# files (compiler/checker.h draws it): the front end is built with the
# checker's files instrumented (-finstrument-functions), checks FILE, and
# every call from one checker file to another is counted, and counted as a
# climb when it goes to a file higher in the stack.  One climb is by design:
# a call of a function not checked yet checks its body first
# (KjChecker.check_function).  Not part of make check; issue 24's measure.
#
#   tests/layers_climbs.sh FILE.kern...      (after make, for build/gen/lex.c)
set -eu
cd "$(dirname "$0")/.."
# top to bottom, as compiler/checker.h draws it; files on one line share a rank
ORDER="check.c
check_reduce.c check_guvectorize.c
check_expr.c
check_builtin.c
check_print.c check_exec.c
check_operator.c
check_scope.c
check_type.c"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/trace.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
static FILE *out;
static void *stack[1 << 16];
static int depth;
__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void *fn, void *site)
{
    if (!out)
        out = fopen(getenv("KJ_TRACE"), "w");
    if (depth < (1 << 16))
        fprintf(out, "%p %p\n", depth ? stack[depth - 1] : NULL, fn);
    stack[depth++] = fn;
}
__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void *fn, void *site)
{
    depth--;
}
C
objs=""
for f in compiler/*.c tests/robust/check_main.c; do
    o="$work/$(echo "$f" | tr / _).o"
    flags=""
    case "$(basename "$f")" in check.c | check_*.c) [ "$f" != tests/robust/check_main.c ] && flags=-finstrument-functions ;; esac
    cc -std=c11 -D_GNU_SOURCE -O0 -g $flags -Icompiler -Ibuild/gen -c "$f" -o "$o"
    objs="$objs $o"
done
cc -std=c11 -D_GNU_SOURCE -O0 -g -Icompiler -c build/gen/lex.c -o "$work/lex.o"
cc -O0 -g -c "$work/trace.c" -o "$work/trace.o"
cc -no-pie -o "$work/check" $objs "$work/lex.o" "$work/trace.o" -lm
for file in "$@"; do
    KJ_TRACE="$work/trace" "$work/check" "$file" 2>/dev/null || true
    python3 - "$work/check" "$work/trace" "$file" "$ORDER" <<'PY'
import os, subprocess, sys
binary, trace, name, order = sys.argv[1:5]
rank = {f: -i for i, line in enumerate(order.splitlines()) for f in line.split()}
pairs = [l.split() for l in open(trace)]
addrs = sorted({a for p in pairs for a in p if a != "(nil)"})
out = subprocess.run(["addr2line", "-f", "-e", binary] + addrs, capture_output=True, text=True).stdout.split("\n")
where = {a: (out[2 * i], os.path.basename(out[2 * i + 1].split(":")[0])) for i, a in enumerate(addrs)}
calls = cross = climbs = 0
seen = {}
for caller, callee in pairs:
    if caller == "(nil)":
        continue
    calls += 1
    (cf, cfile), (tf, tfile) = where[caller], where[callee]
    if cfile == tfile:
        continue
    cross += 1
    if rank.get(tfile, -99) > rank.get(cfile, -99):
        climbs += 1
        key = f"{cfile}:{cf} -> {tfile}:{tf}"
        seen[key] = seen.get(key, 0) + 1
print(f"{name}: {calls} calls in the checker, {cross} between its files, {climbs} climbing")
for key, n in sorted(seen.items(), key=lambda kv: -kv[1])[:5]:
    print(f"  {n:5d}  {key}")
PY
done
