"""Accept queues per listener: the probe's intervals, the owner, the backlog asked for, the model's inputs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .. import models
from . import RunLike
from .counters import per_sample, total_delta
from .listener_sockets import SOCKET_COLUMNS, SocketKey

# One listening socket (sock_ino 0: not known, a run of contract 9 or older).
LISTENER_KEY = SOCKET_COLUMNS


def full_intervals(rows: pd.DataFrame) -> pd.DataFrame:
    """A listener's intervals in which the queue was full: at an enqueue, or at the interval's end."""
    return rows[(rows["full_events"] > 0) | (rows["depth_now"] > rows["limit"])]


def group_rows(members: list[pd.DataFrame]) -> pd.DataFrame:
    """A SO_REUSEPORT group's intervals as one queue: per interval, its members' counts, depths and
    limits summed (the group holds that many), a member's missing interval counting as idle with its
    limit unchanged; the group's key has sock_ino 0."""
    times = sorted({int(t) for m in members for t in m["time_s"]})
    counts = ["enqueues", "depth_max", "full_events", "depth_now", "accepted"]
    parts = []
    for m in members:
        m = m.drop_duplicates("time_s", keep="last").astype({"time_s": "int64"}).set_index("time_s").reindex(times)
        m["limit"] = m["limit"].ffill().bfill()
        m[counts] = m[counts].fillna(0)
        parts.append(m[["limit", *counts]].astype("int64"))
    summed = sum(parts[1:], parts[0]).rename_axis("time_s").reset_index()
    first = members[0].iloc[0]
    ident = {c: first[c] for c in ("netns", "family", "laddr", "lport")}
    out = summed.assign(**ident, sock_ino=0)
    return out.astype({"time_s": "int64"})[members[0].columns.intersection(out.columns).tolist()]


def requested_backlog(run: RunLike, key: SocketKey, limit: int | None = None) -> int | None:
    """The backlog the application passed to listen() on this socket: from the probe (the last call
    that set `limit`, the limit in force, when one did: an application that re-listens asks for
    several), else from the lab's server block."""
    lis = run.table("aq_listen")
    lis = lis[(lis["netns"] == key.netns) & (lis["lport"] == key.lport) & (lis["ret"] == 0)]
    if key.sock_ino and (lis["sock_ino"] == key.sock_ino).any():
        lis = lis[lis["sock_ino"] == key.sock_ino]
    if limit is not None and (lis["limit_effective"] == limit).any():
        lis = lis[lis["limit_effective"] == limit]
    if not lis.empty:
        return int(lis["backlog_requested"].iloc[-1])
    lab_server = (run.lab or {}).get("server") or {}
    if (
        lab_server.get("port") == key.lport
        and lab_server.get("netns_inode") == key.netns
        and lab_server.get("backlog_requested") is not None
    ):
        return int(lab_server["backlog_requested"])
    return None


def somaxconn(run: RunLike, netns: int) -> int | None:
    """net.core.somaxconn at the start of the capture, or None when not sampled."""
    raw = run.sysctl(netns, "net.core.somaxconn")
    return int(raw) if raw is not None else None


def saturation_model(
    run: RunLike,
    netns: int,
    full: pd.DataFrame,
    cause_class: str,
    limit: int,
    t0: float,
    t1: float,
    interval: int,
    own: pd.DataFrame | None = None,
    members: int = 1,
) -> dict[str, Any]:
    """The saturation model's prediction for this listener, with the measured numbers it takes.

    capacity: M/M/1/K with lam = attempts/s (PassiveOpens + ListenOverflows:
    retries included, as the model cannot tell them apart) and mu = accepts/s,
    both over the intervals that overflowed and ended with a queue (the accept
    loop was never idle then). sizing: a burst of B new connections into room for K loses B - K first
    attempts (B = the most passive opens in one interval).
    stall: no model; a stopped server has no service rate.

    members: a SO_REUSEPORT group judged as one queue (its limits summed in `limit`): the kernel
    hashes arrivals evenly over its members, so the model is one member's M/M/1/K with a share
    of the arrivals and of the accepts, and its own room.

    own: when other listeners share the namespace, PassiveOpens counts their
    connections too; pass this listener's probe rows (time_s, enqueues) and its
    own enqueues stand in for PassiveOpens (each counter sample takes the
    interval that ended just before it; the namespace's overflows stay as
    counted, shared by the listeners seen full).
    """
    if cause_class == "stall":
        return {"kind": "not_applicable"}
    k = models.accept_queue_capacity(limit // max(members, 1))
    win, basis = _attempt_window(run, netns, t0, t1, interval, own)
    if cause_class == "sizing":
        return _burst_model(win, k, basis)
    model = _mm1k_model(win, full, k, interval, basis, max(members, 1))
    return model if members <= 1 else {**model, "members": members}


def _attempt_window(
    run: RunLike, netns: int, t0: float, t1: float, interval: int, own: pd.DataFrame | None
) -> tuple[pd.DataFrame, str]:
    """PassiveOpens and ListenOverflows per counter sample over the window, and what the opens count."""
    win = per_sample(run, netns, ["PassiveOpens", "ListenOverflows"])
    win = win[(win.index > t0) & (win.index <= t1 + interval + 0.5)]
    if own is None:
        return win, "namespace PassiveOpens"
    times = own["time_s"].to_numpy(dtype=float)
    enq = own["enqueues"].to_numpy(dtype=float)
    win = win.copy()
    win["PassiveOpens"] = [
        int(enq[(times < s) & (times >= s - interval)].sum()) for s in win.index.to_numpy(dtype=float)
    ]
    return win, "this listener's enqueues (probe)"


def _attempts_and_measured_pct(win: pd.DataFrame) -> tuple[int, float | None]:
    """Connection attempts (opens + overflows) in these samples, and the share that overflowed, in percent."""
    overflows, opens = int(win["ListenOverflows"].sum()), int(win["PassiveOpens"].sum())
    attempts = overflows + opens
    return attempts, round(100 * overflows / attempts, 1) if attempts else None


def _burst_model(win: pd.DataFrame, k: int, basis: str) -> dict[str, Any]:
    """sizing: a burst of B new connections into room for K loses B - K first attempts."""
    _, measured_pct = _attempts_and_measured_pct(win)
    # Every connection is passively opened once, whatever its retries, so
    # the busiest interval's opens bound a burst from below (retries
    # spread the rest of a burst over the following intervals).
    burst = int(win["PassiveOpens"].max()) if len(win) else 0
    lost = max(burst - k, 0)
    return {
        "kind": "burst",
        "burst": burst,
        "capacity_k": k,
        "predicted_pct": round(100 * lost / burst, 1) if burst else None,
        "measured_pct": measured_pct,
        "opens_basis": basis,
    }


def _mm1k_model(
    win: pd.DataFrame, full: pd.DataFrame, k: int, interval: int, basis: str, members: int = 1
) -> dict[str, Any]:
    """capacity: M/M/1/K over the intervals that overflowed and ended with a queue."""
    # The accept loop was busy throughout the intervals that overflowed and
    # still ended with a queue: their accept counts are its service rate, and
    # the kernel's counters over the same seconds give the attempt rate and
    # the measured share (the tail of the window, where load fades, would
    # dilute both).
    busy = full[full["depth_now"] > 0]
    if busy.empty:
        busy = full
    mu = float(busy["accepted"].mean()) / interval / members if not busy.empty else 0.0
    b0, b1 = float(busy["time_s"].min()) - interval, float(busy["time_s"].max())
    steady = win[(win.index > b0) & (win.index <= b1 + 0.5)]
    attempts, measured_pct = _attempts_and_measured_pct(steady if len(steady) else win)
    seconds = max(float(len(steady) if len(steady) else len(win)) * interval, interval)
    lam = attempts / seconds / members
    pred = models.mm1k(lam, mu, k)
    return {
        "kind": "mm1k",
        "lam_per_s": round(lam, 1),
        "mu_per_s": round(mu, 1),
        "capacity_k": k,
        "predicted_pct": round(100 * pred.p_block, 1),
        "predicted_wait_ms": round(1000 * pred.wait_s, 1),
        "measured_pct": measured_pct,
        "opens_basis": basis,
    }


def overflow_samples(run: RunLike, netns: int) -> pd.Series:
    """ListenOverflows deltas of one namespace per counter sample (indexed by time_s), only where it rose."""
    d = per_sample(run, netns, ["ListenOverflows"])["ListenOverflows"]
    return d[d > 0]


def samples_near(samples: pd.Series, full_times: pd.Series | list[float], interval: float) -> pd.Series:
    """Which counter samples fall in (or just after) a listener's full intervals.

    A probe row stamped T covers (T - interval, T]; a counter sample stamped S
    counts the drops since the previous sample, which lands up to one interval
    (plus the sampler's offset) after them. S in [T - interval, T + interval + 0.5]."""
    idx = samples.index.to_numpy(dtype=float)
    hit = pd.Series(False, index=samples.index)
    for t in full_times:
        hit |= (idx >= float(t) - interval) & (idx <= float(t) + interval + 0.5)
    return hit


def listener_symptoms(run: RunLike, key: SocketKey) -> dict[str, Any]:
    """What the host shows of one listener's clients and queue, without any lab log.

    - SYN retransmits toward the listener counted by the retransmits probe on the
      client side (service_local 0), per client namespace: a local client.
    - SYN-ACK retransmits by the listener itself (service_local 1): final ACKs
      its full queue dropped.
    - ss Recv-Q (queue now) against Send-Q (limit) at each sample."""
    netns, laddr, lport = key.netns, key.laddr, key.lport
    rt = run.table("rt_endpoint")
    wild = laddr in ("0.0.0.0", "::", "*", "")
    cli = rt[(rt["service_local"] == 0) & (rt["service_port"] == lport) & (rt["syn_segs"] > 0)]
    if not wild:
        cli = cli[cli["raddr"] == laddr]
    by_ns = cli.groupby("netns")["syn_segs"].sum().sort_values(ascending=False)
    srv = rt[(rt["service_local"] == 1) & (rt["netns"] == netns) & (rt["service_port"] == lport)]
    if not wild:
        srv = srv[srv["laddr"] == laddr]
    ls = run.table("listeners")
    ls = ls[(ls["netns"] == netns) & (ls["lport"] == lport)]
    if key.sock_ino and (ls["sock_ino"] == key.sock_ino).any():
        ls = ls[ls["sock_ino"] == key.sock_ino]  # this socket's own queue, not its group's
    elif not wild and not ls.empty:
        ls = ls[ls["laddr"].isin([laddr, "*", "0.0.0.0", "::", "[::]"])]
    return {
        "client_netns": [int(x) for x in by_ns.index],
        "syn_retrans_to_listener": int(by_ns.sum()) if len(by_ns) else 0,
        "synack_retrans_by_listener": int(srv["synack_segs"].sum()) if not srv.empty else 0,
        "ss_samples": len(ls),
        "ss_recv_q_max": int(ls["recv_q"].max()) if not ls.empty else None,
        # The limit when the queue was deepest (an application can change it: memcached sets 0).
        "ss_send_q": int(ls.loc[ls["recv_q"].idxmax(), "send_q"]) if not ls.empty else None,
        "ss_samples_full": int((ls["recv_q"] > ls["send_q"]).sum()) if not ls.empty else 0,
    }


def ss_full_listeners(run: RunLike, netns: int, t0: float | None = None, t1: float | None = None) -> list[str]:
    """Listeners ss showed with Recv-Q above Send-Q (full) in a namespace, as "addr:port (comm)"."""
    ls = run.table("listeners")
    ls = ls[(ls["netns"] == netns) & (ls["recv_q"] > ls["send_q"])]
    if t0 is not None:
        ls = ls[ls["time_s"] >= t0]
    if t1 is not None:
        ls = ls[ls["time_s"] <= t1]
    out = []
    sockets = ls.assign(sock_ino=ls["sock_ino"].fillna(0))
    for (laddr, lport, ino), g in sockets.groupby(["laddr", "lport", "sock_ino"], sort=True):
        comm = g["comm"].dropna()
        who = f"{comm.iloc[-1]} pid {int(g['pid'].dropna().iloc[-1])}" if len(comm) and g["pid"].notna().any() else ""
        member = f"socket {int(ino)}" if ino else ""
        note = ", ".join(x for x in (member, who) if x)
        out.append(f"{laddr}:{int(lport)}" + (f" ({note})" if note else ""))
    return out


@dataclass(frozen=True)
class AcceptRates:
    """A listener's arrival and accept rates from its probe intervals (per second, unrounded)."""

    peak_enqueues: int  # the most connections queued in one interval
    accept_per_s: float  # mean accepts over the intervals with traffic (0 when none had any)
    accept_min_per_s: float  # the slowest of those intervals (0 when none had traffic)
    arrival_before_per_s: float | None  # mean enqueues before the queue was first full; None if it was full at once


def accept_rates(rows: pd.DataFrame, full: pd.DataFrame, interval: int) -> AcceptRates:
    """Arrival and accept rates of a listener, from its intervals (rows) and those it was full in (full)."""
    active = rows[rows["enqueues"] + rows["accepted"] > 0]
    pre_full = rows[rows["time_s"] < (full["time_s"].min() if not full.empty else 0)]
    return AcceptRates(
        peak_enqueues=int(rows["enqueues"].max()),
        accept_per_s=float(active["accepted"].mean()) / interval if not active.empty else 0.0,
        accept_min_per_s=float(active["accepted"].min()) / interval if not active.empty else 0.0,
        arrival_before_per_s=float(pre_full["enqueues"].mean()) / interval if not pre_full.empty else None,
    )


def near_full_listeners(run: RunLike, netns: int, t0: float, t1: float) -> list[str]:
    """Listeners the probe saw at least at their limit (one short of full: depth = limit) in [t0, t1],
    as "addr:port"."""
    ls = run.table("aq_listener")
    near = ls[
        (ls["netns"] == netns)
        & (ls["time_s"] >= t0)
        & (ls["time_s"] <= t1)
        & (ls[["depth_max", "depth_now"]].max(axis=1) >= ls["limit"])
    ]
    return sorted(
        {
            f"{a}:{int(p)}" + (f" (socket {int(i)})" if i else "")
            for a, p, i in near[["laddr", "lport", "sock_ino"]].itertuples(index=False)
        }
    )


def listeners_tracked(run: RunLike, netns: int) -> int:
    """How many listening sockets of a namespace the probe reported on."""
    ls = run.table("aq_listener")
    return int(ls.loc[ls["netns"] == netns, ["laddr", "lport", "sock_ino"]].drop_duplicates().shape[0])


def limit_in_force(rows: pd.DataFrame, full: pd.DataFrame) -> int:
    """The accept-queue limit when the queue overflowed: the one most of the full intervals had
    (an application may change it while it runs: memcached calls listen(fd, 0) at its connection
    limit, nginx on reload); the last one seen when it was never full."""
    limits = (full if not full.empty else rows.tail(1))["limit"]
    return int(limits.mode().min())


def limit_changes(rows: pd.DataFrame, start: float, calls: pd.DataFrame | None = None) -> list[dict[str, Any]]:
    """Each change of a listener's limit: when (seconds into the capture), from and to, and the
    listen() call that made it when the probe saw one. Two sources in time order: the limit each
    probe interval read (aq_listener), and each successful listen() call (calls: the listener's
    aq_listen rows, timed to the second), so a change the application made and undid within
    one interval is seen too (memcached: listen(fd, 0) at its connection limit, listen(fd, 32)
    when connections close)."""
    seen: list[tuple[float, int, int, dict[str, Any] | None]] = [
        (float(t), 1, int(lim), None) for t, lim in zip(rows["time_s"], rows["limit"], strict=True)
    ]
    if calls is not None and not calls.empty:
        for c in calls[calls["ret"] == 0].itertuples(index=False):
            call = {"backlog": int(c.backlog_requested), "pid": int(c.pid), "comm": str(c.comm),
                    "at_rel_s": round(float(c.time_s) - start, 1)}  # fmt: skip
            seen.append((float(c.time_s), 0, int(c.limit_effective), call))  # a call before its interval's row
    out: list[dict[str, Any]] = []
    last: int | None = None
    for t, _, lim, call in sorted(seen, key=lambda e: e[:2]):
        if last is not None and lim != last:
            change: dict[str, Any] = {"at_rel_s": round(t - start, 1), "from": last, "to": lim}
            if call is not None:
                change["listen"] = call
            out.append(change)
        last = lim
    return out


def found_empty(run: RunLike, key: SocketKey, rows: pd.DataFrame) -> pd.Series | None:
    """Per interval of a listening socket (aligned with its aq_listener rows): did its accepting
    processes find the queue empty (accept() returned EAGAIN, aq_accept's eagain)? None when
    that cannot be told: no accept hook (the raw tier), or, in a run without socket inodes, a
    sibling listener on the same port in the namespace (aq_accept was keyed by port then)."""
    acc = run.table("aq_accept")
    if acc.empty:
        return None
    acc = acc[(acc["netns"] == key.netns) & (acc["lport"] == key.lport)]
    if key.sock_ino:
        acc = acc[acc["sock_ino"] == key.sock_ino]
    else:
        lst = run.table("aq_listener")
        same_port = lst[(lst["netns"] == key.netns) & (lst["lport"] == key.lport)]
        if same_port["laddr"].nunique() > 1:
            return None
    eagain = acc.groupby("time_s")["eagain"].sum()
    return (rows["time_s"].map(eagain).fillna(0) > 0).set_axis(rows.index)


def probe_coverage(run: RunLike, netns: int, interval: int) -> dict[str, int] | None:
    """The connections the namespace's listeners completed (its PassiveOpens over the probe's
    intervals there) beside the enqueues the probe counted on all of them. A probe counts only what
    its tracepoints deliver, and nothing says when they deliver nothing (docs/probes.md); the
    kernel's own count shows it. None when the probe printed no listener of the namespace."""
    rows = run.table("aq_listener")
    rows = rows[rows["netns"] == netns]
    if rows.empty:
        return None
    # A row counts the interval before it; a counter sample lands up to an interval after.
    t0, t1 = float(rows["time_s"].min()) - interval, float(rows["time_s"].max()) + interval + 0.5
    return {
        "passive_opens": total_delta(run, netns, "PassiveOpens", t0, t1),
        "probe_queued": int(rows["enqueues"].sum()),
    }


def probe_gaps(rows: pd.DataFrame, ticks: pd.Series, interval: int) -> list[tuple[float, float]]:
    """Where a listener's rows hide seconds of its overflow: (from, to) times of its rows, from its
    first full interval to the first one after its last that ended below the limit, that came more
    than two intervals after a row ending with connections queued, no listener being printed between
    (ticks: every aq_listener row's time_s). The probe prints a listener holding connections at
    every tick, so such a gap is its interval timer not running, and the row after it sums those
    seconds: a stall in them reads as accepts. (After a row ending empty, a gap can be the listener
    idling: not counted, that cannot be told from the rows.)"""
    rows = rows.sort_values("time_s")
    times = rows["time_s"].to_numpy(dtype=float)
    depth = rows["depth_now"].to_numpy(dtype=float)
    full = rows.index.isin(full_intervals(rows).index)
    if len(times) < 2 or not full.any():
        return []
    first, last = int(full.argmax()), int(len(full) - 1 - full[::-1].argmax())
    below = np.flatnonzero(depth[last + 1 :] < rows["limit"].to_numpy(dtype=float)[last + 1 :])
    end = last + 1 + int(below[0]) if len(below) else len(times) - 1
    seen = ticks.drop_duplicates().sort_values().to_numpy(dtype=float)
    gaps = []
    for i in range(max(first, 1), end + 1):
        t0, t1 = times[i - 1], times[i]
        if depth[i - 1] > 0 and t1 - t0 > 2 * interval and not ((seen > t0) & (seen < t1)).any():
            gaps.append((float(t0), float(t1)))
    return gaps


def interval_shape(rows: pd.DataFrame, emptied: pd.Series | None = None) -> dict[str, Any]:
    """What a listener's intervals (sorted by time) looked like at their ends, for the rule's
    cause class: intervals stalled (nearly full at the end, nothing accepted), those of them that
    started nearly full too (a whole interval of a waiting queue and no accept), and full at the end; the
    longest run of consecutive intervals that overflowed or ended nearly full while accepts went
    on; the overflowing intervals, the share of them that still held a queue at the end, and how
    many of them found the queue empty (emptied: found_empty; None when it cannot be told)."""
    nearly_full_at_end = rows["depth_now"] >= rows["limit"]
    stalled = nearly_full_at_end & (rows["accepted"] == 0)
    # A burst that lands just before a print, after an idle interval, ends one interval full with no
    # accept yet; only a server not accepting keeps a queue waiting from an interval's start to its end.
    stalled_from_full = stalled & nearly_full_at_end.shift(1, fill_value=False)
    # "A queue" means at least half the limit: the print lands at some phase of
    # the bursts (and of their SYN retries), so a burst still draining can
    # leave a few. Measured at interval ends with limit 16: sizing runs 0-11
    # (never two ends in a row at >= 8), overload (queue variant) 14-18.
    backlog_left = rows["depth_now"] >= (rows["limit"] // 2).clip(lower=1)
    # An interval in which the application found the queue empty (EAGAIN) did not keep a queue
    # throughout, wherever its end landed (bursts against a one-second print; overload does not).
    drained = emptied if emptied is not None else pd.Series(False, index=rows.index)
    overflowing = rows["full_events"] > 0
    busy_full = (nearly_full_at_end | (backlog_left & overflowing)) & (rows["accepted"] > 0) & ~drained
    # Longest run of True: a run's id changes at every False.
    runs = (~busy_full).cumsum()[busy_full]
    left_share = float((backlog_left & overflowing).sum()) / max(1, int(overflowing.sum()))
    return {
        "intervals_stalled": int(stalled.sum()),
        "intervals_stalled_from_full": int(stalled_from_full.sum()),
        "intervals_full_at_end": int((rows["depth_now"] > rows["limit"]).sum()),
        "longest_full_run_with_accepts": int(runs.value_counts().max()) if len(runs) else 0,
        "overflowing_intervals": int(overflowing.sum()),
        "overflowing_share_with_queue_left": round(left_share, 3),
        "overflowing_intervals_found_empty": None if emptied is None else int((drained & overflowing).sum()),
    }
