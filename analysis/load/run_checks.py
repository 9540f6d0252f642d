"""What ties a run's tables to its metadata.json: the rows each probe family wrote, a sample of every
sampled namespace."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from analysis.contract import TABLES

from .errors import RunDataError

if TYPE_CHECKING:
    from .run import Run


# The tables the cross-checks read as frames (of the others: Run.row_counts and Run.netns_seen).
CROSS_CHECKED_TABLES = ("aq_listener", "aq_listen", "aq_accept", "listeners", "connects")


def cross_checks(run: Run) -> None:
    """Raise a RunDataError (or, for a run that did not end normally, add a note) where they disagree."""
    _probe_rows(run)
    _unknown_lines(run)
    _namespace_samples(run)
    _named_files(run)
    _limits_agree(run)
    _namespaces_agree(run)


def _named_files(run: Run) -> None:
    """A file metadata.json names (the lab client's log) that is missing or holds no row: said as a
    note in the report and a warning from validate, since the evidence it would give (attempts,
    timeouts, connect latency) is then missing from every chain that would have used it."""
    client = ((run.metadata.get("lab") or {}).get("client")) or {}
    name = client.get("connects_file")
    if not name:
        return
    where = run.meta_line("lab", "client", "connects_file")
    f = run.path / str(name)
    if not f.exists():
        why = "is missing"
    elif run.row_counts.get("connects") == 0:
        why = "holds no row"
    else:
        return
    run.warnings.append(
        f"{where}: the lab client's log {name} {why}: its evidence (attempts, errors, connect latency) "
        "is not in this report's chains"
    )


def _probe_rows(run: Run) -> None:
    """Each probe family's files hold the rows probe-to-csv counted when it wrote them."""
    for family, info in run.metadata["probes"].items():
        names = [n for n, t in TABLES.items() if t.probe_family == family]
        if info.get("status") != "ok" or not names or any(n in run.missing for n in names):
            continue
        have = sum(run.row_counts[n] for n in names)
        if have != info["rows"]:
            files = ", ".join(TABLES[n].file for n in names)
            raise RunDataError(
                f"{run.meta_line('probes', family, 'rows')}: probes.{family}.rows: {info['rows']}, but "
                f"{files} hold {have} rows together: a file was cut short or rows were added"
            )


def _unknown_lines(run: Run) -> None:
    """Lines of a probe's raw output that probe-to-csv did not know (metadata.json
    probes.<family>.unknown_lines): said per probe as a note, so the report and verdicts.json
    carry the count (bpftrace 0.23's helper warnings filled the raw tier's output by the
    thousand, issue 35)."""
    for family, info in run.metadata["probes"].items():
        n = info.get("unknown_lines") or 0
        if n:
            run.notes.append(
                f"{run.path / f'probe_{family}.out'}: {n} lines the parser did not know were left there "
                f"({run.meta_line('probes', family, 'unknown_lines')}): bpftrace's own warnings (bpftrace 0.23 "
                f"prints each helper error there, 4 lines a warning) or damage; the {family} rows hold none of them"
            )


def _namespace_samples(run: Run) -> None:
    """Every sampled namespace has samples (the samplers write one per interval)."""
    for name in ("counters", "sockstat", "sysctls"):
        if name in run.missing:
            continue
        ld = run.loaded[name]
        have = run.netns_seen[name]
        for i, ns in enumerate(run.metadata["netns"]):
            if ns["inode"] in have:
                continue
            msg = (
                f"{run.path / TABLES[name].file}:{ld.last_line}: no row for namespace {ns['label']} "
                f"(inode {ns['inode']}, {run.meta_line('netns', i)}): the file was cut short"
            )
            if run.complete:
                raise RunDataError(msg)
            run.notes.append(msg + " (run incomplete)")


# Intervals a probe limit nothing else showed must last before it is called a contradiction
# (a change the application made and undid between two ss samples, unseen by listen() on the
# raw tier, lasts one or two).
LIMIT_DISAGREES_INTERVALS = 3


def _limits_agree(run: Run) -> None:
    """A listener's limit as the probe read it (aq_listener) against what ss sampled (listeners.csv
    Send-Q) and what listen() set (aq_listen): a limit the probe reports for several intervals that
    neither ever showed is named as a contradiction (a limit changed in aq_listener.csv alone
    changed the chain's numbers without a word)."""
    if any(n in run.missing for n in ("aq_listener", "listeners")) or run.table("listeners").empty:
        return
    aq = run.loaded["aq_listener"]
    rows_all = aq.df.assign(_line=aq.lines)
    ls, calls = run.table("listeners"), run.table("aq_listen")
    for (ns, lport), rows in rows_all.groupby(["netns", "lport"]):
        ss = ls[(ls["netns"] == ns) & (ls["lport"] == lport)]
        if ss.empty:
            continue  # not sampled: nothing to hold it to
        set_by = calls[(calls["netns"] == ns) & (calls["lport"] == lport) & (calls["ret"] == 0)]["limit_effective"]
        known = {int(v) for v in ss["send_q"]} | {int(v) for v in set_by}
        odd = rows[~rows["limit"].isin(known)]
        if len(odd) < LIMIT_DISAGREES_INTERVALS:
            continue
        limits = ", ".join(str(int(v)) for v in sorted(set(odd["limit"])))
        run.warnings.append(
            f"{run.path / TABLES['aq_listener'].file}:{int(odd['_line'].iloc[0])}: port {int(lport)} in "
            f"{run.netns_label(int(ns))}: the probe read limit {limits} in {len(odd)} intervals, but ss "
            f"(listeners.csv Send-Q) showed {', '.join(str(v) for v in sorted(known))} and never that: the "
            "tables disagree, and the chain below uses the probe's"
        )


def _known_namespaces(run: Run) -> set[int]:
    """Namespaces some table other than aq_listener (or metadata.json) places anything in."""
    known = {int(ns["inode"]) for ns in run.metadata.get("netns", [])}
    for name, t in TABLES.items():
        if name == "aq_listener" or name in run.missing or "netns" not in t.column_names:
            continue
        if name not in run.netns_seen:
            run.table(name)
        known |= run.netns_seen[name]
    return known


def _namespaces_agree(run: Run) -> None:
    """aq_listener rows of a listener (address and port) in a namespace no other table knows, while
    its listen() or accept() rows place that listener in another: named (moved rows split one
    confirmed finding into two suspicions, one 'on a listener not seen by the probe')."""
    if any(n in run.missing for n in ("aq_listener", "aq_accept", "aq_listen")):
        return
    aq = run.loaded["aq_listener"]
    if aq.df.empty:
        return
    known = _known_namespaces(run)
    rows = aq.df.assign(_line=aq.lines)
    strange = rows[~rows["netns"].isin(known)]
    cols = ["netns", "lport", "sock_ino"]
    placed = pd.concat([run.table("aq_accept")[cols], run.table("aq_listen")[cols]])
    ss = run.table("listeners")[cols].dropna() if "listeners" not in run.missing else placed.iloc[:0]
    for (ns, laddr, lport, ino), odd in strange.groupby(["netns", "laddr", "lport", "sock_ino"]):
        if ino:  # one socket, by its inode: wherever another table places that socket
            found = pd.concat([placed, ss])
            elsewhere = sorted({int(v) for v in found[found["sock_ino"] == ino]["netns"]} - {int(ns)})
        else:  # the same address and port in a namespace whose listen() or accept() calls place it there
            twins = {int(v) for v in rows[(rows["laddr"] == laddr) & (rows["lport"] == lport)]["netns"]}
            elsewhere = sorted(twins & {int(v) for v in placed[placed["lport"] == lport]["netns"]} - {int(ns)})
        if not elsewhere:
            continue  # a listener of a namespace nobody sampled: the probes see the whole kernel
        where = ", ".join(run.netns_label(v) for v in elsewhere)
        what = f"{laddr}:{int(lport)}" + (f" (socket {int(ino)})" if ino else "")
        run.warnings.append(
            f"{run.path / TABLES['aq_listener'].file}:{int(odd['_line'].iloc[0])}: {what} in namespace "
            f"{int(ns)}, which no other table knows (not sampled, no listen() or accept() seen there), while "
            f"other tables place it in {where}: the tables disagree"
        )
