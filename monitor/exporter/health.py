"""Health series: each probe up, its restarts, its programs' recursion misses, and the
resident memory of the exporter and of each probe process."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .objects import Put
from .supervise import Probe


class Health:
    def __init__(self, probes: list[Probe]) -> None:
        self.probes = probes
        self.last_misses = 0.0

    def series(self, put: Put, now: float) -> None:
        """Recursion misses are read every 10 s (the programs' fdinfo); the rest at each write."""
        if now - self.last_misses >= 10:
            self.last_misses = now
            pids = {p.family: p.proc.pid for p in self.probes if p.proc is not None and p.proc.poll() is None}
            for fam, n in recursion_misses(pids).items():
                next(p for p in self.probes if p.family == fam).misses_now = n
        for p in self.probes:
            # Per family, also inside a bundle: its process's state, restarts and misses
            # (the kernel counts misses per program; a bundle's are summed over its files).
            for m in p.families:
                put("probe_up", {"probe": m.family, "tier": m.tier}, 1 if p.up() else 0)
                for reason in ("died", "segment"):
                    put("probe_restarts_total", {"probe": m.family, "reason": reason}, p.restarts.get(reason, 0))
                put("probe_recursion_misses_total", {"probe": m.family}, p.misses_done + p.misses_now)
            if p.proc is not None:
                put("exporter_resident_bytes", {"process": f"probe_{p.family}"}, rss_bytes(p.proc.pid))
        put("exporter_resident_bytes", {"process": "exporter"}, rss_bytes("self"))


# The count is collector/lib.sh's probe_recursion_misses, the one capture uses.
_MISSES = 'source "$1"; shift; for pid; do echo "$pid $(probe_recursion_misses "$pid")"; done'


def recursion_misses(pids: dict[str, int]) -> dict[str, int]:
    """Per probe: the sum of its programs' recursion misses (collector/lib.sh, from their fdinfo)."""
    if not pids:
        return {}
    lib = Path(__file__).resolve().parents[2] / "collector" / "lib.sh"
    cmd = ["bash", "-c", _MISSES, "recursion-misses", str(lib), *(str(p) for p in pids.values())]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    by_pid = dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)
    return {fam: int(by_pid[str(pid)]) for fam, pid in pids.items() if by_pid.get(str(pid), "").isdigit()}


def rss_bytes(pid: int | str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
