"""Prefill: the time to process a prompt, and TTFT = queueing + prefill.

A prefill of ``batch_size`` prompts of ``prompt_len`` new tokens each (after
``cached_len`` tokens already in the KV cache, e.g. a cached prefix) must

* read every weight once: W_bytes / N;
* perform the weight matmuls: 2 x P_matmul x B x L_p FLOPs / N;
* perform causal attention: token i (counting the cached ones) attends to i
  tokens, 4 x L x H x d_h x B x (L_p x L_c + L_p (L_p + 1) / 2) FLOPs / N;
* write the new KV entries and read the cached ones: B x (L_p + L_c) x kv_bytes / N;
* (N > 1) all-reduce B x L_p x D activations twice per layer.

Because it multiplies every weight by many tokens, prefill is compute-bound
for all but the shortest prompts.

Examples
--------
>>> t = prefill_time("Llama-2-7B", "A100-SXM4-80GB", prompt_len=2048)
>>> round(t * 1e3, 1)   # ms, physical bound (MFU = 1)
90.3
"""

from __future__ import annotations

import numpy as np

from ._validation import check_fraction, check_integer, check_nonnegative, scalar_or_array
from .datatypes import check_dtype
from .decode import _weights_read_bytes, matmul_parameter_count
from .hardware import get_accelerator
from .models import check_context_len, get_model, kv_bytes_per_token
from .parallelism import tensor_parallel_communication_time
from .roofline import combine_step_parts

__all__ = ["prefill_step_parts", "prefill_time", "ttft"]


def prefill_step_parts(model, accelerator, prompt_len, batch_size=1, cached_len=0,
                       weight_dtype="bf16", kv_dtype="bf16", compute_dtype="bf16",
                       tensor_parallel=1, mfu=1.0, mbu=1.0, allreduce_latency=0.0) -> dict:
    """The parts of one prefill step in seconds; same keys as :func:`decode_step_parts`."""
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
    flops = acc.peak_flops(compute_dtype) * m
    bandwidth = acc.memory_bandwidth * u
    tokens = b * lp
    attended = lp * lc + lp * (lp + 1) / 2
    return {
        "weight_memory": _weights_read_bytes(model, weight_dtype, tokens) / (n * bandwidth),
        "kv_memory": b * (lp + lc) * kv_bytes_per_token(model, kv_dtype) / (n * bandwidth),
        "linear_compute": 2.0 * matmul_parameter_count(model) * tokens / (n * flops),
        "attention_compute": 4.0 * model.n_layers * model.n_heads * model.head_dim * b * attended / (n * flops),
        "communication": np.asarray(tensor_parallel_communication_time(
            model, acc, tokens, n, compute_dtype, allreduce_latency)),
    }


def prefill_time(model, accelerator, prompt_len, batch_size=1, cached_len=0, weight_dtype="bf16",
                 kv_dtype="bf16", compute_dtype="bf16", tensor_parallel=1, mfu=1.0, mbu=1.0,
                 overlap="hybrid", allreduce_latency=0.0):
    """Seconds to prefill ``batch_size`` prompts of ``prompt_len`` new tokens each.

    Parameters are those of :func:`servingmath.decode.decode_step_time`, with
    ``prompt_len`` (new tokens per prompt, >= 1) and ``cached_len`` (tokens of
    the prompt already in the KV cache, e.g. a shared system prompt).

    Notes
    -----
    hybrid: T = max(W_bytes / W, 2 P B L_p / F) + max(KV bytes / W, attention FLOPs / F) + T_comm.
    """
    parts = prefill_step_parts(model, accelerator, prompt_len, batch_size, cached_len, weight_dtype,
                               kv_dtype, compute_dtype, tensor_parallel, mfu, mbu, allreduce_latency)
    total = combine_step_parts(overlap, parts["weight_memory"], parts["linear_compute"],
                               parts["kv_memory"], parts["attention_compute"]) + parts["communication"]
    return scalar_or_array(total, prompt_len, batch_size, cached_len, tensor_parallel, mfu, mbu)


def ttft(model, accelerator, prompt_len, queueing_delay=0.0, **kwargs):
    """Time to first token: queueing delay + prefill time, in seconds.

    The first output token comes out of the prefill's last forward pass, so
    no decode step is added.

    >>> round(ttft("Llama-2-7B", "A100-SXM4-80GB", 2048, queueing_delay=0.1), 4)
    0.1903
    """
    q = check_nonnegative("queueing_delay", queueing_delay)
    return scalar_or_array(q + prefill_time(model, accelerator, prompt_len, **kwargs),
                           prompt_len, queueing_delay, *kwargs.values())
