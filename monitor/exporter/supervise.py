"""The probes: each a bpftrace process whose output goes through collector/probe-to-csv
--stream (the one parser) into a pipe the exporter reads. A probe that exits is
restarted with back-off (2, 4 ... 60 s); every --segment seconds each probe is
restarted so its kernel maps (4096 keys each) and memory stay bounded; both
processes die with the exporter, even when it is SIGKILLed (PR_SET_PDEATHSIG)."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .memory import release_compiler_pages
from .stream import CsvRows, Row

# Again and again: a page shared with another bpftrace stays, and is ours alone once it exits (docs/cost.md).
RELEASE_EVERY_S = 2.0
# While bpftrace compiles, at each tick of the loop: the compile is the tier's memory peak (docs/cost.md).
RELEASE_WHILE_COMPILING_S = 0.5


def log(msg: str) -> None:
    print(f"monitor: {msg}", file=sys.stderr, flush=True)


def _die_with_parent() -> None:
    """In the child: SIGTERM when the exporter dies, even by SIGKILL (prctl PR_SET_PDEATHSIG),
    so no probe outlives it."""
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGTERM)


@dataclass(frozen=True)
class Member:
    """A family whose probe file runs inside a bundle (one bpftrace for several files)."""

    family: str
    file: Path
    tier: str


@dataclass
class Probe:
    family: str  # "bundle" for several files in one process (members)
    file: Path
    tier: str
    interval: int
    members: list[Member] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None  # bpftrace
    reader: subprocess.Popen[bytes] | None = None  # probe-to-csv --stream, reading bpftrace
    rows: CsvRows | None = None
    started_at: float = 0.0
    restarts: dict[str, int] = field(default_factory=dict)
    misses_done: int = 0  # recursion misses of earlier processes
    misses_now: int = 0
    failures_in_row: int = 0
    next_start: float = 0.0
    err_path: Path | None = None
    compiler_released_at: float | None = None  # when this process's LLVM and clang pages were last given back
    compiling_released_at: float | None = None  # the same while it compiles (RELEASE_WHILE_COMPILING_S)
    compiler_freed_kb: int = 0  # the most PSS one release gave back while the first process compiled (the log's)

    @property
    def families(self) -> list[Member]:
        """The families this process serves: its members, or itself alone."""
        return self.members or [Member(self.family, self.file, self.tier)]

    def up(self) -> bool:
        return self.running() and self.rows is not None and self.rows.started

    def running(self) -> bool:
        return all(p is not None and p.poll() is None for p in (self.proc, self.reader))

    def failed(self, now: float) -> str:
        """Count a death, set when to start again, and say why (bpftrace's ERROR lines)."""
        code = self.proc.poll() if self.proc is not None else None
        note = ""
        if self.err_path and self.err_path.exists():
            lines = self.err_path.read_text(errors="replace").splitlines()
            note = " ".join(line for line in lines if "ERROR" in line)[:300]
        self.failures_in_row += 1
        # Back off when it keeps failing (a kernel feature gone, say): 2, 4, ... 60 s.
        self.next_start = now + min(60, 2**self.failures_in_row)
        why = f": {note}" if note else ""
        return f"probe {self.family} exited (code {code}){why}; restart in {self.next_start - now:.0f} s"

    def read(self) -> Iterator[tuple[str, Row]]:
        """The rows the reader has printed so far (its pipe does not block)."""
        if self.reader is None or self.reader.stdout is None or self.rows is None:
            return
        while True:
            try:
                chunk = os.read(self.reader.stdout.fileno(), 1 << 16)
            except (BlockingIOError, OSError):
                return
            if not chunk:
                return
            yield from self.rows.feed(chunk)


def reader_command(p: Probe, parser: Path, only: list[str]) -> list[str]:
    """What reads bpftrace's output: probe-to-csv --stream for one file; for a bundle,
    collector/probe-split --stream, which gives each family's lines to its own parser."""
    if p.members:
        split = parser.parent / "probe-split"
        return [str(split), "--stream", *(str(m.file) for m in p.members), "--only", ",".join(only)]
    return [str(parser), "--stream", str(p.file), "--only", ",".join(only)]


def spawn(p: Probe, parser: Path, only: list[str], err: Path) -> None:
    """bpftrace PROBE INTERVAL | its reader (reader_command), both children of the exporter,
    each in a session of its own (a terminal's Ctrl-C is the exporter's)."""
    p.err_path = err
    p.compiler_released_at = p.compiling_released_at = None
    p.compiler_freed_kb = 0
    # One malloc arena: bpftrace's threads each got one (glibc's default), -8 MB of PSS here.
    env = {**os.environ, "MALLOC_ARENA_MAX": "1"}
    with open(err, "wb") as fh:
        p.proc = subprocess.Popen(
            [os.environ.get("BPFTRACE", "bpftrace"), str(p.file), str(p.interval)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=fh,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        assert p.proc.stdout is not None
        p.reader = subprocess.Popen(
            reader_command(p, parser, only),
            stdin=p.proc.stdout,
            stdout=subprocess.PIPE,
            stderr=fh,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    p.proc.stdout.close()  # the reader's now
    assert p.reader.stdout is not None
    os.set_blocking(p.reader.stdout.fileno(), False)
    p.rows = CsvRows()


def _end(proc: subprocess.Popen[bytes], sig: int) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def reap(p: Probe) -> None:
    """Stop bpftrace (SIGINT: it detaches), then the reader (its input has ended)."""
    proc, reader, p.proc, p.reader = p.proc, p.reader, None, None
    p.misses_done += p.misses_now
    p.misses_now = 0
    if proc is not None:
        _end(proc, signal.SIGINT)
    if reader is not None:
        _end(reader, signal.SIGTERM)
        if reader.stdout is not None:
            reader.stdout.close()


class Supervisor:
    """Starts, drains, restarts and stops the probes; rows go to on_row(record, row)."""

    def __init__(self, probes: list[Probe], parser: Path, state: Path, rows_used: list[str], segment: float,
                 on_row: Callable[[str, Row], None]) -> None:  # fmt: skip
        self.probes, self.parser, self.state, self.rows_used = probes, parser, state, rows_used
        self.segment, self.on_row = segment, on_row
        self.sel = selectors.DefaultSelector()

    def start(self, p: Probe, reason: str | None, now: float) -> None:
        if reason:
            p.restarts[reason] = p.restarts.get(reason, 0) + 1
        spawn(p, self.parser, self.rows_used, self.state / f"probe_{p.family}.err")
        assert p.reader is not None and p.reader.stdout is not None
        self.sel.register(p.reader.stdout, selectors.EVENT_READ, p)
        p.started_at = now

    def stop(self, p: Probe) -> None:
        if p.reader is not None and p.reader.stdout is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(p.reader.stdout)
        reap(p)

    def tick(self, now: float) -> None:
        for p in self.probes:
            if p.proc is None:
                if now >= p.next_start:
                    self.start(p, "died" if p.failures_in_row else None, now)
            elif not p.running():
                self.died(p, now)
            else:
                if p.up():
                    p.failures_in_row = 0
                    self.release(p, now)
                else:
                    self.release_while_compiling(p, now)
                if self.segment and now - p.started_at >= self.segment and p.up():
                    # Planned restart: a fresh process with empty maps (a map holds 4096 keys;
                    # threads and flows come and go for days). Loses the last partial interval.
                    self.stop(p)
                    self.start(p, "segment", now)

    def release(self, p: Probe, now: float) -> None:
        """When the process prints, and again every RELEASE_EVERY_S: its compiler pages, not needed
        again (memory.py). Again, because a page another process maps too (a capture's bpftrace
        beside the monitor's) is not paged out: once that process has gone, it can be."""
        if p.proc is None or (p.compiler_released_at is not None and now - p.compiler_released_at < RELEASE_EVERY_S):
            return
        first = p.compiler_released_at is None and not p.restarts
        p.compiler_released_at = now
        freed = max(release_compiler_pages(p.proc.pid, measure=first), p.compiler_freed_kb if first else 0)
        if freed and first:
            # Not a sum: a page given back while it compiled may be read back and given back again.
            log(f"probe {p.family}: bpftrace's LLVM and clang pages given back while it compiled and once it "
                f"printed, up to {freed / 1024:.0f} MB of PSS at a time")  # fmt: skip

    def release_while_compiling(self, p: Probe, now: float) -> None:
        """The compiler pages bpftrace has touched so far, every RELEASE_WHILE_COMPILING_S until it
        prints: what it still needs it reads back from the page cache."""
        if p.proc is None or (
            p.compiling_released_at is not None and now - p.compiling_released_at < RELEASE_WHILE_COMPILING_S
        ):
            return
        p.compiling_released_at = now
        # Measured for the first process only (two smaps reads, 9 ms each): the log line's total.
        freed = release_compiler_pages(p.proc.pid, measure=not p.restarts)
        p.compiler_freed_kb = max(p.compiler_freed_kb, freed)

    def died(self, p: Probe, now: float) -> None:
        if p.proc is not None and p.proc.poll() is not None and p.reader is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.reader.wait(timeout=1)  # bpftrace is gone: the reader prints what is left
        self.drain(p)
        log(p.failed(now))
        self.stop(p)

    def wait(self, timeout: float) -> None:
        for key, _ in self.sel.select(timeout=timeout):
            self.drain(key.data)

    def drain(self, p: Probe) -> None:
        for rec, row in p.read():
            self.on_row(rec, row)

    def close(self) -> None:
        for p in self.probes:
            self.stop(p)
