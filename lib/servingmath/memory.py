"""Memory: weights, the KV cache, and the largest batch that fits on a GPU.

Every running sequence keeps, for each layer and each KV head, one key and
one value vector per token: the KV cache. On each GPU of a tensor-parallel
group of N,

* the weights take W_gpu = P x b_w / N bytes (K/V projections of replicated
  KV heads excepted, see :func:`weight_bytes_per_gpu`);
* one token of KV cache takes 2 x L x K_gpu x d_h x b_kv bytes, with
  K_gpu = max(1, K / N) KV heads per GPU (:func:`kv_heads_per_gpu`);
* the memory left for the KV cache is u x M - R - W_gpu, with u the share of
  the GPU the server may use (vLLM's ``gpu_memory_utilization``, default 0.9)
  and R the reserve for activations, CUDA graphs and library workspaces;
* the largest batch of sequences of S tokens is the KV memory divided by the
  KV bytes of one sequence, rounded down (:func:`max_batch_size`).

Conventions
-----------
* Bytes are bytes. Capacities come from the accelerator catalog, where the
  sheet's "80 GB" is read as 80e9 bytes; an NVIDIA "80 GB" GPU really has
  80 GiB (nvidia-smi: 81920 MiB on an A100-80GB). Pass ``memory_bytes`` to
  use another figure, e.g. the ``total_gpu_memory`` your server logs.
* Defaults are explicit: ``gpu_memory_utilization=0.9`` (vLLM's default) and
  ``reserve_bytes=0.0``. With R = 0 the results are upper bounds: a real server
  also needs a few GiB for activations and runtime (vLLM logs them at start-up).
* "Does not fit" is never a negative number: :func:`max_batch_size` returns 0,
  :func:`fits` returns False and :func:`check_fits` raises a ``ValueError``
  that names the numbers.

Examples
--------
>>> kv_bytes_per_sequence("Llama-2-7B", 4096) / 2**30      # GiB
2.0
>>> max_batch_size("Llama-3.1-8B", "H100", context_len=8192)
52
>>> max_batch_size("Llama-3.1-405B", "H100", context_len=8192)   # weights alone exceed 80 GB
0
>>> kv_heads_per_gpu("Llama-3.1-70B", tensor_parallel=16)   # 8 KV heads cannot split 16 ways
1
"""

from __future__ import annotations

import math

import numpy as np

from ._validation import (
    check_choice,
    check_fraction,
    check_integer,
    check_nonnegative,
    check_positive,
    check_scalar,
    int_or_array,
    is_scalar_input,
    scalar_or_array,
)
from .datatypes import bytes_per_element, check_dtype
from .deployment import DEFAULT_GPU_MEMORY_UTILIZATION, Deployment, deployment_function
from .hardware import get_accelerator
from .models import (check_context_len, expert_parameter_split, get_model, kv_bytes_per_token,
                     kv_projection_parameter_count, parameter_count, weight_bytes, window_of)
from .sharding import (check_expert_parallel, check_tensor_parallel, kv_head_replicas, kv_heads_per_gpu,
                       tensor_parallel_shares, valid_tensor_parallel_degrees)
from .units import GB

__all__ = [
    "DEFAULT_GPU_MEMORY_UTILIZATION",
    "DEFAULT_RESERVE_BYTES",
    "DEFAULT_BLOCK_SIZE",
    "valid_tensor_parallel_degrees",
    "check_tensor_parallel",
    "kv_heads_per_gpu",
    "kv_head_replicas",
    "kv_bytes_per_token_per_gpu",
    "kv_bytes_per_sequence",
    "kv_tokens_held",
    "kv_bytes_for_batch",
    "kv_projection_parameter_count",
    "weight_bytes_per_gpu",
    "usable_memory",
    "memory_available_for_kv",
    "max_kv_tokens",
    "max_batch_size",
    "fits",
    "check_fits",
    "min_tensor_parallel",
    "paged_kv_blocks",
    "paged_kv_bytes_per_sequence",
    "sequences_that_fit",
    "compare_kv_allocation",
    "memory_footprint",
    "chips_needed",
    "CHIP_ROUNDING",
    "kv_transfer_time",
    "kv_tokens_freed_per_step",
]

#: Default reserve for activations and runtime, in bytes: none (gives upper bounds).
DEFAULT_RESERVE_BYTES = 0.0
#: vLLM's default KV-cache block size on CUDA, in tokens (``--block-size``).
DEFAULT_BLOCK_SIZE = 16

# floor() of a quotient that should be a whole number can land just below it
# in floating point (4.999999999999999); nudge by far less than one token.
_FLOOR_NUDGE = 1e-12


def _floor(x):
    return np.floor(np.asarray(x, dtype=float) * (1.0 + _FLOOR_NUDGE))


# ---------------------------------------------------------------- tensor parallelism
# valid_tensor_parallel_degrees, check_tensor_parallel, kv_heads_per_gpu and kv_head_replicas live in
# servingmath.sharding (the one place that decides what a GPU of a tensor-parallel group holds) and
# are importable from here as well.


# ---------------------------------------------------------------- KV cache bytes

def kv_bytes_per_token_per_gpu(model, *, kv_dtype: str = "bf16", tensor_parallel=1, kv_sharding: str = "heads"):
    """KV-cache bytes one token adds on each GPU: 2 x L x K_gpu x d_h x b_kv.

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

    With ``tensor_parallel=1`` this is :func:`servingmath.models.kv_bytes_per_token`.
    Summed over the N GPUs it is 2 L max(K, N) d_h b_kv: more than the
    single-GPU figure once KV heads are replicated (N > K), unless
    ``kv_sharding="batch"`` (then 1/N of it on each GPU:
    :func:`servingmath.sharding.tensor_parallel_shares`).

    Examples
    --------
    >>> kv_bytes_per_token_per_gpu("Llama-3.1-70B", tensor_parallel=8)
    40960.0
    >>> kv_bytes_per_token_per_gpu("Llama-3.1-70B", tensor_parallel=16)   # not 20480: heads replicate
    40960.0
    >>> kv_bytes_per_token_per_gpu("Llama-3.1-70B", tensor_parallel=16, kv_sharding="batch")
    20480.0
    """
    model = get_model(model)
    share = np.asarray(tensor_parallel_shares(model, tensor_parallel, kv_sharding=kv_sharding)[1])
    return scalar_or_array(kv_bytes_per_token(model, kv_dtype) * share)


def kv_bytes_per_sequence(model, context_len, *, kv_dtype: str = "bf16"):
    """KV-cache bytes of one sequence of ``context_len`` tokens: its whole cache, all KV heads.

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

    For one GPU's share under tensor parallelism see :func:`kv_bytes_for_batch`.

    Parameters
    ----------
    model : str or ModelConfig
    context_len : int or array of int
        Tokens in the sequence's cache, 0 <= S <= the model's maximum.
    kv_dtype : str
        Data type of the cache (``"bf16"``, ``"fp8"``, ...).

    Returns
    -------
    float or ndarray
        S x 2 x L x K x d_h x b_kv bytes.

    Notes
    -----
    The 2 counts one key and one value vector per KV head, layer and token.
    K is the number of *KV* heads: H for multi-head attention (MHA), 1 for
    multi-query attention (MQA), in between for grouped-query attention (GQA).
    Sliding-window models (Mistral-7B) could keep only the window; this
    function counts every token.

    References
    ----------
    Pope et al., "Efficiently Scaling Transformer Inference", MLSys 2023
    (arXiv:2211.05102), section 2 (KV cache size).

    Examples
    --------
    >>> kv_bytes_per_sequence("Llama-3.1-8B", [1024, 8192], kv_dtype="fp8") / 2**20   # MiB
    array([ 64., 512.])
    """
    model = get_model(model)
    s = check_context_len(model, context_len)
    return scalar_or_array(np.asarray(kv_tokens_held(model, s)) * kv_bytes_per_token(model, check_dtype(kv_dtype,
                                                                                                         "kv_dtype")))


def kv_bytes_for_batch(model, batch_size, context_len, *, kv_dtype: str = "bf16", tensor_parallel=1,
                       kv_sharding: str = "heads"):
    """KV-cache bytes of ``batch_size`` sequences of ``context_len`` tokens, **on each GPU**.

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

    B x S x 2 x L x K_gpu x d_h x b_kv. With ``tensor_parallel=1`` it is the
    whole cache; for the total over a tensor-parallel group multiply by N.

    Examples
    --------
    >>> kv_bytes_for_batch("Llama-2-7B", 64, 4096) / 2**30     # GiB: more than an 80 GB GPU
    128.0
    >>> kv_bytes_for_batch("Llama-3.1-70B", 32, 8192, tensor_parallel=4) / 1e9   # GB per GPU
    21.47483648
    """
    model = get_model(model)
    b = check_integer("batch_size", batch_size, minimum=0)
    s = check_context_len(model, context_len)
    per_token = np.asarray(kv_bytes_per_token_per_gpu(model, kv_dtype=kv_dtype, tensor_parallel=tensor_parallel,
                                                      kv_sharding=kv_sharding))
    return scalar_or_array(b * np.asarray(kv_tokens_held(model, s)) * per_token)


# ---------------------------------------------------------------- weights

def weight_bytes_per_gpu(model, *, weight_dtype: str = "bf16", tensor_parallel=1, expert_parallel=1):
    """Bytes of weights each GPU holds with tensor parallelism of degree N (and expert parallelism EP).

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

    Parameters
    ----------
    model : str or ModelConfig
    weight_dtype : str
        Storage data type of the weights (``"bf16"``, ``"fp8"``, ``"int4"``...).
    tensor_parallel : int or array of int
        N, see :func:`valid_tensor_parallel_degrees`.
    expert_parallel : int or array of int
        EP (mixture of experts, :func:`servingmath.sharding.check_expert_parallel`):
        with EP > 1 each GPU holds E / EP whole routed experts and 1/N of the
        shared weights (attention data parallelism keeps one copy per group).

    Returns
    -------
    float or ndarray

    Notes
    -----
    W_gpu = b_w x [(P - P_kv) / N + P_kv x K_gpu / K], with P_kv the key/value
    projection parameters (:func:`kv_projection_parameter_count`). When N <= K
    this is exactly P b_w / N; when N > K each GPU also keeps the projection
    of its replicated KV head. Norm weights and MoE routers, also replicated
    in practice, are below 0.01 % of the parameters and are split here.
    With EP > 1: W_gpu = b_w x [(P_shared - P_kv) / N + P_kv x K_gpu / K + (E / EP) P_e],
    with P_e one routed expert summed over the MoE layers
    (:func:`servingmath.models.expert_parameter_split`).

    Examples
    --------
    >>> weight_bytes_per_gpu("Llama-3.1-70B", tensor_parallel=8) / 1e9
    17.638426624
    >>> round(weight_bytes_per_gpu("Llama-3.1-405B", tensor_parallel=16) / 1e9, 2)   # 50.73 + replicated K/V
    51.26
    >>> round(weight_bytes_per_gpu("DeepSeek-V3", weight_dtype="fp8", expert_parallel=8) / 1e9, 1)   # GB
    98.9
    """
    model = get_model(model)
    check_dtype(weight_dtype, "weight_dtype")
    ep = check_expert_parallel(model, expert_parallel, tensor_parallel)
    share = np.asarray(tensor_parallel_shares(model, tensor_parallel)[0])
    b, b_e = bytes_per_element(weight_dtype), bytes_per_element(model.expert_dtype or weight_dtype)
    shared, per_expert = expert_parameter_split(model)
    # parameters at the weights' bytes, plus the experts' difference where the checkpoint keeps its own
    dense_layout = (parameter_count(model) * b + model.n_experts * per_expert * (b_e - b)) * share
    if not np.any(ep > 1):
        return scalar_or_array(dense_layout)
    n = np.asarray(check_tensor_parallel(model, tensor_parallel), dtype=float)
    kv_share = np.asarray(tensor_parallel_shares(model, tensor_parallel)[1])
    p_kv = kv_projection_parameter_count(model)
    ep_layout = (b * ((shared - p_kv) / n + p_kv * kv_share)
                 + b_e * model.n_experts / np.asarray(ep, dtype=float) * per_expert)
    return scalar_or_array(np.where(ep > 1, ep_layout, dense_layout))


# ---------------------------------------------------------------- memory budget

def usable_memory(accelerator, *, gpu_memory_utilization=DEFAULT_GPU_MEMORY_UTILIZATION,
                  reserve_bytes=DEFAULT_RESERVE_BYTES, memory_bytes=None):
    """Bytes a server may fill with weights and KV cache on one GPU: u x M - R (may be negative).

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

    ``memory_bytes`` (M) defaults to the accelerator's catalog capacity.

    >>> usable_memory("H100") / 1e9
    72.0
    """
    acc = get_accelerator(accelerator)
    m = check_positive("memory_bytes", acc.memory_bytes if memory_bytes is None else memory_bytes)
    u = check_fraction("gpu_memory_utilization", gpu_memory_utilization)
    r = check_nonnegative("reserve_bytes", reserve_bytes)
    return scalar_or_array(u * m - r)


def _kv_budget(dep: Deployment, pipeline_parallel=1):
    """Signed KV budget per GPU: u M - R - W_gpu (negative: the weights do not fit).

    With P pipeline stages (each on N GPUs, each holding 1/P of the layers) the budget is
    counted in the units of one N-GPU group holding every layer: P (u M - R) - W_gpu, since a
    token's KV bytes per GPU are 1/P of kv_gpu on each stage as the weights are 1/P of W_gpu."""
    usable = np.asarray(usable_memory(dep.accelerator, gpu_memory_utilization=dep.gpu_memory_utilization,
                                      reserve_bytes=dep.reserve_bytes, memory_bytes=dep.memory_bytes))
    return pipeline_parallel * usable - np.asarray(weight_bytes_per_gpu(dep.model, weight_dtype=dep.weight_dtype,
                                                                        tensor_parallel=dep.tensor_parallel,
                                                                        expert_parallel=dep.expert_parallel))


@deployment_function
def memory_available_for_kv(dep: Deployment):
    """Bytes left for the KV cache on each GPU: max(0, u x M - R - W_gpu).

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

    Parameters
    ----------
    model, accelerator : or one Deployment
    weight_dtype, tensor_parallel : deployment settings (keyword options)
    gpu_memory_utilization : float in (0, 1]
        Share u of the GPU's memory the server may use. Default 0.9, vLLM's default.
    reserve_bytes : float
        R: memory the server needs besides weights and KV cache (activations
        of the largest forward pass, CUDA graphs, NCCL and cuBLAS workspaces),
        within the u x M. Default 0: an upper bound. vLLM logs it at start-up as
        "non_torch_memory" plus "PyTorch activation peak memory".
    memory_bytes : float or None
        M; default the catalog's capacity (spec-sheet GB read as decimal).

    Returns
    -------
    float or ndarray
        Bytes per GPU; 0 when the weights alone do not fit (see :func:`check_fits`).

    Notes
    -----
    M_kv = u M - R - W_gpu, the same bookkeeping as vLLM's memory profiler:
    "the current vLLM instance can use total_gpu_memory x gpu_memory_utilization";
    the rest after weights, non-torch memory and the activation peak is "reserved
    for KV Cache".

    References
    ----------
    vLLM engine arguments, ``--gpu-memory-utilization`` (default 0.9),
    https://docs.vllm.ai/en/latest/ (read 2026-11); vLLM PR #10511 (2024-12),
    memory profiling log of Meta-Llama-3-8B on an H100-80GB.

    Examples
    --------
    >>> round(memory_available_for_kv("Llama-3.1-8B", "H100") / 1e9, 2)
    55.94
    >>> # the log of vLLM PR #10511: 79.22 GiB total, 1.79 + 1.26 GiB reserve
    >>> GiB = 2**30
    >>> round(memory_available_for_kv("Llama-3.1-8B", "H100", memory_bytes=79.22 * GiB,
    ...                               reserve_bytes=(1.79 + 1.26) * GiB) / GiB, 2)
    53.29
    """
    return scalar_or_array(np.maximum(_kv_budget(dep), 0.0))


@deployment_function
def max_kv_tokens(dep: Deployment, *, block_size=1, pipeline_parallel=1):
    """Tokens of KV cache that fit: floor(M_kv / (block x kv_gpu)) x block.

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

    What vLLM logs as "GPU KV cache size: ... tokens" (it counts whole blocks
    of ``block_size`` tokens; the default 1 counts single tokens). The tokens
    are shared by all running sequences.

    >>> max_kv_tokens("Llama-3.1-8B", "H100")
    426784
    >>> max_kv_tokens("Llama-3.1-8B", "H100", block_size=16)
    426784

    With expert parallelism each of the EP / N attention groups holds its own
    sequences: the instance holds EP / N times the tokens of one group.

    ``pipeline_parallel=P`` spreads the layers over P stages of N GPUs each: every
    stage holds 1/P of the weights and 1/P of each token's KV, so M_kv = P (u M - R) - W_gpu
    in the units of one N-GPU group (Llama-3.1-70B in fp8 on one 96 GB RTX PRO 6000 leaves
    room for a small cache; on two stages, for far more than twice as many tokens):

    >>> max_kv_tokens("Llama-3.1-70B", "RTX-PRO-6000-Blackwell-Server", weight_dtype="fp8", kv_dtype="fp8")
    96718
    >>> max_kv_tokens("Llama-3.1-70B", "RTX-PRO-6000-Blackwell-Server", weight_dtype="fp8", kv_dtype="fp8",
    ...               pipeline_parallel=2)
    624061
    """
    bs = check_integer("block_size", block_size, minimum=1)
    pp = check_integer("pipeline_parallel", pipeline_parallel, minimum=1)
    kv = np.asarray(kv_bytes_per_token_per_gpu(dep.model, kv_dtype=dep.kv_dtype,
                                               tensor_parallel=dep.tensor_parallel, kv_sharding=dep.kv_sharding))
    avail = np.maximum(_kv_budget(dep, pp), 0.0)
    return int_or_array(_floor(avail / (bs * kv)) * bs * np.asarray(dep.data_parallel))


@deployment_function
def max_batch_size(dep: Deployment, context_len, *, block_size=1):
    """The largest number of sequences of ``context_len`` tokens whose KV cache fits.

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

    Parameters
    ----------
    model, accelerator : or one Deployment
    context_len : int or array of int
        Tokens each sequence holds, 1 <= S <= the model's maximum.
    weight_dtype, kv_dtype, tensor_parallel, gpu_memory_utilization, reserve_bytes, memory_bytes
        Deployment settings (keyword options): data types (default bf16), N GPUs
        sharing the weights and the KV heads (default 1), the share u of memory
        (default 0.9, vLLM's), the reserve R per GPU (default 0: an upper bound)
        and the memory M per GPU (default the catalog's, spec-sheet GB read as decimal).
    block_size : int
        Tokens per KV block (paged cache). Each sequence takes whole blocks:
        ceil(S / block) of them. Default 1: no rounding.

    Returns
    -------
    int or ndarray of int
        B_max >= 0. It is 0 when not even one sequence fits, which includes a
        model whose weights alone exceed the memory; :func:`check_fits` turns
        that into an error naming the numbers.

    Notes
    -----
    B_max = floor((u M - R - W_gpu) / (S x 2 L K_gpu d_h b_kv)), with
    W_gpu = P b_w / N and K_gpu = max(1, K / N) (with expert parallelism, times
    the EP / N attention groups, each holding its own sequences). For N <= K this is
    floor((N (u M - R) - P b_w) / (S x 2 L K d_h b_kv)): the pooled memory of
    the N GPUs, minus all weights, over the whole cache of one sequence. With a
    sliding window in some layers, S is what a sequence holds: :func:`kv_tokens_held`.

    References
    ----------
    Kwon et al., "Efficient Memory Management for Large Language Model Serving
    with PagedAttention", SOSP 2023 (arXiv:2309.06180).

    Examples
    --------
    >>> max_batch_size("Llama-3.1-8B", "H100", [2048, 8192, 32768, 131072])
    array([208,  52,  13,   3])
    >>> max_batch_size("Llama-3.1-70B", "H100", 8192, tensor_parallel=[2, 4, 8])
    array([  1,  54, 162])
    """
    s = check_context_len(dep.model, context_len)
    if s.size and np.any(s < 1):
        raise ValueError(f"context_len must be >= 1 token to size a batch, got {s[s < 1].flat[0]:g}")
    bs = check_integer("block_size", block_size, minimum=1)
    kv = np.asarray(kv_bytes_per_token_per_gpu(dep.model, kv_dtype=dep.kv_dtype,
                                               tensor_parallel=dep.tensor_parallel, kv_sharding=dep.kv_sharding))
    avail = np.maximum(_kv_budget(dep), 0.0)
    blocks = _floor(avail / (bs * kv))
    blocks_per_sequence = _held_blocks(dep.model, s, bs)   # a sliding window keeps w tokens
    return int_or_array(_floor(blocks / blocks_per_sequence) * np.asarray(dep.data_parallel))


@deployment_function
def fits(dep: Deployment, context_len, batch_size=1, *, block_size=1):
    """True where ``batch_size`` sequences of ``context_len`` tokens fit (weights included).

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

    Keyword options are those of :func:`max_batch_size`.

    >>> fits("Llama-3.1-405B", "H100", 8192)
    False
    >>> fits("Llama-3.1-405B", "H100", 8192, weight_dtype="fp8", tensor_parallel=8)
    True
    """
    b = check_integer("batch_size", batch_size, minimum=1)
    result = np.asarray(max_batch_size(dep, context_len, block_size=block_size)) >= b
    return bool(result) if result.ndim == 0 else result


def _fmt_gb(x: float) -> str:
    return f"{x / GB:.1f} GB"


@deployment_function
def check_fits(dep: Deployment, context_len, batch_size=1, *, block_size=1) -> int:
    """Raise a ``ValueError`` that names the numbers unless the batch fits; return B_max if it does.

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

    Scalars only (a scalar deployment).

    Raises
    ------
    ValueError
        If the weights alone exceed the usable memory, or if the KV cache of
        ``batch_size`` sequences does not fit in what the weights leave.

    Examples
    --------
    >>> check_fits("Llama-3.1-8B", "H100", 8192, batch_size=32)
    52
    >>> check_fits("Llama-3.1-405B", "H100", 8192)
    Traceback (most recent call last):
    ...
    ValueError: Llama-3.1-405B does not fit on H100-SXM5-80GB with tensor_parallel=1: its bf16 weights take 811.7 GB per GPU, but only 72.0 GB is usable (0.9 x 80.0 GB - 0.0 GB reserve). Smallest tensor_parallel that fits: 16; or store the weights in fewer bytes (fp8, int4).
    """
    if not dep.is_scalar or not is_scalar_input(context_len, batch_size, block_size):
        raise ValueError("check_fits takes scalars only; use fits() or max_batch_size() for arrays")
    model, acc = dep.model, dep.accelerator
    b_max = max_batch_size(dep, context_len, block_size=block_size)
    b = int(check_integer("batch_size", batch_size, minimum=1))
    if b_max >= b:
        return b_max
    m = dep.memory_per_gpu
    usable = usable_memory(acc, gpu_memory_utilization=dep.gpu_memory_utilization,
                           reserve_bytes=dep.reserve_bytes, memory_bytes=dep.memory_bytes)
    weights = weight_bytes_per_gpu(model, weight_dtype=dep.weight_dtype, tensor_parallel=dep.tensor_parallel,
                                   expert_parallel=dep.expert_parallel)
    where = f"{model.name} does not fit on {acc.name} with tensor_parallel={int(dep.tensor_parallel)}"
    budget = (f"only {_fmt_gb(usable)} is usable ({float(dep.gpu_memory_utilization):g} x "
              f"{_fmt_gb(m)} - {_fmt_gb(float(dep.reserve_bytes))} reserve)")
    try:
        smallest = min_tensor_parallel(dep, context_len, batch_size=b, block_size=block_size)
        advice = f"Smallest tensor_parallel that fits: {smallest}"
    except ValueError:
        advice = "No tensor-parallel degree makes it fit"
    if weights > usable:
        raise ValueError(f"{where}: its {dep.weight_dtype} weights take {_fmt_gb(weights)} per GPU, "
                         f"but {budget}. {advice}; or store the weights in fewer bytes (fp8, int4).")
    per_group = -(-b // int(dep.data_parallel))          # sequences of the fullest attention group
    need = kv_bytes_for_batch(model, per_group, context_len, kv_dtype=dep.kv_dtype,
                              tensor_parallel=dep.tensor_parallel, kv_sharding=dep.kv_sharding)
    raise ValueError(f"{where}: batch_size={b} x context_len={int(context_len)} needs "
                     f"{_fmt_gb(need)} of {dep.kv_dtype} KV cache per GPU, but the weights "
                     f"({_fmt_gb(weights)}) leave {_fmt_gb(usable - weights)} of the {_fmt_gb(usable)} "
                     f"usable: the largest batch is {b_max}. {advice}; or shorten the context, "
                     "or store the KV cache in fp8.")


@deployment_function
def min_tensor_parallel(dep: Deployment, context_len, batch_size=1, *, block_size=1) -> int:
    """The smallest valid tensor-parallel degree with which ``batch_size`` sequences fit.

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

    Keyword options are those of :func:`max_batch_size`; ``tensor_parallel`` is what it chooses.

    Raises
    ------
    ValueError
        If no degree up to the number of query heads is enough.

    Examples
    --------
    >>> min_tensor_parallel("Llama-3.1-405B", "H100", 8192)
    16
    >>> min_tensor_parallel("Llama-3.1-405B", "H100", 8192, weight_dtype="fp8")
    8
    """
    model = dep.model
    degrees = valid_tensor_parallel_degrees(model)
    check_scalar("context_len", context_len)
    batch = check_integer("batch_size", batch_size, scalar=True)
    found = np.asarray(max_batch_size(dep.replace(tensor_parallel=degrees), context_len,
                                      block_size=block_size)) >= batch
    if not np.any(found):
        raise ValueError(f"{model.name} with batch_size={batch_size} x context_len={context_len} "
                         f"does not fit at any tensor_parallel up to {degrees[-1]}")
    return degrees[int(np.argmax(found))]


def kv_tokens_held(model, context_len):
    """KV-cache entries a sequence of S tokens holds, in tokens of every layer: (1 - phi) S + phi min(S, w).

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

    A layer that attends within a sliding window of w tokens needs only the
    last w of them (:func:`servingmath.models.window_of`: a share phi of the
    layers); engines with a hybrid KV allocator (vLLM V1's, SGLang's
    sliding-window pool) free the rest. So a windowed model's sequence costs
    fewer bytes than S x :func:`servingmath.models.kv_bytes_per_token`, which
    counts a token in every layer. Without a window this is S.

    >>> kv_tokens_held("Llama-3.1-8B", 8192)
    8192.0
    >>> kv_tokens_held("gpt-oss-120b", 8192)   # half the layers keep 128 tokens
    4160.0
    """
    model = get_model(model)
    return scalar_or_array(_held_blocks(model, check_context_len(model, context_len), 1))


def _held_blocks(model, s, block_size):
    """Cache blocks of ``block_size`` tokens a sequence of s tokens holds, in blocks of every layer:
    (1 - phi) ceil(s / b) + phi ceil(min(s, w) / b), each kind of layer paged on its own."""
    s = np.asarray(s, dtype=float)
    blocks = np.ceil(s / block_size)
    w, phi = window_of(model)
    if w is None:
        return blocks
    return (1.0 - phi) * blocks + phi * np.ceil(np.minimum(s, w) / block_size)


# ---------------------------------------------------------------- the whole footprint, and the chips it needs

def memory_footprint(model, batch_size=0, context_len=0, *, weight_dtype: str = "bf16", kv_dtype: str = "bf16"):
    """Bytes a model instance holds in all: its weights and the KV cache of ``batch_size`` sequences.

    Parameters
    ----------
    model : str, ModelConfig or ModelTotals
    batch_size : int or array, >= 0
    context_len : int or array, >= 0
        Tokens each sequence holds.
    weight_dtype, kv_dtype : str

    Returns
    -------
    dict
        ``weights`` = P b_w, ``kv_cache`` = B S k_tok, ``total``, in bytes (a
        sliding-window model: S is :func:`kv_tokens_held`)
        (whole model, no replication: what the references call "total memory").

    Notes
    -----
    M = P b_w + B S 2 L K d_h b_kv. Activations are left out (How to Scale Your
    Model: "our activation footprint is negligible"); a server reserves a few
    GiB for them (``reserve_bytes``). Derived in the chapter "Memory".

    Examples
    --------
    >>> f = memory_footprint("Llama-3.1-70B", 32, 8192, weight_dtype="int8", kv_dtype="int8")
    >>> {k: round(v / 1e9, 1) for k, v in f.items()}   # GB
    {'weights': 70.6, 'kv_cache': 42.9, 'total': 113.5}
    """
    model = get_model(model)
    b = check_integer("batch_size", batch_size, minimum=0)
    s = check_context_len(model, context_len)
    check_dtype(weight_dtype, "weight_dtype")
    check_dtype(kv_dtype, "kv_dtype")
    weights = weight_bytes(model, weight_dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        kv = b * kv_tokens_held(model, s) * (kv_bytes_per_token(model, kv_dtype) if np.any(b * s > 0) else 0.0)
        total = weights + kv
    if not np.all(np.isfinite(total)):
        raise ValueError("batch_size x context_len is too large: the KV cache overflows a float "
                         f"(batch_size = {np.max(b):g}, context_len = {np.max(s):g})")
    return {"weights": scalar_or_array(weights + 0 * total), "kv_cache": scalar_or_array(kv + 0 * total),
            "total": scalar_or_array(total)}


#: How :func:`chips_needed` rounds the chip count: to a whole chip, or to a power of two (a TPU slice, a node).
CHIP_ROUNDING = ("chip", "power_of_two")


@deployment_function
def chips_needed(dep: Deployment, batch_size=0, context_len=0, *, round_up_to: str = "chip"):
    """The fewest chips whose pooled memory holds the weights and the KV cache: ceil(M / (u M_chip - R)).

    Parameters
    ----------
    model, accelerator : or one Deployment
        The accelerator's memory per chip; ``weight_dtype``, ``kv_dtype``,
        ``gpu_memory_utilization`` (u, default 0.9: pass 1.0 for "all the
        memory", as textbook problems do), ``reserve_bytes`` (R per chip) and
        ``memory_bytes`` are deployment options. ``tensor_parallel`` is ignored.
    batch_size, context_len : int or array
    round_up_to : {"chip", "power_of_two"}
        ``"power_of_two"`` rounds up to 1, 2, 4, 8, ... chips (How to Scale
        Your Model rounds to "the nearest reasonable topology").

    Returns
    -------
    int or ndarray of int

    Notes
    -----
    The footprint of :func:`memory_footprint` spread perfectly over the chips
    (fully sharded weights and KV cache, no replication): a lower bound. With
    the book's tensor-parallel rules (valid degrees, KV-head replication) use
    :func:`min_tensor_parallel`. Derived in the chapter "Memory".

    Examples
    --------
    >>> chips_needed("Llama-3.1-70B", "TPU-v5e", weight_dtype="bf16", gpu_memory_utilization=1.0)
    9
    >>> chips_needed("Llama-3.1-70B", "TPU-v5e", gpu_memory_utilization=1.0, round_up_to="power_of_two")
    16
    """
    check_choice("round_up_to", round_up_to, CHIP_ROUNDING)
    footprint = memory_footprint(dep.model, batch_size, context_len, weight_dtype=dep.weight_dtype,
                                 kv_dtype=dep.kv_dtype)["total"]
    per_chip = np.asarray(usable_memory(dep.accelerator, gpu_memory_utilization=dep.gpu_memory_utilization,
                                        reserve_bytes=dep.reserve_bytes, memory_bytes=dep.memory_bytes))
    if np.any(per_chip <= 0):
        raise ValueError("reserve_bytes leaves no memory on a chip: lower reserve_bytes or raise "
                         "gpu_memory_utilization")
    chips = np.maximum(1.0, np.ceil(np.asarray(footprint) / per_chip * (1.0 - _FLOOR_NUDGE)))
    if round_up_to == "power_of_two":
        chips = 2.0 ** np.ceil(np.log2(chips) - 1e-12)
    return int_or_array(chips)


# ---------------------------------------------------------------- moving and freeing the KV cache

def kv_transfer_time(model, prompt_len, *, link_bandwidth, kv_dtype: str = "bf16", latency=0.0, batch_size=1):
    """Seconds to move the KV cache of a prefilled prompt to another instance: latency + B L_p k_tok / beta.

    Parameters
    ----------
    model : str, ModelConfig or ModelTotals
    prompt_len : int or array
        Tokens whose KV cache moves (the prompt; its first output token is made where it was prefilled).
    link_bandwidth : float or array
        beta, bytes/s between the prefill and the decode instance (one 400 Gb/s
        InfiniBand NDR link: 50e9; NVLink 4: 450e9).
    kv_dtype : str
    latency : float or array
        Fixed seconds per transfer.
    batch_size : int or array
        Prompts moved together.

    Returns
    -------
    float or ndarray
        Seconds. :class:`servingmath.simulate.Disaggregated` charges exactly this per request.

    Notes
    -----
    t = alpha + B L_p 2 L K d_h b_kv / beta. Whole cache (every layer and KV
    head); with tensor parallelism each GPU sends its share over its own link,
    which is the same time when every GPU has a link of beta. Derived in the
    chapter "Scheduling" (prefill/decode disaggregation).

    References
    ----------
    Y. Zhong et al., "DistServe", OSDI 2024; P. Patel et al., "Splitwise", ISCA 2024.

    Examples
    --------
    >>> round(kv_transfer_time("Llama-3.1-8B", 803, link_bandwidth=50e9) * 1e3, 2)   # ms
    2.11
    """
    model = get_model(model)
    lp = check_context_len(model, prompt_len, "prompt_len")
    b = check_integer("batch_size", batch_size, minimum=0)
    bw = check_positive("link_bandwidth", link_bandwidth)
    a = check_nonnegative("latency", latency)
    check_dtype(kv_dtype, "kv_dtype")
    with np.errstate(over="ignore", invalid="ignore"):
        t = a + b * lp * kv_bytes_per_token(model, kv_dtype) / bw
    if not np.all(np.isfinite(t)):
        raise ValueError(f"batch_size = {np.max(b):g} or latency = {np.max(a):g} is too large: the time overflows")
    return scalar_or_array(t)


def kv_tokens_freed_per_step(batch_size, prompt_len, output_len):
    """KV tokens a steady decode batch frees per step: B (L_p + L_o) / L_o.

    Each step finishes B / L_o sequences on average (every sequence lives L_o
    steps), and each frees its L_p + L_o tokens. This is also the rate at which
    new prompts must arrive to keep the batch full.

    Parameters
    ----------
    batch_size : float or array
        Sequences decoding, B.
    prompt_len, output_len : float or array
        Mean prompt and output lengths (L_o >= 1).

    Returns
    -------
    float or ndarray
        Tokens per decode step.

    Notes
    -----
    Little's law on the batch: B sequences, each in it for L_o steps, so
    B / L_o leave per step. Derived in the chapter "Memory".

    References
    ----------
    J. Austin et al., "How to Scale Your Model", part "Serving LLaMA" (2025):
    "32 x (8192 + 4096) / 4096 = 96 tokens evicted per step".

    Examples
    --------
    >>> kv_tokens_freed_per_step(32, 8192, 4096)
    96.0
    """
    b = check_nonnegative("batch_size", batch_size)
    lp = check_nonnegative("prompt_len", prompt_len)
    lo = check_positive("output_len", output_len)
    if np.any(lo < 1):
        raise ValueError(f"output_len must be >= 1 token, got {np.min(lo):g}")
    with np.errstate(over="ignore", invalid="ignore"):
        freed = b * (lp + lo) / lo
    if not np.all(np.isfinite(freed)):
        raise ValueError(f"batch_size = {np.max(b):g} or prompt_len = {np.max(lp):g} is too large: the result overflows")
    return scalar_or_array(freed)


# ---------------------------------------------------------------- paging

def paged_kv_blocks(context_len, block_size=DEFAULT_BLOCK_SIZE):
    """KV blocks a sequence of ``context_len`` tokens occupies: ceil(S / block_size).

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

    >>> paged_kv_blocks(1000)
    63
    >>> paged_kv_blocks([16, 17, 32])
    array([1, 2, 2])
    """
    s = check_nonnegative("context_len", context_len)
    check_integer("context_len", s, minimum=0)
    bs = check_integer("block_size", block_size, minimum=1)
    return int_or_array(np.ceil(s / bs))


def paged_kv_bytes_per_sequence(model, context_len, *, kv_dtype: str = "bf16",
                                block_size=DEFAULT_BLOCK_SIZE):
    """Bytes a sequence holds in a paged cache: whole blocks, ceil(S / block) x block x kv_token.

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

    At most block_size - 1 token slots per sequence are empty (its last block).

    >>> paged_kv_bytes_per_sequence("Llama-2-7B", 1000) / kv_bytes_per_sequence("Llama-2-7B", 1000)
    1.008
    """
    model = get_model(model)
    s = check_context_len(model, context_len)
    blocks = np.asarray(paged_kv_blocks(context_len, block_size), dtype=float)
    if model.sliding_window is not None:   # each kind of layer paged on its own (kv_tokens_held)
        blocks = _held_blocks(model, s, np.asarray(block_size, dtype=float))
    result = blocks * np.asarray(block_size, dtype=float) * kv_bytes_per_token(model, kv_dtype)
    return scalar_or_array(result)


def sequences_that_fit(kv_budget_bytes, bytes_per_sequence) -> int:
    """How many sequences, admitted in order, fit in ``kv_budget_bytes``.

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

    The count n of leading entries with sum(bytes_per_sequence[:n]) <= budget.

    >>> sequences_that_fit(10, [3, 3, 3, 3])
    3
    """
    budget = check_nonnegative("kv_budget_bytes", kv_budget_bytes, scalar=True)
    sizes = check_nonnegative("bytes_per_sequence", bytes_per_sequence).ravel()
    return int(np.searchsorted(np.cumsum(sizes) * (1.0 - _FLOOR_NUDGE), budget, side="right"))


def compare_kv_allocation(model, context_lens, kv_budget_bytes, reserved_len, *,
                          kv_dtype: str = "bf16", block_size=DEFAULT_BLOCK_SIZE) -> dict:
    """Sequences that fit when each reserves ``reserved_len`` tokens, versus paged and exact allocation.

    Derived in the chapter "Memory: weights, the KV cache and the largest batch that fits" (notebooks/03_memory.ipynb).

    Parameters
    ----------
    model : str or ModelConfig
    context_lens : array of int
        Actual lengths of the requests, in admission order.
    kv_budget_bytes : float
        Memory for the KV cache (e.g. :func:`memory_available_for_kv`).
    reserved_len : int
        Tokens a contiguous allocator reserves per request (the maximum length).
    kv_dtype : str
    block_size : int
        Tokens per block of the paged allocator (vLLM's default: 16).

    Returns
    -------
    dict
        ``reserved``, ``paged``, ``exact``: sequences admitted by each scheme;
        ``reserved_waste``, ``paged_waste``: share of the memory each scheme
        holds for its admitted sequences that holds no token (0 to 1).

    Examples
    --------
    >>> r = compare_kv_allocation("Llama-2-7B", [500] * 100, 2**32, reserved_len=4096)
    >>> r["reserved"], r["paged"], r["exact"]
    (2, 16, 16)
    >>> round(r["reserved_waste"], 3), round(r["paged_waste"], 3)
    (0.878, 0.023)
    """
    model = get_model(model)
    lens = check_context_len(model, context_lens, name="context_lens").ravel()
    if lens.size == 0:
        raise ValueError("context_lens must hold at least one request length")
    reserved = int(check_context_len(model, check_scalar("reserved_len", reserved_len), name="reserved_len"))
    if np.any(lens > reserved):
        raise ValueError(f"context_lens holds {int(lens.max())} tokens, more than "
                         f"reserved_len = {reserved}")
    budget = check_nonnegative("kv_budget_bytes", kv_budget_bytes, scalar=True)
    per_token = kv_bytes_per_token(model, kv_dtype)
    exact = lens * per_token
    paged = np.asarray(paged_kv_bytes_per_sequence(model, lens, kv_dtype=kv_dtype, block_size=block_size))
    n_reserved = min(lens.size, int(_floor(budget / (reserved * per_token))))
    n_paged = sequences_that_fit(budget, paged)
    n_exact = sequences_that_fit(budget, exact)

    def waste(held, count):
        if count == 0 or held == 0:  # nothing held (empty sequences in paged blocks): nothing wasted
            return 0.0
        return float(1.0 - exact[:count].sum() / held)

    return {
        "reserved": n_reserved,
        "paged": n_paged,
        "exact": n_exact,
        "reserved_waste": waste(n_reserved * reserved * per_token, n_reserved),
        "paged_waste": waste(paged[:n_paged].sum(), n_paged),
    }
