"""The claims ledger (docs/claims.md): each settled seed claim, checked again."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from analysis.derived import counters
from analysis.derived.epoll import per_process
from analysis.derived.time_wait import observed_time_wait_length
from analysis.load import Run
from analysis.rules import evaluate_all
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
    d = counters.per_sample(run, run.lab["server"]["netns_inode"], ["TCPReqQFullDoCookies"])
    assert int(d["TCPReqQFullDoCookies"].sum()) > 0


def test_go_polls_without_blocking_under_load() -> None:
    """C21 (partly): under load Go's netpoller polls with timeout 0 instead of blocking."""
    pp = per_process(Run.open(fixture_run("epoll-busy")))
    srv = pp[pp["comm"] == "httpserver"]
    busy = srv[srv["events_sum"] > 500]
    assert int((busy["nb_calls"] == busy["calls"]).sum()) >= 3


def test_fin_timeout_does_not_shorten_time_wait() -> None:
    """C34 refuted, C35 confirmed: TIME_WAIT lasts 60 s with tcp_fin_timeout = 5."""
    run = Run.open(fixture_run("time-wait-fin-timeout"))
    ns = run.lab["client"]["netns_inode"]
    assert run.sysctl(ns, "net.ipv4.tcp_fin_timeout") == "5"
    assert 57 <= observed_time_wait_length(run, ns, "198.18.0.1", 8080) <= 63


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


# --- Claims checked in the models/comparisons round (docs/claims.md, C46+) ----------


def _goroot() -> Path:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    return Path(subprocess.run([go, "env", "GOROOT"], capture_output=True, text=True, check=True).stdout.strip())


def _kallsyms() -> set[str]:
    return {line.split()[2] for line in Path("/proc/kallsyms").read_text().splitlines() if len(line.split()) >= 3}


def test_accept_eagain_means_empty_not_full() -> None:
    """C09: accept() EAGAIN means the accept queue is EMPTY (non-blocking), not full."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        srv.setblocking(False)
        with pytest.raises(BlockingIOError):
            srv.accept()  # nothing queued: EAGAIN
        with socket.create_connection(srv.getsockname(), timeout=2):
            for _ in range(100):
                try:
                    conn, _ = srv.accept()  # one queued: accept succeeds
                    conn.close()
                    break
                except BlockingIOError:
                    time.sleep(0.01)
            else:
                pytest.fail("queued connection was never accepted")


@pytest.mark.integration
def test_invented_kernel_symbols_do_not_exist(kernel) -> None:
    """C11: sys_accept4, reqsk_queue_added, tcp_time_wait_kill (named in the seeds) are not kernel functions."""
    syms = _kallsyms()
    assert {"__x64_sys_accept4", "inet_csk_reqsk_queue_add", "inet_twsk_kill", "tcp_v4_conn_request"} <= syms
    assert not {"sys_accept4", "sys_accept", "reqsk_queue_added", "tcp_time_wait_kill"} & syms


@pytest.mark.integration
def test_tracepoint_names_from_the_seeds(kernel) -> None:
    """C11: inet_sock_set_state is in sock:, not net:; there is no tcp:tcp_set_state tracepoint."""
    events = Path("/sys/kernel/tracing/events")
    if not events.is_dir():
        events = Path("/sys/kernel/debug/tracing/events")
    assert (events / "sock" / "inet_sock_set_state").is_dir()
    assert not (events / "net" / "inet_sock_set_state").exists()
    assert (events / "tcp").is_dir() and not (events / "tcp" / "tcp_set_state").exists()
    # Half-open requests are TCP_NEW_SYN_RECV sockets in the established hash (4.4+), not a syn_table.
    assert "TCP_NEW_SYN_RECV" in (events / "sock" / "inet_sock_set_state" / "format").read_text()


def test_go_calls_epoll_pwait_not_epoll_wait() -> None:
    """C20: strace -e epoll_wait / tracepoint:syscalls:sys_enter_epoll_wait see nothing of Go's netpoller."""
    src = (_goroot() / "src" / "runtime" / "netpoll_epoll.go").read_text()
    assert "EpollWait(" in src
    defs = (_goroot() / "src" / "internal" / "runtime" / "syscall" / "linux" / "defs_linux_amd64.go").read_text()
    assert "SYS_EPOLL_PWAIT" in defs and "SYS_EPOLL_WAIT " not in defs


def test_so_reuseport_not_set_by_go() -> None:
    """C17: Go's Linux listeners set SO_REUSEADDR only; SO_REUSEPORT needs ListenConfig.Control."""
    src = (_goroot() / "src" / "net" / "sockopt_linux.go").read_text()
    assert "SO_REUSEADDR" in src and "SO_REUSEPORT" not in src


def test_go_runtime_constants() -> None:
    """C19: goroutine stacks start at 2 KB (confirmed); no 'GOMAXPROCS x 4' thread rule (cap 10000)."""
    rt = _goroot() / "src" / "runtime"
    assert "stackMin = 2048" in (rt / "stack.go").read_text()
    assert "maxmcount = 10000" in (rt / "proc.go").read_text()


def test_epoll_max_user_watches_is_memory_based() -> None:
    """C26: max_user_watches is not 65536 nor file-max/256: it is 4 % of low memory / per-watch cost."""
    watches = int(Path("/proc/sys/fs/epoll/max_user_watches").read_text())
    file_max = int(Path("/proc/sys/fs/file-max").read_text())
    assert watches != 65536 and watches != file_max // 256
    mem_kb = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
    # EP_ITEM_COST is ~128-200 bytes depending on the build: the watch limit scales with RAM.
    assert mem_kb * 1024 / 25 / 250 < watches < mem_kb * 1024 / 25 / 100


def test_linger_zero_sends_rst() -> None:
    """C37: SO_LINGER with timeout 0 makes close() reset the connection (no FIN, no TIME_WAIT)."""
    import struct

    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        cli = socket.create_connection(srv.getsockname(), timeout=2)
        conn, _ = srv.accept()
        with conn:
            cli.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            port = cli.getsockname()[1]
            cli.close()
            conn.settimeout(2)
            with pytest.raises(ConnectionResetError):
                conn.recv(1)
        tw = subprocess.run(["ss", "-tanH", "state", "time-wait", f"sport = :{port}"], capture_output=True, text=True)
        assert tw.stdout.strip() == ""


def test_swappiness_default_and_range() -> None:
    """C39: vm.swappiness default 60 (confirmed here); the range is 0-200 since 5.8, not 0-100."""
    assert Path("/proc/sys/vm/swappiness").read_text().strip() == "60"


def test_tw_recycle_is_gone() -> None:
    """C45: the seeds still set tcp_tw_recycle=0; the key was removed in Linux 4.12."""
    assert not Path("/proc/sys/net/ipv4/tcp_tw_recycle").exists()
    assert Path("/proc/sys/net/ipv4/tcp_tw_reuse").exists()


# The socket-buffer claims (C50-C55): the socket-buffers lab over a 100 Mbit/s path with a real
# delay (build/bin/delayline), with the kernel's defaults, seed 003's sysctls (its profile,
# sysctl-profiles/seed-003-buffers.conf) and its SetReadBuffer(64 KB).
def _flow_numbers(name: str) -> tuple[Run, dict, dict]:
    run = Run.open(fixture_run(f"socket-buffers-{name}"))
    ss = run.lab["flow"]["ss"]
    return run, ss["sender"]["last"], ss["receiver"]["last"]


def test_autotuning_is_on_by_default_and_is_not_capped_by_rmem_max() -> None:
    """C50/C54: tcp_moderate_rcvbuf is 1 and, with no SO_RCVBUF, the receive buffer grew past
    net.core.rmem_max (4 MiB) toward tcp_rmem's max (32 MiB) on a 400 ms path."""
    run, _, receiver = _flow_numbers("healthy-rtt400")
    ns = run.lab["server"]["netns_inode"]
    assert run.sysctl(ns, "net.ipv4.tcp_moderate_rcvbuf") == "1"
    assert run.sysctl(ns, "net.ipv4.tcp_rmem") == "4096 131072 33554432"
    assert run.lab["flow"]["reader"]["rcvbuf_requested"] == 0
    assert receiver["rcvbuf"] > 4 * int(run.sysctl(ns, "net.core.rmem_max") or 0) > 0


def test_the_seeds_buffer_sysctls_lift_the_send_cap_and_lower_the_receive_one() -> None:
    """C50: with the defaults the send buffer stops at tcp_wmem's 4 MiB on a 5 MB BDP path (the
    finding: small_sndbuf at that max); seed 003's 16 MiB lifts it and the flow carries more; but its
    tcp_rmem max (16 MiB) is below 6.18's 32 MiB, and on an 800 ms path the receive buffer stops there."""
    default, d_snd, _ = _flow_numbers("healthy-rtt400")
    _, s_snd, _ = _flow_numbers("seed003-rtt400")
    assert d_snd["sndbuf"] == 4194304 and s_snd["sndbuf"] == 16777216
    assert s_snd["bytes_acked"] > 1.5 * d_snd["bytes_acked"]
    (f,) = [x for x in evaluate_all(default) if x.kind == "socket_buffer_limit" and x.is_finding]
    assert f.cause_class == "small_sndbuf" and f.link("fix").key == "small_sndbuf_at_max"
    far, _, far_receiver = _flow_numbers("seed003-rtt800")
    assert far_receiver["rcvbuf"] == 16777216
    (f,) = [x for x in evaluate_all(far) if x.kind == "socket_buffer_limit" and x.is_finding]
    assert f.cause_class == "small_rcvbuf" and f.link("fix").key == "small_rcvbuf_at_max"


def test_a_slow_reader_closes_its_window_and_loses_nothing() -> None:
    """C52: a reader slower than its sender does not overflow its buffer into loss: it advertises a
    zero window and the sender waits."""
    run = Run.open(fixture_run("socket-buffers-slow-reader"))
    ns = run.lab["server"]["netns_inode"]
    assert counters.total_delta(run, ns, "TCPToZeroWindowAdv") > 0
    for name in ("TCPZeroWindowDrop", "TCPRcvQDrop", "RcvPruned", "TCPRcvCollapsed"):
        assert counters.total_delta(run, ns, name) == 0, name


def test_so_rcvbuf_64k_pins_the_window_far_below_the_path() -> None:
    """C53: SetReadBuffer(64 KB) (SO_RCVBUF 65536: sk_rcvbuf 128 KiB, autotuning off) on a
    100 Mbit/s, 200 ms path carried under a twentieth of it."""
    run, sender, receiver = _flow_numbers("rcvbuf64k-rtt200")
    assert receiver["rcvbuf"] == 131072 and run.lab["flow"]["reader"]["rcvbuf_requested"] == 65536
    secs = sender["time_s"] - run.lab["flow"]["ss"]["sender"]["first"]["time_s"]
    assert sender["bytes_acked"] / secs < run.lab["path"]["rate_bits_per_s"] / 8 / 20
    (f,) = [x for x in evaluate_all(run) if x.kind == "socket_buffer_limit" and x.is_finding]
    assert f.cause_class == "small_rcvbuf"


def test_buffer_sysctls_a_namespace_refuses(kernel) -> None:
    """C51/C54: net.core.rmem_max and rmem_default cannot be set inside a network namespace on this
    kernel (a container's --sysctl of them fails); tcp_rmem can."""
    ns = f"tq-claims-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        for key, value, ok in (("net.core.rmem_max", "262144", False), ("net.core.rmem_default", "65536", False),
                               ("net.ipv4.tcp_rmem", "4096 65536 16777216", True)):  # fmt: skip
            # tee, not sysctl -w: procps's sysctl exits 0 after "Invalid argument".
            path = "/proc/sys/" + key.replace(".", "/")
            r = subprocess.run(["ip", "netns", "exec", ns, "tee", path], input=value.encode(), capture_output=True)
            assert (r.returncode == 0) == ok, (key, r.stderr)
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=True)
