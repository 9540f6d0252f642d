"""Threads from procfs, with no probe: CPU time and run-queue wait per thread, from
/proc/<pid>/task/<tid>/schedstat (on-CPU ns, waiting-for-a-CPU ns, timeslices), for the
threads of the processes that own a listener (and their children: nginx's or gunicorn's
workers share the master's listener) and for the threads the epoll probe named.

A thread cannot spend more of a second blocked (in epoll_wait or anywhere) than what is
left after its time on a CPU and in a run queue: on CPU plus waiting >= 95 % is a loop
that never waits for events, whatever its syscalls. Why it is busy needs the probe."""

from __future__ import annotations

import os

from .objects import Family

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

    def __init__(self) -> None:
        self.last: dict[tuple[int, int], tuple[int, int]] = {}
        self.comm: dict[tuple[int, int], str] = {}
        self.scans = 0

    def scan(self, fam: Family, pids: set[int], now: float) -> None:
        seen: set[tuple[int, int]] = set()
        for pid in sorted(pids):
            try:
                tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            except OSError:
                continue
            for tid in tids:
                self._thread(fam, pid, tid, now, seen)
        for k in [k for k in self.last if k not in seen]:
            del self.last[k]
            self.comm.pop(k, None)
        self.scans += 1

    def _thread(self, fam: Family, pid: int, tid: int, now: float, seen: set[tuple[int, int]]) -> None:
        stat = _read(f"/proc/{pid}/task/{tid}/schedstat")
        parts = (stat or "").split()
        if len(parts) < 2:
            return
        k = (pid, tid)
        cpu, wait = int(parts[0]), int(parts[1])
        if k not in self.comm:
            self.comm[k] = (_read(f"/proc/{pid}/task/{tid}/comm") or "").rstrip("\n")
        seen.add(k)
        last = self.last.get(k)
        self.last[k] = (cpu, wait)
        if last is None and not self.scans:
            d_cpu, d_wait = 0, 0  # running before the exporter: from now on
        else:
            d_cpu, d_wait = (cpu - last[0], wait - last[1]) if last else (cpu, wait)
        counters = {"loop_cpu_seconds_total": d_cpu / _NS, "loop_runqueue_wait_seconds_total": d_wait / _NS}
        fam.add((str(pid), str(tid), self.comm[k]), now, counters, (d_cpu + d_wait) / _NS)
