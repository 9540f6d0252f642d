"""Every loop of a run: each thread's rows, which of its intervals never waited, its listeners and
ports (a row per thread, judged for all rows at once)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ...derived.epoll import (
    cpu_share_per_thread,
    longest_runs,
    process_wait_share,
    wait_share,
)
from .limits import MAX_EMPTY_SHARE, MAX_WAIT_SHARE, MIN_CPU_SHARE, MIN_EVENTS, MIN_PROCESS_CPU_SHARE


@dataclass
class Loops:
    """Every loop of a run, and what judging one of them needs."""

    pt: pd.DataFrame  # per_thread rows
    ls: pd.DataFrame  # listeners.csv
    interval: float
    per_thread_data: bool  # threads told apart (contract 3, or tid != pid seen)
    threads: pd.DataFrame  # thread_table: a row per (pid, tid)
    busy: pd.Series  # per pt row: an interval with events in which the thread never waited
    # listeners.csv rows by holder pid and, held by a process with no loop, by its name; the processes whose main thread
    # has a loop: looked up per thread, grouped once (a busy host has thousands of threads).
    ls_by_pid: dict[int, pd.DataFrame] = field(init=False)
    ls_free_by_comm: dict[str, pd.DataFrame] = field(init=False)  # held by a process with no loop
    no_listener: pd.DataFrame = field(init=False)  # listeners.csv's columns, no row
    ports_of: dict[int, tuple[pd.DataFrame, list[int]]] = field(default_factory=dict)  # _ports
    # Every process threads.csv sampled: the sampler samples the threads of each process ss -p
    # names as a holder of a listener, all of them (nginx's master and workers). Empty for runs
    # without it (contract < 6): then a process named like a holder may hold its listeners.
    holders: set[int] = field(default_factory=set)
    main_loop_pids: set[int] = field(init=False)
    loop_pids: set[int] = field(init=False)

    def __post_init__(self) -> None:
        ls = self.ls
        held = ls[ls["pid"].notna().to_numpy(dtype=bool)]
        self.ls_by_pid = {int(k): g for k, g in held.groupby("pid", sort=False)}
        pt = self.pt
        self.main_loop_pids = set(pt.loc[(pt["pid"] == pt["tid"]).to_numpy(dtype=bool), "pid"].astype(int))
        self.loop_pids = set(pt["pid"].astype(int))
        free = ls[(ls["comm"].notna() & ~ls["pid"].isin(self.loop_pids).fillna(False)).to_numpy(dtype=bool)]
        self.ls_free_by_comm = {str(k): g for k, g in free.groupby("comm", sort=False)}
        self.no_listener = ls.iloc[0:0]


def _held_by(loops: Loops, pid: int, process: str) -> pd.DataFrame:
    """listeners.csv rows of a process: held by its pid; if none is, those held under its name by a
    process with no loop (nginx: ss -p names the master, the workers run the loops)."""
    # pid and comm are empty for a listener ss could not name a process for: it is no one's.
    own = loops.ls_by_pid.get(pid)
    if own is not None:
        return own
    # By name: not held by another process that has a loop of its own (a row held by this pid
    # would have been its own, above), the same rows whichever process asks; and only for a
    # holder, where the sampler says who holds listeners (a short-lived python3 is not a server
    # because a python3 listens).
    if loops.holders and pid not in loops.holders:
        return loops.no_listener
    return loops.ls_free_by_comm.get(process, loops.no_listener)


def _process_cpu_of_rows(pt: pd.DataFrame, interval: float, per_sample: pd.DataFrame) -> np.ndarray:
    """Per row: its process's CPU share at the scheduler's sample nearest the row's interval end
    (within one interval), NaN where there is none (a process threads.csv does not sample)."""
    rows = pd.DataFrame({"pid": pt["pid"].astype("int64"), "time_s": pt["time_s"].astype("float64"),
                         "i": np.arange(len(pt))}).sort_values("time_s")  # fmt: skip
    got = pd.merge_asof(rows, per_sample.sort_values("time_s"), on="time_s", by="pid", direction="nearest",
                        tolerance=float(interval))  # fmt: skip
    return got.sort_values("i")["share"].to_numpy(dtype=float)


def _busy_rows(
    pt: pd.DataFrame, interval: float, cpu: pd.DataFrame, process_cpu: np.ndarray
) -> tuple[pd.Series, pd.Series, pd.Series]:
    """Per row (pt sorted by thread and time): the share of the interval blocked in epoll, whether
    it had events (an idle poller stays out), and whether it was busy: with events, the thread never
    waited and found work at every call; when its CPU time is known, also on the CPU, or no thread
    of its process waited then while the process was on the CPU (a Go server's poller thread is
    not the one that runs its requests). Not "on the CPU" for a process the scheduler's clock
    shows idle (a light Go server's poller). Per interval: over a whole run the process share is
    diluted by the time before and after a load."""
    share = wait_share(pt, interval)
    active = pt["events_sum"] >= MIN_EVENTS
    busy = active & (share < MAX_WAIT_SHARE) & (pt["ret_zero"] <= MAX_EMPTY_SHARE * pt["calls"])
    rows = pd.MultiIndex.from_arrays([pt["pid"], pt["tid"]])
    by_process = process_wait_share(pt, interval).reindex(pd.MultiIndex.from_arrays([pt["pid"], pt["time_s"]]))
    process_waits = by_process.to_numpy(dtype=float) >= MAX_WAIT_SHARE
    overall = cpu["cpu_overall"].reindex(rows).to_numpy(dtype=float)
    judged = ~np.isnan(overall) | cpu["recorded"].reindex(rows).to_numpy(dtype=bool)
    wants = np.nan_to_num(overall, nan=0.0) + np.nan_to_num(cpu["runq"].reindex(rows).to_numpy(dtype=float), nan=0.0)
    on_cpu = wants >= MIN_CPU_SHARE
    process_on_cpu = np.isnan(process_cpu) | (process_cpu >= MIN_PROCESS_CPU_SHARE)
    return share, active, busy & (~judged | on_cpu | (~process_waits & process_on_cpu))


def _cpu(pt: pd.DataFrame, sched: dict[tuple[int, int], float], runq: dict[tuple[int, int], float]) -> pd.DataFrame:
    """Per thread its CPU share: from the scheduler's clock where threads.csv has it (the probe reads
    the clock only at its sampled calls, and a loop busy with long requests makes few: 79 %
    against /proc's 96 % for a Python loop), else from the probe's readings; and whether the
    probe recorded its CPU time at all (contract 4 and later)."""
    probe = cpu_share_per_thread(pt)
    from_sched = pd.Series([sched.get((int(p), int(t))) for p, t in probe.index], index=probe.index, dtype=float)
    overall = from_sched.fillna(probe)
    source = np.where(from_sched.notna(), "schedstat", np.where(overall.notna(), "probe", None))
    recorded = pt["cpu_ns"].astype("Float64").notna().groupby([pt["pid"], pt["tid"]]).any()
    # Time runnable but waiting for a CPU counts as wanting it (a contended host turns one into the
    # other): the busy-host lab's hot loop read 66 % on the CPU and 13 % waiting for it.
    waiting = pd.Series([runq.get((int(p), int(t))) for p, t in probe.index], index=probe.index, dtype=float)
    return pd.DataFrame({"cpu_overall": overall, "cpu_from": source, "recorded": recorded, "runq": waiting})


def thread_table(
    pt: pd.DataFrame, interval: float, sched: tuple[dict[tuple[int, int], float], ...], per_sample: pd.DataFrame
) -> tuple[pd.DataFrame, pd.Series]:
    """A row per thread (pid, tid) with the numbers its finding cites, judged for all rows at once
    (a host where short-lived processes come and go has thousands of threads); and each row's busy flag."""
    pt = pt.sort_values(["pid", "tid", "time_s"], kind="stable")
    cpu = _cpu(pt, *sched)
    share, active, busy = _busy_rows(pt, interval, cpu, _process_cpu_of_rows(pt, interval, per_sample))
    blocked = share.clip(upper=1.0)
    keys = [pt["pid"], pt["tid"]]
    cols = pd.DataFrame({
        "comm": pt["comm"], "process_comm": pt["process_comm"], "n": 1, "active": active, "busy": busy,
        "calls": pt["calls"], "nb_calls": pt["nb_calls"], "events_sum": pt["events_sum"],
        "ret_full": pt["ret_full"], "ret_zero": pt["ret_zero"],
        "blocked_busy": blocked.where(busy), "blocked_active": blocked.where(active),
    })  # fmt: skip
    t = cols.groupby(keys).agg(
        comm=("comm", "first"), process_comm=("process_comm", "first"), rows=("n", "sum"),
        intervals_with_events=("active", "sum"), intervals_never_waiting=("busy", "sum"),
        calls=("calls", "sum"), nb_calls=("nb_calls", "sum"), events_sum=("events_sum", "sum"),
        ret_full=("ret_full", "sum"), ret_zero=("ret_zero", "sum"),
        wait_busy=("blocked_busy", "mean"), wait_median=("blocked_active", "median"),
    )  # fmt: skip
    t["longest_never_waiting_run"] = longest_runs(pt["pid"], pt["tid"], busy).reindex(t.index).fillna(0).astype(int)
    return t.join(cpu[["cpu_overall", "cpu_from", "runq"]]), busy


def servers(pt: pd.DataFrame, ls: pd.DataFrame, holders: set[int]) -> pd.DataFrame:
    """The rows of processes that may hold a listener (_held_by: by pid, or by the process's name
    where the sampler did not say who holds them), whole processes: only a server's loop gets a
    finding, and a host where short-lived processes come and go has thousands of other threads
    (an hour's capture: each judged alone took 22 s of the report)."""
    pids = set(ls["pid"].dropna().astype(int)) | holders
    if holders:
        return pt[pt["pid"].isin(pids).to_numpy(dtype=bool)]
    names = set(ls["comm"].dropna().astype(str))
    return pt[(pt["pid"].isin(pids) | pt["process_comm"].isin(names)).to_numpy(dtype=bool)]


def subject_of(loops: Loops, pid: int, tid: int, th: Any) -> tuple[dict[str, Any], pd.DataFrame]:
    """The thread and its process, with the ports the process listens on; and those listeners' rows."""
    comm, process = str(th.comm), str(th.process_comm)
    # The process's own name as ss -p shows it, when its main thread has no loop to name it.
    own = loops.ls_by_pid.get(pid)
    named = own["comm"].dropna() if own is not None else ()
    if len(named) and pid not in loops.main_loop_pids:
        process = str(named.iloc[-1])  # type: ignore[union-attr]
    # ss -p names one holder of a shared listening socket (nginx: master or
    # worker), so a process also owns the listeners held under its name by a
    # process that has no loop of its own (never another loop's listeners).
    held = _held_by(loops, pid, process)
    return {"pid": pid, "tid": tid, "comm": comm, "process": process, "listen_ports": _ports(loops, held)}, held


def _ports(loops: Loops, held: pd.DataFrame) -> list[int]:
    """The listening ports of listeners.csv rows (one group of them, so computed once per group)."""
    if held.empty:
        return []
    key = id(held)
    if key not in loops.ports_of:
        loops.ports_of[key] = (held, sorted({int(p) for p in held["lport"]}))
    return list(loops.ports_of[key][1])
