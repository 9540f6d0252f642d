"""The CSV tables the analysis writes from many runs (comparison and sweep directories)."""

from __future__ import annotations

import pandera.pandas as pa

from .columns import FLOAT, INT, NONNEG, STR, Col, Table

# Tables the analysis derives from many runs (scripts/compare, scripts/sweep).
# They live in comparison and sweep directories, not in run directories, so
# they are kept apart from TABLES (which Run.validate_all walks).
DERIVED_TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table(
            "compare_runs",
            "runs.csv",
            "analysis/render/compare.py (python -m analysis compare)",
            1,
            "One row per lab run of a comparison and metric: the raw values the intervals are built from.",
            (
                Col("run", STR, "run directory name under runs/ (order number and profile)"),
                Col("profile", STR, "sysctl profile the run was made under"),
                Col("side", STR, "A or B", (pa.Check.isin(["A", "B"]),)),
                Col("repeat", INT, "repetition number, 1-based; A and B of one repeat ran back to back", NONNEG),
                Col("metric", STR, "metric key (see summary.csv for its label and unit)"),
                Col("value", FLOAT, "the run's value of the metric"),
            ),
        ),
        Table(
            "compare_summary",
            "summary.csv",
            "analysis/render/compare.py (python -m analysis compare)",
            1,
            "Per metric: A and B means, B - A and its bootstrap 95 % confidence interval.",
            (
                Col("metric", STR, "metric key"),
                Col("label", STR, "what the metric counts, with its unit"),
                Col("n_a", INT, "runs under profile A", NONNEG),
                Col("n_b", INT, "runs under profile B", NONNEG),
                # Empty when a side has no value for the metric (no run measured it).
                Col("a_mean", FLOAT, "mean over A runs", nullable=True),
                Col("b_mean", FLOAT, "mean over B runs", nullable=True),
                Col("diff", FLOAT, "b_mean - a_mean", nullable=True),
                Col("ci_low", FLOAT, "lower end of the 95 % bootstrap interval of the difference", nullable=True),
                Col("ci_high", FLOAT, "upper end of the 95 % bootstrap interval of the difference", nullable=True),
                Col("significant", INT, "1 if the interval excludes 0", (pa.Check.isin([0, 1]),)),
            ),
        ),
        Table(
            "aq_sweep",
            "aq_sweep.csv",
            "analysis/models.py (python -m analysis sweep)",
            1,
            "Accept-queue sweep: per point, the measured queue against the M/M/1/K prediction "
            "and the simulation, both parameterised from that point's measured rates.",
            (
                Col("point", STR, "point directory name"),
                Col("rate_offered", FLOAT, "new connections per second the load generator was asked for", NONNEG),
                Col("backlog", INT, "listen() backlog requested", NONNEG),
                Col("limit", INT, "effective accept-queue limit read by the probe (sk_max_ack_backlog)", NONNEG),
                Col(
                    "capacity_k",
                    INT,
                    "K of the model: limit + 1 queued (the kernel's full test is >) + 1 in service",
                    NONNEG,
                ),
                Col(
                    "lam",
                    FLOAT,
                    "measured attempt rate in the load window: (PassiveOpens + ListenOverflows) / s",
                    NONNEG,
                ),
                Col("mu", FLOAT, "measured accept rate while busy: accepted / service seconds", NONNEG),
                Col("rho", FLOAT, "lam / mu", NONNEG),
                Col("attempts", INT, "PassiveOpens + ListenOverflows in the load window", NONNEG),
                Col("p_measured", FLOAT, "ListenOverflows / attempts in the load window", (pa.Check.in_range(0, 1),)),
                Col("p_mm1k", FLOAT, "M/M/1/K blocking probability", (pa.Check.in_range(0, 1),)),
                Col("p_sim", FLOAT, "simulated blocking probability (ciw)", (pa.Check.in_range(0, 1),)),
                Col(
                    "p_mm1k_offered",
                    FLOAT,
                    "M/M/1/K fed the offered rate of new connections instead of the measured attempts (no retries)",
                    (pa.Check.in_range(0, 1),),
                ),
                Col(
                    "wait_ms_measured",
                    FLOAT,
                    "mean reply time minus connect time of answered connections, waits under 0.9 s (ms)",
                    nullable=True,
                ),
                Col("wait_ms_mm1k", FLOAT, "M/M/1/K mean wait in queue of accepted arrivals (ms)", NONNEG),
                Col("abs_error", FLOAT, "p_mm1k - p_measured (percentage points / 100)"),
            ),
        ),
        Table(
            "tw_sweep",
            "tw_sweep.csv",
            "analysis/models.py (python -m analysis sweep)",
            1,
            "TIME_WAIT sweep: per client rate, the measured TIME_WAIT plateau and first EADDRNOTAVAIL "
            "against TW = rate x 60 s and the knee ports / 60 s.",
            (
                Col("point", STR, "point directory name"),
                Col("rate", FLOAT, "new connections per second", NONNEG),
                Col("ports", INT, "ephemeral ports in the client's range", NONNEG),
                Col("load_s", FLOAT, "seconds of load", NONNEG),
                Col("tw_predicted", FLOAT, "min(rate x min(load, 60 s), ports)", NONNEG),
                Col("tw_measured", INT, "peak TIME_WAIT sockets toward the server (ss samples)", NONNEG),
                Col(
                    "first_fail_s_predicted",
                    FLOAT,
                    "ports / rate when that comes before the load ends; empty otherwise",
                    nullable=True,
                ),
                Col(
                    "first_fail_s_measured",
                    FLOAT,
                    "seconds from load start to the first EADDRNOTAVAIL; empty if none",
                    nullable=True,
                ),
                Col("fail_fraction_predicted", FLOAT, "share of attempts expected to fail", (pa.Check.in_range(0, 1),)),
                Col(
                    "fail_fraction_measured",
                    FLOAT,
                    "share of attempts that failed with EADDRNOTAVAIL",
                    (pa.Check.in_range(0, 1),),
                ),
            ),
        ),
    )
}
