"""The socket-buffers lab with real bpftrace, a real path delay and real flows: each variant's flow
gets its cause, the healthy one nothing; the finding's limited time is the kernel's own (the lab's
ss -tinm samples of the same socket, every 0.2 s) within 5 %, its counters are the namespaces' own
deltas (the lab reads /proc/net/netstat before and after) and the probe's EAGAIN writes are the
writer's own count."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from analysis.derived import socket_buffers as sbd
from analysis.load import Run
from tests.analysis.rules.test_socket_buffers import TICK_MS, lab_json
from tests.conftest import ROOT, leftovers
from tests.integration.children import run_to_end

pytestmark = pytest.mark.integration


def run_lab(variant: str, out: Path) -> Run:
    r = run_to_end([str(ROOT / "scripts" / "lab"), "socket-buffers", variant, "--out", str(out)],
                   timeout=180, env=dict(os.environ))  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert not leftovers("tq-socket-buffers"), leftovers("tq-socket-buffers")
    return Run.open(out)


def our_findings(run: Run) -> list[dict]:
    """Findings about this lab's flow: the probes see the whole host, and other tests run beside."""
    v = json.loads((run.path / "verdicts.json").read_text())
    port = run.lab["flow"]["lport"]
    return [f for f in v["findings"] + v["ruled_out"] if f["kind"] == "socket_buffer_limit"
            and f["subject"].get("lport") == port]  # fmt: skip


def link(f: dict, name: str) -> dict:
    return next(x for x in f["chain"] if x["link"] == name)["evidence"]


# slow-reader: the reader's pace sets the limit whatever else runs (the path's delay line runs at
# real-time priority): tests/integration stream B. small-sndbuf limits the flow only while its writer
# keeps the buffer full, and small-rcvbuf and healthy are told from a slow reader by a reader that
# keeps up: with the machine to themselves (dev/test-suite).
@pytest.mark.parametrize("variant", ["slow-reader", "small-sndbuf", "small-rcvbuf"])
def test_a_buffer_limited_flow_gets_its_cause_with_the_kernels_numbers(kernel, tmp_path: Path, variant: str) -> None:
    run = run_lab(variant, tmp_path / variant)
    fl = run.lab["flow"]
    (f,) = our_findings(run)
    assert (f["status"], f["cause_class"]) == ("confirmed", fl["cause"])
    assert (f["subject"]["laddr"], f["subject"]["raddr"], f["subject"]["rport"]) == (fl["laddr"], fl["raddr"], 7000)
    # The limited clock against the lab's own ss samples of the same socket at the window's end.
    clock = "sndbuf_limited_ms" if variant == "small-sndbuf" else "rwnd_limited_ms"
    probe = link(f, "probe")
    ss = lab_json().ss_series(run.path / "lab" / "ss-flow.txt")["sender"]
    at = np.interp(f["window"]["end_s"], [r["time_s"] for r in ss], [r[clock] for r in ss])
    assert abs(probe[clock] - at) <= max(0.05 * at, TICK_MS), (probe[clock], at)
    # Each namespace's counters: exactly the deltas the lab read itself.
    counters = link(f, "counter")
    for side in ("sender", "receiver"):
        for name, value in counters[side].items():
            assert value == (run.lab["counters"][side] or {}).get(name, 0), (side, name, value)
    # The probe's EAGAIN writes: the writer's own count.
    sender = sbd.sides(run)[(run.lab["client"]["netns_inode"], fl["laddr"], fl["lport"], fl["raddr"], 7000)]
    assert sender.probe.get("writes_blocked", 0) == fl["writer"]["writes_blocked"] > 0
    if variant == "slow-reader":
        assert counters["receiver"]["TCPToZeroWindowAdv"] > 0


def test_a_healthy_flow_over_the_same_path_is_ruled_out(kernel, tmp_path: Path) -> None:
    run = run_lab("healthy", tmp_path / "healthy")
    (f,) = our_findings(run)
    assert f["status"] == "absent", f
    probe = link(f, "probe")
    assert probe["busy_ms"] > 3000 and probe["rwnd_limited_pct"] < 20 and probe["sndbuf_limited_pct"] < 20
