"""The rules on real captures made without a lab (tests/fixtures/README.md, "Non-lab captures"):
plain `collector/capture` runs of the host namespace around real servers on 127.0.0.1 — nginx with
three listeners, a Python listener — under real load. No connects.csv, no lab block: verdicts come
from probes, counters and socket samples alone. The faulty object is named; nothing else gets a
finding or a suspicion."""

from __future__ import annotations

import pytest

from analysis.derived.time_wait import endpoints
from analysis.load import Run
from analysis.render.report import write_report
from analysis.rules import accept_queue, epoll, evaluate_all
from analysis.wording import describe, headline
from tests.conftest import fixture_run

HEALTHY, OVERFLOW = "host-healthy", "host-overflow"
NGINX_PORTS = {18080: 511, 18081: 128}  # 18082 (backlog 64) is idle: no probe row
SLOW_PORT = 18090


def _listeners(run: Run) -> dict[int, dict[str, int]]:
    aq = run.table("aq_listener")
    g = aq.groupby("lport").agg(
        limit=("limit", "max"), depth_max=("depth_max", "max"), full=("full_events", "sum"), enq=("enqueues", "sum")
    )
    return {int(p): {k: int(v) for k, v in r.items()} for p, r in g.iterrows()}


@pytest.mark.parametrize("name", [HEALTHY, OVERFLOW, "host-loop"])
def test_a_capture_without_a_lab(name: str) -> None:
    run = Run.open(fixture_run(name))
    assert not run.lab and run.table("connects").empty
    seen = _listeners(run)
    for port, backlog in NGINX_PORTS.items():
        assert seen[port]["limit"] == backlog and seen[port]["depth_max"] < backlog // 4, (port, seen[port])
    assert seen[SLOW_PORT]["limit"] == 8
    # Several listeners, client endpoints and loops share the namespace.
    assert len({p for p in seen if p in (*NGINX_PORTS, SLOW_PORT)}) == 3
    assert len(endpoints(run)) >= 2
    ls = run.table("listeners")
    assert {18080, 18081, 18082, SLOW_PORT} <= set(ls["lport"])


def test_every_family_is_healthy_on_a_healthy_host() -> None:
    run = Run.open(fixture_run(HEALTHY))
    findings = evaluate_all(run)
    assert [(f.kind, f.status, f.subject) for f in findings if f.is_finding] == []
    # Checked, not skipped: each family ruled its objects out.
    ruled = {f.kind for f in findings if f.status == "absent"}
    assert {"accept_queue_overflow", "time_wait_exhaustion", "event_loop_saturation"} <= ruled
    nginx = [f for f in epoll.evaluate(run) if f.subject["comm"] == "nginx"]
    assert nginx and all(f.status == "absent" for f in nginx)
    assert all(f.link("counter").key == "no_overflows" for f in accept_queue.evaluate(run) if f.subject["lport"])


def test_only_the_slow_listener_overflows_beside_a_busier_nginx() -> None:
    run = Run.open(fixture_run(OVERFLOW))
    seen = _listeners(run)
    # nginx is the busier listener, and healthy.
    assert seen[18080]["enq"] > seen[SLOW_PORT]["enq"]
    assert seen[SLOW_PORT]["full"] > 0 and seen[18080]["full"] == 0
    results = accept_queue.evaluate(run)
    (f,) = [x for x in results if x.is_finding]
    assert (f.subject["laddr"], f.subject["lport"], f.status) == ("127.0.0.1", SLOW_PORT, "confirmed")
    assert f.subject["comm"].startswith("python")
    counter = f.link("counter").evidence
    assert counter["listen_overflows_matched"] > 0 and counter["listeners_seen_full"] == 1
    # No lab: the symptom is what the host shows, from the local client's side.
    symptom = f.link("symptom")
    assert symptom.key == "local_clients" and symptom.evidence["syn_retrans_to_listener"] > 0
    assert symptom.evidence["ss_send_q"] == 8
    # nginx: ruled out, and told why — never "suspected overflow".
    for port in NGINX_PORTS:
        (n,) = [x for x in results if x.subject["lport"] == port]
        assert n.status == "absent" and n.link("counter").key == "overflows_not_here", port
        assert "never seen full" in describe(n.kind, n.link("counter"))
    # Nothing else: any other finding of any family is about the slow listener.
    for g in evaluate_all(run):
        if g.is_finding:
            port = g.subject.get("lport", g.subject.get("service_port"))
            assert port == SLOW_PORT, (g.kind, headline(g))


def test_report_of_a_nonlab_capture_names_the_listener(copy_fixture) -> None:
    run_dir = copy_fixture(OVERFLOW)
    report, _ = write_report(run_dir)
    text = report.read_text()
    assert f"127.0.0.1:{SLOW_PORT}" in text
    assert "suspected" not in "\n".join(line for line in text.splitlines() if ":18080" in line)


LOOP = "host-loop"


def _proc_threads(name: str) -> tuple[float, dict[str, float]]:
    """proc_threads.txt: each loop thread's CPU seconds over the load, from /proc/<pid>/task/<tid>/stat."""
    lines = (fixture_run(name) / "proc_threads.txt").read_text().splitlines()
    hz = int(lines[0].split("(")[1].split()[0])
    t0, t1 = (float(x) for x in lines[1].split(":")[1].split())
    cpu = {}
    for line in lines[2:]:
        _tid, comm, start, end = line.split()
        cpu[comm] = (int(end) - int(start)) / hz
    return t1 - t0, cpu


def test_the_one_saturated_loop_thread_is_named_and_its_idle_siblings_are_not() -> None:
    """A Python server with four epoll loop threads: loop-0 spends 5 ms of CPU per request under more
    requests than it can serve, loop-1 and loop-2 answer 20/s, loop-3 idles. Only loop-0 is found,
    named by tid with its process; the kernel's own account (/proc CPU time) agrees."""
    run = Run.open(fixture_run(LOOP))
    found = [f for f in evaluate_all(run) if f.is_finding]
    (f,) = found
    assert f.kind == "event_loop_saturation"
    assert (f.subject["comm"], f.subject["process"]) == ("loop-0", "python3")
    assert f.subject["tid"] != f.subject["pid"]
    assert f.link("counter").evidence["thread_accepts_on"] == [18100]
    probe = f.link("probe").evidence
    assert probe["wait_share_busy_pct"] < 1 and probe["other_threads_with_events"] == 2
    assert probe["other_threads_saturated"] == 0 and probe["other_threads_blocked_median_pct"] > 30
    pid, tid = f.subject["pid"], f.subject["tid"]
    siblings = [x for x in epoll.evaluate(run) if x.subject["pid"] == pid and x.subject["tid"] != tid]
    assert {x.subject["comm"] for x in siblings} == {"loop-1", "loop-2"}
    assert all(x.status == "absent" for x in siblings)
    assert "thread loop-0 (tid" in headline(f) and "of python3" in headline(f)
    # The kernel's account: loop-0 ran on the CPU most of the load (never blocked), the others ~not.
    wall, cpu = _proc_threads(LOOP)
    assert cpu["loop-0"] > 0.8 * wall
    assert max(cpu["loop-1"], cpu["loop-2"], cpu["loop-3"]) < 0.05 * wall
