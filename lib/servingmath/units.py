"""Units: decimal and binary byte prefixes kept apart, time and rate constants, display.

Every function in :mod:`servingmath` takes and returns SI base units: seconds,
bytes, FLOPs, FLOP/s, bytes/s, tokens/s. Convert only for display, with the
constants and formatters here.

Decimal prefixes (``GB = 1e9``) are what spec sheets use for bandwidth
(``3.35 TB/s``) and usually for capacity (``80 GB``); binary prefixes
(``GiB = 2**30``) are what ``nvidia-smi``, PyTorch and most serving logs print.
They differ by 7.4 % at the giga scale, enough to change a batch-size answer.

Examples
--------
>>> GB, GiB
(1000000000.0, 1073741824)
>>> round(GiB / GB, 4)
1.0737
>>> format_bytes(524_288)
'524.3 kB'
>>> format_bytes(524_288, binary=True)
'512.0 KiB'
>>> format_seconds(0.0123)
'12.3 ms'
>>> parse_quantity("12 ms")
(0.012, 's')
"""

from __future__ import annotations

import math
import re

from ._validation import check_real

__all__ = [
    "kB", "MB", "GB", "TB", "PB", "KiB", "MiB", "GiB", "TiB",
    "ms", "us", "ns", "minute", "hour",
    "kilo", "mega", "giga", "tera", "peta",
    "format_bytes", "format_seconds", "format_flops", "format_rate", "format_si",
    "parse_quantity", "UNIT_SCALES",
]

# decimal (SI) prefixes
kilo, mega, giga, tera, peta = 1e3, 1e6, 1e9, 1e12, 1e15
kB, MB, GB, TB, PB = kilo, mega, giga, tera, peta
# binary (IEC) prefixes
KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40
# time
ms, us, ns = 1e-3, 1e-6, 1e-9
minute, hour = 60.0, 3600.0

_SI_PREFIXES = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]
_IEC_PREFIXES = [(TiB, "Ti"), (GiB, "Gi"), (MiB, "Mi"), (KiB, "Ki"), (1, "")]


def format_si(value: float, unit: str, digits: int = 1) -> str:
    """Format ``value`` with the largest SI prefix that keeps it >= 1 (``3.4 TB/s``).

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Examples
    --------
    >>> format_si(3.35e12, "B/s")
    '3.4 TB/s'
    """
    value = check_real("value", value)
    if value == 0 or not math.isfinite(value):
        return f"{value:.{digits}f} {unit}"
    for scale, prefix in _SI_PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}f} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}"


def format_bytes(n_bytes: float, binary: bool = False, digits: int = 1) -> str:
    """Format a byte count with decimal (kB, GB) or binary (KiB, GiB) prefixes.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Examples
    --------
    >>> format_bytes(16.06e9), format_bytes(16.06e9, binary=True)
    ('16.1 GB', '15.0 GiB')
    """
    n_bytes = check_real("n_bytes", n_bytes)
    if not binary:
        return format_si(n_bytes, "B", digits)
    for scale, prefix in _IEC_PREFIXES:
        if abs(n_bytes) >= scale:
            return f"{n_bytes / scale:.{digits}f} {prefix}B"
    return f"{n_bytes:.{digits}f} B"


def format_seconds(seconds: float, digits: int = 1) -> str:
    """Format a duration in s, ms, µs or ns, whichever reads best.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Examples
    --------
    >>> format_seconds(0.0123), format_seconds(4.5e-6)
    ('12.3 ms', '4.5 µs')
    """
    seconds = check_real("seconds", seconds)
    for scale, unit in [(1.0, "s"), (ms, "ms"), (us, "µs"), (ns, "ns")]:
        if abs(seconds) >= scale:
            return f"{seconds / scale:.{digits}f} {unit}"
    return f"{seconds:.{digits}g} s"


def format_flops(flops_per_second: float, digits: int = 1) -> str:
    """Format a compute rate: ``989.4 TFLOP/s``.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Examples
    --------
    >>> format_flops(989.4e12)
    '989.4 TFLOP/s'
    """
    return format_si(check_real("flops_per_second", flops_per_second), "FLOP/s", digits)


def format_rate(per_second: float, what: str = "tok", digits: int = 1) -> str:
    """Format a rate such as tokens per second: ``1.2 ktok/s``.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Examples
    --------
    >>> format_rate(1234.0), format_rate(2.5, "req")
    ('1.2 ktok/s', '2.5 req/s')
    """
    return format_si(check_real("per_second", per_second), f"{what}/s", digits)


# unit symbol -> (scale to SI, dimension)
UNIT_SCALES: dict[str, tuple[float, str]] = {
    "s": (1.0, "s"), "ms": (ms, "s"), "us": (us, "s"), "µs": (us, "s"), "ns": (ns, "s"),
    "min": (minute, "s"), "h": (hour, "s"),
    "B": (1.0, "B"), "kB": (kB, "B"), "KB": (kB, "B"), "MB": (MB, "B"), "GB": (GB, "B"),
    "TB": (TB, "B"), "PB": (PB, "B"), "KiB": (KiB, "B"), "MiB": (MiB, "B"), "GiB": (GiB, "B"), "TiB": (TiB, "B"),
    "bytes": (1.0, "B"), "byte": (1.0, "B"),
    "FLOP": (1.0, "FLOP"), "GFLOP": (giga, "FLOP"), "TFLOP": (tera, "FLOP"), "PFLOP": (peta, "FLOP"),
    "FLOP/s": (1.0, "FLOP/s"), "GFLOP/s": (giga, "FLOP/s"), "TFLOP/s": (tera, "FLOP/s"),
    "PFLOP/s": (peta, "FLOP/s"), "TFLOPS": (tera, "FLOP/s"),
    "B/s": (1.0, "B/s"), "GB/s": (GB, "B/s"), "TB/s": (TB, "B/s"), "GiB/s": (GiB, "B/s"),
    "tok/s": (1.0, "tok/s"), "tokens/s": (1.0, "tok/s"), "ktok/s": (kilo, "tok/s"),
    "req/s": (1.0, "req/s"), "FLOP/B": (1.0, "FLOP/B"),
    "tok": (1.0, "tok"), "tokens": (1.0, "tok"),
}

# Every part of the pattern has one way to match (no nested or adjacent repeats of the same
# characters), so a failed match costs time linear in the text; the text is also capped in length.
_QUANTITY = re.compile(r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)(?:\s*([A-Za-zµ/]+))?")
#: Longest text :func:`parse_quantity` reads (a number with a unit is never longer).
MAX_QUANTITY_TEXT = 100


def parse_quantity(text: str) -> tuple[float, str | None]:
    """Parse ``"12 ms"`` into ``(0.012, "s")``: the value in SI and its dimension.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    A bare number gives ``(value, None)``. Thousands separators (``524,288``)
    and underscores are accepted.

    Raises
    ------
    ValueError
        If the text is not a number followed by a known unit.

    Examples
    --------
    >>> parse_quantity("12 ms"), parse_quantity("80 GB")
    ((0.012, 's'), (80000000000.0, 'B'))
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string such as '12 ms', got {text!r}")
    if len(text) > MAX_QUANTITY_TEXT:
        raise ValueError(f"text is too long to be a number with a unit ({len(text)} characters; at most "
                         f"{MAX_QUANTITY_TEXT})")
    cleaned = text.replace(",", "").replace("_", "").strip()
    match = _QUANTITY.fullmatch(cleaned)
    if not match:
        raise ValueError(
            f"could not read text {text!r} as a number with an optional unit; "
            "write it like '12 ms', '0.5 GiB' or '1.2e3'"
        )
    number, unit = float(match.group(1)), match.group(2)
    if unit is None:
        return number, None
    if unit not in UNIT_SCALES:
        raise ValueError(
            f"unknown unit {unit!r} in {text!r}; known units: {', '.join(sorted(UNIT_SCALES))}"
        )
    scale, dimension = UNIT_SCALES[unit]
    return number * scale, dimension
