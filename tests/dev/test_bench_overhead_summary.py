"""dev/bench_overhead_summary.py: the benchmark's verdict against its null case (the A/B method's own
spread). The ratios are those of `dev/bench-overhead --pairs 12 --cases null,monitor` on this
project's CI machine, 2026-11-27 (with/base throughput per pair, in pair order)."""

from __future__ import annotations

import statistics
from types import ModuleType

from tests.conftest import script_module

NULL = [0.977, 0.832, 0.813, 0.829, 1.324, 1.028, 1.163, 1.037, 1.460, 1.376, 0.928, 1.015]
MONITOR = [0.786, 0.892, 0.789, 1.007, 0.987, 0.821, 0.994, 1.355, 0.936, 1.134, 1.589, 0.957]


def _bench() -> ModuleType:
    return script_module("dev/bench_overhead_summary.py")


def _case(ratios: list[float]) -> dict[str, object]:
    return {"ratios": ratios, "ratio_median": statistics.median(ratios)}


def _run(case: str, pair: int, kind: str, rps: float, ctxt: int | None = None) -> dict[str, object]:
    r: dict[str, object] = {"case": case, "pair": pair, "kind": kind, "rps": rps, "requests": int(rps * 3),
                            "cpu_busy_s": 3.0, "cpu_idle_s": 0.0}  # fmt: skip
    if ctxt is not None:
        r["ctxt"] = ctxt
    return r


def test_a_case_within_the_null_spread_is_told_apart_from_one_outside() -> None:
    bench = _bench()
    slower = [r * 0.75 for r in MONITOR]  # the same noise, a quarter of the throughput gone
    summary = {"cases": {"null": _case(NULL), "monitor": _case(MONITOR), "slower": _case(slower)}}
    lines = bench.against_null_lines(summary)
    verdict = summary["cases"]
    assert verdict["monitor"]["against_null"]["ratios"]["median_within_null_spread"] is True
    assert verdict["monitor"]["against_null"]["ratios"]["mann_whitney_p"] > 0.2
    assert verdict["slower"]["against_null"]["ratios"]["median_within_null_spread"] is False
    assert verdict["slower"]["against_null"]["ratios"]["mann_whitney_p"] < 0.01
    assert "against_null" not in verdict["null"] and any("OUTSIDE" in line and "slower" in line for line in lines)


def test_no_verdict_without_a_null_case() -> None:
    summary = {"cases": {"monitor": _case(MONITOR)}}
    assert _bench().against_null_lines(summary) == []
    assert "against_null" not in summary["cases"]["monitor"]


def test_requests_per_busy_cpu_second_are_paired_like_the_throughput() -> None:
    def run(pair: int, requests: int, busy: float) -> dict[str, object]:
        return {"pair": pair, "rps": requests / 8, "requests": requests, "cpu_busy_s": busy, "cpu_idle_s": 1.0,
                "cpu_steal_s": 0.5}  # fmt: skip

    # Pair 1: the same CPU, 10 % fewer requests; pair 2: 10 % fewer requests from 10 % less CPU (a
    # neighbour took it): the same cost per connection.
    base = {1: run(1, 100_000, 14.0), 2: run(2, 100_000, 14.0)}
    with_ = {1: run(1, 90_000, 14.0), 2: run(2, 90_000, 12.6)}
    cs = _bench().case_numbers("cheap", base, with_, 0)
    assert cs["ratios"] == [0.9, 0.9]
    assert [round(r, 6) for r in cs["cpu_ratios"]] == [0.9, 1.0]
    assert cs["idle_share_max"] == 1.0 / 14.1 and cs["steal_share_max"] == 0.5 / 14.1


def test_icount_pairs_a_case_by_pair_number_and_skips_a_pair_that_did_not_start() -> None:
    # Requests per guest second of a trixie guest under -icount (2026-11-28): pair 2's loaded run
    # did not start (no "with" record), pair 3 ran loaded first (the order alternates).
    runs = [
        _run("cheap", 1, "base", 6000.0, 6700),
        _run("cheap", 1, "with", 5700.0),
        _run("cheap", 2, "base", 6010.0),
        _run("cheap", 3, "with", 5730.0),
        _run("cheap", 3, "base", 5990.0),
        _run("null", 1, "base", 6000.0),
    ]
    ic = _bench().icount_numbers(runs, "cheap")
    assert ic["pairs"] == 2
    assert ic["ratios"] == [5700.0 / 6000.0, 5730.0 / 5990.0]
    # A connection costs 1e9/with - 1e9/base guest ns more: 1 ns = 1 instruction at shift 0.
    assert round(ic["guest_ns_per_conn_pairs"][0], 3) == round(1e9 / 5700 - 1e9 / 6000, 3)
    assert ic["base_windows"][0]["ctxt_per_request"] == 6700 / 18000
    assert ic["with_windows"][0]["ctxt_per_request"] is None
    assert _bench().icount_numbers(runs, "null")["pairs"] == 0  # a base run alone is no pair


def test_spread_is_max_minus_min_over_the_median() -> None:
    spread = _bench().spread
    assert spread([0.998, 1.0, 1.003]) == (1.003 - 0.998) / 1.0
    assert spread([1.0]) is None


def test_icount_table_gives_the_null_spread_and_each_case_against_the_null_median(tmp_path) -> None:
    bench = _bench()
    runs = []
    for p, (nb, nw, cb, cw) in enumerate(
        [(6000, 6006, 6000, 5820), (6010, 6004, 5995, 5815), (5990, 5993, 6005, 5830)], 1
    ):
        runs += [_run("null", p, "base", nb), _run("null", p, "with", nw), _run("cheap", p, "base", cb),
                 _run("cheap", p, "with", cw)]  # fmt: skip
    summary = {"cases": {"null": {"bpf_us_per_conn": None}, "cheap": {"bpf_us_per_conn": 1.5}}}
    meta = {"kernel": "6.12", "bpftrace": "bpftrace v0.23.2", "vm": {"release": "trixie"}}
    lines = bench.icount_lines(summary, runs, meta)
    null_ratios = [6006 / 6000, 6004 / 6010, 5993 / 5990]
    assert summary["icount"]["null_spread"] == bench.spread(null_ratios)
    cheap = summary["icount"]["cases"]["cheap"]
    assert cheap["ratio_vs_null"] == statistics.median([5820 / 6000, 5815 / 5995, 5830 / 6005]) / statistics.median(
        null_ratios
    )
    assert cheap["within_null_range"] is False
    assert any(line.startswith("null spread") for line in lines)
    assert any(line.startswith("cheap") and "1500" in line for line in lines)  # BPF µs -> guest ns
