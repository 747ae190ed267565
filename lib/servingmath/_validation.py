"""Input checks shared by every public function.

Each check raises a ``ValueError`` (or ``KeyError`` for names) whose message
names the parameter, the value it got and what is allowed, so that bad input
never turns into a silent wrong number or a traceback deep inside numpy.
"""

from __future__ import annotations

import difflib
import numbers
from collections.abc import Iterable

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
]


def _describe(value) -> str:
    arr = np.asarray(value)
    if arr.ndim == 0:
        return repr(value)
    return f"an array of shape {arr.shape}"


def as_array(name: str, value) -> np.ndarray:
    """Convert ``value`` to a float array, rejecting text, None, NaN and infinities."""
    if value is None or isinstance(value, (str, bytes)):
        raise ValueError(f"{name} must be a number or an array of numbers, got {value!r}")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a number or an array of numbers, got {value!r}"
        ) from None
    if arr.size and not np.all(np.isfinite(arr)):
        bad = arr[~np.isfinite(arr)].flat[0]
        raise ValueError(f"{name} must be finite, got {bad!r} in {_describe(value)}")
    return arr


def check_positive(name: str, value) -> np.ndarray:
    """Return ``value`` as an array after checking every element is > 0."""
    arr = as_array(name, value)
    if arr.size and np.any(arr <= 0):
        bad = arr[arr <= 0].flat[0]
        raise ValueError(f"{name} must be > 0, got {bad:g}" + (
            "" if arr.ndim == 0 else f" in {_describe(value)}"))
    return arr


def check_nonnegative(name: str, value) -> np.ndarray:
    """Return ``value`` as an array after checking every element is >= 0."""
    arr = as_array(name, value)
    if arr.size and np.any(arr < 0):
        bad = arr[arr < 0].flat[0]
        raise ValueError(f"{name} must be >= 0, got {bad:g}" + (
            "" if arr.ndim == 0 else f" in {_describe(value)}"))
    return arr


def check_fraction(name: str, value) -> np.ndarray:
    """Check an efficiency or probability: 0 < value <= 1."""
    arr = as_array(name, value)
    if arr.size and np.any((arr <= 0) | (arr > 1)):
        bad = arr[(arr <= 0) | (arr > 1)].flat[0]
        raise ValueError(f"{name} must be in (0, 1], got {bad:g}")
    return arr


def check_integer(name: str, value, minimum: int = 1) -> np.ndarray:
    """Check that every element is a whole number >= ``minimum``.

    Floats that are whole (``8.0``) are accepted; ``8.5`` is not.
    """
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    arr = as_array(name, value)
    if arr.size and np.any(arr != np.round(arr)):
        bad = arr[arr != np.round(arr)].flat[0]
        raise ValueError(f"{name} must be a whole number, got {bad:g}")
    if arr.size and np.any(arr < minimum):
        bad = arr[arr < minimum].flat[0]
        raise ValueError(f"{name} must be an integer >= {minimum}, got {bad:g}")
    return arr


def check_choice(name: str, value, allowed: Iterable[str]) -> str:
    """Check that a string is one of ``allowed``; suggest close matches otherwise."""
    allowed = list(allowed)
    if not isinstance(value, str) or value not in allowed:
        raise unknown_name(name, value, allowed)
    return value


class UnknownNameError(KeyError, ValueError):
    """An unknown model, accelerator, data type or question name.

    It is both a ``KeyError`` (a failed look-up) and a ``ValueError`` (bad
    input), and prints its message without the quotes ``KeyError`` adds.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def unknown_name(name: str, value, allowed: Iterable[str]) -> UnknownNameError:
    """Build an error naming the parameter, the value and close matches."""
    allowed = sorted(allowed)
    close = difflib.get_close_matches(str(value), allowed, n=3, cutoff=0.5)
    if not close:  # case-insensitive fallback: 'a100' -> 'A100-SXM4-80GB'
        low = str(value).lower()
        close = [a for a in allowed if low and low in a.lower()][:3]
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return UnknownNameError(f"unknown {name} {value!r}.{hint} Allowed: {', '.join(allowed)}")


def is_scalar_input(*values) -> bool:
    """True when every input is a plain number (so the result should be a float)."""
    return all(isinstance(v, numbers.Number) or np.ndim(v) == 0 for v in values)


def scalar_or_array(result, *inputs):
    """Return a Python float when every input was scalar, else the array."""
    if is_scalar_input(*inputs):
        return float(np.asarray(result))
    return np.asarray(result, dtype=float)
