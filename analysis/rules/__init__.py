"""Rules: each declares the tables it reads and returns Findings for a run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..findings import Finding
from ..run import Run
from . import accept_queue, epoll, retransmits, time_wait


@dataclass(frozen=True)
class Rule:
    kind: str
    inputs: tuple[str, ...]
    evaluate: Callable[[Run], list[Finding]]


RULES: tuple[Rule, ...] = tuple(
    Rule(m.KIND, m.INPUTS, m.evaluate) for m in (accept_queue, retransmits, time_wait, epoll)
)


def evaluate_all(run: Run) -> list[Finding]:
    out: list[Finding] = []
    for rule in RULES:
        out.extend(rule.evaluate(run))
    return out
