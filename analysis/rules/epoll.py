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

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..derived.epoll import (
    cpu_recorded,
    cpu_share_overall,
    cpu_share_schedstat,
    loop_numbers,
    per_thread,
    process_wait_share,
    wait_share,
)
from ..derived.servers import server_of
from ..findings import Finding, Link
from .base import Rule, RunView

KIND = "event_loop_saturation"
INPUTS = ("ep_loop", "listeners", "aq_accept", "threads", "processes")
# Events per interval before a loop counts as busy. The signal is that the
# loop never waits while work keeps arriving; this floor only keeps an idle
# poller out. It was 50: a CPU-bound server that takes 40 ms a request (the
# epoll lab under emulation, Debian 13 VM) serves < 50 events a second and
# never blocks — saturated, and missed. No real capture in tests/fixtures
# other than epoll-busy has a loop that passes with 10.
MIN_EVENTS = 10
MAX_WAIT_SHARE = 0.05  # of the interval spent blocked in epoll
MIN_BUSY_INTERVALS = 3
# A saturated loop finds work every time it asks: at most this share of its calls may come back
# empty (timeouts, non-blocking polls that found nothing). On a busy host a Go runtime thread
# that polled ~30 times a second read 0 % blocked for three intervals in the 1-in-8 sample of
# contract 3 while a third to a half of its calls came back empty: idle capacity, not a
# saturated loop. Saturated loops measured here: 0-8 % (epoll-busy, and the host-loop capture).
MAX_EMPTY_SHARE = 0.1
# ...and it is really busy (contract 4, which records each thread's CPU time): the thread is on
# the CPU at least this share of the interval, or no thread of its process waited in epoll in
# that interval. A thread that seldom waits in epoll may be asleep elsewhere: in the busy-host lab
# an idle Go aqserver thread read ~0 % blocked in epoll (short sampled calls; Go parks threads on a
# futex) in 4 of 5 runs, using ~0 CPU while its sibling waited 17.6 s. The saturated loopserver
# thread used 0.91-0.99 of a CPU. A saturated Go server is the second case: its polling thread
# (sysmon, ~2 ms of CPU a second) finds events at every non-blocking poll while the thread that
# runs the goroutines seldom calls epoll, and no thread of the process ever waits there.
MIN_CPU_SHARE = 0.5


@dataclass
class _Thread:
    """One thread's intervals, and which of them had events and which never waited (busy)."""

    rows: pd.DataFrame  # by time
    share: pd.Series  # share of each interval spent blocked in epoll
    active: pd.Series  # intervals with events
    busy: pd.Series  # intervals with events in which the loop never waited
    cpu_overall: float | None  # its CPU share over its span; None when not recorded
    cpu_from: str | None  # where cpu_overall comes from: "schedstat" (threads.csv) or "probe"


@dataclass
class _Loops:
    """Every loop of a run, and what judging one of them needs."""

    pt: pd.DataFrame  # per_thread rows
    ls: pd.DataFrame  # listeners.csv
    interval: float
    per_thread_data: bool  # threads told apart (contract 3, or tid != pid seen)
    threads: dict[tuple[int, int], _Thread]

    @property
    def loop_pids(self) -> set[int]:
        return set(self.pt["pid"].astype(int))


def _wrk_latency(run: RunView) -> dict[str, Any]:
    lab = run.lab or {}
    phases = lab.get("phases") or []
    return {"wrk_requests_per_s": [p.get("wrk_requests_per_s") for p in phases]} if phases else {}


def _held_by(ls: pd.DataFrame, pid: int, process: str, loop_pids: set[int]) -> pd.DataFrame:
    """listeners.csv rows of a process: held by its pid; if none is, those held under its name by a
    process with no loop (nginx: ss -p names the master, the workers run the loops)."""
    # pid and comm are empty for a listener ss could not name a process for: it is no one's.
    own = (ls["pid"] == pid).fillna(False).astype(bool)
    if own.any():
        return ls[own.to_numpy()]
    by_name = (ls["comm"] == process).fillna(False).astype(bool) & ~ls["pid"].isin(loop_pids - {pid}).fillna(
        False
    ).astype(bool)
    return ls[own.to_numpy() | by_name.to_numpy()]


def _longest_run(flags: list[bool]) -> int:
    longest, cur = 0, 0
    for b in flags:
        cur = cur + 1 if b else 0
        longest = max(longest, cur)
    return longest


def _window(run: RunView, t0: float, t1: float) -> dict[str, float]:
    return {"start_s": t0, "end_s": t1, "start_rel_s": round(t0 - run.start, 1), "end_rel_s": round(t1 - run.start, 1)}


# -- decision: which intervals a thread never waited in --------------------------------------------


def _active(rows: pd.DataFrame) -> pd.Series:
    """Intervals with enough events to judge the loop by (an idle poller stays out)."""
    return rows["events_sum"] >= MIN_EVENTS


def _busy(rows: pd.DataFrame, share: pd.Series, process_wait: pd.Series, cpu_overall: float | None) -> pd.Series:
    """Intervals with events in which the thread never waited in epoll and found work at every call;
    when its CPU time is known, also on the CPU, or no thread of its process waited then."""
    active = _active(rows)
    finds_work = rows["ret_zero"] <= MAX_EMPTY_SHARE * rows["calls"]
    busy = active & (share < MAX_WAIT_SHARE) & finds_work
    if cpu_overall is None and not cpu_recorded(rows):
        return busy
    on_cpu = cpu_overall is not None and cpu_overall >= MIN_CPU_SHARE
    process_waits = rows["time_s"].map(process_wait).astype(float) >= MAX_WAIT_SHARE
    return busy & (on_cpu | ~process_waits)


def _threads(pt: pd.DataFrame, interval: float, sched: dict[tuple[int, int], float]) -> dict[tuple[int, int], _Thread]:
    """Each thread's numbers first, so a saturated thread can be told apart from its process's idle ones.
    Its CPU share from the scheduler's clock where threads.csv has it (the probe reads the clock
    only at its sampled calls, and a loop busy with long requests makes few: 79 % against /proc's
    96 % for a Python loop), else from the probe."""
    process_wait = process_wait_share(pt, interval)
    threads: dict[tuple[int, int], _Thread] = {}
    for (pid, tid), rows in pt.groupby(["pid", "tid"], sort=True):
        rows = rows.sort_values("time_s")
        share = wait_share(rows, interval)
        key = (int(pid), int(tid))
        if key in sched:
            cpu_overall, cpu_from = sched[key], "schedstat"
        else:
            cpu_overall = cpu_share_overall(rows) if cpu_recorded(rows) else None
            cpu_from = "probe" if cpu_overall is not None else None
        busy = _busy(rows, share, process_wait.loc[int(pid)], cpu_overall)
        threads[key] = _Thread(rows, share, _active(rows), busy, cpu_overall, cpu_from)
    return threads


# -- subject ----------------------------------------------------------------------------------------


def _subject(loops: _Loops, pid: int, tid: int, th: _Thread) -> tuple[dict[str, Any], pd.DataFrame]:
    """The thread and its process, with the ports the process listens on; and those listeners' rows."""
    comm, process = str(th.rows["comm"].iloc[0]), str(th.rows["process_comm"].iloc[0])
    ls, pt = loops.ls, loops.pt
    # The process's own name as ss -p shows it, when its main thread has no loop to name it.
    named = ls.loc[(ls["pid"] == pid).fillna(False).astype(bool).to_numpy(), "comm"].dropna()
    if len(named) and not ((pt["pid"] == pid) & (pt["tid"] == pid)).any():
        process = str(named.iloc[-1])
    # ss -p names one holder of a shared listening socket (nginx: master or
    # worker), so a process also owns the listeners held under its name by a
    # process that has no loop of its own (never another loop's listeners).
    held = _held_by(ls, pid, process, loops.loop_pids)
    ports = sorted({int(p) for p in held["lport"]})
    return {"pid": pid, "tid": tid, "comm": comm, "process": process, "listen_ports": ports}, held


# -- probe ------------------------------------------------------------------------------------------


def _probe_evidence(run: RunView, loops: _Loops, th: _Thread) -> dict[str, Any]:
    """How the thread used epoll, and how much of its busy intervals it spent blocked (its own time,
    never summed over threads) or on the CPU."""
    busy, active = th.busy, th.active
    blocked = th.share.clip(upper=1.0)
    return {
        "intervals_with_events": int(active.sum()),
        "intervals_never_waiting": int(busy.sum()),
        **loop_numbers(th.rows, loops.interval),
        "wait_share_busy_pct": round(100 * float(blocked[busy].mean()), 2) if busy.any() else None,
        "wait_share_median_pct": round(100 * float(blocked[active].median()), 1) if active.any() else None,
        "cpu_share_busy_pct": round(100 * th.cpu_overall, 1) if th.cpu_overall is not None else None,
        "cpu_share_from": th.cpu_from,
        "per_thread": loops.per_thread_data,
        "estimated_from_sample": int(run.metadata.get("data_contract", 2)) >= 3,
        # Consecutive intervals: a loop that is busy for a moment (a burst of connects) is not saturated.
        "longest_never_waiting_run": _longest_run(busy.tolist()),
    }


def _other_threads(loops: _Loops, pid: int, tid: int) -> dict[str, Any]:
    """The process's other loops: how many there are and whether they wait (they get no finding)."""
    others = [v for (p, t), v in loops.threads.items() if p == pid and t != tid and v.active.any()]
    waits = [float(v.share.clip(upper=1.0)[v.active].median()) for v in others]
    return {
        "other_threads_with_events": len(others),
        "other_threads_saturated": sum(_longest_run(v.busy.tolist()) >= MIN_BUSY_INTERVALS for v in others),
        "other_threads_blocked_median_pct": round(100 * sorted(waits)[len(waits) // 2], 1) if waits else None,
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


def _evaluate_thread(run: RunView, loops: _Loops, pid: int, tid: int) -> Finding | None:
    """A server's loop: saturated when it never waited for MIN_BUSY_INTERVALS intervals in a row."""
    th = loops.threads[(pid, tid)]
    subject, held = _subject(loops, pid, tid, th)
    # Servers only: a client's loop (a load generator ramping up) is busy by design.
    if not subject["listen_ports"]:
        return None
    probe_ev = _probe_evidence(run, loops, th)
    if probe_ev["longest_never_waiting_run"] < MIN_BUSY_INTERVALS:
        return Finding(KIND, "absent", subject, chain=[Link("probe", "waits", probe_ev)]) if th.active.any() else None
    probe_ev.update(_other_threads(loops, pid, tid))
    t = th.rows.loc[th.busy, "time_s"].astype(float)
    wrk = _wrk_latency(run)
    return Finding(
        KIND,
        "confirmed",
        subject,
        window=_window(run, float(t.min()) - loops.interval, float(t.max())),
        cause_class="loop_saturated",
        chain=[
            Link("symptom", "client" if wrk else "not_captured", wrk),
            Link("counter", "no_kernel_counter", _counter_evidence(run, subject, held)),
            Link("probe", "never_waits", probe_ev),
            Link("cause", "loop_saturated", _cause_evidence(run, subject)),
            Link("fix", "loop_saturated", {"server": server_of(run, None, pid)}),
            _verification(run),
        ],
    )


def _evaluate(run: RunView) -> list[Finding]:
    interval = float(run.metadata.get("interval_s", 1))
    pt = per_thread(run)
    per_thread_data = bool((pt["tid"] != pt["pid"]).any()) or int(run.metadata.get("data_contract", 2)) >= 3
    sched = cpu_share_schedstat(run.table("threads"))
    loops = _Loops(pt, run.table("listeners"), interval, per_thread_data, _threads(pt, interval, sched))
    found = (_evaluate_thread(run, loops, pid, tid) for pid, tid in loops.threads)
    return [f for f in found if f is not None]


RULE = Rule(KIND, INPUTS, _evaluate)
evaluate = RULE.evaluate
