"""Pareto fronts: which serving configurations are worth running, and which are dominated.

A configuration (model, accelerator, tensor-parallel degree, data types, batch
size) gives one point (TPOT, throughput per GPU). Lower TPOT is better, higher
throughput is better. Point *a* **dominates** point *b* when *a* is at least as
good on both objectives and strictly better on one; the **Pareto front** is the
set of points that no other point dominates. Every point off the front can be
replaced by a front point that is better on one count and no worse on the other.

:func:`pareto_mask` finds the front of n points in O(n log n): sort by the
first objective, then keep a running best of the second. It handles a million
candidates in well under a second. :func:`decode_design_space` builds the
candidate points of a whole design space from the decode step-time model.

Conventions
-----------
* Objectives are minimised or maximised, per objective: ``sense=("min", "max")``
  (the default) reads (TPOT, throughput).
* Ties: two identical points do not dominate each other, so both are on the
  front. A point equal to another on one objective and worse on the other is
  dominated.
* Throughput per GPU = B / (T(B) x N): output tokens per second of one model
  instance divided by its N GPUs.

Examples
--------
>>> tpot = [0.020, 0.025, 0.030, 0.030]
>>> tokens_per_s = [2000, 1800, 2600, 2500]
>>> pareto_mask(tpot, tokens_per_s)
array([ True, False,  True, False])
>>> pareto_front(tpot, tokens_per_s)
array([0, 2])
"""

from __future__ import annotations

import numpy as np

from ._validation import as_array, check_broadcast, check_choice, check_integer, check_scalar
from .datatypes import check_dtype
from .decode import decode_step_time
from .deployment import DEPLOYMENT_OPTIONS, Deployment, auto_compute_dtype, deployment_function
from .hardware import get_accelerator
from .memory import DEFAULT_GPU_MEMORY_UTILIZATION, max_batch_size
from .models import get_model
from .prefill import prefill_time

__all__ = [
    "SENSES",
    "dominates",
    "pareto_mask",
    "pareto_front",
    "compute_dtype_for",
    "decode_curve",
    "prefill_curve",
    "decode_design_space",
]

SENSES = ("min", "max")


def _check_sense(sense) -> tuple[str, str]:
    if isinstance(sense, str) or len(sense) != 2:
        raise ValueError(f"sense must be a pair such as ('min', 'max'), one per objective, got {sense!r}")
    return (check_choice("sense[0]", sense[0], SENSES), check_choice("sense[1]", sense[1], SENSES))


def _round_significant(v, digits):
    """Round every element to ``digits`` significant digits (0 stays 0)."""
    out = v.copy()
    nz = v != 0
    scale = 10.0 ** (np.floor(np.log10(np.abs(v[nz]))) - (digits - 1))
    out[nz] = np.round(v[nz] / scale) * scale
    return out


def _objectives(x, y, sense, significant_digits=None):
    """Both objectives as 1-D float arrays to be minimised."""
    sx, sy = _check_sense(sense)
    xs = as_array("x", x)
    ys = as_array("y", y)
    if xs.ndim > 1 or ys.ndim > 1:
        raise ValueError(f"x and y must be 1-D arrays of the candidates' objectives, "
                         f"got shapes {xs.shape} and {ys.shape}")
    xs, ys = np.atleast_1d(xs), np.atleast_1d(ys)
    if xs.shape != ys.shape:
        raise ValueError(f"x and y must have the same length, got {xs.size} and {ys.size}")
    if significant_digits is not None:
        d = int(check_integer("significant_digits", significant_digits, minimum=1))
        xs, ys = _round_significant(xs, d), _round_significant(ys, d)
    return (xs if sx == "min" else -xs), (ys if sy == "min" else -ys)


def _point(name, value):
    arr = as_array(name, value)
    if arr.shape != (2,):
        raise ValueError(f"{name} must be one point (x, y) of two numbers, got {value!r:.60}")
    return arr


def dominates(a, b, sense=("min", "max")) -> bool:
    """True when point ``a`` = (x, y) dominates point ``b``: no worse on both, better on one.

    Derived in the chapter "The Pareto frontier" (notebooks/06_pareto_frontier.ipynb).

    >>> dominates((0.020, 2000), (0.025, 1800))     # faster and more throughput
    True
    >>> dominates((0.020, 2000), (0.030, 2600))     # a trade, not a domination
    False
    >>> dominates((0.020, 2000), (0.020, 2000))     # equal points do not dominate
    False
    """
    a, b = _point("a", a), _point("b", b)
    ax, ay = _objectives([a[0]], [a[1]], sense)
    bx, by = _objectives([b[0]], [b[1]], sense)
    no_worse = ax[0] <= bx[0] and ay[0] <= by[0]
    better = ax[0] < bx[0] or ay[0] < by[0]
    return bool(no_worse and better)


def pareto_mask(x, y, sense=("min", "max"), significant_digits=None) -> np.ndarray:
    """Boolean mask of the non-dominated points among candidates (x[i], y[i]).

    Derived in the chapter "The Pareto frontier" (notebooks/06_pareto_frontier.ipynb).

    Parameters
    ----------
    x, y : array_like, 1-D, same length
        The two objectives of each candidate (e.g. TPOT in s, throughput in tok/s).
    sense : pair of {"min", "max"}
        Whether each objective is minimised or maximised. Default
        ``("min", "max")``: low x (latency) and high y (throughput) are good.
    significant_digits : int, optional
        Round both objectives to this many significant digits before comparing,
        so that values equal up to floating-point rounding count as ties (two
        throughputs B / (B c) that should both be 1 / c can differ in the last
        bit and leave a dominated point on the front). Default: exact comparison.

    Returns
    -------
    ndarray of bool
        ``True`` for the points on the Pareto front.

    Notes
    -----
    Turn both objectives into "smaller is better" and sort by x. A point is
    dominated exactly when some point with a strictly smaller x has a y no
    larger (the running minimum of y over all earlier x groups), or when a
    point with the same x has a strictly smaller y (the minimum of its x
    group). Sorting costs O(n log n); the rest is O(n) and vectorised
    (``np.minimum.reduceat`` per x group, ``np.minimum.accumulate`` across groups).

    References
    ----------
    H. T. Kung, F. Luccio, F. P. Preparata, "On finding the maxima of a set of
    vectors", J. ACM 22(4), 1975 (the O(n log n) algorithm in two dimensions).

    Examples
    --------
    >>> pareto_mask([1, 2, 3], [1, 2, 3], sense=("min", "min"))
    array([ True, False, False])
    >>> pareto_mask([1, 1, 2], [5, 5, 4])     # duplicates both stay on the front
    array([ True,  True, False])
    """
    xs, ys = _objectives(x, y, sense, significant_digits)
    n = xs.size
    if n == 0:
        return np.zeros(0, dtype=bool)
    order = np.argsort(xs)
    sx, sy = xs[order], ys[order]
    starts = np.flatnonzero(np.r_[True, sx[1:] != sx[:-1]])   # first index of each x group
    group = np.cumsum(np.r_[True, sx[1:] != sx[:-1]]) - 1     # group number of each point
    group_min = np.minimum.reduceat(sy, starts)                 # best y within each x group
    best_before = np.r_[np.inf, np.minimum.accumulate(group_min)[:-1]]  # best y at smaller x
    dominated = (best_before[group] <= sy) | (sy > group_min[group])
    mask = np.empty(n, dtype=bool)
    mask[order] = ~dominated
    return mask


def pareto_front(x, y, sense=("min", "max"), significant_digits=None) -> np.ndarray:
    """Indices of the front points, ordered by the first objective (best first).

    Derived in the chapter "The Pareto frontier" (notebooks/06_pareto_frontier.ipynb).

    Parameters as in :func:`pareto_mask`.

    >>> pareto_front([3, 1, 2], [30, 10, 20])       # all three trade: order by TPOT
    array([1, 2, 0])
    >>> pareto_front([3, 1, 2], [30, 10, 5])
    array([1, 0])
    """
    mask = pareto_mask(x, y, sense, significant_digits)
    xs, ys = _objectives(x, y, sense, significant_digits)
    idx = np.flatnonzero(mask)
    return idx[np.lexsort((ys[idx], xs[idx]))]


def compute_dtype_for(weight_dtype: str, accelerator) -> str:
    """The matmul data type a server would use for weights stored in ``weight_dtype``.

    Derived in the chapter "The Pareto frontier" (notebooks/06_pareto_frontier.ipynb).

    :func:`servingmath.deployment.auto_compute_dtype` (``compute_dtype="auto"``):
    fp8 weights compute in fp8 where the accelerator has fp8 tensor cores
    (H100, H200, L40S, MI300X: "W8A8-FP8"); everything else is weight-only
    quantisation that dequantises to bf16 and computes in bf16 (int8/int4
    "W8A16"/"W4A16", fp8 on an A100).

    >>> compute_dtype_for("fp8", "H100"), compute_dtype_for("fp8", "A100"), compute_dtype_for("int4", "H100")
    ('fp8', 'bf16', 'bf16')
    """
    return auto_compute_dtype(weight_dtype, get_accelerator(accelerator))


@deployment_function
def decode_curve(dep: Deployment, batch_sizes, context_len) -> dict:
    """The decode trade-off curve of one configuration as B sweeps: (TPOT(B), throughput(B)).

    Derived in the chapter "The Pareto frontier" (notebooks/06_pareto_frontier.ipynb).

    Parameters
    ----------
    model, accelerator : or one Deployment
    batch_sizes : array of int
    context_len : int
    Deployment settings as keyword options (data types, tensor_parallel, mfu, mbu, overlap, ...).

    Returns
    -------
    dict of ndarray
        ``batch_size``, ``tpot`` (s), ``throughput`` (output tok/s of the
        instance) and ``throughput_per_gpu`` (divided by ``tensor_parallel``).

    Examples
    --------
    >>> c = decode_curve("Llama-3.1-8B", "H100", [1, 64], 2048)
    >>> [round(float(t) * 1e3, 2) for t in c["tpot"]], [round(float(x)) for x in c["throughput"]]
    ([4.56, 9.61], [219, 6660])
    """
    b = check_integer("batch_sizes", np.atleast_1d(batch_sizes), minimum=1)
    check_broadcast(batch_sizes=b, context_len=context_len)
    n = np.asarray(dep.tensor_parallel, dtype=float)
    t = np.asarray(decode_step_time(dep, b, context_len), dtype=float)
    return {"batch_size": b.astype(np.int64), "tpot": t, "throughput": b / t,
            "throughput_per_gpu": b / t / n}


@deployment_function
def prefill_curve(dep: Deployment, prompt_len, batch_sizes) -> dict:
    """The prefill trade-off as the number of prompts batched together sweeps.

    Derived in the chapter "The Pareto frontier" (notebooks/06_pareto_frontier.ipynb).

    A batch of B prompts finishes its prefill together, so every prompt's first
    token waits for the whole batch: TTFT(B) = prefill_time(B) (no queueing).

    Returns
    -------
    dict of ndarray
        ``batch_size``, ``ttft`` (s), ``throughput`` (prompt tok/s of the
        instance: B x L_p / TTFT) and ``throughput_per_gpu``.

    Examples
    --------
    >>> c = prefill_curve("Llama-3.1-8B", "H100", 2048, [1, 8])
    >>> [round(float(t) * 1e3, 1) for t in c["ttft"]], [round(float(x)) for x in c["throughput"]]
    ([30.0, 240.1], [68249, 68249])
    """
    b = check_integer("batch_sizes", np.atleast_1d(batch_sizes), minimum=1)
    n = np.asarray(dep.tensor_parallel, dtype=float)
    lp = float(check_integer("prompt_len", prompt_len, minimum=1, scalar=True))
    t = np.asarray(prefill_time(dep, prompt_len, batch_size=b), dtype=float)
    return {"batch_size": b.astype(np.int64), "ttft": t, "throughput": b * lp / t,
            "throughput_per_gpu": b * lp / t / n}


def _names(name, value):
    if isinstance(value, str) or not np.iterable(value):
        value = [value]
    value = list(value)
    if not value:
        raise ValueError(f"{name} must name at least one choice, got an empty list")
    return value


def decode_design_space(models, accelerators, batch_sizes, context_len, *, tensor_parallel=(1,),
                        weight_dtypes=("bf16",), kv_dtypes=("bf16",),
                        gpu_memory_utilization=DEFAULT_GPU_MEMORY_UTILIZATION,
                        include_infeasible: bool = False, **options) -> dict:
    """Every decode configuration of a design space, with its TPOT and throughput per GPU.

    Derived in the chapter "The Pareto frontier" (notebooks/06_pareto_frontier.ipynb).

    The space is the product models x accelerators x weight data types x KV
    data types x tensor-parallel degrees x batch sizes. Each point is scored
    with :func:`servingmath.decode.decode_step_time` at ``context_len`` and
    checked against the memory wall (:func:`servingmath.memory.max_batch_size`
    with sequences of ``context_len`` tokens).

    Parameters
    ----------
    models, accelerators : str or list of str
    batch_sizes : array of int
    context_len : int
        Tokens in each sequence's KV cache (used for both the step time and the memory check).
    tensor_parallel : int or list of int
        Degrees that do not split a model's heads evenly are skipped for that model.
    weight_dtypes, kv_dtypes : str or list of str
        The matmuls run in :func:`compute_dtype_for` (fp8 on fp8-capable GPUs, else bf16).
    gpu_memory_utilization : float
        Share of each GPU's memory for weights and KV cache (vLLM's default 0.9).
    include_infeasible : bool
        Keep points whose KV cache does not fit (``fits`` is then False for them).
    **options
        Other deployment settings (``mfu``, ``mbu``, ``overlap``, ``allreduce_latency``, ...).

    Returns
    -------
    dict of 1-D arrays, one entry per point
        ``model``, ``accelerator``, ``weight_dtype``, ``kv_dtype`` (str),
        ``tensor_parallel``, ``batch_size``, ``max_batch`` (int), ``tpot`` (s),
        ``throughput`` (tok/s of the instance), ``throughput_per_gpu``, ``fits`` (bool).

    Examples
    --------
    >>> s = decode_design_space("Llama-3.1-70B", "H100", [1, 64], 2048, tensor_parallel=[1, 4])
    >>> s["tensor_parallel"].tolist(), s["batch_size"].tolist()   # TP 1 does not fit 141 GB
    ([4, 4], [1, 64])
    """
    for name in options:
        if name not in DEPLOYMENT_OPTIONS or name in ("weight_dtype", "kv_dtype", "compute_dtype",
                                                       "tensor_parallel", "gpu_memory_utilization"):
            raise ValueError(f"unknown or duplicated option {name!r} for decode_design_space; allowed: "
                             + ", ".join(sorted(DEPLOYMENT_OPTIONS - {"weight_dtype", "kv_dtype", "compute_dtype",
                                                                        "tensor_parallel", "gpu_memory_utilization"})))
    b = check_integer("batch_sizes", np.atleast_1d(batch_sizes), minimum=1).astype(np.int64)
    check_scalar("context_len", context_len)
    tps = check_integer("tensor_parallel", np.atleast_1d(tensor_parallel), minimum=1).astype(np.int64)
    columns = {k: [] for k in ["model", "accelerator", "weight_dtype", "kv_dtype", "tensor_parallel",
                               "batch_size", "max_batch", "tpot", "throughput", "throughput_per_gpu",
                               "fits"]}
    for model_name in _names("models", models):
        model = get_model(model_name)
        h, k = model.n_heads, model.n_kv_heads
        valid = np.array([t for t in tps if h % t == 0 and (k % t == 0 or t % k == 0)], dtype=np.int64)
        if valid.size == 0:
            continue
        for acc_name in _names("accelerators", accelerators):
            acc = get_accelerator(acc_name)
            for wd in _names("weight_dtypes", weight_dtypes):
                compute = compute_dtype_for(wd, acc)
                for kd in _names("kv_dtypes", kv_dtypes):
                    check_dtype(kd, "kv_dtypes")
                    b_max = np.asarray(max_batch_size(model, acc, context_len, weight_dtype=wd,
                                                      kv_dtype=kd, tensor_parallel=valid,
                                                      gpu_memory_utilization=gpu_memory_utilization),
                                       dtype=np.int64)
                    grid_b, grid_n = np.meshgrid(b, valid, indexing="ij")
                    grid_max = np.broadcast_to(b_max, grid_b.shape)
                    fits = grid_b <= grid_max
                    keep = np.ones_like(fits) if include_infeasible else fits
                    if not np.any(keep):
                        continue
                    bb, nn = grid_b[keep], grid_n[keep]
                    t = np.asarray(decode_step_time(model, acc, bb, context_len, weight_dtype=wd,
                                                    kv_dtype=kd, compute_dtype=compute,
                                                    tensor_parallel=nn, **options), dtype=float)
                    m = bb.size
                    columns["model"].append(np.full(m, model.name, dtype=object))
                    columns["accelerator"].append(np.full(m, acc.name, dtype=object))
                    columns["weight_dtype"].append(np.full(m, wd, dtype=object))
                    columns["kv_dtype"].append(np.full(m, kd, dtype=object))
                    columns["tensor_parallel"].append(nn)
                    columns["batch_size"].append(bb)
                    columns["max_batch"].append(grid_max[keep])
                    columns["tpot"].append(t)
                    columns["throughput"].append(bb / t)
                    columns["throughput_per_gpu"].append(bb / t / nn)
                    columns["fits"].append(fits[keep])
    empty = {"model": object, "accelerator": object, "weight_dtype": object, "kv_dtype": object,
             "tensor_parallel": np.int64, "batch_size": np.int64, "max_batch": np.int64,
             "tpot": float, "throughput": float, "throughput_per_gpu": float, "fits": bool}
    return {k: (np.concatenate(v) if v else np.zeros(0, dtype=empty[k])) for k, v in columns.items()}
