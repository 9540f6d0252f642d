"""Which plots a report draws, from the family registry (probes/families.conf).

A family's findings name the subjects of its plots: the finding itself, or for the
accept queue each listener it names. For every subject the report draws the plots
the family's `plots` key lists, each as PLOTS below says: its file in plots/, its
caption and the call of analysis/render/plots.py. Families are drawn in the
registry's order (the order evaluate_all returns findings in); the clients'
connect latency comes last, whatever was found.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from analysis.derived import socket_buffers as sbd
from analysis.families import FAMILIES
from analysis.findings import Finding
from analysis.load import Run
from analysis.render import plots

Save = Callable[[Figure, Path], Path]
Made = list[tuple[str, Path]]  # (caption, file), in the report's order
LISTEN_COUNTERS = ["ListenOverflows", "ListenDrops", "TCPReqQFullDoCookies"]


@dataclass(frozen=True)
class Plot:
    """One plot of the registry drawn for one subject."""

    file: Callable[[Any], str]
    caption: Callable[[Run, Any], str]
    draw: Callable[[Run, Any], Figure]
    once: bool = False  # True: drawn once per file, however many subjects share it


def _time_wait(run: Run, f: Finding) -> Figure:
    s = f.subject
    counter = f.link("counter")
    ports = counter.evidence.get("ports_in_range") if counter else None
    return plots.time_wait(run, s["netns"], s["raddr"], s["service_port"], ports)


def _event_loop_file(f: Finding) -> str:
    s = f.subject
    tid = s.get("tid")
    return f"event_loop_{s['pid']}" + (f"_{tid}" if tid is not None and tid != s["pid"] else "") + ".png"


def _socket_buffers(run: Run, f: Finding) -> Figure:
    s = f.subject
    sides = sbd.sides(run)
    if s.get("we_are") == "receiver":
        reader = sides[(s["netns"], s["raddr"], s["rport"], s["laddr"], s["lport"])]
        return plots.socket_buffers(run, reader, None)
    sender = sides[(s["netns"], s["laddr"], s["lport"], s["raddr"], s["rport"])]
    return plots.socket_buffers(run, sender, sbd.pair(sides, sender))


# Plot name (families.conf `plots`) -> how a report draws it. A listener is (netns, lport).
PLOTS: dict[str, Plot] = {
    "queue_depth": Plot(
        file=lambda lst: f"accept_queue_{lst[1]}_{lst[0]}.png",
        caption=lambda run, lst: f"Accept queue depth vs limit, port {lst[1]}",
        draw=lambda run, lst: plots.queue_depth(run, lst[0], lst[1]),
    ),
    "counter_deltas": Plot(
        file=lambda lst: f"listen_overflows_{lst[0]}.png",
        caption=lambda run, lst: f"Listen overflow counters in {run.netns_label(lst[0])}",
        draw=lambda run, lst: plots.counter_deltas(run, lst[0], LISTEN_COUNTERS),
    ),
    "retransmits": Plot(
        file=lambda f: f"retransmits_{f.subject['netns']}.png",
        caption=lambda run, f: f"Retransmits in {f.subject['netns_label']}",
        draw=lambda run, f: plots.retransmits(run, f.subject["netns"]),
        once=True,
    ),
    "time_wait": Plot(
        file=lambda f: "time_wait.png",
        caption=lambda run, f: f"TIME_WAIT toward {f.subject['raddr']}:{f.subject['service_port']}",
        draw=_time_wait,
    ),
    "event_loop": Plot(
        file=_event_loop_file,
        caption=lambda run, f: f"Event loop of {f.subject['comm']}",
        draw=lambda run, f: plots.event_loop(run, f.subject["pid"], f.subject.get("tid")),
    ),
    "socket_buffers": Plot(
        file=lambda f: f"socket_buffers_{f.subject['lport']}_{f.subject['rport']}_{f.subject['netns']}.png",
        caption=lambda run, f: (
            f"Socket buffers of the flow {f.subject['laddr']}:{f.subject['lport']} -> "
            f"{f.subject['raddr']}:{f.subject['rport']}"
        ),
        draw=_socket_buffers,
    ),
}


def listeners(run: Run, found: list[Finding]) -> list[tuple[int, int]]:
    """The listeners the accept-queue findings name; with none, the accept-overflow lab's server."""
    named = {(f.subject["netns"], f.subject["lport"]) for f in found if f.subject.get("lport") is not None}
    lab = run.lab or {}
    server = lab.get("server") or {}
    if not named and server.get("netns_inode") and lab.get("lab") == "accept-overflow":
        named = {(server["netns_inode"], server["port"])}
    return sorted(named)


# Family -> the subjects of its plots, from its findings; a family not here: the findings.
SUBJECTS: dict[str, Callable[[Run, list[Finding]], list[Any]]] = {"accept_queue": listeners}


def plots_for(run: Run, findings: list[Finding], out: Path, save: Save = plots.save) -> Made:
    """Draw the report's plots into out through save(); their captions and files, in order."""
    made: Made = []
    for fam in FAMILIES.values():
        found = [f for f in findings if f.kind == fam.finding and f.is_finding]
        for subject in SUBJECTS.get(fam.name, lambda run, found: found)(run, found):
            for name in fam.plots:
                _draw(run, PLOTS[name], subject, out, save, made)
    fig = plots.connect_latency(run)
    if fig is not None:
        made.append(("Client connect latency", save(fig, out / "connect_latency.png")))
    return made


def _draw(run: Run, plot: Plot, subject: Any, out: Path, save: Save, made: Made) -> None:
    name = plot.file(subject)
    if plot.once and any(p.name == name for _, p in made):
        return
    made.append((plot.caption(run, subject), save(plot.draw(run, subject), out / name)))
