"""Threads from procfs, with no probe: CPU time and run-queue wait per thread, from
/proc/<pid>/task/<tid>/schedstat (on-CPU ns, waiting-for-a-CPU ns), for the threads of
the processes that own a listener (and their children: nginx's or gunicorn's workers
share the master's listener) and for the threads the epoll probe named.
collector/sample-netns --threads-of reads them, the one reader of per-thread clocks, as
capture's threads.csv.

A thread cannot spend more of a second blocked (in epoll_wait or anywhere) than what is
left after its time on a CPU and in a run queue: on CPU plus waiting >= 95 % is a loop
that never waits for events, whatever its syscalls. Why it is busy needs the probe."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from .objects import Family
from .sample import netns_inode
from .sampler import ask

_NS = 1e9


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def with_children(pids: set[int]) -> set[int]:
    out = set(pids)
    for pid in pids:
        kids = _read(f"/proc/{pid}/task/{pid}/children")
        out.update(int(k) for k in (kids or "").split())
    return out


class ThreadScan:
    """Each scan: per thread the CPU and run-queue time since the last scan (all of it for
    a thread first seen after the first scan: it started since), as counter increments."""

    def __init__(self, sampler: Path) -> None:
        self.sampler = sampler  # collector/sample-netns
        self.last: dict[tuple[int, int], tuple[int, int]] = {}
        self.scans = 0

    def rows(self, pids: set[int]) -> list[dict[str, str]]:
        if not pids:
            return []
        # PID:INODE (os.stat, no process) spares sample-netns a stat process; a PID gone is left out.
        args = [f"{p}:{ino}" for p in sorted(pids) if (ino := netns_inode(p)) is not None]
        if not args:
            return []
        out = ask(self.sampler, "--threads-of", *args)
        return list(csv.DictReader(io.StringIO(out)))

    def scan(self, fam: Family, pids: set[int], now: float) -> None:
        seen: set[tuple[int, int]] = set()
        for row in self.rows(pids):
            if row["pid"].isdigit() and row["tid"].isdigit() and row["cpu_ns"].isdigit() and row["runq_ns"].isdigit():
                self._thread(fam, row, now, seen)
        for k in [k for k in self.last if k not in seen]:
            del self.last[k]
        self.scans += 1

    def _thread(self, fam: Family, row: dict[str, str], now: float, seen: set[tuple[int, int]]) -> None:
        k = (int(row["pid"]), int(row["tid"]))
        cpu, wait = int(row["cpu_ns"]), int(row["runq_ns"])
        seen.add(k)
        last = self.last.get(k)
        self.last[k] = (cpu, wait)
        if last is None and not self.scans:
            d_cpu, d_wait = 0, 0  # running before the exporter: from now on
        else:
            d_cpu, d_wait = (cpu - last[0], wait - last[1]) if last else (cpu, wait)
        counters = {"loop_cpu_seconds_total": d_cpu / _NS, "loop_runqueue_wait_seconds_total": d_wait / _NS}
        fam.add((row["pid"], row["tid"], row["comm"]), now, counters, (d_cpu + d_wait) / _NS)
