"""The fleet simulator: replicas behind a router, against queueing theory and the single server.

* A fleet of one replica is the single server, record for record, under every router.
* c one-at-a-time replicas with (nearly) exponential service: a central queue is M/M/c
  (Erlang C) and random routing is c x M/M/1, each within the 95 % interval over five seeds,
  and precise enough to reject the other formula; join-the-shortest-queue lies in between.
* Routers do what they say: round robin in turn, least loaded balances, prefix affinity keeps a
  prefix on one replica while the fleet is balanced and spreads a hot prefix when it is not.
* Autoscaling: replicas take requests only while serving, after their warm-up; a drained
  replica is paid for until its last request ends.
* Invariants over random fleets (hypothesis), and bad input refused by name.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from servingmath import queueing, simulate as sim
from servingmath.workloads import (ClosedLoop, Geometric, PiecewisePoisson, Poisson, Timestamps, Workload,
                                   chat_workload)

H100 = "H100-SXM5-80GB"
LLAMA = "Llama-3.1-8B"
SERVER = sim.Server(LLAMA, H100)
T95 = {4: 2.7764451051977987, 5: 2.5705818366147395}     # Student t, 97.5 % quantile, by degrees of freedom


def interval(values):
    """Mean and half-width of the 95 % t-interval of per-seed values."""
    v = np.asarray(values, dtype=float)
    return float(v.mean()), T95[v.size - 1] * float(v.std(ddof=1)) / math.sqrt(v.size)


def same_records(a, b):
    for name in ("arrival", "scheduled", "first_token", "finish", "preemptions"):
        np.testing.assert_array_equal(getattr(a.records, name), getattr(b.records, name), err_msg=name)


# ---- a fleet of one replica is the single server --------------------------------------------------------
ROUTERS = [sim.Random(), sim.RoundRobin(), sim.LeastLoaded(), sim.LeastLoaded(measure="requests"),
           sim.PrefixAffinity(), sim.CentralQueue()]


@pytest.mark.parametrize("policy", [sim.ContinuousBatching(), sim.ContinuousBatching(max_batch_size=12),
                                    sim.ChunkedPrefill(token_budget=256, max_batch_size=32),
                                    sim.StaticBatching(batch_size=6, timeout=0.05)])
def test_a_fleet_of_one_replica_is_the_single_server(policy):
    work = chat_workload(600, seed=1).with_priorities(0.3, seed=2)
    single = sim.simulate(sim.SimulationConfig(SERVER, work, Poisson(15.0), policy), seed=4)
    for router in ROUTERS:
        if isinstance(router, sim.CentralQueue) and isinstance(policy, sim.StaticBatching):
            # a central queue hands a static replica one batch of requests at a time, so its batches
            # (and their class order) are formed from fewer waiting requests: not the same system
            continue
        fleet = sim.simulate(sim.FleetConfig(replicas=[sim.Replica(SERVER, policy)], router=router, workload=work,
                                             arrivals=Poisson(15.0)), seed=4)
        same_records(single, fleet)
        for i in (0, 17, 599):
            np.testing.assert_array_equal(single.token_times(i), fleet.token_times(i))
        assert (fleet.records.replica == 0).all()
        assert fleet.metrics().itl.p99 == single.metrics().itl.p99


def test_a_fleet_of_one_speculative_replica_is_the_single_server():
    work = chat_workload(300, seed=3)
    spec = sim.Speculative(num_draft_tokens=3, acceptance_rate=0.7, draft_step_time=1e-3)
    single = sim.simulate(sim.SimulationConfig(SERVER, work, Poisson(8.0), speculative=spec), seed=2)
    fleet = sim.simulate(sim.FleetConfig(replicas=[sim.Replica(SERVER, speculative=spec)], router=sim.Random(),
                                         workload=work, arrivals=Poisson(8.0)), seed=2)
    same_records(single, fleet)


@pytest.mark.parametrize("router", [sim.Random(), sim.RoundRobin()])
@pytest.mark.parametrize("policy", [sim.ContinuousBatching(max_batch_size=12),
                                    sim.ChunkedPrefill(token_budget=256, max_batch_size=32),
                                    sim.StaticBatching(batch_size=6, timeout=0.05)])
def test_independent_replicas_simulated_one_by_one_are_the_fleet_bit_for_bit(router, policy):
    # without an autoscaler these replicas never interact: they are simulated one at a time (or dealt out
    # to processes); a scaling that changes nothing keeps them in the fleet's one event loop
    work = chat_workload(800, seed=5)
    kw = dict(replicas=[sim.Replica(SERVER, policy)] * 3, router=router, workload=work, arrivals=Poisson(45.0))
    apart = sim.simulate(sim.FleetConfig(**kw), seed=6)
    together = sim.simulate(sim.FleetConfig(**kw, autoscaler=sim.ScheduledScaling([1e9], [3])), seed=6)
    processes = sim.simulate(sim.FleetConfig(**kw), seed=6, workers=2)
    assert len(set(apart.records.replica.tolist())) == 3
    for other in (together, processes):
        same_records(apart, other)
        np.testing.assert_array_equal(apart.records.replica, other.records.replica)
        for i in (0, 17, 799):
            np.testing.assert_array_equal(apart.token_times(i), other.token_times(i))
        for k in range(3):
            np.testing.assert_array_equal(apart.timeseries(k)["kv_tokens"], other.timeseries(k)["kv_tokens"])


# ---- queueing theory: M/M/c and c x M/M/1 ---------------------------------------------------------------
C, RHO, STEP, MEAN_OUT = 4, 0.8, 1e-3, 1000
SERVICE = MEAN_OUT * STEP                         # geometric(1/1000) steps of 1 ms: exponential to 0.05 %
ARRIVAL = RHO * C / SERVICE
ONE_AT_A_TIME = sim.Replica(sim.Server(step_times=sim.LinearStepTimes(STEP)), sim.ContinuousBatching(max_batch_size=1))


def waits(router, seeds=range(5), n=10_000):
    mean, waited = [], []
    for seed in seeds:
        work = Workload.sample(n, 1, Geometric(MEAN_OUT), seed=100 + seed)
        res = sim.simulate(sim.FleetConfig(replicas=[ONE_AT_A_TIME] * C, router=router, workload=work,
                                           arrivals=Poisson(ARRIVAL)), seed=seed)
        q = res.records.queue_delay
        mean.append(q.mean())
        waited.append((q > 1e-12).mean())
    return interval(mean), interval(waited)


def test_a_central_queue_over_c_replicas_is_mmc():
    (mean, half), (p_wait, p_half) = waits(sim.CentralQueue())
    theory = queueing.pooling_comparison(C, ARRIVAL, SERVICE)
    assert abs(mean - theory.pooled_mean_wait) <= half                    # Erlang C: C s / (c - a)
    assert abs(p_wait - theory.pooled_wait_probability) <= p_half
    assert half < 0.2 * mean                                              # precise enough to mean something
    assert abs(mean - theory.split_mean_wait) > 10 * half                 # and it is not c x M/M/1
    assert theory.pooled_mean_wait == pytest.approx(queueing.mmc_mean_wait(C, ARRIVAL, SERVICE))


def test_random_routing_is_c_separate_mm1_queues():
    (mean, half), (p_wait, p_half) = waits(sim.Random())
    theory = queueing.pooling_comparison(C, ARRIVAL, SERVICE)
    assert abs(mean - theory.split_mean_wait) <= half                     # rho s / (1 - rho)
    assert abs(p_wait - theory.split_wait_probability) <= p_half          # an M/M/1 arrival waits w.p. rho
    assert abs(mean - theory.pooled_mean_wait) > 5 * half


def test_join_the_shortest_queue_lies_between_pooled_and_split():
    # JSQ by requests is not M/M/c (a request commits to a queue at arrival), nor c x M/M/1
    (jsq, half), _ = waits(sim.LeastLoaded(measure="requests"))
    (rr, rr_half), _ = waits(sim.RoundRobin())
    theory = queueing.pooling_comparison(C, ARRIVAL, SERVICE)
    assert jsq - half > theory.pooled_mean_wait                          # worse than one shared queue
    assert jsq + half < rr - rr_half                                      # round robin: Erlang-c gaps, worse
    assert rr + rr_half < theory.split_mean_wait                          # ... but better than random


# ---- the routers -----------------------------------------------------------------------------------------
def run_fleet(router, work, rate, n_replicas=4, replica=None, seed=0, **kw):
    replicas = [replica or sim.Replica(SERVER)] * n_replicas
    return sim.simulate(sim.FleetConfig(replicas=replicas, router=router, workload=work, arrivals=Poisson(rate),
                                        **kw), seed=seed)


def test_round_robin_takes_the_replicas_in_turn():
    res = run_fleet(sim.RoundRobin(), Workload.fixed(403, 200, 20), 20.0)
    np.testing.assert_array_equal(res.records.replica, np.arange(403) % 4)
    assert res.requests_per_replica().tolist() == [101, 101, 101, 100]


def test_random_routing_splits_uniformly():
    res = run_fleet(sim.Random(), Workload.fixed(4000, 100, 10), 40.0)
    counts = res.requests_per_replica()
    assert counts.sum() == 4000
    assert np.abs(counts - 1000).max() < 4 * math.sqrt(4000 * 0.25 * 0.75)   # binomial spread
    other = run_fleet(sim.Random(), Workload.fixed(4000, 100, 10), 40.0, seed=1)
    assert not np.array_equal(other.records.replica, res.records.replica)


def test_least_loaded_balances_outstanding_tokens():
    # one replica gets all long requests under round robin; least loaded spreads the work
    prompts = np.tile([2000, 50, 50, 50], 300)
    outputs = np.tile([600, 20, 20, 20], 300)
    work = Workload.from_lists(prompts, outputs)
    rr = run_fleet(sim.RoundRobin(), work, 24.0)
    ll = run_fleet(sim.LeastLoaded(), work, 24.0)
    tokens = lambda res: np.bincount(res.records.replica, weights=prompts + outputs, minlength=4)
    assert tokens(rr).max() / tokens(rr).min() > 20                      # every long request on replica 0
    assert tokens(ll).max() / tokens(ll).min() < 1.5
    assert ll.metrics(itl=False).e2e.p99 < rr.metrics(itl=False).e2e.p99


def test_records_say_which_replica_served_each_request():
    res = run_fleet(sim.LeastLoaded(), chat_workload(400, seed=5), 30.0)
    for i in range(0, 400, 13):
        times = res.token_times(i)
        assert times[0] == res.records.first_token[i] and times[-1] == res.records.finish[i]
    # each replica's time series only knows its own requests
    for k in range(4):
        assert res.timeseries(k)["running"].max() <= (res.records.replica == k).sum()
    m = res.replica_metrics(2)
    assert m.n_requests == (res.records.replica == 2).sum()
    assert res.instances == ["replica-0", "replica-1", "replica-2", "replica-3"]


def test_prefix_affinity_keeps_each_prefix_on_one_replica_while_balanced():
    work = chat_workload(2000, seed=1).with_shared_prefixes(12, 1500, seed=2)
    res = run_fleet(sim.PrefixAffinity(), work, 20.0)
    ids, reps = work.prefix_ids, res.records.replica
    homes = [np.unique(reps[ids == k]).size for k in range(12)]
    assert max(homes) == 1                                                # one replica per prefix
    assert len({int(reps[ids == k][0]) for k in range(12)}) == 4          # and every replica has some
    rnd = run_fleet(sim.Random(), work, 20.0)
    assert res.prefix_hit_rate() > rnd.prefix_hit_rate()


def test_prefix_affinity_spreads_a_hot_prefix_when_the_fleet_is_imbalanced():
    # 90 % of the traffic shares one prefix: pinned, one replica would take it all
    work = chat_workload(3000, seed=3).with_shared_prefixes(1, 800, fraction=0.9, seed=4)
    res = run_fleet(sim.PrefixAffinity(balance_abs=8, balance_rel=1.5), work, 60.0)
    hot = work.prefix_ids == 0
    share = np.bincount(res.records.replica[hot], minlength=4) / hot.sum()
    assert share.max() < 0.6 and (share > 0.1).all()
    pinned = run_fleet(sim.PrefixAffinity(balance_abs=1e9), work, 60.0)    # never "imbalanced"
    assert np.unique(pinned.records.replica[hot]).size == 1
    assert pinned.metrics(itl=False).ttft.p99 > res.metrics(itl=False).ttft.p99


def test_heterogeneous_replicas_with_their_own_policies():
    fast = sim.Replica(sim.Server(LLAMA, H100), sim.ChunkedPrefill())
    slow = sim.Replica(sim.Server(LLAMA, "A100-SXM4-80GB"), sim.ContinuousBatching(max_batch_size=64))
    res = sim.simulate(sim.FleetConfig(replicas=[fast, slow], router=sim.LeastLoaded(),
                                       workload=chat_workload(1500, seed=2), arrivals=Poisson(30.0)), seed=0)
    counts = res.requests_per_replica()
    assert counts[0] > counts[1] > 0                  # the faster replica drains its queue sooner: more work
    assert np.isfinite(res.records.finish).all()


# ---- autoscaling -----------------------------------------------------------------------------------------------
def test_scheduled_scaling_routes_only_to_serving_replicas_after_their_warmup():
    scaler = sim.ScheduledScaling(times=[0.0, 20.0, 40.0], replicas=[1, 3, 2], warmup=5.0)
    work = Workload.fixed(3000, 300, 30)
    res = sim.simulate(sim.FleetConfig(replicas=[SERVER] * 3, router=sim.RoundRobin(), workload=work,
                                       arrivals=Poisson(50.0), autoscaler=scaler), seed=1)
    r = res.records
    assert (r.replica[r.arrival < 25.0] == 0).all()                       # replicas 1, 2 warm up 20-25 s
    late = (r.arrival > 25.0) & (r.arrival < 40.0)
    assert set(r.replica[late].tolist()) == {0, 1, 2}
    assert set(r.replica[r.arrival > 40.0].tolist()) == {0, 1}            # replica 2 drains from 40 s
    timeline = res.replica_timeline()
    # held: 1 replica for [0, 20), 3 from 20 s (warming counts), 2 after replica 2's last request
    drained = r.finish[r.replica == 2].max()
    end = r.finish.max()
    assert drained > 40.0
    assert timeline["replica_seconds"] == pytest.approx(20.0 + 2 * (end - 20.0) + (drained - 20.0))
    assert timeline["serving"].max() == 3


def test_rate_scaling_follows_a_diurnal_day_with_n_plus_one_headroom():
    day = PiecewisePoisson.diurnal(mean_rate=8.0, peak_to_trough=4.0, period=1200.0, steps=24)
    n = int(day.expected_arrivals(1200.0))
    scaler = sim.RateScaling(rate_per_replica=3.0, interval=50.0, headroom=1, warmup=15.0)
    fleet = sim.FleetConfig(replicas=[SERVER] * 8, router=sim.LeastLoaded(), workload=Workload.fixed(n, 400, 60),
                            arrivals=day, autoscaler=scaler)
    res = sim.simulate(fleet, seed=0)
    tl = res.replica_timeline()
    # at each decision the target is ceil(rate / 3) + 1 for the rate of the last 50 s
    assert tl["serving"].min() >= 1 and tl["serving"].max() <= 8
    peak, trough = day.rates.max(), day.rates.min()
    assert tl["serving"].max() >= math.ceil(peak / 3.0)                    # enough at noon
    assert tl["serving"].min() <= math.ceil(trough / 3.0) + 1              # few at night
    always = sim.simulate(sim.FleetConfig(replicas=[SERVER] * 8, router=sim.LeastLoaded(),
                                          workload=Workload.fixed(n, 400, 60), arrivals=day), seed=0)
    assert tl["replica_seconds"] < 0.8 * always.replica_timeline()["replica_seconds"]
    assert res.slo_attainment(ttft_slo=1.0, tpot_slo=0.05) > 0.95


@pytest.mark.parametrize("policy", [sim.ContinuousBatching(), sim.ChunkedPrefill(token_budget=256),
                                    sim.ContinuousBatching(block_size=16, priority_preemption=True),
                                    sim.ChunkedPrefill(watermark=0.01, priority_preemption=True)])
@pytest.mark.parametrize("speculative", [None, sim.Speculative(num_draft_tokens=3, acceptance_rate=0.6,
                                                                draft_step_time=1e-3)])
def test_the_routers_count_of_outstanding_tokens_returns_to_zero(policy, speculative):
    # every token added at routing (prompt + output) is taken off once it is computed, preemptions
    # (recomputed prompts) included: the least-loaded router's measure does not drift
    from servingmath.simulate.engine import Engine

    small = sim.Server(LLAMA, H100, kv_capacity_tokens=20_000)
    work = chat_workload(600, seed=1).with_priorities(0.3, seed=1).with_shared_prefixes(5, 300, seed=1)
    config = sim.FleetConfig(replicas=[sim.Replica(small, policy, speculative)] * 3, router=sim.LeastLoaded(),
                             workload=work, arrivals=Poisson(40.0))
    engine = Engine(config, 0).run()
    assert sum(engine.preemptions) > 0                 # the case that could drift happened
    assert [inst.work for inst in engine.instances] == [0, 0, 0]


# ---- invariants over random fleets --------------------------------------------------------------------------
routers = st.sampled_from(ROUTERS)
replica_kinds = st.sampled_from([
    sim.Replica(SERVER),
    sim.Replica(SERVER, sim.ChunkedPrefill(token_budget=256, max_batch_size=16)),
    sim.Replica(sim.Server(LLAMA, H100, kv_capacity_tokens=6000), sim.ContinuousBatching(block_size=16,
                                                                                         watermark=0.01)),
    sim.Replica(sim.Server(LLAMA, H100, kv_capacity_tokens=6000), sim.ChunkedPrefill(
        token_budget=128, max_batch_size=8, block_size=16, priority_preemption=True)),
    sim.Replica(SERVER, sim.StaticBatching(batch_size=4, timeout=0.02)),
    sim.Replica(sim.Server(LLAMA, H100, tensor_parallel=2, pipeline_parallel=2), sim.ContinuousBatching()),
    sim.Replica(SERVER, speculative=sim.SpeculativeByLoad(
        sim.Speculative(num_draft_tokens=3, acceptance_rate=0.6, draft_step_time=5e-4), on_below=2, off_above=4)),
])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(replica_kinds, min_size=1, max_size=4), routers, st.integers(5, 40), st.floats(2.0, 200.0),
       st.booleans(), st.integers(0, 3))
def test_invariants_hold_for_random_fleets(replicas, router, n, rate, prefixes, seed):
    rng = np.random.default_rng(seed)
    work = Workload.from_lists(rng.integers(1, 600, n), rng.integers(1, 60, n), rng.integers(0, 2, n))
    if prefixes:
        work = work.with_shared_prefixes(3, 200, fraction=0.7, seed=seed)
    res = sim.simulate(sim.FleetConfig(replicas=replicas, router=router, workload=work,
                                       arrivals=Poisson(rate)), seed=seed)
    r = res.records
    assert np.isfinite(r.finish).all(), "every request finishes"
    assert (r.arrival <= r.scheduled).all() and (r.scheduled <= r.first_token).all()
    assert (r.first_token <= r.finish).all()
    assert ((0 <= r.replica) & (r.replica < len(replicas))).all()
    assert (r.cached_tokens <= r.prompt_len - 1).all() or not prefixes
    for i in range(n):
        times = res.token_times(i)
        assert times[0] == r.first_token[i] and times[-1] == r.finish[i]
        assert (np.diff(times) > 0).all()
        assert times.size <= r.output_len[i]
    for k in range(len(res.instances)):
        ts = res.timeseries(k)
        assert (ts["kv_tokens"] <= res.kv_capacity(k)).all()


# ---- bad input ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, match", [
    (lambda: sim.FleetConfig(replicas=[], workload=Workload.fixed(2, 5, 5), arrivals=Poisson(1.0)), "empty"),
    (lambda: sim.FleetConfig(replicas=SERVER, workload=Workload.fixed(2, 5, 5), arrivals=Poisson(1.0)), "list"),
    (lambda: sim.FleetConfig(replicas=["H100"], workload=Workload.fixed(2, 5, 5), arrivals=Poisson(1.0)),
     r"replicas\[0\]"),
    (lambda: sim.FleetConfig(replicas=[SERVER], workload=Workload.fixed(2, 5, 5), arrivals=Poisson(1.0),
                             router="random"), "router"),
    (lambda: sim.FleetConfig(replicas=[SERVER], workload=Workload.fixed(2, 5, 5), arrivals=ClosedLoop(2),
                             autoscaler=sim.RateScaling(rate_per_replica=5.0)), "ClosedLoop"),
    (lambda: sim.FleetConfig(replicas=[SERVER], workload=Workload.fixed(2, 5, 5), arrivals=Poisson(1.0),
                             autoscaler="scale"), "autoscaler"),
    (lambda: sim.Replica(SERVER, sim.Disaggregated(link_bandwidth=1e9)), "policy"),
    (lambda: sim.Replica(SERVER, sim.StaticBatching(), sim.Speculative(draft_step_time=1e-3)), "Static"),
    (lambda: sim.LeastLoaded(measure="kv"), "measure"),
    (lambda: sim.PrefixAffinity(balance_rel=0.5), "balance_rel"),
    (lambda: sim.PrefixAffinity(balance_abs=-1.0), "balance_abs"),
    (lambda: sim.ScheduledScaling(times=[0.0, 0.0], replicas=[1, 2]), "increase"),
    (lambda: sim.ScheduledScaling(times=[0.0], replicas=[0]), "replicas"),
    (lambda: sim.ScheduledScaling(times=[0.0], replicas=[1], warmup=-1.0), "warmup"),
    (lambda: sim.RateScaling(rate_per_replica=0.0), "rate_per_replica"),
    (lambda: sim.RateScaling(rate_per_replica=1.0, headroom=-1), "headroom"),
    (lambda: sim.FleetConfig.identical(0, SERVER, workload=Workload.fixed(2, 5, 5), arrivals=Poisson(1.0)),
     "n_replicas"),
])
def test_bad_fleets_are_refused_by_name(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_a_request_too_long_for_one_replica_names_it():
    small = sim.Server(LLAMA, H100, kv_capacity_tokens=500)
    config = sim.FleetConfig(replicas=[SERVER, small], workload=Workload.fixed(3, 400, 200),
                             arrivals=Poisson(1.0))
    with pytest.raises(ValueError, match="replica-1"):
        sim.simulate(config, seed=0)
    res = sim.simulate(config.__class__(replicas=[SERVER, SERVER], workload=Workload.fixed(3, 400, 200),
                                        arrivals=Poisson(1.0)), seed=0)
    with pytest.raises(ValueError, match="replica"):
        res.replica_metrics(2)
    assert "2 replicas" in repr(res)


def test_identical_builds_n_copies():
    config = sim.FleetConfig.identical(3, SERVER, policy=sim.ChunkedPrefill(), workload=Workload.fixed(2, 5, 5),
                                       arrivals=Timestamps([0.0, 0.1]), router=sim.Random())
    assert len(config.replicas) == 3 and config.replicas[0].policy == sim.ChunkedPrefill()
