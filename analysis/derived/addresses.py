"""One address identity across families: what the application sees, matched in the kernel's forms.

A dual-stack listener (Java's ServerSocket, Node's server.listen(port), Go's ":port") binds
"::" and sees its IPv4 clients as "::ffff:a.b.c.d"; the client's own socket says "a.b.c.d".
Objects are joined on the plain form, and a wildcard listener serves every address of its
namespace: for a client in the same namespace, at least loopback.
"""

from __future__ import annotations

import ipaddress

import pandas as pd

WILDCARDS = frozenset({"0.0.0.0", "::"})


def plain(addr: str) -> str:
    """The address as an IPv4 application sees it when it is IPv4-mapped IPv6 (::ffff:a.b.c.d)."""
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return addr
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return str(mapped) if mapped is not None else str(ip)


def is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(plain(addr)).is_loopback
    except ValueError:
        return False


def dual_stack(laddr: str) -> bool:
    """A listener on "::" also accepts IPv4 (unless IPV6_V6ONLY, which the probes cannot see)."""
    return laddr == "::"


def listeners_serving(listeners: pd.DataFrame, client_netns: int, raddr: str, port: int) -> pd.Series:
    """Which rows of a listener table (netns, laddr, lport) take connections a client in
    client_netns makes to raddr:port: the same address in its plain form, or a wildcard
    listener of the client's own namespace when raddr is loopback."""
    if listeners.empty:
        return pd.Series(False, index=listeners.index)
    same_port = listeners["lport"] == port
    laddr = listeners["laddr"].astype(str)
    same_addr = laddr.map(plain) == plain(raddr)
    local = laddr.isin(WILDCARDS) & (listeners["netns"] == client_netns) & is_loopback(raddr)
    return same_port & (same_addr | local)
