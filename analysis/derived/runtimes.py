"""The runtimes lab's table (labs/runtimes): for each server started with its defaults, what
the capture measured of its listeners: the backlog it asked listen() for (the accept-queue
probe's aq_listen rows), the limit the kernel put in force (ss Send-Q in listeners.csv),
net.core.somaxconn, IPv4 / IPv6 / dual-stack, its executable (processes.csv) and the knob
that changes its backlog (analysis/wording/servers.py). Nothing here is typed by hand: a
server the run has no row for says so."""

from __future__ import annotations

from typing import Any

import pandas as pd

from analysis.load import RunDataError
from analysis.wording.servers import server_knob

from . import RunLike, processes_in_time_order
from .servers import server_of_exe

COLUMNS = [
    "server",
    "version",
    "status",
    "port",
    "address",
    "family",
    "listen_backlogs",
    "limit",
    "somaxconn",
    "exe",
    "recognised_as",
    "backlog_knob",
    "reuseport",
    "sockets",
    "processes",
]


def family(laddr: str, dual_stack: Any) -> str:
    """IPv4, IPv6 or dual-stack (an IPv6 wildcard that takes IPv4 clients), from ss's view."""
    if ":" not in laddr:
        return "IPv4"
    return "dual-stack" if dual_stack == 1 else "IPv6"


def table(run: RunLike) -> pd.DataFrame:
    """One row per listener of each server the lab tried; one row saying why for a server
    that has none (not installed, did not listen)."""
    lab = _runtimes_lab(run)
    listeners, listens = _in_server_netns(run, lab, "listeners"), _listen_calls(run, lab)
    rows = [row for rt in lab.get("runtimes", []) for row in _rows(run, rt, listeners, listens, lab)]
    return pd.DataFrame(rows, columns=COLUMNS)


def _runtimes_lab(run: RunLike, variant: str | None = None) -> dict[str, Any]:
    """The run's lab block, refused unless it is the runtimes lab (and VARIANT, when given)."""
    lab = run.lab or {}
    if lab.get("lab") != "runtimes":
        raise RunDataError(f"not a runtimes lab run (metadata.json lab: {lab.get('lab')!r})")
    if variant is not None and lab.get("variant") != variant:
        raise RunDataError(f"not a runtimes {variant} run (metadata.json lab variant: {lab.get('variant')!r})")
    return lab


def _in_server_netns(run: RunLike, lab: dict[str, Any], name: str) -> pd.DataFrame:
    rows = run.table(name)
    return rows[rows["netns"] == int(lab["server"]["netns_inode"])]


def _listen_calls(run: RunLike, lab: dict[str, Any]) -> pd.DataFrame:
    """The listen() calls the probe saw succeed in the server namespace."""
    calls = _in_server_netns(run, lab, "aq_listen")
    return calls[calls["ret"] == 0]


def _rows(run: RunLike, rt: dict[str, Any], listeners: pd.DataFrame, listens: pd.DataFrame, lab: dict) -> list[dict]:
    port = int(rt["port"])
    base = {"server": rt["name"], "version": rt.get("version"), "status": rt["status"], "port": port}
    mine = listeners[listeners["lport"] == port]
    if mine.empty:
        return [{**base, "status": rt["status"] if rt["status"] != "listening" else "not sampled"}]
    # The last sample with it: the limit in force once it settled.
    last = mine[mine["time_s"] == mine["time_s"].max()]
    calls = listens[listens["lport"] == port]
    backlogs = ", ".join(str(b) for b in dict.fromkeys(calls["backlog_requested"].tolist())) or None
    exe = _exe(run, last)
    # As the rules see it: recognised from the executable, or not (a Go binary is named
    # after its program); then the fix names the generic listen() advice.
    server = server_of_exe(exe)
    knob = server_knob(server, "sizing")
    out = []
    for laddr, socks in last.sort_values("laddr").groupby("laddr", sort=False):
        r = socks.iloc[0]
        out.append(
            {
                **base,
                "address": str(laddr),
                "family": family(str(laddr), r["dual_stack"]),
                "listen_backlogs": backlogs,
                "limit": int(r["send_q"]),
                "somaxconn": lab.get("somaxconn"),
                "exe": exe,
                "recognised_as": server,
                "backlog_knob": knob,
                **_socket_model(calls, socks),
            }
        )
    return out


def _socket_model(calls: pd.DataFrame, socks: pd.DataFrame) -> dict[str, Any]:
    """How a server listens on one address: whether its listen() calls set SO_REUSEPORT (the
    probe's aq_listen), how many sockets ss listed there (a SO_REUSEPORT group: several), and how
    many processes accept from them: of several holders (ss -p), those whose epoll set watches them
    (nginx's workers, not its master), else the holders; None where the run did not record it."""
    flags = calls["reuseport"].dropna()
    holders = {p for h in socks["holders"].dropna() for p in str(h).split()}
    watchers = {p for w in socks["watchers"].dropna() for p in str(w).split() if p != "-"}
    return {
        "reuseport": bool(flags.astype(int).any()) if len(flags) else None,
        "sockets": int(socks["sock_ino"].nunique()) if socks["sock_ino"].notna().any() else None,
        "processes": len(watchers or holders) or None,
    }


def worker_stall(row: dict[str, Any]) -> str | None:
    """How a stall of one worker shows, by how the server listens (row: a table() row)."""
    sockets, procs = row.get("sockets"), row.get("processes")
    if sockets is None or pd.isna(sockets) or procs is None or pd.isna(procs):
        return None
    if sockets > 1:
        return (
            "each worker has its own socket and queue (SO_REUSEPORT group): a stalled worker's queue overflows "
            "alone, its share of new connections time out, the others are served; the finding names that worker"
        )
    if procs > 1:
        return (
            "its processes share one socket and queue: the others take a stalled worker's share; the queue "
            "overflows only when every one of them stalls"
        )
    return "one process, one queue: a stalled accept loop stops every new connection"


def _exe(run: RunLike, last: pd.DataFrame) -> str | None:
    """The executable of the process holding the listener (processes.csv: its latest row, after any
    exec), by its pid."""
    procs = processes_in_time_order(run)
    pids = set(last["pid"].dropna().astype(int))
    hit = procs[procs["pid"].isin(pids) & procs["exe"].notna()]
    return str(hit["exe"].iloc[-1]) if not hit.empty else None


AT_LIMIT_COLUMNS = [
    "server",
    "version",
    "port",
    "knob",
    "conns",
    "connected",
    "connect_failed",
    "kept_open",
    "closed_by_server",
    "said",
    "queue_depth_max",
    "relisten_backlogs",
    "cpu_s",
    "hold_s",
    "behaviour",
    "skipped",
]
# A server whose processes used half a CPU or more while idle connections sat there spins.
SPIN_CPU_SHARE = 0.5


def at_limit_table(run: RunLike) -> pd.DataFrame:
    """The limits variant: one row per server held past its own connection limit, from the
    idle client's account (lab.runtimes[].at_limit) and the accept-queue probe's record of
    its listener over the same window: the deepest its queue got, and any listen() it
    called again with another backlog. `behaviour` lists what was seen, in order:
    relisten, queues, refuses (accepts and closes), drops (connects failed), spins,
    keeps (every connection accepted and held)."""
    lab = _runtimes_lab(run, "limits")
    queues, listens = _in_server_netns(run, lab, "aq_listener"), _listen_calls(run, lab)
    rows = [_at_limit_row(rt, queues, listens) for rt in lab.get("runtimes", []) if rt.get("at_limit")]
    return pd.DataFrame(rows, columns=AT_LIMIT_COLUMNS)


def _at_limit_row(rt: dict[str, Any], queues: pd.DataFrame, listens: pd.DataFrame) -> dict[str, Any]:
    at = rt["at_limit"]
    base = {"server": rt["name"], "version": rt.get("version"), "port": int(rt["port"])}
    if "hold" not in at:
        return {**base, "skipped": at.get("skipped", "not held")}
    hold = at["hold"]
    # The probe prints once a second: its interval rows that overlap the hold.
    start, end = float(hold["start_epoch"]), float(hold["end_epoch"])
    mine = queues[(queues["lport"] == base["port"]) & (queues["time_s"] >= start - 1) & (queues["time_s"] <= end + 1)]
    calls = listens[listens["lport"] == base["port"]].sort_values("time_s")
    first = int(calls["backlog_requested"].iloc[0]) if not calls.empty else None
    again = calls[(calls["time_s"] >= start - 1) & (calls["backlog_requested"] != first)]
    row = {
        **base,
        "knob": at["knob"],
        "conns": int(hold["conns"]),
        "connected": int(hold["connected"]),
        "connect_failed": int(hold.get("connect_failed", 0)) + int(hold.get("not_tried", 0)),
        "kept_open": int(hold["open"]),
        "closed_by_server": int(hold["closed_by_server"]),
        "said": hold.get("said"),
        "queue_depth_max": int(mine["depth_max"].max()) if not mine.empty else None,
        "relisten_backlogs": ", ".join(str(b) for b in dict.fromkeys(again["backlog_requested"].tolist())) or None,
        "cpu_s": float(at["cpu_s"]),
        "hold_s": round(end - start, 1),
        "skipped": None,
    }
    row["behaviour"] = ", ".join(_behaviour(row))
    return row


def _behaviour(r: dict[str, Any]) -> list[str]:
    seen = []
    if r["relisten_backlogs"]:
        seen.append("relisten")
    if (r["queue_depth_max"] or 0) >= 2:
        seen.append("queues")
    if r["closed_by_server"]:
        seen.append("refuses")
    if r["connect_failed"]:
        seen.append("drops")
    if r["hold_s"] and r["cpu_s"] >= SPIN_CPU_SHARE * r["hold_s"]:
        seen.append("spins")
    if not seen and r["kept_open"] == r["conns"]:
        seen.append("keeps")
    return seen
