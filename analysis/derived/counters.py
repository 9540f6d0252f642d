"""Kernel counter deltas (counters.csv, nstat samples per namespace).

One way to sum them: every total, window and per-sample table of counter
deltas in the analysis comes from here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import RunLike


def sampled(run: RunLike, netns: int) -> bool:
    """Whether the counters of this namespace were sampled at all."""
    return bool((run.table("counters")["netns"] == netns).any())


def total_delta(run: RunLike, netns: int, counter: str, t0: float | None = None, t1: float | None = None) -> int:
    """Sum of one counter's deltas in one namespace, over samples stamped in [t0, t1] (either end open)."""
    c = run.table("counters")
    sel = (c["netns"] == netns) & (c["counter"] == counter) & c["delta"].notna()
    if t0 is not None:
        sel &= c["time_s"] >= t0
    if t1 is not None:
        sel &= c["time_s"] <= t1
    return int(c.loc[sel, "delta"].sum())


def capture_total(run: RunLike, counter: str, netns: int | None = None) -> float:
    """Sum of one counter's deltas over the capture, in one namespace or (netns None) all sampled ones."""
    c = run.table("counters")
    c = c[c["counter"] == counter]
    if netns is not None:
        c = c[c["netns"] == netns]
    return float(c["delta"].fillna(0).sum())


def per_sample(run: RunLike, netns: int, names: list[str]) -> pd.DataFrame:
    """Per-sample deltas of counters (columns) in one namespace, indexed by time_s; 0 where unchanged."""
    c = run.table("counters")
    times = sorted(c.loc[c["netns"] == netns, "time_s"].unique())
    c = c[(c["netns"] == netns) & c["counter"].isin(names)]
    wide = c.pivot_table(index="time_s", columns="counter", values="delta", aggfunc="sum")
    wide = wide.reindex(index=times, columns=names).fillna(0).astype("int64")
    wide.index.name = "time_s"
    return wide


def window_deltas(run: RunLike, netns: int, t0: float, t1: float) -> tuple[dict[str, float], float] | None:
    """Counter deltas wholly inside [t0, t1] and the seconds they cover; None with fewer than 2 samples inside.

    The first sample inside closes an interval that began before t0, so the sum
    starts from the second one."""
    c = run.table("counters")
    c = c[c["netns"] == netns]
    times = np.sort(c["time_s"].unique())
    inside = times[(times > t0) & (times <= t1 + 0.5)]
    if len(inside) < 2:
        return None
    used = c[c["time_s"].isin(inside[1:])]
    deltas = used.groupby("counter")["delta"].sum().to_dict()
    return {k: float(v) for k, v in deltas.items()}, float(inside[-1] - inside[0])


def recorded(run: RunLike, netns: int, counter: str) -> bool:
    """Whether one counter was captured in a namespace (the first sample lists every counter the
    kernel has; a counter missing there was not captured, which is not the same as 0)."""
    c = run.table("counters")
    return bool(((c["netns"] == netns) & (c["counter"] == counter)).any())
