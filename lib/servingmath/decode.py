"""Decode: the time of one decode step (TPOT), throughput, the knee and the throughput ceiling.

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

Throughput B / T(B) rises almost linearly while the weight read dominates the
step, turns at the *knee* (:func:`knee_batch_size`) and approaches a ceiling
(:func:`max_decode_throughput`) that compute, or at long contexts the KV-cache
reads, impose. Beyond a critical context length
(:func:`critical_context_length`) the KV reads of each added sequence cost
more time than its share of the matmuls: in the roofline model the step then
never turns compute-bound at any batch size. The chapter "Decode: TPOT(B),
throughput and the knee" derives all of these.

Conventions
-----------
TPOT here is the steady-state decode step time, the quantity vLLM's
``TPOT = (E2E - TTFT) / (output tokens - 1)`` measures when nothing else
shares the GPU. ``context_len`` is the number of tokens in each sequence's KV
cache (use the mean over the batch: the KV term is linear in it). ``mfu`` and
``mbu`` scale the peak FLOP/s and bandwidth (Databricks' definitions,
achieved / peak); 1.0 gives the physical bound.

Examples
--------
>>> t = decode_step_time("Llama-2-7B", "A100-SXM4-80GB", batch_size=1, context_len=0)
>>> round(t * 1e3, 2)   # ms: 13.5 GB of bf16 weights / 2.039 TB/s
6.61
>>> round(knee_batch_size("Llama-2-7B", "A100-SXM4-80GB", context_len=0), 1)
156.1
>>> round(critical_context_length("Llama-2-7B", "A100-SXM4-80GB"))   # tokens
165
>>> knee_batch_size("Llama-2-7B", "A100-SXM4-80GB", 1024, overlap="roofline")
inf
"""

from __future__ import annotations

import numpy as np

from ._validation import check_choice, check_fraction, check_integer, scalar_or_array
from .datatypes import bytes_per_element, check_dtype
from .hardware import get_accelerator
from .models import (active_parameter_count, check_context_len, get_model, kv_bytes_per_token,
                     parameter_count, weight_bytes)
from .memory import kv_projection_parameter_count
from .parallelism import tensor_parallel_communication_time
from .roofline import combine_step_parts, OVERLAP_MODELS

__all__ = [
    "decode_step_parts",
    "decode_step_time",
    "decode_throughput",
    "matmul_parameter_count",
    "knee_batch_size",
    "critical_context_length",
    "max_decode_throughput",
]


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


def tensor_parallel_shares(model, tensor_parallel):
    """(share of the weights, share of the KV cache) that one GPU holds and reads with TP = N.

    With N <= K both are 1/N. With N > K a KV head cannot be split: each GPU keeps one
    whole head and its K/V projection weights, as vLLM's ``QKVParallelLinear`` does, so
    the KV share is max(K, N) / (K N) and the weights gain the replicated projections.

    >>> tensor_parallel_shares("Llama-3.1-70B", 8)
    (0.125, 0.125)
    >>> [round(x, 4) for x in tensor_parallel_shares("Llama-3.1-70B", 16)]
    [0.0637, 0.125]
    """
    model = get_model(model)
    n = np.asarray(tensor_parallel, dtype=float)
    k = model.n_kv_heads
    kv_share = np.maximum(k, n) / (k * n)
    weight_share = 1.0 / n + (kv_projection_parameter_count(model) / parameter_count(model)) * (kv_share - 1.0 / n)
    if np.ndim(tensor_parallel) == 0:
        return float(weight_share), float(kv_share)
    return weight_share, kv_share


def decode_step_parts(model, accelerator, batch_size, context_len, weight_dtype="bf16",
                      kv_dtype="bf16", compute_dtype="bf16", tensor_parallel=1,
                      mfu=1.0, mbu=1.0, allreduce_latency=0.0, allreduce_dtype="bf16") -> dict:
    """The parts of one decode step, in seconds (arrays broadcast).

    Returns a dict with ``weight_memory``, ``kv_memory``, ``linear_compute``,
    ``attention_compute`` and ``communication``. ``allreduce_dtype`` is the data type
    of the activations the tensor-parallel all-reduces sum: bf16 even for fp8 or int8
    matmuls, whose kernels write bf16 outputs.
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
    weight_share, kv_share = tensor_parallel_shares(model, n)
    return {
        "weight_memory": _weights_read_bytes(model, weight_dtype, b) * weight_share / bandwidth,
        "kv_memory": b * s * kv * kv_share / bandwidth,
        "linear_compute": 2.0 * matmul_parameter_count(model) * b / (n * flops),
        "attention_compute": 4.0 * model.n_layers * model.n_heads * model.head_dim * s * b / (n * flops),
        "communication": np.asarray(tensor_parallel_communication_time(
            model, acc, b, n, allreduce_dtype, allreduce_latency)),
    }


def decode_step_time(model, accelerator, batch_size, context_len, weight_dtype="bf16",
                     kv_dtype="bf16", compute_dtype="bf16", tensor_parallel=1,
                     mfu=1.0, mbu=1.0, overlap="hybrid", allreduce_latency=0.0, allreduce_dtype="bf16"):
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
                              kv_dtype, compute_dtype, tensor_parallel, mfu, mbu, allreduce_latency,
                              allreduce_dtype)
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


def _solve_increasing(excess, upper):
    """Bisection for the root of ``excess(b)``, negative at 0 and >= 0 at ``upper`` (arrays)."""
    lo = np.zeros_like(upper)
    hi = np.array(upper, dtype=float)
    for _ in range(200):
        mid = (lo + hi) / 2
        below = excess(mid) < 0
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return (lo + hi) / 2


def knee_batch_size(model, accelerator, context_len, weight_dtype="bf16", kv_dtype="bf16",
                    compute_dtype="bf16", mfu=1.0, mbu=1.0, overlap="hybrid"):
    """The knee B* of decode: the batch size at which the step turns compute-bound.

    Below B* the step time is set by memory traffic and stays almost flat as
    the batch grows (throughput rises almost linearly); above it the step time
    grows in proportion to B (throughput is flat, or nearly so).

    Parameters
    ----------
    model, accelerator, context_len, weight_dtype, kv_dtype, compute_dtype, mfu, mbu
        As in :func:`decode_step_time`.
    overlap : {"hybrid", "additive", "roofline"}
        Which knee (see Notes).

    Returns
    -------
    float or ndarray
        B* as a real number (not rounded to a whole batch); ``inf`` where the
        step never turns compute-bound. Independent of the tensor-parallel
        degree (every part of the step divides by N; the communication time is
        added outside the max) and of the communication time.

    Notes
    -----
    With T_w = W_bytes / (W x MBU) the weight read, and per sequence
    c_lin = 2 P / (F x MFU) (weight matmuls), c_att = 4 L H d_h S / (F x MFU)
    (attention math) and m_kv = S k / (W x MBU) (its KV read):

    * ``"roofline"``: T = max(T_w + B m_kv, B (c_lin + c_att)); the max switches
      branch at B* = T_w / (c_lin + c_att - m_kv), and never (``inf``) when
      m_kv >= c_lin + c_att, i.e. when S >= :func:`critical_context_length`.
    * ``"additive"``: T = T_w + B (c_lin + c_att + m_kv) has no branch; its
      knee is taken at the same balance point, compute time = memory time,
      where the additive time is exactly twice the roofline time.
    * ``"hybrid"``: T = max(T_w, B c_lin) + B max(m_kv, c_att); the weight
      matmuls turn compute-bound at B* = T_w / c_lin, whatever the context:
      the KV term does not move this knee, it lowers the throughput ceiling.

    For a mixture of experts T_w grows with B (more experts touched) and B*
    is found by bisection.

    References
    ----------
    Databricks, "LLM Inference Performance Engineering: Best Practices" (2023-10);
    R. Pope et al., "Efficiently Scaling Transformer Inference", arXiv:2211.05102 (2022).

    Examples
    --------
    >>> round(knee_batch_size("Llama-3.1-8B", "H100", 0), 1)   # about the ridge, 295 FLOP/B
    316.0
    >>> round(knee_batch_size("Llama-3.1-8B", "H100", 256, overlap="roofline"), 1)
    906.3
    >>> round(knee_batch_size("Llama-3.1-8B", "H100", 0, mfu=0.5, mbu=0.8), 1)
    197.5
    """
    check_choice("overlap", overlap, OVERLAP_MODELS)
    model = get_model(model)
    acc = get_accelerator(accelerator)
    parts = decode_step_parts(model, acc, 1, context_len, weight_dtype, kv_dtype, compute_dtype,
                              1, mfu, mbu)
    if overlap == "hybrid":
        slope = parts["linear_compute"]
    else:
        slope = parts["linear_compute"] + parts["attention_compute"] - parts["kv_memory"]
    slope = np.asarray(slope, dtype=float)
    positive = slope > 0
    safe = np.where(positive, slope, 1.0)
    if model.is_moe:
        bandwidth = acc.memory_bandwidth * check_fraction("mbu", mbu)
        total = weight_bytes(model, weight_dtype) / bandwidth
        knee = _solve_increasing(
            lambda b: b * safe - _weights_read_bytes(model, weight_dtype, b) / bandwidth,
            np.broadcast_to(total / safe, safe.shape))
    else:
        knee = parts["weight_memory"] / safe
    shape = np.broadcast_shapes(*(np.shape(v) for v in parts.values()))
    knee = np.broadcast_to(np.where(positive, knee, np.inf), shape)
    return scalar_or_array(knee, context_len, mfu, mbu)


def critical_context_length(model, accelerator, kv_dtype="bf16", compute_dtype="bf16",
                            mfu=1.0, mbu=1.0, overlap="hybrid"):
    """Context length beyond which each sequence's KV reads outweigh its share of the compute.

    Parameters
    ----------
    model, accelerator, kv_dtype, compute_dtype, mfu, mbu
        As in :func:`decode_step_time`.
    overlap : {"hybrid", "additive", "roofline"}

    Returns
    -------
    float or ndarray
        S_crit in tokens (``inf`` if it does not exist). It may exceed the
        model's maximum context: then the KV reads never dominate.

    Notes
    -----
    Per sequence and step, the KV read takes S k / (W x MBU) and the compute
    (2 P + 4 L H d_h S) / (F x MFU). They balance at

    * ``"roofline"`` and ``"additive"``:
      S_crit = 2 P (W x MBU) / (k (F x MFU) - 4 L H d_h (W x MBU)).
      For S >= S_crit the roofline step is memory-bound at every batch size
      (:func:`knee_batch_size` is ``inf``), and the additive step never spends
      more than half its time computing.
    * ``"hybrid"`` (attention's math hidden under its KV reads):
      S_crit = 2 P (W x MBU) / (k (F x MFU)) = (2 P / k) / ridge. For S > S_crit
      the bandwidth-bound attention takes more than half of every step at
      large batch, even after the weight matmuls have turned compute-bound.

    Weights do not enter (they are read once per step, whatever the batch),
    nor does the tensor-parallel degree (it divides both sides).

    Examples
    --------
    >>> round(critical_context_length("Llama-3.1-8B", "H100"))   # GQA, 128 KiB per token
    388
    >>> round(critical_context_length("Llama-2-7B", "A100", overlap="roofline"))   # MHA, 512 KiB per token
    166
    """
    check_choice("overlap", overlap, OVERLAP_MODELS)
    model = get_model(model)
    acc = get_accelerator(accelerator)
    m = check_fraction("mfu", mfu)
    u = check_fraction("mbu", mbu)
    flops = acc.peak_flops(compute_dtype) * m
    bandwidth = acc.memory_bandwidth * u
    linear = 2.0 * matmul_parameter_count(model) / flops
    kv = kv_bytes_per_token(model, kv_dtype) / bandwidth
    attention = 4.0 * model.n_layers * model.n_heads * model.head_dim / flops
    if overlap == "hybrid":
        result = linear / np.maximum(kv, attention)
    else:
        denominator = np.asarray(kv - attention, dtype=float)
        positive = denominator > 0
        result = np.where(positive, linear / np.where(positive, denominator, 1.0), np.inf)
    return scalar_or_array(result, mfu, mbu)


def max_decode_throughput(model, accelerator, context_len, weight_dtype="bf16", kv_dtype="bf16",
                          compute_dtype="bf16", tensor_parallel=1, mfu=1.0, mbu=1.0,
                          overlap="hybrid"):
    """The throughput ceiling: lim B -> inf of B / T(B), output tokens/s of the whole instance.

    Memory capacity stops the batch long before infinity; this is the bound
    that no batch size can beat, at this context length.

    Parameters
    ----------
    As in :func:`decode_step_time` (the weight read and the all-reduce latency
    are fixed costs per step and drop out of the limit).

    Returns
    -------
    float or ndarray
        Tokens/s. Divide by ``tensor_parallel`` for tokens/s per GPU.

    Notes
    -----
    T(B) grows asymptotically as B times a per-sequence slope, so the limit is
    1 / slope with slope (every part divided by N, plus the per-sequence
    all-reduce traffic when N > 1)

    * ``"additive"``: c_lin + c_att + m_kv;
    * ``"roofline"``: max(c_lin + c_att, m_kv);
    * ``"hybrid"``: c_lin + max(m_kv, c_att).

    At S = 0 (and N = 1) all three equal F x MFU / (2 P): compute alone.

    Examples
    --------
    >>> round(max_decode_throughput("Llama-2-7B", "A100", 0))   # F / 2P, tok/s
    23610
    >>> round(max_decode_throughput("Llama-2-7B", "A100", 2048))   # KV reads cap it
    1758
    """
    check_choice("overlap", overlap, OVERLAP_MODELS)
    args = (context_len, weight_dtype, kv_dtype, compute_dtype, tensor_parallel, mfu, mbu)
    one = decode_step_parts(model, accelerator, 1, *args)
    two = decode_step_parts(model, accelerator, 2, *args)
    linear, attention, kv = one["linear_compute"], one["attention_compute"], one["kv_memory"]
    communication = two["communication"] - one["communication"]
    if overlap == "additive":
        slope = linear + attention + kv
    elif overlap == "roofline":
        slope = np.maximum(linear + attention, kv)
    else:
        slope = linear + np.maximum(kv, attention)
    return scalar_or_array(1.0 / (slope + communication), context_len, tensor_parallel, mfu, mbu)
