"""Questions of chapter 10, "Scheduling and tail latency".

Every expected answer is computed from the question's parameters (closed forms
of the chapter, or small simulations with fixed seeds); every known mistake
is computed the same way.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import sympy as sp

from ..question import Mistake, Question
from ..simulate import ContinuousBatching, Poisson, Server, SimulationConfig, simulate
from ..simulate.results import weighted_percentile
from ..workloads import chat_workload

_T_w, _c, _B, _L_p, _k = sp.symbols("T_w c B L_p k", positive=True)

_ITERATION = {"t_w": 0.007, "c": 25e-6}    # the toy iteration T(n) = T_w + c n, seconds


def _stall(p, prefill=True, step=True, reads=2):
    g = 0.0
    if prefill:
        g += p["c"] * p["prompt_len"]
    if step:
        g += p["c"] * (p["batch"] + 1)
    return g + reads * p["t_w"]


def _chunked(p, k=None, riders=True):
    k = math.ceil(p["prompt_len"] / (p["budget"] - p["batch"])) if k is None else k
    return k * (p["t_w"] + (p["c"] * p["batch"] if riders else 0.0)) + p["c"] * p["prompt_len"]


_SEEDS = range(5)


@lru_cache(maxsize=4)
def _chapter_runs(rate: float):
    """The chapter's continuous-batching runs at the book's realistic setting: Llama-3.1-8B, H100, synthetic
    chat, seeds 0..4, each its own 400 requests (chat_workload(400, seed=s)) and arrivals (simulate seed s)."""
    server = Server("Llama-3.1-8B", "H100-SXM5-80GB", setting="realistic")
    policy = ContinuousBatching(max_batch_size=256, max_prefill_tokens=8192)
    return tuple(simulate(SimulationConfig(server, chat_workload(400, seed=s), Poisson(rate), policy), s)
                 for s in _SEEDS)


def _one_itl(result, q=None, mean=False):
    values, weights = result.itl_values()
    if mean:
        return float((values * weights).sum() / weights.sum())
    return float(weighted_percentile(values, weights, q))


def _itl(p, q=None, mean=False, seeds=None):
    runs = _chapter_runs(p["rate"])[: seeds or len(_SEEDS)]
    return float(np.mean([_one_itl(r, q, mean) for r in runs]))


def _tpot_p99(p):
    return float(np.mean([np.nanpercentile(r.records.tpot, 99) for r in _chapter_runs(p["rate"])]))


def _iteration_text(p):
    return {**p, "t_w_ms": round(p["t_w"] * 1e3, 3), "c_us": round(p["c"] * 1e6, 3)}


def _ttfts(p):
    return np.array([p["fast"]] * p["n_fast"] + [p["slow"]] * p["n_slow"])


def _waste(p, useful=False):
    out = np.array(p["outputs"], dtype=float)
    frac = out.sum() / (out.size * out.max())
    return frac if useful else 1.0 - frac


QUESTIONS = [
    Question(
        "scheduling.stall_policy",
        "A 2,000-token prompt arrives while 64 users stream tokens from the same GPU. Which scheduling "
        "policy keeps their inter-token gaps short on that same GPU while still starting the new prompt "
        "right away? ('static batching', 'continuous batching', 'chunked prefill' or 'disaggregation')",
        answer=lambda p: "chunked prefill",
        kind="choice",
        choices=("static batching", "continuous batching", "chunked prefill", "disaggregation"),
        difficulty="easy",
        mistakes=[
            Mistake("Continuous batching in its prefill-first form (vLLM v0) runs the whole prompt in one "
                    "iteration while every decode waits: that is the stall.",
                    lambda p: "continuous batching"),
            Mistake("Disaggregation removes the stall by moving the prompt to another GPU (a prefill pool); "
                    "the question asks for the same GPU.", lambda p: "disaggregation"),
            Mistake("Static batching has no stall only because nobody joins a running batch: the new "
                    "prompt waits until the whole batch has finished.", lambda p: "static batching"),
        ],
    ),
    Question(
        "scheduling.stall",
        "An engine's iteration over n tokens takes T_w + c n with T_w = {t_w_ms:g} ms and c = {c_us:g} us per token. "
        "{batch} sequences are decoding when a {prompt_len:,}-token prompt arrives, and the scheduler is prefill-first "
        "(the prompt's iteration runs alone, then the next decode step includes it). How long is the gap "
        "between two tokens of a decoding sequence? (ms)",
        answer=lambda p: _stall(p),
        unit="ms",
        params={**_ITERATION, "prompt_len": 1500, "batch": 48},
        variants={"t_w": (0.005, 0.007, 0.01), "c": (20e-6, 25e-6, 30e-6), "prompt_len": (1000, 1500, 2000),
                  "batch": (32, 48, 64)},
        derive=_iteration_text,
        mistakes=[
            Mistake("That is the prefill alone: after it, the decoding sequences still need their own step "
                    "(T_w + c (B + 1)) before their next token.", lambda p: _stall(p, step=False, reads=1)),
            Mistake("That is a normal decode step: the prompt's prefill iteration comes first, and the "
                    "decodes wait for it.", lambda p: _stall(p, prefill=False, reads=1)),
            Mistake("The weights are read twice, once per iteration: 2 T_w, not T_w.",
                    lambda p: _stall(p, reads=1)),
        ],
    ),
    Question(
        "scheduling.chunked_ttft_formula",
        "Iteration time T_w + c n for n tokens. A prompt of L_p tokens is prefilled in k chunks while B "
        "sequences keep decoding, one token each in every iteration. What is the prompt's time from its "
        "first chunk to its first token? (sympy expression in T_w, c, B, L_p, k)",
        answer=lambda p: _k * (_T_w + _c * _B) + _c * _L_p,
        kind="symbolic",
        symbols={"T_w": _T_w, "c": _c, "B": _B, "L_p": _L_p, "k": _k},
        mistakes=[
            Mistake("Every one of the k iterations also carries the B decode tokens: add k c B.",
                    lambda p: _k * _T_w + _c * _L_p),
            Mistake("That is prefill-first (one iteration): with k chunks the weights are read k times and "
                    "the decodes ride along in each.", lambda p: _T_w + _c * _L_p),
            Mistake("Each chunk processes only its own share of the prompt; the chunks add up to L_p, not "
                    "k L_p.", lambda p: _k * (_T_w + _c * (_B + _L_p))),
        ],
    ),
    Question(
        "scheduling.chunked_ttft",
        "An engine's iteration over n tokens takes T_w + c n (T_w = {t_w_ms:g} ms, c = {c_us:g} us per token). "
        "Chunked prefill with a budget of {budget} tokens per iteration, {batch} sequences decoding. A "
        "{prompt_len:,}-token prompt arrives. How long from its first chunk to its first token? (ms)",
        answer=lambda p: _chunked(p),
        unit="ms",
        params={**_ITERATION, "prompt_len": 1800, "budget": 512, "batch": 96},
        variants={"t_w": (0.005, 0.007, 0.01), "prompt_len": (1800, 2500, 3000), "batch": (64, 96, 128)},
        derive=_iteration_text,
        mistakes=[
            Mistake("The decodes take B tokens of every iteration's budget: the chunks are C - B tokens, "
                    "so k = ceil(L_p / (C - B)).",
                    lambda p: _chunked(p, k=math.ceil(p["prompt_len"] / p["budget"]))),
            Mistake("Each iteration also processes the B decode tokens (c B per chunk).",
                    lambda p: _chunked(p, riders=False)),
            Mistake("The number of chunks is a whole number: round L_p / (C - B) up.",
                    lambda p: _chunked(p, k=p["prompt_len"] / (p["budget"] - p["batch"]))),
            Mistake("That is prefill-first (one iteration of the whole prompt).",
                    lambda p: p["t_w"] + p["c"] * p["prompt_len"]),
        ],
    ),
    Question(
        "scheduling.itl_p99",
        "Simulate the chapter's continuous-batching setup (Llama-3.1-8B on an H100-SXM5-80GB at the realistic "
        "setting; ContinuousBatching(max_batch_size=256, max_prefill_tokens=8192)) at {rate:g} requests/s "
        "(Poisson), five times: seed s = 0..4 with chat_workload(400, seed=s) and simulate(..., seed=s). What is "
        "the mean over the five runs of the P99 inter-token latency (each run's P99 over all gaps between two "
        "tokens of a request)? (ms)",
        answer=lambda p: _itl(p, 99),
        unit="ms",
        params={"rate": 20.0},
        variants={"rate": (16.0, 20.0, 24.0)},
        mistakes=[
            Mistake("That is the P99 of TPOT, a per-request average: it hides the prefill stalls that the "
                    "inter-token latencies show.", _tpot_p99),
            Mistake("That is the median gap: the question asks for the 99th percentile.", lambda p: _itl(p, 50)),
            Mistake("That is the mean gap: the question asks for the 99th percentile.",
                    lambda p: _itl(p, mean=True)),
            Mistake("That is one run (seed 0): the question asks for the mean of five.",
                    lambda p: _itl(p, 99, seeds=1)),
        ],
    ),
    Question(
        "scheduling.goodput_per_gpu",
        "One prefill GPU plus one decode GPU (1P+1D) keep 90 % SLO attainment up to {disagg:g} requests/s in all; "
        "one aggregated GPU with chunked prefill keeps it up to {aggregated:g} requests/s. What is the ratio of "
        "their goodputs per GPU, disaggregated / aggregated? (a ratio)",
        answer=lambda p: (p["disagg"] / 2) / p["aggregated"],
        params={"disagg": 30.0, "aggregated": 17.0},
        variants={"disagg": (24.0, 30.0, 36.0), "aggregated": (14.0, 17.0, 20.0)},
        mistakes=[
            Mistake("1P+1D uses two GPUs: divide its goodput by 2 before comparing per GPU.",
                    lambda p: p["disagg"] / p["aggregated"]),
            Mistake("That is aggregated / disaggregated: the question asks for the inverse.",
                    lambda p: p["aggregated"] / (p["disagg"] / 2)),
        ],
    ),
    Question(
        "scheduling.little_batch",
        "A replica receives {rate:g} requests/s; each generates {output_len} output tokens at a TPOT of {tpot_ms:g} ms. "
        "How many sequences does it decode at once, on average? (Little's law; sequences)",
        answer=lambda p: p["rate"] * (p["output_len"] - 1) * p["tpot"],
        params={"rate": 12.0, "output_len": 300, "tpot": 0.014},
        variants={"rate": (8.0, 12.0, 16.0), "output_len": (200, 300, 500), "tpot": (0.012, 0.014, 0.02)},
        derive=lambda p: {**p, "tpot_ms": round(p["tpot"] * 1e3, 3)},
        mistakes=[
            Mistake("Each request stays in the batch for (L_o - 1) steps of TPOT each, not for one step.",
                    lambda p: p["rate"] * p["tpot"]),
            Mistake("That is tokens per second. Little's law multiplies the rate by the time each request "
                    "spends decoding, (L_o - 1) TPOT.", lambda p: p["rate"] * p["output_len"]),
        ],
    ),
    Question(
        "scheduling.priority_effect",
        "Chat requests get strict admission priority over batch requests on a GPU whose batch is always "
        "full. Which of the chat class's latencies does that improve? ('TTFT', 'TPOT', 'both' or 'neither')",
        answer=lambda p: "TTFT",
        kind="choice",
        choices=("TTFT", "TPOT", "both", "neither"),
        difficulty="easy",
        mistakes=[
            Mistake("Priority decides who is admitted, not how long a step takes: once admitted, a chat "
                    "sequence shares every step with the batch sequences.", lambda p: "TPOT"),
            Mistake("Only the wait for admission shrinks; the step time, and with it TPOT, is set by the "
                    "batch size and the prefills in it.", lambda p: "both"),
            Mistake("A full batch means a queue: priority lets chat requests skip it, so their wait for the "
                    "first token shrinks.", lambda p: "neither"),
        ],
    ),
    Question(
        "scheduling.tail_percentile",
        "Of 1,000 requests, {n_fast} get their first token after {fast_ms:g} ms and {n_slow} after {slow_ms:g} ms. "
        "What is the P99 TTFT (numpy's default percentile)? (ms)",
        answer=lambda p: float(np.percentile(_ttfts(p), 99)),
        unit="ms",
        params={"fast": 0.040, "slow": 0.600, "n_slow": 15},
        variants={"fast": (0.03, 0.04, 0.05), "slow": (0.5, 0.6, 0.8), "n_slow": (12, 15, 20, 30)},
        derive=lambda p: {**p, "n_fast": 1000 - p["n_slow"], "fast_ms": round(p["fast"] * 1e3, 3),
                          "slow_ms": round(p["slow"] * 1e3, 3)},
        mistakes=[
            Mistake("That is the mean: a few per cent of slow requests barely move it, which is why SLOs are "
                    "percentiles.",
                    lambda p: float(_ttfts(p).mean())),
            Mistake("That is the median. More than 1 % of the requests are slow, so the 99th percentile lands "
                    "among the slow requests.", lambda p: float(np.median(_ttfts(p)))),
        ],
    ),
    Question(
        "scheduling.static_waste",
        "A static batch of {n} requests generates {outputs_text} tokens; it runs "
        "until the longest is done and finished sequences keep their slot. What fraction of the "
        "sequence-steps produce no wanted token (padding)? (0 to 1)",
        answer=_waste,
        params={"outputs": (120, 300, 80, 950, 210, 400, 150, 260)},
        variants={"outputs": ((120, 300, 80, 950, 210, 400, 150, 260), (500, 60, 240, 90, 700, 310, 180, 45),
                              (64, 900, 128, 256, 512, 75, 330, 410), (200, 220, 1500, 90, 130, 640))},
        derive=lambda p: {**p, "n": len(p["outputs"]),
                          "outputs_text": ", ".join(map(str, p["outputs"][:-1])) + f" and {p['outputs'][-1]}"},
        mistakes=[
            Mistake("That is the useful fraction: the question asks for the wasted one.",
                    lambda p: _waste(p, useful=True)),
            Mistake("A static batch runs until its longest output is done: every slot is held for max(L) "
                    "steps, not for the mean.", lambda p: 0.0),
        ],
    ),
]
