"""collector/doctor --reuse: one answer per boot, kernel, bpftrace and probe files, and never an
answer that a timeout or a signal cut short. Real bpftrace on this kernel: doctor tries its attaches."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import ROOT

DOCTOR = ROOT / "collector" / "doctor"


def _doctor(out: Path, state: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "TQ_NO_DOCTOR_CACHE"}
    return subprocess.run(
        [str(DOCTOR), "-q", "--reuse", "-o", str(out), *args],
        capture_output=True, text=True, timeout=300, env={**base, "TQ_STATE_DIR": str(state), **env},
    )  # fmt: skip


def test_the_boots_answer_is_kept_and_reused(kernel, tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = _doctor(tmp_path / "a.json", state)
    assert first.returncode == 0, first.stderr
    (cache,) = state.glob("doctor-*.json")
    assert json.loads(cache.read_text()) == json.loads((tmp_path / "a.json").read_text())
    # A marker only the kept answer has: the second run copies it instead of trying again.
    kept = json.loads(cache.read_text())
    cache.write_text(json.dumps({**kept, "checked_at": "kept-answer"}))
    assert _doctor(tmp_path / "b.json", state).returncode == 0
    assert json.loads((tmp_path / "b.json").read_text())["checked_at"] == "kept-answer"
    assert _doctor(tmp_path / "c.json", state, TQ_NO_DOCTOR_CACHE="1").returncode == 0
    assert json.loads((tmp_path / "c.json").read_text())["checked_at"] != "kept-answer"


def test_an_attach_cut_short_is_said_and_not_kept(kernel, tmp_path: Path) -> None:
    """A trial bpftrace that a signal ended (or that timed out) gave no answer: the report says so
    instead of "failed", and the boot does not keep it (a capture would have skipped that tier)."""
    wrapper = tmp_path / "bpftrace"
    wrapper.write_text(
        "#!/bin/bash\n"
        "# kprobe trials end as if a Ctrl-C's SIGTERM reached them; everything else is bpftrace.\n"
        'if [[ "$*" == *kprobe:vfs_read* ]]; then kill -TERM $$; fi\n'
        'exec bpftrace "$@"\n'
    )
    wrapper.chmod(0o755)
    state = tmp_path / "state"
    r = _doctor(tmp_path / "a.json", state, BPFTRACE=str(wrapper))
    assert r.returncode == 0, r.stderr
    kprobe = json.loads((tmp_path / "a.json").read_text())["probe_types"]["kprobe"]
    assert kprobe["attaches"] is False and kprobe["error"].startswith("no answer:"), kprobe
    assert not list(state.glob("doctor-*.json"))
