"""dev/bench_overhead.py: the benchmark's verdict against its null case (the A/B method's own
spread). The ratios are those of `dev/bench-overhead --pairs 12 --cases null,monitor` on this
project's CI machine, 2026-11-27 (with/base throughput per pair, in pair order)."""

from __future__ import annotations

import importlib.util
import statistics
from types import ModuleType

from tests.conftest import ROOT

NULL = [0.977, 0.832, 0.813, 0.829, 1.324, 1.028, 1.163, 1.037, 1.460, 1.376, 0.928, 1.015]
MONITOR = [0.786, 0.892, 0.789, 1.007, 0.987, 0.821, 0.994, 1.355, 0.936, 1.134, 1.589, 0.957]


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_overhead", ROOT / "dev" / "bench_overhead.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _case(ratios: list[float]) -> dict[str, object]:
    return {"ratios": ratios, "ratio_median": statistics.median(ratios)}


def test_a_case_within_the_null_spread_is_told_apart_from_one_outside() -> None:
    bench = _bench()
    slower = [r * 0.75 for r in MONITOR]  # the same noise, a quarter of the throughput gone
    summary = {"cases": {"null": _case(NULL), "monitor": _case(MONITOR), "slower": _case(slower)}}
    lines = bench.against_null_lines(summary)
    verdict = summary["cases"]
    assert verdict["monitor"]["against_null"]["median_within_null_spread"] is True
    assert verdict["monitor"]["against_null"]["mann_whitney_p"] > 0.2
    assert verdict["slower"]["against_null"]["median_within_null_spread"] is False
    assert verdict["slower"]["against_null"]["mann_whitney_p"] < 0.01
    assert "against_null" not in verdict["null"] and any("OUTSIDE" in line and "slower" in line for line in lines)


def test_no_verdict_without_a_null_case() -> None:
    summary = {"cases": {"monitor": _case(MONITOR)}}
    assert _bench().against_null_lines(summary) == []
    assert "against_null" not in summary["cases"]["monitor"]
