"""Turn a run directory into verdicts.json, report.md and PNG plots."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from . import plots
from .findings import CHAIN_ORDER, Finding
from .rules import RULES, evaluate_all
from .run import Run
from .wording import describe, headline

VERDICTS_SCHEMA_VERSION = 1


def verdicts(run: Run, findings: list[Finding]) -> dict[str, Any]:
    return {
        "schema_version": VERDICTS_SCHEMA_VERSION,
        "run": run.metadata.get("name", run.path.name),
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "run_complete": bool(run.metadata.get("complete")),
        "rules": [{"kind": r.kind, "inputs": list(r.inputs)} for r in RULES],
        "findings": [f.to_dict() for f in findings if f.status != "absent"],
        "ruled_out": [f.to_dict() for f in findings if f.status == "absent"],
    }


def _plots_for(run: Run, findings: list[Finding], out: Path) -> list[tuple[str, Path]]:
    made: list[tuple[str, Path]] = []
    listeners = {
        (f.subject["netns"], f.subject["lport"])
        for f in findings
        if f.kind == "accept_queue_overflow" and f.subject.get("lport") is not None and f.status != "absent"
    }
    lab_server = (run.lab or {}).get("server") or {}
    if not listeners and lab_server.get("netns_inode"):
        listeners = {(lab_server["netns_inode"], lab_server["port"])}
    for netns, lport in sorted(listeners):
        p = plots.save(plots.queue_depth(run, netns, lport), out / f"accept_queue_{lport}_{netns}.png")
        made.append((f"Accept queue depth vs limit, port {lport}", p))
        p = plots.save(
            plots.counter_deltas(run, netns, ["ListenOverflows", "ListenDrops", "TCPReqQFullDoCookies"]),
            out / f"listen_overflows_{netns}.png",
        )
        made.append((f"Listen overflow counters in {run.netns_label(netns)}", p))
    fig = plots.connect_latency(run)
    if fig is not None:
        made.append(("Client connect latency", plots.save(fig, out / "connect_latency.png")))
    return made


def markdown(run: Run, findings: list[Finding], figures: list[tuple[str, Path]]) -> str:
    m = run.metadata
    lab = run.lab or {}
    lines = [
        f"# Report: {m.get('name', run.path.name)}",
        "",
        f"- Captured {m.get('started_at')} to {m.get('ended_at')} on {m.get('host')}, kernel {m.get('kernel')}, "
        f"bpftrace {m.get('bpftrace_version')}; complete: {m.get('complete')} ({m.get('stop_reason')}).",
        "- Probes: "
        + ", ".join(f"{k} ({v.get('tier')} tier, {v.get('status')})" for k, v in m.get("probes", {}).items()),
        "- Namespaces sampled: " + ", ".join(f"{n['label']} ({n['inode']})" for n in m.get("netns", [])),
    ]
    if lab:
        lines.append(f"- Lab: {lab.get('lab')} / {lab.get('variant')}: {lab.get('summary')}")
    lines += ["", "## Findings", ""]
    real = [f for f in findings if f.status != "absent"]
    if not real:
        lines.append("No finding: nothing in this run points at a hidden queue.")
    for f in real:
        w = f.window or {}
        lines += [
            f"### {headline(f)}",
            "",
            f"Window: {w.get('start_rel_s')} s to {w.get('end_rel_s')} s after capture start.",
            "",
        ]
        for name in CHAIN_ORDER:
            link = f.link(name)
            if link is not None:
                lines.append(f"1. **{name}** — {describe(f.kind, link)}")
        lines.append("")
    ruled = [f for f in findings if f.status == "absent"]
    if ruled:
        lines += ["## Ruled out", ""]
        for f in ruled:
            lines.append(f"- {headline(f)}: " + " ".join(describe(f.kind, link) for link in f.chain))
        lines.append("")
    if figures:
        lines += ["## Plots", ""]
        for title, p in figures:
            lines += [f"![{title}]({p.relative_to(run.path)})", ""]
    return "\n".join(lines)


def write_report(run_dir: str | Path) -> tuple[Path, list[Finding]]:
    run = Run.open(run_dir)
    run.validate_all()
    findings = evaluate_all(run)
    (run.path / "verdicts.json").write_text(json.dumps(verdicts(run, findings), indent=2, default=str) + "\n")
    figures = _plots_for(run, findings, run.path / "plots")
    report = run.path / "report.md"
    report.write_text(markdown(run, findings, figures) + "\n")
    return report, findings
