"""Runs of older contract versions: the tables as they were then, and their upgrades to today's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import pandas as pd

from .columns import (
    ADDR_FAMILY,
    COMM_TEXT,
    ENDPOINT_KEY,
    INT,
    NETNS,
    NONNEG,
    PORT,
    PROBE_TIME,
    STR,
    Col,
    Table,
    count_col,
)
from .tables import CONTRACT_VERSION, TABLES

# Runs written under an older data contract still load: their tables that have
# changed since are read with the definition they were written by, then
# upgraded to today's columns (what is gone is dropped; what was never recorded
# gets the "not recorded" value today's definition documents).
READABLE_CONTRACTS = (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, CONTRACT_VERSION)


@dataclass(frozen=True)
class Legacy:
    table: Table
    upgrade: Callable[[pd.DataFrame], pd.DataFrame]


def _aq_listener_from_v1(df: pd.DataFrame) -> pd.DataFrame:
    return _aq_from_v_before_sockets(df, "aq_listener")


def _aq_from_v_before_sockets(df: pd.DataFrame, name: str) -> pd.DataFrame:
    # No socket inode before contract 10: 0, "not known" (rows of one address and port may be
    # several sockets of a SO_REUSEPORT group, merged); nor a listen()'s SO_REUSEPORT.
    df = df.assign(sock_ino=0)
    return _now(df.assign(reuseport=pd.NA) if name == "aq_listen" else df, name)


def _ep_loop_from_v1(df: pd.DataFrame) -> pd.DataFrame:
    return _ep_loop_from_v2(df.assign(tid=df["pid"]))


def _ep_loop_from_v2(df: pd.DataFrame) -> pd.DataFrame:
    # The thread's CPU time was not recorded before contract 4.
    df = df.assign(cpu_ns=pd.NA)
    return TABLES["ep_loop"].schema().coerce_dtype(df[TABLES["ep_loop"].column_names])


def _tw_connect_from_v1(df: pd.DataFrame) -> pd.DataFrame:
    # v1 counted every connect() by errno; 0 (success) and 115 (EINPROGRESS) are not failures.
    df = df[~df["errno"].isin([0, 115])]
    df = df.assign(family=0, raddr="", rport=0, failures=df["calls"])
    return TABLES["tw_connect"].schema().coerce_dtype(df[TABLES["tw_connect"].column_names])


def _listeners_from_v1(df: pd.DataFrame) -> pd.DataFrame:
    # The listener's own drop counter (ss -m) was not recorded before contract 5.
    return _listeners_from_v2(df.assign(drops=pd.NA))


def _listeners_from_v2(df: pd.DataFrame) -> pd.DataFrame:
    # Whether a "::" listener took IPv4 too was not recorded before contract 6.
    return _listeners_from_v3(df.assign(dual_stack=pd.NA))


def _listeners_from_v3(df: pd.DataFrame) -> pd.DataFrame:
    # Which socket a row is, and every process holding it, were not recorded before contract 10.
    return _now(df.assign(sock_ino=pd.NA, holders=pd.NA, watchers=pd.NA), "listeners")


def _processes_from_v1(df: pd.DataFrame) -> pd.DataFrame:
    # The process's cgroup (its owner: unit, container, pod) was not recorded before contract 7.
    return _now(df.assign(cgroup=pd.NA), "processes")


def _processes_from_v2(df: pd.DataFrame) -> pd.DataFrame:
    # One row per process (its first sight) before contract 13: kept as read.
    return _now(df, "processes")


def _sockstat_from_v1(df: pd.DataFrame) -> pd.DataFrame:
    # Every sample listed its TIME_WAIT sockets before contract 8 (and had no flows to list).
    return _now(df.assign(tw_listed=1, flows_listed=1), "sockstat")


def _sockstat_from_v2(df: pd.DataFrame) -> pd.DataFrame:
    # Which samples listed the flows was not recorded before contract 12: every one, as the
    # analysis took it then (a namespace above --flows-per-sample listed fewer).
    return _now(df.assign(flows_listed=1), "sockstat")


def _tw_sockets_from_v1(df: pd.DataFrame) -> pd.DataFrame:
    # v1 also listed the TIME_WAIT sockets on service ports (a server that closed first), which
    # v2 leaves out; kept as read: every reader takes the client side (service_local 0), which
    # both list.
    return _now(df, "tw_sockets")


def _sock_buffers_from_v1(df: pd.DataFrame) -> pd.DataFrame:
    # A flow's re-sent segments and the spurious ones among them were not recorded before contract 11.
    return _now(df.assign(retrans_total=pd.NA, dsack_dups=pd.NA), "sock_buffers")


def _now(df: pd.DataFrame, name: str) -> pd.DataFrame:
    return TABLES[name].schema().coerce_dtype(df[TABLES[name].column_names])


def _without(name: str, version: int, description: str, *dropped: str) -> Table:
    """A table as an older contract wrote it: today's columns less those it did not have yet."""
    now = TABLES[name]
    columns = tuple(c for c in now.columns if c.name not in dropped)
    key = tuple(k for k in now.key if k not in dropped)
    return Table(now.name, now.file, now.writer, version, description, columns, key=key)


_SOCKET_COLUMNS = ("sock_ino", "holders", "watchers")


# listeners.csv as contracts 2 to 4 wrote it, and as contract 5 did.
_LISTENERS_V1 = _without(
    "listeners",
    1,
    "ss -ltnp snapshot per sample: every TCP listener of the namespace.",
    "drops",
    "dual_stack",
    *_SOCKET_COLUMNS,
)
_LISTENERS_V2 = _without(
    "listeners",
    2,
    "ss -ltnpm snapshot per sample: every TCP listener of the namespace, with the kernel's own count "
    "of what it dropped.",
    "dual_stack",
    *_SOCKET_COLUMNS,
)
# listeners.csv as contracts 6 to 9 wrote it.
_LISTENERS_V3 = _without(
    "listeners",
    3,
    "ss -tnme state listening per sample: every TCP listener of the namespace, with the kernel's own count of "
    "what it dropped; its owner from ss -p, matched by socket inode.",
    *_SOCKET_COLUMNS,
)
# The accept-queue probe's tables as contracts 2 to 9 wrote them (aq_listener: 3 to 9), with no
# socket inode: rows of one address and port could be several sockets.
_AQ_LISTEN_V1 = _without("aq_listen", 1, "One row per listen() call seen while the probe ran.", "sock_ino", "reuseport")
_AQ_LISTENER_V2 = _without(
    "aq_listener",
    2,
    "Per interval, per listener (address and port) that had arrivals, accepts or a non-empty queue.",
    "sock_ino",
)
_AQ_ACCEPT_V1 = _without(
    "aq_accept", 1, "Per interval, per (process, listener port): the application's accept() calls.", "sock_ino"
)
# processes.csv as contract 6 wrote it, and as contracts 7 to 12 did: a row per process, once.
_PROCESSES_V1 = replace(
    _without(
        "processes",
        1,
        "Each process holding a listener of the namespace (ss -p), the first sample it was seen in: its name "
        "and executable.",
        "cgroup",
    ),
    key=("netns", "pid"),
)
_PROCESSES_V2 = replace(
    TABLES["processes"],
    version=2,
    description="Each process holding a listener of the namespace (ss -p), and in a namespace other than the "
    "host's every process living in it at the first sample: its name, executable and cgroup, once (the first "
    "sample it was seen in).",
    key=("netns", "pid"),
)
# sockstat.csv as contracts 2 to 7 wrote it.
_SOCKSTAT_V1 = _without("sockstat", 1, "The TCP line of /proc/net/sockstat per sample.", "tw_listed", "flows_listed")
# sockstat.csv as contracts 8 to 11 wrote it.
_SOCKSTAT_V2 = _without(
    "sockstat",
    2,
    "The TCP line of /proc/net/sockstat per sample, and whether the sample listed the TIME_WAIT sockets.",
    "flows_listed",
)
# tw_sockets.csv as contracts 2 to 8 wrote it: the same columns, every TIME_WAIT socket.
_TW_SOCKETS_V1 = _without(
    "tw_sockets",
    1,
    "ss -tano state time-wait per sample, every TIME_WAIT socket (service ports too), grouped by (local "
    "address, remote address, service port).",
)


# sock_buffers.csv as contract 10 wrote it.
_SOCK_BUFFERS_V1 = _without(
    "sock_buffers",
    1,
    "ss -tinm state established per sample: each TCP flow that sent since the previous listing, is new, or "
    "holds unread data; at the first listing every flow.",
    "retrans_total",
    "dsack_dups",
)


# Tables a contract did not have: read as empty from runs of that contract.
# threads.csv (contract 6): the scheduler's per-thread clocks for the listeners' processes.
# processes.csv (contract 6): each listening process's executable.
# containers.csv (contract 7): the names of the host's containers and pods.
# sb_flow.csv and sock_buffers.csv (contract 10): the socket-buffer family's probe and flows.
_SOCKET_BUFFERS = frozenset({"sb_flow", "sock_buffers"})
ABSENT_IN_CONTRACT: dict[int, frozenset[str]] = {
    2: frozenset({"rt_flow", "threads", "processes", "containers"}) | _SOCKET_BUFFERS,
    3: frozenset({"threads", "processes", "containers"}) | _SOCKET_BUFFERS,
    4: frozenset({"threads", "processes", "containers"}) | _SOCKET_BUFFERS,
    5: frozenset({"threads", "processes", "containers"}) | _SOCKET_BUFFERS,
    6: frozenset({"containers"}) | _SOCKET_BUFFERS,
    7: _SOCKET_BUFFERS,
    8: _SOCKET_BUFFERS,
    9: _SOCKET_BUFFERS,
}

LEGACY_TABLES: dict[int, dict[str, Legacy]] = {
    2: {
        "aq_listener": Legacy(
            Table(
                "aq_listener",
                "aq_listener.csv",
                "probes/accept_queue.bt",
                1,
                "Per interval, per listening socket that had arrivals, accepts or a non-empty queue.",
                (
                    PROBE_TIME,
                    NETNS,
                    ADDR_FAMILY,
                    Col("laddr", STR, "local address the socket listens on"),
                    Col("lport", INT, "local port", PORT),
                    count_col("limit", "sk_max_ack_backlog: the effective accept-queue limit"),
                    count_col("enqueues", "connections queued on the listener this interval (sk_data_ready on LISTEN)"),
                    count_col("depth_max", "largest queue depth right after an enqueue this interval"),
                    count_col("depth_sum", "sum of depths at each enqueue (depth_sum / enqueues = mean depth seen)"),
                    count_col("depth_le_25pct", "enqueues that found depth <= 25 % of the limit"),
                    count_col("depth_le_50pct", "enqueues with 25 % < depth <= 50 % of the limit"),
                    count_col("depth_le_75pct", "enqueues with 50 % < depth <= 75 % of the limit"),
                    count_col("depth_le_100pct", "enqueues with 75 % < depth <= limit"),
                    count_col(
                        "full_events",
                        "enqueues that left the queue full (depth > limit: the kernel drops further SYNs and ACKs)",
                    ),
                    count_col("depth_now", "queue depth at the end of the interval (like ss Recv-Q)"),
                    count_col("accepted", "successful accept()/accept4() on this listener this interval"),
                ),
            ),
            _aq_listener_from_v1,
        ),
        "tw_close": Legacy(
            Table(
                "tw_close",
                "tw_close.csv",
                "probes/time_wait.bt",
                1,
                "Per interval, per (namespace, local address, remote address, service port) with TCP closes.",
                (
                    *ENDPOINT_KEY,
                    count_col(
                        "active_closes", "ESTABLISHED -> FIN_WAIT1: this side closed first and will hold TIME_WAIT"
                    ),
                    count_col("passive_closes", "ESTABLISHED -> CLOSE_WAIT: the peer closed first"),
                    count_col("life_lt_1ms", "connections that lived < 1 ms (ESTABLISHED to CLOSE)"),
                    count_col("life_lt_10ms", "lived 1-10 ms"),
                    count_col("life_lt_100ms", "lived 10-100 ms"),
                    count_col("life_lt_1s", "lived 100 ms - 1 s"),
                    count_col("life_lt_10s", "lived 1-10 s"),
                    count_col("life_ge_10s", "lived 10 s or more"),
                    count_col("life_sum_us", "sum of those lifetimes (us): mean = sum / count"),
                ),
                key=("time_s", "netns", "family", "laddr", "raddr", "service_port", "service_local"),
            ),
            lambda df: df,
        ),
        "tw_connect": Legacy(
            Table(
                "tw_connect",
                "tw_connect.csv",
                "probes/time_wait.bt",
                1,
                "Per interval, per (namespace, process, errno): connect() calls on TCP sockets.",
                (
                    PROBE_TIME,
                    NETNS,
                    Col("pid", INT, "process id", NONNEG),
                    Col("comm", STR, "process name: " + COMM_TEXT),
                    Col("errno", INT, "0 = success, 115 = EINPROGRESS (non-blocking), 99 = EADDRNOTAVAIL, ...", NONNEG),
                    count_col("calls", "connect() calls that returned it"),
                ),
                key=("time_s", "netns", "pid", "comm", "errno"),
            ),
            _tw_connect_from_v1,
        ),
        "ep_loop": Legacy(
            Table(
                "ep_loop",
                "ep_loop.csv",
                "probes/epoll.bt",
                1,
                "Per interval, per (process, thread name) that waited in epoll.",
                (
                    PROBE_TIME,
                    Col("pid", INT, "process id", NONNEG),
                    Col("comm", STR, "thread name: " + COMM_TEXT),
                    count_col("calls", "epoll_wait/epoll_pwait/epoll_pwait2 calls that returned"),
                    count_col("nb_calls", "of them non-blocking polls (timeout 0)"),
                    count_col(
                        "nb_ns_sum", "time inside the non-blocking polls (ns): the kernel's cost of collecting events"
                    ),
                    count_col("events_sum", "events returned"),
                    count_col("ret_zero", "calls that returned no event (timeout)"),
                    count_col("ret_full", "calls that returned maxevents: a full batch, more may be waiting"),
                    count_col("errors", "calls that failed (EINTR, ...)"),
                    count_col("wait_ns_sum", "time inside blocking calls (ns): mostly waiting"),
                    count_col("wait_lt_10us", "blocking calls that returned within 10 us"),
                    count_col("wait_lt_100us", "10-100 us"),
                    count_col("wait_lt_1ms", "100 us - 1 ms"),
                    count_col("wait_lt_10ms", "1-10 ms"),
                    count_col("wait_ge_10ms", "10 ms or more"),
                    count_col("ev_1", "calls that returned 1 event"),
                    count_col("ev_2_7", "2-7 events"),
                    count_col("ev_8_63", "8-63 events"),
                    count_col("ev_ge_64", "64 or more events"),
                    count_col("ctl_add", "epoll_ctl ADD: fds registered"),
                    count_col("ctl_del", "epoll_ctl DEL: fds removed"),
                ),
                key=("time_s", "pid", "comm"),
            ),
            _ep_loop_from_v1,
        ),
    },
    3: {
        "ep_loop": Legacy(
            Table(
                "ep_loop",
                "ep_loop.csv",
                "probes/epoll.bt",
                2,
                "Per interval, per thread (process, thread id, thread name) that waited in epoll. Every column is "
                "an estimate from a random 1-in-8 sample of calls, each counting 8. Runs of contract 2 counted "
                "every call per (process, thread name): read here with tid = pid.",
                (
                    PROBE_TIME,
                    Col("pid", INT, "process id", NONNEG),
                    Col("tid", INT, "thread id (= pid in runs of contract 2)", NONNEG),
                    Col("comm", STR, "thread name: " + COMM_TEXT),
                    count_col("calls", "epoll_wait/epoll_pwait/epoll_pwait2 calls that returned"),
                    count_col("nb_calls", "of them non-blocking polls (timeout 0)"),
                    count_col(
                        "nb_ns_sum", "time inside the non-blocking polls (ns): the kernel's cost of collecting events"
                    ),
                    count_col("events_sum", "events returned"),
                    count_col("ret_zero", "calls that returned no event (timeout)"),
                    count_col("ret_full", "calls that returned maxevents: a full batch, more may be waiting"),
                    count_col("errors", "calls that failed (EINTR, ...)"),
                    count_col("wait_ns_sum", "time inside blocking calls (ns): mostly waiting"),
                ),
                key=("time_s", "pid", "tid", "comm"),
            ),
            _ep_loop_from_v2,
        ),
    },
    4: {},
    5: {"listeners": Legacy(_LISTENERS_V2, _listeners_from_v2)},
    6: {"processes": Legacy(_PROCESSES_V1, _processes_from_v1)},
    7: {},
    8: {},
    9: {},
    10: {"sock_buffers": Legacy(_SOCK_BUFFERS_V1, _sock_buffers_from_v1)},
    11: {},
    12: {},
}
# The accept-queue tables gained sock_ino in contract 10 (aq_listener's v1, contract 2, is above).
for _contract in range(2, 10):
    LEGACY_TABLES[_contract]["aq_listen"] = Legacy(_AQ_LISTEN_V1, lambda df: _aq_from_v_before_sockets(df, "aq_listen"))
    LEGACY_TABLES[_contract]["aq_accept"] = Legacy(_AQ_ACCEPT_V1, lambda df: _aq_from_v_before_sockets(df, "aq_accept"))
    if _contract > 2:
        LEGACY_TABLES[_contract]["aq_listener"] = Legacy(
            _AQ_LISTENER_V2, lambda df: _aq_from_v_before_sockets(df, "aq_listener")
        )
# listeners.csv gained sock_ino, holders and watchers in contract 10.
for _contract in range(6, 10):
    LEGACY_TABLES[_contract]["listeners"] = Legacy(_LISTENERS_V3, _listeners_from_v3)
# listeners.csv gained drops in contract 5 (and dual_stack in 6): every older contract wrote version 1.
for _contract in (2, 3, 4):
    LEGACY_TABLES[_contract]["listeners"] = Legacy(_LISTENERS_V1, _listeners_from_v1)
# processes.csv recorded a process again when its name changed from contract 13.
for _contract in range(7, 13):
    LEGACY_TABLES[_contract]["processes"] = Legacy(_PROCESSES_V2, _processes_from_v2)
# sockstat.csv gained tw_listed in contract 8: every older contract wrote version 1.
for _contract in range(2, 8):
    LEGACY_TABLES[_contract]["sockstat"] = Legacy(_SOCKSTAT_V1, _sockstat_from_v1)
# sockstat.csv gained flows_listed in contract 12.
for _contract in range(8, 12):
    LEGACY_TABLES[_contract]["sockstat"] = Legacy(_SOCKSTAT_V2, _sockstat_from_v2)
# tw_sockets.csv left out the service ports' TIME_WAIT from contract 9: every older contract wrote version 1.
for _contract in range(2, 9):
    LEGACY_TABLES[_contract]["tw_sockets"] = Legacy(_TW_SOCKETS_V1, _tw_sockets_from_v1)
