"""One report over a fleet capture: DIR/<host>/ holds the run scripts/fleet fetched from each host.

Each host's run is opened, checked and judged exactly as `python -m analysis report` does
(Run.open, validate_all, the rules of analysis/rules); nothing is written into the host
folders. DIR/fleet.md and DIR/fleet.json hold a table of hosts x families (each cell: the
family's strongest status on that host and the objects it names) and the findings that two
or more hosts share (same kind and cause class). A host whose run is missing or broken is
reported as "capture failed" with the reason; the others are still judged.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.families import FAMILY_OF_FINDING
from analysis.findings import Finding
from analysis.load.run import Run, RunDataError
from analysis.rules import RULES, evaluate_all
from analysis.wording import CAUSE_NAMES, TITLES, _where

FLEET_SCHEMA_VERSION = 1
# Written by fleet/capture.yml: every host the play targeted, one a line (hosts that never
# answered have no folder, and must still be reported).
HOSTS_FILE = "hosts.txt"
# What the playbook keeps of the capture's own output on the target, beside the run.
CAPTURE_LOG = "fleet-capture.log"
# Rule kind -> the probe family whose data decides it (a family not run: not checked).
FAMILY_OF_KIND = FAMILY_OF_FINDING
KINDS: tuple[str, ...] = tuple(r.kind for r in RULES)
# Strongest first: a host's cell shows the strongest status any object of that kind got.
STATUS_ORDER = ("confirmed", "suspected", "absent", "not_checked")
CAPTURE_FAILED = "capture failed"


@dataclass
class Cell:
    status: str
    objects: list[str] = field(default_factory=list)
    cause_classes: list[str] = field(default_factory=list)
    note: str = ""


@dataclass
class Host:
    name: str
    error: str | None = None
    run: str | None = None
    complete: bool | None = None
    stop_reason: str | None = None
    scope: str | None = None
    cells: dict[str, Cell] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    @property
    def real(self) -> list[Finding]:
        return [f for f in self.findings if f.is_finding]


def object_name(f: Finding) -> str:
    """The object a finding names, short: a listener, an endpoint or flow, a thread."""
    s = f.subject
    if f.kind == "event_loop_saturation":
        ports = ",".join(str(p) for p in s.get("listen_ports") or [])
        who = s.get("comm") or "a thread"
        return (
            f"{who} (pid {s.get('pid')}"
            + (f", tid {s.get('tid')}" if s.get("tid") != s.get("pid") else "")
            + (f", port {ports})" if ports else ")")
        )
    where = _where(s)
    if f.kind == "accept_queue_overflow" and s.get("lport") is None:
        where = f"namespace {s.get('netns_label')}: no single listener"
    elif s.get("comm"):
        where += f" ({s['comm']})"
    return where


def _cell(run: Run, kind: str, findings: list[Finding]) -> Cell:
    mine = [f for f in findings if f.kind == kind]
    family = FAMILY_OF_KIND.get(kind)
    probe = (run.metadata.get("probes") or {}).get(family or "", {}).get("status")
    if not mine:
        if probe == "ok":
            return Cell("absent", note="nothing seen")
        return Cell("not_checked", note=f"probe {family} {probe}" if probe else f"probe {family} not run")
    best = min(mine, key=lambda f: STATUS_ORDER.index(f.status)).status
    top = [f for f in mine if f.status == best]
    cell = Cell(best)
    if best in ("confirmed", "suspected"):
        cell.objects = [object_name(f) for f in top]
        cell.cause_classes = sorted({f.cause_class for f in top if f.cause_class})
    elif best == "absent":
        cell.note = f"{len(top)} ruled out"
    else:
        cell.note = f"{len(top)} not checked"
    return cell


def judge(name: str, path: Path) -> Host:
    """One host's run judged like `analysis report` does; a broken or missing run is a failed capture."""
    host = Host(name)
    if not (path / "metadata.json").exists() and not (path / "metadata.json").is_symlink():
        said = _capture_said(path)
        host.error = (
            f"no run came back; the capture said: {said}"
            if said
            else "no run fetched (the host did not answer, or the playbook stopped before the capture: see its output)"
        )
        return host
    try:
        run = Run.open(path)
        run.validate_all()
        host.findings = evaluate_all(run)
    except (RunDataError, OSError) as e:
        host.error = _reason(path, e)
        return host
    m = run.metadata
    host.run, host.complete, host.stop_reason, host.scope = m.get("name"), run.complete, m.get("stop_reason"), run.scope
    host.cells = {k: _cell(run, k, host.findings) for k in KINDS}
    return host


def _reason(path: Path, e: Exception) -> str:
    if isinstance(e, OSError) and e.strerror:
        return f"{e.filename or path}: {e.strerror}"
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def _capture_said(path: Path) -> str:
    """The last lines of what collector/capture printed on the host (fleet-capture.log), if kept."""
    try:
        lines = [x for x in (path / CAPTURE_LOG).read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return " / ".join(lines[-3:])


def host_names(fleet_dir: Path) -> list[str]:
    """Every host of the fleet: the folders fetched, and those the playbook targeted (hosts.txt)."""
    names = {p.name for p in fleet_dir.iterdir() if p.is_dir() and not p.name.startswith(".")}
    listed = fleet_dir / HOSTS_FILE
    if listed.is_file():
        names |= {x.strip() for x in listed.read_text(errors="replace").splitlines() if x.strip()}
    return sorted(names)


def shared(hosts: list[Host]) -> list[dict[str, Any]]:
    """Findings of the same kind and cause class on two hosts or more."""
    groups: dict[tuple[str, str], dict[str, list[str]]] = {}
    for h in hosts:
        for f in h.real:
            groups.setdefault((f.kind, f.cause_class or "unclassified"), {}).setdefault(h.name, []).append(
                object_name(f)
            )
    return [
        {"kind": k, "cause_class": c, "hosts": sorted(by_host), "objects": by_host}
        for (k, c), by_host in sorted(groups.items())
        if len(by_host) >= 2
    ]


def _cell_text(c: Cell) -> str:
    text = f"**{c.status.replace('_', ' ')}**"
    if c.cause_classes:
        text += " (" + ", ".join(c.cause_classes) + ")"
    if c.objects:
        text += ": " + "; ".join(c.objects)
    elif c.note:
        text += f": {c.note}"
    return text.replace("|", "\\|")


def markdown(fleet_dir: Path, hosts: list[Host], common: list[dict[str, Any]]) -> str:
    failed = [h for h in hosts if h.error]
    faulty = [h for h in hosts if not h.error and h.real]
    lines = [
        f"# Fleet report: {fleet_dir.name}",
        "",
        f"- {len(hosts)} hosts: {len(hosts) - len(failed)} captured, {len(failed)} capture failed.",
        "- Hosts with a finding: " + (", ".join(h.name for h in faulty) if faulty else "none") + ".",
        "- Each cell: the strongest status of that family on the host (confirmed > suspected > absent > not "
        "checked), its cause class, and the objects it names. Each host's own evidence chains: "
        "`<host>/report.md` (`python -m analysis report DIR/<host>`).",
        "",
        "| host | " + " | ".join(TITLES.get(k, k) for k in KINDS) + " |",
        "|---|" + "---|" * len(KINDS),
    ]
    for h in hosts:
        if h.error:
            lines.append(f"| {h.name} | " + " | ".join([CAPTURE_FAILED] * len(KINDS)) + " |")
        else:
            name = h.name + ("" if h.complete else f" (incomplete: {h.stop_reason})")
            lines.append(f"| {name} | " + " | ".join(_cell_text(h.cells[k]) for k in KINDS) + " |")
    lines += ["", "## Hosts sharing a finding", ""]
    if not common:
        lines.append("None: no finding of the same kind and cause class on two hosts or more.")
    for g in common:
        cause = CAUSE_NAMES.get(g["cause_class"], g["cause_class"])
        lines.append(f"- {TITLES.get(g['kind'], g['kind'])}, {cause}: {', '.join(g['hosts'])}")
        for name in g["hosts"]:
            lines.append(f"  - {name}: " + "; ".join(g["objects"][name]))
    if failed:
        lines += ["", "## Capture failed", ""]
        lines += [f"- {h.name}: {h.error}" for h in failed]
    sampled = [h.name for h in hosts if h.scope == "sampled"]
    if sampled:
        lines += [
            "",
            "Scope: " + ", ".join(sampled) + " captured with `--scope sampled` (hosts sharing one kernel): each "
            "host is judged on its own namespaces only, although its probes saw every namespace of the kernel.",
        ]
    return "\n".join(lines) + "\n"


def to_json(fleet_dir: Path, hosts: list[Host], common: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "schema_version": FLEET_SCHEMA_VERSION,
        "fleet": fleet_dir.name,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "kinds": list(KINDS),
        "hosts": {
            h.name: {
                "status": CAPTURE_FAILED if h.error else "captured",
                "error": h.error,
                "run": h.run,
                "complete": h.complete,
                "stop_reason": h.stop_reason,
                "scope": h.scope,
                "cells": {k: vars(c) for k, c in h.cells.items()},
                "findings": [f.to_dict() for f in h.real],
            }
            for h in hosts
        },
        "hosts_with_findings": [h.name for h in hosts if not h.error and h.real],
        "shared": common,
    }


def _write(final: Path, text: str) -> None:
    if final.is_symlink() or (final.exists() and not final.is_file()):
        raise RunDataError(f"{final}: exists and is not a regular file; fleet will not replace it")
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, final)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def write(fleet_dir: str | Path) -> tuple[Path, list[Host]]:
    """Judge every host under fleet_dir; write fleet.md and fleet.json there."""
    d = Path(fleet_dir)
    if not d.is_dir():
        raise RunDataError(f"{d}: not a fleet directory (no such folder)")
    names = host_names(d)
    if not names:
        raise RunDataError(
            f"{d}: no host runs (expected one folder per host, <host>/metadata.json, as scripts/fleet fetches them)"
        )
    hosts = [judge(n, d / n) for n in names]
    common = shared(hosts)
    _write(d / "fleet.json", json.dumps(to_json(d, hosts, common), indent=2, default=str) + "\n")
    md = d / "fleet.md"
    _write(md, markdown(d, hosts, common))
    return md, hosts
