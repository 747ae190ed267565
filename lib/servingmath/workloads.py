"""Workloads for the serving simulator: what requests ask for, and when they arrive.

A :class:`Workload` is data: the prompt length, output length and priority
class of each request, in the order the requests will arrive. Build one

* with fixed lengths: ``Workload.fixed(1000, prompt_len=512, output_len=128)``;
* from lists: ``Workload.from_lists([512, 80], [128, 300])``;
* from distributions: ``Workload.sample(1000, LogNormal(600, 0.8), Geometric(200), seed=0)``
  (an ``int`` is a fixed length, a sequence is used as given);
* from the book's synthetic chat-like mix: :func:`chat_workload`.

An arrival process says *when* the requests come (:class:`Poisson`, with
gamma gaps for bursty traffic as ``vllm bench serve --burstiness`` makes it,
:class:`ClosedLoop`, :class:`Timestamps`); the simulator draws the
inter-arrival and think times from its own seed, so the same workload can be
replayed at several rates (common random numbers).

The synthetic chat workload
---------------------------
:func:`chat_workload` is **synthetic and illustrative**, not a measured trace
and not fitted to one: prompt lengths are lognormal with median 600 tokens
and sigma 0.8 (the middle 50 % span about 350-1030 tokens), clipped to
[16, 2048]; output lengths are lognormal with median 250 tokens and sigma 0.6
(about 170-375), clipped to [8, 1024]. The shape (long right tails, prompts
longer than outputs) is the one chat traces are usually described with; the
numbers are round values chosen for the book. It is generated on the fly
from a seed (no download) and fits every catalog model's context (<= 3072
tokens per request).

Examples
--------
>>> w = chat_workload(1000, seed=0)
>>> len(w), int(np.median(w.prompt_lens)), int(np.median(w.output_lens))
(1000, 629, 245)
>>> Workload.fixed(3, prompt_len=512, output_len=128).prompt_lens.tolist()
[512, 512, 512]
>>> Workload.from_lists([10, 20], [5, 0])
Traceback (most recent call last):
...
ValueError: output_lens must be integers >= 1 (one token at least), got 0 at request 1
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ._validation import as_array, check_integer, check_nonnegative, check_positive

__all__ = [
    "Workload",
    "LogNormal",
    "Geometric",
    "Uniform",
    "chat_workload",
    "Poisson",
    "ClosedLoop",
    "CappedPoisson",
    "Timestamps",
    "CHAT_PROMPT",
    "CHAT_OUTPUT",
    "QuantileTable",
    "DatasetLengths",
    "dataset_names",
    "dataset_lengths",
    "workload_from_dataset",
    "PiecewisePoisson",
]


# ---- length distributions -------------------------------------------------------------------------
@dataclass(frozen=True)
class LogNormal:
    """Token counts exp(N(ln median, sigma^2)), rounded, clipped to [low, high].

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Attributes
    ----------
    median : float
        Median length in tokens (the lognormal's exp(mu)).
    sigma : float
        Standard deviation of ln(length); 0.5-1 gives the long right tail of real traffic.
    low, high : int
        Clipping bounds, inclusive (high=None: no upper bound).
    """

    median: float
    sigma: float
    low: int = 1
    high: int | None = None

    def __post_init__(self):
        check_positive("median", self.median)
        check_nonnegative("sigma", self.sigma)
        check_integer("low", self.low, minimum=1)
        if self.high is not None:
            check_integer("high", self.high, minimum=self.low)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        x = np.rint(np.exp(rng.normal(math.log(self.median), self.sigma, n)))
        return np.clip(x, self.low, self.high if self.high is not None else None).astype(np.int64)


@dataclass(frozen=True)
class Geometric:
    """Token counts 1, 2, 3, ... with P(n) = p (1 - p)^(n-1), p = 1 / mean.

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    The discrete analogue of the exponential: with a constant time per token,
    a geometric output length gives (nearly) exponential service times.
    """

    mean: float

    def __post_init__(self):
        if not (isinstance(self.mean, (int, float)) and self.mean >= 1):
            raise ValueError(f"mean must be a number >= 1 (tokens), got {self.mean!r}")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.geometric(1.0 / self.mean, n).astype(np.int64)


@dataclass(frozen=True)
class Uniform:
    """Token counts drawn uniformly from the integers low..high (inclusive).

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).
    """

    low: int
    high: int

    def __post_init__(self):
        check_integer("low", self.low, minimum=1)
        check_integer("high", self.high, minimum=self.low)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.integers(self.low, self.high + 1, n).astype(np.int64)


#: The synthetic chat workload's length distributions (see the module docstring).
CHAT_PROMPT = LogNormal(median=600, sigma=0.8, low=16, high=2048)
CHAT_OUTPUT = LogNormal(median=250, sigma=0.6, low=8, high=1024)


def _lengths(name: str, values) -> np.ndarray:
    arr = as_array(name, values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence of token counts, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty: a workload needs at least one request")
    bad = np.flatnonzero((arr < 1) | (arr != np.round(arr)))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{name} must be integers >= 1 (one token at least), got {arr[i]:g} "
                         f"at request {i}")
    return arr.astype(np.int64)


def _prefixes(ids, lens, prompt):
    """Validated (prefix_ids, prefix_lens) arrays: -1 and 0 where a request has no shared prefix."""
    n = prompt.size
    if ids is None and lens is None:
        return np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64)
    if ids is None or lens is None:
        raise ValueError("give both prefix_ids and prefix_lens (or neither): a shared prefix has an id "
                         "and a length in tokens")
    i, ln = as_array("prefix_ids", ids), as_array("prefix_lens", lens)
    for name, arr in (("prefix_ids", i), ("prefix_lens", ln)):
        if arr.shape != prompt.shape:
            raise ValueError(f"{name} must have one entry per request ({n}), got shape {arr.shape}")
        if arr.size and np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must be integers, got {arr[arr != np.round(arr)].flat[0]:g}")
    i, ln = i.astype(np.int64), ln.astype(np.int64)
    if i.size and i.min() < -1:
        raise ValueError(f"prefix_ids must be >= 0 (a shared prefix) or -1 (none), got {i.min()}")
    bad = np.flatnonzero((ln < 0) | (ln > prompt))
    if bad.size:
        j = int(bad[0])
        raise ValueError(f"prefix_lens must be in [0, prompt_len]: request {j} has prefix_len {ln[j]} "
                         f"and prompt_len {prompt[j]}")
    bad = np.flatnonzero((i < 0) & (ln != 0))
    if bad.size:
        raise ValueError(f"request {int(bad[0])} has no prefix (prefix_id -1) but prefix_len "
                         f"{ln[bad[0]]}: give 0")
    has = i >= 0
    if has.any():
        order = np.argsort(i[has], kind="stable")
        sid, slen = i[has][order], ln[has][order]
        first = np.r_[True, sid[1:] != sid[:-1]]
        ref = slen[first][np.cumsum(first) - 1]
        if np.any(slen != ref):
            k = int(sid[np.flatnonzero(slen != ref)[0]])
            raise ValueError(f"prefix id {k} has two lengths: every request of one shared prefix "
                             f"starts with the same tokens, so give one prefix_len per id")
    return i, ln


# ---- the workload -----------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Workload:
    """The requests of a simulation, in arrival order.

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    Attributes
    ----------
    prompt_lens : ndarray of int
        Prompt (input) tokens of each request, >= 1.
    output_lens : ndarray of int
        Output tokens each request generates, >= 1 (the first comes out of the prefill).
    priorities : ndarray of int
        Priority class of each request: 0 = interactive (served first), 1 = batch.
        Lower numbers go first; all zeros by default.
    name : str
        A label for tables and plots.
    prefix_ids : ndarray of int
        The shared prefix (a system prompt, a document, a few-shot preamble) each
        request's prompt starts with: requests with the same id >= 0 begin with the
        same ``prefix_lens`` tokens; -1 = no shared prefix (the default). A server
        with prefix caching that holds the prefix prefills only the rest
        (:class:`servingmath.simulate.ContinuousBatching`'s ``prefix_caching``).
    prefix_lens : ndarray of int
        Tokens of the shared prefix, 0 <= prefix_len <= prompt_len (0 where the id
        is -1); the same for every request of one id.
    """

    prompt_lens: np.ndarray
    output_lens: np.ndarray
    priorities: np.ndarray = field(default=None)
    name: str = "custom"
    prefix_ids: np.ndarray = field(default=None)
    prefix_lens: np.ndarray = field(default=None)

    def __post_init__(self):
        prompt = _lengths("prompt_lens", self.prompt_lens)
        output = _lengths("output_lens", self.output_lens)
        if prompt.size != output.size:
            raise ValueError(f"prompt_lens has {prompt.size} requests but output_lens has {output.size}")
        if self.priorities is None:
            prio = np.zeros(prompt.size, dtype=np.int64)
        else:
            p = as_array("priorities", self.priorities)
            if p.shape != prompt.shape:
                raise ValueError(f"priorities must have one entry per request ({prompt.size}), "
                                 f"got shape {p.shape}")
            check_integer("priorities", p, minimum=0)
            if p.size and p.max() > 7:
                raise ValueError(f"priorities must be small class numbers 0..7 (0 = interactive, "
                                 f"1 = batch), got {p.max():g}")
            prio = p.astype(np.int64)
        ids, lens = _prefixes(self.prefix_ids, self.prefix_lens, prompt)
        for name, arr in [("prompt_lens", prompt), ("output_lens", output), ("priorities", prio),
                          ("prefix_ids", ids), ("prefix_lens", lens)]:
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    def __len__(self) -> int:
        return int(self.prompt_lens.size)

    def __repr__(self) -> str:
        shared = ""
        if self.has_prefixes:
            shared = f", {np.unique(self.prefix_ids[self.prefix_ids >= 0]).size} shared prefixes"
        return (f"Workload({self.name!r}, {len(self)} requests, mean prompt "
                f"{self.prompt_lens.mean():.0f} tokens, mean output {self.output_lens.mean():.0f} tokens{shared})")

    @classmethod
    def fixed(cls, n_requests: int, prompt_len: int, output_len: int) -> "Workload":
        """``n_requests`` identical requests."""
        n = int(check_integer("n_requests", n_requests, minimum=1))
        check_integer("prompt_len", prompt_len, minimum=1)
        check_integer("output_len", output_len, minimum=1)
        return cls(np.full(n, int(prompt_len)), np.full(n, int(output_len)),
                   name=f"fixed {int(prompt_len)}/{int(output_len)}")

    @classmethod
    def from_lists(cls, prompt_lens: Sequence[int], output_lens: Sequence[int],
                   priorities: Sequence[int] | None = None, name: str = "custom") -> "Workload":
        """Requests with the given lengths (and priority classes)."""
        return cls(np.asarray(prompt_lens), np.asarray(output_lens),
                   None if priorities is None else np.asarray(priorities), name)

    @classmethod
    def sample(cls, n_requests: int, prompt_len, output_len, seed: int = 0,
               name: str = "sampled") -> "Workload":
        """``n_requests`` requests with lengths drawn from distributions.

        ``prompt_len`` and ``output_len`` are each an int (fixed), a distribution
        (:class:`LogNormal`, :class:`Geometric`, :class:`Uniform`, or anything
        with ``.sample(rng, n)``), or a sequence of ``n_requests`` lengths.
        Deterministic given ``seed``.
        """
        n = check_integer("n_requests", n_requests, minimum=1, scalar=True)
        seed = check_integer("seed", seed, minimum=0, scalar=True)
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x574B]))

        def draw(label, spec):
            if hasattr(spec, "sample"):
                return spec.sample(rng, n)
            if np.ndim(spec) == 0:
                check_integer(label, spec, minimum=1)
                return np.full(n, int(spec))
            arr = _lengths(label, spec)
            if arr.size != n:
                raise ValueError(f"{label} has {arr.size} lengths, expected n_requests = {n}")
            return arr

        return cls(draw("prompt_len", prompt_len), draw("output_len", output_len), name=name)

    def with_priorities(self, batch_fraction: float, seed: int = 0) -> "Workload":
        """A copy where a random ``batch_fraction`` of the requests is class 1 (batch).

        The others are class 0 (interactive, served first). Deterministic given ``seed``.
        """
        f = float(check_nonnegative("batch_fraction", batch_fraction))
        if f > 1:
            raise ValueError(f"batch_fraction must be in [0, 1], got {f:g}")
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5052]))
        prio = (rng.random(len(self)) < f).astype(np.int64)
        return Workload(self.prompt_lens, self.output_lens, prio, self.name, self.prefix_ids, self.prefix_lens)

    def head(self, n_requests: int) -> "Workload":
        """The first ``n_requests`` requests."""
        n = int(check_integer("n_requests", n_requests, minimum=1))
        return Workload(self.prompt_lens[:n], self.output_lens[:n], self.priorities[:n], self.name,
                        self.prefix_ids[:n], self.prefix_lens[:n])

    @property
    def has_prefixes(self) -> bool:
        """True when some request starts with a shared prefix (a ``prefix_ids`` entry >= 0)."""
        return bool(self.prefix_ids.size and self.prefix_ids.max() >= 0)

    def with_prefixes(self, prefix_ids, prefix_lens) -> "Workload":
        """A copy whose requests start with the given shared prefixes (ids, -1 for none, and lengths).

        The prompts are unchanged: the first ``prefix_lens[i]`` tokens of request i's prompt are
        the prefix ``prefix_ids[i]``.
        """
        return Workload(self.prompt_lens, self.output_lens, self.priorities, self.name, prefix_ids, prefix_lens)

    def with_shared_prefixes(self, n_prefixes: int, prefix_len, *, fraction: float = 1.0,
                             zipf: float = 0.0, seed: int = 0) -> "Workload":
        """A copy in which a ``fraction`` of the requests start with one of ``n_prefixes`` shared prefixes.

        Each chosen request gets prefix k with probability proportional to
        (k + 1)^-zipf (0: uniform; about 1: a few system prompts carry most of the
        traffic, as in multi-tenant chat), and the prefix's ``prefix_len`` tokens are
        put *in front of* its prompt (a system prompt or document, then the user's
        text), so its prompt grows by that many tokens. ``prefix_len`` is one length
        for every prefix or one per prefix. Deterministic given ``seed``.

        Examples
        --------
        >>> w = Workload.fixed(4, 100, 10).with_shared_prefixes(3, 400, fraction=0.5, seed=0)
        >>> w.prompt_lens.tolist(), w.prefix_ids.tolist(), w.prefix_lens.tolist()
        ([500, 100, 500, 500], [0, -1, 2, 1], [400, 0, 400, 400])
        """
        k = int(check_integer("n_prefixes", n_prefixes, minimum=1))
        lens = np.broadcast_to(as_array("prefix_len", prefix_len), (k,)).astype(float)
        if np.any(lens < 1) or np.any(lens != np.round(lens)):
            raise ValueError(f"prefix_len must be whole tokens >= 1, got {prefix_len!r}")
        f = float(check_nonnegative("fraction", fraction))
        if f > 1:
            raise ValueError(f"fraction must be in [0, 1], got {f:g}")
        z = float(check_nonnegative("zipf", zipf))
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5052_4546]))
        weights = (np.arange(1, k + 1, dtype=float)) ** -z
        chosen = rng.random(len(self)) < f
        ids = np.where(chosen, rng.choice(k, size=len(self), p=weights / weights.sum()), -1)
        plen = np.where(ids >= 0, lens.astype(np.int64)[np.maximum(ids, 0)], 0)
        return Workload(self.prompt_lens + plen, self.output_lens, self.priorities, self.name, ids, plen)

    @classmethod
    def from_dataset(cls, name: str, n_requests: int, seed: int = 0, *, method: str = "auto") -> "Workload":
        """``n_requests`` requests with lengths drawn from a named public dataset's distribution.

        See :func:`workload_from_dataset` (the same function) and :func:`dataset_lengths`.
        """
        return workload_from_dataset(name, n_requests, seed, method=method)


def chat_workload(n_requests: int = 1000, seed: int = 0) -> Workload:
    """The book's synthetic chat-like workload (see the module docstring for its shape).

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    Synthetic and illustrative: lognormal prompts (median 600, sigma 0.8,
    clipped to [16, 2048]) and outputs (median 250, sigma 0.6, clipped to
    [8, 1024]), deterministic given ``seed``.

    Examples
    --------
    >>> chat_workload(100, seed=0)
    Workload('synthetic chat', 100 requests, mean prompt 811 tokens, mean output 312 tokens)
    """
    w = Workload.sample(n_requests, CHAT_PROMPT, CHAT_OUTPUT, seed=seed)
    return Workload(w.prompt_lens, w.output_lens, name="synthetic chat")


# ---- arrival processes ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Poisson:
    """Open-loop arrivals at ``rate`` requests per second: Poisson, or burstier (or smoother) gamma gaps.

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    With the default ``burstiness=1`` the gaps between requests are
    exponential with mean 1/rate: a Poisson stream. Otherwise they are gamma
    distributed with shape k = ``burstiness`` and the same mean 1/rate, as
    ``vllm bench serve --request-rate R --burstiness k`` draws them: the
    squared coefficient of variation of a gap is c_a^2 = 1/k, so k < 1 sends
    requests in clumps (k = 0.25: c_a^2 = 4) and k > 1 spaces them more evenly
    (k -> inf: a constant gap). The first request arrives after the first gap,
    not at time 0.

    Attributes
    ----------
    rate : float
        Mean requests per second, > 0.
    burstiness : float
        Shape k of the gamma gaps, > 0; 1.0 = Poisson.

    Notes
    -----
    vLLM draws ``np.random.gamma(shape=burstiness, scale=1 / (request_rate x
    burstiness))`` per gap (``vllm/benchmarks/serve.py``, ``get_request``,
    commit def9ce85ba1079af970a58ed3d42dd861ae35d58, read 2026-11); it then
    rescales all arrival times so that the last request lands at exactly
    n / rate, which the simulator does not do (a correction of order
    1/sqrt(n) to the rate of one run). :func:`servingmath.queueing.kingman_mean_wait`
    and :func:`servingmath.queueing.gamma_m1_mean_wait` give the waits.

    Examples
    --------
    >>> Poisson(20.0).arrival_cv2, Poisson(20.0, burstiness=0.25).arrival_cv2
    (1.0, 4.0)
    """

    rate: float
    burstiness: float = 1.0

    def __post_init__(self):
        check_positive("rate", self.rate)
        if isinstance(self.burstiness, bool) or not isinstance(self.burstiness, numbers.Real):
            raise ValueError(f"burstiness must be a number > 0 (1 = Poisson), got {self.burstiness!r}")
        check_positive("burstiness", self.burstiness)

    @property
    def arrival_cv2(self) -> float:
        """Squared coefficient of variation of the gaps, 1 / burstiness (1 for Poisson)."""
        return 1.0 / float(self.burstiness)

    def gaps(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` inter-arrival times (seconds) drawn from ``rng``: exponential, or gamma(k, 1 / (k rate))."""
        if self.burstiness == 1:
            return rng.exponential(1.0 / self.rate, n)
        k = float(self.burstiness)
        return rng.gamma(k, 1.0 / (k * self.rate), n)


@dataclass(frozen=True)
class CappedPoisson:
    """A Poisson (or gamma) stream of ``rate`` requests per second with at most ``max_concurrency`` in flight.

    Derived in the chapter "Validation: how good is the model?" (notebooks/14_validation.ipynb).

    What ``vllm bench serve --request-rate R --max-concurrency N`` and ``sglang.bench_serving`` with
    both options send: request k is due at the k-th time of the stream (:class:`Poisson`'s gaps), and
    a client semaphore of N sends it then, or when one of the N requests in flight finishes, whichever
    is later. The simulator's arrival time (from which TTFT counts) is the send, as the benchmarks
    time it: ``request_func`` starts its clock inside the semaphore (``vllm/benchmarks/serve.py``,
    ``limited_request_func``). With N at least the requests in flight it is :class:`Poisson`; with
    a rate above what the server sustains it is :class:`ClosedLoop` with N clients.

    Examples
    --------
    >>> CappedPoisson(4.0, 16).stream
    Poisson(rate=4.0, burstiness=1.0)
    """

    rate: float
    max_concurrency: int
    burstiness: float = 1.0

    def __post_init__(self):
        check_integer("max_concurrency", self.max_concurrency, minimum=1)
        self.stream      # checks the rate and burstiness

    @property
    def stream(self) -> "Poisson":
        """The uncapped stream of due times."""
        return Poisson(self.rate, burstiness=self.burstiness)


@dataclass(frozen=True)
class ClosedLoop:
    """``clients`` users, each sending its next request when its previous one finishes.

    Derived in the chapter "Queueing: why TTFT explodes near capacity" (notebooks/09_queueing.ipynb).

    Every client sends its first request at time 0. After a request finishes,
    its client waits ``think_time`` seconds (a constant, or exponential with
    that mean when ``think_time_distribution="exponential"``) and sends the
    next request of the workload.
    """

    clients: int
    think_time: float = 0.0
    think_time_distribution: str = "fixed"

    def __post_init__(self):
        check_integer("clients", self.clients, minimum=1)
        check_nonnegative("think_time", self.think_time)
        if self.think_time_distribution not in ("fixed", "exponential"):
            raise ValueError(f"think_time_distribution must be 'fixed' or 'exponential', "
                             f"got {self.think_time_distribution!r}")


@dataclass(frozen=True, eq=False)
class Timestamps:
    """Requests arrive at the given times (seconds, non-decreasing, >= 0), one per workload request.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).
    """

    times: np.ndarray

    def __post_init__(self):
        t = check_nonnegative("times", self.times)
        if t.ndim != 1 or t.size == 0:
            raise ValueError(f"times must be a non-empty 1-D sequence of seconds, got shape {t.shape}")
        if np.any(np.diff(t) < 0):
            i = int(np.flatnonzero(np.diff(t) < 0)[0])
            raise ValueError(f"times must be non-decreasing, but times[{i + 1}] = {t[i + 1]:g} "
                             f"< times[{i}] = {t[i]:g}")
        t = t.astype(float)
        t.setflags(write=False)
        object.__setattr__(self, "times", t)


@dataclass(frozen=True, eq=False)
class PiecewisePoisson:
    """Open-loop arrivals whose rate changes over time: a day with a quiet night and a busy noon.

    Derived in the chapter "A fleet: routing, pooling, prefix caches and autoscaling" (notebooks/15_fleet.ipynb).

    The rate is ``rates[i]`` requests per second from ``times[i]`` to
    ``times[i + 1]`` (and ``rates[-1]`` after the last time): a non-homogeneous
    Poisson process with a piecewise-constant rate lambda(t), or, with
    ``burstiness != 1``, the same gamma renewal process as :class:`Poisson` run on
    the clock of the cumulative rate.

    Attributes
    ----------
    times : ndarray
        Start of each segment, seconds, increasing, ``times[0] == 0``.
    rates : ndarray
        Requests per second in each segment, > 0.
    burstiness : float
        Shape k of the gamma gaps in operational time (1 = Poisson).

    Notes
    -----
    Arrival i happens at t_i = Lambda^-1(u_i), where Lambda(t) = int_0^t lambda is
    piecewise linear and u_i are the arrival times of a unit-rate process
    (cumulative sums of exponential, or gamma(k, 1/k), gaps): the time change
    that turns a unit-rate Poisson process into one of rate lambda(t)
    (Cinlar, *Introduction to Stochastic Processes*, 1975, ch. 4, sec. 7).
    The expected number of arrivals by time t is Lambda(t).

    Examples
    --------
    >>> day = PiecewisePoisson.diurnal(mean_rate=10.0, peak_to_trough=4.0, period=86400.0)
    >>> round(day.expected_arrivals(86400.0))
    864000
    >>> [round(float(r), 2) for r in day.rates[[0, 12]]]     # 00:00-01:00 and 12:00-13:00 (hourly averages)
    [4.07, 15.93]
    """

    times: np.ndarray
    rates: np.ndarray
    burstiness: float = 1.0

    def __post_init__(self):
        t = check_nonnegative("times", self.times)
        r = check_positive("rates", self.rates)
        if t.ndim != 1 or t.shape != r.shape or t.size == 0:
            raise ValueError(f"times and rates must be 1-D of equal, non-zero length, got shapes "
                             f"{t.shape} and {r.shape}")
        if t[0] != 0 or np.any(np.diff(t) <= 0):
            raise ValueError(f"times must start at 0 and increase, got {t.tolist()[:6]}")
        Poisson(1.0, burstiness=self.burstiness)          # validates burstiness
        for name, arr in (("times", t.astype(float)), ("rates", r.astype(float))):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @classmethod
    def diurnal(cls, mean_rate: float, peak_to_trough: float, *, period: float = 86400.0, steps: int = 24,
                peak_at: float = 0.5, burstiness: float = 1.0) -> "PiecewisePoisson":
        """A sinusoidal day in ``steps`` constant pieces: mean ``mean_rate``, peak/trough ratio ``peak_to_trough``.

        lambda(t) = mean (1 + a cos(2 pi (t / period - peak_at))) with
        a = (r - 1) / (r + 1), averaged over each piece, so the mean over the day
        is exactly ``mean_rate``; the busiest piece is the one around
        ``peak_at x period`` (0.5: noon). The ratio is the continuous curve's; the
        pieces' averages are a little flatter (3.92 for 4 in hourly pieces). After
        ``period`` the last piece's rate holds.
        """
        m = float(check_positive("mean_rate", mean_rate))
        ratio = float(check_positive("peak_to_trough", peak_to_trough))
        if ratio < 1:
            raise ValueError(f"peak_to_trough must be >= 1 (peak over trough), got {ratio:g}")
        p = float(check_positive("period", period))
        k = int(check_integer("steps", steps, minimum=1))
        a = (ratio - 1) / (ratio + 1)
        edges = np.linspace(0.0, 1.0, k + 1)
        w = 2 * np.pi
        # mean of cos(w (x - peak_at)) over each piece [x0, x1]
        avg = (np.sin(w * (edges[1:] - peak_at)) - np.sin(w * (edges[:-1] - peak_at))) / (w * np.diff(edges))
        return cls(edges[:-1] * p, m * (1 + a * avg), burstiness)

    def expected_arrivals(self, t):
        """Lambda(t) = int_0^t lambda(s) ds, the expected number of arrivals by time t (seconds)."""
        x = check_nonnegative("t", t)
        cum = np.concatenate([[0.0], np.cumsum(self.rates[:-1] * np.diff(self.times))])
        seg = np.clip(np.searchsorted(self.times, x, side="right") - 1, 0, None)
        out = cum[seg] + self.rates[seg] * (x - self.times[seg])
        return float(out) if np.ndim(out) == 0 else out

    def rate_at(self, t):
        """lambda(t), requests per second."""
        x = check_nonnegative("t", t)
        out = self.rates[np.searchsorted(self.times, x, side="right") - 1]
        return float(out) if np.ndim(out) == 0 else out

    def arrival_times(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` arrival times (seconds, increasing) drawn from ``rng``."""
        u = np.cumsum(Poisson(1.0, burstiness=self.burstiness).gaps(rng, n))
        cum = np.concatenate([[0.0], np.cumsum(self.rates[:-1] * np.diff(self.times))])
        seg = np.clip(np.searchsorted(cum, u, side="right") - 1, 0, None)
        return self.times[seg] + (u - cum[seg]) / self.rates[seg]


# ---- length distributions of named public datasets ------------------------------------------------
# (appended; data in servingmath/data/datasets.json, each entry with its source, commit and date)

@dataclass(frozen=True, eq=False)
class QuantileTable:
    """Token counts drawn by inverting a table of quantiles (linear between the points), rounded.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Attributes
    ----------
    probabilities : ndarray
        Increasing cumulative probabilities from 0 (the minimum) to 1 (the maximum).
    values : ndarray
        The length at each probability (non-decreasing).

    Notes
    -----
    A draw is x = F^-1(u) with u ~ U(0, 1) and F^-1 piecewise linear through
    (p_i, q_i), so every tabulated quantile is reproduced up to rounding and
    sampling noise; between the points (the tails above P99 above all) the
    shape is only as good as the table.
    """

    probabilities: np.ndarray
    values: np.ndarray

    def __post_init__(self):
        p, v = as_array("probabilities", self.probabilities), as_array("values", self.values)
        if p.ndim != 1 or p.shape != v.shape or p.size < 2:
            raise ValueError(f"probabilities and values must be 1-D of equal length >= 2, got shapes "
                             f"{p.shape} and {v.shape}")
        if p[0] != 0 or p[-1] != 1 or np.any(np.diff(p) <= 0):
            raise ValueError(f"probabilities must increase from 0 to 1, got {p.tolist()}")
        if np.any(np.diff(v) < 0) or v[0] < 1:
            raise ValueError(f"values must be non-decreasing token counts >= 1, got {v.tolist()}")
        for name, arr in (("probabilities", p), ("values", v)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        x = np.interp(rng.random(n), self.probabilities, self.values)
        return np.clip(np.rint(x), self.values[0], self.values[-1]).astype(np.int64)


@dataclass(frozen=True)
class DatasetLengths:
    """The published prompt and output length statistics of one dataset, and samplers for them.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Attributes
    ----------
    name, description, tokenizer : str
        The dataset, what its requests are, and the tokenizer the counts are in.
    n_requests : int or None
        Rows the statistics were computed from (None for a synthetic generator).
    source : dict
        ``repository``, ``path``, ``commit``, ``date`` and ``method``: where the numbers come from.
    checked, notes : str
        How and when they were checked, and caveats.
    prompt, output : dict
        The statistics as shipped: ``mean``, ``median``, ``p90``, ``p99``, ``min``, ``max``,
        ``quantiles`` (probability -> tokens), ``lognormal`` (``mu``, ``sigma`` of ln length)
        or ``uniform`` ([low, high]); whichever the source gives.
    spearman : float or None
        Rank correlation of prompt and output length in the source rows (the samplers draw
        them independently).
    arrivals : dict or None
        For traces with timestamps: request rate and squared coefficient of variation of
        the inter-arrival gaps.
    """

    name: str
    description: str
    tokenizer: str
    n_requests: int | None
    source: dict
    checked: str
    notes: str
    prompt: dict
    output: dict
    spearman: float | None = None
    arrivals: dict | None = None

    def methods(self) -> tuple[str, ...]:
        """The sampling methods this dataset supports: ``quantiles``, ``lognormal``, ``uniform``."""
        have = [m for m in ("quantiles", "lognormal", "uniform") if m in self.prompt and m in self.output]
        return tuple(have)

    def distribution(self, which: str, method: str = "auto"):
        """A length distribution (with ``.sample(rng, n)``) for ``which`` = ``"prompt"`` or ``"output"``.

        ``method="auto"`` uses the quantile table when the dataset has one, then a uniform
        generator's own range, then the fitted log-normal (clipped to the published
        minimum and maximum when known).
        """
        if which not in ("prompt", "output"):
            raise ValueError(f"which must be 'prompt' or 'output', got {which!r}")
        allowed = ("auto",) + self.methods()
        if method not in allowed:
            raise ValueError(f"method {method!r} is not available for dataset {self.name!r}: "
                             f"allowed {', '.join(allowed)}")
        stats = self.prompt if which == "prompt" else self.output
        if method == "auto":
            method = self.methods()[0]
        if method == "quantiles":
            table = sorted((float(p), float(v)) for p, v in stats["quantiles"].items())
            return QuantileTable(np.array([p for p, _ in table]), np.array([v for _, v in table]))
        if method == "uniform":
            low, high = stats["uniform"]
            return Uniform(max(int(low), 1), int(high))     # a 0-token output cannot be served
        fit = stats["lognormal"]
        low = max(int(stats.get("min", 1)), 1)
        return LogNormal(math.exp(fit["mu"]), fit["sigma"], low, stats.get("max"))


_DATASET_FIELDS = ("description", "tokenizer", "n_requests", "source", "checked", "prompt", "output")


def _datasets() -> dict:
    """The parsed datasets.json, read once (importlib.resources: works from an installed package)."""
    if not _DATASETS_CACHE:
        import json
        from importlib import resources
        path = resources.files("servingmath") / "data" / "datasets.json"
        with path.open(encoding="utf-8") as handle:
            _DATASETS_CACHE.update(json.load(handle))
    return _DATASETS_CACHE


_DATASETS_CACHE: dict = {}


def dataset_names() -> list[str]:
    """Names of the datasets whose length statistics ship with the book.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Examples
    --------
    >>> "azure-conversation-2023" in dataset_names()
    True
    """
    return list(_datasets()["datasets"])


def dataset_lengths(name: str) -> DatasetLengths:
    """The prompt and output length statistics of a named public dataset, with their source.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Parameters
    ----------
    name : str
        One of :func:`dataset_names`: ``"arxiv-summarization"``, ``"sharegpt4"``,
        ``"sharegpt4-vllm-filter"``, ``"azure-conversation-2023"``, ``"azure-code-2023"``,
        ``"lmsys-chat-1m"``, ``"vllm-random"``, ``"sglang-random"``.

    Returns
    -------
    DatasetLengths

    Raises
    ------
    KeyError
        For an unknown name, with the closest names.

    Notes
    -----
    The statistics were computed from each source's per-request length file
    (mean, median, linear-interpolation percentiles, and a maximum-likelihood
    log-normal: mu and sigma of ln length), except ``lmsys-chat-1m``, whose file
    is not public: its mean, median and P90 are Vidur's table, and its log-normal
    is fitted through the median and P90, mu = ln(median),
    sigma = ln(P90 / median) / z_0.9 with z_0.9 = 1.2816. ``vllm-random`` and
    ``sglang-random`` are the two tools' default synthetic datasets, read from
    their source. Datasets whose numbers could not be checked (the ShareGPT and
    Alpaca means in vLLM's paper) are listed under ``left_out`` in the file.

    References
    ----------
    A. Agrawal et al., "Vidur: A Large-Scale Simulation Framework for LLM Inference",
    MLSys 2024 (arXiv:2405.05465), and its repository's processed traces;
    A. Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM Inference with
    Sarathi-Serve", OSDI 2024 (arXiv:2403.02310), and its repository;
    P. Patel et al., "Splitwise: Efficient Generative LLM Inference Using Phase
    Splitting", ISCA 2024 (the Azure LLM inference trace 2023).
    Each entry's ``source`` names the file, commit and date. For the simulator's
    workloads (chapters 09-10) and chapter 14's rows on dataset lengths.

    Examples
    --------
    >>> d = dataset_lengths("arxiv-summarization")
    >>> d.tokenizer.split()[0], d.prompt["median"], d.output["p90"]
    ('Llama-2', 2730.0, 372.0)
    >>> dataset_lengths("vllm-random").prompt
    {'uniform': [1024, 1024]}
    """
    table = _datasets()["datasets"]
    if not isinstance(name, str) or name not in table:
        from ._validation import unknown_name
        raise unknown_name("dataset name", name, table)
    entry = table[name]
    return DatasetLengths(name=name, notes=entry.get("notes", ""), spearman=entry.get("spearman"),
                          arrivals=entry.get("arrivals"), **{k: entry[k] for k in _DATASET_FIELDS})


def workload_from_dataset(name: str, n_requests: int, seed: int = 0, *, method: str = "auto") -> Workload:
    """``n_requests`` requests whose lengths are drawn from a named dataset's distribution.

    Derived in the chapter "Scheduling and tail latency" (notebooks/10_scheduling.ipynb).

    Prompt and output lengths are drawn independently (the source rows' rank
    correlation is in :attr:`DatasetLengths.spearman`; |rho| <= 0.12 for every
    dataset computed here). Deterministic given ``seed``.

    Parameters
    ----------
    name : str
        A dataset of :func:`dataset_names`.
    n_requests : int
    seed : int
    method : {"auto", "quantiles", "lognormal", "uniform"}
        Which summary to sample from (see :meth:`DatasetLengths.distribution`).

    Examples
    --------
    >>> w = workload_from_dataset("azure-conversation-2023", 2000, seed=1)
    >>> len(w), 900 < int(np.median(w.prompt_lens)) < 1150
    (2000, True)
    >>> Workload.from_dataset("vllm-random", 3).output_lens.tolist()
    [128, 128, 128]
    """
    lengths = dataset_lengths(name)
    prompt = lengths.distribution("prompt", method)
    output = lengths.distribution("output", method)
    label = name if method == "auto" else f"{name} ({method})"
    return Workload.sample(n_requests, prompt, output, seed=seed, name=label)
