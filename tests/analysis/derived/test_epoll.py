"""analysis/derived/epoll.py on real captures, against the fixtures' ep_loop.csv.

host-loop (contract 3, per thread): one Python process whose loop thread loop-0 never blocked in
epoll while loop-1 and loop-2 mostly did (tests/fixtures/README.md); epoll-busy (contract 2, per
process: tid = pid): the epoll lab's saturated single-threaded httpserver."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pandas as pd
import pytest

from analysis.derived import epoll
from tests.analysis.derived.conftest import raw, run

LOOP = "host-loop"
BUSY = "epoll-busy"
COUNTS = ["calls", "nb_calls", "nb_ns_sum", "events_sum", "ret_zero", "ret_full", "errors", "wait_ns_sum"]


def thread_rows(name: str, comm: str) -> pd.DataFrame:
    ep = raw(name, "ep_loop")
    return ep[ep["comm"] == comm].sort_values("time_s").reset_index(drop=True)


def test_per_thread_keeps_threads_apart() -> None:
    ep = raw(LOOP, "ep_loop")
    pt = epoll.per_thread(run(LOOP))
    want = ep.groupby(["time_s", "pid", "tid"])[COUNTS].sum().reset_index()
    got = pt.sort_values(["time_s", "pid", "tid"]).reset_index(drop=True)
    assert got[["time_s", "pid", "tid", *COUNTS]].astype("int64").equals(want.astype("int64"))
    loops = pt[pt["comm"].str.startswith("loop-")]
    assert set(loops["comm"]) == {"loop-0", "loop-1", "loop-2"}  # loop-3 never returned from a wait
    assert loops["pid"].nunique() == 1 and loops["tid"].nunique() == 3
    # Its main thread never waited in epoll: the process is named after one of its threads, one name.
    pid = int(loops["pid"].iloc[0])
    assert ep[(ep["pid"] == pid) & (ep["tid"] == pid)].empty
    assert loops["process_comm"].nunique() == 1
    assert loops["process_comm"].iloc[0] in set(ep.loc[ep["pid"] == pid, "comm"])


def test_per_thread_of_contract_2_is_per_process() -> None:
    ep = raw(BUSY, "ep_loop")
    assert "tid" not in ep.columns
    pt = epoll.per_thread(run(BUSY))
    assert (pt["tid"] == pt["pid"]).all()
    assert len(pt) == len(ep.groupby(["time_s", "pid"]))
    assert (pt["comm"] == pt["process_comm"]).all()


def test_per_process_sums_threads() -> None:
    ep = raw(LOOP, "ep_loop")
    pp = epoll.per_process(run(LOOP))
    want = ep.groupby(["time_s", "pid"])[COUNTS].sum().reset_index()
    got = pp.sort_values(["time_s", "pid"]).reset_index(drop=True)
    assert got[["time_s", "pid", *COUNTS]].astype("int64").equals(want.astype("int64"))
    comms = ep.groupby("pid")["comm"].agg(lambda s: s.value_counts().index[0])
    assert got["comm"].tolist() == got["pid"].map(comms).tolist()


def test_wait_share_tells_the_saturated_thread() -> None:
    pt = epoll.per_thread(run(LOOP))
    for comm, lo, hi in (("loop-0", 0.0, 0.01), ("loop-1", 0.3, 1.3)):
        rows = pt[pt["comm"] == comm].sort_values("time_s")
        csv = thread_rows(LOOP, comm)
        share = epoll.wait_share(rows, 1)
        assert share.tolist() == pytest.approx((csv["wait_ns_sum"] / 1e9).tolist())
        assert lo <= share.median() <= hi, comm


def test_process_wait_share() -> None:
    ep = raw(LOOP, "ep_loop")
    pt = epoll.per_thread(run(LOOP))
    got = epoll.process_wait_share(pt, 1)
    want = ep.groupby(["pid", "time_s"])["wait_ns_sum"].sum() / 1e9
    assert got.sort_index().tolist() == pytest.approx(want.sort_index().tolist())
    # Summed over a process's threads the share can pass 1: loop-1 and loop-2 both mostly wait.
    pid = int(pt.loc[pt["comm"] == "loop-1", "pid"].iloc[0])
    assert got.loc[pid].max() > 1


def test_epoll_sweep_per_phase() -> None:
    r = run(BUSY)
    lab = r.lab
    assert lab is not None
    ep = raw(BUSY, "ep_loop")
    srv = ep[ep["comm"] == lab["server"]["comm"]]
    sweep = epoll.epoll_sweep(r)
    assert len(sweep) == len(lab["phases"])
    for ph, row in zip(lab["phases"], sweep.itertuples(index=False), strict=True):
        sel = srv[(srv["time_s"] > ph["start_s"] + 0.5) & (srv["time_s"] <= ph["end_s"] + 0.5)]
        calls = int(sel["calls"].sum())
        assert row.idle_conns == ph["idle_conns"]
        assert row.intervals == len(sel)
        assert row.epoll_calls_per_s == round(calls / max(1, len(sel)), 1)
        assert row.events_per_call == pytest.approx(sel["events_sum"].sum() / calls, abs=0.006)


def test_loop_numbers() -> None:
    pt = epoll.per_thread(run(LOOP))
    rows = pt[pt["comm"] == "loop-0"]
    csv = thread_rows(LOOP, "loop-0")
    calls = int(csv["calls"].sum())
    got = epoll.loop_numbers(rows, 1)
    assert got["calls_per_s"] == round(calls / len(csv), 1)
    assert got["events_per_call"] == pytest.approx(csv["events_sum"].sum() / calls, abs=0.006)
    assert got["nonblocking_share_pct"] == pytest.approx(100 * csv["nb_calls"].sum() / calls, abs=0.06)
    assert got["empty_share_pct"] == pytest.approx(100 * csv["ret_zero"].sum() / calls, abs=0.06)
    assert got["full_batches"] == int(csv["ret_full"].sum())


def test_cpu_not_recorded_before_contract_4() -> None:
    """The fixtures' probes had no cpu_ns column yet: nothing is made up for it."""
    for name in (LOOP, BUSY):
        assert "cpu_ns" not in raw(name, "ep_loop").columns
        pt = epoll.per_thread(run(name))
        assert not epoll.cpu_recorded(pt)
        for _, rows in pt.groupby("tid"):
            assert epoll.cpu_share_overall(rows.sort_values("time_s")) is None


def test_cpu_share_overall_from_the_example_run() -> None:
    """loop0 of probes/examples/epoll_example.txt (a real epoll.bt run): its running cpu_ns totals
    at three interval ends, as probe-to-csv turns them into per-interval rows."""
    totals = [(1795505940, 688940826), (1795505941, 1539660933), (1795505942, 2689019281)]
    rows = pd.DataFrame(
        {
            "time_s": [t for t, _ in totals],
            "cpu_ns": pd.array([totals[0][1]] + [b - a for (_, a), (_, b) in pairwise(totals)], dtype="Int64"),
        }
    )
    assert epoll.cpu_recorded(rows)
    # The first row is the thread's life before the capture: left out.
    assert epoll.cpu_share_overall(rows) == pytest.approx((2689019281 - 688940826) / 2e9)
    assert epoll.cpu_share_overall(rows.iloc[:1]) is None


def _longest_by_groupby(pid: list[int], tid: list[int], flag: list[bool]) -> pd.Series:
    """The definition: a run of flagged rows per thread, cut at each row without the flag."""
    f = pd.Series(flag)
    return (
        f.groupby([pd.Series(pid, name="pid"), pd.Series(tid, name="tid"), (~f).cumsum()])
        .sum()
        .groupby(level=[0, 1])
        .max()
    )


@pytest.mark.parametrize("seed", range(20))
def test_longest_runs_counts_what_the_groupby_counts(seed: int) -> None:
    """Threads of random lengths (rows in thread and time order), flags at random: the array version
    the rule uses on a day's million rows agrees with the groupby it replaced, thread by thread."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 30, size=rng.integers(1, 12))
    pid = np.repeat(rng.integers(1, 5, size=len(lengths)).cumsum(), lengths)
    tid = np.repeat(np.arange(len(lengths)) % 3 + 100, lengths)
    flag = rng.random(len(pid)) < rng.random()
    got = epoll.longest_runs(pid, tid, flag)
    want = _longest_by_groupby(pid.tolist(), tid.tolist(), flag.tolist())
    assert got.to_dict() == {k: int(v) for k, v in want.items()}


@pytest.mark.parametrize("name", [LOOP, BUSY, "epoll-hot-thread-contended"])
def test_per_thread_of_rows_one_a_thread_and_interval_is_the_grouping(name: str) -> None:
    """Rows one a (time_s, pid, tid), as the probe prints them, are sorted, not summed: the same
    frame as the grouping, and with columns left out, the same without them; the columns handed
    in are let go."""
    ep = run(name).table("ep_loop")
    keys = ["time_s", "pid", "tid"]
    assert not ep.duplicated(keys).any()
    num = [c for c in ep.columns if c not in (*keys, "comm")]
    want = ep.groupby(keys, as_index=False)[num].sum(min_count=1)
    columns = epoll.ep_columns(ep)
    got = epoll.per_thread_of(columns)
    assert columns == {}
    pd.testing.assert_frame_equal(got[[*keys, *num]], want)
    narrow = epoll.per_thread_of(epoll.ep_columns(ep, ["calls", "cpu_ns"]))
    pd.testing.assert_frame_equal(narrow, got[[*keys, "calls", "cpu_ns", "comm", "process_comm"]])


def test_per_thread_of_rows_sharing_a_key_sums_them() -> None:
    ep = run(LOOP).table("ep_loop")
    twice = pd.concat([ep, ep.iloc[::2]], ignore_index=True)
    got = epoll.per_thread_of(epoll.ep_columns(twice, ["calls"]))
    want = twice.groupby(["time_s", "pid", "tid"], as_index=False)["calls"].sum()
    pd.testing.assert_frame_equal(got[["time_s", "pid", "tid", "calls"]], want)
    assert got["comm"].tolist() == epoll.per_thread(run(LOOP))["comm"].tolist()
