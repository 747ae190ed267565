"""Classroom assignments: per-student variants drawn from a course key, and a grader a student cannot fool.

Teachers use it from the command line::

    python -m servingmath.assignments make exercises/01_anatomy_of_a_request.ipynb \\
        --students alice,bob,carol --key-file course.key --out handout/
    python -m servingmath.assignments grade exercises/01_anatomy_of_a_request.ipynb \\
        --roster handout/roster.csv --key-file course.key --submissions collected/ --out grades/

``make`` writes one notebook per student (``handout/alice.ipynb``) whose question texts show
that student's variant, drawn from the course key (a secret the teacher keeps; ``make``
creates ``course.key`` if it does not exist) by HMAC-SHA256(key, student, question). The
notebook holds no seed and no key: its check cells confirm only the *form* of each answer
(:func:`servingmath.checks.graded_handout`). ``roster.csv`` lists the students, the template and
a fingerprint of the key, so that grading with the wrong key or template is caught.

``grade`` runs each submission in a sandbox of its own (:mod:`servingmath.sandbox`: bubblewrap or
unshare namespaces when the machine allows, resource limits always; it prints what isolation it
got), records every answer at the moment a ``check()`` call sees it, and, once the notebook and
everything it started are gone, checks those answers itself against the student's variant,
each under a time limit. Nothing the submission stored, printed or computed as a verdict is
trusted. Each student's grade goes into a journal as soon as it is known, so an interrupted run
resumes where it stopped; ``scores.csv``, ``summary.md`` and ``open_answers.md`` are then written
atomically. A mistake in the grader's inputs (no roster for a set with variants, a roster from
another template, a folder that does not exist, ...) stops it with a clear message and exit
status 2 before anything is graded.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import copy
import csv
import hashlib
import hmac
import io
import json
import os
import re
import secrets
import signal
import sys
import tempfile
import threading
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from .answers import AnswerError, AnswerTimeout, call_with_time_limit, from_record
from .checks import evaluate, student_id
from .questions import get_question

__all__ = ["TeacherError", "Grade", "check_cells", "key_check", "read_key", "read_roster", "make_variant",
           "make_assignment", "grade_folder", "main"]

CHECK_CALL = re.compile(r"""^\s*check\(\s*["']([\w.]+)["']\s*,\s*([A-Za-z_]\w*)\s*\)\s*$""", re.M)
ANY_CHECK = re.compile(r"""check\(\s*["']([\w.]+)["']""")
HANDOUT_ID = "servingmath-handout"
HANDOUT_CELL = ("from servingmath.checks import graded_handout\n"
                "graded_handout({student!r}, {assignment!r})  # a graded hand-out: check() confirms the form of "
                "each answer; your teacher grades it")
PLACEHOLDER = "*Write your answer here.*"
MAX_SUBMISSION = 32 * 2**20
ROSTER_FIELDS = ["student", "template", "key_check"]
JOURNAL = "journal.jsonl"
#: Seconds the grader may spend checking one answer (in a child process it kills after that).
ANSWER_SECONDS = 20.0


class TeacherError(Exception):
    """A mistake in what the grader was given: reported as one message, with exit status 2.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """


# ---------------------------------------------------------------- names, keys, rosters
def clean_name(name: str) -> str:
    """A student's name as written (NFC, trimmed); raises TeacherError for an unusable one."""
    if not isinstance(name, str):
        raise TeacherError(f"student name must be text, got {name!r}")
    name = unicodedata.normalize("NFC", name).strip().lstrip("\ufeff").strip()
    if not name:
        raise TeacherError("a student name is empty")
    if re.search(r"[\x00-\x1f\x7f/\\]", name) or name in {".", ".."}:
        raise TeacherError(f"student name {name!r} holds a control character or a slash")
    return name


def key_check(key: bytes) -> str:
    """A short public fingerprint of the course key, stored in the roster to catch a wrong key.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """
    return hmac.new(key, b"servingmath roster check", hashlib.sha256).hexdigest()[:12]


def read_key(key: str | None = None, key_file=None, create: bool = False) -> bytes:
    """The course key: ``key`` as given, or the content of ``key_file`` (created when ``create``).

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """
    if key is not None and key_file is not None:
        raise TeacherError("give the course key once: --key or --key-file, not both")
    if key is not None:
        if not key.strip():
            raise TeacherError("--key is empty")
        return key.strip().encode()
    if key_file is None:
        raise TeacherError("no course key: pass --key-file course.key (make creates it) or --key TEXT")
    path = Path(key_file)
    if not path.exists():
        if not create:
            raise TeacherError(f"key file {path} does not exist (make creates one; pass the same file to grade)")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(32) + "\n")
        print(f"created the course key {path}: keep it secret and keep it; grading needs it", file=sys.stderr)
    if path.is_dir():
        raise TeacherError(f"key file {path} is a folder")
    text = path.read_bytes().strip()
    if not text:
        raise TeacherError(f"key file {path} is empty")
    return text


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")   # a spreadsheet's "CSV" in a Windows code page


def read_roster(roster, template_name: str | None = None, key: bytes | None = None) -> list[str]:
    """The students of ``roster``, in order, checked the way a spreadsheet may have changed it.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Accepts a byte-order mark, ``,``/``;``/tab separators, spaces after them, blank lines, any
    letter case in the header, and columns left over from older rosters (``seed``). Refuses, with
    the line numbers: no ``student`` column, an empty name on a line that has other cells, the same
    student twice (names compared after NFC and case folding), a ``template`` other than
    ``template_name``, a ``key_check`` that does not match ``key``.
    """
    path = Path(roster)
    if not path.is_file():
        raise TeacherError(f"roster {path} does not exist")
    text = _decode(path.read_bytes())
    lines = text.splitlines()
    if not any(line.strip() for line in lines):
        raise TeacherError(f"roster {path} is empty")
    header_line = next(line for line in lines if line.strip())
    delimiter = max([",", ";", "\t"], key=header_line.count)
    rows = list(csv.reader(io.StringIO(text), delimiter=delimiter, skipinitialspace=True))
    start = next(i for i, row in enumerate(rows) if any(c.strip() for c in row))
    header = [unicodedata.normalize("NFC", c).strip().lstrip("\ufeff").strip().lower() for c in rows[start]]
    if "student" not in header:
        raise TeacherError(f"roster {path} has no 'student' column (its first line is {header_line[:80]!r}); "
                           "it must be the roster.csv that make wrote, with columns " + ", ".join(ROSTER_FIELDS))
    col = {name: header.index(name) for name in ROSTER_FIELDS if name in header}
    students, seen, problems = [], {}, []
    for number, row in enumerate(rows[start + 1:], start + 2):
        cells = [c.strip() for c in row]
        if not any(cells):
            continue
        raw = cells[col["student"]] if col["student"] < len(cells) else ""
        if not raw:
            problems.append(f"line {number} has no student name")
            continue
        try:
            name = clean_name(raw)
        except TeacherError as exc:
            problems.append(f"line {number}: {exc}")
            continue
        ident = student_id(name)
        if ident in seen:
            problems.append(f"{name!r} is listed twice (lines {seen[ident]} and {number})")
            continue
        seen[ident] = number
        if template_name and "template" in col and col["template"] < len(cells) and cells[col["template"]]:
            if cells[col["template"]].casefold() != template_name.casefold():
                raise TeacherError(f"roster {path} was made for {cells[col['template']]}, but the template given is "
                                   f"{template_name}: pass the exercise notebook the hand-outs were made from")
        if key is not None and "key_check" in col and col["key_check"] < len(cells) and cells[col["key_check"]]:
            if cells[col["key_check"]].lower() != key_check(key):
                raise TeacherError(f"the course key does not match the one roster {path} was made with: pass the "
                                   "same --key-file (or --key) as for make")
        students.append(name)
    if problems:
        raise TeacherError(f"roster {path}: " + "; ".join(problems[:10]) + ("; ..." if len(problems) > 10 else ""))
    if not students:
        raise TeacherError(f"roster {path} lists no students")
    return students


# ---------------------------------------------------------------- notebooks
def check_cells(nb) -> list[tuple[int, str, str]]:
    """(cell index, question id, answer variable) of every ``check("id", variable)`` cell.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            for qid, name in CHECK_CALL.findall(cell.source):
                found.append((index, qid, name))
    return found


def _read_template(template_path):
    path = Path(template_path)
    if not path.is_file():
        raise TeacherError(f"template {path} does not exist")
    if path.suffix.lower() != ".ipynb":
        raise TeacherError(f"template {path} is not a notebook (.ipynb)")
    try:
        nb = nbformat.reads(_decode(path.read_bytes()), as_version=4)
    except Exception as exc:  # noqa: BLE001 - reported to the teacher
        raise TeacherError(f"template {path} is not a readable notebook ({type(exc).__name__})") from None
    checks = check_cells(nb)
    if not checks:
        raise TeacherError(f"template {path} has no check(\"id\", answer) cells: pass an exercise notebook "
                           "(exercises/NN_*.ipynb)")
    sources = "\n".join(c.source for c in nb.cells)
    if "### BEGIN SOLUTION" in sources or "<!-- BEGIN SOLUTION -->" in sources:
        raise TeacherError(f"template {path} holds solutions: hand out and grade the exercises/ version")
    if any(c.get("id") == HANDOUT_ID or "graded_handout(" in c.source for c in nb.cells):
        raise TeacherError(f"template {path} is a student's hand-out: pass the exercise notebook the hand-outs "
                           "were made from")
    for _, qid, _ in checks:
        try:
            get_question(qid)
        except KeyError as exc:
            raise TeacherError(f"template {path} checks an unknown question: {exc.args[0]}") from None
    return nb


def _question_cell(nb, index: int) -> int | None:
    for j in range(index - 1, -1, -1):
        if nb.cells[j].cell_type == "markdown":
            return j
    return None


def make_variant(template_path, key: bytes, student: str):
    """The exercise notebook ``template_path`` as ``student``'s graded hand-out.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Each question with variants shows the student's numbers (drawn from ``key``); a cell after the
    imports marks the notebook as a graded hand-out. The notebook holds neither seed nor key.
    """
    template = _read_template(template_path)
    nb = copy.deepcopy(template)
    for index, qid, _ in check_cells(template):
        question = get_question(qid)
        if not question.variants:
            continue
        j = _question_cell(nb, index)
        if j is not None:
            source = nb.cells[j].source
            heading = source.splitlines()[0] if source.startswith("#") else ""
            body = question.render(question.draw_for(key, student))
            nb.cells[j].source = (heading + "\n" if heading else "") + body + "\n\n*(your variant)*"
    first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    cell = nbformat.v4.new_code_cell(HANDOUT_CELL.format(student=student, assignment=Path(template_path).name))
    cell["id"] = HANDOUT_ID
    nb.cells.insert(first_code + 1, cell)
    for i, c in enumerate(nb.cells):
        c.setdefault("id", f"cell-{i:03d}")
    nb.metadata["servingmath"] = {"template": Path(template_path).name, "student": student, "graded": True}
    return nb


def _split_names(students) -> list[str]:
    if isinstance(students, str):
        lines = [line for line in students.splitlines() if line.strip()]
        first = [c.strip().lstrip("\ufeff").strip().lower() for c in re.split(r"[,;\t]", lines[0])] if lines else []
        if "student" in first and len(first) > 1:     # a CSV file with a header: its student column
            delimiter = max([",", ";", "\t"], key=lines[0].count)
            column = first.index("student")
            rows = list(csv.reader(io.StringIO("\n".join(lines[1:])), delimiter=delimiter, skipinitialspace=True))
            students = [row[column] for row in rows if len(row) > column]
        else:
            students = re.split(r"[,\n;\t]", students)
    names = [s for s in (unicodedata.normalize("NFC", str(s)).strip().lstrip("\ufeff").strip() for s in students)
             if s]
    if names and names[0].lower() == "student":
        names = names[1:]     # a header line
    return names


def make_assignment(template_path, students, key: bytes, out_dir) -> Path:
    """Write one graded hand-out per student and ``roster.csv``; return the roster's path.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """
    template_path = Path(template_path)
    _read_template(template_path)
    names = _split_names(students)
    if not names:
        raise TeacherError("--students lists no names")
    bad = [n for n in names if not re.fullmatch(r"[\w.-]+", n) or n.startswith((".", "-"))]
    if bad:
        raise TeacherError(f"student names {', '.join(map(repr, bad[:5]))}: use letters, digits, '.', '_' or '-' "
                           "(not first), since each names a file")
    seen, duplicates = set(), []
    for n in names:
        if student_id(n) in seen:
            duplicates.append(n)
        seen.add(student_id(n))
    if duplicates:
        raise TeacherError(f"--students lists {', '.join(sorted(set(map(repr, duplicates))))} more than once "
                           "(names are compared ignoring case)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        _atomic_write(out / f"{name}.ipynb", nbformat.writes(make_variant(template_path, key, name)) + "\n")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(ROSTER_FIELDS)
    for name in names:
        writer.writerow([name, template_path.name, key_check(key)])
    roster = out / "roster.csv"
    _atomic_write(roster, buffer.getvalue())
    return roster


# ---------------------------------------------------------------- output files
def _atomic_write(path: Path, text: str) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def csv_cell(value) -> str:
    """A value safe in a spreadsheet: a cell that would start a formula (= + - @, tab, CR) is prefixed with '."""
    text = "" if value is None else str(value)
    text = text.replace("\x00", "")
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def md_cell(value) -> str:
    """A value safe in a Markdown table cell: no line breaks, pipes escaped, no HTML."""
    text = re.sub(r"[\x00-\x1f\x7f\x85\u2028\u2029]+", " ", "" if value is None else str(value))
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("`", "\\`").strip() or "-"


def _fence(text: str) -> str:
    run = max((len(m) for m in re.findall(r"~+", text)), default=0)
    fence = "~" * max(4, run + 1)
    return f"{fence}\n{text.rstrip()}\n{fence}"


# ---------------------------------------------------------------- grading
@dataclass
class Grade:
    """The grade of one student.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """

    student: str
    status: str = "ok"        # ok | timed out | failed to run | not a notebook | no submission | ...
    results: dict = field(default_factory=dict)     # question id -> correct | incorrect | unreadable | ...
    slips: dict = field(default_factory=dict)       # question id -> the known mistake's name
    flags: list = field(default_factory=list)
    file: str = ""
    open_answers: dict = field(default_factory=dict)  # question label -> the student's text
    sha256: str = ""

    @property
    def score(self) -> int:
        return sum(1 for s in self.results.values() if s == "correct")


_NOT_GRADED = ("no submission", "not on the roster", "duplicate submissions")


def _structure_flags(template, submission, graded: bool, student: str = "") -> list[str]:
    flags = []
    template_checks = {(qid, name) for _, qid, name in check_cells(template)}
    submitted = {qid for _, qid, _ in check_cells(submission)}
    for qid in sorted({q for q, _ in template_checks} - submitted):
        flags.append(f"check cell for {qid} changed or deleted")
    sources = [c.source for c in submission.cells if c.cell_type == "code"]
    if graded and not any("graded_handout(" in s for s in sources):
        flags.append("the graded_handout line was removed")
    owners = {m for s in sources for m in re.findall(r"graded_handout\(\s*['\"]([^'\"]{1,100})['\"]", s)}
    if student and owners and all(student_id(o) != student_id(student) for o in owners):
        flags.append(f"the hand-out was made for {', '.join(sorted(owners))[:100]}, not for {student}")
    expected_cells = len(template.cells) + (1 if graded else 0)
    if len(submission.cells) < expected_cells:
        flags.append(f"cells deleted ({len(submission.cells)} cells, the hand-out has {expected_cells})")
    for source in sources:
        if re.search(r"^\s*(def\s+check\b|check\s*=|from\s+\S+\s+import\s+.*\bcheck\b(?!s))", source, re.M) \
                and "servingmath.checks" not in source:
            flags.append("the check function was redefined")
            break
    return flags


_OPEN = re.compile(r"Q\d+[^\n]*?\(open\)")
_NEXT_QUESTION = re.compile(r"^\s*(#|\*\*Q\d+)")


def _open_questions(template) -> list[tuple[int, str]]:
    """(cell index, label) of the template's open questions (Markdown "Qn (open). ...")."""
    found = []
    for index, cell in enumerate(template.cells):
        if cell.cell_type == "markdown":
            match = _OPEN.search(cell.source)
            if match:
                line = cell.source[match.start():].splitlines()[0].strip("*# ")
                found.append((index, line[:120]))
    return found


def _open_answers(template, submission) -> dict:
    """Open question label -> what the student wrote for it: the question's cell and those after it,
    up to the next question."""
    answers = {}
    ids = {c.get("id"): i for i, c in enumerate(submission.cells) if c.get("id")}
    for index, label in _open_questions(template):
        start = ids.get(template.cells[index].get("id"))
        if start is None or not _OPEN.search(submission.cells[start].source):
            start = next((i for i, c in enumerate(submission.cells)
                          if c.cell_type == "markdown" and label[:40] in c.source), None)
        if start is None:
            answers[label] = "(the question's cell is not in the submission)"
            continue
        parts = [submission.cells[start].source]
        for cell in submission.cells[start + 1:]:
            if cell.cell_type == "markdown" and (_NEXT_QUESTION.match(cell.source) or _OPEN.search(cell.source)):
                break
            if cell.cell_type == "code" and ANY_CHECK.search(cell.source):
                break
            parts.append(("[code cell]\n" if cell.cell_type == "code" else "") + cell.source)
        answers[label] = "\n\n".join(parts)[:20_000]
    return answers


def _grade_answer(qid: str, record, params: dict):
    """(status, slip) of one captured answer: runs in a child process with a time limit."""
    question = get_question(qid)
    try:
        answer = from_record(record)
    except AnswerError:
        return ["unreadable", ""]
    result = evaluate(question, answer, params=params)
    status = {"invalid": "unreadable"}.get(result.status, result.status)
    return [status, result.slip]


def _chosen_records(records, submission) -> dict:
    """Question id -> the answer checked for it: the last one reported from the question's own check
    cell in the submission, else the last one reported anywhere."""
    own = {}
    for index, qid, _ in check_cells(submission):
        own.setdefault(qid, set()).add(index)
    chosen, from_own = {}, {}
    for record in records:
        if record.get("t") != "capture" or not isinstance(record.get("q"), str):
            continue
        qid = record["q"]
        is_own = record.get("cell") in own.get(qid, ())
        if is_own or not from_own.get(qid):
            chosen[qid] = record.get("a")
            from_own[qid] = from_own.get(qid) or is_own
    return chosen


def _run_status(outcome, limits) -> tuple[str, list[str]]:
    status, flags = "ok", []
    report = outcome.status
    if report is None:
        if outcome.killed == "wall clock":
            return "timed out", [f"the notebook ran longer than {limits.wall_seconds} s in all and was stopped"]
        last = (outcome.stderr_tail.strip().splitlines() or [""])[-1][:200]
        return "failed to run", ["the run stopped before the end (the kernel or its runner was killed)"
                                 + (f": {last}" if last else "")]
    state = str(report.get("state", ""))
    timed = [c for c in report.get("timed_out", []) if isinstance(c, int)]
    if state == "timed out":
        status = "timed out"
        flags.append(f"cell {timed[-1] if timed else '?'} ran longer than {limits.cell_seconds} s and ignored the "
                     "interrupt; the rest did not run")
    elif state == "kernel died":
        status = "failed to run"
        flags.append("the kernel died (it exited, was killed or ran out of memory); answers checked before count")
    elif state != "done":
        status = "failed to run"
        flags.append(state[:200])
    elif timed:
        status = "timed out"
        flags.append(f"cell{'s' * (len(timed) > 1)} {', '.join(map(str, timed[:5]))} ran longer than "
                     f"{limits.cell_seconds} s and {'were' if len(timed) > 1 else 'was'} interrupted")
    errors = [e for e in report.get("errors", []) if isinstance(e, dict) and e.get("cell") not in timed]
    if errors:
        shown = ", ".join(f"cell {e.get('cell')} {str(e.get('ename'))[:40]}" for e in errors[:3])
        flags.append(f"errors in {len({e.get('cell') for e in errors})} cell(s): {shown}"
                     + (", ..." if len(errors) > 3 else ""))
    if outcome.killed == "output too large":
        flags.append("the notebook printed too much; the rest of its output was ignored")
    return status, flags


@dataclass
class _Job:
    student: str
    path: Path
    data: bytes
    submission: object
    runnable: bytes
    grade: Grade


def _prepare_job(student, path: Path, template, graded: bool) -> _Job:
    grade = Grade(student=student, file=path.name)
    data = b""
    try:
        if path.stat().st_size > MAX_SUBMISSION:
            raise ValueError("larger than 32 MiB")
        data = path.read_bytes()
        submission = nbformat.reads(_decode(data), as_version=4)
        if not isinstance(submission.get("cells"), list):
            raise ValueError("no cells")
        for cell in submission.cells:
            if cell.get("cell_type") not in ("code", "markdown", "raw") or not isinstance(cell.get("source"), str):
                raise ValueError("a cell is malformed")
    except Exception as exc:  # noqa: BLE001 - a corrupt file is a result, not a crash
        grade.status = "not a notebook"
        grade.flags.append(f"could not read it: {type(exc).__name__}")
        grade.sha256 = hashlib.sha256(data).hexdigest()
        return _Job(student, path, data, None, b"", grade)
    grade.sha256 = hashlib.sha256(data).hexdigest()
    grade.flags = _structure_flags(template, submission, graded, student)
    grade.open_answers = _open_answers(template, submission)
    runnable = copy.deepcopy(submission)
    for cell in runnable.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cell.pop("attachments", None)
    runnable.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    return _Job(student, path, data, submission, nbformat.writes(runnable).encode(), grade)


def _finish_job(job: _Job, outcome, template, params_of, limits) -> Grade:
    grade = job.grade
    status, flags = _run_status(outcome, limits)
    grade.status = status
    grade.flags += flags
    records = _chosen_records(outcome.records, job.submission)
    for _, qid, _ in check_cells(template):
        if qid in grade.results:
            continue
        if qid not in records:
            grade.results[qid] = "missing"
            continue
        try:
            result, slip = call_with_time_limit(_grade_answer, qid, records[qid], params_of(qid, job.student),
                                                timeout=ANSWER_SECONDS)
        except AnswerTimeout:
            result, slip = "unreadable", ""
            grade.flags.append(f"checking the answer to {qid} took longer than {ANSWER_SECONDS:g} s")
        except (AnswerError, RuntimeError) as exc:
            result, slip = "unreadable", ""
            grade.flags.append(f"the answer to {qid} could not be checked ({str(exc)[:80]})")
        grade.results[qid] = result
        if slip:
            grade.slips[qid] = slip
        if get_question(qid).kind == "conceptual":
            record = records[qid]
            if isinstance(record, dict) and record.get("kind") == "text" and isinstance(record.get("value"), str):
                grade.open_answers[qid] = record["value"][:20_000]
    return grade


# ---------------------------------------------------------------- the journal
class _Journal:
    """One JSON line per graded student, appended and synced as soon as the grade is known."""

    def __init__(self, out: Path, header: dict, fresh: bool):
        self.path = out / JOURNAL
        self.header = header
        self.entries: dict[str, dict] = {}
        if self.path.exists() and not fresh:
            lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
            try:
                first = json.loads(lines[0]) if lines else None
            except ValueError:
                first = None
            if first != header:
                raise TeacherError(f"{self.path} belongs to another grading run (other template, roster, key or "
                                   "limits): pass --fresh to start again, or another --out")
            for line in lines[1:]:
                with contextlib.suppress(ValueError, TypeError, KeyError):
                    entry = json.loads(line)
                    self.entries[student_id(entry["student"])] = entry
        else:
            _atomic_write(self.path, json.dumps(header) + "\n")
        self.handle = self.path.open("a", encoding="utf-8")
        if self.path.stat().st_size and not self.path.read_bytes().endswith(b"\n"):
            self.handle.write("\n")      # a line torn by a crash stays alone on its line
            self.handle.flush()
        import fcntl

        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.handle.close()
            raise TeacherError(f"another grader is writing {out} now") from None

    def done(self, student: str, sha256: str):
        entry = self.entries.get(student_id(student))
        if entry and entry.get("sha256") == sha256:
            return Grade(**{k: v for k, v in entry["grade"].items() if k in Grade.__dataclass_fields__})
        return None

    def record(self, grade: Grade) -> None:
        entry = {"student": grade.student, "sha256": grade.sha256, "grade": asdict(grade)}
        self.handle.write(json.dumps(entry) + "\n")
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.entries[student_id(grade.student)] = entry

    def close(self):
        self.handle.close()


# ---------------------------------------------------------------- the whole folder
def _submissions(folder: Path):
    """(student name, path) of every notebook in ``folder`` (any case of .ipynb), names in NFC."""
    if not folder.exists():
        raise TeacherError(f"submissions folder {folder} does not exist")
    if not folder.is_dir():
        raise TeacherError(f"submissions {folder} is not a folder")
    found, skipped = [], []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.suffix.lower() != ".ipynb" or not entry.is_file() or entry.is_symlink():
            continue
        if entry.name.startswith("."):
            skipped.append(entry.name)
            continue
        found.append((unicodedata.normalize("NFC", entry.stem).strip(), entry))
    if not found:
        raise TeacherError(f"no notebooks (.ipynb) in {folder}" + (f" (hidden files skipped: {', '.join(skipped)})"
                                                                  if skipped else ""))
    return found


def _check_chapter(template_path, template, files) -> None:
    wanted = {qid for _, qid, _ in check_cells(template)}
    readable, overlap, theirs = 0, 0, set()
    for _, path in files[:50]:
        try:
            if path.stat().st_size > MAX_SUBMISSION:
                continue
            nb = json.loads(_decode(path.read_bytes()))
            ids = {q for c in nb.get("cells", []) if c.get("cell_type") == "code"
                   for q in ANY_CHECK.findall("".join(c.get("source", "")))}
        except Exception:  # noqa: BLE001 - unreadable files are graded as such later
            continue
        if ids:
            readable += 1
            overlap += bool(ids & wanted)
            theirs |= ids
    if readable and not overlap:
        mine = ", ".join(sorted({q.split(".")[0] + ".*" for q in wanted}))
        prefixes = ", ".join(sorted({q.split(".")[0] + ".*" for q in theirs}))
        raise TeacherError(f"none of the {readable} readable submissions answers the questions of "
                           f"{Path(template_path).name} ({mine}); they check {prefixes}: pass the template they "
                           "were handed out from")


def _write_outputs(out: Path, template_name: str, qids: list, grades: list, isolation_text: str,
                   open_labels: list) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student", "file", "status", "score", "out_of", *qids, "known_slips", "flags"])
    for g in grades:
        slips = "; ".join(f"{q}: {s}" for q, s in g.slips.items())
        writer.writerow([csv_cell(x) for x in [g.student, g.file, g.status, g.score, len(qids),
                                               *[g.results.get(q, "missing") for q in qids], slips,
                                               "; ".join(g.flags)]])
    _atomic_write(out / "scores.csv", buffer.getvalue())

    roster_rows = [g for g in grades if g.status not in ("not on the roster", "duplicate submissions")]
    missing = [g for g in grades if g.status == "no submission"]
    submitted = [g for g in grades if g.status not in _NOT_GRADED]
    stray = [g for g in grades if g.status in ("not on the roster", "duplicate submissions")]
    lines = [f"# Grades for {md_cell(template_name)}", "", f"Isolation: {md_cell(isolation_text)}", "",
             f"{len(roster_rows)} students; {len(submitted)} submissions graded, {len(missing)} missing"
             + (f", {len(stray)} files not graded (not on the roster or duplicated)" if stray else "")
             + f"; {len(qids)} questions.", "",
             "| student | status | score | known slips | flags |", "|---|---|---|---|---|"]
    for g in grades:
        if g.status in _NOT_GRADED:
            continue
        slips = "; ".join(f"{q}: {s}" for q, s in g.slips.items())
        lines.append(f"| {md_cell(g.student)} | {md_cell(g.status)} | {g.score}/{len(qids)} | {md_cell(slips)} | "
                     f"{md_cell('; '.join(g.flags))} |")
    if missing:
        lines += ["", f"## Missing submissions ({len(missing)})", ""] + [f"- {md_cell(g.student)}" for g in missing]
    if stray:
        lines += ["", f"## Files not graded ({len(stray)})", ""]
        lines += [f"- {md_cell(g.file or g.student)}: {md_cell(g.status)}; {md_cell('; '.join(g.flags))}" for g in stray]
    lines += ["", "## Questions (of the submissions graded)", "", "| question | correct | not yet | of |",
              "|---|---|---|---|"]
    for q in qids:
        right = sum(g.results.get(q) == "correct" for g in submitted)
        wrong = sum(g.results.get(q) in ("incorrect", "unreadable") for g in submitted)
        lines.append(f"| {md_cell(q)} | {right} | {wrong} | {len(submitted)} |")
    conceptual = [q for q in qids if get_question(q).kind == "conceptual"]
    if open_labels or conceptual:
        lines += ["", "## Open questions to read", "",
                  "Not graded by the checker (open questions), or graded by key points only (paragraphs): read "
                  "them in open_answers.md.", ""]
        lines += [f"- {md_cell(label)}" for label in open_labels]
        lines += [f"- {md_cell(q)} (paragraph, checked by key points)" for q in conceptual]
    _atomic_write(out / "summary.md", "\n".join(lines) + "\n")

    parts = [f"# Open answers for {md_cell(template_name)}", "",
             "Each student's text as submitted (shown as plain text, never run).", ""]
    for label in list(open_labels) + conceptual:
        parts += [f"## {md_cell(label)}", ""]
        for g in submitted:
            parts += [f"### {md_cell(g.student)}", "", _fence(str(g.open_answers.get(label, "(no answer)"))), ""]
    _atomic_write(out / "open_answers.md", "\n".join(parts) + "\n")


def grade_folder(template_path, submissions_dir, out_dir, roster=None, key: bytes | None = None, *,
                 no_variants: bool = False, limits=None, isolation: str = "auto", jobs: int = 1,
                 fresh: bool = False, progress=None, warn=None, hide=()) -> list[Grade]:
    """Grade every notebook in ``submissions_dir``; write scores.csv, summary.md and open_answers.md.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Parameters
    ----------
    template_path : path
        The exercise notebook the hand-outs were made from.
    submissions_dir, out_dir : path
    roster : path, optional
        ``roster.csv`` written by :func:`make_assignment`; needed (with ``key``) for a set whose
        questions have variants, unless ``no_variants`` says every student got the book's numbers.
    key : bytes, optional
        The course key.
    limits : servingmath.sandbox.Limits, optional
    isolation : {"auto", "bwrap", "unshare", "uid", "none"}
    jobs : int
        Submissions run at once.
    fresh : bool
        Ignore (and replace) a journal left in ``out_dir`` by an earlier run.
    hide : list of path
        More folders the submissions must not see (the key file's, for one).
    progress, warn : callable, optional
        Called with each Grade as it is known, and with each warning line.

    Raises
    ------
    TeacherError
        For a mistake in the inputs, before anything is graded.
    """
    from .sandbox import Limits, detect_isolation, run_notebook, stop_all

    limits = limits or Limits()
    warn = warn or (lambda text: print(text, file=sys.stderr))
    template_path, submissions_dir, out = Path(template_path), Path(submissions_dir), Path(out_dir)
    template = _read_template(template_path)
    qids = [qid for _, qid, _ in check_cells(template)]
    has_variants = any(get_question(q).variants for q in qids)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise TeacherError(f"jobs must be a whole number >= 1, got {jobs!r}")
    if roster is not None and no_variants:
        raise TeacherError("--no-variants grades everyone on the book's numbers: leave out --roster")
    if roster is None and key is not None:
        raise TeacherError("a course key without --roster: pass the roster.csv that make wrote")
    if roster is not None and key is None:
        raise TeacherError("--roster needs the course key it was made with (--key-file)")
    if roster is None and has_variants and not no_variants:
        raise TeacherError(f"{template_path.name} has questions with per-student variants: pass --roster and "
                           "--key-file (the ones make used), or --no-variants if you handed out the plain "
                           "exercise notebook and everyone answered the book's numbers")
    students = read_roster(roster, template_path.name, key) if roster is not None else None
    files = _submissions(submissions_dir)
    out_resolved, subs_resolved = out.resolve(), submissions_dir.resolve()
    if out_resolved == subs_resolved or subs_resolved in out_resolved.parents:
        raise TeacherError(f"the output folder {out} must not be inside the submissions folder {submissions_dir}")
    _check_chapter(template_path, template, files)
    out.mkdir(parents=True, exist_ok=True)

    hide = [str(Path(p).parent if Path(p).is_file() else p)
            for p in (template_path.parent, submissions_dir, out, roster and Path(roster).parent, *hide) if p]
    chosen = detect_isolation(isolation, hide=hide, limits=limits)
    for line in chosen.banner().splitlines():
        warn(line)

    def params_of(qid, student):
        question = get_question(qid)
        return question.draw_for(key, student) if key is not None else question.draw(None)

    header = {"journal": 1, "template": template_path.name,
              "template_sha256": hashlib.sha256(template_path.read_bytes()).hexdigest(),
              "roster": sorted(student_id(s) for s in students) if students is not None else None,
              "key_check": key_check(key) if key is not None else None, "cell_seconds": limits.cell_seconds,
              "wall_seconds": limits.wall_seconds, "memory_bytes": limits.memory_bytes}
    journal = _Journal(out, header, fresh)
    try:
        by_student: dict[str, list] = {}
        names = {}
        for name, path in files:
            by_student.setdefault(student_id(name), []).append(path)
            names.setdefault(student_id(name), name)
        roster_ids = {student_id(s): s for s in students} if students is not None else None
        grades: dict[str, Grade] = {}
        todo: list[_Job] = []
        for ident, paths in by_student.items():
            display = roster_ids.get(ident, names[ident]) if roster_ids else names[ident]
            if roster_ids is not None and ident not in roster_ids:
                grades[ident] = Grade(student=display, status="not on the roster", file=paths[0].name,
                                      results={q: "missing" for q in qids},
                                      flags=[f"{p.name} matches no student of the roster" for p in paths])
                continue
            if len(paths) > 1:
                grades[ident] = Grade(student=display, status="duplicate submissions", file=paths[0].name,
                                      results={q: "missing" for q in qids},
                                      flags=[f"{len(paths)} files for one student: {', '.join(p.name for p in paths)}; "
                                             "keep one and grade again"])
                continue
            job = _prepare_job(display, paths[0], template, graded=key is not None)
            previous = journal.done(display, job.grade.sha256)
            if previous is not None:
                grades[ident] = previous
                if progress:
                    progress(previous)
                continue
            if job.submission is None:
                job.grade.results = {q: "missing" for q in qids}
                journal.record(job.grade)
                grades[ident] = job.grade
                if progress:
                    progress(job.grade)
                continue
            todo.append(job)
        uids = [None] * jobs if chosen.uid is None else [chosen.uid + i for i in range(jobs)]
        free, lock = list(uids), threading.Lock()

        def run(job):
            with lock:
                uid = free.pop()
            try:
                from .sandbox import Isolation

                slot = Isolation(level=chosen.level, root=chosen.root, uid=uid)
                return run_notebook(job.runnable, slot, limits, hide=hide)
            finally:
                with lock:
                    free.append(uid)

        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(run, job): job for job in todo}
            try:
                for future in concurrent.futures.as_completed(futures):
                    job = futures[future]
                    try:
                        grade = _finish_job(job, future.result(), template, params_of, limits)
                    except Exception as exc:  # noqa: BLE001 - never lose the other students' grades
                        grade = job.grade
                        grade.status = "grader error"
                        grade.flags.append(f"{type(exc).__name__}: {exc}"[:300])
                        grade.results = {q: grade.results.get(q, "missing") for q in qids}
                    journal.record(grade)
                    grades[student_id(job.student)] = grade
                    if progress:
                        progress(grade)
            except BaseException:
                for future in futures:
                    future.cancel()
                stop_all()
                raise
        if roster_ids is not None:
            for ident, name in roster_ids.items():
                if ident not in grades:
                    grades[ident] = Grade(student=name, status="no submission", results={q: "missing" for q in qids})
        order = ([student_id(s) for s in students] if students is not None else []) + sorted(
            i for i in grades if roster_ids is None or i not in roster_ids)
        result = [grades[i] for i in order if i in grades]
        _write_outputs(out, template_path.name, qids, result,
                       f"{chosen.level} ({chosen.description})" + (f". {chosen.warning}" if chosen.warning else ""),
                       [label for _, label in _open_questions(template)])
        return result
    finally:
        journal.close()


# ---------------------------------------------------------------- command line
def main(argv=None) -> int:
    """The command line, ``python -m servingmath.assignments make|grade ...`` (TEACHING.md); the exit status.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """
    parser = argparse.ArgumentParser(prog="python -m servingmath.assignments", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("make", help="write one graded hand-out per student and roster.csv")
    make.add_argument("template", type=Path, help="an exercise notebook, e.g. exercises/01_....ipynb")
    make.add_argument("--students", required=True, help="comma-separated names, or @file with one per line")
    make.add_argument("--key-file", type=Path, help="the course key (created if it does not exist)")
    make.add_argument("--key", help="the course key as text (prefer --key-file: text shows in your shell history)")
    make.add_argument("--out", type=Path, required=True)
    grade = sub.add_parser("grade", help="grade a folder of submitted notebooks")
    grade.add_argument("template", type=Path)
    grade.add_argument("--submissions", type=Path, required=True)
    grade.add_argument("--roster", type=Path, help="roster.csv written by make")
    grade.add_argument("--key-file", type=Path, help="the course key make used")
    grade.add_argument("--key", help="the course key as text")
    grade.add_argument("--no-variants", action="store_true",
                       help="everyone answered the book's own numbers (the plain exercise notebook was handed out)")
    grade.add_argument("--out", type=Path, required=True)
    grade.add_argument("--timeout", type=int, default=60, help="seconds per cell (default 60)")
    grade.add_argument("--total-timeout", type=int, help="seconds per notebook in all (default 10 x --timeout, "
                                                         "at least 300)")
    grade.add_argument("--memory", type=int, default=4096, help="MiB of memory per submission (default 4096)")
    grade.add_argument("--isolation", default="auto", choices=["auto", "bwrap", "unshare", "uid", "none"],
                       help="how to isolate submissions (default: the strongest that works here)")
    grade.add_argument("--jobs", type=int, default=1, help="submissions graded at once (default 1)")
    grade.add_argument("--fresh", action="store_true", help="ignore the journal of an earlier run in --out")
    args = parser.parse_args(argv)

    def stop(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        if args.command == "make":
            students = args.students
            if students.startswith("@"):
                source = Path(students[1:])
                if not source.is_file():
                    raise TeacherError(f"students file {source} does not exist")
                students = _decode(source.read_bytes())
            key = read_key(args.key, args.key_file, create=True)
            roster = make_assignment(args.template, students, key, args.out)
            count = len(_split_names(students))
            print(f"wrote {count} notebooks and {roster}")
            return 0
        from .sandbox import Limits

        if args.timeout < 1 or args.memory < 256 or args.jobs < 1:
            raise TeacherError("--timeout must be >= 1 s, --memory >= 256 MiB and --jobs >= 1")
        total = args.total_timeout or max(300, 10 * args.timeout)
        limits = Limits(cell_seconds=args.timeout, wall_seconds=total, cpu_seconds=total,
                        memory_bytes=args.memory * 2**20)
        key = None
        if args.roster is not None and args.key is None and args.key_file is None:
            raise TeacherError("--roster needs the course key it was made with (--key-file)")
        if args.roster is not None or args.key is not None or args.key_file is not None:
            if args.roster is None:
                raise TeacherError("a course key without --roster: pass the roster.csv that make wrote")
            key = read_key(args.key, args.key_file)
        grades = grade_folder(args.template, args.submissions, args.out, args.roster, key,
                              no_variants=args.no_variants, limits=limits, isolation=args.isolation,
                              jobs=args.jobs, fresh=args.fresh, hide=[args.key_file] if args.key_file else [],
                              progress=lambda g: print(f"{g.student}: {g.status}, {g.score} correct"
                                                       + (f" [{'; '.join(g.flags)}]" if g.flags else ""),
                                                       flush=True))
        print(f"wrote {args.out / 'scores.csv'}, {args.out / 'summary.md'} and {args.out / 'open_answers.md'} "
              f"({len(grades)} students)")
        return 0
    except TeacherError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:     # no isolation level works
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: the grades done so far are in the journal; run the same command again to continue",
              file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
