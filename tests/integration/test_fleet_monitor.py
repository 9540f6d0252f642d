"""The monitor installed on a fleet by fleet/monitor.yml (scripts/fleet-monitor), on hosts that
boot systemd: each "host" is a podman container (runc, --systemd=always, privileged so that
systemd can build the unit's sandbox) of a Debian 12 tree with systemd, sshd, python3,
node_exporter and bpftrace (dev/deploy-tree host, imported with podman import: each host has
its own root), in a network namespace the test made, joined to a controller namespace by a
bridge on 198.18.101.0/24. Ansible logs in as root with a key the test made, host keys checked.
Two host groups: node-a runs the sampled tier (the unit's user tq-monitor with three ambient
capabilities), node-b the rare tier (root with the probe drop-in's bounding set, bpftrace);
node-d is in the inventory and never answers.

The first run installs and starts the unit on both live hosts and reports node-d unreachable;
the second changes nothing and restarts nothing; node_exporter serves the monitor's files;
the unit is restarted by systemd when its process is killed, and a clean stop removes the files.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.exporter.privilege import SAMPLED, SYS_NICE
from tests.conftest import ROOT
from tests.integration.children import wait_for

pytestmark = pytest.mark.integration
TAG = str(os.getpid())
CTL = f"tq-fm-ctl-{TAG}"
NET = "198.18.101"
HOSTS = {"node-a": (11, "sampled"), "node-b": (12, "rare")}
DOWN = ("node-d", 14)
IMAGE = f"localhost/tq-fm-host:{TAG}"
SAMPLED_CAPS = sum(1 << c.bit for c in SAMPLED)
# The probe drop-in's bounding set: the three, CAP_BPF (39), CAP_PERFMON (38) and CAP_SYS_NICE.
PROBE_CAPS = SAMPLED_CAPS | 1 << 39 | 1 << 38 | 1 << SYS_NICE.bit


def _podman(*args: str, check: bool = True, timeout: float = 120) -> str:
    r = subprocess.run(["podman", "--runtime", "runc", *args], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: {r.stderr}")
    return r.stdout.strip()


def _ns(host: str) -> str:
    return f"tq-fm-{host}-{TAG}"


def _container(host: str) -> str:
    return f"tq-fm-{host}-{TAG}"


def _sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True)


def _exec(host: str, *cmd: str) -> str:
    return _podman("exec", _container(host), *cmd)


def _unit(host: str) -> dict[str, str]:
    out = _exec(host, "systemctl", "show", "tq-monitor.service", "-p", "ActiveState", "-p", "MainPID",
                "-p", "NRestarts", "-p", "Result", "-p", "User")  # fmt: skip
    return dict(line.split("=", 1) for line in out.splitlines())


def _reap_stale() -> None:
    """What a killed earlier run of this test left (its pid, in the names, is gone)."""
    for name in _podman("ps", "-a", "--format", "{{.Names}}", check=False).split():
        m = re.fullmatch(r"tq-fm-node-[a-z]-(\d+)", name)
        if m and not Path(f"/proc/{m.group(1)}").exists():
            _podman("rm", "-f", "-t", "0", name, check=False)
    for ref in _podman("images", "--format", "{{.Repository}}:{{.Tag}}", check=False).split():
        m = re.fullmatch(r"localhost/tq-fm-host:(\d+)", ref)
        if m and not Path(f"/proc/{m.group(1)}").exists():
            _podman("rmi", "-f", ref, check=False)
    for ns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split():
        m = re.fullmatch(r"tq-fm-(?:ctl|node-[a-z])-(\d+)", ns)
        if m and not Path(f"/proc/{m.group(1)}").exists():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.fixture
def fleet(kernel, tmp_path: Path) -> Iterator[Path]:
    for tool in ("podman", "runc", "ssh", "ssh-keygen", "nsenter", "debootstrap"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing: make setup installs it")
    if not (ROOT / ".venv" / "bin" / "ansible-playbook").exists():
        pytest.fail("ansible-playbook is not in .venv: make setup installs the pinned ansible-core")
    _reap_stale()
    t0 = time.monotonic()
    tree = subprocess.run([str(ROOT / "dev" / "deploy-tree"), "host"], capture_output=True, text=True, timeout=900)
    assert tree.returncode == 0, tree.stderr
    made: dict[str, list[str]] = {"netns": [], "containers": [], "images": []}
    try:
        # Each host's own root: the tree imported once as an image, a container (a layer) each.
        tar = subprocess.Popen(["tar", "-C", tree.stdout.strip().splitlines()[-1], "--numeric-owner", "-cf", "-", "."],
                               stdout=subprocess.PIPE)  # fmt: skip
        made["images"].append(IMAGE)
        subprocess.run(["podman", "import", "--quiet", "-", IMAGE], stdin=tar.stdout, check=True, capture_output=True)
        assert tar.wait() == 0
        print(f"tree and image: {time.monotonic() - t0:.0f} s")
        _sh("ip", "netns", "add", CTL)
        made["netns"].append(CTL)
        _sh("ip", "-n", CTL, "link", "set", "lo", "up")
        _sh("ip", "-n", CTL, "link", "add", "br0", "type", "bridge")
        _sh("ip", "-n", CTL, "addr", "add", f"{NET}.1/24", "dev", "br0")
        _sh("ip", "-n", CTL, "link", "set", "br0", "up")
        _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "tq-fm-test", "-f", str(tmp_path / "id_ed25519"))
        (tmp_path / "authorized_keys").write_text((tmp_path / "id_ed25519.pub").read_text())
        known = []
        for host, (octet, _tier) in HOSTS.items():
            ns, name, d = _ns(host), _container(host), tmp_path / host
            d.mkdir()
            _sh("ip", "netns", "add", ns)
            made["netns"].append(ns)
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
            _sh("ip", "link", "add", f"fm{octet}", "netns", CTL, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _sh("ip", "-n", CTL, "link", "set", f"fm{octet}", "master", "br0", "up")
            _sh("ip", "-n", ns, "addr", "add", f"{NET}.{octet}/24", "dev", "eth0")
            _sh("ip", "-n", ns, "link", "set", "eth0", "up")
            _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "ssh_host_ed25519_key"))
            kind, key = (d / "ssh_host_ed25519_key.pub").read_text().split()[:2]
            known.append(f"{NET}.{octet} {kind} {key}")
            made["containers"].append(name)
            _podman("create", "--name", name, "--hostname", host, "--systemd=always", "--privileged",
                    "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=1024:1024",
                    "--network", f"ns:/run/netns/{ns}", IMAGE, "/sbin/init")  # fmt: skip
            for f in ("ssh_host_ed25519_key", "ssh_host_ed25519_key.pub"):
                _podman("cp", str(d / f), f"{name}:/etc/ssh/{f}")
            _podman("cp", str(tmp_path / "authorized_keys"), f"{name}:/root/.ssh/authorized_keys")
            _podman("start", name)
        for host in HOSTS:
            # "degraded" is a booted host too: a container has units that cannot start (no console).
            state = _podman("exec", _container(host), "systemctl", "is-system-running", "--wait", check=False,
                            timeout=120)  # fmt: skip
            assert state in ("running", "degraded"), (host, state)
            assert _exec(host, "systemctl", "is-active", "ssh.service") == "active"
        print(f"hosts up: {time.monotonic() - t0:.0f} s")
        (tmp_path / "known_hosts").write_text("\n".join(known) + "\n")
        groups = {tier: [h for h, (_o, t) in HOSTS.items() if t == tier] for tier in ("sampled", "rare")}
        (tmp_path / "inventory.ini").write_text(
            "[sampled]\n"
            + "".join(f"{h} ansible_host={NET}.{HOSTS[h][0]}\n" for h in groups["sampled"])
            + f"{DOWN[0]} ansible_host={NET}.{DOWN[1]}\n"
            + "\n[rare]\n"
            + "".join(f"{h} ansible_host={NET}.{HOSTS[h][0]}\n" for h in groups["rare"])
            + "\n[rare:vars]\ntq_tier=rare\n"
            + "\n[all:vars]\nansible_user=root\n"
            f"ansible_ssh_private_key_file={tmp_path / 'id_ed25519'}\n"
            f"ansible_ssh_common_args='-o UserKnownHostsFile={tmp_path / 'known_hosts'} -o StrictHostKeyChecking=yes"
            " -o ConnectTimeout=5'\n"
            "ansible_python_interpreter=/usr/bin/python3\n"
            "# root logs in: no sudo; a write a second so the checks below wait less\n"
            "tq_become=false\ntq_interval=1\n"
        )
        yield tmp_path
    finally:
        for name in made["containers"]:
            _podman("rm", "-f", "-t", "0", name, check=False)
        for image in made["images"]:
            _podman("rmi", "-f", image, check=False)
        for ns in made["netns"]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp_path / "ansible-home")
    left = _podman("ps", "-a", "--format", "{{.Names}}", check=False).split()
    assert not [n for n in left if n.startswith("tq-fm-")], left
    assert IMAGE not in _podman("images", "--format", "{{.Repository}}:{{.Tag}}", check=False).split()
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [n for n in made["netns"] if n in netns.split()], netns


def _playbook(tmp: Path, log: str) -> tuple[int, str, dict[str, dict[str, int]]]:
    env = {
        **os.environ,
        "ANSIBLE_HOME": str(tmp / "ansible-home"),
        "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-local"),
        # One connection per task: no ControlPersist master left running after the test.
        "ANSIBLE_SSH_ARGS": "-o ControlMaster=no",
        "ANSIBLE_PIPELINING": "true",
        "ANSIBLE_NOCOLOR": "1",
    }
    cmd = [str(ROOT / "scripts" / "fleet-monitor"), "-i", str(tmp / "inventory.ini")]
    r = subprocess.run(["nsenter", f"--net=/run/netns/{CTL}", *cmd], capture_output=True, text=True, env=env,
                       timeout=600)  # fmt: skip
    (tmp / log).write_text(r.stdout + r.stderr)
    recap = {
        m.group(1): {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
        for m in re.finditer(r"^(\S+)\s+:\s+(ok=.*)$", r.stdout, re.M)
    }
    return r.returncode, r.stdout + r.stderr, recap


def _metrics(host: str) -> str:
    """What the host's node_exporter serves, asked from the controller as Prometheus would."""
    url = f"http://{NET}.{HOSTS[host][0]}:9100/metrics"
    code = f"import urllib.request; print(urllib.request.urlopen('{url}', timeout=5).read().decode())"
    r = subprocess.run(["nsenter", f"--net=/run/netns/{CTL}", "python3", "-c", code], capture_output=True, text=True)
    return r.stdout


def _status(host: str, pid: str) -> dict[str, str]:
    lines = _exec(host, "cat", f"/proc/{pid}/status").splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def test_the_playbook_installs_the_unit_idempotently_and_systemd_runs_it(fleet: Path) -> None:
    t0 = time.monotonic()
    rc, log, recap = _playbook(fleet, "first.log")
    first_s = time.monotonic() - t0
    # node-d never answers: ansible-playbook says so (4), the others are installed all the same.
    assert rc == 4, log
    assert recap[DOWN[0]]["unreachable"] == 1, recap
    for host in HOSTS:
        assert recap[host]["failed"] == 0 and recap[host]["unreachable"] == 0 and recap[host]["changed"] > 0, recap

    pids = {}
    for host, (_octet, tier) in HOSTS.items():
        unit = wait_for(f"tq-monitor on {host}", lambda h=host: (u := _unit(h))["ActiveState"] == "active" and u, 30)
        pids[host] = unit["MainPID"]
        status = _status(host, unit["MainPID"])
        if tier == "sampled":
            # The unit's user, with the three capabilities and nothing else.
            assert unit["User"] == "tq-monitor"
            assert status["Uid"].split()[0] != "0"
            assert {k: int(status[k], 16) for k in ("CapEff", "CapBnd", "CapAmb")} == dict.fromkeys(
                ("CapEff", "CapBnd", "CapAmb"), SAMPLED_CAPS
            ), status
        else:
            # bpftrace needs euid 0: root, with the drop-in's bounding set only.
            assert status["Uid"].split()[0] == "0"
            assert int(status["CapBnd"], 16) == PROBE_CAPS and int(status["CapEff"], 16) == PROBE_CAPS, status
        assert status["NoNewPrivs"] == "1"
        # node_exporter reads the monitor's folder (the playbook set its ARGS) and serves it.
        text = wait_for(f"tq_ metrics from {host}'s node_exporter", lambda h=host: "tq_exporter_series" in _metrics(h)
                        and _metrics(h), 60, 1)  # fmt: skip
        # sshd's own listener in the host's namespace, read by the sampled tier there (setns and
        # sock_diag), its owner (ss -p: other users' /proc/PID/fd) and that owner's cgroup: this
        # "host" is a podman container, and /proc/PID/cgroup says so.
        sshd = r'laddr="0\.0\.0\.0",lport="22",member="\d+",netns="\d+"'
        assert re.search(rf"tq_listener_queue_limit\{{{sshd}\}} 128", text), text
        assert re.search(rf'tq_listener_owner_info\{{{sshd},pid="\d+"\}} 1', text)
        cid = _podman("inspect", "--format", "{{.Id}}", _container(host))
        assert re.search(rf'tq_owner_info\{{comm="sshd",[^}}]*container_id="{cid}"', text), text
        assert re.search(r'tq_loop_cpu_seconds_total\{comm="sshd",pid="\d+",tid="\d+"\}', text), text
        files = _exec(host, "stat", "-c", "%n %a %U", "/var/lib/tq-monitor/textfile",
                      "/var/lib/tq-monitor/textfile/tq_exporter.prom").splitlines()  # fmt: skip
        user = "tq-monitor" if tier == "sampled" else "root"
        assert files == [f"/var/lib/tq-monitor/textfile 755 {user}",
                         f"/var/lib/tq-monitor/textfile/tq_exporter.prom 644 {user}"], files  # fmt: skip
    # The rare tier's probe runs on node-b only.
    wait_for("the retransmits probe on node-b", lambda: 'tq_probe_up{probe="retransmits",tier="tracepoint"} 1'
             in _metrics("node-b"), 90, 1)  # fmt: skip
    assert "tq_probe_up" not in _metrics("node-a")
    # process_madvise passed the drop-in's system call filter and capabilities: no warning, pages given back.
    journal = _exec("node-b", "journalctl", "-u", "tq-monitor.service", "--no-pager", "-o", "cat")
    assert "pages given back" in journal and "warning" not in journal, journal

    # Again: nothing changes, nothing restarts.
    t1 = time.monotonic()
    rc, log, recap = _playbook(fleet, "second.log")
    second_s = time.monotonic() - t1
    assert rc == 4, log
    for host in HOSTS:
        assert recap[host]["changed"] == 0 and recap[host]["failed"] == 0, (host, recap, log)
        assert _unit(host)["MainPID"] == pids[host]

    # systemd restarts a monitor that dies (Restart=on-failure) ...
    _exec("node-a", "kill", "-KILL", pids["node-a"])
    unit = wait_for("node-a's restart", lambda: (u := _unit("node-a"))["NRestarts"] == "1"
                    and u["ActiveState"] == "active" and u, 30)  # fmt: skip
    assert unit["MainPID"] != pids["node-a"]
    wait_for("node-a writing again", lambda: "tq_exporter_series" in _metrics("node-a"), 30, 1)
    # ... and a clean stop removes the files: node_exporter serves none of them.
    for host in HOSTS:
        _exec(host, "systemctl", "stop", "tq-monitor.service")
        unit = _unit(host)
        assert unit["ActiveState"] == "inactive" and unit["Result"] == "success", unit
        assert _exec(host, "sh", "-c", "ls /var/lib/tq-monitor/textfile | grep -c '^tq_' || true") == "0"
        text = _metrics(host)
        assert "node_textfile_scrape_error" in text, text
        assert not re.search(r"^tq_", text, re.M) and "tq_exporter.prom" not in text, text
    print(f"first run {first_s:.0f} s, second run {second_s:.0f} s")
    print(json.dumps(recap))
