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

from typing import Any

from .. import models
from ..derived import connects
from ..derived.time_wait import (
    LIFE_COLS,
    client_closes,
    eaddrnotavail_failures,
    eaddrnotavail_unrecorded,
    endpoints,
    littles_law,
    observed_time_wait_length,
    port_range,
)
from ..findings import Finding, Link
from .base import Rule, RunView

KIND = "time_wait_exhaustion"
INPUTS = ("tw_close", "tw_connect", "tw_sockets", "sockstat", "sysctls", "connects")
# TIME_WAIT sockets toward one endpoint at this share of the port range: exhausted, or about to be.
NEAR_FULL = 0.9


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


def _evaluate(run: RunView) -> list[Finding]:
    out: list[Finding] = []
    lab = run.lab or {}
    seen: dict[int, list[dict[str, Any]]] = {}
    for netns, raddr, port in endpoints(run, failed=True):
        rng = port_range(run, netns)
        ports = rng[1] - rng[0] + 1 if rng else None
        ll = littles_law(run, netns, raddr, port)
        tw_max = int(ll["measured"].max()) if not ll.empty else 0
        near_full = ports is not None and tw_max >= NEAR_FULL * ports
        seen.setdefault(netns, []).append(
            {"raddr": raddr, "service_port": port, "time_wait_max": tw_max, "near_full": near_full}
        )
        # This endpoint's own failures; those with no destination recorded (contract 2) only when its
        # own TIME_WAIT holds its ports: never because another endpoint of the namespace failed.
        unrecorded = eaddrnotavail_unrecorded(run, netns)
        failed = eaddrnotavail_failures(run, netns, raddr, port, unrecorded=near_full)
        eaddr_calls = int(failed["failures"].sum())
        subject = {"netns": netns, "netns_label": run.netns_label(netns), "raddr": raddr, "service_port": port}
        counter_ev = {
            "time_wait_length_observed_s": observed_time_wait_length(run, netns, raddr, port),
            "tcp_fin_timeout": run.sysctl(netns, "net.ipv4.tcp_fin_timeout"),
            "time_wait_max": tw_max,
            "ports_in_range": ports,
            "port_range": f"{rng[0]}-{rng[1]}" if rng else None,
            "time_wait_share_of_ports_pct": round(100 * tw_max / ports, 1) if ports else None,
            "eaddrnotavail_unrecorded_destination": unrecorded,
            "eaddrnotavail_here": eaddr_calls,
        }
        probe = run.probe_status("time_wait")
        traced = probe == "ok"
        if not near_full and eaddr_calls == 0:
            if traced:
                out.append(Finding(KIND, "absent", subject, chain=[Link("counter", "ports_free", counter_ev)]))
            else:
                # No connect() errors seen because nothing traced them: not checked, not ruled out.
                out.append(
                    Finding(
                        KIND,
                        "not_checked",
                        subject,
                        chain=[
                            Link("counter", "ports_free", counter_ev),
                            Link("probe", "probe_not_run", {"probe_status": probe}),
                        ],
                    )
                )
            continue
        mine = client_closes(run, netns, raddr, port)
        active, passive = int(mine["active_closes"].sum()), int(mine["passive_closes"].sum())
        lives = mine[LIFE_COLS].sum()
        n_life = int(lives.sum())
        at = ll["measured"].idxmax() if not ll.empty else run.end
        predicted_at_peak = float(ll.loc[at, "predicted"]) if not ll.empty else 0.0
        active_rows = mine[mine["active_closes"] > 0]
        span = max(1.0, float(active_rows["time_s"].max() - active_rows["time_s"].min() + 1)) if len(active_rows) else 1
        probe_ev = {
            "active_closes": active,
            "passive_closes": passive,
            "active_close_rate_per_s": round(active / span, 1),
            "closes_in_60s_before_peak": round(predicted_at_peak),
            "time_wait_at_peak": tw_max,
            "littles_law_error_pct": round(100 * (tw_max - predicted_at_peak) / predicted_at_peak, 1)
            if predicted_at_peak
            else None,
            "lifetime_under_1s_pct": round(100 * float(lives[LIFE_COLS[:4]].sum()) / n_life, 1) if n_life else None,
            "mean_lifetime_ms": round(float(mine["life_sum_us"].sum()) / n_life / 1000, 1) if n_life else None,
        }
        pids = failed[failed["pid"] > 0].groupby(["pid", "comm"])["failures"].sum().sort_values(ascending=False)
        symptom_ev: dict[str, Any] = {
            # Unknown, not zero, when nothing traced connect().
            "eaddrnotavail_connect_calls": eaddr_calls if traced else None,
            "processes": ", ".join(f"{c} (pid {p})" for p, c in pids.index[:3]),
        }
        client = connects.summary(run)
        if client:
            symptom_ev["attempts"] = client["attempts"]
            symptom_ev["attempts_eaddrnotavail"] = client["attempts_eaddrnotavail"]
            symptom_ev["attempts_ok"] = client["ok"]
        reuse = run.sysctl(netns, "net.ipv4.tcp_tw_reuse")
        cause_ev = {
            "we_close_first_pct": round(100 * active / (active + passive), 1) if active + passive else None,
            "tcp_tw_reuse": reuse,
            "tcp_timestamps": run.sysctl(netns, "net.ipv4.tcp_timestamps"),
            "tcp_fin_timeout": run.sysctl(netns, "net.ipv4.tcp_fin_timeout"),
            "max_new_conn_per_s_without_reuse": round(models.tw_max_rate(ports), 1) if ports else None,
            # The model's prediction at the measured rate: how long the range lasts.
            "active_close_rate_per_s": probe_ev["active_close_rate_per_s"],
            "ports_last_s_at_measured_rate": round(ports / probe_ev["active_close_rate_per_s"], 1)
            if ports and probe_ev["active_close_rate_per_s"]
            else None,
        }
        fix_ev = {
            "ranked": ["connection_reuse", "tcp_tw_reuse", "wider_port_range"],
            "tcp_tw_reuse": reuse,
            "ports_in_range": ports,
            "fin_timeout_does_not_help": True,
        }
        if lab.get("lab") == "time-wait":
            command = "make lab LAB=time-wait VARIANT=keepalive (or VARIANT=reuse)"
        else:
            command = f"make capture NETNS={subject['netns_label']} DURATION=120"
        status = "confirmed" if (near_full and eaddr_calls > 0) else "suspected"
        t_first = float(ll.index[ll["measured"] >= NEAR_FULL * ports][0]) if near_full else run.start
        out.append(
            Finding(
                KIND,
                status,
                subject,
                window={
                    "start_s": t_first,
                    "end_s": float(at),
                    "start_rel_s": round(t_first - run.start, 1),
                    "end_rel_s": round(float(at) - run.start, 1),
                },
                cause_class="short_connections_client_closes",
                chain=[
                    Link("symptom", "eaddrnotavail", symptom_ev),
                    Link("counter", "time_wait_vs_ports", counter_ev),
                    Link("probe", "active_closes", probe_ev)
                    if traced
                    else Link("probe", "probe_not_run", {"probe_status": probe}),
                    Link("cause", "short_connections_client_closes", cause_ev),
                    Link("fix", "ranked", fix_ev),
                    Link("verification", "rerun", {"command": command, "expect_eaddrnotavail": 0}),
                ],
            )
        )
    for netns in sorted({int(x) for x in run.table("tw_connect")["netns"]}):
        n = eaddrnotavail_unrecorded(run, netns)
        if n and not any(e["near_full"] for e in seen.get(netns, [])):
            out.append(_unattributed(run, netns, n, seen.get(netns, [])))
    return out


RULE = Rule(KIND, INPUTS, _evaluate)
evaluate = RULE.evaluate

# Kept importable from here for tests/integration/test_family_labs.py (not edited by this change);
# everything else imports them from analysis.derived.time_wait and analysis.kernel.
from ..derived.time_wait import tw_series  # noqa: E402
from ..kernel import EADDRNOTAVAIL  # noqa: E402
from ..kernel import TCP_TIMEWAIT_LEN_S as TIME_WAIT_S  # noqa: E402

__all__ = [
    "EADDRNOTAVAIL",
    "INPUTS",
    "KIND",
    "RULE",
    "TIME_WAIT_S",
    "evaluate",
    "littles_law",
    "observed_time_wait_length",
    "tw_series",
]
