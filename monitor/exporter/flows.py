"""Flows from sock_diag, with no probe: per TCP socket of the watched namespaces the kernel's own
clocks of what held its sender back (tcp_info busy, rwnd_limited, sndbuf_limited), its queues and
its buffers (skmem). collector/sample-netns --buffers-of reads them, the one reader of flows, as
capture's sock_buffers.csv: only the sockets that sent since the last scan (their busy clock moved)
or hold unread data, so a host of idle connections costs its listing, not a series each."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

from .objects import Family, Key
from .sample import Namespaces
from .sampler import ask

CLOCKS = {
    "busy_ms": "flow_busy_seconds_total",
    "rwnd_limited_ms": "flow_rwnd_limited_seconds_total",
    "sndbuf_limited_ms": "flow_sndbuf_limited_seconds_total",
}
GAUGES = {
    "recv_q": "flow_recv_queue_bytes",
    "send_q": "flow_send_queue_bytes",
    "rcvbuf": "flow_rcvbuf_bytes",
    "sndbuf": "flow_sndbuf_bytes",
}


class FlowScan:
    """Each scan: the flows of the watched namespaces that moved. A clock's increase since the
    flow's last row becomes a counter increment. The first scan of a namespace lists every flow
    in it: a baseline, no object; a flow first seen later is new, and all of its clocks count.
    A flow not listed has empty queues now."""

    def __init__(self, sampler: Path, state: Path) -> None:
        self.sampler, self.state = sampler, state  # sample-netns keeps each namespace's clocks here
        self.last: dict[Key, dict[str, int]] = {}
        self.scanned: set[str] = set()  # namespaces scanned before

    def rows(self, ns: Namespaces, inos: list[int]) -> list[dict[str, str]]:
        pids = ns.pid_args(inos)
        if not pids:
            return []
        self.state.mkdir(parents=True, exist_ok=True)
        out = ask(self.sampler, "--buffers-of", "--state", str(self.state), *pids)
        return list(csv.DictReader(io.StringIO(out)))

    def scan(self, fam: Family, ns: Namespaces, inos: list[int], now: float) -> None:
        seen: set[Key] = set()
        for row in self.rows(ns, inos):
            key = (row["netns"], row["laddr"], row["lport"], row["raddr"], row["rport"])
            if key in seen or not all(row[c].isdigit() for c in CLOCKS):
                continue
            seen.add(key)
            clocks = {c: int(row[c]) for c in CLOCKS}
            last = self.last.get(key)
            self.last[key] = clocks
            if last is None and row["netns"] not in self.scanned:
                continue  # the first listing of its namespace: a baseline, every flow in it
            last = last or dict.fromkeys(CLOCKS, 0)
            inc = {CLOCKS[c]: max(0, clocks[c] - last[c]) / 1000 for c in CLOCKS}
            gauges = {m: int(row[c]) for c, m in GAUGES.items() if row[c].isdigit()}
            limited = inc["flow_rwnd_limited_seconds_total"] + inc["flow_sndbuf_limited_seconds_total"]
            fam.add(key, now, {k: v for k, v in inc.items() if v}, 1000.0 * limited + inc["flow_busy_seconds_total"],
                    gauges)  # fmt: skip
        scanned = {str(i) for i in inos}
        for key, o in fam.objs.items():
            if key not in seen and key[0] in scanned:
                o.gauges.update({"flow_recv_queue_bytes": 0, "flow_send_queue_bytes": 0})
        self.scanned |= scanned
        for f in self.state.glob("*.buffers"):
            if f.name.split(".", 1)[0] not in scanned:
                f.unlink(missing_ok=True)
        for key in [k for k in self.last if k[0] not in scanned]:
            del self.last[key]

    def close(self) -> None:
        """The clocks go with the exporter."""
        shutil.rmtree(self.state, ignore_errors=True)
