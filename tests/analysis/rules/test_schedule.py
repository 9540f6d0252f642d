"""analysis/rules/schedule.py: the rules and measurements run grouped by the large table they read,
each table let go after its last reader, give what evaluate_all and all_measurements give."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from analysis.contract import TABLES
from analysis.derived.measurements import MEASUREMENTS, Measurement, all_measurements
from analysis.load import Run
from analysis.rules import RULES, RunView, evaluate_all
from analysis.rules.schedule import _grouped, judge
from tests.conftest import FIXTURES

RUNS = sorted(p.name for p in FIXTURES.iterdir() if (p / "metadata.json").is_file())


@pytest.mark.parametrize("name", RUNS)
def test_judged_in_groups_finds_and_measures_what_the_registry_order_does(name: str) -> None:
    findings, measured = judge(Run.open(FIXTURES / name))
    run = Run.open(FIXTURES / name)
    assert [f.to_dict() for f in findings] == [f.to_dict() for f in evaluate_all(run)]
    assert measured == all_measurements(run)


def test_the_readers_of_a_large_table_run_together(tmp_path: Path) -> None:
    """A day's sizes: the counters' readers one after another; then the event loop, which reads
    the listeners the accept-queue rule read; TIME_WAIT's rule and measurement last."""
    sizes = {"counters": 58, "tw_sockets": 83, "ep_loop": 67, "tw_close": 29, "threads": 40, "listeners": 12}
    for name, kb in {**sizes, "aq_accept": 6}.items():
        (tmp_path / TABLES[name].file).write_bytes(b"x" * (kb << 10))
    steps = [*RULES, *MEASUREMENTS]
    run = SimpleNamespace(path=tmp_path)
    run.file_size = partial(Run.file_size, run)  # what the grouping reads of a run: its files' sizes
    names = [getattr(steps[i], "kind", None) or steps[i].name for i in _grouped(run, steps)]
    assert names == [
        "accept_queue_overflow",
        "retransmit_storm",
        "socket_buffer_limit",
        "retransmit_reconciliation",
        "event_loop_saturation",
        "epoll_sweep",
        "time_wait_exhaustion",
        "time_wait",
    ]


def test_a_rule_lets_go_only_the_tables_no_later_step_reads() -> None:
    run = Run.open(FIXTURES / "host-loop")
    view = RunView(run, "x", ("ep_loop", "threads"), last_reader_of=frozenset({"ep_loop"}))
    ep, threads = view.table("ep_loop"), view.table("threads")
    view.done_with("ep_loop")
    view.done_with("threads")
    assert "ep_loop" not in run._cache and run._cache["threads"] is threads
    assert view.table("ep_loop").equals(ep)  # read again when asked for


class _Recording(Run):
    """A run that notes the tables asked of it."""

    asked: set[str]

    def table(self, name: str) -> pd.DataFrame:
        self.asked.add(name)
        return super().table(name)


@pytest.mark.parametrize("part", MEASUREMENTS, ids=lambda m: m.name)
def test_a_measurement_reads_only_the_tables_it_declares(part: Measurement) -> None:
    read: set[str] = set()
    for name in RUNS:
        run = _Recording.open(FIXTURES / name)
        run.asked = set()
        if part.applies(run):
            part.measure(run)
            read |= run.asked
    assert read <= set(part.inputs)
