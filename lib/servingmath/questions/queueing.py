"""Questions of chapter 09, "Queueing: why TTFT explodes near capacity".

Every expected answer is computed by the library (:mod:`servingmath.queueing`)
from the question's parameters; every known mistake is computed the same way.
"""

from __future__ import annotations

import math

import sympy as sp

from ..question import Mistake, Question
from ..prefill import prefill_time
from ..queueing import (
    kingman_mean_wait,
    littles_law,
    md1_max_arrival_rate,
    md1_mean_wait,
    md1_wait_quantile,
    mm1_max_arrival_rate,
    mm1_mean_sojourn,
    mm1_mean_wait,
    mm1_sojourn_quantile,
    mm1_wait_quantile,
    prefill_max_arrival_rate,
    prefill_mean_ttft,
)
from ..symbolic import lam
from ._variants import GQA_8B_CLASS

# the book's notation: s mean service, C_s its coefficient of variation, t_p a prefill, tau_1 a TTFT target
_s, _C, _t_p, _T = sp.symbols("s C_s t_p tau_1", positive=True)
_PREFILL = {"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "prompt_len": 2048}


def _d(p, **kw):
    """Prefill time of the question's prompt (seconds)."""
    return float(prefill_time(p["model"], p["accelerator"], p["prompt_len"], **kw))


def _rate(p):
    return p["rho"] / p["service_time"]


QUESTIONS = [
    Question(
        "queueing.growth",
        "As the utilisation rho of a single-server queue with random (Poisson) arrivals approaches 1, how "
        "does the mean wait in the queue grow? ('exponentially', 'hyperbolically', 'linearly' or "
        "'quadratically')",
        answer=lambda p: "hyperbolically",
        kind="choice",
        choices=("exponentially", "hyperbolically", "linearly", "quadratically"),
        mistakes=[
            Mistake("Not exponentially: W_q = rho s (1 + C_s^2) / (2 (1 - rho)) grows like 1 / (1 - rho), a "
                    "hyperbola with a pole at rho = 1. An exponential in rho would stay finite at rho = 1 and "
                    "grow by the same factor for every step of load.", lambda p: "exponentially"),
            Mistake("Linear growth is what a closed-loop benchmark shows against its number of clients "
                    "(R = N D once saturated). Against the load of an open queue the wait diverges like "
                    "1 / (1 - rho).", lambda p: "linearly"),
            Mistake("1 / (1 - rho)^2 is the sensitivity dW_q/drho, how fast the wait changes with the load; "
                    "the wait itself grows like 1 / (1 - rho).", lambda p: "quadratically"),
        ],
        chapter="queueing", difficulty="easy",
    ),
    Question(
        "queueing.littles_law",
        "A serving engine receives {rate:g} requests/s, and their mean end-to-end latency is {latency:g} s. How many "
        "requests are inside the engine (queued or running) on average? (requests)",
        answer=lambda p: littles_law(p["rate"], p["latency"]),
        params={"rate": 12.0, "latency": 4.5},
        variants={"rate": (5.0, 8.0, 12.0, 20.0), "latency": (2.5, 3.0, 4.5, 6.0)},
        mistakes=[
            Mistake("Little's law multiplies: L = lambda W (requests/s x seconds = requests).",
                    lambda p: p["rate"] / p["latency"]),
            Mistake("That is W / lambda, seconds squared per request; Little's law is L = lambda W.",
                    lambda p: p["latency"] / p["rate"]),
        ],
        chapter="queueing", difficulty="easy",
    ),
    Question(
        "queueing.mm1_wait",
        "Requests arrive as a Poisson stream at {rate:g} req/s at a server that handles one at a time; service "
        "times are exponential with mean {service_ms:g} ms. What is the mean wait in the queue, before service? (ms)",
        answer=lambda p: mm1_mean_wait(p["rate"], p["service_time"]),
        unit="ms",
        params={"rate": 20.0, "service_time": 0.040},
        variants={"rate": (10.0, 15.0, 20.0), "service_time": (0.03, 0.04, 0.045)},
        derive=lambda p: {**p, "service_ms": round(p["service_time"] * 1e3, 3)},
        mistakes=[
            Mistake("You swapped rho and 1 - rho: the wait divides by the idle fraction 1 - rho, which "
                    "shrinks to 0 as the load grows: W_q = rho s / (1 - rho).",
                    lambda p: (1 - p["rate"] * p["service_time"]) * p["service_time"]
                    / (p["rate"] * p["service_time"])),
            Mistake("That is the time in the system, wait plus service, s / (1 - rho): the question asks "
                    "for the wait before service.", lambda p: mm1_mean_sojourn(p["rate"], p["service_time"])),
            Mistake("That is the M/D/1 wait, for constant service times. Exponential service has "
                    "E[S^2] = 2 s^2, so it waits twice as long.",
                    lambda p: md1_mean_wait(p["rate"], p["service_time"])),
        ],
        chapter="queueing", difficulty="easy",
    ),
    Question(
        "queueing.prefill_ttft",
        "{model} in bf16 on one {accelerator} prefills {prompt_len}-token prompts one at a time (physical "
        "bound, chapter 05). Requests arrive as a Poisson stream at {rate:g} req/s. What is the mean TTFT in "
        "DistServe's M/D/1 model? (ms)",
        answer=lambda p: prefill_mean_ttft(p["rate"], p["model"], p["accelerator"], p["prompt_len"]),
        unit="ms",
        params={**_PREFILL, "rate": 28.0},
        variants={"model": ("Llama-3.1-8B", "Qwen2.5-7B"), "prompt_len": (1024, 2048),
                  "rate_fraction": (0.6, 0.75, 0.84)},
        derive=lambda p: {**p, "rate": (28.0 if p.get("rate_fraction", 0.84) == 0.84 and p["prompt_len"] == 2048
                                        and p["model"] == "Llama-3.1-8B"
                                        else round(p["rate_fraction"] / _d(p), 1))},
        mistakes=[
            Mistake("That is the M/M/1 wait plus the prefill: you forgot the factor 1/2 of M/D/1. Equal "
                    "prompts take a constant time, E[S^2] = D^2, half the exponential case.",
                    lambda p: _d(p) + mm1_mean_wait(p["rate"], _d(p))),
            Mistake("That is only the wait in the queue: TTFT adds the request's own prefill D.",
                    lambda p: md1_mean_wait(p["rate"], _d(p))),
            Mistake("That is the prefill alone: at this utilisation many requests find another prefill "
                    "running or waiting.", lambda p: _d(p)),
            Mistake("You divided by rho instead of the idle fraction 1 - rho: "
                    "W_q = rho D / (2 (1 - rho)).", lambda p: _d(p) + _d(p) / 2),
        ],
        chapter="queueing", difficulty="medium",
    ),
    Question(
        "queueing.slo_rate_formula",
        "A prefill server is an M/D/1 queue with prefill time t_p. Derive the Poisson arrival rate lambda "
        "at which the mean TTFT (wait + prefill) equals a target tau_1. (sympy expression in t_p and tau_1)",
        answer=lambda p: 2 * (_T - _t_p) / (_t_p * (2 * _T - _t_p)),
        kind="symbolic",
        symbols={"t_p": _t_p, "tau_1": _T},
        mistakes=[
            Mistake("That is the M/M/1 answer, 1/t_p - 1/tau_1: you forgot the factor 1/2 of the M/D/1 wait "
                    "(constant prefill times wait half as long).", lambda p: 1 / _t_p - 1 / _T),
            Mistake("You set the wait alone equal to tau_1: TTFT = t_p + W_q, so solve t_p + W_q = tau_1.",
                    lambda p: 2 * _T / (_t_p * (_t_p + 2 * _T))),
            Mistake("That is the capacity 1/t_p, where the mean TTFT is infinite, not tau_1.",
                    lambda p: 1 / _t_p),
        ],
        chapter="queueing", difficulty="medium",
    ),
    Question(
        "queueing.pk_formula",
        "Write the mean wait in the queue of an M/G/1 queue in terms of the arrival rate lambda, the mean "
        "service time s and the coefficient of variation C_s = std / mean of the service time. (sympy "
        "expression in lambda, s, C_s)",
        answer=lambda p: lam * _s**2 * (1 + _C**2) / (2 * (1 - lam * _s)),
        kind="symbolic",
        symbols={"lam": lam, "s": _s, "C_s": _C},
        mistakes=[
            Mistake("You forgot the factor 1/2: the residual service a newcomer finds is lambda E[s^2] / 2.",
                    lambda p: lam * _s**2 * (1 + _C**2) / (1 - lam * _s)),
            Mistake("The denominator is the idle fraction 1 - rho = 1 - lambda s, not rho.",
                    lambda p: lam * _s**2 * (1 + _C**2) / (2 * lam * _s)),
            Mistake("That is the M/D/1 wait: variable service times add E[s^2] = s^2 (1 + C_s^2).",
                    lambda p: lam * _s**2 / (2 * (1 - lam * _s))),
            Mistake("E[s^2] = s^2 + sigma^2 = s^2 (1 + C_s^2): the coefficient of variation enters squared.",
                    lambda p: lam * _s**2 * (1 + _C) / (2 * (1 - lam * _s))),
        ],
        chapter="queueing", difficulty="medium",
    ),
    Question(
        "queueing.slo_rate",
        "{model} on one {accelerator} prefills {prompt_len}-token prompts one at a time, at the book's "
        "realistic setting (MFU 0.5, MBU 0.75, 0.4 ms per step). What is the largest Poisson request rate at "
        "which the mean TTFT (M/D/1, DistServe's model) stays within {slo_ms:g} ms? (req/s)",
        answer=lambda p: prefill_max_arrival_rate(p["ttft_slo"], p["model"], p["accelerator"], p["prompt_len"],
                                                  setting=p["setting"]),
        unit="req/s",
        params={**_PREFILL, "ttft_slo": 0.150, "setting": "realistic"},
        variants={"model": ("Llama-3.1-8B", "Qwen2.5-7B"), "ttft_slo": (0.15, 0.2, 0.3)},
        derive=lambda p: {**p, "slo_ms": round(p["ttft_slo"] * 1e3, 3)},
        mistakes=[
            Mistake("That is the physical bound (MFU 1): at the realistic setting every prefill takes about "
                    "twice as long.",
                    lambda p: prefill_max_arrival_rate(p["ttft_slo"], p["model"], p["accelerator"],
                                                       p["prompt_len"])),
            Mistake("That is the capacity 1/t_p, where the queue (and the TTFT) grows without bound.",
                    lambda p: 1 / _d(p, setting=p["setting"])),
            Mistake("That is the M/M/1 answer, 1/t_p - 1/tau_1: equal prompts wait half as long (M/D/1).",
                    lambda p: mm1_max_arrival_rate(_d(p, setting=p["setting"]), p["ttft_slo"])),
            Mistake("You let the wait alone reach the target: TTFT = t_p + W_q, so the wait may only take "
                    "tau_1 - t_p.", lambda p: md1_max_arrival_rate(_d(p, setting=p["setting"]),
                                                                   p["ttft_slo"] + _d(p, setting=p["setting"]))),
        ],
        chapter="queueing", difficulty="medium",
    ),
    Question(
        "queueing.mm1_p99",
        "A server handles one request at a time; service times are exponential with mean {service_ms:g} ms and "
        "requests arrive as a Poisson stream at utilisation {rho:g} ({rate:g} req/s). Predict the P99 of the time "
        "in the system (wait + service) from the M/M/1 closed form. (ms)",
        answer=lambda p: mm1_sojourn_quantile(0.99, _rate(p), p["service_time"]),
        unit="ms",
        rel_tol=0.02,
        params={"service_time": 0.050, "rho": 0.6},
        variants={"service_time": (0.02, 0.04, 0.05), "rho": (0.5, 0.6, 0.8)},
        derive=lambda p: {**p, "service_ms": round(p["service_time"] * 1e3, 3), "rate": round(_rate(p), 3)},
        mistakes=[
            Mistake("That is the mean time in the system, 1/(mu - lambda). The time is exponential, so "
                    "its P99 is ln(100) = 4.6 times the mean.",
                    lambda p: mm1_mean_sojourn(_rate(p), p["service_time"])),
            Mistake("That is the P99 of the wait alone, ln(rho/0.01)/(mu - lambda); the question asks for "
                    "wait + service, ln(100)/(mu - lambda).",
                    lambda p: mm1_wait_quantile(0.99, _rate(p), p["service_time"])),
            Mistake("That is the median (P50 = ln 2 / (mu - lambda)).",
                    lambda p: mm1_sojourn_quantile(0.5, _rate(p), p["service_time"])),
            Mistake("You used a normal tail, mean + 2.33 std. The time in the system is exponential: "
                    "P99 = -ln(0.01) / (mu - lambda).",
                    lambda p: mm1_mean_sojourn(_rate(p), p["service_time"]) * (1 + 2.326)),
            Mistake("That is the P99 of the service time alone, s ln 100: queueing scales the whole "
                    "distribution by 1 / (1 - rho).", lambda p: p["service_time"] * math.log(100)),
        ],
        chapter="queueing", difficulty="medium",
    ),
    Question(
        "queueing.closed_loop_throughput",
        "A closed-loop benchmark runs {clients} clients. Each sends a request, waits for the response (mean "
        "{response:g} s), thinks for {think:g} s, and sends the next. What throughput does it measure? (req/s)",
        answer=lambda p: p["clients"] / (p["response"] + p["think"]),
        unit="req/s",
        params={"clients": 32, "response": 0.5, "think": 2.0},
        variants={"clients": (16, 32, 64), "response": (0.5, 0.8, 1.2), "think": (2.0, 3.0, 5.0)},
        mistakes=[
            Mistake("You left out the think time: each client completes one request every R + Z seconds, "
                    "so N = X (R + Z).", lambda p: p["clients"] / p["response"]),
            Mistake("You left out the response time: a client's cycle is R + Z, not Z.",
                    lambda p: p["clients"] / p["think"]),
        ],
        chapter="queueing", difficulty="easy",
    ),
    Question(
        "queueing.utilisation_target",
        "A prefill server takes equal prompts one at a time (M/D/1). What is the highest utilisation at "
        "which the mean wait in the queue stays within {waits:g} prefill times? (a ratio, 0 to 1)",
        answer=lambda p: md1_max_arrival_rate(1.0, 1.0 + p["waits"]),
        params={"waits": 3.0},
        variants={"waits": (1.0, 2.0, 3.0, 4.0)},
        mistakes=[
            Mistake("That is the M/M/1 answer, rho / (1 - rho) = n: constant prefill times wait half as "
                    "long, rho / (2 (1 - rho)) = n.", lambda p: mm1_max_arrival_rate(1.0, 1.0 + p["waits"])),
            Mistake("You bounded the TTFT (wait + prefill) by that many prefill times; the question bounds the "
                    "wait alone.", lambda p: md1_max_arrival_rate(1.0, p["waits"])),
        ],
        chapter="queueing", difficulty="medium",
    ),
    Question(
        "queueing.closed_loop_wait",
        "A closed-loop benchmark runs ONE client with zero think time against a server with a constant "
        "30 ms service time, so the server is busy 100 % of the time. What is the mean wait in the queue? "
        "('zero', 'one service time' or 'infinite')",
        answer=lambda p: "zero",
        kind="choice",
        choices=("zero", "one service time", "infinite"),
        mistakes=[
            Mistake("rho = 1 means an unbounded queue only for random (open-loop) arrivals. Here the one "
                    "client sends its next request when the previous one ends: it never finds the server "
                    "busy.", lambda p: "infinite"),
            Mistake("Nobody is ahead of the request: the only client is the one that just finished.",
                    lambda p: "one service time"),
        ],
        chapter="queueing", difficulty="easy",
    ),
    Question(
        "queueing.md1_p99_ttft",
        "Llama-3.1-8B in bf16 on one H100-SXM5-80GB prefills 2048-token prompts one at a time (physical "
        "bound). Requests arrive as a Poisson stream at {rate:g} req/s. What is the P99 of the TTFT, exactly "
        "(Erlang's M/D/1 waiting-time distribution)? (ms)",
        answer=lambda p: md1_wait_quantile(0.99, p["rate"], _d(p)) + _d(p),
        unit="ms",
        rel_tol=0.01,
        params={**_PREFILL, "rate": 28.0},
        variants={"rate": (24.0, 26.0, 28.0)},
        mistakes=[
            Mistake("That is the mean TTFT; the P99 is several times it (the wait's tail is long).",
                    lambda p: prefill_mean_ttft(p["rate"], p["model"], p["accelerator"], p["prompt_len"])),
            Mistake("That is the P99 of the wait alone: the TTFT adds the request's own prefill t_p.",
                    lambda p: md1_wait_quantile(0.99, p["rate"], _d(p))),
            Mistake("That is an M/M/1 tail (exponential service at the same mean): equal prompts make a "
                    "shorter tail, Erlang's formula.",
                    lambda p: mm1_wait_quantile(0.99, p["rate"], _d(p)) + _d(p)),
            Mistake("ln(100) x the mean TTFT is the M/M/1 rule for the time in the system; the M/D/1 "
                    "tail is not exponential from zero.",
                    lambda p: math.log(100) * prefill_mean_ttft(p["rate"], p["model"], p["accelerator"],
                                                                p["prompt_len"])),
        ],
        chapter="queueing", difficulty="medium",
    ),
    Question(
        "queueing.kingman_bursty",
        "The same prefill server (2048-token prompts, physical bound, one at a time) is benchmarked with "
        "`vllm bench serve --request-rate {rate:g} --burstiness {burstiness:g}`: gamma gaps of shape "
        "{burstiness:g}. Estimate the mean wait in the queue with Kingman's formula. (ms)",
        answer=lambda p: kingman_mean_wait(p["rate"], _d(p), 1.0 / p["burstiness"], 0.0),
        unit="ms",
        params={**_PREFILL, "rate": 24.0, "burstiness": 0.25},
        variants={"rate": (20.0, 24.0), "burstiness": (0.25, 0.5)},
        mistakes=[
            Mistake("That is the Poisson (M/D/1) wait: a burstiness b below 1 makes the gaps' squared "
                    "coefficient of variation 1/b (4 at b = 0.25), not 1.", lambda p: md1_mean_wait(p["rate"], _d(p))),
            Mistake("C_a^2 is 1 / burstiness (gamma gaps of shape k have variance 1/k in units of the mean "
                    "squared), not the burstiness itself.",
                    lambda p: kingman_mean_wait(p["rate"], _d(p), p["burstiness"], 0.0)),
            Mistake("Equal prompts take a constant time: C_s^2 = 0, not 1 (that would be exponential service).",
                    lambda p: kingman_mean_wait(p["rate"], _d(p), 1.0 / p["burstiness"], 1.0)),
        ],
        chapter="queueing", difficulty="medium",
    ),
]
