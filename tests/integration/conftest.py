"""Fixtures shared by the integration test modules."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from tests.integration.incidents import Incident, run_incident
from tests.integration.interrupts import dead_runs_namespaces


@pytest.fixture(scope="session", autouse=True)
def reap_dead_tests_namespaces() -> None:
    """The next run reaps: a test killed with SIGKILL (or its machine stopped) leaves its
    namespace, named tq-...-<its pid>; with that pid gone, every leftover check would fail."""
    for name in dead_runs_namespaces():
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


@pytest.fixture(scope="session")
def incident(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str | None], Incident]:
    """A training incident per family (None: the healthy host), run once per session and
    shared by test_training.py and test_busy_host_lab.py (tests/integration/incidents.py)."""
    done: dict[str | None, Incident] = {}

    def get(family: str | None) -> Incident:
        if family not in done:
            done[family] = run_incident(family, tmp_path_factory.mktemp(f"incident-{family or 'none'}"))
        return done[family]

    return get
