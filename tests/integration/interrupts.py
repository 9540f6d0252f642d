"""Interrupt trials: signal a driver's whole process group at some moment and
list what it left behind.

A terminal's Ctrl-C sends SIGINT to every process of the foreground job, so the
trials start each command in a process group of its own (as a shell does) and
signal the group. Used by tests/integration/test_interrupts.py (a few fixed
moments, in CI) and run by hand for the random trials the closing note reports:

    .venv/bin/python -m tests.integration.interrupts --trials 30
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATE_DIR = Path(os.environ.get("TQ_STATE_DIR", "/run/tcp-hidden-queues"))
OUR_BINARIES = ("aqserver", "connload", "connhold", "httpserver", "bpftrace", "iperf3", "nginx", "sample-netns")


def _preexec() -> None:
    # A background-launched test run inherits SIGINT ignored; a terminal's
    # foreground job never has it ignored.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.setpgid(0, 0)


@dataclass
class Leftovers:
    netns: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    processes: list[str] = field(default_factory=list)
    state_dirs: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.netns or self.links or self.processes or self.state_dirs)

    def __str__(self) -> str:
        return "; ".join(f"{k}: {v}" for k, v in vars(self).items() if v) or "nothing"


def alive(pid: int) -> bool:
    """Running, not a zombie (a killed lab waits for a reaper as a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _owner_alive(owner: str) -> bool:
    """An owner marker '<pid>.<start time>' names a process that still runs."""
    pid, _, start = owner.partition(".")
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return stat[19] == start and stat[0] != "Z"


def _stray(pid: int) -> str | None:
    """A process of this pack whose driver is gone: it carries the marker of a
    dead owner, or it runs from our tree without a marker and was orphaned.
    (Other people's live runs on the same machine are not leftovers.)"""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
    if pid == os.getpid():
        return None
    owner = next((e[9:].decode() for e in env if e.startswith(b"TQ_OWNER=")), None)
    if owner is not None:
        return None if _owner_alive(owner) else f"{pid} {cmd.strip()[:100]}"
    if ppid == 1 and str(ROOT) in cmd and any(b in cmd for b in OUR_BINARIES):
        return f"{pid} {cmd.strip()[:100]}"
    return None


def dead_runs_namespaces() -> list[str]:
    """Namespaces named tq-...-<pid> (every lab's) whose pid is gone."""
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    names = (line.split()[0] for line in ns.splitlines() if line.strip())
    return [n for n in names if (m := re.fullmatch(r"tq-.*-(\d+)", n)) and not alive(int(m.group(1)))]


def leftovers() -> Leftovers:
    """What dead runs left: namespaces whose lab pid is gone, veths in the host
    namespace, stray processes, state entries of dead owners."""
    left = Leftovers(netns=dead_runs_namespaces())
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    left.links = [m.group(1) for m in re.finditer(r"^\d+: (v[ab]\d+)[@:]", links, re.M)]
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and (hit := _stray(int(p.name))):
            left.processes.append(hit)
    if STATE_DIR.is_dir():
        left.state_dirs = sorted(d.name for d in STATE_DIR.iterdir() if d.is_dir() and not _owner_alive(d.name))
    return left


@dataclass
class Trial:
    command: list[str]
    sig: int
    delay: float
    rc: int | None = None
    seconds: float = 0.0
    output: str = ""
    left: Leftovers = field(default_factory=Leftovers)


def run_trial(
    command: list[str],
    sig: int,
    delay: float,
    timeout: float = 120,
    env: dict | None = None,
    again: float | None = None,
    after: Path | None = None,
) -> Trial:
    """Start command in its own process group, signal the group after delay s
    (and once more `again` s later: a user pressing Ctrl-C twice). With `after`,
    the delay counts from the moment that file exists (e.g. <run>/.capture-ready:
    the recording has begun), so the signal lands in the same phase however
    fast the start-up was."""
    t = Trial(command, sig, delay)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=_preexec,
        env={**os.environ, **(env or {})},
    )
    if after is not None:
        while not after.exists() and proc.poll() is None and time.monotonic() - t0 < timeout:
            time.sleep(0.05)
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, sig)
            if again is not None:
                time.sleep(again)
                os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        t.output = "TIMEOUT\n"
    t.rc = proc.returncode
    t.seconds = time.monotonic() - t0
    t.output += out.decode(errors="replace")
    t.left = leftovers()
    return t


LAB = ["make", "-s", "lab", "LAB=accept-overflow", "VARIANT=healthy"]
# make capture ends with the report: a signal after ~22 s lands in it (the run is finished by then).
CAPTURE = ["make", "-s", "capture", "DURATION=20", "OUT=/tmp/tq-interrupt-capture"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-delay", type=float, default=25.0, help="latest moment of the signal (s)")
    ap.add_argument(
        "--sigkill",
        action="store_true",
        help="SIGKILL instead (nothing can trap it): count what is left once the next driver has started",
    )
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    dirty = killed_left = 0
    for i in range(args.trials):
        cmd = rnd.choice([LAB, CAPTURE])
        sig = signal.SIGKILL if args.sigkill else rnd.choice([signal.SIGINT, signal.SIGTERM])
        delay = round(rnd.uniform(0.2, args.max_delay), 1)
        subprocess.run(["rm", "-rf", "/tmp/tq-interrupt-capture"])
        t = run_trial(cmd, sig, delay)
        note = ""
        if args.sigkill:
            killed_left += bool(t.left)
            # The next run of a driver reaps first (here: a capture that only reaps).
            nxt = subprocess.run([str(ROOT / "collector" / "capture"), "--reap"], capture_output=True, text=True)
            note = f" | next driver said: {nxt.stderr.strip() or 'nothing'}"
            t.left = leftovers()
        dirty += bool(t.left)
        print(
            f"{i + 1:2d} {cmd[2]:8s} {signal.Signals(sig).name:7s} at {delay:5.1f}s: rc {t.rc}, "
            f"{t.seconds:5.1f}s, left: {t.left}{note}",
            flush=True,
        )
        if t.left:
            subprocess.run([str(ROOT / "collector" / "capture"), "--reap"], capture_output=True)
    if args.sigkill:
        print(
            f"{args.trials} SIGKILL trials: {killed_left} left something at the kill, "
            f"{dirty} with leftovers once the next driver had started"
        )
    else:
        print(f"{args.trials} trials, {dirty} with leftovers")
    return 1 if dirty else 0


if __name__ == "__main__":
    raise SystemExit(main())
