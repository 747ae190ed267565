"""Classroom assignments: per-student exercise variants, and a grader that trusts nothing it is sent.

Teachers use it from the command line::

    python -m servingmath.assignments make exercises/01_anatomy_of_a_request.ipynb \\
        --students alice,bob,carol --key "course-2026" --out handout/
    python -m servingmath.assignments grade exercises/01_anatomy_of_a_request.ipynb \\
        --roster handout/roster.csv --submissions collected/ --out grades/ --timeout 120

``make`` writes one notebook per student (``handout/alice.ipynb``) whose first
code cell selects the student's variant (``use_seed(...)``) and whose question
texts show that variant's numbers, plus ``roster.csv`` (student, seed). Seeds
come from the course key and the student's name, so the same command makes the
same handout again.

``grade`` executes each submitted notebook in a fresh kernel in a separate
process with a time limit, reads the values of the answer variables that the
*teacher's* template names, and checks them against answers recomputed from the
*roster's* seed: values stored in the submission, its outputs and its check
cells are never trusted. It writes ``scores.csv`` (one row per student, one
column per question) and ``summary.md``. A notebook that fails to run, runs
forever, or has been tampered with (seed changed, check cells edited, cells
deleted) is reported as such; one bad notebook never stops the others.
"""

from __future__ import annotations

import argparse
import copy
import csv
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .checks import evaluate
from .questions import get_question

__all__ = ["student_seed", "check_cells", "make_variant", "make_assignment", "grade_submission",
           "grade_folder", "main"]

CHECK_CALL = re.compile(r"""^\s*check\(\s*["']([\w.]+)["']\s*,\s*([A-Za-z_]\w*)\s*\)\s*$""", re.M)
SEED_CELL = "from servingmath.checks import use_seed\nuse_seed({seed})  # your variant of the questions: do not change this line"
SEED_LINE = re.compile(r"^use_seed\((\d+)\)", re.M)
ANSWER_MARK = "SERVINGMATH-ANSWERS "


def student_seed(key: str, student: str) -> int:
    """A reproducible seed for ``student`` in the course with secret ``key``."""
    if not student or not isinstance(student, str):
        raise ValueError(f"student must be a non-empty name, got {student!r}")
    return int(hashlib.sha256(f"{key}\0{student}".encode()).hexdigest()[:8], 16)


def check_cells(nb) -> list[tuple[int, str, str]]:
    """(cell index, question id, answer variable) of every ``check("id", variable)`` cell."""
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            for qid, name in CHECK_CALL.findall(cell.source):
                found.append((index, qid, name))
    return found


def make_variant(template_path, seed: int, student: str | None = None):
    """The exercise notebook ``template_path`` as student ``student``'s variant ``seed``."""
    template = nbformat.read(template_path, as_version=4)
    nb = copy.deepcopy(template)
    for index, qid, _ in check_cells(template):
        question = get_question(qid)
        if not question.variants:
            continue
        # the question text is the nearest Markdown cell above the check cell
        for j in range(index - 1, -1, -1):
            if nb.cells[j].cell_type == "markdown":
                heading = nb.cells[j].source.splitlines()[0] if nb.cells[j].source.startswith("#") else ""
                body = question.render(question.draw(seed))
                nb.cells[j].source = (heading + "\n" if heading else "") + body + "\n\n*(your variant)*"
                break
    first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells.insert(first_code + 1, nbformat.v4.new_code_cell(SEED_CELL.format(seed=seed)))
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:03d}"
    nb.metadata["servingmath"] = {"template": Path(template_path).name, "seed": seed,
                                  "student": student or ""}
    return nb


def make_assignment(template_path, students: list[str], key: str, out_dir) -> Path:
    """Write one variant notebook per student and ``roster.csv``; return the roster's path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not students:
        raise ValueError("students must list at least one name")
    if len(set(students)) != len(students):
        raise ValueError("students must be unique")
    rows = []
    for student in students:
        if not re.fullmatch(r"[\w.-]+", student):
            raise ValueError(f"student {student!r}: use letters, digits, '.', '_' or '-' (it names a file)")
        seed = student_seed(key, student)
        nbformat.write(make_variant(template_path, seed, student), out / f"{student}.ipynb")
        rows.append({"student": student, "seed": seed})
    roster = out / "roster.csv"
    with roster.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["student", "seed"])
        writer.writeheader()
        writer.writerows(rows)
    return roster


# ---------------------------------------------------------------- grading
DUMP_CELL = '''
def _servingmath_dump(names):
    import json as _j, numbers as _n
    out = {}
    for qid, name in names.items():
        if name not in globals():
            out[qid] = {"kind": "missing"}
            continue
        v = globals()[name]
        if v is Ellipsis:
            out[qid] = {"kind": "ellipsis"}
        elif type(v).__module__.startswith("sympy"):
            import sympy as _sp
            out[qid] = {"kind": "sympy", "value": _sp.srepr(v)}
        elif isinstance(v, (str, bool)):
            out[qid] = {"kind": "plain", "value": v}
        elif isinstance(v, _n.Number):
            out[qid] = {"kind": "plain", "value": float(v)}
        else:
            try:
                out[qid] = {"kind": "plain", "value": float(v)}
            except Exception:
                out[qid] = {"kind": "other", "value": repr(v)[:200]}
    print("SERVINGMATH-ANSWERS " + _j.dumps(out))
_servingmath_dump({names!r})
'''


@dataclass
class Grade:
    """The grade of one submission."""

    student: str
    seed: int | None
    status: str = "ok"                       # ok | failed to run | timed out | not a notebook
    flags: list = field(default_factory=list)  # tampering and other warnings
    results: dict = field(default_factory=dict)  # question id -> status

    @property
    def score(self) -> int:
        return sum(1 for s in self.results.values() if s == "correct")


def _structure_flags(template, submission, seed: int | None) -> list[str]:
    flags = []
    template_checks = {(qid, name) for _, qid, name in check_cells(template)}
    submitted_checks = {(qid, name) for _, qid, name in check_cells(submission)}
    for qid, name in sorted(template_checks - submitted_checks):
        flags.append(f"check cell for {qid} changed or deleted")
    seeds = [int(s) for c in submission.cells if c.cell_type == "code" for s in SEED_LINE.findall(c.source)]
    if seed is not None and seeds != [seed]:
        flags.append(f"seed changed (roster {seed}, notebook {seeds or 'none'})")
    if len(submission.cells) < len(template.cells) + (1 if seed is not None else 0):
        flags.append(f"cells deleted ({len(submission.cells)} cells, template has "
                     f"{len(template.cells) + (1 if seed is not None else 0)})")
    for cell in submission.cells:
        if cell.cell_type == "code" and re.search(r"^\s*(def\s+check\b|check\s*=|from\s+\S+\s+import\s+.*\bcheck\b(?!s))",
                                                  cell.source, re.M) and "servingmath.checks" not in cell.source:
            flags.append("the check function was redefined")
            break
    return flags


def _execute(path: Path, out: Path, timeout: int) -> tuple[str, str]:
    """Run a notebook in a fresh kernel in a child process; return (status, detail)."""
    code = ("import nbformat, sys\nfrom nbclient import NotebookClient\n"
            "nb = nbformat.read(sys.argv[1], as_version=4)\n"
            "NotebookClient(nb, timeout=int(sys.argv[3]), kernel_name='python3', allow_errors=True, interrupt_on_timeout=True,"
            " resources={'metadata': {'path': sys.argv[4]}}).execute()\n"
            "nbformat.write(nb, sys.argv[2])\n")
    env = {k: v for k, v in os.environ.items() if k != "SERVINGMATH_STRICT_CHECKS"}
    try:
        proc = subprocess.run([sys.executable, "-c", code, str(path), str(out), str(timeout), str(path.parent)],
                              capture_output=True, text=True, timeout=timeout * 2 + 30, env=env)
    except subprocess.TimeoutExpired:
        return "timed out", f"no result within {timeout * 2 + 30} s"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["unknown error"])[-1]
        if "CellTimeoutError" in proc.stderr or "timed out" in last.lower():
            return "timed out", f"a cell ran longer than {timeout} s"
        return "failed to run", last[:300]
    return "ok", ""


def _answers(executed) -> dict | None:
    last = executed.cells[-1]
    for output in last.get("outputs", []):
        if output.get("output_type") == "stream":
            for line in output.get("text", "").splitlines():
                if line.startswith(ANSWER_MARK):
                    return json.loads(line[len(ANSWER_MARK):])
    return None


def _value(entry: dict):
    """Turn a dumped answer back into a Python value. Sympy answers travel as ``srepr``
    text; anything but sympy constructors in it (dunders, imports) is refused."""
    import sympy

    kind = entry.get("kind")
    if kind == "ellipsis":
        return ...
    if kind == "plain":
        return entry["value"]
    if kind == "sympy":
        text = str(entry["value"])
        if "__" in text or "import" in text or "lambda" in text or len(text) > 20_000:
            return None
        names = {k: getattr(sympy, k) for k in dir(sympy) if not k.startswith("_")}
        return eval(text, {"__builtins__": {}}, names)  # noqa: S307 (guarded above)
    return None


def grade_submission(template_path, submission_path, student: str, seed: int | None,
                     timeout: int = 120) -> Grade:
    """Grade one submitted notebook against the teacher's template and the roster's seed."""
    template = nbformat.read(template_path, as_version=4)
    grade = Grade(student=student, seed=seed)
    questions = {qid: name for _, qid, name in check_cells(template)}
    try:
        submission = nbformat.read(submission_path, as_version=4)
    except Exception as exc:  # a corrupt or non-notebook file is a result, not a crash
        grade.status = "not a notebook"
        grade.flags.append(f"could not read: {type(exc).__name__}")
        grade.results = {qid: "missing" for qid in questions}
        return grade
    grade.flags = _structure_flags(template, submission, seed)
    runnable = copy.deepcopy(submission)
    # the grader sets the seed itself, from the roster, before anything the student wrote runs
    runnable.cells.insert(0, nbformat.v4.new_code_cell(
        f"from servingmath.checks import use_seed as _us\n_us({seed!r})"))
    runnable.cells.append(nbformat.v4.new_code_cell(DUMP_CELL.replace("{names!r}", repr(questions))))
    for cell in runnable.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.source = SEED_LINE.sub(f"use_seed({seed})" if seed is not None else "use_seed(None)", cell.source)
    with tempfile.TemporaryDirectory() as scratch:
        src, out = Path(scratch) / "submission.ipynb", Path(scratch) / "executed.ipynb"
        nbformat.write(runnable, src)
        status, detail = _execute(src, out, timeout)
        executed = nbformat.read(out, as_version=4) if status == "ok" else None
        answers = _answers(executed) if executed is not None else None
        if executed is not None:
            names = {o.get("ename") for c in executed.cells if c.cell_type == "code"
                     for o in c.get("outputs", []) if o.get("output_type") == "error"}
            if names & {"CellTimeoutError", "KeyboardInterrupt", "DeadKernelError"}:
                status, detail = "timed out", f"a cell ran longer than {timeout} s and was interrupted"
    if status != "ok":
        grade.status = status
        grade.flags.append(detail)
    if status == "ok" and answers is None:
        grade.status = "failed to run"
        grade.flags.append("the answers could not be read back")
    for qid in questions:
        entry = (answers or {}).get(qid, {"kind": "missing"})
        if entry.get("kind") == "missing":
            grade.results[qid] = "missing"
            continue
        try:
            value = _value(entry)
        except Exception:
            value = None
        result = evaluate(get_question(qid), value, seed=seed if seed is not None else None)
        grade.results[qid] = result.status if result.status != "invalid" else "incorrect"
    return grade


def _read_roster(roster) -> dict[str, int]:
    with Path(roster).open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows or {"student", "seed"} - set(rows[0]):
        raise ValueError(f"roster {roster} must be a CSV with columns student, seed")
    return {r["student"]: int(r["seed"]) for r in rows}


def grade_folder(template_path, submissions_dir, out_dir, roster=None, timeout: int = 120,
                 progress=None) -> list[Grade]:
    """Grade every ``<student>.ipynb`` in ``submissions_dir``; write scores.csv and summary.md."""
    template = nbformat.read(template_path, as_version=4)
    qids = [qid for _, qid, _ in check_cells(template)]
    seeds = _read_roster(roster) if roster else {}
    grades = []
    for path in sorted(Path(submissions_dir).glob("*.ipynb")):
        student = path.stem
        if roster and student not in seeds:
            grade = Grade(student=student, seed=None, status="not on the roster")
            grade.results = {q: "missing" for q in qids}
        else:
            try:
                grade = grade_submission(template_path, path, student, seeds.get(student), timeout)
            except Exception as exc:  # never lose the other students' grades
                grade = Grade(student=student, seed=seeds.get(student), status="grader error",
                              flags=[f"{type(exc).__name__}: {exc}"[:300]],
                              results={q: "missing" for q in qids})
        grades.append(grade)
        if progress:
            progress(grade)
    for student in sorted(set(seeds) - {g.student for g in grades}):
        grades.append(Grade(student=student, seed=seeds[student], status="no submission",
                            results={q: "missing" for q in qids}))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "scores.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "seed", "status", "score", "out_of", *qids, "flags"])
        for g in grades:
            writer.writerow([g.student, g.seed if g.seed is not None else "", g.status, g.score, len(qids),
                             *[g.results.get(q, "missing") for q in qids], "; ".join(g.flags)])
    lines = [f"# Grades for {Path(template_path).name}", "",
             f"{len(grades)} students, {len(qids)} questions.", "",
             "| student | status | score | flags |", "|---|---|---|---|"]
    for g in grades:
        lines.append(f"| {g.student} | {g.status} | {g.score}/{len(qids)} | {'; '.join(g.flags) or '-'} |")
    lines += ["", "| question | correct | of |", "|---|---|---|"]
    for q in qids:
        lines.append(f"| {q} | {sum(g.results.get(q) == 'correct' for g in grades)} | {len(grades)} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    return grades


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servingmath.assignments", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("make", help="write one variant notebook per student and roster.csv")
    make.add_argument("template", type=Path, help="an exercise notebook, e.g. exercises/01_....ipynb")
    make.add_argument("--students", required=True, help="comma-separated names, or @file with one per line")
    make.add_argument("--key", required=True, help="a course secret: seeds derive from it and the name")
    make.add_argument("--out", type=Path, required=True)
    grade = sub.add_parser("grade", help="grade a folder of submitted notebooks")
    grade.add_argument("template", type=Path)
    grade.add_argument("--submissions", type=Path, required=True)
    grade.add_argument("--roster", type=Path, help="roster.csv written by make (omit for the default variant)")
    grade.add_argument("--out", type=Path, required=True)
    grade.add_argument("--timeout", type=int, default=120, help="seconds per cell (default 120)")
    args = parser.parse_args(argv)
    if not args.template.is_file():
        parser.error(f"template {args.template} does not exist")
    if args.command == "make":
        names = (Path(args.students[1:]).read_text().split() if args.students.startswith("@")
                 else [s.strip() for s in args.students.split(",") if s.strip()])
        roster = make_assignment(args.template, names, args.key, args.out)
        print(f"wrote {len(names)} notebooks and {roster}")
        return 0
    grades = grade_folder(args.template, args.submissions, args.out, args.roster, args.timeout,
                          progress=lambda g: print(f"{g.student}: {g.status}, {g.score} correct"
                                                   + (f" [{'; '.join(g.flags)}]" if g.flags else ""), flush=True))
    print(f"wrote {args.out / 'scores.csv'} and {args.out / 'summary.md'} ({len(grades)} students)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
