"""accept_queue_overflow findings a listener's own drop counter (its sk_drops, from ss -m) names
where the probe did not see it full (a tier that misses stalls, a probe that did not run, an
interval too coarse), or rules out (the probe followed the socket and it never filled)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ...derived import interval_s
from ...derived.counters import total_delta
from ...derived.listener_sockets import SocketKey, drop_key
from ...findings import Finding, Link
from ..base import RunView
from .chain import KIND, socket_subject, symptom_link, unattributed_reason
from .sockets import Namespace

# -- a listener named by its own drop counter ---------------------------------------------------


def _own_drops_probe(run: RunView, probe_ev: dict[str, Any] | None) -> Link:
    """What the probe saw of a listener its own counter names: not full, or nothing at all."""
    if probe_ev is not None:
        return Link("probe", "never_full", probe_ev)
    status = run.probe_status("accept_queue")
    return Link(
        "probe",
        "no_full_listener_seen",
        {
            "probe_status": status,
            "reason": unattributed_reason(status, [], [], interval_s(run))
            if status != "ok"
            else "listener_not_tracked",
        },
    )


def _drops_not_overflows(rows: pd.DataFrame | None) -> bool:
    """The probe followed this socket's every enqueue (a tier that reads the socket each one is
    queued on) and never saw its queue reach its limit: a rise of its sk_drops then is not an
    overflow (the kernel also counts there the RSTs and stray segments a listener discards)."""
    if rows is None or rows.empty or int(rows["sock_ino"].iloc[0]) == 0:
        return False
    return bool((rows[["depth_max", "depth_now"]].max(axis=1) < rows["limit"]).all())


def from_own_drops(
    run: RunView, ns: Namespace, key: SocketKey, probe_ev: dict[str, Any] | None, rows: pd.DataFrame | None = None
) -> Finding:
    """A socket whose own sk_drops rose while the probe did not see it full (a tier that misses
    stalls, a probe that did not run, an interval too coarse): named from the kernel's own
    per-socket counter; how it overflowed stays unclassified. Absent when the probe followed
    the socket and its queue never reached its limit."""
    own = ns.own_drops(key) or 0
    subject = socket_subject(run, key, ns)
    counter_ev = {
        "netns_label": run.netns_label(ns.netns),
        "listener_drops": own,
        "listen_overflows": total_delta(run, ns.netns, "ListenOverflows") if ns.counted else None,
        "listen_drops": total_delta(run, ns.netns, "ListenDrops") if ns.sampled else None,
        "listeners_dropping": len([n for n in ns.drops.values() if n > 0]),
    }
    if _drops_not_overflows(rows) and probe_ev is not None:
        chain = [Link("probe", "never_full", probe_ev), Link("counter", "drops_not_overflows", counter_ev)]
        return Finding(KIND, "absent", subject, chain=chain)
    if counter_ev["listen_drops"] == 0:
        # Every overflow and every SYN or ACK a listener drops for want of room is counted in its
        # namespace's ListenDrops; a socket's drops with none there were other discards.
        chain = [_own_drops_probe(run, probe_ev), Link("counter", "no_listen_drops", counter_ev)]
        return Finding(KIND, "absent", subject, chain=chain)
    command = f"make capture NETNS={run.netns_label(ns.netns)} PROBES=accept_queue DURATION=60"
    return Finding(
        KIND,
        "confirmed",
        subject,
        cause_class="unclassified",
        chain=[
            symptom_link(run, ns.netns, key),
            Link("counter", "listener_drops", counter_ev),
            _own_drops_probe(run, probe_ev),
            Link("cause", "unclassified", {"listener_drops": own}),
            Link("fix", "unclassified", {"command": command}),
            Link("verification", "rerun", {"command": command, "expect_listen_overflows": 0}),
        ],
    )


def unseen_by_probe(run: RunView, ns: Namespace, mine: dict[SocketKey, pd.DataFrame]) -> list[Finding]:
    """Sockets whose own drops rose and that the probe never reported on at all."""
    seen = {drop_key(k.laddr, k.lport, k.sock_ino) for k in mine}
    seen |= {drop_key(m.laddr, m.lport, m.sock_ino) for members in ns.merged.values() for m in members}
    out = []
    for (laddr, lport, ino), n in sorted(ns.drops.items()):
        if n > 0 and (laddr, lport, ino) not in seen:
            out.append(from_own_drops(run, ns, SocketKey(ns.netns, laddr, lport, ino), None))
    return out
