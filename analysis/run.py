"""Load a run directory and check it against the data contract.

Every problem becomes a RunDataError that names the file and, where it can,
the line: the CLI prints it without a traceback.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
import pandera.pandas as pa

from .schemas import CONTRACT_VERSION, TABLES, Table

REQUIRED_METADATA = ("data_contract", "started_epoch", "ended_epoch", "complete", "netns", "probes")


class RunDataError(Exception):
    """Bad input: a missing file, a malformed row, a contract mismatch."""


def read_table(path: Path, table: Table) -> pd.DataFrame:
    try:
        header = path.open(encoding="utf-8").readline().rstrip("\n").split(",")
    except OSError as e:
        raise RunDataError(f"{path}: cannot read: {e.strerror}") from None
    if header == [""]:
        raise RunDataError(f"{path}:1: empty file, expected a header row: {','.join(table.column_names)}")
    if header != table.column_names:
        missing = [c for c in table.column_names if c not in header]
        extra = [c for c in header if c not in table.column_names]
        detail = []
        if missing:
            detail.append(f"missing {missing}")
        if extra:
            detail.append(f"unexpected {extra}")
        if not detail:
            detail.append("columns out of order")
        raise RunDataError(f"{path}:1: header does not match schema {table.name} v{table.version}: {'; '.join(detail)}")
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except pd.errors.ParserError as e:
        m = re.search(r"line (\d+)", str(e))
        where = f":{m.group(1)}" if m else ""
        raise RunDataError(f"{path}{where}: malformed row ({e})") from None
    try:
        return table.schema().validate(df, lazy=True)
    except pa.errors.SchemaErrors as e:
        fc = e.failure_cases
        rows = fc[fc["index"].notna()].head(5)
        if rows.empty:
            msg = "; ".join(str(x) for x in fc["check"].head(3))
            raise RunDataError(f"{path}: does not match schema {table.name} v{table.version}: {msg}") from None
        parts = [
            f"{path}:{int(r['index']) + 2}: column {r['column']}: {r['failure_case']!r} fails {r['check']}"
            for _, r in rows.iterrows()
        ]
        more = len(fc) - len(rows)
        raise RunDataError("\n".join(parts) + (f"\n... and {more} more" if more > 0 else "")) from None


def read_json(path: Path, hint: str) -> Any:
    """A JSON file the analysis needs, or a RunDataError naming the file (and line) and what it should be."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunDataError(f"{path}: missing; {hint}") from None
    except json.JSONDecodeError as e:
        raise RunDataError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None


@dataclass
class Run:
    """A run directory: metadata.json plus the CSV tables of the data contract."""

    path: Path
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls, path: str | Path) -> Run:
        p = Path(path)
        if not p.is_dir():
            raise RunDataError(f"{p}: not a run directory (no such folder)")
        meta_path = p / "metadata.json"
        meta = read_json(meta_path, f"is {p} a run directory written by scripts/capture?")
        missing = [k for k in REQUIRED_METADATA if k not in meta]
        if missing:
            raise RunDataError(f"{meta_path}: missing keys {missing}")
        if meta["data_contract"] != CONTRACT_VERSION:
            raise RunDataError(
                f"{meta_path}: data contract v{meta['data_contract']}, this analysis reads v{CONTRACT_VERSION}"
            )
        return cls(path=p, metadata=meta)

    def has(self, name: str) -> bool:
        return (self.path / TABLES[name].file).is_file()

    def table(self, name: str) -> pd.DataFrame:
        """A validated table; an empty frame with the right columns if an optional file is absent."""
        if name not in self._cache:
            t = TABLES[name]
            f = self.path / t.file
            if not f.is_file():
                probe_family = t.writer.removeprefix("probes/").removesuffix(".bt") if t.probe else None
                probes = self.metadata["probes"]
                # Empty when the file is optional, or its probe was not asked for or could not run.
                skipped = probe_family is not None and probes.get(probe_family, {}).get("status") != "ok"
                if t.optional or skipped:
                    self._cache[name] = t.schema().coerce_dtype(pd.DataFrame(columns=t.column_names))
                else:
                    raise RunDataError(f"{f}: missing ({t.description})")
            else:
                self._cache[name] = read_table(f, t)
        return self._cache[name]

    @cached_property
    def _cache(self) -> dict[str, pd.DataFrame]:
        return {}

    def validate_all(self) -> dict[str, int]:
        """Load every table; returns rows per table. Raises on the first bad file."""
        return {name: len(self.table(name)) for name in TABLES}

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

    def counter_deltas(self, netns: int, names: list[str]) -> pd.DataFrame:
        """Per-sample deltas of counters (columns) in one namespace; 0 where unchanged."""
        c = self.table("counters")
        c = c[(c["netns"] == netns) & c["counter"].isin(names)]
        times = sorted(self.table("counters").query("netns == @netns")["time_s"].unique())
        wide = c.pivot_table(index="time_s", columns="counter", values="delta", aggfunc="sum")
        wide = wide.reindex(index=times, columns=names).fillna(0).astype("int64")
        wide.index.name = "time_s"
        return wide

    def sysctl(self, netns: int, key: str, phase: str = "start") -> str | None:
        s = self.table("sysctls")
        hit = s[(s["netns"] == netns) & (s["key"] == key) & (s["phase"] == phase)]
        return None if hit.empty else str(hit["value"].iloc[0])
