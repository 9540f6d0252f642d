"""Which plots a report draws (analysis/render/figures.py), on real captured runs: the
family registry's `plots` key decides, per finding kind."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.figure import Figure

from analysis.families import FAMILIES
from analysis.load import Run
from analysis.render import figures, plots
from analysis.rules import evaluate_all
from tests.conftest import fixture_run

CONNECT = ("Client connect latency", "connect_latency.png")
# Fixture -> (caption, file) of each plot, in the report's order.
EXPECTED = {
    "accept-overflow-stall": [
        ("Accept queue depth vs limit, port 8080", "accept_queue_8080_4026532177.png"),
        ("Listen overflow counters in tq-accept-overflow-srv-7724", "listen_overflows_4026532177.png"),
        ("Retransmits in tq-accept-overflow-cli-7724", "retransmits_4026532246.png"),
        CONNECT,
    ],
    # No overflow found: the accept-overflow lab's own listener is still drawn.
    "accept-overflow-healthy": [
        ("Accept queue depth vs limit, port 8080", "accept_queue_8080_4026532177.png"),
        ("Listen overflow counters in tq-accept-overflow-srv-29051", "listen_overflows_4026532177.png"),
        CONNECT,
    ],
    # Retransmit findings in two namespaces: one plot each.
    "accept-overflow-sizing-busy": [
        ("Accept queue depth vs limit, port 8080", "accept_queue_8080_4026532177.png"),
        ("Listen overflow counters in tq-accept-overflow-srv-1382", "listen_overflows_4026532177.png"),
        ("Retransmits in tq-accept-overflow-srv-1382", "retransmits_4026532177.png"),
        ("Retransmits in tq-accept-overflow-cli-1382", "retransmits_4026532246.png"),
        CONNECT,
    ],
    "host-overflow": [
        ("Accept queue depth vs limit, port 18090", "accept_queue_18090_4026531833.png"),
        ("Listen overflow counters in host", "listen_overflows_4026531833.png"),
        ("Retransmits in host", "retransmits_4026531833.png"),
    ],
    "time-wait-exhaust": [("TIME_WAIT toward 198.18.0.1:8080", "time_wait.png"), CONNECT],
    "epoll-busy": [("Event loop of httpserver", "event_loop_5699.png")],
    "host-loop": [("Event loop of loop-0", "event_loop_5092_5216.png")],  # one thread of the process
    "host-healthy": [],
    "epoll-idle": [],
}


def _discard(fig: Figure, path: Path) -> Path:
    plt.close(fig)
    return path


def _choice(name: str, findings: list | None = None) -> list[tuple[str, str]]:
    run = Run.open(fixture_run(name))
    run.validate_all()
    found = evaluate_all(run) if findings is None else findings
    return [(caption, p.name) for caption, p in figures.plots_for(run, found, Path("plots"), _discard)]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_plots_per_finding_kind(name: str) -> None:
    assert _choice(name) == EXPECTED[name]


def test_every_plot_the_registry_names_is_drawable() -> None:
    named = {p for fam in FAMILIES.values() for p in fam.plots}
    assert named == set(figures.PLOTS), "families.conf `plots` and figures.PLOTS name the same plots"
    assert all(callable(getattr(plots, p, None)) for p in named)
    assert set(figures.SUBJECTS) <= set(FAMILIES)


def test_the_registry_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    """A family whose `plots` key names nothing gets no plot; its order is the key's order."""
    monkeypatch.setitem(FAMILIES, "retransmits", dataclasses.replace(FAMILIES["retransmits"], plots=()))
    aq = FAMILIES["accept_queue"]
    monkeypatch.setitem(FAMILIES, "accept_queue", dataclasses.replace(aq, plots=tuple(reversed(aq.plots))))
    got = [f for _, f in _choice("accept-overflow-stall")]
    assert got == ["listen_overflows_4026532177.png", "accept_queue_8080_4026532177.png", "connect_latency.png"]


def test_a_namespace_gets_one_retransmit_plot() -> None:
    run = Run.open(fixture_run("accept-overflow-stall"))
    found = [f for f in evaluate_all(run) if f.kind == "retransmit_storm" and f.is_finding]
    assert [f for _, f in _choice("accept-overflow-stall", found + found)] == [
        "accept_queue_8080_4026532177.png",  # the lab's listener
        "listen_overflows_4026532177.png",
        "retransmits_4026532246.png",
        "connect_latency.png",
    ]


def test_only_findings_are_drawn() -> None:
    run = Run.open(fixture_run("time-wait-exhaust"))
    not_found = [f for f in evaluate_all(run) if not f.is_finding]
    assert _choice("time-wait-exhaust", not_found) == [CONNECT]
