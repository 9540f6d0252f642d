"""One link of an evidence chain in words: its family's template filled from its numbers, or why not."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analysis.findings import Link, plain

from .catalog import DERIVE, TEMPLATES
from .numbers import is_missing, number
from .template import Missing, fill

LINK_TITLES = {
    "symptom": "Symptom",
    "counter": "Kernel counter",
    "probe": "Probe",
    "cause": "Cause",
    "fix": "Fix",
    "verification": "Verify",
}


def describe(kind: str, link: Link) -> str:
    """One link of an evidence chain in words."""
    template = TEMPLATES.get((kind, link.link, link.key))
    if template is None:
        return _unworded(kind, link, "no wording for this step")
    try:
        return fill(template, _derived(kind, link))
    except Missing as e:
        return _unworded(kind, link, f"not measured in this run ({str(e.args[0]).replace('_', ' ')} missing)")


def _derived(kind: str, link: Link) -> dict[str, Any]:
    """The link's numbers plus the phrases its family's templates need."""
    ev: dict[str, Any] = dict(plain(link.evidence))
    derive = DERIVE.get(kind)
    if derive is not None:
        derive(link, ev)
    return ev


def _flat(ev: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Evidence as "name value" pairs, nested names dotted, missing ones left out."""
    out: list[str] = []
    for k, v in ev.items():
        if isinstance(v, Mapping):
            out += _flat(v, f"{prefix}{k}.")
        elif not is_missing(v):
            out.append(f"{prefix}{k} {number(v)}")
    return out


def _unworded(kind: str, link: Link, why: str) -> str:
    """A link no template can word: say so, and list the numbers that are there."""
    title = LINK_TITLES.get(link.link, link.link)
    nums = _flat(plain(link.evidence))
    return f"{title} ({link.key.replace('_', ' ')}): {why}" + (f"; recorded: {'; '.join(nums)}." if nums else ".")
