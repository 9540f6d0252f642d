"""The JSON files (metadata.json with its "lab" block, doctor.json, compare.json, verdict.json,
sweep.json): one JSON Schema (draft 2020-12) each, validated by the loaders and documented like the CSVs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from analysis.families import NAMES

from .columns import EPOCH_MAX, EPOCH_MIN

JSON_RULES = (
    "JSON files are UTF-8; a byte that is not valid UTF-8 is read as the text `\\xNN` (inside a string it "
    "becomes those four characters). `NaN`, `Infinity` and numbers beyond a double are errors (except in "
    "verdict.json, which Python writes with NaN for an undefined mean). Errors read `file:line: key.path: "
    "what is wrong`. Keys not listed are allowed (writers may add keys); listed keys must have the listed type.",
)


@dataclass(frozen=True)
class JsonDoc:
    name: str
    file: str
    writer: str
    version: int
    description: str
    schema: dict


def _t(kind: str | list[str], description: str, **kw) -> dict:
    return {"type": kind, "description": description, **kw}


def _obj(description: str, props: dict, required: tuple[str, ...] = (), **kw) -> dict:
    return {"type": "object", "description": description, "properties": props, "required": list(required), **kw}


# Every lab of the tree (labs/<lab>/lab.sh): a family's lab needs no entry of its own here.
LABS = sorted(p.parent.name for p in (Path(__file__).resolve().parents[2] / "labs").glob("*/lab.sh"))
_INODE = _t("integer", "network namespace inode", minimum=1)
_PORT = _t("integer", "TCP port", minimum=1, maximum=65535)
_NS_NAME = _t("string", "network namespace name")
_EPOCH_S = _t("number", "epoch seconds", minimum=EPOCH_MIN, maximum=EPOCH_MAX)

LAB_SCHEMA = _obj(
    "the lab that made the run (scripts/lab, labs/<lab>/lab.sh lab_json), or null for a plain capture",
    {
        "lab": _t("string", "lab name (labs/<lab>/lab.sh)", enum=LABS),
        "variant": _t("string", "variant name"),
        "summary": _t("string", "one line: what the variant did"),
        "command": _t("string", "the make command that repeats it"),
        "loss_pct": _t("integer", "retransmit lab: % of data packets dropped", minimum=0, maximum=100),
        "syn_loss_pct": _t("integer", "retransmit lab: % of SYNs dropped", minimum=0, maximum=100),
        "sender_drop_pct": _t(
            "integer", "retransmit lab: % of the client's packets its own firewall dropped", minimum=0, maximum=100
        ),
        "gso": _t(
            "string", "retransmit lab: off = the client sent one segment a packet (gso_max_segs 1)", enum=["on", "off"]
        ),
        "iperf3": {
            **_obj(
                "retransmit lab: iperf3's own totals, or null",
                {
                    "retransmits": _t(["integer", "null"], "retransmits iperf3 saw", minimum=0),
                    "bytes_sent": _t("integer", "bytes sent", minimum=0),
                    "bits_per_second": _t("number", "throughput", minimum=0),
                },
            ),
            "type": ["object", "null"],
        },
        "server": _obj(
            "the lab's server",
            {
                "netns": _NS_NAME,
                "netns_inode": _INODE,
                "addr": _t("string", "address it listens on"),
                "port": _PORT,
                "backlog_requested": _t("integer", "listen() backlog asked for (0 = somaxconn)", minimum=0),
                "accept_delay": _t("string", "Go duration slept per accept"),
                "accept_delay_dist": _t("string", "fixed or exp"),
                "stall_at": _t("string", "Go duration"),
                "stall_for": _t("string", "Go duration"),
                "reuseport_members": _t(
                    "integer",
                    "accept-overflow lab: processes in its SO_REUSEPORT group (0: one plain listener)",
                    minimum=0,
                ),
                "stall_members": _t("string", "accept-overflow lab: the group's members that stall (0-based, commas)"),
                "pid": _t(["integer", "null"], "server process id", minimum=0),
                "comm": _t("string", "server process name"),
                "gomaxprocs": _t(["integer", "null"], "GOMAXPROCS of the Go server", minimum=1),
                "work": _t("string", "work per request"),
                "stats": {
                    **_obj(
                        "the server's own counts (aqserver -stats), or null",
                        {
                            "accepted": _t("integer", "connections accepted", minimum=0),
                            "handled": _t("integer", "connections handled", minimum=0),
                            "requests": _t("integer", "requests answered", minimum=0),
                            "service_seconds": _t("number", "seconds the accept loop was busy", minimum=0),
                            "accept_delay_ms": _t("number", "accept delay (ms)", minimum=0),
                            "members": _t(
                                "array",
                                "a SO_REUSEPORT group: each member's own counts, with its member index and pid",
                                items=_obj(
                                    "one member",
                                    {
                                        "member": _t("integer", "0-based member index", minimum=0),
                                        "pid": _t("integer", "the member's process", minimum=1),
                                        "accepted": _t("integer", "connections it accepted", minimum=0),
                                    },
                                    required=("member", "pid", "accepted"),
                                ),
                            ),
                        },
                    ),
                    "type": ["object", "null"],
                },
            },
        ),
        "client": _obj(
            "the lab's load generator",
            {
                "netns": _NS_NAME,
                "netns_inode": _INODE,
                "addr": _t("string", "client address"),
                "load": _t("string", "connload arguments"),
                "port_range": _t(
                    "string", "ip_local_port_range set for the client: `low high`", pattern="^[0-9]{1,5} [0-9]{1,5}$"
                ),
                "tcp_tw_reuse": _t("integer", "tcp_tw_reuse in the client namespace", minimum=0),
                "tcp_fin_timeout": _t(["integer", "null"], "tcp_fin_timeout in the client namespace", minimum=0),
                "rate_per_s": _t("number", "new connections per second", minimum=0),
                "load_seconds": _t("number", "seconds of load", minimum=0),
                "requests_per_conn": _t("integer", "requests per connection", minimum=0),
                "hold_seconds": _t("number", "seconds each connection is held", minimum=0),
                "wrk_connections": _t("integer", "wrk connections", minimum=0),
                "connects_file": _t("string", "CSV of the attempts (connects.csv)"),
            },
        ),
        "phases": _t(
            "array",
            "epoll lab: load phases",
            items=_obj(
                "one phase",
                {
                    "idle_conns": _t("integer", "idle connections held", minimum=0),
                    "start_s": _EPOCH_S,
                    "end_s": _EPOCH_S,
                    "wrk_requests_per_s": _t("number", "wrk requests per second", minimum=0),
                },
            ),
        ),
        "somaxconn": _t("integer", "runtimes lab: net.core.somaxconn in the server namespace", minimum=0),
        "runtimes": _t(
            "array",
            "runtimes lab: each server it tried, with its defaults or past its own limit",
            items=_obj(
                "one server",
                {
                    "name": _t("string", "the lab's name for it (labs/runtimes/lab.sh RUNTIMES)"),
                    "port": _PORT,
                    "pid": _t(["integer", "null"], "the process the lab started (null: not started)", minimum=0),
                    "status": _t(
                        "string", "what happened", enum=["listening", "did not listen", "exited", "not installed"]
                    ),
                    "version": _t(["string", "null"], "the version it reports of itself"),
                    "exe": _t(["string", "null"], "its executable"),
                    "at_limit": _obj(
                        "limits variant: the server alone past its own connection limit (labs/runtimes/hold_idle.py)",
                        {
                            "skipped": _t("string", "why it was not held past a limit"),
                            "knob": _t("string", "the limit as set: its own knob, or its open files (prlimit)"),
                            "limit": _t("integer", "the limit's value", minimum=0),
                            "pids": _t("array", "the processes holding its listener", items=_t("integer", "pid")),
                            "cpu_s": _t("number", "their CPU seconds while the connections were held", minimum=0),
                            "hold": _obj(
                                "the idle client's account",
                                {
                                    "conns": _t("integer", "connections to open", minimum=0),
                                    "connected": _t("integer", "connects that completed", minimum=0),
                                    "connect_failed": _t("integer", "connects that timed out or failed", minimum=0),
                                    "not_tried": _t("integer", "left after 3 failures in a row", minimum=0),
                                    "closed_by_server": _t("integer", "closed (EOF or reset) by the server", minimum=0),
                                    "open": _t("integer", "still open after the hold", minimum=0),
                                    "said": _t(["string", "null"], "the first bytes a closed connection received"),
                                    "start_epoch": _EPOCH_S,
                                    "end_epoch": _EPOCH_S,
                                },
                                ("conns", "connected", "closed_by_server", "open", "start_epoch", "end_epoch"),
                            ),
                        },
                    ),
                },
                ("name", "port", "status"),
            ),
        ),
        "profile": {
            **_obj(
                "sysctl profile applied (PROFILE=), or null",
                {
                    "name": _t("string", "profile name"),
                    "skipped_global": _t("array", "global keys not applied", items={"type": "string"}),
                    "overridden_by_scenario": _t("array", "keys the variant overrode", items={"type": "string"}),
                },
            ),
            "type": ["object", "null"],
        },
    },
    ("lab", "variant"),
)

PROBE_STATUSES = ["ok", "not_runnable", "failed", "died", "killed", "running", "interrupted"]
STOP_REASONS = ["duration", "requested", "interrupted", "killed", "running", "error"]

METADATA_SCHEMA = _obj(
    "one run",
    {
        "schema_version": _t("integer", "version of this schema (1)"),
        "data_contract": _t("integer", "version of the CSV data contract the files follow"),
        "name": _t("string", "run directory name"),
        "started_at": _t("string", "ISO 8601 UTC start"),
        "started_epoch": _EPOCH_S,
        "ended_at": _t(["string", "null"], "ISO 8601 UTC end; null while running"),
        "ended_epoch": {
            **_EPOCH_S,
            "type": ["number", "null"],
            "description": "epoch seconds; null only while running",
        },
        "complete": _t(
            "boolean", "false when the capture stopped before its duration or a probe did not run to the end"
        ),
        "stop_reason": _t(
            "string",
            "duration, requested (USR1), interrupted (Ctrl-C/TERM), killed (SIGKILLed capture, reaped "
            "afterwards), running (not finished: still running or never reaped), error (the capture failed)",
            enum=STOP_REASONS,
        ),
        "duration_requested_s": _t("integer", "asked duration; 0 = until stopped", minimum=0),
        "interval_s": _t("integer", "probe and sampler interval (s)", minimum=1),
        "host": _t("string", "hostname"),
        "kernel": _t("string", "uname -r"),
        "bpftrace_version": _t("string", "bpftrace --version"),
        "command": _t("string", "command line of the capture"),
        "reaped_at": _t("string", "when a later run reaped this one (ISO 8601 UTC)"),
        "reaped_by": _t("string", "what reaped it"),
        "scope": _t(
            "string",
            "which namespaces the analysis judges (absent: all): sampled keeps only the probe rows of the sampled "
            "namespaces, and epoll threads of processes seen listening or accepting in one (for hosts that share "
            "one kernel: containers, namespace hosts; collector/capture --scope)",
            enum=["all", "sampled"],
        ),
        "netns": _t(
            "array",
            "sampled namespaces",
            minItems=1,
            items=_obj(
                "one namespace",
                {
                    "label": _t("string", "label used in reports"),
                    "name": _t(["string", "null"], "ip netns name; null for the host namespace"),
                    "inode": _INODE,
                },
                ("label", "inode"),
            ),
        ),
        "probes": {
            **_obj(
                f"per probe family ({', '.join(NAMES)})",
                {},
                additionalProperties=_obj(
                    "one probe family",
                    {
                        "file": _t(["string", "null"], "probe file that ran"),
                        "tier": _t(["string", "null"], "tier that ran"),
                        "status": _t(
                            "string",
                            "how it ended: ok, not_runnable (no tier for this kernel), failed (did not attach), died "
                            "(exited early), interrupted (stopped before it had attached), killed (capture SIGKILLed), "
                            "running (capture not finished)",
                            enum=PROBE_STATUSES,
                        ),
                        "rows": _t("integer", "CSV rows collector/probe-to-csv wrote for it", minimum=0),
                        "recursion_misses": _t(
                            ["integer", "null"],
                            "events the kernel skipped, over every program of the bpftrace process that ran the "
                            "probe (one process for every family by default: the same number for each)",
                            minimum=0,
                        ),
                        "unknown_lines": _t(
                            "integer",
                            "lines of its raw output (probe_<family>.out) collector/probe-to-csv did not know and "
                            "left there: bpftrace's own warnings (0.23 prints helper errors into the output), damage; "
                            "absent in runs captured before it was counted",
                            minimum=0,
                        ),
                        "note": _t("string", "why it did not run, or what went wrong"),
                    },
                    ("status", "rows"),
                ),
            ),
            "propertyNames": {"enum": list(NAMES)},
        },
        "lab": {**LAB_SCHEMA, "type": ["object", "null"]},
    },
    (
        "schema_version",
        "data_contract",
        "name",
        "started_epoch",
        "ended_epoch",
        "complete",
        "stop_reason",
        "interval_s",
        "netns",
        "probes",
    ),
)

DOCTOR_SCHEMA = _obj(
    "what this kernel can trace",
    {
        "schema_version": _t("integer", "version of this schema (1)", const=1),
        "checked_at": _t("string", "ISO 8601 UTC"),
        "kernel": _t("string", "uname -r"),
        "boot_id": _t("string", "boot id"),
        "btf": _t("boolean", "kernel BTF present"),
        "tracefs": _t(["string", "null"], "tracefs mount point"),
        "bpftrace_version": _t(["string", "null"], "bpftrace --version"),
        "root": _t("boolean", "ran as root"),
        "probe_types": _obj(
            "per probe type (tracepoint, kprobe, kfunc, rawtracepoint)",
            {},
            additionalProperties=_obj(
                "one probe type",
                {
                    "attaches": _t("boolean", "a trivial program attached"),
                    "error": _t(["string", "null"], "the error when not"),
                },
                ("attaches",),
            ),
        ),
        "probes": _obj(
            "per probe file",
            {},
            additionalProperties=_obj(
                "one probe",
                {
                    "tier": _t("string", "its tier"),
                    "runnable": _t("boolean", "its needs are met"),
                    "missing": _t("array", "needs not met", items={"type": "string"}),
                },
                ("tier", "runnable"),
            ),
        ),
    },
    ("schema_version", "probe_types", "probes"),
)

COMPARE_SCHEMA = _obj(
    "what a comparison compares",
    {
        "lab": _t("string", "lab"),
        "variant": _t("string", "variant"),
        "a": _t("string", "profile A"),
        "b": _t("string", "profile B"),
        "repeat": _t("integer", "runs per side", minimum=1),
        "overrides": _obj("--set KEY=VALUE given", {}, additionalProperties={"type": "string"}),
        "command": _t("string", "the scripts/compare command"),
        "runs": _t(
            "array",
            "finished runs, in order",
            items=_obj(
                "one run",
                {
                    "run": _t("string", "directory under runs/", pattern="^[^/]+$"),
                    "profile": _t("string", "profile"),
                    "side": _t("string", "A or B", enum=["A", "B"]),
                    "repeat": _t("integer", "repetition, 1-based", minimum=1),
                },
                ("run", "profile", "side", "repeat"),
            ),
        ),
    },
    ("lab", "variant", "a", "b", "repeat", "runs"),
)

_METRIC_RESULT = _obj(
    "one metric",
    {
        "metric": _t("string", "metric key"),
        "label": _t("string", "label"),
        "n_a": _t("integer", "runs under A", minimum=0),
        "n_b": _t("integer", "runs under B", minimum=0),
        "a_mean": _t(["number", "null"], "mean over A (null: no A run measured it)"),
        "b_mean": _t(["number", "null"], "mean over B (null: no B run measured it)"),
        "diff": _t(["number", "null"], "b_mean - a_mean"),
        "ci_low": _t(["number", "null"], "95 % interval, low"),
        "ci_high": _t(["number", "null"], "95 % interval, high"),
        "significant": _t("boolean", "interval excludes 0 (and Welch agrees)"),
        "outcome": _t("string", "verdict key", enum=["no_difference", "removes", "improves", "worsens"]),
        "better": _t("string", "which way is better", enum=["lower", "higher"]),
    },
    ("metric", "significant", "outcome"),
)

VERDICT_SCHEMA = _obj(
    "the comparison's verdict",
    {
        "lab": _t("string", "lab"),
        "variant": _t("string", "variant"),
        "a": _t("string", "profile A"),
        "b": _t("string", "profile B"),
        "repeat": _t("integer", "runs per side", minimum=1),
        "overrides": _t("object", "--set KEY=VALUE given"),
        "headline": {**_METRIC_RESULT, "type": ["object", "null"], "description": "the headline metric"},
        "others": _t("array", "other significant metrics", items=_METRIC_RESULT),
        "metrics": _t("array", "every metric", items=_METRIC_RESULT),
        "profile_caveats": _t("array", "what a profile could not set", items={"type": "string"}),
    },
    ("lab", "variant", "headline", "metrics"),
)

SWEEP_SCHEMA = _obj(
    "what a sweep swept",
    {
        "kind": _t("string", "accept-queue or time-wait", enum=["accept-queue", "time-wait"]),
        "rates": _t("array", "rates (conn/s)", items={"type": "number", "minimum": 0}),
        "backlogs": _t("array", "backlogs", items={"type": "integer", "minimum": 0}),
        "seconds": _t("number", "seconds of load per point", minimum=0),
        "ports": _t("integer", "client ports (time-wait)", minimum=1, maximum=65535),
        "command": _t("string", "the scripts/sweep command"),
    },
    ("kind",),
)

JSON_DOCS: dict[str, JsonDoc] = {
    d.name: d
    for d in (
        JsonDoc(
            "metadata",
            "metadata.json",
            "collector/capture (its lab block: scripts/lab and labs/<lab>/lab.sh lab_json)",
            1,
            "One per run directory: when and how the run was captured, which probes ran and how they ended. "
            "`schema_version` must be 1 and `data_contract` the contract version above; a run with "
            "`stop_reason` running (or `ended_epoch` null) is refused until reaped (`collector/capture --reap`). "
            "A run with `complete` false still loads: missing tables are read as empty and the report says so.",
            METADATA_SCHEMA,
        ),
        JsonDoc(
            "doctor",
            "doctor.json",
            "collector/doctor (a copy in each run directory)",
            1,
            "What the kernel could trace when the run was captured.",
            DOCTOR_SCHEMA,
        ),
        JsonDoc(
            "compare", "compare.json", "scripts/compare", 1, "A comparison directory's configuration.", COMPARE_SCHEMA
        ),
        JsonDoc(
            "compare_verdict",
            "verdict.json",
            "analysis/render/compare.py (python -m analysis compare)",
            1,
            "A comparison's verdict.",
            VERDICT_SCHEMA,
        ),
        JsonDoc("sweep", "sweep.json", "scripts/sweep", 1, "A sweep directory's configuration.", SWEEP_SCHEMA),
    )
}
