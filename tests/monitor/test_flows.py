"""monitor/exporter/flows.py and the socket_buffers rows: flows from sock_diag, no probe. A real
loopback flow whose reader never reads: its writer's window closes and tcp_info's rwnd_limited clock
runs; the exporter's counter follows the kernel's clock, and a connection beside it gets none."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from monitor.exporter import rows
from monitor.exporter.flows import FlowScan
from monitor.exporter.objects import Family, Tables
from monitor.exporter.sample import Namespaces
from tests.conftest import ROOT, fixture_run

SAMPLER = ROOT / "collector" / "sample-netns"


@pytest.fixture
def stalled_flow() -> Iterator[tuple[socket.socket, socket.socket, socket.socket]]:
    """A writer whose reader never reads, and an idle connection beside them, on 127.0.0.1."""
    ln = socket.socket()
    ln.bind(("127.0.0.1", 0))
    ln.listen(4)
    writer, idle = socket.create_connection(ln.getsockname()), socket.create_connection(ln.getsockname())
    reader, _ = ln.accept()
    idle_peer, _ = ln.accept()
    writer.setblocking(False)
    yield writer, reader, idle
    for s in (writer, reader, idle, idle_peer, ln):
        s.close()


def _fill(writer: socket.socket) -> None:
    """Write until the send buffer is full (the reader's window closed long before)."""
    try:
        while True:
            writer.send(b"x" * 65536)
    except BlockingIOError:
        pass


def _ss_clock(writer: socket.socket, clock: str) -> int:
    port = writer.getsockname()[1]
    out = subprocess.run(["ss", "-tinH", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    for word in out.split():
        if word.startswith(clock + ":"):
            return int(word.split(":")[1].split("ms")[0])
    return 0


def test_a_stalled_writers_clock_is_the_kernels_and_its_neighbour_has_none(stalled_flow, tmp_path) -> None:
    writer, _reader, idle = stalled_flow
    ns = Namespaces(SAMPLER)
    ns.scan(time.monotonic())
    scan, fam = FlowScan(SAMPLER, tmp_path / "clocks"), Family("flow", top_n=1000, ttl=600)
    _fill(writer)
    scan.scan(fam, ns, [ns.host], 1.0)  # the baseline: a flow of the first scan counts from here
    before = _ss_clock(writer, "rwnd_limited")
    time.sleep(1.5)
    _fill(writer)
    scan.scan(fam, ns, [ns.host], 2.0)
    after = _ss_clock(writer, "rwnd_limited")
    wl, rl = writer.getsockname(), writer.getpeername()
    key = (str(ns.host), wl[0], str(wl[1]), rl[0], str(rl[1]))
    o = fam.objs[key]
    got = o.counters["flow_rwnd_limited_seconds_total"]
    # The scan read the clock between the two ss readings.
    assert (before - 8) / 1000 <= got <= (after + 8) / 1000 and got >= 1.0, (before, got, after)
    assert o.counters["flow_busy_seconds_total"] >= got and o.gauges["flow_send_queue_bytes"] > 0
    back = fam.objs[(str(ns.host), rl[0], str(rl[1]), wl[0], str(wl[1]))]
    assert back.gauges["flow_recv_queue_bytes"] > 0 and not any(back.counters.values())
    il = idle.getsockname()
    assert (str(ns.host), il[0], str(il[1]), rl[0], str(rl[1])) not in fam.objs, "an idle connection is not listed"
    scan.close()
    assert not (tmp_path / "clocks").exists()


def test_the_probes_rows_feed_the_flow_counters() -> None:
    """The slow-reader capture's sb_flow rows (collector/probe-to-csv --stream, as the exporter
    reads them): the writer's EAGAIN writes total the writer's own count."""
    run = fixture_run("socket-buffers-slow-reader")
    cmd = [ROOT / "collector" / "probe-to-csv", "--stream", ROOT / "probes" / "socket_buffers.bt", "--only", "sb_flow"]
    out = subprocess.run(cmd, input=(run / "probe_socket_buffers.out").read_bytes(), capture_output=True, check=True)
    t = Tables(1000, 600)
    header: list[str] = []
    for line in out.stdout.decode().splitlines():
        if line.startswith("#sb_flow,"):
            header = line.split(",")[1:]
        elif line.startswith("sb_flow,"):
            rows.ROWS_USED["sb_flow"](t, dict(zip(header, line.split(",")[1:], strict=True)), 0.0, 1)
    blocked = sum(o.counters.get("flow_writes_blocked_total", 0) for o in t.fams["flow"].objs.values())
    lab = json.loads((run / "metadata.json").read_text())["lab"]
    assert blocked == lab["flow"]["writer"]["writes_blocked"] > 0
