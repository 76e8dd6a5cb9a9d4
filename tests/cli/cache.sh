#!/bin/bash
# cache.sh: the compiled-code cache as a user meets it (issue 23, items 1
# and 10; run by `make test-cli`).
#
# `kjit run` with a cache folder another user owns (played with chown when
# root), or one writable by others, still runs and gives the right result,
# warns once on stderr and writes nothing there; a FIFO planted under an
# entry's name does not hang it (timeout); an entry with one byte changed is
# refused and replaced; a second run hits the cache.  `kjit cache clear`
# removes only the entries kjit wrote and says how many; KJIT_CACHE_MAX=1e30,
# inf or garbage is a warning and the default limit.  Run from the repository
# root:
#
#   tests/cli/cache.sh build/kjit
. "$(dirname "$0")/lib.sh"

cat >"$tmp/add.kern" <<'EOF2'
@vectorize
fn add(a: f64, b: f64) -> f64 {
    return a + b;
}
EOF2

# run DIR: kjit run add 1 2 with KJIT_CACHE_DIR=DIR (20 s at most); output in
# $tmp/out and $tmp/err; fails unless it exits 0 with the result 3.
run() {
    KJIT_CACHE_DIR=$1 timeout 20 "$kjit" run "$tmp/add.kern" add 1 2 >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" != 0 ] || ! grep -q '^result: f64 3$' "$tmp/out"; then
        bad "kjit run with the cache in $1 exited $rc (124: it hung)"
        return 1
    fi
    return 0
}

# warned PATTERN DESCRIPTION: $tmp/err holds the warning.
warned() {
    if grep -Eq "kjit: warning: .*$1" "$tmp/err"; then ok; else bad "$2: no warning matching /$1/"; fi
}

entries() { find "$1" -maxdepth 1 -name '*.kjc' -type f | wc -l; }

# A normal folder: made 0700, then hit.
dir=$tmp/cache
run "$dir" && ok
[ "$(stat -c %a "$dir")" = 700 ] && ok || bad "the cache folder was made mode $(stat -c %a "$dir"), not 700"
[ "$(entries "$dir")" = 1 ] && ok || bad "one entry after the first run: $(entries "$dir")"
before=$(stat -c %Y "$dir"/*.kjc)
run "$dir" && ok
[ -s "$tmp/err" ] && bad "a normal run printed on stderr" || ok
[ "$(entries "$dir")" = 1 ] && ok || bad "still one entry after the second run"

# KJIT_CPU_FEATURES is part of the key: a process restricted to SSE lanes
# compiles its own code, never runs the entry made for the host's AVX-512 or
# AVX2 (the host's feature list alone is the same in both processes).
if grep -qw avx /proc/cpuinfo 2>/dev/null; then
    host_entry=$(ls "$dir"/*.kjc)
    KJIT_CPU_FEATURES=-avx run "$dir" && ok
    [ "$(entries "$dir")" = 2 ] && ok || bad "KJIT_CPU_FEATURES=-avx hit the host's entry: $(entries "$dir") entries"
    KJIT_CPU_FEATURES=-avx run "$dir" && ok
    [ "$(entries "$dir")" = 2 ] && ok || bad "a second run with -avx did not hit its own entry"
    for e in "$dir"/*.kjc; do [ "$e" = "$host_entry" ] || rm "$e"; done
else
    echo "cache.sh: no AVX on this host: KJIT_CPU_FEATURES in the key not tested"
fi

# Writable by others: refused, once per process, nothing written there.
shared=$tmp/shared
mkdir -m 777 "$shared"
chmod 777 "$shared"
run "$shared" && ok
warned "cache folder $shared is not used: it is writable by its group or by others" "a 0777 folder"
[ "$(grep -c 'kjit: warning' "$tmp/err")" = 1 ] && ok || bad "the warning was given more than once"
[ "$(entries "$shared")" = 0 ] && ok || bad "an entry was written to a 0777 folder"

# Another user's folder, a planted entry in it: root plays that user.
if [ "$(id -u)" = 0 ]; then
    theirs=$tmp/theirs
    run "$theirs" && ok
    chown -R 12345:12345 "$theirs"
    run "$theirs" && ok
    warned "cache folder $theirs is not used: it is owned by uid 12345, not by you" "another user's folder"
else
    echo "cache.sh: not root: another user's folder skipped"
fi

# A FIFO under an entry's name: refused without hanging, then replaced.
entry=$(ls "$dir"/*.kjc)
rm "$entry"
mkfifo "$entry"
run "$dir" && ok
warned "is not used: it is a FIFO" "a FIFO entry"
[ -f "$entry" ] && [ ! -p "$entry" ] && ok || bad "the FIFO was not replaced by an entry"

# One byte of the payload changed: the MAC refuses it.
printf 'X' | dd of="$entry" bs=1 seek=$(($(stat -c %s "$entry") - 50)) conv=notrunc status=none
run "$dir" && ok
warned "its MAC does not match" "a changed entry"
run "$dir" && ok
[ -s "$tmp/err" ] && bad "the replaced entry was not used quietly" || ok

# clear: kjit's entries only, counted.
echo "my notes" >"$dir/notes.kjc"
echo "not KJITCACH" >"$dir/0123456789abcdef0123456789abcdef-cpu-object.kjc"
echo "keep me" >"$dir/thesis.tex"
KJIT_CACHE_DIR=$dir "$kjit" cache clear >"$tmp/out" 2>"$tmp/err"
if grep -q "^removed 1 cache entry from $dir\$" "$tmp/out"; then ok; else bad "kjit cache clear: $(cat "$tmp/out")"; fi
for f in notes.kjc 0123456789abcdef0123456789abcdef-cpu-object.kjc thesis.tex; do
    [ -f "$dir/$f" ] && ok || bad "kjit cache clear removed $f, which kjit did not write"
done
[ "$(entries "$dir")" = 2 ] && ok || bad "kjit cache clear left $(entries "$dir") .kjc files, not 2"
KJIT_CACHE_DIR=$dir "$kjit" cache clear >"$tmp/out" 2>&1
grep -q "^removed 0 cache entries from $dir\$" "$tmp/out" && ok || bad "a second clear: $(cat "$tmp/out")"

# KJIT_CACHE_MAX that is not a size: a warning and the default limit.
for value in 1e30 inf nan lots -5 0x10; do
    KJIT_CACHE_DIR=$dir KJIT_CACHE_MAX=$value "$kjit" cache stats >"$tmp/out" 2>"$tmp/err"
    grep -q "^limit:    1.00 GiB" "$tmp/out" && ok || bad "KJIT_CACHE_MAX=$value: $(grep limit "$tmp/out")"
    warned "KJIT_CACHE_MAX='$value' is not a size" "KJIT_CACHE_MAX=$value"
    # (a run that stores an entry, the one time the limit is used)
    KJIT_CACHE_MAX=$value run "$tmp/max-$value" && ok
    warned "KJIT_CACHE_MAX='$value' is not a size" "kjit run with KJIT_CACHE_MAX=$value"
    [ "$(entries "$tmp/max-$value")" = 1 ] && ok || bad "KJIT_CACHE_MAX=$value evicted the entry"
done
KJIT_CACHE_DIR=$dir KJIT_CACHE_MAX=2G "$kjit" cache stats >"$tmp/out" 2>"$tmp/err"
grep -q "^limit:    2.00 GiB" "$tmp/out" && [ ! -s "$tmp/err" ] && ok || bad "KJIT_CACHE_MAX=2G"

finish
