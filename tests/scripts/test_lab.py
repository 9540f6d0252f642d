"""scripts/lab's arguments, without starting a lab: usage, and a clear error, before any
namespace is made, for a lab or variant it does not have and for an IP version the lab does
not run over (IP_VERSION=6 only where the lab lists it: busy-host)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import ROOT

LAB = str(ROOT / "scripts" / "lab")


def _run(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([LAB, *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=60)


def test_usage_names_the_ip_versions() -> None:
    r = _run("--help")
    assert r.returncode == 0 and "IP_VERSION=6" in r.stdout and "2001:2::1" in r.stdout


@pytest.mark.parametrize(
    ("args", "env", "error"),
    [
        (("no-such-lab",), {}, "no lab named 'no-such-lab'"),
        (("busy-host", "typo"), {}, "lab busy-host has no variant 'typo'"),
        (("accept-overflow",), {"IP_VERSION": "6"}, "lab accept-overflow runs over IP_VERSION=4, not IP_VERSION=6"),
        (("busy-host",), {"IP_VERSION": "5"}, "runs over IP_VERSION=4 or IP_VERSION=6, not IP_VERSION=5"),
    ],
)
def test_a_clear_error_before_anything_is_made(args: tuple[str, ...], env: dict[str, str], error: str) -> None:
    r = _run(*args, "--out", "/nonexistent/never-made", **env)
    assert r.returncode != 0 and error in r.stderr, r.stderr
