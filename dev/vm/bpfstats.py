#!/usr/bin/env python3
"""bpfstats: per-event cost of each running bpftrace probe, from kernel.bpf_stats_enabled.

Every INTERVAL seconds until SIGTERM/SIGINT: for each bpftrace process, the BPF
programs it holds, and for each the kernel's run_cnt and run_time_ns, all three from
/proc/PID/fdinfo (prog_id, run_cnt, run_time_ns); a program's type and name from one
`bpftool prog show -j` when new programs appear. Writes OUT (JSON, replaced
atomically each round): {probe file: {program name: {"run_cnt", "run_time_ns"}}},
the largest counts seen (a program's counters only grow while it is loaded).
Standard library only: it runs inside the matrix's guests with Debian's python3.
Why not bpftool every round: under the guests' emulation a bpftool run takes seconds, and this
ran one per program (16 in the accept queue's scenario) every 2 s beside the lab.

USAGE: bpfstats.py OUT [INTERVAL]
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

FIELDS = ("prog_id", "run_cnt", "run_time_ns")


def bpftrace_progs() -> dict[int, tuple[str, dict[str, int]]]:
    """prog_id -> the probe file its bpftrace process runs, and the program's counters."""
    found: dict[int, tuple[str, dict[str, int]]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "bpftrace":
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            probe = next((a.decode(errors="replace") for a in argv if a.endswith(b".bt")), "-e")
            for fd in os.listdir(f"/proc/{pid}/fdinfo"):
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    info = dict(line.split(":", 1) for line in f if line.split(":", 1)[0] in FIELDS)
                # A program's own fd: a link's fdinfo names its prog_id too, without the counters.
                if "prog_id" in info and "run_cnt" in info:
                    counters = {k: int(info.get(k, 0)) for k in ("run_cnt", "run_time_ns")}
                    found[int(info["prog_id"])] = (os.path.basename(probe), counters)
        except (OSError, ValueError):
            continue
    return found


def program_names() -> dict[int, str]:
    """prog_id -> "type:name", for every program loaded now (one bpftool run)."""
    try:
        r = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True, check=False)
        progs = json.loads(r.stdout) if r.returncode == 0 else []
    except (OSError, ValueError):
        progs = []
    return {int(p["id"]): f"{p.get('type', '?')}:{p.get('name', '?')}" for p in progs if "id" in p}


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) >= 2 else 2
    out, interval = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    best: dict[str, dict[str, dict[str, int]]] = {}
    names: dict[int, str] = {}
    while not stop:
        progs = bpftrace_progs()
        if any(i not in names for i in progs):
            names.update(program_names())
        for pid, (probe, cur) in progs.items():
            name = f"{names.get(pid, '?:?')}#{pid}"
            old = best.setdefault(probe, {}).get(name)
            if old is None or cur["run_cnt"] >= old["run_cnt"]:
                best[probe][name] = cur
        with open(out + ".tmp", "w") as f:
            json.dump(best, f, indent=1, sort_keys=True)
        os.replace(out + ".tmp", out)
        for _ in range(int(interval * 10)):
            if stop:
                break
            time.sleep(0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
