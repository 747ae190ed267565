"""Queueing closed forms: known values, the identities between the queues, inverses, bad input.

Known values are textbook ones (Kleinrock, Queueing Systems vol. 1, 1975): at rho = 1/2 with
s = 1 s the M/M/1 queue waits 1 s and stays 2 s, the M/D/1 queue waits 0.5 s; the M/M/1
sojourn time is exponential with rate mu - lambda.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from servingmath import queueing as q
from servingmath.prefill import prefill_time

rates = st.floats(0.0, 50.0, allow_nan=False)
times = st.floats(1e-4, 1.0, allow_nan=False)


# ---- known values --------------------------------------------------------------------------------
def test_textbook_values_at_half_load():
    assert q.utilisation(0.5, 1.0) == 0.5
    assert q.mm1_mean_wait(0.5, 1.0) == pytest.approx(1.0)
    assert q.mm1_mean_sojourn(0.5, 1.0) == pytest.approx(2.0)
    assert q.md1_mean_wait(0.5, 1.0) == pytest.approx(0.5)
    assert q.littles_law(0.5, 2.0) == 1.0        # L = rho / (1 - rho) = 1 for M/M/1 at rho 1/2


def test_mm1_sojourn_is_exponential_with_rate_mu_minus_lambda():
    lam, s = 8.0, 0.1                            # mu - lambda = 2 /s
    assert q.mm1_sojourn_quantile(lam, s, 0.5) == pytest.approx(math.log(2) / 2)
    assert q.mm1_sojourn_quantile(lam, s, 0.99) == pytest.approx(math.log(100) / 2)
    assert q.mm1_sojourn_cdf(math.log(100) / 2, lam, s) == pytest.approx(0.99)
    # P99 / mean = ln 100 = 4.61 whatever the load
    for rho in (0.1, 0.5, 0.9):
        assert q.mm1_sojourn_quantile(rho, 1.0, 0.99) / q.mm1_mean_sojourn(rho, 1.0) == pytest.approx(
            math.log(100))


def test_mm1_wait_quantile_has_an_atom_at_zero():
    # P(W_q = 0) = 1 - rho: every quantile up to 1 - rho is zero
    assert q.mm1_wait_quantile(0.3, 1.0, 0.7) == 0.0
    assert q.mm1_wait_quantile(0.3, 1.0, 0.69) == 0.0
    w99 = q.mm1_wait_quantile(0.5, 1.0, 0.99)
    assert 0.5 * math.exp(-0.5 * w99) == pytest.approx(0.01)   # P(W_q > t) = rho e^{-(mu-lambda) t}


@settings(max_examples=50)
@given(rates, times)
def test_pollaczek_khinchine_contains_mm1_and_md1(lam, s):
    if lam * s >= 1:
        return
    assert q.mg1_mean_wait(lam, s, s) == pytest.approx(q.mm1_mean_wait(lam, s), rel=1e-12, abs=1e-15)
    assert q.mg1_mean_wait(lam, s, 0.0) == pytest.approx(q.md1_mean_wait(lam, s), rel=1e-12, abs=1e-15)
    assert q.md1_mean_wait(lam, s) == pytest.approx(q.mm1_mean_wait(lam, s) / 2, rel=1e-12, abs=1e-15)
    assert q.mm1_mean_sojourn(lam, s) == pytest.approx(q.mm1_mean_wait(lam, s) + s, rel=1e-12)


def test_wait_grows_hyperbolically_not_exponentially():
    rho = np.array([0.5, 0.75, 0.875, 0.9375, 0.99])
    w = q.md1_mean_wait(rho, 1.0)
    # W_q (1 - rho) / rho is constant (= s / 2): a hyperbola in 1 - rho
    np.testing.assert_allclose(w * (1 - rho) / rho, 0.5)
    # halving the idle fraction roughly doubles the wait (exactly 2 x rho_2 / rho_1)
    np.testing.assert_allclose(w[1:4] / w[:3], 2 * rho[1:4] / rho[:3])


def test_unstable_queues_give_inf_explicitly():
    for f in (q.mm1_mean_wait, q.mm1_mean_sojourn, q.md1_mean_wait):
        assert f(1.0, 1.0) == math.inf
        assert f(2.0, 1.0) == math.inf
    assert q.mg1_mean_wait(2.0, 1.0, 0.3) == math.inf
    assert q.mm1_sojourn_quantile(1.5, 1.0, 0.99) == math.inf
    assert q.mm1_wait_quantile(1.5, 1.0, 0.99) == math.inf
    assert q.mm1_sojourn_cdf(10.0, 1.5, 1.0) == 0.0
    # arrays: finite below saturation, inf above, no warnings
    with np.errstate(all="raise"):
        w = q.mm1_mean_wait(np.array([0.5, 1.0, 1.5]), 1.0)
    assert np.isfinite(w[0]) and np.isinf(w[1:]).all()


def test_vectorised_and_scalar_types():
    lam = np.linspace(0, 9, 10)
    w = q.md1_mean_wait(lam, 0.1)
    assert isinstance(w, np.ndarray) and w.shape == (10,)
    assert isinstance(q.md1_mean_wait(1.0, 0.1), float)
    grid = q.mm1_sojourn_quantile(lam[:, None], 0.1, np.array([0.5, 0.9, 0.99]))
    assert grid.shape == (10, 3)
    assert np.all(np.diff(grid, axis=0) > 0) and np.all(np.diff(grid, axis=1) > 0)


# ---- inverses ------------------------------------------------------------------------------------
@settings(max_examples=60)
@given(times, st.floats(1.01, 100.0))
def test_md1_max_rate_inverts_the_mean_sojourn(s, factor):
    target = s * factor
    lam = q.md1_max_arrival_rate(s, target)
    assert 0 < lam * s < 1
    assert q.md1_mean_wait(lam, s) + s == pytest.approx(target, rel=1e-9)


@settings(max_examples=60)
@given(times, st.floats(1.01, 100.0), st.sampled_from([None, 0.5, 0.9, 0.99]))
def test_mm1_max_rate_inverts_mean_and_quantiles(s, factor, quantile):
    target = s * factor * (1 if quantile is None else -math.log1p(-quantile))
    lam = q.mm1_max_arrival_rate(s, target, quantile)
    got = q.mm1_mean_sojourn(lam, s) if quantile is None else q.mm1_sojourn_quantile(lam, s, quantile)
    assert got == pytest.approx(target, rel=1e-9)


def test_targets_below_the_service_time_allow_no_traffic():
    assert q.md1_max_arrival_rate(0.1, 0.05) == 0.0
    assert q.md1_max_arrival_rate(0.1, 0.1) == 0.0
    assert q.mm1_max_arrival_rate(0.1, 0.05) == 0.0


# ---- prefill as an M/D/1 queue (DistServe) -----------------------------------------------------------
def test_prefill_mean_ttft_is_distserve_formula():
    d = prefill_time("Llama-3.1-8B", "H100", 1024)
    lam = np.array([0.0, 10.0, 20.0, 40.0])
    ttft = q.prefill_mean_ttft(lam, "Llama-3.1-8B", "H100", 1024)
    expected = d + lam * d**2 / (2 * (1 - lam * d))          # DistServe (OSDI'24) sec. 3.1
    np.testing.assert_allclose(ttft, expected, rtol=1e-12)
    assert q.prefill_mean_ttft(1 / d, "Llama-3.1-8B", "H100", 1024) == math.inf


def test_prefill_kwargs_reach_prefill_time():
    slow = q.prefill_mean_ttft(5.0, "Llama-3.1-8B", "H100", 2048, mfu=0.5)
    fast = q.prefill_mean_ttft(5.0, "Llama-3.1-8B", "H100", 2048)
    d = prefill_time("Llama-3.1-8B", "H100", 2048, mfu=0.5)
    assert slow == pytest.approx(d + q.md1_mean_wait(5.0, d))
    assert slow > fast


def test_prefill_slo_rate_is_where_mean_ttft_meets_the_slo():
    rate = q.prefill_max_arrival_rate(0.1, "Llama-3.1-70B", "H100", 2048, tensor_parallel=4)
    assert q.prefill_mean_ttft(rate, "Llama-3.1-70B", "H100", 2048, tensor_parallel=4) == pytest.approx(0.1)
    assert q.prefill_mean_ttft(rate * 1.01, "Llama-3.1-70B", "H100", 2048, tensor_parallel=4) > 0.1
    # an SLO shorter than the prefill itself cannot be met at any rate
    d = prefill_time("Llama-3.1-70B", "H100", 2048, tensor_parallel=4)
    assert q.prefill_max_arrival_rate(d / 2, "Llama-3.1-70B", "H100", 2048, tensor_parallel=4) == 0.0


# ---- bad input -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call, name", [
    (lambda: q.mm1_mean_wait(-1.0, 0.1), "arrival_rate"),
    (lambda: q.md1_mean_wait(1.0, 0.0), "service_time"),
    (lambda: q.mg1_mean_wait(1.0, 0.1, -0.1), "service_time_std"),
    (lambda: q.mm1_sojourn_quantile(1.0, 0.1, 1.0), "quantile"),
    (lambda: q.mm1_sojourn_quantile(1.0, 0.1, 99), "quantile"),
    (lambda: q.utilisation(np.array([1.0, -2.0]), 0.1), "arrival_rate"),
    (lambda: q.littles_law(1.0, -1.0), "mean_time_in_system"),
    (lambda: q.md1_max_arrival_rate(0.1, -1.0), "mean_sojourn"),
    (lambda: q.prefill_max_arrival_rate(0.0, "Llama-3.1-8B", "H100", 512), "ttft_slo"),
    (lambda: q.prefill_mean_ttft(-3.0, "Llama-3.1-8B", "H100", 512), "arrival_rate"),
    (lambda: q.mm1_mean_wait("fast", 0.1), "arrival_rate"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()
