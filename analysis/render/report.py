"""Turn a run directory into verdicts.json, report.md and PNG plots."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from analysis.findings import CHAIN_ORDER, Finding
from analysis.load.run import PLOT_MANIFEST, Run, RunDataError
from analysis.render import measurements, plots
from analysis.rules import RULES, evaluate_all
from analysis.wording import describe, headline

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
        "input_notes": list(run.notes),
        "rules": [{"kind": r.kind, "inputs": list(r.inputs)} for r in RULES],
        "findings": [f.to_dict() for f in findings if f.is_finding],
        "ruled_out": [f.to_dict() for f in findings if f.status == "absent"],
        "not_checked": [f.to_dict() for f in findings if f.status == "not_checked"],
        "measurements": measured,
    }


class _PlotWriter:
    """Saves figures under temporary names in plots/; commit() renames them into place."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.temps: dict[Path, Path] = {}

    def save(self, fig: Any, final: Path) -> Path:
        if final in self.temps:
            plots.plt.close(fig)
            return final
        fd, tmp = tempfile.mkstemp(prefix=f".{final.stem}.", suffix=".tmp.png", dir=self.out)
        os.close(fd)
        _default_mode(tmp)
        self.temps[final] = Path(tmp)
        plots.save(fig, Path(tmp))
        return final

    def discard(self) -> None:
        for tmp in self.temps.values():
            with contextlib.suppress(OSError):
                tmp.unlink()


def _plots_for(run: Run, findings: list[Finding], out: Path, pw: _PlotWriter | None = None) -> list[tuple[str, Path]]:
    made: list[tuple[str, Path]] = []
    save = pw.save if pw is not None else plots.save
    listeners = {
        (f.subject["netns"], f.subject["lport"])
        for f in findings
        if f.kind == "accept_queue_overflow" and f.subject.get("lport") is not None and f.is_finding
    }
    lab_server = (run.lab or {}).get("server") or {}
    if not listeners and lab_server.get("netns_inode") and (run.lab or {}).get("lab") == "accept-overflow":
        listeners = {(lab_server["netns_inode"], lab_server["port"])}
    for netns, lport in sorted(listeners):
        p = save(plots.queue_depth(run, netns, lport), out / f"accept_queue_{lport}_{netns}.png")
        made.append((f"Accept queue depth vs limit, port {lport}", p))
        p = save(
            plots.counter_deltas(run, netns, ["ListenOverflows", "ListenDrops", "TCPReqQFullDoCookies"]),
            out / f"listen_overflows_{netns}.png",
        )
        made.append((f"Listen overflow counters in {run.netns_label(netns)}", p))
    for f in findings:
        if not f.is_finding:
            continue
        s = f.subject
        if f.kind == "retransmit_storm":
            name = f"retransmits_{s['netns']}.png"
            if all(p.name != name for _, p in made):
                made.append(
                    (f"Retransmits in {s['netns_label']}", save(plots.retransmits(run, s["netns"]), out / name))
                )
        elif f.kind == "time_wait_exhaustion":
            ports = f.link("counter").evidence.get("ports_in_range") if f.link("counter") else None
            fig = plots.time_wait(run, s["netns"], s["raddr"], s["service_port"], ports)
            made.append((f"TIME_WAIT toward {s['raddr']}:{s['service_port']}", save(fig, out / "time_wait.png")))
        elif f.kind == "event_loop_saturation":
            tid = s.get("tid")
            fig = plots.event_loop(run, s["pid"], tid)
            name = f"event_loop_{s['pid']}" + (f"_{tid}" if tid is not None and tid != s["pid"] else "")
            made.append((f"Event loop of {s['comm']}", save(fig, out / f"{name}.png")))
    fig = plots.connect_latency(run)
    if fig is not None:
        made.append(("Client connect latency", save(fig, out / "connect_latency.png")))
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
            "that CPU): " + ", ".join(f"{k} {v}" for k, v in missed.items()) + ". Counts from those probes can "
            "be low by up to that many; fewer probes at once means fewer misses."
        )
    if lab:
        lines.append(f"- Lab: {lab.get('lab')} / {lab.get('variant')}: {lab.get('summary')}")
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
    if run.notes:
        lines += ["", "Input oddities (accepted; the data may have been damaged):"]
        lines += [f"- {n}" for n in run.notes]
    lines += ["", "## Findings", ""]
    real = [f for f in findings if f.is_finding]
    if not real:
        lines.append("No finding: nothing in this run points at a hidden queue.")
    for f in real:
        w = f.window or {}
        lines += [f"### {headline(f)}", ""]
        if w.get("start_rel_s") is not None and w.get("end_rel_s") is not None:
            lines += [f"Window: {w['start_rel_s']} s to {w['end_rel_s']} s after capture start.", ""]
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
    unchecked = [f for f in findings if f.status == "not_checked"]
    if unchecked:
        lines += ["## Not checked", "", "What this run could neither find nor rule out, and why:", ""]
        for f in unchecked:
            lines.append(f"- {headline(f)}: " + " ".join(describe(f.kind, link) for link in f.chain))
        lines.append("")
    lines += measurements.markdown(measured)
    if figures:
        lines += ["## Plots", ""]
        for title, p in figures:
            lines += [f"![{title}]({p.relative_to(run.path)})", ""]
    return "\n".join(lines)


def _check_target(p: Path) -> None:
    if (p.exists() or p.is_symlink()) and (p.is_symlink() or not p.is_file()):
        raise RunDataError(f"{p}: exists and is not a regular file; report will not replace it")


def _default_mode(path: str | Path) -> None:
    """mkstemp makes 0600 files; outputs get the mode a plain open() would give them."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def _temp_text(final: Path, text: str) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    _default_mode(tmp)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return Path(tmp)


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


def write_report(run_dir: str | Path) -> tuple[Path, list[Finding]]:
    """Analyse a run and write verdicts.json, report.md and plots/.

    Everything is computed and written to temporary files first; only then are
    they renamed into place (plots, verdicts.json, report.md), so a failure
    leaves the previous outputs as they were. In plots/ only the files listed
    in its manifest (written by an earlier report) are replaced or removed."""
    run = Run.open(run_dir)
    run.validate_all()
    findings = evaluate_all(run)
    measured = measurements.all_measurements(run)
    report = run.path / "report.md"
    verdicts_path = run.path / "verdicts.json"
    plot_dir = run.path / "plots"
    manifest = plot_dir / PLOT_MANIFEST
    for p in (report, verdicts_path):
        _check_target(p)
    if plot_dir.is_symlink() or (plot_dir.exists() and not plot_dir.is_dir()):
        raise RunDataError(f"{plot_dir}: exists and is not a folder; report writes its plots there")
    plot_dir.mkdir(exist_ok=True)
    _check_target(manifest)
    pw = _PlotWriter(plot_dir)
    temps: list[Path] = []
    try:
        figures = _plots_for(run, findings, plot_dir, pw)
        for final in pw.temps:
            _check_target(final)
        old = _old_manifest(plot_dir)
        new_names = sorted(p.name for p in pw.temps)
        temps.append(_temp_text(manifest, json.dumps(new_names) + "\n"))
        v_tmp = _temp_text(verdicts_path, json.dumps(verdicts(run, findings, measured), indent=2, default=str) + "\n")
        temps.append(v_tmp)
        r_tmp = _temp_text(report, markdown(run, findings, figures, measured) + "\n")
        temps.append(r_tmp)
        # Commit: plots first, then the two texts back to back.
        for final, tmp in pw.temps.items():
            os.replace(tmp, final)
        os.replace(temps[0], manifest)
        os.replace(v_tmp, verdicts_path)
        os.replace(r_tmp, report)
    finally:
        pw.discard()
        for tmp in temps:
            with contextlib.suppress(OSError):
                tmp.unlink()
    for name in set(old) - set(new_names):  # stale plots this report wrote before
        with contextlib.suppress(FileNotFoundError):
            (plot_dir / name).unlink()
    return report, findings
