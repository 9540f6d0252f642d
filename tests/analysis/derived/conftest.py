"""Shared by the tests of analysis/derived: fixture runs, opened once, and their raw CSV files.

Each test computes what it expects from the raw CSV (pandas, no analysis code), so the derived
function is checked against the capture itself, not against its own earlier output."""

from __future__ import annotations

from functools import cache
from typing import Any

import pandas as pd

from analysis.load import Run
from tests.conftest import FIXTURES


@cache
def run(name: str) -> Run:
    return Run.open(FIXTURES / name)


def raw(name: str, table: str, **kw: Any) -> pd.DataFrame:
    """A fixture's CSV file as it is on disk."""
    return pd.read_csv(FIXTURES / name / f"{table}.csv", **kw)


def lab_netns(name: str, side: str) -> int:
    """The inode of a lab run's server ("srv") or client ("cli") namespace, from metadata.json."""
    for ns in run(name).metadata["netns"]:
        if f"-{side}-" in ns["label"]:
            return int(ns["inode"])
    raise KeyError(side)
