"""Human wording for findings, kept apart from the rules' logic.

Each family of probes/families.conf has its wording module here, <family>.py,
beside its rule in analysis/rules/<family>.py.
Each holds its finding kind's title, cause names and templates, keyed by
(link, key), and the phrases those templates need, derived from the link's
evidence numbers. A template is a sequence of parts (template.py): a plain
string needs every number it names; an Opt is a clause left out, or replaced by
its `alt` words, when a number it names is missing (None, NaN, empty). Values
are written as words, never as Python reprs (numbers.py); a dict never reaches
a sentence. When a number a plain part needs is missing, the link says so in
words rather than guessing (describe.py). tests/analysis/wording/test_wording.py renders every
template with all of its numbers missing and with the numbers of every real
fixture.

The rest: catalog.py gathers the families' wording by finding kind;
objects.py names a finding's object and writes its title line; owners.py names
the object's owner (pod, container, unit) first; compare.py words
the A/B comparison's sentences (analysis/render writes the documents). This module re-exports
the public names.
"""

from __future__ import annotations

from .accept_queue import MODEL_TEMPLATES, model_sentence
from .base import Wording
from .catalog import CAUSE_NAMES, TEMPLATES, TITLES
from .compare import COMPARE_TEMPLATES, compare_line, compare_verdict_line
from .describe import LINK_TITLES, describe
from .numbers import is_missing, join_words, number
from .objects import STATUS_WORDS, headline, where
from .template import CONSTANTS, Opt, Part, fill

__all__ = [
    "CAUSE_NAMES",
    "COMPARE_TEMPLATES",
    "CONSTANTS",
    "LINK_TITLES",
    "MODEL_TEMPLATES",
    "STATUS_WORDS",
    "TEMPLATES",
    "TITLES",
    "Opt",
    "Part",
    "Wording",
    "compare_line",
    "compare_verdict_line",
    "describe",
    "fill",
    "headline",
    "is_missing",
    "join_words",
    "model_sentence",
    "number",
    "where",
]
