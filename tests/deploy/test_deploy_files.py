"""The deployment files checked as files: the systemd unit and its probe drop-in by systemd 252
itself (systemd-analyze verify, which accepts unknown keys with exit 0 and a message, so any
output fails; systemd-analyze security --offline=true, whose exposure score docs/deploy.md
states), against the capabilities the exporter checks for (monitor/exporter/privilege.py);
the pack (deploy/pack) byte for byte reproducible and enough to run the monitor alone; the
DaemonSet manifest and the playbook. Running them for real: tests/integration/
test_fleet_monitor.py (the unit under systemd), test_kube_pod.py (the pod template),
test_least_privilege.py (the capabilities)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from monitor.exporter.privilege import SAMPLED, SYS_NICE
from tests.conftest import ROOT

UNIT = ROOT / "deploy" / "systemd" / "tq-monitor.service"
DROP_IN = ROOT / "deploy" / "systemd" / "tq-monitor-probes.conf"
DAEMONSET = ROOT / "deploy" / "kubernetes" / "tq-monitor.yaml"
DOC = ROOT / "docs" / "deploy.md"
TEXTFILE_DIR = "/var/lib/tq-monitor/textfile"


def _analyze() -> str:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.fail("systemd-analyze is missing: make setup installs systemd")
    return tool


def _root(tmp: Path, probes: bool, extra: str = "") -> Path:
    """A root for --root=: systemd's own units (verify loads the targets the unit names), the
    unit (and the drop-in), and the pack's scripts/monitor where ExecStart= looks for it."""
    root = tmp / ("probes" if probes else "sampled")
    units = root / "usr" / "lib" / "systemd"
    units.mkdir(parents=True)
    shutil.copytree("/lib/systemd/system", units / "system", symlinks=True)
    etc = root / "etc" / "systemd" / "system"
    etc.mkdir(parents=True)
    shutil.copy(UNIT, etc / UNIT.name)
    if probes:
        (etc / "tq-monitor.service.d").mkdir()
        (etc / "tq-monitor.service.d" / DROP_IN.name).write_text(DROP_IN.read_text() + extra)
    script = root / "opt" / "tcp-hidden-queues" / "current" / "scripts" / "monitor"
    script.parent.mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "monitor", script)
    return root


@pytest.mark.parametrize("probes", [False, True], ids=["sampled", "probes"])
def test_systemd_analyze_verify_says_nothing(probes: bool, tmp_path: Path) -> None:
    r = subprocess.run([_analyze(), "verify", f"--root={_root(tmp_path, probes)}", "tq-monitor.service"],
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 0 and r.stdout + r.stderr == "", r.stdout + r.stderr


def test_verify_would_catch_an_unknown_key(tmp_path: Path) -> None:
    """What the test above relies on: systemd 252 prints an unknown key and exits 0."""
    root = _root(tmp_path, True, "ProtectEverything=yes\n")
    r = subprocess.run([_analyze(), "verify", f"--root={root}", "tq-monitor.service"], capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert r.returncode == 0 and "Unknown key 'ProtectEverything'" in r.stdout + r.stderr


def _exposure(tmp: Path, probes: bool) -> float:
    r = subprocess.run([_analyze(), "security", "--offline=true", f"--root={_root(tmp, probes)}", "tq-monitor.service"],
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    m = re.search(r"Overall exposure level for tq-monitor\.service: (\d+\.\d)", r.stdout)
    assert m, r.stdout + r.stderr
    return float(m.group(1))


def test_the_exposure_scores_are_the_ones_docs_deploy_states(tmp_path: Path) -> None:
    scores = {"sampled": _exposure(tmp_path, False), "probes": _exposure(tmp_path, True)}
    doc = DOC.read_text()
    stated = dict(re.findall(r"exposure (\w+): \*\*(\d+\.\d)\*\*", doc))
    assert {k: float(v) for k, v in stated.items()} == scores, (stated, scores)
    # systemd's own scale: below 3 is "OK"; more capabilities cost the probe tiers a little.
    assert scores["sampled"] < scores["probes"] < 3.0


def _settings(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            k, _, v = line.partition("=")
            out.setdefault(k, []).append(v)
    return out


def test_the_units_capabilities_are_what_the_exporter_checks_for() -> None:
    unit, drop = _settings(UNIT.read_text()), _settings(DROP_IN.read_text())
    names = {c.name for c in SAMPLED}
    assert set(unit["AmbientCapabilities"][0].split()) == names
    assert set(unit["CapabilityBoundingSet"][0].split()) == names
    assert unit["User"] == ["tq-monitor"] and unit["NoNewPrivileges"] == ["yes"]
    # The drop-in resets the bounding set (systemd merges repeated lines), then names its own.
    assert drop["CapabilityBoundingSet"][0] == "" and drop["AmbientCapabilities"] == [""]
    assert set(drop["CapabilityBoundingSet"][1].split()) == names | {"CAP_BPF", "CAP_PERFMON", SYS_NICE.name}
    assert drop["User"] == ["root"]
    # The textfile folder: the only writable one, where the monitor writes, what node_exporter reads.
    assert unit["ReadWritePaths"] == [TEXTFILE_DIR] and unit["ProtectSystem"] == ["strict"]
    assert f"--prom-dir {TEXTFILE_DIR} " in unit["ExecStart"][0]
    playbook = (ROOT / "fleet" / "monitor.yml").read_text()
    assert f"--collector.textfile.directory={TEXTFILE_DIR}" in playbook
    assert unit["MemoryMax"] == ["64M"] and drop["MemoryMax"] == ["256M"]


def test_the_daemonset_asks_for_the_same_capabilities_and_no_privilege() -> None:
    (ds,) = list(yaml.safe_load_all(DAEMONSET.read_text()))
    spec = ds["spec"]["template"]["spec"]
    assert spec["hostNetwork"] is True and spec["hostPID"] is True
    monitor, sidecar = spec["containers"]
    ctx = monitor["securityContext"]
    assert ctx["capabilities"]["drop"] == ["ALL"] and not ctx.get("privileged")
    assert {f"CAP_{c}" for c in ctx["capabilities"]["add"]} == {c.name for c in SAMPLED}
    assert ctx["allowPrivilegeEscalation"] is False and ctx["readOnlyRootFilesystem"] is True
    side = sidecar["securityContext"]
    assert side["runAsUser"] != 0 and side["capabilities"]["drop"] == ["ALL"]
    assert "--collector.textfile.directory=/textfile" in sidecar["args"]
    mounts = {m["mountPath"]: m for m in monitor["volumeMounts"]}
    assert {"/textfile", "/sys/kernel/tracing", "/run/netns"} <= set(mounts)
    assert mounts["/run/netns"]["mountPropagation"] == "HostToContainer"
    for c in (monitor, sidecar):
        assert set(c["resources"]) == {"requests", "limits"}


def test_the_pack_is_reproducible_and_runs_alone(tmp_path: Path) -> None:
    digests = [subprocess.run([str(ROOT / "deploy" / "pack"), str(tmp_path / f"p{i}.tgz")], capture_output=True,
                              text=True, check=True).stdout.strip() for i in (1, 2)]  # fmt: skip
    assert digests[0] == digests[1] and re.fullmatch(r"[0-9a-f]{64}", digests[0])
    assert (tmp_path / "p1.tgz").read_bytes() == (tmp_path / "p2.tgz").read_bytes()
    unpacked = tmp_path / "pack"
    with tarfile.open(tmp_path / "p1.tgz") as t:
        t.extractall(unpacked, filter="data")
    # The exporter from the pack alone: no repository on the path, the standard library only.
    r = subprocess.run(["python3", "-I", "-c", "import sys; sys.path.insert(0, '.'); "
                        "from monitor.exporter.cli import main; sys.exit(main(['--metrics-doc']))"],
                       cwd=unpacked, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 0 and "tq_listener_drops_total" in r.stdout, r.stderr
    r = subprocess.run([str(unpacked / "scripts" / "monitor"), "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "USAGE" in r.stdout, r.stderr
    assert (unpacked / "scripts" / "monitor").stat().st_mode & 0o755 == 0o755


def test_the_playbook_parses() -> None:
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "ansible-playbook"), "--syntax-check", "-i", "localhost,",
                        str(ROOT / "fleet" / "monitor.yml")], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
