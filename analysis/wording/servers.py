"""A server's own knob for each kind of fix, named in the fix link when the process is
recognised (analysis/derived/servers.py); the generic listen()/sysctl advice otherwise.

"backlog": what sets the listen() backlog; "capacity": more event loops or workers;
"conn_limit": a connection limit past which the server stops accepting (the runtimes lab's
limits variant, docs/runtimes.md). Knob names as each server documents them; defaults and
behaviours are stated only where this project measured them (Java's 50 in
tests/integration/test_real_servers.py, memcached's -h, the runtimes lab)."""

from __future__ import annotations

KNOBS: dict[str, dict[str, str]] = {
    "nginx": {
        "backlog": "`listen … backlog=N` in the server block",
        "capacity": "`worker_processes auto` (an event loop per CPU) and `worker_connections`",
    },
    "redis": {"backlog": "`tcp-backlog` in redis.conf", "capacity": "`io-threads`, or more instances"},
    "memcached": {
        "backlog": "`-b` / `--listen-backlog` (its default: 1024)",
        "capacity": "`-t` (worker threads)",
        "conn_limit": "`-c` / `--conn-limit` (past it memcached answers `ERROR Too many open connections` and "
        "closes; with `-o no_maxconns_fast`, or when accept() runs out of descriptors first, it calls listen(fd, 0) "
        "and stops accepting: docs/runtimes.md)",
    },
    "haproxy": {
        "backlog": "`backlog` on the frontend or bind line",
        "capacity": "`nbthread`",
        "conn_limit": "`maxconn` (past it HAProxy stops accepting: docs/runtimes.md)",
    },
    "apache": {
        "backlog": "`ListenBacklog`",
        "capacity": "`MaxRequestWorkers` / `ThreadsPerChild`",
        "conn_limit": "`MaxRequestWorkers` (past it Apache stops accepting: docs/runtimes.md)",
    },
    "postgresql": {
        "backlog": "`max_connections` (PostgreSQL has no backlog setting: it asks listen() for twice its number "
        "of backends, docs/runtimes.md)",
        "capacity": "`max_connections`, or a pooler in front",
    },
    "java": {
        "backlog": "the backlog argument: `new ServerSocket(port, backlog)` or `ServerSocketChannel.bind(addr, "
        "backlog)` (without it Java asks for 50)",
        "capacity": "more acceptor/selector threads (the framework's setting: Netty event loop threads, Tomcat "
        "acceptCount/maxThreads)",
    },
    "node": {
        "backlog": "`server.listen({ port, backlog })`",
        "capacity": "`cluster` or worker_threads: one event loop per core",
    },
    "python": {
        "backlog": "`socket.listen(backlog)` or asyncio's `start_server(..., backlog=N)`",
        "capacity": "more worker processes (gunicorn/uvicorn `--workers`)",
    },
}

# Which knob each fix names.
FIX_KNOB = {"sizing": "backlog", "capacity": "capacity", "loop_saturated": "capacity", "stall": "conn_limit"}


def server_knob(server: str | None, fix: str) -> str | None:
    """The knob of `server` for a fix (a cause class), or None when there is none to name."""
    return KNOBS.get(server or "", {}).get(FIX_KNOB.get(fix, ""))
