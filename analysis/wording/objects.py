"""What a finding is about, named: the object (listener, endpoint, flow) and the finding's title line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analysis.findings import Finding

from .catalog import CAUSE_NAMES, HEADLINES, TITLES
from .numbers import is_missing, number
from .owners import owner_first

STATUS_WORDS = {
    "confirmed": "confirmed",
    "suspected": "suspected",
    "absent": "absent",
    "not_checked": "not checked",
}


def _or(v: Any, unknown: str) -> str:
    return unknown if is_missing(v) else number(v)


def _at(addr: Any, port: Any) -> str:
    """ADDR:PORT, an IPv6 address in brackets before its port, as the application's own logs
    write it ([2001:2::1]:8080: without them the port reads as the address's last group)."""
    a = _or(addr, "an unknown address")
    return f"[{a}]:{port}" if ":" in a else f"{a}:{port}"


def where(s: Mapping[str, Any]) -> str:
    """The object a finding's subject names: a listener, an endpoint, a flow, or connections to one."""
    raddr, port = _or(s.get("raddr"), "an unknown address"), _or(s.get("service_port"), "an unknown port")
    if "service_port" in s and "laddr" not in s and is_missing(s.get("raddr")) and is_missing(s.get("service_port")):
        return "connections whose destination was not recorded"
    if "service_port" in s and "laddr" not in s:
        return "connections to " + (_at(raddr, port) if not is_missing(s.get("service_port")) else f"{raddr} ({port})")
    if "service_port" in s:
        side = f" (we are the {s['we_are']})" if not is_missing(s.get("we_are")) else ""
        if not is_missing(s.get("lport")) and not is_missing(s.get("rport")):
            # One flow: both of its ports.
            return f"the flow {_at(s.get('laddr'), s['lport'])} -> {_at(raddr, s['rport'])}{side}"
        return f"{_or(s.get('laddr'), 'an unknown address')} <-> {raddr} port {port}{side}"
    if not is_missing(s.get("lport")):
        if is_missing(s.get("laddr")):
            return f"port {s.get('lport')}"
        at = _at(s["laddr"], s["lport"]) + (" (dual-stack: IPv4 clients too)" if s.get("dual_stack") is True else "")
        return at + _member(s)
    return "a listener not seen by the probe"


def _member(s: Mapping[str, Any]) -> str:
    """Which socket of a SO_REUSEPORT group a listener finding is about, or that it is the group."""
    group = s.get("group") or {}
    n = group.get("members")
    if not n:
        return ""
    if group.get("judged") == "as_one":
        return f", the SO_REUSEPORT group of its {n} sockets"
    ino = s.get("sock_ino")
    which = f"socket {ino}" if not is_missing(ino) else "one socket"
    return f", {which}, one of the {n} of its SO_REUSEPORT group"


def _process(s: Mapping[str, Any]) -> str:
    """(comm pid N), or (comm pids N, M) for a socket several processes own; "" when unknown."""
    owners = [o for o in s.get("owners") or [] if not is_missing(o.get("pid"))]
    if len(owners) > 1:
        comms = sorted({str(o["comm"]) for o in owners if o.get("comm")})
        pids = ", ".join(number(o["pid"]) for o in owners)
        return f" ({'/'.join(comms) + ' ' if comms else ''}pids {pids})"
    if s.get("comm") and not is_missing(s.get("pid")):
        return f" ({s['comm']} pid {s.get('pid')})"
    return f" ({s['comm']})" if s.get("comm") else ""


def headline(f: Finding) -> str:
    """The finding's title line: what, where, who, status and cause."""
    s = f.subject
    status = STATUS_WORDS.get(f.status, str(f.status).replace("_", " "))
    own = HEADLINES.get(f.kind)
    if own is not None:
        return own(f, status)
    proc = _process(s)
    cause = f" — {CAUSE_NAMES.get(f.cause_class or '', f.cause_class)}" if f.cause_class else ""
    ns = f" in {s['netns_label']}" if not is_missing(s.get("netns_label")) else ""
    return f"{TITLES.get(f.kind, f.kind)} on {owner_first(s, where(s))}{proc}{ns}: {status}{cause}"
