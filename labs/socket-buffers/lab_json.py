"""lab_json: the socket-buffers lab's JSON ("lab" in metadata.json), for labs/socket-buffers/lab.sh.

USAGE: lab_json.py WORK LABDIR KEY=VALUE...

The declared side (the variant's buffers, the path's rate, delay and BDP, from the KEY=VALUE
arguments lab.sh passes) and the measured side, read from the lab's own files: the writer's
and the reader's counts (WORK/source.json, WORK/sink.json: bytes, calls, writes that found
the send buffer full), the path's (WORK/path.json: delayline's frames and drops), the first
and last ss -tinm sample of each of the flow's sockets (LABDIR/ss-flow.txt) and the TcpExt
counters that moved in each namespace (LABDIR/netstat-<side>-{start,end}.txt). Files not
written yet (the first call, before the lab ran) give null. Prints one JSON object.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

# What each variant makes the bottleneck: the cause the lab's finding must name.
CAUSE = {
    "slow-reader": "slow_reader",
    "small-sndbuf": "small_sndbuf",
    "small-rcvbuf": "small_rcvbuf",
    "memory-pressure": "memory_pressure",
}
SS_FIELDS = {
    "busy_ms": r"\bbusy:(\d+)ms",
    "rwnd_limited_ms": r"\brwnd_limited:(\d+)ms",
    "sndbuf_limited_ms": r"\bsndbuf_limited:(\d+)ms",
    "bytes_acked": r"\bbytes_acked:(\d+)",
    "bytes_received": r"\bbytes_received:(\d+)",
    "rcvbuf": r"skmem:\([^)]*\brb(\d+)",
    "sndbuf": r"skmem:\([^)]*\btb(\d+)",
}


def load(p: Path) -> Any:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def ss_series(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Every sample of lab/ss-flow.txt, per side (sender, receiver): its time and the clocks,
    byte counts and buffer sizes ss printed (a clock ss left out is 0: it prints none at 0)."""
    out: dict[str, list[dict[str, Any]]] = {"sender": [], "receiver": []}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return out
    t, side, head = 0.0, "", False
    for line in lines:
        if line.startswith("=== "):
            _, ts, side = line.split()
            t, head = float(ts), False
        elif line and not line[0].isspace():
            head = True
            recv_q, send_q = (int(x) for x in line.split()[:2])
        elif head and side in out:
            row: dict[str, Any] = {"time_s": t, "recv_q": recv_q, "send_q": send_q}
            for name, pat in SS_FIELDS.items():
                m = re.search(pat, line)
                row[name] = int(m.group(1)) if m else (0 if name.endswith("_ms") else None)
            out[side].append(row)
            head = False
    return out


def counter_deltas(files: Path, side: str) -> dict[str, int] | None:
    """TcpExt counters that moved in one side's namespace between the lab's two snapshots."""
    snaps = []
    for phase in ("start", "end"):
        try:
            lines = (files / f"netstat-{side}-{phase}.txt").read_text().splitlines()
        except OSError:
            return None
        vals: dict[str, int] = {}
        for names, values in zip(lines[::2], lines[1::2], strict=False):
            if names.startswith("TcpExt:"):
                vals = dict(zip(names.split()[1:], (int(v) for v in values.split()[1:]), strict=True))
        snaps.append(vals)
    start, end = snaps
    return {k: end[k] - start.get(k, 0) for k in end if end[k] != start.get(k, 0)}


def flow(a: dict[str, str], work: Path, files: Path) -> dict[str, Any]:
    """The one flow: as declared, with the writer's and reader's own counts and ss's first and last word."""
    src = (load(work / "source.json") or {}).get("flows") or [{}]
    snk = (load(work / "sink.json") or {}).get("flows") or [{}]
    w, r = src[0], snk[0]
    secs = (w.get("end_unix_ns", 0) - w.get("start_unix_ns", 0)) / 1e9
    series = ss_series(files / "ss-flow.txt")
    return {
        "laddr": a["cli_ip"],
        "lport": w.get("lport"),
        "raddr": a["srv_ip"],
        "rport": int(a["port"]),
        "faulty": a["variant"] in CAUSE,
        "cause": CAUSE.get(a["variant"]),
        "writer": {
            "bytes": w.get("bytes"),
            "writes": w.get("calls"),
            "writes_blocked": w.get("eagain"),
            "wait_s": round(w["wait_ns"] / 1e9, 3) if "wait_ns" in w else None,
            "bytes_per_s": round(w["bytes"] / secs) if w.get("bytes") and secs > 0 else None,
            "sndbuf_requested": int(a["sndbuf"]),
            "sndbuf": w.get("sndbuf"),
        }
        if w
        else None,
        "reader": {
            "bytes": r.get("bytes"),
            "reads": r.get("calls"),
            "read_size": int(a["read_size"]),
            "read_every": a["read_every"],
            "rcvbuf_requested": int(a["rcvbuf"]),
            "rcvbuf": r.get("rcvbuf"),
        }
        if r
        else None,
        "ss": {side: {"first": s[0], "last": s[-1]} if s else None for side, s in series.items()},
    }


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    work, files = Path(argv[0]), Path(argv[1])
    a = dict(kv.partition("=")[::2] for kv in argv[2:])
    rtt_ms = 2 * int(a["delay_ms"])
    lab = {
        "lab": "socket-buffers",
        "variant": a["variant"],
        "summary": a["summary"],
        "server": {
            "netns": a["srv_ns"],
            "netns_inode": int(a["srv_inode"]),
            "addr": a["srv_ip"],
            "port": int(a["port"]),
        },
        "client": {"netns": a["cli_ns"], "netns_inode": int(a["cli_inode"]), "addr": a["cli_ip"]},
        "load_seconds": int(a["load_seconds"]),
        "load_window": {
            "start_s": float(a["load_start"]) if a["load_start"] else None,
            "end_s": float(a["load_end"]) if a["load_end"] else None,
        },
        "path": {
            "tool": a["path_tool"] or None,
            "rate_bits_per_s": int(a["path_rate_bps"]),
            "delay_ms": int(a["delay_ms"]),
            "rtt_ms": rtt_ms,
            "queue_frames": int(a["queue"]),
            "bdp_bytes": int(a["bdp_bytes"]),
            "delayline": load(work / "path.json"),
        },
        # What the variant set for the whole machine while it ran (memory-pressure), "KEY=VALUE" each.
        "host_sysctls": [kv for kv in a.get("host_sysctls", "").split(";") if kv],
        "flow": flow(a, work, files),
        "counters": {side: counter_deltas(files, side) for side in ("sender", "receiver")},
        "command": f"make lab LAB=socket-buffers VARIANT={a['variant']}",
    }
    print(json.dumps(lab))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
