"""Checked questions of the chapter "Validation: how good is the model?".

Every expected answer is computed by the library from the question's parameters;
every known mistake is the answer a specific slip produces (the sparse peak, the
PCIe part, prefill left out of a static batch, per-GPU read as total, the memory
read at the wrong context, ratios taken upside down, ...), each with its hint.
Measured values in the parameters carry their source.
"""

from __future__ import annotations

from dataclasses import replace

import sympy as sp

from ..question import Mistake, Question
from ..decode import decode_step_time
from ..hardware import get_accelerator
from ..memory import max_batch_size
from ..prefill import prefill_flops
from ..symbolic import L_o, L_p
from ..units import GB, GiB
from ..models import kv_bytes_per_token
from ..validation import implied_mbu, implied_mfu, static_batch_time

__all__ = ["QUESTIONS"]

_T_w = sp.Symbol("T_w", positive=True)    # weight read of one decode step, seconds
_c = sp.Symbol("c", positive=True)        # KV read per token of context, seconds

_CAUSES = ("the model is wrong", "fewer sequences were running than stated", "measurement noise",
           "the GPU beat its spec sheet")


def _dtypes(p):
    return {"weight_dtype": p["dtype"], "kv_dtype": p["dtype"]}


def _claim_verdict(p, accelerator=None):
    bound = decode_step_time(p["model"], accelerator or p["accelerator"], 1, p["context_len"],
                             weight_dtype=p["dtype"], kv_dtype=p["dtype"], compute_dtype=p["dtype"])
    return "impossible" if p["claimed"] < bound else "possible"


def _mbu(p, accelerator=None, **changes):
    q = {**p, **changes}
    return implied_mbu(q["model"], accelerator or q["accelerator"], q["measured"], batch_size=q["batch_size"],
                       context_len=q["context_len"], **_dtypes(q))


def _sparse(accelerator):
    acc = get_accelerator(accelerator)
    return replace(acc, dense_flops={k: 2 * v for k, v in acc.dense_flops.items()})


def _mfu(p, accelerator=None):
    return implied_mfu(p["model"], accelerator or p["accelerator"], p["measured"], phase="prefill",
                       prompt_len=p["prompt_len"], weight_dtype="fp16", kv_dtype="fp16", compute_dtype="fp16")


def _flops_over_peak(p, flops):
    return flops / (p["measured"] * get_accelerator(p["accelerator"]).peak_flops("fp16"))


def _static(p, part="total"):
    return static_batch_time(p["model"], p["accelerator"], p["batch_size"], p["prompt_len"], p["output_len"],
                             weight_dtype="fp16", kv_dtype="fp16", compute_dtype="fp16", part=part)


def _decode_steps_at(p, context):
    """The L_o - 1 decode steps all taken at one context (a slip)."""
    return (p["output_len"] - 1) * decode_step_time(p["model"], p["accelerator"], p["batch_size"], context,
                                                    weight_dtype="fp16", kv_dtype="fp16", compute_dtype="fp16")


def _throughput(p, seconds):
    return p["batch_size"] * p["output_len"] / seconds


def _fit(p, memory_bytes=None, utilisation=1.0, kv_dtype=None):
    return max_batch_size(p["model"], p["accelerator"], p["context_len"], weight_dtype="fp16", kv_dtype=kv_dtype or "fp16",
                          gpu_memory_utilization=utilisation,
                          memory_bytes=p["memory_gib"] * GiB if memory_bytes is None else memory_bytes)


def _itl(p, **changes):
    q = {**p, **changes}
    return decode_step_time(q["model"], q["accelerator"], q["batch_size"], q["context_len"], weight_dtype="fp16",
                            kv_dtype="fp16", compute_dtype="fp16", mfu=q["mfu"], mbu=q["mbu"])


QUESTIONS = [
    Question(
        id="validation.impossible_claim",
        prompt=("A vendor claims 4.0 ms per output token for Llama-2-7B in fp16 at batch 1 (short context) "
                "on one A100-SXM4-80GB. Is that 'possible' or 'impossible'?"),
        answer=_claim_verdict,
        kind="choice",
        choices=("possible", "impossible"),
        params={"model": "Llama-2-7B", "accelerator": "A100-SXM4-80GB", "dtype": "fp16", "context_len": 128,
                "claimed": 0.004},
        mistakes=[
            Mistake("Every decode step reads all 13.5 GB of fp16 weights: at 2.039 TB/s that takes 6.6 ms, "
                    "so 4.0 ms would need an MBU of 1.65.", lambda p: "possible"),
        ],
        difficulty="easy",
    ),
    Question(
        id="validation.implied_mbu",
        prompt=("{source} a median inter-token latency of {measured_ms:g} ms for {model} in fp16 at batch 1 "
                "on one A100 (take the SXM4-80GB), with about {context_len} tokens in the KV cache. What MBU does "
                "that imply: (weight + KV bytes) / (time x peak bandwidth)? A fraction."),
        answer=lambda p: _mbu(p),
        params={"model": "Llama-2-13B", "accelerator": "A100-SXM4-80GB", "dtype": "fp16", "batch_size": 1,
                "context_len": 64, "measured": 0.017},
        variants={"model": ("Llama-2-13B", "Llama-2-7B"), "context_len": (64, 512, 1024),
                  "measured": (0.015, 0.017, 0.02)},
        derive=lambda p: {**p, "measured_ms": round(p["measured"] * 1e3, 3),
                          "source": ("LMDeploy measured" if (p["model"], p["context_len"], p["measured"])
                                     == ("Llama-2-13B", 64, 0.017) else "Suppose a benchmark measured")},
        mistakes=[
            Mistake("You used the PCIe part's 1.935 TB/s; the question takes the SXM4's 2.039 TB/s.",
                    lambda p: _mbu(p, accelerator="A100-PCIe-80GB")),
            Mistake("Inverted: MBU is achieved / peak bandwidth, at most 1.", lambda p: 1 / _mbu(p)),
            Mistake("fp16 weights are 2 bytes each (and so are fp16 KV entries).",
                    lambda p: _mbu(p, dtype="fp8")),
        ],
    ),
    Question(
        id="validation.implied_mfu",
        prompt=("{source} a first-token latency of {measured_ms:g} ms for one {prompt_len:,}-token prompt of "
                "Llama-2-7B in fp16 on an A100-SXM4-80GB. What MFU does it imply: the prefill's FLOPs "
                "(blocks for every token, LM head once, causal attention) / (time x dense peak)? A fraction."),
        answer=lambda p: _mfu(p),
        params={"model": "Llama-2-7B", "accelerator": "A100-SXM4-80GB", "run": (2048, 0.133)},
        variants={"run": ((2048, 0.133), (1024, 0.07), (2048, 0.16), (3072, 0.21))},
        derive=lambda p: {**p, "prompt_len": p["run"][0], "measured": p["run"][1],
                          "measured_ms": round(p["run"][1] * 1e3, 3),
                          "source": ("TensorRT-LLM (v0.5) measured" if p["run"] == (2048, 0.133)
                                     else "Suppose a benchmark measured")},
        mistakes=[
            Mistake("Half the answer: either the 2:4-sparse headline (twice the dense fp16 peak) or one FLOP "
                    "per multiply-add (it is two).", lambda p: _mfu(p, accelerator=_sparse(p["accelerator"]))),
            Mistake("The LM head runs once per prompt, for the last token, not for every prompt token.",
                    lambda p: _flops_over_peak(p, prefill_flops(p["model"], p["prompt_len"], all_logits=True))),
            Mistake("Count the causal attention FLOPs too (a few per cent of the total here).",
                    lambda p: _flops_over_peak(p, prefill_flops(p["model"], p["prompt_len"], part="linear"))),
            Mistake("Inverted: MFU is achieved / peak, at most 1.", lambda p: 1 / _mfu(p)),
        ],
    ),
    Question(
        id="validation.static_throughput",
        prompt=("A static-batch benchmark runs {batch_size} prompts of {prompt_len} tokens of Llama-2-7B (fp16) together "
                "on one A100-SXM4-80GB and generates {output_len} tokens for each. What output throughput (tokens/s) "
                "is the physical bound (MFU = MBU = 1, hybrid steps)? The run is one prefill of the {batch_size} "
                "prompts, then {steps} decode steps at contexts {prompt_len}, {next}, ..., {last}."),
        answer=lambda p: _throughput(p, _static(p)),
        unit="tok/s",
        params={"model": "Llama-2-7B", "accelerator": "A100-SXM4-80GB", "batch_size": 64, "prompt_len": 128,
                "output_len": 128},
        variants={"batch_size": (32, 64), "prompt_len": (128, 256), "output_len": (128, 256)},
        derive=lambda p: {**p, "steps": p["output_len"] - 1, "next": p["prompt_len"] + 1,
                          "last": p["prompt_len"] + p["output_len"] - 2},
        mistakes=[
            Mistake("A static benchmark's clock includes the prefill of all the prompts, "
                    "not only the decode steps.", lambda p: _throughput(p, _static(p, "decode"))),
            Mistake("The KV cache grows during the run: step j reads L_p + j - 1 tokens per sequence, "
                    "not L_p.", lambda p: _throughput(p, _static(p, "prefill") + _decode_steps_at(
                        p, p["prompt_len"]))),
            Mistake("Each step also reads every sequence's KV cache, not only the weights.",
                    lambda p: _throughput(p, _static(p, "prefill") + _decode_steps_at(p, 0))),
            Mistake("That is requests per second: multiply by the tokens each request generates.",
                    lambda p: p["batch_size"] / _static(p)),
        ],
    ),
    Question(
        id="validation.per_gpu_total",
        prompt=("{source} {per_gpu:,.0f} output tokens/s per GPU for Llama-2-70B (fp8) run "
                "with tensor parallelism {tensor_parallel}. What total throughput does that {tensor_parallel}-GPU "
                "instance deliver, in tokens/s?"),
        answer=lambda p: p["per_gpu"] * p["tensor_parallel"],
        unit="tok/s",
        params={"per_gpu": 2657.0, "tensor_parallel": 2},
        variants={"per_gpu": (1800.0, 2657.0, 3100.0), "tensor_parallel": (2, 4, 8)},
        derive=lambda p: {**p, "source": ("TensorRT-LLM's H100 table reports"
                                          if (p["per_gpu"], p["tensor_parallel"]) == (2657.0, 2)
                                          else "Suppose a benchmark table reports")},
        mistakes=[
            Mistake("That is the per-GPU figure: the instance spans N GPUs, so it delivers N times that.",
                    lambda p: p["per_gpu"]),
            Mistake("Per GPU is total / N, so total is per GPU x N, not / N.",
                    lambda p: p["per_gpu"] / p["tensor_parallel"]),
        ],
        difficulty="easy",
    ),
    Question(
        id="validation.running_batch",
        prompt=("LMDeploy's table has a static run of 64 sequences of 2,048 + 2,048 tokens of Llama-2-7B "
                "(fp16) on one A100-80GB. {where}, using all of the GPU's {memory_gib} GiB (nothing reserved), how "
                "many sequences of {context_len:,} tokens can hold their KV cache at once?"),
        answer=lambda p: _fit(p),
        params={"model": "Llama-2-7B", "gpu": ("A100-SXM4-80GB", 80), "context_len": 4096},
        variants={"gpu": (("A100-SXM4-80GB", 80), ("A100-SXM4-40GB", 40)), "context_len": (2048, 3072, 4096)},
        derive=lambda p: {**p, "accelerator": p["gpu"][0], "memory_gib": p["gpu"][1],
                          "where": "There" if p["gpu"][1] == 80 else f"On an {p['gpu'][0]}"},
        mistakes=[
            Mistake("An A100's memory is counted in GiB (nvidia-smi shows 81,920 MiB for the 80 GB part), "
                    "not in units of 1e9 bytes.",
                    lambda p: _fit(p, memory_bytes=p["memory_gib"] * GB)),
            Mistake("The question uses all the memory; 0.9 is vLLM's default share, not a physical limit.",
                    lambda p: _fit(p, utilisation=0.9)),
            Mistake("The weights share the memory with the KV cache: subtract them first.",
                    lambda p: int(p["memory_gib"] * GiB // (p["context_len"] * kv_bytes_per_token(p["model"], "fp16")))),
            Mistake("Each token stores a key and a value per layer and KV head: 2 x 32 x 32 x 128 x 2 B = "
                    "0.5 MiB in fp16.", lambda p: _fit(p, kv_dtype="fp8")),
        ],
    ),
    Question(
        id="validation.beats_bound_cause",
        prompt=("LMDeploy's table has a static run of 64 sequences of 2,048 + 2,048 tokens of Llama-2-7B (fp16) on "
                "one A100-80GB that reports a median inter-token latency of 47 ms, below its 57 ms physical "
                "bound for 64 sequences. The likeliest explanation? One of: " + ", ".join(
                    repr(c) for c in _CAUSES) + "."),
        answer=lambda p: "fewer sequences were running than stated",
        kind="choice",
        choices=_CAUSES,
        mistakes=[
            Mistake("Check what ran first: 64 x 4,096 tokens of KV cache is 128 GiB, more than the GPU holds, "
                    "so fewer sequences ran at a time, and with the 33 that fit the bound (32.7 ms) holds.",
                    lambda p: "the model is wrong"),
            Mistake("A median over 127 steps and 10 rounds is not 18 % off by noise; look at what ran.",
                    lambda p: "measurement noise"),
            Mistake("The bound uses the peak bandwidth; a GPU does not read memory faster than its peak.",
                    lambda p: "the GPU beat its spec sheet"),
        ],
    ),
    Question(
        id="validation.launch_overhead",
        prompt=("{source} one decode step of a Llama-3.1-8B replica (batch 1, 512 tokens of context) took "
                "{eager_ms:.2f} ms run eagerly from Python and {graph_ms:.2f} ms replayed from a CUDA graph. What "
                "fraction of the eager step is overhead the graph removes? A fraction."),
        answer=lambda p: 1 - p["graph"] / p["eager"],
        params={"times": (0.0180982, 0.00563411)},   # data/device-measurements.csv, 2026-11-29
        variants={"times": ((0.0180982, 0.00563411), (0.012, 0.0045), (0.025, 0.0075), (0.009, 0.0063))},
        derive=lambda p: {**p, "eager": p["times"][0], "graph": p["times"][1],
                          "eager_ms": p["times"][0] * 1e3, "graph_ms": p["times"][1] * 1e3,
                          "source": ("On our H200" if p["times"] == (0.0180982, 0.00563411)
                                     else "Suppose that on some GPU")},
        mistakes=[
            Mistake("That is the ratio eager / graph (how many times slower); the question asks for the "
                    "share of the eager time.", lambda p: p["eager"] / p["graph"]),
            Mistake("That is the share the GPU work keeps (graph / eager); the overhead is the rest.",
                    lambda p: p["graph"] / p["eager"]),
            Mistake("Divide the overhead by the eager time, not by the graph time.",
                    lambda p: (p["eager"] - p["graph"]) / p["graph"]),
        ],
        difficulty="easy",
    ),
    Question(
        id="validation.calibrated_itl",
        prompt=("Suppose an A100 calibration of MBU and MFU alone (no fixed cost per step) gives MBU = 0.72 and "
                "MFU = 0.62. Predict the decode step time "
                "(ITL) of {model} in fp16 at batch {batch_size} with {context_len} tokens of context on an "
                "A100-SXM4-80GB, with the hybrid step model. Answer in ms{measured}."),
        answer=lambda p: _itl(p),
        unit="ms",
        params={"model": "Llama-2-13B", "accelerator": "A100-SXM4-80GB", "batch_size": 16, "context_len": 64,
                "mbu": 0.72, "mfu": 0.62},
        variants={"model": ("Llama-2-13B", "Llama-2-7B"), "batch_size": (8, 16, 32), "context_len": (64, 256, 512)},
        derive=lambda p: {**p, "measured": (" (LMDeploy measured 18 ms)"
                                            if (p["model"], p["batch_size"], p["context_len"]) == ("Llama-2-13B", 16, 64)
                                            else "")},
        mistakes=[
            Mistake("That is the physical bound (efficiencies 1.0): the calibrated step reads at 0.72 x the "
                    "peak bandwidth, so it takes longer.", lambda p: _itl(p, mbu=1.0, mfu=1.0)),
            Mistake("An efficiency below 1 makes the step *longer*: time = bytes / (MBU x bandwidth).",
                    lambda p: _itl(p, mbu=1.0, mfu=1.0) * p["mbu"]),
            Mistake("Swapped: MBU scales the bandwidth (this step is memory-bound), MFU the FLOP/s.",
                    lambda p: _itl(p, mbu=p["mfu"], mfu=p["mbu"])),
        ],
    ),
    Question(
        id="validation.static_decode_sum",
        prompt=("In a static batch, decode step j = 1, ..., L_o - 1 attends to the L_p + j tokens up to its "
                "own (its context) and, below the knee, costs T_w + c x (its context) (T_w: the weight read; "
                "c: the KV read per token of context, all sequences). Derive the total decode time as a sympy "
                "expression in T_w, c, L_p and L_o."),
        answer=lambda p: (L_o - 1) * _T_w + _c * (L_o - 1) * (2 * L_p + L_o) / 2,
        kind="symbolic",
        symbols={"T_w": _T_w, "c": _c, "L_p": L_p, "L_o": L_o},
        mistakes=[
            Mistake("The prefill produces the first token: there are L_o - 1 decode steps, not L_o.",
                    lambda p: L_o * _T_w + _c * L_o * (2 * L_p + L_o + 1) / 2),
            Mistake("The context grows by one token per step: sum c (L_p + j) over j, do not hold it "
                    "at L_p.", lambda p: (L_o - 1) * (_T_w + _c * L_p)),
            Mistake("The weights are read at every step: (L_o - 1) T_w, not once.",
                    lambda p: _T_w + _c * (L_o - 1) * (2 * L_p + L_o) / 2),
            Mistake("Step j attends to its own token too: L_p + j keys (the prompt, the j - 1 tokens generated "
                    "before it and the one it reads), not L_p + j - 1.",
                    lambda p: (L_o - 1) * _T_w + _c * (L_o - 1) * (2 * L_p + L_o - 2) / 2),
        ],
        difficulty="medium",
    ),
]
