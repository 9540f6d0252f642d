"""The DaemonSet's pod template (deploy/kubernetes/tq-monitor.yaml) run for real by podman kube
play (4.3 refuses the DaemonSet kind: the test lifts the template into a Pod), from the image
deploy/image/build makes from a local Debian tree: the monitor (uid 0 with three capabilities,
no privileged) and the node_exporter sidecar reading its textfiles. The real Prometheus of
test_prometheus.py scrapes the sidecar and evaluates monitor/tq.rules.yml; in a lab namespace
made after the pod started, a listener with backlog 8 and a slow accept loop overflows beside
a healthy one: tq_listener_drops_total names it and TQAcceptQueueOverflow fires for it alone.

What the test changes in the template, and why: the image (the one it built); node_exporter's
address (a free port on 127.0.0.1, not :9110 on every address); --interval 1 (a write a second,
as test_prometheus.py); the emptyDir volumes' names (podman 4.3 makes each a named volume, and
names are global on a host). What it gives podman through a containers.conf: runc's rlimits
within this host's (nofile 20000), and pidns=host, because podman 4.3 ignores hostPID (reported
to arrive in 4.5): without it the monitor sees only the pod's own processes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from monitor.exporter.privilege import SAMPLED
from tests.conftest import ROOT
from tests.integration.children import Children, wait_for
from tests.integration.test_prometheus import NS, _free_port, _overflow, _query

pytestmark = pytest.mark.integration
TAG = str(os.getpid())
POD = f"tq-kube-{TAG}"
IMAGE = f"localhost/tq-kube:{TAG}"
MANIFEST = ROOT / "deploy" / "kubernetes" / "tq-monitor.yaml"


def _podman(*args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
    r = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=120, env=env)
    if check and r.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: {r.stdout}{r.stderr}")
    return r.stdout.strip()


def pod_of_daemonset(manifest: Path, name: str, image: str, port: int) -> dict:
    """The DaemonSet's pod template as a Pod, with the test's changes (the module's docstring)."""
    (ds,) = list(yaml.safe_load_all(manifest.read_text()))
    assert ds["kind"] == "DaemonSet"
    spec = ds["spec"]["template"]["spec"]
    for c in spec["containers"]:
        c["image"] = image
        listen = f"--web.listen-address=127.0.0.1:{port}"
        c["args"] = [listen if a == "--web.listen-address=:9110" else a for a in c["args"]]
        if c["name"] == "monitor":
            i = c["args"].index("--interval")
            c["args"][i + 1] = "1"
        for m in c.get("volumeMounts", []):
            if m["name"].startswith("tq-"):
                m["name"] += f"-{TAG}"
    for v in spec["volumes"]:
        if v["name"].startswith("tq-"):
            v["name"] += f"-{TAG}"
    labels = ds["spec"]["template"]["metadata"]["labels"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}


def _reap_stale() -> None:
    for pod in _podman("pod", "ps", "--format", "{{.Name}}", check=False).split():
        m = re.fullmatch(r"tq-kube-(\d+)", pod)
        if m and not Path(f"/proc/{m.group(1)}").exists():
            _podman("pod", "rm", "-f", pod, check=False)
    for vol in _podman("volume", "ls", "--format", "{{.Name}}", check=False).split():
        m = re.fullmatch(r"tq-[a-z]+-(\d+)", vol)
        if m and not Path(f"/proc/{m.group(1)}").exists():
            _podman("volume", "rm", "-f", vol, check=False)
    for ref in _podman("images", "--format", "{{.Repository}}:{{.Tag}}", check=False).split():
        m = re.fullmatch(r"localhost/tq-kube:(\d+)", ref)
        if m and not Path(f"/proc/{m.group(1)}").exists():
            _podman("rmi", "-f", ref, check=False)


@pytest.fixture
def pod(kernel, tmp_path: Path) -> Iterator[dict]:
    for tool in ("podman", "runc", "catatonit", "prometheus", "promtool", "debootstrap"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing: make setup installs it")
    _reap_stale()
    images_before = set(_podman("images", "--format", "{{.Repository}}:{{.Tag}}").split())
    conf = tmp_path / "containers.conf"
    conf.write_text(
        '[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=1024:1024"]\npidns = "host"\n'
        '[engine]\nruntime = "runc"\n'
    )
    env = {**os.environ, "CONTAINERS_CONF": str(conf)}
    port, prom_port = _free_port(), _free_port()
    spec = tmp_path / "pod.yaml"
    procs = Children()
    built = played = False
    try:
        r = subprocess.run([str(ROOT / "deploy" / "image" / "build"), "--tag", IMAGE], capture_output=True, text=True,
                           timeout=900)  # fmt: skip
        built = True
        assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == IMAGE, r.stderr
        spec.write_text(yaml.safe_dump(pod_of_daemonset(MANIFEST, POD, IMAGE, port)))
        played = True
        _podman("kube", "play", str(spec), env=env)
        (tmp_path / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"rule_files: ['{ROOT / 'monitor' / 'tq.rules.yml'}']\n"
            "scrape_configs:\n"
            f"  - job_name: node\n    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n"
        )
        procs.start(
            ["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            tmp_path / "prometheus.log",
        )  # fmt: skip
        prom = f"http://127.0.0.1:{prom_port}"
        wait_for("the pod's monitor, through node_exporter and Prometheus",
                 lambda: _query(prom, 'tq_exporter_series{job="node"}'), 60, 0.5)  # fmt: skip
        # The lab namespace comes after the pod: found while it runs, through /run/netns.
        subprocess.run(["ip", "netns", "add", NS], check=True)
        subprocess.run(["ip", "-n", NS, "link", "set", "lo", "up"], check=True)
        yield {"tmp": tmp_path, "prom": prom, "env": env}
    finally:
        procs.stop()
        if played:
            _podman("kube", "down", str(spec), env=env, check=False)
        if built:
            _podman("rmi", "-f", IMAGE, check=False)
        # The pause image podman 4.3 builds for a pod's infra container, when this test made it.
        for ref in set(_podman("images", "--format", "{{.Repository}}:{{.Tag}}", check=False).split()) - images_before:
            if ref.startswith("localhost/podman-pause:"):
                _podman("rmi", ref, check=False)
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    assert POD not in _podman("pod", "ps", "--format", "{{.Name}}", check=False).split()
    assert not [v for v in _podman("volume", "ls", "--format", "{{.Name}}", check=False).split() if v.endswith(TAG)]
    assert IMAGE not in _podman("images", "--format", "{{.Repository}}:{{.Tag}}", check=False).split()


def _status(container: str) -> dict[str, str]:
    """/proc status of the container's first process (the monitor: scripts/monitor execs the
    exporter; the sidecar: node_exporter)."""
    pid = _podman("inspect", container, "--format", "{{.State.Pid}}")
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def test_the_pod_template_names_the_overflowing_listener_and_fires_the_alert(pod: dict) -> None:
    monitor, sidecar = f"{POD}-monitor", f"{POD}-node-exporter"
    # What kube play made of the template's security fields: no privileged, three capabilities.
    inspect = {
        c: _podman("inspect", c, "--format", "{{.HostConfig.NetworkMode}} {{.HostConfig.Privileged}} "
                   "{{.HostConfig.ReadonlyRootfs}} {{.HostConfig.Memory}} {{.HostConfig.SecurityOpt}}")
        for c in (monitor, sidecar)
    }  # fmt: skip
    assert inspect[monitor] == f"host false true {64 << 20} [no-new-privileges]", inspect
    assert inspect[sidecar] == f"host false true {64 << 20} [no-new-privileges]", inspect
    status = _status(monitor)
    three = sum(1 << c.bit for c in SAMPLED)
    assert status["Uid"].split()[0] == "0" and status["NoNewPrivs"] == "1", status
    assert int(status["CapEff"], 16) == three and int(status["CapBnd"], 16) == three, status
    assert _status(sidecar)["Uid"].split()[0] == "65534"
    modes = _podman("exec", monitor, "stat", "-c", "%a", "/textfile/tq_exporter.prom", "/textfile/tq_netns.prom")
    assert modes.split() == ["644", "644"], modes

    lab = Children()
    try:
        alert = _overflow({"tmp": pod["tmp"], "prom": pod["prom"]}, lab)
        sel = f'netns="{alert["labels"]["netns"]}",laddr="127.0.0.1"'
        dropped = _query(pod["prom"], f'tq_listener_drops_total{{{sel},lport="8081"}}')
        assert dropped and float(dropped[0]["value"][1]) > 0, dropped
        healthy = _query(pod["prom"], f'tq_listener_drops_total{{{sel},lport="8080"}}')
        assert healthy and float(healthy[0]["value"][1]) == 0, healthy
        assert _query(pod["prom"], f'tq_listener_queue_limit{{{sel},lport="8081"}} == 8')
    finally:
        lab.stop()
