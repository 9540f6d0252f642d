"""The Measurements section of report.md: the numbers of analysis/derived/measurements.py as tables."""

from __future__ import annotations

from typing import Any

from analysis.render import markdown as md
from analysis.wording import is_missing, number

# Computed in analysis/derived/measurements.py; named here too for callers not yet moved there.
__all__ = ["markdown"]


def _cell(v: Any) -> str:
    """A table cell in words: a missing value says so."""
    return "not measured" if is_missing(v) else number(v)


def markdown(m: dict[str, Any]) -> list[str]:
    """## Measurements: one table per measurement, and what the epoll sweep shows (nothing if none)."""
    if not m:
        return []
    lines = md.heading("Measurements")
    for name, rows in m.items():
        if rows and isinstance(rows, list):
            lines += [*md.heading(name.replace("_", " "), 3), *md.records_table(rows, _cell), ""]
        if name == "time_wait" and "time_wait_endpoints_held" in m:
            lines += [
                f"The {len(rows)} endpoints with the highest TIME_WAIT peaks of the "
                f"{number(m['time_wait_endpoints_held'])} that held TIME_WAIT.",
                "",
            ]
    if "epoll_sweep" in m:
        lines += _epoll_sweep(m["epoll_sweep"])
    return lines


def _epoll_sweep(sweep: list[dict[str, Any]]) -> list[str]:
    """The epoll lab's sentence: cost per poll from the fewest to the most idle connections."""
    rows = [r for r in sweep if not is_missing(r.get("ns_per_nonblocking_poll"))]
    rows = [r for r in rows if r["ns_per_nonblocking_poll"]]
    epc = [r["events_per_call"] for r in sweep if not is_missing(r.get("events_per_call"))]
    if len(rows) < 2:
        return []
    first, last = rows[0], rows[-1]
    c0, c1 = first["ns_per_nonblocking_poll"], last["ns_per_nonblocking_poll"]
    calls = f", while events per call stayed {number(min(epc))}-{number(max(epc))}" if epc else ""
    return [
        f"epoll cost per non-blocking poll: {number(c0)} ns with {number(first['idle_conns'])} idle registered "
        f"connections, {number(c1)} ns with {number(last['idle_conns'])} ({c1 / c0:.2f}x for "
        f"{last['idle_conns'] / max(1, first['idle_conns']):.0f}x the fds){calls}: the cost does not grow "
        "with registered fds (no linear scan).",
        "",
    ]
