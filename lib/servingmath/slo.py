"""Service-level objectives (SLOs): the largest batch a latency target allows, and goodput.

A TPOT SLO tau caps the decode batch: the step time T(B) grows with B, so the
largest batch with T(B) <= tau, B_SLO, is also the highest-throughput batch
that meets it. For the book's dense step-time models T(B) is convex and
piecewise linear, T(B) = max_k (alpha_k + beta_k B) (:func:`step_time_pieces`),
so B_SLO has a closed form, floor(min_k (tau - alpha_k) / beta_k)
(:func:`tpot_batch_bound`); for a mixture of experts (weights read grow with B)
it is found numerically (:func:`max_batch_for_tpot`).

Goodput has two meanings, both here:

* **request goodput** (vLLM's benchmark, ``--goodput ttft:.. tpot:..``): the
  requests per second that meet *every* SLO, counted over a run of known
  duration (:func:`request_goodput`); a token version counts their output
  tokens (:func:`token_goodput`);
* **DistServe's goodput**: the highest request rate at which at least a given
  fraction (e.g. 90 %) of requests meet both the TTFT and the TPOT SLO
  (:func:`distserve_goodput`), often divided by the GPUs used.

The goodput functions take arrays of per-request latencies, so a simulator's
output or a benchmark log plugs in directly. For the chapter's numbers,
:func:`steady_state` and :func:`request_latencies` supply a small analytic
model of one replica: Little's law for the decode batch, prefills served first
as an M/D/1 (or M/G/1) queue.

Conventions
-----------
* A request meets an SLO when its value is <= the target (vLLM counts equality
  as met). A one-token request has no TPOT: it meets every TPOT target
  (vLLM's convention for goodput counts its TPOT as 0); pass 0 or NaN for it.
  The simulator's results use these functions, with the same keyword names.
* TPOT is vLLM's (E2E - TTFT) / (output tokens - 1).
* Rates are requests per second; ``n_gpus`` divides a goodput into per-GPU goodput.

Examples
--------
>>> int(max_batch_for_tpot("Llama-3.1-8B", "A100", 2048, tpot_slo=0.030))
166
>>> ttft = [0.2, 0.4, 0.9, 0.3]
>>> tpot = [0.020, 0.060, 0.030, 0.030]
>>> request_goodput(ttft, tpot, duration=2.0, ttft_slo=0.5, tpot_slo=0.05)   # 2 good in 2 s
1.0
"""

from __future__ import annotations

import math

import numpy as np

from ._validation import (
    as_array,
    check_choice,
    check_fraction,
    check_integer,
    check_nonnegative,
    check_positive,
    scalar_or_array,
)
from ._validation import check_same_size, check_scalar, int_or_array
from .decode import decode_coefficients, decode_step_time
from .deployment import Deployment, deployment_function
from .memory import max_batch_size
from .prefill import prefill_time

__all__ = [
    "READING_WPM",
    "WORDS_PER_TOKEN",
    "tpot_for_reading_speed",
    "binding_limit",
    "decode_context",
    "replica_steady_state",
    "step_time_pieces",
    "tpot_batch_bound",
    "max_batch_for_tpot",
    "wait_quantile",
    "steady_state",
    "max_batch_for_slos",
    "request_latencies",
    "meets_slo",
    "slo_attainment",
    "request_throughput",
    "request_goodput",
    "token_goodput",
    "distserve_goodput",
]

#: Average adult silent reading rate of English non-fiction, words per minute
#: (Brysbaert 2019, meta-analysis of 190 studies; fiction: 260 wpm).
READING_WPM = 238.0
#: Words per token of English text: OpenAI's rule of thumb "1 token ~ 4 characters
#: ~ 3/4 of a word" (tokenizers differ by some 10-20 %).
WORDS_PER_TOKEN = 0.75

#: numeric search for B_SLO stops here when no ``max_batch`` is given
_SEARCH_LIMIT = 1 << 16
# floor() of a quotient that should be whole can land just below it (4.999999999999999)
_FLOOR_NUDGE = 1e-12


def tpot_for_reading_speed(words_per_minute=READING_WPM, words_per_token=WORDS_PER_TOKEN):
    """The TPOT at which tokens arrive exactly as fast as a person reads, in seconds.

    Derived in the chapter "SLOs and goodput" (notebooks/07_slos_and_goodput.ipynb).

    TPOT = words per token x 60 / (words per minute).

    >>> round(tpot_for_reading_speed() * 1e3)     # ms: 238 wpm at 0.75 words/token
    189
    """
    wpm = check_positive("words_per_minute", words_per_minute)
    wpt = check_positive("words_per_token", words_per_token)
    return scalar_or_array(wpt * 60.0 / wpm)


# ---------------------------------------------------------------- which limit binds

def binding_limit(limits: dict, order=None) -> tuple:
    """The smallest of several limits on one quantity, and the name of the one that binds.

    Derived in the chapter "SLOs and goodput" (notebooks/07_slos_and_goodput.ipynb).

    Parameters
    ----------
    limits : dict
        name -> the largest value that limit allows alone (a batch size, a rate...).
    order : sequence of str, optional
        Tie-break: the first name in this order wins a tie (default: the dict's order).

    Returns
    -------
    (value, name)

    The library's one rule for "which wall binds" (memory, the TPOT target,
    the TTFT target, a batch cap...), used by :func:`max_batch_for_slos`,
    :func:`servingmath.capacity.replica_capacity` and
    :func:`servingmath.quantization.compare_schemes`.

    >>> binding_limit({"memory": 51, "tpot": 32, "ttft": 26})
    (26, 'ttft')
    >>> binding_limit({"tpot": 40, "memory": 40}, order=("memory", "tpot"))
    (40, 'memory')
    """
    if not isinstance(limits, dict) or not limits:
        raise ValueError(f"limits must be a non-empty dict of name -> value, got {limits!r}")
    names = list(limits) if order is None else [n for n in order if n in limits] + \
        [n for n in limits if n not in order]
    best = min(limits[n] for n in names)
    return best, next(n for n in names if limits[n] == best)


# ---------------------------------------------------------------- B_SLO for a TPOT target

@deployment_function
def step_time_pieces(dep: Deployment, context_len):
    """The decode step time of a dense model as a max of lines: T(B) = max_k (alpha_k + beta_k B).

    Derived in the chapter "SLOs and goodput" (notebooks/07_slos_and_goodput.ipynb).

    Parameters
    ----------
    model, accelerator : or one Deployment
    context_len : int
        As in :func:`servingmath.decode.decode_step_time` (a scalar).
    Deployment settings as keyword options (``overlap`` picks the pieces).

    Returns
    -------
    alpha, beta : ndarray
        Intercepts (s) and slopes (s per sequence) of the pieces: one for
        ``"additive"``, two for ``"roofline"``, four for ``"hybrid"``.

    Notes
    -----
    Every part of a dense decode step is affine in B: the weight read is a
    constant plus one gathered embedding row per sequence, the matmuls,
    attention and KV reads are proportional to B, and the all-reduces are
    2(N-1) alpha + a term proportional to B. Sums and maxima of affine
    functions are maxima of affine functions: additive = one line; roofline =
    max(weights + KV, matmuls + attention); hybrid = max(weights, matmuls) +
    max(KV, attention), four lines. Communication and overhead are added to
    every piece. The coefficients come from the step model
    (:func:`servingmath.decode.decode_coefficients`), not from differences.

    Raises
    ------
    ValueError
        For a mixture of experts, whose weight read grows with B (not affine):
        use :func:`max_batch_for_tpot` with ``method="numeric"``.

    Examples
    --------
    >>> a, b = step_time_pieces("Llama-3.1-8B", "H100", 2048, overlap="additive")
    >>> round(float(a[0]) * 1e3, 3), round(float(b[0]) * 1e6, 3)   # ms, us per sequence
    (4.481, 96.388)
    """
    if dep.model.is_moe:
        raise ValueError(f"model {dep.model.name} is a mixture of experts: the weight bytes a step "
                         "reads grow with the batch (more experts touched), so T(B) is not "
                         "piecewise linear. Use max_batch_for_tpot(..., method='numeric').")
    check_scalar("context_len", context_len)
    if not dep.is_scalar:
        raise ValueError("step_time_pieces needs one configuration: give scalar deployment settings")
    if not dep.allreduce.is_affine and np.any(np.asarray(dep.tensor_parallel) > 1):
        raise ValueError("allreduce_protocol = 'auto' makes T(B) the minimum over NCCL's protocols, not a "
                         "maximum of lines: give one protocol (allreduce_protocol='LL', 'LL128' or 'Simple') "
                         "for its pieces; tpot_batch_bound takes the best of the three itself")
    c = decode_coefficients(dep, context_len)
    icept = {"weight_memory": c["weight_memory"], "linear_compute": 0.0, "kv_memory": 0.0,
             "attention_compute": 0.0}
    slope = {"weight_memory": c["gather"], "linear_compute": c["linear"], "kv_memory": c["kv"],
             "attention_compute": c["attention"]}
    groups = {"additive": [[("weight_memory", "linear_compute", "kv_memory", "attention_compute")]],
              "roofline": [[("weight_memory", "kv_memory"), ("linear_compute", "attention_compute")]],
              "hybrid": [[("weight_memory",), ("linear_compute",)],
                         [("kv_memory",), ("attention_compute",)]]}[dep.overlap]
    pieces = [()]
    for alternatives in groups:
        pieces = [names + alt for names in pieces for alt in alternatives]
    base = float(c["communication"]) + float(c["overhead"])
    alpha = np.array([base + sum(float(icept[n]) for n in names) for names in pieces])
    beta = np.array([float(c["communication_per_sequence"]) + sum(float(slope[n]) for n in names)
                     for names in pieces])
    return alpha, beta


@deployment_function
def tpot_batch_bound(dep: Deployment, context_len, *, tpot_slo):
    """The closed form B* = min_k (tau - alpha_k) / beta_k: the real-valued batch at which T(B) = tau.

    Parameters
    ----------
    model, accelerator : or one Deployment
    context_len : int
        Tokens in each sequence's KV cache (a scalar).
    tpot_slo : float or array
        The TPOT target tau, seconds (keyword).

    Returns
    -------
    float or ndarray
        B* (not rounded; may be below 1 or negative when even a single
        sequence misses the target). ``inf`` if no piece grows with B.

    Notes
    -----
    T(B) = max_k (alpha_k + beta_k B) <= tau holds exactly when every piece is
    <= tau, i.e. B <= (tau - alpha_k) / beta_k for every k with beta_k > 0
    (pieces with beta_k = 0 only need alpha_k <= tau). For the hybrid model
    of a bandwidth-bound attention this is
    B* = min((tau - T_w) / m_kv, tau / (c_lin + m_kv)): the bandwidth left
    after the weight read, per sequence's KV read; or the compute-bound limit.
    Derived in the chapter "SLOs and goodput".

    Examples
    --------
    >>> round(tpot_batch_bound("Llama-3.1-8B", "A100", 2048, tpot_slo=0.030), 2)
    166.89
    """
    tau = check_positive("tpot_slo", tpot_slo)
    if not dep.allreduce.is_affine and np.any(np.asarray(dep.tensor_parallel) > 1):
        # T(B) = min over NCCL's protocols of T_p(B): T(B) <= tau where some T_p(B) <= tau
        return scalar_or_array(np.maximum.reduce([np.asarray(tpot_batch_bound(dep.replace(allreduce=a), context_len,
                                                                              tpot_slo=tau), dtype=float)
                                                  for a in dep.allreduce.fixed_protocols()]))
    alpha, beta = step_time_pieces(dep, context_len)
    t = tau[..., None]
    grows = beta > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = np.where(grows, (t - alpha) / np.where(grows, beta, 1.0),
                         np.where(alpha <= t, np.inf, -np.inf))
    return scalar_or_array(bound.min(axis=-1))


def _count_meeting(dep, context_len, tau, limit):
    """Number of batches 1..limit whose step time meets tau (T is non-decreasing in B).

    One vectorised evaluation up to 65,536 batches; above that, bisection on whole batches.
    """
    tau = np.asarray(tau, dtype=float)
    if limit <= 0:
        return np.zeros(tau.shape, dtype=np.int64)
    if limit <= _SEARCH_LIMIT:
        t = np.asarray(decode_step_time(dep, np.arange(1, limit + 1), context_len), dtype=float).reshape(-1)
        t = np.maximum.accumulate(t)          # guard against rounding
        return np.searchsorted(t, tau * (1 + 1e-12), side="right").astype(np.int64)
    lo = np.zeros(tau.shape, dtype=np.int64)          # T(lo) <= tau < T(hi); sentinels never evaluated
    hi = np.full(tau.shape, limit + 1, dtype=np.int64)
    while np.any(hi - lo > 1):
        active = hi - lo > 1
        mid = (lo + hi) // 2
        meets = np.asarray(decode_step_time(dep, np.maximum(mid, 1), context_len)) <= tau * (1 + 1e-12)
        lo = np.where(active & meets, mid, lo)
        hi = np.where(active & ~meets, mid, hi)
    return lo


@deployment_function
def max_batch_for_tpot(dep: Deployment, context_len, *, tpot_slo, max_batch=None, method="auto"):
    """B_SLO: the largest whole batch whose decode step meets the TPOT target, T(B) <= tau.

    Derived in the chapter "SLOs and goodput" (notebooks/07_slos_and_goodput.ipynb).

    The library's one implementation of "the largest batch under a TPOT
    target" (:func:`servingmath.parallelism.tpot_slo_batch_size` and
    :func:`servingmath.quantization.max_batch_at_tpot_slo` call it).

    Parameters
    ----------
    model, accelerator : or one Deployment
    context_len : int
        Tokens in each sequence's KV cache (a scalar).
    tpot_slo : float or array
        tau in seconds (keyword).
    max_batch : int, optional
        A cap (e.g. the memory wall, :func:`servingmath.memory.max_batch_size`).
        Without it the numeric search stops at 65536.
    method : {"auto", "closed_form", "numeric"}
        ``"closed_form"``: floor of :func:`tpot_batch_bound` (dense models, scalar settings);
        ``"numeric"``: count the batches B = 1, 2, ... that meet tau (any model);
        ``"auto"``: closed form where it applies, numeric otherwise.

    Returns
    -------
    int or ndarray of int
        B_SLO >= 0 (0: even one sequence misses tau). Non-decreasing in tau.

    Examples
    --------
    >>> int(max_batch_for_tpot("Llama-3.1-8B", "A100", 2048, tpot_slo=0.050))
    278
    >>> int(max_batch_for_tpot("Llama-3.1-8B", "A100", 2048, tpot_slo=0.050, max_batch=200))
    200
    >>> int(max_batch_for_tpot("Mixtral-8x7B", "H100", 2048, tpot_slo=0.050, max_batch=4096))   # numeric
    276
    """
    tau = check_positive("tpot_slo", tpot_slo)
    check_choice("method", method, ("auto", "closed_form", "numeric"))
    check_scalar("context_len", context_len)
    cap = None if max_batch is None else int(check_integer("max_batch", check_scalar("max_batch", max_batch),
                                                           minimum=0))
    if method == "auto":
        method = "numeric" if dep.model.is_moe or not dep.is_scalar else "closed_form"
    if method == "closed_form":
        bound = np.asarray(tpot_batch_bound(dep, context_len, tpot_slo=tau), dtype=float)
        b = np.floor(np.minimum(bound, 2.0**62) * (1.0 + _FLOOR_NUDGE))
        b = np.maximum(b, 0.0)
        if cap is not None:
            b = np.minimum(b, cap)
        b = b.astype(np.int64)
    else:
        b = _count_meeting(dep, context_len, tau, _SEARCH_LIMIT if cap is None else cap)
    return int_or_array(b)


# ---------------------------------------------------------------- a small analytic model of one replica

def wait_quantile(q, utilisation, mean_wait):
    """The q-quantile of the wait in queue, by the exponential-tail approximation (seconds).

    Derived in the chapter "SLOs and goodput" (notebooks/07_slos_and_goodput.ipynb).

    P(wait > w) ~ rho exp(-rho w / W) with rho the utilisation and W the mean
    wait: a wait is zero with probability 1 - rho (exact for M/G/1, by PASTA);
    given that it is positive it is taken as exponential with mean W / rho
    (exact for M/M/1, a heavy-traffic approximation otherwise). So
    w_q = (W / rho) ln(rho / (1 - q)) when q > 1 - rho, else 0.

    References
    ----------
    J. F. C. Kingman, "The single server queue in heavy traffic", Proc. Cambridge
    Phil. Soc. 57 (1961): the wait is asymptotically exponential as rho -> 1.

    >>> round(wait_quantile(0.99, 0.5, 0.025) * 1e3, 1)    # ms: M/D/1 at rho = 0.5, s = 50 ms
    195.6
    >>> wait_quantile(0.4, 0.5, 0.025)                      # 50 % of requests do not wait
    0.0
    """
    qq = as_array("q", q)
    if np.any((qq <= 0) | (qq >= 1)):
        raise ValueError(f"q must be in (0, 1), got {float(np.ravel(qq)[0]):g}")
    rho = check_nonnegative("utilisation", utilisation)
    w = check_nonnegative("mean_wait", mean_wait)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(rho + qq > 1, w / np.where(rho > 0, rho, 1.0)
                       * np.log(np.where(rho > 0, rho, 1.0) / (1 - qq)), 0.0)
    out = np.where(np.isinf(w), np.inf, np.maximum(out, 0.0))
    return scalar_or_array(out)


def _lengths(name, values, minimum):
    arr = np.atleast_1d(check_integer(name, values, minimum=minimum)).ravel().astype(np.int64)
    if arr.size == 0:
        raise ValueError(f"{name} must hold at least one length")
    return arr


def decode_context(prompt_lens, output_lens) -> float:
    """The mean context of the decode batch: S-bar = E[(L_o - 1)(L_p + L_o / 2)] / E[L_o - 1] tokens.

    A request decodes for L_o - 1 steps (its first token comes from the
    prefill) with contexts L_p + 1 ... L_p + L_o - 1, mean L_p + L_o / 2. The
    batch holds each request for a time proportional to its steps, so its
    mean context is weighted by them; for fixed lengths it is L_p + L_o / 2.
    Long answers count more: with independent lengths S-bar exceeds
    E[L_p] + E[L_o] / 2 by about Var(L_o) / (2 E[L_o]) (the inspection paradox).
    Derived in the chapter "Capacity planning".

    >>> decode_context(1000, 200), decode_context([1000, 1000], [100, 300])
    (1100.0, 1125.1256281407036)
    """
    lp = _lengths("prompt_lens", prompt_lens, 1)
    lo = _lengths("output_lens", output_lens, 1)
    lp, lo = np.broadcast_arrays(lp, lo) if 1 in (lp.size, lo.size) else (lp, lo)
    if lp.size != lo.size:
        raise ValueError(f"prompt_lens and output_lens must have the same length, got {lp.size} and {lo.size}")
    steps = lo - 1.0
    if steps.sum() <= 0:
        raise ValueError("output_lens must average more than 1 token: with single-token answers there is "
                         "no decode")
    return float((steps * (lp + lo / 2.0)).sum() / steps.sum())


def _default_context(prompt_lens, output_lens) -> int:
    """The replica model's one default decode context: :func:`decode_context` rounded to a token."""
    return int(round(decode_context(prompt_lens, output_lens)))


def _prefill_times(dep, prompt_lens):
    """Prefill time of each prompt alone (one evaluation per distinct length)."""
    unique, inverse = np.unique(prompt_lens, return_inverse=True)
    tp = np.atleast_1d(np.asarray(prefill_time(dep, unique), dtype=float))
    return tp[inverse]


@deployment_function
def replica_steady_state(dep: Deployment, batch_size, prompt_lens, output_lens, *, context_len=None,
                         quantile=0.99) -> dict:
    """One replica in steady state with ``batch_size`` sequences decoding, for a mix of request lengths.

    The library's one analytic model of a replica (:func:`steady_state`,
    :func:`request_latencies` and :func:`servingmath.capacity.replica_curves`
    use it): each request is prefilled alone and first (prefill time t_p(L_p),
    the GPU does nothing else meanwhile), then decodes its L_o - 1 further
    tokens in a batch of B sequences (step time T(B) at the mean decode
    context). Prefills queue as an M/G/1 queue.

    Parameters
    ----------
    model, accelerator : or one Deployment
    batch_size : int or array of int
        B, sequences decoding at once (the mean over time).
    prompt_lens, output_lens : int or array of int
        The workload: one entry per request (or one number for all); L_o >= 2 on average.
    context_len : int, optional
        Tokens in each sequence's KV cache for T(B); default the length-biased
        mean context of the decode batch, rounded (:func:`decode_context`).
    quantile : float in (0, 1)
        Which TTFT quantile ``ttft_quantile`` reports (default P99).

    Returns
    -------
    dict
        ``rate`` (req/s), ``utilisation`` (rho, share of GPU time in prefill),
        ``tpot`` (s), ``ttft`` (mean, s), ``ttft_quantile`` (s), ``mean_wait``
        (W, s), ``throughput`` (output tok/s), ``step_time`` (T(B), s), and the
        scalars ``prefill_mean`` (E[t_p]), ``prefill_mean_square`` (E[t_p^2]),
        ``prefill_quantile`` (t_p at the prompt quantile), ``decode_context``.

    Notes
    -----
    GPU time per second: rate x E[t_p] on prefills, the rest on decode steps
    of B tokens, which must make the rate x (E[L_o] - 1) decode tokens:

        rate = B / ((E[L_o] - 1) T(B) + B E[t_p]),   rho = rate E[t_p],
        TPOT = T(B) / (1 - rho)     (decode pauses while prefills run),
        W = rate E[t_p^2] / (2 (1 - rho))   (Pollaczek-Khinchine; M/D/1 for one length),
        TTFT = E[t_p] + W,  TTFT_q = t_p(L_p,q) + w_q   (:func:`wait_quantile`).

    rho < 1 at every B. The wait for the decode step in flight (< T(B)) is
    left out. Derived in the chapter "SLOs and goodput".

    Examples
    --------
    >>> s = replica_steady_state("Llama-3.1-8B", "A100", 64, 1024, 256)
    >>> round(s["rate"], 2), round(s["tpot"] * 1e3, 2), round(s["ttft"] * 1e3, 1)
    (10.54, 23.82, 69.3)
    """
    lp = _lengths("prompt_lens", prompt_lens, 1)
    lo = _lengths("output_lens", output_lens, 1)
    if lp.size != lo.size and 1 not in (lp.size, lo.size):
        raise ValueError(f"prompt_lens and output_lens must have the same length (or one of them one "
                         f"entry), got {lp.size} and {lo.size}")
    if lo.mean() < 2:
        raise ValueError(f"output_lens must average >= 2 tokens (a decode phase), got {lo.mean():g}")
    q = float(as_array("quantile", quantile))
    if not 0 < q < 1:
        raise ValueError(f"quantile must be in (0, 1), got {q:g}")
    b = check_integer("batch_size", batch_size, minimum=1)
    context = _default_context(lp, lo) if context_len is None else context_len
    step = np.asarray(decode_step_time(dep, b, context), dtype=float)
    tp = _prefill_times(dep, lp)
    e_tp, e_tp2 = float(tp.mean()), float((tp ** 2).mean())
    tp_q = float(np.quantile(tp, q))
    steps = float(lo.mean()) - 1.0
    rate = b / (steps * step + b * e_tp)
    rho = rate * e_tp
    wait = rate * e_tp2 / (2.0 * (1.0 - rho))
    out = {
        "batch_size": b.astype(np.int64) if b.ndim else int(b),
        "rate": rate, "utilisation": rho, "tpot": step / (1.0 - rho), "ttft": e_tp + wait,
        "ttft_quantile": np.asarray(wait_quantile(q, rho, wait), dtype=float) + tp_q,
        "mean_wait": wait, "throughput": rate * float(lo.mean()), "step_time": step,
    }
    out = {k: (v if k == "batch_size" else scalar_or_array(v)) for k, v in out.items()}
    out.update(prefill_mean=e_tp, prefill_mean_square=e_tp2, prefill_quantile=tp_q, decode_context=context)
    return out


@deployment_function
def steady_state(dep: Deployment, batch_size, prompt_len, output_len, *, context_len=None) -> dict:
    """One replica in steady state with ``batch_size`` sequences decoding: rate, TPOT and TTFT.

    :func:`replica_steady_state` for requests that are all alike (L_p, L_o >= 2):
    prefills then form an M/D/1 queue.

    Parameters
    ----------
    model, accelerator : or one Deployment
    batch_size : int or array of int
        B, sequences decoding at once (the mean over time).
    prompt_len, output_len : int
        L_p and L_o (>= 2) of every request.
    context_len : int, optional
        Tokens in each sequence's KV cache for T(B); default the decode batch's
        mean context L_p + L_o / 2, rounded as :func:`replica_steady_state` rounds it.

    Returns
    -------
    dict
        ``rate`` (req/s), ``utilisation`` (rho), ``tpot`` (s), ``ttft`` (mean, s),
        ``ttft_p99`` (99th percentile, s), ``throughput`` (output tok/s),
        ``step_time`` (T(B), s), ``prefill_time`` (t_p, s).

    Notes
    -----
    rate = B / ((L_o - 1) T(B) + B t_p), rho = rate t_p, TPOT = T(B) / (1 - rho),
    TTFT = t_p + rho t_p / (2 (1 - rho)) (M/D/1 mean wait). Derived in the
    chapter "SLOs and goodput".

    Examples
    --------
    >>> s = steady_state("Llama-3.1-8B", "A100", 64, prompt_len=1024, output_len=256)
    >>> round(s["rate"], 2), round(s["tpot"] * 1e3, 2), round(s["ttft"] * 1e3, 1)
    (10.54, 23.82, 69.3)
    """
    lp = int(check_integer("prompt_len", check_scalar("prompt_len", prompt_len), minimum=1))
    lo = int(check_integer("output_len", check_scalar("output_len", output_len), minimum=2))
    r = replica_steady_state(dep, batch_size, lp, lo, context_len=context_len, quantile=0.99)
    keys = ("rate", "utilisation", "tpot", "ttft", "throughput", "step_time")
    result = {k: r[k] for k in keys}
    result["ttft_p99"] = r["ttft_quantile"]
    result["prefill_time"] = scalar_or_array(np.full(np.shape(r["step_time"]), r["prefill_mean"]))
    order = ("rate", "utilisation", "tpot", "ttft", "ttft_p99", "throughput", "step_time", "prefill_time")
    return {k: result[k] for k in order}


@deployment_function
def max_batch_for_slos(dep: Deployment, prompt_len, output_len, *, tpot_slo=None, ttft_slo=None,
                       max_batch=None, context_len=None, ttft_statistic="p99") -> dict:
    """The largest batch that meets a TPOT and a TTFT target in :func:`steady_state`, and which limit binds.

    Derived in the chapter "SLOs and goodput" (notebooks/07_slos_and_goodput.ipynb).

    Parameters
    ----------
    model, accelerator : or one Deployment
    prompt_len, output_len : int
        As in :func:`steady_state`.
    tpot_slo, ttft_slo : float or None
        Targets in seconds (None: no target), compared with the steady state:
        TPOT including prefill pauses (every request sees the same TPOT in
        this model), and the TTFT statistic below.
    ttft_statistic : {"p99", "mean"}
        Which TTFT must meet ``ttft_slo``: the 99th percentile (as MLPerf's
        server scenario requires) or the mean.
    max_batch : int, optional
        The memory wall; default :func:`servingmath.memory.max_batch_size` at
        the context length (that of :func:`steady_state` unless given).
    context_len : int, optional

    Returns
    -------
    dict
        ``batch_size`` (the largest allowed, 0 if none), ``binding`` (``"tpot"``,
        ``"ttft"`` or ``"memory"``: the limit that sets it; on a tie the memory
        wall is named first, then TPOT; :func:`binding_limit`), ``tpot_limit``,
        ``ttft_limit``, ``memory_limit`` (the batch each allows alone) and the
        steady state at ``batch_size``.

    Examples
    --------
    >>> r = max_batch_for_slos("Llama-3.1-8B", "H100", 8192, 128, tpot_slo=0.05, ttft_slo=1.0)
    >>> r["batch_size"], r["binding"], r["tpot_limit"], r["memory_limit"]
    (24, 'ttft', 33, 51)
    """
    check_choice("ttft_statistic", ttft_statistic, ("p99", "mean"))
    lp = int(check_integer("prompt_len", check_scalar("prompt_len", prompt_len), minimum=1))
    lo = int(check_integer("output_len", check_scalar("output_len", output_len), minimum=2))
    s = _default_context(lp, lo) if context_len is None else int(check_integer("context_len", context_len,
                                                                                 minimum=0))
    if max_batch is None:
        max_batch = int(max_batch_size(dep, max(s, 1)))
    cap = int(check_integer("max_batch", check_scalar("max_batch", max_batch), minimum=0))
    limits = {"memory": cap}
    if cap == 0:
        limits.update(tpot=0, ttft=0)
    else:
        state = steady_state(dep, np.arange(1, cap + 1), lp, lo, context_len=s)
        column = {"tpot": "tpot", "ttft": "ttft" if ttft_statistic == "mean" else "ttft_p99"}
        for name, slo in (("tpot", tpot_slo), ("ttft", ttft_slo)):
            if slo is None:
                limits[name] = cap
            else:
                tau = check_positive(f"{name}_slo", slo, scalar=True)
                values = np.maximum.accumulate(np.atleast_1d(state[column[name]]))
                limits[name] = int(np.searchsorted(values, tau, side="right"))
    best, binding = binding_limit(limits, order=("memory", "tpot", "ttft"))
    result = {"batch_size": best, "binding": binding, "tpot_limit": limits["tpot"],
              "ttft_limit": limits["ttft"], "memory_limit": limits["memory"]}
    if best > 0:
        result.update(steady_state(dep, best, lp, lo, context_len=s))
    return result


@deployment_function
def request_latencies(dep: Deployment, rates, prompt_lens, output_lens, *, max_batch=None, seed=0) -> dict:
    """Per-request TTFT, TPOT and E2E latency of a workload at each request rate (analytic model).

    Derived in the chapter "SLOs and goodput" (notebooks/07_slos_and_goodput.ipynb).

    The mean-value model of :func:`replica_steady_state`, solved for the batch
    at a given rate (the simulator chapters replace it):

    * decode: the mean batch B follows from Little's law, rate (E[L_o] - 1) =
      B (1 - rho) / T(B), with T at the decode batch's length-biased mean
      context (:func:`decode_context`, as in :func:`replica_steady_state`);
      every request sees TPOT = T(B) / (1 - rho) (prefills pause decoding);
    * prefill: requests are prefilled first, one at a time, as an M/G/1 queue
      with service times t_p(L_p): rho = rate E[t_p], mean wait
      W = rate E[t_p^2] / (2 (1 - rho)) (Pollaczek-Khinchine). Each request's
      wait is drawn from the usual exponential-tail approximation,
      P(wait > w) = rho exp(-rho w / W) (exact for M/M/1; mean W; P(wait > 0) = rho);
    * TTFT_i = wait_i + t_p(L_p,i); E2E_i = TTFT_i + (L_o,i - 1) TPOT.

    At a rate the replica cannot sustain (rho >= 1 or B beyond ``max_batch``)
    the queue grows without bound: every latency is ``inf``.

    Parameters
    ----------
    rates : float or array
        Request arrival rates, req/s (> 0).
    prompt_lens, output_lens : array of int
        The workload: one entry per request (output lengths >= 1).
    max_batch : int, optional
        Memory wall; default :func:`servingmath.memory.max_batch_size` at the mean context.
    seed : int
        Seeds the uniform numbers that place each request in the wait distribution
        (the same numbers at every rate, so latencies grow with the rate).

    Returns
    -------
    dict
        ``ttft``, ``tpot``, ``e2el``: arrays of shape (n_rates, n_requests) in s
        (1-D for a scalar rate); ``batch_size``, ``utilisation``,
        ``duration`` (n_requests / rate: the span over which the requests
        arrive), ``stable`` (bool): one per rate; ``max_rate``: the highest
        sustainable rate (req/s).

    Examples
    --------
    >>> r = request_latencies("Llama-3.1-8B", "A100", 10.0, [1024] * 4, [256] * 4)
    >>> round(float(r["tpot"][0]) * 1e3, 2), round(r["max_rate"], 1)
    (21.39, 12.8)
    """
    lam = np.atleast_1d(check_positive("rates", rates)).astype(float)
    lp = check_integer("prompt_lens", np.atleast_1d(prompt_lens), minimum=1).ravel()
    lo = check_integer("output_lens", np.atleast_1d(output_lens), minimum=1).ravel()
    if lp.size != lo.size or lp.size == 0:
        raise ValueError(f"prompt_lens and output_lens must be non-empty and of equal length, "
                         f"got {lp.size} and {lo.size}")
    # the replica model's context (single-token answers alone have no decode: their mean prompt)
    s_mean = _default_context(lp, lo) if np.any(lo > 1) else int(round(float(lp.mean())))
    if max_batch is None:
        max_batch = int(max_batch_size(dep, s_mean))
    cap = int(check_integer("max_batch", max_batch, minimum=1))
    tp = _prefill_times(dep, lp)
    e_tp, e_tp2 = float(tp.mean()), float((tp**2).mean())
    decode_tokens = float(lo.mean() - 1)
    b_grid = np.arange(1, cap + 1, dtype=float)
    t_grid = np.maximum.accumulate(np.atleast_1d(np.asarray(
        decode_step_time(dep, b_grid.astype(np.int64), s_mean), dtype=float)))
    rate_grid = b_grid / (decode_tokens * t_grid + b_grid * e_tp)       # increasing in B
    rho = lam * e_tp
    stable = (rho < 1) & (lam <= rate_grid[-1])
    safe_rho = np.where(stable, rho, 0.5)
    # mean batch: below one sequence the lone sequence decodes at T(1)
    # T(B) is taken piecewise linear between whole batch sizes; within the segment that holds
    # the rate, B (1 - rho) = rate m (T_i + slope (B - B_i)) is linear in B: solve it exactly
    low = lam <= rate_grid[0]
    i = np.clip(np.searchsorted(rate_grid, lam) - 1, 0, max(cap - 2, 0))
    j = np.minimum(i + 1, cap - 1)
    slope = np.where(j > i, (t_grid[j] - t_grid[i]), 0.0)
    served = lam * decode_tokens
    with np.errstate(divide="ignore", invalid="ignore"):
        b_seg = served * (t_grid[i] - slope * b_grid[i]) / ((1 - safe_rho) - served * slope)
    b_mean = np.where(low, served * t_grid[0] / (1 - safe_rho), b_seg)
    step = np.where(low, t_grid[0], t_grid[i] + slope * (b_mean - b_grid[i]))
    tpot_all = step / (1 - safe_rho)
    wait_mean = lam * e_tp2 / (2 * (1 - safe_rho))
    u = np.random.default_rng(seed).random(lp.size)
    scale = (wait_mean / safe_rho)[:, None]
    wait = np.maximum(0.0, scale * np.log(safe_rho[:, None] / (1 - u[None, :])))   # wait_quantile(u)
    ttft = wait + tp[None, :]
    tpot = np.where(lo[None, :] > 1, tpot_all[:, None], 0.0)
    e2el = ttft + (lo[None, :] - 1) * tpot
    bad = ~stable[:, None]
    ttft, tpot, e2el = (np.where(bad, np.inf, a) for a in (ttft, tpot, e2el))
    result = {"ttft": ttft, "tpot": tpot, "e2el": e2el,
              "batch_size": np.where(stable, b_mean, np.nan), "utilisation": rho,
              "duration": lp.size / lam, "stable": stable,
              "max_rate": float(min(rate_grid[-1], 1.0 / e_tp))}
    if np.ndim(rates) == 0:
        for k in ("ttft", "tpot", "e2el"):
            result[k] = result[k][0]
        for k in ("batch_size", "utilisation", "duration"):
            result[k] = float(result[k][0])
        result["stable"] = bool(result["stable"][0])
    return result


# ---------------------------------------------------------------- goodput

def _latencies(name, value, nan_ok=False):
    """Latencies: non-negative, +inf allowed (a request that never finished); NaN rejected,
    except in TPOT (``nan_ok``), where it marks a one-token request, which meets every target."""
    if value is None or isinstance(value, (str, bytes)):
        raise ValueError(f"{name} must be an array of latencies in seconds, got {value!r}")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of latencies in seconds, got {value!r}") from None
    if arr.size and np.any(np.isnan(arr)):
        if not nan_ok:
            raise ValueError(f"{name} must not contain NaN")
        arr = np.nan_to_num(arr, nan=0.0, posinf=np.inf)
    if arr.size and np.any(arr < 0):
        raise ValueError(f"{name} must be >= 0, got {float(arr[arr < 0].flat[0]):g}")
    return np.atleast_1d(arr)


def meets_slo(ttft=None, tpot=None, *, ttft_slo=None, tpot_slo=None, e2el=None, e2el_slo=None):
    """Which requests meet every SLO given: value <= target for each (metric, target) pair.

    Derived in the chapter "SLOs and goodput" (notebooks/07_slos_and_goodput.ipynb).

    Parameters
    ----------
    ttft, tpot, e2el : array of float, seconds
        Per-request TTFT, TPOT (0 or NaN for one-token requests: met) and end-to-end latency.
    ttft_slo, tpot_slo, e2el_slo : float or None
        Targets in seconds; a metric without a target is not checked.

    Returns
    -------
    ndarray of bool

    Examples
    --------
    >>> meets_slo([0.2, 0.9], [0.03, 0.03], ttft_slo=0.5, tpot_slo=0.05)
    array([ True, False])
    """
    checks = {}
    for metric, values, slo in (("ttft", ttft, ttft_slo), ("tpot", tpot, tpot_slo), ("e2el", e2el, e2el_slo)):
        if slo is None:
            continue
        if values is None:
            raise ValueError(f"{metric}_slo = {slo!r} is given but {metric} is missing")
        target = check_positive(f"{metric}_slo", slo, scalar=True)
        checks[metric] = _latencies(metric, values, nan_ok=metric == "tpot").ravel() <= target
    if not checks:
        raise ValueError("give at least one target: ttft_slo, tpot_slo or e2el_slo")
    check_same_size(**checks)
    return np.logical_and.reduce(list(checks.values()))


def slo_attainment(ttft=None, tpot=None, *, ttft_slo=None, tpot_slo=None, e2el=None, e2el_slo=None):
    """The fraction of requests that meet every SLO given (0 to 1).

    Derived in the chapter "SLOs and goodput" (notebooks/07_slos_and_goodput.ipynb).

    >>> slo_attainment([0.2, 0.9, 0.3, 0.4], ttft_slo=0.5)
    0.75
    """
    ok = meets_slo(ttft, tpot, ttft_slo=ttft_slo, tpot_slo=tpot_slo, e2el=e2el, e2el_slo=e2el_slo)
    if ok.size == 0:
        given = [m for m, v in (("ttft", ttft), ("tpot", tpot), ("e2el", e2el)) if v is not None]
        raise ValueError(f"{' and '.join(given)} hold no requests: attainment is undefined")
    return float(ok.mean())


def request_throughput(n_requests, duration, n_gpus=1):
    """Completed requests per second (per GPU with ``n_gpus``): n / duration / n_gpus.

    Derived in the chapter "Interview rehearsal" (notebooks/17_interview_rehearsal.ipynb).

    >>> request_throughput(120, 60.0)
    2.0
    """
    n = check_integer("n_requests", n_requests, minimum=0)
    d = check_positive("duration", duration)
    g = check_integer("n_gpus", n_gpus, minimum=1)
    return scalar_or_array(n / d / g)


def request_goodput(ttft=None, tpot=None, duration=None, *, ttft_slo=None, tpot_slo=None,
                    e2el=None, e2el_slo=None, n_gpus=1) -> float:
    """vLLM's request goodput: requests that meet every SLO, per second (per GPU with ``n_gpus``).

    Derived in the chapter "Interview rehearsal" (notebooks/17_interview_rehearsal.ipynb).

    Parameters
    ----------
    ttft, tpot, e2el : array of float
        Per-request latencies in seconds, for the completed requests of a run.
    duration : float
        Length of the run in seconds.
    ttft_slo, tpot_slo, e2el_slo : float or None
        Targets in seconds (vLLM takes them in ms on its command line).
    n_gpus : int

    Returns
    -------
    float
        good requests / duration / n_gpus; never more than :func:`request_throughput`.

    References
    ----------
    vLLM ``benchmarks/benchmark_serving.py``, ``calculate_metrics`` (``request_goodput
    = good_completed / dur_s``; a request is good when every given SLO >= its
    metric), read 2026-11.

    Examples
    --------
    >>> request_goodput([0.2, 0.5, 0.9], [0.02, 0.05, 0.02], 3.0, ttft_slo=0.5, tpot_slo=0.05)
    0.6666666666666666
    """
    if duration is None:
        raise ValueError("duration (seconds) is required: goodput is a rate")
    d = check_positive("duration", duration, scalar=True)
    g = check_integer("n_gpus", n_gpus, minimum=1, scalar=True)
    ok = meets_slo(ttft, tpot, ttft_slo=ttft_slo, tpot_slo=tpot_slo, e2el=e2el, e2el_slo=e2el_slo)
    return float(ok.sum() / d / g)


def token_goodput(output_lens, ttft=None, tpot=None, duration=None, *, ttft_slo=None, tpot_slo=None,
                  e2el=None, e2el_slo=None, n_gpus=1) -> float:
    """Output tokens of the requests that meet every SLO, per second (per GPU with ``n_gpus``).

    Derived in the chapter "SLOs and goodput" (notebooks/07_slos_and_goodput.ipynb).

    >>> token_goodput([100, 300], [0.2, 0.9], duration=2.0, ttft_slo=0.5)
    50.0
    """
    if duration is None:
        raise ValueError("duration (seconds) is required: goodput is a rate")
    d = check_positive("duration", duration, scalar=True)
    g = check_integer("n_gpus", n_gpus, minimum=1, scalar=True)
    lens = np.atleast_1d(check_integer("output_lens", output_lens, minimum=0))
    ok = meets_slo(ttft, tpot, ttft_slo=ttft_slo, tpot_slo=tpot_slo, e2el=e2el, e2el_slo=e2el_slo)
    if ok.shape != lens.shape:
        raise ValueError(f"output_lens has {lens.size} entries but the latencies have {ok.size}")
    return float(lens[ok].sum() / d / g)


def distserve_goodput(rates, attainment, target=0.9, n_gpus=1, interpolate=True) -> float:
    """DistServe's goodput: the highest request rate at which >= ``target`` of requests meet the SLOs.

    Derived in the chapter "SLOs and goodput" (notebooks/07_slos_and_goodput.ipynb).

    Parameters
    ----------
    rates : array of float
        Request rates tried (req/s), any order.
    attainment : array of float
        The SLO attainment (0 to 1) measured at each rate (:func:`slo_attainment`).
    target : float in (0, 1]
        The attainment goal (DistServe uses 90 % in most experiments).
    n_gpus : int
        GPUs serving the rates; the result is per GPU.
    interpolate : bool
        True: interpolate linearly between the last rate that meets the goal
        and the first that misses it. False: the highest tried rate that meets it.

    Returns
    -------
    float
        req/s (per GPU); 0.0 if even the lowest rate misses the goal. Only the
        rates up to the first miss count: a rate above a miss that happens to
        meet the goal again (noise) does not raise the goodput.

    References
    ----------
    Y. Zhong et al., "DistServe: Disaggregating Prefill and Decoding for
    Goodput-optimized Large Language Model Serving", OSDI 2024 (arXiv:2401.09670):
    "the maximum request rate that can be served adhering to the SLO
    attainment goal (say, 90 %)", reported per GPU.

    Examples
    --------
    >>> distserve_goodput([1, 2, 3, 4], [1.0, 0.95, 0.85, 0.5])
    2.5
    >>> distserve_goodput([1, 2, 3, 4], [1.0, 0.95, 0.85, 0.5], interpolate=False, n_gpus=2)
    1.0
    """
    r = check_positive("rates", rates).ravel()
    a = as_array("attainment", attainment).ravel()
    if r.size != a.size or r.size == 0:
        raise ValueError(f"rates and attainment must be non-empty and of equal length, "
                         f"got {r.size} and {a.size}")
    if np.any((a < 0) | (a > 1)):
        raise ValueError(f"attainment must be in [0, 1], got {float(a[(a < 0) | (a > 1)][0]):g}")
    goal = float(check_fraction("target", target))
    g = int(check_integer("n_gpus", n_gpus, minimum=1))
    order = np.argsort(r, kind="stable")
    r, a = r[order], a[order]
    miss = np.flatnonzero(a < goal)
    if miss.size == 0:
        best = r[-1]
    elif miss[0] == 0:
        best = 0.0
    else:
        i = miss[0]
        best = r[i - 1]
        if interpolate:
            best = r[i - 1] + (a[i - 1] - goal) / (a[i - 1] - a[i]) * (r[i] - r[i - 1])
    return float(best / g)
