"""Capacity planning: from traffic and SLOs to accelerators, replicas and cost per million tokens.

The pipeline of the chapter "Capacity planning", one function per step:

1. **per-replica capacity** (:func:`replica_capacity`): the highest request
   rate one model instance (one replica of N GPUs) serves while its
   closed-form P99 TTFT and its TPOT meet their targets, within its memory
   and its batch cap. It is the steady-state model of the chapter "SLOs and
   goodput" (:func:`servingmath.slo.steady_state`) for a *mix* of requests:
   each prompt is prefilled alone and first (an M/G/1 queue), the decode
   batch follows from Little's law;
2. **replicas** (:func:`replicas_needed`): ceil(rate / (u x capacity)), u the
   utilisation target that keeps headroom;
3. **cost** (:func:`cost_per_million_tokens`): dollars per hour over output
   tokens per second, scaled to a million tokens;
4. **the design space** (:func:`plan_candidates`, :func:`cheapest_plan`): every
   accelerator x tensor-parallel degree x data types x batch cap, pruned by
   the closed forms and sorted by cost per million output tokens;
5. **confirmation** (:func:`simulate_plan`, :func:`confirm_plan`): the
   discrete-event simulator replays the workload on one replica at its share
   of the traffic and measures the P99 tails the closed forms only estimate.

The replica model, for prompt lengths L_p and output lengths L_o drawn from
the workload (E[.] their means), prefill time t_p(L_p) and decode step time
T(B) at the mean context S-bar:

    rate(B)  = B / ((E[L_o] - 1) T(B) + B E[t_p])     requests/s at mean batch B
    rho      = rate E[t_p]                             share of GPU time in prefill
    TPOT     = T(B) / (1 - rho)                        decode pauses while prefills run
    W        = rate E[t_p^2] / (2 (1 - rho))           M/G/1 mean wait (Pollaczek-Khinchine)
    TTFT_q   = w_q(rho, W) + t_p(L_p at quantile q)    w_q: exponential-tail wait quantile

S-bar is the *length-biased* mean context: a sequence stays in the batch for
L_o - 1 steps, so S-bar = E[(L_o - 1)(L_p + L_o / 2)] / E[L_o - 1], which for
fixed lengths is L_p + L_o / 2. With fixed lengths every formula reduces to
:func:`servingmath.slo.steady_state` (tested).

B is a *mean*: the batch at a random moment is Poisson around it (each
request holds a slot while it decodes, an M/G/infinity queue), so a batch cap
or a KV cache of c slots is planned for the largest mean whose 99th
percentile, B + 2.33 sqrt(B), still fits (:func:`batch_quantile`,
:func:`max_mean_batch`).

Conventions
-----------
* Prices are US dollars per **GPU**-hour; a replica of N GPUs costs N times it.
* Cost per million output tokens charges *all* GPU time to the output tokens
  of the demand actually served (prompt tokens are not billed separately):
  C = 1e6 x replicas x N x price / (3600 x rate x E[L_o]).
* ``mfu = mbu = 1`` (the defaults) give the physical bound: the highest
  capacity and the lowest cost any engine could reach with this model.

Examples
--------
>>> round(cost_per_million_tokens(2.0, 1000.0), 4)     # $2/h at 1000 tok/s
0.5556
>>> replicas_needed(25.0, 10.0, utilisation_target=0.8)   # 25 / 8 = 3.1 -> 4
4
>>> r = replica_capacity("Llama-3.1-8B", "H100", 1024, 256, ttft_slo=1.0, tpot_slo=0.05)
>>> r["batch_size"], r["binding"], r["memory_limit"], round(r["rate"], 2)   # 370 fit; 327 + 2.33 sqrt(327) do
(327, 'memory', 327, 33.24)
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, fields, replace
from pathlib import Path
from statistics import NormalDist

import numpy as np

from ._validation import (check_choice, check_fraction, check_instance, check_integer, check_nonnegative,
                          check_positive, int_or_array, scalar_or_array)
from .datatypes import check_dtype
from .deployment import (DEFAULT_GPU_MEMORY_UTILIZATION, DEPLOYMENT_OPTIONS, OVERLAP_MODELS, Deployment,
                         deployment_function)
from .hardware import get_accelerator
from .memory import max_batch_size
from .models import get_model
from .sharding import valid_tensor_parallel_degrees
from .slo import binding_limit, decode_context, replica_steady_state

__all__ = [
    "SECONDS_PER_HOUR",
    "BINDINGS",
    "DEFAULT_DTYPES",
    "Plan",
    "cost_per_million_tokens",
    "replicas_needed",
    "workload_statistics",
    "batch_quantile",
    "max_mean_batch",
    "replica_curves",
    "replica_capacity",
    "plan_candidates",
    "plan_sweep",
    "reprice",
    "cheapest_plan",
    "load_prices",
    "simulate_plan",
    "confirm_plan",
]

SECONDS_PER_HOUR = 3600.0
#: What limits a replica's batch, in the order ties are reported.
BINDINGS = ("max_batch_size", "memory", "tpot", "ttft")
#: (weight dtype, KV-cache dtype) pairs :func:`plan_candidates` tries by default.
DEFAULT_DTYPES = (("bf16", "bf16"), ("fp8", "fp8"))
# ceil() of a quotient that should be whole can land just above it (3.0000000000000004)
_CEIL_NUDGE = 1e-12


# ---------------------------------------------------------------- money

def cost_per_million_tokens(price_per_hour, tokens_per_second):
    """Dollars per million tokens: 1e6 x price per hour / (3600 x tokens per second).

    Derived in the chapter "Capacity planning" (notebooks/13_capacity_planning.ipynb).

    Parameters
    ----------
    price_per_hour : float or array
        What the hardware costs per hour, in dollars: a GPU's price times the
        GPUs that produce ``tokens_per_second`` (a whole replica, or a fleet).
    tokens_per_second : float or array
        Tokens those GPUs produce (or serve) per second.

    Returns
    -------
    float or ndarray
        $ per 1e6 tokens (divide by 1000 for $ per 1000 tokens).

    Notes
    -----
    An hour holds 3600 s, so the GPUs make 3600 x tokens_per_second tokens
    per hour for ``price_per_hour`` dollars: C = 1e6 p / (3600 x).

    Examples
    --------
    >>> round(cost_per_million_tokens(8 * 3.0, 8000.0), 3)   # 8 GPUs at $3/h make 8000 tok/s
    0.833
    """
    p = check_positive("price_per_hour", price_per_hour)
    x = check_positive("tokens_per_second", tokens_per_second)
    return scalar_or_array(1e6 * p / (SECONDS_PER_HOUR * x))


def replicas_needed(arrival_rate, capacity_per_replica, utilisation_target=1.0):
    """Replicas that serve ``arrival_rate`` when each runs at most ``utilisation_target`` of its capacity.

    Derived in the chapter "Capacity planning" (notebooks/13_capacity_planning.ipynb).

    Parameters
    ----------
    arrival_rate : float or array
        Requests per second the service must absorb (>= 0).
    capacity_per_replica : float or array
        Requests per second one replica serves within its SLOs (> 0).
    utilisation_target : float in (0, 1]
        Share u of that capacity a replica is planned to use; the rest is
        headroom for bursts, model error and a failed replica. 1.0 = none.

    Returns
    -------
    int or ndarray of int
        R = ceil(rate / (u x capacity)), at least 1 for a positive rate
        (0 for no traffic). Non-decreasing in the rate.

    Examples
    --------
    >>> replicas_needed(10.0, 4.0)
    3
    >>> replicas_needed(10.0, 5.0), replicas_needed(10.0, 5.0, utilisation_target=0.9)
    (2, 3)
    """
    lam = check_nonnegative("arrival_rate", arrival_rate)
    c = check_positive("capacity_per_replica", capacity_per_replica)
    u = check_fraction("utilisation_target", utilisation_target)
    return int_or_array(np.ceil(lam / (u * c) * (1.0 - _CEIL_NUDGE)))


# ---------------------------------------------------------------- the workload

def _lengths(name, values, minimum):
    arr = np.atleast_1d(check_integer(name, values, minimum=minimum)).ravel()
    if arr.size == 0:
        raise ValueError(f"{name} must hold at least one length")
    return arr.astype(np.int64)


def _workload(prompt_lens, output_lens):
    lp = _lengths("prompt_lens", prompt_lens, 1)
    lo = _lengths("output_lens", output_lens, 1)
    if lp.size == 1 and lo.size > 1:
        lp = np.full(lo.size, lp[0])
    if lo.size == 1 and lp.size > 1:
        lo = np.full(lp.size, lo[0])
    if lp.size != lo.size:
        raise ValueError(f"prompt_lens and output_lens must have the same length (or one be a single "
                         f"number), got {lp.size} and {lo.size}")
    if lo.mean() <= 1:
        raise ValueError("output_lens must average more than 1 token: with single-token answers there is "
                         "no decode, and TPOT is undefined")
    return lp, lo


def workload_statistics(prompt_lens, output_lens, quantile=0.99) -> dict:
    """The numbers of a workload the capacity model uses.

    Derived in the chapter "Capacity planning" (notebooks/13_capacity_planning.ipynb).

    Parameters
    ----------
    prompt_lens, output_lens : int or array of int
        One entry per request (a single number: every request alike).
    quantile : float in (0, 1)
        The prompt-length quantile reported (the P99 prompt sets the P99 TTFT's prefill).

    Returns
    -------
    dict
        ``mean_prompt``, ``mean_output`` (tokens), ``prompt_quantile`` (tokens),
        ``decode_context`` (S-bar, the length-biased mean context of the decode
        batch, tokens, not rounded) and ``n_requests``.

    Notes
    -----
    A request decodes for L_o - 1 steps (its first token comes from the
    prefill) with contexts L_p + 1 ... L_p + L_o - 1, mean L_p + L_o / 2. The
    batch holds each request for a time proportional to its steps, so its
    mean context is weighted by them: S-bar = E[(L_o - 1)(L_p + L_o / 2)] / E[L_o - 1].
    Long answers count more: with independent lengths S-bar exceeds
    E[L_p] + E[L_o] / 2 by about Var(L_o) / (2 E[L_o]) (the inspection paradox).

    Examples
    --------
    >>> workload_statistics(1000, 200)["decode_context"]
    1100.0
    >>> round(workload_statistics([1000, 1000], [100, 300])["decode_context"], 1)   # not 1100
    1125.0
    """
    lp, lo = _workload(prompt_lens, output_lens)
    q = float(np.asarray(quantile, dtype=float))
    if not 0 < q < 1:
        raise ValueError(f"quantile must be in (0, 1), got {quantile!r}")
    context = decode_context(lp, lo)
    return {"mean_prompt": float(lp.mean()), "mean_output": float(lo.mean()),
            "prompt_quantile": float(np.quantile(lp, q)), "decode_context": context,
            "n_requests": int(lp.size)}


# ---------------------------------------------------------------- batch slots

def _z(quantile, name="slot_quantile"):
    q = float(np.asarray(quantile, dtype=float))
    if not 0.5 <= q < 1:
        raise ValueError(f"{name} must be in [0.5, 1), got {quantile!r}")
    return NormalDist().inv_cdf(q)


def batch_quantile(mean_batch, quantile=0.99):
    """The ``quantile`` of the instantaneous decode batch around a mean of ``mean_batch``: B + z_q sqrt(B).

    Derived in the chapter "Capacity planning" (notebooks/13_capacity_planning.ipynb).

    Requests arrive as a Poisson stream and each holds a batch slot while it
    decodes, so the number decoding at a random moment is the number in
    service of an M/G/infinity queue: Poisson with mean B, whatever the
    distribution of decode times. Its quantile is about B + z_q sqrt(B)
    (normal approximation; z_0.99 = 2.326). A batch cap or a KV cache sized
    for the *mean* batch is full a good part of the time, and requests queue.

    Parameters
    ----------
    mean_batch : float or array
        B >= 0, the mean batch (Little's law).
    quantile : float in [0.5, 1)

    Returns
    -------
    float or ndarray

    References
    ----------
    L. Kleinrock, *Queueing Systems, Volume 1: Theory*, Wiley, 1975: in the
    M/G/infinity queue the number in service is Poisson with mean lambda E[S].

    Examples
    --------
    >>> round(batch_quantile(100.0), 1)
    123.3
    """
    b = check_nonnegative("mean_batch", mean_batch)
    return scalar_or_array(b + _z(quantile, "quantile") * np.sqrt(b))


def max_mean_batch(slots, quantile=0.99):
    """The largest mean batch whose ``quantile`` fits in ``slots``: the root of B + z sqrt(B) = slots.

    Derived in the chapter "Capacity planning" (notebooks/13_capacity_planning.ipynb).

    Parameters
    ----------
    slots : float or array
        c >= 0: a batch cap (``max_num_seqs``) or the sequences the KV cache holds.
    quantile : float in [0.5, 1)
        How often the instantaneous batch must fit (0.99: 99 % of the time).

    Returns
    -------
    float or ndarray
        B = ((sqrt(z^2 + 4 slots) - z) / 2)^2 (real-valued; 0 for no slots).

    Examples
    --------
    >>> round(max_mean_batch(256), 1), round(max_mean_batch(64), 1)
    (221.4, 47.9)
    """
    c = check_nonnegative("slots", slots)
    z = _z(quantile, "quantile")
    root = (np.sqrt(z * z + 4.0 * c) - z) / 2.0
    return scalar_or_array(root * root)


# ---------------------------------------------------------------- one replica

@deployment_function(compute_dtype="auto")
def replica_curves(dep: Deployment, prompt_lens, output_lens, batch_sizes, *, quantile=0.99) -> dict:
    """The steady state of one replica at each mean decode batch B: rate, TPOT and TTFT quantile.

    :func:`servingmath.slo.replica_steady_state` (the library's one replica
    model) at the workload's length-biased mean context.

    Parameters
    ----------
    model, accelerator : or one Deployment
        Deployment settings as keyword options; ``compute_dtype`` defaults to
        ``"auto"`` here (fp8 math for fp8 weights on fp8 tensor cores, else bf16).
    prompt_lens, output_lens : int or array of int
        The workload (one entry per request, or one number for all).
    batch_sizes : int or array of int
        Mean decode batches B >= 1 to evaluate.
    quantile : float in (0, 1)
        Which TTFT quantile to report (0.99: P99).

    Returns
    -------
    dict of ndarray (one entry per batch size)
        ``batch_size``, ``step_time`` T(B) (s), ``rate`` (req/s), ``utilisation``
        (rho), ``tpot`` (s), ``ttft`` (the ``quantile`` TTFT, s), ``mean_wait`` (W, s),
        and scalars ``prefill_mean`` (E[t_p]), ``prefill_mean_square`` (E[t_p^2]),
        ``prefill_quantile`` (t_p at the prompt quantile), ``decode_context`` (S-bar rounded
        to a token).

    Notes
    -----
    rate = B / ((E[L_o] - 1) T(B) + B E[t_p]); rho = rate E[t_p];
    TPOT = T(B) / (1 - rho); W = rate E[t_p^2] / (2 (1 - rho));
    TTFT_q = w_q + t_p(L_p,q) with w_q = (W / rho) ln(rho / (1 - q)) when rho > 1 - q,
    else 0 (:func:`servingmath.slo.wait_quantile`). All three grow with B.
    Derived in the chapter "Capacity planning".

    Examples
    --------
    >>> c = replica_curves("Llama-3.1-8B", "H100", 1024, 256, [1, 64])
    >>> [round(float(x), 2) for x in c["rate"]], [round(float(t) * 1e3, 2) for t in c["tpot"]]
    ([0.86, 22.69], [4.58, 11.06])
    """
    lp, lo = _workload(prompt_lens, output_lens)
    b = np.atleast_1d(check_integer("batch_sizes", batch_sizes, minimum=1)).astype(np.int64)
    q = float(np.asarray(quantile, dtype=float))
    context = int(round(decode_context(lp, lo)))
    r = replica_steady_state(dep, b, lp, lo, context_len=context, quantile=q)
    arr = lambda v: np.atleast_1d(np.asarray(v, dtype=float))  # noqa: E731
    return {"batch_size": b, "step_time": arr(r["step_time"]), "rate": arr(r["rate"]),
            "utilisation": arr(r["utilisation"]), "tpot": arr(r["tpot"]), "ttft": arr(r["ttft_quantile"]),
            "mean_wait": arr(r["mean_wait"]), "prefill_mean": r["prefill_mean"],
            "prefill_mean_square": r["prefill_mean_square"], "prefill_quantile": r["prefill_quantile"],
            "decode_context": context}


_NO_CAP = 1 << 40


def _slot_limit(slots, slot_quantile):
    """The largest whole mean batch whose instantaneous ``slot_quantile`` fits in ``slots``."""
    if slots >= _NO_CAP:
        return slots
    if slot_quantile is None:
        return int(slots)
    z = NormalDist().inv_cdf(slot_quantile)          # max_mean_batch, without re-validating in the loop
    root = (math.sqrt(z * z + 4.0 * slots) - z) / 2.0
    return int(math.floor(root * root * (1.0 + _CEIL_NUDGE)))


def _choose(curves, ttft_slo, tpot_slo, cap, wall, slot_quantile):
    """Largest batch within every limit; the binding limit; the state there."""
    limits = {"max_batch_size": _slot_limit(cap, slot_quantile), "memory": _slot_limit(wall, slot_quantile)}
    if min(limits.values()) == 0:
        limits["tpot"] = limits["ttft"] = 0
    else:
        n = min(limits.values())
        for name, slo in (("tpot", tpot_slo), ("ttft", ttft_slo)):
            values = np.maximum.accumulate(curves[name][:n])   # non-decreasing in B; guard rounding
            limits[name] = int(np.searchsorted(values, slo, side="right"))
    best, binding = binding_limit(limits, order=BINDINGS)
    return best, binding, limits


def _memory_wall(dep: Deployment, context) -> int:
    return int(max_batch_size(dep, max(context, 1)))


@deployment_function(compute_dtype="auto")
def replica_capacity(dep: Deployment, prompt_lens, output_lens, *, ttft_slo, tpot_slo, max_batch_size=None,
                     quantile=0.99, slot_quantile=0.99) -> dict:
    """The highest request rate one replica serves within a TTFT quantile target and a TPOT target.

    Parameters
    ----------
    model, accelerator : or one Deployment
        Deployment settings as keyword options (``compute_dtype`` "auto" by
        default, as in :func:`replica_curves`; ``gpu_memory_utilization`` sets the memory wall).
    prompt_lens, output_lens, quantile
        As in :func:`replica_curves`.
    ttft_slo : float
        Target for the ``quantile`` TTFT (default P99), seconds.
    tpot_slo : float
        Target for the TPOT, seconds (compared with the steady state's TPOT,
        which every request sees in this model; the simulator adds the spread).
    max_batch_size : int or None
        The batch cap (vLLM's ``max_num_seqs``); None: only memory caps the batch.
    slot_quantile : float in [0.5, 1) or None
        The batch cap and the KV cache are hard limits on the *instantaneous*
        batch, which fluctuates around its mean B (:func:`batch_quantile`): the
        mean may only grow while that quantile of it still fits
        (:func:`max_mean_batch`). None: the mean alone must fit, as
        :func:`servingmath.slo.max_batch_for_slos` assumes.

    Returns
    -------
    dict
        ``rate`` (req/s within the SLOs; 0.0 if none), ``batch_size`` (the mean
        decode batch there, 0 if none), ``binding`` (which of ``BINDINGS`` sets
        it), ``tpot_limit``, ``ttft_limit``, ``memory_limit``, ``cap_limit``
        (the mean batch each allows alone), ``tpot``, ``ttft``, ``utilisation``,
        ``step_time`` at that batch (None if none), ``output_throughput``
        (rate x E[L_o], tok/s) and ``decode_context``.

    Notes
    -----
    Every quantity of :func:`replica_curves` grows with B, so each target
    allows the batches 1 .. B_limit; the replica runs at
    B_op = min(B_TPOT, B_TTFT, B_mem, B_cap) (:func:`servingmath.slo.binding_limit`)
    and serves rate(B_op), where B_mem and B_cap are the largest means whose
    fluctuations fit the memory wall and the cap. Because B_TPOT and B_TTFT
    never shrink when a target loosens, neither does the capacity. The memory
    wall is :func:`servingmath.memory.max_batch_size` at the decode context.
    Derived in the chapter "Capacity planning".

    Examples
    --------
    >>> r = replica_capacity("Llama-3.1-8B", "H100", 8192, 128, ttft_slo=1.0, tpot_slo=0.05)
    >>> r["batch_size"], r["binding"], round(r["rate"], 2)
    (24, 'ttft', 5.05)
    """
    ttft_slo = check_positive("ttft_slo", ttft_slo, scalar=True)
    tpot_slo = check_positive("tpot_slo", tpot_slo, scalar=True)
    lp, lo = _workload(prompt_lens, output_lens)
    context = int(round(decode_context(lp, lo)))
    wall = _memory_wall(dep, context)
    cap = _NO_CAP if max_batch_size is None else int(check_integer("max_batch_size", max_batch_size, minimum=1))
    if slot_quantile is not None:
        _z(slot_quantile)
    n = max(min(cap, wall), 1)
    curves = replica_curves(dep, lp, lo, np.arange(1, n + 1), quantile=quantile)
    out = _result(curves, ttft_slo, tpot_slo, cap, wall, float(lo.mean()), slot_quantile)
    # no batch meets the targets (batch_size 0, rate 0): there is no operating point to describe
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in out.items()}



def _result(curves, ttft_slo, tpot_slo, cap, wall, mean_output, slot_quantile):
    best, binding, limits = _choose(curves, ttft_slo, tpot_slo, cap, wall, slot_quantile)
    out = {"rate": 0.0, "batch_size": best, "binding": binding, "tpot_limit": limits["tpot"],
           "ttft_limit": limits["ttft"], "memory_limit": limits["memory"],
           "cap_limit": limits["max_batch_size"], "tpot": math.nan, "ttft": math.nan,
           "utilisation": 0.0, "step_time": math.nan, "output_throughput": 0.0,
           "decode_context": curves["decode_context"]}
    if best > 0:
        i = best - 1
        out.update(rate=float(curves["rate"][i]), tpot=float(curves["tpot"][i]), ttft=float(curves["ttft"][i]),
                   utilisation=float(curves["utilisation"][i]), step_time=float(curves["step_time"][i]))
        out["output_throughput"] = out["rate"] * mean_output
    return out


# ---------------------------------------------------------------- the design space

@dataclass(frozen=True)
class Plan:
    """One candidate deployment: a replica configuration, how many replicas, and what it costs.

    Derived in the chapter "Capacity planning" (notebooks/13_capacity_planning.ipynb).

    Attributes
    ----------
    deployment : Deployment
        One replica: model, accelerator, tensor parallelism, data types,
        efficiencies, all-reduce model and memory share the numbers were
        computed with (:meth:`server` reuses it). ``model``, ``accelerator``
        (catalog names), ``tensor_parallel``, ``weight_dtype``, ``kv_dtype``,
        ``compute_dtype``, ``mfu``, ``mbu``, ``overlap``, ``allreduce_latency``
        and ``gpu_memory_utilization`` read it.
    max_batch_size : int
        The batch cap the replica runs with (vLLM's ``max_num_seqs``).
    batch_size : int
        Mean decode batch at capacity (closed form); 0 if infeasible.
    binding : str
        What limits the batch: one of :data:`BINDINGS`.
    capacity : float
        Requests/s one replica serves within the SLOs (closed form).
    tpot, ttft : float
        Closed-form TPOT and TTFT quantile at capacity, seconds (NaN if infeasible).
    arrival_rate : float
        The traffic planned for, requests/s.
    utilisation_target : float
        Planned share of each replica's capacity.
    replicas : int
        ceil(arrival_rate / (utilisation_target x capacity)); 0 if infeasible.
    gpus : int
        replicas x tensor_parallel.
    price_per_gpu_hour, cost_per_hour : float
        Dollars per GPU-hour, and for the whole fleet.
    mean_output : float
        E[L_o], tokens per request.
    cost_per_million_tokens : float
        Fleet dollars per million output tokens *served* (the demand, not the capacity); inf if infeasible.
    cost_per_million_tokens_at_capacity : float
        The same for one replica at 100 % of its capacity: the floor that headroom and rounding up raise.
    quantile, slot_quantile : float
        The TTFT quantile and the batch-slot quantile of :func:`replica_capacity`.
    """

    deployment: Deployment
    max_batch_size: int
    batch_size: int
    binding: str
    capacity: float
    tpot: float
    ttft: float
    arrival_rate: float
    utilisation_target: float
    replicas: int
    gpus: int
    price_per_gpu_hour: float
    cost_per_hour: float
    mean_output: float
    cost_per_million_tokens: float
    cost_per_million_tokens_at_capacity: float
    quantile: float = 0.99
    slot_quantile: float | None = 0.99

    model = property(lambda self: self.deployment.model.name, doc="The model's catalog name.")
    accelerator = property(lambda self: self.deployment.accelerator.name, doc="The accelerator's catalog name.")
    tensor_parallel = property(lambda self: int(self.deployment.tensor_parallel), doc="GPUs per replica, N.")
    weight_dtype = property(lambda self: self.deployment.weight_dtype)
    kv_dtype = property(lambda self: self.deployment.kv_dtype)
    compute_dtype = property(lambda self: self.deployment.compute_dtype)
    mfu = property(lambda self: float(self.deployment.mfu))
    mbu = property(lambda self: float(self.deployment.mbu))
    overlap = property(lambda self: self.deployment.overlap)
    allreduce_latency = property(lambda self: float(self.deployment.allreduce.latency))
    gpu_memory_utilization = property(lambda self: float(self.deployment.gpu_memory_utilization))

    @property
    def feasible(self) -> bool:
        """True when a replica meets the SLOs at some load (capacity > 0)."""
        return self.capacity > 0

    @property
    def load_per_replica(self) -> float:
        """Requests/s each replica receives: arrival_rate / replicas (0 if infeasible)."""
        return self.arrival_rate / self.replicas if self.replicas else 0.0

    @property
    def utilisation(self) -> float:
        """The share of each replica's capacity the planned traffic uses (<= the target)."""
        return self.load_per_replica / self.capacity if self.feasible else math.nan

    @property
    def label(self) -> str:
        """A short name: ``H100-SXM5-80GB TP2 fp8/fp8 cap 256``."""
        return (f"{self.accelerator} TP{self.tensor_parallel} {self.weight_dtype}/{self.kv_dtype} "
                f"cap {self.max_batch_size}")

    def with_traffic(self, arrival_rate, utilisation_target=None) -> "Plan":
        """The same replica configuration sized for another traffic (or headroom)."""
        u = self.utilisation_target if utilisation_target is None else utilisation_target
        return _priced(self, float(check_nonnegative("arrival_rate", arrival_rate)),
                       float(check_fraction("utilisation_target", u)), self.replicas_for(arrival_rate, u))

    def with_replicas(self, replicas) -> "Plan":
        """The same plan with another replica count (e.g. the one the simulator confirms)."""
        r = int(check_integer("replicas", replicas, minimum=0))
        return _priced(self, self.arrival_rate, self.utilisation_target, r)

    def replicas_for(self, arrival_rate, utilisation_target=None) -> int:
        """Replicas this configuration needs for ``arrival_rate`` (0 if infeasible)."""
        if not self.feasible:
            return 0
        u = self.utilisation_target if utilisation_target is None else utilisation_target
        return replicas_needed(arrival_rate, self.capacity, u)

    def server(self, **overrides):
        """The :class:`servingmath.simulate.Server` of one replica: this plan's deployment
        (``overrides`` change deployment settings or simulator settings)."""
        from .simulate import Server

        return Server(self.deployment, **overrides)

    def as_dict(self) -> dict:
        """The plan's fields and properties as a plain dict (for a table)."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "deployment"}
        for name in ("model", "accelerator", "tensor_parallel", "weight_dtype", "kv_dtype", "compute_dtype",
                     "mfu", "mbu", "overlap", "allreduce_latency", "gpu_memory_utilization"):
            d[name] = getattr(self, name)
        d.update(feasible=self.feasible, load_per_replica=self.load_per_replica,
                 utilisation=self.utilisation, label=self.label)
        return d


def _money(plan: Plan, arrival_rate: float, utilisation_target: float, replicas: int | None = None) -> dict:
    """Replica count and money of a plan at a traffic (plain arithmetic: called in the design-space loop).

    The same formulas as :func:`replicas_needed` and :func:`cost_per_million_tokens` (tested equal).
    """
    if replicas is None:
        replicas = (int(math.ceil(arrival_rate / (utilisation_target * plan.capacity) * (1.0 - _CEIL_NUDGE)))
                    if plan.capacity > 0 else 0)
    gpus = replicas * plan.tensor_parallel
    cost_per_hour = gpus * plan.price_per_gpu_hour
    at_capacity = per_million = math.inf
    if plan.capacity > 0:
        at_capacity = 1e6 * plan.tensor_parallel * plan.price_per_gpu_hour / (
            SECONDS_PER_HOUR * plan.capacity * plan.mean_output)
        if arrival_rate > 0:
            per_million = 1e6 * cost_per_hour / (SECONDS_PER_HOUR * arrival_rate * plan.mean_output)
    return dict(arrival_rate=arrival_rate, utilisation_target=utilisation_target, replicas=replicas, gpus=gpus,
                cost_per_hour=float(cost_per_hour), cost_per_million_tokens=per_million,
                cost_per_million_tokens_at_capacity=at_capacity)


def _priced(plan: Plan, arrival_rate: float, utilisation_target: float, replicas: int | None = None) -> Plan:
    """The plan with its replica count and money filled in."""
    return replace(plan, **_money(plan, arrival_rate, utilisation_target, replicas))


def _prices(prices):
    if not isinstance(prices, dict) or not prices:
        raise ValueError("prices must be a non-empty dict: accelerator name -> dollars per GPU-hour, "
                         f"e.g. {{'H100': 3.0}}; got {prices!r}")
    out = {}
    for name, price in prices.items():
        acc = get_accelerator(name)
        out[acc.name] = float(check_positive(f"prices[{name!r}]", price))
    return out


def _dtype_pairs(dtypes):
    pairs = []
    for pair in dtypes:
        if isinstance(pair, str) or len(pair) != 2:
            raise ValueError(f"dtypes must be (weight_dtype, kv_dtype) pairs such as ('fp8', 'fp8'), got {pair!r}")
        pairs.append((check_dtype(pair[0], "weight_dtype"), check_dtype(pair[1], "kv_dtype")))
    if not pairs:
        raise ValueError("dtypes must hold at least one (weight_dtype, kv_dtype) pair")
    return pairs


def _design_space(model, prompt_lens, output_lens, prices, tensor_parallel, dtypes, batch_caps, quantile,
                  slot_quantile, allreduce_latency, setting, options):
    """Check the design space once and compute each configuration's replica curves (SLO-independent)."""
    model = get_model(model)
    if slot_quantile is not None:
        _z(slot_quantile)
    price_table = _prices(prices)
    pairs = _dtype_pairs(dtypes)
    caps = sorted({int(c) for c in np.atleast_1d(check_integer("batch_caps", list(batch_caps), minimum=1))})
    if tensor_parallel is None or isinstance(tensor_parallel, (str, bytes)):
        raise TypeError(f"tensor_parallel must be a degree or a sequence of degrees (e.g. (1, 2, 4, 8)), "
                        f"got {tensor_parallel!r}")
    listed = list(tensor_parallel) if np.ndim(tensor_parallel) else [tensor_parallel]
    degrees = [int(n) for n in np.atleast_1d(check_integer("tensor_parallel", listed, minimum=1))]
    valid = set(valid_tensor_parallel_degrees(model))
    degrees = [n for n in dict.fromkeys(degrees) if n in valid]
    lp, lo = _workload(prompt_lens, output_lens)
    stats = workload_statistics(lp, lo, quantile)
    context = int(round(stats["decode_context"]))
    configs = []
    for acc_name, price in price_table.items():
        acc = get_accelerator(acc_name)
        for n in degrees:
            if n > 1 and acc.interconnect_bandwidth is None:
                continue
            extra = dict(options)
            if allreduce_latency is not None:     # None: the setting's (0 for both named settings)
                extra["allreduce_latency"] = float(allreduce_latency(n) if callable(allreduce_latency)
                                                   else allreduce_latency)
            for weight_dtype, kv_dtype in pairs:
                dep = Deployment.build(model, acc, setting=setting, tensor_parallel=n,
                                       weight_dtype=weight_dtype, kv_dtype=kv_dtype, compute_dtype="auto",
                                       **extra)
                wall = _memory_wall(dep, context)
                curves = None
                if wall > 0:
                    top = max(min(caps[-1], wall), 1)
                    curves = replica_curves(dep, lp, lo, np.arange(1, top + 1), quantile=quantile)
                base = Plan(deployment=dep, max_batch_size=caps[0], batch_size=0,
                            binding="memory", capacity=0.0, tpot=math.nan, ttft=math.nan, arrival_rate=0.0,
                            utilisation_target=1.0, replicas=0, gpus=0, price_per_gpu_hour=price,
                            cost_per_hour=0.0, mean_output=stats["mean_output"], cost_per_million_tokens=math.inf,
                            cost_per_million_tokens_at_capacity=math.inf, quantile=float(quantile),
                            slot_quantile=slot_quantile)
                configs.append((base, wall, curves))
    return configs, caps


def _sort(plans):
    plans.sort(key=lambda p: (p.cost_per_million_tokens, p.gpus, -p.capacity, p.max_batch_size, p.label))
    return plans


def _plans(configs, caps, arrival_rate, ttft_slo, tpot_slo, utilisation_target, include_infeasible):
    plans = []
    for base, wall, curves in configs:
        for cap in caps:
            fields = {"max_batch_size": cap}
            if curves is not None:
                r = _result(curves, ttft_slo, tpot_slo, cap, wall, base.mean_output, base.slot_quantile)
                fields.update(batch_size=int(r["batch_size"]), binding=r["binding"], capacity=float(r["rate"]),
                              tpot=float(r["tpot"]), ttft=float(r["ttft"]))
            if fields.get("capacity", 0.0) <= 0 and not include_infeasible:
                continue
            sized = replace(base, **fields)
            plans.append(replace(sized, **_money(sized, arrival_rate, utilisation_target)))
    return _sort(plans)


_SPACE_DEFAULTS = dict(tensor_parallel=(1, 2, 4, 8), dtypes=DEFAULT_DTYPES, batch_caps=(256,), quantile=0.99,
                       allreduce_latency=None, slot_quantile=0.99, setting=None)
#: deployment settings a design space applies to every configuration (the rest it varies itself)
_SPACE_OPTIONS = DEPLOYMENT_OPTIONS - {"tensor_parallel", "weight_dtype", "kv_dtype", "compute_dtype",
                                       "allreduce_latency", "allreduce"}


def plan_candidates(model, arrival_rate, prompt_lens, output_lens, *, ttft_slo, tpot_slo, prices,
                    tensor_parallel=(1, 2, 4, 8), dtypes=DEFAULT_DTYPES, batch_caps=(256,),
                    utilisation_target=0.8, quantile=0.99, allreduce_latency=None, slot_quantile=0.99,
                    include_infeasible=False, setting=None, **options) -> list:
    """Every configuration of a design space, sized for the traffic and priced, cheapest first.

    Derived in the chapter "Capacity planning" (notebooks/13_capacity_planning.ipynb).

    Parameters
    ----------
    model : str or ModelConfig
    arrival_rate : float
        Peak requests per second to serve (> 0).
    prompt_lens, output_lens : int or array of int
        The workload (one entry per request, or one number for all).
    ttft_slo, tpot_slo : float
        Targets in seconds: the ``quantile`` TTFT and the TPOT.
    prices : dict
        Accelerator name (or alias) -> dollars per GPU-hour. The accelerators
        tried are its keys.
    tensor_parallel : sequence of int
        Degrees to try; those that do not split the model's heads evenly are skipped.
    dtypes : sequence of (weight_dtype, kv_dtype)
        Data-type pairs; the matmuls run in :func:`servingmath.pareto.compute_dtype_for`.
    batch_caps : sequence of int
        Batch caps (``max_num_seqs``) to try.
    utilisation_target : float in (0, 1]
        Planned share of each replica's capacity (0.8 keeps 20 % headroom).
    quantile, slot_quantile
        As in :func:`replica_capacity`.
    allreduce_latency : float, callable or None
        Per-hop all-reduce latency, or a callable ``tensor_parallel -> seconds``
        (the per-hop latency can depend on N); None: the setting's (0).
    setting : {None, "physical", "realistic"}
        A named setting (:mod:`servingmath.settings`) every configuration starts
        from; ``**options`` override it. None: the library's defaults (the physical bound).
    **options
        Deployment settings applied to every configuration (``mfu``, ``mbu``,
        ``overlap``, ``gpu_memory_utilization``, ``step_overhead``, ...).
    include_infeasible : bool
        Keep configurations that meet the SLOs at no load at all (or do not fit):
        their ``capacity`` is 0 and their cost ``inf``.

    Returns
    -------
    list of Plan
        Sorted by cost per million output tokens, then by fewer GPUs, more
        capacity (headroom), smaller cap; empty if nothing is feasible (and
        infeasible ones are dropped).

    Notes
    -----
    The closed forms *prune*: a configuration whose memory cannot hold one
    sequence, or whose step at B = 1 already misses a target, drops out, and
    the rest are ranked by replicas x N x price / (rate x E[L_o]). Confirm the
    winner's P99 tails with :func:`confirm_plan`.

    Examples
    --------
    >>> plans = plan_candidates("Llama-3.1-8B", 20.0, 1024, 256, ttft_slo=1.0, tpot_slo=0.05,
    ...                         prices={"H100": 3.0, "A100-80GB": 1.5}, tensor_parallel=[1])
    >>> [(p.accelerator, p.weight_dtype, p.replicas) for p in plans]
    [('H100-SXM5-80GB', 'fp8', 1), ('H100-SXM5-80GB', 'bf16', 1), ('A100-SXM4-80GB', 'fp8', 2), ('A100-SXM4-80GB', 'bf16', 2)]
    """
    return plan_sweep(model, arrival_rate, prompt_lens, output_lens, ttft_slos=[ttft_slo], tpot_slos=[tpot_slo],
                      prices=prices, tensor_parallel=tensor_parallel, dtypes=dtypes, batch_caps=batch_caps,
                      utilisation_target=utilisation_target, quantile=quantile,
                      allreduce_latency=allreduce_latency, slot_quantile=slot_quantile,
                      include_infeasible=include_infeasible, setting=setting, **options)[0]


def plan_sweep(model, arrival_rate, prompt_lens, output_lens, *, ttft_slos, tpot_slos, prices,
               utilisation_target=0.8, include_infeasible=False, **space) -> list:
    """:func:`plan_candidates` for several pairs of targets, computing each configuration's curves once.

    Derived in the chapter "Capacity planning" (notebooks/13_capacity_planning.ipynb).

    Parameters
    ----------
    ttft_slos, tpot_slos : sequence of float
        Pairs of targets (seconds), equal lengths: pair i is (ttft_slos[i], tpot_slos[i]).
    **space
        ``tensor_parallel``, ``dtypes``, ``batch_caps``, ``quantile``, ``allreduce_latency``,
        ``slot_quantile``, ``setting`` and deployment settings (as in :func:`plan_candidates`).

    Returns
    -------
    list of list of Plan
        One sorted list per pair of targets.

    Examples
    --------
    >>> sweep = plan_sweep("Llama-3.1-8B", 40.0, 1024, 256, ttft_slos=[0.2, 1.0], tpot_slos=[0.012, 0.05],
    ...                    prices={"H100": 3.0}, tensor_parallel=[1], mfu=0.6, mbu=0.6)
    >>> [round(plans[0].capacity, 2) for plans in sweep]    # req/s per replica: looser targets, more
    [31.48, 38.23]
    """
    unknown = set(space) - set(_SPACE_DEFAULTS) - _SPACE_OPTIONS
    if unknown:
        raise ValueError(f"unknown keyword argument(s) {', '.join(sorted(unknown))}; "
                         f"allowed: {', '.join(sorted(set(_SPACE_DEFAULTS) | _SPACE_OPTIONS))}")
    settings = {**_SPACE_DEFAULTS, **{k: v for k, v in space.items() if k in _SPACE_DEFAULTS}}
    settings["options"] = {k: v for k, v in space.items() if k in _SPACE_OPTIONS}
    lam = check_positive("arrival_rate", arrival_rate, scalar=True)
    u = float(check_fraction("utilisation_target", utilisation_target))
    ttfts = np.atleast_1d(check_positive("ttft_slos", ttft_slos)).ravel()
    tpots = np.atleast_1d(check_positive("tpot_slos", tpot_slos)).ravel()
    if ttfts.size != tpots.size:
        raise ValueError(f"ttft_slos and tpot_slos must have the same length, got {ttfts.size} and {tpots.size}")
    configs, caps = _design_space(model, prompt_lens, output_lens, prices, **settings)
    return [_plans(configs, caps, lam, float(a), float(b), u, bool(include_infeasible))
            for a, b in zip(ttfts, tpots)]


def reprice(plans, arrival_rate, utilisation_target=None) -> list:
    """The same configurations sized for another traffic (or headroom), re-sorted cheapest first.

    Derived in the chapter "Capacity planning" (notebooks/13_capacity_planning.ipynb).

    Capacities do not depend on the traffic, only the replica counts (and so
    the costs) do: no closed form is recomputed.

    Examples
    --------
    >>> plans = plan_candidates("Llama-3.1-8B", 20.0, 1024, 256, ttft_slo=1.0, tpot_slo=0.05,
    ...                         prices={"H100": 3.0}, tensor_parallel=[1])
    >>> [(p.weight_dtype, p.replicas) for p in plans], [(p.weight_dtype, p.replicas) for p in reprice(plans, 80.0)]
    ([('fp8', 1), ('bf16', 1)], [('fp8', 2), ('bf16', 4)])
    """
    if isinstance(plans, Plan) or np.ndim(plans) == 0 and not isinstance(plans, (list, tuple)):
        raise TypeError(f"plans must be a list of Plan (from plan_candidates), got {plans!r}")
    for plan in plans:
        check_instance("plans", plan, Plan, "list of Plan (from plan_candidates)")
    arrival_rate = check_positive("arrival_rate", arrival_rate, scalar=True)
    return _sort([p.with_traffic(arrival_rate, utilisation_target) for p in plans])


def cheapest_plan(model, arrival_rate, prompt_lens, output_lens, *, ttft_slo, tpot_slo, prices, **kwargs) -> Plan:
    """The cheapest feasible plan of :func:`plan_candidates` (same parameters).

    Derived in the chapter "Capacity planning" (notebooks/13_capacity_planning.ipynb).

    Raises
    ------
    ValueError
        When no configuration meets the SLOs at any load: loosen a target, or
        add faster accelerators, more tensor parallelism or smaller data types.

    Examples
    --------
    >>> p = cheapest_plan("Llama-3.1-8B", 20.0, 1024, 256, ttft_slo=1.0, tpot_slo=0.05,
    ...                   prices={"H100": 3.0, "A100-80GB": 1.5}, tensor_parallel=[1])
    >>> p.label, p.replicas, round(p.cost_per_million_tokens, 3)
    ('H100-SXM5-80GB TP1 fp8/fp8 cap 256', 1, 0.163)
    """
    kwargs.pop("include_infeasible", None)
    plans = plan_candidates(model, arrival_rate, prompt_lens, output_lens, ttft_slo=ttft_slo, tpot_slo=tpot_slo,
                            prices=prices, **kwargs)
    if not plans:
        raise ValueError(f"no configuration of {get_model(model).name} meets TTFT <= {ttft_slo:g} s and "
                         f"TPOT <= {tpot_slo:g} s on {', '.join(_prices(prices))}: loosen a target, or try "
                         "faster accelerators, more tensor parallelism or smaller data types")
    return plans[0]


# ---------------------------------------------------------------- prices

def load_prices(path) -> dict:
    """Read a price table (CSV) into {accelerator name: dollars per GPU-hour}.

    Derived in the chapter "Capacity planning" (notebooks/13_capacity_planning.ipynb).

    The file needs the columns ``accelerator``, ``gpus_per_node``,
    ``usd_per_gpu_hour`` and ``usd_per_node_hour``; each row must satisfy
    node price = GPUs per node x GPU price (within a cent), so that a
    per-node figure cannot pass for a per-GPU one.

    Raises
    ------
    ValueError
        For a missing column, an unknown accelerator, a non-positive price or
        inconsistent per-node and per-GPU prices (naming the row).
    """
    path = Path(path)
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    need = {"accelerator", "gpus_per_node", "usd_per_gpu_hour", "usd_per_node_hour"}
    if not rows or not need <= set(rows[0]):
        raise ValueError(f"{path.name} must have the columns {', '.join(sorted(need))}")
    prices = {}
    for i, row in enumerate(rows, start=2):
        name = get_accelerator(row["accelerator"]).name
        gpu = float(row["usd_per_gpu_hour"])
        node = float(row["usd_per_node_hour"])
        per_node = int(row["gpus_per_node"])
        check_positive(f"usd_per_gpu_hour (line {i})", gpu)
        check_integer(f"gpus_per_node (line {i})", per_node, minimum=1)
        if abs(node - per_node * gpu) > 0.01:
            raise ValueError(f"line {i} of {path.name}: usd_per_node_hour {node:g} != gpus_per_node "
                             f"{per_node} x usd_per_gpu_hour {gpu:g}")
        prices[name] = gpu
    return prices


# ---------------------------------------------------------------- confirmation by simulation

def simulate_plan(plan: Plan, prompt_lens, output_lens, *, arrival_rate=None, replicas=None, seed=0,
                  policy=None):
    """Simulate one replica of ``plan`` at its share of the traffic; return the SimulationResult.

    Derived in the chapter "Capacity planning" (notebooks/13_capacity_planning.ipynb).

    With random routing, a Poisson stream of rate lambda split over R
    replicas gives each a Poisson stream of rate lambda / R (thinning), so one
    replica stands for all of them. Smarter routing (least loaded) only
    shortens the tails, so this is the conservative check.

    Parameters
    ----------
    plan : Plan
    prompt_lens, output_lens : array of int
        The requests to replay, in arrival order.
    arrival_rate : float, optional
        Total traffic; default the plan's.
    replicas : int, optional
        Default the plan's.
    seed : int
    policy : simulator policy, optional
        Default ``ContinuousBatching(max_batch_size=plan.max_batch_size)``.

    Examples
    --------
    >>> plan = cheapest_plan("Llama-3.1-8B", 20.0, 1024, 256, ttft_slo=1.0, tpot_slo=0.05,
    ...                      prices={"H100": 3.0}, tensor_parallel=[1])
    >>> result = simulate_plan(plan, [1024] * 300, [256] * 300, seed=0)
    >>> len(result.records), round(result.metrics().ttft.p99 * 1e3, 1)   # requests, P99 TTFT in ms
    (300, 19.0)
    """
    from .simulate import ContinuousBatching, SimulationConfig, simulate
    from .workloads import Poisson, Workload

    if not isinstance(plan, Plan):
        raise ValueError(f"plan must be a Plan, got {type(plan).__name__}")
    if not plan.feasible:
        raise ValueError(f"plan {plan.label} is infeasible: nothing to simulate")
    lam = plan.arrival_rate if arrival_rate is None else float(check_positive("arrival_rate", arrival_rate))
    r = plan.replicas if replicas is None else int(check_integer("replicas", replicas, minimum=1))
    lp, lo = _workload(prompt_lens, output_lens)
    config = SimulationConfig(server=plan.server(), workload=Workload(lp, lo), arrivals=Poisson(lam / r),
                              policy=policy or ContinuousBatching(max_batch_size=plan.max_batch_size))
    return simulate(config, seed=seed)


def _tails(result, quantile):
    rec = result.records
    tpot = rec.tpot[np.isfinite(rec.tpot)]
    return (float(np.percentile(rec.ttft, 100 * quantile)),
            float(np.percentile(tpot, 100 * quantile)) if tpot.size else 0.0)


def confirm_plan(plan: Plan, prompt_lens, output_lens, *, ttft_slo, tpot_slo, seed=0, max_extra_replicas=8):
    """Add replicas until the simulated ``plan.quantile`` TTFT and TPOT of one replica meet the targets.

    Derived in the chapter "Capacity planning" (notebooks/13_capacity_planning.ipynb).

    Parameters
    ----------
    plan : Plan
        Sized by the closed forms (:func:`plan_candidates`).
    prompt_lens, output_lens : array of int
        The requests to replay (a few thousand keep it fast).
    ttft_slo, tpot_slo : float
        Targets, seconds, for the simulated quantiles (P99 by default).
    seed : int
    max_extra_replicas : int
        Give up (ValueError) after this many replicas beyond the plan's.

    Returns
    -------
    dict
        ``plan`` (re-priced with the confirmed replica count), ``replicas``,
        ``added`` (replicas beyond the closed form's), ``ttft``, ``tpot``
        (the simulated quantiles at the confirmed count, s) and ``history``
        (a list of (replicas, ttft, tpot) tried).

    Examples
    --------
    >>> plan = cheapest_plan("Llama-3.1-8B", 20.0, 1024, 256, ttft_slo=1.0, tpot_slo=0.05,
    ...                      prices={"H100": 3.0}, tensor_parallel=[1])
    >>> c = confirm_plan(plan, [1024] * 300, [256] * 300, ttft_slo=1.0, tpot_slo=0.05)
    >>> c["replicas"], c["added"], round(c["tpot"] * 1e3, 1)     # the closed form's one replica holds
    (1, 0, 3.5)
    """
    if not isinstance(plan, Plan):
        raise ValueError(f"plan must be a Plan, got {type(plan).__name__}")
    ttft_slo = float(check_positive("ttft_slo", ttft_slo, scalar=True))
    tpot_slo = float(check_positive("tpot_slo", tpot_slo, scalar=True))
    extra = int(check_integer("max_extra_replicas", max_extra_replicas, minimum=0))
    history = []
    for r in range(plan.replicas, plan.replicas + extra + 1):
        ttft, tpot = _tails(simulate_plan(plan, prompt_lens, output_lens, replicas=r, seed=seed), plan.quantile)
        history.append((r, ttft, tpot))
        if ttft <= ttft_slo and tpot <= tpot_slo:
            confirmed = plan.with_replicas(r)
            return {"plan": confirmed, "replicas": r, "added": r - plan.replicas, "ttft": ttft, "tpot": tpot,
                    "history": history}
    raise ValueError(f"{plan.label}: the simulated P{100 * plan.quantile:g} still misses the targets with "
                     f"{plan.replicas + extra} replicas (last: TTFT {history[-1][1]:.3f} s, TPOT "
                     f"{history[-1][2] * 1e3:.1f} ms)")
