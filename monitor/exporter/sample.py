"""Namespaces: which exist (a process in each), their names and port ranges, their kernel
counters (read by collector/sample-netns, the one sampler of them, as capture reads
them) and their socket tables (ephemeral ports held per destination)."""

from __future__ import annotations

import contextlib
import csv
import io
import os
import subprocess
from pathlib import Path

from analysis.kernel import ipv4_form

from .metrics import NETNS_COUNTERS
from .objects import Family, Put
from .sampler import ask


def netns_inode(pid: str | int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def _one_pid_each() -> dict[int, int]:
    pids: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            ino = netns_inode(d)
            if ino is not None and ino not in pids:
                pids[ino] = int(d)
    return pids


def _ip_netns_names(host: int) -> dict[int, str]:
    names: dict[int, str] = {host: "host"}
    with contextlib.suppress(OSError):
        for n in os.listdir("/run/netns"):
            with contextlib.suppress(OSError):
                names[os.stat(f"/run/netns/{n}").st_ino] = n
    return names


class Namespaces:
    """Every network namespace with a process in it: one pid each, to read its /proc/<pid>/net."""

    def __init__(self, sampler: Path) -> None:
        self.sampler = sampler  # collector/sample-netns
        self.pid: dict[int, int] = {}
        self.names: dict[int, str] = {}
        self.port_range: dict[int, tuple[int, int]] = {}
        self.scanned = 0.0
        self.host = netns_inode("self") or 0  # the namespace the exporter runs in (pid 1 may be out of reach)

    def scan(self, now: float, every: float = 30.0) -> None:
        if now - self.scanned < every and all(os.path.exists(f"/proc/{p}") for p in self.pid.values()):
            return
        self.scanned = now
        self.pid = _one_pid_each()
        self.names = _ip_netns_names(self.host)
        for ino in list(self.port_range):
            if ino not in self.pid:
                del self.port_range[ino]

    def counters(self, inos: list[int]) -> dict[int, dict[str, int]]:
        """Per namespace: the kernel counters NETNS_COUNTERS names, by metric, from one run of
        collector/sample-netns --counters-of PID... (counters.csv rows)."""
        pids = self.pid_args(inos)
        if not pids:
            return {}
        out: dict[int, dict[str, int]] = {}
        for row in csv.DictReader(io.StringIO(ask(self.sampler, "--counters-of", *pids))):
            metric = NETNS_COUNTERS.get((row["group"], row["counter"]))
            if metric and row["netns"].isdigit() and row["value"].isdigit():
                out.setdefault(int(row["netns"]), {})[metric] = int(row["value"])
        return out

    def pid_args(self, inos: list[int]) -> list[str]:
        """PID:INODE of each namespace with a process: sample-netns takes the inode as given
        instead of starting a stat for it."""
        return [f"{self.pid[i]}:{i}" for i in inos if i in self.pid]

    def ports(self, ino: int) -> tuple[int, int] | None:
        """net.ipv4.ip_local_port_range of the namespace (read once: nsenter)."""
        if ino not in self.port_range and ino in self.pid:
            r = subprocess.run(
                ["nsenter", f"--net=/proc/{self.pid[ino]}/ns/net", "cat", "/proc/sys/net/ipv4/ip_local_port_range"],
                capture_output=True,
                text=True,
                check=False,
            )
            lo_hi = r.stdout.split()
            if r.returncode == 0 and len(lo_hi) == 2:
                self.port_range[ino] = (int(lo_hi[0]), int(lo_hi[1]))
        return self.port_range.get(ino)


def socket_table(sampler: Path, pid: int, ino: int, rng: tuple[int, int]) -> dict[tuple[str, str], tuple[int, int]]:
    """(raddr, rport) -> (ports in use, TIME_WAIT) for sockets on ephemeral local ports (rng)
    in the namespace of pid: collector/sample-netns --ephemeral-of, asked of the one
    sample-netns process the exporter keeps (ss through nsenter, the kernel filtering the
    ports, as capture lists its TIME_WAIT table: a host's 131072 TIME_WAIT on a service port
    cost the kernel's walk and no line; docs/cost.md has the times). The peer as its
    application sees it (ipv4_form), as every other series here."""
    text = ask(sampler, "--ephemeral-of", f"{rng[0]}-{rng[1]}", f"{pid}:{ino}")
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for row in csv.DictReader(io.StringIO(text)):
        key = (ipv4_form(row["raddr"]), row["rport"])
        used, tw = out.get(key, (0, 0))
        out[key] = (used + int(row["sockets"]), tw + int(row["time_wait"]))
    return out


def watch(ns: Namespaces, of_objects: list[int], seen: list[int], top: int) -> list[int]:
    """At most --top namespaces: the exporter's own, those of exported objects (an alert
    joins a listener to its namespace's counters), then those with ip-netns names, then
    the others the probes saw within --ttl."""
    out: list[int] = []
    for i in [ns.host, *of_objects, *ns.names, *seen]:
        if i not in out and i in ns.pid:
            out.append(i)
    return out[:top]


def netns_series(ns: Namespaces, inos: list[int], put: Put) -> None:
    counters = ns.counters(inos)
    for ino in inos:
        lab = {"netns": str(ino)}
        for k, v in counters.get(ino, {}).items():
            put(k, lab, v)
        rng = ns.ports(ino)
        if rng:
            put("netns_ephemeral_ports", lab, rng[1] - rng[0] + 1)
        put("netns_info", {"netns": str(ino), "name": ns.names.get(ino, "")}, 1)


def tcp_sockets(pid: int) -> int | None:
    """TCP sockets in use plus TIME_WAIT in the namespace of pid: one line of its sockstat."""
    try:
        with open(f"/proc/{pid}/net/sockstat") as f:
            for line in f:
                if line.startswith("TCP:"):
                    v = line.split()
                    return int(v[v.index("inuse") + 1]) + int(v[v.index("tw") + 1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def scan_sockets(fam: Family, ns: Namespaces, inos: list[int], min_ports: int, now: float) -> None:
    """The socket tables -> each destination's ports in use and TIME_WAIT sockets (gauges).

    Reading a table costs per socket (a host full of TIME_WAIT holds 131072 of them), so a
    namespace whose sockets all together (sockstat: one line) are fewer than a destination
    needs to matter, min_ports or half the port range, is not read at all."""
    for o in fam.objs.values():
        o.gauges.pop("destination_time_wait_sockets", None)
        o.gauges.pop("destination_ports_in_use", None)
    for ino in inos:
        pid, rng = ns.pid.get(ino), ns.ports(ino)
        if pid is None or rng is None:
            continue
        total = tcp_sockets(pid)
        if total is not None and total < min(min_ports, (rng[1] - rng[0] + 1) // 2):
            continue
        socks = socket_table(ns.sampler, pid, ino, rng)
        # Only destinations with enough ports held to matter get a series from the scan alone.
        for (raddr, rport), (used, tw) in sorted(socks.items(), key=lambda kv: -kv[1][0])[: fam.top_n]:
            key = (str(ino), raddr, rport)
            if key in fam.objs or used >= min_ports:
                fam.set_gauges(key, now, {"destination_ports_in_use": used, "destination_time_wait_sockets": tw})
                fam.objs[key].score += used / 1000
