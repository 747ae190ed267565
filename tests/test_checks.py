"""The checker itself: statuses, tolerances, units, generic hints, strict mode."""

from __future__ import annotations

import pytest

from servingmath.checks import Mistake, Question, check, evaluate


def _q(**kw):
    base = dict(id="t.q", prompt="?", answer=lambda p: 0.020, unit="ms")
    base.update(kw)
    return Question(**base)


def test_tolerance_is_relative_and_stated():
    q = _q(rel_tol=0.01)
    assert evaluate(q, 20.19).correct
    assert not evaluate(q, 20.3).correct


def test_seconds_for_milliseconds_gets_the_generic_hint():
    result = evaluate(_q(), 0.020)
    assert result.status == "incorrect" and "1000" in result.message


def test_gb_for_gib_gets_the_generic_hint():
    q = _q(answer=lambda p: 2**30, unit="GB")
    assert "GiB versus GB" in evaluate(q, 1.0).message  # answered 1 "GB" meaning 1 GiB
    assert evaluate(q, "1 GiB").correct


def test_factor_two_gets_the_generic_hint():
    assert "factor of 2" in evaluate(_q(), 40.0).message


def test_question_specific_mistake_wins_over_generic():
    q = _q(mistakes=[Mistake("specific", lambda p: 0.040)])
    assert evaluate(q, 40.0).message.endswith("specific")


def test_choice_questions_are_case_insensitive():
    q = Question("t.c", "?", answer=lambda p: "prefill", kind="choice", choices=("prefill", "decode"))
    assert evaluate(q, " Prefill ").correct
    assert evaluate(q, "both").status == "invalid"
    assert evaluate(q, 3).status == "invalid"


def test_bad_question_definitions_are_rejected():
    with pytest.raises(ValueError, match="kind"):
        _q(kind="essay")
    with pytest.raises(ValueError, match="unit"):
        _q(unit="furlongs")


def test_check_prints_and_is_strict_only_when_asked(capsys, monkeypatch):
    monkeypatch.delenv("SERVINGMATH_STRICT_CHECKS", raising=False)
    check("anatomy.batch_throughput", ...)
    assert "not attempted" in capsys.readouterr().out
    monkeypatch.setenv("SERVINGMATH_STRICT_CHECKS", "1")
    with pytest.raises(AssertionError, match="not attempted"):
        check("anatomy.batch_throughput", ...)
    with pytest.raises(AssertionError, match="not yet"):
        check("anatomy.batch_throughput", 40.0)
    check("anatomy.batch_throughput", 1280.0)
    assert "correct" in capsys.readouterr().out


def test_params_override_recomputes_the_expected_answer():
    assert evaluate("anatomy.batch_throughput", 2560.0, params={"batch": 64}).correct
    assert not evaluate("anatomy.batch_throughput", 1280.0, params={"batch": 64}).correct
