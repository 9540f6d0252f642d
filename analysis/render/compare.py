"""The outputs of an A/B comparison directory (scripts/compare).

analysis/derived/comparison.py measures the runs and computes the verdict; this
module writes runs.csv (per run and metric), summary.csv (B - A with a bootstrap
interval), verdict.json, comparison.md and plots/compare.png beside compare.json.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from analysis.contract import DERIVED_TABLES
from analysis.derived.comparison import collect, profile_caveats, summarise, verdict
from analysis.load import RunDataError, read_table
from analysis.render import markdown as md
from analysis.wording import compare_line, compare_verdict_line, is_missing
from analysis.wording.numbers import num


def _no_nan(x: Any) -> Any:
    """NaN (a metric no run of one side measured) as JSON null: NaN is not JSON."""
    if isinstance(x, dict):
        return {k: _no_nan(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_no_nan(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return None
    return x


def write(comparison: str | Path) -> tuple[Path, dict[str, Any]]:
    """Analyse a comparison directory; returns the markdown path and the verdict."""
    from analysis.render import plots

    d = Path(comparison)
    cfg, long = collect(d)
    if long.empty:
        raise RunDataError(f"{d}/runs: no finished run to compare (scripts/compare writes them)")
    cfg["profile_caveats"] = profile_caveats(d, cfg)
    summary = summarise(long)
    long.to_csv(d / "runs.csv", index=False)
    summary.to_csv(d / "summary.csv", index=False)
    # Read back through the contract, as any consumer would.
    read_table(d / "runs.csv", DERIVED_TABLES["compare_runs"])
    read_table(d / "summary.csv", DERIVED_TABLES["compare_summary"])
    v = verdict(cfg, summary)
    (d / "verdict.json").write_text(json.dumps(_no_nan(v), indent=2, default=float, allow_nan=False) + "\n")
    fig = plots.comparison(long, summary, cfg)
    plots.save(fig, d / "plots" / "compare.png")
    out = d / "comparison.md"
    out.write_text(markdown(v, summary, "plots/compare.png"))
    return out, v


def markdown(v: dict[str, Any], summary: Any, plot: str) -> str:
    """comparison.md: the verdict, how to read the intervals, the per-metric table, the plot."""
    lines = [
        f"# {v['lab']} / {v['variant']}: {v['a']} (A) vs {v['b']} (B)",
        "",
        f"**Verdict:** {compare_verdict_line(v)}",
        "",
    ]
    if v["others"]:
        lines += ["Other significant differences:", "", *md.bullets(compare_line(v, r) for r in v["others"]), ""]
    n = min((r["n_a"] for r in v["metrics"]), default=0)
    lines += [_METHOD.format(repeat=v["repeat"]) + (_FEW_RUNS if n < 3 else _SOME_RUNS), ""]
    if v["overrides"]:
        lines += [
            "Lab parameters set for this comparison: " + ", ".join(f"{k}={x}" for k, x in v["overrides"].items()),
            "",
        ]
    if v["profile_caveats"]:
        lines += ["What the profiles could not change here:", "", *md.bullets(v["profile_caveats"]), ""]
    lines += [*_table(summary), "", md.image("per-run values", plot), ""]
    return md.document(lines)


_METHOD = (
    "Runs: {repeat} per profile, interleaved A B A B, each in fresh namespaces. "
    "Intervals are percentile bootstrap intervals of the difference of means"
)
_FEW_RUNS = (
    " — with fewer than 3 runs a side a difference counts as significant only when every run of each side "
    "gave the same value; raise REPEAT for intervals."
)
_SOME_RUNS = (
    "; with few runs they are narrower than they should be, so a difference is called significant "
    "only when Welch's t-test agrees (p < 0.05). Read them with the per-run plot."
)


def _table(summary: Any) -> list[str]:
    """The per-metric table of comparison.md."""
    header = ["metric", "A mean", "B mean", "B - A", "95 % CI", "significant"]
    return md.table(header, (_table_row(r) for _, r in summary.iterrows()))


def _table_row(r: Any) -> list[str]:
    missing = is_missing(r["ci_low"]) or is_missing(r["ci_high"])
    ci = "not measured" if missing else f"{num(r['ci_low'], '+.4g')} … {num(r['ci_high'], '+.4g')}"
    diffs = [num(r["a_mean"], ".4g"), num(r["b_mean"], ".4g"), num(r["diff"], "+.4g")]
    return [r["label"], *diffs, ci, "yes" if r["significant"] else "no"]
