"""Numeric data types: bytes per element of weights, KV cache and activations.

The book names data types by their usual short names. ``int4`` is 0.5 bytes
per element (two weights share a byte); quantisation scales and zero points are
ignored here (they add roughly 1-3 % for group size 128).

Examples
--------
>>> bytes_per_element("bf16")
2.0
>>> bytes_per_element("int4")
0.5
>>> bytes_per_element("fp6")
Traceback (most recent call last):
...
servingmath._validation.UnknownNameError: unknown dtype 'fp6'. Did you mean 'fp16', 'fp8', 'fp32'? Allowed: bf16, fp16, fp32, fp8, int4, int8
"""

from __future__ import annotations

from ._validation import check_choice

__all__ = ["BYTES_PER_ELEMENT", "DTYPES", "bytes_per_element", "check_dtype"]

BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}
DTYPES = tuple(BYTES_PER_ELEMENT)


def check_dtype(dtype: str, name: str = "dtype") -> str:
    """Return ``dtype`` if known, else raise naming the parameter and the choices."""
    return check_choice(name, dtype, DTYPES)


def bytes_per_element(dtype: str) -> float:
    """Bytes one element of ``dtype`` occupies (``bf16`` -> 2.0)."""
    return BYTES_PER_ELEMENT[check_dtype(dtype)]
