"""monitor/exporter/memory.py on a real bpftrace: once its probes are attached, the LLVM and
clang pages it touched to compile them are given back, and it keeps tracing."""

from __future__ import annotations

import os
import selectors
import shutil
import subprocess
import time
from pathlib import Path

from monitor.exporter import memory
from monitor.exporter.rows import ROWS_USED
from monitor.exporter.supervise import Probe, Supervisor
from tests.conftest import ROOT

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


def test_compiler_pages_go_and_bpftrace_keeps_tracing(kernel, tmp_path) -> None:
    """Every LLVM and clang page this bpftrace touched goes, and it keeps tracing. Its libraries
    are copies of its own (see _private_compiler_libs): with the shared ones, the other tests'
    bpftrace processes beside it in CI map the same pages, which MADV_PAGEOUT leaves, and whose
    PSS moves whenever one of them starts or exits."""
    libs = tmp_path / "lib"
    libs.mkdir()
    env = dict(os.environ, LD_LIBRARY_PATH=_private_compiler_libs(libs))
    env.pop("BPFTRACE", None)
    proc = subprocess.Popen(["bpftrace", "-e", PROGRAM], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        assert _ticks(proc, 1, 60) == 1, "bpftrace did not start"
        assert memory.bpftrace_pids(proc.pid) == [proc.pid]
        assert any(os.path.dirname(path) == str(libs) for path in _mapped(proc.pid)), "the copies were not used"
        assert memory.compiler_kb(proc.pid, "Rss") > 10_000  # LLVM and clang are resident after the compile
        before = memory.compiler_kb(proc.pid)
        private = memory.compiler_kb(proc.pid, "Private_Clean")
        assert memory.compiler_kb(proc.pid, "Shared_Clean") < 1024  # nobody else maps the copies
        freed = memory.release_compiler_pages(proc.pid)
        assert private * 0.9 <= freed <= before, (before, freed, private)
        assert memory.compiler_kb(proc.pid, "Private_Clean") < max(1024, private / 10)
        resident = memory.compiler_kb(proc.pid, "Rss")
        assert _ticks(proc, 5, 10) == 5  # still printing: nothing it needs was taken
        assert memory.compiler_kb(proc.pid, "Rss") <= resident + 2048  # and no page of them came back
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_nothing_to_give_back_in_a_process_without_them() -> None:
    assert memory.compiler_ranges(os.getpid()) == []
    assert memory.release_compiler_pages(os.getpid()) == 0  # python is not bpftrace


def _private_compiler_libs(dest: Path) -> str:
    """Copies of bpftrace's LLVM and clang libraries in dest, for LD_LIBRARY_PATH: pages of a
    file of their own, which no other bpftrace maps. In CI other tests run bpftrace beside this
    one, every page it touched was shared with them, and the kernel pages out none of those."""
    ldd = subprocess.run(["ldd", shutil.which("bpftrace") or "bpftrace"], capture_output=True, text=True).stdout
    for line in ldd.splitlines():
        name, _, rest = line.strip().partition(" => ")
        if name.startswith(memory.COMPILER_LIBS) and rest.split():
            shutil.copy(rest.split()[0], dest / name)
            # Written back: pages of a file just written are dirty, and MADV_PAGEOUT does not
            # drop a dirty page of a file (it would have to write it first).
            with open(dest / name, "rb+") as f:
                os.fsync(f.fileno())
    return str(dest)


def test_the_supervisor_gives_them_back_while_bpftrace_compiles(kernel, tmp_path, monkeypatch) -> None:
    """A probe's compile is the exporter's peak: pages clang and LLVM's passes are done with go
    at each tick before bpftrace prints (supervise.RELEASE_WHILE_COMPILING_S)."""
    libs = tmp_path / "lib"
    libs.mkdir()
    monkeypatch.setenv("LD_LIBRARY_PATH", _private_compiler_libs(libs))
    monkeypatch.delenv("BPFTRACE", raising=False)  # the host's bpftrace, which those libraries are for
    probe = Probe("retransmits", ROOT / "probes" / "retransmits.bt", "tracepoint", 1)
    state = tmp_path / "state"
    state.mkdir()
    sup = Supervisor([probe], ROOT / "collector" / "probe-to-csv", state, list(ROWS_USED), 0, lambda r, w: None)
    released = []  # (private compiler kB before a tick that paged out, after it)
    sup.start(probe, None, time.monotonic())
    try:
        assert probe.proc is not None
        deadline = time.monotonic() + 60
        while not probe.up() and probe.running() and time.monotonic() < deadline:
            before, at = memory.compiler_kb(probe.proc.pid, "Private_Clean"), probe.compiling_released_at
            sup.tick(time.monotonic())
            if probe.compiling_released_at != at:
                released.append((before, memory.compiler_kb(probe.proc.pid, "Private_Clean")))
            sup.wait(0.1)
        assert probe.up(), "bpftrace did not start"
        assert any(os.path.dirname(path) == str(libs) for path in _mapped(probe.proc.pid)), "the copies were not used"
        # Most ticks find some compiler pages only this bpftrace maps and take them. The compile goes
        # on meanwhile and maps some back before the second reading (a CI run: 20688 kB -> 17220 kB
        # at one tick of four), so: most ticks halve them, and over all ticks more than half go.
        busy = [(b, a) for b, a in released if b > 4096]
        assert busy, released
        assert sum(a < b / 2 for b, a in busy) * 2 > len(busy), released
        assert sum(a for _, a in busy) < sum(b for b, _ in busy) / 2, released
    finally:
        sup.close()


def _mapped(pid: int) -> set[str]:
    with open(f"/proc/{pid}/maps") as f:
        return {line.split()[5] for line in f if len(line.split()) == 6}
