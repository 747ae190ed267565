"""Checked questions from the public references: worked problems of kipply, How to Scale Your Model,
Stanford CS336, Baseten, Databricks and DistServe, posed as the references pose them.

Each question names its source (and where in it) in its prompt, the chapter whose exercise set it belongs
to (``chapter``), and its convention where it needs one. The expected answer is computed by the library;
the known mistakes include the published slips the book corrects (``tests/test_published_problems.py``
holds the full list of problems, with the reason for each correction). Numeric questions have variants.
"""

from __future__ import annotations

import math

from ..question import Mistake, Question
from ..decode import decode_step_parts, decode_step_time
from ..hardware import Accelerator
from ..memory import chips_needed, kv_transfer_time, kv_tokens_freed_per_step, max_batch_size, max_kv_tokens
from ..metrics import e2e_from_ttft_tpot
from ..models import kv_bytes_per_token, model_from_totals, parameter_count, with_kv_heads
from ..prefill import prefill_time
from ..roofline import link_time, memory_time, prefill_attention_intensity, sharded_matmul_times, training_mfu
from ..sharding import pooled_slice

__all__ = ["QUESTIONS", "SOURCES"]

#: Where each source was read (the date and commit of the copy).
SOURCES = {
    "kipply": "kipply, 'Transformer Inference Arithmetic' (2022-03-30), github:kipply/blog@09819d42",
    "scaling": "J. Austin et al., 'How to Scale Your Model' (2025), github:jax-ml/scaling-book@0819a7d",
    "cs336": "Stanford CS336 (Spring 2025), lecture 10, github:stanford-cs336/lectures:lecture_10.py@8ad2677",
    "baseten": "Baseten, 'A guide to LLM inference and performance' (2023-11-17)",
    "databricks": "Databricks, 'LLM Inference Performance Engineering: Best Practices' (2023-10-12)",
    "distserve": "Y. Zhong et al., 'DistServe', OSDI 2024 (prefill/decode disaggregation)",
}

_A100_KIPPLY = Accelerator.from_numbers("A100 (kipply)", memory_bytes=40e9, memory_bandwidth=1.5e12,
                                        peak_flops={"bf16": 312e12}, interconnect_bandwidth=300e9)
_V5E = Accelerator.from_numbers("TPU v5e (8.1e11)", memory_bytes=16e9, memory_bandwidth=8.1e11,
                                peak_flops={"bf16": 1.97e14, "int8": 3.94e14})
_V5E_82 = Accelerator.from_numbers("TPU v5e (8.2e11)", memory_bytes=16e9, memory_bandwidth=8.2e11,
                                   peak_flops={"bf16": 1.97e14, "int8": 3.94e14})
_ALL = dict(gpu_memory_utilization=1.0)


def _kipply_52b():
    return model_from_totals(parameters=52e9, n_layers=64, hidden_size=8192, n_heads=64, n_kv_heads=64,
                             head_dim=128, kv_dtype="fp16", name="52B (kipply)")


def _sb_13b():
    return model_from_totals(parameters=13e9, n_layers=40, hidden_size=5120, n_heads=40, n_kv_heads=40, head_dim=128,
                             attention_flops_per_pair=0.0, name="LLaMA-2-13B (scaling book)")


def _sb_70b():
    return model_from_totals(parameters=70e9, n_layers=80, n_kv_heads=8, head_dim=128, kv_dtype="int8")


def _gopher():
    return model_from_totals(parameters=260e9, kv_bytes_per_token=0, n_layers=80, hidden_size=16384)


def _pop_quiz(p, kv_per_step=True, chips=16, bytes_per_weight=1.0):
    m = model_from_totals(parameters=30e9 * bytes_per_weight, kv_bytes_per_token=100e3, kv_dtype="int8")
    batch = p["batch"] if kv_per_step else 1
    if not kv_per_step:   # one KV cache read per step instead of one per sequence
        parts = decode_step_parts(m, pooled_slice(_V5E, chips), p["batch"], 8192, weight_dtype="int8",
                                  kv_dtype="int8")
        return max(parts["weight_memory"], parts["linear_compute"]) + parts["kv_memory"] / p["batch"]
    return decode_step_time(m, pooled_slice(_V5E, chips), batch, 8192, weight_dtype="int8", kv_dtype="int8")


def _kipply_tokens(p, per_token=None, memory=40e9):
    if per_token is None:
        return max_kv_tokens(_kipply_52b(), pooled_slice(_A100_KIPPLY, p["gpus"]), weight_dtype="fp16",
                             kv_dtype="fp16", **_ALL)
    return float(math.floor((p["gpus"] * memory - 104e9) / per_token))


def _sb_13b_batch(p, memory=16e9, per_sequence=None, weights=26e9):
    if per_sequence is None:
        return max_batch_size(_sb_13b(), pooled_slice(_V5E_82, p["chips"]), 8192, **_ALL)
    return float(math.floor((p["chips"] * memory - weights) / per_sequence))


def _gqa_step(p, weights="fixed"):
    m = with_kv_heads(_sb_13b(), 8, weights=weights)
    return decode_step_time(m, pooled_slice(_V5E_82, 8), p["batch"], 8192, overlap="roofline")


def _kipply_comms(p, ring_factor=False, bandwidth=300e9):
    acc = _A100_KIPPLY if bandwidth == 300e9 else Accelerator.from_numbers(
        "A100 (600 GB/s)", memory_bytes=40e9, memory_bandwidth=1.5e12, peak_flops={"bf16": 312e12},
        interconnect_bandwidth=bandwidth)
    return decode_step_parts(_gopher(), acc, p["batch"], 0, tensor_parallel=16,
                             allreduce_ring_factor=ring_factor)["communication"]


def _deepseek(p, peak=None, factor=6.0):
    acc = "H100" if peak is None else Accelerator.from_numbers("H800 sheet", memory_bytes=80e9,
                                                               memory_bandwidth=2e12, peak_flops={"fp8": peak})
    return training_mfu(37e9, acc, 14.8e12, p["hours"] * 3600, dtype="fp8", flops_per_parameter_token=factor)


def _link_d(p, copy_bytes=2.0, bandwidth=None):
    t = sharded_matmul_times(_V5E_82, 128, 8192, 8192, n_shards=2, link_bandwidth=bandwidth or p["link"],
                             activation_dtype="bf16")
    return 8192 * t["link"] / t["compute"] * copy_bytes / 2.0


def _chips_bs240(p, kv_per_token=None, kv_total=None):
    if kv_per_token is None and kv_total is None:
        return chips_needed(_sb_70b(), _V5E_82, p["batch"], 32768, weight_dtype="int8", kv_dtype="int8", **_ALL)
    kv = kv_total if kv_total is not None else p["batch"] * 32768 * kv_per_token
    return float(math.ceil((70e9 + kv) / 16e9))


def _transfer(p, **changes):
    args = dict(link_bandwidth=p["link"], kv_dtype="bf16")
    args.update(changes)
    return kv_transfer_time("Llama-3.1-8B", p["prompt"], **args)


def _prefill_sb(p, flops_per_param=2.0, chips=16):
    m = model_from_totals(parameters=70e9 * flops_per_param / 2.0, kv_bytes_per_token=0)
    return prefill_time(m, pooled_slice(_V5E_82, chips), 8192, weight_dtype="int8", mfu=p["mfu"])


QUESTIONS = [
    Question(
        "references.pop_quiz_step",
        "How to Scale Your Model, 'All About Transformer Inference' (pop quiz): a 30B dense model in int8, "
        "100 kB of int8 KV cache per token, 8192 tokens of context, on a TPU v5e 4x4 slice (16 chips, 8.1e11 B/s "
        "and 1.97e14 bf16 FLOP/s each). Lower bound on one decode step at batch {batch}, taking the slice as one "
        "pooled chip: weights and KV read from HBM, the MLP matmuls compute-bound only if the FLOPs take longer. (ms)",
        answer=_pop_quiz, unit="ms", params={"batch": 4}, variants={"batch": (4, 16, 64, 256)},
        chapter="decode", difficulty="medium",
        mistakes=[
            Mistake("You read one KV cache per step: every sequence of the batch reads its own 819 MB.",
                    lambda p: _pop_quiz(p, kv_per_step=False)),
            Mistake("You used one chip: the slice has 16, each reading its share in parallel.",
                    lambda p: _pop_quiz(p, chips=1)),
            Mistake("int8 is one byte per parameter, not two.", lambda p: _pop_quiz(p, bytes_per_weight=2.0)),
        ]),
    Question(
        "references.kipply_kv_tokens",
        "kipply, 'Transformer Inference Arithmetic', capacity: a 52B model (64 layers, d_model 8192, multi-head) in "
        "16-bit on {gpus} A100-40GB, using all 40e9 bytes of each. How many tokens of KV cache fit beside the weights? "
        "(tokens)",
        answer=_kipply_tokens, unit="tok", params={"gpus": 3}, variants={"gpus": (3, 4, 5, 8)}, rel_tol=0.001,
        chapter="memory", difficulty="easy",
        mistakes=[
            Mistake("That is the published 16 GB / 0.002 GB: the KV of one token is 2,097,152 bytes, not 2e6 "
                    "(0.002 GB rounds it down by 5 %).", lambda p: _kipply_tokens(p, per_token=2e6)),
            Mistake("You counted K but not V: a token stores both, 4 x n_layers x d_model bytes in 16-bit.",
                    lambda p: _kipply_tokens(p, per_token=2 * 64 * 8192)),
            Mistake("You read 40 GB as 40 GiB: the A100's 40 GB here is 40e9 bytes.",
                    lambda p: _kipply_tokens(p, per_token=2_097_152, memory=40 * 2**30)),
        ]),
    Question(
        "references.kipply_batch",
        "kipply, capacity: the same 52B model on {gpus} A100-40GB (all their memory). What is the largest batch of "
        "{context}-token requests whose KV cache fits? (sequences)",
        answer=lambda p: max_batch_size(_kipply_52b(), pooled_slice(_A100_KIPPLY, p["gpus"]), p["context"],
                                        weight_dtype="fp16", kv_dtype="fp16", **_ALL),
        params={"gpus": 3, "context": 2048}, variants={"gpus": (3, 4), "context": (1024, 2048, 4096)}, rel_tol=0.0,
        chapter="memory", difficulty="easy",
        mistakes=[
            Mistake("That rounds the post's '8000 tokens' up to whole requests ('a batch size 4 ... up to 2048 "
                    "tokens'): 4 x 2048 x 2,097,152 bytes is 17.2 GB, more than the 16 GB left. Round down.",
                    lambda p: float(math.floor((p["gpus"] * 40e9 - 104e9) / (p["context"] * 2e6) + 0.5))),
        ]),
    Question(
        "references.llama2_13b_max_batch",
        "How to Scale Your Model, 'Modeling throughput and latency for LLaMA 2-13B': 13e9 parameters in bf16 and "
        "819,200 bytes of bf16 KV per token, on {chips} TPU v5e of 16e9 bytes each (all of it). What is the largest "
        "batch of 8192-token sequences that fits? (sequences)",
        answer=_sb_13b_batch, params={"chips": 8}, variants={"chips": (8, 16, 32)}, rel_tol=0.0,
        chapter="memory", difficulty="easy",
        mistakes=[
            Mistake("The chapter says 'we OOM beyond batch size 16', but its own table shows 133.2 GB at batch 16, "
                    "above the 128 GB of 8 chips: count whole sequences that fit.",
                    lambda p: _sb_13b_batch(p) + 1),
            Mistake("You forgot the weights: 26 GB of the HBM hold the parameters.",
                    lambda p: _sb_13b_batch(p, weights=0.0, per_sequence=6.7108864e9)),
        ]),
    Question(
        "references.gqa_params_fixed",
        "How to Scale Your Model, the LLaMA-2-13B table with a 5x smaller KV cache: keep the parameter count "
        "(13e9, bf16) but use 8 KV heads instead of 40. On 8 TPU v5e (8.2e11 B/s each, pooled), 8192 tokens, what is "
        "the memory-bound step time at batch {batch}? (ms)",
        answer=_gqa_step, unit="ms", params={"batch": 64}, variants={"batch": (1, 16, 64)},
        chapter="decode", difficulty="medium",
        mistakes=[
            Mistake("That recomputes the K/V projections (the book's default, weights='recompute'): the question "
                    "keeps the parameters fixed.", lambda p: _gqa_step(p, weights="recompute")),
            Mistake("You kept the 40-head KV cache: 8 KV heads make it 5x smaller.",
                    lambda p: decode_step_time(_sb_13b(), pooled_slice(_V5E_82, 8), p["batch"], 8192,
                                               overlap="roofline")),
        ]),
    Question(
        "references.kipply_allreduce",
        "kipply, 'latency calculations': a 260B model (80 layers, d_model 16384) on 16 A100s with 300 GB/s links, "
        "tensor parallel. Bandwidth time of the all-reduces of one decode step at batch {batch}, in kipply's "
        "convention (4 messages of d_model 16-bit values per layer and token, the (N - 1)/N rounded to 1). (ms)",
        answer=_kipply_comms, unit="ms", params={"batch": 512}, variants={"batch": (64, 256, 512)},
        chapter="parallelism", difficulty="medium",
        mistakes=[
            Mistake("That is the book's ring (2 (N - 1)/N per all-reduce): the question rounds N - 1 to N.",
                    lambda p: _kipply_comms(p, ring_factor=True)),
            Mistake("You used NVIDIA's 600 GB/s, which adds both directions: kipply uses 300 GB/s each way.",
                    lambda p: _kipply_comms(p, bandwidth=600e9)),
        ]),
    Question(
        "references.deepseek_mfu",
        "How to Scale Your Model, 'All the Transformer Math', Question 7: DeepSeek-V3 (37e9 active parameters) trained "
        "on 14.8e12 tokens in {hours:.3g} H800-hours, in FP8. With 6 N D FLOPs and the H800 SXM's dense FP8 peak (the "
        "H100 SXM's, 1.979e15 FLOP/s), what MFU did it reach? (a fraction)",
        answer=_deepseek, params={"hours": 2.79e6}, variants={"hours": (2.0e6, 2.79e6, 3.5e6)}, rel_tol=0.01,
        chapter="rooflines", difficulty="medium",
        mistakes=[
            Mistake("That uses 1.513e15, the H800 PCIe's dense FP8 (the published answer's 21.7 %): DeepSeek's "
                    "cluster is H800 SXM with NVLink, 1.979e15.", lambda p: _deepseek(p, peak=1.513e15)),
            Mistake("You used the sparse FP8 peak (3.958e15): MFU is against the dense peak.",
                    lambda p: _deepseek(p, peak=3.958e15)),
            Mistake("Training costs 6 N D FLOPs (forward 2 N D, backward 4 N D), not 2 N D.",
                    lambda p: _deepseek(p, factor=2.0)),
        ]),
    Question(
        "references.two_chip_link_roofline",
        "How to Scale Your Model, 'Network communication rooflines': X[B, D] x Y[D, F] in bf16, split along D over "
        "2 chips of 1.97e14 FLOP/s that copy their B x F partial sums at {link:.2g} B/s each way. Above which D is it "
        "compute-bound rather than link-bound? (a number)",
        answer=_link_d, params={"link": 4.5e10}, variants={"link": (4.5e10, 9e10, 1e11)}, rel_tol=0.002,
        chapter="parallelism", difficulty="hard",
        mistakes=[
            Mistake("The partial sums are bf16, 2 bytes each: 2 B F bytes cross the link.",
                    lambda p: _link_d(p, copy_bytes=1.0)),
            Mistake("Each chip does half the FLOPs (B D F of them): don't count the full 2 B D F on one chip.",
                    lambda p: _link_d(p, copy_bytes=4.0)),
        ]),
    Question(
        "references.chips_for_kv",
        "How to Scale Your Model, 'Serving LLaMA': LLaMA 3-70B in int8 (70e9 bytes) with int8 KV (2 x 8 x 128 x 80 "
        "bytes per token), batch {batch} of 32,768-token sequences. How many TPU v5e of 16e9 bytes hold it all? (chips)",
        answer=_chips_bs240, params={"batch": 240}, variants={"batch": (240, 512)}, rel_tol=0.0,
        chapter="memory", difficulty="medium",
        mistakes=[
            Mistake("You rounded the KV cache up before dividing (the published 1.3e12 bytes for batch 240): divide "
                    "the exact bytes, then round the chips up.",
                    lambda p: _chips_bs240(p, kv_total=round(p["batch"] * 32768 * 163840, -11))),
            Mistake("'160 kB' per token is 160 KiB = 163,840 bytes (2 x 8 x 128 x 80), not 160e3.",
                    lambda p: _chips_bs240(p, kv_per_token=160e3)),
        ]),
    Question(
        "references.kv_freed_per_step",
        "How to Scale Your Model, 'Serving LLaMA', prefill question: a decode batch of {batch} sequences with "
        "{prompt}-token prompts and {output}-token answers, in steady state. How many KV tokens are freed per decode "
        "step on average? (tokens)",
        answer=lambda p: kv_tokens_freed_per_step(p["batch"], p["prompt"], p["output"]), unit="tok",
        params={"batch": 32, "prompt": 8192, "output": 4096},
        variants={"batch": (16, 32, 64), "prompt": (1024, 8192), "output": (512, 4096)}, rel_tol=0.001,
        chapter="memory", difficulty="easy",
        mistakes=[
            Mistake("That is the number of sequences that finish per step, B / L_o; each frees L_p + L_o tokens.",
                    lambda p: p["batch"] / p["output"]),
            Mistake("A finished sequence frees its prompt and its answer, L_p + L_o tokens, not the prompt alone.",
                    lambda p: p["batch"] * p["prompt"] / p["output"]),
        ]),
    Question(
        "references.kv_transfer",
        "DistServe-style disaggregation: Llama-3.1-8B prefills a {prompt}-token prompt on one GPU and sends its bf16 "
        "KV cache to a decode GPU over a {link:.3g} B/s link. How long does the transfer take? (ms)",
        answer=_transfer, unit="ms", params={"prompt": 803, "link": 50e9},
        variants={"prompt": (512, 803, 4096), "link": (25e9, 50e9, 450e9)}, chapter="scheduling", difficulty="easy",
        mistakes=[
            Mistake("You moved K but not V: the cache holds both, 131,072 bytes per token.",
                    lambda p: _transfer(p) / 2),
            Mistake("That reads the link in bits: 400 Gb/s is 50 GB/s, and the question gives bytes per second.",
                    lambda p: _transfer(p) * 8),
        ]),
    Question(
        "references.prefill_at_40_percent",
        "How to Scale Your Model, 'Serving LLaMA': a prefill of 8192 tokens of a 70B model (2 N FLOPs per token, "
        "attention ignored) on 16 TPU v5e at 1.97e14 bf16 FLOP/s and {mfu:.0%} FLOP utilisation. How long? (s)",
        answer=_prefill_sb, unit="s", params={"mfu": 0.4}, variants={"mfu": (0.3, 0.4, 0.5, 0.6)},
        chapter="prefill", difficulty="easy",
        mistakes=[
            Mistake("One token costs 2 FLOPs per parameter (a multiply and an add), not 1.",
                    lambda p: _prefill_sb(p, flops_per_param=1.0)),
            Mistake("You used one chip: the 16 chips share the FLOPs.", lambda p: _prefill_sb(p, chips=1)),
        ]),
    Question(
        "references.unfused_attention_intensity",
        "Baseten, 'A guide to LLM inference and performance': standard (unfused) attention of one head over "
        "{tokens} tokens, head size 128, fp16, which writes the N x N score matrix to HBM and reads it back: "
        "4 N^2 d FLOPs over 8 N^2 + 8 N d bytes. Its arithmetic intensity? (FLOP/byte)",
        answer=lambda p: prefill_attention_intensity("Llama-2-7B", p["tokens"], causal=False, kernel="unfused"),
        unit="FLOP/B", params={"tokens": 4096}, variants={"tokens": (1024, 2048, 4096)}, rel_tol=0.01,
        chapter="rooflines", difficulty="medium",
        mistakes=[
            Mistake("That is a fused kernel (FlashAttention), which never writes the scores: this one does.",
                    lambda p: prefill_attention_intensity("Llama-2-7B", p["tokens"], causal=False)),
            Mistake("A causal mask halves the FLOPs but the unfused kernel still writes the whole N x N matrix: the "
                    "question counts every pair.",
                    lambda p: prefill_attention_intensity("Llama-2-7B", p["tokens"], kernel="unfused")),
        ]),
    Question(
        "references.ici_bound_degree",
        "How to Scale Your Model, 'All About Transformer Inference', generation: a decode matmul of a D x {ffn} bf16 "
        "weight sharded Y ways, with its {batch} x D bf16 activations sent over ICI, on a chip whose HBM is 8 times "
        "faster than its ICI. Beyond which Y does ICI take longer than reading the weight shard? (a number)",
        answer=lambda p: (memory_time(8192 * p["ffn"] * 2, _HBM8) / link_time(p["batch"] * 8192 * 2, _HBM8)),
        params={"ffn": 16384, "batch": 32}, variants={"ffn": (16384, 28672), "batch": (16, 32, 64)}, rel_tol=0.001,
        chapter="parallelism", difficulty="hard",
        mistakes=[
            Mistake("You inverted the ratio: the crossing is the weight read of one chip over the link time, "
                    "Y = F / (B beta).", lambda p: p["batch"] * 8.0 / p["ffn"]),
            Mistake("beta = W_hbm / W_ici = 8 divides the degree: Y = F / (B beta), not F beta / B.",
                    lambda p: p["ffn"] * 8.0 / p["batch"]),
        ]),
    Question(
        "references.e2e_with_n_steps",
        "Databricks, 'LLM Inference Performance Engineering' writes latency = TTFT + TPOT x (tokens generated). With "
        "TTFT {ttft:.2g} s, TPOT {tpot:.3g} s and {n} output tokens, what latency does that convention give? (s)",
        answer=lambda p: e2e_from_ttft_tpot(p["ttft"], p["tpot"], p["n"], decode_steps="n"), unit="s",
        params={"ttft": 0.3, "tpot": 0.025, "n": 20},
        variants={"ttft": (0.2, 0.3, 0.5), "tpot": (0.02, 0.025, 0.04), "n": (10, 20, 50)}, rel_tol=0.001,
        chapter="anatomy", difficulty="easy",
        mistakes=[
            Mistake("That is the book's (vLLM's) convention, n - 1 gaps after the first token: this question "
                    "follows Databricks and counts n.", lambda p: e2e_from_ttft_tpot(p["ttft"], p["tpot"], p["n"])),
        ]),
]

_HBM8 = Accelerator.from_numbers("HBM/ICI = 8", memory_bytes=1e12, memory_bandwidth=8e11, peak_flops={"bf16": 1e15},
                                 interconnect_bandwidth=1e11)

# checked once: the model the kipply questions use is the post's (2,097,152 bytes of KV per token)
assert kv_bytes_per_token(_kipply_52b(), "fp16") == 2_097_152 and parameter_count(_kipply_52b()) == 52e9
