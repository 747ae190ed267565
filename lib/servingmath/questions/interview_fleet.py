"""Interview questions on fleets: routing, prefix caching, autoscaling and pipeline parallelism.

Numeric and choice questions, checked like the chapters' questions (answers computed by the library,
known mistakes with hints; a claim carries its inverted form as a mistake named ``inverted: ...``).
Each question's ``chapter`` is ``"fleet"``, so the drill finds them under ``--chapter fleet`` as well as
under this module's name; they are asked in ``solutions/15_fleet.ipynb`` and worked in the chapter
"A fleet: routing, pooling, prefix caches and autoscaling".
"""

from __future__ import annotations

import math

from ..question import Mistake, Question
from ..queueing import pooling_comparison

__all__ = ["QUESTIONS"]


def _ratio(p):
    r = pooling_comparison(p["n"], p["rho"] * p["n"], 1.0)
    return r.split_mean_wait / r.pooled_mean_wait


def _microbatches(p):
    # (P - 1) / (m + P - 1) <= target  <=>  m >= (P - 1) (1 - target) / target
    return math.ceil((p["P"] - 1) * (1 - p["target"]) / p["target"] - 1e-9)


QUESTIONS = [
    Question(
        "interview_fleet.random_vs_one_queue",
        "Your {n} replicas sit behind a random load balancer, each busy {rho} of the time (exponential "
        "service). How many times longer is the mean wait than with one shared queue over the same "
        "replicas? (a number)",
        answer=_ratio,
        params={"n": 16, "rho": 0.9},
        variants={"n": (4, 8, 16, 32), "rho": (0.8, 0.9)},
        mistakes=[
            Mistake("At equal utilisation the two are not the same: random routing makes n separate M/M/1 "
                    "queues; one queue waits only when all n are busy.", lambda p: 1.0),
            Mistake("The ratio is not n: it is rho n / C(n, a), the split's rho s / (1 - rho) over the pool's "
                    "C s / (n - a).", lambda p: float(p["n"])),
        ],
        chapter="fleet", difficulty="medium",
    ),
    Question(
        "interview_fleet.system_prompt_cached",
        "Every request starts with the same {system}-token system prompt, followed by {user} tokens of its "
        "own. With prefix caching on every replica, after warm-up, what share of all prompt tokens is "
        "served from the cache? (a number)",
        answer=lambda p: p["system"] / (p["system"] + p["user"]),
        params={"system": 2000, "user": 500},
        variants={"system": (500, 2000, 4000), "user": (200, 500, 1000)},
        mistakes=[
            Mistake("That is cached over new tokens; the share is cached over all prompt tokens.",
                    lambda p: p["system"] / p["user"]),
            Mistake("That is the share computed, not the share cached.",
                    lambda p: p["user"] / (p["system"] + p["user"])),
        ],
        chapter="fleet", difficulty="easy",
    ),
    Question(
        "interview_fleet.replica_lost",
        "At the peak an autoscaler with no headroom (N + 0) runs N = {N} replicas, each at exactly its "
        "planned rate. One replica fails. The router spreads its traffic over the others: each now "
        "carries how many times its planned rate? (a number)",
        answer=lambda p: p["N"] / (p["N"] - 1),
        params={"N": 8},
        variants={"N": (4, 6, 8)},
        mistakes=[
            Mistake("(N + 1) / N is the spare capacity N + 1 gives; with N + 0 the N - 1 survivors share "
                    "the N replicas' traffic: N / (N - 1).", lambda p: (p["N"] + 1) / p["N"]),
            Mistake("The lost replica's traffic does not vanish: the survivors carry it.", lambda p: 1.0),
        ],
        chapter="fleet", difficulty="easy",
    ),
    Question(
        "interview_fleet.pipeline_microbatches",
        "A pipeline of P = {P} equal stages: how many micro-batches entering together keep the bubble, "
        "(P - 1) / (m + P - 1), at or below {target}? (the smallest m)",
        answer=_microbatches,
        params={"P": 4, "target": 0.1},
        variants={"P": (2, 4, 8), "target": (0.1, 0.2)},
        mistakes=[
            Mistake("One micro-batch per stage (m = P) still idles (P - 1) / (2P - 1), about half.",
                    lambda p: p["P"]),
            Mistake("That solves Megatron-LM's (P - 1) / m <= target, the bubble over the ideal time; the "
                    "question's share of the whole is (P - 1) / (m + P - 1).",
                    lambda p: math.ceil((p["P"] - 1) / p["target"] - 1e-9)),
        ],
        chapter="fleet", difficulty="medium",
    ),
]
