"""Questions of chapter 11, "Quantization: fewer bytes, more tokens".

Every expected answer is computed by the library from the question's
parameters; every known mistake is computed the same way, usually the library
called with the mistaken data type (int4 read as 4 bytes, the KV cache
quantized along with the weights, fp8 FLOP/s for bf16 math...), so a variant
with other parameters keeps its hints.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from ..question import Mistake, Question
from ..decode import decode_step_parts
from ..models import weight_bytes
from ..prefill import prefill_time
from ..quantization import (Scheme, get_scheme, scheme_knee, scheme_max_batch, scheme_step_time,
                            throughput_at_tpot_slo, tpot_floor)
from ..settings import REALISTIC
from ..symbolic import K, L, P_mm, S, W, b_kv, b_w, d_h, tau, H
from ._variants import GPUS_FP8, GQA_8B_CLASS, named

_SYMBOLS = {"tau": tau, "W": W, "P_mm": P_mm, "b_w": b_w, "S": S, "L": L, "K": K, "d_h": d_h,
            "b_kv": b_kv, "H": H}


def _with(scheme, **changes):
    """A copy of a named scheme with some data types changed (the mistaken scheme)."""
    s = get_scheme(scheme)
    fields = {"weight_dtype": s.weight_dtype, "kv_dtype": s.kv_dtype, "compute_dtype": s.compute_dtype,
              **changes}
    return Scheme(s.name + " (mistaken)", **fields)


def _bandwidth_only_throughput(p):
    """Throughput at the SLO if the step were weight read + KV read (+ all-reduces), never compute-bound."""
    s = get_scheme(p["scheme"])
    wall = scheme_max_batch(p["model"], p["accelerator"], p["context"], scheme=s, tensor_parallel=p["tp"])
    batches = np.arange(1, wall + 1)
    parts = decode_step_parts(p["model"], p["accelerator"], batches, p["context"], tensor_parallel=p["tp"],
                              **s.dtypes)
    t = parts["weight_memory"] + parts["kv_memory"] + parts["communication"]
    b = int(np.searchsorted(np.maximum.accumulate(t), p["tpot_slo"], side="right"))
    return b / t[b - 1]


def _x_bandwidth(kv=2 * L * K * d_h * b_kv, weights=P_mm * b_w, per_tau=True):
    batch = (tau * W - weights) / (S * kv)
    return batch / tau if per_tau else batch


def _lower_knee(p):
    knees = {c: scheme_knee(p["model"], p["accelerator"], scheme=c) for c in p["options"]}
    base = scheme_knee(p["model"], p["accelerator"], scheme="W16A16")
    return {"W4A16": "int4 weights with bf16 math", "W8A8-FP8": "fp8 weights with fp8 math",
            "W16A16+KV8": "an fp8 KV cache"}[min((k, c) for c, k in knees.items() if k < base * 0.99)[1]]


def _better_upgrade(p):
    x = {c: throughput_at_tpot_slo(p["model"], p["accelerator"], p["context"], tpot_slo=p["tpot_slo"], scheme=c)
         for c in ("W4A16", "W16A16+KV8")}
    return max(x, key=x.get)


QUESTIONS = [
    Question(
        "quantization.int4_weight_bytes",
        "How many bytes do the weights of {model} take when every parameter is stored in int4 "
        "(ignore scales and keep no layer in 16 bits)? (GB, decimal)",
        answer=lambda p: weight_bytes(p["model"], "int4"),
        unit="GB",
        params={"model": "Llama-3.1-70B"},
        variants={"model": ("Llama-3.1-70B", "Qwen2.5-72B", "Llama-3.1-405B", "Mixtral-8x7B", "Llama-3.1-8B")},
        difficulty="easy",
        mistakes=[
            Mistake("int4 is 4 bits, not 4 bytes: two weights share one byte, 0.5 bytes each.",
                    lambda p: weight_bytes(p["model"], "fp32")),
            Mistake("That is 1 byte per weight (int8 or fp8); int4 packs two weights per byte.",
                    lambda p: weight_bytes(p["model"], "int8")),
            Mistake("That is the bf16 size (2 bytes per weight); int4 is a quarter of it.",
                    lambda p: weight_bytes(p["model"], "bf16")),
        ],
    ),
    Question(
        "quantization.tpot_floor_w4a16",
        "{model} with W4A16 (int4 weights, bf16 math, KV cache left in bf16) on one "
        "{accelerator}: the TPOT at batch 1 with {context} tokens in the KV cache, at the physical bound "
        "(hybrid model). (ms)",
        answer=lambda p: tpot_floor(p["model"], p["accelerator"], p["context"], scheme=p["scheme"]),
        unit="ms",
        params={"model": "Llama-3.1-8B", "accelerator": "A100-SXM4-80GB", "context": 16384,
                "scheme": "W4A16"},
        variants={"model": ("Llama-3.1-8B", "Mistral-7B"), "accelerator": ("A100-SXM4-80GB", "H100-SXM5-80GB",
                                                                           "H200-SXM-141GB"),
                  "context": (8192, 16384, 32768)},
        mistakes=[
            Mistake("W4A16 quantizes the weights only: the KV cache stays in bf16 (2 bytes per element) "
                    "unless the server is told to store it in fp8.",
                    lambda p: tpot_floor(p["model"], p["accelerator"], p["context"],
                                         scheme=_with(p["scheme"], kv_dtype="int4"))),
            Mistake("int4 is half a byte per weight, not 4 bytes.",
                    lambda p: tpot_floor(p["model"], p["accelerator"], p["context"],
                                         scheme=_with(p["scheme"], weight_dtype="fp32"))),
            Mistake("That is the bf16 model's floor: with int4 weights the weight read shrinks four-fold.",
                    lambda p: tpot_floor(p["model"], p["accelerator"], p["context"], scheme="W16A16")),
            Mistake("You left out the KV read: at batch 1 the step reads the weights AND the sequence's "
                    "cached tokens.",
                    lambda p: tpot_floor(p["model"], p["accelerator"], 0, scheme=p["scheme"])),
        ],
    ),
    Question(
        "quantization.knee_w4a16",
        "The knee B* (hybrid model: the batch at which the weight matmuls turn compute-bound) of "
        "{model} with W4A16 (int4 weights, bf16 math) on one {accelerator}, at the physical "
        "bound. (a number of sequences, not rounded)",
        answer=lambda p: scheme_knee(p["model"], p["accelerator"], scheme=p["scheme"]),
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "scheme": "W4A16"},
        variants={"model": GQA_8B_CLASS + ("Llama-3.1-70B",), "accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB",
                                                                              "MI300X")},
        mistakes=[
            Mistake("That is the bf16 knee. Fewer bytes per weight shorten the weight read that hides the "
                    "matmuls, so the knee moves down: B* is about R b_w / 2, with R = F / W the ridge point.",
                    lambda p: scheme_knee(p["model"], p["accelerator"], scheme="W16A16")),
            Mistake("Upside down: the knee is proportional to b_w, so int4 weights move it down four-fold, "
                    "not up.",
                    lambda p: 4 * scheme_knee(p["model"], p["accelerator"], scheme="W16A16"),
                    name="inverted: int4 weights move the knee up"),
            Mistake("Weight-only quantization computes in bf16: use the bf16 peak, not the fp8 (or int8) one.",
                    lambda p: scheme_knee(p["model"], p["accelerator"], scheme=_with(p["scheme"], compute_dtype="fp8"))),
        ],
    ),
    Question(
        "quantization.knee_w8a8",
        "The knee B* (hybrid model) of {model} with W8A8-FP8 (fp8 weights and fp8 math) on one "
        "{accelerator}, at the physical bound. (a number of sequences, not rounded)",
        answer=lambda p: scheme_knee(p["model"], p["accelerator"], scheme=p["scheme"]),
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "scheme": "W8A8-FP8"},
        variants={"model": GQA_8B_CLASS + ("Llama-3.1-70B",), "accelerator": GPUS_FP8},
        mistakes=[
            Mistake("Twice too large: the large-matrix knee is (F/W) x b_w / 2, where the 2 is the two FLOPs "
                    "of a multiply-add. 'ridge x b_w / b_a' is right only with the bf16 ridge, not the fp8 one.",
                    lambda p: 2 * scheme_knee(p["model"], p["accelerator"], scheme=p["scheme"])),
            Mistake("That is the weight-only (W8A16) knee: fp8 math also doubles the peak FLOP/s, which moves "
                    "the knee back up.",
                    lambda p: scheme_knee(p["model"], p["accelerator"], scheme=_with(p["scheme"], compute_dtype="bf16"))),
        ],
    ),
    Question(
        "quantization.memory_wall_w4a16",
        "How many sequences of {context} cached tokens fit next to {model} with W4A16 weights (KV cache "
        "in bf16) on one {gpu} ({gpu_gb:g} GB, decimal), when weights and KV cache may use 90 % of the memory? "
        "(a whole number of sequences)",
        answer=lambda p: scheme_max_batch(p["model"], p["accelerator"], p["context"], scheme=p["scheme"]),
        rel_tol=0.005,
        params={"model": "Llama-3.1-8B", "accelerator": "L40S", "context": 4096, "scheme": "W4A16"},
        variants={"model": ("Llama-3.1-8B", "Mistral-7B"), "accelerator": ("L40S", "A100-SXM4-40GB"),
                  "context": (2048, 4096, 8192)},
        derive=named(gpu="accelerator"),
        mistakes=[
            Mistake("Weight quantization does not shrink the KV cache: W4A16 keeps keys and values in bf16.",
                    lambda p: scheme_max_batch(p["model"], p["accelerator"], p["context"],
                                               scheme=_with(p["scheme"], kv_dtype="int4"))),
            Mistake("That assumes an fp8 KV cache (W4A16+KV8); this W4A16 server keeps it in bf16.",
                    lambda p: scheme_max_batch(p["model"], p["accelerator"], p["context"],
                                               scheme=_with(p["scheme"], kv_dtype="fp8"))),
            Mistake("That is the bf16 model's wall: int4 weights free 1.5 bytes per parameter for KV cache.",
                    lambda p: scheme_max_batch(p["model"], p["accelerator"], p["context"], scheme="W16A16")),
            Mistake("You used all of the memory; the question keeps 10 % back.",
                    lambda p: scheme_max_batch(p["model"], p["accelerator"], p["context"], scheme=p["scheme"],
                                               gpu_memory_utilization=1.0)),
        ],
    ),
    Question(
        "quantization.throughput_at_slo",
        "Llama-3.1-70B with W4A16 on {tp} A100-SXM4-80GB (tensor parallelism {tp}, bf16 all-reduces, latency "
        "0), every sequence at {context} cached tokens, TPOT SLO {slo_ms:g} ms. What is the highest output "
        "throughput of the whole instance that meets the SLO and fits in memory (hybrid model, physical bound)? "
        "(tok/s)",
        answer=lambda p: throughput_at_tpot_slo(p["model"], p["accelerator"], p["context"], tpot_slo=p["tpot_slo"],
                                                scheme=p["scheme"], tensor_parallel=p["tp"]),
        unit="tok/s",
        params={"model": "Llama-3.1-70B", "accelerator": "A100-SXM4-80GB", "context": 4096, "scheme": "W4A16",
                "tp": 4, "tpot_slo": 0.050},
        variants={"tp": (2, 4), "tpot_slo": (0.04, 0.05, 0.06)},
        derive=lambda p: {**p, "slo_ms": round(p["tpot_slo"] * 1e3, 3)},
        difficulty="hard",
        mistakes=[
            Mistake("That is per GPU; the question asks for the whole instance.",
                    lambda p: throughput_at_tpot_slo(p["model"], p["accelerator"], p["context"], tpot_slo=p["tpot_slo"],
                                                     scheme=p["scheme"], tensor_parallel=p["tp"]) / p["tp"]),
            Mistake("You treated the step as bandwidth-bound at every batch. The W4A16 knee on the A100 is "
                    "a few dozen sequences: past it the bf16 matmuls, 2 P / F per sequence, set the time.",
                    _bandwidth_only_throughput),
            Mistake("That is the bf16 (W16A16) throughput; with int4 weights more sequences fit.",
                    lambda p: throughput_at_tpot_slo(p["model"], p["accelerator"], p["context"], tpot_slo=p["tpot_slo"],
                                                     scheme="W16A16", tensor_parallel=p["tp"])),
        ],
    ),
    Question(
        "quantization.prefill_w4a16",
        "How long does the prefill of one {prompt}-token prompt take for {model} with W4A16 (int4 weights, "
        "bf16 math) on one {accelerator}, at the physical bound (hybrid model)? (ms)",
        answer=lambda p: prefill_time(p["model"], p["accelerator"], p["prompt"], **get_scheme(p["scheme"]).dtypes),
        unit="ms",
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "prompt": 4096, "scheme": "W4A16"},
        variants={"model": GQA_8B_CLASS, "accelerator": ("H100-SXM5-80GB", "H200-SXM-141GB"),
                  "prompt": (2048, 4096, 8192)},
        mistakes=[
            Mistake("Weight-only quantization does not speed up prefill's compute: the FLOPs are the same and "
                    "the math still runs at the bf16 peak. Prefill is compute-bound, so the time barely moves.",
                    lambda p: prefill_time(p["model"], p["accelerator"], p["prompt"]) / 4),
            Mistake("W4A16 computes in bf16, not fp8: only W8A8 doubles the FLOP/s.",
                    lambda p: prefill_time(p["model"], p["accelerator"], p["prompt"], weight_dtype="int4",
                                           compute_dtype="fp8")),
        ],
    ),
    Question(
        "quantization.throughput_symbolic",
        "In the bandwidth-bound regime, the largest batch meeting a TPOT target tau reads tau W bytes per "
        "step: the weights it reads, P_mm b_w bytes (P_mm: the matmul parameters), once, and S 2 L K d_h b_kv bytes of KV cache per sequence. Give "
        "the throughput at that batch, in tokens/s, as a sympy expression in tau, W, P_mm, b_w, S, L, K, "
        "d_h, b_kv.",
        answer=lambda p: _x_bandwidth(),
        kind="symbolic",
        difficulty="hard",
        symbols=_SYMBOLS,
        mistakes=[
            Mistake("That is the batch B_SLO; the throughput is B_SLO tokens per step of tau seconds: divide "
                    "by tau.", lambda p: _x_bandwidth(per_tau=False)),
            Mistake("The weights take their bytes first: subtract P_mm b_w from the tau W bytes a step may read.",
                    lambda p: _x_bandwidth(weights=0)),
            Mistake("k = 2 L K d_h b_kv: one key and one value vector per KV head and layer.",
                    lambda p: _x_bandwidth(kv=L * K * d_h * b_kv)),
            Mistake("The cache stores K KV heads, not H query heads.",
                    lambda p: _x_bandwidth(kv=2 * L * H * d_h * b_kv)),
        ],
    ),
    Question(
        "quantization.what_moves_the_knee_down",
        "Starting from bf16 weights, KV cache and math, which single change moves the decode knee B* "
        "(hybrid model) of Llama-3.1-8B on an H100 to a smaller batch: 'int4 weights with bf16 math', "
        "'fp8 weights with fp8 math', 'an fp8 KV cache' or 'none of them (int4 weights move it up)'?",
        answer=_lower_knee,
        kind="choice",
        choices=("int4 weights with bf16 math", "fp8 weights with fp8 math", "an fp8 KV cache",
                 "none of them (int4 weights move it up)"),
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB",
                "options": ("W4A16", "W8A8-FP8", "W16A16+KV8")},
        mistakes=[
            Mistake("fp8 math halves b_w AND doubles the peak FLOP/s: B*, about (F/W)(b_w/2), stays where "
                    "bf16 had it.", lambda p: "fp8 weights with fp8 math"),
            Mistake("The KV data type is not in the hybrid knee (the weight matmuls against the weight read); "
                    "an fp8 cache moves the memory wall and the throughput ceiling instead.",
                    lambda p: "an fp8 KV cache"),
            Mistake("Upside down: fewer bytes per weight shorten the weight read that hides the matmuls, so "
                    "the bf16 matmuls take over at a smaller batch; B* is about R b_w / 2, down four-fold "
                    "with int4 weights.",
                    lambda p: "none of them (int4 weights move it up)",
                    name="inverted: int4 weights move the knee up"),
        ],
    ),
    Question(
        "quantization.better_upgrade",
        "Llama-3.1-8B in bf16 on one H100-SXM5-80GB, every sequence at 4096 cached tokens, TPOT SLO 50 ms, "
        "physical bound. Which single change gives more throughput at the SLO: 'W4A16' (int4 weights, KV "
        "still bf16) or 'W16A16+KV8' (bf16 weights, fp8 KV cache)?",
        answer=_better_upgrade,
        kind="choice",
        choices=("W4A16", "W16A16+KV8"),
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "context": 4096, "tpot_slo": 0.050},
        mistakes=[
            Mistake("Int4 cuts the TPOT floor, but at 4096 tokens the memory wall binds (the H100 sweeps its "
                    "72 usable GB in 21.5 ms, under 50 ms) and the caches, not the weights, fill the memory: "
                    "halving the cache doubles the batch, freeing 12 GB of weights adds about a fifth.",
                    lambda p: "W4A16" if _better_upgrade(p) != "W4A16" else "W16A16+KV8",
                    name="inverted: int4 weights beat the fp8 cache"),
        ],
    ),
    Question(
        "quantization.knee_w4a4_fp4",
        "The knee B* (hybrid model) of {model} with {scheme} (4-bit float weights with their block scales, "
        "and fp4 math on the tensor cores) on one {accelerator}, at the physical bound, with the catalog's "
        "dense peaks. (a number of sequences, not rounded)",
        answer=lambda p: scheme_knee(p["model"], p["accelerator"], scheme=p["scheme"]),
        params={"model": "Llama-3.1-70B", "accelerator": "B200", "scheme": "W4A4-NVFP4"},
        variants={"model": ("Llama-3.1-70B", "Llama-3.1-8B", "Qwen2.5-72B"), "accelerator": ("B200", "GB200"),
                  "scheme": ("W4A4-NVFP4", "W4A4-MXFP4")},
        mistakes=[
            Mistake("Twice too large: that uses the sheet's 2:4-sparse fp4 peak. Blackwell sheets headline "
                    "sparse figures; a dense checkpoint's matmuls run at the dense peak, half of it.",
                    lambda p: 2 * scheme_knee(p["model"], p["accelerator"], scheme=p["scheme"])),
            Mistake("You left out the block scales: NVFP4 stores one E4M3 byte per 16 weights (0.5625 B per "
                    "weight), MXFP4 one E8M0 byte per 32 (0.53125 B), not 0.5 B.",
                    lambda p: scheme_knee(p["model"], p["accelerator"],
                                          scheme=_with(p["scheme"], weight_dtype="int4"))),
            Mistake("The block sizes are swapped: NVFP4 scales blocks of 16 weights, MXFP4 blocks of 32.",
                    lambda p: scheme_knee(p["model"], p["accelerator"], scheme=_with(
                        p["scheme"], weight_dtype="mxfp4" if "NVFP4" in p["scheme"] else "nvfp4"))),
            Mistake("That is the weight-only (W4A16) knee, with bf16 math. W4A4 multiplies in fp4, at four "
                    "times the bf16 peak, which moves the knee back up, a little above bf16's.",
                    lambda p: scheme_knee(p["model"], p["accelerator"], scheme=_with(p["scheme"],
                                                                                      compute_dtype="bf16"))),
            Mistake("That is the fp8 peak; Blackwell's fp4 tensor cores run at twice the fp8 rate.",
                    lambda p: scheme_knee(p["model"], p["accelerator"], scheme=_with(p["scheme"],
                                                                                      compute_dtype="fp8"))),
        ],
    ),
    Question(
        "quantization.tpot_floor_realistic",
        "{model} with {scheme} on one {accelerator}, {context} tokens in the KV cache, batch 1, at the book's "
        "realistic setting (MFU 0.5, MBU 0.75, 0.4 ms of fixed overhead per step; hybrid model). What is the "
        "TPOT? (ms)",
        answer=lambda p: tpot_floor(p["model"], p["accelerator"], p["context"], scheme=p["scheme"],
                                    setting="realistic"),
        unit="ms",
        params={"model": "Llama-3.1-8B", "accelerator": "H100-SXM5-80GB", "context": 4096, "scheme": "W4A16"},
        variants={"model": GQA_8B_CLASS, "accelerator": ("H100-SXM5-80GB", "A100-SXM4-80GB", "H200-SXM-141GB"),
                  "context": (4096, 16384), "scheme": ("W4A16", "W8A16", "W4A16+KV8")},
        mistakes=[
            Mistake("That is the physical bound (MBU 1, no overhead); the question asks for the realistic "
                    "setting: every byte takes 1/MBU as long, plus 0.4 ms per step.",
                    lambda p: tpot_floor(p["model"], p["accelerator"], p["context"], scheme=p["scheme"])),
            Mistake("You left out the fixed 0.4 ms per step, which no data type shrinks.",
                    lambda p: tpot_floor(p["model"], p["accelerator"], p["context"], scheme=p["scheme"],
                                         setting="realistic") - REALISTIC["step_overhead"]),
            Mistake("At batch 1 the step is bandwidth-bound: divide its bytes by W x MBU (0.75), not by "
                    "W x MFU (0.5).",
                    lambda p: tpot_floor(p["model"], p["accelerator"], p["context"], scheme=p["scheme"],
                                         setting="realistic", mbu=REALISTIC["mfu"])),
            Mistake("You multiplied the bandwidth time by MBU; an efficiency below 1 makes each byte slower: "
                    "divide by it.",
                    lambda p: (tpot_floor(p["model"], p["accelerator"], p["context"], scheme=p["scheme"])
                               * REALISTIC["mbu"] + REALISTIC["step_overhead"])),
        ],
    ),
]
