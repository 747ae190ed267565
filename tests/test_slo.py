"""SLOs and goodput: B_SLO closed form against the numeric search, monotonicity in tau, the
queueing formulas, the steady-state model (Little's law), goodput definitions and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from servingmath import queueing
from servingmath import slo
from servingmath.decode import decode_step_time
from servingmath.prefill import prefill_time

DENSE = ["Llama-3.1-8B", "Llama-3.1-70B", "Llama-2-7B", "Qwen2.5-7B"]
configs = st.fixed_dictionaries({
    "model": st.sampled_from(DENSE),
    "accelerator": st.sampled_from(["H100", "A100", "L40S", "H200"]),
    "context_len": st.sampled_from([0, 128, 1024, 4000]),
    "overlap": st.sampled_from(["hybrid", "additive", "roofline"]),
    "tensor_parallel": st.sampled_from([1, 2, 4]),
    "allreduce_latency": st.sampled_from([0.0, 5e-6]),
    "kv_dtype": st.sampled_from(["bf16", "fp8"]),
})


def _split(cfg):
    cfg = dict(cfg)
    return cfg.pop("model"), cfg.pop("accelerator"), cfg.pop("context_len"), cfg


@settings(max_examples=60, deadline=None)
@given(configs)
def test_the_pieces_reproduce_the_step_time(cfg):
    model, acc, s, kw = _split(cfg)
    overlap = kw.pop("overlap")
    alpha, beta = slo.step_time_pieces(model, acc, s, overlap=overlap, **kw)
    b = np.array([1, 2, 3, 17, 100, 999, 4096])
    t = decode_step_time(model, acc, b, s, overlap=overlap, **kw)
    np.testing.assert_allclose((alpha[None, :] + beta[None, :] * b[:, None]).max(axis=1), t, rtol=1e-9)


@settings(max_examples=60, deadline=None)
@given(configs, st.floats(1e-3, 0.5))
def test_closed_form_and_numeric_search_agree_and_meet_the_definition(cfg, tau):
    model, acc, s, kw = _split(cfg)
    closed = slo.max_batch_for_tpot(model, acc, s, tpot_slo=tau, method="closed_form", **kw)
    numeric = slo.max_batch_for_tpot(model, acc, s, tpot_slo=tau, method="numeric", max_batch=1 << 16, **kw)
    closed = min(closed, 1 << 16)
    if closed != numeric:   # only possible when T(B) lands on tau to rounding
        edge = max(closed, numeric)
        assert decode_step_time(model, acc, edge, s, **kw) == pytest.approx(tau, rel=1e-9)
        return
    b = closed
    if 0 < b < 1 << 16:
        assert decode_step_time(model, acc, b, s, **kw) <= tau
        assert decode_step_time(model, acc, b + 1, s, **kw) > tau
    if b == 0:
        assert decode_step_time(model, acc, 1, s, **kw) > tau


@settings(max_examples=60, deadline=None)
@given(configs, st.lists(st.floats(1e-3, 1.0), min_size=2, max_size=8))
def test_b_slo_is_non_decreasing_in_tau(cfg, taus):
    model, acc, s, kw = _split(cfg)
    taus = np.sort(np.array(taus))
    for method in ("closed_form", "numeric"):
        b = slo.max_batch_for_tpot(model, acc, s, tpot_slo=taus, method=method, max_batch=20000, **kw)
        assert np.all(np.diff(b) >= 0), (method, taus, b)


def llama31_8b_a100_bound(tau, s):
    """B* = min((tau - T_w) / (g + m_kv), tau / (c_lin + m_kv)) of the hybrid model, attention bandwidth-bound,
    from Llama-3.1-8B's config.json (32 layers, 8 KV heads of 128, D = 4096, V = 128256, 8,030,261,248
    parameters, untied) and the A100-SXM4-80GB datasheet (312 TFLOP/s dense bf16, 2.039 TB/s).
    T_w: every weight but the embedding table; g: the row each sequence gathers; m_kv: its KV read."""
    f, w = 312e12, 2.039e12
    p, v, d = 8_030_261_248, 128_256, 4_096
    t_w = (p - v * d) * 2 / w
    g = d * 2 / w
    m_kv = s * 2 * 32 * 8 * 128 * 2 / w
    c_lin = 2 * (p - v * d) / f
    assert 4 * 32 * 32 * 128 * s / f < m_kv      # attention's math hides under its KV read
    return min((tau - t_w) / (g + m_kv), tau / (c_lin + m_kv))


def test_known_values_and_the_memory_cap():
    m, a = "Llama-3.1-8B", "A100"
    for tau in (0.030, 0.050):
        assert slo.tpot_batch_bound(m, a, 2048, tpot_slo=tau) == pytest.approx(
            llama31_8b_a100_bound(tau, 2048), rel=1e-12)
        assert slo.max_batch_for_tpot(m, a, 2048, tpot_slo=tau) == math.floor(llama31_8b_a100_bound(tau, 2048))
    assert slo.max_batch_for_tpot(m, a, 2048, tpot_slo=0.030) == 166
    assert slo.max_batch_for_tpot(m, a, 2048, tpot_slo=0.050) == 278
    assert slo.max_batch_for_tpot(m, a, 2048, tpot_slo=0.050, max_batch=200) == 200
    assert slo.max_batch_for_tpot(m, a, 2048, tpot_slo=0.001) == 0   # T(1) = 7.5 ms > 1 ms
    assert slo.tpot_batch_bound(m, a, 2048, tpot_slo=0.001) < 1
    # the same bound from the library's own step parts at B = 1 and 2 (g = the difference of the weight reads)
    from servingmath.decode import decode_step_parts
    p1, p2 = (decode_step_parts(m, a, b, 2048) for b in (1, 2))
    g = p2["weight_memory"] - p1["weight_memory"]
    tau = 0.030
    want = min((tau - (p1["weight_memory"] - g)) / (g + p1["kv_memory"]),
               tau / (p1["linear_compute"] + p1["kv_memory"]))
    assert slo.tpot_batch_bound(m, a, 2048, tpot_slo=tau) == pytest.approx(float(want), rel=1e-9)


def test_mixture_of_experts_needs_the_numeric_search():
    with pytest.raises(ValueError, match="mixture of experts"):
        slo.step_time_pieces("Mixtral-8x7B", "H100", 2048)
    with pytest.raises(ValueError, match="numeric"):
        slo.max_batch_for_tpot("Mixtral-8x7B", "H100", 2048, tpot_slo=0.05, method="closed_form")
    b = slo.max_batch_for_tpot("Mixtral-8x7B", "H100", 2048, tpot_slo=0.05, max_batch=4096)
    assert decode_step_time("Mixtral-8x7B", "H100", b, 2048) <= 0.05 < \
        decode_step_time("Mixtral-8x7B", "H100", b + 1, 2048)


@pytest.mark.parametrize("call, message", [
    (lambda: slo.max_batch_for_tpot("Llama-3.1-8B", "H100", 1024, tpot_slo=0), "tpot_slo must be > 0"),
    (lambda: slo.max_batch_for_tpot("Llama-3.1-8B", "H100", 1024, tpot_slo=0.05, method="exact"), "method"),
    (lambda: slo.max_batch_for_tpot("Llama-3.1-8B", "H100", 1024, tpot_slo=0.05, max_batch=-1), "max_batch"),
    (lambda: slo.step_time_pieces("Llama-3.1-8B", "H100", [1, 2]), "context_len must be a single"),
    (lambda: slo.max_batch_for_tpot("Llama-9B", "H100", 1024, tpot_slo=0.05), "model"),
    (lambda: slo.max_batch_for_tpot(0.05, "Llama-3.1-8B", "H100", 1024), "unknown model 0.05"),   # old order
    (lambda: slo.steady_state("Llama-3.1-8B", "H100", 8, 512, 1), "output_len"),
    (lambda: slo.steady_state("Llama-3.1-8B", "H100", 8, 512, 64, tp=2),
     r"steady_state\(\) got an unexpected keyword argument 'tp'\. Allowed: .*tensor_parallel"),
    (lambda: slo.tpot_batch_bound("Llama-3.1-8B", "H100", 1024, tpot=0.05),
     "unexpected keyword argument 'tpot'. Did you mean 'tpot_slo'"),
    (lambda: slo.max_batch_for_slos("Llama-3.1-8B", "H100", 512, 64, ttft_statistic="p50"), "ttft_statistic"),
])
def test_bad_input_is_named(call, message):
    with pytest.raises((ValueError, KeyError, TypeError), match=message):
        call()


# ---------------------------------------------------------------- queueing

def test_the_replica_model_waits_as_the_queueing_modules_md1_and_mg1_queues():
    # slo.py no longer has its own md1_mean_wait: the replica model's mean wait is Pollaczek-Khinchine,
    # which servingmath.queueing tests on its own (M/D/1 for one prompt length, M/G/1 for a mix)
    b = np.array([1, 8, 64, 256])
    one = slo.replica_steady_state("Llama-3.1-8B", "H100", b, 2048, 256)
    t_p = prefill_time("Llama-3.1-8B", "H100", 2048)
    np.testing.assert_allclose(one["mean_wait"], queueing.md1_mean_wait(one["rate"], t_p), rtol=1e-12)
    np.testing.assert_allclose(one["mean_wait"], 0.5 * one["utilisation"] * t_p / (1 - one["utilisation"]),
                               rtol=1e-12)
    lp = np.array([256, 1024, 4096, 1024])
    mix = slo.replica_steady_state("Llama-3.1-8B", "H100", b, lp, [64, 512, 128, 256])
    tp = prefill_time("Llama-3.1-8B", "H100", lp)
    np.testing.assert_allclose(mix["mean_wait"], queueing.mg1_mean_wait(mix["rate"], tp.mean(), tp.std()),
                               rtol=1e-9)
    np.testing.assert_allclose(mix["ttft"], tp.mean() + mix["mean_wait"], rtol=1e-12)


@settings(max_examples=50, deadline=None)
@given(st.floats(0.05, 0.95), st.floats(1e-3, 1.0))
def test_wait_quantiles_average_to_the_mean_wait(rho, mean_wait):
    q = (np.arange(200_000) + 0.5) / 200_000
    w = slo.wait_quantile(q, rho, mean_wait)
    assert np.mean(w) == pytest.approx(mean_wait, rel=2e-3)
    assert np.all(np.diff(w) >= 0)
    assert np.mean(w > 0) == pytest.approx(rho, abs=1e-4)


# ---------------------------------------------------------------- the steady-state model

@settings(max_examples=40, deadline=None)
@given(st.sampled_from(DENSE), st.sampled_from(["H100", "A100"]), st.integers(16, 3000),
       st.integers(2, 1000))
def test_steady_state_obeys_littles_law_and_grows_with_the_batch(model, acc, lp, lo):
    b = np.array([1, 4, 16, 64, 256])
    st_ = slo.steady_state(model, acc, b, lp, lo)
    # Little: sequences decoding = rate x (L_o - 1) x TPOT
    np.testing.assert_allclose(b, st_["rate"] * (lo - 1) * st_["tpot"], rtol=1e-9)
    assert np.all(st_["utilisation"] < 1)
    for key in ("rate", "tpot", "ttft", "ttft_p99", "throughput"):
        assert np.all(np.diff(st_[key]) >= 0), key
    np.testing.assert_allclose(st_["ttft"], st_["prefill_time"]
                               + queueing.md1_mean_wait(st_["rate"], st_["prefill_time"][0]), rtol=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(DENSE + ["Mixtral-8x7B", "Mistral-7B"]), st.sampled_from(["H100", "A100"]),
       st.integers(1, 3000), st.integers(2, 1001), st.sampled_from([{}, {"tensor_parallel": 2, "mbu": 0.7}]))
def test_steady_state_is_replica_steady_state_for_fixed_lengths(model, acc, lp, lo, options):
    # one replica model: for one prompt and one output length (odd L_o included, whose mean context
    # L_p + L_o / 2 is a half token) steady_state is replica_steady_state, key by key
    b = np.array([1, 3, 32, 200])
    ours = slo.steady_state(model, acc, b, lp, lo, **options)
    theirs = slo.replica_steady_state(model, acc, b, lp, lo, **options)
    assert theirs["decode_context"] == round(lp + lo / 2) == round(slo.decode_context(lp, lo))
    for key in ("rate", "utilisation", "tpot", "ttft", "throughput", "step_time"):
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-12, err_msg=key)
    np.testing.assert_allclose(ours["ttft_p99"], theirs["ttft_quantile"], rtol=1e-12)
    np.testing.assert_allclose(ours["prefill_time"], theirs["prefill_mean"], rtol=1e-12)
    np.testing.assert_allclose(ours["step_time"], decode_step_time(model, acc, b, theirs["decode_context"],
                                                                   **options), rtol=1e-12)


def test_steady_state_with_an_odd_output_length_decodes_at_the_rounded_mean_context():
    # regression: steady_state used L_p + L_o // 2 (1101 here) while replica_steady_state used
    # round(L_p + L_o / 2) = round(1101.5) = 1102, so "the one replica model" gave two step times
    b = np.array([1, 64])
    ours = slo.steady_state("Llama-3.1-8B", "H100", b, 1000, 203)
    np.testing.assert_allclose(ours["step_time"], decode_step_time("Llama-3.1-8B", "H100", b, 1102), rtol=1e-12)
    r = slo.max_batch_for_slos("Llama-3.1-8B", "H100", 1000, 203, tpot_slo=0.02, ttft_slo=1.0)
    np.testing.assert_allclose(r["step_time"], decode_step_time("Llama-3.1-8B", "H100", r["batch_size"], 1102),
                               rtol=1e-12)


@pytest.mark.parametrize("model, acc, options", [("Llama-3.1-8B", "H100", {}),
                                                 ("Llama-3.1-70B", "H100", {"tensor_parallel": 4, "mfu": 0.6}),
                                                 ("Mistral-7B", "A100", {"weight_dtype": "fp8"})])
def test_replica_curves_and_request_latencies_use_the_replica_model(model, acc, options):
    # capacity.replica_curves and slo.request_latencies are replica_steady_state at the workload's
    # length-biased mean decode context (decode_context), for a mix of lengths
    from servingmath.capacity import replica_curves
    rng = np.random.default_rng(11)
    lp, lo = rng.integers(64, 3000, 300), rng.integers(2, 900, 300)
    b = np.arange(1, 41)
    state = slo.replica_steady_state(model, acc, b, lp, lo, **options)
    assert state["decode_context"] == round(slo.decode_context(lp, lo))
    assert slo.decode_context(lp, lo) > lp.mean() + lo.mean() / 2      # length-biased: long answers count more
    curves = replica_curves(model, acc, lp, lo, b, compute_dtype="bf16", **options)
    for ours, theirs in [("rate", "rate"), ("tpot", "tpot"), ("ttft", "ttft_quantile"), ("step_time", "step_time"),
                         ("utilisation", "utilisation"), ("mean_wait", "mean_wait")]:
        np.testing.assert_allclose(curves[ours], state[theirs], rtol=1e-12, err_msg=ours)
    assert curves["decode_context"] == state["decode_context"]
    # request_latencies at the rate the replica model gives a whole batch B finds that batch and its TPOT
    pick = np.array([0, 9, 39])
    r = slo.request_latencies(model, acc, state["rate"][pick], lp, lo, **options)
    np.testing.assert_allclose(r["batch_size"], b[pick], rtol=1e-9)
    np.testing.assert_allclose(r["tpot"][:, 0], state["tpot"][pick], rtol=1e-9)
    np.testing.assert_allclose(r["utilisation"], state["utilisation"][pick], rtol=1e-12)


def test_max_batch_for_slos_meets_the_targets_and_names_the_binding_limit():
    r = slo.max_batch_for_slos("Llama-3.1-8B", "H100", 8192, 128, tpot_slo=0.05, ttft_slo=1.0)
    assert r["binding"] == "ttft" and r["batch_size"] == r["ttft_limit"] < r["tpot_limit"]
    assert r["tpot"] <= 0.05 and r["ttft_p99"] <= 1.0
    above = slo.steady_state("Llama-3.1-8B", "H100", r["batch_size"] + 1, 8192, 128)
    assert above["ttft_p99"] > 1.0
    chat = slo.max_batch_for_slos("Llama-3.1-8B", "A100", 512, 256, tpot_slo=0.05, ttft_slo=1.0)
    assert chat["binding"] == "tpot"
    loose = slo.max_batch_for_slos("Llama-3.1-8B", "H100", 2048, 256, tpot_slo=1.0)
    assert loose["binding"] == "memory" and loose["batch_size"] == loose["memory_limit"]


def test_request_latencies_are_consistent_with_their_model():
    rng = np.random.default_rng(3)
    lp = rng.integers(100, 3000, 4000)
    lo = rng.integers(2, 600, 4000)
    rates = np.array([1.0, 4.0, 8.0, 1e4])
    r = slo.request_latencies("Llama-3.1-8B", "H100", rates, lp, lo)
    tp = prefill_time("Llama-3.1-8B", "H100", lp)
    ok = r["stable"]
    assert ok.tolist() == [True, True, True, False] and np.all(np.isinf(r["ttft"][~ok]))
    wait = queueing.mg1_mean_wait(rates[ok], tp.mean(), tp.std())
    np.testing.assert_allclose((r["ttft"][ok] - tp).mean(axis=1), wait, rtol=0.1)
    # Little's law for the decode phase
    np.testing.assert_allclose(r["batch_size"][ok], rates[ok] * (lo.mean() - 1) * r["tpot"][ok, 0], rtol=1e-6)
    # the same uniform numbers at every rate: each request's latency grows with the rate
    assert np.all(np.diff(r["ttft"][ok], axis=0) >= 0) and np.all(np.diff(r["tpot"][ok], axis=0) >= 0)
    np.testing.assert_allclose(r["duration"], lp.size / rates)
    assert r["max_rate"] < 1e4


# ---------------------------------------------------------------- goodput

def test_goodput_follows_vllms_rules():
    ttft = [0.2, 0.5, 0.9, 0.1]
    tpot = [0.02, 0.05, 0.02, 0.0]          # equality counts as met; a one-token request has TPOT 0
    assert slo.meets_slo(ttft, tpot, ttft_slo=0.5, tpot_slo=0.05).tolist() == [True, True, False, True]
    assert slo.request_goodput(ttft, tpot, 2.0, ttft_slo=0.5, tpot_slo=0.05) == 1.5
    assert slo.request_goodput(ttft, tpot, 2.0, ttft_slo=0.5, tpot_slo=0.05, n_gpus=3) == 0.5
    assert slo.request_goodput(ttft, tpot, 2.0, tpot_slo=0.04) == 1.5          # TTFT unchecked
    assert slo.slo_attainment(ttft, tpot, ttft_slo=0.5, tpot_slo=0.05) == 0.75
    assert slo.token_goodput([10, 20, 30, 1], ttft, tpot, 1.0, ttft_slo=0.5) == 31.0
    e2el = [1.0, 3.0, 2.0, 0.1]
    assert slo.request_goodput(ttft, tpot, 1.0, e2el=e2el, e2el_slo=2.0) == 3.0
    assert slo.meets_slo([math.inf, 0.1], ttft_slo=1.0).tolist() == [False, True]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 10), st.floats(0, 1)), min_size=1, max_size=50),
       st.floats(0.01, 10), st.floats(0.001, 1), st.floats(0.1, 100), st.integers(1, 8))
def test_goodput_never_exceeds_throughput(reqs, ttft_slo, tpot_slo, duration, n_gpus):
    ttft = [r[0] for r in reqs]
    tpot = [r[1] for r in reqs]
    good = slo.request_goodput(ttft, tpot, duration, ttft_slo=ttft_slo, tpot_slo=tpot_slo, n_gpus=n_gpus)
    assert 0 <= good <= slo.request_throughput(len(reqs), duration, n_gpus) + 1e-12
    tighter = slo.request_goodput(ttft, tpot, duration, ttft_slo=ttft_slo / 2, tpot_slo=tpot_slo,
                                  n_gpus=n_gpus)
    assert tighter <= good


def test_distserve_goodput():
    rates = [1, 2, 3, 4, 5, 6]
    att = [1.0, 0.98, 0.95, 0.91, 0.85, 0.6]
    assert slo.distserve_goodput(rates, att, interpolate=False) == 4
    assert slo.distserve_goodput(rates, att) == pytest.approx(4 + 0.01 / 0.06)
    assert slo.distserve_goodput(rates, att, interpolate=False, n_gpus=2) == 2
    assert slo.distserve_goodput(rates[::-1], att[::-1], interpolate=False) == 4     # any order
    assert slo.distserve_goodput(rates, [0.5] * 6) == 0.0
    assert slo.distserve_goodput(rates, [1.0] * 6) == 6
    # a rate above the first miss that meets the goal again does not count
    assert slo.distserve_goodput([1, 2, 3], [0.95, 0.8, 0.93], interpolate=False) == 1
    assert slo.distserve_goodput(rates, att, target=0.5, interpolate=False) == 6


@pytest.mark.parametrize("call, message", [
    (lambda: slo.request_goodput([0.1], [0.01], None, ttft_slo=1), "duration"),
    (lambda: slo.request_goodput([0.1], [0.01], 0.0, ttft_slo=1), "duration must be > 0"),
    (lambda: slo.meets_slo([0.1], [0.01]), "at least one target"),
    (lambda: slo.meets_slo([0.1, 0.2], [0.01], ttft_slo=1, tpot_slo=1), "same length"),
    (lambda: slo.meets_slo([float("nan")], ttft_slo=1), "NaN"),
    (lambda: slo.meets_slo([-1.0], ttft_slo=1), ">= 0"),
    (lambda: slo.meets_slo(tpot_slo=0.05), "tpot is missing"),
    (lambda: slo.distserve_goodput([1, 2], [0.9]), "equal length"),
    (lambda: slo.distserve_goodput([1, 2], [0.9, 1.2]), r"\[0, 1\]"),
    (lambda: slo.distserve_goodput([1, 2], [0.9, 0.8], target=0), "target"),
    (lambda: slo.token_goodput([1, 2], [0.1], duration=1.0, ttft_slo=1), "entries"),
])
def test_goodput_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_reading_speed_convention():
    # Brysbaert (2019): 238 words/min silent reading of non-fiction; 0.75 words per token
    assert slo.tpot_for_reading_speed() == pytest.approx(0.75 * 60 / 238)
    assert 0.15 < slo.tpot_for_reading_speed() < 0.2
    assert slo.tpot_for_reading_speed(260) < slo.tpot_for_reading_speed(238)
