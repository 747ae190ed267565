"""Questions of chapter 01, "Anatomy of a request" (the template every chapter's set copies).

Every expected answer is computed by the library from the question's
parameters; every known mistake is computed the same way, so a variant with
other parameters keeps its hints.
"""

from __future__ import annotations

import sympy as sp

from ..question import Mistake, Question
from ..decode import decode_step_time
from ..hardware import get_accelerator
from ..metrics import e2e_from_ttft_tpot
from ..models import get_model, kv_bytes_per_token, parameter_count, weight_bytes

_T1, _T, _n = sp.symbols("T_1 T L_o", positive=True)   # the book's notation (chapter 00)
_GQA_MODELS = ("Llama-3.1-8B", "Mistral-7B", "Qwen2.5-7B", "Llama-3.1-70B", "Qwen2.5-72B")


def _kv(p, heads="kv", factor=2.0, layers=True):
    m = get_model(p["model"])
    n_heads = m.n_kv_heads if heads == "kv" else m.n_heads
    return factor * (m.n_layers if layers else 1) * n_heads * m.head_dim * 2.0


def _ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``11th``, ``41st``, ``101st``."""
    n = int(n)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _mean_itl(p):
    (n_a, tpot_a), (n_b, tpot_b) = p["requests"]
    return ((n_a - 1) * tpot_a + (n_b - 1) * tpot_b) / ((n_a - 1) + (n_b - 1))


QUESTIONS = [
    Question(
        "anatomy.kv_bytes_per_token",
        "How many bytes of KV cache does one token of {model} add, in bf16? (bytes)",
        answer=lambda p: kv_bytes_per_token(p["model"], "bf16"),
        unit="B",
        params={"model": "Llama-3.1-8B"},
        variants={"model": _GQA_MODELS},
        mistakes=[
            Mistake("You used the query heads; the cache stores only the KV heads (GQA).",
                    lambda p: _kv(p, heads="query")),
            Mistake("You stored K but not V (or V but not K): the factor 2 is one key and one value.",
                    lambda p: _kv(p, factor=1.0)),
            Mistake("That is one layer's worth: every layer keeps its own K and V.",
                    lambda p: _kv(p, layers=False)),
        ],
    ),
    Question(
        "anatomy.kv_cache_one_sequence",
        "How large is the KV cache of one {context}-token {model} sequence in bf16? (GiB)",
        answer=lambda p: kv_bytes_per_token(p["model"], "bf16") * p["context"],
        unit="GiB",
        params={"model": "Llama-3.1-8B", "context": 4096},
        variants={"model": _GQA_MODELS, "context": (2048, 4096, 8192, 16384)},
        mistakes=[
            Mistake("You used the query heads; the cache stores only the KV heads (GQA).",
                    lambda p: _kv(p, heads="query") * p["context"]),
        ],
    ),
    Question(
        "anatomy.tpot_from_timestamps",
        "A request arrives at t = 0 s; its first token comes at {first} s and its {nth} and last at "
        "{last} s. What is its TPOT, as vLLM defines it? (ms)",
        answer=lambda p: (p["last"] - p["first"]) / (p["n"] - 1),
        unit="ms",
        rel_tol=0.002,  # dividing by n instead of n - 1 is 1 % off for n = 101
        params={"first": 0.35, "n": 20, "gap": 0.02},
        variants={"first": (0.25, 0.35, 0.5, 0.8), "n": (20, 41, 101), "gap": (0.015, 0.02, 0.025, 0.04)},
        derive=lambda p: {**p, "last": round(p["first"] + p["gap"] * (p["n"] - 1), 4), "nth": _ordinal(p["n"])},
        mistakes=[
            Mistake("You divided by n; n tokens have only n - 1 gaps after the first one.",
                    lambda p: (p["last"] - p["first"]) / p["n"]),
            Mistake("That is E2E / n, which counts the first token (and its queueing and prefill): "
                    "vLLM's TPOT is (E2E - TTFT) / (n - 1).",
                    lambda p: p["last"] / p["n"]),
        ],
    ),
    Question(
        "anatomy.e2e_from_ttft_tpot",
        "TTFT is {ttft:g} s and TPOT {tpot_ms:g} ms; the response has {n} tokens. What is the E2E latency? (s)",
        answer=lambda p: e2e_from_ttft_tpot(p["ttft"], p["tpot"], p["n"]),
        unit="s",
        rel_tol=0.002,
        params={"ttft": 0.35, "tpot": 0.02, "n": 20},
        variants={"ttft": (0.2, 0.35, 0.5, 0.8), "tpot": (0.015, 0.02, 0.03, 0.05), "n": (20, 50, 120, 300)},
        derive=lambda p: {**p, "tpot_ms": round(p["tpot"] * 1e3, 3)},
        mistakes=[
            Mistake("Off by one token: the first token arrives at TTFT, so only n - 1 gaps follow.",
                    lambda p: p["ttft"] + p["n"] * p["tpot"]),
            Mistake("You left out TTFT: the user waits for the first token too.",
                    lambda p: (p["n"] - 1) * p["tpot"]),
        ],
    ),
    Question(
        "anatomy.e2e_formula",
        "Write E2E as a sympy expression in T_1 (TTFT), T (TPOT) and L_o (output tokens).",
        answer=lambda p: _T1 + (_n - 1) * _T,
        kind="symbolic",
        symbols={"T_1": _T1, "T": _T, "L_o": _n},
        mistakes=[
            Mistake("Off by one token: the first token arrives at T_1, so L_o - 1 gaps follow.",
                    lambda p: _T1 + _n * _T),
            Mistake("L_o x T alone leaves out the wait for the first token.", lambda p: _n * _T),
        ],
    ),
    Question(
        "anatomy.decode_floor",
        "The fastest a single decode step can be: {model} in bf16 on one {accelerator}, batch 1, "
        "empty cache, at the physical bound. (ms)",
        answer=lambda p: decode_step_time(p["model"], p["accelerator"], 1, 0),
        unit="ms",
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB"},
        variants={"model": ("Llama-3.1-8B", "Mistral-7B", "Qwen2.5-7B", "Llama-2-7B"),
                  "accelerator": ("H100-SXM5-80GB", "A100-SXM4-80GB", "H200-SXM-141GB", "MI300X")},
        mistakes=[
            Mistake("You divided by the FLOP/s: at batch 1 the step is bound by reading the weights "
                    "(bytes / bandwidth), not by compute.",
                    lambda p: 2 * parameter_count(p["model"])
                    / get_accelerator(p["accelerator"]).peak_flops("bf16")),
            Mistake("That is fp8 (1 byte per weight); the question says bf16 (2 bytes).",
                    lambda p: weight_bytes(p["model"], "fp8")
                    / get_accelerator(p["accelerator"]).memory_bandwidth),
            Mistake("You read every stored weight, P b_w: a step gathers one row of the input-embedding "
                    "table per token and never streams the table, so it reads (P - V D) b_w plus that row.",
                    lambda p: weight_bytes(p["model"], "bf16")
                    / get_accelerator(p["accelerator"]).memory_bandwidth),
        ],
    ),
    Question(
        "anatomy.which_phase_compute_bound",
        "Which phase of a request with a 2000-token prompt is compute-bound on an H100: "
        "'prefill' or 'decode'?",
        answer=lambda p: "prefill",
        kind="choice",
        choices=("prefill", "decode"),
        mistakes=[Mistake("Decode reads every weight to produce one token per sequence: about "
                          "1 FLOP per byte at batch 1, far below the ridge. Prefill multiplies each "
                          "weight by 2000 tokens.", lambda p: "decode")],
    ),
    Question(
        "anatomy.batch_throughput",
        "{batch} sequences decode together and each step takes {step_ms:g} ms. How many output "
        "tokens per second does the server produce? (tok/s)",
        answer=lambda p: p["batch"] / p["step"],
        unit="tok/s",
        params={"batch": 32, "step": 0.025},
        derive=lambda p: {**p, "step_ms": round(p["step"] * 1e3, 3)},
        variants={"batch": (16, 32, 48, 64, 96, 128)},
        mistakes=[
            Mistake("That is one sequence's rate (1 / TPOT); the batch makes 32 tokens per step.",
                    lambda p: 1 / p["step"]),
            Mistake("Milliseconds slipped in: divide by the step in seconds.",
                    lambda p: p["batch"] / (p["step"] * 1e3)),
        ],
    ),
    Question(
        "anatomy.mean_itl_vs_mean_tpot",
        "Request A has {n_a} output tokens at a TPOT of {tpot_a_ms:g} ms; request B has {n_b} at {tpot_b_ms:g} ms. "
        "What is the mean ITL over all gaps of both requests, as vLLM reports it? (ms)",
        answer=_mean_itl,
        unit="ms",
        rel_tol=0.002,
        params={"requests": ((11, 0.010), (101, 0.030))},
        variants={"requests": (((11, 0.010), (101, 0.030)), ((16, 0.012), (81, 0.035)),
                               ((11, 0.008), (61, 0.040)), ((6, 0.010), (41, 0.030)))},
        derive=lambda p: {**p, "n_a": p["requests"][0][0], "n_b": p["requests"][1][0],
                          "tpot_a_ms": round(p["requests"][0][1] * 1e3, 3),
                          "tpot_b_ms": round(p["requests"][1][1] * 1e3, 3)},
        mistakes=[
            Mistake("That is the mean TPOT (one number per request, averaged). Mean ITL averages "
                    "over gaps: B has ten times more of them.",
                    lambda p: (p["requests"][0][1] + p["requests"][1][1]) / 2),
            Mistake("Close, but you weighted by tokens, not gaps: n tokens have n - 1 gaps.",
                    lambda p: (p["requests"][0][0] * p["requests"][0][1] + p["requests"][1][0]
                               * p["requests"][1][1]) / (p["requests"][0][0] + p["requests"][1][0])),
        ],
    ),
]
