"""servingmath.memory: known values with their sources, properties, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from servingmath import memory as mem
from servingmath.hardware import get_accelerator
from servingmath.models import get_model, kv_bytes_per_token, list_models, weight_bytes
from servingmath.units import GB, GiB, MiB

H100 = "H100-SXM5-80GB"
FAST = settings(max_examples=60, deadline=None)


# ---------------------------------------------------------------- known values

def test_llama2_7b_holds_half_a_mib_per_token_and_2_gib_per_4096_tokens():
    # 2 x 32 layers x 32 KV heads x 128 x 2 bytes = 524288 B = 0.5 MiB (Llama-2 config.json)
    assert mem.kv_bytes_per_sequence("Llama-2-7B", 1) == 0.5 * MiB
    assert mem.kv_bytes_per_sequence("Llama-2-7B", 4096) == 2 * GiB


def test_lmdeploy_static_batch_64_x_4096_needs_128_gib_more_than_an_a100():
    # LMDeploy a100_fp16.md (flagged KV-capacity-limited in shared/data/published-measurements.csv)
    need = mem.kv_bytes_for_batch("Llama-2-7B", 64, 4096, kv_dtype="fp16")
    assert need == 128 * GiB
    assert not mem.fits("Llama-2-7B", "A100-SXM4-80GB", 4096, batch_size=64, kv_dtype="fp16")
    assert mem.max_batch_size("Llama-2-7B", "A100-SXM4-80GB", 4096, memory_bytes=80 * GiB) == 29


def test_reproduces_vllm_memory_profile_log_of_llama3_8b_on_h100():
    # vLLM PR #10511 (2024-12-14): total_gpu_memory 79.22 GiB x 0.90 = 71.29 GiB; weights 14.96 GiB;
    # non_torch_memory 1.79 GiB; PyTorch activation peak 1.26 GiB; available_kv_cache_memory 53.29 GiB
    assert mem.usable_memory(H100, gpu_memory_utilization=0.9, reserve_bytes=0.0,
                            memory_bytes=79.22 * GiB) / GiB == pytest.approx(71.29, abs=0.01)
    assert mem.weight_bytes_per_gpu("Llama-3.1-8B", weight_dtype="bf16", tensor_parallel=1) / GiB == pytest.approx(14.96, abs=0.005)
    avail = mem.memory_available_for_kv("Llama-3.1-8B", H100, memory_bytes=79.22 * GiB,
                                        reserve_bytes=(1.79 + 1.26) * GiB)
    assert avail / GiB == pytest.approx(53.29, abs=0.01)
    # same PR, -tp 2: "model weights take 7.48GiB" per GPU
    assert mem.weight_bytes_per_gpu("Llama-3.1-8B", weight_dtype="bf16", tensor_parallel=2) / GiB == pytest.approx(7.48, abs=0.005)


def test_vllm_block_count_of_llama2_7b_on_an_a100_is_below_our_upper_bound():
    # vLLM PR #2031 (2023-12): Llama2-7B, TP=1, 1xA100-80GB, 16-token blocks: "# GPU blocks: 7351"
    bound = mem.max_kv_tokens("Llama-2-7B", "A100-SXM4-80GB", memory_bytes=80 * GiB, block_size=16) // 16
    assert bound == 7609
    assert 7351 <= bound < 7351 * 1.05  # the 4 % gap is activations and runtime (the reserve)


def test_tensor_parallel_head_rules_match_vllm():
    # vLLM QKVParallelLinear: tp >= K -> 1 KV head per GPU, replicated tp / K times
    assert mem.kv_heads_per_gpu("Llama-3.1-70B", 8) == 1
    assert mem.kv_heads_per_gpu("Llama-3.1-70B", 16) == 1
    assert mem.kv_head_replicas("Llama-3.1-70B", 16) == 2
    assert mem.kv_heads_per_gpu("Llama-2-7B", 4) == 8
    assert mem.valid_tensor_parallel_degrees("Qwen2.5-7B") == [1, 2, 4, 28]
    np.testing.assert_array_equal(mem.kv_heads_per_gpu("Llama-3.1-70B", [1, 2, 4, 8, 16]),
                                  [8, 4, 2, 1, 1])


def test_replicated_kv_heads_cost_memory_and_their_projections_too():
    model = get_model("Llama-3.1-405B")
    per_gpu = mem.kv_bytes_per_token_per_gpu(model, kv_dtype="bf16", tensor_parallel=16)
    assert per_gpu == 2 * 126 * 1 * 128 * 2 == 64512
    assert per_gpu * 16 == 2 * kv_bytes_per_token(model, "bf16")  # each head stored twice
    extra = mem.weight_bytes_per_gpu(model, weight_dtype="bf16", tensor_parallel=16) - weight_bytes(model, "bf16") / 16
    assert extra == pytest.approx(mem.kv_projection_parameter_count(model) * 2 * (1 / 8 - 1 / 16))


def test_405b_bf16_does_not_fit_one_h100_and_needs_16_gpus():
    assert mem.max_batch_size("Llama-3.1-405B", H100, 8192) == 0
    assert mem.memory_available_for_kv("Llama-3.1-405B", H100) == 0.0
    assert mem.min_tensor_parallel("Llama-3.1-405B", H100, 8192) == 16
    assert mem.min_tensor_parallel("Llama-3.1-405B", H100, 8192, weight_dtype="fp8") == 8


def test_min_tensor_parallel_tries_every_degree_whatever_tensor_parallel_says():
    # The rewrite made tensor_parallel a deployment option that min_tensor_parallel replaces by every valid
    # degree in turn (CORE_CHANGES); the old refusal ("do not pass it") is gone. 405B in bf16: 811.7 GB of
    # weights / 72 GB usable per H100 (0.9 x 80e9) needs 16, and passing 2 or 32 changes nothing.
    for given_degree in (1, 2, 32):
        assert mem.min_tensor_parallel("Llama-3.1-405B", H100, 8192, tensor_parallel=given_degree) == 16
    assert math.ceil(weight_bytes("Llama-3.1-405B") / (0.9 * 80e9)) == 12   # 12 is no divisor of 128 heads
    assert 12 not in mem.valid_tensor_parallel_degrees("Llama-3.1-405B")


def test_check_fits_names_the_numbers():
    with pytest.raises(ValueError) as err:
        mem.check_fits("Llama-3.1-405B", H100, 8192)
    message = str(err.value)
    for part in ["Llama-3.1-405B", "H100-SXM5-80GB", "811.7 GB", "72.0 GB", "tensor_parallel that fits: 16"]:
        assert part in message, message
    with pytest.raises(ValueError, match=r"batch_size=64 x context_len=8192 .* largest batch is 52"):
        mem.check_fits("Llama-3.1-8B", H100, 8192, batch_size=64)
    assert mem.check_fits("Llama-3.1-8B", H100, 8192, batch_size=52) == 52


def test_paged_allocation_example():
    assert mem.paged_kv_blocks(1000) == 63
    r = mem.compare_kv_allocation("Llama-2-7B", [500] * 100, 4 * GiB, reserved_len=4096)
    assert (r["reserved"], r["paged"], r["exact"]) == (2, 16, 16)
    assert r["reserved_waste"] == pytest.approx(1 - 500 / 4096)
    assert r["paged_waste"] == pytest.approx(12 / 512)


def test_scalar_in_gives_python_numbers():
    assert isinstance(mem.max_batch_size("Llama-3.1-8B", H100, 8192), int)
    assert isinstance(mem.kv_heads_per_gpu("Llama-3.1-8B", 2), int)
    assert isinstance(mem.kv_bytes_per_sequence("Llama-3.1-8B", 10), float)
    assert isinstance(mem.fits("Llama-3.1-8B", H100, 8192), bool)
    out = mem.max_batch_size("Llama-3.1-8B", H100, [1024, 2048])
    assert out.dtype == np.int64 and out.shape == (2,)


# ---------------------------------------------------------------- properties

MODELS = st.sampled_from(list_models())
CONTEXT = st.integers(min_value=1, max_value=2048)


@FAST
@given(MODELS, CONTEXT, CONTEXT)
def test_kv_bytes_are_linear_in_context(model, a, b):
    """Linear in the context without a sliding window; with one, a windowed layer stops growing at w
    tokens, so the cache of a + b tokens is at most the two apart (and equal below the window)."""
    total = mem.kv_bytes_per_sequence(model, a + b) if a + b <= get_model(model).max_context_len else None
    w = get_model(model).sliding_window
    if total is not None:
        apart = mem.kv_bytes_per_sequence(model, a) + mem.kv_bytes_per_sequence(model, b)
        if w is None or a + b <= w:
            assert total == pytest.approx(apart)
        else:
            assert total < apart
    assert mem.kv_bytes_for_batch(model, 3, a) == pytest.approx(3 * mem.kv_bytes_per_sequence(model, a))


@FAST
@given(MODELS, st.sampled_from(["bf16", "fp8"]))
def test_max_batch_is_non_increasing_in_context_and_never_negative(model, kv_dtype):
    top = min(get_model(model).max_context_len, 32768)
    contexts = np.unique(np.linspace(1, top, 60).astype(int))
    batch = mem.max_batch_size(model, "H200", contexts, kv_dtype=kv_dtype)
    assert np.all(batch >= 0)
    assert np.all(np.diff(batch) <= 0)


@FAST
@given(MODELS, st.floats(min_value=1e9, max_value=400e9), st.floats(min_value=1.0, max_value=2.0))
def test_max_batch_is_non_decreasing_in_memory(model, memory, factor):
    small = mem.max_batch_size(model, H100, 1024, memory_bytes=memory)
    large = mem.max_batch_size(model, H100, 1024, memory_bytes=memory * factor)
    assert 0 <= small <= large


@FAST
@given(MODELS, st.floats(min_value=0.05, max_value=1.0), st.floats(min_value=0, max_value=20e9))
def test_max_batch_is_the_floor_of_budget_over_sequence(model, utilization, reserve):
    s = 777
    b = mem.max_batch_size(model, "MI300X", s, gpu_memory_utilization=utilization, reserve_bytes=reserve)
    budget = utilization * get_accelerator("MI300X").memory_bytes - reserve - weight_bytes(model)
    per_sequence = mem.kv_bytes_per_sequence(model, s)
    if budget <= 0:
        assert b == 0
    else:
        assert b * per_sequence <= budget * (1 + 1e-9)
        assert (b + 1) * per_sequence > budget
    # more reserve never helps, more utilisation never hurts
    assert mem.max_batch_size(model, "MI300X", s, gpu_memory_utilization=utilization,
                              reserve_bytes=reserve + 1e9) <= b
    assert mem.max_batch_size(model, "MI300X", s, gpu_memory_utilization=min(1.0, utilization + 0.05),
                              reserve_bytes=reserve) >= b


@FAST
@given(MODELS, st.data())
def test_tensor_parallel_splits_weights_and_kv_and_replicates_below_one_head(model, data):
    m = get_model(model)
    n = data.draw(st.sampled_from(mem.valid_tensor_parallel_degrees(m)))
    per_gpu_kv = mem.kv_bytes_per_token_per_gpu(m, kv_dtype="bf16", tensor_parallel=n)
    assert per_gpu_kv * n == pytest.approx(kv_bytes_per_token(m, "bf16") * max(m.n_kv_heads, n) / m.n_kv_heads)
    total_weights = mem.weight_bytes_per_gpu(m, weight_dtype="bf16", tensor_parallel=n) * n
    if n <= m.n_kv_heads:
        assert total_weights == pytest.approx(weight_bytes(m, "bf16"))
    else:
        assert total_weights > weight_bytes(m, "bf16")


@FAST
@given(MODELS, st.integers(min_value=0, max_value=2048), st.sampled_from([1, 8, 16, 32]))
def test_paged_bytes_cover_the_tokens_with_less_than_one_block_spare(model, s, block):
    exact = mem.kv_bytes_per_sequence(model, s)
    paged = mem.paged_kv_bytes_per_sequence(model, s, block_size=block)
    assert exact <= paged < exact + block * kv_bytes_per_token(model)


@FAST
@given(st.lists(st.integers(min_value=1, max_value=4096), min_size=1, max_size=300),
       st.floats(min_value=0, max_value=100e9))
def test_paging_admits_at_least_as_many_as_reserving_the_maximum(lengths, budget):
    r = mem.compare_kv_allocation("Llama-2-7B", lengths, budget, reserved_len=4096)
    assert r["reserved"] <= r["paged"] <= r["exact"] <= len(lengths)
    assert 0 <= r["paged_waste"] <= r["reserved_waste"] + 1e-12 or r["reserved"] == 0


@FAST
@given(MODELS, st.integers(min_value=1, max_value=2048))
def test_fp8_kv_at_least_doubles_the_batch(model, s):
    bf16 = mem.max_batch_size(model, "H200", s, kv_dtype="bf16")
    fp8 = mem.max_batch_size(model, "H200", s, kv_dtype="fp8")
    assert 2 * bf16 <= fp8 <= 2 * bf16 + 1


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("call, match", [
    (lambda: mem.kv_heads_per_gpu("Llama-3.1-70B", 3), r"tensor_parallel = 3 .* Allowed degrees: 1, 2, 4, 8"),
    (lambda: mem.kv_heads_per_gpu("Qwen2.5-7B", 8), r"does not divide its 28 query heads"),
    (lambda: mem.kv_heads_per_gpu("Qwen2.5-7B", 7), r"neither divides its 4 KV heads"),
    (lambda: mem.kv_heads_per_gpu("Llama-3.1-70B", 0), r"tensor_parallel must be an integer >= 1"),
    (lambda: mem.max_batch_size("Llama-3.1-8B", H100, 0), r"context_len must be >= 1"),
    (lambda: mem.max_batch_size("Llama-2-7B", H100, 8192), r"exceeds Llama-2-7B's maximum context"),
    (lambda: mem.max_batch_size("Llama-3.1-8B", H100, 1024, gpu_memory_utilization=1.2),
     r"gpu_memory_utilization must be in \(0, 1\]"),
    (lambda: mem.max_batch_size("Llama-3.1-8B", H100, 1024, reserve_bytes=-1), r"reserve_bytes must be >= 0"),
    (lambda: mem.max_batch_size("Llama-3.1-8B", H100, 1024, memory_bytes=0), r"memory_bytes must be > 0"),
    (lambda: mem.max_batch_size("Llama-3.1-8B", H100, 1024, block_size=0), r"block_size must be an integer >= 1"),
    (lambda: mem.max_batch_size("Llama-3.1-8B", H100, 100.5), r"context_len must be a whole number"),
    (lambda: mem.kv_bytes_for_batch("Llama-3.1-8B", -1, 10), r"batch_size must be an integer >= 0"),
    (lambda: mem.compare_kv_allocation("Llama-2-7B", [5000], 1e9, 4096), r"exceeds Llama-2-7B's maximum"),
    (lambda: mem.compare_kv_allocation("Llama-2-7B", [3000], 1e9, 2048), r"more than reserved_len = 2048"),
    (lambda: mem.compare_kv_allocation("Llama-2-7B", [], 1e9, 2048), r"at least one request"),
    (lambda: mem.min_tensor_parallel("Llama-3.1-405B", "A10", 131072, batch_size=100), r"does not fit at any tensor_parallel"),
    (lambda: mem.check_fits("Llama-3.1-8B", H100, [10, 20]), r"scalars only"),
])
def test_bad_input_raises_a_value_error_that_says_what_is_allowed(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_unknown_names_raise_key_errors_with_suggestions():
    with pytest.raises(KeyError, match="fp16"):
        mem.max_batch_size("Llama-3.1-8B", H100, 1024, kv_dtype="fp61")
    with pytest.raises(KeyError, match="Llama-3.1-8B"):
        mem.max_batch_size("Llama-3.1-8b-typo", H100, 1024)
    with pytest.raises(KeyError, match="H100"):
        mem.max_batch_size("Llama-3.1-8B", "H1000", 1024)


@pytest.mark.parametrize("model, acc, wd, tp", [("Llama-3.1-70B", "RTX-PRO-6000-Blackwell-Server", "fp8", 1),
                                                ("Llama-3.1-405B", "H100", "fp8", 8), ("Llama-3.1-8B", "A10G", "bf16", 1)])
def test_pipeline_stages_pool_their_memory_for_one_kv_cache(model, acc, wd, tp):
    # P stages of N GPUs: each holds 1/P of the weights and 1/P of a token's KV bytes, so in units of one
    # N-GPU group holding every layer the cache has P (u M - R) - W_gpu bytes
    one = mem.max_kv_tokens(model, acc, weight_dtype=wd, kv_dtype="fp8", tensor_parallel=tp)
    assert mem.max_kv_tokens(model, acc, weight_dtype=wd, kv_dtype="fp8", tensor_parallel=tp,
                             pipeline_parallel=1) == one
    usable = mem.usable_memory(acc)
    w = mem.weight_bytes_per_gpu(model, weight_dtype=wd, tensor_parallel=tp)
    kv = mem.kv_bytes_per_token_per_gpu(model, kv_dtype="fp8", tensor_parallel=tp)
    for p in (2, 4):
        expected = max(0, math.floor((p * usable - w) / kv))
        got = mem.max_kv_tokens(model, acc, weight_dtype=wd, kv_dtype="fp8", tensor_parallel=tp, pipeline_parallel=p)
        assert got == expected and got > p * max(one, 0) - 1
    with pytest.raises(ValueError, match="pipeline_parallel"):
        mem.max_kv_tokens(model, acc, pipeline_parallel=0)
