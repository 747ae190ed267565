"""Rooflines: arithmetic intensity, the ridge point, and time bounds from FLOPs and bytes.

An operation that performs ``flops`` FLOPs and moves ``bytes_moved`` bytes
cannot finish faster than either resource allows. With perfect overlap of
compute and memory traffic its time is the *lower bound*
``max(flops / F, bytes / W)``; with none it is the *upper bound*, their sum.
Every real kernel lies between the two, and the upper is at most twice the lower.

``mfu`` and ``mbu`` (model FLOP utilisation and memory-bandwidth utilisation,
as Databricks defines them: achieved / peak) scale the peaks; the default 1.0
gives the physical bound.

Examples
--------
>>> h100 = "H100-SXM5-80GB"
>>> compute_time(989.4e12, h100)
1.0
>>> memory_time(3.35e12, h100)
1.0
>>> time_lower_bound(989.4e12, 3.35e12 / 2, h100)
1.0
>>> time_upper_bound(989.4e12, 3.35e12 / 2, h100)
1.5
"""

from __future__ import annotations

import numpy as np

from ._validation import check_choice, check_fraction, check_nonnegative, check_positive, scalar_or_array
from .hardware import get_accelerator

__all__ = [
    "arithmetic_intensity",
    "ridge_point",
    "attainable_flops",
    "compute_time",
    "memory_time",
    "time_lower_bound",
    "time_upper_bound",
    "combine_step_parts",
    "OVERLAP_MODELS",
]

OVERLAP_MODELS = ("additive", "roofline", "hybrid")


def arithmetic_intensity(flops, bytes_moved):
    """FLOPs per byte moved: I = flops / bytes.

    >>> arithmetic_intensity(2e9, 1e9)
    2.0
    """
    f = check_nonnegative("flops", flops)
    b = check_positive("bytes_moved", bytes_moved)
    return scalar_or_array(f / b, flops, bytes_moved)


def ridge_point(accelerator, dtype: str = "bf16", mfu=1.0, mbu=1.0):
    """Intensity at which an operation turns compute-bound: (F x MFU) / (W x MBU), FLOP/byte.

    >>> round(ridge_point("A100-SXM4-80GB"), 1)
    153.0
    """
    acc = get_accelerator(accelerator)
    m = check_fraction("mfu", mfu)
    u = check_fraction("mbu", mbu)
    return scalar_or_array(acc.peak_flops(dtype) * m / (acc.memory_bandwidth * u), mfu, mbu)


def attainable_flops(intensity, accelerator, dtype: str = "bf16", mfu=1.0, mbu=1.0):
    """The roofline: min(F x MFU, I x W x MBU) in FLOP/s."""
    acc = get_accelerator(accelerator)
    i = check_nonnegative("intensity", intensity)
    m = check_fraction("mfu", mfu)
    u = check_fraction("mbu", mbu)
    return scalar_or_array(np.minimum(acc.peak_flops(dtype) * m, i * acc.memory_bandwidth * u),
                           intensity, mfu, mbu)


def compute_time(flops, accelerator, dtype: str = "bf16", mfu=1.0):
    """Seconds to perform ``flops`` at F x MFU: flops / (F x MFU)."""
    acc = get_accelerator(accelerator)
    f = check_nonnegative("flops", flops)
    m = check_fraction("mfu", mfu)
    return scalar_or_array(f / (acc.peak_flops(dtype) * m), flops, mfu)


def memory_time(bytes_moved, accelerator, mbu=1.0):
    """Seconds to move ``bytes_moved`` at W x MBU: bytes / (W x MBU)."""
    acc = get_accelerator(accelerator)
    b = check_nonnegative("bytes_moved", bytes_moved)
    u = check_fraction("mbu", mbu)
    return scalar_or_array(b / (acc.memory_bandwidth * u), bytes_moved, mbu)


def time_lower_bound(flops, bytes_moved, accelerator, dtype: str = "bf16", mfu=1.0, mbu=1.0):
    """Perfect overlap: max(compute time, memory time), in seconds."""
    return scalar_or_array(np.maximum(compute_time(flops, accelerator, dtype, mfu),
                                      memory_time(bytes_moved, accelerator, mbu)),
                           flops, bytes_moved, mfu, mbu)


def time_upper_bound(flops, bytes_moved, accelerator, dtype: str = "bf16", mfu=1.0, mbu=1.0):
    """No overlap: compute time + memory time, in seconds."""
    return scalar_or_array(compute_time(flops, accelerator, dtype, mfu)
                           + memory_time(bytes_moved, accelerator, mbu),
                           flops, bytes_moved, mfu, mbu)


def combine_step_parts(overlap: str, weight_memory, linear_compute, kv_memory, attention_compute):
    """Combine the four parts of a transformer step into one time, by overlap model.

    * ``"additive"``: no overlap, the sum of all four (an upper bound);
    * ``"roofline"``: perfect overlap of all memory traffic with all compute,
      max(weights + KV, linear + attention) (a lower bound);
    * ``"hybrid"``: each kernel overlaps its own traffic with its own math:
      max(weights, linear) + max(KV, attention). The weight matmuls can turn
      compute-bound as the batch grows; decode attention stays bandwidth-bound
      (its intensity is about G = H/K FLOP per byte of bf16 KV, far below any ridge).

    All inputs are seconds (arrays broadcast).
    """
    check_choice("overlap", overlap, OVERLAP_MODELS)
    if overlap == "additive":
        return weight_memory + linear_compute + kv_memory + attention_compute
    if overlap == "roofline":
        return np.maximum(weight_memory + kv_memory, linear_compute + attention_compute)
    return np.maximum(weight_memory, linear_compute) + np.maximum(kv_memory, attention_compute)
