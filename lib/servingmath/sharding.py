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

NCCL's protocols
----------------
NCCL runs a ring all-reduce with one of three protocols, each with its own
latencies and its own share of the link: LL (low latency: 8-byte stores with
a flag, half the bandwidth at most, capped further), LL128 (128-byte lines,
92 % of it) and Simple (the full bandwidth, the longest latencies). Its tuner
(``src/graph/tuning.cc``) costs every protocol with the same alpha-beta form
and picks the fastest for each message. :func:`nccl_allreduce_time` and
``AllReduce(protocol="auto")`` do the same; :data:`NCCL_RING_PROTOCOLS` holds
the constants, :data:`NCCL_RING_ALLREDUCE` the book's realistic preset.

Examples
--------
>>> valid_tensor_parallel_degrees("Llama-3.1-70B")
[1, 2, 4, 8, 16, 32, 64]
>>> tensor_parallel_shares("Llama-3.1-70B", 8)
(0.125, 0.125)
>>> allreduce_time(1e9, n_gpus=2, link_bandwidth=1e9)
1.0
>>> ring = AllReduce(latency=0.6e-6, base_latency=6.6e-6, link_efficiency=0.8)
>>> round(ring.time(2**20, 8, 450e9) * 1e6, 2)   # µs: LL's 15 µs + 1 MiB at 360 GB/s (too optimistic)
20.1
>>> nccl = AllReduce(protocol="auto", link_efficiency=0.8)
>>> round(nccl.time(2**20, 8, 450e9) * 1e6, 2), str(nccl.chosen_protocol(2**20, 8, 450e9))
(28.01, 'LL')
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
    "NCCL_RING_ALLREDUCE",
    "NCCL_RING_PROTOCOLS",
    "NCCL_LL_BANDWIDTH_CAP",
    "NCCL_TUNING_SOURCE",
    "ALLREDUCE_PROTOCOLS",
    "nccl_allreduce_time",
    "nccl_protocol_crossover",
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

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

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

    Derived in the chapter "Tensor parallelism and the 8-GPU node" (notebooks/08_tensor_parallelism.ipynb).

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

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

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

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

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

#: Where the NCCL constants below come from.
NCCL_TUNING_SOURCE = ("NVIDIA/nccl src/graph/tuning.cc at commit 56a0c2299d0fda19b12e8a6b8a39b48d6054d22c "
                      "(NCCL 2.29.7-1, 2026-02-27; the same values since 2.27), read 2026-12")

#: NCCL's ring all-reduce on NVLink within one node, per protocol (:data:`NCCL_TUNING_SOURCE`):
#: ``base_latency`` = baseLatencies[Ring][p] (alpha_0, per call), ``latency`` =
#: hwLatencies[NVLINK][Ring][p] (alpha, per ring step: 2 (N - 1) of them), and
#: ``bandwidth_factor`` = the protocol's share of the ring's bus bandwidth
#: (``busBw * .5`` for LL, ``busBw * 0.92`` for LL128, all of it for Simple). LL's is also
#: capped at llMaxBws (:data:`NCCL_LL_BANDWIDTH_CAP`). LL128's per-channel cap
#: (nChannels x 36.7 GB/s on Hopper, 440 GB/s with the 12 channels of an 8 x H100 ring) does
#: not bind on NVLink 4 and is left out. Tree, NVLS (NVLink SHARP) and CollNet are left out too:
#: the book's all-reduce is a ring.
NCCL_RING_PROTOCOLS = {
    "LL": {"base_latency": 6.6e-6, "latency": 0.6e-6, "bandwidth_factor": 0.5},
    "LL128": {"base_latency": 14.0e-6, "latency": 1.9e-6, "bandwidth_factor": 0.92},
    "Simple": {"base_latency": 8.4e-6, "latency": 3.4e-6, "bandwidth_factor": 1.0},
}
#: LL's bus bandwidth cap as a fraction of the link's peak one-way bandwidth: NCCL's llMaxBws
#: for one Hopper node, 141.0 GB/s, over NVLink 4's 450 GB/s (Blackwell: 282 of 900, the same
#: 0.313; Ampere: 87.7 of 300, 0.292, so LL is about 7 % faster here than NCCL models on A100).
NCCL_LL_BANDWIDTH_CAP = 141.0e9 / 450e9
#: The protocols an :class:`AllReduce` can be costed with; ``"auto"`` takes the fastest.
ALLREDUCE_PROTOCOLS = ("LL", "LL128", "Simple", "auto")

#: The book's realistic all-reduce (deployment options): NCCL's tuner on NVLink, each message
#: with the fastest of LL, LL128 and Simple, their own latencies and bandwidths. Bus bandwidth
#: of Simple = 0.8 x 450 GB/s = 360 GB/s, which is NCCL's own model of an 8 x H100 node (a ring
#: of 12 channels at 30 GB/s, ``ncclTopoCompute``, NVIDIA/nccl issue #1367, 2024-07) and what
#: its large all-reduces reach there (365-370 GB/s, NVIDIA/nccl issue #1455, 2024-09).
NCCL_RING_ALLREDUCE = {"allreduce_protocol": "auto", "link_efficiency": 0.8}

#: NCCL's LL-protocol latencies (6.6 µs + 0.6 µs per ring step) with link efficiency 0.8: the
#: book's first "realistic" all-reduce, kept so that old results can be reproduced. It is an
#: optimistic pair that NCCL never uses together (LL moves at most 141 GB/s, not 360 GB/s);
#: use :data:`NCCL_RING_ALLREDUCE`.
NCCL_NVLINK_ALLREDUCE = {"allreduce_latency": 0.6e-6, "allreduce_base_latency": 6.6e-6,
                         "link_efficiency": 0.8}
#: The same LL latencies as keyword arguments of :func:`allreduce_time`.
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


def _protocol_terms(protocol, link_bandwidth, link_efficiency, ll_cap):
    """(alpha_0, alpha, bus bandwidth) of one NCCL protocol on a link of peak ``link_bandwidth``."""
    c = NCCL_RING_PROTOCOLS[protocol]
    bus = link_efficiency * link_bandwidth * c["bandwidth_factor"]
    if protocol == "LL":
        bus = np.minimum(bus, ll_cap * link_bandwidth)
    return c["base_latency"], c["latency"], bus


def _check_protocol(protocol, allowed=ALLREDUCE_PROTOCOLS):
    return check_choice("allreduce_protocol", protocol, allowed)


def nccl_allreduce_time(message_bytes, n_gpus, link_bandwidth, *, protocol="auto", link_efficiency=1.0,
                        ll_cap=NCCL_LL_BANDWIDTH_CAP, ring_factor=True):
    """Seconds for a ring all-reduce as NCCL's tuner costs it: per protocol, or the fastest of three.

    Parameters
    ----------
    message_bytes : float or array
        m, the buffer every GPU contributes, bytes >= 0.
    n_gpus : int or array
        N >= 1 GPUs in the ring (0 seconds for N = 1).
    link_bandwidth : float or array
        beta, the peak one-way bandwidth of each GPU's link, bytes/s (NVLink 4: 450e9).
    protocol : {"auto", "LL", "LL128", "Simple"}
        One protocol, or ``"auto"``: the fastest for each message, as NCCL's tuner picks.
    link_efficiency : float or array in (0, 1]
        eta: Simple's bus bandwidth / beta (NCCL's nChannels x bwIntra: 0.8 on 8 x H100).
    ll_cap : float or array in (0, 1]
        LL's bus bandwidth at most ``ll_cap x beta`` (:data:`NCCL_LL_BANDWIDTH_CAP`).
    ring_factor : bool
        As in :func:`allreduce_time`.

    Returns
    -------
    float or ndarray
        Seconds.

    Notes
    -----
    For each protocol p, with (alpha_0p, alpha_p, f_p) from :data:`NCCL_RING_PROTOCOLS`:

        t_p = alpha_0p + 2 (N - 1) alpha_p + 2 (N - 1) / N x m / B_p,
        B_Simple = eta beta,  B_LL128 = 0.92 eta beta,  B_LL = min(0.5 eta beta, cap x beta),

    and ``"auto"`` is min(t_LL, t_LL128, t_Simple). This is NCCL's
    ``ncclTopoTuneModel`` (latency = baseLat + nsteps x hwLat with nsteps =
    2 (N - 1); algorithm bandwidth = bus bandwidth x N / nsteps) and
    ``ncclTopoGetAlgoTime`` (time = latency + bytes / algorithm bandwidth) for a
    ring inside one node. Each t_p is affine in m; their minimum is concave,
    with a corner where the protocol changes (:func:`nccl_protocol_crossover`).
    Derived in the chapter "Tensor parallelism".

    References
    ----------
    :data:`NCCL_TUNING_SOURCE`: ``ncclTunerConstantsDefaults`` (baseLatencies,
    hwLatencies, llMaxBws), ``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``.

    Examples
    --------
    >>> round(nccl_allreduce_time(2**20, 8, 450e9, link_efficiency=0.8) * 1e6, 2)   # µs, LL wins
    28.01
    >>> [round(nccl_allreduce_time(0, 8, 450e9, protocol=p) * 1e6, 1) for p in ("LL", "LL128", "Simple")]
    [15.0, 40.6, 56.0]
    """
    m = check_nonnegative("message_bytes", message_bytes)
    n = check_integer("n_gpus", n_gpus, minimum=1)
    bw = check_positive("link_bandwidth", link_bandwidth)
    eta = check_fraction("link_efficiency", link_efficiency)
    cap = check_fraction("ll_cap", ll_cap)
    _check_protocol(protocol)
    factor = (n - 1) / n if check_bool("ring_factor", ring_factor) else (n > 1) * 1.0
    return scalar_or_array(_nccl_times(m, n, bw, eta, cap, factor, protocol, steps=2.0, volume=2.0))


def _nccl_times(m, n, bw, eta, cap, factor, protocol, *, steps, volume):
    """t_p for one protocol, or the minimum over the three (``steps`` alpha's per (N - 1), ``volume`` x m)."""
    names = ("LL", "LL128", "Simple") if protocol == "auto" else (protocol,)
    times = []
    for name in names:
        a0, a, bus = _protocol_terms(name, bw, eta, cap)
        times.append((n > 1) * a0 + steps * (n - 1) * a + volume * factor * m / bus)
    return times[0] if len(times) == 1 else np.minimum(np.minimum(times[0], times[1]), times[2])


def nccl_protocol_crossover(n_gpus, link_bandwidth, *, first="LL", second="LL128", link_efficiency=1.0,
                            ll_cap=NCCL_LL_BANDWIDTH_CAP, ring_factor=True):
    """The message size at which two NCCL protocols cost the same; above it the second is faster.

    Derived in the chapter "SLOs and goodput" (notebooks/07_slos_and_goodput.ipynb).

    Parameters
    ----------
    n_gpus : int or array, >= 2
    link_bandwidth, link_efficiency, ll_cap, ring_factor
        As in :func:`nccl_allreduce_time`.
    first, second : {"LL", "LL128", "Simple"}
        ``first`` has the lower latency, ``second`` the higher bandwidth.

    Returns
    -------
    float or ndarray
        m* in bytes with t_first(m*) = t_second(m*): (delta latency) / (delta
        seconds per byte); ``inf`` where ``second`` is not faster for large
        messages, 0 where it is faster for every message.

    Examples
    --------
    >>> round(nccl_protocol_crossover(8, 450e9, link_efficiency=0.8) / 1e6, 2)   # MB: LL -> LL128, 8 x H100
    3.59
    >>> round(nccl_protocol_crossover(8, 450e9, first="LL128", second="Simple", link_efficiency=0.8) / 1e6, 1)
    36.4
    """
    n = check_integer("n_gpus", n_gpus, minimum=2)
    bw = check_positive("link_bandwidth", link_bandwidth)
    eta = check_fraction("link_efficiency", link_efficiency)
    cap = check_fraction("ll_cap", ll_cap)
    allowed = ("LL", "LL128", "Simple")
    _check_protocol(first, allowed)
    _check_protocol(second, allowed)
    if first == second:
        raise ValueError(f"first and second must be two different protocols, got {first!r} twice")
    factor = (n - 1) / n if check_bool("ring_factor", ring_factor) else 1.0
    a0_1, a_1, bus_1 = _protocol_terms(first, bw, eta, cap)
    a0_2, a_2, bus_2 = _protocol_terms(second, bw, eta, cap)
    extra_latency = (a0_2 + 2 * (n - 1) * a_2) - (a0_1 + 2 * (n - 1) * a_1)
    saving_per_byte = 2 * factor * (1.0 / bus_1 - 1.0 / bus_2)
    with np.errstate(divide="ignore", invalid="ignore"):
        grows = saving_per_byte > 0          # else the second never pulls ahead as m grows
        cross = np.where(grows, np.maximum(extra_latency, 0.0) / np.where(grows, saving_per_byte, 1.0), np.inf)
    return scalar_or_array(cross)


def check_expert_parallel(model, expert_parallel, tensor_parallel=1):
    """Check an expert-parallel degree EP against ``model`` and the attention's TP degree N; return EP.

    Derived in the chapter "Tensor parallelism and the 8-GPU node" (notebooks/08_tensor_parallelism.ipynb).

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

    Derived in the chapter "Tensor parallelism and the 8-GPU node" (notebooks/08_tensor_parallelism.ipynb).

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

    Derived in the chapter "Tensor parallelism and the 8-GPU node" (notebooks/08_tensor_parallelism.ipynb).

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
    """How a tensor-parallel all-reduce is costed: the alpha-beta model of a ring, or NCCL's protocols.

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    The expert-parallel all-to-alls (dispatch and combine) are costed with the
    same alpha, alpha_0, link efficiency and data type (:meth:`alltoall_time`;
    with a protocol, with that protocol's constants, see Notes).

    Attributes
    ----------
    latency : float or array
        alpha, seconds per ring step (0 = physical bound). Only without a ``protocol``.
    base_latency : float or array
        alpha_0, seconds per call. Only without a ``protocol``.
    link_efficiency : float or array in (0, 1]
        eta, achieved / peak one-way link bandwidth (with a protocol: Simple's).
    dtype : str
        Data type of the activations that are summed: bf16 even for fp8 or int8
        matmuls, whose kernels write bf16 outputs.
    ring_factor : bool
        True (the book): 2 (N - 1) / N x m / beta; False: 2 m / beta, kipply's
        rounding (see :func:`allreduce_time`).
    protocol : None or {"LL", "LL128", "Simple", "auto"}
        None (default): the plain alpha-beta ring with ``latency`` and
        ``base_latency`` (:func:`allreduce_time`). A protocol: NCCL's latencies
        and bandwidth share for it, or ``"auto"``, the fastest of the three for
        each message, as NCCL's tuner picks (:func:`nccl_allreduce_time`); then
        ``latency`` and ``base_latency`` must stay 0 (the protocol brings its own).
    ll_cap : float or array in (0, 1]
        LL's bus-bandwidth cap as a fraction of the link (:data:`NCCL_LL_BANDWIDTH_CAP`).

    Notes
    -----
    With ``protocol="auto"`` the cost of a call is concave and piecewise
    linear in the message (not affine): :attr:`is_affine` says so, and
    :meth:`fixed_protocols` gives the three affine pieces whose minimum it is.
    The expert-parallel all-to-all (:meth:`alltoall_time`) uses the same
    per-protocol constants in the pairwise-exchange form (NCCL's tuner has no
    model of its own for all-to-all).

    Examples
    --------
    >>> AllReduce().time(1e9, 2, 1e9)
    1.0
    >>> AllReduce(latency=-1.0)
    Traceback (most recent call last):
    ...
    ValueError: latency must be >= 0, got -1
    >>> auto = AllReduce(protocol="auto", link_efficiency=0.8)
    >>> [str(auto.chosen_protocol(m, 8, 450e9)) for m in (16e3, 8e6, 64e6)]
    ['LL', 'LL128', 'Simple']
    """

    latency: float = 0.0
    base_latency: float = 0.0
    link_efficiency: float = 1.0
    dtype: str = "bf16"
    ring_factor: bool = True
    protocol: str | None = None
    ll_cap: float = NCCL_LL_BANDWIDTH_CAP

    def __post_init__(self):
        object.__setattr__(self, "latency", freeze_number(check_nonnegative("latency", self.latency)))
        object.__setattr__(self, "base_latency", freeze_number(check_nonnegative("base_latency", self.base_latency)))
        object.__setattr__(self, "link_efficiency",
                           freeze_number(check_fraction("link_efficiency", self.link_efficiency)))
        check_dtype(self.dtype, "allreduce_dtype")
        object.__setattr__(self, "ring_factor", check_bool("allreduce_ring_factor", self.ring_factor))
        object.__setattr__(self, "ll_cap", freeze_number(check_fraction("ll_cap", self.ll_cap)))
        if self.protocol is not None:
            _check_protocol(self.protocol)
            if np.any(np.asarray(self.latency) != 0) or np.any(np.asarray(self.base_latency) != 0):
                raise ValueError(
                    f"allreduce_protocol = {self.protocol!r} brings NCCL's own latencies: leave allreduce_latency "
                    f"and allreduce_base_latency at 0 (got {np.max(self.latency):g} and "
                    f"{np.max(self.base_latency):g} s), or give allreduce_protocol=None for a plain ring with "
                    "your latencies")

    @property
    def bytes_per_element(self) -> float:
        return bytes_per_element(self.dtype)

    @property
    def is_affine(self) -> bool:
        """True when the cost of a call is affine in the message (every model but ``protocol="auto"``)."""
        return self.protocol != "auto"

    def fixed_protocols(self) -> tuple:
        """The affine pieces of this model: for ``"auto"`` one AllReduce per protocol, else ``(self,)``.

        The cost of ``"auto"`` is the minimum of theirs, message by message.

        >>> [a.protocol for a in AllReduce(protocol="auto").fixed_protocols()]
        ['LL', 'LL128', 'Simple']
        """
        if self.is_affine:
            return (self,)
        return tuple(replace(self, protocol=p) for p in ("LL", "LL128", "Simple"))

    def _factor(self, n):
        return (n - 1) / n if self.ring_factor else (n > 1) * 1.0

    def time(self, message_bytes, n_gpus, link_bandwidth):
        """Seconds for one all-reduce of ``message_bytes`` (:func:`allreduce_time` or
        :func:`nccl_allreduce_time`)."""
        if self.protocol is None:
            bw = check_positive("link_bandwidth", link_bandwidth) * self.link_efficiency
            return allreduce_time(message_bytes, n_gpus, bw, latency=self.latency, base_latency=self.base_latency,
                                  ring_factor=self.ring_factor)
        return nccl_allreduce_time(message_bytes, n_gpus, link_bandwidth, protocol=self.protocol,
                                   link_efficiency=self.link_efficiency, ll_cap=self.ll_cap,
                                   ring_factor=self.ring_factor)

    def chosen_protocol(self, message_bytes, n_gpus, link_bandwidth):
        """The protocol that costs each message (``"auto"``: the fastest; ties go to the lower latency).

        Returns a str, or an array of str; ``"ring"`` for the plain model (``protocol=None``).
        """
        if self.protocol is None:
            shape = np.broadcast_shapes(np.shape(message_bytes), np.shape(n_gpus), np.shape(link_bandwidth))
            return "ring" if shape == () else np.full(shape, "ring")
        if self.protocol != "auto":
            shape = np.broadcast_shapes(np.shape(message_bytes), np.shape(n_gpus), np.shape(link_bandwidth))
            return self.protocol if shape == () else np.full(shape, self.protocol)
        times = np.stack(np.broadcast_arrays(*(np.asarray(a.time(message_bytes, n_gpus, link_bandwidth), dtype=float)
                                               for a in self.fixed_protocols())))
        names = np.array(["LL", "LL128", "Simple"])[np.argmin(times, axis=0)]
        return str(names) if names.ndim == 0 else names

    def alltoall_time(self, message_bytes, n_gpus, link_bandwidth):
        """Seconds for one all-to-all of ``message_bytes`` per GPU with the same alpha, alpha_0 and eta
        (see :func:`alltoall_time`): the expert-parallel dispatch and combine. With a protocol: its
        constants (``"auto"``: the fastest), N - 1 steps and (N - 1) / N x m on each link."""
        if self.protocol is None:
            bw = check_positive("link_bandwidth", link_bandwidth) * self.link_efficiency
            return alltoall_time(message_bytes, n_gpus, bw, latency=self.latency, base_latency=self.base_latency)
        m = check_nonnegative("message_bytes", message_bytes)
        n = check_integer("n_gpus", n_gpus, minimum=1)
        bw = check_positive("link_bandwidth", link_bandwidth)
        return scalar_or_array(_nccl_times(m, n, bw, self.link_efficiency, self.ll_cap, (n - 1) / n,
                                           self.protocol, steps=1.0, volume=1.0))
