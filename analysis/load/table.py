"""One CSV file through the whole path: read, decoded, parsed, typed and checked against its table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis.contract import Table

from .checks import Window, check_table
from .coerce import typed
from .csv_fast import fast_table
from .csv_rows import parse_rows
from .decode import decode, read_bytes


@dataclass
class Loaded:
    """A validated table, the physical line of each row and what was odd but accepted."""

    df: pd.DataFrame
    lines: Sequence[int]
    last_line: int
    notes: list[str] = field(default_factory=list)
    rows_in_file: int | None = None  # when an upgrade from an older contract dropped rows


def rows_in_file(ld: Loaded) -> int:
    """Rows the file held, before an upgrade or the scope set any aside."""
    return len(ld.df) if ld.rows_in_file is None else ld.rows_in_file


def load_table(path: Path, table: Table, window: Window | None = None) -> Loaded:
    """A file read, decoded, parsed, typed and checked against its table's contract."""
    fast = fast_table(path, table)
    if fast is not None:
        # A plain file: row i is on line i + 2 (the checks below name lines as ever).
        df, n = fast
        lines = range(2, n + 2)
        return Loaded(check_table(path, table, df, lines, window), lines, n + 1)
    text, bad_line = decode(read_bytes(path))
    rows, lines, last, notes = parse_rows(path, text, table)
    if bad_line is not None:
        notes.append(f"{path.name}: bytes that are not UTF-8 (first on line {bad_line}) read as \\xNN")
    df = check_table(path, table, typed(path, table, rows, lines, text), lines, window)
    return Loaded(df, lines, last, notes)


def read_table(path: Path, table: Table) -> pd.DataFrame:
    return load_table(path, table).df
