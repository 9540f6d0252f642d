"""The tables the probes write (probes/*.bt, made CSV by collector/probe-to-csv): one per
record type, each column with its type, checks and meaning. Part of the contract: tables.py
joins them with the samplers' tables."""

from __future__ import annotations

import pandera.pandas as pa

from .columns import (
    ADDR_FAMILY,
    COMM_TEXT,
    ENDPOINT_KEY,
    EPOCH,
    FLOW_ADDRESSES,
    INT,
    NETNS,
    NONNEG,
    PORT,
    PROBE_TIME,
    SOCK_INO,
    STR,
    Col,
    Table,
    count_col,
)

PROBE_TABLES: tuple[Table, ...] = (
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
            ADDR_FAMILY,
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
            ADDR_FAMILY,
            *FLOW_ADDRESSES,
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
            count_col("life_lt_1ms", "connections that lived < 1 ms (ESTABLISHED to CLOSE; sampled, multiples of 16)"),
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
            Col("pid", INT, "process that called connect() for a local failure (EADDRNOTAVAIL); 0 otherwise", NONNEG),
            Col("comm", STR, "its name (empty when pid is 0): " + COMM_TEXT, nullable=True),
            Col("family", INT, "address family: 2 = IPv4, 10 = IPv6 (0: not recorded)", (pa.Check.isin([0, 2, 10]),)),
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
            count_col("nb_ns_sum", "time inside the non-blocking polls (ns): the kernel's cost of collecting events"),
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
            ADDR_FAMILY,
            *FLOW_ADDRESSES,
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
)
