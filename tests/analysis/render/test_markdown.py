"""analysis/render/markdown.py: the one place render/ builds markdown tables, headings and lists."""

from __future__ import annotations

import re

from analysis.render import markdown as md
from tests.conftest import ROOT


def test_heading_is_followed_by_a_blank_line() -> None:
    assert md.heading("Findings") == ["## Findings", ""]
    assert md.heading("time wait", 3) == ["### time wait", ""]


def test_table_has_a_header_a_rule_and_a_line_per_row() -> None:
    assert md.table(["a", "b"], [[1, "x"], [2.5, None]]) == [
        "| a | b |",
        "|---|---|",
        "| 1 | x |",
        "| 2.5 | None |",
    ]
    assert md.table(["only"], []) == ["| only |", "|---|"]


def test_records_table_takes_its_columns_from_the_first_record() -> None:
    rows = [{"x": 1, "y": None}, {"y": 3, "x": 2, "z": 9}]
    assert md.records_table(rows, lambda v: "-" if v is None else str(v)) == [
        "| x | y |",
        "|---|---|",
        "| 1 | - |",
        "| 2 | 3 |",
    ]


def test_lists_images_and_emphasis() -> None:
    assert md.bullets(["a", "b"]) == ["- a", "- b"]
    assert md.bullets(iter(["c"]), indent=2) == ["  - c"]
    assert md.numbered(["x", "y"]) == ["1. x", "1. y"]
    assert md.bold("confirmed") == "**confirmed**"
    assert md.image("Retransmits", "plots/r.png") == "![Retransmits](plots/r.png)"


def test_escape_keeps_a_cell_one_cell() -> None:
    assert md.escape("a|b") == "a\\|b"
    assert md.row([md.escape("x|y"), "z"]) == "| x\\|y | z |"


def test_document_joins_lines() -> None:
    assert md.document(["# T", "", "text"]) == "# T\n\ntext"


def test_render_modules_build_no_table_by_hand() -> None:
    """Every table rule and row of render/ comes from markdown.py."""
    for path in sorted((ROOT / "analysis" / "render").glob("*.py")):
        if path.name == "markdown.py":
            continue
        text = path.read_text()
        assert "|---" not in text, f"{path.name} writes a table rule by hand"
        assert not re.search(r"""["']\| """, text), f"{path.name} writes a table row by hand"
