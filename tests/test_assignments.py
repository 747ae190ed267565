"""Classroom flow: graded hand-outs made from the course key, rosters as spreadsheets leave them, and
grading the plain exercise notebook (the attacks on the grader are in test_grader_attacks.py)."""

from __future__ import annotations

import csv
import json

import nbformat
import pytest

from conftest import ROOT
from servingmath import assignments, checks
from servingmath.questions import get_question

TEMPLATE = ROOT / "exercises" / "01_anatomy_of_a_request.ipynb"
KEY = b"test-course-key"


@pytest.fixture(scope="module")
def handout(tmp_path_factory):
    out = tmp_path_factory.mktemp("handout")
    roster = assignments.make_assignment(TEMPLATE, ["alice", "bob", "carol"], KEY, out)
    return out, roster


def _questions_text(nb):
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def test_each_handout_shows_its_students_variant_and_holds_no_seed_and_no_key(handout):
    out, _ = handout
    alice, bob = (nbformat.read(out / f"{s}.ipynb", as_version=4) for s in ("alice", "bob"))
    assert _questions_text(alice) != _questions_text(bob)
    q = get_question("anatomy.kv_bytes_per_token")
    assert q.render(q.draw_for(KEY, "alice")) in _questions_text(alice)
    for nb in (alice, bob):
        text = json.dumps(nb)
        assert "use_seed" not in text and KEY.decode() not in text and "seed" not in nb.metadata["servingmath"]
        cell = next(c for c in nb.cells if c.get("id") == assignments.HANDOUT_ID)
        assert "graded_handout(" in cell.source
    # the student's code cells are the template's, untouched
    template = nbformat.read(TEMPLATE, as_version=4)
    assert [c.source for c in alice.cells if c.cell_type == "code" and c.get("id") != assignments.HANDOUT_ID] \
        == [c.source for c in template.cells if c.cell_type == "code"]


def test_the_same_key_makes_the_same_handout_again(handout, tmp_path):
    out, _ = handout
    again = assignments.make_assignment(TEMPLATE, ["alice"], KEY, tmp_path)
    assert (tmp_path / "alice.ipynb").read_text() == (out / "alice.ipynb").read_text()
    assignments.make_assignment(TEMPLATE, ["alice"], b"another key", tmp_path / "other")
    assert (tmp_path / "other" / "alice.ipynb").read_text() != (out / "alice.ipynb").read_text()
    assert again.name == "roster.csv"


def test_the_roster_names_the_template_and_a_fingerprint_of_the_key(handout):
    _, roster = handout
    rows = list(csv.DictReader(roster.open()))
    assert [r["student"] for r in rows] == ["alice", "bob", "carol"]
    assert {r["template"] for r in rows} == {TEMPLATE.name}
    assert {r["key_check"] for r in rows} == {assignments.key_check(KEY)}
    assert assignments.key_check(KEY) not in KEY.decode()
    assert assignments.read_roster(roster, TEMPLATE.name, KEY) == ["alice", "bob", "carol"]


def test_a_handouts_check_cells_confirm_the_form_only(monkeypatch):
    q = get_question("anatomy.batch_throughput")
    right = q.expected(q.draw_for(KEY, "alice")) / 1.0
    try:
        checks.graded_handout("alice", TEMPLATE.name)
        messages = {checks.check_form(q, value).message.split(";")[0][:9] for value in (right, right * 3, 7.0)}
        assert messages == {"recorded "}
        assert checks.check_form(q, "12 GB").status == "invalid"        # the form is checked
        assert checks.check_form(q, ...).status == "not attempted"
    finally:
        checks._HANDOUT.clear()


def test_the_course_key_file_is_created_once_and_kept_private(tmp_path):
    path = tmp_path / "keys" / "course.key"
    key = assignments.read_key(key_file=path, create=True)
    assert path.stat().st_mode & 0o777 == 0o600 and len(key) >= 32
    assert assignments.read_key(key_file=path) == key
    with pytest.raises(assignments.TeacherError, match="both"):
        assignments.read_key("x", path)
    with pytest.raises(assignments.TeacherError, match="does not exist"):
        assignments.read_key(key_file=tmp_path / "missing.key")


def test_students_from_a_file_with_a_header_or_one_per_line(tmp_path):
    assert assignments._split_names("\ufeffstudent,template,key_check\nana,t,k\nbea,t,k\n") == ["ana", "bea"]
    assert assignments._split_names("ana\nbea\n\n  carl  \n") == ["ana", "bea", "carl"]
    assert assignments._split_names("ana, bea;carl") == ["ana", "bea", "carl"]


def test_grading_the_plain_exercise_with_no_variants(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    nbformat.write(nbformat.read(TEMPLATE, as_version=4), subs / "zoe.ipynb")
    from servingmath.sandbox import Limits

    (grade,) = assignments.grade_folder(TEMPLATE, subs, tmp_path / "g", no_variants=True,
                                        limits=Limits(cell_seconds=60, wall_seconds=180), warn=lambda line: None)
    assert grade.status == "ok" and grade.score == 0
    assert set(grade.results.values()) == {"not attempted"}
    text = (tmp_path / "g" / "open_answers.md").read_text()
    first_open = next(line for cell in nbformat.read(TEMPLATE, as_version=4).cells for line in cell.source.splitlines()
                      if line.startswith("### ") and "(open)" in line)
    assert first_open[4:].split(".")[0] in text and "*Write your answer here.*" in text
