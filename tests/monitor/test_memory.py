"""monitor/exporter/memory.py on a real bpftrace: once its probes are attached, the LLVM and
clang pages it touched to compile them are given back, and it keeps tracing."""

from __future__ import annotations

import os
import selectors
import subprocess
import time

from monitor.exporter import memory

# A struct cast, so that clang parses the kernel's types as the probe files make it do.
PROGRAM = """
tracepoint:sock:inet_sock_set_state { @[((struct sock *)args->skaddr)->__sk_common.skc_family] = count(); }
interval:ms:200 { printf("tick\\n"); }
"""


def _ticks(proc: subprocess.Popen[bytes], n: int, timeout: float) -> int:
    """Read until n "tick" lines have come or timeout; how many came."""
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    seen, deadline, buf = 0, time.monotonic() + timeout, b""
    while seen < n and time.monotonic() < deadline:
        if sel.select(timeout=0.5):
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
            seen = buf.count(b"tick\n")
    return seen


def test_compiler_pages_go_and_bpftrace_keeps_tracing(kernel) -> None:
    proc = subprocess.Popen(["bpftrace", "-e", PROGRAM], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert _ticks(proc, 1, 60) == 1, "bpftrace did not start"
        pid = memory.bpftrace_pids(proc.pid)
        assert pid == [proc.pid]
        before = memory.compiler_pss_kb(proc.pid)
        assert before > 10_000, before  # LLVM and clang are resident after the compile
        freed = memory.release_compiler_pages(proc.pid)
        after = memory.compiler_pss_kb(proc.pid)
        assert freed == before - after and after < before / 2, (before, after)
        assert _ticks(proc, 5, 10) == 5  # still printing: nothing it needs was taken
        assert memory.compiler_pss_kb(proc.pid) < before / 2  # and they stay out
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_nothing_to_give_back_in_a_process_without_them() -> None:
    assert memory.compiler_ranges(os.getpid()) == []
    assert memory.release_compiler_pages(os.getpid()) == 0  # python is not bpftrace
