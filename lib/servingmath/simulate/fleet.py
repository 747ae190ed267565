"""A fleet: many replicas behind a router, optionally scaled up and down over the day.

Describe it declaratively, as a single server:

>>> from servingmath import simulate as sim
>>> from servingmath.workloads import Poisson, Workload
>>> toy = sim.Server(step_times=sim.LinearStepTimes(step_time=1e-3))
>>> fleet = sim.FleetConfig(replicas=[sim.Replica(toy, sim.ContinuousBatching(max_batch_size=1))] * 4,
...                         router=sim.LeastLoaded(), workload=Workload.fixed(2000, 1, 100),
...                         arrivals=Poisson(rate=30.0))
>>> result = sim.simulate(fleet, seed=0)
>>> sorted(set(result.records.replica.tolist()))
[0, 1, 2, 3]
>>> print(f"{result.slo_attainment(ttft_slo=0.05):.3f}")
0.784

Each replica is a :class:`Replica` (a :class:`~servingmath.simulate.Server`, a
scheduling policy and optional speculative decoding; replicas may differ) or a
bare ``Server`` (continuous batching). ``[replica] * n`` is n identical ones.

Routers
-------
* :class:`Random`: each request to a replica drawn uniformly (the router's own
  random stream): a Poisson stream splits into independent Poisson streams of
  rate lambda / c, so c identical replicas are c separate queues (c x M/G/1 for
  one-at-a-time replicas).
* :class:`RoundRobin`: replicas in turn (each sees every c-th request: Erlang-c
  gaps, more regular than Poisson).
* :class:`LeastLoaded`: join the shortest queue, measured in outstanding tokens
  (prompt tokens still to prefill + output tokens still to generate; the router
  is assumed to know output lengths, an oracle real routers estimate) or in
  requests (running + waiting, what a router can count). Ties go to the lowest
  index.
* :class:`PrefixAffinity`: requests with the same prefix id go to the replica
  that first served that prefix while the fleet is balanced; when it is not
  (SGLang router's rule: max load - min load > ``balance_abs`` and
  max load > ``balance_rel`` x min load, in running + waiting requests), and for
  requests without a prefix, to the least loaded replica.
* :class:`CentralQueue`: no queue at the replicas: a request goes to a replica
  only when one has a free batch slot (the one with the most free slots),
  otherwise it waits in one FCFS queue at the router, served by the first
  replica that frees a slot. With one-at-a-time replicas this is exactly the
  M/G/c queue (M/M/c with exponential service): the pooled queue of
  :func:`servingmath.queueing.pooling_comparison`.

How it is simulated
-------------------
One event loop runs all the replicas: an arrival goes to the replica the router
picks, and each replica jumps over its runs of decode steps in closed form,
cutting a run short when a request joins it. When the replicas cannot
influence each other, the fleet is simulated one replica at a time instead:
a :class:`Random` or :class:`RoundRobin` router (the replica of each request is
fixed before the run: the router's own draws, or the request's turn), no
autoscaler, open-loop arrivals (a :class:`~servingmath.workloads.ClosedLoop`
client's next request depends on whichever replica finishes first) and no
speculative decoding (its acceptances come from one random stream, drawn in
event order). Each replica then runs alone over its own arrivals, on the
one-server path that bounds every run of decode steps by its next arrival
instead of cutting it: the same events in the same order for each replica, so
the same results, bit for bit, at the cost per request of one server.
``simulate(config, seed, workers=N)`` deals those replicas out to N processes
(the same result again, in less wall-clock time). Plain replicas (no KV options,
speculation or pipeline) behind a random, round-robin or least-loaded router, all on
all day, run in the compiled loop (:mod:`.compiled`): the same results again, about ten
times faster.

Autoscaling
-----------
``autoscaler`` adds and removes replicas during the run: :class:`ScheduledScaling`
(target counts at given times) or :class:`RateScaling` (every ``interval``
seconds: ceil(measured arrival rate / ``rate_per_replica``) + ``headroom``
replicas, N + 1 for headroom=1). The first replicas of the list are the active
ones; a replica added takes ``warmup`` seconds (loading weights, capturing CUDA
graphs) before the router uses it; a replica removed takes no new requests and
finishes the ones it holds (it drains). ``SimulationResult.replica_timeline()``
gives the counts over time and the replica-seconds paid for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_integer, check_nonnegative, check_positive
from ..workloads import CappedPoisson, ClosedLoop, Workload
from .config import (ChunkedPrefill, ContinuousBatching, Server, Speculative, SpeculativeByLoad,
                     StaticBatching, check_arrivals, check_replica_settings)

__all__ = ["Replica", "Random", "RoundRobin", "LeastLoaded", "PrefixAffinity", "CentralQueue",
           "ScheduledScaling", "RateScaling", "FleetConfig", "ROUTERS"]


@dataclass(frozen=True)
class Replica:
    """One replica of a fleet: a server, its scheduling policy, and optional speculative decoding.

    Derived in the chapter "Capacity planning" (notebooks/13_capacity_planning.ipynb).
    """

    server: Server
    policy: object = field(default_factory=ContinuousBatching)
    speculative: Speculative | SpeculativeByLoad | None = None

    def __post_init__(self):
        if not isinstance(self.server, Server):
            raise ValueError(f"server must be a Server, got {self.server!r}")
        if not isinstance(self.policy, (ContinuousBatching, ChunkedPrefill, StaticBatching)):
            raise ValueError(f"a replica's policy must be ContinuousBatching, ChunkedPrefill or "
                             f"StaticBatching (a disaggregated deployment is its own fleet), got {self.policy!r}")
        check_replica_settings(self.server, self.policy, self.speculative)


@dataclass(frozen=True)
class Random:
    """Each request to a replica chosen uniformly at random.

    Derived in the chapter "Capacity planning" (notebooks/13_capacity_planning.ipynb).
    """


@dataclass(frozen=True)
class RoundRobin:
    """Replicas in turn.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).
    """


_MEASURES = ("tokens", "requests")


@dataclass(frozen=True)
class LeastLoaded:
    """Join the shortest queue: ``measure="tokens"`` (outstanding prompt + output tokens) or

    Derived in the chapter "Capacity planning" (notebooks/13_capacity_planning.ipynb).
    ``"requests"`` (running + waiting)."""

    measure: str = "tokens"

    def __post_init__(self):
        if self.measure not in _MEASURES:
            raise ValueError(f"measure must be one of {', '.join(_MEASURES)}, got {self.measure!r}")


@dataclass(frozen=True)
class PrefixAffinity:
    """Same prefix, same replica, while the fleet is balanced (SGLang router's cache-aware rule).

    Derived in the chapter "A fleet: routing, pooling, prefix caches and autoscaling" (notebooks/15_fleet.ipynb).

    Attributes
    ----------
    balance_abs, balance_rel : float
        The fleet is imbalanced when max load - min load > ``balance_abs`` and
        max load > ``balance_rel`` x min load (load = running + waiting requests);
        then every request goes to the least loaded replica. Defaults 32 and 1.1,
        sgl-router's ``CacheAwareConfig`` defaults.
    fallback : LeastLoaded
        Where requests without a prefix id go (and new prefixes, whose home
        becomes the replica chosen).

    References
    ----------
    sgl-project/sglang, ``sgl-router/src/policies/cache_aware.rs``, commit
    b6f20641ad6bafc1278db74d1e13b0e9da47bd64 (the rule), and
    ``sgl-router/src/policies/mod.rs``, commit 08fc57426c9d59569eef21a05bb1106bb2c92537
    (the defaults 32 and 1.1), read 2026-11. SGLang matches prompt text in a
    radix tree per worker; here a prefix id stands for the text.
    """

    balance_abs: float = 32.0
    balance_rel: float = 1.1
    fallback: LeastLoaded = field(default_factory=LeastLoaded)

    def __post_init__(self):
        check_nonnegative("balance_abs", self.balance_abs)
        check_positive("balance_rel", self.balance_rel)
        if self.balance_rel < 1:
            raise ValueError(f"balance_rel must be >= 1 (a ratio max / min), got {self.balance_rel:g}")
        if not isinstance(self.fallback, LeastLoaded):
            raise ValueError(f"fallback must be a LeastLoaded, got {self.fallback!r}")


@dataclass(frozen=True)
class CentralQueue:
    """One FCFS queue at the router; a replica takes a request when it has a free batch slot.

    Derived in the chapter "A fleet: routing, pooling, prefix caches and autoscaling" (notebooks/15_fleet.ipynb).
    """


ROUTERS = (Random, RoundRobin, LeastLoaded, PrefixAffinity, CentralQueue)


def _times_counts(times, counts):
    t = check_nonnegative("times", times)
    c = np.asarray(counts)
    if t.ndim != 1 or t.shape != c.shape or t.size == 0:
        raise ValueError(f"times and replicas must be 1-D of equal, non-zero length, got shapes {t.shape} "
                         f"and {c.shape}")
    if np.any(np.diff(t) <= 0):
        raise ValueError("times must increase")
    check_integer("replicas", c, minimum=1)
    return t.astype(float), c.astype(np.int64)


@dataclass(frozen=True, eq=False)
class ScheduledScaling:
    """Target replica counts from given times on: ``replicas[i]`` from ``times[i]``.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Before ``times[0]`` the fleet runs ``replicas[0]`` (no warm-up for the first ones).
    """

    times: np.ndarray
    replicas: np.ndarray
    warmup: float = 0.0

    def __post_init__(self):
        t, c = _times_counts(self.times, self.replicas)
        check_nonnegative("warmup", self.warmup)
        object.__setattr__(self, "times", t)
        object.__setattr__(self, "replicas", c)

    def initial(self, n_max):
        return int(min(self.replicas[0], n_max))


@dataclass(frozen=True)
class RateScaling:
    """Every ``interval`` seconds: ceil(arrival rate over the last ``window`` seconds /
    ``rate_per_replica``) + ``headroom`` replicas, between ``min_replicas`` and the fleet's size.

    Derived in the chapter "A fleet: routing, pooling, prefix caches and autoscaling" (notebooks/15_fleet.ipynb).

    ``rate_per_replica`` is the load one replica carries within its SLOs (e.g.
    from :func:`servingmath.simulate.max_goodput_rate` of one replica);
    ``headroom=1`` is the N + 1 rule. The fleet starts with ``initial_replicas``
    (default: ``min_replicas``).
    """

    rate_per_replica: float
    interval: float = 300.0
    window: float | None = None
    headroom: int = 1
    min_replicas: int = 1
    initial_replicas: int | None = None
    warmup: float = 0.0

    def __post_init__(self):
        check_positive("rate_per_replica", self.rate_per_replica)
        check_positive("interval", self.interval)
        if self.window is not None:
            check_positive("window", self.window)
        check_integer("headroom", self.headroom, minimum=0)
        check_integer("min_replicas", self.min_replicas, minimum=1)
        if self.initial_replicas is not None:
            check_integer("initial_replicas", self.initial_replicas, minimum=1)
        check_nonnegative("warmup", self.warmup)

    def initial(self, n_max):
        return int(min(self.initial_replicas or self.min_replicas, n_max))

    def target(self, rate, n_max):
        """Replicas wanted at a measured arrival rate (requests/s)."""
        want = math.ceil(rate / self.rate_per_replica - 1e-9) + int(self.headroom)
        return int(min(max(want, self.min_replicas), n_max))


def _as_replica(item, i):
    if isinstance(item, Replica):
        return item
    if isinstance(item, Server):
        return Replica(item)
    raise ValueError(f"replicas[{i}] must be a Replica or a Server, got {item!r}")


@dataclass(frozen=True)
class FleetConfig:
    """A fleet of replicas behind a router: ``simulate(config, seed)`` runs it.

    Derived in the chapter "Capacity planning" (notebooks/13_capacity_planning.ipynb).

    Attributes
    ----------
    replicas : sequence of Replica or Server
        The replicas (a ``Server`` means ``Replica(server)``, continuous batching);
        with an autoscaler, the most it may run.
    workload : Workload
    arrivals : Poisson, PiecewisePoisson, ClosedLoop or Timestamps
    router : Random, RoundRobin, LeastLoaded, PrefixAffinity or CentralQueue
    autoscaler : ScheduledScaling, RateScaling or None
    """

    replicas: tuple
    workload: Workload
    arrivals: object
    router: object = field(default_factory=LeastLoaded)
    autoscaler: object = None

    def __post_init__(self):
        reps = self.replicas
        if isinstance(reps, (Replica, Server)) or not hasattr(reps, "__len__"):
            raise ValueError(f"replicas must be a list of Replica or Server (e.g. [replica] * 4), got {reps!r}")
        if len(reps) == 0:
            raise ValueError("replicas is empty: a fleet needs at least one replica")
        object.__setattr__(self, "replicas", tuple(_as_replica(r, i) for i, r in enumerate(reps)))
        if not isinstance(self.workload, Workload):
            raise ValueError(f"workload must be a Workload, got {self.workload!r}")
        check_arrivals(self.arrivals, self.workload)
        if not isinstance(self.router, ROUTERS):
            raise ValueError(f"router must be one of Random, RoundRobin, LeastLoaded, PrefixAffinity, "
                             f"CentralQueue, got {self.router!r}")
        if self.autoscaler is not None:
            if not isinstance(self.autoscaler, (ScheduledScaling, RateScaling)):
                raise ValueError(f"autoscaler must be a ScheduledScaling, a RateScaling or None, "
                                 f"got {self.autoscaler!r}")
            if isinstance(self.autoscaler, RateScaling) and isinstance(self.arrivals, (ClosedLoop, CappedPoisson)):
                raise ValueError("RateScaling measures open-loop arrivals; a ClosedLoop fleet needs "
                                 "ScheduledScaling")

    @classmethod
    def identical(cls, n_replicas, server, *, policy=None, speculative=None, **fields) -> "FleetConfig":
        """``n_replicas`` copies of one replica (``server``, ``policy``, ``speculative``)."""
        n = int(check_integer("n_replicas", n_replicas, minimum=1))
        replica = Replica(server, policy if policy is not None else ContinuousBatching(), speculative)
        return cls(replicas=(replica,) * n, **fields)
