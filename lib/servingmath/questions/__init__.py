"""The registry of checked exercise questions, one module per chapter.

Each module in this package defines ``QUESTIONS``, a list of
:class:`servingmath.checks.Question` whose ids start with the module's name
(``anatomy.tpot`` lives in ``questions/anatomy.py``). Modules are found
automatically: adding a chapter's questions needs no edit here.

Examples
--------
>>> get_question("anatomy.kv_bytes_per_token").unit
'B'
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from .._validation import unknown_name

__all__ = ["all_questions", "get_question", "question_modules"]


def question_modules() -> list[str]:
    """Names of the modules that hold questions (``anatomy``, ``rooflines``, ...)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


@cache
def _registry() -> dict:
    registry = {}
    for name in question_modules():
        module = importlib.import_module(f"{__name__}.{name}")
        for question in getattr(module, "QUESTIONS", []):
            if not question.id.startswith(name + "."):
                raise ValueError(f"question id {question.id!r} must start with {name + '.'!r}")
            if question.id in registry:
                raise ValueError(f"duplicate question id {question.id!r}")
            registry[question.id] = question
    return registry


def all_questions() -> dict:
    """Every question: id -> Question."""
    return dict(_registry())


def get_question(question_id: str):
    """Look up a question by id; unknown ids get the closest matches."""
    registry = _registry()
    if question_id not in registry:
        raise unknown_name("question_id", question_id, registry)
    return registry[question_id]
