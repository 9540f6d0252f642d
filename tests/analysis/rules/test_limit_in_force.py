"""A backlog that changes while the server runs (issue 18): memcached calls listen(fd, 0) when it
reaches its connection limit and listen(fd, backlog) again after; nginx re-listens on reload. The
finding uses the limit in force when the queue overflowed and says how it changed. A copy of the
real accept-overflow-stall capture whose listener's limit drops from 128 to 0 as the stall starts."""

from __future__ import annotations

import pandas as pd

from analysis.derived.accept_queue import limit_changes, limit_in_force
from analysis.load import Run
from analysis.rules import accept_queue
from analysis.wording import describe


def _limit_to_zero_at_stall(run_dir) -> int:
    """The listener of port 8080 re-listened with backlog 0 from its first full interval on; returns that time."""
    f = run_dir / "aq_listener.csv"
    d = pd.read_csv(f, dtype=str, keep_default_na=False)
    mine = d["lport"] == "8080"
    first_full = int(d.loc[mine & (d["full_events"].astype(int) > 0), "time_s"].astype(int).min())
    d.loc[mine & (d["time_s"].astype(int) >= first_full), "limit"] = "0"
    d.to_csv(f, index=False)
    return first_full


def test_the_limit_in_force_at_the_overflow_and_its_change(copy_fixture) -> None:
    run_dir = copy_fixture("accept-overflow-stall")
    changed_at = _limit_to_zero_at_stall(run_dir)
    run = Run.open(run_dir)
    f = next(f for f in accept_queue.evaluate(run) if f.is_finding and f.subject["lport"] == 8080)
    probe = f.link("probe").evidence
    # Before: the largest limit over the capture (128) was reported for an overflow at limit 0.
    assert probe["limit"] == 0
    assert probe["limit_changes"] == [{"at_rel_s": round(changed_at - run.start, 1), "from": 128, "to": 0}]
    text = describe(f.kind, f.link("probe"))
    assert "changed the limit while it ran: from 128 to 0" in text and "0 was in force" in text
    assert f.link("cause").evidence["limit_effective"] == 0


def test_an_unchanged_limit_reads_as_before(copy_fixture) -> None:
    run = Run.open(copy_fixture("accept-overflow-stall"))
    f = next(f for f in accept_queue.evaluate(run) if f.is_finding and f.subject["lport"] == 8080)
    assert f.link("probe").evidence["limit"] == 128 and "limit_changes" not in f.link("probe").evidence
    rows = run.table("aq_listener")
    rows = rows[rows["lport"] == 8080]
    assert limit_changes(rows, run.start) == [] and limit_in_force(rows, rows.iloc[0:0]) == 128
