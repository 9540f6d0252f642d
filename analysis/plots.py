"""PNG plots for reports and notebooks (matplotlib, no display needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

# Files only, no display, unless a notebook kernel draws inline.
if "ipykernel" not in sys.modules:
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


def retransmits(run: Run, netns: int) -> Figure:
    """Probe retransmitted segments per interval against the kernel's RetransSegs per sample."""
    rt = run.table("rt_endpoint")
    rt = rt[rt["netns"] == netns]
    per = (rt["data_segs"] + rt["syn_segs"] + rt["synack_segs"]).groupby(rt["time_s"]).sum()
    k = run.counter_deltas(netns, ["RetransSegs"])["RetransSegs"]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.step(per.index.astype(float) - run.start, per, where="pre", label="probe: retransmitted segments")
    ax.plot(k.index.astype(float) - run.start, k, "o", ms=4, label="kernel: TcpRetransSegs delta")
    ax.set_xlabel("seconds since capture start")
    ax.set_ylabel("segments per interval")
    ax.set_title(f"Retransmits in {run.netns_label(netns)}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def time_wait(run: Run, netns: int, raddr: str, port: int, ports: int | None) -> Figure:
    from .rules.time_wait import littles_law

    ll = littles_law(run, netns, raddr, port)
    t = ll.index.to_series().astype(float) - run.start
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.plot(t, ll["measured"], label="TIME_WAIT sockets (ss)")
    ax.plot(t, ll["predicted"], "--", label="active closes in the last 60 s (Little's law)")
    if ports:
        ax.axhline(ports, color="red", ls=":", label=f"ports in range ({ports})")
    ax.set_xlabel("seconds since capture start")
    ax.set_ylabel("sockets")
    ax.set_title(f"TIME_WAIT toward {raddr}:{port} ({run.netns_label(netns)})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def event_loop(run: Run, pid: int) -> Figure:
    from .rules.epoll import per_process

    pp = per_process(run)
    rows = pp[pp["pid"] == pid].sort_values("time_s")
    interval = float(run.metadata.get("interval_s", 1))
    t = rows["time_s"].astype(float) - run.start
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.plot(t, 100 * rows["wait_ns_sum"].astype(float) / (interval * 1e9), "o-", ms=3, label="% of interval blocked")
    ax.set_ylabel("% of interval blocked in epoll")
    ax2 = ax.twinx()
    ax2.plot(t, rows["events_sum"].astype(float) / interval, "s--", ms=3, color="tab:orange", label="events/s")
    ax2.set_ylabel("events per second")
    ax.set_xlabel("seconds since capture start")
    ax.set_title(f"Event loop of {rows['comm'].iloc[0] if len(rows) else pid} (pid {pid})")
    fig.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return fig
