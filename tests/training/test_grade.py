"""training/grade.py: a diagnosis graded against the fault the incident injected. Full marks
for the right family, object, cause and fix in time without hints; a wrong object, a healthy
neighbour blamed and a seed-post myth as the fix each lose what the rubric says; a healthy
host is graded right only for "nothing wrong"."""

from __future__ import annotations

import pytest

from training.grade import FIXES, RUBRIC, AnswerError, grade, normalise
from training.incidents import draw

MAX = sum(RUBRIC.values())
# The fix that cures each injected cause.
CURE = {"sizing": "raise_backlog", "data_loss": "find_lossy_hop", "loop_saturated": "more_loops",
        "short_connections_client_closes": "reuse_connections", "none": "nothing"}  # fmt: skip


def _seed_of(family: str | None) -> int:
    return next(s for s in range(1000) if draw(s).family == family)


def _right(family: str | None) -> tuple:
    inc = draw(_seed_of(family))
    answer = {"family": inc.key["family"], "object": inc.key["object"], "cause": inc.key["cause"],
              "fix": CURE[inc.key["cause"]], "also_suspect": []}  # fmt: skip
    return inc, answer


@pytest.mark.parametrize("family", ["accept_queue", "retransmits", "epoll", "time_wait", None])
def test_the_right_answer_gets_full_marks(family: str | None) -> None:
    inc, answer = _right(family)
    g = grade(inc, answer, hints_used=0, minutes=5)
    assert g.total == MAX, g.to_dict()


def test_a_wrong_object_loses_the_object_and_the_healthy_neighbours_points() -> None:
    inc, answer = _right("accept_queue")
    answer["object"] = inc.neighbours[0]
    g = grade(inc, answer)
    assert g.total == MAX - RUBRIC["object"] - RUBRIC["no_healthy_blamed"], g.to_dict()


def test_each_healthy_neighbour_blamed_costs() -> None:
    inc, answer = _right("retransmits")
    answer["also_suspect"] = inc.neighbours[:1]
    assert grade(inc, answer).total == MAX - RUBRIC["no_healthy_blamed"]
    answer["also_suspect"] = inc.neighbours[:3]
    assert grade(inc, answer).total == MAX - RUBRIC["no_healthy_blamed"] - 2 * 10


def test_a_myth_as_the_fix_costs_more_than_a_wrong_fix() -> None:
    inc, answer = _right("time_wait")
    wrong = grade(inc, {**answer, "fix": "raise_backlog"})
    myth = grade(inc, {**answer, "fix": "lower_tcp_fin_timeout"})
    partial = grade(inc, {**answer, "fix": "tcp_tw_reuse"})
    assert wrong.total == MAX - RUBRIC["fix"]
    assert myth.total == MAX - RUBRIC["fix"] - 10 and any("C34" in n for n in myth.notes)
    assert partial.total == MAX - RUBRIC["fix"] // 2


def test_a_healthy_host_is_right_only_for_nothing_wrong() -> None:
    inc, answer = _right(None)
    assert grade(inc, answer).total == MAX
    blamed = {"family": "accept_queue", "object": inc.neighbours[0], "cause": "sizing", "fix": "raise_backlog"}
    g = grade(inc, blamed)
    assert g.points["family"] == g.points["object"] == g.points["cause"] == g.points["fix"] == 0
    assert g.points["no_healthy_blamed"] == 0 and g.total == RUBRIC["time"]


def test_hints_and_time_cost_points() -> None:
    inc, answer = _right("epoll")
    assert grade(inc, answer, hints_used=2).total == MAX - 10
    assert grade(inc, answer, hints_used=9).total == MAX - 15  # three levels at most
    assert grade(inc, answer, minutes=15).total == MAX - RUBRIC["time"] // 2
    assert grade(inc, answer, minutes=25).total == MAX - RUBRIC["time"]


def test_one_spelling_per_object() -> None:
    assert normalise("[::ffff:198.18.0.1]:8097") == normalise(" 198.18.0.1:8097") == "198.18.0.1:8097"
    assert normalise("198.18.0.2:5327 => 198.18.0.1:5245") == "198.18.0.2:5327->198.18.0.1:5245"
    # IPv6: with or without brackets, in any spelling of the address, one object.
    assert normalise("[2001:2:0::1]:8097") == normalise("2001:2::1:8097") == "[2001:2::1]:8097"
    assert normalise("[2001:0002::2]:5327 -> [2001:2::1]:5245") == "[2001:2::2]:5327->[2001:2::1]:5245"
    assert normalise("[2001:2::1]:8097") != normalise("[2001:2::1]:8098")
    assert normalise("Loop2") == "loop2"


@pytest.mark.parametrize(
    ("field", "value"), [("family", "dns"), ("cause", "gremlins"), ("fix", "reboot"), ("also_suspect", "x")]
)
def test_an_answer_outside_the_lists_names_its_field(field: str, value: str) -> None:
    inc, answer = _right("accept_queue")
    with pytest.raises(AnswerError, match=f"^{field}:"):
        grade(inc, {**answer, field: value})


def test_every_fix_in_the_list_is_judged() -> None:
    for name, fix in FIXES.items():
        assert set(fix) == {"cures", "helps", "myth"}, name
