"""Wording of accept_queue_overflow (rule: analysis/rules/accept_queue/).

The templates of each link of its evidence chain, the saturation model's
sentence, and the phrases the templates need (errors, limits, shared counters).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analysis.findings import Link, plain

from .base import Wording, by_step
from .numbers import is_missing, join_words, number
from .servers import server_knob
from .template import Missing, Opt, Part, fill

KIND = "accept_queue_overflow"
TITLE = "TCP accept queue overflow"
CAUSES = {
    "sizing": "backlog too small for the bursts (sizing)",
    "stall": "the application stopped calling accept() (stall)",
    "capacity": "arrivals outran the accept path (capacity)",
    "unclassified": "the listener's own counter says it dropped; how it overflowed was not seen (unclassified)",
    "probe_gap": "cause unknown: the probe printed nothing for seconds of the overflow (probe_gap)",
}

TEMPLATES: dict[tuple[str, str], tuple[Part, ...]] = {
    ("symptom", "client_connects"): (
        "Clients: {attempts} connection attempts, {ok} answered",
        Opt(", errors: {errors_text}", ", no errors"),
        ". ",
        Opt("Connect latency p50 {connect_latency[p50_ms]} ms, p99 {connect_latency[p99_ms]} ms; "),
        Opt(
            "{connects_waited_syn_retry} connects took >= {SYN_RETRY_S} s, the mark of a dropped SYN "
            "retried after the initial RTO."
        ),
        Opt(" TCPSynRetrans in {syn_retrans_netns}: {syn_retrans}.", " The client's TCPSynRetrans was not sampled."),
        Opt(" The retransmits probe saw {syn_retrans_to_listener} SYN retransmits toward this listener."),
    ),
    ("symptom", "local_clients"): (
        "No lab client log; a client on this host retried its SYNs toward this listener",
        Opt(": the retransmits probe saw {syn_retrans_to_listener} SYN retransmits toward it"),
        Opt(" (TCPSynRetrans in the client's namespace {syn_retrans_netns}: {syn_retrans}, all its connects)"),
        ".",
        Opt(" ss showed its queue at up to {ss_recv_q_max} of {ss_send_q}."),
        Opt(" ListenDrops {listen_drops}."),
    ),
    ("symptom", "server_side_only"): (
        "The client side is not visible in this capture: {client_side_text}. From the server side: ",
        Opt("ss showed its queue at up to {ss_recv_q_max} of {ss_send_q}", "ss did not list this listener"),
        Opt(" (above the limit in {ss_full_samples_text})"),
        Opt("; it re-sent {synack_retrans_by_listener} SYN-ACKs"),
        Opt("; ListenDrops {listen_drops}"),
        ".",
    ),
    ("symptom", "syn_retrans_only"): (
        "No client-side timings were captured; ",
        Opt("TCPSynRetrans in {syn_retrans_netns} rose by {syn_retrans}.", "TCPSynRetrans was not sampled either."),
    ),
    ("symptom", "not_captured"): ("No client-side symptom was captured in this run.",),
    ("counter", "listen_overflows"): (
        "Kernel counter: TcpExt.ListenOverflows",
        Opt(" in {netns_label}"),
        " rose by ",
        Opt("{listen_overflows}", "an amount not recorded"),
        Opt(" over the capture, {listen_overflows_in_window} of them in the window"),
        Opt("; ListenDrops {listen_drops}"),
        Opt("; this listener's own drop counter (sk_drops, ss -m) +{listener_drops}"),
        ".",
        Opt(" {reqq_note}"),
        Opt(" {share_text}"),
        Opt(
            " PassiveOpens rose by {passive_opens} over the probe's intervals there, and the probe counted "
            "{probe_queued} connections queued on the namespace's listeners."
        ),
    ),
    ("counter", "no_overflows"): ("Kernel counter: ListenOverflows did not move.",),
    ("counter", "listener_drops"): (
        "Kernel counter: this listener's own drop counter (sk_drops, ss -m) rose by {listener_drops}",
        Opt("; TcpExt.ListenOverflows in {netns_label} rose by {listen_overflows}"),
        Opt(", ListenDrops by {listen_drops}"),
        Opt(" ({listeners_dropping} listener(s) of the namespace dropped)"),
        ". The kernel counts every SYN and final ACK a listener drops on that listener: "
        "no other listener's drops are in it.",
    ),
    ("counter", "overflows_not_here"): (
        "Kernel counter: TcpExt.ListenOverflows",
        Opt(" in {netns_label}"),
        " rose by {listen_overflows}, but this listener was never seen full, so none of them were its drops",
        Opt(
            " (the probe saw {listeners_seen_full} other listener(s) full there)",
        ),
        ".",
    ),
    ("counter", "not_sampled"): ("Kernel counter: this listener's namespace was not sampled (capture with --netns).",),
    ("probe", "queue_full"): (
        "Probe: the queue was full (depth > limit {limit}) in {intervals_full} of {intervals_active} active intervals",
        Opt(" of {interval_s} s"),
        Opt(", {full_events} times at enqueue"),
        Opt("; max depth {depth_max}"),
        Opt("; {enqueues} connections queued, {accepted} accepted"),
        ".",
        Opt(
            " The application changed the limit while it ran: {limit_changes_text}; {limit} was in force "
            "when it overflowed."
        ),
        Opt(" {group_text}"),
    ),
    ("counter", "own_drops_zero"): (
        "Kernel counter: this socket's own drop counter (sk_drops, ss -m) did not move while it was full",
        Opt(", though TcpExt.ListenOverflows in {netns_label} rose by {listen_overflows_in_window} then"),
        ": no connection met its full queue; the namespace's overflows were other sockets' drops.",
    ),
    ("counter", "drops_not_overflows"): (
        "Kernel counter: this socket's own drop counter (sk_drops, ss -m) rose by {listener_drops}, but the probe "
        "read its queue at every enqueue and it never reached its limit: these were not overflows (a listener "
        "counts there the RSTs and stray segments it discards too).",
    ),
    ("counter", "no_listen_drops"): (
        "Kernel counter: this socket's own drop counter (sk_drops, ss -m) rose by {listener_drops}, but its "
        "namespace {netns_label} counted no ListenDrops, where the kernel counts every connection a listener "
        "drops for want of room: these were other discards (a retransmitted SYN that reaches a connection "
        "still being set up, an RST, a stray segment), not overflows.",
    ),
    ("probe", "not_sampled"): (
        "Probe: its queue reached depth {depth_max} against limit {limit}",
        Opt(" ({full_events} enqueues left it full)"),
        ", in namespace {netns}, which this capture did not sample: no kernel counter or ss row to judge it by. "
        "Run `{command}`.",
    ),
    ("probe", "never_full"): (
        "Probe: max depth {depth_max} against limit {limit} over {intervals_active} active intervals; never full.",
    ),
    ("probe", "full_no_drops"): (
        "Probe: the queue reached its limit + 1 (depth > limit {limit}) in {intervals_full} of {intervals_active} "
        "active intervals",
        Opt(", {full_events} times at enqueue"),
        Opt("; max depth {depth_max}"),
        ".",
    ),
    ("counter", "no_overflows_then"): (
        "Kernel counter: ListenOverflows",
        Opt(" in {netns_label}"),
        " did not rise in those intervals: no connection met the full queue, none was dropped.",
    ),
    ("probe", "no_full_listener_seen"): ("Probe: {probe_status_text}.",),
    ("cause", "sizing"): (
        "Cause: ",
        Opt("{limit_text}. ", "the listener's limit was not seen. "),
        Opt("Up to {peak_enqueues_per_interval} connections arrived in one interval while the queue ", "The queue "),
        "drained by each interval's end ({full_at_end_text}): bursts larger than the backlog.",
        Opt("{model_text}"),
    ),
    ("cause", "stall"): (
        "Cause: the queue was full at the end of {intervals_stalled} interval(s) in which the listener "
        "accepted nothing: the application stopped calling accept().",
        Opt(" {limit_sentence}."),
        Opt("{model_text}"),
    ),
    ("cause", "capacity"): (
        "Cause: the queue overflowed and still held a backlog at the end of {longest_full_run_with_accepts} "
        "consecutive intervals while the application ",
        Opt("accepted {accept_rate_per_s}/s on average", "kept accepting"),
        ": arrivals outran the accept path.",
        Opt("{model_text}"),
    ),
    ("cause", "unattributed"): (
        "Cause: not attributed — no listener the probe tracked was seen full (depth > limit) while the counter "
        "rose, so no listener is named: {reason_text}.",
        Opt(" Listeners ss showed above their limit: {ss_full_listeners}."),
        Opt(" Listeners the probe saw one short of full then: {near_full_listeners}."),
    ),
    ("cause", "unclassified"): (
        "Cause: the listener dropped {listener_drops} connection attempts, by its own counter; whether bursts "
        "outgrew its backlog (sizing), the application stopped accepting (stall) or arrivals outran it "
        "(capacity) needs the probe's per-interval depth, which this capture does not have for it.",
    ),
    ("fix", "unclassified"): (
        "Fix: nothing blind. Capture with the accept-queue probe (`{command}`) to see how it overflows, then "
        "apply that cause's fix; raising the backlog cures only bursts.",
    ),
    ("cause", "probe_gap"): (
        "Cause: unknown. The probe printed nothing at all (no listener) {gaps_text}, inside this listener's "
        "overflow, and its next row sums those seconds: a stall of the accept loop there would read as "
        "accepts. ",
        Opt("The printed rows alone read {rows_alone_read}; not concluded. ", "Not concluded. "),
        Opt("{limit_sentence}."),
    ),
    ("fix", "probe_gap"): (
        "Fix: nothing blind. Capture again (`{command}`) to see every interval of the overflow, then apply "
        "that cause's fix; raising the backlog cures only bursts.",
        Opt(" {group_fix}"),
    ),
    ("fix", "sizing"): (
        "Fix: raise the listen() backlog",
        Opt(" to about {backlog_suggested} (twice the largest burst seen)"),
        "; {somaxconn_verdict}.",
        Opt(" For {server}: {server_knob}."),
        Opt(" {group_fix}"),
    ),
    ("fix", "stall"): (
        "Fix: keep the accept path from blocking (accept in its own goroutine/thread, no slow work "
        "before the next accept()). A bigger backlog is not a cure",
        Opt(
            ": at {arrival_rate_before_per_s}/s the queue holds {seconds_of_arrivals_the_queue_holds} s of arrivals",
        ),
        Opt("; the stall seen lasted at least {stalled_seconds_seen} s"),
        ".",
        Opt(" For {server}: {server_knob}."),
        Opt(" {group_fix}"),
    ),
    ("fix", "capacity"): (
        "Fix: add accept/processing capacity (more workers, SO_REUSEPORT listeners); "
        "a bigger backlog adds waiting time, not throughput.",
        Opt(" For {server}: {server_knob}."),
        Opt(" {group_fix}"),
    ),
    ("verification", "rerun"): (
        "Verify: after the change run `{command}` and expect ",
        Opt("ListenOverflows +{expect_listen_overflows}, ", "no ListenOverflows, "),
        "no interval with depth > limit",
        Opt(", and connect p99 below {expect_connect_p99_ms_below:.0f} ms"),
        ".",
    ),
}

MODEL_TEMPLATES: dict[str, tuple[Part, ...]] = {
    "mm1k": (
        " Model: at the measured {lam_per_s} attempts/s and {mu_per_s} accepts/s",
        Opt(
            " per member of the {members} (new connections are hashed evenly over them), with room for "
            "K = {capacity_k} each",
            " with room for K = {capacity_k}",
        ),
        ", M/M/1/K predicts {predicted_pct} % of attempts overflow",
        Opt(" (mean queue wait {predicted_wait_ms} ms)"),
        Opt("; measured {measured_pct} %", "; the measured share is unknown (no attempts counted)"),
        ".",
    ),
    "burst": (
        " Model: a burst of at least {burst} new connections (the busiest interval) into room for "
        "K = {capacity_k} (limit + 2) ",
        Opt("drops the first attempt of {predicted_pct} % of them", "cannot be sized (no connection counted)"),
        Opt(
            "; measured {measured_pct} % of all attempts overflowed (retries included)",
            "; the measured share is unknown (no attempts counted)",
        ),
        ".",
    ),
    "not_applicable": (
        " Model: none applies — a stopped accept loop has no service rate, so no queueing model predicts it; "
        "the queue holds (limit + 1) / arrival rate seconds of arrivals, then drops.",
    ),
}

BINDING_KNOBS = {
    "app_backlog": "the application's listen() backlog",
    "somaxconn": "net.core.somaxconn",
}

UNATTRIBUTED_REASONS = {
    "probe_not_run": "the accept_queue probe did not run (or not to the end) in this capture",
    "listener_not_tracked": "ss saw a listener full that the probe did not track (it tracks the first 32 "
    "listeners it sees)",
    "interval_too_coarse": "the probe saw listeners near full but not over the limit at its interval ends; "
    "the interval is too coarse to tell which queue dropped",
    "not_seen": "the probe ran and saw no listener full; a listener beyond its slots, or drops between its "
    "enqueues (a SYN queue full, or a final ACK) are possible",
}

RESULT_WORDS = {
    "connect_timeout": "connect() timed out",
    "connect_refused": "connect() refused",
    "connect_error": "connect() failed otherwise",
    "reset": "reset",
    "io_timeout": "timed out waiting for the reply",
    "io_error": "failed while reading or writing",
}


def model_sentence(model: Mapping[str, Any] | None) -> str:
    """The saturation model's prediction as a sentence ("" when there is none)."""
    if not isinstance(model, Mapping) or model.get("kind") not in MODEL_TEMPLATES:
        return ""
    try:
        return " " + fill(MODEL_TEMPLATES[str(model["kind"])], plain(model))
    except Missing:
        return ""


def _errors(link: Link, ev: dict[str, Any]) -> None:
    """The lab client's failed attempts by result, in words."""
    if isinstance(ev.get("errors"), Mapping):
        ev["errors_text"] = join_words(
            [
                f"{number(n)} {RESULT_WORDS.get(str(name), str(name).replace('_', ' '))}"
                for name, n in ev["errors"].items()
            ]
        )


def _symptom(link: Link, ev: dict[str, Any]) -> None:
    if not is_missing(ev.get("ss_samples_full")) and ev["ss_samples_full"] > 0:
        ev["ss_full_samples_text"] = f"{number(ev['ss_samples_full'])} sample(s)"
    if link.key == "server_side_only":
        st = ev.get("retransmits_probe")
        ev["client_side_text"] = (
            "no lab client log, and the retransmits probe did not run, so SYN retries of a local client "
            "toward it could not be seen"
            if st != "ok"
            else "no lab client log, and no client on this host retried a SYN toward it (its clients are "
            "elsewhere, or none of their SYNs was dropped)"
        )


def _counter(link: Link, ev: dict[str, Any]) -> None:
    if ev.get("reqq_full_cookies"):
        ev["reqq_note"] = (
            f"TCPReqQFullDoCookies {number(ev['reqq_full_cookies'])}: the SYN queue, which shares the same "
            "limit, filled too and the kernel answered with syncookies."
        )
    ev["share_text"] = _share_text(ev)


def _share_text(ev: Mapping[str, Any]) -> str:
    """How a namespace's overflows split among the listeners seen full ("" for one listener)."""
    n = ev.get("listeners_seen_full")
    parts = []
    if not is_missing(n) and n > 1:
        share, others = ev.get("full_events_share_pct"), ev.get("others") or []
        text = (
            f"The counter is per namespace and {number(n)} listeners were seen full there, so these overflows "
            "are shared"
        )
        if not is_missing(share):
            text += f"; this one had {number(share)} % of their full events"
            text += " and dominates" if ev.get("dominant") else ""
        if others:
            text += f" (others: {join_words([str(o) for o in others])})"
        parts.append(text + ".")
    un = ev.get("listen_overflows_unmatched")
    if not is_missing(un) and un > 0:
        parts.append(f"{number(un)} of them were counted outside the intervals any listener was seen full.")
    return " ".join(parts)


LIMIT_CHANGES_SHOWN = 3


def _limit_change(c: dict[str, Any]) -> str:
    """'from 32 to 0 at 3.0 s (memcached pid 7 called listen(fd, 0) at 2.4 s)'; the call when the probe saw it."""
    text = f"from {number(c['from'])} to {number(c['to'])} at {number(c['at_rel_s'])} s"
    call = c.get("listen")
    if call:
        text += (
            f" ({call['comm']} pid {number(call['pid'])} called listen(fd, {number(call['backlog'])})"
            f" at {number(call['at_rel_s'])} s)"
        )
    return text


def _member_text(m: Mapping[str, Any]) -> str:
    """One member of a group by its own numbers: 'socket 12 (aqserver pid 4) accepted 288, max depth 2 of 16 ...'."""
    who = f" ({m['comm']} pid {number(m['pid'])})" if m.get("comm") and not is_missing(m.get("pid")) else ""
    nums = []
    if not is_missing(m.get("accepted")):
        nums.append(f"accepted {number(m['accepted'])}")
    if not is_missing(m.get("depth_max")):
        nums.append(f"max depth {number(m['depth_max'])} of {number(m['limit'])}")
    nums.append("drops " + (number(m["drops"]) if not is_missing(m.get("drops")) else "not recorded"))
    return f"socket {number(m['sock_ino'])}{who} {join_words(nums)}"


def _group(ev: dict[str, Any]) -> None:
    """The SO_REUSEPORT group beside a member's numbers, or that a group was judged as one queue."""
    others = ev.get("group_others")
    if others:
        clean = [m for m in others if m.get("drops") == 0 or (is_missing(m.get("drops")) and not m.get("full_events"))]
        ev["group_text"] = (
            f"It is one of the {len(others) + 1} sockets of a SO_REUSEPORT group on this address and port, each "
            f"with its own queue; {len(clean)} of the {len(others)} others dropped nothing. The others: "
            + "; ".join(_member_text(m) for m in others)
            + "."
        )
    elif not is_missing(ev.get("group_members")):
        ev["group_text"] = (
            f"Every one of the {number(ev['group_members'])} sockets of its SO_REUSEPORT group overflowed: "
            "judged as one queue, their counts and limits summed."
        )


def _probe(link: Link, ev: dict[str, Any]) -> None:
    _group(ev)
    changes = ev.get("limit_changes")
    if changes:
        shown = [_limit_change(c) for c in changes[:LIMIT_CHANGES_SHOWN]]
        if len(changes) > LIMIT_CHANGES_SHOWN:  # memcached flaps 0 <-> 32 as its connections close
            more = len(changes) - LIMIT_CHANGES_SHOWN
            shown.append(f"{more} more change{'s' if more > 1 else ''} up to {number(changes[-1]['at_rel_s'])} s")
        ev["limit_changes_text"] = join_words(shown)
    if link.key != "no_full_listener_seen":
        return
    st = ev.get("probe_status")
    ev["probe_status_text"] = (
        "the accept_queue probe ran, but no listener it tracked was seen full"
        + (
            f" ({number(ev['listeners_tracked'])} tracked in this namespace)"
            if not is_missing(ev.get("listeners_tracked"))
            else ""
        )
        if st == "ok"
        else f"no listener was seen full: the accept_queue probe did not run to the end (status {st})"
        if not is_missing(st)
        else "no listener was seen full: the accept_queue probe was not run in this capture"
    )


def _cause(link: Link, ev: dict[str, Any]) -> None:
    if link.key == "unattributed":
        ev["reason_text"] = UNATTRIBUTED_REASONS.get(str(ev.get("reason")), UNATTRIBUTED_REASONS["not_seen"])
    ev["model_text"] = model_sentence(ev.get("model"))
    _limit(ev)
    gaps = ev.get("probe_gaps") or []
    ev["gaps_text"] = join_words(
        [f"from {number(g['from_rel_s'])} s to {number(g['to_rel_s'])} s" for g in gaps if isinstance(g, Mapping)]
    )
    n = ev.get("intervals_full_at_end")
    ev["full_at_end_text"] = (
        "how often it was still full at an interval end was not recorded"
        if is_missing(n)
        else "never full at an interval end"
        if n == 0
        else f"full at the end of {number(n)} interval(s), never two in a row"
    )


def _limit(ev: dict[str, Any]) -> None:
    """The effective limit, and which knob binds it when both are known."""
    knob = BINDING_KNOBS.get(str(ev.get("binding_knob")))
    lim, req, som = ev.get("limit_effective"), ev.get("backlog_requested"), ev.get("somaxconn")
    if is_missing(lim):
        return
    if knob and not is_missing(req) and not is_missing(som):
        ev["limit_text"] = (
            f"effective limit {number(lim)} = min(requested backlog {number(req)}, somaxconn "
            f"{number(som)}); the binding knob is {knob}"
        )
    else:
        gone = [w for w, v in (("the requested backlog", req), ("somaxconn", som)) if is_missing(v)]
        unknown = f"{join_words(gone)} {'were' if len(gone) > 1 else 'was'}"
        ev["limit_text"] = (
            f"effective limit {number(lim)}; {unknown} not seen, so which knob binds is unknown"
            if gone
            else f"effective limit {number(lim)}"
        )
    ev["limit_sentence"] = ev["limit_text"][0].upper() + ev["limit_text"][1:]


GROUP_FIX = (
    "This socket is one of the {n} of a SO_REUSEPORT group: the kernel hashes each new connection to a member "
    "whatever its queue holds, so the clients hashed to this one time out while the others are served. The fix "
    "is in the process that owns this member (its accept loop, or what blocks it); more members or a bigger "
    "backlog do not help it, and the kernel moves queued connections off a member only when it closes its "
    "socket (net.ipv4.tcp_migrate_req=1)."
)


def _fix(link: Link, ev: dict[str, Any]) -> None:
    knob = server_knob(ev.get("server"), link.key)
    if knob:
        ev["server_knob"] = knob
    if not is_missing(ev.get("group_members")):
        ev["group_fix"] = GROUP_FIX.format(n=number(ev["group_members"]))
    if link.key != "sizing":
        return
    som = ev.get("somaxconn")
    ev["somaxconn_verdict"] = (
        "somaxconn was not sampled: check that it allows as much (the limit is the smaller of the two)"
        if is_missing(som)
        else f"somaxconn {number(som)} must be raised too (the limit is the smaller of the two)"
        if ev.get("somaxconn_needed")
        else f"somaxconn {number(som)} already allows it"
    )


WORDING = Wording(
    kind=KIND,
    title=TITLE,
    causes=CAUSES,
    templates=TEMPLATES,
    unseen=(
        "the queue between samples (a burst that fills and drains it within an interval) and how a listener "
        "overflowed (burst sizing, a stalled accept loop or capacity); each listener's own drop counter still "
        "says which one dropped"
    ),
    derive=by_step(
        {"symptom": _symptom, "counter": _counter, "probe": _probe, "cause": _cause, "fix": _fix}, every=(_errors,)
    ),
)
