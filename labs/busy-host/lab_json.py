"""lab_json: the busy-host lab's JSON ("lab" in metadata.json), for labs/busy-host/lab.sh.

USAGE: lab_json.py WORK LABDIR KEY=VALUE... [pid:NAME=PID...]

The declared side (every object of the lab with its parameters, from the KEY=VALUE
arguments lab.sh passes: the variant's settings, namespaces, ports, rates) and the
measured side, read from the lab's own files: per listener aqserver's stats
(WORK/<name>.json); per flow iperf3's retransmits and the last ss -ti sample of the
same socket (LABDIR/iperf3-<name>.json, LABDIR/ss-flows.txt); per endpoint the
client's connects and EADDRNOTAVAIL count (LABDIR/connects-<name>.csv); per loop
thread its CPU share over the load (LABDIR/task-stat.csv) and the loop's own
account (WORK/loops.json); per bulk flow its writer's and reader's own counts
(LABDIR/bufflow-<name>.json, WORK/<name>.json). Files not written yet (the first call, before the lab
ran) give null. Prints one JSON object.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path
from typing import Any


def raw(v: str) -> Any:
    """A value lab.sh wrote into the JSON as it is (a number), or null when empty."""
    return json.loads(v) if v else None


def declared(a: dict[str, str], server_pids: dict[str, int]) -> dict[str, Any]:
    """What the lab set up: the same object lab.sh used to print with printf."""
    fault = a["fault"]
    srv_ip, cli_ip = a["srv_ip"], a["cli_ip"]
    n = {k: int(a[k]) for k in a if k.endswith(("_port", "_cport")) or k in ("backlog", "burst", "loss_pct")}
    listeners = declared_listeners(a, n)
    flows = declared_flows(a, n) + declared_bulk(a, n)
    endpoints = declared_endpoints(a, n)
    threads = declared_loop_threads(a, n)
    return {
        "lab": "busy-host",
        "variant": a["variant"],
        "summary": a["summary"],
        "fault": fault or None,
        "server": {"netns": a["srv_ns"], "netns_inode": int(a["srv_inode"]), "addr": srv_ip},
        "client": {
            "netns": a["cli_ns"],
            "netns_inode": int(a["cli_inode"]),
            "addr": cli_ip,
            "port_range": a["port_range"],
            "tcp_tw_reuse": int(a["tcp_tw_reuse"]),
        },
        "load_seconds": raw(a["load_seconds"]),
        "load_window": {"start_s": raw(a["load_start"]), "end_s": raw(a["load_end"])},
        "server_pids": server_pids,
        "listeners": listeners,
        "flows": flows,
        "endpoints": endpoints,
        "loops": {
            "comm": "loopserver",
            "pid": raw(a["loop_pid"]),
            "port": n["loop_port"],
            "think_ms": int(a["loop_think_ms"]),
            "clk_tck": int(a["clk_tck"]),
            "threads": threads,
        },
        "command": f"make lab LAB=busy-host VARIANT={a['variant']}",
    }


def declared_listeners(a: dict[str, str], n: dict[str, int]) -> list[dict[str, Any]]:
    """The five listeners (n: the integer arguments); "small" is the faulty one under fault=listener."""
    return [
        {
            "name": "small",
            "port": n["small_port"],
            "backlog": n["backlog"],
            "accept_delay": "2ms",
            "burst": n["burst"],
            "burst_every_s": 1,
            "load": f"bursts of {a['burst']} every 1s",
            "faulty": a["fault"] == "listener",
        },
        {
            "name": "heavy",
            "port": n["heavy_port"],
            "backlog": 4096,
            "load": f"{a['heavy_rate']} conn/s",
            "faulty": False,
        },
        {"name": "idle", "port": n["idle_port"], "backlog": 128, "load": "none", "faulty": False},
        {
            "name": "exhaust",
            "port": n["exhaust_port"],
            "backlog": 4096,
            "load": f"{a['exhaust_rate']} conn/s, client closes first",
            "faulty": False,
        },
        {
            "name": "light",
            "port": n["light_port"],
            "backlog": 4096,
            "load": f"{a['light_rate']} conn/s, client closes first",
            "faulty": False,
        },
    ]


def declared_flows(a: dict[str, str], n: dict[str, int]) -> list[dict[str, Any]]:
    """The two iperf3 flows, client to server; "lossy" is the faulty one under fault=flow."""
    return [
        {
            "name": "lossy",
            "laddr": a["cli_ip"],
            "lport": n["lossy_cport"],
            "raddr": a["srv_ip"],
            "rport": n["lossy_port"],
            "rate": a["lossy_rate"],
            "loss_pct": n["loss_pct"],
            "faulty": a["fault"] == "flow",
        },
        {
            "name": "clean",
            "laddr": a["cli_ip"],
            "lport": n["clean_cport"],
            "raddr": a["srv_ip"],
            "rport": n["clean_port"],
            "rate": a["clean_rate"],
            "loss_pct": 0,
            "faulty": False,
        },
    ]


def declared_bulk(a: dict[str, str], n: dict[str, int]) -> list[dict[str, Any]]:
    """The two bufflow flows, client to server; "bulk_slow" is the faulty one under fault=buffer
    (its reader takes 4 KB per read_every_slow)."""
    return [
        {
            "name": name,
            "laddr": a["cli_ip"],
            "lport": n[f"{name}_cport"],
            "raddr": a["srv_ip"],
            "rport": n[f"{name}_port"],
            "rate_bytes_per_s": raw(a["bulk_rate"]),
            "read_every": a["read_every_slow"] if name == "bulk_slow" else "0s",
            "faulty": a["fault"] == "buffer" and name == "bulk_slow",
        }
        for name in ("bulk_slow", "bulk_fast")
    ]


def declared_endpoints(a: dict[str, str], n: dict[str, int]) -> list[dict[str, Any]]:
    """The two connecting clients' endpoints; "exhaust" is the faulty one under fault=ports."""
    return [
        {
            "name": "exhaust",
            "raddr": a["srv_ip"],
            "rport": n["exhaust_port"],
            "rate_per_s": raw(a["exhaust_rate"]),
            "faulty": a["fault"] == "ports",
        },
        {
            "name": "light",
            "raddr": a["srv_ip"],
            "rport": n["light_port"],
            "rate_per_s": raw(a["light_rate"]),
            "faulty": False,
        },
    ]


def declared_loop_threads(a: dict[str, str], n: dict[str, int]) -> list[dict[str, Any]]:
    """The loop server's threads; loop <hot_loop> (wrk -c8) is the hot one, the faulty one
    under fault=loop, and the one after it has wrk -c2."""
    loops, hot = int(a["loops"]), int(a.get("hot_loop", "0"))
    threads = []
    for i in range(loops):
        threads.append(
            {
                "index": i,
                "comm": f"loop{i}",
                "port": n["loop_port"] + i,
                "work": a["hot_work"] if i == hot else a["loop_work"],
                "wrk_connections": 8 if i == hot else 2 if i == (hot + 1) % loops else 0,
                "faulty": a["fault"] == "loop" and i == hot,
            }
        )
    return threads


def load(p: Path) -> Any:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def ss_last(files: Path) -> dict[int, dict[str, Any]]:
    """The last ss -ti sample of each flow, by its client port."""
    ss: dict[int, dict[str, Any]] = {}
    try:
        lines = (files / "ss-flows.txt").read_text().splitlines()
    except OSError:
        lines = []
    t: float | None = None
    key: int | None = None
    for line in lines:
        if line.startswith("=== "):
            t, key = float(line[4:]), None
        elif line and not line[0].isspace():
            # "Recv-Q Send-Q local:port peer:port" (no state column under a state filter)
            key = int(line.split()[2].rsplit(":", 1)[1])
        elif key is not None:
            info: dict[str, Any] = {"time_s": t}
            r = re.search(r"\bretrans:(\d+)/(\d+)", line)
            info["retrans_total"] = int(r.group(2)) if r else 0
            for clock in ("busy", "rwnd_limited", "sndbuf_limited"):
                r = re.search(rf"\b{clock}:(\d+)ms", line)
                info[f"{clock}_ms"] = int(r.group(1)) if r else 0
            for name in ("data_segs_out", "segs_out"):
                r = re.search(rf"\b{name}:(\d+)", line)
                info[name] = int(r.group(1)) if r else None
            ss[key] = info
    return ss


def add_flows(lab: dict[str, Any], work: Path, files: Path) -> None:
    """Per flow: iperf3's own count (tcp_info total_retrans of the data stream at
    its end) and the last ss -ti sample of the same socket; a bulk flow's writer and
    reader counts (bufflow's)."""
    ss = ss_last(files)
    for fl in lab["flows"]:
        j = load(files / f"iperf3-{fl['name']}.json")
        fl["iperf3"] = None
        if j and "end" in j:
            streams = j["end"].get("streams") or []
            snd = streams[0]["sender"] if streams else j["end"]["sum_sent"]
            fl["iperf3"] = {
                "retransmits": snd.get("retransmits"),
                "bytes_sent": snd.get("bytes"),
                "bits_per_second": round(snd.get("bits_per_second") or 0),
            }
        fl["ss_last"] = ss.get(fl["lport"])
        fl["server_pid"] = lab["server_pids"].get(fl["name"])
        if fl["name"].startswith("bulk_"):
            w = ((load(files / f"bufflow-{fl['name']}.json") or {}).get("flows") or [None])[0]
            r = ((load(work / f"{fl['name']}.json") or {}).get("flows") or [None])[0]
            fl["writer"] = {k: w[k] for k in ("bytes", "calls", "eagain")} if w else None
            fl["reader"] = {k: r[k] for k in ("bytes", "calls")} if r else None


def add_endpoints(lab: dict[str, Any], files: Path) -> None:
    """Per endpoint: the client's own connects, and how many failed with EADDRNOTAVAIL."""
    for ep in lab["endpoints"]:
        ep["client"] = None
        p = files / f"connects-{ep['name']}.csv"
        if p.exists():
            with p.open() as f:
                rows = list(csv.DictReader(f))
            ep["client"] = {
                "attempts": len(rows),
                "ok": sum(r["result"] == "ok" for r in rows),
                "eaddrnotavail": sum(r["errno"] == "EADDRNOTAVAIL" for r in rows),
            }


def add_loops(lab: dict[str, Any], work: Path, files: Path) -> None:
    """Per loop thread: CPU time over the load window from /proc/<pid>/task/<tid>/stat,
    and the loop's own account (requests, time inside epoll_wait)."""
    own = {x["index"]: x for x in (load(work / "loops.json") or {}).get("loops", [])}
    samples: dict[str, list[tuple[float, int, int]]] = {}
    p = files / "task-stat.csv"
    if p.exists():
        with p.open() as f:
            for r in csv.DictReader(f):
                ticks = int(r["utime_ticks"]) + int(r["stime_ticks"])
                samples.setdefault(r["comm"], []).append((float(r["time_s"]), int(r["tid"]), ticks))
    hz = lab["loops"]["clk_tck"]
    for th in lab["loops"]["threads"]:
        o = own.get(th["index"]) or {}
        th["tid"] = o.get("tid")
        th["own"] = {k: o.get(k) for k in ("requests", "accepted", "wait_calls", "wait_ns", "cpu_ns")} if o else None
        s = samples.get(th["comm"]) or []
        th["cpu"] = None
        if len(s) >= 2:
            (t0, tid, c0), (t1, _, c1) = s[0], s[-1]
            th["tid"] = th["tid"] or tid
            th["cpu"] = {
                "start_s": t0,
                "end_s": t1,
                "cpu_s": round((c1 - c0) / hz, 2),
                "cpu_share": round((c1 - c0) / hz / (t1 - t0), 3) if t1 > t0 else None,
            }


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    work, files = Path(argv[0]), Path(argv[1])
    args: dict[str, str] = {}
    server_pids: dict[str, int] = {}
    for kv in argv[2:]:
        k, _, v = kv.partition("=")
        if k.startswith("pid:"):
            server_pids[k[4:]] = int(v)
        else:
            args[k] = v
    lab = declared(args, server_pids)
    # The measured side: what each client, ss, /proc and the servers saw.
    for ls in lab["listeners"]:
        ls["pid"] = lab["server_pids"].get(ls["name"])
        ls["stats"] = load(work / f"{ls['name']}.json")
    add_flows(lab, work, files)
    add_endpoints(lab, files)
    add_loops(lab, work, files)
    print(json.dumps(lab))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
