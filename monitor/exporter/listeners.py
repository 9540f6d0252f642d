"""Listeners from sock_diag, with no probe: per listener the accept queue now, its limit
and the kernel's own drop counter (sk_drops: tcp_listendrop() counts each SYN and final
ACK the listener dropped; `ss -m` shows it as d<N>). collector/sample-netns
--listeners-of reads them, the one reader of listeners, as capture's listeners.csv.

This is the always-on view of the accept queue: a drop on a listener is counted however
short the overflow was, but the queue depth is only what it was at each scan (a spike
between two scans is not seen; how it overflowed, burst or stall, needs the probe)."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

from .objects import Family, Key
from .sample import Namespaces
from .sampler import ask


class ListenerScan:
    """Each scan: every listener of the watched namespaces. Its drops become counter
    increments (the kernel's counter less the last scan's); a listener first seen after
    the first scan is new, so all its drops are counted; a socket that went and came back
    under the same address restarts its counter, so a lower value counts from 0."""

    def __init__(self, sampler: Path, owners_cache: Path | None = None) -> None:
        self.sampler = sampler  # collector/sample-netns
        # Where sample-netns keeps each namespace's owners table (ss -p) between scans, so
        # it reads every process's open files only when the listeners change or once a
        # minute, not at every scan (0.27 s of CPU a namespace with 18 000 files open).
        self.owners_cache = owners_cache
        self.drops: dict[Key, int] = {}
        self.scans = 0
        self.owners: set[int] = set()  # pids that own a listener, at the last scan
        self.holders: dict[Key, int] = {}  # listener -> the pid ss -p names first, at the last scan

    def rows(self, ns: Namespaces, inos: list[int]) -> list[dict[str, str]]:
        pids = ns.pid_args(inos)
        if not pids:
            return []
        cache = ["--owners-cache", str(self.owners_cache)] if self.owners_cache else []
        return list(csv.DictReader(io.StringIO(ask(self.sampler, "--listeners-of", *cache, *pids))))

    def scan(self, fam: Family, ns: Namespaces, inos: list[int], now: float) -> None:
        seen: set[Key] = set()
        self.owners, self.holders = set(), {}
        for row in self.rows(ns, inos):
            # One object per socket: each member of a SO_REUSEPORT group has its own queue and drops.
            key = (row["netns"], row["laddr"], row["lport"], row.get("sock_ino") or "0")
            if key in seen or not row["recv_q"].isdigit() or not row["send_q"].isdigit():
                continue
            seen.add(key)
            owner = _owner(row)
            if owner is not None:
                self.owners.add(owner)
                self.holders[key] = owner
            dropped = self._dropped(key, row["drops"])
            depth = int(row["recv_q"])
            gauges = {"listener_queue_depth": depth, "listener_queue_limit": int(row["send_q"]), "_fresh": 1}
            fam.add(key, now, {"listener_drops_total": dropped} if dropped else {}, 1000.0 * dropped + depth, gauges)
        scanned = {str(i) for i in inos}
        self._prune_owners_cache(scanned)
        for key in [k for k in self.drops if k not in seen and k[0] in scanned]:
            del self.drops[key]  # the socket is closed
            o = fam.objs.get(key)
            if o is not None:
                o.gauges.pop("listener_queue_limit", None)
        self.scans += 1

    def close(self) -> None:
        """The owners tables go with the exporter."""
        if self.owners_cache is not None:
            shutil.rmtree(self.owners_cache, ignore_errors=True)

    def _prune_owners_cache(self, scanned: set[str]) -> None:
        """The owners tables of namespaces this scan did not read go (namespaces come and go
        for days; one read again later is asked afresh)."""
        if self.owners_cache is None:
            return
        for f in self.owners_cache.iterdir():
            if f.name.split(".", 1)[0] not in scanned:
                f.unlink(missing_ok=True)

    def _dropped(self, key: Key, drops: str) -> int:
        if not drops.isdigit():
            return 0  # ss without skmem (very old iproute2): no counter, not 0 drops
        now_value, last = int(drops), self.drops.get(key)
        self.drops[key] = now_value
        if last is None:
            return now_value if self.scans else 0
        return now_value - last if now_value >= last else now_value


def _owner(row: dict[str, str]) -> int | None:
    """The process a socket's row names as its owner: the one holding it, or of several holders the
    first whose epoll set watches it (nginx's worker of a reuseport member, not its master)."""
    watchers = (row.get("watchers") or "").split()
    if watchers and watchers[0].isdigit():
        return int(watchers[0])
    return int(row["pid"]) if row["pid"].isdigit() else None
