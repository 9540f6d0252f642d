"""Rules: each declares the tables it reads and returns Findings for a run.

A rule module holds the decision only: thresholds, status, cause class and the
evidence it cites. The numbers come from analysis.derived; kernel constants
from analysis.kernel; the words for its findings in analysis/wording/<family>.py. Each rule sees a RunView
(analysis.rules.base) with only the tables in its INPUTS.
"""

from __future__ import annotations

from importlib import import_module

from analysis.derived.owners import name_owners
from analysis.families import FAMILIES
from analysis.load import Run

from ..findings import Finding
from .base import Rule, RunView, UndeclaredTableError

# One rule per family of probes/families.conf, in its order.
RULES: tuple[Rule, ...] = tuple(import_module(f.rule_module).RULE for f in FAMILIES.values())

__all__ = ["RULES", "Rule", "RunView", "UndeclaredTableError", "evaluate_all"]


def evaluate_all(run: Run) -> list[Finding]:
    """Every rule's findings, each subject with its owner (unit, container, pod) named. (A report
    runs them through analysis/rules/schedule.py, which lets each table go after its last reader.)"""
    out: list[Finding] = []
    for rule in RULES:
        out.extend(rule.evaluate(run))
    return name_owners(run, out)
