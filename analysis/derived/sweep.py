"""Sweeps: lab runs over a grid of loads, each point measured and predicted.

scripts/sweep writes a sweep directory: sweep.json (kind, grid) and
points/<name>/ (one ordinary lab run each). This module measures every point
from its own files and asks analysis.models for the prediction with that point's
measured parameters: one row of aq_sweep.csv or tw_sweep.csv each.
analysis/render/sweep.py writes that table, sweep.md and plots/sweep.png.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import models
from analysis.contract import DERIVED_TABLES, Table
from analysis.derived.connects import queue_waits_ms, waited_syn_retry
from analysis.derived.counters import window_deltas
from analysis.load import Run, RunDataError, read_json, read_table


def _window_counters(run: Run, netns: int, t0: float, t1: float) -> tuple[dict[str, float], float]:
    """Counter deltas wholly inside the load window and the seconds they cover (derived.counters)."""
    got = window_deltas(run, netns, t0, t1)
    if got is None:
        raise RunDataError(f"{run.path}/counters.csv: fewer than 2 samples inside the load window")
    return got


def _simulated(lam: float, mu: float, k: int, stats: dict[str, Any]) -> models.QueuePrediction:
    """The simulation of one accept-queue point: its measured rates, the lab's accept delay distribution."""
    delay_s = float(stats.get("accept_delay_ms", 0.0)) / 1000.0
    mean_service = 1.0 / mu if mu > 0 else 0.0
    dist = stats.get("accept_delay_dist", "fixed")
    return models.simulate(
        lam,
        k,
        mean_service,
        service="exp" if dist == "exp" else "det",
        # The accept loop's own cost (timer slack, accept(), handing off)
        # comes on top of the configured delay: the floor of the service time.
        service_floor_s=max(mean_service - delay_s, 0.0),
    )


def _offered(cli: dict[str, Any], mu: float, k: int) -> tuple[float, float]:
    """The client's offered rate of new connections and M/M/1/K's overflow share at that rate.

    What a capacity plan without retries would predict: the gap to p_mm1k is what retries add."""
    m = re.search(r"-rate (\S+)", str(cli.get("load", "")))
    if not m:
        return float("nan"), float("nan")
    rate_offered = float(m.group(1))
    return rate_offered, models.mm1k(rate_offered, mu, k).p_block


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
    sim = _simulated(lam, mu, k, stats)
    waits = queue_waits_ms(conns)
    p_measured = overflows / attempts if attempts else 0.0
    rate_offered, p_offered = _offered(cli, mu, k)
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
        "p_mm1k_offered": p_offered,
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


def measure(sweep_dir: Path) -> tuple[str, pd.DataFrame]:
    """(kind, one row per finished point) of a sweep directory, in the columns of its contract table."""
    cfg_path = sweep_dir / "sweep.json"
    cfg = read_json(cfg_path, f"is {sweep_dir} a directory written by scripts/sweep?", schema="sweep")
    if cfg.get("kind") not in KINDS:
        raise RunDataError(f"{cfg_path}: kind must be one of {sorted(KINDS)}, not {cfg.get('kind')!r}")
    table_name, point = KINDS[cfg["kind"]]
    rows = [point(Run.open(p.parent)) for p in sorted((sweep_dir / "points").glob("*/metadata.json"))]
    if not rows:
        raise RunDataError(f"{sweep_dir}/points: no finished point to analyse")
    return cfg["kind"], pd.DataFrame(rows, columns=DERIVED_TABLES[table_name].column_names)


def table(kind: str) -> Table:
    """The contract table of a sweep kind (aq_sweep or tw_sweep)."""
    return DERIVED_TABLES[KINDS[kind][0]]


def load(sweep_dir: str | Path) -> tuple[str, pd.DataFrame]:
    """(kind, table) of an analysed sweep directory (notebooks)."""
    d = Path(sweep_dir)
    kind = json.loads((d / "sweep.json").read_text())["kind"]
    t = table(kind)
    return kind, read_table(d / t.file, t)


@dataclass(frozen=True)
class ModelErrors:
    """Mean absolute errors of the overflow share p against the measured one, over a sweep's points."""

    mm1k: float  # M/M/1/K
    mm1k_max: float
    sim: float  # the simulation
    baseline: float  # the K-free max(0, 1 - 1/rho)
    mm1k_knee: float  # near the knee, 0.7 <= rho <= 1.2, where K matters
    baseline_knee: float
    knee_points: int


def model_errors(df: pd.DataFrame) -> ModelErrors:
    err = (df["p_mm1k"] - df["p_measured"]).abs()
    base = ((1 - 1 / df["rho"]).clip(lower=0) - df["p_measured"]).abs()
    knee = (df["rho"] >= 0.7) & (df["rho"] <= 1.2)
    sim = (df["p_sim"] - df["p_measured"]).abs().mean()
    return ModelErrors(err.mean(), err.max(), sim, base.mean(), err[knee].mean(), base[knee].mean(), int(knee.sum()))
