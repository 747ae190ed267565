"""Queueing closed forms: one server, many servers, bursty arrivals, priorities and overload.

A server that receives requests at rate lambda (requests/s) and needs a mean
service time s (seconds) per request is busy a fraction rho = lambda s of the
time, its *utilisation*. One server (an LLM instance that serves one request,
or one prefill, at a time) with Poisson arrivals is the M/G/1 queue, whose mean
wait in the queue is the Pollaczek-Khinchine formula

    W_q = lambda E[S^2] / (2 (1 - rho)) = rho s (1 + C_s^2) / (2 (1 - rho)),

with C_s = std(S) / s the coefficient of variation of the service time.
Deterministic service (C_s = 0) is M/D/1, exponential service (C_s = 1) is
M/M/1; the M/D/1 queue waits half as long as the M/M/1 queue.

The wait grows like 1 / (1 - rho): *hyperbolically*, not "exponentially".
Halving the idle fraction 1 - rho doubles the wait; at rho -> 1 it diverges.

Conventions
-----------
* Rates in requests per second, times in seconds (SI), everywhere.
* Every queue is parameterised by its arrival rate and its *mean service
  time* ``service_time`` (the M/M/1 service rate is mu = 1 / service_time).
* A queue with rho >= 1 is unstable: its queue grows without bound, and
  every mean, quantile and probability of waiting that depends on a
  steady state is returned as ``inf`` (so that a curve against the arrival
  rate can be plotted straight through saturation). A negative rate or a
  non-positive service time raises ``ValueError`` naming the parameter.
* Functions take scalars or numpy arrays and broadcast; scalars in give a
  Python float out.

What is here
------------
* One server, Poisson arrivals: utilisation, Little's law, the M/M/1 and
  M/D/1 means and M/M/1 distribution, Pollaczek-Khinchine (M/G/1), and a
  prefill server as an M/D/1 queue (DistServe) (chapter "Queueing").
* The whole M/D/1 waiting-time distribution, Erlang's formula evaluated
  exactly (:func:`md1_wait_cdf`, :func:`md1_wait_quantile`).
* c servers and one queue, M/M/c: Erlang's C formula, the mean wait and the
  wait quantiles; one pooled queue against c separate M/M/1 queues; the
  square-root staffing rule (Halfin-Whitt) and the exact smallest c.
* Bursty arrivals: Kingman's G/G/1 heavy-traffic approximation, and the
  exact GI/M/1 wait for gamma inter-arrival times (``vllm bench serve
  --burstiness``).
* Priority classes: the non-preemptive priority M/G/1 queue (Cobham).
* Overload: the backlog grows at lambda - c mu; the time to drain it.

Examples
--------
>>> md1_mean_wait(arrival_rate=8.0, service_time=0.1)     # rho = 0.8
0.2
>>> mm1_mean_wait(8.0, 0.1)                               # twice the M/D/1 wait
0.4
>>> round(mm1_sojourn_quantile(0.99, 8.0, 0.1), 3)        # P99 = ln(100) / (mu - lambda)
2.303
>>> mm1_mean_wait(12.0, 0.1)                              # rho = 1.2: unstable
inf

References
----------
* L. Kleinrock, *Queueing Systems, Volume 1: Theory*, Wiley, 1975: M/M/1
  (sec. 3.2), M/G/1 and the Pollaczek-Khinchine mean-value formula (ch. 5).
* J. D. C. Little, "A Proof for the Queuing Formula L = lambda W",
  Operations Research 9(3), 1961.
* Y. Zhong et al., "DistServe: Disaggregating Prefill and Decoding for
  Goodput-optimized Large Language Model Serving", OSDI 2024, sec. 3.1:
  the prefill instance as an M/D/1 queue, Avg_TTFT = D + R D^2 / (2 (1 - R D)).
* The later sections cite their own sources: Erlang (1909, 1917) and
  Crommelin (1932) for M/D/1 and M/M/c, Franx (2001), Kingman (1961, 1964),
  Halfin and Whitt (1981), Cobham (1954), Newell (1982).
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from typing import NamedTuple

import numpy as np

from ._validation import as_array, check_integer, check_nonnegative, check_positive, scalar_or_array

__all__ = [
    "utilisation",
    "littles_law",
    "mm1_mean_wait",
    "mm1_mean_sojourn",
    "mm1_sojourn_cdf",
    "mm1_sojourn_quantile",
    "mm1_wait_quantile",
    "md1_mean_wait",
    "mg1_mean_wait",
    "md1_max_arrival_rate",
    "mm1_max_arrival_rate",
    "prefill_mean_ttft",
    "prefill_max_arrival_rate",
    "md1_wait_cdf",
    "md1_wait_quantile",
    "erlang_c",
    "mmc_mean_wait",
    "mmc_wait_cdf",
    "mmc_wait_quantile",
    "PoolingComparison",
    "pooling_comparison",
    "halfin_whitt_wait_probability",
    "square_root_staffing",
    "erlang_c_servers",
    "kingman_mean_wait",
    "gamma_m1_mean_wait",
    "priority_mean_waits",
    "backlog_growth_rate",
    "backlog_after",
    "drain_time",
    "burst_drain_time",
]


def _rates(arrival_rate, service_time):
    lam = check_nonnegative("arrival_rate", arrival_rate)
    s = check_positive("service_time", service_time)
    return lam, s


def _quantile(q):
    arr = as_array("quantile", q)
    if arr.size and np.any((arr <= 0) | (arr >= 1)):
        bad = arr[(arr <= 0) | (arr >= 1)].flat[0]
        raise ValueError(f"quantile must be in (0, 1), e.g. 0.99 for P99; got {bad:g}")
    return arr


def _unstable_to_inf(value, rho):
    """Replace the steady-state value by inf where rho >= 1 (no steady state)."""
    return np.where(rho >= 1, np.inf, value)


def utilisation(arrival_rate, service_time):
    """Fraction of time one server is busy: rho = lambda x s.

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    Parameters
    ----------
    arrival_rate : float or array
        Requests per second, lambda >= 0.
    service_time : float or array
        Mean seconds of service per request, s > 0.

    Returns
    -------
    float or ndarray
        rho (dimensionless). rho >= 1 means the server cannot keep up.

    Examples
    --------
    >>> utilisation(8.0, 0.1)
    0.8
    """
    lam, s = _rates(arrival_rate, service_time)
    return scalar_or_array(lam * s)


def littles_law(arrival_rate, mean_time_in_system):
    """Mean number of requests in a system: L = lambda x W (Little's law).

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    Holds for any stable system in steady state, whatever the arrival and
    service distributions or the scheduling policy: e.g. the mean number of
    requests in a serving engine is the request rate times the mean E2E latency.

    Examples
    --------
    >>> littles_law(20.0, 1.5)   # 20 requests/s, each inside for 1.5 s
    30.0
    """
    lam = check_nonnegative("arrival_rate", arrival_rate)
    w = check_nonnegative("mean_time_in_system", mean_time_in_system)
    return scalar_or_array(lam * w)


def mm1_mean_wait(arrival_rate, service_time):
    """Mean wait in the queue (before service) of the M/M/1 queue: W_q = rho s / (1 - rho).

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    ``inf`` where rho >= 1.

    Notes
    -----
    With mu = 1/s: W_q = lambda / (mu (mu - lambda)). Kleinrock (1975), eq. 3.26.

    Examples
    --------
    >>> mm1_mean_wait(0.5, 1.0)
    1.0
    """
    lam, s = _rates(arrival_rate, service_time)
    rho = lam * s
    with np.errstate(divide="ignore", invalid="ignore"):
        w = _unstable_to_inf(rho * s / (1 - rho), rho)
    return scalar_or_array(w)


def mm1_mean_sojourn(arrival_rate, service_time):
    """Mean time in the M/M/1 system (wait + service): W = s / (1 - rho) = 1 / (mu - lambda).

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    ``inf`` where rho >= 1.

    Examples
    --------
    >>> mm1_mean_sojourn(0.5, 1.0)
    2.0
    """
    lam, s = _rates(arrival_rate, service_time)
    rho = lam * s
    with np.errstate(divide="ignore", invalid="ignore"):
        w = _unstable_to_inf(s / (1 - rho), rho)
    return scalar_or_array(w)


def mm1_sojourn_cdf(t, arrival_rate, service_time):
    """P(time in system <= t) for the M/M/1 queue (FCFS): 1 - exp(-(mu - lambda) t).

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    The sojourn time of M/M/1 FCFS is exponential with rate mu - lambda
    (Kleinrock 1975, eq. 3.28). Where rho >= 1 the probability is 0 for every t.

    Examples
    --------
    >>> round(mm1_sojourn_cdf(2.0, 0.5, 1.0), 4)   # 1 - e^-1
    0.6321
    """
    x = check_nonnegative("t", t)
    lam, s = _rates(arrival_rate, service_time)
    rho = lam * s
    rate = 1 / s - lam
    with np.errstate(over="ignore", invalid="ignore"):
        p = np.where(rho >= 1, 0.0, -np.expm1(-np.maximum(rate, 0.0) * x))
    return scalar_or_array(p)


def mm1_sojourn_quantile(q, arrival_rate, service_time):
    """Quantile of the M/M/1 (FCFS) time in system: -ln(1 - q) / (mu - lambda).

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    P50 = ln 2 / (mu - lambda), P99 = ln 100 / (mu - lambda) = 4.61 x the mean
    (the mean is 1 / (mu - lambda)). ``inf`` where rho >= 1.

    Parameters
    ----------
    q : float or array in (0, 1)
        The quantile: 0.5 for the median (P50), 0.99 for P99. First, as in
        :func:`md1_wait_cdf`'s t (the point, then the queue).
    arrival_rate, service_time : float or array
        lambda (requests/s, >= 0) and s (seconds, > 0).

    Examples
    --------
    >>> round(mm1_sojourn_quantile(0.5, 0.5, 1.0), 4)   # 2 ln 2
    1.3863
    """
    lam, s = _rates(arrival_rate, service_time)
    q = _quantile(q)
    rho = lam * s
    with np.errstate(divide="ignore", invalid="ignore"):
        x = _unstable_to_inf(-np.log1p(-q) / (1 / s - lam), rho)
    return scalar_or_array(x)


def mm1_wait_quantile(q, arrival_rate, service_time):
    """Quantile of the M/M/1 (FCFS) wait in the queue: max(0, ln(rho / (1 - q)) / (mu - lambda)).

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    A fraction 1 - rho of requests find the server idle and wait 0, so every
    quantile q <= 1 - rho is 0; above it P(W_q > t) = rho exp(-(mu - lambda) t).
    ``inf`` where rho >= 1.

    Examples
    --------
    >>> mm1_wait_quantile(0.5, 0.5, 1.0)    # half the requests do not wait at all
    0.0
    >>> round(mm1_wait_quantile(0.99, 0.5, 1.0), 4)   # 2 ln 50
    7.824
    """
    lam, s = _rates(arrival_rate, service_time)
    q = _quantile(q)
    rho = lam * s
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.log(rho / (1 - q)) / (1 / s - lam)
        x = _unstable_to_inf(np.where(rho <= 1 - q, 0.0, x), rho)
    return scalar_or_array(x)


def md1_mean_wait(arrival_rate, service_time):
    """Mean wait in the queue of the M/D/1 queue: W_q = rho s / (2 (1 - rho)).

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    Half the M/M/1 wait at the same utilisation. ``inf`` where rho >= 1.

    Examples
    --------
    >>> md1_mean_wait(0.5, 1.0)
    0.5
    """
    lam, s = _rates(arrival_rate, service_time)
    rho = lam * s
    with np.errstate(divide="ignore", invalid="ignore"):
        w = _unstable_to_inf(rho * s / (2 * (1 - rho)), rho)
    return scalar_or_array(w)


def mg1_mean_wait(arrival_rate, service_time, service_time_std):
    """Mean wait in the queue of the M/G/1 queue (Pollaczek-Khinchine).

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    W_q = lambda E[S^2] / (2 (1 - rho)) with E[S^2] = s^2 + sigma^2.
    ``service_time_std = 0`` gives M/D/1 and ``= service_time`` gives M/M/1.
    ``inf`` where rho >= 1.

    Parameters
    ----------
    service_time : float or array
        Mean service time s, seconds.
    service_time_std : float or array
        Standard deviation sigma of the service time, seconds (>= 0).

    Examples
    --------
    >>> mg1_mean_wait(0.5, 1.0, 1.0) == mm1_mean_wait(0.5, 1.0)
    True
    >>> mg1_mean_wait(0.5, 1.0, 0.0) == md1_mean_wait(0.5, 1.0)
    True
    """
    lam, s = _rates(arrival_rate, service_time)
    sigma = check_nonnegative("service_time_std", service_time_std)
    rho = lam * s
    with np.errstate(divide="ignore", invalid="ignore"):
        w = _unstable_to_inf(lam * (s * s + sigma * sigma) / (2 * (1 - rho)), rho)
    return scalar_or_array(w)


def md1_max_arrival_rate(service_time, mean_sojourn):
    """Largest arrival rate at which the M/D/1 mean time in system stays <= ``mean_sojourn``.

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    Solves s + rho s / (2 (1 - rho)) = T for rho: with k = T / s - 1,
    rho = 2k / (1 + 2k) and lambda = rho / s. Returns 0.0 where T <= s (even an
    idle server cannot meet the target).

    Examples
    --------
    >>> md1_max_arrival_rate(service_time=0.1, mean_sojourn=0.3)   # rho = 0.8
    8.0
    """
    s = check_positive("service_time", service_time)
    target = check_positive("mean_sojourn", mean_sojourn)
    k = np.maximum(target / s - 1, 0.0)
    rate = 2 * k / (1 + 2 * k) / s
    return scalar_or_array(rate)


def mm1_max_arrival_rate(service_time, sojourn, quantile=None):
    """Largest arrival rate at which the M/M/1 time in system meets a target.

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    With ``quantile=None`` the *mean* must stay <= ``sojourn``:
    lambda = 1/s - 1/T. With a quantile q the q-quantile must:
    lambda = 1/s - ln(1/(1 - q)) / T (e.g. q = 0.99 for a P99 target).
    Returns 0.0 where no positive rate meets the target.

    Examples
    --------
    >>> round(mm1_max_arrival_rate(0.1, 0.5), 6)      # mean 0.5 s: 10 - 2 = 8 requests/s
    8.0
    >>> round(mm1_max_arrival_rate(0.1, 0.5, 0.99), 3)
    0.79
    """
    s = check_positive("service_time", service_time)
    target = check_positive("sojourn", sojourn)
    factor = 1.0 if quantile is None else -np.log1p(-_quantile(quantile))
    rate = np.maximum(1 / s - factor / target, 0.0)
    return scalar_or_array(rate)


def prefill_mean_ttft(arrival_rate, model, accelerator, prompt_len, **prefill_kwargs):
    """Mean TTFT of a prefill server modelled as an M/D/1 queue (as DistServe does).

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    Requests of ``prompt_len`` tokens arrive as a Poisson stream and are
    prefilled one at a time, each in the deterministic time
    D = :func:`servingmath.prefill.prefill_time`. Then

        mean TTFT = D + lambda D^2 / (2 (1 - lambda D)),

    the prefill plus the M/D/1 mean wait. ``inf`` where lambda D >= 1.

    Parameters
    ----------
    arrival_rate : float or array
        Requests per second.
    model, accelerator, prompt_len :
        As for :func:`servingmath.prefill.prefill_time`.
    **prefill_kwargs :
        Passed on to ``prefill_time`` (``mfu``, ``tensor_parallel``, ...).

    Examples
    --------
    >>> from servingmath.prefill import prefill_time
    >>> d = prefill_time("Llama-3.1-8B", "H100", 2048)
    >>> round(d * 1e3, 1), round(prefill_mean_ttft(0.0, "Llama-3.1-8B", "H100", 2048) * 1e3, 1)
    (30.0, 30.0)
    >>> round(prefill_mean_ttft(16.0, "Llama-3.1-8B", "H100", 2048) * 1e3, 1)   # rho = 0.48
    43.9
    """
    from .prefill import prefill_time  # the step-time model this queue is built on

    d = prefill_time(model, accelerator, prompt_len, **prefill_kwargs)
    lam = check_nonnegative("arrival_rate", arrival_rate)
    w = np.asarray(md1_mean_wait(lam, d))
    return scalar_or_array(np.asarray(d) + w)


def prefill_max_arrival_rate(ttft_slo, model, accelerator, prompt_len, **prefill_kwargs):
    """The request rate at which the M/D/1 mean TTFT of a prefill server reaches ``ttft_slo``.

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    Beyond it the mean-TTFT SLO breaks. Inverts :func:`prefill_mean_ttft`
    (:func:`md1_max_arrival_rate` with D = ``prefill_time``). Returns 0.0 where
    the prefill alone already takes longer than the SLO.

    Examples
    --------
    >>> rate = prefill_max_arrival_rate(0.2, "Llama-3.1-8B", "H100", 2048)
    >>> round(rate, 2), round(prefill_mean_ttft(rate, "Llama-3.1-8B", "H100", 2048), 6)
    (30.62, 0.2)
    """
    from .prefill import prefill_time

    check_positive("ttft_slo", ttft_slo)
    d = prefill_time(model, accelerator, prompt_len, **prefill_kwargs)
    rate = md1_max_arrival_rate(d, ttft_slo)
    return scalar_or_array(rate)


# ---- the M/D/1 waiting-time distribution (Erlang's formula, exact) ---------------------------------------
_LN10 = math.log(10.0)
_GUARD_DIGITS = 30          # decimal digits kept beyond the largest term of Erlang's sum
_CDF_ONE_EXPONENT = 37.5    # exp(-37.5) < 2**-54: beyond it P(W <= t) rounds to 1.0 (Kingman's bound)


def _md1_decay_rate(rho: float) -> float:
    """gamma D: the positive root g of g = rho (e^g - 1), 0 < rho < 1 (the M/D/1 tail's decay per D).

    Newton from a starting point right of the root, where the convex
    h(g) = rho (e^g - 1) - g is positive (h(2 (1 - rho) / rho) >= 0 by its
    Taylor series, h(2 ln(2 / rho)) > 0): the iterates decrease monotonically.
    """
    g = min(2.0 * (1.0 - rho) / rho, 2.0 * math.log(2.0 / rho))
    for _ in range(200):
        step = (rho * math.expm1(g) - g) / (rho * math.exp(g) - 1.0)
        g -= step
        if step <= 4e-16 * g:
            break
    return g


def _md1_tail(t: float, lam: float, d: float) -> float:
    """P(W > t) of the stable M/D/1 queue (0 < lambda d < 1, t >= 0)."""
    return _md1_cdf_tail(t, lam, d)[1]


def _md1_cdf_tail(t: float, lam: float, d: float) -> tuple[float, float]:
    """(P(W <= t), P(W > t)) of the stable M/D/1 queue (0 < lambda d < 1, t >= 0), Erlang's sum in decimal.

    P(W <= t) = (1 - rho) sum_{k=0}^{floor(t/d)} [lambda (k d - t)]^k / k! e^{-lambda (k d - t)}.
    The terms alternate in sign and grow like e^{1.3 lambda t}, so in binary floating
    point the sum cancels catastrophically once t / d passes a few tens. Here every
    term is computed with p significant decimal digits, p = log10(largest term) +
    log10(number of terms) + 30, so the rounding error of the sum stays below
    1e-28 in absolute terms. Past Kingman's bound P(W > t) <= e^{-gamma t} < 2^-54
    the tail is returned as 0 (the CDF is then 1.0 to double precision).
    """
    rho = lam * d
    if t < d:                      # a single positive term: (1 - rho) e^{lambda t}
        return (1.0 - rho) * math.exp(lam * t), -math.expm1(math.log1p(-rho) + lam * t)
    gamma = _md1_decay_rate(rho) / d * (1.0 - 1e-9)   # a slightly smaller rate: still a valid bound
    if gamma * t > _CDF_ONE_EXPONENT:
        return 1.0, 0.0
    k_max = int(t // d)
    k = np.arange(k_max + 1, dtype=float)
    y = lam * np.maximum(t - k * d, 0.0)
    log_terms = np.where(k > 0, k * np.log(np.maximum(y, 1e-300)), 0.0) - np.array(
        [math.lgamma(j + 1.0) for j in k]) + y
    digits = max(0.0, float(log_terms.max())) / _LN10 + math.log10(k_max + 1.0) + _GUARD_DIGITS
    with localcontext() as ctx:
        ctx.prec = int(digits) + 2
        big_t, big_d, big_lam = Decimal(t), Decimal(d), Decimal(lam)   # exact copies of the floats
        shrink = (-big_lam * big_d).exp()                              # e^{-rho}
        growth = (big_lam * big_t).exp()                               # e^{lambda (t - k d)}, k = 0
        total, factorial = Decimal(1) * growth, Decimal(1)
        for j in range(1, k_max + 1):
            x = big_lam * (j * big_d - big_t)                          # lambda (k d - t) <= 0
            if x > 0:                                                  # float floor overshot by one
                break
            growth *= shrink
            factorial *= j
            total += x ** j / factorial * growth
        cdf = (1 - big_lam * big_d) * total
        tail = 1 - cdf
    return min(max(float(cdf), 0.0), 1.0), min(max(float(tail), 0.0), 1.0)


def _md1_inputs(arrival_rate, service_time):
    lam, s = _rates(arrival_rate, service_time)
    return lam, s, lam * s


def md1_wait_cdf(t, arrival_rate, service_time):
    """P(W <= t): the whole distribution of the M/D/1 wait in the queue, by Erlang's formula.

    Derived in the chapter "Queueing". Requests arrive as a Poisson stream at
    ``arrival_rate`` and each needs the same ``service_time`` D (a prefill of
    equal prompts, served one at a time); W is the time a request waits before
    its service starts (its TTFT is W + D).

    Parameters
    ----------
    t : float or array
        Seconds, >= 0.
    arrival_rate : float or array
        lambda, requests per second, >= 0.
    service_time : float or array
        D, seconds per request, > 0.

    Returns
    -------
    float or ndarray
        The probability that a request waits at most ``t``. ``P(W <= 0) = 1 - rho``
        (a fraction 1 - rho of requests find the server idle). Where rho >= 1 the
        queue has no steady state and the probability is 0 for every t (as for
        :func:`mm1_sojourn_cdf`).

    Notes
    -----
    Erlang's formula (1909; derived in the chapter "Queueing" from
    F'(x) = lambda [F(x) - F(x - D)], the balance of the unfinished work):

        P(W <= t) = (1 - rho) sum_{k=0}^{floor(t/D)} [lambda (k D - t)]^k / k! e^{-lambda (k D - t)}.

    The terms alternate in sign and the largest grows like e^{1.3 lambda t}: at
    rho = 0.92 and t = 100 D it is about 1e51 while the sum is below 1,
    so the formula cannot be evaluated in binary floating point beyond t of a
    few tens of D. It is evaluated here in Python's ``decimal`` arithmetic with
    enough digits to cover the cancellation (log10 of the largest term + log10
    of the number of terms + 30), so the absolute error stays below 1e-28,
    whatever rho < 1. Beyond the point where Kingman's exponential bound
    P(W > t) <= e^{-gamma t} (gamma the positive root of
    gamma = lambda (e^{gamma D} - 1)) falls below 2^-54 the result is 1.0,
    which is then the correctly rounded double. The cost of one evaluation
    grows like (t/D)^2: about 10 ms at P99.99 and rho = 0.99 (t = 460 D), 0.3 s
    at the far end there (t = 1870 D), and it grows like 1/(1 - rho)^2 beyond.

    The tests check it against an independent stable evaluation (the
    positive-weight recursion of Franx 2001, in floating point), a long Lindley
    recursion, its mean (Pollaczek-Khinchine), its exponential tail
    C e^{-gamma t}, and the book's simulator.

    References
    ----------
    * A. K. Erlang, "The theory of probabilities and telephone conversations",
      Nyt Tidsskrift for Matematik B 20 (1909); C. D. Crommelin, "Delay
      probability formulas when the holding times are constant", P.O. Electr.
      Engrs. J. 25 (1932): the formula.
    * G. J. Franx, "A simple solution for the M/D/c waiting time
      distribution", Operations Research Letters 29(5), 2001: the
      positive-weight form used as the independent check.
    * J. F. C. Kingman, "A martingale inequality in the theory of queues",
      Proc. Cambridge Phil. Soc. 60, 1964: P(W > t) <= e^{-gamma t}.

    Examples
    --------
    >>> md1_wait_cdf(0.0, 8.0, 0.1)          # rho = 0.8: 20 % find the server idle
    0.2
    >>> round(md1_wait_cdf(0.05, 8.0, 0.1), 6)   # below D a single term: (1 - rho) e^{lambda t}
    0.298365
    >>> round(md1_wait_cdf(1.0, 8.0, 0.1), 4)    # 10 service times
    0.9883
    """
    x = check_nonnegative("t", t)
    lam, s, rho = _md1_inputs(arrival_rate, service_time)
    xb, lb, sb = np.broadcast_arrays(x, lam, s)
    out = np.empty(xb.shape)
    for i in np.ndindex(xb.shape):
        ti, li, di = float(xb[i]), float(lb[i]), float(sb[i])
        if li * di >= 1:
            out[i] = 0.0
        elif li == 0:
            out[i] = 1.0
        else:
            out[i] = _md1_cdf_tail(ti, li, di)[0]
    return scalar_or_array(out)


def _md1_quantile(q: float, lam: float, d: float) -> float:
    """The q-quantile of the stable M/D/1 wait (0 < rho < 1), by safeguarded Newton on ln P(W > t)."""
    rho = lam * d
    if q <= 1 - rho:
        return 0.0
    t_first = math.log(q / (1 - rho)) / lam          # the quantile if it lies below D: (1 - rho) e^{lambda t} = q
    if t_first < d:
        return t_first
    gamma = _md1_decay_rate(rho) / d
    target = math.log1p(-q)
    lo, hi = d, -target / gamma                      # P(W > D) > 1 - q; Kingman: P(W > hi) <= 1 - q
    c = (1 - rho) / (rho * math.exp(gamma * d) - 1)  # the tail's asymptote C e^{-gamma t}
    t = min(max((math.log(c) - target) / gamma, lo), hi)
    for _ in range(100):
        tail = _md1_tail(t, lam, d)
        if tail <= 0.0:                             # past the computed range: the root is below
            hi, t = t, 0.5 * (lo + t)
            continue
        g = math.log(tail) - target
        if g > 0:
            lo = t
        else:
            hi = t
        density = lam * ((_md1_tail(t - d, lam, d) if t >= d else 1.0) - tail)
        step = g * tail / density if density > 0 else math.inf   # Newton on ln P(W > t)
        new = t + step
        if not lo <= new <= hi:
            new = 0.5 * (lo + hi)
        if abs(new - t) <= 1e-13 * t or hi - lo <= 1e-13 * hi:
            return new
        t = new
    return t  # pragma: no cover - Newton converges in a few steps


def md1_wait_quantile(q, arrival_rate, service_time):
    """The q-quantile of the M/D/1 wait in the queue, exactly (the inverse of :func:`md1_wait_cdf`).

    Derived in the chapter "Queueing". The wait is 0 with probability
    1 - rho, so every quantile q <= 1 - rho is 0. ``inf`` where rho >= 1.
    The TTFT of a prefill server (one equal prompt at a time) is this plus D.

    Parameters
    ----------
    q : float or array in (0, 1)
        The quantile: 0.5 for the median (P50), 0.99 for P99. First, like the t of
        :func:`md1_wait_cdf` (the point, then the queue; scipy's ``ppf(q, ...)``).
    arrival_rate : float or array
        lambda, requests per second, >= 0.
    service_time : float or array
        D, seconds per request, > 0.

    Notes
    -----
    Below D the distribution is a single exponential term,
    P(W <= t) = (1 - rho) e^{lambda t}, inverted in closed form. Above it the
    quantile solves P(W > t) = 1 - q by Newton's method on ln P(W > t), with
    the exact density f(t) = lambda [P(W > t - D) - P(W > t)], inside a bracket
    [D, ln(1/(1 - q)) / gamma] that Kingman's bound guarantees, starting from the
    exponential asymptote C e^{-gamma t} with C = (1 - rho) / (rho e^{gamma D} - 1);
    it converges to 1e-13 (relative) in a few steps.

    References
    ----------
    As :func:`md1_wait_cdf`.

    Examples
    --------
    >>> md1_wait_quantile(0.1, 8.0, 0.1)            # 20 % wait 0
    0.0
    >>> round(md1_wait_quantile(0.5, 8.0, 0.1), 4)  # the median wait at rho = 0.8, D = 100 ms
    0.1276
    >>> q = md1_wait_quantile(0.99, 8.0, 0.1)
    >>> round(q, 4), round(md1_wait_cdf(q, 8.0, 0.1), 12)
    (1.0356, 0.99)
    >>> md1_wait_quantile(0.5, 10.0, 0.1)           # rho = 1: no steady state
    inf
    """
    q = _quantile(q)
    lam, s, rho = _md1_inputs(arrival_rate, service_time)
    qb, lb, sb = np.broadcast_arrays(q, lam, s)
    out = np.empty(qb.shape)
    for i in np.ndindex(qb.shape):
        qi, li, di = float(qb[i]), float(lb[i]), float(sb[i])
        if li * di >= 1:
            out[i] = math.inf
        elif li == 0:
            out[i] = 0.0
        else:
            out[i] = _md1_quantile(qi, li, di)
    return scalar_or_array(out)


# ---- c servers, one queue: M/M/c (Erlang C), pooling and staffing -----------------------------------------
def _servers(servers):
    return check_integer("servers", servers, minimum=1)


def _open_probability(name, value):
    arr = as_array(name, value)
    if arr.size and np.any((arr <= 0) | (arr >= 1)):
        bad = arr[(arr <= 0) | (arr >= 1)].flat[0]
        raise ValueError(f"{name} must be a probability in (0, 1), e.g. 0.2; got {bad:g}")
    return arr


def _erlang_b(c, a):
    """Erlang's B formula for integer c >= 1 and load a >= 0 (arrays, broadcast), by its recursion."""
    c, a = np.broadcast_arrays(np.asarray(c, dtype=np.int64), np.asarray(a, dtype=float))
    b = np.ones(a.shape)
    out = np.zeros(a.shape)
    for n in range(1, int(c.max(initial=1)) + 1):
        b = a * b / (n + a * b)
        out = np.where(c == n, b, out)
    return out


def erlang_c(servers, arrival_rate, service_time):
    """Erlang's C formula: the probability that a request waits in an M/M/c queue.

    Derived in the chapter "A fleet" (notebooks/15_fleet.ipynb).
    ``servers`` identical servers (replicas)
    share one FCFS queue; requests arrive as a Poisson stream at
    ``arrival_rate`` and each needs an exponential service of mean
    ``service_time``. A request waits when it finds all c servers busy.

    Parameters
    ----------
    servers : int or array of int
        c >= 1.
    arrival_rate : float or array
        lambda, requests per second, >= 0 (all servers together).
    service_time : float or array
        Mean seconds of service, s = 1 / mu, > 0.

    Returns
    -------
    float or ndarray
        C(c, a) with the offered load a = lambda s (erlangs). 1.0 where
        a >= c (an unstable queue: in the long run every request waits).

    Notes
    -----
    C(c, a) = [a^c / c! x c / (c - a)] / [sum_{k<c} a^k / k! + a^c / c! x c / (c - a)]
    (Kleinrock 1975, sec. 3.5). The factorials overflow a double beyond c = 170,
    so it is computed from Erlang's B formula by its recursion
    B(0) = 1, B(n) = a B(n-1) / (n + a B(n-1)), every term positive, and then
    C = c B / (c - a (1 - B)). Exact in rational arithmetic, stable in floating
    point for c up to many thousands.

    References
    ----------
    * A. K. Erlang, "Solution of some problems in the theory of probabilities
      of significance in automatic telephone exchanges", Elektroteknikeren 13, 1917.
    * L. Kleinrock, *Queueing Systems, Volume 1: Theory*, Wiley, 1975, sec. 3.5
      (M/M/m, Erlang's C formula) and sec. 3.7 (M/M/m/m, Erlang's B formula).

    Examples
    --------
    >>> round(erlang_c(3, 2.0, 1.0), 10)         # a = 2 erlangs on 3 servers: 4/9
    0.4444444444
    >>> erlang_c(1, 0.8, 1.0)                     # one server: the utilisation
    0.8
    >>> round(erlang_c(2000, 1950.0, 1.0), 4)     # no factorial overflow
    0.1787
    """
    c = _servers(servers)
    lam, s = _rates(arrival_rate, service_time)
    a = lam * s
    cb, ab = np.broadcast_arrays(c, a)
    stable = ab < cb
    b = _erlang_b(cb, np.where(stable, ab, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(stable, cb * b / (cb - ab * (1 - b)), 1.0)
    return scalar_or_array(p)


def mmc_mean_wait(servers, arrival_rate, service_time):
    """Mean wait in the queue of the M/M/c queue: W_q = C(c, a) s / (c - a).

    Derived in the chapter "A fleet" (notebooks/15_fleet.ipynb).
    ``inf`` where a = lambda s >= c.

    Notes
    -----
    W_q = C(c, a) / (c mu - lambda) with mu = 1/s (Kleinrock 1975, sec. 3.5):
    a request that waits finds all c servers busy, and then the queue empties at
    rate c mu, so its wait is exponential with rate c mu - lambda.
    c = 1 gives the M/M/1 wait rho s / (1 - rho).

    References
    ----------
    L. Kleinrock, *Queueing Systems, Volume 1: Theory*, Wiley, 1975, sec. 3.5.

    Examples
    --------
    >>> round(mmc_mean_wait(3, 2.0, 1.0), 6)     # C = 4/9, c - a = 1
    0.444444
    >>> mmc_mean_wait(1, 0.5, 1.0) == mm1_mean_wait(0.5, 1.0)
    True
    """
    c = _servers(servers)
    lam, s = _rates(arrival_rate, service_time)
    a = lam * s
    p = np.asarray(erlang_c(c, lam, s))
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(a >= c, np.inf, p * s / (c - a))
    return scalar_or_array(w)


def mmc_wait_cdf(t, servers, arrival_rate, service_time):
    """P(W <= t) for the M/M/c (FCFS) wait in the queue: 1 - C(c, a) e^{-(c mu - lambda) t}.

    Derived in the chapter "A fleet" (notebooks/15_fleet.ipynb).
    The wait is 0 with probability 1 - C
    and otherwise exponential with rate c mu - lambda. 0 for every t where
    a >= c (no steady state).

    Notes
    -----
    P(W > t) = C(c, a) e^{-(c mu - lambda) t}: an arrival that finds all c busy
    and n others waiting starts when n + 1 of the c exponential services have
    ended, each at rate c mu, and n is geometric (Kleinrock 1975, sec. 3.5).

    References
    ----------
    L. Kleinrock, *Queueing Systems, Volume 1: Theory*, Wiley, 1975, sec. 3.5.

    Examples
    --------
    >>> round(mmc_wait_cdf(0.0, 3, 2.0, 1.0), 6)   # 1 - 4/9 do not wait
    0.555556
    """
    x = check_nonnegative("t", t)
    c = _servers(servers)
    lam, s = _rates(arrival_rate, service_time)
    a = lam * s
    p = np.asarray(erlang_c(c, lam, s))
    rate = np.maximum(c / s - lam, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        f = np.where(a >= c, 0.0, 1.0 - p * np.exp(-rate * x))
    return scalar_or_array(f)


def mmc_wait_quantile(q, servers, arrival_rate, service_time):
    """Quantile of the M/M/c (FCFS) wait in the queue: max(0, ln(C / (1 - q)) / (c mu - lambda)).

    Derived in the chapter "A fleet" (notebooks/15_fleet.ipynb).
    Every quantile q <= 1 - C(c, a) is 0
    (those requests find a free server). ``inf`` where a >= c. The quantile
    comes first, as in :func:`mm1_wait_quantile`, its c = 1 case.

    Notes
    -----
    The inverse of :func:`mmc_wait_cdf`: C e^{-(c mu - lambda) t} = 1 - q.

    References
    ----------
    L. Kleinrock, *Queueing Systems, Volume 1: Theory*, Wiley, 1975, sec. 3.5.

    Examples
    --------
    >>> mmc_wait_quantile(0.5, 3, 2.0, 1.0)           # 5/9 > 1/2 do not wait
    0.0
    >>> round(mmc_wait_quantile(0.99, 3, 2.0, 1.0), 4)   # ln((4/9) / 0.01) / (3 - 2)
    3.7942
    >>> mmc_wait_quantile(0.99, 1, 0.5, 1.0) == mm1_wait_quantile(0.99, 0.5, 1.0)
    True
    """
    c = _servers(servers)
    lam, s = _rates(arrival_rate, service_time)
    q = _quantile(q)
    a = lam * s
    p = np.asarray(erlang_c(c, lam, s))
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.log(p / (1 - q)) / (c / s - lam)
        x = np.where(a >= c, np.inf, np.where(p <= 1 - q, 0.0, x))
    return scalar_or_array(x)


class PoolingComparison(NamedTuple):
    """One queue over c servers (M/M/c) against c separate queues fed at random (c x M/M/1).

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    Every field is in seconds or a probability, a float or an array.
    """

    pooled_wait_probability: object
    split_wait_probability: object
    pooled_mean_wait: object
    split_mean_wait: object
    pooled_wait_quantile: object
    split_wait_quantile: object


def pooling_comparison(servers, arrival_rate, service_time, *, quantile=0.99):
    """Pool c servers behind one queue, or split the traffic at random into c queues of one server each?

    Derived in the chapter "A fleet" (notebooks/15_fleet.ipynb).
    The same c servers, the same Poisson
    traffic ``arrival_rate`` (the total), the same exponential service of
    mean ``service_time``, at the same utilisation rho = lambda s / c:

    * pooled: one FCFS queue feeds whichever server frees first, an M/M/c
      queue (:func:`erlang_c`, :func:`mmc_mean_wait`, :func:`mmc_wait_quantile`);
    * split: a router sends each request to one of the c servers uniformly at
      random, so each sees a Poisson stream of rate lambda / c (thinning) and
      is an M/M/1 queue (:func:`mm1_mean_wait`, :func:`mm1_wait_quantile`).

    Parameters
    ----------
    servers : int or array of int
        c >= 1.
    arrival_rate : float or array
        Total requests per second, >= 0.
    service_time : float or array
        Mean seconds per request on one server, > 0.
    quantile : float in (0, 1), keyword-only
        The wait quantile to compare (0.99: P99).

    Returns
    -------
    PoolingComparison
        ``pooled_*`` and ``split_*`` wait probability, mean wait and wait
        quantile. ``inf`` waits where rho >= 1 (both are unstable together).

    Notes
    -----
    Pooled: P(wait) = C(c, a), W_q = C s / (c - a). Split: P(wait) = rho,
    W_q = rho s / (1 - rho). For c > 1 and 0 < rho < 1, C(c, a) < rho, so the
    pooled queue waits less, and the ratio of the mean waits
    rho c / C(c, a) grows with c. Round-robin routing (not random) gives each
    server Erlang-c gaps, which are more regular, and lies in between.

    References
    ----------
    * L. Kleinrock, *Queueing Systems, Volume 2: Computer Applications*, Wiley,
      1976, sec. 5.1: the advantage of one shared queue over separate ones.
    * M. Harchol-Balter, *Performance Modeling and Design of Computer Systems*,
      Cambridge University Press, 2013, ch. 14: M/M/k against k x M/M/1 and
      one fast server.

    Examples
    --------
    >>> r = pooling_comparison(8, 7.2, 1.0)          # rho = 0.9 on 8 servers
    >>> round(r.split_wait_probability, 3), round(r.pooled_wait_probability, 3)
    (0.9, 0.702)
    >>> round(r.split_mean_wait, 2), round(r.pooled_mean_wait, 2)   # in service times
    (9.0, 0.88)
    """
    c = _servers(servers)
    lam, s = _rates(arrival_rate, service_time)
    if np.ndim(quantile) != 0:
        raise ValueError(f"quantile must be a single probability in (0, 1), e.g. 0.99; got {quantile!r}")
    q = float(np.asarray(_quantile(quantile)))
    per_server = lam / c
    rho = np.minimum(per_server * s, 1.0)
    return PoolingComparison(
        pooled_wait_probability=erlang_c(servers, arrival_rate, service_time),
        split_wait_probability=scalar_or_array(rho),
        pooled_mean_wait=mmc_mean_wait(servers, arrival_rate, service_time),
        split_mean_wait=scalar_or_array(mm1_mean_wait(per_server, s)),
        pooled_wait_quantile=mmc_wait_quantile(q, servers, arrival_rate, service_time),
        split_wait_quantile=scalar_or_array(mm1_wait_quantile(q, per_server, s)),
    )


def _normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _log_hw_ratio(beta: float) -> float:
    """ln(beta Phi(beta) / phi(beta)), written so that no factor underflows."""
    return math.log(beta) + math.log(_normal_cdf(beta)) + 0.5 * beta * beta + 0.5 * math.log(2 * math.pi)


def halfin_whitt_wait_probability(beta):
    """The Halfin-Whitt limit of Erlang C: P(wait) ~ 1 / (1 + beta Phi(beta) / phi(beta)).

    Derived in the chapter "A fleet" (notebooks/15_fleet.ipynb).
    With c = a + beta sqrt(a) servers for
    an offered load of a erlangs, Erlang's C(c, a) tends to this as a grows
    with beta fixed (the "quality-and-efficiency-driven" regime): the
    probability of waiting depends on the safety margin beta alone.

    Parameters
    ----------
    beta : float or array
        The staffing margin in units of sqrt(a), > 0.

    Notes
    -----
    alpha(beta) = [1 + beta Phi(beta) / phi(beta)]^{-1}, with Phi and phi the
    standard normal CDF and density (Halfin and Whitt 1981, Prop. 1).

    References
    ----------
    * S. Halfin, W. Whitt, "Heavy-traffic limits for queues with many
      exponential servers", Operations Research 29(3), 1981.
    * S. Borst, A. Mandelbaum, M. Reiman, "Dimensioning large call centers",
      Operations Research 52(1), 2004: the square-root staffing rule.

    Examples
    --------
    >>> round(halfin_whitt_wait_probability(1.0), 4)
    0.2234
    """
    b = check_positive("beta", beta)
    out = np.vectorize(lambda x: 1.0 / (1.0 + math.exp(_log_hw_ratio(float(x)))), otypes=[float])(b)
    return scalar_or_array(out)


def _halfin_whitt_beta(alpha: float) -> float:
    """beta with halfin_whitt_wait_probability(beta) = alpha, by bisection (the function decreases)."""
    target = math.log(1.0 / alpha - 1.0)         # ln(beta Phi / phi) at the answer
    lo, hi = 0.0, 1.0
    while _log_hw_ratio(hi) < target:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if mid > 0 and _log_hw_ratio(mid) < target:
            lo = mid
        else:
            hi = mid
    return hi


def _count(result, *inputs):
    if all(np.ndim(v) == 0 for v in inputs):
        return int(np.asarray(result))
    return np.asarray(result, dtype=np.int64)


def square_root_staffing(arrival_rate, service_time, wait_probability):
    """Servers for a target probability of waiting, by the square-root rule: c = ceil(a + beta sqrt(a)).

    Derived in the chapter "A fleet" (notebooks/15_fleet.ipynb).
    a = lambda s is the offered load (the
    servers the traffic keeps busy on average) and beta solves
    :func:`halfin_whitt_wait_probability` (beta) = ``wait_probability``. The
    margin above the load grows like sqrt(a), so a fleet ten times larger
    needs only about sqrt(10) = 3.2 times the spare servers: the economy of
    scale of pooling. Compare with the exact :func:`erlang_c_servers`.

    Parameters
    ----------
    arrival_rate : float or array
        Requests per second, >= 0.
    service_time : float or array
        Mean seconds per request on one server, > 0.
    wait_probability : float or array in (0, 1)
        The target fraction of requests that may wait, e.g. 0.2.

    Returns
    -------
    int or ndarray of int
        c >= 1, and always more than a (a stable queue).

    Notes
    -----
    c = ceil(a + beta sqrt(a)) with 1 / (1 + beta Phi(beta) / phi(beta)) = alpha
    (Halfin and Whitt 1981; Borst, Mandelbaum and Reiman 2004). The rule is
    asymptotic in a, yet within a server or two of Erlang C's exact answer
    even for small fleets (Janssen, van Leeuwaarden and Zwart 2011).

    References
    ----------
    * S. Halfin, W. Whitt, Operations Research 29(3), 1981.
    * S. Borst, A. Mandelbaum, M. Reiman, Operations Research 52(1), 2004.
    * A. J. E. M. Janssen, J. S. H. van Leeuwaarden, B. Zwart, "Refining
      square-root safety staffing by expanding Erlang C", Operations Research
      59(6), 2011.

    Examples
    --------
    >>> square_root_staffing(100.0, 1.0, 0.2)        # beta = 1.06 for 20 % waiting
    111
    >>> erlang_c_servers(100.0, 1.0, 0.2)            # the exact answer
    111
    """
    lam, s = _rates(arrival_rate, service_time)
    alpha = _open_probability("wait_probability", wait_probability)
    a, al = np.broadcast_arrays(lam * s, alpha)
    out = np.empty(a.shape)
    for i in np.ndindex(a.shape):
        ai = float(a[i])
        c = math.ceil(ai + _halfin_whitt_beta(float(al[i])) * math.sqrt(ai) - 1e-9)
        out[i] = max(c, math.floor(ai) + 1, 1)
    return _count(out, arrival_rate, service_time, wait_probability)


def erlang_c_servers(arrival_rate, service_time, wait_probability):
    """The smallest number of servers c with Erlang's C(c, a) <= ``wait_probability`` (exact).

    Derived in the chapter "A fleet" (notebooks/15_fleet.ipynb).
    Walks c = 1, 2, ... with Erlang B's
    recursion (C decreases in c once c > a) and stops at the first c that
    meets the target; at least 1 (also for no traffic).

    Parameters
    ----------
    arrival_rate : float or array
        Requests per second, >= 0.
    service_time : float or array
        Mean seconds per request on one server, > 0.
    wait_probability : float or array in (0, 1)
        The target fraction of requests that may wait.

    Returns
    -------
    int or ndarray of int

    Notes
    -----
    min { c >= 1 : c > a and C(c, a) <= alpha }, with C from the recursion of
    :func:`erlang_c`; exact, at a cost of about c steps.

    References
    ----------
    * L. Kleinrock, *Queueing Systems, Volume 1: Theory*, Wiley, 1975, sec. 3.5.
    * A. J. E. M. Janssen, J. S. H. van Leeuwaarden, B. Zwart, Operations
      Research 59(6), 2011: the exact optimum against the square-root rule.

    Examples
    --------
    >>> erlang_c_servers(2.0, 1.0, 0.5)     # C(3, 2) = 4/9 <= 0.5, C(2, 2) = 1
    3
    >>> erlang_c_servers(0.0, 1.0, 0.1)
    1
    """
    lam, s = _rates(arrival_rate, service_time)
    alpha = _open_probability("wait_probability", wait_probability)
    a, al = np.broadcast_arrays(lam * s, alpha)
    out = np.empty(a.shape)
    for i in np.ndindex(a.shape):
        ai, target = float(a[i]), float(al[i])
        b, n = 1.0, 0
        while True:
            n += 1
            b = ai * b / (n + ai * b)
            if n > ai and n * b / (n - ai * (1 - b)) <= target:
                break
        out[i] = n
    return _count(out, arrival_rate, service_time, wait_probability)


# ---- bursty arrivals: G/G/1 (Kingman) and gamma inter-arrival times (GI/M/1) --------------------------------
def kingman_mean_wait(arrival_rate, service_time, arrival_cv2, service_cv2):
    """Kingman's heavy-traffic approximation of the G/G/1 mean wait in the queue.

    Derived in the chapter "Queueing". W_q ~ rho s / (1 - rho) x (c_a^2 + c_s^2) / 2:
    the M/M/1 wait scaled by the mean of the squared coefficients of variation
    of the inter-arrival times (c_a^2) and of the service times (c_s^2).
    Bursty traffic (c_a^2 > 1) waits longer than Poisson at the same load.
    ``inf`` where rho >= 1.

    Parameters
    ----------
    arrival_rate : float or array
        Requests per second, >= 0.
    service_time : float or array
        Mean service time s, seconds, > 0.
    arrival_cv2 : float or array
        c_a^2 = Var(gap) / E[gap]^2, >= 0: 1 for Poisson, 0 for evenly spaced
        requests, 1 / burstiness for ``vllm bench serve --burstiness`` (gamma gaps).
    service_cv2 : float or array
        c_s^2 = Var(S) / E[S]^2, >= 0: 1 for exponential, 0 for equal prompts.

    Notes
    -----
    Exact for Poisson arrivals (c_a^2 = 1: Pollaczek-Khinchine, so also M/M/1
    and M/D/1), and exact in the limit rho -> 1 for any G/G/1 queue (Kingman
    1961); below that it is an approximation whose error the chapter measures
    against :func:`gamma_m1_mean_wait` and the simulator.

    References
    ----------
    * J. F. C. Kingman, "The single server queue in heavy traffic", Proc.
      Cambridge Phil. Soc. 57(4), 1961.
    * W. J. Hopp, M. L. Spearman, *Factory Physics*, 3rd ed., Waveland, 2008,
      ch. 8: the "VUT" form V x U x T.

    Examples
    --------
    >>> kingman_mean_wait(0.5, 1.0, 1.0, 1.0) == mm1_mean_wait(0.5, 1.0)
    True
    >>> kingman_mean_wait(0.9, 1.0, 4.0, 0.0)      # burstiness 0.25, equal prompts: 2 x M/M/1
    18.0
    """
    lam, s = _rates(arrival_rate, service_time)
    ca = check_nonnegative("arrival_cv2", arrival_cv2)
    cs = check_nonnegative("service_cv2", service_cv2)
    rho = lam * s
    with np.errstate(divide="ignore", invalid="ignore"):
        w = _unstable_to_inf(rho * s / (1 - rho) * (ca + cs) / 2, rho)
    return scalar_or_array(w)


def _gamma_m1_gap(rho: float, k: float) -> float:
    """u = 1 - sigma for the root sigma in (0, 1) of sigma = (1 + (1 - sigma) / (k rho))^{-k}, by bisection on ln u."""
    def h(u):   # (1 + u / (k rho))^{-k} - 1 + u: negative just above u = 0, positive at u = 1
        return math.expm1(-k * math.log1p(u / (k * rho))) + u

    lo, hi = -700.0, 0.0      # ln u
    for _ in range(120):
        mid = 0.5 * (lo + hi)
        if h(math.exp(mid)) < 0:
            lo = mid
        else:
            hi = mid
    return math.exp(0.5 * (lo + hi))


def gamma_m1_mean_wait(arrival_rate, service_time, burstiness):
    """Exact mean wait of a single server with gamma inter-arrival times and exponential service (GI/M/1).

    Derived in the chapter "Queueing". The gaps between requests are gamma
    distributed with shape k = ``burstiness`` and mean 1 / lambda, as
    ``vllm bench serve --request-rate lambda --burstiness k`` draws them
    (c_a^2 = 1/k: k < 1 is burstier than Poisson, k = 1 is Poisson, k > 1 more
    regular); the service is exponential with mean s. ``inf`` where rho >= 1.

    Notes
    -----
    For GI/M/1 an arrival finds n requests present with probability
    (1 - sigma) sigma^n, where sigma in (0, 1) solves sigma = A*(mu (1 - sigma)) and
    A* is the Laplace transform of the gap; then W_q = sigma / (mu (1 - sigma))
    (Kleinrock 1975, sec. 6.4). For gamma gaps A*(z) = (1 + z / (k lambda))^{-k}.
    k = 1 gives sigma = rho, the M/M/1 queue. Solved by bisection on
    ln(1 - sigma), so it stays accurate as rho -> 1.

    References
    ----------
    * L. Kleinrock, *Queueing Systems, Volume 1: Theory*, Wiley, 1975, sec. 6.4 (G/M/1).
    * vLLM, ``vllm/benchmarks/serve.py``, ``get_request``: gaps drawn with
      ``np.random.gamma(shape=burstiness, scale=1 / (request_rate x burstiness))``
      (commit def9ce85ba1079af970a58ed3d42dd861ae35d58, read 2026-11).

    Examples
    --------
    >>> round(gamma_m1_mean_wait(0.5, 1.0, 1.0), 12)          # Poisson: M/M/1
    1.0
    >>> round(gamma_m1_mean_wait(0.8, 1.0, 0.5), 3)           # burstiness 0.5 at rho = 0.8
    6.317
    >>> round(kingman_mean_wait(0.8, 1.0, 2.0, 1.0), 3)       # Kingman's approximation of it
    6.0
    """
    lam, s = _rates(arrival_rate, service_time)
    k = check_positive("burstiness", burstiness)
    lb, sb, kb = np.broadcast_arrays(lam, s, k)
    out = np.empty(lb.shape)
    for i in np.ndindex(lb.shape):
        rho = float(lb[i] * sb[i])
        if rho >= 1:
            out[i] = math.inf
        elif rho == 0:
            out[i] = 0.0
        else:
            ki = float(kb[i])
            u = _gamma_m1_gap(rho, ki)
            sigma = math.exp(-ki * math.log1p(u / (ki * rho)))   # A*(mu u): accurate also where sigma is tiny
            out[i] = sigma * float(sb[i]) / u
    return scalar_or_array(out)


# ---- priority classes: non-preemptive priority M/G/1 (Cobham) ------------------------------------------------
def _class_vector(name, values, check):
    arr = check(name, values)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence, one entry per priority class; "
                         f"got shape {arr.shape}")
    return arr.astype(float)


def priority_mean_waits(arrival_rates, service_means, service_second_moments):
    """Mean wait in the queue of each class of a non-preemptive priority M/G/1 queue (Cobham's formula).

    Derived in the chapter "Queueing". Class 0 has the highest priority
    (the simulator's convention: interactive = 0, batch = 1). Each class k
    arrives as its own Poisson stream at ``arrival_rates[k]`` and needs a
    service with mean ``service_means[k]`` and second moment
    ``service_second_moments[k]``. When the server frees, it takes the oldest
    request of the highest class waiting; a request in service is never
    interrupted (one request at a time: ``max_batch_size=1``).

    Parameters
    ----------
    arrival_rates : sequence of float
        lambda_k, requests per second, >= 0.
    service_means : sequence of float
        E[S_k], seconds, > 0.
    service_second_moments : sequence of float
        E[S_k^2], seconds^2, >= E[S_k]^2 (equal for deterministic service,
        twice for exponential).

    Returns
    -------
    ndarray
        W_k for every class, seconds. ``inf`` for every class k whose load and
        that of all higher classes reach 1 (sigma_k >= 1); the classes above it
        keep a finite wait even when the whole queue is overloaded.

    Notes
    -----
    With rho_k = lambda_k E[S_k], sigma_k = rho_0 + ... + rho_k and the mean
    residual work R = sum_k lambda_k E[S_k^2] / 2 (what an arrival finds left of
    the service in progress),

        W_k = R / ((1 - sigma_{k-1}) (1 - sigma_k)),   sigma_{-1} = 0

    (Cobham 1954). The wait of class k grows with the load of the classes above
    it, not with that of the classes below, except through R. Under overload
    (sigma_K >= 1) the first class m with sigma_m >= 1 is always backlogged and
    is served back to back whenever no higher class waits, at the throughput
    (1 - sigma_{m-1}) / E[S_m]; R then counts that throughput instead of lambda_m.
    A single class gives Pollaczek-Khinchine.

    References
    ----------
    * A. Cobham, "Priority assignment in waiting line problems", Operations
      Research 2(1), 1954.
    * L. Kleinrock, *Queueing Systems, Volume 2: Computer Applications*, Wiley,
      1976, sec. 3.6 (the non-preemptive priority queue).

    Examples
    --------
    >>> w = priority_mean_waits([0.3, 0.5], [1.0, 1.0], [2.0, 2.0])   # two exponential classes
    >>> w.round(4).tolist()
    [1.1429, 5.7143]
    >>> round(float(mm1_mean_wait(0.8, 1.0)), 4)      # FCFS: both wait 4; priority moves the wait
    4.0
    """
    lam = _class_vector("arrival_rates", arrival_rates, check_nonnegative)
    mean = _class_vector("service_means", service_means, check_positive)
    second = _class_vector("service_second_moments", service_second_moments, check_positive)
    if not lam.size == mean.size == second.size:
        raise ValueError(f"arrival_rates, service_means and service_second_moments need one entry per class; "
                         f"got {lam.size}, {mean.size} and {second.size}")
    short = np.flatnonzero(second < mean**2 * (1 - 1e-12))
    if short.size:
        k = int(short[0])
        raise ValueError(f"service_second_moments[{k}] = {second[k]:g} is below service_means[{k}]^2 = "
                         f"{mean[k] ** 2:g}; a second moment E[S^2] is at least E[S]^2")
    rho = lam * mean
    sigma = np.cumsum(rho)
    throughput = lam.copy()
    over = np.flatnonzero(sigma >= 1)
    if over.size:
        m = int(over[0])
        above = sigma[m - 1] if m > 0 else 0.0
        throughput[m] = (1.0 - above) / mean[m]
        throughput[m + 1:] = 0.0
    residual = float(np.sum(throughput * second) / 2)
    before = np.concatenate([[0.0], sigma[:-1]])
    with np.errstate(divide="ignore", invalid="ignore"):
        w = residual / ((1 - before) * (1 - sigma))
    return np.where(sigma >= 1, np.inf, w)


# ---- overload: the fluid picture ---------------------------------------------------------------------------
def _capacity(servers, service_time):
    c = _servers(servers)
    s = check_positive("service_time", service_time)
    return c / s


def backlog_growth_rate(arrival_rate, service_time, *, servers=1):
    """How fast the queue grows under overload: max(0, lambda - c mu) requests per second.

    Derived in the chapter "Queueing". Past capacity (lambda > c mu,
    mu = 1 / ``service_time``) the servers are always busy and complete c mu
    requests a second, so the backlog grows linearly, by lambda - c mu every
    second, and every new request waits longer than the one before: no steady
    state. 0 where the servers keep up.

    Notes
    -----
    The fluid (deterministic) approximation: Q(t) = Q(0) + (lambda - c mu) t while
    positive. It describes a long overload well; the random fluctuations of
    a stable queue (the 1 / (1 - rho) wait) are not in it.

    References
    ----------
    * G. F. Newell, *Applications of Queueing Theory*, 2nd ed., Chapman and
      Hall, 1982, ch. 2: the deterministic fluid approximation of a queue in a rush hour.

    Examples
    --------
    >>> round(backlog_growth_rate(40.0, 0.03), 6)   # capacity 33.3/s: +6.7 requests a second
    6.666667
    >>> backlog_growth_rate(20.0, 0.03)
    0.0
    """
    lam = check_nonnegative("arrival_rate", arrival_rate)
    mu_c = _capacity(servers, service_time)
    return scalar_or_array(np.maximum(lam - mu_c, 0.0))


def backlog_after(duration, arrival_rate, service_time, *, servers=1, initial_backlog=0.0):
    """Requests queued after ``duration`` seconds at ``arrival_rate``: max(0, Q0 + (lambda - c mu) t).

    Derived in the chapter "Queueing". The fluid approximation of
    :func:`backlog_growth_rate`, from ``initial_backlog`` Q0 requests; below
    capacity the same line drains the backlog until it is empty.

    Notes
    -----
    Q(t) = max(0, Q0 + (lambda - c mu) t), requests (fluid approximation).

    References
    ----------
    G. F. Newell, *Applications of Queueing Theory*, 2nd ed., Chapman and Hall, 1982, ch. 2.

    Examples
    --------
    >>> round(backlog_after(60.0, 40.0, 0.03), 6)   # a minute at 40 req/s on a 33.3 req/s server
    400.0
    >>> backlog_after(60.0, 30.0, 0.03, initial_backlog=400.0)   # then a minute at 30 req/s
    200.0
    """
    t = check_nonnegative("duration", duration)
    lam = check_nonnegative("arrival_rate", arrival_rate)
    q0 = check_nonnegative("initial_backlog", initial_backlog)
    mu_c = _capacity(servers, service_time)
    q = np.maximum(q0 + (lam - mu_c) * t, 0.0)
    return scalar_or_array(q)


def drain_time(backlog, arrival_rate, service_time, *, servers=1):
    """Seconds to clear ``backlog`` queued requests while new ones keep arriving: Q / (c mu - lambda).

    Derived in the chapter "Queueing". The servers work through the backlog
    at their spare capacity c mu - lambda only, so a server at 90 % load
    drains a backlog ten times slower than an idle one would. ``inf`` where
    lambda >= c mu and the backlog is positive; 0 for no backlog.

    Notes
    -----
    t = Q / (c mu - lambda): :func:`backlog_after` solved for Q(t) = 0.

    References
    ----------
    G. F. Newell, *Applications of Queueing Theory*, 2nd ed., Chapman and Hall, 1982, ch. 2.

    Examples
    --------
    >>> round(drain_time(400.0, 30.0, 0.03), 6)    # 400 requests, 3.33 req/s to spare
    120.0
    >>> drain_time(400.0, 40.0, 0.03)
    inf
    """
    q = check_nonnegative("backlog", backlog)
    lam = check_nonnegative("arrival_rate", arrival_rate)
    mu_c = _capacity(servers, service_time)
    spare = mu_c - lam
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(q == 0, 0.0, np.where(spare <= 0, np.inf, q / np.where(spare > 0, spare, 1.0)))
    return scalar_or_array(t)


def burst_drain_time(burst_rate, burst_duration, arrival_rate, service_time, *, servers=1):
    """After a burst at ``burst_rate`` for ``burst_duration`` seconds, how long until the queue is back to empty.

    Derived in the chapter "Queueing". The burst leaves
    Q = max(0, (lambda_burst - c mu) T) requests queued (:func:`backlog_after`),
    which then drain at c mu - lambda (:func:`drain_time`), counted from the end
    of the burst:

        t_drain = max(0, lambda_burst - c mu) T / (c mu - lambda).

    A 10-second burst at 120 % of capacity on a server that normally runs at
    90 % takes 20 seconds to clear (0.2 / 0.1 x 10 s). ``inf`` where
    lambda >= c mu (the queue never drains).

    Notes
    -----
    Fluid approximation; a stochastic queue adds its ordinary fluctuations
    (the stationary wait) on top, which matter once the backlog is a few
    requests.

    References
    ----------
    G. F. Newell, *Applications of Queueing Theory*, 2nd ed., Chapman and Hall, 1982, ch. 2.

    Examples
    --------
    >>> round(burst_drain_time(40.0, 10.0, 30.0, 0.03), 6)   # 120 % for 10 s, then 90 %
    20.0
    >>> burst_drain_time(30.0, 10.0, 20.0, 0.03)              # a burst below capacity leaves no backlog
    0.0
    """
    check_nonnegative("burst_rate", burst_rate)
    check_nonnegative("burst_duration", burst_duration)
    q = backlog_after(burst_duration, burst_rate, service_time, servers=servers)
    t = drain_time(q, arrival_rate, service_time, servers=servers)
    return scalar_or_array(t)
