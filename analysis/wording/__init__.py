"""Human wording for findings, kept apart from the rules' logic.

Each template is keyed by (kind, link, key) and filled from the link's evidence
numbers. A template is a sequence of parts: a plain string needs every number
it names; an Opt is a clause that is left out, or replaced by its `alt` words,
when a number it names is missing (None, NaN, empty). Values are written as
words, never as Python reprs: numbers plainly, lists as "a, b and c"; a dict
never reaches a sentence. When a number a plain part needs is missing, the link
says so in words rather than guessing. tests/test_wording.py renders every
template with all of its numbers missing and with the numbers of every real
fixture.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from analysis.findings import Finding, Link, plain
from analysis.kernel import SYN_RETRY_US, TCP_TIMEWAIT_LEN_S, TW_REUSE_AFTER_S

TITLES = {
    "accept_queue_overflow": "TCP accept queue overflow",
    "retransmit_storm": "TCP retransmit storm",
    "time_wait_exhaustion": "Ephemeral ports exhausted by TIME_WAIT",
    "event_loop_saturation": "Event loop saturated",
}

CAUSE_NAMES = {
    "sizing": "backlog too small for the bursts (sizing)",
    "stall": "the application stopped calling accept() (stall)",
    "capacity": "arrivals outran the accept path (capacity)",
    "unattributed": "seen, but no single listener or endpoint can be named (unattributed)",
    "data_loss": "data segments lost on the path (data_loss)",
    "syn_loss": "connection attempts lost (syn_loss)",
    "remote_accept_queue_full": "packets dropped by a full accept queue at the server",
    "local_accept_queue_full": "final ACKs dropped by this server's full accept queue",
    "short_connections_client_closes": "short connections closed first by this side",
    "loop_saturated": "the loop always finds work ready",
}

STATUS_WORDS = {
    "confirmed": "confirmed",
    "suspected": "suspected",
    "absent": "absent",
    "not_checked": "not checked",
}

LINK_TITLES = {
    "symptom": "Symptom",
    "counter": "Kernel counter",
    "probe": "Probe",
    "cause": "Cause",
    "fix": "Fix",
    "verification": "Verify",
}

BINDING_KNOBS = {
    "app_backlog": "the application's listen() backlog",
    "somaxconn": "net.core.somaxconn",
}


@dataclass(frozen=True)
class Opt:
    """A clause rendered only when every number it names is there; else `alt` (which may name others)."""

    text: str
    alt: str = ""


Part = str | Opt

# Constants every template may name, besides the link's evidence.
CONSTANTS: dict[str, Any] = {
    "TIME_WAIT_S": TCP_TIMEWAIT_LEN_S,
    "SYN_RETRY_S": SYN_RETRY_US / 1e6,
    "TW_REUSE_AFTER_S": TW_REUSE_AFTER_S,
}

TEMPLATES: dict[tuple[str, str, str], tuple[Part, ...]] = {
    # --- accept queue ----------------------------------------------------------------------------
    ("accept_queue_overflow", "symptom", "client_connects"): (
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
    ("accept_queue_overflow", "symptom", "local_clients"): (
        "No lab client log; a client on this host retried its SYNs toward this listener",
        Opt(": the retransmits probe saw {syn_retrans_to_listener} SYN retransmits toward it"),
        Opt(" (TCPSynRetrans in the client's namespace {syn_retrans_netns}: {syn_retrans}, all its connects)"),
        ".",
        Opt(" ss showed its queue at up to {ss_recv_q_max} of {ss_send_q}."),
        Opt(" ListenDrops {listen_drops}."),
    ),
    ("accept_queue_overflow", "symptom", "server_side_only"): (
        "The client side is not visible in this capture: {client_side_text}. From the server side: ",
        Opt("ss showed its queue at up to {ss_recv_q_max} of {ss_send_q}", "ss did not list this listener"),
        Opt(" (above the limit in {ss_full_samples_text})"),
        Opt("; it re-sent {synack_retrans_by_listener} SYN-ACKs"),
        Opt("; ListenDrops {listen_drops}"),
        ".",
    ),
    ("accept_queue_overflow", "symptom", "syn_retrans_only"): (
        "No client-side timings were captured; ",
        Opt("TCPSynRetrans in {syn_retrans_netns} rose by {syn_retrans}.", "TCPSynRetrans was not sampled either."),
    ),
    ("accept_queue_overflow", "symptom", "not_captured"): ("No client-side symptom was captured in this run.",),
    ("accept_queue_overflow", "counter", "listen_overflows"): (
        "Kernel counter: TcpExt.ListenOverflows",
        Opt(" in {netns_label}"),
        " rose by ",
        Opt("{listen_overflows}", "an amount not recorded"),
        Opt(" over the capture, {listen_overflows_in_window} of them in the window"),
        Opt("; ListenDrops {listen_drops}"),
        ".",
        Opt(" {reqq_note}"),
        Opt(" {share_text}"),
    ),
    ("accept_queue_overflow", "counter", "no_overflows"): ("Kernel counter: ListenOverflows did not move.",),
    ("accept_queue_overflow", "counter", "overflows_not_here"): (
        "Kernel counter: TcpExt.ListenOverflows",
        Opt(" in {netns_label}"),
        " rose by {listen_overflows}, but this listener was never seen full, so none of them were its drops",
        Opt(
            " (the probe saw {listeners_seen_full} other listener(s) full there)",
        ),
        ".",
    ),
    ("accept_queue_overflow", "counter", "not_sampled"): (
        "Kernel counter: this listener's namespace was not sampled (capture with --netns).",
    ),
    ("accept_queue_overflow", "probe", "queue_full"): (
        "Probe: the queue was full (depth > limit {limit}) in {intervals_full} of {intervals_active} active intervals",
        Opt(" of {interval_s} s"),
        Opt(", {full_events} times at enqueue"),
        Opt("; max depth {depth_max}"),
        Opt("; {enqueues} connections queued, {accepted} accepted"),
        ".",
    ),
    ("accept_queue_overflow", "probe", "never_full"): (
        "Probe: max depth {depth_max} against limit {limit} over {intervals_active} active intervals; never full.",
    ),
    ("accept_queue_overflow", "probe", "full_no_drops"): (
        "Probe: the queue reached its limit + 1 (depth > limit {limit}) in {intervals_full} of {intervals_active} "
        "active intervals",
        Opt(", {full_events} times at enqueue"),
        Opt("; max depth {depth_max}"),
        ".",
    ),
    ("accept_queue_overflow", "counter", "no_overflows_then"): (
        "Kernel counter: ListenOverflows",
        Opt(" in {netns_label}"),
        " did not rise in those intervals: no connection met the full queue, none was dropped.",
    ),
    ("accept_queue_overflow", "probe", "no_full_listener_seen"): ("Probe: {probe_status_text}.",),
    ("accept_queue_overflow", "cause", "sizing"): (
        "Cause: ",
        Opt("{limit_text}. ", "the listener's limit was not seen. "),
        Opt("Up to {peak_enqueues_per_interval} connections arrived in one interval while the queue ", "The queue "),
        "drained by each interval's end ({full_at_end_text}): bursts larger than the backlog.",
        Opt("{model_text}"),
    ),
    ("accept_queue_overflow", "cause", "stall"): (
        "Cause: the queue was full at the end of {intervals_stalled} interval(s) in which the listener "
        "accepted nothing: the application stopped calling accept().",
        Opt(" {limit_sentence}."),
        Opt("{model_text}"),
    ),
    ("accept_queue_overflow", "cause", "capacity"): (
        "Cause: the queue overflowed and still held a backlog at the end of {longest_full_run_with_accepts} "
        "consecutive intervals while the application ",
        Opt("accepted {accept_rate_per_s}/s on average", "kept accepting"),
        ": arrivals outran the accept path.",
        Opt("{model_text}"),
    ),
    ("accept_queue_overflow", "cause", "unattributed"): (
        "Cause: not attributed — no listener the probe tracked was seen full (depth > limit) while the counter "
        "rose, so no listener is named: {reason_text}.",
        Opt(" Listeners ss showed above their limit: {ss_full_listeners}."),
        Opt(" Listeners the probe saw one short of full then: {near_full_listeners}."),
    ),
    ("accept_queue_overflow", "fix", "sizing"): (
        "Fix: raise the listen() backlog",
        Opt(" to about {backlog_suggested} (twice the largest burst seen)"),
        "; {somaxconn_verdict}.",
    ),
    ("accept_queue_overflow", "fix", "stall"): (
        "Fix: keep the accept path from blocking (accept in its own goroutine/thread, no slow work "
        "before the next accept()). A bigger backlog is not a cure",
        Opt(
            ": at {arrival_rate_before_per_s}/s the queue holds {seconds_of_arrivals_the_queue_holds} s of arrivals",
        ),
        Opt("; the stall seen lasted at least {stalled_seconds_seen} s"),
        ".",
    ),
    ("accept_queue_overflow", "fix", "capacity"): (
        "Fix: add accept/processing capacity (more workers, SO_REUSEPORT listeners); "
        "a bigger backlog adds waiting time, not throughput.",
    ),
    ("accept_queue_overflow", "verification", "rerun"): (
        "Verify: after the change run `{command}` and expect ",
        Opt("ListenOverflows +{expect_listen_overflows}, ", "no ListenOverflows, "),
        "no interval with depth > limit",
        Opt(", and connect p99 below {expect_connect_p99_ms_below:.0f} ms"),
        ".",
    ),
    # --- retransmits ------------------------------------------------------------------------------
    ("retransmit_storm", "symptom", "lab_client"): ("Lab client: {client_text}.",),
    ("retransmit_storm", "symptom", "rate_only"): ("No client-side view in this run; the rate below is the symptom.",),
    ("retransmit_storm", "counter", "retrans_segs"): (
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
    ("retransmit_storm", "probe", "endpoint_retransmits"): (
        "Probe: {data_segs} data segments retransmitted",
        Opt(" in {data_events} events (GSO)"),
        ", {syn_segs} SYN and {synack_segs} SYN-ACK retransmits",
        Opt(" over {intervals} intervals"),
        Opt("; peak {peak_segs_per_s}/s"),
        Opt(
            ". Its {flows_retransmitting} retransmitting flow(s) sent {flow_data_segs_out} data segments "
            "and re-sent {flow_rate_pct} % of them"
        ),
        Opt("; worst flow (ports {worst_flow}): {worst_flow_rate_pct} %"),
        Opt("; one flow re-sent {flow_share_pct} % of the endpoint's retransmitted data"),
        ".",
    ),
    ("retransmit_storm", "probe", "below_threshold"): (
        "Probe: {data_segs} data, {syn_segs} SYN and {synack_segs} SYN-ACK retransmits, ",
        Opt("{flow_rate_pct} % of the {flow_data_segs_out} data segments its own flows sent"),
        Opt("{rate_pct} % of segments sent in the namespace"),
        ": below a storm.",
    ),
    ("retransmit_storm", "cause", "data_loss"): (
        "Cause: data segments ",
        Opt("{direction} "),
        "are lost on the path and re-sent",
        Opt("{lab_text}"),
        ".",
    ),
    ("retransmit_storm", "cause", "syn_loss"): (
        "Cause: connection attempts ",
        Opt("{direction} "),
        "lose their SYN (or SYN-ACK) and wait for a retry",
        Opt("{lab_text}"),
        ".",
    ),
    ("retransmit_storm", "cause", "remote_accept_queue_full"): (
        "Cause: the server's accept queue",
        Opt(" on {direction}"),
        " was full",
        Opt(" in {listener_full_intervals} interval(s)"),
        ": a full queue silently drops SYNs and final ACKs (with the data on them); these are the client's "
        "retries (see accept_queue_overflow).",
    ),
    ("retransmit_storm", "fix", "remote_accept_queue_full"): (
        "Fix: the accept-queue finding's fix; the network is not at fault.",
    ),
    ("retransmit_storm", "cause", "local_accept_queue_full"): (
        "Cause: the accept queue of this server's listener",
        Opt(" ({direction})"),
        " was full",
        Opt(" in {listener_full_intervals} interval(s)"),
        ": the clients' final ACKs met the full queue and were dropped, so the kernel re-sent its SYN-ACKs "
        "(see accept_queue_overflow).",
    ),
    ("retransmit_storm", "fix", "local_accept_queue_full"): (
        "Fix: the accept-queue finding's fix; the network is not at fault.",
    ),
    ("retransmit_storm", "fix", "data_loss"): (
        "Fix: find the lossy hop",
        Opt(" toward {raddr}"),
        " (interface drops: ip -s link; qdisc drops: tc -s qdisc; firewall counters), and fix or route around "
        "it. Retransmits follow loss; tuning TCP does not remove it.",
    ),
    ("retransmit_storm", "fix", "syn_loss"): (
        "Fix: find where SYNs",
        Opt(" toward port {service_port}"),
        " are dropped: a full accept queue at the server (ListenOverflows there), a firewall or a rate limit.",
    ),
    ("retransmit_storm", "verification", "rerun"): (
        "Verify: run `{command}` after the change and expect retransmits",
        Opt(" below {expect_rate_pct_below} % of segments", " to fall"),
        ".",
    ),
    # --- TIME_WAIT --------------------------------------------------------------------------------
    ("time_wait_exhaustion", "symptom", "eaddrnotavail"): ("{eaddrnotavail_text}", Opt("{client_text}"), "."),
    ("time_wait_exhaustion", "counter", "time_wait_vs_ports"): (
        "TIME_WAIT sockets toward the endpoint reached {time_wait_max}",
        Opt(
            ", {time_wait_share_of_ports_pct} % of the {ports_in_range} ports in ip_local_port_range ({port_range})",
            " (ip_local_port_range was not sampled)",
        ),
        "; ",
        Opt(
            "each held for {time_wait_length_observed_s} s (from ss timers",
            "how long each was held was not measured (no ss timer seen before the first expiry",
        ),
        Opt("; tcp_fin_timeout={tcp_fin_timeout}"),
        ").",
    ),
    ("time_wait_exhaustion", "counter", "ports_free"): (
        "TIME_WAIT toward the endpoint peaked at {time_wait_max}",
        Opt(" of {ports_in_range} ports: room left", " (ip_local_port_range was not sampled)"),
        ". ",
        Opt(
            "TIME_WAIT lasted {time_wait_length_observed_s} s here (ss timers)",
            "How long TIME_WAIT lasts here was not measured (no active close with an ss timer before its expiry)",
        ),
        Opt("; tcp_fin_timeout={tcp_fin_timeout}"),
        ".",
        Opt(" {unrecorded_text}"),
    ),
    ("time_wait_exhaustion", "counter", "no_endpoint_near_full"): (
        "No endpoint's TIME_WAIT came near the ports it can use",
        Opt(" ({ports_in_range} in ip_local_port_range)"),
        Opt("; the most held: {busiest}"),
        ".",
    ),
    ("time_wait_exhaustion", "cause", "unattributed"): (
        "Cause: not attributed — this capture did not record the destination of the failed connects "
        "(data contract 2) and no endpoint held its ports in TIME_WAIT, so no endpoint is named. "
        "EADDRNOTAVAIL also comes from ports held by open connections, bind() before connect(), or "
        "ip_local_reserved_ports; capture with the time_wait probe of data contract 3 to see the destination.",
    ),
    ("time_wait_exhaustion", "probe", "probe_not_run"): (
        "Probe: connect() errors and active closes come from the time_wait probe, which ",
        Opt("did not run to the end here (status {probe_status})", "was not run in this capture"),
        "; without them EADDRNOTAVAIL cannot be ruled out.",
    ),
    ("time_wait_exhaustion", "probe", "active_closes"): (
        "Probe: this side closed first {active_closes} times (the peer {passive_closes})",
        Opt(", {active_close_rate_per_s}/s while it could"),
        ".",
        Opt(
            " Little's law: {closes_in_60s_before_peak} active closes in the {TIME_WAIT_S} s before the peak predict "
            "as many TIME_WAIT sockets; measured {time_wait_at_peak} ({littles_law_error_pct} %).",
            " Little's law: {closes_in_60s_before_peak} active closes in the {TIME_WAIT_S} s before the peak predict "
            "as many TIME_WAIT sockets; measured {time_wait_at_peak}.",
        ),
        Opt(
            " {lifetime_under_1s_pct} % of connections lived under 1 s (mean {mean_lifetime_ms} ms).",
            " {lifetime_under_1s_pct} % of connections lived under 1 s.",
        ),
    ),
    ("time_wait_exhaustion", "cause", "short_connections_client_closes"): (
        "Cause: short connections that this side closes first",
        Opt(" ({we_close_first_pct} % of closes)"),
        "; each holds its port {TIME_WAIT_S} s",
        Opt(", so at most {max_new_conn_per_s_without_reuse} new connections/s fit toward one endpoint"),
        Opt(" (model: at the measured {active_close_rate_per_s}/s the range lasts {ports_last_s_at_measured_rate} s)"),
        ".",
        Opt(" {sysctl_text}."),
    ),
    ("time_wait_exhaustion", "fix", "ranked"): (
        "Fix, best first: (1) reuse connections (keep-alive, a pool); (2) net.ipv4.tcp_tw_reuse=1 lets outgoing "
        "connections take a TIME_WAIT port after {TW_REUSE_AFTER_S} s (needs tcp_timestamps=1",
        Opt("; now {tcp_tw_reuse}"),
        "); (3) widen ip_local_port_range",
        Opt(" (now {ports_in_range} ports)"),
        ". tcp_fin_timeout does NOT shorten TIME_WAIT: it is the FIN_WAIT2 timeout; TIME_WAIT is fixed at "
        "{TIME_WAIT_S} s.",
    ),
    ("time_wait_exhaustion", "verification", "rerun"): (
        "Verify: `{command}` and expect ",
        Opt("{expect_eaddrnotavail}", "no"),
        " EADDRNOTAVAIL.",
    ),
    # --- epoll ------------------------------------------------------------------------------------
    ("event_loop_saturation", "symptom", "client"): (
        Opt(
            "Lab client: wrk served {wrk_text}.",
            "No client-side view in this run; the probe's numbers are the symptom.",
        ),
    ),
    ("event_loop_saturation", "symptom", "not_captured"): (
        "No client-side view in this run; the probe's numbers are the symptom.",
    ),
    ("event_loop_saturation", "counter", "no_kernel_counter"): (
        "Kernel counter: none exists for a saturated loop",
        Opt("; its listeners' Recv-Q peaked at {listener_recv_q_max}", "; its listeners' Recv-Q was not sampled"),
        Opt("; this thread accepted on port {thread_accepts_on}"),
        ".",
    ),
    ("event_loop_saturation", "probe", "never_waits"): (
        "Probe: in {intervals_never_waiting} of {intervals_with_events} busy intervals the loop spent under 5 % of "
        "the time blocked in epoll",
        Opt(" (mean {wait_share_busy_pct} %)"),
        Opt(" while on the CPU {cpu_share_busy_pct} % of the time"),
        Opt("; {calls_per_s} calls/s"),
        Opt(", {nonblocking_share_pct} % non-blocking polls"),
        Opt(", {events_per_call} events per call"),
        Opt(", {full_batches} full batches"),
        ".",
        Opt("{sample_text}"),
        Opt("{others_text}"),
    ),
    ("event_loop_saturation", "probe", "waits"): (
        "Probe: the loop waits",
        Opt(
            " (median {wait_share_median_pct} % of each busy interval blocked in epoll)",
            " (it had no busy interval)",
        ),
        ".",
    ),
    ("event_loop_saturation", "cause", "loop_saturated"): (
        "Cause: more ready work than the loop's threads can run",
        Opt(" (GOMAXPROCS={gomaxprocs}, {work_per_request} of CPU per request)"),
        ": events wait in socket buffers, not in epoll.",
    ),
    ("event_loop_saturation", "fix", "loop_saturated"): (
        "Fix: more loop threads or processes (GOMAXPROCS, nginx worker_processes, Redis io-threads, "
        "SO_REUSEPORT), move CPU work off the loop, or shed load. epoll itself is not the bottleneck.",
    ),
    ("event_loop_saturation", "verification", "rerun"): (
        "Verify: `{command}`: the loop should spend ",
        Opt("over {expect_wait_share_pct_above} % of idle time", "most of its idle time"),
        " blocked.",
    ),
}

MODEL_TEMPLATES: dict[str, tuple[Part, ...]] = {
    "mm1k": (
        " Model: at the measured {lam_per_s} attempts/s and {mu_per_s} accepts/s with room for K = {capacity_k}, "
        "M/M/1/K predicts {predicted_pct} % of attempts overflow",
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


# --- rendering ----------------------------------------------------------------------------------


class _Missing(Exception):
    """A number a part names is absent."""


def is_missing(v: Any) -> bool:
    """None, NaN, an empty string or an empty collection: nothing to write."""
    if v is None:
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    if hasattr(v, "item") and not isinstance(v, (str, bytes)) and getattr(v, "ndim", 1) == 0:
        return is_missing(v.item())
    return isinstance(v, (str, list, tuple, dict, set)) and len(v) == 0


def join_words(items: Sequence[str]) -> str:
    """a; a and b; a, b and c."""
    items = [str(x) for x in items]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def number(v: Any) -> str:
    """A value as a sentence writes it: ints plainly, floats without a repr, lists joined in words."""
    v = plain(v)
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isinf(v):
            return "unbounded"
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else f"{v:.6g}" if abs(v) >= 1e6 else str(v)
    if isinstance(v, (list, tuple)):
        return join_words([number(x) for x in v if not is_missing(x)])
    if isinstance(v, Mapping):
        raise TypeError("a dict cannot be written into a sentence; name its fields")
    return str(v)


class _Formatter(string.Formatter):
    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        try:
            obj, first = super().get_field(field_name, args, kwargs)
        except (KeyError, IndexError, TypeError, AttributeError):
            raise _Missing(field_name) from None
        if is_missing(obj):
            raise _Missing(field_name)
        return obj, first

    def format_field(self, value: Any, format_spec: str) -> str:
        value = plain(value)
        if format_spec and isinstance(value, (int, float)) and not isinstance(value, bool):
            return format(value, format_spec)
        return number(value)


_FMT = _Formatter()


def fill(parts: Sequence[Part] | str, values: Mapping[str, Any]) -> str:
    """Render template parts with values; raises _Missing when a plain part lacks a number."""
    if isinstance(parts, str):
        parts = (parts,)
    ctx = {**values, **CONSTANTS}
    out = []
    for part in parts:
        if isinstance(part, Opt):
            for text in (part.text, part.alt):
                try:
                    out.append(_FMT.vformat(text, (), ctx))
                    break
                except _Missing:
                    continue
        else:
            out.append(_FMT.vformat(part, (), ctx))
    return _tidy("".join(out))


def _tidy(text: str) -> str:
    text = re.sub(r"\s{2,}", " ", text).strip()
    return re.sub(r"\s+([.,;:)])", r"\1", text)


def _flat(ev: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Evidence as "name value" pairs, nested names dotted, missing ones left out."""
    out: list[str] = []
    for k, v in ev.items():
        if isinstance(v, Mapping):
            out += _flat(v, f"{prefix}{k}.")
        elif not is_missing(v):
            out.append(f"{prefix}{k} {number(v)}")
    return out


def _unworded(kind: str, link: Link, why: str) -> str:
    """A link no template can word: say so, and list the numbers that are there."""
    title = LINK_TITLES.get(link.link, link.link)
    nums = _flat(plain(link.evidence))
    return f"{title} ({link.key.replace('_', ' ')}): {why}" + (f"; recorded: {'; '.join(nums)}." if nums else ".")


RESULT_WORDS = {
    "connect_timeout": "connect() timed out",
    "connect_refused": "connect() refused",
    "connect_error": "connect() failed otherwise",
    "reset": "reset",
    "io_timeout": "timed out waiting for the reply",
    "io_error": "failed while reading or writing",
}


def _errors_text(errors: Mapping[str, Any]) -> str:
    return join_words(
        [f"{number(n)} {RESULT_WORDS.get(str(name), str(name).replace('_', ' '))}" for name, n in errors.items()]
    )


def _derived(kind: str, link: Link) -> dict[str, Any]:
    """Numbers turned into the phrases the templates need."""
    ev: dict[str, Any] = dict(plain(link.evidence))
    if kind == "accept_queue_overflow":
        if isinstance(ev.get("errors"), Mapping):
            ev["errors_text"] = _errors_text(ev["errors"])
        if link.link == "counter" and ev.get("reqq_full_cookies"):
            ev["reqq_note"] = (
                f"TCPReqQFullDoCookies {number(ev['reqq_full_cookies'])}: the SYN queue, which shares the same "
                "limit, filled too and the kernel answered with syncookies."
            )
        if link.link == "cause" and link.key == "unattributed":
            ev["reason_text"] = UNATTRIBUTED_REASONS.get(str(ev.get("reason")), UNATTRIBUTED_REASONS["not_seen"])
        if link.link == "counter":
            ev["share_text"] = _share_text(ev)
        if link.link == "symptom" and not is_missing(ev.get("ss_samples_full")) and ev["ss_samples_full"] > 0:
            ev["ss_full_samples_text"] = f"{number(ev['ss_samples_full'])} sample(s)"
        if link.link == "symptom" and link.key == "server_side_only":
            st = ev.get("retransmits_probe")
            ev["client_side_text"] = (
                "no lab client log, and the retransmits probe did not run, so SYN retries of a local client "
                "toward it could not be seen"
                if st != "ok"
                else "no lab client log, and no client on this host retried a SYN toward it (its clients are "
                "elsewhere, or none of their SYNs was dropped)"
            )
        if link.link == "probe" and link.key == "no_full_listener_seen":
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
        if link.link == "cause":
            ev["model_text"] = model_sentence(ev.get("model"))
            knob = BINDING_KNOBS.get(str(ev.get("binding_knob")))
            lim, req, som = ev.get("limit_effective"), ev.get("backlog_requested"), ev.get("somaxconn")
            if not is_missing(lim):
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
            n = ev.get("intervals_full_at_end")
            ev["full_at_end_text"] = (
                "how often it was still full at an interval end was not recorded"
                if is_missing(n)
                else "never full at an interval end"
                if n == 0
                else f"full at the end of {number(n)} interval(s), never two in a row"
            )
        if link.link == "fix" and link.key == "sizing":
            som = ev.get("somaxconn")
            ev["somaxconn_verdict"] = (
                "somaxconn was not sampled: check that it allows as much (the limit is the smaller of the two)"
                if is_missing(som)
                else f"somaxconn {number(som)} must be raised too (the limit is the smaller of the two)"
                if ev.get("somaxconn_needed")
                else f"somaxconn {number(som)} already allows it"
            )
    if kind == "retransmit_storm":
        if link.link == "symptom":
            ev["client_text"] = _retransmit_client_text(ev)
        if link.link == "counter":
            m = ev.get("probe_recursion_misses")
            ev["misses_text"] = (
                "recursion misses (events the kernel did not run the probe for) were not reported"
                if is_missing(m)
                else "the kernel never skipped the probe (no recursion misses)"
                if m == 0
                else f"the kernel skipped the probe {number(m)} time(s) (recursion misses)"
            )
        if link.link == "cause":
            loss, syn = ev.get("lab_injected_loss_pct"), ev.get("lab_injected_syn_loss_pct")
            dropped = [f"{number(loss)} % of packets" if not is_missing(loss) else ""]
            dropped.append(f"{number(syn)} % of SYNs" if not is_missing(syn) else "")
            dropped = [d for d in dropped if d]
            ev["lab_text"] = f" (the lab dropped {join_words(dropped)} at the receiver)" if dropped else ""
    if kind == "time_wait_exhaustion" and link.link == "cause":
        ev["sysctl_text"] = ", ".join(
            f"{k}={number(ev[k])}" for k in ("tcp_tw_reuse", "tcp_timestamps") if not is_missing(ev.get(k))
        )
    if kind == "time_wait_exhaustion" and link.link == "counter" and link.key == "ports_free":
        n = ev.get("eaddrnotavail_unrecorded_destination")
        if not is_missing(n) and n > 0:
            ev["unrecorded_text"] = (
                f"The namespace's {number(n)} EADDRNOTAVAIL failures have no destination recorded; with its "
                "ports free they are not this endpoint's."
            )
    if kind == "time_wait_exhaustion" and link.link == "symptom":
        calls, procs = ev.get("eaddrnotavail_connect_calls"), ev.get("processes")
        if is_missing(calls):
            ev["eaddrnotavail_text"] = "connect() errors were not traced (time_wait probe)"
        elif calls == 0:
            ev["eaddrnotavail_text"] = "connect() never failed with EADDRNOTAVAIL"
        else:
            ev["eaddrnotavail_text"] = f"connect() failed with EADDRNOTAVAIL {number(calls)} times" + (
                f" in {procs}" if not is_missing(procs) else ""
            )
        if not is_missing(ev.get("attempts")):
            fails, ok = ev.get("attempts_eaddrnotavail"), ev.get("attempts_ok")
            ev["client_text"] = (
                f"; the lab client saw {number(fails) if not is_missing(fails) else 'an unknown number'} of "
                f"{number(ev['attempts'])} attempts fail that way"
                + (f" ({number(ok)} ok)" if not is_missing(ok) else "")
                + "; Go's dialer calls connect() more than once per attempt"
            )
    if kind == "event_loop_saturation" and link.link == "probe":
        ev["sample_text"] = (
            " These are the thread's own numbers, estimated from a 1-in-8 sample of its epoll calls."
            if ev.get("estimated_from_sample") and ev.get("per_thread")
            else " This capture counted per process (data contract 2): the numbers are the process's."
            if ev.get("per_thread") is False
            else ""
        )
        n, sat = ev.get("other_threads_with_events"), ev.get("other_threads_saturated")
        if not is_missing(n) and n > 0:
            med = ev.get("other_threads_blocked_median_pct")
            waiting = n - (sat or 0)
            ev["others_text"] = (
                f" Its process has {number(n)} other thread(s) with epoll events; {number(waiting)} of them wait"
                + (f" (median {number(med)} % of each interval blocked)" if not is_missing(med) else "")
                + " and are not at fault."
            )
    if kind == "event_loop_saturation" and link.link == "symptom":
        wrk = [x for x in (ev.get("wrk_requests_per_s") or []) if not is_missing(x)]
        if wrk:
            ev["wrk_text"] = (
                f"{number(wrk[0])} requests/s"
                if len(wrk) == 1
                else f"{join_words([number(x) for x in wrk])} requests/s in its {len(wrk)} phases"
            )
    return ev


UNATTRIBUTED_REASONS = {
    "probe_not_run": "the accept_queue probe did not run (or not to the end) in this capture",
    "listener_not_tracked": "ss saw a listener full that the probe did not track (it tracks the first 32 "
    "listeners it sees)",
    "interval_too_coarse": "the probe saw listeners near full but not over the limit at its interval ends; "
    "the interval is too coarse to tell which queue dropped",
    "not_seen": "the probe ran and saw no listener full; a listener beyond its slots, or drops between its "
    "enqueues (a SYN queue full, or a final ACK) are possible",
}


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


def _retransmit_client_text(ev: Mapping[str, Any]) -> str:
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


def model_sentence(model: Mapping[str, Any] | None) -> str:
    """The saturation model's prediction as a sentence ("" when there is none)."""
    if not isinstance(model, Mapping) or model.get("kind") not in MODEL_TEMPLATES:
        return ""
    try:
        return " " + fill(MODEL_TEMPLATES[str(model["kind"])], plain(model))
    except _Missing:
        return ""


def describe(kind: str, link: Link) -> str:
    """One link of an evidence chain in words."""
    template = TEMPLATES.get((kind, link.link, link.key))
    if template is None:
        return _unworded(kind, link, "no wording for this step")
    try:
        return fill(template, _derived(kind, link))
    except _Missing as e:
        return _unworded(kind, link, f"not measured in this run ({str(e.args[0]).replace('_', ' ')} missing)")


def _or(v: Any, unknown: str) -> str:
    return unknown if is_missing(v) else number(v)


def _where(s: Mapping[str, Any]) -> str:
    raddr, port = _or(s.get("raddr"), "an unknown address"), _or(s.get("service_port"), "an unknown port")
    if "service_port" in s and "laddr" not in s and is_missing(s.get("raddr")) and is_missing(s.get("service_port")):
        return "connections whose destination was not recorded"
    if "service_port" in s and "laddr" not in s:
        return f"connections to {raddr}" + (f":{port}" if not is_missing(s.get("service_port")) else f" ({port})")
    if "service_port" in s:
        side = f" (we are the {s['we_are']})" if not is_missing(s.get("we_are")) else ""
        if not is_missing(s.get("lport")) and not is_missing(s.get("rport")):
            # One flow: both of its ports.
            return f"the flow {_or(s.get('laddr'), 'an unknown address')}:{s['lport']} -> {raddr}:{s['rport']}{side}"
        return f"{_or(s.get('laddr'), 'an unknown address')} <-> {raddr} port {port}{side}"
    if not is_missing(s.get("lport")):
        return f"{s.get('laddr')}:{s.get('lport')}" if not is_missing(s.get("laddr")) else f"port {s.get('lport')}"
    return "a listener not seen by the probe"


def headline(f: Finding) -> str:
    """The finding's title line: what, where, who, status and cause."""
    s = f.subject
    status = STATUS_WORDS.get(f.status, str(f.status).replace("_", " "))
    if f.kind == "event_loop_saturation":
        ports = [number(p) for p in s.get("listen_ports") or []]
        pid, tid, process = s.get("pid"), s.get("tid"), s.get("process")
        thread = not is_missing(tid) and not is_missing(pid) and tid != pid
        where = ", ".join(
            x
            for x in (
                f"pid {pid}" if not is_missing(pid) else "",
                ("port " if len(ports) == 1 else "ports ") + join_words(ports) if ports else "",
            )
            if x
        )
        who = s.get("comm") or "a process"
        if thread:
            who = f"thread {s.get('comm') or 'unnamed'} (tid {tid}) of {process or 'its process'}"
        return f"{TITLES[f.kind]}: {who}" + (f" ({where})" if where else "") + f": {status}"
    proc = (
        f" ({s['comm']} pid {s.get('pid')})"
        if s.get("comm") and not is_missing(s.get("pid"))
        else (f" ({s['comm']})" if s.get("comm") else "")
    )
    cause = f" — {CAUSE_NAMES.get(f.cause_class or '', f.cause_class)}" if f.cause_class else ""
    ns = f" in {s['netns_label']}" if not is_missing(s.get("netns_label")) else ""
    return f"{TITLES.get(f.kind, f.kind)} on {_where(s)}{proc}{ns}: {status}{cause}"


# --- comparisons (analysis/render/compare.py) -------------------------------------

_CI = "(B - A {diff:+g}, 95 % CI {ci_low:+g} … {ci_high:+g})"
# Keyed by (outcome, which direction is better for the metric).
COMPARE_TEMPLATES = {
    ("removes", "lower"): "{b} removes {label}: {a_mean:g} → {b_mean:g} " + _CI,
    ("improves", "lower"): "{b} reduces {label}: {a_mean:g} → {b_mean:g} " + _CI,
    ("worsens", "lower"): "{b} increases {label}: {a_mean:g} → {b_mean:g} " + _CI,
    ("improves", "higher"): "{b} raises {label}: {a_mean:g} → {b_mean:g} " + _CI,
    ("worsens", "higher"): "{b} lowers {label}: {a_mean:g} → {b_mean:g} " + _CI,
    ("no_difference", "lower"): (
        "no significant difference in {label} between {a} and {b}: {a_mean:g} vs {b_mean:g} "
        "(95 % CI of B - A {ci_low:+g} … {ci_high:+g})"
    ),
}
COMPARE_TEMPLATES[("no_difference", "higher")] = COMPARE_TEMPLATES[("no_difference", "lower")]


def _rounded(r: dict[str, Any]) -> dict[str, Any]:
    # Three significant digits: enough to read, few enough not to imply precision.
    return {k: (float(f"{v:.3g}") if isinstance(v, float) else v) for k, v in r.items()}


def compare_line(v: dict[str, Any], r: dict[str, Any]) -> str:
    """One metric's verdict sentence; `better` direction is already in r['outcome']."""
    better = r.get("better", "lower")
    missing = [k for k in ("a_mean", "b_mean", "diff", "ci_low", "ci_high") if is_missing(r.get(k))]
    if missing:
        # A metric no run of one side measured (or too few to give an interval): say which.
        sides = [f"{v[s.lower()]} ({s})" for s, k in (("A", "a_mean"), ("B", "b_mean")) if is_missing(r.get(k))]
        if sides:
            what = f"not measured under {join_words(sides)}"
        else:
            what = f"{_num(r['a_mean'])} → {_num(r['b_mean'])}, no interval could be computed"
        return f"{r['label']}: {what}; no comparison"
    return COMPARE_TEMPLATES[(r["outcome"], better)].format(**{**_rounded(r), "a": v["a"], "b": v["b"]})


def _num(x: Any, spec: str = "g") -> str:
    """A table or sentence number; words when it is missing."""
    if is_missing(x):
        return "not measured"
    x = plain(x)
    return "unbounded" if isinstance(x, float) and math.isinf(x) else format(x, spec)


def compare_verdict_line(v: dict[str, Any]) -> str:
    if v["headline"] is None:
        return "no metric could be measured in these runs"
    return compare_line(v, v["headline"])


def compare_markdown(v: dict[str, Any], summary: Any, plot: str) -> str:
    lines = [
        f"# {v['lab']} / {v['variant']}: {v['a']} (A) vs {v['b']} (B)",
        "",
        f"**Verdict:** {compare_verdict_line(v)}",
        "",
    ]
    if v["others"]:
        lines += ["Other significant differences:", ""] + [f"- {compare_line(v, r)}" for r in v["others"]] + [""]
    n = min((r["n_a"] for r in v["metrics"]), default=0)
    lines += [
        f"Runs: {v['repeat']} per profile, interleaved A B A B, each in fresh namespaces. "
        "Intervals are percentile bootstrap intervals of the difference of means"
        + (
            " — with fewer than 3 runs a side a difference counts as significant only when every run of each side "
            "gave the same value; raise REPEAT for intervals."
            if n < 3
            else "; with few runs they are narrower than they should be, so a difference is called significant "
            "only when Welch's t-test agrees (p < 0.05). Read them with the per-run plot."
        ),
        "",
    ]
    if v["overrides"]:
        lines += [
            "Lab parameters set for this comparison: " + ", ".join(f"{k}={x}" for k, x in v["overrides"].items()),
            "",
        ]
    if v["profile_caveats"]:
        lines += ["What the profiles could not change here:", ""] + [f"- {c}" for c in v["profile_caveats"]] + [""]
    lines += ["| metric | A mean | B mean | B - A | 95 % CI | significant |", "|---|---|---|---|---|---|"]
    for _, r in summary.iterrows():
        ci = (
            f"{_num(r['ci_low'], '+.4g')} … {_num(r['ci_high'], '+.4g')}"
            if not (is_missing(r["ci_low"]) or is_missing(r["ci_high"]))
            else "not measured"
        )
        lines.append(
            f"| {r['label']} | {_num(r['a_mean'], '.4g')} | {_num(r['b_mean'], '.4g')} | {_num(r['diff'], '+.4g')} | "
            f"{ci} | {'yes' if r['significant'] else 'no'} |"
        )
    lines += ["", f"![per-run values]({plot})", ""]
    return "\n".join(lines)


# --- sweeps (analysis/render/sweep.py) -----------------------------------------------


def sweep_markdown(kind: str, df: Any, plot: str) -> str:
    if kind == "accept-queue":
        err = (df["p_mm1k"] - df["p_measured"]).abs()
        base = ((1 - 1 / df["rho"]).clip(lower=0) - df["p_measured"]).abs()
        knee = (df["rho"] >= 0.7) & (df["rho"] <= 1.2)
        lines = [
            "# Accept-queue sweep: M/M/1/K and simulation against measurement",
            "",
            "Each point: one `accept-overflow queue` lab run (Poisson arrivals, exponential accept delay). "
            "lam and mu are measured at that point (attempts in the load window, accepted / service seconds); "
            "K = limit + 2. p = ListenOverflows / attempts.",
            "",
            f"Mean absolute error of M/M/1/K: {err.mean():.3f} (max {err.max():.3f}); of the simulation: "
            f"{(df['p_sim'] - df['p_measured']).abs().mean():.3f}; of the K-free baseline max(0, 1 - 1/rho): "
            f"{base.mean():.3f}. Near the knee (0.7 <= rho <= 1.2, where K matters): M/M/1/K "
            f"{err[knee].mean():.3f}, baseline {base[knee].mean():.3f} over {int(knee.sum())} points. "
            "Far past the knee any model whose throughput is mu fits (overflow share = 1 - opens/attempts), "
            "so those points test the measurement more than the model.",
            "",
            "| backlog | limit | offered/s | lam/s | mu/s | rho | measured p | M/M/1/K p | sim p | error (pp) | "
            "M/M/1/K p from offered rate | wait ms measured | wait ms M/M/1/K |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for _, r in df.sort_values(["backlog", "rate_offered"]).iterrows():
            lines.append(
                f"| {r['backlog']} | {r['limit']} | {_num(r['rate_offered'], '.0f')} | {r['lam']:.0f} | "
                f"{r['mu']:.0f} | {_num(r['rho'], '.2f')} | {r['p_measured']:.3f} | {r['p_mm1k']:.3f} | "
                f"{r['p_sim']:.3f} | {100 * r['abs_error']:+.1f} | {_num(r['p_mm1k_offered'], '.3f')} | "
                f"{_num(r['wait_ms_measured'], '.1f')} | {_num(r['wait_ms_mm1k'], '.1f')} |"
            )
        lines += [
            "",
            "Where the model breaks: retries are not in it. A dropped SYN or final ACK comes back about 1 s "
            "later, so past rho = 1 the attempt rate lam runs well above the offered rate of new connections; "
            "fed the measured attempts the model fits, fed only the offered rate (the column 'from offered "
            "rate', what a capacity plan would use) it under-predicts overload. Waits are means over answered "
            "connections whose reply came within 0.9 s (longer ones were retransmitted, not queued); in overload "
            "the measured waits still run above the model's, since they include 200-400 ms request retransmits "
            "of connections whose final ACK was dropped. A stalled "
            "accept loop is not a queue with a service rate at all: use the `stall` variant's evidence chain.",
        ]
    else:
        lines = [
            "# TIME_WAIT sweep: TW = rate x 60 s and the knee at ports / 60 s",
            "",
            "| rate/s | ports | load s | TW predicted | TW measured | first EADDRNOTAVAIL predicted s | measured s | "
            "fail share predicted | measured |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for _, r in df.sort_values("rate").iterrows():

            def s(x: Any) -> str:
                return "-" if is_missing(x) else f"{x:.1f}"

            lines.append(
                f"| {r['rate']:g} | {r['ports']} | {r['load_s']:g} | {r['tw_predicted']:.0f} | {r['tw_measured']} | "
                f"{s(r['first_fail_s_predicted'])} | {s(r['first_fail_s_measured'])} | "
                f"{r['fail_fraction_predicted']:.3f} | {r['fail_fraction_measured']:.3f} |"
            )
    lines += ["", f"![predicted vs measured]({plot})", ""]
    return "\n".join(lines)
