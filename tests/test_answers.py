"""The whitelist reader of answers: what it builds, what it refuses, and that it never runs anything."""

from __future__ import annotations

import decimal
import fractions

import numpy as np
import pytest
import sympy as sp

from servingmath import answers
from servingmath.answers import AnswerError, parse_formula, read_object

P, W, n, T = sp.symbols("P W n T", positive=True)
SYMBOLS = {"P": P, "W": W, "n": n, "T": T}


@pytest.mark.parametrize("text,expected", [
    ("2*P/W", 2 * P / W), ("P^2", P**2), ("(n - 1)·T", (n - 1) * T), ("−P + 3", 3 - P), ("2**10", 1024),
    ("sqrt(P)", sp.sqrt(P)), ("log(W)", sp.log(W)), ("min(P, W)", sp.Min(P, W)), ("ceil(n/2)", sp.ceiling(n / 2)),
    ("P**n", P**n), ("pi*P", sp.pi * P), ("1e-3*T", sp.Float(1e-3) * T), ("+P", P),
])
def test_formulas_are_built_from_the_whitelist(text, expected):
    assert sp.simplify(parse_formula(text, SYMBOLS) - expected) == 0


@pytest.mark.parametrize("text,words", [
    ("2P", "write products with *"), ("(P + W", "brackets do not match"), ("P +", "ends too early"),
    ("x", "'x' is not a symbol of this question"), ("Pp", "did you mean P?"), ("eval(P)", "not a function"),
    ("P.real", "not allowed"), ("P[0]", "not allowed"), ("'P'", "not allowed"), ("P if W else n", "not allowed"),
    ("P < W", "not allowed"), ("lambda: P", "not allowed"), ("min(P, key=W)", "named or starred"),
    ("sqrt(P, W)", "takes 1 argument"), ("1/0", "divides by zero"), ("P**100", "exponent 100 is too large"),
    ("10**301", "too large"), ("3j*P", "complex"), ("", "empty"), ("P" * 2000, "too long"),
    ("(" * 300 + "P" + ")" * 300, "nests too many brackets"), ("log", "is a function"), ("P\x00", "null byte"),
])
def test_anything_else_is_refused_in_one_sentence(text, words):
    with pytest.raises(AnswerError, match=None) as info:
        parse_formula(text, SYMBOLS)
    assert words in str(info.value), str(info.value)
    assert str(info.value).count(". ") == 0


def test_a_symbol_named_like_a_python_keyword_is_read():
    lam = sp.Symbol("lambda", positive=True)
    assert parse_formula("lambda*T", {"lam": lam, "T": T}) == lam * T
    assert parse_formula("lam*T", {"lam": lam, "T": T}) == lam * T


@pytest.mark.parametrize("value,expected", [
    (3, 3.0), (2.5, 2.5), (fractions.Fraction(1, 4), 0.25), (decimal.Decimal("1.5"), 1.5), (np.float32(0.5), 0.5),
    (np.int64(7), 7.0), (np.array(2.0), 2.0), (np.array([[4]]), 4.0), (sp.Rational(3, 4), 0.75),
    (sp.sqrt(4), 2.0), ("12 ms", "12 ms"), (..., ...),
])
def test_plain_values_are_read(value, expected):
    assert read_object(value) == expected


@pytest.mark.parametrize("value,words", [
    (True, "True/False"), (1 + 1j, "complex"), (np.complex64(1), "complex"), (10**400, "too large"),
    (float("inf"), "finite"), (np.array([1, 2]), "array of 2 values"), (np.array(["a"]), "array of"),
    ([1], "a list"), (None, "None"), (sp.I, "ImaginaryUnit"), (sp.sin(P), "sin"), (sp.Symbol("x") + 1, "free symbols"),
    ("x" * 30_000, "too long"),
])
def test_odd_objects_are_refused(value, words):
    with pytest.raises(AnswerError) as info:
        read_object(value)
    assert words in str(info.value)


def test_subclasses_and_lying_objects_are_refused_without_calling_their_methods():
    called = []

    class Sneaky(sp.Symbol):
        def _sympystr(self, printer):
            called.append("str")
            return "P"

        def __float__(self):
            called.append("float")
            return 1.0

    class Liar:
        __class__ = property(lambda self: float)

        def __float__(self):
            called.append("liar")
            return 1.0

    expression = Sneaky("P") * 2
    with pytest.raises(AnswerError, match="Sneaky"):
        read_object(expression, SYMBOLS)
    with pytest.raises(AnswerError, match="Liar"):
        read_object(Liar())
    assert called == []


def test_records_round_trip_and_forged_records_are_data():
    for value in (0.25, "12 ms", ..., 2 * P / W):
        record = answers.to_record(value, SYMBOLS)
        back = answers.from_record(record)
        if isinstance(back, answers.Formula):
            back = parse_formula(back, SYMBOLS)
        assert back == value or sp.simplify(back - value) == 0
    for forged in ({"kind": "number", "value": "1e999"}, {"kind": "text", "value": 3}, [], {"kind": "pickle"}):
        with pytest.raises(AnswerError):
            answers.from_record(forged)


def test_a_forked_check_is_killed_at_its_time_limit_and_returns_results_otherwise():
    with pytest.raises(answers.AnswerTimeout):
        answers.call_with_time_limit(lambda: [0 for _ in iter(int, 1)], timeout=0.5)
    with pytest.raises(AnswerError, match="nope"):
        answers.call_with_time_limit(lambda: (_ for _ in ()).throw(AnswerError("nope")), timeout=5)
    assert answers.call_with_time_limit(lambda: {"a": 1}, timeout=5) == {"a": 1}
