"""What the integration tests that start their own servers share: the processes they own
(each in a process group of its own, stopped TERM then KILL), and waiting for a condition."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class Children:
    """Processes a test started; stop() ends every one of them (their whole groups)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, args: list[str], log: Path) -> subprocess.Popen:
        p = subprocess.Popen(args, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(p)
        return p

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()


# How long a lab or capture cut short gets to clean up after its SIGINT.
CLEANUP_S = 60


def run_to_end(args: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env), but a child
    cut short (its timeout, or the suite interrupted: a Ctrl-C, dev/test-suite's SIGINT) gets
    SIGINT, as a terminal's Ctrl-C, and CLEANUP_S seconds to clean up before SIGKILL.
    subprocess.run kills it at once, which leaves a lab's namespaces and servers up until the
    next run reaps them."""
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as p:
        try:
            out, err = p.communicate(timeout=timeout)
        except BaseException:
            _interrupt(p)
            raise
    return subprocess.CompletedProcess(args, p.returncode, out, err)


def _interrupt(p: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        p.send_signal(signal.SIGINT)
    try:
        p.communicate(timeout=CLEANUP_S)
    except BaseException:  # it did not finish, or a second Ctrl-C: no more waiting
        p.kill()
        p.wait()


def wait_for(what: str, ok: Callable[[], T], timeout: float, every: float = 0.1) -> T:
    """ok()'s first true value within timeout seconds; an OSError (not listening yet) counts
    as not yet."""
    end = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < end:
        try:
            last = ok()
        except OSError as e:
            last = e
        if last and not isinstance(last, Exception):
            return last  # type: ignore[return-value]
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def end_capture(cap: subprocess.Popen) -> None:
    """Ends a collector/capture started with a long --duration through its own early stop
    (SIGUSR1: complete, with its report), for tests whose capture must cover steps of their
    own rather than a fixed time; holds it to a clean exit. stderr must be a text pipe."""
    if cap.poll() is None:
        cap.send_signal(signal.SIGUSR1)
    _, err = cap.communicate(timeout=300)
    assert cap.returncode == 0, (err or "")[-3000:]
