"""The sampled tier as a non-root user with only the three capabilities it needs (the options
deploy/systemd/tq-monitor.service relies on: User=, AmbientCapabilities=,
CapabilityBoundingSet=, NoNewPrivileges=, here through setpriv), beside the same tier as
root, on one lab made for the test: a namespace where a listener with backlog 8 and a slow
accept loop overflows beside a healthy one, its servers run as root (another user than the
monitor's). Both must export the same listeners, namespaces, owners and threads with the same
queue limits, and both must count the slow listener's drops."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.exporter.privilege import SAMPLED
from tests.conftest import ROOT
from tests.integration.children import Children, wait_for

pytestmark = pytest.mark.integration
BIN = ROOT / "build" / "bin"
NS = f"tq-lp-{os.getpid()}"
NOBODY = 65534
SECONDS = 8
CAPS = ",".join(f"+{c.name[4:].lower()}" for c in SAMPLED)
# setpriv as systemd sets the unit up: the user, the three as ambient and bounding, no new privileges.
AS_UNIT = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", f"--inh-caps=-all,{CAPS}",
           f"--ambient-caps=-all,{CAPS}", f"--bounding-set=-all,{CAPS}", "--no-new-privs"]  # fmt: skip


@pytest.fixture
def lab(kernel, tmp_path: Path) -> Iterator[dict]:
    procs = Children()
    try:
        subprocess.run(["ip", "netns", "add", NS], check=True)
        subprocess.run(["ip", "-n", NS, "link", "set", "lo", "up"], check=True)
        netns = ["ip", "netns", "exec", NS]
        for port, backlog, delay in (("8081", "8", "20ms"), ("8080", "4096", "0s")):
            procs.start(
                [*netns, str(BIN / "aqserver"), "-listen", f"127.0.0.1:{port}", "-backlog", backlog,
                 "-accept-delay", delay, "-duration", "60s", "-ready-file", str(tmp_path / f"ready-{port}")],
                tmp_path / f"aqserver-{port}.log",
            )  # fmt: skip
        wait_for("both servers", lambda: all((tmp_path / f"ready-{p}").exists() for p in ("8081", "8080")), 10)
        for port in ("8081", "8080"):
            procs.start(
                [*netns, str(BIN / "connload"), "-target", f"127.0.0.1:{port}", "-rate", "100", "-duration", "40s",
                 "-connect-timeout", "3s", "-out", str(tmp_path / f"connects-{port}.csv")],
                tmp_path / f"connload-{port}.log",
            )  # fmt: skip
        yield {"inode": str(os.stat(f"/run/netns/{NS}").st_ino), "procs": procs}
    finally:
        procs.stop()
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)


def _start(name: str, tmp: Path, prefix: list[str]) -> tuple[subprocess.Popen, Path]:
    d = tmp / name
    (d / "prom").mkdir(parents=True)
    os.chown(d, NOBODY, NOBODY)
    os.chown(d / "prom", NOBODY, NOBODY)
    cmd = [*prefix, str(ROOT / "scripts" / "monitor"), "--prom-dir", str(d / "prom"), "--state-dir", str(d / "state"),
           "--interval", "1", "--socket-scan", "1", "--duration", str(SECONDS), "--keep-files"]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=(d / "log").open("wb")), d


def _series(prom: Path, inode: str, pids: set[str]) -> dict[str, float]:
    """The lab's series (its namespace's, its servers' processes'), a thread by its process."""
    out: dict[str, float] = {}
    for line in "".join(p.read_text() for p in sorted(prom.glob("tq_*.prom"))).splitlines():
        if line.startswith("#") or not line:
            continue
        name_labels, value = line.rsplit(" ", 1)
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', name_labels))
        if labels.get("netns") != inode and labels.get("pid") not in pids:
            continue
        if name_labels.startswith(("tq_destination_", "tq_flow_")):
            continue  # the clients' ports and connections at a scan: not the same moment for both
        labels.pop("tid", None)  # the Go runtime starts threads when it likes
        key = name_labels.split("{", 1)[0] + "{" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())) + "}"
        out[key] = out.get(key, 0.0) + float(value)
    return out


def test_the_sampled_tier_as_a_non_root_user_exports_what_root_does(lab: dict, tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    root, root_dir = _start("root", tmp_path, [])
    user, user_dir = _start("user", tmp_path, AS_UNIT)
    # The non-root exporter holds the three capabilities and nothing else, for itself and its helpers.
    status = wait_for("the exporter as nobody", lambda: _exporter_status(user.pid), 10)
    three = sum(1 << c.bit for c in SAMPLED)
    assert status["Uid"].split()[:2] == [str(NOBODY)] * 2, status
    assert {k: int(status[k], 16) for k in ("CapEff", "CapBnd", "CapAmb")} == dict.fromkeys(
        ("CapEff", "CapBnd", "CapAmb"), three
    ), status
    assert status["NoNewPrivs"] == "1"
    for p, d in ((root, root_dir), (user, user_dir)):
        assert p.wait(timeout=60) == 0, (d / "log").read_text()
    assert "warning" not in (user_dir / "log").read_text()

    pids = {str(p.pid) for p in lab["procs"].procs}
    pids |= {c for p in pids for c in _children(p)}
    as_root = _series(root_dir / "prom", lab["inode"], pids)
    as_user = _series(user_dir / "prom", lab["inode"], pids)
    names = {k.split("{", 1)[0] for k in as_root}
    # What the sampled tier exports for the lab, by root: every family it reads.
    assert {"tq_listener_drops_total", "tq_listener_queue_limit", "tq_listener_owner_info", "tq_owner_info",
            "tq_loop_cpu_seconds_total", "tq_netns_listen_overflows_total", "tq_netns_ephemeral_ports",
            "tq_netns_info"} <= names, sorted(names)  # fmt: skip
    assert set(as_user) == set(as_root), set(as_root) ^ set(as_user)
    for key, v in as_root.items():
        if key.startswith(("tq_listener_queue_limit", "tq_netns_ephemeral_ports", "tq_netns_info", "tq_owner_info",
                           "tq_listener_owner_info")):  # fmt: skip
            assert as_user[key] == v, key
    # One socket per port (member: its inode, the same for both exporters); only :8081 drops.
    slow, fast = (_listener_drops(as_root, port) for port in (8081, 8080))
    assert len(slow) == len(fast) == 1, (slow, fast)
    (slow_key, dropped), (fast_key, _) = *slow.items(), *fast.items()
    assert dropped > 0 and as_user[slow_key] > 0, (dropped, as_user[slow_key])
    assert as_root[fast_key] == as_user[fast_key] == 0
    # The clients' connections as each scan found them (not the same ones): tcp_info read as nobody too.
    flows = [_flow_series(d / "prom", lab["inode"]) for d in (root_dir, user_dir)]
    assert all(flows), flows


def _flow_series(prom: Path, inode: str) -> int:
    """How many tq_flow_ series the exporter wrote for the lab's namespace."""
    text = "".join(p.read_text() for p in sorted(prom.glob("tq_*.prom")))
    return len(re.findall(rf'^tq_flow_\w+{{[^}}]*netns="{inode}"', text, re.M))


def _listener_drops(series: dict[str, float], lport: int) -> dict[str, float]:
    """The lab's listeners' drop series on one port, each socket its own."""
    return {k: v for k, v in series.items() if k.startswith("tq_listener_drops_total{") and f"lport={lport}," in k}


def _exporter_status(pid: int) -> dict[str, str] | None:
    """/proc status of the python exporter that scripts/monitor execs into (same pid)."""
    try:
        if b"monitor.exporter" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return None
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def _children(pid: str) -> set[str]:
    out: set[str] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = (task / "children").read_text().split()
        except OSError:
            continue
        for k in kids:
            out |= {k, *_children(k)}
    return out
