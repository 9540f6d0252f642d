"""Constants of the Linux TCP stack that the analysis relies on, in one place.

Each is fixed in the kernel (a #define, not a sysctl) or follows from how the
kernel behaves; the source is named next to it. Rules, derived series, models
and wording import them from here instead of writing the number again.
"""

from __future__ import annotations

# include/net/tcp.h: TCP_TIMEWAIT_LEN (60*HZ). How long a socket that closed
# first holds its (local port, remote address, remote port) in TIME_WAIT,
# whatever net.ipv4.tcp_fin_timeout says (that is the FIN_WAIT2 timeout).
TCP_TIMEWAIT_LEN_S = 60

# include/net/tcp.h: TCP_TIMEOUT_INIT (1*HZ). A dropped SYN (or final ACK) is
# first retried after this initial RTO.
TCP_TIMEOUT_INIT_S = 1.0

# A connect() that took at least this long almost surely waited for a SYN
# retry: just under the initial RTO, so a retry that fires a little early
# still counts.
SYN_RETRY_US = 900_000

# With net.ipv4.tcp_tw_reuse=1 an outgoing connection may take a port still in
# TIME_WAIT once its last timestamp is this old (tcp_twsk_unique: 1 s).
TW_REUSE_AFTER_S = 1

# include/uapi/asm-generic/errno.h: connect() found no free local port.
EADDRNOTAVAIL = 99


def accept_queue_room(limit: int) -> int:
    """Connections an accept queue holds before it drops: sk_acceptq_is_full() is
    `sk_ack_backlog > sk_max_ack_backlog`, so limit + 1 fit."""
    return int(limit) + 1
