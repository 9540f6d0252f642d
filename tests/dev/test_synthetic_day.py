"""dev/synthetic-day: copies of a real capture one after another make a run the loader accepts
whole (counters' delta chain, capture window, probe row counts), with the same objects and
counters that keep rising across the seams."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from analysis.load import Run
from tests.conftest import ROOT

SRC = ROOT / "tests" / "fixtures" / "host-overflow"


def test_three_copies_load_whole_and_counters_keep_rising(tmp_path: Path) -> None:
    meta = json.loads((SRC / "metadata.json").read_text())
    length = meta["ended_epoch"] - meta["started_epoch"]
    dst = tmp_path / "day"
    hours = 3 * length / 3600 - 1e-6  # three copies
    subprocess.run([sys.executable, str(ROOT / "dev" / "synthetic-day"), str(SRC), str(dst), "--hours", str(hours)],
                   check=True, capture_output=True)  # fmt: skip
    run = Run.open(dst)
    counts = run.validate_all()  # a broken chain, a row outside the window or a wrong count raises
    src = Run.open(SRC)
    assert counts["counters"] == 3 * len(src.table("counters"))
    assert run.end - run.start > 2.9 * length
    c = run.table("counters")
    syn = c[c["counter"] == "SyncookiesSent"]["value"].astype("int64").tolist()
    assert syn == sorted(syn) and syn[-1] > syn[0]  # a counter goes on rising, copy after copy
    assert set(c["netns"].dropna()) == set(src.table("counters")["netns"].dropna())
