"""Sharding a model over N GPUs: which tensor-parallel degrees are valid, what each GPU holds, and
what an all-reduce costs.

The low layer of tensor parallelism, used by the deployment, the step model and
the memory budget. The chapter "Tensor parallelism and the 8-GPU node" derives
everything here; :mod:`servingmath.parallelism` is the chapter-facing module
built on top of it.

With tensor parallelism (TP) of degree N every weight matrix is cut into N
slices (Megatron-LM: QKV and FFN-up by columns, attention output and FFN-down
by rows; the vocabulary of the embedding and the LM head by rows), and the
attention heads are dealt out N ways. Each GPU reads 1/N of the weights and of
the KV cache and does 1/N of the FLOPs, except where a KV head cannot be split
(N > K): then every GPU keeps one whole KV head and its K/V projection weights,
as vLLM's ``QKVParallelLinear`` does. Each layer ends its attention block and
its FFN block with an **all-reduce** of ``tokens x D`` activations.

Ring all-reduce, alpha-beta model
---------------------------------
A ring all-reduce is a reduce-scatter followed by an all-gather, each N - 1
steps in which every GPU sends one 1/N chunk of the message to its neighbour:

    t = alpha_0 + 2 (N - 1) alpha + 2 (N - 1) / N x bytes / (eta beta)    (N > 1; 0 for N = 1)

with alpha the latency of one step (hop), alpha_0 a fixed cost per call,
beta the one-way link bandwidth (450 GB/s for NVLink 4, not the 900 GB/s
"bidirectional" figure of the spec sheet) and eta the achieved fraction of it.
:class:`AllReduce` holds (alpha, alpha_0, eta, data type); its default is the
physical bound (no latency, full bandwidth).

Examples
--------
>>> valid_tensor_parallel_degrees("Llama-3.1-70B")
[1, 2, 4, 8, 16, 32, 64]
>>> tensor_parallel_shares("Llama-3.1-70B", 8)
(0.125, 0.125)
>>> allreduce_time(1e9, n_gpus=2, link_bandwidth=1e9)
1.0
>>> nccl = AllReduce(latency=0.6e-6, base_latency=6.6e-6, link_efficiency=0.8)
>>> round(nccl.time(2**20, 8, 450e9) * 1e6, 2)   # µs: 15 µs of latency + 1 MiB at 360 GB/s
20.1
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validation import (ValueFields, check_fraction, check_integer, check_nonnegative, check_positive,
                          freeze_number, int_or_array, scalar_or_array)
from .datatypes import bytes_per_element, check_dtype
from .models import get_model, kv_projection_parameter_count, parameter_count

__all__ = [
    "valid_tensor_parallel_degrees",
    "check_tensor_parallel",
    "kv_heads_per_gpu",
    "kv_head_replicas",
    "tensor_parallel_shares",
    "allreduce_time",
    "ring_allreduce_bytes",
    "AllReduce",
    "NCCL_NVLINK_ALLREDUCE",
    "NCCL_NVLINK_ALLREDUCE_TIME",
]


# ---------------------------------------------------------------- valid degrees and shares

def valid_tensor_parallel_degrees(model, max_degree: int | None = None) -> list[int]:
    """Tensor-parallel degrees N that split ``model`` evenly, in increasing order.

    N must divide the query heads H, and either divide the KV heads K
    (each GPU holds K / N of them) or be a multiple of K (each KV head is
    replicated on N / K GPUs). vLLM enforces the same rules.

    Examples
    --------
    >>> valid_tensor_parallel_degrees("Llama-3.1-70B")
    [1, 2, 4, 8, 16, 32, 64]
    >>> valid_tensor_parallel_degrees("Qwen2.5-7B")     # 28 query heads, 4 KV heads
    [1, 2, 4, 28]
    """
    model = get_model(model)
    h, k = model.n_heads, model.n_kv_heads
    top = h if max_degree is None else min(h, int(check_integer("max_degree", max_degree)))
    return [n for n in range(1, top + 1) if h % n == 0 and (k % n == 0 or n % k == 0)]


def check_tensor_parallel(model, tensor_parallel):
    """Check that ``tensor_parallel`` splits ``model``'s heads evenly; return it as an array.

    Raises
    ------
    ValueError
        Naming the degree, the model's head counts and the degrees allowed.

    Examples
    --------
    >>> check_tensor_parallel("Llama-3.1-8B", 3)
    Traceback (most recent call last):
    ...
    ValueError: tensor_parallel = 3 cannot split Llama-3.1-8B: 3 does not divide its 32 query heads. Allowed degrees: 1, 2, 4, 8, 16, 32
    """
    model = get_model(model)
    n = check_integer("tensor_parallel", tensor_parallel, minimum=1)
    h, k = model.n_heads, model.n_kv_heads
    ni = np.minimum(n, 2**31).astype(np.int64)
    bad = (h % ni != 0) | ((k % ni != 0) & (ni % k != 0))
    if n.size and np.any(bad):
        value = int(ni[bad].flat[0]) if np.ndim(ni) else int(ni)
        allowed = valid_tensor_parallel_degrees(model)
        reason = (f"does not divide its {h} query heads" if h % value
                  else f"neither divides its {k} KV heads nor is a multiple of them")
        raise ValueError(
            f"tensor_parallel = {value} cannot split {model.name}: {value} {reason}. "
            f"Allowed degrees: {', '.join(map(str, allowed))}"
        )
    return n


def kv_heads_per_gpu(model, tensor_parallel=1):
    """KV heads each GPU holds: K / N, but never fewer than 1.

    With N > K a KV head cannot be cut in half (a head is the unit attention
    works on), so each GPU keeps one whole KV head and every head is
    replicated on N / K GPUs (:func:`kv_head_replicas`).

    Notes
    -----
    K_gpu = max(1, K / N). Same rule as vLLM's ``QKVParallelLinear``.

    References
    ----------
    vLLM, ``vllm/model_executor/layers/linear.py``, ``QKVParallelLinear.__init__``
    ("if tp_size >= total_num_kv_heads: num_kv_heads = 1; num_kv_head_replicas =
    tp_size / total_num_kv_heads"), read 2026-11.

    Examples
    --------
    >>> kv_heads_per_gpu("Llama-3.1-70B", 4)
    2
    >>> kv_heads_per_gpu("Llama-3.1-70B", [1, 8, 16])
    array([8, 1, 1])
    """
    model = get_model(model)
    n = check_tensor_parallel(model, tensor_parallel).astype(np.int64)
    return int_or_array(np.maximum(1, model.n_kv_heads // n))


def kv_head_replicas(model, tensor_parallel=1):
    """Copies of each KV head across the tensor-parallel group: max(1, N / K).

    >>> kv_head_replicas("Llama-3.1-405B", 16)
    2
    """
    model = get_model(model)
    n = check_tensor_parallel(model, tensor_parallel).astype(np.int64)
    return int_or_array(np.maximum(1, n // model.n_kv_heads))


def tensor_parallel_shares(model, tensor_parallel=1):
    """(share of the weights, share of the KV cache) that one GPU holds and reads with TP = N.

    With N <= K both are 1/N. With N > K a KV head cannot be split: each GPU
    keeps one whole head and its K/V projection weights, so the KV share is
    max(K, N) / (K N) and the weight share gains the replicated projections:
    1/N + (P_kv / P) (kv share - 1/N).

    The one place where the library decides what a GPU of a tensor-parallel
    group holds; the memory budget, the step model and the simulator use it.

    >>> tensor_parallel_shares("Llama-3.1-70B", 8)
    (0.125, 0.125)
    >>> [round(x, 4) for x in tensor_parallel_shares("Llama-3.1-70B", 16)]
    [0.0637, 0.125]
    """
    model = get_model(model)
    n = check_tensor_parallel(model, tensor_parallel).astype(float)
    k = model.n_kv_heads
    kv_share = np.maximum(k, n) / (k * n)
    weight_share = 1.0 / n + (kv_projection_parameter_count(model) / parameter_count(model)) * (kv_share - 1.0 / n)
    return scalar_or_array(weight_share), scalar_or_array(kv_share)


# ---------------------------------------------------------------- all-reduce

#: NCCL's per-hop and per-call latencies with the LL protocol over NVLink (NVIDIA/nccl
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


def allreduce_time(message_bytes, n_gpus, link_bandwidth, *, latency=0.0, base_latency=0.0):
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
    19(1), 2005 (the alpha-beta cost model). Derived in the chapter "Tensor parallelism".

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
    return scalar_or_array(result)


def ring_allreduce_bytes(message_bytes, n_gpus):
    """Bytes each GPU sends (and receives) in a ring all-reduce: 2 (N - 1) / N x m.

    >>> ring_allreduce_bytes(1e6, 8)
    1750000.0
    """
    m = check_nonnegative("message_bytes", message_bytes)
    n = check_integer("n_gpus", n_gpus, minimum=1)
    return scalar_or_array(2 * (n - 1) / n * m)


@dataclass(frozen=True, eq=False)
class AllReduce(ValueFields):
    """How a tensor-parallel all-reduce is costed: the alpha-beta model of a ring.

    Attributes
    ----------
    latency : float or array
        alpha, seconds per ring step (0 = physical bound).
    base_latency : float or array
        alpha_0, seconds per call.
    link_efficiency : float or array in (0, 1]
        eta, achieved / peak one-way link bandwidth.
    dtype : str
        Data type of the activations that are summed: bf16 even for fp8 or int8
        matmuls, whose kernels write bf16 outputs.

    Examples
    --------
    >>> AllReduce().time(1e9, 2, 1e9)
    1.0
    >>> AllReduce(latency=-1.0)
    Traceback (most recent call last):
    ...
    ValueError: latency must be >= 0, got -1
    """

    latency: float = 0.0
    base_latency: float = 0.0
    link_efficiency: float = 1.0
    dtype: str = "bf16"

    def __post_init__(self):
        object.__setattr__(self, "latency", freeze_number(check_nonnegative("latency", self.latency)))
        object.__setattr__(self, "base_latency", freeze_number(check_nonnegative("base_latency", self.base_latency)))
        object.__setattr__(self, "link_efficiency",
                           freeze_number(check_fraction("link_efficiency", self.link_efficiency)))
        check_dtype(self.dtype, "allreduce_dtype")

    @property
    def bytes_per_element(self) -> float:
        return bytes_per_element(self.dtype)

    def time(self, message_bytes, n_gpus, link_bandwidth):
        """Seconds for one all-reduce of ``message_bytes`` (see :func:`allreduce_time`)."""
        bw = check_positive("link_bandwidth", link_bandwidth) * self.link_efficiency
        return allreduce_time(message_bytes, n_gpus, bw, latency=self.latency, base_latency=self.base_latency)
