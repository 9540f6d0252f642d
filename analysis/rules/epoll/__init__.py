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

from typing import Any

import pandas as pd

from ...derived.epoll import (
    busy_windows,
    cpu_share_schedstat,
    ep_columns,
    per_thread_of,
    process_busy_window,
    process_cpu_per_sample,
    window_shares,
)
from ...derived.servers import server_of
from ...findings import Finding, Link
from ..base import Rule, RunView
from .evidence import (
    cause_evidence,
    counter_evidence,
    other_threads,
    pct,
    probe_evidence,
    verification,
    window,
    wrk_latency,
)
from .limits import KIND, MAX_WAIT_SHARE, MIN_BUSY_INTERVALS, MIN_CPU_SHARE, MIN_EVENTS
from .loops import Loops, servers, subject_of, thread_table
from .not_sampled import not_sampled
from .verdicts import process_verdict, shares_verdict, waits, window_verdict

INPUTS = ("ep_loop", "listeners", "aq_accept", "threads", "processes")
# The columns of ep_loop the rule reads (a day's per-thread rows: 125 MB with every column).
LOOP_NUMBERS = ("calls", "nb_calls", "events_sum", "ret_zero", "ret_full", "wait_ns_sum", "cpu_ns")


def _evaluate_thread(run: RunView, loops: Loops, th: Any) -> Finding | None:
    """A server's loop, by its busy window when the scheduler's clocks cover it (saturated or
    starved of CPU: a finding; unknown: not checked, with why), else (and for a loop that waits or
    sleeps elsewhere by the window) saturated when it never waited for MIN_BUSY_INTERVALS
    intervals in a row."""
    pid, tid = (int(x) for x in th.Index)
    subject, held = subject_of(loops, pid, tid, th)
    # Servers only: a client's loop (a load generator ramping up) is busy by design.
    if not subject["listen_ports"]:
        return None
    probe_ev = probe_evidence(run, loops, th)
    verdict = window_verdict(th)
    if verdict is not None:
        probe_ev["window_verdict"] = verdict
    if verdict in ("saturated", "cpu_starved"):
        t0, t1 = float(th.start_s), float(th.end_s)
        return _finding(run, loops, th, subject, held, probe_ev, verdict, (t0, t1))
    if verdict == "unknown":
        probe_ev.update(other_threads(loops, pid, tid))
        chain = [Link("probe", "unknown", probe_ev)]
        return Finding(KIND, "not_checked", subject, cause_class="loop_unknown", chain=chain)
    if probe_ev["longest_never_waiting_run"] < MIN_BUSY_INTERVALS:
        if not th.intervals_with_events:
            return None
        key = "off_cpu" if verdict == "off_cpu" else "waits" if waits(probe_ev) else "busy_briefly"
        return Finding(KIND, "absent", subject, chain=[Link("probe", key, probe_ev)])
    if verdict == "off_cpu":  # a poller for its process's loop (Go): the process over the window
        verdict = process_verdict(run, probe_ev, pid, float(th.start_s), float(th.end_s))
    pt = loops.pt
    mine = ((pt["pid"] == pid) & (pt["tid"] == tid)).to_numpy(dtype=bool) & loops.busy.reindex(pt.index).to_numpy(
        dtype=bool
    )
    t = pt.loc[mine, "time_s"].astype(float)
    span = (float(t.min()) - loops.interval, float(t.max()))
    return _finding(run, loops, th, subject, held, probe_ev, verdict if verdict == "cpu_starved" else "saturated", span)


def _finding(
    run: RunView,
    loops: Loops,
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
    probe_ev.update(other_threads(loops, pid, tid))
    cause = "loop_saturated" if verdict == "saturated" else "cpu_starved"
    wrk = wrk_latency(run)
    return Finding(
        KIND,
        "confirmed",
        subject,
        window=window(run, *span),
        cause_class=cause,
        chain=[
            Link("symptom", "client" if wrk else "not_captured", wrk),
            Link("counter", "no_kernel_counter", counter_evidence(run, subject, held)),
            Link("probe", probe_key, probe_ev),
            Link("cause", cause, cause_evidence(run, subject)),
            Link("fix", cause, {"server": server_of(run, None, pid)}),
            verification(run),
        ],
    )


def _evaluate(run: RunView) -> list[Finding]:
    interval = float(run.metadata.get("interval_s", 1))
    # A day's ep_loop holds a million rows: let go (when no later step reads it) before its rows
    # are sorted per thread, so that only the columns read are held, and each until sorted.
    columns = ep_columns(run.table("ep_loop"), LOOP_NUMBERS)
    run.done_with("ep_loop")
    pt = per_thread_of(columns)
    per_thread_data = bool((pt["tid"] != pt["pid"]).any()) or int(run.metadata.get("data_contract", 2)) >= 3
    # The scheduler's clocks only: each helper below copies the samples it reads.
    threads = run.table("threads")[["time_s", "pid", "tid", "cpu_ns", "runq_ns"]]
    # Each thread's share of the time on a CPU, and waiting for one (the scheduler's clock).
    sched = (cpu_share_schedstat(threads), cpu_share_schedstat(threads, "runq_ns"))
    per_sample = process_cpu_per_sample(threads)
    ls = run.table("listeners")
    holders = set(threads["pid"].dropna().astype(int))
    served = servers(pt, ls, holders)
    unchecked = not_sampled(run, pt, served, interval)
    pt = served
    table, busy = thread_table(pt, interval, sched, per_sample)
    windows = busy_windows(pt, interval, MIN_EVENTS)
    table = table.join(windows).join(window_shares(threads, windows))
    loops = Loops(pt, ls, interval, per_thread_data, table, busy)
    loops.holders = holders
    found = [f for f in (_evaluate_thread(run, loops, th) for th in loops.threads.itertuples()) if f is not None]
    return _by_process(run, loops, threads, _one_per_process(found)) + unchecked


def _by_process(run: RunView, loops: Loops, threads: pd.DataFrame, found: list[Finding]) -> list[Finding]:
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
        verdict = shares_verdict(win["cpu"], win["runq"])
        if verdict in (None, "off_cpu"):
            continue
        th = _busiest_thread(loops, pid)
        f = _process_finding(run, loops, th, win, verdict)
        if f is not None:
            out = [x for x in out if x.subject.get("tid") != f.subject["tid"]] + [f]
    return out


def _busiest_thread(loops: Loops, pid: int) -> Any:
    """The process's thread with the most epoll events (the one a reader looks for)."""
    t = loops.threads.loc[[pid]].sort_values("events_sum", ascending=False)
    return next(t.itertuples())


def _process_finding(run: RunView, loops: Loops, th: Any, win: dict[str, float], verdict: str) -> Finding | None:
    pid, tid = (int(x) for x in th.Index)
    subject, held = subject_of(loops, pid, tid, th)
    if not subject["listen_ports"]:
        return None
    probe_ev = probe_evidence(run, loops, th)
    probe_ev.update(
        judged_as="process",
        window_verdict=verdict,
        process_window_from_rel_s=round(win["start_s"] - run.start, 1),
        process_window_to_rel_s=round(win["end_s"] - run.start, 1),
        process_blocked_window_pct=pct(win["blocked"], 2),
        process_cpu_window_pct=pct(win["cpu"], 1),
        process_runq_window_pct=pct(win["runq"], 1),
    )
    if verdict == "unknown":
        chain = [Link("probe", "unknown_process", probe_ev)]
        return Finding(KIND, "not_checked", subject, cause_class="loop_unknown", chain=chain)
    span = (win["start_s"], win["end_s"])
    return _finding(run, loops, th, subject, held, probe_ev, verdict, span, "never_waits_process")


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
