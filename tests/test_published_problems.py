"""Worked problems from the public references on serving arithmetic, posed in a few lines of the public API.

Each problem states its source, where in it (section, question or equation), the published answer, the
tolerance (the rounding of the published figure), and the convention it needs. When the published answer
is wrong, the problem keeps it, gives the corrected one, and says why; the test then checks both that the
library gives the corrected answer and that the published one is really off by more than its rounding.

Sources, as read for this file (2026-12):

* kipply (Carol Chen), "Transformer Inference Arithmetic", 2022-03-30,
  github:kipply/blog:blog/content/endorsed/transformer_inference_arithmetic.md@09819d42.
* J. Austin et al., "How to Scale Your Model" (Google DeepMind, 2025), github:jax-ml/scaling-book @0819a7d
  (2025-02-18): roofline.md, transformers.md, inference.md, applied-inference.md.
* Stanford CS336 (Spring 2025), lecture 10 "Inference", github:stanford-cs336/lectures:lecture_10.py@8ad2677.
* Baseten (V. Shenoy, P. Kiely), "A guide to LLM inference and performance", 2023-11-17,
  https://www.baseten.co/blog/llm-transformer-inference-guide/ (the stored copy shows its opening; the
  208.3 ops:byte of the A10 is read there, the 62 ops:byte of attention is the guide's figure for its
  8N^2 + 8Nd traffic and is re-derived here).
* Databricks (MosaicML), "LLM Inference Performance Engineering: Best Practices", 2023-10-12 (the MBU example).

Hardware is stated the way each source states it (kipply's A100 at 1.5e12 B/s; the scaling book's TPU v5e at
1.97e14 FLOP/s and 8.1e11 or 8.2e11 B/s), so a difference is never a catalog difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pytest

from servingmath import decode, memory, models, parallelism, prefill, roofline, sharding, validation
from servingmath.hardware import Accelerator
from servingmath.models import ModelConfig, model_from_totals, with_kv_heads
from servingmath.sharding import pooled_slice


@dataclass(frozen=True)
class Problem:
    """One published problem: what it asks, the published answer and how the library poses it."""

    id: str
    source: str
    location: str
    question: str
    published: float
    answer: Callable[[], float]
    rel: float = 0.01
    convention: str = "the book's defaults"
    corrected: float | None = None
    why: str = ""


# ---------------------------------------------------------------- hardware as the sources state it
A100_KIPPLY = Accelerator.from_numbers("A100 (kipply)", memory_bytes=40e9, memory_bandwidth=1.5e12,
                                       peak_flops={"bf16": 312e12}, interconnect_bandwidth=300e9)
V5E_81 = Accelerator.from_numbers("TPU v5e (8.1e11)", memory_bytes=16e9, memory_bandwidth=8.1e11,
                                  peak_flops={"bf16": 1.97e14, "int8": 3.94e14})
V5E_82 = Accelerator.from_numbers("TPU v5e (8.2e11)", memory_bytes=16e9, memory_bandwidth=8.2e11,
                                  peak_flops={"bf16": 1.97e14, "int8": 3.94e14})
ALL = dict(gpu_memory_utilization=1.0)   # textbook problems use all of the memory

# ---------------------------------------------------------------- models as the sources state them
# kipply's 52B (Anthropic's: d_model 8192, 64 layers, multi-head), every parameter 2 bytes
KIPPLY_52B = model_from_totals(parameters=52e9, n_layers=64, hidden_size=8192, n_heads=64, n_kv_heads=64,
                               head_dim=128, kv_dtype="fp16", name="52B (kipply)")
# the "2 x 12 n_layers d_model^2" model kipply uses for its forward pass, and Gopher-sized 260B
KIPPLY_12LD2 = model_from_totals(parameters=12 * 64 * 8192**2, kv_bytes_per_token=0, name="12 L D^2")
GOPHER_260B = model_from_totals(parameters=260e9, kv_bytes_per_token=0, n_layers=80, hidden_size=16384)
KIPPLY_13B = model_from_totals(parameters=12 * 40 * 5120**2, kv_bytes_per_token=0)
# How to Scale Your Model's LLaMA-2-13B (13e9 parameters, 40 layers, 40 KV heads of 128)
SB_13B = model_from_totals(parameters=13e9, n_layers=40, hidden_size=5120, n_heads=40, n_kv_heads=40,
                           head_dim=128, attention_flops_per_pair=0.0, name="LLaMA-2-13B (scaling book)")
# its LLaMA-3-70B in int8: 70e9 parameters, 8 KV heads of 128 over 80 layers
SB_70B = model_from_totals(parameters=70e9, n_layers=80, n_kv_heads=8, head_dim=128, kv_dtype="int8",
                           name="LLaMA-3-70B (scaling book)")
# the transformer chapter's Question 1 model and the inference chapter's worked-problem model
SB_Q1 = ModelConfig(name="scaling book Q1", n_layers=64, hidden_size=4096, n_heads=32, n_kv_heads=32, head_dim=128,
                    ffn_size=16384, ffn_gated=True, vocab_size=32000, norms_per_layer=1)
SB_INF = ModelConfig(name="scaling book worked problems", n_layers=64, hidden_size=4096, n_heads=32, n_kv_heads=8,
                     head_dim=256, ffn_size=16384, ffn_gated=True, vocab_size=32128, tied_embeddings=True)


def _sb_13b_step(batch, model=SB_13B):
    """LLaMA-2-13B on 8 TPU v5e, the 'Theoretical Min Step Time' (memory only): the roofline at 8192 tokens."""
    return decode.decode_step_time(model, pooled_slice(V5E_82, 8), batch, 8192, overlap="roofline")


def _remaining(dtype, chips):
    return 16e9 * chips - models.weight_bytes(SB_70B, dtype)


def _caches(dtype, chips):
    return memory.max_batch_size(SB_70B, pooled_slice(V5E_82, chips), 8192, weight_dtype=dtype, kv_dtype=dtype, **ALL)


def _qps_per_chip(dtype, chips):
    b = _caches(dtype, chips)
    step = decode.decode_step_time(SB_70B, pooled_slice(V5E_82, chips), b, 8192, weight_dtype=dtype, kv_dtype=dtype)
    return b / (step * 512 * chips)


def _per_matmul_degree(d_ff, batch, hbm_over_ici=8.0):
    """How to Scale Your Model: the model-parallel degree at which a decode matmul's ICI time (its B x D
    bf16 activations) reaches its weight HBM time (D x F bf16 over Y chips): Y = F / (B beta)."""
    acc = Accelerator.from_numbers("HBM/ICI = 8", memory_bytes=1e12, memory_bandwidth=8.0 * 1e11,
                                   peak_flops={"bf16": 1e15}, interconnect_bandwidth=1e11)
    d = 8192
    hbm_one_chip = roofline.memory_time(d * d_ff * 2, acc)
    ici = roofline.link_time(batch * d * 2, acc)
    return hbm_one_chip / ici * (8.0 / hbm_over_ici)


PROBLEMS = [
    # ---------------------------------------------------------------- kipply, Transformer Inference Arithmetic
    Problem("kipply.kv_bytes_per_token", "kipply", "kv cache",
            "KV-cache bytes per token of the 52B model (64 layers, d_model 8192) in 16-bit",
            2_097_152, lambda: models.kv_bytes_per_token(KIPPLY_52B, "fp16"), rel=1e-12),
    Problem("kipply.kv_flops_per_token", "kipply", "kv cache",
            "FLOPs to compute k and v of one token over all layers, 2 x 2 x n_layers x d_model^2",
            17_179_869_184, lambda: 2 * models.kv_projection_parameter_count(KIPPLY_52B), rel=1e-12),
    Problem("kipply.kv_share_of_forward", "kipply", "kv cache",
            "share of a token's forward-pass FLOPs that computes its k and v",
            1 / 6, lambda: 2 * 2 * 64 * 8192**2 / models.flops_per_token(KIPPLY_12LD2), rel=1e-12,
            convention="embeddings ignored (2 x 12 L D^2 FLOPs per token)"),
    Problem("kipply.flops_byte_ratio", "kipply", "kv cache (Flops vs Memory Boundedness)",
            "FLOPs:byte ratio of an A100 at 312e12 FLOP/s and 1.5e12 B/s",
            208, lambda: roofline.ridge_point(A100_KIPPLY), rel=0.001),
    Problem("kipply.forward_pass_one_gpu", "kipply", "kv cache",
            "a full forward pass of the 52B model for up to 208 tokens on one A100, seconds",
            0.069, lambda: prefill.prefill_time(KIPPLY_12LD2, A100_KIPPLY, 208, weight_dtype="fp16"), rel=0.01,
            convention="every parameter read and multiplied (totals, embeddings ignored)"),
    Problem("kipply.forward_pass_four_gpus", "kipply", "kv cache",
            "the same on four GPUs in parallel (~17 ms)",
            0.017, lambda: prefill.prefill_time(KIPPLY_12LD2, pooled_slice(A100_KIPPLY, 4), 208, weight_dtype="fp16"),
            rel=0.02, convention="a pooled slice: no communication"),
    Problem("kipply.weights_52b", "kipply", "capacity",
            "bytes of the 52B model's weights in 16-bit",
            104e12, lambda: models.weight_bytes(KIPPLY_52B, "fp16"), rel=1e-9, corrected=104e9,
            why="the text writes 52e12 x 2 = 104e12 bytes; 52B parameters are 52e9, so 104e9 bytes (its own "
                "'approx 104GB' is right)"),
    Problem("kipply.kv_tokens_three_gpus", "kipply", "capacity",
            "tokens of KV cache three A100-40GB hold beside the 52B model (16 GB left)",
            8000, lambda: memory.max_kv_tokens(KIPPLY_52B, pooled_slice(A100_KIPPLY, 3), weight_dtype="fp16",
                                               kv_dtype="fp16", **ALL),
            rel=0.05, convention="gpu_memory_utilization=1.0, a pooled slice",
            why="7629 tokens; the published 16 / 0.002 rounds 2,097,152 bytes to 0.002 GB, within its one "
                "significant figure"),
    Problem("kipply.batch_three_gpus", "kipply", "capacity",
            "the largest batch of 2048-token requests in those 16 GB",
            4, lambda: memory.max_batch_size(KIPPLY_52B, pooled_slice(A100_KIPPLY, 3), 2048, weight_dtype="fp16",
                                             kv_dtype="fp16", **ALL),
            rel=0.0, convention="gpu_memory_utilization=1.0, a pooled slice", corrected=3,
            why="4 x 2048 x 2,097,152 bytes = 17.2 GB > 16 GB: only 3 fit (7629 tokens, not 8000)"),
    Problem("kipply.kv_tokens_four_gpus", "kipply", "capacity",
            "tokens of KV cache four A100-40GB hold beside the 52B model (56 GB left)",
            23000, lambda: memory.max_kv_tokens(KIPPLY_52B, pooled_slice(A100_KIPPLY, 4), weight_dtype="fp16",
                                                kv_dtype="fp16", **ALL),
            rel=0.01, convention="gpu_memory_utilization=1.0, a pooled slice", corrected=26_702,
            why="56e9 / 2,097,152 = 26,702 tokens; the published 56 / 0.002 is 28,000, not 23,000 (an arithmetic slip)"),
    Problem("kipply.gopher_small_batch", "kipply", "latency calculations",
            "decode step of a 260B model on 16 A100s at batch 1 (memory-bound), seconds",
            0.0217, lambda: decode.decode_step_time(GOPHER_260B, pooled_slice(A100_KIPPLY, 16), 1, 0,
                                                    weight_dtype="fp16"), rel=0.005,
            convention="every parameter read; communication apart"),
    Problem("kipply.comms_latency", "kipply", "latency calculations",
            "latency of the 4 x n_layers messages of 8 us each, 80 layers, seconds",
            2560e-6, lambda: parallelism.tensor_parallel_communication_time(
                GOPHER_260B, A100_KIPPLY, 0, tensor_parallel=16, allreduce_base_latency=16e-6), rel=1e-9,
            convention="two 8 us messages per all-reduce: allreduce_base_latency=16e-6",
            why="the text's '2 x 4 x n_layers x 8us = 4 x 80 x 8us' has a stray factor 2: its own formula, "
                "4 x n_layers x 8 us, gives the published 2560 us"),
    Problem("kipply.comms_throughput_batch_1", "kipply", "latency calculations",
            "throughput cost of the all-reduces at batch 1, 260B on 16 GPUs (~35 us)",
            35e-6, lambda: decode.decode_step_parts(GOPHER_260B, A100_KIPPLY, 1, 0, tensor_parallel=16,
                                                    allreduce_ring_factor=False)["communication"], rel=0.01,
            convention="allreduce_ring_factor=False (the (N-1)/N rounded to 1)"),
    Problem("kipply.gopher_large_batch_compute", "kipply", "latency calculations",
            "compute time of a decode step at batch 512, 260B on 16 A100s, seconds",
            0.053, lambda: decode.decode_step_parts(GOPHER_260B, pooled_slice(A100_KIPPLY, 16), 512, 0)
            ["linear_compute"], rel=0.01),
    Problem("kipply.gopher_large_batch_comms", "kipply", "latency calculations",
            "all-reduce bandwidth time at batch 512 (8 x 80 x 16384 x 512 / 300e9), seconds",
            0.018, lambda: decode.decode_step_parts(GOPHER_260B, A100_KIPPLY, 512, 0, tensor_parallel=16,
                                                    allreduce_ring_factor=False)["communication"], rel=0.01,
            convention="allreduce_ring_factor=False"),
    Problem("kipply.flops_per_comm_byte", "kipply", "batch sizes",
            "an A100's FLOPs per byte of communication, 312e12 / 300e9",
            1040, lambda: roofline.link_ridge_point(A100_KIPPLY), rel=1e-9),
    Problem("kipply.flops_per_token_52b", "kipply", "flops counting",
            "forward FLOPs per token of the 8192-wide, 64-layer model, n_layers x 24 x d_model^2",
            103_079_215_104, lambda: models.flops_per_token(KIPPLY_12LD2), rel=1e-12,
            convention="embeddings ignored"),
    Problem("kipply.13b_one_gpu", "kipply", "comparing against real benchmarks",
            "expected decode step of the 13B model (40 layers, 5120 wide) at batch 1 on one A100, seconds",
            0.0168, lambda: decode.decode_step_time(KIPPLY_13B, A100_KIPPLY, 1, 0, weight_dtype="fp16"), rel=0.005),
    Problem("kipply.13b_two_gpus", "kipply", "comparing against real benchmarks",
            "the same on two GPUs, seconds",
            0.0084, lambda: decode.decode_step_time(KIPPLY_13B, pooled_slice(A100_KIPPLY, 2), 1, 0,
                                                    weight_dtype="fp16"), rel=0.005,
            convention="a pooled slice (the ~1 ms of comms estimated apart)"),
    Problem("kipply.ratio_at_90_percent", "kipply", "comparing against real benchmarks",
            "the FLOPs:byte ratio at 90 % of the bandwidth, 312e12 / (1.5e12 x 0.9)",
            231, lambda: roofline.ridge_point(A100_KIPPLY, mbu=0.9), rel=0.001),
    Problem("kipply.mlp_matmul_time", "kipply", "comparing against real benchmarks",
            "compute time of one MLP matmul, 512 x 4 x 5120^2 x 2 / 312e12, seconds",
            344e-6, lambda: roofline.compute_time(roofline.matmul_flops(512, 5120, 4 * 5120), A100_KIPPLY), rel=0.001),
    Problem("kipply.attention_projection_time", "kipply", "comparing against real benchmarks",
            "compute time of one attention projection, 512 x 5120^2 x 2 / 312e12, seconds",
            86e-6, lambda: roofline.compute_time(roofline.matmul_flops(512, 5120, 5120), A100_KIPPLY), rel=0.001),
    Problem("kipply.exercise7_compute", "kipply", "exercises, 7",
            "large-batch compute of the 52B model on 4 GPUs at batch 256 (about 21 ms)",
            0.021, lambda: decode.decode_step_parts(KIPPLY_52B, pooled_slice(A100_KIPPLY, 4), 256, 0)
            ["linear_compute"], rel=0.02),
    Problem("kipply.exercise7_comms", "kipply", "exercises, 7",
            "its all-reduce time (about 4 ms)",
            0.004, lambda: decode.decode_step_parts(KIPPLY_52B, A100_KIPPLY, 256, 0, tensor_parallel=4,
                                                    allreduce_ring_factor=False)["communication"], rel=0.125,
            convention="allreduce_ring_factor=False; 'about 4 ms' is one significant figure (3.6 ms)"),

    # ---------------------------------------------------------------- How to Scale Your Model, rooflines
    Problem("scaling.h100_1e12_flops", "How to Scale Your Model", "All About Rooflines, 'Where does the time go'",
            "seconds for 1e12 FLOPs on an H100 in bf16", 1.01e-3, lambda: roofline.compute_time(1e12, "H100"),
            rel=0.005),
    Problem("scaling.v5e_ridge", "How to Scale Your Model", "All About Rooflines, matrix multiplication",
            "critical batch of a bf16 matmul on TPU v5e, 1.97e14 / 8.2e11", 240,
            lambda: roofline.critical_batch_size(V5E_82), rel=0.002),
    Problem("scaling.int8_matmul", "How to Scale Your Model", "All About Rooflines, Question 1",
            "critical batch of an int8 x int8 matmul at 3.94e14 OP/s and 8.1e11 B/s", 243,
            lambda: roofline.critical_batch_size(V5E_81, weight_dtype="int8", compute_dtype="int8"), rel=0.002),
    Problem("scaling.int8_weights_bf16_math", "How to Scale Your Model", "All About Rooflines, Question 2",
            "critical batch with int8 weights and bf16 math", 120,
            lambda: roofline.critical_batch_size(V5E_82, weight_dtype="int8"), rel=0.002),
    Problem("scaling.h100_critical_batch", "How to Scale Your Model", "All About Rooflines, Problem 5",
            "critical batch of an H100 from its spec sheet (dense: half the sparse 1.979e15)", 298,
            lambda: roofline.critical_batch_size("H100"), rel=0.01,
            convention="dense FLOP/s; the published rounds 989.5 TFLOP/s to 1e15 (295.3 with the sheet's figure)"),
    Problem("scaling.two_chip_link_roofline", "How to Scale Your Model", "All About Rooflines, network rooflines",
            "D above which a matmul sharded over D on 2 chips (4.5e10 B/s each way) is compute-bound", 8755,
            lambda: 8192 * (lambda t: t["link"] / t["compute"])(
                roofline.sharded_matmul_times(V5E_82, 128, 8192, 8192, n_shards=2, link_bandwidth=4.5e10)), rel=0.001),
    # ---------------------------------------------------------------- How to Scale Your Model, transformers
    Problem("scaling.q1_parameters", "How to Scale Your Model", "All the Transformer Math, Question 1",
            "parameters of D = 4096, F = 4D, V = 32,000, L = 64 (gated MLP, untied embeddings)", 16e9,
            lambda: models.parameter_count(SB_Q1), rel=0.001, corrected=17.44e9,
            why="the published 16e9 substitutes 4e3 for 4096 and 16e3 for 16384; the exact count is 17.44e9"),
    Problem("scaling.q1_attention_share", "How to Scale Your Model", "All the Transformer Math, Question 1",
            "share of the block parameters in attention, 4 D^2 / (4 D^2 + 3 D F)", 0.25,
            lambda: (lambda attn: attn / (attn + 64 * 3 * 4096 * 16384))(
                2 * 64 * 4096 * 32 * 128 + models.kv_projection_parameter_count(SB_Q1)), rel=1e-12),
    Problem("scaling.q1_kv_per_token", "How to Scale Your Model", "All the Transformer Math, Question 1",
            "KV bytes per token with int8 KVs (512 kB, binary)", 512 * 1024,
            lambda: models.kv_bytes_per_token(SB_Q1, "int8"), rel=1e-12),
    Problem("scaling.q5_attention_equals_qkvo", "How to Scale Your Model", "All the Transformer Math, Question 5",
            "sequence length at which self-attention FLOPs equal the Q/K/V/O projection FLOPs (T = 2D)", 8192,
            lambda: 2 * (2 * 64 * 4096 * 32 * 128 + models.kv_projection_parameter_count(SB_Q1))
            / models.attention_flops_per_pair(SB_Q1), rel=1e-12,
            convention="the full score matrix (T^2 pairs)"),
    Problem("scaling.q7_deepseek_mfu", "How to Scale Your Model", "All the Transformer Math, Question 7",
            "MFU of DeepSeek-V3's training: 6 x 37e9 x 14.8e12 over 2.79M H800-hours", 0.217,
            lambda: roofline.training_mfu(37e9, "H100", 14.8e12, 2.79e6 * 3600, dtype="fp8"), rel=0.01,
            corrected=0.165,
            why="the published answer takes 1.513e15 FP8 FLOP/s from the H800 *PCIe* sheet; DeepSeek trained on "
                "H800 SXM nodes (NVLink), which have the H100 SXM's 1.979e15 dense FP8 FLOP/s: MFU 16.5 %"),
    Problem("scaling.q7_deepseek_mfu_as_stated", "How to Scale Your Model", "All the Transformer Math, Question 7",
            "the same with the peak the answer uses, 1.513e15", 0.217,
            lambda: roofline.training_mfu(37e9, Accelerator.from_numbers(
                "H800 PCIe sheet", memory_bytes=80e9, memory_bandwidth=2e12, peak_flops={"fp8": 1.513e15}),
                14.8e12, 2.79e6 * 3600, dtype="fp8"), rel=0.005),
    Problem("scaling.q4_decode_attention_gqa", "How to Scale Your Model", "All the Transformer Math, Question 4",
            "decode attention intensity S G / (G + S) for G = 8, S = 4096, bf16", 8 * 4096 / (8 + 4096),
            lambda: roofline.decode_attention_intensity("Llama-3.1-70B", 4096), rel=1e-12),
    Problem("scaling.q4_prefill_attention_gqa", "How to Scale Your Model", "All the Transformer Math, Question 4",
            "prefill attention intensity T G / (G + 1) for G = 8, T = 4096", 4096 * 8 / 9,
            lambda: roofline.prefill_attention_intensity("Llama-3.1-70B", 4096, causal=False), rel=1e-12,
            convention="causal=False (the full score matrix)"),
    # ---------------------------------------------------------------- How to Scale Your Model, inference
    Problem("scaling.int8_int8_critical_batch", "How to Scale Your Model", "All About Transformer Inference, linear ops",
            "critical batch with int8 parameters and int8 math on v5e (400 TOP/s)", 240,
            lambda: roofline.critical_batch_size(V5E_82, weight_dtype="int8", compute_dtype="int8"), rel=0.002),
    Problem("scaling.prefill_attention_compute_bound", "How to Scale Your Model", "All About Transformer Inference, attention",
            "prompt length beyond which MHA prefill attention (intensity T / 2) is compute-bound on v5e", 480,
            lambda: roofline.ridge_point(V5E_82)
            / (roofline.prefill_attention_intensity("Llama-2-7B", 1000, causal=False) / 1000), rel=0.002,
            convention="causal=False, MHA in bf16"),
    Problem("scaling.pop_quiz_batch_4", "How to Scale Your Model", "All About Transformer Inference, pop quiz",
            "lower bound on a decode step: 30B int8, 100 kB/token int8 KV, 8192 tokens, 4x4 v5e, batch 4", 2.5e-3,
            lambda: decode.decode_step_time(model_from_totals(parameters=30e9, kv_bytes_per_token=100e3, kv_dtype="int8"),
                                            pooled_slice(V5E_81, 16), 4, 8192, weight_dtype="int8", kv_dtype="int8"),
            rel=0.01, convention="totals, a pooled slice", corrected=2.568e-3,
            why="the answer's own expression (4 x 819e6 + 30e9) / (16 x 8.1e11) is 2.57 ms; '2.5 ms' truncates it"),
    Problem("scaling.pop_quiz_batch_256", "How to Scale Your Model", "All About Transformer Inference, pop quiz",
            "the same at batch 256 (compute-bound MLP)", 21e-3,
            lambda: decode.decode_step_time(model_from_totals(parameters=30e9, kv_bytes_per_token=100e3, kv_dtype="int8"),
                                            pooled_slice(V5E_81, 16), 256, 8192, weight_dtype="int8", kv_dtype="int8"),
            rel=0.01, convention="totals, a pooled slice; the hybrid overlap is the book's general equation"),
    Problem("scaling.llama2_13b_kv_sequence", "How to Scale Your Model", "All About Transformer Inference, memory",
            "KV cache of one 8192-token sequence of LLaMA-2-13B in bf16 (6.7 GB)", 6.7e9,
            lambda: memory.kv_bytes_per_sequence(SB_13B, 8192), rel=0.005),
    *[Problem(f"scaling.llama2_13b_step_b{b}", "How to Scale Your Model",
              "All About Transformer Inference, 'Modeling throughput and latency for LLaMA 2-13B'",
              f"memory-bound step time on 8 TPU v5e at batch {b}, 8192 tokens", t,
              (lambda b=b: _sb_13b_step(b)), rel=0.005,
              convention="overlap='roofline', totals (13e9 parameters all read), a pooled slice")
      for b, t in [(1, 4.98e-3), (8, 12.13e-3), (16, 20.30e-3), (32, 36.65e-3), (64, 69.33e-3), (240, 249.09e-3)]],
    Problem("scaling.llama2_13b_throughput_b240", "How to Scale Your Model",
            "All About Transformer Inference, LLaMA 2-13B table", "throughput at batch 240, tokens/s", 963.53,
            lambda: 240 / _sb_13b_step(240), rel=0.005),
    Problem("scaling.llama2_13b_oom", "How to Scale Your Model", "All About Transformer Inference, LLaMA 2-13B",
            "the largest batch of 8192-token sequences in 8 x 16 GB ('we OOM beyond batch size 16')", 16,
            lambda: memory.max_batch_size(SB_13B, pooled_slice(V5E_82, 8), 8192, **ALL), rel=0.0, corrected=15,
            why="16 sequences need 26 + 16 x 6.7 = 133 GB (the table's own row) > 128 GB: 15 is the largest"),
    *[Problem(f"scaling.llama2_13b_gqa_b{b}", "How to Scale Your Model",
              "All About Transformer Inference, the 5x smaller KV cache table",
              f"step time with 8 KV heads and the parameter count kept, batch {b}", t,
              (lambda b=b: _sb_13b_step(b, with_kv_heads(SB_13B, 8, weights="fixed"))), rel=0.005,
              convention="with_kv_heads(weights='fixed')")
      for b, t in [(1, 4.17e-3), (64, 17.04e-3), (240, 52.99e-3)]],
    Problem("scaling.inference_q1_parameters", "How to Scale Your Model", "All About Transformer Inference, Question 1",
            "parameters of the worked-problem model (L 64, D 4096, F 16384, 32 heads of 256, 8 KV heads, tied)", 18.4e9,
            lambda: models.parameter_count(SB_INF), rel=0.003),
    Problem("scaling.ici_bound_model_parallelism", "How to Scale Your Model", "All About Transformer Inference, generation",
            "model parallelism before a decode matmul is ICI-bound, F / (B beta) for F 16384, B 32, beta 8", 64,
            lambda: _per_matmul_degree(16384, 32), rel=1e-9),
    Problem("scaling.latency_bound_buffer", "How to Scale Your Model", "All About Transformer Inference, Appendix C",
            "buffer below which an 8-way collective at 4.5e10 B/s and 1 us per hop is latency-bound", 360e3,
            lambda: sharding.allreduce_latency_bound_bytes(8, 4.5e10, latency=1e-6), rel=1e-9),
    # ---------------------------------------------------------------- How to Scale Your Model, serving LLaMA
    Problem("scaling.llama3_70b_kv_per_token", "How to Scale Your Model", "Serving LLaMA, first question",
            "LLaMA 3-70B KV bytes per token in int8 (160 kB, binary)", 160 * 1024,
            lambda: models.kv_bytes_per_token("Llama-3.1-70B", "int8"), rel=1e-12),
    Problem("scaling.llama3_70b_kv_32k", "How to Scale Your Model", "Serving LLaMA, first question",
            "KV cache of one 32k-token sequence (5.3 GB)", 5.3e9,
            lambda: memory.kv_bytes_per_sequence(SB_70B, 32768, kv_dtype="int8"), rel=0.015,
            convention="the published multiplies by 162e3 (163,840 rounded): within 1.3 %"),
    Problem("scaling.llama3_70b_kv_bs240", "How to Scale Your Model", "Serving LLaMA, first question",
            "KV cache of 240 such sequences (1.3 TB)", 1.3e12,
            lambda: memory.memory_footprint(SB_70B, 240, 32768, kv_dtype="int8")["kv_cache"], rel=0.01),
    Problem("scaling.llama3_70b_chips_bs240", "How to Scale Your Model", "Serving LLaMA, first question",
            "TPU v5e chips to hold the parameters and that KV cache ('about 86')", 86,
            lambda: memory.chips_needed(SB_70B, V5E_82, 240, 32768, weight_dtype="int8", kv_dtype="int8", **ALL),
            rel=0.0, corrected=85,
            why="(70e9 + 240 x 32768 x 163,840) / 16e9 = 84.9, so 85 chips; the published rounds the KV cache up to 1.3e12"),
    Problem("scaling.llama3_70b_kv_bs32", "How to Scale Your Model", "Serving LLaMA, second question",
            "KV cache at batch 32, 8192 tokens, int8 (41.9e9 bytes)", 41.9e9,
            lambda: memory.memory_footprint(SB_70B, 32, 8192, kv_dtype="int8")["kv_cache"], rel=0.005,
            corrected=42.95e9,
            why="the answer multiplies by 160e3, but '160 kB' per token is 160 KiB = 163,840 bytes (its own "
                "2 x 8 x 128 x 80): 42.95e9 bytes, 2.4 % more"),
    Problem("scaling.llama3_70b_smallest_slice", "How to Scale Your Model", "Serving LLaMA, second question",
            "smallest number of v5e chips for batch 32 at 8192 tokens, int8 ('7 TPUs')", 7,
            lambda: memory.chips_needed(SB_70B, V5E_82, 32, 8192, weight_dtype="int8", kv_dtype="int8", **ALL),
            rel=0.0, corrected=8,
            why="70e9 + 42.95e9 = 113 GB does not fit in 7 x 16 GB = 112 GB: 8 chips (the answer's 4x2 slice)"),
    Problem("scaling.llama3_70b_step_4x2", "How to Scale Your Model", "Serving LLaMA, third question",
            "decode step on a 4x2 slice (8 chips at 8.1e11 B/s), batch 32, 8192 tokens, int8, seconds", 17e-3,
            lambda: decode.decode_step_time(SB_70B, pooled_slice(V5E_81, 8), 32, 8192, weight_dtype="int8",
                                            kv_dtype="int8"), rel=0.03,
            convention="totals, a pooled slice; 17 ms from the rounded 112 GB (17.4 ms with 113 GB)"),
    Problem("scaling.llama3_70b_throughput_per_chip", "How to Scale Your Model", "Serving LLaMA, third question",
            "throughput per chip on the 4x2, tokens/s (235)", 235,
            lambda: 32 / 8 / decode.decode_step_time(SB_70B, pooled_slice(V5E_81, 8), 32, 8192, weight_dtype="int8",
                                                     kv_dtype="int8"), rel=0.03,
            convention="from the rounded 17 ms step (229 tok/s from 17.4 ms)"),
    Problem("scaling.llama3_70b_step_4x4", "How to Scale Your Model", "Serving LLaMA, third question",
            "decode step on a 4x4 slice, seconds (8.5 ms)", 8.5e-3,
            lambda: decode.decode_step_time(SB_70B, pooled_slice(V5E_81, 16), 32, 8192, weight_dtype="int8",
                                            kv_dtype="int8"), rel=0.03, convention="as above"),
    *[Problem(f"scaling.llama3_70b_min_chips_{dtype}", "How to Scale Your Model", "Serving LLaMA, smallest topology",
              f"smallest power-of-two slice of v5e for the {dtype} parameters", chips,
              (lambda dtype=dtype: memory.chips_needed(SB_70B, V5E_82, weight_dtype=dtype, round_up_to="power_of_two",
                                                       **ALL)), rel=0.0, convention="round_up_to='power_of_two'")
      for dtype, chips in [("bf16", 16), ("int8", 8), ("int4", 4)]],
    Problem("scaling.llama3_70b_int4_size", "How to Scale Your Model", "Serving LLaMA, smallest-topology table",
            "bytes of the int4 parameters (table: 45 GB)", 45e9, lambda: models.weight_bytes(SB_70B, "int4"),
            rel=0.001, corrected=35e9, why="70e9 parameters at half a byte are 35 GB, not 45 GB"),
    *[Problem(f"scaling.llama3_70b_free_hbm_{dtype}", "How to Scale Your Model", "Serving LLaMA, smallest-topology table",
              f"HBM left for KV caches with {dtype} parameters on {chips} chips, bytes", published,
              (lambda dtype=dtype, chips=chips: _remaining(dtype, chips)), rel=0.005, corrected=fixed, why=why)
      for dtype, chips, published, fixed, why in [
          ("bf16", 16, 116e9, None, ""),
          ("int8", 8, 68e9, 58e9, "8 x 16 GB - 70 GB = 58 GB, not 68"),
          ("int4", 4, 19e9, 29e9, "4 x 16 GB - 35 GB = 29 GB (the table's 45 GB int4 size gives its 19)")]],
    *[Problem(f"scaling.llama3_70b_kv_caches_{dtype}", "How to Scale Your Model", "Serving LLaMA, smallest-topology table",
              f"8k-token KV caches that fit with {dtype} parameters and KV on {chips} chips", published,
              (lambda dtype=dtype, chips=chips: _caches(dtype, chips)), rel=0.0, corrected=fixed,
              convention="gpu_memory_utilization=1.0, a pooled slice", why=why)
      for dtype, chips, published, fixed, why in [
          ("bf16", 16, 43, None, ""),
          ("int8", 8, 52, 43, "58 GB / (163,840 x 8192 bytes) = 43; the table's 52 comes from its 68 GB"),
          ("int4", 4, 67, 43, "29 GB / (81,920 x 8192 bytes) = 43; every row is 43 because HBM per chip is fixed")]],
    Problem("scaling.llama3_70b_full_hbm_step", "How to Scale Your Model", "Serving LLaMA, latency question",
            "step time when the batch fills the HBM (16 GB / 8.2e11 per chip), seconds ('19 ms')", 19e-3,
            lambda: decode.decode_step_time(SB_70B, pooled_slice(V5E_82, 16), _caches("bf16", 16), 8192), rel=0.01,
            corrected=19.4e-3, why="16e9 / 8.2e11 = 19.5 ms (19.4 ms with 43 whole caches); '19 ms' truncates"),
    Problem("scaling.llama3_70b_int4_params_only", "How to Scale Your Model", "Serving LLaMA, latency question",
            "step time with the int4 parameters alone on 4 chips ('about 10 ms')", 10e-3,
            lambda: decode.decode_step_time(SB_70B, pooled_slice(V5E_82, 4), 1, 0, weight_dtype="int4"), rel=0.1,
            convention="'about 10 ms' is one significant figure (10.7 ms)"),
    *[Problem(f"scaling.llama3_70b_qps_{dtype}", "How to Scale Your Model", "Serving LLaMA, throughput question",
              f"queries per second per chip with {dtype}, 512-token decodes", published,
              (lambda dtype=dtype, chips=chips: _qps_per_chip(dtype, chips)), rel=0.03, corrected=fixed, why=why)
      for dtype, chips, published, fixed, why in [
          ("bf16", 16, 0.27, None, ""),
          ("int8", 8, 0.66, 0.54, "with 43 caches (not 52) the int8 slice serves 0.54 QPS per chip"),
          ("int4", 4, 1.72, 1.09, "with 43 caches (not 67) the int4 slice serves 1.09 QPS per chip")]],
    Problem("scaling.llama3_70b_ici_degree", "How to Scale Your Model", "Serving LLaMA, sharding question",
            "model parallelism before the ICI binds at batch 64, F / (8 B) for F = 28,672", 56,
            lambda: _per_matmul_degree(28672, 64), rel=1e-9),
    Problem("scaling.llama3_70b_t_ici", "How to Scale Your Model", "Serving LLaMA, sharding question",
            "ICI time of one matmul's activations, 2 x 64 x 8192 / 9e10 ('11 us')", 11e-6,
            lambda: roofline.link_time(2 * 64 * 8192, link_bandwidth=9e10), rel=0.04, corrected=11.65e-6,
            why="the answer's own expression is 11.65 us; '11us' truncates it"),
    Problem("scaling.llama3_70b_t_hbm", "How to Scale Your Model", "Serving LLaMA, sharding question",
            "HBM time of its weights over 32 chips, 2 x 8192 x 28672 / (32 x 8.1e11) ('18 us')", 18e-6,
            lambda: roofline.memory_time(2 * 8192 * 28672 / 32, V5E_81), rel=0.01),
    Problem("scaling.llama3_70b_t_math", "How to Scale Your Model", "Serving LLaMA, sharding question",
            "its FLOP time, 2 x 64 x 8192 x 28672 / (32 x 1.97e14) ('4 us')", 4e-6,
            lambda: roofline.compute_time(roofline.matmul_flops(64, 8192, 28672) / 32, V5E_81), rel=0.04,
            corrected=4.77e-6, why="the expression evaluates to 4.77 us (about 5 us); '4us' truncates it"),
    Problem("scaling.llama3_70b_prefill", "How to Scale Your Model", "Serving LLaMA, prefill question",
            "an 8192-token prefill on 16 v5e at 40 % MFU, seconds", 0.91,
            lambda: prefill.prefill_time(SB_70B, pooled_slice(V5E_82, 16), 8192, weight_dtype="int8", mfu=0.4),
            rel=0.005, convention="totals (2 N FLOPs per token, attention ignored), a pooled slice, mfu=0.4"),
    Problem("scaling.kv_evicted_per_step", "How to Scale Your Model", "Serving LLaMA, prefill question",
            "KV tokens evicted per step at batch 32, 8192-token prompts, 4096-token decodes", 96,
            lambda: memory.kv_tokens_freed_per_step(32, 8192, 4096), rel=1e-12),
    Problem("scaling.prefill_to_generate_ratio", "How to Scale Your Model", "Serving LLaMA, disaggregation question",
            "prefill servers per generate server (8192-token prompts, 512-token decodes, batch 32)", 3,
            lambda: prefill.prefill_time(SB_70B, pooled_slice(V5E_82, 16), 8192, weight_dtype="int8", mfu=0.4)
            * 32 / (decode.decode_step_time(SB_70B, pooled_slice(V5E_82, 16), _caches("bf16", 16), 8192) * 512),
            rel=0.05, convention="the answer's 0.91 s prefill and 19 ms step ('P = 3G', one significant figure)"),

    # ---------------------------------------------------------------- Stanford CS336, lecture 10
    Problem("cs336.h100_intensity", "Stanford CS336 lecture 10", "review_of_arithmetic_intensity",
            "accelerator intensity of an H100 (989e12 / 3.35e12, rounded)", 295, lambda: roofline.ridge_point("H100"),
            rel=0.002),
    Problem("cs336.matmul_intensity_limit", "Stanford CS336 lecture 10", "review_of_arithmetic_intensity",
            "intensity of X (B x D) @ W (D x F) in bf16 for D, F >> B, at B = 64", 64,
            lambda: roofline.matmul_intensity(64, 10**7, 10**7), rel=1e-4),
    Problem("cs336.prefill_attention", "Stanford CS336 lecture 10", "arithmetic_intensity_of_inference",
            "prefill attention intensity S / 2 at S = 1024 (MHA, bf16)", 512,
            lambda: roofline.prefill_attention_intensity("Llama-2-13B", 1024, causal=False), rel=1e-12,
            convention="causal=False"),
    Problem("cs336.generate_attention", "Stanford CS336 lecture 10", "arithmetic_intensity_of_inference",
            "generation attention intensity S T / (S + T) at T = 1, S = 1024 (< 1)", 1024 / 1025,
            lambda: roofline.decode_attention_intensity("Llama-2-13B", 1024), rel=1e-12),
    Problem("cs336.llama2_13b_b256_memory", "Stanford CS336 lecture 10", "throughput_and_latency",
            "memory of Llama 2 13B at batch 256, 1024 tokens, bf16: more than an H100's 80e9 bytes (the assert)",
            2 * (2 * 32000 * 5120 + 5120 * 13824 * 3 * 40 + (2 * 5120 * 40 * 128 * 2) * 40) + 256 * 1024 * 40 * 128 * 40 * 4,
            lambda: memory.memory_footprint(model_from_totals(
                parameters=2 * 32000 * 5120 + 5120 * 13824 * 3 * 40 + 4 * 5120 * 40 * 128 * 40, n_layers=40,
                n_kv_heads=40, head_dim=128), 256, 1024)["total"], rel=1e-12),
    Problem("cs336.gqa_fits_b64", "Stanford CS336 lecture 10", "reduce_kv_cache_size",
            "with 8 KV heads (recomputed projections) batch 64 'fits in memory now' on an 80 GB H100 (1 = yes)", 1,
            lambda: float(memory.memory_footprint(with_kv_heads("Llama-2-13B", 8), 64, 1024)["total"] < 80e9),
            rel=0.0, convention="with_kv_heads(weights='recompute'), CS336's num_params depends on K"),
    Problem("cs336.gqa_fits_b256", "Stanford CS336 lecture 10", "reduce_kv_cache_size",
            "and batch 256 'still fits in memory' (1 = yes)", 1,
            lambda: float(memory.memory_footprint(with_kv_heads("Llama-2-13B", 8), 256, 1024)["total"] < 80e9),
            rel=0.0),

    # ---------------------------------------------------------------- Baseten, Databricks
    Problem("baseten.a10_ops_per_byte", "Baseten, A guide to LLM inference and performance", "ops:byte ratio",
            "ops:byte of an A10 (125 TFLOPS fp16 tensor, 600 GB/s)", 208.3, lambda: roofline.ridge_point("A10"),
            rel=0.001),
    Problem("baseten.llama2_7b_attention", "Baseten, A guide to LLM inference and performance",
            "arithmetic intensity of Llama 2 7B's attention",
            "intensity of standard (unfused) attention over N = 4096 tokens, d = 128, fp16: 4N^2d / (8N^2 + 8Nd)", 62,
            lambda: roofline.prefill_attention_intensity("Llama-2-7B", 4096, causal=False, kernel="unfused"), rel=0.01,
            convention="kernel='unfused', causal=False (softmax operations not counted: 62.4 with them)"),
    Problem("databricks.mbu_example", "Databricks, LLM Inference Performance Engineering", "MBU",
            "MBU of a 7B 16-bit model at 14 ms per token on a 2 TB/s GPU", 0.5,
            lambda: validation.implied_mbu(model_from_totals(parameters=7e9, kv_bytes_per_token=0),
                                           Accelerator.from_numbers("2 TB/s", memory_bytes=80e9, memory_bandwidth=2e12,
                                                                    peak_flops={"bf16": 312e12}), 0.014),
            rel=1e-9, convention="every parameter read (totals)"),
]

IDS = [p.id for p in PROBLEMS]


def test_problem_ids_are_unique_and_sources_are_named():
    assert len(IDS) == len(set(IDS))
    for p in PROBLEMS:
        assert p.source and p.location and p.question, p.id
        if p.corrected is not None:
            assert p.why, f"{p.id}: a corrected answer needs its reason"


@pytest.mark.parametrize("problem", PROBLEMS, ids=IDS)
def test_published_problem(problem):
    got = float(problem.answer())
    if problem.corrected is None:
        assert got == pytest.approx(problem.published, rel=problem.rel, abs=1e-15), (
            f"{problem.id}: the library gives {got:.6g}, {problem.source} publishes {problem.published:.6g}")
    else:
        # the library gives the corrected answer, and the published one is off by more than its rounding
        assert got == pytest.approx(problem.corrected, rel=max(problem.rel, 0.005), abs=1e-15), (problem.id, got)
        assert problem.published != pytest.approx(problem.corrected, rel=problem.rel, abs=1e-15), problem.id


def test_the_count_of_problems():
    reproduced = sum(p.corrected is None for p in PROBLEMS)
    corrected = len(PROBLEMS) - reproduced
    assert len(PROBLEMS) >= 80 and corrected >= 15, (reproduced, corrected)


def test_the_book_differs_from_a_reference_for_the_named_convention():
    # the book's numbers beside three references', each differing for the convention the problem names
    sb = _sb_13b_step(1, with_kv_heads(SB_13B, 8, weights="fixed"))
    book = _sb_13b_step(1, with_kv_heads(SB_13B, 8))                     # K/V projections recomputed
    assert book < sb * 0.9
    ring = decode.decode_step_parts(GOPHER_260B, A100_KIPPLY, 512, 0, tensor_parallel=16)["communication"]
    kipply = decode.decode_step_parts(GOPHER_260B, A100_KIPPLY, 512, 0, tensor_parallel=16,
                                      allreduce_ring_factor=False)["communication"]
    assert ring / kipply == pytest.approx(15 / 16)
    catalog = decode.decode_step_time("Llama-3.1-70B", pooled_slice(V5E_81, 8), 32, 8192, weight_dtype="int8",
                                      kv_dtype="int8")
    totals = decode.decode_step_time(SB_70B, pooled_slice(V5E_81, 8), 32, 8192, weight_dtype="int8", kv_dtype="int8")
    assert catalog != pytest.approx(totals, rel=1e-3)    # the book reads P - V D, the reference all of 70e9
