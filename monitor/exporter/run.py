"""The exporter's loop: keep the probes running, turn their rows into objects, and after
each interval write the textfiles (objects, namespaces, the probes' health)."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import time
from pathlib import Path

from . import sampler, textfile
from .flows import FlowScan
from .health import Health
from .listeners import ListenerScan
from .metrics import FILES, PREFIX
from .objects import Tables, object_series
from .owners import OwnerScan
from .rows import ROWS_USED
from .sample import Namespaces, netns_series, scan_sockets, watch
from .stream import Row
from .supervise import Member, Probe, Supervisor, log
from .threads import ThreadScan, with_children

# What feeds metrics without any probe (the sampled tier): metric files always fed.
SAMPLED = {"sockets", "threads", "flows", "netns", "owners", "exporter"}


def _probes(args: argparse.Namespace) -> list[Probe]:
    """One Probe per --probe; with --one-process and several, one bundle of them all
    (collector/probe-bundle writes the program into --state-dir)."""
    out = []
    for spec in args.probe:  # FAMILY=FILE:TIER
        fam, _, rest = spec.partition("=")
        path, _, tier = rest.partition(":")
        out.append(Probe(fam, Path(path), tier or "unknown", args.interval))
    if not args.one_process or len(out) < 2:
        return out
    bundle = Path(args.state_dir) / "probes.bt"
    Path(args.state_dir).mkdir(parents=True, exist_ok=True)
    with open(bundle, "w") as f:
        subprocess.run([str(Path(args.pack_root) / "collector" / "probe-bundle"), *(str(p.file) for p in out)],
                       stdout=f, check=True)  # fmt: skip
    members = [Member(p.family, p.file, p.tier) for p in out]
    return [Probe("bundle", bundle, "+".join(sorted({p.tier for p in out})), args.interval, members)]


class Exporter:
    """What one write needs: the object tables, the namespaces, the probes."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.top = args, args.top
        self.out, self.state = Path(args.prom_dir), Path(args.state_dir)
        root = Path(args.pack_root)
        self.probes = _probes(args)
        self.tables = Tables(args.top, args.ttl, SAMPLED | {m.family for p in self.probes for m in p.families})
        self.fams = self.tables.fams
        self.ns = Namespaces(root / "collector" / "sample-netns")
        owners = self.state / "listener-owners"
        owners.mkdir(parents=True, exist_ok=True)
        self.listeners = ListenerScan(root / "collector" / "sample-netns", owners)
        self.threads = ThreadScan(root / "collector" / "sample-netns")
        self.flows = FlowScan(root / "collector" / "sample-netns", self.state / "flow-clocks")
        self.owners = OwnerScan(root / "collector" / "list-containers")
        self.loop_pids: set[int] = set()  # the processes of the last scan's loop threads
        self.sup = Supervisor(self.probes, root / "collector" / "probe-to-csv", self.state, list(ROWS_USED),
                              args.segment, self.row)  # fmt: skip
        self.health = Health(self.probes)
        self.socket_scan, self.series = 0.0, 0

    def row(self, rec: str, r: Row) -> None:
        handler = ROWS_USED.get(rec)
        if handler is not None:
            handler(self.tables, r, time.monotonic(), self.args.interval)

    def netns_to_watch(self) -> list[int]:
        return watch(self.ns, *self.tables.netns_in_use(time.monotonic()), self.top)

    def scan_sockets(self, now: float) -> None:
        if now - self.socket_scan >= self.args.socket_scan:
            self.socket_scan = now
            scan_sockets(self.fams["destination"], self.ns, self.netns_to_watch(), self.args.min_ports, now)

    def scan_objects(self, now: float) -> None:
        """The sampled tier, every write: listeners (sock_diag), then the threads of their
        owners and of the event loops the epoll probe named (procfs), then the flows (sock_diag)."""
        self.listeners.scan(self.fams["listener"], self.ns, self.netns_to_watch(), now)
        self.loop_pids = with_children(self.listeners.owners) | self.tables.probe_loop_pids(now)
        self.threads.scan(self.fams["loop"], self.loop_pids, now)
        self.flows.scan(self.fams["flow"], self.ns, self.netns_to_watch(), now)

    def write(self, now: float) -> None:
        self.tables.before_write(now)
        r = textfile.Round()
        object_series(self.fams, r.put)
        netns_series(self.ns, self.netns_to_watch(), r.put)
        self.owners.series(self.listeners.owners | self.loop_pids, self.listeners.holders, now, r.put)
        self.health.series(r.put, now)
        r.put("exporter_top_n", {}, self.top)
        r.put("exporter_series", {}, self.series)
        lines, self.series = r.render()
        textfile.write(self.out, lines)

    def run(self) -> int:
        return serve(self)


def serve(ex: Exporter) -> int:
    """Until a signal or --duration: probes supervised, rows read as they come, a write per
    interval. At the end the probes stop and the textfiles go (unless --keep-files)."""
    ex.out.mkdir(parents=True, exist_ok=True)
    ex.state.mkdir(parents=True, exist_ok=True)
    stop: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: stop.append(signum))
    log(
        f"writing {', '.join(PREFIX + f + '.prom' for f in FILES)} into {ex.out} every {ex.args.interval} s; "
        f"probes: {', '.join(f'{m.family} ({m.tier})' for p in ex.probes for m in p.families) or 'none'}"
        f"{' in one bpftrace' if any(p.members for p in ex.probes) else ''}; top {ex.top} per family"
    )
    try:
        _loop(ex, stop)
    finally:
        ex.sup.close()
        ex.listeners.close()
        ex.flows.close()
        sampler.close_all()
        if not ex.args.keep_files:
            textfile.remove(ex.out)
        (ex.state / "ready").unlink(missing_ok=True)
    log("stopped")
    return 0


def _loop(ex: Exporter, stop: list[int]) -> None:
    interval = ex.args.interval
    t0 = time.monotonic()
    next_write = t0 + interval
    while not stop:
        now = time.monotonic()
        if ex.args.duration and now - t0 >= ex.args.duration:
            break
        ex.sup.tick(now)
        ex.sup.wait(max(0.05, min(0.5, next_write - now)))
        now = time.monotonic()
        if now >= next_write:
            ex.ns.scan(now)
            ex.scan_objects(now)
            ex.scan_sockets(now)
            ex.write(now)
            next_write += interval
            if next_write < now:
                next_write = now + interval
            ready = ex.state / "ready"
            if not ready.exists() and all(p.up() for p in ex.probes):
                ready.write_text(f"{os.getpid()}\n")
                log("recording: every probe is up")
