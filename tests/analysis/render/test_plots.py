"""analysis/render/plots.py on real captured runs: each plot draws its subject's data."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.figure import Figure

from analysis.contract import DERIVED_TABLES
from analysis.derived import sweep as sweep_data
from analysis.load import Run, read_table
from analysis.render import plots
from tests.conftest import fixture_run

SRV_STALL = 4026532177  # accept-overflow-stall: the server's namespace; its listener is port 8080
CLI_STALL = 4026532246


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    yield
    plt.close("all")


def _run(name: str) -> Run:
    run = Run.open(fixture_run(name))
    run.validate_all()
    return run


def _labels(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes for lg in [ax.get_legend()] if lg for t in lg.get_texts()]


def test_queue_depth_against_the_limit() -> None:
    run = _run("accept-overflow-stall")
    fig = plots.queue_depth(run, SRV_STALL, 8080)
    (ax,) = fig.axes
    assert ax.get_title() == "Accept queue of port 8080 (tq-accept-overflow-srv-7724)"
    assert "limit (sk_max_ack_backlog)" in _labels(fig) and "full (depth > limit)" in _labels(fig)
    rows = run.table("aq_listener")
    rows = rows[(rows["netns"] == SRV_STALL) & (rows["lport"] == 8080)]
    limit = next(line for line in ax.lines if line.get_label().startswith("limit"))
    assert list(limit.get_ydata()) == list(rows.sort_values("time_s")["limit"])


def test_counter_deltas_one_line_per_counter() -> None:
    fig = plots.counter_deltas(_run("accept-overflow-stall"), SRV_STALL, ["ListenOverflows", "ListenDrops"])
    assert _labels(fig) == ["ListenOverflows", "ListenDrops"]
    assert fig.axes[0].get_title() == "Kernel counters in tq-accept-overflow-srv-7724"


def test_connect_latency_splits_failures_from_successes() -> None:
    run = _run("time-wait-exhaust")
    fig = plots.connect_latency(run)
    assert fig is not None
    conns = run.table("connects")
    want = [f"{r} ({n})" for r, n in sorted(conns["result"].value_counts().items(), key=lambda kv: kv[0] != "ok")]
    assert _labels(fig) == want
    assert plots.connect_latency(_run("host-healthy")) is None  # no lab client: nothing to draw


def test_retransmits_probe_against_kernel() -> None:
    fig = plots.retransmits(_run("accept-overflow-stall"), CLI_STALL)
    assert _labels(fig) == ["probe: retransmitted segments", "kernel: TcpRetransSegs delta"]
    assert fig.axes[0].get_title() == "Retransmits in tq-accept-overflow-cli-7724"


def test_time_wait_against_littles_law_and_the_port_range() -> None:
    run = _run("time-wait-exhaust")
    fig = plots.time_wait(run, 4026532314, "198.18.0.1", 8080, 200)
    labels = _labels(fig)
    assert labels[0] == "TIME_WAIT sockets (ss)" and labels[-1] == "ports in range (200)"
    assert max(fig.axes[0].lines[0].get_ydata()) == 200  # the exhaust lab fills its 200 ports
    assert len(_labels(plots.time_wait(run, 4026532314, "198.18.0.1", 8080, None))) == 2


def test_event_loop_of_a_process_and_of_a_thread() -> None:
    fig = plots.event_loop(_run("epoll-busy"), 5699)
    assert fig.axes[0].get_title() == "Event loop of httpserver (pid 5699)"
    fig = plots.event_loop(_run("host-loop"), 5092, 5216)
    assert fig.axes[0].get_title() == "Event loop of loop-0 (pid 5092, tid 5216)"


def test_comparison_one_panel_per_metric() -> None:
    d = fixture_run("compare-time-wait-exhaust")
    long = read_table(d / "runs.csv", DERIVED_TABLES["compare_runs"])
    summary = read_table(d / "summary.csv", DERIVED_TABLES["compare_summary"])
    fig = plots.comparison(long, summary, json.loads((d / "compare.json").read_text()))
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == len(summary)
    significant = {r["label"] for _, r in summary.iterrows() if r["significant"]}
    assert {ax.get_title().removesuffix(" *") for ax in shown if ax.get_title().endswith(" *")} == significant


@pytest.mark.parametrize(
    ("name", "title"), [("sweep-accept-queue", "Where the queue saturates"), ("sweep-time-wait", "")]
)
def test_sweep_predicted_against_measured(name: str, title: str) -> None:
    kind, df = sweep_data.load(fixture_run(name))
    fig = plots.sweep(kind, df)
    assert len(fig.axes) == 2 and fig.axes[1].get_title() == title
    assert all(_labels(fig))


def test_save_writes_a_png_and_closes_the_figure(tmp_path: Path) -> None:
    fig = plots.counter_deltas(_run("accept-overflow-stall"), SRV_STALL, ["ListenOverflows"])
    out = plots.save(fig, tmp_path / "sub" / "c.png")
    assert out.read_bytes().startswith(b"\x89PNG") and not plt.fignum_exists(fig.number)
