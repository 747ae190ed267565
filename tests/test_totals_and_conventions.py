"""Totals as input, the named conventions, and the functions for the ideas that were missing
(communication roofline, footprint and chips, KV transfer, chunked prefill, KV freed per step, training MFU).

Expected values are derived from first principles in each test, never pasted from the library's output.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from servingmath import conventions, decode, memory, metrics, models, prefill, roofline, sharding, step
from servingmath import simulate as sim
from servingmath.deployment import Deployment
from servingmath.hardware import get_accelerator
from servingmath.models import MissingShapeError, as_totals, model_from_totals, with_kv_heads

H100 = get_accelerator("H100")
V5E = get_accelerator("TPU-v5e")


# ---------------------------------------------------------------- one code path: a catalog model and its totals

@pytest.mark.parametrize("name", ["Llama-3.1-8B", "Llama-2-7B", "Mixtral-8x7B", "Llama-3.2-1B", "Mistral-7B",
                                  "Qwen2.5-7B", "GPT-J-6B"])
@pytest.mark.parametrize("tp", [1, 2, 4])
def test_every_step_number_is_the_same_through_the_totals(name, tp):
    m, t = models.get_model(name), as_totals(name)
    opts = dict(tensor_parallel=tp, allreduce_latency=1e-6, allreduce_base_latency=5e-6, weight_dtype="fp8")
    pairs = [
        (decode.decode_step_time(m, H100, [1, 64], [0, 2000], **opts),
         decode.decode_step_time(t, H100, [1, 64], [0, 2000], **opts)),
        (prefill.prefill_time(m, H100, 1500, cached_len=500, **opts),
         prefill.prefill_time(t, H100, 1500, cached_len=500, **opts)),
        (decode.knee_batch_size(m, H100, 2048, **opts), decode.knee_batch_size(t, H100, 2048, **opts)),
        (decode.critical_context_length(m, H100, **opts), decode.critical_context_length(t, H100, **opts)),
        (prefill.saturating_chunk_size(m, H100, **opts), prefill.saturating_chunk_size(t, H100, **opts)),
        (memory.max_batch_size(m, H100, 2048, **opts), memory.max_batch_size(t, H100, 2048, **opts)),
        (prefill.critical_prompt_length(m), prefill.critical_prompt_length(t)),
        (models.flops_per_token(m, 100), models.flops_per_token(t, 100)),
    ]
    for a, b in pairs:
        np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("name, ep", [("DeepSeek-V3", 1), ("DeepSeek-V3", 8), ("Qwen3-30B-A3B", 4)])
def test_moe_and_mla_models_through_their_totals(name, ep):
    m, t = models.get_model(name), as_totals(name)
    opts = dict(expert_parallel=ep, weight_dtype="fp8", allreduce_latency=1e-6)
    for b, s in [(1, 100), (64, 2000)]:
        assert decode.decode_step_time(t, H100, b, s, **opts) == pytest.approx(
            decode.decode_step_time(m, H100, b, s, **opts), rel=1e-12)
    assert memory.max_batch_size(t, "H200", 2000, **opts) == memory.max_batch_size(m, "H200", 2000, **opts)
    assert models.attention_parameter_count(t) == models.attention_parameter_count(m)


def test_a_napkin_model_reads_every_parameter_once_and_multiplies_each_by_two_flops():
    # 30B int8 weights, 100 kB of int8 KV per token, on 16 pooled TPU v5e chips, batch 4 at 8192 tokens
    m = model_from_totals(parameters=30e9, kv_bytes_per_token=100e3, kv_dtype="int8")
    chips = sharding.pooled_slice(V5E, 16)
    t = decode.decode_step_time(m, chips, 4, 8192, weight_dtype="int8", kv_dtype="int8")
    bw, flops = 16 * V5E.memory_bandwidth, 16 * V5E.peak_flops("bf16")
    expected = max(30e9 / bw, 2 * 30e9 * 4 / flops) + 4 * 8192 * 100e3 / bw   # hybrid, attention FLOPs ignored
    assert t == pytest.approx(expected, rel=1e-12)
    # another KV dtype scales the stated bytes
    assert models.kv_bytes_per_token(m, "bf16") == 2 * models.kv_bytes_per_token(m, "int8") == 200e3


def test_totals_derive_what_the_shapes_give_and_say_what_they_ignore():
    m = model_from_totals(parameters=8e9, n_layers=32, n_heads=32, n_kv_heads=8, head_dim=128, kv_dtype="fp8")
    assert models.kv_bytes_per_token(m, "fp8") == 2 * 32 * 8 * 128 * 1
    assert models.attention_flops_per_pair(m) == 4 * 32 * 32 * 128
    assert m.attention_type == "GQA" and m.group_size == 4
    assert "attention FLOPs" not in " ".join(m.ignored) and "input embedding" in " ".join(m.ignored)
    assert model_from_totals(parameters=1e9, kv_bytes_per_token=0).ignored[-1] == "KV cache"
    # with the embedding stated, the book's rule applies: (P - V D) read, D b_w gathered per token
    e = model_from_totals(parameters=8e9, kv_bytes_per_token=131072, embedding_parameters=128256 * 4096,
                          hidden_size=4096, lm_head_parameters=128256 * 4096)
    dep = Deployment.build(e, H100)
    work = step.iteration_work(dep, step.Iteration.decode(e, sequences=2, context_len=0))
    assert work.weight_bytes == pytest.approx(2 * (8e9 - 128256 * 4096 + 2 * 4096), rel=1e-12)
    assert work.linear_flops == pytest.approx(2 * 2 * (8e9 - 128256 * 4096), rel=1e-12)


def test_matmul_parameters_and_a_mixture_of_experts_from_totals():
    m = model_from_totals(matmul_parameters=6.6e9, embedding_parameters=0.13e9, kv_bytes_per_token=1)
    assert models.parameter_count(m) == pytest.approx(6.73e9) and models.matmul_parameter_count(m) == pytest.approx(6.6e9)
    moe = model_from_totals(parameters=46.7e9, active_parameters=12.9e9, n_experts=8, n_active_experts=2,
                            kv_bytes_per_token=131072)
    shared, per_expert = models.expert_parameter_split(moe)
    assert per_expert == pytest.approx((46.7e9 - 12.9e9) / 6)
    assert shared + 8 * per_expert == pytest.approx(46.7e9) and shared + 2 * per_expert == pytest.approx(12.9e9)
    # batch 1 reads about the active experts, a large batch all of them
    t1 = decode.decode_step_time(moe, H100, 1, 0)
    tbig = decode.decode_step_parts(moe, H100, 4096, 0)["weight_memory"]
    assert t1 == pytest.approx(2 * 12.9e9 / H100.memory_bandwidth, rel=1e-9)
    assert tbig == pytest.approx(2 * 46.7e9 / H100.memory_bandwidth, rel=1e-6)


@pytest.mark.parametrize("call, match", [
    (lambda: decode.decode_step_time(model_from_totals(parameters=7e9, kv_bytes_per_token=1), H100, 1, 0,
                                     tensor_parallel=2), "n_layers and hidden_size"),
    (lambda: decode.decode_step_time(model_from_totals(parameters=7e9), H100, 1, 0), "kv_bytes_per_token"),
    (lambda: roofline.decode_attention_intensity(model_from_totals(parameters=7e9)), "n_heads"),
    (lambda: sharding.kv_heads_per_gpu(model_from_totals(parameters=7e9), 2), "n_kv_heads"),
    (lambda: model_from_totals(kv_bytes_per_token=1), "parameters="),
    (lambda: model_from_totals(parameters=-1), "parameters must be a number > 0"),
    (lambda: model_from_totals(parameters=1e9, embedding_parameters=2e9), "exceed parameters"),
    (lambda: model_from_totals(parameters=1e9, active_parameters=0.5e9), "n_experts"),
    (lambda: model_from_totals(parameters=1e9, n_experts=8, n_active_experts=2), "active_parameters"),
    (lambda: model_from_totals(parameters=1e9, n_heads=32, n_kv_heads=5), "multiple of n_kv_heads"),
    (lambda: model_from_totals(parameters=1e9, n_layers=0), "n_layers must be an integer >= 1"),
    (lambda: model_from_totals(parameters=1e9, kv_dtype="fp6"), "fp6"),
    (lambda: with_kv_heads("Llama-2-13B", 7), "must divide"),
    (lambda: with_kv_heads("Llama-2-13B", 8, weights="half"), "weights"),
])
def test_missing_shapes_and_bad_totals_raise_errors_that_name_them(call, match):
    with pytest.raises((ValueError, KeyError), match=match):
        call()


def test_totals_without_heads_split_over_any_number_of_chips_evenly():
    m = model_from_totals(parameters=52e9, kv_bytes_per_token=2**21, n_layers=64, hidden_size=8192)
    assert sharding.valid_tensor_parallel_degrees(m, 5) == [1, 2, 3, 4, 5]
    assert sharding.tensor_parallel_shares(m, 3) == (pytest.approx(1 / 3), pytest.approx(1 / 3))
    # kipply's capacity: the weights need at least 3 A100-40GB, all of their memory
    assert memory.min_tensor_parallel(m, "A100-40GB", 1, gpu_memory_utilization=1.0) == 3


# ---------------------------------------------------------------- conventions

def test_gqa_recompute_removes_the_kv_projections_and_fixed_keeps_them():
    base = models.get_model("Llama-2-13B")
    re, fixed = with_kv_heads(base, 8), with_kv_heads(base, 8, weights="fixed")
    delta = 2 * base.n_layers * base.hidden_size * base.head_dim * (base.n_kv_heads - 8)
    assert models.parameter_count(base) - models.parameter_count(re) == delta
    assert models.parameter_count(fixed) == models.parameter_count(base)
    for m in (re, fixed):
        assert models.kv_bytes_per_token(m) == models.kv_bytes_per_token(base) * 8 / 40
    # the totals route gives the same recomputed model
    again = with_kv_heads(as_totals(base), 8)
    assert models.parameter_count(again) == pytest.approx(models.parameter_count(re), rel=1e-12)
    assert decode.decode_step_time(again, H100, 8, 1000) == pytest.approx(
        decode.decode_step_time(re, H100, 8, 1000), rel=1e-12)


def test_kv_sharding_by_batch_spreads_the_cache_the_default_replicates_it():
    m = models.get_model("Llama-3.1-70B")   # K = 8
    heads = memory.kv_bytes_per_token_per_gpu(m, tensor_parallel=16)
    batch = memory.kv_bytes_per_token_per_gpu(m, tensor_parallel=16, kv_sharding="batch")
    assert heads == models.kv_bytes_per_token(m) / 8 and batch == models.kv_bytes_per_token(m) / 16
    # the weights are the same either way (K/V projections still replicate)
    w = [step.work_coefficients(Deployment.build(m, H100, tensor_parallel=16, kv_sharding=k)).stationary_weight_bytes
         for k in ("heads", "batch")]
    assert w[0] == w[1]
    assert memory.max_batch_size(m, H100, 8192, tensor_parallel=16, kv_sharding="batch") > \
        memory.max_batch_size(m, H100, 8192, tensor_parallel=16)
    # N <= K: no difference, and the default is unchanged
    assert memory.max_batch_size(m, H100, 8192, tensor_parallel=8, kv_sharding="batch") == \
        memory.max_batch_size(m, H100, 8192, tensor_parallel=8)
    with pytest.raises(ValueError, match="kv_sharding"):
        Deployment.build(m, H100, kv_sharding="rows")


def test_ring_factor_convention_reaches_the_step_model():
    assert sharding.allreduce_time(1e6, 8, 1e9, ring_factor=False) == pytest.approx(2e6 / 1e9)
    assert sharding.allreduce_time(1e6, 8, 1e9) == pytest.approx(2 * 7 / 8 * 1e6 / 1e9)
    assert sharding.allreduce_time(1e6, 1, 1e9, ring_factor=False) == 0.0
    on = decode.decode_step_parts("Llama-3.1-70B", H100, 64, 100, tensor_parallel=8)["communication"]
    off = decode.decode_step_parts("Llama-3.1-70B", H100, 64, 100, tensor_parallel=8,
                                   allreduce_ring_factor=False)["communication"]
    assert off / on == pytest.approx(8 / 7)
    with pytest.raises(ValueError, match="allreduce_ring_factor"):
        Deployment.build("Llama-3.1-70B", H100, allreduce_ring_factor="yes")


def test_attention_kernel_and_causal_conventions_match_their_formulas():
    m = models.get_model("Llama-3.1-8B")
    h, k, dh, lp = m.n_heads, m.n_kv_heads, m.head_dim, 2048
    flops_full = 4 * h * dh * lp * lp
    qkvo = 2 * lp * dh * (k * 2 + h * 2)
    assert roofline.prefill_attention_intensity(m, lp, causal=False) == pytest.approx(flops_full / qkvo)
    assert roofline.prefill_attention_intensity(m, lp) == pytest.approx(flops_full * (lp + 1) / (2 * lp) / qkvo)
    unfused = roofline.prefill_attention_intensity(m, lp, causal=False, kernel="unfused")
    assert unfused == pytest.approx(flops_full / (qkvo + 4 * h * lp * lp * 2))
    s = 1000
    dec = roofline.decode_attention_intensity(m, s, kernel="unfused")
    assert dec == pytest.approx(4 * h * dh * s / (2 * k * dh * s * 2 + 2 * h * dh * 2 + 4 * h * s * 2))
    assert roofline.decode_attention_intensity(m, s) == pytest.approx(2 * h * s / (k * s * 2 + h * 2))
    with pytest.raises(ValueError, match="kernel"):
        roofline.decode_attention_intensity(m, kernel="flash")


def test_e2e_with_n_or_n_minus_one_steps():
    assert metrics.e2e_from_ttft_tpot(0.2, 0.01, 11) == pytest.approx(0.3)
    assert metrics.e2e_from_ttft_tpot(0.2, 0.01, 11, decode_steps="n") == pytest.approx(0.31)
    times = [1.0, 1.5, 2.0]
    assert metrics.time_per_output_token(0.0, times) == pytest.approx(0.5)
    assert metrics.time_per_output_token(0.0, times, decode_steps="n") == pytest.approx(1.0 / 3)
    with pytest.raises(ValueError, match="decode_steps"):
        metrics.e2e_from_ttft_tpot(0.2, 0.01, 11, decode_steps="n+1")


@pytest.mark.parametrize("c", conventions.CONVENTIONS, ids=lambda c: c.name)
def test_every_convention_switches_a_number(c):
    book, other = c.example()
    assert np.isfinite(book) and np.isfinite(other)
    assert not math.isclose(book, other, rel_tol=1e-6), f"{c.name}: the option changes nothing"


def test_convention_options_exist_where_the_table_says():
    from servingmath.deployment import DEPLOYMENT_OPTIONS
    assert {"kv_sharding", "allreduce_ring_factor", "gpu_memory_utilization"} <= DEPLOYMENT_OPTIONS
    for func, keyword in [(models.with_kv_heads, "weights"), (roofline.prefill_attention_intensity, "kernel"),
                          (roofline.prefill_attention_intensity, "causal"),
                          (roofline.decode_attention_intensity, "kernel"),
                          (metrics.e2e_from_ttft_tpot, "decode_steps"), (sharding.allreduce_time, "ring_factor")]:
        p = inspect.signature(func).parameters[keyword]
        assert p.kind is p.KEYWORD_ONLY, (func.__name__, keyword)
    text = conventions.conventions_table()
    assert all(c.name in text for c in conventions.CONVENTIONS)
    with pytest.raises(KeyError, match="kv_sharding"):
        conventions.get_convention("kv_shardin")


# ---------------------------------------------------------------- the ideas that were missing

def test_pooled_slice_multiplies_the_chip_and_has_no_link():
    s = sharding.pooled_slice("H100", 8)
    assert s.memory_bytes == 8 * H100.memory_bytes and s.peak_flops("fp8") == 8 * H100.peak_flops("fp8")
    assert s.interconnect_bandwidth is None
    # on the pooled slice a step is the single-GPU step over 8 (no all-reduce)
    t8 = decode.decode_step_time("Llama-3.1-70B", s, 16, 1000)
    assert t8 == pytest.approx(decode.decode_step_time("Llama-3.1-70B", H100, 16, 1000) / 8, rel=1e-12)


def test_footprint_and_chips_needed():
    f = memory.memory_footprint("Llama-3.1-70B", 32, 8192, weight_dtype="int8", kv_dtype="int8")
    m = models.get_model("Llama-3.1-70B")
    assert f["weights"] == models.parameter_count(m)
    assert f["kv_cache"] == 32 * 8192 * 2 * 80 * 8 * 128
    assert f["total"] == f["weights"] + f["kv_cache"]
    need = math.ceil(f["total"] / 16e9)
    assert memory.chips_needed(m, V5E, 32, 8192, weight_dtype="int8", kv_dtype="int8",
                               gpu_memory_utilization=1.0) == need == 8
    assert memory.chips_needed(m, V5E, weight_dtype="int4", gpu_memory_utilization=1.0) == math.ceil(
        models.parameter_count(m) * 0.5 / 16e9)
    assert memory.chips_needed(m, V5E, weight_dtype="bf16", gpu_memory_utilization=1.0,
                               round_up_to="power_of_two") == 16
    assert memory.chips_needed(m, V5E, weight_dtype="bf16") == math.ceil(2 * models.parameter_count(m) / 14.4e9)
    with pytest.raises(ValueError, match="round_up_to"):
        memory.chips_needed(m, V5E, round_up_to="even")


def test_kv_transfer_time_and_the_simulator_charge_the_same():
    m = models.get_model("Llama-3.1-8B")
    t = memory.kv_transfer_time(m, 1000, link_bandwidth=10e9, latency=2e-3)
    assert t == pytest.approx(2e-3 + 1000 * models.kv_bytes_per_token(m) / 10e9)
    policy = sim.Disaggregated(link_bandwidth=10e9, transfer_latency=2e-3)
    assert policy.transfer_time(m, 1000) == pytest.approx(t)
    work = sim.Workload.fixed(20, 1000, 10)
    res = sim.simulate(sim.SimulationConfig(sim.Server(m, H100), work, sim.Poisson(1.0), policy=policy), seed=0)
    gap = min(res.token_times(i)[1] - res.token_times(i)[0] for i in range(20))
    assert gap >= t + decode.decode_step_time(m, H100, 1, 1001) * (1 - 1e-9)
    with pytest.raises(ValueError, match="link_bandwidth"):
        memory.kv_transfer_time(m, 10, link_bandwidth=0)


@given(st.integers(1, 512), st.integers(0, 100_000), st.integers(1, 10_000))
def test_kv_freed_per_step_is_littles_law(b, lp, lo):
    freed = memory.kv_tokens_freed_per_step(b, lp, lo)
    # B sequences each living L_o steps: B / L_o finish per step, each freeing L_p + L_o tokens
    assert freed == pytest.approx(b / lo * (lp + lo))


def test_chunked_prefill_costs_weight_rereads_and_the_decodes_that_share_it():
    m, lp = "Llama-3.1-8B", 4096
    whole = prefill.prefill_time(m, H100, lp)
    assert prefill.chunked_prefill_time(m, H100, lp, chunk_size=lp) == pytest.approx(whole, rel=1e-12)
    steps = prefill.chunked_prefill_time(m, H100, lp, chunk_size=100, per_step=True)
    assert len(steps) == math.ceil(lp / 100) and steps.sum() == pytest.approx(
        prefill.chunked_prefill_time(m, H100, lp, chunk_size=100))
    # small chunks are memory-bound: each re-reads the weights
    read = step.work_coefficients(Deployment.build(m, H100)).weight_bytes(0.0, 0.0) / H100.memory_bandwidth
    assert steps.sum() >= math.ceil(lp / 100) * read
    with_decodes = prefill.chunked_prefill_time(m, H100, lp, token_budget=612, decode_batch=512, decode_context=1000)
    assert with_decodes > steps.sum()
    # each chunk equals one iteration of the step model
    it = (step.Iteration.of(m, new_tokens=100, cached_tokens=200, logits=0)
          + step.Iteration.decode(m, sequences=512, context_len=1000))
    dep = Deployment.build(m, H100)
    per = prefill.chunked_prefill_time(m, H100, lp, token_budget=612, decode_batch=512, decode_context=1000,
                                       per_step=True)
    assert per[2] == pytest.approx(step.step_time(dep, step.iteration_work(dep, it)), rel=1e-12)
    for kwargs, match in [(dict(), "chunk_size"), (dict(chunk_size=10, token_budget=20), "not both"),
                          (dict(token_budget=64, decode_batch=64), "leaves no prompt tokens")]:
        with pytest.raises(ValueError, match=match):
            prefill.chunked_prefill_time(m, H100, lp, **kwargs)


def test_communication_bound_degree_balances_the_step_and_its_all_reduces():
    opts = dict(allreduce_latency=0.6e-6, allreduce_base_latency=6.6e-6)
    r = decode.communication_bound_tensor_parallel("Llama-3.1-70B", H100, 8, 2048, **opts)
    n = r["tensor_parallel"]
    t1 = decode.decode_step_time("Llama-3.1-70B", H100, 8, 2048)
    m = 8 * 8192 * 2
    comm = 2 * 80 * (6.6e-6 + 2 * (n - 1) * 0.6e-6 + 2 * (n - 1) / n * m / 450e9)
    assert comm == pytest.approx(t1 / n, rel=1e-9)
    assert r["latency"] + r["transfer"] == pytest.approx(comm, rel=1e-9) and r["bound"] == "latency"
    # the step model agrees on the side of each valid degree (N <= K = 8: nothing replicates)
    for deg in (2, 4, 8):
        parts = decode.decode_step_parts("Llama-3.1-70B", H100, 8, 2048, tensor_parallel=deg, **opts)
        rest = step.combine("hybrid", dict(parts, communication=0.0))
        assert (parts["communication"] < rest) == (deg < n)
    # without latency: the closed form 1 + T_1 beta / (4 L m)
    bw = decode.communication_bound_tensor_parallel("Llama-3.1-70B", H100, 8, 2048)
    assert bw["tensor_parallel"] == pytest.approx(1 + t1 * 450e9 / (4 * 80 * m), rel=1e-9)
    with pytest.raises(MissingShapeError, match="n_layers"):
        decode.communication_bound_tensor_parallel(model_from_totals(parameters=7e9, kv_bytes_per_token=1), H100, 1, 0)


def test_sharded_matmul_link_threshold_depends_on_d_not_the_batch():
    acc = get_accelerator("TPU-v5e")
    for batch in (16, 512):
        # contracting-dimension sharding over 2 chips: link-bound below D = (N - 1) b_a F / beta
        d_star = 1 * 2 * acc.peak_flops("bf16") / 4.5e10
        below = roofline.sharded_matmul_times(acc, batch, int(0.9 * d_star), 8192, n_shards=2, link_bandwidth=4.5e10)
        above = roofline.sharded_matmul_times(acc, batch, int(1.1 * d_star), 8192, n_shards=2, link_bandwidth=4.5e10)
        assert below["link"] > below["compute"] and above["link"] < above["compute"]
    t = roofline.sharded_matmul_times("H100", 8, 4096, 4096, n_shards=1)
    assert t["link"] == 0.0
    with pytest.raises(ValueError, match="sharded"):
        roofline.sharded_matmul_times("H100", 8, 4096, 4096, n_shards=2, sharded="rows")


def test_link_ridge_and_latency_bound_message():
    assert roofline.link_ridge_point("H100") == pytest.approx(H100.peak_flops("bf16") / H100.interconnect_bandwidth)
    m_star = sharding.allreduce_latency_bound_bytes(8, 450e9, latency=1e-6, base_latency=5e-6)
    assert sharding.allreduce_time(m_star, 8, 450e9, latency=0, base_latency=0) == pytest.approx(5e-6 + 14e-6)
    with pytest.raises(ValueError, match="link_bandwidth"):
        roofline.link_ridge_point("TPU-v5e", link_bandwidth=-1)


def test_training_mfu_is_six_n_d_over_chip_time():
    flops = roofline.training_flops(37e9, 14.8e12)
    assert flops == 6 * 37e9 * 14.8e12
    mfu = roofline.training_mfu(37e9, "H100", 14.8e12, 2.79e6 * 3600, dtype="fp8")
    assert mfu == pytest.approx(flops / (2.79e6 * 3600 * H100.peak_flops("fp8")))
    # a model counts its active parameters
    assert roofline.training_flops("Mixtral-8x7B", 1e12) == 6 * models.active_parameter_count("Mixtral-8x7B") * 1e12
    with pytest.raises(ValueError, match="chip_seconds"):
        roofline.training_mfu(1e9, "H100", 1e9, 0)
