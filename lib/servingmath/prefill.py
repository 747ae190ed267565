"""Prefill: the time to process a prompt, and TTFT = queueing + prefill.

A prefill of ``batch_size`` prompts of ``prompt_len`` new tokens each (after
``cached_len`` tokens already in the KV cache, e.g. a cached prefix or the
earlier chunks of a chunked prefill) must

* read every weight once: W_bytes / N (the input-embedding table excepted:
  it gathers one row per token);
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

Every function takes a model and an accelerator (or one
:class:`~servingmath.deployment.Deployment`), then the prompt length, then
keyword options: ``batch_size``, ``cached_len``, ``all_logits`` and the
deployment settings. All of it is one iteration of the step model
(:mod:`servingmath.step`): ``batch_size`` sequences, ``prompt_len`` new tokens
each after ``cached_len`` cached ones.

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
156.1
"""

from __future__ import annotations

import numpy as np

from ._validation import (bisect_increasing, check_bool, check_choice, check_integer, check_nonnegative,
                          check_positive, check_scalar, scalar_or_array)
from .deployment import Deployment, deployment_function
from .models import (attention_flops_per_pair, body_parameter_count, check_context_len, get_model,
                     lm_head_parameter_count, window_of)
from .step import Iteration, combine, iteration_work, time_parts, work_coefficients

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
    "prefill_iteration",
    "lm_head_parameter_count",
    "body_parameter_count",
    "BURST_SCHEDULES",
    "chunked_prefill_time",
    "multistep_wait",
]

BURST_SCHEDULES = ("batched", "sequential")
_FLOP_PARTS = ("total", "linear", "attention")


def prefill_iteration(model, prompt_len, *, batch_size=1, cached_len=0, all_logits=False) -> Iteration:
    """The :class:`~servingmath.step.Iteration` of a prefill: B prompts of L_p new tokens after L_c cached.

    Derived in the chapter "Prefill: TTFT" (notebooks/05_prefill.ipynb).

    Logits at the last position of each prompt (``all_logits=True``: at every position).

    >>> it = prefill_iteration("Llama-2-7B", 2048)
    >>> it.tokens, it.kv_tokens, it.attention_pairs, it.logits
    (2048.0, 2048.0, 2098176.0, 1.0)
    """
    lp = check_integer("prompt_len", prompt_len, minimum=1)
    b = check_integer("batch_size", batch_size, minimum=1)
    lc = check_nonnegative("cached_len", cached_len)           # named as the caller named them,
    check_integer("cached_len", lc, minimum=0)                 # not as Iteration.of names them
    check_context_len(get_model(model), lp + lc, "prompt_len + cached_len")
    logits = lp if check_bool("all_logits", all_logits) else 1
    return Iteration.of(model, sequences=b, new_tokens=lp, cached_tokens=cached_len, logits=logits)


def _parts(dep, prompt_len, batch_size, cached_len, all_logits):
    it = prefill_iteration(dep.model, prompt_len, batch_size=batch_size, cached_len=cached_len,
                           all_logits=all_logits)
    return time_parts(dep, iteration_work(dep, it))


@deployment_function
def prefill_step_parts(dep: Deployment, prompt_len, *, batch_size=1, cached_len=0, all_logits=False) -> dict:
    """The parts of one prefill step in seconds; same keys as :func:`~servingmath.decode.decode_step_parts`.

    Returns a dict with ``weight_memory``, ``kv_memory``, ``linear_compute``,
    ``attention_compute``, ``communication`` and ``overhead`` (arrays broadcast).
    Derived in the chapter "Prefill".

    Examples
    --------
    >>> parts = prefill_step_parts("Llama-2-7B", "A100-SXM4-80GB", 2048)
    >>> {k: round(float(v) * 1e3, 2) for k, v in parts.items()}
    {'weight_memory': 6.49, 'kv_memory': 0.53, 'linear_compute': 85.02, 'attention_compute': 3.53, 'communication': 0.0, 'overhead': 0.0}
    """
    return _parts(dep, prompt_len, batch_size, cached_len, all_logits)


@deployment_function
def prefill_time(dep: Deployment, prompt_len, *, batch_size=1, cached_len=0, all_logits=False):
    """Seconds to prefill ``batch_size`` prompts of ``prompt_len`` new tokens each.

    Parameters
    ----------
    model, accelerator : or one Deployment
    prompt_len : int or array
        New tokens per prompt, >= 1.
    batch_size : int or array
        Prompts prefilled together in one iteration.
    cached_len : int or array
        Tokens of each prompt already in the KV cache (a shared system prompt,
        or the earlier chunks of a chunked prefill).
    all_logits : bool
        True: the LM head runs on every prompt token, not only the last.
    Deployment settings as keyword options (data types, tensor_parallel, mfu, mbu, overlap, ...).

    Notes
    -----
    hybrid: T = max(W_bytes / W, 2 B (P_body L_p + V D) / F)
    + max(B (L_p + L_c) k / W, 4 L H d_h B (L_p L_c + L_p (L_p + 1) / 2) / F) + T_comm,
    with F and W scaled by MFU and MBU and every term divided by N. Derived in
    the chapter "Prefill".

    Examples
    --------
    >>> round(prefill_time("Llama-2-7B", "A100-SXM4-80GB", 2048, mfu=0.6) * 1e3, 1)
    147.6
    """
    return combine(dep.overlap, _parts(dep, prompt_len, batch_size, cached_len, all_logits))


@deployment_function
def ttft(dep: Deployment, prompt_len, *, queueing_delay=0.0, batch_size=1, cached_len=0, all_logits=False):
    """Time to first token: queueing delay + prefill time, in seconds.

    The first output token comes out of the prefill's last forward pass, so
    no decode step is added. Derived in the chapter "Prefill".

    >>> round(ttft("Llama-2-7B", "A100-SXM4-80GB", 2048, queueing_delay=0.1), 4)
    0.1886
    """
    q = check_nonnegative("queueing_delay", queueing_delay)
    t = combine(dep.overlap, _parts(dep, prompt_len, batch_size, cached_len, all_logits))
    return scalar_or_array(q + t)


def prefill_flops(model, prompt_len, *, batch_size=1, cached_len=0, all_logits=False, part="total"):
    """FLOPs of a prefill (all GPUs together): weight matmuls + causal attention.

    Derived in the chapter "Anatomy of a request" (notebooks/01_anatomy_of_a_request.ipynb).

    Parameters
    ----------
    model : str or ModelConfig
    prompt_len, batch_size, cached_len, all_logits
        As in :func:`prefill_time`.
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
    check_choice("part", part, _FLOP_PARTS)
    it = prefill_iteration(model, prompt_len, batch_size=batch_size, cached_len=cached_len, all_logits=all_logits)
    linear = 2.0 * (body_parameter_count(model) * np.asarray(it.tokens)
                    + lm_head_parameter_count(model) * np.asarray(it.logits))
    attention = attention_flops_per_pair(model) * np.asarray(it.attention_pairs)
    result = {"total": linear + attention, "linear": linear + 0 * attention,
              "attention": attention + 0 * linear}[part]
    return scalar_or_array(result)


@deployment_function
def prefill_throughput(dep: Deployment, prompt_len, *, batch_size=1, cached_len=0, all_logits=False):
    """Prompt tokens processed per second by the whole model instance: B L_p / T_prefill.

    ``prompt_len`` x ``batch_size`` is the number of tokens in the step (a
    chunk of a chunked prefill is ``prompt_len`` new tokens after
    ``cached_len`` earlier ones). Divide by ``tensor_parallel`` for tokens/s
    per GPU. Derived in the chapter "Prefill".

    >>> round(prefill_throughput("Llama-2-7B", "A100-SXM4-80GB", 2048))
    23129
    >>> round(prefill_throughput("Llama-2-7B", "A100-SXM4-80GB", 1))
    154
    """
    t = combine(dep.overlap, _parts(dep, prompt_len, batch_size, cached_len, all_logits))
    tokens = np.asarray(prompt_len, dtype=float) * np.asarray(batch_size, dtype=float)
    return scalar_or_array(tokens / t)


def critical_prompt_length(model, *, all_logits=False):
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
    near 12 D for classic MHA with F = 8 D / 3. Derived in the chapter "Prefill".

    Examples
    --------
    >>> round(critical_prompt_length("Llama-2-7B"))   # beyond its 4096-token context
    49409
    """
    model = get_model(model)
    logits = check_bool("all_logits", all_logits)
    a = float(attention_flops_per_pair(model)) / 4.0     # L H d_h (MLA: its absorbed FLOPs per pair / 4)
    if a == 0.0:
        return float("inf")   # attention FLOPs ignored (a model given by its totals)
    p_head = float(lm_head_parameter_count(model))
    p_body = float(body_parameter_count(model))
    if logits:
        p_body, p_head = p_body + p_head, 0.0
    root = ((p_body - a) + np.sqrt((p_body - a) ** 2 + 4 * a * p_head)) / (2 * a)
    w, phi = window_of(model)
    if w is None or root <= w:
        return float(root)
    if phi < 1.0:
        # a share phi of the layers windowed: 2 a (1 - phi) n (n + 1) + 4 a phi [w (w + 1) / 2 + (n - w) w]
        # = 2 (p_body n + p_head), a quadratic A n^2 + B n + C = 0 with one positive root
        qa = a * (1.0 - phi)
        qb = a * (1.0 - phi) + 2 * a * phi * w - p_body
        qc = -(a * phi * w * (w - 1) + p_head)
        return float((-qb + np.sqrt(qb * qb - 4 * qa * qc)) / (2 * qa))
    # beyond the window: attention = 2 a w (w + 1) + 4 a w (n - w), linear = 2 (p_body n + p_head)
    if 2 * a * w <= p_body:
        return float("inf")
    return float((p_head + a * w * (w - 1)) / (2 * a * w - p_body))


@deployment_function
def saturating_chunk_size(dep: Deployment, *, all_logits=False):
    """Tokens per prefill step at which the weight matmuls turn compute-bound.

    The step reads the weights once (W_bytes / (W MBU), plus one gathered
    embedding row per token) and multiplies its T tokens by them
    (2 (P_body T + V D) / (F MFU) for one sequence whose last token needs
    logits). Below T* the step takes about the same time whatever T is
    (memory-bound); above it the time grows with T and the prefill throughput
    saturates at about F MFU / (2 P_body) tokens/s.

    Returns
    -------
    float or ndarray
        T* = (W_bytes F MFU / (2 W MBU) - V D) / P_body, about
        (b_w / 2) x ridge point x P / P_body. Independent of tensor
        parallelism (both sides divide by N); communication is not included.
        For MoE, W_bytes counts the experts a chunk of T* tokens touches
        (found by bisection). Derived in the chapter "Prefill".

    Examples
    --------
    >>> round(saturating_chunk_size("Llama-2-7B", "H100"), 1)
    301.4
    >>> round(saturating_chunk_size("Llama-2-7B", "H100", weight_dtype="int4"), 1)
    75.3
    """
    logits = check_bool("all_logits", all_logits)
    coef = work_coefficients(dep)
    f, w = dep.flops, dep.bandwidth
    per_token = coef.linear_flops_per_token / f + (coef.linear_flops_per_logit / f if logits else 0.0)
    head = 0.0 if logits else coef.linear_flops_per_logit / f
    slope = per_token - coef.embedding_bytes_per_token / w

    def excess(t):   # compute minus memory, increasing in t
        memory = np.asarray(coef.weight_bytes(t, 1.0)) / w - coef.embedding_bytes_per_token / w * t
        return t * slope + head - memory

    if dep.model.is_moe:
        top = np.asarray(coef.weight_bytes(1e9, 1.0)) / w / slope
        tokens = bisect_increasing(excess, 0.0, top)
    else:
        tokens = (np.asarray(coef.weight_bytes(0.0, 1.0)) / w - head) / slope
    return scalar_or_array(np.maximum(tokens, 0.0))


@deployment_function
def prefix_cache_saving(dep: Deployment, prompt_len, cached_len, *, batch_size=1, all_logits=False):
    """Fraction of the prefill time a cached prefix saves: 1 - T(L_p | L_c cached) / T(L_c + L_p).

    ``prompt_len`` is the number of new tokens computed after the
    ``cached_len`` cached ones (as in :func:`prefill_time`); without the
    cache all ``cached_len + prompt_len`` tokens would be computed. Between 0
    and 1. A compute-bound prefill saves the cached fraction c / (c + L_p) of
    its linear work but only about the square of it of its attention work
    (the cached tokens' attention among themselves; the new tokens, last in
    the sequence, still attend to everything), so the saving is a little
    below the cached fraction. Derived in the chapter "Prefill".

    >>> round(prefix_cache_saving("Llama-3.1-8B", "H100", 1024, 3072), 3)
    0.737
    """
    lp = check_integer("prompt_len", prompt_len, minimum=1)
    lc = check_nonnegative("cached_len", cached_len)
    check_integer("cached_len", lc, minimum=0)
    with_cache = combine(dep.overlap, _parts(dep, lp, batch_size, lc, all_logits))
    without = combine(dep.overlap, _parts(dep, lp + lc, batch_size, 0, all_logits))
    return scalar_or_array(1.0 - np.asarray(with_cache) / without)


@deployment_function
def burst_mean_ttft(dep: Deployment, prompt_len, n_requests, *, schedule="batched", all_logits=False):
    """Mean TTFT of ``n_requests`` identical prompts that arrive at once, in seconds.

    * ``"batched"``: one prefill of the whole batch; every request gets its
      first token when the batch finishes: T_prefill(B = n).
    * ``"sequential"``: one prompt after the other; request i waits for the
      i - 1 before it: mean = (n + 1) / 2 x T_prefill(B = 1).

    Once a single prompt saturates the GPU, batching adds no throughput, so
    the batched mean is close to twice the sequential one for large n.
    Derived in the chapter "Prefill".

    >>> round(burst_mean_ttft("Llama-2-7B", "A100", 2048, 16), 3)
    1.417
    >>> round(burst_mean_ttft("Llama-2-7B", "A100", 2048, 16, schedule="sequential"), 3)
    0.753
    """
    check_choice("schedule", schedule, BURST_SCHEDULES)
    n = check_integer("n_requests", n_requests, minimum=1)
    if schedule == "batched":
        result = combine(dep.overlap, _parts(dep, prompt_len, n_requests, 0, all_logits))
    else:
        result = (n + 1) / 2 * np.asarray(combine(dep.overlap, _parts(dep, prompt_len, 1, 0, all_logits)))
    return scalar_or_array(result)


@deployment_function
def prefill_mfu(dep: Deployment, prompt_len, measured_time, *, batch_size=1, cached_len=0, all_logits=False):
    """MFU a measured prefill implies: prefill FLOPs / (measured time x N x peak FLOP/s).

    Databricks' definition (achieved FLOP/s over peak), with the FLOPs of
    :func:`prefill_flops` and the dense peak of the deployment's compute dtype
    (its ``mfu`` setting is not used). A measured TTFT also holds queueing and
    framework overhead, so this is a lower bound on the kernels' own MFU.
    Derived in the chapter "Prefill".

    >>> round(prefill_mfu("Llama-2-7B", "A100", 2048, measured_time=0.139), 3)
    0.637
    """
    t = check_positive("measured_time", measured_time)
    n = np.asarray(dep.tensor_parallel, dtype=float)
    flops = prefill_flops(dep.model, prompt_len, batch_size=batch_size, cached_len=cached_len,
                          all_logits=all_logits)
    return scalar_or_array(np.asarray(flops) / (t * n * dep.accelerator.peak_flops(dep.compute_dtype)))


@deployment_function
def chunked_prefill_time(dep: Deployment, prompt_len, *, chunk_size=None, token_budget=None, decode_batch=0,
                         decode_context=0, all_logits=False, per_step=False):
    """Seconds to prefill one prompt in chunks: its TTFT under chunked prefill (Sarathi-Serve, vLLM v1).

    The prompt of L_p tokens goes through in ceil(L_p / c) iterations of c new
    tokens each (the last one shorter), each chunk attending to the chunks
    before it; every iteration also carries ``decode_batch`` running decodes at
    ``decode_context`` (they share the step: its weight read, and the budget).

    Parameters
    ----------
    model, accelerator : or one Deployment
    prompt_len : int
        L_p, tokens of the prompt (scalar).
    chunk_size : int, optional
        c, prompt tokens per iteration.
    token_budget : int, optional
        Tokens per iteration (vLLM's ``max_num_batched_tokens``); the chunk is
        what the decodes leave: c = budget - decode_batch. Give this or ``chunk_size``.
    decode_batch : int
        Decoding sequences in every iteration (one token each), B_d >= 0.
    decode_context : int
        Their context, S.
    all_logits : bool
        LM head at every prompt position (default: the last chunk's last token).
    per_step : bool
        True: return the seconds of each iteration (an array) instead of their sum.

    Returns
    -------
    float or ndarray
        The prompt's TTFT without queueing. Compare with :func:`prefill_time`
        (one iteration): the difference is the TTFT cost of chunking.

    Notes
    -----
    Chunk i (i = 0, 1, ...) is one iteration of the step model with c new
    tokens after i c cached ones, plus B_d decodes:
    T = sum_i step(Iteration.of(new_tokens=c_i, cached_tokens=i c) + Iteration.decode(B_d, S)).
    Each chunk re-reads the weights (when c is below the saturating chunk
    size, :func:`saturating_chunk_size`, that is the cost) and the KV cache of
    the chunks before it, sum_i i c k = k c n (n - 1) / 2 ~ k L_p^2 / (2 c) bytes
    (hidden under attention's math in the hybrid model once c exceeds the
    ridge / (2 G / b_kv)). Derived in the chapter "Scheduling".

    References
    ----------
    A. Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM Inference
    with Sarathi-Serve", OSDI 2024.

    Examples
    --------
    >>> one = prefill_time("Llama-3.1-8B", "H100", 8192)
    >>> chunked = chunked_prefill_time("Llama-3.1-8B", "H100", 8192, token_budget=512, decode_batch=64,
    ...                                decode_context=2048)
    >>> round(one * 1e3, 1), round(chunked * 1e3, 1)   # ms: 19 chunks of 448 tokens, each with 64 decodes
    (133.4, 236.5)
    """
    if not dep.is_scalar:
        raise ValueError("chunked_prefill_time takes a scalar deployment (one configuration)")
    lp = int(check_context_len(dep.model, check_integer("prompt_len", check_scalar("prompt_len", prompt_len),
                                                        minimum=1), "prompt_len"))
    bd = int(check_integer("decode_batch", check_scalar("decode_batch", decode_batch), minimum=0))
    s = check_context_len(dep.model, check_scalar("decode_context", decode_context), "decode_context")
    if (chunk_size is None) == (token_budget is None):
        raise ValueError("give chunk_size= (prompt tokens per iteration) or token_budget= (all tokens per "
                         "iteration, decodes included), not both or neither")
    if chunk_size is not None:
        chunk = int(check_integer("chunk_size", check_scalar("chunk_size", chunk_size), minimum=1))
    else:
        budget = int(check_integer("token_budget", check_scalar("token_budget", token_budget), minimum=1))
        chunk = budget - bd
        if chunk < 1:
            raise ValueError(f"token_budget = {budget} leaves no prompt tokens after decode_batch = {bd} "
                             "decodes (one token each): raise token_budget or lower decode_batch")
    logits_all = check_bool("all_logits", all_logits)
    if -(-lp // chunk) > 100_000:
        raise ValueError(f"prompt_len = {lp} in chunks of {chunk} is {-(-lp // chunk)} iterations: more than "
                         "100000; give a larger chunk_size or token_budget")
    starts = np.arange(0, lp, chunk)
    sizes = np.minimum(chunk, lp - starts)
    logits = sizes if logits_all else (starts + sizes == lp).astype(int)
    it = Iteration.of(dep.model, sequences=1, new_tokens=sizes, cached_tokens=starts, logits=logits)
    if bd:
        it = it + Iteration.decode(dep.model, sequences=bd, context_len=float(s))
    steps = np.asarray(combine(dep.overlap, time_parts(dep, iteration_work(dep, it))), dtype=float)
    steps = np.broadcast_to(steps, sizes.shape)
    return steps.copy() if check_bool("per_step", per_step) else float(steps.sum())


def multistep_wait(decode_step_time, scheduler_steps):
    """Mean extra wait before a new request's prefill when the engine decides once every n decode steps.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    vLLM 0.6's multi-step scheduling (``--num-scheduler-steps n``) runs n decode steps of
    ``decode_step_time`` d seconds per scheduling decision, and looks at the queue only between
    runs. A request arriving at a random moment of a busy engine (Poisson arrivals see time
    averages) waits for the rest of the run: n d / 2 on average, against d / 2 when the engine
    decides after every step. The extra wait is

        W_n = (n - 1) d / 2.

    It holds while the engine is decoding whenever a request arrives (a busy batch, prefills a
    small share of the time); an idle engine admits at once.

    Examples
    --------
    >>> round(multistep_wait(0.008, 10) * 1e3, 1)   # ms: ten steps of 8 ms per decision
    36.0
    >>> multistep_wait(0.008, 1)
    0.0
    """
    d = check_positive("decode_step_time", decode_step_time)
    n = check_integer("scheduler_steps", scheduler_steps, minimum=1)
    return scalar_or_array((np.asarray(n) - 1) * np.asarray(d) / 2)
