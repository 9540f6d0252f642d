"""The outputs of a sweep directory (scripts/sweep).

analysis/derived/sweep.py measures every point and predicts it; this module writes
that table (aq_sweep.csv or tw_sweep.csv), sweep.md and plots/sweep.png.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from analysis.derived.sweep import measure, model_errors, table
from analysis.load import read_table
from analysis.render import markdown as md
from analysis.wording import is_missing
from analysis.wording.numbers import num


def write(sweep_dir: str | Path) -> tuple[Path, pd.DataFrame]:
    from analysis.render import plots

    d = Path(sweep_dir)
    kind, df = measure(d)
    t = table(kind)
    out = d / t.file
    df.to_csv(out, index=False)
    df = read_table(out, t)
    fig = plots.sweep(kind, df)
    plots.save(fig, d / "plots" / "sweep.png")
    out = d / "sweep.md"
    out.write_text(markdown(kind, df, "plots/sweep.png"))
    return out, df


def markdown(kind: str, df: Any, plot: str) -> str:
    """sweep.md: the measured points against the model, the errors, the plot."""
    lines = _accept_queue(df) if kind == "accept-queue" else _time_wait(df)
    lines += ["", md.image("predicted vs measured", plot), ""]
    return md.document(lines)


def _accept_queue(df: Any) -> list[str]:
    e = model_errors(df)
    lines = [
        "# Accept-queue sweep: M/M/1/K and simulation against measurement",
        "",
        "Each point: one `accept-overflow queue` lab run (Poisson arrivals, exponential accept delay). "
        "lam and mu are measured at that point (attempts in the load window, accepted / service seconds); "
        "K = limit + 2. p = ListenOverflows / attempts.",
        "",
        f"Mean absolute error of M/M/1/K: {e.mm1k:.3f} (max {e.mm1k_max:.3f}); of the simulation: "
        f"{e.sim:.3f}; of the K-free baseline max(0, 1 - 1/rho): "
        f"{e.baseline:.3f}. Near the knee (0.7 <= rho <= 1.2, where K matters): M/M/1/K "
        f"{e.mm1k_knee:.3f}, baseline {e.baseline_knee:.3f} over {e.knee_points} points. "
        "Far past the knee any model whose throughput is mu fits (overflow share = 1 - opens/attempts), "
        "so those points test the measurement more than the model.",
        "",
    ]
    rows = (_aq_row(r) for _, r in df.sort_values(["backlog", "rate_offered"]).iterrows())
    lines += md.table(_AQ_COLUMNS, rows)
    return [*lines, "", _WHERE_THE_MODEL_BREAKS]


_AQ_COLUMNS = (
    "backlog", "limit", "offered/s", "lam/s", "mu/s", "rho", "measured p", "M/M/1/K p", "sim p", "error (pp)",
    "M/M/1/K p from offered rate", "wait ms measured", "wait ms M/M/1/K",
)  # fmt: skip


def _aq_row(r: Any) -> list[str]:
    return [
        r["backlog"], r["limit"], num(r["rate_offered"], ".0f"), f"{r['lam']:.0f}", f"{r['mu']:.0f}",
        num(r["rho"], ".2f"), f"{r['p_measured']:.3f}", f"{r['p_mm1k']:.3f}", f"{r['p_sim']:.3f}",
        f"{100 * r['abs_error']:+.1f}", num(r["p_mm1k_offered"], ".3f"),
        num(r["wait_ms_measured"], ".1f"), num(r["wait_ms_mm1k"], ".1f"),
    ]  # fmt: skip


_WHERE_THE_MODEL_BREAKS = (
    "Where the model breaks: retries are not in it. A dropped SYN or final ACK comes back about 1 s "
    "later, so past rho = 1 the attempt rate lam runs well above the offered rate of new connections; "
    "fed the measured attempts the model fits, fed only the offered rate (the column 'from offered "
    "rate', what a capacity plan would use) it under-predicts overload. Waits are means over answered "
    "connections whose reply came within 0.9 s (longer ones were retransmitted, not queued); in overload "
    "the measured waits still run above the model's, since they include 200-400 ms request retransmits "
    "of connections whose final ACK was dropped. A stalled "
    "accept loop is not a queue with a service rate at all: use the `stall` variant's evidence chain."
)


def _time_wait(df: Any) -> list[str]:
    lines = [
        "# TIME_WAIT sweep: TW = rate x 60 s and the knee at ports / 60 s",
        "",
    ]
    return lines + md.table(_TW_COLUMNS, (_tw_row(r) for _, r in df.sort_values("rate").iterrows()))


_TW_COLUMNS = (
    "rate/s", "ports", "load s", "TW predicted", "TW measured", "first EADDRNOTAVAIL predicted s", "measured s",
    "fail share predicted", "measured",
)  # fmt: skip


def _tw_row(r: Any) -> list[str]:
    return [
        f"{r['rate']:g}", r["ports"], f"{r['load_s']:g}", f"{r['tw_predicted']:.0f}", r["tw_measured"],
        _one_decimal(r["first_fail_s_predicted"]), _one_decimal(r["first_fail_s_measured"]),
        f"{r['fail_fraction_predicted']:.3f}", f"{r['fail_fraction_measured']:.3f}",
    ]  # fmt: skip


def _one_decimal(x: Any) -> str:
    return "-" if is_missing(x) else f"{x:.1f}"
