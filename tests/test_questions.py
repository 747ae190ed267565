"""Every registered question accepts its own answer and rejects each of its known mistakes."""

from __future__ import annotations

import json
import re

import pytest
import sympy as sp

from conftest import ROOT
from servingmath.checks import Question, evaluate
from servingmath.questions import all_questions, get_question
from servingmath.units import UNIT_SCALES

QUESTIONS = all_questions()
IDS = sorted(QUESTIONS)


def test_registry_is_not_empty():
    assert len(QUESTIONS) >= 9


@pytest.mark.parametrize("qid", IDS)
def test_accepts_the_right_answer(qid):
    q = QUESTIONS[qid]
    expected = q.expected()
    if q.kind == "numeric" and q.unit is not None:
        expected = expected / UNIT_SCALES[q.unit][0]  # the plain number the student types
    result = evaluate(q, expected)
    assert result.status == "correct", result


@pytest.mark.parametrize("qid", IDS)
def test_reports_not_attempted_for_the_placeholder(qid):
    assert evaluate(QUESTIONS[qid], ...).status == "not attempted"


@pytest.mark.parametrize("qid", IDS)
def test_rejects_every_known_mistake_with_its_hint(qid):
    q = QUESTIONS[qid]
    assert q.mistakes, f"{qid} lists no known mistakes"
    for mistake in q.mistakes:
        wrong = mistake.answer(q.draw(None))
        if q.kind == "numeric" and q.unit is not None:
            wrong = wrong / UNIT_SCALES[q.unit][0]
        result = evaluate(q, wrong)
        assert result.status == "incorrect", (qid, mistake.hint, result)
        assert mistake.hint in result.message, (qid, result.message)


@pytest.mark.parametrize("qid", [i for i in IDS if QUESTIONS[i].kind == "numeric" and QUESTIONS[i].unit])
def test_numeric_answers_with_units_are_converted(qid):
    q = QUESTIONS[qid]
    si = float(q.expected())
    dimension = UNIT_SCALES[q.unit][1]
    base = {"s": "s", "B": "B", "FLOP": "FLOP", "FLOP/s": "FLOP/s", "B/s": "B/s", "tok/s": "tok/s",
            "req/s": "req/s", "FLOP/B": "FLOP/B", "tok": "tok"}[dimension]
    assert evaluate(q, f"{si!r} {base}").status == "correct"
    other = {"s": "B", "B": "s"}.get(dimension, "s")
    assert evaluate(q, f"{si!r} {other}").status == "invalid"


def test_a_wrong_answer_with_no_known_mistake_gets_plain_not_yet():
    q = get_question("anatomy.batch_throughput")
    result = evaluate(q, 7.0)
    assert result.status == "incorrect" and result.message == "not yet."


def test_garbage_answers_get_a_helpful_reply_not_a_traceback():
    q = get_question("anatomy.tpot_from_timestamps")
    for answer in ["", "fast", None, [1, 2], "12 parsecs", float("nan"), True]:
        result = evaluate(q, answer)
        assert result.status == "invalid", (answer, result)
        assert "not yet" in result.message


def test_symbolic_answers_accept_strings_and_equivalent_forms():
    q = get_question("anatomy.e2e_formula")
    T1, T, L_o = sp.symbols("T_1 T L_o", positive=True)
    assert evaluate(q, "T_1 + L_o*T - T").correct
    assert evaluate(q, T1 + T * (L_o - 1)).correct
    assert not evaluate(q, T1 + T * L_o).correct
    assert evaluate(q, "T_1 + ").status == "invalid"


def test_unknown_question_id_suggests_close_ids():
    with pytest.raises(KeyError, match="anatomy.kv_bytes_per_token"):
        evaluate("anatomy.kv_bytes_per_tokn", 1)


def _check_calls(folder):
    calls = {}
    for path in sorted((ROOT / folder).glob("*.ipynb")):
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                source = "".join(cell["source"])
                for qid in re.findall(r"""check\(\s*["']([\w.]+)["']""", source):
                    calls.setdefault(qid, []).append(path.name)
    return calls


def test_every_question_is_asked_in_a_solutions_notebook_and_every_check_is_registered():
    calls = _check_calls("solutions")
    assert set(calls) - set(QUESTIONS) == set(), "check() calls with unregistered ids"
    assert set(QUESTIONS) - set(calls) == set(), "registered questions that no notebook asks"
    assert all(len(v) == 1 for v in calls.values()), {k: v for k, v in calls.items() if len(v) > 1}


VARIANT_IDS = [i for i in IDS if QUESTIONS[i].variants]


@pytest.mark.parametrize("qid", VARIANT_IDS)
def test_every_variant_accepts_its_answer_and_rejects_its_mistakes(qid):
    # per-student variants (servingmath.assignments) must stay checkable: for many seeds the
    # recomputed answer is accepted, and no known mistake collapses onto the right answer
    q = QUESTIONS[qid]
    seen = set()
    for seed in range(12):
        params = q.draw(seed)
        seen.add(repr(sorted(params.items())))
        expected = q.expected(params)
        shown = expected / UNIT_SCALES[q.unit][0] if q.kind == "numeric" and q.unit else expected
        assert evaluate(q, shown, seed=seed).correct, (seed, params)
        assert "{" not in q.render(params), q.render(params)
        for mistake in q.mistakes:
            wrong = mistake.answer(params)
            if q.kind == "numeric" and q.unit:
                wrong = wrong / UNIT_SCALES[q.unit][0]
            assert not evaluate(q, wrong, seed=seed).correct, (seed, params, mistake.hint)
    assert len(seen) > 1, "the variants never change the parameters"
