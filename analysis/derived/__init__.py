"""Derived data: the series and aggregations computed from a run's tables.

This layer sits under the rules (analysis/rules), and beside the reports,
plots, measurements, comparisons and notebooks that show the same numbers:
they all import from here, never from a rule module, so one number is computed
one way wherever it appears.

  counters      kernel counter deltas (nstat samples): totals, windows, per sample
  connects      the lab client's connection log: latencies, errors, rates
  accept_queue  who owns a listener, the backlog it asked for, the saturation model's inputs
  time_wait     TIME_WAIT per endpoint, Little's law, observed TIME_WAIT length
  epoll         event-loop numbers per process and the lab's idle-connection sweep
  retransmits   probe retransmit counts reconciled with the kernel's
  measurements  the probes' counts reconciled with the kernel's, per family (the report's table)
  comparison    A/B comparisons over many runs: per metric bootstrap intervals, Welch test
  sweep         a sweep's points against the saturation models (analysis/models.py)

Every function takes a RunLike: a Run, or the restricted view of one a rule
receives (analysis.rules.base.RunView), which lets it read only the tables the
rule declares.
"""

from __future__ import annotations

from typing import Any, Protocol

import pandas as pd


class RunLike(Protocol):
    """What derived functions read of a run: its tables and its metadata."""

    @property
    def metadata(self) -> dict[str, Any]: ...

    @property
    def lab(self) -> dict[str, Any] | None: ...

    @property
    def start(self) -> float: ...

    @property
    def end(self) -> float: ...

    def table(self, name: str) -> pd.DataFrame: ...

    def netns_label(self, inode: int) -> str: ...

    def sysctl(self, netns: int, key: str, phase: str = "start") -> str | None: ...


def interval_s(run: RunLike) -> int:
    """The probes' print interval in seconds (metadata interval_s; 1 when absent)."""
    return int(run.metadata.get("interval_s", 1))


def processes_in_time_order(run: RunLike) -> pd.DataFrame:
    """processes.csv by time: a process is recorded again when an exec changes its name
    (contract 13), so a pid's last row names it."""
    return run.table("processes").sort_values("time_s", kind="stable")
