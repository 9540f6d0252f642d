"""The raw-tracepoint tier, run by bpftrace 0.23 from a Debian 13 userland
(dev/bpftrace-chroot; bpftrace >= 0.18 has raw tracepoints, Debian 12's 0.17 does not).

collector/doctor must find the tier with 0.23 and not with 0.17. Then both tiers side
by side on one lab run: the accept-overflow lab's sizing variant captured on the raw tier
(accept_queue.raw.bt: one raw tracepoint, no syscall hook, bpftrace 0.23) while the
reference file (accept_queue.bt: tracepoints and accept()/listen() hooks, 0.17) runs
beside it. Per
listener their counts must agree: queued connections, full events, the limit, the
deepest queue, and accepts (counted at accept() by one, derived from the depth by the
other) against the server's own count."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from analysis.derived.time_wait import LIFE_COLS
from analysis.load import Run
from tests.conftest import ROOT, _kernel_problem, sigint_default
from tests.integration.children import wait_for
from tests.integration.test_family_labs import findings, run_lab

pytestmark = pytest.mark.integration
CHROOT = ROOT / "dev" / "bpftrace-chroot"


@pytest.fixture(scope="module")
def bpftrace_023() -> str:
    problem = _kernel_problem()
    if problem:
        pytest.fail(problem) if os.environ.get("CI") else pytest.skip(problem)
    r = subprocess.run([str(CHROOT), "--build"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    v = subprocess.run([str(CHROOT), "--version"], capture_output=True, text=True, timeout=60).stdout
    assert v.startswith("bpftrace v0.2"), v
    return str(CHROOT)


def _doctor(tmp_path: Path, bpftrace: str) -> dict:
    out = tmp_path / f"doctor-{Path(bpftrace).name}.json"
    subprocess.run([str(ROOT / "collector" / "doctor"), "-q", "-o", str(out)], check=False, timeout=300,
                   env={**os.environ, "BPFTRACE": bpftrace})  # fmt: skip
    return json.loads(out.read_text())


def test_doctor_finds_the_raw_tier_with_023_only(bpftrace_023: str, tmp_path: Path) -> None:
    new = _doctor(tmp_path, bpftrace_023)
    assert new["probe_types"]["rawtracepoint"]["attaches"] is True
    for fam in ("accept_queue", "time_wait", "socket_buffers"):
        assert new["families"][fam] == {"file": f"probes/{fam}.raw.bt", "tier": "rawtracepoint"}
    old = _doctor(tmp_path, "bpftrace")
    assert old["bpftrace_version"] == "v0.17.0"
    assert old["probe_types"]["rawtracepoint"]["attaches"] is False
    assert old["families"]["accept_queue"]["file"] == "probes/accept_queue.bt"
    assert old["families"]["time_wait"]["file"] == "probes/time_wait.bt"
    assert old["families"]["socket_buffers"]["file"] == "probes/socket_buffers.bt"


def _recursion_misses(pid: int) -> int:
    """The events the kernel did not run a process's probe programs for (collector/lib.sh)."""
    r = subprocess.run(["bash", "-c", f'source "{ROOT}/collector/lib.sh"; probe_recursion_misses {pid}'],
                       capture_output=True, text=True, check=True)  # fmt: skip
    return int(r.stdout.strip() or 0)


def _side_by_side(bpftrace: str, tmp: Path, family: str, lab: str, variant: str) -> tuple[Run, Path, int]:
    """The lab captured on the raw tier (collector/capture with BPFTRACE=0.23 picks the
    family's raw file by itself), its reference file run beside it by bpftrace 0.17: the run,
    the reference file's CSV folder, and the events the kernel skipped the reference's
    programs for (a perf-event tracepoint program is skipped while another BPF program runs
    on its CPU; a raw tracepoint's only while the same program does)."""
    ref = tmp / "ref.out"
    with ref.open("wb") as out:
        probe = subprocess.Popen(["bpftrace", str(ROOT / "probes" / f"{family}.bt")], stdout=out,
                                 stderr=subprocess.DEVNULL, preexec_fn=sigint_default)  # fmt: skip
    try:
        wait_for("the reference probe's header", lambda: b"\n#" in ref.read_bytes(), 60, 0.2)
        run = run_lab(lab, variant, tmp / "run", CAPTURE_PROBES=CAPTURED_WITH.get(family, family), BPFTRACE=bpftrace)
        ref_misses = _recursion_misses(probe.pid)
    finally:
        probe.send_signal(signal.SIGINT)
        probe.wait(timeout=30)
    subprocess.run([str(ROOT / "collector" / "probe-to-csv"), str(ref), str(tmp / "csv")], check=True,
                   capture_output=True)  # fmt: skip
    return run, tmp / "csv", ref_misses


# The accept queue's and TIME_WAIT's raw files both attach to inet_sock_set_state, and one
# bpftrace runs them as one program (collector/probe-bundle): each is compared captured so.
CAPTURED_WITH = {"accept_queue": "accept_queue,time_wait", "time_wait": "accept_queue,time_wait"}
# The files doctor picks here under bpftrace 0.23 for the families with no syscall hook (cheap).
CHEAP_RAW_FILES = ("accept_queue.raw.bt", "time_wait.raw.bt", "socket_buffers.raw.bt", "retransmits.tracepoint.bt")


# One side-by-side run per family for the module: it is both the tiers' comparison and
# the raw tier's own lab run (CI time: each was a lab run of its own, 36 s in all).
LAB_OF_FAMILY = {
    "accept_queue": ("accept-overflow", "sizing"),
    "time_wait": ("time-wait", "exhaust"),
    "socket_buffers": ("socket-buffers", "slow-reader"),
}


@pytest.fixture(scope="module")
def side_by_side(bpftrace_023: str, tmp_path_factory: pytest.TempPathFactory):
    done: dict[str, tuple[Run, Path, int]] = {}

    def get(family: str) -> tuple[Run, Path, int]:
        if family not in done:
            done[family] = _side_by_side(bpftrace_023, tmp_path_factory.mktemp(family), family,
                                         *LAB_OF_FAMILY[family])  # fmt: skip
        return done[family]

    return get


def test_accept_queue_both_tiers_count_the_same_on_one_run(side_by_side) -> None:
    run, csv, ref_misses = side_by_side("accept_queue")
    srv = run.lab["server"]

    def lab_listener(rows: pd.DataFrame) -> pd.DataFrame:
        return rows[(rows["netns"] == int(srv["netns_inode"])) & (rows["lport"] == int(srv["port"]))]

    ref, raw = lab_listener(pd.read_csv(csv / "aq_listener.csv")), lab_listener(run.table("aq_listener"))
    assert not ref.empty and not raw.empty
    # Events the kernel skipped either tier's programs for are counted by none.
    misses = (run.metadata["probes"]["accept_queue"]["recursion_misses"] or 0) + ref_misses
    served = srv["stats"]["accepted"]
    # The raw tier counts per CPU (count()) and loses no increment, but counts only what the
    # tracepoints deliver: in some runs 17 connections of one burst (limit + 1) reached no program
    # of either tier, with no recursion miss, while the kernel counted all 600 (docs/probes.md,
    # "When the tracepoints deliver nothing"; 583 and 587 in two CI runs). The reference's plain-map "++"
    # also loses one whenever two CPUs queue at once (its header), more the busier the machine:
    # 587 and 565 of 600 in CI runs (2026-11-26, -28), never over. Held to the server's count.
    undelivered = int(srv["backlog_requested"]) + 1
    enq_ref, enq_raw = int(ref["enqueues"].sum()), int(raw["enqueues"].sum())
    assert served - undelivered - 2 - misses <= enq_raw <= served + 2, (enq_raw, served, misses)
    assert 0.85 * enq_raw - misses <= enq_ref <= enq_raw + 3 + misses, (enq_ref, enq_raw, misses)
    full_ref, full_raw = int(ref["full_events"].sum()), int(raw["full_events"].sum())
    # Full events come when many CPUs queue at once, just when the reference's plain-map
    # "++" loses increments, and the raw tier's count() does not: the reference runs short
    # (by 2, 3, 5, 3 of 57-66 in four runs here; 4 of 49 and 8 of 59 in CI runs, 2026-11-25
    # and -27). It is never over by more than a depth read apart: both programs read the
    # depth at the same sk_data_ready, and another CPU's accept() between the reads moves
    # an event at depth == limit + 1 across the line.
    assert full_ref > 0 and -3 - misses <= full_raw - full_ref <= max(3, 0.20 * full_raw) + misses, (
        full_ref, full_raw, enq_ref, enq_raw, misses)  # fmt: skip
    assert set(raw["limit"]) == set(ref["limit"]) == {int(srv["backlog_requested"])}
    assert abs(int(raw["depth_max"].max()) - int(ref["depth_max"].max())) <= 1
    assert int(ref["accepted"].sum()) == pytest.approx(served, rel=0.01, abs=2 + ref_misses)
    # The raw tier derives accepts from its enqueue count (depth before + enqueues - depth
    # after), counted per CPU (count()): none lost when two CPUs queue at once. With a
    # plain-map increment it was 13 of 600 short in a CI run (2026-11-26).
    cols = ["time_s", "enqueues", "depth_max", "depth_now", "accepted"]
    # Accepts of connections no program saw queued go uncounted with them (depth before +
    # enqueues - depth after).
    assert served - undelivered - 2 - misses <= int(raw["accepted"].sum()) <= served + 2, (
        misses, raw[cols].to_string(), ref[cols].to_string())  # fmt: skip


def _queue_accept_close(queued: int, accepted: int) -> int:
    """A loopback listener that closes right after accepting some of what it queued, as a
    server that exits does: its port."""
    lsn = socket.create_server(("127.0.0.1", 0), backlog=queued + 4)
    port = lsn.getsockname()[1]
    # The first alone: the probe reads the depth before it from the listener as it first
    # sees it (one too many accepts if another connection was queued in between; header).
    clients = [socket.create_connection(("127.0.0.1", port), timeout=5)]
    time.sleep(0.05)
    clients += [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(queued - 1)]
    time.sleep(0.1)  # every handshake completed and queued
    for _ in range(accepted):
        lsn.accept()[0].close()
    lsn.close()  # the rest reset by the kernel, never accepted
    for c in clients:
        c.close()
    return port


def _raw_accept_queue_rows(
    bpftrace: str, tmp: Path, workload: Callable[[], list[int]], warnings: bool = False
) -> tuple[pd.DataFrame, list[int]]:
    """accept_queue.raw.bt around WORKLOAD (which returns the ports it listened on): its aq_listener
    rows on those ports of 127.0.0.1, through collector/probe-to-csv; no error, and no warning
    line unless WARNINGS (the probe's own, as listeners beyond its 32 slots)."""
    raw = tmp / "raw.out"
    with raw.open("wb") as out:
        probe = subprocess.Popen([bpftrace, str(ROOT / "probes" / "accept_queue.raw.bt")], stdout=out,
                                 stderr=subprocess.PIPE, preexec_fn=sigint_default)  # fmt: skip
    try:
        wait_for("the raw probe's header", lambda: b"\n#" in raw.read_bytes(), 60, 0.2)
        ports = workload()
    finally:
        probe.send_signal(signal.SIGINT)
        _, err = probe.communicate(timeout=30)
    text = raw.read_text(errors="replace")
    warned = [i for i, line in enumerate(text.splitlines()) if "WARNING" in line]
    assert warnings or not warned, "\n".join(text.splitlines()[warned[0] : warned[0] + 4]) if warned else ""
    assert b"ERROR" not in err, err[-2000:]
    subprocess.run([str(ROOT / "collector" / "probe-to-csv"), str(raw), str(tmp / "csv")], check=True,
                   capture_output=True)  # fmt: skip
    rows = pd.read_csv(tmp / "csv" / "aq_listener.csv")
    return rows[rows["lport"].isin(ports) & (rows["laddr"] == "127.0.0.1")], ports


def _close_34_listeners() -> list[int]:
    ports = [_queue_accept_close(10, 6) for _ in range(34)]
    time.sleep(2.5)  # two ticks: the closing interval printed
    return ports


def test_accept_queue_raw_counts_the_accepts_of_a_listener_that_closed(bpftrace_023: str, tmp_path: Path) -> None:
    """Accepts are derived from the depth, and a closed listener's depth reads 0: without the
    depth at close, the accepts made in the interval a server exits were lost (CI: 576 of 600
    in the sizing lab) or, counted to 0, the resets taken for accepts. 34 listeners one after
    another (the probe holds 32 at a time: closed ones give their slot back, and one can get
    the memory of one that closed), each 10 queued, 6 accepted, then closed."""
    # 34 listeners in a row hold more than 32 slots before a tick gives the closed ones back.
    mine, ports = _raw_accept_queue_rows(bpftrace_023, tmp_path, _close_34_listeners, warnings=True)
    per_port = mine.groupby("lport")[["enqueues", "accepted"]].sum()
    assert sorted(per_port.index) == sorted(ports), mine.tail(20)
    assert per_port["enqueues"].tolist() == [10] * 34, per_port
    assert per_port["accepted"].tolist() == [6] * 34, per_port
    assert set(mine["limit"]) == {14}, mine  # the backlog, from the first event: no tick saw it open


def _first_seen_on_two_cpus(listeners: int, cpus: list[int]) -> list[int]:
    """Listeners each first reached by two connections made at once from two CPUs (two first
    events on one listener at once: two slots, two first count() updates of one key), then a
    burst of 5 that a tick sees queued before it is accepted: 7 queued and 7 accepted each.
    Their ports."""
    lsns = [socket.create_server(("127.0.0.1", 0), backlog=32) for _ in range(listeners)]
    for lsn in lsns:
        port, start, held = lsn.getsockname()[1], threading.Barrier(2), []

        def connect(cpu: int, port: int = port, start: threading.Barrier = start, held: list = held) -> None:
            os.sched_setaffinity(0, {cpu})
            start.wait()
            held.append(socket.create_connection(("127.0.0.1", port), timeout=5))

        pair = [threading.Thread(target=connect, args=(cpu,)) for cpu in cpus[:2]]
        for t in pair:
            t.start()
        for t in pair:
            t.join()
        for c in [lsn.accept()[0] for _ in range(2)] + held:
            c.close()
    burst = [socket.create_connection(("127.0.0.1", lsn.getsockname()[1]), timeout=5) for lsn in lsns for _ in range(5)]
    time.sleep(1.2)  # a tick reads each queue 5 deep
    for lsn in lsns:
        for _ in range(5):
            lsn.accept()[0].close()
    for c in burst:
        c.close()
    time.sleep(1.2)
    ports = [lsn.getsockname()[1] for lsn in lsns]
    for lsn in lsns:
        lsn.close()
    # Their slots are given back at the next tick: two ticks' wait, or a late one (seen after the
    # bpftrace of the test before had just exited) leaves the next round's listeners untracked.
    time.sleep(2.2)
    return ports


def test_accept_queue_raw_counts_listeners_first_seen_on_two_cpus_at_once(bpftrace_023: str, tmp_path: Path) -> None:
    """Two CPUs first seeing one listener at once each took a slot, and the second, read as a
    listener of its own, counted each accept again for as long as the listener lived (5 of 240
    listeners here, 2 accepts too many each); the two CPUs' first count() on one new key lost
    one (bpftrace 0.23: "WARNING: File exists", 13 of 240). Now: every enqueue counted, and
    accepts exact but for the first interval's one too many the header allows."""
    cpus = sorted(os.sched_getaffinity(0))
    assert len(cpus) >= 2, "needs two CPUs"
    # 16 listeners a round: each race holds a second slot until the next tick, so even a round
    # where every listener races fits the probe's 32 (28 a round left one untracked in a CI run).
    mine, ports = _raw_accept_queue_rows(
        bpftrace_023, tmp_path, lambda: [p for _ in range(6) for p in _first_seen_on_two_cpus(16, cpus)]
    )
    per_socket = mine.groupby(["lport", "sock_ino"])[["enqueues", "accepted"]].sum()
    assert len(per_socket) == len(ports), per_socket
    assert (per_socket["enqueues"] == 7).all(), per_socket[per_socket["enqueues"] != 7]
    assert per_socket["accepted"].isin([7, 8]).all(), per_socket[~per_socket["accepted"].isin([7, 8])]


def test_time_wait_both_tiers_count_the_same_on_one_run(side_by_side) -> None:
    """Closes and failed connects are per-CPU count() maps: exact in both tiers, so equal.
    (Lifetimes are a random 1-in-16 sample in each: not compared.)"""
    run, csv, _ = side_by_side("time_wait")
    bundle = (run.path / "probes.bt").read_text()
    assert bundle.count("\nrawtracepoint:inet_sock_set_state\n") == 1 and "\n// accept_queue.raw.bt\nif (" in bundle
    cli = int(run.lab["client"]["netns_inode"])
    for table, cols in (("tw_close", ["active_closes", "passive_closes"]), ("tw_connect", ["failures"])):
        ref, raw = pd.read_csv(csv / f"{table}.csv"), run.table(table)
        keys = [c for c in ref.columns if c not in (*cols, "time_s", "pid", "comm") and not c.startswith("life_")]
        want = ref[ref["netns"] == cli].groupby(keys)[cols].sum()
        got = raw[raw["netns"] == cli].groupby(keys)[cols].sum()
        assert not want.empty and int(want.to_numpy().sum()) > 100, table
        assert _rows(got) == _rows(want), table
    # A sampled death (at CLOSE, where the socket has given its local port back) is keyed as
    # its connection's close was: its endpoint and service port are among those of the closes.
    ref, raw = pd.read_csv(csv / "tw_close.csv"), run.table("tw_close")
    keys = ["netns", "family", "laddr", "raddr", "service_port", "service_local"]
    deaths = raw[(raw["netns"] == cli) & (raw[LIFE_COLS].sum(axis=1) > 0)]
    closes = ref[(ref["netns"] == cli) & (ref["active_closes"] + ref["passive_closes"] > 0)]
    assert len(deaths) > 0
    assert set(map(tuple, deaths[keys].astype(str).values)) <= set(map(tuple, closes[keys].astype(str).values))


SB_COUNTS = ["limited_writes", "writes_blocked", "writes_rwnd_limited", "writes_sndbuf_limited", "sndbuf_locked_writes",
             "noted_reads", "reads_zero_window", "reads_half_full", "rcvbuf_locked_reads"]  # fmt: skip


def test_socket_buffers_both_tiers_count_the_same_on_one_run(side_by_side) -> None:
    """Writes and reads recorded are per-CPU count() maps, and both tiers decide on the same
    event from the same socket fields: the flow's counts are equal on both sides, and its
    blocked writes are the writer's own count."""
    run, csv, ref_misses = side_by_side("socket_buffers")
    misses = (run.metadata["probes"]["socket_buffers"]["recursion_misses"] or 0) + ref_misses
    fl = run.lab["flow"]
    ends = {(fl["laddr"], fl["lport"], fl["raddr"], 7000), (fl["raddr"], 7000, fl["laddr"], fl["lport"])}
    ours = {int(run.lab[side]["netns_inode"]) for side in ("server", "client")}

    def flow(rows: pd.DataFrame) -> pd.DataFrame:
        rows = rows[rows["netns"].isin(ours)]
        mine = [(a, int(b), c, int(d)) in ends for a, b, c, d in rows[["laddr", "lport", "raddr", "rport"]].values]
        return rows[mine].groupby(["netns", "laddr", "lport", "raddr", "rport"])[SB_COUNTS].sum()

    ref, raw = flow(pd.read_csv(csv / "sb_flow.csv")), flow(run.table("sb_flow"))
    assert len(raw) == 2 and int(raw["noted_reads"].sum()) > 10, raw.to_string()
    assert int(raw["writes_blocked"].sum()) == fl["writer"]["writes_blocked"] > 0
    diff = (raw - ref.reindex(raw.index).fillna(0)).abs().to_numpy()
    assert diff.max() <= misses, (raw.to_string(), ref.to_string(), misses)


def _rows(t: pd.DataFrame) -> list[list[str]]:
    return sorted(t.reset_index().astype(str).values.tolist())


def test_every_order_of_the_cheap_tiers_files_bundles_into_a_program_bpftrace_023_takes(bpftrace_023: str) -> None:
    """A capture bundles its families' files in the order it is given them (`--probes time_wait,
    accept_queue`): each of the 24 orders of the four files with no syscall hook compiles
    (--dry-run: bpftrace types every map and loads nothing). Merged where the TIME_WAIT block
    stood, the accept queue's inet_sock_set_state block came before the block that types its
    @aq_slot, and bpftrace refused the bundle: the VM matrix's time-wait lab (2026-12-07)."""
    files = [str(ROOT / "probes" / f) for f in CHEAP_RAW_FILES]
    refused = []
    for order in itertools.permutations(files):
        bundle = subprocess.run([str(ROOT / "collector" / "probe-bundle"), *order], capture_output=True, text=True,
                                check=True).stdout  # fmt: skip
        r = subprocess.run([bpftrace_023, "--dry-run", "-e", bundle], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            refused.append(([Path(f).name for f in order], [x for x in r.stderr.splitlines() if "ERROR" in x][:1]))
    assert not refused, refused


def test_every_probe_file_runnable_with_023_attaches_and_prints(bpftrace_023: str, tmp_path: Path) -> None:
    """What doctor says 0.23 can run here, each file attached for real: its banner and
    headers printed, no error (0.23 is stricter than 0.17: types, deletes, signedness)."""
    doctor = _doctor(tmp_path, bpftrace_023)
    runnable = sorted(f for f, p in doctor["probes"].items() if p["runnable"])
    assert {
        "accept_queue.raw.bt",
        "time_wait.raw.bt",
        "socket_buffers.raw.bt",
        "accept_queue.bt",
        "retransmits.bt",
        "time_wait.bt",
        "epoll.bt",
    } <= set(runnable)
    for f in runnable:
        p = subprocess.Popen([bpftrace_023, str(ROOT / "probes" / f)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, preexec_fn=sigint_default)  # fmt: skip
        try:
            out = b""
            assert p.stdout is not None
            while b"\n#" not in out and p.poll() is None:
                out += p.stdout.read1(4096)
        finally:
            p.send_signal(signal.SIGINT)
            rest, err = p.communicate(timeout=30)
        assert b".bt schema=" in out and b"\n#" in out + rest, (f, out[-500:], err[-2000:])
        assert b"ERROR" not in err, (f, err[-2000:])


@pytest.mark.parametrize(
    ("family", "kind"), [("accept_queue", "accept_queue_overflow"), ("time_wait", "time_wait_exhaustion")]
)
def test_a_lab_captured_on_the_raw_tier_finds_its_fault(side_by_side, family: str, kind: str) -> None:
    """collector/capture with BPFTRACE=0.23 picks the raw file by itself, and the lab's
    finding comes out of it as from the reference file."""
    run, _, _ = side_by_side(family)
    probe = run.metadata["probes"][family]
    assert (probe["file"], probe["tier"], probe["status"]) == (f"probes/{family}.raw.bt", "rawtracepoint", "ok")
    assert run.metadata["bpftrace_version"].startswith("v0.2")
    found = findings(run, kind)
    assert found and found[0]["status"] == "confirmed", found


# bpftrace 0.23's own runtime warnings, by helper and return code: listed with their counts, never
# failed on. Any other helper warning comes from a probe's own code (a per-CPU map read with a key
# it does not hold, a delete of a missing key, a full map) and fails the test below.
BPFTRACE_OWN_WARNINGS = {
    # count()/sum() creates this CPU's slot of a new key with BPF_NOEXIST, which fails (and loses that
    # one event) when another CPU created the key first; bpftrace 0.24 uses BPF_ANY (its PR #4074).
    ("map_update_elem", -17): "a new key's per-CPU slot raced another CPU (File exists)",
}
# bpftrace's own lines on stderr: this host refuses it a higher RLIMIT_MEMLOCK (harmless here).
BPFTRACE_OWN_STDERR = {"couldn't set RLIMIT_MEMLOCK": "RLIMIT_MEMLOCK not raised"}
WARNING_LINE = re.compile(r"(?P<file>\S+?):(?P<line>\d+):\d+(?:-\d+)?: WARNING: (?P<msg>.*)")
HELPER_INFO = re.compile(r"Additional Info - helper: (?P<helper>\w+), retcode: (?P<ret>-?\d+)")


@dataclass(frozen=True)
class HelperWarning:
    where: str  # file:line
    msg: str
    helper: str
    ret: int

    def __str__(self) -> str:
        return f"{self.where} {self.helper} {self.ret} ({self.msg})"


def _words(s: str) -> str:
    return " ".join(s.split())


def split_warnings(text: str) -> tuple[str, list[HelperWarning]]:
    """The output without bpftrace's runtime warnings, and the warnings. Each is printed as its
    "FILE:LINE:COL: WARNING: ..." line, then (in either order) the helper and its return code, the
    source line, and a line of ~ under the expression: only those lines are taken out."""
    lines = text.split("\n")
    kept: list[str] = []
    found: list[HelperWarning] = []
    i = 0
    while i < len(lines):
        m = WARNING_LINE.fullmatch(lines[i])
        if not m:
            kept.append(lines[i])
            i += 1
            continue
        src = Path(m["file"]).read_text().splitlines()[int(m["line"]) - 1] if Path(m["file"]).is_file() else None
        helper, ret = "", 0
        i += 1
        for _ in range(3):
            if i >= len(lines):
                break
            if h := HELPER_INFO.fullmatch(lines[i]):
                helper, ret = h["helper"], int(h["ret"])
            elif not (re.fullmatch(r"\s*~+\s*", lines[i]) or (src is not None and _words(lines[i]) == _words(src))):
                break
            i += 1
        found.append(HelperWarning(f"{Path(m['file']).name}:{m['line']}", m["msg"], helper, ret))
    return "\n".join(kept), found


def _is_bpftraces_own(w: HelperWarning) -> bool:
    return (w.helper, w.ret) in BPFTRACE_OWN_WARNINGS


# The busy-host lab with every variant's fault at once (its own environment overrides): an
# overflowing listener, a lossy flow (SYN, SYN-ACK and data retransmits, resets), a client out of
# ports (EADDRNOTAVAIL) beside one that closes first, and epoll loops, one of them busy. The lab's
# own capture runs one family only (it is not what is judged here).
# Every family's fault at once on the busy-host lab (labs/busy-host/lab.sh): the small backlog, the
# lossy flow, the hot loop, the port exhaustion and the slow reader (the socket-buffer probe records
# only writes a buffer held back and reads that left data queued: a healthy flow may give none).
ALL_FAULTS = {"BACKLOG": "16", "LOSS_PCT": "5", "HOT_WORK": "10ms", "EXHAUST_RATE": "150", "READ_EVERY_SLOW": "100ms",
              "LOAD_SECONDS": "4"}  # fmt: skip


def test_every_probe_file_prints_only_its_records_under_023_on_real_traffic(bpftrace_023: str, tmp_path: Path) -> None:
    """bpftrace 0.23 reports helper errors by default, into the probe's output (one warning of four
    lines each time a per-CPU map is read with a missing key: 602 lines in 20 s of
    accept_queue.raw.bt on an idle host, issue 35). Every raw- and tracepoint-tier file, each in its
    own bpftrace 0.23 beside the others, under one lab run that makes every family's events fire:
    no line collector/probe-to-csv does not know, no helper warning from the probe's own code, nothing
    on stderr but bpftrace's own notes; bpftrace's own warnings are listed with their counts."""
    doctor = _doctor(tmp_path, bpftrace_023)
    files = sorted(f for f, p in doctor["probes"].items() if p["tier"] in ("tracepoint", "rawtracepoint"))
    not_here = {f: doctor["probes"][f]["missing"] for f in files if not doctor["probes"][f]["runnable"]}
    assert files and not not_here, not_here  # every such file attaches on this host's 6.18
    outs = {f: tmp_path / f"{f}.out" for f in files}
    procs: dict[str, subprocess.Popen] = {}
    try:
        for f in files:
            with outs[f].open("wb") as out, (tmp_path / f"{f}.err").open("wb") as err:
                procs[f] = subprocess.Popen([bpftrace_023, str(ROOT / "probes" / f), "1"], stdout=out, stderr=err,
                                            preexec_fn=sigint_default)  # fmt: skip

        def attached() -> bool:
            dead = {f: (tmp_path / f"{f}.err").read_text()[-1000:] for f, p in procs.items() if p.poll() is not None}
            assert not dead, dead
            return all(b"\n#" in outs[f].read_bytes() for f in files)

        wait_for("every probe file's header", attached, 180, 0.2)
        run_lab("busy-host", "healthy", tmp_path / "run", report=False, CAPTURE_PROBES="time_wait", **ALL_FAULTS)
    finally:
        for p in procs.values():
            p.send_signal(signal.SIGINT)
        for p in procs.values():
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    table, bad = [], []
    for f in files:
        raw = outs[f].read_text(errors="replace")
        text, warnings = split_warnings(raw)
        (tmp_path / f"{f}.kept").write_text(text)
        r = subprocess.run([str(ROOT / "collector" / "probe-to-csv"), str(tmp_path / f"{f}.kept"), str(tmp_path / f)],
                           capture_output=True, text=True, check=True)  # fmt: skip
        m = re.search(r"(\d+) lines of unknown records", r.stderr)
        unknown, rows = int(m[1]) if m else 0, int(r.stdout.strip() or 0)
        own = Counter(str(w) for w in warnings if not _is_bpftraces_own(w))
        theirs = Counter(BPFTRACE_OWN_WARNINGS[(w.helper, w.ret)] for w in warnings if _is_bpftraces_own(w))
        err_lines = [ln for ln in (tmp_path / f"{f}.err").read_text().splitlines() if "WARNING" in ln or "ERROR" in ln]
        theirs.update(n for ln in err_lines for k, n in BPFTRACE_OWN_STDERR.items() if k in ln)
        stderr_own = [ln for ln in err_lines if not any(k in ln for k in BPFTRACE_OWN_STDERR)]
        taken = raw.count("\n") - text.count("\n")
        table.append(f"{f}: {rows} rows, {unknown} unknown lines (besides {taken} lines of {len(warnings)} "
                     f"warnings), probe's own warnings {dict(own)}, stderr {stderr_own}, bpftrace's own "
                     f"{dict(theirs)}")  # fmt: skip
        # rows: the lab made the file's events fire (a file that printed nothing tests nothing).
        if unknown or own or stderr_own or not rows:
            bad.append(f)
    print("\n".join(table))
    assert not bad, "\n".join(table)
