"""collector/sample-netns kept running for the exporter's calls (its --serve mode): the one
reader of the namespaces' counters, listeners, threads and flows, as capture reads them.
Bash takes about 6 million instructions to start that script, and the exporter asks four or
five times every interval (docs/cost.md), so one process per sampler path answers them all.
It ends when its stdin does: with the exporter, however the exporter ends."""

from __future__ import annotations

import contextlib
import secrets
import subprocess
from pathlib import Path


class Sampler:
    """One `sample-netns --serve` process: a request is a mode and its arguments, the answer
    that mode's stdout, up to the line holding this process's token."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.proc: subprocess.Popen[str] | None = None
        self.token = ""

    def _start(self) -> subprocess.Popen[str]:
        # A random token ends each answer: no row can hold it by chance. Bytes that are no
        # UTF-8 (a comm may hold any byte but NUL) are kept as \xNN escapes.
        self.token = f"#sample-netns-end-{secrets.token_hex(8)}"
        self.proc = subprocess.Popen([str(self.path), "--serve", self.token], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     errors="backslashreplace", bufsize=1)  # fmt: skip
        return self.proc

    def ask(self, *args: str) -> str:
        """The mode's stdout, "" when the sampler could not answer (it is started again once
        when it ended, e.g. a Ctrl-C to the process group)."""
        if any("\t" in a or "\n" in a for a in args):
            raise ValueError(f"sample-netns request with a tab or newline: {args!r}")
        for _ in range(2):
            proc = self.proc if self.proc is not None and self.proc.poll() is None else self._start()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write("\t".join(args) + "\n")
                proc.stdin.flush()
                lines = []
                for line in proc.stdout:
                    if line.rstrip("\n") == self.token:
                        return "".join(lines)
                    lines.append(line)
            except OSError:
                pass
            self.close()
        return ""

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        for f in (proc.stdin, proc.stdout):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


_SAMPLERS: dict[Path, Sampler] = {}


def ask(path: Path, *args: str) -> str:
    """What `path *args` prints, from the one --serve process kept for that path."""
    sampler = _SAMPLERS.get(path)
    if sampler is None:
        sampler = _SAMPLERS[path] = Sampler(path)
    return sampler.ask(*args)


def close_all() -> None:
    """End every sampler process (the exporter's exit; each also ends with its stdin)."""
    for sampler in _SAMPLERS.values():
        sampler.close()
    _SAMPLERS.clear()
