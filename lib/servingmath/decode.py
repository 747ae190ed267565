"""Decode: the time of one decode step (TPOT), throughput, the knee and the throughput ceiling.

One decode step produces one token for each of the ``batch_size`` running
sequences. On each GPU of a tensor-parallel group of N it must (the step
model, :mod:`servingmath.step`):

* read the weights once: every weight except the input-embedding table, whose
  B rows it gathers (W_bytes = (P - V D) b_w for untied embeddings), / N;
* read every running sequence's KV cache: B x S x kv_bytes_per_token / N;
* perform the weight matmuls: 2 x P_matmul x B FLOPs / N;
* perform attention: 4 x L x H x d_h x S x B FLOPs / N;
* (N > 1) all-reduce the activations twice per layer.

The parts combine by one of three overlap models (:func:`servingmath.step.combine`):
``"additive"`` (upper bound), ``"roofline"`` (lower bound) and ``"hybrid"``
(the default: each kernel overlaps its own traffic and math; weight matmuls
may turn compute-bound, attention stays bandwidth-bound).

Throughput B / T(B) rises almost linearly while the weight read dominates the
step, turns at the *knee* (:func:`knee_batch_size`) and approaches a ceiling
(:func:`max_decode_throughput`) that compute, or at long contexts the KV-cache
reads, impose. Beyond a critical context length
(:func:`critical_context_length`) the KV reads of each added sequence cost
more time than its share of the matmuls: in the roofline model the step then
never turns compute-bound at any batch size. The chapter "Decode: TPOT(B),
throughput and the knee" derives all of these.

Every function takes a model and an accelerator (or one
:class:`~servingmath.deployment.Deployment`), then its own arguments, then
the deployment settings as keyword options (``weight_dtype``, ``tensor_parallel``,
``mfu``, ``mbu``, ``overlap``, ``allreduce_latency``, ...).

Conventions
-----------
TPOT here is the steady-state decode step time, the quantity vLLM's
``TPOT = (E2E - TTFT) / (output tokens - 1)`` measures when nothing else
shares the GPU. ``context_len`` S is the number of tokens in each sequence's KV
cache including the one the step writes (use the mean over the batch: the KV
term is linear in it). ``mfu`` and ``mbu`` scale the peak FLOP/s and bandwidth
(Databricks' definitions, achieved / peak); 1.0 gives the physical bound.

Examples
--------
>>> t = decode_step_time("Llama-2-7B", "A100-SXM4-80GB", batch_size=1, context_len=0)
>>> round(t * 1e3, 2)   # ms: 13.21 GB of bf16 weights (the embedding table is gathered) / 2.039 TB/s
6.48
>>> round(knee_batch_size("Llama-2-7B", "A100-SXM4-80GB", context_len=0), 1)   # the ridge point, 153
153.0
>>> round(critical_context_length("Llama-2-7B", "A100-SXM4-80GB"))   # tokens
165
>>> knee_batch_size("Llama-2-7B", "A100-SXM4-80GB", 1024, overlap="roofline")
inf
"""

from __future__ import annotations

import numpy as np

from ._validation import bisect_increasing, check_integer, scalar_or_array
from .deployment import Deployment, deployment_function
from .models import check_context_len, matmul_parameter_count, require_shape
from .step import Iteration, combine, iteration_work, time_parts, work_coefficients

__all__ = [
    "decode_step_parts",
    "decode_step_time",
    "decode_throughput",
    "matmul_parameter_count",
    "knee_batch_size",
    "critical_context_length",
    "max_decode_throughput",
    "decode_coefficients",
    "communication_bound_tensor_parallel",
]


def _decode_parts(dep: Deployment, batch_size, context_len) -> dict:
    check_integer("batch_size", batch_size, minimum=1)     # named as the caller knows it, not "sequences"
    it = Iteration.decode(dep.model, sequences=batch_size, context_len=context_len)
    return time_parts(dep, iteration_work(dep, it))


@deployment_function
def decode_step_parts(dep: Deployment, batch_size, context_len) -> dict:
    """The parts of one decode step, in seconds (arrays broadcast).

    Returns a dict with ``weight_memory``, ``kv_memory``, ``linear_compute``,
    ``attention_compute``, ``communication`` and ``overhead``
    (:func:`servingmath.step.time_parts`). Derived in the chapter "Decode".

    >>> p = decode_step_parts("Llama-3.1-8B", "H100", 64, 1024)
    >>> {k: round(float(v) * 1e3, 3) for k, v in p.items()}
    {'weight_memory': 4.481, 'kv_memory': 2.564, 'linear_compute': 0.971, 'attention_compute': 0.035, 'communication': 0.0, 'overhead': 0.0}
    """
    return _decode_parts(dep, batch_size, context_len)


@deployment_function
def decode_step_time(dep: Deployment, batch_size, context_len):
    """Seconds for one decode step of ``batch_size`` sequences: the TPOT.

    Parameters
    ----------
    model, accelerator : str, ModelConfig, Accelerator; or one Deployment
    batch_size : int or array of int
        Sequences decoding together, B >= 1.
    context_len : int or array
        Tokens in each sequence's KV cache, 0 <= S <= the model's maximum.
    weight_dtype, kv_dtype, compute_dtype, tensor_parallel, mfu, mbu, overlap, allreduce_latency, ...
        Deployment settings, keyword-only (:class:`~servingmath.deployment.Deployment`).

    Returns
    -------
    float or ndarray
        Seconds per step (= TPOT in steady state). Communication and the
        per-step overhead are added (not overlapped) in every overlap model.

    Notes
    -----
    hybrid: T(B) = max(W_bytes / W, 2 P B / F) + max(B S k / W, 4 L H d_h S B / F) + T_comm,
    with W and F scaled by MBU and MFU and every term divided by N
    (:mod:`servingmath.step`). Derived in the chapter "Decode".

    Examples
    --------
    >>> round(decode_step_time("Llama-2-7B", "A100-SXM4-80GB", 64, 512) * 1e3, 2)
    14.91
    >>> decode_step_time("Llama-3.1-8B", "H100", 1, 0, tensor_parallel=3)
    Traceback (most recent call last):
    ...
    ValueError: tensor_parallel = 3 cannot split Llama-3.1-8B: 3 does not divide its 32 query heads. Allowed degrees: 1, 2, 4, 8, 16, 32
    """
    return combine(dep.overlap, _decode_parts(dep, batch_size, context_len))


@deployment_function
def decode_throughput(dep: Deployment, batch_size, context_len):
    """Output tokens per second of the whole model instance: B / T(B).

    Divide by ``tensor_parallel`` for tokens/s per GPU. Derived in the chapter "Decode".

    >>> round(decode_throughput("Llama-2-7B", "A100-SXM4-80GB", 64, 512))
    4293
    """
    t = combine(dep.overlap, _decode_parts(dep, batch_size, context_len))
    return scalar_or_array(np.asarray(batch_size, dtype=float) / t)


@deployment_function
def decode_coefficients(dep: Deployment, context_len=0) -> dict:
    """A decode step as affine functions of the batch B, in seconds (dense models exactly).

    Derived in the chapter "The Pareto frontier" (notebooks/06_pareto_frontier.ipynb).

    Returns ``weight_memory`` (at B = 0, with the LM head), ``gather`` (weight
    memory per sequence: its embedding row), ``linear``, ``kv``, ``attention``
    (seconds per sequence), ``communication`` (at B = 0) and
    ``communication_per_sequence``, and ``overhead`` (with an all-reduce that is not affine,
    ``allreduce_protocol="auto"``, the two communication entries are its piece at B -> 0,
    :meth:`servingmath.sharding.AllReduce.fixed_protocols`). For a mixture of experts
    ``weight_memory`` is the B -> 0 limit and the experts touched grow with B
    (:meth:`servingmath.step.WorkCoefficients.weight_bytes`).

    >>> from servingmath.deployment import Deployment
    >>> c = decode_coefficients(Deployment.build("Llama-3.1-8B", "H100"), 0)
    >>> round(c["weight_memory"] * 1e3, 3), round(c["weight_memory"] / c["linear"], 1)
    (4.481, 295.3)
    >>> decode_coefficients("Llama-3.1-8B", "H100", 0) == c    # the library's one calling convention
    True
    """
    coef = work_coefficients(dep)
    w, f = dep.bandwidth, dep.flops
    one = time_parts(dep, iteration_work(dep, Iteration.decode(dep.model, sequences=1, context_len=context_len)))
    zero_comm = time_parts(dep, iteration_work(dep, Iteration(0.0, 0.0, 0.0, 0.0)))["communication"]
    fixed = np.asarray(coef.weight_bytes(0.0, 1.0), dtype=float) / w
    gather = coef.embedding_bytes_per_token / w
    return {
        "weight_memory": scalar_or_array(fixed),
        "gather": scalar_or_array(gather + 0 * fixed),
        "linear": scalar_or_array((coef.linear_flops_per_token + coef.linear_flops_per_logit) / f),
        "kv": scalar_or_array(one["kv_memory"]),
        "attention": scalar_or_array(one["attention_compute"]),
        "communication": scalar_or_array(zero_comm),
        "communication_per_sequence": scalar_or_array(np.asarray(one["communication"]) - zero_comm),
        "overhead": scalar_or_array(dep.step_overhead),
    }


def _knee(dep: Deployment, context_len):
    c = decode_coefficients(dep, context_len)
    w0, g = np.asarray(c["weight_memory"]), np.asarray(c["gather"])
    lin, kv, att = np.asarray(c["linear"]), np.asarray(c["kv"]), np.asarray(c["attention"])
    if dep.overlap == "hybrid":
        slope = lin - g                      # weights vs matmuls only
    else:
        slope = lin + att - g - kv           # all compute vs all memory
    positive = slope > 0
    safe = np.where(positive, slope, 1.0)
    if dep.model.is_moe:
        coef = work_coefficients(dep)
        bandwidth = dep.bandwidth
        all_experts = np.asarray(coef.weight_bytes(1e9, 1.0) - coef.embedding_bytes_per_token * 1e9) / bandwidth

        def excess(b):
            memory = np.asarray(coef.weight_bytes(b, 1.0)) / bandwidth - g * b
            return b * safe - memory

        knee = bisect_increasing(excess, 0.0, all_experts / safe)
    else:
        knee = w0 / safe
    shape = np.broadcast_shapes(*(np.shape(v) for v in (w0, slope, kv, att)))   # context_len too
    return np.broadcast_to(np.where(positive, knee, np.inf), shape)


@deployment_function
def knee_batch_size(dep: Deployment, context_len=0):
    """The knee B* of decode: the batch size at which the step turns compute-bound.

    Below B* the step time is set by memory traffic and grows slowly with the
    batch (throughput rises almost linearly); above it the step time grows in
    proportion to B (throughput is flat, or nearly so).

    Parameters
    ----------
    model, accelerator : or one Deployment
    context_len : int or array
        Tokens in each sequence's KV cache (the roofline knee depends on it; the hybrid one does not).
    overlap : {"hybrid", "roofline", "additive"}
        The deployment's overlap model picks which knee (see Notes).
    Other deployment settings as keyword options (data types, MFU, MBU, tensor_parallel).

    Returns
    -------
    float or ndarray
        B* as a real number (not rounded to a whole batch); ``inf`` where the
        step never turns compute-bound. The communication time and the
        per-step overhead do not move it (they are added outside the max).

    Notes
    -----
    With T_w = W_bytes / (W x MBU) the weight read (the embedding rows the
    batch gathers, g per sequence, aside), and per sequence
    c_lin = 2 P / (F x MFU) (weight matmuls), c_att = 4 L H d_h S / (F x MFU)
    (attention math) and m_kv = S k / (W x MBU) (its KV read):

    * ``"hybrid"``: T = max(T_w + B g, B c_lin) + B max(m_kv, c_att); the weight
      matmuls turn compute-bound at B* = T_w / (c_lin - g), whatever the context:
      the KV term does not move this knee, it lowers the throughput ceiling.
      For a dense model B* = (F MFU) / (W MBU) x b_w / 2 x (1 + g / (c_lin - g)):
      the ridge point in bf16, to four digits.
    * ``"roofline"``: T = max(T_w + B (g + m_kv), B (c_lin + c_att)); the max
      switches branch at B* = T_w / (c_lin + c_att - g - m_kv), and never
      (``inf``) when the KV read outweighs the compute of a sequence, i.e.
      when S >= :func:`critical_context_length`.
    * ``"additive"``: T has no branch; its knee is taken at the same balance
      point, compute time = memory time.

    Tensor parallelism divides every term by N, so N cancels, except where KV
    heads and their projections replicate (N > K). For a mixture of experts
    T_w grows with B (more experts touched) and B* is found by bisection.

    References
    ----------
    Databricks, "LLM Inference Performance Engineering: Best Practices" (2023-10);
    R. Pope et al., "Efficiently Scaling Transformer Inference", arXiv:2211.05102 (2022);
    J. Austin et al., "How to Scale Your Model", part "All About Rooflines" (2025).
    Derived in the chapter "Decode".

    Examples
    --------
    >>> round(knee_batch_size("Llama-3.1-8B", "H100", 0), 1)   # the ridge, 295.3 FLOP/B
    295.3
    >>> round(knee_batch_size("Llama-3.1-8B", "H100", 256, overlap="roofline"), 1)
    847.4
    >>> round(knee_batch_size("Llama-3.1-8B", "H100", 0, mfu=0.5, mbu=0.8), 1)
    184.6
    >>> round(knee_batch_size("Llama-3.1-8B", "H100", weight_dtype="int4"), 1)   # b_w / 2 = 1/4 of the ridge
    73.8
    """
    return scalar_or_array(_knee(dep, context_len))


@deployment_function
def critical_context_length(dep: Deployment):
    """Context length beyond which each sequence's KV reads outweigh its share of the compute.

    Returns
    -------
    float or ndarray
        S_crit in tokens (``inf`` if it does not exist). It may exceed the
        model's maximum context: then the KV reads never dominate. A sliding
        window is not applied (the formula is for full attention).

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
    nor does the tensor-parallel degree (it divides both sides, KV-head
    replication apart). Derived in the chapter "Decode".

    Examples
    --------
    >>> round(critical_context_length("Llama-3.1-8B", "H100"))   # GQA, 128 KiB per token
    388
    >>> round(critical_context_length("Llama-2-7B", "A100", overlap="roofline"))   # MHA, 512 KiB per token
    166
    """
    coef = work_coefficients(dep)
    f, w = dep.flops, dep.bandwidth
    linear = (coef.linear_flops_per_token + coef.linear_flops_per_logit) / f
    kv = coef.kv_bytes_per_token / w
    attention = coef.attention_flops_per_pair / f
    if dep.overlap == "hybrid":
        result = linear / np.maximum(kv, attention)
    else:
        denominator = np.asarray(kv - attention, dtype=float)
        positive = denominator > 0
        result = np.where(positive, linear / np.where(positive, denominator, 1.0), np.inf)
    return scalar_or_array(result)


@deployment_function
def max_decode_throughput(dep: Deployment, context_len):
    """The throughput ceiling: lim B -> inf of B / T(B), output tokens/s of the whole instance.

    Memory capacity stops the batch long before infinity; this is the bound
    that no batch size can beat, at this context length.

    Returns
    -------
    float or ndarray
        Tokens/s. Divide by ``tensor_parallel`` for tokens/s per GPU.

    Notes
    -----
    T(B) grows asymptotically as B times a per-sequence slope, so the limit is
    1 / slope with slope (every part divided by N, plus the per-sequence
    all-reduce traffic when N > 1; the weight read, the all-reduce latency and
    the overhead are fixed costs per step and drop out)

    * ``"additive"``: c_lin + c_att + m_kv + g;
    * ``"roofline"``: max(c_lin + c_att, m_kv + g);
    * ``"hybrid"``: max(c_lin, g) + max(m_kv, c_att).

    At S = 0 (and N = 1) the roofline and hybrid ceilings are F x MFU / (2 P): compute alone; the
    additive one also pays each sequence's gathered embedding row, g.
    For a mixture of experts every expert is touched at large B. Derived in the
    chapter "Decode".

    Examples
    --------
    >>> round(max_decode_throughput("Llama-2-7B", "A100", 0))   # F / 2P, tok/s
    23610
    >>> round(max_decode_throughput("Llama-2-7B", "A100", 2048))   # KV reads cap it
    1758
    """
    if not dep.allreduce.is_affine:   # NCCL "auto": the ceiling of the best protocol (its lowest slope)
        return scalar_or_array(np.maximum.reduce([np.asarray(max_decode_throughput(dep.replace(allreduce=a),
                                                                                   context_len))
                                                  for a in dep.allreduce.fixed_protocols()]))
    c = decode_coefficients(dep, context_len)
    lin, att, kv, g = (np.asarray(c[k]) for k in ("linear", "attention", "kv", "gather"))
    if dep.overlap == "additive":
        slope = lin + att + kv + g
    elif dep.overlap == "roofline":
        slope = np.maximum(lin + att, kv + g)
    else:
        slope = np.maximum(lin, g) + np.maximum(kv, att)
    return scalar_or_array(1.0 / (slope + np.asarray(c["communication_per_sequence"])))


@deployment_function
def communication_bound_tensor_parallel(dep: Deployment, batch_size, context_len) -> dict:
    """The tensor-parallel degree N* beyond which a decode step waits more on its all-reduces than on HBM and FLOPs.

    Splitting a decode step over N GPUs divides its memory and compute time by
    N, but adds 2 L all-reduces of B x D activations whose cost does not
    shrink: past N* the step is communication-bound (by the links' latency or
    by their bandwidth) and more GPUs buy little latency.

    Parameters
    ----------
    model, accelerator : or one Deployment
        Its all-reduce model (``allreduce_latency``, ``allreduce_base_latency``,
        ``link_efficiency``, ``allreduce_ring_factor``) and the accelerator's
        one-way interconnect. ``tensor_parallel`` is what is solved for.
    batch_size, context_len : int or array

    Returns
    -------
    dict
        ``tensor_parallel``: N* (a real number >= 1; round up to a valid
        degree); ``latency`` and ``transfer``: the two parts of one step's
        communication at N*, in seconds; ``bound``: ``"latency"`` or
        ``"bandwidth"``, whichever is larger there.

    Notes
    -----
    With T_1 the step at N = 1 (its parts combined by the overlap model),
    m = B D b_ar the message and beta' = eta beta, the step's rest is T_1 / N and its
    communication 2 L [alpha_0 + 2 (N - 1) alpha + 2 (N - 1) / N m / beta'].
    They are equal at the positive root of

        4 L alpha N^2 + (2 L alpha_0 - 4 L alpha + 4 L m / beta') N - (4 L m / beta' + T_1) = 0,

    without latency N* = 1 + T_1 beta' / (4 L m): the bandwidth-bound degree
    (with ``allreduce_ring_factor=False`` the constant is T_1 alone). KV-head
    replication (N > K) is ignored: it only adds memory time, so N* is a lower
    bound there. How to Scale Your Model states the same balance per matmul,
    Y > F / (B beta) with beta = W_hbm / W_ici. Derived in the chapter
    "Tensor parallelism".

    Examples
    --------
    >>> r = communication_bound_tensor_parallel("Llama-3.1-70B", "H100", 8, 2048)
    >>> round(r["tensor_parallel"]), r["bound"]          # physical bound: bandwidth only
    (463, 'bandwidth')
    >>> r = communication_bound_tensor_parallel("Llama-3.1-70B", "H100", 8, 2048, allreduce_latency=0.6e-6,
    ...                                          allreduce_base_latency=6.6e-6)
    >>> round(r["tensor_parallel"], 1), r["bound"]      # NCCL's latencies: beyond ~13 GPUs
    (12.7, 'latency')
    """
    n_layers, width = require_shape(dep.model, "n_layers", "hidden_size",
                                    needed_for="the all-reduces of tensor parallelism")
    check_integer("batch_size", batch_size, minimum=1)
    check_context_len(dep.model, context_len)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        result = _communication_bound(dep, batch_size, context_len, n_layers, width)
    if not all(np.all(np.isfinite(result[k])) for k in ("tensor_parallel", "latency", "transfer")):
        raise ValueError(f"batch_size = {np.max(batch_size):g} is too large: the step time overflows")
    return result


def _communication_bound(dep, batch_size, context_len, n_layers, width):
    one = dep.replace(tensor_parallel=1)
    parts = time_parts(one, iteration_work(one, Iteration.decode(one.model, sequences=batch_size,
                                                                 context_len=context_len)))
    parts = dict(parts, communication=0.0, overhead=0.0)
    t1 = np.asarray(combine(one.overlap, parts), dtype=float)
    link = dep.accelerator.interconnect_bandwidth
    if link is None:
        raise ValueError(f"accelerator {dep.accelerator.name} has no interconnect bandwidth in the catalog")
    ar = dep.allreduce
    beta = link * np.asarray(ar.link_efficiency, dtype=float)
    m = np.asarray(batch_size, dtype=float) * width * ar.bytes_per_element
    a, a0 = np.asarray(ar.latency, dtype=float), np.asarray(ar.base_latency, dtype=float)
    L = float(n_layers)
    mb = m / beta
    qa = 4.0 * L * a
    qb = 2.0 * L * a0 - 4.0 * L * a + 4.0 * L * mb
    qc = -(4.0 * L * mb + t1) if ar.ring_factor else -t1
    disc = np.sqrt(qb * qb - 4.0 * qa * qc)
    root = np.where(qa > 0, (-qb + disc) / (2.0 * np.where(qa > 0, qa, 1.0)), -qc / np.where(qb != 0, qb, 1.0))
    n_star = np.maximum(1.0, root)
    factor = (n_star - 1.0) / n_star if ar.ring_factor else 1.0
    latency = 2.0 * L * (a0 + 2.0 * (n_star - 1.0) * a)
    transfer = 2.0 * L * 2.0 * factor * mb
    bound = np.where(latency > transfer, "latency", "bandwidth")
    return {"tensor_parallel": scalar_or_array(n_star), "latency": scalar_or_array(latency),
            "transfer": scalar_or_array(transfer), "bound": str(bound) if np.ndim(bound) == 0 else bound}
