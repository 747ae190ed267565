"""Tensor parallelism: splitting one model across N GPUs, and what the all-reduces cost.

With tensor parallelism (TP) of degree N every weight matrix is cut into N
slices (Megatron-LM: the QKV and FFN-up matrices by columns, the attention
output and FFN-down matrices by rows), and the attention heads are dealt out
N ways. Each GPU then reads 1/N of the weights and of the KV cache and does
1/N of the FLOPs, so every term of a decode step shrinks N-fold, except one:
each layer ends its attention block and its FFN block with an **all-reduce**
that sums the N partial results (``tokens x D`` activations) across the GPUs.

Ring all-reduce, alpha-beta model
---------------------------------
A ring all-reduce is a reduce-scatter followed by an all-gather, each N - 1
steps in which every GPU sends one 1/N chunk of the message to its neighbour.
With ``alpha`` the latency of one step (hop) and ``beta`` the one-way link
bandwidth,

    t = alpha_0 + 2 (N - 1) alpha + 2 (N - 1) / N x bytes / beta      (N > 1; 0 for N = 1)

``alpha_0`` is a fixed cost per call (kernel launch, synchronisation) that
NCCL's own tuning model adds. The defaults ``alpha = alpha_0 = 0`` give the
physical bound; :data:`NCCL_NVLINK_ALLREDUCE` holds realistic NVLink values.
``beta`` is the one-way figure (450 GB/s for NVLink 4), not the 900 GB/s
"bidirectional" figure of the spec sheet.

KV heads and TP
---------------
The KV cache is split by KV heads. With K KV heads and N <= K each GPU keeps
K / N heads; with N > K every GPU still needs the KV head its query heads
use, so each head is replicated N / K times and the per-GPU KV cache stops
shrinking (vLLM replicates them). :func:`servingmath.memory.kv_heads_per_gpu`
counts the heads, :func:`servingmath.memory.weight_bytes_per_gpu` the
replicated K/V projections; :func:`tensor_parallel_decode_time` reads both.

Examples
--------
>>> allreduce_time(1e9, n_gpus=2, link_bandwidth=1e9)
1.0
>>> allreduce_time(1e9, n_gpus=1, link_bandwidth=1e9)
0.0
>>> round(allreduce_time(2**20, 8, 450e9, **NCCL_NVLINK_ALLREDUCE_TIME) * 1e6, 2)   # µs
19.08
>>> t = tensor_parallel_decode_time("Llama-3.1-70B", "H100", 1, 2048, [2, 4, 8])
>>> [round(float(x) * 1e3, 2) for x in t]   # ms: halves with each doubling at the physical bound
[21.17, 10.59, 5.3]
"""

from __future__ import annotations

import numpy as np

from ._validation import (check_choice, check_fraction, check_integer, check_nonnegative,
                          check_positive, scalar_or_array)
from .datatypes import bytes_per_element, check_dtype
from .hardware import get_accelerator
from .memory import check_tensor_parallel, kv_bytes_per_token_per_gpu, weight_bytes_per_gpu
from .models import check_context_len, get_model

__all__ = [
    "NCCL_NVLINK_ALLREDUCE",
    "NCCL_NVLINK_ALLREDUCE_TIME",
    "allreduce_time",
    "ring_allreduce_bytes",
    "tensor_parallel_communication_time",
    "tensor_parallel_decode_time",
    "per_gpu_throughput",
    "tp_knee_batch_size",
    "tpot_slo_batch_size",
]

#: Realistic all-reduce costs on one NVLink 4 / NVSwitch node (8 x H100 SXM), as keyword
#: arguments of :func:`tensor_parallel_decode_time`. ``allreduce_latency`` (0.6 µs per ring
#: step) and ``allreduce_base_latency`` (6.6 µs per call) are the constants NCCL's tuning
#: model uses for a ring all-reduce with the LL protocol over NVLink (NVIDIA/nccl
#: src/graph/tuning.cc, ``baseLat`` and ``hwLat``, commit b6475625, NCCL 2.19 era; read
#: 2026-11): 7.8 µs for 2 GPUs, 15.0 µs for 8, in line with measured small-message
#: all-reduces on 8 x H100 (about 6 µs on 2 GPUs with NVLS and CUDA graphs, NVIDIA/nccl
#: issue #1259, 2024-04). ``link_efficiency`` 0.8: NCCL's ring all-reduce reaches a bus
#: bandwidth of 365-370 GB/s of NVLink 4's 450 GB/s on 8 x H100 (NVIDIA/nccl issue #1455,
#: 2024-09).
NCCL_NVLINK_ALLREDUCE = {"allreduce_latency": 0.6e-6, "allreduce_base_latency": 6.6e-6,
                         "link_efficiency": 0.8}
#: The same latencies as keyword arguments of :func:`allreduce_time`.
NCCL_NVLINK_ALLREDUCE_TIME = {"latency": 0.6e-6, "base_latency": 6.6e-6}

_KNEE_OVERLAPS = ("hybrid", "roofline")


def allreduce_time(message_bytes, n_gpus, link_bandwidth, latency=0.0, base_latency=0.0):
    """Seconds for a ring all-reduce of ``message_bytes`` over ``n_gpus`` GPUs.

    Parameters
    ----------
    message_bytes : float or array
        Size of the buffer every GPU contributes (and receives summed), bytes >= 0.
    n_gpus : int or array
        GPUs in the ring, N >= 1.
    link_bandwidth : float or array
        One-way bandwidth of each GPU's link, bytes/s (NVLink 4: 450e9, not 900e9).
    latency : float or array
        alpha: latency of one ring step, seconds (0 = physical bound).
    base_latency : float or array
        alpha_0: fixed cost per call, seconds (0 = physical bound).

    Returns
    -------
    float or ndarray
        Seconds; exactly 0 for N = 1 (nothing to reduce, no call).

    Notes
    -----
    Reduce-scatter then all-gather, each N - 1 steps of one m/N chunk:

        t = alpha_0 + 2 (N - 1) alpha + 2 (N - 1) / N x m / beta.

    The bandwidth term is optimal: each GPU must receive (N - 1)/N of the
    other GPUs' data to reduce its chunk, and the same again to collect the
    others' reduced chunks.

    References
    ----------
    Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
    workstations", J. Parallel Distrib. Comput. 69(2), 2009. Thakur, Rabenseifner &
    Gropp, "Optimization of collective communication operations in MPICH", IJHPCA
    19(1), 2005 (the alpha-beta cost model).

    Examples
    --------
    >>> round(allreduce_time(16e6, 8, 450e9) * 1e6, 2)   # µs, 16 MB over 8 GPUs
    62.22
    >>> allreduce_time(16e6, 8, 450e9) == allreduce_time(16e6, 8, 900e9)
    False
    """
    m = check_nonnegative("message_bytes", message_bytes)
    n = check_integer("n_gpus", n_gpus, minimum=1)
    bw = check_positive("link_bandwidth", link_bandwidth)
    a = check_nonnegative("latency", latency)
    a0 = check_nonnegative("base_latency", base_latency)
    result = (n > 1) * a0 + 2 * (n - 1) * a + 2 * (n - 1) / n * m / bw
    return scalar_or_array(result, message_bytes, n_gpus, link_bandwidth, latency, base_latency)


def ring_allreduce_bytes(message_bytes, n_gpus):
    """Bytes each GPU sends (and receives) in a ring all-reduce: 2 (N - 1) / N x m.

    >>> ring_allreduce_bytes(1e6, 8)
    1750000.0
    """
    m = check_nonnegative("message_bytes", message_bytes)
    n = check_integer("n_gpus", n_gpus, minimum=1)
    return scalar_or_array(2 * (n - 1) / n * m, message_bytes, n_gpus)


def tensor_parallel_communication_time(model, accelerator, tokens, tensor_parallel,
                                       activation_dtype: str = "bf16", latency=0.0,
                                       base_latency=0.0, link_efficiency=1.0):
    """Seconds per forward step spent in all-reduces: 2 per layer of ``tokens`` x D activations.

    Parameters
    ----------
    model : str or ModelConfig
    accelerator : str or Accelerator
        Its ``interconnect_bandwidth`` (one-way) is beta.
    tokens : int or array
        Tokens in the step: the batch size in decode, batch x prompt length in prefill.
    tensor_parallel : int or array
        N; the result is 0 for N = 1.
    activation_dtype : str
        Data type of the all-reduced activations.
    latency, base_latency : float
        alpha (per ring step) and alpha_0 (per call), seconds.
    link_efficiency : float in (0, 1]
        Achieved / peak link bandwidth (1.0 = physical bound).

    Notes
    -----
    T_comm = 2 L [alpha_0 + 2 (N - 1) alpha + 2 (N - 1) / N x tokens D b_a / (eta_link beta)].

    Examples
    --------
    >>> t = tensor_parallel_communication_time("Llama-3.1-70B", "H100", 64, 8)
    >>> round(t * 1e3, 3)   # ms per decode step at B = 64, physical bound
    0.652
    """
    model = get_model(model)
    acc = get_accelerator(accelerator)
    n = check_integer("tensor_parallel", tensor_parallel, minimum=1)
    t = check_nonnegative("tokens", tokens)
    check_nonnegative("latency", latency)
    check_nonnegative("base_latency", base_latency)
    eta = check_fraction("link_efficiency", link_efficiency)
    message = t * model.hidden_size * bytes_per_element(activation_dtype)
    if np.all(n == 1):
        return scalar_or_array(np.zeros(np.broadcast(t, n).shape), tokens, tensor_parallel)
    if acc.interconnect_bandwidth is None:
        raise ValueError(f"accelerator {acc.name} has no interconnect bandwidth; "
                         "tensor_parallel > 1 needs one")
    per_layer = 2 * allreduce_time(message, n, acc.interconnect_bandwidth * eta, latency, base_latency)
    return scalar_or_array(model.n_layers * np.asarray(per_layer), tokens, tensor_parallel, latency,
                           base_latency, link_efficiency)


def tensor_parallel_decode_time(model, accelerator, batch_size, context_len, tensor_parallel=1,
                                weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                                compute_dtype: str = "bf16", mfu=1.0, mbu=1.0, overlap: str = "hybrid",
                                allreduce_latency=0.0, allreduce_base_latency=0.0, link_efficiency=1.0):
    """Seconds per decode step (TPOT) of a model split over ``tensor_parallel`` GPUs.

    :func:`servingmath.decode.decode_step_time` with two TP refinements: the
    weight and KV reads of each GPU follow :mod:`servingmath.memory` (K/V heads
    and their projections replicate once N > K, so those reads stop shrinking),
    and the all-reduces get NCCL's per-call latency and a link efficiency as
    well as the per-step latency.

    Parameters
    ----------
    model, accelerator, batch_size, context_len, weight_dtype, kv_dtype, compute_dtype, mfu, mbu, overlap
        As in :func:`servingmath.decode.decode_step_time`.
    tensor_parallel : int or array
        N, checked by :func:`check_tensor_parallel`.
    allreduce_latency, allreduce_base_latency : float
        alpha (per ring step) and alpha_0 (per call), seconds; 0 = physical bound.
        ``**NCCL_NVLINK_ALLREDUCE`` sets realistic values with ``link_efficiency``.
    link_efficiency : float in (0, 1]

    Returns
    -------
    float or ndarray

    Notes
    -----
    hybrid: T = max(W_bytes / (N W), 2 P B / (N F)) + max(B S k_N / W, 4 L H d_h S B / (N F))
    + 2 L [alpha_0 + 2 (N - 1) alpha + 2 (N - 1) / N x B D b_a / beta], with
    k_N = kv bytes per token per GPU, W and F scaled by MBU and MFU.

    Examples
    --------
    >>> t1 = tensor_parallel_decode_time("Llama-3.1-70B", "H100", 1, 2048, 2)
    >>> t8 = tensor_parallel_decode_time("Llama-3.1-70B", "H100", 1, 2048, 8)
    >>> round(t1 * 1e3, 2), round(t8 * 1e3, 2)     # ms, physical bound
    (21.17, 5.3)
    >>> t8r = tensor_parallel_decode_time("Llama-3.1-70B", "H100", 1, 2048, 8, **NCCL_NVLINK_ALLREDUCE)
    >>> round(t8r * 1e3, 2)                         # + 160 all-reduces of 15 µs each
    7.7
    """
    from .decode import decode_step_parts  # decode imports this module
    from .roofline import combine_step_parts

    model = get_model(model)
    acc = get_accelerator(accelerator)
    n = check_tensor_parallel(model, tensor_parallel)
    u = check_fraction("mbu", mbu)
    check_choice("overlap", overlap, ("additive", "roofline", "hybrid"))
    parts = decode_step_parts(model, acc, batch_size, context_len, weight_dtype=weight_dtype,
                              kv_dtype=kv_dtype, compute_dtype=compute_dtype, tensor_parallel=n,
                              mfu=mfu, mbu=mbu, allreduce_latency=0.0)
    b = np.asarray(batch_size, dtype=float)
    s = np.asarray(context_len, dtype=float)
    bandwidth = acc.memory_bandwidth * u
    kv_memory = b * s * np.asarray(kv_bytes_per_token_per_gpu(model, kv_dtype, n)) / bandwidth
    weight_memory = parts["weight_memory"]      # MoE: experts touched by the batch, / N
    if not model.is_moe:
        weight_memory = np.asarray(weight_bytes_per_gpu(model, weight_dtype, n)) / bandwidth + 0 * b
    communication = tensor_parallel_communication_time(
        model, acc, b, n, compute_dtype, allreduce_latency, allreduce_base_latency, link_efficiency)
    total = combine_step_parts(overlap, weight_memory, parts["linear_compute"], kv_memory,
                               parts["attention_compute"]) + communication
    return scalar_or_array(total, batch_size, context_len, tensor_parallel, mfu, mbu, allreduce_latency,
                           allreduce_base_latency, link_efficiency)


def per_gpu_throughput(model, accelerator, batch_size, context_len, tensor_parallel=1, **kwargs):
    """Output tokens per second per GPU: B / (N x T(B, N)).

    The instance as a whole produces N times this; comparing TP degrees on a
    fixed number of GPUs (say, one 8-GPU node run as 8 / N replicas) needs the
    per-GPU figure. Keyword arguments go to :func:`tensor_parallel_decode_time`.

    >>> round(per_gpu_throughput("Llama-3.1-70B", "H100", 64, 2048, 8))
    1064
    """
    t = tensor_parallel_decode_time(model, accelerator, batch_size, context_len, tensor_parallel, **kwargs)
    b = np.asarray(batch_size, dtype=float)
    n = np.asarray(tensor_parallel, dtype=float)
    return scalar_or_array(b / (n * np.asarray(t)), batch_size, context_len, tensor_parallel,
                           *kwargs.values())


def tp_knee_batch_size(model, accelerator, context_len=0, tensor_parallel=1, weight_dtype: str = "bf16",
                       kv_dtype: str = "bf16", compute_dtype: str = "bf16", mfu=1.0, mbu=1.0,
                       overlap: str = "hybrid"):
    """The batch B* at which a decode step on N GPUs stops being memory-bound.

    Parameters
    ----------
    model, accelerator, context_len, weight_dtype, kv_dtype, compute_dtype, mfu, mbu
        As in :func:`tensor_parallel_decode_time` (dense models only).
    tensor_parallel : int or array
    overlap : {"hybrid", "roofline"}
        ``"hybrid"``: where the weight matmuls turn compute-bound,
        T_w = B t_c, so B* = W_bytes F eta_F / (2 P W eta_W). ``"roofline"``:
        where all FLOPs take as long as all bytes (weights and KV cache),
        B* = T_w / (t_c + t_att - t_kv), infinite when the KV reads of one more
        sequence take longer than its FLOPs (long contexts).

    Returns
    -------
    float or ndarray
        B* (a real number; ``inf`` when the step never turns compute-bound).

    Notes
    -----
    Every term is divided by N, so N cancels, except where the KV heads and
    their projections replicate (N > K). The all-reduces use neither HBM nor the
    tensor cores, so they do not move B*; they add time on top
    (:func:`tensor_parallel_decode_time`).

    Examples
    --------
    >>> round(tp_knee_batch_size("Llama-3.1-70B", "H100"), 1)
    299.8
    >>> tp_knee_batch_size("Llama-3.1-70B", "H100", tensor_parallel=8) == tp_knee_batch_size("Llama-3.1-70B", "H100")
    True
    >>> tp_knee_batch_size("Llama-3.1-70B", "H100", context_len=2048, overlap="roofline")
    inf
    """
    from .decode import matmul_parameter_count

    model = get_model(model)
    acc = get_accelerator(accelerator)
    if model.is_moe:
        raise ValueError(f"tp_knee_batch_size needs a dense model; {model.name} is a mixture of experts, "
                         "whose weight reads grow with the batch (use tensor_parallel_decode_time)")
    check_choice("overlap", overlap, _KNEE_OVERLAPS)
    n = check_tensor_parallel(model, tensor_parallel).astype(float)
    s = check_context_len(model, context_len)
    m = check_fraction("mfu", mfu)
    u = check_fraction("mbu", mbu)
    check_dtype(weight_dtype, "weight_dtype")
    flops = acc.peak_flops(compute_dtype) * m
    bandwidth = acc.memory_bandwidth * u
    t_w = np.asarray(weight_bytes_per_gpu(model, weight_dtype, n)) / bandwidth
    t_c = 2.0 * matmul_parameter_count(model) / (n * flops)
    if overlap == "hybrid":
        knee = t_w / t_c + 0 * s
    else:
        t_att = 4.0 * model.n_layers * model.n_heads * model.head_dim * s / (n * flops)
        t_kv = s * np.asarray(kv_bytes_per_token_per_gpu(model, kv_dtype, n)) / bandwidth
        slope = t_c + t_att - t_kv
        with np.errstate(divide="ignore"):
            knee = np.where(slope > 0, t_w / np.where(slope > 0, slope, 1.0), np.inf)
    return scalar_or_array(knee, context_len, tensor_parallel, mfu, mbu)


def tpot_slo_batch_size(tpot_slo, model, accelerator, context_len, tensor_parallel=1,
                        max_batch_size=4096, **kwargs) -> int:
    """The largest batch whose decode step meets a TPOT target: max {B : T(B) <= tpot_slo}.

    Parameters
    ----------
    tpot_slo : float
        Target time per output token, seconds.
    model, accelerator, context_len, tensor_parallel
        Scalars, as in :func:`tensor_parallel_decode_time`.
    max_batch_size : int
        Largest batch searched (the answer is capped there).
    **kwargs
        Passed to :func:`tensor_parallel_decode_time` (mfu, mbu, all-reduce costs...).

    Returns
    -------
    int
        0 when even B = 1 misses the target. Memory is not checked: take the
        minimum with the batch the KV cache allows (:func:`servingmath.memory.max_batch_size`).

    Notes
    -----
    T(B) is non-decreasing in B, so the batches that meet the target form
    the prefix 1..B_SLO; all are evaluated at once and counted.

    Examples
    --------
    >>> tpot_slo_batch_size(0.050, "Llama-3.1-70B", "H100", 2048, 8)
    947
    >>> tpot_slo_batch_size(0.050, "Llama-3.1-70B", "H100", 2048, 8, **NCCL_NVLINK_ALLREDUCE)
    860
    """
    slo = float(check_positive("tpot_slo", tpot_slo))
    limit = int(check_integer("max_batch_size", max_batch_size, minimum=1))
    for name, value in [("context_len", context_len), ("tensor_parallel", tensor_parallel)]:
        if np.ndim(value) != 0:
            raise ValueError(f"{name} must be a single number here, got {np.shape(value)} values")
    batches = np.arange(1, limit + 1)
    times = np.asarray(tensor_parallel_decode_time(model, accelerator, batches, context_len,
                                                   tensor_parallel, **kwargs))
    return int(np.searchsorted(times, slo * (1 + 1e-12), side="right"))
