"""Absence of evidence is not a cause (issues 17 and 18): when the accept-queue probe did not run,
client retransmits toward a listener are never called loss on a path. The server's own
ListenOverflows decides where its namespace was sampled; elsewhere the cause is "unknown" and the
finding says what was missing. Damaged copies of real captures (tests/fixtures/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from analysis.load import Run
from analysis.rules import retransmits
from analysis.wording import describe, headline


def _without_accept_queue_probe(run_dir: Path, status: str = "failed") -> Path:
    """The copy as a capture whose accept-queue probe failed: its tables gone, its status said."""
    for f in run_dir.glob("aq_*.csv"):
        f.unlink()
    meta = json.loads((run_dir / "metadata.json").read_text())
    meta["probes"]["accept_queue"]["status"] = status
    (run_dir / "metadata.json").write_text(json.dumps(meta, indent=2))
    return run_dir


def _client_storm(run: Run, raddr: str, port: int):
    found = [
        f
        for f in retransmits.evaluate(run)
        if f.is_finding and f.subject["raddr"] == raddr and f.subject["service_port"] == port
    ]
    assert len(found) == 1, found
    return found[0]


def test_without_the_probe_and_the_servers_counters_the_cause_is_unknown(copy_fixture) -> None:
    """accept-overflow-sizing: clients in one namespace, the overflowing server in another. With
    the probe failed and only the client's counters, the storm toward 198.18.0.1:8080 was called
    data_loss ("find the lossy hop"); it is unknown, naming what was missing."""
    run_dir = _without_accept_queue_probe(copy_fixture("accept-overflow-sizing"))
    meta = json.loads((run_dir / "metadata.json").read_text())
    srv = meta["lab"]["server"]["netns_inode"]
    meta["netns"] = [n for n in meta["netns"] if n["inode"] != srv]
    (run_dir / "metadata.json").write_text(json.dumps(meta, indent=2))
    c = pd.read_csv(run_dir / "counters.csv", dtype=str, keep_default_na=False)
    c[c["netns"] != str(srv)].to_csv(run_dir / "counters.csv", index=False)
    f = _client_storm(Run.open(run_dir), "198.18.0.1", 8080)
    assert f.cause_class == "unknown"
    cause = f.link("cause")
    assert any("accept-queue probe failed" in m for m in cause.evidence["missing"])
    text = describe(f.kind, cause) + " " + describe(f.kind, f.link("fix"))
    assert "path" not in text and "lossy hop" not in text, text
    assert "accept-queue probe failed" in text and "unknown" in headline(f)


def test_without_the_probe_the_servers_listen_overflows_decide(copy_fixture) -> None:
    """host-overflow: a listener on loopback overflowing under local clients. Without the probe the
    server's namespace is the client's own, sampled: its ListenOverflows name the accept queue."""
    run = Run.open(_without_accept_queue_probe(copy_fixture("host-overflow")))
    f = _client_storm(run, "127.0.0.1", 18090)
    assert f.cause_class == "remote_accept_queue_full"
    ev = f.link("cause").evidence
    assert ev["listen_overflows"] > 0 and "probe failed" in ev["accept_queue_unseen"]
    assert "ListenOverflows +" in describe(f.kind, f.link("cause"))


def test_the_servers_counters_can_also_rule_the_accept_queue_out(copy_fixture) -> None:
    """The same run with ListenOverflows flat in the host namespace: the accept queue is ruled out
    by the kernel's own counter, so the probe's loss class stands (and says why)."""
    run_dir = _without_accept_queue_probe(copy_fixture("host-overflow"))
    c = pd.read_csv(run_dir / "counters.csv", dtype=str, keep_default_na=False)
    lo = c["counter"] == "ListenOverflows"
    first = c.loc[lo, "value"].iloc[0]
    c.loc[lo, "value"] = first
    c.loc[lo & (c["delta"] != ""), "delta"] = "0"
    c.to_csv(run_dir / "counters.csv", index=False)
    f = _client_storm(Run.open(run_dir), "127.0.0.1", 18090)
    assert f.cause_class in ("data_loss", "syn_loss")
    assert f.link("cause").evidence["listen_overflows"] == 0


@pytest.mark.parametrize("status", ["not_runnable", "died"])
def test_the_cause_stands_with_the_probe_data_it_had(copy_fixture, status: str) -> None:
    """The unchanged capture keeps its verdict from the probe (no cross-check needed)."""
    run = Run.open(copy_fixture("accept-overflow-sizing"))
    assert _client_storm(run, "198.18.0.1", 8080).cause_class == "remote_accept_queue_full"
    run = Run.open(_without_accept_queue_probe(copy_fixture("host-overflow"), status))
    assert _client_storm(run, "127.0.0.1", 18090).cause_class == "remote_accept_queue_full"
