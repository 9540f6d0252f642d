"""docs/runtimes.md: the runtimes lab's tables (analysis/derived/runtimes.py) as a document,
with the date, the kernel and each server's version from the runs themselves: each server's
defaults, and (from a run of the limits variant) what each does past its own connection
limit. Written by `python -m analysis runtimes RUN [--limits RUN] --out docs/runtimes.md`
(`make runtimes-doc`), never by hand."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.derived.runtimes import at_limit_table, table, worker_stall
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
    "SO_REUSEPORT (sockets, processes)",
    "when one worker stalls",
]


AT_LIMIT_HEADER = [
    "server",
    "limit set",
    "connects completed",
    "kept open",
    "closed by the server (what it said)",
    "deepest accept queue",
    "listen() again",
    "CPU while held",
    "what it does past its limit",
]


def markdown(run: Run, limits: Run | None = None) -> str:
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
        "empty: the generic `listen()` advice. **SO_REUSEPORT**: whether its `listen()` calls had the option set "
        "(`aq_listen.csv` reuseport), with the sockets ss listed on that address (several: a SO_REUSEPORT group, "
        "one queue each) and the processes accepting from them (of several holding them, ss -p, those whose epoll "
        "set watches them: nginx's workers, not its master); **when one worker stalls** follows from those "
        "(tests/integration/test_real_servers.py stops one of nginx's `reuseport` workers and checks that the "
        "finding names it).",
        "",
        f"Run: `{Path(run.path).name}`, {_date(meta)}, kernel {meta.get('kernel', '?')}.",
        "",
        *md.table(HEADER, (_cells(r) for r in df.to_dict("records"))),
        "",
        *(_at_limit_section(limits) if limits is not None else []),
    ]
    return md.document(lines)


def _at_limit_section(run: Run) -> list[str]:
    df = at_limit_table(run)
    meta = run.metadata
    return [
        "## Past its own connection limit, measured",
        "",
        "From one run of the limits variant (`scripts/lab runtimes limits` into tests/fixtures/runtimes-limits). "
        "Each server ran alone with its own connection limit set low (**limit set**; a server without such a "
        "setting had its open-files limit lowered with `prlimit` once it listened, to what it held plus 8), then "
        "40 idle connections from another namespace were opened one after another and held 3 s "
        "(labs/runtimes/hold_idle.py): **connects completed** (a connect completes when the kernel answers, "
        "accepted or not), **kept open** and **closed by the server** after the hold, with the first bytes a "
        "closed one received; **deepest accept queue** and **listen() again** are the accept-queue probe's "
        "record of the listener over the hold (`aq_listener.csv`, `aq_listen.csv`); **CPU while held** is its "
        "processes' user + system time (`/proc/PID/stat`). PostgreSQL checks its limit only after a client's "
        "startup message, which idle clients never send. memcached with `-c 24` or less runs out of descriptors "
        "in accept4() before its own check answers, and calls `listen(fd, 0)` until connections close "
        "(tests/integration/test_real_servers.py).",
        "",
        f"Run: `{Path(run.path).name}`, {_date(meta)}, kernel {meta.get('kernel', '?')}.",
        "",
        *md.table(AT_LIMIT_HEADER, (_at_limit_cells(r) for r in df.to_dict("records"))),
        "",
    ]


def _at_limit_cells(r: dict) -> list[str]:
    if isinstance(r.get("skipped"), str):
        return [r["server"], "—", "", "", "", "", "", "", md.escape(f"not measured: {r['skipped']}")]
    r = {**r, **{k: int(r[k]) for k in ("conns", "connected", "connect_failed", "kept_open", "closed_by_server")}}
    said = f" (`{md.escape(r['said'])}`)" if isinstance(r.get("said"), str) else ""
    if not said and r["closed_by_server"]:
        said = " (nothing)"
    depth = r["queue_depth_max"]
    return [
        r["server"],
        md.escape(str(r["knob"])),
        f"{r['connected']} of {r['conns']}",
        str(r["kept_open"]),
        f"{r['closed_by_server']}{said}",
        "not seen" if pd.isna(depth) else str(int(depth)),
        _text(r["relisten_backlogs"], "no"),
        f"{r['cpu_s']:.2f} s in {r['hold_s']:.1f} s",
        md.escape(behaviour_text(r)),
    ]


def behaviour_text(r: dict) -> str:
    """What the server did past its limit, in words, from the keys at_limit_table found."""
    r = {**r, "queue_depth_max": _text(r["queue_depth_max"]).removesuffix(".0")}
    words = {
        "relisten": f"calls listen() again with backlog {r['relisten_backlogs']}",
        "queues": f"stops accepting: up to {r['queue_depth_max']} wait in its accept queue",
        "refuses": f"accepts and closes {r['closed_by_server']} of {r['connected']}",
        "drops": f"{r['connect_failed']} connects fail or are not tried (the client stops after 3 timeouts in a row)",
        "spins": f"spins: {r['cpu_s']:.1f} s of CPU in {r['hold_s']:.1f} s",
        "keeps": f"accepts and keeps all {r['connected']}",
    }
    return "; ".join(words[k] for k in str(r["behaviour"]).split(", ") if k in words) or "—"


def _date(meta: dict) -> str:
    start = meta.get("started_epoch")
    if isinstance(start, int | float):
        return pd.Timestamp(start, unit="s", tz="UTC").strftime("%Y-%m-%d %H:%M UTC")
    return str(meta.get("started_at") or "date unknown")


def _cells(r: dict) -> list[str]:
    if pd.isna(r.get("address")):
        return [r["server"], _text(r["version"]), f"— ({r['status']})", "", "", "", "", "", "", ""]
    return [
        r["server"],
        _text(r["version"]),
        f"`{r['address']}:{r['port']}` ({r['family']})",
        _text(r["listen_backlogs"], "not seen"),
        str(r["limit"]),
        _text(r["somaxconn"]),
        _text(r["recognised_as"], "—"),
        md.escape(_text(r["backlog_knob"], "— (the generic listen() advice)")),
        _reuseport(r),
        _text(worker_stall(r), "not recorded"),
    ]


def _reuseport(r: dict) -> str:
    """'no (1 socket, 1 process)'; 'not recorded' for a run before contract 10."""
    flag = r.get("reuseport")
    if flag is None or (isinstance(flag, float) and pd.isna(flag)):
        return "not recorded"
    socks, procs = r.get("sockets"), r.get("processes")
    counts = f" ({_text(socks, '?')} socket{'s' if socks != 1 else ''}, {_text(procs, '?')} process"
    return ("yes" if flag else "no") + counts + ("es)" if procs != 1 else ")")


def _text(v: object, empty: str = "") -> str:
    return empty if v is None or (isinstance(v, float) and pd.isna(v)) else str(v)


def write(run_dir: str | Path, out: str | Path, limits_dir: str | Path | None = None) -> Path:
    out = Path(out)
    out.write_text(markdown(Run.open(run_dir), Run.open(limits_dir) if limits_dir else None))
    return out
