"""Trainees' sessions: one JSON line per graded answer (who, which seed and family, the
answer, the grade, minutes, hints), and a group's summary over a log: per family how many
incidents, the mean score, and how often the object was missed, with a plot."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pandas as pd

COLUMNS = ["trainee", "seed", "family", "total", "object_points", "minutes", "hints"]


def record(trainee: str, seed: int, family: str, answer: dict, grade: dict, minutes: float, hints: int) -> dict:
    """One log line's object."""
    return {
        "time": round(time.time(), 1),
        "trainee": trainee,
        "seed": seed,
        "family": family,
        "answer": answer,
        "grade": grade,
        "minutes": round(minutes, 1),
        "hints": hints,
    }


def append(log: Path, line: dict[str, Any]) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as f:
        f.write(json.dumps(line, sort_keys=True) + "\n")


def read(log: Path) -> pd.DataFrame:
    """The log as a table; a line that is not a session's JSON is an error naming file and line."""
    rows = []
    for n, text in enumerate(log.read_text().splitlines(), 1):
        if not text.strip():
            continue
        try:
            d = json.loads(text)
            rows.append([d["trainee"], int(d["seed"]), d["family"], int(d["grade"]["total"]),
                         int(d["grade"]["points"]["object"]), float(d["minutes"]), int(d["hints"])])  # fmt: skip
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{log}:{n}: not a session line ({e.__class__.__name__}: {e})") from None
    return pd.DataFrame(rows, columns=COLUMNS)


def summary(sessions: pd.DataFrame) -> pd.DataFrame:
    """Per family: incidents, mean score, objects missed, mean minutes and hints; the most
    missed family first."""
    g = sessions.groupby("family")
    out = pd.DataFrame(
        {
            "incidents": g.size(),
            "mean_score": g["total"].mean().round(1),
            "object_missed": g["object_points"].apply(lambda s: int((s == 0).sum())),
            "mean_minutes": g["minutes"].mean().round(1),
            "mean_hints": g["hints"].mean().round(2),
        }
    )
    return out.sort_values(["mean_score", "object_missed"], ascending=[True, False])


def plot(table: pd.DataFrame, out: Path) -> Path:
    """Mean score per family, the most missed first."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3))
    ax.barh(table.index[::-1], table["mean_score"][::-1], color="#4c72b0")
    ax.set_xlim(0, 100)
    ax.set_xlabel("mean score (of 100)")
    ax.set_title("Training: mean score per family")
    for y, (score, n) in enumerate(zip(table["mean_score"][::-1], table["incidents"][::-1], strict=True)):
        ax.text(score + 1, y, f"{score:.0f} (n={n})", va="center", fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
