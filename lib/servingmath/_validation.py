"""Input checks shared by every public function.

Each check raises a ``ValueError`` (or ``KeyError`` for names) whose message
names the parameter, the value it got and what is allowed, so that bad input
never turns into a silent wrong number or a traceback deep inside numpy.
"""

from __future__ import annotations

import difflib
import numbers
from collections.abc import Iterable

from dataclasses import fields

import numpy as np

__all__ = [
    "as_array",
    "check_positive",
    "check_nonnegative",
    "check_fraction",
    "check_integer",
    "check_choice",
    "unknown_name",
    "UnknownNameError",
    "scalar_or_array",
    "int_or_array",
    "freeze_number",
    "ValueFields",
]


#: The largest magnitude a number given to the library may have. No quantity of LLM serving comes
#: near it in SI units (1e50 bytes, seconds or FLOP/s), and bounding inputs keeps every product of a
#: few of them finite: 1e300 would silently overflow to inf.
MAX_MAGNITUDE = 1e50
#: The largest whole number an integer parameter (a batch size, a length, a count) may have: above
#: 2**53 consecutive integers are no longer exact in float64, nor safe to cast to int64.
MAX_INTEGER = 2 ** 53


def _describe(value) -> str:
    arr = np.asarray(value)
    if arr.ndim == 0:
        return repr(value)
    return f"an array of shape {arr.shape}"


def as_array(name: str, value) -> np.ndarray:
    """Convert ``value`` to a float array, rejecting text, None, NaN and infinities.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """
    if value is None or isinstance(value, (str, bytes)):
        raise ValueError(f"{name} must be a number or an array of numbers, got {value!r}")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a number or an array of numbers, got {value!r}"
        ) from None
    if arr.ndim == 0:   # one number: plain Python comparisons, no array passes
        x = float(arr)
        if -MAX_MAGNITUDE <= x <= MAX_MAGNITUDE:
            return arr
    elif arr.size == 0 or (arr.max() <= MAX_MAGNITUDE and arr.min() >= -MAX_MAGNITUDE):   # NaN fails both
        return arr
    if not np.all(np.isfinite(arr)):
        bad = arr[~np.isfinite(arr)].flat[0]
        raise ValueError(f"{name} must be finite, got {bad!r} in {_describe(value)}")
    if arr.size and np.any(np.abs(arr) > MAX_MAGNITUDE):
        bad = arr[np.abs(arr) > MAX_MAGNITUDE].flat[0]
        raise ValueError(f"{name} must be at most {MAX_MAGNITUDE:g} in magnitude (no serving quantity is "
                         f"larger in SI units), got {bad:g}" + ("" if arr.ndim == 0 else f" in {_describe(value)}"))
    return arr


def _single(name, arr, scalar, kind=float):
    """``arr`` as a Python number when ``scalar`` asks for one (refusing arrays), else unchanged."""
    if not scalar:
        return arr
    check_scalar(name, arr)
    return kind(arr)


def check_positive(name: str, value, *, scalar: bool = False):
    """Return ``value`` as an array after checking every element is > 0.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    With ``scalar=True`` the value must be one number (not an array) and comes back as a float.
    """
    if scalar:
        check_scalar(name, value)
    arr = as_array(name, value)
    if arr.size and np.any(arr <= 0):
        bad = arr[arr <= 0].flat[0]
        raise ValueError(f"{name} must be > 0, got {bad:g}" + (
            "" if arr.ndim == 0 else f" in {_describe(value)}"))
    return _single(name, arr, scalar)


def check_nonnegative(name: str, value, *, scalar: bool = False):
    """Return ``value`` as an array after checking every element is >= 0 (``scalar=True``: one float).

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """
    if scalar:
        check_scalar(name, value)
    arr = as_array(name, value)
    if arr.ndim == 0 and float(arr) >= 0:   # one number: a plain comparison
        return _single(name, arr, scalar)
    if arr.size and np.any(arr < 0):
        bad = arr[arr < 0].flat[0]
        raise ValueError(f"{name} must be >= 0, got {bad:g}" + (
            "" if arr.ndim == 0 else f" in {_describe(value)}"))
    return _single(name, arr, scalar)


def check_fraction(name: str, value, *, scalar: bool = False):
    """Check an efficiency or probability: 0 < value <= 1 (``scalar=True``: one float).

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """
    if scalar:
        check_scalar(name, value)
    arr = as_array(name, value)
    if arr.size and np.any((arr <= 0) | (arr > 1)):
        bad = arr[(arr <= 0) | (arr > 1)].flat[0]
        raise ValueError(f"{name} must be in (0, 1], got {bad:g}")
    return _single(name, arr, scalar)


def check_integer(name: str, value, minimum: int = 1, *, scalar: bool = False):
    """Check that every element is a whole number, ``minimum`` <= value <= 2**53.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Floats that are whole (``8.0``) are accepted; ``8.5`` is not. With
    ``scalar=True`` the value must be one number and comes back as an int.
    """
    if scalar:
        check_scalar(name, value)
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    arr = as_array(name, value)
    if arr.ndim == 0:   # one number: plain Python comparisons
        x = float(arr)
        if x == int(x) and minimum <= x <= MAX_INTEGER:
            return _single(name, arr, scalar, int)
    if arr.size and np.any(arr != np.round(arr)):
        bad = arr[arr != np.round(arr)].flat[0]
        raise ValueError(f"{name} must be a whole number, got {bad:g}")
    if arr.size and np.any(arr < minimum):
        bad = arr[arr < minimum].flat[0]
        raise ValueError(f"{name} must be an integer >= {minimum}, got {bad:g}")
    if arr.size and np.any(arr > MAX_INTEGER):
        bad = arr[arr > MAX_INTEGER].flat[0]
        raise ValueError(f"{name} must be an integer <= 2**53 = {MAX_INTEGER}, got {bad:g}")
    return _single(name, arr, scalar, int)


def check_choice(name: str, value, allowed: Iterable[str]) -> str:
    """Check that a string is one of ``allowed``; suggest close matches otherwise.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """
    allowed = list(allowed)
    if not isinstance(value, str) or value not in allowed:
        raise unknown_name(name, value, allowed)
    return value


class UnknownNameError(KeyError, ValueError):
    """An unknown model, accelerator, data type or question name.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    It is both a ``KeyError`` (a failed look-up) and a ``ValueError`` (bad
    input), and prints its message without the quotes ``KeyError`` adds.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def unknown_name(name: str, value, allowed: Iterable[str]) -> UnknownNameError:
    """Build an error naming the parameter, the value and close matches.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """
    allowed = sorted(allowed)
    close = difflib.get_close_matches(str(value), allowed, n=3, cutoff=0.5)
    if not close:  # case-insensitive fallback: 'a100' -> 'A100-SXM4-80GB'
        low = str(value).lower()
        close = [a for a in allowed if low and low in a.lower()][:3]
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return UnknownNameError(f"unknown {name} {value!r}.{hint} Allowed: {', '.join(allowed)}")


def is_scalar_input(*values) -> bool:
    """True when every input is a plain number or a 0-d array (used to refuse arrays where only
    scalars make sense, never to decide the type of a result)."""
    return all(isinstance(v, numbers.Number) or np.ndim(v) == 0 for v in values)


def _result_array(result, dtype):
    if result is None or isinstance(result, (str, bytes)):
        raise TypeError(f"result must be a number or an array of numbers, got {result!r:.60}")
    try:
        arr = np.asarray(result, dtype=dtype)
    except (TypeError, ValueError):
        raise TypeError(f"result must be a number or an array of numbers, got {result!r:.60}") from None
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"result must be a number or an array of numbers, got {result!r:.60}")
    return arr


def scalar_or_array(result):
    """A Python float when ``result`` is 0-dimensional, else a float array.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Decided from the result's shape, as numpy-financial does: a computation whose
    inputs all were scalars broadcasts to a 0-d result, and one with any array
    input to an array, so no list of inputs has to be kept by hand.

    It converts results, not inputs: NaN and inf (a quantity that is undefined
    or unbounded by design, e.g. the wait of an unstable queue) pass through
    unchanged; None and text are refused.

    >>> scalar_or_array(np.float64(2.5)), scalar_or_array([1, 2])
    (2.5, array([1., 2.]))
    """
    arr = _result_array(result, float)
    if arr.ndim == 0:
        return float(arr)
    return arr


def int_or_array(result):
    """A Python int when ``result`` is 0-dimensional, else an int64 array.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    >>> int_or_array(np.int64(3)), int_or_array([1.0, 2.0])
    (3, array([1, 2]))
    """
    arr = _result_array(result, None)
    if arr.size and not np.all(np.isfinite(arr.astype(float))):
        raise ValueError(f"result must be finite to be an integer, got {_describe(result)}")
    if arr.ndim == 0:
        return int(arr)
    return arr.astype(np.int64)


def check_bool(name: str, value) -> bool:
    """Check a flag: True or False (numpy booleans too), nothing else."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_scalar(name: str, value):
    """Refuse arrays where one number is needed; returns the value unchanged."""
    try:
        ndim = np.ndim(value)
    except ValueError:  # a ragged list
        ndim = 1
    if ndim != 0:
        raise ValueError(f"{name} must be a single number here, got {_describe_safely(value)}")
    return value


def _describe_safely(value) -> str:
    try:
        return f"an array of shape {np.shape(value)}"
    except ValueError:
        return f"a ragged sequence {value!r:.60}"


def check_broadcast(**arrays):
    """Broadcast the named arrays against each other; on a shape mismatch name them and their shapes.

    >>> [a.shape for a in check_broadcast(batch_size=[1, 8], context_len=1024)]
    [(2,), (2,)]
    """
    values = [np.asarray(v) for v in arrays.values()]
    check_broadcast_shapes(**dict(zip(arrays, values)))
    return np.broadcast_arrays(*values)


def check_broadcast_shapes(**arrays) -> tuple:
    """The shape the named arrays broadcast to (:func:`check_broadcast` without building the arrays)."""
    shapes = [np.shape(v) for v in arrays.values()]
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        listed = ", ".join(f"{k} {shape}" for k, shape in zip(arrays, shapes))
        raise ValueError(f"{' and '.join(arrays)} must have shapes that broadcast together "
                         f"(equal, or 1, or scalar), got {listed}") from None


def check_same_size(**arrays):
    """Check that the named 1-d arrays (per-request values) hold the same number of entries."""
    sizes = {k: np.size(v) for k, v in arrays.items()}
    if len(set(sizes.values())) > 1:
        listed = ", ".join(f"{k} {n}" for k, n in sizes.items())
        raise ValueError(f"{' and '.join(arrays)} must have the same length (one entry per request), "
                         f"got {listed}")
    return arrays


class MissingFileError(FileNotFoundError, ValueError):
    """A path that names no file: bad input (a ``ValueError``) and a ``FileNotFoundError``."""


def check_path(name: str, value):
    """A ``str`` or ``os.PathLike`` as a :class:`pathlib.Path`; a ``TypeError`` naming ``name`` otherwise.

    (An ``int`` would be read by ``open()`` as a file descriptor: 0 is standard input.)
    """
    import os
    import pathlib

    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or pathlib.Path), got {type(value).__name__} {value!r:.60}")
    return pathlib.Path(value)


def check_seeds(name: str, value) -> tuple:
    """A non-empty sequence of seeds (whole numbers >= 0) as a tuple of ints.

    >>> check_seeds("seeds", (0, 1, 2))
    (0, 1, 2)
    """
    if isinstance(value, (str, bytes)) or not np.iterable(value):
        raise TypeError(f"{name} must be a sequence of seeds (whole numbers >= 0) such as (0, 1, 2), got {value!r:.60}")
    seeds = tuple(check_integer(name, s, minimum=0, scalar=True) for s in value)
    if not seeds:
        raise ValueError(f"{name} must hold at least one seed, got an empty sequence")
    return seeds


def check_argv(argv):
    """A command line's words (a list or tuple of str) or None (the process's own); a TypeError otherwise."""
    if argv is not None and (isinstance(argv, (str, bytes)) or not isinstance(argv, (list, tuple))
                             or not all(isinstance(a, str) for a in argv)):
        raise TypeError(f"argv must be a list of the command line's words (str), or None, got {argv!r:.60}")
    return argv


def check_real(name: str, value) -> float:
    """One real number as a float, for display: NaN and inf pass (they print), text, None and arrays do not."""
    if isinstance(value, (str, bytes, bool)) or value is None or np.ndim(value) != 0:
        raise TypeError(f"{name} must be one real number, got {value!r:.60}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be one real number, got {value!r:.60}") from None


def check_nonempty(name: str, value):
    """Refuse an empty array where at least one value is needed; returns the value unchanged."""
    if np.size(value) == 0:
        raise ValueError(f"{name} must be a number or an array of at least one, got an empty array")
    return value


def check_instance(name: str, value, kind, what: str | None = None):
    """Check ``isinstance(value, kind)``; a ``TypeError`` naming the parameter and the type otherwise."""
    if not isinstance(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        what = what or " or ".join(k.__name__ for k in kinds)
        raise TypeError(f"{name} must be a {what}, got {type(value).__name__} {value!r:.60}")
    return value


def bisect_increasing(excess, lower, upper, iterations: int = 200):
    """Root of ``excess(x)`` on [lower, upper] for an increasing function, by bisection (arrays).

    ``excess(lower) < 0 <= excess(upper)`` is assumed element-wise; the result
    is within (upper - lower) / 2**iterations of the root. The library's one
    bisection: knees of MoE models, batch sizes under a target, break-even batches.
    """
    lo = np.array(lower, dtype=float)
    hi = np.array(upper, dtype=float)
    lo, hi = np.broadcast_arrays(lo, hi)
    lo, hi = lo.copy(), hi.copy()
    for _ in range(iterations):
        mid = (lo + hi) / 2
        below = np.asarray(excess(mid)) < 0
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
        if np.all(hi - lo <= 1e-12 * np.maximum(1.0, np.abs(hi))):
            break
    return (lo + hi) / 2


def freeze_number(value):
    """A validated number as a float, an array as a read-only float array.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        return float(arr)
    arr = arr.copy()
    arr.setflags(write=False)
    return arr


class ValueFields:
    """Equality, hashing and repr for frozen dataclasses whose numeric fields may be arrays.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).
    """

    def _key(self):
        out = []
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                v = ("array", v.shape, v.tobytes())
            elif isinstance(v, dict):
                v = tuple(sorted(v.items()))
            out.append(v)
        return tuple(out)

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        return hash((self.__class__.__name__,) + self._key())
