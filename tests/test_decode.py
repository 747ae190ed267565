"""Decode: step time, throughput, the knee, the critical context length and the throughput ceiling.

Known values come from the spec sheets in the accelerator catalog (A100-SXM4-80GB:
312 TFLOP/s dense bf16, 2.039 TB/s; H100-SXM5: 989.4 TFLOP/s, 3.35 TB/s) and the
models' public configs; the rest are invariants that must hold for every input.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from servingmath import models, roofline
from servingmath.decode import (
    critical_context_length,
    decode_step_parts,
    decode_step_time,
    decode_throughput,
    knee_batch_size,
    matmul_parameter_count,
    max_decode_throughput,
)
from servingmath.hardware import get_accelerator

OVERLAPS = ["additive", "roofline", "hybrid"]
DENSE = ["Llama-2-7B", "Llama-3.1-8B", "Qwen2.5-7B", "Llama-2-13B"]
GPUS = ["A100-SXM4-80GB", "H100-SXM5-80GB", "MI300X", "L40S"]

# Llama-2-7B (meta-llama/Llama-2-7b-hf config.json): vocab_size 32000, hidden_size 4096, untied embeddings;
# 6,738,415,616 parameters. A step gathers one embedding row per token and never streams the V x D table.
P_7B, V_7B, D_7B = 6_738_415_616, 32_000, 4_096
A100_FLOPS, A100_BW = 312e12, 2.039e12       # A100-SXM4-80GB datasheet: dense bf16, HBM2e


def hybrid_knee(ridge, stationary_bytes, matmul_params, row_bytes):
    """B* of T = max(T_w + B g, B c_lin): T_w / (c_lin - g) with T_w = W_bytes / W, g = D b_w / W,
    c_lin = 2 P_mm / F, i.e. ridge x W_bytes / (2 P_mm - ridge x D b_w)."""
    return ridge * stationary_bytes / (2 * matmul_params - ridge * row_bytes)


# ---- known values -------------------------------------------------------------------------------
def test_batch_one_tpot_is_the_weight_read():
    # Every weight but the V x D input-embedding table, plus the one row the token gathers, in bf16:
    # (6,738,415,616 - 32,000 x 4,096 + 4,096) x 2 bytes / 2.039e12 B/s = 6.48 ms (A100-SXM4-80GB spec sheet)
    expected = (P_7B - V_7B * D_7B + D_7B) * 2 / A100_BW
    assert decode_step_time("Llama-2-7B", "A100", 1, 0) == pytest.approx(expected, rel=1e-12)
    assert round(expected * 1e3, 2) == 6.48
    # the table is still stored: streaming all P x 2 bytes would be the old, wrong 6.61 ms
    assert decode_step_time("Llama-2-7B", "A100", 1, 0) < P_7B * 2 / A100_BW * (1 - 0.015)


def test_hybrid_knee_is_the_ridge_times_weight_bytes_over_matmul_flops():
    # B* = T_w / (c_lin - g): the weights read per step (all but the embedding table, whose rows the
    # batch gathers at g per sequence) against the matmuls; for untied bf16 models W_bytes = 2 P_mm,
    # so B* = ridge / (1 - ridge D / P_mm): the ridge point to four digits.
    for model, gpu in [("Llama-2-7B", "A100"), ("Llama-3.1-8B", "H100")]:
        cfg = models.get_model(model)
        ridge = roofline.ridge_point(gpu)
        vd = cfg.vocab_size * cfg.hidden_size
        stationary = (models.parameter_count(cfg) - vd) * 2          # bf16, untied: the LM head is read
        expected = hybrid_knee(ridge, stationary, matmul_parameter_count(cfg), cfg.hidden_size * 2)
        assert knee_batch_size(model, gpu, 0) == pytest.approx(expected, rel=1e-12)
        assert knee_batch_size(model, gpu, 0) == pytest.approx(ridge, rel=2e-4)
        assert knee_batch_size(model, gpu, 0) > ridge
    assert roofline.ridge_point("A100") == pytest.approx(153.0, abs=0.1)       # 312 / 2.039
    assert knee_batch_size("Llama-2-7B", "A100", 0) == pytest.approx(
        hybrid_knee(A100_FLOPS / A100_BW, (P_7B - V_7B * D_7B) * 2, P_7B - V_7B * D_7B, D_7B * 2), rel=1e-12)
    assert round(knee_batch_size("Llama-2-7B", "A100", 0), 2) == 153.03


def test_realistic_efficiencies_bring_the_a100_knee_near_100():
    # The often-quoted "B* ~ 75-100 on an A100" needs MFU < MBU; at the physical bound it is ~153.
    knee = knee_batch_size("Llama-2-7B", "A100", 0, mfu=0.5, mbu=0.8)
    assert 75 <= knee <= 100
    ridge = A100_FLOPS * 0.5 / (A100_BW * 0.8)          # the achieved ridge
    p_mm = P_7B - V_7B * D_7B
    assert knee == pytest.approx(hybrid_knee(ridge, p_mm * 2, p_mm, D_7B * 2), rel=1e-12)
    assert knee == pytest.approx(knee_batch_size("Llama-2-7B", "A100", 0) * 0.5 / 0.8, rel=1e-4)


def test_critical_context_of_llama2_7b_on_a100():
    # S_crit = 2 P W / (F k) with k = 524,288 B/token (MHA, 32 layers x 32 KV heads x 128 x 2 x 2 B)
    p = matmul_parameter_count("Llama-2-7B")
    expected = 2 * p * 2.039e12 / (312e12 * 524_288)
    assert critical_context_length("Llama-2-7B", "A100") == pytest.approx(expected)
    assert 160 < expected < 170
    # the roofline version also counts the attention FLOPs: 4 L H d_h per context token
    a = 4 * 32 * 32 * 128
    rooftop = 2 * p * 2.039e12 / (312e12 * 524_288 - a * 2.039e12)
    assert critical_context_length("Llama-2-7B", "A100", overlap="roofline") == pytest.approx(rooftop)


def test_ceiling_at_zero_context_is_peak_flops_over_two_p():
    # Compute alone where memory overlaps it; the additive bound also pays each sequence's gathered
    # embedding row (D x 2 bytes) in series with its 2 P_mm FLOPs.
    p_mm = matmul_parameter_count("Llama-2-7B")
    assert p_mm == P_7B - V_7B * D_7B
    for overlap in ("roofline", "hybrid"):
        assert max_decode_throughput("Llama-2-7B", "A100", 0, overlap=overlap) == pytest.approx(
            A100_FLOPS / (2 * p_mm), rel=1e-12)
    assert max_decode_throughput("Llama-2-7B", "A100", 0, overlap="additive") == pytest.approx(
        1 / (2 * p_mm / A100_FLOPS + D_7B * 2 / A100_BW), rel=1e-12)


def test_ceiling_at_long_context_is_the_kv_bandwidth_in_the_roofline():
    # S >= S_crit: every added sequence costs its KV read, W / (S k) sequences per second at most
    # (and its gathered embedding row, D x 2 bytes)
    s = 2048
    assert max_decode_throughput("Llama-2-7B", "A100", s, overlap="roofline") == pytest.approx(
        A100_BW / (s * 524_288 + D_7B * 2), rel=1e-12)


# ---- the knee is where the max switches ---------------------------------------------------------
@pytest.mark.parametrize("model, gpu, context", [("Llama-2-7B", "A100", 64), ("Llama-3.1-8B", "H100", 200),
                                                 ("Llama-3.1-8B", "H100", 0), ("Qwen2.5-7B", "L40S", 400)])
def test_roofline_knee_separates_memory_bound_from_compute_bound_batches(model, gpu, context):
    knee = knee_batch_size(model, gpu, context, overlap="roofline")
    assert math.isfinite(knee)
    for batch, compute_bound in [(math.floor(knee), False), (math.ceil(knee) + 1, True)]:
        p = decode_step_parts(model, gpu, batch, context)
        compute = p["linear_compute"] + p["attention_compute"]
        memory = p["weight_memory"] + p["kv_memory"]
        assert (compute >= memory) == compute_bound, (batch, compute, memory)


def test_hybrid_knee_is_where_the_weight_matmuls_turn_compute_bound_and_ignores_context():
    knee = knee_batch_size("Llama-3.1-8B", "H100", np.array([0, 512, 8192]))
    assert np.allclose(knee, knee[0])
    below = decode_step_parts("Llama-3.1-8B", "H100", math.floor(knee[0]), 512)
    above = decode_step_parts("Llama-3.1-8B", "H100", math.ceil(knee[0]), 512)
    assert below["linear_compute"] < below["weight_memory"]
    assert above["linear_compute"] > above["weight_memory"]


def test_additive_knee_is_the_roofline_balance_point_where_the_bounds_differ_by_two():
    knee_a = knee_batch_size("Llama-3.1-8B", "H100", 128, overlap="additive")
    assert knee_a == knee_batch_size("Llama-3.1-8B", "H100", 128, overlap="roofline")
    ratio = (decode_step_time("Llama-3.1-8B", "H100", round(knee_a), 128, overlap="additive")
             / decode_step_time("Llama-3.1-8B", "H100", round(knee_a), 128, overlap="roofline"))
    assert ratio == pytest.approx(2.0, rel=2e-3)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(DENSE), st.sampled_from(GPUS), st.integers(0, 4096),
       st.floats(0.2, 1.0), st.floats(0.2, 1.0))
def test_roofline_knee_is_infinite_exactly_beyond_the_critical_context(model, gpu, context, mfu, mbu):
    knee = knee_batch_size(model, gpu, context, mfu=mfu, mbu=mbu, overlap="roofline")
    s_crit = critical_context_length(model, gpu, mfu=mfu, mbu=mbu, overlap="roofline")
    assert math.isinf(knee) == (context >= s_crit)
    if context < s_crit:
        assert knee >= knee_batch_size(model, gpu, 0, mfu=mfu, mbu=mbu, overlap="roofline")


def test_moe_knee_solves_its_equation():
    # Mixtral: the weights read grow with the batch (more experts touched), solved by bisection
    # at B*: (shared - V D + E (1 - (1 - k/E)^B) x expert + B D) x 2 bytes / W = 2 P_mm B / F
    model, gpu = "Mixtral-8x7B", "H100"
    knee = knee_batch_size(model, gpu, 0)
    acc = get_accelerator(gpu)
    cfg = models.get_model(model)
    shared, expert = models.expert_parameter_split(cfg)
    e, k = cfg.n_experts, cfg.n_active_experts
    assert (e, k) == (8, 2)
    touched = e * (1 - (1 - k / e) ** knee)
    read = (shared - cfg.vocab_size * cfg.hidden_size + touched * expert + knee * cfg.hidden_size) * 2
    weights = read / acc.memory_bandwidth
    linear = 2 * matmul_parameter_count(model) * knee / acc.peak_flops("bf16")
    assert weights == pytest.approx(linear, rel=1e-9)
    # touching all experts makes its knee later than that of a dense model of its active size
    assert knee > models.active_parameter_count(model) * 2 / (2 * matmul_parameter_count(model)) * \
        roofline.ridge_point(gpu)
    roof = knee_batch_size(model, gpu, np.array([0, 100, 4000]), overlap="roofline")
    assert roof[0] == pytest.approx(knee) and roof[0] < roof[1] and math.isinf(roof[2])


# ---- efficiency factors -------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.sampled_from(DENSE), st.sampled_from(GPUS), st.floats(0.1, 1.0), st.floats(0.1, 1.0))
def test_knee_scales_as_mfu_over_mbu_and_critical_context_as_mbu_over_mfu(model, gpu, mfu, mbu):
    # The knee is a function of the achieved ridge F MFU / (W MBU) alone (hybrid_knee above): nearly
    # proportional to it, exactly so but for the gathered embedding rows (ridge D / P_mm < 1 %).
    cfg = models.get_model(model)
    ridge = roofline.ridge_point(gpu) * mfu / mbu
    p_mm = matmul_parameter_count(cfg)
    assert not cfg.tied_embeddings          # the LM head is its own matrix, read with the body
    stationary = (models.parameter_count(cfg) - cfg.vocab_size * cfg.hidden_size) * 2
    knee = knee_batch_size(model, gpu, 0, mfu=mfu, mbu=mbu)
    assert knee == pytest.approx(hybrid_knee(ridge, stationary, p_mm, cfg.hidden_size * 2), rel=1e-9)
    assert knee == pytest.approx(knee_batch_size(model, gpu, 0, mfu=mfu / 2, mbu=mbu / 2), rel=1e-12)
    assert knee == pytest.approx(knee_batch_size(model, gpu, 0) * mfu / mbu, rel=1e-2)
    assert critical_context_length(model, gpu, mfu=mfu, mbu=mbu) == pytest.approx(
        critical_context_length(model, gpu) * mbu / mfu)


def test_lower_mfu_moves_the_knee_left_lower_mbu_moves_it_right():
    base = knee_batch_size("Llama-3.1-8B", "H100", 256)
    assert knee_batch_size("Llama-3.1-8B", "H100", 256, mfu=0.5) < base
    assert knee_batch_size("Llama-3.1-8B", "H100", 256, mbu=0.5) > base


# ---- properties of T(B) and B / T(B) ---------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.sampled_from(DENSE + ["Mixtral-8x7B"]), st.sampled_from(GPUS), st.sampled_from(OVERLAPS),
       st.integers(1, 2000), st.integers(0, 4095), st.floats(0.3, 1.0), st.floats(0.3, 1.0))
def test_tpot_is_non_decreasing_in_batch_and_context(model, gpu, overlap, batch, context, mfu, mbu):
    kw = dict(mfu=mfu, mbu=mbu, overlap=overlap)
    t = decode_step_time(model, gpu, batch, context, **kw)
    assert decode_step_time(model, gpu, batch + 1, context, **kw) >= t * (1 - 1e-12)
    assert decode_step_time(model, gpu, batch, context + 1, **kw) >= t * (1 - 1e-12)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(DENSE + ["Mixtral-8x7B"]), st.sampled_from(GPUS), st.sampled_from(OVERLAPS),
       st.integers(1, 4000), st.integers(0, 4096), st.sampled_from([1, 2, 4]))
def test_throughput_is_non_decreasing_in_batch_and_below_its_ceiling(model, gpu, overlap, batch,
                                                                      context, tp):
    kw = dict(overlap=overlap, tensor_parallel=tp)
    x = decode_throughput(model, gpu, batch, context, **kw)
    assert decode_throughput(model, gpu, batch + 1, context, **kw) >= x * (1 - 1e-12)
    assert x <= max_decode_throughput(model, gpu, context, **kw) * (1 + 1e-12)


@pytest.mark.parametrize("overlap", OVERLAPS)
@pytest.mark.parametrize("context", [0, 300, 4000])
def test_throughput_approaches_its_ceiling(overlap, context):
    ceiling = max_decode_throughput("Llama-2-70B", "H100", context, tensor_parallel=4, overlap=overlap)
    far = decode_throughput("Llama-2-70B", "H100", 10**7, context, tensor_parallel=4, overlap=overlap)
    assert far == pytest.approx(ceiling, rel=1e-3)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(DENSE + ["Mixtral-8x7B"]), st.sampled_from(GPUS), st.integers(1, 4000),
       st.integers(0, 4096), st.floats(0.2, 1.0), st.floats(0.2, 1.0))
def test_roofline_below_hybrid_below_additive_below_twice_roofline(model, gpu, batch, context, mfu, mbu):
    kw = dict(mfu=mfu, mbu=mbu)
    lower = decode_step_time(model, gpu, batch, context, overlap="roofline", **kw)
    hybrid = decode_step_time(model, gpu, batch, context, overlap="hybrid", **kw)
    upper = decode_step_time(model, gpu, batch, context, overlap="additive", **kw)
    assert lower <= hybrid * (1 + 1e-12) <= upper * (1 + 2e-12) <= 2 * lower * (1 + 3e-12)
    ceilings = [max_decode_throughput(model, gpu, context, overlap=o, **kw) for o in OVERLAPS]
    assert ceilings[0] <= ceilings[2] * (1 + 1e-12) <= ceilings[1] * (1 + 2e-12)


def test_tensor_parallelism_raises_the_ceiling_but_less_than_n_fold():
    one = max_decode_throughput("Llama-2-70B", "H100", 1000)
    four = max_decode_throughput("Llama-2-70B", "H100", 1000, tensor_parallel=4)
    assert one < four < 4 * one


# ---- types, broadcasting, bad input -------------------------------------------------------------
def test_scalars_give_floats_and_arrays_broadcast():
    assert isinstance(knee_batch_size("Llama-2-7B", "A100", 100), float)
    assert isinstance(critical_context_length("Llama-2-7B", "A100"), float)
    assert isinstance(max_decode_throughput("Llama-2-7B", "A100", 100), float)
    grid = knee_batch_size("Llama-2-7B", "A100", np.array([[0], [100]]), mfu=np.array([0.5, 1.0]),
                           overlap="roofline")
    assert grid.shape == (2, 2)
    assert grid[1, 1] == pytest.approx(knee_batch_size("Llama-2-7B", "A100", 100, overlap="roofline"))
    assert critical_context_length("Llama-2-7B", "A100", mbu=np.array([0.5, 1.0])).shape == (2,)
    assert max_decode_throughput("Llama-2-7B", "A100", np.array([0, 10, 100])).shape == (3,)


@pytest.mark.parametrize("model", ["Llama-3.1-8B", "Mixtral-8x7B"])
def test_hybrid_knee_keeps_the_shape_of_an_array_context_it_does_not_depend_on(model):
    # regression: the hybrid knee ignores the context, and once returned a bare float for an array of them
    contexts = np.array([0, 512, 8192])
    knee = knee_batch_size(model, "H100", contexts)
    assert isinstance(knee, np.ndarray) and knee.shape == (3,)
    assert np.all(knee == knee_batch_size(model, "H100", 0))
    assert knee_batch_size(model, "H100", contexts.reshape(3, 1), mbu=np.array([0.5, 1.0])).shape == (3, 2)


@pytest.mark.parametrize("call, match", [
    (lambda: knee_batch_size("Llama-2-7B", "A100", 100, overlap="max"), "overlap 'max'"),
    (lambda: knee_batch_size("Llama-2-7B", "A100", -1), "context_len must be >= 0, got -1"),
    (lambda: knee_batch_size("Llama-2-7B", "A100", 5000), "exceeds Llama-2-7B's maximum context of 4096"),
    (lambda: knee_batch_size("Llama-2-7B", "A100", 100, mfu=0), r"mfu must be in \(0, 1\], got 0"),
    (lambda: knee_batch_size("Llama-2-7B", "A100", 100, weight_dtype="bf61"), "weight_dtype 'bf61'"),
    (lambda: knee_batch_size("Llama-2-7B", "A100", 100, compute_dtype="fp8"), "no tensor-core peak"),
    (lambda: critical_context_length("Llama-2-7B", "A100", mbu=1.5), r"mbu must be in \(0, 1\], got 1.5"),
    (lambda: critical_context_length("Llama-2-7B", "A100", overlap="sum"), "overlap 'sum'"),
    (lambda: critical_context_length("Llama-2-7B", "A100", kv_dtype="fp6"), "dtype 'fp6'"),
    (lambda: critical_context_length("Lama-2-7B", "A100"), "Did you mean 'Llama-2-7B'"),
    (lambda: max_decode_throughput("Llama-2-7B", "A1000", 100), "unknown accelerator 'A1000'"),
    (lambda: max_decode_throughput("Llama-2-7B", "A100", 100, tensor_parallel=0),
     "tensor_parallel must be an integer >= 1, got 0"),
    (lambda: max_decode_throughput("Llama-2-7B", "A100", 100.5), "context_len must be a whole number"),
])
def test_bad_input_names_parameter_value_and_what_is_allowed(call, match):
    with pytest.raises((ValueError, KeyError), match=match):
        call()
