"""A process may name itself anything but NUL (prctl PR_SET_NAME): commas,
quotes, newlines, bytes that are not UTF-8. bpftrace prints comm raw; the run
directory must still be well-formed CSV and the name must survive the loader
(issue 9). Real probes, a real process on loopback."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from analysis.load import Run

from .interrupts import ROOT

# 15 bytes, the most a comm holds: comma, quote, newline, an invalid byte, ", ".
HOSTILE = b'a,b"c\nd\xff, e]: 7'

WORKLOAD = textwrap.dedent(
    """
    import ctypes, select, socket, sys, time
    ctypes.CDLL(None).prctl(15, ctypes.c_char_p(bytes.fromhex(sys.argv[1])), 0, 0, 0)
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(8); srv.setblocking(False)
    ep = select.epoll(); ep.register(srv.fileno(), select.EPOLLIN)
    port = srv.getsockname()[1]
    deadline = time.time() + float(sys.argv[2])
    n = 0
    while time.time() < deadline and n < 100000:   # bounded either way
        n += 1
        c = socket.create_connection(("127.0.0.1", port))
        for fd, _ in ep.poll(0.05):
            s, _ = srv.accept(); s.close()
        c.close()
        # EADDRNOTAVAIL: time_wait.bt names the process whose connect() found its
        # 4-tuple taken (b bound to a's port, toward the same server).
        a = socket.socket(); b = socket.socket()
        try:
            for s in (a, b):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            a.bind(("127.0.0.1", 0)); a.connect(("127.0.0.1", port))
            b.bind(("127.0.0.1", a.getsockname()[1])); b.connect(("127.0.0.1", port))
        except OSError:
            pass
        finally:
            a.close(); b.close()
        for fd, _ in ep.poll(0.05):
            s, _ = srv.accept(); s.close()
        time.sleep(0.05)
    """
)


def test_hostile_comm_survives_capture_and_loader(kernel, tmp_path):
    out = tmp_path / "run"
    cap = subprocess.Popen(
        [
            str(ROOT / "collector" / "capture"),
            *("-q", "--no-report", "-d", "8", "-o", str(out), "-p", "accept_queue,time_wait,epoll"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    for _ in range(300):
        if (out / ".capture-ready").exists() or cap.poll() is not None:
            break
        time.sleep(0.1)
    assert (out / ".capture-ready").exists(), cap.stderr.read().decode(errors="replace") if cap.poll() else "not ready"
    subprocess.run([sys.executable, "-c", WORKLOAD, HOSTILE.hex(), "5"], check=True, timeout=30)
    _, err = cap.communicate(timeout=60)
    assert cap.returncode == 0, err.decode(errors="replace")
    assert b"unknown records" not in err, err

    run = Run.open(out)
    run.validate_all()
    seen = {}
    for table in ("ep_loop", "tw_connect", "aq_listen", "aq_accept"):
        comms = [c for c in run.table(table)["comm"] if str(c).startswith('a,b"c\nd')]
        seen[table] = comms
    assert all(seen.values()), f"hostile comm missing from some table: {seen}"
    for table, comms in seen.items():
        for c in comms:
            # However the invalid byte is decoded, what follows it is intact.
            assert c.endswith(", e]: 7"), (table, c)
    # The other columns of the same rows were not shifted by the comm's commas.
    ep = run.table("ep_loop")
    row = ep[ep["comm"].str.startswith('a,b"c', na=False)].iloc[0]
    assert row["calls"] > 0 and row["pid"] > 0
