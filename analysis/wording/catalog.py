"""The families' wording gathered from probes/families.conf, in its order: one table per use, by finding kind."""

from __future__ import annotations

from importlib import import_module

from analysis.families import FAMILIES

from .base import Derive, Headline, Wording
from .template import Part


def _load() -> tuple[Wording, ...]:
    out = []
    for fam in FAMILIES.values():
        if not fam.wording:
            continue
        wording: Wording = import_module(fam.wording_module).WORDING
        if wording.kind != fam.finding:
            raise ImportError(
                f"{fam.wording} words {wording.kind}, but probes/families.conf says family {fam.name} "
                f"finds {fam.finding}"
            )
        out.append(wording)
    return tuple(out)


WORDINGS: tuple[Wording, ...] = _load()

# Cause classes more than one family's rule returns.
SHARED_CAUSES = {
    "unattributed": "seen, but no single listener or endpoint can be named (unattributed)",
}

TITLES: dict[str, str] = {w.kind: w.title for w in WORDINGS}
CAUSE_NAMES: dict[str, str] = {k: v for w in WORDINGS for k, v in w.causes.items()} | SHARED_CAUSES
TEMPLATES: dict[tuple[str, str, str], tuple[Part, ...]] = {
    (w.kind, link, key): parts for w in WORDINGS for (link, key), parts in w.templates.items()
}
DERIVE: dict[str, Derive] = {w.kind: w.derive for w in WORDINGS}
UNSEEN: dict[str, str] = {w.kind: w.unseen for w in WORDINGS}
HEADLINES: dict[str, Headline] = {w.kind: w.headline for w in WORDINGS if w.headline is not None}
