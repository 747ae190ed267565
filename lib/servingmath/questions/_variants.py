"""Shared pieces of the questions' variants: the values a variant may draw, and the names prompts show.

A question's ``variants`` lists, for each parameter, the values a per-student variant may draw
(:meth:`servingmath.checks.Question.draw_for`); every list holds the question's default, so the
book's own numbers are one of the variants. ``derive`` helpers here add the display names
("H100 SXM" for ``H100-SXM5-80GB``) that a prompt shows.
"""

from __future__ import annotations

__all__ = ["GPU_NAMES", "named", "GQA_8B_CLASS", "GQA_8B_LARGE_VOCAB", "GPUS_FP8", "GPUS_BIG"]

#: How prompts name each accelerator (the catalog name where the prompt used it).
GPU_NAMES = {
    "H100-SXM5-80GB": "H100 SXM", "H100-PCIe-80GB": "H100 PCIe", "H100-NVL-94GB": "H100 NVL",
    "H200-SXM-141GB": "H200 SXM", "A100-SXM4-80GB": "A100 SXM (80 GB)", "A100-SXM4-40GB": "A100 SXM (40 GB)",
    "MI300X": "MI300X", "L40S": "L40S", "GH200-144GB": "GH200",
}
#: Models of the 7-8B class with grouped-query attention (their K and V heads differ from the query heads).
GQA_8B_CLASS = ("Llama-3.1-8B", "Mistral-7B", "Qwen2.5-7B")
#: The same class without Mistral-7B, whose small vocabulary (32,000) makes its embedding table too small
#: to tell apart the slip of charging it to every step when the KV cache dominates.
GQA_8B_LARGE_VOCAB = ("Llama-3.1-8B", "Qwen2.5-7B")
#: The same class without Mistral-7B, whose 4096-token sliding window caps what a longer sequence
#: holds (its cache stops growing at the window: chapter 03).
GQA_8B_FULL_ATTENTION = ("Llama-3.1-8B", "Qwen2.5-7B")
#: Accelerators with an fp8 peak in the catalog.
GPUS_FP8 = ("H100-SXM5-80GB", "H200-SXM-141GB", "MI300X", "L40S")
#: Accelerators with 80 GB or more of memory and a bf16 peak.
GPUS_BIG = ("H100-SXM5-80GB", "H200-SXM-141GB", "A100-SXM4-80GB", "MI300X")


def named(extra=None, **fields):
    """A ``derive`` that adds display names: ``named(gpu="accelerator")`` sets ``p["gpu"]`` to
    ``GPU_NAMES[p["accelerator"]]`` and ``p["gpu_gb"]`` to its memory in GB; ``extra`` (another
    derive) runs after."""
    def derive(p):
        from ..hardware import get_accelerator

        q = dict(p)
        for field, source in fields.items():
            q[field] = GPU_NAMES.get(q[source], q[source])
            q[field + "_gb"] = get_accelerator(q[source]).memory_bytes / 1e9
        return extra(q) if extra else q

    return derive
