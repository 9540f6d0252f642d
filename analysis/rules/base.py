"""What a rule is, and the view of a run it receives.

A rule declares its kind and the tables it reads (INPUTS). It is handed a
RunView: the run's metadata and only those tables. Reading any other table
raises UndeclaredTableError, so the declared inputs (listed in verdicts.json)
are always the true ones; tests/analysis/rules/test_inputs.py also checks that every
declared table is read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.load import Run

from ..findings import Finding


class UndeclaredTableError(LookupError):
    """A rule read a table it does not declare in its INPUTS (a bug in the rule, not bad input)."""


@dataclass
class RunView:
    """A run as one rule sees it: metadata, and the tables in `inputs`; `read` records what it read."""

    run: Run
    kind: str
    inputs: tuple[str, ...]
    read: set[str] = field(default_factory=set)
    # Tables no later step of a report reads (analysis/rules/schedule.py): a rule may let them go
    # before it ends (done_with), once it holds what it made of them.
    last_reader_of: frozenset[str] = frozenset()

    def table(self, name: str) -> pd.DataFrame:
        if name not in self.inputs:
            raise UndeclaredTableError(
                f"rule {self.kind} read table {name!r}, which it does not declare: add it to INPUTS of its "
                f"module in analysis/rules/ (declared: {', '.join(self.inputs) or 'none'})"
            )
        self.read.add(name)
        return self.run.table(name)

    def done_with(self, name: str) -> None:
        """The rule reads this table no more: let it go now if no later step reads it."""
        if name in self.last_reader_of:
            self.run.release(name)

    @property
    def metadata(self) -> dict[str, Any]:
        return self.run.metadata

    @property
    def lab(self) -> dict[str, Any] | None:
        return self.run.lab

    @property
    def path(self) -> Path:
        return self.run.path

    @property
    def start(self) -> float:
        return self.run.start

    @property
    def end(self) -> float:
        return self.run.end

    def netns_label(self, inode: int) -> str:
        return self.run.netns_label(inode)

    def probe_status(self, family: str) -> str | None:
        """The status of a probe family in this capture ("ok", "failed", ...); None if it was not run."""
        return (self.run.metadata.get("probes") or {}).get(family, {}).get("status")

    def sysctl(self, netns: int, key: str, phase: str = "start") -> str | None:
        self.table("sysctls")
        return self.run.sysctl(netns, key, phase)


@dataclass(frozen=True)
class Rule:
    """A rule: its kind, the tables it reads, and its logic over a RunView."""

    kind: str
    inputs: tuple[str, ...]
    logic: Callable[[RunView], list[Finding]]

    def view(self, run: Run | RunView, last_reader_of: frozenset[str] = frozenset()) -> RunView:
        return RunView(
            run.run if isinstance(run, RunView) else run, self.kind, self.inputs, last_reader_of=last_reader_of
        )

    def evaluate(self, run: Run | RunView, last_reader_of: frozenset[str] = frozenset()) -> list[Finding]:
        """The rule's findings for a run; it sees only its declared tables. LAST_READER_OF: the tables
        it may let go once done with them (RunView.done_with)."""
        return self.logic(self.view(run, last_reader_of))
