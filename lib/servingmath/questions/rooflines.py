"""Checked questions of the chapter "Rooflines: why decoding is bandwidth-bound".

Every expected answer is computed by the library; every known mistake is the
answer a specific slip produces (sparse FLOP/s, bits for bytes, the two FLOPs
of a multiply-add forgotten, query heads for KV heads, ...), each with its hint.
"""

from __future__ import annotations

from ..question import Mistake, Question
from ..datatypes import bytes_per_element
from ..decode import decode_step_parts
from ..hardware import get_accelerator
from ..models import get_model, kv_bytes_per_token, weight_bytes
from ..roofline import (critical_batch_size, decode_attention_intensity, matmul_flops, matmul_intensity,
                        prefill_attention_intensity, ridge_point, time_lower_bound,
                        time_upper_bound)
from ..symbolic import B, D, F, F_ffn, H, K, W, b_a, b_kv, b_w
from ._variants import GPUS_BIG, GPUS_FP8, GQA_8B_CLASS, GQA_8B_LARGE_VOCAB, named

__all__ = ["QUESTIONS"]


def _ridge(p, dtype=None, sparse=1.0):
    acc = get_accelerator(p["accelerator"])
    return sparse * acc.peak_flops(dtype or p["dtype"]) / acc.memory_bandwidth


def _b_crit(p, **changes):
    q = {**p, **changes}
    return critical_batch_size(q["accelerator"], weight_dtype=q["weight_dtype"], compute_dtype=q["compute_dtype"],
                               mfu=q.get("mfu", 1.0), mbu=q.get("mbu", 1.0))


def _step(p):
    """(FLOPs, bytes) of one decode step in the library's decode model."""
    acc = get_accelerator(p["accelerator"])
    parts = decode_step_parts(p["model"], acc, p["batch_size"], p["context_len"])
    flops = (parts["linear_compute"] + parts["attention_compute"]) * acc.peak_flops("bf16")
    bytes_moved = (parts["weight_memory"] + parts["kv_memory"]) * acc.memory_bandwidth
    return flops, bytes_moved


def _step_bytes_with_query_heads(p):
    m = get_model(p["model"])
    kv_mha = 2.0 * m.n_layers * m.n_heads * m.head_dim * 2
    return weight_bytes(m) + p["batch_size"] * p["context_len"] * kv_mha


def _step_bytes_with_stored_weights(p):
    m = get_model(p["model"])
    return weight_bytes(m) + p["batch_size"] * p["context_len"] * kv_bytes_per_token(m)


def _prefill(p, qo=True, causal=True, mha=False):
    """Prefill attention intensity with one of the known slips."""
    m = get_model(p["model"])
    lp = p["prompt_len"]
    h = m.n_heads
    k = h if mha else m.n_kv_heads
    pairs = lp * (lp + 1) / 2 if causal else lp * lp
    flops = 4.0 * h * m.head_dim * pairs
    bytes_moved = 2.0 * k * m.head_dim * lp * 2 + (2.0 * h * m.head_dim * lp * 2 if qo else 0.0)
    return flops / bytes_moved


_b_crit_exact = F * D * F_ffn * b_w / (2 * W * D * F_ffn - F * (D + F_ffn) * b_a)

QUESTIONS = [
    Question(
        id="rooflines.ridge_h100",
        prompt="Ridge point of the {gpu} for dense bf16 math, in FLOP/byte.",
        answer=lambda p: ridge_point(p["accelerator"], p["dtype"]),
        unit="FLOP/B",
        params={"accelerator": "H100-SXM5-80GB", "dtype": "bf16"},
        variants={"accelerator": GPUS_BIG + ("L40S",)},
        derive=named(gpu="accelerator"),
        mistakes=[
            Mistake("Twice the answer: that is the datasheet's 2:4-sparse bf16 figure (on Hopper also "
                    "the dense fp8 peak). Rooflines use the dense bf16 peak.",
                    lambda p: _ridge(p, sparse=2.0)),
            Mistake("A thousand times too large: the bandwidth is in TB/s, 1e12 bytes/s, "
                    "not 1e9.", lambda p: _ridge(p) * 1e3),
        ],
    ),
    Question(
        id="rooflines.matmul_intensity",
        prompt=("Arithmetic intensity of [B, D] x [D, F] with B = {batch}, D = {d_in}, F = {d_out} "
                "({layer}), bf16 weights and activations, counting the "
                "compulsory traffic (weights and input read once, output written once), in FLOP/byte."),
        answer=lambda p: matmul_intensity(p["batch"], p["d_in"], p["d_out"]),
        unit="FLOP/B",
        params={"batch": 256, "shape": (4096, 14336, "Llama-3.1-8B's FFN up-projection")},
        variants={"batch": (64, 128, 256, 512),
                  "shape": ((4096, 14336, "Llama-3.1-8B's FFN up-projection"),
                            (8192, 28672, "Llama-3.1-70B's FFN up-projection"),
                            (4096, 11008, "Llama-2-7B's FFN up-projection"),
                            (5120, 13824, "Llama-2-13B's FFN up-projection"))},
        derive=lambda p: {**p, "d_in": p["shape"][0], "d_out": p["shape"][1], "layer": p["shape"][2]},
        mistakes=[
            Mistake("Half the answer: a multiply-add is two FLOPs, so the matmul does 2 B D F FLOPs.",
                    lambda p: matmul_intensity(p["batch"], p["d_in"], p["d_out"]) / 2),
            Mistake("You counted only the weights: the B x D input read and the B x F output written "
                    "add B (D + F) b_a bytes, several per cent more at this batch.",
                    lambda p: matmul_flops(p["batch"], p["d_in"], p["d_out"])
                    / (p["d_in"] * p["d_out"] * 2.0)),
            Mistake("An eighth of the answer: you counted bits, not bytes (bf16 is 2 bytes).",
                    lambda p: matmul_intensity(p["batch"], p["d_in"], p["d_out"]) / 8),
        ],
    ),
    Question(
        id="rooflines.critical_batch_int4",
        prompt=("Critical batch size (large-matrix limit, peak specs) of a weight matmul on the {gpu} "
                "with int4 weights and bf16 math (weight-only quantisation)."),
        answer=lambda p: _b_crit(p),
        params={"accelerator": "H100-SXM5-80GB", "weight_dtype": "int4", "compute_dtype": "bf16"},
        variants={"accelerator": GPUS_BIG + ("L40S",)},
        derive=named(gpu="accelerator"),
        mistakes=[
            Mistake("That is the bf16-weight value: int4 weights are 0.5 bytes each, so the matmul "
                    "reaches the ridge at a quarter of the batch.",
                    lambda p: _b_crit(p, weight_dtype="bf16")),
            Mistake("You used 4 bytes per weight: int4 is 4 bits, 0.5 bytes.",
                    lambda p: _b_crit(p) * 4 / bytes_per_element("int4")),
            Mistake("You dropped the 2 FLOPs of a multiply-add: the intensity is 2 B / b_w, "
                    "so B_crit = R b_w / 2.",
                    lambda p: _b_crit(p) * 2),
        ],
    ),
    Question(
        id="rooflines.critical_batch_fp8",
        prompt=("Critical batch size (large-matrix limit, peak specs) on the {gpu} with fp8 weights "
                "and fp8 math (fp8 activations)."),
        answer=lambda p: _b_crit(p),
        params={"accelerator": "H100-SXM5-80GB", "weight_dtype": "fp8", "compute_dtype": "fp8"},
        variants={"accelerator": GPUS_FP8},
        derive=named(gpu="accelerator"),
        mistakes=[
            Mistake("Twice the answer. Either you used B = R b_w / b_a with 1-byte activations (the 2 "
                    "in R b_w / 2 is the two FLOPs of a multiply-add, not the activation's bytes; "
                    "activations drop out for large matrices), or the sparse fp8 peak.",
                    lambda p: _b_crit(p) * 2),
            Mistake("You kept the bf16 peak: with fp8 math the dense peak doubles, which cancels "
                    "the halved bytes per weight.",
                    lambda p: _b_crit(p, compute_dtype="bf16")),
        ],
    ),
    Question(
        id="rooflines.critical_batch_realistic",
        prompt=("Critical batch size (large-matrix limit) on the {accelerator} in bf16 when matmuls "
                "reach MFU = {mfu:g} and the weight stream reaches MBU = {mbu:g}."),
        answer=lambda p: _b_crit(p),
        params={"accelerator": "A100-SXM4-80GB", "weight_dtype": "bf16", "compute_dtype": "bf16",
                "mfu": 0.5, "mbu": 0.8},
        variants={"accelerator": ("A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"), "mfu": (0.4, 0.5, 0.6),
                  "mbu": (0.75, 0.8, 0.9)},
        mistakes=[
            Mistake("That is the peak-spec value: apply the efficiencies, R = (F x MFU) / (W x MBU).",
                    lambda p: _b_crit(p, mfu=1.0, mbu=1.0)),
            Mistake("Inverted: MFU scales the FLOP/s (numerator), MBU the bandwidth (denominator).",
                    lambda p: _b_crit(p, mfu=p["mbu"], mbu=p["mfu"])),
            Mistake("You multiplied by MBU: a slower weight stream raises the ridge, so divide by it.",
                    lambda p: _b_crit(p, mfu=1.0, mbu=1.0) * p["mfu"] * p["mbu"]),
        ],
    ),
    Question(
        id="rooflines.b_crit_exact",
        prompt=("Exact batch size B at which [B, D] x [D, F_ffn] (b_w bytes per weight, b_a per "
                "activation, input read and output written once) reaches the ridge F / W. "
                "Give a sympy expression in F, W, D, F_ffn, b_w, b_a."),
        answer=lambda p: _b_crit_exact,
        kind="symbolic",
        symbols={"F": F, "W": W, "D": D, "F_ffn": F_ffn, "b_w": b_w, "b_a": b_a},
        mistakes=[
            Mistake("You dropped the 2 FLOPs of a multiply-add: the matmul does 2 B D F_ffn FLOPs.",
                    lambda p: F * D * F_ffn * b_w / (W * D * F_ffn - F * (D + F_ffn) * b_a)),
            Mistake("That is the large-matrix limit; the exact form keeps the activation traffic "
                    "B (D + F_ffn) b_a.", lambda p: F * b_w / (2 * W)),
            Mistake("R b_w / b_a is the popular shorthand; it is neither exact nor the limit "
                    "(the 2 in the limit R b_w / 2 is FLOPs per multiply-add).",
                    lambda p: F * b_w / (W * b_a)),
            Mistake("You left out writing the output, B F_ffn b_a bytes.",
                    lambda p: F * D * F_ffn * b_w / (2 * W * D * F_ffn - F * D * b_a)),
        ],
    ),
    Question(
        id="rooflines.decode_attention_symbolic",
        prompt=("Long-context arithmetic intensity of attention in one decode step (per sequence, per "
                "layer; FLOPs over KV bytes read), as a sympy expression in H, K and b_kv."),
        answer=lambda p: 2 * H / (K * b_kv),
        kind="symbolic",
        symbols={"H": H, "K": K, "b_kv": b_kv, "B": B},
        mistakes=[
            Mistake("Half: attention does two products (q k^T and p v) of 2 H d_h S FLOPs each, "
                    "4 H d_h S in all.", lambda p: H / (K * b_kv)),
            Mistake("Twice the answer: the cache holds keys and values, 2 K d_h S b_kv bytes.",
                    lambda p: 4 * H / (K * b_kv)),
            Mistake("You used query heads for the cache: it holds K KV heads, each shared by "
                    "G = H / K query heads.", lambda p: 2 / b_kv),
            Mistake("The batch size cancels: every sequence reads its own cache, so the bytes grow "
                    "with B as fast as the FLOPs.", lambda p: 2 * H * B / (K * b_kv)),
        ],
    ),
    Question(
        id="rooflines.prefill_attention",
        prompt=("Arithmetic intensity of causal attention over a {prompt_len}-token prompt of {model}, "
                "bf16 everywhere, with Q, K, V read once and O written once, in FLOP/byte."),
        answer=lambda p: prefill_attention_intensity(p["model"], p["prompt_len"]),
        unit="FLOP/B",
        params={"model": "Llama-3.1-8B", "prompt_len": 1024},
        variants={"model": GQA_8B_CLASS + ("Llama-3.1-70B",), "prompt_len": (512, 1024, 2048, 4096)},
        mistakes=[
            Mistake("You counted only the K and V traffic: Q is read and O written too "
                    "(H d_h b_a bytes per token each), which with GQA outweighs the cache.",
                    lambda p: _prefill(p, qo=False)),
            Mistake("You left out the causal mask: token i attends to i tokens, "
                    "L_p (L_p + 1) / 2 pairs in all.",
                    lambda p: _prefill(p, causal=False)),
            Mistake("You used the query heads as KV heads: the model has fewer KV heads than query heads (GQA).",
                    lambda p: _prefill(p, mha=True)),
        ],
    ),
    Question(
        id="rooflines.attention_bound",
        prompt=("Llama-3.1-70B decodes on an H100 SXM at batch 256 with 8k tokens of context each and an "
                "fp8 KV cache. Is its attention 'compute-bound' or 'memory-bound'?"),
        answer=lambda p: ("compute-bound" if decode_attention_intensity(p["model"], kv_dtype=p["kv_dtype"])
                          > ridge_point(p["accelerator"]) else "memory-bound"),
        kind="choice",
        choices=("compute-bound", "memory-bound"),
        params={"model": "Llama-3.1-70B", "kv_dtype": "fp8", "accelerator": "H100-SXM5-80GB"},
        mistakes=[
            Mistake("Batching does not raise attention's intensity: each sequence reads its own KV "
                    "cache, so it stays at 2 G / b_kv FLOP/byte, far below the ridge.",
                    lambda p: "compute-bound"),
        ],
    ),
    Question(
        id="rooflines.decode_lower_bound",
        prompt=("Lower bound (perfect overlap, peak specs) on one decode step of {model} on the "
                "{gpu}: batch {batch_size}, {context_len} tokens of context each, bf16 weights and KV cache, in ms."),
        answer=lambda p: time_lower_bound(*_step(p), p["accelerator"]),
        unit="ms",
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "batch_size": 64,
                "context_len": 2048},
        variants={"model": GQA_8B_LARGE_VOCAB, "accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB", "A100-SXM4-80GB"),
                  "batch_size": (32, 64, 128), "context_len": (1024, 2048, 4096)},
        derive=named(gpu="accelerator"),
        mistakes=[
            Mistake("You read only the weights: every sequence also reads its own KV cache each step, "
                    "B x S x k bytes, here as much as the weights or more.",
                    lambda p: weight_bytes(p["model"]) / get_accelerator(p["accelerator"]).memory_bandwidth),
            Mistake("That is the upper bound (no overlap): the lower bound is the max of compute "
                    "and memory time, not their sum.",
                    lambda p: time_upper_bound(*_step(p), p["accelerator"])),
            Mistake("That is the compute time alone: at this batch the step is memory-bound.",
                    lambda p: _step(p)[0] / get_accelerator(p["accelerator"]).peak_flops("bf16")),
            Mistake("You sized the KV cache with the query heads: the model stores fewer KV heads (GQA).",
                    lambda p: _step_bytes_with_query_heads(p)
                    / get_accelerator(p["accelerator"]).memory_bandwidth),
            Mistake("You read every stored weight, P b_w: a step gathers one row of the input-embedding "
                    "table per sequence and never streams the table, so it reads (P - V D + B D) b_w.",
                    lambda p: _step_bytes_with_stored_weights(p)
                    / get_accelerator(p["accelerator"]).memory_bandwidth),
        ],
    ),
]

