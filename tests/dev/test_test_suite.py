"""dev/test-suite runs its streams in the background, where pytest starts with SIGINT
ignored: tests/conftest.py gives it back its handler, so an interrupt tears the tests down
instead of leaving their labs up. Checked on a pytest of one sleeping test, started with
SIGINT ignored as a background job is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT

SLEEPER = """
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.fixture
def held():
    yield
    (HERE / "torn_down").write_text("yes")


def test_sleeps(held):
    (HERE / "started").write_text("yes")
    time.sleep(30)
"""


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _interrupted_run(tmp_path: Path, *plugin: str, wait: float = 20) -> str | None:
    """A pytest of the sleeper started as a background job starts (SIGINT ignored), sent
    SIGINT once its test runs: its output if it ended within wait seconds."""
    (tmp_path / "test_sleeper.py").write_text(SLEEPER)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, str(tmp_path / "test_sleeper.py")]
    p = subprocess.Popen(cmd, cwd=ROOT, preexec_fn=_ignore_sigint, start_new_session=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "started").exists():
            assert p.poll() is None and time.monotonic() < deadline, "the sleeper never started"
            time.sleep(0.1)
        os.kill(p.pid, signal.SIGINT)
        try:
            return p.communicate(timeout=wait)[0]
        except subprocess.TimeoutExpired:
            return None
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_background_run_stops_at_sigint_and_tears_down(tmp_path: Path) -> None:
    out = _interrupted_run(tmp_path, "-p", "tests.conftest")
    assert out is not None, "pytest went on with SIGINT ignored"
    assert "KeyboardInterrupt" in out, out
    assert (tmp_path / "torn_down").exists(), out


def test_without_the_handler_the_run_ignores_sigint(tmp_path: Path) -> None:
    """What the handler is for: the same run without tests/conftest.py does not stop."""
    out = _interrupted_run(tmp_path, wait=3)
    assert out is None
    assert not (tmp_path / "torn_down").exists()
