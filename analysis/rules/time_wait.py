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

import pandas as pd

from .. import models
from ..findings import Finding, Link
from ..run import Run

KIND = "time_wait_exhaustion"
INPUTS = ("tw_close", "tw_connect", "tw_sockets", "sockstat", "sysctls", "connects")
TIME_WAIT_S = 60  # TCP_TIMEWAIT_LEN, fixed in the kernel
EADDRNOTAVAIL = 99
NEAR_FULL = 0.9
LIFE_COLS = ["life_lt_1ms", "life_lt_10ms", "life_lt_100ms", "life_lt_1s", "life_lt_10s", "life_ge_10s"]


def port_range(run: Run, netns: int) -> tuple[int, int] | None:
    v = run.sysctl(netns, "net.ipv4.ip_local_port_range")
    if not v:
        return None
    lo, hi = (int(x) for x in v.split())
    return lo, hi


def client_closes(run: Run, netns: int, raddr: str, port: int) -> pd.DataFrame:
    """tw_close rows of this side acting as the client of raddr:port."""
    c = run.table("tw_close")
    return c[(c["netns"] == netns) & (c["raddr"] == raddr) & (c["service_port"] == port) & (c["service_local"] == 0)]


def tw_series(run: Run, netns: int, raddr: str, port: int) -> pd.Series:
    """TIME_WAIT sockets toward (raddr, port) per sample, client side; 0 where ss listed none."""
    tw = run.table("tw_sockets")
    samples = sorted(run.table("sockstat").query("netns == @netns")["time_s"].unique())
    sel = tw[
        (tw["netns"] == netns) & (tw["raddr"] == raddr) & (tw["service_port"] == port) & (tw["service_local"] == 0)
    ]
    s = sel.groupby("time_s")["count"].sum().reindex(samples, fill_value=0).astype("int64")
    s.index.name = "time_s"
    return s


def littles_law(run: Run, netns: int, raddr: str, port: int) -> pd.DataFrame:
    """Per sample: measured TIME_WAIT vs active closes in the preceding 60 s (what Little's law predicts)."""
    measured = tw_series(run, netns, raddr, port)
    closes = client_closes(run, netns, raddr, port)
    by_t = closes.groupby("time_s")["active_closes"].sum()
    times = by_t.index.to_numpy(dtype=float)
    vals = by_t.to_numpy(dtype=float)
    predicted = [
        float(vals[(times > t - TIME_WAIT_S) & (times <= t)].sum()) if len(vals) else 0.0 for t in measured.index
    ]
    return pd.DataFrame({"measured": measured.to_numpy(), "predicted": predicted}, index=measured.index)


def observed_time_wait_length(run: Run, netns: int, raddr: str, port: int) -> float | None:
    """How long TIME_WAIT lasts here, from the timers ss shows. Until the first
    TIME_WAIT socket expires, the oldest one dates from the first active close,
    so age + its time left = the length. Median over those samples."""
    closes = client_closes(run, netns, raddr, port)
    closes = closes[closes["active_closes"] > 0]
    tw = run.table("tw_sockets")
    tw = tw[(tw["netns"] == netns) & (tw["raddr"] == raddr) & (tw["service_port"] == port) & tw["timer_min_s"].notna()]
    if closes.empty or tw.empty:
        return None
    # The probe's row for the first close is stamped at its interval's end: the
    # close happened within the interval before; take its middle.
    first_close = float(closes["time_s"].min()) - 0.5 * float(run.metadata.get("interval_s", 1))
    oldest = tw.groupby("time_s")["timer_min_s"].min()
    age = oldest.index.to_series().astype(float) - first_close
    early = (age > 0) & (age < 50)
    if not early.any():
        return None
    return round(float((age[early] + oldest[early].astype(float)).median()), 1)


def endpoints(run: Run) -> list[tuple[int, str, int]]:
    keys: set[tuple[int, str, int]] = set()
    for name in ("tw_sockets", "tw_close"):
        t = run.table(name)
        t = t[t["service_local"] == 0]
        keys |= {(int(a), str(b), int(c)) for a, b, c in t[["netns", "raddr", "service_port"]].itertuples(index=False)}
    return sorted(keys)


def evaluate(run: Run) -> list[Finding]:
    out: list[Finding] = []
    conn = run.table("tw_connect")
    lab = run.lab or {}
    for netns, raddr, port in endpoints(run):
        rng = port_range(run, netns)
        ports = rng[1] - rng[0] + 1 if rng else None
        ll = littles_law(run, netns, raddr, port)
        tw_max = int(ll["measured"].max()) if not ll.empty else 0
        failed = conn[(conn["netns"] == netns) & (conn["errno"] == EADDRNOTAVAIL)]
        eaddr_calls = int(failed["calls"].sum())
        subject = {"netns": netns, "netns_label": run.netns_label(netns), "raddr": raddr, "service_port": port}
        near_full = ports is not None and tw_max >= NEAR_FULL * ports
        counter_ev = {
            "time_wait_length_observed_s": observed_time_wait_length(run, netns, raddr, port),
            "tcp_fin_timeout": run.sysctl(netns, "net.ipv4.tcp_fin_timeout"),
            "time_wait_max": tw_max,
            "ports_in_range": ports,
            "port_range": f"{rng[0]}-{rng[1]}" if rng else None,
            "time_wait_share_of_ports_pct": round(100 * tw_max / ports, 1) if ports else None,
        }
        if not near_full and eaddr_calls == 0:
            out.append(Finding(KIND, "absent", subject, chain=[Link("counter", "ports_free", counter_ev)]))
            continue
        mine = client_closes(run, netns, raddr, port)
        active, passive = int(mine["active_closes"].sum()), int(mine["passive_closes"].sum())
        lives = mine[LIFE_COLS].sum()
        n_life = int(lives.sum())
        at = ll["measured"].idxmax()
        predicted_at_peak = float(ll.loc[at, "predicted"])
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
        pids = failed.groupby(["pid", "comm"])["calls"].sum().sort_values(ascending=False)
        symptom_ev: dict[str, Any] = {
            "eaddrnotavail_connect_calls": eaddr_calls,
            "processes": ", ".join(f"{c} (pid {p})" for p, c in pids.index[:3]),
        }
        conns = run.table("connects")
        if not conns.empty:
            symptom_ev["attempts"] = len(conns)
            symptom_ev["attempts_eaddrnotavail"] = int((conns["errno"] == "EADDRNOTAVAIL").sum())
            symptom_ev["attempts_ok"] = int((conns["result"] == "ok").sum())
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
                    Link("probe", "active_closes", probe_ev),
                    Link("cause", "short_connections_client_closes", cause_ev),
                    Link("fix", "ranked", fix_ev),
                    Link("verification", "rerun", {"command": command, "expect_eaddrnotavail": 0}),
                ],
            )
        )
    return out
