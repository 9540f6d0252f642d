"""monitor/exporter/listeners.py: listeners from sock_diag, no probe. A real listener on
loopback with a backlog of 1 and more connects than it can queue: the kernel drops the
rest and counts them on that listener (sk_drops); a second listener beside it drops none."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from monitor.exporter.listeners import ListenerScan
from monitor.exporter.objects import Family
from monitor.exporter.sample import Namespaces
from tests.conftest import ROOT

SAMPLER = ROOT / "collector" / "sample-netns"


@pytest.fixture
def listeners() -> Iterator[tuple[socket.socket, socket.socket]]:
    full, idle = socket.socket(), socket.socket()
    for s, backlog in ((full, 1), (idle, 64)):
        s.bind(("127.0.0.1", 0))
        s.listen(backlog)
    yield full, idle
    full.close()
    idle.close()


def _ino(s: socket.socket) -> str:
    """A socket's inode: the member label of its series."""
    return str(os.fstat(s.fileno()).st_ino)


def test_each_member_of_a_reuseport_group_is_its_own_series() -> None:
    """Two SO_REUSEPORT sockets on one port: one accepts everything hashed to it, the other never
    does. The drops land on the stalled member's series alone (the sampler used to keep the
    first socket of a port and skip the others, stalled or not)."""
    members: list[socket.socket] = []
    for backlog in (64, 1):  # room for a round's share on the taker; none on the stalled one
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind(("127.0.0.1", members[0].getsockname()[1] if members else 0))
        s.listen(backlog)
        members.append(s)
    taker, stalled = members
    port, inos = taker.getsockname()[1], {"taker": _ino(taker), "stalled": _ino(stalled)}
    taker.setblocking(False)
    ns = Namespaces(SAMPLER)
    ns.scan(time.monotonic())
    scan, fam = ListenerScan(SAMPLER), Family("listener", top_n=50, ttl=600)
    scan.scan(fam, ns, [ns.host], 1.0)
    clients: list[socket.socket] = []
    try:
        for _ in range(5):  # new source ports each round: both members get a share
            clients += _connect_many(port, 12)
            time.sleep(0.1)
            while True:
                try:
                    taker.accept()[0].close()
                except BlockingIOError:
                    break
        scan.scan(fam, ns, [ns.host], 2.0)
    finally:
        for c in clients + members:
            c.close()
    mine = {name: fam.objs.get((str(ns.host), "127.0.0.1", str(port), ino)) for name, ino in inos.items()}
    assert mine["stalled"] is not None and mine["taker"] is not None, list(fam.objs)
    assert mine["stalled"].counters["listener_drops_total"] > 0
    assert mine["taker"].counters.get("listener_drops_total", 0) == 0


def _connect_many(port: int, n: int) -> list[socket.socket]:
    out = []
    for _ in range(n):
        c = socket.socket()
        c.setblocking(False)
        c.connect_ex(("127.0.0.1", port))
        out.append(c)
    return out


def test_drops_count_on_the_listener_that_dropped_and_no_other(listeners) -> None:
    full, idle = listeners
    ns = Namespaces(SAMPLER)
    ns.scan(time.monotonic())
    host = [ns.host]
    scan, fam = ListenerScan(SAMPLER), Family("listener", top_n=50, ttl=600)
    scan.scan(fam, ns, host, 1.0)  # the baseline: what was dropped before is not counted
    clients = _connect_many(full.getsockname()[1], 6)
    try:
        time.sleep(0.3)
        scan.scan(fam, ns, host, 2.0)
    finally:
        for c in clients:
            c.close()
    ns_label = str(ns.host)
    busy = fam.objs[(ns_label, "127.0.0.1", str(full.getsockname()[1]), _ino(full))]
    quiet = fam.objs[(ns_label, "127.0.0.1", str(idle.getsockname()[1]), _ino(idle))]
    # backlog 1 queues 2 (the kernel allows limit + 1); the other 4 SYNs were dropped, each
    # at least once (a SYN re-sent within 0.3 s is not expected: the first retry is at 1 s).
    assert busy.counters["listener_drops_total"] >= 4
    assert busy.gauges["listener_queue_depth"] == 2 and busy.gauges["listener_queue_limit"] == 1
    assert quiet.counters.get("listener_drops_total", 0) == 0
    assert quiet.gauges["listener_queue_depth"] == 0 and quiet.gauges["listener_queue_limit"] == 64
    assert os.getpid() in scan.owners


def test_a_counter_that_goes_down_is_a_new_socket() -> None:
    scan = ListenerScan(SAMPLER)
    key = ("1", "::", "80")
    assert scan._dropped(key, "7") == 0  # first scan: baseline
    scan.scans = 1
    assert scan._dropped(key, "10") == 3
    assert scan._dropped(key, "2") == 2  # the listener was closed and opened again
    assert scan._dropped(("1", "::", "81"), "5") == 5  # new since the first scan: all of it
    assert scan._dropped(key, "") == 0  # no skmem from ss: nothing is known, nothing counted


def test_owners_are_kept_between_scans_per_namespace_and_go_with_the_scan(listeners, tmp_path) -> None:
    """With an owners cache the sampler keeps each namespace's ss -p table between scans (it
    reads every open file on the host); the owner is named as without it, a namespace not
    scanned any more loses its table, and close() removes the folder."""
    full, _ = listeners
    ns = Namespaces(SAMPLER)
    ns.scan(time.monotonic())
    cache = tmp_path / "owners"
    cache.mkdir()
    (cache / "12345.owners").write_text("a namespace gone since\n")
    scan, fam = ListenerScan(SAMPLER, cache), Family("listener", top_n=50, ttl=600)
    scan.scan(fam, ns, [ns.host], 1.0)
    assert {f.name for f in cache.iterdir()} == {f"{ns.host}.owners", f"{ns.host}.inodes"}
    key = (str(ns.host), "127.0.0.1", str(full.getsockname()[1]), _ino(full))
    assert scan.holders[key] == os.getpid()
    scan.close()
    assert not cache.exists()


# A listener whose process names itself with bytes that are no UTF-8 (the kernel lets a comm hold
# any byte but NUL, and ss -p prints it raw): it listens, renames itself, prints its port.
ODD_COMM_LISTENER = """
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(4)
with open("/proc/self/comm", "wb") as f:
    f.write(b"\\xffodd,\\xfe")
print(s.getsockname()[1], flush=True)
sys.stdin.read()
"""


def test_a_listener_whose_owner_has_a_comm_that_is_no_utf8_is_scanned() -> None:
    """A process on the host with such a name held a listener while the exporter scanned (a
    CI host, beside the tests): the scan stopped the exporter with a UnicodeDecodeError. Its
    listener is scanned as any other, its owner named by pid."""
    p = subprocess.Popen([sys.executable, "-c", ODD_COMM_LISTENER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None
        port = p.stdout.readline().decode().strip()
        ns = Namespaces(SAMPLER)
        ns.scan(time.monotonic())
        scan, fam = ListenerScan(SAMPLER), Family("listener", top_n=50, ttl=600)
        scan.scan(fam, ns, [ns.host], 1.0)
        assert [k for k in fam.objs if k[1:3] == ("127.0.0.1", port)]
        assert p.pid in scan.owners
    finally:
        assert p.stdin is not None
        p.stdin.close()
        p.wait(timeout=10)
