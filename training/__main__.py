"""Command line: python -m training {page,key,grade,distribution} ...

page SEED                 what the trainee is told: the page and how long the incident runs
key SEED                  the trainer's view: the incident as JSON (lab variant and
                          environment, the answer key, the healthy neighbours)
grade SEED ANSWER.json    the answer graded against SEED's injected fault (docs/training.md)
      [--hints N] [--minutes M]
distribution [N] [--ip-version]
                          how seeds 0..N-1 spread over the families (default 100), and
                          with --ip-version over IPv4 and IPv6 too
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from analysis.render import markdown as md
from training import session
from training.debrief import debrief
from training.grade import AnswerError, grade
from training.hints import HINTS
from training.incidents import distribution, draw


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m training", description="Training mode: incidents and grades.")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("page", help="the page a trainee gets for SEED").add_argument("seed", type=int)
    sub.add_parser("key", help="the trainer's view of SEED's incident (JSON)").add_argument("seed", type=int)
    sub.add_parser("lab", help="SEED's lab variant, then its environment as KEY=VALUE").add_argument("seed", type=int)
    h = sub.add_parser("hint", help="hint LEVEL (1: family, 2: counter, 3: probe) of SEED's incident")
    h.add_argument("seed", type=int)
    h.add_argument("level", type=int, choices=(1, 2, 3))
    g = sub.add_parser("grade", help="grade ANSWER (a JSON file) against SEED's injected fault")
    g.add_argument("seed", type=int)
    g.add_argument("answer", type=Path)
    g.add_argument("--hints", type=int, default=0, help="hint levels used (0-3)")
    g.add_argument("--minutes", type=float, default=0.0, help="minutes from the page to the answer")
    g.add_argument("--log", type=Path, help="append the graded answer to this JSON-lines session log")
    g.add_argument("--trainee", default="anonymous", help="the trainee's name in the log")
    b = sub.add_parser("debrief", help="SEED's evidence chain from the trainer's capture RUN")
    b.add_argument("seed", type=int)
    b.add_argument("run", type=Path)
    r = sub.add_parser("report", help="a group's results from a session log")
    r.add_argument("log", type=Path)
    r.add_argument("--plot", type=Path, help="write the plot here (PNG)")
    d = sub.add_parser("distribution", help="how seeds 0..N-1 spread over the families")
    d.add_argument("n", type=int, nargs="?", default=100)
    d.add_argument("--ip-version", action="store_true", help="per family and IP version")
    return p


def read_answer(path: Path) -> dict:
    """The answer file, or SystemExit naming the file and the line of what is wrong."""
    try:
        text = path.read_text()
    except OSError as e:
        raise SystemExit(f"error: {path}: {e.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SystemExit(f"error: {path}:{e.lineno}: column {e.colno}: {e.msg}") from None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.cmd == "page":
        inc = draw(args.seed)
        print(inc.page)
    elif args.cmd == "key":
        print(json.dumps(dataclasses.asdict(draw(args.seed)), indent=1))
    elif args.cmd == "lab":
        inc = draw(args.seed)
        print("\n".join([inc.variant, *(f"{k}={v}" for k, v in inc.lab_env.items())]))
    elif args.cmd == "hint":
        inc = draw(args.seed)
        print(HINTS[inc.key["family"]][args.level - 1])
    elif args.cmd == "grade":
        return _grade(args)
    elif args.cmd == "debrief":
        print(debrief(draw(args.seed), args.run))
    elif args.cmd == "report":
        return _report(args)
    else:
        print(json.dumps(distribution(range(args.n), by_ip_version=args.ip_version)))
    return 0


def _grade(args: argparse.Namespace) -> int:
    answer = read_answer(args.answer)
    inc = draw(args.seed)
    try:
        result = grade(inc, answer, hints_used=args.hints, minutes=args.minutes)
    except AnswerError as e:
        raise SystemExit(f"error: {args.answer}: {e}") from None
    print(json.dumps(result.to_dict(), indent=1))
    if args.log:
        line = session.record(args.trainee, args.seed, inc.key["family"], answer, result.to_dict(), args.minutes,
                              args.hints)  # fmt: skip
        session.append(args.log, line)
    return 0


def _report(args: argparse.Namespace) -> int:
    try:
        sessions = session.read(args.log)
    except OSError as e:
        raise SystemExit(f"error: {args.log}: {e.strerror}") from None
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    if sessions.empty:
        raise SystemExit(f"error: {args.log}: no session in it")
    table = session.summary(sessions)
    print(f"{len(sessions)} answers by {sessions['trainee'].nunique()} trainees; mean score "
          f"{sessions['total'].mean():.1f} of 100; the most missed family first:\n")  # fmt: skip
    rows = ([str(v) for v in row] for row in table.itertuples())
    print("\n".join(md.table(["family", *table.columns], rows)))
    if args.plot:
        print(f"\nplot: {session.plot(table, args.plot)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
