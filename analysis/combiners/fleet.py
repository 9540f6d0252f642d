"""One judgement over a fleet capture: DIR/<host>/ holds the run scripts/fleet fetched from each host.

Each host's run is opened, checked and judged exactly as `python -m analysis report` does
(Run.open, validate_all, the rules of analysis/rules); nothing is written into the host
folders. Per host and finding kind, a Cell: the family's strongest status on that host and
the objects it names; across hosts, the findings that two or more share (same kind and
cause class). A host whose run is missing or broken is a "capture failed" with the reason;
the others are still judged. analysis/render/fleet.py writes fleet.md and fleet.json.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.families import FAMILY_OF_FINDING, OBJECT_OF_FINDING
from analysis.findings import Finding, object_name
from analysis.load import Run, RunDataError
from analysis.rules import RULES, evaluate_all
from analysis.wording import where
from analysis.wording.owners import owner_first

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


def shown(f: Finding) -> str:
    """The object a finding names (analysis/findings.py object_name), its owner first, with
    what tells it apart on the host: a thread's pid and ports, a process, our side of a flow."""
    s = f.subject
    kind = OBJECT_OF_FINDING.get(f.kind)
    name = object_name(f.kind, s)
    if name is None:
        no_listener = kind == "listener" and s.get("lport") is None
        return owner_first(s, f"namespace {s.get('netns_label')}: no single listener" if no_listener else where(s))
    if kind == "thread":
        ports = ",".join(str(p) for p in s.get("listen_ports") or [])
        tid = f", tid {s.get('tid')}" if s.get("tid") != s.get("pid") else ""
        return owner_first(s, f"{name} (pid {s.get('pid')}{tid}" + (f", port {ports})" if ports else ")"))
    if s.get("dual_stack") is True:
        name += " (dual-stack: IPv4 clients too)"
    if s.get("we_are"):
        name += f" (we are the {s['we_are']})"
    if s.get("comm"):
        name += f" ({s['comm']})"
    return owner_first(s, name)


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
        cell.objects = [shown(f) for f in top]
        cell.cause_classes = sorted({f.cause_class for f in top if f.cause_class})
    elif best == "absent":
        cell.note = f"{len(top)} ruled out"
    else:
        cell.note = f"{len(top)} not checked"
    return cell


# What `report` checks before it writes into a run directory (analysis/render/outputs.py,
# passed in by the fleet report so that this layer does not reach up into render).
OutputsCheck = Callable[[Path], None]


def _no_check(run_dir: Path) -> None:
    return None


def judge(name: str, path: Path, check_outputs: OutputsCheck = _no_check) -> Host:
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
        check_outputs(run.path)
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
            groups.setdefault((f.kind, f.cause_class or "unclassified"), {}).setdefault(h.name, []).append(shown(f))
    return [
        {"kind": k, "cause_class": c, "hosts": sorted(by_host), "objects": by_host}
        for (k, c), by_host in sorted(groups.items())
        if len(by_host) >= 2
    ]


def judge_fleet(fleet_dir: Path, check_outputs: OutputsCheck = _no_check) -> list[Host]:
    """Every host of a fleet directory judged (host_names order)."""
    if not fleet_dir.is_dir():
        raise RunDataError(f"{fleet_dir}: not a fleet directory (no such folder)")
    names = host_names(fleet_dir)
    if not names:
        raise RunDataError(
            f"{fleet_dir}: no host runs (expected one folder per host, <host>/metadata.json, as scripts/fleet "
            "fetches them)"
        )
    return [judge(n, fleet_dir / n, check_outputs) for n in names]
