"""Wording of event_loop_saturation (rule: analysis/rules/epoll/).

The templates of each link of its evidence chain, the phrases they need (how
the probe counted, the process's other threads, wrk's rate) and the finding's
title line, which names a thread rather than an address.
"""

from __future__ import annotations

from typing import Any

from analysis.contract.verdict_thresholds import LOOP_MIN_SATURATED_BUSY, LOOP_STARVED_RUNQ_SHARE
from analysis.findings import Finding, Link

from .base import Wording, by_step
from .numbers import is_missing, join_words, number
from .owners import owner_first
from .servers import server_knob
from .template import Opt, Part

KIND = "event_loop_saturation"
# The rule's two bars, as its thresholds hold them.
SATURATED_BUSY_PCT = f"{100 * LOOP_MIN_SATURATED_BUSY.value:.0f} %"
STARVED_RUNQ_PCT = f"{100 * LOOP_STARVED_RUNQ_SHARE.value:.0f} %"
TITLE = "Event loop saturated"
CAUSES = {
    "loop_saturated": "the loop always finds work ready",
    "cpu_starved": "starved of CPU: its ready work waits for a CPU, not for the loop (the machine's CPU)",
    "loop_unknown": "unknown: it neither waits in epoll nor is it on a CPU or waiting for one most of the time",
}
WINDOW = Opt(
    " Over its busy window ({window_from_rel_s} s to {window_to_rel_s} s, the scheduler's clocks) it was blocked "
    "in epoll {window_blocked_pct} %, on a CPU {window_cpu_pct} % and waiting for one {window_runq_pct} %."
)

TEMPLATES: dict[tuple[str, str], tuple[Part, ...]] = {
    ("symptom", "client"): (
        Opt(
            "Lab client: wrk served {wrk_text}.",
            "No client-side view in this run; the probe's numbers are the symptom.",
        ),
    ),
    ("symptom", "not_captured"): ("No client-side view in this run; the probe's numbers are the symptom.",),
    ("counter", "no_kernel_counter"): (
        "Kernel counter: none exists for a saturated loop",
        Opt("; its listeners' Recv-Q peaked at {listener_recv_q_max}", "; its listeners' Recv-Q was not sampled"),
        Opt("; this thread accepted on port {thread_accepts_on}"),
        ".",
    ),
    ("probe", "never_waits"): (
        "Probe: in {intervals_never_waiting} of {intervals_with_events} busy intervals the loop spent under 5 % of "
        "the time blocked in epoll",
        Opt(" (mean {wait_share_busy_pct} %)"),
        Opt(" while on the CPU {cpu_share_busy_pct} % of the time ({cpu_share_from})"),
        Opt(" and waiting for a CPU {runq_share_pct} %"),
        Opt("; {calls_per_s} calls/s"),
        Opt(", {nonblocking_share_pct} % non-blocking polls"),
        Opt(", {events_per_call} events per call"),
        Opt(", {full_batches} full batches"),
        ".",
        Opt(
            " Its busy window ran from {window_from_rel_s} s to {window_to_rel_s} s; it was blocked in epoll "
            "{window_blocked_pct} % of it."
        ),
        Opt(
            " This thread polls for its process's loop (a runtime such as Go's runs the loop's work on other "
            "threads, and no thread of the process waited then): the process was on a CPU "
            "{process_cpu_window_pct} % of that window, all its threads together."
        ),
        Opt(" Its threads waited for a CPU {process_runq_window_pct} % of it."),
        Opt("{sample_text}"),
        Opt("{others_text}"),
    ),
    ("probe", "never_waits_process"): (
        "Probe: no thread of its process blocked in epoll over its busy window ({process_window_from_rel_s} s to "
        "{process_window_to_rel_s} s: {process_blocked_window_pct} %): its threads take turns at the loop (a runtime "
        "such as Go's polls from whichever thread runs out of work, with edge-triggered events",
        Opt(": {empty_share_pct} % of this thread's polls came back empty"),
        "). The process was on a CPU {process_cpu_window_pct} % of that window and its threads waited for one "
        "{process_runq_window_pct} % (the scheduler's clocks, all its threads together).",
        Opt(" This thread, the one with the most events: {calls_per_s} calls/s"),
        Opt(", {nonblocking_share_pct} % non-blocking polls"),
        Opt(", {events_per_call} events per call"),
        ".",
        Opt("{sample_text}"),
    ),
    ("probe", "unknown_process"): (
        "Probe: no thread of its process blocked in epoll over its busy window ({process_window_from_rel_s} s to "
        "{process_window_to_rel_s} s: {process_blocked_window_pct} %); the process was on a CPU "
        "{process_cpu_window_pct} % and its threads waited for one {process_runq_window_pct} %: neither saturated "
        "nor starved of CPU by the rule's thresholds; where the rest went needs an off-CPU profile of the process.",
    ),
    ("probe", "waits"): (
        "Probe: the loop waits",
        Opt(" (median {wait_share_median_pct} % of each busy interval blocked in epoll)"),
        ".",
        WINDOW,
    ),
    ("probe", "busy_briefly"): (
        "Probe: it went without waiting in epoll for at most {longest_never_waiting_run} interval(s) in a row, "
        "fewer than 3: busy for moments, not saturated",
        Opt(" (median {wait_share_median_pct} % of each busy interval blocked)"),
        ".",
        WINDOW,
    ),
    ("probe", "off_cpu"): (
        "Probe: it seldom blocked in epoll, but it was not busy either: over its busy window ({window_from_rel_s} s to "
        "{window_to_rel_s} s) on a CPU {window_cpu_pct} % and waiting for one {window_runq_pct} %, blocked in epoll "
        "{window_blocked_pct} %. It sleeps elsewhere (a lock, a timer, another call): not a loop saturated by its "
        "work.",
    ),
    ("probe", "unknown"): (
        "Probe: over its busy window ({window_from_rel_s} s to {window_to_rel_s} s) it was blocked in epoll "
        "{window_blocked_pct} %, on a CPU {window_cpu_pct} % and waiting for one {window_runq_pct} % (the scheduler's "
        "clocks): neither saturated (on or waiting for a CPU " + SATURATED_BUSY_PCT + " or more of it) nor starved of "
        "CPU (waiting for one " + STARVED_RUNQ_PCT + " or more of that time); "
        "where the rest went (sleeping outside epoll: a lock, a disk, another call) needs an off-CPU profile of "
        "that thread.",
        Opt("{others_text}"),
    ),
    ("probe", "not_sampled"): (
        "Probe: it went {longest_never_waiting_run} intervals in a row without waiting in epoll, finding events "
        "each time; its process holds no listener in a namespace this capture sampled, so whether it serves "
        "clients (a listener elsewhere) or is a client itself was not checked. Run `{command}`.",
    ),
    ("cause", "cpu_starved"): (
        "Cause: the machine's CPU: the loop found work at every call, and of the time it was ready to run it spent "
        + STARVED_RUNQ_PCT
        + " or more waiting for a CPU (the run queue), not blocked or asleep",
        Opt(" (GOMAXPROCS={gomaxprocs}, {work_per_request} of CPU per request)"),
        ". Whatever its own load, other work on its CPUs holds it back.",
    ),
    ("fix", "cpu_starved"): (
        "Fix: give the loop a CPU: what else runs on its CPUs (the run queue: top, pidstat, perf sched), a CPU "
        "quota on its cgroup (cpu.max, throttled time), its CPU affinity. More loop threads do not help while the "
        "CPUs are taken.",
    ),
    ("cause", "loop_saturated"): (
        "Cause: more ready work than the loop's threads can run",
        Opt(" (GOMAXPROCS={gomaxprocs}, {work_per_request} of CPU per request)"),
        ": events wait in socket buffers, not in epoll.",
    ),
    ("fix", "loop_saturated"): (
        "Fix: more loop threads or processes (GOMAXPROCS, nginx worker_processes, Redis io-threads, "
        "SO_REUSEPORT), move CPU work off the loop, or shed load. epoll itself is not the bottleneck.",
        Opt(" For {server}: {server_knob}."),
    ),
    ("verification", "rerun"): (
        "Verify: `{command}`: the loop should spend ",
        Opt("over {expect_wait_share_pct_above} % of idle time", "most of its idle time"),
        " blocked.",
    ),
}


def _symptom(link: Link, ev: dict[str, Any]) -> None:
    wrk = [x for x in (ev.get("wrk_requests_per_s") or []) if not is_missing(x)]
    if wrk:
        ev["wrk_text"] = (
            f"{number(wrk[0])} requests/s"
            if len(wrk) == 1
            else f"{join_words([number(x) for x in wrk])} requests/s in its {len(wrk)} phases"
        )


def _probe(link: Link, ev: dict[str, Any]) -> None:
    ev["sample_text"] = (
        " These are the thread's own numbers, estimated from a 1-in-8 sample of its epoll calls."
        if ev.get("estimated_from_sample") and ev.get("per_thread")
        else " This capture counted per process (data contract 2): the numbers are the process's."
        if ev.get("per_thread") is False
        else ""
    )
    n, sat = ev.get("other_threads_with_events"), ev.get("other_threads_saturated")
    if not is_missing(n) and n > 0:
        med = ev.get("other_threads_blocked_median_pct")
        blocked = f" (blocked a median {number(med)} % of each interval)" if not is_missing(med) else ""
        ev["others_text"] = f" Its process has {number(n)} other thread(s) with epoll events" + (
            f"{blocked}; none is at fault on its own."
            if not sat
            else f"{blocked}; {number(sat)} of them also went 3 intervals in a row without waiting."
        )
    also = sorted(ev.get("folded_tids") or [])
    if also:
        ev["others_text"] = ev.get("others_text", "") + (
            f" Thread(s) {join_words([str(t) for t in also])} of the same process also never waited, with"
            " little CPU of their own: they poll for this process's loop (a runtime such as Go's moves"
            " one loop between threads), so they are counted in this finding, not in one of their own."
        )


def _fix(link: Link, ev: dict[str, Any]) -> None:
    knob = server_knob(ev.get("server"), link.key)
    if knob:
        ev["server_knob"] = knob


def headline(f: Finding, status: str) -> str:
    """The title line: the thread (or process), its pid and listening ports, and the status."""
    s = f.subject
    ports = [number(p) for p in s.get("listen_ports") or []]
    pid, tid, process = s.get("pid"), s.get("tid"), s.get("process")
    thread = not is_missing(tid) and not is_missing(pid) and tid != pid
    where = ", ".join(
        x
        for x in (
            f"pid {pid}" if not is_missing(pid) else "",
            ("port " if len(ports) == 1 else "ports ") + join_words(ports) if ports else "",
        )
        if x
    )
    who = s.get("comm") or "a process"
    if thread:
        who = f"thread {s.get('comm') or 'unnamed'} (tid {tid}) of {process or 'its process'}"
    cause = f" — {CAUSES[f.cause_class]}" if f.cause_class in CAUSES and f.cause_class != "loop_saturated" else ""
    return f"{TITLE}: {owner_first(s, who)}" + (f" ({where})" if where else "") + f": {status}{cause}"


WORDING = Wording(
    kind=KIND,
    title=TITLE,
    causes=CAUSES,
    templates=TEMPLATES,
    unseen="each thread's time blocked in epoll_wait and events per wakeup",
    derive=by_step({"symptom": _symptom, "probe": _probe, "fix": _fix}),
    headline=headline,
)
