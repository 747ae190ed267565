"""Rooflines: arithmetic intensity, the ridge point, and time bounds from FLOPs and bytes.

An operation that performs ``flops`` FLOPs and moves ``bytes_moved`` bytes
cannot finish faster than either resource allows. With perfect overlap of
compute and memory traffic its time is the *lower bound*
``max(flops / F, bytes / W)``; with none it is the *upper bound*, their sum.
Every real kernel lies between the two, and the upper is at most twice the lower.

``mfu`` and ``mbu`` (model FLOP utilisation and memory-bandwidth utilisation,
as Databricks defines them: achieved / peak) scale the peaks; the default 1.0
gives the physical bound.

The second half of the module gives the intensities that decide which bound
binds in LLM serving: the weight matmul ``[B, D] x [D, F]``
(:func:`matmul_intensity`, which turns compute-bound at
:func:`critical_batch_size`), decode attention (:func:`decode_attention_intensity`,
about G = H / K FLOP per byte of bf16 KV at any batch size), prefill attention
(:func:`prefill_attention_intensity`, growing with the prompt) and a whole
decode step (:func:`decode_step_intensity`). The chapter "Rooflines: why
decoding is bandwidth-bound" derives each formula in sympy.

Examples
--------
>>> h100 = "H100-SXM5-80GB"
>>> compute_time(989.4e12, h100)
1.0
>>> memory_time(3.35e12, h100)
1.0
>>> time_lower_bound(989.4e12, 3.35e12 / 2, h100)
1.0
>>> time_upper_bound(989.4e12, 3.35e12 / 2, h100)
1.5
"""

from __future__ import annotations

import numpy as np

from ._validation import (check_bool, check_choice, check_fraction, check_integer, check_nonnegative,
                          check_positive, scalar_or_array)
from .datatypes import bytes_per_element, check_dtype
from .hardware import get_accelerator
from .deployment import OVERLAP_MODELS, Deployment
from .models import ModelConfig, ModelTotals, active_parameter_count, check_context_len, get_model
from .step import Iteration, combine, iteration_work

__all__ = [
    "arithmetic_intensity",
    "ridge_point",
    "attainable_flops",
    "compute_time",
    "memory_time",
    "time_lower_bound",
    "time_upper_bound",
    "combine_step_parts",
    "OVERLAP_MODELS",
    "matmul_flops",
    "matmul_bytes",
    "matmul_intensity",
    "critical_batch_size",
    "decode_attention_intensity",
    "prefill_attention_intensity",
    "decode_step_intensity",
    "ATTENTION_KERNELS",
    "link_time",
    "link_ridge_point",
    "sharded_matmul_times",
    "SHARDED_DIMENSIONS",
    "training_flops",
    "training_mfu",
]

#: Attention kernels whose traffic :func:`decode_attention_intensity` and
#: :func:`prefill_attention_intensity` count: a fused kernel (FlashAttention) reads Q, K, V and
#: writes O once; an unfused one also writes and reads back the score matrix S and the
#: probabilities P (Dao et al. 2022, Algorithm 0).
ATTENTION_KERNELS = ("fused", "unfused")
#: Which dimension of a matmul :func:`sharded_matmul_times` shards over the chips.
SHARDED_DIMENSIONS = ("contracting", "output")


def arithmetic_intensity(flops, bytes_moved):
    """FLOPs per byte moved: I = flops / bytes.

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    Parameters
    ----------
    flops : float or array
        Floating-point operations performed (>= 0).
    bytes_moved : float or array
        Bytes read from and written to memory (> 0).

    Returns
    -------
    float or ndarray
        FLOP per byte. An operation is memory-bound on an accelerator when
        its intensity is below the accelerator's :func:`ridge_point`.

    References
    ----------
    S. Williams, A. Waterman, D. Patterson, "Roofline: an insightful visual
    performance model for multicore architectures", Communications of the
    ACM 52(4), 2009.

    Examples
    --------
    >>> arithmetic_intensity(2e9, 1e9)
    2.0
    """
    f = check_nonnegative("flops", flops)
    b = check_positive("bytes_moved", bytes_moved)
    return scalar_or_array(f / b)


def ridge_point(accelerator, dtype: str = "bf16", *, mfu=1.0, mbu=1.0):
    """Intensity at which an operation turns compute-bound: (F x MFU) / (W x MBU), FLOP/byte.

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    Parameters
    ----------
    accelerator : str or Accelerator
    dtype : str
        Data type of the math; picks the dense peak F (``fp16`` shares ``bf16``'s).
    mfu, mbu : float in (0, 1]
        Achieved fractions of peak FLOP/s and peak bandwidth (1.0: the spec sheet).

    Returns
    -------
    float or ndarray
        FLOP per byte.

    Raises
    ------
    ValueError
        If ``dtype`` has no published tensor peak on the accelerator (A10G: none at all).

    Notes
    -----
    R = F MFU / (W MBU). Dense FLOP/s: the 2:4-sparse figures that datasheets
    headline would double R.

    Examples
    --------
    >>> round(ridge_point("A100-SXM4-80GB"), 1)
    153.0
    >>> round(ridge_point("H100-SXM5-80GB", "fp8"), 1)
    590.7
    """
    acc = get_accelerator(accelerator)
    m = check_fraction("mfu", mfu)
    u = check_fraction("mbu", mbu)
    return scalar_or_array(acc.peak_flops(dtype) * m / (acc.memory_bandwidth * u))


def attainable_flops(intensity, accelerator, dtype: str = "bf16", *, mfu=1.0, mbu=1.0):
    """The roofline: min(F x MFU, I x W x MBU) in FLOP/s.

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    Examples
    --------
    >>> attainable_flops(1.0, "H100-SXM5-80GB") / 1e12   # one FLOP per byte: bandwidth-bound
    3.35
    >>> attainable_flops(1000.0, "H100-SXM5-80GB") / 1e12
    989.4
    """
    acc = get_accelerator(accelerator)
    i = check_nonnegative("intensity", intensity)
    m = check_fraction("mfu", mfu)
    u = check_fraction("mbu", mbu)
    return scalar_or_array(np.minimum(acc.peak_flops(dtype) * m, i * acc.memory_bandwidth * u))


def compute_time(flops, accelerator, dtype: str = "bf16", *, mfu=1.0):
    """Seconds to perform ``flops`` at F x MFU: flops / (F x MFU).

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    >>> compute_time(989.4e12, "H100-SXM5-80GB", mfu=0.5)
    2.0
    """
    acc = get_accelerator(accelerator)
    f = check_nonnegative("flops", flops)
    m = check_fraction("mfu", mfu)
    return scalar_or_array(f / (acc.peak_flops(dtype) * m))


def memory_time(bytes_moved, accelerator, *, mbu=1.0):
    """Seconds to move ``bytes_moved`` at W x MBU: bytes / (W x MBU).

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    >>> memory_time(3.35e12, "H100-SXM5-80GB", mbu=0.5)
    2.0
    """
    acc = get_accelerator(accelerator)
    b = check_nonnegative("bytes_moved", bytes_moved)
    u = check_fraction("mbu", mbu)
    return scalar_or_array(b / (acc.memory_bandwidth * u))


def time_lower_bound(flops, bytes_moved, accelerator, dtype: str = "bf16", *, mfu=1.0, mbu=1.0):
    """Perfect overlap: max(compute time, memory time), in seconds.

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    Parameters
    ----------
    flops : float or array
        FLOPs of the operation.
    bytes_moved : float or array
        Bytes it moves.
    accelerator : str or Accelerator
    dtype : str
        Data type of the math.
    mfu, mbu : float in (0, 1]

    Returns
    -------
    float or ndarray
        T_lower = max(flops / (F MFU), bytes / (W MBU)). No kernel can beat it.

    Notes
    -----
    T_lower <= T_upper <= 2 T_lower, with T_upper = 2 T_lower exactly when
    the operation sits on the ridge (compute time = memory time).

    References
    ----------
    J. Austin et al., "How to Scale Your Model", part "All About Rooflines"
    (Google DeepMind, 2025): T_lower = max(T_math, T_comms), T_upper = their sum.

    Examples
    --------
    >>> time_lower_bound(989.4e12, 3.35e12 / 2, "H100-SXM5-80GB")
    1.0
    """
    return scalar_or_array(np.maximum(compute_time(flops, accelerator, dtype, mfu=mfu),
                                      memory_time(bytes_moved, accelerator, mbu=mbu)))


def time_upper_bound(flops, bytes_moved, accelerator, dtype: str = "bf16", *, mfu=1.0, mbu=1.0):
    """No overlap: compute time + memory time, in seconds.

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    Parameters are those of :func:`time_lower_bound`.

    Returns
    -------
    float or ndarray
        T_upper = flops / (F MFU) + bytes / (W MBU): the time of a kernel
        that first loads, then computes, with nothing in flight at once.

    Examples
    --------
    >>> time_upper_bound(989.4e12, 3.35e12 / 2, "H100-SXM5-80GB")
    1.5
    """
    return scalar_or_array(compute_time(flops, accelerator, dtype, mfu=mfu)
                           + memory_time(bytes_moved, accelerator, mbu=mbu))


def combine_step_parts(overlap: str, weight_memory, linear_compute, kv_memory, attention_compute):
    """Combine the four parts of a transformer step into one time, by overlap model.

    * ``"additive"``: no overlap, the sum of all four (an upper bound);
    * ``"roofline"``: perfect overlap of all memory traffic with all compute,
      max(weights + KV, linear + attention) (a lower bound);
    * ``"hybrid"``: each kernel overlaps its own traffic with its own math:
      max(weights, linear) + max(KV, attention). The weight matmuls can turn
      compute-bound as the batch grows; decode attention stays bandwidth-bound
      (its intensity is about G = H/K FLOP per byte of bf16 KV, far below any ridge).

    All inputs are seconds (arrays broadcast). The step model's
    :func:`servingmath.step.combine`, for parts given one by one. Derived in the
    chapter "Rooflines".

    >>> combine_step_parts("hybrid", 4.0, 1.0, 2.0, 0.5)
    6.0
    """
    check_choice("overlap", overlap, OVERLAP_MODELS)
    parts = {"weight_memory": weight_memory, "linear_compute": linear_compute, "kv_memory": kv_memory,
             "attention_compute": attention_compute, "communication": 0.0}
    return combine(overlap, parts)


# --------------------------------------------------------------------------
# Intensities of the operations of LLM serving
# --------------------------------------------------------------------------

def matmul_flops(batch, d_in, d_out):
    """FLOPs of the matmul ``[B, D] x [D, F]``: 2 B D F.

    Parameters
    ----------
    batch : int or array of int
        Rows of the activation matrix, B >= 1 (tokens processed together:
        the batch size in decode, batch x prompt length in prefill).
    d_in, d_out : int or array of int
        The weight matrix's shape, D x F (>= 1).

    Returns
    -------
    float or ndarray
        FLOPs. Each of the B D F multiply-adds is two FLOPs.

    Notes
    -----
    F_mm = 2 B D F. Forgetting the 2 halves every intensity and doubles
    every critical batch size derived from it.

    References
    ----------
    Chapter "Rooflines: why decoding is bandwidth-bound" (derivation).

    Examples
    --------
    >>> matmul_flops(1, 4096, 14336)
    117440512.0
    """
    b = check_integer("batch", batch, minimum=1)
    d = check_integer("d_in", d_in, minimum=1)
    f = check_integer("d_out", d_out, minimum=1)
    return scalar_or_array(2.0 * b * d * f)


def matmul_bytes(batch, d_in, d_out, *, weight_dtype: str = "bf16", activation_dtype: str = "bf16"):
    """Bytes a ``[B, D] x [D, F]`` matmul must move: D F b_w + B D b_a + B F b_a.

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    The compulsory traffic: read the weights once, read the input
    activations once, write the output activations once.

    Parameters
    ----------
    batch, d_in, d_out : int or array of int
        As in :func:`matmul_flops`.
    weight_dtype : str
        Storage type of the weights (``"bf16"``, ``"fp8"``, ``"int8"``, ``"int4"``...).
    activation_dtype : str
        Type of the input and output activations.

    Returns
    -------
    float or ndarray
        Bytes.

    Notes
    -----
    Q_mm = D F b_w + B (D + F) b_a. Quantisation scales (1-3 % for group
    size 128) are ignored.

    Examples
    --------
    >>> matmul_bytes(1, 4096, 4096)   # 32 MiB of bf16 weights + 16 KiB of activations
    33570816.0
    >>> matmul_bytes(1, 4096, 4096, weight_dtype="int4")
    8404992.0
    """
    b = check_integer("batch", batch, minimum=1)
    d = check_integer("d_in", d_in, minimum=1)
    f = check_integer("d_out", d_out, minimum=1)
    bw = bytes_per_element(check_dtype(weight_dtype, "weight_dtype"))
    ba = bytes_per_element(check_dtype(activation_dtype, "activation_dtype"))
    return scalar_or_array(d * f * bw + b * (d + f) * ba)


def matmul_intensity(batch, d_in, d_out, *, weight_dtype: str = "bf16", activation_dtype: str = "bf16"):
    """Arithmetic intensity of ``[B, D] x [D, F]``: 2 B D F / (D F b_w + B (D + F) b_a).

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    Parameters
    ----------
    batch, d_in, d_out, weight_dtype, activation_dtype
        As in :func:`matmul_bytes`.

    Returns
    -------
    float or ndarray
        FLOP per byte. For B << D, F it is about 2 B / b_w (= B for bf16
        weights): the intensity grows with the batch because every row
        reuses the same weights.

    Notes
    -----
    I_mm = 2 B D F / (D F b_w + B (D + F) b_a), derived in the rooflines chapter.

    Examples
    --------
    >>> round(matmul_intensity(1, 4096, 14336), 4)
    0.9997
    >>> round(matmul_intensity(64, 4096, 14336), 1)
    62.7
    >>> round(matmul_intensity(64, 4096, 14336, weight_dtype="int4"), 1)
    237.0
    """
    return scalar_or_array(
        np.asarray(matmul_flops(batch, d_in, d_out))
        / np.asarray(matmul_bytes(batch, d_in, d_out, weight_dtype=weight_dtype,
                                  activation_dtype=activation_dtype)))


def critical_batch_size(accelerator, *, weight_dtype: str = "bf16", compute_dtype: str = "bf16",
                        activation_dtype=None, mfu=1.0, mbu=1.0, d_in=None, d_out=None):
    """Batch size at which a weight matmul turns compute-bound.

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    Parameters
    ----------
    accelerator : str or Accelerator
    weight_dtype : str
        Storage type of the weights: bytes per weight b_w (int4: 0.5).
    compute_dtype : str
        Type of the math, which picks the peak FLOP/s: ``"bf16"`` for
        weight-only quantisation (int8/fp8/int4 weights dequantised on the
        fly), ``"fp8"`` or ``"int8"`` for quantised math.
    activation_dtype : str, optional
        Type of the activations (default: ``compute_dtype``). It matters only
        in the exact form (``d_in`` and ``d_out`` given).
    mfu, mbu : float in (0, 1]
        Achieved fractions of peak FLOP/s and of peak bandwidth; 1.0 is the
        physical bound.
    d_in, d_out : int or array of int, optional
        The weight matrix's shape D x F. Without them, the large-matrix limit.

    Returns
    -------
    float or ndarray
        B_crit, a real number (round up for the first compute-bound batch).
        ``inf`` where the exact form has no solution: a matrix so small that
        its activation traffic alone keeps it memory-bound at every batch.

    Notes
    -----
    With R = (F x MFU) / (W x MBU) the (effective) ridge point, setting the
    intensity 2 B D F / (D F b_w + B (D + F) b_a) equal to R gives the exact

        B_crit = R D F b_w / (2 D F - R (D + F) b_a),

    and for D, F -> infinity the limit

        B_crit = R b_w / 2.

    The 2 is the two FLOPs of a multiply-add, not the activation's bytes:
    the often-written R b_w / b_a agrees only when activations are 2 bytes.
    Weight-only quantisation divides B_crit by 2 (8-bit) or 4 (int4); fp8
    weights with fp8 math leave it unchanged (twice the FLOP/s, half the bytes).

    References
    ----------
    J. Austin et al., "How to Scale Your Model", part "All About Rooflines"
    (Google DeepMind, 2025): the bf16, int8-weight and int8-math cases.

    Examples
    --------
    >>> round(critical_batch_size("A100-SXM4-80GB"), 1)
    153.0
    >>> round(critical_batch_size("H100-SXM5-80GB", weight_dtype="int4"), 1)
    73.8
    >>> round(critical_batch_size("H100-SXM5-80GB", weight_dtype="fp8", compute_dtype="fp8"), 1)
    295.3
    >>> round(critical_batch_size("A100-SXM4-80GB", mfu=0.5, mbu=0.8), 1)
    95.6
    >>> round(critical_batch_size("A100-SXM4-80GB", d_in=4096, d_out=14336), 1)
    160.7
    """
    acc = get_accelerator(accelerator)
    bw = bytes_per_element(check_dtype(weight_dtype, "weight_dtype"))
    check_dtype(compute_dtype, "compute_dtype")
    if activation_dtype is None:
        activation_dtype = compute_dtype
    ba = bytes_per_element(check_dtype(activation_dtype, "activation_dtype"))
    m = check_fraction("mfu", mfu)
    u = check_fraction("mbu", mbu)
    try:
        peak = acc.peak_flops(compute_dtype)
    except ValueError as exc:
        raise ValueError(f"compute_dtype: {exc}") from None
    ridge = peak * m / (acc.memory_bandwidth * u)
    if d_in is None and d_out is None:
        return scalar_or_array(ridge * bw / 2.0)
    if d_in is None or d_out is None:
        raise ValueError(f"give both d_in and d_out for the exact form, or neither for the "
                         f"large-matrix limit; got d_in={d_in!r}, d_out={d_out!r}")
    d = check_integer("d_in", d_in, minimum=1)
    f = check_integer("d_out", d_out, minimum=1)
    denominator = 2.0 * d * f - ridge * (d + f) * ba
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.where(denominator > 0, ridge * d * f * bw / np.where(denominator > 0, denominator, 1.0),
                         np.inf)
    return scalar_or_array(exact)


def decode_attention_intensity(model, context_len=None, *, kv_dtype: str = "bf16",
                               activation_dtype: str = "bf16", kernel: str = "fused"):
    """Arithmetic intensity of attention in one decode step: 2 G / b_kv for long contexts.

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    One new token attends to ``context_len`` cached tokens. Per layer and
    per sequence it performs 4 H d_h S FLOPs (q k^T and p v, two FLOPs per
    multiply-add each) and must read the S keys and values of its K KV heads,
    2 K d_h S b_kv bytes, plus its query and write its output, 2 H d_h b_a.
    Every sequence reads its own cache, so the batch size cancels: attention
    in decode is bandwidth-bound at any batch.

    Parameters
    ----------
    model : str or ModelConfig
    kv_dtype : str
        Type of the KV cache (b_kv bytes per element).
    context_len : int or array of int, optional
        Tokens attended to (S). ``None`` (default) gives the long-context
        limit 2 G / b_kv, which the query and output traffic shift by less
        than G b_a / (S b_kv) (0.2 % for G = 8, S = 4096).
    activation_dtype : str
        Type of the query and output vectors (only for finite ``context_len``),
        and of the scores of an unfused kernel.
    kernel : {"fused", "unfused"}
        ``"fused"`` (the book, FlashAttention/FlashDecoding): the scores never
        leave the chip. ``"unfused"``: the 1 x S scores of every head are
        written, read back for the softmax, written as probabilities and read
        for the value product, 4 H S b_a more bytes per layer.

    Returns
    -------
    float or ndarray
        FLOP per byte.

    Notes
    -----
    I_dec = 4 H d_h S / (2 K d_h S b_kv + 2 H d_h b_a) = 2 H S / (K S b_kv + H b_a)
    -> 2 H / (K b_kv) = 2 G / b_kv as S -> infinity; G = H / K is the number of
    query heads that share a KV head (1 for MHA). In bf16 it is G FLOP/byte.
    Unfused: 4 H d_h S / (2 K d_h S b_kv + 2 H d_h b_a + 4 H S b_a)
    -> 4 H d_h / (2 K d_h b_kv + 4 H b_a).

    References
    ----------
    J. Ainslie et al., "GQA: Training Generalized Multi-Query Transformer Models
    from Multi-Head Checkpoints", EMNLP 2023 (grouped-query attention).

    Examples
    --------
    >>> decode_attention_intensity("Llama-2-7B")          # MHA, bf16 KV
    1.0
    >>> decode_attention_intensity("Llama-3.1-70B")       # GQA, G = 8
    8.0
    >>> decode_attention_intensity("Llama-3.1-70B", kv_dtype="fp8")
    16.0
    >>> round(decode_attention_intensity("Llama-3.1-70B", 4096), 3)
    7.984
    >>> round(decode_attention_intensity("Llama-3.1-70B", kernel="unfused"), 3)   # + 4 H b_a bytes of scores per key
    7.111
    """
    model = get_model(model)
    check_choice("kernel", kernel, ATTENTION_KERNELS)
    bkv = bytes_per_element(check_dtype(kv_dtype, "kv_dtype"))
    ba = bytes_per_element(check_dtype(activation_dtype, "activation_dtype"))
    h, k, dh = model.n_heads, model.n_kv_heads, model.head_dim
    scores = 4.0 * h * ba if kernel == "unfused" else 0.0   # bytes per key of the score matrix
    if context_len is None:
        return float(4.0 * h * dh / (2.0 * k * dh * bkv + scores))
    s = check_context_len(model, context_len)
    return scalar_or_array(4.0 * h * dh * s / (2.0 * k * dh * s * bkv + 2.0 * h * dh * ba + scores * s))


def prefill_attention_intensity(model, prompt_len, *, kv_dtype: str = "bf16",
                                activation_dtype: str = "bf16", causal: bool = True, kernel: str = "fused"):
    """Arithmetic intensity of causal attention over a prompt: H (L_p + 1) / (K b_kv + H b_a).

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    A prompt of L_p tokens with a causal mask has L_p (L_p + 1) / 2
    query-key pairs, 4 H d_h FLOPs each (per layer). The compulsory traffic
    of an ideal fused kernel (FlashAttention with large tiles approaches it)
    is to read Q, K and V and write O once: 2 L_p d_h (K b_kv + H b_a) bytes.
    The intensity grows linearly with the prompt.

    Parameters
    ----------
    model : str or ModelConfig
    prompt_len : int or array of int
        Prompt tokens, 1 <= L_p <= the model's maximum context.
    kv_dtype, activation_dtype : str
        Types of K, V and of Q, O (and of the scores of an unfused kernel).
    causal : bool
        True (the book): L_p (L_p + 1) / 2 (query, key) pairs, as a causal
        kernel computes (FlashAttention-2 skips the masked blocks). False: all
        L_p^2 pairs, the full score matrix of How to Scale Your Model (T / 2
        for MHA), CS336 (S / 2) and Baseten's guide.
    kernel : {"fused", "unfused"}
        ``"unfused"`` also writes and reads back the score and probability
        matrices, 4 H b_a bytes per pair (Baseten's "8 N^2 + 8 N d" bytes per
        head for fp16 MHA).

    Returns
    -------
    float or ndarray
        FLOP per byte (per sequence; the batch size cancels).

    Notes
    -----
    I_pre = 2 H d_h L_p (L_p + 1) / (2 L_p d_h (K b_kv + H b_a)) = H (L_p + 1) / (K b_kv + H b_a).
    Full (non-causal) score matrix: 2 H L_p / (K b_kv + H b_a); unfused kernel:
    4 H d_h n_pairs / (2 L_p d_h (K b_kv + H b_a) + 4 H n_pairs b_a).
    Real kernels re-read K and V once per query tile, so their intensity is
    lower; this is the upper limit. Softmax operations (a few per score) are
    not counted, as everywhere in the book (matmul FLOPs only).

    References
    ----------
    T. Dao et al., "FlashAttention: Fast and Memory-Efficient Exact Attention
    with IO-Awareness", NeurIPS 2022.

    Examples
    --------
    >>> prefill_attention_intensity("Llama-2-7B", 1023)      # MHA: (L_p + 1) / 4
    256.0
    >>> prefill_attention_intensity("Llama-3.1-8B", 1024)    # G = 4: 4 (L_p + 1) / 10
    410.0
    >>> prefill_attention_intensity("Llama-2-7B", 1024, causal=False)   # MHA, full matrix: L_p / 2
    512.0
    >>> round(prefill_attention_intensity("Llama-2-7B", 4096, causal=False, kernel="unfused"), 1)   # Baseten's 62
    62.1
    """
    model = get_model(model)
    check_choice("kernel", kernel, ATTENTION_KERNELS)
    full = not check_bool("causal", causal)
    lp = check_integer("prompt_len", prompt_len, minimum=1)
    check_context_len(model, lp, "prompt_len")
    bkv = bytes_per_element(check_dtype(kv_dtype, "kv_dtype"))
    ba = bytes_per_element(check_dtype(activation_dtype, "activation_dtype"))
    h, k = model.n_heads, model.n_kv_heads
    pairs = lp * lp if full else lp * (lp + 1.0) / 2.0
    if kernel == "fused":
        return scalar_or_array(2.0 * h * pairs / (lp * (k * bkv + h * ba)))
    dh = model.head_dim
    return scalar_or_array(4.0 * h * dh * pairs / (2.0 * lp * dh * (k * bkv + h * ba) + 4.0 * h * pairs * ba))


def decode_step_intensity(model, batch_size, context_len, *, weight_dtype: str = "bf16",
                          kv_dtype: str = "bf16"):
    """Arithmetic intensity of a whole decode step: all its FLOPs over all its bytes.

    The library's step model (:mod:`servingmath.step`): FLOPs
    2 P_mm B + 4 L H d_h S B, bytes W_bytes + B S k_tok, with P_mm the
    matmul parameters, W_bytes the weights read (the embedding table's B
    gathered rows instead of the table; for MoE, the experts the batch
    touches) and k_tok the KV bytes per token.

    Parameters
    ----------
    model : str or ModelConfig
    batch_size : int or array of int
        Sequences decoding together, B >= 1.
    context_len : int or array of int
        Tokens in each sequence's KV cache, S.
    weight_dtype, kv_dtype : str

    Returns
    -------
    float or ndarray
        FLOP per byte. As B grows the KV term takes over and the intensity
        approaches (2 P_mm + 4 L H d_h S) / (S k_tok) (dense models), which
        for long contexts sits far below every ridge point.

    Notes
    -----
    I_step(B, S) = (2 P_mm + 4 L H d_h S) B / (W_bytes + B S k_tok). Derived in
    the chapter "Rooflines".

    Examples
    --------
    >>> round(decode_step_intensity("Llama-3.1-8B", 1, 0), 3)
    1.0
    >>> round(decode_step_intensity("Llama-3.1-8B", 256, 4096), 1)
    28.8
    """
    model = get_model(model)
    check_integer("batch_size", batch_size, minimum=1)
    dep = Deployment(model=model, accelerator=None, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    work = iteration_work(dep, Iteration.decode(model, sequences=batch_size, context_len=context_len))
    return scalar_or_array(np.asarray(work.flops) / np.asarray(work.memory_bytes))


# --------------------------------------------------------------------------
# The communication roofline: when the chip-to-chip link, not HBM or FLOPs, binds
# --------------------------------------------------------------------------

def _link_bandwidth(accelerator, link_bandwidth):
    if link_bandwidth is not None:
        return check_positive("link_bandwidth", link_bandwidth)
    if accelerator is None:
        raise ValueError("give an accelerator (its one-way interconnect bandwidth is used) or link_bandwidth=")
    acc = get_accelerator(accelerator)
    if acc.interconnect_bandwidth is None:
        raise ValueError(f"accelerator {acc.name} has no interconnect bandwidth in the catalog: give "
                         "link_bandwidth= (one-way bytes/s)")
    return acc.interconnect_bandwidth


def link_time(link_bytes, accelerator=None, *, link_bandwidth=None, link_efficiency=1.0):
    """Seconds to send ``link_bytes`` over a chip's link to the others: bytes / (eta beta).

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    Parameters
    ----------
    link_bytes : float or array
        Bytes each chip sends (e.g. :func:`servingmath.sharding.ring_allreduce_bytes`).
    accelerator : str or Accelerator, optional
        Its one-way ``interconnect_bandwidth`` is beta (NVLink 4: 450 GB/s).
    link_bandwidth : float, optional
        beta in bytes/s, instead of the catalog's (e.g. TPU ICI, 4.5e10 per link one way).
    link_efficiency : float in (0, 1]
        eta, achieved / peak.

    Examples
    --------
    >>> round(link_time(2 * 64 * 8192, link_bandwidth=9e10) * 1e6, 2)   # µs
    11.65
    """
    b = check_nonnegative("link_bytes", link_bytes)
    bw = _link_bandwidth(accelerator, link_bandwidth)
    eta = check_fraction("link_efficiency", link_efficiency)
    return scalar_or_array(b / (bw * eta))


def link_ridge_point(accelerator, dtype: str = "bf16", *, link_bandwidth=None, mfu=1.0, link_efficiency=1.0):
    """FLOPs per byte sent over the link at which a sharded operation turns from link-bound to compute-bound.

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    R_link = F MFU / (eta beta): an operation that does fewer FLOPs per byte it
    sends than this waits on the interconnect. It is the communication
    roofline's ridge, as :func:`ridge_point` is the HBM roofline's.

    Examples
    --------
    >>> round(link_ridge_point("H100"))             # NVLink 4, 450 GB/s one way
    2199
    >>> round(link_ridge_point("A100", link_bandwidth=300e9))   # kipply: 312e12 / 300e9
    1040
    """
    acc = get_accelerator(accelerator)
    m = check_fraction("mfu", mfu)
    eta = check_fraction("link_efficiency", link_efficiency)
    return scalar_or_array(acc.peak_flops(dtype) * m / (_link_bandwidth(acc, link_bandwidth) * eta))


def sharded_matmul_times(accelerator, batch, d_in, d_out, *, n_shards, sharded: str = "contracting",
                         weight_dtype: str = "bf16", activation_dtype: str = "bf16", compute_dtype: str = "bf16",
                         link_bandwidth=None, ring_factor=True, mfu=1.0, mbu=1.0, link_efficiency=1.0) -> dict:
    """Compute, HBM and link time of ``[B, D] x [D, F]`` sharded over ``n_shards`` chips (seconds, per chip).

    Derived in the chapter "Rooflines: why decoding is bandwidth-bound" (notebooks/02_rooflines.ipynb).

    Parameters
    ----------
    accelerator : str or Accelerator
    batch, d_in, d_out : int or array
        B, D, F (tokens, contracting and output dimensions).
    n_shards : int or array
        N chips sharing the weight matrix.
    sharded : {"contracting", "output"}
        ``"contracting"`` (row-parallel, Megatron's second matmul): each chip
        multiplies [B, D/N] x [D/N, F] and the B x F partial sums are
        all-reduced, 2 (N - 1)/N x B F b_a bytes per chip.
        ``"output"`` (column-parallel after an all-gather of a sharded input):
        [B, D] x [D, F/N], the B x D input gathered first, (N - 1)/N x B D b_a.
    weight_dtype, activation_dtype, compute_dtype : str
    link_bandwidth : float, optional
        One-way bytes/s per chip (default: the catalog's interconnect).
    ring_factor : bool
        Keep the (N - 1)/N of a ring (the book) or round it to 1 (kipply, How
        to Scale Your Model).
    mfu, mbu, link_efficiency : float in (0, 1]

    Returns
    -------
    dict
        ``compute`` = 2 B D F / (N F MFU), ``memory`` = (D F b_w + its share of
        the activations) / (N W MBU), ``link`` = link bytes / (eta beta),
        ``lower_bound`` = their max (perfect overlap) and ``bound``, the name
        of the largest.

    Notes
    -----
    Contracting-dimension sharding is link-bound when 2BDF / (N F) < 2 (N - 1)/N
    B F b_a / beta, i.e. when D < (N - 1) b_a F / beta: the threshold depends on
    D, not on the batch (How to Scale Your Model, "Network communication
    rooflines": D > 8755 on two TPU v5e at 4.5e10 B/s). Output sharding with a
    gathered input is link-bound over HBM when D F b_w / (N W) < B D b_a / beta,
    i.e. beyond N = F b_w beta_hbm / (B b_a beta): the decode rule
    Y > F / (B beta) of "All About Transformer Inference". Derived in the
    chapters "Rooflines" and "Tensor parallelism".

    Examples
    --------
    >>> t = sharded_matmul_times("H100", 64, 8192, 28672, n_shards=8)
    >>> {k: (round(v * 1e6, 2) if k != "bound" else v) for k, v in t.items()}   # µs
    {'compute': 3.8, 'memory': 18.66, 'link': 14.27, 'lower_bound': 18.66, 'bound': 'memory'}
    """
    check_choice("sharded", sharded, SHARDED_DIMENSIONS)
    acc = get_accelerator(accelerator)
    b = check_integer("batch", batch, minimum=1)
    d = check_integer("d_in", d_in, minimum=1)
    f = check_integer("d_out", d_out, minimum=1)
    n = check_integer("n_shards", n_shards, minimum=1)
    bw_w = bytes_per_element(check_dtype(weight_dtype, "weight_dtype"))
    ba = bytes_per_element(check_dtype(activation_dtype, "activation_dtype"))
    check_dtype(compute_dtype, "compute_dtype")
    m = check_fraction("mfu", mfu)
    u = check_fraction("mbu", mbu)
    eta = check_fraction("link_efficiency", link_efficiency)
    factor = (n - 1) / n if check_bool("ring_factor", ring_factor) else (n > 1) * 1.0
    try:
        peak = acc.peak_flops(compute_dtype)
    except ValueError as exc:
        raise ValueError(f"compute_dtype: {exc}") from None
    with np.errstate(over="ignore", invalid="ignore"):
        return _sharded_times(acc, b, d, f, n, bw_w, ba, peak, m, u, eta, factor, sharded, link_bandwidth)


def _sharded_times(acc, b, d, f, n, bw_w, ba, peak, m, u, eta, factor, sharded, link_bandwidth):
    b, d, f, n = (np.asarray(x, dtype=float) for x in (b, d, f, n))
    compute = 2.0 * b * d * f / (n * peak * m)
    if sharded == "contracting":
        hbm = (d * f * bw_w + b * d * ba) / n + b * f * ba
        sent = 2.0 * factor * b * f * ba
    else:
        hbm = (d * f * bw_w + b * f * ba) / n + b * d * ba
        sent = factor * b * d * ba
    memory = hbm / (acc.memory_bandwidth * u)
    link = np.where(n > 1, sent, 0.0) / (_link_bandwidth(acc, link_bandwidth) * eta)
    stacked = np.broadcast_arrays(compute, memory, link)
    if not all(np.all(np.isfinite(x)) for x in stacked):
        raise ValueError("batch, d_in, d_out or n_shards is too large: the times overflow a float")
    names = np.array(["compute", "memory", "link"])
    bound = names[np.argmax(np.stack(stacked), axis=0)]
    return {"compute": scalar_or_array(stacked[0]), "memory": scalar_or_array(stacked[1]),
            "link": scalar_or_array(stacked[2]), "lower_bound": scalar_or_array(np.maximum.reduce(stacked)),
            "bound": str(bound) if np.ndim(bound) == 0 else bound}


# --------------------------------------------------------------------------
# Training FLOPs and MFU (6 N D)
# --------------------------------------------------------------------------

def training_flops(parameters, tokens, *, flops_per_parameter_token=6.0):
    """FLOPs to train on ``tokens`` tokens: 6 N D (forward 2 N D, backward 4 N D).

    Parameters
    ----------
    parameters : float, or a model (its active parameters)
    tokens : float or array
    flops_per_parameter_token : float
        6 (the standard count); 8 with full activation recomputation (the
        forward pass is done twice).

    Notes
    -----
    C = 6 N D, attention FLOPs left out (below a few percent at ordinary
    contexts). Kaplan et al. 2020; How to Scale Your Model, "All the
    Transformer Math You Need to Know". Derived in the chapter "Rooflines".

    >>> training_flops(37e9, 14.8e12) / 1e24
    3.2856
    """
    n = _parameters(parameters)
    d = check_nonnegative("tokens", tokens)
    k = check_positive("flops_per_parameter_token", flops_per_parameter_token)
    with np.errstate(over="ignore", invalid="ignore"):
        flops = k * n * d
    if not np.all(np.isfinite(flops)):
        raise ValueError(f"parameters x tokens is too large: {np.max(n):g} x {np.max(d):g} overflows a float")
    return scalar_or_array(flops)


def _parameters(parameters):
    if isinstance(parameters, (str, ModelConfig, ModelTotals)):
        return float(active_parameter_count(parameters))
    return check_positive("parameters", parameters)


def training_mfu(parameters, accelerator, tokens, chip_seconds, *, dtype: str = "bf16",
                 flops_per_parameter_token=6.0):
    """Model FLOP utilisation of a training run: 6 N D / (chip-seconds x dense peak).

    Parameters
    ----------
    parameters : float, or a model
        N, the parameters a token uses (a mixture of experts: the active ones).
    accelerator : str or Accelerator
        Its dense peak in ``dtype`` (the catalog's dense, not 2:4-sparse, figure).
    tokens : float or array
        D, tokens trained on.
    chip_seconds : float or array
        GPU-hours x 3600.
    dtype : str
        Data type of the matmuls (``"fp8"`` for an fp8 run).
    flops_per_parameter_token : float
        6, or 8 with full recomputation.

    Returns
    -------
    float or ndarray
        MFU in (0, 1] for a plausible run (larger than 1 means the inputs disagree).

    Notes
    -----
    MFU = 6 N D / (T_chip F), Databricks' / PaLM's definition (achieved model
    FLOP/s over peak). Derived in the chapter "Rooflines".

    Examples
    --------
    >>> round(training_mfu(37e9, "H100", 14.8e12, 2.79e6 * 3600, dtype="fp8"), 3)   # DeepSeek-V3, H800 = H100 SXM
    0.165
    """
    acc = get_accelerator(accelerator)
    t = check_positive("chip_seconds", chip_seconds)
    flops = training_flops(parameters, tokens, flops_per_parameter_token=flops_per_parameter_token)
    with np.errstate(over="ignore", invalid="ignore"):
        mfu = np.asarray(flops) / (t * acc.peak_flops(dtype))
    if not np.all(np.isfinite(mfu)):
        raise ValueError(f"chip_seconds = {np.max(t):g} is too large: chip-seconds x peak FLOP/s overflows")
    return scalar_or_array(mfu)
