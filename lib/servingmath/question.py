"""Question types of the book's checked exercises: :class:`Question` and :class:`Mistake`.

The question bank (:mod:`servingmath.questions`) declares its questions with these; the checker
(:mod:`servingmath.checks`) evaluates answers against them. They live apart from the checker so
that the layers stay acyclic: question types -> the question bank -> the checker.
"""

from __future__ import annotations

import hashlib
import hmac
import random
import re
import string
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Callable

from .units import UNIT_SCALES

__all__ = ["Question", "Mistake", "Template", "student_id", "template_fields"]


@dataclass(frozen=True)
class Mistake:
    """A known wrong answer and the hint it earns.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    ``answer`` maps the question's parameters to the wrong value, in SI units
    (or a sympy expression for symbolic questions, a string for choices, or a regular
    expression of a wrong claim for conceptual questions). ``name`` is a short label for the
    slip, which the grader lists per student (default: the hint's first clause).
    """

    hint: str
    answer: Callable[[dict], Any]
    name: str = ""

    @property
    def label(self) -> str:
        """The slip's short name: ``name``, or the hint cut at its first colon or full stop."""
        if self.name:
            return self.name
        first = re.split(r"(?<=[a-z0-9)])[.:;](?:\s|$)", self.hint.strip(), maxsplit=1)[0]
        return first if len(first) <= 70 else first[:69].rstrip() + "…"


def template_fields(text: str) -> set[str]:
    """The names of the ``{fields}`` of a format string (``"{a:.1f} and {b}"`` -> ``{"a", "b"}``).

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(text) if name}


@dataclass(frozen=True)
class Template:
    """A model answer written once per language with its numbers as fields: ``text.format(**values)``.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    ``facts`` maps the question's parameters to the numbers the answer quotes (computed by the
    library), so every language's answer quotes the same numbers from one computation
    (:func:`servingmath.drill.localize`, ``data/drill_zh.json``). A Template is called like any ``answer``:
    ``template(params)``.

    >>> t = Template("about {gb:.0f} GB", facts=lambda p: {"gb": 16.06})
    >>> t({}), sorted(template_fields(t.text))
    ('about 16 GB', ['gb'])
    """

    text: str
    facts: Callable[[dict], dict] | None = None

    def values(self, params: dict) -> dict:
        """The parameters and the facts, the fields the text is formatted with."""
        return {**params, **(self.facts(params) if self.facts else {})}

    def render(self, text: str, params: dict) -> str:
        """``text`` (this answer or a translation of it) formatted with this answer's values."""
        return text.format(**self.values(params))

    def __call__(self, params: dict) -> str:
        return self.render(self.text, params)


def student_id(name: str) -> str:
    """The form of a student's name that variants are derived from: NFC, trimmed, case-folded.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"student must be a non-empty name, got {name!r}")
    return unicodedata.normalize("NFC", name).strip().casefold()


@dataclass(frozen=True)
class Question:
    """One checked exercise question.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Parameters
    ----------
    id : str
        ``"<chapter slug>.<short name>"``, e.g. ``"anatomy.tpot"``.
    prompt : str
        The question as the student reads it (with its unit); ``{name}`` fields are filled
        from the parameters (:meth:`render`).
    answer : callable
        ``params -> expected answer``: a number in SI units, a sympy
        expression, or a string for multiple-choice questions.
    unit : str or None
        Unit in which a plain-number answer is read (``"ms"``, ``"GB"``,
        ``"B"``, ``"tok/s"``); ``None`` for dimensionless numbers.
    kind : {"numeric", "symbolic", "choice", "conceptual"}
    rel_tol : float
        Relative tolerance for numeric answers (default 1 %).
    mistakes : list of Mistake
        Known wrong answers, each with its hint; tested to be rejected.
    params : dict
        Parameters of the question (model, accelerator, ...). Variants of a
        question draw other values; the answer is recomputed from them.
    variants : dict
        Parameter name -> the values a variant may draw (see :meth:`draw` and :meth:`draw_for`).
    derive : callable, optional
        ``params -> params`` adding values that depend on the drawn ones
        (e.g. a timestamp computed from two others), applied after drawing.
    choices : tuple of str
        For ``kind="choice"``.
    symbols : dict
        Names -> sympy symbols: the only names a formula answer may use.
    key_points : tuple of (str, str)
        Conceptual questions: (what a strong answer names, a regular expression that
        finds it in a free-text answer). ``answer`` returns the model answer; each
        Mistake's ``answer`` returns a pattern of a wrong claim (e.g. ``"exponential"``),
        inverted claims ("helps at large batch") included.
    chapter, difficulty : str
        Where the question belongs and how hard it is (``easy``/``medium``/``hard``),
        used by the interview drill to pick questions.
    """

    id: str
    prompt: str
    answer: Callable[[dict], Any]
    unit: str | None = None
    kind: str = "numeric"
    rel_tol: float = 0.01
    mistakes: tuple = ()
    params: dict = field(default_factory=dict)
    choices: tuple = ()
    symbols: dict = field(default_factory=dict)
    variants: dict = field(default_factory=dict)
    derive: Callable[[dict], dict] | None = None
    key_points: tuple = ()
    chapter: str = ""
    difficulty: str = "medium"

    def __post_init__(self):
        if self.kind not in {"numeric", "symbolic", "choice", "conceptual"}:
            raise ValueError(f"kind must be 'numeric', 'symbolic', 'choice' or 'conceptual', got {self.kind!r}")
        if self.kind == "conceptual" and not self.key_points:
            raise ValueError(f"conceptual question {self.id!r} needs key_points")
        if self.difficulty not in {"easy", "medium", "hard"}:
            raise ValueError(f"difficulty must be 'easy', 'medium' or 'hard', got {self.difficulty!r}")
        if self.unit is not None and self.unit not in UNIT_SCALES:
            raise ValueError(f"unit {self.unit!r} of question {self.id!r} is not a known unit")
        object.__setattr__(self, "mistakes", tuple(self.mistakes))

    def expected(self, params: dict | None = None):
        """The expected answer for ``params`` (default: the question's own)."""
        values = {**self.params, **(params or {})}
        return self.answer(self.derive(values) if self.derive else values)

    def _drawn(self, rng) -> dict:
        params = dict(self.params)
        params.update({name: rng.choice(list(options)) for name, options in sorted(self.variants.items())})
        return self.derive(params) if self.derive else params

    def draw(self, seed: int | None) -> dict:
        """The parameters of *practice* variant ``seed``: each entry of ``variants`` drawn by a
        generator seeded with (seed, question id). ``None`` gives the default parameters.

        Practice seeds are public (the drill prints them): anyone can compute their answers.
        Graded hand-outs use :meth:`draw_for`, which needs the course key.
        """
        if seed is None or not self.variants:
            return self.derive(dict(self.params)) if self.derive else dict(self.params)
        return self._drawn(random.Random(f"{int(seed)}:{self.id}"))

    def draw_for(self, key: bytes | str, student: str) -> dict:
        """The parameters of ``student``'s graded variant in the course whose secret is ``key``.

        Each parameter is drawn by a generator seeded with HMAC-SHA256(key, student id, question
        id): without the key, nothing in the hand-out or the library leads to the variant, so the
        answer machinery cannot compute a graded answer for anyone who lacks the key.
        """
        if isinstance(key, str):
            key = key.encode()
        if not isinstance(key, bytes) or not key:
            raise ValueError("key must be a non-empty course key (bytes or str)")
        if not self.variants:
            return self.draw(None)
        message = f"servingmath-variant\0{student_id(student)}\0{self.id}".encode()
        digest = hmac.new(key, message, hashlib.sha256).digest()
        return self._drawn(random.Random(int.from_bytes(digest, "big")))

    def render(self, params: dict | None = None) -> str:
        """The prompt with the parameters filled in (``{model}`` -> ``Llama-3.1-8B``)."""
        values = {**self.params, **(params or {})}
        try:
            return self.prompt.format(**values)
        except (KeyError, IndexError, ValueError):
            return self.prompt
