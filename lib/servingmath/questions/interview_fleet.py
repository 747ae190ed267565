"""Interview questions on fleets: routing, prefix caching, autoscaling and pipeline parallelism.

Numeric ones are checked like the chapters' questions (answers computed by the library, known mistakes
with hints); conceptual ones carry a model answer, the key points a strong answer names (regular
expressions found in free text) and the wrong claims that earn a hint, inverted claims (named
``inverted: ...``) included, as in :mod:`servingmath.questions.interview`.
Each question's ``chapter`` is ``"fleet"``, so the drill finds them under ``--chapter fleet`` as well as
under this module's name; they are asked in ``solutions/15_fleet.ipynb`` and worked in the chapter
"A fleet: routing, pooling, prefix caches and autoscaling".
"""

from __future__ import annotations

import math
import re

from ..question import Mistake, Question
from ..queueing import pooling_comparison

__all__ = ["QUESTIONS"]

_NEGATIONS = ("not ", "n't ", "never ", "no ")
_DIRECTION = (r"(?:rise|rises|rising|grow|grows|growing|fall|falls|falling|drop|drops|shrink|shrinks|increase|"
              r"increases|decrease|decreases|climbs|lower|lowers|raise|raises|goes|stays|flattens)\b")
_GAP = rf",?\s+(?:(?!{_DIRECTION})[^\s.;:!?]+\s+){{0,5}}?"


def _claim(phrase: str, *patterns: str) -> str:
    """A wrong-claim pattern: ``phrase`` (plain words) or any of ``patterns``, not right after a negation."""
    if not re.fullmatch(phrase, phrase, re.I):
        raise ValueError(f"phrase must be plain words (it has to match its own text), got {phrase!r}")
    guard = "".join(f"(?<!{n})" for n in _NEGATIONS)
    return guard + "(?:" + "|".join((phrase, *patterns)) + ")"


def _inverted(name: str, hint: str, phrase: str, *patterns: str) -> Mistake:
    """A key point stated the wrong way round, with a hint that says which way it goes."""
    return Mistake(hint, lambda p: _claim(phrase, *patterns), name=f"inverted: {name}")


def _ratio(p):
    r = pooling_comparison(p["n"], p["rho"] * p["n"], 1.0)
    return r.split_mean_wait / r.pooled_mean_wait


def _microbatches(p):
    # (P - 1) / (m + P - 1) <= target  <=>  m >= (P - 1) (1 - target) / target
    return math.ceil((p["P"] - 1) * (1 - p["target"]) / p["target"] - 1e-9)


_PREFIX_ROUTING = Question(
    "interview_fleet.prefix_aware_routing",
    "You run 8 replicas with prefix caching behind a least-loaded router, and many requests share a few long "
    "system prompts and documents. Why is the fleet's cache hit rate lower than one replica's would be, what "
    "routing fixes it, and at what risk?",
    answer=lambda p: (
        "The prefix cache is per replica: a least-loaded or random router spreads the requests of each prefix "
        "over all 8 replicas, so each replica has to prefill every prefix once and keep its own copy, and the "
        "fleet's cache holds fewer distinct prefixes: the hit rate falls. Prefix-affinity (cache-aware) routing "
        "sends requests that share a prefix to the same replica, so each prefix is prefilled once for the fleet "
        "and the hit rate rises (from 62 % to 83 % in the chapter's example), which cuts TTFT and prefill work. "
        "The risk is load imbalance: a popular prefix pins its traffic to one replica, so the router falls back "
        "to least loaded when the load gap grows (SGLang's router: more than 32 requests and 1.1 times)."),
    kind="conceptual",
    key_points=(
        ("the prefix cache is per replica",
         r"per[- ]replica|each replica (has|keeps|holds|must|needs)|own (copy|cache)|local to (each|a) replica"),
        ("a prefix-blind router scatters each prefix over the replicas",
         r"(spread|scatter|split|distribut)\w*[^.]*(prefix|prefixes|document|prompt|replicas)"),
        ("route requests with the same prefix to the same replica (prefix affinity, cache-aware routing)",
         r"affinity|cache[- ]aware|same replica|consistent hash|sticky"),
        ("the risk is load imbalance, hence a fallback to least loaded",
         r"imbalanc|hot ?spot|overload|falls? back|unbalanced"),
    ),
    mistakes=[
        _inverted("prefix affinity lowers the hit rate",
                  "Backwards: sending a prefix's requests to one replica prefills it once for the fleet, so the "
                  "hit rate rises; scattering them over every replica is what lowers it.",
                  "prefix affinity lowers the hit rate",
                  rf"(?:affinity|same replica)[^.]*hit rate{_GAP}(?:falls|drops|decreases|shrinks|goes down)",
                  rf"(?:spread|scatter)[^.]*hit rate{_GAP}(?:rises|grows|increases|climbs|goes up)"),
        Mistake("A replica's prefix cache lives in its own GPU memory: replicas do not share it (without a "
                "separate KV store), which is why routing matters.",
                lambda p: _claim("the cache is shared across replicas",
                                 r"(?:cache|KV) is shared (?:across|between|by) (?:the |all )?replicas")),
    ],
    chapter="fleet", difficulty="medium",
)

_AUTOSCALING = Question(
    "interview_fleet.autoscaling_headroom",
    "How would you autoscale a fleet of LLM replicas through a diurnal day, and why keep N + 1 replicas "
    "rather than N?",
    answer=lambda p: (
        "Measure the arrival rate every few minutes and run ceil(rate / r) replicas, r being the rate one "
        "replica sustains within its SLOs (from a load test or the capacity model), plus headroom. The "
        "measurement lags the traffic, a new replica takes minutes to load its weights and warm up, the "
        "traffic fluctuates within each interval, and a replica can fail: with N + 0 the survivors of a "
        "failure carry N/(N - 1) of their plan and miss the SLO at the peak. N + 1 keeps one spare; it costs "
        "one replica per hour, a share 1/N that shrinks as the fleet grows. Scale down by draining replicas. "
        "Against a fleet sized for the peak and left on, the day costs about 30 % fewer replica-hours "
        "(152 against 216 in the chapter's example)."),
    kind="conceptual",
    key_points=(
        ("replicas = the measured rate over one replica's rate within the SLOs",
         r"(rate|load|traffic)[^.]*(per[- ]replica|one replica|each replica|capacity)|ceil"),
        ("a new replica needs time to start, and the measurement lags",
         r"warm[- ]?up|load(s|ing)? (its |the )?weights|\blag|cold start|minutes to (start|load)"),
        ("the headroom covers failures and bursts",
         r"fail|lost|burst|fluctuat|spare"),
        ("the headroom's share, 1/N, shrinks as the fleet grows",
         r"1\s*/\s*N|(larger|bigger) fleet|share[^.]*(small|shrink)"),
    ),
    mistakes=[
        _inverted("the headroom costs more in a bigger fleet",
                  "Backwards: one spare replica is a share 1/N of the fleet, which shrinks as the fleet grows.",
                  "the headroom costs more in a bigger fleet",
                  rf"share 1\s*/\s*N{_GAP}(?:that )?(?:grows|rises|increases) as the fleet grows",
                  r"share 1\s*/\s*N that grows"),
        _inverted("autoscaling costs more replica-hours",
                  "Backwards: following the day costs fewer replica-hours than a fleet sized for the peak and "
                  "left on.",
                  "autoscaling costs more replica-hours",
                  r"costs? (?:about )?\d+ % more replica-hours"),
        Mistake("N + 0 leaves nothing for a failure, a burst or a warm-up: the survivors of a lost replica carry "
                "N/(N - 1) of their plan.",
                lambda p: _claim("no headroom is needed", r"N \+ 0 is enough")),
    ],
    chapter="fleet", difficulty="medium",
)

QUESTIONS = [
    _PREFIX_ROUTING,
    _AUTOSCALING,
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
