"""PNG plots for reports and notebooks (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from .run import Run


def queue_depth(run: Run, netns: int, lport: int) -> Figure:
    """Accept-queue depth per interval against the limit, for one listener."""
    rows = run.table("aq_listener")
    rows = rows[(rows["netns"] == netns) & (rows["lport"] == lport)].sort_values("time_s")
    t = rows["time_s"].astype(float) - run.start
    fig, ax = plt.subplots(figsize=(8, 3.5))
    # Rows are stamped at the END of their interval, hence steps drawn "pre".
    peak = rows[["depth_max", "depth_now"]].max(axis=1)
    ax.step(t, peak, where="pre", label="max depth in interval")
    ax.plot(t, rows["depth_now"], "o-", ms=3, label="depth at interval end")
    ax.plot(t, rows["limit"], "--", color="red", label="limit (sk_max_ack_backlog)")
    full = rows[rows["full_events"] > 0]
    ax.scatter(
        full["time_s"].astype(float) - run.start,
        full["depth_max"],
        marker="x",
        color="red",
        zorder=3,
        label="full (depth > limit)",
    )
    ax.set_xlabel("seconds since capture start")
    ax.set_ylabel("connections queued")
    ax.set_title(f"Accept queue of port {lport} ({run.netns_label(netns)})")
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return fig


def counter_deltas(run: Run, netns: int, names: list[str]) -> Figure:
    wide = run.counter_deltas(netns, names)
    t = wide.index.to_series().astype(float) - run.start
    fig, ax = plt.subplots(figsize=(8, 3))
    for n in names:
        ax.plot(t, wide[n], "o-", ms=3, label=n)
    ax.set_xlabel("seconds since capture start")
    ax.set_ylabel("per sample")
    ax.set_title(f"Kernel counters in {run.netns_label(netns)}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def connect_latency(run: Run) -> Figure | None:
    c = run.table("connects")
    if c.empty:
        return None
    t = c["start_unix_ns"].astype("int64") / 1e9 - run.start
    fig, ax = plt.subplots(figsize=(8, 3.5))
    # Failures drawn last and larger, so a few of them stay visible over many successes.
    for result, grp in sorted(c.groupby("result"), key=lambda kv: kv[0] != "ok"):
        ok = result == "ok"
        ax.scatter(
            t[grp.index],
            grp["connect_us"].astype("int64") / 1000.0,
            s=6 if ok else 18,
            marker="o" if ok else "x",
            label=f"{result} ({len(grp)})",
        )
    ax.set_yscale("symlog", linthresh=1)
    ax.set_xlabel("seconds since capture start (connection start)")
    ax.set_ylabel("connect latency (ms)")
    ax.set_title("Client connect latency (steps at ~1 s, 2 s ... are SYN retransmits)")
    ax.legend(fontsize=7, markerscale=2)
    fig.tight_layout()
    return fig


def save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
