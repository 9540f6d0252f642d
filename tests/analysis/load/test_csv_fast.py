"""analysis/load/csv_fast.py: a plain file read by pyarrow gives the careful path's frame, cell for
cell and dtype for dtype; a cell the careful path would read otherwise (or refuse) sends the file
there. The counters' delta chain, checked at once, agrees with the row-by-row check."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from analysis.contract import TABLES
from analysis.load import RunDataError, csv_fast
from analysis.load.coerce import typed
from analysis.load.content_checks import counter_errors
from analysis.load.csv_fast import fast_table
from analysis.load.csv_rows import parse_rows

# Rows as sample-netns writes them (a soak capture, 2026-11-28): a gauge falls, a counter's first
# sample has no delta.
COUNTERS = (
    "time_s,netns,group,counter,value,delta\n"
    "1795829002,4026531833,Tcp,CurrEstab,12,\n"
    "1795829002,4026531833,TcpExt,ListenOverflows,0,\n"
    "1795829003.25,4026531833,Tcp,CurrEstab,9,-3\n"
    "1795829003.25,4026531833,TcpExt,ListenOverflows,4,4\n"
)
TW = (
    "time_s,netns,laddr,raddr,service_port,service_local,count,timer_min_s,timer_max_s\n"
    "1795829002,4026531833,127.0.0.1,127.0.0.1,29899,1,180,0.5,59.75\n"
    "1795829003,4026531833,127.0.0.1,127.0.0.1,29899,1,175,,\n"
)


def _careful(path: Path, name: str) -> pd.DataFrame:
    text = path.read_text()
    rows, lines, _, _ = parse_rows(path, text, TABLES[name])
    return typed(path, TABLES[name], rows, lines, text)


@pytest.mark.parametrize(("name", "text"), [("counters", COUNTERS), ("tw_sockets", TW)])
def test_a_plain_file_reads_as_the_careful_path_reads_it(tmp_path: Path, name: str, text: str) -> None:
    f = tmp_path / TABLES[name].file
    f.write_text(text)
    fast = fast_table(f, TABLES[name])
    assert fast is not None
    df, n = fast
    assert n == text.count("\n") - 1
    pd.testing.assert_frame_equal(df, _careful(f, name))


@pytest.mark.parametrize(
    ("cell", "why"),
    [
        (" 5", "pyarrow trims spaces; the careful path refuses the cell"),
        ("0x10", "pyarrow reads hexadecimal"),
        ("+5", "a sign the careful path reads cell by cell"),
        ("5.0", "not an integer"),
        ("", "empty where the contract wants a value"),
        ('"5"', "quoted: RFC 4180 rows, line by line"),
    ],
)
def test_a_cell_not_read_at_once_sends_the_file_to_the_careful_path(tmp_path: Path, cell: str, why: str) -> None:
    f = tmp_path / "tw_sockets.csv"
    f.write_text(TW.replace(",180,", f",{cell},"))
    assert fast_table(f, TABLES["tw_sockets"]) is None, why


@pytest.mark.parametrize("cell", ["nan", "inf", "1e400"])
def test_a_float_that_is_not_finite_sends_the_file_to_the_careful_path(tmp_path: Path, cell: str) -> None:
    f = tmp_path / "tw_sockets.csv"
    f.write_text(TW.replace(",0.5,", f",{cell},"))
    assert fast_table(f, TABLES["tw_sockets"]) is None
    with pytest.raises(RunDataError, match="timer_min_s"):
        _careful(f, "tw_sockets")


def test_a_header_out_of_order_or_a_short_last_line_is_not_read_at_once(tmp_path: Path) -> None:
    f = tmp_path / "counters.csv"
    f.write_text(COUNTERS.replace("group,counter", "counter,group", 1))
    assert fast_table(f, TABLES["counters"]) is None
    f.write_text(COUNTERS.rstrip("\n"))
    assert fast_table(f, TABLES["counters"]) is None


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("4,4\n", "4,3\n"),  # delta is not value minus the previous value
        ("9,-3", "9,"),  # empty after an earlier sample
        ("0,\n", "0,0\n"),  # a delta on the first sample
        (
            "1795829003.25,4026531833,TcpExt,ListenOverflows,4,4",
            "1795829003.25,4026531833,TcpExt,ListenOverflows,-1,-1",
        ),
    ],
)
def test_the_counter_chain_checked_at_once_finds_what_the_row_by_row_check_finds(
    tmp_path: Path, old: str, new: str
) -> None:
    f = tmp_path / "counters.csv"
    f.write_text(COUNTERS)
    df, n = fast_table(f, TABLES["counters"]) or (None, 0)
    assert df is not None and counter_errors(f, TABLES["counters"], df, range(2, n + 2)) == []
    f.write_text(COUNTERS.replace(old, new, 1))
    df = _careful(f, "counters")
    errors = counter_errors(f, TABLES["counters"], df, range(2, len(df) + 2))
    assert errors and all("delta" in e for e in errors)


@pytest.mark.parametrize("block", [7, 64, 1 << 22])
def test_a_file_read_in_blocks_reads_as_the_careful_path_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    """Blocks are cut at a line end, whatever their size: rows are never split nor lost (7 bytes:
    a block shorter than a row, carried into the next)."""
    monkeypatch.setattr(csv_fast, "_BLOCK", block)
    f = tmp_path / TABLES["tw_sockets"].file
    f.write_text(TW + "".join(f"17958290{i:02d},4026531833,127.0.0.1,10.0.0.{i},80,0,{i},,1.5\n" for i in range(40)))
    fast = fast_table(f, TABLES["tw_sockets"])
    assert fast is not None and fast[1] == 42
    pd.testing.assert_frame_equal(fast[0], _careful(f, "tw_sockets"))


def test_a_file_of_a_header_alone_is_an_empty_table(tmp_path: Path) -> None:
    f = tmp_path / TABLES["tw_sockets"].file
    f.write_text(TW.splitlines(keepends=True)[0])
    fast = fast_table(f, TABLES["tw_sockets"])
    assert fast is not None and fast[1] == 0
    pd.testing.assert_frame_equal(fast[0], _careful(f, "tw_sockets"), check_index_type=False)
