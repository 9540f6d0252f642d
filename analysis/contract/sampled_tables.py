"""The tables the samplers and the labs write (collector/sample-netns, list-containers,
snapshot-sysctls; the lab clients' connects.csv), each column with its type, checks and
meaning. Part of the contract: tables.py joins them with the probes' tables."""

from __future__ import annotations

import pandera.pandas as pa

from .columns import (
    COMM_TEXT,
    EPOCH_MAX,
    EPOCH_MIN,
    FLOAT,
    FLOW_ADDRESSES,
    INT,
    LISTING_TIME,
    NETNS,
    NONNEG,
    PORT,
    SAMPLE_TIME,
    STR,
    Col,
    Table,
    count_col,
)

SAMPLED_TABLES: tuple[Table, ...] = (
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
        3,
        "The TCP line of /proc/net/sockstat per sample, and whether the sample listed the TIME_WAIT "
        "sockets into tw_sockets.csv and the flows into sock_buffers.csv.",
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
                "sample lists them, and a sample over the sampler's CPU budget (sample-netns --cpu-budget, "
                "default 3 % of one CPU, since 2026-11-29) none, for at most 30 s. Runs of contract 7 or older "
                "listed every sample (1)",
                (pa.Check.isin([0, 1]),),
            ),
            Col(
                "flows_listed",
                INT,
                "1: this sample listed the flows (sock_buffers.csv's rows of the listing are stamped when ss "
                "ran, just after the sample's time; a flow that neither sent nor held data has no row); 0: not "
                "listed (sample-netns --flows-per-sample, --cpu-budget), so a flow's queue was not seen then. "
                "Runs of contract 11 or older: every sample (1)",
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
        "the namespace, only about one sample in ceil(inuse / that) lists the flows, and a sample over the "
        "sampler's CPU budget (sample-netns --cpu-budget) none, for at most 30 s. Absent in runs of "
        "contract 9 or older, and in contract-10 runs made before the sampler listed flows.",
        (
            LISTING_TIME,
            NETNS,
            *FLOW_ADDRESSES,
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
                "tcp_info total_retrans: segments this socket re-sent (cumulative); empty: not recorded (contract 10)",
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
        3,
        "Each process holding a listener of the namespace (ss -p), and in a namespace other than the host's "
        "every process living in it at the first sample (at most 200): its name, executable and cgroup, the "
        "first sample it is seen in and again at each sample that sees its name change (an exec: `ip netns "
        "exec NS server` is `ip` until it execs); its latest row names it. "
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
        key=("time_s", "netns", "pid"),
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
