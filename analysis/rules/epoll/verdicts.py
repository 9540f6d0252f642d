"""The one rule for a loop that never waits, over its busy window with the scheduler's clocks:
waits, saturated, starved of CPU, asleep elsewhere (off_cpu) or unknown."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ...derived.epoll import (
    process_window_share,
)
from ..base import RunView
from .evidence import pct
from .limits import MAX_WAIT_SHARE, MIN_CPU_SHARE, MIN_SATURATED_BUSY, MIN_STARVED_RUNQ, STARVED_RUNQ_SHARE


def window_verdict(th: Any) -> str | None:
    """The one rule for a loop over its busy window, from the scheduler's clocks: `waits` (blocked
    in epoll at least MAX_WAIT_SHARE of it), else `saturated`, `cpu_starved`, `off_cpu` or
    `unknown` (the thresholds above); None without the window's figures (no threads.csv sample of
    the thread, a window under MIN_WINDOW_S, a run before contract 6)."""
    blocked, cpu, runq = (getattr(th, c, float("nan")) for c in ("blocked", "cpu_window", "runq_window"))
    if pd.isna(blocked) or pd.isna(cpu) or pd.isna(runq):
        return None
    if blocked >= MAX_WAIT_SHARE:
        return "waits"
    return shares_verdict(cpu, runq)


def shares_verdict(cpu: float, runq: float) -> str:
    """For a loop that never waits: off_cpu, cpu_starved, saturated or unknown (thresholds above)."""
    if cpu + runq < MIN_CPU_SHARE:
        return "off_cpu"
    if _starved(cpu, runq):
        return "cpu_starved"
    return "saturated" if cpu + runq >= MIN_SATURATED_BUSY else "unknown"


def _starved(cpu: float, runq: float) -> bool:
    """Waited for a CPU at least STARVED_RUNQ_SHARE of the time it was on or waiting for one."""
    return runq >= max(STARVED_RUNQ_SHARE * (cpu + runq), MIN_STARVED_RUNQ)


def process_verdict(run: RunView, probe_ev: dict[str, Any], pid: int, t0: float, t1: float) -> str:
    """A poller's process (its loop runs on other threads) over the poller's busy window: starved
    of CPU by the rule of window_verdict on the process's clocks (its threads together), else
    saturated; the figures into probe_ev."""
    threads = run.table("threads")
    cpu = process_window_share(threads, pid, t0, t1)
    runq = process_window_share(threads, pid, t0, t1, column="runq_ns")
    probe_ev["process_cpu_window_pct"] = pct(cpu, 1) if cpu is not None else None
    probe_ev["process_runq_window_pct"] = pct(runq, 1) if runq is not None else None
    if cpu is None or runq is None:
        return "saturated"
    return "cpu_starved" if _starved(cpu, runq) else "saturated"


def waits(probe_ev: dict[str, Any]) -> bool:
    """The loop blocked in epoll a fair share of its busy intervals (their median), as a healthy one does."""
    median = probe_ev.get("wait_share_median_pct")
    return median is not None and median >= 100 * MAX_WAIT_SHARE
