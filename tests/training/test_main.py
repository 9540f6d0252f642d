"""python -m training: the page, the trainer's key, a graded answer, and a bad answer file
as a clear error naming the file and the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training.__main__ import main
from training.incidents import draw


def test_the_page_says_nothing_of_the_key(capsys) -> None:
    assert main(["page", "7"]) == 0
    out = capsys.readouterr().out
    assert draw(7).page in out and "5274" not in out and "retransmit" not in out


def test_the_key_and_a_graded_answer(tmp_path: Path, capsys) -> None:
    assert main(["key", "7"]) == 0
    key = json.loads(capsys.readouterr().out)["key"]
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps({**key, "fix": "find_lossy_hop", "also_suspect": []}))
    assert main(["grade", "7", str(answer), "--hints", "1", "--minutes", "4"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == 95


def test_a_bad_answer_file_names_its_line(tmp_path: Path) -> None:
    answer = tmp_path / "answer.json"
    answer.write_text('{\n  "family": "epoll",\n  "object": loop0\n}\n')
    with pytest.raises(SystemExit, match=rf"^error: {answer}:3: column 13: Expecting value"):
        main(["grade", "7", str(answer)])
    answer.write_text(json.dumps({"family": "dns"}))
    with pytest.raises(SystemExit, match=rf"^error: {answer}: family: 'dns' is not one of"):
        main(["grade", "7", str(answer)])
    with pytest.raises(SystemExit, match="No such file"):
        main(["grade", "7", str(tmp_path / "none.json")])


def test_the_distribution_of_a_hundred_seeds(capsys) -> None:
    assert main(["distribution", "100"]) == 0
    assert sum(json.loads(capsys.readouterr().out).values()) == 100
    assert main(["distribution", "100", "--ip-version"]) == 0
    by_version = json.loads(capsys.readouterr().out)
    assert sum(by_version.values()) == 100 and {"time_wait ipv4", "time_wait ipv6"} <= set(by_version)
