"""analysis/load/run.py's Run.release on real captures: a report of a day's run lets each table go
once used (docs/cost.md, "The report of a day"). A table let go is no longer held, is read again
the same, its notes are not said twice, and checking with release finds what checking without it
finds."""

from __future__ import annotations

import gc
import weakref

import pandas as pd
import pytest

from analysis.contract import TABLES
from analysis.load import Run
from tests.conftest import fixture_run

RUNS = ["busy-host-flow-dsack", "accept-overflow-reuseport-stall", "host-labs-not-sampled", "epoll-busy-trixie"]


def test_a_released_table_is_let_go_and_read_again_the_same() -> None:
    run = Run.open(fixture_run("accept-overflow-stall"))
    first = run.table("aq_listener")
    held = weakref.ref(first)
    copy = first.copy()
    del first
    run.release("aq_listener")
    gc.collect()
    assert held() is None, "the released frame is still referred to"
    pd.testing.assert_frame_equal(run.table("aq_listener"), copy)


@pytest.mark.parametrize("name", RUNS)
def test_checking_with_release_finds_what_checking_without_it_finds(name: str) -> None:
    kept, released = Run.open(fixture_run(name)), Run.open(fixture_run(name))
    assert released.validate_all(release=True) == kept.validate_all()
    assert (released.notes, released.warnings, released.missing) == (kept.notes, kept.warnings, kept.missing)
    assert released.row_counts == kept.row_counts and released.netns_seen == kept.netns_seen
    for table in TABLES:  # every table read again after the release, its notes said once
        pd.testing.assert_frame_equal(released.table(table), kept.table(table))
    assert released.notes == kept.notes
