"""What one table's rows must say beyond their columns' checks: the counters' delta chain, sysctl values."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.contract import GAUGE_COUNTERS, SYSCTL_FORMATS, Table

from .errors import MAX_ERRORS, cell_error

_PORT_RANGE_RE = re.compile(r"([0-9]{1,5}) ([0-9]{1,5})")
_UINT_RE = re.compile(r"[0-9]{1,18}")


def counter_errors(path: Path, table: Table, df: pd.DataFrame, lines: Sequence[int]) -> list[str]:
    """delta = value - previous value of the same (netns, counter); empty only on the first row.

    In file order, not time order: each sampler appends its rows as it takes
    them, and a wall clock stepped back (NTP, a VM resumed) must not turn a
    correct chain into errors."""
    if _counter_chain_holds(df):
        return []
    errors: list[str] = []
    last: dict[tuple[int, str], tuple[int, int]] = {}
    netns, counter, value, delta = (df[c].tolist() for c in ("netns", "counter", "value", "delta"))
    for i in range(len(df)):
        k = (netns[i], counter[i])
        d = delta[i]
        if k in last:
            prev_v, prev_i = last[k]
            if d is pd.NA:
                msg = f"empty, but {counter[i]} has a sample before (line {lines[prev_i]})"
            elif d != value[i] - prev_v:
                msg = (
                    f"{d} but {counter[i]} went from {prev_v} (line {lines[prev_i]}) to {value[i]}: "
                    "delta must be value minus the previous value"
                )
            elif d < 0 and counter[i] not in GAUGE_COUNTERS:
                msg = f"{d}: {counter[i]} is a counter and cannot fall"
            else:
                msg = ""
        else:
            msg = "" if d is pd.NA else f"{d} on the first sample of {counter[i]} (expected empty)"
        if msg:
            errors.append(cell_error(path, lines[i], table, "delta", msg))
        last[k] = (value[i], i)
        if len(errors) > MAX_ERRORS:
            break
    return errors


def _counter_chain_holds(df: pd.DataFrame) -> bool:
    """The chain checked at once, columns not cells (a day's capture holds millions of counter
    rows): True when every row passes; False sends the table row by row, which names each error."""
    key = [df["netns"], df["counter"]]
    prev = df["value"].groupby(key, sort=False, dropna=False).shift(1)
    first, delta = prev.isna(), df["delta"]
    gauge = df["counter"].isin(list(GAUGE_COUNTERS))
    ok = (first & delta.isna()) | (~first & (delta == df["value"] - prev) & ((delta >= 0) | gauge))
    return bool(ok.fillna(False).all())


def sysctl_errors(path: Path, table: Table, df: pd.DataFrame, lines: Sequence[int]) -> list[str]:
    """Values of the keys the analysis computes with (SYSCTL_FORMATS) in the form each must have."""
    errors: list[str] = []
    for i, (key, value) in enumerate(zip(df["key"].tolist(), df["value"].tolist(), strict=True)):
        fmt = SYSCTL_FORMATS.get(key)
        v = "" if value is pd.NA else str(value)
        if fmt == "int" and not _UINT_RE.fullmatch(v):
            errors.append(cell_error(path, lines[i], table, "value", f"{key} = {v!r} is not a non-negative integer"))
        elif fmt == "port_range":
            m = _PORT_RANGE_RE.fullmatch(v)
            if not m:
                errors.append(cell_error(path, lines[i], table, "value", f"{key} = {v!r} is not two ports 'low high'"))
                continue
            lo, hi = int(m.group(1)), int(m.group(2))
            if not (1 <= lo <= 65535 and 1 <= hi <= 65535):
                errors.append(cell_error(path, lines[i], table, "value", f"{key} = {v!r}: ports must be 1..65535"))
            elif lo > hi:
                errors.append(cell_error(path, lines[i], table, "value", f"{key} = {v!r}: low port above high port"))
    return errors
