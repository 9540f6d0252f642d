"""training/session.py: the session log written and read back, a line that is not a session
named by file and line, a group's summary (the most missed family first) and its plot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from training import session
from training.grade import grade
from training.incidents import draw


def _log(tmp_path: Path) -> Path:
    log = tmp_path / "sessions.jsonl"
    for seed in range(12):
        inc = draw(seed)
        right = {"family": inc.key["family"], "object": inc.key["object"], "cause": inc.key["cause"],
                 "fix": "nothing", "also_suspect": []}  # fmt: skip
        # Every other trainee misses the object.
        answer = right if seed % 2 else {**right, "object": inc.neighbours[0]}
        g = grade(inc, answer, minutes=3).to_dict()
        session.append(log, session.record(f"t{seed % 3}", seed, inc.key["family"], answer, g, 3, 0))
    return log


def test_a_log_read_back_and_summarised(tmp_path: Path) -> None:
    sessions = session.read(_log(tmp_path))
    assert len(sessions) == 12 and sessions["trainee"].nunique() == 3
    table = session.summary(sessions)
    assert table["incidents"].sum() == 12
    assert table["object_missed"].sum() == 6
    assert list(table["mean_score"]) == sorted(table["mean_score"])  # the most missed first
    png = session.plot(table, tmp_path / "plot.png")
    # Counts print as counts: the CLI's table has no "2.0 incidents".
    out = subprocess.run([sys.executable, "-m", "training", "report", str(tmp_path / "sessions.jsonl")],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout  # fmt: skip
    assert "12 answers by 3 trainees" in out, out
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows and all(r[1].isdigit() and r[3].isdigit() for r in rows), out  # incidents, objects missed
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_line_that_is_not_a_session_is_named(tmp_path: Path) -> None:
    log = _log(tmp_path)
    with log.open("a") as f:
        f.write('{"trainee": "x"}\n')
    with pytest.raises(ValueError, match=rf"^{log}:13: not a session line"):
        session.read(log)
