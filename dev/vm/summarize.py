#!/usr/bin/env python3
"""summarize: the matrix table from collected target directories (dev/vm/matrix).

For each target directory (doctor.json, tiers.tsv, runs/<family>/ analysed on the
host, bpfstats-<family>.json): kernel, bpftrace, and per family the tier file
doctor predicted, the one capture ran, whether the copied tier files attached as
predicted, the verdict against the expected one, and the probe's in-kernel cost
per event. Prints a Markdown table, writes matrix.json next to the targets, and
exits 1 when a check failed.

USAGE: summarize.py MATRIX_DIR TARGET...
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from analysis.families import FAMILIES

# Each family's scenario (its lab and variant) and the finding it must produce.
EXPECTED = {f.name: (f"{f.lab} {f.lab_variant}", f.finding) for f in FAMILIES.values()}


def load(p: Path):
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def target_rows(d: Path) -> tuple[list[dict], list[str]]:
    problems: list[str] = []
    doctor = load(d / "doctor.json") or {}
    kernel = doctor.get("kernel", "?")
    bpftrace = (doctor.get("bpftrace_version") or "?").lstrip("v")
    tiers: dict[str, dict] = {}
    if (d / "tiers.tsv").is_file():
        with open(d / "tiers.tsv") as f:
            tiers = {r["file"]: r for r in csv.DictReader(f, delimiter="\t")}
    for name, r in tiers.items():
        if r["predicted_runnable"] != r["attached"]:
            problems.append(
                f"{d.name}: {name} predicted runnable={r['predicted_runnable']}"
                f" but attached={r['attached']} ({r['error']})"
            )
    labs: dict[str, dict] = {}
    if (d / "labs.tsv").is_file():
        with open(d / "labs.tsv") as f:
            for row in csv.reader(f, delimiter="\t"):
                labs[row[0]] = {"lab": row[1], "rc": row[2], "seconds": row[3]}
    rows = []
    # Scenarios ran for the families the suite was asked for (families.txt); every
    # probe file was still started alone (tiers.tsv, above).
    asked = (d / "families.txt").read_text().split() if (d / "families.txt").is_file() else list(EXPECTED)
    for fam, (scenario, kind) in EXPECTED.items():
        if fam not in asked:
            continue
        predicted = ((doctor.get("families") or {}).get(fam) or {}).get("file")
        run = d / "runs" / fam
        meta = load(run / "metadata.json") or {}
        ran = (meta.get("probes") or {}).get(fam) or {}
        ran_file = ran.get("file")
        verdicts = load(run / "verdicts.json")
        verdict = "no run"
        ok = False
        if verdicts is not None:
            found = [f for f in verdicts.get("findings", []) if f.get("kind") == kind]
            verdict = f"{kind} {found[0].get('status')}" if found else "no finding"
            ok = bool(found) and found[0].get("status") == "confirmed"
        elif fam in labs:
            verdict = f"lab exit {labs[fam]['rc']}"
        if not ok:
            problems.append(f"{d.name}: {fam}: expected {kind} confirmed, got {verdict}")
        pred_ok = predicted is not None and ran_file is not None and Path(ran_file).name == Path(predicted).name
        if not pred_ok:
            problems.append(f"{d.name}: {fam}: doctor predicted {predicted}, capture ran {ran_file}")
        cost = "-"
        stats = load(d / f"bpfstats-{fam}.json") or {}
        # Event programs only: the interval program (perf_event) prints, it is not per event.
        progs = {
            k: v
            for k, v in stats.get(Path(ran_file).name if ran_file else "", {}).items()
            if not k.startswith("perf_event:")
        }
        cnt = sum(p["run_cnt"] for p in progs.values())
        ns = sum(p["run_time_ns"] for p in progs.values())
        if cnt:
            cost = f"{ns / cnt:.0f} ns x {cnt}"
        copied = tiers.get(Path(ran_file).name if ran_file else "", {})
        rows.append(
            {
                "target": d.name,
                "kernel": kernel,
                "bpftrace": bpftrace,
                "family": fam,
                "tier_file": Path(ran_file).name if ran_file else "-",
                "tier": ran.get("tier") or "-",
                "predicted": "yes" if pred_ok else f"no ({predicted})",
                "copied_alone_attached": copied.get("attached", "-"),
                "scenario": scenario,
                "verdict": verdict,
                "verdict_ok": ok,
                "lab_seconds": labs.get(fam, {}).get("seconds", "-"),
                "cost_per_event": cost,
            }
        )
    return rows, problems


def main() -> int:
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help") else 2
    top = Path(sys.argv[1])
    rows, problems = [], []
    for t in sys.argv[2:]:
        r, p = target_rows(top / t)
        rows += r
        problems += p
    cols = [
        "target",
        "kernel",
        "bpftrace",
        "family",
        "tier_file",
        "tier",
        "predicted",
        "copied_alone_attached",
        "verdict",
        "lab_seconds",
        "cost_per_event",
    ]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    (top / "matrix.json").write_text(json.dumps({"rows": rows, "problems": problems}, indent=1) + "\n")
    for p in problems:
        print(f"PROBLEM: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
