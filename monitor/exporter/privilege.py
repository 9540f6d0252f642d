"""The capabilities each tier needs, checked before anything runs: a missing one is named
with what it is for, rather than an exporter that starts and writes empty metrics.

Measured (2026-11-28, Linux 6.18; docs/deploy.md has the table): the sampled tier run as a
non-root user with each capability dropped in turn lost, without
  CAP_SYS_ADMIN        every listener, destination and port range: setns() into another
                       network namespace (nsenter, before ss and its sock_diag dump)
  CAP_SYS_PTRACE       every namespace but its own: /proc/PID/ns/net and /proc/PID/net of
                       another user's process (ptrace read access)
  CAP_DAC_READ_SEARCH  the process behind each listener, so its owner and its threads:
                       ss -p lists /proc/PID/fd of other users' processes (mode 0500)
and with the three it wrote the same series as root. The probe tiers run as uid 0 (bpftrace
0.17 and 0.23 refuse any other euid) with a reduced bounding set: bpftrace 0.17 loads the
kernel's BTF only with CAP_SYS_ADMIN, 0.23 needs CAP_BPF and CAP_PERFMON or CAP_SYS_ADMIN
(so the sampled set covers both), and process_madvise() on bpftrace's compiler pages
(memory.py) needs CAP_SYS_NICE.

A non-root exporter passes its capabilities to the helpers it runs (bash, nsenter, ss) only
through the ambient set; a root one through the bounding set."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Cap:
    name: str
    bit: int
    why: str


SYS_ADMIN = Cap("CAP_SYS_ADMIN", 21, "to enter each network namespace (setns) and list its sockets (sock_diag)")
SYS_PTRACE = Cap("CAP_SYS_PTRACE", 19, "to find other users' processes' network namespaces (/proc/PID/ns/net)")
DAC_READ_SEARCH = Cap("CAP_DAC_READ_SEARCH", 2, "to name the process behind each listener (ss -p: /proc/PID/fd)")
SYS_NICE = Cap("CAP_SYS_NICE", 23, "to give bpftrace's compiler pages back (process_madvise)")

SAMPLED = (SYS_ADMIN, SYS_PTRACE, DAC_READ_SEARCH)
# bpftrace needs nothing more: the kernel takes CAP_SYS_ADMIN for CAP_BPF and CAP_PERFMON
# (bpf_capable(), perfmon_capable()), and kernels before 5.8 know only CAP_SYS_ADMIN.
PROBES = SAMPLED
# Without it the metrics are the same but bpftrace keeps its compiler's pages (116 MB of PSS
# instead of 44 with every family, README "Memory"): a warning, not a refusal.
PROBES_SHOULD = (SYS_NICE,)


def _sets(status: str) -> dict[str, int]:
    out = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            out[key] = int(value.strip(), 16)
    return out


def _missing(have: int, caps: tuple[Cap, ...]) -> list[Cap]:
    return [c for c in caps if not have >> c.bit & 1]


def problems(status: str, euid: int, probes: bool) -> tuple[list[str], list[str]]:
    """(errors, warnings) for a process with this /proc/PID/status and euid, for the
    sampled tier or (probes) a tier with bpftrace."""
    sets = _sets(status)
    errors: list[str] = []
    if probes and euid != 0:
        errors.append(
            "the probe tiers run bpftrace, which refuses any euid but 0: run them as root with a "
            "reduced bounding set (docs/deploy.md), or use --tier sampled"
        )
        return errors, []
    if euid == 0:
        # Root's helpers get the bounding set at exec; the exporter itself its effective set.
        have = sets.get("CapEff", 0) & sets.get("CapBnd", 0)
        how = "keep it in the bounding set (CapabilityBoundingSet=, securityContext.capabilities.add)"
    else:
        # A non-root process's helpers (nsenter, ss) get only its ambient capabilities.
        have = sets.get("CapAmb", 0)
        how = "grant it as an ambient capability (AmbientCapabilities=, setpriv --ambient-caps)"
    for c in _missing(have, PROBES if probes else SAMPLED):
        if euid != 0 and sets.get("CapEff", 0) >> c.bit & 1:
            errors.append(f"{c.name} is effective but not ambient: nsenter and ss would run without it; {how}")
        else:
            errors.append(f"missing capability {c.name}, needed {c.why}; {how}")
    warnings = [f"missing capability {c.name}, wanted {c.why}: bpftrace keeps about 70 MB more"
                for c in (_missing(have, PROBES_SHOULD) if probes else [])]  # fmt: skip
    return errors, warnings


def check(probes: bool) -> tuple[list[str], list[str]]:
    """problems() for this process."""
    return problems(Path("/proc/self/status").read_text(), os.geteuid(), probes)
