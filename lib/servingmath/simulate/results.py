"""What a simulation returns: per-request records, token times, metrics, SLOs and goodput.

Metric definitions (those of vLLM's ``benchmark_serving``)
-----------------------------------------------------------
* TTFT = first token time - arrival.
* E2E = finish (last token) - arrival.
* TPOT = (E2E - TTFT) / (output tokens - 1), per request; requests with one
  output token have no TPOT (they count as meeting a TPOT SLO, as in vLLM).
* ITL = the gaps between successive token emissions of a request, pooled over
  all requests (a speculative step that yields several tokens is one emission).
* Percentiles use numpy's default (linear interpolation), as vLLM does.
* Throughput = tokens (or requests) / duration, where the duration runs from
  the first arrival to the last finish.
* Goodput (vLLM): requests per second that meet *every* given SLO.
  Goodput (DistServe): the highest request rate at which at least a given
  fraction of requests meets both the TTFT and the TPOT SLO
  (:func:`servingmath.simulate.max_goodput_rate`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .._validation import as_array, check_integer
from ..slo import meets_slo, request_goodput

__all__ = ["RequestRecord", "Records", "Summary", "Metrics", "SimulationResult", "weighted_percentile"]

_PERCENTILES = (50, 90, 95, 99)


class RequestRecord(NamedTuple):
    """One request's record (times in seconds from the start of the simulation).

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).
    """

    request_id: int
    priority: int
    prompt_len: int
    output_len: int
    arrival: float
    scheduled: float
    first_token: float
    finish: float
    preemptions: int
    replica: int = 0
    cached_tokens: int = 0

    @property
    def ttft(self) -> float:
        return self.first_token - self.arrival

    @property
    def e2e(self) -> float:
        return self.finish - self.arrival

    @property
    def tpot(self) -> float:
        """vLLM's TPOT, (E2E - TTFT) / (output tokens - 1); NaN for one output token."""
        if self.output_len < 2:
            return float("nan")
        return (self.finish - self.first_token) / (self.output_len - 1)


@dataclass(frozen=True, eq=False)
class Records:
    """The records of all requests as columns (numpy arrays), indexed by request id.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    ``records[i]`` is a :class:`RequestRecord`; ``records.ttft`` etc. are arrays.
    ``scheduled`` is when the request was first admitted to a batch (its
    prefill began); ``preemptions`` counts how often it was evicted and recomputed;
    ``replica`` is the replica of a fleet that served it (0 for a single server);
    ``cached_tokens`` the prompt tokens its first prefill found in the prefix cache.
    """

    request_id: np.ndarray
    priority: np.ndarray
    prompt_len: np.ndarray
    output_len: np.ndarray
    arrival: np.ndarray
    scheduled: np.ndarray
    first_token: np.ndarray
    finish: np.ndarray
    preemptions: np.ndarray
    replica: np.ndarray = None
    cached_tokens: np.ndarray = None

    def __post_init__(self):
        for name in ("replica", "cached_tokens"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.zeros(self.request_id.size, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.request_id.size)

    def __getitem__(self, i) -> RequestRecord:
        i = int(i)
        return RequestRecord(i, int(self.priority[i]), int(self.prompt_len[i]), int(self.output_len[i]),
                             float(self.arrival[i]), float(self.scheduled[i]),
                             float(self.first_token[i]), float(self.finish[i]),
                             int(self.preemptions[i]), int(self.replica[i]), int(self.cached_tokens[i]))

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    @property
    def ttft(self) -> np.ndarray:
        return self.first_token - self.arrival

    @property
    def e2e(self) -> np.ndarray:
        return self.finish - self.arrival

    @property
    def queue_delay(self) -> np.ndarray:
        """Seconds from arrival to the first admission to a batch."""
        return self.scheduled - self.arrival

    @property
    def tpot(self) -> np.ndarray:
        """vLLM's TPOT per request; NaN where the output is one token."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.output_len > 1,
                            (self.finish - self.first_token) / (self.output_len - 1), np.nan)


def weighted_percentile(values, weights, q):
    """Percentiles of ``values`` repeated ``weights`` times, without building the repeated array.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Equals ``np.percentile(np.repeat(values, weights), q)`` (linear interpolation).
    ``values`` and ``weights`` are 1-D with one whole count >= 0 per value; ``q``
    is in [0, 100]. With no data (every weight 0) the percentiles are NaN, as
    for a run without a single inter-token gap.

    >>> weighted_percentile([1.0, 5.0], [3, 1], [50, 100]).tolist()
    [1.0, 5.0]
    """
    v = np.atleast_1d(as_array("values", values))
    w = np.atleast_1d(check_integer("weights", weights, minimum=0))
    if v.ndim != 1 or w.shape != v.shape:
        raise ValueError(f"values and weights must be 1-D with one count per value, got shapes "
                         f"{v.shape} and {w.shape}")
    qa = as_array("q", q)
    if qa.size and np.any((qa < 0) | (qa > 100)):
        raise ValueError(f"q must be percentiles in [0, 100], got {float(qa[(qa < 0) | (qa > 100)].flat[0]):g}")
    return _weighted_percentile(v, w.astype(np.int64), qa, np.shape(q))


def _weighted_percentile(v, w, qa, shape):
    """weighted_percentile for checked arrays (``w`` whole counts >= 0, ``qa`` in [0, 100])."""
    keep = w > 0
    if not keep.all():
        v, w = v[keep], w[keep]
    if v.size == 0:
        return np.full(shape, np.nan)
    order = np.argsort(v)        # any order of equal values gives the same percentiles
    v, w = v[order], w[order]
    cum = np.cumsum(w)
    n = int(cum[-1])
    h = (n - 1) * qa / 100.0
    lo = np.floor(h).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    x_lo = v[np.searchsorted(cum, lo, side="right")]
    x_hi = v[np.searchsorted(cum, hi, side="right")]
    return x_lo + (h - lo) * (x_hi - x_lo)


@dataclass(frozen=True)
class Summary:
    """Mean and percentiles of one latency metric, in seconds; ``count`` values went in.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).
    """

    mean: float
    p50: float
    p90: float
    p95: float
    p99: float
    count: int

    @classmethod
    def of(cls, values, weights=None) -> "Summary":
        v = np.asarray(values, dtype=float)
        if weights is None:
            v = v[~np.isnan(v)]
            if v.size == 0:
                return cls(*([float("nan")] * 5), 0)
            p = np.percentile(v, _PERCENTILES)
            return cls(float(v.mean()), *map(float, p), int(v.size))
        w = np.asarray(weights, dtype=np.int64)
        total = int(w.sum())
        if total == 0:
            return cls(*([float("nan")] * 5), 0)
        if w.shape != v.shape or (w.size and w.min() < 0):
            raise ValueError(f"weights must be one whole count >= 0 per value, got shapes {w.shape} and {v.shape}")
        p = _weighted_percentile(v, w, np.asarray(_PERCENTILES, dtype=float), np.shape(_PERCENTILES))
        return cls(float((v * w).sum() / total), *map(float, p), total)


@dataclass(frozen=True)
class Metrics:
    """The benchmark numbers of a run (seconds, requests/s, tokens/s).

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).
    """

    n_requests: int
    duration: float
    request_throughput: float
    output_throughput: float
    total_token_throughput: float
    ttft: Summary
    tpot: Summary
    itl: Summary
    e2e: Summary
    queue_delay: Summary
    preemptions: int

    def __str__(self) -> str:
        lines = [
            f"requests {self.n_requests}, duration {self.duration:.2f} s, preemptions {self.preemptions}",
            f"throughput {self.request_throughput:.2f} requests/s, {self.output_throughput:.0f} "
            f"output tokens/s, {self.total_token_throughput:.0f} tokens/s",
            f"{'(ms)':<12}{'mean':>10}{'P50':>10}{'P90':>10}{'P95':>10}{'P99':>10}",
        ]
        for name in ("ttft", "tpot", "itl", "e2e", "queue_delay"):
            s = getattr(self, name)
            row = "".join(f"{x * 1e3:>10.1f}" for x in (s.mean, s.p50, s.p90, s.p95, s.p99))
            lines.append(f"{name.upper() if name != 'queue_delay' else 'queue':<12}{row}")
        return "\n".join(lines)


class SimulationResult:
    """The outcome of :func:`servingmath.simulate.simulate`.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Attributes
    ----------
    config : SimulationConfig
    seed : int
    records : Records
        One row per request, in request (workload) order.
    instances : list of str
        Names of the model instances (``"server"``, or ``"prefill-0"``, ``"decode-0"``, ...).

    Methods
    -------
    metrics(priority=None, itl=True) -> Metrics
    token_times(request_id) -> ndarray
    itl_values(priority=None) -> (values, weights)
    meets_slo(ttft_slo=None, tpot_slo=None, e2el_slo=None) -> bool array
    slo_attainment(ttft_slo=None, tpot_slo=None, e2el_slo=None, priority=None) -> float
    goodput(ttft_slo=None, tpot_slo=None, e2el_slo=None) -> float (requests/s)
    timeseries(instance=0) -> dict of arrays
    """

    def kv_capacity(self, instance: int = 0) -> float:
        """KV-cache capacity (tokens) of an instance; ``inf`` for a toy server without one."""
        return float(self._kv_capacity[instance])

    def __init__(self, config, seed, engine):
        self.config = config
        self.seed = seed
        n = engine.n
        self.records = Records(
            request_id=np.arange(n),
            priority=np.asarray(engine._prio, dtype=np.int64),
            prompt_len=np.asarray(engine._prompt, dtype=np.int64),
            output_len=np.asarray(engine._out, dtype=np.int64),
            arrival=np.asarray(engine.arrival, dtype=float),
            scheduled=np.asarray(engine.scheduled, dtype=float),
            first_token=np.asarray(engine.first_token, dtype=float),
            finish=np.asarray(engine.finish_time, dtype=float),
            preemptions=np.asarray(engine.preemptions, dtype=np.int64),
            replica=(np.asarray(engine.replica_of, dtype=np.int64) if engine.replica_of is not None else None),
            cached_tokens=(np.asarray(engine.cached_tokens, dtype=np.int64) if engine.shared is not None
                           else None),
        )
        self.instances = [inst.name for inst in engine.instances]
        self.replicas = [rep.name for rep in engine.replicas]
        self._instance_replica = [inst.replica for inst in engine.instances]
        self._prefix_counts = [None if inst.pc is None else (inst.pc.lookups, inst.pc.hits, inst.pc.hit_tokens)
                               for inst in engine.instances]
        self._spec_log = [list(inst.spec_log) for inst in engine.instances]
        self._pipe_busy = [None if inst.pipe is None else list(inst.pipe.busy) for inst in engine.instances]
        self._scale_log = list(engine.scale_log)
        self._kv_capacity = [inst.kv_cap for inst in engine.instances]
        # each instance's logs as the engine left them; read as columns on first use (_seg, _ser)
        self._logs = [(inst.segments, inst.series) for inst in engine.instances]
        self._segments = [None] * len(engine.instances)
        self._series = [None] * len(engine.instances)
        self._st_inst = np.asarray(engine.st_inst, dtype=np.int64)
        self._st_g0 = np.asarray(engine.st_g0, dtype=np.int64)
        self._st_n = np.asarray(engine.st_n, dtype=np.int64)
        self._extra = {rid: [tuple(p) for p in pieces] for rid, pieces in engine.extra.items()}
        self._step_ends = [None] * len(engine.instances)

    def __repr__(self) -> str:
        if hasattr(self.config, "router"):
            return (f"SimulationResult({len(self.records)} requests, seed={self.seed}, "
                    f"{len(self.replicas)} replicas, router={type(self.config.router).__name__})")
        return (f"SimulationResult({len(self.records)} requests, seed={self.seed}, "
                f"policy={type(self.config.policy).__name__})")

    def _seg(self, inst: int) -> dict:
        """An instance's runs of decode steps as columns: (t0, K, A, beta, S0, B) per run."""
        if self._segments[inst] is None:
            seg = np.asarray(self._logs[inst][0], dtype=float).reshape(-1, 6)
            self._segments[inst] = {"t0": seg[:, 0], "k": seg[:, 1].astype(np.int64), "a": seg[:, 2],
                                    "beta": seg[:, 3], "s0": seg[:, 4], "b": seg[:, 5]}
        return self._segments[inst]

    def _ser(self, inst: int) -> dict:
        """An instance's time series as columns, one row per action."""
        if self._series[inst] is None:
            ts = np.asarray(self._logs[inst][1], dtype=float).reshape(-1, 5)
            self._series[inst] = {"time": ts[:, 0], "running": ts[:, 1].astype(np.int64),
                                  "decoding": ts[:, 2].astype(np.int64),
                                  "prefill_tokens": ts[:, 3].astype(np.int64), "kv_tokens": ts[:, 4]}
        return self._series[inst]

    # ---- token times ------------------------------------------------------------------------------
    def _steps(self, inst: int) -> np.ndarray:
        """End time of every decode step of an instance (rebuilt from its segments)."""
        if self._step_ends[inst] is None:
            s = self._seg(inst)
            k_seg = s["k"]
            seg = np.repeat(np.arange(k_seg.size), k_seg)
            first = np.cumsum(k_seg) - k_seg
            k = (np.arange(int(k_seg.sum())) - first[seg] + 1).astype(float)
            a, beta, s0, b = s["a"][seg], s["beta"][seg], s["s0"][seg], s["b"][seg]
            self._step_ends[inst] = s["t0"][seg] + (k * a + beta * (k * s0 + b * k * (k - 1) * 0.5))
        return self._step_ends[inst]

    def token_times(self, request_id: int) -> np.ndarray:
        """Times (s) at which request ``request_id`` emitted tokens, first token included.

        One entry per emission: with speculative decoding one emission can carry
        several tokens. The last entry is the finish time.
        """
        n = len(self.records)
        if not (isinstance(request_id, (int, np.integer)) and 0 <= request_id < n):
            raise ValueError(f"request_id must be an integer in [0, {n}), got {request_id!r}")
        i = int(request_id)
        parts = [np.array([self.records.first_token[i]])]
        if self._st_n[i] > 0:
            g0 = self._st_g0[i]
            parts.append(self._steps(self._st_inst[i])[g0:g0 + self._st_n[i]])
        for t_emit, inst, g0, steps in self._extra.get(i, ()):
            if t_emit == t_emit:          # NaN: a new stint without an emission (a speculation switch)
                parts.append(np.array([t_emit]))
            if steps > 0:
                parts.append(self._steps(inst)[g0:g0 + steps])
        return np.concatenate(parts)

    def itl_values(self, priority: int | None = None):
        """All inter-token gaps (of one priority class, if given) as (values, weights).

        Value v occurs w times. Built per decode step rather than per token (a
        step's gap is shared by every sequence in it), so memory grows with the
        number of steps, not of tokens. ``np.repeat(values, weights)`` expands it.
        """
        values, weights = [], []
        chosen = np.ones(len(self.records), dtype=bool)
        if priority is not None:
            chosen = self.records.priority == priority
        plain = (self._st_n > 0) & chosen
        if self._extra:
            plain[list(self._extra)] = False  # preempted requests: done exactly below
        for inst in range(len(self.instances)):
            sel = plain & (self._st_inst == inst)
            if not sel.any():
                continue
            ends = self._steps(inst)
            g0, n = self._st_g0[sel], self._st_n[sel]
            values.append(ends[g0] - self.records.first_token[sel])  # first token -> first decode step
            weights.append(np.ones(g0.size, dtype=np.int64))
            # a run of n steps from step g0 contributes the gaps ends[g0+1] - ends[g0], ...
            many = n > 1
            size = ends.size + 1
            cover = (np.bincount(g0[many] + 1, minlength=size)
                     - np.bincount(g0[many] + n[many], minlength=size))
            cover = np.cumsum(cover)[:ends.size]
            gaps = np.diff(ends, prepend=np.nan)
            keep = cover > 0
            values.append(gaps[keep])
            weights.append(cover[keep])
        for rid in self._extra:
            if not chosen[rid]:
                continue
            gaps = np.diff(self.token_times(rid))
            values.append(gaps)
            weights.append(np.ones(gaps.size, dtype=np.int64))
        if not values:
            return np.zeros(0), np.zeros(0, dtype=np.int64)
        return np.concatenate(values), np.concatenate(weights)

    # ---- metrics ---------------------------------------------------------------------------------------
    @property
    def duration(self) -> float:
        """Seconds from the first arrival to the last finish."""
        return float(self.records.finish.max() - self.records.arrival.min())

    def metrics(self, priority: int | None = None, itl: bool = True) -> Metrics:
        """Throughput and latency summaries (vLLM's definitions; see the module docstring).

        ``priority``: only the requests of that class (throughputs still divide
        by the whole run's duration). ``itl=False`` skips the inter-token
        latencies (they rebuild every decode step's time: skip them for runs of
        millions of steps).
        """
        r = self.records
        sel = np.ones(len(r), dtype=bool) if priority is None else r.priority == priority
        duration = self.duration
        out = float(r.output_len[sel].sum())
        if itl:
            itl_summary = Summary.of(*self.itl_values(priority))
        else:
            itl_summary = Summary(*([float("nan")] * 5), 0)
        return Metrics(
            n_requests=int(sel.sum()),
            duration=duration,
            request_throughput=float(sel.sum()) / duration,
            output_throughput=out / duration,
            total_token_throughput=(out + float(r.prompt_len[sel].sum())) / duration,
            ttft=Summary.of(r.ttft[sel]),
            tpot=Summary.of(r.tpot[sel]),
            itl=itl_summary,
            e2e=Summary.of(r.e2e[sel]),
            queue_delay=Summary.of(r.queue_delay[sel]),
            preemptions=int(r.preemptions[sel].sum()),
        )

    def meets_slo(self, ttft_slo: float | None = None, tpot_slo: float | None = None,
                  e2el_slo: float | None = None) -> np.ndarray:
        """Boolean per request: meets every SLO given (seconds).

        :func:`servingmath.slo.meets_slo` on the records (the same keyword names
        and the same convention: a one-token request meets every TPOT target).
        """
        r = self.records
        return meets_slo(ttft=r.ttft, tpot=r.tpot, e2el=r.e2e, ttft_slo=ttft_slo, tpot_slo=tpot_slo,
                         e2el_slo=e2el_slo)

    def slo_attainment(self, ttft_slo: float | None = None, tpot_slo: float | None = None,
                       e2el_slo: float | None = None, priority: int | None = None) -> float:
        """Fraction of requests (of one class, if given) that meet every SLO given
        (:func:`servingmath.slo.slo_attainment`)."""
        ok = self.meets_slo(ttft_slo, tpot_slo, e2el_slo)
        if priority is not None:
            ok = ok[self.records.priority == priority]
        return float(ok.mean()) if ok.size else float("nan")

    def goodput(self, ttft_slo: float | None = None, tpot_slo: float | None = None,
                e2el_slo: float | None = None) -> float:
        """vLLM's request goodput: requests per second that meet every SLO given
        (:func:`servingmath.slo.request_goodput` over the simulated run)."""
        r = self.records
        return request_goodput(ttft=r.ttft, tpot=r.tpot, e2el=r.e2e, duration=self.duration,
                               ttft_slo=ttft_slo, tpot_slo=tpot_slo, e2el_slo=e2el_slo)

    def timeseries(self, instance: int | str = 0) -> dict:
        """Batch and KV cache over time, sampled at the start of every action of an instance.

        Returns a dict of arrays: ``time`` (s), ``running`` (sequences holding a
        slot), ``decoding``, ``prefill_tokens`` (prompt tokens in that
        iteration), ``kv_tokens`` and ``kv_occupancy`` (fraction of that
        instance's KV capacity; NaN without one). Between samples the batch is constant and
        the KV cache grows by one token per decoding sequence per step: plot as steps.
        """
        if isinstance(instance, str):
            if instance not in self.instances:
                raise ValueError(f"instance must be one of {self.instances}, got {instance!r}")
            instance = self.instances.index(instance)
        if not (isinstance(instance, (int, np.integer)) and 0 <= instance < len(self.instances)):
            raise ValueError(f"instance must be an index in [0, {len(self.instances)}), got {instance!r}")
        out = dict(self._ser(instance))
        cap = self._kv_capacity[instance]
        out["kv_occupancy"] = out["kv_tokens"] / cap if np.isfinite(cap) else out["kv_tokens"] * np.nan
        return out

    # ---- fleets, prefix caches, speculation switches, pipelines ------------------------------------------------
    def _replica_index(self, replica):
        if isinstance(replica, str):
            if replica not in self.replicas:
                raise ValueError(f"replica must be one of {self.replicas}, got {replica!r}")
            return self.replicas.index(replica)
        if not (isinstance(replica, (int, np.integer)) and 0 <= replica < len(self.replicas)):
            raise ValueError(f"replica must be an index in [0, {len(self.replicas)}), got {replica!r}")
        return int(replica)

    def replica_metrics(self, replica, itl: bool = False) -> Metrics:
        """:meth:`metrics` of the requests one replica served (throughputs over the whole run)."""
        k = self._replica_index(replica)
        r = self.records
        sel = r.replica == k
        duration = self.duration
        out = float(r.output_len[sel].sum())
        nan = Summary(*([float("nan")] * 5), 0)
        itl_summary = nan
        if itl:
            values, weights = [], []
            for rid in np.flatnonzero(sel):
                gaps = np.diff(self.token_times(int(rid)))
                values.append(gaps)
                weights.append(np.ones(gaps.size, dtype=np.int64))
            if values:
                itl_summary = Summary.of(np.concatenate(values), np.concatenate(weights))
        return Metrics(n_requests=int(sel.sum()), duration=duration,
                       request_throughput=float(sel.sum()) / duration, output_throughput=out / duration,
                       total_token_throughput=(out + float(r.prompt_len[sel].sum())) / duration,
                       ttft=Summary.of(r.ttft[sel]), tpot=Summary.of(r.tpot[sel]), itl=itl_summary,
                       e2e=Summary.of(r.e2e[sel]), queue_delay=Summary.of(r.queue_delay[sel]),
                       preemptions=int(r.preemptions[sel].sum()))

    def requests_per_replica(self) -> np.ndarray:
        """How many requests each replica served."""
        return np.bincount(self.records.replica, minlength=len(self.replicas))

    def prefix_hit_rate(self, by: str = "requests", replica=None) -> float:
        """The prefix cache's hit rate over every admission (recomputations included).

        ``by="requests"``: admissions of a request with a shared prefix that found it
        cached; ``"tokens"``: prompt tokens (of all requests) not prefilled because they
        were cached. ``replica``: one replica only. NaN without prefix caching.
        """
        if by not in ("requests", "tokens"):
            raise ValueError(f"by must be 'requests' or 'tokens', got {by!r}")
        k = None if replica is None else self._replica_index(replica)
        lookups = hits = tokens = 0
        found = False
        for inst, counts in enumerate(self._prefix_counts):
            if counts is None or (k is not None and self._instance_replica[inst] != k):
                continue
            found = True
            lookups, hits, tokens = lookups + counts[0], hits + counts[1], tokens + counts[2]
        if not found:
            return float("nan")
        if by == "requests":
            return hits / lookups if lookups else float("nan")
        r = self.records
        sel = np.ones(len(r), dtype=bool) if k is None else r.replica == k
        prompt = float(r.prompt_len[sel].sum())
        return tokens / prompt if prompt else float("nan")

    def speculation_switches(self, instance: int | str = 0) -> list:
        """(time, on) at every switch of a :class:`~servingmath.simulate.SpeculativeByLoad` instance."""
        if isinstance(instance, str):
            if instance not in self.instances:
                raise ValueError(f"instance must be one of {self.instances}, got {instance!r}")
            instance = self.instances.index(instance)
        if not (isinstance(instance, (int, np.integer)) and 0 <= instance < len(self.instances)):
            raise ValueError(f"instance must be an index in [0, {len(self.instances)}), got {instance!r}")
        return list(self._spec_log[int(instance)])

    def stage_utilisation(self, instance: int | str = 0) -> np.ndarray:
        """Busy fraction of each pipeline stage of a pipeline-parallel server over the run
        (its virtual engines share the stages; NaN for a server without a pipeline)."""
        if isinstance(instance, str):
            instance = self.instances.index(instance)
        busy = self._pipe_busy[int(instance)]
        if busy is None:
            return np.array([np.nan])
        return np.asarray(busy) / self.duration

    def replica_timeline(self):
        """A fleet's replicas over time, from its autoscaler's decisions.

        Returns a dict of arrays: ``time`` (s, the decisions), ``serving`` (replicas taking
        requests from that time), ``held`` (replicas holding GPUs: serving, warming up,
        or draining their last requests) and ``replica_seconds``, the integral of
        ``held`` over the run (what the GPUs cost, in replica-seconds).
        """
        if not self._scale_log:
            raise ValueError("replica_timeline needs a fleet (FleetConfig)")
        r = self.records
        end = float(r.finish.max())
        n = len(self.replicas)
        serving = np.zeros(n, dtype=bool)
        times, n_serving = [], []
        intervals = {i: [] for i in range(n)}     # per replica: (from, to) it holds GPUs
        since = {}
        for t, i, s in sorted(self._scale_log, key=lambda x: x[0]):
            if s in (1, 2):                        # warming up or serving: held from now on
                since.setdefault(i, t)
                serving[i] = s == 2
            else:                                  # draining or off
                serving[i] = False
                if i in since:
                    stop = t
                    if s == 3:                     # draining: until its last request (routed before t) ends
                        mine = (r.replica == i) & (r.arrival <= t)
                        if mine.any():
                            stop = max(t, float(r.finish[mine].max()))
                    intervals[i].append((since.pop(i), stop))
            times.append(t)
            n_serving.append(int(serving.sum()))
        for i, start in since.items():
            intervals[i].append((start, end))
        total = 0.0
        merged = []
        for i, spans in intervals.items():
            spans.sort()
            cur = None
            for a, b in spans:
                if cur is not None and a <= cur[1]:
                    cur[1] = max(cur[1], b)
                else:
                    if cur is not None:
                        merged.append(tuple(cur))
                    cur = [a, b]
            if cur is not None:
                merged.append(tuple(cur))
        total = sum(max(0.0, min(b, end) - a) for a, b in merged)
        grid = np.asarray(times)
        n_held = [sum(1 for a, b in merged if a <= t < b) for t in grid]
        return {"time": grid, "serving": np.asarray(n_serving), "held": np.asarray(n_held),
                "replica_seconds": float(total)}
