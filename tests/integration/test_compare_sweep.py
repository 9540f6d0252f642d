"""make compare and make sweep end to end: real labs, real profiles in namespaces, real models."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pandas as pd

from analysis.contract import DERIVED_TABLES
from analysis.load import read_table
from tests.conftest import ROOT, leftovers
from tests.scripts.test_sysctl_profile import KEYS  # every key a profile may set


def host_values() -> dict[str, bytes]:
    return {k: (Path("/proc/sys") / k).read_bytes() for k in KEYS}


def run_script(args: list[str], timeout: int) -> str:
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=os.environ.copy())
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_short_lived_clients_removes_eaddrnotavail(kernel, tmp_path: Path) -> None:
    before = host_values()
    out = tmp_path / "cmp"
    run_script(
        [
            str(ROOT / "scripts/compare"),
            *["time-wait", "exhaust", "defaults", "short-lived-clients", "--repeat", "2", "--set", "LOAD_SECONDS=4"],
            "--out",
            str(out),
        ],
        timeout=400,
    )
    assert host_values() == before, "a namespaced comparison changed host sysctls"
    assert not leftovers("tq-time-wait"), leftovers("tq-time-wait")
    v = json.loads((out / "verdict.json").read_text())
    head = v["headline"]
    assert head["metric"] == "eaddrnotavail"
    # 200 ports, 100 conn/s for 4 s: about 200 of 400 attempts fail under defaults.
    assert head["a_mean"] >= 150 and head["b_mean"] == 0, head
    assert head["outcome"] == "removes" and head["significant"]
    # The run order is interleaved, and each run carries its profile.
    runs = json.loads((out / "compare.json").read_text())["runs"]
    assert [r["side"] for r in runs] == ["A", "B", "A", "B"]
    for r in runs:
        meta = json.loads((out / "runs" / r["run"] / "metadata.json").read_text())
        assert meta["lab"]["profile"]["name"] == r["profile"]
    # The scenario's narrow port range overrides both profiles' ranges, and the report says so.
    assert any("ip_local_port_range" in c and "40000 40199" in c for c in v["profile_caveats"]), v["profile_caveats"]
    summary = read_table(out / "summary.csv", DERIVED_TABLES["compare_summary"])
    assert set(summary["metric"]) >= {"eaddrnotavail", "failed", "connect_p99_ms"}
    assert (out / "plots" / "compare.png").stat().st_size > 10_000
    assert "removes connect() failures with EADDRNOTAVAIL" in (out / "comparison.md").read_text()


def test_accept_queue_sweep_matches_mm1k(kernel, tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    run_script(
        [
            str(ROOT / "scripts/sweep"),
            *["accept-queue", "--rates", "250,700", "--backlogs", "8", "--seconds", "4"],
            "--out",
            str(out),
        ],
        timeout=300,
    )
    assert not leftovers("tq-accept-overflow"), leftovers("tq-accept-overflow")
    df = read_table(out / "aq_sweep.csv", DERIVED_TABLES["aq_sweep"]).sort_values("rate_offered")
    assert list(df["limit"]) == [8, 8]
    assert list(df["capacity_k"]) == [10, 10]
    low, high = df.iloc[0], df.iloc[1]
    assert high["rho"] > 1 > low["rho"]
    assert high["p_measured"] > low["p_measured"]
    # Tolerance from the full sweep (make sweep, docs/experiments.md): |error| <= 0.05 at every point.
    for _, r in df.iterrows():
        assert abs(r["p_mm1k"] - r["p_measured"]) <= 0.06, r.to_dict()
    assert (out / "plots" / "sweep.png").is_file() and "M/M/1/K" in (out / "sweep.md").read_text()


def test_time_wait_sweep_finds_the_knee(kernel, tmp_path: Path) -> None:
    out = tmp_path / "tw"
    run_script(
        [
            str(ROOT / "scripts/sweep"),
            *["time-wait", "--ports", "50", "--rates", "2,10", "--seconds", "10", "--jobs", "2"],
            "--out",
            str(out),
        ],
        timeout=300,
    )
    assert not leftovers("tq-time-wait"), leftovers("tq-time-wait")
    df = read_table(out / "tw_sweep.csv", DERIVED_TABLES["tw_sweep"]).set_index("rate")
    slow, fast = df.loc[2.0], df.loc[10.0]
    # 2/s for 10 s: 20 TIME_WAIT, nothing fails.
    assert pd.isna(slow["first_fail_s_measured"]) and slow["fail_fraction_measured"] == 0
    assert abs(slow["tw_measured"] - slow["tw_predicted"]) <= 3
    # 10/s: 50 ports last 5 s, then the rest of the load fails.
    assert fast["tw_measured"] == 50
    assert abs(fast["first_fail_s_measured"] - 5.0) <= 0.5
    assert abs(fast["fail_fraction_measured"] - fast["fail_fraction_predicted"]) <= 0.05
