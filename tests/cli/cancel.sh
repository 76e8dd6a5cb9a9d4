#!/bin/sh
# cancel.sh: stopping `kjit run` (run by `make test-cli`): a kernel that
# never ends is stopped by --time-limit (exit 1, a message naming the limit)
# and by Ctrl-C (SIGINT: exit 130, a message saying it was interrupted),
# on the cpu targets, soon; the same kernel with a reachable stop runs to
# the end under a time limit; --time-limit takes only positive seconds.
#
#   tests/cli/cancel.sh build/kjit
. "$(dirname "$0")/lib.sh"

cat >"$tmp/spin.kern" <<'KERN'
@kernel
fn spin(out: i32[], stop: i32) {
    let i = blockIdx.x * blockDim.x + threadIdx.x;
    let k = i % 7;
    while k != stop {
        k = (k + 1) % 1000;
    }
    out[i] = k;
}
KERN

now_ms() { date +%s%3N; }

for target in cpu parallel; do
    start=$(now_ms)
    "$kjit" run "$tmp/spin.kern" spin zeros:i32:256 -1 --grid 4 --block 64 --target $target \
        --time-limit 0.3 >"$tmp/out" 2>"$tmp/err"
    code=$? took=$(( $(now_ms) - start ))
    if [ $code = 1 ] && grep -q 'spin: stopped: it ran past the time limit of 0.3 s' "$tmp/err" &&
        [ $took -lt 10000 ]; then ok
    else bad "$target: --time-limit 0.3 on an endless kernel: exit $code after $took ms"; fi

    "$kjit" run "$tmp/spin.kern" spin zeros:i32:256 500 --grid 4 --block 64 --target $target \
        --time-limit 30 >"$tmp/out" 2>"$tmp/err"
    code=$?
    if [ $code = 0 ] && grep -q 'min 500  max 500' "$tmp/out"; then ok
    else bad "$target: a kernel that ends runs to its end under --time-limit (exit $code)"; fi

    # Ctrl-C: SIGINT to the process once the kernel runs (compiled first, so
    # the signal finds it running: the cache holds the code from above).  A
    # shell starts a background job with SIGINT ignored, which kjit leaves
    # ignored: env gives it the default disposition a terminal's job has.
    env --default-signal=INT "$kjit" run "$tmp/spin.kern" spin zeros:i32:256 -1 --grid 4 --block 64 --target $target \
        >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    sleep 1
    start=$(now_ms)
    kill -INT $pid
    # a kernel that ignored the signal would run forever: wait at most 10 s
    waited=0
    while kill -0 $pid 2>/dev/null && [ $waited -lt 100 ]; do sleep 0.1; waited=$((waited + 1)); done
    if kill -0 $pid 2>/dev/null; then
        kill -KILL $pid
        bad "$target: Ctrl-C did not stop an endless kernel within 10 s"
        wait $pid 2>/dev/null
        continue
    fi
    wait $pid
    code=$? took=$(( $(now_ms) - start ))
    if [ $code = 130 ] && grep -q 'interrupted (Ctrl-C): spin was stopped before it finished' "$tmp/err"; then ok
    else bad "$target: Ctrl-C: exit $code after $took ms"; fi
done

for bad_limit in 0 -1 abc; do
    "$kjit" run "$tmp/spin.kern" spin zeros:i32:64 1 --grid 1 --block 64 --time-limit $bad_limit \
        >"$tmp/out" 2>"$tmp/err"
    code=$?
    if [ $code = 2 ] && grep -q -- '--time-limit takes a number of seconds above 0' "$tmp/err"; then ok
    else bad "--time-limit $bad_limit is a usage error (exit $code)"; fi
done
finish
