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
from .addresses import is_loopback
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


def _sample_times(run: RunLike) -> dict[int, np.ndarray]:
    """Each namespace's samples that listed the flows (sockstat.csv flows_listed), sorted: a sample
    over the sampler's budget did not see a flow's queue, so it is no reading of it."""
    st = run.table("sockstat")
    st = st[(st["flows_listed"] == 1).to_numpy(dtype=bool)]
    return {int(ns): np.unique(t.to_numpy(dtype=float)) for ns, t in st.groupby("netns")["time_s"]}


def first_sample(run: RunLike, netns: int, times: dict[int, np.ndarray] | None = None) -> tuple[float, float] | None:
    """The namespace's first sample, from its start to the next one's (every flow listed then is a
    baseline, not a new flow; a listing is stamped when ss ran, after the sample's counters)."""
    t = (times if times is not None else _sample_times(run)).get(int(netns))
    if t is None or not len(t):
        return None
    return float(t[0]), float(t[1]) if len(t) > 1 else float(t[0]) + float(run.metadata.get("interval_s") or 1)


def _samples_between(times: np.ndarray | None, t0: float, t1: float) -> int:
    """Samples of the namespace in (t0, t1]: the denominator of a queue's mean."""
    if times is None:
        return 0
    return int(np.searchsorted(times, t1 + 1e-3, "right") - np.searchsorted(times, t0 + 1e-3, "right"))


# The columns a Side is made from.
SIDE_COLUMNS = ("time_s", *CLOCKS, "recv_q", "send_q", "rcvbuf", "sndbuf", "wqueue", "notsent", "minrtt_ms", "rtt_ms")


class _Flows:
    """sock_buffers.csv as float arrays (NaN where a nullable cell is empty), each flow's rows
    contiguous and in time order: a host with ten thousand flows is sliced, not grouped, row by row
    (grouped with pandas, a report of the epoll lab's 10 000 idle connections took 65 s)."""

    def __init__(self, sb: pd.DataFrame) -> None:
        flow = sb.groupby(KEY, sort=True).ngroup().to_numpy()
        order = np.lexsort((sb["time_s"].to_numpy(dtype=float), flow))
        self.cols = {c: sb[c].to_numpy(dtype=float, na_value=np.nan)[order] for c in SIDE_COLUMNS}
        flow = flow[order]
        self.starts = np.flatnonzero(np.r_[True, flow[1:] != flow[:-1]])
        self.ends = np.r_[self.starts[1:], len(flow)]
        self.keys = sb[KEY].iloc[order[self.starts]].itertuples(index=False, name=None)


def _last(v: np.ndarray) -> int | None:
    """The last reading that is not empty."""
    v = v[~np.isnan(v)]
    return int(v[-1]) if len(v) else None


def _side(key: tuple[Any, ...], r: dict[str, np.ndarray], first: tuple[float, float] | None,
          times: np.ndarray | None) -> Side:  # fmt: skip
    """One socket from its rows in time order (R: column name -> its values)."""
    time = r["time_s"]
    h_t, t1 = float(time[0]), float(time[-1])
    baseline = first is not None and first[0] - 0.01 < h_t < first[1]
    base = {c: (int(r[c][0]) if baseline and not np.isnan(r[c][0]) else 0) for c in CLOCKS}
    deltas = {c: int(r[c][-1]) - base[c] if not np.isnan(r[c][-1]) else 0 for c in CLOCKS}
    t0 = h_t
    if not baseline:
        # A flow that began after the first listing: its clocks ran from its start, at least
        # its busy time before its first row.
        t0 -= int(r["busy_ms"][0]) / 1000
    after = time > t0 + 1e-3 if baseline else np.ones(len(time), dtype=bool)
    n = max(_samples_between(times, h_t - (0 if baseline else 1), t1), 1)
    minrtt = r["minrtt_ms"][~np.isnan(r["minrtt_ms"])]
    rtt = r["rtt_ms"][~np.isnan(r["rtt_ms"])]
    return Side(
        netns=int(key[0]), laddr=str(key[1]), lport=int(key[2]), raddr=str(key[3]), rport=int(key[4]),
        t0=t0, t1=t1, rows=len(time), deltas=deltas,
        recv_q_mean=float(r["recv_q"][after].sum()) / n,
        recv_q_max=int(r["recv_q"].max()), send_q_max=int(r["send_q"].max()),
        rcvbuf=_last(r["rcvbuf"]), sndbuf=_last(r["sndbuf"]),
        minrtt_ms=float(minrtt.min()) if len(minrtt) else None,
        rtt_ms=float(np.median(rtt)) if len(rtt) else None,
        sndbuf_full_share=_sndbuf_full_share({c: v[after] for c, v in r.items()}),
    )  # fmt: skip


def _sndbuf_full_share(r: dict[str, np.ndarray]) -> float | None:
    """The share of a sender's rows whose send buffer was full and nothing was left unsent: the send
    buffer, not the path or the peer, held it. tcp_info's sndbuf_limited clock says so too, but not
    always: it starts only when the flow is not cwnd-limited (tcp_cwnd_validate), and under BBR one
    run of the lab's small-sndbuf in five read 0 ms while every sample looked like this."""
    sending = r["send_q"] > 0
    wqueue, sndbuf = r["wqueue"][sending], r["sndbuf"][sending]
    if not len(wqueue) or np.isnan(wqueue).all() or np.isnan(sndbuf).all():
        return None
    # An empty reading is not a full buffer (NaN compares false).
    full = (wqueue >= sndbuf) & (r["notsent"][sending] == 0)
    return float(full.sum()) / len(wqueue)


def sides(run: RunLike, probe: bool = True) -> dict[tuple[int, str, int, str, int], Side]:
    """Every socket sock_buffers.csv lists, by (netns, laddr, lport, raddr, rport), with what the
    probe counted on it (sb_flow.csv) when it ran and PROBE is set."""
    sb = run.table("sock_buffers")
    out: dict[tuple[int, str, int, str, int], Side] = {}
    if not sb.empty:
        times = _sample_times(run)
        flows = _Flows(sb)
        for key, a, b in zip(flows.keys, flows.starts, flows.ends, strict=True):
            ns = int(key[0])
            s = _side(key, {c: v[a:b] for c, v in flows.cols.items()}, first_sample(run, ns, times), times.get(ns))
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
    """The other end of S's flow among the listed sockets: the socket whose local address and port
    are S's remote ones, and back; in S's own namespace when one is there, and always for a loopback
    address (a flow over lo never leaves its namespace). In another namespace only when it is the one
    candidate: containers reuse addresses and ports, and two candidates are a guess (None)."""
    found = [
        o
        for o in all_sides.values()
        if (o.laddr, o.lport, o.raddr, o.rport) == (s.raddr, s.rport, s.laddr, s.lport) and o.key != s.key
    ]
    home = [o for o in found if o.netns == s.netns]
    if home or is_loopback(s.raddr):
        return home[0] if home else None
    return found[0] if len(found) == 1 else None


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
