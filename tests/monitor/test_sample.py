"""monitor/exporter/sample.py: a namespace's socket table is read only when it holds enough
sockets for one destination to matter (sockstat first: one line instead of every socket)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from monitor.exporter import sample
from monitor.exporter.objects import Family
from tests.conftest import ROOT


class _Ns:
    def __init__(self, rng: tuple[int, int]) -> None:
        self.pid = {1: os.getpid()}
        self.rng = rng
        self.sampler = ROOT / "collector" / "sample-netns"

    def ports(self, ino: int) -> tuple[int, int]:
        return self.rng


@pytest.mark.parametrize(("sockets", "rng", "read"), [(40, (32768, 60999), False), (150, (32768, 60999), True),
                                                       (40, (40000, 40059), True)])  # fmt: skip
def test_the_table_is_read_only_when_a_destination_could_matter(
    monkeypatch: pytest.MonkeyPatch, sockets: int, rng: tuple[int, int], read: bool
) -> None:
    reads: list[int] = []
    monkeypatch.setattr(sample, "tcp_sockets", lambda pid: sockets)
    monkeypatch.setattr(sample, "socket_table", lambda sampler, pid, ino, rng: reads.append(pid) or {})
    sample.scan_sockets(Family("destination", 20, 600), _Ns(rng), [1], 100, 0.0)  # type: ignore[arg-type]
    assert bool(reads) is read


def test_sockstat_of_this_namespace_is_read(tmp_path: Path) -> None:
    n = sample.tcp_sockets(os.getpid())
    assert n is not None and n >= 0
    assert sample.tcp_sockets(2**31 - 1) is None  # no such process


def hold_sockets() -> None:
    """Run in a fresh namespace by the test below: sockets of known states, held until stdin
    closes. Ports 18790-18792 are below the ephemeral range; clients get ephemeral ports."""
    lsn = socket.create_server(("127.0.0.1", 18790))
    held = []
    for i in range(6):  # 4 closed by the client first (TIME_WAIT on its port), 2 open
        c = socket.create_connection(("127.0.0.1", 18790))
        a, _ = lsn.accept()
        if i < 4:
            c.close()
            a.close()
        else:
            held += [c, a]
    for _ in range(10):  # the server closes first: TIME_WAIT on 18790, not an ephemeral port
        c = socket.create_connection(("127.0.0.1", 18790))
        a, _ = lsn.accept()
        a.close()
        time.sleep(0.01)
        c.close()
    v6 = socket.create_server(("::1", 18791), family=socket.AF_INET6)
    held += [socket.create_connection(("::1", 18791)) for _ in range(2)]
    dual = socket.create_server(("::", 18792), family=socket.AF_INET6, dualstack_ipv6=True)
    mapped = socket.socket(socket.AF_INET6)
    mapped.connect(("::ffff:127.0.0.1", 18792))
    print("ready", flush=True)
    sys.stdin.read()
    for x in [*held, lsn, v6, dual, mapped]:
        x.close()


def test_the_table_counts_each_destination_of_the_namespace_on_ephemeral_ports() -> None:
    """Real sockets in a fresh namespace, read by collector/sample-netns --ephemeral-of from
    outside it (ss through nsenter, the kernel filtering the local ports): the client's ports per destination (open
    and TIME_WAIT), IPv6 and v4-mapped peers under the probes' address form; the server's
    own TIME_WAIT on its service port is not counted (it holds no ephemeral port)."""
    name = f"tq-test-sample-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    holder = None
    try:
        loopback = ["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"]
        subprocess.run(loopback, check=True)
        holder = subprocess.Popen(["ip", "netns", "exec", name, sys.executable, "-c",
                                   "from tests.monitor.test_sample import hold_sockets; hold_sockets()"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        rng = subprocess.run(["ip", "netns", "exec", name, "cat", "/proc/sys/net/ipv4/ip_local_port_range"],
                             capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
        table = sample.socket_table(ROOT / "collector" / "sample-netns", holder.pid, 1, (int(rng[0]), int(rng[1])))
    finally:
        if holder is not None:
            holder.communicate(timeout=30)
        subprocess.run(["ip", "netns", "del", name], check=False)
    assert table == {("127.0.0.1", "18790"): (6, 4), ("::1", "18791"): (2, 0), ("127.0.0.1", "18792"): (1, 0)}
