"""Socket buffers per flow: the kernel's own clocks of what held each sender back (sock_buffers.csv,
tcp_info through ss -tinm), the probe's writes and reads (sb_flow.csv), and the namespace counters
that go with them.

A flow is seen from each local socket: its writer's (the sender, whose busy clock moves) and its
reader's (the receiver, whose queue fills when it reads slowly). Between two local namespaces both
are seen, and `pair` joins them by their addresses and ports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from . import RunLike
from .counters import total_delta

KEY = ["netns", "laddr", "lport", "raddr", "rport"]
CLOCKS = ["busy_ms", "rwnd_limited_ms", "sndbuf_limited_ms", "bytes_acked", "bytes_received", "drops",
          "retrans_total", "dsack_dups"]  # fmt: skip
# The receiver's side of a limited flow: zero windows, what it dropped or pruned.
RECEIVER_COUNTERS = (
    "TCPToZeroWindowAdv",
    "TCPFromZeroWindowAdv",
    "TCPWantZeroWindowAdv",
    "TCPZeroWindowDrop",
    "TCPRcvQDrop",
    "PruneCalled",
    "RcvPruned",
    "TCPRcvCollapsed",
    "TCPBacklogDrop",
)
# The sender's: probes of a closed window.
SENDER_COUNTERS = ("TCPWinProbe",)
# Either side's: TCP's memory above tcp_mem's pressure threshold (host-wide, counted per namespace).
PRESSURE_COUNTERS = ("TCPMemoryPressures", "TCPMemoryPressuresChrono")
PROBE_WRITES = ["limited_writes", "writes_blocked", "writes_rwnd_limited", "writes_sndbuf_limited",
                "sndbuf_locked_writes", "sndbuf_sum", "wqueue_sum"]  # fmt: skip
PROBE_READS = ["noted_reads", "reads_zero_window", "reads_half_full", "rcvbuf_locked_reads", "rcvbuf_sum", "rcvq_sum"]


@dataclass
class Side:
    """One local socket of a flow over the capture: its clocks' deltas and its queues."""

    netns: int
    laddr: str
    lport: int
    raddr: str
    rport: int
    t0: float  # its baseline: the first listing of its namespace, or its own first row (a new flow: 0)
    t1: float
    rows: int
    deltas: dict[str, int]
    recv_q_mean: float  # over the samples of its window, a sample without its row counting 0
    recv_q_max: int
    send_q_max: int
    rcvbuf: int | None
    sndbuf: int | None
    minrtt_ms: float | None
    rtt_ms: float | None
    # Of its rows in the window, the share whose send buffer was full (sk_wmem_queued >= sk_sndbuf)
    # with nothing unsent: all it holds is in flight, waiting for acknowledgements to free room.
    sndbuf_full_share: float | None = None
    probe: dict[str, int] = field(default_factory=dict)

    @property
    def key(self) -> tuple[int, str, int, str, int]:
        return (self.netns, self.laddr, self.lport, self.raddr, self.rport)

    @property
    def span_s(self) -> float:
        return self.t1 - self.t0

    def share(self, clock: str) -> float | None:
        """Of the busy time, the share this clock (rwnd_limited_ms, sndbuf_limited_ms) held the sender back."""
        busy = self.deltas["busy_ms"]
        return self.deltas[clock] / busy if busy > 0 else None

    @property
    def rate_bytes_per_s(self) -> float | None:
        """What the peer acknowledged per second over its window."""
        return self.deltas["bytes_acked"] / self.span_s if self.span_s > 0 else None


def first_sample(run: RunLike, netns: int) -> tuple[float, float] | None:
    """The namespace's first sample, from its start to the next one's (every flow listed then is a
    baseline, not a new flow; a listing is stamped when ss ran, after the sample's counters)."""
    c = run.table("counters")
    t = sorted(set(c.loc[c["netns"] == netns, "time_s"]))
    if not t:
        return None
    return float(t[0]), float(t[1]) if len(t) > 1 else float(t[0]) + float(run.metadata.get("interval_s") or 1)


def _samples_between(run: RunLike, netns: int, t0: float, t1: float) -> int:
    """Samples of the namespace in (t0, t1]: the denominator of a queue's mean."""
    c = run.table("counters")
    t = c.loc[c["netns"] == netns, "time_s"].drop_duplicates()
    return int(((t > t0 + 1e-3) & (t <= t1 + 1e-3)).sum())


def _side(run: RunLike, key: tuple[Any, ...], rows: pd.DataFrame, first: tuple[float, float] | None) -> Side:
    rows = rows.sort_values("time_s")
    head, tail = rows.iloc[0], rows.iloc[-1]
    baseline = first is not None and first[0] - 0.01 < float(head["time_s"]) < first[1]
    base = {c: (int(head[c]) if baseline and pd.notna(head[c]) else 0) for c in CLOCKS}
    deltas = {c: int(tail[c]) - base[c] if pd.notna(tail[c]) else 0 for c in CLOCKS}
    t0, t1 = float(head["time_s"]), float(tail["time_s"])
    if not baseline:
        # A flow that began after the first listing: its clocks ran from its start, at least
        # its busy time before its first row.
        t0 -= int(head["busy_ms"]) / 1000
    after = rows[rows["time_s"] > t0 + 1e-3] if baseline else rows
    n = max(_samples_between(run, int(key[0]), float(head["time_s"]) - (0 if baseline else 1), t1), 1)
    minrtt = rows["minrtt_ms"].dropna()
    rtt = rows["rtt_ms"].dropna()

    def last(col: str) -> int | None:
        v = rows[col].dropna()
        return int(v.iloc[-1]) if not v.empty else None

    return Side(
        netns=int(key[0]), laddr=str(key[1]), lport=int(key[2]), raddr=str(key[3]), rport=int(key[4]),
        t0=t0, t1=t1, rows=len(rows), deltas=deltas,
        recv_q_mean=float(after["recv_q"].sum()) / n,
        recv_q_max=int(rows["recv_q"].max()), send_q_max=int(rows["send_q"].max()),
        rcvbuf=last("rcvbuf"), sndbuf=last("sndbuf"),
        minrtt_ms=float(minrtt.min()) if not minrtt.empty else None,
        rtt_ms=float(np.median(rtt)) if not rtt.empty else None,
        sndbuf_full_share=_sndbuf_full_share(after),
    )  # fmt: skip


def _sndbuf_full_share(rows: pd.DataFrame) -> float | None:
    """The share of a sender's rows whose send buffer was full and nothing was left unsent: the send
    buffer, not the path or the peer, held it. tcp_info's sndbuf_limited clock says so too, but not
    always: it starts only when the flow is not cwnd-limited (tcp_cwnd_validate), and under BBR one
    run of the lab's small-sndbuf in five read 0 ms while every sample looked like this."""
    rows = rows[rows["send_q"] > 0]
    if rows.empty or rows["wqueue"].isna().all() or rows["sndbuf"].isna().all():
        return None
    full = (rows["wqueue"] >= rows["sndbuf"]) & (rows["notsent"] == 0)
    return float(full.sum()) / len(rows)


def sides(run: RunLike, probe: bool = True) -> dict[tuple[int, str, int, str, int], Side]:
    """Every socket sock_buffers.csv lists, by (netns, laddr, lport, raddr, rport), with what the
    probe counted on it (sb_flow.csv) when it ran and PROBE is set."""
    sb = run.table("sock_buffers")
    out: dict[tuple[int, str, int, str, int], Side] = {}
    firsts: dict[int, tuple[float, float] | None] = {}
    for key, rows in sb.groupby(KEY, sort=True):
        ns = int(key[0])
        if ns not in firsts:
            firsts[ns] = first_sample(run, ns)
        s = _side(run, key, rows, firsts[ns])
        out[s.key] = s
    for key, counted in (probe_totals(run) if probe else {}).items():
        if key in out:
            out[key].probe = counted
    return out


def probe_totals(run: RunLike) -> dict[tuple[int, str, int, str, int], dict[str, int]]:
    """The probe's counts per socket over the capture (sb_flow.csv summed)."""
    fl = run.table("sb_flow")
    if fl.empty:
        return {}
    sums = fl.groupby(KEY)[PROBE_WRITES + PROBE_READS].sum()
    return {
        (int(k[0]), str(k[1]), int(k[2]), str(k[3]), int(k[4])): {c: int(v) for c, v in row.items()}
        for k, row in sums.iterrows()
    }


def pair(all_sides: dict[tuple[int, str, int, str, int], Side], s: Side) -> Side | None:
    """The other end of S's flow among the listed sockets (another namespace, or the same one on
    loopback): the socket whose local address and port are S's remote ones, and back."""
    for o in all_sides.values():
        if (o.laddr, o.lport, o.raddr, o.rport) == (s.raddr, s.rport, s.laddr, s.lport) and o.key != s.key:
            return o
    return None


def probe_means(probe: dict[str, int]) -> dict[str, Any]:
    """The probe's per-write and per-read means: the send buffer and its queue at limited writes,
    the receive buffer and what was left queued at noted reads."""
    out: dict[str, Any] = {}
    w, r = probe.get("limited_writes", 0), probe.get("noted_reads", 0)
    if w:
        out["sndbuf_mean"] = round(probe["sndbuf_sum"] / w)
        out["wqueue_mean"] = round(probe["wqueue_sum"] / w)
    if r:
        out["rcvbuf_mean"] = round(probe["rcvbuf_sum"] / r)
        out["rcvq_mean"] = round(probe["rcvq_sum"] / r)
        out["zero_window_read_share"] = probe["reads_zero_window"] / r
        out["half_full_read_share"] = probe["reads_half_full"] / r
    return out


def counter_totals(run: RunLike, netns: int, names: tuple[str, ...]) -> dict[str, int]:
    """The capture's deltas of these counters in one namespace (0 where they did not move)."""
    return {n: total_delta(run, netns, n) for n in names}


def sysctl_triple(run: RunLike, netns: int, key: str) -> tuple[int, int, int] | None:
    """tcp_rmem / tcp_wmem as (min, default, max) bytes, when the capture recorded them."""
    parts = (run.sysctl(netns, key) or "").split()
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


def needed_buffer(rate_bytes_per_s: float, rtt_ms: float) -> int:
    """The bytes a flow must keep in flight to carry a rate over an RTT: the bandwidth-delay product."""
    return round(rate_bytes_per_s * rtt_ms / 1000)


def limited_series(run: RunLike, s: Side) -> pd.DataFrame:
    """One socket's rows as per-sample deltas of its clocks (the plot's and the notebook's series)."""
    sb = run.table("sock_buffers")
    rows = sb[(sb["netns"] == s.netns) & (sb["laddr"] == s.laddr) & (sb["lport"] == s.lport)
              & (sb["raddr"] == s.raddr) & (sb["rport"] == s.rport)].sort_values("time_s")  # fmt: skip
    out = pd.DataFrame({"time_s": rows["time_s"].to_numpy()})
    for c in ("busy_ms", "rwnd_limited_ms", "sndbuf_limited_ms", "bytes_acked"):
        out[c] = rows[c].astype("int64").diff().fillna(0).to_numpy()
    out["recv_q"] = rows["recv_q"].to_numpy()
    out["send_q"] = rows["send_q"].to_numpy()
    return out
