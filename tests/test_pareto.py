"""Pareto fronts: against a brute-force O(n^2) reference, the front's defining properties,
speed on a million candidates, the decode/prefill curves and the design space, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from servingmath import memory, pareto
from servingmath.decode import decode_step_parts, decode_step_time
from servingmath.prefill import prefill_time


def brute_force_mask(x, y, sense=("min", "max")):
    """Reference: point i is on the front unless some j is no worse on both and better on one."""
    x = np.asarray(x, dtype=float) * (1 if sense[0] == "min" else -1)
    y = np.asarray(y, dtype=float) * (1 if sense[1] == "min" else -1)
    no_worse = (x[:, None] <= x[None, :]) & (y[:, None] <= y[None, :])   # [j, i]: j no worse than i
    better = (x[:, None] < x[None, :]) | (y[:, None] < y[None, :])
    return ~np.any(no_worse & better, axis=0)


senses = st.tuples(st.sampled_from(["min", "max"]), st.sampled_from(["min", "max"]))
# small integer grids make ties (equal x, equal y, duplicate points) frequent
coords = st.one_of(st.integers(-5, 5).map(float), st.floats(-1e6, 1e6, allow_nan=False))
point_lists = st.lists(st.tuples(coords, coords), min_size=0, max_size=60)


@settings(max_examples=300, deadline=None)
@given(point_lists, senses)
def test_matches_the_brute_force_reference(points, sense):
    x = [p[0] for p in points]
    y = [p[1] for p in points]
    np.testing.assert_array_equal(pareto.pareto_mask(x, y, sense), brute_force_mask(x, y, sense))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8)), min_size=1, max_size=80), senses)
def test_front_points_are_not_dominated_and_every_other_point_is(points, sense):
    x = np.array([p[0] for p in points], dtype=float)
    y = np.array([p[1] for p in points], dtype=float)
    mask = pareto.pareto_mask(x, y, sense)
    front = np.flatnonzero(mask)
    assert front.size >= 1
    for i in front:                       # no front point is dominated by any point (front or not)
        assert not any(pareto.dominates((x[j], y[j]), (x[i], y[i]), sense) for j in range(x.size))
    for i in np.flatnonzero(~mask):       # every other point is dominated by some *front* point
        assert any(pareto.dominates((x[j], y[j]), (x[i], y[i]), sense) for j in front)


@settings(max_examples=100, deadline=None)
@given(point_lists, senses, st.randoms(use_true_random=False))
def test_the_front_does_not_depend_on_the_order_of_the_candidates(points, sense, rnd):
    x = np.array([p[0] for p in points], dtype=float)
    y = np.array([p[1] for p in points], dtype=float)
    perm = np.array(rnd.sample(range(x.size), x.size), dtype=int)
    np.testing.assert_array_equal(pareto.pareto_mask(x[perm], y[perm], sense),
                                  pareto.pareto_mask(x, y, sense)[perm])


def test_maximising_is_minimising_the_negative():
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 20, 500).astype(float), rng.random(500)
    np.testing.assert_array_equal(pareto.pareto_mask(x, y, ("max", "max")),
                                  pareto.pareto_mask(-x, y, ("min", "max")))
    np.testing.assert_array_equal(pareto.pareto_mask(x, y, ("min", "min")),
                                  pareto.pareto_mask(x, -y, ("min", "max")))


def test_known_small_cases():
    # (TPOT s, tok/s): B is dominated by A (slower, less throughput); C trades; D equals C's TPOT with less
    tpot = [0.020, 0.025, 0.030, 0.030]
    thr = [2000, 1800, 2600, 2500]
    assert pareto.pareto_mask(tpot, thr).tolist() == [True, False, True, False]
    assert pareto.pareto_front(tpot, thr).tolist() == [0, 2]
    assert pareto.pareto_mask([1, 1], [5, 5]).tolist() == [True, True]        # duplicates both stay
    assert pareto.pareto_mask([], []).tolist() == []
    assert pareto.pareto_mask([3.0], [1.0]).tolist() == [True]
    assert pareto.dominates((1, 5), (1, 4)) and not pareto.dominates((1, 4), (1, 5))


def test_front_of_uniform_random_points_has_logarithmic_size():
    # for n i.i.d. points with continuous coordinates the expected front size is H_n = 1 + 1/2 + ... + 1/n
    rng = np.random.default_rng(0)
    sizes = [pareto.pareto_mask(rng.random(2000), rng.random(2000)).sum() for _ in range(200)]
    harmonic = sum(1.0 / k for k in range(1, 2001))
    assert np.mean(sizes) == pytest.approx(harmonic, rel=0.1)


def test_a_million_candidates_are_handled_exactly():
    # speed (10^6 candidates in well under a second) is measured by `make bench`, not asserted here
    rng = np.random.default_rng(0)
    x, y = rng.random(1_000_000), rng.random(1_000_000)
    mask = pareto.pareto_mask(x, y)
    # spot check against brute force on a subsample that contains every front point
    front = np.flatnonzero(mask)
    sample = np.concatenate([front, rng.choice(x.size, 3000, replace=False)])
    sample = np.unique(sample)
    np.testing.assert_array_equal(brute_force_mask(x[sample], y[sample]), mask[sample])


@pytest.mark.parametrize("kwargs, message", [
    (dict(x=[1, 2], y=[1]), "same length"),
    (dict(x=[[1, 2]], y=[[1, 2]]), "1-D"),
    (dict(x=[1, float("nan")], y=[1, 2]), "x must be finite"),
    (dict(x=[1, 2], y=[1, 2], sense=("min", "maximise")), "sense"),
    (dict(x=[1, 2], y=[1, 2], sense="min"), "pair"),
    (dict(x="fast", y=[1]), "x must be a number"),
])
def test_bad_input_names_the_parameter(kwargs, message):
    with pytest.raises((ValueError, KeyError), match=message):
        pareto.pareto_mask(**kwargs)


# ---------------------------------------------------------------- curves of one configuration

def test_decode_curve_matches_the_step_time_and_divides_by_the_gpus():
    b = np.array([1, 8, 64, 256])
    c = pareto.decode_curve("Llama-3.1-70B", "H100", b, 2048, tensor_parallel=4)
    t = decode_step_time("Llama-3.1-70B", "H100", b, 2048, tensor_parallel=4)
    np.testing.assert_allclose(c["tpot"], t, rtol=1e-12)
    np.testing.assert_allclose(c["throughput"], b / t, rtol=1e-12)
    np.testing.assert_allclose(c["throughput_per_gpu"] * 4, c["throughput"], rtol=1e-12)


@pytest.mark.parametrize("accelerator", ["H100", "A100", "L40S"])
def test_past_the_knee_every_larger_batch_is_dominated(accelerator):
    # hybrid model, dense: T(B) = max(T_w, B c_lin) + B m_kv. Past B* = T_w / c_lin throughput is
    # flat at 1 / (c_lin + m_kv) while TPOT grows, so the front is B = 1 .. ceil(B*).
    b = np.arange(1, 1025)
    parts = decode_step_parts("Llama-3.1-8B", accelerator, 1, 2048)
    knee = float(parts["weight_memory"] / parts["linear_compute"])
    c = pareto.decode_curve("Llama-3.1-8B", accelerator, b, 2048)
    # past the knee the throughputs are equal only up to rounding: compare to 12 digits
    front = b[pareto.pareto_mask(c["tpot"], c["throughput"], significant_digits=12)]
    np.testing.assert_array_equal(front, np.arange(1, math.ceil(knee) + 1))
    flat = c["throughput"][b > knee]
    np.testing.assert_allclose(flat, flat[0], rtol=1e-13)


def test_rounding_to_significant_digits_makes_near_ties_ties():
    x = [1.0, 2.0]
    y = [1.0, 1.0 + 1e-15]
    assert pareto.pareto_mask(x, y).tolist() == [True, True]
    assert pareto.pareto_mask(x, y, significant_digits=12).tolist() == [True, False]
    assert pareto.pareto_mask([0.0, 1.0], [0.0, 0.0], significant_digits=3).tolist() == [True, False]
    with pytest.raises(ValueError, match="significant_digits"):
        pareto.pareto_mask(x, y, significant_digits=0)


def test_prefill_is_compute_bound_so_batching_prompts_buys_almost_nothing():
    c = pareto.prefill_curve("Llama-3.1-8B", "H100", 2048, [1, 2, 4, 8, 16])
    assert c["throughput"][-1] / c["throughput"][0] == pytest.approx(1.0, abs=0.01)
    np.testing.assert_allclose(c["ttft"], prefill_time("Llama-3.1-8B", "H100", 2048,
                                                       batch_size=[1, 2, 4, 8, 16]), rtol=1e-12)
    assert np.all(np.diff(c["ttft"]) > 0)


# ---------------------------------------------------------------- the design space

def test_design_space_rows_are_consistent_and_fit_in_memory():
    b = np.array([1, 16, 64, 256, 1024])
    s = pareto.decode_design_space(["Llama-3.1-70B", "Llama-3.1-8B"], ["H100", "A100"], b, 4096,
                                   tensor_parallel=[1, 2, 4, 8], weight_dtypes=["bf16", "fp8", "int4"],
                                   kv_dtypes=["bf16", "fp8"])
    n = s["tpot"].size
    assert n > 0 and all(v.shape == (n,) for v in s.values())
    assert np.all(s["fits"]) and np.all(s["batch_size"] <= s["max_batch"])
    np.testing.assert_allclose(s["throughput_per_gpu"],
                               s["batch_size"] / s["tpot"] / s["tensor_parallel"], rtol=1e-12)
    # 70B in bf16 (141 GB) cannot fit one 80 GB GPU
    assert not np.any((s["model"] == "Llama-3.1-70B") & (s["weight_dtype"] == "bf16")
                      & (s["tensor_parallel"] == 1))
    # spot-check one row against the library it is built from
    i = np.flatnonzero((s["model"] == "Llama-3.1-70B") & (s["accelerator"] == "H100-SXM5-80GB")
                       & (s["weight_dtype"] == "fp8") & (s["kv_dtype"] == "fp8")
                       & (s["tensor_parallel"] == 2) & (s["batch_size"] == 64))
    assert i.size == 1
    want = decode_step_time("Llama-3.1-70B", "H100", 64, 4096, weight_dtype="fp8", kv_dtype="fp8",
                            compute_dtype="fp8", tensor_parallel=2)
    assert s["tpot"][i[0]] == pytest.approx(want, rel=1e-12)
    assert s["max_batch"][i[0]] == memory.max_batch_size("Llama-3.1-70B", "H100", 4096, weight_dtype="fp8",
                                                         kv_dtype="fp8", tensor_parallel=2)


def test_design_space_keeps_infeasible_points_when_asked_and_skips_invalid_degrees():
    s = pareto.decode_design_space("Llama-3.1-70B", "H100", [1, 64], 2048, tensor_parallel=[1, 4],
                                   include_infeasible=True)
    assert s["tpot"].size == 4 and (~s["fits"]).sum() == 2
    q = pareto.decode_design_space("Qwen2.5-7B", "H100", [1], 1024, tensor_parallel=[1, 2, 8])
    assert sorted(q["tensor_parallel"].tolist()) == [1, 2]     # 28 query heads: 8 does not divide them
    empty = pareto.decode_design_space("Llama-3.1-405B", "A10", [1], 1024)
    assert empty["tpot"].size == 0 and empty["model"].dtype == object


def test_compute_dtype_follows_the_hardware():
    assert pareto.compute_dtype_for("fp8", "H100") == "fp8"
    assert pareto.compute_dtype_for("fp8", "A100") == "bf16"
    assert pareto.compute_dtype_for("int4", "H200") == "bf16"
    with pytest.raises(KeyError, match="weight_dtype"):
        pareto.compute_dtype_for("fp6", "H100")


def test_design_space_front_beats_every_dominated_point():
    b = np.unique(np.round(np.geomspace(1, 512, 30)).astype(int))
    s = pareto.decode_design_space("Llama-3.1-8B", ["H100", "A100"], b, 2048, tensor_parallel=[1, 2],
                                   weight_dtypes=["bf16", "fp8"], kv_dtypes=["bf16", "fp8"])
    mask = pareto.pareto_mask(s["tpot"], s["throughput_per_gpu"])
    np.testing.assert_array_equal(mask, brute_force_mask(s["tpot"], s["throughput_per_gpu"]))
