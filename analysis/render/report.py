"""Turn a run directory into verdicts.json, report.md and PNG plots.

The report is assembled here: the verdicts document, report.md's sections and the
plots of analysis/render/figures.py; analysis/render/atomic.py writes them, all or
nothing.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

from analysis.derived.owners import owner_of
from analysis.families import FAMILIES
from analysis.findings import CHAIN_ORDER, Finding
from analysis.load import Run, RunDataError
from analysis.render import markdown as md
from analysis.render import measurements
from analysis.render.atomic import Staged, check_target
from analysis.render.figures import plots_for
from analysis.render.outputs import PLOT_MANIFEST, check_outputs
from analysis.rules import RULES
from analysis.rules.schedule import judge
from analysis.wording import TITLES, describe, headline
from analysis.wording.catalog import UNSEEN
from analysis.wording.owners import owner_label

VERDICTS_SCHEMA_VERSION = 1
STOP_REASONS_TEXT = {
    "interrupted": "the capture was interrupted (Ctrl-C or SIGTERM) before its set duration",
    "killed": "the capture was killed (SIGKILL) and reaped afterwards; what it had not yet written is missing",
    "error": "the capture failed before it finished",
    "duration": "a probe did not run to the end",
    "requested": "a probe did not run to the end",
}


def verdicts(run: Run, findings: list[Finding], measured: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema_version": VERDICTS_SCHEMA_VERSION,
        "run": run.metadata.get("name", run.path.name),
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "run_complete": bool(run.metadata.get("complete")),
        "stop_reason": run.metadata.get("stop_reason"),
        "scope": run.scope,
        "missing_tables": dict(run.missing),
        "input_notes": list(run.warnings) + list(run.notes),
        "rules": [{"kind": r.kind, "inputs": list(r.inputs)} for r in RULES],
        "findings": [f.to_dict() for f in findings if f.is_finding],
        "ruled_out": [f.to_dict() for f in findings if f.status == "absent"],
        "not_checked": [f.to_dict() for f in findings if f.status == "not_checked"],
        "measurements": measured,
    }


def _capture_lines(run: Run) -> list[str]:
    """The bullets under the title: when, where, which probes, scope, misses, lab."""
    m = run.metadata
    lines = [
        f"- Captured {m.get('started_at')} to {m.get('ended_at')} on {m.get('host')}, kernel {m.get('kernel')}, "
        f"bpftrace {m.get('bpftrace_version')}; complete: {m.get('complete')} ({m.get('stop_reason')}).",
        "- Probes: "
        + (
            ", ".join(f"{k} ({v.get('tier')} tier, {v.get('status')})" for k, v in m.get("probes", {}).items())
            or "none (the sampled tier: the kernel's counters, listeners and socket tables only)"
        ),
        "- Namespaces sampled: " + ", ".join(_namespace(run, n) for n in m.get("netns", [])),
    ]
    lines += _not_probed(m.get("probes", {}))
    if run.scope == "sampled":
        aside = ", ".join(f"{k} {v}" for k, v in run.out_of_scope.items())
        lines.append(
            "- Scope: the sampled namespaces only (capture --scope sampled: hosts sharing one kernel); probe rows "
            "of other namespaces set aside: " + (aside or "none") + "."
        )
    missed = {k: v.get("recursion_misses") for k, v in m.get("probes", {}).items() if v.get("recursion_misses")}
    if missed:
        lines.append(
            "- Events the kernel did not run a probe for (recursion misses: another BPF program was running on "
            "that CPU), counted per bpftrace process, every program of it (one process runs every family by "
            "default, and each shows its total): " + ", ".join(f"{k} {v}" for k, v in missed.items()) + ". "
            "Counts from those probes can be low by up to that many events, and a retransmit event can carry "
            "many segments (a 64 KiB GSO skb: 45 of 1448 bytes); fewer probes at once means fewer misses."
        )
    lab = run.lab or {}
    if lab:
        lines.append(f"- Lab: {lab.get('lab')} / {lab.get('variant')}: {lab.get('summary')}")
    return lines


def _namespace(run: Run, ns: dict[str, Any]) -> str:
    """A sampled namespace: its label, inode and, when one container or pod owns it, that owner."""
    owner = owner_of(run, int(ns["inode"]), None)
    label = owner_label(owner.to_dict() if owner else None)
    return f"{ns['label']} ({ns['inode']}" + (f"; {label}" if label else "") + ")"


def _not_probed(probes: dict[str, dict]) -> list[str]:
    """Families whose probe did not run (capture --tier sampled or rare, or a kernel without
    it): what this run cannot see, so an absence is not read as a clean bill."""
    out = []
    for fam in FAMILIES.values():
        status = probes.get(fam.name, {}).get("status")
        if status in ("ok", "running", "killed", "died"):
            continue  # it ran (died and killed: for part of the run, which the input notes say)
        why = "not run" if status is None else status.replace("_", " ")
        out.append(
            f"- Without the {fam.name} probe ({why}) this run cannot see {UNSEEN[fam.finding]}. "
            f"To see it: `make capture PROBES={fam.name}`."
        )
    return out


def _input_lines(run: Run) -> list[str]:
    """What the findings rest on when the run is not whole: incomplete, tables missing, odd input."""
    m = run.metadata
    lines: list[str] = []
    if not run.complete:
        why = STOP_REASONS_TEXT.get(str(m.get("stop_reason")), f"stop reason {m.get('stop_reason')}")
        bad = {
            k: v.get("status") for k, v in m.get("probes", {}).items() if v.get("status") not in ("ok", "not_runnable")
        }
        lines += [
            "",
            f"**This run is incomplete** ({m.get('stop_reason')}): {why}."
            + (" Probes that did not finish: " + ", ".join(f"{k} ({v})" for k, v in bad.items()) + "." if bad else "")
            + " Findings below rest on what was captured; a missing table counts as empty.",
        ]
    if run.missing:
        lines += ["", "Missing tables: " + ", ".join(f"{k}.csv ({v})" for k, v in run.missing.items()) + "."]
    if run.warnings:
        lines += ["", "Warnings about the input (evidence missing, tables that disagree):", *md.bullets(run.warnings)]
    if run.notes:
        lines += ["", "Input oddities (accepted; the data may have been damaged):", *md.bullets(run.notes)]
    return lines


def _findings_lines(findings: list[Finding]) -> list[str]:
    """## Findings: each finding's headline, window and evidence chain."""
    lines = md.heading("Findings")
    real = [f for f in findings if f.is_finding]
    unchecked = sum(f.status == "not_checked" for f in findings)
    if not real and unchecked:
        lines.append(f"No finding among what this run judged; {unchecked} object(s) not judged: see Not checked.")
    elif not real:
        lines.append("No finding: nothing in this run points at a hidden queue.")
    for f in real:
        w = f.window or {}
        lines += md.heading(headline(f), 3)
        if w.get("start_rel_s") is not None and w.get("end_rel_s") is not None:
            lines += [f"Window: {w['start_rel_s']} s to {w['end_rel_s']} s after capture start.", ""]
        links = [(name, f.link(name)) for name in CHAIN_ORDER]
        lines += md.numbered(f"{md.bold(name)} — {describe(f.kind, link)}" for name, link in links if link is not None)
        lines.append("")
    return lines


# Bullets per finding kind under Ruled out / Not checked; the rest are counted (verdicts.json has
# every one): an hour on a busy host rules out thousands of endpoints and threads.
STATUS_BULLETS_PER_KIND = 20


def _status_lines(findings: list[Finding], status: str, title: str, intro: list[str]) -> list[str]:
    """## Ruled out / ## Not checked: a bullet per finding of that status, its chain in words (the
    first STATUS_BULLETS_PER_KIND of each kind, then how many more)."""
    these = [f for f in findings if f.status == status]
    if not these:
        return []
    shown: list[Finding] = []
    more: dict[str, int] = {}
    for f in these:
        if sum(x.kind == f.kind for x in shown) < STATUS_BULLETS_PER_KIND:
            shown.append(f)
        else:
            more[f.kind] = more.get(f.kind, 0) + 1
    items = [f"{headline(f)}: " + " ".join(describe(f.kind, link) for link in f.chain) for f in shown]
    items += [
        f"... and {n} more: {TITLES.get(k, k)}, {status.replace('_', ' ')} (verdicts.json lists each)"
        for k, n in more.items()
    ]
    return [*md.heading(title), *intro, *md.bullets(items), ""]


def _plots_lines(run: Run, figures: list[tuple[str, Path]]) -> list[str]:
    if not figures:
        return []
    lines = md.heading("Plots")
    for title, p in figures:
        lines += [md.image(title, p.relative_to(run.path)), ""]
    return lines


def markdown(run: Run, findings: list[Finding], figures: list[tuple[str, Path]], measured: dict[str, Any]) -> str:
    lines = [f"# Report: {run.metadata.get('name', run.path.name)}", "", *_capture_lines(run), *_input_lines(run)]
    lines += ["", *_findings_lines(findings)]
    lines += _status_lines(findings, "absent", "Ruled out", [])
    unchecked_intro = ["What this run could neither find nor rule out, and why:", ""]
    lines += _status_lines(findings, "not_checked", "Not checked", unchecked_intro)
    lines += measurements.markdown(measured)
    lines += _plots_lines(run, figures)
    return md.document(lines)


def _old_manifest(plot_dir: Path) -> list[str]:
    try:
        names = json.loads((plot_dir / PLOT_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return (
        [n for n in names if isinstance(n, str) and "/" not in n and n.endswith(".png")]
        if isinstance(names, list)
        else []
    )


def _plot_dir(run: Run) -> Path:
    """plots/ of the run, made if absent; the outputs it holds checked before anything is written."""
    plot_dir = run.path / "plots"
    for p in (run.path / "report.md", run.path / "verdicts.json"):
        check_target(p)
    if plot_dir.is_symlink() or (plot_dir.exists() and not plot_dir.is_dir()):
        raise RunDataError(f"{plot_dir}: exists and is not a folder; report writes its plots there")
    plot_dir.mkdir(exist_ok=True)
    check_target(plot_dir / PLOT_MANIFEST)
    return plot_dir


def write_report(run_dir: str | Path) -> tuple[Path, list[Finding]]:
    """Analyse a run and write verdicts.json, report.md and plots/.

    Everything is computed and written to temporary files first; only then are
    they renamed into place (plots, verdicts.json, report.md), so a failure
    leaves the previous outputs as they were. In plots/ only the files listed
    in its manifest (written by an earlier report) are replaced or removed."""
    run = Run.open(run_dir)
    run.validate_all(release=True)
    check_outputs(run.path)
    findings, measured = judge(run)
    report = run.path / "report.md"
    plot_dir = _plot_dir(run)
    staged = Staged(plot_dir)
    try:
        figures = plots_for(run, findings, plot_dir, staged.figure)
        for final in staged.figures:
            check_target(final)
        old = _old_manifest(plot_dir)
        new_names = sorted(p.name for p in staged.figures)
        staged.text(plot_dir / PLOT_MANIFEST, json.dumps(new_names) + "\n")
        doc = verdicts(run, findings, measured)
        staged.text(run.path / "verdicts.json", json.dumps(doc, indent=2, default=str) + "\n")
        staged.text(report, markdown(run, findings, figures, measured) + "\n")
        staged.commit()  # plots first, then the manifest and the two texts back to back
    finally:
        staged.discard()
    for name in set(old) - set(new_names):  # stale plots this report wrote before
        with contextlib.suppress(FileNotFoundError):
            (plot_dir / name).unlink()
    return report, findings
