"""The data contract: every CSV a probe or script writes, in one place.

Each table names its file, the writer that produces it, a version, and for each
column its type, checks and meaning. Loaders validate against these schemas;
tests check that real probe output matches them; docs/data-contract.md is
generated from them (``python -m analysis schema-doc``).

Bump a table's ``version`` (and CONTRACT_VERSION) whenever a column changes
meaning, type or order; writers print the contract version they follow.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandera.pandas as pa

# Version of the whole contract, recorded by scripts/capture in metadata.json.
CONTRACT_VERSION = 2

INT = "Int64"  # nullable integer: empty cells stay <NA> instead of failing
FLOAT = "float64"
STR = "string"


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


_PROBE_TIME = Col("time_s", INT, "wall-clock second at the end of the probe interval (epoch seconds)", NONNEG)
_SAMPLE_TIME = Col("time_s", FLOAT, "wall-clock time of the sample (epoch seconds, ms resolution)", NONNEG)
_NETNS = Col(
    "netns",
    INT,
    "network namespace inode number (as in /proc/PID/ns/net; metadata.json maps names to it)",
    NONNEG,
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
                Col("time_s", INT, "wall-clock second of the listen() call (epoch seconds)", NONNEG),
                Col("pid", INT, "process id that called listen()", NONNEG),
                Col("comm", STR, "process name (task comm)"),
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
        Table(
            "aq_accept",
            "aq_accept.csv",
            "probes/accept_queue.bt",
            1,
            "Per interval, per (process, listener): the application's accept() calls.",
            (
                _PROBE_TIME,
                Col("pid", INT, "process id calling accept", NONNEG),
                Col("comm", STR, "process name"),
                _NETNS,
                Col("lport", INT, "local port of the listener accepted on", PORT),
                _count("accepted", "successful accept()/accept4() calls"),
                _count("eagain", "calls that returned EAGAIN (non-blocking accept, queue empty)"),
                _count("errors", "calls that failed with another error"),
            ),
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
        ),
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
        ),
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
                Col("comm", STR, "process name"),
                Col("errno", INT, "0 = success, 115 = EINPROGRESS (non-blocking), 99 = EADDRNOTAVAIL, ...", NONNEG),
                _count("calls", "connect() calls that returned it"),
            ),
        ),
        Table(
            "ep_loop",
            "ep_loop.csv",
            "probes/epoll.bt",
            1,
            "Per interval, per (process, thread name) that waited in epoll.",
            (
                _PROBE_TIME,
                Col("pid", INT, "process id", NONNEG),
                Col("comm", STR, "thread name"),
                _count("calls", "epoll_wait/epoll_pwait/epoll_pwait2 calls that returned"),
                _count("nb_calls", "of them non-blocking polls (timeout 0)"),
                _count("nb_ns_sum", "time inside the non-blocking polls (ns): the kernel's cost of collecting events"),
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
        ),
        Table(
            "counters",
            "counters.csv",
            "scripts/sample-netns",
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
        ),
        Table(
            "listeners",
            "listeners.csv",
            "scripts/sample-netns",
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
                Col("comm", STR, "its name (empty if unknown)", nullable=True),
            ),
        ),
        Table(
            "sockstat",
            "sockstat.csv",
            "scripts/sample-netns",
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
        ),
        Table(
            "tw_sockets",
            "tw_sockets.csv",
            "scripts/sample-netns",
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
        ),
        Table(
            "sysctls",
            "sysctls.csv",
            "scripts/snapshot-sysctls",
            1,
            "TCP queue sysctls of each sampled namespace at the start and end of the capture.",
            (
                Col("phase", STR, "start or end", (pa.Check.isin(["start", "end"]),)),
                _NETNS,
                Col("key", STR, "sysctl name, e.g. net.core.somaxconn"),
                Col("value", STR, "value (inner whitespace folded to one space)"),
            ),
        ),
        Table(
            "connects",
            "connects.csv",
            "labs/go/cmd/connload",
            2,
            "Lab load generator: one row per connection attempt (the user-visible symptom).",
            (
                Col("start_unix_ns", INT, "wall clock when the attempt started (ns since epoch)", NONNEG),
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
        ),
    )
}


def schema_doc() -> str:
    """Markdown for docs/data-contract.md, generated from TABLES."""
    out = [
        "# Data contract",
        "",
        "Generated from `analysis/schemas.py` by `python -m analysis schema-doc`; do not edit by hand.",
        f"Contract version: **{CONTRACT_VERSION}** (recorded as `data_contract` in each run's `metadata.json`).",
        "",
        "Every file is CSV with a header row. Times are wall-clock epoch seconds unless a column says otherwise.",
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
            "analysis/compare.py (python -m analysis compare)",
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
            "analysis/compare.py (python -m analysis compare)",
            1,
            "Per metric: A and B means, B - A and its bootstrap 95 % confidence interval.",
            (
                Col("metric", STR, "metric key"),
                Col("label", STR, "what the metric counts, with its unit"),
                Col("n_a", INT, "runs under profile A", NONNEG),
                Col("n_b", INT, "runs under profile B", NONNEG),
                Col("a_mean", FLOAT, "mean over A runs"),
                Col("b_mean", FLOAT, "mean over B runs"),
                Col("diff", FLOAT, "b_mean - a_mean"),
                Col("ci_low", FLOAT, "lower end of the 95 % bootstrap interval of the difference"),
                Col("ci_high", FLOAT, "upper end of the 95 % bootstrap interval of the difference"),
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
