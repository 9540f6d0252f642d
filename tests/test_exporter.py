"""The exporter's stream parser and its bounded object tables (monitor/exporter.py)."""

from __future__ import annotations

import csv
import io
import subprocess
from pathlib import Path

import pytest

from monitor import exporter
from tests.conftest import FIXTURES, ROOT

RAW = sorted(FIXTURES.glob("*/probe_*.out"))
PROBE_SOURCE = {
    f: (ROOT / "probes" / f"{f}.bt").read_text() for f in ("accept_queue", "retransmits", "time_wait", "epoll")
}


def _parse_stream(raw: Path, source: str, chunk: int = 4096) -> dict[str, list[dict[str, object]]]:
    """Feed the raw output in arbitrary chunks, as a pipe delivers it."""
    p = exporter.ProbeParser(source)
    rows: dict[str, list[dict[str, object]]] = {}
    data, buf = raw.read_bytes(), b""
    for i in range(0, len(data), chunk):
        buf += data[i : i + chunk]
        *lines, buf = buf.split(b"\n")
        for line in lines:
            for rec, row in p.feed(line.decode("utf-8", "replace")):
                rows.setdefault(rec, []).append(row)
    if buf:
        for rec, row in p.feed(buf.decode("utf-8", "replace")):
            rows.setdefault(rec, []).append(row)
    for rec, row in p.flush_pending():
        rows.setdefault(rec, []).append(row)
    # The last block: probe-to-csv flushes at end of file; a live stream waits for the next marker.
    for rec, row in p._flush():
        rows.setdefault(rec, []).append(row)
    return rows


@pytest.mark.parametrize("raw", RAW, ids=[f"{p.parent.name}/{p.name}" for p in RAW])
def test_stream_parser_gives_the_rows_probe_to_csv_gives(raw: Path, tmp_path: Path) -> None:
    """Real probe output (every fixture's raw file): the exporter's parser, fed in 4 KiB
    chunks, yields the rows collector/probe-to-csv writes, value for value. Running values
    (max() maps: cpu_ns, data_segs_out) are the one difference by design: their first
    sighting is a baseline for the exporter (a counter from 0), where the CSV row holds
    the whole value so far."""
    family = raw.stem.removeprefix("probe_")
    subprocess.run([ROOT / "collector" / "probe-to-csv", raw, tmp_path], check=True, capture_output=True)
    got = _parse_stream(raw, PROBE_SOURCE[family])
    _, running = exporter.probe_counters(PROBE_SOURCE[family])
    skip = {c for _, c in running}
    want_files = sorted(tmp_path.glob("*.csv"))
    assert want_files
    compared = 0
    for f in want_files:
        want = list(csv.DictReader(io.StringIO(f.read_text(errors="surrogateescape"))))
        have = got.get(f.stem, [])
        assert len(have) == len(want), (f.stem, len(have), len(want))
        cols = [c for c in want[0] if c not in skip] if want else []
        # Rows of one interval come in map order in the CSV: compare them sorted.
        want_rows = sorted(tuple(w[c] for c in cols) for w in want)
        have_rows = sorted(tuple(str(h[c]) for c in cols) for h in have)
        assert have_rows == want_rows, f.stem
        compared += len(want_rows) * len(cols)
    if any(len(f.read_text(errors="replace").splitlines()) > 1 for f in want_files):
        assert compared > 0


def test_a_comm_with_commas_newline_and_brackets_is_rebuilt() -> None:
    src = PROBE_SOURCE["epoll"]
    p = exporter.ProbeParser(src)
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
    rows = [r for line in lines for _, r in p.feed(line)]
    assert p.started
    assert [r["time_s"] for r in rows] == [100, 100, 101]  # the last marker closed block 101 at once
    by = {(r["time_s"], r["comm"]): r for r in rows}
    assert by[(100, "a, b]: c")]["calls"] == 16 and by[(100, "two\nlines")]["calls"] == 8
    # The first cpu_ns is a baseline (0), the next one the runtime since it.
    assert by[(100, "a, b]: c")]["cpu_ns"] == 0 and by[(101, "a, b]: c")]["cpu_ns"] == 4000
    assert by[(101, "a, b]: c")]["calls"] == 24


def test_family_bounds_series_and_keeps_counters_monotonic() -> None:
    """10 000 listeners seen once each, then one faulty listener: at most top_n series plus
    "other"; the other series never goes down; a new object that overflows a lot takes the
    weakest slot; memory holds at most 4 * top_n objects."""
    fam = exporter.Family("listener", top_n=5, ttl=600)
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


def test_hex_addresses_from_proc_net_tcp() -> None:
    assert exporter._hexaddr("0100007F") == "127.0.0.1"
    assert exporter._hexaddr("0000000000000000FFFF00000100007F") == "127.0.0.1"
    assert exporter._hexaddr("00000000000000000000000001000000") == "::1"


def test_listener_gauges_survive_one_write_without_a_row(tmp_path: Path) -> None:
    """The probe's interval and the writes are not in phase: one write without the
    listener's row keeps its depth; the second one says the queue was empty."""
    ex = exporter.Exporter(exporter.parse_args(["--prom-dir", str(tmp_path / "p"), "--state-dir", str(tmp_path / "s")]))
    ex.out.mkdir(parents=True)
    row = {"netns": 1, "family": 2, "laddr": "127.0.0.1", "lport": 8081, "limit": 8, "enqueues": 30,
           "depth_max": 9, "full_events": 4, "depth_now": 9, "accepted": 20}  # fmt: skip
    ex.row("aq_listener", {"time_s": 1, **row})
    depths = []
    for _ in range(3):
        ex.write(0.0)
        text = (ex.out / "tq_accept_queue.prom").read_text()
        depths.append(
            int(text.split('tq_listener_queue_depth{netns="1",laddr="127.0.0.1",lport="8081"} ')[1].split()[0])
        )
    assert depths == [9, 9, 0]
    assert 'tq_listener_queue_full_total{netns="1",laddr="127.0.0.1",lport="8081"} 4' in text
