"""Per-listener drops (issue 17): each listener's own sk_drops (ss -m, listeners.csv drops, contract
5) names the overflowing listener from the kernel's own per-object counter, with or without the
accept-queue probe; a healthy neighbour's counter stays flat and it gets nothing. Real captures
(tests/fixtures/README.md: host-overflow-c5, host-overflow-noaq, made by make-host-captures)."""

from __future__ import annotations

from analysis.derived.counters import total_delta
from analysis.derived.listener_sockets import drop_key, socket_drops
from analysis.load import Run
from analysis.rules import accept_queue, retransmits
from analysis.wording import describe, headline
from tests.conftest import fixture_run

SLOW = drop_key("127.0.0.1", 18090)  # the Python listener with listen(8) and a slow accept(); nginx beside it


def _host(name: str) -> tuple[Run, int]:
    run = Run.open(fixture_run(name))
    return run, int(run.metadata["netns"][0]["inode"])


def test_only_the_overflowing_listener_dropped_by_its_own_counter() -> None:
    for name in ("host-overflow-c5", "host-overflow-noaq"):
        run, ns = _host(name)
        drops = socket_drops(run, ns)
        assert drops[SLOW] > 0, name
        assert {k for k, n in drops.items() if n > 0} == {SLOW}, (name, drops)
        # The kernel raises the listener's sk_drops with the namespace's ListenDrops: at least
        # as many (a final ACK dropped at a full queue can count twice on the listener).
        listen_drops = total_delta(run, ns, "ListenDrops")
        assert listen_drops <= drops[SLOW] <= 2 * listen_drops, (name, drops[SLOW], listen_drops)


def test_without_the_probe_the_listener_is_named_from_its_own_counter() -> None:
    """No accept-queue probe ran: the finding names 127.0.0.1:18090 and no other listener,
    confirmed by its own counter, its cause left unclassified (how it overflowed needs the
    probe); nothing is 'unattributed' and the clients' retransmits are not path loss."""
    run, _ = _host("host-overflow-noaq")
    assert "accept_queue" not in run.metadata["probes"]
    found = [f for f in accept_queue.evaluate(run) if f.is_finding]
    assert [(f.subject["laddr"], f.subject["lport"]) for f in found] == [("127.0.0.1", 18090)]
    f = found[0]
    assert f.status == "confirmed" and f.cause_class == "unclassified"
    assert f.subject.get("comm") == "python3"
    assert f.link("counter").key == "listener_drops" and f.link("counter").evidence["listener_drops"] > 0
    assert "own drop counter" in describe(f.kind, f.link("counter"))
    assert "unclassified" in headline(f)
    storms = [s for s in retransmits.evaluate(run) if s.is_finding and s.subject["service_port"] == 18090]
    assert storms and all(s.cause_class == "remote_accept_queue_full" for s in storms)


def test_with_the_probe_its_finding_carries_the_listeners_own_drops() -> None:
    run, ns = _host("host-overflow-c5")
    found = [f for f in accept_queue.evaluate(run) if f.is_finding]
    assert [(f.subject["laddr"], f.subject["lport"]) for f in found] == [("127.0.0.1", 18090)]
    f = found[0]
    assert f.status == "confirmed" and f.cause_class in ("sizing", "capacity")
    assert f.link("counter").evidence["listener_drops"] == socket_drops(run, ns)[SLOW]


def test_runs_of_contract_4_have_no_drops_and_the_same_verdict() -> None:
    run, ns = _host("host-overflow")
    assert socket_drops(run, ns) == {}
    found = [f for f in accept_queue.evaluate(run) if f.is_finding]
    assert [(f.subject["lport"], f.status) for f in found] == [(18090, "confirmed")]
    assert found[0].link("counter").evidence["listener_drops"] is None
