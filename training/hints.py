"""What a trainee may ask for and what the debrief shows, per family: the hint ladder (three
levels: which family, which counter, which probe; each costs points, docs/training.md), the
commands that find the fault fastest, and the seed-post myths that lead astray there
(docs/claims.md ids). Wording only: nothing here knows which object is at fault."""

from __future__ import annotations

HINTS: dict[str, list[str]] = {
    "accept_queue": [
        "Look at the server's listening sockets: something queues before the application sees it.",
        "`nstat -az TcpExtListenOverflows TcpExtListenDrops` in the server's namespace, and per listener "
        "`ss -ltm`: Send-Q is the limit, d<N> in skmem the listener's own drops.",
        "probes/accept_queue.bt (or `make capture PROBES=accept_queue`): depth against limit per listener per second.",
    ],
    "retransmits": [
        "Look at what TCP sends twice.",
        "`nstat -az TcpRetransSegs TcpExtTCPLostRetransmit` in the client's namespace, and per connection "
        "`ss -ti` (retrans:, lost:).",
        "probes/retransmits.bt: retransmits per flow with their kind (SYN or data).",
    ],
    "epoll": [
        "Look at the event loops: which thread never waits?",
        "`top -H -p PID` or /proc/PID/task/TID/stat for each thread's CPU; `ss -tnp` for who holds which port.",
        "probes/epoll.bt: per thread, the share of epoll_wait calls that blocked and the events per call.",
    ],
    "time_wait": [
        "Look at the client's side of its connections, after they close.",
        "`ss -tan state time-wait` counted per destination, `sysctl net.ipv4.ip_local_port_range`, and the "
        "client's errors (EADDRNOTAVAIL).",
        "probes/time_wait.bt: active closes per endpoint and failed connects with their errno.",
    ],
    "socket_buffers": [
        "Look at the established connections' buffers: who waits for whom?",
        "`ss -tinm` on the sender: rwnd_limited and sndbuf_limited against busy, per connection; on the "
        "receiver Recv-Q against skmem rb, and `nstat -az TcpExtTCPToZeroWindowAdv`.",
        "probes/socket_buffers.bt (or `make capture PROBES=socket_buffers`): per flow, writes held back and reads "
        "that left the buffer half full.",
    ],
    "none": [
        "Compare each family's counters with what a quiet host shows before you blame one.",
        "`nstat -az` twice, 10 s apart: ListenOverflows, RetransSegs, and the client's failed connects.",
        "`make capture` with every probe: a report with no finding is an answer too.",
    ],
}

FASTEST: dict[str, list[str]] = {
    "accept_queue": ["ip netns exec SRV ss -ltm  (Recv-Q near Send-Q, d<N> rising on one listener)",
                     "ip netns exec SRV nstat -az TcpExtListenOverflows"],
    "retransmits": ["ip netns exec CLI ss -ti  (retrans: rising on one connection)",
                    "ip netns exec CLI nstat -az TcpRetransSegs"],
    "epoll": ["top -H -p $(pgrep loopserver)  (one thread near 100 %)",
              "bpftrace probes/epoll.bt  (that thread's epoll_wait never blocks)"],
    "time_wait": ["ip netns exec CLI ss -tan state time-wait | awk '{print $5}' | sort | uniq -c",
                  "ip netns exec CLI sysctl net.ipv4.ip_local_port_range"],
    "socket_buffers": ["ip netns exec CLI ss -tin  (rwnd_limited near busy on one connection)",
                       "ip netns exec SRV ss -tnm  (Recv-Q near rb on its reader)"],
    "none": ["make capture NETNS=... then make report: no finding, every family checked"],
}  # fmt: skip

MYTHS: dict[str, list[str]] = {
    "accept_queue": [
        "C06: `kprobe:tcp_accept_queue_full` does not exist; the check is inline (sk_acceptq_is_full).",
        "C13: overflowing clients do not see 'connection refused' (tcp_abort_on_overflow=0): their SYNs "
        "and final ACKs are dropped and retried.",
        "C01: somaxconn is 4096 here, not 128: it is rarely the binding limit.",
    ],
    "retransmits": [
        "C40: tcp:tcp_retransmit_skb counts events, not segments: sum the segments.",
    ],
    "epoll": [
        "C22: epoll_wait does not scan its fds linearly: more idle fds cost almost nothing.",
        "C20: Go calls epoll_pwait, so `strace -e epoll_wait` shows nothing.",
    ],
    "time_wait": [
        "C34: lowering tcp_fin_timeout does not shorten TIME_WAIT (60 s, fixed).",
        "C45: tcp_tw_recycle was removed in Linux 4.12.",
    ],
    "socket_buffers": [
        "C52: a slow reader does not overflow its buffer into loss: it closes its window (TCPToZeroWindowAdv).",
        "C53: SetReadBuffer (SO_RCVBUF) turns receive autotuning off: a bigger fixed buffer only delays the stall.",
        "C54: net.core.rmem_max does not cap autotuning; raising it alone changes nothing.",
    ],
    "none": ["A counter that moves is not a fault: compare with the rate the host normally runs at."],
}
