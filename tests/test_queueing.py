"""Queueing closed forms: known values, the identities between the queues, inverses, bad input.

Known values are textbook ones (Kleinrock, Queueing Systems vol. 1, 1975): at rho = 1/2 with
s = 1 s the M/M/1 queue waits 1 s and stays 2 s, the M/D/1 queue waits 0.5 s; the M/M/1
sojourn time is exponential with rate mu - lambda.

The later sections test the M/D/1 waiting-time distribution, M/M/c (Erlang C, pooling,
staffing), bursty arrivals (Kingman, gamma/M/1), priority classes (Cobham) and overload:
* against independent evaluations: the M/D/1 CDF by Franx's positive-weight recursion in
  floating point and by a Lindley recursion of a million requests; Erlang C by its factorial
  definition in exact rational arithmetic; the E_2/M/1 queue in closed form;
* against values with a source: Erlang's first terms, Pollaczek-Khinchine and Takacs's
  moments, the Cramer-Lundberg tail and Kingman's bound; Erlang B table values;
* against the book's simulator (servingmath.simulate), five seeds, a 95 % t-interval over the
  seeds' estimates that must contain the closed form - and exclude the wrong formula.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from servingmath import queueing as q
from servingmath import simulate as sim
from servingmath.prefill import prefill_time
from servingmath.workloads import Geometric, Poisson, Timestamps, Workload

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
    assert q.mm1_sojourn_quantile(0.5, lam, s) == pytest.approx(math.log(2) / 2)
    assert q.mm1_sojourn_quantile(0.99, lam, s) == pytest.approx(math.log(100) / 2)
    assert q.mm1_sojourn_cdf(math.log(100) / 2, lam, s) == pytest.approx(0.99)
    # P99 / mean = ln 100 = 4.61 whatever the load
    for rho in (0.1, 0.5, 0.9):
        assert q.mm1_sojourn_quantile(0.99, rho, 1.0) / q.mm1_mean_sojourn(rho, 1.0) == pytest.approx(
            math.log(100))


def test_mm1_wait_quantile_has_an_atom_at_zero():
    # P(W_q = 0) = 1 - rho: every quantile up to 1 - rho is zero
    assert q.mm1_wait_quantile(0.7, 0.3, 1.0) == 0.0
    assert q.mm1_wait_quantile(0.69, 0.3, 1.0) == 0.0
    w99 = q.mm1_wait_quantile(0.99, 0.5, 1.0)
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
    assert q.mm1_sojourn_quantile(0.99, 1.5, 1.0) == math.inf
    assert q.mm1_wait_quantile(0.99, 1.5, 1.0) == math.inf
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
    grid = q.mm1_sojourn_quantile(np.array([0.5, 0.9, 0.99]), lam[:, None], 0.1)
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
    got = q.mm1_mean_sojourn(lam, s) if quantile is None else q.mm1_sojourn_quantile(quantile, lam, s)
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
    (lambda: q.mm1_sojourn_quantile(1.0, 1.0, 0.1), "quantile"),
    (lambda: q.mm1_sojourn_quantile(99, 1.0, 0.1), "quantile"),
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


# ---- helpers for the simulator checks ------------------------------------------------------------------
SEEDS = range(5)
T_975_4 = 2.7764451051977987            # Student's t, 97.5 % point, 4 degrees of freedom (5 seeds)


def seed_interval(values):
    """The 95 % t-interval of the mean of one estimate per seed (independent runs)."""
    v = np.asarray(values, dtype=float)
    half = T_975_4 * v.std(ddof=1) / math.sqrt(v.size)
    return v.mean() - half, v.mean() + half


def inside(value, interval, slack=0.0):
    lo, hi = interval
    return lo - slack <= value <= hi + slack


def lindley_waits(lam, d, n, seed):
    """Waits of n requests of an M/D/1 queue that starts empty: W_n = S_n - min_{k<=n} S_k."""
    rng = np.random.default_rng(seed)
    walk = np.cumsum(d - rng.exponential(1.0 / lam, n))
    return walk - np.minimum(np.minimum.accumulate(walk), 0.0)


def franx_cdf(x, rho):
    """P(W <= x D) of M/D/1 in floating point, independently of the library (D = 1).

    Franx (2001): with Q_m = P(W <= (m + 1) D) and x = k + u (0 <= u < 1),
    P(W <= x) = sum_{j=0}^{k} Poisson(j; rho (1 - u)) Q_{k-j}, all weights positive; the
    grid values obey Q_{m-1} = sum_{j=0}^{m} Poisson(j; rho) Q_{m-j}, Q_{-1} = 1 - rho,
    solved forward for Q_m. Accurate to about 1e-12 in absolute terms (not in the far tail).
    """
    k = math.floor(x)
    u = x - k

    def pois(mean, n):
        j = np.arange(n + 1)
        return np.exp(-mean + j * math.log(mean) - np.array([math.lgamma(i + 1) for i in j]))

    a = pois(rho, k + 1)
    grid = np.empty(k + 1)
    grid[0] = (1 - rho) / a[0]                       # Q_{-1} = a_0 Q_0
    for m in range(1, k + 1):
        grid[m] = (grid[m - 1] - np.dot(a[1:m + 1], grid[m - 1::-1])) / a[0]
    return float(np.dot(pois(rho * (1 - u), k), grid[k::-1]))


def md1_decay(rho):
    """gamma D: the positive root of g = rho (e^g - 1), by bisection (independent of the library)."""
    lo, hi = 1e-12, 50.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if rho * math.expm1(mid) - mid < 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


# ---- M/D/1: the waiting-time distribution ------------------------------------------------------------
def test_md1_cdf_known_values_erlangs_first_terms():
    lam, d = 8.0, 0.1
    rho = lam * d
    assert q.md1_wait_cdf(0.0, lam, d) == pytest.approx(1 - rho, rel=1e-15)     # the idle fraction
    for t in (0.01, 0.05, 0.0999):                   # below D: (1 - rho) e^{lambda t}
        assert q.md1_wait_cdf(t, lam, d) == pytest.approx((1 - rho) * math.exp(lam * t), rel=1e-14)
    assert q.md1_wait_cdf(d, lam, d) == pytest.approx((1 - rho) * math.exp(rho), rel=1e-14)
    # t = 2D: k = 0 and k = 1 terms, (1 - rho) (e^{2 rho} - rho e^{rho})
    assert q.md1_wait_cdf(2 * d, lam, d) == pytest.approx((1 - rho) * (math.exp(2 * rho) - rho * math.exp(rho)),
                                                          rel=1e-14)


def test_naive_erlang_sum_cancels_where_the_library_does_not():
    # Erlang's sum in doubles at rho = 0.92, t = 100 D: its terms reach ~1e50, the sum is < 1
    rho, x = 0.92, 100.0
    naive = (1 - rho) * sum((rho * (k - x)) ** k / math.factorial(k) * math.exp(-rho * (k - x))
                            for k in range(int(x) + 1))
    exact = q.md1_wait_cdf(x, rho, 1.0)
    assert abs(naive - exact) > 1.0                  # garbage, not a probability
    assert exact == pytest.approx(franx_cdf(x, rho), abs=1e-11)
    assert 0.99999 < exact < 1.0


@pytest.mark.parametrize("rho", [0.05, 0.3, 0.7, 0.92, 0.99])
def test_md1_cdf_matches_franx_recursion(rho):
    for x in [0.0, 0.3, 1.0, 1.5, 2.7, 7.2, 19.9, 55.5, 150.3, 299.0]:
        assert q.md1_wait_cdf(x, rho, 1.0) == pytest.approx(franx_cdf(x, rho), abs=1e-11), x
    # units: the same queue in seconds (D = 30 ms) is the same function of t / D
    assert q.md1_wait_cdf(0.03 * 7.2, rho / 0.03, 0.03) == pytest.approx(franx_cdf(7.2, rho), abs=1e-11)


@pytest.mark.parametrize("rho", [0.5, 0.92])
def test_md1_moments_from_the_cdf_are_pollaczek_khinchine_and_takacs(rho):
    d = 1.0
    gamma = md1_decay(rho)
    t = np.linspace(0.0, 40.0 / gamma, 4001)
    tail = 1.0 - q.md1_wait_cdf(t, rho, d)
    mean = np.trapezoid(tail, t)
    second = np.trapezoid(2 * t * tail, t)
    pk = rho * d / (2 * (1 - rho))                   # Pollaczek-Khinchine
    takacs = 2 * pk**2 + rho * d**2 / (3 * (1 - rho))   # E[W^2] = 2 E[W]^2 + lambda E[S^3] / (3 (1 - rho))
    assert mean == pytest.approx(pk, rel=1e-5)
    assert second == pytest.approx(takacs, rel=1e-5)


@settings(max_examples=40)
@given(st.floats(0.02, 0.99), st.floats(0.0, 400.0))
def test_md1_tail_obeys_kingmans_bound_and_approaches_cramer_lundberg(rho, x):
    gamma = md1_decay(rho)
    tail = 1.0 - q.md1_wait_cdf(x, rho, 1.0)
    assert tail <= math.exp(-gamma * x) * (1 + 1e-9) + 1e-15            # Kingman (1964)
    c = (1 - rho) / (rho * math.exp(gamma) - 1)                           # Cramer-Lundberg constant
    x_far = 30.0 / gamma                                                  # tail ~ 1e-13: the asymptote rules
    far = 1.0 - q.md1_wait_cdf(x_far, rho, 1.0)
    if rho >= 0.3:
        assert far == pytest.approx(c * math.exp(-gamma * x_far), rel=1e-3)


@settings(max_examples=40)
@given(st.floats(0.01, 0.99), st.lists(st.floats(0.0, 300.0), min_size=2, max_size=6))
def test_md1_cdf_is_a_cdf(rho, xs):
    xs = np.sort(np.asarray(xs))
    f = q.md1_wait_cdf(xs, rho, 1.0)
    assert np.all((f >= 0) & (f <= 1))
    assert np.all(np.diff(f) >= -1e-15)                                   # non-decreasing in t
    assert f[0] >= 1 - rho - 1e-15                                        # the atom at 0
    more_load = q.md1_wait_cdf(xs, min(rho * 1.05, 0.995), 1.0)
    assert np.all(more_load <= f + 1e-12)                                 # more load, longer waits
    assert q.md1_wait_cdf(1e6, rho, 1.0) == 1.0


@settings(max_examples=30)
@given(st.floats(0.01, 0.99), st.floats(0.001, 0.9999))
def test_md1_quantile_inverts_the_cdf(rho, p):
    w = q.md1_wait_quantile(p, rho / 0.03, 0.03)
    if p <= 1 - rho:
        assert w == 0.0
    else:
        assert q.md1_wait_cdf(w, rho / 0.03, 0.03) == pytest.approx(p, rel=1e-9)
        assert q.md1_wait_quantile(min(p * 1.0001, 0.99995), rho / 0.03, 0.03) >= w


def test_md1_quantiles_vectorise_and_keep_scalars_scalar():
    w = q.md1_wait_quantile(np.array([0.5, 0.9, 0.99]), 8.0, 0.1)
    assert isinstance(w, np.ndarray) and w.shape == (3,) and np.all(np.diff(w) > 0)
    assert isinstance(q.md1_wait_quantile(0.5, 8.0, 0.1), float)
    grid = q.md1_wait_cdf(np.array([0.1, 1.0])[:, None], np.array([2.0, 8.0]), 0.1)
    assert grid.shape == (2, 2) and grid[0, 0] > grid[0, 1]


def test_md1_cdf_agrees_with_a_lindley_recursion():
    lam, d = 0.92 / 0.03, 0.03
    xs = np.array([0.5, 2.0, 5.0, 10.0, 20.0, 40.0]) * d
    n, warmup = 1_000_000, 50_000
    runs = []
    for seed in SEEDS:
        w = np.sort(lindley_waits(lam, d, n, 100 + seed)[warmup:])
        runs.append(np.searchsorted(w, xs, side="right") / w.size)
    runs = np.array(runs)
    exact = q.md1_wait_cdf(xs, lam, d)
    mm1 = 1 - 0.92 * np.exp(-(1 / d - lam) * xs)            # the M/M/1 wait at the same load
    for j in range(xs.size):
        ci = seed_interval(runs[:, j])
        assert inside(exact[j], ci), (xs[j], exact[j], ci)
        assert not inside(mm1[j], ci)


# ---- M/D/1: chapter 09's prefill server at rho = 0.92 -------------------------------------------------------
M8, H100, LP = "Llama-3.1-8B", "H100", 2048


def test_chapter_09_tail_from_the_exact_distribution():
    d = prefill_time(M8, H100, LP)
    lam = q.prefill_max_arrival_rate(0.2, M8, H100, LP)          # where the mean TTFT is 200 ms
    ttft = q.md1_wait_quantile(np.array([0.5, 0.99]), lam, d) + d
    within = q.md1_wait_cdf(0.2 - d, lam, d)
    assert lam * d == pytest.approx(0.9189, abs=1e-4)
    assert ttft[0] == pytest.approx(0.1447, abs=5e-4) and ttft[1] == pytest.approx(0.8483, abs=5e-4)
    assert within == pytest.approx(0.632, abs=1e-3)
    # the review's figures (issue 18: P50 ~146 ms, P99 ~860 ms, ~63 % within 200 ms) are for rho = 0.92
    # and D = 30 ms exactly
    review = q.md1_wait_quantile(np.array([0.5, 0.99]), 0.92 / 0.03, 0.03) + 0.03
    assert review[0] == pytest.approx(0.146, abs=1e-3) and review[1] == pytest.approx(0.860, abs=1e-3)
    assert q.md1_wait_cdf(0.17, 0.92 / 0.03, 0.03) == pytest.approx(0.63, abs=5e-3)
    # and the book's simulator agrees, five seeds of 4000 requests (the first 10 % dropped)
    server = sim.Server(M8, H100)
    p50s, p90s, shares = [], [], []
    for seed in SEEDS:
        cfg = sim.SimulationConfig(server, Workload.fixed(4000, LP, 1), Poisson(lam),
                                   sim.ContinuousBatching(max_batch_size=1))
        t = sim.simulate(cfg, seed=seed).records.ttft[400:]
        p50s.append(np.percentile(t, 50))
        p90s.append(np.percentile(t, 90))
        shares.append(np.mean(t <= 0.2))
    assert inside(ttft[0], seed_interval(p50s))
    assert inside(q.md1_wait_quantile(0.9, lam, d) + d, seed_interval(p90s))
    assert inside(within, seed_interval(shares))
    assert not inside(q.mm1_wait_quantile(0.5, lam, d) + d, seed_interval(p50s))   # not M/M/1


# ---- M/M/c: Erlang C, quantiles, pooling, staffing ---------------------------------------------------------------
def erlang_c_exact(c, a):
    """Erlang C from its factorial definition (Kleinrock 1975, sec. 3.5), in exact rationals."""
    a = Fraction(a)
    top = a**c / math.factorial(c) * Fraction(c) / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


def test_erlang_c_hand_values_and_exact_definition():
    assert q.erlang_c(3, 2.0, 1.0) == pytest.approx(4 / 9, rel=1e-14)      # worked by hand
    assert q.erlang_c(2, 1.0, 1.0) == pytest.approx(1 / 3, rel=1e-14)
    assert q.erlang_c(1, 0.7, 1.0) == pytest.approx(0.7, rel=1e-14)         # one server: rho
    for c, a in [(2, 1.5), (5, 3.25), (10, 9.5), (40, 30.0), (60, 59.0), (120, 100.0)]:
        assert q.erlang_c(c, a, 1.0) == pytest.approx(float(erlang_c_exact(c, a)), rel=1e-11), (c, a)
    # no factorial overflow: a thousand-server fleet against the exact value
    assert q.erlang_c(1000, 950.0, 1.0) == pytest.approx(float(erlang_c_exact(1000, 950)), rel=1e-9)


@pytest.mark.parametrize("lines, erlangs, blocking", [
    (5, 1.361, 0.01), (10, 4.461, 0.01), (10, 5.084, 0.02), (20, 12.031, 0.01), (100, 84.064, 0.01)])
def test_erlang_b_recursion_reproduces_the_erlang_b_table(lines, erlangs, blocking):
    # Erlang B (loss) table: the offered load at which `lines` circuits block 1 % or 2 % of calls,
    # as printed in telephone-engineering tables (e.g. ITU-D Teletraffic Engineering Handbook, 2005,
    # table of the Erlang B formula); the tables round the load to 3 decimals.
    assert q._erlang_b(lines, erlangs) == pytest.approx(blocking, rel=2e-3)
    # and Erlang C follows from B: C = c B / (c - a (1 - B))
    b = q._erlang_b(lines, erlangs)
    assert q.erlang_c(lines, erlangs, 1.0) == pytest.approx(lines * b / (lines - erlangs * (1 - b)), rel=1e-12)


def test_halfin_whitt_limit_of_erlang_c():
    # with c = a + beta sqrt(a), C(c, a) tends to the Halfin-Whitt function of beta as a grows
    for beta in (0.5, 1.0, 2.0):
        errors = []
        for a in (100.0, 10_000.0):
            c = a + beta * math.sqrt(a)
            exact = q.erlang_c(int(c), a * int(c) / c, 1.0)           # the same beta with an integer c
            errors.append(abs(exact - q.halfin_whitt_wait_probability(beta)))
        assert errors[1] < errors[0] and errors[1] < 0.01


@settings(max_examples=50)
@given(st.integers(1, 60), st.floats(0.01, 0.99), st.floats(1e-3, 1.0))
def test_mmc_properties(c, rho, s):
    lam = rho * c / s
    w = q.mmc_mean_wait(c, lam, s)
    assert q.mmc_mean_wait(1, rho / s, s) == pytest.approx(q.mm1_mean_wait(rho / s, s), rel=1e-12)
    assert 0 <= q.erlang_c(c, lam, s) <= rho + 1e-12                 # pooling never waits more than M/M/1
    assert q.mmc_mean_wait(c + 1, lam, s) <= w + 1e-15                # one more server: less waiting
    assert q.erlang_c(c, lam * 1.01, s) >= q.erlang_c(c, lam, s) - 1e-15
    for p in (0.5, 0.9, 0.99):
        x = q.mmc_wait_quantile(p, c, lam, s)
        if x > 0:
            assert q.mmc_wait_cdf(x, c, lam, s) == pytest.approx(p, rel=1e-9)
        else:
            assert q.mmc_wait_cdf(0.0, c, lam, s) >= p - 1e-12
    # the mean of the wait distribution: C / (c mu - lambda)
    assert w == pytest.approx(q.erlang_c(c, lam, s) / (c / s - lam), rel=1e-12)


def test_mmc_unstable_and_idle():
    assert q.erlang_c(4, 4.0, 1.0) == 1.0 and q.erlang_c(4, 9.0, 1.0) == 1.0
    assert q.mmc_mean_wait(4, 4.0, 1.0) == math.inf
    assert q.mmc_wait_quantile(0.5, 4, 5.0, 1.0) == math.inf
    assert q.mmc_wait_cdf(3.0, 4, 5.0, 1.0) == 0.0
    assert q.erlang_c(4, 0.0, 1.0) == 0.0 and q.mmc_mean_wait(4, 0.0, 1.0) == 0.0
    with np.errstate(all="raise"):
        c = q.erlang_c(np.array([1, 2, 3]), np.array([0.5, 2.0, 2.0]), 1.0)
    np.testing.assert_allclose(c, [0.5, 1.0, 4 / 9])


def test_mmc_agrees_with_the_simulator():
    # a toy engine whose iteration takes 0.5 ms whatever it holds, chunked prefill with a budget of
    # c tokens and c sequences: c servers sharing one FCFS queue, service = output tokens x 0.5 ms
    # (geometric, mean 100: nearly exponential, mean 50 ms). A request joins at the next step
    # boundary, so the simulated wait is longer by up to one step.
    c, s, step, rho = 4, 0.05, 5e-4, 0.8
    lam = rho * c / s
    server = sim.Server(step_times=sim.LinearStepTimes(step_time=step))
    means, waited = [], []
    for seed in SEEDS:
        w = Workload.sample(10_000, 1, Geometric(100), seed=seed)
        cfg = sim.SimulationConfig(server, w, Poisson(lam), sim.ChunkedPrefill(token_budget=c, max_batch_size=c))
        r = sim.simulate(cfg, seed=seed).records
        np.testing.assert_allclose(r.finish - r.scheduled, w.output_lens * step, rtol=1e-9)
        delay = r.queue_delay[1000:]
        means.append(delay.mean())
        waited.append(np.mean(delay > step * 1.001))
    geometric_bias = rho * s * 0.01                   # c_s^2 = 1 - 1/100 instead of 1
    assert inside(q.mmc_mean_wait(c, lam, s), seed_interval(means), slack=step + geometric_bias)
    assert inside(q.erlang_c(c, lam, s), seed_interval(waited), slack=0.01)
    assert not inside(q.mm1_mean_wait(lam / c, s), seed_interval(means), slack=step)   # not 4 x M/M/1


@settings(max_examples=40)
@given(st.integers(1, 64), st.floats(0.05, 0.98))
def test_pooling_always_wins_and_equals_at_one_server(c, rho):
    r = q.pooling_comparison(c, rho * c, 1.0)
    assert r.pooled_mean_wait <= r.split_mean_wait * (1 + 1e-12)
    assert r.pooled_wait_probability <= r.split_wait_probability + 1e-12
    assert r.pooled_wait_quantile <= r.split_wait_quantile * (1 + 1e-12) + 1e-15
    assert r.split_mean_wait == pytest.approx(q.mm1_mean_wait(rho, 1.0), rel=1e-12)
    if c == 1:
        assert r.pooled_mean_wait == pytest.approx(r.split_mean_wait, rel=1e-12)


def test_pooling_gain_grows_with_the_fleet():
    ratios = [q.pooling_comparison(c, 0.9 * c, 1.0) for c in (2, 8, 32)]
    gains = [r.split_mean_wait / r.pooled_mean_wait for r in ratios]
    assert gains[0] < gains[1] < gains[2] and gains[2] > 20
    unstable = q.pooling_comparison(4, 4.0, 1.0)
    assert unstable.pooled_mean_wait == math.inf and unstable.split_mean_wait == math.inf


def test_staffing_exact_is_minimal_and_square_root_is_close():
    for a in (0.5, 3.0, 10.0, 47.3, 200.0, 2000.0):
        for alpha in (0.5, 0.2, 0.05, 0.01):
            c = q.erlang_c_servers(a, 1.0, alpha)
            assert q.erlang_c(c, a, 1.0) <= alpha
            assert c == 1 or q.erlang_c(c - 1, a, 1.0) > alpha           # the smallest
            rule = q.square_root_staffing(a, 1.0, alpha)
            assert rule > a and abs(rule - c) <= 2, (a, alpha, rule, c)
    # the margin above the load grows like sqrt(a): 100x the traffic, ~10x the spare servers
    spare = [q.erlang_c_servers(a, 1.0, 0.2) - a for a in (100.0, 10_000.0)]
    assert 8 < spare[1] / spare[0] < 11
    assert q.erlang_c_servers(0.0, 1.0, 0.2) == 1
    assert q.square_root_staffing(np.array([10.0, 100.0]), 1.0, 0.2).dtype == np.int64


def test_halfin_whitt_function():
    b = np.array([0.1, 0.5, 1.0, 2.0, 3.0, 8.0])
    alpha = q.halfin_whitt_wait_probability(b)
    assert np.all(np.diff(alpha) < 0) and alpha[0] < 1 and alpha[-1] > 0
    phi, big_phi = math.exp(-0.5) / math.sqrt(2 * math.pi), 0.5 * math.erfc(-1 / math.sqrt(2))
    assert q.halfin_whitt_wait_probability(1.0) == pytest.approx(1 / (1 + big_phi / phi), rel=1e-12)


# ---- bursty arrivals: Kingman and gamma/M/1 -----------------------------------------------------------------
@settings(max_examples=50)
@given(rates, times, st.floats(0.0, 3.0))
def test_kingman_is_exact_for_poisson_arrivals(lam, s, cv):
    if lam * s >= 1:
        assert q.kingman_mean_wait(lam, s, 1.0, cv**2) == math.inf
        return
    assert q.kingman_mean_wait(lam, s, 1.0, 1.0) == pytest.approx(q.mm1_mean_wait(lam, s), rel=1e-12, abs=1e-15)
    assert q.kingman_mean_wait(lam, s, 1.0, cv**2) == pytest.approx(q.mg1_mean_wait(lam, s, cv * s), rel=1e-12,
                                                                    abs=1e-15)
    assert q.kingman_mean_wait(lam, s, 1.0, 0.0) == pytest.approx(q.md1_mean_wait(lam, s), rel=1e-12, abs=1e-15)


def test_gamma_m1_known_values():
    for rho in (0.1, 0.5, 0.9, 0.99):
        assert q.gamma_m1_mean_wait(rho, 1.0, 1.0) == pytest.approx(q.mm1_mean_wait(rho, 1.0), rel=1e-10)
        # Erlang-2 gaps (burstiness 2): sigma = (1 + 4 rho - sqrt(1 + 8 rho)) / 2 in closed form
        sigma = (1 + 4 * rho - math.sqrt(1 + 8 * rho)) / 2
        assert q.gamma_m1_mean_wait(rho, 1.0, 2.0) == pytest.approx(sigma / (1 - sigma), rel=1e-9)
    assert q.gamma_m1_mean_wait(1.0, 1.0, 0.5) == math.inf and q.gamma_m1_mean_wait(0.0, 1.0, 0.5) == 0.0
    # light traffic with smooth gaps: sigma ~ (k rho)^k is tiny and still computed to full precision
    rho, k = 1e-3, 2.0
    sigma = (1 + 4 * rho - math.sqrt(1 + 8 * rho)) / 2
    assert q.gamma_m1_mean_wait(rho, 1.0, k) == pytest.approx(sigma / (1 - sigma), rel=1e-6)


def test_kingman_becomes_exact_in_heavy_traffic():
    for k in (0.25, 0.5, 2.0):
        errors = [abs(q.kingman_mean_wait(r, 1.0, 1 / k, 1.0) / q.gamma_m1_mean_wait(r, 1.0, k) - 1)
                  for r in (0.5, 0.8, 0.95, 0.99)]
        assert all(e1 > e2 for e1, e2 in zip(errors, errors[1:])), (k, errors)
        assert errors[-1] < 0.02
    # burstier traffic waits longer at the same load, smoother shorter
    w = [q.gamma_m1_mean_wait(0.8, 1.0, k) for k in (0.25, 0.5, 1.0, 2.0, 8.0)]
    assert all(a > b for a, b in zip(w, w[1:]))


@pytest.mark.parametrize("burstiness", [0.5, 2.0])
def test_gamma_arrivals_in_the_simulator_match_gamma_m1(burstiness):
    s, step, rho = 0.05, 5e-4, 0.8
    server = sim.Server(step_times=sim.LinearStepTimes(step_time=step))
    means = []
    for seed in SEEDS:
        w = Workload.sample(10_000, 1, Geometric(100), seed=seed)
        cfg = sim.SimulationConfig(server, w, Poisson(rho / s, burstiness=burstiness),
                                   sim.ContinuousBatching(max_batch_size=1))
        means.append(sim.simulate(cfg, seed=seed).records.queue_delay[1000:].mean())
    ci = seed_interval(means)
    geometric_bias = q.kingman_mean_wait(rho / s, s, 1 / burstiness, 1.0) * 0.01   # c_s^2 = 0.99, not 1
    assert inside(q.gamma_m1_mean_wait(rho / s, s, burstiness), ci, slack=geometric_bias)
    assert not inside(q.mm1_mean_wait(rho / s, s), ci)                               # not Poisson


# ---- priority classes: Cobham --------------------------------------------------------------------------------
@settings(max_examples=50)
@given(st.lists(st.tuples(st.floats(0.0, 5.0), st.floats(0.01, 0.2), st.floats(0.0, 2.0)),
                min_size=1, max_size=4))
def test_cobham_conservation_and_limits(classes):
    lam = np.array([c[0] for c in classes])
    mean = np.array([c[1] for c in classes])
    second = mean**2 * (1 + np.array([c[2] for c in classes]))
    rho = lam * mean
    w = q.priority_mean_waits(lam, mean, second)
    if rho.sum() >= 1:
        assert np.isinf(w[-1])
        return
    residual = float(np.sum(lam * second) / 2)
    # Kleinrock's conservation law: sum rho_k W_k = rho R / (1 - rho), whatever the order
    assert float(np.sum(rho * w)) == pytest.approx(rho.sum() * residual / (1 - rho.sum()), rel=1e-9, abs=1e-15)
    assert np.all(np.diff(w) >= -1e-15) or np.allclose(w, w[0])      # lower classes never wait less
    one = q.priority_mean_waits(lam[:1], mean[:1], second[:1])        # one class: Pollaczek-Khinchine
    assert one[0] == pytest.approx(q.mg1_mean_wait(lam[0], mean[0], math.sqrt(second[0] - mean[0]**2)),
                                   rel=1e-9, abs=1e-15)


def test_cobham_overload_keeps_the_high_class_finite():
    # rho_0 = 0.5, rho_1 = 0.7: the batch class is overloaded, served back to back at (1 - 0.5) / E[S_1]
    w = q.priority_mean_waits([5.0, 7.0], [0.1, 0.1], [0.01, 0.01])
    assert np.isinf(w[1])
    residual = (5.0 * 0.01 + 5.0 * 0.01) / 2          # the batch class's throughput is 5/s, not 7/s
    assert w[0] == pytest.approx(residual / (1 - 0.5), rel=1e-12)
    assert np.all(np.isinf(q.priority_mean_waits([12.0, 1.0], [0.1, 0.1], [0.01, 0.01])))


def two_class_workload(n, rate0, rate1, mean0, len1, seed):
    """Interactive (class 0, geometric outputs) and batch (class 1, fixed outputs) Poisson streams, merged."""
    rng = np.random.default_rng(seed)
    batch = rng.random(n) < rate1 / (rate0 + rate1)
    outputs = np.where(batch, len1, rng.geometric(1 / mean0, n))
    return Workload.from_lists(np.ones(n, dtype=int), outputs, batch.astype(int))


def test_cobham_agrees_with_the_simulators_priority_queue():
    step, mean0, len1 = 1e-3, 20, 60                  # interactive: geometric mean 20 tokens; batch: 60 tokens
    rate0, rate1 = 15.0, 8.0                          # rho_0 = 0.30, rho_1 = 0.48
    p = 1 / mean0
    means = np.array([step * mean0, step * len1])
    seconds = np.array([step**2 * (2 - p) / p**2, (step * len1) ** 2])   # E[S^2] of geometric and fixed
    exact = q.priority_mean_waits([rate0, rate1], means, seconds)
    fcfs = q.mg1_mean_wait(rate0 + rate1, (rate0 * means[0] + rate1 * means[1]) / (rate0 + rate1),
                           math.sqrt((rate0 * seconds[0] + rate1 * seconds[1]) / (rate0 + rate1)
                                     - ((rate0 * means[0] + rate1 * means[1]) / (rate0 + rate1)) ** 2))
    server = sim.Server(step_times=sim.LinearStepTimes(step_time=step))
    per_class = [[], []]
    for seed in SEEDS:
        w = two_class_workload(10_000, rate0, rate1, mean0, len1, seed)
        cfg = sim.SimulationConfig(server, w, Poisson(rate0 + rate1), sim.ContinuousBatching(max_batch_size=1))
        r = sim.simulate(cfg, seed=seed).records
        keep = np.arange(len(r)) >= 1000
        for k in (0, 1):
            per_class[k].append(r.queue_delay[keep & (r.priority == k)].mean())
    for k in (0, 1):
        ci = seed_interval(per_class[k])
        assert inside(exact[k], ci), (k, exact[k], ci)
        assert not inside(fcfs, ci)                   # first come first served would be wrong for both


# ---- overload ------------------------------------------------------------------------------------------------
def test_overload_fluid_values():
    assert q.backlog_growth_rate(40.0, 0.03) == pytest.approx(40 - 1 / 0.03)
    assert q.backlog_growth_rate(40.0, 0.03, servers=2) == 0.0
    assert q.backlog_after(60.0, 40.0, 0.03) == pytest.approx(400.0)
    assert q.backlog_after(60.0, 30.0, 0.03, initial_backlog=100.0) == 0.0          # drained and empty
    assert q.drain_time(400.0, 30.0, 0.03) == pytest.approx(120.0)
    assert q.drain_time(0.0, 40.0, 0.03) == 0.0 and q.drain_time(1.0, 40.0, 0.03) == math.inf
    assert q.burst_drain_time(40.0, 10.0, 30.0, 0.03) == pytest.approx(20.0)
    assert q.burst_drain_time(40.0, 10.0, 100 / 3, 0.03) == math.inf


@settings(max_examples=50)
@given(st.floats(0.0, 100.0), st.floats(0.0, 100.0), st.floats(0.0, 80.0), st.integers(1, 4))
def test_backlog_is_additive_in_time(t1, t2, lam, c):
    once = q.backlog_after(t1 + t2, lam, 0.05, servers=c)
    twice = q.backlog_after(t2, lam, 0.05, servers=c, initial_backlog=q.backlog_after(t1, lam, 0.05, servers=c))
    assert once == pytest.approx(twice, rel=1e-9, abs=1e-9)
    if lam > c / 0.05:
        assert q.backlog_after(t1, lam, 0.05, servers=c) == pytest.approx(q.backlog_growth_rate(
            lam, 0.05, servers=c) * t1, rel=1e-12)


def test_burst_drain_time_matches_a_deterministic_simulation():
    # D/D/1: evenly spaced requests, 30 ms each; 10 s at 40 req/s (120 %), then 30 req/s (90 %)
    d, burst, base, t_burst = 0.03, 40.0, 30.0, 10.0
    times = np.concatenate([np.arange(0, t_burst, 1 / burst), t_burst + np.arange(0, 60.0, 1 / base)])
    server = sim.Server(step_times=sim.LinearStepTimes(step_time=d))
    work = Workload.fixed(times.size, prompt_len=1, output_len=1)
    r = sim.simulate(sim.SimulationConfig(server, work, Timestamps(times), sim.ContinuousBatching(max_batch_size=1)),
                     seed=0).records
    in_burst = times < t_burst
    queued_at_end = np.count_nonzero(in_burst & (r.scheduled > t_burst))
    assert abs(queued_at_end - q.backlog_after(t_burst, burst, d)) <= 2
    after = ~in_burst & (r.queue_delay < 1e-9)
    drained = times[np.argmax(after)] - t_burst      # the first request after the burst that does not wait
    assert drained == pytest.approx(q.burst_drain_time(burst, t_burst, base, d), abs=2 / base)


# ---- bad input of the new functions ---------------------------------------------------------------------------
@pytest.mark.parametrize("call, name", [
    (lambda: q.md1_wait_cdf(-1.0, 8.0, 0.1), "t"),
    (lambda: q.md1_wait_cdf(1.0, -8.0, 0.1), "arrival_rate"),
    (lambda: q.md1_wait_quantile(1.5, 8.0, 0.1), "quantile"),
    (lambda: q.md1_wait_quantile(0.5, 8.0, 0.0), "service_time"),
    (lambda: q.erlang_c(0, 1.0, 1.0), "servers"),
    (lambda: q.erlang_c(2.5, 1.0, 1.0), "servers"),
    (lambda: q.mmc_mean_wait(2, 1.0, -1.0), "service_time"),
    (lambda: q.mmc_wait_quantile(0.0, 2, 1.0, 1.0), "quantile"),
    (lambda: q.pooling_comparison(4, 1.0, 1.0, quantile=2.0), "quantile"),
    (lambda: q.square_root_staffing(10.0, 1.0, 1.0), "wait_probability"),
    (lambda: q.erlang_c_servers(10.0, 1.0, 0.0), "wait_probability"),
    (lambda: q.halfin_whitt_wait_probability(0.0), "beta"),
    (lambda: q.kingman_mean_wait(1.0, 0.1, -1.0, 1.0), "arrival_cv2"),
    (lambda: q.kingman_mean_wait(1.0, 0.1, 1.0, "big"), "service_cv2"),
    (lambda: q.gamma_m1_mean_wait(1.0, 0.1, 0.0), "burstiness"),
    (lambda: q.priority_mean_waits([1.0, -1.0], [0.1, 0.1], [0.01, 0.01]), "arrival_rates"),
    (lambda: q.priority_mean_waits([1.0], [0.1, 0.1], [0.01, 0.01]), "one entry per class"),
    (lambda: q.priority_mean_waits([1.0], [0.1], [0.001]), r"service_second_moments\[0\]"),
    (lambda: q.priority_mean_waits([], [], []), "arrival_rates"),
    (lambda: q.backlog_after(-1.0, 1.0, 0.1), "duration"),
    (lambda: q.drain_time(10.0, 1.0, 0.1, servers=0), "servers"),
    (lambda: q.burst_drain_time(10.0, 1.0, -1.0, 0.1), "arrival_rate"),
    (lambda: q.burst_drain_time(-10.0, 1.0, 1.0, 0.1), "burst_rate"),
    (lambda: q.burst_drain_time(10.0, -1.0, 1.0, 0.1), "burst_duration"),
    (lambda: q.pooling_comparison(4, 1.0, 1.0, quantile=[0.5, 0.9]), "quantile"),
])
def test_new_functions_name_the_bad_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_unstable_queues_give_inf_not_nan():
    with np.errstate(all="raise"):
        assert q.md1_wait_quantile(0.5, 10.0, 0.1) == math.inf
        assert q.md1_wait_cdf(5.0, 12.0, 0.1) == 0.0
        assert q.kingman_mean_wait(10.0, 0.1, 2.0, 1.0) == math.inf
        assert q.gamma_m1_mean_wait(12.0, 0.1, 0.5) == math.inf
        r = q.pooling_comparison(np.array([2, 2]), np.array([1.0, 3.0]), 1.0)
    assert np.isfinite(r.pooled_mean_wait[0]) and np.isinf(r.pooled_mean_wait[1])
    assert not np.any(np.isnan(r.split_wait_quantile))
