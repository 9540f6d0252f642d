"""monitor/exporter/threads.py: per-thread CPU and run-queue wait from procfs. A real thread
of this process spins for 0.3 s of CPU between two scans: its CPU counter rises by about that
much, under its own tid and name; a thread that sleeps meanwhile gets (almost) none."""

from __future__ import annotations

import os
import threading
import time

from monitor.exporter.objects import Family
from monitor.exporter.threads import ThreadScan, with_children
from tests.conftest import ROOT


def _named(name: str, tids: list[int]) -> None:
    tid = threading.get_native_id()
    with open(f"/proc/self/task/{tid}/comm", "w") as f:
        f.write(name)  # what ps and the kernel call the thread (CPython does not set it)
    tids.append(tid)


def _spin(seconds: float, tids: list[int], go: threading.Event, spun: threading.Event, done: threading.Event) -> None:
    _named("tq-spin", tids)
    go.wait()
    # Seconds of its own CPU, not of the clock: beside other tests on one core (make
    # test's phase 1) 0.3 s of spinning by the clock got 0.15 s of CPU.
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
    spun.set()
    done.wait()


def _wait(tids: list[int], go: threading.Event, done: threading.Event) -> None:
    _named("tq-sleep", tids)
    go.wait()
    done.wait(30)


def _sleep(seconds: float, tids: list[int], go: threading.Event | None = None) -> None:
    _named("tq-sleep", tids)
    if go is not None:
        go.wait()
    time.sleep(seconds)


def test_a_spinning_thread_gets_its_cpu_time_and_a_sleeping_one_none() -> None:
    pid, spin_tids, sleep_tids = os.getpid(), [], []
    go, spun, done = threading.Event(), threading.Event(), threading.Event()
    spinner = threading.Thread(target=_spin, args=(0.3, spin_tids, go, spun, done))
    sleeper = threading.Thread(target=_wait, args=(sleep_tids, go, done))
    spinner.start()
    sleeper.start()
    scan, fam = ThreadScan(ROOT / "collector" / "sample-netns"), Family("loop", top_n=100, ttl=600)
    time.sleep(0.05)
    scan.scan(fam, {pid}, 1.0)  # baseline: every thread is running before the first scan
    go.set()
    assert spun.wait(30)  # the spinner has spun and waits, the sleeper still waits
    scan.scan(fam, with_children({pid}), 2.0)
    done.set()
    spinner.join()
    sleeper.join()
    spun = fam.objs[(str(pid), str(spin_tids[0]), "tq-spin")].counters
    slept = fam.objs[(str(pid), str(sleep_tids[0]), "tq-sleep")].counters
    assert 0.15 <= spun["loop_cpu_seconds_total"] <= 0.45
    assert slept["loop_cpu_seconds_total"] < 0.02
    assert spun["loop_runqueue_wait_seconds_total"] >= 0


def test_a_thread_that_exited_is_forgotten() -> None:
    tids: list[int] = []
    t = threading.Thread(target=_sleep, args=(0.05, tids))
    t.start()
    scan, fam = ThreadScan(ROOT / "collector" / "sample-netns"), Family("loop", top_n=100, ttl=600)
    scan.scan(fam, {os.getpid()}, 1.0)
    t.join()
    # join() returns before the kernel has released the task: /proc lists it until then, and
    # the sampler (one process kept running, quick to answer) reads what /proc lists.
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/self/task/{tids[0]}") and time.monotonic() < deadline:
        time.sleep(0.01)
    scan.scan(fam, {os.getpid()}, 2.0)
    assert (os.getpid(), tids[0]) not in scan.last
