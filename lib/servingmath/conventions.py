"""The conventions on which the public references disagree, each a named option with the book's default.

A reader who follows a reference should reproduce its number exactly, and see
the book's number beside it with the reason they differ. Every row of
:data:`CONVENTIONS` names the option that switches a convention, the book's
default, the alternative, and which sources use which. Its ``example`` computes
one number both ways through the public API, so the table cannot drift from
the library (the test suite checks that each option exists and changes the
number).

One design rule decides where an option lives:

* a convention about what a **deployment does on every step** (how the KV
  cache is split over a tensor-parallel group, how an all-reduce is costed,
  how much memory the server may fill) is a deployment option, accepted by
  every function that takes a deployment (``kv_sharding``,
  ``allreduce_ring_factor``, ``gpu_memory_utilization``);
* a convention about **how one quantity is defined or counted** (the
  parameters of a GQA variant, an attention kernel's traffic, causal or full
  attention, E2E with n or n - 1 steps) is a keyword of the function that
  computes that quantity;
* how much of the **model** a problem states (all parameters read, embeddings
  ignored, attention FLOPs ignored) is said by the model itself:
  :func:`servingmath.models.model_from_totals`; a slice treated as one chip is
  an accelerator, :func:`servingmath.sharding.pooled_slice`.

Print the table in a chapter with ``print(conventions_table())``.

Examples
--------
>>> [c.name for c in CONVENTIONS][:3]
['gqa_weights', 'allreduce_ring_factor', 'kv_sharding']
>>> book, other = get_convention("e2e_decode_steps").example()
>>> round(book, 3), round(other, 3)   # seconds: TTFT 0.35 + 19 or 20 TPOTs of 20 ms
(0.73, 0.75)
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Callable

from ._validation import unknown_name

__all__ = ["Convention", "CONVENTIONS", "get_convention", "conventions_table"]


@dataclass(frozen=True)
class Convention:
    """One convention: where to switch it, the book's default, the alternative, and who uses which.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    Attributes
    ----------
    name : str
    question : str
        What the sources count differently.
    option : str
        The keyword (and where it is accepted) that switches it.
    default, alternative : str
        The book's value and the other, each with what it means.
    default_sources, alternative_sources : str
        Which references use each.
    chapter : str
        Where the book derives it.
    example : callable
        ``() -> (book's number, the alternative's number)`` for one worked case.
    """

    name: str
    question: str
    option: str
    default: str
    alternative: str
    default_sources: str
    alternative_sources: str
    chapter: str
    example: Callable[[], tuple]


def _gqa():
    from .models import parameter_count, with_kv_heads
    return (float(parameter_count(with_kv_heads("Llama-2-13B", 8))),
            float(parameter_count(with_kv_heads("Llama-2-13B", 8, weights="fixed"))))


def _ring():
    from .sharding import allreduce_time
    return (float(allreduce_time(16384 * 2 * 512, 16, 300e9)),
            float(allreduce_time(16384 * 2 * 512, 16, 300e9, ring_factor=False)))


def _kv_sharding():
    from .memory import max_batch_size
    return (float(max_batch_size("Llama-3.1-70B", "H100", 8192, tensor_parallel=16)),
            float(max_batch_size("Llama-3.1-70B", "H100", 8192, tensor_parallel=16, kv_sharding="batch")))


def _pooled():
    from .decode import decode_step_time
    from .sharding import pooled_slice
    return (float(decode_step_time("Llama-3.1-70B", "H100", 1, 2048, tensor_parallel=8,
                                   allreduce_latency=0.6e-6, allreduce_base_latency=6.6e-6)),
            float(decode_step_time("Llama-3.1-70B", pooled_slice("H100", 8), 1, 2048)))


def _kernel():
    from .roofline import prefill_attention_intensity
    return (float(prefill_attention_intensity("Llama-2-7B", 4096, causal=False)),
            float(prefill_attention_intensity("Llama-2-7B", 4096, causal=False, kernel="unfused")))


def _causal():
    from .roofline import prefill_attention_intensity
    return (float(prefill_attention_intensity("Llama-2-7B", 4096)),
            float(prefill_attention_intensity("Llama-2-7B", 4096, causal=False)))


def _e2e():
    from .metrics import e2e_from_ttft_tpot
    return (float(e2e_from_ttft_tpot(0.35, 0.02, 20)), float(e2e_from_ttft_tpot(0.35, 0.02, 20, decode_steps="n")))


def _memory_share():
    from .memory import max_batch_size
    return (float(max_batch_size("Llama-3.1-8B", "H100", 8192)),
            float(max_batch_size("Llama-3.1-8B", "H100", 8192, gpu_memory_utilization=1.0)))


def _weights_read():
    from .decode import decode_step_time
    from .models import as_totals, kv_bytes_per_token, model_from_totals, parameter_count
    every = model_from_totals(parameters=parameter_count("Llama-3.1-8B"),
                              kv_bytes_per_token=kv_bytes_per_token("Llama-3.1-8B"),
                              attention_flops_per_pair=as_totals("Llama-3.1-8B").attention_flops)
    return (float(decode_step_time("Llama-3.1-8B", "H100", 1, 0)), float(decode_step_time(every, "H100", 1, 0)))


def _sparse():
    from .hardware import get_accelerator
    h100 = get_accelerator("H100")
    return (h100.peak_flops("bf16") / h100.memory_bandwidth, h100.sparse_flops["bf16"] / h100.memory_bandwidth)


def _bytes():
    from .models import kv_bytes_per_token
    from .units import GB, GiB
    size = 8192 * kv_bytes_per_token("Llama-2-13B")
    return size / GB, size / GiB


CONVENTIONS = (
    Convention(
        "gqa_weights", "Fewer KV heads (GQA) as a what-if: are the K/V projection weights recomputed?",
        'models.with_kv_heads(model, K, weights=...)',
        '"recompute": P shrinks by 2 L D d_h (K - K\'), a real GQA model',
        '"fixed": same parameter count, only the KV cache shrinks',
        "the book; Stanford CS336 lecture 10 (num_params depends on K)",
        "How to Scale Your Model, inference chapter, LLaMA-2-13B table ('keep the total number of params the same')",
        "Memory", _gqa),
    Convention(
        "allreduce_ring_factor", "Bandwidth term of a ring all-reduce of m bytes over N GPUs",
        "deployment option allreduce_ring_factor; sharding.allreduce_time(ring_factor=)",
        "True: 2 (N - 1) / N x m / beta (Patarasuk & Yuan; NCCL's bus bandwidth)",
        "False: 2 m / beta, the (N - 1) / N rounded to 1",
        "the book; NCCL (nccl-tests busBW)",
        "kipply, Transformer Inference Arithmetic ('I'll round that N - 1 factor to N'); How to Scale Your Model "
        "(AllReduce = 2 x AllGather of the whole array, bidirectional ICI bandwidth)",
        "Tensor parallelism", _ring),
    Convention(
        "kv_sharding", "KV cache over a tensor-parallel group larger than the KV heads (N > K)",
        "deployment option kv_sharding",
        '"heads": split by KV heads, each head\'s cache replicated on N / K GPUs',
        '"batch": heads first, then the sequences: 1/N of the cache per GPU (the AllToAlls not counted)',
        "the book; vLLM (QKVParallelLinear replicates KV heads)",
        "How to Scale Your Model, 'Sharding the KV cache'; Pope et al., Efficiently Scaling Transformer Inference (2022)",
        "Tensor parallelism", _kv_sharding),
    Convention(
        "communication", "N chips: are the all-reduces counted, or is the slice one big chip?",
        "tensor_parallel=N on the chip, or sharding.pooled_slice(chip, N) with tensor_parallel=1",
        "tensor_parallel=N: 2 L all-reduces per step, KV-head rules, valid degrees only",
        "pooled_slice: N times the memory, bandwidth and FLOP/s, no communication",
        "the book; vLLM and TensorRT-LLM tensor parallelism",
        "How to Scale Your Model ('Theoretical Min Step Time' over the slice's total bandwidth); kipply (comms "
        "estimated apart and overlapped)",
        "Tensor parallelism", _pooled),
    Convention(
        "attention_kernel", "Attention traffic: does the score matrix go to HBM?",
        "roofline.decode_attention_intensity / prefill_attention_intensity(kernel=)",
        '"fused": read Q, K, V and write O once (FlashAttention)',
        '"unfused": also write and read back S and P, 4 H b_a bytes per (query, key) pair',
        "the book; How to Scale Your Model; CS336 ('with FlashAttention')",
        "Baseten, A guide to LLM inference and performance ('8N^2 + 8Nd' bytes, 62 ops/byte for Llama 2 7B)",
        "Rooflines", _kernel),
    Convention(
        "causal_pairs", "Pairs of a prompt's self-attention",
        "roofline.prefill_attention_intensity(causal=)",
        "True: L (L + 1) / 2 (causal mask; the step model counts these)",
        "False: L^2, the full score matrix",
        "the book; FlashAttention-2 (skips masked blocks)",
        "How to Scale Your Model (T / 2 for MHA); CS336 (S / 2); Baseten (N^2)",
        "Rooflines", _causal),
    Convention(
        "e2e_decode_steps", "TPOT gaps in a request of n output tokens",
        "metrics.e2e_from_ttft_tpot / time_per_output_token(decode_steps=)",
        '"n-1": the first token comes out of the prefill',
        '"n": E2E = TTFT + n x TPOT',
        "the book; vLLM's benchmark_serving (TPOT = (E2E - TTFT) / (n - 1))",
        "Databricks, LLM Inference Performance Engineering ('Latency = TTFT + TPOT x the number of tokens to be generated')",
        "Anatomy of a request", _e2e),
    Convention(
        "gpu_memory_utilization", "Share of a GPU's memory the server may fill",
        "deployment option gpu_memory_utilization",
        "0.9 (vLLM's default --gpu-memory-utilization)",
        "1.0: all of it",
        "the book; vLLM",
        "kipply (120 GB - 104 GB = 16 GB for the cache); How to Scale Your Model (16 GB per v5e)",
        "Memory", _memory_share),
    Convention(
        "weights_read", "Weight bytes a decode step reads",
        "a catalog ModelConfig, or models.model_from_totals(parameters=P) (embeddings ignored)",
        "(P - V D) b_w: the input embedding's rows are gathered, the table is not streamed",
        "P b_w: every parameter read, 2 P FLOPs per token",
        "the book; vLLM and TensorRT-LLM (embedding lookup kernels)",
        "kipply (2 P / A_bm); How to Scale Your Model ('Parameter Size / Total Memory Bandwidth'); CS336 (2 num_params)",
        "Decode", _weights_read),
    Convention(
        "dense_flops", "Peak FLOP/s of a datasheet",
        "hardware.Accelerator.peak_flops (dense) vs .sparse_flops (the headline)",
        "dense tensor-core FLOP/s",
        "2:4-sparse FLOP/s, twice the dense",
        "the book; How to Scale Your Model, Problem 5 of the roofline chapter",
        "NVIDIA's datasheets headline the sparse figure (with an asterisk)",
        "Rooflines", _sparse),
    Convention(
        "bytes_prefix", "GB: 1e9 or 2^30 bytes?",
        "units.GB, units.GiB (every function takes and returns bytes)",
        "GB = 1e9 (spec sheets, the catalog)",
        "GiB = 2^30 (nvidia-smi, PyTorch, vLLM's logs)",
        "the book; NVIDIA and Google spec sheets",
        "How to Scale Your Model's LLaMA-2-13B table labels decimal GB values 'GiB'",
        "Memory", _bytes),
)


def get_convention(name: str) -> Convention:
    """Look up a convention by name (close matches on a typo).

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    >>> get_convention("kv_sharding").option
    'deployment option kv_sharding'
    """
    for c in CONVENTIONS:
        if c.name == name:
            return c
    raise unknown_name("convention name", name, [c.name for c in CONVENTIONS])


def conventions_table(width: int = 110) -> str:
    """The conventions as plain text, one block per convention, for a chapter to print.

    Derived in the chapter "How to use this book" (notebooks/00_how_to_use_this_book.ipynb).

    >>> print(conventions_table().splitlines()[0])
    gqa_weights: Fewer KV heads (GQA) as a what-if: are the K/V projection weights recomputed?
    """
    lines = []
    for c in CONVENTIONS:
        lines.append(f"{c.name}: {c.question}")
        for label, text in (("switch", c.option), ("book", f"{c.default} -- {c.default_sources}"),
                            ("other", f"{c.alternative} -- {c.alternative_sources}")):
            lines.extend(textwrap.wrap(text, width=width, initial_indent=f"  {label:7s}",
                                       subsequent_indent=" " * 9))
    return "\n".join(lines)
