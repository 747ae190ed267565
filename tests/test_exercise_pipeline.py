"""exercises/ is exactly what the generator makes from solutions/, holds no solution code,
and the generator never overwrites a student's edits unless forced."""

from __future__ import annotations

import io
import json
import re
import shutil

import nbformat
import pytest

from conftest import ROOT, load_tool

gen = load_tool("make_exercises")


SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))


@pytest.mark.parametrize("source", SOLUTIONS, ids=lambda p: p.name)
def test_exercises_are_in_sync_with_solutions(source):
    """In sync, or a student's own work (reported as a skip, with its reason); stale fails."""
    state, message, ok = gen.check_exercise(source, ROOT / "exercises" / source.name)
    if ok and state != "in sync":
        pytest.skip(message.replace(str(ROOT) + "/", ""))
    assert ok, message.replace(str(ROOT) + "/", "")


def test_no_exercise_without_a_solutions_notebook():
    out = io.StringIO()
    gen.generate(ROOT / "solutions", ROOT / "exercises", check=True, out=out, student_work=True)
    assert "has no source" not in out.getvalue(), out.getvalue()


def test_no_solution_line_survives_in_the_exercises():
    region = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
    checked = 0
    for source in sorted((ROOT / "solutions").glob("*.ipynb")):
        solution = nbformat.read(source, as_version=4)
        exercise = nbformat.read(ROOT / "exercises" / source.name, as_version=4)
        assert len(solution.cells) + 1 == len(exercise.cells)      # + the running-score cell
        scores = [c for c in exercise.cells if c.get("id") == "cell-score"]
        assert len(scores) == 1 and "score(" in scores[0].source
        after = exercise.cells[exercise.cells.index(scores[0]) + 1:]   # only generated cells follow it
        assert all(c.get("metadata", {}).get("servingmath", {}).get("generated") for c in after)
        for s_cell, e_cell in zip(solution.cells, exercise.cells):
            outside = region.sub("", s_cell.source)
            for body in region.findall(s_cell.source):
                for line in (l.strip() for l in body.splitlines()):
                    if len(line) > 12 and line not in outside:
                        assert line not in e_cell.source, f"{source.name}: {line!r} leaked"
                        checked += 1
    assert checked > 0


def _tiny_solution(folder):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("Q1. <!-- BEGIN SOLUTION -->It is 42.<!-- END SOLUTION -->"),
        nbformat.v4.new_code_cell("answer = ...  # your answer\n### BEGIN SOLUTION\nanswer = 6 * 7\n"
                                  "### END SOLUTION\nprint(answer)"),
        nbformat.v4.new_code_cell("### BEGIN SOLUTION\nsecret = 1\n### END SOLUTION"),
    ]
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="42\n")]
    folder.mkdir()
    nbformat.write(nb, folder / "01_demo.ipynb")


def test_generator_strips_regions_clears_outputs_and_keeps_placeholders(tmp_path):
    _tiny_solution(tmp_path / "solutions")
    assert gen.generate(tmp_path / "solutions", tmp_path / "exercises", out=io.StringIO()) == 0
    nb = nbformat.read(tmp_path / "exercises" / "01_demo.ipynb", as_version=4)
    assert nb.cells[0].source == "Q1. *Write your answer here.*"
    assert nb.cells[1].source == "answer = ...  # your answer\nprint(answer)"
    assert nb.cells[1].outputs == []
    assert nb.cells[2].source == "# YOUR CODE HERE"


def test_generator_refuses_to_overwrite_a_students_edits_unless_forced(tmp_path):
    _tiny_solution(tmp_path / "solutions")
    gen.generate(tmp_path / "solutions", tmp_path / "exercises", out=io.StringIO())
    target = tmp_path / "exercises" / "01_demo.ipynb"
    nb = nbformat.read(target, as_version=4)
    nb.cells[1].source = "answer = 41  # my work"
    nbformat.write(nb, target)
    edited = target.read_text()
    # the author changes the source: the student's notebook must survive a regeneration
    sol = nbformat.read(tmp_path / "solutions" / "01_demo.ipynb", as_version=4)
    sol.cells.append(nbformat.v4.new_markdown_cell("New question."))
    nbformat.write(sol, tmp_path / "solutions" / "01_demo.ipynb")
    out = io.StringIO()
    assert gen.generate(tmp_path / "solutions", tmp_path / "exercises", out=out) == 2
    assert "NOT overwritten" in out.getvalue() and "--force" in out.getvalue()
    assert target.read_text() == edited
    assert gen.generate(tmp_path / "solutions", tmp_path / "exercises", force=True, out=io.StringIO()) == 0
    assert "New question." in target.read_text()


def test_an_unedited_stale_exercise_is_refreshed(tmp_path):
    _tiny_solution(tmp_path / "solutions")
    gen.generate(tmp_path / "solutions", tmp_path / "exercises", out=io.StringIO())
    sol = nbformat.read(tmp_path / "solutions" / "01_demo.ipynb", as_version=4)
    sol.cells.append(nbformat.v4.new_markdown_cell("Another."))
    nbformat.write(sol, tmp_path / "solutions" / "01_demo.ipynb")
    assert gen.generate(tmp_path / "solutions", tmp_path / "exercises", out=io.StringIO()) == 0
    assert "Another." in (tmp_path / "exercises" / "01_demo.ipynb").read_text()


def test_check_mode_reports_missing_stale_and_orphaned(tmp_path):
    _tiny_solution(tmp_path / "solutions")
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / "99_orphan.ipynb").write_text("{}")
    out = io.StringIO()
    assert gen.generate(tmp_path / "solutions", tmp_path / "exercises", check=True, out=out) == 1
    assert "missing" in out.getvalue() and "no source" in out.getvalue()


def test_unmatched_markers_are_an_error():
    with pytest.raises(gen.SolutionMarkerError, match="unmatched"):
        gen.strip_code("### BEGIN SOLUTION\nx = 1\n", "demo")
    with pytest.raises(gen.SolutionMarkerError, match="unmatched"):
        gen.strip_markdown("<!-- BEGIN SOLUTION --> x", "demo")


# --------------------------------------------------------------------------- doing the exercises in place

def _generated(tmp_path):
    _tiny_solution(tmp_path / "solutions")
    assert gen.generate(tmp_path / "solutions", tmp_path / "exercises", out=io.StringIO()) == 0
    return tmp_path / "solutions" / "01_demo.ipynb", tmp_path / "exercises" / "01_demo.ipynb"


def _check(tmp_path, student_work):
    out = io.StringIO()
    status = gen.generate(tmp_path / "solutions", tmp_path / "exercises", check=True, out=out,
                          student_work=student_work)
    return status, out.getvalue()


def _answer(target, text="answer = 42"):
    nb = nbformat.read(target, as_version=4)
    nb.cells[1].source = text
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="42\n")]
    nb.cells[1].execution_count = 1
    nbformat.write(nb, target)


def test_a_students_answers_are_edited_by_you_left_alone(tmp_path, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    source, target = _generated(tmp_path)
    _answer(target)
    status, text = _check(tmp_path, student_work=True)
    assert status == 0 and "01_demo.ipynb: edited by you, left alone" in text
    assert gen.check_exercise(source, target, student_work=True)[:1] == ("edited",)
    assert gen.student_notebooks(tmp_path / "solutions", tmp_path / "exercises") == {target: "edited"}


def test_a_run_without_edits_is_left_alone_too(tmp_path):
    """Jupyter saved outputs, counts and the kernel's language_info; the sources are the generator's."""
    _, target = _generated(tmp_path)
    nb = json.loads(target.read_text())
    nb["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["Ellipsis\n"]}]
    nb["cells"][1]["execution_count"] = 1
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.12.3"}
    target.write_text(json.dumps(nb, indent=1))
    status, text = _check(tmp_path, student_work=True)
    assert status == 0 and "run (its outputs are saved) by you, left alone" in text


def test_a_stale_exercise_fails_and_names_a_command_that_works(tmp_path):
    source, target = _generated(tmp_path)
    sol = nbformat.read(source, as_version=4)
    sol.cells.append(nbformat.v4.new_markdown_cell("A new question."))
    nbformat.write(sol, source)
    status, text = _check(tmp_path, student_work=True)    # a student's machine: still a failure
    assert status == 1 and "out of sync" in text and "not regenerated" in text
    assert "make exercises" in text and ".venv/bin/python tools/make_exercises.py" in text
    # and the command it names does fix it
    assert gen.main(["--solutions", str(tmp_path / "solutions"), "--exercises", str(tmp_path / "exercises")]) == 0
    assert _check(tmp_path, student_work=True) == (0, "")


def test_a_stale_exercise_that_was_also_run_still_fails(tmp_path):
    source, target = _generated(tmp_path)
    sol = nbformat.read(source, as_version=4)
    sol.cells[0].source = "Q1 reworded. <!-- BEGIN SOLUTION -->42<!-- END SOLUTION -->"
    nbformat.write(sol, source)
    nb = json.loads(target.read_text())
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.12.3"}
    target.write_text(json.dumps(nb, indent=1))
    status, text = _check(tmp_path, student_work=True)
    assert status == 1 and "out of sync" in text


def test_under_ci_every_difference_fails(tmp_path, monkeypatch):
    _, target = _generated(tmp_path)
    _answer(target)
    status, text = _check(tmp_path, student_work=False)
    assert status == 1 and "under CI" in text and "edited since it was generated" in text
    monkeypatch.setenv("CI", "true")
    assert not gen.student_work_allowed()
    assert gen.generate(tmp_path / "solutions", tmp_path / "exercises", check=True, out=io.StringIO()) == 1
    assert gen.student_notebooks(tmp_path / "solutions", tmp_path / "exercises") == {}
    monkeypatch.delenv("CI")
    assert gen.student_work_allowed()
    assert gen.student_notebooks(tmp_path / "solutions", tmp_path / "exercises") == {target: "edited"}


def test_student_work_is_listed_for_the_test_command(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("CI", raising=False)
    _, target = _generated(tmp_path)
    args = ["--solutions", str(tmp_path / "solutions"), "--exercises", str(tmp_path / "exercises"),
            "--student-work"]
    assert gen.main(args) == 0 and capsys.readouterr().out == ""
    _answer(target)
    assert gen.main(args) == 0 and capsys.readouterr().out.strip() == f"edited\t{target}"
