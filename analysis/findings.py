"""What a rule returns: a structured result with the numbers behind it.

Modelled on insights-core: a rule declares its inputs and returns a result
keyed by kind; the human wording lives in analysis/wording.py, apart from the
logic, so the numbers can be tested without parsing sentences.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["confirmed", "suspected", "absent"]
LinkName = Literal["symptom", "counter", "probe", "cause", "fix", "verification"]
CHAIN_ORDER: tuple[LinkName, ...] = ("symptom", "counter", "probe", "cause", "fix", "verification")


@dataclass
class Link:
    """One step of an evidence chain: a key for the wording and the evidence numbers."""

    link: LinkName
    key: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class Finding:
    kind: str
    status: Status
    subject: dict[str, Any]
    window: dict[str, float] | None = None
    cause_class: str | None = None
    chain: list[Link] = field(default_factory=list)

    def link(self, name: LinkName) -> Link | None:
        return next((x for x in self.chain if x.link == name), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
