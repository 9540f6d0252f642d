"""TIME_WAIT per client endpoint: sockets (ss), active closes (time_wait probe), Little's law.

An endpoint is (netns, remote address, service port) seen from the client side
(service_local == 0): the TIME_WAIT sockets that hold ports toward one server.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
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
        keys |= _once(run.table(name), "client endpoints", _client_endpoints)
    if failed:
        conn = run.table("tw_connect")
        conn = conn[(conn["errno"] == EADDRNOTAVAIL) & (conn["family"] != 0)]
        keys |= {(int(a), str(b), int(c)) for a, b, c in conn[["netns", "raddr", "rport"]].itertuples(index=False)}
    return sorted(keys)


def _client_endpoints(t: pd.DataFrame) -> set[tuple[int, str, int]]:
    t = t.loc[(t["service_local"] == 0).to_numpy(dtype=bool), ["netns", "raddr", "service_port"]].drop_duplicates()
    return {(int(a), str(b), int(c)) for a, b, c in t.itertuples(index=False)}


# Per table, its rows grouped by key once: these functions are called once per endpoint, and
# filtering the whole table each time took 98 s of an hour's report with 1 568 endpoints.
# A table is read once per run, so the table object itself says whether a grouping is current.
# An entry lives as long as its table: a report lets a day's tables go once used (Run.release).
_GROUPS: dict[tuple[int, Any], tuple[weakref.ref[pd.DataFrame], Any]] = {}


def _once(t: pd.DataFrame, what: Any, make: Callable[[pd.DataFrame], Any]) -> Any:
    """make(t), computed once per table object and `what`, kept while the table lives."""
    key = (id(t), what)
    cached = _GROUPS.get(key)
    if cached is None or cached[0]() is not t:
        cached = (weakref.ref(t), make(t))
        _GROUPS[key] = cached
        weakref.finalize(t, _GROUPS.pop, key, None)
    return cached[1]


def _positions(t: pd.DataFrame, keys: tuple[str, ...]) -> dict[Any, Any]:
    """Row positions per key tuple (a 1-tuple for one key, as the callers ask)."""
    if t.empty:
        return {}
    where = t.groupby(list(keys), sort=False).indices
    return where if len(keys) > 1 else {(k,): v for k, v in where.items()}


def _rows(t: pd.DataFrame, keys: tuple[str, ...], value: tuple[Any, ...]) -> pd.DataFrame:
    """The rows of t whose `keys` columns equal `value` (an empty frame when none do)."""
    # Positions per key (one pass in C); a group's frame is made only when it is asked for.
    where = _once(t, keys, lambda t: _positions(t, keys))
    rows = where.get(value)
    return t.iloc[rows] if rows is not None else t.iloc[0:0]


ENDPOINT_KEY = ("netns", "raddr", "service_port", "service_local")


def client_closes(run: RunLike, netns: int, raddr: str, port: int) -> pd.DataFrame:
    """tw_close rows of this side acting as the client of raddr:port."""
    return _rows(run.table("tw_close"), ENDPOINT_KEY, (netns, raddr, port, 0))


def tw_series(run: RunLike, netns: int, raddr: str, port: int) -> pd.Series:
    """TIME_WAIT sockets toward (raddr, port) per sample that listed them (sockstat.csv tw_listed),
    client side; 0 where ss listed none."""
    samples = _once(run.table("sockstat"), "samples", _samples_by_netns).get(netns, [])
    sel = _rows(run.table("tw_sockets"), ENDPOINT_KEY, (netns, raddr, port, 0))
    s = sel.groupby("time_s")["count"].sum().reindex(samples, fill_value=0).astype("int64")
    s.index.name = "time_s"
    return s


def _samples_by_netns(sockstat: pd.DataFrame) -> dict[int, list[float]]:
    """Per namespace, the samples whose TIME_WAIT table tw_sockets.csv holds."""
    listed = sockstat[(sockstat["tw_listed"] == 1).to_numpy(dtype=bool)]
    return {int(n): sorted(g["time_s"].unique()) for n, g in listed.groupby("netns", sort=False)}


def tw_samples_listed(run: RunLike, netns: int) -> tuple[int, int]:
    """(samples that listed the namespace's TIME_WAIT sockets, samples): the first is smaller when the
    namespace held more than the sampler lists at every sample."""
    # Counted for every namespace at once: asked per endpoint, filtering sockstat each time took
    # 6 of the 14 s of an hour's report with 4 766 endpoints.
    return _once(run.table("sockstat"), "listed per netns", _listed_per_netns).get(netns, (0, 0))


def _listed_per_netns(sockstat: pd.DataFrame) -> dict[int, tuple[int, int]]:
    listed = (sockstat["tw_listed"] == 1).groupby(sockstat["netns"], sort=False)
    return {int(n): (int(s.sum()), len(s)) for n, s in listed}


def tw_max_per_endpoint(run: RunLike) -> dict[tuple[int, str, int], int]:
    """The most TIME_WAIT sockets toward each client endpoint at one sample (littles_law's
    measured maximum), for every endpoint at once."""
    return _once(run.table("tw_sockets"), "max per endpoint", _max_per_endpoint)


def _max_per_endpoint(tw: pd.DataFrame) -> dict[tuple[int, str, int], int]:
    # Over each endpoint's rows (the grouping littles_law uses too), not a grouping of the whole
    # table by endpoint and sample: that held 120 MB for a day's 1.3 million rows.
    where = _once(tw, ENDPOINT_KEY, lambda t: _positions(t, ENDPOINT_KEY))
    count, t = tw["count"].to_numpy(dtype="int64"), tw["time_s"].to_numpy(dtype=float)
    out: dict[tuple[int, str, int], int] = {}
    for (netns, raddr, port, local), rows in where.items():
        if local == 0:
            _, sample = np.unique(t[rows], return_inverse=True)
            per_sample = np.zeros(sample.max() + 1, dtype="int64")
            np.add.at(per_sample, sample, count[rows])
            out[(int(netns), str(raddr), int(port))] = int(per_sample.max())
    return out


def littles_law(run: RunLike, netns: int, raddr: str, port: int) -> pd.DataFrame:
    """Per sample: measured TIME_WAIT vs active closes in the preceding TCP_TIMEWAIT_LEN (Little's law)."""
    measured = tw_series(run, netns, raddr, port)
    closes = client_closes(run, netns, raddr, port)
    by_t = closes.groupby("time_s")["active_closes"].sum().sort_index()
    times = by_t.index.to_numpy(dtype=float)
    # Closes in (t - TCP_TIMEWAIT_LEN, t]: a difference of running sums (counts: exact in float).
    running = np.concatenate([[0.0], np.cumsum(by_t.to_numpy(dtype=float))])
    t = measured.index.to_numpy(dtype=float)
    predicted = (
        running[np.searchsorted(times, t, side="right")]
        - running[np.searchsorted(times, t - TCP_TIMEWAIT_LEN_S, side="right")]
    )
    return pd.DataFrame({"measured": measured.to_numpy(), "predicted": predicted}, index=measured.index)


def observed_time_wait_length(run: RunLike, netns: int, raddr: str, port: int) -> float | None:
    """How long TIME_WAIT lasts here, from the timers ss shows; None when it cannot be seen
    (observed_time_wait_lengths, for one endpoint)."""
    lengths = _once(run.table("tw_sockets"), ("observed", id(run.table("tw_close"))), lambda _: _observed(run))
    return lengths.get((int(netns), str(raddr), int(port)))


def _observed(run: RunLike) -> dict[tuple[int, str, int], float]:
    """Per endpoint with an answer: how long TIME_WAIT lasts, from the timers ss shows.

    Until the first TIME_WAIT socket expires, the oldest one dates from the
    first active close, so age + its time left = the length. Median over those
    samples. Needs the probe's active closes and ss timers in the first
    TCP_TIMEWAIT_LEN of closing."""
    closes = run.table("tw_close")
    closes = closes.loc[
        ((closes["service_local"] == 0) & (closes["active_closes"] > 0)).to_numpy(dtype=bool),
        ["netns", "raddr", "service_port", "time_s"],
    ]
    # The probe's row for the first close is stamped at its interval's end: the
    # close happened within the interval before; take its middle.
    first_close = closes.groupby(["netns", "raddr", "service_port"])["time_s"].min().astype(float) - 0.5 * float(
        run.metadata.get("interval_s", 1)
    )
    # Only the samples some endpoint's early window can hold, and only the columns used, before
    # grouping per sample (a day's tw_sockets: 1.3 million rows, nearly a group each).
    tw = run.table("tw_sockets")
    if first_close.empty:
        return {}
    t = tw["time_s"].astype(float)
    early_rows = tw["timer_min_s"].notna() & (t > first_close.min()) & (t < first_close.max() + TCP_TIMEWAIT_LEN_S - 10)
    timed = tw.loc[early_rows.to_numpy(dtype=bool), ["netns", "raddr", "service_port", "time_s", "timer_min_s"]]
    oldest = timed.groupby(["netns", "raddr", "service_port", "time_s"])["timer_min_s"].min().astype(float)
    frame = oldest.rename("left").reset_index()
    frame["first"] = first_close.reindex(pd.MultiIndex.from_frame(frame[["netns", "raddr", "service_port"]])).to_numpy()
    age = frame["time_s"].astype(float) - frame["first"]
    # Before the first expiry (a few seconds of margin under TCP_TIMEWAIT_LEN).
    early = frame[((age > 0) & (age < TCP_TIMEWAIT_LEN_S - 10)).to_numpy(dtype=bool)]
    lengths = (
        (early["time_s"].astype(float) - early["first"] + early["left"])
        .groupby([early["netns"], early["raddr"], early["service_port"]])
        .median()
    )
    out = {(int(n), str(r), int(p)): round(float(v), 1) for (n, r, p), v in lengths.items()}
    # TIME_WAIT already there at the first sample (a host, not a fresh namespace) predates every
    # close the probe saw: the oldest socket's age is unknown.
    there = _time_wait_at_first_sample(run)
    return {k: v for k, v in out.items() if k not in there}


def _time_wait_at_first_sample(run: RunLike) -> set[tuple[int, str, int]]:
    """Client endpoints with TIME_WAIT sockets at their namespace's first listed sample (tw_series > 0
    there; the sampler lists the first sample)."""
    first = {n: times[0] for n, times in _once(run.table("sockstat"), "samples", _samples_by_netns).items() if times}
    if not first:
        return set()
    tw = run.table("tw_sockets")
    rows = (tw["service_local"] == 0) & (tw["time_s"].astype(float) <= max(first.values()))
    tw = tw.loc[rows.to_numpy(dtype=bool), ["netns", "raddr", "service_port", "time_s", "count"]]
    at_first = tw[(tw["time_s"].astype(float) == tw["netns"].map(first).astype(float)).to_numpy(dtype=bool)]
    sums = at_first.groupby(["netns", "raddr", "service_port"])["count"].sum()
    return {(int(n), str(r), int(p)) for (n, r, p), v in sums.items() if v > 0}


def eaddrnotavail_failures(
    run: RunLike, netns: int, raddr: str | None = None, port: int | None = None, unrecorded: bool = True
) -> pd.DataFrame:
    """tw_connect rows of connects that failed with EADDRNOTAVAIL in a namespace, toward one
    destination when raddr and port are given. Runs of contract 2 did not record the destination
    (family 0): with unrecorded (the default) those count for every destination of the namespace;
    without it only failures recorded toward this destination do."""
    rows = _rows(run.table("tw_connect"), ("netns", "errno"), (netns, EADDRNOTAVAIL))
    if raddr is not None and port is not None:
        mine = (rows["raddr"] == raddr) & (rows["rport"] == port) & (rows["family"] != 0)
        rows = rows[mine | (rows["family"] == 0)] if unrecorded else rows[mine]
    return rows


def eaddrnotavail_unrecorded(run: RunLike, netns: int) -> int:
    """EADDRNOTAVAIL failures of a namespace whose destination was not recorded (family 0: contract 2)."""
    return _once(run.table("tw_connect"), "unrecorded", _unrecorded).get(int(netns), 0)


def _unrecorded(conn: pd.DataFrame) -> dict[int, int]:
    sel = ((conn["errno"] == EADDRNOTAVAIL) & (conn["family"] == 0)).to_numpy(dtype=bool)
    return {int(n): int(v) for n, v in conn[sel].groupby("netns")["failures"].sum().items()}


def eaddrnotavail_recorded(run: RunLike) -> dict[tuple[int, str, int], int]:
    """EADDRNOTAVAIL failures toward each destination that was recorded (contract 3 and later)."""
    conn = run.table("tw_connect")
    sel = ((conn["errno"] == EADDRNOTAVAIL) & (conn["family"] != 0)).to_numpy(dtype=bool)
    sums = conn[sel].groupby(["netns", "raddr", "rport"])["failures"].sum()
    return {(int(n), str(r), int(p)): int(v) for (n, r, p), v in sums.items()}


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
