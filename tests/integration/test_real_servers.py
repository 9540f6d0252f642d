"""Real servers as users run them, in a namespace the test makes (loopback only).

A Java server (`new ServerSocket(port)`: backlog 50 on a dual-stack "::" listener) stalls
under 300 IPv4 clients of 127.0.0.1. The kernel sees the server's side as ::ffff:127.0.0.1
and the clients' as 127.0.0.1: one listener, one overflow finding, and the clients'
retransmits attributed to that full accept queue, never to loss on a path (issue 18: they
were "data segments lost on the path (data_loss)" on loopback).

memcached at its connection limit (-c 20; -o no_maxconns_fast, the way it worked before 1.5
and still does when accept() runs out of file descriptors) stops accepting by calling
listen(fd, 0), and listen(fd, 32) again when connections close: the limit in force at the
overflow is 0, not the 32 asked for, and the chain names the listen() calls."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.integration.children import end_capture, wait_for

pytestmark = pytest.mark.integration
SERVERS = Path(__file__).with_name("servers")


@pytest.fixture
def netns() -> Iterator[str]:
    name = f"tq-test-srv-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
    try:
        yield name
    finally:
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split()
        for pid in pids:
            subprocess.run(["kill", "-KILL", pid], check=False)
        subprocess.run(["ip", "netns", "del", name], check=False)


@pytest.fixture
def capture() -> Iterator[Callable[[str, Path, str], subprocess.Popen]]:
    """Starts a capture with no end of its own: _stop ends it once the clients are done. A fixed
    duration raced the test's own steps, which a busy CI host slows (memcached started 11.6 s
    into a 12 s capture once: the probe's last interval came before its overflow). One still
    running when the test ends (a failed step) is interrupted."""
    started: list[subprocess.Popen] = []

    def start(ns: str, run: Path, probes: str) -> subprocess.Popen:
        args = [str(ROOT / "collector" / "capture"), "-d", "300", "-q", "-n", ns, "-p", probes, "-o", str(run)]
        cap = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        started.append(cap)
        wait_for("the capture", lambda: (run / ".capture-ready").exists() or cap.poll() is not None, 120)
        assert cap.poll() is None, cap.stderr.read() if cap.stderr else ""
        return cap

    yield start
    for cap in started:
        if cap.poll() is None:
            cap.send_signal(signal.SIGINT)
            cap.wait(timeout=120)


def _stop(cap: subprocess.Popen) -> None:
    """Two more of the probe's 1 s intervals (what the servers did once the clients left),
    then the capture's own early stop (SIGUSR1: complete, with its report)."""
    time.sleep(2.5)
    end_capture(cap)


def test_a_dual_stack_java_listener_overflowing_under_ipv4_clients(
    kernel, netns: str, capture: Callable[[str, Path, str], subprocess.Popen], tmp_path: Path
) -> None:
    java = subprocess.Popen(["ip", "netns", "exec", netns, "java", str(SERVERS / "StallServer.java"), "7401", "60"],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert java.stdout is not None
    assert "listening" in java.stdout.readline()  # compiled and bound
    run = tmp_path / "run"
    cap = capture(netns, run, "accept_queue,retransmits")
    clients = subprocess.run(["ip", "netns", "exec", netns, sys.executable, str(SERVERS / "clients.py"), "127.0.0.1",
                              "7401", "300", "8"], capture_output=True, text=True, timeout=60)  # fmt: skip
    _stop(cap)
    assert clients.stdout.strip() == "connected 51 of 300", clients.stdout  # 50 queued + 1 (depth > limit)
    findings = [f for f in json.loads((run / "verdicts.json").read_text())["findings"] if f["status"] != "absent"]
    mine = [f for f in findings if f["subject"].get("netns_label") == netns]
    overflow = [f for f in mine if f["kind"] == "accept_queue_overflow"]
    assert [(f["subject"]["laddr"], f["subject"]["lport"], f["subject"]["comm"]) for f in overflow] == [
        ("::", 7401, "java")
    ], overflow
    assert overflow[0]["subject"]["dual_stack"] is True and overflow[0]["cause_class"] == "stall"
    limit = next(link for link in overflow[0]["chain"] if link["link"] == "probe")["evidence"]["limit"]
    assert limit == 50  # Java's default backlog
    storms = [f for f in mine if f["kind"] == "retransmit_storm"]
    assert storms, mine
    for f in storms:
        # The clients' side, 127.0.0.1 -> 127.0.0.1:7401, and the server's, ::ffff:127.0.0.1: one queue.
        assert f["cause_class"] in ("remote_accept_queue_full", "local_accept_queue_full"), f
    report = (run / "report.md").read_text()
    assert "[::]:7401 (dual-stack: IPv4 clients too) (java pid" in report
    for wrong in ("on the path", "lossy hop", "data_loss", "syn_loss"):
        assert wrong not in report, (wrong, report)


def test_memcached_lowers_its_backlog_to_0_at_its_connection_limit(
    kernel, netns: str, capture: Callable[[str, Path, str], subprocess.Popen], tmp_path: Path
) -> None:
    mc = ["memcached", "-u", "nobody", "-l", "127.0.0.1", "-p", "11311", "-b", "32", "-c", "20", "-t", "1",
          "-o", "no_maxconns_fast"]  # fmt: skip
    run = tmp_path / "run"
    # Started after the probe, so its first listen(fd, 32) is seen too.
    cap = capture(netns, run, "accept_queue")
    server = subprocess.Popen(["ip", "netns", "exec", netns, *mc], stderr=subprocess.DEVNULL)
    listening = ["ip", "netns", "exec", netns, "ss", "-ltnH", "sport", "= :11311"]
    wait_for("memcached", lambda: "LISTEN" in subprocess.run(listening, capture_output=True, text=True).stdout, 30)
    clients = subprocess.run(["ip", "netns", "exec", netns, sys.executable, str(SERVERS / "clients.py"), "127.0.0.1",
                              "11311", "60", "5"], capture_output=True, text=True, timeout=60)  # fmt: skip
    _stop(cap)
    server.kill()
    connected = int(clients.stdout.split()[1])
    assert connected < 60, clients.stdout  # the rest found no room
    findings = json.loads((run / "verdicts.json").read_text())["findings"]
    mine = [f for f in findings if f["kind"] == "accept_queue_overflow" and f["subject"].get("netns_label") == netns]
    assert [(f["subject"]["lport"], f["subject"]["comm"], f["status"]) for f in mine] == [
        (11311, "memcached", "confirmed")
    ], mine
    probe = next(link for link in mine[0]["chain"] if link["link"] == "probe")["evidence"]
    assert probe["limit"] == 0, probe  # in force at the overflow
    changes = probe["limit_changes"]
    assert [(c["from"], c["to"]) for c in changes][:2] == [(32, 0), (0, 32)], changes
    assert changes[0]["listen"]["backlog"] == 0 and changes[0]["listen"]["comm"] == "memcached", changes
    report = (run / "report.md").read_text()
    assert "from 32 to 0 at" in report and "called listen(fd, 0)" in report, report
    # Recognised from its executable (processes.csv), so the fix names memcached's own knob.
    assert "For memcached: `-c` / `--conn-limit`" in report, report


NGINX_REUSEPORT = """worker_processes 4;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
    server {{ listen 127.0.0.1:7402 reuseport backlog=16; location / {{ return 200 "hello\\n"; }} }}
}}
"""


def _nginx_workers(master: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(master), "-x", "nginx"], capture_output=True, text=True).stdout.split()
    return sorted(int(p) for p in found)


def test_nginx_reuseport_names_the_stopped_worker(
    kernel, netns: str, capture: Callable[[str, Path, str], subprocess.Popen], tmp_path: Path
) -> None:
    """Issue 34: nginx with `listen ... reuseport` and four workers has four sockets on one port,
    each held by the master and every worker, and watched (epoll) by one worker. One worker
    stopped (SIGSTOP) under load: only its socket's queue fills and drops. The finding names that
    worker's pid, from the socket's epoll watcher, and no other process."""
    conf = tmp_path / "nginx"
    conf.mkdir()
    (conf / "nginx.conf").write_text(NGINX_REUSEPORT.format(d=conf))
    nginx = subprocess.Popen(["ip", "netns", "exec", netns, "nginx", "-p", str(conf), "-c", str(conf / "nginx.conf")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    stopped = 0
    try:
        workers = wait_for(
            "four nginx workers", lambda: _nginx_workers(nginx.pid) if len(_nginx_workers(nginx.pid)) == 4 else None, 30
        )
        run = tmp_path / "run"
        cap = capture(netns, run, "accept_queue")
        stopped = workers[1]
        os.kill(stopped, signal.SIGSTOP)
        load = subprocess.run(["ip", "netns", "exec", netns, str(ROOT / "build" / "bin" / "connload"), "-target",
                               "127.0.0.1:7402", "-mode", "rate", "-rate", "200", "-duration", "5s",
                               "-connect-timeout", "2s", "-io-timeout", "2s", "-out", str(tmp_path / "connects.csv")],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert load.returncode == 0, load.stderr[-2000:]
        _stop(cap)
    finally:
        if stopped:
            os.kill(stopped, signal.SIGCONT)
        nginx.terminate()
        nginx.wait(timeout=30)
    v = json.loads((run / "verdicts.json").read_text())
    mine = [
        f for f in v["findings"] if f["kind"] == "accept_queue_overflow" and f["subject"].get("netns_label") == netns
    ]
    assert [(f["subject"]["pid"], f["subject"]["source"]) for f in mine] == [(stopped, "epoll set")], mine
    assert {o["pid"] for o in mine[0]["subject"]["owners"]} == {stopped}
    assert mine[0]["subject"]["group"]["members"] == 4
    others = next(link for link in mine[0]["chain"] if link["link"] == "probe")["evidence"]["group_others"]
    assert {m["pid"] for m in others} == set(workers) - {stopped} and all(m["drops"] == 0 for m in others)
