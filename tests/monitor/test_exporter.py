"""The exporter's rows (collector/probe-to-csv --stream, read by monitor/exporter/stream.py),
its object tables from them (rows.py) and its bounded families (objects.py)."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from analysis.families import FAMILIES
from monitor.exporter import objects, rows, sample
from monitor.exporter.cli import parse_args
from monitor.exporter.run import Exporter
from monitor.exporter.stream import CsvRows, Row
from tests.conftest import FIXTURES, ROOT

P2C = ROOT / "collector" / "probe-to-csv"
RAW = sorted(FIXTURES.glob("*/probe_*.out"))
IDS = [f"{p.parent.name}/{p.name}" for p in RAW]
GOLDEN = json.loads((ROOT / "tests" / "monitor" / "golden" / "exporter_objects.json").read_text())


def _source(family: str) -> Path:
    return ROOT / "probes" / f"{family}.bt"


def _stream(raw: bytes, family: str, *extra: str, chunk: int = 4096) -> tuple[CsvRows, list[tuple[str, Row]]]:
    """probe-to-csv --stream on the raw output; its stdout read in chunks, as a pipe gives it."""
    r = subprocess.run([P2C, "--stream", _source(family), *extra], input=raw, capture_output=True, check=True)
    reader = CsvRows()
    got = [x for i in range(0, len(r.stdout), chunk) for x in reader.feed(r.stdout[i : i + chunk])]
    assert reader.bad == 0 and not reader.buf and reader.pending is None
    return reader, got


def _totals(family: str) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(record, column) the probe prints as totals, and those it fills with max() (a running
    value, not a count), read from its source."""
    found = re.findall(r"@([a-z0-9_]+?)__([a-z0-9_]+)\[[^\]]*\]\s*\+?=\s*([\w$]+)", _source(family).read_text())
    return {(r, c) for r, c, _ in found}, {(r, c) for r, c, fn in found if fn == "max"}


@pytest.mark.parametrize("raw", RAW, ids=IDS)
def test_stream_mode_gives_the_rows_file_mode_gives(raw: Path, tmp_path: Path) -> None:
    """Real probe output (every fixture's raw file): probe-to-csv --stream prints, record by
    record and in the same order, the rows its file mode writes, value for value (as
    strings, the comm unquoted alike). Running values (max() maps: cpu_ns, data_segs_out)
    differ by design in one place: a key's first row holds 0 in the stream (its baseline:
    a counter from 0) and the whole value so far in the file; every later row is equal."""
    family = raw.stem.removeprefix("probe_")
    subprocess.run([P2C, raw, tmp_path], check=True, capture_output=True)
    reader, got = _stream(raw.read_bytes(), family)
    files = sorted(tmp_path.glob("*.csv"))
    assert files
    (totals, running), compared = _totals(family), 0
    for f in files:
        want = list(csv.DictReader(io.StringIO(f.read_text(errors="replace"), newline="")))
        have = [row for rec, row in got if rec == f.stem]
        assert len(have) == len(want), (f.stem, len(have), len(want))
        if want:
            assert reader.columns[f.stem] == list(want[0]), f.stem
        seen: set[tuple[str, ...]] = set()
        for w, h in zip(want, have, strict=True):
            key = tuple(v for c, v in w.items() if c != "time_s" and (f.stem, c) not in totals)
            for c in w:
                if (f.stem, c) in running and key not in seen:
                    assert h[c] == "0", (f.stem, c, h)
                else:
                    assert h[c] == w[c], (f.stem, c, h, w)
                compared += 1
            seen.add(key)
    assert compared > 0 or not any(len(f.read_text().splitlines()) > 1 for f in files)
    assert reader.started == (b".bt schema=" in raw.read_bytes())


def _contract(raw: Path) -> int:
    return int(json.loads((raw.parent / "metadata.json").read_text())["data_contract"])


@pytest.mark.parametrize("raw", RAW, ids=IDS)
def test_object_tables_from_the_stream_are_the_old_parsers(raw: Path) -> None:
    """The exporter's consumption of the stream's rows (--only the records it uses) gives
    the object tables the exporter gave before its parser moved into probe-to-csv:
    tests/monitor/golden/exporter_objects.json, recorded from the old code (ProbeParser +
    Exporter.row of monitor/exporter.py at 9ac993f; tests/monitor/golden/make_exporter_objects.py
    says how). Fixtures left out of it (older probes without a column the exporter reads)
    fail the same way now."""
    family = raw.stem.removeprefix("probe_")
    _, got = _stream(raw.read_bytes(), family, "--only", ",".join(rows.ROWS_USED))
    assert {rec for rec, _ in got} <= set(rows.ROWS_USED)
    t = objects.Tables(100_000, 600, set(FAMILIES))  # the probes' metrics only, as then
    golden = _since_golden(GOLDEN.get(f"{raw.parent.name}/{raw.name}"))
    if golden is None and _contract(raw) >= 5:
        # Captured after the golden file was made: the rows are consumed without error.
        for rec, row in got:
            rows.ROWS_USED[rec](t, row, 0.0, 1)
        assert t.fams, "no object from a capture of today's probes"
        return
    if golden is None:
        with pytest.raises(KeyError):
            for rec, row in got:
                rows.ROWS_USED[rec](t, row, 0.0, 1)
        return
    for rec, row in got:
        rows.ROWS_USED[rec](t, row, 0.0, 1)
    tables = {}
    for f, fm in t.fams.items():
        objs = {
            "\x1f".join(k): {"counters": o.counters, "gauges": o.gauges, "score": o.score}
            for k, o in sorted(fm.objs.items())
        }
        if objs or fm.other:
            tables[f] = {"objects": objs, "exported": len(fm.exported), "other": fm.other}
    got_tables = json.loads(json.dumps({"tables": tables, "netns_seen": sorted(t.ns_seen)}))
    for want, have in zip(_loop_objects(golden), _loop_objects(got_tables), strict=True):
        assert have.pop("score") == pytest.approx(want.pop("score"))
    assert got_tables == golden


def _loop_objects(tables: dict) -> list[dict]:
    objs = tables["tables"].get("loop", {}).get("objects", {})
    return [objs[k] for k in sorted(objs)]


def _since_golden(golden: dict | None) -> dict | None:
    """The changes made on purpose since the golden file: a thread's CPU time comes from
    procfs (monitor/exporter/threads.py), not from the epoll probe's rows, so a loop loses
    the probe's CPU counter and its score is blocked seconds / 10 + calls / 1e6; and a listener
    is a socket, named by its inode too (member: "0" for probes that did not print it)."""
    if golden is None:
        return None
    golden = json.loads(json.dumps(golden))
    lst = golden["tables"].get("listener")
    if lst is not None:
        lst["objects"] = {k + "\x1f0": v for k, v in lst["objects"].items()}
    for o in golden["tables"].get("loop", {}).get("objects", {}).values():
        c = o["counters"]
        c.pop("loop_cpu_seconds_total", None)
        o["score"] = c["loop_blocked_seconds_total"] / 10 + c["loop_epoll_calls_total"] / 1e6
    for k in ("loop_cpu_seconds_total",):
        golden["tables"].get("loop", {}).get("other", {}).pop(k, None)
    return golden


# Object families added after the golden file was made: tested on their own (tests/monitor/test_flows.py).
AFTER_GOLDEN = {"flow"}


def test_golden_tables_hold_objects_of_every_family() -> None:
    """The golden file is not trivially empty: it has objects of each family."""
    fams = {f for g in GOLDEN.values() for f, tab in g["tables"].items() if tab["objects"]}
    assert fams == set(objects.OBJECT_LABELS) - AFTER_GOLDEN
    assert len(GOLDEN) >= 40


def test_a_comm_with_commas_newline_and_brackets_is_rebuilt() -> None:
    lines = [
        "#ep_loop,time_s,pid,tid,comm,calls,nb_calls,nb_ns_sum,events_sum,ret_zero,ret_full,errors,wait_ns_sum,cpu_ns",
        "# epoll.bt schema=3 interval_s=1: tracing",
        "=== 100",
        "@ep_loop__calls[7, 8, a, b]: c]: 16",
        "@ep_loop__cpu_ns[7, 8, a, b]: c]: 5000",
        "@ep_loop__calls[9, 9, two",
        "lines]: 8",
        "=== 101",
        "@ep_loop__calls[7, 8, a, b]: c]: 40",
        "@ep_loop__cpu_ns[7, 8, a, b]: c]: 9000",
        "=== 102",
    ]
    reader, got = _stream(("\n".join(lines) + "\n").encode(), "epoll", chunk=7)
    assert reader.started
    rows_ = [r for _, r in got]
    assert [r["time_s"] for r in rows_] == ["100", "100", "101"]  # the last marker closed block 101
    by = {(r["time_s"], r["comm"]): r for r in rows_}
    assert by[("100", "a, b]: c")]["calls"] == "16" and by[("100", "two\nlines")]["calls"] == "8"
    # The first cpu_ns is a baseline (0), the next one the runtime since it.
    assert by[("100", "a, b]: c")]["cpu_ns"] == "0" and by[("101", "a, b]: c")]["cpu_ns"] == "4000"
    assert by[("101", "a, b]: c")]["calls"] == "24"


def test_stream_mode_prints_each_row_as_it_comes(tmp_path: Path) -> None:
    """A live pipe: a row is printed as soon as it is known (a CSV row at once; a totals
    block at the next marker), not when a buffer fills or the input ends."""
    p = subprocess.Popen([P2C, "--stream", _source("accept_queue")], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert p.stdin is not None and p.stdout is not None
    head = (
        "#aq_listener,time_s,netns,family,laddr,lport,sock_ino,limit,enqueues,depth_max,full_events,depth_now,accepted"
    )
    assert head in _source("accept_queue").read_text()
    row = "aq_listener,1,4026531840,2,127.0.0.1,18090,7301,8,30,9,4,9,20"
    try:
        for line in (head, row):
            p.stdin.write(line.encode() + b"\n")
            p.stdin.flush()
            t0 = time.monotonic()
            assert p.stdout.readline().decode().rstrip("\n") == line
            assert time.monotonic() - t0 < 2
    finally:
        p.stdin.close()
        p.wait(timeout=5)


def test_family_bounds_series_and_keeps_counters_monotonic() -> None:
    """10 000 listeners seen once each, then one faulty listener: at most top_n series plus
    "other"; the other series never goes down; a new object that overflows a lot takes the
    weakest slot; memory holds at most 4 * top_n objects."""
    fam = objects.Family("listener", top_n=5, ttl=600)
    other_seen = []
    for i in range(10_000):
        fam.add(("1", "10.0.0.1", str(i)), float(i) / 100, {"listener_enqueued_total": 1}, 1.0)
        if i % 500 == 0:
            fam.settle(float(i) / 100)
            other_seen.append(fam.other.get("listener_enqueued_total", 0))
    fam.settle(100.0)
    assert len(fam.exported) == 5
    assert len(fam.objs) <= 20
    assert other_seen == sorted(other_seen)
    assert fam.other["listener_enqueued_total"] == 10_000 - 5
    bad = ("1", "10.0.0.2", "8081")
    fam.add(bad, 101.0, {"listener_queue_full_total": 300}, 300_000.0)
    fam.settle(101.0)
    assert bad in fam.exported and len(fam.exported) == 5
    before = fam.other["listener_enqueued_total"]
    fam.add(bad, 102.0, {"listener_queue_full_total": 7}, 7000.0)
    assert fam.objs[bad].counters["listener_queue_full_total"] == 7  # counts from its admission
    assert fam.other["listener_enqueued_total"] == before
    # Idle past the ttl: dropped, series and memory.
    fam.settle(2000.0)
    assert not fam.objs and not fam.exported


def test_namespace_counters_come_from_sample_netns() -> None:
    """The exporter's namespace counters are collector/sample-netns's (--counters-of), the
    values /proc/<pid>/net/{netstat,snmp} hold (read here after them: equal or higher on a busy host)."""
    ns = sample.Namespaces(ROOT / "collector" / "sample-netns")
    ns.scan(time.monotonic())
    got = ns.counters([ns.host])[ns.host]
    assert set(got) == set(sample.NETNS_COUNTERS.values())
    pairs = [line.split() for line in Path("/proc/self/net/snmp").read_text().splitlines() if line.startswith("Tcp:")]
    tcp = dict(zip(pairs[0][1:], pairs[1][1:], strict=True))
    assert 0 <= int(tcp["PassiveOpens"]) - got["netns_passive_opens_total"] < 1000  # read after: never lower


def test_listener_gauges_survive_one_write_without_a_row(tmp_path: Path) -> None:
    """The probe's interval and the writes are not in phase: one write without the
    listener's row keeps its depth; the second one says the queue was empty."""
    ex = Exporter(parse_args(["--prom-dir", str(tmp_path / "p"), "--state-dir", str(tmp_path / "s")]))
    ex.out.mkdir(parents=True)
    row = {"netns": "1", "family": "2", "laddr": "127.0.0.1", "lport": "8081", "sock_ino": "7301", "limit": "8",
           "enqueues": "30", "depth_max": "9", "full_events": "4", "depth_now": "9", "accepted": "20"}  # fmt: skip
    ex.row("aq_listener", {"time_s": "1", **row})
    depths = []
    for _ in range(3):
        ex.write(0.0)
        text = (ex.out / "tq_accept_queue.prom").read_text()
        depths.append(
            int(
                text.split('tq_listener_queue_depth{netns="1",laddr="127.0.0.1",lport="8081",member="7301"} ')[
                    1
                ].split()[0]
            )
        )
    assert depths == [9, 9, 0]
    assert 'tq_listener_queue_full_total{netns="1",laddr="127.0.0.1",lport="8081",member="7301"} 4' in text


def test_an_ipv4_peer_of_a_dual_stack_socket_is_labelled_as_its_application_sees_it() -> None:
    """A dual-stack listener's IPv4 client is ::ffff:a.b.c.d to the kernel: its endpoint,
    destination and close series are labelled a.b.c.d, the form the client's own series and
    the report use (issue 18); a real IPv6 peer keeps its form."""
    t = objects.Tables(100, 600, set(FAMILIES))
    row = {"netns": "7", "service_local": "1", "data_segs": "3", "syn_segs": "0", "synack_segs": "2",
           "service_port": "7401"}  # fmt: skip
    rows.endpoint(t, {**row, "raddr": "::ffff:127.0.0.1"}, 0.0, 1)
    rows.endpoint(t, {**row, "raddr": "::1"}, 0.0, 1)
    rows.connect(t, {"netns": "7", "raddr": "::ffff:198.18.0.1", "rport": "80", "failures": "2", "errno": "99"}, 0.0, 1)
    close = {"netns": "7", "service_local": "0", "raddr": "::ffff:198.18.0.1", "service_port": "80"}
    rows.close(t, {**close, "active_closes": "4"}, 0.0, 1)
    assert set(t.fams["endpoint"].objs) == {("7", "127.0.0.1", "7401", "server"), ("7", "::1", "7401", "server")}
    (dest,) = t.fams["destination"].objs.values()
    assert set(t.fams["destination"].objs) == {("7", "198.18.0.1", "80")}
    assert dest.counters["destination_eaddrnotavail_total"] == 2
    assert dest.counters["destination_active_closes_total"] == 4
