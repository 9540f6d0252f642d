"""Shared test helpers. Kernel-touching tests need root and bpftrace; on CI
(CI=true) their absence is a failure, not a skip: a suite that skips every real
probe run proves nothing."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def fixture_run(name: str) -> Path:
    return FIXTURES / name


def script_module(path: str) -> ModuleType:
    """A Python file of the pack that is a script, not a package module (dev/, labs/), imported
    with its own folder first on sys.path, as running it puts it there (for its sibling modules)."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    folder = str((ROOT / path).parent)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(folder)
    return mod


@pytest.fixture
def copy_fixture(tmp_path: Path):
    def _copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(FIXTURES / name, dst)
        return dst

    return _copy


def _kernel_problem() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    if shutil.which("bpftrace") is None:
        return "needs bpftrace (make setup)"
    if not (ROOT / "build" / "bin" / "aqserver").exists():
        return "needs the Go lab binaries (make setup)"
    return None


@pytest.fixture
def kernel() -> None:
    """Require what real probe runs need; fail instead of skipping on CI."""
    problem = _kernel_problem()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"integration test cannot run on CI: {problem}")
        pytest.skip(problem)


def pytest_configure(config: pytest.Config) -> None:
    """SIGINT back to Python's handler when the run started with it ignored.

    A pytest started in the background (dev/test-suite's streams, `make test &`) inherits
    SIGINT ignored, and Python then never raises KeyboardInterrupt: an interrupt could only
    TERM it, which runs no fixture's teardown (its labs, namespaces and servers stay up
    until the next run reaps them), and every test's children inherit SIGINT ignored too.
    With the handler, a Ctrl-C or dev/test-suite's own SIGINT stops the run the way a
    terminal's does: teardowns run, children start with SIGINT at its default."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def sigint_default() -> None:
    """preexec_fn for Ctrl-C tests: SIGINT back to its default in the child.

    A test run launched in the background (`make test &`, nohup, some CI
    runners) inherits SIGINT *ignored*, and a shell cannot trap a signal that
    was ignored when it started, so a Ctrl-C test would test the launcher, not
    the script. A terminal's Ctrl-C always reaches a foreground script with
    SIGINT at its default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def leftovers(tag: str = "tq-") -> list[str]:
    """What a lab or capture left behind: namespaces (named with tag) whose lab
    is gone, and processes or state entries whose owning driver is dead. Found
    by the TQ_OWNER marker the drivers give their children, never by process
    name: another user's bpftrace on the same machine is not ours."""
    from tests.integration.interrupts import leftovers as stray

    left = stray()
    return (
        [f"netns {n}" for n in left.netns if tag in n]
        + [f"link {n}" for n in left.links]
        + [f"process {p}" for p in left.processes]
        + [f"state {d}" for d in left.state_dirs]
    )
