"""Rules: each declares the tables it reads and returns Findings for a run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..findings import Finding
from ..run import Run
from . import accept_queue


@dataclass(frozen=True)
class Rule:
    kind: str
    inputs: tuple[str, ...]
    evaluate: Callable[[Run], list[Finding]]


RULES: tuple[Rule, ...] = (Rule(accept_queue.KIND, accept_queue.INPUTS, accept_queue.evaluate),)


def evaluate_all(run: Run) -> list[Finding]:
    out: list[Finding] = []
    for rule in RULES:
        out.extend(rule.evaluate(run))
    return out
