"""Comparison statistics and verdicts, on metrics from real lab runs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from analysis.contract import DERIVED_TABLES
from analysis.derived import comparison
from analysis.load import Run, read_table
from analysis.wording import compare_verdict_line
from tests.conftest import fixture_run


def test_run_metrics_of_real_runs() -> None:
    exhaust = comparison.run_metrics(Run.open(fixture_run("time-wait-exhaust")))
    assert exhaust["eaddrnotavail"] == 400 and exhaust["failed"] == 400
    sizing = comparison.run_metrics(Run.open(fixture_run("accept-overflow-sizing")))
    assert sizing["overflows"] > 1000  # ListenOverflows in the server namespace
    assert sizing["connect_p50_ms"] > 900  # most connects waited for a SYN retry
    healthy = comparison.run_metrics(Run.open(fixture_run("accept-overflow-healthy")))
    assert healthy["overflows"] == 0 and healthy["connect_p99_ms"] < 100


def test_interval_of_an_exact_effect_is_the_point() -> None:
    assert comparison.diff_interval(np.array([400.0, 400.0]), np.array([0.0, 0.0])) == (-400.0, -400.0)


def test_false_positive_rate_under_no_effect() -> None:
    """A and B from one distribution, 4 runs a side: 'significant' in at most ~5 % of 200 trials."""
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(200):
        a, b = rng.normal(100, 10, 4), rng.normal(100, 10, 4)
        hits += int(comparison.summarise(_long("failed", list(a), list(b))).loc[0, "significant"])
    assert hits <= 14, hits


def _long(metric: str, a: list[float], b: list[float]) -> pd.DataFrame:
    rows = [("A", i + 1, v) for i, v in enumerate(a)] + [("B", i + 1, v) for i, v in enumerate(b)]
    return pd.DataFrame(
        [{"run": f"{s}{r}", "profile": s, "side": s, "repeat": r, "metric": metric, "value": v} for s, r, v in rows]
    )


def test_two_noisy_runs_a_side_are_never_significant() -> None:
    # Two values a side whose ranges do not overlap: a percentile bootstrap alone would call it.
    s = comparison.summarise(_long("connect_p50_ms", [0.32, 0.40], [0.401, 0.405]))
    assert s.loc[0, "significant"] == 0


def test_welch_guards_three_runs_with_one_outlier() -> None:
    s = comparison.summarise(_long("connect_p99_ms", [1030, 3060, 1040], [1031, 1035, 1036]))
    assert s.loc[0, "significant"] == 0
    s = comparison.summarise(_long("overflows", [950, 1010, 1005], [0, 0, 0]))
    assert s.loc[0, "significant"] == 1
    assert comparison.outcome(s.iloc[0]) == "removes"


def test_fixture_comparison_reanalysed_gives_its_verdict() -> None:
    """runs.csv of a real make compare (see tests/fixtures/README.md) through summarise and verdict."""
    d = fixture_run("compare-time-wait-exhaust")
    long = read_table(d / "runs.csv", DERIVED_TABLES["compare_runs"])
    cfg = json.loads((d / "compare.json").read_text())
    v = comparison.verdict(cfg, comparison.summarise(long))
    assert v["headline"]["metric"] == "eaddrnotavail"
    assert v["headline"]["outcome"] == "removes"
    assert compare_verdict_line(v).startswith("short-lived-clients removes connect() failures with EADDRNOTAVAIL")


@pytest.mark.parametrize("name", ["compare-time-wait-exhaust"])
def test_fixture_files_match_the_contract(name: str) -> None:
    d = fixture_run(name)
    read_table(d / "runs.csv", DERIVED_TABLES["compare_runs"])
    read_table(d / "summary.csv", DERIVED_TABLES["compare_summary"])


def test_not_a_comparison_directory_is_a_clear_error(tmp_path) -> None:
    import subprocess
    import sys

    from tests.conftest import ROOT

    for cmd, name in (("compare", "compare.json"), ("sweep", "sweep.json")):
        r = subprocess.run(
            [sys.executable, "-m", "analysis", cmd, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 2
        assert f"{tmp_path}/{name}: missing" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "compare.json").write_text('{"lab": "x",\n "runs": [}\n')
    r = subprocess.run(
        [sys.executable, "-m", "analysis", "compare", str(tmp_path)], cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode == 2 and f"{tmp_path}/compare.json:2: invalid JSON" in r.stderr
