"""analysis/derived/retransmits.py on real captures, against rt_endpoint.csv, rt_flow.csv and the
kernel's own counters in counters.csv."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.derived import retransmits as rt
from tests.analysis.derived.conftest import lab_netns, raw, run

LOSS = "retransmit-loss1"  # 1 % of the data dropped toward an iperf3 server (contract 2)
SYNLOSS = "retransmit-synloss"  # SYNs dropped
HOST = "host-overflow"  # contract 3, with rt_flow: SYN retransmits toward 127.0.0.1:18090
HOST_NS = 4026531833


def kernel_delta(name: str, netns: int, counter: str) -> int:
    """Last minus first value of one counter of one namespace in counters.csv."""
    c = raw(name, "counters")
    c = c[(c["netns"] == netns) & (c["counter"] == counter)].sort_values("time_s")
    return int(c["value"].iloc[-1] - c["value"].iloc[0])


def endpoint_csv(name: str, netns: int) -> pd.DataFrame:
    e = raw(name, "rt_endpoint")
    return e[e["netns"] == netns]


@pytest.mark.parametrize(("name", "side"), [(LOSS, "cli"), (LOSS, "srv"), (SYNLOSS, "cli")])
def test_endpoint_rows_and_segments_per_interval(name: str, side: str) -> None:
    ns = lab_netns(name, side)
    csv = endpoint_csv(name, ns)
    rows = rt.endpoint_rows(run(name), ns)
    assert len(rows) == len(csv)
    per = rt.segments_per_interval(run(name), ns)
    want = (csv["data_segs"] + csv["syn_segs"] + csv["synack_segs"]).groupby(csv["time_s"]).sum()
    assert per.to_dict() == want.to_dict()


@pytest.mark.parametrize(
    ("name", "netns"),
    [
        (LOSS, lab_netns(LOSS, "cli")),
        (LOSS, lab_netns(LOSS, "srv")),
        (SYNLOSS, lab_netns(SYNLOSS, "cli")),
        (HOST, HOST_NS),
        ("accept-overflow-sizing-drift", lab_netns("accept-overflow-sizing-drift", "cli")),
    ],
)
def test_reconcile_against_the_kernel(name: str, netns: int) -> None:
    csv = endpoint_csv(name, netns)
    probe_all = int(csv[["data_segs", "syn_segs", "synack_segs"]].to_numpy().sum())
    probe_syn = int(csv[["syn_segs", "synack_segs"]].to_numpy().sum())
    kern_all = kernel_delta(name, netns, "RetransSegs")
    kern_syn = kernel_delta(name, netns, "TCPSynRetrans")
    got = rt.reconcile(run(name), netns)
    assert got["probe_retrans_segs"] == probe_all
    assert got["kernel_retrans_segs"] == kern_all
    assert got["probe_syn_retrans"] == probe_syn
    assert got["kernel_syn_retrans"] == kern_syn
    assert got["failed_attempts"] == int(csv["failed_events"].sum())
    assert got["probe_recursion_misses"] == run(name).metadata["probes"]["retransmits"].get("recursion_misses")
    want_pct = round(100 * (probe_all - kern_all) / kern_all, 2) if kern_all else (0.0 if probe_all == 0 else None)
    assert got["retrans_diff_pct"] == want_pct
    # These captures are exact: the probe's count is the kernel's.
    assert probe_all == kern_all and probe_syn == kern_syn


def test_reconcile_sees_the_storms() -> None:
    assert rt.reconcile(run(LOSS), lab_netns(LOSS, "cli"))["probe_retrans_segs"] > 100
    syn = rt.reconcile(run(SYNLOSS), lab_netns(SYNLOSS, "cli"))
    assert syn["probe_syn_retrans"] == syn["probe_retrans_segs"] > 0


def test_endpoint_flows_needs_contract_3() -> None:
    ns = lab_netns(LOSS, "cli")
    assert not (run(LOSS).path / "rt_flow.csv").exists()
    assert rt.endpoint_flows(run(LOSS), ns, "198.18.0.2", "198.18.0.1", 5201, 0) is None


def test_endpoint_flows_and_flow_rates() -> None:
    fl = raw(HOST, "rt_flow")
    fl = fl[(fl["netns"] == HOST_NS) & (fl["laddr"] == "127.0.0.1") & (fl["raddr"] == "127.0.0.1")]
    mine = fl[(fl["rport"] == 18090) & (fl["lport"] > 18090)]  # client side: service port remote
    flows = rt.endpoint_flows(run(HOST), HOST_NS, "127.0.0.1", "127.0.0.1", 18090, 0)
    assert flows is not None
    assert len(flows) == len(mine) > 0
    assert int(flows["data_segs"].sum()) == int(mine["data_segs"].sum())
    got = rt.flow_rates(flows)
    sent, resent = int(mine["data_segs_out"].sum()), int(mine["data_segs"].sum())
    assert got["flow_data_segs_out"] == sent
    assert got["flow_data_segs"] == resent
    assert got["flow_rate_pct"] == round(100 * resent / sent, 3)
    per = mine.groupby(["lport", "rport"])[["data_segs", "data_segs_out"]].sum()
    per = per[per["data_segs_out"] > 0]
    assert got["flows_retransmitting"] == len(per)
    assert got["worst_flow_rate_pct"] == round(100 * float((per["data_segs"] / per["data_segs_out"]).max()), 2)
    # The data the endpoint re-sent is what its flows re-sent (rt_endpoint against rt_flow).
    e = endpoint_csv(HOST, HOST_NS)
    e = e[(e["service_port"] == 18090) & (e["service_local"] == 0)]
    assert int(e["data_segs"].sum()) == resent
    # The server side of the same port holds no retransmitting flow.
    srv = rt.endpoint_flows(run(HOST), HOST_NS, "127.0.0.1", "127.0.0.1", 18090, 1)
    assert srv is not None and srv.empty


def test_flow_rates_names_a_dominant_flow() -> None:
    """A made-up pair of real-looking flows: one carries 9 of 10 re-sent segments."""
    flows = pd.DataFrame(
        {"lport": [40000, 40001], "rport": [5201, 5201], "data_segs": [90, 10], "data_segs_out": [1000, 5000]}
    )
    got = rt.flow_rates(flows)
    assert (got["flow_lport"], got["flow_rport"], got["flow_share_pct"]) == (40000, 5201, 90.0)
    assert got["worst_flow"] == "40000 -> 5201" and got["worst_flow_rate_pct"] == 9.0
    assert "flow_lport" not in rt.flow_rates(flows.assign(data_segs=[50, 50]))


def test_endpoint_rates() -> None:
    ns = lab_netns(LOSS, "cli")
    r = run(LOSS)
    rows = rt.endpoint_rows(r, ns)
    t0, t1 = float(rows["time_s"].min()) - 1, float(rows["time_s"].max())
    got = rt.endpoint_rates(r, ns, rows, {}, t0, t1, 1)
    c = raw(LOSS, "counters")
    c = c[(c["netns"] == ns) & (c["time_s"] >= t0) & (c["time_s"] <= t1 + 1.5)]

    def window(counter: str) -> int:
        return int(c.loc[c["counter"] == counter, "delta"].sum())

    csv = endpoint_csv(LOSS, ns)
    assert got.data == int(csv["data_segs"].sum())
    assert got.syn == int(csv["syn_segs"].sum() + csv["synack_segs"].sum())
    assert got.sent == window("OutSegs") > 0
    assert got.opens == window("ActiveOpens") + window("PassiveOpens")
    assert got.rate == pytest.approx((got.data + got.syn) / got.sent)
    # About the 1 % the lab drops (of the data segments; the namespace also sends ACKs).
    assert got.rate is not None and 0.002 < got.rate < 0.05
    # With the flows' own numbers, the rate is of those.
    by_flow = rt.endpoint_rates(r, ns, rows, {"flow_data_segs": 5, "flow_data_segs_out": 100}, t0, t1, 1)
    assert by_flow.rate == 0.05
