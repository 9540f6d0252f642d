"""What a family's wording module supplies (its WORDING), as analysis/rules/base.py says what a rule is."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from analysis.findings import Finding, Link

from .template import Part

# Adds to a link's evidence (a plain copy) the phrases its templates name.
Derive = Callable[[Link, dict[str, Any]], None]
# A finding's whole title line, given the status in words.
Headline = Callable[[Finding, str], str]


@dataclass(frozen=True)
class Wording:
    """The text of one finding kind: title, cause names, templates and the phrases they need."""

    kind: str
    title: str
    causes: Mapping[str, str]  # cause class -> words (classes shared by families: catalog.SHARED_CAUSES)
    templates: Mapping[tuple[str, str], tuple[Part, ...]]  # (link, key) -> parts
    derive: Derive
    headline: Headline | None = None  # None: the common title line (objects.headline)
    unseen: str = ""  # what a run without the family's probe cannot see (the report says so)


def by_step(steps: Mapping[str, Derive], every: Sequence[Derive] = ()) -> Derive:
    """A family's Derive: `every` for each link, then the one for the link's step (symptom, cause...)."""

    def derive(link: Link, ev: dict[str, Any]) -> None:
        for d in every:
            d(link, ev)
        step = steps.get(link.link)
        if step is not None:
            step(link, ev)

    return derive
