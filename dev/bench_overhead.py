"""bench_overhead: the Python half of dev/bench-overhead.

Parses wrk, bpftool JSON and file sizes into one JSON line per measurement
(record; dev/bench_overhead_summary.py makes the table at the end of them), and
the small network helpers the bash driver needs (free-port, http-ok, low-rate,
bulk-as-wrk).

USAGE: bench_overhead.py record out=RUNS.jsonl case=C pair=N kind=K [wrk=F low=F window=S startup=S
                                stop=S stats_ok=0|1 ids=F perf=F before=F after=F
                                sizes_before=F sizes_after=F meta=F
                                profile=PERF_SCRIPT.txt profile_wrk=F profile_period=NS]
       bench_overhead.py free-port LOWEST_EPHEMERAL_PORT
       bench_overhead.py http-ok PORT
       bench_overhead.py low-rate PORT RATE SECONDS
       bench_overhead.py bulk-as-wrk IPERF3.json
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import sys
import time
from typing import Any

import bench_profile


def load_json(path: str, default: Any) -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def parse_wrk(path: str) -> dict[str, Any]:
    text = ""
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    r: dict[str, Any] = {"requests": 0, "wrk_seconds": None, "rps": 0.0, "socket_errors": 0, "non_2xx": 0}
    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)\b", text)
    if m:
        r["requests"] = int(m.group(1))
        r["wrk_seconds"] = float(m.group(2)) * {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60}[m.group(3)]
    m = re.search(r"Requests/sec:\s*([\d.]+)", text)
    if m:
        r["rps"] = float(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        r["socket_errors"] = sum(int(x) for x in m.groups())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m:
        r["non_2xx"] = int(m.group(1))
    return r


def machine_cpu(path: str) -> dict[str, float]:
    """The machine's CPU seconds over a wrk window from its /proc/stat "cpu" lines before and after
    (file written beside wrk's output): busy (user, nice, system, irq, softirq; guest time is in
    user), idle (with iowait) and steal; and the context switches ("ctxt" lines, when there).
    Empty when the file is missing or short."""
    try:
        with open(path) as f:
            text = f.read().splitlines()
    except OSError:
        return {}
    lines = [line.split() for line in text if line.startswith("cpu ")]
    if len(lines) < 2:
        return {}
    d = [int(b) - int(a) for a, b in zip(lines[0][1:], lines[1][1:], strict=False)]
    d += [0] * (8 - len(d))
    hz = os.sysconf("SC_CLK_TCK")
    res = {
        "cpu_busy_s": (d[0] + d[1] + d[2] + d[5] + d[6]) / hz,
        "cpu_idle_s": (d[3] + d[4]) / hz,
        "cpu_steal_s": d[7] / hz,
    }
    ctxt = [int(line.split()[1]) for line in text if line.startswith("ctxt ")]
    if len(ctxt) >= 2:
        res["ctxt"] = ctxt[1] - ctxt[0]
    return res


def sizes(path: str) -> dict[str, int]:
    out: dict[str, int] = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                name, _, size = line.rstrip("\n").rpartition(" ")
                if name:
                    out[name] = int(size)
    return out


def output_bytes(before: str, after: str) -> dict[str, int]:
    """Bytes each probe (probe_<family>.out) and the samplers wrote in the window."""
    b, a = sizes(before), sizes(after)
    res: dict[str, int] = {}
    for name, size in a.items():
        d = size - b.get(name, 0)
        base = os.path.basename(name)
        if base.startswith("probe_") and base.endswith(".out"):
            key = base[len("probe_") : -len(".out")]
        elif name.startswith("samples/") and name.endswith(".csv"):
            key = "samplers"
        else:
            continue
        res[key] = res.get(key, 0) + d
    return res


def programs(ids: str, perf: str, before: str, after: str) -> list[dict[str, Any]]:
    """Per BPF program of the case: the run_cnt, run_time_ns and recursion_misses deltas."""
    fam: dict[int, str] = {}
    with open(ids) as f:
        for line in f:
            if line.strip():
                i, fm = line.split()
                fam[int(i)] = fm
    tps = {p["prog_id"]: p.get("tracepoint") for p in load_json(perf, []) if "prog_id" in p}
    bef = {p["id"]: p for p in load_json(before, [])}
    aft = {p["id"]: p for p in load_json(after, [])}
    progs = []
    for pid in sorted(fam):
        b, x = bef.get(pid), aft.get(pid)
        if not b or not x:
            continue
        tp = tps.get(pid) or ("interval (print)" if x.get("type") == "perf_event" else x.get("type", "?"))
        progs.append(
            {
                "id": pid,
                "family": fam[pid],
                "name": x.get("name", "?"),
                "tracepoint": tp,
                "events": x.get("run_cnt", 0) - b.get("run_cnt", 0),
                "ns": x.get("run_time_ns", 0) - b.get("run_time_ns", 0),
                "recursion_misses": x.get("recursion_misses", 0) - b.get("recursion_misses", 0),
            }
        )
    return progs


def record(argv: list[str]) -> None:
    a = dict(x.split("=", 1) for x in argv)
    rec: dict[str, Any] = {"case": a["case"], "pair": int(a["pair"]), "kind": a["kind"]}
    if a.get("wrk"):
        rec.update(parse_wrk(a["wrk"]))
        rec.update(machine_cpu(a["wrk"] + ".cpu"))
    if a.get("stats_wrk"):
        # The BPF-time window (bpf_stats on): the per-connection BPF figures divide by its requests.
        rec["stats_requests"] = parse_wrk(a["stats_wrk"])["requests"]
    if a.get("low"):
        with open(a["low"]) as f:
            parts = f.read().split()
        rec["requests"] = int(parts[0]) if parts else 0
        rec["wrk_seconds"] = float(parts[1]) if len(parts) > 1 else None
        rec["rps"] = rec["requests"] / rec["wrk_seconds"] if rec["wrk_seconds"] else 0.0
    if a.get("window"):
        rec["window_s"] = float(a["window"])
    if a.get("startup"):
        rec["startup_s"] = float(a["startup"])
    if a.get("stop"):
        rec["stop_s"] = float(a["stop"])
    if a.get("pss"):
        rec["pss_bytes"] = int(a["pss"])
    if a.get("cpu_ticks"):
        rec["cpu_s"] = int(a["cpu_ticks"]) / os.sysconf("SC_CLK_TCK")
    if a.get("stats_ok"):
        rec["bpf_stats_on"] = a["stats_ok"] == "1"
    if a.get("ids"):
        progs = programs(a["ids"], a["perf"], a["before"], a["after"])
        rec["programs"] = progs
        rec["bpf_ns"] = sum(p["ns"] for p in progs)
    if a.get("sizes_before"):
        rec["output_bytes"] = output_bytes(a["sizes_before"], a["sizes_after"])
    if a.get("profile"):
        with open(a["profile"], errors="replace") as f:
            rec["profile"] = bench_profile.parse(f)
        rec["profile"]["period_ns"] = int(a["profile_period"])
        rec["profile"]["requests"] = parse_wrk(a["profile_wrk"])["requests"]
    if a.get("meta"):
        m = load_json(a["meta"], {})
        rec["capture_complete"] = m.get("complete")
        rec["capture_misses"] = {k: v.get("recursion_misses") for k, v in (m.get("probes") or {}).items()}
        rec["capture_status"] = {k: v.get("status") for k, v in (m.get("probes") or {}).items()}
    with open(a["out"], "a") as f:
        f.write(json.dumps(rec) + "\n")
    # One short line for the progress log.
    s = f"{rec['rps']:.0f} req/s" if "rps" in rec else ""
    if rec.get("stats_requests") and "bpf_ns" in rec:
        s += f", BPF {rec['bpf_ns'] / rec['stats_requests'] / 1000:.2f} us/conn"
    print(s)


def bulk_as_wrk(argv: list[str]) -> None:
    """iperf3's JSON report (--load bulk) in wrk's words, a request being one MB the flow carried:
    the parser and the summary then read both loads alike."""
    end = load_json(argv[0], {}).get("end") or {}
    sent = end.get("sum_received") or end.get("sum_sent")
    if not sent or not sent.get("seconds"):
        sys.exit(1)
    mb, secs = sent["bytes"] / 1e6, sent["seconds"]
    print(f"  {mb:.0f} requests in {secs:.2f}s, {sent['bytes']} bytes read")
    print(f"Requests/sec: {mb / secs:.2f}")


def free_port(argv: list[str]) -> None:
    """A free port on 127.0.0.1 below the ephemeral range (nothing printed if none)."""
    low = min(int(argv[0]), 32768)
    for _ in range(200):
        p = random.randrange(max(1024, low - 12000), low)
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", p))
            print(p)
            break
        except OSError:
            pass


def http_ok(argv: list[str]) -> None:
    """Exit 0 when 127.0.0.1:PORT answers GET / with 200."""
    s = socket.create_connection(("127.0.0.1", int(argv[0])), timeout=1)
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    sys.exit(0 if s.recv(12).startswith(b"HTTP/1.1 200") else 1)


def low_rate(argv: list[str]) -> None:
    """Connections at a paced rate for SECONDS; prints how many succeeded and the window."""
    port, rate, secs = int(argv[0]), int(argv[1]), int(argv[2])
    t0, done = time.monotonic(), 0
    for i in range(rate * secs):
        d = t0 + i / rate - time.monotonic()
        if d > 0:
            time.sleep(d)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
                while s.recv(65536):
                    pass
            done += 1
        except OSError:
            pass
    d = t0 + secs - time.monotonic()
    if d > 0:
        time.sleep(d)
    print(done, time.monotonic() - t0)


COMMANDS = {
    "record": record,
    "free-port": free_port,
    "http-ok": http_ok,
    "low-rate": low_rate,
    "bulk-as-wrk": bulk_as_wrk,
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]](sys.argv[2:])
