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


# ---------------------------------------------------------------- feedback that teaches
def test_a_near_miss_says_how_far_off_and_the_tolerance():
    result = evaluate(_q(rel_tol=0.01), 20.3)          # 1.5 % too high
    assert result.message == "not yet: 1.5 % too high; answers within 1 % are accepted."
    assert result.slip == "near miss"
    assert "too low" in evaluate(_q(rel_tol=0.01), 19.5).message
    assert evaluate(_q(rel_tol=0.01), 35.0).message == "not yet: 75 % too high; answers within 1 % are accepted." \
        or evaluate(_q(rel_tol=0.01), 35.0).message == "not yet."


def test_a_percentage_is_read_as_a_fraction_where_a_fraction_is_asked():
    q = Question("t.f", "?", answer=lambda p: 0.85)
    assert evaluate(q, "85 %").correct and evaluate(q, "85%").correct
    result = evaluate(q, 85)
    assert result.status == "incorrect" and "percentage" in result.message and result.slip == "percent for a fraction"
    assert evaluate(_q(), "85 %").status == "invalid"              # a time is not a percentage


@pytest.mark.parametrize("answer,words", [
    ("12 parsecs", "'parsecs' is not a unit I know"),
    ("fast", "could not read 'fast' as a number in ms"),
    ("1" * 500, "too long to be a number"),
])
def test_a_reading_problem_is_one_plain_sentence(answer, words):
    result = evaluate(_q(), answer)
    assert result.status == "invalid" and words in result.message
    assert result.message.count(". ") == 0 and result.message.endswith(".")


def test_check_shows_colour_and_a_mark_in_jupyter_and_one_plain_line_elsewhere(capsys, monkeypatch):
    from servingmath.checks import CheckResult

    right = CheckResult("t.q", "correct", "correct.")._repr_html_()
    wrong = CheckResult("t.q", "incorrect", "not yet. Hint: <K and V>")._repr_html_()
    assert "✓" in right and "#1a7f37" in right and "✗" in wrong and "#b3261e" in wrong
    assert "&lt;K and V&gt;" in wrong and "<K and V>" not in wrong
    monkeypatch.delenv("SERVINGMATH_STRICT_CHECKS", raising=False)
    check("anatomy.batch_throughput", 1280.0)
    assert capsys.readouterr().out == "anatomy.batch_throughput: correct.\n"


def test_score_counts_this_kernels_latest_checks(capsys, monkeypatch):
    from servingmath import checks

    monkeypatch.delenv("SERVINGMATH_STRICT_CHECKS", raising=False)
    monkeypatch.setattr(checks, "_RESULTS", {})
    check("anatomy.batch_throughput", 7.0)
    check("anatomy.batch_throughput", 1280.0)            # the latest check counts
    check("anatomy.e2e_formula", ...)
    capsys.readouterr()
    checks.score("anatomy")
    out = capsys.readouterr().out
    assert out.startswith("Score: 1 of 9 correct (1 not attempted, 7 not checked).")


def test_check_reports_what_it_checked_to_the_grader_as_data(capsys, monkeypatch):
    import json

    import sympy as sp

    from servingmath import answers, checks

    monkeypatch.setenv(checks.CAPTURE_ENV, "1")
    monkeypatch.delenv("SERVINGMATH_STRICT_CHECKS", raising=False)
    T1, T, n = sp.symbols("T_1 T L_o")
    check("anatomy.e2e_formula", T1 + (n - 1) * T)
    check("anatomy.batch_throughput", [1, 2])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith(checks.CAPTURE_MARK)]
    first, second = (json.loads(line[len(checks.CAPTURE_MARK):]) for line in lines)
    assert first["q"] == "anatomy.e2e_formula" and first["a"]["kind"] == "formula"
    assert evaluate("anatomy.e2e_formula", answers.from_record(first["a"])).correct
    assert second["a"]["kind"] == "invalid"


def test_a_graded_handout_never_says_whether_an_answer_is_right(capsys, monkeypatch):
    from servingmath import checks

    monkeypatch.delenv("SERVINGMATH_STRICT_CHECKS", raising=False)
    monkeypatch.setattr(checks, "_HANDOUT", {})
    checks.graded_handout("alice")
    for value in (1280.0, 640.0, 99.0):
        check("anatomy.batch_throughput", value)
    out = capsys.readouterr().out.splitlines()
    assert all("recorded" in line and "correct" not in line and "not yet" not in line for line in out)
    checks.score("anatomy")
    assert "1 of 9 answers recorded" in capsys.readouterr().out


def test_a_slow_check_is_stopped_by_its_time_limit():
    import time

    from servingmath import answers

    with pytest.raises(answers.AnswerTimeout):
        with answers.time_limit(0.2):
            while True:
                time.sleep(0.01)
