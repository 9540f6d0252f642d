"""The loader's one exception, and how a list of problems becomes one error naming file, line and column."""

from __future__ import annotations

from pathlib import Path

from analysis.contract import Table

MAX_ERRORS = 5


class RunDataError(Exception):
    """Bad input: a missing file, a malformed row, a contract mismatch."""


def cell_error(path: Path, line: int, table: Table, col: str, msg: str) -> str:
    """`file:line: column N (name): what`, N 1-based."""
    return f"{path}:{line}: column {table.column_names.index(col) + 1} ({col}): {msg}"


def raise_errors(errors: list[str]) -> None:
    """A RunDataError with the first MAX_ERRORS problems (and how many more), if there are any."""
    if errors:
        more = len(errors) - MAX_ERRORS
        raise RunDataError("\n".join(errors[:MAX_ERRORS]) + (f"\n... and {more} more" if more > 0 else ""))
