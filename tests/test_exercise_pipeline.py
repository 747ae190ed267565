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


def test_exercises_are_in_sync_with_solutions():
    out = io.StringIO()
    status = gen.generate(ROOT / "solutions", ROOT / "exercises", check=True, out=out)
    assert status == 0, out.getvalue()


def test_no_solution_line_survives_in_the_exercises():
    region = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
    checked = 0
    for source in sorted((ROOT / "solutions").glob("*.ipynb")):
        solution = nbformat.read(source, as_version=4)
        exercise = nbformat.read(ROOT / "exercises" / source.name, as_version=4)
        assert len(solution.cells) + 1 == len(exercise.cells)      # + the running-score cell
        assert exercise.cells[-1].source.endswith(")") and "score(" in exercise.cells[-1].source
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
