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

import difflib

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
    """Look up a question by id; an unknown id gets the three closest ids, not the whole bank.

    Examples
    --------
    >>> try:
    ...     get_question("anatomy.kv_bytes_per_tokn")
    ... except KeyError as error:
    ...     print(error.args[0])
    unknown question id 'anatomy.kv_bytes_per_tokn'. Did you mean 'anatomy.kv_bytes_per_token'?
    """
    registry = _registry()
    if not isinstance(question_id, str) or question_id not in registry:
        text = str(question_id)[:100]
        close = difflib.get_close_matches(text, list(registry), n=3, cutoff=0.6)
        if not close:   # the chapter part alone: 'decode.knee' -> ids of that chapter that contain 'knee'
            chapter, _, name = text.partition(".")
            close = [q for q in registry if q.startswith(chapter + ".") and name and name in q][:3]
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else (
            f" Question ids look like 'anatomy.kv_bytes_per_token'; chapters: {', '.join(question_modules())}.")
        raise KeyError(f"unknown question id {text!r}.{hint}")
    return registry[question_id]
