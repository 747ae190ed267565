"""Tests of servingmath.capacity: known values, agreement with slo.steady_state, properties, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ROOT
from servingmath import memory, slo
from servingmath.capacity import (Plan, batch_quantile, cheapest_plan, confirm_plan, cost_per_million_tokens,
                                  load_prices, max_mean_batch, plan_candidates, plan_sweep, replica_capacity,
                                  replica_curves, replicas_needed, reprice, simulate_plan, workload_statistics)

PRICES = {"H100": 3.0, "A100-80GB": 1.3}
M8 = "Llama-3.1-8B"


# ---------------------------------------------------------------- money

def test_cost_per_million_tokens_known_values():
    # $3 per hour for 1000 tokens/s: 3.6e6 tokens per hour, so $0.8333 per million
    assert cost_per_million_tokens(3.0, 1000.0) == pytest.approx(3.0 / 3.6)
    # an 8-GPU node at $24/h making 10000 tok/s: $0.6667 per million, $0.000667 per thousand
    assert cost_per_million_tokens(24.0, 10_000.0) == pytest.approx(2 / 3)
    out = cost_per_million_tokens(np.array([1.0, 2.0]), 1000.0)
    assert isinstance(out, np.ndarray) and out.tolist() == pytest.approx([1 / 3.6, 2 / 3.6])
    assert isinstance(cost_per_million_tokens(1.0, 1.0), float)


@pytest.mark.parametrize("price, rate, name", [(0.0, 1.0, "price_per_hour"), (1.0, -5.0, "tokens_per_second"),
                                               ("3", 1.0, "price_per_hour"), (1.0, float("nan"), "tokens_per_second")])
def test_cost_per_million_tokens_rejects_bad_input(price, rate, name):
    with pytest.raises(ValueError, match=name):
        cost_per_million_tokens(price, rate)


def test_replicas_needed_rounds_up_and_keeps_headroom():
    assert replicas_needed(10.0, 5.0) == 2                      # exactly 2, not 3 (float noise)
    assert replicas_needed(10.0, 5.0, utilisation_target=0.8) == 3
    assert replicas_needed(10.1, 5.0) == 3
    assert replicas_needed(0.3, 5.0) == 1
    assert replicas_needed(0.0, 5.0) == 0
    assert replicas_needed(np.array([5.0, 10.0, 20.0]), 4.0).tolist() == [2, 3, 5]
    assert replicas_needed(0.7 * 3, 0.7, utilisation_target=1.0) == 3   # 2.1 / 0.7 = 3.0000000000000004


@pytest.mark.parametrize("kwargs, name", [(dict(arrival_rate=-1.0, capacity_per_replica=1.0), "arrival_rate"),
                                          (dict(arrival_rate=1.0, capacity_per_replica=0.0), "capacity_per_replica"),
                                          (dict(arrival_rate=1.0, capacity_per_replica=1.0, utilisation_target=1.2),
                                           "utilisation_target")])
def test_replicas_needed_rejects_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        replicas_needed(**kwargs)


@given(st.floats(0.01, 1000), st.floats(0.01, 1000), st.floats(0.05, 1.0), st.floats(1.0, 3.0))
def test_replicas_non_decreasing_in_traffic_and_sufficient(rate, cap, u, growth):
    r1 = replicas_needed(rate, cap, u)
    r2 = replicas_needed(rate * growth, cap, u)
    assert r2 >= r1 >= 1
    assert r1 * u * cap >= rate * (1 - 1e-9)            # enough capacity
    assert (r1 - 1) * u * cap < rate * (1 + 1e-9)       # and not one more than needed


# ---------------------------------------------------------------- workload and slots

def test_workload_statistics_length_biased_context():
    # fixed lengths: L_p + L_o / 2
    assert workload_statistics(1000, 200)["decode_context"] == 1100.0
    # two requests: 99 steps at mean context 1050, 499 at 1250
    stats = workload_statistics([1000, 1000], [100, 500])
    assert stats["decode_context"] == pytest.approx((99 * 1050 + 499 * 1250) / 598)
    assert stats["mean_output"] == 300.0 and stats["mean_prompt"] == 1000.0
    assert stats["prompt_quantile"] == 1000.0


@pytest.mark.parametrize("prompts, outputs, name", [([10, 20], [5, 5, 5], "same length"), ([0, 5], [4, 4], "prompt_lens"),
                                                    ([5, 5], [1, 1], "more than 1 token"), ([], [], "prompt_lens")])
def test_workload_rejects_bad_lengths(prompts, outputs, name):
    with pytest.raises(ValueError, match=name):
        workload_statistics(prompts, outputs)


def test_batch_quantile_and_its_inverse():
    assert batch_quantile(100.0) == pytest.approx(100 + 2.3263478740408408 * 10)
    assert batch_quantile(0.0) == 0.0
    for slots in [1, 10, 64, 256, 1000]:
        assert batch_quantile(max_mean_batch(slots)) == pytest.approx(slots)
    # a Poisson batch with that mean exceeds the slots about 1 % of the time (normal approximation)
    rng = np.random.default_rng(0)
    mean = max_mean_batch(256)
    assert 0.004 < np.mean(rng.poisson(mean, 200_000) > 256) < 0.02
    with pytest.raises(ValueError, match="quantile"):
        batch_quantile(10.0, quantile=1.0)
    with pytest.raises(ValueError, match="slots"):
        max_mean_batch(-1)


# ---------------------------------------------------------------- one replica

@pytest.mark.parametrize("model, gpu, lp, lo, kwargs", [
    (M8, "H100", 1024, 256, {}),
    (M8, "A100-80GB", 4096, 128, {"mfu": 0.6, "mbu": 0.6}),
    ("Llama-3.1-70B", "H100", 2048, 512, {"tensor_parallel": 4, "weight_dtype": "fp8", "kv_dtype": "fp8",
                                          "compute_dtype": "fp8"}),
])
def test_replica_curves_reduce_to_slo_steady_state_for_fixed_lengths(model, gpu, lp, lo, kwargs):
    b = np.array([1, 4, 32, 100])
    curves = replica_curves(model, gpu, lp, lo, b, **kwargs)
    state = slo.steady_state(model, gpu, b, lp, lo, **kwargs)
    for ours, theirs in [("rate", "rate"), ("tpot", "tpot"), ("ttft", "ttft_p99"), ("utilisation", "utilisation"),
                         ("step_time", "step_time")]:
        np.testing.assert_allclose(curves[ours], state[theirs], rtol=1e-12)


def test_replica_capacity_equals_max_batch_for_slos_without_slot_headroom():
    for lp, lo, tpot, ttft in [(1024, 256, 0.05, 1.0), (8192, 128, 0.05, 1.0), (2048, 512, 0.02, 0.3)]:
        ours = replica_capacity(M8, "H100", lp, lo, ttft_slo=ttft, tpot_slo=tpot, slot_quantile=None)
        theirs = slo.max_batch_for_slos(M8, "H100", lp, lo, tpot_slo=tpot, ttft_slo=ttft)
        assert ours["batch_size"] == theirs["batch_size"]
        assert ours["binding"] == theirs["binding"]
        assert ours["rate"] == pytest.approx(theirs["rate"], rel=1e-12)


def test_replica_capacity_slot_headroom_lowers_the_memory_limit():
    wall = memory.max_batch_size(M8, "H100", 1152)
    r = replica_capacity(M8, "H100", 1024, 256, ttft_slo=1.0, tpot_slo=0.05)
    assert r["memory_limit"] == math.floor(max_mean_batch(wall)) < wall
    assert batch_quantile(r["batch_size"]) <= wall
    capped = replica_capacity(M8, "H100", 1024, 256, ttft_slo=1.0, tpot_slo=0.05, max_batch_size=64)
    assert capped["binding"] == "max_batch_size" and capped["batch_size"] == math.floor(max_mean_batch(64))
    assert capped["rate"] < r["rate"]


def test_replica_capacity_infeasible_is_zero_not_an_error():
    r = replica_capacity(M8, "H100", 1024, 256, ttft_slo=1.0, tpot_slo=0.001)   # below the weight read
    assert r["rate"] == 0.0 and r["batch_size"] == 0 and r["binding"] == "tpot" and r["tpot"] is None and r["step_time"] is None
    r = replica_capacity("Llama-3.1-405B", "H100", 1024, 256, ttft_slo=1.0, tpot_slo=0.05)   # does not fit
    assert r["rate"] == 0.0 and r["binding"] in ("max_batch_size", "memory") and r["memory_limit"] == 0


@pytest.mark.parametrize("kwargs, name", [(dict(ttft_slo=0.0), "ttft_slo"), (dict(tpot_slo=-1.0), "tpot_slo"),
                                          (dict(max_batch_size=0), "max_batch_size"), (dict(quantile=1.5), "quantile"),
                                          (dict(weight_dtype="fp6"), "weight_dtype"), (dict(mbu=0.0), "mbu"),
                                          (dict(slot_quantile=0.2), "slot_quantile"), (dict(overlap="max"), "overlap")])
def test_replica_capacity_rejects_bad_input(kwargs, name):
    args = dict(ttft_slo=1.0, tpot_slo=0.05)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        replica_capacity(M8, "H100", 1024, 256, **args)


@settings(max_examples=25)
@given(st.floats(0.008, 0.2), st.floats(1.0, 3.0), st.floats(0.05, 2.0), st.floats(1.0, 3.0))
def test_capacity_never_falls_when_a_target_loosens(tpot, tpot_factor, ttft, ttft_factor):
    tight = replica_capacity(M8, "A100-80GB", 2048, 256, ttft_slo=ttft, tpot_slo=tpot, mbu=0.6)
    loose = replica_capacity(M8, "A100-80GB", 2048, 256, ttft_slo=ttft * ttft_factor, tpot_slo=tpot * tpot_factor,
                             mbu=0.6)
    assert loose["rate"] >= tight["rate"]
    assert loose["batch_size"] >= tight["batch_size"]


# ---------------------------------------------------------------- the design space

def _plans(rate=20.0, ttft=1.0, tpot=0.05, **kwargs):
    kwargs.setdefault("tensor_parallel", [1, 2])
    return plan_candidates(M8, rate, [512, 1024, 2048, 1024], [128, 256, 512, 64], ttft_slo=ttft, tpot_slo=tpot,
                           prices=PRICES, **kwargs)


def test_plan_candidates_are_sorted_and_priced_consistently():
    plans = _plans(batch_caps=(64, 256), mfu=0.6, mbu=0.6)
    assert plans and all(isinstance(p, Plan) and p.feasible for p in plans)
    costs = [p.cost_per_million_tokens for p in plans]
    assert costs == sorted(costs)
    for p in plans:
        assert p.replicas == replicas_needed(p.arrival_rate, p.capacity, p.utilisation_target)
        assert p.gpus == p.replicas * p.tensor_parallel
        assert p.cost_per_hour == pytest.approx(p.gpus * p.price_per_gpu_hour)
        assert p.cost_per_million_tokens == pytest.approx(
            cost_per_million_tokens(p.cost_per_hour, p.arrival_rate * p.mean_output))
        assert p.cost_per_million_tokens_at_capacity == pytest.approx(
            cost_per_million_tokens(p.tensor_parallel * p.price_per_gpu_hour, p.capacity * p.mean_output))
        # headroom and rounding up can only raise the cost above the at-capacity floor
        assert p.cost_per_million_tokens >= p.cost_per_million_tokens_at_capacity / p.utilisation_target - 1e-12
        assert p.utilisation <= p.utilisation_target + 1e-12
    assert {p.accelerator for p in plans} == {"H100-SXM5-80GB", "A100-SXM4-80GB"}
    assert {p.compute_dtype for p in plans if p.weight_dtype == "fp8" and p.accelerator.startswith("A100")} == {"bf16"}


def test_plan_candidates_match_replica_capacity():
    for p in _plans(batch_caps=(128,))[:3]:
        r = replica_capacity(M8, p.accelerator, [512, 1024, 2048, 1024], [128, 256, 512, 64], ttft_slo=1.0, tpot_slo=0.05,
                             tensor_parallel=p.tensor_parallel, weight_dtype=p.weight_dtype, kv_dtype=p.kv_dtype,
                             max_batch_size=p.max_batch_size)
        assert (r["rate"], r["batch_size"], r["binding"]) == (p.capacity, p.batch_size, p.binding)


def test_plan_candidates_take_a_named_setting():
    """setting="realistic" builds every configuration from the book's realistic setting, as a replica does."""
    from servingmath.settings import setting_options

    lens = ([512, 1024, 2048, 1024], [128, 256, 512, 64])
    named = plan_candidates(M8, 20.0, *lens, ttft_slo=1.0, tpot_slo=0.05, prices=PRICES, setting="realistic")
    bound = plan_candidates(M8, 20.0, *lens, ttft_slo=1.0, tpot_slo=0.05, prices=PRICES)
    assert named and all(p.mfu == 0.5 and p.mbu == 0.75 for p in named)
    assert max(p.capacity for p in named) < max(p.capacity for p in bound)
    for p in named[:3]:
        r = replica_capacity(M8, p.accelerator, *lens, ttft_slo=1.0, tpot_slo=0.05,
                             tensor_parallel=p.tensor_parallel, weight_dtype=p.weight_dtype, kv_dtype=p.kv_dtype,
                             max_batch_size=p.max_batch_size, **setting_options("realistic"))
        assert (r["rate"], r["batch_size"], r["binding"]) == (p.capacity, p.batch_size, p.binding)
    with pytest.raises(KeyError, match="setting"):
        plan_candidates(M8, 20.0, *lens, ttft_slo=1.0, tpot_slo=0.05, prices=PRICES, setting="optimistic")


def test_plan_candidates_prune_and_keep_infeasible_on_request():
    both = _plans(tpot=0.006, include_infeasible=True)
    feasible = _plans(tpot=0.006)
    assert len(feasible) < len(both)
    assert all(p.feasible for p in feasible)
    dropped = [p for p in both if not p.feasible]
    assert dropped and all(p.replicas == 0 and p.cost_per_million_tokens == math.inf for p in dropped)
    # Llama-3.1-8B has 8 KV heads and 32 query heads: TP 3 cannot split it and is skipped
    assert {p.tensor_parallel for p in _plans(tensor_parallel=[1, 3])} == {1}


def test_cheapest_plan_is_the_first_candidate_and_raises_when_nothing_fits():
    assert cheapest_plan(M8, 20.0, 1024, 256, ttft_slo=1.0, tpot_slo=0.05, prices=PRICES) == plan_candidates(
        M8, 20.0, 1024, 256, ttft_slo=1.0, tpot_slo=0.05, prices=PRICES)[0]
    with pytest.raises(ValueError, match="no configuration"):
        cheapest_plan(M8, 20.0, 1024, 256, ttft_slo=1.0, tpot_slo=1e-4, prices=PRICES)


@pytest.mark.parametrize("kwargs, name", [
    (dict(prices={}), "prices"), (dict(prices={"H100": -1.0}), "prices"), (dict(prices={"H1000": 2.0}), "accelerator"),
    (dict(dtypes=[("fp8",)]), "dtypes"), (dict(dtypes=[("fp8", "fp5")]), "kv_dtype"), (dict(batch_caps=[0]), "batch_caps"),
    (dict(utilisation_target=0.0), "utilisation_target"), (dict(arrival_rate=0.0), "arrival_rate"),
    (dict(tensor_parallel=[0]), "tensor_parallel")])
def test_plan_candidates_rejects_bad_input(kwargs, name):
    args = dict(model=M8, arrival_rate=10.0, prompt_lens=1024, output_lens=256, ttft_slo=1.0, tpot_slo=0.05,
                prices=PRICES)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        plan_candidates(**args)


def test_plan_sweep_equals_plan_candidates_pair_by_pair():
    sweep = plan_sweep(M8, 20.0, 1024, 256, ttft_slos=[0.3, 1.0], tpot_slos=[0.02, 0.05], prices=PRICES,
                       tensor_parallel=[1], mbu=0.6)
    for plans, (ttft, tpot) in zip(sweep, [(0.3, 0.02), (1.0, 0.05)]):
        assert plans == plan_candidates(M8, 20.0, 1024, 256, ttft_slo=ttft, tpot_slo=tpot, prices=PRICES,
                                        tensor_parallel=[1], mbu=0.6)
    with pytest.raises(ValueError, match="same length"):
        plan_sweep(M8, 20.0, 1024, 256, ttft_slos=[0.3, 1.0], tpot_slos=[0.02], prices=PRICES)
    with pytest.raises(ValueError, match="unknown keyword"):
        plan_sweep(M8, 20.0, 1024, 256, ttft_slos=[0.3], tpot_slos=[0.02], prices=PRICES, mfu_=0.5)


SLO_PAIRS = st.tuples(st.floats(0.1, 2.0), st.floats(0.008, 0.1))


@settings(max_examples=20)
@given(SLO_PAIRS, st.floats(1.0, 4.0), st.floats(1.0, 4.0))
def test_cheapest_cost_never_rises_when_the_slos_loosen(pair, ttft_factor, tpot_factor):
    ttft, tpot = pair
    sweep = plan_sweep(M8, 30.0, [512, 2048], [128, 384], ttft_slos=[ttft, ttft * ttft_factor],
                       tpot_slos=[tpot, tpot * tpot_factor], prices=PRICES, tensor_parallel=[1, 2], batch_caps=(64, 256), mfu=0.6, mbu=0.6)
    tight, loose = (plans[0].cost_per_million_tokens if plans else math.inf for plans in sweep)
    assert loose <= tight


@settings(max_examples=20)
@given(st.floats(0.5, 200.0), st.floats(1.0, 5.0))
def test_replicas_and_cost_per_hour_never_fall_when_traffic_grows(rate, growth):
    plans = _plans(rate=rate)
    grown = {p.label: p for p in reprice(plans, rate * growth)}
    for p in plans:
        q = grown[p.label]
        assert q.replicas >= p.replicas and q.cost_per_hour >= p.cost_per_hour


@settings(max_examples=20)
@given(SLO_PAIRS, st.floats(0.5, 100.0), st.floats(0.3, 1.0), st.sampled_from([(32,), (64, 256), (512,)]))
def test_the_chosen_plan_meets_its_own_constraints(pair, rate, u, caps):
    ttft, tpot = pair
    try:
        p = cheapest_plan(M8, rate, [256, 1024, 3000], [64, 256, 700], ttft_slo=ttft, tpot_slo=tpot, prices=PRICES,
                          tensor_parallel=[1, 2], batch_caps=caps, utilisation_target=u, mfu=0.6, mbu=0.6)
    except ValueError:
        return
    assert p.tpot <= tpot and p.ttft <= ttft
    assert p.replicas * p.capacity * u >= rate * (1 - 1e-9)
    context = round(workload_statistics([256, 1024, 3000], [64, 256, 700])["decode_context"])
    wall = memory.max_batch_size(M8, p.accelerator, context, weight_dtype=p.weight_dtype, kv_dtype=p.kv_dtype,
                                 tensor_parallel=p.tensor_parallel)
    assert 1 <= p.batch_size and batch_quantile(p.batch_size) <= min(wall, p.max_batch_size) + 1e-9
    assert p.max_batch_size in caps


# ---------------------------------------------------------------- plans, prices, simulation

def test_plan_with_traffic_and_replicas():
    p = _plans()[0]
    doubled = p.with_traffic(2 * p.arrival_rate)
    assert doubled.replicas == replicas_needed(2 * p.arrival_rate, p.capacity, p.utilisation_target)
    assert doubled.capacity == p.capacity and doubled.label == p.label
    more = p.with_replicas(p.replicas + 1)
    assert more.cost_per_hour == pytest.approx(p.cost_per_hour + p.tensor_parallel * p.price_per_gpu_hour)
    assert more.cost_per_million_tokens > p.cost_per_million_tokens
    assert p.as_dict()["label"] == p.label
    server = p.server()
    assert server.deployment == p.deployment          # Plan.server() is Server(plan.deployment)
    assert (server.deployment.tensor_parallel, server.deployment.weight_dtype, server.deployment.mbu) == (
        p.tensor_parallel, p.weight_dtype, p.mbu)


def test_load_prices_reads_the_book_table():
    prices = load_prices(ROOT / "data" / "gpu-prices.csv")
    assert set(prices) == {"A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB", "L40S"}
    assert all(0.5 < v < 10 for v in prices.values())


@pytest.mark.parametrize("row, name", [("H100,8,3.00,3.00,x,2026,y", "usd_per_node_hour"),
                                        ("H1000,8,3.00,24.00,x,2026,y", "accelerator"),
                                        ("H100,8,-3.00,-24.00,x,2026,y", "usd_per_gpu_hour")])
def test_load_prices_rejects_bad_rows(tmp_path, row, name):
    path = tmp_path / "prices.csv"
    path.write_text("accelerator,gpus_per_node,usd_per_gpu_hour,usd_per_node_hour,kind,as_of,basis\n" + row + "\n")
    with pytest.raises(ValueError, match=name):
        load_prices(path)


def test_simulate_and_confirm_a_plan():
    lp = np.tile([512, 1024, 2048, 256], 60)
    lo = np.tile([128, 256, 64, 512], 60)
    plans = plan_candidates(M8, 30.0, lp, lo, ttft_slo=0.5, tpot_slo=0.03, prices={"A100-80GB": 1.3}, tensor_parallel=[1],
                            dtypes=[("bf16", "bf16")], batch_caps=(128,), mbu=0.6, mfu=0.6)
    p = plans[0]
    result = simulate_plan(p, lp, lo)
    assert len(result.records) == lp.size
    # thinning: one replica sees the plan's traffic divided by its replicas
    observed = (lp.size - 1) / (result.records.arrival.max() - result.records.arrival.min())
    assert observed == pytest.approx(p.load_per_replica, rel=0.25)
    confirmed = confirm_plan(p, lp, lo, ttft_slo=0.5, tpot_slo=0.03)
    assert confirmed["replicas"] >= p.replicas and confirmed["added"] == confirmed["replicas"] - p.replicas
    assert confirmed["ttft"] <= 0.5 and confirmed["tpot"] <= 0.03
    assert confirmed["plan"].replicas == confirmed["replicas"]
    assert confirmed["history"][-1][0] == confirmed["replicas"]
    with pytest.raises(ValueError, match="plan"):
        simulate_plan("not a plan", lp, lo)
    with pytest.raises(ValueError, match="still misses"):
        confirm_plan(p, lp, lo, ttft_slo=0.5, tpot_slo=1e-4, max_extra_replicas=0)
