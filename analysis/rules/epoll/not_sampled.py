"""Busy loops of processes the capture knows no listener of: not checked, with the capture that
would judge them; never a finding."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...derived.epoll import (
    longest_runs,
    wait_share,
)
from ...findings import Finding, Link
from ..base import RunView
from .limits import KIND, MAX_EMPTY_SHARE, MAX_WAIT_SHARE, MIN_BUSY_INTERVALS, MIN_EVENTS


def not_sampled(run: RunView, pt: pd.DataFrame, served: pd.DataFrame, interval: float) -> list[Finding]:
    """Threads that never waited in epoll for MIN_BUSY_INTERVALS busy intervals in a row, of a
    process this capture knows no listener of (none in a namespace it sampled): whether they serve
    clients there or are clients themselves was not checked. Listed as not checked, with the capture
    that would judge them; never a finding."""
    keep = ~pt.index.isin(served.index)
    if not keep.any():
        return []
    busy = (
        (pt["events_sum"] >= MIN_EVENTS)
        & (wait_share(pt, interval) < MAX_WAIT_SHARE)
        & (pt["ret_zero"] <= MAX_EMPTY_SHARE * pt["calls"])
    )
    # In time order per thread, over arrays of the keys and the flag (a day's per-thread table is a
    # million rows: a copy of its columns held 100 MB more).
    pids, tids = pt["pid"].to_numpy(dtype="int64")[keep], pt["tid"].to_numpy(dtype="int64")[keep]
    order = np.lexsort((pt["time_s"].to_numpy(dtype=float)[keep], tids, pids))
    runs = longest_runs(pids[order], tids[order], busy.to_numpy(dtype=bool, na_value=False)[keep][order])
    rest = pt[["pid", "tid"]][keep]
    out = []
    for (pid, tid), n in runs[runs >= MIN_BUSY_INTERVALS].items():
        mine = rest.index[((rest["pid"] == pid) & (rest["tid"] == tid)).to_numpy(dtype=bool)]
        rows = pt.loc[mine].sort_values("time_s", kind="stable")
        subject = {"pid": int(pid), "tid": int(tid), "comm": str(rows["comm"].iloc[0]),
                   "process": str(rows["process_comm"].iloc[0]), "listen_ports": []}  # fmt: skip
        ev = {
            "longest_never_waiting_run": int(n),
            "intervals_with_events": int((rows["events_sum"] >= MIN_EVENTS).sum()),
            "command": f"make capture NETNS=pid:{int(pid)} PROBES=epoll DURATION=60",
        }
        out.append(Finding(KIND, "not_checked", subject, chain=[Link("probe", "not_sampled", ev)]))
    return out
