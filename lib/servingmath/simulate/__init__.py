"""A discrete-event simulator of LLM serving, driven by the library's step-time model.

Describe the system declaratively, run it with a seed, read per-request
records (the shape of Ciw's API):

* a :class:`Server` (model, accelerator, efficiencies, ``pipeline_parallel``
  stages; or a toy :class:`LinearStepTimes`), a :class:`~servingmath.workloads.Workload`
  (prompt and output lengths, priority classes, shared-prefix ids), an arrival process
  (:class:`Poisson`, with gamma gaps when ``burstiness != 1`` as ``vllm bench
  serve --burstiness`` draws them; :class:`PiecewisePoisson` for a rate that changes
  over the day; :class:`ClosedLoop`, :class:`Timestamps`), a scheduling
  policy (:class:`ContinuousBatching`, :class:`ChunkedPrefill`,
  :class:`StaticBatching`, :class:`Disaggregated`) and optionally
  :class:`Speculative` decoding (or :class:`SpeculativeByLoad`, switched by
  load), gathered in a :class:`SimulationConfig`;
* or a fleet: :class:`Replica` s behind a router (:class:`Random`,
  :class:`RoundRobin`, :class:`LeastLoaded`, :class:`PrefixAffinity`,
  :class:`CentralQueue`), optionally autoscaled, in a :class:`FleetConfig`
  (:mod:`.fleet`);
* :func:`simulate` returns a :class:`SimulationResult`: ``.records`` (one row
  per request: arrival, first admission, first token, finish, the replica that
  served it, the prompt tokens found in the prefix cache),
  ``.token_times(i)``, ``.metrics()`` (TTFT, TPOT, ITL, E2E: mean, P50, P90,
  P95, P99; throughput), ``.slo_attainment(...)``, ``.goodput(...)`` and
  ``.timeseries()`` (batch size and KV occupancy over time); for fleets
  ``.replica_metrics(k)``, ``.requests_per_replica()``, ``.replica_timeline()``
  (autoscaling and replica-seconds), ``.prefix_hit_rate()``,
  ``.speculation_switches()``, ``.stage_utilisation()`` (pipelines);
* :func:`max_goodput_rate` searches DistServe's goodput.

Iteration times come from :mod:`.steptimes` (the library's
:func:`~servingmath.decode.decode_step_parts` and
:func:`~servingmath.prefill.prefill_step_parts`, one formula for prefill,
decode and mixed iterations). The event loop is :mod:`.engine`; one instance's
queue, batch and closed-form runs of decode steps are :mod:`.instance`; the
scheduling policies are :mod:`.policies`; pipeline parallelism is :mod:`.pipeline`;
the metric definitions (vLLM's)
are in :mod:`.results`; configuration in :mod:`.config`. Times are seconds from the start
of the simulation. Runs are deterministic given the seed.

The common case (plain replicas under continuous batching or chunked prefill, open-loop
arrivals: one server, or a fleet behind a random, round-robin or least-loaded router) runs
in :mod:`.compiled`, the same loop compiled with numba: the same results bit for bit,
about ten times faster (a day of a 16-replica fleet in about a minute of one core instead of
ten to twenty). ``SERVINGMATH_COMPILED=0`` in the environment runs everything in the
reference loop.

Examples
--------
>>> from servingmath import simulate as sim
>>> from servingmath.workloads import Workload, Poisson
>>> config = sim.SimulationConfig(
...     server=sim.Server("Llama-3.1-8B", "H100"),
...     workload=Workload.fixed(2000, prompt_len=512, output_len=128),
...     arrivals=Poisson(rate=20.0),
...     policy=sim.ContinuousBatching(max_batch_size=64))
>>> result = sim.simulate(config, seed=0)
>>> r = result.records[0]
>>> r.arrival <= r.scheduled <= r.first_token <= r.finish
True
>>> m = result.metrics()
>>> print(f"TTFT P50 {m.ttft.p50 * 1e3:.1f} ms, TPOT P50 {m.tpot.p50 * 1e3:.2f} ms, "
...       f"{m.output_throughput:.0f} tokens/s")
TTFT P50 10.1 ms, TPOT P50 5.64 ms, 2559 tokens/s
>>> print(f"{result.slo_attainment(ttft_slo=0.1, tpot_slo=0.01):.3f}")
1.000
"""

from __future__ import annotations

from .._validation import check_bool, check_integer
from ..workloads import CappedPoisson, ClosedLoop, PiecewisePoisson, Poisson, Timestamps, Workload
from .config import (
    ChunkedPrefill,
    ContinuousBatching,
    Disaggregated,
    Server,
    SimulationConfig,
    Speculative,
    SpeculativeByLoad,
    StaticBatching,
    expected_tokens_per_step,
)
from .engine import Engine
from .fleet import (CentralQueue, FleetConfig, LeastLoaded, PrefixAffinity, Random, RateScaling, Replica,
                    RoundRobin, ScheduledScaling)
from .goodput import max_goodput_rate, slo_attainment_curve
from .results import Metrics, Records, RequestRecord, SimulationResult, Summary
from .steptimes import LibraryStepTimes, LinearStepTimes

__all__ = [
    "simulate",
    "SimulationConfig",
    "Server",
    "LinearStepTimes",
    "LibraryStepTimes",
    "ContinuousBatching",
    "ChunkedPrefill",
    "StaticBatching",
    "Disaggregated",
    "Speculative",
    "SpeculativeByLoad",
    "expected_tokens_per_step",
    "FleetConfig",
    "Replica",
    "Random",
    "RoundRobin",
    "LeastLoaded",
    "PrefixAffinity",
    "CentralQueue",
    "ScheduledScaling",
    "RateScaling",
    "Workload",
    "Poisson",
    "PiecewisePoisson",
    "ClosedLoop",
    "CappedPoisson",
    "Timestamps",
    "SimulationResult",
    "Records",
    "RequestRecord",
    "Metrics",
    "Summary",
    "max_goodput_rate",
    "slo_attainment_curve",
]


def simulate(config, seed: int = 0, progress: bool = False, *, workers: int = 1) -> SimulationResult:
    """Run one simulation.

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    Parameters
    ----------
    config : SimulationConfig or FleetConfig
    seed : int
        Seeds the arrival gaps, exponential think times and speculative
        acceptances (each its own stream). Same config and seed, same result.
    progress : bool
        Print a progress line to stderr (off by default; keep it off in notebooks).
    workers : int
        Processes for a fleet whose replicas never interact (a ``Random`` or
        ``RoundRobin`` router, no autoscaler, open-loop arrivals, no speculative
        decoding; see :mod:`servingmath.simulate.fleet`): its replicas are dealt
        out to them, each simulated on its own. The same result as ``workers=1``,
        bit for bit, in less wall-clock time; other configurations ignore it.
        Processes are started with :mod:`concurrent.futures`, so a script that
        uses it on macOS or Windows needs an ``if __name__ == "__main__":`` guard.
        With the compiled loop (:mod:`.compiled`) one process is usually enough.

    Returns
    -------
    SimulationResult

    Raises
    ------
    ValueError
        For a request longer than the model's context or the KV cache, a
        prompt longer than the prefill token budget, and bad configuration values.

    Examples
    --------
    >>> from servingmath.workloads import Workload, Poisson
    >>> toy = SimulationConfig(server=Server(step_times=LinearStepTimes(step_time=1e-3)),
    ...                        workload=Workload.fixed(200, prompt_len=128, output_len=16),
    ...                        arrivals=Poisson(rate=50.0), policy=ContinuousBatching(max_batch_size=8))
    >>> result = simulate(toy, seed=0)
    >>> m = result.metrics()
    >>> len(result.records), round(m.ttft.p50 * 1e3, 2), round(m.tpot.p50 * 1e3, 2)   # ms: about one step each
    (200, 1.08, 1.07)
    """
    if not isinstance(config, (SimulationConfig, FleetConfig)):
        raise ValueError(f"config must be a SimulationConfig or a FleetConfig, got {type(config).__name__}")
    if isinstance(seed, bool):
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    seed = check_integer("seed", seed, minimum=0, scalar=True)
    progress = check_bool("progress", progress)
    workers = check_integer("workers", workers, minimum=1, scalar=True)
    engine = Engine(config, seed, progress=progress).run(workers=int(workers))
    return SimulationResult(config, int(seed), engine)
