"""A bad-input corpus: damaged copies of real run directories (tests/fixtures).

Each case names a base fixture and a damage function that edits a copy in place
and returns a regular expression the error must match (or None). `expect` says
what the analysis must do with it: "error" (a clean error naming file and line),
"ok" (load and report; the verdicts must match the undamaged run's, or the
report must say the input was damaged or incomplete).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from analysis.contract import CONTRACT_VERSION, LEGACY_TABLES, TABLES

SIZING = "accept-overflow-sizing"
TW = "time-wait-exhaust"
EPOLL = "epoll-busy"
LOSS = "retransmit-loss1"


@dataclass(frozen=True)
class Case:
    name: str
    base: str
    damage: Callable[[Path], str | None]
    expect: str  # "error" or "ok"


# --------------------------------------------------------------------------- editing helpers


def lines_of(d: Path, file: str) -> list[bytes]:
    return (d / file).read_bytes().splitlines(keepends=True)


def write_lines(d: Path, file: str, lines: list[bytes]) -> None:
    (d / file).write_bytes(b"".join(lines))


# The corpus is built from real runs of data contract 2 (tests/fixtures): their
# tables are laid out as that contract defined them.
FIXTURE_CONTRACT = 2


def col_index(file: str, col: str) -> int:
    table = next(t for t in TABLES.values() if t.file == file)
    legacy = LEGACY_TABLES.get(FIXTURE_CONTRACT, {}).get(table.name)
    return (legacy.table if legacy else table).column_names.index(col)


def set_cell(d: Path, file: str, line: int, col: str, value: bytes) -> str:
    """Line `line` (1-based), column `col` set to raw bytes; returns the error location regex."""
    ls = lines_of(d, file)
    fields = ls[line - 1].rstrip(b"\n").split(b",")
    i = col_index(file, col)
    fields[i] = value
    ls[line - 1] = b",".join(fields) + b"\n"
    write_lines(d, file, ls)
    return rf"{re.escape(file)}:{line}: column {i + 1} \({col}\)"


def first_line(d: Path, file: str, pred: Callable[[list[bytes]], bool]) -> int:
    for n, raw in enumerate(lines_of(d, file)[1:], start=2):
        if pred(raw.rstrip(b"\n").split(b",")):
            return n
    raise AssertionError(f"no such line in {file}")


def meta_edit(d: Path, fn: Callable[[dict], None]) -> None:
    p = d / "metadata.json"
    m = json.loads(p.read_text())
    fn(m)
    p.write_text(json.dumps(m, indent=2) + "\n")


def meta_sub(d: Path, pattern: str, repl: str, file: str = "metadata.json") -> None:
    p = d / file
    text, n = re.subn(pattern, repl, p.read_text(), count=1)
    assert n == 1, pattern
    p.write_text(text)


def _set_path(m: dict, path: tuple, value) -> None:
    for k in path[:-1]:
        m = m[k]
    m[path[-1]] = value


def _del_path(m: dict, path: tuple) -> None:
    for k in path[:-1]:
        m = m[k]
    del m[path[-1]]


# --------------------------------------------------------------------------- damages


def truncate_mid_row(file: str) -> Callable[[Path], str]:
    def f(d: Path) -> str:
        data = (d / file).read_bytes()
        cut = data.rstrip(b"\n").rfind(b",") + 1  # inside the last field of the last row
        (d / file).write_bytes(data[:cut] + data[cut : cut + 0])
        return rf"{re.escape(file)}:\d+: "

    return f


def truncate_in_last_field(file: str) -> Callable[[Path], str]:
    def f(d: Path) -> str:
        data = (d / file).read_bytes()
        (d / file).write_bytes(data[:-2])  # a digit and the line end gone: "18\n" -> "1"
        n = data.count(b"\n")
        return rf"{re.escape(file)}:{n}: the last line has no line end"

    return f


def header_only(file: str) -> Callable[[Path], str]:
    def f(d: Path) -> str:
        write_lines(d, file, lines_of(d, file)[:1])
        return rf"{re.escape(file)}|metadata\.json:\d+: probes"

    return f


def empty_file(file: str) -> Callable[[Path], str]:
    def f(d: Path) -> str:
        (d / file).write_bytes(b"")
        return rf"{re.escape(file)}:1: empty file"

    return f


def drop_tail(file: str, keep: float) -> Callable[[Path], None]:
    def f(d: Path) -> None:
        ls = lines_of(d, file)
        write_lines(d, file, ls[: max(2, int(len(ls) * keep))])

    return f


def cell(file: str, line: int, col: str, value: bytes) -> Callable[[Path], str]:
    def f(d: Path) -> str:
        return set_cell(d, file, line, col, value)

    return f


def cell_where(file: str, pred, col: str, value: bytes) -> Callable[[Path], str]:
    def f(d: Path) -> str:
        return set_cell(d, file, first_line(d, file, pred), col, value)

    return f


def duplicate_row(file: str, line: int) -> Callable[[Path], str]:
    def f(d: Path) -> str:
        ls = lines_of(d, file)
        ls.insert(line, ls[line - 1])
        write_lines(d, file, ls)
        return rf"{re.escape(file)}:{line + 1}: column 1 \(\w+\): duplicate row.*line {line}|probes\.\w+\.rows"

    return f


def blank_lines(file: str, at: tuple[int, ...]) -> Callable[[Path], None]:
    def f(d: Path) -> None:
        ls = lines_of(d, file)
        for i in sorted(at, reverse=True):
            ls.insert(min(i, len(ls)), b"\n")
        write_lines(d, file, ls)

    return f


def blank_then_bad(file: str, col: str) -> Callable[[Path], str]:
    """Two blank lines, then a bad value: the error must name the physical line."""

    def f(d: Path) -> str:
        ls = lines_of(d, file)
        ls[2:2] = [b"\n", b"\r\n"]
        write_lines(d, file, ls)
        return set_cell(d, file, 6, col, b"oops")

    return f


def remove(file: str) -> Callable[[Path], str]:
    def f(d: Path) -> str:
        (d / file).unlink()
        return rf"{re.escape(file)}: missing"

    return f


def make_dir(file: str) -> Callable[[Path], str]:
    def f(d: Path) -> str:
        p = d / file
        if p.exists():
            p.unlink()
        p.mkdir()
        (p / "inside.txt").write_text("not a CSV\n")
        return rf"{re.escape(file)}: is a directory|{re.escape(file)}: exists and is not a regular file"

    return f


def meta_set(path: tuple, value, where: str | None = None) -> Callable[[Path], str]:
    def f(d: Path) -> str:
        meta_edit(d, lambda m: _set_path(m, path, value))
        key = where or ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in path).replace(".[", "[")
        return rf"metadata\.json:\d+: {re.escape(key)}"

    return f


def meta_del(path: tuple) -> Callable[[Path], str]:
    def f(d: Path) -> str:
        meta_edit(d, lambda m: _del_path(m, path))
        return r"metadata\.json:\d+: "

    return f


def meta_raw(pattern: str, repl: str, expect: str = r"metadata\.json:\d+: ") -> Callable[[Path], str]:
    def f(d: Path) -> str:
        meta_sub(d, pattern, repl)
        return expect

    return f


def json_raw(file: str, data: bytes, expect: str) -> Callable[[Path], str]:
    def f(d: Path) -> str:
        (d / file).write_bytes(data)
        return expect

    return f


def in_file(file: str, old: bytes, new: bytes) -> Callable[[Path], None]:
    def f(d: Path) -> None:
        data = (d / file).read_bytes()
        assert old in data, (file, old)
        (d / file).write_bytes(data.replace(old, new, 1))

    return f


def sysctl(key: str, value: bytes) -> Callable[[Path], str]:
    def f(d: Path) -> str:
        n = first_line(d, "sysctls.csv", lambda r: r[2] == key.encode())
        return set_cell(d, "sysctls.csv", n, "value", value)

    return f


def quoted_comm(file: str, comm: bytes, then_bad: bool = False) -> Callable[[Path], str | None]:
    """Rewrite every comm of one process as an RFC 4180 quoted field holding `comm` (valid CSV)."""

    def f(d: Path) -> str | None:
        i = col_index(file, "comm")
        ls = lines_of(d, file)
        old = ls[1].rstrip(b"\n").split(b",")[i]
        q = b'"' + comm.replace(b'"', b'""') + b'"'
        for n in range(1, len(ls)):
            fields = ls[n].rstrip(b"\n").split(b",")
            if fields[i] == old:
                fields[i] = q
                ls[n] = b",".join(fields) + b"\n"
        if then_bad:
            # A bad value in the last row, after quoted multi-line fields: the error names the
            # physical line the row starts on.
            ls[-1] = ls[-1].rstrip(b"\n").rsplit(b",", 1)[0] + b",x\n"
        write_lines(d, file, ls)
        if not then_bad:
            return None
        start = b"".join(ls[:-1]).count(b"\n") + 1
        ncol = len(TABLES[file[:-4]].column_names)
        legacy = LEGACY_TABLES.get(FIXTURE_CONTRACT, {}).get(file[:-4])
        return rf"{re.escape(file)}:{start}: column {len(legacy.table.column_names) if legacy else ncol} "

    return f


def incomplete(stop_reason: str, drop: tuple[str, ...] = (), status: dict | None = None) -> Callable[[Path], None]:
    def f(d: Path) -> None:
        def edit(m: dict) -> None:
            m["complete"] = False
            m["stop_reason"] = stop_reason
            for fam, st in (status or {}).items():
                m["probes"][fam]["status"] = st
            if stop_reason == "killed":
                m["reaped_at"] = "2026-11-23T05:00:00Z"
                m["reaped_by"] = "collector/capture --reap"

        meta_edit(d, edit)
        for file in drop:
            (d / file).unlink()

    return f


def cut_bytes(file: str, n: int, expect: str) -> Callable[[Path], str]:
    def f(d: Path) -> str:
        (d / file).write_bytes((d / file).read_bytes()[:n])
        return expect

    return f


def plots_file(d: Path) -> str:
    shutil.rmtree(d / "plots")
    (d / "plots").write_text("x\n")
    return r"plots: exists and is not a folder"


def still_running(d: Path) -> str:
    def edit(m: dict) -> None:
        m["complete"] = False
        m["stop_reason"] = "running"
        m["ended_epoch"] = None
        m["ended_at"] = None

    meta_edit(d, edit)
    return r"metadata\.json:\d+: stop_reason: this capture has not ended.*collector/capture --reap"


def shift_times(file: str, seconds: int) -> Callable[[Path], str]:
    def f(d: Path) -> str:
        n = 2
        v = lines_of(d, file)[n - 1].split(b",")[0]
        new = str(int(float(v)) + seconds).encode()
        return set_cell(d, file, n, "time_s", new) + ".*outside the capture"

    return f


def crlf(file: str) -> Callable[[Path], None]:
    def f(d: Path) -> None:
        (d / file).write_bytes((d / file).read_bytes().replace(b"\n", b"\r\n"))

    return f


# --------------------------------------------------------------------------- the corpus


def _listen_overflow(r: list[bytes]) -> bool:
    return r[3] == b"ListenOverflows" and r[5] not in (b"", b"0")


def corpus() -> list[Case]:
    c: list[Case] = []

    def add(name: str, base: str, damage, expect: str) -> None:
        c.append(Case(name, base, damage, expect))

    # Truncation.
    for f in ("aq_listener.csv", "counters.csv", "connects.csv", "sockstat.csv", "sysctls.csv", "tw_close.csv"):
        add(f"cut mid-row {f}", SIZING, truncate_mid_row(f), "error")
    for f in ("rt_resets.csv", "ep_loop.csv", "tw_sockets.csv"):
        add(f"cut inside last field {f}", SIZING, truncate_in_last_field(f), "error")
    for f in ("aq_listener.csv", "aq_accept.csv", "rt_endpoint.csv", "ep_loop.csv", "counters.csv", "sockstat.csv"):
        add(f"header only {f}", SIZING, header_only(f), "error")
    add("header only sysctls.csv", TW, header_only("sysctls.csv"), "error")
    add("header only tw_connect.csv", TW, header_only("tw_connect.csv"), "error")
    for f in ("aq_listener.csv", "counters.csv", "metadata.json", "sysctls.csv"):
        add(
            f"empty {f}",
            SIZING,
            empty_file(f) if f.endswith(".csv") else json_raw(f, b"", r"metadata\.json:1: "),
            "error",
        )
    add("half of aq_listener.csv", SIZING, drop_tail("aq_listener.csv", 0.5), "error")
    add("half of tw_close.csv", TW, drop_tail("tw_close.csv", 0.5), "error")
    add(
        "metadata.json cut short", SIZING, cut_bytes("metadata.json", 700, r"metadata\.json:\d+: invalid JSON"), "error"
    )

    # Encoding.
    add("non-UTF-8 comm aq_accept", SIZING, in_file("aq_accept.csv", b",aqserver,", b",aqserv\xff\xfe,"), "ok")
    add("non-UTF-8 comm ep_loop", EPOLL, in_file("ep_loop.csv", b",bpftrace,", b",bpf\xc3\x28trace,"), "ok")
    add("non-UTF-8 comm tw_connect", TW, in_file("tw_connect.csv", b",connload,", b",conn\x80load,"), "ok")
    add("non-UTF-8 comm listeners", SIZING, in_file("listeners.csv", b",aqserver\n", b",aq\xe9server\n"), "ok")
    add("non-UTF-8 byte in a number", SIZING, cell("aq_listener.csv", 3, "enqueues", b"6\xff3"), "error")
    add(
        "non-UTF-8 byte in counters name",
        SIZING,
        in_file("counters.csv", b"SyncookiesSent", b"Syncookies\xffSent"),
        "error",
    )
    add("non-UTF-8 in metadata host", SIZING, in_file("metadata.json", b'"host": "vm"', b'"host": "v\xffm"'), "ok")
    add("non-UTF-8 in metadata lab summary", SIZING, in_file("metadata.json", b"backlog 16,", b"backlog \xe916,"), "ok")
    add(
        "non-UTF-8 outside a JSON string",
        SIZING,
        in_file("metadata.json", b'"complete": true', b'"complete": \xfftrue'),
        "error",
    )
    add("non-UTF-8 in doctor.json", SIZING, in_file("doctor.json", b'"kernel": "6', b'"kernel": "\xff6'), "ok")
    add("NUL byte in a CSV", SIZING, in_file("aq_accept.csv", b"aqserver", b"aqser\x00ver"), "error")
    add("latin-1 comm quoted with comma", SIZING, quoted_comm("aq_accept.csv", b"caf\xe9,bar"), "ok")

    # Types.
    add("text in int aq_listener", SIZING, cell("aq_listener.csv", 3, "depth_max", b"x"), "error")
    add("float in int aq_listener", SIZING, cell("aq_listener.csv", 2, "limit", b"16.0"), "error")
    add("exponent in int", SIZING, cell("aq_accept.csv", 2, "accepted", b"1e3"), "error")
    add("space in int", SIZING, cell("rt_endpoint.csv", 2, "data_segs", b" 71"), "error")
    add("empty int", SIZING, cell("tw_close.csv", 2, "active_closes", b""), "error")
    add("text in float time", SIZING, cell("counters.csv", 5, "time_s", b"soon"), "error")
    add("text in pid", EPOLL, cell("ep_loop.csv", 2, "pid", b"abc"), "error")
    add("float in connects", SIZING, cell("connects.csv", 3, "connect_us", b"4501.5"), "error")
    add("bad result enum", SIZING, cell("connects.csv", 3, "result", b"maybe"), "error")
    add("bad counter group", SIZING, cell("counters.csv", 3, "group", b"Udp"), "error")
    add("bad sysctl phase", SIZING, cell("sysctls.csv", 2, "phase", b"middle"), "error")
    add("family 3", SIZING, cell("aq_listener.csv", 2, "family", b"3"), "error")
    add("interval_s string", SIZING, meta_set(("interval_s",), "1"), "error")
    add("interval_s float", SIZING, meta_set(("interval_s",), 1.5), "error")
    add("started_epoch string", SIZING, meta_set(("started_epoch",), "1795407910"), "error")
    add("complete string", SIZING, meta_set(("complete",), "yes"), "error")
    add("netns not a list", SIZING, meta_set(("netns",), {"label": "x"}), "error")
    add("netns inode string", SIZING, meta_set(("netns", 0, "inode"), "4026532177"), "error")
    add("probe rows string", SIZING, meta_set(("probes", "epoll", "rows"), "83"), "error")
    add("probe status unknown", SIZING, meta_set(("probes", "epoll", "status"), "fine"), "error")
    add("probes a list", SIZING, meta_set(("probes",), []), "error")
    add("lab a list", SIZING, meta_set(("lab",), []), "error")
    add("lab server port string", SIZING, meta_set(("lab", "server", "port"), "8080"), "error")
    add("lab server inode null", SIZING, meta_set(("lab", "server", "netns_inode"), None), "error")
    add("lab backlog float", SIZING, meta_set(("lab", "server", "backlog_requested"), 16.5), "error")
    add("lab client port_range dash", TW, meta_set(("lab", "client", "port_range"), "40000-40199"), "error")
    add("lab phases not a list", EPOLL, meta_set(("lab", "phases"), "none"), "error")
    add("metadata top-level list", SIZING, json_raw("metadata.json", b"[1, 2]\n", r"metadata\.json:1: "), "error")
    add("metadata missing netns", SIZING, meta_del(("netns",)), "error")
    add("metadata missing probes", SIZING, meta_del(("probes",)), "error")
    add("doctor btf string", SIZING, in_file("doctor.json", b'"btf": true', b'"btf": "yes"'), "error")
    add("doctor invalid JSON", SIZING, in_file("doctor.json", b'"root": true,', b'"root": true,,'), "error")
    add("doctor probes list", SIZING, in_file("doctor.json", b'"probes": {', b'"probes": [{'), "error")

    # Ranges.
    add("negative delta", SIZING, cell_where("counters.csv", _listen_overflow, "delta", b"-3"), "error")
    add("delta not value - previous", SIZING, cell_where("counters.csv", _listen_overflow, "delta", b"999"), "error")
    add("negative count", SIZING, cell("aq_listener.csv", 4, "full_events", b"-1"), "error")
    add("negative tw count", TW, cell("tw_sockets.csv", 2, "count", b"-5"), "error")
    add("negative connect_us", SIZING, cell("connects.csv", 2, "connect_us", b"-1"), "error")
    add("int64 overflow probe", SIZING, cell("aq_listener.csv", 2, "enqueues", b"9223372036854775808"), "error")
    add("int64 overflow negative", SIZING, cell("rt_resets.csv", 2, "rst_received", b"-9223372036854775809"), "error")
    add("int64 overflow counters", SIZING, cell("counters.csv", 2, "value", b"18446744073709551616"), "error")
    add("int64 overflow JSON", SIZING, meta_set(("netns", 0, "inode"), 2**64, where="invalid JSON"), "error")
    add("interval_s zero", SIZING, meta_set(("interval_s",), 0), "error")
    add("interval_s negative", SIZING, meta_set(("interval_s",), -1), "error")
    add("NaN started_epoch", SIZING, meta_raw(r'"started_epoch": [0-9.]+', '"started_epoch": NaN'), "error")
    add("Infinity ended_epoch", SIZING, meta_raw(r'"ended_epoch": [0-9.]+', '"ended_epoch": Infinity'), "error")
    add("1e999 ended_epoch", SIZING, meta_raw(r'"ended_epoch": [0-9.]+', '"ended_epoch": 1e999'), "error")
    add("epoch zero", SIZING, meta_set(("started_epoch",), 0), "error")
    add("ended before started", SIZING, meta_set(("ended_epoch",), 1795407900.0), "error")
    add("nan time_s", SIZING, cell("sockstat.csv", 3, "time_s", b"nan"), "error")
    add("inf time_s", SIZING, cell("counters.csv", 3, "time_s", b"inf"), "error")
    add("time_s year 1970", SIZING, cell("aq_accept.csv", 2, "time_s", b"5"), "error")
    add("time_s a day late", SIZING, shift_times("aq_listener.csv", 86400), "error")
    add("counters a day late", SIZING, shift_times("counters.csv", 86400), "error")
    add("port range reversed", TW, sysctl("net.ipv4.ip_local_port_range", b"60999 32768"), "error")
    add("port range dash", TW, sysctl("net.ipv4.ip_local_port_range", b"32768-60999"), "error")
    add("port range lots", TW, sysctl("net.ipv4.ip_local_port_range", b"lots"), "error")
    add("port range 0", TW, sysctl("net.ipv4.ip_local_port_range", b"0 100"), "error")
    add("port range 70000", TW, sysctl("net.ipv4.ip_local_port_range", b"40000 70000"), "error")
    add("somaxconn lots", SIZING, sysctl("net.core.somaxconn", b"lots"), "error")
    add("somaxconn negative", SIZING, sysctl("net.core.somaxconn", b"-1"), "error")
    add("tw_reuse text", TW, sysctl("net.ipv4.tcp_tw_reuse", b"yes"), "error")
    add("lport 70000", SIZING, cell("aq_listener.csv", 2, "lport", b"70000"), "error")
    add("service_port 65536", TW, cell("tw_sockets.csv", 2, "service_port", b"65536"), "error")
    add("lab port 70000", SIZING, meta_set(("lab", "server", "port"), 70000), "error")
    add("lab loss 150", LOSS, meta_set(("lab", "loss_pct"), 150), "error")
    add("negative timer", TW, cell("tw_sockets.csv", 2, "timer_min_s", b"-1"), "error")
    add("netns zero", SIZING, cell("sockstat.csv", 2, "netns", b"0"), "error")

    # Missing files and things in their place.
    for f in ("aq_listener.csv", "counters.csv", "ep_loop.csv", "rt_endpoint.csv", "sysctls.csv", "metadata.json"):
        add(f"missing {f}", SIZING, remove(f), "error")
    add("missing connects.csv (optional)", SIZING, remove("connects.csv"), "ok")
    add("missing doctor.json (optional)", SIZING, remove("doctor.json"), "ok")
    for f in ("aq_listener.csv", "counters.csv", "metadata.json", "doctor.json", "verdicts.json", "report.md"):
        add(f"directory for {f}", SIZING, make_dir(f), "error")
    add("file for plots/", SIZING, plots_file, "error")
    add(
        "symlink to nowhere",
        SIZING,
        lambda d: (
            (d / "ep_loop.csv").unlink()
            or (d / "ep_loop.csv").symlink_to(d / "nowhere.csv")
            or r"ep_loop\.csv: missing"
        ),
        "error",
    )

    # Duplicates.
    add("duplicate counters row", SIZING, duplicate_row("counters.csv", 3), "error")
    add("duplicate aq_listener row", SIZING, duplicate_row("aq_listener.csv", 3), "error")
    add("duplicate sockstat row", SIZING, duplicate_row("sockstat.csv", 4), "error")
    add("duplicate sysctls row", TW, duplicate_row("sysctls.csv", 2), "error")
    add("duplicate connects row", SIZING, duplicate_row("connects.csv", 10), "error")
    add("duplicate tw_close row", TW, duplicate_row("tw_close.csv", 2), "error")
    add("duplicate ep_loop row", EPOLL, duplicate_row("ep_loop.csv", 5), "error")
    add("duplicate tw_sockets row", TW, duplicate_row("tw_sockets.csv", 3), "error")

    # Blank lines, line ends, headers.
    add("blank lines in counters", SIZING, blank_lines("counters.csv", (5, 40)), "ok")
    add("blank line at end of aq_listener", SIZING, blank_lines("aq_listener.csv", (99,)), "ok")
    add("blank lines then a bad value", SIZING, blank_then_bad("counters.csv", "value"), "error")
    add("blank lines then a bad value tw", TW, blank_then_bad("tw_sockets.csv", "count"), "error")
    add("CRLF line ends", SIZING, crlf("aq_listener.csv"), "ok")
    add("header renamed", SIZING, in_file("counters.csv", b"delta", b"change"), "error")
    add("header reordered", SIZING, in_file("sockstat.csv", b"tcp_inuse,tcp_orphan", b"tcp_orphan,tcp_inuse"), "error")
    add(
        "header missing",
        SIZING,
        lambda d: write_lines(d, "rt_resets.csv", lines_of(d, "rt_resets.csv")[1:]) or r"rt_resets\.csv:1: header",
        "error",
    )

    # Quoted fields: valid RFC 4180 must load with the right comm; broken quoting must not.
    add("quoted comm with comma", SIZING, quoted_comm("aq_accept.csv", b"aq,server"), "ok")
    add("quoted comm with quote", EPOLL, quoted_comm("ep_loop.csv", b'http"server'), "ok")
    add("quoted comm with newline", EPOLL, quoted_comm("ep_loop.csv", b"http\nserver"), "ok")
    add("quoted comm with CRLF", TW, quoted_comm("tw_connect.csv", b"conn\r\nload"), "ok")
    add("quoted comm, all at once", SIZING, quoted_comm("aq_accept.csv", b'a,"b"\nc\xff'), "ok")
    add("quoted newline then a bad value", EPOLL, quoted_comm("ep_loop.csv", b"http\nserver", then_bad=True), "error")
    add("unquoted comma in comm", SIZING, in_file("aq_accept.csv", b",aqserver,", b",aq,server,"), "error")
    add("unterminated quote", SIZING, in_file("aq_accept.csv", b",aqserver,", b',"aqserver,'), "error")
    add("stray quote", SIZING, in_file("tw_connect.csv", b",connload,", b',conn"load",'), "error")

    # Versions.
    add("schema_version 2", SIZING, meta_set(("schema_version",), 2), "error")
    add("schema_version string", SIZING, meta_set(("schema_version",), "1"), "error")
    add("schema_version missing", SIZING, meta_del(("schema_version",)), "error")
    add("data_contract 1", SIZING, meta_set(("data_contract",), 1), "error")
    add("data_contract next", SIZING, meta_set(("data_contract",), CONTRACT_VERSION + 1), "error")
    add("data_contract string", SIZING, meta_set(("data_contract",), "2"), "error")
    add("data_contract missing", SIZING, meta_del(("data_contract",)), "error")

    # Interrupted and unfinished runs.
    add("interrupted", SIZING, incomplete("interrupted"), "ok")
    add("killed, epoll missing", SIZING, incomplete("killed", ("ep_loop.csv",), {"epoll": "killed"}), "ok")
    add(
        "killed, time_wait died",
        TW,
        incomplete("killed", ("tw_close.csv", "tw_connect.csv"), {"time_wait": "died"}),
        "ok",
    )
    add("killed, samplers missing", EPOLL, incomplete("killed", ("tw_sockets.csv", "listeners.csv")), "ok")
    add("killed, counters missing", SIZING, incomplete("killed", ("counters.csv",)), "ok")
    add(
        "failed probe, file missing",
        LOSS,
        incomplete("interrupted", ("rt_endpoint.csv",), {"retransmits": "failed"}),
        "ok",
    )
    add("still running", SIZING, still_running, "error")
    add("stop_reason running only", SIZING, meta_set(("stop_reason",), "running"), "error")
    add("ended_epoch null only", SIZING, meta_set(("ended_epoch",), None), "error")
    add("stop_reason unknown", SIZING, meta_set(("stop_reason",), "tired"), "error")
    return c
