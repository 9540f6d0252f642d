"""The CSV tables of a run directory: every file a probe or sampler writes, in one place.

Each table names its file, the writer that produces it, a version, and for each
column its type, checks and meaning. Loaders validate against these tables;
tests check that real probe output matches them; docs/data-contract.md is
generated from them (``python -m analysis schema-doc``).

Bump a table's ``version`` (and CONTRACT_VERSION) whenever a column changes
meaning, type or order; writers print the contract version they follow.
"""

from __future__ import annotations

import pandera.pandas as pa

from .columns import (
    COMM_TEXT,
    ENDPOINT_KEY,
    EPOCH,
    EPOCH_MAX,
    EPOCH_MIN,
    FLOAT,
    INT,
    NETNS,
    NONNEG,
    PORT,
    PROBE_TIME,
    SAMPLE_TIME,
    STR,
    Col,
    Table,
    count_col,
)

# Version of the whole contract, recorded by collector/capture in metadata.json.
CONTRACT_VERSION = 11


# How every CSV is read (analysis/load), stated once for the doc.
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
# Inside the capture window, with this slack (s) at either end, or this many intervals if more.
TIME_SLACK_S = 5.0
TIME_SLACK_INTERVALS = 2
# Tcp counters that are gauges or constants: their delta may be negative (CurrEstab) or their value -1 (MaxConn).
GAUGE_COUNTERS = frozenset({"CurrEstab", "MaxConn", "RtoAlgorithm", "RtoMin", "RtoMax"})
# Which listening socket a probe row is about: one member of a SO_REUSEPORT group is not the group.
SOCK_INO = Col(
    "sock_ino",
    INT,
    "the listening socket's inode (ss -e ino:, listeners.csv sock_ino); 0: not known (a kernel socket, or a "
    "run of contract 9 or older, whose rows of one address and port may be several sockets)",
    NONNEG,
)

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table(
            "aq_listen",
            "aq_listen.csv",
            "probes/accept_queue.bt",
            2,
            "One row per listen() call seen while the probe ran.",
            (
                Col("time_s", INT, "wall-clock second of the listen() call (epoch seconds)", EPOCH),
                Col("pid", INT, "process id that called listen()", NONNEG),
                Col("comm", STR, "process name: " + COMM_TEXT),
                NETNS,
                Col("lport", INT, "local port of the listening socket", PORT),
                SOCK_INO,
                Col("fd", INT, "file descriptor passed to listen()", NONNEG),
                Col("backlog_requested", INT, "backlog argument the application asked for"),
                Col(
                    "limit_effective",
                    INT,
                    "sk_max_ack_backlog the kernel set: min(backlog, net.core.somaxconn); -1 if listen() failed",
                ),
                Col("ret", INT, "return value of listen() (0 or -errno)"),
                Col(
                    "reuseport",
                    INT,
                    "1: the socket had SO_REUSEPORT set when listen() was called (it may join a group of sockets "
                    "on one address and port); 0: not; empty: a run of contract 9 or older",
                    (pa.Check.isin([0, 1]),),
                    nullable=True,
                ),
            ),
        ),
        Table(
            "aq_listener",
            "aq_listener.csv",
            "probes/accept_queue.bt",
            3,
            "Per interval, per listening socket that had arrivals, accepts or a non-empty queue. Each member "
            "of a SO_REUSEPORT group (sockets sharing an address and port) is a row of its own, told apart "
            "by sock_ino.",
            (
                PROBE_TIME,
                NETNS,
                Col("family", INT, "address family: 2 = IPv4, 10 = IPv6", (pa.Check.isin([2, 10]),)),
                Col("laddr", STR, "local address the socket listens on"),
                Col("lport", INT, "local port", PORT),
                SOCK_INO,
                count_col("limit", "sk_max_ack_backlog: the effective accept-queue limit (read at the interval end)"),
                count_col("enqueues", "connections queued on the listener this interval (sk_data_ready on LISTEN)"),
                count_col("depth_max", "largest queue depth right after an enqueue this interval"),
                count_col(
                    "full_events",
                    "enqueues that left the queue full (depth > limit: the kernel drops further SYNs and ACKs)",
                ),
                count_col("depth_now", "queue depth at the end of the interval (like ss Recv-Q)"),
                count_col("accepted", "successful accept()/accept4() on this listener this interval"),
            ),
        ),
        Table(
            "aq_accept",
            "aq_accept.csv",
            "probes/accept_queue.bt",
            2,
            "Per interval, per (process, listening socket): the application's accept() calls.",
            (
                PROBE_TIME,
                Col("pid", INT, "process id calling accept", NONNEG),
                Col("comm", STR, "process name: " + COMM_TEXT),
                NETNS,
                Col("lport", INT, "local port of the listener accepted on", PORT),
                SOCK_INO,
                count_col("accepted", "successful accept()/accept4() calls"),
                count_col("eagain", "calls that returned EAGAIN (non-blocking accept, queue empty)"),
                count_col("errors", "calls that failed with another error"),
            ),
            key=("time_s", "pid", "comm", "netns", "lport", "sock_ino"),
        ),
        Table(
            "rt_endpoint",
            "rt_endpoint.csv",
            "probes/retransmits.bt",
            1,
            "Per interval, per (namespace, local address, remote address, service port) with retransmits. "
            "The service port is the lower of the two ports, so one client's ephemeral ports fold into one row.",
            (
                *ENDPOINT_KEY,
                count_col(
                    "data_segs",
                    "data segments retransmitted (gso_segs summed; what TcpRetransSegs adds, including "
                    "those dropped below TCP after the kernel counted them)",
                ),
                count_col("data_events", "retransmit events for them (one event can carry many segments)"),
                count_col("syn_segs", "SYN retransmits (socket in SYN_SENT)"),
                count_col("synack_segs", "SYN-ACK retransmits by a listener"),
                count_col(
                    "failed_events",
                    "retransmit attempts that failed locally (err != 0; the kernel counts those that "
                    "failed after it built the segment in TcpExtTCPRetransFail and TcpRetransSegs)",
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
                PROBE_TIME,
                NETNS,
                count_col("rst_sent", "RSTs sent on a socket"),
                count_col("rst_sent_nosock", "RSTs sent for packets that matched no socket (e.g. a closed port)"),
                count_col("rst_received", "RSTs received"),
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
                PROBE_TIME,
                NETNS,
                Col("family", INT, "address family: 2 = IPv4, 10 = IPv6", (pa.Check.isin([2, 10]),)),
                Col("laddr", STR, "local address"),
                Col("lport", INT, "local port", PORT),
                Col("raddr", STR, "remote address"),
                Col("rport", INT, "remote port", PORT),
                count_col("data_segs", "data segments re-sent (tcp_skb_pcount, as TcpRetransSegs counts)"),
                count_col(
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
                *ENDPOINT_KEY,
                count_col("active_closes", "ESTABLISHED -> FIN_WAIT1: this side closed first and will hold TIME_WAIT"),
                count_col("passive_closes", "ESTABLISHED -> CLOSE_WAIT: the peer closed first"),
                count_col(
                    "life_lt_1ms", "connections that lived < 1 ms (ESTABLISHED to CLOSE; sampled, multiples of 16)"
                ),
                count_col("life_lt_10ms", "lived 1-10 ms"),
                count_col("life_lt_100ms", "lived 10-100 ms"),
                count_col("life_lt_1s", "lived 100 ms - 1 s"),
                count_col("life_lt_10s", "lived 1-10 s"),
                count_col("life_ge_10s", "lived 10 s or more"),
                count_col("life_sum_us", "sum of those lifetimes (us, sampled x 16): mean = sum / count"),
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
                PROBE_TIME,
                NETNS,
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
                count_col("failures", "failed connects"),
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
            "sb_flow",
            "sb_flow.csv",
            "probes/socket_buffers.bt",
            1,
            "Per interval, per TCP socket (its local and remote address and port) whose writes found the send "
            "buffer full or the sender held back, or whose reads left the receive buffer half full or the window "
            "closed, or had a receive buffer pinned by SO_RCVBUF; only such writes and reads are counted (a "
            "healthy flow has no row). A flow between two local namespaces has a row from its writer's socket "
            "and one from its reader's. Absent in runs of contract 9 or older.",
            (
                PROBE_TIME,
                NETNS,
                Col("family", INT, "address family: 2 = IPv4, 10 = IPv6", (pa.Check.isin([2, 10]),)),
                Col("laddr", STR, "local address"),
                Col("lport", INT, "local port", PORT),
                Col("raddr", STR, "remote address"),
                Col("rport", INT, "remote port", PORT),
                count_col(
                    "limited_writes",
                    "writes (sendmsg returns) that found the send buffer full or the flow limited: the sum of the "
                    "two columns below, less writes counted in both",
                ),
                count_col(
                    "writes_blocked",
                    "non-blocking writes that returned EAGAIN: the send buffer was full (a blocking writer sleeps "
                    "instead, and is not counted)",
                ),
                count_col(
                    "writes_rwnd_limited",
                    "writes while the flow's tcp_info chrono said rwnd_limited: the peer's receive window held the "
                    "sender back",
                ),
                count_col(
                    "writes_sndbuf_limited",
                    "writes while the chrono said sndbuf_limited: the send buffer was the limit",
                ),
                count_col("sndbuf_locked_writes", "of limited_writes, those on a socket whose SO_SNDBUF was set"),
                count_col("sndbuf_sum", "sk_sndbuf (bytes) summed over limited_writes: / limited_writes = its mean"),
                count_col(
                    "wqueue_sum",
                    "sk_wmem_queued (bytes queued to send, unacknowledged included) summed over limited_writes",
                ),
                count_col(
                    "noted_reads",
                    "reads (recvmsg calls that returned data) that left the receive queue at least half the buffer "
                    "(payload bytes x 2 >= sk_rcvbuf) or the window closed, or on a socket whose SO_RCVBUF was set",
                ),
                count_col(
                    "reads_zero_window",
                    "reads after which the window last advertised (tcp_sock rcv_wnd) was still 0: the read did not "
                    "free enough to reopen it",
                ),
                count_col("reads_half_full", "reads that left the receive queue at least half the buffer"),
                count_col(
                    "rcvbuf_locked_reads",
                    "of noted_reads, those on a socket whose SO_RCVBUF was set (receive autotuning off)",
                ),
                count_col("rcvbuf_sum", "sk_rcvbuf (bytes) summed over noted_reads: / noted_reads = its mean"),
                count_col(
                    "rcvq_sum",
                    "bytes the reader left queued after each of noted_reads (rcv_nxt - copied_seq), summed: / "
                    "noted_reads = its mean",
                ),
            ),
            key=("time_s", "netns", "family", "laddr", "lport", "raddr", "rport"),
        ),
        Table(
            "counters",
            "counters.csv",
            "collector/sample-netns",
            1,
            "TcpExt and Tcp counters from /proc/net/netstat and /proc/net/snmp, per namespace. "
            "The first sample has every counter (delta empty); later samples only counters that changed.",
            (
                SAMPLE_TIME,
                NETNS,
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
            4,
            "ss -tnme state listening per sample: every TCP listening socket of the namespace (each member of a "
            "SO_REUSEPORT group a row of its own), with the kernel's own count of what it dropped; the processes "
            "holding it from ss -p, matched by socket inode (since contract 9 asked when the listeners change, "
            "again 1, 2, 4 ... s later, then once a minute, not at every sample: ss -p reads every open file of "
            "the host).",
            (
                SAMPLE_TIME,
                NETNS,
                Col("laddr", STR, "local address (* or 0.0.0.0 = any)"),
                Col("lport", INT, "local port", PORT),
                count_col("recv_q", "Recv-Q: connections waiting in the accept queue now"),
                count_col("send_q", "Send-Q: the accept-queue limit (sk_max_ack_backlog)"),
                Col("pid", INT, "first process holding the socket (empty if unknown)", NONNEG, nullable=True),
                Col("comm", STR, "its name (empty if unknown), as ss prints it; " + COMM_TEXT, nullable=True),
                Col(
                    "drops",
                    INT,
                    "the listener's sk_drops (ss -m skmem d): SYNs and final ACKs it dropped since it was "
                    "created, raised by tcp_listendrop() with the namespace's ListenDrops (empty: not shown "
                    "by this kernel, or a run of contract 4 or older)",
                    NONNEG,
                    nullable=True,
                ),
                Col(
                    "dual_stack",
                    INT,
                    "1: an IPv6 wildcard that takes IPv4 clients too (ss prints it as *; laddr is ::, and its "
                    "IPv4 clients are ::ffff:a.b.c.d to it), 0: any other listener (an IPV6_V6ONLY [::] "
                    "included); empty: a run of contract 5 or older",
                    (pa.Check.isin([0, 1]),),
                    nullable=True,
                ),
                Col(
                    "sock_ino",
                    INT,
                    "the socket's inode (ss -e ino:), the probes' sock_ino: which socket this row is (empty: a "
                    "run of contract 9 or older)",
                    NONNEG,
                    nullable=True,
                ),
                Col(
                    "holders",
                    STR,
                    "every process holding the socket (ss -p), distinct pids separated by spaces, first one "
                    "first (empty if unknown, or a run of contract 9 or older)",
                    (pa.Check.str_matches(r"^[0-9]+( [0-9]+)*$"),),
                    nullable=True,
                ),
                Col(
                    "watchers",
                    STR,
                    "when several processes hold it: those whose epoll set watches it (/proc/PID/fdinfo of their "
                    "epoll fds), the ones that accept from it; `-` when none does; empty when one process holds "
                    "it (that one is its owner), or not looked up",
                    (pa.Check.str_matches(r"^(-|[0-9]+( [0-9]+)*)$"),),
                    nullable=True,
                ),
            ),
        ),
        Table(
            "sockstat",
            "sockstat.csv",
            "collector/sample-netns",
            2,
            "The TCP line of /proc/net/sockstat per sample, and whether the sample listed the TIME_WAIT "
            "sockets into tw_sockets.csv.",
            (
                SAMPLE_TIME,
                NETNS,
                count_col("tcp_inuse", "TCP sockets in use"),
                count_col("tcp_orphan", "orphaned TCP sockets (closed by the app, not yet by the kernel)"),
                count_col("tcp_tw", "TIME_WAIT sockets"),
                count_col("tcp_alloc", "TCP sockets allocated"),
                count_col("tcp_mem", "TCP memory in pages"),
                Col(
                    "tw_listed",
                    INT,
                    "1: tw_sockets.csv holds this sample's TIME_WAIT table (no row there means none on an ephemeral "
                    "port); 0: not "
                    "listed at this sample. Listing costs per socket, so above sample-netns --tw-per-sample "
                    "(default 2048) TIME_WAIT sockets in the namespace only every ceil(tcp_tw / that)-th "
                    "sample lists them. Runs of contract 7 or older listed every sample (1)",
                    (pa.Check.isin([0, 1]),),
                ),
            ),
            key=("time_s", "netns"),
        ),
        Table(
            "tw_sockets",
            "tw_sockets.csv",
            "collector/sample-netns",
            2,
            "ss -tano state time-wait at the samples sockstat.csv marks tw_listed, the sockets on an ephemeral "
            "local port only (the namespace's ip_local_port_range: the ports a client runs out of; a server "
            "that closes first holds its TIME_WAIT on its service port, left out since contract 9), grouped "
            "by (local address, remote address, service port).",
            (
                SAMPLE_TIME,
                NETNS,
                Col("laddr", STR, "local address"),
                Col("raddr", STR, "remote address"),
                Col("service_port", INT, "the lower of the two ports", PORT),
                Col("service_local", INT, "1 if the service port is local", (pa.Check.isin([0, 1]),)),
                count_col("count", "TIME_WAIT sockets"),
                Col("timer_min_s", FLOAT, "least time left on their timewait timers (s)", NONNEG, nullable=True),
                Col("timer_max_s", FLOAT, "most time left (s)", NONNEG, nullable=True),
            ),
            key=("time_s", "netns", "laddr", "raddr", "service_port", "service_local"),
        ),
        Table(
            "threads",
            "threads.csv",
            "collector/sample-netns",
            1,
            "Per sample, every thread of every process holding a listener of the namespace (ss -p): the "
            "scheduler's own clocks from /proc/PID/task/TID/schedstat. A loop's CPU share comes from here "
            "when its thread is listed (the epoll probe reads the clock only at its sampled calls).",
            (
                SAMPLE_TIME,
                NETNS,
                Col("pid", INT, "process id (the host's)", NONNEG),
                Col("tid", INT, "thread id", NONNEG),
                Col("comm", STR, "thread name at the sample: " + COMM_TEXT, nullable=True),
                Col("cpu_ns", INT, "time on a CPU since the thread started (ns; schedstat field 1)", NONNEG),
                Col("runq_ns", INT, "time runnable, waiting for a CPU (ns; schedstat field 2)", NONNEG),
            ),
            key=("time_s", "netns", "pid", "tid"),
        ),
        Table(
            "sock_buffers",
            "sock_buffers.csv",
            "collector/sample-netns",
            2,
            "ss -tinm state established per sample: each TCP flow that sent since the previous listing (its "
            "busy clock moved), re-sent or had a re-sent segment reported twice, is new, or holds unread data; "
            "at the first listing every flow (the baseline the "
            "capture's deltas start from). The clocks and byte counts are the kernel's own (tcp_info), "
            "cumulative since the flow began. Above sample-netns --flows-per-sample (default 2048) sockets in "
            "the namespace, only about one sample in ceil(inuse / that) lists the flows. Absent in runs of "
            "contract 9 or older, and in contract-10 runs made before the sampler listed flows.",
            (
                SAMPLE_TIME,
                NETNS,
                Col("laddr", STR, "local address"),
                Col("lport", INT, "local port", PORT),
                Col("raddr", STR, "remote address"),
                Col("rport", INT, "remote port", PORT),
                count_col("recv_q", "Recv-Q: bytes received and not yet read by the application"),
                count_col("send_q", "Send-Q: bytes written and not yet acknowledged by the peer"),
                Col("rmem", INT, "skmem r: receive memory in use (bytes; empty: not shown)", NONNEG, nullable=True),
                Col(
                    "rcvbuf",
                    INT,
                    "skmem rb: the receive buffer's size (sk_rcvbuf, bytes; autotuned unless SO_RCVBUF was set)",
                    NONNEG,
                    nullable=True,
                ),
                Col("wqueue", INT, "skmem w: bytes queued to send (sk_wmem_queued)", NONNEG, nullable=True),
                Col("sndbuf", INT, "skmem tb: the send buffer's size (sk_sndbuf, bytes)", NONNEG, nullable=True),
                Col("drops", INT, "skmem d: packets the socket dropped (sk_drops)", NONNEG, nullable=True),
                count_col("busy_ms", "tcp_info busy time: the flow had data to send (ms, cumulative)"),
                count_col(
                    "rwnd_limited_ms",
                    "of busy_ms, the time the peer's receive window held the sender back (ms, cumulative)",
                ),
                count_col(
                    "sndbuf_limited_ms",
                    "of busy_ms, the time the send buffer was the limit (ms, cumulative)",
                ),
                Col("rtt_ms", FLOAT, "smoothed RTT (ms; empty: not shown)", NONNEG, nullable=True),
                Col("minrtt_ms", FLOAT, "the least RTT seen: the path's (ms; empty: not shown)", NONNEG, nullable=True),
                Col(
                    "snd_wnd",
                    INT,
                    "the peer's advertised window as the sender holds it (bytes); empty: ss printed none (0, or a "
                    "kernel or ss without it)",
                    NONNEG,
                    nullable=True,
                ),
                count_col("notsent", "bytes written and not yet sent"),
                count_col("bytes_acked", "bytes the peer acknowledged (cumulative)"),
                count_col("bytes_received", "bytes received (cumulative)"),
                Col(
                    "retrans_total",
                    INT,
                    "tcp_info total_retrans: segments this socket re-sent (cumulative); empty: not recorded "
                    "(contract 10)",
                    NONNEG,
                    nullable=True,
                ),
                Col(
                    "dsack_dups",
                    INT,
                    "tcp_info dsack_dups: of those, the ones the peer reported received twice (D-SACK): "
                    "spurious, not lost (cumulative; kernels 5.0+); empty: not recorded (contract 10)",
                    NONNEG,
                    nullable=True,
                ),
            ),
            optional=True,
            key=("time_s", "netns", "laddr", "lport", "raddr", "rport"),
        ),
        Table(
            "processes",
            "processes.csv",
            "collector/sample-netns",
            2,
            "Each process holding a listener of the namespace (ss -p), and in a namespace other than the host's "
            "every process living in it at the first sample (at most 200): its name, executable and cgroup, once. "
            "The executable says which server it is (comm alone is `java` or `node`), so a finding can name that "
            "server's own knob; the cgroup says who owns it (systemd unit, container, pod: analysis/cgroups.py).",
            (
                SAMPLE_TIME,
                NETNS,
                Col("pid", INT, "process id (the host's)", NONNEG),
                Col("comm", STR, "process name: " + COMM_TEXT, nullable=True),
                Col("exe", STR, "its executable, /proc/PID/exe (empty if it could not be read)", nullable=True),
                Col(
                    "cgroup",
                    STR,
                    "/proc/PID/cgroup, its lines (`hierarchy:controllers:/path`, v1 and v2) joined by `;` (empty if "
                    "it could not be read; not recorded before contract 7)",
                    nullable=True,
                ),
            ),
            key=("netns", "pid"),
        ),
        Table(
            "containers",
            "containers.csv",
            "collector/list-containers",
            1,
            "The names of the containers and pods the host knew at the start and at the end of the capture, best "
            "effort from what the host keeps (no orchestrator API): a container id in a process's cgroup gets its "
            "name here, a pod UID its namespace and name. Empty when the host runs no container.",
            (
                Col(
                    "source",
                    STR,
                    "where it was read: `podman ps`, `docker ps`, `/var/log/containers` (the kubelet's "
                    "log links), `/var/log/pods` (the kubelet's pod folders)",
                ),
                Col("container_id", STR, "64 hex digits (empty for a pod)", nullable=True),
                Col("name", STR, "the container's name (empty for a pod)", nullable=True),
                Col("pod_namespace", STR, "the pod's Kubernetes namespace (kubelet sources only)", nullable=True),
                Col("pod_name", STR, "the pod's name (kubelet sources only)", nullable=True),
                Col("pod_uid", STR, "the pod's UID (/var/log/pods only)", nullable=True),
            ),
        ),
        Table(
            "sysctls",
            "sysctls.csv",
            "collector/snapshot-sysctls",
            1,
            "TCP queue sysctls of each sampled namespace at the start and end of the capture.",
            (
                Col("phase", STR, "start or end", (pa.Check.isin(["start", "end"]),)),
                NETNS,
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
                count_col("connect_us", "time until connect() returned, success or not (us)"),
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
                count_col("requests_ok", "request/reply exchanges completed on the connection (v2)"),
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
