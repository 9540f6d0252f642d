"""After the answer: what was injected, the evidence chain the trainer's own capture of the
incident gives for it (symptom -> counter -> probe -> cause -> fix -> verification, in the
report's words), the commands that find it fastest, and the seed-post myths that lead astray."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from analysis.findings import Finding, Link
from analysis.wording import describe, headline
from training.grade import FAMILY_OF_KIND, normalise, object_of_finding
from training.hints import FASTEST, MYTHS
from training.incidents import Incident


def findings_of(run: Path) -> list[dict[str, Any]]:
    """The findings (confirmed or suspected) of the trainer's capture, from its verdicts.json."""
    path = run / "verdicts.json"
    try:
        return json.loads(path.read_text())["findings"]
    except OSError as e:
        raise SystemExit(f"error: {path}: {e.strerror} (the incident's capture has no report yet)") from None


def matching(incident: Incident, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The findings that name the injected fault's object in its family."""
    want = normalise(incident.key["object"])
    return [f for f in found if FAMILY_OF_KIND.get(f["kind"]) == incident.family and object_of_finding(f) == want]


def _finding(d: dict[str, Any]) -> Finding:
    chain = [Link(x["link"], x["key"], x.get("evidence") or {}) for x in d.get("chain", [])]
    return Finding(d["kind"], d["status"], d["subject"], d.get("window"), d.get("cause_class"), chain)


def debrief(incident: Incident, run: Path) -> str:
    key = incident.key
    # The load's length is the runner's (scripts/train --minutes), not the drawn one.
    env = {k: v for k, v in incident.lab_env.items() if k != "LOAD_SECONDS"}
    lines = [f"Injected: {key['family']} on {key['object'] or 'nothing'} (cause {key['cause']}); "
             f"lab busy-host {incident.variant}, {json.dumps(env)}", ""]  # fmt: skip
    found = [f for f in findings_of(run) if f.get("status") in ("confirmed", "suspected")]
    if incident.family is None:
        if found:
            lines.append(f"The capture reported {len(found)} finding(s) on a healthy host: see {run}/report.md.")
        else:
            lines.append("The capture found nothing: every family was checked and ruled out.")
    else:
        mine = matching(incident, found)
        if not mine:
            lines.append(f"The capture has no finding on {key['object']}: see {run}/report.md.")
        for d in mine[:1]:
            f = _finding(d)
            lines += [headline(f), *(f"  {link.link}: {describe(f.kind, link)}" for link in f.chain)]
    family = key["family"]
    lines += ["", "Fastest to find it:", *(f"  {c}" for c in FASTEST[family])]
    lines += ["", "Myths that lead astray here (docs/claims.md):", *(f"  {m}" for m in MYTHS[family])]
    return "\n".join(lines)
