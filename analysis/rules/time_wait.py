"""time_wait_exhaustion: TIME_WAIT sockets hold a client's ephemeral ports toward one server.

Every connection this side closes first keeps its (local port, remote address,
remote port) in TIME_WAIT for 60 s, whatever tcp_fin_timeout says. Toward one
destination a client therefore sustains at most ports / 60 s new connections;
above that connect() fails with EADDRNOTAVAIL.

Chain: symptom (EADDRNOTAVAIL, connect latency)
 -> counter (TIME_WAIT sockets toward the endpoint vs ports in ip_local_port_range)
 -> probe (active closes; Little's law: closes in the last 60 s = TIME_WAIT now)
 -> cause (this side closes first; short-lived connections)
 -> fixes ranked -> verification.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from .. import models
from ..derived import connects
from ..derived.time_wait import (
    client_closes,
    close_summary,
    eaddrnotavail_failures,
    eaddrnotavail_recorded,
    eaddrnotavail_unrecorded,
    endpoints,
    littles_law,
    littles_law_peak,
    observed_time_wait_length,
    port_range,
    tw_max_per_endpoint,
    tw_samples_listed,
)
from ..findings import Finding, Link, Status
from .base import Rule, RunView

KIND = "time_wait_exhaustion"
INPUTS = ("tw_close", "tw_connect", "tw_sockets", "sockstat", "sysctls", "connects")
# TIME_WAIT sockets toward one endpoint at this share of the port range: exhausted, or about to be.
NEAR_FULL = 0.9


@dataclass
class _Endpoint:
    """One destination of this side's connects, and how much of its ports TIME_WAIT held."""

    netns: int
    raddr: str
    port: int
    rng: tuple[int, int] | None  # ip_local_port_range
    tw_max: int  # the most TIME_WAIT sockets toward it at one sample

    @property
    def ports(self) -> int | None:
        return self.rng[1] - self.rng[0] + 1 if self.rng else None

    @property
    def near_full(self) -> bool:
        """Decision: TIME_WAIT held at least NEAR_FULL of the port range."""
        return self.ports is not None and self.tw_max >= NEAR_FULL * self.ports


def _unattributed(run: RunView, netns: int, n: int, seen: list[dict[str, Any]]) -> Finding:
    """EADDRNOTAVAIL with no destination recorded (contract 2) in a namespace where no endpoint's
    TIME_WAIT came near its ports: said once for the namespace, never pinned on an endpoint."""
    failed = eaddrnotavail_failures(run, netns)
    pids = failed[failed["pid"] > 0].groupby(["pid", "comm"])["failures"].sum().sort_values(ascending=False)
    rng = port_range(run, netns)
    top = sorted(seen, key=lambda e: -e["time_wait_max"])[:3]
    return Finding(
        KIND,
        "suspected",
        {"netns": netns, "netns_label": run.netns_label(netns), "raddr": None, "service_port": None},
        window={"start_s": run.start, "end_s": run.end, "start_rel_s": 0.0, "end_rel_s": round(run.end - run.start, 1)},
        cause_class="unattributed",
        chain=[
            Link(
                "symptom",
                "eaddrnotavail",
                {"eaddrnotavail_connect_calls": n, "processes": ", ".join(f"{c} (pid {p})" for p, c in pids.index[:3])},
            ),
            Link(
                "counter",
                "no_endpoint_near_full",
                {
                    "ports_in_range": rng[1] - rng[0] + 1 if rng else None,
                    "endpoints": len(seen),
                    "busiest": [f"{e['raddr']}:{e['service_port']} ({e['time_wait_max']})" for e in top],
                },
            ),
            Link("cause", "unattributed", {"eaddrnotavail_unrecorded_destination": n}),
        ],
    )


# -- counter --------------------------------------------------------------------------------------


def _counter_evidence(run: RunView, ep: _Endpoint, unrecorded: int, eaddr_calls: int) -> dict[str, Any]:
    """TIME_WAIT toward the endpoint against the ports in range, and how long TIME_WAIT lasts here."""
    rng, ports = ep.rng, ep.ports
    listed, samples = tw_samples_listed(run, ep.netns)
    return {
        "time_wait_length_observed_s": observed_time_wait_length(run, ep.netns, ep.raddr, ep.port),
        "tcp_fin_timeout": run.sysctl(ep.netns, "net.ipv4.tcp_fin_timeout"),
        "time_wait_max": ep.tw_max,
        "time_wait_samples_listed": listed if listed < samples else None,
        "samples": samples if listed < samples else None,
        "ports_in_range": ports,
        "port_range": f"{rng[0]}-{rng[1]}" if rng else None,
        "time_wait_share_of_ports_pct": round(100 * ep.tw_max / ports, 1) if ports else None,
        "eaddrnotavail_unrecorded_destination": unrecorded,
        "eaddrnotavail_here": eaddr_calls,
    }


# -- decision -----------------------------------------------------------------------------------------


def _ruled_out(subject: dict[str, Any], counter_ev: dict[str, Any], probe: str | None) -> Finding:
    """Ports free and no connect() failed: absent; or not checked, when nothing traced connect()."""
    if probe == "ok":
        return Finding(KIND, "absent", subject, chain=[Link("counter", "ports_free", counter_ev)])
    # No connect() errors seen because nothing traced them: not checked, not ruled out.
    chain = [Link("counter", "ports_free", counter_ev), Link("probe", "probe_not_run", {"probe_status": probe})]
    return Finding(KIND, "not_checked", subject, chain=chain)


def _status(ep: _Endpoint, eaddr_calls: int) -> Status:
    """Confirmed: TIME_WAIT held the ports and connect() failed for want of one."""
    return "confirmed" if (ep.near_full and eaddr_calls > 0) else "suspected"


def _window(run: RunView, ep: _Endpoint, ll: pd.DataFrame, at: float) -> dict[str, float]:
    """From when TIME_WAIT first held NEAR_FULL of the ports (the capture's start if it never did) to its peak."""
    t_first = float(ll.index[ll["measured"] >= NEAR_FULL * ep.ports][0]) if ep.near_full else run.start
    return {
        "start_s": t_first,
        "end_s": float(at),
        "start_rel_s": round(t_first - run.start, 1),
        "end_rel_s": round(float(at) - run.start, 1),
    }


# -- symptom and probe -------------------------------------------------------------------------------


def _symptom_evidence(run: RunView, failed: pd.DataFrame, eaddr_calls: int, traced: bool) -> dict[str, Any]:
    """connect() calls that failed with EADDRNOTAVAIL, by whom; the lab client's attempts."""
    pids = failed[failed["pid"] > 0].groupby(["pid", "comm"])["failures"].sum().sort_values(ascending=False)
    ev: dict[str, Any] = {
        # Unknown, not zero, when nothing traced connect().
        "eaddrnotavail_connect_calls": eaddr_calls if traced else None,
        "processes": ", ".join(f"{c} (pid {p})" for p, c in pids.index[:3]),
    }
    client = connects.summary(run)
    if client:
        ev["attempts"] = client["attempts"]
        ev["attempts_eaddrnotavail"] = client["attempts_eaddrnotavail"]
        ev["attempts_ok"] = client["ok"]
    return ev


def _probe_evidence(run: RunView, ep: _Endpoint, predicted_at_peak: float) -> dict[str, Any]:
    """Active closes toward the endpoint, and Little's law: closes in the last 60 s = TIME_WAIT now."""
    closes = close_summary(client_closes(run, ep.netns, ep.raddr, ep.port))
    return {
        "active_closes": closes["active_closes"],
        "passive_closes": closes["passive_closes"],
        "active_close_rate_per_s": closes["active_close_rate_per_s"],
        "closes_in_60s_before_peak": round(predicted_at_peak),
        "time_wait_at_peak": ep.tw_max,
        "littles_law_error_pct": round(100 * (ep.tw_max - predicted_at_peak) / predicted_at_peak, 1)
        if predicted_at_peak
        else None,
        "lifetime_under_1s_pct": closes["lifetime_under_1s_pct"],
        "mean_lifetime_ms": closes["mean_lifetime_ms"],
    }


# -- cause, fix, verification --------------------------------------------------------------------------


def _cause_evidence(run: RunView, ep: _Endpoint, probe_ev: dict[str, Any]) -> dict[str, Any]:
    """This side closes first; the knobs that decide how long ports stay held; how long the range lasts."""
    active, passive, ports = probe_ev["active_closes"], probe_ev["passive_closes"], ep.ports
    rate = probe_ev["active_close_rate_per_s"]
    return {
        "we_close_first_pct": round(100 * active / (active + passive), 1) if active + passive else None,
        "tcp_tw_reuse": run.sysctl(ep.netns, "net.ipv4.tcp_tw_reuse"),
        "tcp_timestamps": run.sysctl(ep.netns, "net.ipv4.tcp_timestamps"),
        "tcp_fin_timeout": run.sysctl(ep.netns, "net.ipv4.tcp_fin_timeout"),
        "max_new_conn_per_s_without_reuse": round(models.tw_max_rate(ports), 1) if ports else None,
        # The model's prediction at the measured rate: how long the range lasts.
        "active_close_rate_per_s": rate,
        "ports_last_s_at_measured_rate": round(ports / rate, 1) if ports and rate else None,
    }


def _fix_evidence(cause_ev: dict[str, Any], ports: int | None) -> dict[str, Any]:
    return {
        "ranked": ["connection_reuse", "tcp_tw_reuse", "wider_port_range"],
        "tcp_tw_reuse": cause_ev["tcp_tw_reuse"],
        "tcp_timestamps": cause_ev.get("tcp_timestamps"),
        "ports_in_range": ports,
        "fin_timeout_does_not_help": True,
    }


def _verification(run: RunView, netns_label: str) -> Link:
    if (run.lab or {}).get("lab") == "time-wait":
        command = "make lab LAB=time-wait VARIANT=keepalive (or VARIANT=reuse)"
    else:
        command = f"make capture NETNS={netns_label} DURATION=120"
    return Link("verification", "rerun", {"command": command, "expect_eaddrnotavail": 0})


# -- one endpoint, the run --------------------------------------------------------------------------


def _evaluate_endpoint(run: RunView, ep: _Endpoint, recorded: int) -> Finding:
    """One endpoint; `recorded`: its own EADDRNOTAVAIL failures (destination recorded)."""
    netns = ep.netns
    # This endpoint's own failures; those with no destination recorded (contract 2) only when its
    # own TIME_WAIT holds its ports: never because another endpoint of the namespace failed.
    unrecorded = eaddrnotavail_unrecorded(run, netns)
    eaddr_calls = recorded + (unrecorded if ep.near_full else 0)
    subject = {"netns": netns, "netns_label": run.netns_label(netns), "raddr": ep.raddr, "service_port": ep.port}
    counter_ev = _counter_evidence(run, ep, unrecorded, eaddr_calls)
    probe = run.probe_status("time_wait")
    if not ep.near_full and eaddr_calls == 0:
        return _ruled_out(subject, counter_ev, probe)
    # A finding: its evidence in full (per sample; the many endpoints ruled out above need none).
    failed = eaddrnotavail_failures(run, netns, ep.raddr, ep.port, unrecorded=ep.near_full)
    ll = littles_law(run, netns, ep.raddr, ep.port)
    at, predicted_at_peak = littles_law_peak(ll, run.end)
    probe_ev = _probe_evidence(run, ep, predicted_at_peak)
    cause_ev = _cause_evidence(run, ep, probe_ev)
    return Finding(
        KIND,
        _status(ep, eaddr_calls),
        subject,
        window=_window(run, ep, ll, at),
        cause_class="short_connections_client_closes",
        chain=[
            Link("symptom", "eaddrnotavail", _symptom_evidence(run, failed, eaddr_calls, probe == "ok")),
            Link("counter", "time_wait_vs_ports", counter_ev),
            Link("probe", "active_closes", probe_ev)
            if probe == "ok"
            else Link("probe", "probe_not_run", {"probe_status": probe}),
            Link("cause", "short_connections_client_closes", cause_ev),
            Link("fix", "ranked", _fix_evidence(cause_ev, ep.ports)),
            _verification(run, subject["netns_label"]),
        ],
    )


def _evaluate(run: RunView) -> list[Finding]:
    out: list[Finding] = []
    seen: dict[int, list[dict[str, Any]]] = {}
    # Every endpoint's numbers at once: a host where connections come and go toward new
    # destinations has thousands (an hour's soak capture: 1 568).
    tw_max, recorded = tw_max_per_endpoint(run), eaddrnotavail_recorded(run)
    for key in endpoints(run, failed=True):
        netns, raddr, port = key
        ep = _Endpoint(netns, raddr, port, port_range(run, netns), tw_max.get(key, 0))
        seen.setdefault(netns, []).append(
            {"raddr": raddr, "service_port": port, "time_wait_max": ep.tw_max, "near_full": ep.near_full}
        )
        out.append(_evaluate_endpoint(run, ep, recorded.get(key, 0)))
    for netns in sorted({int(x) for x in run.table("tw_connect")["netns"]}):
        n = eaddrnotavail_unrecorded(run, netns)
        if n and not any(e["near_full"] for e in seen.get(netns, [])):
            out.append(_unattributed(run, netns, n, seen.get(netns, [])))
    return out


RULE = Rule(KIND, INPUTS, _evaluate)
evaluate = RULE.evaluate
