"""Generate the student notebooks in exercises/ from the single source in solutions/.

    python tools/make_exercises.py            # write exercises/ (refuses to overwrite edited ones)
    python tools/make_exercises.py --force    # overwrite even notebooks a student has edited
    python tools/make_exercises.py --check    # exit 1 if exercises/ is out of sync (used by the tests)
    python tools/make_exercises.py --student-work   # list the exercise notebooks a student has changed
    make exercises                            # the same as the first line, after setting up .venv

Solution regions use nbgrader's markers: in code cells the lines from
``### BEGIN SOLUTION`` to ``### END SOLUTION`` are removed (the placeholder
line the author writes above the region, ``answer = ...``, stays); in Markdown
cells ``<!-- BEGIN SOLUTION -->`` ... ``<!-- END SOLUTION -->`` becomes
"*Write your answer here.*". Outputs are cleared. A last cell is added that
shows the running score of the notebook's checks ("7 of 12 correct"),
:func:`servingmath.checks.score` (the solutions do not need it: every check
there is correct, or the test fails).

Nothing a student wrote is lost: each generated notebook records a hash of
the content the generator wrote. If the notebook on disk no longer matches
its hash, a student has edited it, and the generator leaves it alone and says
so, unless ``--force`` is given.

Doing the exercises in place is expected, so ``--check`` (and the test command) tells a
student's work from an author's mistake: a notebook whose sources changed since it was
generated is *edited by you, left alone*, one whose sources did not change but which stores
outputs is *run by you, left alone*; neither fails. A notebook that is still exactly what the
generator wrote, but from an older solutions notebook, is *stale*: that fails. Under CI
(the environment variable ``CI`` set, as CI services do) no notebook is anybody's work, and every
difference fails.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
REGENERATE = "make exercises (or .venv/bin/python tools/make_exercises.py)"
CODE_REGION = re.compile(r"^[ \t]*### BEGIN SOLUTION[ \t]*\n.*?^[ \t]*### END SOLUTION[ \t]*(\n|$)", re.S | re.M)
MARKDOWN_REGION = re.compile(r"<!-- BEGIN SOLUTION -->.*?<!-- END SOLUTION -->", re.S)
MARKDOWN_PLACEHOLDER = "*Write your answer here.*"
CODE_PLACEHOLDER = "# YOUR CODE HERE"
CHECK_ID = re.compile(r"""check\(\s*["']([\w.]+)["']""")
SCORE_CELL_ID = "cell-score"


class SolutionMarkerError(ValueError):
    """A BEGIN marker without its END (or the reverse)."""


def strip_code(source: str, where: str) -> str:
    stripped = CODE_REGION.sub("", source)
    if "### BEGIN SOLUTION" in stripped or "### END SOLUTION" in stripped:
        raise SolutionMarkerError(f"{where}: unmatched ### BEGIN/END SOLUTION marker")
    if source != stripped and not stripped.strip():
        return CODE_PLACEHOLDER
    return stripped.rstrip("\n")


def strip_markdown(source: str, where: str) -> str:
    stripped = MARKDOWN_REGION.sub(MARKDOWN_PLACEHOLDER, source)
    if "BEGIN SOLUTION" in stripped or "END SOLUTION" in stripped:
        raise SolutionMarkerError(f"{where}: unmatched <!-- BEGIN/END SOLUTION --> marker")
    return stripped


def content_hash(nb) -> str:
    """Hash of what a student could edit: cell types and sources, in order."""
    cells = [(c["cell_type"], c["source"] if isinstance(c["source"], str) else "".join(c["source"]))
             for c in nb["cells"]]
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()


def score_cell(nb) -> nbformat.NotebookNode | None:
    """The running score of an exercise notebook's checks, after its last question (None without checks)."""
    ids = list(dict.fromkeys(q for c in nb.cells if c.cell_type == "code" for q in CHECK_ID.findall(c.source)))
    if not ids:
        return None
    prefixes = {q.split(".")[0] for q in ids}
    what = repr(prefixes.pop()) if len(prefixes) == 1 else repr(ids)
    cell = nbformat.v4.new_code_cell("# Your running score: run this cell after the checks above.\n"
                                     f"from servingmath.checks import score\nscore({what})")
    cell["id"] = SCORE_CELL_ID
    return cell


def make_exercise(solution_path: Path) -> nbformat.NotebookNode:
    """The student version of one solutions notebook, with the running score as its last cell."""
    nb = nbformat.read(solution_path, as_version=4)
    out = copy.deepcopy(nb)
    for index, cell in enumerate(out.cells):
        where = f"{solution_path.name} cell {index}"
        if cell.cell_type == "code":
            cell.source = strip_code(cell.source, where)
            cell.outputs = []
            cell.execution_count = None
        elif cell.cell_type == "markdown":
            cell.source = strip_markdown(cell.source, where)
        cell.metadata.pop("execution", None)
    final = score_cell(out)
    if final is not None:
        # the score goes after the last question, before the generated cells that end the notebook
        # (the library back-links and the previous/next links, tools/backlinks.py and navigation.py)
        tail = len(out.cells)
        while tail and out.cells[tail - 1].get("metadata", {}).get("servingmath", {}).get("generated"):
            tail -= 1
        out.cells.insert(tail, final)
    out.metadata["servingmath"] = {
        "generated_from": f"solutions/{solution_path.name}",
        "note": "Generated by tools/make_exercises.py; edit solutions/ instead.",
        "content_sha256": content_hash(out),
    }
    return out


def is_edited(existing) -> bool:
    """True when a notebook no longer matches the hash the generator stored."""
    stored = existing.get("metadata", {}).get("servingmath", {}).get("content_sha256")
    return stored is None or stored != content_hash(existing)


def dumps(nb) -> str:
    return nbformat.writes(nb) + "\n"


def student_work_allowed(environ=None) -> bool:
    """Whether a changed exercise notebook may be a student's work (everywhere but under CI)."""
    return not (os.environ if environ is None else environ).get("CI")


def _skeleton(nb) -> str:
    """What a run in Jupyter leaves alone: versions, kernelspec, our metadata, each cell but its outputs."""
    cells = [(c.get("id"), c.get("cell_type"),
              c["source"] if isinstance(c.get("source"), str) else "".join(c.get("source", [])),
              c.get("metadata", {}).get("tags", []), c.get("attachments") or {}) for c in nb.get("cells", [])]
    meta = nb.get("metadata", {})
    return json.dumps([nb.get("nbformat"), nb.get("nbformat_minor"), meta.get("kernelspec"),
                       meta.get("servingmath"), cells], sort_keys=True)


def exercise_state(target: Path, expected_text: str) -> str:
    """How ``target`` compares with the notebook the generator would write now.

    ``"in sync"`` (the same bytes), ``"missing"``, ``"edited"`` (its sources changed since it
    was generated: :func:`is_edited`, a student's work), ``"run"`` (its sources did not change,
    but it stores what a run in Jupyter adds: outputs, counts, kernel metadata) or ``"stale"``
    (what the generator wrote from an older solutions notebook, or unreadable).
    """
    if not target.exists():
        return "missing"
    current = target.read_text(encoding="utf-8")
    if current == expected_text:
        return "in sync"
    try:
        notebook = json.loads(current)
    except ValueError:
        return "stale"
    if is_edited(notebook):
        return "edited"
    if _skeleton(notebook) == _skeleton(json.loads(expected_text)):
        return "run"
    return "stale"


def check_exercise(source: Path, target: Path, student_work: bool | None = None) -> tuple[str, str, bool]:
    """(state, message, ok) for the exercise ``target`` generated from the solutions notebook ``source``."""
    student_work = student_work_allowed() if student_work is None else student_work
    state = exercise_state(target, dumps(make_exercise(source)))
    if state == "in sync":
        return state, f"{target}: in sync with {source}", True
    if state == "missing":
        return state, f"{target}: missing (run {REGENERATE})", False
    if state == "stale":
        return state, (f"{target}: out of sync with {source}: the solutions notebook changed and this "
                       f"exercise was not regenerated (run {REGENERATE}, then commit both)"), False
    if student_work:
        did = "edited" if state == "edited" else "run (its outputs are saved)"
        return state, (f"{target}: {did} by you, left alone (not compared with {source}; "
                       "`make exercises` never overwrites it: move it aside for a fresh copy)"), True
    did = "edited since it was generated" if state == "edited" else "stores outputs"
    return state, (f"{target}: {did}; under CI every exercise must be exactly what the generator "
                   f"writes (run {REGENERATE} --force, which replaces edits)"), False


def student_notebooks(solutions: Path, exercises: Path) -> dict[Path, str]:
    """Exercise notebooks a student has edited or run, with that state (none under CI).

    The test command leaves them alone.
    """
    if not student_work_allowed():
        return {}
    found = {}
    for source in sorted(solutions.glob("*.ipynb")):
        target = exercises / source.name
        state, _message, ok = check_exercise(source, target, student_work=True)
        if ok and state in ("edited", "run"):
            found[target] = state
    return found


def generate(solutions: Path, exercises: Path, force: bool = False, check: bool = False,
             out=sys.stdout, student_work: bool | None = None) -> int:
    """Write (or, with ``check``, compare) every exercise notebook. Returns an exit status.

    With ``check``: 0 when every notebook is in sync or is a student's work (see
    :func:`check_exercise`; ``student_work`` None asks :func:`student_work_allowed`), else 1.
    """
    status = 0
    sources = sorted(solutions.glob("*.ipynb"))
    expected_names = {p.name for p in sources}
    if check:
        for extra in sorted(exercises.glob("*.ipynb")):
            if extra.name not in expected_names:
                print(f"{extra}: has no source in {solutions}/", file=out)
                status = 1
        for source in sources:
            state, message, ok = check_exercise(source, exercises / source.name, student_work)
            if state != "in sync":
                print(message, file=out)
            if not ok:
                status = 1
        return status
    exercises.mkdir(parents=True, exist_ok=True)
    for source in sources:
        target = exercises / source.name
        text = dumps(make_exercise(source))
        if target.exists():
            current = target.read_text(encoding="utf-8")
            if current == text:
                continue
            if is_edited(json.loads(current)) and not force:
                print(f"{target}: NOT overwritten: it has been edited since it was generated "
                      "(a student's work?). Move it aside, or re-run with --force "
                      "(make exercises ARGS=--force) to replace it and lose those edits.", file=out)
                status = 2
                continue
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}", file=out)
    return status


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--force", action="store_true", help="overwrite edited exercise notebooks")
    parser.add_argument("--check", action="store_true", help="only report whether exercises/ is in sync")
    parser.add_argument("--student-work", action="store_true",
                        help="print the exercise notebooks a student has edited or run: 'edited|run<TAB>path' a line")
    parser.add_argument("--solutions", type=Path, default=ROOT / "solutions")
    parser.add_argument("--exercises", type=Path, default=ROOT / "exercises")
    args = parser.parse_args(argv)
    if args.student_work:
        for path, state in student_notebooks(args.solutions, args.exercises).items():
            print(f"{state}\t{path}")
        return 0
    return generate(args.solutions, args.exercises, force=args.force, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
