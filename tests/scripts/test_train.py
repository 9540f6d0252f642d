"""scripts/train's arguments and states, without starting an incident: usage, a clear error
for a bad seed or duration, and for hint/answer/status/stop with no incident."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

TRAIN = str(ROOT / "scripts" / "train")


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TQ_TRAIN_DIR": str(tmp_path / "state"), "TQ_TRAIN_LOG": str(tmp_path / "log.jsonl")}
    return subprocess.run([TRAIN, *args], capture_output=True, text=True, env=env, timeout=60)


def test_usage(tmp_path: Path) -> None:
    r = _run(tmp_path, "--help")
    assert r.returncode == 0 and "scripts/train start" in r.stdout and "answer FILE" in r.stdout
    assert _run(tmp_path, "dance").returncode == 2


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("start", "--seed", "x"), "--seed takes a whole number"),
        (("start", "--seconds", "2"), "--seconds takes a whole number of at least 5"),
        (("start", "--minutes", "ten"), "--minutes takes a whole number"),
        (("hint",), "no incident"),
        (("status",), "no incident"),
        (("stop",), "no incident"),
        (("answer",), "answer which file?"),
    ],
)
def test_a_clear_error(tmp_path: Path, args: tuple[str, ...], error: str) -> None:
    r = _run(tmp_path, *args)
    assert r.returncode != 0 and error in r.stderr, r.stderr


def test_an_answer_with_no_incident(tmp_path: Path) -> None:
    answer = tmp_path / "a.json"
    answer.write_text("{}")
    r = _run(tmp_path, "answer", str(answer))
    assert r.returncode != 0 and "no incident" in r.stderr
