"""A/B tuning comparisons: the numbers. Lab runs under two sysctl profiles, interleaved.

scripts/compare writes a comparison directory:
  compare.json          what was compared (lab, variant, profiles, repeats, overrides)
  runs/NN-<profile>/    one ordinary lab run each (A B A B ...)
Each metric is measured per run from that run's own files (collect), B - A is
estimated with a bootstrap interval and Welch's test (summarise), and the verdict
leads with the metric the lab is about (verdict). analysis/render/compare.py writes
runs.csv, summary.csv, verdict.json, comparison.md and plots/compare.png from them.

A comparison is only as good as its runs: every run directory stays inspectable on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from analysis.contract import DERIVED_TABLES
from analysis.derived import connects
from analysis.derived.counters import capture_total
from analysis.load import Run, read_json, read_table

CONFIDENCE = 0.95
# Fewer runs a side than this and a bootstrap interval means little (with 2
# values it can only take 3 means): a difference then counts only when every
# run of a side gave the same value, i.e. the effect is exact, not estimated.
MIN_RUNS_FOR_INTERVAL = 3
# With 3-5 runs a side the percentile bootstrap interval is too narrow (it
# ignores that the spread itself is estimated from 3 values), so a difference
# is called significant only if Welch's t-test agrees at this level.
ALPHA = 0.05
# Resamples for the bootstrap; seeded, so a comparison's numbers are reproducible.
N_RESAMPLES = 9999
SEED = 20261123


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    measure: Callable[[Run], float | None]
    # "lower" when a smaller value is the better one (all current metrics but throughput).
    better: str = "lower"


def _server_inode(run: Run) -> int | None:
    lab = run.lab or {}
    srv = lab.get("server") or {}
    return int(srv["netns_inode"]) if "netns_inode" in srv else None


def _overflows(run: Run) -> float | None:
    ino = _server_inode(run)
    return None if ino is None else capture_total(run, "ListenOverflows", ino)


METRICS: tuple[Metric, ...] = (
    Metric("overflows", "accept-queue overflows (ListenOverflows, server)", _overflows),
    Metric("failed", "failed connection attempts", connects.failed),
    Metric("eaddrnotavail", "connect() failures with EADDRNOTAVAIL", connects.eaddrnotavail),
    Metric(
        "connect_p50_ms", "connect latency p50 (ms)", lambda r: connects.quantile_ms(connects.connected_us(r), 0.50)
    ),
    Metric(
        "connect_p99_ms", "connect latency p99 (ms)", lambda r: connects.quantile_ms(connects.connected_us(r), 0.99)
    ),
    Metric("reply_p99_ms", "time to the first reply byte, p99 (ms)", lambda r: connects.first_byte_ms(r, 0.99)),
    Metric(
        "retransmits",
        "retransmitted segments (RetransSegs, all namespaces)",
        lambda r: capture_total(r, "RetransSegs"),
    ),
    Metric("ok_per_s", "throughput (answered connections per second of load)", connects.ok_per_s, better="higher"),
)
METRIC_BY_KEY = {m.key: m for m in METRICS}

# The metric a verdict line leads with: the symptom the lab (or variant) is
# about. A stall is about clients failing, not the overflow counter: a bigger
# queue can zero the counter while the same clients still time out.
HEADLINE = {
    "accept-overflow": "overflows",
    "accept-overflow/stall": "failed",
    "time-wait": "eaddrnotavail",
    "retransmit": "retransmits",
    "epoll": "ok_per_s",
}


def run_metrics(run: Run) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in METRICS:
        v = m.measure(run)
        if v is not None and np.isfinite(v):
            out[m.key] = float(v)
    return out


def collect(comparison: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    """compare.json and the long table of (run, profile, side, repeat, metric, value)."""
    cfg = read_json(
        comparison / "compare.json", f"is {comparison} a directory written by scripts/compare?", schema="compare"
    )
    rows = []
    for entry in cfg.get("runs", []):
        run_dir = comparison / "runs" / entry["run"]
        if not (run_dir / "metadata.json").is_file():
            continue  # an interrupted comparison: analyse the runs that finished
        run = Run.open(run_dir)
        for k, v in run_metrics(run).items():
            rows.append(
                {
                    "run": entry["run"],
                    "profile": entry["profile"],
                    "side": entry["side"],
                    "repeat": entry["repeat"],
                    "metric": k,
                    "value": v,
                }
            )
    cols = DERIVED_TABLES["compare_runs"].column_names
    return cfg, pd.DataFrame(rows, columns=cols)


def diff_interval(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """95 % bootstrap interval of mean(b) - mean(a), resampling each side on its own."""
    if len(a) == 0 or len(b) == 0:
        return (float("nan"), float("nan"))
    d = float(b.mean() - a.mean())
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        # Every resample gives the same difference; scipy would warn about a
        # degenerate distribution, the interval is the point.
        return (d, d)
    res = stats.bootstrap(
        (b, a),
        lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
        vectorized=True,
        paired=False,
        confidence_level=CONFIDENCE,
        n_resamples=N_RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(SEED),
    )
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def summarise(long: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for m in METRICS:
        sub = long[long["metric"] == m.key]
        if sub.empty:
            continue
        a = sub[sub["side"] == "A"]["value"].to_numpy(float)
        b = sub[sub["side"] == "B"]["value"].to_numpy(float)
        lo, hi = diff_interval(a, b)
        diff = float(b.mean() - a.mean()) if len(a) and len(b) else float("nan")
        # One run a side has no spread to speak of, so it is never "exact".
        exact = len(a) >= 2 and len(b) >= 2 and np.ptp(a) == 0 and np.ptp(b) == 0
        enough = min(len(a), len(b)) >= MIN_RUNS_FOR_INTERVAL or exact
        significant = bool(enough and np.isfinite(lo) and (lo > 0 or hi < 0))
        if significant and not exact:
            significant = bool(stats.ttest_ind(b, a, equal_var=False).pvalue < ALPHA)
        rows.append(
            {
                "metric": m.key,
                "label": m.label,
                "n_a": len(a),
                "n_b": len(b),
                "a_mean": float(a.mean()) if len(a) else float("nan"),
                "b_mean": float(b.mean()) if len(b) else float("nan"),
                "diff": diff,
                "ci_low": lo,
                "ci_high": hi,
                "significant": int(significant),
            }
        )
    return pd.DataFrame(rows, columns=DERIVED_TABLES["compare_summary"].column_names)


def outcome(row: pd.Series) -> str:
    """Key of the verdict for one metric (worded in wording.COMPARE_TEMPLATES)."""
    if not row["significant"]:
        return "no_difference"
    better = METRIC_BY_KEY[row["metric"]].better
    if better == "lower" and row["b_mean"] == 0 and row["a_mean"] > 0:
        return "removes"
    improved = row["diff"] < 0 if better == "lower" else row["diff"] > 0
    return "improves" if improved else "worsens"


def verdict(cfg: dict[str, Any], summary: pd.DataFrame) -> dict[str, Any]:
    """Structured verdict: the headline metric's outcome, the other significant ones, and caveats."""
    lab = cfg.get("lab", "")
    headline_key = HEADLINE.get(f"{lab}/{cfg.get('variant')}", HEADLINE.get(lab, "failed"))
    if headline_key not in set(summary["metric"]):
        headline_key = str(summary["metric"].iloc[0]) if not summary.empty else ""
    results = []
    for _, row in summary.iterrows():
        results.append(
            {
                **{k: row[k] for k in summary.columns},
                "outcome": outcome(row),
                "better": METRIC_BY_KEY[row["metric"]].better,
            }
        )
    for r in results:
        r["significant"] = bool(r["significant"])
        for k in ("n_a", "n_b"):
            r[k] = int(r[k])
    head = next((r for r in results if r["metric"] == headline_key), None)
    return {
        "lab": cfg.get("lab"),
        "variant": cfg.get("variant"),
        "a": cfg.get("a"),
        "b": cfg.get("b"),
        "repeat": cfg.get("repeat"),
        "overrides": cfg.get("overrides", {}),
        "headline": head,
        "others": [r for r in results if r["metric"] != headline_key and r["significant"]],
        "metrics": results,
        "profile_caveats": cfg.get("profile_caveats", []),
    }


def profile_caveats(comparison: Path, cfg: dict[str, Any]) -> list[str]:
    """What the profiles could not change, read from the runs: keys the scenario overrode, global keys left out."""
    caveats: set[str] = set()
    for entry in cfg.get("runs", []):
        meta = comparison / "runs" / entry["run"] / "metadata.json"
        if meta.is_file():
            prof = (Run.open(meta.parent).lab or {}).get("profile") or {}
            caveats |= {f"{entry['profile']}: not applied (global key): {k}" for k in prof.get("skipped_global", [])}
            caveats |= {
                f"{entry['profile']}: overridden by the lab's scenario: {k}"
                for k in prof.get("overridden_by_scenario", [])
            }
    return sorted(caveats)


def load(comparison: str | Path) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """runs.csv, summary.csv and verdict.json of an analysed comparison (notebooks)."""
    d = Path(comparison)
    long = read_table(d / "runs.csv", DERIVED_TABLES["compare_runs"])
    summary = read_table(d / "summary.csv", DERIVED_TABLES["compare_summary"])
    return long, summary, read_json(d / "verdict.json", "run: python -m analysis compare DIR", "compare_verdict", True)
