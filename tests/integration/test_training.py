"""Training mode end to end (scripts/train, training/): for each family and for a healthy host a
seeded incident is started on the busy-host lab, a scripted trainee follows the documented
procedure — its own capture of the two namespaces while the incident runs, the report, the
chain of the first confirmed finding — and answers (tests/integration/incidents.py); the
grader, comparing with the fault the generator injected, gives full marks. The same trainee's
answer with a wrong object, with a healthy neighbour also blamed, and with a seed-post myth as
the fix loses what the rubric says. A second start while one runs is refused; nothing is left
behind."""

from __future__ import annotations

import re

import pytest

from analysis.families import NAMES
from training.grade import RUBRIC, grade
from training.incidents import draw

pytestmark = pytest.mark.integration
MAX = sum(RUBRIC.values())


@pytest.mark.parametrize("family", [*NAMES, None])
def test_a_scripted_trainee_gets_full_marks(kernel, incident, family: str | None) -> None:
    inc = incident(family)
    drawn = draw(inc.seed)
    assert drawn.page in inc.page
    # Nothing on the page gives the fault away.
    for word in ("backlog", "loss", "loop0", "TIME_WAIT", drawn.variant):
        assert word not in inc.page, (word, inc.page)
    assert "an incident is running" in inc.second_start_error
    # Nor do the servers' command lines (ps, ss -p): the five listeners alike but for their port,
    # no backlog, delay or work per loop on any of them.
    servers = [c for c in inc.command_lines if "/aqserver " in c or "/loopserver " in c]
    assert len(servers) == 6, inc.command_lines
    for flag in ("-backlog", "-accept-delay", "-wait-close", "-work", "small", "exhaust", "heavy", "light"):
        assert not [c for c in servers if flag in c], (flag, servers)
    assert len({re.sub(r"\d+", "N", c) for c in servers if "/aqserver " in c}) == 1, servers
    assert len(inc.namespaces) == 2, inc.namespaces  # the server's and the client's
    # The lossy flow's drops are on the path (a namespace with no name), in neither host's ruleset.
    assert not [r for r in inc.rulesets if "drop" in r], inc.rulesets
    graded = inc.graded
    assert graded["total"] == MAX, (inc.answer, drawn.key, graded)
    assert f"Seed {inc.seed}" in inc.debrief and "Fastest to find it:" in inc.debrief
    if family is not None:
        assert "  cause: " in inc.debrief and "  verification: " in inc.debrief, inc.debrief
    # The same answer, worse: each loses what the rubric says (graded against the same seed).
    worse = [({"fix": "tcp_tw_recycle"}, RUBRIC["fix"] + 10)]  # a myth (C45): cures nothing, costs 10 more
    if family is None:  # right only for "nothing wrong": a fault named on a healthy host keeps only time
        blame = {"family": "accept_queue", "object": drawn.neighbours[0], "cause": "sizing", "fix": "raise_backlog"}
        worse += [(blame, MAX - RUBRIC["time"])]
    else:
        worse += [({"object": drawn.neighbours[0]}, RUBRIC["object"] + RUBRIC["no_healthy_blamed"]),
                  ({"also_suspect": drawn.neighbours[:1]}, RUBRIC["no_healthy_blamed"])]  # fmt: skip
    for change, lost in worse:
        g = grade(drawn, {**inc.answer, **change}).to_dict()
        assert g["total"] == MAX - lost, (change, g)
    assert [(x["seed"], x["trainee"], x["grade"]["total"]) for x in inc.log] == [(inc.seed, "ci", MAX)]
    assert "1 answers by 1 trainees" in inc.report and inc.report_plot.is_file()
    assert inc.left_after == []
