"""Mixture of experts: the real configs, experts touched, the MoE knee and its two conventions, expert
parallelism (the deployment option and its all-to-alls), MLA, and NVFP4/MXFP4 schemes.

Known values carry their source; properties are checked with hypothesis; bad input must name the parameter.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servingmath import decode, memory, models, moe, parallelism, prefill, quantization, sharding
from servingmath.datatypes import bytes_per_element
from servingmath.deployment import Deployment
from servingmath.hardware import get_accelerator
from servingmath.step import Iteration, iteration_work, time_parts, work_coefficients

DS, Q235, Q30, MIX = "DeepSeek-V3", "Qwen3-235B-A22B", "Qwen3-30B-A3B", "Mixtral-8x7B"
FP8 = dict(weight_dtype="fp8", compute_dtype="fp8")


# ---------------------------------------------------------------- the configs reproduce the published counts

@pytest.mark.parametrize("name, total, active, rel", [
    # DeepSeek-V3 technical report (arXiv:2412.19437, 2024-12) and README: "671B total parameters with 37B
    # activated for each token" (the 14B multi-token-prediction module of the 685B checkpoint excluded)
    (DS, 671e9, 37e9, 0.02),
    # Qwen3 model cards (2025-04): 235B / 22B activated; 30.5B / 3.3B activated
    (Q235, 235e9, 22e9, 0.02),
    (Q30, 30.5e9, 3.3e9, 0.02),
    # Mistral AI, "Mixtral of experts" (2023-12-11): 46.7B total, 12.9B used per token
    (MIX, 46.7e9, 12.9e9, 0.005),
])
def test_parameter_counts_reproduce_the_published_totals_and_active_counts(name, total, active, rel):
    assert models.parameter_count(name) == pytest.approx(total, rel=rel)
    assert models.active_parameter_count(name) == pytest.approx(active, rel=rel)


def test_deepseek_v3_totals_to_the_billion_and_readme_active_count_without_the_embedding_table():
    # README_WEIGHTS.md (github:deepseek-ai/DeepSeek-V3@4c2fdb8, 2024-12-26): 671B total; 36.7B activated.
    # The exact count from the shapes is 671.03B; 36.63B activated without the input table (a look-up), 37.55B with it.
    m = models.get_model(DS)
    assert round(models.parameter_count(m) / 1e9) == 671
    without_table = models.active_parameter_count(m) - models.input_embedding_parameter_count(m)
    assert without_table == pytest.approx(36.7e9, rel=0.005)


@pytest.mark.parametrize("name, non_embedding", [(Q235, 234e9), (Q30, 29.9e9)])
def test_qwen3_non_embedding_counts_of_the_model_cards(name, non_embedding):
    m = models.get_model(name)
    embeddings = 2 * m.vocab_size * m.hidden_size           # untied input table and LM head
    assert models.parameter_count(m) - embeddings == pytest.approx(non_embedding, rel=0.003)


def test_deepseek_v3_is_read_as_mla_with_shared_experts_and_dense_layers():
    m = models.get_model(DS)
    assert m.attention_type == "MLA" and m.is_mla and m.n_kv_heads == 1
    assert (m.kv_lora_rank, m.q_lora_rank, m.qk_rope_head_dim, m.v_head_dim, m.head_dim) == (512, 1536, 64, 128, 192)
    assert (m.n_experts, m.n_active_experts, m.n_shared_experts, m.ffn_size) == (256, 8, 1, 2048)
    assert (m.n_dense_layers, m.dense_ffn_size, m.n_moe_layers) == (3, 18432, 58)
    q = models.get_model(Q235)
    assert q.attention_type == "GQA" and q.n_shared_experts == 0 and q.n_dense_layers == 0 and q.ffn_size == 1536


def test_the_split_adds_up_and_counts_every_piece_once():
    for name in (DS, Q235, Q30, MIX, "Llama-3.1-8B"):
        m = models.get_model(name)
        shared, per_expert = models.expert_parameter_split(m)
        assert shared + m.n_experts * per_expert == models.parameter_count(m)
        assert shared + m.n_active_experts * per_expert == models.active_parameter_count(m)
    m = models.get_model(DS)
    d = m.hidden_size
    expert = 3 * d * m.ffn_size
    assert models.expert_parameter_split(m)[1] == 58 * expert
    # shared = 3 dense layers (attention + norms + dense FFN) + 58 x (attention + norms + router + shared
    # expert) + embeddings, head, final norm
    attention = models.attention_parameter_count(m) // m.n_layers
    dense = 3 * (attention + 2 * d + 3 * d * 18432)
    moe_layers = 58 * (attention + 2 * d + 256 * d + expert)
    assert models.expert_parameter_split(m)[0] == dense + moe_layers + 2 * m.vocab_size * d + d


def test_mla_attention_parameters_from_the_shapes():
    m = models.get_model(DS)
    d, h = 7168, 128
    per_layer = (d * 1536 + 1536 + 1536 * h * 192          # W_DQ, q norm, W_UQ
                 + d * (512 + 64) + 512 + 512 * h * (128 + 128)   # W_DKV + rope key, kv norm, W_UK and W_UV
                 + h * 128 * d)                                   # W_O
    assert models.attention_parameter_count(m) == 61 * per_layer


# ---------------------------------------------------------------- MLA: the cache and its FLOPs

def test_mla_caches_the_latent_and_the_rope_key_per_layer():
    # DeepSeek-V2 (arXiv:2405.04434), Table 1: MLA caches (d_c + d_h^R) l = 9/2 d_h l elements per token
    m = models.get_model(DS)
    assert models.kv_bytes_per_token(m, "bf16") == 4.5 * 128 * 61 * 2 == 70272
    assert models.kv_bytes_per_token(m, "fp8") == 35136
    # the naive kernel caches decompressed K (192 per head) and V (128 per head): 71x more
    assert moe.mla_decompressed_kv_bytes_per_token(m) == 61 * 128 * (192 + 128) * 2
    assert moe.mla_decompressed_kv_bytes_per_token(m) / models.kv_bytes_per_token(m) == pytest.approx(71.11, abs=0.01)


def test_mla_attention_flops_are_counted_absorbed():
    m = models.get_model(DS)
    # scores against the 512-value latent plus the 64-value rope key, then a sum of 512-value latents
    assert models.attention_flops_per_pair(m) == 61 * 128 * (2 * (512 + 64) + 2 * 512)
    assert moe.attention_flops_per_kv_byte(m) == pytest.approx(2 * 128 * (2 * 512 + 64) / (576 * 2))
    assert moe.attention_flops_per_kv_byte(m, absorbed=False) == 1.0
    assert moe.attention_flops_per_kv_byte(m, kv_dtype="fp8") == pytest.approx(2 * moe.attention_flops_per_kv_byte(m))


@pytest.mark.parametrize("name", ["Llama-3.1-70B", "Llama-2-7B", Q235, MIX])
def test_gqa_attention_intensity_is_two_g_over_b(name):
    m = models.get_model(name)
    assert moe.attention_flops_per_kv_byte(m) == pytest.approx(2 * m.group_size / 2)
    with pytest.raises(ValueError, match="absorbed=False describes an MLA kernel"):
        moe.attention_flops_per_kv_byte(m, absorbed=False)


def test_mla_latent_is_replicated_under_tensor_parallelism():
    # one latent shared by every head: each GPU of a TP group keeps the whole cache, and the down-projection
    m = models.get_model(DS)
    assert sharding.tensor_parallel_shares(m, 8)[1] == 1.0
    assert memory.kv_bytes_per_token_per_gpu(m, tensor_parallel=8) == models.kv_bytes_per_token(m)
    assert models.kv_projection_parameter_count(m) == 61 * 7168 * 576


def test_critical_prompt_length_uses_the_mla_attention_flops():
    m = models.get_model(DS)
    a = models.attention_flops_per_pair(m) / 4
    p = models.body_parameter_count(m)
    assert prefill.critical_prompt_length(m) == pytest.approx(p / a - 1, rel=0.01)


# ---------------------------------------------------------------- config parsing, and bad configs

def _write(tmp_path, config):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def _deepseek_like(**changes):
    config = json.loads((resources.files("servingmath") / "data" / "models" / "deepseek-v3.json").read_text())
    config.pop("servingmath")
    config.update(changes)
    return config


def test_a_deepseek_config_file_reads_like_the_catalog_entry(tmp_path):
    m = models.load_model_config(_write(tmp_path, _deepseek_like()), name="mine")
    assert models.parameter_count(m) == models.parameter_count(DS)
    assert models.kv_bytes_per_token(m) == models.kv_bytes_per_token(DS)


def test_qwen2_moe_style_shared_expert_is_read(tmp_path):
    # Qwen2-57B-A14B's config.json shapes (Hugging Face Qwen/Qwen2-57B-A14B, read 2026-12)
    config = {"model_type": "qwen2_moe", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
              "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 151936, "num_experts": 64,
              "num_experts_per_tok": 8, "moe_intermediate_size": 2560, "shared_expert_intermediate_size": 20480,
              "decoder_sparse_step": 1, "mlp_only_layers": [], "tie_word_embeddings": False}
    m = models.load_model_config(_write(tmp_path, config))
    assert (m.n_experts, m.ffn_size, m.n_shared_experts, m.shared_expert_ffn_size) == (64, 2560, 1, 20480)
    # published: 57B total, 14B activated (the model's name); the shared expert gates add 28 x 3584
    assert models.parameter_count(m) == pytest.approx(57.4e9, rel=0.01)
    assert models.active_parameter_count(m) == pytest.approx(14.2e9, rel=0.02)


@pytest.mark.parametrize("changes, match", [
    ({"moe_layer_freq": 2}, "moe_layer_freq = 2"),
    ({"decoder_sparse_step": 2}, "decoder_sparse_step = 2"),
    ({"mlp_only_layers": [0, 5]}, "mlp_only_layers"),
])
def test_moe_layouts_the_library_does_not_model_are_refused_by_name(tmp_path, changes, match):
    with pytest.raises(ValueError, match=match):
        models.load_model_config(_write(tmp_path, _deepseek_like(**changes)))


@pytest.mark.parametrize("fields, match", [
    (dict(kv_lora_rank=512, n_kv_heads=2), "n_kv_heads must be 1"),
    (dict(kv_lora_rank=512, n_kv_heads=1, qk_rope_head_dim=128), "qk_rope_head_dim"),
    (dict(qk_rope_head_dim=64), "give kv_lora_rank too"),
    (dict(n_dense_layers=2), "n_experts = 1"),
    (dict(n_shared_experts=-1), "n_shared_experts must be an integer >= 0"),
    (dict(kv_lora_rank=0, n_kv_heads=1), "kv_lora_rank must be None or an integer >= 1"),
])
def test_bad_moe_and_mla_fields_are_refused_with_their_name(fields, match):
    base = dict(name="x", n_layers=4, hidden_size=256, n_heads=4, n_kv_heads=4, head_dim=64, ffn_size=512,
                ffn_gated=True, vocab_size=1000)
    base.update(fields)
    with pytest.raises(ValueError, match=match):
        models.ModelConfig(**base)


def test_dense_layers_must_leave_an_moe_layer():
    with pytest.raises(ValueError, match="n_dense_layers"):
        dataclasses.replace(models.get_model(DS), n_dense_layers=61)


# ---------------------------------------------------------------- experts touched

def test_experts_touched_known_values():
    assert moe.experts_touched(DS, 1) == 8.0                            # one token: its k experts
    assert moe.experts_touched(MIX, 2) == pytest.approx(8 * (1 - 0.75 ** 2))
    assert moe.touched_fraction(0, n_experts=256, n_active=8) == 0.0
    assert moe.experts_touched(DS, 64, expert_parallel=8) == pytest.approx(moe.experts_touched(DS, 64) / 8)


@settings(max_examples=60)
@given(t=st.integers(0, 100_000), e=st.integers(1, 512), k=st.integers(1, 16))
def test_touched_fraction_is_a_probability_increasing_in_tokens(t, e, k):
    k = min(k, e)
    f0 = moe.touched_fraction(t, n_experts=e, n_active=k)
    f1 = moe.touched_fraction(t + 1, n_experts=e, n_active=k)
    assert 0.0 <= f0 <= f1 <= 1.0
    assert f0 <= t * k / e + 1e-12                     # union bound: at most T k experts touched
    if t >= 1:
        assert f0 >= k / e - 1e-12                     # at least one token's k experts


def test_touched_fraction_matches_a_simulation_of_uniform_routing():
    rng = np.random.default_rng(0)
    e, k, t, trials = 64, 6, 20, 4000
    touched = [len({x for _ in range(t) for x in rng.choice(e, size=k, replace=False)}) for _ in range(trials)]
    mean, sem = np.mean(touched), np.std(touched) / np.sqrt(trials)
    assert abs(mean - e * moe.touched_fraction(t, n_experts=e, n_active=k)) < 4 * sem


# ---------------------------------------------------------------- weights read vs active parameters

def test_weight_read_is_the_active_parameters_at_batch_one_and_everything_at_large_batch():
    m = models.get_model(DS)
    vd = models.input_embedding_parameter_count(m)
    one = moe.weight_bytes_read(m, 1, weight_dtype="fp8")
    assert one == pytest.approx(models.active_parameter_count(m) - vd + m.hidden_size)   # the table is gathered
    many = moe.weight_bytes_read(m, 100_000, weight_dtype="fp8")
    assert many == pytest.approx(models.parameter_count(m) - vd + 100_000 * m.hidden_size)
    assert moe.active_weight_bytes(m, weight_dtype="fp8") == models.active_parameter_count(m)


@settings(max_examples=40)
@given(t=st.integers(1, 5000))
def test_weight_read_grows_with_the_batch_and_stays_between_the_active_and_total_bytes(t):
    m = models.get_model(Q235)
    a, b = moe.weight_bytes_read(m, t), moe.weight_bytes_read(m, t + 1)
    assert a <= b
    gather = 2 * t * m.hidden_size
    assert 2 * (models.active_parameter_count(m) - m.vocab_size * m.hidden_size) <= a - gather + 1
    assert a - gather <= 2 * (models.parameter_count(m) - m.vocab_size * m.hidden_size) + 1


def test_the_step_model_reads_the_touched_experts_with_shared_experts_and_dense_layers():
    dep = Deployment.build(DS, "H200", **FP8)
    shared, per_expert = models.expert_parameter_split(dep.model)
    vd = models.input_embedding_parameter_count(dep.model)
    for b in (1, 16, 256):
        w = iteration_work(dep, Iteration.decode(dep.model, sequences=b, context_len=100)).weight_bytes
        touched = 256 * (1 - (1 - 8 / 256) ** b)
        assert w == pytest.approx(shared - vd + b * 7168 + touched * per_expert)


# ---------------------------------------------------------------- the MoE knee, two conventions

def test_the_e_over_k_rule_is_e_over_k_times_the_ridge_times_half_the_bytes():
    for name, acc, opts in [(DS, "H200", FP8), (MIX, "H100", {}), (Q235, "B200", {})]:
        ridge = get_accelerator(acc).ridge_point(opts.get("compute_dtype", "bf16"))
        m = models.get_model(name)
        b_w = bytes_per_element(opts.get("weight_dtype", "bf16"))
        expected = m.n_experts / m.n_active_experts * ridge * b_w / 2
        assert moe.moe_knee(name, acc, convention="experts", **opts) == pytest.approx(expected)


def test_the_step_convention_is_the_library_knee_and_solves_weight_time_equals_matmul_time():
    dep = Deployment.build(DS, "H200", **FP8)
    knee = moe.moe_knee(dep)
    assert knee == decode.knee_batch_size(dep)
    c = work_coefficients(dep)
    weights = c.weight_bytes(knee, 1.0) / dep.bandwidth                       # gathered rows included
    matmuls = knee * (c.linear_flops_per_token + c.linear_flops_per_logit) / dep.flops
    assert weights == pytest.approx(matmuls, rel=1e-6)
    # every expert is touched at the knee, so it is the ridge x b_w / 2 x (weights read) / (weights multiplied)
    read = models.parameter_count(DS) - models.input_embedding_parameter_count(DS)
    assert knee == pytest.approx(dep.flops / dep.bandwidth * 0.5 * read / models.matmul_parameter_count(DS), rel=0.01)


@pytest.mark.parametrize("name, acc, opts", [(DS, "H200", FP8), (Q235, "H100", {}), (MIX, "A100", {}), (Q30, "H100", {})])
def test_shared_weights_pull_the_step_knee_below_the_e_over_k_rule(name, acc, opts):
    assert moe.moe_knee(name, acc, **opts) < moe.moe_knee(name, acc, convention="experts", **opts)


def test_knee_refuses_a_dense_model_and_an_unknown_convention():
    with pytest.raises(ValueError, match="is dense"):
        moe.moe_knee("Llama-3.1-8B", "H100")
    with pytest.raises(KeyError, match="convention"):
        moe.moe_knee(DS, "H100", convention="e/k")
    assert moe.DEFAULT_KNEE_CONVENTION in moe.KNEE_CONVENTIONS and set(moe.KNEE_CONVENTIONS) == {"step", "experts"}


# ---------------------------------------------------------------- expert parallelism: the deployment option

def test_ep_deployment_validates_its_degree():
    with pytest.raises(ValueError, match="must divide them"):
        Deployment.build(MIX, "H100", expert_parallel=16)
    with pytest.raises(ValueError, match="must be a multiple of tensor_parallel"):
        Deployment.build(DS, "H200", expert_parallel=8, tensor_parallel=16)
    with pytest.raises(ValueError, match="needs a mixture of experts"):
        Deployment.build("Llama-3.1-8B", "H100", expert_parallel=2)
    with pytest.raises(ValueError, match="expert_parallel must be"):
        Deployment.build(DS, "H200", expert_parallel=0)
    d = Deployment.build(DS, "H200", expert_parallel=16, tensor_parallel=4)
    assert (d.n_gpus, d.data_parallel) == (16, 4)
    assert "EP 16 with attention DP 4 x TP 4" in d.describe()


def test_ep_one_is_exactly_the_tensor_parallel_deployment():
    a = Deployment.build(DS, "H200", tensor_parallel=8, **FP8)
    b = Deployment.build(DS, "H200", tensor_parallel=8, expert_parallel=1, **FP8)
    assert a == b
    assert decode.decode_step_time(a, 64, 2048) == decode.decode_step_time(b, 64, 2048)


def test_ep_and_tp_do_the_same_flops_per_gpu_and_ep_holds_e_over_ep_whole_experts():
    tp = Deployment.build(DS, "H200", tensor_parallel=8, **FP8)
    ep = tp.replace(tensor_parallel=1, expert_parallel=8)
    it = Iteration.decode(tp.model, sequences=512, context_len=1000)
    w_tp, w_ep = iteration_work(tp, it), iteration_work(ep, it)
    assert w_tp.linear_flops == pytest.approx(w_ep.linear_flops)
    assert w_tp.attention_flops == pytest.approx(w_ep.attention_flops)
    # KV: TP replicates the MLA latent on every GPU; DP keeps each sequence on one GPU
    assert w_tp.kv_bytes == pytest.approx(8 * w_ep.kv_bytes)
    shared, per_expert = models.expert_parameter_split(DS)
    assert memory.weight_bytes_per_gpu(DS, weight_dtype="fp8", expert_parallel=8) == pytest.approx(
        shared + 32 * per_expert)


def test_ep_max_batch_is_the_groups_times_one_group():
    d = Deployment.build(DS, "H200", expert_parallel=8, tensor_parallel=2, **FP8)
    one_group_budget = memory.memory_available_for_kv(d)
    per_seq = 4096 * models.kv_bytes_per_token(DS)            # the whole latent on each GPU of a group
    assert memory.max_batch_size(d, 4096) == 4 * int(one_group_budget // per_seq)
    assert memory.max_kv_tokens(d) == 4 * int(one_group_budget // models.kv_bytes_per_token(DS))


def test_the_alltoalls_are_two_per_moe_layer_of_t_k_d_b_over_ep():
    d = Deployment.build(DS, "H200", expert_parallel=8, **FP8)
    w = iteration_work(d, Iteration.decode(d.model, sequences=256, context_len=100))
    assert w.alltoalls == 2 * 58 and w.allreduces == 0
    assert w.alltoall_bytes == 256 * 8 * 7168 * 2 / 8
    link = get_accelerator("H200").interconnect_bandwidth
    expected = 116 * (7 / 8) * w.alltoall_bytes / link
    assert time_parts(d, w)["communication"] == pytest.approx(expected)
    assert moe.expert_parallel_communication_time(d, 256) == pytest.approx(expected)
    assert moe.dispatch_bytes(DS, 256, expert_parallel=8) == w.alltoall_bytes


def test_alltoall_time_is_the_pairwise_exchange_and_half_a_ring_allreduce():
    m, n, beta = 3e6, 8, 450e9
    assert sharding.alltoall_time(m, n, beta) == pytest.approx(7 / 8 * m / beta)
    assert 2 * sharding.alltoall_time(m, n, beta) == pytest.approx(sharding.allreduce_time(m, n, beta))
    assert sharding.alltoall_time(m, n, beta, latency=1e-6, base_latency=5e-6) == pytest.approx(
        5e-6 + 7e-6 + 7 / 8 * m / beta)
    assert sharding.alltoall_time(m, 1, beta, latency=1e-6, base_latency=5e-6) == 0.0
    with pytest.raises(ValueError, match="n_gpus"):
        sharding.alltoall_time(m, 0, beta)


def test_realistic_setting_applies_to_the_alltoalls():
    d = Deployment.build(DS, "H200", expert_parallel=8, setting="realistic", **FP8)
    t = moe.expert_parallel_communication_time(d, 256)
    m = 256 * 8 * 7168 * 2 / 8
    # the realistic all-reduce is NCCL's protocols (sharding.NCCL_RING_PROTOCOLS): the fastest of
    # LL (6.6 + 0.6 µs per step, 141 GB/s), LL128 (14.0 + 1.9 µs, 0.92 x 360 GB/s), Simple (8.4 + 3.4 µs, 360 GB/s)
    one = min(a0 + 7 * a + 7 / 8 * m / bus for a0, a, bus in
              [(6.6e-6, 0.6e-6, 141e9), (14.0e-6, 1.9e-6, 0.92 * 360e9), (8.4e-6, 3.4e-6, 360e9)])
    assert t == pytest.approx(116 * one)


def test_communication_bytes_ratio_is_k_n_moe_over_2_l_g():
    m = models.get_model(DS)
    for g in (2, 4, 8, 16, 32):
        tp = moe.communication_bytes_per_token(DS, tensor_parallel=g)
        ep = moe.communication_bytes_per_token(DS, expert_parallel=g)
        assert ep / tp == pytest.approx(8 * 58 / (2 * 61 * g))
    # EP sends fewer bytes than TP from G > k n_moe / (2 L) = 3.8 on
    assert moe.communication_bytes_per_token(DS, expert_parallel=4) < moe.communication_bytes_per_token(DS, tensor_parallel=4)
    assert moe.communication_bytes_per_token(DS, expert_parallel=2) > moe.communication_bytes_per_token(DS, tensor_parallel=2)
    assert moe.communication_bytes_per_token(DS) == 0.0


def test_compare_ep_tp_rows_and_the_mla_capacity_advantage():
    rows = moe.compare_ep_tp(DS, "H200", 256, 4096, n_gpus=8, **FP8)
    tp, ep = rows
    assert tp["tensor_parallel"] == 8 and ep["expert_parallel"] == 8 and ep["tensor_parallel"] == 1
    assert ep["max_batch"] > 5 * tp["max_batch"]                  # TP replicates the latent 8 times
    assert ep["tpot"] < tp["tpot"] and ep["kv_memory"] == pytest.approx(tp["kv_memory"] / 8)
    assert ep["throughput_per_gpu"] == pytest.approx(256 / (8 * ep["tpot"]))
    # at batch 1 the replicated shared weights make EP + DP slower
    one = moe.compare_ep_tp(DS, "H200", 1, 4096, n_gpus=8, **FP8)
    assert one[1]["tpot"] > one[0]["tpot"]


def test_per_gpu_throughput_counts_every_gpu_of_an_ep_instance():
    d = Deployment.build(DS, "H200", expert_parallel=8, **FP8)
    assert parallelism.per_gpu_throughput(d, 64, 1000) == pytest.approx(64 / (8 * decode.decode_step_time(d, 64, 1000)))


def test_prefill_communication_ratio_closed_form():
    m = models.get_model(DS)
    acc = get_accelerator("H200")
    r = moe.prefill_communication_per_token(DS, "H200", tensor_parallel=8, compute_dtype="fp8")
    closed = 2 * m.n_layers * 7 * m.hidden_size * 2 * acc.peak_flops("fp8") / (
        acc.interconnect_bandwidth * models.body_parameter_count(m))
    assert r["ratio"] == pytest.approx(closed)
    ep = moe.prefill_communication_per_token(DS, "H200", expert_parallel=8, compute_dtype="fp8")
    assert ep["ratio"] == pytest.approx(r["ratio"] * 8 * 58 / (2 * 61 * 8))
    assert moe.prefill_communication_per_token(DS, "H200")["ratio"] == 0.0


def test_moe_functions_refuse_bad_input_by_name():
    with pytest.raises(ValueError, match="tokens must be >= 0"):
        moe.experts_touched(DS, -1)
    with pytest.raises(ValueError, match="n_active must be between 1 and n_experts"):
        moe.touched_fraction(3, n_experts=4, n_active=5)
    with pytest.raises(ValueError, match="n_experts must be a single number"):
        moe.touched_fraction(3, n_experts=[4, 8], n_active=2)
    with pytest.raises(ValueError, match="is dense"):
        moe.experts_touched("Llama-3.1-8B", 4)
    with pytest.raises(ValueError, match="expert_parallel"):
        moe.dispatch_bytes(DS, 10, expert_parallel=3)
    with pytest.raises(ValueError, match="not MLA"):
        moe.mla_decompressed_kv_bytes_per_token(Q235)
    with pytest.raises(ValueError, match="n_gpus must be an integer >= 2"):
        moe.compare_ep_tp(DS, "H200", 8, 100, n_gpus=1)
    with pytest.raises(ValueError, match="batch_size must be <="):
        moe.compare_ep_tp(DS, "H200", 10**12, 100, n_gpus=8)
    with pytest.raises(KeyError, match="dtype"):
        moe.communication_bytes_per_token(DS, expert_parallel=8, dtype="fp6")


# ---------------------------------------------------------------- NVFP4 / MXFP4 schemes

def test_fp4_schemes_store_their_block_scales_and_pick_their_math():
    s = quantization.get_scheme("W4A4-NVFP4")
    assert (s.weight_dtype, s.compute_dtype, s.kv_dtype) == ("nvfp4", "nvfp4", "bf16")
    assert s.bytes_per_weight == 0.5 + 1 / 16
    assert quantization.get_scheme("W4A16-MXFP4").dtypes == {"weight_dtype": "mxfp4", "kv_dtype": "bf16",
                                                             "compute_dtype": "bf16"}
    assert quantization.get_scheme("W4A4-MXFP4+KV8").kv_dtype == "fp8"


def test_default_schemes_add_fp4_math_only_where_the_gpu_has_the_peak():
    for acc in ("H100", "A100", "L40S", "MI300X"):
        assert not any("FP4" in s for s in quantization.default_schemes(acc))
    for acc in ("B200", "GB200"):
        names = quantization.default_schemes(acc)
        assert names[:7] == ["W16A16", "W8A16", "W4A16", "W8A8-FP8", "W16A16+KV8", "W4A16+KV8", "W8A8-FP8+KV8"]
        assert names[7:] == ["W4A4-NVFP4", "W4A4-NVFP4+KV8"]


def test_fp4_math_moves_the_knee_by_the_fp4_peak_and_the_weight_read_by_the_block_bytes():
    b200 = get_accelerator("B200")
    m = "Llama-3.1-8B"
    bf16 = quantization.scheme_knee(m, "B200", scheme="W16A16")
    nvfp4 = quantization.scheme_knee(m, "B200", scheme="W4A4-NVFP4")
    # knee ~ ridge(F_c) x b_w / 2: fp4 peak is 4x bf16, b_w is 0.5625 / 2 of bf16's
    assert nvfp4 / bf16 == pytest.approx(b200.peak_flops("nvfp4") / b200.peak_flops("bf16") * 0.5625 / 2, rel=0.01)
    w4a16 = quantization.scheme_knee(m, "B200", scheme="W4A16-NVFP4")
    assert w4a16 == pytest.approx(nvfp4 / 4, rel=1e-3)            # same bytes, bf16 math (gather aside)
    floor = {s: quantization.tpot_floor(m, "B200", 0, scheme=s) for s in ("W4A16", "W4A16-MXFP4", "W4A16-NVFP4")}
    assert floor["W4A16"] < floor["W4A16-MXFP4"] < floor["W4A16-NVFP4"]   # the scales cost bytes
    p = models.parameter_count(m) - models.input_embedding_parameter_count(m) + 4096
    assert floor["W4A16-NVFP4"] == pytest.approx(p * 0.5625 / b200.memory_bandwidth)


def test_fp4_math_is_refused_on_hopper_with_the_alternatives():
    with pytest.raises(ValueError, match="computes in nvfp4, which has no tensor-core peak on H100"):
        quantization.scheme_step_time("Llama-3.1-8B", "H100", 1, 0, scheme="W4A4-NVFP4")
    assert quantization.scheme_step_time("Llama-3.1-8B", "H100", 1, 0, scheme="W4A16-NVFP4") > 0
