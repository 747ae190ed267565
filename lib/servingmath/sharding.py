"""Sharding a model over N GPUs: which tensor-parallel degrees are valid, what each GPU holds, and
what an all-reduce (and an expert-parallel all-to-all) costs.

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

from ._validation import (ValueFields, check_bool, check_choice, check_fraction, check_integer,
                          check_nonnegative, check_positive, check_scalar, freeze_number, int_or_array,
                          scalar_or_array)
from .datatypes import bytes_per_element, check_dtype
from .hardware import Accelerator, get_accelerator
from .models import get_model, has_shape, kv_projection_parameter_count, parameter_count, require_shape

__all__ = [
    "valid_tensor_parallel_degrees",
    "check_tensor_parallel",
    "kv_heads_per_gpu",
    "kv_head_replicas",
    "tensor_parallel_shares",
    "allreduce_time",
    "ring_allreduce_bytes",
    "check_expert_parallel",
    "alltoall_time",
    "AllReduce",
    "NCCL_NVLINK_ALLREDUCE",
    "NCCL_NVLINK_ALLREDUCE_TIME",
    "KV_SHARDINGS",
    "pooled_slice",
    "allreduce_latency_bound_bytes",
]

#: How the KV cache is split over a tensor-parallel group (see :func:`tensor_parallel_shares`).
KV_SHARDINGS = ("heads", "batch")
#: Unknown heads (a model given by its totals): the degrees tried when none is given.
_MAX_DEGREE_WITHOUT_HEADS = 1024


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
    if not has_shape(model, "n_heads"):   # a model given by its totals: any number of chips splits it
        top = _MAX_DEGREE_WITHOUT_HEADS if max_degree is None else int(check_integer("max_degree", max_degree))
        return list(range(1, top + 1))
    h = model.n_heads
    k = model.n_kv_heads if has_shape(model, "n_kv_heads") else h
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
    if not has_shape(model, "n_heads"):   # totals without heads: every degree splits the totals evenly
        return n
    h = model.n_heads
    k = model.n_kv_heads if has_shape(model, "n_kv_heads") else h
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
    k = require_shape(model, "n_kv_heads", needed_for="KV heads per GPU")[0]
    return int_or_array(np.maximum(1, k // n))


def kv_head_replicas(model, tensor_parallel=1):
    """Copies of each KV head across the tensor-parallel group: max(1, N / K).

    >>> kv_head_replicas("Llama-3.1-405B", 16)
    2
    """
    model = get_model(model)
    n = check_tensor_parallel(model, tensor_parallel).astype(np.int64)
    k = require_shape(model, "n_kv_heads", needed_for="KV-head replicas")[0]
    return int_or_array(np.maximum(1, n // k))


def tensor_parallel_shares(model, tensor_parallel=1, *, kv_sharding: str = "heads"):
    """(share of the weights, share of the KV cache) that one GPU holds and reads with TP = N.

    With N <= K both are 1/N. With N > K a KV head cannot be split: each GPU
    keeps one whole head and its K/V projection weights, so the weight share
    gains the replicated projections: 1/N + (P_kv / P) (max(K, N) / (K N) - 1/N).
    What happens to the KV cache is a convention, ``kv_sharding``:

    * ``"heads"`` (the book's default, vLLM's ``QKVParallelLinear``): the cache
      is split by KV heads only, so each head's cache is replicated on N / K
      GPUs and the KV share is max(K, N) / (K N);
    * ``"batch"`` (How to Scale Your Model, "Sharding the KV cache"; Pope et
      al.'s multi-query sharding): heads first, then the **batch** over the
      rest of the group, so the cache is fully distributed, KV share 1/N. The
      two AllToAlls per layer this needs are not counted.

    A model given by its totals without ``n_kv_heads`` splits evenly (1/N, 1/N).
    The one place where the library decides what a GPU of a tensor-parallel
    group holds; the memory budget, the step model and the simulator use it.
    Derived in the chapter "Tensor parallelism".

    >>> tensor_parallel_shares("Llama-3.1-70B", 8)
    (0.125, 0.125)
    >>> [round(x, 4) for x in tensor_parallel_shares("Llama-3.1-70B", 16)]
    [0.0637, 0.125]
    >>> [round(x, 4) for x in tensor_parallel_shares("Llama-3.1-70B", 16, kv_sharding="batch")]
    [0.0637, 0.0625]
    """
    model = get_model(model)
    check_choice("kv_sharding", kv_sharding, KV_SHARDINGS)
    n = check_tensor_parallel(model, tensor_parallel).astype(float)
    if not has_shape(model, "n_kv_heads"):
        share = scalar_or_array(1.0 / n)
        return share, share
    k = model.n_kv_heads
    replicated = np.maximum(k, n) / (k * n)
    if np.any(n > k):
        weight_share = 1.0 / n + (kv_projection_parameter_count(model) / parameter_count(model)) * (replicated - 1.0 / n)
    else:
        weight_share = 1.0 / n
    kv_share = replicated if kv_sharding == "heads" else 1.0 / n
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


def allreduce_time(message_bytes, n_gpus, link_bandwidth, *, latency=0.0, base_latency=0.0, ring_factor=True):
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
    ring_factor : bool
        True (the book): the bandwidth term is 2 (N - 1) / N x m / beta.
        False: 2 m / beta, the (N - 1) / N rounded to 1, as kipply's
        "Transformer Inference Arithmetic" does ("I'll round that N - 1 factor
        to N") and How to Scale Your Model's AllReduce (twice an AllGather of
        the whole array, with its bidirectional ICI bandwidth as beta).

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
    factor = (n - 1) / n if check_bool("ring_factor", ring_factor) else (n > 1) * 1.0
    result = (n > 1) * a0 + 2 * (n - 1) * a + 2 * factor * m / bw
    return scalar_or_array(result)


def check_expert_parallel(model, expert_parallel, tensor_parallel=1):
    """Check an expert-parallel degree EP against ``model`` and the attention's TP degree N; return EP.

    Expert parallelism deals the E routed experts of every MoE layer out to EP
    GPUs, E / EP whole experts each, and runs the rest of the model (attention,
    shared experts, dense layers, embeddings) data-parallel in EP / N groups of
    N tensor-parallel GPUs ("attention DP x expert EP", vLLM's
    ``--enable-expert-parallel`` with EP = TP x DP). So EP must be 1 (no expert
    parallelism), or divide E and be a multiple of N, on a mixture of experts.

    Raises
    ------
    ValueError
        Naming the degree, the model's experts and what is allowed.

    Examples
    --------
    >>> int(check_expert_parallel("DeepSeek-V3", 8))
    8
    >>> check_expert_parallel("Mixtral-8x7B", 16)
    Traceback (most recent call last):
    ...
    ValueError: expert_parallel = 16 cannot split Mixtral-8x7B's 8 routed experts: it must divide them. Allowed degrees: 1, 2, 4, 8
    """
    model = get_model(model)
    ep = check_integer("expert_parallel", expert_parallel, minimum=1)
    n = np.asarray(tensor_parallel)
    if not np.any(ep > 1):
        return ep
    if not model.is_moe:
        raise ValueError(f"expert_parallel = {int(np.max(ep))} needs a mixture of experts; {model.name} is dense "
                         "(n_experts = 1): use tensor_parallel")
    e = model.n_experts
    epi = np.minimum(ep, 2**31).astype(np.int64)
    allowed = ", ".join(str(d) for d in range(1, e + 1) if e % d == 0)
    bad = (e % epi != 0)
    if np.any(bad):
        value = int(epi[bad].flat[0]) if np.ndim(epi) else int(epi)
        raise ValueError(f"expert_parallel = {value} cannot split {model.name}'s {e} routed experts: it must "
                         f"divide them. Allowed degrees: {allowed}")
    ni = np.broadcast_to(np.asarray(n, dtype=np.int64), np.broadcast_shapes(np.shape(epi), np.shape(n)))
    epb = np.broadcast_to(epi, ni.shape)
    bad = (epb > 1) & (epb % np.maximum(ni, 1) != 0)
    if np.any(bad):
        raise ValueError(f"expert_parallel = {int(epb[bad].flat[0])} must be a multiple of tensor_parallel = "
                         f"{int(ni[bad].flat[0])}: the EP GPUs form EP / N attention groups of N GPUs each")
    return ep


def alltoall_time(message_bytes, n_gpus, link_bandwidth, *, latency=0.0, base_latency=0.0):
    """Seconds for an all-to-all in which each of ``n_gpus`` GPUs scatters ``message_bytes`` evenly.

    Each GPU keeps 1/N of its message and sends 1/N to each of the N - 1 others
    (an MoE dispatch: the hidden states of its tokens to the GPUs that hold
    their experts; a combine: the results back).

    Parameters
    ----------
    message_bytes : float or array
        m, the bytes one GPU scatters, its own share included (>= 0).
    n_gpus : int or array
        N >= 1.
    link_bandwidth : float or array
        One-way bandwidth of each GPU's link, bytes/s.
    latency, base_latency : float or array
        alpha per peer message and alpha_0 per call, seconds (0 = physical bound).

    Returns
    -------
    float or ndarray
        Seconds; 0 for N = 1.

    Notes
    -----
    Pairwise exchange, N - 1 messages of m / N bytes each:

        t = alpha_0 + (N - 1) alpha + (N - 1) / N x m / beta       (N > 1).

    The bandwidth term is a lower bound for a GPU whose link carries only its
    own traffic (a switch such as NVSwitch): every byte that leaves the GPU
    crosses its link once. Compared with a ring all-reduce of the same m
    (2 (N - 1) / N x m / beta) it moves half the bytes.

    References
    ----------
    R. Thakur, R. Rabenseifner and W. Gropp, "Optimization of collective
    communication operations in MPICH", IJHPCA 19(1), 2005 (pairwise exchange
    for all-to-all). Derived in the chapter "Mixture of experts".

    Examples
    --------
    >>> round(alltoall_time(8e6, 8, 450e9) * 1e6, 2)     # µs: 7 MB leave each GPU
    15.56
    >>> alltoall_time(8e6, 1, 450e9)
    0.0
    """
    m = check_nonnegative("message_bytes", message_bytes)
    n = check_integer("n_gpus", n_gpus, minimum=1)
    bw = check_positive("link_bandwidth", link_bandwidth)
    a = check_nonnegative("latency", latency)
    a0 = check_nonnegative("base_latency", base_latency)
    result = (n > 1) * a0 + (n - 1) * a + (n - 1) / n * m / bw
    return scalar_or_array(result)


def ring_allreduce_bytes(message_bytes, n_gpus, *, ring_factor=True):
    """Bytes each GPU sends (and receives) in a ring all-reduce: 2 (N - 1) / N x m.

    ``ring_factor=False``: 2 m (kipply's rounding, see :func:`allreduce_time`).

    >>> ring_allreduce_bytes(1e6, 8)
    1750000.0
    >>> ring_allreduce_bytes(1e6, 8, ring_factor=False)
    2000000.0
    """
    m = check_nonnegative("message_bytes", message_bytes)
    n = check_integer("n_gpus", n_gpus, minimum=1)
    factor = (n - 1) / n if check_bool("ring_factor", ring_factor) else (n > 1) * 1.0
    return scalar_or_array(2 * factor * m)


def allreduce_latency_bound_bytes(n_gpus, link_bandwidth, *, latency=0.0, base_latency=0.0, ring_factor=True):
    """The message size below which a ring all-reduce is latency-bound: its latency equals its transfer time.

    Parameters
    ----------
    n_gpus : int or array, >= 2
    link_bandwidth : float or array
        One-way bandwidth beta, bytes/s.
    latency, base_latency, ring_factor
        As in :func:`allreduce_time` (alpha per ring step, alpha_0 per call).

    Returns
    -------
    float or ndarray
        m* with alpha_0 + 2 (N - 1) alpha = 2 (N - 1) / N x m* / beta, i.e.
        m* = N beta (alpha + alpha_0 / (2 (N - 1))); below it latency dominates.

    Notes
    -----
    With alpha_0 = 0 this is N beta alpha, How to Scale Your Model's rule
    (Appendix C of "All About Transformer Inference"): a collective is
    latency-bound when bytes / N / W < 1 us per hop, i.e. below 360 kB for
    8 chips at 4.5e10 B/s. Derived in the chapter "Tensor parallelism".

    Examples
    --------
    >>> allreduce_latency_bound_bytes(8, 4.5e10, latency=1e-6)   # bytes
    360000.0
    >>> round(allreduce_latency_bound_bytes(8, 450e9, latency=0.6e-6, base_latency=6.6e-6) / 1e6, 2)   # MB, NCCL
    3.86
    """
    n = check_integer("n_gpus", n_gpus, minimum=2)
    bw = check_positive("link_bandwidth", link_bandwidth)
    a = check_nonnegative("latency", latency)
    a0 = check_nonnegative("base_latency", base_latency)
    factor = (n - 1) / n if check_bool("ring_factor", ring_factor) else 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        m = (a0 + 2 * (n - 1) * a) * bw / (2 * factor)
    if not np.all(np.isfinite(m)):
        raise ValueError("latency, base_latency or link_bandwidth is too large: the message size overflows")
    return scalar_or_array(m)


def pooled_slice(accelerator, n_chips: int, *, name: str | None = None) -> Accelerator:
    """``n_chips`` accelerators treated as one: n times the memory, the bandwidth and the FLOP/s, no links.

    The references' convention for a slice ("a TPU v5e 4x4 slice", "8 x A100"):
    weights and KV cache spread perfectly over the chips and no communication
    is counted, so a step takes bytes / (n W) and FLOPs / (n F). Run the model
    on it with ``tensor_parallel=1``. For the book's model of the same chips,
    with the all-reduces and the KV-head rules, use ``tensor_parallel=n`` on
    the accelerator itself (see ``kv_sharding`` for the KV cache).

    Parameters
    ----------
    accelerator : str or Accelerator
    n_chips : int, >= 1

    Returns
    -------
    Accelerator
        Named ``"{n} x {name} (pooled)"``; its ``memory_bytes``,
        ``memory_bandwidth`` and dense peaks are n times the chip's.

    Examples
    --------
    >>> s = pooled_slice("TPU-v5e", 16)
    >>> s.name, s.memory_bytes / 1e9, round(s.memory_bandwidth / 1e12, 3)
    ('16 x TPU-v5e (pooled)', 256.0, 13.104)
    """
    acc = get_accelerator(accelerator)
    n = int(check_integer("n_chips", check_scalar("n_chips", n_chips), minimum=1))
    if n > 10**7:
        raise ValueError(f"n_chips = {n} is more chips than any slice (at most 10^7)")
    return Accelerator.from_numbers(
        name or f"{n} x {acc.name} (pooled)",
        memory_bytes=n * acc.memory_bytes,
        memory_bandwidth=n * acc.memory_bandwidth,
        peak_flops={k: n * v for k, v in acc.dense_flops.items()},
        source=f"{n} x the catalog's {acc.name}, pooled (no communication counted)")


@dataclass(frozen=True, eq=False)
class AllReduce(ValueFields):
    """How a tensor-parallel all-reduce is costed: the alpha-beta model of a ring.

    The expert-parallel all-to-alls (dispatch and combine) are costed with the
    same alpha, alpha_0, link efficiency and data type (:meth:`alltoall_time`).

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
    ring_factor : bool
        True (the book): 2 (N - 1) / N x m / beta; False: 2 m / beta, kipply's
        rounding (see :func:`allreduce_time`).

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
    ring_factor: bool = True

    def __post_init__(self):
        object.__setattr__(self, "latency", freeze_number(check_nonnegative("latency", self.latency)))
        object.__setattr__(self, "base_latency", freeze_number(check_nonnegative("base_latency", self.base_latency)))
        object.__setattr__(self, "link_efficiency",
                           freeze_number(check_fraction("link_efficiency", self.link_efficiency)))
        check_dtype(self.dtype, "allreduce_dtype")
        object.__setattr__(self, "ring_factor", check_bool("allreduce_ring_factor", self.ring_factor))

    @property
    def bytes_per_element(self) -> float:
        return bytes_per_element(self.dtype)

    def time(self, message_bytes, n_gpus, link_bandwidth):
        """Seconds for one all-reduce of ``message_bytes`` (see :func:`allreduce_time`)."""
        bw = check_positive("link_bandwidth", link_bandwidth) * self.link_efficiency
        return allreduce_time(message_bytes, n_gpus, bw, latency=self.latency, base_latency=self.base_latency,
                              ring_factor=self.ring_factor)

    def alltoall_time(self, message_bytes, n_gpus, link_bandwidth):
        """Seconds for one all-to-all of ``message_bytes`` per GPU with the same alpha, alpha_0 and eta
        (see :func:`alltoall_time`): the expert-parallel dispatch and combine."""
        bw = check_positive("link_bandwidth", link_bandwidth) * self.link_efficiency
        return alltoall_time(message_bytes, n_gpus, bw, latency=self.latency, base_latency=self.base_latency)
