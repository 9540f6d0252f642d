"""The summary of dev/soak-capture: probe output bytes a second in the first and the last
minute, per family and together, and the report's time.

Usage: python dev/soak_capture.py GROWTH.csv REPORT_SECONDS
GROWTH.csv has minute,family,bytes (each family's growth over that minute). The
output of a probe must follow what is alive in the interval, not what has been: the
last minute within 10 % of the first (issue 17), and the report of the hour in 10 s.
"""

from __future__ import annotations

import sys

import pandas as pd

MAX_DRIFT = 0.10
MAX_REPORT_S = 10.0


def summary(growth: pd.DataFrame, report_s: float) -> list[str]:
    per_minute = growth.pivot_table(index="minute", columns="family", values="bytes", aggfunc="sum").fillna(0)
    per_minute["all"] = per_minute.sum(axis=1)
    first, last = per_minute.index.min(), per_minute.index.max()
    lines = [f"soak-capture: {last} minutes; output bytes/s in minute {first} and minute {last}"]
    for fam in per_minute.columns:
        a, b = per_minute.at[first, fam] / 60, per_minute.at[last, fam] / 60
        drift = (b - a) / a if a else float("inf") if b else 0.0
        lines.append(f"  {fam:<12} {a:10.0f} {b:10.0f}  {drift:+.1%}")
    total = per_minute["all"]
    drift = (total[last] - total[first]) / total[first] if total[first] else 0.0
    ok_drift = abs(drift) <= MAX_DRIFT
    lines.append(f"  min/max over all minutes: {total.min() / 60:.0f} / {total.max() / 60:.0f} bytes/s")
    verdict = "within" if ok_drift else "OUTSIDE"
    lines.append(f"  last minute against the first: {drift:+.1%} ({verdict} {MAX_DRIFT:.0%})")
    ok_report = report_s <= MAX_REPORT_S
    lines.append(f"  report of the run: {report_s:.1f} s ({'within' if ok_report else 'OVER'} {MAX_REPORT_S:.0f} s)")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.exit(__doc__)
    print("\n".join(summary(pd.read_csv(argv[0]), float(argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
