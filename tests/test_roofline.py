"""Tests of servingmath.roofline: known values with their sources, properties, bad input."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servingmath import decode, hardware, models, roofline
from servingmath.datatypes import bytes_per_element

H100 = "H100-SXM5-80GB"
A100 = "A100-SXM4-80GB"


# --------------------------------------------------------------------------- known values
# Spec figures: NVIDIA A100 datasheet r4 (2021-06): 312 TFLOP/s dense bf16, 2.039 TB/s (80 GB SXM);
# NVIDIA H100 product page (2023): 989.4 TFLOP/s dense bf16, 1978.9 fp8, 3.35 TB/s (SXM).

@pytest.mark.parametrize("acc, dtype, expected", [
    (A100, "bf16", 312e12 / 2.039e12),       # 153.0
    ("A100-SXM4-40GB", "bf16", 312e12 / 1.555e12),
    (H100, "bf16", 989.4e12 / 3.35e12),      # 295.3
    (H100, "fp8", 1978.9e12 / 3.35e12),      # 590.7
    ("H200-SXM-141GB", "bf16", 989.4e12 / 4.8e12),
    (A100, "fp16", 312e12 / 2.039e12),       # fp16 shares bf16's peak
])
def test_ridge_point_known_values(acc, dtype, expected):
    assert roofline.ridge_point(acc, dtype) == pytest.approx(expected, rel=1e-12)


def test_ridge_point_scales_with_efficiencies():
    assert roofline.ridge_point(A100, mfu=0.5, mbu=0.8) == pytest.approx(153.016 * 0.5 / 0.8, rel=1e-4)


def test_attainable_flops_is_the_roofline():
    ridge = roofline.ridge_point(H100)
    assert roofline.attainable_flops(ridge / 2, H100) == pytest.approx(989.4e12 / 2)
    assert roofline.attainable_flops(ridge * 2, H100) == pytest.approx(989.4e12)
    assert roofline.attainable_flops(ridge, H100) == pytest.approx(989.4e12)


def test_matmul_flops_and_bytes_known_values():
    # Llama-3.1-8B's FFN up-projection [B, 4096] x [4096, 14336]
    assert roofline.matmul_flops(1, 4096, 14336) == 2 * 4096 * 14336
    assert roofline.matmul_bytes(1, 4096, 14336) == 4096 * 14336 * 2 + (4096 + 14336) * 2
    assert roofline.matmul_bytes(8, 4096, 14336, weight_dtype="int4", activation_dtype="bf16") == 4096 * 14336 * 0.5 + 8 * (4096 + 14336) * 2
    assert roofline.matmul_intensity(16, 1000, 1000, weight_dtype="fp8", activation_dtype="fp8") == pytest.approx(
        2 * 16 * 1000 * 1000 / (1000 * 1000 + 16 * 2000))


def test_matmul_intensity_is_about_batch_for_bf16_weights():
    b = np.array([1, 2, 8, 32])
    i = roofline.matmul_intensity(b, 8192, 28672)
    assert np.all(i < b) and np.all(i > 0.99 * b)


def test_matmul_functions_broadcast_and_return_floats():
    assert isinstance(roofline.matmul_flops(2, 3, 4), float)
    out = roofline.matmul_intensity(np.array([1, 10, 100]), 4096, np.array([[4096], [14336]]))
    assert out.shape == (2, 3)


@pytest.mark.parametrize("acc, weight, compute, expected", [
    (A100, "bf16", "bf16", 312e12 / 2.039e12),            # 153: the peak-spec B*
    (H100, "bf16", "bf16", 989.4e12 / 3.35e12),           # 295
    (H100, "int8", "bf16", 989.4e12 / 3.35e12 / 2),       # weight-only 8-bit: half
    (H100, "fp8", "bf16", 989.4e12 / 3.35e12 / 2),
    (H100, "int4", "bf16", 989.4e12 / 3.35e12 / 4),       # weight-only int4: a quarter
    (H100, "fp8", "fp8", 1978.9e12 / 3.35e12 / 2),        # fp8 math: unchanged (= 295)
])
def test_critical_batch_size_limit(acc, weight, compute, expected):
    assert roofline.critical_batch_size(acc, weight_dtype=weight, compute_dtype=compute) == pytest.approx(expected, rel=1e-12)


def test_fp8_math_leaves_the_critical_batch_unchanged():
    assert roofline.critical_batch_size(H100, weight_dtype="fp8", compute_dtype="fp8") == pytest.approx(
        roofline.critical_batch_size(H100, weight_dtype="bf16", compute_dtype="bf16"), rel=1e-3)


def test_realistic_efficiencies_give_the_quoted_75_to_100():
    # the rule of thumb "B* ~ 75-100 on an A100" needs MFU / MBU ~ 0.5-0.65, e.g. MFU 0.5, MBU 0.8
    assert 75 <= roofline.critical_batch_size(A100, mfu=0.5, mbu=0.8) <= 100
    assert 75 <= roofline.critical_batch_size(A100, mfu=0.45, mbu=0.9) <= 100
    assert roofline.critical_batch_size(A100) > 150  # the peak-spec value is not in that range


def test_exact_critical_batch_known_value_and_limit():
    ridge = 312e12 / 2.039e12
    d, f = 4096, 14336
    expected = ridge * d * f * 2 / (2 * d * f - ridge * (d + f) * 2)
    assert roofline.critical_batch_size(A100, d_in=d, d_out=f) == pytest.approx(expected, rel=1e-12)
    huge = roofline.critical_batch_size(A100, d_in=10**7, d_out=10**7)
    assert huge == pytest.approx(roofline.critical_batch_size(A100), rel=1e-4)


def test_exact_critical_batch_is_infinite_for_small_matrices():
    # H100 fp8 ridge 590.7 with bf16 activations: D = F = 1024 can never reach it
    assert math.isinf(roofline.critical_batch_size(H100, weight_dtype="fp8", compute_dtype="fp8",
                                                  activation_dtype="bf16", d_in=1024, d_out=1024))
    out = roofline.critical_batch_size(H100, d_in=np.array([256, 8192]), d_out=8192)
    assert math.isinf(out[0]) and math.isfinite(out[1])


@settings(max_examples=60, deadline=None)
@given(d=st.integers(2048, 65536), f=st.integers(2048, 65536),
       weight=st.sampled_from(["bf16", "fp8", "int8", "int4"]),
       mfu=st.floats(0.3, 1.0), mbu=st.floats(0.3, 1.0))
def test_exact_critical_batch_puts_the_matmul_on_the_ridge(d, f, weight, mfu, mbu):
    b = roofline.critical_batch_size(A100, weight_dtype=weight, mfu=mfu, mbu=mbu, d_in=d, d_out=f)
    ridge = roofline.ridge_point(A100, mfu=mfu, mbu=mbu)
    flops = 2 * b * d * f
    bytes_moved = d * f * bytes_per_element(weight) + b * (d + f) * 2
    assert flops / bytes_moved == pytest.approx(ridge, rel=1e-9)
    # and the exact value is never below the large-matrix limit
    assert b >= roofline.critical_batch_size(A100, weight_dtype=weight, mfu=mfu, mbu=mbu) * (1 - 1e-12)


# --------------------------------------------------------------------------- attention
@pytest.mark.parametrize("name", models.list_models())
def test_decode_attention_intensity_is_g_in_bf16(name):
    m = models.get_model(name)
    assert roofline.decode_attention_intensity(m) == m.n_heads / m.n_kv_heads
    assert roofline.decode_attention_intensity(m, kv_dtype="fp8") == 2 * m.n_heads / m.n_kv_heads


def test_decode_attention_intensity_with_context_tends_to_the_limit():
    s = np.array([1, 64, 4096, 131072])
    i = roofline.decode_attention_intensity("Llama-3.1-70B", context_len=s)
    assert np.all(np.diff(i) > 0) and np.all(i < 8.0)
    assert i[-1] == pytest.approx(8.0, rel=1e-4)
    # exact known value: 2 H S / (K S b_kv + H b_a), H = 64, K = 8
    assert i[2] == pytest.approx(2 * 64 * 4096 / (8 * 4096 * 2 + 64 * 2))


@pytest.mark.parametrize("name", ["Llama-2-7B", "Llama-3.1-8B", "Mixtral-8x7B", "Qwen2.5-72B"])
def test_decode_attention_intensity_matches_the_decode_model(name):
    """decode.decode_step_parts counts 4 L H d_h S B FLOPs over B S KV bytes: same ratio, any batch."""
    acc = hardware.get_accelerator(H100)
    for batch in (1, 64, 512):
        parts = decode.decode_step_parts(name, acc, batch, 2048)
        flops = parts["attention_compute"] * acc.peak_flops("bf16")
        bytes_moved = parts["kv_memory"] * acc.memory_bandwidth
        assert flops / bytes_moved == pytest.approx(roofline.decode_attention_intensity(name), rel=1e-12)


def test_prefill_attention_intensity_known_values_and_growth():
    assert roofline.prefill_attention_intensity("Llama-2-7B", 1023) == 256.0         # (L_p + 1) / 4
    assert roofline.prefill_attention_intensity("Llama-3.1-8B", 1024) == 410.0       # 4 (L_p + 1) / 10
    lp = np.array([1, 10, 100, 1000, 10000])
    i = roofline.prefill_attention_intensity("Llama-3.1-8B", lp)
    assert np.allclose(i, 4 * (lp + 1) / 10)


def test_prefill_attention_crosses_every_ridge_with_long_prompts():
    for name in hardware.list_accelerators():
        acc = hardware.get_accelerator(name)
        if "bf16" in acc.dense_flops:
            assert roofline.prefill_attention_intensity("Llama-2-7B", 4096) > acc.ridge_point("bf16")
            assert roofline.decode_attention_intensity("Llama-3.1-70B") < acc.ridge_point("bf16")


@pytest.mark.parametrize("name", ["Llama-3.1-8B", "Mixtral-8x7B", "GPT-J-6B"])
def test_decode_step_intensity_matches_the_decode_model(name):
    acc = hardware.get_accelerator(A100)
    b, s = np.array([1, 8, 64, 256]), 1024
    parts = decode.decode_step_parts(name, acc, b, s)
    flops = (parts["linear_compute"] + parts["attention_compute"]) * acc.peak_flops("bf16")
    bytes_moved = (parts["weight_memory"] + parts["kv_memory"]) * acc.memory_bandwidth
    assert np.allclose(roofline.decode_step_intensity(name, b, s), flops / bytes_moved, rtol=1e-12)


def test_decode_step_intensity_saturates_with_batch():
    m = models.get_model("Llama-3.1-8B")
    s = 4096
    ceiling = ((2 * decode.matmul_parameter_count(m) + 4 * m.n_layers * m.n_heads * m.head_dim * s)
               / (s * models.kv_bytes_per_token(m)))
    i = roofline.decode_step_intensity(m, np.array([1, 64, 4096, 10**6]), s)
    assert np.all(np.diff(i) > 0) and np.all(i < ceiling)
    assert i[-1] == pytest.approx(ceiling, rel=1e-3)
    assert ceiling < roofline.ridge_point(H100) / 5


# --------------------------------------------------------------------------- bounds
@settings(max_examples=100, deadline=None)
@given(flops=st.floats(0, 1e18), bytes_moved=st.floats(0, 1e15),
       mfu=st.floats(0.01, 1.0), mbu=st.floats(0.01, 1.0),
       acc=st.sampled_from([A100, H100, "MI300X", "TPU-v5e", "L40S"]))
def test_bounds_bracket(flops, bytes_moved, mfu, mbu, acc):
    lower = roofline.time_lower_bound(flops, bytes_moved, acc, mfu=mfu, mbu=mbu)
    upper = roofline.time_upper_bound(flops, bytes_moved, acc, mfu=mfu, mbu=mbu)
    assert lower <= upper * (1 + 1e-12)
    assert upper <= 2 * lower * (1 + 1e-12)
    assert lower >= roofline.compute_time(flops, acc, mfu=mfu) * (1 - 1e-12)
    assert lower >= roofline.memory_time(bytes_moved, acc, mbu=mbu) * (1 - 1e-12)


def test_upper_is_twice_lower_exactly_on_the_ridge():
    bytes_moved = 1e9
    flops = roofline.ridge_point(H100) * bytes_moved
    lower = roofline.time_lower_bound(flops, bytes_moved, H100)
    upper = roofline.time_upper_bound(flops, bytes_moved, H100)
    assert upper == pytest.approx(2 * lower, rel=1e-12)
    assert lower == pytest.approx(1e9 / 3.35e12, rel=1e-12)


def test_bounds_known_values():
    assert roofline.time_lower_bound(989.4e12, 3.35e12 / 2, H100) == pytest.approx(1.0)
    assert roofline.time_upper_bound(989.4e12, 3.35e12 / 2, H100) == pytest.approx(1.5)
    assert roofline.time_lower_bound(0, 2.039e12, A100, mbu=0.5) == pytest.approx(2.0)


def test_bounds_equal_the_decode_models_roofline_and_additive_overlap():
    m, acc, s = "Llama-2-7B", A100, 64
    b = np.array([1, 16, 32, 64, 256])
    parts = decode.decode_step_parts(m, acc, b, s)
    a = hardware.get_accelerator(acc)
    flops = (parts["linear_compute"] + parts["attention_compute"]) * a.peak_flops("bf16")
    bytes_moved = (parts["weight_memory"] + parts["kv_memory"]) * a.memory_bandwidth
    assert np.allclose(roofline.time_lower_bound(flops, bytes_moved, acc),
                       decode.decode_step_time(m, acc, b, s, overlap="roofline"), rtol=1e-12)
    assert np.allclose(roofline.time_upper_bound(flops, bytes_moved, acc),
                       decode.decode_step_time(m, acc, b, s, overlap="additive"), rtol=1e-12)


def test_bounds_broadcast():
    out = roofline.time_lower_bound(np.array([1e12, 1e15]), 1e9, H100)
    assert out.shape == (2,)
    assert isinstance(roofline.time_upper_bound(1e12, 1e9, H100), float)


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("call, parameter", [
    (lambda: roofline.arithmetic_intensity(-1, 1), "flops"),
    (lambda: roofline.arithmetic_intensity(1, 0), "bytes_moved"),
    (lambda: roofline.time_lower_bound(float("nan"), 1, H100), "flops"),
    (lambda: roofline.time_upper_bound(1, -5, H100), "bytes_moved"),
    (lambda: roofline.time_lower_bound(1, 1, H100, mfu=0), "mfu"),
    (lambda: roofline.time_upper_bound(1, 1, H100, mbu=1.5), "mbu"),
    (lambda: roofline.ridge_point(H100, mfu=float("nan")), "mfu"),
    (lambda: roofline.matmul_flops(0, 4096, 4096), "batch"),
    (lambda: roofline.matmul_flops(2.5, 4096, 4096), "batch"),
    (lambda: roofline.matmul_flops(1, -4096, 4096), "d_in"),
    (lambda: roofline.matmul_bytes(1, 4096, float("nan")), "d_out"),
    (lambda: roofline.matmul_bytes(1, 4096, 4096, weight_dtype="int3"), "weight_dtype"),
    (lambda: roofline.matmul_intensity(1, 4096, 4096, activation_dtype="bf17"), "activation_dtype"),
    (lambda: roofline.critical_batch_size(H100, weight_dtype="fp4"), "weight_dtype"),
    (lambda: roofline.critical_batch_size(H100, compute_dtype="float"), "compute_dtype"),
    (lambda: roofline.critical_batch_size(H100, mbu=-0.1), "mbu"),
    (lambda: roofline.critical_batch_size(H100, d_in=4096), "d_in"),
    (lambda: roofline.critical_batch_size(H100, d_in=4096, d_out=0), "d_out"),
    (lambda: roofline.decode_attention_intensity("Llama-3.1-8B", kv_dtype="int2"), "kv_dtype"),
    (lambda: roofline.decode_attention_intensity("Llama-3.1-8B", context_len=-1), "context_len"),
    (lambda: roofline.decode_attention_intensity("Llama-2-7B", context_len=10**6), "context_len"),
    (lambda: roofline.prefill_attention_intensity("Llama-3.1-8B", 0), "prompt_len"),
    (lambda: roofline.prefill_attention_intensity("Llama-2-7B", 5000), "prompt_len"),
    (lambda: roofline.decode_step_intensity("Llama-3.1-8B", 0, 10), "batch_size"),
    (lambda: roofline.decode_step_intensity("Llama-3.1-8B", 1, float("inf")), "context_len"),
])
def test_bad_input_names_the_parameter(call, parameter):
    with pytest.raises(ValueError, match=parameter):
        call()


def test_unknown_names_raise_keyerror_with_suggestions():
    with pytest.raises(KeyError, match="Did you mean"):
        roofline.critical_batch_size("H100-SMX5")  # a near miss of a catalog name
    with pytest.raises(KeyError, match="model"):
        roofline.decode_attention_intensity("Llama-9-1B")


def test_missing_peak_raises_with_the_reason():
    # A10G: NVIDIA publishes no tensor peak; A100 has no fp8 units; nothing computes in int4
    with pytest.raises(ValueError, match="no tensor-core peak on A10G"):
        roofline.ridge_point("A10G")
    with pytest.raises(ValueError, match="fp8"):
        roofline.critical_batch_size(A100, weight_dtype="fp8", compute_dtype="fp8")
    with pytest.raises(ValueError, match="compute_dtype: .*int4.*math dtype"):
        roofline.critical_batch_size(H100, weight_dtype="int4", compute_dtype="int4")
