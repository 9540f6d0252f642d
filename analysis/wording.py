"""Human wording for findings, kept apart from the rules' logic.

Each template is keyed by (kind, link, key) and formatted with the link's
evidence numbers; a missing template or number falls back to the raw numbers,
so wording can never hide evidence.
"""

from __future__ import annotations

from typing import Any

from .findings import Finding, Link

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
    "data_loss": "data segments lost on the path (data_loss)",
    "syn_loss": "connection attempts lost (syn_loss)",
    "remote_accept_queue_full": "packets dropped by a full accept queue at the server",
    "local_accept_queue_full": "final ACKs dropped by this server's full accept queue",
    "short_connections_client_closes": "short connections closed first by this side",
    "loop_saturated": "the loop always finds work ready",
}

TEMPLATES: dict[tuple[str, str, str], str] = {
    ("accept_queue_overflow", "symptom", "client_connects"): (
        "Clients: {attempts} connection attempts, {ok} answered, errors {errors}. "
        "Connect latency p50 {connect_latency[p50_ms]} ms, p99 {connect_latency[p99_ms]} ms; "
        "{connects_waited_syn_retry} connects took >= 0.9 s, the mark of a dropped SYN "
        "retried after the initial RTO. TCPSynRetrans in {syn_retrans_netns}: {syn_retrans}."
    ),
    ("accept_queue_overflow", "symptom", "syn_retrans_only"): (
        "No client-side timings were captured; TCPSynRetrans in {syn_retrans_netns} rose by {syn_retrans}."
    ),
    ("accept_queue_overflow", "symptom", "not_captured"): "No client-side symptom was captured in this run.",
    ("accept_queue_overflow", "counter", "listen_overflows"): (
        "Kernel counter: TcpExt.ListenOverflows rose by {listen_overflows_in_window} in the window "
        "({listen_overflows} over the capture) in {netns_label}; ListenDrops {listen_drops}. "
        "{reqq_note}"
    ),
    ("accept_queue_overflow", "counter", "no_overflows"): "Kernel counter: ListenOverflows did not move.",
    ("accept_queue_overflow", "counter", "not_sampled"): (
        "Kernel counter: this listener's namespace was not sampled (capture with --netns)."
    ),
    ("accept_queue_overflow", "probe", "queue_full"): (
        "Probe: the queue was full (depth > limit {limit}) in {intervals_full} of {intervals_active} "
        "active intervals of {interval_s} s, {full_events} times at enqueue; max depth {depth_max}; "
        "{enqueues} connections queued, {accepted} accepted."
    ),
    ("accept_queue_overflow", "probe", "never_full"): (
        "Probe: max depth {depth_max} against limit {limit} over {intervals_active} active intervals; never full."
    ),
    ("accept_queue_overflow", "probe", "no_full_listener_seen"): (
        "Probe: no listener was seen full (probe status: {probe_status})."
    ),
    ("accept_queue_overflow", "cause", "sizing"): (
        "Cause: effective limit {limit_effective} = min(requested backlog {backlog_requested}, "
        "somaxconn {somaxconn}); the binding knob is {binding_knob}. Up to {peak_enqueues_per_interval} "
        "connections arrived in one interval while the queue drained by each interval's end "
        "(never full at an interval end): bursts larger than the backlog.{model_text}"
    ),
    ("accept_queue_overflow", "cause", "stall"): (
        "Cause: the queue was full at the end of {intervals_stalled} interval(s) in which the listener "
        "accepted nothing: the application stopped calling accept(). Effective limit {limit_effective} "
        "= min(requested {backlog_requested}, somaxconn {somaxconn}).{model_text}"
    ),
    ("accept_queue_overflow", "cause", "capacity"): (
        "Cause: the queue overflowed and still held a backlog at the end of {longest_full_run_with_accepts} "
        "consecutive intervals while the application accepted {accept_rate_per_s}/s on average: arrivals "
        "outran the accept path.{model_text}"
    ),
    ("accept_queue_overflow", "fix", "sizing"): (
        "Fix: raise the listen() backlog to about {backlog_suggested} (twice the largest burst seen); "
        "somaxconn {somaxconn} {somaxconn_verdict}."
    ),
    ("accept_queue_overflow", "fix", "stall"): (
        "Fix: keep the accept path from blocking (accept in its own goroutine/thread, no slow work "
        "before the next accept()). A bigger backlog is not a cure: at {arrival_rate_before_per_s}/s the "
        "queue holds {seconds_of_arrivals_the_queue_holds} s of arrivals; the stall seen lasted at least "
        "{stalled_seconds_seen} s."
    ),
    ("accept_queue_overflow", "fix", "capacity"): (
        "Fix: add accept/processing capacity (more workers, SO_REUSEPORT listeners); "
        "a bigger backlog adds waiting time, not throughput."
    ),
    ("retransmit_storm", "symptom", "lab_client"): "Lab client: {client_text}.",
    ("retransmit_storm", "symptom", "rate_only"): "No client-side view in this run; the rate below is the symptom.",
    ("retransmit_storm", "counter", "retrans_segs"): (
        "Kernel counters in {netns_label}: TcpRetransSegs +{kernel_retrans_segs} against {out_segs_in_window} "
        "segments sent in the window ({retrans_rate_pct} %); TCPSynRetrans +{kernel_syn_retrans} for "
        "{new_connections_in_window} new connections. Probe vs kernel: {probe_retrans_segs} vs "
        "{kernel_retrans_segs} segments ({retrans_diff_pct} %), SYN {probe_syn_retrans} vs {kernel_syn_retrans}; "
        "the kernel skipped the probe {probe_recursion_misses} time(s) (recursion misses)."
    ),
    ("retransmit_storm", "probe", "endpoint_retransmits"): (
        "Probe: {data_segs} data segments retransmitted in {data_events} events (GSO), {syn_segs} SYN and "
        "{synack_segs} SYN-ACK retransmits over {intervals} intervals; peak {peak_segs_per_s}/s."
    ),
    ("retransmit_storm", "probe", "below_threshold"): (
        "Probe: {data_segs} data and {syn_segs} SYN retransmits, {rate_pct} % of segments sent: below a storm."
    ),
    ("retransmit_storm", "cause", "data_loss"): (
        "Cause: data segments {direction} are lost on the path and re-sent{lab_text}."
    ),
    ("retransmit_storm", "cause", "syn_loss"): (
        "Cause: connection attempts {direction} lose their SYN (or SYN-ACK) and wait for a retry{lab_text}."
    ),
    ("retransmit_storm", "cause", "remote_accept_queue_full"): (
        "Cause: the server's accept queue on {direction} was full in {listener_full_intervals} interval(s): a full "
        "queue silently drops SYNs and final ACKs (with the data on them); these are the client's retries "
        "(see accept_queue_overflow)."
    ),
    ("retransmit_storm", "fix", "remote_accept_queue_full"): (
        "Fix: the accept-queue finding's fix; the network is not at fault."
    ),
    ("retransmit_storm", "cause", "local_accept_queue_full"): (
        "Cause: the accept queue of this server's listener ({direction}) was full in {listener_full_intervals} "
        "interval(s): "
        "the clients' final ACKs met the full queue and were dropped, so the kernel re-sent its SYN-ACKs "
        "(see accept_queue_overflow)."
    ),
    ("retransmit_storm", "fix", "local_accept_queue_full"): (
        "Fix: the accept-queue finding's fix; the network is not at fault."
    ),
    ("retransmit_storm", "fix", "data_loss"): (
        "Fix: find the lossy hop toward {raddr} (interface drops: ip -s link; qdisc drops: tc -s qdisc; "
        "firewall counters), and fix or route around it. Retransmits follow loss; tuning TCP does not remove it."
    ),
    ("retransmit_storm", "fix", "syn_loss"): (
        "Fix: find where SYNs toward port {service_port} are dropped: a full accept queue at the server "
        "(ListenOverflows there), a firewall or a rate limit."
    ),
    ("retransmit_storm", "verification", "rerun"): (
        "Verify: run `{command}` after the change and expect retransmits below {expect_rate_pct_below} % of segments."
    ),
    ("time_wait_exhaustion", "symptom", "eaddrnotavail"): (
        "connect() failed with EADDRNOTAVAIL {eaddrnotavail_connect_calls} times in {processes}{client_text}."
    ),
    ("time_wait_exhaustion", "counter", "time_wait_vs_ports"): (
        "TIME_WAIT sockets toward the endpoint reached {time_wait_max}, {time_wait_share_of_ports_pct} % of the "
        "{ports_in_range} ports in ip_local_port_range ({port_range}); each held for "
        "{time_wait_length_observed_s} s (from ss timers; tcp_fin_timeout={tcp_fin_timeout})."
    ),
    ("time_wait_exhaustion", "counter", "ports_free"): (
        "TIME_WAIT toward the endpoint peaked at {time_wait_max} of {ports_in_range} ports: room left. "
        "TIME_WAIT lasted {time_wait_length_observed_s} s here (ss timers), with tcp_fin_timeout={tcp_fin_timeout}."
    ),
    ("time_wait_exhaustion", "probe", "active_closes"): (
        "Probe: this side closed first {active_closes} times (the peer {passive_closes}), {active_close_rate_per_s}/s "
        "while it could. Little's law: {closes_in_60s_before_peak} active closes in the 60 s before the peak predict "
        "as many TIME_WAIT sockets; measured {time_wait_at_peak} ({littles_law_error_pct} %). "
        "{lifetime_under_1s_pct} % of connections lived under 1 s (mean {mean_lifetime_ms} ms)."
    ),
    ("time_wait_exhaustion", "cause", "short_connections_client_closes"): (
        "Cause: short connections that this side closes first ({we_close_first_pct} % of closes); each holds its port "
        "60 s, so at most {max_new_conn_per_s_without_reuse} new connections/s fit toward one endpoint "
        "(model: at the measured {active_close_rate_per_s}/s the range lasts {ports_last_s_at_measured_rate} s). "
        "tcp_tw_reuse={tcp_tw_reuse}, tcp_timestamps={tcp_timestamps}."
    ),
    ("time_wait_exhaustion", "fix", "ranked"): (
        "Fix, best first: (1) reuse connections (keep-alive, a pool); (2) net.ipv4.tcp_tw_reuse=1 lets outgoing "
        "connections take a TIME_WAIT port after 1 s (needs tcp_timestamps=1; now {tcp_tw_reuse}); (3) widen "
        "ip_local_port_range (now {ports_in_range} ports). tcp_fin_timeout does NOT shorten TIME_WAIT: it is the "
        "FIN_WAIT2 timeout; TIME_WAIT is fixed at 60 s."
    ),
    ("time_wait_exhaustion", "verification", "rerun"): (
        "Verify: `{command}` and expect {expect_eaddrnotavail} EADDRNOTAVAIL."
    ),
    ("event_loop_saturation", "symptom", "client"): "Lab client: wrk {wrk_requests_per_s} requests/s.",
    ("event_loop_saturation", "counter", "no_kernel_counter"): (
        "Kernel counter: none exists for a saturated loop; its listeners' Recv-Q peaked at {listener_recv_q_max}."
    ),
    ("event_loop_saturation", "probe", "never_waits"): (
        "Probe: in {intervals_never_waiting} of {intervals_with_events} busy intervals the loop spent under 5 % of "
        "the time blocked in epoll (mean {wait_share_busy_pct} %); {calls_per_s} calls/s, {nonblocking_share_pct} % "
        "non-blocking polls, {events_per_call} events per call, {full_batches} full batches."
    ),
    ("event_loop_saturation", "probe", "waits"): (
        "Probe: the loop waits (median {wait_share_median_pct} % of each busy interval blocked in epoll)."
    ),
    ("event_loop_saturation", "cause", "loop_saturated"): (
        "Cause: more ready work than the loop's threads can run (GOMAXPROCS={gomaxprocs}, "
        "{work_per_request} of CPU per request): events wait in socket buffers, not in epoll."
    ),
    ("event_loop_saturation", "fix", "loop_saturated"): (
        "Fix: more loop threads or processes (GOMAXPROCS, nginx worker_processes, Redis io-threads, "
        "SO_REUSEPORT), move CPU work off the loop, or shed load. epoll itself is not the bottleneck."
    ),
    ("event_loop_saturation", "verification", "rerun"): (
        "Verify: `{command}`: the loop should spend over {expect_wait_share_pct_above} % of idle time blocked."
    ),
    ("accept_queue_overflow", "verification", "rerun"): (
        "Verify: after the change run `{command}` and expect ListenOverflows +{expect_listen_overflows}, "
        "no interval with depth > limit, and connect p99 below {expect_connect_p99_ms_below:.0f} ms."
    ),
}


def _derived(kind: str, link: Link) -> dict[str, Any]:
    """Numbers turned into phrases that the templates need."""
    ev = dict(link.evidence)
    if link.link == "counter" and kind == "accept_queue_overflow":
        ev["reqq_note"] = (
            f"TCPReqQFullDoCookies {ev['reqq_full_cookies']}: the SYN queue, which shares the same limit, "
            "filled too and the kernel answered with syncookies."
            if ev.get("reqq_full_cookies")
            else ""
        )
    if link.link == "symptom":
        ev["client_text"] = ""
        if kind == "time_wait_exhaustion" and "attempts" in ev:
            ev["client_text"] = (
                f"; the lab client saw {ev['attempts_eaddrnotavail']} of {ev['attempts']} attempts fail that way "
                f"({ev['attempts_ok']} ok); Go's dialer calls connect() more than once per attempt"
            )
        elif "iperf3" in ev:
            ip = ev["iperf3"]
            ev["client_text"] = (
                f"iperf3 sent at {ip['bits_per_second'] / 1e6:.0f} Mbit/s and counted {ip['retransmits']} retransmits"
            )
        elif "connects_waited_syn_retry" in ev and "connect_p99_ms" in ev:
            ev["client_text"] = (
                f"{ev['attempts']} connects, {ev['ok']} ok, {ev['connects_waited_syn_retry']} waited >= 0.9 s "
                f"for a SYN retry, connect p99 {ev['connect_p99_ms']} ms"
            )
    if link.link == "cause":
        loss, syn = ev.get("lab_injected_loss_pct"), ev.get("lab_injected_syn_loss_pct")
        ev["lab_text"] = (
            f" (the lab dropped {loss} % of packets and {syn} % of SYNs at the receiver)" if loss is not None else ""
        )
    if link.link == "cause" and kind == "accept_queue_overflow":
        ev["model_text"] = model_sentence(ev.get("model"))
    if link.link == "fix" and link.key == "sizing":
        ev["somaxconn_verdict"] = (
            "must be raised too (the limit is the smaller of the two)"
            if ev.get("somaxconn_needed")
            else "already allows it"
        )
    return ev


MODEL_TEMPLATES = {
    "mm1k": (
        " Model: at the measured {lam_per_s} attempts/s and {mu_per_s} accepts/s with room for K = {capacity_k}, "
        "M/M/1/K predicts {predicted_pct} % of attempts overflow (mean queue wait {predicted_wait_ms} ms); "
        "measured {measured_pct} %."
    ),
    "burst": (
        " Model: a burst of at least {burst} new connections (the busiest interval) into room for "
        "K = {capacity_k} (limit + 2) drops the first attempt of {predicted_pct} % of them; measured "
        "{measured_pct} % of all attempts overflowed (retries included)."
    ),
    "not_applicable": (
        " Model: none applies — a stopped accept loop has no service rate, so no queueing model predicts it; "
        "the queue holds (limit + 1) / arrival rate seconds of arrivals, then drops."
    ),
}


def model_sentence(model: dict[str, Any] | None) -> str:
    if not model or model.get("kind") not in MODEL_TEMPLATES:
        return ""
    try:
        return MODEL_TEMPLATES[model["kind"]].format(**model)
    except (KeyError, IndexError, ValueError):
        return f" Model: {model}"


def describe(kind: str, link: Link) -> str:
    template = TEMPLATES.get((kind, link.link, link.key))
    if template is None:
        return f"{link.link} ({link.key}): {link.evidence}"
    try:
        return template.format(**_derived(kind, link))
    except (KeyError, IndexError, TypeError, ValueError):
        return f"{link.link} ({link.key}): {link.evidence}"


def headline(f: Finding) -> str:
    s = f.subject
    if f.kind == "event_loop_saturation":
        return f"{TITLES[f.kind]}: {s['comm']} (pid {s['pid']}, ports {s['listen_ports']}): {f.status}"
    if "service_port" in s and "laddr" not in s:
        where = f"connections to {s['raddr']}:{s['service_port']}"
    elif "service_port" in s:
        where = f"{s['laddr']} <-> {s['raddr']} port {s['service_port']} (we are the {s['we_are']})"
    else:
        where = f"{s.get('laddr')}:{s.get('lport')}" if s.get("lport") is not None else "a listener"
    proc = f" ({s['comm']} pid {s['pid']})" if s.get("comm") else ""
    cause = f" — {CAUSE_NAMES.get(f.cause_class or '', f.cause_class)}" if f.cause_class else ""
    return f"{TITLES.get(f.kind, f.kind)} on {where}{proc} in {s.get('netns_label')}: {f.status}{cause}"


# --- comparisons (analysis/compare.py) -------------------------------------

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
    return COMPARE_TEMPLATES[(r["outcome"], better)].format(**{**_rounded(r), "a": v["a"], "b": v["b"]})


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
        lines.append(
            f"| {r['label']} | {r['a_mean']:.4g} | {r['b_mean']:.4g} | {r['diff']:+.4g} | "
            f"{r['ci_low']:+.4g} … {r['ci_high']:+.4g} | {'yes' if r['significant'] else 'no'} |"
        )
    lines += ["", f"![per-run values]({plot})", ""]
    return "\n".join(lines)


# --- sweeps (analysis/sweep.py) -----------------------------------------------


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
                f"| {r['backlog']} | {r['limit']} | {r['rate_offered']:.0f} | {r['lam']:.0f} | {r['mu']:.0f} | "
                f"{r['rho']:.2f} | {r['p_measured']:.3f} | {r['p_mm1k']:.3f} | {r['p_sim']:.3f} | "
                f"{100 * r['abs_error']:+.1f} | {r['p_mm1k_offered']:.3f} | {r['wait_ms_measured']:.1f} | "
                f"{r['wait_ms_mm1k']:.1f} |"
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
                return "-" if x is None or x != x else f"{x:.1f}"

            lines.append(
                f"| {r['rate']:g} | {r['ports']} | {r['load_s']:g} | {r['tw_predicted']:.0f} | {r['tw_measured']} | "
                f"{s(r['first_fail_s_predicted'])} | {s(r['first_fail_s_measured'])} | "
                f"{r['fail_fraction_predicted']:.3f} | {r['fail_fraction_measured']:.3f} |"
            )
    lines += ["", f"![predicted vs measured]({plot})", ""]
    return "\n".join(lines)
