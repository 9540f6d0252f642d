"""A typed table against its contract: the columns' checks, the capture window, duplicate keys, and the
checks one table has of its own (content_checks)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pandera.pandas as pa

from analysis.contract import Table

from .content_checks import counter_errors, sysctl_errors
from .errors import MAX_ERRORS, RunDataError, cell_error, raise_errors

Window = tuple[float, float]


def check_table(
    path: Path, table: Table, df: pd.DataFrame, lines: Sequence[int], window: Window | None
) -> pd.DataFrame:
    """The table once every check has passed; otherwise a RunDataError naming line and column."""
    # The schema's checks, evaluated column by column (pandera's own validation costs ~3 ms a
    # column, which a run of 14 tables and the bad-input corpus feel); pandera for anything else.
    errors: list[str] = []
    for c in table.columns:
        for check in c.checks:
            ok = _valid(check, df[c.name])
            if ok is None:
                return _pandera_checks(path, table, df, lines, window)
            for i in np.flatnonzero(~ok)[:MAX_ERRORS]:
                errors.append(
                    cell_error(path, lines[i], table, c.name, f"{_plain(df[c.name].iat[i])!r} fails {check.error}")
                )
    raise_errors(errors)
    return _more_checks(path, table, df, lines, window)


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _valid(check: pa.Check, s: pd.Series) -> np.ndarray | None:
    """Where a column passes one of the schema's checks (missing values pass), or None for a check
    this fast path does not know (pandera then runs the whole schema)."""
    st = check.statistics
    if check.name == "greater_than_or_equal_to":
        ok = s >= st["min_value"]
    elif check.name == "greater_than":
        ok = s > st["min_value"]
    elif check.name == "in_range":
        lo_ok = s >= st["min_value"] if st.get("include_min", True) else s > st["min_value"]
        hi_ok = s <= st["max_value"] if st.get("include_max", True) else s < st["max_value"]
        ok = lo_ok & hi_ok
    elif check.name == "isin":
        ok = s.isin(st["allowed_values"])
    else:
        return None
    return (ok.fillna(True) if hasattr(ok, "fillna") else ok).to_numpy(dtype=bool) | s.isna().to_numpy()


def _pandera_checks(
    path: Path, table: Table, df: pd.DataFrame, lines: Sequence[int], window: Window | None
) -> pd.DataFrame:
    try:
        df = table.schema().validate(df, lazy=True, inplace=True)
    except pa.errors.SchemaErrors as e:
        fc = e.failure_cases
        rows = fc[fc["index"].notna()].head(MAX_ERRORS)
        if rows.empty:
            msg = "; ".join(str(x) for x in fc["check"].head(3))
            raise RunDataError(f"{path}:1: does not match schema {table.name} v{table.version}: {msg}") from None
        parts = [
            cell_error(
                path, lines[int(r["index"])], table, str(r["column"]), f"{r['failure_case']!r} fails {r['check']}"
            )
            for _, r in rows.iterrows()
        ]
        more = len(fc) - len(rows)
        raise RunDataError("\n".join(parts) + (f"\n... and {more} more" if more > 0 else "")) from None
    return _more_checks(path, table, df, lines, window)


def _more_checks(
    path: Path, table: Table, df: pd.DataFrame, lines: Sequence[int], window: Window | None
) -> pd.DataFrame:
    errors: list[str] = []
    if window is not None and len(df):
        errors += _window_errors(path, table, df, lines, window)
        raise_errors(errors)
    if table.key and len(df):
        errors += _duplicate_errors(path, table, df, lines)
    if table.name == "counters":
        errors += counter_errors(path, table, df, lines)
    if table.name == "sysctls":
        errors += sysctl_errors(path, table, df, lines)
    raise_errors(errors)
    return df


def _duplicate_errors(path: Path, table: Table, df: pd.DataFrame, lines: Sequence[int]) -> list[str]:
    """Rows that repeat an earlier row's key, naming that row's line (the first MAX_ERRORS)."""
    errors: list[str] = []
    dup = df.duplicated(list(table.key), keep="first").to_numpy()
    if not dup.any():
        return errors
    keys = list(df[list(table.key)].astype(object).itertuples(index=False, name=None))
    first: dict[tuple, int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
        if dup[i] and len(errors) < MAX_ERRORS:
            errors.append(
                f"{path}:{lines[i]}: column 1 ({table.column_names[0]}): duplicate row: the same "
                f"{', '.join(table.key)} as line {lines[first[k]]}"
            )
    return errors


def _window_errors(path: Path, table: Table, df: pd.DataFrame, lines: Sequence[int], window: Window) -> list[str]:
    """Times inside the capture (metadata.json's start and end, with slack).

    Only for what the capture itself writes: a lab's own files (connects.csv)
    may run past a capture that stopped at its safety duration."""
    if not (table.probe or table.writer.startswith("collector/")):
        return []
    col, scale = ("time_s", 1.0) if "time_s" in table.column_names else ("start_unix_ns", 1e-9)
    if col not in table.column_names:
        return []
    lo, hi = window
    secs = df[col].astype("float64") * scale
    bad = np.flatnonzero(((secs < lo) | (secs > hi)).to_numpy())
    return [
        cell_error(
            path,
            lines[i],
            table,
            col,
            f"{df[col].iat[i]} is outside the capture (metadata.json: {lo:.0f} .. {hi:.0f} with slack)",
        )
        for i in bad[:2]
    ]
