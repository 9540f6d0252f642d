"""training/debrief.py on a real capture (tests/fixtures/accept-overflow-stall, report
written into a copy): the finding that names the injected object is shown link by link, with
the fastest commands and the myths; a healthy host's capture with findings says so."""

from __future__ import annotations

import dataclasses

from analysis.__main__ import main as analysis_main
from training.debrief import debrief
from training.incidents import draw


def _incident(family: str | None, obj: str | None):
    base = draw(next(s for s in range(100) if draw(s).family == family))
    return dataclasses.replace(base, key={**base.key, "object": obj})


def test_the_injected_objects_chain_in_words(copy_fixture) -> None:
    run = copy_fixture("accept-overflow-stall")
    assert analysis_main(["report", str(run)]) == 0
    text = debrief(_incident("accept_queue", "198.18.0.1:8080"), run)
    assert "TCP accept queue overflow on 198.18.0.1:8080" in text
    for link in ("symptom", "counter", "probe", "cause", "fix", "verification"):
        assert f"\n  {link}: " in text, (link, text)
    assert "Fastest to find it:" in text and "C06" in text


def test_another_object_has_no_chain_and_a_healthy_host_with_findings_is_named(copy_fixture) -> None:
    run = copy_fixture("accept-overflow-stall")
    assert analysis_main(["report", str(run)]) == 0
    assert "The capture has no finding on 198.18.0.1:9999" in debrief(_incident("accept_queue", "198.18.0.1:9999"), run)
    assert "finding(s) on a healthy host" in debrief(_incident(None, None), run)
