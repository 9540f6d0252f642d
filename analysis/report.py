"""Turn a run directory into verdicts.json, report.md and PNG plots."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from . import measurements, plots
from .findings import CHAIN_ORDER, Finding
from .rules import RULES, evaluate_all
from .run import Run
from .wording import describe, headline

VERDICTS_SCHEMA_VERSION = 1


def verdicts(run: Run, findings: list[Finding], measured: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema_version": VERDICTS_SCHEMA_VERSION,
        "run": run.metadata.get("name", run.path.name),
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "run_complete": bool(run.metadata.get("complete")),
        "rules": [{"kind": r.kind, "inputs": list(r.inputs)} for r in RULES],
        "findings": [f.to_dict() for f in findings if f.status != "absent"],
        "ruled_out": [f.to_dict() for f in findings if f.status == "absent"],
        "measurements": measured,
    }


def _plots_for(run: Run, findings: list[Finding], out: Path) -> list[tuple[str, Path]]:
    made: list[tuple[str, Path]] = []
    listeners = {
        (f.subject["netns"], f.subject["lport"])
        for f in findings
        if f.kind == "accept_queue_overflow" and f.subject.get("lport") is not None and f.status != "absent"
    }
    lab_server = (run.lab or {}).get("server") or {}
    if not listeners and lab_server.get("netns_inode") and (run.lab or {}).get("lab") == "accept-overflow":
        listeners = {(lab_server["netns_inode"], lab_server["port"])}
    for netns, lport in sorted(listeners):
        p = plots.save(plots.queue_depth(run, netns, lport), out / f"accept_queue_{lport}_{netns}.png")
        made.append((f"Accept queue depth vs limit, port {lport}", p))
        p = plots.save(
            plots.counter_deltas(run, netns, ["ListenOverflows", "ListenDrops", "TCPReqQFullDoCookies"]),
            out / f"listen_overflows_{netns}.png",
        )
        made.append((f"Listen overflow counters in {run.netns_label(netns)}", p))
    for f in findings:
        if f.status == "absent":
            continue
        s = f.subject
        if f.kind == "retransmit_storm":
            name = f"retransmits_{s['netns']}.png"
            if not (out / name).exists():
                made.append(
                    (f"Retransmits in {s['netns_label']}", plots.save(plots.retransmits(run, s["netns"]), out / name))
                )
        elif f.kind == "time_wait_exhaustion":
            ports = f.link("counter").evidence.get("ports_in_range") if f.link("counter") else None
            fig = plots.time_wait(run, s["netns"], s["raddr"], s["service_port"], ports)
            made.append((f"TIME_WAIT toward {s['raddr']}:{s['service_port']}", plots.save(fig, out / "time_wait.png")))
        elif f.kind == "event_loop_saturation":
            fig = plots.event_loop(run, s["pid"])
            made.append((f"Event loop of {s['comm']}", plots.save(fig, out / f"event_loop_{s['pid']}.png")))
    fig = plots.connect_latency(run)
    if fig is not None:
        made.append(("Client connect latency", plots.save(fig, out / "connect_latency.png")))
    return made


def markdown(run: Run, findings: list[Finding], figures: list[tuple[str, Path]], measured: dict[str, Any]) -> str:
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
    missed = {k: v.get("recursion_misses") for k, v in m.get("probes", {}).items() if v.get("recursion_misses")}
    if missed:
        lines.append(
            "- Events the kernel did not run a probe for (recursion misses: another BPF program was running on "
            "that CPU): " + ", ".join(f"{k} {v}" for k, v in missed.items()) + ". Counts from those probes can "
            "be low by up to that many; fewer probes at once means fewer misses."
        )
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
    lines += measurements.markdown(measured)
    if figures:
        lines += ["## Plots", ""]
        for title, p in figures:
            lines += [f"![{title}]({p.relative_to(run.path)})", ""]
    return "\n".join(lines)


def write_report(run_dir: str | Path) -> tuple[Path, list[Finding]]:
    run = Run.open(run_dir)
    run.validate_all()
    findings = evaluate_all(run)
    measured = measurements.all_measurements(run)
    (run.path / "verdicts.json").write_text(json.dumps(verdicts(run, findings, measured), indent=2, default=str) + "\n")
    plot_dir = run.path / "plots"
    if plot_dir.is_dir():  # plots are derived: a rerun replaces them all
        shutil.rmtree(plot_dir)
    figures = _plots_for(run, findings, plot_dir)
    report = run.path / "report.md"
    report.write_text(markdown(run, findings, figures, measured) + "\n")
    return report, findings
