"""The exercise checker: ``check(question_id, answer)`` in the cell after each answer.

It reports one of

* **not attempted** -- the answer is still the placeholder ``...``;
* **correct** -- within the question's stated tolerance (units converted if given);
* **not yet** -- with a hint when the answer matches a known mistake (K and V
  counted once, GB read as GiB, sparse FLOP/s, seconds for milliseconds,
  per-GPU for total, ...), with how far off a near miss is, otherwise a plain "not yet".

Expected answers are computed by the library when the check runs, never typed
twice. When the environment variable ``SERVINGMATH_STRICT_CHECKS`` is ``1``
(the test suite sets it for the solution notebooks) a wrong or missing answer
raises ``AssertionError``, so the solutions fail loudly.

Two modes (``TEACHING.md`` states the threat model):

* **self-study** (the book's own exercise notebooks): ``check()`` says whether the answer is
  right, for the book's numbers or for a public practice variant (:func:`use_seed`). Anyone
  with the library can compute these answers; that is what they are for.
* **graded hand-out** (a notebook made by ``python -m servingmath.assignments make``): its first
  cells call :func:`graded_handout`, and ``check()`` then confirms only the *form* of each answer
  (a number in the right kind of unit, a formula in the question's symbols, one of the options),
  never whether it is right. The student's variant is drawn from the course key, which the
  notebook does not hold (:meth:`Question.draw_for`).

Answers are data, never code: numbers, strings with a unit (``"12.5 ms"``, ``"0.5 GiB"``,
``"85 %"`` for a fraction), formulas as text (read by :func:`servingmath.answers.parse_formula`,
a whitelist parser) or sympy expressions made of plain sympy types (walked node by node,
:func:`servingmath.answers.read_object`). Checking one answer has a time limit.

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
>>> print(evaluate(q, 530000))
demo.bytes: not yet: 1.09 % too high; answers within 1 % are accepted.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import math
import os
import random
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import sympy

from . import answers as _answers
from .answers import AnswerError, Formula
from .question import Mistake, Question, student_id
from .questions import all_questions, get_question
from .units import UNIT_SCALES, parse_quantity

__all__ = ["Question", "Mistake", "CheckResult", "evaluate", "check", "score", "use_seed", "active_seed",
           "graded_handout", "handout_mode", "student_id", "mentions", "GENERIC_MISTAKES", "CAPTURE_ENV",
           "CAPTURE_MARK", "CHECK_SECONDS"]

STRICT_ENV = "SERVINGMATH_STRICT_CHECKS"
#: Set (to ``1``) by the grader in the kernel it runs: ``check()`` then reports each answer it checks.
CAPTURE_ENV = "SERVINGMATH_CAPTURE"
#: Marker that starts a line of ``check()``'s report to the grader (a JSON record follows).
CAPTURE_MARK = "@@SERVINGMATH-CHECKED@@ "
#: Seconds ``check()`` may spend on one answer.
CHECK_SECONDS = 10.0
#: Longest paragraph a conceptual answer may be (characters).
MAX_PARAGRAPH = 4000


@dataclass(frozen=True)
class CheckResult:
    """Outcome of checking one answer: ``status`` is one of ``"not attempted"``, ``"correct"``,
    ``"incorrect"``, ``"invalid"`` (not readable as an answer) or ``"recorded"`` (a graded

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    hand-out: the form is right, the grader decides). ``slip`` names the known mistake matched."""

    question_id: str
    status: str
    message: str
    slip: str = ""

    @property
    def correct(self) -> bool:
        return self.status == "correct"

    def __str__(self) -> str:
        return f"{self.question_id}: {self.message}"

    def _repr_html_(self) -> str:
        mark, colour, background = {
            "correct": ("✓", "#1a7f37", "#e6f4ea"), "recorded": ("✓", "#0b5cad", "#e8f0fb"),
            "not attempted": ("…", "#6e6e6e", "#f2f2f2")}.get(self.status, ("✗", "#b3261e", "#fdecea"))
        return (f'<div style="padding:3px 8px;border-left:4px solid {colour};background:{background};'
                f'color:#1f1f1f;font-family:sans-serif"><span style="color:{colour};font-weight:bold">'
                f"{mark}</span> <code>{html.escape(self.question_id)}</code>: {html.escape(self.message)}</div>")


class _Shown:
    """What a check cell displays: plain text for terminals (and nbval), coloured HTML in Jupyter."""

    def __init__(self, result, text=None, html_text=None):
        self.result, self.text, self.html_text = result, text, html_text

    def __repr__(self) -> str:
        return self.text if self.text is not None else str(self.result)

    def _repr_html_(self) -> str:
        return self.html_text if self.html_text is not None else self.result._repr_html_()


# Generic mistakes, tried after the question's own: (factor, dimension or None, hint, name)
GENERIC_MISTAKES = [
    (1e3, "s", "Off by a factor of 1000: check seconds versus milliseconds.", "seconds vs milliseconds"),
    (1e-3, "s", "Off by a factor of 1000: check seconds versus milliseconds.", "seconds vs milliseconds"),
    (2**30 / 1e9, "B", "Off by 7.4 %: that is GiB versus GB (2**30 versus 1e9 bytes).", "GiB vs GB"),
    (1e9 / 2**30, "B", "Off by 7.4 %: that is GiB versus GB (2**30 versus 1e9 bytes).", "GiB vs GB"),
    (2**20 / 1e6, "B", "Off by 4.9 %: that is MiB versus MB (2**20 versus 1e6 bytes).", "MiB vs MB"),
    (1e6 / 2**20, "B", "Off by 4.9 %: that is MiB versus MB (2**20 versus 1e6 bytes).", "MiB vs MB"),
    (2.0, None, "Off by exactly a factor of 2 (too large): K and V? sparse vs dense FLOP/s? 2 FLOPs per multiply-add?",
     "factor 2 too large"),
    (0.5, None, "Off by exactly a factor of 2 (too small): K and V? sparse vs dense FLOP/s? 2 FLOPs per multiply-add?",
     "factor 2 too small"),
]
_PERCENT_HINT = ("That looks like a percentage: the answer is a fraction (write 0.85, or the string '85 %', "
                 "not 85).")


def _dimension(unit: str | None) -> str | None:
    return None if unit is None else UNIT_SCALES[unit][1]


def _close(a: float, b: float, rel_tol: float) -> bool:
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=1e-12 * max(1.0, abs(b)) if b == 0 else 0.0)


def _fraction_question(question, expected) -> bool:
    return question.kind == "numeric" and question.unit is None and 0 < abs(expected) <= 1


_PERCENT = re.compile(r"\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(%|percent)\s*")


def _read(question, answer):
    """The answer as ``...``, a str, a float or a sympy expression; raises AnswerError."""
    symbols = question.symbols if question.kind == "symbolic" else None
    if type(answer) is Formula:
        expression = _answers.parse_formula(str(answer), question.symbols if symbols is not None else {},
                                            max_length=_answers.MAX_OBJECT_TEXT,
                                            max_nodes=_answers.MAX_OBJECT_NODES) if symbols is not None else None
        if expression is None:
            try:
                expression = _answers.parse_formula(str(answer), {}, max_length=_answers.MAX_OBJECT_TEXT,
                                                    max_nodes=_answers.MAX_OBJECT_NODES)
            except AnswerError as exc:
                if "not a symbol" in str(exc):
                    raise AnswerError("expected a number, got an expression with free symbols.") from None
                raise
            if expression.free_symbols:
                raise AnswerError("expected a number, got an expression with free symbols.")
            return _answers.read_object(expression)
        return expression
    return _answers.read_object(answer, symbols)


def _to_si(question: Question, answer) -> tuple[float | None, str | None]:
    """Return (value in SI, problem message or None)."""
    try:
        answer = _read(question, answer)
    except AnswerError as exc:
        return None, str(exc)
    if isinstance(answer, str):
        percent = _PERCENT.fullmatch(answer)
        if percent and question.unit is None:
            return float(percent.group(1)) / 100, None
        if percent:
            return None, f"this answer is in {question.unit}, not a percentage."
        try:
            value, dimension = parse_quantity(answer)
        except ValueError as exc:
            return None, _quantity_sentence(question, answer, exc)
        if not math.isfinite(value):
            return None, f"expected a finite number, got {_answers.short(answer)}."
        want = _dimension(question.unit)
        if dimension is None:
            scale = 1.0 if question.unit is None else UNIT_SCALES[question.unit][0]
            return value * scale, None
        if want is None:
            return None, f"this answer has no unit, but you gave one ({_answers.short(answer)})."
        if dimension != want:
            return None, f"wrong kind of unit: the answer is in {want}, you gave {dimension} ({_answers.short(answer)})."
        return value, None
    if not isinstance(answer, float):
        return None, "expected a number, got an expression with free symbols."
    scale = 1.0 if question.unit is None else UNIT_SCALES[question.unit][0]
    return answer * scale, None


def _quantity_sentence(question, text: str, exc: Exception) -> str:
    message = str(exc)
    unit = f" in {question.unit}" if question.unit else ""
    if "too long" in message:
        return f"the answer is too long to be a number{unit}."
    match = re.match(r"\s*[-+]?[\d.,_eE]+\s*(\S.*)$", text)
    if "unknown unit" in message and match:
        example = f"'12.5 {question.unit}'" if question.unit else "1.5"
        return (f"{_answers.short(match.group(1), 20)} is not a unit I know: write the number{unit}, "
                f"or with a unit such as {example}.")
    example = f"12.5 or '12.5 {question.unit}'" if question.unit else "1.5"
    return f"could not read {_answers.short(text)} as a number{unit}: write it like {example}."


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
            return CheckResult(question.id, "incorrect", f"not yet. Hint: {mistake.hint}", mistake.label)
    dimension = _dimension(question.unit)
    for factor, dim, hint, name in GENERIC_MISTAKES:
        if (dim is None or dim == dimension) and _close(value, expected * factor, question.rel_tol / 2):
            return CheckResult(question.id, "incorrect", f"not yet. Hint: {hint}", name)
    if _fraction_question(question, expected) and _close(value, 100 * expected, question.rel_tol):
        return CheckResult(question.id, "incorrect", f"not yet. Hint: {_PERCENT_HINT}", "percent for a fraction")
    if expected != 0:
        off = (value - expected) / abs(expected)
        if abs(off) <= max(10 * question.rel_tol, 0.05):
            return CheckResult(question.id, "incorrect",
                               f"not yet: {abs(off) * 100:.3g} % too {'high' if off > 0 else 'low'}; answers "
                               f"within {question.rel_tol * 100:g} % are accepted.", "near miss")
    return CheckResult(question.id, "incorrect", "not yet.")


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


def _expression(question, answer):
    value = _read(question, answer)
    if isinstance(value, str):
        return _answers.parse_formula(value, question.symbols)
    if isinstance(value, float):
        return sympy.Float(value)
    return value


def _evaluate_symbolic(question, answer, params) -> CheckResult:
    try:
        expression = _expression(question, answer)
    except AnswerError as exc:
        return CheckResult(question.id, "invalid", f"not yet: {exc}")
    if _equal(expression, question.answer(params)):
        return CheckResult(question.id, "correct", "correct.")
    for mistake in question.mistakes:
        if _equal(expression, mistake.answer(params)):
            return CheckResult(question.id, "incorrect", f"not yet. Hint: {mistake.hint}", mistake.label)
    return CheckResult(question.id, "incorrect", "not yet: not equal to the expected expression.")


def _choice_text(question, answer) -> tuple[str | None, str | None]:
    options = ", ".join(map(repr, question.choices))
    if type(answer) is not str:
        return None, f"answer with one of {options}."
    given = answer.strip().strip("'\"").strip().lower()
    if given not in [c.lower() for c in question.choices]:
        return None, f"{_answers.short(answer)} is not one of {options}."
    return given, None


def _evaluate_choice(question, answer, params) -> CheckResult:
    given, problem = _choice_text(question, answer)
    if problem:
        return CheckResult(question.id, "invalid", f"not yet: {problem}")
    if given == str(question.answer(params)).lower():
        return CheckResult(question.id, "correct", "correct.")
    for mistake in question.mistakes:
        if given == str(mistake.answer(params)).lower():
            return CheckResult(question.id, "incorrect", f"not yet. Hint: {mistake.hint}", mistake.label)
    return CheckResult(question.id, "incorrect", "not yet.")


_ACTIVE_SEED: list = [None]
_HANDOUT: dict = {}


def use_seed(seed: int | None) -> None:
    """Select a public *practice* variant of every question (``None``: the book's own numbers).

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Practice variants are for self-study: their seeds are public, so anyone can compute their
    answers. Graded hand-outs never use a seed (see :func:`graded_handout`).
    """
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ValueError(f"seed must be a non-negative integer or None, got {seed!r}")
    _ACTIVE_SEED[0] = seed


def active_seed() -> int | None:
    """The seed set by :func:`use_seed`, or ``None``.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """
    return _ACTIVE_SEED[0]


def graded_handout(student: str, assignment: str = "") -> None:
    """Mark this kernel as working on a graded hand-out (its first cells call this).

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    From then on ``check()`` confirms only the form of each answer and records it; the grade
    comes from the teacher's grader, which alone holds the course key the variant is drawn from.
    """
    _HANDOUT.clear()
    _HANDOUT.update({"student": str(student)[:100], "assignment": str(assignment)[:100]})
    _ACTIVE_SEED[0] = None


def handout_mode() -> dict:
    """``{"student": ..., "assignment": ...}`` in a graded hand-out, ``{}`` in self-study.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """
    return dict(_HANDOUT)


# ---------------------------------------------------------------- conceptual answers
#: Chinese answers (the drill's ``--lang zh``): 不/没(有)/并非/无法/从未/未 negate, except in words that only
#: contain the character (不同 "different", 不断 "continually", 不仅 "not only", 未来 "future", ...).
_NEGATION = re.compile(r"\b(?:not|no|never|neither|nor|cannot|hardly|barely any)\b|n't\b"
                       r"|不(?![同断仅少久论只过但如])|没有|没|并非|无法|从未|未(?!来)", re.I)
_NOT_NEGATING = re.compile(r"\b(?:no matter|not only|no longer than|nothing but|not just)\b", re.I)
_CLAUSE_END = re.compile(r"[.;:!?]\s|[.;:!?]$|,\s|\bbut\b|\bwhereas\b|\bwhile\b|—|\s-\s|[。；：！？，]|但|然而",
                         re.I)


def _negated(text: str, start: int, end: int, inside: bool = True) -> bool:
    """True when the clause holding ``text[start:end]`` negates it ("does not grow linearly").

    The clause runs from the last clause boundary before ``start``. With ``inside``, a negation within
    the match counts too ("TPOT does not drop" does not say that TPOT drops), except one that opens or
    closes the match, which is the pattern's own ("no steady state", "gains little or nothing"); without
    it only the words before the match count (a wrong claim may hold its own "not": "latency does not
    change with the batch").
    """
    while end < len(text) and (text[end].isalnum() or text[end] in "'’"):
        end += 1                      # the window ends with whole words
    clause_start = 0
    for boundary in _CLAUSE_END.finditer(text, 0, start):
        clause_start = boundary.end()
    window = text[clause_start:end if inside else start]
    for found in _NEGATION.finditer(window):
        at = clause_start + found.start()
        if _NOT_NEGATING.match(text, at):
            continue
        if inside and (at == start or clause_start + found.end() >= end - (0 if text[end - 1].isalnum() else 1)):
            continue
        return True
    return False


def mentions(pattern: str, text: str, *, claim: bool = False) -> bool:
    """True when ``text`` states what ``pattern`` finds, in a clause that does not negate it.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    ``claim=True`` reads a wrong claim: only a negation before it in its clause cancels it ("it is not
    true that decode is compute-bound"), since the claim may hold its own ("latency does not change").
    """
    for match in re.finditer(pattern, text, re.I):
        if match.end() > match.start() and not _negated(text, match.start(), match.end(), inside=not claim):
            return True
    return False


def _evaluate_conceptual(question, answer, params) -> CheckResult:
    try:
        answer = _answers.read_object(answer)
    except AnswerError:
        answer = None
    if type(answer) is not str or not answer.strip():
        return CheckResult(question.id, "invalid", "not yet: write your answer as text.")
    if len(answer) > MAX_PARAGRAPH:
        return CheckResult(question.id, "invalid", f"not yet: the answer is too long ({len(answer)} characters; "
                                                   f"at most {MAX_PARAGRAPH}, about 600 words).")
    for mistake in question.mistakes:      # a wrong claim counts where its clause states it, not where it is denied
        if mentions(mistake.answer(params), answer, claim=True):
            return CheckResult(question.id, "incorrect", f"not yet. Hint: {mistake.hint}", mistake.label)
    missing = [point for point, pattern in question.key_points if not mentions(pattern, answer)]
    if missing:
        return CheckResult(question.id, "incorrect",
                           "not yet. A strong answer also names: " + "; ".join(missing) + ".")
    return CheckResult(question.id, "correct", "correct: it names every key point.")


def _question(question):
    if isinstance(question, str):
        return get_question(question)
    return question


def evaluate(question, answer, params: dict | None = None, seed: int | None = None) -> CheckResult:
    """Check ``answer`` against ``question`` (a :class:`Question` or its id) without printing.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    The parameters are the question's defaults, or practice variant ``seed``'s (default: the
    seed set by :func:`use_seed`), updated with ``params`` (how the grader passes a student's
    graded variant, :meth:`Question.draw_for`).
    """
    question = _question(question)
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


def _format_number(value: float) -> str:
    return f"{value:.6g}"


def check_form(question, answer) -> CheckResult:
    """What a graded hand-out's check cell says: whether ``answer`` has the right *form*.

    ``"recorded"`` for a readable answer of the right kind, never whether it is right.
    """
    question = _question(question)
    if answer is Ellipsis:
        return CheckResult(question.id, "not attempted", "not attempted. Replace ... with your answer.")
    note = "graded by your teacher."
    if question.kind == "numeric":
        value, problem = _to_si(question, answer)
        if problem:
            return CheckResult(question.id, "invalid", f"not yet: {problem}")
        shown = value / UNIT_SCALES[question.unit][0] if question.unit else value
        unit = f" {question.unit}" if question.unit else ""
        return CheckResult(question.id, "recorded", f"recorded {_format_number(shown)}{unit}; {note}")
    if question.kind == "symbolic":
        try:
            expression = _expression(question, answer)
        except AnswerError as exc:
            return CheckResult(question.id, "invalid", f"not yet: {exc}")
        text = sympy.sstr(expression)
        return CheckResult(question.id, "recorded",
                           f"recorded the formula {text if len(text) <= 80 else text[:79] + '…'}; {note}")
    if question.kind == "choice":
        given, problem = _choice_text(question, answer)
        if problem:
            return CheckResult(question.id, "invalid", f"not yet: {problem}")
        return CheckResult(question.id, "recorded", f"recorded {given!r}; {note}")
    if type(answer) is not str or not answer.strip():
        return CheckResult(question.id, "invalid", "not yet: write your answer as text.")
    if len(answer) > MAX_PARAGRAPH:
        return CheckResult(question.id, "invalid", f"not yet: the answer is too long (at most {MAX_PARAGRAPH} "
                                                   "characters).")
    return CheckResult(question.id, "recorded", f"recorded your answer ({len(answer.split())} words); {note}")


# ---------------------------------------------------------------- what a check cell does
_RESULTS: dict = {}


def _report(question_id: str, answer, symbols) -> None:
    """Tell the grader (when it runs this kernel) which answer this check saw, as data."""
    if os.environ.get(CAPTURE_ENV) != "1":
        return
    record = json.dumps({"q": str(question_id)[:120], "a": _answers.to_record(answer, symbols)})
    stream = sys.stdout
    stream.write("\n" + CAPTURE_MARK + record + "\n")
    stream.flush()


def _show(shown) -> None:
    shell = None
    ipython = sys.modules.get("IPython")
    if ipython is not None:
        try:
            shell = ipython.get_ipython()
        except Exception:  # noqa: BLE001 - any failure means: no rich display here
            shell = None
    if shell is not None and getattr(shell, "display_pub", None) is not None:
        from IPython.display import display

        display(shown)
    else:
        print(repr(shown))


def check(question_id: str, answer, params: dict | None = None) -> None:
    """Show whether ``answer`` is right; used in the check cell after each answer cell.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    In a graded hand-out (:func:`graded_handout`) it only confirms the answer's form. In Jupyter
    the result is coloured (✓ correct, ✗ not yet); elsewhere it is one line of text. Raises
    ``AssertionError`` for anything but a correct answer when ``SERVINGMATH_STRICT_CHECKS=1``
    (how the solutions run under test).
    """
    question = _question(question_id)
    symbols = question.symbols if question.kind == "symbolic" else None
    _report(question.id, answer, symbols)
    try:
        with _answers.time_limit(CHECK_SECONDS):
            result = check_form(question, answer) if _HANDOUT else evaluate(question, answer, params)
    except AnswerError as exc:
        result = CheckResult(question.id, "invalid", f"not yet: {exc}")
    _RESULTS[question.id] = result.status
    _show(_Shown(result))
    if os.environ.get(STRICT_ENV) == "1" and not result.correct:
        raise AssertionError(f"strict checks: {result}")


def score(questions=None) -> None:
    """Show the running score of this notebook's checks: "7 of 12 correct (...)".

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    ``questions`` is a chapter's module name (``"decode"``: its every question), a list of ids,
    or ``None`` for the questions checked so far. Each question counts with the result of its
    latest check; a question whose check cell has not run counts as not checked.
    """
    if questions is None:
        ids = list(_RESULTS)
    elif isinstance(questions, str):
        ids = [qid for qid in all_questions() if qid.startswith(questions + ".")]
    else:
        ids = list(questions)
    statuses = [_RESULTS.get(qid, "not checked") for qid in ids]
    counts = {s: statuses.count(s) for s in dict.fromkeys(statuses)}
    order = ["incorrect", "invalid", "not attempted", "not checked"]
    names = {"incorrect": "not yet", "invalid": "not readable"}
    rest = ", ".join(f"{counts[s]} {names.get(s, s)}" for s in order if counts.get(s))
    if _HANDOUT:
        text = (f"{counts.get('recorded', 0)} of {len(ids)} answers recorded"
                + (f" ({rest})" if rest else "") + ". Your teacher grades them.")
        good = counts.get("recorded", 0) == len(ids)
    else:
        text = f"{counts.get('correct', 0)} of {len(ids)} correct" + (f" ({rest})" if rest else "") + "."
        good = counts.get("correct", 0) == len(ids)
    colour = "#1a7f37" if good else "#8a5a00"
    html_text = (f'<div style="padding:4px 8px;border:1px solid {colour};color:{colour};font-family:sans-serif;'
                 f'font-weight:bold">Score: {html.escape(text)}</div>')
    _show(_Shown(None, f"Score: {text}", html_text))
