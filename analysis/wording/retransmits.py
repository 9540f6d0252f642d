"""Wording of retransmit_storm (rule: analysis/rules/retransmits.py).

The templates of each link of its evidence chain and the phrases they need
(the lab client's view, the probe's recursion misses, the loss the lab injected).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analysis.findings import Link
from analysis.kernel import SYN_RETRY_US

from .base import Wording, by_step
from .numbers import is_missing, join_words, number
from .template import Opt, Part

KIND = "retransmit_storm"
TITLE = "TCP retransmit storm"
CAUSES = {
    "data_loss": "data segments lost on the path (data_loss)",
    "syn_loss": "connection attempts lost (syn_loss)",
    "remote_accept_queue_full": "packets dropped by a full accept queue at the server",
    "local_accept_queue_full": "final ACKs dropped by this server's full accept queue",
    "unknown": "unknown: the accept-queue cross-check could not run",
}

TEMPLATES: dict[tuple[str, str], tuple[Part, ...]] = {
    ("symptom", "lab_client"): ("Lab client: {client_text}.",),
    ("symptom", "rate_only"): ("No client-side view in this run; the rate below is the symptom.",),
    ("counter", "retrans_segs"): (
        "Kernel counters",
        Opt(" in {netns_label}"),
        ": TcpRetransSegs +{kernel_retrans_segs}",
        Opt(
            " against {out_segs_in_window} segments sent in the window ({retrans_rate_pct} %)",
            " (segments sent in the window not measured)",
        ),
        "; TCPSynRetrans +{kernel_syn_retrans}",
        Opt(" for {new_connections_in_window} new connections"),
        ". Probe vs kernel: {probe_retrans_segs} vs {kernel_retrans_segs} segments",
        Opt(" ({retrans_diff_pct} %)"),
        ", SYN {probe_syn_retrans} vs {kernel_syn_retrans}; {misses_text}.",
    ),
    ("probe", "endpoint_retransmits"): (
        "Probe: {data_segs} data segments retransmitted",
        Opt(" in {data_events} events (GSO)"),
        ", {syn_segs} SYN and {synack_segs} SYN-ACK retransmits",
        Opt(" over {intervals} intervals"),
        Opt("; peak {peak_segs_per_s}/s"),
        Opt(
            ". Its {flows_retransmitting} retransmitting flow(s) sent {flow_data_segs_out} data segments "
            "and re-sent {flow_rate_pct} % of them"
        ),
        Opt(", not counting {flow_spurious_segs} re-sent segments their peers reported received twice (D-SACK)"),
        Opt("; worst flow (ports {worst_flow}): {worst_flow_rate_pct} %"),
        Opt("; one flow re-sent {flow_share_pct} % of the endpoint's retransmitted data"),
        ".",
    ),
    ("probe", "below_threshold"): (
        "Probe: {data_segs} data, {syn_segs} SYN and {synack_segs} SYN-ACK retransmits, ",
        Opt("{flow_rate_pct} % of the {flow_data_segs_out} data segments its own flows sent"),
        Opt(" (less {flow_spurious_segs} re-sent segments the peers reported received twice, D-SACK)"),
        Opt("{rate_pct} % of segments sent in the namespace"),
        ": below a storm.",
    ),
    ("cause", "data_loss"): (
        "Cause: data segments ",
        Opt("{direction} "),
        "are lost on the path and re-sent",
        Opt("{lab_text}"),
        ".",
    ),
    ("cause", "syn_loss"): (
        "Cause: connection attempts ",
        Opt("{direction} "),
        "lose their SYN (or SYN-ACK) and wait for a retry",
        Opt("{lab_text}"),
        ".",
    ),
    ("cause", "remote_accept_queue_full"): (
        "Cause: the server's accept queue",
        Opt(" on {direction}"),
        " was full",
        Opt(" in {listener_full_intervals} interval(s)"),
        Opt(" (ListenOverflows +{listen_overflows} in its namespace; {accept_queue_unseen})"),
        ": a full queue silently drops SYNs and final ACKs (with the data on them); these are the client's "
        "retries (see accept_queue_overflow).",
    ),
    ("fix", "remote_accept_queue_full"): ("Fix: the accept-queue finding's fix; the network is not at fault.",),
    ("cause", "local_accept_queue_full"): (
        "Cause: the accept queue of this server's listener",
        Opt(" ({direction})"),
        " was full",
        Opt(" in {listener_full_intervals} interval(s)"),
        Opt(" (ListenOverflows +{listen_overflows}; {accept_queue_unseen})"),
        ": the clients' final ACKs met the full queue and were dropped, so the kernel re-sent its SYN-ACKs "
        "(see accept_queue_overflow).",
    ),
    ("probe", "dsack_unread"): (
        "Probe: {data_segs} data segments re-sent",
        Opt(", {flow_unread_segs} of them by flows the socket scan never listed"),
        ": whether their peers had received them already (tcp_info dsack_dups: reordering, not loss) was not "
        "read, and without them the rest is no storm. Run `{command}`.",
    ),
    ("cause", "unknown"): (
        "Cause: unknown. The retransmits ",
        Opt("{direction} "),
        "could be SYNs and final ACKs a full accept queue at the server dropped, or {was_text}; "
        "what would tell them apart was not captured: {missing_text}.",
    ),
    ("fix", "unknown"): (
        "Fix: nothing yet. Capture again with the accept-queue probe and the server's namespace sampled "
        "(`make capture PROBES=accept_queue,retransmits NETNS=...`), then act on what it shows.",
    ),
    ("fix", "local_accept_queue_full"): ("Fix: the accept-queue finding's fix; the network is not at fault.",),
    ("fix", "data_loss"): (
        "Fix: find the lossy hop",
        Opt(" toward {raddr}"),
        " (interface drops: ip -s link; qdisc drops: tc -s qdisc; firewall counters), and fix or route around "
        "it. Retransmits follow loss; tuning TCP does not remove it.",
    ),
    ("fix", "syn_loss"): (
        "Fix: find where SYNs",
        Opt(" toward port {service_port}"),
        " are dropped: a full accept queue at the server (ListenOverflows there), a firewall or a rate limit.",
    ),
    ("verification", "rerun"): (
        "Verify: run `{command}` after the change and expect retransmits",
        Opt(" below {expect_rate_pct_below} % of segments", " to fall"),
        ".",
    ),
}


def _symptom(link: Link, ev: dict[str, Any]) -> None:
    ev["client_text"] = _client_text(ev)


def _client_text(ev: Mapping[str, Any]) -> str:
    """What the lab client (iperf3, or the connect loop) saw; "" without one."""
    ip = ev.get("iperf3")
    if isinstance(ip, Mapping):
        bps, rt = ip.get("bits_per_second"), ip.get("retransmits")
        parts = []
        if not is_missing(bps):
            parts.append(f"iperf3 sent at {float(bps) / 1e6:.0f} Mbit/s")
        if not is_missing(rt):
            parts.append(f"counted {number(rt)} retransmits" if parts else f"iperf3 counted {number(rt)} retransmits")
        if parts:
            return " and ".join(parts)
    if not is_missing(ev.get("attempts")):
        text = f"{number(ev['attempts'])} connects"
        if not is_missing(ev.get("ok")):
            text += f", {number(ev['ok'])} ok"
        if not is_missing(ev.get("connects_waited_syn_retry")):
            waited = number(ev["connects_waited_syn_retry"])
            text += f", {waited} waited >= {number(SYN_RETRY_US / 1e6)} s for a SYN retry"
        if not is_missing(ev.get("connect_p99_ms")):
            text += f", connect p99 {number(ev['connect_p99_ms'])} ms"
        return text
    return ""


def _counter(link: Link, ev: dict[str, Any]) -> None:
    m = ev.get("probe_recursion_misses")
    ev["misses_text"] = (
        "recursion misses (events the kernel did not run the probe for) were not reported"
        if is_missing(m)
        else "the kernel never skipped the probe (no recursion misses)"
        if m == 0
        else f"the kernel skipped the probe {number(m)} time(s) (recursion misses)"
    )


_WAS = {"data_loss": "data segments lost on the way", "syn_loss": "connection attempts lost on the way"}


def _cause(link: Link, ev: dict[str, Any]) -> None:
    if link.key == "unknown":
        ev["missing_text"] = join_words([str(m) for m in ev.get("missing") or []])
        ev["was_text"] = _WAS.get(str(ev.get("was")), "loss")
    loss, syn = ev.get("lab_injected_loss_pct"), ev.get("lab_injected_syn_loss_pct")
    dropped = [f"{number(loss)} % of packets" if not is_missing(loss) else ""]
    dropped.append(f"{number(syn)} % of SYNs" if not is_missing(syn) else "")
    dropped = [d for d in dropped if d]
    ev["lab_text"] = f" (the lab dropped {join_words(dropped)} at the receiver)" if dropped else ""


WORDING = Wording(
    kind=KIND,
    title=TITLE,
    causes=CAUSES,
    templates=TEMPLATES,
    unseen=(
        "which endpoint or flow re-sent segments, and SYN against data retransmits per endpoint (only the "
        "namespace's RetransSegs and TCPSynRetrans)"
    ),
    derive=by_step({"symptom": _symptom, "counter": _counter, "cause": _cause}),
)
