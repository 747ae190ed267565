"""Models whose layers attend differently (gemma-2/3, gpt-oss) and checkpoints that quantise only their experts.

A share phi of the layers attends within a sliding window of w tokens and the rest to the whole context;
every layer has the same heads, so a step's KV reads and attention pairs are the windowed and the full
counts weighted by phi and 1 - phi, and a sequence of S tokens holds (1 - phi) S + phi min(S, w) tokens'
worth of every layer's cache. gpt-oss stores its routed experts in MXFP4 and everything else in bf16.
Published figures: OpenAI's gpt-oss model card (arXiv:2508.10925, 2025-08), Table 1 of its section 2:
116.83B parameters in all and 5.13B active per token for gpt-oss-120b (20.91B and 3.61B for the 20b), a
checkpoint of 60.8 GiB (12.8 GiB); the card's active count leaves out the input embedding.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from servingmath import memory, simulate as sim
from servingmath.decode import decode_step_time
from servingmath.deployment import Deployment
from servingmath.models import (active_parameter_count, expert_parameter_split, get_model,
                                input_embedding_parameter_count, kv_bytes_per_token, model_from_hf_config,
                                parameter_count, weight_bytes, window_of)
from servingmath.prefill import critical_prompt_length, prefill_time
from servingmath.step import Iteration
from servingmath.workloads import Timestamps, Workload

H100 = "H100-SXM5-80GB"
OSS = "gpt-oss-120b"


def _base(**extra):
    cfg = {"model_type": "gemma2", "hidden_size": 256, "num_hidden_layers": 6, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512, "vocab_size": 1000,
           "sliding_window": 32}
    cfg.update(extra)
    return cfg


# ---------------------------------------------------------------- reading configs

def test_configs_say_which_layers_attend_within_the_window():
    assert model_from_hf_config(_base()).sliding_window_layers == 3                     # gemma-2 alternates
    assert model_from_hf_config(_base(num_hidden_layers=7)).sliding_window_layers == 4  # layer 0 windowed
    g3 = model_from_hf_config(_base(model_type="gemma3_text", num_hidden_layers=12))
    assert (g3.sliding_window, g3.sliding_window_layers) == (32, 10)                    # 5 of every 6
    g3b = model_from_hf_config(_base(model_type="gemma3_text", num_hidden_layers=12, sliding_window_pattern=4))
    assert g3b.sliding_window_layers == 9
    types = ["sliding_attention"] * 5 + ["full_attention"]
    assert model_from_hf_config(_base(model_type="llama", layer_types=types)).sliding_window_layers == 5
    mistral = model_from_hf_config(_base(model_type="mistral"))
    assert (mistral.sliding_window, mistral.sliding_window_layers) == (32, None)       # every layer
    assert window_of(mistral) == (32, 1.0)
    assert model_from_hf_config(_base(model_type="qwen2", use_sliding_window=False)).sliding_window is None
    # gemma ties its embeddings when the config leaves it out; Llama-style configs do not
    assert model_from_hf_config(_base()).tied_embeddings
    assert not model_from_hf_config(_base(model_type="llama")).tied_embeddings


def test_a_multimodal_config_is_read_for_its_language_model():
    text = _base(model_type="gemma3_text", num_hidden_layers=12)
    outer = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"], "text_config": text,
             "vision_config": {"hidden_size": 1152, "num_hidden_layers": 27}}
    assert model_from_hf_config(outer) == model_from_hf_config(text)


@pytest.mark.parametrize("extra, words", [
    ({"layer_types": ["sliding_attention", "linear_attention"] * 3}, "'linear_attention'"),
    ({"layer_types": ["sliding_attention", "full_attention"]}, "names 2 layers"),
    ({"attention_chunk_size": 8192}, "chunked local attention"),
    ({"global_head_dim": 512}, "their own head size"),
    ({"num_kv_shared_layers": 20}, "reuse another layer's KV cache"),
])
def test_attention_the_library_does_not_model_is_refused_by_name(extra, words):
    with pytest.raises(ValueError, match=words):
        model_from_hf_config(_base(**extra), name="probe")


def test_window_layers_and_expert_dtypes_are_checked():
    m = get_model("Llama-3.1-8B")
    with pytest.raises(ValueError, match="give sliding_window too"):
        replace(m, sliding_window_layers=4)
    with pytest.raises(ValueError, match=r"sliding_window_layers must be an integer in \[0, n_layers = 32\]"):
        replace(m, sliding_window=128, sliding_window_layers=33)
    with pytest.raises(ValueError, match="n_experts = 1"):
        replace(m, expert_dtype="mxfp4")
    with pytest.raises(ValueError, match="expert_dtype"):
        replace(get_model("Mixtral-8x7B"), expert_dtype="fp6")


# ---------------------------------------------------------------- gpt-oss against its model card

@pytest.mark.parametrize("name, layers, experts, total, active, gib", [
    ("gpt-oss-120b", 36, 128, 116.83e9, 5.13e9, 60.8),
    ("gpt-oss-20b", 24, 32, 20.91e9, 3.61e9, 12.8),
])
def test_gpt_oss_matches_its_model_card(name, layers, experts, total, active, gib):
    m = get_model(name)
    assert (m.n_layers, m.n_experts, m.n_active_experts, m.sliding_window_layers) == (layers, experts, 4,
                                                                                      layers // 2)
    # the card counts the expert biases (gate/up and down: 3 x 2880 per expert per layer), the library not
    biases = layers * experts * 3 * 2880
    assert parameter_count(m) + biases == pytest.approx(total, rel=3e-4)
    # active: without the input embedding (the card's convention)
    assert active_parameter_count(m) - input_embedding_parameter_count(m) == pytest.approx(active, rel=2e-3)
    # the checkpoint: MXFP4 experts (4.25 bits with their scales), the rest bf16
    assert weight_bytes(m, "bf16") / 2**30 == pytest.approx(gib, rel=3e-3)
    shared, per_expert = expert_parameter_split(m)
    assert weight_bytes(m, "bf16") == shared * 2 + experts * per_expert * (0.5 + 1 / 32)
    # KV: 2 x layers x 8 KV heads x 64 x 2 bytes per token, in every layer
    assert kv_bytes_per_token(m, "bf16") == 2 * layers * 8 * 64 * 2


def test_the_experts_dtype_sets_the_bytes_a_step_reads_and_the_gpu_holds():
    dep = Deployment.build(OSS, H100)
    all_bf16 = Deployment.build(replace(get_model(OSS), expert_dtype=None), H100)
    # one decode at B = 1: attention, head and 4 experts; the experts read at 0.53 bytes instead of 2
    assert decode_step_time(dep, 1, 100) < 0.6 * decode_step_time(all_bf16, 1, 100)
    assert memory.weight_bytes_per_gpu(OSS) == pytest.approx(weight_bytes(OSS, "bf16"))
    assert memory.weight_bytes_per_gpu(OSS, tensor_parallel=4) == pytest.approx(weight_bytes(OSS, "bf16") / 4)
    shared, per_expert = expert_parameter_split(OSS)
    ep = memory.weight_bytes_per_gpu(OSS, tensor_parallel=1, expert_parallel=8)
    assert ep == pytest.approx(shared * 2 + 128 / 8 * per_expert * (0.5 + 1 / 32), rel=1e-3)
    # fp8 for the rest: the experts keep their MXFP4
    assert weight_bytes(OSS, "fp8") == pytest.approx(shared * 1 + 128 * per_expert * (0.5 + 1 / 32))


# ---------------------------------------------------------------- the step model's counts

@pytest.mark.parametrize("c, n", [(0, 1), (10, 1), (127, 1), (500, 1), (0, 300), (100, 50), (1000, 512)])
def test_a_hybrid_models_counts_weight_the_windowed_and_the_full_ones(c, n):
    m = get_model(OSS)
    windowed, full = replace(m, sliding_window_layers=None), replace(m, sliding_window=None,
                                                                      sliding_window_layers=None)
    it = Iteration.of(m, sequences=3, new_tokens=n, cached_tokens=c)
    w, f = (Iteration.of(x, sequences=3, new_tokens=n, cached_tokens=c) for x in (windowed, full))
    assert it.kv_tokens == pytest.approx(0.5 * w.kv_tokens + 0.5 * f.kv_tokens)
    assert it.attention_pairs == pytest.approx(0.5 * w.attention_pairs + 0.5 * f.attention_pairs)
    assert it.tokens == f.tokens and it.logits == f.logits
    if c + n <= 128:   # within the window both kinds count alike
        assert it == f
    else:
        assert it.attention_pairs < f.attention_pairs and it.kv_tokens <= f.kv_tokens
    d = Iteration.decode(m, sequences=4, context_len=c + n)
    assert d.kv_tokens == pytest.approx(4 * (0.5 * min(c + n, 128) + 0.5 * (c + n)))


def test_the_critical_prompt_length_of_a_hybrid_model_solves_its_equation():
    # attention FLOPs (4 L H d_h per pair, the pairs of Iteration.of) = linear FLOPs 2 (P_body n + P_head)
    from servingmath.models import attention_flops_per_pair, body_parameter_count, lm_head_parameter_count
    m = get_model(OSS)
    n = critical_prompt_length(m)
    assert n > 128
    pairs = 0.5 * (128 * 129 / 2 + (n - 128) * 128) + 0.5 * n * (n + 1) / 2
    attention = attention_flops_per_pair(m) * pairs
    linear = 2 * (body_parameter_count(m) * n + lm_head_parameter_count(m))
    assert attention == pytest.approx(linear, rel=1e-9)
    # the windowed half grows only linearly: later than with every layer full, sooner than all windowed
    full = replace(m, sliding_window=None, sliding_window_layers=None)
    assert critical_prompt_length(full) < n < critical_prompt_length(replace(m, sliding_window_layers=None))


# ---------------------------------------------------------------- memory

def test_a_sequence_holds_the_window_in_its_windowed_layers():
    assert memory.kv_tokens_held(OSS, [100, 128, 1000]).tolist() == [100, 128, 564]
    assert memory.kv_bytes_per_sequence(OSS, 1000) == 564 * kv_bytes_per_token(OSS)
    dep = Deployment.build(OSS, H100)
    tokens = memory.max_kv_tokens(dep)
    assert memory.max_batch_size(dep, 1000) == tokens // 564
    # paged: the full layers' 63 blocks of 16 and the windowed layers' 8
    assert memory.paged_kv_bytes_per_sequence(OSS, 1000) == (0.5 * 63 + 0.5 * 8) * 16 * kv_bytes_per_token(OSS)
    # Mistral-7B v0.1 windows every layer: a sequence never holds more than 4096 tokens
    assert memory.kv_tokens_held("Mistral-7B", 10_000) == 4096


# ---------------------------------------------------------------- the simulator

@pytest.mark.parametrize("policy", [sim.ContinuousBatching(), sim.ChunkedPrefill(token_budget=512)])
def test_the_simulator_decodes_a_hybrid_model_as_the_step_model(policy):
    # one request alone: each decode step at context S takes decode_step_time(S); past the window only
    # the full layers' keys grow, half as fast per key as before it
    config = sim.SimulationConfig(sim.Server(OSS, H100), Workload.fixed(1, 60, 200), Timestamps([0.0]), policy)
    res = sim.simulate(config, 0)
    gaps = np.diff(res.token_times(0))                   # gap k - 1: the decode step at context 60 + k
    contexts = 60 + np.arange(1, 200)
    expected = [decode_step_time(OSS, H100, 1, s) for s in contexts]
    np.testing.assert_allclose(gaps, expected, rtol=1e-9)
    slope = np.diff(gaps)
    within, beyond = slope[contexts[1:] <= 128], slope[contexts[1:] > 129]
    np.testing.assert_allclose(beyond, 0.5 * within[0], rtol=1e-6)
    assert res.token_times(0)[0] == pytest.approx(prefill_time(OSS, H100, 60), rel=1e-9)


@pytest.mark.parametrize("name, total, layers", [("Gemma-2-9B", 9.24e9, 42), ("Gemma-2-27B", 27.2e9, 46)])
def test_gemma_2_alternates_its_windowed_layers_and_matches_its_published_size(name, total, layers):
    # Hugging Face's model pages: 9.24B and 27.2B parameters (tied embeddings, Gemma2Config's default)
    m = get_model(name)
    assert parameter_count(m) == pytest.approx(total, rel=1e-3)
    assert m.tied_embeddings and (m.sliding_window, m.sliding_window_layers) == (4096, (layers + 1) // 2)
    # below the window every layer holds the sequence; past it the windowed half stops at 4096
    assert memory.kv_tokens_held(m, 4096) == 4096
    phi = ((layers + 1) // 2) / layers
    assert memory.kv_tokens_held(m, 8192) == pytest.approx(8192 - phi * 4096)
