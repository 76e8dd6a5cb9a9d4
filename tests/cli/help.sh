#!/bin/sh
# help.sh: every subcommand that `kjit --help` lists answers --help (and -h)
# with exit 0 and its own usage on standard output, "usage: kjit COMMAND".
. "$(dirname "$0")/lib.sh"

"$kjit" --help >"$tmp/top" 2>"$tmp/err" || bad "kjit --help exits non-zero"
# the command names: the first word of each indented line under "commands:"
commands=$(sed -n '/^commands:/,$p' "$tmp/top" | sed -n 's/^  \([a-z][a-z]*\) .*/\1/p')
[ -n "$commands" ] || bad "kjit --help lists no commands"
for required in check build run bench info cache version; do
    echo "$commands" | grep -qx "$required" || bad "kjit --help does not list '$required'"
done
for c in $commands; do
    for flag in --help -h; do
        if "$kjit" "$c" "$flag" >"$tmp/out" 2>"$tmp/err"; then
            if head -1 "$tmp/out" | grep -q "^usage: kjit $c"; then ok
            else bad "kjit $c $flag: first line is not 'usage: kjit $c'"; fi
        else
            bad "kjit $c $flag exits $?"
        fi
    done
done
finish
