"""collector/probe-to-csv on real raw probe output (tests/fixtures/*/probe_*.out,
made by real captures): it reproduces the committed CSVs byte for byte, and
two interval markers stamped with the same second (timer jitter near a second
boundary) make one row per key for that second with the counts of both."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import FIXTURES, ROOT

P2C = str(ROOT / "collector" / "probe-to-csv")
RAW = sorted(FIXTURES.glob("*/probe_*.out"))


def convert(raw: Path, out: Path) -> int:
    r = subprocess.run([P2C, str(raw), str(out)], capture_output=True, text=True, check=True)
    assert r.stderr == "", r.stderr
    return int(r.stdout)


@pytest.mark.parametrize("raw", RAW, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_reproduces_committed_csvs(raw: Path, tmp_path: Path) -> None:
    convert(raw, tmp_path)
    for made in tmp_path.glob("*.csv"):
        assert made.read_bytes() == (raw.parent / made.name).read_bytes(), made.name


def test_two_markers_in_one_second_make_one_row(tmp_path: Path) -> None:
    raw = FIXTURES / "epoll-busy" / "probe_epoll.out"
    lines = raw.read_text().splitlines(keepends=True)
    markers = [i for i, line in enumerate(lines) if line.startswith("=== ")]
    # Stamp the 4th interval with the 3rd one's second, as a late tick would.
    i3, i4 = markers[2], markers[3]
    damaged = [*lines[:i4], lines[i3], *lines[i4 + 1 :]]
    src = tmp_path / "probe_epoll.out"
    src.write_text("".join(damaged))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    convert(raw, tmp_path / "a")
    convert(src, tmp_path / "b")
    a = pd.read_csv(tmp_path / "a" / "ep_loop.csv")
    b = pd.read_csv(tmp_path / "b" / "ep_loop.csv")
    assert not b.duplicated(["time_s", "pid", "comm"]).any()
    t3, t4 = int(lines[i3].split()[1]), int(lines[i4].split()[1])
    merged = a[a["time_s"].isin([t3, t4])].groupby(["pid", "comm"]).sum(numeric_only=True).drop(columns="time_s")
    got = b[b["time_s"] == t3].set_index(["pid", "comm"]).drop(columns="time_s")
    pd.testing.assert_frame_equal(got.sort_index(), merged.sort_index(), check_dtype=False)
    # Nothing else moved: the totals over the whole capture are the same.
    assert (a.drop(columns=["time_s", "pid", "comm"]).sum() == b.drop(columns=["time_s", "pid", "comm"]).sum()).all()
