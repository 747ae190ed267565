"""DistServe's goodput: the highest request rate at which enough requests meet their SLOs."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._validation import check_instance, check_positive
from ..workloads import Poisson

__all__ = ["slo_attainment_curve", "max_goodput_rate"]


def _at_rate(config, rate):
    """The config at another Poisson rate; gamma arrivals keep their burstiness (only the rate changes)."""
    arrivals = config.arrivals
    if isinstance(arrivals, Poisson):
        return dataclasses.replace(config, arrivals=dataclasses.replace(arrivals, rate=float(rate)))
    return dataclasses.replace(config, arrivals=Poisson(float(rate)))


def _check_config(config):
    from .config import SimulationConfig
    from .fleet import FleetConfig

    check_instance("config", config, (SimulationConfig, FleetConfig))


def _check_slos(ttft_slo, tpot_slo):
    if ttft_slo is None and tpot_slo is None:
        raise ValueError("give at least one SLO: ttft_slo and/or tpot_slo, in seconds")


def slo_attainment_curve(config, rates, *, ttft_slo=None, tpot_slo=None, seed=0):
    """Fraction of requests meeting the TTFT and TPOT SLOs at each Poisson rate in ``rates``.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Every rate replays the same workload with the same seed (the arrival
    gaps are the same exponential draws scaled by 1 / rate). A ``Poisson``
    config keeps its ``burstiness`` (gamma gaps); any other arrival process is
    replaced by Poisson arrivals. ``config`` may be a ``FleetConfig``.

    Examples
    --------
    >>> from servingmath.simulate import ContinuousBatching, LinearStepTimes, Server, SimulationConfig
    >>> from servingmath.workloads import Workload
    >>> toy = SimulationConfig(server=Server(step_times=LinearStepTimes(step_time=1e-3)),
    ...                        workload=Workload.fixed(200, prompt_len=128, output_len=16),
    ...                        arrivals=Poisson(rate=50.0), policy=ContinuousBatching(max_batch_size=8))
    >>> slo_attainment_curve(toy, [50.0, 2000.0], ttft_slo=0.01).tolist()   # a queue builds at 2000 req/s
    [1.0, 0.04]
    """
    from . import simulate

    _check_config(config)
    _check_slos(ttft_slo, tpot_slo)
    r = check_positive("rates", rates)
    return np.array([simulate(_at_rate(config, x), seed).slo_attainment(ttft_slo=ttft_slo, tpot_slo=tpot_slo)
                     for x in np.atleast_1d(r)])


def max_goodput_rate(config, *, ttft_slo=None, tpot_slo=None, attainment=0.9, seed=0, rel_tol=0.01,
                     initial_rate=None):
    """DistServe's goodput: the largest Poisson rate (requests/s) at which at least
    ``attainment`` of the requests meet both the TTFT and the TPOT SLO.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Searches by doubling/halving from ``initial_rate`` (default: the config's
    Poisson rate, or 1 request/s) until the target is bracketed, then by
    bisection to a relative width ``rel_tol``; returns the lower end of the
    bracket (a rate that meets the target). 0.0 when even a trickle of
    requests misses the target. Gamma arrivals (``Poisson(rate, burstiness=k)``)
    keep their burstiness at every rate tried; other arrival processes are
    replaced by Poisson arrivals. ``config`` may be a ``FleetConfig``.

    References
    ----------
    Y. Zhong et al., "DistServe", OSDI 2024, sec. 2.2 (goodput = max rate
    under an SLO attainment goal, e.g. 90 %).

    Examples
    --------
    >>> from servingmath.simulate import ContinuousBatching, LinearStepTimes, Server, SimulationConfig
    >>> from servingmath.workloads import Workload
    >>> toy = SimulationConfig(server=Server(step_times=LinearStepTimes(step_time=1e-3)),
    ...                        workload=Workload.fixed(200, prompt_len=128, output_len=16),
    ...                        arrivals=Poisson(rate=50.0), policy=ContinuousBatching(max_batch_size=8))
    >>> max_goodput_rate(toy, ttft_slo=0.01, rel_tol=0.05)   # req/s with 90 % of TTFTs under 10 ms
    262.5
    """
    from . import simulate

    _check_config(config)
    _check_slos(ttft_slo, tpot_slo)
    a = check_positive("attainment", attainment, scalar=True)
    if a > 1:
        raise ValueError(f"attainment must be in (0, 1], got {a:g}")
    rel_tol = check_positive("rel_tol", rel_tol, scalar=True)
    if initial_rate is None:
        initial_rate = config.arrivals.rate if isinstance(config.arrivals, Poisson) else 1.0
    rate = check_positive("initial_rate", initial_rate, scalar=True)

    def ok(x):
        return simulate(_at_rate(config, x), seed).slo_attainment(ttft_slo=ttft_slo, tpot_slo=tpot_slo) >= a

    lo, hi = rate, rate
    if ok(rate):
        hi = rate * 2
        while ok(hi):
            lo, hi = hi, hi * 2
            if hi > 1e9:
                raise ValueError("the SLOs are met at every rate tried (up to 1e9 requests/s)")
    else:
        lo = rate / 2
        while not ok(lo):
            lo, hi = lo / 2, lo
            if lo < rate * 1e-6:
                return 0.0
    while (hi - lo) > rel_tol * hi:
        mid = 0.5 * (lo + hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo
