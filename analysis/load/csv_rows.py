"""RFC 4180 rows of a CSV text, each with its physical line; the header checked against the table."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from analysis.contract import Table

from .errors import RunDataError


def parse_rows(path: Path, text: str, table: Table) -> tuple[list[list[str]], list[int], int, list[str]]:
    """Rows (header checked and dropped), the first physical line of each, the last line, notes."""
    plain = _plain_rows(path, text, table)
    if plain is not None:
        return plain
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows: list[list[str]] = []
    lines: list[int] = []
    blank: list[int] = []
    header: list[str] | None = None
    start = 1
    ncol = len(table.column_names)
    try:
        for rec in reader:
            if not rec:
                blank.append(start)
            elif header is None:
                header = rec
                _check_header(path, start, header, table)
            else:
                if len(rec) != ncol:
                    _check_width(path, start, rec, table)
                rows.append(rec)
                lines.append(start)
            start = reader.line_num + 1
    except csv.Error as e:
        raise RunDataError(f"{path}:{reader.line_num or 1}: malformed CSV: {e}") from None
    last = max(reader.line_num, 1)
    if header is None:
        raise RunDataError(f"{path}:1: empty file, expected a header row: {','.join(table.column_names)}")
    if not text.endswith("\n"):
        raise RunDataError(f"{path}:{last}: the last line has no line end: the file was cut short")
    notes = []
    if blank:
        notes.append(f"{path.name}: {len(blank)} blank line(s) skipped (line {', '.join(map(str, blank[:5]))})")
    return rows, lines, last, notes


def _plain_rows(path: Path, text: str, table: Table) -> tuple[list[list[str]], list[int], int, list[str]] | None:
    """The rows read in one go when the file is plain (no quote, no blank line, no CR, every row as
    wide as the header): each row is then one physical line. None otherwise: parse_rows reads it
    row by row and names the line of anything odd."""
    if '"' in text or "\r" in text or "\n\n" in text or not text.endswith("\n") or text.startswith("\n"):
        return None
    rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    ncol = len(table.column_names)
    if not rows or rows[0] != table.column_names or any(len(r) != ncol for r in rows):
        return None
    return rows[1:], list(range(2, len(rows) + 1)), len(rows), []


def _check_header(path: Path, line: int, header: list[str], table: Table) -> None:
    if header == table.column_names:
        return
    missing = [c for c in table.column_names if c not in header]
    extra = [c for c in header if c not in table.column_names]
    detail = []
    if missing:
        detail.append(f"missing {missing}")
    if extra:
        detail.append(f"unexpected {extra}")
    if not detail:
        detail.append("columns out of order")
    raise RunDataError(
        f"{path}:{line}: header does not match schema {table.name} v{table.version}: " + "; ".join(detail)
    )


def _check_width(path: Path, line: int, rec: list[str], table: Table) -> None:
    ncol = len(table.column_names)
    if len(rec) == ncol:
        return
    if len(rec) < ncol:
        absent = ", ".join(table.column_names[len(rec) :])
        what = f"row ends after {len(rec)} fields, expected {ncol} (no {absent})"
        col = len(rec) + 1
    else:
        what = f"row has {len(rec)} fields, expected {ncol} (an unquoted comma in a text field?)"
        col = ncol + 1
    raise RunDataError(f"{path}:{line}: column {col}: {what}")
