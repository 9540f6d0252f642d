"""One leg of the VM matrix in make test: Debian 12's own kernel (6.1: no sock:sk_data_ready,
no err field in tcp_retransmit_skb, kprobes allowed) with its bpftrace 0.17, booted under qemu
from a debootstrap image (dev/vm/vm-image, cached in build/vm/). Inside it, dev/vm/matrix's
guest suite runs doctor, starts every probe file alone, and runs one real scenario per family;
the analysis runs here. The full matrix (Debian 13 and this host too) is `make matrix`."""

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
}


SCENARIO_FAMILIES = ("accept_queue", "retransmits")


def test_debian12_vm_leg(kernel) -> None:
    missing = [c for c in ("qemu-system-x86_64", "debootstrap", "debugfs") if shutil.which(c) is None]
    if missing:
        msg = f"VM leg needs {', '.join(missing)} (make setup installs them)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    out = ROOT / "build" / "matrix" / "test-debian12"
    shutil.rmtree(out, ignore_errors=True)
    # Scenarios for the two families whose tier differs from this host's (kprobe, no
    # `err`); time_wait.bt and epoll.bt are the host's own files, run by the labs here,
    # and are still started alone in the guest (tiers.tsv): CI time.
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
        ],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    report = json.loads((out / "matrix.json").read_text()) if (out / "matrix.json").is_file() else {}
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    rows = {row["family"]: row for row in report["rows"]}
    assert {f: row["tier_file"] for f, row in rows.items()} == {f: EXPECTED_TIERS[f] for f in SCENARIO_FAMILIES}
    # Doctor's pick for the others, and every probe file started alone as predicted
    # (a mismatch is in report["problems"]).
    doctor = json.loads((out / "bookworm" / "doctor.json").read_text())
    for fam, tier in EXPECTED_TIERS.items():
        assert doctor["families"][fam]["file"].endswith(tier), (fam, doctor["families"][fam])
    for fam, row in rows.items():
        assert row["verdict_ok"], (fam, row)
        assert row["predicted"] == "yes", (fam, row)
        assert row["copied_alone_attached"] == "true", (fam, row)
    assert report["problems"] == []
