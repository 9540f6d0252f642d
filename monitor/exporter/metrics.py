"""The metric list: every name, its type, labels, file and meaning (one place).

The rules file, the dashboard, monitor/metrics.md and the tests read METRICS; the
other modules name metrics by their key without the tq_ prefix."""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "tq_"
# Families of objects and the labels that name one object.
OBJECT_LABELS = {
    # member: the listening socket's inode (a SO_REUSEPORT group's members are sockets of their own)
    "listener": ("netns", "laddr", "lport", "member"),
    "endpoint": ("netns", "raddr", "port", "side"),
    "destination": ("netns", "raddr", "rport"),
    "loop": ("pid", "tid", "comm"),
    # one TCP socket, local end first: a flow between two watched namespaces is two objects
    "flow": ("netns", "laddr", "lport", "raddr", "rport"),
}


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # counter | gauge
    labels: tuple[str, ...]
    help: str
    file: str


def _m(name: str, kind: str, labels: tuple[str, ...], help_: str, file: str) -> Metric:
    return Metric(PREFIX + name, kind, labels, help_, file)


_L, _E, _D, _T, _F = (OBJECT_LABELS[k] for k in ("listener", "endpoint", "destination", "loop", "flow"))
METRICS: dict[str, Metric] = {
    m.name: m
    for m in [
        # Per listener (accept_queue probe).
        _m(
            "listener_queue_depth_max",
            "gauge",
            _L,
            "Largest accept-queue depth seen in the last interval.",
            "accept_queue",
        ),
        _m(
            "listener_queue_depth",
            "gauge",
            _L,
            "Accept-queue depth at the last scan (ss Recv-Q) or probe interval end.",
            "accept_queue",
        ),
        _m(
            "listener_queue_limit",
            "gauge",
            _L,
            "Effective accept-queue limit: min(listen backlog, somaxconn).",
            "accept_queue",
        ),
        _m(
            "listener_queue_full_total",
            "counter",
            _L,
            "Connections queued while the queue was full (depth > limit).",
            "accept_queue",
        ),
        _m("listener_enqueued_total", "counter", _L, "Completed connections queued on the listener.", "accept_queue"),
        _m("listener_accepted_total", "counter", _L, "Connections taken off the queue by accept().", "accept_queue"),
        _m(
            "listener_drops_total",
            "counter",
            _L,
            "SYNs and final ACKs the listener dropped: the kernel's own per-socket counter (sk_drops, ss -m d<N>).",
            "sockets",
        ),
        # Per remote endpoint (retransmits probe).
        _m(
            "endpoint_retrans_data_segments_total",
            "counter",
            _E,
            "Data segments re-sent toward the endpoint.",
            "retransmits",
        ),
        _m(
            "endpoint_retrans_syn_segments_total",
            "counter",
            _E,
            "SYNs re-sent toward the endpoint (we are the client).",
            "retransmits",
        ),
        _m(
            "endpoint_retrans_synack_segments_total",
            "counter",
            _E,
            "SYN-ACKs re-sent to the endpoint (we are the server).",
            "retransmits",
        ),
        # Per destination this host connects to (time_wait probe and socket table).
        _m(
            "destination_connect_failures_total",
            "counter",
            _D,
            "Failed connect() calls toward the destination, any error.",
            "time_wait",
        ),
        _m(
            "destination_eaddrnotavail_total",
            "counter",
            _D,
            "connect() calls that found no free local port (EADDRNOTAVAIL).",
            "time_wait",
        ),
        _m(
            "destination_active_closes_total",
            "counter",
            _D,
            "Connections to the destination this host closed first (each leaves a TIME_WAIT socket).",
            "time_wait",
        ),
        _m(
            "destination_time_wait_sockets",
            "gauge",
            _D,
            "TIME_WAIT sockets toward the destination on ephemeral local ports.",
            "sockets",
        ),
        _m(
            "destination_ports_in_use",
            "gauge",
            _D,
            "Ephemeral local ports held toward the destination, any state.",
            "sockets",
        ),
        # Per thread: epoll probe (1 call in 8 sampled, scaled); CPU and run queue from procfs.
        _m("loop_epoll_calls_total", "counter", _T, "epoll_wait calls (estimated from 1 in 8).", "epoll"),
        _m("loop_epoll_events_total", "counter", _T, "Events returned by epoll_wait (estimated).", "epoll"),
        _m("loop_epoll_empty_total", "counter", _T, "epoll_wait calls that returned no event (estimated).", "epoll"),
        _m("loop_blocked_seconds_total", "counter", _T, "Time blocked inside epoll_wait (estimated).", "epoll"),
        _m(
            "loop_cpu_seconds_total",
            "counter",
            _T,
            "Time the thread ran on a CPU (/proc/<pid>/task/<tid>/schedstat).",
            "threads",
        ),
        _m(
            "loop_runqueue_wait_seconds_total",
            "counter",
            _T,
            "Time the thread was runnable but waited for a CPU (schedstat).",
            "threads",
        ),
        _m(
            "loop_blocked_ratio",
            "gauge",
            _T,
            "Share of the last interval the thread spent blocked in epoll_wait.",
            "epoll",
        ),
        _m(
            "loop_events_per_wakeup",
            "gauge",
            _T,
            "Events per epoll_wait call that returned some, last interval.",
            "epoll",
        ),
        # Per flow (TCP socket): tcp_info's own clocks and skmem from sock_diag, no probe needed...
        _m(
            "flow_busy_seconds_total",
            "counter",
            _F,
            "Time the socket had data to send (tcp_info busy, the kernel's clock; counted while it is listed).",
            "flows",
        ),
        _m(
            "flow_rwnd_limited_seconds_total",
            "counter",
            _F,
            "Of the busy time, the time the peer's receive window held the sender back (tcp_info rwnd_limited).",
            "flows",
        ),
        _m(
            "flow_sndbuf_limited_seconds_total",
            "counter",
            _F,
            "Of the busy time, the time its own send buffer held the sender back (tcp_info sndbuf_limited).",
            "flows",
        ),
        _m("flow_recv_queue_bytes", "gauge", _F, "Bytes received and not yet read (Recv-Q) at the last scan.", "flows"),
        _m("flow_send_queue_bytes", "gauge", _F, "Bytes written and not yet acknowledged (Send-Q).", "flows"),
        _m("flow_rcvbuf_bytes", "gauge", _F, "The receive buffer's size (skmem rb: sk_rcvbuf).", "flows"),
        _m("flow_sndbuf_bytes", "gauge", _F, "The send buffer's size (skmem tb: sk_sndbuf).", "flows"),
        # ...and the socket_buffers probe's writes and reads.
        _m(
            "flow_writes_blocked_total",
            "counter",
            _F,
            "Non-blocking writes that found the send buffer full (EAGAIN).",
            "socket_buffers",
        ),
        _m(
            "flow_writes_rwnd_limited_total",
            "counter",
            _F,
            "Writes while the peer's receive window held the sender back.",
            "socket_buffers",
        ),
        _m(
            "flow_writes_sndbuf_limited_total",
            "counter",
            _F,
            "Writes while the send buffer held the sender back.",
            "socket_buffers",
        ),
        _m(
            "flow_reads_zero_window_total",
            "counter",
            _F,
            "Reads that found the window this socket last advertised closed (the reader had stopped its peer).",
            "socket_buffers",
        ),
        # Per network namespace: the kernel counters the per-object numbers reconcile with.
        _m(
            "netns_listen_overflows_total",
            "counter",
            ("netns",),
            "TcpExt ListenOverflows: connections dropped on a full accept queue.",
            "netns",
        ),
        _m("netns_listen_drops_total", "counter", ("netns",), "TcpExt ListenDrops.", "netns"),
        _m(
            "netns_syn_retrans_total",
            "counter",
            ("netns",),
            "TcpExt TCPSynRetrans: SYNs re-sent by this namespace's connects.",
            "netns",
        ),
        _m("netns_retrans_segments_total", "counter", ("netns",), "Tcp RetransSegs.", "netns"),
        _m("netns_out_segments_total", "counter", ("netns",), "Tcp OutSegs.", "netns"),
        _m("netns_passive_opens_total", "counter", ("netns",), "Tcp PassiveOpens.", "netns"),
        _m("netns_active_opens_total", "counter", ("netns",), "Tcp ActiveOpens.", "netns"),
        _m("netns_time_wait_overflow_total", "counter", ("netns",), "TcpExt TCPTimeWaitOverflow.", "netns"),
        _m("netns_ephemeral_ports", "gauge", ("netns",), "Size of net.ipv4.ip_local_port_range.", "netns"),
        # Owners (procfs: /proc/<pid>/cgroup; names from collector/list-containers): join on these.
        _m(
            "owner_info",
            "gauge",
            ("netns", "pid", "comm", "unit", "runtime", "container_id", "container", "pod_namespace", "pod", "qos"),
            "Who owns a process behind an exported listener or loop: its systemd unit, or its container (runtime, "
            "id, name) and Kubernetes pod (namespace, name, QoS class); empty where not known. Join on pid "
            "(loops) or on netns and pid (tq_listener_owner_info).",
            "owners",
        ),
        _m(
            "listener_owner_info",
            "gauge",
            ("netns", "laddr", "lport", "member", "pid"),
            "The process owning a listening socket (ss -p; of several holders, the one whose epoll set watches "
            "it): joins a listener's series to tq_owner_info.",
            "owners",
        ),
        _m(
            "netns_info",
            "gauge",
            ("netns", "name"),
            "Namespace inode and its ip-netns name (host: the initial one).",
            "netns",
        ),
        # The exporter and its probes.
        _m("probe_up", "gauge", ("probe", "tier"), "1 while the probe runs and prints, else 0.", "exporter"),
        _m(
            "probe_restarts_total",
            "counter",
            ("probe", "reason"),
            "Probe restarts: died, or segment (planned, bounds map memory).",
            "exporter",
        ),
        _m(
            "probe_recursion_misses_total",
            "counter",
            ("probe",),
            "Events the kernel skipped for the probe's programs (bpf recursion misses).",
            "exporter",
        ),
        _m(
            "exporter_objects",
            "gauge",
            ("family", "state"),
            "Objects tracked per family: exported or in the other series.",
            "exporter",
        ),
        _m("exporter_top_n", "gauge", (), "Objects per family that get their own series (--top).", "exporter"),
        _m("exporter_series", "gauge", (), "Series written in the last round, all files.", "exporter"),
        _m(
            "exporter_resident_bytes",
            "gauge",
            ("process",),
            "Resident memory of the exporter and of each probe process.",
            "exporter",
        ),
    ]
}
FILES = sorted({m.file for m in METRICS.values()})

# Kernel counters per namespace (group, name in /proc/net/{netstat,snmp}, as collector/sample-netns
# prints them) -> metric.
NETNS_COUNTERS = {
    ("TcpExt", "ListenOverflows"): "netns_listen_overflows_total",
    ("TcpExt", "ListenDrops"): "netns_listen_drops_total",
    ("TcpExt", "TCPSynRetrans"): "netns_syn_retrans_total",
    ("TcpExt", "TCPTimeWaitOverflow"): "netns_time_wait_overflow_total",
    ("Tcp", "RetransSegs"): "netns_retrans_segments_total",
    ("Tcp", "OutSegs"): "netns_out_segments_total",
    ("Tcp", "PassiveOpens"): "netns_passive_opens_total",
    ("Tcp", "ActiveOpens"): "netns_active_opens_total",
}


def metrics_doc() -> str:
    """monitor/metrics.md: the metric list with labels, from METRICS (a test keeps it current)."""
    out = [
        "# tq metrics (scripts/monitor)",
        "",
        "Generated by `python3 -m monitor.exporter --metrics-doc`; do not edit by hand.",
        "Every file is `tq_<file>.prom` in the textfile directory. Object labels per family:",
        "",
    ]
    for fam, labels in OBJECT_LABELS.items():
        out.append(f"- {fam}: {', '.join(labels)}")
    out += [
        "",
        "At most --top objects per family (default 20) get their own series; the rest are summed into",
        'one series whose object labels all read "other". An object idle for --ttl seconds is dropped.',
    ]
    out += ["", "| metric | type | labels | file | meaning |", "|---|---|---|---|---|"]
    for m in METRICS.values():
        out.append(f"| `{m.name}` | {m.kind} | {', '.join(m.labels) or '-'} | {m.file} | {m.help} |")
    return "\n".join(out) + "\n"
