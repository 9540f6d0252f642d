"""Lab measurements that are not findings: the numbers a lab exists to produce.

Each function returns plain data for verdicts.json ("measurements"); report.md shows
them through analysis/render/measurements.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from analysis.derived import time_wait
from analysis.derived.epoll import epoll_sweep
from analysis.derived.retransmits import reconcile
from analysis.load import Run


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


# Endpoints in the TIME_WAIT table: those with the highest peaks (an hour on a host where
# connections come and go toward new destinations has thousands; Little's law for each took 20 s).
TIME_WAIT_ROWS = 20


def time_wait_endpoints(run: Run) -> tuple[list[tuple[int, str, int]], int]:
    """The client endpoints that held TIME_WAIT, at most TIME_WAIT_ROWS of the highest peaks in
    endpoint order, and how many held TIME_WAIT in all."""
    peaks = time_wait.tw_max_per_endpoint(run)
    held = [k for k in time_wait.endpoints(run) if peaks.get(k, 0) > 0]
    top = set(sorted(held, key=lambda k: -peaks[k])[:TIME_WAIT_ROWS])
    return [k for k in held if k in top], len(held)


def time_wait_summary(run: Run) -> list[dict[str, Any]]:
    """Per client endpoint (time_wait_endpoints): TIME_WAIT peak, Little's law at the end, observed
    TIME_WAIT length."""
    out: list[dict[str, Any]] = []
    if run.metadata["probes"].get("time_wait", {}).get("status") != "ok":
        return out
    for netns, raddr, port in time_wait_endpoints(run)[0]:
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


def _probe_ran(family: str) -> Callable[[Run], bool]:
    return lambda run: run.metadata["probes"].get(family, {}).get("status") == "ok"


def _reconciliation(run: Run) -> dict[str, Any]:
    rec = reconciliation(run)
    return {"retransmit_reconciliation": rec} if rec else {}


def _time_wait(run: Run) -> dict[str, Any]:
    tw = time_wait_summary(run)
    if not tw:
        return {}
    listed, held = time_wait_endpoints(run)
    return {"time_wait": tw, **({"time_wait_endpoints_held": held} if held > len(listed) else {})}


def _is_epoll_sweep(run: Run) -> bool:
    lab = run.lab or {}
    return lab.get("lab") == "epoll" and len(lab.get("phases") or []) > 1


def _epoll_sweep(run: Run) -> dict[str, Any]:
    return {"epoll_sweep": epoll_sweep(run).to_dict(orient="records")}


@dataclass(frozen=True)
class Measurement:
    """One part of verdicts.json's measurements: the tables it reads when it applies to a run (so
    a report can run it beside the rules that read them, and let them go after) and its keys."""

    name: str
    inputs: tuple[str, ...]
    applies: Callable[[Run], bool]
    measure: Callable[[Run], dict[str, Any]]


# In verdicts.json's order.
MEASUREMENTS: tuple[Measurement, ...] = (
    Measurement("retransmit_reconciliation", ("rt_endpoint", "counters"), _probe_ran("retransmits"), _reconciliation),
    Measurement("time_wait", ("tw_sockets", "tw_close", "sockstat", "sysctls"), _probe_ran("time_wait"), _time_wait),
    Measurement("epoll_sweep", ("ep_loop",), _is_epoll_sweep, _epoll_sweep),
)


def all_measurements(run: Run) -> dict[str, Any]:
    m: dict[str, Any] = {}
    for part in MEASUREMENTS:
        if part.applies(run):
            m.update(part.measure(run))
    return m
