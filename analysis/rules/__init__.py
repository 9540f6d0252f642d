"""Rules: each declares the tables it reads and returns Findings for a run.

A rule module holds the decision only: thresholds, status, cause class and the
evidence it cites. The numbers come from analysis.derived; kernel constants
from analysis.kernel; words from analysis.wording. Each rule sees a RunView
(analysis.rules.base) with only the tables in its INPUTS.
"""

from __future__ import annotations

from analysis.load.run import Run

from ..findings import Finding
from . import accept_queue, epoll, retransmits, time_wait
from .base import Rule, RunView, UndeclaredTableError

RULES: tuple[Rule, ...] = tuple(m.RULE for m in (accept_queue, retransmits, time_wait, epoll))

__all__ = ["RULES", "Rule", "RunView", "UndeclaredTableError", "evaluate_all"]


def evaluate_all(run: Run) -> list[Finding]:
    out: list[Finding] = []
    for rule in RULES:
        out.extend(rule.evaluate(run))
    return out
