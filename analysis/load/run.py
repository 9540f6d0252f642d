"""A run directory: metadata.json plus the CSV tables of the data contract, each loaded and checked once.

One loader path for every file: bytes are read, decoded by the contract's
policy (invalid UTF-8 becomes the text \\xNN), parsed as RFC 4180 CSV or JSON,
typed, range-checked and cross-checked. Every problem becomes a RunDataError
that reads `file:line: column N (name): what is wrong` (or `file:line: key.path:
what is wrong` for JSON); the CLI prints it without a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.contract import ABSENT_IN_CONTRACT, LEGACY_TABLES, TABLES, TIME_SLACK_INTERVALS, TIME_SLACK_S, Table

from . import scope as scope_filter
from .errors import RunDataError
from .json_locate import json_key_line
from .memory import give_back_memory
from .metadata import read_metadata
from .run_checks import CROSS_CHECKED_TABLES, cross_checks
from .table import Loaded, load_table, rows_in_file

# Memory is given back to the system only after letting this much go (a capture's tables are a few
# MB: nothing to give back, and the trim costs more than it frees).
GIVE_BACK_BYTES = 16 << 20


@dataclass
class Run:
    """A run directory: metadata.json plus the CSV tables of the data contract."""

    path: Path
    metadata: dict[str, Any] = field(default_factory=dict)
    meta_text: str = ""

    @classmethod
    def open(cls, path: str | Path) -> Run:
        p = Path(path)
        if not p.exists():
            raise RunDataError(f"{p}: not a run directory (no such folder)")
        if not p.is_dir():
            raise RunDataError(f"{p}: not a run directory (not a folder)")
        meta, text = read_metadata(p)
        return cls(path=p, metadata=meta, meta_text=text)

    def meta_line(self, *key: Any) -> str:
        return f"{self.path / 'metadata.json'}:{json_key_line(self.meta_text, key)}"

    @property
    def complete(self) -> bool:
        return bool(self.metadata.get("complete"))

    def has(self, name: str) -> bool:
        return (self.path / TABLES[name].file).is_file()

    def table(self, name: str) -> pd.DataFrame:
        """A validated table; an empty frame with the right columns if the file may be absent.
        A table let go (release) is read again, its notes not said twice."""
        if name not in self._cache:
            # A large file is read on memory given back, and what reading and checking it used
            # beside its frame is given back after (a day's tw_sockets: 70 MB more than its frame).
            large = self.file_size(name) >= GIVE_BACK_BYTES
            if large:
                give_back_memory()
            ld = self._load(name)
            self.row_counts[name] = rows_in_file(ld)
            if "netns" in ld.df.columns:
                self.netns_seen[name] = {int(v) for v in ld.df["netns"].dropna().unique()}
            self._cache[name] = ld.df
            if large:
                give_back_memory()
        return self._cache[name]

    def _load(self, name: str) -> Loaded:
        t = TABLES[name]
        f = self.path / t.file
        if not (f.exists() or f.is_symlink()):
            self.loaded[name] = self._absent(name, t, f)
        else:
            first = name not in self.row_counts
            self.loaded[name] = self._read(name, t, f)
            if first:
                self.notes += self.loaded[name].notes
            self.loaded[name] = scope_filter.scoped(self, name, self.loaded[name])
        return self.loaded[name]

    def file_size(self, name: str) -> int:
        """The size of a table's file, 0 when it is absent: what it will cost to hold, before it is read."""
        try:
            return (self.path / TABLES[name].file).stat().st_size
        except OSError:
            return 0

    def release(self, *names: str) -> None:
        """Let go of these tables' frames, and give the memory back (a day's run holds more than a
        report should hold at once); table() reads a table again, and what the cross-checks need
        of it stays (row_counts, netns_seen)."""
        freed = 0
        for name in names:
            df = self._cache.pop(name, None)
            if df is not None:
                freed += int(df.memory_usage(deep=False).sum())
                ld = self.loaded[name]
                # (a copy: an empty slice of the frame would keep its columns alive)
                self.loaded[name] = Loaded(df.iloc[:0].copy(), [], ld.last_line, ld.notes, self.row_counts[name])
        df = None  # (the last one let go too, before the trim)
        if freed >= GIVE_BACK_BYTES:
            give_back_memory()

    def _absent(self, name: str, t: Table, f: Path) -> Loaded:
        """An empty table when the file may be absent (noting why in `missing`); a RunDataError otherwise."""
        family = t.probe_family
        probes = self.metadata["probes"]
        status = probes.get(family, {}).get("status") if family else None
        # Empty when the file is optional, its probe was not asked for or did not run
        # to the end, or the run itself stopped early.
        absent = name in ABSENT_IN_CONTRACT.get(self.metadata.get("data_contract"), ())
        if absent or t.optional or (family is not None and status != "ok"):
            if not absent and family is not None and family in probes and status != "ok":
                self.missing[name] = f"probe {family} {status}"
        elif not self.complete:
            self.missing[name] = f"run incomplete ({self.metadata.get('stop_reason')})"
        else:
            raise RunDataError(f"{f}: missing ({t.description})")
        return Loaded(t.empty(), [], 1)

    def _read(self, name: str, t: Table, f: Path) -> Loaded:
        legacy = LEGACY_TABLES.get(self.metadata.get("data_contract"), {}).get(name)
        if legacy is None:
            return load_table(f, t, self.window)
        # Written under an older contract: checked against the definition it was
        # written by, then given today's columns.
        ld = load_table(f, legacy.table, self.window)
        up = legacy.upgrade(ld.df.reset_index(drop=True))
        lines = [ld.lines[i] for i in up.index]
        return Loaded(up.reset_index(drop=True), lines, ld.last_line, ld.notes, len(ld.df))

    @property
    def scope(self) -> str:
        """all (default): every namespace the probes saw is judged; sampled: only the sampled ones."""
        return str(self.metadata.get("scope", "all"))

    @cached_property
    def out_of_scope(self) -> dict[str, int]:
        """Probe rows set aside by scope "sampled", per table."""
        return {}

    @cached_property
    def scope_pids(self) -> set[int]:
        """Processes of the sampled namespaces that the run saw (analysis/load/scope.py)."""
        return scope_filter.scope_pids(self)

    @cached_property
    def _cache(self) -> dict[str, pd.DataFrame]:
        return {}

    @cached_property
    def row_counts(self) -> dict[str, int]:
        """Rows each table's file held (before an upgrade or the scope set any aside), once read."""
        return {}

    @cached_property
    def netns_seen(self) -> dict[str, set[int]]:
        """The namespaces each table with a netns column places a row in, once read."""
        return {}

    @cached_property
    def loaded(self) -> dict[str, Loaded]:
        """Each table read so far, with the lines of its rows (for the cross-checks' messages)."""
        return {}

    @cached_property
    def notes(self) -> list[str]:
        """What was odd in the input but accepted (blank lines, bytes that are not UTF-8, ...)."""
        return []

    @cached_property
    def warnings(self) -> list[str]:
        """What the run itself says should be there and is not (a named file missing or empty):
        printed by validate as warnings, and in the report's input notes."""
        return []

    @cached_property
    def missing(self) -> dict[str, str]:
        """Tables absent from the run, and why (probe status or an incomplete run)."""
        return {}

    def validate_all(self, release: bool = False) -> dict[str, int]:
        """Load and check every table and what ties them together; returns rows per table. With
        RELEASE, each table is let go once checked (the cross-checks' own tables after them)."""
        counts = {}
        for name in TABLES:
            counts[name] = len(self.table(name))
            if release and name not in CROSS_CHECKED_TABLES:
                self.release(name)
        cross_checks(self)
        if release:
            self.release(*CROSS_CHECKED_TABLES)
        return counts

    @property
    def window(self) -> tuple[float, float]:
        """Epoch seconds rows may carry: the capture, with slack at both ends."""
        slack = max(TIME_SLACK_S, TIME_SLACK_INTERVALS * float(self.metadata["interval_s"]))
        return self.start - slack, self.end + slack

    @property
    def start(self) -> float:
        return float(self.metadata["started_epoch"])

    @property
    def end(self) -> float:
        return float(self.metadata["ended_epoch"])

    def netns_label(self, inode: int) -> str:
        for ns in self.metadata["netns"]:
            if int(ns["inode"]) == int(inode):
                return str(ns["label"])
        return str(inode)

    @property
    def lab(self) -> dict[str, Any] | None:
        return self.metadata.get("lab")

    def sysctl(self, netns: int, key: str, phase: str = "start") -> str | None:
        return self._sysctls.get((netns, key, phase))

    @cached_property
    def _sysctls(self) -> dict[tuple[int, str, str], str]:
        """(netns, key, phase) -> value, the first row of each: rules ask per object, thousands of times."""
        s = self.table("sysctls").drop_duplicates(["netns", "key", "phase"])
        rows = s[["netns", "key", "phase", "value"]].itertuples(index=False)
        return {(int(n), str(k), str(ph)): str(v) for n, k, ph, v in rows}
