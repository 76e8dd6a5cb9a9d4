#!/usr/bin/env bash
# tests/gpu/racecheck.sh [BUNDLE]: kjit's race checker against NVIDIA's
# compute-sanitizer, on the GPU machine (issue 30, docs/language.md).
#
# Every kernel of tests/golden/races runs twice with the inputs of its
# `// run:` line: on cpu under `kjit run --check=race`, and on cuda under
# `compute-sanitizer --tool racecheck` and `--tool synccheck`.  A table says,
# for each kernel, what each tool reported.  The verdicts must agree where
# the tools cover the same thing:
#   - a race on a shared() array: kjit's error and a racecheck hazard;
#   - the clean kernel: no error from either;
# Races on global arrays (racecheck covers shared memory only) and the
# barrier and mask errors (synccheck's field, whose reports depend on the
# architecture) are printed but not counted.
# Ends with "N passed, N failed" like tests/gpu/run.sh.
set -u
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
kjit=$root/bin/kjit
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ ! -x "$sanitizer" ]; then
    echo "skipped: no compute-sanitizer on this machine"; echo "0 passed, 0 failed"; exit 0
fi
"$sanitizer" --version | tail -1
passed=0 failed=0
printf '%-16s %-8s %-12s %-22s %-22s %s\n' kernel memory "kjit cpu" "racecheck (cuda)" "synccheck (cuda)" verdict
for src in "$root"/tests/golden/races/*.kern; do
    name=$(basename "$src" .kern)
    args=$(sed -n 's|^// run: ||p' "$src" | head -1)
    [ -n "$args" ] || continue
    # shellcheck disable=SC2086
    (cd "$work" && "$kjit" run "$src" $args --target cpu --check=race -o /dev/null) \
        > "$work/$name.cpu" 2>&1
    if grep -q 'races with' "$work/$name.cpu"; then kj=race
    elif grep -q 'error' "$work/$name.cpu"; then kj=sync-error
    else kj=clean; fi
    # Which memory the race is on: a shared() array named in kjit's message.
    mem=-
    if [ "$kj" = race ]; then
        arr=$(sed -n 's/.*of \([A-Za-z_][A-Za-z0-9_]*\)\[.*/\1/p' "$work/$name.cpu" | head -1)
        if grep -Eq "let +$arr *= *shared\(" "$src"; then mem=shared; else mem=global; fi
    fi
    # shellcheck disable=SC2086
    (cd "$work" && timeout 120 "$sanitizer" --tool racecheck --racecheck-report hazard \
        "$kjit" run "$src" $args --target cuda -o /dev/null) > "$work/$name.race" 2>&1
    rc_hazards=$(sed -n 's/.*RACECHECK SUMMARY: \([0-9]*\) hazard.*/\1/p' "$work/$name.race" | tail -1)
    rc_errors=$(sed -n 's/.*RACECHECK SUMMARY: .*(\([0-9]*\) error.*/\1/p' "$work/$name.race" | tail -1)
    rc="hazards ${rc_hazards:-0}, errors ${rc_errors:-?}"
    # shellcheck disable=SC2086
    (cd "$work" && timeout 120 "$sanitizer" --tool synccheck \
        "$kjit" run "$src" $args --target cuda -o /dev/null) > "$work/$name.sync" 2>&1
    sc_errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$work/$name.sync" | tail -1)
    sc="errors ${sc_errors:-?}"
    found=0
    [ "${rc_hazards:-0}" -gt 0 ] 2>/dev/null && found=1
    [ "${rc_errors:-0}" -gt 0 ] 2>/dev/null && found=1
    verdict="not compared"
    if [ "$kj" = clean ]; then
        if [ $found = 0 ] && [ "${sc_errors:-0}" = 0 ]; then verdict=agree; passed=$((passed + 1))
        else verdict=DISAGREE; failed=$((failed + 1)); fi
    elif [ "$mem" = shared ]; then
        if [ $found = 1 ]; then verdict=agree; passed=$((passed + 1))
        else verdict=DISAGREE; failed=$((failed + 1)); fi
    elif [ "$mem" = global ]; then
        verdict="outside racecheck (global memory)"
    else
        verdict="synccheck's field"
    fi
    printf '%-16s %-8s %-12s %-22s %-22s %s\n' "$name" "$mem" "$kj" "$rc" "$sc" "$verdict"
done
for f in "$work"/*.race "$work"/*.sync; do
    echo "--- $(basename "$f")"; grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|Race reported|Barrier error|Invalid|hazard detected|Error:' "$f" | head -6
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
