"""Text cells to typed columns (Int64, float64, string), with an error per cell that is not of its type."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.contract import Col, Table

from .errors import MAX_ERRORS, cell_error, raise_errors

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_INT_RE = re.compile(r"[+-]?[0-9]+")
_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# The characters a whole column may hold for its cells to be read at once with int() or float()
# (an hour's capture holds millions of cells): on these alone int() and float() accept exactly
# what _INT_RE and _FLOAT_RE do. Signs, other characters, more than 18 digits (int64) or a
# float too large go cell by cell, which names the bad cells.
_DIGITS = frozenset("0123456789")
_FLOAT_CHARS = frozenset("0123456789.+-eE")


def typed(path: Path, table: Table, rows: list[list[str]], lines: list[int], text: str) -> pd.DataFrame:
    """The rows as a frame of the table's column types; a RunDataError listing the cells that are not."""
    errors: list[str] = []
    data: dict[str, Any] = {}
    for i, c in enumerate(table.columns):
        raw = [r[i] for r in rows]
        if c.dtype == "string":
            data[c.name] = _text_column(path, table, c, raw, lines, text, errors)
            continue
        fast = _whole_number_column(c, raw)
        data[c.name] = fast if fast is not None else _number_column(path, table, c, raw, lines, errors)
        if len(errors) > MAX_ERRORS:
            break
    raise_errors(errors)
    return pd.DataFrame(data, columns=table.column_names)


def _text_column(
    path: Path, table: Table, c: Col, raw: list[str], lines: list[int], text: str, errors: list[str]
) -> Any:
    # Each check looks at the cells only when the file could hold what it looks for (one search
    # of the text or the column): an hour's capture holds millions of cells.
    has_empty = "" in raw
    vals: list[Any] = [v if v != "" else None for v in raw] if has_empty else raw
    if has_empty and not c.nullable:
        errors += [cell_error(path, lines[k], table, c.name, "empty") for k, v in enumerate(raw) if v == ""]
    if "\0" in text:
        errors += [
            cell_error(path, lines[k], table, c.name, "holds a NUL byte") for k, v in enumerate(raw) if "\0" in v
        ]
    if '"' in text:
        errors += [
            cell_error(path, lines[k], table, c.name, f"{v!r}: a quote in a field that is not quoted (RFC 4180)")
            for k, v in enumerate(raw)
            if '"' in v and '"' + v.replace('"', '""') + '"' not in text
        ]
    return pd.array(vals, dtype="string")


def _whole_number_column(c: Col, raw: list[str]) -> Any | None:
    """The column read at once when every cell is well formed; None to read it cell by cell."""
    has_empty = "" in raw
    if not raw or (has_empty and not c.nullable):
        return None
    cells = set("".join(raw))
    try:
        if c.dtype == "Int64":
            if not cells <= _DIGITS or max(map(len, raw)) > 18:
                return None
            return pd.array([int(v) if v else None for v in raw] if has_empty else list(map(int, raw)), dtype="Int64")
        if not cells <= _FLOAT_CHARS:
            return None
        values = np.array([float(v) if v else math.nan for v in raw] if has_empty else list(map(float, raw)))
    except ValueError:
        return None
    return values if not np.isinf(values).any() else None


def _number_column(path: Path, table: Table, c: Col, raw: list[str], lines: list[int], errors: list[str]) -> Any:
    """Stops after a cell once more than MAX_ERRORS errors are known (a cell that is not an integer
    does not stop it)."""
    out: list[Any] = []
    for k, v in enumerate(raw):
        if v == "":
            if not c.nullable:
                errors.append(cell_error(path, lines[k], table, c.name, "empty, expected a number"))
            out.append(None)
        elif c.dtype == "Int64":
            if not _INT_RE.fullmatch(v):
                errors.append(cell_error(path, lines[k], table, c.name, f"{v!r} is not an integer"))
                out.append(None)
                continue
            n = int(v)
            if not INT64_MIN <= n <= INT64_MAX:
                errors.append(cell_error(path, lines[k], table, c.name, f"{v} does not fit in int64"))
                n = 0
            out.append(n)
        else:
            out.append(_float_cell(path, table, c, v, lines[k], errors))
        if len(errors) > MAX_ERRORS:
            break
    if c.dtype == "Int64":
        return pd.array(out, dtype="Int64")
    return np.array([np.nan if x is None else x for x in out], dtype="float64")


def _float_cell(path: Path, table: Table, c: Col, v: str, line: int, errors: list[str]) -> float | None:
    x = float(v) if _FLOAT_RE.fullmatch(v) else None
    if x is None or not math.isfinite(x):
        special = v.lower().lstrip("+-") in ("nan", "inf", "infinity")
        what = "is not a finite number" if x is not None or special else "is not a number"
        errors.append(cell_error(path, line, table, c.name, f"{v!r} {what}"))
        return None
    return x
