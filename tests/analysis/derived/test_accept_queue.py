"""analysis/derived/accept_queue.py on real captures, against the fixtures' own CSV files."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from analysis.derived import accept_queue as aq
from analysis.derived.listener_sockets import SocketKey, socket_owner
from analysis.load import Run
from tests.analysis.derived.conftest import lab_netns, raw, run

SIZING = "accept-overflow-sizing"
STALL = "accept-overflow-stall"
HOST_OVERFLOW = "host-overflow"
HOST_NS = 4026531833


def listener_csv(name: str, netns: int, lport: int) -> pd.DataFrame:
    df = raw(name, "aq_listener")
    return df[(df["netns"] == netns) & (df["lport"] == lport)].reset_index(drop=True)


def counter_deltas(name: str, netns: int, counter: str) -> pd.Series:
    """One counter's deltas per sample (time_s index), from counters.csv: value minus the previous value."""
    c = raw(name, "counters")
    c = c[(c["netns"] == netns) & (c["counter"] == counter)].sort_values("time_s")
    return c.set_index("time_s")["value"].diff().dropna().astype("int64")


@pytest.mark.parametrize("name", [SIZING, STALL, "accept-overflow-healthy", "accept-overflow-queue"])
def test_full_intervals(name: str) -> None:
    ns = lab_netns(name, "srv")
    rows = run(name).table("aq_listener")
    rows = rows[rows["netns"] == ns]
    csv = listener_csv(name, ns, 8080)
    want = csv[(csv["full_events"] > 0) | (csv["depth_now"] > csv["limit"])]["time_s"].tolist()
    assert aq.full_intervals(rows)["time_s"].tolist() == want
    if name == "accept-overflow-healthy":
        assert want == []
    else:
        assert want


def test_owner_is_the_process_that_accepted_most() -> None:
    """A run of contract 9 or older (no socket inode): the processes that accepted on the port, most first."""
    ns = lab_netns(SIZING, "srv")
    acc = raw(SIZING, "aq_accept")
    top = acc[(acc["netns"] == ns) & (acc["lport"] == 8080)].groupby(["pid", "comm"])["accepted"].sum().idxmax()
    got = socket_owner(run(SIZING), SocketKey(ns, "198.18.0.1", 8080, 0))
    assert (got["pid"], got["comm"], got["source"]) == (int(top[0]), top[1], "probe accept()")
    assert top[1] == "aqserver"  # the lab's server


def test_owner_falls_back_to_ss_then_nothing() -> None:
    # Port 18082 (nginx, idle) in the host capture: no accept() seen, but ss -p names it.
    name = "host-healthy"
    acc = raw(name, "aq_accept")
    assert acc[acc["lport"] == 18082].empty
    ls = raw(name, "listeners")
    ls = ls[(ls["lport"] == 18082) & ls["pid"].notna()]
    got = socket_owner(run(name), SocketKey(HOST_NS, "127.0.0.1", 18082, 0))
    assert (got["pid"], got["comm"], got["source"]) == (int(ls["pid"].iloc[-1]), ls["comm"].iloc[-1], "ss -p")
    nothing = socket_owner(run(name), SocketKey(HOST_NS, "127.0.0.1", 1, 0))
    assert nothing == {"pid": None, "comm": None, "source": None, "owners": []}


def test_owner_is_named_by_its_latest_row_after_an_exec(copy_fixture) -> None:
    """A server started by `ip netns exec` may be recorded first as `ip` (contract 13 records it again
    once it has exec'd): the listener's owner is named by its latest row, not its first."""
    path: Path = copy_fixture("socket-buffers-slow-reader-unlisted-trixie")
    meta = json.loads((path / "metadata.json").read_text())
    assert meta["data_contract"] == 12  # contract 13 changed processes.csv only
    (path / "metadata.json").write_text(json.dumps({**meta, "data_contract": 13}))
    header, row = (path / "processes.csv").read_text().splitlines()
    time_s, netns, pid, comm, _exe, cgroup = row.split(",")
    launcher = ",".join([f"{float(time_s) - 1:.3f}", netns, pid, "ip", "/usr/bin/ip", cgroup])
    (path / "processes.csv").write_text("\n".join([header, launcher, row]) + "\n")
    got = socket_owner(Run.open(path), SocketKey(int(netns), "198.18.0.1", 7000, 4431))
    assert (got["pid"], got["comm"], got["source"]) == (int(pid), comm, "ss -p")
    assert comm == "bufflow"


def test_requested_backlog_and_somaxconn() -> None:
    ns = lab_netns(SIZING, "srv")
    lis = raw(SIZING, "aq_listen")
    lis = lis[(lis["netns"] == ns) & (lis["lport"] == 8080) & (lis["ret"] == 0)]
    key = SocketKey(ns, "198.18.0.1", 8080, 0)
    assert aq.requested_backlog(run(SIZING), key) == int(lis["backlog_requested"].iloc[-1]) == 16
    assert aq.requested_backlog(run(SIZING), key._replace(lport=9)) is None
    s = raw(SIZING, "sysctls", dtype=str)
    want = s[(s["phase"] == "start") & (s["netns"] == str(ns)) & (s["key"] == "net.core.somaxconn")]["value"]
    assert aq.somaxconn(run(SIZING), ns) == int(want.iloc[0])
    assert aq.somaxconn(run(SIZING), 1) is None


def test_overflow_samples_and_samples_near() -> None:
    ns = lab_netns(SIZING, "srv")
    d = counter_deltas(SIZING, ns, "ListenOverflows")
    want = d[d > 0]
    got = aq.overflow_samples(run(SIZING), ns)
    assert got.tolist() == want.tolist()
    assert got.index.tolist() == pytest.approx(want.index.tolist())
    full_times = listener_csv(SIZING, ns, 8080).query("full_events > 0")["time_s"]
    near = aq.samples_near(got, full_times, 1)
    idx = got.index.to_numpy(dtype=float)
    expect = [any(t - 1 <= s <= t + 1.5 for t in full_times) for s in idx]
    assert near.tolist() == expect
    # Far from every full interval: nothing is near.
    assert not aq.samples_near(got, [float(idx.max()) + 100], 1).any()


def test_listener_symptoms() -> None:
    ns, cli = lab_netns(SIZING, "srv"), lab_netns(SIZING, "cli")
    rt = raw(SIZING, "rt_endpoint")
    syn = rt[(rt["service_local"] == 0) & (rt["service_port"] == 8080) & (rt["raddr"] == "198.18.0.1")]
    synack = rt[(rt["service_local"] == 1) & (rt["netns"] == ns) & (rt["service_port"] == 8080)]
    ls = raw(SIZING, "listeners")
    ls = ls[(ls["netns"] == ns) & (ls["lport"] == 8080)]
    got = aq.listener_symptoms(run(SIZING), SocketKey(ns, "198.18.0.1", 8080, 0))
    assert got["client_netns"] == [cli]
    assert got["syn_retrans_to_listener"] == int(syn["syn_segs"].sum()) > 0
    assert got["synack_retrans_by_listener"] == int(synack["synack_segs"].sum())
    assert got["ss_samples"] == len(ls)
    assert got["ss_recv_q_max"] == int(ls["recv_q"].max())
    assert got["ss_send_q"] == int(ls["send_q"].max()) == 16
    assert got["ss_samples_full"] == int((ls["recv_q"] > ls["send_q"]).sum())


def test_ss_full_listeners() -> None:
    ns = lab_netns(STALL, "srv")
    ls = raw(STALL, "listeners")
    full = ls[(ls["netns"] == ns) & (ls["recv_q"] > ls["send_q"])]
    assert not full.empty
    who = f"{full['comm'].iloc[-1]} pid {int(full['pid'].iloc[-1])}"
    want = [f"{a}:{p} ({who})" for a, p in full[["laddr", "lport"]].drop_duplicates().to_numpy()]
    assert aq.ss_full_listeners(run(STALL), ns) == want
    # Before the first full sample, none.
    assert aq.ss_full_listeners(run(STALL), ns, t1=float(full["time_s"].min()) - 0.01) == []
    assert aq.ss_full_listeners(run(SIZING), lab_netns(SIZING, "srv")) == []


def test_accept_rates() -> None:
    ns = lab_netns(SIZING, "srv")
    csv = listener_csv(SIZING, ns, 8080)
    rows = run(SIZING).table("aq_listener")
    rows = rows[rows["netns"] == ns]
    full = aq.full_intervals(rows)
    active = csv[csv["enqueues"] + csv["accepted"] > 0]
    got = aq.accept_rates(rows, full, 1)
    assert got.peak_enqueues == int(csv["enqueues"].max())
    assert got.accept_per_s == pytest.approx(active["accepted"].mean())
    assert got.accept_min_per_s == active["accepted"].min()
    first_full = csv[csv["full_events"] > 0]["time_s"].min()
    before = csv[csv["time_s"] < first_full]
    assert got.arrival_before_per_s == (before["enqueues"].mean() if len(before) else None)


def test_near_full_listeners_and_listeners_tracked() -> None:
    r = run(HOST_OVERFLOW)
    csv = raw(HOST_OVERFLOW, "aq_listener")
    csv = csv[csv["netns"] == HOST_NS]
    at_limit = csv[csv[["depth_max", "depth_now"]].max(axis=1) >= csv["limit"]]
    want = sorted({f"{a}:{p}" for a, p in at_limit[["laddr", "lport"]].to_numpy()})
    assert aq.near_full_listeners(r, HOST_NS, r.start - 60, r.end + 60) == want
    assert "127.0.0.1:18090" in want
    assert aq.near_full_listeners(r, HOST_NS, r.end + 100, r.end + 200) == []
    assert aq.listeners_tracked(r, HOST_NS) == len(csv[["laddr", "lport"]].drop_duplicates())
    assert aq.listeners_tracked(r, 1) == 0


def _window(name: str, ns: int) -> tuple[pd.DataFrame, float, float]:
    rows = run(name).table("aq_listener")
    full = aq.full_intervals(rows[rows["netns"] == ns])
    return full, float(full["time_s"].min()) - 1, float(full["time_s"].max())


def test_saturation_model_sizing_is_a_burst_model() -> None:
    from analysis.models import accept_queue_capacity

    ns = lab_netns(SIZING, "srv")
    full, t0, t1 = _window(SIZING, ns)
    opens = counter_deltas(SIZING, ns, "PassiveOpens")
    drops = counter_deltas(SIZING, ns, "ListenOverflows")
    win = (opens.index > t0) & (opens.index <= t1 + 1.5)
    burst = int(opens[win].max())
    k = accept_queue_capacity(16)
    o, a = int(drops[(drops.index > t0) & (drops.index <= t1 + 1.5)].sum()), int(opens[win].sum())
    got = aq.saturation_model(run(SIZING), ns, full, "sizing", 16, t0, t1, 1)
    assert got == {
        "kind": "burst",
        "burst": burst,
        "capacity_k": k,
        "predicted_pct": round(100 * (burst - k) / burst, 1),
        "measured_pct": round(100 * o / (o + a), 1),
        "opens_basis": "namespace PassiveOpens",
    }
    # The lab's bursts are of 100 connections: the busiest interval's opens come close.
    assert 80 <= burst <= 100


def test_saturation_model_capacity_and_stall() -> None:
    ns = lab_netns(SIZING, "srv")
    full, t0, t1 = _window(SIZING, ns)
    got = aq.saturation_model(run(SIZING), ns, full, "capacity", 16, t0, t1, 1)
    busy = full[full["depth_now"] > 0]
    busy = full if busy.empty else busy
    assert got["kind"] == "mm1k"
    assert got["mu_per_s"] == round(float(busy["accepted"].mean()), 1)
    assert 0 <= got["predicted_pct"] <= 100 and 0 <= got["measured_pct"] <= 100
    assert aq.saturation_model(run(SIZING), ns, full, "stall", 16, t0, t1, 1) == {"kind": "not_applicable"}


def test_saturation_model_with_own_enqueues() -> None:
    """With the listener's probe rows, its enqueues stand in for the namespace's PassiveOpens."""
    r = run(HOST_OVERFLOW)
    rows = r.table("aq_listener")
    own = rows[(rows["netns"] == HOST_NS) & (rows["lport"] == 18090)]
    full = aq.full_intervals(own)
    t0, t1 = float(full["time_s"].min()) - 1, float(full["time_s"].max())
    got = aq.saturation_model(r, HOST_NS, full, "sizing", 8, t0, t1, 1, own=own)
    assert got["opens_basis"] == "this listener's enqueues (probe)"
    # The biggest burst it can see is at most what the listener queued in one interval.
    csv = listener_csv(HOST_OVERFLOW, HOST_NS, 18090)
    assert got["burst"] <= int(csv["enqueues"].max())
    assert got["burst"] > 0


def test_interval_shape_counts_the_longest_run_of_full_intervals_with_accepts() -> None:
    # The real sizing capture's listener, its ends rewritten: intervals 0-1 and 3-5 end full
    # while accepting, 2 ends empty; 4 found the queue empty (EAGAIN), which breaks its run.
    rows = listener_csv(SIZING, lab_netns(SIZING, "srv"), 8080).sort_values("time_s").head(7).reset_index(drop=True)
    full = [True, True, False, True, True, True, False]
    rows["depth_now"] = [int(lim) + 1 if f else 0 for lim, f in zip(rows["limit"], full, strict=True)]
    rows["accepted"] = 10
    assert aq.interval_shape(rows)["longest_full_run_with_accepts"] == 3
    emptied = pd.Series([False, False, False, False, True, False, False])
    shape = aq.interval_shape(rows, emptied)
    assert shape["longest_full_run_with_accepts"] == 2
    assert shape["intervals_full_at_end"] == 5 and shape["intervals_stalled"] == 0
