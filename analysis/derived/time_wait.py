"""TIME_WAIT per client endpoint: sockets (ss), active closes (time_wait probe), Little's law.

An endpoint is (netns, remote address, service port) seen from the client side
(service_local == 0): the TIME_WAIT sockets that hold ports toward one server.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..kernel import EADDRNOTAVAIL, TCP_TIMEWAIT_LEN_S
from . import RunLike

# Histogram columns of tw_close: connection lifetimes, shortest first.
LIFE_COLS = ["life_lt_1ms", "life_lt_10ms", "life_lt_100ms", "life_lt_1s", "life_lt_10s", "life_ge_10s"]


def port_range(run: RunLike, netns: int) -> tuple[int, int] | None:
    """net.ipv4.ip_local_port_range at the start of the capture, or None when not sampled."""
    v = run.sysctl(netns, "net.ipv4.ip_local_port_range")
    if not v:
        return None
    lo, hi = (int(x) for x in v.split())
    return lo, hi


def ports_in_range(run: RunLike, netns: int) -> int | None:
    """How many ephemeral ports the namespace can use toward one endpoint."""
    rng = port_range(run, netns)
    return rng[1] - rng[0] + 1 if rng else None


def endpoints(run: RunLike, failed: bool = False) -> list[tuple[int, str, int]]:
    """Client endpoints (netns, raddr, service_port) seen by ss or by the probe; with failed, also the
    destinations of connects that failed with EADDRNOTAVAIL (contract 3 records them)."""
    keys: set[tuple[int, str, int]] = set()
    for name in ("tw_sockets", "tw_close"):
        t = run.table(name)
        t = t[t["service_local"] == 0]
        keys |= {(int(a), str(b), int(c)) for a, b, c in t[["netns", "raddr", "service_port"]].itertuples(index=False)}
    if failed:
        conn = run.table("tw_connect")
        conn = conn[(conn["errno"] == EADDRNOTAVAIL) & (conn["family"] != 0)]
        keys |= {(int(a), str(b), int(c)) for a, b, c in conn[["netns", "raddr", "rport"]].itertuples(index=False)}
    return sorted(keys)


def client_closes(run: RunLike, netns: int, raddr: str, port: int) -> pd.DataFrame:
    """tw_close rows of this side acting as the client of raddr:port."""
    c = run.table("tw_close")
    return c[(c["netns"] == netns) & (c["raddr"] == raddr) & (c["service_port"] == port) & (c["service_local"] == 0)]


def tw_series(run: RunLike, netns: int, raddr: str, port: int) -> pd.Series:
    """TIME_WAIT sockets toward (raddr, port) per sample, client side; 0 where ss listed none."""
    tw = run.table("tw_sockets")
    ss = run.table("sockstat")
    samples = sorted(ss.loc[ss["netns"] == netns, "time_s"].unique())
    sel = tw[
        (tw["netns"] == netns) & (tw["raddr"] == raddr) & (tw["service_port"] == port) & (tw["service_local"] == 0)
    ]
    s = sel.groupby("time_s")["count"].sum().reindex(samples, fill_value=0).astype("int64")
    s.index.name = "time_s"
    return s


def littles_law(run: RunLike, netns: int, raddr: str, port: int) -> pd.DataFrame:
    """Per sample: measured TIME_WAIT vs active closes in the preceding TCP_TIMEWAIT_LEN (Little's law)."""
    measured = tw_series(run, netns, raddr, port)
    closes = client_closes(run, netns, raddr, port)
    by_t = closes.groupby("time_s")["active_closes"].sum()
    times = by_t.index.to_numpy(dtype=float)
    vals = by_t.to_numpy(dtype=float)
    predicted = [
        float(vals[(times > t - TCP_TIMEWAIT_LEN_S) & (times <= t)].sum()) if len(vals) else 0.0 for t in measured.index
    ]
    return pd.DataFrame({"measured": measured.to_numpy(), "predicted": predicted}, index=measured.index)


def observed_time_wait_length(run: RunLike, netns: int, raddr: str, port: int) -> float | None:
    """How long TIME_WAIT lasts here, from the timers ss shows; None when it cannot be seen.

    Until the first TIME_WAIT socket expires, the oldest one dates from the
    first active close, so age + its time left = the length. Median over those
    samples. Needs the probe's active closes and ss timers in the first
    TCP_TIMEWAIT_LEN of closing."""
    closes = client_closes(run, netns, raddr, port)
    closes = closes[closes["active_closes"] > 0]
    tw = run.table("tw_sockets")
    tw = tw[(tw["netns"] == netns) & (tw["raddr"] == raddr) & (tw["service_port"] == port) & tw["timer_min_s"].notna()]
    if closes.empty or tw.empty:
        return None
    # TIME_WAIT already there at the first sample (a host, not a fresh namespace) predates every
    # close the probe saw: the oldest socket's age is unknown.
    series = tw_series(run, netns, raddr, port)
    if len(series) and int(series.iloc[0]) > 0:
        return None
    # The probe's row for the first close is stamped at its interval's end: the
    # close happened within the interval before; take its middle.
    first_close = float(closes["time_s"].min()) - 0.5 * float(run.metadata.get("interval_s", 1))
    oldest = tw.groupby("time_s")["timer_min_s"].min()
    age = oldest.index.to_series().astype(float) - first_close
    # Before the first expiry (a few seconds of margin under TCP_TIMEWAIT_LEN).
    early = (age > 0) & (age < TCP_TIMEWAIT_LEN_S - 10)
    if not early.any():
        return None
    return round(float((age[early] + oldest[early].astype(float)).median()), 1)


def eaddrnotavail_failures(
    run: RunLike, netns: int, raddr: str | None = None, port: int | None = None, unrecorded: bool = True
) -> pd.DataFrame:
    """tw_connect rows of connects that failed with EADDRNOTAVAIL in a namespace, toward one
    destination when raddr and port are given. Runs of contract 2 did not record the destination
    (family 0): with unrecorded (the default) those count for every destination of the namespace;
    without it only failures recorded toward this destination do."""
    conn = run.table("tw_connect")
    rows = conn[(conn["netns"] == netns) & (conn["errno"] == EADDRNOTAVAIL)]
    if raddr is not None and port is not None:
        mine = (rows["raddr"] == raddr) & (rows["rport"] == port) & (rows["family"] != 0)
        rows = rows[mine | (rows["family"] == 0)] if unrecorded else rows[mine]
    return rows


def eaddrnotavail_unrecorded(run: RunLike, netns: int) -> int:
    """EADDRNOTAVAIL failures of a namespace whose destination was not recorded (family 0: contract 2)."""
    conn = run.table("tw_connect")
    sel = (conn["netns"] == netns) & (conn["errno"] == EADDRNOTAVAIL) & (conn["family"] == 0)
    return int(conn.loc[sel, "failures"].sum())


def close_summary(closes: pd.DataFrame) -> dict[str, Any]:
    """Active and passive closes of client_closes rows, the active-close rate over the seconds they
    span, and the connections' lifetimes (share under 1 s, mean), rounded as reported."""
    active, passive = int(closes["active_closes"].sum()), int(closes["passive_closes"].sum())
    lives = closes[LIFE_COLS].sum()
    n_life = int(lives.sum())
    active_rows = closes[closes["active_closes"] > 0]
    span = max(1.0, float(active_rows["time_s"].max() - active_rows["time_s"].min() + 1)) if len(active_rows) else 1
    return {
        "active_closes": active,
        "passive_closes": passive,
        "active_close_rate_per_s": round(active / span, 1),
        "lifetime_under_1s_pct": round(100 * float(lives[LIFE_COLS[:4]].sum()) / n_life, 1) if n_life else None,
        "mean_lifetime_ms": round(float(closes["life_sum_us"].sum()) / n_life / 1000, 1) if n_life else None,
    }


def littles_law_peak(ll: pd.DataFrame, end: float) -> tuple[float, float]:
    """When TIME_WAIT peaked in a littles_law table (end: the capture's end when it is empty), and the
    active closes of the TCP_TIMEWAIT_LEN before then (Little's law's prediction there)."""
    if ll.empty:
        return end, 0.0
    at = ll["measured"].idxmax()
    return at, float(ll.loc[at, "predicted"])
