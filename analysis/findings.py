"""What a rule returns: a structured result with the numbers behind it.

Modelled on insights-core: a rule declares its inputs and returns a result
keyed by kind; the human wording lives in analysis/wording/ (a module per family, beside its rule), apart from the
logic, so the numbers can be tested without parsing sentences.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from analysis.families import OBJECT_OF_FINDING

# confirmed / suspected: a finding. absent: ruled out by the evidence. not_checked: the
# evidence that could rule it out was not captured (e.g. its probe did not run).
Status = Literal["confirmed", "suspected", "absent", "not_checked"]
FINDING_STATUSES: tuple[Status, ...] = ("confirmed", "suspected")
LinkName = Literal["symptom", "counter", "probe", "cause", "fix", "verification"]
CHAIN_ORDER: tuple[LinkName, ...] = ("symptom", "counter", "probe", "cause", "fix", "verification")


@dataclass
class Link:
    """One step of an evidence chain: a key for the wording and the evidence numbers."""

    link: LinkName
    key: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Plain Python numbers: numpy scalars would reach verdicts.json as strings.
        self.evidence = plain(self.evidence)


@dataclass
class Finding:
    kind: str
    status: Status
    subject: dict[str, Any]
    window: dict[str, float] | None = None
    cause_class: str | None = None
    chain: list[Link] = field(default_factory=list)

    @property
    def is_finding(self) -> bool:
        """Confirmed or suspected: not ruled out, and not merely unchecked."""
        return self.status in FINDING_STATUSES

    def link(self, name: LinkName) -> Link | None:
        return next((x for x in self.chain if x.link == name), None)

    def to_dict(self) -> dict[str, Any]:
        """As dataclasses.asdict says it, without its deep copy of every evidence value (thousands of
        findings in an hour's capture); evidence is plain data already (Link.__post_init__)."""
        return {
            "kind": self.kind,
            "status": self.status,
            "subject": dict(self.subject),
            "window": dict(self.window) if self.window is not None else None,
            "cause_class": self.cause_class,
            "chain": [{"link": x.link, "key": x.key, "evidence": dict(x.evidence)} for x in self.chain],
        }


def plain(v: Any) -> Any:
    """numpy scalars as Python numbers, recursively through dicts and lists."""
    if isinstance(v, Mapping):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v)(plain(x) for x in v)
    if hasattr(v, "item") and getattr(v, "ndim", None) == 0:
        return v.item()
    return v


def _known(v: Any) -> bool:
    return v is not None and v != "" and not (isinstance(v, float) and math.isnan(v))


def _at(addr: Any, port: Any) -> str:
    """ADDR:PORT, an IPv6 address in brackets ([2001:2::1]:8080), as applications log it."""
    p = int(port) if isinstance(port, float) and port.is_integer() else port
    a = str(addr)
    return f"[{a}]:{p}" if ":" in a else f"{a}:{p}"


def object_name(kind: str, subject: Mapping[str, Any]) -> str | None:
    """The object a finding of KIND names, by its family's object kind (probes/families.conf):
    a listener ADDR:PORT (port P when its address is not known), a flow LADDR:LPORT->RADDR:RPORT
    (an endpoint, without both ports, LADDR->RADDR:PORT), a destination RADDR:PORT, a thread by
    its name. None when the subject does not say which one (an unattributed finding)."""
    s = subject
    obj = OBJECT_OF_FINDING.get(kind)
    if obj == "listener" and _known(s.get("lport")):
        return _at(s["laddr"], s["lport"]) if _known(s.get("laddr")) else f"port {s['lport']}"
    if obj == "flow" and _known(s.get("lport")) and _known(s.get("rport")):
        return f"{_at(s.get('laddr'), s['lport'])}->{_at(s.get('raddr'), s['rport'])}"
    if obj == "flow" and _known(s.get("raddr")) and _known(s.get("service_port")):
        return f"{s.get('laddr')}->{_at(s['raddr'], s['service_port'])}"
    if obj == "destination" and _known(s.get("raddr")) and _known(s.get("service_port")):
        return _at(s["raddr"], s["service_port"])
    if obj == "thread" and _known(s.get("comm")):
        return str(s["comm"])
    return None
