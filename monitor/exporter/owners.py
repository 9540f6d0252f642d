"""Owners of the processes behind the exported objects, from the kernel's own record
(/proc/<pid>/cgroup, read by analysis/cgroups.py: systemd unit, container, pod) and the
names the host keeps (collector/list-containers, the one lister, as capture's
containers.csv). Resolved once per process, not per scan; the names are listed again
only when a container id nobody named yet shows up, at most once a minute.

Prometheus practice: owners are an info metric to join on (tq_owner_info by netns and
pid; tq_listener_owner_info says which pid holds a listener), not labels on every
series, which would churn on each restart of a container."""

from __future__ import annotations

import csv
import io
import os
import subprocess
from pathlib import Path

from analysis.cgroups import named, names_from_rows, owner_of_cgroup, read_cgroup

from .objects import Key, Put

LIST_EVERY_S = 60.0
OWNER_LABELS = ("unit", "runtime", "container_id", "container", "pod_namespace", "pod", "qos")


class OwnerScan:
    def __init__(self, lister: Path) -> None:
        self.lister = lister  # collector/list-containers
        self.by_pid: dict[int, dict[str, str]] = {}
        self.names: dict[str, dict[str, str]] = {}  # container id or "pod:<uid>" -> names
        self.listed = -LIST_EVERY_S

    def labels(self, pid: int, now: float) -> dict[str, str] | None:
        """A process's owner labels (empty values where unknown), or None when it is gone."""
        if pid in self.by_pid:
            return self.by_pid[pid]
        text = read_cgroup(pid)
        if text is None:
            return None
        c = owner_of_cgroup(text)
        if (c.container_id and c.container_id not in self.names) or (
            c.pod_uid and f"pod:{c.pod_uid}" not in self.names
        ):
            self._list(now)
        n = named(c, self.names)
        found = {
            "unit": n["unit"], "runtime": n["runtime"], "container_id": n["container_id"],
            "container": n["container_name"], "pod_namespace": n["pod_namespace"], "pod": n["pod_name"],
            "qos": n["qos"],
        }  # fmt: skip
        out = {k: v or "" for k, v in found.items()}
        out["comm"] = _comm(pid)
        out["netns"] = _netns(pid)
        self.by_pid[pid] = out
        return out

    def _list(self, now: float) -> None:
        if now - self.listed < LIST_EVERY_S:
            return
        self.listed = now
        r = subprocess.run([str(self.lister)], capture_output=True, text=True, check=False)
        self.names = names_from_rows(csv.DictReader(io.StringIO(r.stdout)))

    def series(self, pids: set[int], holders: dict[Key, int], now: float, put: Put) -> None:
        """tq_owner_info per live process of `pids`; tq_listener_owner_info per held listener."""
        for pid in [p for p in self.by_pid if not os.path.exists(f"/proc/{p}")]:
            del self.by_pid[pid]  # gone: a new process may get its pid
        for pid in sorted(pids):
            lab = self.labels(pid, now)
            if lab is not None:
                put("owner_info", {"pid": str(pid), **lab}, 1)
        for (netns, laddr, lport, member), pid in sorted(holders.items()):
            labels = {"netns": netns, "laddr": laddr, "lport": lport, "member": member, "pid": str(pid)}
            put("listener_owner_info", labels, 1)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text(errors="backslashreplace").strip()
    except OSError:
        return ""


def _netns(pid: int) -> str:
    try:
        return str(os.stat(f"/proc/{pid}/ns/net").st_ino)
    except OSError:
        return ""
