"""collector/sample-netns: the one reader of listeners (capture's listeners.csv, the exporter's
--listeners-of) and of per-thread clocks (threads.csv, --threads-of). ss pads the first
skmem line with spaces to the width of its columns: data/ss-ltnpmH.txt is `ss -ltnpmH` on
this project's CI machine (a listener on 0.0.0.0:2024 and three python3 listeners),
verbatim. Every listener must get its drop counter, padded line or not."""

from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

SS_OUTPUT = Path(__file__).parent / "data" / "ss-ltnpmH.txt"


def _need_root() -> None:
    if os.geteuid() != 0:
        (pytest.fail if os.environ.get("CI") else pytest.skip)("needs root for ip netns")


def _with_fake_ss(tmp_path: Path, text: str) -> dict[str, str]:
    ss = tmp_path / "bin" / "ss"
    ss.parent.mkdir()
    (tmp_path / "out.txt").write_text(text)
    ss.write_text(f"#!/bin/sh\ncat '{tmp_path / 'out.txt'}'\n")
    ss.chmod(ss.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{ss.parent}:{os.environ['PATH']}"}


def _with_ss_logging_its_calls(tmp_path: Path, calls: Path) -> dict[str, str]:
    """An environment whose ss is the real one, each call's arguments appended to CALLS first."""
    ss = tmp_path / "bin" / "ss"
    ss.parent.mkdir()
    ss.write_text(f"#!/bin/sh\necho \"$*\" >>'{calls}'\nexec '{shutil.which('ss')}' \"$@\"\n")
    ss.chmod(0o755)
    return {**os.environ, "PATH": f"{ss.parent}:{os.environ['PATH']}"}


def _listeners_of_self(env: dict[str, str]) -> list[dict[str, str]]:
    r = subprocess.run([str(ROOT / "collector" / "sample-netns"), "--listeners-of", str(os.getpid())],
                       capture_output=True, text=True, check=True, env=env)  # fmt: skip
    return list(csv.DictReader(io.StringIO(r.stdout)))


def test_every_listener_gets_its_drops_even_after_a_padded_skmem_line(tmp_path: Path) -> None:
    text = SS_OUTPUT.read_text()
    assert "d0)   " in text  # the padding this test is about is in the capture
    rows = _listeners_of_self(_with_fake_ss(tmp_path, text))
    assert len(rows) == text.count("LISTEN") == 4
    assert all(r["drops"] == "0" for r in rows), rows
    assert {r["lport"] for r in rows if r["comm"] == "python3"} == {"18600", "18601", "18602"}


def test_drops_belong_to_their_own_listener(tmp_path: Path) -> None:
    lines = SS_OUTPUT.read_text().splitlines(keepends=True)
    # Give each listener a different count: the Nth skmem line says d<N>7.
    n, out = 0, []
    for line in lines:
        if "skmem:" in line:
            n += 1
            line = line.replace("d0)", f"d{n}7)")
        out.append(line)
    rows = _listeners_of_self(_with_fake_ss(tmp_path, "".join(out)))
    assert [r["drops"] for r in rows] == ["17", "27", "37", "47"]
    assert [r["lport"] for r in rows] == [ln.split()[3].rsplit(":", 1)[1] for ln in lines if ln.startswith("LISTEN")]


def test_listeners_without_the_state_column_and_a_comm_that_forges_lines(tmp_path: Path) -> None:
    """`ss state listening` prints no State column (ss -l asks for CLOSE sockets too, and the
    kernel then walks every socket of the namespace). A listener's lines end at its skmem line,
    and only one that follows its closed users field: a comm holding a line shaped like a
    listener or like a skmem line (any byte but NUL may be in a comm) makes no row and no
    drops of its own."""
    lines = SS_OUTPUT.read_text().replace("LISTEN ", "").splitlines(keepends=True)
    hostile = 'users:(("a\n\t skmem:(d99)\n0 0 9.9.9.9:1 *:*",pid=24311,fd=9))'
    lines[2] = lines[2].replace('users:(("python3",pid=24311,fd=3))', hostile)
    lines[3] = lines[3].replace("d0)", "d7)")
    rows = _listeners_of_self(_with_fake_ss(tmp_path, "".join(lines)))
    assert [(r["lport"], r["pid"], r["drops"]) for r in rows] == [
        ("2024", "", "0"), ("18600", "24311", "7"), ("18601", "24311", "0"), ("18602", "24311", "0")
    ]  # fmt: skip
    assert rows[1]["comm"] == "a\n\t skmem:(d99)\n0 0 9.9.9.9:1 *:*"


# `ss -tnmeH state listening` and `ss -tnpmeH state listening` in a fresh namespace where one
# python3 held 127.0.0.1:18600 and :18601 (backlog 16) and [::1]:18602 (backlog 8, v6only).
SS_LISTENING = Path(__file__).parent / "data" / "ss-tnmeH-listening.txt"
SS_LISTENING_OWNERS = Path(__file__).parent / "data" / "ss-tnpmeH-listening.txt"


def _with_fake_ss_pair(tmp_path: Path, listening: str, owners: str) -> dict[str, str]:
    """An ss that answers -p with OWNERS and anything else with LISTENING, and logs its calls."""
    ss = tmp_path / "bin" / "ss"
    ss.parent.mkdir(exist_ok=True)
    (tmp_path / "listening.txt").write_text(listening)
    (tmp_path / "owners.txt").write_text(owners)
    ss.write_text(
        f"#!/bin/sh\necho \"$*\" >>'{tmp_path / 'calls.txt'}'\n"
        f"case \"$*\" in *-tnpmeH*) cat '{tmp_path / 'owners.txt'}' ;; *) cat '{tmp_path / 'listening.txt'}' ;; esac\n"
    )
    ss.chmod(ss.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{ss.parent}:{os.environ['PATH']}"}


def test_owners_join_the_listeners_by_socket_inode(tmp_path: Path) -> None:
    """Each listener's queue and drops come from the table without -p, its pid and comm from
    the owners table (ss -p), matched by socket inode: a comm that forges an inode, or a
    listener the owners table does not have, takes no one else's owner."""
    owners = SS_LISTENING_OWNERS.read_text().replace('"python3",pid=665', '"x ino:106244954 y",pid=665', 1)
    listening = SS_LISTENING.read_text().replace("d0)", "d5)", 1) + (
        "0      4      127.0.0.1:18603 0.0.0.0:* ino:106244999 sk:6cd9f2 cgroup:unreachable:1 <->\n"
        "\t skmem:(r0,rb131072,t0,tb16384,f0,w0,o0,bl0,d0)\n"
    )
    rows = _listeners_of_self(_with_fake_ss_pair(tmp_path, listening, owners))
    got = [(r["laddr"], r["lport"], r["send_q"], r["pid"], r["comm"], r["drops"]) for r in rows]
    assert got == [
        ("127.0.0.1", "18600", "16", "665", "x ino:106244954 y", "5"),
        ("127.0.0.1", "18601", "16", "665", "python3", "0"),
        ("::1", "18602", "8", "665", "python3", "0"),
        ("127.0.0.1", "18603", "4", "", "", "0"),
    ]


def test_ss_p_runs_when_the_listeners_change_not_at_every_sample(tmp_path: Path) -> None:
    """ss -p reads every open file's link on the host (0.27 s of CPU a call with 18 000 of them):
    with the listeners unchanged the sampler asks it at the first sample, then 1, 2, 4 ... s
    later (a server's workers are forked just after it listens), not at every sample: in 8 s
    at 0.25 s, 4 times (3 to 5 with the clock's whole seconds) of 32."""
    env = _with_fake_ss_pair(tmp_path, SS_LISTENING.read_text(), SS_LISTENING_OWNERS.read_text())
    out = tmp_path / "samples"
    subprocess.run([str(ROOT / "collector" / "sample-netns"), "--out", str(out), "--interval", "0.25",
                    "--duration", "8"], check=True, env=env, timeout=60)  # fmt: skip
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    listening = [c for c in calls if "state listening" in c]
    owners = sum("-tnpmeH" in c for c in listening)
    assert 3 <= owners <= 5 and len(listening) - owners >= 32, calls
    rows = list(csv.DictReader((out / "listeners.csv").open()))
    assert {(r["lport"], r["pid"], r["comm"]) for r in rows} == {
        (p, "665", "python3") for p in ("18600", "18601", "18602")
    }
    assert not list(out.glob(".listener*")), "the owners table is left behind"


# Listens on 127.0.0.1:8080, after 2 s connects to itself and holds the connection for 10 s.
LISTEN_THEN_CONNECT = (
    "import socket, time; l = socket.create_server(('127.0.0.1', 8080)); time.sleep(2); "
    "c = socket.create_connection(('127.0.0.1', 8080)); a = l.accept(); time.sleep(10)"
)


def test_a_namespace_of_listeners_only_starts_no_ss_for_flows_or_time_wait(tmp_path: Path) -> None:
    """Where sockstat counts no socket but the listeners and no TIME_WAIT, the flows' and the
    TIME_WAIT listings are known empty: no ss is started for them (in an emulated guest one costs
    as much as the rest of a sample), and the samples still count as listed. Once a connection
    exists, each sample lists it."""
    _need_root()
    name = f"tq-test-idle-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        server = subprocess.Popen(["ip", "netns", "exec", name, "python3", "-c", LISTEN_THEN_CONNECT])
        calls = tmp_path / "calls.txt"
        env = _with_ss_logging_its_calls(tmp_path, calls)
        out = tmp_path / "out"
        time.sleep(0.5)
        subprocess.run(["ip", "netns", "exec", name, str(ROOT / "collector" / "sample-netns"), "--out", str(out),
                        "--interval", "0.5", "--duration", "4"], check=True, timeout=60, env=env)  # fmt: skip
        server.kill()
        server.wait()
        rows = list(csv.DictReader((out / "sockstat.csv").open()))
        assert {(r["tw_listed"], r["flows_listed"], r["tcp_tw"]) for r in rows} == {("1", "1", "0")}, rows
        with_flows = [r for r in rows if int(r["tcp_inuse"]) > 1]
        assert 0 < len(with_flows) < len(rows), rows
        listed = calls.read_text().splitlines()
        assert sum("state established" in c for c in listed) == len(with_flows), listed
        assert not any("time-wait" in c for c in listed), listed
        flows = list(csv.DictReader((out / "sock_buffers.csv").open()))
        assert flows and all("8080" in (r["lport"], r["rport"]) for r in flows), flows
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def test_a_namespace_without_a_tcp_socket_is_listed_without_ss(tmp_path: Path) -> None:
    """--listeners-of and --buffers-of (the exporter's scans of every namespace) start no ss where
    sockstat counts no TCP socket at all, IPv4 or IPv6; once a listener exists it is listed."""
    _need_root()
    name = f"tq-test-empty-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    holder = None
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        holder = subprocess.Popen(["ip", "netns", "exec", name, "python3", "-c", HOLD_THEN_LISTEN],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert holder.stdout is not None and holder.stdin is not None
        pid = holder.stdout.readline().strip()
        calls = tmp_path / "calls.txt"
        env = _with_ss_logging_its_calls(tmp_path, calls)
        serve = [str(ROOT / "collector" / "sample-netns"), "--listeners-of", pid]
        r = subprocess.run(serve, capture_output=True, text=True, check=True, env=env)
        assert r.stdout.splitlines()[1:] == [] and not calls.exists()
        (tmp_path / "state").mkdir()
        flows = [str(ROOT / "collector" / "sample-netns"), "--buffers-of", "--state", str(tmp_path / "state"), pid]
        assert subprocess.run(flows, capture_output=True, text=True, check=True, env=env).stdout.count("\n") == 1
        assert not calls.exists()
        holder.stdin.write("listen\n")
        holder.stdin.flush()
        port = holder.stdout.readline().strip()
        rows = list(csv.DictReader(io.StringIO(subprocess.run(serve, capture_output=True, text=True, check=True,
                                                              env=env).stdout)))  # fmt: skip
        assert [(r["laddr"], r["lport"]) for r in rows] == [("::1", port)]
        assert sum("state listening" in c for c in calls.read_text().splitlines()) >= 1
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
        subprocess.run(["ip", "netns", "del", name], check=False)


# Prints its pid, then on a line from stdin listens on [::1] (IPv6: sockstat6 counts it) and
# prints the port; holds it until killed.
HOLD_THEN_LISTEN = (
    "import os, socket, sys; print(os.getpid(), flush=True); sys.stdin.readline(); "
    "l = socket.create_server(('::1', 0), family=socket.AF_INET6); print(l.getsockname()[1], flush=True); "
    "sys.stdin.readline()"
)


# Listens on 127.0.0.1:PORT and prints its pid; after FORK_AFTER seconds forks a worker that
# holds the listener too (as nginx's master forks its workers) and prints its pid; both hold
# it for 6 s.
LISTEN_FOR = (
    "import os, socket, sys, time; l = socket.create_server(('127.0.0.1', int(sys.argv[1]))); "
    "print(os.getpid(), flush=True); time.sleep(float(sys.argv[2])); "
    "pid = os.fork(); pid or time.sleep(6); print(pid, flush=True); time.sleep(6)"
)


def test_a_new_listener_gets_its_owner_at_the_next_sample(tmp_path: Path) -> None:
    """In a real namespace: a worker forked about 1 s after the first sample gets its threads
    sampled within seconds (the owners are asked again 1 s, then 2 s later), a listener added later gets its owner at
    the next sample, and ss -p runs at far fewer samples than there are."""
    _need_root()
    name = f"tq-test-owners-{os.getpid()}"
    env = _with_ss_logging_its_calls(tmp_path, tmp_path / "calls.txt")
    subprocess.run(["ip", "netns", "add", name], check=True)
    servers: list[subprocess.Popen[str]] = []
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        netns = ["ip", "netns", "exec", name]
        servers.append(
            subprocess.Popen([*netns, "python3", "-c", LISTEN_FOR, "18600", "1"], stdout=subprocess.PIPE, text=True)
        )
        first = servers[0].stdout.readline().strip()  # type: ignore[union-attr]
        out = tmp_path / "samples"
        sampler = subprocess.Popen([*netns, str(ROOT / "collector" / "sample-netns"), "--out", str(out),
                                    "--interval", "0.25", "--duration", "6"], env=env)  # fmt: skip
        worker = servers[0].stdout.readline().strip()  # type: ignore[union-attr]
        # The owners are asked at the first sample, then within 1 s and 2 s after that.
        time.sleep(3.5)
        added = time.time()
        servers.append(
            subprocess.Popen([*netns, "python3", "-c", LISTEN_FOR, "18601", "9"], stdout=subprocess.PIPE, text=True)
        )
        second = servers[1].stdout.readline().strip()  # type: ignore[union-attr]
        assert sampler.wait(timeout=30) == 0
    finally:
        for p in servers:
            p.kill()
            p.wait()
        subprocess.run(["ip", "netns", "del", name], check=False)
    calls = [c for c in (tmp_path / "calls.txt").read_text().splitlines() if "state listening" in c]
    owners = sum("-tnpmeH" in c for c in calls)
    assert owners <= 7 and len(calls) - owners >= 24, calls
    rows = list(csv.DictReader((out / "listeners.csv").open()))
    assert {r["pid"] for r in rows if r["lport"] == "18600"} <= {first, worker}  # the first holder ss -p names
    assert {r["pid"] for r in rows if r["lport"] == "18601"} == {second}
    assert all(r["comm"] == "python3" for r in rows)
    # The worker's threads, sampled before the second listener came (which asks ss -p anyway).
    threads = list(csv.DictReader((out / "threads.csv").open()))
    assert min(float(r["time_s"]) for r in threads if r["pid"] == worker) < added


TW_OUTPUT = Path(__file__).parent / "data" / "ss-tanoH-time-wait.txt"  # `ss -tanoH state time-wait`, 3 loopback closes


def _sample_once(tmp_path: Path, script: str) -> list[dict[str, str]]:
    """tw_sockets.csv of one sample with SCRIPT as ss, taken in a namespace that holds real
    TIME_WAIT sockets (where sockstat counts none, the sampler starts no ss for the table)."""
    ss = tmp_path / "bin" / "ss"
    ss.parent.mkdir(exist_ok=True)
    ss.write_text(script)
    ss.chmod(ss.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{ss.parent}:{os.environ['PATH']}"}
    out = tmp_path / "samples"
    with _namespace_with_time_wait("fake-ss", 1) as name:
        subprocess.run(["ip", "netns", "exec", name, str(ROOT / "collector" / "sample-netns"), "--out", str(out),
                        "--duration", "1"], check=True, env=env, timeout=30)  # fmt: skip
    return list(csv.DictReader((out / "tw_sockets.csv").open()))


def test_time_wait_sockets_grouped_per_service(tmp_path: Path) -> None:
    rows = _sample_once(tmp_path, f"#!/bin/sh\ncat '{TW_OUTPUT}'\n")
    assert [(r["laddr"], r["raddr"], r["service_port"], r["service_local"], r["count"]) for r in rows] == [
        ("127.0.0.1", "127.0.0.1", "18700", "1", "3")
    ]
    assert rows[0]["timer_min_s"] == rows[0]["timer_max_s"] == "59"


def test_an_ss_stopped_mid_dump_leaves_no_row(tmp_path: Path) -> None:
    """capture's TERM can reach ss while it dumps 10 000 TIME_WAIT sockets: its last line is
    cut. That sample is dropped, not turned into a row of empty addresses (a one-hour soak
    capture's tw_sockets.csv had one, and the report refused the run)."""
    head = TW_OUTPUT.read_text().splitlines()[0]
    rows = _sample_once(tmp_path, f"#!/bin/sh\necho '{head}'\nprintf '0      0      127.0'\nkill -TERM $$\n")
    assert rows == []


def test_a_line_cut_short_is_no_socket(tmp_path: Path) -> None:
    """A fresh-clone CI run's stall lab got the row `198.18.0.1,,198.18` from a table cut
    mid-line while it was handed to the parser: whatever cuts it, a line whose peer has no
    port is not a socket, and the whole lines beside it still count."""
    lines = TW_OUTPUT.read_text().splitlines()
    text = "\n".join([*lines, "0      0      198.18.0.1:8080      198.18"]) + "\n"
    (tmp_path / "tw.txt").write_text(text)
    rows = _sample_once(tmp_path, f"#!/bin/sh\ncat '{tmp_path / 'tw.txt'}'\n")
    assert [(r["raddr"], r["service_port"]) for r in rows] == [("127.0.0.1", "18700")]


# `ss -tanoH '( sport >= :32768 and sport <= :60999 )'` in the namespace of
# tests/monitor/test_sample.py's hold_sockets (6 connections to 127.0.0.1:18790, 4 of them
# closed by the client, 2 to [::1]:18791, 1 v4-mapped to [::]:18792), verbatim.
EPHEMERAL_OUTPUT = Path(__file__).parent / "data" / "ss-tanoH-ephemeral.txt"


def test_ephemeral_sockets_per_destination_in_the_kernel_address_forms(tmp_path: Path) -> None:
    """--ephemeral-sockets (the exporter's ports in use and TIME_WAIT per destination) reads
    the same ss listing and parser as tw_sockets.csv: brackets and scopes go, a v4-mapped
    peer stays as the kernel has it (the loaders and the exporter join on the plain form),
    a listener on an ephemeral port and a line cut short are no destination."""
    extra = ["ESTAB 0 0 [fe80::1]%lo:40000 [fe80::2]%lo:8080", "LISTEN 0 128 127.0.0.1:40001 0.0.0.0:*",
             "LISTEN 0 128 127.0.0.1:40002 127.0.0.1:9", "TIME-WAIT 0 0 198.18.0.1:40003 198.18"]  # fmt: skip
    env = _with_fake_ss(tmp_path, EPHEMERAL_OUTPUT.read_text() + "\n".join(extra) + "\n")
    r = subprocess.run([str(ROOT / "collector" / "sample-netns"), "--ephemeral-sockets", "--netns-id", "7"],
                       capture_output=True, text=True, check=True, env=env)  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert {r["netns"] for r in rows} == {"7"}
    assert {(r["raddr"], r["rport"]): (int(r["sockets"]), int(r["time_wait"])) for r in rows} == {
        ("127.0.0.1", "18790"): (6, 4),
        ("::1", "18791"): (2, 0),
        ("::ffff:127.0.0.1", "18792"): (1, 0),
        ("fe80::2", "8080"): (1, 0),
    }


def test_threads_of_a_process_with_a_hostile_thread_name() -> None:
    """--threads-of (capture's threads.csv, the exporter's loop clocks): every thread of the
    PID with the scheduler's clocks, its name quoted per RFC 4180 (a comm may hold , " LF)."""
    import threading

    ready, done = threading.Event(), threading.Event()
    tid: list[int] = []

    def named() -> None:
        tid.append(threading.get_native_id())
        Path(f"/proc/self/task/{tid[0]}/comm").write_text('a,b"c\nd')
        ready.set()
        done.wait(10)

    t = threading.Thread(target=named)
    t.start()
    try:
        ready.wait(10)
        r = subprocess.run([str(ROOT / "collector" / "sample-netns"), "--threads-of", str(os.getpid())],
                           capture_output=True, text=True, check=True)  # fmt: skip
    finally:
        done.set()
        t.join()
    rows = {int(r["tid"]): r for r in csv.DictReader(io.StringIO(r.stdout))}
    assert os.getpid() in rows and tid[0] in rows
    assert rows[tid[0]]["comm"] == 'a,b"c\nd'
    mine = Path(f"/proc/self/task/{os.getpid()}/schedstat").read_text().split()
    assert 0 < int(rows[os.getpid()]["cpu_ns"]) <= int(mine[0])
    assert rows[os.getpid()]["netns"] == str(os.stat("/proc/self/ns/net").st_ino)


def test_a_pid_given_with_its_namespace_inode_starts_no_stat(tmp_path: Path) -> None:
    """PID:INODE (the exporter knows each namespace's inode): the rows carry the inode as given
    and no stat process runs (one is about 2 million instructions of the guest's 1-GIPS vCPU);
    a bare PID is still looked up, and a PID gone since is left out, inode or not."""
    calls = tmp_path / "execs"
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "stat").write_text(f'#!/bin/sh\necho stat >>"{calls}"\nexec /usr/bin/stat "$@"\n')
    (shim / "stat").chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"}
    sampler = str(ROOT / "collector" / "sample-netns")
    ino = os.stat("/proc/self/ns/net").st_ino
    dead = subprocess.Popen(["true"])
    dead.wait()
    given = subprocess.run([sampler, "--threads-of", f"{os.getpid()}:{ino}", f"{dead.pid}:{ino}"],
                           capture_output=True, text=True, check=True, env=env)  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(given.stdout)))
    assert {r["pid"] for r in rows} == {str(os.getpid())} and {r["netns"] for r in rows} == {str(ino)}
    assert not calls.exists()
    counters = subprocess.run([sampler, "--counters-of", f"{os.getpid()}:{ino}"],
                              capture_output=True, text=True, check=True, env=env)  # fmt: skip
    assert {r["netns"] for r in csv.DictReader(io.StringIO(counters.stdout))} == {str(ino)}
    assert not calls.exists()
    looked_up = subprocess.run([sampler, "--threads-of", str(os.getpid())],
                               capture_output=True, text=True, check=True, env=env)  # fmt: skip
    assert {r["netns"] for r in csv.DictReader(io.StringIO(looked_up.stdout))} == {str(ino)}
    assert calls.read_text().split() == ["stat"]


def test_processes_csv_names_each_process_of_a_namespace_with_its_cgroup(tmp_path: Path) -> None:
    """A namespace that is not the host's: every process living in it gets a row (who owns the
    namespace), with /proc/PID/cgroup's lines joined by ';' as analysis/cgroups.py reads them."""
    _need_root()
    name = f"tq-test-members-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    sleeper = subprocess.Popen(["ip", "netns", "exec", name, "sleep", "30"])
    try:
        out = tmp_path / "out"
        for _ in range(50):  # until ip netns exec has become sleep
            if Path(f"/proc/{sleeper.pid}/comm").read_text().strip() == "sleep":
                break
            subprocess.run(["sleep", "0.05"], check=True)
        subprocess.run(["ip", "netns", "exec", name, str(ROOT / "collector" / "sample-netns"), "--out", str(out),
                        "--duration", "1"], check=True, timeout=30)  # fmt: skip
        rows = list(csv.DictReader((out / "processes.csv").open()))
        mine = [r for r in rows if r["pid"] == str(sleeper.pid)]
        assert len(mine) == 1 and mine[0]["comm"] == "sleep" and mine[0]["exe"].endswith("/sleep"), rows
        cgroup = Path(f"/proc/{sleeper.pid}/cgroup").read_text().strip().replace("\n", ";")
        assert mine[0]["cgroup"] == cgroup
        assert len(rows) == len({r["pid"] for r in rows})  # once each
        assert all(r["comm"] != "sample-netns" for r in rows)  # not itself
    finally:
        sleeper.kill()
        sleeper.wait()
        subprocess.run(["ip", "netns", "del", name], check=False)


# Started by `ip netns exec`: a shell until it execs a server that listens (its pid stays).
EXEC_INTO_A_SERVER = """sleep 1.5
exec python3 -c 'import socket, time; s = socket.create_server(("127.0.0.1", 8080)); time.sleep(30)'
"""


def test_a_process_is_recorded_again_under_the_name_it_execs(tmp_path: Path) -> None:
    """`ip netns exec NS server` is `ip`, then a shell, until it execs: the first sample may see it
    under the launcher's name; once it execs and holds a listener its new name and executable get a
    row of their own, the latest."""
    _need_root()
    name = f"tq-test-exec-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    server = subprocess.Popen(["ip", "netns", "exec", name, "bash", "-c", EXEC_INTO_A_SERVER])
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        for _ in range(50):  # until ip netns exec has become bash
            if Path(f"/proc/{server.pid}/comm").read_text().strip() == "bash":
                break
            subprocess.run(["sleep", "0.05"], check=True)
        out = tmp_path / "out"
        subprocess.run(["ip", "netns", "exec", name, str(ROOT / "collector" / "sample-netns"), "--out", str(out),
                        "--duration", "4"], check=True, timeout=30)  # fmt: skip
        rows = [r for r in csv.DictReader((out / "processes.csv").open()) if r["pid"] == str(server.pid)]
        assert [r["comm"] for r in rows] == ["bash", "python3"], rows
        assert rows[0]["exe"].endswith("/bash") and "/python3" in rows[1]["exe"], rows
        assert float(rows[0]["time_s"]) < float(rows[1]["time_s"])
        listeners = list(csv.DictReader((out / "listeners.csv").open()))
        assert {r["comm"] for r in listeners if r["pid"] == str(server.pid)} == {"python3"}
    finally:
        server.kill()
        server.wait()
        subprocess.run(["ip", "netns", "del", name], check=False)


def test_the_host_namespace_lists_only_processes_that_hold_a_listener(tmp_path: Path) -> None:
    subprocess.run([str(ROOT / "collector" / "sample-netns"), "--out", str(tmp_path), "--duration", "1"],
                   check=True, timeout=30)  # fmt: skip
    rows = list(csv.DictReader((tmp_path / "processes.csv").open()))
    listeners = list(csv.DictReader((tmp_path / "listeners.csv").open()))
    assert {r["pid"] for r in rows} <= {r["pid"] for r in listeners}


def _sockstat_and_tw(
    tmp_path: Path, name: str, *args: str, budget: str = "0"
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """8 samples at 0.25 s; with no CPU budget unless given (four samples a second cost more than
    the default allows on a slow machine, and the listings' cadence is what these tests judge)."""
    out = tmp_path / ("out" + "".join(args) + budget)
    r = subprocess.run(["ip", "netns", "exec", name, str(ROOT / "collector" / "sample-netns"), "--out", str(out),
                        "--interval", "0.25", "--duration", "2", "--cpu-budget", budget, *args],
                       check=True, timeout=60, capture_output=True, text=True)  # fmt: skip
    _sockstat_and_tw.stderr = r.stderr  # type: ignore[attr-defined]
    return list(csv.DictReader((out / "sockstat.csv").open())), list(csv.DictReader((out / "tw_sockets.csv").open()))


@contextlib.contextmanager
def _namespace_with_time_wait(tag: str, rounds: int) -> Iterator[str]:
    """A fresh namespace holding 5 * ROUNDS real TIME_WAIT sockets on ephemeral ports
    (dev/port_churn.py: ROUNDS listeners, 5 client-closed connections each); removed after."""
    _need_root()
    name = f"tq-test-{tag}-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "netns", "exec", name, "python3", str(ROOT / "dev" / "port_churn.py"), str(rounds)],
                       check=True, timeout=60)  # fmt: skip
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


# A server on port 8080 (below the ephemeral range) that closes its 7 connections first:
# its TIME_WAIT sockets hold its service port, not a client's ephemeral ports.
SERVER_CLOSES_FIRST = """
import socket
lsn = socket.create_server(("127.0.0.1", 8080))
clients = [socket.create_connection(("127.0.0.1", 8080)) for _ in range(7)]
for _ in clients:
    lsn.accept()[0].close()
for c in clients:
    c.recv(1)
    c.close()
"""


def test_time_wait_on_a_service_port_is_not_listed(tmp_path: Path) -> None:
    """tw_sockets.csv lists the TIME_WAIT sockets on ephemeral local ports only (the ports a
    client runs out of): a server that closes first holds its own on its service port, and
    listing a busy server's was most of the samplers' cost. sockstat.csv still counts all."""
    with _namespace_with_time_wait("tw-svc", 4) as name:
        subprocess.run(["ip", "netns", "exec", name, "python3", "-c", SERVER_CLOSES_FIRST], check=True, timeout=60)
        sockstat, tw = _sockstat_and_tw(tmp_path, name)
        assert {int(r["tcp_tw"]) for r in sockstat} == {20 + 7}
        listed = [r["time_s"] for r in sockstat if r["tw_listed"] == "1"]
        assert listed and sorted({r["time_s"] for r in tw}) == listed
        for t in listed:
            assert sum(int(r["count"]) for r in tw if r["time_s"] == t) == 20  # port_churn's clients only
        assert "8080" not in {r["service_port"] for r in tw}


def test_many_time_wait_sockets_are_listed_every_kth_sample(tmp_path: Path) -> None:
    """Listing TIME_WAIT costs per socket, so above --tw-per-sample N a sample in k =
    ceil(count / N) lists them (sockstat.csv tw_listed = 1), the first one always, and
    tw_sockets.csv has rows at those samples only. 60 real TIME_WAIT sockets in a fresh
    namespace (dev/port_churn.py: 12 listeners, 5 client-closed connections each)."""
    with _namespace_with_time_wait("tw", 12) as name:
        sockstat, tw = _sockstat_and_tw(tmp_path, name, "--tw-per-sample", "25")
        assert [int(r["tcp_tw"]) for r in sockstat] == [60] * 8
        assert [r["tw_listed"] for r in sockstat] == ["1", "0", "0", "1", "0", "0", "1", "0"]  # k = ceil(60 / 25)
        listed = [r["time_s"] for r in sockstat if r["tw_listed"] == "1"]
        assert sorted({r["time_s"] for r in tw}) == listed
        for t in listed:
            assert sum(int(r["count"]) for r in tw if r["time_s"] == t) == 60
        sockstat, tw = _sockstat_and_tw(tmp_path, name)  # the default: 2048 a sample
        assert [r["tw_listed"] for r in sockstat] == ["1"] * 8
        assert [r["flows_listed"] for r in sockstat] == ["1"] * 8
        assert {r["time_s"] for r in tw} == {r["time_s"] for r in sockstat}


def test_over_its_cpu_budget_a_sample_skips_the_listings_that_grow_with_sockets(tmp_path: Path) -> None:
    """The sampler keeps to --cpu-budget % of one CPU (its processes included): over it, the flows'
    and the TIME_WAIT listings are left out (the first sample's always run), the fixed steps
    are not, and it says so at the end. A budget no sample can meet: 1 050 real TIME_WAIT sockets
    (more than a small walk) listed at the first sample only, sockstat at all 8."""
    with _namespace_with_time_wait("tw-budget", 210) as name:
        sockstat, tw = _sockstat_and_tw(tmp_path, name, budget="0.01")
        stderr = _sockstat_and_tw.stderr  # type: ignore[attr-defined]
        assert [int(r["tcp_tw"]) for r in sockstat] == [1050] * 8
        assert [r["tw_listed"] for r in sockstat] == ["1"] + ["0"] * 7
        assert [r["flows_listed"] for r in sockstat] == ["1"] + ["0"] * 7
        assert {r["time_s"] for r in tw} == {sockstat[0]["time_s"]}
        # 7 samples, each without its TIME_WAIT and its flows' listing (the namespace has no flow).
        assert "CPU budget (0.01 % of a CPU) left out 14 listings of flows or TIME_WAIT over 8 samples" in stderr


# An awk that spends CPU_S of CPU before it passes each request of a served parser on (the real
# awk, its child, answers on the stdout both share), and is the real awk for any other call.
CPU_HUNGRY_AWK = """#!/usr/bin/env python3
import os, subprocess, sys, time
real = {awk!r}
if "job=serve" not in sys.argv:
    os.execv(real, [real, *sys.argv[1:]])
child = subprocess.Popen([real, *sys.argv[1:]], stdin=subprocess.PIPE, close_fds=False)
for line in sys.stdin.buffer:
    until = time.process_time() + {cpu_s}
    while time.process_time() < until:
        pass
    child.stdin.write(line)
    child.stdin.flush()
child.stdin.close()
sys.exit(child.wait())
"""


def test_the_budget_counts_the_parsers_cpu(tmp_path: Path) -> None:
    """The parser runs for the sampler's life, so the times builtin never counts it: its own clock
    must be paid from the budget like every other step. A parser that spends 0.1 s of CPU on each
    request (two a sample, 0.5 s apart: 40 % of a CPU) puts the sampler over a 20 % budget, which
    its bash and ss alone keep to: the listings of a namespace of 1 050 TIME_WAIT sockets are
    left out after the first sample (they were made at every sample while the parser's CPU went
    uncounted)."""
    awk = tmp_path / "bin" / "awk"
    awk.parent.mkdir()
    awk.write_text(CPU_HUNGRY_AWK.format(awk=shutil.which("awk"), cpu_s=0.1))
    awk.chmod(0o755)
    with _namespace_with_time_wait("tw-parser-cpu", 210) as name:
        out = tmp_path / "out"
        r = subprocess.run(["ip", "netns", "exec", name, "env", f"PATH={awk.parent}:{os.environ['PATH']}",
                            str(ROOT / "collector" / "sample-netns"), "--out", str(out), "--interval", "0.5",
                            "--duration", "3", "--cpu-budget", "20"],
                           check=True, timeout=60, capture_output=True, text=True)  # fmt: skip
        sockstat = list(csv.DictReader((out / "sockstat.csv").open()))
        assert [int(r["tcp_tw"]) for r in sockstat] == [1050] * 6
        assert [r["tw_listed"] for r in sockstat] == ["1"] + ["0"] * 5
        assert "CPU budget (20 % of a CPU) left out 10 listings" in r.stderr


def test_a_namespace_of_few_sockets_is_listed_at_every_sample_whatever_the_budget(tmp_path: Path) -> None:
    """The budget bounds what grows with sockets: 60 TIME_WAIT sockets (a small walk) are listed at
    every sample under a budget no sample can meet, and so would a quiet namespace's short flow
    (the Debian 13 guest's socket-buffers lab: never listed before, tests/fixtures/README.md)."""
    with _namespace_with_time_wait("tw-small", 12) as name:
        sockstat, _ = _sockstat_and_tw(tmp_path, name, budget="0.01")
        assert [int(r["tcp_tw"]) for r in sockstat] == [60] * 8
        assert [r["tw_listed"] for r in sockstat] == ["1"] * 8
        assert [r["flows_listed"] for r in sockstat] == ["1"] * 8
        assert "CPU budget" not in _sockstat_and_tw.stderr  # type: ignore[attr-defined]


# `ss -tinmH state established` in the client namespace of a socket-buffers lab run by hand
# (2026-11-28, iproute2 6.1.0): a slow reader's writer (rwnd_limited), a writer with SO_SNDBUF 8192
# (sndbuf_limited), and both ends of an IPv6 loopback flow, its reader behind: verbatim (ss pads
# the first lines of each socket with blanks).
BUFFERS_OUTPUT = Path(__file__).parent / "data" / "ss-tinmH-established.txt"


def _buffers_of_self(env: dict[str, str], state: Path) -> list[dict[str, str]]:
    r = subprocess.run([str(ROOT / "collector" / "sample-netns"), "--buffers-of", "--state", str(state),
                        str(os.getpid())], capture_output=True, text=True, check=True, env=env)  # fmt: skip
    return list(csv.DictReader(io.StringIO(r.stdout)))


def test_flows_with_their_clocks_queues_and_buffers(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """--buffers-of (the exporter's, and capture's sock_buffers.csv): every flow at the first
    listing, with tcp_info's clocks and skmem; then only the flows whose busy clock moved, or that
    hold unread data."""
    _need_root()  # nsenter into our own namespace
    text = BUFFERS_OUTPUT.read_text()
    env = _with_fake_ss(tmp_path, text)
    (tmp_path / "state").mkdir()
    # A namespace with no TCP socket is not listed at all (test_flows_listed_for_the_families_in_use).
    held = socket.create_server(("127.0.0.1", 0))
    request.addfinalizer(held.close)
    rows = {(r["laddr"], r["lport"], r["raddr"], r["rport"]): r for r in _buffers_of_self(env, tmp_path / "state")}
    assert len(rows) == 4
    slow = rows[("198.18.9.2", "50720", "198.18.9.1", "7000")]
    assert (slow["busy_ms"], slow["rwnd_limited_ms"], slow["sndbuf_limited_ms"]) == ("3964", "3540", "0")
    assert (slow["send_q"], slow["sndbuf"], slow["wqueue"], slow["snd_wnd"], slow["minrtt_ms"]) == (
        "394024",
        "580608",
        "404008",
        "8192",
        "40.731",
    )
    small = rows[("198.18.9.2", "45938", "198.18.9.1", "7001")]
    assert (small["sndbuf_limited_ms"], small["sndbuf"], small["bytes_acked"]) == ("2420", "16384", "3937113")
    reader = rows[("::1", "7002", "::1", "58894")]
    assert (reader["recv_q"], reader["rmem"], reader["rcvbuf"], reader["drops"], reader["busy_ms"]) == (
        "113628",
        "130916",
        "131072",
        "7",
        "0",
    )
    assert rows[("::1", "58894", "::1", "7002")]["snd_wnd"] == ""  # ss prints none at 0
    # retrans:now/TOTAL and dsack_dups, not bytes_retrans; 0 where ss prints none.
    writer = rows[("::1", "58894", "::1", "7002")]
    assert (writer["retrans_total"], writer["dsack_dups"]) == ("2", "2")
    assert (slow["retrans_total"], slow["dsack_dups"]) == ("0", "0")
    # The same table again: nothing sent since; only the reader holding data is listed.
    again = _buffers_of_self(env, tmp_path / "state")
    assert [(r["lport"], r["recv_q"]) for r in again] == [("7002", "113628")]
    # One writer's busy clock moves: it is listed again.
    (tmp_path / "out.txt").write_text(text.replace("busy:3960ms", "busy:4960ms"))
    again = _buffers_of_self(env, tmp_path / "state")
    assert sorted(r["lport"] for r in again) == ["45938", "7002"]
    # A D-SACK arriving after the flow's last write moves no clock: it is listed again all the same.
    moved = text.replace("busy:3960ms", "busy:4960ms").replace("dsack_dups:2", "dsack_dups:3")
    (tmp_path / "out.txt").write_text(moved)
    again = _buffers_of_self(env, tmp_path / "state")
    assert sorted((r["lport"], r["dsack_dups"]) for r in again) == [("58894", "3"), ("7002", "0")]


# A process holding established connections of the given families on loopback until killed.
HOLD_FLOWS = """
import socket, sys, time
held = []
for host in sys.argv[1:]:
    lsn = socket.create_server((host, 0), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    held += [lsn, socket.create_connection(lsn.getsockname()[:2]), lsn.accept()[0]]
    lsn.close()
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize(
    ("hosts", "flag"), [(["127.0.0.1"], "-4"), (["::1"], "-6"), (["127.0.0.1", "::1"], None), ([], "none")]
)
def test_flows_listed_for_the_families_in_use(tmp_path: Path, hosts: list[str], flag: str | None) -> None:
    """A "state established" listing walks the whole socket hash, TIME_WAIT included, once per
    family asked: ss is asked for the families the namespace has sockets of (sockstat's inuse), and
    not at all when it has none. Each flow is listed all the same."""
    _need_root()
    name = f"tq-test-fam-{os.getpid()}"
    calls = tmp_path / "ss-calls"
    env = _with_ss_logging_its_calls(tmp_path, calls)
    subprocess.run(["ip", "netns", "add", name], check=True)
    holder = None
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        holder = subprocess.Popen(["ip", "netns", "exec", name, "python3", "-c", HOLD_FLOWS, *hosts],
                                  stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        (tmp_path / "state").mkdir()
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, check=True).stdout.split()
        pid = pids[0]
        cmd = [str(ROOT / "collector" / "sample-netns"), "--buffers-of", "--state", str(tmp_path / "state"), pid]
        r = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env, timeout=30)
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
        subprocess.run(["ip", "netns", "del", name], check=False)
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert sorted({row["laddr"] for row in rows}) == sorted(hosts)
    assert len(rows) == 2 * len(hosts)  # both ends of each connection
    asked = calls.read_text().splitlines() if calls.exists() else []
    if flag == "none":
        assert asked == []
    else:
        (args,) = asked
        assert args.split()[0] == flag if flag else not args.startswith("-4") and not args.startswith("-6"), args


def test_a_killed_processs_staged_tables_go_with_the_next_one() -> None:
    """A one-shot table is staged in /tmp/tq-sample-netns.PID; a SIGKILL leaves it, and the
    next process reaps it at its first table (its pid is gone), and its parser ends too."""
    sampler = str(ROOT / "collector" / "sample-netns")
    serve = subprocess.Popen([sampler, "--serve", "T"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert serve.stdin is not None and serve.stdout is not None
    serve.stdin.write(f"--ephemeral-of\t32768-60999\t{os.getpid()}\n")
    serve.stdin.flush()
    while serve.stdout.readline().strip() != "T":
        pass
    stage = Path(f"/tmp/tq-sample-netns.{serve.pid}")
    assert stage.is_dir()
    serve.kill()
    serve.wait()
    assert stage.is_dir()  # SIGKILL: no exit trap ran
    r = subprocess.run([sampler, "--ephemeral-of", "32768-60999", str(os.getpid())], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("netns,raddr,rport")
    assert not stage.exists()
    serve.stdin.close()
    # Its parser read its requests from the killed shell: that pipe has ended, so it has too.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and f"token=sample-netns-tables-{serve.pid}-" in _all_cmdlines():
        time.sleep(0.1)
    assert f"token=sample-netns-tables-{serve.pid}-" not in _all_cmdlines()


def _all_cmdlines() -> str:
    out = []
    for p in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            out.append((p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
    return "\n".join(out)
