"""event_loop_saturation: a server's event loop that never waits in epoll while events keep coming.

A healthy loop spends most of an idle-ish interval blocked in epoll_wait; a
saturated one finds events ready every time it asks (blocking calls return at
once, or it only polls with timeout 0), so work queues in the socket buffers
and the accept queue instead of being served.

Chain: symptom (lab client latency / throughput) -> counter (none: the kernel
keeps no counter for loop saturation; the listener's Recv-Q is shown when it
grows) -> probe (share of each interval spent waiting, events per call, full
batches) -> cause -> fix -> verification.
"""

from __future__ import annotations

from typing import Any

from ..derived.epoll import per_process, wait_share
from ..findings import Finding, Link
from .base import Rule, RunView

KIND = "event_loop_saturation"
INPUTS = ("ep_loop", "listeners")
# Events per interval before a loop counts as busy. The signal is that the
# loop never waits while work keeps arriving; this floor only keeps an idle
# poller out. It was 50: a CPU-bound server that takes 40 ms a request (the
# epoll lab under emulation, Debian 13 VM) serves < 50 events a second and
# never blocks — saturated, and missed. No real capture in tests/fixtures
# other than epoll-busy has a loop that passes with 10.
MIN_EVENTS = 10
MAX_WAIT_SHARE = 0.05  # of the interval spent blocked in epoll
MIN_BUSY_INTERVALS = 3


def _wrk_latency(run: RunView) -> dict[str, Any]:
    lab = run.lab or {}
    phases = lab.get("phases") or []
    return {"wrk_requests_per_s": [p.get("wrk_requests_per_s") for p in phases]} if phases else {}


def _evaluate(run: RunView) -> list[Finding]:
    interval = float(run.metadata.get("interval_s", 1))
    out: list[Finding] = []
    pp = per_process(run)
    lab = run.lab or {}
    for pid, rows in pp.groupby("pid"):
        rows = rows.sort_values("time_s")
        comm = str(rows["comm"].iloc[0])
        share = wait_share(rows, interval)
        busy = (rows["events_sum"] >= MIN_EVENTS) & (share < MAX_WAIT_SHARE)
        active = rows["events_sum"] >= MIN_EVENTS
        calls = int(rows["calls"].sum())
        probe_ev = {
            "intervals_with_events": int(active.sum()),
            "intervals_never_waiting": int(busy.sum()),
            "calls_per_s": round(calls / (len(rows) * interval), 1),
            "nonblocking_share_pct": round(100 * int(rows["nb_calls"].sum()) / calls, 1) if calls else None,
            "events_per_call": round(int(rows["events_sum"].sum()) / calls, 2) if calls else None,
            "full_batches": int(rows["ret_full"].sum()),
            "wait_share_busy_pct": round(100 * float(share[busy].mean()), 2) if busy.any() else None,
            "wait_share_median_pct": round(100 * float(share[active].median()), 1) if active.any() else None,
        }
        ls = run.table("listeners")
        # ss -p names one holder of a shared listening socket (nginx: master or
        # worker), so a process also owns the listeners held under its name.
        ports = sorted({int(p) for p in ls.loc[(ls["pid"] == pid) | (ls["comm"] == comm), "lport"]})
        subject = {"pid": int(pid), "comm": comm, "listen_ports": ports}
        # Servers only: a client's loop (a load generator ramping up) is busy by design.
        if not ports:
            continue
        longest, cur = 0, 0
        for b in busy.tolist():
            cur = cur + 1 if b else 0
            longest = max(longest, cur)
        probe_ev["longest_never_waiting_run"] = longest
        # Consecutive intervals: a loop that is busy for a moment (a burst of
        # connects) is not saturated.
        if longest < MIN_BUSY_INTERVALS:
            if active.any():
                out.append(Finding(KIND, "absent", subject, chain=[Link("probe", "waits", probe_ev)]))
            continue
        t = rows.loc[busy, "time_s"].astype(float)
        window = {
            "start_s": float(t.min()) - interval,
            "end_s": float(t.max()),
            "start_rel_s": round(float(t.min()) - interval - run.start, 1),
            "end_rel_s": round(float(t.max()) - run.start, 1),
        }
        recvq = ls[(ls["pid"] == pid) | (ls["comm"] == comm)]
        counter_ev = {
            "listener_recv_q_max": int(recvq["recv_q"].max()) if not recvq.empty else None,
            "listen_ports": ports,
        }
        server = lab.get("server") or {}
        wrk = _wrk_latency(run)
        cause_ev = {
            "gomaxprocs": server.get("gomaxprocs") if server.get("comm") == comm else None,
            "work_per_request": server.get("work") if server.get("comm") == comm else None,
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
