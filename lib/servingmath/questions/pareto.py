"""Questions of chapter 06, "The Pareto frontier".

Every expected answer is computed by the library from the question's
parameters; every known mistake is computed the same way.
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from ..question import Mistake, Question
from ..decode import decode_step_parts, decode_step_time, decode_throughput
from ..memory import max_batch_size, min_tensor_parallel
from ..pareto import compute_dtype_for, decode_curve, pareto_mask, prefill_curve
from ._variants import GQA_8B_CLASS

_T, _a, _b = sp.symbols("T a b", positive=True)

_POINTS = {"A": (0.012, 1500.0), "B": (0.020, 2600.0), "C": (0.025, 2400.0), "D": (0.040, 3100.0)}


def _dominated(p):
    names = list(p["points"])
    x = [p["points"][n][0] for n in names]
    y = [p["points"][n][1] for n in names]
    mask = pareto_mask(x, y)
    return [n for n, on in zip(names, mask) if not on][0]


def _per_gpu(p, batch=None):
    b = p["batch"] if batch is None else batch
    t = decode_step_time(p["model"], p["accelerator"], b, p["context"], tensor_parallel=p["tp"])
    return p["batch"] / t / p["tp"]


def _slope_parts(p):
    parts = decode_step_parts(p["model"], p["accelerator"], 1, p["context"])
    return parts


def _asymptote(p, keep=("linear_compute", "attention_compute", "kv_memory")):
    parts = _slope_parts(p)
    return 1.0 / float(sum(parts[k] for k in keep))


def _front_max_batch(p):
    b = np.arange(1, p["max_batch"] + 1)
    c = decode_curve(p["model"], p["accelerator"], b, p["context"])
    return float(b[pareto_mask(c["tpot"], c["throughput"], significant_digits=12)].max())


def _knee(p):
    parts = decode_step_parts(p["model"], p["accelerator"], 1, p["context"])
    return float(parts["weight_memory"] / parts["linear_compute"])


def _prefill_gain(p):
    c = prefill_curve(p["model"], p["accelerator"], p["prompt_len"], [1, p["batch"]])
    return float(c["throughput"][1] / c["throughput"][0])


def _best_under_slo(p, option):
    wd, kd, tp = p["options"][option]
    cap = max_batch_size(p["model"], p["accelerator"], p["context"], weight_dtype=wd, kv_dtype=kd,
                         tensor_parallel=tp)
    if cap < 1:
        return 0.0
    b = np.arange(1, cap + 1)
    t = decode_step_time(p["model"], p["accelerator"], b, p["context"], weight_dtype=wd, kv_dtype=kd,
                         compute_dtype=compute_dtype_for(wd, p["accelerator"]), tensor_parallel=tp)
    ok = t <= p["tpot_slo"]
    return float((b[ok] / t[ok] / tp).max()) if ok.any() else 0.0


def _winner(p):
    return max(p["options"], key=lambda o: _best_under_slo(p, o))


def _ranked(p, rank):
    return sorted(p["options"], key=lambda o: _best_under_slo(p, o), reverse=True)[rank]


QUESTIONS = [
    Question(
        "pareto.dominated",
        "Four configurations (TPOT, tok/s per GPU): A (12 ms, 1500), B (20 ms, 2600), C (25 ms, 2400), "
        "D (40 ms, 3100). Which one is dominated? ('A', 'B', 'C' or 'D')",
        answer=_dominated,
        kind="choice",
        choices=("A", "B", "C", "D"),
        params={"points": _POINTS},
        mistakes=[
            Mistake("D is the slowest, but it has the most throughput: that is a trade, not a "
                    "domination. A dominated point loses on both counts to one other point.",
                    lambda p: "D"),
            Mistake("A has the least throughput, but nothing beats its 12 ms: it is the front's "
                    "low-latency end.", lambda p: "A"),
            Mistake("B beats C on both counts: B is the one doing the dominating.", lambda p: "B"),
        ],
    ),
    Question(
        "pareto.throughput_per_gpu",
        "{model} in bf16 on {tp} {accelerator} (tensor parallelism {tp}), {batch} sequences of {context} tokens "
        "decoding together. What output throughput does each GPU contribute? (tok/s)",
        answer=_per_gpu,
        unit="tok/s",
        params={"model": "Llama-3.1-70B", "accelerator": "H100-SXM5-80GB", "batch": 64, "context": 2048,
                "tp": 4},
        variants={"model": ("Llama-3.1-70B", "Qwen2.5-72B"), "accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB"),
                  "batch": (32, 64, 128), "context": (1024, 2048), "tp": (4, 8)},
        mistakes=[
            Mistake("That is the whole instance: divide by the tensor-parallel degree for tok/s "
                    "per GPU.", lambda p: _per_gpu(p) * p["tp"]),
            Mistake("You used the step time of batch 1. A batch of B reads B KV caches and does "
                    "B times the matmuls: use T(B).", lambda p: _per_gpu(p, batch=1)),
        ],
    ),
    Question(
        "pareto.asymptote",
        "In the additive model T(B) = a + bB, throughput B/T(B) approaches 1/b as B grows. Compute "
        "1/b for {model} on one {accelerator} with {context} tokens per sequence (bf16, physical "
        "bound). (tok/s)",
        answer=lambda p: _asymptote(p),
        unit="tok/s",
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "context": 2048},
        variants={"model": GQA_8B_CLASS, "accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB", "A100-SXM4-80GB"),
                  "context": (1024, 2048, 4096)},
        mistakes=[
            Mistake("You left out the KV-cache reads: each added sequence reads its own cache, so "
                    "they belong in b.", lambda p: _asymptote(p, ("linear_compute", "attention_compute"))),
            Mistake("You kept only the KV-cache reads; each added sequence also costs 2P FLOPs of "
                    "matmuls (and its attention math).", lambda p: _asymptote(p, ("kv_memory",))),
            Mistake("That is B / T at B = 1, not the limit: add the weight read a only once per step.",
                    lambda p: 1.0 / float(decode_step_time(p["model"], p["accelerator"], 1, p["context"],
                                                           overlap="additive"))),
        ],
    ),
    Question(
        "pareto.curve_formula",
        "Eliminate B from T = a + bB and X = B/T: write the throughput X as a function of the TPOT T "
        "(sympy expression in T, a, b).",
        answer=lambda p: (_T - _a) / (_b * _T),
        kind="symbolic",
        symbols={"T": _T, "a": _a, "b": _b},
        mistakes=[
            Mistake("That is B / (a + bB) with T written for B. Solve T = a + bB for B first: "
                    "B = (T - a)/b.", lambda p: _T / (_a + _b * _T)),
            Mistake("That is B itself. Throughput is B / T.", lambda p: (_T - _a) / _b),
            Mistake("That is only the limit as T grows; at finite T the fixed part a still costs "
                    "throughput.", lambda p: 1 / _b),
        ],
    ),
    Question(
        "pareto.front_end",
        "Sweep B = 1 ... 1024 for {model} on one {accelerator} with {context} tokens per sequence "
        "(hybrid model, bf16, physical bound). What is the largest batch on the Pareto front of "
        "(TPOT, throughput)? (sequences)",
        answer=_front_max_batch,
        params={"model": "Llama-3.1-8B", "accelerator": "A100-SXM4-80GB", "context": 2048,
                "max_batch": 1024},
        variants={"model": GQA_8B_CLASS, "accelerator": ("A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"),
                  "context": (1024, 2048)},
        rel_tol=1e-9,
        mistakes=[
            Mistake("One short: just below the knee the step is still weight-bound, so the first "
                    "batch past B* = T_w / c_lin still gains a little throughput. Round B* up.",
                    lambda p: math.floor(_knee(p))),
            Mistake("That is the memory wall. Past the knee throughput is flat, so every batch beyond "
                    "ceil(B*) only adds latency: dominated, whether it fits or not.",
                    lambda p: float(max_batch_size(p["model"], p["accelerator"], p["context"]))),
            Mistake("Not every batch is on the front: past the knee throughput stops growing while "
                    "TPOT keeps growing.", lambda p: float(p["max_batch"])),
        ],
    ),
    Question(
        "pareto.prefill_gain",
        "Prefill prompts of {prompt_len} tokens for {model} on one {accelerator}: by what factor does "
        "the prompt-token throughput grow when {batch} prompts are batched instead of 1? (a ratio)",
        answer=_prefill_gain,
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "prompt_len": 128, "batch": 8},
        variants={"model": GQA_8B_CLASS, "accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB"),
                  "prompt_len": (96, 128), "batch": (4, 8)},
        mistakes=[
            Mistake("Batching B prompts does not make the GPU B times faster: only the weight read is "
                    "shared, and a prompt of a hundred tokens or more is already close to compute-bound.",
                    lambda p: float(p["batch"])),
            Mistake("Not quite flat yet: the prompt is shorter than the ridge point (in FLOP/byte), so "
                    "sharing the weight read still helps.", lambda p: 1.0),
        ],
    ),
    Question(
        "pareto.min_tensor_parallel",
        "What is the smallest tensor-parallel degree at which Llama-3.1-70B in bf16 (weights and KV "
        "cache) fits on H100-SXM5-80GB GPUs with {batch} sequences of {context} tokens, using 90 % of each GPU's "
        "memory? (GPUs)",
        answer=lambda p: float(min_tensor_parallel(p["model"], p["accelerator"], p["context"],
                                                   batch_size=p["batch"])),
        params={"model": "Llama-3.1-70B", "accelerator": "H100-SXM5-80GB", "context": 4096, "batch": 64},
        variants={"context": (2048, 4096), "batch": (64, 128, 256)},
        rel_tol=1e-9,
        mistakes=[
            Mistake("141 GB of weights do fit in 2 x 72 GB, but that leaves only about 3 GB for the KV "
                    "cache, far less than the batch needs.", lambda p: 2.0),
            Mistake("Weights alone need more than one GPU (141 GB).", lambda p: 1.0),
        ],
    ),
    Question(
        "pareto.best_under_slo",
        "Llama-3.1-70B on H100-SXM5-80GB at 2048 tokens per sequence, TPOT at most 15 ms. Which "
        "configuration gives the most output tokens/s per GPU (at its best batch that meets the "
        "target and fits)? ('bf16 TP4', 'fp8 TP2', 'bf16 TP8', 'fp8 TP4'; fp8 means fp8 weights, KV "
        "cache and math)",
        answer=_winner,
        kind="choice",
        choices=("bf16 TP4", "fp8 TP2", "bf16 TP8", "fp8 TP4"),
        params={"model": "Llama-3.1-70B", "accelerator": "H100-SXM5-80GB", "context": 2048,
                "tpot_slo": 0.015,
                "options": {"bf16 TP4": ("bf16", "bf16", 4), "fp8 TP2": ("fp8", "fp8", 2),
                            "bf16 TP8": ("bf16", "bf16", 8), "fp8 TP4": ("fp8", "fp8", 4)}},
        mistakes=[
            Mistake("fp8 TP2 uses the fewest GPUs, but each GPU reads half the weights per step, so "
                    "its batch-1 step already takes most of the 15 ms: only a small batch fits under "
                    "the target.", lambda p: "fp8 TP2"),
            Mistake("bf16 TP8 is fast, but it reads twice the bytes of fp8 per token and spreads "
                    "them over 8 GPUs: compare tok/s per GPU.", lambda p: "bf16 TP8"),
            Mistake("bf16 TP4 reads 2 bytes per weight; at the same TPOT fp8 on the same 4 GPUs "
                    "runs a larger batch.", lambda p: "bf16 TP4"),
        ],
    ),
    Question(
        "pareto.algorithm",
        "Candidates are sorted by TPOT, fastest first. Walking down the list, which rule keeps exactly "
        "the front points (assume no ties)? ('keep if its throughput beats the running max', 'keep if "
        "its throughput beats the running min', 'keep if its TPOT beats the running min')",
        answer=lambda p: "keep if its throughput beats the running max",
        kind="choice",
        choices=("keep if its throughput beats the running max",
                 "keep if its throughput beats the running min",
                 "keep if its TPOT beats the running min"),
        mistakes=[
            Mistake("A point is dominated when some faster point has at least its throughput, i.e. "
                    "when the best (maximum) throughput seen so far is >= its own.",
                    lambda p: "keep if its throughput beats the running min"),
            Mistake("The list is sorted by TPOT already: every later point is slower. The test must "
                    "be on the other objective.", lambda p: "keep if its TPOT beats the running min"),
        ],
    ),
]
