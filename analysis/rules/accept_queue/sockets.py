"""The listening sockets of one namespace as accept_queue_overflow judges them: its overflow
counter, each socket's own drop counter, and each SO_REUSEPORT group resolved (judged as one queue
when every member overflowed comparably, else member by member with the neighbours' numbers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ...derived import interval_s
from ...derived.accept_queue import full_intervals, group_rows, overflow_samples, samples_near
from ...derived.counters import recorded, sampled
from ...derived.listener_sockets import SocketKey, drop_key, group_of, socket_drops, socket_owner, ss_sockets
from ..base import RunView


@dataclass
class Namespace:
    """What one namespace's listening sockets share: its overflow counter, and who was seen full when
    it rose."""

    netns: int
    sampled: bool
    overflows: pd.Series  # ListenOverflows delta per counter sample, where it rose
    full_times: dict[SocketKey, list[float]]  # implicated sockets -> their full intervals
    full_events: dict[SocketKey, int]
    busy: bool  # more than one socket queued connections in the capture
    counted: bool  # ListenOverflows was captured in this namespace (sampled, and the counter listed)
    drops: dict[tuple[str, int, int], int]  # each socket's own sk_drops rise (drop_key), where ss showed it
    # SO_REUSEPORT groups judged as one queue (every member overflowed): the group's key -> its members
    merged: dict[SocketKey, list[SocketKey]] = field(default_factory=dict)
    # the other members of each member's group, with their numbers (a group judged member by member)
    siblings: dict[SocketKey, list[dict[str, Any]]] = field(default_factory=dict)

    def own_drops(self, key: SocketKey) -> int | None:
        return self.drops.get(drop_key(key.laddr, key.lport, key.sock_ino))


# -- SO_REUSEPORT groups ----------------------------------------------------------------------------


def _overflowed(rows: pd.DataFrame | None, drops: int | None) -> bool:
    """A member seen full by the probe, or whose own counter says it dropped."""
    return (rows is not None and not full_intervals(rows).empty) or (drops or 0) > 0


# A group is judged as one queue when every member overflowed comparably: its least member's own
# drops at least this share of its most's (else a stalled member beside neighbours that dropped a
# few in one host-wide pause is that member's fault, not the group's).
GROUP_COMPARABLE_DROPS = 0.25


def _whole_group(members: list[SocketKey], mine: dict[SocketKey, pd.DataFrame], drops: dict) -> bool:
    """Every member overflowed, and comparably so where their own drop counters say how much."""
    if not all(_overflowed(mine.get(m), drops[m]) for m in members):
        return False
    known = [d for d in drops.values() if d is not None]
    return len(known) < len(members) or min(known) >= GROUP_COMPARABLE_DROPS * max(known)


def _member_numbers(run: RunView, key: SocketKey, rows: pd.DataFrame | None, drops: int | None) -> dict[str, Any]:
    """One member of a group as its neighbours' findings cite it: its owner and its own numbers."""
    owner = socket_owner(run, key)
    seen = rows is not None and not rows.empty
    return {
        "sock_ino": key.sock_ino,
        "pid": owner["pid"],
        "comm": owner["comm"],
        "accepted": int(rows["accepted"].sum()) if seen else None,
        "depth_max": int(rows[["depth_max", "depth_now"]].max().max()) if seen else None,
        "limit": int(rows["limit"].iloc[-1]) if seen else None,
        "full_events": int(rows["full_events"].sum()) if seen else None,
        "drops": drops,
    }


def _groups(run: RunView, ns: Namespace, mine: dict[SocketKey, pd.DataFrame]) -> dict[SocketKey, pd.DataFrame]:
    """The namespace's sockets with each SO_REUSEPORT group resolved: a group whose every member
    overflowed is judged as one queue (its members' rows summed, under the group's key with
    sock_ino 0, ns.merged naming the members); in any other group each member is judged alone,
    with its neighbours' numbers beside it (ns.siblings)."""
    known = [k for k in mine if k.sock_ino] + [k for k in ss_sockets(run, ns.netns) if k not in mine]
    out = dict(mine)
    for (netns, laddr, lport), members in group_of(known).items():
        if len(members) < 2:
            continue
        drops = {m: ns.own_drops(m) for m in members}
        if _whole_group(members, mine, drops):
            group = SocketKey(netns, laddr, lport, 0)
            out = {k: g for k, g in out.items() if k not in members}
            out[group] = group_rows([mine[m] for m in members if m in mine])
            ns.merged[group] = members
            ns.drops[drop_key(laddr, lport)] = sum(n or 0 for n in drops.values())
            for m in members:
                ns.drops.pop(drop_key(m.laddr, m.lport, m.sock_ino), None)
            continue
        numbers = {m: _member_numbers(run, m, mine.get(m), drops[m]) for m in members}
        for m in members:
            ns.siblings[m] = [numbers[o] for o in members if o != m]
    return out


def namespace(run: RunView, inode: int, mine: dict[SocketKey, pd.DataFrame]) -> tuple[Namespace, dict]:
    """A namespace's overflow samples, and its sockets implicated in them: seen full in the
    intervals where the counter rose (or seen full at all when the counter was not captured: then
    only suspected). Returns the namespace and its sockets with the SO_REUSEPORT groups resolved."""
    is_sampled = sampled(run, inode)
    counted = is_sampled and recorded(run, inode, "ListenOverflows")
    overflows = overflow_samples(run, inode) if is_sampled else pd.Series(dtype="int64")
    ns = Namespace(
        netns=inode,
        sampled=is_sampled,
        overflows=overflows,
        full_times={},
        full_events={},
        busy=sum(int(g["enqueues"].sum()) > 0 for g in mine.values()) > 1,
        counted=counted,
        drops=socket_drops(run, inode) if is_sampled else {},
    )
    sockets = _groups(run, ns, mine)
    interval = interval_s(run)
    for k, g in sockets.items():
        f = full_intervals(g)
        # The socket's own drop counter, where ss showed it, says whether those overflows were its
        # own (a neighbour's were counted in the same namespace and seconds).
        dropped = ns.own_drops(k) != 0
        if not f.empty and dropped and (not counted or bool(samples_near(overflows, f["time_s"], interval).any())):
            ns.full_times[k] = f["time_s"].astype(float).tolist()
            ns.full_events[k] = int(g["full_events"].sum())
    return ns, sockets
