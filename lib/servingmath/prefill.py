"""Prefill: the time to process a prompt, and TTFT = queueing + prefill.

A prefill of ``batch_size`` prompts of ``prompt_len`` new tokens each (after
``cached_len`` tokens already in the KV cache, e.g. a cached prefix or the
earlier chunks of a chunked prefill) must

* read every weight once: W_bytes / N;
* multiply every new token by the weights of the transformer blocks,
  2 x P_body x B x L_p FLOPs, and the last token of each prompt by the
  LM head, 2 x V x D x B FLOPs (all divided by N). ``P_body`` is
  :func:`~servingmath.decode.matmul_parameter_count` minus the LM head V x D;
* perform causal attention: token i of the sequence (counting the cached
  ones, i = 1, 2, ...) attends to i tokens (to min(i, w) with a sliding
  window w), each (query, key) pair costing 4 d_h FLOPs per head and layer:
  4 x L x H x d_h x B x (L_p x L_c + L_p (L_p + 1) / 2) FLOPs / N without a window;
* write the new KV entries and read the cached ones: B x (L_p + L_c) x kv_bytes / N
  (L_c capped at the window w where the model has one);
* (N > 1) all-reduce B x L_p x D activations twice per layer.

Because it multiplies every weight by many tokens, prefill is compute-bound
for all but the shortest prompts: one step turns compute-bound at about
(b_w / 2) x ridge point tokens (:func:`saturating_chunk_size`), and the
quadratic attention term overtakes the linear one only at
P_body / (L H d_h) - 1 tokens, tens of thousands (:func:`critical_prompt_length`).

Conventions
-----------
Engines compute logits only for the last position of each prompt (vLLM,
TensorRT-LLM by default); ``all_logits=True`` charges the LM head to every
prompt token, as when prompt log-probabilities are requested.
``mfu = mbu = 1`` (the defaults) give the physical bound.

Examples
--------
>>> t = prefill_time("Llama-2-7B", "A100-SXM4-80GB", prompt_len=2048)
>>> round(t * 1e3, 1)   # ms, physical bound (MFU = 1)
88.6
>>> round(critical_prompt_length("Llama-3.1-70B"))
104449
>>> round(saturating_chunk_size("Llama-2-7B", "A100-SXM4-80GB"), 1)
159.2
"""

from __future__ import annotations

import numpy as np

from ._validation import (check_choice, check_fraction, check_integer, check_nonnegative,
                          check_positive, scalar_or_array)
from .datatypes import check_dtype
from .decode import _weights_read_bytes, matmul_parameter_count, tensor_parallel_shares
from .hardware import get_accelerator
from .models import check_context_len, get_model, kv_bytes_per_token
from .parallelism import tensor_parallel_communication_time
from .roofline import combine_step_parts

__all__ = [
    "prefill_step_parts",
    "prefill_time",
    "ttft",
    "prefill_flops",
    "prefill_throughput",
    "critical_prompt_length",
    "saturating_chunk_size",
    "prefix_cache_saving",
    "burst_mean_ttft",
    "prefill_mfu",
    "lm_head_parameter_count",
    "body_parameter_count",
    "BURST_SCHEDULES",
]

BURST_SCHEDULES = ("batched", "sequential")
_FLOP_PARTS = ("total", "linear", "attention")


def lm_head_parameter_count(model) -> int:
    """Weights of the LM head, V x D (tied or not, it is multiplied)."""
    model = get_model(model)
    return model.vocab_size * model.hidden_size


def body_parameter_count(model) -> int:
    """P_body: the weights every token is multiplied by in the transformer blocks.

    :func:`~servingmath.decode.matmul_parameter_count` minus the LM head
    (active experts only, for MoE).

    >>> body_parameter_count("Llama-2-7B")
    6476271616
    """
    return matmul_parameter_count(model) - lm_head_parameter_count(model)


def _attended_pairs(model, prompt_len, cached_len):
    """(query, key) pairs of causal attention for the new tokens of one sequence:
    sum over i = L_c + 1 .. L_c + L_p of min(i, w)."""
    lp = np.asarray(prompt_len, dtype=float)
    lc = np.asarray(cached_len, dtype=float)
    w = model.sliding_window
    if w is None:
        return lp * lc + lp * (lp + 1) / 2

    def cumulative(n):  # sum_{i=1}^{n} min(i, w)
        return np.where(n <= w, n * (n + 1) / 2, w * (w + 1) / 2 + (n - w) * w)

    return cumulative(lc + lp) - cumulative(lc)


def _linear_flops(model, prompt_len, batch_size, all_logits):
    """2 x B x (P_body x L_p + V D x logit positions)."""
    lp = np.asarray(prompt_len, dtype=float)
    b = np.asarray(batch_size, dtype=float)
    logits = lp if all_logits else 1.0
    return 2.0 * b * (body_parameter_count(model) * lp + lm_head_parameter_count(model) * logits)


def _attention_flops(model, prompt_len, batch_size, cached_len):
    """4 x L x H x d_h x B x (attended pairs)."""
    b = np.asarray(batch_size, dtype=float)
    return (4.0 * model.n_layers * model.n_heads * model.head_dim * b
            * _attended_pairs(model, prompt_len, cached_len))


def _check_all_logits(all_logits):
    if not isinstance(all_logits, (bool, np.bool_)):
        raise ValueError(f"all_logits must be True or False, got {all_logits!r}")
    return bool(all_logits)


def prefill_step_parts(model, accelerator, prompt_len, batch_size=1, cached_len=0,
                       weight_dtype="bf16", kv_dtype="bf16", compute_dtype="bf16",
                       tensor_parallel=1, mfu=1.0, mbu=1.0, allreduce_latency=0.0,
                       all_logits=False, allreduce_dtype="bf16") -> dict:
    """The parts of one prefill step in seconds; same keys as :func:`decode_step_parts`.

    Returns a dict with ``weight_memory``, ``kv_memory``, ``linear_compute``,
    ``attention_compute`` and ``communication`` (arrays broadcast).

    Examples
    --------
    >>> parts = prefill_step_parts("Llama-2-7B", "A100-SXM4-80GB", 2048)
    >>> {k: round(float(v) * 1e3, 2) for k, v in parts.items()}
    {'weight_memory': 6.61, 'kv_memory': 0.53, 'linear_compute': 85.02, 'attention_compute': 3.53, 'communication': 0.0}
    """
    model = get_model(model)
    acc = get_accelerator(accelerator)
    lp = check_integer("prompt_len", prompt_len, minimum=1)
    b = check_integer("batch_size", batch_size, minimum=1)
    lc = check_nonnegative("cached_len", cached_len)
    check_integer("cached_len", lc, minimum=0)
    check_context_len(model, lp + lc, "prompt_len + cached_len")
    n = check_integer("tensor_parallel", tensor_parallel, minimum=1)
    m = check_fraction("mfu", mfu)
    u = check_fraction("mbu", mbu)
    check_dtype(weight_dtype, "weight_dtype")
    check_dtype(kv_dtype, "kv_dtype")
    logits = _check_all_logits(all_logits)
    flops = acc.peak_flops(compute_dtype) * m
    bandwidth = acc.memory_bandwidth * u
    tokens = b * lp
    kv_read = lc if model.sliding_window is None else np.minimum(lc, model.sliding_window)
    weight_share, kv_share = tensor_parallel_shares(model, n)
    return {
        "weight_memory": _weights_read_bytes(model, weight_dtype, tokens) * weight_share / bandwidth,
        "kv_memory": b * (lp + kv_read) * kv_bytes_per_token(model, kv_dtype) * kv_share / bandwidth,
        "linear_compute": _linear_flops(model, lp, b, logits) / (n * flops),
        "attention_compute": _attention_flops(model, lp, b, lc) / (n * flops),
        "communication": np.asarray(tensor_parallel_communication_time(
            model, acc, tokens, n, allreduce_dtype, allreduce_latency)),
    }


def prefill_time(model, accelerator, prompt_len, batch_size=1, cached_len=0, weight_dtype="bf16",
                 kv_dtype="bf16", compute_dtype="bf16", tensor_parallel=1, mfu=1.0, mbu=1.0,
                 overlap="hybrid", allreduce_latency=0.0, all_logits=False, allreduce_dtype="bf16"):
    """Seconds to prefill ``batch_size`` prompts of ``prompt_len`` new tokens each.

    Parameters are those of :func:`servingmath.decode.decode_step_time`, with
    ``prompt_len`` (new tokens per prompt, >= 1), ``cached_len`` (tokens of
    the prompt already in the KV cache, e.g. a shared system prompt or the
    earlier chunks of a chunked prefill) and ``all_logits`` (True: the LM head
    runs on every prompt token, not only the last).

    Notes
    -----
    hybrid: T = max(W_bytes / W, 2 B (P_body L_p + V D) / F)
    + max(B (L_p + L_c) k / W, 4 L H d_h B (L_p L_c + L_p (L_p + 1) / 2) / F) + T_comm,
    with F and W scaled by MFU and MBU and every term divided by N.

    Examples
    --------
    >>> round(prefill_time("Llama-2-7B", "A100-SXM4-80GB", 2048, mfu=0.6) * 1e3, 1)
    147.6
    """
    parts = prefill_step_parts(model, accelerator, prompt_len, batch_size, cached_len, weight_dtype,
                               kv_dtype, compute_dtype, tensor_parallel, mfu, mbu, allreduce_latency,
                               all_logits, allreduce_dtype)
    total = combine_step_parts(overlap, parts["weight_memory"], parts["linear_compute"],
                               parts["kv_memory"], parts["attention_compute"]) + parts["communication"]
    return scalar_or_array(total, prompt_len, batch_size, cached_len, tensor_parallel, mfu, mbu)


def ttft(model, accelerator, prompt_len, queueing_delay=0.0, **kwargs):
    """Time to first token: queueing delay + prefill time, in seconds.

    The first output token comes out of the prefill's last forward pass, so
    no decode step is added. ``kwargs`` go to :func:`prefill_time`.

    >>> round(ttft("Llama-2-7B", "A100-SXM4-80GB", 2048, queueing_delay=0.1), 4)
    0.1886
    """
    q = check_nonnegative("queueing_delay", queueing_delay)
    return scalar_or_array(q + prefill_time(model, accelerator, prompt_len, **kwargs),
                           prompt_len, queueing_delay, *kwargs.values())


def prefill_flops(model, prompt_len, batch_size=1, cached_len=0, all_logits=False, part="total"):
    """FLOPs of a prefill (all GPUs together): weight matmuls + causal attention.

    Parameters
    ----------
    model : str or ModelConfig
    prompt_len, batch_size, cached_len : int or array
        As in :func:`prefill_time`.
    all_logits : bool
        True charges the LM head to every prompt token (default: last token only).
    part : {"total", "linear", "attention"}
        ``"linear"``: 2 B (P_body L_p + V D); ``"attention"``:
        4 L H d_h B (L_p L_c + L_p (L_p + 1) / 2) (sliding windows cap each
        token's keys at w); ``"total"``: their sum.

    Examples
    --------
    >>> round(prefill_flops("Llama-2-7B", 2048) / 1e12, 2)   # TFLOP
    27.63
    >>> round(prefill_flops("Llama-2-7B", 2048, part="attention") / 1e12, 2)
    1.1
    """
    model = get_model(model)
    lp = check_integer("prompt_len", prompt_len, minimum=1)
    b = check_integer("batch_size", batch_size, minimum=1)
    lc = check_nonnegative("cached_len", cached_len)
    check_integer("cached_len", lc, minimum=0)
    check_context_len(model, lp + lc, "prompt_len + cached_len")
    logits = _check_all_logits(all_logits)
    check_choice("part", part, _FLOP_PARTS)
    linear = _linear_flops(model, lp, b, logits)
    attention = _attention_flops(model, lp, b, lc)
    result = {"total": linear + attention, "linear": linear + 0 * attention,
              "attention": attention + 0 * linear}[part]
    return scalar_or_array(result, prompt_len, batch_size, cached_len)


def prefill_throughput(model, accelerator, prompt_len, batch_size=1, cached_len=0, **kwargs):
    """Prompt tokens processed per second by the whole model instance: B L_p / T_prefill.

    ``prompt_len`` x ``batch_size`` is the number of tokens in the step (a
    chunk of a chunked prefill is ``prompt_len`` new tokens after
    ``cached_len`` earlier ones). ``kwargs`` go to :func:`prefill_time`.
    Divide by ``tensor_parallel`` for tokens/s per GPU.

    >>> round(prefill_throughput("Llama-2-7B", "A100-SXM4-80GB", 2048))
    23129
    >>> round(prefill_throughput("Llama-2-7B", "A100-SXM4-80GB", 1))
    151
    """
    t = prefill_time(model, accelerator, prompt_len, batch_size, cached_len, **kwargs)
    tokens = np.asarray(prompt_len, dtype=float) * np.asarray(batch_size, dtype=float)
    return scalar_or_array(tokens / t, prompt_len, batch_size, cached_len, *kwargs.values())


def critical_prompt_length(model, all_logits=False):
    """Prompt length at which a prompt's attention FLOPs equal its weight-matmul FLOPs (tokens).

    Below it the linear term 2 (P_body L_p + V D) dominates the prefill's
    work; above it the causal attention term 2 L H d_h L_p (L_p + 1) does.

    Returns
    -------
    float
        The positive root of L H d_h n^2 + (L H d_h - P_body) n - V D = 0,
        about P_body / (L H d_h) - 1. It may exceed the model's maximum
        context (then attention never dominates). With a sliding window w
        attention grows only linearly beyond w tokens; the result is
        ``inf`` when it never catches up.

    Notes
    -----
    For a Llama-shaped block (D = H d_h, gated FFN of size F, K KV heads),
    P_body / (L H d_h) = 2 D + 2 D K / H + 3 F + 2, so the crossing sits
    near 12 D for classic MHA with F = 8 D / 3.

    Examples
    --------
    >>> round(critical_prompt_length("Llama-2-7B"))   # beyond its 4096-token context
    49409
    """
    model = get_model(model)
    logits = _check_all_logits(all_logits)
    a = float(model.n_layers * model.n_heads * model.head_dim)
    p_head = float(lm_head_parameter_count(model))
    p_body = float(body_parameter_count(model))
    if logits:
        p_body, p_head = p_body + p_head, 0.0
    root = ((p_body - a) + np.sqrt((p_body - a) ** 2 + 4 * a * p_head)) / (2 * a)
    w = model.sliding_window
    if w is None or root <= w:
        return float(root)
    # beyond the window: attention = 2 a w (w + 1) + 4 a w (n - w), linear = 2 (p_body n + p_head)
    if 2 * a * w <= p_body:
        return float("inf")
    return float((p_head + a * w * (w - 1)) / (2 * a * w - p_body))


def saturating_chunk_size(model, accelerator, weight_dtype="bf16", compute_dtype="bf16",
                          mfu=1.0, mbu=1.0, all_logits=False):
    """Tokens per prefill step at which the weight matmuls turn compute-bound.

    The step reads every weight once (W_bytes / (W MBU)) and multiplies its
    T tokens by them (2 (P_body T + V D) / (F MFU) for one sequence whose
    last token needs logits). Below T* the step takes the same time whatever
    T is (memory-bound); above it the time grows with T and the prefill
    throughput saturates at about F MFU / (2 P_body) tokens/s.

    Returns
    -------
    float or ndarray
        T* = (W_bytes F MFU / (2 W MBU) - V D) / P_body, about
        (b_w / 2) x ridge point x P / P_body. Independent of tensor
        parallelism (both sides divide by N); communication is not included.
        For MoE, W_bytes counts the experts a chunk of T* tokens touches.

    Examples
    --------
    >>> round(saturating_chunk_size("Llama-2-7B", "H100"), 1)
    307.3
    >>> round(saturating_chunk_size("Llama-2-7B", "H100", weight_dtype="int4"), 1)
    76.8
    """
    model = get_model(model)
    acc = get_accelerator(accelerator)
    check_dtype(weight_dtype, "weight_dtype")
    m = check_fraction("mfu", mfu)
    u = check_fraction("mbu", mbu)
    logits = _check_all_logits(all_logits)
    ratio = acc.peak_flops(compute_dtype) * m / (acc.memory_bandwidth * u)  # FLOP per byte
    p_head = float(lm_head_parameter_count(model))
    p_body = float(body_parameter_count(model))
    if logits:
        p_body, p_head = p_body + p_head, 0.0
    tokens = np.asarray(1e6)
    for _ in range(4):  # MoE: the bytes depend on the chunk (experts touched); dense: exact at once
        weight_bytes = _weights_read_bytes(model, weight_dtype, np.maximum(tokens, 1.0))
        tokens = (weight_bytes * ratio / 2 - p_head) / p_body
        if not model.is_moe:
            break
    return scalar_or_array(np.maximum(tokens, 0.0), mfu, mbu)


def prefix_cache_saving(model, accelerator, prompt_len, cached_len, **kwargs):
    """Fraction of the prefill time a cached prefix saves: 1 - T(L_p | L_c cached) / T(L_c + L_p).

    ``prompt_len`` is the number of new tokens computed after the
    ``cached_len`` cached ones (as in :func:`prefill_time`); without the
    cache all ``cached_len + prompt_len`` tokens would be computed. Between 0
    and 1. A compute-bound prefill saves the cached fraction c / (c + L_p) of
    its linear work but only about the square of it of its attention work
    (the cached tokens' attention among themselves; the new tokens, last in
    the sequence, still attend to everything), so the saving is a little
    below the cached fraction. ``kwargs`` go to :func:`prefill_time`.

    >>> round(prefix_cache_saving("Llama-3.1-8B", "H100", 1024, 3072), 3)
    0.737
    """
    with_cache = prefill_time(model, accelerator, prompt_len, cached_len=cached_len, **kwargs)
    lp = check_integer("prompt_len", prompt_len, minimum=1)
    lc = check_integer("cached_len", cached_len, minimum=0)
    without = prefill_time(model, accelerator, lp + lc, cached_len=0, **kwargs)
    return scalar_or_array(1.0 - np.asarray(with_cache) / without, prompt_len, cached_len,
                           *kwargs.values())


def burst_mean_ttft(model, accelerator, prompt_len, n_requests, schedule="batched", **kwargs):
    """Mean TTFT of ``n_requests`` identical prompts that arrive at once, in seconds.

    * ``"batched"``: one prefill of the whole batch; every request gets its
      first token when the batch finishes: T_prefill(B = n).
    * ``"sequential"``: one prompt after the other; request i waits for the
      i - 1 before it: mean = (n + 1) / 2 x T_prefill(B = 1).

    Once a single prompt saturates the GPU, batching adds no throughput, so
    the batched mean is close to twice the sequential one for large n.
    ``kwargs`` go to :func:`prefill_time`.

    >>> round(burst_mean_ttft("Llama-2-7B", "A100", 2048, 16), 3)
    1.417
    >>> round(burst_mean_ttft("Llama-2-7B", "A100", 2048, 16, schedule="sequential"), 3)
    0.753
    """
    check_choice("schedule", schedule, BURST_SCHEDULES)
    n = check_integer("n_requests", n_requests, minimum=1)
    if schedule == "batched":
        result = prefill_time(model, accelerator, prompt_len, batch_size=n_requests, **kwargs)
    else:
        result = (n + 1) / 2 * np.asarray(prefill_time(model, accelerator, prompt_len, **kwargs))
    return scalar_or_array(result, prompt_len, n_requests, *kwargs.values())


def prefill_mfu(model, accelerator, prompt_len, measured_time, batch_size=1, cached_len=0,
                compute_dtype="bf16", tensor_parallel=1, all_logits=False):
    """MFU a measured prefill implies: prefill FLOPs / (measured time x N x peak FLOP/s).

    Databricks' definition (achieved FLOP/s over peak), with the FLOPs of
    :func:`prefill_flops`. A measured TTFT also holds queueing and framework
    overhead, so this is a lower bound on the kernels' own MFU.

    >>> round(prefill_mfu("Llama-2-7B", "A100", 2048, measured_time=0.139), 3)
    0.637
    """
    acc = get_accelerator(accelerator)
    t = check_positive("measured_time", measured_time)
    n = check_integer("tensor_parallel", tensor_parallel, minimum=1)
    flops = prefill_flops(model, prompt_len, batch_size, cached_len, all_logits)
    return scalar_or_array(np.asarray(flops) / (t * n * acc.peak_flops(compute_dtype)),
                           prompt_len, measured_time, batch_size, cached_len, tensor_parallel)
