"""Quantization: what fewer bytes per weight and per KV element do to decode.

A quantization **scheme** fixes three data types (:class:`Scheme`):

* ``weight_dtype``, the bytes each stored weight takes, b_w (bf16: 2, int8/fp8: 1, int4: 0.5);
* ``kv_dtype``, the bytes of each KV-cache element, b_kv (bf16: 2, fp8: 1);
* ``compute_dtype``, the type the matmuls run in, which picks the peak FLOP/s F.

The names follow llm-compressor / vLLM usage: ``W4A16`` is 4-bit weights with
16-bit activations (weight-only: weights are dequantized to bf16 inside the
kernel and the math runs in bf16); ``W8A8-FP8`` is fp8 weights *and* fp8 math
(Hopper and Ada tensor cores run it at twice the bf16 FLOP/s); ``+KV8`` adds an
fp8 KV cache. Weight quantization leaves the KV cache in bf16 unless the
scheme says otherwise. The 4-bit float formats carry their block scales in
their bytes per weight (NVFP4: 0.5625 B, one E4M3 scale per 16 values;
MXFP4: 0.53125 B, one E8M0 scale per 32): ``W4A16-MXFP4`` and
``W4A16-NVFP4`` are weight-only, ``W4A4-NVFP4`` and ``W4A4-MXFP4`` compute in
fp4 at the fp4 tensor-core peak (Blackwell: twice fp8, four times bf16).

What each byte does to a decode step (chapter "Quantization: fewer bytes, more
tokens" derives all of it):

Every function takes a model and an accelerator (or a Deployment), then its
own arguments, then ``scheme=`` and the other deployment settings as keyword
options; the scheme sets the deployment's three data types.

* the TPOT floor (batch 1) is the weight read, Q_w / W with
  Q_w = (P_mm + D) b_w (every matmul weight once, one row of the input
  embedding), plus one cache: it falls with b_w (:func:`tpot_floor`);
* the knee B* = T_w / c_lin = (R b_w / 2) / (1 - R b_w D / (2 P_mm)), R = F / W,
  about R b_w / 2, falls with b_w (weight-only quantization turns decode
  compute-bound at a *smaller* batch) and rises with F (fp8 math doubles F and
  moves it back);
* the memory wall (u M - P b_w) / (S k) rises as either shrinks (the stored
  weights, embedding table included);
* under a TPOT SLO tau, the throughput of the bandwidth-bound regime is
  W x (tokens per byte read) (:func:`tokens_per_byte`), so fewer bytes give more
  tokens at the same latency (:func:`throughput_at_tpot_slo`); past the knee it is
  1 / (2 P_mm / F + S k / W), which weight-only quantization cannot raise.

Not modelled: dequantization overhead inside the kernels, the group scales of
int4/int8 checkpoints (except in :func:`checkpoint_weight_bytes`; the block
scales of NVFP4 and MXFP4 are part of their bytes per weight), accuracy. The step times are the
library's physical bounds (``mfu = mbu = 1`` by default).

Examples
--------
>>> get_scheme("W4A16")
Scheme(name='W4A16', weight_dtype='int4', kv_dtype='bf16', compute_dtype='bf16')
>>> round(scheme_step_time("Llama-3.1-8B", "H100", 1, 0, scheme="W4A16") * 1e3, 2)   # ms: 3.75 GB / 3.35 TB/s
1.12
>>> max_batch_at_tpot_slo("Llama-3.1-8B", "H100", 4096, tpot_slo=0.050, scheme="W16A16+KV8")
208
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ._validation import (check_fraction, check_instance, check_integer, check_positive, check_scalar, scalar_or_array,
                          unknown_name)
from .datatypes import bytes_per_element, check_dtype
from .decode import decode_step_time, knee_batch_size
from .deployment import Deployment, deployment_function
from .hardware import get_accelerator
from .memory import (DEFAULT_GPU_MEMORY_UTILIZATION, DEFAULT_RESERVE_BYTES, kv_bytes_per_token_per_gpu,
                     max_batch_size, usable_memory, weight_bytes_per_gpu)
from .models import check_context_len, get_model, parameter_count
from .slo import binding_limit, max_batch_for_tpot

__all__ = [
    "Scheme",
    "SCHEMES",
    "get_scheme",
    "default_schemes",
    "scheme_step_time",
    "tpot_floor",
    "scheme_knee",
    "scheme_max_batch",
    "memory_sweep_time",
    "tokens_per_byte",
    "max_batch_at_tpot_slo",
    "throughput_at_tpot_slo",
    "compare_schemes",
    "checkpoint_weight_bytes",
    "with_scheme",
]


@dataclass(frozen=True)
class Scheme:
    """Storage and math data types of one quantization scheme.

    Derived in the chapter "Quantization: fewer bytes, more tokens" (notebooks/11_quantization.ipynb).

    Attributes
    ----------
    name : str
        E.g. ``"W4A16+KV8"``.
    weight_dtype : str
        Storage type of the weights (b_w bytes each).
    kv_dtype : str
        Storage type of the KV cache (b_kv bytes per element).
    compute_dtype : str
        Type of the matmuls: picks the accelerator's peak FLOP/s. ``bf16`` for
        weight-only schemes (W8A16, W4A16).
    """

    name: str
    weight_dtype: str
    kv_dtype: str
    compute_dtype: str

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        check_dtype(self.weight_dtype, "weight_dtype")
        check_dtype(self.kv_dtype, "kv_dtype")
        check_dtype(self.compute_dtype, "compute_dtype")

    @property
    def dtypes(self) -> dict:
        """``weight_dtype``, ``kv_dtype``, ``compute_dtype`` as keyword arguments for the library."""
        return {"weight_dtype": self.weight_dtype, "kv_dtype": self.kv_dtype,
                "compute_dtype": self.compute_dtype}

    @property
    def bytes_per_weight(self) -> float:
        return bytes_per_element(self.weight_dtype)

    @property
    def bytes_per_kv_element(self) -> float:
        return bytes_per_element(self.kv_dtype)


_BASE = {  # name -> (weight_dtype, compute_dtype)
    "W16A16": ("bf16", "bf16"),
    "W8A16": ("int8", "bf16"),     # weight-only 8-bit (int8 or fp8 weights: the same bytes)
    "W4A16": ("int4", "bf16"),     # weight-only 4-bit (GPTQ, AWQ with Marlin-style kernels)
    "W8A8-FP8": ("fp8", "fp8"),    # fp8 weights and fp8 math (Hopper, Ada)
    "W8A8-INT8": ("int8", "int8"),  # int8 weights and int8 math (Ampere and later)
    # 4-bit floats with block scales (datatypes.BLOCK_SCALE_BYTES): weight-only, dequantised to bf16
    # (any GPU; e.g. Marlin-style FP4 kernels), or fp4 math on the tensor cores that have it (Blackwell:
    # the catalog's fp4 peak, which NVFP4 and MXFP4 share)
    "W4A16-MXFP4": ("mxfp4", "bf16"),
    "W4A16-NVFP4": ("nvfp4", "bf16"),
    "W4A4-MXFP4": ("mxfp4", "mxfp4"),
    "W4A4-NVFP4": ("nvfp4", "nvfp4"),
}
#: Every named scheme: the nine weight/math choices, each with a bf16 or an fp8 (``+KV8``) cache.
SCHEMES: dict[str, Scheme] = {}
for _name, (_w, _c) in _BASE.items():
    SCHEMES[_name] = Scheme(_name, _w, "bf16", _c)
    SCHEMES[_name + "+KV8"] = Scheme(_name + "+KV8", _w, "fp8", _c)


def get_scheme(scheme) -> Scheme:
    """A :class:`Scheme` from its name (``"W4A16"``, ``"W8A8-FP8+KV8"``); a Scheme passes through.

    Derived in the chapter "Quantization: fewer bytes, more tokens" (notebooks/11_quantization.ipynb).

    Raises
    ------
    KeyError
        For an unknown name, with close matches and the allowed names.

    Examples
    --------
    >>> get_scheme("W8A8-FP8+KV8").dtypes
    {'weight_dtype': 'fp8', 'kv_dtype': 'fp8', 'compute_dtype': 'fp8'}
    """
    if isinstance(scheme, Scheme):
        return scheme
    if not isinstance(scheme, str) or scheme not in SCHEMES:
        raise unknown_name("scheme", scheme, SCHEMES)
    return SCHEMES[scheme]


def default_schemes(accelerator) -> list[str]:
    """The schemes the chapter compares, with the 8-bit (and 4-bit) math the accelerator has.

    Derived in the chapter "Quantization: fewer bytes, more tokens" (notebooks/11_quantization.ipynb).

    W16A16, W8A16, W4A16, W8A8 (FP8 where the accelerator has an fp8 peak,
    else INT8), and W16A16, W4A16, W8A8 with an fp8 KV cache: seven schemes;
    where the accelerator has an fp4 tensor-core peak (B200, GB200) also
    W4A4-NVFP4 and W4A4-NVFP4+KV8, appended (the first seven keep their places).

    >>> default_schemes("A100")[3]
    'W8A8-INT8'
    >>> default_schemes("H100")[3]
    'W8A8-FP8'
    >>> default_schemes("B200")[7:]
    ['W4A4-NVFP4', 'W4A4-NVFP4+KV8']
    """
    acc = get_accelerator(accelerator)
    w8a8 = "W8A8-FP8" if "fp8" in acc.dense_flops else "W8A8-INT8"
    names = ["W16A16", "W8A16", "W4A16", w8a8, "W16A16+KV8", "W4A16+KV8", w8a8 + "+KV8"]
    if "nvfp4" in acc.dense_flops:
        names += ["W4A4-NVFP4", "W4A4-NVFP4+KV8"]
    return names


def _supports(acc, scheme: Scheme) -> None:
    try:
        acc.peak_flops(scheme.compute_dtype)
    except ValueError:
        have = ", ".join(sorted(acc.dense_flops)) or "none"
        raise ValueError(f"scheme {scheme.name!r} computes in {scheme.compute_dtype}, which has no "
                         f"tensor-core peak on {acc.name} (published peaks: {have}); pick another "
                         f"scheme, e.g. one of {', '.join(default_schemes(acc))}") from None


def with_scheme(dep: Deployment, scheme) -> Deployment:
    """The deployment with a scheme's three data types (checked against the accelerator).

    Derived in the chapter "Quantization: fewer bytes, more tokens" (notebooks/11_quantization.ipynb).

    >>> from servingmath.deployment import Deployment
    >>> with_scheme(Deployment.build("Llama-3.1-8B", "H100"), "W8A8-FP8").compute_dtype
    'fp8'
    """
    check_instance("dep", dep, Deployment, "Deployment (Deployment.build(model, accelerator, ...))")
    s = get_scheme(scheme)
    if dep.accelerator is not None:
        _supports(dep.accelerator, s)
    return dep.replace(**s.dtypes)


_SCHEME_DTYPES = ("weight_dtype", "kv_dtype", "compute_dtype")


def _scheme_function(func):
    """:func:`~servingmath.deployment.deployment_function` that refuses the data types as keyword options.

    The scheme sets all three data types, so a ``weight_dtype=`` (or ``kv_dtype=``,
    ``compute_dtype=``) next to it would be silently replaced; it is refused instead.
    """
    wrapped = deployment_function(func)

    @functools.wraps(wrapped)
    def wrapper(*args, **kwargs):
        for name in _SCHEME_DTYPES:
            if name in kwargs:
                raise ValueError(f"{func.__name__}: {name} is set by the scheme; give scheme= (a Scheme or "
                                 f"a name such as 'W4A16'), not {name}={kwargs[name]!r}")
        return wrapped(*args, **kwargs)

    sig = wrapped.__signature__
    wrapper.__signature__ = sig.replace(parameters=[p for p in sig.parameters.values()
                                                    if p.name not in _SCHEME_DTYPES])
    return wrapper


@_scheme_function
def scheme_step_time(dep: Deployment, batch_size, context_len, *, scheme="W16A16"):
    """Seconds per decode step (the TPOT) of ``batch_size`` sequences under a quantization scheme.

    Parameters
    ----------
    model, accelerator : or one Deployment
    batch_size, context_len
        As in :func:`servingmath.decode.decode_step_time`.
    scheme : str or Scheme
        Sets ``weight_dtype``, ``kv_dtype`` and ``compute_dtype`` (see :data:`SCHEMES`).
    Other deployment settings as keyword options. The all-reduces carry bf16
    activations by default (``allreduce_dtype``): fp8 and int8 GEMMs write bf16 outputs.

    Returns
    -------
    float or ndarray

    Notes
    -----
    Hybrid: T(B) = max((P_mm + B D) b_w / W, 2 P_mm B / F_c) + max(B S k / W, 4 L H d_h S B / F_c)
    + T_comm + T_oh, every term but T_oh divided by N, with k = 2 L K d_h b_kv, F_c the peak of the
    compute dtype (times MFU) and W the bandwidth (times MBU). Dequantization
    costs inside the kernels are not modelled. Derived in the chapter "Quantization".

    Examples
    --------
    >>> round(scheme_step_time("Llama-3.1-8B", "H100", 64, 4096, scheme="W16A16") * 1e3, 2)
    14.74
    >>> round(scheme_step_time("Llama-3.1-8B", "H100", 64, 4096, scheme="W4A16+KV8") * 1e3, 2)
    6.25
    """
    return decode_step_time(with_scheme(dep, scheme), batch_size, context_len)


@_scheme_function
def tpot_floor(dep: Deployment, context_len, *, scheme="W16A16"):
    """The fastest TPOT a scheme allows: the step time at batch 1, in seconds.

    At batch 1 a decode step is bound by the bytes it reads, so the floor is
    about ((P_mm + D) b_w + S k) / W: halving b_w nearly halves it (at short contexts).
    Derived in the chapter "Quantization".

    >>> round(tpot_floor("Llama-3.1-70B", "H100", 4096, scheme="W4A16", tensor_parallel=4) * 1e3, 2)
    2.7
    """
    return decode_step_time(with_scheme(dep, scheme), 1, context_len)


@_scheme_function
def scheme_knee(dep: Deployment, context_len=0, *, scheme="W16A16"):
    """The knee B* of decode under a scheme (:func:`servingmath.decode.knee_batch_size`).

    Notes
    -----
    Hybrid: T_w = (P_mm + B D) b_w / W meets T_lin = 2 P_mm B / F_c at
    B* = (R b_w / 2) / (1 - R b_w D / (2 P_mm)), R = F_c / W the ridge point of
    the compute dtype: about R b_w / 2, independent of the context and of the KV data type. Weight-only 8-bit
    halves it, int4 quarters it; W8A8 (F_c doubled, b_w halved) leaves it where
    bf16 had it. Derived in the chapter "Quantization".

    Examples
    --------
    >>> round(scheme_knee("Llama-3.1-8B", "H100", scheme="W4A16"), 1)
    73.8
    >>> [round(scheme_knee("Llama-3.1-8B", "H100", scheme=s), 1) for s in ("W16A16", "W4A16", "W8A8-FP8")]
    [295.3, 73.8, 295.3]
    """
    return knee_batch_size(with_scheme(dep, scheme), context_len)


@_scheme_function
def scheme_max_batch(dep: Deployment, context_len, *, scheme="W16A16", block_size=1):
    """The memory wall under a scheme: :func:`servingmath.memory.max_batch_size` with its dtypes.

    B_mem = floor((u M - P b_w / N) / (S k / N)) (the stored weights, embedding table included); the memory settings
    (``gpu_memory_utilization``, ``reserve_bytes``, ...) are deployment options.
    Derived in the chapter "Quantization".

    >>> scheme_max_batch("Llama-3.1-8B", "H100", 4096, scheme="W4A16")
    126
    >>> [scheme_max_batch("Llama-3.1-8B", "H100", 4096, scheme=s) for s in ("W16A16", "W4A16", "W16A16+KV8")]
    [104, 126, 208]
    """
    s = get_scheme(scheme)
    return max_batch_size(dep.replace(**s.dtypes), context_len, block_size=block_size)


def memory_sweep_time(accelerator, *, gpu_memory_utilization=DEFAULT_GPU_MEMORY_UTILIZATION,
                      reserve_bytes=DEFAULT_RESERVE_BYTES, memory_bytes=None, mbu=1.0):
    """Seconds to read once all the memory a server may fill: (u M - R) / (W x MBU).

    At the memory wall a bandwidth-bound decode step reads the weights and
    every cache, i.e. (almost) all of that memory, so its TPOT is this time
    **whatever the data types**: quantization changes how many sequences share
    the sweep, not how long it takes. A TPOT SLO above it cannot bind before
    the memory wall does (while the step stays bandwidth-bound). Derived in the
    chapter "Quantization".

    Examples
    --------
    >>> round(memory_sweep_time("H100", mbu=0.8) * 1e3, 1)   # ms
    26.9
    >>> [round(memory_sweep_time(g) * 1e3, 1) for g in ("H100", "A100", "L40S")]   # ms
    [21.5, 35.3, 50.0]
    """
    acc = get_accelerator(accelerator)
    u = check_fraction("mbu", mbu)
    usable = usable_memory(acc, gpu_memory_utilization=gpu_memory_utilization, reserve_bytes=reserve_bytes,
                           memory_bytes=memory_bytes)
    return scalar_or_array(np.asarray(usable) / (acc.memory_bandwidth * u))


def tokens_per_byte(model, batch_size, context_len, *, scheme="W16A16", tensor_parallel=1):
    """Output tokens per byte a decode step reads from each GPU's memory: B / (W_gpu + B S k_gpu).

    In the bandwidth-bound regime the throughput is W x MBU x this ratio, so
    at a fixed step time (a TPOT SLO) fewer bytes per weight or per KV element
    mean more tokens. W_gpu is what one GPU reads of the weights (the input
    embedding table is gathered, not read: :mod:`servingmath.step`) and k_gpu
    its share of a token's KV. Derived in the chapter "Quantization".

    Examples
    --------
    >>> round(tokens_per_byte("Llama-3.1-8B", 64, 4096, scheme="W16A16") * 1e9, 2)    # tokens per GB
    1.3
    >>> round(tokens_per_byte("Llama-3.1-8B", 64, 4096, scheme="W4A16+KV8") * 1e9, 2)
    3.06
    """
    from .step import Iteration, iteration_work

    s = get_scheme(scheme)
    model = get_model(model)
    b = check_integer("batch_size", batch_size, minimum=1)
    check_context_len(model, context_len)
    dep = Deployment(model=model, accelerator=None, tensor_parallel=tensor_parallel, **s.dtypes)
    work = iteration_work(dep, Iteration.decode(model, sequences=b, context_len=context_len))
    return scalar_or_array(b / np.asarray(work.memory_bytes))


@_scheme_function
def max_batch_at_tpot_slo(dep: Deployment, context_len, *, tpot_slo, scheme="W16A16", max_batch=None):
    """The operating batch under a TPOT SLO: the largest B that fits in memory with T(B) <= tau.

    B_op = min(B_SLO, B_mem), with B_SLO the largest batch whose step time
    (:func:`scheme_step_time`) meets ``tpot_slo`` and B_mem the memory wall
    (:func:`scheme_max_batch`), unless ``max_batch`` gives another cap:
    :func:`servingmath.slo.max_batch_for_tpot` (the library's one search) with
    the memory wall as its cap.

    Parameters
    ----------
    model, accelerator : or one Deployment
    context_len : int
        A scalar.
    tpot_slo : float or array
        tau in seconds (an array gives one batch per target).
    scheme : str or Scheme
    max_batch : int, optional
        The cap; default the memory wall under the scheme.

    Returns
    -------
    int or ndarray of int
        0 when not one sequence fits, or when one sequence already misses tau.
        Derived in the chapter "Quantization".

    Examples
    --------
    >>> max_batch_at_tpot_slo("Llama-3.1-70B", "A100", 4096, tpot_slo=0.050, scheme="W4A16", tensor_parallel=4)
    172
    >>> max_batch_at_tpot_slo("Llama-3.1-70B", "A100", 4096, tpot_slo=0.050, scheme="W8A8-INT8", tensor_parallel=4)
    162
    """
    check_scalar("context_len", context_len)
    dep = with_scheme(dep, scheme)
    cap = int(max_batch_size(dep, context_len)) if max_batch is None else max_batch
    return max_batch_for_tpot(dep, context_len, tpot_slo=tpot_slo, max_batch=cap, method="numeric")


@_scheme_function
def throughput_at_tpot_slo(dep: Deployment, context_len, *, tpot_slo, scheme="W16A16", max_batch=None):
    """Output tokens/s of the instance at the best batch that meets the TPOT SLO and fits in memory.

    X(tau) = B_op / T(B_op), with B_op from :func:`max_batch_at_tpot_slo`; 0 where
    B_op = 0. In a decode-only steady state every token it counts meets the
    target, so this is the token goodput at that SLO. Divide by
    ``tensor_parallel`` for tokens/s per GPU.

    Notes
    -----
    Bandwidth-bound edge (B_op = B_SLO below the knee): X = (tau W - P_mm b_w) / (tau (S k + D b_w)),
    that is W x tokens per byte read. Compute-bound (past the knee):
    X = 1 / (2 P_mm / F_c + S k / W), independent of b_w. At the memory wall:
    X = B_mem / T(B_mem), about B_mem x W / (u M) while bandwidth-bound.
    Derived in the chapter "Quantization".

    Examples
    --------
    >>> round(throughput_at_tpot_slo("Llama-3.1-8B", "H100", 4096, tpot_slo=0.050, scheme="W4A16"))
    5700
    >>> [round(throughput_at_tpot_slo("Llama-3.1-8B", "H100", 4096, tpot_slo=0.050, scheme=s))
    ...  for s in ("W16A16", "W4A16", "W16A16+KV8")]
    [4918, 5700, 9835]
    """
    b = np.asarray(max_batch_at_tpot_slo(dep, context_len, tpot_slo=tpot_slo, scheme=scheme, max_batch=max_batch))
    safe = np.maximum(b, 1)
    t = np.asarray(scheme_step_time(dep, safe, context_len, scheme=scheme))
    return scalar_or_array(np.where(b > 0, b / t, 0.0))


def _limit(b_op, b_mem):
    """The binding limit of a scheme's operating batch (:func:`servingmath.slo.binding_limit`)."""
    if b_mem == 0:
        return "weights leave no room"
    if b_op == 0:
        return "SLO below the floor"
    return binding_limit({"memory": b_mem, "TPOT SLO": b_op}, order=("memory", "TPOT SLO"))[1]


@_scheme_function
def compare_schemes(dep: Deployment, context_len, *, tpot_slo, schemes=None) -> list[dict]:
    """One row per scheme: TPOT floor, knee, memory wall and throughput at a TPOT SLO.

    Parameters
    ----------
    model, accelerator : or one Deployment (its data types are replaced by each scheme's)
    context_len : int
        Tokens in each sequence's KV cache.
    tpot_slo : float
        tau in seconds.
    schemes : list of str or Scheme, optional
        Default :func:`default_schemes` of the accelerator.

    Returns
    -------
    list of dict
        Keys: ``scheme``, ``weight_dtype``, ``kv_dtype``, ``compute_dtype``,
        ``weight_bytes_per_gpu`` (B), ``tpot_floor`` (s, batch 1), ``knee`` (B*, hybrid),
        ``max_batch`` (memory wall), ``batch`` (operating batch: the largest that fits
        and meets tau),
        ``tpot`` (s, at ``batch``; nan when 0), ``throughput`` (tok/s of the instance),
        ``throughput_per_gpu``, ``limit`` ("memory" when the whole wall meets tau,
        "TPOT SLO" when tau stops the batch first, "SLO below the floor" or "weights
        leave no room") and ``past_knee`` (the operating batch is past the knee B*).
        Derived in the chapter "Quantization".

    Examples
    --------
    >>> rows = compare_schemes("Llama-3.1-8B", "H100", 4096, tpot_slo=0.050)
    >>> [(r["scheme"], r["max_batch"], round(r["throughput"])) for r in rows[:3]]
    [('W16A16', 104, 4918), ('W8A16', 119, 5584), ('W4A16', 126, 5700)]
    """
    check_scalar("context_len", context_len)
    check_scalar("tpot_slo", tpot_slo)
    if not dep.is_scalar:
        raise ValueError("compare_schemes takes one configuration: give scalar deployment settings")
    check_positive("tpot_slo", tpot_slo)
    names = default_schemes(dep.accelerator) if schemes is None else list(schemes)
    if not names:
        raise ValueError("schemes must name at least one scheme")
    rows = []
    n = dep.tensor_parallel
    for name in names:
        s = get_scheme(name)
        d = with_scheme(dep, s)
        wall = int(max_batch_size(d, context_len))
        b_op = int(max_batch_for_tpot(d, context_len, tpot_slo=tpot_slo, max_batch=wall, method="numeric"))
        knee = knee_batch_size(d, context_len)
        tpot = decode_step_time(d, b_op, context_len) if b_op else float("nan")
        x = b_op / tpot if b_op else 0.0
        rows.append({
            "scheme": s.name, **s.dtypes,
            "weight_bytes_per_gpu": float(weight_bytes_per_gpu(d.model, weight_dtype=s.weight_dtype,
                                                               tensor_parallel=n)),
            "tpot_floor": decode_step_time(d, 1, context_len),
            "knee": knee, "max_batch": wall, "batch": b_op, "tpot": tpot,
            "throughput": x, "throughput_per_gpu": x / n,
            "limit": _limit(b_op, wall), "past_knee": bool(b_op > knee),
        })
    return rows


def checkpoint_weight_bytes(model, *, weight_dtype="int4", group_size=128, scale_dtype="bf16",
                            unquantized_dtype="bf16"):
    """Bytes of a real quantized checkpoint: body weights quantized in groups, embeddings kept.

    Derived in the chapter "Quantization: fewer bytes, more tokens" (notebooks/11_quantization.ipynb).

    Common weight-only checkpoints (GPTQ, AWQ, llm-compressor's W4A16/W8A16)
    quantize only the linear layers of the transformer blocks; the input
    embedding and the LM head stay in 16 bits, and every group of
    ``group_size`` weights carries one scale. :func:`servingmath.models.weight_bytes`
    stores everything in one type, which underestimates small models with big
    vocabularies.

    Parameters
    ----------
    model : str or ModelConfig
    weight_dtype : str
        Type of the quantized body weights.
    group_size : int or None
        Weights per scale; ``None`` for one scale per output channel (negligible bytes).
    scale_dtype, unquantized_dtype : str
        Type of the scales, and of the embedding and LM head.

    Returns
    -------
    float
        Bytes. (Norm weights, a few per layer, are counted as quantized: < 0.01 %.)

    Notes
    -----
    M_w = (P - P_emb) (b_w + b_scale / g) + P_emb b_16, with P_emb the input
    embedding plus the (untied) LM head.

    References
    ----------
    Neural Magic, model card of ``Meta-Llama-3-8B-Instruct-quantized.w8a16`` (2024-07-02):
    "Only the weights of the linear operators within transformers blocks are quantized."

    Examples
    --------
    >>> round(checkpoint_weight_bytes("Llama-3.1-8B") / 1e9, 2)   # GB; all-int4 would be 4.02
    5.7
    >>> round(checkpoint_weight_bytes("Llama-3.1-70B") / 1e9, 2)
    39.5
    """
    model = get_model(model)
    check_dtype(weight_dtype, "weight_dtype")
    check_dtype(scale_dtype, "scale_dtype")
    check_dtype(unquantized_dtype, "unquantized_dtype")
    if group_size is None:
        per_weight = bytes_per_element(weight_dtype)
    else:
        g = float(check_integer("group_size", group_size, minimum=1))
        per_weight = bytes_per_element(weight_dtype) + bytes_per_element(scale_dtype) / g
    embedding = model.vocab_size * model.hidden_size * (1 if model.tied_embeddings else 2)
    body = parameter_count(model) - embedding
    return float(body * per_weight + embedding * bytes_per_element(unquantized_dtype))

