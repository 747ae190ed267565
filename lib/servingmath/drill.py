"""The interview drill: random questions from the whole question bank, in a terminal.

::

    python -m servingmath.drill                          # 5 random questions
    python -m servingmath.drill --chapter decode,slo --difficulty easy,medium --n 3 --seed 7
    python -m servingmath.drill --chapter interview --time-limit 90
    python -m servingmath.drill --chapter 04             # chapter 04's questions (decode)
    python -m servingmath.drill --list                   # chapters and their question counts
    python -m servingmath.drill --cheat-sheet            # formulas and numbers worth remembering
    python -m servingmath.drill --lang zh                # 中文练习: prompts, hints and feedback in Chinese

Each question is asked, answered and given feedback at once: for a number,
the expected value with its unit (and the hint when the answer is a known
mistake: seconds for milliseconds, GiB for GB, K without V, ...); for a
formula, the expected expression; for a conceptual question (type a paragraph,
finish with an empty line), which key points the answer named, the hint on a
wrong claim, and the model answer. A score ends the drill.

Questions come from every registered chapter (:mod:`servingmath.questions`).
``--chapter`` picks a question when the chapter is the question's module (the
first part of its id, ``decode`` in ``decode.tpot_batch_64``) or the chapter
the question draws on (its ``chapter`` field: the interview questions name
one each); a chapter may also be given by its number (``04``, :data:`CHAPTER_NUMBERS`).
``--seed`` makes the selection, and so a whole scripted session, repeatable;
without it a seed is drawn and printed. ``--variants`` asks each question's
public practice variant for that seed: anyone can compute those answers, and
they are never the variants of a graded hand-out, which are drawn from the
teacher's course key (:meth:`servingmath.checks.Question.draw_for`).

``--lang zh`` asks in Chinese: prompts, hints, model answers, key points and
every message of the drill come from a translation file written as data
(``servingmath/data/drill_zh.json``, :func:`translations`), with the technical
terms as Chinese engineers say them (TTFT, TPOT, KV cache, goodput stay in
English). A paragraph may be answered in Chinese or English: each key point and
each wrong claim is looked for in both languages (:func:`localize`). A question
the file does not translate is asked in English.

Formulas are read by the same whitelist parser as the exercise checker
(:func:`servingmath.answers.parse_formula`): typed text is data, never run.

Scripts and tests drive it through stdin: no terminal is needed. Bad input
(an empty answer, text where a number is due, an unknown unit, end of input,
Ctrl-C) gets a reply that says what to type, never a traceback.
``--time-limit`` counts an answer given after the limit as *late*: it gets its
feedback but no point (the clock is injectable, see :func:`run_drill`).

Examples
--------
>>> import io
>>> from servingmath.questions import get_question
>>> qs = [get_question("interview.ridge_a100")]
>>> len(select_questions(chapters="interview", difficulties="easy", n=3, seed=3))
3
>>> out = io.StringIO()
>>> result = run_drill(qs, stdin=io.StringIO("153 FLOP/B\\n"), stdout=out)
>>> result.score, result.asked
(1, 1)
>>> "Correct" in out.getvalue()
True
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import math
import random
import re
import sys
import textwrap
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from .checks import Question, evaluate, mentions
from .question import Mistake, Template
from .units import UNIT_SCALES, parse_quantity

__all__ = ["LANGUAGES", "translations", "localize", "CHAPTER_NUMBERS", "question_chapters", "chapter_counts", "select_questions", "read_numeric", "expected_text",
           "worked_answer", "run_drill", "DrillResult", "Record", "cheat_sheet", "main", "KINDS", "DIFFICULTIES"]

KINDS = ("numeric", "symbolic", "choice", "conceptual")
#: Chapter numbers of the book -> the question module of that chapter's exercise set
#: (``--chapter 04`` is ``--chapter decode``; tested against solutions/).
CHAPTER_NUMBERS = {"01": "anatomy", "02": "rooflines", "03": "memory", "04": "decode", "05": "prefill",
                   "06": "pareto", "07": "slo", "08": "parallelism", "09": "queueing", "10": "scheduling",
                   "11": "quantization", "12": "speculative", "13": "capacity", "14": "validation",
                   "15": "fleet", "16": "moe", "17": "interview"}
DIFFICULTIES = ("easy", "medium", "hard")
WIDTH = 92
_SKIP, _QUIT = {"skip", "pass", "next", "跳过"}, {"quit", "exit", "stop", "退出"}


# ---------------------------------------------------------------- languages
#: The drill's languages: English (the book's) and Chinese.
LANGUAGES = ("en", "zh")
_DATA = Path(__file__).parent / "data"

#: Every message of the drill in English; a translation file's ``ui`` table gives the same keys with
#: the same ``{fields}`` (tested).
UI = {
    "header": "Interview drill: {n} question{plural}.",
    "time_limit_note": " Time limit: {limit:g} s per question.",
    "question": "--- Question {index} of {n}  [{topics}, {difficulty}, {kind}]  {qid}",
    "skipped": "Skipped.",
    "correct": "Correct.",
    "correct_late": "Correct, but late ({seconds:.0f} s > {limit:g} s): no point.",
    "not_yet": "Not yet.",
    "not_yet_hint": "Not yet. Hint: {hint}",
    "not_yet_because": "Not yet: {message}",
    "and_late": " (And late: {seconds:.0f} s > {limit:g} s.)",
    "expected": "Expected: {expected}",
    "stopped_interrupted": "Interrupted (Ctrl-C): stopping here.",
    "stopped_end": "End of input: stopping here.",
    "stopped_quit": "Stopping here, as asked.",
    "score": "Score: {score} of {asked}{percent}{extra}.",
    "ask_numeric_unit": "Answer in {unit} (or with a unit, such as '12.5 {unit}'); 'skip' shows the answer, "
                        "'quit' stops.",
    "ask_numeric_plain": "Answer a plain number, no unit; 'skip' shows the answer, 'quit' stops.",
    "ask_symbolic": "Answer with a formula in {names} (Python syntax: *, /, **); 'skip' shows the answer, "
                    "'quit' stops.",
    "empty_formula": "Please type a formula in {names}, such as {example} * 2.",
    "options": "Options: {options}",
    "ask_choice": "Type the option or its number; 'skip' shows the answer, 'quit' stops.",
    "empty_choice": "Please type one of the options (1 to {n}).",
    "not_an_option": "{text!r} is not an option. Type one of: {options}.",
    "ask_conceptual": "Answer in a few sentences; finish with an empty line. 'skip' shows the model answer, "
                      "'quit' stops.",
    "empty_paragraph": "Please type your answer (a paragraph), then an empty line.",
    "key_points": "Key points:",
    "hint": "Hint: {hint}",
    "model_answer": "Model answer:",
    "worked_question": "Q ({kind}, {difficulty}). {prompt}",
    "strong_answer": "   A strong answer names:",
    "worked_answer": "A: {answer}",
    "accepted": "{value} (accepted {tolerance})",
    "exactly": "exactly",
    "within": "within {percent:g} %",
    "seed_note": "(seed {seed}: run again with --seed {seed} for the same questions)",
    # reading a number (read_numeric)
    "in_unit": "in {unit}",
    "plain_number": "a plain number, no unit",
    "empty_number": "Please type an answer ({unit_phrase}), or 'skip' or 'quit'.",
    "too_long": "That is too long to be a number: type a number {unit_phrase}, such as {example}.",
    "not_a_number": "{text!r} is not a number. Type a number {unit_phrase}, such as {example}{with_unit}.",
    "with_unit": ", or a number with a unit, such as '{example} {unit}'",
    "decimal_comma": "{text!r}: use a decimal point, not a comma ({fixed!r}); commas are read as thousands "
                     "separators.",
    "no_unit_allowed": "could not read {text!r}: this answer is a plain number, without a unit (type just the "
                       "number, e.g. {example}).",
    "unknown_unit": "could not read {text!r}: unknown unit {unit!r}. The answer is {dimension}: type a number "
                    "in {expected_unit}, or use one of {known}.",
}
#: The words of a status, a kind, a difficulty and a dimension, by language (English: the words themselves).
WORDS = ("correct", "late", "not yet", "skipped", "not answered", "not reached", "numeric", "symbolic", "choice",
         "conceptual", "easy", "medium", "hard", "a time", "a size in bytes", "a FLOP count", "a compute rate",
         "a bandwidth", "a token rate", "a request rate", "an arithmetic intensity", "a token count")


def _check_language(lang) -> str:
    if lang not in LANGUAGES:
        close = difflib.get_close_matches(str(lang), LANGUAGES, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"lang must be one of {', '.join(LANGUAGES)}, got {lang!r}.{hint}")
    return lang


@cache
def translations(lang: str = "zh") -> dict:
    """The translation table of ``lang``: ``{"ui": {...}, "words": {...}, "questions": {...}}``.

    Read from ``servingmath/data/drill_<lang>.json`` (English: empty tables, the text is the
    book's own). ``questions`` maps a question id to its ``prompt``, its model ``answer`` (the
    :class:`~servingmath.question.Template` text with the same ``{fields}``), its ``key_points``
    (``[label, pattern]`` in the English order; the pattern finds the point in an answer written in
    that language) and its ``mistakes`` (English slip label -> ``{"hint": ..., "pattern": ...}``,
    the pattern a wrong claim in that language).

    Examples
    --------
    >>> translations("zh")["ui"]["correct"]
    '正确。'
    >>> translations("en")["questions"]
    {}
    """
    _check_language(lang)
    if lang == "en":
        return {"ui": {}, "words": {}, "questions": {}}
    table = json.loads((_DATA / f"drill_{lang}.json").read_text(encoding="utf-8"))
    return {"ui": table.get("ui", {}), "words": table.get("words", {}), "questions": table.get("questions", {})}


def _t(lang: str, key: str, **fields) -> str:
    """The message ``key`` in ``lang`` (English where the table lacks it), formatted with ``fields``."""
    return translations(lang)["ui"].get(key, UI[key]).format(**fields)


def _word(lang: str, word: str) -> str:
    return translations(lang)["words"].get(word, word)


def _merged(english: str, other: str | None) -> str:
    """A pattern that finds the translation's text or the English: the translation's first, and the
    English one kept inside a sentence of either language (``[^.`` also stops at 。 and ；, a word of
    ``[^\\s.`` at Chinese punctuation)."""
    if not other:
        return english
    english = english.replace("[^.", "[^.。；").replace(r"[^\s.", r"[^\s.。；，（）")
    return f"(?:{other})|(?:{english})"


def _claim_in(mistake: Mistake, pattern: str):
    return lambda p: _merged(mistake.answer(p), pattern)


def localize(question: Question, lang: str = "zh") -> Question:
    """``question`` as asked in ``lang``: prompt, model answer, key points and hints translated.

    Derived in the chapter "Interview rehearsal" (notebooks/17_interview_rehearsal.ipynb).

    The answer machinery is unchanged: the same parameters, numbers, mistakes (their slip
    labels kept) and checks. A conceptual question's key points and wrong claims are looked for
    in both languages, so an answer in either is read. A question without a translation is
    returned as it is.

    Examples
    --------
    >>> from servingmath.questions import get_question
    >>> q = localize(get_question("interview.queueing_growth"), "zh")
    >>> q.prompt[:15]
    '当利用率趋近 1 时，服务器的'
    >>> evaluate(q, "排队延迟按 1/(1 - rho) 增长，呈双曲线。").status
    'incorrect'
    """
    if _check_language(lang) == "en":
        return question
    entry = translations(lang)["questions"].get(question.id)
    if not entry:
        return question
    changes = {"prompt": entry.get("prompt", question.prompt)}
    if "answer" in entry and isinstance(question.answer, Template):
        changes["answer"] = Template(entry["answer"], facts=question.answer.facts)
    elif "answer" in entry and question.kind == "conceptual":     # a model answer that quotes no computed number
        changes["answer"] = Template(entry["answer"])
    if "key_points" in entry:
        changes["key_points"] = tuple((label, _merged(pattern, other))
                                      for (_, pattern), (label, other) in zip(question.key_points,
                                                                               entry["key_points"]))
    translated = entry.get("mistakes", {})
    mistakes = []
    for mistake in question.mistakes:
        t = translated.get(mistake.label)
        if t is None:
            mistakes.append(mistake)
            continue
        answer = mistake.answer
        if question.kind == "conceptual" and t.get("pattern"):
            answer = _claim_in(mistake, t["pattern"])
        mistakes.append(Mistake(t["hint"], answer, name=mistake.label))
    changes["mistakes"] = tuple(mistakes)
    return dataclasses.replace(question, **changes)


_NO_LINE_START = set("，。；：！？、）》”’")     # Chinese punctuation that never opens a line


def _width(char: str) -> int:
    return 2 if unicodedata.east_asian_width(char) in "WF" else 1


def fill(text: str, width: int = WIDTH, initial_indent: str = "", subsequent_indent: str = "") -> str:
    """:func:`textwrap.fill` that also wraps Chinese, which has no spaces: lines of ``width``
    terminal columns (a CJK character takes two), broken between characters or at spaces,
    never inside a Latin word or a number."""
    if not any(_width(c) == 2 for c in text):
        return textwrap.fill(text, width, initial_indent=initial_indent, subsequent_indent=subsequent_indent)
    lines, line, used = [], initial_indent, len(initial_indent)
    for token in re.findall(r"[\x21-\x7e]+|\s+|.", text):
        size = sum(map(_width, token))
        if token.isspace():
            if used > len(subsequent_indent if lines else initial_indent):
                line, used = line + " ", used + 1
            continue
        if used + size > width and line.strip() and token not in _NO_LINE_START:
            lines.append(line.rstrip())
            line, used = subsequent_indent, len(subsequent_indent)
        line, used = line + token, used + size
    lines.append(line.rstrip())
    return "\n".join(lines)


# ---------------------------------------------------------------- choosing questions
def question_chapters(question: Question) -> tuple[str, ...]:
    """The chapter names a question answers to: its module (id prefix) and its ``chapter`` field.

    Derived in the chapter "Interview rehearsal" (notebooks/17_interview_rehearsal.ipynb).
    """
    module = question.id.split(".", 1)[0]
    return tuple(dict.fromkeys(c for c in (module, question.chapter) if c))


def _bank() -> dict:
    from .questions import all_questions

    return all_questions()


def chapter_counts(questions=None) -> dict[str, Counter]:
    """Chapter name -> counts of its questions by kind and difficulty (``"total"`` too).

    Derived in the chapter "Interview rehearsal" (notebooks/17_interview_rehearsal.ipynb).
    """
    if questions is None:
        questions = _bank()
    questions = list(questions.values()) if isinstance(questions, dict) else list(questions)
    counts: dict[str, Counter] = {}
    for q in questions:
        for name in question_chapters(q):
            c = counts.setdefault(name, Counter())
            c["total"] += 1
            c[q.kind] += 1
            c[q.difficulty] += 1
    return dict(sorted(counts.items()))


def _split(values) -> list[str]:
    """``["decode,slo", "memory"]`` -> ``["decode", "slo", "memory"]``."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    return [v.strip().lower() for value in values for v in str(value).split(",") if v.strip()]


def _chapter_names(values) -> list[str]:
    """Chapter filters with numbers read as chapters: ``"4"``, ``"04"`` and ``"ch04"`` are ``decode``."""
    names = []
    for name in _split(values):
        number = re.fullmatch(r"(?:ch(?:apter)?\s*)?0*(\d{1,2})", name)
        if number:
            key = f"{int(number.group(1)):02d}"
            if key not in CHAPTER_NUMBERS:
                raise ValueError(f"there is no chapter {name!r}: the exercise sets are chapters "
                                 f"{min(CHAPTER_NUMBERS)} to {max(CHAPTER_NUMBERS)}.")
            name = CHAPTER_NUMBERS[key]
        names.append(name)
    return names


def _check_names(what: str, given: list[str], allowed) -> None:
    allowed = sorted(allowed)
    for name in given:
        if name not in allowed:
            close = difflib.get_close_matches(name, allowed, n=3, cutoff=0.5)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ValueError(f"unknown {what} {name!r}.{hint} Choose from: {', '.join(allowed)}.")


def select_questions(questions=None, chapters=None, difficulties=None, kinds=None, n: int = 5,
                     seed: int | None = None) -> list[Question]:
    """Draw ``n`` questions (fewer if fewer match) at random, repeatably for a given ``seed``.

    Derived in the chapter "Interview rehearsal" (notebooks/17_interview_rehearsal.ipynb).

    Parameters
    ----------
    questions : dict or list of Question, optional
        The pool (default: every registered question).
    chapters, difficulties, kinds : str or list of str, optional
        Filters; each accepts a list or a comma-separated string. A question
        matches a chapter through its module or its ``chapter`` field.
    n : int
        How many questions (at least 1).
    seed : int, optional
        Same seed, same questions in the same order.

    Raises
    ------
    ValueError
        For an unknown chapter, difficulty or kind (with the allowed names),
        ``n < 1``, or filters that leave no question.
    """
    pool = questions if questions is not None else _bank()
    pool = sorted(pool.values() if isinstance(pool, dict) else pool, key=lambda q: q.id)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a whole number of questions >= 1, got {n!r}")
    chapters, difficulties, kinds = _chapter_names(chapters), _split(difficulties), _split(kinds)
    _check_names("chapter", chapters, {c for q in pool for c in question_chapters(q)})
    _check_names("difficulty", difficulties, DIFFICULTIES)
    _check_names("kind", kinds, KINDS)
    chosen = [q for q in pool
              if (not chapters or set(question_chapters(q)) & set(chapters))
              and (not difficulties or q.difficulty in difficulties)
              and (not kinds or q.kind in kinds)]
    if not chosen:
        raise ValueError(f"no question matches chapter {chapters or 'any'}, difficulty "
                         f"{difficulties or 'any'} and kind {kinds or 'any'}: widen the filters "
                         "(python -m servingmath.drill --list shows what there is)")
    return random.Random(seed).sample(chosen, min(n, len(chosen)))


# ---------------------------------------------------------------- reading answers
_UNITS_BY_DIMENSION: dict[str, list[str]] = {}
for _unit, (_scale, _dim) in UNIT_SCALES.items():
    _UNITS_BY_DIMENSION.setdefault(_dim, []).append(_unit)
_DIMENSION_WORDS = {"s": "a time", "B": "a size in bytes", "FLOP": "a FLOP count", "FLOP/s": "a compute rate",
                    "B/s": "a bandwidth", "tok/s": "a token rate", "req/s": "a request rate",
                    "FLOP/B": "an arithmetic intensity", "tok": "a token count"}


def _unit_phrase(question: Question, lang: str = "en") -> str:
    return _t(lang, "in_unit", unit=question.unit) if question.unit else _t(lang, "plain_number")


def read_numeric(question: Question, text: str, lang: str = "en"):
    """Turn typed text into an answer for a numeric question, or explain what is wrong.

    Derived in the chapter "Interview rehearsal" (notebooks/17_interview_rehearsal.ipynb).

    Returns ``(answer, None)`` where ``answer`` is a number or a string with a
    unit that :func:`servingmath.checks.evaluate` reads, or ``(None, message)``.
    Dimensionless questions also take ``1.4x`` and ``45 %``. ``lang`` is the language of the
    message (:data:`LANGUAGES`).

    Examples
    --------
    >>> from servingmath.questions import get_question
    >>> q = get_question("interview.decode_floor_70b_tp8")     # in ms
    >>> read_numeric(q, "1e-3 s"), read_numeric(q, "1 ms"), read_numeric(q, "5.3")
    (('1e-3 s', None), ('1 ms', None), (5.3, None))
    >>> read_numeric(q, "fast")[1]
    "'fast' is not a number. Type a number in ms, such as 12.5, or a number with a unit, such as '12.5 ms'."
    """
    cleaned = text.strip().strip("'\"`").strip().rstrip(".").rstrip("。").strip()
    example = "12.5" if question.unit else "1.5"
    phrase = _unit_phrase(question, lang)
    if not cleaned:
        return None, _t(lang, "empty_number", unit_phrase=phrase)
    if len(cleaned) > 100:
        return None, _t(lang, "too_long", unit_phrase=phrase, example=example)
    if not re.search(r"\d", cleaned):
        with_unit = _t(lang, "with_unit", example=example, unit=question.unit) if question.unit else ""
        return None, _t(lang, "not_a_number", text=cleaned, unit_phrase=phrase, example=example,
                        with_unit=with_unit)
    if re.search(r"\d,\d{1,2}(?!\d)", cleaned):
        return None, _t(lang, "decimal_comma", text=cleaned, fixed=cleaned.replace(",", "."))
    if question.unit is None:
        match = re.fullmatch(r"([-+0-9.eE_,]+)\s*(x|×|times|%)", cleaned)
        if match:
            try:
                value = float(match.group(1).replace(",", "").replace("_", ""))
            except ValueError:
                pass
            else:
                return (value / 100 if match.group(2) == "%" else value), None
    try:
        value, dimension = parse_quantity(cleaned)
    except ValueError:
        unit = re.sub(r"^[-+0-9.eE_,\s]+", "", cleaned)
        if question.unit is None:
            return None, _t(lang, "no_unit_allowed", text=cleaned, example=example)
        dim = UNIT_SCALES[question.unit][1]
        known = ", ".join(_UNITS_BY_DIMENSION[dim])
        return None, _t(lang, "unknown_unit", text=cleaned, unit=unit,
                        dimension=_word(lang, _DIMENSION_WORDS.get(dim, dim)), expected_unit=question.unit,
                        known=known)
    if dimension is None:
        return value, None
    return cleaned, None


def _format_number(value: float) -> str:
    """About four significant figures, without exponent between 0.001 and a million."""
    a = abs(value)
    if a == 0:
        return "0"
    if 1e-3 <= a < 1e6:
        digits = max(0, 3 - math.floor(math.log10(a)))
        text = f"{value:.{digits}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return f"{value:.4g}"


def _tolerance(question: Question, lang: str = "en") -> str:
    if question.rel_tol < 1e-6:
        return _t(lang, "exactly")
    return _t(lang, "within", percent=question.rel_tol * 100)


def expected_text(question: Question, params: dict | None = None, lang: str = "en") -> str:
    """The expected answer as the drill shows it: a number with its unit and tolerance, a formula,

    Derived in the chapter "Interview rehearsal" (notebooks/17_interview_rehearsal.ipynb).
    an option, or (conceptual) the model answer (in ``lang``)."""
    question = localize(question, lang)
    params = question.draw(None) if params is None else params
    expected = question.answer(params)
    if question.kind == "numeric":
        value = float(expected) / UNIT_SCALES[question.unit][0] if question.unit else float(expected)
        shown = f"{_format_number(value)} {question.unit}" if question.unit else _format_number(value)
        return _t(lang, "accepted", value=shown, tolerance=_tolerance(question, lang))
    if question.kind == "symbolic":
        import sympy

        return sympy.sstr(expected)
    return str(expected)


def worked_answer(question: Question, params: dict | None = None, width: int = WIDTH,
                  lang: str = "en") -> str:
    """The question and its full answer as plain text (what the rehearsal chapter prints), in ``lang``.

    Derived in the chapter "Interview rehearsal" (notebooks/17_interview_rehearsal.ipynb).

    Conceptual questions list the key points a strong answer names before the model answer.
    """
    question = localize(question, lang)
    params = question.draw(None) if params is None else params
    head = _t(lang, "worked_question", kind=_word(lang, question.kind), difficulty=_word(lang, question.difficulty),
              prompt=question.render(params))
    lines = [fill(head, width, subsequent_indent="   ")]
    if question.kind == "conceptual":
        lines.append(_t(lang, "strong_answer"))
        lines += [fill(point, width, initial_indent="   - ", subsequent_indent="     ")
                  for point, _ in question.key_points]
        lines.append(fill(_t(lang, "worked_answer", answer=question.answer(params)), width,
                          subsequent_indent="   "))
    else:
        lines.append(fill(_t(lang, "worked_answer", answer=expected_text(question, params, lang)), width,
                          subsequent_indent="   "))
    return "\n".join(lines)


# ---------------------------------------------------------------- the session
@dataclass
class Record:
    """One question of a drill: ``status`` is ``correct``, ``not yet``, ``late``, ``skipped``,
    ``not answered`` (shown, then the drill stopped) or ``not reached``; ``seconds`` is the

    Derived in the chapter "Interview rehearsal" (notebooks/17_interview_rehearsal.ipynb).
    time to the final answer (None if none)."""

    question_id: str
    status: str
    seconds: float | None = None


@dataclass
class DrillResult:
    """What a drill recorded. ``stopped`` is ``""``, ``"quit"``, ``"end of input"`` or ``"interrupted"``.

    Derived in the chapter "Interview rehearsal" (notebooks/17_interview_rehearsal.ipynb).
    """

    records: list = field(default_factory=list)
    stopped: str = ""
    time_limit: float | None = None
    lang: str = "en"

    @property
    def asked(self) -> int:
        return len(self.records)

    @property
    def score(self) -> int:
        return sum(r.status == "correct" for r in self.records)

    def summary(self) -> str:
        lang = self.lang
        counts = Counter(r.status for r in self.records)
        extra = ", ".join(f"{counts[s]} {_word(lang, s)}"
                          for s in ("late", "not yet", "skipped", "not answered", "not reached") if counts[s])
        percent = f" ({100 * self.score / self.asked:.0f} %)" if self.asked else ""
        lines = [_t(lang, "score", score=self.score, asked=self.asked, percent=percent,
                    extra=f"; {extra}" if extra else "")]
        for r in self.records:
            time_taken = f"  ({r.seconds:.0f} s)" if r.seconds is not None and self.time_limit else ""
            status = _word(lang, r.status)
            pad = 14 - sum(map(_width, status))
            lines.append(f"  {status}{' ' * max(pad, 1)}{r.question_id}{time_taken}")
        return "\n".join(lines)


class _EndOfInput(Exception):
    pass


class _Quit(Exception):
    pass


class _Session:
    def __init__(self, stdin, stdout, lang="en"):
        self.stdin, self.stdout, self.lang = stdin, stdout, lang
        try:   # a terminal echoes what is typed; a script's answers are echoed here, for a readable log
            self.echo = not stdin.isatty()
        except (AttributeError, ValueError, OSError):
            self.echo = True
        self.pending_end = False

    def say(self, text: str = "") -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def wrap(self, text: str, indent: str = "") -> str:
        return "\n".join(fill(part, WIDTH, initial_indent=indent, subsequent_indent=indent)
                         for part in text.split("\n"))

    def t(self, key: str, **fields) -> str:
        return _t(self.lang, key, **fields)

    def line(self, prompt: str = "> ") -> str:
        self.stdout.write(prompt)
        self.stdout.flush()
        text = self.stdin.readline()
        if text == "":
            if self.echo:
                self.stdout.write("\n")
            raise _EndOfInput
        text = text.rstrip("\r\n")
        if self.echo:
            self.stdout.write(text + "\n")
        if text.strip().lower() in _QUIT:
            raise _Quit
        return text


def _ask_numeric(session, question, params):
    session.say(session.t("ask_numeric_unit", unit=question.unit) if question.unit
                else session.t("ask_numeric_plain"))
    while True:
        text = session.line()
        if text.strip().lower() in _SKIP:
            return None
        answer, problem = read_numeric(question, text, session.lang)
        if problem is None:
            result = _safe_evaluate(question, answer, params)
            if result.status != "invalid":
                return result
            problem = result.message.removeprefix("not yet: ")
        session.say(problem[:1].upper() + problem[1:])


def _ask_symbolic(session, question, params):
    names = ", ".join(sorted(question.symbols)) or "the symbols of the question"
    session.say(session.t("ask_symbolic", names=names))
    while True:
        text = session.line()
        if text.strip().lower() in _SKIP:
            return None
        if not text.strip():
            session.say(session.t("empty_formula", names=names,
                                  example=sorted(question.symbols)[0] if question.symbols else "x"))
            continue
        result = _safe_evaluate(question, text, params)
        if result.status != "invalid":
            return result
        problem = result.message.removeprefix("not yet: ")   # one sentence from the whitelist parser
        session.say(problem[:1].upper() + problem[1:])


def _ask_choice(session, question, params):
    options = "   ".join(f"{i}) {c}" for i, c in enumerate(question.choices, 1))
    session.say(session.t("options", options=options))
    session.say(session.t("ask_choice"))
    while True:
        text = session.line().strip().strip("'\"")
        if text.lower() in _SKIP:
            return None
        if text.isdigit() and 1 <= int(text) <= len(question.choices):
            text = question.choices[int(text) - 1]
        if not text:
            session.say(session.t("empty_choice", n=len(question.choices)))
            continue
        result = _safe_evaluate(question, text, params)
        if result.status != "invalid":
            return result
        session.say(session.t("not_an_option", text=text,
                              options=", ".join(f"{i} ({c})" for i, c in enumerate(question.choices, 1))))


def _ask_conceptual(session, question, params):
    session.say(session.t("ask_conceptual"))
    while True:
        lines = []
        try:
            while True:
                text = session.line("> " if not lines else "  ")
                if not lines and text.strip().lower() in _SKIP:
                    return None
                if not text.strip():
                    if lines:
                        break
                    session.say(session.t("empty_paragraph"))
                    continue
                lines.append(text.strip())
        except _EndOfInput:
            if not lines:
                raise
            session.pending_end = True
        answer = " ".join(lines)
        return _safe_evaluate(question, answer, params), answer


def _safe_evaluate(question, answer, params):
    from .answers import AnswerError, time_limit
    from .checks import CHECK_SECONDS, CheckResult

    try:
        with time_limit(CHECK_SECONDS):
            return evaluate(question, answer, params=params)
    except AnswerError as exc:
        return CheckResult(question.id, "invalid", f"not yet: {exc}")
    except Exception as exc:  # a strange answer must never end the drill
        return CheckResult(question.id, "invalid", f"not yet: could not check that answer ({type(exc).__name__}).")


def _feedback_conceptual(session, question, params, answer):
    session.say(session.t("key_points"))
    for point, pattern in question.key_points:
        mark = "[x]" if answer and mentions(pattern, answer) else "[ ]"
        session.say(fill(f"{mark} {point}", WIDTH, initial_indent="  ", subsequent_indent="      "))
    for mistake in question.mistakes:
        if answer and mentions(mistake.answer(params), answer, claim=True):
            session.say(session.wrap(session.t("hint", hint=mistake.hint)))
    session.say(session.t("model_answer"))
    session.say(session.wrap(str(question.answer(params)), "  "))


def run_drill(questions, stdin=None, stdout=None, time_limit: float | None = None, clock=None,
              variant_seed: int | None = None, lang: str = "en") -> DrillResult:
    """Ask ``questions`` one by one on ``stdin``/``stdout``, give feedback, print the score.

    Derived in the chapter "Interview rehearsal" (notebooks/17_interview_rehearsal.ipynb).

    Parameters
    ----------
    questions : list of Question
    stdin, stdout : text streams
        Default: the process's. Answers are read line by line (no terminal needed).
    time_limit : float, optional
        Seconds per question. An answer given later counts as ``late``: it gets
        its feedback, but no point.
    clock : callable, optional
        Returns the time in seconds; called once when a question is shown and
        once when its answer is in (default :func:`time.monotonic`). Tests
        pass a fake one.
    variant_seed : int, optional
        Draw each question's variant parameters with this seed (``None``: the
        book's own numbers).
    lang : {"en", "zh"}
        The language of the questions, hints and messages (:func:`localize`).

    Returns
    -------
    DrillResult
        Stops early on 'quit', at the end of input, or on Ctrl-C (``stopped``
        says which); questions not reached are recorded as such.
    """
    lang = _check_language(lang)
    session = _Session(stdin or sys.stdin, stdout or sys.stdout, lang)
    clock = clock or time.monotonic
    if time_limit is not None and not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise ValueError(f"time_limit must be a number of seconds > 0, got {time_limit!r}")
    result = DrillResult(time_limit=time_limit, lang=lang)
    originals = list(questions)
    questions = [localize(q, lang) for q in originals]
    limit_note = session.t("time_limit_note", limit=time_limit) if time_limit else ""
    session.say(session.t("header", n=len(questions), plural="s" * (len(questions) != 1)) + limit_note)
    current = None
    try:
        for index, question in enumerate(questions, 1):
            if session.pending_end:
                raise _EndOfInput
            current = question
            params = question.draw(variant_seed)
            topics = "/".join(question_chapters(question))
            session.say("")
            session.say(session.t("question", index=index, n=len(questions), topics=topics,
                                  difficulty=_word(lang, question.difficulty), kind=_word(lang, question.kind),
                                  qid=question.id))
            session.say(session.wrap(question.render(params)))
            start = clock()
            answer_text = None
            if question.kind == "numeric":
                outcome = _ask_numeric(session, question, params)
            elif question.kind == "symbolic":
                outcome = _ask_symbolic(session, question, params)
            elif question.kind == "choice":
                outcome = _ask_choice(session, question, params)
            else:
                outcome = _ask_conceptual(session, question, params)
                if outcome is not None:
                    outcome, answer_text = outcome
            seconds = clock() - start
            late = time_limit is not None and seconds > time_limit
            if outcome is None:
                status = "skipped"
                session.say(session.t("skipped"))
            elif outcome.correct:
                status = "late" if late else "correct"
                session.say(session.t("correct_late", seconds=seconds, limit=time_limit)
                            if late else session.t("correct"))
            else:
                status = "not yet"
                message = outcome.message.removeprefix("not yet").lstrip(".: ")
                if question.kind == "conceptual" or not message:
                    message = session.t("not_yet")   # for a paragraph, the key points below say it in full
                elif message.startswith("Hint: "):
                    message = session.t("not_yet_hint", hint=message.removeprefix("Hint: "))
                else:
                    message = session.t("not_yet_because", message=message)
                session.say(session.wrap(message + (session.t("and_late", seconds=seconds, limit=time_limit)
                                                    if late else "")))
            if question.kind == "conceptual":
                _feedback_conceptual(session, question, params, answer_text)
            else:
                session.say(session.t("expected", expected=expected_text(originals[index - 1], params, lang)))
            result.records.append(Record(question.id, status, None if outcome is None else seconds))
            current = None
    except _Quit:
        result.stopped = "quit"
    except _EndOfInput:
        result.stopped = "end of input"
    except KeyboardInterrupt:
        result.stopped = "interrupted"
    if current is not None:
        result.records.append(Record(current.id, "not answered"))
    for question in questions[len(result.records):]:
        result.records.append(Record(question.id, "not reached"))
    session.say("")
    if result.stopped == "interrupted":
        session.say(session.t("stopped_interrupted"))
    elif result.stopped == "end of input":
        session.say(session.t("stopped_end"))
    elif result.stopped == "quit":
        session.say(session.t("stopped_quit"))
    session.say(result.summary())
    return result


# ---------------------------------------------------------------- the cheat sheet
CHEAT_ACCELERATORS = ("A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB", "MI300X")
CHEAT_MODELS = ("Llama-3.1-8B", "Mistral-7B", "Qwen2.5-7B", "Llama-2-7B", "Mixtral-8x7B", "Llama-3.1-70B",
                "Qwen2.5-72B", "Llama-3.1-405B")
#: GPUs that share one NVLink domain in the cheat sheet's servers (an HGX / DGX node of eight).
GPUS_PER_NODE = 8
#: The setting of the "real" columns of the cheat sheet: the book's one realistic setting
#: (:data:`servingmath.settings.REALISTIC`: MFU 0.5, MBU 0.75, 0.4 ms per step, NCCL's all-reduce).
CHEAT_SETTING = "realistic"


def cheat_sheet(accelerators=CHEAT_ACCELERATORS, models=CHEAT_MODELS, reference_model: str = "Llama-3.1-8B",
                reference_accelerator: str = "H100-SXM5-80GB") -> str:
    """One page of formulas and numbers worth remembering, computed from the catalogs.

    Derived in the chapter "Interview rehearsal" (notebooks/17_interview_rehearsal.ipynb).

    Every number is computed when the function runs, from the accelerator and
    model catalogs and the library's formulas, so the sheet cannot drift from
    the book. Each headline is given at the physical bound ("peak") and at the
    book's realistic setting ("real", :data:`CHEAT_SETTING`). Plain ASCII, so
    it prints anywhere.

    Examples
    --------
    >>> sheet = cheat_sheet()
    >>> "A100-SXM4-80GB" in sheet and "153" in sheet
    True
    """
    from .decode import knee_batch_size
    from .hardware import get_accelerator
    from .memory import min_tensor_parallel
    from .moe import weight_bytes_read
    from .parallelism import tensor_parallel_decode_time
    from .models import get_model, kv_bytes_per_token, parameter_count, weight_bytes
    from .roofline import critical_batch_size, ridge_point
    from .slo import READING_WPM, WORDS_PER_TOKEN, tpot_for_reading_speed

    real = CHEAT_SETTING
    lines = [
        "CHEAT SHEET -- the arithmetic of LLM serving (computed from the book's catalogs)",
        "Conventions: dense peak FLOP/s, decimal GB and TB/s, bf16 unless noted. 'peak': the physical bound",
        "(MFU = MBU = 1, all-reduce bytes at full link bandwidth, no latency); 'real': the book's realistic",
        "setting (MFU 0.5, MBU 0.75, 0.4 ms per step, NCCL's all-reduce at 80 % link efficiency).",
        "",
        "FORMULAS",
        "  ridge point        R = F / W  FLOP per byte (with efficiencies: F*MFU / (W*MBU))",
        "  weights read       Q_w = P_mm b_w per step: all but the input embedding (B rows gathered)",
        "  decode step        T(B) = max(Q_w / W, 2 P_mm B / F) + B S k_tok / W + T_0 (+ all-reduces if TP)",
        "  knee               B* = R b_w / 2  (bf16: the ridge point), the same for any TP degree N",
        "  throughput         X(B) = B / T(B): almost linear below B*; flat above at the bound only",
        "  KV per token       k_tok = 2 L K d_h b_kv bytes;  memory wall B_mem = (u M - M_w/N) / (S k_tok/N)",
        "  TPOT target tau    B_SLO = floor((tau - Q_w/W) / (S k_tok / W)) while below the knee",
        "  prefill            2 P_mm L_p FLOPs (+ attention); compute-bound once L_p is past ~R tokens",
        "  latency            E2E = TTFT + (L_o - 1) TPOT;  TPOT = (E2E - TTFT) / (L_o - 1)",
        "  queueing           W_q = rho s / (1 - rho) for M/M/1 (hyperbolic); M/D/1 half; L = lambda x time",
        "  goodput            req/s meeting every SLO (vLLM); max rate with >= 90 % meeting (DistServe)",
        "",
        f"ACCELERATORS        (B*: knee of {reference_model} at S = 0, peak and real)",
        f"  {'name':<16}{'HBM':>8}{'bandwidth':>12}{'bf16 peak':>14}{'ridge':>8}{'fp8 ridge':>11}"
        f"{'B* peak':>9}{'B* real':>9}",
    ]
    for name in accelerators:
        acc = get_accelerator(name)
        try:
            fp8 = f"{ridge_point(acc, 'fp8'):.0f}"
        except ValueError:
            fp8 = "-"
        lines.append(
            f"  {acc.name:<16}{acc.memory_bytes / 1e9:>5.0f} GB{acc.memory_bandwidth / 1e12:>7.2f} TB/s"
            f"{acc.peak_flops('bf16') / 1e12:>7.0f} TFLOP/s{ridge_point(acc):>8.0f}{fp8:>11}"
            f"{knee_batch_size(reference_model, acc, 0):>9.0f}"
            f"{knee_batch_size(reference_model, acc, 0, setting=real):>9.0f}")
    ref = get_accelerator(reference_accelerator).name
    lines += [
        f"  B_crit = R b_w / 2, {ref}: bf16 {critical_batch_size(ref):.0f}, int8 "
        f"{critical_batch_size(ref, weight_dtype='int8'):.0f}, int4 "
        f"{critical_batch_size(ref, weight_dtype='int4'):.0f}, fp8 (and fp8 math) "
        f"{critical_batch_size(ref, weight_dtype='fp8', compute_dtype='fp8'):.0f}",
        "",
        "MODELS (bf16)   stored: all weights; read: the bytes a batch-1 step reads (MoE: shared + k experts)",
        f"  TPOT floor: batch 1, S = 0, on the fewest {ref} (TP) that hold weights + 4k tokens",
        f"  {'model':<16}{'params':>10}{'stored':>9}{'read':>9}{'KV/token':>10}{'KV @ 4k':>10}"
        f"{'floor peak':>11}{'real':>9}{'TP':>4}",
    ]
    beyond_node = False
    for name in models:
        m = get_model(name)
        kv = kv_bytes_per_token(m)
        tp = min_tensor_parallel(m, ref, 4096)
        floors = [tensor_parallel_decode_time(m, ref, 1, 0, tensor_parallel=tp, setting=st)
                  for st in ("physical", real)]
        mark = "*" if tp > GPUS_PER_NODE else ""
        beyond_node = beyond_node or bool(mark)
        lines.append(f"  {m.name:<16}{parameter_count(m) / 1e9:>7.1f} bn{weight_bytes(m) / 1e9:>6.1f} GB"
                     f"{weight_bytes_read(m, 1) / 1e9:>6.1f} GB{kv / 1024:>6.0f} KiB{kv * 4096 / 2**30:>6.2f} GiB"
                     f"{floors[0] * 1e3:>8.1f} ms{floors[1] * 1e3:>6.1f} ms{tp:>4}{mark}")
    if beyond_node:
        lines += [f"  * more GPUs than one {GPUS_PER_NODE}-GPU node: this floor prices every all-reduce on NVLink,",
                  "    a lower bound (between nodes the all-reduces cross the network)"]
    reading = tpot_for_reading_speed()
    lines += [
        "",
        f"READING SPEED VS TPOT   ({READING_WPM:.0f} words/min silent reading, {WORDS_PER_TOKEN:g} words per token)",
        f"  reading speed = {1 / reading:.1f} tokens/s = TPOT {reading * 1e3:.0f} ms",
        "  " + "   ".join(f"{t * 1e3:.0f} ms: {reading / t:.1f}x" for t in (0.02, 0.03, 0.05, 0.08, 0.1, 0.2)),
        "  (how many times faster than reading the text arrives)",
        "",
        "UNITS   1 GB = 1e9 B, 1 GiB = 2**30 B (7.4 % more). NVLink 4: 900 GB/s bidirectional = 450 GB/s",
        "        each way. Datasheets headline 2:4-sparse FLOP/s, twice the dense figure.",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- command line
def _list_text(questions) -> str:
    counts = chapter_counts(questions)
    head = f"{'chapter':<14}{'total':>6}" + "".join(f"{k:>11}" for k in KINDS) + "".join(f"{d:>8}" for d in DIFFICULTIES)
    lines = [head]
    for name, c in counts.items():
        lines.append(f"{name:<14}{c['total']:>6}" + "".join(f"{c[k]:>11}" for k in KINDS)
                     + "".join(f"{c[d]:>8}" for d in DIFFICULTIES))
    lines.append(f"{len(questions)} questions in all. A question counts under its module and under the chapter it "
                 "draws on, so the rows overlap.")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m servingmath.drill", description=__doc__.split("\n\n")[0],
                                     epilog="Answers: numbers with or without a unit ('12 ms', '0.5 GiB', '1.4x'), "
                                            "formulas in Python syntax, option names or numbers, paragraphs ended "
                                            "by an empty line. 'skip' and 'quit' work everywhere.")
    parser.add_argument("--chapter", action="append", metavar="NAME[,NAME]",
                        help="only these chapters, by name or number (decode or 04; repeat or separate by "
                             "commas); see --list")
    parser.add_argument("--difficulty", action="append", metavar="LEVEL[,LEVEL]",
                        help="only these difficulties: easy, medium, hard")
    parser.add_argument("--kind", action="append", metavar="KIND[,KIND]",
                        help="only these kinds: numeric, symbolic, choice, conceptual")
    parser.add_argument("--n", type=int, default=5, help="how many questions (default 5)")
    parser.add_argument("--seed", type=int, help="repeat a drill: same seed, same questions")
    parser.add_argument("--time-limit", type=float, metavar="SECONDS",
                        help="seconds per question; later answers count as late (no point)")
    parser.add_argument("--variants", action="store_true",
                        help="use each question's public practice variant for --seed instead of the book's "
                             "numbers (graded hand-outs use other variants, drawn from the teacher's key)")
    parser.add_argument("--list", action="store_true", help="list the chapters and their question counts")
    parser.add_argument("--cheat-sheet", action="store_true", help="print the one-page cheat sheet")
    parser.add_argument("--lang", choices=LANGUAGES, default="en",
                        help="language of the questions, hints and feedback: en (default) or zh (中文)")
    return parser


def main(argv=None, stdin=None, stdout=None, clock=None) -> int:
    """Run the drill from the command line; returns the exit status (130 after Ctrl-C).

    Derived in the chapter "Interview rehearsal" (notebooks/17_interview_rehearsal.ipynb).
    """
    stdout = stdout or sys.stdout
    for stream in (stdin or sys.stdin, stdout):
        try:   # never die on a character the terminal cannot show or a byte that is not UTF-8
            stream.reconfigure(errors="replace")
        except (AttributeError, ValueError, OSError):
            pass
    parser = _parser()
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"--n must be at least 1, got {args.n}")
    if args.time_limit is not None and not args.time_limit > 0:
        parser.error(f"--time-limit must be a number of seconds > 0, got {args.time_limit:g}")
    if args.variants and args.seed is None:
        parser.error("--variants needs --seed (which variant?)")
    try:
        if args.cheat_sheet:
            stdout.write(cheat_sheet() + "\n")
            return 0
        bank = _bank()
        if args.list:
            stdout.write(_list_text(bank) + "\n")
            return 0
        seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
        questions = select_questions(bank, args.chapter, args.difficulty, args.kind, args.n, seed)
    except ValueError as exc:
        parser.error(str(exc))
    except KeyboardInterrupt:
        stdout.write("\nInterrupted.\n")
        return 130
    if args.seed is None:
        stdout.write(_t(args.lang, "seed_note", seed=seed) + "\n")
    result = run_drill(questions, stdin=stdin, stdout=stdout, time_limit=args.time_limit, clock=clock,
                       variant_seed=seed if args.variants else None, lang=args.lang)
    return 130 if result.stopped == "interrupted" else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:   # Ctrl-C while Python was still importing or parsing
        sys.stderr.write("\nInterrupted.\n")
        sys.exit(130)
