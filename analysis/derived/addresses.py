"""One address identity across families: what the application sees, matched in the kernel's forms.

A dual-stack listener (Java's ServerSocket, Node's server.listen(port), Go's ":port") binds
"::" and sees its IPv4 clients as "::ffff:a.b.c.d"; the client's own socket says "a.b.c.d".
Objects are joined on the plain form, and a wildcard listener serves every address of its
namespace: for a client in the same namespace, at least loopback.
"""

from __future__ import annotations

import ipaddress

import pandas as pd

from analysis.kernel import ipv4_form

WILDCARDS = frozenset({"0.0.0.0", "::"})


def plain(addr: str) -> str:
    """The address as an IPv4 application sees it when it is IPv4-mapped IPv6 (::ffff:a.b.c.d)."""
    return ipv4_form(addr)


def is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(plain(addr)).is_loopback
    except ValueError:
        return False


def dual_stack(laddr: str) -> bool:
    """A listener on "::" also accepts IPv4 (unless IPV6_V6ONLY, which the probes cannot see)."""
    return laddr == "::"


def listener_dual_stack(listeners: pd.DataFrame, netns: int, laddr: str, lport: int) -> bool | None:
    """Whether a listener takes IPv4 clients on an IPv6 socket, as ss saw it (listeners.csv
    dual_stack: ss prints such a wildcard as "*"); None when no sample says (a run of
    contract 5 or older, or a listener never sampled)."""
    if laddr != "::" or listeners.empty or "dual_stack" not in listeners:
        return False if laddr != "::" else None
    rows = listeners[(listeners["netns"] == netns) & (listeners["laddr"] == laddr) & (listeners["lport"] == lport)]
    seen = rows["dual_stack"].dropna()
    return bool((seen == 1).any()) if len(seen) else None


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
