"""The lab client's connection log (connects.csv): latencies, errors and rates.

connects.csv exists only in lab runs; every function here says so with None or
an empty result when it is empty, and the rules use it only as added evidence.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..kernel import SYN_RETRY_US
from . import RunLike


def table(run: RunLike) -> pd.DataFrame | None:
    """connects.csv, or None when the run has none (not a lab run)."""
    c = run.table("connects")
    return None if c.empty else c


def quantiles_ms(values: pd.Series) -> dict[str, float]:
    """p50, p90, p99 and max of microsecond values, in ms (2 decimals); empty for no values."""
    if values.empty:
        return {}
    q = values.quantile([0.5, 0.9, 0.99]).astype(float) / 1000.0
    return {
        "p50_ms": round(float(q[0.5]), 2),
        "p90_ms": round(float(q[0.9]), 2),
        "p99_ms": round(float(q[0.99]), 2),
        "max_ms": round(float(values.max()) / 1000.0, 2),
    }


def waited_syn_retry(conns: pd.DataFrame) -> pd.Series:
    """Per connection: whether connect() took long enough to have waited for a SYN retry."""
    return conns["connect_us"] >= SYN_RETRY_US


def errors_by_result(conns: pd.DataFrame) -> dict[str, int]:
    """Failed attempts counted by result (connect_timeout, io_timeout, ...)."""
    ok = conns["result"] == "ok"
    return {str(k): int(v) for k, v in conns.loc[~ok, "result"].value_counts().items()}


def summary(run: RunLike) -> dict[str, Any]:
    """Attempts, answers, errors and latency quantiles of the lab client; {} without a client log."""
    conns = table(run)
    if conns is None:
        return {}
    ok = conns["result"] == "ok"
    return {
        "attempts": len(conns),
        "ok": int(ok.sum()),
        "errors": errors_by_result(conns),
        "connect_latency": quantiles_ms(conns["connect_us"].astype("int64")),
        "connects_waited_syn_retry": int(waited_syn_retry(conns).sum()),
        "first_byte_latency": quantiles_ms(conns["first_byte_us"].dropna().astype("int64")),
        "connect_p99_ms": round(float(conns["connect_us"].quantile(0.99)) / 1000.0, 1),
        "attempts_eaddrnotavail": int((conns["errno"] == "EADDRNOTAVAIL").sum()),
    }


def connected_us(run: RunLike) -> pd.Series | None:
    """connect() latency (µs) of the attempts whose connect() completed; None without a client log."""
    c = table(run)
    if c is None:
        return None
    return c[~c["result"].astype(str).str.startswith("connect_")]["connect_us"].astype(float)


def quantile_ms(s: pd.Series | None, q: float) -> float | None:
    """One quantile of µs values in ms; None when there are none."""
    return None if s is None or s.empty else float(s.quantile(q)) / 1000.0


def first_byte_ms(run: RunLike, q: float) -> float | None:
    """A quantile of the time to the first reply byte (ms) over answered connections."""
    c = table(run)
    if c is None:
        return None
    fb = c[c["result"] == "ok"]["first_byte_us"].dropna().astype(float)
    return None if fb.empty else float(fb.quantile(q)) / 1000.0


def failed(run: RunLike) -> float | None:
    """Attempts that did not end "ok"."""
    c = table(run)
    return None if c is None else float((c["result"] != "ok").sum())


def eaddrnotavail(run: RunLike) -> float | None:
    """Attempts that failed with EADDRNOTAVAIL (no free local port)."""
    c = table(run)
    return None if c is None else float((c["errno"] == "EADDRNOTAVAIL").sum())


def ok_per_s(run: RunLike) -> float | None:
    """Answered connections per second over the span of the attempts' starts."""
    c = table(run)
    if c is None or len(c) < 2:
        return None
    span = (c["start_unix_ns"].max() - c["start_unix_ns"].min()) / 1e9
    return float((c["result"] == "ok").sum()) / span if span > 0 else None


def queue_waits_ms(conns: pd.DataFrame) -> pd.Series:
    """Per answered connection: first reply byte minus connect (ms), without the ones that waited a retry."""
    ok = conns[conns["result"] == "ok"]
    waits = (ok["first_byte_us"].astype(float) - ok["connect_us"].astype(float)).dropna() / 1000.0
    # A wait of a retry's length or more is a retransmitted final ACK or request, not queueing.
    return waits[waits < SYN_RETRY_US / 1000]
