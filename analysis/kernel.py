"""Constants of the Linux TCP stack that the analysis relies on, in one place, and the
one form of an address the kernel writes two ways (ipv4_form).

Each is fixed in the kernel (a #define, not a sysctl) or follows from how the
kernel behaves; the source is named next to it. Rules, derived series, models
and wording import them from here instead of writing the number again.
"""

from __future__ import annotations

import ipaddress

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

# include/linux/proc_ns.h: PROC_NET_INIT_INO, the inode of the host's own network namespace
# (init_net), fixed. collector/sample-netns lists the processes living in any other one.
INIT_NET_INODE = 0xEFFFFFF9


def accept_queue_room(limit: int) -> int:
    """Connections an accept queue holds before it drops: sk_acceptq_is_full() is
    `sk_ack_backlog > sk_max_ack_backlog`, so limit + 1 fit."""
    return int(limit) + 1


def ipv4_form(addr: str) -> str:
    """An IPv4 peer of a dual-stack ("::") socket is ::ffff:a.b.c.d to the kernel
    (IPv4-mapped IPv6, RFC 4291 2.5.5.2) and a.b.c.d to its own socket and application:
    the plain form, on which objects are joined. Any other address as it is (normalised
    where it parses). Standard library only: the exporter uses it too."""
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return addr
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return str(mapped) if mapped is not None else str(ip)
