"""Two real podman containers on one host (runc, a root filesystem made here: no registry is
reachable), each in a network namespace this test made, loopback traffic only: in one,
aqserver stops accepting with backlog 8 while its own client connects (the queue overflows);
in the other, aqserver answers a paced client (healthy). Captured by container name
(`capture -n container:NAME`), the finding names the first container and not the second,
the report resolves both namespaces to their containers, and the exporter's owner info
metric names the container behind the listener that dropped."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.integration.children import wait_for

pytestmark = pytest.mark.integration
BIN = ROOT / "build" / "bin"


def _podman(*args: str, check: bool = True) -> str:
    return subprocess.run(["podman", "--runtime", "runc", *args], capture_output=True, text=True,
                          check=check, timeout=60).stdout.strip()  # fmt: skip


def _rootfs(dest: Path) -> Path:
    """busybox, aqserver and connload, with the shared libraries ldd names for them."""
    (dest / "bin").mkdir(parents=True)
    busybox = shutil.which("busybox") or "/bin/busybox"
    shutil.copy(busybox, dest / "bin" / "busybox")
    for name in ("aqserver", "connload"):
        shutil.copy(BIN / name, dest / "bin" / name)
        libs = subprocess.run(["ldd", str(BIN / name)], capture_output=True, text=True, check=False).stdout
        for lib in re.findall(r"(/\S+)", libs):
            target = dest / lib.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(Path(lib).resolve(), target)
    (dest / "tmp").mkdir()
    return dest


def _reap_stale() -> None:
    """Containers and namespaces an earlier run of this test left when it was killed (its pid is
    in their names and is gone): removed, as the drivers' reaper does for theirs."""
    names = _podman("ps", "-a", "--format", "{{.Names}}", check=False).split()
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout.split()
    for name in names + netns:
        m = re.fullmatch(r"tq-test-(?:ctr-)?(?:stall|healthy)-(\d+)", name)
        if m and not Path(f"/proc/{m.group(1)}").exists():
            if name in names:
                _podman("rm", "-f", "-t", "0", name, check=False)
            else:
                subprocess.run(["ip", "netns", "del", name], check=False)


@pytest.fixture
def containers(kernel, tmp_path: Path) -> Iterator[dict[str, str]]:
    if shutil.which("podman") is None or shutil.which("runc") is None:
        msg = "podman and runc are not installed (make setup)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    _reap_stale()
    rootfs = _rootfs(tmp_path / "rootfs")
    tag = str(os.getpid())
    made: dict[str, str] = {}
    try:
        for role, server in (
            ("stall", ["-backlog", "8", "-stall-at", "0s", "-stall-for", "120s"]),
            ("healthy", ["-backlog", "128"]),
        ):
            ns, name = f"tq-test-ctr-{role}-{tag}", f"tq-test-{role}-{tag}"
            subprocess.run(["ip", "netns", "add", ns], check=True)
            made[f"ns:{role}"] = ns
            subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
            _podman("run", "-d", "--name", name, "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=1024:1024",
                    "--network", f"ns:/run/netns/{ns}", "--rootfs", str(rootfs),
                    "/bin/aqserver", "-listen", "127.0.0.1:8080", "-duration", "120s", *server)  # fmt: skip
            made[role] = name
        yield made
    finally:
        for role in ("stall", "healthy"):
            if role in made:
                _podman("rm", "-f", "-t", "0", made[role], check=False)
            if f"ns:{role}" in made:
                subprocess.run(["ip", "netns", "del", made[f"ns:{role}"]], check=False)


def _client(name: str, *args: str) -> None:
    _podman("exec", "-d", name, "/bin/connload", "-target", "127.0.0.1:8080", "-out", "/tmp/connects.csv",
            "-connect-timeout", "1s", *args)  # fmt: skip


def _pid(name: str) -> int:
    return int(_podman("inspect", "--format", "{{.State.Pid}}", name))


def test_the_overflowing_containers_listener_is_named_by_its_container(containers: dict[str, str],
                                                                       tmp_path: Path) -> None:  # fmt: skip
    stall, healthy = containers["stall"], containers["healthy"]
    run = tmp_path / "run"
    cap = subprocess.Popen([str(ROOT / "collector" / "capture"), "-d", "10", "-q", "--no-report", "-p",
                            "accept_queue", "-n", f"container:{stall}", "-n", f"container:{healthy}", "-o", str(run)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    wait_for("the capture", lambda: (run / ".capture-ready").exists() or cap.poll() is not None, 120)
    _client(stall, "-mode", "burst", "-burst", "40", "-burst-every", "1s", "-duration", "6s")
    _client(healthy, "-rate", "20", "-duration", "6s")
    prom = tmp_path / "prom"
    exporter = subprocess.run(
        ["python3", "-m", "monitor.exporter", "--prom-dir", str(prom), "--state-dir", str(tmp_path / "state"),
         "--pack-root", str(ROOT), "--interval", "1", "--duration", "5", "--keep-files"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    _, err = cap.communicate(timeout=120)
    assert cap.returncode == 0, err
    assert exporter.returncode == 0, exporter.stderr

    r = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "analysis", "report", str(run)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    # The probes see the whole host: another test's lab may overflow a listener of its own
    # meanwhile (CI runs two streams of integration tests at once); the containers' are ours.
    ours = {os.stat(f"/proc/{_pid(name)}/ns/net").st_ino for name in (stall, healthy)}
    findings = [f for f in json.loads((run / "verdicts.json").read_text())["findings"]
                if f["status"] in ("confirmed", "suspected") and f["subject"].get("netns") in ours]  # fmt: skip
    overflow = [f for f in findings if f["kind"] == "accept_queue_overflow"]
    assert len(overflow) == 1, findings
    assert overflow[0]["subject"]["owner"]["container_name"] == stall
    assert overflow[0]["subject"]["owner"]["runtime"] == "podman"
    assert not [f for f in findings if (f["subject"].get("owner") or {}).get("container_name") == healthy], findings
    report = (run / "report.md").read_text()
    assert f"container {stall} (podman " in report  # the finding's title names it first
    sampled = next(line for line in report.splitlines() if line.startswith("- Namespaces sampled:"))
    assert f"container {stall} (podman" in sampled and f"container {healthy} (podman" in sampled, sampled

    text = "\n".join(p.read_text() for p in prom.glob("*.prom"))
    owners = {m["pid"]: m for m in (_labels(line) for line in text.splitlines() if line.startswith("tq_owner_info{"))}
    assert owners[str(_pid(stall))]["container"] == stall
    assert owners[str(_pid(healthy))]["container"] == healthy
    dropped = [d for d in (_labels(line) for line in text.splitlines()
               if line.startswith("tq_listener_drops_total{") and float(line.rsplit(" ", 1)[1]) > 0)
               if int(d["netns"]) in ours]  # fmt: skip
    holders = {(m["netns"], m["lport"]): m["pid"] for m in
               (_labels(line) for line in text.splitlines() if line.startswith("tq_listener_owner_info{"))}  # fmt: skip
    assert dropped, "the stalled listener's own drop counter"
    assert {owners[holders[(d["netns"], d["lport"])]]["container"] for d in dropped} == {stall}


def _labels(line: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', line.split("} ", 1)[0]))


def test_capture_refuses_a_container_that_does_not_exist(tmp_path: Path) -> None:
    t0 = time.monotonic()
    r = subprocess.run([str(ROOT / "collector" / "capture"), "-d", "1", "-q", "-n", "container:tq-no-such-container",
                        "-o", str(tmp_path / "run")], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode != 0 and "container:NAME" in r.stderr and time.monotonic() - t0 < 30
    assert not (tmp_path / "run").exists()
