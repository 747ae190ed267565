"""The exercise checker: ``check(question_id, answer)`` in the cell after each answer.

It reports one of

* **not attempted** -- the answer is still the placeholder ``...``;
* **correct** -- within the question's stated tolerance (units converted if given);
* **not yet** -- with a hint when the answer matches a known mistake (K and V
  counted once, GB read as GiB, sparse FLOP/s, seconds for milliseconds,
  per-GPU for total, ...), otherwise a plain "not yet".

Expected answers are computed by the library when the check runs, never typed
twice. When the environment variable ``SERVINGMATH_STRICT_CHECKS`` is ``1``
(the test suite sets it for the solution notebooks) a wrong or missing answer
raises ``AssertionError``, so the solutions fail loudly.

Numeric answers are plain numbers in the unit the question names, or strings
with a unit (``"12.5 ms"``, ``"0.5 GiB"``), which are converted. Symbolic
answers are sympy expressions (or strings sympy can parse), compared by
symbolic equality.

Examples
--------
>>> q = Question("demo.bytes", "KV bytes per token of Llama-2-7B in bf16, in bytes",
...              answer=lambda p: 524288.0, unit="B",
...              mistakes=[Mistake("You counted K but not V: multiply by 2.", lambda p: 262144.0)])
>>> print(evaluate(q, ...))
demo.bytes: not attempted. Replace ... with your answer.
>>> print(evaluate(q, 524288))
demo.bytes: correct.
>>> print(evaluate(q, "0.5 MiB"))
demo.bytes: correct.
>>> print(evaluate(q, 262144))
demo.bytes: not yet. Hint: You counted K but not V: multiply by 2.
"""

from __future__ import annotations

import math
import numbers
import os
import random
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import sympy

from .units import UNIT_SCALES, parse_quantity

__all__ = ["Question", "Mistake", "CheckResult", "evaluate", "check", "use_seed", "active_seed",
           "GENERIC_MISTAKES"]

STRICT_ENV = "SERVINGMATH_STRICT_CHECKS"


@dataclass(frozen=True)
class Mistake:
    """A known wrong answer and the hint it earns.

    ``answer`` maps the question's parameters to the wrong value, in SI units
    (or a sympy expression for symbolic questions, or a string for choices).
    """

    hint: str
    answer: Callable[[dict], Any]


@dataclass(frozen=True)
class Question:
    """One checked exercise question.

    Parameters
    ----------
    id : str
        ``"<chapter slug>.<short name>"``, e.g. ``"anatomy.tpot"``.
    prompt : str
        The question as the student reads it (with its unit).
    answer : callable
        ``params -> expected answer``: a number in SI units, a sympy
        expression, or a string for multiple-choice questions.
    unit : str or None
        Unit in which a plain-number answer is read (``"ms"``, ``"GB"``,
        ``"B"``, ``"tok/s"``); ``None`` for dimensionless numbers.
    kind : {"numeric", "symbolic", "choice"}
    rel_tol : float
        Relative tolerance for numeric answers (default 1 %).
    mistakes : list of Mistake
        Known wrong answers, each with its hint; tested to be rejected.
    params : dict
        Parameters of the question (model, accelerator, ...). Variants of a
        question draw other values; the answer is recomputed from them.
    variants : dict
        Parameter name -> the values a variant may draw (see :meth:`draw`).
    derive : callable, optional
        ``params -> params`` adding values that depend on the drawn ones
        (e.g. a timestamp computed from two others), applied after drawing.
    choices : tuple of str
        For ``kind="choice"``.
    symbols : dict
        Names -> sympy symbols, used to parse string answers of symbolic questions.
    key_points : tuple of (str, str)
        Conceptual questions: (what a strong answer names, a regular expression that
        finds it in a free-text answer). ``answer`` returns the model answer; each
        Mistake's ``answer`` returns a pattern of a wrong claim (e.g. ``"exponential"``).
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

    def draw(self, seed: int | None) -> dict:
        """The parameters of variant ``seed``: each entry of ``variants`` drawn by a
        generator seeded with (seed, question id). ``None`` gives the default parameters."""
        params = dict(self.params)
        if seed is not None and self.variants:
            rng = random.Random(f"{int(seed)}:{self.id}")
            params.update({name: rng.choice(list(options))
                           for name, options in sorted(self.variants.items())})
        return self.derive(params) if self.derive else params

    def render(self, params: dict | None = None) -> str:
        """The prompt with the parameters filled in (``{model}`` -> ``Llama-3.1-8B``)."""
        values = {**self.params, **(params or {})}
        try:
            return self.prompt.format(**values)
        except (KeyError, IndexError, ValueError):
            return self.prompt


@dataclass(frozen=True)
class CheckResult:
    """Outcome of checking one answer: ``status`` is one of
    ``"not attempted"``, ``"correct"``, ``"incorrect"``, ``"invalid"``."""

    question_id: str
    status: str
    message: str

    @property
    def correct(self) -> bool:
        return self.status == "correct"

    def __str__(self) -> str:
        return f"{self.question_id}: {self.message}"


# Generic mistakes, tried after the question's own: (factor, dimension or None, hint)
GENERIC_MISTAKES = [
    (1e3, "s", "Off by a factor of 1000: check seconds versus milliseconds."),
    (1e-3, "s", "Off by a factor of 1000: check seconds versus milliseconds."),
    (2**30 / 1e9, "B", "Off by 7.4 %: that is GiB versus GB (2**30 versus 1e9 bytes)."),
    (1e9 / 2**30, "B", "Off by 7.4 %: that is GiB versus GB (2**30 versus 1e9 bytes)."),
    (2**20 / 1e6, "B", "Off by 4.9 %: that is MiB versus MB (2**20 versus 1e6 bytes)."),
    (1e6 / 2**20, "B", "Off by 4.9 %: that is MiB versus MB (2**20 versus 1e6 bytes)."),
    (2.0, None, "Off by exactly a factor of 2 (too large): K and V? sparse vs dense FLOP/s? 2 FLOPs per multiply-add?"),
    (0.5, None, "Off by exactly a factor of 2 (too small): K and V? sparse vs dense FLOP/s? 2 FLOPs per multiply-add?"),
]


def _dimension(unit: str | None) -> str | None:
    return None if unit is None else UNIT_SCALES[unit][1]


def _close(a: float, b: float, rel_tol: float) -> bool:
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=1e-12 * max(1.0, abs(b)) if b == 0 else 0.0)


def _to_si(question: Question, answer) -> tuple[float | None, str | None]:
    """Return (value in SI, problem message or None)."""
    if isinstance(answer, bool):
        return None, "expected a number, got True/False."
    if isinstance(answer, str):
        try:
            value, dimension = parse_quantity(answer)
        except ValueError as exc:
            return None, f"could not read your answer: {exc}"
        want = _dimension(question.unit)
        if dimension is None:
            scale = 1.0 if question.unit is None else UNIT_SCALES[question.unit][0]
            return value * scale, None
        if want is None:
            return None, f"this answer has no unit, but you gave one ({answer!r})."
        if dimension != want:
            return None, f"wrong kind of unit: the answer is in {want}, you gave {dimension} ({answer!r})."
        return value, None
    if isinstance(answer, np.ndarray) and answer.size == 1:
        answer = answer.item()
    if isinstance(answer, sympy.Basic):
        if not answer.is_number:
            return None, "expected a number, got an expression with free symbols."
        answer = float(answer)
    if not isinstance(answer, numbers.Number):
        return None, f"expected a number (or a string such as '12 ms'), got {type(answer).__name__}."
    value = float(answer)
    if not math.isfinite(value):
        return None, f"expected a finite number, got {value}."
    scale = 1.0 if question.unit is None else UNIT_SCALES[question.unit][0]
    return value * scale, None


def _evaluate_numeric(question, answer, params) -> CheckResult:
    value, problem = _to_si(question, answer)
    if problem:
        return CheckResult(question.id, "invalid", f"not yet: {problem}")
    expected = float(question.answer(params))
    if _close(value, expected, question.rel_tol):
        return CheckResult(question.id, "correct", "correct.")
    for mistake in question.mistakes:
        wrong = float(mistake.answer(params))
        if _close(value, wrong, question.rel_tol / 2) and not _close(wrong, expected, question.rel_tol):
            return CheckResult(question.id, "incorrect", f"not yet. Hint: {mistake.hint}")
    dimension = _dimension(question.unit)
    for factor, dim, hint in GENERIC_MISTAKES:
        if (dim is None or dim == dimension) and _close(value, expected * factor, question.rel_tol / 2):
            return CheckResult(question.id, "incorrect", f"not yet. Hint: {hint}")
    return CheckResult(question.id, "incorrect", "not yet.")


def _as_expression(question, answer):
    if isinstance(answer, str):
        try:
            return sympy.sympify(answer, locals=dict(question.symbols))
        except (sympy.SympifyError, SyntaxError, TypeError) as exc:
            raise ValueError(f"could not parse {answer!r} as a sympy expression ({exc})") from None
    if isinstance(answer, (numbers.Number, sympy.Basic)):
        return sympy.sympify(answer)
    raise ValueError(f"expected a sympy expression, got {type(answer).__name__}")


def _plain_symbols(expression):
    """Replace every symbol by a plain one of the same name, so that a student's
    ``Symbol("n")`` equals the question's ``Symbol("n", positive=True)``."""
    return expression.xreplace({s: sympy.Symbol(s.name) for s in expression.free_symbols
                                if isinstance(s, sympy.Symbol)})


def _equal(a, b) -> bool:
    a, b = _plain_symbols(sympy.sympify(a)), _plain_symbols(sympy.sympify(b))
    difference = sympy.simplify(a - b)
    if difference == 0:
        return True
    # a numeric spot check guards against simplify giving up on equal expressions
    free = sorted(difference.free_symbols, key=str)
    if not free:
        return bool(abs(complex(difference)) < 1e-12)
    rng = np.random.default_rng(0)
    for _ in range(5):
        point = {s: sympy.Rational(int(rng.integers(2, 97)), int(rng.integers(2, 13))) for s in free}
        value = difference.subs(point)
        if not value.is_number or abs(complex(value)) > 1e-9:
            return False
    return True


def _evaluate_symbolic(question, answer, params) -> CheckResult:
    try:
        expression = _as_expression(question, answer)
    except ValueError as exc:
        return CheckResult(question.id, "invalid", f"not yet: {exc}")
    if _equal(expression, question.answer(params)):
        return CheckResult(question.id, "correct", "correct.")
    for mistake in question.mistakes:
        if _equal(expression, mistake.answer(params)):
            return CheckResult(question.id, "incorrect", f"not yet. Hint: {mistake.hint}")
    return CheckResult(question.id, "incorrect", "not yet: not equal to the expected expression.")


def _evaluate_choice(question, answer, params) -> CheckResult:
    if not isinstance(answer, str):
        return CheckResult(question.id, "invalid",
                           f"not yet: answer with one of {', '.join(map(repr, question.choices))}.")
    given = answer.strip().lower()
    options = [c.lower() for c in question.choices]
    if given not in options:
        return CheckResult(question.id, "invalid",
                           f"not yet: {answer!r} is not one of {', '.join(map(repr, question.choices))}.")
    if given == str(question.answer(params)).lower():
        return CheckResult(question.id, "correct", "correct.")
    for mistake in question.mistakes:
        if given == str(mistake.answer(params)).lower():
            return CheckResult(question.id, "incorrect", f"not yet. Hint: {mistake.hint}")
    return CheckResult(question.id, "incorrect", "not yet.")


_ACTIVE_SEED: list = [None]


def use_seed(seed: int | None) -> None:
    """Select the variant of every question (a per-student notebook calls this in its first cell).

    ``None`` restores the default parameters, the ones the book's text uses.
    """
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ValueError(f"seed must be a non-negative integer or None, got {seed!r}")
    _ACTIVE_SEED[0] = seed


def active_seed() -> int | None:
    """The seed set by :func:`use_seed`, or ``None``."""
    return _ACTIVE_SEED[0]


def _evaluate_conceptual(question, answer, params) -> CheckResult:
    if not isinstance(answer, str) or not answer.strip():
        return CheckResult(question.id, "invalid", "not yet: write your answer as text.")
    for mistake in question.mistakes:
        if re.search(mistake.answer(params), answer, re.I):
            return CheckResult(question.id, "incorrect", f"not yet. Hint: {mistake.hint}")
    missing = [point for point, pattern in question.key_points if not re.search(pattern, answer, re.I)]
    if missing:
        return CheckResult(question.id, "incorrect",
                           "not yet. A strong answer also names: " + "; ".join(missing) + ".")
    return CheckResult(question.id, "correct", "correct: it names every key point.")


def evaluate(question, answer, params: dict | None = None, seed: int | None = None) -> CheckResult:
    """Check ``answer`` against ``question`` (a :class:`Question` or its id) without printing.

    The parameters are the question's defaults, or variant ``seed``'s (default: the
    seed set by :func:`use_seed`), updated with ``params``.
    """
    if isinstance(question, str):
        from .questions import get_question

        question = get_question(question)
    seed = active_seed() if seed is None else seed
    params = {**question.draw(seed), **(params or {})}
    if question.derive:
        params = question.derive(params)
    if answer is Ellipsis:
        return CheckResult(question.id, "not attempted", "not attempted. Replace ... with your answer.")
    if question.kind == "numeric":
        return _evaluate_numeric(question, answer, params)
    if question.kind == "symbolic":
        return _evaluate_symbolic(question, answer, params)
    if question.kind == "conceptual":
        return _evaluate_conceptual(question, answer, params)
    return _evaluate_choice(question, answer, params)


def check(question_id: str, answer, params: dict | None = None) -> None:
    """Print whether ``answer`` is right; used in the check cell after each answer cell.

    Raises ``AssertionError`` for anything but a correct answer when
    ``SERVINGMATH_STRICT_CHECKS=1`` (how the solutions run under test).
    """
    result = evaluate(question_id, answer, params)
    print(result)
    if os.environ.get(STRICT_ENV) == "1" and not result.correct:
        raise AssertionError(f"strict checks: {result}")
