"""The command line: options, --metrics-doc, and main()."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .metrics import metrics_doc
from .privilege import check
from .run import Exporter
from .supervise import log

DESCRIPTION = "Exporter mode: the probes kept running, their numbers written as node_exporter textfiles."


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python3 -m monitor.exporter", description=DESCRIPTION)
    p.add_argument("--prom-dir", required=True, help="node_exporter textfile collector directory")
    p.add_argument("--state-dir", required=True, help="probe stderr files and the ready marker")
    p.add_argument("--probe", action="append", default=[], metavar="FAMILY=FILE:TIER", help="a probe to run (repeat)")
    p.add_argument("--pack-root", default=str(Path(__file__).resolve().parents[2]), help="where probes/ is")
    p.add_argument("--interval", type=int, default=5, help="probe interval and write period, seconds")
    p.add_argument("--top", type=int, default=20, help="objects per family with their own series")
    p.add_argument("--ttl", type=float, default=600, help="drop an object idle this long, seconds")
    p.add_argument("--segment", type=float, default=3600, help="restart each probe this often, seconds (0 = never)")
    p.add_argument("--socket-scan", type=float, default=10, help="read the socket tables this often, seconds")
    p.add_argument(
        "--min-ports",
        type=int,
        default=100,
        help="a destination gets a series from the socket scan alone when it holds this many ports",
    )
    p.add_argument("--duration", type=float, default=0, help="stop after this long, seconds (0 = run until a signal)")
    p.add_argument("--keep-files", action="store_true", help="leave the .prom files at exit")
    p.add_argument("--one-process", action="store_true", help="run every --probe in one bpftrace (probe-bundle)")
    a = p.parse_args(argv)
    if a.interval < 1 or a.top < 1:
        p.error("--interval and --top must be at least 1")
    return a


def privileges_ok(probes: bool) -> bool:
    """Every capability the tier needs, or an error naming each one missing (and a warning
    for one it only wants): nothing starts that would write empty metrics."""
    errors, warnings = check(probes)
    for w in warnings:
        log(f"warning: {w}")
    for e in errors:
        log(f"error: {e}")
    return not errors


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if args == ["--metrics-doc"]:
        sys.stdout.write(metrics_doc())
        return 0
    if args[:1] == ["--check-privileges"] and args[1:] in (["sampled"], ["probes"]):
        # scripts/monitor asks before collector/doctor, whose trial attaches would fail as
        # "this kernel cannot trace" without the capabilities.
        return 0 if privileges_ok(args[1:] == ["probes"]) else 2
    a = parse_args(argv)
    if not privileges_ok(bool(a.probe)):
        return 2
    return Exporter(a).run()
