"""event_loop_saturation: a server's event loop that never waits in epoll while events keep coming.

A loop is a thread. A healthy loop spends most of an idle-ish interval blocked
in epoll_wait; a saturated one finds events ready every time it asks (blocking calls return at
once, or it only polls with timeout 0), so work queues in the socket buffers
and the accept queue instead of being served.

Chain: symptom (lab client latency / throughput) -> counter (none: the kernel
keeps no counter for loop saturation; the listener's Recv-Q is shown when it
grows) -> probe (share of each interval the thread spent waiting — its own
wait time, never summed over threads — events per call, full batches)
-> cause -> fix -> verification. The finding names the thread (pid, tid, comm)
and its process; the process's other threads get nothing when they wait.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..contract.verdict_thresholds import (
    LOOP_MAX_BLOCKED,
    LOOP_MIN_BUSY,
    LOOP_MIN_SATURATED_BUSY,
    LOOP_MIN_STARVED_RUNQ,
    LOOP_STARVED_RUNQ_SHARE,
)
from ..derived.epoll import (
    busy_windows,
    cpu_share_per_thread,
    cpu_share_schedstat,
    longest_runs,
    loop_numbers_of,
    per_thread,
    process_busy_window,
    process_cpu_per_sample,
    process_wait_share,
    process_window_share,
    wait_share,
    window_shares,
)
from ..derived.servers import server_of
from ..findings import Finding, Link
from .base import Rule, RunView

KIND = "event_loop_saturation"
INPUTS = ("ep_loop", "listeners", "aq_accept", "threads", "processes")
# Events per interval before a loop counts as busy: only keeps an idle poller out (a CPU-bound
# server at 40 ms a request serves < 50 events a second and never blocks).
MIN_EVENTS = 10
MAX_WAIT_SHARE = LOOP_MAX_BLOCKED.value  # of the interval (or busy window) blocked in epoll: under it, it never waits
MIN_BUSY_INTERVALS = 3
# A saturated loop finds work every time it asks: at most this share of its calls may come back
# empty (a busy host's Go runtime thread polling ~30 times a second is idle capacity).
MAX_EMPTY_SHARE = 0.1
# Per interval, without the scheduler's window figures: the thread is on (or waiting for) a CPU at
# least this share of the interval, or no thread of its process waited then while the process
# used at least MIN_PROCESS_CPU_SHARE of a CPU (a Go server's poller finds the events; another
# thread runs them). docs/capture.md, "Attribution on a shared host", has the measurements.
MIN_CPU_SHARE = LOOP_MIN_BUSY.value
MIN_PROCESS_CPU_SHARE = 0.2
# A loop that never waits, over its busy window (docs/data-contract.md, "Verdict thresholds").
# The starved/saturated split is by what held up the time the loop wanted a CPU, not by a bar
# on its CPU share alone: a saturated loop beside a busy host is on a CPU 81-96 % and waits for
# one 2-18 % (six runs of one load; docs/capture.md), either side of a 90 % CPU bar.
MIN_SATURATED_BUSY = LOOP_MIN_SATURATED_BUSY.value
STARVED_RUNQ_SHARE = LOOP_STARVED_RUNQ_SHARE.value
MIN_STARVED_RUNQ = LOOP_MIN_STARVED_RUNQ.value


@dataclass
class _Loops:
    """Every loop of a run, and what judging one of them needs."""

    pt: pd.DataFrame  # per_thread rows
    ls: pd.DataFrame  # listeners.csv
    interval: float
    per_thread_data: bool  # threads told apart (contract 3, or tid != pid seen)
    threads: pd.DataFrame  # _thread_table: a row per (pid, tid)
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


def _wrk_latency(run: RunView) -> dict[str, Any]:
    lab = run.lab or {}
    phases = lab.get("phases") or []
    return {"wrk_requests_per_s": [p.get("wrk_requests_per_s") for p in phases]} if phases else {}


def _held_by(loops: _Loops, pid: int, process: str) -> pd.DataFrame:
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


def _window(run: RunView, t0: float, t1: float) -> dict[str, float]:
    return {"start_s": t0, "end_s": t1, "start_rel_s": round(t0 - run.start, 1), "end_rel_s": round(t1 - run.start, 1)}


# -- decision: which intervals a thread never waited in --------------------------------------------


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


def _thread_table(
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


# -- subject ----------------------------------------------------------------------------------------


def _subject(loops: _Loops, pid: int, tid: int, th: Any) -> tuple[dict[str, Any], pd.DataFrame]:
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


def _ports(loops: _Loops, held: pd.DataFrame) -> list[int]:
    """The listening ports of listeners.csv rows (one group of them, so computed once per group)."""
    if held.empty:
        return []
    key = id(held)
    if key not in loops.ports_of:
        loops.ports_of[key] = (held, sorted({int(p) for p in held["lport"]}))
    return list(loops.ports_of[key][1])


# -- probe ------------------------------------------------------------------------------------------


def _pct(x: float, digits: int) -> float | None:
    return None if pd.isna(x) else round(100 * float(x), digits)


def _probe_evidence(run: RunView, loops: _Loops, th: Any) -> dict[str, Any]:
    """How the thread used epoll, and how much of its busy intervals it spent blocked (its own time,
    never summed over threads) or on the CPU."""
    ev = {
        "intervals_with_events": int(th.intervals_with_events),
        "intervals_never_waiting": int(th.intervals_never_waiting),
        **loop_numbers_of(
            {c: int(getattr(th, c)) for c in ("calls", "nb_calls", "events_sum", "ret_full", "ret_zero")},
            int(th.rows),
            loops.interval,
        ),
        "wait_share_busy_pct": _pct(th.wait_busy, 2),
        "wait_share_median_pct": _pct(th.wait_median, 1),
        "cpu_share_busy_pct": _pct(th.cpu_overall, 1),
        "cpu_share_from": th.cpu_from,
        "runq_share_pct": _pct(th.runq, 1),
        "per_thread": loops.per_thread_data,
        "estimated_from_sample": int(run.metadata.get("data_contract", 2)) >= 3,
        # Consecutive intervals: a loop that is busy for a moment (a burst of connects) is not saturated.
        "longest_never_waiting_run": int(th.longest_never_waiting_run),
        **_window_evidence(run, th),
    }
    if "window_cpu_pct" in ev:  # the thread's CPU over its own busy window, not over the capture
        ev.update(cpu_share_busy_pct=ev["window_cpu_pct"], runq_share_pct=ev["window_runq_pct"])
        ev["cpu_share_from"] = "schedstat over its busy window"
    return ev


def _window_evidence(run: RunView, th: Any) -> dict[str, Any]:
    """The busy window's figures (the scheduler's clocks between two samples in it), when known."""
    cpu = getattr(th, "cpu_window", float("nan"))
    if pd.isna(cpu) or pd.isna(getattr(th, "blocked", float("nan"))):
        return {}
    return {
        "window_blocked_pct": _pct(th.blocked, 2),
        "window_cpu_pct": _pct(cpu, 1),
        "window_runq_pct": _pct(th.runq_window, 1),
        "window_from_rel_s": round(float(th.cpu_from_s) - run.start, 1),
        "window_to_rel_s": round(float(th.cpu_to_s) - run.start, 1),
        "window_from_s": float(th.cpu_from_s),
        "window_to_s": float(th.cpu_to_s),
    }


def _other_threads(loops: _Loops, pid: int, tid: int) -> dict[str, Any]:
    """The process's other loops: how many there are and whether they wait (they get no finding)."""
    t = loops.threads.loc[pid]
    others = t[(t.index != tid) & (t["intervals_with_events"] > 0)]
    waits = sorted(float(w) for w in others["wait_median"])
    return {
        "other_threads_with_events": len(others),
        "other_threads_saturated": int((others["longest_never_waiting_run"] >= MIN_BUSY_INTERVALS).sum()),
        "other_threads_blocked_median_pct": round(100 * waits[len(waits) // 2], 1) if waits else None,
    }


# -- counter, cause, verification --------------------------------------------------------------------


def _counter_evidence(run: RunView, subject: dict[str, Any], held: pd.DataFrame) -> dict[str, Any]:
    """No kernel counter: the listeners' Recv-Q, and the ports this thread itself accepted on."""
    # The accept-queue probe counts accept() per (process, thread name, port): the listeners this
    # thread itself accepted on, when it did.
    acc = run.table("aq_accept")
    acc = acc[(acc["pid"] == subject["pid"]) & (acc["comm"] == subject["comm"]) & (acc["accepted"] > 0)]
    return {
        "listener_recv_q_max": int(held["recv_q"].max()) if not held.empty else None,
        "listen_ports": subject["listen_ports"],
        "thread_accepts_on": sorted({int(p) for p in acc["lport"]}),
    }


def _cause_evidence(run: RunView, subject: dict[str, Any]) -> dict[str, Any]:
    """What the lab's server was told to do, when this loop is that server's."""
    server = (run.lab or {}).get("server") or {}
    mine = server.get("comm") in (subject["comm"], subject["process"])
    return {
        "gomaxprocs": server.get("gomaxprocs") if mine else None,
        "work_per_request": server.get("work") if mine else None,
    }


def _verification(run: RunView) -> Link:
    lab = run.lab or {}
    ev = {
        "command": "make lab LAB=epoll VARIANT=idle" if lab.get("lab") == "epoll" else "make capture DURATION=60",
        "expect_wait_share_pct_above": 100 * MAX_WAIT_SHARE,
    }
    return Link("verification", "rerun", ev)


# -- one thread, the run ---------------------------------------------------------------------------


def _window_verdict(th: Any) -> str | None:
    """The one rule for a loop over its busy window, from the scheduler's clocks: `waits` (blocked
    in epoll at least MAX_WAIT_SHARE of it), else `saturated`, `cpu_starved`, `off_cpu` or
    `unknown` (the thresholds above); None without the window's figures (no threads.csv sample of
    the thread, a window under MIN_WINDOW_S, a run before contract 6)."""
    blocked, cpu, runq = (getattr(th, c, float("nan")) for c in ("blocked", "cpu_window", "runq_window"))
    if pd.isna(blocked) or pd.isna(cpu) or pd.isna(runq):
        return None
    if blocked >= MAX_WAIT_SHARE:
        return "waits"
    return _shares_verdict(cpu, runq)


def _shares_verdict(cpu: float, runq: float) -> str:
    """For a loop that never waits: off_cpu, cpu_starved, saturated or unknown (thresholds above)."""
    if cpu + runq < MIN_CPU_SHARE:
        return "off_cpu"
    if _starved(cpu, runq):
        return "cpu_starved"
    return "saturated" if cpu + runq >= MIN_SATURATED_BUSY else "unknown"


def _starved(cpu: float, runq: float) -> bool:
    """Waited for a CPU at least STARVED_RUNQ_SHARE of the time it was on or waiting for one."""
    return runq >= max(STARVED_RUNQ_SHARE * (cpu + runq), MIN_STARVED_RUNQ)


def _evaluate_thread(run: RunView, loops: _Loops, th: Any) -> Finding | None:
    """A server's loop, by its busy window when the scheduler's clocks cover it (saturated or
    starved of CPU: a finding; unknown: not checked, with why), else (and for a loop that waits or
    sleeps elsewhere by the window) saturated when it never waited for MIN_BUSY_INTERVALS
    intervals in a row."""
    pid, tid = (int(x) for x in th.Index)
    subject, held = _subject(loops, pid, tid, th)
    # Servers only: a client's loop (a load generator ramping up) is busy by design.
    if not subject["listen_ports"]:
        return None
    probe_ev = _probe_evidence(run, loops, th)
    verdict = _window_verdict(th)
    if verdict is not None:
        probe_ev["window_verdict"] = verdict
    if verdict in ("saturated", "cpu_starved"):
        t0, t1 = float(th.start_s), float(th.end_s)
        return _finding(run, loops, th, subject, held, probe_ev, verdict, (t0, t1))
    if verdict == "unknown":
        probe_ev.update(_other_threads(loops, pid, tid))
        chain = [Link("probe", "unknown", probe_ev)]
        return Finding(KIND, "not_checked", subject, cause_class="loop_unknown", chain=chain)
    if probe_ev["longest_never_waiting_run"] < MIN_BUSY_INTERVALS:
        if not th.intervals_with_events:
            return None
        key = "off_cpu" if verdict == "off_cpu" else "waits" if _waits(probe_ev) else "busy_briefly"
        return Finding(KIND, "absent", subject, chain=[Link("probe", key, probe_ev)])
    if verdict == "off_cpu":  # a poller for its process's loop (Go): the process over the window
        verdict = _process_verdict(run, probe_ev, pid, float(th.start_s), float(th.end_s))
    pt = loops.pt
    mine = ((pt["pid"] == pid) & (pt["tid"] == tid)).to_numpy(dtype=bool) & loops.busy.reindex(pt.index).to_numpy(
        dtype=bool
    )
    t = pt.loc[mine, "time_s"].astype(float)
    span = (float(t.min()) - loops.interval, float(t.max()))
    return _finding(run, loops, th, subject, held, probe_ev, verdict if verdict == "cpu_starved" else "saturated", span)


def _process_verdict(run: RunView, probe_ev: dict[str, Any], pid: int, t0: float, t1: float) -> str:
    """A poller's process (its loop runs on other threads) over the poller's busy window: starved
    of CPU by the rule of _window_verdict on the process's clocks (its threads together), else
    saturated; the figures into probe_ev."""
    threads = run.table("threads")
    cpu = process_window_share(threads, pid, t0, t1)
    runq = process_window_share(threads, pid, t0, t1, column="runq_ns")
    probe_ev["process_cpu_window_pct"] = _pct(cpu, 1) if cpu is not None else None
    probe_ev["process_runq_window_pct"] = _pct(runq, 1) if runq is not None else None
    if cpu is None or runq is None:
        return "saturated"
    return "cpu_starved" if _starved(cpu, runq) else "saturated"


def _waits(probe_ev: dict[str, Any]) -> bool:
    """The loop blocked in epoll a fair share of its busy intervals (their median), as a healthy one does."""
    median = probe_ev.get("wait_share_median_pct")
    return median is not None and median >= 100 * MAX_WAIT_SHARE


def _finding(
    run: RunView,
    loops: _Loops,
    th: Any,
    subject: dict[str, Any],
    held: pd.DataFrame,
    probe_ev: dict[str, Any],
    verdict: str,
    span: tuple[float, float],
    probe_key: str = "never_waits",
) -> Finding:
    """A loop that never waits: saturated by its own work, or starved of CPU; the whole chain."""
    pid, tid = int(subject["pid"]), int(subject["tid"])
    probe_ev.update(_other_threads(loops, pid, tid))
    cause = "loop_saturated" if verdict == "saturated" else "cpu_starved"
    wrk = _wrk_latency(run)
    return Finding(
        KIND,
        "confirmed",
        subject,
        window=_window(run, *span),
        cause_class=cause,
        chain=[
            Link("symptom", "client" if wrk else "not_captured", wrk),
            Link("counter", "no_kernel_counter", _counter_evidence(run, subject, held)),
            Link("probe", probe_key, probe_ev),
            Link("cause", cause, _cause_evidence(run, subject)),
            Link("fix", cause, {"server": server_of(run, None, pid)}),
            _verification(run),
        ],
    )


def _servers(pt: pd.DataFrame, ls: pd.DataFrame, holders: set[int]) -> pd.DataFrame:
    """The rows of processes that may hold a listener (_held_by: by pid, or by the process's name
    where the sampler did not say who holds them), whole processes: only a server's loop gets a
    finding, and a host where short-lived processes come and go has thousands of other threads
    (an hour's capture: each judged alone took 22 s of the report)."""
    pids = set(ls["pid"].dropna().astype(int)) | holders
    if holders:
        return pt[pt["pid"].isin(pids).to_numpy(dtype=bool)]
    names = set(ls["comm"].dropna().astype(str))
    return pt[(pt["pid"].isin(pids) | pt["process_comm"].isin(names)).to_numpy(dtype=bool)]


def _evaluate(run: RunView) -> list[Finding]:
    interval = float(run.metadata.get("interval_s", 1))
    pt = per_thread(run)
    per_thread_data = bool((pt["tid"] != pt["pid"]).any()) or int(run.metadata.get("data_contract", 2)) >= 3
    threads = run.table("threads")
    # Each thread's share of the time on a CPU, and waiting for one (the scheduler's clock).
    sched = (cpu_share_schedstat(threads), cpu_share_schedstat(threads, "runq_ns"))
    per_sample = process_cpu_per_sample(threads)
    ls = run.table("listeners")
    holders = set(threads["pid"].dropna().astype(int))
    served = _servers(pt, ls, holders)
    unchecked = _not_sampled(run, pt, served, interval)
    pt = served
    table, busy = _thread_table(pt, interval, sched, per_sample)
    windows = busy_windows(pt, interval, MIN_EVENTS)
    table = table.join(windows).join(window_shares(threads, windows))
    loops = _Loops(pt, ls, interval, per_thread_data, table, busy)
    loops.holders = holders
    found = [f for f in (_evaluate_thread(run, loops, th) for th in loops.threads.itertuples()) if f is not None]
    return _by_process(run, loops, threads, _one_per_process(found)) + unchecked


def _by_process(run: RunView, loops: _Loops, threads: pd.DataFrame, found: list[Finding]) -> list[Finding]:
    """A server process none of whose threads was found saturated, judged as one loop when its threads
    take turns at it (Go's runtime: a non-blocking poll on whichever thread runs out of work, edge
    events, so half the polls come back empty): over its busy window none of its threads blocked in
    epoll; then the one rule on the process's clocks (saturated, starved of CPU, unknown). The
    finding names its thread with the most events and replaces that thread's own verdict."""
    confirmed = {int(f.subject["pid"]) for f in found if f.is_finding}
    out = list(found)
    for pid in sorted(set(loops.pt["pid"].astype(int)) - confirmed):
        win = process_busy_window(loops.pt, threads, pid, loops.interval, MIN_EVENTS)
        if win is None or win["blocked"] >= MAX_WAIT_SHARE:
            continue
        verdict = _shares_verdict(win["cpu"], win["runq"])
        if verdict in (None, "off_cpu"):
            continue
        th = _busiest_thread(loops, pid)
        f = _process_finding(run, loops, th, win, verdict)
        if f is not None:
            out = [x for x in out if x.subject.get("tid") != f.subject["tid"]] + [f]
    return out


def _busiest_thread(loops: _Loops, pid: int) -> Any:
    """The process's thread with the most epoll events (the one a reader looks for)."""
    t = loops.threads.loc[[pid]].sort_values("events_sum", ascending=False)
    return next(t.itertuples())


def _process_finding(run: RunView, loops: _Loops, th: Any, win: dict[str, float], verdict: str) -> Finding | None:
    pid, tid = (int(x) for x in th.Index)
    subject, held = _subject(loops, pid, tid, th)
    if not subject["listen_ports"]:
        return None
    probe_ev = _probe_evidence(run, loops, th)
    probe_ev.update(
        judged_as="process",
        window_verdict=verdict,
        process_window_from_rel_s=round(win["start_s"] - run.start, 1),
        process_window_to_rel_s=round(win["end_s"] - run.start, 1),
        process_blocked_window_pct=_pct(win["blocked"], 2),
        process_cpu_window_pct=_pct(win["cpu"], 1),
        process_runq_window_pct=_pct(win["runq"], 1),
    )
    if verdict == "unknown":
        chain = [Link("probe", "unknown_process", probe_ev)]
        return Finding(KIND, "not_checked", subject, cause_class="loop_unknown", chain=chain)
    span = (win["start_s"], win["end_s"])
    return _finding(run, loops, th, subject, held, probe_ev, verdict, span, "never_waits_process")


def _not_sampled(run: RunView, pt: pd.DataFrame, served: pd.DataFrame, interval: float) -> list[Finding]:
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


def _one_per_process(found: list[Finding]) -> list[Finding]:
    """A confirmed thread known to be off the CPU (a poller, confirmed because no thread of its
    process waited while the process was on the CPU) speaks for its process's loop, not for a loop
    of its own: it is folded into the process's finding. A Go runtime with GOMAXPROCS=1 has one loop
    and moves it between threads: in a CI run of the epoll lab's busy variant both its poller and
    the thread that ran the goroutines (which polls when it runs out of work) never waited for 3
    intervals, two findings for one loop. Threads on the CPU, or whose CPU time was not recorded
    (contract < 4), keep their own: two loops of one process that never wait burn two CPUs. The kept
    finding names the threads folded into it (folded_tids)."""

    def rank(f: Finding) -> tuple[bool, int, int, int]:
        probe = _probe_of(f)
        run, never = probe["longest_never_waiting_run"], probe["intervals_never_waiting"]
        return (not _off_cpu(probe), run, never, -int(f.subject["tid"]))

    best: dict[int, Finding] = {}
    for f in found:
        pid = int(f.subject["pid"])
        if f.status == "confirmed" and (pid not in best or rank(f) > rank(best[pid])):
            best[pid] = f

    def kept(f: Finding) -> bool:
        return f.status != "confirmed" or f is best[int(f.subject["pid"])] or not _off_cpu(_probe_of(f))

    out = []
    for f in found:
        if kept(f):
            out.append(f)
        else:
            _probe_of(best[int(f.subject["pid"])]).setdefault("folded_tids", []).append(int(f.subject["tid"]))
    return out


def _probe_of(f: Finding) -> dict[str, Any]:
    link = f.link("probe")
    return link.evidence if link is not None else {}


def _off_cpu(probe: dict[str, Any]) -> bool:
    share = probe.get("cpu_share_busy_pct")
    return share is not None and share + (probe.get("runq_share_pct") or 0) < 100 * MIN_CPU_SHARE


RULE = Rule(KIND, INPUTS, _evaluate)
evaluate = RULE.evaluate
