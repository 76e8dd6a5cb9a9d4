#!/usr/bin/env bash
# tests/gpu/host_ops.sh [BUNDLE]: what the host operations of a kjit call
# cost on this machine's CPU (issue 26 item 1): atomic read-modify-writes,
# mutexes, a GIL-like pair, a dlopened library's thread-local variable
# (tests/gpu/host_ops.c, built here with cc), beside the CPU's model, clock,
# whether it is a virtual machine, and the kernel's speculation mitigations.
# On an H200 host libkjit's call and CPython's GIL pair cost three times
# their time on the 2-core build machine while the interpreter's loop cost
# 1.5x (docs/performance.md, branch pyhot): these rows say which operations
# are the slow ones there.  A few seconds; ends with "N passed, N failed".
set -u
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
passed=0
failed=0
{
    grep -m1 'model name' /proc/cpuinfo
    grep -m1 'cpu MHz' /proc/cpuinfo
    grep -q -m1 hypervisor /proc/cpuinfo && echo "hypervisor: yes (a virtual machine)" \
        || echo "hypervisor: no"
    for f in /sys/devices/system/cpu/vulnerabilities/{spectre_v2,retbleed,spec_rstack_overflow}; do
        [ -r "$f" ] && echo "$(basename "$f"): $(cat "$f")"
    done
    if cc -O2 -DTLS_LIB -fPIC -shared "$root/tests/gpu/host_ops.c" -o "$work/host_ops_tls.so" &&
        cc -O2 "$root/tests/gpu/host_ops.c" -o "$work/host_ops" -ldl -lpthread; then
        "$work/host_ops" "$work/host_ops_tls.so" && passed=1 || failed=1
    else
        echo "FAIL host_ops.c built with cc"
        failed=1
    fi
    echo "$passed passed, $failed failed"
} 2>&1 | tee "${OUT:-$work}/host_ops.log"
grep -q " 0 failed$" "${OUT:-$work}/host_ops.log"
