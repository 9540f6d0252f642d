"""Grade a trainee's diagnosis against the fault an incident injected (training/incidents.py).

An answer is a small JSON object:

    {"family": "accept_queue", "object": "198.18.0.1:8097", "cause": "sizing",
     "fix": "raise_backlog", "also_suspect": []}

`family`: a family of probes/families.conf, or none (nothing wrong). `object`: a
listener or endpoint as address:port, a flow as caddr:cport->saddr:sport, a loop thread by
its name; empty for none. `cause` and `fix`: one of CAUSES and FIXES (closed lists: the
servers' and the kernel's own knobs, and the seed posts' myths, docs/claims.md).
`also_suspect`: other objects the trainee would still blame.

The rubric (RUBRIC, docs/training.md says it in words): each part scores against the
injected fault, never against the tool's own report; every hint used and every healthy
object blamed costs points; a myth chosen as the fix costs more than a wrong fix.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any

from analysis.families import FAMILY_OF_FINDING, NAMES
from analysis.findings import object_name
from training.incidents import Incident

RUBRIC = {
    "family": 10,
    "object": 30,
    "cause": 20,
    "fix": 20,
    "no_healthy_blamed": 10,
    "time": 10,
}
# Costs: per hint level used (1: family, 2: counter, 3: probe), per healthy object blamed
# (the no_healthy_blamed part goes first), for a fix the seed posts got wrong.
HINT_COST = 5
BLAME_COST = 10
MYTH_COST = 10
# Full time points within this many minutes of the page, none after twice that.
TIME_FULL_MIN = 10

CAUSES = {
    "sizing": "the listen() backlog is smaller than the bursts that arrive",
    "capacity": "the server accepts more slowly than connections arrive, on average",
    "stall": "the application stopped calling accept()",
    "data_loss": "data segments are lost between the two ends",
    "syn_loss": "SYNs are lost on the way",
    "loop_saturated": "an event loop thread has more work than one CPU does, and never blocks",
    "short_connections_client_closes": "the client closes short connections first and holds TIME_WAIT",
    "slow_reader": "the application reading a flow is slower than its sender: its window closes",
    "small_rcvbuf": "a receive buffer below the path's bandwidth-delay product caps the window",
    "small_sndbuf": "a send buffer below the path's bandwidth-delay product caps what is in flight",
    "none": "nothing is wrong",
}
# Each fix: the causes it cures (full points), those it helps (half), and whether a seed
# post claimed it and docs/claims.md measured it wrong (a myth).
FIXES: dict[str, dict[str, Any]] = {
    "raise_backlog": {"cures": {"sizing"}, "helps": set(), "myth": None},
    "raise_somaxconn": {"cures": set(), "helps": {"sizing"}, "myth": None},
    "more_workers": {"cures": {"capacity"}, "helps": set(), "myth": None},
    "fix_accept_loop": {"cures": {"stall"}, "helps": set(), "myth": None},
    "tcp_abort_on_overflow": {"cures": set(), "helps": set(), "myth": "C42/C43 (clients get resets)"},
    "find_lossy_hop": {"cures": {"data_loss", "syn_loss"}, "helps": set(), "myth": None},
    "more_loops": {"cures": {"loop_saturated"}, "helps": set(), "myth": None},
    "less_work_per_request": {"cures": {"loop_saturated"}, "helps": set(), "myth": None},
    "raise_max_user_watches": {"cures": set(), "helps": set(), "myth": "C22/C26 (epoll does not scan its fds)"},
    "reuse_connections": {"cures": {"short_connections_client_closes"}, "helps": set(), "myth": None},
    "tcp_tw_reuse": {"cures": set(), "helps": {"short_connections_client_closes"}, "myth": None},
    "widen_port_range": {"cures": set(), "helps": {"short_connections_client_closes"}, "myth": None},
    "lower_tcp_fin_timeout": {"cures": set(), "helps": set(), "myth": "C34 (TIME_WAIT stays 60 s)"},
    "tcp_tw_recycle": {"cures": set(), "helps": set(), "myth": "C45 (removed in Linux 4.12)"},
    "fix_read_loop": {"cures": {"slow_reader"}, "helps": set(), "myth": None},
    "bigger_rcvbuf": {"cures": {"small_rcvbuf"}, "helps": set(), "myth": None},
    "remove_so_rcvbuf": {"cures": {"small_rcvbuf"}, "helps": set(), "myth": None},
    "bigger_sndbuf": {"cures": {"small_sndbuf"}, "helps": set(), "myth": None},
    "raise_rmem_max": {"cures": set(), "helps": set(), "myth": "C54 (rmem_max does not cap autotuning)"},
    "nothing": {"cures": {"none"}, "helps": set(), "myth": None},
}
FAMILIES = (*NAMES, "none")


class AnswerError(ValueError):
    """An answer that cannot be graded: says which field and why."""


@dataclass
class Grade:
    points: dict[str, int]
    costs: dict[str, int]
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return max(0, sum(self.points.values()) - sum(self.costs.values()))

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, "max": sum(RUBRIC.values()), "points": self.points, "costs": self.costs,
                "notes": self.notes}  # fmt: skip


def parse(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer checked against the closed lists; AnswerError names the field at fault."""
    if not isinstance(answer, dict):
        raise AnswerError("the answer must be a JSON object")
    out = {k: answer.get(k) for k in ("family", "object", "cause", "fix")}
    out["also_suspect"] = answer.get("also_suspect") or []
    if out["family"] not in FAMILIES:
        raise AnswerError(f"family: {out['family']!r} is not one of {', '.join(FAMILIES)}")
    if out["cause"] not in CAUSES:
        raise AnswerError(f"cause: {out['cause']!r} is not one of {', '.join(CAUSES)}")
    if out["fix"] not in FIXES:
        raise AnswerError(f"fix: {out['fix']!r} is not one of {', '.join(FIXES)}")
    if not isinstance(out["also_suspect"], list):
        raise AnswerError("also_suspect: a list of objects")
    return out


def normalise(obj: str | None) -> str | None:
    """One spelling per object: spaces away, -> for flows, each address:port as
    address:port (IPv4, IPv4-mapped IPv6 too) or [address]:port (IPv6, compressed), so that
    "[2001:2:0::1]:8080", "2001:2::1:8080" and "[2001:2::1]:8080" are one listener. A name
    that is not an address (a loop thread) stays as typed, in lower case."""
    if not obj:
        return None
    o = re.sub(r"\s+", "", str(obj)).lower().replace("=>", "->")
    return "->".join(_endpoint(e) for e in o.split("->"))


def _endpoint(text: str) -> str:
    m = re.fullmatch(r"\[([^\]]+)\]:(\d+)|([^\[\]]+):(\d+)", text)
    if not m:
        return text
    host, port = (m[1], m[2]) if m[1] is not None else (m[3], m[4])
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return text
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return f"[{ip.compressed}]:{port}" if ip.version == 6 else f"{ip}:{port}"


def grade(incident: Incident, answer: dict[str, Any], hints_used: int = 0, minutes: float = 0.0) -> Grade:
    """ANSWER against INCIDENT's injected fault, by RUBRIC."""
    a = parse(answer)
    key = incident.key
    faulty = normalise(key["object"])
    points = dict.fromkeys(RUBRIC, 0)
    notes: list[str] = []
    if a["family"] == key["family"]:
        points["family"] = RUBRIC["family"]
    else:
        notes.append(f"family: {a['family']}, the fault was {key['family']}")
    if normalise(a["object"]) == faulty:
        points["object"] = RUBRIC["object"]
    else:
        notes.append(f"object: {a['object'] or 'none'}, the faulty one was {key['object'] or 'none'}")
    if a["cause"] == key["cause"]:
        points["cause"] = RUBRIC["cause"]
    else:
        notes.append(f"cause: {a['cause']}, it was {key['cause']}")
    fix = FIXES[a["fix"]]
    if key["cause"] in fix["cures"]:
        points["fix"] = RUBRIC["fix"]
    elif key["cause"] in fix["helps"]:
        points["fix"] = RUBRIC["fix"] // 2
        notes.append(f"fix: {a['fix']} helps, it does not cure {key['cause']}")
    else:
        notes.append(f"fix: {a['fix']} does not cure {key['cause']}")
    blamed = [o for o in [a["object"], *a["also_suspect"]] if o and normalise(o) != faulty]
    points["no_healthy_blamed"] = RUBRIC["no_healthy_blamed"] if not blamed else 0
    costs = {"hints": HINT_COST * max(0, min(hints_used, 3))}
    costs["healthy_blamed"] = BLAME_COST * max(0, len(blamed) - 1)
    if blamed:
        notes.append(f"healthy objects blamed: {', '.join(map(str, blamed))}")
    costs["myth"] = MYTH_COST if fix["myth"] else 0
    if fix["myth"]:
        notes.append(f"fix: {a['fix']} is a seed-post myth, docs/claims.md {fix['myth']}")
    points["time"] = _time_points(minutes)
    return Grade(points, costs, notes)


def _time_points(minutes: float) -> int:
    if minutes <= TIME_FULL_MIN:
        return RUBRIC["time"]
    if minutes >= 2 * TIME_FULL_MIN:
        return 0
    return round(RUBRIC["time"] * (2 * TIME_FULL_MIN - minutes) / TIME_FULL_MIN)


# Which family each finding kind of the analysis belongs to.
FAMILY_OF_KIND = FAMILY_OF_FINDING


def object_of_finding(finding: dict[str, Any]) -> str | None:
    """The object a finding of verdicts.json names, spelled as an answer names it (None when
    its subject does not say enough): analysis/findings.py object_name, normalised."""
    return normalise(object_name(finding.get("kind") or "", finding.get("subject") or {}))
