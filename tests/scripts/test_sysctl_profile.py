"""scripts/sysctl-profile: validation, stand-in host round trips, and real namespaces."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.conftest import ROOT

TOOL = str(ROOT / "scripts" / "sysctl-profile")
KEYS = [
    "net/core/somaxconn",
    "net/core/netdev_max_backlog",
    "net/ipv4/tcp_max_syn_backlog",
    "net/ipv4/tcp_syncookies",
    "net/ipv4/tcp_abort_on_overflow",
    "net/ipv4/tcp_tw_reuse",
    "net/ipv4/tcp_fin_timeout",
    "net/ipv4/ip_local_port_range",
    "net/ipv4/tcp_timestamps",
]


def tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def fake_root(tmp_path: Path) -> Path:
    """A stand-in /proc/sys holding this kernel's real current values (bytes as the kernel gives them)."""
    root = tmp_path / "sys"
    for k in KEYS:
        p = root / k
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(Path("/proc/sys", k).read_bytes())
    return root


@pytest.mark.parametrize("profile", sorted(p.stem for p in (ROOT / "sysctl-profiles").glob("*.conf")))
def test_every_shipped_profile_validates(profile: str) -> None:
    r = tool("validate", profile)
    assert r.returncode == 0, r.stderr


def test_removed_unknown_and_bad_values_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.conf"
    bad.write_text(
        "# why: x | symptom: y | since: 2.6 | scope: netns\nnet.ipv4.tcp_tw_recycle = 1\n"
        "# why: x | symptom: y | since: 2.6 | scope: netns\nnet.ipv4.tcp_no_such_thing = 1\n"
        "# why: x | symptom: y | since: 2.6 | scope: netns\nnet.ipv4.ip_local_port_range = 60000 1024\n"
    )
    r = tool("validate", str(bad))
    assert r.returncode == 1
    assert f"{bad}:2: net.ipv4.tcp_tw_recycle was removed in Linux 4.12" in r.stderr
    assert f"{bad}:4: net.ipv4.tcp_no_such_thing is unknown to this kernel" in r.stderr
    assert f"{bad}:6: net.ipv4.ip_local_port_range = 60000 1024 is not a valid port range" in r.stderr
    undocumented = tmp_path / "nodoc.conf"
    undocumented.write_text("net.core.somaxconn = 1024\n")
    r = tool("validate", str(undocumented))
    assert r.returncode == 1 and "has no '# why:" in r.stderr and "Traceback" not in r.stderr


def test_host_apply_and_rollback_restore_identical_bytes(fake_root: Path, tmp_path: Path) -> None:
    before = {k: (fake_root / k).read_bytes() for k in KEYS}
    backup = tmp_path / "b.json"
    r = tool("apply", "seeds-as-written", "--host", "--root", str(fake_root), "--backup", str(backup))
    assert r.returncode == 0, r.stderr
    assert (fake_root / "net/core/somaxconn").read_text().strip() == "65535"
    assert (fake_root / "net/ipv4/ip_local_port_range").read_text().split() == ["1024", "65535"]
    r = tool("rollback", str(backup), "--root", str(fake_root))
    assert r.returncode == 0, r.stderr
    assert {k: (fake_root / k).read_bytes() for k in KEYS} == before


def test_dry_run_changes_nothing_and_a_failing_write_rolls_back(fake_root: Path, tmp_path: Path) -> None:
    before = {k: (fake_root / k).read_bytes() for k in KEYS}
    r = tool("apply", "seeds-as-written", "--host", "--root", str(fake_root), "--dry-run")
    assert r.returncode == 0 and "would set net.core.somaxconn" in r.stdout
    assert {k: (fake_root / k).read_bytes() for k in KEYS} == before
    # A key the "kernel" refuses to take: writes to /dev/full fail with ENOSPC.
    target = fake_root / "net/ipv4/tcp_tw_reuse"
    target.unlink()
    target.symlink_to("/dev/full")
    r = tool("apply", "seeds-as-written", "--host", "--root", str(fake_root), "--backup", str(tmp_path / "b.json"))
    assert r.returncode == 1 and "rolled back" in r.stderr and "Traceback" not in r.stderr
    others = [k for k in KEYS if k != "net/ipv4/tcp_tw_reuse"]
    assert {k: (fake_root / k).read_bytes() for k in others} == {k: before[k] for k in others}


def test_apply_needs_an_explicit_target(fake_root: Path) -> None:
    r = tool("apply", "listener-burst", "--root", str(fake_root))
    assert r.returncode == 1 and "--netns NAME" in r.stderr and "--host" in r.stderr


@pytest.mark.integration
def test_real_round_trip_on_the_host_with_a_harmless_key(kernel, tmp_path: Path) -> None:
    """One real host write: tcp_fin_timeout (only orphaned FIN_WAIT2 sockets care), always restored."""
    key = Path("/proc/sys/net/ipv4/tcp_fin_timeout")
    before = key.read_bytes()
    prof = tmp_path / "fin.conf"
    new = 59 if before.strip() != b"59" else 58
    prof.write_text(f"# why: test | symptom: none | since: 2.4 | scope: netns\nnet.ipv4.tcp_fin_timeout = {new}\n")
    backup = tmp_path / "b.json"
    try:
        r = tool("apply", str(prof), "--host", "--backup", str(backup))
        assert r.returncode == 0, r.stderr
        assert key.read_text().strip() == str(new)
    finally:
        r = tool("rollback", str(backup))
        if r.returncode != 0:
            key.write_bytes(before)
    assert key.read_bytes() == before


@pytest.mark.integration
def test_namespace_apply_never_touches_the_host(kernel, tmp_path: Path) -> None:
    ns = f"tq-sysctl-{uuid.uuid4().hex[:8]}"
    host_before = {k: Path("/proc/sys", k).read_bytes() for k in KEYS}
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        r = tool("apply", "seeds-as-written", "--netns", ns)
        assert r.returncode == 1 and "net.core.netdev_max_backlog is global" in r.stderr
        r = tool("apply", "short-lived-clients", "--netns", ns, "--backup", str(tmp_path / "b.json"))
        assert r.returncode == 0, r.stderr
        inside = subprocess.run(
            ["ip", "netns", "exec", ns, "cat", "/proc/sys/net/ipv4/tcp_tw_reuse"], capture_output=True, text=True
        ).stdout.strip()
        assert inside == "1"
        assert {k: Path("/proc/sys", k).read_bytes() for k in KEYS} == host_before
        r = tool("rollback", str(tmp_path / "b.json"))
        assert r.returncode == 0, r.stderr
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    assert {k: Path("/proc/sys", k).read_bytes() for k in KEYS} == host_before
    assert os.path.exists("/proc/sys/net/ipv4/tcp_tw_reuse")
