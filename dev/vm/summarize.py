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
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from analysis.families import FAMILIES

P2C = Path(__file__).resolve().parents[2] / "collector" / "probe-to-csv"
# Each family's scenario (its lab and variant) and the finding it must produce.
EXPECTED = {f.name: (f"{f.lab} {f.lab_variant}", f.finding) for f in FAMILIES.values()}
# The scenarios a guest runs besides (families.conf "guest"), by their run's name: the family,
# the lab and variant, and the cause the finding must name.
GUEST = {
    f"{f.name}@{variant}": (f.name, f"{lab} {variant}", cause)
    for f in FAMILIES.values()
    for lab, variant, cause in f.guest
}


def load(p: Path):
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def target_rows(d: Path) -> tuple[list[dict], list[str]]:
    """One target directory's rows, a family each, and the checks that failed on it."""
    doctor = load(d / "doctor.json") or {}
    # The columns every row of this target starts with.
    target = {
        "target": d.name,
        "kernel": doctor.get("kernel", "?"),
        "bpftrace": (doctor.get("bpftrace_version") or "?").lstrip("v"),
    }
    tiers = read_tiers(d)
    problems = tier_problems(d, tiers)
    labs = read_labs(d)
    rows = []
    # Scenarios ran for the families the suite was asked for (families.txt); every
    # probe file was still started alone (tiers.tsv, above).
    asked = (d / "families.txt").read_text().split() if (d / "families.txt").is_file() else list(EXPECTED)
    for fam in EXPECTED:
        if fam not in asked:
            continue
        row, fam_problems = family_row(d, fam, target, doctor, tiers, labs)
        rows.append(row)
        problems += fam_problems
    # In a guest (a machine of its own) only: the host target never runs them.
    for name, (fam, _, _) in GUEST.items():
        if fam not in asked or d.name == "host":
            continue
        row, fam_problems = family_row(d, fam, target, doctor, tiers, labs, name)
        rows.append(row)
        problems += fam_problems
    return rows, problems


def read_tiers(d: Path) -> dict[str, dict]:
    """tiers.tsv by tier file: each probe file started alone, predicted runnable and attached."""
    if not (d / "tiers.tsv").is_file():
        return {}
    with open(d / "tiers.tsv") as f:
        return {r["file"]: r for r in csv.DictReader(f, delimiter="\t")}


def tier_problems(d: Path, tiers: dict[str, dict]) -> list[str]:
    """The tier files that attached where doctor said they would not, or the other way round."""
    return [
        f"{d.name}: {name} predicted runnable={r['predicted_runnable']} but attached={r['attached']} ({r['error']})"
        for name, r in tiers.items()
        if r["predicted_runnable"] != r["attached"]
    ]


def read_labs(d: Path) -> dict[str, dict]:
    """labs.tsv by family: the lab run for it, its exit code and its seconds."""
    labs: dict[str, dict] = {}
    if (d / "labs.tsv").is_file():
        with open(d / "labs.tsv") as f:
            for row in csv.reader(f, delimiter="\t"):
                labs[row[0]] = {"lab": row[1], "rc": row[2], "seconds": row[3]}
    return labs


def family_row(
    d: Path, fam: str, target: dict, doctor: dict, tiers: dict[str, dict], labs: dict[str, dict], name: str = ""
) -> tuple[dict, list[str]]:
    """One scenario's row on a target (the family's own, or NAME of its guest scenarios), and its
    failed checks: the finding expected (with the guest scenario's cause), the tier file predicted."""
    name = name or fam
    scenario, kind = EXPECTED[fam]
    cause = None
    if name in GUEST:
        _, scenario, cause = GUEST[name]
    problems: list[str] = []
    predicted = ((doctor.get("families") or {}).get(fam) or {}).get("file")
    run = d / "runs" / name
    meta = load(run / "metadata.json") or {}
    ran = (meta.get("probes") or {}).get(fam) or {}
    ran_file = ran.get("file")
    # No file of the family runs on this kernel (doctor says which tracepoint is missing): the
    # capture runs none, and the rule, on the sampled data alone, can suspect but not confirm.
    probeless = predicted is None and ran_file is None
    verdict, status = family_verdict(run, kind, labs.get(name))
    wanted = ("confirmed", "suspected") if probeless else ("confirmed",)
    ok = status in wanted and (cause is None or verdict.endswith(f"({cause})"))
    if not ok:
        expected = f"{kind} {' or '.join(wanted)}" + (f" ({cause})" if cause else "")
        problems.append(f"{d.name}: {name}: expected {expected}, got {verdict}")
    unknown = unknown_lines(d, fam, ran, ran_file)
    if unknown not in ("0/0", "0/-", "-/0", "-/-"):
        problems.append(f"{d.name}: {name}: lines the parser does not know (capture/alone): {unknown}")
    pred_ok = probeless or (
        predicted is not None and ran_file is not None and Path(ran_file).name == Path(predicted).name
    )
    if not pred_ok:
        problems.append(f"{d.name}: {name}: doctor predicted {predicted}, capture ran {ran_file}")
    copied = tiers.get(Path(ran_file).name if ran_file else "", {})
    row = {
        **target,
        "family": fam if name == fam else f"{fam} ({name.partition('@')[2]})",
        "tier_file": Path(ran_file).name if ran_file else "-",
        "tier": ran.get("tier") or "-",
        "predicted": ("yes (none runs here)" if probeless else "yes") if pred_ok else f"no ({predicted})",
        "copied_alone_attached": copied.get("attached", "-"),
        "scenario": scenario,
        "verdict": verdict,
        "verdict_ok": ok,
        "lab_seconds": labs.get(name, {}).get("seconds", "-"),
        "unknown_lines": unknown,
        "cost_per_event": cost_per_event(d, name, ran_file),
    }
    return row, problems


def unknown_lines(d: Path, fam: str, ran: dict, ran_file: str | None) -> str:
    """Lines of the probe's output that collector/probe-to-csv did not know: in the scenario's
    capture (metadata.json) / in its tier file's run alone (tiers/<file>.out, parsed here);
    "-" where that output is missing."""
    in_capture = ran.get("unknown_lines", "-")
    out = d / "tiers" / f"{Path(ran_file).name}.out" if ran_file else None
    alone: int | str = "-"
    if out is not None and out.is_file():
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run([str(P2C), str(out), tmp], capture_output=True, text=True, check=False)
        m = re.search(r"(\d+) lines of unknown records", r.stderr)
        alone = int(m[1]) if m else 0
    return f"{in_capture}/{alone}"


def family_verdict(run: Path, kind: str, lab: dict | None) -> tuple[str, str | None]:
    """What the analysis said of the expected finding (with its cause), else how the lab ended; and
    that finding's status (None: no finding)."""
    verdicts = load(run / "verdicts.json")
    if verdicts is not None:
        found = [f for f in verdicts.get("findings", []) if f.get("kind") == kind]
        verdict = f"{kind} {found[0].get('status')} ({found[0].get('cause_class')})" if found else "no finding"
        return verdict, found[0].get("status") if found else None
    if lab is not None:
        return f"lab exit {lab['rc']}", None
    return "no run", None


def cost_per_event(d: Path, fam: str, ran_file: str | None) -> str:
    """The probe's mean in-kernel time per event and the event count (bpfstats), or "-" when none ran."""
    stats = load(d / f"bpfstats-{fam}.json") or {}
    # A capture runs its lab's probe files as one bundle (probes.bt): then the cost is the bundle's.
    name = Path(ran_file).name if ran_file else ""
    bundle = name not in stats and "probes.bt" in stats
    # Event programs only: the interval program (perf_event) prints, it is not per event.
    progs = {k: v for k, v in stats.get("probes.bt" if bundle else name, {}).items() if not k.startswith("perf_event:")}
    cnt = sum(p["run_cnt"] for p in progs.values())
    ns = sum(p["run_time_ns"] for p in progs.values())
    return (f"{ns / cnt:.0f} ns x {cnt}" + (" (the lab's bundle)" if bundle else "")) if cnt else "-"


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
        "unknown_lines",
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
