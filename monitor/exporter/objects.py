"""Objects with bounded cardinality: per family at most --top get their own series.

A family's objects (listeners, endpoints, destinations, loop threads) are named by the
labels in OBJECT_LABELS; the rest are summed into one series labelled "other"; an
object idle for --ttl seconds is dropped. Tables holds the four families and the
namespaces the probes named; object_series turns them into series at each write."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from .metrics import METRICS, OBJECT_LABELS, PREFIX

Put = Callable[[str, dict[str, str], float], None]
Key = tuple[str, ...]


@dataclass
class Obj:
    labels: Key
    counters: dict[str, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    last_active: float = 0.0


class Family:
    """Objects of one family: up to top_n exported, the rest summed into 'other'.

    An exported object's counters count from its admission (a new series); the other
    series only ever grows, so both stay counters. Admission happens at first sight
    while a slot is free; at each write (settle) an outsider whose score is more than
    twice the weakest member's takes its slot (the member's series ends). Objects idle
    for ttl seconds are dropped. At most 4 * top_n objects are remembered."""

    def __init__(self, name: str, top_n: int, ttl: float, sources: set[str] | None = None) -> None:
        self.name, self.top_n, self.ttl = name, top_n, ttl
        self.objs: dict[Key, Obj] = {}
        self.exported: set[Key] = set()
        self.other: dict[str, float] = {}
        # Every counter of the family that something running feeds (sources: the metric
        # files, None = all), from 0 at admission: the series exist before they move. A
        # counter nothing feeds gets no series: a flat 0 would read as "never happened".
        labels = OBJECT_LABELS[name]
        self.counter_names = [m.name.removeprefix(PREFIX) for m in METRICS.values()
                              if m.kind == "counter" and m.labels == labels
                              and (sources is None or m.file in sources)]  # fmt: skip

    def add(self, labels: Key, now: float, counters: dict[str, float], score: float,
            gauges: dict[str, float] | None = None) -> None:  # fmt: skip
        o = self.objs.get(labels)
        if o is None:
            o = self.objs[labels] = Obj(labels)
            if len(self.exported) < self.top_n:
                self.admit(o)
        o.last_active = now
        o.score += score
        if gauges:
            o.gauges.update(gauges)
        target = o.counters if labels in self.exported else self.other
        for k, v in counters.items():
            target[k] = target.get(k, 0) + v

    def set_gauges(self, labels: Key, now: float, gauges: dict[str, float]) -> None:
        """Gauges only (a sampled state): does not make an idle object active."""
        o = self.objs.get(labels)
        if o is None:
            self.add(labels, now, {}, 0.0, gauges)
            return
        o.gauges.update(gauges)

    def admit(self, o: Obj) -> None:
        self.exported.add(o.labels)
        o.counters = dict.fromkeys(self.counter_names, 0)

    def settle(self, now: float) -> None:
        for labels, o in list(self.objs.items()):
            if now - o.last_active > self.ttl:
                del self.objs[labels]
                self.exported.discard(labels)
        _promote(self)
        if len(self.objs) > 4 * self.top_n:
            idle = sorted((o for o in self.objs.values() if o.labels not in self.exported), key=lambda o: o.last_active)
            for o in idle[: len(self.objs) - 4 * self.top_n]:
                del self.objs[o.labels]


def _promote(fam: Family) -> None:
    """Outsiders, strongest first, take a free slot or one whose holder they outscore twice."""
    outsiders = sorted((o for o in fam.objs.values() if o.labels not in fam.exported), key=lambda o: -o.score)
    for o in outsiders:
        if len(fam.exported) < fam.top_n:
            fam.admit(o)
            continue
        weakest = min((fam.objs[k] for k in fam.exported), key=lambda x: x.score)
        if o.score > 2 * weakest.score:
            fam.exported.discard(weakest.labels)
            weakest.counters = {}
            fam.admit(o)


class Tables:
    """The four families, and when the probes last named each namespace (inode) and each
    event-loop process."""

    def __init__(self, top_n: int, ttl: float, sources: set[str] | None = None) -> None:
        self.ttl = ttl
        self.fams = {f: Family(f, top_n, ttl, sources) for f in OBJECT_LABELS}
        self.ns_seen: dict[int, float] = {}
        self.loop_pids: dict[int, float] = {}  # processes the epoll probe named, when

    def before_write(self, now: float) -> None:
        # A thread that exited has no more numbers: its series end now, not after --ttl.
        loops = self.fams["loop"]
        for key in [k for k in loops.objs if not os.path.exists(f"/proc/{k[0]}/task/{k[1]}")]:
            del loops.objs[key]
            loops.exported.discard(key)
        for f in self.fams.values():
            f.settle(now)
        age_gauges(self.fams)

    def probe_loop_pids(self, now: float) -> set[int]:
        """Processes the epoll probe named within --ttl (their threads are scanned too)."""
        for pid, t in list(self.loop_pids.items()):
            if now - t > self.ttl:
                del self.loop_pids[pid]
        return set(self.loop_pids)

    def netns_in_use(self, now: float) -> tuple[list[int], list[int]]:
        """Namespaces of exported objects (most recently named first), then the others the
        probes named within --ttl (likewise); forgets those named longer ago."""
        for ino, t in list(self.ns_seen.items()):
            if now - t > self.ttl:
                del self.ns_seen[ino]
        of_objects = sorted(
            {int(k[0]) for f in ("listener", "endpoint", "destination") for k in self.fams[f].exported},
            key=lambda i: -self.ns_seen.get(i, 0.0),
        )
        return of_objects, sorted(self.ns_seen, key=lambda i: -self.ns_seen[i])


def age_gauges(fams: dict[str, Family]) -> None:
    """Gauges describe the last interval. The probe's clock and ours are not in phase, so
    one write can fall before the interval's row and the next get two: a gauge is reset
    only after two writes without a row. Then a listener had no arrivals, accepts or
    queue (depth 0); a thread made no sampled call, so it has no ratio to show (it may
    be blocked in one long wait, counted when the call returns): no gauge rather than 0."""
    for fname in ("listener", "loop"):
        for o in fams[fname].objs.values():
            if o.gauges.pop("_fresh", None):
                o.gauges["_stale"] = 0
                continue
            o.gauges["_stale"] = o.gauges.get("_stale", 0) + 1
            if o.gauges["_stale"] < 2:
                continue
            if fname == "listener":
                o.gauges["listener_queue_depth_max"] = 0
                o.gauges["listener_queue_depth"] = 0
            else:
                o.gauges = {"_stale": o.gauges["_stale"]}


def object_series(fams: dict[str, Family], put: Put) -> None:
    """Each exported object's series, the "other" series, and the objects per family."""
    for fname, fam in fams.items():
        names = OBJECT_LABELS[fname]
        for key in sorted(fam.exported):
            o = fam.objs[key]
            lab = dict(zip(names, key, strict=True))
            for k, v in o.counters.items():
                put(k, lab, v)
            for k, v in o.gauges.items():
                if not k.startswith("_"):
                    put(k, lab, v)
        if fam.other:
            lab = dict.fromkeys(names, "other")
            for k, v in fam.other.items():
                put(k, lab, v)
        put("exporter_objects", {"family": fname, "state": "exported"}, len(fam.exported))
        put("exporter_objects", {"family": fname, "state": "other"}, len(fam.objs) - len(fam.exported))
