"""The evidence of an event-loop finding: the probe's numbers over the loop's intervals and busy
window, its process's other threads, the counter, the cause and how to verify a fix."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ...derived.epoll import (
    loop_numbers_of,
)
from ...findings import Link
from ..base import RunView
from .limits import MAX_WAIT_SHARE, MIN_BUSY_INTERVALS
from .loops import Loops


def wrk_latency(run: RunView) -> dict[str, Any]:
    lab = run.lab or {}
    phases = lab.get("phases") or []
    return {"wrk_requests_per_s": [p.get("wrk_requests_per_s") for p in phases]} if phases else {}


def window(run: RunView, t0: float, t1: float) -> dict[str, float]:
    return {"start_s": t0, "end_s": t1, "start_rel_s": round(t0 - run.start, 1), "end_rel_s": round(t1 - run.start, 1)}


def pct(x: float, digits: int) -> float | None:
    return None if pd.isna(x) else round(100 * float(x), digits)


def probe_evidence(run: RunView, loops: Loops, th: Any) -> dict[str, Any]:
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
        "wait_share_busy_pct": pct(th.wait_busy, 2),
        "wait_share_median_pct": pct(th.wait_median, 1),
        "cpu_share_busy_pct": pct(th.cpu_overall, 1),
        "cpu_share_from": th.cpu_from,
        "runq_share_pct": pct(th.runq, 1),
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
        "window_blocked_pct": pct(th.blocked, 2),
        "window_cpu_pct": pct(cpu, 1),
        "window_runq_pct": pct(th.runq_window, 1),
        "window_from_rel_s": round(float(th.cpu_from_s) - run.start, 1),
        "window_to_rel_s": round(float(th.cpu_to_s) - run.start, 1),
        "window_from_s": float(th.cpu_from_s),
        "window_to_s": float(th.cpu_to_s),
    }


def other_threads(loops: Loops, pid: int, tid: int) -> dict[str, Any]:
    """The process's other loops: how many there are and whether they wait (they get no finding)."""
    t = loops.threads.loc[pid]
    others = t[(t.index != tid) & (t["intervals_with_events"] > 0)]
    waits = sorted(float(w) for w in others["wait_median"])
    return {
        "other_threads_with_events": len(others),
        "other_threads_saturated": int((others["longest_never_waiting_run"] >= MIN_BUSY_INTERVALS).sum()),
        "other_threads_blocked_median_pct": round(100 * waits[len(waits) // 2], 1) if waits else None,
    }


def counter_evidence(run: RunView, subject: dict[str, Any], held: pd.DataFrame) -> dict[str, Any]:
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


def cause_evidence(run: RunView, subject: dict[str, Any]) -> dict[str, Any]:
    """What the lab's server was told to do, when this loop is that server's."""
    server = (run.lab or {}).get("server") or {}
    mine = server.get("comm") in (subject["comm"], subject["process"])
    return {
        "gomaxprocs": server.get("gomaxprocs") if mine else None,
        "work_per_request": server.get("work") if mine else None,
    }


def verification(run: RunView) -> Link:
    lab = run.lab or {}
    ev = {
        "command": "make lab LAB=epoll VARIANT=idle" if lab.get("lab") == "epoll" else "make capture DURATION=60",
        "expect_wait_share_pct_above": 100 * MAX_WAIT_SHARE,
    }
    return Link("verification", "rerun", ev)
