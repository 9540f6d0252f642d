"""Sweeps: lab runs over a grid of loads, each point measured and predicted.

scripts/sweep writes a sweep directory: sweep.json (kind, grid) and
points/<name>/ (one ordinary lab run each). This module measures every point
from its own files, asks analysis.models for the prediction with that point's
measured parameters, and writes aq_sweep.csv or tw_sweep.csv, sweep.md and
plots/sweep.png.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import models
from analysis.contract.schemas import DERIVED_TABLES
from analysis.derived.connects import queue_waits_ms, waited_syn_retry
from analysis.derived.counters import window_deltas
from analysis.load.run import Run, RunDataError, read_json, read_table


def _window_counters(run: Run, netns: int, t0: float, t1: float) -> tuple[dict[str, float], float]:
    """Counter deltas wholly inside the load window and the seconds they cover (derived.counters)."""
    got = window_deltas(run, netns, t0, t1)
    if got is None:
        raise RunDataError(f"{run.path}/counters.csv: fewer than 2 samples inside the load window")
    return got


def accept_queue_point(run: Run) -> dict[str, Any]:
    lab = run.lab or {}
    srv = lab.get("server") or {}
    stats = srv.get("stats") or {}
    if "service_seconds" not in stats:
        raise RunDataError(
            f"{run.path}/metadata.json: no server stats with service_seconds (an accept-overflow lab run?)"
        )
    cli = lab.get("client") or {}
    ino = int(srv["netns_inode"])
    conns = run.table("connects")
    t0 = conns["start_unix_ns"].min() / 1e9
    t1 = conns["start_unix_ns"].max() / 1e9
    deltas, seconds = _window_counters(run, ino, t0, t1)
    overflows = deltas.get("ListenOverflows", 0.0)
    opens = deltas.get("PassiveOpens", 0.0)
    attempts = overflows + opens
    lam = attempts / seconds
    mu = stats["accepted"] / stats["service_seconds"] if stats["service_seconds"] > 0 else 0.0
    aq = run.table("aq_listener")
    aq = aq[(aq["netns"] == ino) & (aq["lport"] == int(srv["port"]))]
    limit = int(aq["limit"].max())
    k = models.accept_queue_capacity(limit)
    mm = models.mm1k(lam, mu, k)
    delay_s = float(stats.get("accept_delay_ms", 0.0)) / 1000.0
    mean_service = 1.0 / mu if mu > 0 else 0.0
    dist = stats.get("accept_delay_dist", "fixed")
    sim = models.simulate(
        lam,
        k,
        mean_service,
        service="exp" if dist == "exp" else "det",
        # The accept loop's own cost (timer slack, accept(), handing off)
        # comes on top of the configured delay: the floor of the service time.
        service_floor_s=max(mean_service - delay_s, 0.0),
    )
    waits = queue_waits_ms(conns)
    p_measured = overflows / attempts if attempts else 0.0
    m = re.search(r"-rate (\S+)", str(cli.get("load", "")))
    rate_offered = float(m.group(1)) if m else float("nan")
    # The same model fed the offered rate of NEW connections only: what a capacity
    # plan without retries would predict. The gap to p_mm1k is what retries add.
    naive = models.mm1k(rate_offered, mu, k) if m else None
    return {
        "point": run.path.name,
        "rate_offered": rate_offered,
        "backlog": int(srv.get("backlog_requested", 0)),
        "limit": limit,
        "capacity_k": k,
        "lam": lam,
        "mu": mu,
        "rho": lam / mu if mu else float("inf"),
        "attempts": int(attempts),
        "p_measured": p_measured,
        "p_mm1k": mm.p_block,
        "p_sim": sim.p_block,
        "p_mm1k_offered": naive.p_block if naive else float("nan"),
        "wait_ms_measured": float(waits.mean()) if not waits.empty else float("nan"),
        "wait_ms_mm1k": mm.wait_s * 1000.0,
        "abs_error": mm.p_block - p_measured,
    }


def time_wait_point(run: Run) -> dict[str, Any]:
    cli = (run.lab or {}).get("client") or {}
    if "port_range" not in cli:
        raise RunDataError(f"{run.path}/metadata.json: no client port_range (a time-wait lab run?)")
    lo, hi = (int(x) for x in str(cli["port_range"]).split())
    ports = hi - lo + 1
    rate = float(cli["rate_per_s"])
    load_s = float(cli["load_seconds"])
    conns = run.table("connects")
    t0 = conns["start_unix_ns"].min()
    fails = conns[conns["errno"] == "EADDRNOTAVAIL"]
    tw = run.table("tw_sockets")
    tw = tw[tw["netns"] == int(cli["netns_inode"])]
    per_sample = tw.groupby("time_s")["count"].sum()
    first = models.tw_first_failure(rate, ports, load_s)
    return {
        "point": run.path.name,
        "rate": rate,
        "ports": ports,
        "load_s": load_s,
        "tw_predicted": models.tw_level(rate, load_s, ports),
        "tw_measured": int(per_sample.max()) if not per_sample.empty else 0,
        "first_fail_s_predicted": first,
        "first_fail_s_measured": (fails["start_unix_ns"].min() - t0) / 1e9 if not fails.empty else None,
        "fail_fraction_predicted": models.tw_fail_fraction(rate, ports, load_s),
        "fail_fraction_measured": len(fails) / len(conns) if len(conns) else 0.0,
    }


def burst_point(run: Run) -> dict[str, Any]:
    """The sizing lab's bursts against the simulation: periodic bursts, deterministic service.

    Predicted: the share of each burst's connections whose first attempt finds
    the queue full (no retries in the model). Measured: the share of the lab's
    connections whose connect took >= 0.9 s, i.e. waited for a SYN retry.
    """
    lab = run.lab or {}
    srv, cli = lab.get("server") or {}, lab.get("client") or {}
    stats = srv.get("stats") or {}
    load = str(cli.get("load", ""))
    m_burst, m_every = re.search(r"-burst (\d+)", load), re.search(r"-burst-every (\d+(?:\.\d+)?)s", load)
    if not (m_burst and m_every and stats.get("accepted")):
        raise RunDataError(f"{run.path}/metadata.json: not a burst-mode accept-overflow run with server stats")
    burst, every = int(m_burst.group(1)), float(m_every.group(1))
    service = float(stats.get("service_seconds") or 0) / stats["accepted"] or float(stats["accept_delay_ms"]) / 1000
    aq = run.table("aq_listener")
    aq = aq[(aq["netns"] == int(srv["netns_inode"])) & (aq["lport"] == int(srv["port"]))]
    limit = int(aq["limit"].max())
    k = models.accept_queue_capacity(limit)
    sim = models.simulate(
        burst / every, k, service, service="det", batch=burst, arrivals="periodic", customers=burst * 50
    )
    conns = run.table("connects")
    waited = float(waited_syn_retry(conns).mean())
    return {
        "burst": burst,
        "every_s": every,
        "limit": limit,
        "capacity_k": k,
        "service_ms": round(service * 1000, 3),
        "p_first_attempt_blocked_sim": round(sim.p_block, 3),
        "p_waited_syn_retry_measured": round(waited, 3),
    }


KINDS = {
    "accept-queue": ("aq_sweep", accept_queue_point),
    "time-wait": ("tw_sweep", time_wait_point),
}


def write(sweep_dir: str | Path) -> tuple[Path, pd.DataFrame]:
    from analysis.render import plots
    from analysis.wording import sweep_markdown

    d = Path(sweep_dir)
    cfg_path = d / "sweep.json"
    cfg = read_json(cfg_path, f"is {d} a directory written by scripts/sweep?", schema="sweep")
    if cfg.get("kind") not in KINDS:
        raise RunDataError(f"{cfg_path}: kind must be one of {sorted(KINDS)}, not {cfg.get('kind')!r}")
    table_name, measure = KINDS[cfg["kind"]]
    rows = []
    for p in sorted((d / "points").glob("*/metadata.json")):
        rows.append(measure(Run.open(p.parent)))
    if not rows:
        raise RunDataError(f"{d}/points: no finished point to analyse")
    t = DERIVED_TABLES[table_name]
    df = pd.DataFrame(rows, columns=t.column_names)
    out = d / t.file
    df.to_csv(out, index=False)
    df = read_table(out, t)
    fig = plots.sweep(cfg["kind"], df)
    plots.save(fig, d / "plots" / "sweep.png")
    md = d / "sweep.md"
    md.write_text(sweep_markdown(cfg["kind"], df, "plots/sweep.png"))
    return md, df


def load(sweep_dir: str | Path) -> tuple[str, pd.DataFrame]:
    """(kind, table) of an analysed sweep directory (notebooks)."""
    d = Path(sweep_dir)
    kind = json.loads((d / "sweep.json").read_text())["kind"]
    t = DERIVED_TABLES[KINDS[kind][0]]
    return kind, read_table(d / t.file, t)
