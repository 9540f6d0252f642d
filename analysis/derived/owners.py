"""Who owns an object: the process's systemd unit, container or pod, from its cgroup
(processes.csv, read by analysis/cgroups.py) and the names the host knew
(containers.csv). Resolved once per process per run, not per event.

A listener or a loop thread has a process; an endpoint or a flow has only its network
namespace, whose owner is the one container or pod every process living in it belongs to
(a namespace other than the host's). Where nothing is known the owner is None: a finding
then names the pid and the namespace as before, and says nothing it did not see.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from analysis.cgroups import CgroupOwner, named, names_from_rows, owner_of_cgroup
from analysis.findings import Finding
from analysis.kernel import INIT_NET_INODE

from . import RunLike, processes_in_time_order


@dataclass(frozen=True)
class Owner:
    """A process's owner: what its cgroup says, and the names the host gave them."""

    unit: str | None = None
    runtime: str | None = None
    container_id: str | None = None
    container_name: str | None = None
    pod_uid: str | None = None
    pod_namespace: str | None = None
    pod_name: str | None = None
    qos: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return asdict(self)


def owners(run: RunLike) -> dict[tuple[int, int], Owner]:
    """(netns, pid) -> Owner, for every process of processes.csv whose cgroup names one (its
    latest row's)."""
    procs = processes_in_time_order(run)
    names = _names(run.table("containers"))
    out: dict[tuple[int, int], Owner] = {}
    for netns, pid, cgroup in procs[["netns", "pid", "cgroup"]].itertuples(index=False):
        if pd.isna(cgroup):
            continue
        owner = _named(owner_of_cgroup(str(cgroup)), names)
        if owner is not None:
            out[(int(netns), int(pid))] = owner
    return out


def owner_of(run: RunLike, netns: int | None, pid: int | None) -> Owner | None:
    """The owner of one process; the namespace's own owner when the pid is not known: the one
    container or pod every owned process of the namespace belongs to (None when they belong
    to several, so the finding names the process, not a guess, or to none)."""
    return _of(owners(run), netns, pid)


def _named(c: CgroupOwner, names: dict[str, dict[str, str]]) -> Owner | None:
    return Owner(**named(c, names)) if c.known else None


def _names(containers: pd.DataFrame) -> dict[str, dict[str, str]]:
    rows = containers.astype(object).where(containers.notna(), None).to_dict("records")
    return names_from_rows(rows)


def name_owners(run: RunLike, findings: list[Finding]) -> list[Finding]:
    """Each finding's subject gets its object's owner (None when nothing is known): the
    process's when the subject names a pid, else the namespace's."""
    table = owners(run)
    for f in findings:
        s = f.subject
        owner = _of(table, s.get("netns"), s.get("pid"))
        s["owner"] = owner.to_dict() if owner else None
    return findings


def _of(table: dict[tuple[int, int], Owner], netns: Any, pid: Any) -> Owner | None:
    ns = None if netns is None or pd.isna(netns) else int(netns)
    if pid is not None and not pd.isna(pid):
        mine = [o for (n, p), o in table.items() if p == int(pid) and ns in (None, n)]
        if mine:
            return mine[0]
    # The host's namespace holds every process not in a container, and processes.csv lists only
    # those holding a listener there: one containerised listener does not make it a container's.
    if ns is None or ns == INIT_NET_INODE:
        return None
    found = {o for (n, _), o in table.items() if n == ns and (o.container_id or o.pod_uid)}
    return found.pop() if len(found) == 1 else None
