"""event_loop_saturation: a server's event loop that never waits in epoll while events keep coming.

A loop is a thread. A healthy loop spends most of an idle-ish interval blocked
in epoll_wait; a saturated one finds events ready every time it asks (blocking calls return at
once, or it only polls with timeout 0), so work queues in the socket buffers
and the accept queue instead of being served.

Chain: symptom (lab client latency / throughput) -> counter (none: the kernel
keeps no counter for loop saturation; the listener's Recv-Q is shown when it
grows) -> probe (share of each interval the thread spent waiting — its own
wait time, never summed over threads — events per call, full batches)
-> cause -> fix -> verification. The finding names the thread (pid, tid, comm)
and its process; the process's other threads get nothing when they wait.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..derived.epoll import per_process, per_thread, wait_share
from ..findings import Finding, Link
from .base import Rule, RunView

KIND = "event_loop_saturation"
INPUTS = ("ep_loop", "listeners", "aq_accept")
# Events per interval before a loop counts as busy. The signal is that the
# loop never waits while work keeps arriving; this floor only keeps an idle
# poller out. It was 50: a CPU-bound server that takes 40 ms a request (the
# epoll lab under emulation, Debian 13 VM) serves < 50 events a second and
# never blocks — saturated, and missed. No real capture in tests/fixtures
# other than epoll-busy has a loop that passes with 10.
MIN_EVENTS = 10
MAX_WAIT_SHARE = 0.05  # of the interval spent blocked in epoll
MIN_BUSY_INTERVALS = 3
# A saturated loop finds work every time it asks: at most this share of its calls may come back
# empty (timeouts, non-blocking polls that found nothing). On a busy host a Go runtime thread
# that polled ~30 times a second read 0 % blocked for three intervals in the 1-in-8 sample of
# contract 3 while a third to a half of its calls came back empty: idle capacity, not a
# saturated loop. Saturated loops measured here: 0-8 % (epoll-busy, and the host-loop capture).
MAX_EMPTY_SHARE = 0.1
# ...and it is really busy (contract 4, which records each thread's CPU time): the thread is on
# the CPU at least this share of the interval, or no thread of its process waited in epoll in
# that interval. A thread that seldom waits in epoll may be asleep elsewhere: in the busy-host lab
# an idle Go aqserver thread read ~0 % blocked in epoll (short sampled calls; Go parks threads on a
# futex) in 4 of 5 runs, using ~0 CPU while its sibling waited 17.6 s. The saturated loopserver
# thread used 0.91-0.99 of a CPU. A saturated Go server is the second case: its polling thread
# (sysmon, ~2 ms of CPU a second) finds events at every non-blocking poll while the thread that
# runs the goroutines seldom calls epoll, and no thread of the process ever waits there.
MIN_CPU_SHARE = 0.5


def _wrk_latency(run: RunView) -> dict[str, Any]:
    lab = run.lab or {}
    phases = lab.get("phases") or []
    return {"wrk_requests_per_s": [p.get("wrk_requests_per_s") for p in phases]} if phases else {}


def _held_by(ls: pd.DataFrame, pid: int, process: str, loop_pids: set[int]) -> pd.DataFrame:
    """listeners.csv rows of a process: held by its pid; if none is, those held under its name by a
    process with no loop (nginx: ss -p names the master, the workers run the loops)."""
    # pid and comm are empty for a listener ss could not name a process for: it is no one's.
    own = (ls["pid"] == pid).fillna(False).astype(bool)
    if own.any():
        return ls[own.to_numpy()]
    by_name = (ls["comm"] == process).fillna(False).astype(bool) & ~ls["pid"].isin(loop_pids - {pid}).fillna(
        False
    ).astype(bool)
    return ls[own.to_numpy() | by_name.to_numpy()]


def _longest_run(flags: list[bool]) -> int:
    longest, cur = 0, 0
    for b in flags:
        cur = cur + 1 if b else 0
        longest = max(longest, cur)
    return longest


def _evaluate(run: RunView) -> list[Finding]:
    interval = float(run.metadata.get("interval_s", 1))
    out: list[Finding] = []
    pt = per_thread(run)
    lab = run.lab or {}
    ls = run.table("listeners")
    per_thread_data = bool((pt["tid"] != pt["pid"]).any()) or int(run.metadata.get("data_contract", 2)) >= 3
    # Each thread's numbers first, so a saturated thread can be told apart from its process's idle ones.
    loop_pids = set(pt["pid"].astype(int))
    threads: dict[tuple[int, int], dict[str, Any]] = {}
    # Share of each interval the process's threads together waited in epoll (any of them).
    process_wait = pt.groupby(["pid", "time_s"])["wait_ns_sum"].sum().astype(float) / (interval * 1e9)
    for (pid, tid), rows in pt.groupby(["pid", "tid"], sort=True):
        rows = rows.sort_values("time_s")
        share = wait_share(rows, interval)
        active = rows["events_sum"] >= MIN_EVENTS
        finds_work = rows["ret_zero"] <= MAX_EMPTY_SHARE * rows["calls"]
        busy = active & (share < MAX_WAIT_SHARE) & finds_work
        cpu_overall = None
        cpu_share = rows["cpu_ns"].astype("Float64") / (interval * 1e9)  # NA: not recorded (contract < 4)
        if cpu_share.notna().any():
            # Over the thread's whole span, not per interval: the CPU clock is read at its sampled
            # calls only, and a loop busy with long requests makes few (loop0: ~1 a second, so
            # one row's difference covered 0.1 s or 1.7 s). The first row's covers the thread's
            # life before the capture: left out.
            later = rows["cpu_ns"].iloc[1:].astype("Float64")
            span = float(rows["time_s"].iloc[-1] - rows["time_s"].iloc[0])
            cpu_overall = float(later.sum()) / (span * 1e9) if span > 0 and later.notna().any() else None
            on_cpu = cpu_overall is not None and cpu_overall >= MIN_CPU_SHARE
            process_waits = rows["time_s"].map(process_wait.loc[int(pid)]).astype(float) >= MAX_WAIT_SHARE
            busy = busy & (on_cpu | ~process_waits)
        threads[(int(pid), int(tid))] = {
            "rows": rows,
            "share": share,
            "active": active,
            "busy": busy,
            "cpu_overall": cpu_overall,
        }
    for (pid, tid), th in threads.items():
        rows, share, active, busy = th["rows"], th["share"], th["active"], th["busy"]
        comm, process = str(rows["comm"].iloc[0]), str(rows["process_comm"].iloc[0])
        # The process's own name as ss -p shows it, when its main thread has no loop to name it.
        named = ls.loc[(ls["pid"] == pid).fillna(False).astype(bool).to_numpy(), "comm"].dropna()
        if len(named) and not ((pt["pid"] == pid) & (pt["tid"] == pid)).any():
            process = str(named.iloc[-1])
        calls = int(rows["calls"].sum())
        # One thread's blocked time over the interval; never summed over threads.
        blocked = share.clip(upper=1.0)
        probe_ev = {
            "intervals_with_events": int(active.sum()),
            "intervals_never_waiting": int(busy.sum()),
            "calls_per_s": round(calls / (len(rows) * interval), 1),
            "nonblocking_share_pct": round(100 * int(rows["nb_calls"].sum()) / calls, 1) if calls else None,
            "events_per_call": round(int(rows["events_sum"].sum()) / calls, 2) if calls else None,
            "full_batches": int(rows["ret_full"].sum()),
            "empty_share_pct": round(100 * int(rows["ret_zero"].sum()) / calls, 1) if calls else None,
            "wait_share_busy_pct": round(100 * float(blocked[busy].mean()), 2) if busy.any() else None,
            "wait_share_median_pct": round(100 * float(blocked[active].median()), 1) if active.any() else None,
            "cpu_share_busy_pct": round(100 * th["cpu_overall"], 1) if th["cpu_overall"] is not None else None,
            "per_thread": per_thread_data,
            "estimated_from_sample": int(run.metadata.get("data_contract", 2)) >= 3,
        }
        # ss -p names one holder of a shared listening socket (nginx: master or
        # worker), so a process also owns the listeners held under its name by a
        # process that has no loop of its own (never another loop's listeners).
        held = _held_by(ls, pid, process, loop_pids)
        ports = sorted({int(p) for p in held["lport"]})
        subject = {"pid": pid, "tid": tid, "comm": comm, "process": process, "listen_ports": ports}
        # Servers only: a client's loop (a load generator ramping up) is busy by design.
        if not ports:
            continue
        longest = _longest_run(busy.tolist())
        probe_ev["longest_never_waiting_run"] = longest
        # Consecutive intervals: a loop that is busy for a moment (a burst of
        # connects) is not saturated.
        if longest < MIN_BUSY_INTERVALS:
            if active.any():
                out.append(Finding(KIND, "absent", subject, chain=[Link("probe", "waits", probe_ev)]))
            continue
        # The process's other loops: how many there are and whether they wait (they get no finding).
        others = [v for (p, t), v in threads.items() if p == pid and t != tid and v["active"].any()]
        probe_ev["other_threads_with_events"] = len(others)
        probe_ev["other_threads_saturated"] = sum(
            _longest_run(v["busy"].tolist()) >= MIN_BUSY_INTERVALS for v in others
        )
        waits = [float(v["share"].clip(upper=1.0)[v["active"]].median()) for v in others]
        probe_ev["other_threads_blocked_median_pct"] = round(100 * sorted(waits)[len(waits) // 2], 1) if waits else None
        t = rows.loc[busy, "time_s"].astype(float)
        window = {
            "start_s": float(t.min()) - interval,
            "end_s": float(t.max()),
            "start_rel_s": round(float(t.min()) - interval - run.start, 1),
            "end_rel_s": round(float(t.max()) - run.start, 1),
        }
        recvq = held
        # The accept-queue probe counts accept() per (process, thread name, port): the listeners this
        # thread itself accepted on, when it did.
        acc = run.table("aq_accept")
        acc = acc[(acc["pid"] == pid) & (acc["comm"] == comm) & (acc["accepted"] > 0)]
        counter_ev = {
            "listener_recv_q_max": int(recvq["recv_q"].max()) if not recvq.empty else None,
            "listen_ports": ports,
            "thread_accepts_on": sorted({int(p) for p in acc["lport"]}),
        }
        server = lab.get("server") or {}
        wrk = _wrk_latency(run)
        mine = server.get("comm") in (comm, process)
        cause_ev = {
            "gomaxprocs": server.get("gomaxprocs") if mine else None,
            "work_per_request": server.get("work") if mine else None,
        }
        out.append(
            Finding(
                KIND,
                "confirmed",
                subject,
                window=window,
                cause_class="loop_saturated",
                chain=[
                    Link("symptom", "client" if wrk else "not_captured", wrk),
                    Link("counter", "no_kernel_counter", counter_ev),
                    Link("probe", "never_waits", probe_ev),
                    Link("cause", "loop_saturated", cause_ev),
                    Link("fix", "loop_saturated", {}),
                    Link(
                        "verification",
                        "rerun",
                        {
                            "command": "make lab LAB=epoll VARIANT=idle"
                            if lab.get("lab") == "epoll"
                            else "make capture DURATION=60",
                            "expect_wait_share_pct_above": 100 * MAX_WAIT_SHARE,
                        },
                    ),
                ],
            )
        )
    return out


RULE = Rule(KIND, INPUTS, _evaluate)
evaluate = RULE.evaluate

# Kept importable from here for tests/integration/test_family_labs.py (not edited by this change);
# everything else imports them from analysis.derived.epoll.
from ..derived.epoll import epoll_sweep  # noqa: E402

__all__ = ["INPUTS", "KIND", "RULE", "epoll_sweep", "evaluate", "per_process"]
