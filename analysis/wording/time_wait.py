"""Wording of time_wait_exhaustion (rule: analysis/rules/time_wait.py).

The templates of each link of its evidence chain and the phrases they need
(the EADDRNOTAVAIL failures, the sysctls that bear on TIME_WAIT).
"""

from __future__ import annotations

from typing import Any

from analysis.findings import Link

from .base import Wording, by_step
from .numbers import is_missing, number
from .template import Opt, Part

KIND = "time_wait_exhaustion"
TITLE = "Ephemeral ports exhausted by TIME_WAIT"
CAUSES = {
    "short_connections_client_closes": "short connections closed first by this side",
}

# Only when the sampler skipped samples: the peak is the highest of those it listed.
LISTED = (
    " (at the {time_wait_samples_listed} of {samples} samples that listed TIME_WAIT sockets: listing costs per socket)"
)

TEMPLATES: dict[tuple[str, str], tuple[Part, ...]] = {
    ("symptom", "eaddrnotavail"): ("{eaddrnotavail_text}", Opt("{client_text}"), "."),
    ("counter", "time_wait_vs_ports"): (
        "TIME_WAIT sockets toward the endpoint reached {time_wait_max}",
        Opt(LISTED),
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
    ("counter", "ports_free"): (
        "TIME_WAIT toward the endpoint peaked at {time_wait_max}",
        Opt(LISTED),
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
    ("counter", "no_endpoint_near_full"): (
        "No endpoint's TIME_WAIT came near the ports it can use",
        Opt(" ({ports_in_range} in ip_local_port_range)"),
        Opt("; the most held: {busiest}"),
        ".",
    ),
    ("cause", "unattributed"): (
        "Cause: not attributed — this capture did not record the destination of the failed connects "
        "(data contract 2) and no endpoint held its ports in TIME_WAIT, so no endpoint is named. "
        "EADDRNOTAVAIL also comes from ports held by open connections, bind() before connect(), or "
        "ip_local_reserved_ports; capture with the time_wait probe of data contract 3 to see the destination.",
    ),
    ("probe", "probe_not_run"): (
        "Probe: connect() errors and active closes come from the time_wait probe, which ",
        Opt("did not run to the end here (status {probe_status})", "was not run in this capture"),
        "; without them EADDRNOTAVAIL cannot be ruled out.",
    ),
    ("probe", "active_closes"): (
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
    ("cause", "short_connections_client_closes"): (
        "Cause: short connections that this side closes first",
        Opt(" ({we_close_first_pct} % of closes)"),
        "; each holds its port {TIME_WAIT_S} s",
        Opt(", so at most {max_new_conn_per_s_without_reuse} new connections/s fit toward one endpoint"),
        Opt(" (model: at the measured {active_close_rate_per_s}/s the range lasts {ports_last_s_at_measured_rate} s)"),
        ".",
        Opt(" {sysctl_text}."),
    ),
    ("fix", "ranked"): (
        "Fix, best first: (1) reuse connections (keep-alive, a pool); (2) net.ipv4.tcp_tw_reuse=1",
        Opt(" (now {tcp_tw_reuse})"),
        " lets outgoing connections take a TIME_WAIT port after {TW_REUSE_AFTER_S} s; it needs tcp_timestamps=1",
        Opt(" (now {tcp_timestamps})"),
        "; (3) widen ip_local_port_range",
        Opt(" (now {ports_in_range} ports)"),
        ". tcp_fin_timeout does NOT shorten TIME_WAIT: it is the FIN_WAIT2 timeout; TIME_WAIT is fixed at "
        "{TIME_WAIT_S} s.",
    ),
    ("verification", "rerun"): (
        "Verify: `{command}` and expect ",
        Opt("{expect_eaddrnotavail}", "no"),
        " EADDRNOTAVAIL.",
    ),
}


def _symptom(link: Link, ev: dict[str, Any]) -> None:
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


def _counter(link: Link, ev: dict[str, Any]) -> None:
    if link.key != "ports_free":
        return
    n = ev.get("eaddrnotavail_unrecorded_destination")
    if not is_missing(n) and n > 0:
        ev["unrecorded_text"] = (
            f"The namespace's {number(n)} EADDRNOTAVAIL failures have no destination recorded; with its "
            "ports free they are not this endpoint's."
        )


def _cause(link: Link, ev: dict[str, Any]) -> None:
    ev["sysctl_text"] = ", ".join(
        f"{k}={number(ev[k])}" for k in ("tcp_tw_reuse", "tcp_timestamps") if not is_missing(ev.get(k))
    )


WORDING = Wording(
    kind=KIND,
    title=TITLE,
    causes=CAUSES,
    templates=TEMPLATES,
    unseen=(
        "connect() failures and EADDRNOTAVAIL per destination, and which side closed first; TIME_WAIT sockets per "
        "destination are still sampled, but not those of flows that open and close between samples"
    ),
    derive=by_step({"symptom": _symptom, "counter": _counter, "cause": _cause}),
)
