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

from . import RunLike
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
]


def family(laddr: str, dual_stack: Any) -> str:
    """IPv4, IPv6 or dual-stack (an IPv6 wildcard that takes IPv4 clients), from ss's view."""
    if ":" not in laddr:
        return "IPv4"
    return "dual-stack" if dual_stack == 1 else "IPv6"


def table(run: RunLike) -> pd.DataFrame:
    """One row per listener of each server the lab tried; one row saying why for a server
    that has none (not installed, did not listen)."""
    lab = run.lab or {}
    if lab.get("lab") != "runtimes":
        raise RunDataError(f"not a runtimes lab run (metadata.json lab: {lab.get('lab')!r})")
    inode = int(lab["server"]["netns_inode"])
    listeners = run.table("listeners")
    listeners = listeners[listeners["netns"] == inode]
    listens = run.table("aq_listen")
    listens = listens[(listens["netns"] == inode) & (listens["ret"] == 0)]
    rows = [row for rt in lab.get("runtimes", []) for row in _rows(run, rt, listeners, listens, lab)]
    return pd.DataFrame(rows, columns=COLUMNS)


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
    for _, r in last.sort_values("laddr").iterrows():
        out.append(
            {
                **base,
                "address": str(r["laddr"]),
                "family": family(str(r["laddr"]), r["dual_stack"]),
                "listen_backlogs": backlogs,
                "limit": int(r["send_q"]),
                "somaxconn": lab.get("somaxconn"),
                "exe": exe,
                "recognised_as": server,
                "backlog_knob": knob,
            }
        )
    return out


def _exe(run: RunLike, last: pd.DataFrame) -> str | None:
    """The executable of the process holding the listener (processes.csv), by its pid."""
    procs = run.table("processes")
    pids = set(last["pid"].dropna().astype(int))
    hit = procs[procs["pid"].isin(pids) & procs["exe"].notna()]
    return str(hit["exe"].iloc[0]) if not hit.empty else None
