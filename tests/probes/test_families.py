"""probes/families.conf: every part a family names exists, and the drivers take their
family list from the registry, not from a list of their own."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest

from analysis.contract import TABLES
from analysis.families import FAMILIES, NAMES, TIERS, RegistryError, load
from analysis.render import plots
from analysis.rules import RULES
from monitor.exporter import METRICS, OBJECT_LABELS
from tests.conftest import ROOT, fixture_run

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
    rule_file = ROOT / fam.rule / "__init__.py" if fam.rule.endswith("/") else ROOT / fam.rule
    assert rule_file.is_file() and (ROOT / fam.wording).is_file()
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
    # A guest scenario: its lab's variant, and a cause its wording words.
    for guest_lab, variant, cause in fam.guest:
        text = (ROOT / "labs" / guest_lab / "lab.sh").read_text()
        found = re.search(r"^LAB_VARIANTS=\(([^)]*)\)", text, re.M)
        assert found and variant in found[1].split(), (guest_lab, variant)
        assert cause in import_module(fam.wording_module).CAUSES, cause


def test_registry_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "families.conf"
    bad.write_text("# x\nfoo  probes foo.bt\nfoo  colour red\n")
    with pytest.raises(RegistryError, match=r"families.conf:3: "):
        load(bad)
    bad.write_text("foo  probes foo.bt\n")
    with pytest.raises(RegistryError, match="family foo lacks records"):
        load(bad)
    good = (ROOT / "probes" / "families.conf").read_text()
    bad.write_text(good + "socket_buffers  guest  socket-buffers:memory-pressure\n")
    with pytest.raises(RegistryError, match="socket_buffers guest given twice"):
        load(bad)
    bad.write_text(good.replace("socket-buffers:memory-pressure:memory_pressure", "socket-buffers:memory-pressure"))
    with pytest.raises(RegistryError, match="family socket_buffers guest: each scenario is LAB:VARIANT:CAUSE"):
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
    for d in ("collector", "probes", "scripts", "dev", "labs", "analysis", "training"):
        shutil.copytree(ROOT / d, pack / d, ignore=shutil.ignore_patterns("go", "__pycache__"))
    reg = pack / "probes" / "families.conf"
    reg.write_text(
        reg.read_text()
        + "\nsynqueue  probes   synqueue.bt\nsynqueue  records  sq_listener\nsynqueue  finding  syn_queue_overflow\n"
        + "synqueue  rule     analysis/rules/synqueue.py analysis/wording/synqueue.py\n"
        + "synqueue  metrics  listener netns laddr lport\nsynqueue  plots    queue_depth\n"
        + "synqueue  lab      accept-overflow sizing\nsynqueue  tier     full\nsynqueue  object   listener\n"
        + "synqueue  train    0\nsynqueue  bench    accept-overflow:healthy accept-overflow:sizing\n"
    )
    (pack / "analysis" / "rules" / "synqueue.py").write_text(FIFTH_RULE)
    (pack / "analysis" / "wording" / "synqueue.py").write_text(FIFTH_WORDING)
    return pack


# The fifth family's rule and wording: a finding on each listener the accept-queue probe saw full.
FIFTH_RULE = """
from analysis.findings import Finding
from analysis.rules.base import Rule, RunView


def _logic(run: RunView) -> list[Finding]:
    rows = run.table("aq_listener")
    full = rows[rows["full_events"] > 0].drop_duplicates(["netns", "laddr", "lport"])
    return [Finding("syn_queue_overflow", "confirmed", {"netns": int(r.netns), "laddr": r.laddr, "lport": int(r.lport)},
                    cause_class="sizing") for r in full.itertuples()]


RULE = Rule("syn_queue_overflow", ("aq_listener",), _logic)
"""
FIFTH_WORDING = """
from analysis.wording.base import Wording

WORDING = Wording("syn_queue_overflow", "SYN queue overflow", {"sizing": "too small"}, {}, lambda link, ev: None)
"""
# Run inside the copy, whose analysis/ reads the copy's registry: the metadata schema, the
# grader and the fleet combiner with the fifth family.
FIFTH_CHECKS = """
import json, shutil, sys
from pathlib import Path
from analysis.combiners.fleet import judge
from analysis.load import Run, RunDataError
from training.grade import FAMILY_OF_KIND, grade, object_of_finding
from training.incidents import WEIGHTS, Incident

fixture, fleet = Path(sys.argv[1]), Path(sys.argv[2])
out = {}
host = fleet / "web-1"
shutil.copytree(fixture, host)
meta = json.loads((host / "metadata.json").read_text())
meta["probes"]["synqueue"] = {"file": "probes/synqueue.bt", "tier": "tracepoint", "status": "ok", "rows": 3}
(host / "metadata.json").write_text(json.dumps(meta))
Run.open(host)
meta["probes"]["nosuch"] = meta["probes"]["synqueue"]
bad = fleet / "bad"
shutil.copytree(host, bad)
(bad / "metadata.json").write_text(json.dumps(meta))
try:
    Run.open(bad)
    out["unknown_family"] = "accepted"
except RunDataError as e:
    out["unknown_family"] = str(e)
cell = judge("web-1", host).cells["syn_queue_overflow"]
out["cell"] = [cell.status, cell.objects]
finding = {"kind": "syn_queue_overflow", "subject": {"laddr": "198.18.0.1", "lport": 8080}}
out["family"], out["object"] = FAMILY_OF_KIND["syn_queue_overflow"], object_of_finding(finding)
key = {"family": "synqueue", "object": "198.18.0.1:8080", "cause": "sizing"}
answer = {**key, "fix": "raise_backlog", "also_suspect": []}
out["grade"] = grade(Incident(1, "synqueue", "x", {}, key), answer).total
out["drawn"] = "synqueue" in WEIGHTS
print(json.dumps(out))
"""


def test_a_fifth_family_passes_validation_grading_and_the_fleet(pack_with_fifth_family: Path) -> None:
    pack = pack_with_fifth_family
    r = subprocess.run(
        [sys.executable, "-c", FIFTH_CHECKS, str(fixture_run("accept-overflow-stall")), str(pack / "fleet")],
        cwd=pack, env={**os.environ, "PYTHONPATH": str(pack)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.splitlines()[-1])
    assert "nosuch" in out["unknown_family"], "the schema still refuses a family the registry does not have"
    assert out["cell"] == ["confirmed", ["198.18.0.1:8080"]]
    assert (out["family"], out["object"], out["grade"], out["drawn"]) == ("synqueue", "198.18.0.1:8080", 100, False)


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


@pytest.mark.parametrize("tier", TIERS)
def test_a_tier_runs_the_families_the_registry_gives_it(tier: str) -> None:
    """capture --tier and monitor --tier take the rare tier's families from the registry's tier key."""
    script = f"source collector/lib.sh; tier_families {tier}"
    out = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    want = [f.name for f in FAMILIES.values() if tier == "full" or f.tier == tier]
    assert out.split() == [",".join(want)] and want
    for driver in ("collector/capture", "scripts/monitor"):
        text = (ROOT / driver).read_text()
        assert f"$(tier_families {tier})" in text or tier == "full", driver


# The guard: no tracked file outside tests/ and docs/ keeps a list of the families of its own
# (the registry itself is the list). Four names on one line, or in one literal, make a list:
# with a fifth family, a stale list of the four still fails. A lab or an example naming the two
# or three families it runs is not a list of all of them.
LIST_OF = 4
WORD = {f: re.compile(rf"(?<!\w){f}(?!\w)") for f in NAMES}
SCALAR = (ast.Constant,)


def named(text: str) -> set[str]:
    return {f for f, word in WORD.items() if word.search(text)}


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    skip = ("tests/", "docs/")
    return [f for f in out.split("\0") if f and not f.startswith(skip) and f != "probes/families.conf"]


def _strings(nodes: list[ast.expr | None]) -> str:
    return " ".join(n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str))


def python_literals(text: str) -> list[tuple[int, str]]:
    """Each list, tuple or set literal (its strings), and each dict whose keys and values are
    all plain values (a lookup table: weight by family, family by kind). A dict of structures
    keyed by family (a trainee's hints per family) is per-family content, not a list:
    tests/training holds its keys to the registry."""
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out.append((node.lineno, _strings(list(node.elts))))
        elif isinstance(node, ast.Dict) and all(isinstance(n, SCALAR) for n in [*node.keys, *node.values]):
            out.append((node.lineno, _strings([*node.keys, *node.values])))
    return out


# A shell array over several lines, a bracketed list (JSON, YAML flow), a YAML block list.
TEXT_LITERALS = re.compile(r"\w+=\((?:[^()]|\n)*?\)|\[[^\[\]{}]*\]|(?:^[ \t]*- [^\n]*\n)+", re.M)


def text_literals(text: str) -> list[tuple[int, str]]:
    return [(text.count("\n", 0, m.start()) + 1, m.group()) for m in TEXT_LITERALS.finditer(text)]


def family_lists(path: str, text: str) -> list[str]:
    """Where TEXT (the file PATH) names LIST_OF families or more on a line or in a literal."""
    found = [f"{path}:{n}: {line.strip()[:120]}" for n, line in enumerate(text.splitlines(), 1)
             if len(named(line)) >= LIST_OF]  # fmt: skip
    literals = python_literals(text) if path.endswith(".py") else text_literals(text)
    found += [f"{path}:{n}: a literal naming {', '.join(sorted(named(s)))}" for n, s in literals
              if len(named(s)) >= LIST_OF]  # fmt: skip
    return found


def test_no_file_keeps_a_list_of_the_families() -> None:
    """Every tracked file outside tests/ and docs/, with no allow-list."""
    found = []
    for path in tracked_files():
        try:
            text = (ROOT / path).read_text(encoding="utf-8")
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue  # binary, or a submodule
        found += family_lists(path, text)
    assert not found, "lists of families outside probes/families.conf:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("path", "text", "flagged"),
    [
        ("x.py", 'FAMILIES = ("accept_queue", "retransmits", "epoll", "time_wait")\n', True),
        ("x.py", 'W = {\n "accept_queue": 2,\n "retransmits": 2,\n "epoll": 2,\n "time_wait": 1,\n}\n', True),
        ("x.py", 'K = {\n "a": "accept_queue",\n "b": "retransmits",\n "c": "epoll",\n "d": "time_wait",\n}\n', True),
        ("x.py", 'H = {\n "accept_queue": ["x"],\n "retransmits": [],\n "epoll": [],\n "time_wait": [],\n}\n', False),
        ("lab.sh", "LAB_PROBES=time_wait,retransmits,accept_queue\n", False),
        ("lab.sh", "cases=(\n\taccept_queue@a:b\n\tretransmits@c:d\n\ttime_wait@e:f\n\tepoll@g:h\n)\n", True),
        ("x.yml", "probes:\n  - accept_queue\n  - retransmits\n  - time_wait\n  - epoll\nnext: 1\n", True),
        ("README.md", "the probes of `epoll.bt`, `time_wait.bt`, `retransmits.bt` and `accept_queue.bt`\n", True),
        ("README.md", "epoll_wait and tq_time_wait.prom and TIME_WAIT: accept_queue, retransmits\n", False),
    ],
)
def test_the_guard_finds_a_list(path: str, text: str, flagged: bool) -> None:
    assert bool(family_lists(path, text)) is flagged, family_lists(path, text)
