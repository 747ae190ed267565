"""Questions of chapter 04, "Decode: TPOT(B), throughput and the knee".

Every expected answer is computed by the library from the question's
parameters; every known mistake is computed the same way (usually the library
called with the mistaken input), so a variant with other parameters keeps its
hints.
"""

from __future__ import annotations

import math

import sympy as sp

from ..question import Mistake, Question
from ..decode import (
    critical_context_length,
    decode_step_parts,
    decode_step_time,
    decode_throughput,
    knee_batch_size,
    matmul_parameter_count,
    max_decode_throughput,
)
from ..hardware import get_accelerator
from ..memory import max_batch_size
from ..models import get_model, kv_bytes_per_token, weight_bytes
from ..symbolic import F, K, L, P, S, W, H, b_kv, b_w, d_h
from ..units import GiB
from ._variants import GQA_8B_CLASS, named

_SYMBOLS = {"P": P, "b_w": b_w, "F": F, "W": W, "S": S, "L": L, "K": K, "H": H, "d_h": d_h,
            "b_kv": b_kv}


def _tpot_parts(p, kv_factor=1.0, batch=None, context=None, **kw):
    """Hybrid TPOT rebuilt from its parts, with the KV read scaled by ``kv_factor``."""
    parts = decode_step_parts(p["model"], p["accelerator"], batch or p["batch"],
                              p["context"] if context is None else context, **kw)
    return (max(parts["weight_memory"], parts["linear_compute"])
            + max(kv_factor * parts["kv_memory"], parts["attention_compute"]))


def _memory_wall(p, capacity=None, reserve=None, weights=True):
    """Largest batch whose weights and KV caches fit in ``reserve`` x capacity (with the mistakes)."""
    capacity = get_accelerator(p["accelerator"]).memory_bytes if capacity is None else capacity
    reserve = p["reserve"] if reserve is None else reserve
    free = reserve * capacity - (weight_bytes(p["model"]) if weights else 0.0)
    return math.floor(free / (p["context"] * kv_bytes_per_token(p["model"])))


def _kv_time_per_sequence(p, **kw):
    parts = decode_step_parts(p["model"], p["accelerator"], 1, p["context"], **kw)
    return parts["kv_memory"]


def _knee_roofline_without_kv(p):
    parts = decode_step_parts(p["model"], p["accelerator"], 1, p["context"])
    return parts["weight_memory"] / (parts["linear_compute"] + parts["attention_compute"])


def _knee_roofline_kv_on_both_sides(p):
    parts = decode_step_parts(p["model"], p["accelerator"], 1, p["context"])
    return parts["weight_memory"] / (parts["linear_compute"] + parts["attention_compute"]
                                     + parts["kv_memory"])


def _s_crit(p, kv_scale=1.0, flop_scale=1.0):
    """Hybrid S_crit = 2 P W / (F k), with the mistaken factors applied."""
    acc = get_accelerator(p["accelerator"])
    k = kv_bytes_per_token(p["model"]) * kv_scale
    return (2 * flop_scale * matmul_parameter_count(p["model"]) * acc.memory_bandwidth
            / (acc.peak_flops("bf16") * k))


def _mbu(p, bytes_scale=1.0, invert=False):
    acc = get_accelerator(p["accelerator"])
    moved = (weight_bytes(p["model"]) + p["context"] * kv_bytes_per_token(p["model"])) * bytes_scale
    mbu = moved / p["itl"] / acc.memory_bandwidth
    return 1 / mbu if invert else mbu


def _which_limit(p):
    wall = max_batch_size(p["model"], p["accelerator"], p["context"], gpu_memory_utilization=p["reserve"])
    knee = knee_batch_size(p["model"], p["accelerator"], p["context"])
    return "memory capacity" if wall < knee else "compute"


# the derivation questions: roofline model, weights P b_w bytes, KV 2 L K d_h b_kv bytes per token,
# compute 2 P B FLOPs per step (attention FLOPs neglected), physical bound
def _knee_expr(kv=2 * L * K * d_h * b_kv, flops=2):
    return P * b_w / W / (flops * P / F - S * kv / W)


def _s_crit_expr(kv=2 * L * K * d_h * b_kv, flops=2):
    return sp.solve(sp.Eq(flops * P / F, S * kv / W), S)[0]


QUESTIONS = [
    Question(
        "decode.tpot_long_context_batch_one",
        "TPOT of {model} (bf16) on one {accelerator} at batch 1, with {context} tokens in the KV "
        "cache, at the physical bound (hybrid model). (ms)",
        difficulty="easy",
        answer=lambda p: decode_step_time(p["model"], p["accelerator"], 1, p["context"]),
        unit="ms",
        params={"model": "Llama-2-13B", "accelerator": "A100-SXM4-80GB", "context": 4000},
        variants={"model": ("Llama-2-13B", "Llama-2-7B"),
                  "accelerator": ("A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"), "context": (2000, 3000, 4000)},
        mistakes=[
            Mistake("You left out the KV-cache read: one step also reads the sequence's cached "
                    "tokens (k bytes each).",
                    lambda p: decode_step_time(p["model"], p["accelerator"], 1, 0)),
            Mistake("You divided FLOPs by FLOP/s: at batch 1 the step is bound by the bytes it reads, "
                    "not by compute.",
                    lambda p: 2 * matmul_parameter_count(p["model"])
                    / get_accelerator(p["accelerator"]).peak_flops("bf16")),
            Mistake("You counted one byte per weight (fp8); the model is stored in bf16, 2 bytes.",
                    lambda p: decode_step_time(p["model"], p["accelerator"], 1, p["context"],
                                               weight_dtype="fp8")),
        ],
    ),
    Question(
        "decode.tpot_batch_64",
        "TPOT of {model} (bf16) on one {accelerator} with {batch} sequences decoding together, "
        "each with {context} tokens in its KV cache, at the physical bound (hybrid model). (ms)",
        difficulty="medium",
        answer=lambda p: decode_step_time(p["model"], p["accelerator"], p["batch"], p["context"]),
        unit="ms",
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "batch": 64, "context": 2048},
        variants={"model": GQA_8B_CLASS, "accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB", "A100-SXM4-80GB"),
                  "batch": (32, 64, 128), "context": (1024, 2048, 4096)},
        mistakes=[
            Mistake("You forgot the KV term: every running sequence's cache is read at every step.",
                    lambda p: decode_step_time(p["model"], p["accelerator"], p["batch"], 0)),
            Mistake("You read one sequence's KV cache; each sequence of the batch reads its own.",
                    lambda p: decode_step_time(p["model"], p["accelerator"], 1, p["context"])),
            Mistake("TPOT does not grow linearly with the batch: the weights are read once per step "
                    "for the whole batch, not once per sequence.",
                    lambda p: p["batch"] * decode_step_time(p["model"], p["accelerator"], 1,
                                                            p["context"])),
            Mistake("Your KV read is half of what it should be: each token stores a key AND a value "
                    "vector per KV head and layer.",
                    lambda p: _tpot_parts(p, kv_factor=0.5)),
        ],
    ),
    Question(
        "decode.throughput_tensor_parallel",
        "{model} (bf16) runs on {tp} {accelerator} with tensor parallelism {tp}. {batch} sequences "
        "decode together with {context} cached tokens each. What output throughput does the whole "
        "{tp}-GPU instance reach at the physical bound (hybrid model, all-reduce latency 0)? (tok/s)",
        difficulty="medium",
        answer=lambda p: decode_throughput(p["model"], p["accelerator"], p["batch"], p["context"],
                                           tensor_parallel=p["tp"]),
        unit="tok/s",
        params={"model": "Llama-3.1-70B", "accelerator": "H100-SXM5-80GB", "batch": 128,
                "context": 1024, "tp": 4},
        variants={"model": ("Llama-3.1-70B", "Qwen2.5-72B"), "accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB"),
                  "batch": (64, 128, 256), "context": (1024, 2048), "tp": (4, 8)},
        mistakes=[
            Mistake("That is the throughput per GPU; the question asks for the whole instance "
                    "(multiply by the N GPUs).",
                    lambda p: decode_throughput(p["model"], p["accelerator"], p["batch"], p["context"],
                                                tensor_parallel=p["tp"]) / p["tp"]),
            Mistake("That is one sequence's speed, 1 / TPOT; each step emits one token for each "
                    "sequence of the batch.",
                    lambda p: 1 / decode_step_time(p["model"], p["accelerator"], p["batch"],
                                                   p["context"], tensor_parallel=p["tp"])),
            Mistake("You left out the all-reduces: with tensor parallelism each layer ends its "
                    "attention and its FFN with one (parallelism.tensor_parallel_communication_time).",
                    lambda p: p["batch"] / (decode_step_time(p["model"], p["accelerator"], p["batch"],
                                                             p["context"], tensor_parallel=p["tp"])
                                            - decode_step_parts(p["model"], p["accelerator"],
                                                                p["batch"], p["context"],
                                                                tensor_parallel=p["tp"])
                                            ["communication"])),
        ],
    ),
    Question(
        "decode.knee_with_efficiencies",
        "Knee batch size B* (hybrid model: the weight matmuls turn compute-bound) of {model} "
        "in bf16 on one {accelerator} with MFU {mfu:g} and MBU {mbu:g}. (a number of sequences, "
        "not rounded)",
        difficulty="easy",
        answer=lambda p: knee_batch_size(p["model"], p["accelerator"], 0, mfu=p["mfu"], mbu=p["mbu"]),
        params={"model": "Llama-2-7B", "accelerator": "A100-SXM4-80GB", "mfu": 0.5, "mbu": 0.8},
        variants={"model": ("Llama-2-7B", "Llama-3.1-8B", "Llama-2-13B"),
                  "accelerator": ("A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"), "mfu": (0.4, 0.5, 0.6),
                  "mbu": (0.7, 0.8, 0.9)},
        mistakes=[
            Mistake("That is the physical-bound knee (MFU = MBU = 1); scale F by MFU and W by MBU.",
                    lambda p: knee_batch_size(p["model"], p["accelerator"], 0)),
            Mistake("The ratio is upside down: B* = (M_w / (W x MBU)) / (2 P / (F x MFU)) grows with "
                    "MFU and shrinks with MBU.",
                    lambda p: knee_batch_size(p["model"], p["accelerator"], 0)
                    * p["mbu"] / p["mfu"]),
            Mistake("You used the 2:4-sparse FLOP/s (twice the dense peak); rooflines use the dense peak.",
                    lambda p: 2 * knee_batch_size(p["model"], p["accelerator"], 0, mfu=p["mfu"],
                                                  mbu=p["mbu"])),
        ],
    ),
    Question(
        "decode.knee_roofline_with_kv",
        "In the roofline model, at what batch size does the decode step of {model} (bf16) on "
        "one {accelerator} turn compute-bound when every sequence holds {context} cached tokens? "
        "Physical bound, attention FLOPs included. (a number of sequences, not rounded)",
        difficulty="medium",
        answer=lambda p: knee_batch_size(p["model"], p["accelerator"], p["context"],
                                         overlap="roofline"),
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "context": 256},
        variants={"model": GQA_8B_CLASS, "accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB", "A100-SXM4-80GB"),
                  "context": (64, 128, 256)},
        mistakes=[
            Mistake("You forgot the KV term on the memory side: the KV reads grow with B too, and "
                    "the compute has to outgrow weights + KV.",
                    _knee_roofline_without_kv),
            Mistake("That is the hybrid knee (weight matmuls alone); in the roofline model all "
                    "compute races all memory traffic, KV included.",
                    lambda p: knee_batch_size(p["model"], p["accelerator"], p["context"])),
            Mistake("The KV read belongs on the memory side of the balance: compute (2 P + 4 L H d_h S) "
                    "B / F = (M_w + B S k) / W.",
                    _knee_roofline_kv_on_both_sides),
        ],
    ),
    Question(
        "decode.critical_context",
        "Beyond what context length does each sequence's KV-cache read take longer than its "
        "weight matmuls, for {model} (bf16 weights and KV) on one {accelerator} at the "
        "physical bound? Use S_crit = 2 P W / (F k) with P the matmul parameters. (tokens)",
        difficulty="medium",
        answer=lambda p: critical_context_length(p["model"], p["accelerator"]),
        unit="tok",
        params={"model": "Llama-3.1-70B", "accelerator": "H200-SXM-141GB"},
        variants={"model": ("Llama-3.1-70B", "Qwen2.5-72B", "Llama-3.1-8B", "Mistral-7B"),
                  "accelerator": ("H200-SXM-141GB", "H100-SXM5-80GB", "A100-SXM4-80GB", "MI300X")},
        mistakes=[
            Mistake("You used the query heads for k; the cache stores only the KV heads (GQA).",
                    lambda p: _s_crit(p, kv_scale=get_model(p["model"]).group_size)),
            Mistake("Your k counts the keys but not the values (or the reverse): "
                    "k = 2 L K d_h b_kv.", lambda p: _s_crit(p, kv_scale=0.5)),
            Mistake("A multiply-add is 2 FLOPs: the matmuls cost 2 P per sequence, not P.",
                    lambda p: _s_crit(p, flop_scale=0.5)),
        ],
    ),
    Question(
        "decode.ceiling_long_context",
        "The throughput ceiling (B -> infinity) of {model} (bf16) on one {accelerator} when "
        "every sequence holds {context} cached tokens, in the roofline model at the physical bound. "
        "(tok/s)",
        difficulty="medium",
        answer=lambda p: max_decode_throughput(p["model"], p["accelerator"], p["context"],
                                               overlap="roofline"),
        unit="tok/s",
        params={"model": "Llama-2-7B", "accelerator": "A100-SXM4-80GB", "context": 4096},
        variants={"model": ("Llama-2-7B", "Llama-3.1-8B", "Llama-2-13B"),
                  "accelerator": ("A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"), "context": (1024, 2048, 4096)},
        mistakes=[
            Mistake("You forgot the KV reads: F / (2 P) is the ceiling at zero context only. Each "
                    "added sequence adds its own S k bytes per step.",
                    lambda p: max_decode_throughput(p["model"], p["accelerator"], 0)),
            Mistake("That is the additive model's ceiling (compute + KV time per sequence); the "
                    "roofline model overlaps them: 1 / max(compute, KV time).",
                    lambda p: max_decode_throughput(p["model"], p["accelerator"], p["context"],
                                                    overlap="additive")),
            Mistake("That is the throughput at batch 1 (1 / TPOT); the ceiling is the limit of "
                    "B / TPOT(B) as the batch grows.",
                    lambda p: 1 / decode_step_time(p["model"], p["accelerator"], 1, p["context"],
                                                   overlap="roofline")),
        ],
    ),
    Question(
        "decode.knee_symbolic",
        "Derive the roofline knee B* with the KV term: weights P b_w bytes, KV 2 L K d_h b_kv bytes "
        "per token and sequence, S cached tokens per sequence, 2 P B FLOPs per step (neglect "
        "attention FLOPs), peak F and W. Give B* as a sympy expression in P, b_w, F, W, S, L, K, "
        "d_h, b_kv.",
        difficulty="hard",
        answer=lambda p: _knee_expr(),
        kind="symbolic",
        symbols=_SYMBOLS,
        mistakes=[
            Mistake("You forgot the KV term: its reads grow with B on the memory side, which pushes "
                    "the knee out (and removes it when S k / W >= 2 P / F).",
                    lambda p: b_w * F / (2 * W)),
            Mistake("k = 2 L K d_h b_kv: one key and one value vector per KV head and layer.",
                    lambda p: _knee_expr(kv=L * K * d_h * b_kv)),
            Mistake("A multiply-add is 2 FLOPs: the matmuls cost 2 P FLOPs per sequence.",
                    lambda p: _knee_expr(flops=1)),
            Mistake("Sign: the KV reads are memory time, so they subtract from the compute excess "
                    "per sequence (2 P / F - S k / W), they do not add to it.",
                    lambda p: P * b_w / W / (2 * P / F + S * 2 * L * K * d_h * b_kv / W)),
            Mistake("You used the query heads H: the cache stores K KV heads.",
                    lambda p: _knee_expr(kv=2 * L * H * d_h * b_kv)),
        ],
    ),
    Question(
        "decode.critical_context_symbolic",
        "Roofline model at the physical bound: weights P b_w bytes, KV 2 L K d_h b_kv bytes per token "
        "and sequence, S cached tokens per sequence, 2 P B FLOPs per step (neglect attention FLOPs), "
        "peak F and W. For which context length S_crit does the roofline knee B* go to infinity "
        "(decode never compute-bound for S >= S_crit)? A sympy expression in P, F, W, L, K, d_h, b_kv.",
        difficulty="hard",
        answer=lambda p: _s_crit_expr(),
        kind="symbolic",
        symbols=_SYMBOLS,
        mistakes=[
            Mistake("You used the query heads H: the cache stores K KV heads.",
                    lambda p: _s_crit_expr(kv=2 * L * H * d_h * b_kv)),
            Mistake("k = 2 L K d_h b_kv: one key and one value vector per KV head and layer.",
                    lambda p: _s_crit_expr(kv=L * K * d_h * b_kv)),
            Mistake("A multiply-add is 2 FLOPs: the matmuls cost 2 P FLOPs per sequence.",
                    lambda p: _s_crit_expr(flops=1)),
            Mistake("Upside down: S_crit grows with the parameters and the bandwidth, and shrinks "
                    "with F and k.", lambda p: 1 / _s_crit_expr()),
        ],
    ),
    Question(
        "decode.memory_wall",
        "How many sequences of {context} cached tokens each fit next to {model} (bf16 weights and "
        "KV) on one {accelerator} ({gpu_gb:g} GB, decimal) when weights and KV cache may use 90 % of the "
        "memory? (a whole number of sequences)",
        difficulty="easy",
        answer=lambda p: max_batch_size(p["model"], p["accelerator"], p["context"],
                                        gpu_memory_utilization=p["reserve"]),
        rel_tol=0.005,
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "context": 4096,
                "reserve": 0.9},
        variants={"model": GQA_8B_CLASS, "accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB", "A100-SXM4-80GB"),
                  "context": (2048, 4096, 8192)},
        derive=named(gpu="accelerator"),
        mistakes=[
            Mistake("You used all the memory; the question keeps 10 % back (activations, CUDA graphs, "
                    "fragmentation).", lambda p: _memory_wall(p, reserve=1.0)),
            Mistake("The weights take their share of the memory first: subtract M_w before "
                    "dividing by the KV bytes per sequence.", lambda p: _memory_wall(p, weights=False)),
            Mistake("You read GB as GiB; spec-sheet capacities in this book are decimal.",
                    lambda p: _memory_wall(p, capacity=get_accelerator(p["accelerator"]).memory_bytes / 1e9
                                           * GiB)),
        ],
    ),
    Question(
        "decode.measured_mbu",
        "{source} a median {itl_ms:g} ms between tokens for Llama-2-7B (fp16) at batch 1 on an "
        "A100-80GB (2.039 TB/s), with about {context} tokens in the cache. What MBU does that imply, "
        "as Databricks defines it: (weight bytes + KV bytes) / TPOT / peak bandwidth? "
        "(a fraction, e.g. 0.5)",
        difficulty="medium",
        answer=_mbu,
        params={"model": "Llama-2-7B", "accelerator": "A100-SXM4-80GB", "context": 65, "itl": 0.009},
        variants={"itl": (0.008, 0.009, 0.0105, 0.012), "context": (65, 300, 1000)},
        derive=lambda p: {**p, "itl_ms": round(p["itl"] * 1e3, 3),
                          "source": ("LMDeploy measured" if (p["itl"], p["context"]) == (0.009, 65)
                                     else "Suppose a benchmark measured")},
        mistakes=[
            Mistake("Upside down: MBU is achieved / peak bandwidth, at most 1.",
                    lambda p: _mbu(p, invert=True)),
            Mistake("You counted parameters, not bytes: fp16 stores 2 bytes per parameter.",
                    lambda p: _mbu(p, bytes_scale=0.5)),
            Mistake("You mixed GiB with GB: the bytes moved and the TB/s of the spec sheet are both "
                    "decimal here.", lambda p: _mbu(p, bytes_scale=GiB / 1e9)),
        ],
    ),
    Question(
        "decode.what_stops_the_batch",
        "Llama-2-7B (bf16) on one A100-SXM4-80GB, every sequence at 2048 cached tokens, weights and "
        "KV allowed 90 % of the memory. As you add sequences, what stops the throughput gain "
        "first: 'compute' (the weight matmuls turn compute-bound, hybrid knee) or 'memory "
        "capacity' (the next sequence's KV cache no longer fits)?",
        difficulty="medium",
        answer=_which_limit,
        kind="choice",
        choices=("compute", "memory capacity"),
        params={"model": "Llama-2-7B", "accelerator": "A100-SXM4-80GB", "context": 2048,
                "reserve": 0.9},
        mistakes=[
            Mistake("Compare the two batch sizes: the knee is about the ridge point (~153 sequences "
                    "here), but 2048 tokens x 0.5 MiB per token leave room for only a few dozen "
                    "sequences next to the weights.",
                    lambda p: "compute" if _which_limit(p) == "memory capacity" else "memory capacity"),
        ],
    ),
]
