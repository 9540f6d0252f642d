"""Command line: python -m training {page,key,grade,distribution} ...

page SEED                 what the trainee is told: the page and how long the incident runs
key SEED                  the trainer's view: the incident as JSON (lab variant and
                          environment, the answer key, the healthy neighbours)
grade SEED ANSWER.json    the answer graded against SEED's injected fault (docs/training.md)
      [--hints N] [--minutes M]
distribution [N]          how seeds 0..N-1 spread over the families (default 100)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from training.grade import AnswerError, grade
from training.incidents import distribution, draw


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m training", description="Training mode: incidents and grades.")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("page", help="the page a trainee gets for SEED").add_argument("seed", type=int)
    sub.add_parser("key", help="the trainer's view of SEED's incident (JSON)").add_argument("seed", type=int)
    g = sub.add_parser("grade", help="grade ANSWER (a JSON file) against SEED's injected fault")
    g.add_argument("seed", type=int)
    g.add_argument("answer", type=Path)
    g.add_argument("--hints", type=int, default=0, help="hint levels used (0-3)")
    g.add_argument("--minutes", type=float, default=0.0, help="minutes from the page to the answer")
    d = sub.add_parser("distribution", help="how seeds 0..N-1 spread over the families")
    d.add_argument("n", type=int, nargs="?", default=100)
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
        print(f"{inc.page}\nThe incident runs about {inc.seconds} s of load; investigate while it runs.")
    elif args.cmd == "key":
        print(json.dumps(dataclasses.asdict(draw(args.seed)), indent=1))
    elif args.cmd == "grade":
        answer = read_answer(args.answer)
        try:
            result = grade(draw(args.seed), answer, hints_used=args.hints, minutes=args.minutes)
        except AnswerError as e:
            raise SystemExit(f"error: {args.answer}: {e}") from None
        print(json.dumps(result.to_dict(), indent=1))
    else:
        print(json.dumps(distribution(range(args.n))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
