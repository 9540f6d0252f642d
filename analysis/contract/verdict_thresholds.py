"""The thresholds a verdict turns on where a reader of the tables needs them stated: the one rule
for an event loop that never waits in epoll (analysis/rules/epoll/verdicts.py judges with these values;
docs/data-contract.md states them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Threshold:
    name: str
    value: float
    meaning: str


# Over a loop thread's busy window: from the end of its first ep_loop interval with events to the
# start of its last, with threads.csv's scheduler clocks at its first and last sample in it.
LOOP_WINDOW_MIN_S = Threshold(
    "loop_window_min_s",
    2.0,
    "a busy window (and the span of its two clock samples) at least this long, else no window verdict",
)
LOOP_MAX_BLOCKED = Threshold(
    "loop_max_blocked",
    0.05,
    "blocked in epoll under this share of the window: the loop never waits; at or above: it waits",
)
LOOP_STARVED_RUNQ_SHARE = Threshold(
    "loop_starved_runq_share",
    0.25,
    "never waits, and waiting for a CPU at least this share of the time it was on or waiting for one: starved of "
    "CPU (the machine's CPU, not its own work)",
)
LOOP_MIN_STARVED_RUNQ = Threshold(
    "loop_min_starved_runq", 0.02, "...and waiting for a CPU at least this share of the window"
)
LOOP_MIN_SATURATED_BUSY = Threshold(
    "loop_min_saturated_busy",
    0.8,
    "never waits, not starved, and on or waiting for a CPU at least this share of the window: saturated by its own "
    "work",
)
LOOP_MIN_BUSY = Threshold(
    "loop_min_busy",
    0.5,
    "never waits, and on or waiting for a CPU together under this share: it sleeps elsewhere (a lock, a timer, "
    "another call), not a saturated loop; neither this nor starved nor saturated: unknown (not checked)",
)
LOOP_THRESHOLDS = (
    LOOP_WINDOW_MIN_S,
    LOOP_MAX_BLOCKED,
    LOOP_MIN_BUSY,
    LOOP_STARVED_RUNQ_SHARE,
    LOOP_MIN_STARVED_RUNQ,
    LOOP_MIN_SATURATED_BUSY,
)
