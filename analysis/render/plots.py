"""PNG plots for reports and notebooks (matplotlib, no display needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

# Files only, no display, unless a notebook kernel draws inline.
if "ipykernel" not in sys.modules:
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from analysis.derived import counters
from analysis.derived.epoll import per_process, per_thread, wait_share
from analysis.derived.retransmits import segments_per_interval
from analysis.derived.socket_buffers import Side, limited_series
from analysis.derived.time_wait import littles_law
from analysis.kernel import TCP_TIMEWAIT_LEN_S
from analysis.load import Run


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
    wide = counters.per_sample(run, netns, names)
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
    ax.legend(fontsize=7, markerscale=2, loc="upper right")  # "best" scans every point: slow on a long capture
    fig.tight_layout()
    return fig


def save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def retransmits(run: Run, netns: int) -> Figure:
    """Probe retransmitted segments per interval against the kernel's RetransSegs per sample."""
    per = segments_per_interval(run, netns)
    k = counters.per_sample(run, netns, ["RetransSegs"])["RetransSegs"]
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
    ll = littles_law(run, netns, raddr, port)
    t = ll.index.to_series().astype(float) - run.start
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.plot(t, ll["measured"], label="TIME_WAIT sockets (ss)")
    ax.plot(t, ll["predicted"], "--", label=f"active closes in the last {TCP_TIMEWAIT_LEN_S} s (Little's law)")
    if ports:
        ax.axhline(ports, color="red", ls=":", label=f"ports in range ({ports})")
    ax.set_xlabel("seconds since capture start")
    ax.set_ylabel("sockets")
    ax.set_title(f"TIME_WAIT toward {raddr}:{port} ({run.netns_label(netns)})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def event_loop(run: Run, pid: int, tid: int | None = None) -> Figure:
    """One loop thread's blocked share and events (the whole process's when tid is None: contract 2)."""
    if tid is None:
        pp = per_process(run)
        rows = pp[pp["pid"] == pid].sort_values("time_s")
    else:
        pt = per_thread(run)
        rows = pt[(pt["pid"] == pid) & (pt["tid"] == tid)].sort_values("time_s")
    interval = float(run.metadata.get("interval_s", 1))
    t = rows["time_s"].astype(float) - run.start
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.plot(t, 100 * wait_share(rows, interval), "o-", ms=3, label="% of interval blocked")
    ax.set_ylabel("% of interval blocked in epoll")
    ax2 = ax.twinx()
    ax2.plot(t, rows["events_sum"].astype(float) / interval, "s--", ms=3, color="tab:orange", label="events/s")
    ax2.set_ylabel("events per second")
    ax.set_xlabel("seconds since capture start")
    who = f"pid {pid}" + (f", tid {tid}" if tid is not None and tid != pid else "")
    ax.set_title(f"Event loop of {rows['comm'].iloc[0] if len(rows) else pid} ({who})")
    fig.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return fig


def socket_buffers(run: Run, sender: Side, receiver: Side | None) -> Figure:
    """One flow per sample: the share of each sample's time its sender had data to send and was held
    back by the receiver's window or its own send buffer (tcp_info's clocks), and the queues on both
    ends (the sender's Send-Q, the receiver's Recv-Q)."""
    s = limited_series(run, sender)
    t = s["time_s"].astype(float) - run.start
    dt = s["time_s"].diff().fillna(1.0).clip(lower=1e-3) * 1000
    fig, (top, low) = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
    top.step(t, 100 * s["busy_ms"] / dt, where="pre", label="busy (data to send)")
    top.step(t, 100 * s["rwnd_limited_ms"] / dt, where="pre", label="held back by the receiver's window")
    top.step(t, 100 * s["sndbuf_limited_ms"] / dt, where="pre", label="held back by its send buffer")
    top.set_ylabel("% of each sample")
    top.set_ylim(0, 110)
    top.legend(fontsize=7, loc="lower right")
    low.plot(t, s["send_q"] / 1024, "o-", ms=3, label="sender Send-Q")
    if receiver is not None:
        r = limited_series(run, receiver)
        low.plot(r["time_s"].astype(float) - run.start, r["recv_q"] / 1024, "o-", ms=3, label="receiver Recv-Q")
        if receiver.rcvbuf:
            low.axhline(receiver.rcvbuf / 1024, ls="--", color="red", label="receiver rcvbuf")
    low.set_ylabel("KB")
    low.set_xlabel("seconds since capture start")
    low.legend(fontsize=7, loc="upper right")
    flow = f"{sender.laddr}:{sender.lport} -> {sender.raddr}:{sender.rport}"
    top.set_title(f"Flow {flow} ({run.netns_label(sender.netns)})")
    fig.tight_layout()
    return fig


def comparison(long: pd.DataFrame, summary: pd.DataFrame, cfg: dict) -> Figure:
    """Per metric, each run's value under A and B with the means: the raw evidence of a comparison."""
    metrics = list(summary["metric"])
    cols = min(4, max(1, len(metrics)))
    nrows = (len(metrics) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(3.2 * cols, 2.8 * nrows), squeeze=False)
    for ax in axes.flat[len(metrics) :]:
        ax.set_visible(False)
    for ax, (_, row) in zip(axes.flat, summary.iterrows(), strict=False):
        sub = long[long["metric"] == row["metric"]]
        for x, side in enumerate(("A", "B")):
            vals = sub[sub["side"] == side]["value"]
            ax.plot([x] * len(vals), vals, "o", alpha=0.6, color=("tab:blue", "tab:orange")[x])
            ax.hlines(vals.mean(), x - 0.25, x + 0.25, color="black")
        ax.set_xticks([0, 1], [f"A {cfg.get('a')}", f"B {cfg.get('b')}"], fontsize=7)
        mark = " *" if row["significant"] else ""
        ax.set_title(f"{row['label']}{mark}", fontsize=7)
        ax.tick_params(axis="y", labelsize=7)
        ax.set_xlim(-0.6, 1.6)
    fig.suptitle(f"{cfg.get('lab')} / {cfg.get('variant')}: per-run values (bar = mean, * = significant)", fontsize=9)
    fig.tight_layout()
    return fig


def sweep(kind: str, df: pd.DataFrame) -> Figure:
    """Predicted against measured for every sweep point."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    if kind == "accept-queue":
        ax = axes[0]
        top = max(df[["p_measured", "p_mm1k", "p_sim"]].max().max(), 0.01) * 1.1
        ax.plot([0, top], [0, top], "--", color="grey", lw=1, label="prediction = measurement")
        for backlog, g in df.groupby("backlog"):
            ax.plot(g["p_measured"], g["p_mm1k"], "o", label=f"M/M/1/K, backlog {backlog}")
            ax.plot(
                g["p_measured"], g["p_sim"], "x", color=ax.lines[-1].get_color(), label=f"simulation, backlog {backlog}"
            )
        ax.plot(
            df["p_measured"], df["p_mm1k_offered"], "+", color="grey", label="M/M/1/K from offered rate (no retries)"
        )
        ax.set_xlabel("measured overflow fraction (ListenOverflows / attempts)")
        ax.set_ylabel("predicted")
        ax.set_title("Accept-queue overflow: predicted vs measured", fontsize=9)
        ax.legend(fontsize=6)
        ax = axes[1]
        for backlog, g in df.groupby("backlog"):
            g = g.sort_values("rho")
            ax.plot(g["rho"], g["p_measured"], "o-", label=f"measured, backlog {backlog}")
            ax.plot(g["rho"], g["p_mm1k"], "--", color=ax.lines[-1].get_color(), label=f"M/M/1/K, backlog {backlog}")
        ax.set_xlabel("rho = measured attempt rate / measured accept rate")
        ax.set_ylabel("overflow fraction")
        ax.set_title("Where the queue saturates", fontsize=9)
        ax.legend(fontsize=6)
    else:
        df = df.sort_values("rate")
        knee = float(df["ports"].iloc[0]) / TCP_TIMEWAIT_LEN_S
        ax = axes[0]
        ax.plot(df["rate"], df["tw_predicted"], "--", label=f"predicted min(rate x {TCP_TIMEWAIT_LEN_S} s, ports)")
        ax.plot(df["rate"], df["tw_measured"], "o", label="measured peak TIME_WAIT")
        ax.axvline(knee, color="red", lw=1, label=f"knee ports / {TCP_TIMEWAIT_LEN_S} s = {knee:.2f}/s")
        ax.set_xlabel("client connections per second")
        ax.set_ylabel("TIME_WAIT sockets")
        ax.legend(fontsize=7)
        ax = axes[1]
        ax.plot(df["rate"], df["fail_fraction_predicted"], "--", label="predicted share failing")
        ax.plot(df["rate"], df["fail_fraction_measured"], "o", label="measured share EADDRNOTAVAIL")
        ax.axvline(knee, color="red", lw=1)
        ax.set_xlabel("client connections per second")
        ax.set_ylabel("share of attempts")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
