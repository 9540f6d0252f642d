"""retransmit_storm: a share of the segments sent toward one endpoint had to be sent again.

Chain: symptom (lab client: throughput and failures; else the retransmit rate)
 -> counter (TcpRetransSegs / TCPSynRetrans deltas in the namespace, reconciled
    with the probe's segment count)
 -> probe (retransmitted segments per endpoint, SYN apart from data; data
    retransmits against the endpoint's own flows' data segments, never against
    the whole namespace's: a lossy flow beside a heavy clean one is not diluted)
 -> cause (data loss on the path, or SYNs lost; the loss a lab injected)
 -> fix -> verification.
"""

from __future__ import annotations

from typing import Any

from ..derived import connects
from ..derived.counters import total_delta
from ..derived.retransmits import endpoint_flows, flow_rates, reconcile
from ..findings import Finding, Link
from .base import Rule, RunView

KIND = "retransmit_storm"
# aq_listener: retransmits toward (or from) a listener whose accept queue was
# full are that overflow, not the path.
INPUTS = ("rt_endpoint", "rt_flow", "aq_listener", "counters", "connects")

# A storm: at least this share of the data segments the endpoint's own flows sent
# re-sent (runs of contract 2, without per-flow data: of the namespace's sent
# segments); healthy LAN/loopback paths sit far below 0.1 %...
RATE_THRESHOLD = 0.005
# ...or this share of new connections needing a SYN retransmit...
SYN_THRESHOLD = 0.05
# ...and never on fewer segments than this (one lost ACK is not a storm).
MIN_SEGMENTS = 20
KEY = ["netns", "laddr", "raddr", "service_port", "service_local"]


def _symptom(run: RunView) -> Link:
    lab = run.lab or {}
    ev: dict[str, Any] = {}
    if lab.get("iperf3"):
        ev["iperf3"] = lab["iperf3"]
    client = connects.summary(run)
    if client:
        for k in ("attempts", "ok", "connects_waited_syn_retry", "connect_p99_ms"):
            ev[k] = client[k]
    return Link("symptom", "lab_client" if ev else "rate_only", ev)


def _evaluate(run: RunView) -> list[Finding]:
    rt = run.table("rt_endpoint")
    out: list[Finding] = []
    interval = int(run.metadata.get("interval_s", 1))
    lab = run.lab or {}
    for key, rows in rt.groupby(KEY, sort=True):
        netns, laddr, raddr, port, local = int(key[0]), str(key[1]), str(key[2]), int(key[3]), int(key[4])
        data = int(rows["data_segs"].sum())
        syn = int(rows["syn_segs"].sum() + rows["synack_segs"].sum())
        t0, t1 = float(rows["time_s"].min()) - interval, float(rows["time_s"].max())
        sent = total_delta(run, netns, "OutSegs", t0, t1 + interval + 0.5)
        opens = total_delta(run, netns, "ActiveOpens", t0, t1 + interval + 0.5) + total_delta(
            run, netns, "PassiveOpens", t0, t1 + interval + 0.5
        )
        flows = endpoint_flows(run, netns, laddr, raddr, port, local)
        per_flow = flow_rates(flows) if flows is not None else {}
        if per_flow.get("flow_data_segs_out"):
            # The endpoint's own data segments: a busy neighbour cannot dilute it.
            rate = per_flow["flow_data_segs"] / per_flow["flow_data_segs_out"]
        else:
            rate = (data + syn) / sent if sent else None
        syn_share = syn / opens if opens else None
        subject = {
            "netns": netns,
            "netns_label": run.netns_label(netns),
            "laddr": laddr,
            "raddr": raddr,
            "service_port": port,
            "we_are": "server" if local else "client",
        }
        if "flow_lport" in per_flow:
            # One flow re-sent (nearly) all of it: the finding names that flow.
            subject["lport"], subject["rport"] = per_flow.pop("flow_lport"), per_flow.pop("flow_rport")
        probe_ev = {
            "data_segs": data,
            "data_events": int(rows["data_events"].sum()),
            "syn_segs": int(rows["syn_segs"].sum()),
            "synack_segs": int(rows["synack_segs"].sum()),
            "intervals": len(rows),
            "peak_segs_per_s": round(
                float((rows["data_segs"] + rows["syn_segs"] + rows["synack_segs"]).max()) / interval, 1
            ),
            **per_flow,
        }
        storm = (data + syn) >= MIN_SEGMENTS and (
            (rate is not None and rate >= RATE_THRESHOLD) or (syn_share is not None and syn_share >= SYN_THRESHOLD)
        )
        if not storm:
            out.append(
                Finding(
                    KIND,
                    "absent",
                    subject,
                    chain=[
                        Link(
                            "probe",
                            "below_threshold",
                            {
                                **probe_ev,
                                # The namespace's share only when the flows' own is not known.
                                "rate_pct": round(100 * rate, 3)
                                if rate is not None and per_flow.get("flow_rate_pct") is None
                                else None,
                            },
                        )
                    ],
                )
            )
            continue
        rec = reconcile(run, netns)
        agrees = (
            rec["retrans_diff_pct"] is not None
            and rec["kernel_retrans_segs"] > 0
            and abs(rec["retrans_diff_pct"]) <= 10
        )
        counter_ev = {
            "netns_label": run.netns_label(netns),
            "out_segs_in_window": sent,
            "retrans_rate_pct": round(100 * rate, 2) if rate is not None else None,
            "new_connections_in_window": opens,
            "syn_retrans_share_pct": round(100 * syn_share, 1) if syn_share is not None else None,
            **rec,
        }
        cause = "syn_loss" if data < syn else "data_loss"
        # Retransmits toward a listener whose accept queue overflowed: a full queue
        # drops SYNs and the final ACK (with any data riding on it) silently, so
        # the drops are that overflow, not the network.
        aq = run.table("aq_listener")
        overflowed = aq[(aq["laddr"] == raddr) & (aq["lport"] == port) & (aq["full_events"] > 0)]
        if not overflowed.empty:
            cause = "remote_accept_queue_full"
        # On the server's side the same overflow shows as SYN-ACK retransmits:
        # the client's final ACK met the full queue and was dropped, so the
        # request stays half-open and the kernel re-sends its SYN-ACK. Only
        # that listener, in this namespace, and only when SYN-ACKs dominate.
        own = aq[(aq["netns"] == netns) & (aq["lport"] == port) & (aq["full_events"] > 0)]
        if local and not own.empty and probe_ev["synack_segs"] >= data:
            cause, overflowed = "local_accept_queue_full", own
        cause_ev: dict[str, Any] = {
            "direction": f"{laddr} -> {raddr}:{port}" if not local else f"{laddr}:{port} -> {raddr}"
        }
        if cause in ("remote_accept_queue_full", "local_accept_queue_full"):
            cause_ev["listener_full_intervals"] = len(overflowed)
        if lab.get("lab") == "retransmit":
            cause_ev["lab_injected_loss_pct"] = lab.get("loss_pct")
            cause_ev["lab_injected_syn_loss_pct"] = lab.get("syn_loss_pct")
        command = (
            "make lab LAB=retransmit VARIANT=loss0"
            if lab.get("lab") == "retransmit"
            else f"make capture NETNS={subject['netns_label']} DURATION=60"
        )
        out.append(
            Finding(
                KIND,
                "confirmed" if agrees else "suspected",
                subject,
                window={
                    "start_s": t0,
                    "end_s": t1,
                    "start_rel_s": round(t0 - run.start, 1),
                    "end_rel_s": round(t1 - run.start, 1),
                },
                cause_class=cause,
                chain=[
                    _symptom(run),
                    Link("counter", "retrans_segs", counter_ev),
                    Link("probe", "endpoint_retransmits", probe_ev),
                    Link("cause", cause, cause_ev),
                    Link("fix", cause, {"raddr": raddr, "service_port": port}),
                    Link("verification", "rerun", {"command": command, "expect_rate_pct_below": 100 * RATE_THRESHOLD}),
                ],
            )
        )
    return out


RULE = Rule(KIND, INPUTS, _evaluate)
evaluate = RULE.evaluate
