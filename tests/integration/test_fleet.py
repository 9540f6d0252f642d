"""Fleet capture end to end with real parts: scripts/fleet runs the pinned ansible-playbook against
three "hosts", each a network namespace with its own Debian sshd (own host key, root login by a
key the test made, host keys checked), joined to a controller namespace by a bridge; everything
runs on 198.18.100.0/24 inside namespaces the test creates. On one host (node-b) a real listener
overflows: aqserver (backlog 8) stops calling accept() while connload keeps connecting. The
fleet report must name node-b and its listener, and no other host; a fourth host in the
inventory never answers and must be reported as a failed capture, the others still judged.

The three hosts share this kernel, so every capture's probes also see node-b's listener: the
playbook captures with --scope sampled, and the test checks both that the other hosts' probes
did see node-b's namespace and that, without the scope, they would have been blamed for it.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from analysis import families
from tests.conftest import ROOT, leftovers
from tests.integration.children import Children, wait_for

pytestmark = pytest.mark.integration
BIN = ROOT / "build" / "bin"
CTL = f"tq-fleet-ctl-{os.getpid()}"
NET = "198.18.100"
HOSTS = {"node-a": 11, "node-b": 12, "node-c": 13}
FAULTY = "node-b"
# In the inventory, on the bridge's subnet, but nothing answers there: its capture fails.
DOWN = ("node-d", 14)
DURATION = 10


def ns_name(host: str) -> str:
    return f"tq-fleet-{host}-{os.getpid()}"


def sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True)


class Fleet:
    """Namespaces, sshd and lab processes the test owns; stop() removes all of them."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.children = Children()
        self.netns: list[str] = []
        self.made_privsep = False

    def start(self, args: list[str], log: Path) -> subprocess.Popen:
        return self.children.start(args, log)

    def add_netns(self, name: str) -> None:
        sh("ip", "netns", "add", name)
        self.netns.append(name)
        sh("ip", "-n", name, "link", "set", "lo", "up")

    @staticmethod
    def _pids(ns: str) -> list[str]:
        return subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()

    def stop(self) -> None:
        self.children.stop()
        # Whatever still runs in a host is ours: a capture cut short by Ctrl-C, its probes. TERM
        # first (capture then finishes its run and its state entry), KILL what is left.
        killed = False
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = [int(p) for ns in self.netns for p in self._pids(ns)]
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            killed |= bool(pids) and sig == signal.SIGKILL
            end = time.monotonic() + 10
            while sig == signal.SIGTERM and pids and time.monotonic() < end:
                if not any(self._pids(ns) for ns in self.netns):
                    break
                time.sleep(0.2)
        if killed:  # a SIGKILLed capture's run and state entry, finished as every driver does
            subprocess.run([str(ROOT / "collector" / "capture"), "--reap"], capture_output=True)
        for name in self.netns:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        if self.made_privsep:
            with contextlib.suppress(OSError):
                os.rmdir("/run/sshd")


@pytest.fixture
def fleet(kernel, tmp_path: Path) -> Iterator[Fleet]:
    for tool in ("/usr/sbin/sshd", "ssh", "ssh-keygen", "nsenter"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing: make setup installs openssh-server (and util-linux)")
    if not (ROOT / ".venv" / "bin" / "ansible-playbook").exists():
        pytest.fail("ansible-playbook is not in .venv: make setup installs the pinned ansible-core")
    f = Fleet(tmp_path)
    try:
        # The controller: a namespace with a bridge; each host hangs off it by a veth pair.
        f.add_netns(CTL)
        sh("ip", "-n", CTL, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", CTL, "addr", "add", f"{NET}.1/24", "dev", "br0")
        sh("ip", "-n", CTL, "link", "set", "br0", "up")
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "tq-fleet-test", "-f", str(tmp_path / "id_ed25519"))
        (tmp_path / "authorized_keys").write_text((tmp_path / "id_ed25519.pub").read_text())
        if not os.path.isdir("/run/sshd"):  # sshd's privilege separation folder (the service makes it)
            os.mkdir("/run/sshd", 0o755)
            f.made_privsep = True
        known = []
        for host, octet in HOSTS.items():
            ns, addr, d = ns_name(host), f"{NET}.{octet}", tmp_path / host
            d.mkdir()
            f.add_netns(ns)
            sh("ip", "link", "add", f"p{octet}", "netns", CTL, "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "-n", CTL, "link", "set", f"p{octet}", "master", "br0", "up")
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key"))
            kind, key = (d / "host_key.pub").read_text().split()[:2]
            known.append(f"{addr} {kind} {key}")
            (d / "sshd_config").write_text(
                f"ListenAddress {addr}:22\nHostKey {d / 'host_key'}\nPidFile {d / 'sshd.pid'}\n"
                f"AuthorizedKeysFile {tmp_path / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
                "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                "PrintMotd no\nSubsystem sftp internal-sftp\nLogLevel INFO\n"
            )
            # nsenter --net, not ip netns exec: that also remounts /sys, which hides tracefs from bpftrace.
            f.start(["nsenter", f"--net=/run/netns/{ns}", "/usr/sbin/sshd", "-D", "-e", "-f", str(d / "sshd_config")],
                    d / "sshd.log")  # fmt: skip
        (tmp_path / "known_hosts").write_text("\n".join(known) + "\n")
        for host, octet in HOSTS.items():
            wait_for(f"sshd of {host}", lambda o=octet: _listening(f"{NET}.{o}"), 10)
        (tmp_path / "inventory.ini").write_text(
            "[fleet]\n"
            + "".join(f"{h} ansible_host={NET}.{o}\n" for h, o in [*HOSTS.items(), DOWN])
            + "\n[fleet:vars]\nansible_user=root\n"
            f"ansible_ssh_private_key_file={tmp_path / 'id_ed25519'}\n"
            f"ansible_ssh_common_args='-o UserKnownHostsFile={tmp_path / 'known_hosts'} -o StrictHostKeyChecking=yes'\n"
            "ansible_python_interpreter=/usr/bin/python3\n"
            "# root logs in: no sudo\nfleet_become=false\n"
        )
        yield f
    finally:
        f.stop()
    assert not leftovers("tq-fleet"), leftovers("tq-fleet")
    ns_left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [n for n in f.netns if n in ns_left.split()], ns_left


def _listening(addr: str) -> bool:
    ns = next(ns_name(h) for h, o in HOSTS.items() if addr.endswith(f".{o}"))
    out = subprocess.run(["ip", "netns", "exec", ns, "ss", "-Hltn", f"src {addr}:22"], capture_output=True, text=True)
    return bool(out.stdout.strip())


def _capture_log(host_dir: Path) -> str:
    try:
        return (host_dir / "fleet-capture.log").read_text(errors="replace")[-2000:]
    except OSError as e:
        return str(e)


def _inode(ns: str) -> int:
    return os.stat(f"/run/netns/{ns}").st_ino


def test_fleet_report_names_the_faulty_host_only(fleet: Fleet) -> None:
    tmp = fleet.tmp
    out, remote = tmp / "fleet-run", tmp / "remote"
    remote.mkdir()
    env = {
        **os.environ,
        "ANSIBLE_HOME": str(tmp / "ansible-home"),
        "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-local"),
        "ANSIBLE_REMOTE_TMP": str(remote / "ansible-tmp"),
        # One connection per task: no ControlPersist master left running after the test.
        "ANSIBLE_SSH_ARGS": "-o ControlMaster=no",
        "ANSIBLE_PIPELINING": "true",
        "ANSIBLE_NOCOLOR": "1",
    }
    t0 = time.monotonic()
    run = subprocess.Popen(
        ["nsenter", f"--net=/run/netns/{CTL}", str(ROOT / "scripts" / "fleet"), "-i", str(tmp / "inventory.ini"),
         "-d", str(DURATION), "--scope", "sampled", "-o", str(out), "--", "-e", f"fleet_remote_base={remote}"],
        stdout=(tmp / "fleet.log").open("wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )  # fmt: skip
    fleet.children.procs.append(run)
    # The fault starts once every host records: a probe cannot see a listener that was already
    # stuck full when it attached (no connection is queued on it any more, so no event names it),
    # and the other hosts' probes must see it too (.capture-ready exists while a capture records).
    ready = [remote / f"tq-{out.name}-{h}" / "run" / ".capture-ready" for h in HOSTS]
    wait_for("every host's capture", lambda: all(r.exists() for r in ready) or run.poll() is not None, 120)
    assert run.poll() is None, (tmp / "fleet.log").read_text()
    ns, addr = ns_name(FAULTY), f"{NET}.{HOSTS[FAULTY]}"
    lab = tmp / FAULTY
    fleet.start(
        ["nsenter", f"--net=/run/netns/{ns}", str(BIN / "aqserver"), "-listen", f"{addr}:8080", "-backlog", "8",
         "-stall-at", "500ms", "-stall-for", "300s", "-ready-file", str(lab / "aq.ready")],
        lab / "aqserver.log",
    )  # fmt: skip
    wait_for("aqserver", lambda: (lab / "aq.ready").exists(), 10)
    fleet.start(
        ["nsenter", f"--net=/run/netns/{ns}", str(BIN / "connload"), "-target", f"{addr}:8080", "-rate", "50",
         "-duration", "60s", "-connect-timeout", "2s", "-out", str(lab / "connects.csv")],
        lab / "connload.log",
    )  # fmt: skip
    rc = run.wait(timeout=240)
    seconds = time.monotonic() - t0
    log = (tmp / "fleet.log").read_text()
    # node-d never answered: the fleet says so by its exit status, and reports the others all the same.
    assert rc == 1, log
    assert "ansible-playbook exited 4" in log, log
    assert log.rstrip().splitlines()[-1] == str(out)
    print(f"fleet: {seconds:.0f} s")

    report = json.loads((out / "fleet.json").read_text())
    assert set(report["hosts"]) == {*HOSTS, DOWN[0]}
    assert report["hosts_with_findings"] == [FAULTY], (out / "fleet.md").read_text()
    down = report["hosts"].pop(DOWN[0])
    assert down["status"] == "capture failed" and down["error"].startswith("no run fetched"), down
    for host, h in report["hosts"].items():
        # The capture ran inside the host, over its sshd: it sampled that namespace and no other.
        meta = json.loads((out / host / "metadata.json").read_text())
        why = (host, meta["stop_reason"], meta["probes"], _capture_log(out / host))
        assert h["status"] == "captured" and h["complete"] and h["scope"] == "sampled", why
        assert [n["inode"] for n in meta["netns"]] == [_inode(ns_name(host))]
        assert (out / host / "report.md").is_file()
        assert set(h["cells"]) == {f.finding for f in families.load().values()}
        if host != FAULTY:
            assert all(c["status"] in ("absent", "not_checked") for c in h["cells"].values()), (host, h["cells"])
    cell = report["hosts"][FAULTY]["cells"]["accept_queue_overflow"]
    assert cell["status"] == "confirmed", cell
    assert any(o.startswith(f"{addr}:8080") and "aqserver" in o for o in cell["objects"]), cell
    assert cell["cause_classes"] == ["stall"], cell
    md = (out / "fleet.md").read_text()
    assert f"Hosts with a finding: {FAULTY}." in md
    row = next(x for x in md.splitlines() if x.startswith(f"| {FAULTY} |"))
    assert f"{addr}:8080" in row
    assert f"| {DOWN[0]} | capture failed |" in md
    # Nothing left on the hosts: the pack, the run and its tarball were removed; no local tarballs.
    assert not list(remote.glob("tq-*")), list(remote.iterdir())
    assert not (out / ".fetch").exists()

    # The subtlety: the other hosts' probes saw node-b's overflowing listener (one kernel) ...
    faulty_ns = _inode(ns)
    seen_by = [h for h in HOSTS if h != FAULTY and _full_rows(out / h / "aq_listener.csv", faulty_ns)]
    assert seen_by, "no other host's probe saw node-b's namespace: the scope was not put to the test"
    # ... and without the scope the rule itself does not judge a listener in a namespace the
    # capture did not sample: "not checked", never a finding about another host's object.
    from analysis.load import Run
    from analysis.rules import evaluate_all

    other = tmp / "unscoped"
    shutil.copytree(out / seen_by[0], other)
    meta = json.loads((other / "metadata.json").read_text())
    del meta["scope"]
    (other / "metadata.json").write_text(json.dumps(meta))
    judged = [f for f in evaluate_all(Run.open(other))
              if f.kind == "accept_queue_overflow" and f.subject.get("netns") == faulty_ns]  # fmt: skip
    assert judged and all(f.status == "not_checked" for f in judged), judged


def _full_rows(path: Path, netns: int) -> list[dict]:
    with path.open(newline="") as fh:
        return [
            r for r in csv.DictReader(fh)
            if int(r["netns"]) == netns and (int(r["full_events"]) > 0 or int(r["depth_now"]) > int(r["limit"]))
        ]  # fmt: skip
