"""Listening sockets as objects: which socket a row is, who owns it, and what it dropped by its own count.

A listener is a socket, not an address: the members of a SO_REUSEPORT group share one
address and port, and each has its own accept queue, limit, drop counter (sk_drops) and
owner. Since contract 10 every probe row and every ss row carries the socket's inode
(sock_ino); older runs have none (sock_ino 0 in the probe's tables, empty in
listeners.csv), and then the sockets of one address and port stay one object, as they
were recorded.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pandas as pd

from . import RunLike, processes_in_time_order
from .addresses import plain


class SocketKey(NamedTuple):
    """One listening socket: its namespace, name (address and port) and inode (0: not known)."""

    netns: int
    laddr: str
    lport: int
    sock_ino: int


SOCKET_COLUMNS = ["netns", "laddr", "lport", "sock_ino"]


def drop_key(laddr: str, lport: int, sock_ino: int = 0) -> tuple[str, int, int]:
    """A socket's key in socket_drops(): its address in the plain form, port and inode."""
    return (plain(laddr), int(lport), int(sock_ino))


def socket_drops(
    run: RunLike, netns: int, t0: float | None = None, t1: float | None = None
) -> dict[tuple[str, int, int], int]:
    """Each listening socket's own drops over the capture (or samples stamped in [t0, t1]): the
    rise of its sk_drops (ss -m), the kernel's own count of what it dropped, summed per socket
    and never across the sockets of one port. Rows with an inode are one socket's series (a
    fall would be a new socket with that inode: it counts again from 0). Rows without one
    (contract 9 and older) are summed per address and port at each sample first, so the members
    of a group are one series, as recorded. Sockets whose drops were not recorded (contract 4
    and older, a kernel that shows no skmem d) are left out."""
    ls = run.table("listeners")
    ls = ls[(ls["netns"] == netns) & ls["drops"].notna()]
    if t0 is not None:
        ls = ls[ls["time_s"] >= t0]
    if t1 is not None:
        ls = ls[ls["time_s"] <= t1]
    out: dict[tuple[str, int, int], int] = {}
    known = ls["sock_ino"].notna()
    for (laddr, lport, ino), g in ls[known].groupby(["laddr", "lport", "sock_ino"], sort=True):
        key = drop_key(str(laddr), int(lport), int(ino))
        out[key] = out.get(key, 0) + _rise(g.sort_values("time_s")["drops"])
    for (laddr, lport), g in ls[~known].groupby(["laddr", "lport"], sort=True):
        per_sample = g.groupby("time_s")["drops"].sum().sort_index()
        key = drop_key(str(laddr), int(lport))
        out[key] = out.get(key, 0) + _rise(per_sample)
    return out


def _rise(drops: pd.Series) -> int:
    """How much a cumulative counter rose over its samples; a fall is a new counter from 0."""
    drops = drops.astype("int64")
    step = drops.diff().iloc[1:]
    return int(step.where(step >= 0, drops.iloc[1:]).sum())


def _pids(text: Any) -> list[int]:
    return [int(p) for p in str(text).split()] if isinstance(text, str) and text not in ("", "-") else []


def _comm_of(run: RunLike, netns: int, pid: int) -> str | None:
    """A process's name: processes.csv (its latest row: a process is recorded again after an exec),
    else the name ss gave it."""
    procs = processes_in_time_order(run)
    hit = procs[(procs["pid"] == pid) & procs["comm"].notna()]
    if not hit.empty:
        return str(hit["comm"].iloc[-1])
    ls = run.table("listeners")
    hit = ls[(ls["netns"] == netns) & (ls["pid"] == pid) & ls["comm"].notna()]
    return str(hit["comm"].iloc[-1]) if not hit.empty else None


def _named(run: RunLike, netns: int, pids: list[int], comms: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """Each pid with its name: as the source that named it saw it (comms), else as recorded elsewhere."""
    comms = comms or {}
    return [{"pid": p, "comm": comms[p] if p in comms else _comm_of(run, netns, p)} for p in pids]


def socket_owner(run: RunLike, key: SocketKey) -> dict[str, Any]:
    """The processes behind a listening socket, from data about that socket:
    - the one process holding it (ss -p, by its inode), when only one does;
    - when several hold it (nginx's master and workers, a pre-fork server): those whose epoll
      set watches it (the ones that accept from it), else all of them, with those the probe
      saw call accept() on it (`accepting`);
    - with no ss row for it (contract 9 and older, a namespace not sampled): the processes the
      probe saw accept() on it, then listen() on it.
    pid and comm are the owner's when there is one, else the first of `owners`."""
    if key.sock_ino:
        held = _holders(run, key)
        if held is not None:
            return held
    acc = _accepting(run, key)
    if acc:
        return _owner(run, key.netns, list(acc), "probe accept()", comms=acc)
    if not key.sock_ino:
        ls = run.table("listeners")
        ls = ls[(ls["netns"] == key.netns) & (ls["lport"] == key.lport) & ls["pid"].notna()]
        if not ls.empty:
            pid, comm = int(ls["pid"].iloc[-1]), ls["comm"].iloc[-1]
            return _owner(run, key.netns, [pid], "ss -p", comms={pid: comm} if pd.notna(comm) else None)
    lis = _probe_rows(run, "aq_listen", key)
    if not lis.empty:
        pid = int(lis["pid"].iloc[-1])
        return _owner(run, key.netns, [pid], "probe listen()", comms={pid: str(lis["comm"].iloc[-1])})
    return {"pid": None, "comm": None, "source": None, "owners": []}


def _owner(
    run: RunLike, netns: int, pids: list[int], source: str, comms: dict[int, str] | None = None, **more: Any
) -> dict[str, Any]:
    owners = _named(run, netns, pids, comms)
    return {"pid": owners[0]["pid"], "comm": owners[0]["comm"], "source": source, "owners": owners, **more}


def _holders(run: RunLike, key: SocketKey) -> dict[str, Any] | None:
    """The socket's owners from its latest ss row that names its holders; None if none does."""
    ls = run.table("listeners")
    ls = ls[(ls["netns"] == key.netns) & (ls["sock_ino"] == key.sock_ino) & ls["holders"].notna()]
    if ls.empty:
        return None
    last = ls.sort_values("time_s").iloc[-1]
    holders = _pids(last["holders"])
    if len(holders) == 1:
        return _owner(run, key.netns, holders, "ss -p")
    watchers = _pids(last["watchers"])
    if watchers:
        return _owner(run, key.netns, watchers, "epoll set", holders=holders)
    accepting = [p for p in _accepting(run, key) if p in holders]
    return _owner(run, key.netns, holders, "ss -p (shared)", holders=holders, accepting=accepting)


def _probe_rows(run: RunLike, table: str, key: SocketKey) -> pd.DataFrame:
    """A probe table's rows about this socket: by inode, or by namespace and port when not known."""
    rows = run.table(table)
    rows = rows[(rows["netns"] == key.netns) & (rows["lport"] == key.lport)]
    return rows[rows["sock_ino"] == key.sock_ino] if key.sock_ino else rows


def _accepting(run: RunLike, key: SocketKey) -> dict[int, str]:
    """The processes the probe saw accept() a connection on this socket, most accepts first, with
    the name it saw each under."""
    acc = _probe_rows(run, "aq_accept", key)
    acc = acc[acc["accepted"] > 0]
    if acc.empty:
        return {}
    top = acc.groupby(["pid", "comm"])["accepted"].sum().sort_values(ascending=False, kind="stable")
    out: dict[int, str] = {}
    for pid, comm in top.index:
        out.setdefault(int(pid), str(comm))
    return out


def group_of(keys: list[SocketKey]) -> dict[tuple[int, str, int], list[SocketKey]]:
    """The sockets by (namespace, address, port): a SO_REUSEPORT group where more than one known
    socket shares them."""
    groups: dict[tuple[int, str, int], list[SocketKey]] = {}
    for k in sorted(set(keys)):
        groups.setdefault((k.netns, k.laddr, k.lport), []).append(k)
    return groups


def ss_sockets(run: RunLike, netns: int) -> list[SocketKey]:
    """The listening sockets ss listed in a namespace, by inode (none in runs of contract 9 and older)."""
    ls = run.table("listeners")
    ls = ls[(ls["netns"] == netns) & ls["sock_ino"].notna()]
    return [
        SocketKey(netns, str(a), int(p), int(i))
        for a, p, i in ls[["laddr", "lport", "sock_ino"]].drop_duplicates().itertuples(index=False)
    ]
