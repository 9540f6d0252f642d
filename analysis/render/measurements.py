"""Lab measurements that are not findings: the numbers a lab exists to produce.

Each function returns plain data for verdicts.json ("measurements") and report.md.
"""

from __future__ import annotations

from typing import Any

from analysis.derived import time_wait
from analysis.derived.epoll import epoll_sweep
from analysis.derived.retransmits import reconcile
from analysis.load.run import Run
from analysis.wording import is_missing, number


def reconciliation(run: Run) -> list[dict[str, Any]]:
    """Probe retransmit counts vs the kernel's, per sampled namespace with any."""
    out = []
    if run.metadata["probes"].get("retransmits", {}).get("status") != "ok":
        return out
    for ns in run.metadata["netns"]:
        rec = reconcile(run, int(ns["inode"]))
        if rec["probe_retrans_segs"] or rec["kernel_retrans_segs"]:
            out.append({"netns_label": ns["label"], **rec})
    return out


def time_wait_summary(run: Run) -> list[dict[str, Any]]:
    """Per client endpoint: TIME_WAIT peak, Little's law at the end, observed TIME_WAIT length."""
    out = []
    if run.metadata["probes"].get("time_wait", {}).get("status") != "ok":
        return out
    for netns, raddr, port in time_wait.endpoints(run):
        ll = time_wait.littles_law(run, netns, raddr, port)
        if ll.empty or ll["measured"].max() == 0:
            continue
        last = ll.iloc[-1]
        peak_t = ll["measured"].idxmax()
        out.append(
            {
                "netns_label": run.netns_label(netns),
                "endpoint": f"{raddr}:{port}",
                "time_wait_peak": int(ll["measured"].max()),
                "predicted_at_peak": round(float(ll.loc[peak_t, "predicted"])),
                "time_wait_at_end": int(last["measured"]),
                "predicted_at_end": round(float(last["predicted"])),
                "time_wait_length_observed_s": time_wait.observed_time_wait_length(run, netns, raddr, port),
                "tcp_fin_timeout": run.sysctl(netns, "net.ipv4.tcp_fin_timeout"),
            }
        )
    return out


def all_measurements(run: Run) -> dict[str, Any]:
    m: dict[str, Any] = {}
    rec = reconciliation(run)
    if rec:
        m["retransmit_reconciliation"] = rec
    tw = time_wait_summary(run)
    if tw:
        m["time_wait"] = tw
    lab = run.lab or {}
    if lab.get("lab") == "epoll" and len(lab.get("phases") or []) > 1:
        m["epoll_sweep"] = epoll_sweep(run).to_dict(orient="records")
    return m


def _cell(v: Any) -> str:
    """A table cell in words: a missing value says so."""
    return "not measured" if is_missing(v) else number(v)


def markdown(m: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if not m:
        return lines
    lines += ["## Measurements", ""]
    for name, rows in m.items():
        if not rows:
            continue
        cols = list(rows[0].keys())
        lines += [f"### {name.replace('_', ' ')}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(_cell(r.get(c)) for c in cols) + " |" for r in rows]
        lines.append("")
    if "epoll_sweep" in m:
        rows = [r for r in m["epoll_sweep"] if not is_missing(r.get("ns_per_nonblocking_poll"))]
        rows = [r for r in rows if r["ns_per_nonblocking_poll"]]
        epc = [r["events_per_call"] for r in m["epoll_sweep"] if not is_missing(r.get("events_per_call"))]
        if len(rows) >= 2:
            first, last = rows[0], rows[-1]
            c0, c1 = first["ns_per_nonblocking_poll"], last["ns_per_nonblocking_poll"]
            calls = f", while events per call stayed {number(min(epc))}-{number(max(epc))}" if epc else ""
            lines.append(
                f"epoll cost per non-blocking poll: {number(c0)} ns with {number(first['idle_conns'])} idle registered "
                f"connections, {number(c1)} ns with {number(last['idle_conns'])} ({c1 / c0:.2f}x for "
                f"{last['idle_conns'] / max(1, first['idle_conns']):.0f}x the fds){calls}: the cost does not grow "
                "with registered fds (no linear scan)."
            )
            lines.append("")
    return lines
