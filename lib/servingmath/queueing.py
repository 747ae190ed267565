"""Queueing closed forms: utilisation, Little's law, M/M/1, M/D/1, M/G/1, and prefill as an M/D/1 queue.

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

Examples
--------
>>> md1_mean_wait(arrival_rate=8.0, service_time=0.1)     # rho = 0.8
0.2
>>> mm1_mean_wait(8.0, 0.1)                               # twice the M/D/1 wait
0.4
>>> round(mm1_sojourn_quantile(8.0, 0.1, 0.99), 3)        # P99 = ln(100) / (mu - lambda)
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
"""

from __future__ import annotations

import numpy as np

from ._validation import as_array, check_nonnegative, check_positive, scalar_or_array

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


def mm1_sojourn_quantile(arrival_rate, service_time, quantile):
    """Quantile of the M/M/1 (FCFS) time in system: -ln(1 - q) / (mu - lambda).

    P50 = ln 2 / (mu - lambda), P99 = ln 100 / (mu - lambda) = 4.61 x the mean
    (the mean is 1 / (mu - lambda)). ``inf`` where rho >= 1.

    Parameters
    ----------
    quantile : float or array in (0, 1)
        0.5 for the median (P50), 0.99 for P99.

    Examples
    --------
    >>> round(mm1_sojourn_quantile(0.5, 1.0, 0.5), 4)   # 2 ln 2
    1.3863
    """
    lam, s = _rates(arrival_rate, service_time)
    q = _quantile(quantile)
    rho = lam * s
    with np.errstate(divide="ignore", invalid="ignore"):
        x = _unstable_to_inf(-np.log1p(-q) / (1 / s - lam), rho)
    return scalar_or_array(x)


def mm1_wait_quantile(arrival_rate, service_time, quantile):
    """Quantile of the M/M/1 (FCFS) wait in the queue: max(0, ln(rho / (1 - q)) / (mu - lambda)).

    A fraction 1 - rho of requests find the server idle and wait 0, so every
    quantile q <= 1 - rho is 0; above it P(W_q > t) = rho exp(-(mu - lambda) t).
    ``inf`` where rho >= 1.

    Examples
    --------
    >>> mm1_wait_quantile(0.5, 1.0, 0.5)    # half the requests do not wait at all
    0.0
    >>> round(mm1_wait_quantile(0.5, 1.0, 0.99), 4)   # 2 ln 50
    7.824
    """
    lam, s = _rates(arrival_rate, service_time)
    q = _quantile(quantile)
    rho = lam * s
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.log(rho / (1 - q)) / (1 / s - lam)
        x = _unstable_to_inf(np.where(rho <= 1 - q, 0.0, x), rho)
    return scalar_or_array(x)


def md1_mean_wait(arrival_rate, service_time):
    """Mean wait in the queue of the M/D/1 queue: W_q = rho s / (2 (1 - rho)).

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
