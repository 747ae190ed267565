"""Questions of chapter 07, "SLOs and goodput".

Every expected answer is computed by the library from the question's
parameters; every known mistake is computed the same way.
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from ..checks import Mistake, Question
from ..decode import decode_throughput
from ..memory import max_batch_size
from ..slo import (
    distserve_goodput,
    max_batch_for_slos,
    max_batch_for_tpot,
    request_goodput,
    request_throughput,
    step_time_pieces,
    tpot_for_reading_speed,
)

_tau, _a, _b = sp.symbols("tau a b", positive=True)

_SYSTEM = {"model": "Llama-3.1-70B", "accelerator": "A100-SXM4-80GB", "context": 2048, "tp": 4}


def _b_mem(p):
    return max_batch_size(p["model"], p["accelerator"], p["context"], tensor_parallel=p["tp"])


def _b_slo(p, **kw):
    return max_batch_for_tpot(p["model"], p["accelerator"], p["context"], tpot_slo=p["tau"],
                              max_batch=_b_mem(p), tensor_parallel=p["tp"], **kw)


def _x(p, b):
    return float(decode_throughput(p["model"], p["accelerator"], b, p["context"], tensor_parallel=p["tp"]))


_REQUESTS = {  # eight requests of a 4-second run: TTFT (s), TPOT (s)
    "ttft": [0.12, 0.50, 0.31, 0.75, 0.22, 0.40, 0.95, 0.18],
    "tpot": [0.030, 0.041, 0.050, 0.028, 0.065, 0.045, 0.055, 0.071],
}


def _md1_wait(p):
    rho = p["rate"] * p["prefill"]
    return rho * p["prefill"] / (2 * (1 - rho))


def _good(p, ttft=True, tpot=True, strict=False):
    t1 = np.array(p["ttft"])
    t2 = np.array(p["tpot"])
    ok = np.ones(t1.size, dtype=bool)
    if ttft:
        ok &= (t1 < p["ttft_slo"]) if strict else (t1 <= p["ttft_slo"])
    if tpot:
        ok &= (t2 < p["tpot_slo"]) if strict else (t2 <= p["tpot_slo"])
    return ok.sum() / p["duration"]


QUESTIONS = [
    Question(
        "slo.b_slo",
        "Llama-3.1-70B in bf16 on 4 A100-SXM4-80GB (TP 4), 2048 tokens per sequence, hybrid model at the "
        "physical bound. What is the largest batch whose decode step meets a TPOT target of 30 ms? "
        "(sequences)",
        answer=lambda p: float(_b_slo(p)),
        params={**_SYSTEM, "tau": 0.030},
        rel_tol=1e-9,
        mistakes=[
            Mistake("You rounded up: at that batch T(B) is just above the target. B_SLO is the floor "
                    "of the bound.", lambda p: float(_b_slo(p)) + 1),
            Mistake("That is the memory wall, where TPOT is well above 30 ms: the SLO binds first.",
                    lambda p: float(_b_mem(p))),
            Mistake("You divided the whole target by the per-sequence slope: subtract the weight read "
                    "first, B <= (tau - T_w) / m.",
                    lambda p: float(math.floor(p["tau"] / step_time_pieces(
                        p["model"], p["accelerator"], p["context"], tensor_parallel=p["tp"])[1][0]))),
        ],
    ),
    Question(
        "slo.bound_formula",
        "For the additive model T(B) = a + bB, what is the largest (real-valued) batch that meets a TPOT "
        "target tau? (sympy expression in tau, a, b)",
        answer=lambda p: (_tau - _a) / _b,
        kind="symbolic",
        symbols={"tau": _tau, "a": _a, "b": _b},
        mistakes=[
            Mistake("You forgot the fixed part a (the weight read): only tau - a is left for the "
                    "sequences.", lambda p: _tau / _b),
            Mistake("That divides tau by T(1) = a + b, as if every sequence cost a full step.",
                    lambda p: _tau / (_a + _b)),
            Mistake("Solve a + bB = tau for B: divide by b, do not multiply.", lambda p: (_tau - _a) * _b),
        ],
    ),
    Question(
        "slo.throughput_kept",
        "Same system as the B_SLO question (Llama-3.1-70B, 4 A100 TP 4, 2048 tokens) with a 20 ms TPOT "
        "target: what fraction of the memory wall's throughput does the SLO-constrained batch keep? "
        "(a ratio, 0 to 1)",
        answer=lambda p: _x(p, _b_slo(p)) / _x(p, _b_mem(p)),
        params={**_SYSTEM, "tau": 0.020},
        mistakes=[
            Mistake("That is the ratio of the batch sizes. Throughput is B / T(B), and T shrinks with "
                    "B too: the smaller batch keeps more than its share.",
                    lambda p: _b_slo(p) / _b_mem(p)),
        ],
    ),
    Question(
        "slo.binding",
        "Llama-3.1-8B on one H100-SXM5-80GB serves prompts of 8192 tokens with 128-token answers, "
        "prefill and decode on the same GPU. Targets: TPOT 50 ms and P99 TTFT 1 s. Which limit sets the "
        "largest batch in the chapter's steady-state model? ('TPOT', 'TTFT' or 'memory')",
        answer=lambda p: {"tpot": "TPOT", "ttft": "TTFT", "memory": "memory"}[max_batch_for_slos(
            p["model"], p["accelerator"], p["prompt_len"], p["output_len"], tpot_slo=p["tpot_slo"],
            ttft_slo=p["ttft_slo"])["binding"]],
        kind="choice",
        choices=("TPOT", "TTFT", "memory"),
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "prompt_len": 8192,
                "output_len": 128, "tpot_slo": 0.05, "ttft_slo": 1.0},
        mistakes=[
            Mistake("TPOT allows a few more sequences here. Each 8192-token prefill keeps the GPU busy "
                    "for over 100 ms, so at high rates the P99 wait for a prefill passes 1 s first.",
                    lambda p: "TPOT"),
            Mistake("Memory allows about twice as many sequences: a latency target binds first.",
                    lambda p: "memory"),
        ],
    ),
    Question(
        "slo.request_goodput",
        "A 4-second benchmark completes 8 requests with TTFT (s) 0.12, 0.50, 0.31, 0.75, 0.22, 0.40, "
        "0.95, 0.18 and TPOT (ms) 30, 41, 50, 28, 65, 45, 55, 71. With SLOs TTFT <= 0.5 s and "
        "TPOT <= 50 ms, what is vLLM's request goodput? (req/s)",
        answer=lambda p: request_goodput(p["ttft"], p["tpot"], p["duration"], ttft_slo=p["ttft_slo"],
                                         tpot_slo=p["tpot_slo"]),
        unit="req/s",
        params={**_REQUESTS, "duration": 4.0, "ttft_slo": 0.5, "tpot_slo": 0.05},
        mistakes=[
            Mistake("That is the request throughput: goodput counts only requests that meet every SLO.",
                    lambda p: request_throughput(len(p["ttft"]), p["duration"])),
            Mistake("You checked TTFT only: a good request must meet the TPOT target too.",
                    lambda p: _good(p, tpot=False)),
            Mistake("You checked TPOT only: a good request must meet the TTFT target too.",
                    lambda p: _good(p, ttft=False)),
            Mistake("A request exactly at the target meets it (vLLM tests SLO >= value).",
                    lambda p: _good(p, strict=True)),
        ],
    ),
    Question(
        "slo.distserve_goodput",
        "A 2-GPU deployment is tested at 2, 4, 6, 8, 10 and 12 req/s; the fraction of requests meeting "
        "both SLOs is 1.00, 0.99, 0.96, 0.92, 0.70, 0.55. What is DistServe's per-GPU goodput for a 90 % "
        "attainment goal, taking the highest tested rate that meets it? (req/s per GPU)",
        answer=lambda p: distserve_goodput(p["rates"], p["attainment"], p["target"], n_gpus=p["gpus"],
                                           interpolate=False),
        unit="req/s",
        params={"rates": [2, 4, 6, 8, 10, 12], "attainment": [1.0, 0.99, 0.96, 0.92, 0.70, 0.55],
                "target": 0.9, "gpus": 2},
        mistakes=[
            Mistake("That is the deployment's goodput; DistServe reports it per GPU: divide by 2.",
                    lambda p: distserve_goodput(p["rates"], p["attainment"], p["target"], interpolate=False)),
            Mistake("That is the highest rate tried, not the highest that meets the 90 % goal.",
                    lambda p: max(p["rates"]) / p["gpus"]),
            Mistake("That is the best rate x attainment (vLLM-style goodput at its best load), not the "
                    "highest rate that keeps 90 % of requests within their SLOs.",
                    lambda p: max(r * a for r, a in zip(p["rates"], p["attainment"])) / p["gpus"]),
        ],
    ),
    Question(
        "slo.md1_ttft",
        "Every prompt takes 80 ms to prefill and requests arrive as a Poisson stream at 6 req/s; "
        "prefills run one at a time. What is the mean TTFT (M/D/1 queue, ignoring decode)? (ms)",
        answer=lambda p: p["prefill"] + _md1_wait(p),
        unit="ms",
        params={"prefill": 0.080, "rate": 6.0},
        mistakes=[
            Mistake("That is the M/M/1 wait (exponential service). Prefill times of equal prompts are "
                    "constant: the M/D/1 wait is half of it.",
                    lambda p: p["prefill"] + 2 * _md1_wait(p)),
            Mistake("That is only the wait in the queue: TTFT adds the prefill itself.",
                    lambda p: _md1_wait(p)),
            Mistake("That leaves out queueing: at utilisation 0.48 a request often finds another "
                    "prefill running.", lambda p: p["prefill"]),
        ],
    ),
    Question(
        "slo.reading_tpot",
        "An adult reads English non-fiction at 238 words per minute (Brysbaert 2019). With 0.75 words "
        "per token, at what TPOT do tokens arrive exactly as fast as they are read? (ms)",
        answer=lambda p: tpot_for_reading_speed(p["wpm"], p["words_per_token"]),
        unit="ms",
        params={"wpm": 238.0, "words_per_token": 0.75},
        mistakes=[
            Mistake("You took one token per word; a token is about three quarters of a word, so tokens "
                    "come more often than words.", lambda p: 60.0 / p["wpm"]),
            Mistake("You divided by 0.75 instead of multiplying: there are more tokens than words, so "
                    "each token must come sooner than each word.",
                    lambda p: 60.0 / p["wpm"] / p["words_per_token"]),
        ],
    ),
    Question(
        "slo.b_slo_realistic",
        "Same system as the B_SLO question (Llama-3.1-70B, 4 A100 TP 4, 2048 tokens) but with a 50 ms "
        "TPOT target and kernels that reach 60 % of peak bandwidth (MBU 0.6, as Databricks measured; "
        "MFU 1). What is the largest batch that meets the target and fits in memory? (sequences)",
        answer=lambda p: float(_b_slo(p, mbu=p["mbu"])),
        params={**_SYSTEM, "tau": 0.050, "mbu": 0.6},
        rel_tol=1e-9,
        mistakes=[
            Mistake("That is the physical-bound answer (MBU = 1), where memory binds before the SLO. "
                    "At 60 % of the bandwidth every byte takes 1/0.6 as long.", lambda p: float(_b_slo(p))),
            Mistake("You scaled the physical-bound batch by 0.6; the weight read also slows down, "
                    "so solve T(B) = tau again with MBU 0.6.",
                    lambda p: float(math.floor(0.6 * _b_slo(p)))),
        ],
    ),
]
