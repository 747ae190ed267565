"""Questions of chapter 15, "A fleet: routing, pooling, prefix caches and autoscaling".

Every expected answer is computed by the library from the question's parameters, and so is every
known mistake (the split's probability rho for Erlang C, the split's wait for the pool's, the pool's
wait with its service time added, the split's wait divided by n, the stability bound or the
random-split staffing for Erlang C's replicas, a linear rule for the square-root one, the cached
share for the prefill saving, the headroom forgotten or the day planned at its mean, Megatron's
bubble convention), so a variant with other parameters keeps its hints. The two claims (which
router waits less, which router finds more cached prefixes) carry their inverted claim as a
mistake named ``inverted: ...``.
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from ..prefill import prefix_cache_saving
from ..question import Mistake, Question
from ..queueing import (erlang_c, erlang_c_servers, mm1_mean_wait, mmc_mean_wait,
                        pooling_comparison, square_root_staffing)
from ..workloads import PiecewisePoisson

__all__ = ["QUESTIONS"]

M8, H100, H200 = "Llama-3.1-8B", "H100-SXM5-80GB", "H200-SXM-141GB"
_rho = sp.Symbol("rho", positive=True)


def _lam(p):
    """Total arrival rate that keeps each of n replicas busy a fraction rho."""
    return p["rho"] * p["n"] / p["s"]


def _erlang_b(p):
    """Erlang B (the loss formula) from C: B = C (1 - rho) / (1 - rho C)."""
    c = erlang_c(p["n"], _lam(p), p["s"])
    return c * (1 - p["rho"]) / (1 - p["rho"] * c)


def _pooled(p):
    return mmc_mean_wait(p["n"], _lam(p), p["s"])


def _split(p):
    return mm1_mean_wait(p["rho"] / p["s"], p["s"])


def _servers(p, alpha=None):
    return erlang_c_servers(p["rate"], p["s"], alpha or p["alpha"])


def _hourly(p):
    day = PiecewisePoisson.diurnal(mean_rate=p["mean"], peak_to_trough=4.0, period=86400.0)
    return np.ceil(day.rates / p["per"] - 1e-9)


def _pf_saving(p):
    return prefix_cache_saving(M8, p["gpu"], p["new"], p["cached"])


def _bubble(p):
    return (p["P"] - 1) / (p["m"] + p["P"] - 1)


def _router_answer(p):
    r = pooling_comparison(p["n"], _lam(p), p["s"])
    return "least loaded" if r.pooled_mean_wait < r.split_mean_wait else "random"


def _prefix_answer(p):
    # each prefix misses once per replica that sees it: once with affinity, n times spread over the fleet
    return "prefix affinity" if p["prefixes"] < p["prefixes"] * p["n"] else "least loaded"


QUESTIONS = [
    Question(
        "fleet.erlang_c",
        "{n} one-at-a-time replicas share one queue (M/M/n); each request takes s = {s} s on average and "
        "each replica is busy a fraction rho = {rho} of the time. What fraction of the requests waits "
        "at all before it starts (Erlang's C)? (a number)",
        answer=lambda p: erlang_c(p["n"], _lam(p), p["s"]),
        params={"n": 8, "s": 1.6, "rho": 0.8},
        variants={"n": (4, 8, 16, 32), "rho": (0.7, 0.8, 0.9)},
        mistakes=[
            Mistake("That is rho, the probability of waiting of one M/M/1 queue (what random routing gives). "
                    "With one queue a request waits only when all n replicas are busy at once.",
                    lambda p: p["rho"]),
            Mistake("That is Erlang B, the share of arrivals that a system with no waiting room would lose. "
                    "Erlang C counts those that wait: C = B / (1 - rho (1 - B)).", _erlang_b),
        ],
        chapter="fleet", difficulty="easy",
    ),
    Question(
        "fleet.pooled_wait",
        "{n} one-at-a-time replicas behind one FCFS queue, s = {s} s, rho = {rho}. Mean wait in the queue "
        "(before service starts), W_q? (s)",
        answer=_pooled,
        unit="s",
        params={"n": 8, "s": 2.0, "rho": 0.8},
        variants={"n": (4, 8, 16), "rho": (0.7, 0.8, 0.9)},
        mistakes=[
            Mistake("That is the random split's wait, rho s / (1 - rho): one queue over n replicas waits far "
                    "less, C(n, a) s / (n - a).", _split),
            Mistake("That adds the service time: W_q is the wait before service starts; W_q + s is the "
                    "time in the system.", lambda p: _pooled(p) + p["s"]),
            Mistake("The C(n, a) is missing: s / (n - a) is the wait of a request that does wait; only a "
                    "fraction C of them waits.", lambda p: p["s"] / (p["n"] * (1 - p["rho"]))),
        ],
        chapter="fleet", difficulty="medium",
    ),
    Question(
        "fleet.split_wait",
        "Now a router sends each request to one of the {n} replicas at random (s = {s} s, each replica busy "
        "a fraction rho = {rho}). Mean wait in the queue? (s)",
        answer=_split,
        unit="s",
        params={"n": 8, "s": 1.6, "rho": 0.8},
        variants={"n": (4, 8, 16), "rho": (0.7, 0.8, 0.9)},
        mistakes=[
            Mistake("n queues do not divide the wait by n: each replica is an M/M/1 queue at the same rho, "
                    "rho s / (1 - rho), whatever n is.", lambda p: _split(p) / p["n"]),
            Mistake("That is the pooled wait (one queue over all n); random routing gives each replica its "
                    "own queue.", _pooled),
        ],
        chapter="fleet", difficulty="easy",
    ),
    Question(
        "fleet.two_replica_ratio",
        "Derive W_q(random split over 2 replicas) / W_q(one queue over the same 2) as a function of the "
        "utilisation rho = lambda s / 2 (exponential service). Use rho = sp.Symbol('rho', positive=True).",
        answer=lambda p: (1 + _rho) / _rho,
        kind="symbolic",
        symbols={"rho": _rho},
        mistakes=[
            Mistake("Upside down: the split waits longer, so the ratio is above 1.",
                    lambda p: _rho / (1 + _rho)),
            Mistake("C(2, a) = a^2 / (2 + a), not a^2 / 2: with 2 rho for a, the pool waits rho^2 s / (1 - rho^2).",
                    lambda p: 1 / _rho),
            Mistake("The ratio is not simply the number of replicas: it depends on rho, (1 + rho) / rho.",
                    lambda p: sp.Integer(2)),
        ],
        chapter="fleet", difficulty="hard",
    ),
    Question(
        "fleet.erlang_servers",
        "Requests arrive at {rate} per second; a one-at-a-time replica takes s = {s} s per request. With one "
        "queue, how many replicas keep the probability of waiting at or below {alpha}? (replicas)",
        answer=_servers,
        params={"rate": 8.0, "s": 1.6, "alpha": 0.2},
        variants={"rate": (2.0, 8.0, 32.0), "alpha": (0.1, 0.2, 0.5)},
        mistakes=[
            Mistake("That only makes the queue stable (n > a = lambda s); the wait target needs a margin "
                    "above the load.", lambda p: math.floor(p["rate"] * p["s"]) + 1),
            Mistake("That is what random routing needs (P(wait) = rho <= alpha, so n >= a / alpha); one "
                    "queue waits only when all n are busy, which takes far fewer replicas.",
                    lambda p: math.ceil(p["rate"] * p["s"] / p["alpha"] - 1e-9)),
        ],
        chapter="fleet", difficulty="medium",
    ),
    Question(
        "fleet.sqrt_staffing",
        "By the square-root staffing rule (n = a + beta sqrt(a), beta fixed by the wait target), if the "
        "offered load a grows {factor} times, how many times more spare replicas (n - a) does the fleet "
        "need? (a number)",
        answer=lambda p: math.sqrt(p["factor"]),
        params={"factor": 4},
        variants={"factor": (4, 9, 16, 100)},
        mistakes=[
            Mistake("Spare capacity does not grow with the load: it grows like sqrt(a), the economy of scale "
                    "of pooling.", lambda p: float(p["factor"])),
            Mistake("The spare does grow, like beta sqrt(a); it is the spare per unit of load, beta / sqrt(a), "
                    "that shrinks.", lambda p: 1.0),
        ],
        chapter="fleet", difficulty="easy",
    ),
    Question(
        "fleet.router_claim",
        "{n} replicas at utilisation {rho}, the same requests, the same GPUs. Which router makes requests "
        "wait less on average: 'least loaded' (join the shortest queue, close to one shared queue) or "
        "'random'?",
        answer=_router_answer,
        kind="choice",
        choices=("least loaded", "random"),
        params={"n": 8, "s": 1.6, "rho": 0.8},
        variants={"n": (4, 8, 16), "rho": (0.7, 0.9)},
        mistakes=[
            Mistake("Inverted: random routing is fair only on average; each replica becomes its own M/M/1 "
                    "queue and waits rho s / (1 - rho), while least loaded sends each request to a queue "
                    "that is short now.", lambda p: "random", name="inverted: random waits less"),
        ],
        chapter="fleet", difficulty="easy",
    ),
    Question(
        "fleet.prefix_saving",
        "{model} on one {gpu}, physical bound: a request of {new} new tokens after a {cached}-token prefix "
        "found in the prefix cache. What fraction of the full ({cached} + {new}-token) prefill time does the "
        "cache save? (a number)",
        answer=_pf_saving,
        rel_tol=0.005,
        params={"model": M8, "gpu": H100, "new": 600, "cached": 4000},
        variants={"gpu": (H100, H200), "new": (200, 600, 2000), "cached": (2000, 4000)},
        mistakes=[
            Mistake("The cached share of the tokens overstates it: the new tokens still attend to every "
                    "cached key, so the attention work does not fall in proportion.",
                    lambda p: p["cached"] / (p["cached"] + p["new"])),
            Mistake("That is the fraction left, not the fraction saved.", lambda p: 1 - _pf_saving(p)),
        ],
        chapter="fleet", difficulty="medium",
    ),
    Question(
        "fleet.affinity_claim",
        "A fleet of {n} replicas with prefix caching serves requests that start with one of {prefixes} "
        "shared documents. Which router makes more requests find their document cached: 'prefix affinity' "
        "or 'least loaded'?",
        answer=_prefix_answer,
        kind="choice",
        choices=("prefix affinity", "least loaded"),
        params={"n": 4, "prefixes": 100},
        variants={"n": (2, 4, 8), "prefixes": (10, 100)},
        mistakes=[
            Mistake("Inverted: the cache is per replica. Least loaded spreads each document over every "
                    "replica, so each must prefill it once and keep its own copy; affinity prefills it once "
                    "for the fleet and leaves room for n times as many documents.",
                    lambda p: "least loaded", name="inverted: least loaded finds more prefixes"),
        ],
        chapter="fleet", difficulty="easy",
    ),
    Question(
        "fleet.replica_hours",
        "A day of traffic: PiecewisePoisson.diurnal(mean_rate={mean}, peak_to_trough=4) in hourly pieces. "
        "Each replica is planned at {per} req/s. An autoscaler runs ceil(rate / {per}) + 1 replicas each hour "
        "(N + 1). How many replica-hours does the day cost? (a number)",
        answer=lambda p: float((_hourly(p) + 1).sum()),
        params={"mean": 100.0, "per": 20.0},
        variants={"mean": (50.0, 100.0, 200.0), "per": (15.0, 20.0, 25.0)},
        mistakes=[
            Mistake("That is N + 0: the headroom adds one replica every hour.",
                    lambda p: float(_hourly(p).sum())),
            Mistake("That is the fleet sized for the peak (N + 1) and left on all day; the autoscaler "
                    "follows the hourly rate.", lambda p: 24.0 * (_hourly(p).max() + 1)),
            Mistake("That plans every hour for the day's mean rate; the hours differ by 4x.",
                    lambda p: 24.0 * (math.ceil(p["mean"] / p["per"] - 1e-9) + 1)),
        ],
        chapter="fleet", difficulty="medium",
    ),
    Question(
        "fleet.pipeline_bubble",
        "A model split into P = {P} pipeline stages of equal time; {m} micro-batches enter together. What "
        "fraction of the stages' time is idle until the last one leaves (the bubble)? (a number)",
        answer=_bubble,
        params={"P": 4, "m": 6},
        variants={"P": (2, 4, 8), "m": (3, 6, 12, 16)},
        mistakes=[
            Mistake("(P - 1) / m is the bubble relative to the ideal time m p (Megatron-LM's convention); "
                    "as a share of the whole (m + P - 1) p it is (P - 1) / (m + P - 1).",
                    lambda p: (p["P"] - 1) / p["m"]),
            Mistake("(P - 1) / P is one micro-batch's idle share; more micro-batches in flight fill the pipe.",
                    lambda p: (p["P"] - 1) / p["P"]),
        ],
        chapter="fleet", difficulty="medium",
    ),
]
