"""bench_overhead_summary: the table at the end of dev/bench-overhead (and of dev/vm/bench-vm), from
the JSON lines dev/bench_overhead.py record wrote: per case its ratio against the null case, the
BPF time and own CPU per connection, PSS, and under -icount the instruction-counted figures.

USAGE: bench_overhead_summary.py RUNS.jsonl TXT JSON META.json
"""

from __future__ import annotations

import json
import statistics
import sys
from typing import Any

import bench_profile

DASH = "\u2013"  # en dash, between the ends of a range
TIMES = "\u00d7"
MICRO = "\u00b5"


def fmt_range(xs: list[float], f: str = "{:.3f}") -> str:
    return (f + DASH + f).format(min(xs), max(xs)) if xs else "-"


def case_summary(c: str, runs: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    """One A/B case: its numbers into summary, its table line returned."""
    base = {r["pair"]: r for r in runs if r["case"] == c and r["kind"] == "base"}
    with_ = {r["pair"]: r for r in runs if r["case"] == c and r["kind"] == "with"}
    # The BPF-time windows' wrk requests: every per-connection BPF figure divides by them.
    reqs = sum(with_[p].get("stats_requests", 0) for p in with_)
    cs = case_numbers(c, base, with_, reqs)
    summary["cases"][c] = cs
    line = case_line(c, cs)
    agg = program_totals(with_)
    summary["programs"].extend(program_rows(c, agg, reqs))
    misses = case_recursion_misses(agg, with_)
    if misses is not None:
        summary["recursion_misses"][c] = misses
    return line


def case_numbers(c: str, base: dict[int, dict], with_: dict[int, dict], reqs: int) -> dict[str, Any]:
    """A case's with/base throughput ratios per pair, BPF time per connection and start-up times."""
    ratios = [with_[p]["rps"] / base[p]["rps"] for p in sorted(base) if p in with_ and base[p]["rps"] > 0]
    # Requests per busy CPU second of the whole machine, with over base (cpu_ratio_lines).
    eff = [
        (with_[p]["requests"] / with_[p]["cpu_busy_s"]) / (base[p]["requests"] / base[p]["cpu_busy_s"])
        for p in sorted(base)
        if p in with_ and with_[p].get("cpu_busy_s") and base[p].get("cpu_busy_s") and base[p]["requests"]
    ]
    timed_cpu = [r for r in [*base.values(), *with_.values()] if r.get("cpu_busy_s")]
    idle = [r["cpu_idle_s"] / (r["cpu_idle_s"] + r["cpu_busy_s"] + r["cpu_steal_s"]) for r in timed_cpu]
    steal = [r["cpu_steal_s"] / (r["cpu_idle_s"] + r["cpu_busy_s"] + r["cpu_steal_s"]) for r in timed_cpu]
    ns = sum(with_[p].get("bpf_ns", 0) for p in with_)
    us_conn = ns / reqs / 1000 if reqs and c != "samplers" else None
    us_pairs = [
        with_[p]["bpf_ns"] / with_[p]["stats_requests"] / 1000
        for p in with_
        if with_[p].get("stats_requests") and "bpf_ns" in with_[p]
    ]
    starts = [with_[p]["startup_s"] for p in with_ if "startup_s" in with_[p]]
    pss = [with_[p]["pss_bytes"] / 1e6 for p in with_ if with_[p].get("pss_bytes")]
    # The case's own processes (bpftrace's user space, the samplers and what they
    # fork): CPU beside the BPF time, which the kernel counts apart.
    timed = [r for r in with_.values() if "cpu_s" in r and r.get("wrk_seconds")]
    cpu_s = sum(r["cpu_s"] for r in timed)
    cpu_reqs = sum(r.get("requests", 0) for r in timed)
    return {
        "pairs": len(ratios),
        "ratios": ratios,
        "ratio_median": statistics.median(ratios) if ratios else None,
        "ratio_min": min(ratios) if ratios else None,
        "ratio_max": max(ratios) if ratios else None,
        "cpu_ratios": eff,
        "cpu_ratio_median": statistics.median(eff) if eff else None,
        "idle_share_max": max(idle) if idle else None,
        "steal_share_max": max(steal) if steal else None,
        "base_rps_median": statistics.median([base[p]["rps"] for p in base]) if base else None,
        "with_rps_median": statistics.median([with_[p]["rps"] for p in with_]) if with_ else None,
        "bpf_us_per_conn": us_conn,
        "bpf_us_per_conn_pairs": us_pairs,
        "startup_s": starts,
        "startup_s_median": statistics.median(starts) if starts else None,
        "pss_mb": pss,
        "pss_mb_median": statistics.median(pss) if pss else None,
        "cpu_us_per_conn": cpu_s / cpu_reqs * 1e6 if cpu_reqs else None,
        "cpu_share": cpu_s / sum(r["wrk_seconds"] for r in timed) if timed else None,
        "socket_errors": sum(r.get("socket_errors", 0) for r in list(base.values()) + list(with_.values())),
        "bpf_stats_off_runs": sum(1 for r in with_.values() if r.get("bpf_stats_on") is False),
    }


def case_line(c: str, cs: dict[str, Any]) -> str:
    """A case's line in the A/B table (the columns of summarize's header)."""
    ratios, starts = cs["ratios"], cs["startup_s"]
    us_conn, us_pairs = cs["bpf_us_per_conn"], cs["bpf_us_per_conn_pairs"]
    return (
        f"{c:<22}{len(ratios):>6}{(format(cs['ratio_median'], '.3f') + TIMES) if ratios else '-':>14}"
        f"  {fmt_range(ratios):<14}{cs['base_rps_median'] or 0:>11.0f}{cs['with_rps_median'] or 0:>11.0f}"
        f"  {(format(us_conn, '.2f') + ' (' + fmt_range(us_pairs, '{:.1f}') + ')') if us_conn is not None else '-':<22}"
        f"{(format(cs['startup_s_median'], '.1f') + ' (' + fmt_range(starts, '{:.1f}') + ')') if starts else '-':<26}"
        f"{format(cs['pss_mb_median'], '.0f') if cs['pss_mb_median'] else '-':>6}"
        f"  {own_cpu(cs)}"
    )


def own_cpu(cs: dict[str, Any]) -> str:
    """The case's own CPU during the wrk windows: per connection, and as a share of one CPU."""
    if cs.get("cpu_share") is None:
        return "-"
    return f"{cs['cpu_us_per_conn']:.2f} ({100 * cs['cpu_share']:.1f} %)"


def program_totals(with_: dict[int, dict]) -> dict[tuple[str, str, str], dict[str, int]]:
    """Per program (family, name, tracepoint): events, ns and recursion misses summed over the pairs."""
    agg: dict[tuple[str, str, str], dict[str, int]] = {}
    for r in with_.values():
        for p in r.get("programs", []):
            k = (p["family"], p["name"], p["tracepoint"])
            e = agg.setdefault(k, {"events": 0, "ns": 0, "recursion_misses": 0})
            e["events"] += p["events"]
            e["ns"] += p["ns"]
            e["recursion_misses"] += p["recursion_misses"]
    return agg


def program_rows(c: str, agg: dict[tuple[str, str, str], dict[str, int]], reqs: int) -> list[dict[str, Any]]:
    """A case's programs for summary["programs"], the costliest first, per event and per connection."""
    return [
        {
            "case": c,
            "family": fam,
            "program": name,
            "tracepoint": tp,
            "events": e["events"],
            "ns": e["ns"],
            "ns_per_event": e["ns"] / e["events"] if e["events"] else None,
            "events_per_conn": e["events"] / reqs if reqs else None,
            "us_per_conn": e["ns"] / reqs / 1000 if reqs else None,
            "recursion_misses": e["recursion_misses"],
        }
        for (fam, name, tp), e in sorted(agg.items(), key=lambda kv: -kv[1]["ns"])
    ]


def case_recursion_misses(agg: dict[tuple[str, str, str], dict[str, int]], with_: dict[int, dict]) -> dict | None:
    """Recursion misses per family in the wrk windows and over whole captures; None when there were none."""
    miss: dict[str, int] = {}
    for (fam, _, _), e in agg.items():
        miss[fam] = miss.get(fam, 0) + e["recursion_misses"]
    cap: dict[str, int] = {}
    for r in with_.values():
        for fam, v in (r.get("capture_misses") or {}).items():
            if v is not None:
                cap[fam] = cap.get(fam, 0) + v
    if miss or cap:
        return {"wrk_windows": miss, "whole_captures": cap}
    return None


def program_lines(summary: dict[str, Any], ab_cases: list[str]) -> list[str]:
    L = ["", "Per program (sums over the BPF-time windows of the case's pairs; events/conn = events / wrk requests)"]
    L.append(
        f"{'case':<22}{'probe':<14}{'program':<18}{'tracepoint':<24}{'events':>10}{'ns/event':>10}"
        f"{'events/conn':>13}{MICRO + 's/conn':>9}{'rec.miss':>9}"
    )
    for p in summary["programs"]:
        if not p["events"]:
            continue
        L.append(
            f"{p['case']:<22}{p['family']:<14}{p['program'][:16]:<17}{p['tracepoint'][:25]:<26}"
            f"{p['events']:>10}{p['ns_per_event']:>10.0f}{p['events_per_conn']:>13.3f}"
            f"{p['us_per_conn']:>9.3f}{p['recursion_misses']:>9}"
        )
    for c in ab_cases:
        idle = sorted({p["tracepoint"] for p in summary["programs"] if p["case"] == c and not p["events"]})
        if idle:
            L.append(f"  {c}: no events in the windows on {', '.join(idle)}")
    return L


def misses_lines(summary: dict[str, Any]) -> list[str]:
    L = [
        "",
        "Recursion misses per probe (kernel skipped the program): during the wrk windows, and whole "
        "captures (metadata.json), summed over the pairs",
    ]
    for c, m in summary["recursion_misses"].items():
        fams = sorted(set(m["wrk_windows"]) | set(m["whole_captures"]))
        L.append(
            f"  {c:<22}"
            + "  ".join(f"{f} {m['wrk_windows'].get(f, '-')} ({m['whole_captures'].get(f, '-')})" for f in fams)
        )
    return L


def net_of_floor_lines(summary: dict[str, Any], cpus: int) -> list[str]:
    """BPF time per connection less what bpf_stats itself adds: it reads the clock around every
    program run, and the floor case's empty program costs that read and nothing else. Only when
    the floor case ran. With the case's own CPU, what a connection costs in CPU, and the
    throughput ratio that predicts on a host whose CPUs the load keeps busy (this benchmark's):
    less noisy than the A/B ratio, which pairs of runs minutes apart decide."""
    floor = [p for p in summary["programs"] if p["case"] == "floor" and p["events"]]
    if not floor:
        return []
    floor_ns = floor[0]["ns_per_event"]
    L = [
        "",
        f"CPU per connection: BPF less bpf_stats' own clock read ({floor_ns:.0f} ns per run: the floor's empty "
        f"program), plus the case's own processes; the ratio that predicts with {cpus} CPUs busy at the base rate",
    ]
    for c, cs in summary["cases"].items():
        mine = [p for p in summary["programs"] if p["case"] == c and p["events_per_conn"] is not None]
        if c in ("floor", "null") or (cs.get("bpf_us_per_conn") is None and cs.get("cpu_us_per_conn") is None):
            continue
        net = sum(max(0.0, p["ns_per_event"] - floor_ns) * p["events_per_conn"] for p in mine if p["events"]) / 1000
        added = net + (cs.get("cpu_us_per_conn") or 0.0)
        per_conn = cpus * 1e6 / cs["base_rps_median"] if cs.get("base_rps_median") else None
        cs["bpf_us_per_conn_net_of_floor"] = net
        cs["cpu_added_us_per_conn"] = added
        cs["ratio_predicted"] = per_conn / (per_conn + added) if per_conn else None
        pred = f"{cs['ratio_predicted']:.3f}{TIMES}" if per_conn else "-"
        bpf = f"{cs['bpf_us_per_conn']:.2f}" if cs.get("bpf_us_per_conn") is not None else "-"
        L.append(f"  {c:<22}BPF {bpf} as measured, {net:.2f} net; + own {cs.get('cpu_us_per_conn') or 0:.2f} = "
                 f"{added:.2f} {MICRO}s/conn; predicts {pred}")  # fmt: skip
    return L


def against_null_lines(summary: dict[str, Any], key: str = "ratios", title: str = "") -> list[str]:
    """Each case's ratios (summary key `key`) against the null case's, when it ran: the A/B
    method's own spread on this machine (a bpftrace process with no tracepoint loads nothing a
    connection pays for). Whether the case's median lies within that spread, and a two-sided
    Mann-Whitney U test of the two sets of ratios: a p-value well above 0.05 says this many pairs
    tell no difference, not that there is none (the CPU lines above say how large one could be)."""
    null = summary["cases"].get("null", {}).get(key) or []
    if len(null) < 2:
        return []
    lo, hi = min(null), max(null)
    L = ["", f"{title}Against the null case ({len(null)} pairs, {fmt_range(null)}{TIMES}): median within its "
             "spread; Mann-Whitney U, two-sided"]  # fmt: skip
    for c, cs in summary["cases"].items():
        ratios = cs.get(key) or []
        if c == "null" or len(ratios) < 2:
            continue
        from scipy import stats  # here: the guest's python3 (record) has no scipy

        p = float(stats.mannwhitneyu(ratios, null, alternative="two-sided").pvalue)
        median = statistics.median(ratios)
        within = lo <= median <= hi
        cs.setdefault("against_null", {})[key] = {"median_within_null_spread": within, "mann_whitney_p": p}
        L.append(f"  {c:<22}{median:.3f}{TIMES} {'within' if within else 'OUTSIDE'}; p = {p:.3f}")
    return L


def cpu_ratio_lines(summary: dict[str, Any]) -> list[str]:
    """Requests per busy CPU second of the whole machine, with over base, per case: the cost a
    connection pays in CPU, measured (BPF, the case's own processes and any syscall slow path
    alike) rather than predicted, and not moved by how much CPU the VM's neighbours left a run
    (steal); still moved by the machine's own speed (docs/cost.md, "Cost on a busy server"). Equal to
    the throughput ratio on a host whose CPUs the load keeps busy; the idle share says how busy
    they were."""
    rows = {c: cs for c, cs in summary["cases"].items() if cs.get("cpu_ratios")}
    if not rows:
        return []
    L = ["", "Requests per busy CPU second (the whole machine's user+system+irq time over the wrk window), "
             "with / base: median (min" + DASH + "max); the runs' highest idle and steal shares"]  # fmt: skip
    for c, cs in rows.items():
        r = cs["cpu_ratios"]
        L.append(f"  {c:<22}{cs['cpu_ratio_median']:.3f}{TIMES} ({fmt_range(r)})  idle {cs['idle_share_max']:.1%}, "
                 f"steal {cs['steal_share_max']:.1%}")  # fmt: skip
    return L + against_null_lines(summary, "cpu_ratios", "Per busy CPU second. ")


def spread(xs: list[float]) -> float | None:
    """(max - min) / median: the spread of a case's per-pair ratios (None below 2 pairs)."""
    return (max(xs) - min(xs)) / statistics.median(xs) if len(xs) >= 2 else None


def pairs_of(runs: list[dict[str, Any]], c: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """A case's complete pairs (base, with), in pair order: a pair whose loaded run did not
    start, or whose wrk counted nothing, is no pair."""
    base = {r["pair"]: r for r in runs if r["case"] == c and r["kind"] == "base"}
    with_ = {r["pair"]: r for r in runs if r["case"] == c and r["kind"] == "with"}
    return [(base[p], with_[p]) for p in sorted(base) if p in with_ and base[p]["rps"] > 0 and with_[p]["rps"] > 0]


def icount_numbers(runs: list[dict[str, Any]], c: str) -> dict[str, Any]:
    """A case measured in a guest under -icount shift=0 (1 ns of guest time = 1 instruction):
    per pair the ratio and what a connection costs more with the case loaded, in guest ns
    (instructions), 1e9 / with rps - 1e9 / base rps; medians, and the windows' context
    switches per request and idle shares (a window off by a mode shows in them)."""
    prs = pairs_of(runs, c)
    ratios = [w["rps"] / b["rps"] for b, w in prs]
    cost = [1e9 / w["rps"] - 1e9 / b["rps"] for b, w in prs]

    def window(r: dict[str, Any]) -> dict[str, Any]:
        busy, idle = r.get("cpu_busy_s") or 0.0, r.get("cpu_idle_s") or 0.0
        return {
            "rps": r["rps"],
            "ctxt_per_request": r["ctxt"] / r["requests"] if r.get("ctxt") is not None and r["requests"] else None,
            "idle_share": idle / (busy + idle) if busy + idle else None,
        }

    return {
        "pairs": len(prs),
        "ratios": ratios,
        "ratio_median": statistics.median(ratios) if ratios else None,
        "ratio_spread": spread(ratios),
        "guest_ns_per_conn_pairs": cost,
        "guest_ns_per_conn": statistics.median(cost) if cost else None,
        "base_windows": [window(b) for b, _ in prs],
        "with_windows": [window(w) for _, w in prs],
    }


def icount_lines(summary: dict[str, Any], runs: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    """The table of a run counted in instructions (dev/vm/bench-vm): requests per guest second,
    each case's median ratio and its spread, what a connection costs more in guest ns, bpf_stats'
    guest ns a connection, and the null case's spread as the method's error bar. The rule, fixed
    before any run: a case's ratio is the median of its pairs (>= 7), no window is dropped."""
    vm = meta.get("vm") or {}
    L = [
        "",
        f"Counted in instructions: {vm.get('release', '?')} guest, Linux {meta['kernel']}, {meta['bpftrace']}, "
        f"qemu TCG -icount shift=0,sleep=off, 1 vCPU (1 guest ns = 1 instruction); host CPU hogs "
        f"{vm.get('host_hogs', 0)}, host load {vm.get('host_load_start', '?')} -> {vm.get('host_load_end', '?')}, "
        f"{vm.get('host_seconds', 0):.0f} s of host time",
        "ratio: median of the case's pairs (no window dropped); spread: (max - min) / median of its pair "
        "ratios; cost: 1e9/with - 1e9/base requests per guest second, guest ns (instructions) a connection, "
        "median of the pairs; BPF: bpf_stats' run time a connection in the guest (guest ns)",
        f"{'case':<22}{'pairs':>6}{'base req/gs':>13}{'with req/gs':>13}{'ratio':>9}{'spread':>9}"
        f"{'vs null':>9}{'cost ns/conn':>14}{'BPF ns/conn':>13}  ctxt/req base, with",
    ]
    null = icount_numbers(runs, "null") if any(r["case"] == "null" for r in runs) else None
    null_med = null["ratio_median"] if null else None
    summary["icount"] = {"cases": {}, "null_spread": null["ratio_spread"] if null else None}
    for c, cs in summary["cases"].items():
        ic = icount_numbers(runs, c)
        summary["icount"]["cases"][c] = ic
        if not ic["ratios"]:
            continue
        vs_null = ic["ratio_median"] / null_med if null_med and c != "null" else None
        if vs_null is not None:
            ic["ratio_vs_null"] = vs_null
            lo, hi = min(null["ratios"]), max(null["ratios"])  # type: ignore[index]
            ic["within_null_range"] = lo <= ic["ratio_median"] <= hi
        bpf = cs.get("bpf_us_per_conn")
        ctxt_b = [w["ctxt_per_request"] for w in ic["base_windows"] if w["ctxt_per_request"] is not None]
        ctxt_w = [w["ctxt_per_request"] for w in ic["with_windows"] if w["ctxt_per_request"] is not None]
        L.append(
            f"{c:<22}{ic['pairs']:>6}{statistics.median([w['rps'] for w in ic['base_windows']]):>13.0f}"
            f"{statistics.median([w['rps'] for w in ic['with_windows']]):>13.0f}"
            f"{ic['ratio_median']:>8.4f}{TIMES}{100 * (ic['ratio_spread'] or 0):>8.2f}%"
            f"{(format(vs_null, '.4f') + TIMES) if vs_null is not None else '-':>9}"
            f"{ic['guest_ns_per_conn']:>14.0f}{format(bpf * 1000, '.0f') if bpf is not None else '-':>13}"
            f"  {format(statistics.median(ctxt_b), '.2f') if ctxt_b else '-'}, "
            f"{format(statistics.median(ctxt_w), '.2f') if ctxt_w else '-'}"
        )
    if null and null["ratio_spread"] is not None:
        L.append(
            f"null spread (the method's error bar): {100 * null['ratio_spread']:.2f} % over {null['pairs']} pairs "
            f"({fmt_range(null['ratios'], '{:.4f}')}{TIMES})"
        )
    L.append("Windows, requests per guest second in pair order (base | with):")
    for c, ic in summary["icount"]["cases"].items():
        b = " ".join(f"{w['rps']:.0f}" for w in ic["base_windows"])
        w = " ".join(f"{w['rps']:.0f}" for w in ic["with_windows"])
        L.append(f"  {c:<22}{b} | {w}")
    return L


def profile_lines(summary: dict[str, Any], runs: list[dict[str, Any]], cases: list[str]) -> list[str]:
    """--profile: per case, where the instructions (CPU ns on a real CPU) a connection went, by
    task and class, the profiled base windows against the profiled with windows."""
    L: list[str] = []
    summary["profile"] = {}
    for c in cases:
        cp = bench_profile.case_profile(runs, c)
        if cp is None:
            continue
        summary["profile"][c] = cp
        b, w = cp["base"], cp["with"]
        total_b, total_w = sum(b["tasks"].values()), sum(w["tasks"].values())
        L += [
            "",
            f"Profile of {c}: perf cpu-clock samples (under -icount: instructions) a connection, "
            f"{b['windows']} base windows ({b['requests']} requests) against {w['windows']} with ({w['requests']}); "
            f"lines not understood {b['unparsed'] + w['unparsed']}",
            f"  {'task/class':<34}{'base':>10}{'with':>10}{'more':>10}",
        ]
        L += [f"  {k:<34}{x:>10.0f}{y:>10.0f}{d:>+10.0f}" for k, x, y, d in bench_profile.diff_rows(cp, "tasks", 16)]
        L.append(f"  {'all':<34}{total_b:>10.0f}{total_w:>10.0f}{total_w - total_b:>+10.0f}")
        L.append("  the symbols that moved most (each window's 40 most sampled only):")
        L += [f"    {k:<60}{d:>+10.0f}" for k, _, _, d in bench_profile.diff_rows(cp, "symbols", 12)]
    return L


def rates_lines(rates: list[dict[str, Any]], summary: dict[str, Any]) -> list[str]:
    L = ["", "Output bytes per second, full capture (probe_<family>.out; samplers: their CSV files)"]
    kinds = [r for r in rates if r["kind"] in ("low", "high")]
    fams = sorted({f for r in kinds for f in r.get("output_bytes", {})})
    L.append(f"{'window':<8}{'conn/s':>9}{'seconds':>9}" + "".join(f"{f:>14}" for f in fams))
    for r in kinds:
        w = r.get("window_s") or 1
        bps = {f: r.get("output_bytes", {}).get(f, 0) / w for f in fams}
        summary["output_bytes_per_s"][r["kind"]] = {
            "conn_per_s": r.get("requests", 0) / w,
            "window_s": w,
            "bytes_per_s": bps,
        }
        L.append(f"{r['kind']:<8}{r.get('requests', 0) / w:>9.0f}{w:>9.1f}" + "".join(f"{bps[f]:>14.0f}" for f in fams))
    return L


def notes_lines(summary: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    notes = []
    for c, cs in summary["cases"].items():
        if cs["socket_errors"]:
            notes.append(f"{c}: wrk reported {cs['socket_errors']} socket errors over the case's runs")
        if cs["bpf_stats_off_runs"]:
            notes.append(
                f"{c}: kernel.bpf_stats_enabled was found off (changed by someone else) in "
                f"{cs['bpf_stats_off_runs']} run(s); it was turned back on"
            )
    for r in runs:
        if r.get("capture_complete") is False:
            notes.append(f"{r['case']} pair {r['pair']}: the capture run was not complete ({r.get('capture_status')})")
    return ["", *("note: " + n for n in notes)] if notes else []


def summarize(argv: list[str]) -> None:
    runs_path, txt, js, meta_path = argv
    with open(runs_path) as f:
        runs = [json.loads(line) for line in f if line.strip()]
    with open(meta_path) as f:
        meta = json.load(f)
    L = [
        "bench-overhead: loopback nginx (one process: master_process off, keepalive_timeout 0), "
        f"wrk -t1 -c{meta['connections']} -H 'Connection: close', {meta['seconds']} s per run, "
        f"{meta['pairs']} A/B pairs per case (order alternating), settle {meta.get('settle_seconds', '?')} s, "
        f"samplers' CPU budget {meta.get('cpu_budget', 'default')}",
        f"host: {meta['cpus']} CPUs, Linux {meta['kernel']}, {meta['bpftrace']}; load average at start "
        f"{meta['load_start']}, at end {meta['load_end']}; run took {meta['elapsed_s']:.0f} s",
        "throughput with kernel.bpf_stats_enabled=0; BPF time from run_time_ns/run_cnt deltas over a "
        f"{meta.get('stats_seconds', '?')} s wrk window after each loaded one, bpf_stats on, programs of this run's "
        "bpftrace processes only (the whole machine's events)",
    ]
    summary: dict[str, Any] = {"cases": {}, "programs": [], "recursion_misses": {}, "output_bytes_per_s": {}}
    ab_cases = [c for c in meta["cases"] if c not in ("rates",)]
    if ab_cases:
        L.append("")
        L.append(
            f"{'case':<22}{'pairs':>6}{'ratio median':>14}{'  min' + DASH + 'max':<16}{'base req/s':>11}"
            f"{'with req/s':>11}  {'BPF ' + MICRO + 's/conn (min' + DASH + 'max)':<22}"
            f"{'start-up s median (min' + DASH + 'max)':<26}{'PSS MB':>6}  own CPU {MICRO}s/conn (% of a CPU)"
        )
    for c in ab_cases:
        L.append(case_summary(c, runs, summary))
    if summary["programs"]:
        L.extend(program_lines(summary, ab_cases))
        L.extend(net_of_floor_lines(summary, int(meta["cpus"])))
    if meta.get("icount"):
        L.extend(icount_lines(summary, runs, meta))
    L.extend(profile_lines(summary, runs, ab_cases))
    L.extend(against_null_lines(summary))
    if not meta.get("icount"):
        L.extend(cpu_ratio_lines(summary))
    if summary["recursion_misses"]:
        L.extend(misses_lines(summary))
    rates = [r for r in runs if r["case"] == "rates"]
    if rates:
        L.extend(rates_lines(rates, summary))
    L.extend(notes_lines(summary, runs))
    text = "\n".join(L) + "\n"
    with open(txt, "w") as f:
        f.write(text)
    with open(js, "w") as f:
        json.dump({"meta": meta, "summary": summary, "runs": runs}, f, indent=1)
    sys.stdout.write(text)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    summarize(sys.argv[1:])
