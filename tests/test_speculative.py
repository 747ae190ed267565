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

from servingmath import decode, hardware, models, parallelism
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
def _step_from_shapes(model, gpu, tokens, kv_tokens, pairs, logits, mfu=1.0, mbu=1.0):
    """Hybrid step time of a dense bf16 model on one GPU from its shapes and the spec sheet.

    Weights read: every parameter but the input-embedding table (tied: the shared matrix, as the LM
    head), plus the T rows gathered; matmuls 2 (P_mm - V D) T + 2 V D Z; attention 4 L H d_h Y;
    KV X x 2 L K d_h b (CORE_CHANGES 1 and 4). Peaks from the catalog (NVIDIA datasheets).
    """
    m, acc = models.get_model(model), hardware.get_accelerator(gpu)
    w, f = acc.memory_bandwidth * mbu, acc.peak_flops("bf16") * mfu
    vd = m.vocab_size * m.hidden_size
    weights = (models.parameter_count(m) - (0 if m.tied_embeddings else vd) + tokens * m.hidden_size) * 2
    linear = 2 * (decode.matmul_parameter_count(m) - vd) * tokens + 2 * vd * logits
    attention = 4 * m.n_layers * m.n_heads * m.head_dim * pairs
    kv = kv_tokens * models.kv_bytes_per_token(m)
    return np.maximum(weights / w, linear / f) + np.maximum(kv / w, attention / f)


def _plain_counts(b, s):
    """(T, X, Y, Z) of a decode step of B sequences at context S."""
    return b, b * s, b * s, b


def _verify_counts(b, s, g):
    """(T, X, Y, Z) of a verification: gamma + 1 new tokens after c = max(S - 1, 0) cached, logits at each."""
    c = np.maximum(np.asarray(s) - 1, 0)
    g1 = g + 1
    return b * g1, b * (g1 + c), b * (g1 * c + g1 * (g1 + 1) / 2), b * g1


@pytest.mark.parametrize("context", [0, 512, 4096])
def test_verification_at_batch_one_costs_one_plain_step(context):
    # one plain step, plus the gamma extra KV entries written and embedding rows gathered (gamma + 1 KV
    # entries at S = 0, where a plain step has none): 0.01 % of the step
    m = models.get_model(T8)
    for g in [1, 4, 8]:
        verify = verification_step_time(T8, H100, 1, context, g)
        plain = decode.decode_step_time(T8, H100, 1, context)
        assert verify == pytest.approx(_step_from_shapes(T8, H100, *_verify_counts(1, context, g)), rel=1e-12)
        assert plain == pytest.approx(_step_from_shapes(T8, H100, *_plain_counts(1, context)), rel=1e-12)
        extra = (g * m.hidden_size * 2 + (g + (context == 0)) * models.kv_bytes_per_token(m)) / 3.35e12
        assert verify - plain == pytest.approx(extra, rel=1e-6)
        assert 1 < verify / plain < 1.001


def test_verification_reads_weights_and_caches_once_and_multiplies_the_flops():
    m = models.get_model(T8)
    w, f = 3.35e12, 989.4e12
    plain = decode.decode_step_parts(T8, H100, 64, 1024)
    verify = verification_step_parts(T8, H100, 64, 1024, 4)
    # the weights once, plus the 4 x 64 extra embedding rows gathered
    assert verify["weight_memory"] - plain["weight_memory"] == pytest.approx(4 * 64 * m.hidden_size * 2 / w)
    # each cache once (S - 1 cached read), plus the gamma + 1 new entries written
    k = models.kv_bytes_per_token(m)
    assert verify["kv_memory"] == pytest.approx(64 * (1023 + 5) * k / w, rel=1e-12)
    assert plain["kv_memory"] == pytest.approx(64 * 1024 * k / w, rel=1e-12)
    # the matmuls and the LM head at 5 positions per sequence
    assert verify["linear_compute"] == pytest.approx(5 * plain["linear_compute"], rel=1e-12)
    # attention: 5 S pairs plus the causal triangle gamma (gamma + 1) / 2 = 10 among the new positions
    per_pair = 4 * m.n_layers * m.n_heads * m.head_dim / f
    assert verify["attention_compute"] == pytest.approx(64 * (5 * 1024 + 10) * per_pair, rel=1e-12)
    assert verify["attention_compute"] == pytest.approx(plain["attention_compute"] * (5 + 10 / 1024), rel=1e-12)
    # 5 x 64 = 320 positions: past the knee (the ridge, 295.3), the matmuls set the time
    assert decode.knee_batch_size(T8, H100, 0) < 320
    assert verification_step_time(T8, H100, 64, 1024, 4) == pytest.approx(
        verify["linear_compute"] + verify["kv_memory"], rel=1e-12)


def test_verification_all_reduces_carry_every_position():
    parts = verification_step_parts("Llama-3.1-70B", H100, 32, 512, 4, tensor_parallel=4)
    expected = parallelism.tensor_parallel_communication_time("Llama-3.1-70B", H100, 5 * 32, tensor_parallel=4)
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
    # E x T_target / (gamma T_draft + T_verify), each step from the shapes; Leviathan et al.'s E / (gamma c + 1)
    # holds to 0.1 % (the verification costs one plain step up to its gamma KV writes and embedding rows)
    for target, draft, gpu in [PAIR, (T8, LLAMA_3_2_3B, "A100-SXM4-80GB"), ("Llama-3.1-70B", T8, "H200")]:
        for context in [0, 1024]:
            t_target = _step_from_shapes(target, gpu, *_plain_counts(1, context))
            t_draft = _step_from_shapes(draft, gpu, *_plain_counts(1, context))
            c = decode.decode_step_time(draft, gpu, 1, context) / decode.decode_step_time(target, gpu, 1, context)
            assert c == pytest.approx(t_draft / t_target, rel=1e-12)
            for a, g in [(0.6, 2), (0.8, 4), (0.9, 8)]:
                t_verify = _step_from_shapes(target, gpu, *_verify_counts(1, context, g))
                x = speculative_speedup(target, draft, gpu, 1, context, a, g)
                e = expected_tokens_per_step(a, g)
                assert x == pytest.approx(e * t_target / (g * t_draft + t_verify), rel=1e-12)
                assert ideal_speedup(a, g, c) == pytest.approx(e / (g * c + 1))
                assert x == pytest.approx(ideal_speedup(a, g, c), rel=1e-3)
                assert x < ideal_speedup(a, g, c)


def test_known_speedups_of_the_running_example():
    # Llama-3.1-8B + Llama-3.2-1B on an H100, 256 tokens of context, alpha 0.8, gamma 4: every step from
    # the shapes (about 2.03, 1.89 and 0.86)
    b, s, a, g = np.array([1, 64, 256]), 256, 0.8, 4
    x = speculative_speedup(*PAIR, b, s, a, g)
    plain = _step_from_shapes(T8, H100, *_plain_counts(b, s))
    draft = _step_from_shapes(LLAMA_3_2_1B, H100, *_plain_counts(b, s))
    verify = _step_from_shapes(T8, H100, *_verify_counts(b, s, g))
    np.testing.assert_allclose(x, expected_tokens_per_step(a, g) * plain / (g * draft + verify), rtol=1e-12)
    assert x[0] > 2 and 1 < x[1] < x[0] and x[2] < 1      # a gain that shrinks, then a loss


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
    # the simulator runs the verification of the step model and draft step j at context S + j: exactly
    exact = (verification_step_time(T8, H100, batch, contexts, g)
             + sum(decode.decode_step_time(LLAMA_3_2_1B, H100, batch, contexts + j) for j in range(g)))
    assert tpot == pytest.approx(exact.sum() / (out - 1), rel=1e-9)
    # the analytic step keeps every draft step at context S (the draft's growth within a step neglected)
    model = speculative_step_time(*PAIR, batch, contexts, g).sum() / (out - 1)
    assert tpot == pytest.approx(model, rel=5e-3)
    assert tpot >= model


# ---- the break-even batch -----------------------------------------------------------------------
def _break_even_at_zero_context(a, g, mfu=1.0, mbu=1.0):
    """B_e at S = 0 on one H100 from the shapes, with the plain step and the draft memory-bound and the
    verification compute-bound: E (w_t + B r_t) = gamma (w_d + B r_d) + (gamma + 1) B (c_t + k_t / W), i.e.
    B_e = (E w_t - gamma w_d) / ((gamma + 1) (c_t + k_t / W) + gamma r_d - E r_t), with w the weights each
    step reads (the target's without its embedding table, the tied draft's whole matrix), r = D b / W the row
    a sequence gathers, c_t = 2 P_mm / F and k_t / W one KV entry written (the verification writes gamma + 1)."""
    t, d = models.get_model(T8), models.get_model(LLAMA_3_2_1B)
    w, f = 3.35e12 * mbu, 989.4e12 * mfu
    assert d.tied_embeddings and not t.tied_embeddings
    w_t = (models.parameter_count(t) - t.vocab_size * t.hidden_size) * 2 / w
    w_d = models.parameter_count(d) * 2 / w
    r_t, r_d = t.hidden_size * 2 / w, d.hidden_size * 2 / w
    c_t = 2 * decode.matmul_parameter_count(t) / f
    k_t = models.kv_bytes_per_token(t) / w
    e = expected_tokens_per_step(a, g)
    return (e * w_t - g * w_d) / ((g + 1) * (c_t + k_t) + g * r_d - e * r_t), w_d / w_t


def test_break_even_at_short_context_is_the_closed_form():
    knee = decode.knee_batch_size(T8, H100, 0)
    t = models.get_model(T8)
    # the verification's attention (gamma + 2) / 2 pairs per new token stays under its KV writes
    assert 4 * t.n_layers * t.n_heads * t.head_dim * 4 / 989.4e12 < models.kv_bytes_per_token(t) / 3.35e12
    for a, g in [(0.7, 4), (0.8, 4), (0.9, 2), (0.95, 6)]:
        expected, rho = _break_even_at_zero_context(a, g)
        assert knee / (g + 1) < expected < decode.knee_batch_size(LLAMA_3_2_1B, H100, 0)   # the regime
        assert break_even_batch_size(*PAIR, 0, a, g) == pytest.approx(expected, rel=1e-9)
        # to leading order the chapter's B* (E - gamma rho) / (gamma + 1), rho = the ratio of weights read
        e = expected_tokens_per_step(a, g)
        assert break_even_batch_size(*PAIR, 0, a, g) == pytest.approx(knee * (e - g * rho) / (g + 1), rel=1e-2)


def test_break_even_scales_with_the_knee_at_short_context():
    base = break_even_batch_size(*PAIR, 0, 0.7, 4)
    slow = break_even_batch_size(*PAIR, 0, 0.7, 4, mfu=0.5, mbu=0.8)
    assert slow == pytest.approx(_break_even_at_zero_context(0.7, 4, mfu=0.5, mbu=0.8)[0], rel=1e-9)
    # the knee scales by MFU / MBU; the KV writes and gathered rows (0.3 %) scale with MBU alone
    assert slow == pytest.approx(base * 0.5 / 0.8, rel=1e-2)


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
    best = optimal_num_draft_tokens(T8, LLAMA_3_2_1B, H100, 1, 1024, 0.8)
    assert best == int(gammas[np.argmax(x)])
    # at batch 1 it maximises Leviathan et al.'s E(gamma) / (gamma c + 1), c from the two step times
    c = decode.decode_step_time(LLAMA_3_2_1B, H100, 1, 1024) / decode.decode_step_time(T8, H100, 1, 1024)
    assert best == int(gammas[np.argmax(ideal_speedup(0.8, gammas, c))])
    assert 1 < best < 16
    assert optimal_num_draft_tokens(T8, LLAMA_3_2_1B, H100, 256, 256, 0.8) < best    # busy: shorter drafts


def _draws():
    return dict(target=st.sampled_from(TARGETS), draft=st.sampled_from(DRAFTS), gpu=st.sampled_from(GPUS),
                context=st.integers(0, 4096), a=st.floats(0.3, 0.99), g=st.integers(1, 8))


@PROPERTY
@given(target=st.sampled_from(TARGETS), gpu=st.sampled_from(GPUS), context=st.integers(0, 4096),
       a=st.floats(0.6, 1.0), g=st.integers(1, 6))
def test_a_cheap_draft_with_decent_acceptance_speeds_up_batch_one(target, gpu, context, a, g):
    name, tp = target
    assume(context + g <= models.get_model(name).max_context_len)   # the verification fills S + gamma positions
    x = speculative_speedup(name, LLAMA_3_2_1B, gpu, 1, context, a, g, tensor_parallel=tp)
    c = (decode.decode_step_time(LLAMA_3_2_1B, gpu, 1, context, tensor_parallel=tp)
         / decode.decode_step_time(name, gpu, 1, context, tensor_parallel=tp))
    assert c < 0.2            # the 1B draft is cheap next to every target here
    assert x > 1


@PROPERTY
@given(**_draws())
def test_speedup_never_rises_once_both_models_are_past_their_knees(target, draft, gpu, context, a, g):
    name, tp = target
    assume(context + g <= models.get_model(name).max_context_len)   # S + gamma positions must fit
    start = math.ceil(max(decode.knee_batch_size(name, gpu, context), decode.knee_batch_size(draft, gpu, context)))
    batches = np.arange(start, start + 512)
    x = speculative_speedup(name, draft, gpu, batches, context, a, g, tensor_parallel=tp)
    assert np.all(np.diff(x) <= 1e-12 * x[1:])


@PROPERTY
@given(**_draws())
def test_break_even_is_where_the_speedup_first_reaches_one(target, draft, gpu, context, a, g):
    name, tp = target
    assume(context + g <= models.get_model(name).max_context_len)   # S + gamma positions must fit
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
    with pytest.raises(ValueError, match="context_len must be >= 0, got -5"):
        verification_step_time(T8, H100, 1, -5, 4)
    with pytest.raises(ValueError, match="context_len must be >= 0, got -5"):
        verification_step_parts(T8, H100, 1, -5, 4)
    with pytest.raises(ValueError, match="context_len = 200000 exceeds Llama-3.1-8B's maximum context"):
        verification_step_time(T8, H100, 1, 200_000, 4)
    # the verification writes gamma more KV entries: S + gamma must fit in the model's context (Llama-2: 4096)
    with pytest.raises(ValueError, match=r"context_len \+ num_draft_tokens .* = 4097 exceeds Llama-2-13B's "
                                         "maximum context of 4096"):
        speculative_speedup("Llama-2-13B", LLAMA_3_2_1B, H100, 1, 4091, 0.8, 6)
    assert verification_step_time("Llama-2-13B", H100, 1, 4090, 6) > 0
    with pytest.raises(ValueError, match="batch_size must be a single number"):
        optimal_num_draft_tokens(*PAIR, [1, 2], 0, 0.7)
    with pytest.raises(ValueError, match="tokens_per_step"):
        acceptance_rate_from_tokens_per_step(6.0, 4)
    with pytest.raises(ValueError, match="tokens_per_step"):
        acceptance_rate_from_tokens_per_step(0.5, 4)
    with pytest.raises(ValueError, match="cost_ratio"):
        ideal_speedup(0.7, 4, -0.1)
