"""The probe families, read from probes/families.conf (the pack's one registry).

Standard library only: the exporter and the VM matrix's summary read it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REGISTRY = Path(__file__).resolve().parent.parent / "probes" / "families.conf"
KEYS = ("probes", "records", "finding", "rule", "metrics", "plots", "lab", "tier", "object", "train", "bench")
OPTIONAL_KEYS = ("guest",)
TIERS = ("rare", "full")  # the probe tiers of capture and monitor (sampled runs no probe)
OBJECT_KINDS = ("listener", "flow", "destination", "thread")  # analysis/findings.py object_name


class RegistryError(ValueError):
    """probes/families.conf names a key it should not, or lacks one."""


@dataclass(frozen=True)
class Family:
    name: str
    probes: tuple[str, ...]  # files in probes/, preferred first
    records: tuple[str, ...]  # contract tables its probe writes
    finding: str  # the finding kind its rule returns
    rule: str  # analysis/rules/<family>.py, or its package analysis/rules/<family>/
    wording: str  # analysis/wording/<family>.py
    metric_object: str  # the exporter's object kind
    metric_labels: tuple[str, ...]  # the labels that name one object
    plots: tuple[str, ...]  # functions of analysis/render/plots.py
    lab: str  # lab name
    lab_variant: str
    tier: str  # the cheapest of TIERS that runs its probe
    object_kind: str  # one of OBJECT_KINDS: what its findings name
    train_weight: int  # in training's draw of incidents; 0: never drawn
    bench: tuple[str, ...]  # LAB:VARIANT cases of dev/bench, low rate first
    # (LAB, VARIANT, CAUSE) the VM matrix runs in its guests only: each changes the whole machine.
    guest: tuple[tuple[str, str, str], ...] = ()

    @property
    def rule_module(self) -> str:
        return self.rule.removesuffix(".py").rstrip("/").replace("/", ".")

    @property
    def wording_module(self) -> str:
        return self.wording.removesuffix(".py").replace("/", ".")


def _parse(path: Path) -> dict[str, dict[str, list[str]]]:
    raw: dict[str, dict[str, list[str]]] = {}
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) < 3 or words[1] not in KEYS + OPTIONAL_KEYS:
            known = ", ".join(KEYS + OPTIONAL_KEYS)
            raise RegistryError(f"{path}:{lineno}: expected FAMILY KEY VALUE... with KEY one of {known}")
        fam = raw.setdefault(words[0], {})
        if words[1] in fam:
            raise RegistryError(f"{path}:{lineno}: {words[0]} {words[1]} given twice")
        fam[words[1]] = words[2:]
    return raw


def load(path: Path = REGISTRY) -> dict[str, Family]:
    """Every family of the registry, in its order."""
    out: dict[str, Family] = {}
    for name, keys in _parse(path).items():
        missing = [k for k in KEYS if k not in keys]
        if missing:
            raise RegistryError(f"{path}: family {name} lacks {', '.join(missing)}")
        rule, wording = (keys["rule"] + ["", ""])[:2]
        lab, variant = (keys["lab"] + ["", ""])[:2]
        tier, kind, weight = keys["tier"][0], keys["object"][0], keys["train"][0]
        if tier not in TIERS:
            raise RegistryError(f"{path}: family {name} tier {tier}: not one of {', '.join(TIERS)}")
        if kind not in OBJECT_KINDS:
            raise RegistryError(f"{path}: family {name} object {kind}: not one of {', '.join(OBJECT_KINDS)}")
        if not weight.isdigit():
            raise RegistryError(f"{path}: family {name} train {weight}: not a whole number")
        if not all(":" in case for case in keys["bench"]):
            raise RegistryError(f"{path}: family {name} bench: each case is LAB:VARIANT")
        guest = tuple(tuple(case.split(":")) for case in keys.get("guest", []))
        if not all(len(case) == 3 and all(case) for case in guest):
            raise RegistryError(f"{path}: family {name} guest: each scenario is LAB:VARIANT:CAUSE")
        out[name] = Family(
            name=name,
            probes=tuple(keys["probes"]),
            records=tuple(keys["records"]),
            finding=keys["finding"][0],
            rule=rule,
            wording=wording,
            metric_object=keys["metrics"][0],
            metric_labels=tuple(keys["metrics"][1:]),
            plots=tuple(keys["plots"]),
            lab=lab,
            lab_variant=variant,
            tier=tier,
            object_kind=kind,
            train_weight=int(weight),
            bench=tuple(keys["bench"]),
            guest=guest,  # type: ignore[arg-type]
        )
    return out


FAMILIES: dict[str, Family] = load()
NAMES: tuple[str, ...] = tuple(FAMILIES)
FAMILY_OF_FINDING: dict[str, str] = {f.finding: f.name for f in FAMILIES.values()}
# Finding kind -> what its findings name (one of OBJECT_KINDS).
OBJECT_OF_FINDING: dict[str, str] = {f.finding: f.object_kind for f in FAMILIES.values()}
