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


def test_the_next_run_restores_a_host_sysctl_a_killed_run_changed(tmp_path: Path) -> None:
    """A run SIGKILLed while a host-wide setting was changed (the socket-buffers memory-pressure
    lab's net.ipv4.tcp_mem, three numbers) leaves a host-sysctl entry; the next driver's reaper
    writes the old value back. Here in a namespace of the test's own, with a setting of the same
    shape (ip_local_port_range: two numbers), so that the host's own stays untouched."""
    lib = _lib_in(tmp_path)
    state = tmp_path / "state"
    dead = state / "4194305.1"  # above the kernel's highest pid: never alive
    dead.mkdir(parents=True)
    (dead / "prog").write_text("lab\n")
    (dead / "manifest").write_text("host-sysctl\tnet.ipv4.ip_local_port_range 32768 60999\n")
    ns = f"tq-test-reap-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        key = "net.ipv4.ip_local_port_range"
        run = ["ip", "netns", "exec", ns, "bash", "-c"]
        subprocess.run([*run, f"sysctl -qw '{key}=40000 40100'"], check=True)
        out = subprocess.run(
            [*run, f'source "{lib}"; reap_dead_runs; sysctl -n {key}'],
            check=True, capture_output=True, text=True, env={**os.environ, "TQ_STATE_DIR": str(state)},
        )  # fmt: skip
        assert out.stdout.split() == ["32768", "60999"], out
        assert f"{key} restored to 32768 60999" in out.stderr
        assert not dead.exists()
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
