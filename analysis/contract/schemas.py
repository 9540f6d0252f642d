"""The data contract: every CSV a probe or script writes, in one place.

Each table names its file, the writer that produces it, a version, and for each
column its type, checks and meaning. Loaders validate against these schemas;
tests check that real probe output matches them; docs/data-contract.md is
generated from them (``python -m analysis schema-doc``).

Bump a table's ``version`` (and CONTRACT_VERSION) whenever a column changes
meaning, type or order; writers print the contract version they follow.

The JSON files (metadata.json with its "lab" block, doctor.json, compare.json,
verdict.json, sweep.json) have JSON Schemas in the same registry (JSON_DOCS),
validated by the loaders and documented the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import pandera.pandas as pa

# Version of the whole contract, recorded by collector/capture in metadata.json.
CONTRACT_VERSION = 4

INT = "Int64"  # nullable integer: empty cells stay <NA> instead of failing
FLOAT = "float64"
STR = "string"


# How every CSV is read (analysis/load/run.py), stated once for the doc.
CSV_RULES = (
    "Files are bytes: the loader reads them as UTF-8 and decodes a byte that is not valid UTF-8 as the "
    "four characters `\\xNN` (Python's `backslashreplace`), so nothing is lost and nothing fails to decode.",
    'Fields are RFC 4180: a field holding `,` `"` CR or LF is written in double quotes with inner quotes '
    "doubled; a quoted field may span lines. Every row, the last included, ends with a line feed.",
    "Blank lines are skipped (and noted in the report). Errors name the physical line of the file "
    "(counting the lines inside quoted fields) and the 1-based column: `file:line: column N (name): what`.",
    "int columns hold optionally signed decimal digits within int64 (a larger value is an error, never "
    "wrapped); float columns hold finite decimal numbers (`nan`, `inf` and overflow are errors); empty "
    "means missing and is allowed only where the type says `or empty`.",
    "Epoch columns must lie in 2000-2100, and inside the capture "
    "(metadata.json started_epoch - slack .. ended_epoch + slack, slack = max(5 s, 2 intervals)).",
    "A table with a key (listed under it) may not hold two rows with the same key.",
    "A probe family's files together hold exactly the rows metadata.json `probes.<family>.rows` says "
    "collector/probe-to-csv wrote; counters.csv, sockstat.csv and sysctls.csv hold rows of every sampled "
    "namespace (a complete run).",
)
COMM_TEXT = (
    "raw bytes of the kernel's task comm; quoted per RFC 4180 when it holds , \" CR or LF; "
    "invalid UTF-8 decoded as \\xNN"
)
# Inside the capture window, with this slack (s) at either end, or this many intervals if more.
TIME_SLACK_S = 5.0
TIME_SLACK_INTERVALS = 2
EPOCH_MIN, EPOCH_MAX = 946_684_800, 4_102_444_800  # 2000-01-01 .. 2100-01-01 UTC
# Tcp counters that are gauges or constants: their delta may be negative (CurrEstab) or their value -1 (MaxConn).
GAUGE_COUNTERS = frozenset({"CurrEstab", "MaxConn", "RtoAlgorithm", "RtoMin", "RtoMax"})


@dataclass(frozen=True)
class Col:
    name: str
    dtype: str
    description: str
    checks: tuple[pa.Check, ...] = ()
    nullable: bool = False


@dataclass(frozen=True)
class Table:
    name: str
    file: str
    writer: str
    version: int
    description: str
    columns: tuple[Col, ...]
    optional: bool = False  # a run may lack the file (e.g. no lab client)
    key: tuple[str, ...] = ()  # columns no two rows may share (empty: rows may repeat)

    @property
    def probe(self) -> bool:
        return self.writer.startswith("probes/")

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def schema(self) -> pa.DataFrameSchema:
        return pa.DataFrameSchema(
            {
                c.name: pa.Column(
                    c.dtype,
                    checks=list(c.checks),
                    nullable=c.nullable,
                    description=c.description,
                )
                for c in self.columns
            },
            strict=True,
            ordered=True,
            coerce=True,
            name=self.name,
        )


NONNEG = (pa.Check.ge(0),)
PORT = (pa.Check.in_range(0, 65535),)


def _count(name: str, description: str) -> Col:
    return Col(name, INT, description, NONNEG)


EPOCH = (pa.Check.in_range(EPOCH_MIN, EPOCH_MAX),)
_PROBE_TIME = Col("time_s", INT, "wall-clock second at the end of the probe interval (epoch seconds)", EPOCH)
_SAMPLE_TIME = Col("time_s", FLOAT, "wall-clock time of the sample (epoch seconds, ms resolution)", EPOCH)
_NETNS = Col(
    "netns",
    INT,
    "network namespace inode number (as in /proc/PID/ns/net; metadata.json maps names to it)",
    (pa.Check.gt(0),),
)

# Probe rows keyed by endpoint: the service port is the lower of the two ports,
# so one client's many ephemeral ports fold into one key.
_ENDPOINT_KEY = (
    _PROBE_TIME,
    _NETNS,
    Col("family", INT, "address family: 2 = IPv4, 10 = IPv6", (pa.Check.isin([2, 10]),)),
    Col("laddr", STR, "local address"),
    Col("raddr", STR, "remote address"),
    Col("service_port", INT, "the lower of the two ports (the server's, as a rule)", PORT),
    Col(
        "service_local",
        INT,
        "1 if the service port is local (we are the server), 0 if remote",
        (pa.Check.isin([0, 1]),),
    ),
)

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table(
            "aq_listen",
            "aq_listen.csv",
            "probes/accept_queue.bt",
            1,
            "One row per listen() call seen while the probe ran.",
            (
                Col("time_s", INT, "wall-clock second of the listen() call (epoch seconds)", EPOCH),
                Col("pid", INT, "process id that called listen()", NONNEG),
                Col("comm", STR, "process name: " + COMM_TEXT),
                _NETNS,
                Col("lport", INT, "local port of the listening socket", PORT),
                Col("fd", INT, "file descriptor passed to listen()", NONNEG),
                Col("backlog_requested", INT, "backlog argument the application asked for"),
                Col(
                    "limit_effective",
                    INT,
                    "sk_max_ack_backlog the kernel set: min(backlog, net.core.somaxconn); -1 if listen() failed",
                ),
                Col("ret", INT, "return value of listen() (0 or -errno)"),
            ),
        ),
        Table(
            "aq_listener",
            "aq_listener.csv",
            "probes/accept_queue.bt",
            2,
            "Per interval, per listening socket that had arrivals, accepts or a non-empty queue.",
            (
                _PROBE_TIME,
                _NETNS,
                Col("family", INT, "address family: 2 = IPv4, 10 = IPv6", (pa.Check.isin([2, 10]),)),
                Col("laddr", STR, "local address the socket listens on"),
                Col("lport", INT, "local port", PORT),
                _count("limit", "sk_max_ack_backlog: the effective accept-queue limit (read at the interval end)"),
                _count("enqueues", "connections queued on the listener this interval (sk_data_ready on LISTEN)"),
                _count("depth_max", "largest queue depth right after an enqueue this interval"),
                _count(
                    "full_events",
                    "enqueues that left the queue full (depth > limit: the kernel drops further SYNs and ACKs)",
                ),
                _count("depth_now", "queue depth at the end of the interval (like ss Recv-Q)"),
                _count("accepted", "successful accept()/accept4() on this listener this interval"),
            ),
        ),
        Table(
            "aq_accept",
            "aq_accept.csv",
            "probes/accept_queue.bt",
            1,
            "Per interval, per (process, listener): the application's accept() calls.",
            (
                _PROBE_TIME,
                Col("pid", INT, "process id calling accept", NONNEG),
                Col("comm", STR, "process name: " + COMM_TEXT),
                _NETNS,
                Col("lport", INT, "local port of the listener accepted on", PORT),
                _count("accepted", "successful accept()/accept4() calls"),
                _count("eagain", "calls that returned EAGAIN (non-blocking accept, queue empty)"),
                _count("errors", "calls that failed with another error"),
            ),
            key=("time_s", "pid", "comm", "netns", "lport"),
        ),
        Table(
            "rt_endpoint",
            "rt_endpoint.csv",
            "probes/retransmits.bt",
            1,
            "Per interval, per (namespace, local address, remote address, service port) with retransmits. "
            "The service port is the lower of the two ports, so one client's ephemeral ports fold into one row.",
            (
                *_ENDPOINT_KEY,
                _count("data_segs", "data segments retransmitted (gso_segs summed; what TcpRetransSegs adds)"),
                _count("data_events", "retransmit events for them (one event can carry many segments)"),
                _count("syn_segs", "SYN retransmits (socket in SYN_SENT)"),
                _count("synack_segs", "SYN-ACK retransmits by a listener"),
                _count(
                    "failed_events", "retransmit attempts that failed locally (err != 0; not counted by the kernel)"
                ),
            ),
            key=("time_s", "netns", "family", "laddr", "raddr", "service_port", "service_local"),
        ),
        Table(
            "rt_resets",
            "rt_resets.csv",
            "probes/retransmits.bt",
            1,
            "Per interval, per namespace with TCP resets.",
            (
                _PROBE_TIME,
                _NETNS,
                _count("rst_sent", "RSTs sent on a socket"),
                _count("rst_sent_nosock", "RSTs sent for packets that matched no socket (e.g. a closed port)"),
                _count("rst_received", "RSTs received"),
            ),
            key=("time_s", "netns"),
        ),
        Table(
            "rt_flow",
            "rt_flow.csv",
            "probes/retransmits.bt",
            1,
            "Per interval, per flow (both ports) that re-sent data: the flow's own retransmit rate is "
            "data_segs / data_segs_out. Absent in runs of contract 2.",
            (
                _PROBE_TIME,
                _NETNS,
                Col("family", INT, "address family: 2 = IPv4, 10 = IPv6", (pa.Check.isin([2, 10]),)),
                Col("laddr", STR, "local address"),
                Col("lport", INT, "local port", PORT),
                Col("raddr", STR, "remote address"),
                Col("rport", INT, "remote port", PORT),
                _count("data_segs", "data segments re-sent (tcp_skb_pcount, as TcpRetransSegs counts)"),
                _count(
                    "data_segs_out",
                    "data segments the flow sent (tcp_sock data_segs_out, re-sent ones included) since its "
                    "previous row, read at its retransmits; the first row has all it sent before",
                ),
            ),
            key=("time_s", "netns", "family", "laddr", "lport", "raddr", "rport"),
        ),
        Table(
            "tw_close",
            "tw_close.csv",
            "probes/time_wait.bt",
            2,
            "Per interval, per (namespace, local address, remote address, service port) with TCP closes. "
            "Closes are exact; lifetimes come from a 1-in-16 sample of sockets, each counting 16 (estimates).",
            (
                *_ENDPOINT_KEY,
                _count("active_closes", "ESTABLISHED -> FIN_WAIT1: this side closed first and will hold TIME_WAIT"),
                _count("passive_closes", "ESTABLISHED -> CLOSE_WAIT: the peer closed first"),
                _count("life_lt_1ms", "connections that lived < 1 ms (ESTABLISHED to CLOSE; sampled, multiples of 16)"),
                _count("life_lt_10ms", "lived 1-10 ms"),
                _count("life_lt_100ms", "lived 10-100 ms"),
                _count("life_lt_1s", "lived 100 ms - 1 s"),
                _count("life_lt_10s", "lived 1-10 s"),
                _count("life_ge_10s", "lived 10 s or more"),
                _count("life_sum_us", "sum of those lifetimes (us, sampled x 16): mean = sum / count"),
            ),
            key=("time_s", "netns", "family", "laddr", "raddr", "service_port", "service_local"),
        ),
        Table(
            "tw_connect",
            "tw_connect.csv",
            "probes/time_wait.bt",
            2,
            "Per interval, per (namespace, process, destination, errno): TCP connects that failed "
            "(SYN_SENT -> CLOSE). Runs of contract 2 counted connect() calls by errno instead: read here as "
            "their failures, with no destination (family 0, raddr empty, rport 0).",
            (
                _PROBE_TIME,
                _NETNS,
                Col(
                    "pid", INT, "process that called connect() for a local failure (EADDRNOTAVAIL); 0 otherwise", NONNEG
                ),
                Col("comm", STR, "its name (empty when pid is 0): " + COMM_TEXT, nullable=True),
                Col(
                    "family", INT, "address family: 2 = IPv4, 10 = IPv6 (0: not recorded)", (pa.Check.isin([0, 2, 10]),)
                ),
                Col("raddr", STR, "destination address (empty: not recorded)"),
                Col("rport", INT, "destination port", PORT),
                Col(
                    "errno",
                    INT,
                    "99 = EADDRNOTAVAIL (no free local port: no SYN sent), 111 = refused, 110 = timed out, ...; "
                    "0 = closed by the application before the handshake ended",
                    NONNEG,
                ),
                _count("failures", "failed connects"),
            ),
            key=("time_s", "netns", "pid", "comm", "family", "raddr", "rport", "errno"),
        ),
        Table(
            "ep_loop",
            "ep_loop.csv",
            "probes/epoll.bt",
            3,
            "Per interval, per thread (process, thread id, thread name) that waited in epoll. Every column is "
            "an estimate from a random 1-in-8 sample of calls, each counting 8. Runs of contract 2 counted "
            "every call per (process, thread name): read here with tid = pid.",
            (
                _PROBE_TIME,
                Col("pid", INT, "process id", NONNEG),
                Col("tid", INT, "thread id (= pid in runs of contract 2)", NONNEG),
                Col("comm", STR, "thread name: " + COMM_TEXT),
                _count("calls", "epoll_wait/epoll_pwait/epoll_pwait2 calls that returned"),
                _count("nb_calls", "of them non-blocking polls (timeout 0)"),
                _count("nb_ns_sum", "time inside the non-blocking polls (ns): the kernel's cost of collecting events"),
                _count("events_sum", "events returned"),
                _count("ret_zero", "calls that returned no event (timeout)"),
                _count("ret_full", "calls that returned maxevents: a full batch, more may be waiting"),
                _count("errors", "calls that failed (EINTR, ...)"),
                _count("wait_ns_sum", "time inside blocking calls (ns): mostly waiting"),
                Col(
                    "cpu_ns",
                    INT,
                    "CPU time the thread used (task sum_exec_runtime, read at its sampled calls: not an "
                    "estimate) since its previous row; empty in runs of contracts 2 and 3",
                    NONNEG,
                    nullable=True,
                ),
            ),
            key=("time_s", "pid", "tid", "comm"),
        ),
        Table(
            "counters",
            "counters.csv",
            "collector/sample-netns",
            1,
            "TcpExt and Tcp counters from /proc/net/netstat and /proc/net/snmp, per namespace. "
            "The first sample has every counter (delta empty); later samples only counters that changed.",
            (
                _SAMPLE_TIME,
                _NETNS,
                Col("group", STR, "TcpExt or Tcp", (pa.Check.isin(["TcpExt", "Tcp"]),)),
                Col("counter", STR, "counter name, e.g. ListenOverflows"),
                Col("value", INT, "value at the sample (cumulative; gauges such as CurrEstab are current)"),
                Col("delta", INT, "change since the previous sample; empty on the first sample", nullable=True),
            ),
            key=("time_s", "netns", "group", "counter"),
        ),
        Table(
            "listeners",
            "listeners.csv",
            "collector/sample-netns",
            1,
            "ss -ltnp snapshot per sample: every TCP listener of the namespace.",
            (
                _SAMPLE_TIME,
                _NETNS,
                Col("laddr", STR, "local address (* or 0.0.0.0 = any)"),
                Col("lport", INT, "local port", PORT),
                _count("recv_q", "Recv-Q: connections waiting in the accept queue now"),
                _count("send_q", "Send-Q: the accept-queue limit (sk_max_ack_backlog)"),
                Col("pid", INT, "first process holding the socket (empty if unknown)", NONNEG, nullable=True),
                Col("comm", STR, "its name (empty if unknown), as ss prints it; " + COMM_TEXT, nullable=True),
            ),
        ),
        Table(
            "sockstat",
            "sockstat.csv",
            "collector/sample-netns",
            1,
            "The TCP line of /proc/net/sockstat per sample.",
            (
                _SAMPLE_TIME,
                _NETNS,
                _count("tcp_inuse", "TCP sockets in use"),
                _count("tcp_orphan", "orphaned TCP sockets (closed by the app, not yet by the kernel)"),
                _count("tcp_tw", "TIME_WAIT sockets"),
                _count("tcp_alloc", "TCP sockets allocated"),
                _count("tcp_mem", "TCP memory in pages"),
            ),
            key=("time_s", "netns"),
        ),
        Table(
            "tw_sockets",
            "tw_sockets.csv",
            "collector/sample-netns",
            1,
            "ss -tano state time-wait per sample, grouped by (local address, remote address, service port).",
            (
                _SAMPLE_TIME,
                _NETNS,
                Col("laddr", STR, "local address"),
                Col("raddr", STR, "remote address"),
                Col("service_port", INT, "the lower of the two ports", PORT),
                Col("service_local", INT, "1 if the service port is local", (pa.Check.isin([0, 1]),)),
                _count("count", "TIME_WAIT sockets"),
                Col("timer_min_s", FLOAT, "least time left on their timewait timers (s)", NONNEG, nullable=True),
                Col("timer_max_s", FLOAT, "most time left (s)", NONNEG, nullable=True),
            ),
            key=("time_s", "netns", "laddr", "raddr", "service_port", "service_local"),
        ),
        Table(
            "sysctls",
            "sysctls.csv",
            "collector/snapshot-sysctls",
            1,
            "TCP queue sysctls of each sampled namespace at the start and end of the capture.",
            (
                Col("phase", STR, "start or end", (pa.Check.isin(["start", "end"]),)),
                _NETNS,
                Col("key", STR, "sysctl name, e.g. net.core.somaxconn"),
                Col("value", STR, "value (inner whitespace folded to one space); see the value formats below"),
            ),
            key=("phase", "netns", "key"),
        ),
        Table(
            "connects",
            "connects.csv",
            "labs/go/cmd/connload",
            2,
            "Lab load generator: one row per connection attempt (the user-visible symptom).",
            (
                Col(
                    "start_unix_ns",
                    INT,
                    "wall clock when the attempt started (ns since epoch)",
                    (pa.Check.in_range(EPOCH_MIN * 10**9, EPOCH_MAX * 10**9),),
                ),
                Col("conn_id", INT, "attempt number, in start order", NONNEG),
                _count("connect_us", "time until connect() returned, success or not (us)"),
                Col(
                    "first_byte_us",
                    INT,
                    "time from start to the server's reply (us); empty if none",
                    NONNEG,
                    nullable=True,
                ),
                Col(
                    "result",
                    STR,
                    "ok, connect_timeout, connect_refused, connect_error, reset, io_timeout, io_error",
                    (
                        pa.Check.isin(
                            [
                                "ok",
                                "connect_timeout",
                                "connect_refused",
                                "connect_error",
                                "reset",
                                "io_timeout",
                                "io_error",
                            ]
                        ),
                    ),
                ),
                Col("errno", STR, "errno name when one was available (ECONNREFUSED, ETIMEDOUT, ...)", nullable=True),
                _count("requests_ok", "request/reply exchanges completed on the connection (v2)"),
            ),
            optional=True,
            key=("conn_id",),
        ),
    )
}


# sysctls.csv values the analysis computes with, and the form each must have
# (anything else is an error naming the line, not a crash or a wrong number).
# Other keys are kept as text.
SYSCTL_FORMATS: dict[str, str] = {
    "net.core.somaxconn": "int",
    "net.ipv4.tcp_max_syn_backlog": "int",
    "net.ipv4.tcp_syncookies": "int",
    "net.ipv4.tcp_abort_on_overflow": "int",
    "net.ipv4.tcp_fin_timeout": "int",
    "net.ipv4.tcp_max_tw_buckets": "int",
    "net.ipv4.tcp_tw_reuse": "int",
    "net.ipv4.tcp_timestamps": "int",
    "net.ipv4.tcp_syn_retries": "int",
    "net.ipv4.tcp_synack_retries": "int",
    "net.ipv4.ip_local_port_range": "port_range",
}
SYSCTL_FORMAT_TEXT = {
    "int": "a non-negative decimal integer within int64",
    "port_range": "two ports `low high` separated by one space, 1 <= low <= high <= 65535",
}


# Runs written under an older data contract still load: their tables that have
# changed since are read with the definition they were written by, then
# upgraded to today's columns (what is gone is dropped; what was never recorded
# gets the "not recorded" value today's definition documents).
READABLE_CONTRACTS = (2, 3, CONTRACT_VERSION)


@dataclass(frozen=True)
class Legacy:
    table: Table
    upgrade: Callable[[pd.DataFrame], pd.DataFrame]


def _aq_listener_from_v1(df: pd.DataFrame) -> pd.DataFrame:
    return df[TABLES["aq_listener"].column_names]


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


# Tables a contract did not have: read as empty from runs of that contract.
ABSENT_IN_CONTRACT: dict[int, frozenset[str]] = {2: frozenset({"rt_flow"})}

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
                    _PROBE_TIME,
                    _NETNS,
                    Col("family", INT, "address family: 2 = IPv4, 10 = IPv6", (pa.Check.isin([2, 10]),)),
                    Col("laddr", STR, "local address the socket listens on"),
                    Col("lport", INT, "local port", PORT),
                    _count("limit", "sk_max_ack_backlog: the effective accept-queue limit"),
                    _count("enqueues", "connections queued on the listener this interval (sk_data_ready on LISTEN)"),
                    _count("depth_max", "largest queue depth right after an enqueue this interval"),
                    _count("depth_sum", "sum of depths at each enqueue (depth_sum / enqueues = mean depth seen)"),
                    _count("depth_le_25pct", "enqueues that found depth <= 25 % of the limit"),
                    _count("depth_le_50pct", "enqueues with 25 % < depth <= 50 % of the limit"),
                    _count("depth_le_75pct", "enqueues with 50 % < depth <= 75 % of the limit"),
                    _count("depth_le_100pct", "enqueues with 75 % < depth <= limit"),
                    _count(
                        "full_events",
                        "enqueues that left the queue full (depth > limit: the kernel drops further SYNs and ACKs)",
                    ),
                    _count("depth_now", "queue depth at the end of the interval (like ss Recv-Q)"),
                    _count("accepted", "successful accept()/accept4() on this listener this interval"),
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
                    *_ENDPOINT_KEY,
                    _count("active_closes", "ESTABLISHED -> FIN_WAIT1: this side closed first and will hold TIME_WAIT"),
                    _count("passive_closes", "ESTABLISHED -> CLOSE_WAIT: the peer closed first"),
                    _count("life_lt_1ms", "connections that lived < 1 ms (ESTABLISHED to CLOSE)"),
                    _count("life_lt_10ms", "lived 1-10 ms"),
                    _count("life_lt_100ms", "lived 10-100 ms"),
                    _count("life_lt_1s", "lived 100 ms - 1 s"),
                    _count("life_lt_10s", "lived 1-10 s"),
                    _count("life_ge_10s", "lived 10 s or more"),
                    _count("life_sum_us", "sum of those lifetimes (us): mean = sum / count"),
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
                    _PROBE_TIME,
                    _NETNS,
                    Col("pid", INT, "process id", NONNEG),
                    Col("comm", STR, "process name: " + COMM_TEXT),
                    Col("errno", INT, "0 = success, 115 = EINPROGRESS (non-blocking), 99 = EADDRNOTAVAIL, ...", NONNEG),
                    _count("calls", "connect() calls that returned it"),
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
                    _PROBE_TIME,
                    Col("pid", INT, "process id", NONNEG),
                    Col("comm", STR, "thread name: " + COMM_TEXT),
                    _count("calls", "epoll_wait/epoll_pwait/epoll_pwait2 calls that returned"),
                    _count("nb_calls", "of them non-blocking polls (timeout 0)"),
                    _count(
                        "nb_ns_sum", "time inside the non-blocking polls (ns): the kernel's cost of collecting events"
                    ),
                    _count("events_sum", "events returned"),
                    _count("ret_zero", "calls that returned no event (timeout)"),
                    _count("ret_full", "calls that returned maxevents: a full batch, more may be waiting"),
                    _count("errors", "calls that failed (EINTR, ...)"),
                    _count("wait_ns_sum", "time inside blocking calls (ns): mostly waiting"),
                    _count("wait_lt_10us", "blocking calls that returned within 10 us"),
                    _count("wait_lt_100us", "10-100 us"),
                    _count("wait_lt_1ms", "100 us - 1 ms"),
                    _count("wait_lt_10ms", "1-10 ms"),
                    _count("wait_ge_10ms", "10 ms or more"),
                    _count("ev_1", "calls that returned 1 event"),
                    _count("ev_2_7", "2-7 events"),
                    _count("ev_8_63", "8-63 events"),
                    _count("ev_ge_64", "64 or more events"),
                    _count("ctl_add", "epoll_ctl ADD: fds registered"),
                    _count("ctl_del", "epoll_ctl DEL: fds removed"),
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
                    _PROBE_TIME,
                    Col("pid", INT, "process id", NONNEG),
                    Col("tid", INT, "thread id (= pid in runs of contract 2)", NONNEG),
                    Col("comm", STR, "thread name: " + COMM_TEXT),
                    _count("calls", "epoll_wait/epoll_pwait/epoll_pwait2 calls that returned"),
                    _count("nb_calls", "of them non-blocking polls (timeout 0)"),
                    _count(
                        "nb_ns_sum", "time inside the non-blocking polls (ns): the kernel's cost of collecting events"
                    ),
                    _count("events_sum", "events returned"),
                    _count("ret_zero", "calls that returned no event (timeout)"),
                    _count("ret_full", "calls that returned maxevents: a full batch, more may be waiting"),
                    _count("errors", "calls that failed (EINTR, ...)"),
                    _count("wait_ns_sum", "time inside blocking calls (ns): mostly waiting"),
                ),
                key=("time_s", "pid", "tid", "comm"),
            ),
            _ep_loop_from_v2,
        ),
    },
}


def schema_doc() -> str:
    """Markdown for docs/data-contract.md, generated from TABLES."""
    out = [
        "# Data contract",
        "",
        "Generated from `analysis/contract/schemas.py` by `python -m analysis schema-doc`; do not edit by hand.",
        f"Contract version: **{CONTRACT_VERSION}** (recorded as `data_contract` in each run's `metadata.json`).",
        "",
        "Every file is CSV with a header row. Times are wall-clock epoch seconds unless a column says otherwise.",
        "",
        "## How a CSV file is read",
        "",
        *[f"- {r}" for r in CSV_RULES],
        "",
        "Text fields that can hold any byte but NUL (`comm`): " + COMM_TEXT + ".",
        "",
        "How they are made safe (escaped, not replaced): bpftrace 0.17 has no string functions, so the "
        "probes print `comm` raw in their own output (`probe_<family>.out`), and `ss -p` does the same. "
        "`comm` is the only free-text field of any record, so `collector/probe-to-csv` and "
        "`collector/sample-netns` recover it by position (in a map key: the key columns before the first "
        "counter column; a line cut by a newline in it is joined to the next) and write it quoted as "
        "above. The raw probe output is therefore not CSV to be read directly; the run directory's "
        "files are. Addresses (`ntop()`) and numbers cannot hold a comma or a quote.",
        "",
    ]
    for t in [*TABLES.values(), *DERIVED_TABLES.values()]:
        out += [
            f"## `{t.file}` (v{t.version})",
            "",
            f"{t.description} Written by `{t.writer}`." + (" Optional." if t.optional else ""),
            "",
            "| column | type | meaning |",
            "|---|---|---|",
        ]
        for c in t.columns:
            kind = {"Int64": "int", "float64": "float", "string": "text"}[c.dtype]
            out.append(f"| `{c.name}` | {kind}{' or empty' if c.nullable else ''} | {c.description} |")
        out.append("")
        if t.key:
            out += [f"Key (no two rows share it): {', '.join(f'`{k}`' for k in t.key)}.", ""]
        if t.name == "counters":
            out += [
                "`delta` must equal `value` minus the previous `value` of the same (`netns`, `counter`), and is "
                "empty exactly on a counter's first row; a negative delta is allowed only for the gauges "
                + ", ".join(sorted(GAUGE_COUNTERS))
                + ".",
                "",
            ]
        if t.name == "sysctls":
            out += ["Value formats the analysis relies on:", "", "| key | value |", "|---|---|"]
            out += [f"| `{k}` | {SYSCTL_FORMAT_TEXT[v]} |" for k, v in SYSCTL_FORMATS.items()]
            out.append("")
    for contract, tables in LEGACY_TABLES.items():
        absent = ", ".join(f"`{TABLES[n].file}`" for n in sorted(ABSENT_IN_CONTRACT.get(contract, ())))
        out += [
            f"## Runs of contract {contract}",
            "",
            *([f"Not written then, read as empty: {absent}.", ""] if absent else []),
            "Still read. These tables were laid out differently then; each is checked against its old "
            "definition, then given today's columns as its description above says: "
            + ", ".join(
                f"`{lg.table.file}` v{lg.table.version} ({', '.join(lg.table.column_names)})" for lg in tables.values()
            )
            + ".",
            "",
        ]
    out += ["# JSON files", "", *JSON_RULES, ""]
    for d in JSON_DOCS.values():
        out += [
            f"## `{d.file}` (schema v{d.version})",
            "",
            f"{d.description} Written by `{d.writer}`.",
            "",
            "| key | type | meaning |",
            "|---|---|---|",
        ]
        out += [f"| `{path}` | {kind} | {desc} |" for path, kind, desc in _json_rows(d.schema, "")]
        out.append("")
    return "\n".join(out)


# Tables the analysis derives from many runs (scripts/compare, scripts/sweep).
# They live in comparison and sweep directories, not in run directories, so
# they are kept apart from TABLES (which Run.validate_all walks).
DERIVED_TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table(
            "compare_runs",
            "runs.csv",
            "analysis/render/compare.py (python -m analysis compare)",
            1,
            "One row per lab run of a comparison and metric: the raw values the intervals are built from.",
            (
                Col("run", STR, "run directory name under runs/ (order number and profile)"),
                Col("profile", STR, "sysctl profile the run was made under"),
                Col("side", STR, "A or B", (pa.Check.isin(["A", "B"]),)),
                Col("repeat", INT, "repetition number, 1-based; A and B of one repeat ran back to back", NONNEG),
                Col("metric", STR, "metric key (see summary.csv for its label and unit)"),
                Col("value", FLOAT, "the run's value of the metric"),
            ),
        ),
        Table(
            "compare_summary",
            "summary.csv",
            "analysis/render/compare.py (python -m analysis compare)",
            1,
            "Per metric: A and B means, B - A and its bootstrap 95 % confidence interval.",
            (
                Col("metric", STR, "metric key"),
                Col("label", STR, "what the metric counts, with its unit"),
                Col("n_a", INT, "runs under profile A", NONNEG),
                Col("n_b", INT, "runs under profile B", NONNEG),
                # Empty when a side has no value for the metric (no run measured it).
                Col("a_mean", FLOAT, "mean over A runs", nullable=True),
                Col("b_mean", FLOAT, "mean over B runs", nullable=True),
                Col("diff", FLOAT, "b_mean - a_mean", nullable=True),
                Col("ci_low", FLOAT, "lower end of the 95 % bootstrap interval of the difference", nullable=True),
                Col("ci_high", FLOAT, "upper end of the 95 % bootstrap interval of the difference", nullable=True),
                Col("significant", INT, "1 if the interval excludes 0", (pa.Check.isin([0, 1]),)),
            ),
        ),
        Table(
            "aq_sweep",
            "aq_sweep.csv",
            "analysis/models.py (python -m analysis sweep)",
            1,
            "Accept-queue sweep: per point, the measured queue against the M/M/1/K prediction "
            "and the simulation, both parameterised from that point's measured rates.",
            (
                Col("point", STR, "point directory name"),
                Col("rate_offered", FLOAT, "new connections per second the load generator was asked for", NONNEG),
                Col("backlog", INT, "listen() backlog requested", NONNEG),
                Col("limit", INT, "effective accept-queue limit read by the probe (sk_max_ack_backlog)", NONNEG),
                Col(
                    "capacity_k",
                    INT,
                    "K of the model: limit + 1 queued (the kernel's full test is >) + 1 in service",
                    NONNEG,
                ),
                Col(
                    "lam",
                    FLOAT,
                    "measured attempt rate in the load window: (PassiveOpens + ListenOverflows) / s",
                    NONNEG,
                ),
                Col("mu", FLOAT, "measured accept rate while busy: accepted / service seconds", NONNEG),
                Col("rho", FLOAT, "lam / mu", NONNEG),
                Col("attempts", INT, "PassiveOpens + ListenOverflows in the load window", NONNEG),
                Col("p_measured", FLOAT, "ListenOverflows / attempts in the load window", (pa.Check.in_range(0, 1),)),
                Col("p_mm1k", FLOAT, "M/M/1/K blocking probability", (pa.Check.in_range(0, 1),)),
                Col("p_sim", FLOAT, "simulated blocking probability (ciw)", (pa.Check.in_range(0, 1),)),
                Col(
                    "p_mm1k_offered",
                    FLOAT,
                    "M/M/1/K fed the offered rate of new connections instead of the measured attempts (no retries)",
                    (pa.Check.in_range(0, 1),),
                ),
                Col(
                    "wait_ms_measured",
                    FLOAT,
                    "mean reply time minus connect time of answered connections, waits under 0.9 s (ms)",
                    nullable=True,
                ),
                Col("wait_ms_mm1k", FLOAT, "M/M/1/K mean wait in queue of accepted arrivals (ms)", NONNEG),
                Col("abs_error", FLOAT, "p_mm1k - p_measured (percentage points / 100)"),
            ),
        ),
        Table(
            "tw_sweep",
            "tw_sweep.csv",
            "analysis/models.py (python -m analysis sweep)",
            1,
            "TIME_WAIT sweep: per client rate, the measured TIME_WAIT plateau and first EADDRNOTAVAIL "
            "against TW = rate x 60 s and the knee ports / 60 s.",
            (
                Col("point", STR, "point directory name"),
                Col("rate", FLOAT, "new connections per second", NONNEG),
                Col("ports", INT, "ephemeral ports in the client's range", NONNEG),
                Col("load_s", FLOAT, "seconds of load", NONNEG),
                Col("tw_predicted", FLOAT, "min(rate x min(load, 60 s), ports)", NONNEG),
                Col("tw_measured", INT, "peak TIME_WAIT sockets toward the server (ss samples)", NONNEG),
                Col(
                    "first_fail_s_predicted",
                    FLOAT,
                    "ports / rate when that comes before the load ends; empty otherwise",
                    nullable=True,
                ),
                Col(
                    "first_fail_s_measured",
                    FLOAT,
                    "seconds from load start to the first EADDRNOTAVAIL; empty if none",
                    nullable=True,
                ),
                Col("fail_fraction_predicted", FLOAT, "share of attempts expected to fail", (pa.Check.in_range(0, 1),)),
                Col(
                    "fail_fraction_measured",
                    FLOAT,
                    "share of attempts that failed with EADDRNOTAVAIL",
                    (pa.Check.in_range(0, 1),),
                ),
            ),
        ),
    )
}


# ---------------------------------------------------------------------------
# JSON files: one JSON Schema each (draft 2020-12), validated by the loaders.

JSON_RULES = (
    "JSON files are UTF-8; a byte that is not valid UTF-8 is read as the text `\\xNN` (inside a string it "
    "becomes those four characters). `NaN`, `Infinity` and numbers beyond a double are errors (except in "
    "verdict.json, which Python writes with NaN for an undefined mean). Errors read `file:line: key.path: "
    "what is wrong`. Keys not listed are allowed (writers may add keys); listed keys must have the listed type.",
)


@dataclass(frozen=True)
class JsonDoc:
    name: str
    file: str
    writer: str
    version: int
    description: str
    schema: dict


def _t(kind: str | list[str], description: str, **kw) -> dict:
    return {"type": kind, "description": description, **kw}


def _obj(description: str, props: dict, required: tuple[str, ...] = (), **kw) -> dict:
    return {"type": "object", "description": description, "properties": props, "required": list(required), **kw}


_INODE = _t("integer", "network namespace inode", minimum=1)
_PORT = _t("integer", "TCP port", minimum=1, maximum=65535)
_NS_NAME = _t("string", "network namespace name")
_EPOCH_S = _t("number", "epoch seconds", minimum=EPOCH_MIN, maximum=EPOCH_MAX)

LAB_SCHEMA = _obj(
    "the lab that made the run (scripts/lab, labs/<lab>/lab.sh lab_json), or null for a plain capture",
    {
        "lab": _t("string", "lab name", enum=["accept-overflow", "retransmit", "time-wait", "epoll", "busy-host"]),
        "variant": _t("string", "variant name"),
        "summary": _t("string", "one line: what the variant did"),
        "command": _t("string", "the make command that repeats it"),
        "loss_pct": _t("integer", "retransmit lab: % of data packets dropped", minimum=0, maximum=100),
        "syn_loss_pct": _t("integer", "retransmit lab: % of SYNs dropped", minimum=0, maximum=100),
        "iperf3": {
            **_obj(
                "retransmit lab: iperf3's own totals, or null",
                {
                    "retransmits": _t(["integer", "null"], "retransmits iperf3 saw", minimum=0),
                    "bytes_sent": _t("integer", "bytes sent", minimum=0),
                    "bits_per_second": _t("number", "throughput", minimum=0),
                },
            ),
            "type": ["object", "null"],
        },
        "server": _obj(
            "the lab's server",
            {
                "netns": _NS_NAME,
                "netns_inode": _INODE,
                "addr": _t("string", "address it listens on"),
                "port": _PORT,
                "backlog_requested": _t("integer", "listen() backlog asked for (0 = somaxconn)", minimum=0),
                "accept_delay": _t("string", "Go duration slept per accept"),
                "accept_delay_dist": _t("string", "fixed or exp"),
                "stall_at": _t("string", "Go duration"),
                "stall_for": _t("string", "Go duration"),
                "pid": _t(["integer", "null"], "server process id", minimum=0),
                "comm": _t("string", "server process name"),
                "gomaxprocs": _t(["integer", "null"], "GOMAXPROCS of the Go server", minimum=1),
                "work": _t("string", "work per request"),
                "stats": {
                    **_obj(
                        "the server's own counts (aqserver -stats), or null",
                        {
                            "accepted": _t("integer", "connections accepted", minimum=0),
                            "handled": _t("integer", "connections handled", minimum=0),
                            "requests": _t("integer", "requests answered", minimum=0),
                            "service_seconds": _t("number", "seconds the accept loop was busy", minimum=0),
                            "accept_delay_ms": _t("number", "accept delay (ms)", minimum=0),
                        },
                    ),
                    "type": ["object", "null"],
                },
            },
        ),
        "client": _obj(
            "the lab's load generator",
            {
                "netns": _NS_NAME,
                "netns_inode": _INODE,
                "addr": _t("string", "client address"),
                "load": _t("string", "connload arguments"),
                "port_range": _t(
                    "string", "ip_local_port_range set for the client: `low high`", pattern="^[0-9]{1,5} [0-9]{1,5}$"
                ),
                "tcp_tw_reuse": _t("integer", "tcp_tw_reuse in the client namespace", minimum=0),
                "tcp_fin_timeout": _t(["integer", "null"], "tcp_fin_timeout in the client namespace", minimum=0),
                "rate_per_s": _t("number", "new connections per second", minimum=0),
                "load_seconds": _t("number", "seconds of load", minimum=0),
                "requests_per_conn": _t("integer", "requests per connection", minimum=0),
                "hold_seconds": _t("number", "seconds each connection is held", minimum=0),
                "wrk_connections": _t("integer", "wrk connections", minimum=0),
                "connects_file": _t("string", "CSV of the attempts (connects.csv)"),
            },
        ),
        "phases": _t(
            "array",
            "epoll lab: load phases",
            items=_obj(
                "one phase",
                {
                    "idle_conns": _t("integer", "idle connections held", minimum=0),
                    "start_s": _EPOCH_S,
                    "end_s": _EPOCH_S,
                    "wrk_requests_per_s": _t("number", "wrk requests per second", minimum=0),
                },
            ),
        ),
        "profile": {
            **_obj(
                "sysctl profile applied (PROFILE=), or null",
                {
                    "name": _t("string", "profile name"),
                    "skipped_global": _t("array", "global keys not applied", items={"type": "string"}),
                    "overridden_by_scenario": _t("array", "keys the variant overrode", items={"type": "string"}),
                },
            ),
            "type": ["object", "null"],
        },
    },
    ("lab", "variant"),
)

PROBE_STATUSES = ["ok", "not_runnable", "failed", "died", "killed", "running", "interrupted"]
STOP_REASONS = ["duration", "requested", "interrupted", "killed", "running", "error"]

METADATA_SCHEMA = _obj(
    "one run",
    {
        "schema_version": _t("integer", "version of this schema (1)"),
        "data_contract": _t("integer", "version of the CSV data contract the files follow"),
        "name": _t("string", "run directory name"),
        "started_at": _t("string", "ISO 8601 UTC start"),
        "started_epoch": _EPOCH_S,
        "ended_at": _t(["string", "null"], "ISO 8601 UTC end; null while running"),
        "ended_epoch": {
            **_EPOCH_S,
            "type": ["number", "null"],
            "description": "epoch seconds; null only while running",
        },
        "complete": _t(
            "boolean", "false when the capture stopped before its duration or a probe did not run to the end"
        ),
        "stop_reason": _t(
            "string",
            "duration, requested (USR1), interrupted (Ctrl-C/TERM), killed (SIGKILLed capture, reaped "
            "afterwards), running (not finished: still running or never reaped), error (the capture failed)",
            enum=STOP_REASONS,
        ),
        "duration_requested_s": _t("integer", "asked duration; 0 = until stopped", minimum=0),
        "interval_s": _t("integer", "probe and sampler interval (s)", minimum=1),
        "host": _t("string", "hostname"),
        "kernel": _t("string", "uname -r"),
        "bpftrace_version": _t("string", "bpftrace --version"),
        "command": _t("string", "command line of the capture"),
        "reaped_at": _t("string", "when a later run reaped this one (ISO 8601 UTC)"),
        "reaped_by": _t("string", "what reaped it"),
        "scope": _t(
            "string",
            "which namespaces the analysis judges (absent: all): sampled keeps only the probe rows of the sampled "
            "namespaces, and epoll threads of processes seen listening or accepting in one (for hosts that share "
            "one kernel: containers, namespace hosts; collector/capture --scope)",
            enum=["all", "sampled"],
        ),
        "netns": _t(
            "array",
            "sampled namespaces",
            minItems=1,
            items=_obj(
                "one namespace",
                {
                    "label": _t("string", "label used in reports"),
                    "name": _t(["string", "null"], "ip netns name; null for the host namespace"),
                    "inode": _INODE,
                },
                ("label", "inode"),
            ),
        ),
        "probes": {
            **_obj(
                "per probe family (accept_queue, retransmits, time_wait, epoll)",
                {},
                additionalProperties=_obj(
                    "one probe family",
                    {
                        "file": _t(["string", "null"], "probe file that ran"),
                        "tier": _t(["string", "null"], "tier that ran"),
                        "status": _t(
                            "string",
                            "how it ended: ok, not_runnable (no tier for this kernel), failed (did not attach), died "
                            "(exited early), interrupted (stopped before it had attached), killed (capture SIGKILLed), "
                            "running (capture not finished)",
                            enum=PROBE_STATUSES,
                        ),
                        "rows": _t("integer", "CSV rows collector/probe-to-csv wrote for it", minimum=0),
                        "recursion_misses": _t(["integer", "null"], "events the kernel skipped", minimum=0),
                        "note": _t("string", "why it did not run, or what went wrong"),
                    },
                    ("status", "rows"),
                ),
            ),
            "propertyNames": {"enum": ["accept_queue", "retransmits", "time_wait", "epoll"]},
        },
        "lab": {**LAB_SCHEMA, "type": ["object", "null"]},
    },
    (
        "schema_version",
        "data_contract",
        "name",
        "started_epoch",
        "ended_epoch",
        "complete",
        "stop_reason",
        "interval_s",
        "netns",
        "probes",
    ),
)

DOCTOR_SCHEMA = _obj(
    "what this kernel can trace",
    {
        "schema_version": _t("integer", "version of this schema (1)", const=1),
        "checked_at": _t("string", "ISO 8601 UTC"),
        "kernel": _t("string", "uname -r"),
        "boot_id": _t("string", "boot id"),
        "btf": _t("boolean", "kernel BTF present"),
        "tracefs": _t(["string", "null"], "tracefs mount point"),
        "bpftrace_version": _t(["string", "null"], "bpftrace --version"),
        "root": _t("boolean", "ran as root"),
        "probe_types": _obj(
            "per probe type (tracepoint, kprobe, kfunc)",
            {},
            additionalProperties=_obj(
                "one probe type",
                {
                    "attaches": _t("boolean", "a trivial program attached"),
                    "error": _t(["string", "null"], "the error when not"),
                },
                ("attaches",),
            ),
        ),
        "probes": _obj(
            "per probe file",
            {},
            additionalProperties=_obj(
                "one probe",
                {
                    "tier": _t("string", "its tier"),
                    "runnable": _t("boolean", "its needs are met"),
                    "missing": _t("array", "needs not met", items={"type": "string"}),
                },
                ("tier", "runnable"),
            ),
        ),
    },
    ("schema_version", "probe_types", "probes"),
)

COMPARE_SCHEMA = _obj(
    "what a comparison compares",
    {
        "lab": _t("string", "lab"),
        "variant": _t("string", "variant"),
        "a": _t("string", "profile A"),
        "b": _t("string", "profile B"),
        "repeat": _t("integer", "runs per side", minimum=1),
        "overrides": _obj("--set KEY=VALUE given", {}, additionalProperties={"type": "string"}),
        "command": _t("string", "the scripts/compare command"),
        "runs": _t(
            "array",
            "finished runs, in order",
            items=_obj(
                "one run",
                {
                    "run": _t("string", "directory under runs/", pattern="^[^/]+$"),
                    "profile": _t("string", "profile"),
                    "side": _t("string", "A or B", enum=["A", "B"]),
                    "repeat": _t("integer", "repetition, 1-based", minimum=1),
                },
                ("run", "profile", "side", "repeat"),
            ),
        ),
    },
    ("lab", "variant", "a", "b", "repeat", "runs"),
)

_METRIC_RESULT = _obj(
    "one metric",
    {
        "metric": _t("string", "metric key"),
        "label": _t("string", "label"),
        "n_a": _t("integer", "runs under A", minimum=0),
        "n_b": _t("integer", "runs under B", minimum=0),
        "a_mean": _t(["number", "null"], "mean over A (null: no A run measured it)"),
        "b_mean": _t(["number", "null"], "mean over B (null: no B run measured it)"),
        "diff": _t(["number", "null"], "b_mean - a_mean"),
        "ci_low": _t(["number", "null"], "95 % interval, low"),
        "ci_high": _t(["number", "null"], "95 % interval, high"),
        "significant": _t("boolean", "interval excludes 0 (and Welch agrees)"),
        "outcome": _t("string", "verdict key", enum=["no_difference", "removes", "improves", "worsens"]),
        "better": _t("string", "which way is better", enum=["lower", "higher"]),
    },
    ("metric", "significant", "outcome"),
)

VERDICT_SCHEMA = _obj(
    "the comparison's verdict",
    {
        "lab": _t("string", "lab"),
        "variant": _t("string", "variant"),
        "a": _t("string", "profile A"),
        "b": _t("string", "profile B"),
        "repeat": _t("integer", "runs per side", minimum=1),
        "overrides": _t("object", "--set KEY=VALUE given"),
        "headline": {**_METRIC_RESULT, "type": ["object", "null"], "description": "the headline metric"},
        "others": _t("array", "other significant metrics", items=_METRIC_RESULT),
        "metrics": _t("array", "every metric", items=_METRIC_RESULT),
        "profile_caveats": _t("array", "what a profile could not set", items={"type": "string"}),
    },
    ("lab", "variant", "headline", "metrics"),
)

SWEEP_SCHEMA = _obj(
    "what a sweep swept",
    {
        "kind": _t("string", "accept-queue or time-wait", enum=["accept-queue", "time-wait"]),
        "rates": _t("array", "rates (conn/s)", items={"type": "number", "minimum": 0}),
        "backlogs": _t("array", "backlogs", items={"type": "integer", "minimum": 0}),
        "seconds": _t("number", "seconds of load per point", minimum=0),
        "ports": _t("integer", "client ports (time-wait)", minimum=1, maximum=65535),
        "command": _t("string", "the scripts/sweep command"),
    },
    ("kind",),
)

JSON_DOCS: dict[str, JsonDoc] = {
    d.name: d
    for d in (
        JsonDoc(
            "metadata",
            "metadata.json",
            "collector/capture (its lab block: scripts/lab and labs/<lab>/lab.sh lab_json)",
            1,
            "One per run directory: when and how the run was captured, which probes ran and how they ended. "
            "`schema_version` must be 1 and `data_contract` the contract version above; a run with "
            "`stop_reason` running (or `ended_epoch` null) is refused until reaped (`collector/capture --reap`). "
            "A run with `complete` false still loads: missing tables are read as empty and the report says so.",
            METADATA_SCHEMA,
        ),
        JsonDoc(
            "doctor",
            "doctor.json",
            "collector/doctor (a copy in each run directory)",
            1,
            "What the kernel could trace when the run was captured.",
            DOCTOR_SCHEMA,
        ),
        JsonDoc(
            "compare", "compare.json", "scripts/compare", 1, "A comparison directory's configuration.", COMPARE_SCHEMA
        ),
        JsonDoc(
            "compare_verdict",
            "verdict.json",
            "analysis/render/compare.py (python -m analysis compare)",
            1,
            "A comparison's verdict.",
            VERDICT_SCHEMA,
        ),
        JsonDoc("sweep", "sweep.json", "scripts/sweep", 1, "A sweep directory's configuration.", SWEEP_SCHEMA),
    )
}


def _json_rows(schema: dict, path: str) -> list[tuple[str, str, str]]:
    """(key path, type, meaning) rows for the doc, depth first."""
    rows: list[tuple[str, str, str]] = []
    required = set(schema.get("required", []))
    for key, sub in schema.get("properties", {}).items():
        p = f"{path}.{key}" if path else key
        rows.append((p, _json_kind(sub, key in required), _json_desc(sub)))
        rows += _json_children(sub, p)
    return rows


def _json_children(sub: dict, p: str) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    if sub.get("properties"):
        rows += _json_rows(sub, p)
    extra = sub.get("additionalProperties")
    if isinstance(extra, dict):
        rows.append((f"{p}.*", _json_kind(extra, True), _json_desc(extra)))
        rows += _json_children(extra, f"{p}.*")
    items = sub.get("items")
    if isinstance(items, dict) and items.get("properties"):
        rows += _json_rows(items, f"{p}[]")
    return rows


def _json_kind(sub: dict, required: bool) -> str:
    kinds = sub.get("type", "any")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    text = " or ".join(kinds)
    items = sub.get("items")
    if "array" in kinds and isinstance(items, dict) and "type" in items and not items.get("properties"):
        text = text.replace("array", f"array of {items['type']}")
    return text + ("" if required else " (optional)")


def _json_desc(sub: dict) -> str:
    d = sub.get("description", "")
    bounds = []
    if "enum" in sub:
        bounds.append("one of " + ", ".join(f"`{e}`" for e in sub["enum"]))
    if "const" in sub:
        bounds.append(f"= {sub['const']}")
    if "minimum" in sub and "maximum" in sub:
        bounds.append(f"{sub['minimum']}..{sub['maximum']}")
    elif "minimum" in sub:
        bounds.append(f">= {sub['minimum']}")
    if "pattern" in sub:
        bounds.append(f"matches `{sub['pattern']}`")
    if "minItems" in sub:
        bounds.append(f"at least {sub['minItems']}")
    return d + (f" ({'; '.join(bounds)})" if bounds else "")
