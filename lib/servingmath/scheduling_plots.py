"""Sweeps, per-class summaries and figures for comparing scheduling policies with the simulator.

The scheduling chapter runs the same workload through several policies at
several request rates and reads the same few numbers off every run. This
module keeps that bookkeeping out of the chapter:

* :func:`rate_sweep` simulates one configuration at several Poisson rates
  (per GPU) and returns a :class:`RateSweep`: P50/P99 of TTFT, TPOT and ITL,
  throughput, SLO attainment and goodput (per GPU) at each rate, and the runs;
  :func:`rate_sweeps` does it once per seed (each seed its own requests and
  arrivals), and :func:`seed_interval` turns the seeds' values of any number
  into a mean and a 95 % confidence interval (Student's t);
* :func:`two_class_traffic` builds interactive + batch traffic (two Poisson
  streams, priority classes 0 and 1) as a workload and its arrival times;
* :func:`long_prompt_probe` runs the smallest experiment of the chapter's
  formulas: one prompt arriving while a batch decodes;
* :func:`latency_summary` and :func:`tokens_before` read one class of requests
  (any subset of ids) off a run: latency percentiles and pooled inter-token
  gaps, or how many tokens they received before a time;
* :func:`request_traces` turns records into :class:`~servingmath.plotting.RequestTrace`
  rows for :func:`~servingmath.plotting.request_timeline`;
* :func:`plot_percentiles` and :func:`plot_cdf` draw on an ``Axes`` you pass.

Rates are per GPU: a deployment of ``n_gpus`` GPUs is simulated at
``rate x n_gpus`` requests/s and its throughput and goodput are divided by
``n_gpus``, so one replica, two replicas (random routing splits a Poisson
stream into two Poisson streams of half the rate) and a 1 prefill + 1 decode
pair land on the same axis.

Examples
--------
>>> from servingmath import simulate as sim
>>> from servingmath.workloads import Workload
>>> toy = sim.Server(step_times=sim.LinearStepTimes(step_time=0.01))
>>> config = sim.SimulationConfig(toy, Workload.fixed(200, 16, 8), sim.Poisson(1.0))
>>> sweep = rate_sweep(config, [1.0, 4.0], slos=[(0.1, 0.02)])
>>> [f"{x * 1e3:.0f} ms" for x in sweep.tpot_p50]       # 10 ms steps, nothing else to do
['10 ms', '10 ms']
>>> sweep.attainment.shape, float(sweep.attainment[0, 0])
((1, 2), 1.0)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ._validation import check_integer, check_nonnegative, check_positive
from .plotting import RequestTrace, log_axis
from .simulate import SimulationConfig, simulate
from .simulate.results import weighted_percentile
from .workloads import Poisson, Timestamps, Workload, chat_workload

__all__ = [
    "RateSweep",
    "rate_sweep",
    "rate_sweeps",
    "seed_interval",
    "two_class_traffic",
    "long_prompt_probe",
    "latency_summary",
    "tokens_before",
    "request_traces",
    "plot_percentiles",
    "plot_cdf",
]

_METRICS = ("ttft", "tpot", "itl")


@dataclass(frozen=True, eq=False)
class RateSweep:
    """One configuration simulated at several request rates (see :func:`rate_sweep`).

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Attributes
    ----------
    rates : ndarray
        Offered load per GPU, requests/s.
    n_gpus : int
        GPUs of the deployment (the simulator ran at ``rates x n_gpus``).
    ttft_p50, ttft_p99, tpot_p50, tpot_p99, itl_p50, itl_p99 : ndarray
        Percentiles over the requests (ITL: over all inter-token gaps), seconds.
    ttft_mean : ndarray
        Mean TTFT, seconds.
    throughput : ndarray
        Completed requests per second per GPU (requests / run duration / n_gpus).
    output_throughput : ndarray
        Output tokens per second per GPU.
    slos : tuple of (ttft, tpot)
        The SLO pairs (seconds) the attainment and goodput refer to.
    attainment : ndarray, shape (len(slos), len(rates))
        Fraction of requests meeting both targets of each SLO pair.
    goodput : ndarray, shape (len(slos), len(rates))
        vLLM's goodput per GPU: requests meeting both targets per second, / n_gpus.
    results : tuple of SimulationResult
        The runs, in rate order (for CDFs, timelines, anything else).
    """

    rates: np.ndarray
    n_gpus: int
    ttft_p50: np.ndarray
    ttft_p99: np.ndarray
    ttft_mean: np.ndarray
    tpot_p50: np.ndarray
    tpot_p99: np.ndarray
    itl_p50: np.ndarray
    itl_p99: np.ndarray
    throughput: np.ndarray
    output_throughput: np.ndarray
    slos: tuple
    attainment: np.ndarray
    goodput: np.ndarray
    results: tuple

    def percentile(self, metric: str, q: int) -> np.ndarray:
        """``percentile("ttft", 99)`` is ``ttft_p99`` (metric in ttft/tpot/itl, q in 50/99)."""
        if metric not in _METRICS:
            raise ValueError(f"metric must be one of {', '.join(_METRICS)}, got {metric!r}")
        if q not in (50, 99):
            raise ValueError(f"q must be 50 or 99, got {q!r}")
        return getattr(self, f"{metric}_p{q}")

    def at(self, rate: float):
        """The run at one of the sweep's rates (per GPU)."""
        hits = np.flatnonzero(np.isclose(self.rates, rate))
        if hits.size == 0:
            raise ValueError(f"rate must be one of the swept rates {self.rates.tolist()}, got {rate!r}")
        return self.results[int(hits[0])]


def _check_slos(slos):
    pairs = []
    for pair in slos:
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise ValueError(f"slos must be (ttft, tpot) pairs in seconds, got {pair!r}")
        check_positive("slos", pair)
        pairs.append((float(pair[0]), float(pair[1])))
    return tuple(pairs)


def rate_sweep(config: SimulationConfig, rates, n_gpus: int = 1, seed: int = 0, slos=()) -> RateSweep:
    """Simulate ``config`` with Poisson arrivals at each rate (per GPU) and summarise every run.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Parameters
    ----------
    config : SimulationConfig
        Its ``arrivals`` are replaced by ``Poisson(rate x n_gpus)``, keeping the
        burstiness of gamma arrivals (``Poisson(rate, burstiness=k)``).
    rates : array_like
        Requests per second per GPU, > 0.
    n_gpus : int
        GPUs the configuration uses (2 for one prefill and one decode instance).
    seed : int
        The simulator's seed, the same at every rate (common random numbers:
        the same requests, with arrival gaps scaled by 1 / rate).
    slos : sequence of (ttft, tpot) pairs, seconds
        Targets for the attainment and goodput rows.

    Returns
    -------
    RateSweep
    """
    if not isinstance(config, SimulationConfig):
        raise ValueError(f"config must be a SimulationConfig, got {type(config).__name__}")
    r = check_positive("rates", rates).ravel()
    if r.size == 0:
        raise ValueError("rates must hold at least one request rate")
    g = int(check_integer("n_gpus", n_gpus, minimum=1))
    pairs = _check_slos(slos)
    cols = {k: [] for k in ("ttft_p50", "ttft_p99", "ttft_mean", "tpot_p50", "tpot_p99", "itl_p50",
                            "itl_p99", "throughput", "output_throughput")}
    attainment = np.zeros((len(pairs), r.size))
    goodput = np.zeros((len(pairs), r.size))
    results = []
    base = config.arrivals
    for j, rate in enumerate(r):
        arrivals = (dataclasses.replace(base, rate=float(rate) * g) if isinstance(base, Poisson)
                    else Poisson(float(rate) * g))
        res = simulate(dataclasses.replace(config, arrivals=arrivals), seed)
        rec = res.records
        ttft, tpot = rec.ttft, rec.tpot
        tp50, tp99 = np.nanpercentile(tpot, [50, 99]) if np.any(np.isfinite(tpot)) else (np.nan, np.nan)
        values, weights = res.itl_values()
        i50, i99 = weighted_percentile(values, weights, [50, 99])
        for key, value in [("ttft_p50", np.percentile(ttft, 50)), ("ttft_p99", np.percentile(ttft, 99)),
                           ("ttft_mean", ttft.mean()), ("tpot_p50", tp50), ("tpot_p99", tp99),
                           ("itl_p50", i50), ("itl_p99", i99),
                           ("throughput", len(rec) / res.duration / g),
                           ("output_throughput", rec.output_len.sum() / res.duration / g)]:
            cols[key].append(float(value))
        for i, (t1, t2) in enumerate(pairs):
            attainment[i, j] = res.slo_attainment(ttft_slo=t1, tpot_slo=t2)
            goodput[i, j] = res.goodput(ttft_slo=t1, tpot_slo=t2) / g
        results.append(res)
    return RateSweep(rates=r, n_gpus=g, slos=pairs, attainment=attainment, goodput=goodput,
                     results=tuple(results), **{k: np.array(v) for k, v in cols.items()})


#: Student's t, two-sided 95 %: t_{0.975, df} for df = 1..30 (beyond: the normal 1.96).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def seed_interval(values, axis=0):
    """Mean and half-width of its 95 % confidence interval over independent runs (one per seed).

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    Parameters
    ----------
    values : array_like
        One value per seed along ``axis`` (at least 2 seeds), e.g. a P99 from
        each of five simulations with different seeds.
    axis : int
        The seeds' axis.

    Returns
    -------
    (mean, half_width) : floats or ndarrays
        The interval is mean +- t_{0.975, n-1} s / sqrt(n), with s the sample
        standard deviation of the n runs: independent replications (A. M. Law,
        *Simulation Modeling and Analysis*, 5th ed., 2015, sec. 9.4).

    Examples
    --------
    >>> m, h = seed_interval([10.0, 12.0, 11.0, 9.0, 13.0])
    >>> round(m, 3), round(h, 3)        # 11 +- 2.776 x 1.581 / sqrt(5)
    (11.0, 1.963)
    """
    v = np.asarray(values, dtype=float)
    if v.ndim == 0 or v.shape[axis] < 2:
        raise ValueError(f"values must hold at least 2 runs along axis {axis}, got shape {v.shape}")
    n = v.shape[axis]
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    mean = v.mean(axis=axis)
    half = t * v.std(axis=axis, ddof=1) / np.sqrt(n)
    if np.ndim(mean) == 0:
        return float(mean), float(half)
    return mean, half


def rate_sweeps(config: SimulationConfig, rates, seeds, n_gpus: int = 1, slos=(), workload=None) -> tuple:
    """:func:`rate_sweep` once per seed: each seed draws its own requests and its own arrivals.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Parameters
    ----------
    config, rates, n_gpus, slos
        As in :func:`rate_sweep`.
    seeds : sequence of int
        One sweep per seed (at least 2 for an interval, :func:`seed_interval`).
    workload : callable, optional
        ``workload(seed)`` -> the Workload of that seed (for example
        ``lambda s: chat_workload(600, seed=s)``); default: the config's workload
        for every seed (then only the arrivals change).

    Returns
    -------
    tuple of RateSweep
        In seed order. ``seed_interval([s.ttft_p99 for s in sweeps])`` gives the
        mean P99 TTFT at each rate and its 95 % half-width.

    Examples
    --------
    >>> from servingmath import simulate as sim
    >>> toy = sim.Server(step_times=sim.LinearStepTimes(step_time=0.01))
    >>> config = sim.SimulationConfig(toy, Workload.fixed(100, 16, 2), sim.Poisson(1.0))
    >>> sweeps = rate_sweeps(config, [10.0], seeds=range(3))
    >>> len(sweeps), [f"{s.tpot_p50[0] * 1e3:.0f} ms" for s in sweeps]
    (3, ['10 ms', '10 ms', '10 ms'])
    """
    seeds = [int(check_integer("seeds", s, minimum=0)) for s in seeds]
    if not seeds:
        raise ValueError("seeds must hold at least one seed")
    if workload is not None and not callable(workload):
        raise ValueError(f"workload must be a function of the seed returning a Workload, got {workload!r}")
    out = []
    for s in seeds:
        c = config if workload is None else dataclasses.replace(config, workload=workload(s))
        out.append(rate_sweep(c, rates, n_gpus=n_gpus, seed=s, slos=slos))
    return tuple(out)


def two_class_traffic(n_interactive: int, interactive_rate: float, batch_rate: float, seed: int = 0):
    """Interactive and batch requests as two Poisson streams over the same window.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Lengths come from :func:`~servingmath.workloads.chat_workload` (the same
    distribution for both classes). About ``n_interactive x batch_rate /
    interactive_rate`` batch requests arrive while the interactive ones do.

    Returns
    -------
    workload : Workload
        In arrival order; priority 0 = interactive, 1 = batch.
    arrivals : Timestamps
    window : float
        Seconds from 0 to the last interactive arrival (measure inside it).

    Examples
    --------
    >>> w, arrivals, window = two_class_traffic(100, 5.0, 15.0, seed=0)
    >>> int((w.priorities == 0).sum()), int((w.priorities == 1).sum())
    (100, 300)
    >>> bool(np.all(np.diff(arrivals.times) >= 0)), f"{window:.1f} s"
    (True, '21.3 s')
    """
    n_i = int(check_integer("n_interactive", n_interactive, minimum=1))
    r_i = float(check_positive("interactive_rate", interactive_rate))
    r_b = float(check_nonnegative("batch_rate", batch_rate))
    n_b = int(round(n_i * r_b / r_i))
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x2C1A55]))
    t_i = np.cumsum(rng.exponential(1.0 / r_i, n_i))
    t_b = np.cumsum(rng.exponential(1.0 / r_b, n_b)) if n_b else np.zeros(0)
    times = np.concatenate([t_i, t_b])
    prio = np.concatenate([np.zeros(n_i, dtype=np.int64), np.ones(n_b, dtype=np.int64)])
    order = np.argsort(times, kind="stable")
    lengths = chat_workload(n_i + n_b, seed=seed)
    workload = Workload(lengths.prompt_lens, lengths.output_lens, prio[order], "interactive + batch")
    return workload, Timestamps(times[order]), float(t_i[-1])


def long_prompt_probe(server, policy, prompt_len: int, n_decoding: int, arrival: float = 0.5,
                      decode_output_len: int = 1000, seed: int = 0) -> dict:
    """One prompt of ``prompt_len`` tokens arrives while ``n_decoding`` sequences decode.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    The decoding sequences have 1-token prompts and ``decode_output_len``
    tokens to generate; they all arrive at time 0, and the long prompt (which
    then generates 2 tokens) at ``arrival`` seconds, when they are decoding.

    Returns
    -------
    dict
        ``service``: seconds from the prompt's first admission to its first
        token (its TTFT without the wait for the iteration in flight);
        ``ttft``: its TTFT; ``stall``: the longest gap between two tokens of
        the first decoding sequence after ``arrival`` (NaN without decoders);
        ``result``: the SimulationResult.

    Examples
    --------
    >>> from servingmath import simulate as sim
    >>> toy = sim.Server(step_times=sim.LinearStepTimes(step_time=0.01, per_token=1e-4))
    >>> probe = long_prompt_probe(toy, sim.ContinuousBatching(), prompt_len=1000, n_decoding=4)
    >>> f"{probe['service'] * 1e3:.1f} ms, stall {probe['stall'] * 1e3:.1f} ms"   # 10 + 100; + 10 + 0.5
    '110.0 ms, stall 120.5 ms'
    """
    lp = int(check_integer("prompt_len", prompt_len, minimum=1))
    b = int(check_integer("n_decoding", n_decoding, minimum=0))
    t = float(check_positive("arrival", arrival))
    out = int(check_integer("decode_output_len", decode_output_len, minimum=2))
    workload = Workload.from_lists([1] * b + [lp], [out] * b + [2], name="long-prompt probe")
    result = simulate(SimulationConfig(server, workload, Timestamps([0.0] * b + [t]), policy), seed)
    rec = result.records
    stall = float("nan")
    if b:
        times = result.token_times(0)
        after = times[np.searchsorted(times, t, side="left") - 1:]
        if after.size < 2 or after[-1] <= rec.first_token[b]:
            raise ValueError(f"the decoding sequences finished before the prompt's first token: "
                             f"raise decode_output_len (got {out})")
        stall = float(np.diff(after).max())
    return {"service": float(rec.first_token[b] - rec.scheduled[b]), "ttft": float(rec.ttft[b]),
            "stall": stall, "result": result}


def _ids(result, ids):
    n = len(result.records)
    idx = np.arange(n) if ids is None else np.asarray(ids)
    if idx.dtype == bool:
        if idx.shape != (n,):
            raise ValueError(f"ids as a mask must have one entry per request ({n}), got shape {idx.shape}")
        idx = np.flatnonzero(idx)
    if idx.size == 0:
        raise ValueError("ids selects no request")
    if idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"ids must be request ids in [0, {n}), got {idx.min()}..{idx.max()}")
    return idx.astype(np.int64)


def latency_summary(result, ids=None) -> dict:
    """TTFT and TPOT percentiles of some requests, and their inter-token gaps pooled.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Parameters
    ----------
    result : SimulationResult
    ids : array of int or bool mask, optional
        The requests (default: all).

    Returns
    -------
    dict of float (seconds)
        ``ttft_mean``, ``ttft_p50``, ``ttft_p99``, ``tpot_p50``, ``tpot_p99``,
        ``itl_p50``, ``itl_p99``, ``itl_max``.
    """
    idx = _ids(result, ids)
    rec = result.records
    gaps = np.concatenate([np.diff(result.token_times(int(i))) for i in idx])
    ttft = rec.ttft[idx]
    tpot = rec.tpot[idx]
    tpot = tpot[np.isfinite(tpot)]
    out = {"ttft_mean": float(ttft.mean()), "ttft_p50": float(np.percentile(ttft, 50)),
           "ttft_p99": float(np.percentile(ttft, 99))}
    out["tpot_p50"], out["tpot_p99"] = (map(float, np.percentile(tpot, [50, 99])) if tpot.size
                                        else (float("nan"), float("nan")))
    if gaps.size:
        out["itl_p50"], out["itl_p99"] = map(float, np.percentile(gaps, [50, 99]))
        out["itl_max"] = float(gaps.max())
    else:
        out["itl_p50"] = out["itl_p99"] = out["itl_max"] = float("nan")
    return out


def tokens_before(result, ids, time: float) -> int:
    """Output tokens the requests ``ids`` had received by ``time`` (seconds), first tokens included.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).
    """
    t = float(check_nonnegative("time", time))
    idx = _ids(result, ids)
    return int(sum(int(np.searchsorted(result.token_times(int(i)), t, side="right")) for i in idx))


def request_traces(result, ids, names=None) -> list:
    """:class:`~servingmath.plotting.RequestTrace` rows (arrival, first admission, token times) of some requests.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).
    """
    idx = _ids(result, ids)
    if names is None:
        names = [f"#{i} ({result.records.prompt_len[i]} in)" for i in idx]
    names = list(names)
    if len(names) != idx.size:
        raise ValueError(f"names must have one entry per request ({idx.size}), got {len(names)}")
    rec = result.records
    return [RequestTrace(str(name), float(rec.arrival[i]), float(rec.scheduled[i]),
                         result.token_times(int(i)).tolist()) for name, i in zip(names, idx)]


def plot_percentiles(ax, sweeps: dict, metric: str = "ttft", colors: dict | None = None,
                     percentiles=(50, 99), time_unit: float = 1e-3, unit_label: str = "ms", log: bool = True):
    """Percentile-versus-rate curves: one colour per sweep, P50 dashed, P99 solid.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Parameters
    ----------
    ax : matplotlib Axes
    sweeps : dict of name -> RateSweep, or name -> sequence of RateSweep (one per seed,
        :func:`rate_sweeps`): then the curve is the mean over the seeds and a band
        shows its 95 % confidence interval (:func:`seed_interval`).
    metric : {"ttft", "tpot", "itl"}
    colors : dict of name -> colour, optional
    percentiles : subset of (50, 99)
    log : bool
        Logarithmic y axis (labelled with plain numbers).
    """
    if not sweeps:
        raise ValueError("sweeps must hold at least one RateSweep")
    styles = {50: dict(ls="--", lw=1.2), 99: dict(ls="-", lw=2.0)}
    for k, (name, sweep) in enumerate(sweeps.items()):
        color = (colors or {}).get(name, f"C{k}")
        runs = [sweep] if isinstance(sweep, RateSweep) else list(sweep)
        for q in percentiles:
            values = np.array([r.percentile(metric, q) for r in runs]) / time_unit
            mean = values.mean(axis=0)
            ax.plot(runs[0].rates, mean, marker="o", ms=3, color=color, label=f"{name} P{q}", **styles[q])
            if len(runs) > 1:
                _, half = seed_interval(values)
                ax.fill_between(runs[0].rates, np.maximum(mean - half, mean / 10), mean + half, color=color,
                                alpha=0.15, lw=0)
    if log:
        log_axis(ax, "y")
    ax.set_xlabel("offered load per GPU (requests/s)")
    ax.set_ylabel(f"{metric.upper()} ({unit_label})")
    return ax


def plot_cdf(ax, values, label=None, color=None, time_unit: float = 1e-3, marks=(50, 99), **kwargs):
    """Empirical CDF of latencies (seconds, drawn in ``time_unit``), with dots at the given percentiles.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).
    """
    v = np.sort(check_nonnegative("values", values).ravel()) / time_unit
    if v.size == 0:
        raise ValueError("values must hold at least one latency")
    y = np.arange(1, v.size + 1) / v.size
    line = ax.step(v, y, where="post", label=label, color=color, **kwargs)[0]
    for q in marks:
        ax.plot(np.percentile(v, q), q / 100, "o", color=line.get_color(), ms=4)
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0, 1.02)
    return ax
