"""The claims ledger (docs/claims.md): each settled seed claim, checked again."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from analysis.rules import epoll, time_wait
from analysis.run import Run
from tests.conftest import ROOT, fixture_run

SIZING = "accept-overflow-sizing"


def _sysctl(run_name: str, key: str) -> str | None:
    run = Run.open(fixture_run(run_name))
    return run.sysctl(run.lab["server"]["netns_inode"], key)


def test_somaxconn_default() -> None:
    """C01: not 128 — 4096 on this kernel (a fresh namespace's value, captured by the lab)."""
    assert _sysctl(SIZING, "net.core.somaxconn") == "4096"


def test_abort_on_overflow_default() -> None:
    """C12: tcp_abort_on_overflow defaults to 0."""
    assert _sysctl(SIZING, "net.ipv4.tcp_abort_on_overflow") == "0"


def test_port_range_default() -> None:
    """C33: ip_local_port_range defaults to 32768 60999."""
    assert _sysctl(SIZING, "net.ipv4.ip_local_port_range") == "32768 60999"


def test_tw_reuse_default_and_effect() -> None:
    """C36: default tcp_tw_reuse is 2 here (loopback only), not 0; with 1 the ports come back."""
    assert _sysctl(SIZING, "net.ipv4.tcp_tw_reuse") == "2"
    run = Run.open(fixture_run("time-wait-reuse"))
    assert run.sysctl(run.lab["client"]["netns_inode"], "net.ipv4.tcp_tw_reuse") == "1"
    assert (run.table("connects")["errno"] == "EADDRNOTAVAIL").sum() == 0


def test_tw_reuse_delay() -> None:
    """C38: the reuse delay is tcp_tw_reuse_delay (1000 ms), not an RTO."""
    assert _sysctl(SIZING, "net.ipv4.tcp_tw_reuse_delay") == "1000"


def test_effective_limit_is_the_minimum() -> None:
    """C04: limit = min(backlog, somaxconn)."""
    listen = Run.open(fixture_run(SIZING)).table("aq_listen")
    row = listen[listen["lport"] == 8080].iloc[-1]
    assert row["limit_effective"] == min(row["backlog_requested"], 4096) == 16


def test_full_means_depth_above_limit() -> None:
    """C07: the queue holds limit + 1 before the kernel calls it full (not >=); the check is
    lockless, so two CPUs completing handshakes at once can push it a little further."""
    rows = Run.open(fixture_run(SIZING)).table("aq_listener")
    rows = rows[rows["lport"] == 8080]
    limit = int(rows["limit"].max())
    assert (rows["depth_max"] == limit + 1).any()
    assert limit + 1 <= int(rows["depth_max"].max()) <= limit + 4


def test_overflow_delays_rather_than_refuses() -> None:
    """C13: with abort_on_overflow=0 clients wait (SYN retries), they are not refused."""
    c = Run.open(fixture_run(SIZING)).table("connects")
    assert (c["result"] == "connect_refused").sum() == 0
    assert (c["connect_us"] >= 900_000).sum() > 100


def test_ss_send_q_is_the_limit() -> None:
    """C14: Send-Q of a listener is its accept-queue limit."""
    ls = Run.open(fixture_run(SIZING)).table("listeners")
    assert set(ls.loc[ls["lport"] == 8080, "send_q"]) == {16}


def test_syn_queue_shares_the_limit() -> None:
    """C18 (partly): a full small backlog also fills the SYN queue: syncookies are sent."""
    run = Run.open(fixture_run(SIZING))
    d = run.counter_deltas(run.lab["server"]["netns_inode"], ["TCPReqQFullDoCookies"])
    assert int(d["TCPReqQFullDoCookies"].sum()) > 0


def test_go_polls_without_blocking_under_load() -> None:
    """C21 (partly): under load Go's netpoller polls with timeout 0 instead of blocking."""
    pp = epoll.per_process(Run.open(fixture_run("epoll-busy")))
    srv = pp[pp["comm"] == "httpserver"]
    busy = srv[srv["events_sum"] > 500]
    assert int((busy["nb_calls"] == busy["calls"]).sum()) >= 3


def test_fin_timeout_does_not_shorten_time_wait() -> None:
    """C34 refuted, C35 confirmed: TIME_WAIT lasts 60 s with tcp_fin_timeout = 5."""
    run = Run.open(fixture_run("time-wait-fin-timeout"))
    ns = run.lab["client"]["netns_inode"]
    assert run.sysctl(ns, "net.ipv4.tcp_fin_timeout") == "5"
    assert 57 <= time_wait.observed_time_wait_length(run, ns, "198.18.0.1", 8080) <= 63


def test_no_so_backlog_in_go() -> None:
    """C05: there is no SO_BACKLOG socket option in Go's syscall package (nor in Linux)."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    goroot = subprocess.run([go, "env", "GOROOT"], capture_output=True, text=True, check=True).stdout.strip()
    sources = list(Path(goroot, "src", "syscall").glob("zerrors_linux_*.go"))
    assert sources
    assert not any("SO_BACKLOG" in p.read_text() for p in sources)
    assert any("SO_REUSEPORT" in p.read_text() for p in sources)  # the search itself works


@pytest.mark.integration
def test_no_tcp_accept_queue_full_symbol(kernel) -> None:
    """C06: no kernel function tcp_accept_queue_full to put a kprobe on."""
    syms = {line.split()[2] for line in Path("/proc/kallsyms").read_text().splitlines() if len(line.split()) >= 3}
    assert "tcp_conn_request" in syms  # real TCP functions are listed
    assert "tcp_accept_queue_full" not in syms


@pytest.mark.integration
def test_go_listen_uses_kernel_somaxconn(kernel) -> None:
    """C02/C03: plain net.Listen (aqserver -backlog 0) gets the kernel's somaxconn, not 64 or 128."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen(
        [str(ROOT / "build" / "bin" / "aqserver"), "-listen", f"127.0.0.1:{port}", "-backlog", "0", "-duration", "5s"],
        stderr=subprocess.DEVNULL,
    )
    try:
        send_q = None
        for _ in range(50):
            out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout.split()
            if out:
                send_q = int(out[2])
                break
            time.sleep(0.1)
    finally:
        p.terminate()
        p.wait(timeout=10)
    assert send_q == int(Path("/proc/sys/net/core/somaxconn").read_text()) == 4096
