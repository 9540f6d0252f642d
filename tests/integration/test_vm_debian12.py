"""One leg of the VM matrix in make test: Debian 12's own kernel (6.1: no sock:sk_data_ready,
no err field in tcp_retransmit_skb, kprobes allowed) with its bpftrace 0.17, booted under qemu
from a debootstrap image (dev/vm/vm-image, cached in build/vm/). Inside it, dev/vm/matrix's
guest suite runs doctor, starts alone the files doctor picks for the families the accept
queue's lab does not run (its capture holds the retransmits tier too), then that lab; the
analysis runs here. The full matrix (Debian 13 and this host too, every family's scenario,
every probe file started alone against doctor's prediction) is `make matrix`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration

# What runs on Debian 12's kernel: the kprobe tier for the accept queue, the
# tier without `err` for retransmits, the plain tracepoint files for the rest.
EXPECTED_TIERS = {
    "accept_queue": "accept_queue.kprobe.bt",
    "retransmits": "retransmits.tracepoint.bt",
    "time_wait": "time_wait.bt",
    "epoll": "epoll.bt",
    # no sock:sock_send_length on 6.1: the kprobe tier (tcp_sendmsg, tcp_recvmsg)
    "socket_buffers": "socket_buffers.kprobe.bt",
}


# One scenario, the accept queue's: on 6.1 its tier is different code (kprobe, no
# sk_data_ready), and its lab captures the retransmits tier beside it, whose SYN-ACK
# retransmits give a confirmed storm from the file without `err` (checked below).
# The retransmit lab of its own added 195 s to the leg, CI's critical path (2026-11-25);
# `make matrix` runs every family's scenario.
SCENARIO_FAMILIES = ("accept_queue",)
# The two files that scenario's capture runs (checked below) are not also started alone:
# under emulation those two starts took 91 s and 145 s of the leg (2026-11-25).
SCENARIO_FILES = (EXPECTED_TIERS["accept_queue"], EXPECTED_TIERS["retransmits"])
# Started alone: the files doctor picks on 6.1 that the scenario does not run. The fallbacks
# and the files doctor predicts will not attach here are started alone by `make matrix`, not
# in CI: under emulation each start is a minute or two of compiling (287 s of the leg's CPU,
# 2026-11-26), and doctor's pick is what a user of Debian 12 runs.
ALONE_FILES = tuple(f for f in EXPECTED_TIERS.values() if f not in SCENARIO_FILES)


def test_debian12_vm_leg(kernel) -> None:
    missing = [c for c in ("qemu-system-x86_64", "debootstrap", "debugfs") if shutil.which(c) is None]
    if missing:
        msg = f"VM leg needs {', '.join(missing)} (make setup installs them)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    out = ROOT / "build" / "matrix" / "test-debian12"
    shutil.rmtree(out, ignore_errors=True)
    # time_wait.bt and epoll.bt are the host's own files, run by the labs here, and
    # are started alone in the guest (tiers.tsv): ALONE_FILES.
    r = subprocess.run(
        [
            str(ROOT / "dev" / "vm" / "matrix"),
            "bookworm",
            "--out",
            str(out),
            "--timeout",
            "2400",
            "--families",
            " ".join(SCENARIO_FAMILIES),
            "--skip-alone",
            " ".join(sorted(p.name for p in (ROOT / "probes").glob("*.bt") if p.name not in ALONE_FILES)),
        ],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    report = json.loads((out / "matrix.json").read_text()) if (out / "matrix.json").is_file() else {}
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    rows = {row["family"]: row for row in report["rows"]}
    assert {f: row["tier_file"] for f, row in rows.items()} == {f: EXPECTED_TIERS[f] for f in SCENARIO_FAMILIES}
    # Doctor's pick for the others, each started alone as predicted (a mismatch is in
    # report["problems"]).
    doctor = json.loads((out / "bookworm" / "doctor.json").read_text())
    for fam, tier in EXPECTED_TIERS.items():
        assert doctor["families"][fam]["file"].endswith(tier), (fam, doctor["families"][fam])
    for fam, row in rows.items():
        assert row["verdict_ok"], (fam, row)
        assert row["predicted"] == "yes", (fam, row)
        assert row["copied_alone_attached"] == "-", (fam, row)  # not started alone: it ran in the scenario
    tiers = (out / "bookworm" / "tiers.tsv").read_text()
    assert not any(f"\n{f}\t" in tiers for f in SCENARIO_FILES), tiers
    # Doctor's other picks were started alone and attached, as predicted (problems == [] below).
    rows = [line.split("\t") for line in tiers.splitlines()[1:]]
    assert {(r[0], r[1], r[2]) for r in rows} == {(f, "true", "true") for f in ALONE_FILES}, tiers
    assert report["problems"] == []
    # The retransmits tier without `err`, on 6.1, in the accept queue's run: attached,
    # its rows parsed, and the client's SYN retransmits blamed on the full queue.
    run = out / "bookworm" / "runs" / "accept_queue"
    rt = json.loads((run / "metadata.json").read_text())["probes"]["retransmits"]
    assert (rt["file"], rt["status"]) == ("probes/" + EXPECTED_TIERS["retransmits"], "ok") and rt["rows"] > 0, rt
    # The clients' SYN retransmits and the server's SYN-ACK retransmits: both the full queue's.
    storms = [f for f in json.loads((run / "verdicts.json").read_text())["findings"] if f["kind"] == "retransmit_storm"]
    causes = {(f["status"], f["cause_class"]) for f in storms}
    assert ("confirmed", "remote_accept_queue_full") in causes, storms
    assert causes <= {("confirmed", "remote_accept_queue_full"), ("confirmed", "local_accept_queue_full")}, storms
