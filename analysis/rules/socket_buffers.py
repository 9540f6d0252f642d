"""socket_buffer_limit: a flow's sender was held back by a socket buffer: the peer's receive
window (a slow reader, or a receive buffer below the path's bandwidth-delay product), its own
send buffer, or TCP's memory pressure.

Chain: symptom (lab writer: bytes/s, writes that found the buffer full; else the flow's rate)
 -> counter (the receiver's zero-window advertisements and drops, the sender's window probes,
    memory pressure: the namespaces' TcpExt deltas over the capture)
 -> probe (the kernel's own clocks of the flow, tcp_info busy / rwnd_limited / sndbuf_limited
    from the sampler; the probe's writes that found the flow limited or the buffer full, and
    the reader's reads that found the window closed)
 -> cause (slow_reader: the reader's queue stays full; small_rcvbuf: it stays empty and the
    window is still the limit; small_sndbuf; memory_pressure; peer_window: the reader is not
    on this host)
 -> fix (with the numbers: RTT x rate, SO_RCVBUF turns autotuning off) -> verification.
Each flow on its own: a slow reader on one flow never implicates its neighbours.
"""

from __future__ import annotations

from typing import Any

from ..derived import socket_buffers as sbd
from ..derived.counters import sampled
from ..derived.socket_buffers import Side
from ..findings import Finding, Link, Status
from .base import Rule, RunView

KIND = "socket_buffer_limit"
INPUTS = ("sb_flow", "sock_buffers", "sockstat", "counters", "sysctls")

# A sender is judged when it had data to send this long over the capture...
MIN_BUSY_MS = 1000
# ...and held back when a buffer limited it this share of that time (a healthy bulk flow
# over veth: 0-3 %; the lab's small-rcvbuf 46-51 %, small-sndbuf 81-83 %, slow-reader 87-100 %).
LIMITED_SHARE = 0.20
# The reader is slow when what it leaves queued is this share of its receive buffer, on
# average over the samples, or when the probe saw this many of its reads leave the buffer half
# full, the most of those it noted.
SLOW_QUEUE_SHARE = 0.25
SLOW_HALF_FULL_READS = 10
# Or its send buffer was full with nothing unsent at this share of its samples (the clock does not
# always say so: analysis/derived/socket_buffers.py _sndbuf_full_share).
SNDBUF_FULL_SAMPLES = 0.5
# A reader whose sender is not on this host is judged on this many samples at least.
MIN_READER_SAMPLES = 3
# Of the senders ruled out, the report lists the busiest this many (a host has thousands).
MAX_RULED_OUT = 10


def _window(run: RunView, t0: float, t1: float) -> dict[str, float]:
    return {"start_s": t0, "end_s": t1, "start_rel_s": round(t0 - run.start, 1), "end_rel_s": round(t1 - run.start, 1)}


def _subject(run: RunView, s: Side, receiver: Side | None) -> dict[str, Any]:
    """The flow in the direction of its data: laddr:lport is the sender's."""
    return {
        "netns": s.netns,
        "netns_label": run.netns_label(s.netns),
        "laddr": s.laddr,
        "lport": s.lport,
        "raddr": s.raddr,
        "rport": s.rport,
        "service_port": min(s.lport, s.rport),
        "we_are": "sender",
        "receiver_netns": receiver.netns if receiver else None,
    }


# -- symptom ------------------------------------------------------------------------------------


def _symptom(run: RunView, s: Side) -> Link:
    lab = run.lab or {}
    fl = lab.get("flow") or {}
    writer = fl.get("writer") if lab.get("lab") == "socket-buffers" else None
    if writer:
        ev = {k: writer.get(k) for k in ("bytes_per_s", "writes", "writes_blocked", "wait_s")}
        ev["path_rate_bytes_per_s"] = (lab.get("path") or {}).get("rate_bits_per_s", 0) / 8 or None
        return Link("symptom", "lab_writer", ev)
    return Link("symptom", "flow_rate", {"bytes_per_s": _round(s.rate_bytes_per_s), "span_s": round(s.span_s, 1)})


def _round(v: float | None, nd: int = 0) -> float | None:
    return None if v is None else round(v, nd) if nd else round(v)


# -- counter ------------------------------------------------------------------------------------


def _counter_evidence(run: RunView, s: Side, receiver: Side | None) -> dict[str, Any]:
    """Each namespace's counters over the capture: the receiver's (when sampled), the sender's."""
    ev: dict[str, Any] = {"sender_netns_label": run.netns_label(s.netns)}
    ev["sender"] = sbd.counter_totals(run, s.netns, sbd.SENDER_COUNTERS + sbd.PRESSURE_COUNTERS)
    if receiver is not None and sampled(run, receiver.netns):
        ev["receiver_netns_label"] = run.netns_label(receiver.netns)
        ev["receiver"] = sbd.counter_totals(run, receiver.netns, sbd.RECEIVER_COUNTERS + sbd.PRESSURE_COUNTERS)
    return ev


def _pressure(counters: dict[str, Any]) -> int:
    return sum(int((counters.get(side) or {}).get("TCPMemoryPressures", 0)) for side in ("sender", "receiver"))


# -- probe --------------------------------------------------------------------------------------


def _probe_evidence(s: Side, receiver: Side | None) -> dict[str, Any]:
    """The kernel's clocks of the sender over its window, its queues and buffers, and what the probe
    counted on both sockets."""
    d = s.deltas
    ev: dict[str, Any] = {
        "busy_ms": d["busy_ms"],
        "rwnd_limited_ms": d["rwnd_limited_ms"],
        "sndbuf_limited_ms": d["sndbuf_limited_ms"],
        "rwnd_limited_pct": _pct(s.share("rwnd_limited_ms")),
        "sndbuf_limited_pct": _pct(s.share("sndbuf_limited_ms")),
        "span_s": round(s.span_s, 1),
        "bytes_acked": d["bytes_acked"],
        "bytes_per_s": _round(s.rate_bytes_per_s),
        "sndbuf": s.sndbuf,
        "send_q_max": s.send_q_max,
        "sndbuf_full_pct": _pct(s.sndbuf_full_share),
        "minrtt_ms": s.minrtt_ms,
        "rtt_ms": _round(s.rtt_ms, 1),
        "samples": s.rows,
        "probe_ran": bool(s.probe),
        **{f"writer_{k}": v for k, v in s.probe.items() if k in sbd.PROBE_WRITES[:5]},
        **{f"writer_{k}": v for k, v in sbd.probe_means(s.probe).items() if k in ("sndbuf_mean", "wqueue_mean")},
    }
    if receiver is not None:
        ev.update(
            receiver_rcvbuf=receiver.rcvbuf,
            receiver_recv_q_mean=round(receiver.recv_q_mean),
            receiver_recv_q_max=receiver.recv_q_max,
            receiver_queue_pct=_pct(receiver.recv_q_mean / receiver.rcvbuf if receiver.rcvbuf else None),
        )
        rp = receiver.probe
        if rp:
            ev.update({f"reader_{k}": v for k, v in rp.items() if k in sbd.PROBE_READS[:4]})
            means = sbd.probe_means(rp)
            ev["reader_zero_window_pct"] = _pct(means.get("zero_window_read_share"))
            ev["reader_rcvbuf_mean"] = means.get("rcvbuf_mean")
    return ev


def _pct(v: float | None) -> float | None:
    return None if v is None else round(100 * v, 1)


# -- cause --------------------------------------------------------------------------------------


def _reader_is_slow(receiver: Side) -> bool:
    """What the reader leaves queued fills its buffer, or most of its reads left it half full."""
    queue = receiver.rcvbuf and receiver.recv_q_mean >= SLOW_QUEUE_SHARE * receiver.rcvbuf
    p = receiver.probe
    half = p.get("reads_half_full", 0) >= max(SLOW_HALF_FULL_READS, p.get("noted_reads", 0) / 2)
    return bool(queue or half)


def _cause(s: Side, receiver: Side | None, counters: dict[str, Any]) -> str:
    """Which buffer held the sender back."""
    if _pressure(counters) > 0:
        return "memory_pressure"
    if (s.share("sndbuf_limited_ms") or 0) >= (s.share("rwnd_limited_ms") or 0) or (
        _sndbuf_full(s) and (s.share("rwnd_limited_ms") or 0) < LIMITED_SHARE
    ):
        return "small_sndbuf"
    if receiver is None:
        return "peer_window"
    return "slow_reader" if _reader_is_slow(receiver) else "small_rcvbuf"


def _cause_evidence(run: RunView, s: Side, receiver: Side | None, cause: str) -> dict[str, Any]:
    """The numbers that tell the causes apart, and the buffers' sizes against the flow's BDP."""
    ev: dict[str, Any] = {"rwnd_limited_pct": _pct(s.share("rwnd_limited_ms")),
                          "sndbuf_limited_pct": _pct(s.share("sndbuf_limited_ms"))}  # fmt: skip
    rtt = s.minrtt_ms
    rate = s.rate_bytes_per_s
    if rtt and rate:
        ev["in_flight_bytes"] = sbd.needed_buffer(rate, rtt)
        ev["minrtt_ms"] = rtt
    if receiver is not None:
        ev["receiver_queue_pct"] = _pct(receiver.recv_q_mean / receiver.rcvbuf if receiver.rcvbuf else None)
        ev["receiver_rcvbuf"] = receiver.rcvbuf
        ev["rcvbuf_locked"] = bool(receiver.probe.get("rcvbuf_locked_reads")) if receiver.probe else None
        ev["half_full_reads_pct"] = _pct(sbd.probe_means(receiver.probe).get("half_full_read_share"))
    ev["sndbuf"] = s.sndbuf
    ev["sndbuf_locked"] = bool(s.probe.get("sndbuf_locked_writes")) if s.probe else None
    ev["sndbuf_full_pct"] = _pct(s.sndbuf_full_share)
    lab = run.lab or {}
    if lab.get("lab") == "socket-buffers":
        ev["lab_variant"] = lab.get("variant")
        ev["lab_bdp_bytes"] = (lab.get("path") or {}).get("bdp_bytes")
    return ev


# -- fix, verification --------------------------------------------------------------------------


def _fix_evidence(run: RunView, s: Side, receiver: Side | None, cause: str) -> dict[str, Any]:
    """The numbers the fix needs: the path's RTT, the rate wanted and the buffer that carries it."""
    rtt = s.minrtt_ms or s.rtt_ms
    lab = run.lab or {}
    path = lab.get("path") or {}
    want = path.get("rate_bits_per_s", 0) / 8 if lab.get("lab") == "socket-buffers" else None
    ev: dict[str, Any] = {"minrtt_ms": rtt, "want_bytes_per_s": want}
    if rtt and want:
        ev["bdp_bytes"] = sbd.needed_buffer(want, rtt)
    ns = receiver.netns if (cause in ("small_rcvbuf", "slow_reader") and receiver) else s.netns
    key = "net.ipv4.tcp_rmem" if cause in ("small_rcvbuf", "slow_reader") else "net.ipv4.tcp_wmem"
    triple = sbd.sysctl_triple(run, ns, key)
    ev["autotune_max"] = triple[2] if triple else None
    ev["rcvbuf"] = receiver.rcvbuf if receiver else None
    ev["sndbuf"] = s.sndbuf
    ev["reader"] = f"{s.raddr}:{s.rport}"
    return ev


def _fix(run: RunView, s: Side, receiver: Side | None, cause: str) -> Link:
    """The fix's numbers; a buffer nobody pinned that autotuning grew to its sysctl's max is fixed
    by that max (key <cause>_at_max), one set by the application by its socket option."""
    ev = _fix_evidence(run, s, receiver, cause)
    pinned = {"small_sndbuf": s.probe.get("sndbuf_locked_writes"),
              "small_rcvbuf": receiver.probe.get("rcvbuf_locked_reads") if receiver else None}  # fmt: skip
    size = ev["sndbuf"] if cause == "small_sndbuf" else ev["rcvbuf"]
    if cause in pinned and not pinned[cause] and size and ev["autotune_max"] and size >= 0.9 * ev["autotune_max"]:
        return Link("fix", f"{cause}_at_max", ev)
    return Link("fix", cause, ev)


def _verification(run: RunView, s: Side) -> Link:
    lab = run.lab or {}
    command = (
        "make lab LAB=socket-buffers VARIANT=healthy"
        if lab.get("lab") == "socket-buffers"
        else f"make capture NETNS={run.netns_label(s.netns)} DURATION=60"
    )
    return Link("verification", "rerun", {"command": command, "expect_limited_pct_below": 100 * LIMITED_SHARE})


def _status(s: Side, receiver: Side | None, cause: str) -> Status:
    """Confirmed when the probe saw the same limit the kernel's clocks measured."""
    p = s.probe
    rp = receiver.probe if receiver else {}
    if cause == "small_sndbuf":
        agrees = p.get("writes_sndbuf_limited", 0) + p.get("writes_blocked", 0) > 0
    elif cause == "slow_reader":
        agrees = p.get("writes_rwnd_limited", 0) > 0 or rp.get("reads_half_full", 0) > 0
    else:
        agrees = p.get("limited_writes", 0) > 0 or rp.get("noted_reads", 0) > 0
    return "confirmed" if agrees else "suspected"


# -- one sender, the run ------------------------------------------------------------------------


def _sndbuf_full(s: Side) -> bool:
    """The send buffer full with nothing unsent at most samples, whatever the clock says."""
    return (s.sndbuf_full_share or 0) >= SNDBUF_FULL_SAMPLES


def _evaluate_sender(run: RunView, s: Side, receiver: Side | None) -> Finding:
    subject = _subject(run, s, receiver)
    probe_ev = _probe_evidence(s, receiver)
    limited = max(s.share("rwnd_limited_ms") or 0, s.share("sndbuf_limited_ms") or 0)
    if limited < LIMITED_SHARE and not _sndbuf_full(s):
        return Finding(KIND, "absent", subject, chain=[Link("probe", "below_threshold", probe_ev)])
    counters = _counter_evidence(run, s, receiver)
    cause = _cause(s, receiver, counters)
    return Finding(
        KIND,
        _status(s, receiver, cause),
        subject,
        window=_window(run, s.t0, s.t1),
        cause_class=cause,
        chain=[
            _symptom(run, s),
            Link("counter", "buffer_counters", counters),
            Link("probe", "flow_clocks", probe_ev),
            Link("cause", cause, _cause_evidence(run, s, receiver, cause)),
            _fix(run, s, receiver, cause),
            _verification(run, s),
        ],
    )


def _evaluate_reader(run: RunView, r: Side) -> Finding | None:
    """A local reader whose sender is elsewhere: slow when its queue stays full (the sender's
    clocks are not here to say how long it was held back)."""
    if r.rows < MIN_READER_SAMPLES or not _reader_is_slow(r):
        return None
    subject = {
        "netns": r.netns,
        "netns_label": run.netns_label(r.netns),
        "laddr": r.raddr,
        "lport": r.rport,
        "raddr": r.laddr,
        "rport": r.lport,
        "service_port": min(r.lport, r.rport),
        "we_are": "receiver",
        "receiver_netns": r.netns,
    }
    counters = {
        "receiver_netns_label": run.netns_label(r.netns),
        "receiver": sbd.counter_totals(run, r.netns, sbd.RECEIVER_COUNTERS + sbd.PRESSURE_COUNTERS),
    }
    means = sbd.probe_means(r.probe)
    probe_ev = {
        "receiver_rcvbuf": r.rcvbuf,
        "receiver_recv_q_mean": round(r.recv_q_mean),
        "receiver_recv_q_max": r.recv_q_max,
        "receiver_queue_pct": _pct(r.recv_q_mean / r.rcvbuf if r.rcvbuf else None),
        "span_s": round(r.span_s, 1),
        "samples": r.rows,
        "probe_ran": bool(r.probe),
        **{f"reader_{k}": v for k, v in r.probe.items() if k in sbd.PROBE_READS[:4]},
        "reader_zero_window_pct": _pct(means.get("zero_window_read_share")),
    }
    cause_ev = {
        "receiver_queue_pct": probe_ev["receiver_queue_pct"],
        "receiver_rcvbuf": r.rcvbuf,
        "half_full_reads_pct": _pct(means.get("half_full_read_share")),
    }
    rate = r.deltas["bytes_received"] / r.span_s if r.span_s > 0 else None
    zero = counters["receiver"]["TCPToZeroWindowAdv"] > 0 or r.probe.get("reads_half_full", 0) > 0
    return Finding(
        KIND,
        "confirmed" if zero and r.probe else "suspected",
        subject,
        window=_window(run, r.t0, r.t1),
        cause_class="slow_reader",
        chain=[
            Link("symptom", "flow_rate", {"bytes_per_s": _round(rate), "span_s": round(r.span_s, 1)}),
            Link("counter", "buffer_counters", counters),
            Link("probe", "reader_queue", probe_ev),
            Link("cause", "slow_reader", cause_ev),
            Link("fix", "slow_reader", {"reader": f"{r.laddr}:{r.lport}", "rcvbuf": r.rcvbuf}),
            _verification(run, r),
        ],
    )


SocketKey = tuple[int, str, int, str, int]  # netns, laddr, lport, raddr, rport


# -- flows the probe saw limited and the sampler did not list -------------------------------------

# What the probe counts as a limit seen: writes held back or refused, reads that left the buffer
# half full or the window closed. A refused write (EAGAIN) alone is no limit: a non-blocking writer
# that writes as fast as it can meets a full buffer whatever its flow does (the healthy lab's 35);
# it counts on a send buffer SO_SNDBUF set.
PROBE_LIMITS = ("writes_blocked", "writes_rwnd_limited", "writes_sndbuf_limited", "reads_half_full",
                "reads_zero_window")  # fmt: skip


def _limits_seen(counted: dict[str, int]) -> dict[str, int]:
    seen = {c: counted.get(c, 0) for c in PROBE_LIMITS}
    if not counted.get("sndbuf_locked_writes", 0):
        seen["writes_blocked"] = 0
    return seen


def _flows_listed(run: RunView, netns: int) -> tuple[int, int]:
    """How many of the namespace's samples listed its flows, of how many (sockstat.csv)."""
    ss = run.table("sockstat")
    if ss.empty or "flows_listed" not in ss.columns:
        return 0, 0
    mine = ss[ss["netns"] == netns]
    return int(mine["flows_listed"].sum()), len(mine)


def _netns_arg(namespaces: list[int]) -> str:
    """make capture's NETNS= for these namespaces (quoted when more than one)."""
    words = " ".join(f"inode:{ns}" for ns in namespaces)
    return words if len(namespaces) == 1 else f'"{words}"'


Flow = tuple[str, int, str, int]  # the writer's laddr, lport, raddr, rport


def _limited_flows(run: RunView, judged: set[SocketKey], listed: set[SocketKey]) -> dict[Flow, dict[str, Any]]:
    """The flows the probe saw held back or left full that no judgement covered, each with its
    sockets (address:port -> netns) and its counts. A socket is covered when it was judged, or
    when its peer was and the peer's own peer was listed nowhere (the flow's other end, judged
    from this one); a flow of the same addresses and ports in another namespace covers none."""
    tuples = {k[1:] for k in listed}
    peer_of_judged = {(k[3], k[4], k[1], k[2]) for k in judged} - tuples
    flows: dict[Flow, dict[str, Any]] = {}
    for key, counted in sbd.probe_totals(run).items():
        seen = _limits_seen(counted)
        if key in judged or key[1:] in peer_of_judged or not any(seen.values()):
            continue
        netns, laddr, lport, raddr, rport = key
        writer = any(seen[c] for c in PROBE_LIMITS if c.startswith("writes"))
        flow = (laddr, lport, raddr, rport) if writer else (raddr, rport, laddr, lport)
        f = flows.setdefault(flow, {"sockets": {}, **dict.fromkeys(PROBE_LIMITS, 0)})
        f["sockets"][f"{laddr}:{lport}"] = netns
        for c in PROBE_LIMITS:
            f[c] += seen[c]
    return flows


def _not_listed_finding(run: RunView, flow: Flow, f: dict[str, Any], sampled: set[int]) -> Finding:
    """Not checked: one limited flow, both its sockets, each namespace's listings, and the
    capture that would judge it."""
    laddr, lport, raddr, rport = flow
    namespaces = sorted(set(f["sockets"].values()))
    sender = f["sockets"].get(f"{laddr}:{lport}")
    netns = sender if sender is not None else namespaces[0]
    listings = [(ns, *_flows_listed(run, ns)) for ns in namespaces if ns in sampled]
    subject = {"netns": netns, "netns_label": run.netns_label(netns), "laddr": laddr, "lport": lport,
               "raddr": raddr, "rport": rport, "service_port": min(lport, rport),
               "we_are": "sender" if sender is not None else "receiver",
               "receiver_netns": f["sockets"].get(f"{raddr}:{rport}")}  # fmt: skip
    ev = {"sockets": ", ".join(f["sockets"]), **{c: f[c] for c in PROBE_LIMITS},
          "unsampled": [ns for ns in namespaces if ns not in sampled],
          "listings": [{"netns": ns, "flows_listed": n, "samples": m} for ns, n, m in listings],
          "command": f"make capture NETNS={_netns_arg(namespaces)} PROBES=socket_buffers DURATION=60"}  # fmt: skip
    return Finding(KIND, "not_checked", subject, chain=[Link("probe", "flow_not_listed", ev)])


def _not_listed(run: RunView, judged: set[SocketKey], listed: set[SocketKey]) -> list[Finding]:
    """Flows the probe saw held back or left full that no judgement covered (they had not two
    listings of their clocks: they lived between the sampler's listings, or their namespace was not
    sampled): not judged, so listed as not checked, one entry a flow, the most limited first."""
    sampled = {int(ns["inode"]) for ns in run.metadata.get("netns", [])}
    out = [_not_listed_finding(run, flow, f, sampled) for flow, f in _limited_flows(run, judged, listed).items()]
    out.sort(key=lambda f: -sum(f.chain[0].evidence[c] for c in PROBE_LIMITS))
    return out[:MAX_RULED_OUT]


def _evaluate(run: RunView) -> list[Finding]:
    run.table("sysctls")
    all_sides = sbd.sides(run)
    out: list[Finding] = []
    judged: set[SocketKey] = set()
    for s in all_sides.values():
        if s.deltas["busy_ms"] < MIN_BUSY_MS:
            continue  # not a sender over this capture (or hardly)
        receiver = sbd.pair(all_sides, s)
        judged.add(s.key)
        if receiver is not None:
            judged.add(receiver.key)
        out.append(_evaluate_sender(run, s, receiver))
    absent = sorted((f for f in out if f.status == "absent"), key=lambda f: -f.chain[0].evidence["busy_ms"])
    out = [f for f in out if f.status != "absent"] + absent[:MAX_RULED_OUT]
    for r in all_sides.values():
        if r.key not in judged and r.deltas["busy_ms"] < MIN_BUSY_MS:
            if r.rows >= MIN_READER_SAMPLES:
                judged.add(r.key)
            f = _evaluate_reader(run, r)
            if f is not None:
                out.append(f)
    # A socket listed at two samples or more had clocks to judge it by (a sender that hardly sent).
    judged |= {k for k, s in all_sides.items() if s.rows >= 2}
    return out + _not_listed(run, judged, set(all_sides))


RULE = Rule(KIND, INPUTS, _evaluate)
evaluate = RULE.evaluate
