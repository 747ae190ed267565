"""Checked questions of the chapter "Prefill: TTFT".

Every expected answer is computed by the library; every known mistake is the
answer a specific slip produces (one FLOP per multiply-add, the sparse
FLOP/s, queueing left out, attention without the causal half, the LM head
charged to every prompt token, KV heads for query heads, ...), each with its hint.
"""

from __future__ import annotations

from dataclasses import replace

from ..question import Mistake, Question
from ..hardware import get_accelerator
from ..models import get_model, parameter_count
from ..prefill import (body_parameter_count, burst_mean_ttft, critical_prompt_length, prefill_flops,
                       prefill_mfu, prefill_time, saturating_chunk_size)
from ..symbolic import F, H, L, P, W, b_w, d_h, eta_f, eta_w, K
from ._variants import GQA_8B_CLASS, named

__all__ = ["QUESTIONS"]


def _attention_factor(p):
    """4 L H d_h of the question's model: attention FLOPs per (query, key) pair."""
    m = get_model(p["model"])
    return 4.0 * m.n_layers * m.n_heads * m.head_dim


def _flops_mistake(p, factor=1.0, square=False, attention=True, all_logits=False):
    lp = p["prompt_len"]
    linear = prefill_flops(p["model"], lp, all_logits=all_logits, part="linear")
    pairs = lp * lp if square else lp * (lp + 1) / 2
    return factor * (linear + (_attention_factor(p) * pairs if attention else 0.0))


def _time(p, **changes):
    q = {**p, **changes}
    return prefill_time(q["model"], q["accelerator"], q["prompt_len"], mfu=q.get("mfu", 1.0),
                        batch_size=q.get("batch_size", 1), cached_len=q.get("cached_len", 0))


def _sparse(accelerator):
    """The accelerator with its datasheet's 2:4-sparse figure taken as its bf16 peak."""
    acc = get_accelerator(accelerator)
    return replace(acc, dense_flops={k: 2 * v for k, v in acc.dense_flops.items()})


def _t_star(p, accelerator=None, **changes):
    q = {**p, **changes}
    return saturating_chunk_size(q["model"], accelerator or q["accelerator"], mfu=q["mfu"], mbu=q["mbu"])


def _l_crit_with(p, params, heads):
    m = get_model(p["model"])
    return params / (m.n_layers * heads * m.head_dim) - 1


QUESTIONS = [
    Question(
        id="prefill.bound_kind",
        prompt=("One 2,048-token prompt of Llama-2-7B (bf16) on an A100: is its prefill limited by "
                "'compute' or by 'memory bandwidth'?"),
        answer=lambda p: "compute",
        kind="choice",
        choices=("compute", "memory bandwidth"),
        mistakes=[
            Mistake("Each weight read from memory is multiplied by all 2,048 tokens: about 2,048 FLOPs "
                    "per 2-byte weight, far above the A100's ridge of 153 FLOP/byte. Only prompts "
                    "shorter than ~160 tokens are bandwidth-bound.",
                    lambda p: "memory bandwidth"),
        ],
    ),
    Question(
        id="prefill.ttft_parts",
        prompt=("What does a request's TTFT consist of? 'prefill', 'queueing + prefill' or "
                "'prefill + one decode step'."),
        answer=lambda p: "queueing + prefill",
        kind="choice",
        choices=("prefill", "queueing + prefill", "prefill + one decode step"),
        mistakes=[
            Mistake("You ignored queueing: TTFT runs from arrival, so the wait for the scheduler (and "
                    "for the prefills ahead) counts too; under load it dominates.",
                    lambda p: "prefill"),
            Mistake("The first token comes out of the prefill's last forward pass: its logits give "
                    "token 1 with no extra decode step (but do not forget queueing).",
                    lambda p: "prefill + one decode step"),
        ],
    ),
    Question(
        id="prefill.flops",
        prompt=("FLOPs of the prefill of one {prompt_len:,}-token prompt of {model}: the weight matmuls "
                "(the LM head only for the last token) plus causal attention. Answer in TFLOP."),
        answer=lambda p: prefill_flops(p["model"], p["prompt_len"]),
        unit="TFLOP",
        params={"model": "Llama-2-7B", "prompt_len": 2048},
        variants={"model": ("Llama-2-7B", "Llama-3.1-8B", "Mistral-7B", "Llama-2-13B"),
                  "prompt_len": (1024, 2048, 4096)},
        mistakes=[
            Mistake("Half the answer: a multiply-add is two FLOPs, so a weight matmul costs 2 FLOPs "
                    "per weight per token and a (query, key) pair 4 d_h per head.",
                    lambda p: _flops_mistake(p, factor=0.5)),
            Mistake("Attention is causal: token i attends to i tokens, L_p (L_p + 1) / 2 pairs, not "
                    "L_p^2.", lambda p: _flops_mistake(p, square=True)),
            Mistake("You left out attention: 4 L H d_h L_p (L_p + 1) / 2 FLOPs, a few per cent of the total here.",
                    lambda p: _flops_mistake(p, attention=False)),
            Mistake("The LM head runs only for the last prompt token (its logits give the first output "
                    "token), not for every prompt token.", lambda p: _flops_mistake(p, all_logits=True)),
        ],
    ),
    Question(
        id="prefill.time_a100",
        prompt=("Physical-bound prefill time (MFU = MBU = 1, hybrid overlap) of one {prompt_len:,}-token prompt of "
                "{model} in bf16 on an {accelerator}. Answer in ms."),
        answer=lambda p: _time(p),
        unit="ms",
        params={"model": "Llama-2-7B", "accelerator": "A100-SXM4-80GB", "prompt_len": 2048},
        variants={"model": ("Llama-2-7B", "Llama-3.1-8B"),
                  "accelerator": ("A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"),
                  "prompt_len": (1024, 2048, 4096)},
        mistakes=[
            Mistake("You used the datasheet's 2:4-sparse headline, twice the dense bf16 peak.",
                    lambda p: prefill_time(p["model"], _sparse(p["accelerator"]), p["prompt_len"])),
            Mistake("That is the time to read the weights once: prefill is compute-bound, its "
                    "matmuls take many times longer than the weight read.",
                    lambda p: prefill_time(p["model"], p["accelerator"], 1)),
            Mistake("Attention is causal: L_p (L_p + 1) / 2 (query, key) pairs, not L_p^2.",
                    lambda p: _time(p) + _attention_factor(p) * (p["prompt_len"] ** 2 / 2
                                                                 - p["prompt_len"] / 2)
                    / get_accelerator(p["accelerator"]).peak_flops("bf16")),
        ],
    ),
    Question(
        id="prefill.queued_ttft",
        prompt=("A server prefills one prompt at a time, first come first served, at MFU = {mfu:g}. Your "
                "{prompt_len:,}-token prompt arrives when {ahead_text} {prompt_len:,}-token prompts are waiting and "
                "nothing is running. Llama-2-7B on an A100-SXM4-80GB: your TTFT, in ms?"),
        answer=lambda p: (p["ahead"] + 1) * _time(p),
        unit="ms",
        params={"model": "Llama-2-7B", "accelerator": "A100-SXM4-80GB", "prompt_len": 2048,
                "mfu": 0.6, "ahead": 3},
        variants={"mfu": (0.5, 0.6, 0.7), "ahead": (2, 3, 4, 6), "prompt_len": (1024, 2048)},
        derive=lambda p: {**p, "ahead_text": {2: "two", 3: "three", 4: "four", 6: "six"}[p["ahead"]]},
        mistakes=[
            Mistake("You ignored queueing: your prefill starts only after the prompts ahead of you.",
                    lambda p: _time(p)),
            Mistake("That is only the wait: add your own prefill, which produces your first token.",
                    lambda p: p["ahead"] * _time(p)),
            Mistake("Apply the MFU: at the physical bound (MFU = 1) every prefill is 1 / MFU times faster "
                    "than this server's.", lambda p: (p["ahead"] + 1) * _time(p, mfu=1.0)),
        ],
    ),
    Question(
        id="prefill.critical_length",
        prompt=("Critical prompt length of {model}: the prompt length at which the prefill's "
                "attention FLOPs equal its weight-matmul FLOPs. Answer in tokens."),
        answer=lambda p: critical_prompt_length(p["model"]),
        unit="tok",
        params={"model": "Llama-3.1-70B"},
        variants={"model": ("Llama-3.1-70B", "Qwen2.5-72B", "Llama-3.1-8B", "Qwen2.5-7B")},
        mistakes=[
            Mistake("Half the answer comes from L_p^2 attention pairs: causal attention has "
                    "L_p (L_p + 1) / 2, half as many.",
                    lambda p: body_parameter_count(p["model"])
                    / (2 * _attention_factor(p) / 4)),
            Mistake("Every query head computes its own scores: use the H query heads, not the K "
                    "KV heads (GQA shares K and V, not the work).",
                    lambda p: _l_crit_with(p, body_parameter_count(p["model"]),
                                           get_model(p["model"]).n_kv_heads)),
            Mistake("Use the weights each prompt token is multiplied by: the embedding is a look-up and "
                    "the LM head runs once per prompt, so leave both out of P.",
                    lambda p: _l_crit_with(p, parameter_count(p["model"]),
                                           get_model(p["model"]).n_heads)),
        ],
    ),
    Question(
        id="prefill.critical_length_formula",
        prompt=("Derive the critical prompt length: equate the weight-matmul FLOPs 2 P L_p (P: the "
                "weights each prompt token is multiplied by; ignore the LM head) with the causal "
                "attention FLOPs, and solve for L_p. A sympy expression in P, L, H, d_h."),
        answer=lambda p: P / (L * H * d_h) - 1,
        kind="symbolic",
        symbols={"P": P, "L": L, "H": H, "d_h": d_h, "K": K},
        mistakes=[
            Mistake("You used L_p^2 pairs: causal attention has L_p (L_p + 1) / 2, which doubles the "
                    "answer and adds the -1.", lambda p: P / (2 * L * H * d_h)),
            Mistake("Almost: token i attends to i tokens including itself, so there are "
                    "L_p (L_p + 1) / 2 pairs, not L_p^2 / 2; that gives the -1.",
                    lambda p: P / (L * H * d_h)),
            Mistake("A weight matmul costs 2 FLOPs per weight per token (multiply and add): "
                    "2 P L_p, not P L_p.", lambda p: P / (2 * L * H * d_h) - 1),
            Mistake("Attention work scales with the query heads H, not the KV heads K.",
                    lambda p: P / (L * K * d_h) - 1),
        ],
    ),
    Question(
        id="prefill.saturating_chunk",
        prompt=("{model} in bf16 on an {gpu} whose matmuls reach MFU = {mfu:g} and whose weight "
                "stream reaches MBU = {mbu:g}. How many tokens must one prefill step (one sequence) hold "
                "before its weight matmuls turn compute-bound? Answer in tokens."),
        answer=lambda p: _t_star(p),
        unit="tok",
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "mfu": 0.6, "mbu": 0.8},
        variants={"model": GQA_8B_CLASS, "accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB", "A100-SXM4-80GB"),
                  "mfu": (0.5, 0.6, 0.7), "mbu": (0.75, 0.8, 0.9)},
        derive=named(gpu="accelerator"),
        mistakes=[
            Mistake("That is the peak-spec value: scale the FLOP/s by MFU and the bandwidth by MBU.",
                    lambda p: _t_star(p, mfu=1.0, mbu=1.0)),
            Mistake("Inverted: MFU scales the FLOP/s (numerator), MBU the bandwidth (denominator).",
                    lambda p: _t_star(p, mfu=p["mbu"], mbu=p["mfu"])),
            Mistake("You used the datasheet's 2:4-sparse headline: the dense bf16 peak is half of it.",
                    lambda p: _t_star(p, accelerator=_sparse(p["accelerator"]))),
        ],
    ),
    Question(
        id="prefill.saturating_chunk_formula",
        prompt=("Derive the chunk size T* at which a prefill step's weight matmuls turn compute-bound: "
                "the step reads P weights of b_w bytes at W x eta_W bytes/s and multiplies them by T "
                "tokens at F x eta_F FLOP/s (ignore the LM head). A sympy expression in b_w, F, W, "
                "eta_F, eta_W."),
        answer=lambda p: b_w * F * eta_f / (2 * W * eta_w),
        kind="symbolic",
        symbols={"b_w": b_w, "F": F, "W": W, "eta_F": eta_f, "eta_W": eta_w, "P": P},
        mistakes=[
            Mistake("A multiply-add is 2 FLOPs: the step does 2 P T FLOPs, so T* has a 2 in the "
                    "denominator.", lambda p: b_w * F * eta_f / (W * eta_w)),
            Mistake("The bytes per weight matter: the step reads P b_w bytes, so int4 weights "
                    "saturate at a quarter of the bf16 chunk.", lambda p: F * eta_f / (2 * W * eta_w)),
            Mistake("Inverted efficiencies: eta_F multiplies the FLOP/s, eta_W the bandwidth.",
                    lambda p: b_w * F * eta_w / (2 * W * eta_f)),
        ],
    ),
    Question(
        id="prefill.prefix_cache",
        prompt=("A {total:,}-token prompt to {model} (bf16, one {gpu}) starts with a {cached_len:,}-token "
                "system prompt whose KV cache is already stored (prefix caching). Physical-bound prefill "
                "time of the rest, in ms."),
        answer=lambda p: _time(p),
        unit="ms",
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "split": (1024, 3072)},
        variants={"model": GQA_8B_CLASS, "accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB", "A100-SXM4-80GB"),
                  "split": ((1024, 3072), (2048, 2048), (512, 3584), (1024, 7168))},
        derive=named(lambda p: {**p, "prompt_len": p["split"][0], "cached_len": p["split"][1],
                                "total": sum(p["split"])}, gpu="accelerator"),
        mistakes=[
            Mistake("That is the time without the cache: only the new tokens need the weight "
                    "matmuls.", lambda p: _time(p, prompt_len=p["prompt_len"] + p["cached_len"],
                                                cached_len=0)),
            Mistake("The new tokens still attend to the cached ones: pass cached_len, "
                    "the attention term is L_p L_c + L_p (L_p + 1) / 2 pairs.",
                    lambda p: _time(p, cached_len=0)),
        ],
    ),
    Question(
        id="prefill.implied_mfu",
        prompt=("{source} a mean first-token latency of {measured_ms:g} ms for one {prompt_len:,}-token prompt of "
                "Llama-2-7B in fp16 on an A100-80G. What MFU does that imply (prefill FLOPs / (time x "
                "dense peak))? A fraction between 0 and 1."),
        answer=lambda p: prefill_mfu(p["model"], p["accelerator"], p["prompt_len"], p["measured"],
                                     compute_dtype="fp16"),
        params={"model": "Llama-2-7B", "accelerator": "A100-SXM4-80GB", "prompt_len": 2048,
                "measured": 0.139},
        variants={"measured": (0.12, 0.139, 0.16, 0.2), "prompt_len": (2048, 3072)},
        derive=lambda p: {**p, "measured_ms": round(p["measured"] * 1e3, 3),
                          "source": ("LMDeploy measured" if (p["measured"], p["prompt_len"]) == (0.139, 2048)
                                     else "Suppose a benchmark measured")},
        mistakes=[
            Mistake("Half the answer: you divided by the 2:4-sparse headline; use the dense fp16 peak.",
                    lambda p: prefill_mfu(p["model"], _sparse(p["accelerator"]), p["prompt_len"],
                                          p["measured"], compute_dtype="fp16")),
            Mistake("Inverted: MFU is achieved / peak, at most 1 (measured time is the larger).",
                    lambda p: 1 / prefill_mfu(p["model"], p["accelerator"], p["prompt_len"],
                                              p["measured"], compute_dtype="fp16")),
            Mistake("Count the attention FLOPs too (a few per cent of the total here).",
                    lambda p: prefill_flops(p["model"], p["prompt_len"], part="linear")
                    / (p["measured"] * get_accelerator(p["accelerator"]).peak_flops("fp16"))),
        ],
    ),
    Question(
        id="prefill.burst_batched",
        prompt=("{n_text} {prompt_len:,}-token prompts to {model} arrive together at an idle {accelerator}, which "
                "prefills them as one batch. Physical-bound mean TTFT, in ms?"),
        answer=lambda p: burst_mean_ttft(p["model"], p["accelerator"], p["prompt_len"], p["n"]),
        unit="ms",
        params={"model": "Llama-2-7B", "accelerator": "A100-SXM4-80GB", "prompt_len": 2048, "n": 8},
        variants={"model": ("Llama-2-7B", "Llama-3.1-8B"), "accelerator": ("A100-SXM4-80GB", "H100-SXM5-80GB"),
                  "prompt_len": (1024, 2048), "n": (2, 4, 8, 16)},
        derive=lambda p: {**p, "n_text": {2: "Two", 4: "Four", 8: "Eight", 16: "Sixteen"}[p["n"]]},
        mistakes=[
            Mistake("That is one prompt's prefill: in a batch every first token waits for the whole "
                    "batch, and prefill is compute-bound, so n prompts take about n times as long.",
                    lambda p: _time(p)),
            Mistake("That is the mean for one-at-a-time prefills, (n + 1) / 2 x T_1; batched, every "
                    "request waits for all n.",
                    lambda p: burst_mean_ttft(p["model"], p["accelerator"], p["prompt_len"], p["n"],
                                              schedule="sequential")),
        ],
    ),
]
