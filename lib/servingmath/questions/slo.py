"""Questions of chapter 07, "SLOs and goodput".

Every expected answer is computed by the library from the question's
parameters; every known mistake is computed the same way.
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from ..question import Mistake, Question
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
        "Llama-3.1-70B in bf16 on 4 A100-SXM4-80GB (TP 4), {context} tokens per sequence, hybrid model at the "
        "physical bound. What is the largest batch whose decode step meets a TPOT target of {tau_ms:g} ms? "
        "(sequences)",
        answer=lambda p: float(_b_slo(p)),
        params={**_SYSTEM, "tau": 0.030},
        variants={"tau": (0.02, 0.025, 0.03), "context": (1024, 2048)},
        derive=lambda p: {**p, "tau_ms": round(p["tau"] * 1e3, 3)},
        rel_tol=1e-9,
        mistakes=[
            Mistake("You rounded up: at that batch T(B) is just above the target. B_SLO is the floor "
                    "of the bound.", lambda p: float(_b_slo(p)) + 1),
            Mistake("That is the memory wall, where TPOT is well above the target: the SLO binds first.",
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
        "Llama-3.1-70B in bf16 on 4 A100-SXM4-80GB (TP 4), {context} tokens per sequence, hybrid model at the "
        "physical bound, with a {tau_ms:g} ms TPOT target: what fraction of the memory wall's throughput does "
        "the SLO-constrained batch keep? (a ratio, 0 to 1)",
        answer=lambda p: _x(p, _b_slo(p)) / _x(p, _b_mem(p)),
        params={**_SYSTEM, "tau": 0.020},
        variants={"tau": (0.02, 0.025), "context": (1024, 2048)},
        derive=lambda p: {**p, "tau_ms": round(p["tau"] * 1e3, 3)},
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
        "0.95, 0.18 and TPOT (ms) 30, 41, 50, 28, 65, 45, 55, 71. With SLOs TTFT <= {ttft_slo:g} s and "
        "TPOT <= {tpot_ms:g} ms, what is vLLM's request goodput? (req/s)",
        answer=lambda p: request_goodput(p["ttft"], p["tpot"], p["duration"], ttft_slo=p["ttft_slo"],
                                         tpot_slo=p["tpot_slo"]),
        unit="req/s",
        params={**_REQUESTS, "duration": 4.0, "slos": (0.5, 0.05)},
        variants={"slos": ((0.5, 0.05), (0.4, 0.045), (0.4, 0.055), (0.5, 0.041), (0.5, 0.055), (0.75, 0.055))},
        derive=lambda p: {**p, **({"ttft_slo": p["slos"][0], "tpot_slo": p["slos"][1]} if "slos" in p else {}),
                          "tpot_ms": round((p["slos"][1] if "slos" in p else p["tpot_slo"]) * 1e3, 3)},
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
        "A {gpus}-GPU deployment is tested at 2, 4, 6, 8, 10 and 12 req/s; the fraction of requests meeting "
        "both SLOs is 1.00, 0.99, 0.96, 0.92, 0.70, 0.55. What is DistServe's per-GPU goodput for a "
        "{target_pct:g} % attainment goal, taking the highest tested rate that meets it? (req/s per GPU)",
        answer=lambda p: distserve_goodput(p["rates"], p["attainment"], p["target"], n_gpus=p["gpus"],
                                           interpolate=False),
        unit="req/s",
        params={"rates": [2, 4, 6, 8, 10, 12], "attainment": [1.0, 0.99, 0.96, 0.92, 0.70, 0.55],
                "target": 0.9, "gpus": 2},
        variants={"target": (0.9, 0.95), "gpus": (2, 4, 8)},
        derive=lambda p: {**p, "target_pct": round(p["target"] * 100, 3)},
        mistakes=[
            Mistake("That is the deployment's goodput; DistServe reports it per GPU: divide by the number "
                    "of GPUs.",
                    lambda p: distserve_goodput(p["rates"], p["attainment"], p["target"], interpolate=False)),
            Mistake("That is the highest rate tried, not the highest that meets the attainment goal.",
                    lambda p: max(p["rates"]) / p["gpus"]),
            Mistake("That is the best rate x attainment (vLLM-style goodput at its best load), not the "
                    "highest rate that keeps 90 % of requests within their SLOs.",
                    lambda p: max(r * a for r, a in zip(p["rates"], p["attainment"])) / p["gpus"]),
        ],
    ),
    Question(
        "slo.md1_ttft",
        "Every prompt takes {prefill_ms:g} ms to prefill and requests arrive as a Poisson stream at {rate:g} "
        "req/s; prefills run one at a time. What is the mean TTFT (M/D/1 queue, ignoring decode)? (ms)",
        answer=lambda p: p["prefill"] + _md1_wait(p),
        unit="ms",
        params={"prefill": 0.080, "rate": 6.0},
        variants={"prefill": (0.05, 0.08, 0.1), "rate": (4.0, 6.0, 8.0)},
        derive=lambda p: {**p, "prefill_ms": round(p["prefill"] * 1e3, 3)},
        mistakes=[
            Mistake("That is the M/M/1 wait (exponential service). Prefill times of equal prompts are "
                    "constant: the M/D/1 wait is half of it.",
                    lambda p: p["prefill"] + 2 * _md1_wait(p)),
            Mistake("That is only the wait in the queue: TTFT adds the prefill itself.",
                    lambda p: _md1_wait(p)),
            Mistake("That leaves out queueing: at this utilisation a request often finds another "
                    "prefill running.", lambda p: p["prefill"]),
        ],
    ),
    Question(
        "slo.reading_tpot",
        "{reader} {wpm:g} words per minute{source}. With {words_per_token:g} words "
        "per token, at what TPOT do tokens arrive exactly as fast as they are read? (ms)",
        answer=lambda p: tpot_for_reading_speed(p["wpm"], p["words_per_token"]),
        unit="ms",
        params={"wpm": 238.0, "words_per_token": 0.75},
        variants={"wpm": (200.0, 238.0, 260.0, 300.0), "words_per_token": (0.7, 0.75, 0.8)},
        derive=lambda p: {**p, **({"reader": "An adult reads English non-fiction at", "source": " (Brysbaert 2019)"}
                                  if p["wpm"] == 238.0 else {"reader": "A reader reads at", "source": ""})},
        mistakes=[
            Mistake("You took one token per word; a token is about three quarters of a word, so tokens "
                    "come more often than words.", lambda p: 60.0 / p["wpm"]),
            Mistake("You divided by the words per token instead of multiplying: there are more tokens than words, so "
                    "each token must come sooner than each word.",
                    lambda p: 60.0 / p["wpm"] / p["words_per_token"]),
        ],
    ),
    Question(
        "slo.b_slo_realistic",
        "Llama-3.1-70B in bf16 on 4 A100-SXM4-80GB (TP 4), 2048 tokens per sequence, hybrid model, with a "
        "{tau_ms:g} ms TPOT target and kernels that reach {mbu_pct:g} % of peak bandwidth (MBU {mbu:g}{measured}; "
        "MFU 1). What is the largest batch that meets the target and fits in memory? (sequences)",
        answer=lambda p: float(_b_slo(p, mbu=p["mbu"])),
        params={**_SYSTEM, "tau": 0.050, "mbu": 0.6},
        variants={"tau": (0.04, 0.05), "mbu": (0.5, 0.6)},
        derive=lambda p: {**p, "tau_ms": round(p["tau"] * 1e3, 3), "mbu_pct": round(p["mbu"] * 100, 3),
                          "measured": ", as Databricks measured" if p["mbu"] == 0.6 else ""},
        rel_tol=1e-9,
        mistakes=[
            Mistake("That is the physical-bound answer (MBU = 1), where memory binds before the SLO. "
                    "At a fraction MBU of the bandwidth every byte takes 1/MBU as long.",
                    lambda p: float(_b_slo(p))),
            Mistake("You scaled the physical-bound batch by MBU; the weight read also slows down, "
                    "so solve T(B) = tau again with the MBU.",
                    lambda p: float(math.floor(p["mbu"] * _b_slo(p)))),
        ],
    ),
]
