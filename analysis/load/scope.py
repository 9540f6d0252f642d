"""Scope "sampled": probe rows of the namespaces a capture did not sample set aside (the probes see the
whole kernel: other containers, other namespace "hosts")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from analysis.contract import TABLES

from .table import Loaded, rows_in_file

if TYPE_CHECKING:
    from .run import Run


def sampled_inodes(metadata: dict[str, Any]) -> set[int]:
    return {int(ns["inode"]) for ns in metadata["netns"]}


def scope_pids(run: Run) -> set[int]:
    """Processes of the sampled namespaces that the run saw: listening there (ss -p in the namespace), or
    calling listen() or accept() on one of its sockets, or failing a connect there (probes)."""
    sampled = sampled_inodes(run.metadata)
    pids: set[int] = set()
    for name in ("listeners", "aq_listen", "aq_accept", "tw_connect"):
        df = run.table(name)
        pids |= {int(p) for p in df.loc[df["netns"].isin(sampled), "pid"].dropna() if int(p) > 0}
    return pids


def scoped(run: Run, name: str, ld: Loaded) -> Loaded:
    """Under scope "sampled", a probe table without the rows of namespaces that were not sampled. ep_loop
    has no namespace column: it keeps the threads of run.scope_pids. The rows set aside are counted in
    run.out_of_scope; rows_in_file keeps the file's count for the cross-checks."""
    t = TABLES[name]
    if run.scope != "sampled" or not t.probe or ld.df.empty:
        return ld
    if "netns" in t.column_names:
        keep = ld.df["netns"].isin(sampled_inodes(run.metadata))
    else:
        keep = ld.df["pid"].isin(run.scope_pids)
    mask = keep.fillna(False).to_numpy(dtype=bool)
    if mask.all():
        return ld
    run.out_of_scope[name] = int((~mask).sum())
    lines = [n for n, k in zip(ld.lines, mask, strict=True) if k]
    return Loaded(ld.df[mask].reset_index(drop=True), lines, ld.last_line, ld.notes, rows_in_file(ld))
