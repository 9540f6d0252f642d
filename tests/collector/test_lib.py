"""collector/lib.sh helpers that every driver shares."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, sigint_default


def _lib_in(tmp_path: Path) -> Path:
    """A pack of one file: PACK_ROOT is the folder above lib.sh, so runs/ lands in tmp_path."""
    (tmp_path / "collector").mkdir()
    shutil.copy(ROOT / "collector" / "lib.sh", tmp_path / "collector" / "lib.sh")
    (tmp_path / "probes").mkdir()
    shutil.copy(ROOT / "probes" / "families.conf", tmp_path / "probes" / "families.conf")
    return tmp_path / "collector" / "lib.sh"


def _bash(lib: Path, script: str, **env: str) -> None:
    base = {k: v for k, v in os.environ.items() if k != "TQ_NO_LATEST"}
    subprocess.run(["bash", "-c", f'source "{lib}"; {script}'], check=True, env={**base, **env})


@pytest.mark.parametrize("name", ["latest", "latest-compare", "latest-sweep-accept-queue", "latest-fleet"])
def test_point_latest_unless_the_caller_said_not_to(tmp_path: Path, name: str) -> None:
    """The test suite exports TQ_NO_LATEST: after make test, runs/latest and its siblings still
    point where the user left them (they pointed into the suite's deleted folders before)."""
    lib = _lib_in(tmp_path)
    run = tmp_path / "a-run"
    run.mkdir()
    _bash(lib, f'point_latest {name} "{run}"', TQ_NO_LATEST="1")
    assert not (tmp_path / "runs" / name).exists()
    _bash(lib, f'point_latest {name} "{run}"')
    assert (tmp_path / "runs" / name).resolve() == run


def test_every_latest_link_goes_through_point_latest() -> None:
    for path in ("collector/capture", "scripts/compare", "scripts/sweep", "scripts/fleet", "scripts/lab"):
        text = (ROOT / path).read_text()
        assert not re.search(r"ln -s\w* .*runs/latest", text), f"{path} links runs/latest* itself"
    assert re.search(r"^export TQ_NO_LATEST=1$", (ROOT / "dev" / "test-suite").read_text(), re.M)


def test_a_ctrl_c_lets_a_python_helper_finish_without_a_traceback(tmp_path: Path) -> None:
    """A lab's SIGINT reached a JSON helper half-way through `import json` and its
    KeyboardInterrupt traceback ended up in the lab's output (stop 25's CI). py_helper
    starts it with SIGINT ignored: it runs to its end, then the caller's trap runs."""
    lib = _lib_in(tmp_path)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(shutil.which("python3") or "/usr/bin/python3")
    helper = tmp_path / "helper.py"
    helper.write_text("import sys, time\ntime.sleep(1.0)\nprint('helper done', flush=True)\n")
    script = f'source "{lib}"; trap \'echo caller trapped; exit 130\' INT; py_helper "{helper}"; echo caller went on'
    proc = subprocess.Popen(
        ["bash", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=sigint_default,
    )
    time.sleep(0.5)
    os.killpg(proc.pid, 2)
    out, _ = proc.communicate(timeout=10)
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert out.splitlines() == ["helper done", "caller trapped"], out
    assert proc.returncode == 130
