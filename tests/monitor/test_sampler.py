"""monitor/exporter/sampler.py: collector/sample-netns --serve, one process answering the
exporter's requests as the one-shot modes would, and gone with its caller however it ends."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from monitor.exporter.sampler import Sampler
from tests.conftest import ROOT

SAMPLER = ROOT / "collector" / "sample-netns"


def _rows(text: str) -> list[list[str]]:
    """The CSV lines without their time column (each call stamps its own)."""
    return [line.split(",")[1:] for line in text.splitlines()]


def test_one_process_answers_each_request_as_the_one_shot_mode_does() -> None:
    s = Sampler(SAMPLER)
    try:
        pid = str(os.getpid())
        served = s.ask("--counters-of", pid)
        assert s.proc is not None
        server = s.proc.pid
        once = subprocess.run([str(SAMPLER), "--counters-of", pid], capture_output=True, text=True, check=True)
        # The counters move between the two reads; their names and namespaces do not.
        assert [r[:3] for r in _rows(served)] == [r[:3] for r in _rows(once.stdout)]
        assert len(_rows(served)) > 50
        threads = s.ask("--threads-of", pid)
        assert threads.splitlines()[0] == "time_s,netns,pid,tid,comm,cpu_ns,runq_ns"
        assert any(r[1] == pid for r in _rows(threads)[1:])
        assert s.ask("--no-such-mode") == ""  # an unknown request: an empty answer, the process stays
        assert s.ask("--threads-of", pid).count("\n") == threads.count("\n")
        assert s.proc is not None and s.proc.pid == server
    finally:
        s.close()
    assert s.proc is None


def test_a_sampler_that_ended_is_started_again() -> None:
    s = Sampler(SAMPLER)
    try:
        assert s.ask("--threads-of", str(os.getpid()))
        assert s.proc is not None
        first = s.proc.pid
        s.proc.send_signal(signal.SIGINT)  # a Ctrl-C to the exporter's process group
        s.proc.wait(timeout=5)
        assert s.ask("--threads-of", str(os.getpid())).startswith("time_s,")
        assert s.proc is not None and s.proc.pid != first
    finally:
        s.close()


HOLDER = """
import os, sys, time
from pathlib import Path
from monitor.exporter.sampler import Sampler
s = Sampler(Path(sys.argv[1]))
s.ask("--threads-of", str(os.getpid()))
print(s.proc.pid, flush=True)
time.sleep(60)
"""


def test_the_sampler_ends_when_its_caller_is_killed() -> None:
    """Nothing left behind: SIGKILL gives the exporter no chance to close it; its stdin ends."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(SAMPLER)], stdout=subprocess.PIPE, text=True, env=env)
    assert holder.stdout is not None
    server = int(holder.stdout.readline())
    assert os.path.exists(f"/proc/{server}")
    holder.kill()
    holder.wait()
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{server}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{server}")


# Listens on 127.0.0.1:8080 and prints its pid; after 2 s connects to itself and holds it for 10 s.
LISTEN_THEN_CONNECT = (
    "import os, socket, time; l = socket.create_server(('127.0.0.1', 8080)); print(os.getpid(), flush=True); "
    "time.sleep(2); c = socket.create_connection(('127.0.0.1', 8080)); a = l.accept(); time.sleep(10)"
)


def test_the_flows_of_a_namespace_of_listeners_only_start_no_ss(tmp_path: Path, monkeypatch) -> None:
    """After --listeners-of, a namespace whose sockstat counts no socket but those listeners has
    no flow: --buffers-of starts no ss for it; once a connection exists it lists it."""
    if os.geteuid() != 0:
        (pytest.fail if os.environ.get("CI") else pytest.skip)("needs root for ip netns")
    calls, ss = tmp_path / "calls.txt", tmp_path / "bin" / "ss"
    ss.parent.mkdir()
    ss.write_text(f"#!/bin/sh\necho \"$*\" >>'{calls}'\nexec '{shutil.which('ss')}' \"$@\"\n")
    ss.chmod(0o755)
    monkeypatch.setenv("PATH", f"{ss.parent}:{os.environ['PATH']}")
    name = f"tq-test-serve-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    s, server = Sampler(SAMPLER), None
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        server = subprocess.Popen(["ip", "netns", "exec", name, "python3", "-c", LISTEN_THEN_CONNECT],
                                  stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert server.stdout is not None
        pid = server.stdout.readline().strip()
        state = tmp_path / "state"
        state.mkdir()
        assert "127.0.0.1,8080" in s.ask("--listeners-of", pid)
        assert s.ask("--buffers-of", "--state", str(state), pid).count("\n") == 1  # the header alone
        assert not any("state established" in c for c in calls.read_text().splitlines())
        time.sleep(2.5)
        s.ask("--listeners-of", pid)
        flows = s.ask("--buffers-of", "--state", str(state), pid)
        assert sum("state established" in c for c in calls.read_text().splitlines()) == 1
        assert ",8080," in flows, flows
    finally:
        s.close()
        if server is not None:
            server.kill()
            server.wait()
        subprocess.run(["ip", "netns", "del", name], check=False)
