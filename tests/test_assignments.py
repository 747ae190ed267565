"""Classroom flow end to end: per-student variants, grading of correct, wrong, broken and tampered work."""

from __future__ import annotations

import csv

import nbformat
import pytest
import sympy as sp

from conftest import ROOT
from servingmath import assignments
from servingmath.checks import evaluate, use_seed
from servingmath.questions import get_question
from servingmath.units import UNIT_SCALES

TEMPLATE = ROOT / "exercises" / "01_anatomy_of_a_request.ipynb"


def _answer_source(qid, name, seed, wrong=False):
    q = get_question(qid)
    params = q.draw(seed)
    value = q.mistakes[0].answer(params) if wrong else q.expected(params)
    if q.kind == "symbolic":
        return f"import sympy\n{name} = sympy.sympify({str(value)!r})"
    if q.kind == "choice":
        return f"{name} = {value!r}"
    return f"{name} = {value / UNIT_SCALES[q.unit][0] if q.unit else value!r}"


def _fill(nb, seed, wrong=False):
    nb = nbformat.from_dict(nb)
    for index, qid, name in assignments.check_cells(nb):
        nb.cells[index - 1].source = _answer_source(qid, name, seed, wrong)
    return nb


@pytest.fixture(scope="module")
def handout(tmp_path_factory):
    out = tmp_path_factory.mktemp("handout")
    roster = assignments.make_assignment(TEMPLATE, ["alice", "bob", "carol", "dave", "erin"], "test-key", out)
    return out, roster


def test_two_seeds_give_different_numbers_and_the_seed_is_recorded(handout):
    out, _ = handout
    alice, bob = (nbformat.read(out / f"{s}.ipynb", as_version=4) for s in ("alice", "bob"))
    seed_a, seed_b = alice.metadata["servingmath"]["seed"], bob.metadata["servingmath"]["seed"]
    assert seed_a != seed_b
    assert f"use_seed({seed_a})" in "".join(c.source for c in alice.cells)
    text_a = "".join(c.source for c in alice.cells if c.cell_type == "markdown")
    text_b = "".join(c.source for c in bob.cells if c.cell_type == "markdown")
    assert text_a != text_b
    changed = [qid for qid in ["anatomy.kv_cache_one_sequence", "anatomy.tpot_from_timestamps",
                               "anatomy.batch_throughput", "anatomy.decode_floor"]
               if get_question(qid).expected(get_question(qid).draw(seed_a))
               != get_question(qid).expected(get_question(qid).draw(seed_b))]
    assert changed, "the two variants should differ in at least one expected answer"


def test_variant_checks_use_the_active_seed():
    q = get_question("anatomy.batch_throughput")
    seed = next(s for s in range(100) if q.draw(s)["batch"] != 32)
    right = q.expected(q.draw(seed))
    try:
        use_seed(seed)
        assert evaluate(q, right).correct
        assert not evaluate(q, 1280.0).correct
    finally:
        use_seed(None)
    with pytest.raises(ValueError, match="seed"):
        use_seed(-3)


def test_grading_end_to_end(handout, tmp_path):
    out, roster = handout
    seeds = {r["student"]: int(r["seed"]) for r in csv.DictReader(roster.open())}
    subs = tmp_path / "submissions"
    subs.mkdir()
    # alice: all correct for HER variant; bob: every answer a known mistake
    for student, wrong in [("alice", False), ("bob", True)]:
        nb = nbformat.read(out / f"{student}.ipynb", as_version=4)
        nbformat.write(_fill(nb, seeds[student], wrong), subs / f"{student}.ipynb")
    # carol: correct answers for ANOTHER seed, with the seed line edited and the checker replaced
    nb = nbformat.read(out / "carol.ipynb", as_version=4)
    nb = _fill(nb, seeds["alice"])
    for cell in nb.cells:
        cell.source = cell.source.replace(f"use_seed({seeds['carol']})", f"use_seed({seeds['alice']})")
    nb.cells.insert(3, nbformat.v4.new_code_cell("def check(*args):\n    print('correct.')"))
    del nb.cells[-2:]                                   # and deletes the last question's cells
    nbformat.write(nb, subs / "carol.ipynb")
    # dave: runs forever (asleep, so his kernel leaves the CPU to the other tests while it waits)
    nb = _fill(nbformat.read(out / "dave.ipynb", as_version=4), seeds["dave"])
    last_code = max(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells.insert(last_code + 1, nbformat.v4.new_code_cell("import time\nwhile True:\n    time.sleep(0.1)"))
    nbformat.write(nb, subs / "dave.ipynb")
    # erin: not a notebook at all; frank: not on the roster
    (subs / "erin.ipynb").write_text("{this is not json")
    nbformat.write(nbformat.read(out / "alice.ipynb", as_version=4), subs / "frank.ipynb")

    # 20 s a cell: the first cell imports sympy and the library, which took up to 8 s on a shared,
    # loaded 2-core machine (an 8 s limit timed out alice or bob at random); dave still times out
    grades = {g.student: g for g in assignments.grade_folder(TEMPLATE, subs, tmp_path / "grades", roster,
                                                             timeout=20)}
    n = len(assignments.check_cells(nbformat.read(TEMPLATE, as_version=4)))
    assert grades["alice"].status == "ok" and grades["alice"].score == n and not grades["alice"].flags
    assert grades["bob"].status == "ok" and grades["bob"].score == 0
    assert grades["carol"].score < n
    flags = " ".join(grades["carol"].flags)
    assert "seed changed" in flags and "redefined" in flags and "deleted" in flags
    assert grades["dave"].status == "timed out" and grades["dave"].score == n  # interrupted, still graded
    assert grades["erin"].status == "not a notebook"
    assert grades["frank"].status == "not on the roster"
    rows = list(csv.DictReader((tmp_path / "grades" / "scores.csv").open()))
    assert {r["student"] for r in rows} == {"alice", "bob", "carol", "dave", "erin", "frank"}
    assert int(next(r for r in rows if r["student"] == "alice")["score"]) == n
    summary = (tmp_path / "grades" / "summary.md").read_text()
    assert "timed out" in summary and "alice" in summary


def test_unfilled_exercise_scores_zero_as_not_attempted(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    nbformat.write(nbformat.read(TEMPLATE, as_version=4), subs / "zoe.ipynb")
    (grade,) = assignments.grade_folder(TEMPLATE, subs, tmp_path / "g", roster=None, timeout=30)
    assert grade.status == "ok" and grade.score == 0
    assert set(grade.results.values()) == {"not attempted"}


def test_make_rejects_bad_rosters(tmp_path):
    with pytest.raises(ValueError, match="unique"):
        assignments.make_assignment(TEMPLATE, ["a", "a"], "k", tmp_path)
    with pytest.raises(ValueError, match="names a file"):
        assignments.make_assignment(TEMPLATE, ["../evil"], "k", tmp_path)
    assert assignments.student_seed("k", "a") == assignments.student_seed("k", "a")
    assert assignments.student_seed("k", "a") != assignments.student_seed("k2", "a")
