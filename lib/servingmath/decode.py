"""Decode: the time of one decode step (TPOT), and throughput, as a function of batch size.

One decode step produces one token for each of the ``batch_size`` running
sequences. It must

* read every weight once: W_bytes / N (with tensor parallelism N);
* read every running sequence's KV cache: B x S x kv_bytes_per_token / N;
* perform the weight matmuls: 2 x P_matmul x B FLOPs / N;
* perform attention: 4 x L x H x d_h x S x B FLOPs / N;
* (N > 1) all-reduce the activations twice per layer.

The parts combine by one of three overlap models
(:func:`servingmath.roofline.combine_step_parts`): ``"additive"`` (upper
bound), ``"roofline"`` (lower bound) and ``"hybrid"`` (the default: each kernel
overlaps its own traffic and math; weight matmuls may turn compute-bound,
attention stays bandwidth-bound).

Conventions
-----------
TPOT here is the steady-state decode step time, the quantity vLLM's
``TPOT = (E2E - TTFT) / (output tokens - 1)`` measures when nothing else
shares the GPU. ``context_len`` is the number of tokens in each sequence's KV
cache (use the mean over the batch: the KV term is linear in it).

Examples
--------
>>> t = decode_step_time("Llama-2-7B", "A100-SXM4-80GB", batch_size=1, context_len=0)
>>> round(t * 1e3, 2)   # ms: 13.5 GB of bf16 weights / 2.039 TB/s
6.61
"""

from __future__ import annotations

import numpy as np

from ._validation import check_fraction, check_integer, scalar_or_array
from .datatypes import bytes_per_element, check_dtype
from .hardware import get_accelerator
from .models import check_context_len, get_model, kv_bytes_per_token, weight_bytes, active_parameter_count
from .parallelism import tensor_parallel_communication_time
from .roofline import combine_step_parts, OVERLAP_MODELS

__all__ = ["decode_step_parts", "decode_step_time", "decode_throughput", "matmul_parameter_count"]


def matmul_parameter_count(model) -> int:
    """Parameters that take part in matmuls per token: active parameters
    minus the input embedding (a table look-up), plus the LM head when tied."""
    model = get_model(model)
    p = active_parameter_count(model) - model.vocab_size * model.hidden_size
    if model.tied_embeddings:
        p += model.vocab_size * model.hidden_size
    return p


def _weights_read_bytes(model, weight_dtype, batch_size):
    """Bytes of weights a decode step reads. For MoE, the experts that at least one
    token of the batch routes to (expected count, uniform routing)."""
    model = get_model(model)
    if not model.is_moe:
        return weight_bytes(model, weight_dtype) + 0 * batch_size
    total = weight_bytes(model, weight_dtype)
    active = active_parameter_count(model) * bytes_per_element(weight_dtype)
    per_expert = (total - active) / (model.n_experts - model.n_active_experts)
    shared = active - model.n_active_experts * per_expert
    e, k = model.n_experts, model.n_active_experts
    touched = e * (1 - (1 - k / e) ** np.asarray(batch_size, dtype=float))
    return shared + touched * per_expert


def decode_step_parts(model, accelerator, batch_size, context_len, weight_dtype="bf16",
                      kv_dtype="bf16", compute_dtype="bf16", tensor_parallel=1,
                      mfu=1.0, mbu=1.0, allreduce_latency=0.0) -> dict:
    """The parts of one decode step, in seconds (arrays broadcast).

    Returns a dict with ``weight_memory``, ``kv_memory``, ``linear_compute``,
    ``attention_compute`` and ``communication``.
    """
    model = get_model(model)
    acc = get_accelerator(accelerator)
    b = check_integer("batch_size", batch_size, minimum=1)
    s = check_context_len(model, context_len)
    n = check_integer("tensor_parallel", tensor_parallel, minimum=1)
    m = check_fraction("mfu", mfu)
    u = check_fraction("mbu", mbu)
    check_dtype(weight_dtype, "weight_dtype")
    check_dtype(kv_dtype, "kv_dtype")
    flops = acc.peak_flops(compute_dtype) * m
    bandwidth = acc.memory_bandwidth * u
    kv = kv_bytes_per_token(model, kv_dtype)
    return {
        "weight_memory": _weights_read_bytes(model, weight_dtype, b) / (n * bandwidth),
        "kv_memory": b * s * kv / (n * bandwidth),
        "linear_compute": 2.0 * matmul_parameter_count(model) * b / (n * flops),
        "attention_compute": 4.0 * model.n_layers * model.n_heads * model.head_dim * s * b / (n * flops),
        "communication": np.asarray(tensor_parallel_communication_time(
            model, acc, b, n, compute_dtype, allreduce_latency)),
    }


def decode_step_time(model, accelerator, batch_size, context_len, weight_dtype="bf16",
                     kv_dtype="bf16", compute_dtype="bf16", tensor_parallel=1,
                     mfu=1.0, mbu=1.0, overlap="hybrid", allreduce_latency=0.0):
    """Seconds for one decode step of ``batch_size`` sequences: the TPOT.

    Parameters
    ----------
    model : str or ModelConfig
    accelerator : str or Accelerator
    batch_size : int or array of int
        Sequences decoding together, B >= 1.
    context_len : int or array
        Tokens in each sequence's KV cache, 0 <= S <= the model's maximum.
    weight_dtype, kv_dtype : str
        Storage data types of the weights and of the KV cache.
    compute_dtype : str
        Data type of the matmuls (bf16 for weight-only quantisation).
    tensor_parallel : int
        GPUs the model is split across (weights and KV heads divided by N).
    mfu, mbu : float in (0, 1]
        Model FLOP and memory-bandwidth utilisation; 1.0 is the physical bound.
    overlap : {"hybrid", "additive", "roofline"}
    allreduce_latency : float
        Per-hop all-reduce latency alpha in seconds (0 = physical bound).

    Returns
    -------
    float or ndarray
        Seconds per step (= TPOT in steady state). Communication is added
        (not overlapped) in every overlap model.

    Notes
    -----
    hybrid: T(B) = max(W_bytes / W, 2 P B / F) + max(B S k / W, 4 L H d_h S B / F) + T_comm,
    with W and F scaled by MBU and MFU and every term divided by N.

    Examples
    --------
    >>> round(decode_step_time("Llama-2-7B", "A100-SXM4-80GB", 64, 512) * 1e3, 2)
    15.04
    """
    parts = decode_step_parts(model, accelerator, batch_size, context_len, weight_dtype,
                              kv_dtype, compute_dtype, tensor_parallel, mfu, mbu, allreduce_latency)
    total = combine_step_parts(overlap, parts["weight_memory"], parts["linear_compute"],
                               parts["kv_memory"], parts["attention_compute"]) + parts["communication"]
    return scalar_or_array(total, batch_size, context_len, tensor_parallel, mfu, mbu)


def decode_throughput(model, accelerator, batch_size, context_len, **kwargs):
    """Output tokens per second of the whole model instance: B / T(B).

    Divide by ``tensor_parallel`` for tokens/s per GPU.

    >>> round(decode_throughput("Llama-2-7B", "A100-SXM4-80GB", 64, 512))
    4257
    """
    t = decode_step_time(model, accelerator, batch_size, context_len, **kwargs)
    return scalar_or_array(np.asarray(batch_size, dtype=float) / t, batch_size, context_len,
                           *kwargs.values())
