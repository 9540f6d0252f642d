"""Retransmits seen by the probe (rt_endpoint) against the kernel's own counters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from . import RunLike
from .counters import total_delta
from .socket_buffers import sides

FlowKey = tuple[int, str, int, str, int]  # netns, laddr, lport, raddr, rport: the sender's socket

SEGMENT_COLS = ["data_segs", "syn_segs", "synack_segs"]
# A flow that re-sent at least this share of its endpoint's data segments is named.
DOMINANT_FLOW_SHARE = 0.8


def endpoint_rows(run: RunLike, netns: int) -> pd.DataFrame:
    """rt_endpoint rows of one namespace."""
    rt = run.table("rt_endpoint")
    return rt[rt["netns"] == netns]


def segments_per_interval(run: RunLike, netns: int) -> pd.Series:
    """Retransmitted segments (data, SYN and SYN-ACK) per probe interval in one namespace."""
    rt = endpoint_rows(run, netns)
    return (rt["data_segs"] + rt["syn_segs"] + rt["synack_segs"]).groupby(rt["time_s"]).sum()


def _diff_pct(a: int, b: int) -> float | None:
    return round(100.0 * (a - b) / b, 2) if b else (0.0 if a == 0 else None)


def reconcile(run: RunLike, netns: int) -> dict[str, Any]:
    """Probe segments vs the kernel's own counters over the whole capture, one namespace.

    probe_recursion_misses is None when the capture did not report them."""
    rt = endpoint_rows(run, netns)
    probe_all = int(rt[SEGMENT_COLS].sum().sum())
    probe_syn = int(rt[["syn_segs", "synack_segs"]].sum().sum())
    kern_all = total_delta(run, netns, "RetransSegs")
    kern_syn = total_delta(run, netns, "TCPSynRetrans")
    misses = run.metadata["probes"].get("retransmits", {}).get("recursion_misses")
    return {
        "probe_recursion_misses": misses,
        "probe_retrans_segs": probe_all,
        "kernel_retrans_segs": kern_all,
        "retrans_diff_pct": _diff_pct(probe_all, kern_all),
        "probe_syn_retrans": probe_syn,
        "kernel_syn_retrans": kern_syn,
        "syn_diff_pct": _diff_pct(probe_syn, kern_syn),
        "failed_attempts": int(rt["failed_events"].sum()),
    }


def endpoint_flows(run: RunLike, netns: int, laddr: str, raddr: str, port: int, local: int) -> pd.DataFrame | None:
    """rt_flow rows of the flows behind one rt_endpoint key (the service port is the lower of the
    two ports, as the probe folds them), or None when the run has no per-flow data (contract 2)."""
    fl = run.table("rt_flow")  # empty in runs of contract 2
    if int(run.metadata.get("data_contract", 0)) < 3:
        return None
    fl = fl[(fl["netns"] == netns) & (fl["laddr"] == laddr) & (fl["raddr"] == raddr)]
    lp, rp = fl["lport"].astype("int64"), fl["rport"].astype("int64")
    svc_local = lp <= rp
    svc = lp.where(svc_local, rp)
    return fl[(svc == port) & (svc_local.astype(int) == local)]


def spurious_by_flow(run: RunLike) -> dict[FlowKey, int] | None:
    """Per sending socket the socket scan listed, the re-sent segments its peer reported received
    twice (tcp_info dsack_dups over the capture; 0 for none): the original had arrived, so they are
    no loss (reordering on the path, a tail-loss probe, an RTO fired early on a busy host). A socket
    it never listed has no entry: not known. None when the run did not record them (contract 10 or
    older, or no socket scan)."""
    sb = run.table("sock_buffers")
    if sb.empty or sb["dsack_dups"].isna().all():
        return None
    return {k: s.deltas["dsack_dups"] for k, s in sides(run, probe=False).items()}


def _spurious_per_flow(flows: pd.DataFrame, spurious: dict[FlowKey, int]) -> pd.Series:
    """SPURIOUS for each of FLOWS' (lport, rport); NaN where the socket scan never listed the flow."""
    keys = flows[["netns", "laddr", "lport", "raddr", "rport"]].drop_duplicates()
    out: dict[tuple[int, int], float] = {}
    for k in keys.itertuples():
        key = (int(k.netns), str(k.laddr), int(k.lport), str(k.raddr), int(k.rport))
        out[(key[2], key[4])] = spurious.get(key, float("nan"))
    return pd.Series(out, dtype="float64")


def flow_rates(flows: pd.DataFrame, spurious: dict[FlowKey, int] | None = None) -> dict[str, Any]:
    """Retransmit rate of an endpoint's flows against their own data segments, and the worst flow.
    The segments the peers reported received twice (SPURIOUS, spurious_by_flow) are not lost:
    they count for neither; without them (None) every re-sent segment counts. flow_unread_segs:
    those re-sent by flows the socket scan never listed (the rule does not take them as lost)."""
    by_flow = flows.groupby(["lport", "rport"])[["data_segs", "data_segs_out"]].sum()
    dups: dict[str, Any] = {"flow_spurious_segs": None}
    if spurious is not None and not by_flow.empty:
        dup = _spurious_per_flow(flows, spurious).reindex(by_flow.index)
        # Re-sent by flows the scan never listed: whether their peers had them is not known.
        dups["flow_unread_segs"] = int(by_flow["data_segs"][dup.isna()].sum())
        dup = dup.fillna(0).astype("int64")
        dups["flow_spurious_segs"] = int(dup.clip(upper=by_flow["data_segs"]).sum())
        by_flow["data_segs"] = (by_flow["data_segs"] - dup).clip(lower=0)
    sent = int(by_flow["data_segs_out"].sum())
    resent = int(by_flow["data_segs"].sum())
    per = by_flow[by_flow["data_segs_out"] > 0]
    worst: dict[str, Any] = {}
    if not per.empty:
        rate = per["data_segs"] / per["data_segs_out"]
        (lport, rport) = rate.idxmax()
        worst = {"worst_flow": f"{lport} -> {rport}", "worst_flow_rate_pct": round(100 * float(rate.max()), 2)}
    # One flow carrying (nearly) all of the endpoint's re-sent data is the object at
    # fault: it is named, not only its endpoint.
    dominant: dict[str, Any] = {}
    if resent:
        (lp, rp), top = by_flow["data_segs"].idxmax(), int(by_flow["data_segs"].max())
        if top >= DOMINANT_FLOW_SHARE * resent:
            dominant = {"flow_lport": int(lp), "flow_rport": int(rp), "flow_share_pct": round(100 * top / resent, 1)}
    return {
        **dominant,
        "flows_retransmitting": len(per),
        "flow_data_segs_out": sent,
        "flow_data_segs": resent,
        "flow_rate_pct": round(100 * resent / sent, 3) if sent else None,
        **dups,
        **worst,
    }


@dataclass(frozen=True)
class EndpointRates:
    """How much one endpoint re-sent, against what it (or its namespace) sent, over its window."""

    data: int  # data segments re-sent (probe)
    syn: int  # SYN and SYN-ACK segments re-sent (probe)
    sent: int  # the namespace's OutSegs over the window
    opens: int  # the namespace's new connections (ActiveOpens + PassiveOpens) over the window
    rate: float | None  # share re-sent: of the endpoint's flows' own data segments when known, else of `sent`
    syn_share: float | None  # SYN retransmits per new connection


def endpoint_rates(
    run: RunLike, netns: int, rows: pd.DataFrame, per_flow: dict[str, Any], t0: float, t1: float, interval: int
) -> EndpointRates:
    """The retransmit rates of one endpoint (its rt_endpoint rows, its flows' flow_rates) over
    (t0, t1]; counter samples land up to one interval after the segments they count."""
    # Re-sent data the peers had received already is no loss (flow_rates).
    data = max(int(rows["data_segs"].sum()) - (per_flow.get("flow_spurious_segs") or 0), 0)
    syn = int(rows["syn_segs"].sum() + rows["synack_segs"].sum())
    end = t1 + interval + 0.5
    sent = total_delta(run, netns, "OutSegs", t0, end)
    opens = total_delta(run, netns, "ActiveOpens", t0, end) + total_delta(run, netns, "PassiveOpens", t0, end)
    if per_flow.get("flow_data_segs_out"):
        # The endpoint's own data segments: a busy neighbour cannot dilute it.
        rate = per_flow["flow_data_segs"] / per_flow["flow_data_segs_out"]
    else:
        rate = (data + syn) / sent if sent else None
    return EndpointRates(data, syn, sent, opens, rate, syn / opens if opens else None)
