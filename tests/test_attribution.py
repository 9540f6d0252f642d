"""Per-object attribution on a shared host (issue 8): the faulty thread or endpoint is named, and a
healthy neighbour gets no finding and no suspicion. Copies of real captures (tests/fixtures) with
neighbours added; the real non-lab captures are tested in tests/test_nonlab_captures.py."""

from __future__ import annotations

import pandas as pd

from analysis.rules import epoll
from analysis.run import Run
from analysis.wording import describe, headline
from tests.conftest import fixture_run


def _threaded(run: Run, idle_threads: int, blocked_ns: int = 960_000_000) -> Run:
    """epoll-busy as a multi-threaded server: the saturated loop (httpserver, tid = pid) plus idle
    loop threads of the same process, each blocked most of every interval (as contract 3 records
    threads)."""
    ep = run.table("ep_loop")
    srv = ep[ep["comm"] == "httpserver"]
    extra = []
    for i in range(idle_threads):
        t = srv.copy()
        t["tid"] = t["pid"] + 1 + i
        t["comm"] = f"worker-{i}"
        t["calls"], t["nb_calls"], t["nb_ns_sum"] = 40, 0, 0
        t["events_sum"], t["ret_full"] = 48, 0
        t["wait_ns_sum"] = blocked_ns
        extra.append(t)
    run._cache["ep_loop"] = pd.concat([ep, *extra], ignore_index=True)
    run.metadata = {**run.metadata, "data_contract": 3}
    return run


def test_one_saturated_thread_among_idle_ones_is_named_with_its_process() -> None:
    """Summed over threads, the process was 'blocked' more than 100 % of each second (the issue's
    110.6 %) and never flagged; per thread, the loop that never waits is found and its idle
    siblings get nothing."""
    run = _threaded(Run.open(fixture_run("epoll-busy")), idle_threads=3)
    pid = int(run.table("ep_loop").query("comm == 'httpserver'")["pid"].iloc[0])
    summed = run.table("ep_loop").query("pid == @pid").groupby("time_s")["wait_ns_sum"].sum() / 1e9
    assert summed.max() > 1.0  # what the old per-process share saw: no saturation
    results = epoll.evaluate(run)
    (f,) = [x for x in results if x.is_finding]
    assert (f.subject["pid"], f.subject["tid"], f.subject["comm"]) == (pid, pid, "httpserver")
    assert f.subject["process"] == "httpserver" and 8080 in f.subject["listen_ports"]
    probe = f.link("probe").evidence
    assert probe["other_threads_with_events"] == 3 and probe["other_threads_saturated"] == 0
    assert probe["wait_share_busy_pct"] < 5
    assert "3 other thread(s)" in describe(f.kind, f.link("probe"))
    idle = [x for x in results if x.subject.get("tid") != pid]
    assert idle and all(x.status == "absent" for x in idle)


def test_a_saturated_worker_thread_is_named_by_tid() -> None:
    """The saturated loop is a worker thread, the main thread idles: the worker is named."""
    run = Run.open(fixture_run("epoll-busy"))
    ep = run.table("ep_loop").copy()
    pid = int(ep.loc[ep["comm"] == "httpserver", "pid"].iloc[0])
    busy = ep["pid"] == pid
    worker = ep[busy].copy()
    worker["tid"], worker["comm"] = pid + 7, "loop-1"
    main = ep[busy].copy()
    main["calls"], main["nb_calls"], main["events_sum"], main["wait_ns_sum"] = 40, 0, 40, 990_000_000
    run._cache["ep_loop"] = pd.concat([ep[~busy], main, worker], ignore_index=True)
    run.metadata = {**run.metadata, "data_contract": 3}
    (f,) = [x for x in epoll.evaluate(run) if x.is_finding]
    assert (f.subject["pid"], f.subject["tid"], f.subject["comm"]) == (pid, pid + 7, "loop-1")
    assert "thread loop-1 (tid" in headline(f) and "of httpserver (pid" in headline(f)


def test_contract2_runs_stay_per_process() -> None:
    run = Run.open(fixture_run("epoll-busy"))
    (f,) = [x for x in epoll.evaluate(run) if x.is_finding]
    assert f.subject["tid"] == f.subject["pid"]
    assert f.link("probe").evidence["per_thread"] is False
    assert "per process" in describe(f.kind, f.link("probe"))
