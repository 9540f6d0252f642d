"""socket_buffer_limit on real captures of the socket-buffers lab (tests/fixtures/socket-buffers-*):
each variant's flow gets its own cause, the healthy one none; the numbers the finding cites are the
kernel's (the lab's own ss -tinm samples, the TcpExt counters it read before and after) and the
probe's counts are the writer's own. Copies with one end of the flow taken away give the
findings a host with only the sender, or only the reader, gets."""

from __future__ import annotations

from functools import cache
from types import ModuleType

import numpy as np
import pytest

from analysis.derived import socket_buffers as sbd
from analysis.findings import Finding
from analysis.load import Run
from analysis.rules import socket_buffers as rule
from analysis.wording import describe, headline
from tests.conftest import fixture_run, script_module

# memory-pressure-trixie: from the Debian 13 guest (the variant lowers the host-wide tcp_mem).
VARIANTS = ["slow-reader", "small-sndbuf", "small-rcvbuf", "memory-pressure-trixie"]
# A clock's reading is in jiffies (4 ms at HZ=250): one tick more than 5 % on a short flow.
TICK_MS = 4


@cache
def lab_json() -> ModuleType:
    """labs/socket-buffers/lab_json.py, the lab's own reader of its ss samples."""
    return script_module("labs/socket-buffers/lab_json.py")


def _ours(run: Run) -> list[Finding]:
    return [f for f in rule.evaluate(run) if f.subject["lport"] == run.lab["flow"]["lport"]]


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_variant_names_its_flow_and_its_cause(variant: str) -> None:
    run = Run.open(fixture_run(f"socket-buffers-{variant}"))
    (f,) = _ours(run)
    fl = run.lab["flow"]
    assert (f.status, f.cause_class) == ("confirmed", fl["cause"])
    assert (f.subject["laddr"], f.subject["raddr"], f.subject["rport"]) == (fl["laddr"], fl["raddr"], fl["rport"])
    assert f.subject["we_are"] == "sender" and f.subject["receiver_netns"] == run.lab["server"]["netns_inode"]
    assert "->" in headline(f) and rule.KIND not in headline(f)


def test_the_healthy_flow_is_ruled_out_with_its_clocks() -> None:
    run = Run.open(fixture_run("socket-buffers-healthy"))
    (f,) = _ours(run)
    assert f.status == "absent"
    ev = f.link("probe").evidence
    assert ev["busy_ms"] > 5000 and ev["rwnd_limited_pct"] < 5 and ev["sndbuf_limited_pct"] < 5


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_limited_clock_is_the_kernels_within_5_percent(variant: str) -> None:
    """The finding cites the sampler's last reading of the sender's limited time (the flow began
    after the first listing, so its clocks count from 0), and the sampler's readings follow the
    lab's own ss -tinm samples (every 0.2 s here, about 1 s in an emulated guest) within 5 %, at
    the lab's last sample inside the sampled span (the lab stops sampling once the writer is done,
    which under emulation is before the sampler's last listing)."""
    run = Run.open(fixture_run(f"socket-buffers-{variant}"))
    (f,) = _ours(run)
    clock = "sndbuf_limited_ms" if f.cause_class == "small_sndbuf" else "rwnd_limited_ms"
    ev = f.link("probe").evidence
    sb = run.table("sock_buffers")
    rows = sb[(sb["lport"] == f.subject["lport"]) & (sb["netns"] == f.subject["netns"])].sort_values("time_s")
    assert ev[clock] == rows[clock].iloc[-1]
    lab = [r for r in lab_json().ss_series(run.path / "lab" / "ss-flow.txt")["sender"]
           if rows["time_s"].iloc[0] <= r["time_s"] <= rows["time_s"].iloc[-1]]  # fmt: skip
    t, kernel = lab[-1]["time_s"], lab[-1][clock]
    ours = np.interp(t, rows["time_s"], rows[clock])
    assert abs(ours - kernel) <= max(0.05 * kernel, TICK_MS), (ours, kernel)
    assert ev[clock] >= 0.2 * ev["busy_ms"]


@pytest.mark.parametrize("variant", [*VARIANTS, "healthy"])
def test_counters_and_the_probes_counts_are_exact(variant: str) -> None:
    """The receiver's and sender's TcpExt deltas in the finding are what the lab read from
    /proc/net/netstat before and after; the probe's EAGAIN writes are the writer's own."""
    run = Run.open(fixture_run(f"socket-buffers-{variant}"))
    (f,) = _ours(run)
    lab = run.lab
    sides = sbd.sides(run)
    sender = sides[(lab["client"]["netns_inode"], f.subject["laddr"], f.subject["lport"], f.subject["raddr"], 7000)]
    assert sender.probe.get("writes_blocked", 0) == lab["flow"]["writer"]["writes_blocked"] > 0
    if f.status == "absent":
        return
    counters = f.link("counter").evidence
    for side in ("receiver", "sender"):
        for name, value in counters[side].items():
            assert value == (lab["counters"][side] or {}).get(name, 0), (side, name)
    if variant == "small-rcvbuf":  # every read on the pinned buffer is noted: all of them
        reader = sbd.pair(sides, sender)
        assert reader is not None
        assert reader.probe["rcvbuf_locked_reads"] == reader.probe["noted_reads"] == lab["flow"]["reader"]["reads"]


def _one_end(variant: str, keep: str) -> Run:
    """The capture as a host that holds one end of the flow only: the other namespace's flows,
    probe rows and counters taken away."""
    run = Run.open(fixture_run(f"socket-buffers-{variant}"))
    gone = run.lab["server" if keep == "client" else "client"]["netns_inode"]
    for t in ("sock_buffers", "sb_flow", "counters"):
        df = run.table(t)
        run._cache[t] = df[df["netns"] != gone]
    return run


def test_a_sender_whose_reader_is_elsewhere_blames_the_peers_window() -> None:
    for variant in ("slow-reader", "small-rcvbuf"):
        (f,) = _ours(_one_end(variant, "client"))
        assert f.cause_class == "peer_window" and "receiver" not in f.link("counter").evidence
        assert "capture on the receiver" in describe(f.kind, f.link("fix"))
    (f,) = _ours(_one_end("small-sndbuf", "client"))
    assert f.cause_class == "small_sndbuf"


def test_a_slow_reader_whose_sender_is_elsewhere_is_named_from_its_queue() -> None:
    run = _one_end("slow-reader", "server")
    (f,) = [x for x in rule.evaluate(run) if x.is_finding]
    fl = run.lab["flow"]
    assert (f.cause_class, f.status, f.subject["we_are"]) == ("slow_reader", "confirmed", "receiver")
    # Named in the direction of the data, as from the sender: the same flow.
    assert (f.subject["laddr"], f.subject["lport"], f.subject["rport"]) == (fl["laddr"], fl["lport"], fl["rport"])
    assert f.link("probe").key == "reader_queue" and f.link("probe").evidence["receiver_queue_pct"] > 25
    assert not rule.evaluate(_one_end("small-rcvbuf", "server")), "a reader that keeps its buffer empty is not slow"


def test_every_link_is_worded_from_its_numbers() -> None:
    """The keys only a one-ended capture reaches (tests/analysis/wording/test_wording.py lists them)."""
    runs = [Run.open(fixture_run(f"socket-buffers-{v}")) for v in VARIANTS]
    runs += [_one_end("slow-reader", "client"), _one_end("slow-reader", "server")]
    for run in runs:
        for f in rule.evaluate(run):
            for link in f.chain:
                text = describe(f.kind, link)
                assert "not measured" not in text and "no wording" not in text and "{" not in text, text


def test_the_fix_says_the_bdp_and_what_so_rcvbuf_does() -> None:
    (f,) = _ours(Run.open(fixture_run("socket-buffers-small-rcvbuf")))
    fix = describe(f.kind, f.link("fix"))
    ev = f.link("fix").evidence
    # RTT x rate: the lab's 20 Mbit/s at its measured min RTT (about 40 ms): about 100 KB.
    assert 95_000 <= ev["bdp_bytes"] <= 110_000, ev
    assert "SO_RCVBUF turns autotuning off" in fix and "rmem_max alone changes nothing" in fix
    cause = describe(f.kind, f.link("cause"))
    assert "pinned by SO_RCVBUF" in cause and "16 KiB" in cause


def test_the_verdict_needs_the_limit_to_last() -> None:
    """Below MIN_BUSY_MS of data to send, a flow is not judged: no finding, and, its clocks listed
    once only, listed as not checked (the probe saw it held back)."""
    run = Run.open(fixture_run("socket-buffers-slow-reader"))
    sb = run.table("sock_buffers")
    run._cache["sock_buffers"] = sb[sb["time_s"] <= sb["time_s"].min() + 0.5]
    ours = [f for f in rule.evaluate(run) if f.subject.get("lport") == run.lab["flow"]["lport"]]
    assert [f.status for f in ours] == ["not_checked"]


def test_a_full_send_buffer_is_found_when_the_clock_does_not_say_so() -> None:
    """One small-sndbuf run in five (under BBR): tcp_info's sndbuf_limited clock read 0 ms all along (ss
    agrees: the clock starts only when the flow is not cwnd-limited), while at every sample the send
    buffer was full with nothing unsent. The finding names the send buffer from those samples."""
    run = Run.open(fixture_run("socket-buffers-small-sndbuf-noclock"))
    (f,) = _ours(run)
    ev = f.link("probe").evidence
    assert ev["sndbuf_limited_ms"] == 0 == run.lab["flow"]["ss"]["sender"]["last"]["sndbuf_limited_ms"]
    assert (f.status, f.cause_class, ev["sndbuf_full_pct"]) == ("confirmed", "small_sndbuf", 100.0)
    assert "full with nothing left unsent" in describe(f.kind, f.link("cause"))
    healthy = Run.open(fixture_run("socket-buffers-healthy"))
    assert _ours(healthy)[0].link("probe").evidence["sndbuf_full_pct"] == 0.0


def test_memory_pressure_holds_the_window_shut_on_an_empty_queue() -> None:
    """The Debian 13 guest's memory-pressure run (claims C56): a fast reader, yet the receiver's
    window held the flow back most of its busy time while nothing waited in its queue; what tells
    this from a small receive buffer is the kernel's TCPMemoryPressures alone: the same capture
    without that counter's rise is small_rcvbuf."""
    run = Run.open(fixture_run("socket-buffers-memory-pressure-trixie"))
    (f,) = _ours(run)
    ev = f.link("probe").evidence
    assert ev["rwnd_limited_pct"] >= 80 and ev["receiver_recv_q_mean"] < 0.01 * ev["receiver_rcvbuf"], ev
    path_bytes_per_s = run.lab["path"]["rate_bits_per_s"] / 8
    assert ev["bytes_per_s"] < 0.5 * path_bytes_per_s  # what the peer acknowledged
    assert f.link("counter").evidence["sender"]["TCPMemoryPressures"] >= 1
    # The host's TCP pages (sockstat mem: one count for every namespace) above the pressure
    # threshold the lab set (tcp_mem is not readable inside a namespace: the lab block says it).
    (setting,) = run.lab["host_sysctls"]
    pressure_pages = int(setting.removeprefix("net.ipv4.tcp_mem=").split()[1])
    assert run.table("sockstat")["tcp_mem"].max() > pressure_pages
    c = run.table("counters")
    run._cache["counters"] = c[c["counter"] != "TCPMemoryPressures"]
    (g,) = _ours(run)
    assert (g.status, g.cause_class) == ("confirmed", "small_rcvbuf")


def test_a_limited_flow_the_sampler_never_listed_is_not_checked_not_absent() -> None:
    """The Debian 13 guest's capture (tests/fixtures/README.md): the probe saw the slow reader's flow
    held back, the samplers listed no clocks of it. Not "no finding": one entry for the flow, not
    checked, naming both namespaces' listings and the capture that would judge it."""
    run = Run.open(fixture_run("socket-buffers-slow-reader-unlisted-trixie"))
    assert run.table("sock_buffers").empty
    fl = run.lab["flow"]
    (f,) = rule.evaluate(run)
    assert f.status == "not_checked" and f.cause_class is None
    assert (f.subject["laddr"], f.subject["lport"], f.subject["raddr"], f.subject["rport"]) == (
        fl["laddr"], fl["lport"], fl["raddr"], fl["rport"])  # fmt: skip
    assert f.subject["we_are"] == "sender" and f.subject["netns"] == run.lab["client"]["netns_inode"]
    ev = f.link("probe").evidence
    # The writer's EAGAINs alone are no limit (no SO_SNDBUF): its window-limited writes and the reads are.
    assert ev["writes_blocked"] == 0 < ev["writes_rwnd_limited"] and ev["reads_half_full"] > 10
    assert {x["netns"] for x in ev["listings"]} == {run.lab["client"]["netns_inode"], run.lab["server"]["netns_inode"]}
    assert all(x["flows_listed"] < x["samples"] for x in ev["listings"]) and not ev["unsampled"]
    text = describe(f.kind, f.link("probe"))
    assert "PROBES=socket_buffers" in text and "fewer than two" in text, text


def test_a_flow_the_sampler_listed_gets_no_not_checked_entry_beside_its_finding() -> None:
    """Every variant's flow was listed: judged, and never also listed as not checked."""
    for variant in [*VARIANTS, "healthy"]:
        run = Run.open(fixture_run(f"socket-buffers-{variant}"))
        ours = _ours(run)
        assert len(ours) == 1 and ours[0].status != "not_checked", (variant, [f.status for f in ours])


def test_a_flow_only_in_a_namespace_not_sampled_names_that_namespace() -> None:
    """The same capture with the server's namespace taken out of those sampled: the flow's reader
    end is named as not sampled, the client's listings still counted."""
    run = Run.open(fixture_run("socket-buffers-slow-reader-unlisted-trixie"))
    srv = run.lab["server"]["netns_inode"]
    run.metadata["netns"] = [ns for ns in run.metadata["netns"] if int(ns["inode"]) != srv]
    (f,) = rule.evaluate(run)
    ev = f.link("probe").evidence
    assert ev["unsampled"] == [srv] and [x["netns"] for x in ev["listings"]] == [run.lab["client"]["netns_inode"]]
    assert f"did not sample namespace {srv}" in describe(f.kind, f.link("probe"))


def test_an_unlisted_healthy_writer_is_not_listed_for_its_refused_writes() -> None:
    """The healthy lab's writer, non-blocking, met a full send buffer 35 times (no SO_SNDBUF): with
    its clocks taken away it is not judged, and not listed either: EAGAIN alone is no limit."""
    run = Run.open(fixture_run("socket-buffers-healthy"))
    assert sbd.probe_totals(run)  # the probe counted the flow
    run._cache["sock_buffers"] = run.table("sock_buffers").iloc[0:0]
    assert rule.evaluate(run) == []


def test_a_flow_of_the_same_addresses_judged_in_other_namespaces_covers_none() -> None:
    """The unlisted flow, beside a copy of the slow-reader lab's listed flow given the same addresses
    and ports in two other namespaces (containers reuse them): that one is judged, and the lab's own
    flow is still not checked, not taken as judged."""
    run = Run.open(fixture_run("socket-buffers-slow-reader-unlisted-trixie"))
    other = Run.open(fixture_run("socket-buffers-slow-reader"))
    fl, ofl = run.lab["flow"], other.lab["flow"]
    sb = other.table("sock_buffers")
    sb = sb[(sb["lport"] == ofl["lport"]) | (sb["rport"] == ofl["lport"])].copy()
    sb["netns"] = np.where(sb["netns"] == other.lab["client"]["netns_inode"], 4026539999, 4026539998)
    sb.loc[sb["lport"] == ofl["lport"], "lport"] = fl["lport"]
    sb.loc[sb["rport"] == ofl["lport"], "rport"] = fl["lport"]
    run._cache["sock_buffers"] = sb
    found = {(f.subject["netns"], f.status) for f in rule.evaluate(run)}
    assert (4026539999, "suspected") in found or (4026539999, "confirmed") in found, found
    assert (run.lab["client"]["netns_inode"], "not_checked") in found, found
