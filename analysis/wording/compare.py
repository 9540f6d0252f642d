"""Wording of an A/B comparison of two profiles (analysis/render/compare.py): verdict lines and compare.md."""

from __future__ import annotations

from typing import Any

from .numbers import is_missing, join_words, num

_CI = "(B - A {diff:+g}, 95 % CI {ci_low:+g} … {ci_high:+g})"
# Keyed by (outcome, which direction is better for the metric).
COMPARE_TEMPLATES = {
    ("removes", "lower"): "{b} removes {label}: {a_mean:g} → {b_mean:g} " + _CI,
    ("improves", "lower"): "{b} reduces {label}: {a_mean:g} → {b_mean:g} " + _CI,
    ("worsens", "lower"): "{b} increases {label}: {a_mean:g} → {b_mean:g} " + _CI,
    ("improves", "higher"): "{b} raises {label}: {a_mean:g} → {b_mean:g} " + _CI,
    ("worsens", "higher"): "{b} lowers {label}: {a_mean:g} → {b_mean:g} " + _CI,
    ("no_difference", "lower"): (
        "no significant difference in {label} between {a} and {b}: {a_mean:g} vs {b_mean:g} "
        "(95 % CI of B - A {ci_low:+g} … {ci_high:+g})"
    ),
}
COMPARE_TEMPLATES[("no_difference", "higher")] = COMPARE_TEMPLATES[("no_difference", "lower")]


def _rounded(r: dict[str, Any]) -> dict[str, Any]:
    # Three significant digits: enough to read, few enough not to imply precision.
    return {k: (float(f"{v:.3g}") if isinstance(v, float) else v) for k, v in r.items()}


def compare_line(v: dict[str, Any], r: dict[str, Any]) -> str:
    """One metric's verdict sentence; `better` direction is already in r['outcome']."""
    better = r.get("better", "lower")
    missing = [k for k in ("a_mean", "b_mean", "diff", "ci_low", "ci_high") if is_missing(r.get(k))]
    if missing:
        # A metric no run of one side measured (or too few to give an interval): say which.
        sides = [f"{v[s.lower()]} ({s})" for s, k in (("A", "a_mean"), ("B", "b_mean")) if is_missing(r.get(k))]
        if sides:
            what = f"not measured under {join_words(sides)}"
        else:
            what = f"{num(r['a_mean'])} → {num(r['b_mean'])}, no interval could be computed"
        return f"{r['label']}: {what}; no comparison"
    return COMPARE_TEMPLATES[(r["outcome"], better)].format(**{**_rounded(r), "a": v["a"], "b": v["b"]})


def compare_verdict_line(v: dict[str, Any]) -> str:
    if v["headline"] is None:
        return "no metric could be measured in these runs"
    return compare_line(v, v["headline"])
