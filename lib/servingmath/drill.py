"""The interview drill: random questions from the whole question bank, in a terminal.

::

    python -m servingmath.drill                          # 5 random questions
    python -m servingmath.drill --chapter decode,slo --difficulty easy,medium --n 3 --seed 7
    python -m servingmath.drill --chapter interview --time-limit 90
    python -m servingmath.drill --chapter 04             # chapter 04's questions (decode)
    python -m servingmath.drill --list                   # chapters and their question counts
    python -m servingmath.drill --cheat-sheet            # formulas and numbers worth remembering

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
import difflib
import math
import random
import re
import sys
import textwrap
import time
from collections import Counter
from dataclasses import dataclass, field

from .checks import Question, evaluate, mentions
from .units import UNIT_SCALES, parse_quantity

__all__ = ["CHAPTER_NUMBERS", "question_chapters", "chapter_counts", "select_questions", "read_numeric", "expected_text",
           "worked_answer", "run_drill", "DrillResult", "Record", "cheat_sheet", "main", "KINDS", "DIFFICULTIES"]

KINDS = ("numeric", "symbolic", "choice", "conceptual")
#: Chapter numbers of the book -> the question module of that chapter's exercise set
#: (``--chapter 04`` is ``--chapter decode``; tested against solutions/).
CHAPTER_NUMBERS = {"01": "anatomy", "02": "rooflines", "03": "memory", "04": "decode", "05": "prefill",
                   "06": "pareto", "07": "slo", "08": "parallelism", "09": "queueing", "10": "scheduling",
                   "11": "quantization", "12": "speculative", "13": "capacity", "14": "validation",
                   "16": "moe", "17": "interview"}
DIFFICULTIES = ("easy", "medium", "hard")
WIDTH = 92
_SKIP, _QUIT = {"skip", "pass", "next"}, {"quit", "exit", "stop"}


# ---------------------------------------------------------------- choosing questions
def question_chapters(question: Question) -> tuple[str, ...]:
    """The chapter names a question answers to: its module (id prefix) and its ``chapter`` field."""
    module = question.id.split(".", 1)[0]
    return tuple(dict.fromkeys(c for c in (module, question.chapter) if c))


def _bank() -> dict:
    from .questions import all_questions

    return all_questions()


def chapter_counts(questions=None) -> dict[str, Counter]:
    """Chapter name -> counts of its questions by kind and difficulty (``"total"`` too)."""
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


def _unit_phrase(question: Question) -> str:
    return f"in {question.unit}" if question.unit else "a plain number, no unit"


def read_numeric(question: Question, text: str):
    """Turn typed text into an answer for a numeric question, or explain what is wrong.

    Returns ``(answer, None)`` where ``answer`` is a number or a string with a
    unit that :func:`servingmath.checks.evaluate` reads, or ``(None, message)``.
    Dimensionless questions also take ``1.4x`` and ``45 %``.

    Examples
    --------
    >>> from servingmath.questions import get_question
    >>> q = get_question("interview.decode_floor_70b_tp8")     # in ms
    >>> read_numeric(q, "1e-3 s"), read_numeric(q, "1 ms"), read_numeric(q, "5.3")
    (('1e-3 s', None), ('1 ms', None), (5.3, None))
    >>> read_numeric(q, "fast")[1]
    "'fast' is not a number. Type a number in ms, such as 12.5, or a number with a unit, such as '12.5 ms'."
    """
    cleaned = text.strip().strip("'\"`").strip().rstrip(".").strip()
    example = "12.5" if question.unit else "1.5"
    if not cleaned:
        return None, f"Please type an answer ({_unit_phrase(question)}), or 'skip' or 'quit'."
    if len(cleaned) > 100:
        return None, f"That is too long to be a number: type a number {_unit_phrase(question)}, such as {example}."
    if not re.search(r"\d", cleaned):
        with_unit = f", or a number with a unit, such as '{example} {question.unit}'" if question.unit else ""
        return None, (f"{cleaned!r} is not a number. Type a number {_unit_phrase(question)}, such as "
                      f"{example}{with_unit}.")
    if re.search(r"\d,\d{1,2}(?!\d)", cleaned):
        return None, (f"{cleaned!r}: use a decimal point, not a comma ({cleaned.replace(',', '.')!r}); "
                      "commas are read as thousands separators.")
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
            return None, (f"could not read {cleaned!r}: this answer is a plain number, without a unit "
                          f"(type just the number, e.g. {example}).")
        dim = UNIT_SCALES[question.unit][1]
        known = ", ".join(_UNITS_BY_DIMENSION[dim])
        return None, (f"could not read {cleaned!r}: unknown unit {unit!r}. The answer is "
                      f"{_DIMENSION_WORDS.get(dim, dim)}: type a number in {question.unit}, or use one of "
                      f"{known}.")
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


def _tolerance(question: Question) -> str:
    if question.rel_tol < 1e-6:
        return "exactly"
    return f"within {question.rel_tol * 100:g} %"


def expected_text(question: Question, params: dict | None = None) -> str:
    """The expected answer as the drill shows it: a number with its unit and tolerance, a formula,
    an option, or (conceptual) the model answer."""
    params = question.draw(None) if params is None else params
    expected = question.answer(params)
    if question.kind == "numeric":
        if question.unit:
            value = float(expected) / UNIT_SCALES[question.unit][0]
            return f"{_format_number(value)} {question.unit} (accepted {_tolerance(question)})"
        return f"{_format_number(float(expected))} (accepted {_tolerance(question)})"
    if question.kind == "symbolic":
        import sympy

        return sympy.sstr(expected)
    return str(expected)


def worked_answer(question: Question, params: dict | None = None, width: int = WIDTH) -> str:
    """The question and its full answer as plain text (what the rehearsal chapter prints).

    Conceptual questions list the key points a strong answer names before the model answer.
    """
    params = question.draw(None) if params is None else params
    lines = [textwrap.fill(f"Q ({question.kind}, {question.difficulty}). {question.render(params)}", width,
                           subsequent_indent="   ")]
    if question.kind == "conceptual":
        lines.append("   A strong answer names:")
        lines += [textwrap.fill(point, width, initial_indent="   - ", subsequent_indent="     ")
                  for point, _ in question.key_points]
        lines.append(textwrap.fill("A: " + str(question.answer(params)), width, subsequent_indent="   "))
    else:
        lines.append(textwrap.fill("A: " + expected_text(question, params), width, subsequent_indent="   "))
    return "\n".join(lines)


# ---------------------------------------------------------------- the session
@dataclass
class Record:
    """One question of a drill: ``status`` is ``correct``, ``not yet``, ``late``, ``skipped``,
    ``not answered`` (shown, then the drill stopped) or ``not reached``; ``seconds`` is the
    time to the final answer (None if none)."""

    question_id: str
    status: str
    seconds: float | None = None


@dataclass
class DrillResult:
    """What a drill recorded. ``stopped`` is ``""``, ``"quit"``, ``"end of input"`` or ``"interrupted"``."""

    records: list = field(default_factory=list)
    stopped: str = ""
    time_limit: float | None = None

    @property
    def asked(self) -> int:
        return len(self.records)

    @property
    def score(self) -> int:
        return sum(r.status == "correct" for r in self.records)

    def summary(self) -> str:
        counts = Counter(r.status for r in self.records)
        extra = ", ".join(f"{counts[s]} {s}" for s in ("late", "not yet", "skipped", "not answered", "not reached")
                          if counts[s])
        percent = f" ({100 * self.score / self.asked:.0f} %)" if self.asked else ""
        lines = [f"Score: {self.score} of {self.asked}{percent}" + (f"; {extra}" if extra else "") + "."]
        for r in self.records:
            time_taken = f"  ({r.seconds:.0f} s)" if r.seconds is not None and self.time_limit else ""
            lines.append(f"  {r.status:<14}{r.question_id}{time_taken}")
        return "\n".join(lines)


class _EndOfInput(Exception):
    pass


class _Quit(Exception):
    pass


class _Session:
    def __init__(self, stdin, stdout):
        self.stdin, self.stdout = stdin, stdout
        try:   # a terminal echoes what is typed; a script's answers are echoed here, for a readable log
            self.echo = not stdin.isatty()
        except (AttributeError, ValueError, OSError):
            self.echo = True
        self.pending_end = False

    def say(self, text: str = "") -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def wrap(self, text: str, indent: str = "") -> str:
        return "\n".join(textwrap.fill(part, WIDTH, initial_indent=indent, subsequent_indent=indent)
                         for part in text.split("\n"))

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
    session.say(f"Answer {_unit_phrase(question)}"
                + (f" (or with a unit, such as '12.5 {question.unit}')" if question.unit else "")
                + "; 'skip' shows the answer, 'quit' stops.")
    while True:
        text = session.line()
        if text.strip().lower() in _SKIP:
            return None
        answer, problem = read_numeric(question, text)
        if problem is None:
            result = _safe_evaluate(question, answer, params)
            if result.status != "invalid":
                return result
            problem = result.message.removeprefix("not yet: ")
        session.say(problem[:1].upper() + problem[1:])


def _ask_symbolic(session, question, params):
    names = ", ".join(sorted(question.symbols)) or "the symbols of the question"
    session.say(f"Answer with a formula in {names} (Python syntax: *, /, **); 'skip' shows the answer, "
                "'quit' stops.")
    while True:
        text = session.line()
        if text.strip().lower() in _SKIP:
            return None
        if not text.strip():
            session.say(f"Please type a formula in {names}, such as {sorted(question.symbols)[0] if question.symbols else 'x'} * 2.")
            continue
        result = _safe_evaluate(question, text, params)
        if result.status != "invalid":
            return result
        problem = result.message.removeprefix("not yet: ")   # one sentence from the whitelist parser
        session.say(problem[:1].upper() + problem[1:])


def _ask_choice(session, question, params):
    options = "   ".join(f"{i}) {c}" for i, c in enumerate(question.choices, 1))
    session.say(f"Options: {options}")
    session.say("Type the option or its number; 'skip' shows the answer, 'quit' stops.")
    while True:
        text = session.line().strip().strip("'\"")
        if text.lower() in _SKIP:
            return None
        if text.isdigit() and 1 <= int(text) <= len(question.choices):
            text = question.choices[int(text) - 1]
        if not text:
            session.say(f"Please type one of the options (1 to {len(question.choices)}).")
            continue
        result = _safe_evaluate(question, text, params)
        if result.status != "invalid":
            return result
        session.say(f"{text!r} is not an option. Type one of: "
                    + ", ".join(f"{i} ({c})" for i, c in enumerate(question.choices, 1)) + ".")


def _ask_conceptual(session, question, params):
    session.say("Answer in a few sentences; finish with an empty line. 'skip' shows the model answer, "
                "'quit' stops.")
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
                    session.say("Please type your answer (a paragraph), then an empty line.")
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
    session.say("Key points:")
    for point, pattern in question.key_points:
        mark = "[x]" if answer and mentions(pattern, answer) else "[ ]"
        session.say(textwrap.fill(f"{mark} {point}", WIDTH, initial_indent="  ", subsequent_indent="      "))
    for mistake in question.mistakes:
        if answer and mentions(mistake.answer(params), answer, claim=True):
            session.say(session.wrap(f"Hint: {mistake.hint}"))
    session.say("Model answer:")
    session.say(session.wrap(str(question.answer(params)), "  "))


def run_drill(questions, stdin=None, stdout=None, time_limit: float | None = None, clock=None,
              variant_seed: int | None = None) -> DrillResult:
    """Ask ``questions`` one by one on ``stdin``/``stdout``, give feedback, print the score.

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

    Returns
    -------
    DrillResult
        Stops early on 'quit', at the end of input, or on Ctrl-C (``stopped``
        says which); questions not reached are recorded as such.
    """
    session = _Session(stdin or sys.stdin, stdout or sys.stdout)
    clock = clock or time.monotonic
    if time_limit is not None and not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise ValueError(f"time_limit must be a number of seconds > 0, got {time_limit!r}")
    result = DrillResult(time_limit=time_limit)
    questions = list(questions)
    limit_note = f" Time limit: {time_limit:g} s per question." if time_limit else ""
    session.say(f"Interview drill: {len(questions)} question{'s' * (len(questions) != 1)}.{limit_note}")
    current = None
    try:
        for index, question in enumerate(questions, 1):
            if session.pending_end:
                raise _EndOfInput
            current = question
            params = question.draw(variant_seed)
            topics = "/".join(question_chapters(question))
            session.say("")
            session.say(f"--- Question {index} of {len(questions)}  [{topics}, {question.difficulty}, "
                        f"{question.kind}]  {question.id}")
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
                session.say("Skipped.")
            elif outcome.correct:
                status = "late" if late else "correct"
                session.say(f"Correct, but late ({seconds:.0f} s > {time_limit:g} s): no point."
                            if late else "Correct.")
            else:
                status = "not yet"
                message = outcome.message.removeprefix("not yet").lstrip(".: ")
                if question.kind == "conceptual" or not message:
                    message = "Not yet."   # for a paragraph, the key points below say it in full
                elif message.startswith("Hint"):
                    message = f"Not yet. {message}"
                else:
                    message = f"Not yet: {message}"
                session.say(session.wrap(message
                                         + (f" (And late: {seconds:.0f} s > {time_limit:g} s.)" if late else "")))
            if question.kind == "conceptual":
                _feedback_conceptual(session, question, params, answer_text)
            else:
                session.say(f"Expected: {expected_text(question, params)}")
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
        session.say("Interrupted (Ctrl-C): stopping here.")
    elif result.stopped == "end of input":
        session.say("End of input: stopping here.")
    elif result.stopped == "quit":
        session.say("Stopping here, as asked.")
    session.say(result.summary())
    return result


# ---------------------------------------------------------------- the cheat sheet
CHEAT_ACCELERATORS = ("A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB", "MI300X")
CHEAT_MODELS = ("Llama-3.1-8B", "Mistral-7B", "Qwen2.5-7B", "Llama-2-7B", "Mixtral-8x7B", "Llama-3.1-70B",
                "Qwen2.5-72B", "Llama-3.1-405B")
#: The setting of the "real" columns of the cheat sheet: the book's one realistic setting
#: (:data:`servingmath.settings.REALISTIC`: MFU 0.5, MBU 0.75, 0.4 ms per step, NCCL's all-reduce).
CHEAT_SETTING = "realistic"


def cheat_sheet(accelerators=CHEAT_ACCELERATORS, models=CHEAT_MODELS, reference_model: str = "Llama-3.1-8B",
                reference_accelerator: str = "H100-SXM5-80GB") -> str:
    """One page of formulas and numbers worth remembering, computed from the catalogs.

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
    for name in models:
        m = get_model(name)
        kv = kv_bytes_per_token(m)
        tp = min_tensor_parallel(m, ref, 4096)
        floors = [tensor_parallel_decode_time(m, ref, 1, 0, tensor_parallel=tp, setting=st)
                  for st in ("physical", real)]
        lines.append(f"  {m.name:<16}{parameter_count(m) / 1e9:>7.1f} bn{weight_bytes(m) / 1e9:>6.1f} GB"
                     f"{weight_bytes_read(m, 1) / 1e9:>6.1f} GB{kv / 1024:>6.0f} KiB{kv * 4096 / 2**30:>6.2f} GiB"
                     f"{floors[0] * 1e3:>8.1f} ms{floors[1] * 1e3:>6.1f} ms{tp:>4}")
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
    return parser


def main(argv=None, stdin=None, stdout=None, clock=None) -> int:
    """Run the drill from the command line; returns the exit status (130 after Ctrl-C)."""
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
        stdout.write(f"(seed {seed}: run again with --seed {seed} for the same questions)\n")
    result = run_drill(questions, stdin=stdin, stdout=stdout, time_limit=args.time_limit, clock=clock,
                       variant_seed=seed if args.variants else None)
    return 130 if result.stopped == "interrupted" else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:   # Ctrl-C while Python was still importing or parsing
        sys.stderr.write("\nInterrupted.\n")
        sys.exit(130)
