"""dev/vm/summarize.py: a family's guest scenario (probes/families.conf "guest") gets a row of its
own on a guest target, none on the host, and fails unless its finding names the registry's
cause. The target directories hold the fields the guest writes (doctor.json, labs.tsv,
runs/<name>/metadata.json and verdicts.json), as `dev/vm/matrix trixie --families
socket_buffers` wrote them on 2026-11-28, cut to what the table reads."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

from tests.conftest import script_module

FILE = "probes/socket_buffers.bt"


def _summarize() -> ModuleType:
    return script_module("dev/vm/summarize.py")


def _run(d: Path, name: str, cause: str) -> None:
    run = d / "runs" / name
    run.mkdir(parents=True)
    meta = {"probes": {"socket_buffers": {"file": FILE, "tier": "full", "unknown_lines": 0}}}
    (run / "metadata.json").write_text(json.dumps(meta))
    finding = {"kind": "socket_buffer_limit", "status": "confirmed", "cause_class": cause}
    (run / "verdicts.json").write_text(json.dumps({"findings": [finding]}))


def _target(top: Path, name: str, guest_cause: str | None) -> Path:
    d = top / name
    d.mkdir()
    doctor = {"kernel": "6.12.117", "bpftrace_version": "v0.23.2", "families": {"socket_buffers": {"file": FILE}}}
    (d / "doctor.json").write_text(json.dumps(doctor))
    (d / "families.txt").write_text("socket_buffers\n")
    _run(d, "socket_buffers", "slow_reader")
    rows = ["socket_buffers\tsocket-buffers-slow-reader\t0\t40"]
    if guest_cause is not None:
        _run(d, "socket_buffers@memory-pressure", guest_cause)
        rows.append("socket_buffers@memory-pressure\tsocket-buffers-memory-pressure\t0\t41")
    (d / "labs.tsv").write_text("\n".join(rows) + "\n")
    return d


def test_the_guest_scenario_has_its_row_and_its_cause_checked(tmp_path: Path) -> None:
    s = _summarize()
    assert s.GUEST["socket_buffers@memory-pressure"] == (
        "socket_buffers",
        "socket-buffers memory-pressure",
        "memory_pressure",
    )
    rows, problems = s.target_rows(_target(tmp_path, "trixie", "memory_pressure"))
    assert problems == []
    assert [r["family"] for r in rows] == ["socket_buffers", "socket_buffers (memory-pressure)"]
    assert rows[1]["verdict"] == "socket_buffer_limit confirmed (memory_pressure)"
    assert rows[1]["lab_seconds"] == "41"


def test_the_wrong_cause_is_a_problem(tmp_path: Path) -> None:
    _, problems = _summarize().target_rows(_target(tmp_path, "trixie", "small_sndbuf"))
    assert problems == [
        "trixie: socket_buffers@memory-pressure: expected socket_buffer_limit confirmed (memory_pressure), "
        "got socket_buffer_limit confirmed (small_sndbuf)"
    ]


def test_the_host_runs_no_guest_scenario(tmp_path: Path) -> None:
    rows, problems = _summarize().target_rows(_target(tmp_path, "host", None))
    assert problems == []
    assert [r["family"] for r in rows] == ["socket_buffers"]
