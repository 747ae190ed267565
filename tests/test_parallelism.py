"""Tensor parallelism: the ring all-reduce cost, the communication of a step, TPOT(B, N),
the knee and the SLO batch. Known values with sources, hypothesis properties, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from servingmath import decode, memory, parallelism as par, prefill
from servingmath.hardware import Accelerator, get_accelerator
from servingmath.models import get_model, parameter_count

M70, H100 = "Llama-3.1-70B", "H100-SXM5-80GB"
REAL = dict(mfu=0.6, mbu=0.65, **par.NCCL_NVLINK_ALLREDUCE)
# H100's numbers, with a link so fast that communication costs nothing
FREE_LINK = Accelerator.from_numbers("H100-free-link", memory_bytes=80e9, memory_bandwidth=3.35e12,
                                     peak_flops={"bf16": 989.4e12}, interconnect_bandwidth=1e30)

messages = st.floats(min_value=0, max_value=1e10, allow_nan=False)
gpus = st.integers(min_value=1, max_value=64)
latencies = st.floats(min_value=0, max_value=1e-4, allow_nan=False)


# ---------------------------------------------------------------- allreduce_time

def test_two_gpus_send_the_whole_message_once():
    # N = 2: 2 (N - 1) / N = 1, so 1 GB at 1 GB/s takes 1 s
    assert par.allreduce_time(1e9, 2, 1e9) == pytest.approx(1.0)


def test_ring_factor_approaches_two():
    # 2 (N - 1) / N: 1.75 for 8 GPUs, 1.9375 for 32
    assert par.allreduce_time(1e9, 8, 1e9) == pytest.approx(1.75)
    assert par.allreduce_time(1e9, 32, 1e9) == pytest.approx(1.9375)
    assert par.ring_allreduce_bytes(1e6, 8) == pytest.approx(1.75e6)


def test_nccl_latency_model_matches_its_source():
    # NCCL tuning.cc (ring, LL, NVLink): baseLat 6.6 us + 2 (N - 1) x hwLat 0.6 us
    kw = par.NCCL_NVLINK_ALLREDUCE_TIME
    assert par.allreduce_time(0, 2, 450e9, **kw) == pytest.approx(7.8e-6)
    assert par.allreduce_time(0, 4, 450e9, **kw) == pytest.approx(10.2e-6)
    assert par.allreduce_time(0, 8, 450e9, **kw) == pytest.approx(15.0e-6)
    assert par.NCCL_NVLINK_ALLREDUCE["allreduce_latency"] == kw["latency"]
    assert par.NCCL_NVLINK_ALLREDUCE["allreduce_base_latency"] == kw["base_latency"]


def test_bidirectional_figure_would_halve_the_time():
    one_way = get_accelerator(H100).interconnect_bandwidth
    assert one_way == pytest.approx(450e9)
    assert par.allreduce_time(16e6, 8, 2 * one_way) == pytest.approx(par.allreduce_time(16e6, 8, one_way) / 2)


@given(messages, latencies, latencies, st.floats(min_value=1e6, max_value=1e13))
def test_zero_for_one_gpu(m, a, a0, bw):
    assert par.allreduce_time(m, 1, bw, latency=a, base_latency=a0) == 0.0


@given(messages, messages, gpus, latencies, latencies)
def test_non_decreasing_in_message_size(m1, m2, n, a, a0):
    small, large = sorted([m1, m2])
    assert (par.allreduce_time(small, n, 450e9, latency=a, base_latency=a0)
            <= par.allreduce_time(large, n, 450e9, latency=a, base_latency=a0))


@given(messages, gpus, gpus, latencies, latencies)
def test_non_decreasing_in_gpu_count(m, n1, n2, a, a0):
    few, many = sorted([n1, n2])
    assert (par.allreduce_time(m, few, 450e9, latency=a, base_latency=a0)
            <= par.allreduce_time(m, many, 450e9, latency=a, base_latency=a0) * (1 + 1e-12))


@given(messages, st.integers(min_value=2, max_value=64))
def test_bandwidth_term_between_one_and_two_messages(m, n):
    t = par.allreduce_time(m, n, 1.0)
    assert m <= t * (1 + 1e-12) and t <= 2 * m


def test_arrays_broadcast_and_scalars_give_floats():
    t = par.allreduce_time(np.array([1e6, 2e6])[:, None], np.array([1, 2, 8]), 450e9)
    assert t.shape == (2, 3) and np.all(t[:, 0] == 0)
    assert isinstance(par.allreduce_time(1e6, 8, 450e9), float)


@pytest.mark.parametrize("kwargs, name", [
    (dict(message_bytes=-1.0, n_gpus=2, link_bandwidth=1e9), "message_bytes"),
    (dict(message_bytes=1.0, n_gpus=0, link_bandwidth=1e9), "n_gpus"),
    (dict(message_bytes=1.0, n_gpus=2.5, link_bandwidth=1e9), "n_gpus"),
    (dict(message_bytes=1.0, n_gpus=2, link_bandwidth=0.0), "link_bandwidth"),
    (dict(message_bytes=1.0, n_gpus=2, link_bandwidth=1e9, latency=-1e-6), "latency"),
    (dict(message_bytes=1.0, n_gpus=2, link_bandwidth=1e9, base_latency=-1e-6), "base_latency"),
    (dict(message_bytes="1 MB", n_gpus=2, link_bandwidth=1e9), "message_bytes"),
])
def test_allreduce_bad_input_names_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        par.allreduce_time(**kwargs)


# ---------------------------------------------------------------- communication of a step

def test_two_allreduces_per_layer_of_batch_times_hidden():
    m = get_model(M70)
    t = par.tensor_parallel_communication_time(M70, H100, 64, tensor_parallel=8, allreduce_latency=1e-6,
                                               allreduce_base_latency=5e-6)
    one = par.allreduce_time(64 * m.hidden_size * 2, 8, 450e9, latency=1e-6, base_latency=5e-6)
    assert t == pytest.approx(2 * m.n_layers * one)
    # physical bound at B = 64: 160 x 1.75 x 64 x 8192 x 2 B / 450 GB/s = 0.652 ms
    assert par.tensor_parallel_communication_time(M70, H100, 64, tensor_parallel=8) == pytest.approx(
        160 * 1.75 * 64 * 8192 * 2 / 450e9)


def test_link_efficiency_scales_only_the_bandwidth_term():
    base = par.tensor_parallel_communication_time(M70, H100, 64, tensor_parallel=8, allreduce_latency=1e-6)
    slow = par.tensor_parallel_communication_time(M70, H100, 64, tensor_parallel=8, allreduce_latency=1e-6,
                                                  link_efficiency=0.5)
    latency_part = 160 * 14 * 1e-6
    assert slow - latency_part == pytest.approx(2 * (base - latency_part))


def test_allreduces_are_sent_in_the_allreduce_dtype():
    # bf16 by default whatever the weights or the math (CORE_CHANGES 2); fp32 doubles the bandwidth term
    bf16 = par.tensor_parallel_communication_time(M70, H100, 64, tensor_parallel=8)
    fp8 = par.tensor_parallel_communication_time(M70, H100, 64, tensor_parallel=8, weight_dtype="fp8",
                                                 compute_dtype="fp8")
    fp32 = par.tensor_parallel_communication_time(M70, H100, 64, tensor_parallel=8, allreduce_dtype="fp32")
    assert fp8 == bf16
    assert fp32 == pytest.approx(2 * bf16)


def test_communication_is_zero_without_tensor_parallelism_even_without_a_link():
    lonely = Accelerator.from_numbers("no-link", 80e9, 3e12, {"bf16": 1e15})
    assert par.tensor_parallel_communication_time(M70, lonely, [1, 64], tensor_parallel=1).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="no interconnect bandwidth"):
        par.tensor_parallel_communication_time(M70, lonely, 64, tensor_parallel=2)


def test_communication_rejects_bad_input():
    with pytest.raises(ValueError, match="tokens must be >= 0, got -1"):
        par.tensor_parallel_communication_time(M70, H100, -1, tensor_parallel=8)
    with pytest.raises(ValueError, match="link_efficiency must be in"):
        par.tensor_parallel_communication_time(M70, H100, 1, tensor_parallel=8, link_efficiency=1.5)
    with pytest.raises(ValueError, match="tensor_parallel"):
        par.tensor_parallel_communication_time(M70, H100, 1, tensor_parallel=0)
    with pytest.raises(ValueError, match="allreduce_latency|latency must be >= 0"):
        par.tensor_parallel_communication_time(M70, H100, 1, tensor_parallel=8, allreduce_latency=-1e-6)


def test_decode_and_prefill_charge_the_same_communication():
    # one step model: a decode step of B sequences all-reduces B x D activations per call, a prefill
    # of B prompts of L tokens B x L x D, each as tensor_parallel_communication_time charges them
    opts = dict(tensor_parallel=8, allreduce_latency=1e-6, allreduce_base_latency=5e-6, link_efficiency=0.8)
    dec = decode.decode_step_parts(M70, H100, 64, 2048, **opts)["communication"]
    assert dec == pytest.approx(par.tensor_parallel_communication_time(M70, H100, 64, **opts), rel=1e-12)
    pre = prefill.prefill_step_parts(M70, H100, 512, batch_size=4, **opts)["communication"]
    assert pre == pytest.approx(par.tensor_parallel_communication_time(M70, H100, 4 * 512, **opts), rel=1e-12)


# ---------------------------------------------------------------- TPOT(B, N)

@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_agrees_with_decode_step_time_while_kv_heads_split(n):
    b, s = np.array([1, 16, 256, 1024]), np.array([[0], [2048], [8192]])
    ours = par.tensor_parallel_decode_time(M70, H100, b, s, tensor_parallel=n, mfu=0.6, mbu=0.65,
                                          allreduce_latency=1e-6)
    theirs = decode.decode_step_time(M70, H100, b, s, tensor_parallel=n, mfu=0.6, mbu=0.65,
                                     allreduce_latency=1e-6)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def _hybrid_decode(b, s, n, mfu=1.0, mbu=1.0):
    """TPOT of Llama-3.1-70B on N x H100 from its shapes and the spec sheet (N <= K = 8).

    Weights read: every parameter but the V x D input-embedding table, whose B rows are gathered
    (CORE_CHANGES 1); KV: B x S x 327,680 B; all-reduces: 2 L per step of B x D bf16 values.
    H100 SXM: 3.35 TB/s, 989.4 dense bf16 TFLOP/s, NVLink 4 450 GB/s one way (NVIDIA datasheet, 2023).
    """
    m = get_model(M70)
    W, F = 3.35e12 * mbu, 989.4e12 * mfu
    vd, d = m.vocab_size * m.hidden_size, m.hidden_size
    kv_per_token = 2 * m.n_layers * m.n_kv_heads * m.head_dim * 2      # 327,680 B
    assert kv_per_token == 327680
    weights = (parameter_count(M70) - vd + b * d) * 2 / (n * W)
    linear = 2 * decode.matmul_parameter_count(M70) * b / (n * F)
    kv = b * s * kv_per_token / (n * W)
    attention = 4 * m.n_layers * m.n_heads * m.head_dim * s * b / (n * F)
    comm = 2 * m.n_layers * par.allreduce_time(b * d * 2, n, 450e9)
    return max(weights, linear) + max(kv, attention) + comm


def test_known_values_at_batch_one():
    # physical bound: (P - V D + D) x 2 B of weights + 2048 x 327,680 B of KV over N x 3.35 TB/s, plus comm
    t = par.tensor_parallel_decode_time(M70, H100, 1, 2048, tensor_parallel=[2, 4, 8])
    expected = [_hybrid_decode(1, 2048, n) for n in (2, 4, 8)]
    np.testing.assert_allclose(t, expected, rtol=1e-9)
    # NCCL latencies add 160 x 15.0 us = 2.4 ms at N = 8
    real = par.tensor_parallel_decode_time(M70, H100, 1, 2048, tensor_parallel=8, **par.NCCL_NVLINK_ALLREDUCE)
    assert real - t[2] == pytest.approx(160 * 15e-6, rel=0.01)


valid_70b = st.sampled_from(memory.valid_tensor_parallel_degrees(M70))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 2048), st.integers(0, 16384), valid_70b, valid_70b,
       st.sampled_from(["hybrid", "roofline", "additive"]))
def test_tpot_non_increasing_in_tp_when_communication_is_free(b, s, n1, n2, overlap):
    few, many = sorted([n1, n2])
    t_few = par.tensor_parallel_decode_time(M70, FREE_LINK, b, s, tensor_parallel=few, overlap=overlap)
    t_many = par.tensor_parallel_decode_time(M70, FREE_LINK, b, s, tensor_parallel=many, overlap=overlap)
    assert t_many <= t_few * (1 + 1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 1023), st.integers(0, 8192), valid_70b)
def test_tpot_non_decreasing_in_batch(b, s, n):
    t = par.tensor_parallel_decode_time(M70, H100, [b, b + 1], s, tensor_parallel=n, **REAL)
    assert t[0] <= t[1]


def test_kv_reads_stop_shrinking_once_heads_replicate():
    # Llama-3.1-70B has K = 8 KV heads: N = 16 keeps one whole head per GPU, as N = 8 does
    def kv_part(n):
        return (par.tensor_parallel_decode_time(M70, FREE_LINK, 64, 8192, tensor_parallel=n, overlap="additive")
                - par.tensor_parallel_decode_time(M70, FREE_LINK, 64, 0, tensor_parallel=n, overlap="additive"))
    attention = lambda n: 4 * 80 * 64 * 128 * 8192 * 64 / (n * 989.4e12)   # noqa: E731
    kv8, kv16 = kv_part(8) - attention(8), kv_part(16) - attention(16)
    assert kv16 == pytest.approx(kv8)
    assert kv_part(4) - attention(4) == pytest.approx(2 * kv8)


def test_tpot_rejects_a_degree_that_does_not_split_the_heads():
    with pytest.raises(ValueError, match="tensor_parallel = 8 cannot split Qwen2.5-7B"):
        par.tensor_parallel_decode_time("Qwen2.5-7B", H100, 1, 1024, tensor_parallel=8)
    with pytest.raises(ValueError, match="tensor_parallel = 3"):
        par.tensor_parallel_decode_time(M70, H100, 1, 1024, tensor_parallel=3)
    with pytest.raises(KeyError, match="overlap"):
        par.tensor_parallel_decode_time(M70, H100, 1, 1024, tensor_parallel=8, overlap="perfect")


def test_per_gpu_throughput_is_total_over_n():
    n, b = np.array([2, 4, 8]), 64
    t = par.tensor_parallel_decode_time(M70, H100, b, 2048, tensor_parallel=n, **REAL)
    np.testing.assert_allclose(par.per_gpu_throughput(M70, H100, b, 2048, tensor_parallel=n, **REAL),
                               b / (n * t))
    # physical bound at B = 64, S = 2048, N = 8, from the shapes and the spec sheet (about 1075 tok/s per GPU)
    assert par.per_gpu_throughput(M70, H100, 64, 2048, tensor_parallel=8) == pytest.approx(
        64 / (8 * _hybrid_decode(64, 2048, 8)), rel=1e-9)


# ---------------------------------------------------------------- the knee

def _dense_knee(model, acc, mfu=1.0, mbu=1.0, weight_dtype="bf16"):
    """Hybrid knee of a dense or saturated-MoE model from its shapes: max(T_w + B g, B c_lin) turns at
    B* = T_w / (c_lin - g), with T_w = (P - V D) b_w / W the weights without the input-embedding table
    (tied: P b_w / W), g = D b_w / W the row each sequence gathers and c_lin = 2 P_mm / F."""
    m, acc = get_model(model), get_accelerator(acc)
    b_w = {"bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5}[weight_dtype]
    W, F = acc.memory_bandwidth * mbu, acc.peak_flops("bf16") * mfu
    vd = 0 if m.tied_embeddings else m.vocab_size * m.hidden_size
    return ((parameter_count(m) - vd) * b_w / W) / (2 * decode.matmul_parameter_count(m) / F
                                                    - m.hidden_size * b_w / W)


def test_knee_is_the_ridge_times_bytes_per_flop_and_independent_of_n():
    # every term is divided by N (N <= K = 8), so N cancels
    acc = get_accelerator(H100)
    m = get_model(M70)
    p_mm = decode.matmul_parameter_count(M70)
    knees = par.tp_knee_batch_size(M70, H100, tensor_parallel=[1, 2, 4, 8], mfu=0.6, mbu=0.65)
    np.testing.assert_allclose(knees, _dense_knee(M70, H100, 0.6, 0.65), rtol=1e-12)
    assert par.tp_knee_batch_size(M70, H100) == pytest.approx(_dense_knee(M70, H100), rel=1e-12)
    # bf16 weights, untied: P - V D = P_mm, so B* is the ridge point 989.4 / 3.35 = 295.3 FLOP/B up to the
    # gathered rows (a factor 1 + 3.5e-5), no longer 1.5 % above it (the table is not streamed: CORE_CHANGES 1)
    ridge = acc.ridge_point("bf16")
    assert ridge == pytest.approx(989.4 / 3.35, rel=1e-12)
    assert parameter_count(M70) - m.vocab_size * m.hidden_size == p_mm
    ratio = par.tp_knee_batch_size(M70, H100) / ridge
    assert ratio == pytest.approx(1 / (1 - ridge * m.hidden_size / p_mm), rel=1e-12)
    assert 1 < ratio < 1.0001


def test_knee_with_kv_rises_with_context_and_vanishes_past_the_critical_length():
    s = np.array([0, 512, 1024, 2048])
    knees = par.tp_knee_batch_size(M70, H100, s, overlap="roofline")
    assert knees[0] == pytest.approx(par.tp_knee_batch_size(M70, H100))
    assert np.all(np.diff(knees[:3]) > 0) and math.isinf(knees[3])
    assert np.all(par.tp_knee_batch_size(M70, H100, s) == knees[0])   # hybrid: KV does not move it


def test_knee_marks_where_the_weight_matmuls_turn_compute_bound():
    knee = par.tp_knee_batch_size(M70, H100, tensor_parallel=8, **{"mfu": 0.6, "mbu": 0.65})
    below, above = math.floor(knee), math.ceil(knee)
    parts = decode.decode_step_parts(M70, H100, [below, above], 0, tensor_parallel=8, mfu=0.6, mbu=0.65)
    assert parts["linear_compute"][0] < parts["weight_memory"][0]
    assert parts["linear_compute"][1] > parts["weight_memory"][1]


def test_knee_of_a_mixture_of_experts_is_where_its_matmuls_catch_up_with_the_experts_read():
    # MoE is allowed now (it was refused). Mixtral-8x7B's knee lies near 1100 sequences, where every
    # expert is touched (1 - (1 - 2/8)^1000 = 1 to double precision), so B* is the dense formula with P the
    # total and P_mm the active parameters; the matmuls cross the weight read there, at N = 1 and N = 8
    for n in (1, 8):
        knee = par.tp_knee_batch_size("Mixtral-8x7B", H100, tensor_parallel=n)
        assert knee == pytest.approx(_dense_knee("Mixtral-8x7B", H100), rel=1e-6)
        below, above = math.floor(knee), math.ceil(knee)
        parts = decode.decode_step_parts("Mixtral-8x7B", H100, [below, above], 0, tensor_parallel=n)
        assert parts["linear_compute"][0] < parts["weight_memory"][0]
        assert parts["linear_compute"][1] > parts["weight_memory"][1]
    # far above the dense model of its active size: the whole expert set must be read
    assert par.tp_knee_batch_size("Mixtral-8x7B", H100) > 3 * get_accelerator(H100).ridge_point("bf16")


def test_knee_of_the_additive_model_is_the_roofline_balance_and_unknown_overlap_is_refused():
    s = np.array([0, 256, 1024])
    np.testing.assert_allclose(par.tp_knee_batch_size(M70, H100, s, overlap="additive"),
                               par.tp_knee_batch_size(M70, H100, s, overlap="roofline"), rtol=1e-12)
    with pytest.raises(KeyError, match="overlap"):
        par.tp_knee_batch_size(M70, H100, overlap="perfect")


# ---------------------------------------------------------------- the SLO batch

@pytest.mark.parametrize("n", [2, 4, 8])
def test_slo_batch_is_the_last_batch_that_meets_the_target(n):
    b = par.tpot_slo_batch_size(M70, H100, 2048, tensor_parallel=n, tpot_slo=0.050, **REAL)
    t = par.tensor_parallel_decode_time(M70, H100, [b, b + 1], 2048, tensor_parallel=n, **REAL)
    assert t[0] <= 0.050 < t[1]


def test_slo_batch_edge_cases():
    assert par.tpot_slo_batch_size(M70, H100, 2048, tensor_parallel=8, tpot_slo=0.001) == 0   # below the weight read
    assert par.tpot_slo_batch_size(M70, H100, 2048, tensor_parallel=8, tpot_slo=10.0, max_batch_size=100) == 100
    # above the knee the hybrid step is linear in B: T = B (c_lin + m_kv + c_comm), so
    # B_slo = floor(50 ms / (c_lin + m_kv + c_comm)) at the physical bound (947)
    m = get_model(M70)
    per_sequence = (2 * decode.matmul_parameter_count(M70) / (8 * 989.4e12)
                    + 2048 * 327680 / (8 * 3.35e12)
                    + 2 * m.n_layers * par.allreduce_time(m.hidden_size * 2, 8, 450e9))
    closed_form = math.floor(0.050 / per_sequence)
    assert closed_form > par.tp_knee_batch_size(M70, H100)
    assert par.tpot_slo_batch_size(M70, H100, 2048, tensor_parallel=8, tpot_slo=0.050) == closed_form
    with pytest.raises(ValueError, match="tpot_slo"):
        par.tpot_slo_batch_size(M70, H100, 2048, tensor_parallel=8, tpot_slo=0.0)
    with pytest.raises(ValueError, match="context_len"):
        par.tpot_slo_batch_size(M70, H100, [1024, 2048], tensor_parallel=8, tpot_slo=0.05)
