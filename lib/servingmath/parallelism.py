"""Tensor parallelism: splitting one model across N GPUs, what the all-reduces cost, and what it buys.

With tensor parallelism (TP) of degree N every weight matrix is cut into N
slices (Megatron-LM: the QKV and FFN-up matrices by columns, the attention
output and FFN-down matrices by rows), and the attention heads are dealt out
N ways. Each GPU then reads 1/N of the weights and of the KV cache and does
1/N of the FLOPs, so every term of a decode step shrinks N-fold, except one:
each layer ends its attention block and its FFN block with an **all-reduce**
that sums the N partial results (``tokens x D`` activations) across the GPUs.

This is the chapter-facing module of the chapter "Tensor parallelism and the
8-GPU node". The sharding rules and the all-reduce cost model live in
:mod:`servingmath.sharding` (re-exported here); a TP step is the library's
one step model (:mod:`servingmath.step`) with ``tensor_parallel=N``, so
:func:`tensor_parallel_decode_time` *is* :func:`servingmath.decode.decode_step_time`.

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
shrinking (vLLM replicates them): :func:`servingmath.sharding.tensor_parallel_shares`.

Examples
--------
>>> allreduce_time(1e9, n_gpus=2, link_bandwidth=1e9)
1.0
>>> allreduce_time(1e9, n_gpus=1, link_bandwidth=1e9)
0.0
>>> round(allreduce_time(2**20, 8, 450e9, **NCCL_NVLINK_ALLREDUCE_TIME) * 1e6, 2)   # µs
19.08
>>> t = tensor_parallel_decode_time("Llama-3.1-70B", "H100", 1, 2048, tensor_parallel=[2, 4, 8])
>>> [round(float(x) * 1e3, 2) for x in t]   # ms: halves with each doubling at the physical bound
[20.85, 10.43, 5.22]
"""

from __future__ import annotations

import numpy as np

from ._validation import check_nonnegative, scalar_or_array
from .decode import decode_step_time, knee_batch_size
from .deployment import Deployment, deployment_function
from .sharding import (NCCL_NVLINK_ALLREDUCE, NCCL_NVLINK_ALLREDUCE_TIME, AllReduce, allreduce_time,
                       check_tensor_parallel, ring_allreduce_bytes, valid_tensor_parallel_degrees)
from .slo import max_batch_for_tpot
from .step import Iteration, iteration_work, time_parts

__all__ = [
    "NCCL_NVLINK_ALLREDUCE",
    "NCCL_NVLINK_ALLREDUCE_TIME",
    "AllReduce",
    "allreduce_time",
    "ring_allreduce_bytes",
    "check_tensor_parallel",
    "valid_tensor_parallel_degrees",
    "tensor_parallel_communication_time",
    "tensor_parallel_decode_time",
    "per_gpu_throughput",
    "tp_knee_batch_size",
    "tpot_slo_batch_size",
]


@deployment_function
def tensor_parallel_communication_time(dep: Deployment, tokens):
    """Seconds per forward step spent in all-reduces: 2 per layer of ``tokens`` x D activations.

    Parameters
    ----------
    model, accelerator : or one Deployment
        The accelerator's ``interconnect_bandwidth`` (one-way) is beta.
    tokens : int or array
        Tokens in the step: the batch size in decode, batch x prompt length in prefill.
    tensor_parallel, allreduce_latency, allreduce_base_latency, link_efficiency, allreduce_dtype
        Deployment settings (keyword options); the result is 0 for N = 1.

    Notes
    -----
    T_comm = 2 L [alpha_0 + 2 (N - 1) alpha + 2 (N - 1) / N x tokens D b_a / (eta_link beta)].
    Derived in the chapter "Tensor parallelism".

    Examples
    --------
    >>> t = tensor_parallel_communication_time("Llama-3.1-70B", "H100", 64, tensor_parallel=8)
    >>> round(t * 1e3, 3)   # ms per decode step at B = 64, physical bound
    0.652
    """
    t = check_nonnegative("tokens", tokens)
    it = Iteration(tokens=scalar_or_array(t), kv_tokens=0.0, attention_pairs=0.0, logits=0.0)
    return time_parts(dep, iteration_work(dep, it))["communication"]


@deployment_function
def tensor_parallel_decode_time(dep: Deployment, batch_size, context_len):
    """Seconds per decode step (TPOT) of a model split over ``tensor_parallel`` GPUs.

    The library's one step model: :func:`servingmath.decode.decode_step_time`
    with ``tensor_parallel=N``. The weight and KV reads of each GPU follow
    :func:`servingmath.sharding.tensor_parallel_shares` (K/V heads and their
    projections replicate once N > K, so those reads stop shrinking), and the
    all-reduces follow the deployment's :class:`AllReduce` (``**NCCL_NVLINK_ALLREDUCE``
    sets realistic values).

    Notes
    -----
    hybrid: T = max(W_bytes / (N W), 2 P B / (N F)) + max(B S k_N / W, 4 L H d_h S B / (N F))
    + 2 L [alpha_0 + 2 (N - 1) alpha + 2 (N - 1) / N x B D b_a / beta], with
    k_N = kv bytes per token per GPU, W and F scaled by MBU and MFU. Derived in
    the chapter "Tensor parallelism".

    Examples
    --------
    >>> t1 = tensor_parallel_decode_time("Llama-3.1-70B", "H100", 1, 2048, tensor_parallel=2)
    >>> t8 = tensor_parallel_decode_time("Llama-3.1-70B", "H100", 1, 2048, tensor_parallel=8)
    >>> round(t1 * 1e3, 2), round(t8 * 1e3, 2)     # ms, physical bound
    (20.85, 5.22)
    >>> t8r = tensor_parallel_decode_time("Llama-3.1-70B", "H100", 1, 2048, tensor_parallel=8,
    ...                                   **NCCL_NVLINK_ALLREDUCE)
    >>> round(t8r * 1e3, 2)                         # + 160 all-reduces of 15 µs each
    7.62
    """
    return decode_step_time(dep, batch_size, context_len)


@deployment_function
def per_gpu_throughput(dep: Deployment, batch_size, context_len):
    """Output tokens per second per GPU: B / (N x T(B, N)) (with expert parallelism: B / (EP x T)).

    The instance as a whole produces N times this; comparing TP degrees on a
    fixed number of GPUs (say, one 8-GPU node run as 8 / N replicas) needs the
    per-GPU figure. Derived in the chapter "Tensor parallelism".

    >>> round(per_gpu_throughput("Llama-3.1-70B", "H100", 64, 2048, tensor_parallel=8))
    1075
    """
    t = decode_step_time(dep, batch_size, context_len)
    b = np.asarray(batch_size, dtype=float)
    n = np.asarray(dep.n_gpus, dtype=float)     # tensor_parallel, or expert_parallel where EP > 1
    return scalar_or_array(b / (n * np.asarray(t)))


@deployment_function
def tp_knee_batch_size(dep: Deployment, context_len=0):
    """The batch B* at which a decode step on N GPUs stops being memory-bound.

    :func:`servingmath.decode.knee_batch_size` (one knee for every degree):
    every term is divided by N, so N cancels, except where the KV heads and
    their projections replicate (N > K). The all-reduces use neither HBM nor
    the tensor cores, so they do not move B*; they add time on top.
    Derived in the chapter "Tensor parallelism".

    Examples
    --------
    >>> round(tp_knee_batch_size("Llama-3.1-70B", "H100"), 1)
    295.3
    >>> tp_knee_batch_size("Llama-3.1-70B", "H100", tensor_parallel=8) == tp_knee_batch_size("Llama-3.1-70B", "H100")
    True
    >>> tp_knee_batch_size("Llama-3.1-70B", "H100", context_len=2048, overlap="roofline")
    inf
    """
    return knee_batch_size(dep, context_len)


@deployment_function
def tpot_slo_batch_size(dep: Deployment, context_len, *, tpot_slo, max_batch_size=4096) -> int:
    """The largest batch whose decode step meets a TPOT target: max {B : T(B) <= tpot_slo}.

    :func:`servingmath.slo.max_batch_for_tpot` capped at ``max_batch_size``
    (memory is not checked: take the minimum with the batch the KV cache
    allows, :func:`servingmath.memory.max_batch_size`). Derived in the chapter
    "Tensor parallelism".

    Examples
    --------
    >>> tpot_slo_batch_size("Llama-3.1-70B", "H100", 2048, tensor_parallel=8, tpot_slo=0.050)
    947
    >>> tpot_slo_batch_size("Llama-3.1-70B", "H100", 2048, tensor_parallel=8, tpot_slo=0.050,
    ...                     **NCCL_NVLINK_ALLREDUCE)
    860
    """
    return max_batch_for_tpot(dep, context_len, tpot_slo=tpot_slo, max_batch=max_batch_size)
