"""Command line: python -m analysis {report,validate,compare,sweep,fleet,runtimes,schema-doc} ..."""

from __future__ import annotations

import signal
import sys


def _interrupted(signum: int, frame: object) -> None:
    # Ctrl-C at any moment (imports included) ends with a word, not a traceback.
    # SystemExit still runs the report's clean-up of its temporary files, and
    # outputs are renamed into place only once all of them are written.
    print("interrupted", file=sys.stderr)
    raise SystemExit(130)


# Only as the program (python -m analysis): a test importing main() keeps its own Ctrl-C.
if __name__ == "__main__" and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _interrupted)

import argparse  # noqa: E402

from analysis.load import Run, RunDataError  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m analysis", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("report", help="write verdicts.json, report.md and plots/ into a run directory")
    r.add_argument("run", nargs="?", default="runs/latest", help="run directory (default runs/latest)")
    v = sub.add_parser("validate", help="check every CSV of a run against the data contract")
    v.add_argument("run", nargs="?", default="runs/latest")
    c = sub.add_parser("compare", help="analyse a comparison directory written by scripts/compare")
    c.add_argument("dir")
    w = sub.add_parser("sweep", help="analyse a sweep directory written by scripts/sweep")
    w.add_argument("dir")
    fl = sub.add_parser("fleet", help="one report over a fleet capture (DIR/<host>/ runs): fleet.md, fleet.json")
    fl.add_argument("dir")
    rt = sub.add_parser("runtimes", help="docs/runtimes.md from a runtimes lab run (make runtimes-doc)")
    rt.add_argument("run", help="a run of the runtimes lab's defaults variant")
    rt.add_argument("--limits", help="a run of its limits variant: what each server does past its own limit")
    rt.add_argument("--out", default="docs/runtimes.md", help="where the document goes (default docs/runtimes.md)")
    sub.add_parser("schema-doc", help="print docs/data-contract.md (generated from analysis/contract/)")
    return p


def _report(args: argparse.Namespace) -> None:
    from analysis.render.report import write_report

    from .wording import headline

    report, findings = write_report(args.run)
    real = [f for f in findings if f.is_finding]
    for f in real:
        print(headline(f))
    unchecked = sum(f.status == "not_checked" for f in findings)
    if not real:
        print("no finding" + (f"; {unchecked} object(s) not checked (report.md says why)" if unchecked else ""))
    print(f"report: {report}")


def _validate(args: argparse.Namespace) -> None:
    # What report loads and checks before it analyses, nothing less.
    from analysis.render.outputs import check_outputs

    run = Run.open(args.run)
    counts = run.validate_all()
    check_outputs(run.path)
    for name, n in counts.items():
        why = run.missing.get(name)
        print(f"{name}: {n} rows ok" + (f" (file missing: {why})" if why else ""))
    if not run.complete:
        print(f"run incomplete: stop_reason {run.metadata.get('stop_reason')}")
    for note in run.notes:
        print(f"note: {note}")
    for warning in run.warnings:
        print(f"warning: {warning}")


def _compare(args: argparse.Namespace) -> None:
    from analysis.render.compare import write

    from .wording import compare_verdict_line

    md, v = write(args.dir)
    print(compare_verdict_line(v))
    print(f"comparison: {md}")


def _sweep(args: argparse.Namespace) -> None:
    from analysis.render.sweep import write as write_sweep

    md, df = write_sweep(args.dir)
    print(df.to_string(index=False))
    print(f"sweep: {md}")


def _fleet(args: argparse.Namespace) -> None:
    from analysis.combiners.fleet import CAPTURE_FAILED
    from analysis.render.fleet import write as write_fleet

    md, hosts = write_fleet(args.dir)
    for h in hosts:
        if h.error:
            print(f"{h.name}: {CAPTURE_FAILED}: {h.error}")
        else:
            found = sorted({f"{f.kind} ({f.status})" for f in h.real})
            print(f"{h.name}: " + (", ".join(found) if found else "no finding"))
    print(f"fleet: {md}")


def _runtimes(args: argparse.Namespace) -> None:
    from analysis.render.runtimes import write as write_runtimes

    print(f"runtimes: {write_runtimes(args.run, args.out, args.limits)}")


def _schema_doc(args: argparse.Namespace) -> None:
    from analysis.contract import schema_doc

    print(schema_doc())


COMMANDS = {
    "report": _report,
    "validate": _validate,
    "compare": _compare,
    "sweep": _sweep,
    "fleet": _fleet,
    "runtimes": _runtimes,
    "schema-doc": _schema_doc,
}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        COMMANDS[args.cmd](args)
    except RunDataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # e.g. a run directory that cannot be written into
        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
