"""The capability check (monitor/exporter/privilege.py): what each tier needs, named when
missing, for a root process (bounding and effective sets) and a non-root one (ambient set);
and scripts/monitor started for real without one of them: an error naming it, exit 2, no
traceback, and no textfile written."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from monitor.exporter.privilege import DAC_READ_SEARCH, SAMPLED, SYS_ADMIN, SYS_NICE, SYS_PTRACE, problems
from tests.conftest import ROOT

NOBODY = 65534


def _status(eff: int, bnd: int, amb: int = 0) -> str:
    sets = {"CapInh": amb, "CapPrm": eff, "CapEff": eff, "CapBnd": bnd, "CapAmb": amb}
    return "Name:\tpython3\n" + "".join(f"{k}:\t{v:016x}\n" for k, v in sets.items())


def _bits(*caps: object) -> int:
    return sum(1 << c.bit for c in caps)  # type: ignore[attr-defined]


ALL = (1 << 41) - 1


def test_root_with_every_capability_passes_every_tier() -> None:
    assert problems(_status(ALL, ALL), 0, probes=False) == ([], [])
    assert problems(_status(ALL, ALL), 0, probes=True) == ([], [])


def test_root_with_a_reduced_bounding_set_is_judged_by_it() -> None:
    sampled = _bits(*SAMPLED)
    assert problems(_status(sampled, sampled), 0, probes=False) == ([], [])
    errors, warnings = problems(_status(ALL, sampled & ~_bits(SYS_PTRACE)), 0, probes=False)
    assert len(errors) == 1 and "CAP_SYS_PTRACE" in errors[0] and "CapabilityBoundingSet=" in errors[0]
    # The probe tiers: the same three, and process_madvise wanted (a warning, not a refusal).
    errors, warnings = problems(_status(sampled, sampled), 0, probes=True)
    assert errors == [] and len(warnings) == 1 and SYS_NICE.name in warnings[0]


def test_a_non_root_user_needs_the_capabilities_ambient() -> None:
    three = _bits(*SAMPLED)
    assert problems(_status(three, three, amb=three), NOBODY, probes=False) == ([], [])
    # Effective but not ambient (file capabilities on python, say): the helpers would not get it.
    errors, _ = problems(_status(three, three, amb=three & ~_bits(SYS_ADMIN)), NOBODY, probes=False)
    assert len(errors) == 1 and "CAP_SYS_ADMIN is effective but not ambient" in errors[0]
    errors, _ = problems(_status(0, three), NOBODY, probes=False)
    assert [e.split(",")[0] for e in errors] == [f"missing capability {c.name}" for c in SAMPLED]


def test_bpftrace_tiers_refuse_a_non_root_user() -> None:
    three = _bits(*SAMPLED)
    errors, _ = problems(_status(ALL, ALL, amb=ALL), NOBODY, probes=True)
    assert len(errors) == 1 and "euid but 0" in errors[0]
    assert problems(_status(three, three, amb=three), NOBODY, probes=False)[0] == []


@pytest.mark.parametrize("dropped", [c.name for c in SAMPLED])
def test_scripts_monitor_names_the_missing_capability(dropped: str, tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        msg = "needs root and setpriv (util-linux) to start the monitor as another user"
        pytest.fail(msg) if os.environ.get("CI") else pytest.skip(msg)
    keep = ",".join(f"+{c.name[4:].lower()}" for c in SAMPLED if c.name != dropped)
    out = tmp_path / "prom"
    out.mkdir()
    os.chown(out, NOBODY, NOBODY)
    os.chown(tmp_path, NOBODY, NOBODY)
    r = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", f"--inh-caps=-all,{keep}",
         f"--ambient-caps=-all,{keep}", f"--bounding-set=-all,{keep}", "--no-new-privs",
         str(ROOT / "scripts" / "monitor"), "--prom-dir", str(out), "--state-dir", str(tmp_path / "state"),
         "--duration", "3"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert f"missing capability {dropped}" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not list(out.iterdir())


def test_capability_names_match_the_kernels_numbers() -> None:
    """The bits read from /proc/PID/status are the kernel's (include/uapi/linux/capability.h,
    which setpriv --list-caps lists in order)."""
    if shutil.which("setpriv") is None:
        msg = "setpriv (util-linux) lists the kernel's capability names"
        pytest.fail(msg) if os.environ.get("CI") else pytest.skip(msg)
    names = subprocess.run(["setpriv", "--list-caps"], capture_output=True, text=True, check=True).stdout.split()
    for c in (*SAMPLED, SYS_NICE, DAC_READ_SEARCH):
        assert names[c.bit] == c.name[4:].lower(), c


def test_textfiles_are_readable_by_all_and_writable_by_the_exporter_alone_whatever_the_umask(tmp_path: Path) -> None:
    from monitor.exporter import textfile

    old = os.umask(0o077)  # a service manager's umask that would hide them from node_exporter
    try:
        textfile.write(tmp_path, {"exporter": ["tq_exporter_top_n 20"]})
        os.umask(0o000)  # one that would let anybody rewrite them
        textfile.write(tmp_path, {"netns": []})
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes == {"tq_exporter.prom": 0o644, "tq_netns.prom": 0o644}, modes
