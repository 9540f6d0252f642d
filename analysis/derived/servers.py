"""Which server a process is: from its executable (processes.csv, /proc/PID/exe), since its
comm alone is often only "java", "node" or "python3". A finding on its listener or its
event loop can then name the server's own knob (analysis/wording/servers.py)."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from . import RunLike, processes_in_time_order

# Executable name (without a version suffix: python3.11, php-fpm8.2) -> server.
EXECUTABLES = {
    "nginx": "nginx",
    "redis-server": "redis",
    # Debian's redis-server is a symlink to redis-check-rdb (one binary that looks at its
    # argv[0]): /proc/PID/exe of a running Redis names redis-check-rdb (labs/runtimes).
    "redis-check-rdb": "redis",
    "memcached": "memcached",
    "haproxy": "haproxy",
    "apache2": "apache",
    "httpd": "apache",
    "postgres": "postgresql",
    "java": "java",
    "node": "node",
    "python": "python",
    "python3": "python",
}


def server_of_exe(exe: str | None) -> str | None:
    """The server an executable path names, or None (a Go binary is named after its program)."""
    if not exe:
        return None
    name = PurePosixPath(exe.removesuffix(" (deleted)")).name
    return EXECUTABLES.get(name) or EXECUTABLES.get(re.sub(r"[-.\d]+$", "", name))


def server_of(run: RunLike, netns: int | None, pid: int | None) -> str | None:
    """The server behind a pid of a finding, from the executable last recorded for it (a process is
    recorded again after an exec)."""
    if pid is None:
        return None
    procs = processes_in_time_order(run)
    rows = procs[(procs["pid"] == pid) & procs["exe"].notna()]
    if netns is not None and (rows["netns"] == netns).any():
        rows = rows[rows["netns"] == netns]
    return server_of_exe(str(rows["exe"].iloc[-1])) if not rows.empty else None
