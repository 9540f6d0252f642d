"""The saturation models: closed form, simulation, and the TIME_WAIT arithmetic."""

from __future__ import annotations

import math

import pytest

from analysis import models


def test_mm1k_known_values() -> None:
    # rho = 1: every state equally likely, so P(full) = 1 / (K + 1).
    assert models.mm1k(100, 100, 9).p_block == pytest.approx(0.1)
    # rho = 0.5, K = 2: p = (1, .5, .25) / 1.75.
    p = models.mm1k(50, 100, 2)
    assert p.p_block == pytest.approx(0.25 / 1.75)
    assert p.length == pytest.approx((0.5 + 2 * 0.25) / 1.75)
    # Heavy overload: the server turns away all but mu of lam.
    assert models.mm1k(1000, 100, 50).p_block == pytest.approx(0.9, abs=1e-6)
    assert models.mm1k(0, 100, 5).p_block == 0.0


def test_mm1k_stable_far_into_overload() -> None:
    p = models.mm1k(1e6, 1.0, 4000)  # rho^K overflows a float; the normalised form must not
    assert math.isfinite(p.p_block) and p.p_block == pytest.approx(1 - 1e-6, abs=1e-9)


@pytest.mark.parametrize(("lam", "k"), [(300, 6), (450, 18), (600, 34)])
def test_simulation_agrees_with_the_closed_form(lam: float, k: int) -> None:
    mu = 400.0
    exact = models.mm1k(lam, mu, k)
    sim = models.simulate(lam, k, 1 / mu, service="exp", customers=40000, seed=3)
    assert sim.p_block == pytest.approx(exact.p_block, abs=0.01)
    assert sim.wait_s == pytest.approx(exact.wait_s, rel=0.1, abs=2e-4)


def test_deterministic_service_and_bursts_change_the_answer() -> None:
    # Same load, K: deterministic service queues less than exponential ...
    exp = models.simulate(350, 6, 1 / 400, service="exp", seed=1)
    det = models.simulate(350, 6, 1 / 400, service="det", seed=1)
    assert det.p_block < exp.p_block
    # ... and bursts of 50 into room for 18 lose most of each burst.
    burst = models.simulate(200, 18, 1 / 400, service="det", batch=50, seed=1)
    assert burst.p_block > 0.4


def test_accept_queue_capacity_counts_the_extra_slot_and_the_one_in_service() -> None:
    assert models.accept_queue_capacity(16) == 18


def test_time_wait_arithmetic() -> None:
    assert models.tw_max_rate(28232) == pytest.approx(470.5, abs=0.1)
    assert models.tw_level(50, 90, 28232) == 3000  # plateau: rate x 60 s
    assert models.tw_level(100, 6, 200) == 200  # capped by the range
    assert models.tw_first_failure(100, 200, 6) == pytest.approx(2.0)
    assert models.tw_first_failure(1, 200, 6) is None
    # Below the knee nothing fails, even over a long load.
    assert models.tw_fail_fraction(1.0, 100, 300) == 0.0
    # Exhaust lab: 100/s, 200 ports, 6 s: 200 of 600 succeed.
    assert models.tw_fail_fraction(100, 200, 6) == pytest.approx(400 / 600, abs=0.01)
    # Long above the knee: the long-run success rate is ports / 60 s.
    long = models.tw_fail_fraction(5.0, 100, 600)
    assert 1 - 100 / 60 / 5 - 0.05 < long < 1 - 100 / 60 / 5 + 0.05
