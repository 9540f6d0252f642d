"""probes/examples/<probe>_example.txt: every probe file has one, and the output it quotes has
the shape the probe prints today, so an example cannot drift from its probe unnoticed.

What a probe prints is read from the probe file itself, the way collector/probe-to-csv reads
its output: '#<record>,<columns>' header lines (printf in BEGIN), CSV rows
'<record>,<fields>' (a printf whose format starts with the record name), and running totals
'@<record>__<counter>[key, ...]: N' (maps named @<record>__<column>; the key columns are those
between time_s and the first counter column). The quoted output is also fed to probe-to-csv,
which must accept every line of it.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ROOT

PROBES = ROOT / "probes"
EXAMPLES = PROBES / "examples"
PROBE_FILES = sorted(p.name for p in PROBES.glob("*.bt"))
MAX_LINES = 125

HEADER_PRINTF = re.compile(r'printf\("#([a-z0-9_]+),([^"\\]*)\\n"')
ROW_PRINTF = re.compile(r'printf\("([a-z0-9_]+),([^"]*)\\n"')
BANNER_PRINTF = re.compile(r'printf\("(# [^"]*\.bt schema=[^"]*)\\n"')
MAP_NAME = re.compile(r"@([a-z0-9]+(?:_[a-z0-9]+)*?)__([a-z0-9_]+)\[")
SPEC = re.compile(r"%-?[0-9]*l*[sdux]")
# Lines of quoted output in an example (leading blanks allowed).
TOTAL_LINE = re.compile(r"^@([a-z0-9]+(?:_[a-z0-9]+)*?)__([a-z0-9_]+)\[(.*)\]: (-?\d+)$")
CSV_LINE = re.compile(r"^#?([a-z0-9_]+),\S")
MARKER_LINE = re.compile(r"^=== \d+$")
BANNER_LINE = re.compile(r"^# \S+\.bt schema=")


@dataclass
class Record:
    name: str
    columns: list[str]  # time_s first, as the header names them
    row_fields: int | None = None  # fields after the name in the probe's row printf
    counters: set[str] = field(default_factory=set)  # columns printed as @<record>__<column> maps

    @property
    def header(self) -> str:
        return f"#{self.name}," + ",".join(self.columns)

    @property
    def nkeys(self) -> int:
        """Key columns of a totals record: those between time_s and the first counter."""
        for i, col in enumerate(self.columns[1:]):
            if col in self.counters:
                return i
        return len(self.columns) - 1


@dataclass
class Probe:
    file: str
    banners: list[re.Pattern[str]]
    records: dict[str, Record]

    @property
    def family(self) -> str:
        return self.file.split(".", 1)[0]


def parse_probe(path: Path) -> Probe:
    text = path.read_text()
    records = {m[1]: Record(m[1], m[2].split(",")) for m in HEADER_PRINTF.finditer(text)}
    for m in ROW_PRINTF.finditer(text):
        if m[1] in records:
            records[m[1]].row_fields = len(SPEC.findall(m[2]))
    for m in MAP_NAME.finditer(text):
        if m[1] in records:
            records[m[1]].counters.add(m[2])
    banners = [
        re.compile("^" + SPEC.sub(r"\\d+", re.escape(m[1]).replace(r"\%", "%")) + "$")
        for m in BANNER_PRINTF.finditer(text)
    ]
    return Probe(path.name, banners, records)


ALL = {f: parse_probe(PROBES / f) for f in PROBE_FILES}
KNOWN_RECORDS = {r for p in ALL.values() for r in p.records}


def example_path(probe_file: str) -> Path:
    return EXAMPLES / f"{probe_file.removesuffix('.bt')}_example.txt"


def example_lines(probe_file: str) -> list[str]:
    return [line.strip() for line in example_path(probe_file).read_text().splitlines()]


def record_of(line: str) -> str | None:
    """The record a line of quoted output belongs to, if it looks like one of any probe."""
    if (m := TOTAL_LINE.match(line)) and m[1] in KNOWN_RECORDS:
        return m[1]
    # A row or header: the record name, a comma, no blank (prose naming a record has one).
    if (m := CSV_LINE.match(line)) and m[1] in KNOWN_RECORDS:
        return m[1]
    return None


def test_every_probe_file_has_an_example() -> None:
    assert len(PROBE_FILES) >= 8
    missing = [f for f in PROBE_FILES if not example_path(f).is_file()]
    assert not missing, f"no probes/examples/<probe>_example.txt for {missing}"
    stray = {p.name for p in EXAMPLES.glob("*_example.txt")} - {example_path(f).name for f in PROBE_FILES}
    assert not stray, f"examples of probe files that no longer exist: {stray}"


@pytest.mark.parametrize("probe_file", PROBE_FILES)
def test_the_probe_is_parsed(probe_file: str) -> None:
    """The reading of the probe that the other tests rely on finds what it should."""
    probe = ALL[probe_file]
    assert probe.records, f"{probe_file}: no '#<record>,<columns>' header printf found"
    assert probe.banners, f"{probe_file}: no '# <name>.bt schema=N ...' banner printf found"
    for rec in probe.records.values():
        assert rec.columns[0] == "time_s"
        if rec.row_fields is None and not rec.counters:
            # A tier that cannot fill a record prints its header alone (the run directory
            # then holds the table, empty): a record the family's reference file fills.
            ref = ALL[probe_file.split(".", 1)[0] + ".bt"].records[rec.name]
            assert ref.columns == rec.columns and (ref.row_fields is not None or ref.counters), rec.name
            continue
        assert (rec.row_fields is None) != (not rec.counters), f"{rec.name}: printed as rows or as totals, one of them"
        if rec.row_fields is not None:
            assert rec.row_fields == len(rec.columns), f"{rec.name}: row printf and header disagree"
        else:
            assert rec.counters <= set(rec.columns), f"{rec.name}: a map names no column of its header"
            # Every map is a counter column after the keys (a tier may never print one:
            # retransmits.tracepoint.bt has no failed_events map, the column stays 0).
            assert rec.counters <= set(rec.columns[1 + rec.nkeys :])


@pytest.mark.parametrize("probe_file", PROBE_FILES)
def test_example_is_short_and_names_its_file(probe_file: str) -> None:
    text = example_path(probe_file).read_text()
    assert len(text.splitlines()) <= MAX_LINES
    assert f"probes/{probe_file}" in text, "the example shows the command that runs its probe file"


@pytest.mark.parametrize("probe_file", PROBE_FILES)
def test_example_quotes_every_header_as_printed(probe_file: str) -> None:
    probe = ALL[probe_file]
    lines = example_lines(probe_file)
    for rec in probe.records.values():
        assert rec.header in lines, f"the example lacks the probe's header line {rec.header!r}"
    for line in lines:
        if line.startswith("#") and record_of(line):
            name = record_of(line)
            assert name in probe.records, f"{line!r}: {probe_file} prints no {name} record"
            assert line == probe.records[name].header, f"header drifted from the probe: {line!r}"


@pytest.mark.parametrize("probe_file", PROBE_FILES)
def test_example_banner_matches_its_family(probe_file: str) -> None:
    """A banner line ('# accept_queue.bt schema=2 ...') is what a file of the family prints
    (the kprobe tier's example quotes the output of accept_queue.bt and says so)."""
    family = [p for p in ALL.values() if p.family == ALL[probe_file].family]
    banners = [line for line in example_lines(probe_file) if BANNER_LINE.match(line)]
    assert banners, "the example quotes the probe's banner line"
    for line in banners:
        assert any(b.match(line) for p in family for b in p.banners), f"banner drifted: {line!r}"


@pytest.mark.parametrize("probe_file", PROBE_FILES)
def test_example_records_have_the_probes_shape(probe_file: str) -> None:
    probe = ALL[probe_file]
    shown: set[str] = set()
    for line in example_lines(probe_file):
        name = record_of(line)
        if name is None or line.startswith("#"):
            continue
        assert name in probe.records, f"{line!r}: {probe_file} prints no {name} record"
        rec = probe.records[name]
        if (m := TOTAL_LINE.match(line)) is not None:
            assert rec.counters, f"{line!r}: {name} is printed as CSV rows, not totals"
            assert m[2] in rec.counters, f"{line!r}: {name} has no counter {m[2]}"
            keys = m[3].split(", ")
            assert len(keys) == rec.nkeys, f"{line!r}: {len(keys)} key columns, the probe prints {rec.nkeys}"
        else:
            assert rec.row_fields is not None, f"{line!r}: {name} is printed as totals, not CSV rows"
            fields = line.split(",")[1:]
            assert len(fields) == rec.row_fields, f"{line!r}: {len(fields)} fields, the probe prints {rec.row_fields}"
            assert fields[0].isdigit(), f"{line!r}: time_s is epoch seconds"
        shown.add(name)
    assert shown, f"the example quotes no record of {probe_file}"


@pytest.mark.parametrize("probe_file", PROBE_FILES)
def test_probe_to_csv_accepts_the_quoted_output(probe_file: str, tmp_path: Path) -> None:
    """The quoted lines, fed to collector/probe-to-csv, all become rows of known records."""
    quoted = [
        line
        for line in example_lines(probe_file)
        if record_of(line) or MARKER_LINE.match(line) or BANNER_LINE.match(line)
    ]
    raw = tmp_path / "probe.out"
    raw.write_text("\n".join(quoted) + "\n")
    out = subprocess.run(
        ["bash", str(ROOT / "collector" / "probe-to-csv"), str(raw), str(tmp_path / "csv")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "unknown records" not in out.stderr, out.stderr
    assert int(out.stdout.split()[0]) > 0, "no rows came out of the quoted output"
    for rec in ALL[probe_file].records.values():
        csv = tmp_path / "csv" / f"{rec.name}.csv"
        assert csv.is_file()
        rows = csv.read_text().splitlines()
        assert rows[0] == ",".join(rec.columns)
        assert all(len(r.split(",")) == len(rec.columns) for r in rows[1:])
