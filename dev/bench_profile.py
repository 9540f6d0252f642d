"""bench_profile: where a window's CPU went, from `perf script -F comm,ip,sym,dso` of a
system-wide `perf record -e cpu-clock -c PERIOD` (dev/bench-overhead --profile).

Under qemu -icount shift=0 the guest's cpu-clock advances one nanosecond per executed
instruction, so a sample every PERIOD ns of it is a sample every PERIOD instructions: the
counts below, times PERIOD, are instructions (on a real CPU they are CPU time).

Each sample is put under its task (comm, with a kernel thread's per-CPU suffix dropped:
kworker/0:1 -> kworker) and a class: "bpf" (a JIT-ed BPF program: bpf_prog_*), "jit" (code
in the module area perf could not name: a BPF program or trampoline it was not told of),
"kernel" (any other kernel symbol: the tracepoints' dispatch is there, in the task whose
event it was) or "user".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

# "  comm  ffffffff81000000 symbol (dso)": the comm may hold spaces, the symbol (not demangled)
# does not, the dso is the rest in parentheses (a deleted file's path ends "(deleted)").
LINE = re.compile(r"^\s*(?P<comm>.*?)\s+(?P<ip>[0-9a-f]+)\s+(?P<sym>\S+)\s+\((?P<dso>.*)\)\s*$")
KERNEL_THREAD = re.compile(r"^(kworker|ksoftirqd|migration|rcu_\w+|cpuhp|idle_inject|irq)/.*$")
TOP_SYMBOLS = 40


def task(comm: str) -> str:
    """A comm with a kernel thread's CPU or queue suffix dropped; "swapper" is the idle task."""
    m = KERNEL_THREAD.match(comm)
    return m.group(1) if m else comm


# x86-64's module area, where BPF programs are JIT-ed too (ffffffffa0000000 up): code there
# perf could not name is a BPF program (or trampoline) it was not told of, not kernel text.
MODULE_AREA = 0xFFFFFFFFA0000000


def klass(ip: str, sym: str, dso: str) -> str:
    if sym.startswith("bpf_prog_"):
        return "bpf"
    kernel_ip = len(ip) == 16 and ip.startswith("ffff")
    if sym == "[unknown]" and kernel_ip and int(ip, 16) >= MODULE_AREA:
        return "jit"
    if dso.startswith("[kernel") or kernel_ip:
        return "kernel"
    return "user"


def parse(lines: Iterable[str]) -> dict[str, Any]:
    """The samples of one window: by task and class, the top symbols, and lines not understood."""
    by: Counter[tuple[str, str]] = Counter()
    syms: Counter[tuple[str, str, str]] = Counter()
    samples = unparsed = 0
    for line in lines:
        if not line.strip():
            continue
        m = LINE.match(line)
        if not m:
            unparsed += 1
            continue
        t, k = task(m["comm"]), klass(m["ip"], m["sym"], m["dso"])
        by[t, k] += 1
        syms[t, k, m["sym"]] += 1
        samples += 1
    return {
        "samples": samples,
        "unparsed": unparsed,
        "by_task": [[t, k, n] for (t, k), n in sorted(by.items())],
        "top_symbols": [[t, k, s, n] for (t, k, s), n in syms.most_common(TOP_SYMBOLS)],
    }


def per_task(profile: dict[str, Any]) -> Counter[tuple[str, str]]:
    return Counter({(t, k): n for t, k, n in profile.get("by_task", [])})


def case_profile(runs: list[dict[str, Any]], case: str) -> dict[str, Any] | None:
    """A case's profiled windows summed, base and with apart: per (task, class) and per top
    symbol, instructions (samples x period) a connection of the profiled windows' wrk."""
    out: dict[str, Any] = {}
    for kind in ("base", "with"):
        prof = [r["profile"] for r in runs if r["case"] == case and r["kind"] == kind and r.get("profile")]
        reqs = sum(p["requests"] for p in prof)
        if not prof or not reqs:
            return None
        tasks: Counter[tuple[str, str]] = Counter()
        syms: Counter[tuple[str, str, str]] = Counter()
        for p in prof:
            tasks.update(per_task(p))
            syms.update({(t, k, s): n for t, k, s, n in p["top_symbols"]})
        per = prof[0]["period_ns"] / reqs
        out[kind] = {
            "windows": len(prof),
            "requests": reqs,
            "unparsed": sum(p["unparsed"] for p in prof),
            "tasks": {f"{t}/{k}": n * per for (t, k), n in tasks.items()},
            "symbols": {f"{t}/{k}/{s}": n * per for (t, k, s), n in syms.items()},
        }
    return out


def diff_rows(cp: dict[str, Any], what: str, top: int) -> list[tuple[str, float, float, float]]:
    """(name, base, with, with - base) a connection, the largest differences first."""
    b, w = cp["base"][what], cp["with"][what]
    rows = [(k, b.get(k, 0.0), w.get(k, 0.0), w.get(k, 0.0) - b.get(k, 0.0)) for k in set(b) | set(w)]
    return sorted(rows, key=lambda r: -abs(r[3]))[:top]
