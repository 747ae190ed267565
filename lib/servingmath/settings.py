"""The book's two named settings: the physical bound, and one "realistic" setting.

Every headline of the book is given at two settings (the chapter "How to use
this book" explains why):

* ``"physical"``: every efficiency 1.0, no all-reduce latency, no per-step
  overhead. No engine beats it; it is what the formulas mean.
* ``"realistic"``: one named set of efficiencies (MFU, MBU), all-reduce costs
  and per-step overhead, calibrated on published measurements in the chapter
  "Validation" and reused by every chapter. It lives here, in one place.

Use a setting by name in any function that takes a deployment::

    decode.decode_step_time("Llama-3.1-8B", "H100", 64, 2048, setting="realistic")
    Deployment.build("Llama-3.1-8B", "H100", setting="realistic", weight_dtype="fp8")

Options given next to a setting override it. :func:`setting_options` returns
the keyword options of a setting for an accelerator.

Examples
--------
>>> setting_options("physical", "H100")["mbu"]
1.0
>>> sorted(setting_options("realistic", "H100"))
['allreduce_base_latency', 'allreduce_latency', 'allreduce_protocol', 'link_efficiency', 'mbu', 'mfu', 'step_overhead']
"""

from __future__ import annotations

from ._validation import check_choice
from .hardware import get_accelerator

__all__ = ["SETTINGS", "PHYSICAL", "REALISTIC", "setting_options"]

#: The physical bound: the library's defaults, spelled out so that ``setting="physical"`` also
#: resets a deployment that had other values.
PHYSICAL = {
    "mfu": 1.0,
    "mbu": 1.0,
    "step_overhead": 0.0,
    "allreduce_latency": 0.0,
    "allreduce_base_latency": 0.0,
    "allreduce_protocol": None,
    "link_efficiency": 1.0,
}

#: The "realistic" setting. Provenance (computed 2026-12-01 from ``data/published-measurements.csv``,
#: chapter "Validation"): a decode step at batch <= 16 reaches a median 0.69 of its physical bound
#: (12 rows: LMDeploy and FasterTransformer, A100), a prefill of >= 512 tokens a median 0.50 (19 rows:
#: TensorRT-LLM, LMDeploy, Databricks, FasterTransformer; A100, H100, L40S). MFU 0.5 is the second;
#: MBU 0.75 with a fixed 0.4 ms per step reproduces the first for a 7-8B model (6.5 ms / 0.75 + 0.4 ms
#: = 0.72 of the bound) while letting the overhead matter less for larger steps. The all-reduce
#: is NCCL's tuner on NVLink (:data:`servingmath.sharding.NCCL_RING_ALLREDUCE`, from NCCL's
#: ``src/graph/tuning.cc`` at commit 56a0c229, 2.29.7): each message costed with the fastest of the
#: LL, LL128 and Simple protocols, each with its own latencies and bandwidth (15 µs and 141 GB/s,
#: 40.6 µs and 331 GB/s, 56 µs and 360 GB/s of bus bandwidth on 8 x H100); the flat latencies are
#: 0 because the protocols bring their own. The validation chapter recomputes the efficiencies and
#: its test fails if they drift.
REALISTIC = {
    "mfu": 0.5,
    "mbu": 0.75,
    "step_overhead": 0.4e-3,
    "allreduce_latency": 0.0,
    "allreduce_base_latency": 0.0,
    "allreduce_protocol": "auto",
    "link_efficiency": 0.8,
}

#: name -> keyword options (a dict, or a function of the accelerator returning one).
SETTINGS = {"physical": PHYSICAL, "realistic": REALISTIC}


def setting_options(name: str, accelerator=None) -> dict:
    """The keyword options of a named setting (for ``accelerator``, where a setting depends on it).

    Derived in the chapter "The Pareto frontier" (notebooks/06_pareto_frontier.ipynb).

    Raises
    ------
    KeyError
        For an unknown name, with the names allowed.

    Examples
    --------
    >>> o = setting_options("realistic", "H100")
    >>> o["mfu"], o["mbu"], o["step_overhead"]
    (0.5, 0.75, 0.0004)
    """
    check_choice("setting name", name, SETTINGS)
    value = SETTINGS[name]
    if callable(value):
        return dict(value(get_accelerator(accelerator) if accelerator is not None else None))
    return dict(value)
