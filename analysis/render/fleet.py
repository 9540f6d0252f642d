"""The fleet report: DIR/fleet.md and DIR/fleet.json over a fleet capture.

analysis/combiners/fleet.py judges every host's run; this module writes a table of
hosts x families (each cell: the family's strongest status on that host and the
objects it names) and the findings that two or more hosts share (same kind and
cause class). A host whose run is missing or broken is reported as "capture failed"
with the reason. Nothing is written into the host folders.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from analysis.combiners.fleet import CAPTURE_FAILED, KINDS, Cell, Host, judge_fleet, shared
from analysis.render import markdown as md
from analysis.render.atomic import write_text
from analysis.render.outputs import check_outputs
from analysis.wording import CAUSE_NAMES, TITLES

FLEET_SCHEMA_VERSION = 1


def _cell_text(c: Cell) -> str:
    text = md.bold(c.status.replace("_", " "))
    if c.cause_classes:
        text += " (" + ", ".join(c.cause_classes) + ")"
    if c.objects:
        text += ": " + "; ".join(c.objects)
    elif c.note:
        text += f": {c.note}"
    return md.escape(text)


def _host_table(hosts: list[Host]) -> list[str]:
    """One row per host, one column per finding kind."""
    rows = []
    for h in hosts:
        if h.error:
            rows.append([h.name, *[CAPTURE_FAILED] * len(KINDS)])
        else:
            name = h.name + ("" if h.complete else f" (incomplete: {h.stop_reason})")
            rows.append([name, *(_cell_text(h.cells[k]) for k in KINDS)])
    return md.table(["host", *(TITLES.get(k, k) for k in KINDS)], rows)


def _shared_lines(common: list[dict[str, Any]]) -> list[str]:
    lines = md.heading("Hosts sharing a finding")
    if not common:
        lines.append("None: no finding of the same kind and cause class on two hosts or more.")
    for g in common:
        cause = CAUSE_NAMES.get(g["cause_class"], g["cause_class"])
        lines += md.bullets([f"{TITLES.get(g['kind'], g['kind'])}, {cause}: {', '.join(g['hosts'])}"])
        lines += md.bullets((f"{name}: " + "; ".join(g["objects"][name]) for name in g["hosts"]), indent=2)
    return lines


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
        *_host_table(hosts),
        "",
        *_shared_lines(common),
    ]
    if failed:
        lines += ["", *md.heading("Capture failed"), *md.bullets(f"{h.name}: {h.error}" for h in failed)]
    sampled = [h.name for h in hosts if h.scope == "sampled"]
    if sampled:
        lines += [
            "",
            "Scope: " + ", ".join(sampled) + " captured with `--scope sampled` (hosts sharing one kernel): each "
            "host is judged on its own namespaces only, although its probes saw every namespace of the kernel.",
        ]
    return md.document(lines) + "\n"


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


def write(fleet_dir: str | Path) -> tuple[Path, list[Host]]:
    """Judge every host under fleet_dir; write fleet.md and fleet.json there."""
    d = Path(fleet_dir)
    hosts = judge_fleet(d, check_outputs)
    common = shared(hosts)
    write_text(d / "fleet.json", json.dumps(to_json(d, hosts, common), indent=2, default=str) + "\n", "fleet")
    report = d / "fleet.md"
    write_text(report, markdown(d, hosts, common), "fleet")
    return report, hosts
