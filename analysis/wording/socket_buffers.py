"""Wording of socket_buffer_limit (rule: analysis/rules/socket_buffers.py).

The templates of each link of its evidence chain and the phrases they need: byte rates and
sizes as people write them, the namespaces' counters that moved, and the fix's numbers
(the bandwidth-delay product, the receive buffer SO_RCVBUF pins).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analysis.findings import Link

from .base import Wording, by_step
from .numbers import is_missing, join_words, number
from .template import Opt, Part

KIND = "socket_buffer_limit"
TITLE = "Socket buffer limit"
CAUSES = {
    "slow_reader": "the application reading it is slower than the sender (slow_reader)",
    "small_rcvbuf": "the receive buffer is below the path's bandwidth-delay product (small_rcvbuf)",
    "small_sndbuf": "the send buffer is below the path's bandwidth-delay product (small_sndbuf)",
    "memory_pressure": "TCP's memory is under pressure (tcp_mem): the kernel held the buffers back",
    "peer_window": "the receiver's window, on another host (peer_window)",
}

TEMPLATES: dict[tuple[str, str], tuple[Part, ...]] = {
    ("symptom", "lab_writer"): (
        "Lab writer: {rate_text}",
        Opt(" over a path of {path_rate_text}"),
        Opt("; {writes_blocked} of its {writes} writes found the send buffer full"),
        Opt(" and it waited {wait_s} s for room"),
        ".",
    ),
    ("symptom", "flow_rate"): (Opt("The flow carried {rate_text} over {span_s} s.", "No rate measured for the flow."),),
    ("counter", "buffer_counters"): (
        "Kernel counters over the capture",
        Opt(": the receiver's namespace ({receiver_netns_label}) {receiver_text}"),
        Opt("; the sender's ({sender_netns_label}) {sender_text}"),
        ".",
    ),
    ("probe", "flow_clocks"): (
        "The flow's own clocks (tcp_info, sampled {samples} times): it had data to send {busy_s} s of {span_s} s; "
        "the receiver's window held it back {rwnd_limited_s} s ({rwnd_limited_pct} %), its send buffer "
        "{sndbuf_limited_s} s ({sndbuf_limited_pct} %)",
        Opt("; {rate_text} acknowledged"),
        Opt(", min RTT {minrtt_ms} ms"),
        Opt(", send buffer {sndbuf_text}"),
        ".",
        Opt(
            " Probe: {writer_limited_writes} writes found the flow limited ({writer_writes_rwnd_limited} by the "
            "window, {writer_writes_sndbuf_limited} by the send buffer), {writer_writes_blocked} found it full."
        ),
        Opt(
            " The reader left {receiver_recv_q_mean_text} queued on average ({receiver_queue_pct} % of its "
            "{receiver_rcvbuf_text} receive buffer), at most {receiver_recv_q_max_text}"
        ),
        Opt(
            "; the probe noted {reader_noted_reads} of its reads: {reader_reads_half_full} left the buffer half full, "
            "{reader_reads_zero_window} its window closed, {reader_rcvbuf_locked_reads} were on a buffer SO_RCVBUF set"
        ),
        Opt("{reader_end}"),
    ),
    ("probe", "reader_queue"): (
        "The reader left {receiver_recv_q_mean_text} queued on average ({receiver_queue_pct} % of its "
        "{receiver_rcvbuf_text} receive buffer), at most {receiver_recv_q_max_text}, over {samples} samples",
        Opt(
            "; the probe noted {reader_noted_reads} of its reads: {reader_reads_half_full} left the buffer half full, "
            "{reader_reads_zero_window} its window closed"
        ),
        ".",
    ),
    ("probe", "flow_not_listed"): (
        "Probe: on {sockets}, {limits_text}; but the sampler {listed_text}: no clocks of the flow's own to judge "
        "it by. Run `{command}`.",
    ),
    ("probe", "below_threshold"): (
        "Kernel clocks: busy {busy_s} s, held back by the receiver's window {rwnd_limited_pct} % and by its send "
        "buffer {sndbuf_limited_pct} % of it",
        Opt("; its send buffer was full with nothing unsent at {sndbuf_full_pct} % of the samples"),
        ": below a limit.",
    ),
    ("cause", "slow_reader"): (
        "Cause: the reader does not keep up",
        Opt(": it left {receiver_queue_pct} % of its receive buffer ({receiver_rcvbuf_text}) queued on average"),
        Opt(" and {half_full_reads_pct} % of the reads the probe noted left it half full"),
        ". The window it advertises is what it has not read yet; the sender waits for it",
        Opt(" ({rwnd_limited_pct} % of its busy time)"),
        ".",
    ),
    ("cause", "small_rcvbuf"): (
        "Cause: the receive buffer",
        Opt(" ({receiver_rcvbuf_text}{rcvbuf_locked_text})"),
        " is below what the path needs: the reader keeps it nearly empty",
        Opt(" ({receiver_queue_pct} % on average)"),
        ", yet the window is the limit",
        Opt(" {rwnd_limited_pct} % of the sender's busy time"),
        Opt("; {in_flight_text} in flight at a {minrtt_ms} ms RTT"),
        Opt(", against a BDP of {lab_bdp_text} on the lab's path"),
        ".",
    ),
    ("cause", "small_sndbuf"): (
        "Cause: the send buffer",
        Opt(" ({sndbuf_text}{sndbuf_locked_text})"),
        " caps what the sender keeps in flight: the send buffer held it back",
        Opt(" {sndbuf_limited_pct} % of its busy time"),
        Opt(", and at {sndbuf_full_pct} % of the samples it was full with nothing left unsent"),
        Opt("; {in_flight_text} in flight at a {minrtt_ms} ms RTT"),
        Opt(", against a BDP of {lab_bdp_text} on the lab's path"),
        ".",
    ),
    ("cause", "memory_pressure"): (
        "Cause: TCP's memory crossed tcp_mem's pressure threshold (TCPMemoryPressures moved): the kernel "
        "refused or shrank socket buffers host-wide, whatever each application asked for.",
    ),
    ("cause", "peer_window"): (
        "Cause: the receiver's window",
        Opt(" ({rwnd_limited_pct} % of the busy time)"),
        "; the receiver is not on this host, so whether it reads slowly or its buffer is small is seen there.",
    ),
    ("fix", "slow_reader"): (
        "Fix: the application reading on {reader}: read more per call and more often (do not block between reads, "
        "hand slow work to another thread or queue). A bigger receive buffer only delays the stall: it fills at "
        "the rate the sender outpaces the reader.",
    ),
    ("fix", "small_rcvbuf"): (
        "Fix: the receive buffer must hold about twice the bandwidth-delay product (RTT x rate; the kernel "
        "counts packet overhead against it)",
        Opt(": at {minrtt_ms} ms and {want_rate_text}, {bdp_text}, so about {twice_bdp_text}"),
        ". SO_RCVBUF turns autotuning off for the socket: remove it and let the kernel grow the buffer",
        Opt(" up to tcp_rmem's max ({autotune_max_text})"),
        Opt(", or set it to at least {twice_bdp_text}", ", or set it that large"),
        " (a request above net.core.rmem_max gets rmem_max); raising rmem_max alone changes nothing for an "
        "application that sets no SO_RCVBUF.",
    ),
    ("fix", "small_sndbuf"): (
        "Fix: the send buffer must hold the bandwidth-delay product (RTT x rate) and more",
        Opt(": at {minrtt_ms} ms and {want_rate_text}, {bdp_text}"),
        ". Remove SO_SNDBUF and let the kernel autotune it",
        Opt(" up to tcp_wmem's max ({autotune_max_text})"),
        ", or set it to at least that.",
    ),
    ("fix", "small_sndbuf_at_max"): (
        "Fix: the kernel already autotuned the send buffer to net.ipv4.tcp_wmem's max",
        Opt(" ({autotune_max_text})"),
        ", and that is below the bandwidth-delay product (RTT x rate)",
        Opt(": at {minrtt_ms} ms and {want_rate_text}, {bdp_text}"),
        ". Raise tcp_wmem's max above it (per namespace); net.core.wmem_max does not cap autotuning.",
    ),
    ("fix", "small_rcvbuf_at_max"): (
        "Fix: the kernel already autotuned the receive buffer to net.ipv4.tcp_rmem's max",
        Opt(" ({autotune_max_text})"),
        ", and that is below about twice the bandwidth-delay product (RTT x rate)",
        Opt(": at {minrtt_ms} ms and {want_rate_text}, {bdp_text}"),
        ". Raise tcp_rmem's max above it (per namespace); net.core.rmem_max does not cap autotuning.",
    ),
    ("fix", "memory_pressure"): (
        "Fix: find the sockets holding TCP's memory (`ss -tm`: skmem r and w), then raise net.ipv4.tcp_mem or "
        "lower the buffers the busiest sockets may take; it is host-wide.",
    ),
    ("fix", "peer_window"): (
        "Fix: capture on the receiver (`make capture PROBES=socket_buffers`) to tell a slow reader from a small "
        "receive buffer there.",
    ),
    ("verification", "rerun"): (
        "Verify: run `{command}` after the change and expect the buffers to hold the flow back less than "
        "{expect_limited_pct_below} % of its busy time.",
    ),
}


def size_text(v: Any) -> str:
    """Bytes as buffer sizes are set, in powers of two: 4096 bytes, 128 KiB, 3.2 MiB."""
    b = float(v)
    if b >= 1 << 20:
        return f"{b / (1 << 20):.1f} MiB"
    if b >= 1 << 10:
        return f"{b / (1 << 10):.0f} KiB"
    return f"{int(b)} bytes"


def rate_text(v: Any) -> str:
    """Bytes per second, in the decimal units a link is sold in: 2.5 MB/s (20 Mbit/s)."""
    b = float(v)
    mb = f"{b / 1e6:.3g} MB/s" if b >= 1e6 else f"{b / 1e3:.3g} kB/s"
    return f"{mb} ({b * 8 / 1e6:.3g} Mbit/s)"


def _sizes(ev: dict[str, Any], names: Mapping[str, str], fmt: Any) -> None:
    for src, dst in names.items():
        if not is_missing(ev.get(src)):
            ev[dst] = fmt(ev[src])


def _counters_text(c: Mapping[str, Any] | None) -> str | None:
    """The counters that moved, +N each; the zero-window ones even at 0 (a 0 there rules a slow reader out)."""
    if not c:
        return None
    keep = [f"{k} +{number(v)}" for k, v in c.items() if v or k == "TCPToZeroWindowAdv"]
    return join_words(keep) if keep else "no buffer counter moved"


def _symptom(link: Link, ev: dict[str, Any]) -> None:
    _sizes(ev, {"bytes_per_s": "rate_text"}, rate_text)
    if not is_missing(ev.get("path_rate_bytes_per_s")):
        ev["path_rate_text"] = f"{float(ev['path_rate_bytes_per_s']) * 8 / 1e6:.3g} Mbit/s"


def _counter(link: Link, ev: dict[str, Any]) -> None:
    ev["receiver_text"] = _counters_text(ev.get("receiver"))
    ev["sender_text"] = _counters_text(ev.get("sender"))


def _probe(link: Link, ev: dict[str, Any]) -> None:
    if link.key == "flow_not_listed":
        _not_listed(ev)
        return
    for k in ("busy", "rwnd_limited", "sndbuf_limited"):
        if not is_missing(ev.get(f"{k}_ms")):
            ev[f"{k}_s"] = round(ev[f"{k}_ms"] / 1000, 2)
    _sizes(ev, {"bytes_per_s": "rate_text"}, rate_text)
    _sizes(ev, {"sndbuf": "sndbuf_text", "receiver_rcvbuf": "receiver_rcvbuf_text",
                "receiver_recv_q_mean": "receiver_recv_q_mean_text", "receiver_recv_q_max": "receiver_recv_q_max_text"},
           size_text)  # fmt: skip
    if not ev.get("probe_ran"):
        ev["reader_end"] = ". The probe did not run: the clocks alone."
    else:
        ev["reader_end"] = "."


PROBE_LIMITS_SAID = {
    "writes_blocked": "writes found the send buffer full",
    "writes_rwnd_limited": "writes found the receiver's window the limit",
    "writes_sndbuf_limited": "writes found the send buffer the limit",
    "reads_half_full": "reads left the buffer half full",
    "reads_zero_window": "reads left the window closed",
}


def _not_listed(ev: dict[str, Any]) -> None:
    """What the probe saw on a flow the sampler did not list, and why it did not."""
    ev["limits_text"] = join_words([f"{number(ev[k])} {v}" for k, v in PROBE_LIMITS_SAID.items() if ev.get(k)])
    why = [f"did not sample namespace {ns}" for ns in ev.get("unsampled") or []]
    listings = ev.get("listings") or []
    why += [f"listed the flows of namespace {x['netns']} in {x['flows_listed']} of {x['samples']} samples"
            for x in listings]  # fmt: skip
    if listings:
        why[-1] += (", and this flow in fewer than two (it lived between listings, or the sampler's CPU budget "
                    "left them out)")  # fmt: skip
    ev["listed_text"] = join_words(why)


def _cause(link: Link, ev: dict[str, Any]) -> None:
    _sizes(ev, {"sndbuf": "sndbuf_text", "receiver_rcvbuf": "receiver_rcvbuf_text", "in_flight_bytes": "in_flight_text",
                "lab_bdp_bytes": "lab_bdp_text"}, size_text)  # fmt: skip
    ev["sndbuf_locked_text"] = ", set with SO_SNDBUF" if ev.get("sndbuf_locked") else ""
    ev["rcvbuf_locked_text"] = ", pinned by SO_RCVBUF: no autotuning" if ev.get("rcvbuf_locked") else ""


def _fix(link: Link, ev: dict[str, Any]) -> None:
    _sizes(ev, {"autotune_max": "autotune_max_text", "bdp_bytes": "bdp_text"}, size_text)
    _sizes(ev, {"want_bytes_per_s": "want_rate_text"}, rate_text)
    if not is_missing(ev.get("bdp_bytes")):
        ev["twice_bdp_text"] = size_text(2 * ev["bdp_bytes"])


WORDING = Wording(
    kind=KIND,
    title=TITLE,
    causes=CAUSES,
    templates=TEMPLATES,
    unseen=(
        "which flow a socket buffer held back, and by what (only the namespace's zero-window and prune "
        "counters; without the sampler's flows, not how long)"
    ),
    derive=by_step({"symptom": _symptom, "counter": _counter, "probe": _probe, "cause": _cause, "fix": _fix}),
)
