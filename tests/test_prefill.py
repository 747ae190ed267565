"""Tests of servingmath.prefill: known values, cross-checks, properties, bad input."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servingmath import decode, models, prefill, roofline
from servingmath.hardware import get_accelerator
from servingmath.models import get_model

A100 = "A100-SXM4-80GB"
H100 = "H100-SXM5-80GB"

# Llama-2-7B shapes from its Hugging Face config.json (meta-llama/Llama-2-7b-hf):
# 32 layers, D = 4096, 32 heads of 128, FFN 11008 (gated), vocabulary 32000.
L7, D7, H7, DH7, F7, V7 = 32, 4096, 32, 128, 11008, 32000
BODY7 = L7 * (4 * D7 * D7 + 3 * D7 * F7 + 2 * D7) + D7  # blocks + norms + final norm
P7 = BODY7 + 2 * V7 * D7                                # + input-embedding table + untied LM head
KV7 = 2 * L7 * 32 * DH7 * 2                             # K and V, 32 KV heads (MHA), bf16: 512 KiB/token
A100_FLOPS, A100_BW = 312e12, 2.039e12                  # A100-SXM4-80GB datasheet: dense bf16, HBM2e


# --- known values ------------------------------------------------------------------------

def test_body_parameters_from_the_config_by_hand():
    assert prefill.body_parameter_count("Llama-2-7B") == BODY7
    assert prefill.lm_head_parameter_count("Llama-2-7B") == V7 * D7


def test_prefill_flops_by_hand():
    lp = 2048
    linear = 2 * (BODY7 * lp + V7 * D7)           # LM head only for the last token
    attention = 4 * L7 * H7 * DH7 * (lp * (lp + 1) // 2)
    assert prefill.prefill_flops("Llama-2-7B", lp, part="linear") == linear
    assert prefill.prefill_flops("Llama-2-7B", lp, part="attention") == attention
    assert prefill.prefill_flops("Llama-2-7B", lp) == linear + attention


def test_all_logits_matches_flops_per_token_summed_over_the_prompt():
    # token i (1-based) attends to i tokens; models.flops_per_token counts the LM head for it
    lp = 300
    per_token = models.flops_per_token("Llama-3.1-8B", np.arange(1, lp + 1))
    got = prefill.prefill_flops("Llama-3.1-8B", lp, all_logits=True)
    assert got == pytest.approx(per_token.sum(), rel=1e-12)


def test_prefill_time_of_llama2_7b_on_a100_by_hand():
    # compute-bound: (linear + attention FLOPs) / 312 TFLOP/s dense bf16 (A100 datasheet)
    lp = 2048
    flops = 2 * (BODY7 * lp + V7 * D7) + 4 * L7 * H7 * DH7 * lp * (lp + 1) / 2
    assert prefill.prefill_time("Llama-2-7B", A100, lp) == pytest.approx(flops / 312e12, rel=1e-12)


def test_one_token_prefill_is_memory_bound_like_a_decode_step():
    # the weights but the V x D input-embedding table (one row gathered), plus one KV entry written
    t_prefill = prefill.prefill_time("Llama-2-7B", A100, 1)
    assert P7 == models.parameter_count("Llama-2-7B")
    weights = (P7 - V7 * D7 + D7) * 2 / A100_BW
    assert t_prefill == pytest.approx(weights + KV7 / A100_BW, rel=1e-12)
    assert t_prefill == pytest.approx(weights, rel=1e-4)
    # exactly the decode step that attends to its one key (the step model's convention)
    assert t_prefill == pytest.approx(decode.decode_step_time("Llama-2-7B", A100, 1, 1), rel=1e-12)
    assert t_prefill == pytest.approx(decode.decode_step_time("Llama-2-7B", A100, 1, 0), rel=1e-4)


def test_critical_prompt_length_matches_the_llama_shape_rule():
    # P_body / (L H d_h) - 1 = 2D + 2DK/H + 3F + 2 - 1 for D = H d_h (the 2: two norms per layer)
    for name in ["Llama-2-7B", "Llama-3.1-8B", "Llama-3.1-70B"]:
        m = get_model(name)
        rule = 2 * m.hidden_size * (1 + m.n_kv_heads / m.n_heads) + 3 * m.ffn_size + 1
        assert prefill.critical_prompt_length(name) == pytest.approx(rule, abs=0.2)
    assert round(prefill.critical_prompt_length("Llama-2-7B")) == 49409
    assert round(prefill.critical_prompt_length("Llama-3.1-70B")) == 104449


@pytest.mark.parametrize("name", ["Llama-3.1-8B", "Llama-3.1-70B", "Qwen2.5-7B"])
def test_attention_overtakes_linear_at_the_critical_length(name):
    n = prefill.critical_prompt_length(name)
    below, above = math.floor(n), math.ceil(n)
    assert (prefill.prefill_flops(name, below, part="attention")
            < prefill.prefill_flops(name, below, part="linear"))
    assert (prefill.prefill_flops(name, above, part="attention")
            > prefill.prefill_flops(name, above, part="linear"))


def test_critical_length_with_all_logits_is_the_simple_ratio():
    m = get_model("Llama-2-7B")
    expected = decode.matmul_parameter_count(m) / (m.n_layers * m.n_heads * m.head_dim) - 1
    assert prefill.critical_prompt_length(m, all_logits=True) == pytest.approx(expected, rel=1e-12)


def test_sliding_window_caps_attention_pairs_brute_force():
    tiny = models.ModelConfig(name="tiny-window", n_layers=2, hidden_size=64, n_heads=4,
                              n_kv_heads=2, head_dim=16, ffn_size=128, ffn_gated=True,
                              vocab_size=100, max_context_len=512, sliding_window=7)
    for lp, lc in [(1, 0), (5, 0), (20, 0), (3, 4), (10, 30), (1, 100)]:
        pairs = sum(min(i, 7) for i in range(lc + 1, lc + lp + 1))
        expected = 4 * 2 * 4 * 16 * pairs
        assert prefill.prefill_flops(tiny, lp, cached_len=lc, part="attention") == expected
    full = replace(tiny, sliding_window=None)
    pairs = sum(range(31, 41))
    assert prefill.prefill_flops(full, 10, cached_len=30, part="attention") == 4 * 2 * 4 * 16 * pairs


def test_sliding_window_critical_length():
    assert prefill.critical_prompt_length("Mistral-7B") == math.inf   # 4096-token window
    wide = replace(get_model("Llama-2-7B"), name="7B-window", sliding_window=30000,
                   max_context_len=131072)
    n = prefill.critical_prompt_length(wide)
    assert 30000 < n < 131072
    assert (prefill.prefill_flops(wide, math.floor(n), part="attention")
            < prefill.prefill_flops(wide, math.floor(n), part="linear"))
    assert (prefill.prefill_flops(wide, math.ceil(n), part="attention")
            > prefill.prefill_flops(wide, math.ceil(n), part="linear"))


@pytest.mark.parametrize("accelerator", [A100, H100, "L40S", "MI300X"])
@pytest.mark.parametrize("weight_dtype", ["bf16", "int4"])
def test_saturating_chunk_is_where_weight_reads_and_matmuls_take_equal_time(accelerator, weight_dtype):
    t = prefill.saturating_chunk_size("Llama-2-7B", accelerator, weight_dtype=weight_dtype,
                                      mfu=0.7, mbu=0.8)
    def parts(n):
        return prefill.prefill_step_parts("Llama-2-7B", accelerator, n, weight_dtype=weight_dtype,
                                          mfu=0.7, mbu=0.8)
    low, high = parts(math.floor(t)), parts(math.ceil(t))
    assert low["weight_memory"] >= low["linear_compute"]
    assert high["weight_memory"] <= high["linear_compute"]


def saturating_chunk(ridge, b_w):
    """T* of one Llama-2-7B prompt: the weights read, (P - V D) b_w / W (+ T gathered rows, D b_w / W each),
    equal the matmuls, 2 (P_body T + V D) / F. Solved: T* = (ridge (P - V D) b_w - 2 V D) / (2 P_body - ridge D b_w)."""
    return (ridge * (P7 - V7 * D7) * b_w - 2 * V7 * D7) / (2 * BODY7 - ridge * D7 * b_w)


def test_saturating_chunk_is_about_half_bytes_per_weight_times_the_ridge():
    m = get_model("Llama-2-7B")
    p_read, p_body = models.parameter_count(m) - V7 * D7, prefill.body_parameter_count(m)
    for acc in [A100, H100]:
        ridge = roofline.ridge_point(acc)
        got = prefill.saturating_chunk_size(m, acc)
        assert got == pytest.approx(saturating_chunk(ridge, 2), rel=1e-12)
        assert got == pytest.approx(ridge * p_read / p_body, rel=0.01)
        int4 = prefill.saturating_chunk_size(m, acc, weight_dtype="int4")
        assert int4 == pytest.approx(saturating_chunk(ridge, 0.5), rel=1e-12)
        assert int4 == pytest.approx(ridge / 4 * p_read / p_body, rel=0.01)
    # A100: the ridge is 312e12 / 2.039e12 = 153 FLOP/B (datasheet figures)
    assert prefill.saturating_chunk_size(m, A100) == pytest.approx(
        saturating_chunk(A100_FLOPS / A100_BW, 2), rel=1e-12)
    assert round(prefill.saturating_chunk_size(m, A100), 1) == 156.1


def test_saturating_chunk_of_moe_counts_touched_experts():
    t = prefill.saturating_chunk_size("Mixtral-8x7B", H100)
    parts_low = prefill.prefill_step_parts("Mixtral-8x7B", H100, math.floor(t))
    parts_high = prefill.prefill_step_parts("Mixtral-8x7B", H100, math.ceil(t))
    assert parts_low["weight_memory"] >= parts_low["linear_compute"]
    assert parts_high["weight_memory"] <= parts_high["linear_compute"]


def test_throughput_saturates_below_the_compute_ceiling():
    m = get_model("Llama-2-7B")
    ceiling = A100_FLOPS / (2 * prefill.body_parameter_count(m))
    t_star = saturating_chunk(A100_FLOPS / A100_BW, 2)          # 156.1
    chunks = np.array([1, 16, 64, math.floor(t_star), math.ceil(t_star), 512, 2048, 4096])
    tput = prefill.prefill_throughput(m, A100, chunks)
    assert np.all(tput < ceiling)
    # one token: its weights read ((P - V D + D) x 2 bytes) and its KV entry written
    assert tput[0] == pytest.approx(A100_BW / ((P7 - V7 * D7 + D7) * 2 + KV7), rel=1e-12)
    assert tput[4] > 0.97 * ceiling            # saturated just past T*
    assert np.all(np.diff(tput[:5]) > 0)       # grows linearly while memory-bound


def test_burst_schedules():
    t1 = prefill.prefill_time("Llama-2-7B", A100, 2048)
    t16 = prefill.prefill_time("Llama-2-7B", A100, 2048, batch_size=16)
    assert prefill.burst_mean_ttft("Llama-2-7B", A100, 2048, 16) == pytest.approx(t16)
    seq = prefill.burst_mean_ttft("Llama-2-7B", A100, 2048, 16, schedule="sequential")
    assert seq == pytest.approx(np.mean([i * t1 for i in range(1, 17)]))
    assert prefill.burst_mean_ttft("Llama-2-7B", A100, 2048, 1, schedule="sequential") == pytest.approx(t1)


def test_prefix_cache_saving_known_case():
    assert prefill.prefix_cache_saving("Llama-2-7B", A100, 2048, 0) == 0.0
    # compute-bound: linear work saves 3/4, attention work saves less; overall just below 3/4
    s = prefill.prefix_cache_saving("Llama-3.1-8B", H100, 1024, 3072)
    assert 0.7 < s < 0.75


# Published measurements (first-token latency, batch 1), each must be above the physical bound.
# LMDeploy v0.1.0a1 TurboMind, A100-80G, fp16: docs/en/benchmark/a100_fp16.md
# (github InternLM/lmdeploy @ 3e391df4673326f79363eebe030876861a9b7090), FTL(ave), read 2026-11.
# TensorRT-LLM v0.5 first-token latency, A100 fp16: docs/source/performance.md @ 138f96d4 (read 2026-11).
MEASURED = [
    ("Llama-2-7B", 1, 1, 0.011), ("Llama-2-7B", 1, 128, 0.022), ("Llama-2-7B", 1, 2048, 0.139),
    ("Llama-2-13B", 1, 1, 0.018), ("Llama-2-13B", 1, 128, 0.040), ("Llama-2-13B", 1, 2048, 0.242),
    ("Llama-2-70B", 4, 128, 0.074), ("Llama-2-70B", 4, 2048, 0.402),
    ("Llama-2-7B", 1, 128, 0.016), ("Llama-2-7B", 1, 2048, 0.133),
    ("Llama-2-70B", 4, 128, 0.047), ("Llama-2-70B", 4, 2048, 0.377),
]


@pytest.mark.parametrize("name, tp, prompt, measured", MEASURED)
def test_published_first_token_latencies_are_above_the_physical_bound(name, tp, prompt, measured):
    bound = prefill.prefill_time(name, A100, prompt, weight_dtype="fp16", kv_dtype="fp16",
                                 compute_dtype="fp16", tensor_parallel=tp)
    assert measured > bound
    mfu = prefill.prefill_mfu(name, A100, prompt, measured, compute_dtype="fp16", tensor_parallel=tp)
    assert 0 < mfu < 1


def test_implied_mfu_of_the_lmdeploy_2048_rows():
    assert prefill.prefill_mfu("Llama-2-7B", A100, 2048, 0.139) == pytest.approx(0.637, abs=5e-4)
    assert prefill.prefill_mfu("Llama-2-13B", A100, 2048, 0.242) == pytest.approx(0.711, abs=5e-4)


def test_scalars_give_floats_and_arrays_broadcast():
    t = prefill.prefill_time("Llama-2-7B", A100, 512)
    assert type(t) is float
    grid = prefill.prefill_time("Llama-2-7B", A100, np.array([[128], [512]]), batch_size=np.array([1, 2, 4]))
    assert grid.shape == (2, 3)
    assert grid[1, 2] == pytest.approx(prefill.prefill_time("Llama-2-7B", A100, 512, batch_size=4))
    assert type(prefill.ttft("Llama-2-7B", A100, 512, queueing_delay=0.1)) is float
    assert type(prefill.critical_prompt_length("Llama-2-7B")) is float
    assert type(prefill.saturating_chunk_size("Llama-2-7B", A100)) is float
    assert prefill.saturating_chunk_size("Llama-2-7B", A100, mfu=np.array([0.5, 1.0])).shape == (2,)


# --- properties --------------------------------------------------------------------------

DENSE = ["Llama-2-7B", "Llama-3.1-8B", "Llama-3.1-70B", "Mistral-7B", "GPT-J-6B", "Qwen2.5-7B",
         "Mixtral-8x7B"]
model_names = st.sampled_from(DENSE)
accelerators = st.sampled_from([A100, H100, "L40S", "MI300X"])
lengths = st.integers(min_value=1, max_value=2000)
batches = st.integers(min_value=1, max_value=64)
fractions = st.floats(min_value=0.05, max_value=1.0)


@settings(max_examples=60, deadline=None)
@given(model_names, accelerators, lengths, lengths, batches, fractions, fractions)
def test_prefill_time_is_non_decreasing_in_prompt_length_and_batch(name, acc, a, b, batch, mfu, mbu):
    short, long = sorted((a, b))
    t = lambda lp, bs: prefill.prefill_time(name, acc, lp, batch_size=bs, mfu=mfu, mbu=mbu)
    assert t(short, batch) <= t(long, batch)
    assert t(long, batch) <= t(long, batch + 1)


@settings(max_examples=60, deadline=None)
@given(model_names, accelerators, lengths, st.floats(min_value=0, max_value=10))
def test_ttft_is_at_least_the_prefill_time(name, acc, lp, queue):
    assert prefill.ttft(name, acc, lp, queueing_delay=queue) >= prefill.prefill_time(name, acc, lp)


@settings(max_examples=60, deadline=None)
@given(model_names, accelerators, st.integers(min_value=2, max_value=4000), st.data())
def test_a_cached_prefix_never_increases_the_time(name, acc, total, data):
    total = min(total, get_model(name).max_context_len)
    cached = data.draw(st.integers(min_value=0, max_value=total - 1))
    with_cache = prefill.prefill_time(name, acc, total - cached, cached_len=cached)
    without = prefill.prefill_time(name, acc, total)
    assert with_cache <= without * (1 + 1e-12)
    saving = prefill.prefix_cache_saving(name, acc, total - cached, cached)
    assert -1e-12 <= saving < 1


@settings(max_examples=60, deadline=None)
@given(model_names, accelerators, lengths, st.integers(min_value=0, max_value=2000), batches,
       st.sampled_from([1, 2, 4]))
def test_overlap_models_are_ordered(name, acc, lp, lc, batch, tp):
    lc = min(lc, get_model(name).max_context_len - lp)
    t = {o: prefill.prefill_time(name, acc, lp, batch_size=batch, cached_len=lc, tensor_parallel=tp,
                                 overlap=o) for o in roofline.OVERLAP_MODELS}
    eps = 1e-12
    assert t["roofline"] <= t["hybrid"] * (1 + eps)
    assert t["hybrid"] <= t["additive"] * (1 + eps)
    assert t["additive"] <= 2 * t["roofline"] * (1 + eps)


@settings(max_examples=60, deadline=None)
@given(model_names, accelerators, lengths, batches, fractions)
def test_throughput_never_beats_the_compute_ceiling(name, acc, lp, batch, mfu):
    ceiling = get_accelerator(acc).peak_flops("bf16") * mfu / (2 * prefill.body_parameter_count(name))
    assert prefill.prefill_throughput(name, acc, lp, batch_size=batch, mfu=mfu) <= ceiling


@settings(max_examples=40, deadline=None)
@given(model_names, accelerators, lengths, st.integers(min_value=1, max_value=32))
def test_batching_raises_each_requests_ttft_and_sequential_mean_is_lower(name, acc, lp, n):
    single = prefill.prefill_time(name, acc, lp)
    batched = prefill.burst_mean_ttft(name, acc, lp, n)
    sequential = prefill.burst_mean_ttft(name, acc, lp, n, schedule="sequential")
    assert batched >= single * (1 - 1e-12)
    assert sequential <= (n + 1) / 2 * single * (1 + 1e-12)


@settings(max_examples=40, deadline=None)
@given(model_names, accelerators, lengths, batches, fractions)
def test_implied_mfu_of_the_bound_itself_is_at_most_the_mfu(name, acc, lp, batch, mfu):
    t = prefill.prefill_time(name, acc, lp, batch_size=batch, mfu=mfu)
    assert prefill.prefill_mfu(name, acc, lp, t, batch_size=batch) <= mfu * (1 + 1e-12)


# --- bad input ---------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    ({"prompt_len": 0}, "prompt_len must be an integer >= 1, got 0"),
    ({"prompt_len": 12.5}, "prompt_len must be a whole number, got 12.5"),
    ({"prompt_len": 16, "batch_size": 0}, "batch_size must be an integer >= 1, got 0"),
    ({"prompt_len": 16, "cached_len": -1}, "cached_len must be >= 0, got -1"),
    ({"prompt_len": 4000, "cached_len": 1000}, "prompt_len + cached_len = 5000 exceeds Llama-2-7B's maximum"),
    ({"prompt_len": 16, "mfu": 1.5}, "mfu must be in (0, 1], got 1.5"),
    ({"prompt_len": 16, "overlap": "perfect"}, "unknown overlap 'perfect'"),
    ({"prompt_len": 16, "all_logits": "yes"}, "all_logits must be True or False, got 'yes'"),
    ({"prompt_len": 16, "weight_dtype": "fp6"}, "unknown weight_dtype 'fp6'"),
])
def test_prefill_time_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError) as info:
        prefill.prefill_time("Llama-2-7B", A100, **kwargs)
    assert message in str(info.value)


@pytest.mark.parametrize("call", [
    lambda **kw: prefill.prefill_flops("Llama-2-7B", **kw),
    lambda **kw: prefill.prefill_iteration("Llama-2-7B", **kw),
    lambda **kw: prefill.ttft("Llama-2-7B", A100, **kw),
    lambda **kw: prefill.prefill_throughput("Llama-2-7B", A100, **kw),
    lambda **kw: prefill.prefill_step_parts("Llama-2-7B", A100, **kw),
    lambda **kw: prefill.prefill_mfu("Llama-2-7B", A100, measured_time=0.1, **kw),
])
def test_every_prefill_function_names_cached_len_as_its_caller_does(call):
    # regression: the step model's own names (cached_tokens, new_tokens) leaked into these messages
    with pytest.raises(ValueError, match=r"^cached_len must be >= 0, got -1$"):
        call(prompt_len=16, cached_len=-1)
    with pytest.raises(ValueError, match=r"^cached_len must be a whole number, got 2.5"):
        call(prompt_len=16, cached_len=2.5)
    with pytest.raises(ValueError, match=r"^prompt_len \+ cached_len = 5000 exceeds Llama-2-7B's maximum"):
        call(prompt_len=4000, cached_len=1000)


def test_other_functions_reject_bad_input():
    with pytest.raises(ValueError, match="queueing_delay must be >= 0, got -0.1"):
        prefill.ttft("Llama-2-7B", A100, 16, queueing_delay=-0.1)
    with pytest.raises(ValueError, match="unknown part 'mlp'"):
        prefill.prefill_flops("Llama-2-7B", 16, part="mlp")
    with pytest.raises(ValueError, match="unknown schedule 'fifo'"):
        prefill.burst_mean_ttft("Llama-2-7B", A100, 16, 4, schedule="fifo")
    with pytest.raises(ValueError, match="n_requests must be an integer >= 1, got 0"):
        prefill.burst_mean_ttft("Llama-2-7B", A100, 16, 0)
    with pytest.raises(ValueError, match="measured_time must be > 0, got 0"):
        prefill.prefill_mfu("Llama-2-7B", A100, 16, 0.0)
    with pytest.raises(ValueError, match="mbu must be in"):
        prefill.saturating_chunk_size("Llama-2-7B", A100, mbu=0)
    with pytest.raises(ValueError, match="has no tensor-core peak"):
        prefill.saturating_chunk_size("Llama-2-7B", A100, compute_dtype="fp8")
    with pytest.raises(ValueError, match="cached_len must be >= 0, got -4"):
        prefill.prefix_cache_saving("Llama-2-7B", A100, 16, -4)
    with pytest.raises(KeyError, match="unknown model 'Llama-7B'"):
        prefill.critical_prompt_length("Llama-7B")
    with pytest.raises(KeyError, match="unknown accelerator"):
        prefill.saturating_chunk_size("Llama-2-7B", "A1000")
