"""Sweep points measured from real lab runs, and the model's prediction in the evidence chain."""

from __future__ import annotations

import pytest

from analysis.contract import DERIVED_TABLES
from analysis.derived import sweep
from analysis.load import Run, RunDataError, read_table
from analysis.rules import accept_queue
from analysis.wording import describe
from tests.conftest import fixture_run


def test_time_wait_point_of_the_exhaust_lab() -> None:
    p = sweep.time_wait_point(Run.open(fixture_run("time-wait-exhaust")))
    assert (p["ports"], p["rate"], p["load_s"]) == (200, 100.0, 6.0)
    assert p["tw_predicted"] == 200 and p["tw_measured"] == 200
    assert p["first_fail_s_predicted"] == pytest.approx(2.0)
    assert p["first_fail_s_measured"] == pytest.approx(2.0, abs=0.1)
    assert p["fail_fraction_measured"] == pytest.approx(p["fail_fraction_predicted"], abs=0.02)


def test_accept_queue_point_of_a_queue_run() -> None:
    """The queue variant (Poisson arrivals, exponential accept delay) against M/M/1/K."""
    p = sweep.accept_queue_point(Run.open(fixture_run("accept-overflow-queue")))
    assert p["capacity_k"] == p["limit"] + 2
    assert p["rho"] > 1  # the fixture is an overloaded point
    assert 0 < p["p_measured"] < 1
    assert abs(p["p_mm1k"] - p["p_measured"]) < 0.05
    assert abs(p["p_sim"] - p["p_measured"]) < 0.05


def test_burst_simulation_against_the_sizing_lab() -> None:
    """Periodic bursts of 100, deterministic 2 ms accepts, limit 16: about 82 % of first attempts blocked."""
    b = sweep.burst_point(Run.open(fixture_run("accept-overflow-sizing")))
    assert (b["burst"], b["limit"], b["capacity_k"]) == (100, 16, 18)
    assert abs(b["p_first_attempt_blocked_sim"] - b["p_waited_syn_retry_measured"]) < 0.05, b


def test_point_of_the_wrong_lab_is_a_clear_error() -> None:
    with pytest.raises(RunDataError, match="port_range"):
        sweep.time_wait_point(Run.open(fixture_run("accept-overflow-sizing")))


def test_capacity_finding_carries_the_model_prediction() -> None:
    (f,) = [x for x in accept_queue.evaluate(Run.open(fixture_run("accept-overflow-queue"))) if x.status != "absent"]
    model = f.link("cause").evidence["model"]
    assert f.cause_class == "capacity" and model["kind"] == "mm1k"
    assert abs(model["predicted_pct"] - model["measured_pct"]) < 10
    assert "M/M/1/K predicts" in describe(f.kind, f.link("cause"))


def test_stall_finding_says_no_model_applies() -> None:
    (f,) = [x for x in accept_queue.evaluate(Run.open(fixture_run("accept-overflow-stall"))) if x.status != "absent"]
    assert f.link("cause").evidence["model"] == {"kind": "not_applicable"}
    assert "no queueing model predicts it" in describe(f.kind, f.link("cause"))


@pytest.mark.parametrize(("name", "table"), [("sweep-accept-queue", "aq_sweep"), ("sweep-time-wait", "tw_sweep")])
def test_sweep_fixtures_match_the_contract(name: str, table: str) -> None:
    _kind, df = sweep.load(fixture_run(name))
    assert len(df) >= 4
    read_table(fixture_run(name) / DERIVED_TABLES[table].file, DERIVED_TABLES[table])
