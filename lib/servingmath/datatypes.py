"""Numeric data types: bytes per element of weights, KV cache and activations.

The book names data types by their usual short names. ``int4`` is 0.5 bytes
per element (two weights share a byte); quantisation scales and zero points are
ignored here (they add roughly 1-3 % for group size 128).

The two 4-bit floating-point *block* formats are different: their scales are
part of the format, so their bytes per element include them
(:data:`BLOCK_SCALE_BYTES` states the scale share separately):

* ``nvfp4`` (NVIDIA Blackwell): E2M1 values, one FP8 (E4M3) scale per block of
  16 elements: 0.5 + 1/16 = 0.5625 bytes per element (plus one FP32 scale per
  tensor, negligible);
* ``mxfp4`` (OCP Microscaling v1.0): E2M1 values, one E8M0 scale per block of
  32 elements: 0.5 + 1/32 = 0.53125 bytes per element.

Their tensor-core peaks are the ``fp4`` column of the accelerator catalog
(Blackwell runs both at the same rate).

Examples
--------
>>> bytes_per_element("bf16")
2.0
>>> bytes_per_element("int4")
0.5
>>> bytes_per_element("nvfp4"), BLOCK_SCALE_BYTES["nvfp4"]
(0.5625, 0.0625)
>>> bytes_per_element("fp6")
Traceback (most recent call last):
...
servingmath._validation.UnknownNameError: unknown dtype 'fp6'. Did you mean 'fp16', 'fp8', 'fp32'? Allowed: bf16, fp16, fp32, fp8, int4, int8, mxfp4, nvfp4
"""

from __future__ import annotations

from ._validation import check_choice

__all__ = ["BYTES_PER_ELEMENT", "BLOCK_SCALE_BYTES", "DTYPES", "bytes_per_element", "check_dtype"]

BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    # 4-bit floats with their block scales (the 0.5-byte payload + BLOCK_SCALE_BYTES)
    "nvfp4": 0.5 + 1 / 16,
    "mxfp4": 0.5 + 1 / 32,
}
#: The share of BYTES_PER_ELEMENT that is block scales: nvfp4 one 1-byte E4M3 scale per
#: 16 elements (NVIDIA, "NVFP4" in the Blackwell/TensorRT documentation); mxfp4 one 1-byte
#: E8M0 scale per 32 elements (OCP Microscaling Formats Specification v1.0, 2023-09).
BLOCK_SCALE_BYTES: dict[str, float] = {"nvfp4": 1 / 16, "mxfp4": 1 / 32}
DTYPES = tuple(BYTES_PER_ELEMENT)


def check_dtype(dtype: str, name: str = "dtype") -> str:
    """Return ``dtype`` if known, else raise naming the parameter and the choices.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Examples
    --------
    >>> check_dtype("fp8", "kv_dtype")
    'fp8'
    """
    return check_choice(name, dtype, DTYPES)


def bytes_per_element(dtype: str) -> float:
    """Bytes one element of ``dtype`` occupies (``bf16`` -> 2.0).

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    Examples
    --------
    >>> bytes_per_element("bf16"), bytes_per_element("fp8"), bytes_per_element("int4")
    (2.0, 1.0, 0.5)
    """
    return BYTES_PER_ELEMENT[check_dtype(dtype)]
