#!/usr/bin/env python3
"""bpfstats: per-event cost of each running bpftrace probe, from kernel.bpf_stats_enabled.

Every INTERVAL seconds until SIGTERM/SIGINT: for each bpftrace process, the BPF
programs it holds (prog_id in /proc/PID/fdinfo), and for each the kernel's
run_cnt and run_time_ns (`bpftool prog show id N -j`). Writes OUT (JSON, replaced
atomically each round): {probe file: {program name: {"run_cnt", "run_time_ns"}}},
the largest counts seen (a program's counters only grow while it is loaded).
Standard library only: it runs inside the matrix's guests with Debian's python3.

USAGE: bpfstats.py OUT [INTERVAL]
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time


def bpftrace_progs() -> dict[int, str]:
    """prog_id -> the probe file its bpftrace process runs."""
    found: dict[int, str] = {}
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
                    for line in f:
                        if line.startswith("prog_id:"):
                            found[int(line.split()[1])] = os.path.basename(probe)
        except OSError:
            continue
    return found


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) >= 2 else 2
    out, interval = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    best: dict[str, dict[str, dict[str, int]]] = {}
    while not stop:
        for pid, probe in bpftrace_progs().items():
            r = subprocess.run(["bpftool", "prog", "show", "id", str(pid), "-j"], capture_output=True, text=True)
            if r.returncode != 0:
                continue
            p = json.loads(r.stdout)
            name = f"{p.get('type', '?')}:{p.get('name', '?')}#{pid}"
            cur = {"run_cnt": int(p.get("run_cnt", 0)), "run_time_ns": int(p.get("run_time_ns", 0))}
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
