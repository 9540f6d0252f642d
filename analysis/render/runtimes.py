"""docs/runtimes.md: the runtimes lab's table (analysis/derived/runtimes.py) as a document,
with the date, the kernel and each server's version from the run itself. Written by
`python -m analysis runtimes RUN --out docs/runtimes.md` (`make runtimes-doc`), never by hand."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.derived.runtimes import table
from analysis.load import Run
from analysis.render import markdown as md

HEADER = [
    "server",
    "version",
    "address (family)",
    "listen() backlog asked",
    "limit in force (ss Send-Q)",
    "somaxconn",
    "recognised from its executable as",
    "knob for the backlog",
]


def markdown(run: Run) -> str:
    df = table(run)
    meta = run.metadata
    lines = [
        "# What each runtime asks listen() for, measured",
        "",
        "Generated from one run of the runtimes lab by `make runtimes-doc` (`scripts/lab runtimes` into "
        "tests/fixtures/runtimes-defaults, then `python -m analysis runtimes RUN --out docs/runtimes.md`; "
        "tests/analysis/render/test_runtimes.py holds the two equal). Each server ran with its defaults in a "
        "network namespace of its own (only the port chosen where a server has none or two share one); "
        "**listen() backlog asked** is the accept-queue probe's record of each `listen()` call (`aq_listen.csv`), "
        "**limit in force** is the kernel's `sk_max_ack_backlog` as `ss -ltn` shows it (Send-Q, `listeners.csv`): "
        "min(asked, somaxconn). **Recognised as**: the server the rules name from `/proc/PID/exe` "
        "(analysis/derived/servers.py), whose knob the fix advice then names (analysis/wording/servers.py); "
        "empty: the generic `listen()` advice.",
        "",
        f"Run: `{Path(run.path).name}`, {_date(meta)}, kernel {meta.get('kernel', '?')}. Not measured yet: what "
        "each server does at its own connection limit (memcached's is in tests/integration/test_real_servers.py: "
        "`listen(fd, 0)` until connections close).",
        "",
        *md.table(HEADER, (_cells(r) for r in df.to_dict("records"))),
        "",
    ]
    return md.document(lines)


def _date(meta: dict) -> str:
    start = meta.get("started_epoch")
    if isinstance(start, int | float):
        return pd.Timestamp(start, unit="s", tz="UTC").strftime("%Y-%m-%d %H:%M UTC")
    return str(meta.get("started_at") or "date unknown")


def _cells(r: dict) -> list[str]:
    if pd.isna(r.get("address")):
        return [r["server"], _text(r["version"]), f"— ({r['status']})", "", "", "", "", ""]
    return [
        r["server"],
        _text(r["version"]),
        f"`{r['address']}:{r['port']}` ({r['family']})",
        _text(r["listen_backlogs"], "not seen"),
        str(r["limit"]),
        _text(r["somaxconn"]),
        _text(r["recognised_as"], "—"),
        md.escape(_text(r["backlog_knob"], "— (the generic listen() advice)")),
    ]


def _text(v: object, empty: str = "") -> str:
    return empty if v is None or (isinstance(v, float) and pd.isna(v)) else str(v)


def write(run_dir: str | Path, out: str | Path) -> Path:
    out = Path(out)
    out.write_text(markdown(Run.open(run_dir)))
    return out
