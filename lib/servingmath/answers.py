"""Reading a student's answer without ever running it: formulas, numbers, objects, and the record the grader reads.

A student's answer is data. Nothing here calls ``eval``, ``exec`` or ``sympy.sympify`` on it,
and nothing calls a method that a student's own class could override:

* :func:`parse_formula` reads a formula typed as text (``"P*b_w/W"``, ``"T_1 + (n-1)*T"``,
  ``"2^30"``) with a whitelist: Python's ``ast`` parser builds the tree, and only numbers, the
  question's own symbols, ``+ - * / ** ^``, unary minus, brackets and a few functions
  (:data:`FUNCTIONS`) are accepted; the sympy expression is built here, node by node. The text
  length, the number of nodes, the exponents and the size of the numbers are limited, so no
  answer can make the checker hang (``9**9**9`` is refused, not computed).
* :func:`read_object` turns an object a student passes to ``check()`` into a plain value: a
  Python or numpy real number, a size-one numpy array, a string, ``...``, or a sympy expression
  whose every node is of an allowed sympy type (the tree is walked with ``type()``, which an
  object cannot fake; a subclass or a foreign object is refused, its methods never called).
* :func:`to_record` and :func:`from_record` are the plain-JSON form in which ``check()`` reports
  an answer to the grader (:mod:`servingmath.assignments`): a number, a text, or a formula as
  text in the whitelist's grammar. The grader re-reads that text with :func:`parse_formula`.
* :func:`time_limit` and :func:`call_with_time_limit` bound the time an evaluation may take: the
  first with a timer signal in the calling process, the second in a forked child that is killed
  when its time is up.

Every refusal is a :class:`AnswerError` whose message is one plain sentence.

Examples
--------
>>> import sympy as sp
>>> P, W = sp.symbols("P W", positive=True)
>>> parse_formula("2*P/W", {"P": P, "W": W})
2*P/W
>>> parse_formula("2^10")
1024
>>> try:
...     parse_formula("9**9**9")
... except AnswerError as error:
...     print(error)
the number 9**387420489 would be too large (more than 1e300): check the exponents and factors.
>>> try:
...     parse_formula("__import__('os')")
... except AnswerError as error:
...     print(error)
'__import__' is not a function you can use here: use sqrt, log, exp, min, max, ceil, floor or abs.
>>> read_object(0.5)
0.5
"""

from __future__ import annotations

import ast
import contextlib
import keyword
import decimal
import difflib
import fractions
import json
import math
import os
import re
import select
import signal
import threading
import time

import numpy as np
import sympy

from ._validation import check_positive

__all__ = ["AnswerError", "AnswerTimeout", "Formula", "FUNCTIONS", "MAX_TEXT", "parse_formula", "formula_text",
           "read_object", "to_record", "from_record", "time_limit", "call_with_time_limit", "short"]

#: Longest formula a student may type, in characters; formulas built from sympy objects may be longer.
MAX_TEXT = 1000
MAX_NODES = 400
#: Longest formula text read back from an object or a grading record.
MAX_OBJECT_TEXT = 40_000
MAX_OBJECT_NODES = 4000
#: Largest exponent on an expression with symbols (``x**64``); a number's power is limited by its size.
MAX_SYMBOLIC_EXPONENT = 64
#: Largest magnitude of a number in a formula (and of its result).
MAX_MAGNITUDE_DIGITS = 300
#: Longest text answer kept (conceptual answers are paragraphs).
MAX_ANSWER_TEXT = 20_000

#: Functions a formula may call, by the names a student may type.
FUNCTIONS = {
    "sqrt": sympy.sqrt, "log": sympy.log, "ln": sympy.log, "exp": sympy.exp,
    "min": sympy.Min, "Min": sympy.Min, "max": sympy.Max, "Max": sympy.Max,
    "ceil": sympy.ceiling, "ceiling": sympy.ceiling, "floor": sympy.floor,
    "abs": sympy.Abs, "Abs": sympy.Abs,
}
_FUNCTION_ARITY = {sympy.sqrt: (1, 1), sympy.log: (1, 2), sympy.exp: (1, 1), sympy.Min: (1, 8),
                   sympy.Max: (1, 8), sympy.ceiling: (1, 1), sympy.floor: (1, 1), sympy.Abs: (1, 1)}
_FUNCTION_LIST = "sqrt, log, exp, min, max, ceil, floor or abs"
_CONSTANTS = {"pi": sympy.pi, "E": sympy.E}


class AnswerError(ValueError):
    """An answer that cannot be read; the message is one sentence a student can act on.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """


class AnswerTimeout(AnswerError):
    """Checking an answer took longer than its time limit.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """


class Formula(str):
    """The text of a formula (as opposed to a quantity such as ``"12 ms"``), read back from a record.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """

    __slots__ = ()


def short(text, limit: int = 40) -> str:
    """``text`` quoted for a message: at most ``limit`` characters, control characters removed.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Examples
    --------
    >>> short("abc"), short("x" * 50, limit=10)
    ("'abc'", "'xxxxxxxxx…'")
    """
    text = re.sub(r"[\x00-\x1f\x7f]", " ", str(text))
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return repr(text)


# ---------------------------------------------------------------- numbers and their size
def _digits(number) -> float:
    """log10 of the magnitude of a sympy number (0 for 0), without computing anything large."""
    kind = type(number)
    if kind in _INTEGER_TYPES:
        p = abs(int(number.p))
        return 0.0 if p == 0 else (p.bit_length() - 1) * math.log10(2)
    if kind in _RATIONAL_TYPES:
        p, q = abs(int(number.p)), int(number.q)
        return 0.0 if p == 0 else (p.bit_length() - q.bit_length()) * math.log10(2)
    if kind is sympy.Float:
        mantissa = number._mpf_
        if mantissa[1] == 0:
            return 0.0
        return (mantissa[2] + mantissa[3]) * math.log10(2)
    if kind in (sympy.core.numbers.Pi, sympy.core.numbers.Exp1):
        return 0.5
    return 0.0


def _check_size(expression, text: str | None = None):
    if expression.is_Number and _digits(expression) > MAX_MAGNITUDE_DIGITS:
        what = f"the number {text}" if text else "a number in the formula"
        raise AnswerError(f"{what} would be too large (more than 1e{MAX_MAGNITUDE_DIGITS}): check the "
                          "exponents and factors.")
    if expression in (sympy.zoo, sympy.oo, -sympy.oo) or expression is sympy.nan:
        raise AnswerError("the formula divides by zero.")
    return expression


# ---------------------------------------------------------------- the parser
def _symbol_table(symbols) -> dict:
    """The names a formula may use: the question's keys and its symbols' own names (``lam`` and ``lambda``)."""
    if symbols is not None and not isinstance(symbols, dict):
        raise TypeError(f"symbols must be a dict of name -> sympy symbol (or None), got {_type_name(type(symbols))}")
    table = {}
    for value in (symbols or {}).values():
        if type(value) is sympy.Symbol:
            table[value.name] = value
    table.update(symbols or {})
    return table


def _normalise_text(text: str) -> str:
    table = {"^": "**", "×": "*", "·": "*", "⋅": "*", "−": "-", "–": "-", "÷": "/", "（": "(", "）": ")"}
    for old, new in table.items():
        text = text.replace(old, new)
    return text.strip()


def _syntax_sentence(text: str, exc: SyntaxError) -> str:
    message = str(getattr(exc, "msg", exc)).lower()
    if re.search(r"\d[A-Za-z_(]", text) and ("invalid decimal literal" in message or "invalid syntax" in message):
        return f"could not read {short(text)}: write products with * (2*P, not 2P)."
    if text.count("(") != text.count(")") or "never closed" in message or "unmatched" in message:
        return f"could not read {short(text)}: the brackets do not match."
    if re.search(r"[-+*/]\s*$", text) or "unexpected eof" in message:
        return f"could not read {short(text)}: the formula ends too early."
    if "nested" in message or "too many" in message:
        return f"could not read {short(text)}: it nests too many brackets."
    return (f"could not read {short(text)} as a formula: use numbers, the question's symbols, "
            "+ - * / ** and brackets.")


class _Builder:
    def __init__(self, text, symbols, max_nodes):
        self.text, self.symbols, self.max_nodes, self.nodes = text, symbols, max_nodes, 0

    def refuse(self, what: str):
        return AnswerError(f"{what} is not allowed in a formula: use numbers, the question's symbols "
                           f"({self.symbol_list()}), + - * / ** and brackets.")

    def symbol_list(self) -> str:
        return ", ".join(sorted(self.symbols)) if self.symbols else "none here"

    def build(self, node):
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise AnswerError(f"the formula is too long: at most {self.max_nodes} numbers, symbols and "
                              "operations.")
        kind = type(node)
        if kind is ast.Expression:
            return self.build(node.body)
        if kind is ast.Constant:
            value = node.value
            if type(value) is int:
                if value.bit_length() > MAX_MAGNITUDE_DIGITS * 3.33:
                    raise AnswerError(f"the number {short(str(value)[:20] + '...')} is too large.")
                return sympy.Integer(value)
            if type(value) is float:
                if not math.isfinite(value):
                    raise AnswerError("the formula holds a number too large to read.")
                return sympy.Float(value)
            if type(value) is complex:
                raise AnswerError("complex numbers (such as 2j) are not allowed in a formula.")
            return self._raise_refused(node)
        if kind is ast.Name:
            name = node.id
            if name in self.symbols:
                return self.symbols[name]
            if name in _CONSTANTS:
                return _CONSTANTS[name]
            close = difflib.get_close_matches(name, list(self.symbols), n=1, cutoff=0.6)
            if name in FUNCTIONS:
                raise AnswerError(f"{name!r} is a function: write {name}(...) with its argument in brackets.")
            hint = f" (did you mean {close[0]}?)" if close else ""
            allowed = (f"the question's symbols are {self.symbol_list()}." if self.symbols
                       else "the question has no symbols.")
            raise AnswerError(f"{short(name)} is not a symbol of this question{hint}: {allowed}")
        if kind is ast.UnaryOp and type(node.op) in (ast.USub, ast.UAdd):
            operand = self.build(node.operand)
            return -operand if type(node.op) is ast.USub else operand
        if kind is ast.BinOp and type(node.op) in (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow):
            left, right = self.build(node.left), self.build(node.right)
            op = type(node.op)
            if op is ast.Pow:
                return self.power(left, right)
            if op is ast.Div and right == 0:
                raise AnswerError("the formula divides by zero.")
            result = {ast.Add: sympy.Add, ast.Sub: lambda a, b: sympy.Add(a, -b), ast.Mult: sympy.Mul,
                      ast.Div: lambda a, b: sympy.Mul(a, sympy.Pow(b, -1))}[op](left, right)
            return _check_size(result)
        if kind is ast.Call:
            func = node.func
            if type(func) is not ast.Name:
                raise self.refuse(f"{short(ast.unparse(func))}")
            if func.id not in FUNCTIONS:
                raise AnswerError(f"{short(func.id)} is not a function you can use here: use {_FUNCTION_LIST}.")
            if node.keywords or any(type(a) is ast.Starred for a in node.args):
                raise self.refuse(f"{func.id}(...) with named or starred arguments")
            function = FUNCTIONS[func.id]
            low, high = _FUNCTION_ARITY[function]
            if not low <= len(node.args) <= high:
                raise AnswerError(f"{func.id}() takes {low if low == high else f'{low} to {high}'} "
                                  f"argument{'s' * (high > 1)}, got {len(node.args)}.")
            args = [self.build(a) for a in node.args]
            if function is sympy.log and any(a == 0 for a in args):
                raise AnswerError("log(0) is not a number.")
            return _check_size(function(*args))
        return self._raise_refused(node)

    def _raise_refused(self, node):
        try:
            piece = ast.unparse(node)
        except Exception:  # pragma: no cover - ast.unparse handles every node ast.parse makes
            piece = type(node).__name__
        raise self.refuse(short(piece))

    def power(self, base, exponent):
        if exponent.is_Number:
            if type(exponent) not in _INTEGER_TYPES | _RATIONAL_TYPES | {sympy.Float}:
                raise AnswerError("the exponent must be a real number.")
            size = abs(float(exponent)) if _digits(exponent) < 20 else math.inf
            if base.is_Number:
                if base == 0 and exponent.is_negative:
                    raise AnswerError("the formula divides by zero.")
                magnitude = size * _digits(base) if base != 0 else 0.0
                if magnitude > MAX_MAGNITUDE_DIGITS or size > 10_000:
                    raise AnswerError(f"the number {base}**{exponent} would be too large (more than "
                                      f"1e{MAX_MAGNITUDE_DIGITS}): check the exponents and factors.")
            elif size > MAX_SYMBOLIC_EXPONENT:
                raise AnswerError(f"the exponent {exponent} is too large: at most {MAX_SYMBOLIC_EXPONENT} on an "
                                  "expression with symbols.")
        elif base.is_Number and _digits(base) > 20:
            raise AnswerError("a large number raised to a symbolic power is not allowed.")
        return _check_size(sympy.Pow(base, exponent), f"{base}**{exponent}")


def parse_formula(text: str, symbols: dict | None = None, *, max_length: int = MAX_TEXT,
                  max_nodes: int = MAX_NODES):
    """Read a formula typed as text into a sympy expression, accepting only a whitelist.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Parameters
    ----------
    text : str
        The formula, in Python syntax; ``^`` is read as a power, ``×`` and ``·`` as products,
        ``−`` as minus.
    symbols : dict, optional
        Name -> sympy symbol: the only names the formula may use (besides ``pi``, ``E`` and the
        functions of :data:`FUNCTIONS`).
    max_length, max_nodes : int
        Limits on the text and on the number of nodes of its tree.

    Returns
    -------
    sympy.Expr

    Raises
    ------
    AnswerError
        For anything else (names, attributes, strings, calls of other functions, comparisons,
        huge exponents or numbers, division by zero), with one sentence saying what is allowed.

    Examples
    --------
    >>> import sympy as sp
    >>> n, T = sp.symbols("n T")
    >>> parse_formula("(n - 1)·T", {"n": n, "T": T})
    T*(n - 1)
    >>> try:
    ...     parse_formula("2n", {"n": n})
    ... except AnswerError as error:
    ...     print(error)
    could not read '2n': write products with * (2*P, not 2P).
    """
    if type(text) is Formula:
        text = str.__str__(text)
    if type(text) is not str:
        raise AnswerError(f"a formula must be text, got {_type_name(type(text))}.")
    symbols = _symbol_table(symbols)
    if len(text) > max_length:
        raise AnswerError(f"the formula is too long ({len(text)} characters; at most {max_length}).")
    cleaned = _normalise_text(text)
    if not cleaned:
        raise AnswerError("the answer is empty: write a formula, such as 2*P/W.")
    if "\x00" in cleaned:
        raise AnswerError("the formula holds a character that is not allowed (a null byte).")
    # a symbol named like a Python keyword (lambda, for a rate) is read under a stand-in name
    for name in [n for n in symbols if keyword.iskeyword(n)]:
        stand_in = f"_keyword_{name}"
        cleaned = re.sub(rf"\b{name}\b", stand_in, cleaned)
        symbols[stand_in] = symbols.pop(name)
    try:
        tree = ast.parse(cleaned, mode="eval")
    except SyntaxError as exc:
        raise AnswerError(_syntax_sentence(cleaned, exc)) from None
    except (ValueError, RecursionError, MemoryError):
        raise AnswerError(f"could not read {short(cleaned)} as a formula.") from None
    try:
        return _Builder(cleaned, symbols, max_nodes).build(tree)
    except RecursionError:
        raise AnswerError("the formula nests too deeply.") from None


# ---------------------------------------------------------------- sympy objects -> text
_S = sympy.S
_INTEGER_TYPES = frozenset({sympy.Integer, type(_S.One), type(_S.Zero), type(_S.NegativeOne)})
_RATIONAL_TYPES = frozenset({sympy.Rational, type(_S.Half)})
_FUNCTION_NAMES = {sympy.log: "log", sympy.exp: "exp", sympy.Min: "min", sympy.Max: "max",
                   sympy.ceiling: "ceil", sympy.floor: "floor", sympy.Abs: "abs"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,40}")
# Dispatch on id(type(node)): an integer key, so a foreign class's __hash__ or __eq__ never runs.
_TAG = {id(t): "integer" for t in _INTEGER_TYPES}
_TAG.update({id(t): "rational" for t in _RATIONAL_TYPES})
_TAG.update({id(sympy.Float): "float", id(sympy.core.numbers.Pi): "pi", id(sympy.core.numbers.Exp1): "E",
             id(sympy.Symbol): "symbol", id(sympy.Add): "add", id(sympy.Mul): "mul", id(sympy.Pow): "pow"})
_TAG.update({id(t): "function" for t in _FUNCTION_NAMES})
_FUNCTION_BY_ID = {id(t): name for t, name in _FUNCTION_NAMES.items()}


def formula_text(expression, symbols: dict | None = None, *, max_nodes: int = MAX_OBJECT_NODES) -> str:
    """The text, in :func:`parse_formula`'s grammar, of a sympy expression built only from allowed types.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    The tree is walked with exact ``type()`` checks: a subclass of a sympy type, a foreign object
    or any other sympy type is refused, and no method of the object is called (the numbers' values
    and the symbols' names are read from sympy's own slots). ``symbols``, when given, lists the names
    the formula may use.

    Examples
    --------
    >>> import sympy as sp
    >>> x = sp.Symbol("x")
    >>> formula_text(x**2 / 3 + sp.Min(x, 1))
    '(((1/3)*(x)**(2)) + min(1, x))'
    """
    count = [0]
    allowed = None if symbols is None else _symbol_table(symbols)

    def walk(node, depth):
        count[0] += 1
        if count[0] > max_nodes or depth > 200:
            raise AnswerError(f"the expression is too large to check (more than {max_nodes} parts).")
        kind = type(node)
        tag = _TAG.get(id(kind))
        if tag == "integer":
            return str(int(node.p))
        if tag == "rational":
            return f"({int(node.p)}/{int(node.q)})"
        if tag == "float":
            value = float(sympy.Float.__float__(node))
            if not math.isfinite(value):
                raise AnswerError("the expression holds a number too large to check.")
            return repr(value)
        if tag in ("pi", "E"):
            return tag
        if tag == "symbol":
            name = node.name
            if type(name) is not str or not _IDENTIFIER.fullmatch(name):
                raise AnswerError(f"the symbol {short(name)} has a name that is not a plain identifier.")
            if allowed is not None and name not in allowed:
                listed = ", ".join(sorted(symbols)) or "none here"
                raise AnswerError(f"your expression uses {name}, which is not a symbol of this question "
                                  f"(use {listed}).")
            return name
        if tag in ("add", "mul", "pow", "function"):
            args = node._args
            if type(args) is not tuple or (tag == "pow" and len(args) != 2) or not args:
                raise AnswerError("the expression is malformed.")
            parts = [walk(a, depth + 1) for a in args]
            if tag == "add":
                return "(" + " + ".join(parts) + ")"
            if tag == "mul":
                return "(" + "*".join(parts) + ")"
            if tag == "pow":
                return f"({parts[0]})**({parts[1]})"
            return f"{_FUNCTION_BY_ID[id(kind)]}({', '.join(parts)})"
        raise AnswerError(f"the expression contains {_type_name(kind)}, which is not part of a "
                          "formula that can be checked (use +, -, *, /, **, sqrt, log, exp, min, max, "
                          "ceil, floor, abs).")

    return walk(expression, 0)


# ---------------------------------------------------------------- objects -> plain values
_NUMPY_REAL = frozenset(id(t) for t in set(np.sctypeDict.values())
                        if issubclass(t, (np.integer, np.floating)) and not issubclass(t, np.bool_))
_NUMPY_COMPLEX = frozenset(id(t) for t in set(np.sctypeDict.values()) if issubclass(t, np.complexfloating))


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise AnswerError(f"the answer must be a finite number, got {value}.")
    return value


def _type_name(kind) -> str:
    name = type.__dict__["__name__"].__get__(kind)   # the C-level name: no metaclass code runs
    return short(name if type(name) is str else "object", 30)


def read_object(answer, symbols: dict | None = None):
    """Turn an object passed to ``check()`` into ``...``, a ``str``, a ``float`` or a sympy expression.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Only exact types are accepted (``type(answer)``, which no object can fake): ``int``,
    ``float``, ``fractions.Fraction``, ``decimal.Decimal``, numpy real scalars and size-one arrays of
    real numbers, ``str``, ``...``, and sympy expressions made of allowed types
    (:func:`formula_text`), which are rebuilt by :func:`parse_formula` from their text, so the
    expression returned is the checker's own. A sympy expression without symbols becomes a float.

    Raises
    ------
    AnswerError
        For anything else, with one sentence saying what was expected.

    Examples
    --------
    >>> import numpy as np
    >>> read_object(np.float32(2.5)), read_object(np.array([3])), read_object(...)
    (2.5, 3.0, Ellipsis)
    >>> try:
    ...     read_object([1, 2])
    ... except AnswerError as error:
    ...     print(error)
    the answer must be a number (or a string such as '12 ms'), got a list.
    """
    kind = type(answer)
    if answer is Ellipsis:
        return Ellipsis
    if kind is str:
        if len(answer) > MAX_ANSWER_TEXT:
            raise AnswerError(f"the answer is too long ({len(answer)} characters; at most {MAX_ANSWER_TEXT}).")
        return answer
    if kind is bool or kind is np.bool_:
        raise AnswerError("expected a number, got True/False.")
    if kind is int:
        if answer.bit_length() > 1023:
            raise AnswerError("the number is too large (more than 1e308).")
        return float(answer)
    if kind is float:
        return _finite(answer)
    if kind is fractions.Fraction or kind is decimal.Decimal:
        try:
            return _finite(float(answer))
        except (OverflowError, ValueError, decimal.InvalidOperation):
            raise AnswerError("the number is too large (more than 1e308).") from None
    if id(kind) in _NUMPY_REAL:
        return _finite(float(answer))
    if kind is complex or id(kind) in _NUMPY_COMPLEX:
        raise AnswerError("expected a real number, got a complex number.")
    if kind is np.ndarray:
        if answer.dtype.kind not in "iuf":
            raise AnswerError(f"expected a number, got an array of {answer.dtype.name}.")
        if answer.size != 1:
            raise AnswerError(f"expected one number, got an array of {answer.size} values.")
        return _finite(float(answer.reshape(-1)[0]))
    if id(kind) in _TAG:
        text = formula_text(answer, symbols)
        try:
            expression = parse_formula(text, symbols or {}, max_length=MAX_OBJECT_TEXT,
                                       max_nodes=MAX_OBJECT_NODES)
        except AnswerError as exc:
            if symbols is None and "not a symbol" in str(exc):
                raise AnswerError("expected a number, got an expression with free symbols.") from None
            raise
        if not expression.free_symbols:
            try:
                value = complex(expression.evalf(30))
            except (TypeError, ValueError):
                raise AnswerError("expected a number, got an expression that has no numeric value.") from None
            if value.imag:
                raise AnswerError("expected a real number, got a complex number.")
            return _finite(value.real)
        return expression
    names = {id(list): "a list", id(tuple): "a tuple", id(dict): "a dict", id(set): "a set",
             id(type(None)): "None"}
    name = names.get(id(kind)) or f"an object of type {_type_name(kind)}"
    raise AnswerError(f"the answer must be a number (or a string such as '12 ms'), got {name}.")


# ---------------------------------------------------------------- the record check() reports
def to_record(answer, symbols: dict | None = None) -> dict:
    """The plain-JSON record of an answer: what ``check()`` reports to the grader.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    ``{"kind": "ellipsis"}``, ``{"kind": "number", "value": "0.5"}``, ``{"kind": "text", "value":
    "12 ms"}``, ``{"kind": "formula", "value": "(2*P)"}`` or ``{"kind": "invalid", "why": sentence}``.

    Examples
    --------
    >>> to_record(0.25)
    {'kind': 'number', 'value': '0.25'}
    >>> from_record(to_record(0.25))
    0.25
    """
    try:
        value = read_object(answer, symbols)
    except AnswerError as exc:
        return {"kind": "invalid", "why": str(exc)[:300]}
    if value is Ellipsis:
        return {"kind": "ellipsis"}
    if type(value) is str:
        return {"kind": "text", "value": value}
    if type(value) is float:
        return {"kind": "number", "value": repr(value)}
    return {"kind": "formula", "value": formula_text(value)}


def from_record(record) -> object:
    """The answer a record stands for, read strictly (a record is untrusted input).

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Returns ``...``, a ``float``, a ``str``, a :class:`Formula` (text to be read by
    :func:`parse_formula`) or raises :class:`AnswerError` (with the sentence of an ``invalid``
    record).

    Examples
    --------
    >>> from_record({"kind": "number", "value": "0.5"}), from_record({"kind": "text", "value": "12 ms"})
    (0.5, '12 ms')
    """
    if type(record) is not dict:
        raise AnswerError("the answer record could not be read.")
    kind, value = record.get("kind"), record.get("value")
    if kind == "ellipsis":
        return Ellipsis
    if kind == "number" and type(value) is str and len(value) <= 40:
        try:
            number = float(value)
        except ValueError:
            raise AnswerError("the answer record holds no number.") from None
        return _finite(number)
    if kind == "text" and type(value) is str:
        if len(value) > MAX_ANSWER_TEXT:
            raise AnswerError(f"the answer is too long ({len(value)} characters; at most {MAX_ANSWER_TEXT}).")
        return value
    if kind == "formula" and type(value) is str:
        if len(value) > MAX_OBJECT_TEXT:
            raise AnswerError("the expression is too large to check.")
        return Formula(value)
    if kind == "invalid":
        why = record.get("why")
        raise AnswerError(why[:300] if type(why) is str else "the answer could not be read.")
    raise AnswerError("the answer record could not be read.")


# ---------------------------------------------------------------- time limits
@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise :class:`AnswerTimeout` inside the block after ``seconds`` (a timer signal).

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Works in the main thread of a POSIX process; elsewhere (or with ``None``) the block runs
    without a limit. Pure-Python work such as sympy's simplification is interrupted; the parser's
    size limits keep the C-level work (big-integer arithmetic) small.

    Examples
    --------
    >>> with time_limit(5.0):
    ...     total = sum(range(1000))
    >>> total
    499500
    """
    usable = (seconds is not None and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def _expired(signum, frame):
        raise AnswerTimeout(f"checking this answer took longer than {seconds:g} s: write it more simply.")

    previous = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def call_with_time_limit(function, *args, timeout: float):
    """Run ``function(*args)`` in a forked child and return its JSON-able result, or raise.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    The child is killed (SIGKILL) when ``timeout`` seconds have passed, so no answer can hold up
    the caller, whatever it does. Raises :class:`AnswerTimeout` on timeout and :class:`RuntimeError`
    when the child dies or returns something unreadable. Where ``os.fork`` does not exist, the call
    runs in this process under :func:`time_limit`.

    Examples
    --------
    >>> call_with_time_limit(repr, 2.5, timeout=5.0)
    '2.5'
    """
    if not callable(function):
        raise TypeError(f"function must be callable, got {type(function).__name__} {function!r:.60}")
    timeout = check_positive("timeout", timeout, scalar=True)
    if not hasattr(os, "fork"):  # pragma: no cover - Windows
        with time_limit(timeout):
            return function(*args)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, write the result, leave without running any cleanup
        status = 0
        try:
            os.close(read_end)
            try:
                payload = json.dumps({"ok": function(*args)})
            except AnswerError as exc:
                payload = json.dumps({"answer_error": str(exc)})
            except BaseException as exc:  # noqa: BLE001 - reported to the parent as data
                payload = json.dumps({"error": f"{type(exc).__name__}: {exc}"[:300]})
            data = payload.encode()
            while data:
                written = os.write(write_end, data)
                data = data[written:]
        except BaseException:  # noqa: BLE001
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    chunks, deadline, done = [], time.monotonic() + timeout, False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([read_end], [], [], left)
            if not ready:
                continue
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                done = True
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        if not done:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if not done:
        raise AnswerTimeout(f"checking this answer took longer than {timeout:g} s.")
    try:
        result = json.loads(b"".join(chunks).decode())
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise RuntimeError("the checking process returned nothing readable") from None
    if "ok" in result:
        return result["ok"]
    if "answer_error" in result:
        raise AnswerError(result["answer_error"])
    raise RuntimeError(result.get("error", "the checking process failed"))
