#!/usr/bin/env bash
# The layers rule (docs/architecture.md): a folder includes only from itself and
# the folders below it, in this order:
#
#   compiler/          the front end and the IR passes
#   compiler/backend/  LLVM lowering and emission, the ABI of compiled code
#   runtime/           libkjit, behind kjit.h
#   compiler/cli/      the kjit command, which sees only kjit.h and kjit_tools.h
#
# and only compiler/backend/ includes LLVM.  Every quoted #include of every
# source and header is resolved from the including file's folder; one that
# crosses the rule is printed with its line, and the check fails.
set -u
cd "$(dirname "$0")/.."

layer_of() {
    case "$1" in
    compiler/cli/*) echo 3 ;;
    runtime/*) echo 2 ;;
    compiler/backend/*) echo 1 ;;
    compiler/*) echo 0 ;;
    *) echo -1 ;;
    esac
}

bad=0 checked=0
for file in compiler/*.[ch] compiler/backend/*.[ch] runtime/*.[ch] compiler/cli/*.[ch]; do
    dir=$(dirname "$file")
    from=$(layer_of "$file")
    while IFS=: read -r line text; do
        checked=$((checked + 1))
        name=$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' <<<"$text")
        if [ -z "$name" ]; then
            if [[ "$text" == *"<llvm-c/"* && "$from" != 1 ]]; then
                echo "$file:$line: LLVM outside compiler/backend/: $text"
                bad=$((bad + 1))
            fi
            continue
        fi
        target=$(realpath -m --relative-to=. "$dir/$name")
        if [ ! -e "$target" ]; then
            echo "$file:$line: includes $name, which is not at $target"
            bad=$((bad + 1))
            continue
        fi
        to=$(layer_of "$target")
        if [ "$to" -lt 0 ] || [ "$to" -gt "$from" ]; then
            echo "$file:$line: includes $target, a layer above it"
            bad=$((bad + 1))
        elif [ "$from" = 3 ] && [ "$to" != 3 ] &&
             [ "$target" != runtime/kjit.h ] && [ "$target" != runtime/kjit_tools.h ]; then
            echo "$file:$line: the command line includes $target (only kjit.h and kjit_tools.h)"
            bad=$((bad + 1))
        fi
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include' "$file")
done
echo "layers: $((checked - bad)) passed, $bad failed"
[ "$bad" = 0 ]
