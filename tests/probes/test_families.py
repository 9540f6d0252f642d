"""probes/families.conf: every part a family names exists, and the drivers take their
family list from the registry, not from a list of their own."""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib import import_module
from pathlib import Path

import pytest

from analysis.contract import TABLES
from analysis.families import FAMILIES, NAMES, RegistryError, load
from analysis.render import plots
from analysis.rules import RULES
from monitor.exporter import METRICS, OBJECT_LABELS
from tests.conftest import ROOT

FAMILY_IDS = list(FAMILIES)


def test_the_registry_names_families() -> None:
    assert len(NAMES) >= 4
    assert [r.kind for r in RULES] == [f.finding for f in FAMILIES.values()]


@pytest.mark.parametrize("name", FAMILY_IDS)
def test_probe_files_per_tier(name: str) -> None:
    fam = FAMILIES[name]
    assert f"{name}.bt" in fam.probes, "the family's own file, the reference, is one of its tiers"
    # Only a tier without syscall hooks may be preferred to the reference.
    for f in fam.probes[: fam.probes.index(f"{name}.bt")]:
        assert "syscalls:" not in (ROOT / "probes" / f).read_text(), f
    for f in fam.probes:
        text = (ROOT / "probes" / f).read_text()
        assert re.search(r"^ \* TIER: \w+", text, re.M), f"{f} has no TIER header"
        assert re.search(r"^ \* REQUIRES: ", text, re.M), f"{f} has no REQUIRES header"
    on_disk = {p.name for p in (ROOT / "probes").glob(f"{name}*.bt")}
    assert on_disk == set(fam.probes), "every probe file of the family is in the registry"


@pytest.mark.parametrize("name", FAMILY_IDS)
def test_records_are_in_the_contract(name: str) -> None:
    fam = FAMILIES[name]
    for rec in fam.records:
        assert rec in TABLES, f"{rec} is not a table of the data contract"
        assert TABLES[rec].probe and TABLES[rec].writer == f"probes/{name}.bt"


def test_every_probe_table_belongs_to_one_family() -> None:
    owned = [r for f in FAMILIES.values() for r in f.records]
    assert sorted(owned) == sorted(n for n, t in TABLES.items() if t.probe)


@pytest.mark.parametrize("name", FAMILY_IDS)
def test_rule_and_wording(name: str) -> None:
    fam = FAMILIES[name]
    assert (ROOT / fam.rule).is_file() and (ROOT / fam.wording).is_file()
    rule = import_module(fam.rule_module).RULE
    assert rule.kind == fam.finding
    assert set(fam.records) & set(rule.inputs), "the rule reads its family's records"
    import_module(fam.wording_module)


@pytest.mark.parametrize("name", FAMILY_IDS)
def test_metrics(name: str) -> None:
    fam = FAMILIES[name]
    assert OBJECT_LABELS[fam.metric_object] == fam.metric_labels
    mine = [m for m in METRICS.values() if m.file == name]
    assert mine, f"no metric of family {name}"
    assert all(set(fam.metric_labels) <= set(m.labels) for m in mine)


@pytest.mark.parametrize("name", FAMILY_IDS)
def test_plots_and_lab(name: str) -> None:
    fam = FAMILIES[name]
    for fn in fam.plots:
        assert callable(getattr(plots, fn, None)), f"analysis/render/plots.py has no {fn}"
    lab = (ROOT / "labs" / fam.lab / "lab.sh").read_text()
    variants = re.search(r"^LAB_VARIANTS=\(([^)]*)\)", lab, re.M)
    assert variants and fam.lab_variant in variants[1].split()


def test_registry_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "families.conf"
    bad.write_text("# x\nfoo  probes foo.bt\nfoo  colour red\n")
    with pytest.raises(RegistryError, match=r"families.conf:3: "):
        load(bad)
    bad.write_text("foo  probes foo.bt\n")
    with pytest.raises(RegistryError, match="family foo lacks records"):
        load(bad)


# A fifth family added to a copy of the pack: the bash drivers list it with no
# change of their own (they read the registry, not a list of their own).
DRIVERS = {
    "collector/capture": ["--help"],
    "scripts/monitor": ["--help"],
    "scripts/fleet": ["--help"],
    "dev/vm/matrix": ["--help"],
    "dev/vm/guest-run": ["--help"],
}


@pytest.fixture(scope="module")
def pack_with_fifth_family(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pack = tmp_path_factory.mktemp("pack")
    for d in ("collector", "probes", "scripts", "dev", "labs"):
        shutil.copytree(ROOT / d, pack / d, ignore=shutil.ignore_patterns("go", "__pycache__"))
    reg = pack / "probes" / "families.conf"
    reg.write_text(
        reg.read_text()
        + "\nsynqueue  probes   synqueue.bt\nsynqueue  records  sq_listener\nsynqueue  finding  syn_queue_overflow\n"
        + "synqueue  rule     analysis/rules/synqueue.py analysis/wording/synqueue.py\n"
        + "synqueue  metrics  listener netns laddr lport\nsynqueue  plots    queue_depth\n"
        + "synqueue  lab      accept-overflow sizing\n"
    )
    return pack


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_drivers_take_families_from_the_registry(pack_with_fifth_family: Path, driver: str) -> None:
    r = subprocess.run(
        [str(pack_with_fifth_family / driver), *DRIVERS[driver]], capture_output=True, text=True, timeout=30
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    if "families.conf" not in out:
        assert "synqueue" in out, f"{driver} --help does not list the registry's families"


def test_python_readers_take_families_from_the_registry(pack_with_fifth_family: Path) -> None:
    fams = load(pack_with_fifth_family / "probes" / "families.conf")
    assert list(fams)[-1] == "synqueue" and fams["synqueue"].finding == "syn_queue_overflow"


def test_bash_and_python_read_the_same_registry() -> None:
    script = 'source collector/lib.sh; for f in $(families); do echo "$f $(family_get "$f" probes)"; done'
    out = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [f"{f.name} {' '.join(f.probes)}" for f in FAMILIES.values()]


NO_OWN_LIST = [
    "collector/capture",
    "collector/doctor",
    "scripts/lab",
    "scripts/monitor",
    "scripts/fleet",
    "dev/vm/matrix",
    "dev/vm/guest-run",
    "dev/vm/summarize.py",
    "dev/bench-overhead",
    "fleet/capture.yml",
    "analysis/rules/__init__.py",
    "analysis/render/fleet.py",
    "analysis/render/figures.py",
    "analysis/combiners/fleet.py",
]


@pytest.mark.parametrize("path", NO_OWN_LIST)
def test_no_driver_keeps_a_family_list(path: str) -> None:
    """No line names two families: a list of them belongs in the registry."""
    for n, line in enumerate((ROOT / path).read_text().splitlines(), 1):
        named = {f for f in NAMES if re.search(rf"\b{f}\b", line)}
        assert len(named) < 2, f"{path}:{n} lists families of its own: {line.strip()}"
