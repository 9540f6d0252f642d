"""Event-loop numbers from the epoll probe (ep_loop): per thread or per process, per interval.

A loop is a thread: a thread's share of an interval spent blocked in epoll is
its own wait_ns_sum over the interval. Summed over a process's threads the
"share" can pass 100 % (one loop's idle time hides another's saturation), so
rules judge threads (per_thread); per_process stays for tables that describe a
whole server (the lab's sweep). Runs of contract 2 have tid = pid: there a
"thread" is the whole process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..contract.verdict_thresholds import LOOP_WINDOW_MIN_S
from . import RunLike


def per_process(run: RunLike) -> pd.DataFrame:
    """ep_loop summed over thread names: one row per (time_s, pid), comm the process's most frequent name."""
    ep = run.table("ep_loop")
    num = [c for c in ep.columns if c not in ("time_s", "pid", "comm")]
    # min_count=1: a column not recorded (cpu_ns before contract 4) stays empty, not 0.
    g = ep.groupby(["time_s", "pid"], as_index=False)[num].sum(min_count=1)
    comms = ep.groupby("pid")["comm"].agg(lambda s: s.value_counts().index[0])
    g["comm"] = g["pid"].map(comms)
    return g


KEYS = ("time_s", "pid", "tid")


def per_thread(run: RunLike, numbers: Sequence[str] | None = None) -> pd.DataFrame:
    """ep_loop per (time_s, pid, tid): comm the thread's most frequent name, process_comm the process's name
    (its main thread's, tid = pid, when seen; else the most frequent name among its threads). NUMBERS:
    only these of its number columns (default all; a day's ep_loop holds a million rows)."""
    return per_thread_of(ep_columns(run.table("ep_loop"), numbers))


def ep_columns(ep: pd.DataFrame, numbers: Sequence[str] | None = None) -> dict[str, Any]:
    """What per_thread_of reads of ep_loop: its keys, comm and NUMBERS (default every number column)."""
    num = [c for c in ep.columns if c not in (*KEYS, "comm")] if numbers is None else list(numbers)
    return {c: ep[c].array for c in (*KEYS, "comm", *num)}


def per_thread_of(columns: dict[str, Any]) -> pd.DataFrame:
    """per_thread of ep_loop's COLUMNS (ep_columns), which it empties: each array is let go once its
    rows are sorted, so a caller that no longer holds ep_loop itself (the event-loop rule, once the
    run let it go) holds its rows about once, not twice."""
    ep = pd.DataFrame(columns, copy=False)
    num = [c for c in columns if c not in (*KEYS, "comm")]
    order = _key_order(ep, list(KEYS))
    # A row a thread and interval, as the probe prints them: the sums are the rows, in key order.
    g = ep.groupby(list(KEYS), as_index=False)[num].sum(min_count=1) if order is None else None
    if len(ep) == 0:
        g = ep[[*KEYS, *num]] if g is None else g
        g["comm"] = pd.Series(dtype=str)
        g["process_comm"] = pd.Series(dtype=str)
        return g
    names = _most_frequent(ep, ["pid", "tid"])
    main = _most_frequent(ep[(ep["pid"] == ep["tid"]).to_numpy(dtype=bool)], ["pid"])
    anyname = _most_frequent(ep, ["pid"])
    del ep
    columns.pop("comm")
    if g is None:
        g = pd.DataFrame({c: columns.pop(c).take(order) for c in (*KEYS, *num)}, copy=False)
    columns.clear()
    # The names as pandas' str (pyarrow's text), as a column of Python objects would be read: a
    # million str objects held 80 MB.
    g["comm"] = names.reindex(pd.MultiIndex.from_arrays([g["pid"], g["tid"]])).astype("str").array
    # The main thread's name, else the most frequent of any of its threads.
    process = pd.Series(main.reindex(g["pid"]).astype("str").array)
    g["process_comm"] = process.where(process.notna(), pd.Series(anyname.reindex(g["pid"]).astype("str").array)).array
    return g


def _key_order(ep: pd.DataFrame, keys: list[str]) -> np.ndarray | None:
    """The rows' positions sorted by KEYS (integer columns without empty cells; stable), or None
    when two rows share a key. Sorted arrays, not DataFrame.duplicated's hash tables (a day's
    ep_loop: 50 MB)."""
    columns = [ep[k].to_numpy(dtype="int64") for k in reversed(keys)]
    order = np.lexsort(columns)
    same = np.ones(max(len(order) - 1, 0), dtype=bool)
    for c in columns:
        same &= c[order[1:]] == c[order[:-1]]
    return None if same.any() else order


def _most_frequent(ep: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Per key, the comm its rows hold most often (the first seen of equals), for all keys at once:
    a host where short-lived processes come and go has thousands of threads."""
    counts = ep.groupby([*keys, "comm"], sort=False).size().reset_index(name="n")
    best = counts.sort_values("n", ascending=False, kind="stable").drop_duplicates(keys)
    return best.set_index(keys)["comm"] if len(keys) > 1 else best.set_index(keys[0])["comm"]


def wait_share(rows: pd.DataFrame, interval_s: float) -> pd.Series:
    """Per row: the share of the interval spent blocked in epoll (0..1 for one thread; summed over a
    process's threads it can pass 1, and the 1-in-8 sample of contract 3 can overshoot a little)."""
    return rows["wait_ns_sum"].astype(float) / (interval_s * 1e9)


def longest_runs(pid: pd.Series | np.ndarray, tid: pd.Series | np.ndarray, flag: pd.Series | np.ndarray) -> pd.Series:
    """Per thread (pid, tid), the most rows in a row with FLAG set; the rows are in time order
    within each thread and a thread's rows together. Over the rows' arrays: a groupby on thread
    and run held 165 MB for a day's million rows."""
    p, t = np.asarray(pid, dtype="int64"), np.asarray(tid, dtype="int64")
    f = np.asarray(pd.Series(flag).fillna(False), dtype=bool)
    if not len(f):
        return pd.Series([], index=pd.MultiIndex.from_arrays([[], []], names=["pid", "tid"]), dtype="int64")
    first = np.r_[True, (p[1:] != p[:-1]) | (t[1:] != t[:-1])]
    thread = np.cumsum(first) - 1
    run = np.cumsum(first | ~f) - 1  # a run starts at a thread's first row and at each row without the flag
    length = np.bincount(run, weights=f).astype("int64")
    longest = np.zeros(thread[-1] + 1, dtype="int64")
    np.maximum.at(longest, thread[np.flatnonzero(np.r_[True, run[1:] != run[:-1]])], length)
    return pd.Series(longest, index=pd.MultiIndex.from_arrays([p[first], t[first]], names=["pid", "tid"]))


def epoll_sweep(run: RunLike) -> pd.DataFrame:
    """Lab epoll/sweep: per phase (idle connections held), the server's epoll numbers."""
    lab = run.lab or {}
    server = lab.get("server") or {}
    pp = per_process(run)
    pp = pp[pp["comm"] == server.get("comm", "httpserver")]
    rows = []
    for ph in lab.get("phases") or []:
        sel = pp[(pp["time_s"] > ph["start_s"] + 0.5) & (pp["time_s"] <= ph["end_s"] + 0.5)]
        secs = max(1, len(sel))
        calls, nb = int(sel["calls"].sum()), int(sel["nb_calls"].sum())
        blocking = calls - nb
        rows.append(
            {
                "idle_conns": ph["idle_conns"],
                "wrk_requests_per_s": ph["wrk_requests_per_s"],
                "epoll_calls_per_s": round(calls / secs, 1),
                "events_per_call": round(int(sel["events_sum"].sum()) / calls, 2) if calls else None,
                "ns_per_nonblocking_poll": round(int(sel["nb_ns_sum"].sum()) / nb) if nb else None,
                "us_per_blocking_call": round(int(sel["wait_ns_sum"].sum()) / blocking / 1000, 1) if blocking else None,
                "intervals": len(sel),
            }
        )
    return pd.DataFrame(rows)


def process_wait_share(pt: pd.DataFrame, interval_s: float) -> pd.Series:
    """Per (pid, time_s), from per_thread rows: the share of the interval the process's threads
    together waited in epoll (any of them; it can pass 1)."""
    return pt.groupby(["pid", "time_s"])["wait_ns_sum"].sum().astype(float) / (interval_s * 1e9)


def cpu_recorded(rows: pd.DataFrame) -> bool:
    """Whether a thread's rows carry its CPU time (contract 4 records it; before, cpu_ns is empty)."""
    return bool(rows["cpu_ns"].astype("Float64").notna().any())


def cpu_share_overall(rows: pd.DataFrame) -> float | None:
    """One thread's CPU share over its whole span (rows by time); None when it cannot be told."""
    share = cpu_share_per_thread(rows.assign(pid=0, tid=0)).iloc[0] if len(rows) else None
    return None if share is None or pd.isna(share) else float(share)


def cpu_share_per_thread(pt: pd.DataFrame) -> pd.Series:
    """Per thread (pid, tid) of per_thread rows sorted by time: its CPU share over its whole span, NaN
    when it cannot be told.

    Over the whole span, not per interval: the CPU clock is read at its sampled
    calls only, and a loop busy with long requests makes few (loop0: ~1 a second, so
    one row's difference covered 0.1 s or 1.7 s). The first row's covers the thread's
    life before the capture: left out."""
    keys = [pt["pid"], pt["tid"]]
    later = pt["cpu_ns"].astype("Float64").where(pt.groupby(keys).cumcount().to_numpy() > 0)
    g = pd.DataFrame({"later": later, "known": later.notna(), "t": pt["time_s"]}).groupby(keys)
    span = (g["t"].max() - g["t"].min()).astype(float)
    return (g["later"].sum().astype(float) / (span * 1e9)).where(g["known"].any() & (span > 0))


# A share from two readings of the scheduler's clock this far apart at least (issue: within 2 points
# of /proc over >= 5 s); closer readings say little about a loop.
MIN_SCHEDSTAT_SPAN_S = 5.0


def cpu_share_schedstat(threads: pd.DataFrame, column: str = "cpu_ns") -> dict[tuple[int, int], float]:
    """Each thread's CPU share from the scheduler's own clock (threads.csv: schedstat of the
    listeners' processes): its time on a CPU between its first and last sample over the time
    between them (column="runq_ns": its time runnable, waiting for a CPU). Threads sampled less
    than MIN_SCHEDSTAT_SPAN_S apart are left out. A process sampled in two namespaces (listeners
    in both) is read once per sample."""
    if threads.empty:
        return {}
    one = threads.drop_duplicates(["time_s", "pid", "tid"]).sort_values("time_s")
    out: dict[tuple[int, int], float] = {}
    for (pid, tid), rows in one.groupby(["pid", "tid"], sort=False):
        span = float(rows["time_s"].iloc[-1] - rows["time_s"].iloc[0])
        if span >= MIN_SCHEDSTAT_SPAN_S:
            out[(int(pid), int(tid))] = float(rows[column].iloc[-1] - rows[column].iloc[0]) / (span * 1e9)
    return out


def process_cpu_per_sample(threads: pd.DataFrame) -> pd.DataFrame:
    """Per (pid, time_s) of threads.csv: the CPU share of the process's threads together since their
    previous sample (the scheduler's clock; a thread counts from its second sample)."""
    one = threads.drop_duplicates(["time_s", "pid", "tid"]).sort_values("time_s")
    by = one.groupby(["pid", "tid"], sort=False)
    dt = by["time_s"].diff().to_numpy(dtype=float)
    share = by["cpu_ns"].diff().to_numpy(dtype=float) / (dt * 1e9)
    rows = one.assign(share=share)[dt > 0]
    out = rows.groupby(["pid", "time_s"], as_index=False)["share"].sum()
    return out.astype({"pid": "int64", "time_s": "float64", "share": "float64"})


def loop_numbers(rows: pd.DataFrame, interval_s: float) -> dict[str, float | int | None]:
    """A thread's epoll calls over its rows (loop_numbers_of their sums)."""
    sums = {c: int(rows[c].sum()) for c in ("calls", "nb_calls", "events_sum", "ret_full", "ret_zero")}
    return loop_numbers_of(sums, len(rows), interval_s)


def loop_numbers_of(sums: dict[str, int], intervals: int, interval_s: float) -> dict[str, float | int | None]:
    """A thread's epoll calls from their sums over its intervals: calls a second, and per call the
    share non-blocking, events, and the share that came back empty (percentages rounded as reported)."""
    calls = sums["calls"]
    return {
        "calls_per_s": round(calls / (intervals * interval_s), 1),
        "nonblocking_share_pct": round(100 * sums["nb_calls"] / calls, 1) if calls else None,
        "events_per_call": round(sums["events_sum"] / calls, 2) if calls else None,
        "full_batches": sums["ret_full"],
        "empty_share_pct": round(100 * sums["ret_zero"] / calls, 1) if calls else None,
    }


# A loop's CPU is judged over its busy window: from the end of its first interval with events to
# the start of its last (a load that starts or ends mid-interval leaves those two partly idle), and
# only a window at least this long.
MIN_WINDOW_S = LOOP_WINDOW_MIN_S.value


def busy_windows(pt: pd.DataFrame, interval_s: float, min_events: int) -> pd.DataFrame:
    """Per thread (pid, tid) of per_thread rows: its busy window (start_s, end_s: see MIN_WINDOW_S;
    none shorter) and the share of it the thread spent blocked in epoll (its waits that ended
    there, over the window's length)."""
    active = pt[pt["events_sum"] >= min_events]
    g = active.groupby(["pid", "tid"])["time_s"]
    win = pd.DataFrame({"start_s": g.min().astype(float), "end_s": g.max().astype(float) - interval_s})
    win = win[win["end_s"] - win["start_s"] >= MIN_WINDOW_S]
    if win.empty:
        return win.assign(blocked=pd.Series(dtype=float))
    rows = pt.join(win, on=["pid", "tid"], how="inner")
    inside = rows[(rows["time_s"] > rows["start_s"]) & (rows["time_s"] <= rows["end_s"])]
    waited = inside.groupby(["pid", "tid"])["wait_ns_sum"].sum().astype(float).reindex(win.index).fillna(0.0)
    # A wait that began before the window is charged to the interval it ended in: at most all of it.
    return win.assign(blocked=(waited / ((win["end_s"] - win["start_s"]) * 1e9)).clip(upper=1.0))


def _bracket(times: np.ndarray, start: float, end: float, slack_s: float) -> tuple[int, int] | None:
    """The two samples (indexes into sorted times) that measure a window: the last at or before its
    start (+ slack) and the first at or after its end (- slack), so a sampler that fell behind (a
    busy or emulated host) still measures it; None when they span under MIN_WINDOW_S, or when more
    of their span lies outside the window than inside."""
    i0 = int(np.searchsorted(times, start + slack_s, side="right")) - 1
    i1 = int(np.searchsorted(times, end - slack_s, side="left"))
    if i0 < 0 or i1 >= len(times) or i1 <= i0:
        return None
    t0, t1 = float(times[i0]), float(times[i1])
    outside = max(start - t0, 0.0) + max(t1 - end, 0.0)
    if t1 - t0 < MIN_WINDOW_S or outside > (t1 - t0) - outside:
        return None
    return i0, i1


def window_shares(threads: pd.DataFrame, windows: pd.DataFrame, slack_s: float = 0.5) -> pd.DataFrame:
    """Per thread of `windows` (busy_windows) that threads.csv samples: its share of the window on a
    CPU and waiting for one, from the scheduler's clocks at the two samples that measure the window
    (_bracket), and the span they measured (cpu_from_s, cpu_to_s)."""
    cols = ["cpu_window", "runq_window", "cpu_from_s", "cpu_to_s"]
    out = pd.DataFrame(np.nan, columns=cols, index=windows.index, dtype=float)
    if threads.empty or windows.empty:
        return out
    one = threads.drop_duplicates(["time_s", "pid", "tid"]).sort_values("time_s")
    for (pid, tid), rows in one.groupby(["pid", "tid"], sort=False):
        key = (int(pid), int(tid))
        if key not in windows.index:
            continue
        w = windows.loc[key]
        times = rows["time_s"].to_numpy(dtype=float)
        b = _bracket(times, float(w["start_s"]), float(w["end_s"]), slack_s)
        if b is None:
            continue
        span = (times[b[1]] - times[b[0]]) * 1e9
        cpu, runq = rows["cpu_ns"].to_numpy(dtype=float), rows["runq_ns"].to_numpy(dtype=float)
        out.loc[key] = [(cpu[b[1]] - cpu[b[0]]) / span, (runq[b[1]] - runq[b[0]]) / span, times[b[0]], times[b[1]]]
    return out


def process_window_share(
    threads: pd.DataFrame, pid: int, start_s: float, end_s: float, slack_s: float = 0.5, column: str = "cpu_ns"
) -> float | None:
    """A process's threads together on a CPU over a window (share of one CPU; threads.csv's scheduler
    clocks at the two samples that measure it, _bracket; column="runq_ns": runnable, waiting for one;
    a thread counts from the first of them it was sampled at); None when not sampled so."""
    rows = threads[threads["pid"] == pid].drop_duplicates(["time_s", "tid"]).sort_values("time_s")
    times = np.unique(rows["time_s"].to_numpy(dtype=float))
    b = _bracket(times, start_s, end_s, slack_s) if len(times) else None
    if b is None:
        return None
    t0, t1 = times[b[0]], times[b[1]]
    ends = rows[rows["time_s"].isin([t0, t1])].pivot_table(index="tid", columns="time_s", values=column)
    both = ends.dropna()
    return float((both[t1] - both[t0]).sum()) / ((t1 - t0) * 1e9)


def process_busy_window(
    pt: pd.DataFrame, threads: pd.DataFrame, pid: int, interval_s: float, min_events: int
) -> dict | None:
    """A process's busy window (its threads' events summed per interval; the window as
    busy_windows'), the share of it its threads together spent blocked in epoll, and, from the
    scheduler's clocks, on a CPU and waiting for one; None when it has no such window or no clocks."""
    rows = pt[pt["pid"] == pid]
    per = rows.groupby("time_s")[["events_sum", "wait_ns_sum"]].sum().sort_index()
    active = per.index[per["events_sum"] >= min_events].astype(float)
    if active.empty:
        return None
    start, end = float(active.min()), float(active.max()) - interval_s
    if end - start < MIN_WINDOW_S:
        return None
    inside = per[(per.index.astype(float) > start) & (per.index.astype(float) <= end)]
    cpu = process_window_share(threads, pid, start, end)
    runq = process_window_share(threads, pid, start, end, column="runq_ns")
    if cpu is None or runq is None:
        return None
    blocked = min(float(inside["wait_ns_sum"].sum()) / ((end - start) * 1e9), 1.0)
    return {"start_s": start, "end_s": end, "blocked": blocked, "cpu": cpu, "runq": runq}
