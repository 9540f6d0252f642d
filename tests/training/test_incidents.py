"""training/incidents.py: a seed draws the same incident every time, every family and a
healthy host come up, the faulty object moves from seed to seed, and the answer key names
an object the lab runs, never one of its healthy neighbours."""

from __future__ import annotations

from analysis.families import FAMILIES, NAMES
from tests.conftest import ROOT
from training.hints import FASTEST, HINTS, MYTHS
from training.incidents import ADDRESSES, FAULTS, WEIGHTS, distribution, draw, faulty_role, lab_objects


def test_a_seed_is_replayed_exactly() -> None:
    assert draw(42) == draw(42)
    assert draw(42) != draw(43)


def test_a_hundred_seeds_draw_every_family_and_a_healthy_host() -> None:
    counts = distribution(range(100))
    assert sum(counts.values()) == 100
    assert set(counts) == {*NAMES, "none"}
    # Weights 2 each and 1: with five families each fault about 18 of 100, a healthy host about 9.
    assert all(9 <= counts[f] <= 30 for f in NAMES), counts
    assert 3 <= counts["none"] <= 18, counts


def test_the_faulty_object_is_the_variants_and_not_a_neighbour() -> None:
    for seed in range(200):
        inc = draw(seed)
        objects = lab_objects(inc.lab_env)
        assert inc.variant == FAULTS[inc.family]["variant"]
        assert len(set(objects.values())) == len(objects), objects  # distinct ports
        if inc.family is None:
            assert inc.key == {"family": "none", "object": None, "cause": "none"}
            assert sorted(inc.neighbours) == sorted(objects.values())
            continue
        assert inc.key["object"] == objects[faulty_role(inc.family, inc.lab_env)]
        assert inc.key["object"] not in inc.neighbours
        assert set(inc.neighbours) | {inc.key["object"]} == set(objects.values())
        for name, choices in FAULTS[inc.family]["parameters"].items():
            assert inc.lab_env[name] in {str(c) for c in choices}


def test_the_faulty_listener_is_not_always_the_same_port() -> None:
    listeners = {draw(s).key["object"] for s in range(100) if draw(s).family == "accept_queue"}
    assert len(listeners) >= 10, listeners


def test_the_hot_event_loop_is_not_always_the_first_thread() -> None:
    """Which of the four loops is the busy one is drawn too: "loop0" is not the answer to learn."""
    hot = {draw(s).key["object"] for s in range(100) if draw(s).family == "epoll"}
    assert hot == {"loop0", "loop1", "loop2", "loop3"}, hot


def test_the_page_gives_nothing_away() -> None:
    for seed in range(100):
        inc = draw(seed)
        page = inc.page.lower()
        assert inc.key["object"] is None or inc.key["object"] not in page
        for word in ("backlog", "accept queue", "time_wait", "epoll", "retransmit", "loss", inc.variant):
            assert word not in page, (seed, word, page)


def test_incidents_run_over_ipv4_and_ipv6() -> None:
    """Each family comes up over both IP versions; an IPv6 incident names its objects as a
    trainee writes them, the address in brackets, and its page gives the IPv6 addresses."""
    drawn = [draw(s) for s in range(100)]
    versions = {(d.family, d.lab_env["IP_VERSION"]) for d in drawn}
    assert versions == {(f, v) for f in (*NAMES, None) for v in "46"}
    v6 = next(d for d in drawn if d.family == "retransmits" and d.lab_env["IP_VERSION"] == "6")
    assert v6.key["object"].startswith("[2001:2::2]:") and "->[2001:2::1]:" in v6.key["object"]
    assert "2001:2::1" in v6.page and "198.18" not in v6.page
    v4 = next(d for d in drawn if d.family == "accept_queue" and d.lab_env["IP_VERSION"] == "4")
    assert v4.key["object"].startswith("198.18.0.1:")


def test_the_addresses_are_those_scripts_lab_gives_each_ip_version() -> None:
    """training/incidents.py names objects by the addresses scripts/lab sets up: one list each,
    so they are held to agree here."""
    lab = (ROOT / "scripts" / "lab").read_text()
    for version, (srv, cli) in ADDRESSES.items():
        assert f"{version}) SRV_IP={srv} CLI_IP={cli} ;;" in lab, version


def test_every_family_drawn_has_its_fault_hints_and_myths() -> None:
    """The families drawn come from the registry's train weights; each needs its busy-host fault,
    its hint ladder, its fastest commands and its myths, and nothing here names a family the
    registry does not have."""
    drawn = {f for f in WEIGHTS if f is not None}
    assert drawn == {f.name for f in FAMILIES.values() if f.train_weight > 0}
    assert drawn <= set(FAULTS) <= set(FAMILIES) | {None}
    for table in (HINTS, FASTEST, MYTHS):
        assert drawn | {"none"} <= set(table) <= set(FAMILIES) | {"none"}
    assert all(len(HINTS[f]) == 3 for f in HINTS), "three hint levels: family, counter, probe"
