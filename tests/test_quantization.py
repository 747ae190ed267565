"""Quantization: schemes, the step time with data types, the knee, the memory wall, the sweep time,
throughput at a TPOT SLO, the comparison table and the checkpoint bytes; monotonicity properties
(fewer bytes never hurt) and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from servingmath import decode, memory, models, quantization as q, slo
from servingmath.hardware import get_accelerator

DENSE = ["Llama-3.1-8B", "Llama-3.1-70B", "Llama-2-7B", "Qwen2.5-7B"]
GPUS = ["H100", "A100", "L40S", "H200"]
WEIGHT_DTYPES_BY_BYTES = ["int4", "int8", "bf16", "fp32"]   # 0.5, 1, 2, 4 bytes


# ---------------------------------------------------------------- schemes

def test_the_named_schemes_have_the_data_types_their_names_say():
    assert q.get_scheme("W16A16").dtypes == {"weight_dtype": "bf16", "kv_dtype": "bf16", "compute_dtype": "bf16"}
    assert q.get_scheme("W4A16").dtypes == {"weight_dtype": "int4", "kv_dtype": "bf16", "compute_dtype": "bf16"}
    assert q.get_scheme("W8A8-FP8+KV8").dtypes == {"weight_dtype": "fp8", "kv_dtype": "fp8", "compute_dtype": "fp8"}
    assert q.get_scheme("W4A16").bytes_per_weight == 0.5
    assert len(q.SCHEMES) == 18          # 9 weight/math choices (4 of them fp4: W4A16-MXFP4, W4A16-NVFP4, W4A4-MXFP4, W4A4-NVFP4) x 2 caches
    # weight quantization leaves the KV cache in bf16 unless the name says +KV8
    for name, scheme in q.SCHEMES.items():
        assert (scheme.kv_dtype == "fp8") == name.endswith("+KV8")


def test_default_schemes_pick_the_8_bit_math_the_gpu_has():
    assert q.default_schemes("A100")[3] == "W8A8-INT8"
    assert q.default_schemes("H100")[3] == "W8A8-FP8" and q.default_schemes("L40S")[-1] == "W8A8-FP8+KV8"


def test_a_scheme_object_passes_through_and_a_custom_one_works():
    custom = q.Scheme("W4A16-KV4", "int4", "int4", "bf16")
    assert q.get_scheme(custom) is custom
    assert q.scheme_max_batch("Llama-3.1-8B", "H100", 4096, scheme=custom) > q.scheme_max_batch(
        "Llama-3.1-8B", "H100", 4096, scheme="W4A16+KV8")


# ---------------------------------------------------------------- known values

def test_step_time_equals_decode_step_time_on_one_gpu():
    for name in q.default_schemes("H100"):
        s = q.get_scheme(name)
        b = np.array([1, 16, 256])
        np.testing.assert_allclose(q.scheme_step_time("Llama-3.1-8B", "H100", b, 2048, scheme=name),
                                   decode.decode_step_time("Llama-3.1-8B", "H100", b, 2048, **s.dtypes), rtol=0)


# Llama-3.1-8B: 8,030,261,248 parameters, V = 128,256, D = 4096, untied embeddings (HF config.json);
# H100 SXM: 3.35 TB/s, 989.4 dense bf16 TFLOP/s, 1978.9 fp8 (NVIDIA product page, 2023)
M8 = models.get_model("Llama-3.1-8B")
VD8 = M8.vocab_size * M8.hidden_size
W_H100 = 3.35e12


def _weights_read(b, b_w, m=M8):
    """Weight bytes a decode step of B sequences reads: all but the input-embedding table, plus the B rows
    it gathers (CORE_CHANGES 1: the table is stored but not streamed)."""
    return (models.parameter_count(m) - m.vocab_size * m.hidden_size + b * m.hidden_size) * b_w


def test_tpot_floor_at_zero_context_is_the_weight_read():
    p = models.parameter_count("Llama-3.1-8B")
    assert p == 8_030_261_248
    assert q.tpot_floor("Llama-3.1-8B", "H100", 0, scheme="W4A16") == pytest.approx(
        (p - VD8 + M8.hidden_size) * 0.5 / W_H100, rel=1e-12)
    assert q.tpot_floor("Llama-3.1-8B", "H100", 0, scheme="W16A16") / q.tpot_floor(
        "Llama-3.1-8B", "H100", 0, scheme="W4A16") == pytest.approx(4.0)


def _knee(b_w, peak):
    """Hybrid knee: max(T_w + B g, B c_lin) turns at B* = T_w / (c_lin - g), T_w = (P - V D) b_w / W,
    g = D b_w / W (a gathered row), c_lin = 2 P_mm / F."""
    t_w = (models.parameter_count(M8) - VD8) * b_w / W_H100
    g = M8.hidden_size * b_w / W_H100
    return t_w / (2 * decode.matmul_parameter_count(M8) / peak - g)


def test_weight_only_quantization_moves_the_knee_down_and_w8a8_moves_it_back():
    k16 = q.scheme_knee("Llama-3.1-8B", "H100", scheme="W16A16")
    assert k16 == pytest.approx(_knee(2, 989.4e12), rel=1e-12)
    assert q.scheme_knee("Llama-3.1-8B", "H100", scheme="W8A16") == pytest.approx(_knee(1, 989.4e12), rel=1e-12)
    assert q.scheme_knee("Llama-3.1-8B", "H100", scheme="W4A16") == pytest.approx(_knee(0.5, 989.4e12), rel=1e-12)
    # B* = ridge x b_w / 2 up to the gathered rows (P - V D = P_mm for an untied model; g / c_lin = 1.6e-4
    # in bf16): 8-bit halves it, int4 quarters it, to 2e-4
    assert decode.matmul_parameter_count(M8) == models.parameter_count(M8) - VD8
    assert q.scheme_knee("Llama-3.1-8B", "H100", scheme="W8A16") == pytest.approx(k16 / 2, rel=2e-4)
    assert q.scheme_knee("Llama-3.1-8B", "H100", scheme="W4A16") == pytest.approx(k16 / 4, rel=2e-4)
    assert q.scheme_knee("Llama-3.1-8B", "H100", scheme="W4A16") != pytest.approx(k16 / 4, rel=1e-6)
    # fp8 math doubles F and halves b_w: the W8A8 knee is bf16's to 1e-4
    w8a8 = q.scheme_knee("Llama-3.1-8B", "H100", scheme="W8A8-FP8")
    assert w8a8 == pytest.approx(_knee(1, 1978.9e12), rel=1e-12)
    assert w8a8 == pytest.approx(k16, rel=1e-4)
    # the KV data type is not in the hybrid knee
    assert q.scheme_knee("Llama-3.1-8B", "H100", scheme="W16A16+KV8") == k16


def test_fp8_kv_doubles_the_memory_wall_before_rounding():
    # H100 90 % of 80 GB = 72 GB; Llama-3.1-8B bf16 weights 16.06 GB; KV 131072 B/token bf16
    free = 72e9 - models.weight_bytes("Llama-3.1-8B")
    assert q.scheme_max_batch("Llama-3.1-8B", "H100", 4096, scheme="W16A16") == int(free // (4096 * 131072)) == 104
    assert q.scheme_max_batch("Llama-3.1-8B", "H100", 4096, scheme="W16A16+KV8") == int(free // (4096 * 65536)) == 208


def test_sweep_time_is_usable_memory_over_bandwidth():
    assert q.memory_sweep_time("H100") == pytest.approx(72e9 / 3.35e12)
    assert q.memory_sweep_time("L40S") == pytest.approx(0.9 * 48e9 / 864e9)
    assert q.memory_sweep_time("H100", mbu=0.5) == pytest.approx(2 * q.memory_sweep_time("H100"))


@pytest.mark.parametrize("scheme", ["W16A16", "W16A16+KV8", "W8A16"])
def test_tpot_at_a_bandwidth_bound_memory_wall_is_just_under_the_sweep_time(scheme):
    # at the wall the weights and the caches fill the memory to within one cache; a step reads all of it
    # but the input-embedding table (stored, not streamed: it gathers B rows instead)
    wall = q.scheme_max_batch("Llama-3.1-8B", "H100", 4096, scheme=scheme)
    assert wall < q.scheme_knee("Llama-3.1-8B", "H100", scheme=scheme)          # bandwidth-bound there
    t = q.scheme_step_time("Llama-3.1-8B", "H100", wall, 4096, scheme=scheme)
    s = q.get_scheme(scheme)
    one_cache = 4096 * models.kv_bytes_per_token("Llama-3.1-8B", s.kv_dtype) / W_H100
    table = (VD8 - wall * M8.hidden_size) * s.bytes_per_weight / W_H100
    assert q.memory_sweep_time("H100") - one_cache - table <= t <= q.memory_sweep_time("H100") - table


def test_tokens_per_byte_times_bandwidth_is_the_throughput_below_the_knee():
    b, s = 32, 4096
    x = decode.decode_throughput("Llama-3.1-8B", "H100", b, s, kv_dtype="fp8")
    assert q.tokens_per_byte("Llama-3.1-8B", b, s, scheme="W16A16+KV8") * W_H100 == pytest.approx(x, rel=1e-12)
    # tensor parallelism: each GPU reads its share of the weights read (table aside) and of the caches
    m70 = models.get_model("Llama-3.1-70B")
    assert q.tokens_per_byte("Llama-3.1-70B", b, s, scheme="W16A16", tensor_parallel=4) == pytest.approx(
        b / (_weights_read(b, 2, m70) / 4
             + b * s * memory.kv_bytes_per_token_per_gpu("Llama-3.1-70B", kv_dtype="bf16", tensor_parallel=4)),
        rel=1e-12)


def test_throughput_at_the_slo_on_the_bandwidth_line_is_tau_w_minus_weights_over_tau_s_k():
    # Llama-3.1-8B W4A16 on H100, S = 4096, tau = 5 ms: below the knee, on the bandwidth line
    # tau W = (P - V D) b_w + B (D b_w + S k): each sequence adds its KV and its embedding row
    tau, s = 0.005, 4096
    b = q.max_batch_at_tpot_slo("Llama-3.1-8B", "H100", s, tpot_slo=tau, scheme="W4A16")
    assert b < q.scheme_knee("Llama-3.1-8B", "H100", scheme="W4A16")
    k = s * models.kv_bytes_per_token("Llama-3.1-8B")
    b_real = (tau * W_H100 - _weights_read(0, 0.5)) / (k + M8.hidden_size * 0.5)
    assert b == int(b_real)
    assert q.throughput_at_tpot_slo("Llama-3.1-8B", "H100", s, tpot_slo=tau, scheme="W4A16") == pytest.approx(
        b / q.scheme_step_time("Llama-3.1-8B", "H100", b, s, scheme="W4A16"))


def test_past_the_knee_weight_only_quantization_gives_no_more_throughput():
    # S = 1024, tau = 50 ms: bf16, W8A16 and W4A16 all sit on the compute ceiling 1 / (2P/F + S k / W)
    xs = [q.throughput_at_tpot_slo("Llama-3.1-8B", "H100", 1024, tpot_slo=0.050, scheme=s)
          for s in ("W16A16", "W8A16", "W4A16")]
    ceiling = decode.max_decode_throughput("Llama-3.1-8B", "H100", 1024)
    np.testing.assert_allclose(xs, ceiling, rtol=1e-12)
    assert q.throughput_at_tpot_slo("Llama-3.1-8B", "H100", 1024, tpot_slo=0.050, scheme="W8A8-FP8") > 1.1 * ceiling


def test_chapter_numbers_for_the_opening_question():
    rows = {r["scheme"]: r for r in q.compare_schemes("Llama-3.1-8B", "H100", 4096, tpot_slo=0.050)}
    assert [rows[s]["max_batch"] for s in ("W16A16", "W4A16", "W16A16+KV8")] == [104, 126, 208]
    # at the wall (B < knee, attention bandwidth-bound) T = (weights read + B S k) / W, so X = B / T:
    # about 4918 and 9835 tok/s (were 4846 and 9692 while the step streamed the embedding table)
    for name, b, k in (("W16A16", 104, 131072), ("W16A16+KV8", 208, 65536)):
        t = (_weights_read(b, 2) + b * 4096 * k) / W_H100
        assert rows[name]["tpot"] == pytest.approx(t, rel=1e-12)
        assert rows[name]["throughput"] == pytest.approx(b / t, rel=1e-12)
    assert rows["W16A16+KV8"]["throughput"] / rows["W16A16"]["throughput"] == pytest.approx(2, rel=1e-4)
    assert all(r["limit"] == "memory" for r in rows.values())
    assert rows["W4A16"]["past_knee"] and not rows["W16A16"]["past_knee"]


def test_compare_schemes_says_which_limit_binds():
    rows = {r["scheme"]: r for r in q.compare_schemes("Llama-3.1-70B", "A100", 4096, tpot_slo=0.050, tensor_parallel=4)}
    assert rows["W4A16"]["limit"] == "TPOT SLO" and rows["W4A16"]["batch"] < rows["W4A16"]["max_batch"]
    assert rows["W16A16"]["limit"] == "memory"
    assert rows["W4A16"]["throughput_per_gpu"] == pytest.approx(rows["W4A16"]["throughput"] / 4)
    one_gpu = q.compare_schemes("Llama-3.1-70B", "H100", 4096, tpot_slo=0.050, schemes=["W16A16", "W4A16"])
    assert one_gpu[0]["limit"] == "weights leave no room" and one_gpu[0]["throughput"] == 0.0
    assert one_gpu[1]["batch"] > 0
    tight = q.compare_schemes("Llama-3.1-8B", "H100", 4096, tpot_slo=0.001, schemes=["W16A16"])[0]
    assert tight["limit"] == "SLO below the floor" and tight["batch"] == 0 and np.isnan(tight["tpot"])


def test_allreduces_are_sent_in_bf16_for_w8a8():
    b, s = np.array([1, 64]), 4096
    fp8_sums = decode.decode_step_time("Llama-3.1-70B", "L40S", b, s, weight_dtype="fp8", compute_dtype="fp8",
                                       tensor_parallel=4, allreduce_dtype="fp8")
    ours = q.scheme_step_time("Llama-3.1-70B", "L40S", b, s, scheme="W8A8-FP8", tensor_parallel=4)
    assert np.all(ours > fp8_sums)          # bf16 all-reduces move twice the bytes of fp8 ones
    np.testing.assert_allclose(ours, decode.decode_step_time(
        "Llama-3.1-70B", "L40S", b, s, weight_dtype="fp8", compute_dtype="fp8", tensor_parallel=4), rtol=1e-12)
    same = q.scheme_step_time("Llama-3.1-70B", "L40S", b, s, scheme="W8A8-FP8", tensor_parallel=4,
                              allreduce_dtype="fp8")
    np.testing.assert_allclose(same, fp8_sums, rtol=1e-12)
    # a bf16-math scheme is untouched
    np.testing.assert_allclose(q.scheme_step_time("Llama-3.1-70B", "L40S", b, s, scheme="W4A16", tensor_parallel=4),
                               decode.decode_step_time("Llama-3.1-70B", "L40S", b, s, weight_dtype="int4",
                                                       tensor_parallel=4), rtol=1e-12)


def test_checkpoint_bytes_keep_embeddings_in_16_bits():
    m = models.get_model("Llama-3.1-8B")
    embedding = 2 * m.vocab_size * m.hidden_size                   # untied input embedding + LM head
    body = models.parameter_count(m) - embedding
    assert q.checkpoint_weight_bytes(m) == pytest.approx(body * (0.5 + 2 / 128) + embedding * 2)
    assert q.checkpoint_weight_bytes(m, group_size=None) == pytest.approx(body * 0.5 + embedding * 2)
    assert q.checkpoint_weight_bytes(m, weight_dtype="bf16", group_size=None) == models.weight_bytes(m, "bf16")
    assert q.checkpoint_weight_bytes(m) > models.weight_bytes(m, "int4") * 1.4


# ---------------------------------------------------------------- properties

configs = st.fixed_dictionaries({
    "model": st.sampled_from(DENSE),
    "accelerator": st.sampled_from(GPUS),
    "context_len": st.sampled_from([1, 128, 1024, 4000]),
    "batch_size": st.integers(1, 2048),
    "tensor_parallel": st.sampled_from([1, 2, 4]),
    "kv_dtype": st.sampled_from(["bf16", "fp8"]),
    "compute_dtype": st.sampled_from(["bf16", "int8"]),
})


@settings(max_examples=40, deadline=None)
@given(configs, st.integers(0, 2), st.integers(1, 3))
def test_fewer_bytes_per_weight_never_increase_tpot_at_a_fixed_batch(cfg, i, step):
    j = min(i + step, 3)
    less, more = (q.Scheme("x", WEIGHT_DTYPES_BY_BYTES[n], cfg["kv_dtype"], cfg["compute_dtype"]) for n in (i, j))
    args = (cfg["model"], cfg["accelerator"], cfg["batch_size"], cfg["context_len"])
    for overlap in ("hybrid", "roofline", "additive"):
        assert q.scheme_step_time(*args, scheme=less, tensor_parallel=cfg["tensor_parallel"], overlap=overlap) <= \
            q.scheme_step_time(*args, scheme=more, tensor_parallel=cfg["tensor_parallel"], overlap=overlap)


@settings(max_examples=40, deadline=None)
@given(configs)
def test_fewer_kv_bytes_never_increase_tpot_and_never_lower_the_memory_wall(cfg):
    small, big = (q.Scheme("x", "bf16", kv, "bf16") for kv in ("fp8", "bf16"))
    args = (cfg["model"], cfg["accelerator"], cfg["context_len"])
    assert q.scheme_max_batch(*args, scheme=small, tensor_parallel=cfg["tensor_parallel"]) >= \
        q.scheme_max_batch(*args, scheme=big, tensor_parallel=cfg["tensor_parallel"])
    step = (cfg["model"], cfg["accelerator"], cfg["batch_size"], cfg["context_len"])
    assert q.scheme_step_time(*step, scheme=small, tensor_parallel=cfg["tensor_parallel"]) <= \
        q.scheme_step_time(*step, scheme=big, tensor_parallel=cfg["tensor_parallel"])


@settings(max_examples=40, deadline=None)
@given(configs, st.integers(0, 2))
def test_max_batch_never_decreases_as_weight_bytes_shrink(cfg, i):
    less, more = (q.Scheme("x", WEIGHT_DTYPES_BY_BYTES[n], cfg["kv_dtype"], "bf16") for n in (i, i + 1))
    args = (cfg["model"], cfg["accelerator"], cfg["context_len"])
    assert q.scheme_max_batch(*args, scheme=less, tensor_parallel=cfg["tensor_parallel"]) >= \
        q.scheme_max_batch(*args, scheme=more, tensor_parallel=cfg["tensor_parallel"])


@settings(max_examples=40, deadline=None)
@given(configs, st.floats(0.002, 0.2), st.sampled_from([("W16A16", "W8A16"), ("W8A16", "W4A16"),
                                                       ("W16A16", "W16A16+KV8"), ("W4A16", "W4A16+KV8")]))
def test_throughput_at_a_slo_never_falls_when_bytes_shrink(cfg, tau, pair):
    more, fewer = pair
    args = (cfg["model"], cfg["accelerator"], cfg["context_len"])
    x_more = q.throughput_at_tpot_slo(*args, tpot_slo=tau, scheme=more, tensor_parallel=cfg["tensor_parallel"])
    x_fewer = q.throughput_at_tpot_slo(*args, tpot_slo=tau, scheme=fewer, tensor_parallel=cfg["tensor_parallel"])
    assert x_fewer >= x_more * (1 - 1e-12)


@settings(max_examples=40, deadline=None)
@given(configs, st.floats(0.002, 0.1), st.floats(1.0, 3.0))
def test_throughput_at_a_slo_never_falls_when_the_slo_loosens(cfg, tau, factor):
    scheme = q.Scheme("x", "int4", cfg["kv_dtype"], cfg["compute_dtype"])
    x = q.throughput_at_tpot_slo(cfg["model"], cfg["accelerator"], cfg["context_len"],
                                 tpot_slo=np.array([tau, tau * factor]), scheme=scheme,
                                 tensor_parallel=cfg["tensor_parallel"])
    assert x[1] >= x[0] * (1 - 1e-12)


@settings(max_examples=40, deadline=None)
@given(configs, st.floats(0.002, 0.2))
def test_operating_batch_meets_the_slo_fits_and_is_the_largest(cfg, tau):
    scheme = q.Scheme("x", "int8", cfg["kv_dtype"], cfg["compute_dtype"])
    args = (cfg["model"], cfg["accelerator"], cfg["context_len"])
    tp = cfg["tensor_parallel"]
    b = q.max_batch_at_tpot_slo(*args, tpot_slo=tau, scheme=scheme, tensor_parallel=tp)
    wall = q.scheme_max_batch(*args, scheme=scheme, tensor_parallel=tp)
    assert 0 <= b <= wall
    step = (cfg["model"], cfg["accelerator"])
    if b > 0:
        assert q.scheme_step_time(*step, b, cfg["context_len"], scheme=scheme, tensor_parallel=tp) <= tau
    if b < wall:
        assert q.scheme_step_time(*step, b + 1, cfg["context_len"], scheme=scheme, tensor_parallel=tp) > tau


@settings(max_examples=40, deadline=None)
@given(configs, st.floats(0.002, 0.2))
def test_on_one_gpu_the_operating_batch_is_chapter_07s_b_slo_capped_by_the_wall(cfg, tau):
    scheme = q.Scheme("x", "int4", cfg["kv_dtype"], cfg["compute_dtype"])
    args = (cfg["model"], cfg["accelerator"], cfg["context_len"])
    wall = q.scheme_max_batch(*args, scheme=scheme)
    ours = q.max_batch_at_tpot_slo(*args, tpot_slo=tau, scheme=scheme)
    theirs = slo.max_batch_for_tpot(*args, tpot_slo=tau, max_batch=wall, **scheme.dtypes)
    if ours != theirs:   # only possible when T(B) lands on tau to rounding
        edge = max(ours, theirs)
        assert q.scheme_step_time(cfg["model"], cfg["accelerator"], edge, cfg["context_len"], scheme=scheme) == \
            pytest.approx(tau, rel=1e-9)
    else:
        assert ours == theirs


# ---------------------------------------------------------------- bad input

def test_unknown_scheme_names_the_parameter_and_suggests():
    with pytest.raises(KeyError, match="unknown scheme 'W4A8'.*W4A16"):
        q.get_scheme("W4A8")
    with pytest.raises(ValueError, match="scheme"):
        q.scheme_step_time("Llama-3.1-8B", "H100", 1, 0, scheme="int4")


def test_a_scheme_whose_math_the_gpu_lacks_is_refused_with_alternatives():
    with pytest.raises(ValueError, match="W8A8-FP8.*fp8.*A100-SXM4-80GB.*W8A8-INT8"):
        q.scheme_step_time("Llama-3.1-8B", "A100", 1, 0, scheme="W8A8-FP8")
    with pytest.raises(ValueError, match="fp8"):
        q.compare_schemes("Llama-3.1-8B", "A100", 4096, tpot_slo=0.05, schemes=["W8A8-FP8"])


def test_bad_numbers_are_refused_with_their_name():
    with pytest.raises(ValueError, match="tpot_slo must be > 0"):
        q.max_batch_at_tpot_slo("Llama-3.1-8B", "H100", 4096, tpot_slo=-0.05)
    with pytest.raises(ValueError, match="context_len must be a single number"):
        q.max_batch_at_tpot_slo("Llama-3.1-8B", "H100", [1024, 2048], tpot_slo=0.05)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        q.tokens_per_byte("Llama-3.1-8B", 0, 1024)
    with pytest.raises(ValueError, match="group_size"):
        q.checkpoint_weight_bytes("Llama-3.1-8B", group_size=0)
    with pytest.raises(ValueError, match="unknown weight_dtype 'int3'"):
        q.Scheme("W3A16", "int3", "bf16", "bf16")
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        q.Scheme("", "int4", "bf16", "bf16")
    with pytest.raises(TypeError, match="unexpected keyword argument 'batch'"):
        q.throughput_at_tpot_slo("Llama-3.1-8B", "H100", 4096, tpot_slo=0.05, batch=4)
    with pytest.raises(ValueError, match="context_len must be a single number here"):
        q.compare_schemes("Llama-3.1-8B", "H100", [1024, 4096], tpot_slo=0.05)
    with pytest.raises(ValueError, match="compare_schemes takes one configuration"):
        q.compare_schemes("Llama-3.1-8B", "H100", 4096, tpot_slo=0.05, mbu=[0.5, 0.8])
    with pytest.raises(ValueError, match="at least one scheme"):
        q.compare_schemes("Llama-3.1-8B", "H100", 4096, tpot_slo=0.05, schemes=[])
    with pytest.raises(ValueError, match="mbu"):
        q.memory_sweep_time("H100", mbu=1.5)
    with pytest.raises(ValueError, match="allreduce_dtype"):
        q.scheme_step_time("Llama-3.1-70B", "H100", 1, 0, scheme="W8A8-FP8", tensor_parallel=4,
                            allreduce_dtype="fp6")


def test_accelerator_objects_work_like_names():
    acc = get_accelerator("H100")
    assert q.tpot_floor("Llama-3.1-8B", acc, 1024, scheme="W4A16") == q.tpot_floor("Llama-3.1-8B", "H100", 1024,
                                                                             scheme="W4A16")


def test_the_scheme_sets_the_data_types_so_they_are_refused_as_options():
    # the scheme replaces the three data types, so a weight_dtype= next to it used to be silently dropped
    # (scheme W16A16 by default: bf16 numbers for a user who asked for int4); now it is refused
    for call in (lambda: q.throughput_at_tpot_slo("Llama-3.1-8B", "H100", 4096, tpot_slo=0.05, weight_dtype="int4"),
                 lambda: q.scheme_step_time("Llama-3.1-8B", "H100", 1, 0, kv_dtype="fp8"),
                 lambda: q.tpot_floor("Llama-3.1-8B", "H100", 0, scheme="W4A16", compute_dtype="fp8"),
                 lambda: q.scheme_knee("Llama-3.1-8B", "H100", weight_dtype="int4"),
                 lambda: q.scheme_max_batch("Llama-3.1-8B", "H100", 4096, kv_dtype="fp8"),
                 lambda: q.max_batch_at_tpot_slo("Llama-3.1-8B", "H100", 4096, tpot_slo=0.05, weight_dtype="int4"),
                 lambda: q.compare_schemes("Llama-3.1-8B", "H100", 4096, tpot_slo=0.05, weight_dtype="int4")):
        with pytest.raises(ValueError, match=r"(weight|kv|compute)_dtype is set by the scheme; give scheme="):
            call()
    # a Deployment's data types are replaced by the scheme's, as documented
    from servingmath.deployment import Deployment
    dep = Deployment.build("Llama-3.1-8B", "H100", weight_dtype="int4")
    assert q.scheme_step_time(dep, 1, 0) == q.scheme_step_time("Llama-3.1-8B", "H100", 1, 0, scheme="W16A16")


def test_bisection_above_the_search_limit_agrees_with_the_table():
    """Caps above slo's 65,536-batch search limit are bisected, smaller ones tabulated: both give the same B.

    (The limit moved from quantization._TABULATE_UP_TO to slo._SEARCH_LIMIT: one search for the library.)"""
    limit = slo._SEARCH_LIMIT
    assert limit == 65536
    tau = np.array([0.006, 0.01, 0.02, 0.05, 0.2])
    args = ("Llama-3.1-8B", "H100", 512)
    tabulated = q.max_batch_at_tpot_slo(*args, tpot_slo=tau, max_batch=limit)
    bisected = q.max_batch_at_tpot_slo(*args, tpot_slo=tau, max_batch=limit + 1)
    assert np.all(tabulated < limit)      # the SLO binds, not the cap
    np.testing.assert_array_equal(tabulated, bisected)
    for t, b in zip(tau, bisected):
        assert q.scheme_step_time(*args[:2], b, 512) <= t < q.scheme_step_time(*args[:2], b + 1, 512)
