"""Speculative decoding: tokens per step, the cost of a step, the speed-up, the break-even batch.

Known values: the geometric sum of Leviathan et al. (2023, eq. 1) computed term by term; the
Llama-3.2 drafts' parameter counts from their config shapes (Hugging Face config.json files);
the step costs from :mod:`servingmath.decode`; the simulator's own speculative step. The rest
are invariants that must hold for every input (hypothesis).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from servingmath import decode, models, parallelism
from servingmath import simulate as sim
from servingmath.speculative import (
    LLAMA_3_2_1B,
    LLAMA_3_2_3B,
    acceptance_rate_from_tokens_per_step,
    asymptotic_speedup,
    break_even_batch_size,
    expected_tokens_per_step,
    ideal_speedup,
    optimal_num_draft_tokens,
    speculative_speedup,
    speculative_step_time,
    speculative_time_per_token,
    verification_step_parts,
    verification_step_time,
)
from servingmath.workloads import Timestamps, Workload

T8, H100 = "Llama-3.1-8B", "H100-SXM5-80GB"
PAIR = (T8, LLAMA_3_2_1B, H100)
TARGETS = [("Llama-3.1-8B", 1), ("Llama-3.1-70B", 4), ("Qwen2.5-7B", 1), ("Llama-2-13B", 1)]
DRAFTS = [LLAMA_3_2_1B, LLAMA_3_2_3B]
GPUS = ["A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"]
PROPERTY = settings(max_examples=30, deadline=None)


# ---- tokens per step ----------------------------------------------------------------------------
def test_expected_tokens_is_the_geometric_sum():
    assert expected_tokens_per_step(0.8, 4) == pytest.approx(1 + 0.8 + 0.64 + 0.512 + 0.4096, rel=1e-14)
    assert expected_tokens_per_step(0.5, 1) == pytest.approx(1.5)
    assert expected_tokens_per_step(1.0, 7) == 8.0          # every draft accepted, plus the bonus token
    assert expected_tokens_per_step(0.0, 7) == 1.0          # only the verification's own token
    for a in [0.3, 0.7, 0.95]:
        for g in [1, 3, 8]:
            assert expected_tokens_per_step(a, g) == pytest.approx(sum(a**i for i in range(g + 1)), rel=1e-12)


def test_expected_tokens_equals_the_simulators_formula():
    for a in [0.0, 0.25, 0.7, 0.99, 1.0]:
        for g in [1, 2, 5, 10]:
            assert expected_tokens_per_step(a, g) == pytest.approx(sim.expected_tokens_per_step(a, g), rel=1e-12)


def test_expected_tokens_broadcasts_and_returns_floats_for_scalars():
    assert isinstance(expected_tokens_per_step(0.7, 4), float)
    grid = expected_tokens_per_step(np.array([0.5, 1.0])[:, None], np.array([1, 2, 4]))
    assert grid.shape == (2, 3)
    np.testing.assert_allclose(grid[1], [2, 3, 5])


@PROPERTY
@given(a=st.floats(0, 1), g=st.integers(1, 32))
def test_tokens_per_step_lies_between_one_and_gamma_plus_one(a, g):
    e = expected_tokens_per_step(a, g)
    assert 1.0 <= e <= g + 1 + 1e-9
    assert e <= 1 / (1 - a) + 1e-9 if a < 1 else e == g + 1


@PROPERTY
@given(a=st.floats(0, 0.999), da=st.floats(1e-3, 0.5), g=st.integers(1, 16), dg=st.integers(1, 8))
def test_tokens_per_step_grows_with_alpha_and_gamma(a, da, g, dg):
    b = min(a + da, 1.0)
    assert expected_tokens_per_step(b, g) > expected_tokens_per_step(a, g)
    longer, shorter = expected_tokens_per_step(a, g + dg), expected_tokens_per_step(a, g)
    assert longer >= shorter
    if a ** (g + 1) > 1e-9:             # the added terms alpha^(g+1) ... are representable
        assert longer > shorter


@PROPERTY
@given(a=st.floats(0.001, 0.999), g=st.integers(1, 12))
def test_acceptance_rate_inverts_tokens_per_step(a, g):
    e = expected_tokens_per_step(a, g)
    assert acceptance_rate_from_tokens_per_step(e, g) == pytest.approx(a, abs=1e-9)
    engine_rate = (e - 1) / g                    # vLLM: accepted / proposed draft tokens
    assert engine_rate <= a + 1e-12              # the engine's ratio never exceeds alpha


def test_acceptance_rate_known_value():
    # vLLM's accepted/proposed = 0.5 with 4 drafts: 3 tokens per step, alpha solves 1 + a + ... + a^4 = 3
    a = acceptance_rate_from_tokens_per_step(3.0, 4)
    assert sum(a**i for i in range(5)) == pytest.approx(3.0, rel=1e-12)
    assert a == pytest.approx(0.7413, abs=1e-4)


# ---- the draft configurations -----------------------------------------------------------------
def test_draft_configs_have_the_published_shapes():
    # Llama-3.2-1B: embeddings 128256 x 2048 (tied), 16 blocks of attention (32 q, 8 kv heads of 64)
    # + SwiGLU 8192 + 2 norms, final norm
    block_1b = 2048 * 2048 * 2 + 2 * 2048 * 512 + 3 * 2048 * 8192 + 2 * 2048
    assert models.parameter_count(LLAMA_3_2_1B) == 128256 * 2048 + 16 * block_1b + 2048 == 1_235_814_400
    block_3b = 3072 * 3072 * 2 + 2 * 3072 * 1024 + 3 * 3072 * 8192 + 2 * 3072
    assert models.parameter_count(LLAMA_3_2_3B) == 128256 * 3072 + 28 * block_3b + 3072 == 3_212_749_824
    assert models.kv_bytes_per_token(LLAMA_3_2_1B) == 2 * 16 * 8 * 64 * 2 == 32768
    assert models.kv_bytes_per_token(LLAMA_3_2_3B) == 2 * 28 * 8 * 128 * 2 == 114688
    assert "config.json" in LLAMA_3_2_1B.source and "config.json" in LLAMA_3_2_3B.source


# ---- the cost of a step -------------------------------------------------------------------------
@pytest.mark.parametrize("context", [0, 512, 4096])
def test_verification_at_batch_one_costs_one_plain_step(context):
    for g in [1, 4, 8]:
        assert verification_step_time(T8, H100, 1, context, g) == pytest.approx(
            decode.decode_step_time(T8, H100, 1, context), rel=1e-12)


def test_verification_reads_weights_and_caches_once_and_multiplies_the_flops():
    plain = decode.decode_step_parts(T8, H100, 64, 1024)
    verify = verification_step_parts(T8, H100, 64, 1024, 4)
    assert verify["weight_memory"] == pytest.approx(plain["weight_memory"])
    assert verify["kv_memory"] == pytest.approx(plain["kv_memory"])
    assert verify["linear_compute"] == pytest.approx(5 * plain["linear_compute"])
    assert verify["attention_compute"] == pytest.approx(5 * plain["attention_compute"])
    # 5 x 64 = 320 positions: past the knee (316), the matmuls set the time
    assert decode.knee_batch_size(T8, H100, 0) < 320
    assert verification_step_time(T8, H100, 64, 1024, 4) == pytest.approx(
        verify["linear_compute"] + verify["kv_memory"], rel=1e-12)


def test_verification_all_reduces_carry_every_position():
    parts = verification_step_parts("Llama-3.1-70B", H100, 32, 512, 4, tensor_parallel=4)
    expected = parallelism.tensor_parallel_communication_time("Llama-3.1-70B", H100, 5 * 32, 4)
    assert parts["communication"] == pytest.approx(expected, rel=1e-12)


def test_moe_verification_touches_the_experts_of_every_position():
    plain = decode.decode_step_parts("Mixtral-8x7B", H100, 1, 256)
    verify = verification_step_parts("Mixtral-8x7B", H100, 1, 256, 4)
    five_tokens = decode.decode_step_parts("Mixtral-8x7B", H100, 5, 256)
    assert verify["weight_memory"] == pytest.approx(five_tokens["weight_memory"])
    assert verify["weight_memory"] > plain["weight_memory"]
    assert speculative_speedup("Mixtral-8x7B", LLAMA_3_2_1B, H100, 1, 256, 0.8, 4) < \
        ideal_speedup(0.8, 4, decode.decode_step_time(LLAMA_3_2_1B, H100, 1, 256)
                      / decode.decode_step_time("Mixtral-8x7B", H100, 1, 256))


def test_speculative_step_is_gamma_draft_steps_plus_a_verification():
    for b in [1, 37, 300]:
        expected = (4 * decode.decode_step_time(LLAMA_3_2_1B, H100, b, 700)
                    + verification_step_time(T8, H100, b, 700, 4))
        assert speculative_step_time(*PAIR, b, 700, 4) == pytest.approx(expected, rel=1e-12)
        assert speculative_time_per_token(*PAIR, b, 700, 0.8, 4) == pytest.approx(
            expected / expected_tokens_per_step(0.8, 4), rel=1e-12)


def test_speedup_at_batch_one_is_leviathans_formula():
    for target, draft, gpu in [PAIR, (T8, LLAMA_3_2_3B, "A100-SXM4-80GB"), ("Llama-3.1-70B", T8, "H200")]:
        for context in [0, 1024]:
            c = decode.decode_step_time(draft, gpu, 1, context) / decode.decode_step_time(target, gpu, 1, context)
            for a, g in [(0.6, 2), (0.8, 4), (0.9, 8)]:
                assert speculative_speedup(target, draft, gpu, 1, context, a, g) == pytest.approx(
                    expected_tokens_per_step(a, g) / (g * c + 1), rel=1e-12)
                assert ideal_speedup(a, g, c) == pytest.approx(expected_tokens_per_step(a, g) / (g * c + 1))


def test_known_speedups_of_the_running_example():
    # Llama-3.1-8B + Llama-3.2-1B on an H100, 256 tokens of context, alpha 0.8, gamma 4
    x = speculative_speedup(*PAIR, np.array([1, 64, 256]), 256, 0.8, 4)
    np.testing.assert_allclose(x, [2.0797, 2.0105, 0.8996], atol=1e-4)


@pytest.mark.parametrize("batch", [1, 64, 256])
def test_the_simulator_costs_a_step_like_the_analytic_model(batch):
    # alpha = 1: every step yields gamma + 1 tokens, so the TPOT is deterministic
    g, prompt, steps = 4, 256, 12
    out = 1 + (g + 1) * steps
    config = sim.SimulationConfig(
        server=sim.Server(T8, H100), workload=Workload.fixed(batch, prompt, out),
        arrivals=Timestamps(np.zeros(batch)), policy=sim.ContinuousBatching(max_batch_size=512),
        speculative=sim.Speculative(num_draft_tokens=g, acceptance_rate=1.0, draft_model=LLAMA_3_2_1B))
    tpot = sim.simulate(config, seed=0).records.tpot.mean()
    contexts = prompt + 1 + (g + 1) * np.arange(steps)
    model = speculative_step_time(*PAIR, batch, contexts, g).sum() / (out - 1)
    # the simulator also counts the verification's KV writes and causal pairs (about gamma / 2S)
    assert tpot == pytest.approx(model, rel=5e-3)
    assert tpot >= model


# ---- the break-even batch -----------------------------------------------------------------------
def test_break_even_at_short_context_is_the_closed_form():
    knee = decode.knee_batch_size(T8, H100, 0)
    rho = models.weight_bytes(LLAMA_3_2_1B) / models.weight_bytes(T8)
    for a, g in [(0.7, 4), (0.8, 4), (0.9, 2), (0.95, 6)]:
        e = expected_tokens_per_step(a, g)
        expected = knee * (e - g * rho) / (g + 1)
        assert knee / (g + 1) < expected < decode.knee_batch_size(LLAMA_3_2_1B, H100, 0)   # the regime
        assert break_even_batch_size(*PAIR, 0, a, g) == pytest.approx(expected, rel=1e-9)
    assert break_even_batch_size(*PAIR, 0, 0.8, 4) == pytest.approx(173.558, abs=1e-3)


def test_break_even_scales_with_the_knee_at_short_context():
    base = break_even_batch_size(*PAIR, 0, 0.7, 4)
    assert break_even_batch_size(*PAIR, 0, 0.7, 4, mfu=0.5, mbu=0.8) == pytest.approx(base * 0.5 / 0.8)


def test_no_break_even_at_long_context_with_a_small_draft_and_never_a_gain_with_a_big_one():
    assert break_even_batch_size(*PAIR, 2048, 0.8, 4) == math.inf
    assert asymptotic_speedup(*PAIR, 2048, 0.8, 4) > 1
    assert break_even_batch_size(T8, LLAMA_3_2_3B, H100, 256, 0.6, 4) == 0.0
    assert speculative_speedup(T8, LLAMA_3_2_3B, H100, 1, 256, 0.6, 4) <= 1


def test_break_even_broadcasts_like_scalar_calls():
    contexts, alphas = np.array([0, 256, 1024]), np.array([0.6, 0.8])[:, None]
    grid = break_even_batch_size(*PAIR, contexts, alphas, 4)
    assert grid.shape == (2, 3)
    for i, a in enumerate([0.6, 0.8]):
        for j, s in enumerate(contexts):
            assert grid[i, j] == break_even_batch_size(*PAIR, int(s), a, 4)
    tp = break_even_batch_size("Llama-3.1-70B", LLAMA_3_2_1B, H100, 512, 0.7, 4, tensor_parallel=np.array([4, 8]))
    assert tp.shape == (2,)
    assert tp[0] == break_even_batch_size("Llama-3.1-70B", LLAMA_3_2_1B, H100, 512, 0.7, 4, tensor_parallel=4)


def test_asymptotic_speedup_is_the_large_batch_limit():
    for context in [0, 512, 4096]:
        limit = asymptotic_speedup(*PAIR, context, 0.8, 4)
        assert speculative_speedup(*PAIR, 100_000, context, 0.8, 4) == pytest.approx(limit, rel=1e-9)
    # tensor parallelism: the all-reduces grow with the batch too
    limit = asymptotic_speedup("Llama-3.1-70B", LLAMA_3_2_1B, H100, 512, 0.7, 4, tensor_parallel=4)
    far = speculative_speedup("Llama-3.1-70B", LLAMA_3_2_1B, H100, 10**7, 512, 0.7, 4, tensor_parallel=4)
    assert far == pytest.approx(limit, rel=1e-4)


def test_optimal_draft_length():
    gammas = np.arange(1, 17)
    x = speculative_speedup(T8, LLAMA_3_2_1B, H100, 1, 1024, 0.8, gammas)
    assert optimal_num_draft_tokens(T8, LLAMA_3_2_1B, H100, 1, 1024, 0.8) == int(gammas[np.argmax(x)]) == 5
    assert optimal_num_draft_tokens(T8, LLAMA_3_2_1B, H100, 256, 256, 0.8) < 5    # busy: shorter drafts


def _draws():
    return dict(target=st.sampled_from(TARGETS), draft=st.sampled_from(DRAFTS), gpu=st.sampled_from(GPUS),
                context=st.integers(0, 4096), a=st.floats(0.3, 0.99), g=st.integers(1, 8))


@PROPERTY
@given(target=st.sampled_from(TARGETS), gpu=st.sampled_from(GPUS), context=st.integers(0, 4096),
       a=st.floats(0.6, 1.0), g=st.integers(1, 6))
def test_a_cheap_draft_with_decent_acceptance_speeds_up_batch_one(target, gpu, context, a, g):
    name, tp = target
    x = speculative_speedup(name, LLAMA_3_2_1B, gpu, 1, context, a, g, tensor_parallel=tp)
    c = (decode.decode_step_time(LLAMA_3_2_1B, gpu, 1, context, tensor_parallel=tp)
         / decode.decode_step_time(name, gpu, 1, context, tensor_parallel=tp))
    assert c < 0.2            # the 1B draft is cheap next to every target here
    assert x > 1


@PROPERTY
@given(**_draws())
def test_speedup_never_rises_once_both_models_are_past_their_knees(target, draft, gpu, context, a, g):
    name, tp = target
    start = math.ceil(max(decode.knee_batch_size(name, gpu, context), decode.knee_batch_size(draft, gpu, context)))
    batches = np.arange(start, start + 512)
    x = speculative_speedup(name, draft, gpu, batches, context, a, g, tensor_parallel=tp)
    assert np.all(np.diff(x) <= 1e-12 * x[1:])


@PROPERTY
@given(**_draws())
def test_break_even_is_where_the_speedup_first_reaches_one(target, draft, gpu, context, a, g):
    name, tp = target
    n = 1024
    b_e = break_even_batch_size(name, draft, gpu, context, a, g, max_batch_size=n, tensor_parallel=tp)
    x = speculative_speedup(name, draft, gpu, np.arange(1, n + 1), context, a, g, tensor_parallel=tp)
    if b_e == 0.0:
        assert x[0] <= 1
    elif math.isinf(b_e):
        assert np.all(x > 1)
        assert (asymptotic_speedup(name, draft, gpu, context, a, g, tensor_parallel=tp) > 1
                or break_even_batch_size(name, draft, gpu, context, a, g, max_batch_size=8192, tensor_parallel=tp) > n)
    else:
        assert 1 < b_e <= n
        lo, hi = math.floor(b_e), math.ceil(b_e)
        assert x[hi - 1] <= 1 + 1e-12                        # the first batch at or past B_e loses
        assert np.all(x[:lo - 1] > 1)                         # every batch below it gains
        assert x[lo - 1] >= 1 - 1e-12


@PROPERTY
@given(a=st.floats(0.5, 0.99), g=st.integers(1, 8), da=st.floats(0.01, 0.3))
def test_break_even_grows_with_acceptance_and_shrinks_with_draft_size_at_short_context(a, g, da):
    b = min(a + da, 0.995)
    low, high = break_even_batch_size(*PAIR, 0, a, g), break_even_batch_size(*PAIR, 0, b, g)
    assume(np.isfinite(high) and low > 0)
    assert high > low
    assert break_even_batch_size(T8, LLAMA_3_2_3B, H100, 0, a, g) < low


# ---- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [1.2, -0.1, float("nan"), "0.7", None])
def test_bad_acceptance_rate_is_rejected_by_name(bad):
    with pytest.raises(ValueError, match="acceptance_rate"):
        expected_tokens_per_step(bad, 4)
    with pytest.raises(ValueError, match="acceptance_rate"):
        speculative_speedup(*PAIR, 1, 0, bad, 4)


@pytest.mark.parametrize("bad", [0, 2.5, -1, True])
def test_bad_draft_length_is_rejected_by_name(bad):
    with pytest.raises(ValueError, match="num_draft_tokens"):
        expected_tokens_per_step(0.7, bad)
    with pytest.raises(ValueError, match="num_draft_tokens"):
        break_even_batch_size(*PAIR, 0, 0.7, bad)


def test_other_bad_inputs_name_the_parameter():
    with pytest.raises(KeyError, match="Llama-3.1-8B"):
        speculative_speedup("Llama-3.1-8", LLAMA_3_2_1B, H100, 1, 0, 0.7, 4)
    with pytest.raises(ValueError, match="overlap"):
        speculative_step_time(*PAIR, 1, 0, 4, overlap="perfect")
    with pytest.raises(ValueError, match="max_batch_size"):
        break_even_batch_size(*PAIR, 0, 0.7, 4, max_batch_size=1)
    with pytest.raises(ValueError, match="batch_size"):
        speculative_speedup(*PAIR, 0, 0, 0.7, 4)
    with pytest.raises(ValueError, match="context_len"):
        verification_step_time(T8, H100, 1, -5, 4)
    with pytest.raises(ValueError, match="batch_size must be a single number"):
        optimal_num_draft_tokens(*PAIR, [1, 2], 0, 0.7)
    with pytest.raises(ValueError, match="tokens_per_step"):
        acceptance_rate_from_tokens_per_step(6.0, 4)
    with pytest.raises(ValueError, match="tokens_per_step"):
        acceptance_rate_from_tokens_per_step(0.5, 4)
    with pytest.raises(ValueError, match="cost_ratio"):
        ideal_speedup(0.7, 4, -0.1)
