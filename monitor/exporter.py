"""Exporter mode: the probes kept running, their numbers written as node_exporter textfiles.

scripts/monitor runs this module (python3 monitor/exporter.py ...). It uses the standard
library only, so a monitored host needs python3 and what the probes need, nothing from PyPI.

One process supervises the probes (bpftrace children, restarted when they die and every
--segment seconds so the kernel maps and the memory stay bounded), reads their output
through pipes as it comes (the same line format collector/probe-to-csv turns into CSV:
'#<record>,<columns>' headers, CSV rows, and running totals after '=== <epoch>'
markers), samples the namespace counters the rules reconcile with, and after each
interval writes one file per family into --prom-dir: written under a temporary name and
renamed, no timestamps, base units, counters ending in _total, every name prefixed tq_.

Cardinality is bounded per family: at most --top objects (listeners, endpoints,
destinations, loop threads) get their own series; the rest are summed into one
series whose object labels read "other". An object keeps its series while it is
active; an object idle for --ttl seconds is dropped. METRICS below is the full list of
metric names with their labels: the rules file, the dashboard and the tests read it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from analysis.families import NAMES as FAMILY_NAMES

PREFIX = "tq_"
EADDRNOTAVAIL = 99
# Families of objects and the labels that name one object.
OBJECT_LABELS = {
    "listener": ("netns", "laddr", "lport"),
    "endpoint": ("netns", "raddr", "port", "side"),
    "destination": ("netns", "raddr", "rport"),
    "loop": ("pid", "tid", "comm"),
}


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # counter | gauge
    labels: tuple[str, ...]
    help: str
    file: str


def _m(name: str, kind: str, labels: tuple[str, ...], help_: str, file: str) -> Metric:
    return Metric(PREFIX + name, kind, labels, help_, file)


_L, _E, _D, _T = (OBJECT_LABELS[k] for k in ("listener", "endpoint", "destination", "loop"))
METRICS: dict[str, Metric] = {
    m.name: m
    for m in [
        # Per listener (accept_queue probe).
        _m(
            "listener_queue_depth_max",
            "gauge",
            _L,
            "Largest accept-queue depth seen in the last interval.",
            "accept_queue",
        ),
        _m(
            "listener_queue_depth",
            "gauge",
            _L,
            "Accept-queue depth at the end of the last interval (ss Recv-Q).",
            "accept_queue",
        ),
        _m(
            "listener_queue_limit",
            "gauge",
            _L,
            "Effective accept-queue limit: min(listen backlog, somaxconn).",
            "accept_queue",
        ),
        _m(
            "listener_queue_full_total",
            "counter",
            _L,
            "Connections queued while the queue was full (depth > limit).",
            "accept_queue",
        ),
        _m("listener_enqueued_total", "counter", _L, "Completed connections queued on the listener.", "accept_queue"),
        _m("listener_accepted_total", "counter", _L, "Connections taken off the queue by accept().", "accept_queue"),
        # Per remote endpoint (retransmits probe).
        _m(
            "endpoint_retrans_data_segments_total",
            "counter",
            _E,
            "Data segments re-sent toward the endpoint.",
            "retransmits",
        ),
        _m(
            "endpoint_retrans_syn_segments_total",
            "counter",
            _E,
            "SYNs re-sent toward the endpoint (we are the client).",
            "retransmits",
        ),
        _m(
            "endpoint_retrans_synack_segments_total",
            "counter",
            _E,
            "SYN-ACKs re-sent to the endpoint (we are the server).",
            "retransmits",
        ),
        # Per destination this host connects to (time_wait probe and socket table).
        _m(
            "destination_connect_failures_total",
            "counter",
            _D,
            "Failed connect() calls toward the destination, any error.",
            "time_wait",
        ),
        _m(
            "destination_eaddrnotavail_total",
            "counter",
            _D,
            "connect() calls that found no free local port (EADDRNOTAVAIL).",
            "time_wait",
        ),
        _m(
            "destination_active_closes_total",
            "counter",
            _D,
            "Connections to the destination this host closed first (each leaves a TIME_WAIT socket).",
            "time_wait",
        ),
        _m(
            "destination_time_wait_sockets",
            "gauge",
            _D,
            "TIME_WAIT sockets toward the destination on ephemeral local ports.",
            "sockets",
        ),
        _m(
            "destination_ports_in_use",
            "gauge",
            _D,
            "Ephemeral local ports held toward the destination, any state.",
            "sockets",
        ),
        # Per event-loop thread (epoll probe; 1 call in 8 sampled, scaled).
        _m("loop_epoll_calls_total", "counter", _T, "epoll_wait calls (estimated from 1 in 8).", "epoll"),
        _m("loop_epoll_events_total", "counter", _T, "Events returned by epoll_wait (estimated).", "epoll"),
        _m("loop_epoll_empty_total", "counter", _T, "epoll_wait calls that returned no event (estimated).", "epoll"),
        _m("loop_blocked_seconds_total", "counter", _T, "Time blocked inside epoll_wait (estimated).", "epoll"),
        _m(
            "loop_cpu_seconds_total", "counter", _T, "CPU time of the thread, read at its sampled epoll calls.", "epoll"
        ),
        _m(
            "loop_blocked_ratio",
            "gauge",
            _T,
            "Share of the last interval the thread spent blocked in epoll_wait.",
            "epoll",
        ),
        _m(
            "loop_events_per_wakeup",
            "gauge",
            _T,
            "Events per epoll_wait call that returned some, last interval.",
            "epoll",
        ),
        # Per network namespace: the kernel counters the per-object numbers reconcile with.
        _m(
            "netns_listen_overflows_total",
            "counter",
            ("netns",),
            "TcpExt ListenOverflows: connections dropped on a full accept queue.",
            "netns",
        ),
        _m("netns_listen_drops_total", "counter", ("netns",), "TcpExt ListenDrops.", "netns"),
        _m(
            "netns_syn_retrans_total",
            "counter",
            ("netns",),
            "TcpExt TCPSynRetrans: SYNs re-sent by this namespace's connects.",
            "netns",
        ),
        _m("netns_retrans_segments_total", "counter", ("netns",), "Tcp RetransSegs.", "netns"),
        _m("netns_out_segments_total", "counter", ("netns",), "Tcp OutSegs.", "netns"),
        _m("netns_passive_opens_total", "counter", ("netns",), "Tcp PassiveOpens.", "netns"),
        _m("netns_active_opens_total", "counter", ("netns",), "Tcp ActiveOpens.", "netns"),
        _m("netns_time_wait_overflow_total", "counter", ("netns",), "TcpExt TCPTimeWaitOverflow.", "netns"),
        _m("netns_ephemeral_ports", "gauge", ("netns",), "Size of net.ipv4.ip_local_port_range.", "netns"),
        _m(
            "netns_info",
            "gauge",
            ("netns", "name"),
            "Namespace inode and its ip-netns name (host: the initial one).",
            "netns",
        ),
        # The exporter and its probes.
        _m("probe_up", "gauge", ("probe", "tier"), "1 while the probe runs and prints, else 0.", "exporter"),
        _m(
            "probe_restarts_total",
            "counter",
            ("probe", "reason"),
            "Probe restarts: died, or segment (planned, bounds map memory).",
            "exporter",
        ),
        _m(
            "probe_recursion_misses_total",
            "counter",
            ("probe",),
            "Events the kernel skipped for the probe's programs (bpf recursion misses).",
            "exporter",
        ),
        _m(
            "exporter_objects",
            "gauge",
            ("family", "state"),
            "Objects tracked per family: exported or in the other series.",
            "exporter",
        ),
        _m("exporter_top_n", "gauge", (), "Objects per family that get their own series (--top).", "exporter"),
        _m("exporter_series", "gauge", (), "Series written in the last round, all files.", "exporter"),
        _m(
            "exporter_resident_bytes",
            "gauge",
            ("process",),
            "Resident memory of the exporter and of each probe process.",
            "exporter",
        ),
    ]
}
FILES = sorted({m.file for m in METRICS.values()})

# /proc counters per namespace -> metric.
NETNS_COUNTERS = {
    ("TcpExt", "ListenOverflows"): "netns_listen_overflows_total",
    ("TcpExt", "ListenDrops"): "netns_listen_drops_total",
    ("TcpExt", "TCPSynRetrans"): "netns_syn_retrans_total",
    ("TcpExt", "TCPTimeWaitOverflow"): "netns_time_wait_overflow_total",
    ("Tcp", "RetransSegs"): "netns_retrans_segments_total",
    ("Tcp", "OutSegs"): "netns_out_segments_total",
    ("Tcp", "PassiveOpens"): "netns_passive_opens_total",
    ("Tcp", "ActiveOpens"): "netns_active_opens_total",
}


# The probe records the exporter turns into metrics; the others (per-flow rt_flow, per-call
# aq_listen, per-process aq_accept, rt_resets) are skipped without keeping any state.
ROWS_USED = {"aq_listener", "rt_endpoint", "tw_connect", "tw_close", "ep_loop"}


def log(msg: str) -> None:
    print(f"monitor: {msg}", file=sys.stderr, flush=True)


# --- Probe output, as it comes ------------------------------------------------------


@dataclass
class Record:
    columns: list[str]  # after time_s
    comm: int  # index of the comm column in columns, -1 if none
    counters: list[str]  # columns printed as running totals (from the probe source)
    max_columns: set[str]  # totals that are max() of a running value (first sight is a baseline)


def probe_counters(source: str) -> tuple[dict[str, list[str]], set[tuple[str, str]]]:
    """Which columns a probe prints as '@<record>__<column>[...]' totals, from its source."""
    counters: dict[str, list[str]] = {}
    maxed: set[tuple[str, str]] = set()
    for rec, col, rhs in re.findall(r"@([a-z0-9_]+?)__([a-z0-9_]+)\[[^\]]*\]\s*=\s*(\w+)", source):
        if col not in counters.setdefault(rec, []):
            counters[rec].append(col)
        if rhs == "max":
            maxed.add((rec, col))
    return counters, maxed


class ProbeParser:
    """Turns a probe's lines into (record, row) pairs; totals become per-interval deltas.

    Same rules as collector/probe-to-csv (tests/test_exporter.py checks both give the same
    rows on real probe output): a comm may hold commas, ', ' or a newline, so it is rebuilt
    by position; totals rows are emitted when the next '=== <epoch>' marker arrives, for
    keys whose counters moved."""

    def __init__(self, source: str, only: set[str] | None = None) -> None:
        self.only = only  # records to keep (None: all); the others keep no state
        self.counters, self.maxed = probe_counters(source)
        self.records: dict[str, Record] = {}
        self.cur: dict[tuple[str, str], dict[str, int]] = {}
        self.prev: dict[tuple[str, str], dict[str, int]] = {}
        self.block: set[tuple[str, str]] = set()
        self.now: int | None = None
        self.pending: str | None = None
        self.joins = 0
        self.bad = 0
        self.started = False  # the probe printed its BEGIN line

    # The line protocol -----------------------------------------------------------
    def feed(self, line: str) -> Iterator[tuple[str, dict[str, object]]]:
        if self.pending is not None:
            if (
                not self._complete(self.pending) or (self._has_comm(self.pending) and not self._starts(line))
            ) and self.joins < 16:
                self.pending += "\n" + line
                self.joins += 1
                return
            yield from self._process(self.pending)
        self.pending, self.joins = line, 0
        # Only a line that can hold a comm waits for the next one (which may continue it);
        # the rest are taken at once, so an interval's last row is not a line late.
        if self._complete(line) and not self._has_comm(line):
            yield from self.flush_pending()

    def flush_pending(self) -> Iterator[tuple[str, dict[str, object]]]:
        if self.pending is not None:
            p, self.pending = self.pending, None
            yield from self._process(p)

    def _is_map(self, s: str) -> bool:
        return re.match(r"^@[a-z0-9_]+__[a-z0-9_]+\[", s) is not None

    def _csv_rec(self, s: str) -> str:
        r = s.split(",", 1)[0]
        return r if r in self.records else ""

    def _complete(self, s: str) -> bool:
        if self._is_map(s):
            k = s.rfind("]: ")
            return k > 0 and re.fullmatch(r"-?[0-9]+", s[k + 3 :]) is not None
        r = self._csv_rec(s)
        return not r or s.count(",") >= len(self.records[r].columns) + 1

    def _has_comm(self, s: str) -> bool:
        r = s[1 : s.find("__")] if self._is_map(s) else self._csv_rec(s)
        return bool(r) and r in self.records and self.records[r].comm >= 0

    def _starts(self, s: str) -> bool:
        return s == "" or re.match(r"^(@|#|=== |Attaching [0-9]+ probes)", s) is not None or bool(self._csv_rec(s))

    @staticmethod
    def _rebuild(parts: list[str], want: int, comm: int, sep: str) -> list[str] | None:
        extra = len(parts) - want
        if extra < 0 or (extra > 0 and comm < 0):
            return None
        if extra == 0:
            return parts
        return [*parts[:comm], sep.join(parts[comm : comm + extra + 1]), *parts[comm + extra + 1 :]]

    def _process(self, s: str) -> Iterator[tuple[str, dict[str, object]]]:
        if re.match(r"^#[a-z0-9_]+,", s):
            name, *cols = s[1:].split(",")
            cols = cols[1:]  # time_s
            # Key columns are those before the first column the probe prints as a total
            # (as in probe-to-csv); the rest are counters.
            known = self.counters.get(name, [])
            nkeys = next((i for i, c in enumerate(cols) if c in known), len(cols))
            self.records[name] = Record(
                cols,
                cols.index("comm") if "comm" in cols else -1,
                cols[nkeys:],
                {c for (r, c) in self.maxed if r == name},
            )
            return
        if s.startswith("# ") and ".bt schema=" in s:
            self.started = True
            return
        m = re.match(r"^=== ([0-9]+)$", s)
        if m:
            t = int(m.group(1))
            if t != self.now:
                yield from self._flush()
            self.now = t
            return
        if self._is_map(s):
            name = s[1 : s.index("[")]
            rec, _, col = name.partition("__")
            k = s.rfind("]: ")
            val = s[k + 3 :] if k > 0 else ""
            if rec not in self.records or not re.fullmatch(r"-?[0-9]+", val):
                self.bad += 1
                return
            if self.only is not None and rec not in self.only:
                return
            r = self.records[rec]
            if col not in r.counters:  # an older probe's column: learn it (as probe-to-csv does)
                self.counters.setdefault(rec, []).append(col)
                nk = next(i for i, c in enumerate(r.columns) if c in self.counters[rec] or c == col)
                r.counters = r.columns[nk:]
            nkeys = len(r.columns) - len(r.counters)
            parts = self._rebuild(s[s.index("[") + 1 : k].split(", "), nkeys, r.comm, ", ")
            if parts is None:
                self.bad += 1
                return
            key = (rec, "\x1f".join(parts))
            self.cur.setdefault(key, {})[col] = int(val)
            self.block.add(key)
            return
        if s == "" or s.startswith("#") or s.startswith("Attaching ") or s.startswith("@"):
            return
        rec = self._csv_rec(s)
        if not rec:
            self.bad += 1
            return
        if self.only is not None and rec not in self.only:
            return
        r = self.records[rec]
        parts = self._rebuild(s[len(rec) + 1 :].split(","), len(r.columns) + 1, r.comm + 1 if r.comm >= 0 else -1, ",")
        if parts is None:
            self.bad += 1
            return
        row: dict[str, object] = {"time_s": _num(parts[0])}
        for c, v in zip(r.columns, parts[1:], strict=True):
            row[c] = v if c == "comm" else _num(v)
        yield rec, row

    def _flush(self) -> Iterator[tuple[str, dict[str, object]]]:
        if self.now is None:
            return
        for key in sorted(self.block):
            rec, joined = key
            r = self.records[rec]
            cur, prev = self.cur[key], self.prev.setdefault(key, {})
            row: dict[str, object] = {"time_s": self.now}
            for c, v in zip([c for c in r.columns if c not in r.counters], joined.split("\x1f"), strict=True):
                row[c] = v if c == "comm" else _num(v)
            moved = False
            for c in r.counters:
                if c in r.max_columns and c not in prev and c in cur:
                    prev[c] = cur[c]  # a running value seen for the first time: its baseline
                d = cur.get(c, 0) - prev.get(c, 0)
                prev[c] = cur.get(c, 0)
                moved = moved or d != 0
                row[c] = d
            if moved:
                yield rec, row
        self.block = set()


def _num(v: str) -> object:
    try:
        return int(v)
    except ValueError:
        return v


# --- Objects with bounded cardinality --------------------------------------------


@dataclass
class Obj:
    labels: tuple[str, ...]
    counters: dict[str, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    last_active: float = 0.0


class Family:
    """Objects of one family: up to top_n exported, the rest summed into 'other'.

    An exported object's counters count from its admission (a new series); the other
    series only ever grows, so both stay counters. Admission happens at first sight
    while a slot is free; at each write an outsider whose score is more than twice the
    weakest member's takes its slot (the member's series ends). Objects idle for ttl
    seconds are dropped. At most 4 * top_n objects are remembered."""

    def __init__(self, name: str, top_n: int, ttl: float) -> None:
        self.name, self.top_n, self.ttl = name, top_n, ttl
        self.objs: dict[tuple[str, ...], Obj] = {}
        self.exported: set[tuple[str, ...]] = set()
        self.other: dict[str, float] = {}
        # Every counter of the family, from 0 at admission: the series exist before they move.
        labels = OBJECT_LABELS[name]
        self.counter_names = [
            m.name.removeprefix(PREFIX) for m in METRICS.values() if m.kind == "counter" and m.labels == labels
        ]

    def add(
        self,
        labels: tuple[str, ...],
        now: float,
        counters: dict[str, float],
        score: float,
        gauges: dict[str, float] | None = None,
    ) -> None:
        o = self.objs.get(labels)
        if o is None:
            o = self.objs[labels] = Obj(labels)
            if len(self.exported) < self.top_n:
                self._admit(o)
        o.last_active = now
        o.score += score
        if gauges:
            o.gauges.update(gauges)
        target = o.counters if labels in self.exported else self.other
        for k, v in counters.items():
            target[k] = target.get(k, 0) + v

    def set_gauges(self, labels: tuple[str, ...], now: float, gauges: dict[str, float]) -> None:
        """Gauges only (a sampled state): does not make an idle object active."""
        o = self.objs.get(labels)
        if o is None:
            self.add(labels, now, {}, 0.0, gauges)
            return
        o.gauges.update(gauges)

    def settle(self, now: float) -> None:
        for labels, o in list(self.objs.items()):
            if now - o.last_active > self.ttl:
                del self.objs[labels]
                self.exported.discard(labels)
        outsiders = sorted((o for o in self.objs.values() if o.labels not in self.exported), key=lambda o: -o.score)
        for o in outsiders:
            if len(self.exported) < self.top_n:
                self._admit(o)
                continue
            weakest = min((self.objs[k] for k in self.exported), key=lambda x: x.score)
            if o.score > 2 * weakest.score:
                self.exported.discard(weakest.labels)
                weakest.counters = {}
                self._admit(o)
        if len(self.objs) > 4 * self.top_n:
            idle = sorted((o for o in self.objs.values() if o.labels not in self.exported), key=lambda o: o.last_active)
            for o in idle[: len(self.objs) - 4 * self.top_n]:
                del self.objs[o.labels]

    def _admit(self, o: Obj) -> None:
        self.exported.add(o.labels)
        o.counters = dict.fromkeys(self.counter_names, 0)

    def clear_gauges(self, names: tuple[str, ...]) -> None:
        for o in self.objs.values():
            for n in names:
                o.gauges.pop(n, None)


# --- Namespaces ------------------------------------------------------------------------


def _netns_inode(pid: str | int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


class Namespaces:
    """Every network namespace with a process in it: one pid each, to read its /proc/<pid>/net."""

    def __init__(self) -> None:
        self.pid: dict[int, int] = {}
        self.names: dict[int, str] = {}
        self.port_range: dict[int, tuple[int, int]] = {}
        self.scanned = 0.0
        self.host = _netns_inode("self") or 0  # the namespace the exporter runs in (pid 1 may be out of reach)

    def scan(self, now: float, every: float = 30.0) -> None:
        if now - self.scanned < every and all(os.path.exists(f"/proc/{p}") for p in self.pid.values()):
            return
        self.scanned = now
        pids: dict[int, int] = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                ino = _netns_inode(d)
                if ino is not None and ino not in pids:
                    pids[ino] = int(d)
        self.pid = pids
        names: dict[int, str] = {self.host: "host"}
        try:
            for n in os.listdir("/run/netns"):
                with contextlib.suppress(OSError):
                    names[os.stat(f"/run/netns/{n}").st_ino] = n
        except OSError:
            pass
        self.names = names
        for ino in list(self.port_range):
            if ino not in pids:
                del self.port_range[ino]

    def counters(self, ino: int) -> dict[str, int]:
        pid = self.pid.get(ino)
        if pid is None:
            return {}
        out: dict[str, int] = {}
        for f in ("netstat", "snmp"):
            try:
                lines = Path(f"/proc/{pid}/net/{f}").read_text().splitlines()
            except OSError:
                return {}
            for head, vals in zip(lines[::2], lines[1::2], strict=False):
                group, _, names = head.partition(": ")
                values = vals.partition(": ")[2].split()
                for n, v in zip(names.split(), values, strict=False):
                    metric = NETNS_COUNTERS.get((group, n))
                    if metric:
                        out[metric] = int(v)
        return out

    def ports(self, ino: int) -> tuple[int, int] | None:
        if ino not in self.port_range and ino in self.pid:
            r = subprocess.run(
                ["nsenter", f"--net=/proc/{self.pid[ino]}/ns/net", "cat", "/proc/sys/net/ipv4/ip_local_port_range"],
                capture_output=True,
                text=True,
                check=False,
            )
            lo_hi = r.stdout.split()
            if r.returncode == 0 and len(lo_hi) == 2:
                self.port_range[ino] = (int(lo_hi[0]), int(lo_hi[1]))
        return self.port_range.get(ino)

    def sockets(self, ino: int) -> dict[tuple[str, str], tuple[int, int]]:
        """(raddr, rport) -> (ports in use, TIME_WAIT) for sockets on ephemeral local ports."""
        pid, rng = self.pid.get(ino), self.ports(ino)
        if pid is None or rng is None:
            return {}
        out: dict[tuple[str, str], list[int]] = {}
        for f in ("tcp", "tcp6"):
            try:
                with open(f"/proc/{pid}/net/{f}") as fh:
                    next(fh, None)
                    for line in fh:
                        p = line.split(None, 4)
                        if len(p) < 4 or p[3] == "0A":  # LISTEN
                            continue
                        lport = int(p[1].rsplit(":", 1)[1], 16)
                        if not rng[0] <= lport <= rng[1]:
                            continue
                        raddr, rport = p[2].rsplit(":", 1)
                        c = out.setdefault((_hexaddr(raddr), str(int(rport, 16))), [0, 0])
                        c[0] += 1
                        c[1] += p[3] == "06"
            except OSError:
                continue
        return {k: (v[0], v[1]) for k, v in out.items()}


def _hexaddr(h: str) -> str:
    b = bytes.fromhex(h)
    if len(b) == 4:
        return ".".join(str(x) for x in b[::-1])
    words = [b[i : i + 4][::-1] for i in range(0, 16, 4)]
    raw = b"".join(words)
    if raw[:12] == b"\0" * 10 + b"\xff\xff":
        return ".".join(str(x) for x in raw[12:])
    import ipaddress

    return str(ipaddress.IPv6Address(raw))


# --- Probes ------------------------------------------------------------------------------


@dataclass
class Probe:
    family: str
    file: Path
    tier: str
    interval: int
    proc: subprocess.Popen[bytes] | None = None
    parser: ProbeParser | None = None
    buf: bytes = b""
    started_at: float = 0.0
    restarts: dict[str, int] = field(default_factory=dict)
    misses_done: int = 0  # recursion misses of earlier processes
    misses_now: int = 0
    failures_in_row: int = 0
    next_start: float = 0.0
    err_path: Path | None = None

    def up(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and self.parser is not None and self.parser.started


def _die_with_parent() -> None:
    """In the child: SIGTERM when the exporter dies, even by SIGKILL (prctl PR_SET_PDEATHSIG),
    so no probe outlives it."""
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGTERM)


def _prog_ids(pid: int) -> list[int]:
    ids = []
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return ids
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:bpf-prog":
                continue
            for line in Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines():
                if line.startswith("prog_id:"):
                    ids.append(int(line.split()[1]))
        except OSError:
            continue
    return ids


def recursion_misses(pids: dict[str, int]) -> dict[str, int]:
    """Per probe: the sum of its programs' recursion misses (bpftool prog show)."""
    wanted = {i: fam for fam, pid in pids.items() for i in _prog_ids(pid)}
    if not wanted:
        return {}
    r = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, check=False)
    out: dict[str, int] = {}
    try:
        progs = json.loads(r.stdout or "[]")
    except json.JSONDecodeError:
        return {}
    for p in progs:
        fam = wanted.get(p.get("id"))
        if fam:
            out[fam] = out.get(fam, 0) + int(p.get("recursion_misses", 0))
    return out


def rss_bytes(pid: int | str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# --- The exporter --------------------------------------------------------------------------


def _esc(v: object) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fmt(v: float) -> str:
    if isinstance(v, float) and not v.is_integer():
        return repr(round(v, 9))
    return str(int(v))


class Exporter:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.prom_dir)
        self.state = Path(args.state_dir)
        self.top = args.top
        self.fams = {f: Family(f, args.top, args.ttl) for f in OBJECT_LABELS}
        self.ns = Namespaces()
        self.ns_seen: dict[int, float] = {}
        self.probes: list[Probe] = []
        for spec in args.probe:
            fam, _, rest = spec.partition("=")
            path, _, tier = rest.partition(":")
            self.probes.append(Probe(fam, Path(path), tier or "unknown", args.interval))
        self.sel = selectors.DefaultSelector()
        self.stopping = False
        self.socket_scan = 0.0
        self.last_misses = 0.0
        self.series = 0

    # Probes -------------------------------------------------------------------------
    def start(self, p: Probe, reason: str | None) -> None:
        if reason:
            p.restarts[reason] = p.restarts.get(reason, 0) + 1
        err = self.state / f"probe_{p.family}.err"
        p.err_path = err
        with open(err, "wb") as fh:
            p.proc = subprocess.Popen(
                ["bpftrace", str(p.file), str(p.interval)],
                stdout=subprocess.PIPE,
                stderr=fh,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        assert p.proc.stdout is not None
        os.set_blocking(p.proc.stdout.fileno(), False)
        self.sel.register(p.proc.stdout, selectors.EVENT_READ, p)
        p.parser = ProbeParser(p.file.read_text(), ROWS_USED)
        p.buf = b""
        p.started_at = time.monotonic()

    def stop(self, p: Probe) -> None:
        if p.proc is None:
            return
        proc, p.proc = p.proc, None
        p.misses_done += p.misses_now
        p.misses_now = 0
        if proc.stdout is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(proc.stdout)
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGINT)
                proc.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def supervise(self, now: float) -> None:
        for p in self.probes:
            if p.proc is None:
                if now >= p.next_start:
                    self.start(p, "died" if p.failures_in_row else None)
                continue
            if p.proc.poll() is not None:
                self.drain(p)
                note = ""
                if p.err_path and p.err_path.exists():
                    note = " ".join(
                        line for line in p.err_path.read_text(errors="replace").splitlines() if "ERROR" in line
                    )[:300]
                p.failures_in_row += 1
                # Back off when it keeps failing (a kernel feature gone, say): 2, 4, ... 60 s.
                p.next_start = now + min(60, 2**p.failures_in_row)
                why = f": {note}" if note else ""
                log(f"probe {p.family} exited (code {p.proc.returncode}){why}; restart in {p.next_start - now:.0f} s")
                self.stop(p)
                continue
            if p.parser and p.parser.started:
                p.failures_in_row = 0
            if self.args.segment and now - p.started_at >= self.args.segment and p.up():
                # Planned restart: a fresh process with empty maps (a map holds 4096 keys;
                # threads and flows come and go for days). Loses the last partial interval.
                self.stop(p)
                self.start(p, "segment")

    def drain(self, p: Probe) -> None:
        if p.proc is None or p.proc.stdout is None:
            return
        try:
            chunk = os.read(p.proc.stdout.fileno(), 1 << 16)
        except (BlockingIOError, OSError):
            return
        while chunk:
            self.take(p, chunk)
            try:
                chunk = os.read(p.proc.stdout.fileno(), 1 << 16)
            except (BlockingIOError, OSError):
                break

    def take(self, p: Probe, chunk: bytes) -> None:
        p.buf += chunk
        *lines, p.buf = p.buf.split(b"\n")
        assert p.parser is not None
        for raw in lines:
            for rec, row in p.parser.feed(raw.decode("utf-8", "replace")):
                self.row(rec, row)
        if len(p.buf) > 1 << 20:  # a line without end: drop it, keep going
            p.buf = b""

    # Rows -> objects ----------------------------------------------------------------
    def row(self, rec: str, r: dict[str, object]) -> None:
        now = time.monotonic()
        g = self.fams
        if rec == "aq_listener":
            ns = int(r["netns"])  # type: ignore[arg-type]
            self.ns_seen[ns] = now
            key = (str(ns), str(r["laddr"]), str(r["lport"]))
            o = g["listener"].objs.get(key)
            depth_max = int(r["depth_max"])  # type: ignore[arg-type]
            if o is not None and o.gauges.get("_fresh"):  # two intervals before one write
                depth_max = max(depth_max, int(o.gauges["listener_queue_depth_max"]))
            g["listener"].add(
                key,
                now,
                {
                    "listener_queue_full_total": int(r["full_events"]),  # type: ignore[arg-type]
                    "listener_enqueued_total": int(r["enqueues"]),  # type: ignore[arg-type]
                    "listener_accepted_total": int(r["accepted"]),  # type: ignore[arg-type]
                },
                1000.0 * int(r["full_events"]) + int(r["enqueues"]),  # type: ignore[arg-type]
                {
                    "listener_queue_depth_max": depth_max,
                    "listener_queue_depth": int(r["depth_now"]),  # type: ignore[arg-type]
                    "listener_queue_limit": int(r["limit"]),  # type: ignore[arg-type]
                    "_fresh": 1,
                },
            )
        elif rec == "rt_endpoint":
            ns = int(r["netns"])  # type: ignore[arg-type]
            self.ns_seen[ns] = now
            side = "server" if int(r["service_local"]) else "client"  # type: ignore[arg-type]
            c = {
                "endpoint_retrans_data_segments_total": int(r["data_segs"]),  # type: ignore[arg-type]
                "endpoint_retrans_syn_segments_total": int(r["syn_segs"]),  # type: ignore[arg-type]
                "endpoint_retrans_synack_segments_total": int(r["synack_segs"]),  # type: ignore[arg-type]
            }
            g["endpoint"].add((str(ns), str(r["raddr"]), str(r["service_port"]), side), now, c, float(sum(c.values())))
        elif rec == "tw_connect":
            ns = int(r["netns"])  # type: ignore[arg-type]
            self.ns_seen[ns] = now
            n = int(r["failures"])  # type: ignore[arg-type]
            c = {
                "destination_connect_failures_total": n,
                "destination_eaddrnotavail_total": n if int(r["errno"]) == EADDRNOTAVAIL else 0,  # type: ignore[arg-type]
            }
            g["destination"].add((str(ns), str(r["raddr"]), str(r["rport"])), now, c, 100.0 * n)
        elif rec == "tw_close":
            if int(r["service_local"]):  # type: ignore[arg-type]
                return  # we are the server: the destination is not ours
            ns = int(r["netns"])  # type: ignore[arg-type]
            n = int(r["active_closes"])  # type: ignore[arg-type]
            if n:
                g["destination"].add(
                    (str(ns), str(r["raddr"]), str(r["service_port"])),
                    now,
                    {"destination_active_closes_total": n},
                    float(n) / 100,
                )
        elif rec == "ep_loop":
            key = (str(r["pid"]), str(r["tid"]), str(r["comm"]))
            calls = int(r["calls"])  # type: ignore[arg-type]
            empty = int(r["ret_zero"])  # type: ignore[arg-type]
            events = int(r["events_sum"])  # type: ignore[arg-type]
            woke = calls - empty - int(r["errors"])  # type: ignore[arg-type]
            wait_ns = int(r["wait_ns_sum"])  # type: ignore[arg-type]
            cpu_ns = r.get("cpu_ns")
            c = {
                "loop_epoll_calls_total": calls,
                "loop_epoll_events_total": events,
                "loop_epoll_empty_total": empty,
                "loop_blocked_seconds_total": wait_ns / 1e9,
                "loop_cpu_seconds_total": (int(cpu_ns) / 1e9) if isinstance(cpu_ns, int) else 0.0,
            }
            span = 1e9 * self.args.interval
            g["loop"].add(
                key,
                now,
                c,
                c["loop_cpu_seconds_total"] + calls / 1e6,
                {
                    "loop_blocked_ratio": min(1.0, wait_ns / span),
                    "loop_events_per_wakeup": (events / woke) if woke > 0 else 0.0,
                    "_fresh": 1,
                },
            )

    # Writing -------------------------------------------------------------------------
    def scan_sockets(self, now: float) -> None:
        if now - self.socket_scan < self.args.socket_scan:
            return
        self.socket_scan = now
        fam = self.fams["destination"]
        for o in fam.objs.values():
            o.gauges.pop("destination_time_wait_sockets", None)
            o.gauges.pop("destination_ports_in_use", None)
        for ino in self.netns_to_watch():
            socks = self.ns.sockets(ino)
            # Only destinations with enough ports held to matter get a series from the scan alone.
            for (raddr, rport), (used, tw) in sorted(socks.items(), key=lambda kv: -kv[1][0])[: self.top]:
                key = (str(ino), raddr, rport)
                if key in fam.objs or used >= self.args.min_ports:
                    fam.set_gauges(key, now, {"destination_ports_in_use": used, "destination_time_wait_sockets": tw})
                    fam.objs[key].score += used / 1000

    def netns_to_watch(self) -> list[int]:
        """At most --top namespaces: the exporter's own, those of exported objects (an alert
        joins a listener to its namespace's counters), then those ip-netns names, then the
        others the probes saw within --ttl."""
        now = time.monotonic()
        for ino, t in list(self.ns_seen.items()):
            if now - t > self.args.ttl:
                del self.ns_seen[ino]
        of_objects = sorted(
            {int(k[0]) for f in ("listener", "endpoint", "destination") for k in self.fams[f].exported},
            key=lambda i: -self.ns_seen.get(i, 0.0),
        )
        keep = [self.ns.host, *of_objects, *self.ns.names, *sorted(self.ns_seen, key=lambda i: -self.ns_seen[i])]
        out: list[int] = []
        for i in keep:
            if i not in out and i in self.ns.pid:
                out.append(i)
        return out[: self.top]

    def write(self, now: float) -> None:
        # A thread that exited has no more numbers: its series end now, not after --ttl.
        loops = self.fams["loop"]
        for key in [k for k in loops.objs if not os.path.exists(f"/proc/{k[0]}/task/{k[1]}")]:
            del loops.objs[key]
            loops.exported.discard(key)
        for f in self.fams.values():
            f.settle(now)
        # Gauges describe the last interval. The probe's clock and ours are not in phase, so
        # one write can fall before the interval's row and the next get two: a gauge is
        # reset only after two writes without a row. Then a listener had no arrivals,
        # accepts or queue (depth 0); a thread made no sampled call, so it has no ratio to
        # show (it may be blocked in one long wait, counted when the call returns): no
        # gauge rather than a 0.
        for fname in ("listener", "loop"):
            for o in self.fams[fname].objs.values():
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
        lines: dict[str, list[str]] = {f: [] for f in FILES}
        values: dict[str, list[tuple[dict[str, str], float]]] = {m: [] for m in METRICS}

        def put(metric: str, labels: dict[str, str], v: float) -> None:
            values[PREFIX + metric].append((labels, v))

        for fname, fam in self.fams.items():
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
        for ino in self.netns_to_watch():
            lab = {"netns": str(ino)}
            for k, v in self.ns.counters(ino).items():
                put(k, lab, v)
            rng = self.ns.ports(ino)
            if rng:
                put("netns_ephemeral_ports", lab, rng[1] - rng[0] + 1)
            put("netns_info", {"netns": str(ino), "name": self.ns.names.get(ino, "")}, 1)
        if now - self.last_misses >= 10:
            self.last_misses = now
            pids = {p.family: p.proc.pid for p in self.probes if p.proc is not None and p.proc.poll() is None}
            for fam, n in recursion_misses(pids).items():
                next(p for p in self.probes if p.family == fam).misses_now = n
        for p in self.probes:
            put("probe_up", {"probe": p.family, "tier": p.tier}, 1 if p.up() else 0)
            for reason in ("died", "segment"):
                put("probe_restarts_total", {"probe": p.family, "reason": reason}, p.restarts.get(reason, 0))
            put("probe_recursion_misses_total", {"probe": p.family}, p.misses_done + p.misses_now)
            if p.proc is not None:
                put("exporter_resident_bytes", {"process": f"probe_{p.family}"}, rss_bytes(p.proc.pid))
        put("exporter_resident_bytes", {"process": "exporter"}, rss_bytes("self"))
        put("exporter_top_n", {}, self.top)
        put("exporter_series", {}, self.series)
        series = 0
        for name, m in METRICS.items():
            if not values[name]:
                continue
            out = lines[m.file]
            out.append(f"# HELP {name} {m.help}")
            out.append(f"# TYPE {name} {m.kind}")
            for lab, v in sorted(values[name], key=lambda x: sorted(x[0].items())):
                ls = ",".join(f'{k}="{_esc(lab[k])}"' for k in m.labels)
                out.append(f"{name}{{{ls}}} {_fmt(v)}" if ls else f"{name} {_fmt(v)}")
                series += 1
        self.series = series
        for f, body in lines.items():
            path = self.out / f"{PREFIX}{f}.prom"
            tmp = self.out / f".{PREFIX}{f}.prom.tmp"
            tmp.write_text("\n".join(body) + "\n" if body else "")
            os.replace(tmp, path)

    # Main loop ----------------------------------------------------------------------------
    def run(self) -> int:
        self.out.mkdir(parents=True, exist_ok=True)
        self.state.mkdir(parents=True, exist_ok=True)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        t0 = time.monotonic()
        next_write = t0 + self.args.interval
        log(
            f"writing {', '.join(PREFIX + f + '.prom' for f in FILES)} into {self.out} every {self.args.interval} s; "
            f"probes: {', '.join(f'{p.family} ({p.tier})' for p in self.probes) or 'none'}; top {self.top} per family"
        )
        try:
            while not self.stopping:
                now = time.monotonic()
                if self.args.duration and now - t0 >= self.args.duration:
                    break
                self.supervise(now)
                for key, _ in self.sel.select(timeout=max(0.05, min(0.5, next_write - now))):
                    self.drain(key.data)
                now = time.monotonic()
                if now >= next_write:
                    self.ns.scan(now)
                    self.scan_sockets(now)
                    self.write(now)
                    next_write += self.args.interval
                    if next_write < now:
                        next_write = now + self.args.interval
                    ready = Path(self.state) / "ready"
                    if not ready.exists() and all(p.up() for p in self.probes):
                        ready.write_text(f"{os.getpid()}\n")
                        log("recording: every probe is up")
        finally:
            for p in self.probes:
                self.stop(p)
            if not self.args.keep_files:
                # Stale numbers are worse than none: node_exporter would serve them forever.
                for f in FILES:
                    (self.out / f"{PREFIX}{f}.prom").unlink(missing_ok=True)
            (Path(self.state) / "ready").unlink(missing_ok=True)
        log("stopped")
        return 0

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stopping = True


def metrics_doc() -> str:
    """monitor/metrics.md: the metric list with labels, from METRICS (a test keeps it current)."""
    out = [
        "# tq metrics (scripts/monitor)",
        "",
        "Generated by `python3 monitor/exporter.py --metrics-doc`; do not edit by hand.",
        "Every file is `tq_<file>.prom` in the textfile directory. Object labels per family:",
        "",
    ]
    for fam, labels in OBJECT_LABELS.items():
        out.append(f"- {fam}: {', '.join(labels)}")
    out += [
        "",
        "At most --top objects per family (default 20) get their own series; the rest are summed into",
        'one series whose object labels all read "other". An object idle for --ttl seconds is dropped.',
    ]
    out += ["", "| metric | type | labels | file | meaning |", "|---|---|---|---|---|"]
    for m in METRICS.values():
        out.append(f"| `{m.name}` | {m.kind} | {', '.join(m.labels) or '-'} | {m.file} | {m.help} |")
    return "\n".join(out) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="monitor/exporter.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--prom-dir", required=True, help="node_exporter textfile collector directory")
    p.add_argument("--state-dir", required=True, help="probe stderr files and the ready marker")
    p.add_argument("--probe", action="append", default=[], metavar="FAMILY=FILE:TIER", help="a probe to run (repeat)")
    p.add_argument("--doctor", help="collector/doctor's JSON: run the tier it picked for each of --families")
    p.add_argument(
        "--families", default=",".join(FAMILY_NAMES), help="with --doctor: families to run"
    )
    p.add_argument("--pack-root", default=str(Path(__file__).resolve().parent.parent), help="where probes/ is")
    p.add_argument("--interval", type=int, default=5, help="probe interval and write period, seconds")
    p.add_argument("--top", type=int, default=20, help="objects per family with their own series")
    p.add_argument("--ttl", type=float, default=600, help="drop an object idle this long, seconds")
    p.add_argument("--segment", type=float, default=3600, help="restart each probe this often, seconds (0 = never)")
    p.add_argument("--socket-scan", type=float, default=10, help="read the socket tables this often, seconds")
    p.add_argument(
        "--min-ports",
        type=int,
        default=100,
        help="a destination gets a series from the socket scan alone when it holds this many ports",
    )
    p.add_argument("--duration", type=float, default=0, help="stop after this long, seconds (0 = run until a signal)")
    p.add_argument("--keep-files", action="store_true", help="leave the .prom files at exit")
    a = p.parse_args(argv)
    if a.interval < 1 or a.top < 1:
        p.error("--interval and --top must be at least 1")
    if a.doctor:
        try:
            fams = json.loads(Path(a.doctor).read_text()).get("families", {})
        except (OSError, json.JSONDecodeError) as e:
            p.error(f"cannot read {a.doctor}: {e}")
        for f in [x for x in a.families.split(",") if x]:
            pick = fams.get(f)
            if not pick or not pick.get("file"):
                log(f"probe {f} cannot run on this kernel (no runnable tier in {a.doctor}): not exported")
                continue
            a.probe.append(f"{f}={Path(a.pack_root) / pick['file']}:{pick.get('tier', 'unknown')}")
    return a


def main(argv: list[str] | None = None) -> int:
    if (argv if argv is not None else sys.argv[1:]) == ["--metrics-doc"]:
        sys.stdout.write(metrics_doc())
        return 0
    return Exporter(parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
