"""Bad input, everywhere: every public function, every argument, every kind of bad value.

Each public function's first doctest call is its known-good call. Every argument of that call is
replaced, one at a time, by each value of :data:`BAD_VALUES` (zero, negative, NaN, inf, None, text,
10**300, empty and mismatched arrays, an unknown name). The function must then either

* raise ``ValueError``, ``TypeError`` or ``KeyError`` whose message names the parameter, or
* return a result with no NaN, no negative number, and no infinity unless its docstring documents
  ``inf`` as a result,

within :data:`TIME_LIMIT` seconds. Anything else -- ``AttributeError``, ``IndexError``,
``OverflowError``, ``ZeroDivisionError``, ``MemoryError``, a numpy warning turned error, a silent NaN,
a hang -- is a failure, reported with the call that produced it.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import inspect
import math
import pkgutil
import signal
import warnings
from dataclasses import dataclass

import numpy as np
import pytest

import servingmath

TIME_LIMIT = 5.0
BAD_VALUES = {
    "zero": 0,
    "negative": -3,
    "nan": float("nan"),
    "inf": float("inf"),
    "none": None,
    "text": "lots",
    "huge": 10 ** 300,
    "empty": [],
    "mismatched": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
    "unknown name": "Llama-9-Zillion",
}
ALLOWED = (ValueError, TypeError, KeyError)
# helpers that convert a computed *result*, not an input: NaN passes through them by design (the
# library marks undefined entries, e.g. unstable arrival rates, with NaN), so NaN in is NaN out there
NAN_PASSES_THROUGH = {"servingmath._validation.scalar_or_array"}
# modules whose functions are not numeric library functions (the book's tools, plotting, CLIs)
SKIP_MODULES = {"servingmath.drill", "servingmath.assignments", "servingmath.plotting", "servingmath.symbolic",
                "servingmath.explorer", "servingmath.scheduling_plots", "servingmath.checks"}


def _public_functions():
    seen = set()
    for info in pkgutil.walk_packages(servingmath.__path__, prefix="servingmath."):
        if info.name.startswith("servingmath.questions") or info.name in SKIP_MODULES:
            continue
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name, None)
            if not inspect.isfunction(obj) or obj.__module__ != module.__name__:
                continue
            if (obj.__module__, name) in seen:
                continue
            seen.add((obj.__module__, name))
            yield module, name, obj


@dataclass
class Call:
    module: object
    name: str
    func: object
    args: list
    kwargs: dict
    source: str


def _first_call(module, name, func):
    """The first call of ``name`` in the function's doctest, with its arguments evaluated."""
    doc = inspect.getdoc(func) or ""
    globs = dict(vars(module))
    for example in doctest.DocTestParser().get_examples(doc):
        try:
            tree = ast.parse(example.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
                try:
                    args = [eval(compile(ast.Expression(a), "<doctest>", "eval"), globs) for a in node.args
                            if not isinstance(a, ast.Starred)]
                    kwargs = {k.arg: eval(compile(ast.Expression(k.value), "<doctest>", "eval"), globs)
                              for k in node.keywords if k.arg is not None}
                except Exception:
                    break
                if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                    break
                return Call(module, name, func, args, kwargs, ast.unparse(node))
        # names defined by earlier examples (x = ...) become available to later ones
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(compile(example.source, "<doctest>", "exec"), globs)
        except Exception:
            pass
    return None


def _calls():
    calls, missing = [], []
    for module, name, func in _public_functions():
        call = _first_call(module, name, func)
        (calls if call is not None else missing).append(call or f"{module.__name__}.{name}")
    return calls, missing


CALLS, WITHOUT_EXAMPLE = _calls()


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def _bad_result(result, allow_inf):
    """A reason if ``result`` holds a NaN, a negative number or an undocumented infinity, else None."""
    values = []

    def walk(x):
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        elif isinstance(x, (bool, np.bool_, str)) or x is None:
            return
        elif isinstance(x, (int, float, np.number, np.ndarray)):
            arr = np.asarray(x)
            if arr.dtype.kind in "fiu":
                values.append(arr.astype(float).ravel())

    walk(result)
    if not values:
        return None
    allv = np.concatenate(values) if values else np.zeros(0)
    if np.any(np.isnan(allv)):
        return "returned NaN"
    if not allow_inf and np.any(np.isinf(allv)):
        return "returned an undocumented infinity"
    return None


def _run(call: Call, position, value):
    args, kwargs = list(call.args), dict(call.kwargs)
    if isinstance(position, int):
        args[position] = value
        names = list(inspect.signature(call.func).parameters)
        param = names[position] if position < len(names) else f"argument {position}"
    else:
        kwargs[position] = value
        param = position
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            result = call.func(*args, **kwargs)
    except _Timeout:
        return param, f"took more than {TIME_LIMIT:g} s"
    except ALLOWED as error:
        text = str(error)
        if param.split(" ")[0] not in text and not _names_some_parameter(call.func, text):
            return param, f"{type(error).__name__} that does not name the parameter: {text[:120]!r}"
        return param, None
    except Exception as error:  # noqa: BLE001 - the point is to catch the wrong kinds
        return param, f"{type(error).__name__}: {str(error)[:120]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    allow_inf = "inf" in (inspect.getdoc(call.func) or "")
    if (isinstance(value, float) and math.isnan(value)
            and f"{call.module.__name__}.{call.name}" in NAN_PASSES_THROUGH):
        return param, None
    return param, _bad_result(result, allow_inf)


def _names_some_parameter(func, text):
    """A message may name a derived parameter ("prompt_len + cached_len", "deployment option")."""
    names = set(inspect.signature(func).parameters) | {"deployment option", "model", "accelerator"}
    return any(n in text for n in names)


def _problems(call: Call):
    problems = []
    positions = list(range(len(call.args))) + list(call.kwargs)
    for position in positions:
        for label, value in BAD_VALUES.items():
            param, problem = _run(call, position, value)
            if problem:
                problems.append(f"{call.module.__name__}.{call.name}({param}={label}): {problem}")
    return problems


def test_almost_every_public_function_has_a_runnable_example():
    """The harness needs a known-good call per function: its doctest."""
    assert len(CALLS) >= 150, f"only {len(CALLS)} functions have a runnable first example"
    assert len(WITHOUT_EXAMPLE) <= 16, f"no runnable example: {WITHOUT_EXAMPLE}"


@pytest.mark.parametrize("call", CALLS, ids=lambda c: f"{c.module.__name__.split('.', 1)[1]}.{c.name}")
def test_bad_input_gets_a_clear_error_or_a_sane_result(call):
    problems = _problems(call)
    assert not problems, f"{call.source}:\n  " + "\n  ".join(problems)


def test_the_harness_catches_a_silent_nan_and_an_unclear_error():
    def ratio(a, b):
        """>>> ratio(1.0, 2.0)
        0.5
        """
        return a / b

    call = Call(type("m", (), {"__name__": "fake"}), "ratio", ratio, [1.0, 2.0], {}, "ratio(1.0, 2.0)")
    problems = _problems(call)
    assert any("ZeroDivisionError" in p for p in problems)
    assert any("NaN" in p for p in problems)
