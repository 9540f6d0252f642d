"""Training mode end to end (scripts/train, training/): for each family and for a healthy host a
seeded incident is started on the busy-host lab, a scripted trainee follows the documented
procedure — its own capture of the two namespaces while the incident runs, the report, the
chain of the first confirmed finding — and answers; the grader, comparing with the fault the
generator injected, gives full marks. The same trainee's answer with a wrong object, with a
healthy neighbour also blamed, and with a seed-post myth as the fix loses what the rubric says.
A second start while one runs is refused; nothing is left behind."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, leftovers
from training.grade import FAMILY_OF_KIND, RUBRIC, grade, object_of_finding
from training.incidents import draw

pytestmark = pytest.mark.integration
MAX = sum(RUBRIC.values())
# The trainee's fix for each cause class the report names (docs/training.md's closed list).
FIX_FOR = {"sizing": "raise_backlog", "capacity": "more_workers", "stall": "fix_accept_loop",
           "data_loss": "find_lossy_hop", "syn_loss": "find_lossy_hop", "loop_saturated": "more_loops",
           "short_connections_client_closes": "reuse_connections"}  # fmt: skip
# SYN retransmits toward an overflowing listener are that overflow's consequence, not a cause.
CONSEQUENCES = {"remote_accept_queue_full", "local_accept_queue_full"}
# The incident's load, and the trainee's capture inside it: `train start` returns when the
# servers are up and the load begins; the capture needs a few seconds to attach, and the
# event-loop rule at least 3 busy intervals (a 9 s capture in a 12 s load saw 3 of loop0's).
LOAD_SECONDS = 18
CAPTURE_SECONDS = 11


def _seed(family: str | None) -> int:
    return next(s for s in range(1000) if draw(s).family == family)


def _train(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([str(ROOT / "scripts" / "train"), *args], capture_output=True, text=True, env=env,
                       timeout=400)  # fmt: skip
    assert not check or r.returncode == 0, r.stderr[-3000:]
    return r


def _namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith("tq-busy-host-")]


def _trainee_answer(run: Path) -> dict[str, Any]:
    """What the documented procedure gives: the first confirmed finding that is not another's
    consequence, named in the answer's words; none when the report found nothing."""
    found = json.loads((run / "verdicts.json").read_text())["findings"]
    causes = [f for f in found if f["status"] == "confirmed" and f.get("cause_class") not in CONSEQUENCES]
    if not causes:
        return {"family": "none", "object": None, "cause": "none", "fix": "nothing", "also_suspect": []}
    f = causes[0]
    return {"family": FAMILY_OF_KIND[f["kind"]], "object": object_of_finding(f), "cause": f["cause_class"],
            "fix": FIX_FOR[f["cause_class"]], "also_suspect": []}  # fmt: skip


@pytest.mark.parametrize("family", ["accept_queue", "retransmits", "epoll", "time_wait", None])
def test_a_scripted_trainee_gets_full_marks(kernel, tmp_path: Path, family: str | None) -> None:
    seed = _seed(family)
    env = {**os.environ, "TQ_TRAIN_DIR": str(tmp_path / "state"), "TQ_TRAIN_LOG": str(tmp_path / "log.jsonl")}
    started = _train(env, "start", "--seed", str(seed), "--seconds", str(LOAD_SECONDS), "--trainee", "ci")
    page = started.stdout
    assert draw(seed).page in page
    # Nothing on the page gives the fault away.
    for word in ("backlog", "loss", "loop0", "TIME_WAIT", draw(seed).variant):
        assert word not in page, (word, page)
    assert "an incident is running" in _train(env, "start", check=False).stderr
    # The trainee's own capture of the incident, while it runs.
    mine = tmp_path / "mine"
    netns = [a for ns in _namespaces() for a in ("-n", ns)]
    assert len(netns) == 4, netns
    subprocess.run([str(ROOT / "collector" / "capture"), "-d", str(CAPTURE_SECONDS), "-q", *netns, "-o", str(mine)],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    answer = _trainee_answer(mine)
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(answer))
    done = _train(env, "answer", str(path))
    graded = json.loads(done.stdout.split("\n}\n")[0] + "\n}")
    assert graded["total"] == MAX, (answer, draw(seed).key, graded)
    assert f"Seed {seed}" in done.stdout and "Fastest to find it:" in done.stdout
    if family is not None:
        assert "  cause: " in done.stdout and "  verification: " in done.stdout, done.stdout
    # The same answer, worse: each loses what the rubric says (graded against the same seed).
    inc = draw(seed)
    worse = [({"fix": "tcp_tw_recycle"}, RUBRIC["fix"] + 10)]  # a myth (C45): cures nothing, costs 10 more
    if family is None:  # right only for "nothing wrong": a fault named on a healthy host keeps only time
        blame = {"family": "accept_queue", "object": inc.neighbours[0], "cause": "sizing", "fix": "raise_backlog"}
        worse += [(blame, MAX - RUBRIC["time"])]
    else:
        worse += [({"object": inc.neighbours[0]}, RUBRIC["object"] + RUBRIC["no_healthy_blamed"]),
                  ({"also_suspect": inc.neighbours[:1]}, RUBRIC["no_healthy_blamed"])]  # fmt: skip
    for change, lost in worse:
        g = grade(inc, {**answer, **change}).to_dict()
        assert g["total"] == MAX - lost, (change, g)
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [(x["seed"], x["trainee"], x["grade"]["total"]) for x in log] == [(seed, "ci", MAX)]
    report = _train(env, "report", str(tmp_path / "log.jsonl"))
    assert "1 answers by 1 trainees" in report.stdout and (tmp_path / "training-report.png").is_file()
    assert _namespaces() == [] and leftovers("tq-busy-host") == []
