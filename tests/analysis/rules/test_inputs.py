"""Rules read exactly the tables they declare (analysis/rules/base.py)."""

from __future__ import annotations

import pytest

from analysis.derived import counters
from analysis.load import Run
from analysis.rules import RULES, Rule, RunView, UndeclaredTableError
from tests.conftest import FIXTURES

RUNS = sorted(p.name for p in FIXTURES.iterdir() if (p / "metadata.json").is_file())


def _reads(rule: Rule) -> set[str]:
    read: set[str] = set()
    for name in RUNS:
        view = RunView(Run.open(FIXTURES / name), rule.kind, rule.inputs)
        rule.logic(view)  # raises UndeclaredTableError on any undeclared table
        read |= view.read
    return read


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.kind)
def test_rule_reads_exactly_its_declared_tables(rule: Rule) -> None:
    """Over every real capture: no undeclared table is read, and every declared one is."""
    assert _reads(rule) == set(rule.inputs)


def test_retransmits_declares_the_accept_queue_it_reads() -> None:
    (rule,) = [r for r in RULES if r.kind == "retransmit_storm"]
    assert "aq_listener" in rule.inputs and "rt_resets" not in rule.inputs


def test_reading_an_undeclared_table_fails_with_the_rule_and_table_named() -> None:
    run = Run.open(FIXTURES / "accept-overflow-sizing")
    sneaky = Rule("sneaky", ("counters",), lambda v: [v.table("aq_listener")])
    with pytest.raises(UndeclaredTableError, match=r"rule sneaky read table 'aq_listener'.*declared: counters"):
        sneaky.evaluate(run)
    # Helpers that read tables on a rule's behalf are held to the same list.
    via_sysctl = Rule("via_sysctl", ("counters",), lambda v: [v.sysctl(0, "net.core.somaxconn")])
    with pytest.raises(UndeclaredTableError, match="'sysctls'"):
        via_sysctl.evaluate(run)
    via_derived = Rule("via_derived", ("sysctls",), lambda v: [counters.per_sample(v, 0, ["ListenOverflows"])])
    with pytest.raises(UndeclaredTableError, match="'counters'"):
        via_derived.evaluate(run)


def test_a_view_does_not_hand_out_the_whole_run() -> None:
    view = RunView(Run.open(FIXTURES / "epoll-idle"), "x", ("ep_loop",))
    for name in ("missing", "validate_all", "_cache"):
        with pytest.raises(AttributeError):
            getattr(view, name)


def test_module_evaluate_goes_through_the_view() -> None:
    """evaluate() of a rule module, as notebooks and tests call it, is the restricted one."""
    from analysis.rules import retransmits

    run = Run.open(FIXTURES / "accept-overflow-sizing-busy")
    view = RunView(run, retransmits.KIND, retransmits.INPUTS)
    assert [f.to_dict() for f in retransmits.evaluate(run)] == [f.to_dict() for f in retransmits.RULE.logic(view)]
    assert view.read <= set(retransmits.INPUTS)
