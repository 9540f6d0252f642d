"""Memory the probes give back once they run: bpftrace's compiler pages.

bpftrace links LLVM and clang, and touches about 70 MB of their code while it compiles the
probes (docs/cost.md, "Exporter memory"). Once the programs are attached it never runs them again, but the pages stay
resident and count in its PSS. They are clean and file-backed, so the kernel can drop them
at no cost and read them back if ever needed: process_madvise(MADV_PAGEOUT) (Linux 5.10)
asks it to now. It leaves a page another process maps too (another bpftrace beside this one):
that page's PSS is split between them. On a kernel without it nothing changes.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

COMPILER_LIBS = ("libLLVM", "libclang")  # LLVM, and clang (libclang-cpp, libclang)
_SYS_PIDFD_OPEN = 434  # the same number on every architecture since 5.3
_SYS_PROCESS_MADVISE = 440
_MADV_PAGEOUT = 21


class _Iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def compiler_ranges(pid: int) -> list[tuple[int, int]]:
    """(start, length) of each mapping of an LLVM or clang library in the process."""
    ranges = []
    try:
        lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and os.path.basename(parts[5]).startswith(COMPILER_LIBS):
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            ranges.append((lo, hi - lo))
    return ranges


_libc: ctypes.CDLL | None = None


def page_out(pid: int, ranges: list[tuple[int, int]]) -> int:
    """Ask the kernel to drop these pages of the process now, in one call; the bytes it took, 0
    when it cannot (no process_madvise, no permission, the process gone). A page another process
    maps too is left (mm/madvise.c skips a folio mapped more than once)."""
    global _libc
    if not ranges:
        return 0
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    pidfd = _libc.syscall(_SYS_PIDFD_OPEN, pid, 0)
    if pidfd < 0:
        return 0
    try:
        iov = (_Iovec * len(ranges))(*(_Iovec(start, length) for start, length in ranges))
        n = _libc.syscall(_SYS_PROCESS_MADVISE, pidfd, iov, len(ranges), _MADV_PAGEOUT, 0)
    finally:
        os.close(pidfd)
    return max(0, n)


def compiler_kb(pid: int, field: str = "Pss") -> int:
    """A /proc/PID/smaps field (kB: Pss, Private_Clean, ...) summed over the process's LLVM and
    clang mappings."""
    total, mine, key = 0, False, field + ":"
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                head = line.split(maxsplit=5)
                if "-" in head[0] and len(head) >= 5 and head[0][0] in "0123456789abcdef" and ":" in head[3]:
                    mine = len(head) == 6 and os.path.basename(head[5].strip()).startswith(COMPILER_LIBS)
                elif mine and head[0] == key:
                    total += int(head[1])
    except OSError:
        return 0
    return total


def bpftrace_pids(pid: int) -> list[int]:
    """pid itself when it is bpftrace, else the bpftrace processes below it (a wrapper such as
    dev/bpftrace-chroot runs it in a chroot)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            if Path(f"/proc/{p}/comm").read_text().strip() == "bpftrace":
                found.append(p)
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:
            continue
    return found


def release_compiler_pages(pid: int, measure: bool = True) -> int:
    """Page out the compiler libraries of the bpftrace process(es) at or below pid: the kB of
    PSS that went (measured from smaps before and after, 9 ms a read here; 0 unmeasured)."""
    freed = 0
    for p in bpftrace_pids(pid):
        before = compiler_kb(p) if measure else 0
        page_out(p, compiler_ranges(p))
        if measure:
            freed += max(0, before - compiler_kb(p))
    return freed
