"""The report's rules and measurements run in an order that lets a day's tables go early.

Each rule and each measurement declares the tables it reads. Run in the registry's order, a large
table read by a first and a last step is held through every step between them (a day's
counters.csv, 0.97 M rows, from the accept-queue rule to the measurements, beside TIME_WAIT's and
the event loop's tables). So the steps that read one large table run one after another, and each
table is let go after the last step that reads it; the findings and measurements come out in the
registry's order as ever (no step depends on another's result: each reads the run alone). What
a step reads changes what it costs, never what it finds: a table let go is read again if asked for.
"""

from __future__ import annotations

from typing import Any

from analysis.derived.measurements import MEASUREMENTS, Measurement
from analysis.derived.owners import name_owners
from analysis.load import Run

from ..findings import Finding
from . import RULES
from .base import Rule

Step = Rule | Measurement


def judge(run: Run) -> tuple[list[Finding], dict[str, Any]]:
    """Every rule's findings (each subject with its owner named) and the measurements, as
    evaluate_all and all_measurements give them, each table let go after its last reader (the
    measurements that apply to the run only)."""
    steps: list[Step] = [*RULES, *(m for m in MEASUREMENTS if m.applies(run))]
    order = _grouped(run, steps)
    results: dict[int, Any] = {}
    for k, i in enumerate(order):
        step = steps[i]
        later = {name for j in order[k + 1 :] for name in steps[j].inputs}
        last = frozenset(name for name in step.inputs if name not in later)
        results[i] = step.evaluate(run, last) if isinstance(step, Rule) else step.measure(run)
        run.release(*last)
    findings = [f for i in range(len(RULES)) for f in results[i]]
    measured: dict[str, Any] = {}
    for i in range(len(RULES), len(steps)):
        measured.update(results[i])
    return name_owners(run, findings), measured


def _grouped(run: Run, steps: list[Step]) -> list[int]:
    """The steps' indexes: those whose largest input is one table together, in the registry's
    order; the groups one after another, next the one that reads most of what is held (tables an
    earlier group read and a later one reads too), so that it is let go sooner."""
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(steps):
        groups.setdefault(max(s.inputs, key=lambda name: run.file_size(name), default=""), []).append(i)
    order: list[int] = []
    held: set[str] = set()
    while groups:
        # max() keeps the first of equals: the registry's order.
        key = max(groups, key=lambda k: sum(run.file_size(n) for n in held & _inputs(steps, groups[k])))
        order += groups.pop(key)
        later = {name for g in groups.values() for name in _inputs(steps, g)}
        held = (held | _inputs(steps, order)) & later
    return order


def _inputs(steps: list[Step], indexes: list[int]) -> set[str]:
    return {name for i in indexes for name in steps[i].inputs}
