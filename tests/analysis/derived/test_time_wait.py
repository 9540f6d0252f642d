"""analysis/derived/time_wait.py on the time-wait exhaust lab (contract 2 and 3), against its
tw_close.csv, tw_sockets.csv, tw_connect.csv, sockstat.csv and sysctls.csv.

The lab: a client namespace with a 200-port range (40000-40199) closing first toward
198.18.0.1:8080 until every port is held in TIME_WAIT; later connects fail with EADDRNOTAVAIL."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from analysis.contract import CONTRACT_VERSION
from analysis.derived import time_wait as tw
from analysis.load import Run
from tests.analysis.derived.conftest import lab_netns, raw, run

C2 = "time-wait-exhaust"  # contract 2: tw_connect without the destination
C3 = "time-wait-exhaust-c3"  # contract 3: the destination of each failed connect
RADDR, PORT = "198.18.0.1", 8080


def client_closes_csv(name: str) -> pd.DataFrame:
    c = raw(name, "tw_close")
    cli = lab_netns(name, "cli")
    return c[(c["netns"] == cli) & (c["raddr"] == RADDR) & (c["service_port"] == PORT) & (c["service_local"] == 0)]


@pytest.mark.parametrize("name", [C2, C3])
def test_port_range(name: str) -> None:
    s = raw(name, "sysctls", dtype=str)
    cli, srv = lab_netns(name, "cli"), lab_netns(name, "srv")
    for ns in (cli, srv):
        v = s[(s["phase"] == "start") & (s["netns"] == str(ns)) & (s["key"] == "net.ipv4.ip_local_port_range")]
        lo, hi = (int(x) for x in v["value"].iloc[0].split())
        assert tw.port_range(run(name), ns) == (lo, hi)
        assert tw.ports_in_range(run(name), ns) == hi - lo + 1
    assert tw.ports_in_range(run(name), cli) == 200
    assert tw.port_range(run(name), 1) is None and tw.ports_in_range(run(name), 1) is None


@pytest.mark.parametrize("name", [C2, C3])
def test_endpoints(name: str) -> None:
    keys = set()
    for table in ("tw_sockets", "tw_close"):
        t = raw(name, table)
        t = t[t["service_local"] == 0]
        keys |= {(int(a), b, int(c)) for a, b, c in t[["netns", "raddr", "service_port"]].to_numpy()}
    assert tw.endpoints(run(name)) == sorted(keys) == [(lab_netns(name, "cli"), RADDR, PORT)]
    assert tw.endpoints(run(name), failed=True) == sorted(keys)


@pytest.mark.parametrize("name", [C2, C3])
def test_client_closes_and_close_summary(name: str) -> None:
    cli = lab_netns(name, "cli")
    csv = client_closes_csv(name)
    closes = tw.client_closes(run(name), cli, RADDR, PORT)
    assert len(closes) == len(csv)
    s = tw.close_summary(closes)
    active = int(csv["active_closes"].sum())
    assert s["active_closes"] == active == tw.ports_in_range(run(name), cli)  # one per port, then none left
    assert s["passive_closes"] == int(csv["passive_closes"].sum()) == 0
    act = csv[csv["active_closes"] > 0]
    assert s["active_close_rate_per_s"] == round(active / (act["time_s"].max() - act["time_s"].min() + 1), 1)
    life = csv[tw.LIFE_COLS].to_numpy().sum()
    assert s["lifetime_under_1s_pct"] == round(100 * csv[tw.LIFE_COLS[:4]].to_numpy().sum() / life, 1)
    assert s["mean_lifetime_ms"] == pytest.approx(csv["life_sum_us"].sum() / life / 1000, abs=0.06)


@pytest.mark.parametrize("name", [C2, C3])
def test_tw_series_and_littles_law(name: str) -> None:
    r, cli = run(name), lab_netns(name, "cli")
    ss = raw(name, "sockstat")
    samples = sorted(ss.loc[ss["netns"] == cli, "time_s"].unique())
    t = raw(name, "tw_sockets")
    t = t[(t["netns"] == cli) & (t["raddr"] == RADDR) & (t["service_port"] == PORT) & (t["service_local"] == 0)]
    want = t.groupby("time_s")["count"].sum().reindex(samples, fill_value=0)
    series = tw.tw_series(r, cli, RADDR, PORT)
    assert series.tolist() == want.tolist()
    assert series.max() == 200  # every port of the range held in TIME_WAIT
    ll = tw.littles_law(r, cli, RADDR, PORT)
    assert ll["measured"].tolist() == want.tolist()
    closes = client_closes_csv(name)
    for at, pred in ll["predicted"].items():
        in_60s = closes[(closes["time_s"] > at - 60) & (closes["time_s"] <= at)]
        assert pred == in_60s["active_closes"].sum()
    # Within the capture nothing expired yet: Little's law holds exactly at the end.
    assert ll["measured"].iloc[-1] == ll["predicted"].iloc[-1] == 200
    at, pred = tw.littles_law_peak(ll, r.end)
    assert ll.loc[at, "measured"] == ll["measured"].max() and pred == ll.loc[at, "predicted"]
    assert tw.littles_law_peak(ll.iloc[0:0], r.end) == (r.end, 0.0)


@pytest.mark.parametrize("name", [C2, C3])
def test_observed_time_wait_length_is_the_kernels_60_s(name: str) -> None:
    length = tw.observed_time_wait_length(run(name), lab_netns(name, "cli"), RADDR, PORT)
    assert length == pytest.approx(60, abs=2)
    # The server side closed nothing first: no length to see.
    assert tw.observed_time_wait_length(run(name), lab_netns(name, "srv"), RADDR, PORT) is None


def test_a_tables_groupings_go_with_it() -> None:
    """The groupings made once per table live as long as the table: a report that lets a day's
    tables go (Run.release) must not find them held by this module."""
    fresh = Run.open(run(C3).path)
    tw.observed_time_wait_length(fresh, lab_netns(C3, "cli"), RADDR, PORT)
    tables = {id(fresh.table(n)) for n in ("tw_sockets", "tw_close", "sockstat")}
    assert {k[0] for k in tw._GROUPS} & tables
    fresh.release("tw_sockets", "tw_close", "sockstat")
    assert not {k[0] for k in tw._GROUPS} & tables


def test_eaddrnotavail_failures_contract_3() -> None:
    cli = lab_netns(C3, "cli")
    c = raw(C3, "tw_connect")
    mine = c[(c["netns"] == cli) & (c["errno"] == 99)]
    r = run(C3)
    assert tw.eaddrnotavail_failures(r, cli)["failures"].sum() == mine["failures"].sum()
    dest = tw.eaddrnotavail_failures(r, cli, RADDR, PORT, unrecorded=False)
    want = mine[(mine["raddr"] == RADDR) & (mine["rport"] == PORT)]
    assert dest["failures"].sum() == want["failures"].sum() > 0
    assert tw.eaddrnotavail_failures(r, cli, RADDR, 9, unrecorded=False).empty
    assert tw.eaddrnotavail_unrecorded(r, cli) == 0
    # Go calls connect() 3 times a dial: 3 kernel failures per failed dial of the client's log.
    conns = raw(C3, "connects", dtype={"errno": str})
    assert mine["failures"].sum() == 3 * (conns["errno"] == "EADDRNOTAVAIL").sum()


def test_eaddrnotavail_failures_contract_2_has_no_destination() -> None:
    cli = lab_netns(C2, "cli")
    c = raw(C2, "tw_connect")  # contract 2: netns, pid, comm, errno, calls
    mine = c[(c["netns"] == cli) & (c["errno"] == 99)]
    r = run(C2)
    assert tw.eaddrnotavail_unrecorded(r, cli) == int(mine["calls"].sum()) > 0
    # Unrecorded destinations count for every destination, unless asked not to.
    assert tw.eaddrnotavail_failures(r, cli, RADDR, PORT)["failures"].sum() == mine["calls"].sum()
    assert tw.eaddrnotavail_failures(r, cli, RADDR, PORT, unrecorded=False).empty


def test_samples_that_did_not_list_time_wait_are_not_zero(tmp_path: Path) -> None:
    """Above sample-netns --tw-per-sample the TIME_WAIT table is listed only at some samples
    (sockstat.csv tw_listed, contract 8): the others are left out of the series and of Little's
    law, never read as "no TIME_WAIT". The exhaust run (contract 3) with every other client
    sample unlisted and its tw_sockets rows at those samples dropped, as the sampler writes it."""
    r, cli = run(C3), lab_netns(C3, "cli")
    copy = tmp_path / "run"
    shutil.copytree(r.path, copy)
    meta = json.loads((copy / "metadata.json").read_text())
    meta["data_contract"] = CONTRACT_VERSION
    (copy / "metadata.json").write_text(json.dumps(meta))
    ss = raw(C3, "sockstat")
    samples = sorted(ss.loc[ss["netns"] == cli, "time_s"].unique())
    unlisted = set(samples[1::2])
    ss["tw_listed"] = (~((ss["netns"] == cli) & ss["time_s"].isin(unlisted))).astype(int)
    ss["flows_listed"] = 1
    ss.to_csv(copy / "sockstat.csv", index=False)
    t = raw(C3, "tw_sockets", keep_default_na=False)
    t = t[~((t["netns"] == cli) & t["time_s"].isin(unlisted))]
    t.to_csv(copy / "tw_sockets.csv", index=False)

    sub = Run.open(copy)
    series = tw.tw_series(sub, cli, RADDR, PORT)
    full = tw.tw_series(r, cli, RADDR, PORT)
    assert list(series.index) == samples[0::2]
    assert series.tolist() == full.reindex(samples[0::2]).tolist()
    assert tw.littles_law(sub, cli, RADDR, PORT)["measured"].tolist() == series.tolist()
    assert tw.tw_samples_listed(sub, cli) == (len(samples[0::2]), len(samples))
    assert tw.tw_samples_listed(r, cli) == (len(samples), len(samples))  # contract 3: every sample


@pytest.mark.parametrize("name", [C2, C3, "time-wait-reuse", "host-overflow"])
def test_tw_max_per_endpoint_is_the_most_at_one_sample(name: str) -> None:
    t = raw(name, "tw_sockets")
    t = t[t["service_local"] == 0]
    want = t.groupby(["netns", "raddr", "service_port", "time_s"])["count"].sum().groupby(level=[0, 1, 2]).max()
    assert tw.tw_max_per_endpoint(run(name)) == {(int(n), str(r), int(p)): int(v) for (n, r, p), v in want.items()}
