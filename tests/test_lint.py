"""Static checks: ShellCheck on every script, ruff on the Python, go vet/test on the labs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

# Folders of runnable tools: the collector (shipped to hosts), the user drivers,
# the development tools, the VM matrix and the deployment's builders.
TOOL_DIRS = ("collector", "scripts", "dev", "dev/vm", "deploy", "deploy/image")


RUFF_PATHS = ("analysis", "monitor", "training", "tests", "dev", "labs", "notebooks", "scripts/sysctl-profile")


def _tools() -> list[Path]:
    # Executable: deploy/image/Containerfile is a build recipe beside its builder, not a tool.
    files = (p for d in TOOL_DIRS for p in (ROOT / d).iterdir() if p.is_file() and "." not in p.name)
    return sorted(p for p in files if os.access(p, os.X_OK))


def _shell_files() -> list[str]:
    files = [p for p in _tools() if "python" not in p.open().readline()]
    files += [ROOT / "collector" / "lib.sh", *(ROOT / "labs").glob("*/lab.sh"), ROOT / ".ci" / "run"]
    return [str(p.relative_to(ROOT)) for p in sorted(files)]


def test_shellcheck_clean() -> None:
    assert shutil.which("shellcheck"), "shellcheck missing: make setup installs it"
    r = subprocess.run(["shellcheck", *_shell_files()], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("script", [str(p.relative_to(ROOT)) for p in _tools()])
def test_every_script_has_help(script: str) -> None:
    r = subprocess.run([str(ROOT / script), "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "USAGE" in (r.stdout + r.stderr), script


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff_clean(command: list[str]) -> None:
    r = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "ruff"), *command, *RUFF_PATHS],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_go_vet_and_tests() -> None:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    env = {"GOTOOLCHAIN": "local", "PATH": "/usr/local/go/bin:/usr/bin:/bin", "HOME": "/root", "GOFLAGS": "-mod=mod"}
    for cmd in (["vet", "./..."], ["test", "./..."]):
        r = subprocess.run([go, *cmd], cwd=ROOT / "labs" / "go", capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
