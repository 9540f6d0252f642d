"""The event-loop rule's finding kind and limits: what a busy interval is, and the window
verdict's thresholds (their values from analysis/contract/verdict_thresholds.py)."""

from __future__ import annotations

from ...contract.verdict_thresholds import (
    LOOP_MAX_BLOCKED,
    LOOP_MIN_BUSY,
    LOOP_MIN_SATURATED_BUSY,
    LOOP_MIN_STARVED_RUNQ,
    LOOP_STARVED_RUNQ_SHARE,
)

KIND = "event_loop_saturation"
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
